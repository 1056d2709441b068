// Device graphs in the executor, tested on the CPU: the capture rule
// (runtime/graph_capture.h) on hand-made step lists, and the executor's
// capture / replay path through a backend registered here, "replaying", on
// a third host device (cpu:2) whose context supports capture the way a CUDA
// stream does: between BeginCapture and EndCapture its rows record their
// work (on the buffers they were given) instead of running it, and Replay
// runs the recording. Outputs computed at capture time are poisoned, so a
// run that forgot to replay, or a graph that read an input buffer other
// than the one the executor refills, gives wrong values.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>

#include "kernels/backend.h"
#include "kernels/registry.h"
#include "runtime/graph_capture.h"
#include "sparq/calibrate.h"
#include "sparq/evaluate.h"
#include "sparq/executor.h"
#include "tests/runtime/digits_batches.h"
#include "sparq/npy.h"
#include "sparq/onnx_io.h"
#include "sparq/quantize.h"

namespace sparq {
namespace {

using Kind = CaptureStep::Kind;

CaptureStep MakeStep(Kind kind, std::vector<int> in, std::vector<int> out, int place = 0) {
  CaptureStep s;
  s.kind = kind;
  s.place = place;
  s.label = "step";
  s.inputs = std::move(in);
  s.outputs = std::move(out);
  return s;
}

// x (slot 0, graph input) -> upload (1) -> node -> y (2) -> node -> z (3) -> download (4); w (5): a constant.
CaptureLayout Chain() {
  CaptureLayout l;
  l.context_supports_capture = true;
  l.steps = {MakeStep(Kind::kUpload, {0}, {1}), MakeStep(Kind::kNode, {1, 5}, {2}), MakeStep(Kind::kNode, {2}, {3}),
             MakeStep(Kind::kDownload, {3}, {4})};
  l.graph_input = {true, false, false, false, false, false};
  l.constant = {false, false, false, false, false, true};
  l.on_device = {false, true, true, true, false, false};
  l.slot_name = {"x", "x@dev", "y", "z", "z@host", "w"};
  return l;
}

TEST(GraphCaptureRule, AcceptsUploadsNodesDownloads) { EXPECT_TRUE(CheckCapturable(Chain()).ok()); }

TEST(GraphCaptureRule, DeclinesWithReasons) {
  CaptureLayout l = Chain();
  l.context_supports_capture = false;
  EXPECT_NE(CheckCapturable(l).message().find("does not capture"), std::string::npos);

  l = Chain();
  l.steps[2].place = 1;  // a node left to the CPU
  EXPECT_NE(CheckCapturable(l).message().find("runs on the CPU"), std::string::npos);

  l = Chain();
  l.steps[1].inputs = {1, 0};  // the graph input read on the host
  EXPECT_EQ(CheckCapturable(l).code(), StatusCode::kNotSupported);
  EXPECT_NE(CheckCapturable(l).message().find("'x'"), std::string::npos);

  l = Chain();  // a value brought to the host in the middle of the run, for a node
  l.steps.insert(l.steps.begin() + 2, MakeStep(Kind::kDownload, {2}, {4}));
  l.steps[3].inputs = {2, 4};
  EXPECT_NE(CheckCapturable(l).message().find("later node"), std::string::npos);

  l = Chain();  // an upload of a value the run computed on the host
  l.steps[0].inputs = {4};
  EXPECT_NE(CheckCapturable(l).message().find("uploads"), std::string::npos);

  l = Chain();
  l.steps = {MakeStep(Kind::kUpload, {0}, {1}), MakeStep(Kind::kDownload, {1}, {4})};
  EXPECT_NE(CheckCapturable(l).message().find("no node"), std::string::npos);
}

// ---------------------------------------------------------------------------
// "replaying": every op of the CPU rows, on cpu:2, with capture.

const std::string kDigits = std::string(SPARQ_SOURCE_DIR) + "/examples/digits/";
const Device kThirdHost{DeviceType::kCpu, 2};

class ReplayingContext : public BackendContext {
 public:
  Device device() const override { return kThirdHost; }
  StatusOr<std::shared_ptr<uint8_t>> Allocate(size_t bytes) override {
    Tensor t = Tensor::Uninitialized(DataType::kUInt8, {static_cast<int64_t>(bytes)});
    auto* data = static_cast<uint8_t*>(t.raw_data());
    std::shared_ptr<uint8_t> buffer(std::make_shared<Tensor>(std::move(t)), data);
    if (capturing) held.push_back(buffer);
    return buffer;
  }
  Status CopyFromHost(const void* host, void* device, size_t bytes) override {
    if (capturing) return Status::Internal("an upload inside the capture");
    if (bytes > 0) std::memcpy(device, host, bytes);
    return Status::OK();
  }
  Status CopyToHost(const void* device, void* host, size_t bytes) override {
    if (capturing) return Status::NotSupported("CopyToHost inside a capture");
    if (bytes > 0) std::memcpy(host, device, bytes);
    return Status::OK();
  }
  bool SupportsGraphCapture() const override { return true; }
  Status BeginCapture() override {
    if (capturing) return Status::Internal("nested capture");
    capturing = true;
    recorded.clear();
    held.clear();
    return Status::OK();
  }
  struct Graph {
    std::vector<std::function<Status()>> work;
    std::vector<std::shared_ptr<uint8_t>> held;
  };
  StatusOr<std::shared_ptr<void>> EndCapture() override {
    capturing = false;
    auto g = std::make_shared<Graph>();
    g->work = std::move(recorded);
    g->held = std::move(held);
    ++captures;
    return std::shared_ptr<void>(g);
  }
  void AbortCapture() override {
    capturing = false;
    recorded.clear();
    held.clear();
    ++aborts;
  }
  Status Replay(const void* graph) override {
    for (const auto& work : static_cast<const Graph*>(graph)->work) SPARQ_RETURN_IF_ERROR(work());
    ++replays;
    return Status::OK();
  }

