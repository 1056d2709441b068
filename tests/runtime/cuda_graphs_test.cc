// CUDA graphs on a GPU (ExecutorOptions::cuda_graphs): the digits CNN, float
// and INT8, run three times at one shape with capture (run 1 node by node,
// run 2 captured and replayed, run 3 replayed) on different inputs, each
// compared with an executor that never captures. Skips without the CUDA
// backend or without a GPU. (In sparq_tests: it needs the executor, which
// sparq_cuda_tests does not link.)
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

#include "kernels/backend.h"
#include "sparq/calibrate.h"
#include "sparq/executor.h"
#include "tests/runtime/digits_batches.h"
#include "sparq/npy.h"
#include "sparq/onnx_io.h"
#include "sparq/quantize.h"

namespace sparq {
namespace {

const std::string kDigits = std::string(SPARQ_SOURCE_DIR) + "/examples/digits/";


// must_capture: the executor's steps must be capturable (else, when they are
// not, the reason is printed and only the outputs are compared).
void ExpectReplaysMatchPlainRuns(const Model& model, GraphProfile profile, bool must_capture) {
  ExecutorOptions plain_options;
  plain_options.backend = "cuda";
  plain_options.profile = profile;
  plain_options.cuda_graphs = false;
  ExecutorOptions graph_options = plain_options;
  graph_options.cuda_graphs = true;
  auto plain = Executor::Create(model, plain_options);
  auto graphed = Executor::Create(model, graph_options);
  ASSERT_TRUE(plain.ok()) << plain.status().ToString();
  ASSERT_TRUE(graphed.ok()) << graphed.status().ToString();
  const std::string why_not = (*graphed)->GraphCapture().why_not;
  if (must_capture) {
    ASSERT_EQ(why_not, "") << "the model should be capturable on the GPU";
  }
  if (!why_not.empty()) std::printf("not captured: %s\n", why_not.c_str());
  for (const TensorMap& feed : testing::DigitsBatches(model, 3, 4)) {
    TensorMap want, got;
    Status a = (*plain)->Run(feed, &want);
    Status b = (*graphed)->Run(feed, &got);
    ASSERT_TRUE(a.ok()) << a.ToString();
    ASSERT_TRUE(b.ok()) << b.ToString();
    for (const auto& [name, t] : want) {
      ASSERT_TRUE(got.count(name)) << name;
      const Tensor& g = got.at(name);
      ASSERT_EQ(g.shape(), t.shape()) << name;
      ASSERT_EQ(g.dtype(), t.dtype()) << name;
      double worst = 0;
      for (int64_t i = 0; i < t.numel(); ++i) worst = std::max(worst, std::abs(g.GetAsDouble(i) - t.GetAsDouble(i)));
      EXPECT_LE(worst, 1e-5) << name << ": replayed vs node-by-node";
    }
  }
  const GraphCaptureInfo info = (*graphed)->GraphCapture();
  EXPECT_TRUE(info.declined.empty()) << info.declined.front();
  if (why_not.empty()) {
    EXPECT_EQ(info.captured, 1);
    EXPECT_EQ(info.replays, 2);
  }
}

#define SKIP_WITHOUT_GPU()                                                                 \
  do {                                                                                     \
    const Backend* cuda = FindBackend("cuda");                                             \
    if (cuda == nullptr) GTEST_SKIP() << "built without CUDA (-DSPARQ_CUDA=OFF)";          \
    Status available = cuda->Available();                                                  \
    if (!available.ok()) GTEST_SKIP() << "no CUDA device: " << available.message();        \
  } while (0)

TEST(CudaGraphs, FloatDigitsReplayedMatchNodeByNode) {
  SKIP_WITHOUT_GPU();
  auto model = LoadModel(kDigits + "digits_cnn.onnx");
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  ExpectReplaysMatchPlainRuns(*model, GraphProfile::kDeployment, true);
}

TEST(CudaGraphs, Int8DigitsReplayedMatchNodeByNode) {
  SKIP_WITHOUT_GPU();
  auto model = LoadModel(kDigits + "digits_cnn.onnx");
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  std::vector<TensorMap> feeds = testing::DigitsBatches(*model, 4, 4);
  size_t next = 0;
  CalibrationOptions copt;
  copt.method = CalibrationMethod::kMax;
  auto table = Calibrate(*model, [&](TensorMap* batch) -> StatusOr<bool> {
    if (next == feeds.size()) return false;
    *batch = feeds[next++];
    return true;
  }, copt);
  ASSERT_TRUE(table.ok()) << table.status().ToString();
  auto qdq = QuantizeModel(*model, *table, QuantizeOptions{}, nullptr);
  ASSERT_TRUE(qdq.ok()) << qdq.status().ToString();
  ExpectReplaysMatchPlainRuns(*qdq, GraphProfile::kDeployment, false);
}

}  // namespace
}  // namespace sparq
