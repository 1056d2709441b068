// The backend seam (kernels/backend.h) with a backend added by a test alone:
// "counting" lives on a second host device (cpu:1), takes only some ops (it
// runs them by the CPU rows and counts the calls) and leaves the rest to the
// CPU, so the executor must partition the graph and copy values between the
// two devices. Nothing in runtime/ or kernels/cpu knows about it.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <mutex>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "kernels/backend.h"
#include "kernels/ref/quantize.h"
#include "kernels/registry.h"
#include "sparq/calibrate.h"
#include "sparq/dataset.h"
#include "sparq/executor.h"
#include "tests/runtime/digits_batches.h"
#include "sparq/npy.h"
#include "sparq/onnx_io.h"
#include "sparq/quantize.h"

namespace sparq {
namespace {

const std::string kDigits = std::string(SPARQ_SOURCE_DIR) + "/examples/digits/";
const Device kSecondHost{DeviceType::kCpu, 1};

std::atomic<int64_t> g_counted_calls{0};

// Host memory labelled cpu:1, so that values there are not the CPU's.
class CountingContext : public BackendContext {
 public:
  Device device() const override { return kSecondHost; }
  StatusOr<std::shared_ptr<uint8_t>> Allocate(size_t bytes) override {
    Tensor t = Tensor::Uninitialized(DataType::kUInt8, {static_cast<int64_t>(bytes)});
    auto* data = static_cast<uint8_t*>(t.raw_data());
    return std::shared_ptr<uint8_t>(std::make_shared<Tensor>(std::move(t)), data);
  }
  Status CopyFromHost(const void* host, void* device, size_t bytes) override {
    if (bytes > 0) std::memcpy(device, host, bytes);
    ++copies;
    return Status::OK();
  }
  Status CopyToHost(const void* device, void* host, size_t bytes) override {
    if (bytes > 0) std::memcpy(host, device, bytes);
    ++copies;
    return Status::OK();
  }
  std::atomic<int64_t> copies{0};
};

// A CountingContext that also reduces calibration's statistics where its
// values live (BackendContext::MinMaxF32 / AbsHistogramF32, by the reference
// functions on its cpu:1 memory), as the CUDA context does on the GPU.
std::atomic<int64_t> g_stats_calls{0};
class BinningContext : public CountingContext {
 public:
  bool HasCalibrationStats() const override { return true; }
  Status MinMaxF32(const Tensor& t, float* lo, float* hi) override {
    if (t.device() != device()) return Status::InvalidArgument("MinMaxF32: not on cpu:1");
    MinMaxRef(static_cast<const float*>(t.raw_data()), t.numel(), lo, hi);
    ++g_stats_calls;
    return Status::OK();
  }
  StatusOr<int64_t> AbsHistogramF32(const Tensor& t, double scale, int64_t last, int64_t* counts) override {
    if (t.device() != device()) return Status::InvalidArgument("AbsHistogramF32: not on cpu:1");
    ++g_stats_calls;
    return AbsHistogramRef(static_cast<const float*>(t.raw_data()), t.numel(), scale, last, counts);
  }
};

// A CPU row run on cpu:1: the row's own state, and the row.
struct Wrapped {
  const KernelDef* row;
  std::shared_ptr<const void> state;
};

// Runs the wrapped CPU row on the host, then moves its outputs into cpu:1
// buffers (as a device kernel writes its outputs where its backend lives).
Status RunWrapped(OpContext& ctx) {
  const auto& w = *static_cast<const Wrapped*>(ctx.prepared());
  std::vector<const Tensor*> inputs;
  for (size_t i = 0; i < ctx.num_inputs(); ++i) inputs.push_back(ctx.has_input(i) ? &ctx.input(i) : nullptr);
  OpContext inner(ctx.node(), ctx.opset(), std::move(inputs), static_cast<ThreadPool*>(nullptr));
  inner.set_prepared(w.state.get());
  SPARQ_RETURN_IF_ERROR(w.row->fn(inner));
  for (size_t k = 0; k < inner.outputs().size(); ++k) {
    const Tensor& t = inner.outputs()[k];
    if (!t.defined()) continue;
    SPARQ_ASSIGN_OR_RETURN(Tensor * out, ctx.AllocateOutput(k, t.dtype(), t.shape()));
    if (t.nbytes() > 0) std::memcpy(out->raw_data(), t.raw_data(), t.nbytes());
  }
  ++g_counted_calls;
  return Status::OK();
}

// Which nodes the test backend takes, by the types the executor tells its
// prepare steps (PrepareContext::input_types); null: every node of its ops.
using TypeRule = bool (*)(const std::vector<DataType>& input_types);

class CountingBackend : public Backend {
 public:
  explicit CountingBackend(std::set<std::string> ops, std::string name = "counting", TypeRule rule = nullptr,
                           bool calibration_stats = false)
      : name_(std::move(name)), calibration_stats_(calibration_stats) {
    // Every CPU row of the chosen ops, wrapped, at its own priority.
    for (const std::string& op : ops)
      for (const std::string domain : {"", kSparqDomain})
        for (const KernelDef* row : KernelRegistry::Default().FindAll(op, domain)) {
          KernelDef def = *row;
          def.fn = RunWrapped;
          def.name = "counting:" + row->name;
          PrepareFn inner = row->prepare;
          def.prepare = [row, inner, rule](const Node& n, const std::vector<const Tensor*>& constants,
                                           const PrepareContext& context) -> StatusOr<PreparedKernel> {
            if (rule != nullptr && !rule(context.input_types)) return Status::NotSupported("input types");
            PreparedKernel prepared;
            if (inner) {
              SPARQ_ASSIGN_OR_RETURN(prepared, inner(n, constants, context));
            }
            auto w = std::make_shared<Wrapped>(Wrapped{row, std::move(prepared.state)});
            return PreparedKernel{std::move(w), prepared.kernel_name.empty() ? "" : "counting:" + prepared.kernel_name};
          };
          rows_.Add(std::move(def));
        }
  }
  std::string name() const override { return name_; }
  Device device() const override { return kSecondHost; }
  const KernelRegistry& rows() const override { return rows_; }
  StatusOr<std::shared_ptr<BackendContext>> CreateContext(const BackendOptions&) const override {
    if (calibration_stats_) return std::shared_ptr<BackendContext>(std::make_shared<BinningContext>());
    return std::shared_ptr<BackendContext>(std::make_shared<CountingContext>());
  }

