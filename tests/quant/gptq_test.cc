// GPTQ and AWQ for block-wise INT4 weights (quant/gptq.h): each is judged on
// the quantity it minimizes, the layer's output error tr(E^T H E) on its own
// input statistics, against round-to-nearest of the same blocks.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <random>

#include "kernels/ref/linalg.h"
#include "quant/gptq.h"
#include "sparq/executor.h"
#include "sparq/quantize.h"
#include "test_util.h"

namespace sparq {
namespace {

// Rows of correlated inputs: x = z A with z ~ U(-1, 1) and a mixing A, so
// H = X^T X is far from diagonal (what GPTQ exploits); channel `outlier`
// (when >= 0) is `gain` times larger (what AWQ exploits).
InputStatistics Statistics(int64_t rows, int64_t k, uint32_t seed, int64_t outlier = -1, float gain = 1.0f,
                           std::vector<float>* x_out = nullptr) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> a(static_cast<size_t>(k * k));
  for (int64_t i = 0; i < k; ++i)
    for (int64_t j = 0; j < k; ++j) a[i * k + j] = (i == j ? 1.0f : 0.0f) + 0.4f * u(rng);
  std::vector<float> x(static_cast<size_t>(rows * k), 0.0f), z(static_cast<size_t>(k));
  for (int64_t r = 0; r < rows; ++r) {
    for (auto& v : z) v = u(rng);
    for (int64_t i = 0; i < k; ++i)
      for (int64_t j = 0; j < k; ++j) x[r * k + j] += z[i] * a[i * k + j];
    if (outlier >= 0) x[r * k + outlier] *= gain;
  }
  InputStatistics s;
  s.k = k;
  s.rows = rows;
  s.gram.assign(static_cast<size_t>(k * k), 0.0);
  s.abs_sum.assign(static_cast<size_t>(k), 0.0);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t i = 0; i < k; ++i) {
      s.abs_sum[i] += std::fabs(x[r * k + i]);
      for (int64_t j = 0; j < k; ++j) s.gram[i * k + j] += static_cast<double>(x[r * k + i]) * x[r * k + j];
    }
  if (x_out) *x_out = std::move(x);
  return s;
}

std::vector<float> Weights(int64_t k, int64_t n, uint32_t seed) {
  Tensor t = testing::RandomFloats({k, n}, seed, -0.5f, 0.5f);
  return std::vector<float>(t.data<float>(), t.data<float>() + k * n);
}

double RtnError(const std::vector<float>& w, int64_t k, int64_t n, int64_t block, bool symmetric,
                const InputStatistics& x) {
  auto q = QuantizeInt4Rtn(w.data(), k, n, block, symmetric);
  EXPECT_TRUE(q.ok()) << q.status().ToString();
  const std::vector<float> wq = DequantizeInt4(*q);
  return Int4OutputError(w.data(), wq.data(), k, n, x.gram, nullptr);
}

TEST(Linalg, UpperCholeskyOfInverse) {
  const int64_t k = 37;
  const InputStatistics s = Statistics(200, k, 3);
  std::vector<double> u = s.gram;
  ASSERT_TRUE(UpperCholeskyOfInverse(u, k));
  // U^T U A = I, U upper with a positive diagonal.
  std::vector<double> inv(static_cast<size_t>(k * k), 0.0);
  for (int64_t i = 0; i < k; ++i)
    for (int64_t j = 0; j < k; ++j) {
      if (j < i) EXPECT_EQ(u[i * k + j], 0.0);
      for (int64_t p = 0; p < k; ++p) inv[i * k + j] += u[p * k + i] * u[p * k + j];
    }
  for (int64_t i = 0; i < k; ++i) {
    EXPECT_GT(u[i * k + i], 0.0);
    for (int64_t j = 0; j < k; ++j) {
      double v = 0.0;
      for (int64_t p = 0; p < k; ++p) v += inv[i * k + p] * s.gram[p * k + j];
      EXPECT_NEAR(v, i == j ? 1.0 : 0.0, 1e-9) << i << "," << j;
    }
  }
  std::vector<double> singular(static_cast<size_t>(k * k), 0.0);
  EXPECT_FALSE(UpperCholeskyOfInverse(singular, k));
}

