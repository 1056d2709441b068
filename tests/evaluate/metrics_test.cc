// Task metrics against a reference output (sparq/metrics.h: top-5 overlap,
// per-sample cosine, CTC greedy decoding and character error rate). The same
// cases, in numpy, are in tests/python/test_real_suite.py.
#include "sparq/metrics.h"

#include <gtest/gtest.h>

#include "sparq/evaluate.h"
#include "sparq/recipe.h"

#include <cmath>

namespace sparq {
namespace {

TEST(TaskMetrics, TopKOverlapCountsSharedClassesPerRow) {
  // Row 0: top-2 {3, 2} vs {3, 1}: 1 shared. Row 1: {0, 1} vs {1, 0}: 2 shared.
  Tensor ref = Tensor::FromVector<float>({2, 4}, {0, 1, 2, 3, 9, 8, 1, 0});
  Tensor out = Tensor::FromVector<float>({2, 4}, {0, 2, 1, 3, 8, 9, 1, 0});
  EXPECT_DOUBLE_EQ(*SumTopKOverlap(ref, out, 2), 0.5 + 1.0);
  EXPECT_DOUBLE_EQ(*SumTopKOverlap(ref, out, 1), 1.0 + 0.0);
  // k beyond the row: the whole row, always all shared.
  EXPECT_DOUBLE_EQ(*SumTopKOverlap(ref, out, 9), 2.0);
  // Ties go to the lower index: {0, 1} in both.
  Tensor flat = Tensor::FromVector<float>({1, 3}, {1, 1, 1});
  EXPECT_DOUBLE_EQ(*SumTopKOverlap(flat, flat, 2), 1.0);
  // NaN never ranks: out's top-1 is class 1, not the NaN.
  Tensor nan = Tensor::FromVector<float>({1, 3}, {NAN, 5, 1});
  Tensor top1 = Tensor::FromVector<float>({1, 3}, {0, 5, 1});
  EXPECT_DOUBLE_EQ(*SumTopKOverlap(top1, nan, 1), 1.0);
}

TEST(TaskMetrics, TopKOverlapErrors) {
  Tensor a = Tensor::FromVector<float>({2, 2}, {1, 2, 3, 4});
  EXPECT_FALSE(SumTopKOverlap(a, a, 0).ok());
  auto shape = SumTopKOverlap(a, Tensor::FromVector<float>({4}, {1, 2, 3, 4}), 1);
  ASSERT_FALSE(shape.ok());
  EXPECT_NE(shape.status().message().find("differs from the reference"), std::string::npos)
      << shape.status().message();
}

TEST(TaskMetrics, SampleCosinesPerSample) {
  Tensor ref = Tensor::FromVector<float>({3, 2}, {1, 0, 1, 1, 0, 0});
  Tensor out = Tensor::FromVector<float>({3, 2}, {0, 1, 2, 2, 0, 0});
  auto cos = SampleCosines(ref, out);
  ASSERT_TRUE(cos.ok());
  ASSERT_EQ(cos->size(), 3u);
  EXPECT_NEAR((*cos)[0], 0.0, 1e-15);
  EXPECT_NEAR((*cos)[1], 1.0, 1e-15);
  EXPECT_EQ((*cos)[2], 1.0);  // both zero
  EXPECT_FALSE(SampleCosines(Tensor::Scalar<float>(1), Tensor::Scalar<float>(1)).ok());
}

TEST(TaskMetrics, CtcGreedyDecodeMergesRepeatsAndDropsBlanks) {
  // Steps argmax: 1 1 0 1 2 2 -> "1 1 2" (the blank splits the two 1s).
  std::vector<float> v;
  for (int c : {1, 1, 0, 1, 2, 2}) {
    for (int k = 0; k < 3; ++k) v.push_back(k == c ? 1.0f : 0.0f);
  }
  auto seqs = CtcGreedyDecode(Tensor::FromVector<float>({1, 6, 3}, v), 0);
  ASSERT_TRUE(seqs.ok());
  ASSERT_EQ(seqs->size(), 1u);
  EXPECT_EQ((*seqs)[0], (std::vector<int64_t>{1, 1, 2}));
  EXPECT_FALSE(CtcGreedyDecode(Tensor::FromVector<float>({3}, {1, 2, 3}), 0).ok());
}

TEST(TaskMetrics, EditDistance) {
  EXPECT_EQ(EditDistance({1, 2, 3}, {1, 2, 3}), 0);
  EXPECT_EQ(EditDistance({1, 2, 3}, {1, 3}), 1);
  EXPECT_EQ(EditDistance({}, {4, 5}), 2);
  EXPECT_EQ(EditDistance({1, 2, 3, 4}, {2, 1, 3, 5}), 3);
}

TEST(TaskMetrics, ReferenceMetricsAccumulateOverBatches) {
  ReferenceMetrics m;
  // Not counted yet: NaN, so a gate on it cannot pass.
  EXPECT_TRUE(std::isnan(m.top5_overlap()));
  EXPECT_TRUE(std::isnan(m.mean_cosine()));
  EXPECT_TRUE(std::isnan(m.ctc_cer()));
  // Two batches of one [1, T=2, C=2] sample: FP32 reads "1", then "1";
  // the output reads "1", then nothing: 1 edit in 2 characters.
  Tensor one = Tensor::FromVector<float>({1, 2, 2}, {0, 1, 0, 1});
  Tensor blank = Tensor::FromVector<float>({1, 2, 2}, {1, 0, 1, 0});
  ASSERT_TRUE(m.Add(one, one).ok());
  ASSERT_TRUE(m.Add(one, blank).ok());
  EXPECT_EQ(m.ctc_samples(), 2);
  EXPECT_EQ(m.ctc_reference_chars(), 2);
  EXPECT_EQ(m.ctc_edits(), 1);
  EXPECT_DOUBLE_EQ(m.ctc_cer(), 0.5);
  EXPECT_EQ(m.cosine_samples(), 2);
  EXPECT_NEAR(m.mean_cosine(), 0.5, 1e-15);  // 1, then 0 (orthogonal)
  EXPECT_NEAR(m.min_cosine(), 0.0, 1e-15);
  EXPECT_EQ(m.top5_rows(), 4);
  EXPECT_DOUBLE_EQ(m.top5_overlap(), 1.0);  // 2 classes: top-5 is the whole row

  // A rank-2 output has no CTC reading.
  ReferenceMetrics flat;
  ASSERT_TRUE(flat.Add(Tensor::FromVector<float>({1, 2}, {0, 1}), Tensor::FromVector<float>({1, 2}, {0, 1})).ok());
  EXPECT_TRUE(std::isnan(flat.ctc_cer()));
  EXPECT_FALSE(flat.Add(Tensor::FromVector<float>({1, 2}, {0, 1}), Tensor::FromVector<float>({2}, {0, 1})).ok());
}

// A YOLO-style output [1, 4 + 2, 4] (rows cx, cy, w, h, score of class 0,
// score of class 1; one column per anchor):
//   anchor 0: box 5..15 x 5..15,  class 0 at 0.9
//   anchor 1: box 6..16 x 5..15,  class 1 at 0.8 (IoU 0.818 with anchor 0)
//   anchor 2: box 40..60 x 40..60, class 1 at 0.3
//   anchor 3: box 75..85 x 75..85, best 0.24: below the 0.25 threshold
Tensor YoloOutput(float a0_cx, float a0_score, float a2_score) {
  return Tensor::FromVector<float>({1, 6, 4}, {a0_cx, 11, 50, 80,             // cx
                                               10, 10, 50, 80,                // cy
                                               10, 10, 20, 10,                // w
                                               10, 10, 20, 10,                // h
                                               a0_score, 0.1f, 0.2f, 0.24f,   // class 0
                                               0.1f, 0.8f, a2_score, 0.1f});  // class 1
}

TEST(TaskMetrics, DecodeYoloBoxesThresholdsSortsAndSuppresses) {
  Tensor pred = YoloOutput(10, 0.9f, 0.3f);
  // Class-agnostic NMS at 0.7 drops anchor 1 (IoU 0.818 with anchor 0, another class).
  auto boxes = DecodeYoloBoxes(pred, 0.25, 0.7);
  ASSERT_TRUE(boxes.ok()) << boxes.status().ToString();
  ASSERT_EQ(boxes->size(), 1u);
  ASSERT_EQ((*boxes)[0].size(), 2u);
  const DetectedBox& first = (*boxes)[0][0];
  EXPECT_DOUBLE_EQ(first.x1, 5);
  EXPECT_DOUBLE_EQ(first.y2, 15);
  EXPECT_FLOAT_EQ(static_cast<float>(first.score), 0.9f);
  EXPECT_EQ(first.cls, 0);
  EXPECT_EQ((*boxes)[0][1].cls, 1);
  EXPECT_FLOAT_EQ(static_cast<float>((*boxes)[0][1].score), 0.3f);
  // A looser NMS keeps it, in score order; a higher threshold keeps anchor 0 only.
  auto loose = DecodeYoloBoxes(pred, 0.25, 0.9);
  ASSERT_EQ((*loose)[0].size(), 3u);
  EXPECT_FLOAT_EQ(static_cast<float>((*loose)[0][1].score), 0.8f);
  EXPECT_EQ((*DecodeYoloBoxes(pred, 0.35, 0.7))[0].size(), 1u);
  // [4 + C, A] is one sample.
  Tensor one = *pred.Reshaped({6, 4});
  EXPECT_EQ(DecodeYoloBoxes(one, 0.25, 0.7)->at(0).size(), 2u);
  EXPECT_NEAR(BoxIou((*loose)[0][0], (*loose)[0][1]), 90.0 / 110.0, 1e-12);
}

TEST(TaskMetrics, DecodeYoloBoxesErrors) {
  auto rank = DecodeYoloBoxes(Tensor::FromVector<float>({6}, {1, 2, 3, 4, 5, 6}), 0.25, 0.7);
  ASSERT_FALSE(rank.ok());
  EXPECT_NE(rank.status().message().find("[N, 4 + classes, anchors]"), std::string::npos) << rank.status().message();
  EXPECT_FALSE(DecodeYoloBoxes(Tensor::FromVector<float>({1, 4, 1}, {1, 2, 3, 4}), 0.25, 0.7).ok());  // no class row
  EXPECT_TRUE(CheckBoxOptions(BoxOptions{}).ok());
  BoxOptions bad;
  bad.nms_iou = 0.0;
  Status s = CheckBoxOptions(bad);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("nms_iou"), std::string::npos) << s.message();
  bad.nms_iou = NAN;
  EXPECT_FALSE(CheckBoxOptions(bad).ok());
}

TEST(TaskMetrics, MatchBoxesNeedsTheClassAndTheIoU) {
  const DetectedBox ref{0, 0, 10, 10, 0.5, 2};
  EXPECT_EQ(MatchBoxes({ref}, {{0, 0, 10, 10, 0.5, 1}}, 0.5).matched, 0);  // another class
  EXPECT_EQ(MatchBoxes({ref}, {{5, 0, 15, 10, 0.5, 2}}, 0.5).matched, 0);  // IoU 1/3
  // The candidate with the highest IoU wins; each candidate matches once.
  BoxMatch m = MatchBoxes({ref, {0, 0, 10, 10, 0.4, 2}}, {{1, 0, 11, 10, 0.45, 2}, {0, 0, 10, 10, 0.6, 2}}, 0.5);
  EXPECT_EQ(m.matched, 2);
  EXPECT_NEAR(m.score_drift, 0.1 + 0.05, 1e-12);
}

TEST(TaskMetrics, ReferenceMetricsMatchBoxesOverBatches) {
  BoxOptions options;
  options.enabled = true;
  ReferenceMetrics boxes(options);
  // Batch 1: anchor 2 drops to 0.24 (lost), anchor 0 moves by 0.5 px (IoU 0.905) and its score by 0.05.
  ASSERT_TRUE(boxes.Add(YoloOutput(10, 0.9f, 0.3f), YoloOutput(10.5f, 0.85f, 0.24f)).ok());
  EXPECT_EQ(boxes.reference_boxes(), 2);
  EXPECT_EQ(boxes.candidate_boxes(), 1);
  EXPECT_EQ(boxes.matched_boxes(), 1);
  EXPECT_DOUBLE_EQ(boxes.box_recall(), 0.5);
  // Batch 2: identical.
  ASSERT_TRUE(boxes.Add(YoloOutput(10, 0.9f, 0.3f), YoloOutput(10, 0.9f, 0.3f)).ok());
  EXPECT_EQ(boxes.box_samples(), 2);
  EXPECT_DOUBLE_EQ(boxes.box_recall(), 3.0 / 4.0);
  EXPECT_DOUBLE_EQ(boxes.box_precision(), 1.0);
  EXPECT_NEAR(boxes.score_drift(), 0.05 / 3.0, 1e-7);
  // The class-score SQNR leaves the box rows out.
  Tensor ref = Tensor::FromVector<float>({1, 5, 2}, {100, 100, 100, 100, 100, 100, 100, 100, 3, 4});
  Tensor out = Tensor::FromVector<float>({1, 5, 2}, {0, 0, 0, 0, 0, 0, 0, 0, 3, 3});
  ReferenceMetrics scores(options);
  ASSERT_TRUE(scores.Add(ref, out).ok());
  EXPECT_NEAR(scores.class_score_sqnr_db(), 10.0 * std::log10(25.0), 1e-9);
  ASSERT_TRUE(scores.Add(ref, ref).ok());  // an identical batch adds signal, no noise
  EXPECT_NEAR(scores.class_score_sqnr_db(), 10.0 * std::log10(50.0), 1e-9);
  // Off (the default), or an output that is not a detector's: NaN, so a gate on it fails.
  ReferenceMetrics off;
  ASSERT_TRUE(off.Add(YoloOutput(10, 0.9f, 0.3f), YoloOutput(10, 0.9f, 0.3f)).ok());
  EXPECT_TRUE(std::isnan(off.box_recall()));
  ReferenceMetrics flat(options);
  ASSERT_TRUE(flat.Add(Tensor::FromVector<float>({1, 6}, {1, 2, 3, 4, 5, 6}),
                       Tensor::FromVector<float>({1, 6}, {1, 2, 3, 4, 5, 6})).ok());
  EXPECT_TRUE(std::isnan(flat.box_recall()));
  EXPECT_TRUE(std::isnan(flat.class_score_sqnr_db()));
  // FP32 without boxes: every box found (1), as the numpy definition.
  ReferenceMetrics none(options);
  Tensor empty = Tensor::FromVector<float>({1, 5, 1}, {10, 10, 4, 4, 0.1f});
  ASSERT_TRUE(none.Add(empty, empty).ok());
  EXPECT_EQ(none.reference_boxes(), 0);
  EXPECT_DOUBLE_EQ(none.box_recall(), 1.0);
}

TEST(TaskMetrics, BoxMetricValues) {
  EXPECT_TRUE(MetricIsPercent(Metric::kBoxRecall));  // fractions in JSON
  EXPECT_FALSE(MetricIsPercent(Metric::kClassScoreSqnr));
  EXPECT_TRUE(MetricNeedsBoxes(Metric::kBoxRecall) && MetricNeedsBoxes(Metric::kClassScoreSqnr));
  EvalReport fp32;  // the reference's own report: the best value
  EXPECT_DOUBLE_EQ(MetricValue(Metric::kBoxRecall, fp32), 100.0);
  EXPECT_DOUBLE_EQ(MetricValue(Metric::kClassScoreSqnr, fp32), kSqnrCeilingDb);
  EvalReport candidate;
  candidate.has_reference = true;  // boxes not decoded: NaN, so a gate on them fails
  EXPECT_TRUE(std::isnan(MetricValue(Metric::kBoxRecall, candidate)));
  EXPECT_TRUE(std::isnan(MetricValue(Metric::kClassScoreSqnr, candidate)));
  BoxOptions options;
  options.enabled = true;
  candidate.task = ReferenceMetrics(options);
  ASSERT_TRUE(candidate.task.Add(YoloOutput(10, 0.9f, 0.3f), YoloOutput(10.5f, 0.85f, 0.24f)).ok());
  EXPECT_DOUBLE_EQ(MetricValue(Metric::kBoxRecall, candidate), 50.0);
  EXPECT_LT(MetricValue(Metric::kClassScoreSqnr, candidate), kSqnrCeilingDb);
  EXPECT_EQ(*ParseMetric("box_recall"), Metric::kBoxRecall);
  EXPECT_EQ(*ParseMetric("class_score_sqnr"), Metric::kClassScoreSqnr);
}

// Issue 24: a probability map read through a threshold (basic-pitch's note
// posteriorgram) is scored by the IoU of the thresholded maps, pooled over
// every element, as tools/real_suite_metrics.py's binary_map_iou.
TEST(TaskMetrics, ThresholdedMapIouByHand) {
  const float nan = std::nanf("");
  // At 0.5: the reference is above at {1, 2, 4} (NaN never is), the output at
  // {2, 3, 4, 5}: both at {2, 4}, either at {1, 2, 3, 4, 5}: 2 / 5.
  const Tensor ref = Tensor::FromVector<float>({1, 6}, {0.1f, 0.6f, 0.7f, 0.2f, 0.9f, nan});
  const Tensor out = Tensor::FromVector<float>({1, 6}, {0.4f, 0.2f, 0.8f, 0.6f, 0.9f, 0.7f});
  auto overlap = ThresholdedMapOverlap(ref, out, 0.5);
  ASSERT_TRUE(overlap.ok()) << overlap.status().ToString();
  EXPECT_EQ(overlap->intersection, 2);
  EXPECT_EQ(overlap->union_count, 5);
  // Strictly above: a value equal to the threshold is off.
  auto at = ThresholdedMapOverlap(Tensor::FromVector<float>({2}, {0.5f, 0.6f}),
                                  Tensor::FromVector<float>({2}, {0.5f, 0.4f}), 0.5);
  ASSERT_TRUE(at.ok());
  EXPECT_EQ(at->intersection, 0);
  EXPECT_EQ(at->union_count, 1);

  MapOptions options;
  options.enabled = true;
  options.threshold = 0.5;
  ReferenceMetrics m(BoxOptions{}, options);
  ASSERT_TRUE(m.Add(ref, out).ok());
  const Tensor quiet = Tensor::FromVector<float>({1, 6}, {0, 0.1f, 0.2f, 0.3f, 0.4f, 0.5f});  // nothing above
  ASSERT_TRUE(m.Add(quiet, quiet).ok());
  EXPECT_EQ(m.map_elements(), 12);
  EXPECT_EQ(m.map_intersection(), 2);
  EXPECT_EQ(m.map_union(), 5);
  EXPECT_DOUBLE_EQ(m.map_iou(), 0.4);  // pooled: the quiet batch adds nothing, not a per-batch 1.0

  // Shards: two halves merged (and through their sums) give the one run's counts exactly.
  ReferenceMetrics a(BoxOptions{}, options), b(BoxOptions{}, options);
  ASSERT_TRUE(a.Add(ref, out).ok());
  ASSERT_TRUE(b.Add(quiet, quiet).ok());
  ReferenceMetrics merged = ReferenceMetrics::FromSums(BoxOptions{}, a.sums(), options);
  merged.Merge(ReferenceMetrics::FromSums(BoxOptions{}, b.sums(), options));
  EXPECT_EQ(merged.map_elements(), m.map_elements());
  EXPECT_EQ(merged.map_intersection(), m.map_intersection());
  EXPECT_EQ(merged.map_union(), m.map_union());
  EXPECT_DOUBLE_EQ(merged.map_iou(), m.map_iou());
  EXPECT_DOUBLE_EQ(merged.map_options().threshold, 0.5);

  // Both maps empty: 1; the metric off (or no data): NaN, so a gate on it fails.
  ReferenceMetrics empty(BoxOptions{}, options);
  ASSERT_TRUE(empty.Add(quiet, quiet).ok());
  EXPECT_DOUBLE_EQ(empty.map_iou(), 1.0);
  ReferenceMetrics off;
  ASSERT_TRUE(off.Add(ref, out).ok());
  EXPECT_EQ(off.map_elements(), 0);
  EXPECT_TRUE(std::isnan(off.map_iou()));

  // MetricValue: percent; the reference's own report the best value.
  EXPECT_TRUE(MetricIsPercent(Metric::kMapIou));
  EXPECT_TRUE(MetricNeedsMap(Metric::kMapIou));
  EXPECT_FALSE(MetricNeedsMap(Metric::kSqnr));
  EXPECT_EQ(*ParseMetric("map_iou"), Metric::kMapIou);
  EvalReport fp32;
  EXPECT_DOUBLE_EQ(MetricValue(Metric::kMapIou, fp32), 100.0);
  EvalReport candidate;
  candidate.has_reference = true;
  EXPECT_TRUE(std::isnan(MetricValue(Metric::kMapIou, candidate)));
  candidate.task = m;
  EXPECT_DOUBLE_EQ(MetricValue(Metric::kMapIou, candidate), 40.0);
}

TEST(TaskMetrics, ThresholdedMapIouErrors) {
  // Not a probability map: integer outputs (class ids, counts) are refused, naming the type.
  const Tensor ids = Tensor::FromVector<int64_t>({3}, {0, 1, 2});
  auto ints = ThresholdedMapOverlap(ids, ids, 0.5);
  ASSERT_FALSE(ints.ok());
  EXPECT_NE(ints.status().message().find("int64, not floating point"), std::string::npos) << ints.status().message();
  MapOptions options;
  options.enabled = true;
  ReferenceMetrics m(BoxOptions{}, options);
  EXPECT_EQ(m.Add(ids, ids).code(), StatusCode::kInvalidArgument);
  ReferenceMetrics off;  // map off: integer outputs are fine for the other metrics
  EXPECT_TRUE(off.Add(ids, ids).ok());
  EXPECT_FALSE(ThresholdedMapOverlap(Tensor::FromVector<float>({2}, {0, 1}), Tensor::FromVector<float>({1}, {0}), 0.5)
                   .ok());  // shapes differ
  // The threshold lies in (0, 1).
  for (double t : {0.0, 1.0, -0.5, 2.0, std::nan("")}) {
    options.threshold = t;
    const Status s = CheckMapOptions(options);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << t;
    EXPECT_NE(s.message().find("map threshold must be in (0, 1)"), std::string::npos) << s.message();
  }
  options.threshold = 0.3;
  EXPECT_TRUE(CheckMapOptions(options).ok());
}

TEST(TaskMetrics, RecipeNamesTheTaskMetrics) {
  RecipeParseOptions options;
  options.check_files = false;
  for (const char* name : {"top5_overlap", "mean_cosine", "ctc_accuracy", "box_recall", "map_iou"}) {
    const std::string yaml = std::string("version: 1\nmodel: m.onnx\ndata:\n  calibration: c.npz\n"
                                         "  evaluation: e.npz\nevaluate:\n  metric: ") + name + "\n";
    StatusOr<Recipe> r = ParseRecipe(yaml, "/project", "r.yaml", options);
    ASSERT_TRUE(r.ok()) << name << ": " << r.status().ToString();
    EXPECT_STREQ(RecipeEnumName(r->evaluate.metric), name);
  }
}

}  // namespace
}  // namespace sparq
