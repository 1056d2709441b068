// What the search scores its candidates by on the held-out calibration
// batches (quant/search.cc HeldOutMetric).
#include <gtest/gtest.h>

#include "quant/search_choice.h"
#include "sparq/dataset.h"
#include "sparq/npy.h"
#include "sparq/search.h"
#include "test_util.h"
#include "tests/quant/tiny_detector.h"

namespace sparq {
namespace {

StatusOr<SearchResult> SearchTinyDetector(const testing::TempDir& dir, Metric metric) {
  Model model = testing::TinyDetector();
  SPARQ_RETURN_IF_ERROR(WriteNpz(dir.path("x.npz"), {{"x", testing::RandomFloats({32, 8}, 7, 0.0f, 1.0f)}}));
  // 8 batches of 4: every 4th held out.
  SPARQ_ASSIGN_OR_RETURN(BatchSource data, OpenDataset(dir.path("x.npz"), model.graph, DatasetOptions{4, 0, {}}));
  SearchOptions o;
  for (const char* spec : {"max", "max+inputs_only", "percentile=99"}) {
    SPARQ_ASSIGN_OR_RETURN(SearchCandidate c, ParseSearchCandidate(spec));
    o.candidates.push_back(c);
  }
  o.metric = metric;
  o.boxes.enabled = MetricNeedsBoxes(metric);
  o.threads = 1;
  return SearchQuantization(model, data, QuantizeOptions{}, o);
}

// A few held-out photos hold too few boxes for box recall to tell
// candidates apart: box_recall is scored by the class scores' SQNR.
TEST(SearchHeldOut, BoxRecallIsScoredByTheClassScores) {
  testing::TempDir dir;
  auto result = SearchTinyDetector(dir, Metric::kBoxRecall);
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  ASSERT_EQ(result->rows.size(), 3u);
  const SearchRow* chosen = nullptr;
  for (const SearchRow& row : result->rows) {
    EXPECT_EQ(row.metric, "class_score_sqnr") << row.candidate;
    ASSERT_TRUE(row.tried) << row.candidate;
    EXPECT_GT(row.score, 0.0) << row.candidate;  // dB, not a recall in [0, 100] that saturates
    if (row.chosen) chosen = &row;
  }
  ASSERT_NE(chosen, nullptr);
  for (const SearchRow& row : result->rows) EXPECT_LE(row.score, chosen->score + kSearchDbMargin) << row.candidate;
}

// Other metrics are scored as written (label-free kin aside).
TEST(SearchHeldOut, OtherMetricsAreScoredAsWritten) {
  testing::TempDir dir;
  auto result = SearchTinyDetector(dir, Metric::kSqnr);
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  for (const SearchRow& row : result->rows) EXPECT_EQ(row.metric, "sqnr") << row.candidate;
}

SearchRow Row(double score, double sqnr_db) {
  SearchRow row;
  row.tried = true;
  row.score = score;
  row.sqnr_db = sqnr_db;
  return row;
}

// A score in dB must beat the earlier best by more than 0.5 dB (silero_vad
// chose 42.89 over 42.46 dB and lost 0.5% of its speech decisions); other
// metrics by any amount, their ties by the SQNR with the same margin.
TEST(SearchChoice, ScoresInDbNeedAMargin) {
  for (Metric m : {Metric::kSqnr, Metric::kClassScoreSqnr}) {
    EXPECT_FALSE(SearchRowBeats(Row(42.89, 42.89), Row(42.46, 42.46), m));
    EXPECT_FALSE(SearchRowBeats(Row(42.95, 42.95), Row(42.46, 42.46), m));  // within the margin
    EXPECT_TRUE(SearchRowBeats(Row(42.97, 42.97), Row(42.46, 42.46), m));
    EXPECT_FALSE(SearchRowBeats(Row(40.0, 40.0), Row(42.46, 42.46), m));
  }
  EXPECT_TRUE(SearchRowBeats(Row(98.6, 10.0), Row(98.5, 30.0), Metric::kAgreement));  // the metric decides
  EXPECT_FALSE(SearchRowBeats(Row(98.5, 30.4), Row(98.5, 30.0), Metric::kAgreement));  // a tie: SQNR by > 0.5 dB
  EXPECT_TRUE(SearchRowBeats(Row(98.5, 30.6), Row(98.5, 30.0), Metric::kAgreement));
  EXPECT_FALSE(SearchRowBeats(Row(0.98, 16.0), Row(0.99, 13.0), Metric::kMeanCosine));
}

}  // namespace
}  // namespace sparq