  bool capturing = false;
  std::vector<std::function<Status()>> recorded;
  std::vector<std::shared_ptr<uint8_t>> held;
  int captures = 0, replays = 0, aborts = 0;
  std::string fail_capture_of;  // an op type whose row fails while capturing
};

struct Wrapped {
  const KernelDef* row;
  std::shared_ptr<const void> state;
};

// Runs the CPU row on inputs (as they are now) and writes its outputs into
// cpu:2 buffers: the work a device kernel would do.
Status RunRowInto(const Node& node, int64_t opset, const Wrapped& w, const std::vector<Tensor>& inputs,
                  std::vector<Tensor>* outputs, OpContext* allocate_in) {
  std::vector<const Tensor*> ins;
  for (const Tensor& t : inputs) ins.push_back(t.defined() ? &t : nullptr);
  OpContext inner(node, opset, std::move(ins), static_cast<ThreadPool*>(nullptr));
  inner.set_prepared(w.state.get());
  SPARQ_RETURN_IF_ERROR(w.row->fn(inner));
  for (size_t k = 0; k < inner.outputs().size(); ++k) {
    const Tensor& t = inner.outputs()[k];
    if (!t.defined()) continue;
    if (allocate_in != nullptr) {
      SPARQ_ASSIGN_OR_RETURN(Tensor * out, allocate_in->AllocateOutput(k, t.dtype(), t.shape()));
      (*outputs)[k] = *out;
    }
    if ((*outputs)[k].nbytes() != t.nbytes()) return Status::Internal("replayed output changed size");
    if (t.nbytes() > 0) std::memcpy((*outputs)[k].raw_data(), t.raw_data(), t.nbytes());
  }
  return Status::OK();
}

Status RunOrRecord(OpContext& ctx) {
  const auto& w = *static_cast<const Wrapped*>(ctx.prepared());
  auto* context = dynamic_cast<ReplayingContext*>(ctx.backend_context());
  if (context == nullptr) return ctx.Internal("not on the replaying backend");
  std::vector<Tensor> inputs(ctx.num_inputs());
  for (size_t i = 0; i < ctx.num_inputs(); ++i)
    if (ctx.has_input(i)) inputs[i] = ctx.input(i);
  std::vector<Tensor> outputs(ctx.num_outputs());
  SPARQ_RETURN_IF_ERROR(RunRowInto(ctx.node(), ctx.opset(), w, inputs, &outputs, &ctx));
  if (!context->capturing) return Status::OK();
  if (ctx.node().op_type == context->fail_capture_of) return ctx.NotSupported("needs the host");
  // Capturing: nothing "ran"; poison what the capture computed and record the work.
  for (Tensor& t : outputs)
    if (t.defined() && t.nbytes() > 0) std::memset(t.raw_data(), 0xff, t.nbytes());
  const Node* node = &ctx.node();
  const int64_t opset = ctx.opset();
  const Wrapped* row = &w;
  context->recorded.push_back([node, opset, row, inputs, outputs]() mutable {
    return RunRowInto(*node, opset, *row, inputs, &outputs, nullptr);
  });
  return Status::OK();
}

class ReplayingBackend : public Backend {
 public:
  explicit ReplayingBackend(const std::set<std::string>& ops) {
    for (const std::string& op : ops)
      for (const std::string domain : {"", kSparqDomain})
        for (const KernelDef* row : KernelRegistry::Default().FindAll(op, domain)) {
          KernelDef def = *row;
          def.fn = RunOrRecord;
          def.name = "replaying:" + row->name;
          PrepareFn inner = row->prepare;
          def.prepare = [row, inner](const Node& n, const std::vector<const Tensor*>& constants,
                                     const PrepareContext& context) -> StatusOr<PreparedKernel> {
            PreparedKernel prepared;
            if (inner) {
              SPARQ_ASSIGN_OR_RETURN(prepared, inner(n, constants, context));
            }
            auto w = std::make_shared<Wrapped>(Wrapped{row, std::move(prepared.state)});
            return PreparedKernel{std::move(w), ""};
          };
          rows_.Add(std::move(def));
        }
  }
  std::string name() const override { return "replaying"; }
  Device device() const override { return kThirdHost; }
  const KernelRegistry& rows() const override { return rows_; }
  StatusOr<std::shared_ptr<BackendContext>> CreateContext(const BackendOptions&) const override {
    auto context = std::make_shared<ReplayingContext>();
    last_context = context;
    return std::shared_ptr<BackendContext>(context);
  }
  mutable std::shared_ptr<ReplayingContext> last_context;

