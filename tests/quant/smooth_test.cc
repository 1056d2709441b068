// SmoothQuant-style scale migration (sparq/smooth.h) on a small
// transformer-like block: the smoothed float model computes what the
// original does; its static INT8 model is closer to the float one.
#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include "sparq/calibrate.h"
#include "sparq/executor.h"
#include "sparq/quantize.h"
#include "sparq/smooth.h"
#include "test_util.h"

namespace sparq {
namespace {

constexpr int64_t kHidden = 16, kInner = 32, kTokens = 4;

// x[n,4,16] ─ LayerNorm(gamma with outlier channels) ─ ln ─┬─ MatMul(W1) ─ Add(b1) ─ h ─ MatMul(W2) ─ y
//                                                          └─ MatMul(W3) ─ y2 [─ Add(ln, y2) ─ y3: `residual`]
// h's channel 5 is an outlier too (W1's column 5 and b1[5] are large).
Model Block(bool residual) {
  Model m;
  m.opset_imports = {{"", 17}};
  Graph& g = m.graph;
  g.inputs.push_back(testing::FloatInput("x", {{-1, "n"}, {kTokens, ""}, {kHidden, ""}}));
  g.outputs.push_back(testing::FloatInput("y", {{-1, "n"}, {kTokens, ""}, {kHidden, ""}}));
  g.outputs.push_back(testing::FloatInput(residual ? "y3" : "y2", {{-1, "n"}, {kTokens, ""}, {kHidden, ""}}));
  Tensor gamma = testing::RandomFloats({kHidden}, 21, 0.5f, 1.5f);
  gamma.data<float>()[3] = 30.0f;
  gamma.data<float>()[11] = -22.0f;
  g.initializers["gamma"] = gamma;
  g.initializers["beta"] = testing::RandomFloats({kHidden}, 22, -0.1f, 0.1f);
  Tensor w1 = testing::RandomFloats({kHidden, kInner}, 23, -0.3f, 0.3f);
  for (int64_t k = 0; k < kHidden; ++k) w1.data<float>()[k * kInner + 5] *= 40.0f;
  g.initializers["w1"] = w1;
  Tensor b1 = testing::RandomFloats({kInner}, 24, -0.1f, 0.1f);
  b1.data<float>()[5] = 8.0f;
  g.initializers["b1"] = b1;
  g.initializers["w2"] = testing::RandomFloats({kInner, kHidden}, 25, -0.3f, 0.3f);
  g.initializers["w3"] = testing::RandomFloats({kHidden, kHidden}, 26, -0.3f, 0.3f);
  g.nodes.push_back({"ln", "LayerNormalization", "", {"x", "gamma", "beta"}, {"ln_out"}, {Attribute::Int("axis", -1)}, ""});
  g.nodes.push_back({"fc1", "MatMul", "", {"ln_out", "w1"}, {"m1"}, {}, ""});
  g.nodes.push_back({"fc1_bias", "Add", "", {"m1", "b1"}, {"h"}, {}, ""});
  g.nodes.push_back({"fc2", "MatMul", "", {"h", "w2"}, {"y"}, {}, ""});
  g.nodes.push_back({"proj", "MatMul", "", {"ln_out", "w3"}, {"y2"}, {}, ""});
  if (residual) g.nodes.push_back({"residual", "Add", "", {"ln_out", "y2"}, {"y3"}, {}, ""});
  return m;
}

std::vector<Tensor> Batches() {
  return {testing::RandomFloats({8, kTokens, kHidden}, 31), testing::RandomFloats({8, kTokens, kHidden}, 32),
          testing::RandomFloats({8, kTokens, kHidden}, 33), testing::RandomFloats({8, kTokens, kHidden}, 34)};
}

BatchFn Source() {
  auto batches = std::make_shared<std::vector<Tensor>>(Batches());
  auto next = std::make_shared<size_t>(0);
  return [batches, next](TensorMap* b) -> StatusOr<bool> {
    if (*next == batches->size()) return false;
    (*b)["x"] = (*batches)[(*next)++];
    return true;
  };
}

std::vector<TensorMap> RunAll(const Model& m) {
  auto exec = Executor::Create(m, ExecutorOptions{1});
  EXPECT_TRUE(exec.ok()) << exec.status().ToString();
  std::vector<TensorMap> out;
  for (const Tensor& x : Batches()) {
    TensorMap o;
    EXPECT_TRUE((*exec)->Run({{"x", x}}, &o).ok());
    out.push_back(o);
  }
  return out;
}

// Largest |a - b| over the largest |a|, over every output and batch.
double RelativeError(const std::vector<TensorMap>& a, const std::vector<TensorMap>& b) {
  double err = 0.0, ref = 0.0;
  for (size_t i = 0; i < a.size(); ++i)
    for (const auto& [name, t] : a[i]) {
      const Tensor u = t.ToFloat32(), v = b[i].at(name).ToFloat32();
      for (int64_t k = 0; k < u.numel(); ++k) {
        err = std::max(err, std::fabs(static_cast<double>(u.data<float>()[k]) - v.data<float>()[k]));
        ref = std::max(ref, std::fabs(static_cast<double>(u.data<float>()[k])));
      }
    }
  return err / ref;
}

double SqnrDb(const std::vector<TensorMap>& a, const std::vector<TensorMap>& b) {
  double s = 0.0, n = 0.0;
  for (size_t i = 0; i < a.size(); ++i)
    for (const auto& [name, t] : a[i]) {
      const Tensor u = t.ToFloat32(), v = b[i].at(name).ToFloat32();
      for (int64_t k = 0; k < u.numel(); ++k) {
        const double d = static_cast<double>(u.data<float>()[k]) - v.data<float>()[k];
        s += static_cast<double>(u.data<float>()[k]) * u.data<float>()[k];
        n += d * d;
      }
    }
  return 10.0 * std::log10(s / n);
}

Model StaticInt8(const Model& m) {
  CalibrationOptions c;
  c.method = CalibrationMethod::kMax;
  auto table = Calibrate(m, Source(), c);
  EXPECT_TRUE(table.ok()) << table.status().ToString();
  auto q = QuantizeModel(m, *table, QuantizeOptions{}, nullptr);
  EXPECT_TRUE(q.ok()) << q.status().ToString();
  return *q;
}

TEST(Smooth, ChannelMaxAbsPerInputOfEachMatMul) {
  auto stats = MeasureChannelMaxAbs(Block(false), Source(), 1);
  ASSERT_TRUE(stats.ok()) << stats.status().ToString();
  ASSERT_EQ(stats->size(), 2u);  // ln_out (fc1 and proj) and h (fc2)
  ASSERT_EQ(stats->at("ln_out").size(), static_cast<size_t>(kHidden));
  ASSERT_EQ(stats->at("h").size(), static_cast<size_t>(kInner));
  const std::vector<float>& ln = stats->at("ln_out");
  EXPECT_EQ(std::max_element(ln.begin(), ln.end()) - ln.begin(), 3);
  const std::vector<float>& h = stats->at("h");
  EXPECT_EQ(std::max_element(h.begin(), h.end()) - h.begin(), 5);
}

TEST(Smooth, FoldsIntoLayerNormAndProducerExactly) {
  const Model m = Block(false);
  auto stats = MeasureChannelMaxAbs(m, Source(), 1);
  ASSERT_TRUE(stats.ok());
  for (double alpha : {0.3, 0.5, 0.8}) {
    SmoothReport report;
    auto s = SmoothModel(m, *stats, alpha, SmoothOptions{}, &report);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    ASSERT_EQ(report.inputs.size(), 2u);
    EXPECT_EQ(report.inputs[0].tensor, "ln_out");
    EXPECT_EQ(report.inputs[0].folded_into, "LayerNormalization 'ln'");
    EXPECT_EQ(report.inputs[1].tensor, "h");
    EXPECT_EQ(report.inputs[1].folded_into, "MatMul 'fc1'");
    for (const auto& in : report.inputs) EXPECT_LT(in.ratio_after, in.outlier_ratio) << in.tensor;
    EXPECT_EQ(s->graph.nodes.size(), m.graph.nodes.size());  // nothing inserted
    EXPECT_EQ(s->graph.initializers.count("w1"), 0u);        // replaced, not kept
    EXPECT_LE(RelativeError(RunAll(m), RunAll(*s)), 1e-5) << "alpha " << alpha;
  }
  // The input model is untouched.
  EXPECT_EQ(m.graph.nodes[0].inputs[1], "gamma");
}

TEST(Smooth, AnotherReaderGetsTheOriginalAndTheLayersAMul) {
  const Model m = Block(true);
  auto stats = MeasureChannelMaxAbs(m, Source(), 1);
  ASSERT_TRUE(stats.ok());
  SmoothReport report;
  auto s = SmoothModel(m, *stats, 0.5, SmoothOptions{}, &report);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  ASSERT_EQ(report.inputs.size(), 2u);
  EXPECT_EQ(report.inputs[0].folded_into.rfind("Mul '", 0), 0u) << report.inputs[0].folded_into;
  EXPECT_EQ(s->graph.nodes.size(), m.graph.nodes.size() + 1);
  for (const Node& n : s->graph.nodes)
    if (n.name == "residual") EXPECT_EQ(n.inputs[0], "ln_out");
  EXPECT_LE(RelativeError(RunAll(m), RunAll(*s)), 1e-5);
}

TEST(Smooth, StaticInt8OfTheSmoothedModelIsCloser) {
  const Model m = Block(false);
  auto stats = MeasureChannelMaxAbs(m, Source(), 1);
  ASSERT_TRUE(stats.ok());
  auto s = SmoothModel(m, *stats, 0.5, SmoothOptions{}, nullptr);
  ASSERT_TRUE(s.ok());
  const auto ref = RunAll(m);
  const double plain = SqnrDb(ref, RunAll(StaticInt8(m)));
  const double smoothed = SqnrDb(ref, RunAll(StaticInt8(*s)));
  EXPECT_GT(smoothed, plain + 3.0) << "plain " << plain << " dB, smoothed " << smoothed << " dB";
}

TEST(Smooth, NoOutliersNothingChanges) {
  const Model m = Block(false);
  auto stats = MeasureChannelMaxAbs(m, Source(), 1);
  ASSERT_TRUE(stats.ok());
  SmoothOptions o;
  o.min_outlier_ratio = 1e9;
  SmoothReport report;
  auto s = SmoothModel(m, *stats, 0.5, o, &report);
  ASSERT_TRUE(s.ok());
  EXPECT_TRUE(report.inputs.empty());
  EXPECT_EQ(RelativeError(RunAll(m), RunAll(*s)), 0.0);
}

TEST(Smooth, BadArgumentsAreErrors) {
  const Model m = Block(false);
  auto stats = MeasureChannelMaxAbs(m, Source(), 1);
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(SmoothModel(m, *stats, 1.5, SmoothOptions{}, nullptr).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(SmoothModel(m, *stats, NAN, SmoothOptions{}, nullptr).status().code(), StatusCode::kInvalidArgument);
  auto wrong = *stats;
  wrong["h"].resize(7);
  auto bad = SmoothModel(m, wrong, 0.5, SmoothOptions{}, nullptr);
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("'h'"), std::string::npos) << bad.status().ToString();
  // No batch at all.
  BatchFn none = [](TensorMap*) -> StatusOr<bool> { return false; };
  EXPECT_EQ(MeasureChannelMaxAbs(m, none, 1).status().code(), StatusCode::kInvalidArgument);
}

TEST(Smooth, AutoAlphaPicksACandidateOnHeldOutBatches) {
  const Model m = Block(true);
  SmoothOptions o;
  o.enabled = true;
  o.auto_alpha = true;
  o.alphas = {0.3, 0.6, 0.9};
  o.holdout_every = 2;
  o.threads = 1;
  CalibrationMethodOptions method;
  method.method = CalibrationMethod::kMax;
  SmoothReport report;
  BatchSource source([] { return Source(); });
  auto s = SmoothForInt8(m, source, QuantizeOptions{}, method, o, &report);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  ASSERT_EQ(report.alpha_sqnr_db.size(), 3u);
  double best = -1e9;
  for (const auto& [alpha, db] : report.alpha_sqnr_db) best = std::max(best, db);
  bool chosen = false;
  for (const auto& [alpha, db] : report.alpha_sqnr_db) chosen |= alpha == report.alpha && db == best;
  EXPECT_TRUE(chosen) << "alpha " << report.alpha;
  EXPECT_FALSE(report.inputs.empty());
  EXPECT_LE(RelativeError(RunAll(m), RunAll(*s)), 1e-5);
}

}  // namespace
}  // namespace sparq