 private:
  std::string name_;
  bool calibration_stats_ = false;
  KernelRegistry rows_;
};

void RegisterCountingOnce() {
  static bool registered = [] {
    // Convolutions, MatMuls and the integer ones run here; Relu, pooling,
    // reshapes and the QDQ glue stay on the CPU: values cross both ways.
    auto backend = std::make_shared<CountingBackend>(std::set<std::string>{
        "Conv", "FusedConv", "Gemm", "MatMul", "QLinearConv", "QLinearMatMul", "QLinearConvLut", "Add"});
    EXPECT_TRUE(RegisterBackend(backend).ok());
    return true;
  }();
  (void)registered;
}


Model Int8Digits(const Model& model) {
  std::vector<TensorMap> feeds = testing::DigitsBatches(model, 4, 8);
  size_t next = 0;
  CalibrationOptions copt;
  copt.method = CalibrationMethod::kMax;
  copt.threads = 1;
  auto table = Calibrate(model, [&](TensorMap* batch) -> StatusOr<bool> {
    if (next == feeds.size()) return false;
    *batch = feeds[next++];
    return true;
  }, copt);
  EXPECT_TRUE(table.ok()) << table.status().ToString();
  auto qdq = QuantizeModel(model, *table, QuantizeOptions{}, nullptr);
  EXPECT_TRUE(qdq.ok()) << qdq.status().ToString();
  return qdq.ok() ? *qdq : model;
}

// Runs `model` on the CPU and on "counting" with `profile` over `feeds` and
// expects the same bytes from both and counted calls; with `partitioned`,
// copies between the devices in the outer graph too (a graph whose counted
// nodes all sit in subgraphs has them there).
void ExpectSameAsCpu(const Model& model, GraphProfile profile, const std::vector<TensorMap>& feeds,
                     bool partitioned = true) {
  RegisterCountingOnce();
  ExecutorOptions cpu_options;
  cpu_options.threads = 2;
  cpu_options.profile = profile;
  ExecutorOptions counting_options = cpu_options;
  counting_options.backend = "counting";
  auto cpu = Executor::Create(model, cpu_options);
  auto counting = Executor::Create(model, counting_options);
  ASSERT_TRUE(cpu.ok()) << cpu.status().ToString();
  ASSERT_TRUE(counting.ok()) << counting.status().ToString();
  EXPECT_EQ((*counting)->backend(), "counting");

  std::set<std::string> backends;
  int copies = 0;
  for (const NodeKernel& k : (*counting)->NodeKernels()) {
    backends.insert(k.backend);
    if (k.kernel == "copy") ++copies;
  }
  if (partitioned) {
    EXPECT_EQ(backends, (std::set<std::string>{"counting", "cpu"}));
    EXPECT_GT(copies, 0) << "the graph was not partitioned";
  }

  const int64_t calls_before = g_counted_calls.load();
  for (const TensorMap& feed : feeds) {
    TensorMap want, got;
    ASSERT_TRUE((*cpu)->Run(feed, &want).ok());
    Status st = (*counting)->Run(feed, &got);
    ASSERT_TRUE(st.ok()) << st.ToString();
    ASSERT_EQ(want.size(), got.size());
    for (const auto& [name, t] : want) {
      ASSERT_TRUE(got.count(name)) << name;
      EXPECT_TRUE(got.at(name).device() == Device{}) << name << " was not copied back to the host";
      EXPECT_TRUE(got.at(name).Equals(t)) << name;
    }
  }
  EXPECT_GT(g_counted_calls.load(), calls_before);
}

TEST(BackendSeam, TestBackendRunsFloatModelWithCopies) {
  auto model = LoadModel(kDigits + "digits_cnn.onnx");
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  ExpectSameAsCpu(*model, GraphProfile::kAsWritten, testing::DigitsBatches(*model, 3, 8));
  ExpectSameAsCpu(*model, GraphProfile::kDeployment, testing::DigitsBatches(*model, 3, 8));
}

TEST(BackendSeam, TestBackendRunsInt8ModelWithCopies) {
  auto model = LoadModel(kDigits + "digits_cnn.onnx");
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  const Model int8 = Int8Digits(*model);
  ExpectSameAsCpu(int8, GraphProfile::kDeployment, testing::DigitsBatches(int8, 3, 8));
}

// The real-model suite (tools/make_real_suite.py: <name>/model.onnx,
// calib.npz, meta.json): $SPARQ_REAL_SUITE_DIR, else the build's
// models/real, else the CI slice that tests/python/test_real_suite.py makes
// (models/real_ci). "" when none holds a model.
std::string RealSuiteDir(std::string* looked) {
  std::vector<std::string> candidates;
  if (const char* env = std::getenv("SPARQ_REAL_SUITE_DIR"); env != nullptr && env[0] != '\0') {
    candidates.push_back(env);
  }
  candidates.push_back(std::string(SPARQ_BINARY_DIR) + "/models/real");
  candidates.push_back(std::string(SPARQ_BINARY_DIR) + "/models/real_ci");
  for (const std::string& dir : candidates) {
    *looked += (looked->empty() ? "" : ", ") + dir;
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator(dir, ec))
      if (std::filesystem::exists(entry.path() / "model.onnx")) return dir;
  }
  return "";
}

// The first `batches` batches of 2 samples of a suite model's calibration
// data, with the inputs its meta.json pins (Silero VAD's sample rate).
std::vector<TensorMap> SuiteBatches(const std::string& dir, const Model& model, int batches) {
  DatasetOptions options;
  options.batch_size = 2;
  options.limit = 2 * batches;
  std::ifstream meta_file(dir + "/meta.json");
  if (meta_file) {
    nlohmann::json meta = nlohmann::json::parse(meta_file, nullptr, false);
    if (meta.is_object() && meta.contains("constants"))
      for (const auto& [name, value] : meta["constants"].items())
        options.constants[name] = {value.is_array() ? value[0].get<double>() : value.get<double>()};
  }
  std::vector<TensorMap> feeds;
  auto data = OpenDataset(dir + "/calib.npz", model.graph, options);
  EXPECT_TRUE(data.ok()) << dir << ": " << data.status().ToString();
  if (!data.ok()) return feeds;
  BatchFn next = (*data)();
  for (;;) {
    TensorMap batch;
    StatusOr<bool> more = next(&batch);
    EXPECT_TRUE(more.ok()) << dir << ": " << more.status().ToString();
    if (!more.ok() || !*more) break;
    feeds.push_back(std::move(batch));
  }
  return feeds;
}

// Done-when 1 of issue 22 on the real models: every model of the suite, FP32
// (as written and as deployed) and INT8 (QDQ from a max calibration on two
// batches, as deployed), runs through the test backend, partitioned with
// copies, with the CPU's outputs bit for bit.
TEST(BackendSeam, TestBackendRunsTheRealSuiteWithCopies) {
  std::string looked;
  const std::string suite = RealSuiteDir(&looked);
  if (suite.empty()) GTEST_SKIP() << "no real-model suite (tools/make_real_suite.py) in " << looked;
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(suite))
    if (std::filesystem::exists(entry.path() / "model.onnx")) names.push_back(entry.path().filename().string());
  std::sort(names.begin(), names.end());
  for (const std::string& name : names) {
    SCOPED_TRACE(name);
    const std::string dir = suite + "/" + name;
    auto model = LoadModel(dir + "/model.onnx");
    ASSERT_TRUE(model.ok()) << model.status().ToString();
    if (Status supported = CheckSupported(*model); !supported.ok()) {  // the CPU cannot run it either
      std::cout << "[ SKIPPED  ] " << name << ": " << supported.ToString().substr(0, 200) << "\n";
      continue;
    }
    const std::vector<TensorMap> feeds = SuiteBatches(dir, *model, 2);
    ASSERT_FALSE(feeds.empty());
    // Silero VAD's convolutions are all inside its If's branches: the outer
    // graph runs on the CPU, the branches' executors partition.
    bool outer_counted = false;
    for (const Node& n : model->graph.nodes)
      outer_counted |= n.op_type == "Conv" || n.op_type == "MatMul" || n.op_type == "Gemm" || n.op_type == "Add";
    ExpectSameAsCpu(*model, GraphProfile::kAsWritten, {feeds[0]}, outer_counted);
    ExpectSameAsCpu(*model, GraphProfile::kDeployment, feeds, outer_counted);
    size_t next = 0;
    CalibrationOptions copt;
    copt.method = CalibrationMethod::kMax;
    copt.threads = 2;
    auto table = Calibrate(*model, [&](TensorMap* batch) -> StatusOr<bool> {
      if (next == feeds.size()) return false;
      *batch = feeds[next++];
      return true;
    }, copt);
    ASSERT_TRUE(table.ok()) << table.status().ToString();
    auto int8 = QuantizeModel(*model, *table, QuantizeOptions{}, nullptr);
    ASSERT_TRUE(int8.ok()) << int8.status().ToString();
    ExpectSameAsCpu(*int8, GraphProfile::kDeployment, feeds, outer_counted);
    std::cout << "[       OK ] " << name << ": FP32 (as written, deployed) and INT8 as the CPU's\n";
  }
}

