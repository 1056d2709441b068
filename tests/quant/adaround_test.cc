// AdaRound (sparq/adaround.h, quant/adaround.h): the loss's gradient against
// finite differences, what it does to the output error against nearest
// rounding, the codes it may write, determinism over thread counts, the
// quantizer using its weights, and the errors it names.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <map>
#include <random>

#include "quant/adaround.h"
#include "sparq/adaround.h"
#include "sparq/calibrate.h"
#include "sparq/executor.h"
#include "sparq/onnx_io.h"
#include "sparq/quantize.h"
#include "test_util.h"

namespace sparq {
namespace {

// H = X^T X / n of n rows of `cols` correlated inputs: x = z A (A random,
// a few strong directions), plus a mean.
std::vector<float> CorrelatedGram(int64_t cols, int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal;
  const int64_t latent = std::max<int64_t>(2, cols / 4);
  std::vector<float> a(static_cast<size_t>(latent * cols));
  for (float& v : a) v = normal(rng);
  std::vector<double> h(static_cast<size_t>(cols * cols), 0.0);
  std::vector<float> x(static_cast<size_t>(cols));
  for (int64_t r = 0; r < n; ++r) {
    std::fill(x.begin(), x.end(), 0.5f);
    for (int64_t l = 0; l < latent; ++l) {
      const float z = normal(rng);
      for (int64_t c = 0; c < cols; ++c) x[c] += z * a[l * cols + c];
    }
    for (int64_t i = 0; i < cols; ++i)
      for (int64_t j = 0; j < cols; ++j) h[i * cols + j] += static_cast<double>(x[i]) * x[j];
  }
  std::vector<float> out(h.size());
  for (size_t i = 0; i < h.size(); ++i) out[i] = static_cast<float>(h[i] / static_cast<double>(n));
  return out;
}

// W [rows, cols] in [-1, 1] and scales max|w_r| / 127 (QuantizeWeightSymmetric's).
void RandomWeights(int64_t rows, int64_t cols, uint32_t seed, std::vector<float>* w, std::vector<float>* s) {
  Tensor t = testing::RandomFloats({rows, cols}, seed);
  w->assign(t.data<float>(), t.data<float>() + rows * cols);
  s->assign(static_cast<size_t>(rows), 0.0f);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) (*s)[r] = std::max((*s)[r], std::fabs((*w)[r * cols + c]));
    (*s)[r] /= 127.0f;
  }
}

AdaRoundProblem Problem(int64_t rows, int64_t cols, uint32_t seed, std::vector<float> h, float scale_factor = 1.0f) {
  std::vector<float> w, s;
  RandomWeights(rows, cols, seed, &w, &s);
  for (float& v : s) v *= scale_factor;
  auto p = AdaRoundProblem::Create(w, s, std::move(h), rows, cols);
  EXPECT_TRUE(p.ok()) << p.status().ToString();
  return std::move(*p);
}

// Both ways of applying H: a plain loop below 32 columns, the FP32 GEMM above.
TEST(AdaRound, GradientMatchesFiniteDifferences) {
  for (int64_t cols : {6, 40}) {
    SCOPED_TRACE("cols " + std::to_string(cols));
    const int64_t rows = 3;
    // Coarse scales (max / 20) keep every value inside [-127, 127], away from the clamp.
    AdaRoundProblem p = Problem(rows, cols, 5, CorrelatedGram(cols, 200, 6), 127.0f / 20.0f);
    std::mt19937 rng(7);
    std::uniform_real_distribution<float> u(-2.0f, 2.0f);  // inside h's unclipped range (|V| < 2.39)
    std::vector<float> v(static_cast<size_t>(rows * cols));
    for (float& x : v) x = u(rng);
    for (double lambda : {0.0, 0.05}) {
      std::vector<float> grad;
      ASSERT_TRUE(p.Loss(v, 4.0, lambda, &grad).ok());
      float max_grad = 0.0f;
      for (float g : grad) max_grad = std::max(max_grad, std::fabs(g));
      ASSERT_GT(max_grad, 0.0f);
      const float eps = 1e-2f;
      for (size_t i = 0; i < v.size(); ++i) {
        std::vector<float> plus = v, minus = v;
        plus[i] += eps;
        minus[i] -= eps;
        const double fd = (*p.Loss(plus, 4.0, lambda, nullptr) - *p.Loss(minus, 4.0, lambda, nullptr)) / (2.0 * eps);
        EXPECT_NEAR(fd, grad[i], 2e-2 * max_grad + 2e-2 * std::fabs(grad[i])) << "element " << i << " lambda " << lambda;
      }
    }
  }
}