namespace sparq {
namespace {

// quantize_outputs = false: Q/DQ on the INT8 layers' inputs only (TensorRT's
// explicit-quantization placement); nothing quantizes a layer's output.
TEST(QuantizeOutputs, OffLeavesLayerOutputsFloat) {
  Model m;
  m.opset_imports = {{"", 17}};
  Graph& g = m.graph;
  g.inputs.push_back(testing::FloatInput("x", {{-1, "n"}, {8, ""}}));
  g.outputs.push_back(testing::FloatInput("y", {{-1, "n"}, {8, ""}}));
  g.initializers["w1"] = testing::RandomFloats({8, 8}, 41);
  g.initializers["w2"] = testing::RandomFloats({8, 8}, 42);
  g.nodes.push_back({"fc1", "MatMul", "", {"x", "w1"}, {"h"}, {}, ""});
  g.nodes.push_back({"res", "Add", "", {"h", "x"}, {"r"}, {}, ""});
  g.nodes.push_back({"fc2", "MatMul", "", {"r", "w2"}, {"y"}, {}, ""});
  QuantizeOptions o;
  o.quantize_outputs = false;
  auto needs = CalibrationTensorsNeeded(m, o);
  ASSERT_TRUE(needs.ok());
  std::vector<std::string> names;
  for (const auto& n : *needs) names.push_back(n.tensor);
  EXPECT_EQ(names, (std::vector<std::string>{"x", "r"}));
  CalibrationOptions c;
  c.method = CalibrationMethod::kMax;
  auto batches = std::make_shared<int>(0);
  BatchFn one = [batches](TensorMap* b) -> StatusOr<bool> {
    if ((*batches)++ > 0) return false;
    (*b)["x"] = testing::RandomFloats({4, 8}, 43);
    return true;
  };
  auto table = Calibrate(m, one, c);
  ASSERT_TRUE(table.ok());
  auto q = QuantizeModel(m, *table, o, nullptr);
  ASSERT_TRUE(q.ok()) << q.status().ToString();
  std::set<std::string> quantized;
  for (const Node& n : q->graph.nodes)
    if (n.op_type == "QuantizeLinear") quantized.insert(n.inputs[0]);
  EXPECT_EQ(quantized, (std::set<std::string>{"x", "r"}));  // not h, not y
  o.quantize_outputs = true;
  auto all = QuantizeModel(m, *table, o, nullptr);
  ASSERT_TRUE(all.ok());
  int qs = 0;
  for (const Node& n : all->graph.nodes) qs += n.op_type == "QuantizeLinear";
  EXPECT_GT(qs, 2);
}

}  // namespace
}  // namespace sparq