// Prepare steps see each input's type where the graph says it: a backend
// that takes only float32 Adds gets the float Add, and the int64 Add (whose
// inputs are a graph input and an initializer) is partitioned to the CPU at
// Create instead of failing when it runs; the values of a rewrite-free graph
// inside are typed by shape inference's value_info.
TEST(BackendSeam, PrepareStepsSeeInputTypesAndDeclineByThem) {
  static bool registered = [] {
    auto backend = std::make_shared<CountingBackend>(
        std::set<std::string>{"Add"}, "float_adds",
        [](const std::vector<DataType>& types) {
          for (DataType t : types)
            if (t != DataType::kFloat32) return false;
          return !types.empty();
        });
    EXPECT_TRUE(RegisterBackend(backend).ok());
    return true;
  }();
  (void)registered;
  Model m;
  m.opset_imports = {{"", 13}};
  ValueInfo f{"f", DataType::kFloat32}, i{"i", DataType::kInt64};
  m.graph.inputs = {f, i};
  m.graph.outputs = {ValueInfo{"f2", DataType::kFloat32}, ValueInfo{"i2", DataType::kInt64}};
  m.graph.value_info = {ValueInfo{"f1", DataType::kFloat32}};
  m.graph.initializers["one"] = Tensor::Scalar<int64_t>(1);
  m.graph.nodes.push_back({"add_f", "Add", "", {"f", "f"}, {"f1"}, {}, ""});
  m.graph.nodes.push_back({"add_f1", "Add", "", {"f1", "f"}, {"f2"}, {}, ""});
  m.graph.nodes.push_back({"add_i", "Add", "", {"i", "one"}, {"i2"}, {}, ""});
  ExecutorOptions options;
  options.backend = "float_adds";
  auto exec = Executor::Create(m, options);
  ASSERT_TRUE(exec.ok()) << exec.status().ToString();
  std::map<std::string, std::string> placed;
  for (const NodeKernel& k : (*exec)->NodeKernels()) placed[k.node] = k.backend;
  EXPECT_EQ(placed["add_f"], "float_adds");
  EXPECT_EQ(placed["add_f1"], "float_adds");
  EXPECT_EQ(placed["add_i"], "cpu");
  TensorMap out;
  ASSERT_TRUE((*exec)->Run({{"f", Tensor::Scalar<float>(1.5f)}, {"i", Tensor::Scalar<int64_t>(41)}}, &out).ok());
  EXPECT_EQ(out.at("f2").data<float>()[0], 4.5f);
  EXPECT_EQ(out.at("i2").data<int64_t>()[0], 42);
}