TEST(AdaRound, StartsAtTheWeightsAndEndsOnIntegerCodes) {
  const int64_t rows = 4, cols = 8;
  std::vector<float> w, s;
  RandomWeights(rows, cols, 9, &w, &s);
  auto p = AdaRoundProblem::Create(w, s, CorrelatedGram(cols, 100, 10), rows, cols);
  ASSERT_TRUE(p.ok());
  // h(V0) = frac(W / s): the soft weights are W, the output term 0.
  const std::vector<float> v0 = p->InitialV();
  for (size_t i = 0; i < w.size(); ++i) {
    const float t = w[i] / s[i / cols];
    EXPECT_NEAR(AdaRoundH(v0[i]), t - std::floor(t), 1e-5) << i;
  }
  EXPECT_NEAR(*p->Loss(v0, 2.0, 0.0, nullptr), 0.0, 1e-9);
}

TEST(AdaRound, LowersTheOutputErrorOfCorrelatedInputs) {
  for (int64_t cols : {16, 64}) {
    SCOPED_TRACE("cols " + std::to_string(cols));
    const int64_t rows = 12;
    AdaRoundProblem p = Problem(rows, cols, 11, CorrelatedGram(cols, 400, 12));
    const std::vector<int8_t> nearest = p.NearestCodes();
    auto codes = p.Solve(AdaRoundOptions{});
    ASSERT_TRUE(codes.ok()) << codes.status().ToString();
    const double e_nearest = *p.OutputError(nearest), e_ada = *p.OutputError(*codes);
    EXPECT_LT(e_ada, 0.7 * e_nearest) << "nearest " << e_nearest << ", adaround " << e_ada;
    int changed = 0;
    for (size_t i = 0; i < nearest.size(); ++i) changed += nearest[i] != (*codes)[i];
    EXPECT_GT(changed, 0);
  }
}

// Every code is W / s rounded down or up, inside [-127, 127], also for the
// extreme weights (W / s = ±127) and exact zeros (which stay 0).
TEST(AdaRound, CodesStayNextToTheWeightAndInRange) {
  const int64_t rows = 6, cols = 40;
  std::vector<float> w, s;
  RandomWeights(rows, cols, 13, &w, &s);
  for (int64_t r = 0; r < rows; ++r) w[r * cols + 3] = 0.0f;
  auto p = AdaRoundProblem::Create(w, s, CorrelatedGram(cols, 300, 14), rows, cols);
  ASSERT_TRUE(p.ok());
  AdaRoundOptions o;
  o.iterations = 300;
  o.regularization = 0.0;  // the output term alone pushes hardest toward the clamp
  auto codes = p->Solve(o);
  ASSERT_TRUE(codes.ok());
  for (size_t i = 0; i < w.size(); ++i) {
    const int c = (*codes)[i];
    const float t = w[i] / s[i / cols];
    EXPECT_GE(c, -127);
    EXPECT_LE(c, 127);
    EXPECT_LT(std::fabs(static_cast<float>(c) - t), 1.0f + 1e-4f) << i;
    if (w[i] == 0.0f) EXPECT_EQ(c, 0) << i;
  }
}

