// Sharded evaluation: the shards' JSON reports merged give one run's metrics.
#include <gtest/gtest.h>

#include <cmath>

#include "sparq/evaluate.h"
#include "sparq/onnx_io.h"
#include "test_util.h"

namespace sparq {
namespace {

const std::string kDigits = std::string(SPARQ_SOURCE_DIR) + "/examples/digits/";

// Sums added in another order than one run adds them: SQNR, cosine and the
// task means agree to this relative error; counts agree exactly.
constexpr double kSumOrderTolerance = 1e-12;

void ExpectClose(double a, double b, const char* what) {
  if (std::isnan(a) || std::isnan(b)) {
    EXPECT_EQ(std::isnan(a), std::isnan(b)) << what;
    return;
  }
  EXPECT_LE(std::fabs(a - b), kSumOrderTolerance * std::max(1.0, std::fabs(a))) << what << ": " << a << " vs " << b;
}

TEST(EvalShards, MergedShardReportsGiveOneRunsMetrics) {
  testing::TempDir dir;
  // A candidate that differs from the reference: the first conv weight scaled by 1.05.
  auto model = LoadModel(kDigits + "digits_cnn.onnx");
  ASSERT_TRUE(model.ok());
  ASSERT_FALSE(model->graph.initializers.empty());
  for (auto& [name, w] : model->graph.initializers) {
    if (w.dtype() != DataType::kFloat32 || w.numel() < 16) continue;
    for (int64_t i = 0; i < w.numel(); i += 3) w.data<float>()[i] *= 1.05f;
    break;
  }
  const std::string candidate = dir.path("candidate.onnx");
  ASSERT_TRUE(SaveModel(*model, candidate).ok());

  EvalOptions o;
  o.inputs = kDigits + "eval.npz";
  o.labels = kDigits + "eval_labels.npy";
  o.reference = kDigits + "digits_cnn.onnx";
  o.batch = 16;
  o.limit = 100;  // 7 batches: 3 shards of 2, 2 and 3
  o.threads = 2;
  auto one = Evaluate(candidate, o);
  ASSERT_TRUE(one.ok()) << one.status().ToString();

  std::vector<EvalReport> parts;
  for (int i : {2, 0, 1}) {  // any order
    EvalOptions s = o;
    s.shard = i;
    s.shards = 3;
    auto part = Evaluate(candidate, s);
    ASSERT_TRUE(part.ok()) << part.status().ToString();
    auto read = EvalReport::FromShardJson(part->ToJson(), "part " + std::to_string(i));  // through the file format
    ASSERT_TRUE(read.ok()) << read.status().ToString();
    parts.push_back(std::move(read).value());
  }
  auto merged = MergeEvalReports(parts);
  ASSERT_TRUE(merged.ok()) << merged.status().ToString();
  const EvalReport& m = *merged;
  EXPECT_EQ(m.samples, one->samples);
  EXPECT_EQ(m.batches, one->batches);
  EXPECT_EQ(m.top1_correct, one->top1_correct);
  EXPECT_EQ(m.top5_correct, one->top5_correct);
  EXPECT_EQ(m.top1_agree, one->top1_agree);
  EXPECT_EQ(m.top1_rows, one->top1_rows);
  EXPECT_LT(one->top1_correct, one->samples * 1);  // the numbers are not trivial
  EXPECT_GT(one->top1_correct, 0);
  ASSERT_EQ(m.comparisons.size(), one->comparisons.size());
  for (size_t i = 0; i < m.comparisons.size(); ++i) {
    EXPECT_EQ(m.comparisons[i].elements, one->comparisons[i].elements);
    EXPECT_EQ(m.comparisons[i].max_abs_error, one->comparisons[i].max_abs_error);  // a max: exact
    ExpectClose(m.comparisons[i].sqnr_db, one->comparisons[i].sqnr_db, "sqnr");
    ExpectClose(m.comparisons[i].cosine, one->comparisons[i].cosine, "cosine");
  }
  EXPECT_TRUE(std::isfinite(one->comparisons[0].sqnr_db));
  EXPECT_EQ(m.task.top5_rows(), one->task.top5_rows());
  ExpectClose(m.task.top5_overlap(), one->task.top5_overlap(), "top5_overlap");
  ExpectClose(m.task.mean_cosine(), one->task.mean_cosine(), "mean_cosine");
  EXPECT_EQ(m.task.min_cosine(), one->task.min_cosine());
  for (Metric metric : {Metric::kTop1, Metric::kTop5, Metric::kAgreement}) {
    EXPECT_EQ(MetricValue(metric, m), MetricValue(metric, *one)) << MetricName(metric);
  }
  EXPECT_EQ(m.latency.timed_batches + m.latency.warmup_batches, 7);

  // Missing and duplicate shards, and parts of another run.
  auto missing = MergeEvalReports({parts[0], parts[1]});
  EXPECT_NE(missing.status().message().find("missing"), std::string::npos) << missing.status().ToString();
  auto twice = MergeEvalReports({parts[0], parts[1], parts[2], parts[1]});
  EXPECT_NE(twice.status().message().find("given twice"), std::string::npos) << twice.status().ToString();
  EvalReport other = parts[0];
  other.model = "another.onnx";
  EXPECT_EQ(MergeEvalReports({other, parts[1], parts[2]}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(EvalReport::FromShardJson(one->ToJson(), "whole").status().code(), StatusCode::kCorruption);
  EXPECT_EQ(EvalReport::FromShardJson("{\"partial\": ", "cut").status().code(), StatusCode::kCorruption);
}

// map_iou's counts add exactly: the merged shards give the one run's IoU,
// not a mean of the shards' IoUs; shards of another threshold do not merge.
TEST(EvalShards, MergedMapIouIsTheOneRunsExactly) {
  testing::TempDir dir;
  auto model = LoadModel(kDigits + "digits_cnn.onnx");
  ASSERT_TRUE(model.ok());
  for (auto& [name, w] : model->graph.initializers) {  // a candidate that differs: one conv weight scaled
    if (w.dtype() != DataType::kFloat32 || w.numel() < 16) continue;
    for (int64_t i = 0; i < w.numel(); i += 2) w.data<float>()[i] *= 1.3f;
    break;
  }
  const std::string candidate = dir.path("candidate.onnx");
  ASSERT_TRUE(SaveModel(*model, candidate).ok());
  EvalOptions o;
  o.inputs = kDigits + "eval.npz";
  o.reference = kDigits + "digits_cnn.onnx";
  o.batch = 16;
  o.limit = 100;
  o.threads = 2;
  o.map.enabled = true;
  o.map.threshold = 0.5;  // logits above 0.5
  auto one = Evaluate(candidate, o);
  ASSERT_TRUE(one.ok()) << one.status().ToString();
  ASSERT_GT(one->task.map_union(), 0);
  ASSERT_LT(one->task.map_intersection(), one->task.map_union());  // not trivially 1
  std::vector<EvalReport> parts;
  for (int i : {1, 0, 2}) {
    EvalOptions s = o;
    s.shard = i;
    s.shards = 3;
    auto part = Evaluate(candidate, s);
    ASSERT_TRUE(part.ok()) << part.status().ToString();
    auto read = EvalReport::FromShardJson(part->ToJson(), "part " + std::to_string(i));
    ASSERT_TRUE(read.ok()) << read.status().ToString();
    parts.push_back(std::move(read).value());
  }
  auto merged = MergeEvalReports(parts);
  ASSERT_TRUE(merged.ok()) << merged.status().ToString();
  EXPECT_EQ(merged->task.map_elements(), one->task.map_elements());
  EXPECT_EQ(merged->task.map_intersection(), one->task.map_intersection());
  EXPECT_EQ(merged->task.map_union(), one->task.map_union());
  EXPECT_EQ(MetricValue(Metric::kMapIou, *merged), MetricValue(Metric::kMapIou, *one));
  EXPECT_DOUBLE_EQ(merged->task.map_options().threshold, 0.5);

  EvalOptions other = o;
  other.map.threshold = 0.3;
  other.shard = 0;
  other.shards = 3;
  auto at_03 = Evaluate(candidate, other);
  ASSERT_TRUE(at_03.ok());
  auto mixed = MergeEvalReports({*at_03, parts[0], parts[2]});  // parts[0] is shard 1, parts[2] shard 2
  ASSERT_FALSE(mixed.ok());
  EXPECT_NE(mixed.status().message().find("map options"), std::string::npos) << mixed.status().message();
}

}  // namespace
}  // namespace sparq