TEST(BackendSeam, NamesAndErrors) {
  RegisterCountingOnce();
  std::vector<std::string> names = BackendNames();
  for (const char* want : {"cpu", "reference", "counting"})
    EXPECT_NE(std::find(names.begin(), names.end(), want), names.end()) << want;
  EXPECT_EQ(RegisterBackend(std::make_shared<CountingBackend>(std::set<std::string>{})).code(),
            StatusCode::kInvalidArgument);  // the name is taken
  EXPECT_EQ(ResolveBackend("tpu").status().code(), StatusCode::kInvalidArgument);
  std::string note;
  auto any = ResolveBackend("auto", &note);
  ASSERT_TRUE(any.ok());
  EXPECT_FALSE(note.empty());
  if (FindBackend("cuda") == nullptr || !FindBackend("cuda")->Available().ok()) {
    EXPECT_EQ((*any)->name(), "cpu") << note;
    // A recipe or command asking for cuda where it cannot run is an error
    // at run time, naming why.
    StatusOr<const Backend*> cuda = ResolveBackend("cuda");
    ASSERT_FALSE(cuda.ok());
    EXPECT_NE(cuda.status().message().find("cuda"), std::string::npos) << cuda.status().ToString();
  }
}

TEST(BackendSeam, OneThreadPoolPerThreadCount) {
  auto model = LoadModel(kDigits + "digits_cnn.onnx");
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  ExecutorOptions options;
  options.threads = 2;
  auto a = Executor::Create(*model, options);
  auto b = Executor::Create(*model, options);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(SharedThreadPool(2), SharedThreadPool(2));
  EXPECT_EQ((*a)->num_threads(), 2);
  EXPECT_EQ((*b)->num_threads(), 2);
}

