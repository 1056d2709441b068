// The accuracy fallback: culprit ranking (each layer alone in INT8) and the
// choice of the kept attempt.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "sparq/dataset.h"
#include "sparq/evaluate.h"
#include "sparq/fallback.h"
#include "sparq/npy.h"
#include "sparq/quantize.h"
#include "test_util.h"
#include "tests/quant/tiny_detector.h"

namespace sparq {
namespace {

// x[n,8] ─┬─ fc_a ─ ha ─┐
//         ├─ fc_b ─ hb ─┴─ Sub ─ d ─┐
//         └─ fc_c ─ hc ─────────────┴─ Add ─ y[n,8]
// fc_a and fc_b have the same weights, so y = fc_c(x) in float; quantized
// alike, their errors cancel too. Only one of them in INT8 breaks y.
Model TwinBranches() {
  Model m;
  m.opset_imports = {{"", 17}};
  Graph& g = m.graph;
  g.inputs.push_back(testing::FloatInput("x", {{-1, "n"}, {8, ""}}));
  g.outputs.push_back(testing::FloatInput("y", {{-1, "n"}, {8, ""}}));
  g.initializers["wa"] = testing::RandomFloats({8, 8}, 1, -1.0f, 1.0f);
  g.initializers["wb"] = g.initializers["wa"].Clone();
  g.initializers["wc"] = testing::RandomFloats({8, 8}, 2, -1.0f, 1.0f);
  g.nodes.push_back({"fc_a", "MatMul", "", {"x", "wa"}, {"ha"}, {}, ""});
  g.nodes.push_back({"fc_b", "MatMul", "", {"x", "wb"}, {"hb"}, {}, ""});
  g.nodes.push_back({"fc_c", "MatMul", "", {"x", "wc"}, {"hc"}, {}, ""});
  g.nodes.push_back({"sub", "Sub", "", {"ha", "hb"}, {"d"}, {}, ""});
  g.nodes.push_back({"add", "Add", "", {"d", "hc"}, {"y"}, {}, ""});
  return m;
}

class FallbackTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(WriteNpz(dir_.path("x.npz"), {{"x", testing::RandomFloats({16, 8}, 3, -1.0f, 1.0f)}}).ok());
    // One batch of 16: the rankings take its first 8 samples.
    auto data = OpenDataset(dir_.path("x.npz"), model_.graph, DatasetOptions{16, 0, {}});
    ASSERT_TRUE(data.ok()) << data.status().ToString();
    data_ = *data;
    CalibrationOptions copt;
    copt.method = CalibrationMethod::kMax;
    copt.threads = 1;
    auto table = Calibrate(model_, data_(), copt);
    ASSERT_TRUE(table.ok()) << table.status().ToString();
    table_ = *table;
    // fc_a's and fc_b's outputs clipped at 1/20 of their range (a collapsed
    // threshold), alike, so that their errors still cancel.
    for (auto& r : table_.tensors)
      if (r.name == "ha" || r.name == "hb") r.scale /= 20, r.threshold /= 20;
    EvaluatorOptions eopt;
    eopt.threads = 1;
    auto evaluator = Evaluator::Create(model_, data_, eopt);
    ASSERT_TRUE(evaluator.ok()) << evaluator.status().ToString();
    evaluator_ = std::move(*evaluator);
  }

  QuantizedCandidate Start() {
    QuantizedCandidate start;
    auto q = QuantizeModel(model_, table_, options_, &start.report);
    EXPECT_TRUE(q.ok()) << q.status().ToString();
    start.model = *q;
    auto e = evaluator_->Evaluate(start.model);
    EXPECT_TRUE(e.ok()) << e.status().ToString();
    start.eval = *e;
    return start;
  }

  testing::TempDir dir_;
  Model model_ = TwinBranches();
  BatchSource data_;
  CalibrationTable table_;
  QuantizeOptions options_;
  std::unique_ptr<Evaluator> evaluator_;
};

