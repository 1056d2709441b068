// Which nodes of a real model would leave the GPU, decided without one: a
// test backend on a second host device (cpu:3) carries the CUDA backend's
// rows, rewrites and float16 rule (kernels/cuda/cuda_rows.h), so
// Executor::Create runs every CUDA row's prepare step on the model as the
// "cuda" backend would and partitions the nodes no CUDA row takes to the CPU
// (Executor::NodeKernels names them). Nothing runs: the rows' functions need a
// GPU. Run-time refusals (HostFallback on a type the graph did not say, a
// layout a row does not take) are not seen here; the rows' own tests on a GPU
// (cuda_backend_test.cc) cover those.
//
// The models: sparq's own FP16 files (QuantizeModel, precision fp16, from a
// max calibration on two batches) of the real-model suite
// ($SPARQ_REAL_SUITE_DIR, else the build's models/real; skipped without one).
#include <gtest/gtest.h>

#ifdef SPARQ_HAVE_CUDA
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include "kernels/backend.h"
#include "kernels/cuda/cuda_rows.h"
#include "sparq/calibrate.h"
#include "sparq/dataset.h"
#include "sparq/executor.h"
#include "sparq/onnx_io.h"
#include "sparq/quantize.h"

namespace sparq {
namespace {

const Device kProbeDevice{DeviceType::kCpu, 3};
constexpr const char* kProbe = "cuda-rows-probe";

// Host memory labelled cpu:3 (initializers are copied there at Create).
class ProbeContext : public BackendContext {
 public:
  Device device() const override { return kProbeDevice; }
  StatusOr<std::shared_ptr<uint8_t>> Allocate(size_t bytes) override {
    Tensor t = Tensor::Uninitialized(DataType::kUInt8, {static_cast<int64_t>(bytes)});
    auto* data = static_cast<uint8_t*>(t.raw_data());
    return std::shared_ptr<uint8_t>(std::make_shared<Tensor>(std::move(t)), data);
  }
  Status CopyFromHost(const void* host, void* device, size_t bytes) override {
    if (bytes > 0) std::memcpy(device, host, bytes);
    return Status::OK();
  }
  Status CopyToHost(const void* device, void* host, size_t bytes) override {
    if (bytes > 0) std::memcpy(host, device, bytes);
    return Status::OK();
  }
};

// The CUDA backend's rows, passes and float16 rule on cpu:3.
class CudaRowsProbe : public Backend {
 public:
  CudaRowsProbe() : cuda_(MakeCudaBackend()) {}
  std::string name() const override { return kProbe; }
  Device device() const override { return kProbeDevice; }
  const KernelRegistry& rows() const override { return cuda::CudaRows(); }
  std::vector<std::string> Passes(GraphProfile profile) const override { return cuda_->Passes(profile); }
  bool RunsFloat16AsWritten() const override { return cuda_->RunsFloat16AsWritten(); }
  StatusOr<std::shared_ptr<BackendContext>> CreateContext(const BackendOptions&) const override {
    return std::shared_ptr<BackendContext>(std::make_shared<ProbeContext>());
  }