TEST(KernelRows, PrioritiesAreUnambiguous) {
  // Which row runs a node never depends on the order rows were registered in.
  Status st = KernelRegistry::Default().CheckPriorities();
  EXPECT_TRUE(st.ok()) << st.ToString();
  st = KernelRegistry::Reference().CheckPriorities();
  EXPECT_TRUE(st.ok()) << st.ToString();
  for (const std::string& name : BackendNames()) {
    const Backend* b = FindBackend(name);
    st = b->rows().CheckPriorities();
    EXPECT_TRUE(st.ok()) << name << ": " << st.ToString();
  }
}

// RunReferenceKernel (a fast row's fallback) finds the "ref" row of the
// node's op, domain and opset (Reshape's two rows: shape as an attribute
// below opset 5, an input from 5), and names what it cannot find.
TEST(KernelRows, RunReferenceKernelFindsTheRowOfTheOpset) {
  const Tensor x = Tensor::FromVector<float>({2, 3}, {1, 2, 3, 4, 5, 6});
  const Tensor shape = Tensor::FromVector<int64_t>({2}, {3, 2});
  Node reshape{"r", "Reshape", "", {"x", "shape"}, {"y"}, {}, ""};
  OpContext v13(reshape, 13, {&x, &shape}, nullptr);
  ASSERT_TRUE(RunReferenceKernel(v13).ok());
  EXPECT_EQ(v13.outputs()[0].shape(), (Shape{3, 2}));
  Node reshape1{"r", "Reshape", "", {"x"}, {"y"}, {Attribute::Ints("shape", {6})}, ""};
  OpContext v1(reshape1, 1, {&x}, nullptr);
  ASSERT_TRUE(RunReferenceKernel(v1).ok());
  EXPECT_EQ(v1.outputs()[0].shape(), (Shape{6}));
  Node other{"o", "Reshape", "com.example", {"x", "shape"}, {"y"}, {}, ""};
  OpContext elsewhere(other, 13, {&x, &shape}, nullptr);
  const Status st = RunReferenceKernel(elsewhere);
  EXPECT_EQ(st.code(), StatusCode::kNotSupported);
  EXPECT_NE(st.message().find("no reference kernel for Reshape at opset 13"), std::string::npos) << st.ToString();
  Node unknown{"u", "NoSuchOp", "", {"x"}, {"y"}, {}, ""};
  OpContext none(unknown, 13, {&x}, nullptr);
  EXPECT_EQ(RunReferenceKernel(none).code(), StatusCode::kNotSupported);
}

}  // namespace
}  // namespace sparq