TEST_F(FallbackTest, RanksTheLayersThatAloneBreakTheOutputFirst) {
  QuantizedCandidate start = Start();
  auto batch = evaluator_->FirstBatch();
  ASSERT_TRUE(batch.ok());
  auto ranked = LayerAloneOutputSqnr(model_, table_, options_, start.report.layers, *batch, 1);
  ASSERT_TRUE(ranked.ok()) << ranked.status().ToString();
  ASSERT_EQ(ranked->size(), 3u);
  EXPECT_EQ((*ranked)[0].node, "fc_a");  // ties keep the report's order
  EXPECT_EQ((*ranked)[1].node, "fc_b");
  EXPECT_EQ((*ranked)[2].node, "fc_c");
  EXPECT_LT((*ranked)[1].sqnr_db + 10, (*ranked)[2].sqnr_db);
}

// Moving fc_a alone makes the output worse than all-INT8 (fc_b's error no
// longer cancels); moving fc_b too gives back the start's error exactly. With
// no attempt better than the start, the start is kept, not the last attempt.
TEST_F(FallbackTest, KeepsTheBestAttemptNotTheLast) {
  QuantizedCandidate start = Start();
  const double start_sqnr = MetricValue(Metric::kSqnr, start.eval);
  FallbackOptions f;
  f.max_layers = 2;
  f.threads = 1;
  f.metric = Metric::kSqnr;
  auto never = [](const EvalReport&) { return false; };
  auto result = QuantizeWithFallback(model_, table_, options_, start, *evaluator_, never, f);
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  ASSERT_EQ(result->steps.size(), 2u);
  EXPECT_EQ(result->steps[0].node, "fc_a");
  EXPECT_EQ(result->steps[0].ranked_by, "output_sqnr");
  EXPECT_LT(result->steps[0].metric_after + 10, start_sqnr);
  EXPECT_EQ(result->steps[1].metric_after, start_sqnr);
  EXPECT_FALSE(result->steps[0].kept);
  EXPECT_FALSE(result->steps[1].kept);
  EXPECT_FALSE(result->passed);
  EXPECT_EQ(MetricValue(Metric::kSqnr, result->final.eval), start_sqnr);
  EXPECT_TRUE(result->options.layers.empty());
}

// A start that computes NaN (its metric NaN) is the worst model, not one no
// attempt can beat: the fallback keeps its best finite attempt (here the
// third, all float). Before, every comparison with NaN was false and the
// NaN start came back.
TEST_F(FallbackTest, ANanStartIsReplacedByTheBestFiniteAttempt) {
  QuantizedCandidate start = Start();
  ASSERT_FALSE(start.eval.comparisons.empty());
  start.eval.comparisons[0].sqnr_db = std::nan("");
  FallbackOptions f;
  f.threads = 1;
  f.metric = Metric::kSqnr;
  auto never = [](const EvalReport&) { return false; };
  auto result = QuantizeWithFallback(model_, table_, options_, start, *evaluator_, never, f);
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  ASSERT_EQ(result->steps.size(), 3u);
  EXPECT_FALSE(result->passed);
  EXPECT_EQ(MetricValue(Metric::kSqnr, result->final.eval), kSqnrCeilingDb);
  for (const auto& s : result->steps) EXPECT_TRUE(s.kept) << s.node;
  EXPECT_EQ(result->options.layers.size(), 3u);
}

// A gate that the third attempt (all float) passes stops the fallback there,
// and every step is kept.
TEST_F(FallbackTest, StopsAtTheFirstAttemptThatPasses) {
  QuantizedCandidate start = Start();
  FallbackOptions f;
  f.threads = 1;
  f.metric = Metric::kSqnr;
  auto exact = [](const EvalReport& e) { return MetricValue(Metric::kSqnr, e) >= kSqnrCeilingDb; };
  auto result = QuantizeWithFallback(model_, table_, options_, start, *evaluator_, exact, f);
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  EXPECT_TRUE(result->passed);
  ASSERT_EQ(result->steps.size(), 3u);
  for (const auto& s : result->steps) EXPECT_TRUE(s.kept) << s.node;
  EXPECT_EQ(result->options.layers.size(), 3u);
}