 private:
  std::shared_ptr<const Backend> cuda_;
};

void RegisterProbeOnce() {
  static const bool registered = [] {
    Status st = RegisterBackend(std::make_shared<CudaRowsProbe>());
    EXPECT_TRUE(st.ok()) << st.ToString();
    return true;
  }();
  (void)registered;
}

// The nodes of `model` (as deployed) that no CUDA row takes: "op (name) on
// backend kernel", one per node; the kernels of those it takes in *taken.
std::vector<std::string> NodesLeftToTheCpu(const Model& model, std::map<std::string, int>* taken) {
  RegisterProbeOnce();
  ExecutorOptions options;
  options.backend = kProbe;
  options.profile = GraphProfile::kDeployment;
  options.threads = 1;
  auto exec = Executor::Create(model, options);
  EXPECT_TRUE(exec.ok()) << exec.status().ToString();
  std::vector<std::string> left;
  if (!exec.ok()) return {"(Executor::Create failed)"};
  for (const NodeKernel& k : (*exec)->NodeKernels()) {
    if (k.kernel == "copy") continue;
    if (k.backend == kProbe) {
      ++(*taken)[k.kernel];
      continue;
    }
    left.push_back(k.op_type + " (" + k.node + ") on " + k.backend + " " + k.kernel);
  }
  return left;
}

std::string SuiteDir() {
  std::vector<std::string> candidates;
  if (const char* env = std::getenv("SPARQ_REAL_SUITE_DIR"); env != nullptr && env[0] != '\0') candidates.push_back(env);
  candidates.push_back(std::string(SPARQ_BINARY_DIR) + "/models/real");
  for (const std::string& dir : candidates)
    if (std::filesystem::exists(dir + "/minilm_l6/model.onnx") || std::filesystem::exists(dir + "/efficientnet_lite0/model.onnx"))
      return dir;
  return "";
}

// sparq's FP16 file of a suite model: a max calibration on two batches of two
// samples, then QuantizeModel with precision fp16 (as `sparq quantize
// --precision fp16` writes it, value_info from shape inference included).
StatusOr<Model> Fp16Of(const std::string& dir) {
  SPARQ_ASSIGN_OR_RETURN(Model model, LoadModel(dir + "/model.onnx"));
  DatasetOptions data_options;
  data_options.batch_size = 2;
  data_options.limit = 4;
  SPARQ_ASSIGN_OR_RETURN(auto data, OpenDataset(dir + "/calib.npz", model.graph, data_options));
  CalibrationOptions copt;
  copt.method = CalibrationMethod::kMax;
  copt.threads = 2;
  SPARQ_ASSIGN_OR_RETURN(CalibrationTable table, Calibrate(model, data(), copt));
  QuantizeOptions q;
  q.precision = Precision::kFP16;
  return QuantizeModel(model, table, q, nullptr);
}

std::string Join(const std::vector<std::string>& v) {
  std::string s;
  for (const std::string& x : v) s += "\n  " + x;
  return s;
}

// Issue 23's FP16 check: every node of the FP16 EfficientNet-Lite0 and
// MiniLM-L6 has a CUDA row (before rows_f16.cc, every float16 elementwise,
// softmax, layer norm, pooling, Conv and Gemm node went to the CPU, and the
// executor's default lowering put a sparq.RoundToFloat16 on the CPU after
// every value).
TEST(CudaFp16Rows, RealFp16ModelsStayOnTheGpu) {
  const std::string suite = SuiteDir();
  if (suite.empty()) GTEST_SKIP() << "no real-model suite ($SPARQ_REAL_SUITE_DIR or build/models/real)";
  for (const char* name : {"efficientnet_lite0", "minilm_l6"}) {
    SCOPED_TRACE(name);
    const std::string dir = suite + "/" + name;
    if (!std::filesystem::exists(dir + "/model.onnx")) {
      std::cout << "[ SKIPPED  ] " << name << ": not in " << suite << "\n";
      continue;
    }
    auto fp16 = Fp16Of(dir);
    ASSERT_TRUE(fp16.ok()) << fp16.status().ToString();
    size_t half_initializers = 0;
    for (const auto& [n, t] : fp16->graph.initializers) half_initializers += t.dtype() == DataType::kFloat16;
    ASSERT_GT(half_initializers, 10u) << "not an FP16 model";
    std::map<std::string, int> taken;
    const std::vector<std::string> left = NodesLeftToTheCpu(*fp16, &taken);
    EXPECT_TRUE(left.empty()) << left.size() << " nodes of the FP16 " << name << " would run on the CPU:" << Join(left);
    // The float16 rows took the float16 work (not float32 rows that would send it to HostFallback).
    const char* want = std::string(name) == "minilm_l6" ? "layernorm_f16_cuda" : "conv_f16_im2col_cublaslt";
    EXPECT_GT(taken[want], 0) << want;
    EXPECT_GT(taken["gemm_f16_cublaslt"], 0);
    // A float32 row only where the FP16 file keeps float32: MiniLM's Softmax
    // (its masked scores are beyond float16's range). Another float32 row
    // taking a float16 node would send it to HostFallback when it runs.
    for (const auto& [kernel, count] : taken) {
      if (kernel == "softmax_f32_cuda" && std::string(name) == "minilm_l6") continue;
      EXPECT_EQ(kernel.find("_f32_"), std::string::npos) << kernel << " x" << count << " in the FP16 " << name;
    }
    std::string summary;
    for (const auto& [kernel, count] : taken) summary += " " + kernel + " x" + std::to_string(count);
    std::cout << "[ INFO     ] FP16 " << name << " on the CUDA rows:" << summary << "\n";
  }
}

// The same census for the suite's other models, reported, not asserted
// (issue 23 asks for the two above): which FP16 nodes the CUDA rows leave to
// the CPU today. SPARQ_FP16_CENSUS=1 runs it (it calibrates and converts each).
TEST(CudaFp16Rows, CensusOfTheOtherSuiteModels) {
  const char* on = std::getenv("SPARQ_FP16_CENSUS");
  if (on == nullptr || std::string(on) != "1") GTEST_SKIP() << "set SPARQ_FP16_CENSUS=1 to run it";
  const std::string suite = SuiteDir();
  if (suite.empty()) GTEST_SKIP() << "no real-model suite";
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(suite))
    if (std::filesystem::exists(entry.path() / "model.onnx")) names.push_back(entry.path().filename().string());
  std::sort(names.begin(), names.end());
  for (const std::string& name : names) {
    auto fp16 = Fp16Of(suite + "/" + name);
    if (!fp16.ok()) {
      std::cout << "[ INFO     ] " << name << ": no FP16 file: " << fp16.status().ToString().substr(0, 160) << "\n";
      continue;
    }
    std::map<std::string, int> taken;
    const std::vector<std::string> left = NodesLeftToTheCpu(*fp16, &taken);
    std::map<std::string, int> by_op;
    for (const std::string& l : left) ++by_op[l.substr(0, l.find(' '))];
    std::string ops;
    for (const auto& [op, count] : by_op) ops += " " + op + " x" + std::to_string(count);
    std::cout << "[ INFO     ] FP16 " << name << ": " << left.size() << " nodes left to the CPU" << (ops.empty() ? "" : ":") << ops
              << "\n";
  }
}

}  // namespace
}  // namespace sparq
#endif  // SPARQ_HAVE_CUDA