TEST(Int4Gptq, DiagonalHessianIsRoundToNearest) {
  // Uncorrelated inputs: no error can move to other rows, GPTQ is RTN.
  const int64_t k = 48, n = 10;
  InputStatistics x;
  x.k = k;
  x.rows = 1;
  x.gram.assign(static_cast<size_t>(k * k), 0.0);
  x.abs_sum.assign(static_cast<size_t>(k), 1.0);
  for (int64_t i = 0; i < k; ++i) x.gram[i * k + i] = 1.0 + i;
  const std::vector<float> w = Weights(k, n, 5);
  for (bool symmetric : {false, true}) {
    auto rtn = QuantizeInt4Rtn(w.data(), k, n, 16, symmetric);
    GptqOptions o;
    o.block_size = 16;
    o.symmetric = symmetric;
    auto gptq = QuantizeInt4Gptq(w.data(), k, n, x, o, nullptr);
    ASSERT_TRUE(gptq.ok()) << gptq.status().ToString();
    EXPECT_EQ(gptq->codes, rtn->codes);
    EXPECT_EQ(gptq->scales, rtn->scales);
    EXPECT_EQ(gptq->zero_points, rtn->zero_points);
  }
}

TEST(Int4Gptq, LowersTheOutputErrorOfCorrelatedInputs) {
  // K not a multiple of the block, lazy batches smaller than K.
  const int64_t k = 72, n = 24;
  const InputStatistics x = Statistics(400, k, 7);
  const std::vector<float> w = Weights(k, n, 8);
  for (bool symmetric : {false, true}) {
    for (int64_t block : {16, 32}) {
      GptqOptions o;
      o.block_size = block;
      o.symmetric = symmetric;
      o.lazy_rows = 32;
      auto q = QuantizeInt4Gptq(w.data(), k, n, x, o, nullptr);
      ASSERT_TRUE(q.ok()) << q.status().ToString();
      for (int8_t c : q->codes) {
        EXPECT_GE(c, symmetric ? -8 : 0);
        EXPECT_LE(c, symmetric ? 7 : 15);
      }
      const std::vector<float> wq = DequantizeInt4(*q);
      const double gptq = Int4OutputError(w.data(), wq.data(), k, n, x.gram, nullptr);
      const double rtn = RtnError(w, k, n, block, symmetric, x);
      EXPECT_LT(gptq, 0.8 * rtn) << "block " << block << (symmetric ? " symmetric" : " asymmetric");
      // Lazy batching changes the order of float sums only.
      o.lazy_rows = 1000;
      auto whole = QuantizeInt4Gptq(w.data(), k, n, x, o, nullptr);
      ASSERT_TRUE(whole.ok());
      const std::vector<float> wq2 = DequantizeInt4(*whole);
      EXPECT_NEAR(Int4OutputError(w.data(), wq2.data(), k, n, x.gram, nullptr), gptq, 0.05 * gptq);
    }
  }
}

TEST(Int4Gptq, SameBitsForEveryThreadCount) {
  const int64_t k = 64, n = 40;
  const InputStatistics x = Statistics(300, k, 9);
  const std::vector<float> w = Weights(k, n, 10);
  GptqOptions o;
  o.lazy_rows = 32;
  auto one = QuantizeInt4Gptq(w.data(), k, n, x, o, nullptr);
  ThreadPool pool(2);
  auto two = QuantizeInt4Gptq(w.data(), k, n, x, o, &pool);
  ASSERT_TRUE(one.ok() && two.ok());
  EXPECT_EQ(one->codes, two->codes);
  EXPECT_EQ(one->scales, two->scales);
}

TEST(Int4Gptq, BadStatisticsAreNamed) {
  const std::vector<float> w = Weights(8, 4, 1);
  InputStatistics x = Statistics(10, 6, 1);
  auto q = QuantizeInt4Gptq(w.data(), 8, 4, x, GptqOptions{}, nullptr);
  ASSERT_FALSE(q.ok());
  EXPECT_NE(q.status().message().find("6 channels"), std::string::npos) << q.status().ToString();
}

TEST(Int4Awq, NeverWorseThanRoundToNearestAndHelpsAnOutlierChannel) {
  const int64_t k = 64, n = 32;
  const InputStatistics x = Statistics(300, k, 11, /*outlier=*/5, /*gain=*/30.0f);
  Tensor w1 = Tensor::FromVector<float>({k, n}, Weights(k, n, 12));
  Tensor w2 = Tensor::FromVector<float>({k, 8}, Weights(k, 8, 13));
  AwqOptions o;
  o.block_size = 32;
  auto c = ChooseAwqScales({w1, w2}, x, o, nullptr);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  const std::vector<float> v1(w1.data<float>(), w1.data<float>() + k * n), v2(w2.data<float>(), w2.data<float>() + k * 8);
  EXPECT_NEAR(c->error_rtn, RtnError(v1, k, n, 32, false, x) + RtnError(v2, k, 8, 32, false, x), 1e-4 * c->error_rtn);
  EXPECT_GT(c->alpha, 0.0);
  EXPECT_LT(c->error, 0.9 * c->error_rtn);
  ASSERT_EQ(c->scales.size(), static_cast<size_t>(k));
  EXPECT_GT(c->scales[5], c->scales[6]);
}

