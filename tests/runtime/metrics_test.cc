// Task metrics against a reference output (sparq/metrics.h: top-5 overlap,
// per-sample cosine, CTC greedy decoding and character error rate). The same
// cases, in numpy, are in tests/python/test_real_suite.py.
#include "sparq/metrics.h"

#include <gtest/gtest.h>

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

TEST(TaskMetrics, RecipeNamesTheTaskMetrics) {
  RecipeParseOptions options;
  options.check_files = false;
  for (const char* name : {"top5_overlap", "mean_cosine", "ctc_accuracy"}) {
    const std::string yaml = std::string("version: 1\nmodel: m.onnx\ndata:\n  calibration: c.npz\n"
                                         "  evaluation: e.npz\nevaluate:\n  metric: ") + name + "\n";
    StatusOr<Recipe> r = ParseRecipe(yaml, "/project", "r.yaml", options);
    ASSERT_TRUE(r.ok()) << name << ": " << r.status().ToString();
    EXPECT_STREQ(RecipeEnumName(r->evaluate.metric), name);
  }
}

}  // namespace
}  // namespace sparq
