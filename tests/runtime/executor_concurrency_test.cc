// Executor::Run from several threads at once on one executor (its documented
// thread safety): every concurrent run gives the bytes of a serial run.
#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "sparq/calibrate.h"
#include "sparq/executor.h"
#include "sparq/npy.h"
#include "sparq/onnx_io.h"
#include "sparq/quantize.h"

namespace sparq {
namespace {

const std::string kDigits = std::string(SPARQ_SOURCE_DIR) + "/examples/digits/";

// Batches of 16 samples of the bundled digits data.
std::vector<Tensor> Batches(int count) {
  auto npz = ReadNpz(kDigits + "eval.npz");
  EXPECT_TRUE(npz.ok()) << npz.status().ToString();
  std::vector<Tensor> out;
  if (!npz.ok()) return out;
  const Tensor& all = npz->front().second;
  const int64_t per_sample = all.numel() / all.dim(0);
  for (int b = 0; b < count; ++b) {
    Shape shape = all.shape();
    shape[0] = 16;
    Tensor t(DataType::kFloat32, shape);
    for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = all.data<float>()[(b * 16 * per_sample + i) % all.numel()];
    out.push_back(t);
  }
  return out;
}

// Runs `exec` over `batches` serially, then from `threads` threads at once
// (each over every batch, `rounds` times), and expects identical outputs.
void ExpectConcurrentRunsMatchSerial(Executor& exec, const std::vector<Tensor>& batches, int threads, int rounds) {
  const std::string input = exec.input_names().front();
  std::vector<TensorMap> serial(batches.size());
  for (size_t b = 0; b < batches.size(); ++b) {
    ASSERT_TRUE(exec.Run({{input, batches[b]}}, &serial[b]).ok());
  }
  std::atomic<int> mismatches{0}, errors{0};
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      for (int r = 0; r < rounds; ++r) {
        for (size_t i = 0; i < batches.size(); ++i) {
          const size_t b = (i + t) % batches.size();  // threads run different batches at the same time
          TensorMap out;
          if (!exec.Run({{input, batches[b]}}, &out).ok()) {
            ++errors;
            continue;
          }
          for (const auto& [name, value] : serial[b]) {
            if (!out.count(name) || !out.at(name).Equals(value)) ++mismatches;
          }
        }
      }
    });
  }
  for (auto& th : pool) th.join();
  EXPECT_EQ(errors.load(), 0);
  EXPECT_EQ(mismatches.load(), 0);
}

TEST(ExecutorConcurrency, FloatModelConcurrentRunsMatchSerial) {
  auto model = LoadModel(kDigits + "digits_cnn.onnx");
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  ExecutorOptions opt;
  opt.threads = 2;
  opt.profile = GraphProfile::kObserveKept;
  auto exec = Executor::Create(*model, opt);
  ASSERT_TRUE(exec.ok()) << exec.status().ToString();
  ExpectConcurrentRunsMatchSerial(**exec, Batches(6), /*threads=*/4, /*rounds=*/3);
}

TEST(ExecutorConcurrency, FusedInt8ModelConcurrentRunsMatchSerial) {
  auto model = LoadModel(kDigits + "digits_cnn.onnx");
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  std::vector<Tensor> batches = Batches(6);
  size_t next = 0;
  const std::string input = model->graph.inputs.front().name;
  CalibrationOptions copt;
  copt.method = CalibrationMethod::kMax;
  copt.threads = 1;
  auto table = Calibrate(*model, [&](TensorMap* batch) -> StatusOr<bool> {
    if (next == batches.size()) return false;
    (*batch)[input] = batches[next++];
    return true;
  }, copt);
  ASSERT_TRUE(table.ok()) << table.status().ToString();
  QuantizeReport report;
  auto qdq = QuantizeModel(*model, *table, QuantizeOptions{}, &report);
  ASSERT_TRUE(qdq.ok()) << qdq.status().ToString();
  ExecutorOptions opt;
  opt.threads = 2;
  opt.profile = GraphProfile::kDeployment;
  auto exec = Executor::Create(*qdq, opt);
  ASSERT_TRUE(exec.ok()) << exec.status().ToString();
  ExpectConcurrentRunsMatchSerial(**exec, batches, /*threads=*/4, /*rounds=*/3);
}

}  // namespace
}  // namespace sparq