// The default limit is half the INT8 layers, at least 8; a count is kept.
TEST(FallbackLayerLimitTest, AutoIsHalfTheInt8LayersAtLeastEight) {
  EXPECT_EQ(FallbackLayerLimit(0, 3), 8);
  EXPECT_EQ(FallbackLayerLimit(0, 16), 8);
  EXPECT_EQ(FallbackLayerLimit(0, 47), 24);
  EXPECT_EQ(FallbackLayerLimit(0, 64), 32);
  EXPECT_EQ(FallbackLayerLimit(3, 64), 3);
  EXPECT_EQ(FallbackLayerLimit(100, 4), 100);
}

// The metric ranking scores each layer alone by the evaluator's metric.
TEST_F(FallbackTest, MetricRankingScoresByTheMetric) {
  QuantizedCandidate start = Start();
  FallbackOptions f;
  f.threads = 1;
  f.max_layers = 1;
  f.metric = Metric::kSqnr;
  f.ranking = FallbackRanking::kMetricAlone;
  auto never = [](const EvalReport&) { return false; };
  auto result = QuantizeWithFallback(model_, table_, options_, start, *evaluator_, never, f);
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  ASSERT_EQ(result->steps.size(), 1u);
  EXPECT_EQ(result->steps[0].ranked_by, "metric");
  EXPECT_EQ(result->steps[0].node, "fc_a");
  EXPECT_LT(result->steps[0].score, MetricValue(Metric::kSqnr, start.eval));
}


// The box layer's error is the larger in pixels, the class layer's in the
// scores: the whole output's SQNR blames the box layer first, the class
// scores' SQNR the class layer, whose error is what moves boxes across the
// score threshold.
TEST(FallbackClassScoreTest, RanksByTheClassScoreRowsWithBoxes) {
  testing::TempDir dir;
  Model model = testing::TinyDetector();
  ASSERT_TRUE(WriteNpz(dir.path("x.npz"), {{"x", testing::RandomFloats({8, 8}, 6, 0.0f, 1.0f)}}).ok());
  auto data = OpenDataset(dir.path("x.npz"), model.graph, DatasetOptions{8, 0, {}});
  ASSERT_TRUE(data.ok()) << data.status().ToString();
  CalibrationOptions copt;
  copt.method = CalibrationMethod::kMax;
  copt.threads = 1;
  auto table = Calibrate(model, (*data)(), copt);
  ASSERT_TRUE(table.ok()) << table.status().ToString();
  // Both layers' outputs clipped: the box layer's at 1/4 of its range (an
  // error of hundreds of pixels), the class layer's at 1/8 (scores off by
  // tenths).
  for (auto& r : table->tensors) {
    if (r.name == "hbox") r.scale /= 4, r.threshold /= 4;
    if (r.name == "hcls") r.scale /= 8, r.threshold /= 8;
  }
  QuantizeOptions options;
  QuantizeReport report;
  ASSERT_TRUE(QuantizeModel(model, *table, options, &report).ok());
  TensorMap batch{{"x", testing::RandomFloats({8, 8}, 6, 0.0f, 1.0f)}};
  auto whole = LayerAloneOutputSqnr(model, *table, options, report.layers, batch, 1);
  ASSERT_TRUE(whole.ok()) << whole.status().ToString();
  ASSERT_EQ(whole->size(), 2u);
  EXPECT_EQ((*whole)[0].node, "box_fc");
  BoxOptions boxes;
  auto scores = LayerAloneClassScoreSqnr(model, *table, options, report.layers, batch, boxes, 1);
  ASSERT_TRUE(scores.ok()) << scores.status().ToString();
  ASSERT_EQ(scores->size(), 2u);
  EXPECT_EQ((*scores)[0].node, "cls_fc");
  EXPECT_EQ((*scores)[1].node, "box_fc");
  EXPECT_TRUE(std::isinf((*scores)[1].sqnr_db));  // the box layer alone leaves the scores exact
}

}  // namespace
}  // namespace sparq