// With H = c I each weight's own error is all that counts: nearest is the
// optimum, and the annealed regularizer keeps AdaRound there.
TEST(AdaRound, IdentityHessianStaysAtNearest) {
  for (int64_t cols : {8, 48}) {
    const int64_t rows = 10;
    std::vector<float> h(static_cast<size_t>(cols * cols), 0.0f);
    for (int64_t i = 0; i < cols; ++i) h[i * cols + i] = 3.0f;
    AdaRoundProblem p = Problem(rows, cols, 15, h);
    const std::vector<int8_t> nearest = p.NearestCodes();
    auto codes = p.Solve(AdaRoundOptions{});
    ASSERT_TRUE(codes.ok());
    int same = 0;
    for (size_t i = 0; i < nearest.size(); ++i) same += nearest[i] == (*codes)[i];
    EXPECT_GE(same, static_cast<int>(0.97 * static_cast<double>(nearest.size()))) << "cols " << cols;
    EXPECT_LE(*p.OutputError(*codes), 1.05 * *p.OutputError(nearest));
  }
}

// H given by its rows (few rows: a classifier head) is the same problem as H formed.
TEST(AdaRound, RowsFormMatchesTheGramForm) {
  const int64_t rows = 5, cols = 48, n = 10;
  std::vector<float> w, s;
  RandomWeights(rows, cols, 41, &w, &s);
  Tensor xt = testing::RandomFloats({n, cols}, 42);
  std::vector<float> x(xt.data<float>(), xt.data<float>() + n * cols);
  std::vector<float> h(static_cast<size_t>(cols * cols), 0.0f);
  for (int64_t r = 0; r < n; ++r)
    for (int64_t i = 0; i < cols; ++i)
      for (int64_t j = 0; j < cols; ++j) h[i * cols + j] += x[r * cols + i] * x[r * cols + j];
  auto gram = AdaRoundProblem::Create(w, s, h, rows, cols);
  auto factor = AdaRoundProblem::CreateFromRows(w, s, x, n, rows, cols);
  ASSERT_TRUE(gram.ok() && factor.ok()) << factor.status().ToString();
  const std::vector<float> v = gram->InitialV();
  std::vector<float> v2 = v;
  for (size_t i = 0; i < v2.size(); ++i) v2[i] += 0.3f * std::sin(static_cast<float>(i));
  std::vector<float> g1, g2;
  const double l1 = *gram->Loss(v2, 3.0, 0.01, &g1), l2 = *factor->Loss(v2, 3.0, 0.01, &g2);
  EXPECT_NEAR(l1, l2, 1e-4 * std::fabs(l1));
  float max_g = 0.0f;
  for (float g : g1) max_g = std::max(max_g, std::fabs(g));
  for (size_t i = 0; i < g1.size(); ++i) EXPECT_NEAR(g1[i], g2[i], 1e-4f * max_g) << i;
  EXPECT_FALSE(AdaRoundProblem::CreateFromRows(w, s, x, n + 1, rows, cols).ok());
}

TEST(AdaRound, BadProblemsAreNamed) {
  EXPECT_FALSE(AdaRoundProblem::Create({1, 2}, {0.1f}, {1}, 1, 2).ok());       // H of 1 value for 2 columns
  EXPECT_FALSE(AdaRoundProblem::Create({1, 2}, {0.0f}, {1, 0, 0, 1}, 1, 2).ok());  // scale 0
  EXPECT_FALSE(AdaRoundProblem::Create({1, 2}, {0.1f}, {1, NAN, 0, 1}, 1, 2).ok());
}

// ---------------------------------------------------------------------------
// The model pass.