namespace sparq {
namespace {

// The memory plan (runtime/memory_plan.h): runs at shapes seen before reuse
// one arena; interleaving batch sizes (a plan per shape) and a first,
// recording run give the bits of an executor that plans nothing.
TEST(MemoryPlan, PlannedRunsGiveTheUnplannedBits) {
  auto model = LoadModel(kDigits + "digits_cnn.onnx");
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  for (const Model& m : {*model, Int8Digits(*model)}) {
    ExecutorOptions planned_options;
    planned_options.threads = 2;
    planned_options.profile = GraphProfile::kDeployment;
    ExecutorOptions plain_options = planned_options;
    plain_options.plan_memory = false;
    auto planned = Executor::Create(m, planned_options);
    auto plain = Executor::Create(m, plain_options);
    ASSERT_TRUE(planned.ok() && plain.ok());
    std::vector<TensorMap> feeds = testing::DigitsBatches(m, 3, 8);
    for (int round = 0; round < 3; ++round)
      for (size_t b = 0; b < feeds.size(); ++b) {
        TensorMap feed = feeds[b];
        Tensor& x = feed.begin()->second;
        if (b == 1) {  // a second shape: 3 samples of the 8
          Shape s = x.shape();
          s[0] = 3;
          Tensor small(DataType::kFloat32, s);
          std::memcpy(small.raw_data(), x.raw_data(), small.nbytes());
          x = small;
        }
        TensorMap want, got;
        ASSERT_TRUE((*plain)->Run(feed, &want).ok());
        ASSERT_TRUE((*planned)->Run(feed, &got).ok());
        for (const auto& [name, t] : want) EXPECT_TRUE(got.at(name).Equals(t)) << name << " round " << round;
      }
  }
}

// A backend with no rows that notes the BackendOptions its contexts are made
// with: ExecutorOptions reach the backend (every node runs on the CPU).
class OptionsRecordingBackend : public Backend {
 public:
  std::string name() const override { return "options-recording"; }
  Device device() const override { return kSecondHost; }
  const KernelRegistry& rows() const override { return rows_; }
  StatusOr<std::shared_ptr<BackendContext>> CreateContext(const BackendOptions& options) const override {
    std::lock_guard<std::mutex> lock(mu_);
    seen_.push_back(options);
    return std::shared_ptr<BackendContext>(std::make_shared<CountingContext>());
  }
  std::vector<BackendOptions> seen() const {
    std::lock_guard<std::mutex> lock(mu_);
    return seen_;
  }