TEST(Int4Awq, ScaledStatisticsDescribeTheScaledInput) {
  const int64_t k = 12;
  std::vector<float> x;
  const InputStatistics s = Statistics(50, k, 14, -1, 1.0f, &x);
  std::vector<float> f(static_cast<size_t>(k));
  for (int64_t j = 0; j < k; ++j) f[j] = 0.5f + 0.25f * j;
  for (int64_t i = 0; i < 50 * k; ++i) x[i] /= f[i % k];
  const InputStatistics y = ScaledStatistics(s, f);
  for (int64_t i = 0; i < k; ++i) {
    double a = 0.0, g = 0.0;
    for (int64_t r = 0; r < 50; ++r) {
      a += std::fabs(x[r * k + i]);
      g += static_cast<double>(x[r * k + i]) * x[r * k + (k - 1 - i)];
    }
    EXPECT_NEAR(y.abs_sum[i], a, 1e-4 * a);
    EXPECT_NEAR(y.gram[i * k + (k - 1 - i)], g, 1e-4 * std::fabs(g) + 1e-6);
  }
}

// x[n,4,16] ─ LayerNorm ─ ln ─┬─ MatMul(w1) ─ h ─ Relu ─ MatMul(w2) ─ y
//                             └─ MatMul(w3) ─ y2
// gamma's channel 3 is an outlier; h's inputs to w2 go through a Mul (Relu
// cannot take the scale).
Model Block() {
  Model m;
  m.opset_imports = {{"", 17}};
  Graph& g = m.graph;
  g.inputs.push_back(testing::FloatInput("x", {{-1, "n"}, {4, ""}, {16, ""}}));
  g.outputs.push_back(testing::FloatInput("y", {{-1, "n"}, {4, ""}, {16, ""}}));
  g.outputs.push_back(testing::FloatInput("y2", {{-1, "n"}, {4, ""}, {16, ""}}));
  Tensor gamma = testing::RandomFloats({16}, 21, 0.5f, 1.5f);
  gamma.data<float>()[3] = 25.0f;
  g.initializers["gamma"] = gamma;
  g.initializers["beta"] = testing::RandomFloats({16}, 22, -0.1f, 0.1f);
  g.initializers["w1"] = testing::RandomFloats({16, 32}, 23, -0.3f, 0.3f);
  g.initializers["w2"] = testing::RandomFloats({32, 16}, 25, -0.3f, 0.3f);
  g.initializers["w3"] = testing::RandomFloats({16, 16}, 26, -0.3f, 0.3f);
  g.nodes.push_back({"ln", "LayerNormalization", "", {"x", "gamma", "beta"}, {"ln_out"}, {Attribute::Int("axis", -1)}, ""});
  g.nodes.push_back({"fc1", "MatMul", "", {"ln_out", "w1"}, {"m1"}, {}, ""});
  g.nodes.push_back({"act", "Relu", "", {"m1"}, {"h"}, {}, ""});
  g.nodes.push_back({"fc2", "MatMul", "", {"h", "w2"}, {"y"}, {}, ""});
  g.nodes.push_back({"proj", "MatMul", "", {"ln_out", "w3"}, {"y2"}, {}, ""});
  return m;
}

BatchFn Source() {
  auto batches = std::make_shared<std::vector<Tensor>>(
      std::vector<Tensor>{testing::RandomFloats({8, 4, 16}, 31), testing::RandomFloats({8, 4, 16}, 32)});
  auto next = std::make_shared<size_t>(0);
  return [batches, next](TensorMap* b) -> StatusOr<bool> {
    if (*next >= batches->size()) return false;
    (*b)["x"] = (*batches)[(*next)++];
    return true;
  };
}