// x [n, 4, 8, 8] -> Conv 3x3 (8 out, bias) -> Relu -> depthwise Conv 3x3
// (group 8) -> Relu -> Flatten -> Gemm (transB) [*, 16] -> MatMul [16, 6] -> y.
Model SmallModel() {
  Model m;
  m.opset_imports = {{"", 17}};
  Graph& g = m.graph;
  g.inputs.push_back(testing::FloatInput("x", {{-1, "n"}, {4, ""}, {8, ""}, {8, ""}}));
  g.outputs.push_back(testing::FloatInput("y", {{-1, "n"}, {6, ""}}));
  g.initializers["w1"] = testing::RandomFloats({8, 4, 3, 3}, 21, -0.5f, 0.5f);
  g.initializers["b1"] = testing::RandomFloats({8}, 22, -0.1f, 0.1f);
  g.initializers["w2"] = testing::RandomFloats({8, 1, 3, 3}, 23, -0.5f, 0.5f);
  g.initializers["w3"] = testing::RandomFloats({16, 8 * 4 * 4}, 24, -0.2f, 0.2f);
  g.initializers["w4"] = testing::RandomFloats({16, 6}, 25, -0.5f, 0.5f);
  g.nodes.push_back({"conv1", "Conv", "", {"x", "w1", "b1"}, {"c1"}, {Attribute::Ints("pads", {1, 1, 1, 1})}, ""});
  g.nodes.push_back({"relu1", "Relu", "", {"c1"}, {"r1"}, {}, ""});
  g.nodes.push_back({"dw", "Conv", "", {"r1", "w2"},
                     {"c2"},
                     {Attribute::Ints("pads", {1, 1, 1, 1}), Attribute::Ints("strides", {2, 2}), Attribute::Int("group", 8)},
                     ""});
  g.nodes.push_back({"relu2", "Relu", "", {"c2"}, {"r2"}, {}, ""});
  g.nodes.push_back({"flat", "Flatten", "", {"r2"}, {"f"}, {}, ""});
  g.nodes.push_back({"fc", "Gemm", "", {"f", "w3"}, {"h"}, {Attribute::Int("transB", 1)}, ""});
  g.nodes.push_back({"mm", "MatMul", "", {"h", "w4"}, {"y"}, {}, ""});
  return m;
}

// Correlated inputs: each sample is a few smooth patterns.
std::vector<Tensor> Batches() {
  std::vector<Tensor> out;
  std::mt19937 rng(31);
  std::normal_distribution<float> normal;
  for (int b = 0; b < 3; ++b) {
    Tensor t(DataType::kFloat32, {8, 4, 8, 8});
    float* p = t.data<float>();
    for (int64_t n = 0; n < 8; ++n) {
      const float a = normal(rng), c = normal(rng), d = normal(rng);
      for (int64_t ch = 0; ch < 4; ++ch)
        for (int64_t i = 0; i < 64; ++i)
          p[(n * 4 + ch) * 64 + i] = a * std::sin(0.3f * i + ch) + c * std::cos(0.1f * i * (ch + 1)) + 0.3f * d;
    }
    out.push_back(t);
  }
  return out;
}

BatchFn Source(const std::vector<Tensor>& batches) {
  auto next = std::make_shared<size_t>(0);
  return [batches, next](TensorMap* b) -> StatusOr<bool> {
    if (*next == batches.size()) return false;
    (*b)["x"] = batches[(*next)++];
    return true;
  };
}

AdaRoundOptions Quick(int threads) {
  AdaRoundOptions o;
  o.iterations = 200;
  o.threads = threads;
  return o;
}

TEST(AdaRoundModel, EveryLayerSameBytesForOneOrTwoThreads) {
  const Model m = SmallModel();
  auto one = MeasureAdaRound(m, Source(Batches()), QuantizeOptions{}, Quick(1));
  auto two = MeasureAdaRound(m, Source(Batches()), QuantizeOptions{}, Quick(2));
  ASSERT_TRUE(one.ok()) << one.status().ToString();
  ASSERT_TRUE(two.ok()) << two.status().ToString();
  ASSERT_EQ(one->weights.size(), 4u);
  ASSERT_EQ(one->layers.size(), 4u);
  for (const auto& [key, q] : one->weights) {
    const QuantizedWeight& r = two->weights.at(key);
    ASSERT_EQ(q.values.shape(), r.values.shape()) << key;
    EXPECT_EQ(std::memcmp(q.values.raw_data(), r.values.raw_data(), q.values.nbytes()), 0) << key;
    // The scales nearest rounding gives, for the weight's own shape.
    const int axis = key == "mm" ? 1 : 0;
    EXPECT_EQ(q.axis, axis) << key;
    EXPECT_EQ(q.values.shape(), m.graph.FindWeight(key == "conv1" ? "w1" : key == "dw" ? "w2" : key == "fc" ? "w3" : "w4")->shape());
  }
  for (const AdaRoundLayer& l : one->layers) EXPECT_LE(l.error_adaround, l.error_nearest) << l.layer;
}