 private:
  KernelRegistry rows_;
};

// Every op of the CPU rows (the deployment profile's fused ones included).
ReplayingBackend* RegisterReplayingOnce(const Model&) {
  static ReplayingBackend* registered = [&] {
    std::set<std::string> ops;
    for (const std::string& op : KernelRegistry::Default().OpTypes()) ops.insert(op);
    for (const char* op : {"Attention", "ConcatLut", "DequantizeConcat", "FusedConv", "GeluErfChain", "HardSwishChain",
                           "LayerNormChain", "MatMulIntegerToFloat", "PointwiseDepthwise", "QLinearAdd", "QLinearConvLut", "QLinearLut",
                           "QLinearMul", "Silu"})
      ops.insert(op);  // sparq's fused operators
    auto backend = std::make_shared<ReplayingBackend>(ops);
    EXPECT_TRUE(RegisterBackend(backend).ok());
    return backend.get();
  }();
  return registered;
}

// The same model on the CPU and on the replaying backend, one thread each.
struct ExecutorPair {
  std::unique_ptr<Executor> cpu, replaying;
  ExecutorOptions options;  // the replaying one's
};

StatusOr<ExecutorPair> MakePair(const Model& model, std::optional<GraphProfile> profile = std::nullopt) {
  ExecutorPair pair;
  ExecutorOptions cpu_options;
  cpu_options.threads = 1;
  if (profile) cpu_options.profile = *profile;
  pair.options = cpu_options;
  pair.options.backend = "replaying";
  SPARQ_ASSIGN_OR_RETURN(pair.cpu, Executor::Create(model, cpu_options));
  SPARQ_ASSIGN_OR_RETURN(pair.replaying, Executor::Create(model, pair.options));
  return pair;
}

void ExpectEqualMaps(const TensorMap& want, const TensorMap& got, const std::string& what) {
  ASSERT_EQ(want.size(), got.size()) << what;
  for (const auto& [name, t] : want) {
    ASSERT_TRUE(got.count(name)) << what << ": " << name;
    EXPECT_TRUE(got.at(name).device() == Device{}) << what << ": " << name;
    EXPECT_TRUE(got.at(name).Equals(t)) << what << ": " << name;
  }
}

TEST(GraphCapture, ReplaysGiveThePlainRunsBits) {
  auto model = LoadModel(kDigits + "digits_cnn.onnx");
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  ReplayingBackend* backend = RegisterReplayingOnce(*model);
  auto pair = MakePair(*model);
  ASSERT_TRUE(pair.ok()) << pair.status().ToString();
  Executor* cpu = pair->cpu.get();
  Executor* exec = pair->replaying.get();
  std::shared_ptr<ReplayingContext> context = backend->last_context;
  EXPECT_EQ(exec->GraphCapture().why_not, "");
  EXPECT_NE(cpu->GraphCapture().why_not, "");
  for (const NodeKernel& k : exec->NodeKernels())
    if (k.kernel != "copy") {
      EXPECT_EQ(k.backend, "replaying") << k.node;
    }

  // Five batches of 8 (run 1 plain, 2 captures and replays, 3-5 replay), then
  // batches of 3 (new shapes: plain, capture, replay).
  std::vector<TensorMap> feeds = testing::DigitsBatches(*model, 5, 8);
  for (const TensorMap& f : testing::DigitsBatches(*model, 3, 3)) feeds.push_back(f);
  for (size_t i = 0; i < feeds.size(); ++i) {
    TensorMap want, got;
    ASSERT_TRUE(cpu->Run(feeds[i], &want).ok());
    Status st = exec->Run(feeds[i], &got);
    ASSERT_TRUE(st.ok()) << st.ToString();
    ExpectEqualMaps(want, got, "run " + std::to_string(i));
  }
  const GraphCaptureInfo info = exec->GraphCapture();
  EXPECT_EQ(info.captured, 2);
  EXPECT_EQ(info.replays, 4 + 2);
  EXPECT_TRUE(info.declined.empty());
  EXPECT_EQ(context->captures, 2);
  EXPECT_EQ(context->replays, 6);

  // A profiled run, or one with extra outputs, runs node by node, with the same bits.
  TensorMap want, got;
  ASSERT_TRUE(cpu->Run(feeds[0], &want).ok());
  std::vector<NodeProfile> profile;
  ASSERT_TRUE(exec->Run(feeds[0], &got, {}, &profile).ok());
  ExpectEqualMaps(want, got, "profiled");
  EXPECT_FALSE(profile.empty());
  EXPECT_EQ(context->replays, 6);
}

TEST(GraphCapture, Int8DeploymentReplaysGiveTheCpusBits) {
  auto model = LoadModel(kDigits + "digits_cnn.onnx");
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  RegisterReplayingOnce(*model);
  std::vector<TensorMap> calib = testing::DigitsBatches(*model, 4, 8);
  size_t next = 0;
  CalibrationOptions copt;
  copt.method = CalibrationMethod::kMax;
  copt.threads = 1;
  auto table = Calibrate(*model, [&](TensorMap* batch) -> StatusOr<bool> {
    if (next == calib.size()) return false;
    *batch = calib[next++];
    return true;
  }, copt);
  ASSERT_TRUE(table.ok()) << table.status().ToString();
  auto qdq = QuantizeModel(*model, *table, QuantizeOptions{}, nullptr);
  ASSERT_TRUE(qdq.ok()) << qdq.status().ToString();
  auto pair = MakePair(*qdq, GraphProfile::kDeployment);
  ASSERT_TRUE(pair.ok()) << pair.status().ToString();
  Executor* cpu = pair->cpu.get();
  Executor* exec = pair->replaying.get();
  ASSERT_EQ(exec->GraphCapture().why_not, "");
  int i = 0;
  for (const TensorMap& feed : testing::DigitsBatches(*qdq, 4, 5)) {
    TensorMap want, got;
    ASSERT_TRUE(cpu->Run(feed, &want).ok());
    Status st = exec->Run(feed, &got);
    ASSERT_TRUE(st.ok()) << st.ToString();
    ExpectEqualMaps(want, got, "int8 run " + std::to_string(i++));
  }
  EXPECT_EQ(exec->GraphCapture().captured, 1);
  EXPECT_EQ(exec->GraphCapture().replays, 3);
}

TEST(GraphCapture, FailedCaptureRunsPlainlyWithAReason) {
  auto model = LoadModel(kDigits + "digits_cnn.onnx");
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  ReplayingBackend* backend = RegisterReplayingOnce(*model);
  auto pair = MakePair(*model);
  ASSERT_TRUE(pair.ok()) << pair.status().ToString();
  Executor* cpu = pair->cpu.get();
  Executor* exec = pair->replaying.get();
  ExecutorOptions options = pair->options;
  std::shared_ptr<ReplayingContext> context = backend->last_context;
  context->fail_capture_of = model->graph.nodes.back().op_type;
  for (const TensorMap& feed : testing::DigitsBatches(*model, 4, 8)) {
    TensorMap want, got;
    ASSERT_TRUE(cpu->Run(feed, &want).ok());
    Status st = exec->Run(feed, &got);
    ASSERT_TRUE(st.ok()) << st.ToString();
    ExpectEqualMaps(want, got, "after a failed capture");
  }
  const GraphCaptureInfo info = exec->GraphCapture();
  EXPECT_EQ(info.captured, 0);
  EXPECT_EQ(info.replays, 0);
  ASSERT_EQ(info.declined.size(), 1u);
  EXPECT_NE(info.declined[0].find("needs the host"), std::string::npos) << info.declined[0];
  EXPECT_EQ(context->aborts, 1);

  // cuda_graphs off: never captured.
  options.cuda_graphs = false;
  auto off = Executor::Create(*model, options);
  ASSERT_TRUE(off.ok());
  EXPECT_NE((*off)->GraphCapture().why_not.find("cuda_graphs is off"), std::string::npos);
  for (const TensorMap& feed : testing::DigitsBatches(*model, 3, 8)) {
    TensorMap got;
    ASSERT_TRUE((*off)->Run(feed, &got).ok());
  }
  EXPECT_EQ(backend->last_context->captures, 0);
}

TEST(GraphCapture, EvalReportSaysHowGraphsWereUsed) {
  auto model = LoadModel(kDigits + "digits_cnn.onnx");
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  RegisterReplayingOnce(*model);
  EvalOptions options;
  options.inputs = kDigits + "eval.npz";
  options.backend = "replaying";
  options.batch = 4;
  options.limit = 24;  // six batches of 4: plain, capture, four replays (plus the reference-free warm-up counts)
  options.threads = 1;
  auto report = Evaluate(kDigits + "digits_cnn.onnx", options);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_EQ(report->graphs.why_not, "");
  EXPECT_EQ(report->graphs.captured, 1);
  EXPECT_EQ(report->graphs.replays, 5);
  EXPECT_NE(report->ToJson().find("\"cuda_graphs\""), std::string::npos);
  EXPECT_NE(report->ToText().find("5 runs replayed, 1 graph"), std::string::npos) << report->ToText();

  options.backend = "cpu";
  auto cpu = Evaluate(kDigits + "digits_cnn.onnx", options);
  ASSERT_TRUE(cpu.ok()) << cpu.status().ToString();
  EXPECT_EQ(cpu->ToJson().find("cuda_graphs"), std::string::npos);
}

}  // namespace
}  // namespace sparq