TEST(Int4Awq, MeasuresAndRescalesAModelWithoutChangingWhatItComputes) {
  const Model model = Block();
  auto stats = MeasureInputStatistics(model, Source(), 1);
  ASSERT_TRUE(stats.ok()) << stats.status().ToString();
  ASSERT_EQ(stats->size(), 2u);  // ln_out (fc1, proj) and h (fc2)
  const InputStatistics& h = stats->at("h");
  EXPECT_EQ(h.k, 32);
  EXPECT_EQ(h.rows, 2 * 8 * 4);
  for (int64_t i = 0; i < 32; ++i) EXPECT_GE(h.gram[i * 32 + i], 0.0);

  AwqOptions o;
  o.block_size = 16;
  std::vector<AwqInput> report;
  auto scaled = AwqModel(model, *stats, o, 1, &report);
  ASSERT_TRUE(scaled.ok()) << scaled.status().ToString();
  ASSERT_EQ(report.size(), 2u);
  EXPECT_EQ(report[0].tensor, "ln_out");
  EXPECT_EQ(report[0].layers.size(), 2u);
  for (const AwqInput& r : report) EXPECT_LE(r.error, r.error_rtn);
  if (report[0].alpha > 0) {
    EXPECT_EQ(report[0].folded_into.rfind("LayerNormalization", 0), 0u) << report[0].folded_into;
  }
  auto a = Executor::Create(model, ExecutorOptions{});
  auto b = Executor::Create(*scaled, ExecutorOptions{});
  ASSERT_TRUE(a.ok() && b.ok());
  TensorMap in{{"x", testing::RandomFloats({3, 4, 16}, 40)}}, ya, yb;
  ASSERT_TRUE((*a)->Run(in, &ya).ok());
  ASSERT_TRUE((*b)->Run(in, &yb).ok());
  for (const char* name : {"y", "y2"}) {
    const Tensor& p = ya.at(name);
    const Tensor& q = yb.at(name);
    for (int64_t i = 0; i < p.numel(); ++i)
      EXPECT_NEAR(p.data<float>()[i], q.data<float>()[i], 1e-4f * (1.0f + std::fabs(p.data<float>()[i]))) << name;
  }
}

}  // namespace
}  // namespace sparq

namespace sparq {
namespace {

TEST(Int4Gptq, ModelWeightsForEveryLayerAnyThreadCount) {
  const Model model = Block();
  auto stats = MeasureInputStatistics(model, Source(), 1);
  ASSERT_TRUE(stats.ok()) << stats.status().ToString();
  GptqOptions o;
  o.block_size = 16;
  auto one = GptqModelWeights(model, *stats, o, 1);
  auto two = GptqModelWeights(model, *stats, o, 2);
  ASSERT_TRUE(one.ok() && two.ok()) << one.status().ToString();
  ASSERT_EQ(one->size(), 3u);
  for (const char* key : {"fc1", "fc2", "proj"}) {
    ASSERT_TRUE(one->count(key)) << key;
    EXPECT_EQ(one->at(key).codes, two->at(key).codes) << key;
  }
  EXPECT_EQ(one->at("fc2").k, 32);
  EXPECT_EQ(one->at("fc2").n, 16);
}

}  // namespace
}  // namespace sparq

namespace sparq {
namespace {

// Output error (sum of squares against the float model) on the calibration batches.
double ModelError(const Model& reference, const Model& quantized) {
  auto a = Executor::Create(reference, ExecutorOptions{1});
  auto b = Executor::Create(quantized, ExecutorOptions{1});
  EXPECT_TRUE(a.ok() && b.ok());
  double e = 0.0;
  BatchFn next = Source();
  for (;;) {
    TensorMap in, ya, yb;
    auto more = next(&in);
    if (!more.ok() || !*more) break;
    EXPECT_TRUE((*a)->Run(in, &ya).ok());
    EXPECT_TRUE((*b)->Run(in, &yb).ok());
    for (const auto& [name, t] : ya)
      for (int64_t i = 0; i < t.numel(); ++i) {
        const double d = t.data<float>()[i] - yb.at(name).data<float>()[i];
        e += d * d;
      }
  }
  return e;
}

TEST(QuantizeWeightsInt4, GptqAndAwqBeatRoundToNearestOnTheirData) {
  const Model model = Block();
  Int4Options o;
  o.block_size = 16;
  o.threads = 1;
  auto rtn = QuantizeWeightsInt4(model, o, nullptr);
  ASSERT_TRUE(rtn.ok()) << rtn.status().ToString();
  const double e_rtn = ModelError(model, *rtn);
  o.method = Int4Method::kGptq;
  EXPECT_FALSE(QuantizeWeightsInt4(model, o, nullptr).ok());  // needs data
  QuantizeReport report;
  auto gptq = QuantizeWeightsInt4(model, o, Source(), &report);
  ASSERT_TRUE(gptq.ok()) << gptq.status().ToString();
  EXPECT_LT(ModelError(model, *gptq), e_rtn);
  int fitted = 0;
  for (const LayerDecision& d : report.layers) fitted += d.reason.find("gptq") != std::string::npos;
  EXPECT_EQ(fitted, 3);
  o.method = Int4Method::kAwq;
  auto awq = QuantizeWeightsInt4(model, o, Source(), nullptr);
  ASSERT_TRUE(awq.ok()) << awq.status().ToString();
  EXPECT_LE(ModelError(model, *awq), e_rtn * 1.0001);
}

}  // namespace
}  // namespace sparq