// The float model with each layer's weight replaced by its dequantized int8 codes.
Model WithDequantizedWeights(const Model& m, const std::map<std::string, QuantizedWeight>& weights) {
  Model out = m;
  for (const Node& n : m.graph.nodes) {
    auto it = weights.find(n.name);
    if (it == weights.end()) continue;
    const QuantizedWeight& q = it->second;
    Tensor w(DataType::kFloat32, q.values.shape());
    const int64_t channels = q.scales.numel();
    int64_t inner = 1;
    for (size_t d = static_cast<size_t>(q.axis) + 1; d < w.rank(); ++d) inner *= w.dim(d);
    for (int64_t i = 0; i < w.numel(); ++i)
      w.data<float>()[i] = q.values.data<int8_t>()[i] * q.scales.data<float>()[channels == 1 ? 0 : (i / inner) % channels];
    out.graph.initializers[n.inputs[1]] = w;
  }
  return out;
}

double OutputError(const Model& reference, const Model& m) {
  auto f = Executor::Create(reference, ExecutorOptions{1});
  auto e = Executor::Create(m, ExecutorOptions{1});
  EXPECT_TRUE(f.ok() && e.ok());
  double err = 0.0;
  for (const Tensor& x : Batches()) {
    TensorMap in{{"x", x}}, yf, ye;
    EXPECT_TRUE((*f)->Run(in, &yf).ok());
    EXPECT_TRUE((*e)->Run(in, &ye).ok());
    for (int64_t i = 0; i < yf["y"].numel(); ++i) err += std::pow(ye["y"].data<float>()[i] - yf["y"].data<float>()[i], 2);
  }
  return err;
}

// Per-tensor weights (the coarsest grid): each layer's output error on the
// data drops, and so does the model's with every weight rounded so (float
// activations: what AdaRound fits).
TEST(AdaRoundModel, LowersEachLayerAndTheModelOutputError) {
  const Model m = SmallModel();
  QuantizeOptions q;
  q.per_channel = false;
  auto ada = MeasureAdaRound(m, Source(Batches()), q, AdaRoundOptions{});
  ASSERT_TRUE(ada.ok()) << ada.status().ToString();
  ASSERT_EQ(ada->layers.size(), 4u);
  for (const AdaRoundLayer& l : ada->layers) {
    EXPECT_LT(l.error_adaround, l.error_nearest) << l.layer;
    EXPECT_FALSE(l.kept_nearest) << l.layer;
    EXPECT_GT(l.changed, 0) << l.layer;
  }
  std::map<std::string, QuantizedWeight> nearest;
  for (const Node& n : m.graph.nodes)
    if (ada->weights.count(n.name))
      nearest[n.name] = QuantizeWeightSymmetric(*m.graph.FindWeight(n.inputs[1]), ada->weights.at(n.name).axis, false);
  const double e_nearest = OutputError(m, WithDequantizedWeights(m, nearest));
  const double e_ada = OutputError(m, WithDequantizedWeights(m, ada->weights));
  EXPECT_LT(e_ada, 0.8 * e_nearest) << "nearest " << e_nearest << ", adaround " << e_ada;
}