 private:
  KernelRegistry rows_;
  mutable std::mutex mu_;
  mutable std::vector<BackendOptions> seen_;
};

TEST(BackendSeam, ExecutorOptionsReachTheContext) {
  static const auto recording = [] {
    auto backend = std::make_shared<OptionsRecordingBackend>();
    EXPECT_TRUE(RegisterBackend(backend).ok());
    return backend;
  }();
  auto model = LoadModel(kDigits + "digits_cnn.onnx");
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  for (bool tf32 : {false, true}) {
    ExecutorOptions options;
    options.backend = "options-recording";
    options.threads = 2;
    options.allow_tf32 = tf32;
    const size_t before = recording->seen().size();
    auto exec = Executor::Create(*model, options);
    ASSERT_TRUE(exec.ok()) << exec.status().ToString();
    const std::vector<BackendOptions> seen = recording->seen();
    ASSERT_EQ(seen.size(), before + 1);
    EXPECT_EQ(seen.back().allow_tf32, tf32);
    EXPECT_EQ(seen.back().threads, 2);
  }
}

}  // namespace
}  // namespace sparq

namespace sparq {
namespace {

// Calibration's forward passes on another backend (here the test's counting
// backend, whose values live on cpu:1): the callbacks see host copies and the
// table is the CPU's, bit for bit.
TEST(BackendSeam, CalibrationRunsOnTheChosenBackend) {
  RegisterCountingOnce();
  auto model = LoadModel(kDigits + "digits_cnn.onnx");
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  auto calibrate = [&](const std::string& backend) {
    std::vector<TensorMap> feeds = testing::DigitsBatches(*model, 3, 8);
    size_t next = 0;
    CalibrationOptions o;
    o.method = CalibrationMethod::kKL;
    o.threads = 2;
    o.backend = backend;
    return Calibrate(*model, [&](TensorMap* batch) -> StatusOr<bool> {
      if (next == feeds.size()) return false;
      *batch = feeds[next++];
      return true;
    }, o);
  };
  const int64_t calls = g_counted_calls.load();
  auto cpu = calibrate("cpu");
  auto counting = calibrate("counting");
  ASSERT_TRUE(cpu.ok()) << cpu.status().ToString();
  ASSERT_TRUE(counting.ok()) << counting.status().ToString();
  EXPECT_GT(g_counted_calls.load(), calls);
  ASSERT_EQ(cpu->tensors.size(), counting->tensors.size());
  for (size_t i = 0; i < cpu->tensors.size(); ++i) {
    EXPECT_EQ(cpu->tensors[i].name, counting->tensors[i].name);
    EXPECT_EQ(cpu->tensors[i].threshold, counting->tensors[i].threshold) << cpu->tensors[i].name;
    EXPECT_EQ(cpu->tensors[i].scale, counting->tensors[i].scale) << cpu->tensors[i].name;
  }
}

// Calibration binned where the values live (the seam CUDA's device-side
// histograms use): a backend whose context computes MinMaxF32 /
// AbsHistogramF32 gets them called for the outputs of its nodes, whose values
// are then not copied to the host; the partial statistics (every bin's count,
// min, max) and the finished tables are the CPU's exactly, for every method
// and for the int8-only scope (zero Pads folded, their zeros counted).
TEST(BackendSeam, CalibrationBinsOnTheDeviceWithTheCpusCounts) {
  static bool registered = [] {
    auto backend = std::make_shared<CountingBackend>(
        std::set<std::string>{"Conv", "FusedConv", "Gemm", "MatMul", "Relu", "MaxPool", "Add"}, "binning", nullptr, true);
    EXPECT_TRUE(RegisterBackend(backend).ok());
    return true;
  }();
  (void)registered;
  auto model = LoadModel(kDigits + "digits_cnn.onnx");
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  const std::vector<TensorMap> feeds = testing::DigitsBatches(*model, 3, 8);
  auto shard = [&](const std::string& backend, const std::vector<std::string>& tensors) {
    size_t next = 0;
    CalibrationOptions o;
    o.method = CalibrationMethod::kKL;
    o.threads = 2;
    o.backend = backend;
    o.tensors = tensors;
    return CalibrateShard(*model, [&](TensorMap* batch) -> StatusOr<bool> {
      if (next == feeds.size()) return false;
      *batch = feeds[next++];
      return true;
    }, o);
  };
  auto int8_scope = CalibrationTensorsNeeded(*model, QuantizeOptions{});
  ASSERT_TRUE(int8_scope.ok()) << int8_scope.status().ToString();
  std::vector<std::string> int8_tensors;
  for (const auto& need : *int8_scope) int8_tensors.push_back(need.tensor);
  for (const std::vector<std::string>& scope : {std::vector<std::string>{}, int8_tensors}) {
    SCOPED_TRACE(scope.empty() ? "every tensor" : "int8 scope");
    const int64_t stats = g_stats_calls.load();
    auto cpu = shard("cpu", scope);
    auto binning = shard("binning", scope);
    ASSERT_TRUE(cpu.ok()) << cpu.status().ToString();
    ASSERT_TRUE(binning.ok()) << binning.status().ToString();
    EXPECT_GT(g_stats_calls.load(), stats) << "no statistics were reduced on the backend's device";
    ASSERT_EQ(cpu->tensors.size(), binning->tensors.size());
    for (size_t i = 0; i < cpu->tensors.size(); ++i) {
      const TensorObservation &a = cpu->tensors[i], &b = binning->tensors[i];
      EXPECT_EQ(a.name, b.name);
      EXPECT_EQ(a.min, b.min) << a.name;
      EXPECT_EQ(a.max, b.max) << a.name;
      EXPECT_EQ(a.hist.range(), b.hist.range()) << a.name;
      EXPECT_EQ(a.hist.counts(), b.hist.counts()) << a.name;
    }
    for (CalibrationMethod method : {CalibrationMethod::kMax, CalibrationMethod::kKL, CalibrationMethod::kPercentile,
                                     CalibrationMethod::kMSE}) {
      PartialCalibration pc = *cpu, pb = *binning;
      pc.method.method = pb.method.method = method;
      pb.backend = pc.backend;
      auto tc = FinishCalibration(pc, 2), tb = FinishCalibration(pb, 2);
      ASSERT_TRUE(tc.ok() && tb.ok());
      ASSERT_EQ(tc->tensors.size(), tb->tensors.size());
      for (size_t i = 0; i < tc->tensors.size(); ++i) {
        const TensorRange &x = tc->tensors[i], &y = tb->tensors[i];
        EXPECT_TRUE(x.name == y.name && x.min == y.min && x.max == y.max && x.threshold == y.threshold &&
                    x.scale == y.scale && x.zero_point == y.zero_point && x.is_signed == y.is_signed)
            << CalibrationMethodName(method) << " " << x.name;
      }
    }
  }
}

}  // namespace
}  // namespace sparq