// QuantizeModel writes AdaRound's codes into a valid INT8 QDQ model.
TEST(AdaRoundModel, QuantizeModelWritesTheCodes) {
  const Model m = SmallModel();
  CalibrationOptions c;
  c.method = CalibrationMethod::kMax;
  auto table = Calibrate(m, Source(Batches()), c);
  ASSERT_TRUE(table.ok());
  QuantizeOptions q;
  auto ada = MeasureAdaRound(m, Source(Batches()), q, Quick(0));
  ASSERT_TRUE(ada.ok()) << ada.status().ToString();
  q.rounded_weights = ada->weights;
  auto rounded = QuantizeModel(m, *table, q, nullptr);
  ASSERT_TRUE(rounded.ok()) << rounded.status().ToString();
  EXPECT_TRUE(CheckModel(*rounded).ok()) << CheckModel(*rounded).ToString();
  int found = 0;
  for (const auto& [name, t] : rounded->graph.initializers) {
    if (t.dtype() != DataType::kInt8) continue;
    for (const auto& [key, w] : ada->weights)
      if (t.shape() == w.values.shape() && std::memcmp(t.raw_data(), w.values.raw_data(), t.nbytes()) == 0) ++found;
  }
  EXPECT_EQ(found, 4);
  // The options' codes are not changed by the rewrite (it copies them).
  auto again = QuantizeModel(m, *table, q, nullptr);
  ASSERT_TRUE(again.ok());
}

TEST(AdaRoundModel, BadOptionsAreNamed) {
  const Model m = SmallModel();
  auto message = [&](const AdaRoundOptions& a, const QuantizeOptions& q) {
    auto r = MeasureAdaRound(m, Source(Batches()), q, a);
    EXPECT_FALSE(r.ok());
    return r.ok() ? std::string() : r.status().ToString();
  };
  AdaRoundOptions a;
  a.iterations = 0;
  EXPECT_NE(message(a, {}).find("iterations"), std::string::npos);
  a = {};
  a.warmup = 1.0;
  EXPECT_NE(message(a, {}).find("warmup"), std::string::npos);
  a = {};
  a.beta_end = 30.0;
  EXPECT_NE(message(a, {}).find("beta_start"), std::string::npos);
  a = {};
  a.learning_rate = 0.0;
  EXPECT_NE(message(a, {}).find("learning_rate"), std::string::npos);
  QuantizeOptions q;
  q.fp8 = true;
  EXPECT_NE(message({}, q).find("fp8"), std::string::npos);
  q = {};
  q.format = QuantFormat::kQOperator;
  EXPECT_NE(message({}, q).find("QOperator"), std::string::npos);
  // No data.
  auto none = MeasureAdaRound(m, Source({}), QuantizeOptions{}, Quick(1));
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.status().message().find("no calibration batch"), std::string::npos);
  // NaN in an activation names the layer.
  std::vector<Tensor> bad = Batches();
  bad[0].data<float>()[5] = NAN;
  auto nan = MeasureAdaRound(m, Source(bad), QuantizeOptions{}, Quick(1));
  ASSERT_FALSE(nan.ok());
  EXPECT_NE(nan.status().message().find("conv1"), std::string::npos) << nan.status().ToString();
}

// Codes measured for another weight (or other scales) are refused by name.
TEST(AdaRoundModel, QuantizeRefusesRoundedWeightsOfAnotherShapeOrScale) {
  const Model m = SmallModel();
  CalibrationOptions c;
  c.method = CalibrationMethod::kMax;
  auto table = Calibrate(m, Source(Batches()), c);
  ASSERT_TRUE(table.ok());
  QuantizeOptions q;
  QuantizedWeight w = QuantizeWeightSymmetric(*m.graph.FindWeight("w4"), 1, true);
  w.scales.data<float>()[0] *= 2.0f;
  q.rounded_weights["mm"] = w;
  auto r = QuantizeModel(m, *table, q, nullptr);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("'mm'"), std::string::npos) << r.status().ToString();
  q.format = QuantFormat::kQOperator;
  EXPECT_FALSE(QuantizeModel(m, *table, q, nullptr).ok());
}

}  // namespace
}  // namespace sparq
