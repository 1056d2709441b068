// quantize.search end to end on the bundled digits example: the default
// recipe searches, deterministically, reports its table; search: off is the
// single pass it replaces.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "sparq/file_io.h"
#include "sparq/npy.h"
#include "sparq/onnx_io.h"
#include "sparq/pipeline.h"
#include "sparq/search.h"
#include "test_util.h"
#include "tests/pipeline/digits_recipe.h"

namespace sparq {
namespace {

const std::string kDigits = std::string(SPARQ_SOURCE_DIR) + "/examples/digits/";

// 128 calibration samples in batches of 16: 8 batches, 6 fit and 2 held out.
Recipe MakeRecipe(const std::string& out_dir, const std::string& extra) {
  return testing::DigitsRecipe(out_dir, extra, "  batch_size: 16\n");
}

TEST(Search, DefaultRecipeSearchesAndReportsItsTable) {
  testing::TempDir dir;
  std::vector<std::string> log;
  PipelineOptions o;
  o.on_log = [&](const std::string& line) { log.push_back(line); };
  auto report = RunRecipe(MakeRecipe(dir.root(), "evaluate: {threads: 2}\n"), o);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  ASSERT_EQ(report->search.size(), DefaultSearchCandidates().size());
  int chosen = 0;
  for (const SearchRow& row : report->search) {
    chosen += row.chosen;
    EXPECT_EQ(row.metric, "agreement");  // top1 needs labels the calibration data lacks
    if (row.tried) EXPECT_GE(row.score, 0.0) << row.candidate;
    else EXPECT_FALSE(row.note.empty()) << row.candidate;
  }
  EXPECT_EQ(chosen, 1);
  // The digits CNN has no MatMul/Gemm input with outlier channels.
  auto smooth = std::find_if(report->search.begin(), report->search.end(),
                             [](const SearchRow& r) { return r.candidate == "max+inputs_only+smooth"; });
  ASSERT_NE(smooth, report->search.end());
  EXPECT_FALSE(smooth->tried);
  EXPECT_TRUE(std::any_of(log.begin(), log.end(), [](const std::string& l) { return l.rfind("search: chose ", 0) == 0; }));
  EXPECT_TRUE(std::any_of(report->stage_seconds.begin(), report->stage_seconds.end(),
                          [](const auto& s) { return s.first == "search"; }));
  auto json = ReadFile(dir.path("report.json"));
  auto md = ReadFile(dir.path("report.md"));
  ASSERT_TRUE(json.ok() && md.ok());
  EXPECT_NE(json->find("\"search\""), std::string::npos);
  EXPECT_NE(json->find("\"held_out_score\""), std::string::npos);
  EXPECT_NE(md->find("| candidate | held-out agreement |"), std::string::npos) << *md;
  EXPECT_NE(md->find("**yes**"), std::string::npos);
  EXPECT_NE(report->ToText().find("  search      "), std::string::npos);
}

TEST(Search, SameModelBytesForAnyThreadCount) {
  testing::TempDir a, b;
  auto ra = RunRecipe(MakeRecipe(a.root(), "evaluate: {threads: 1}\n"));
  auto rb = RunRecipe(MakeRecipe(b.root(), "evaluate: {threads: 2}\n"));
  ASSERT_TRUE(ra.ok() && rb.ok());
  ASSERT_FALSE(ra->search.empty());
  EXPECT_EQ(*ReadFile(ra->output_model), *ReadFile(rb->output_model));
  for (size_t i = 0; i < ra->search.size(); ++i) {
    EXPECT_EQ(ra->search[i].chosen, rb->search[i].chosen) << ra->search[i].candidate;
    if (ra->search[i].tried) EXPECT_EQ(ra->search[i].score, rb->search[i].score) << ra->search[i].candidate;
  }
}

TEST(Search, OffIsTheSinglePass) {
  testing::TempDir dir;
  std::vector<std::string> log;
  PipelineOptions o;
  o.on_log = [&](const std::string& line) { log.push_back(line); };
  auto report = RunRecipe(MakeRecipe(dir.root(), "quantize: {search: off}\nevaluate: {threads: 2}\n"), o);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_TRUE(report->search.empty());
  EXPECT_TRUE(std::none_of(log.begin(), log.end(), [](const std::string& l) { return l.rfind("search", 0) == 0; }));
  EXPECT_TRUE(std::any_of(log.begin(), log.end(), [](const std::string& l) { return l.rfind("calibrate (kl)", 0) == 0; }));
  EXPECT_EQ(ReadFile(dir.path("report.json"))->find("\"search\""), std::string::npos);
}

// A budget spent by the first candidate: the rest are listed, not tried, and
// the report says the choice depended on time.
TEST(Search, BudgetStopsLaterCandidatesAndSaysSo) {
  testing::TempDir dir;
  auto report = RunRecipe(MakeRecipe(dir.root(), "quantize:\n  search: {budget_s: 1.0e-9, candidates: [max, kl]}\n"
                                                 "evaluate: {threads: 2}\n"));
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  ASSERT_EQ(report->search.size(), 2u);
  EXPECT_TRUE(report->search[0].tried && report->search[0].chosen);
  EXPECT_FALSE(report->search[1].tried);
  EXPECT_EQ(report->search[1].note, "not tried: budget");
  EXPECT_TRUE(std::any_of(report->warnings.begin(), report->warnings.end(),
                          [](const std::string& w) { return w.find("budget_s") != std::string::npos; }));
}

TEST(Search, CandidatesParse) {
  auto c = ParseSearchCandidate("percentile=99.9999+asymmetric+bias_correction");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->calibration.method, CalibrationMethod::kPercentile);
  EXPECT_DOUBLE_EQ(c->calibration.percentile, 99.9999);
  EXPECT_FALSE(c->calibration.symmetric);
  EXPECT_TRUE(c->bias_correction);
  EXPECT_TRUE(c->quantize_outputs);
  c = ParseSearchCandidate("entropy+inputs_only+smooth");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->calibration.method, CalibrationMethod::kKL);
  EXPECT_FALSE(c->quantize_outputs);
  EXPECT_TRUE(c->smooth);
  for (const char* bad : {"", "max+", "max+max", "percentile=101", "percentile=x", "max+smooth+bias_correction",
                          "max+inputs_only+inputs_only"})
    EXPECT_FALSE(ParseSearchCandidate(bad).ok()) << bad;
  for (const std::string& name : DefaultSearchCandidates()) EXPECT_TRUE(ParseSearchCandidate(name).ok()) << name;
}

// madmom's output layer: a 50-weight MatMul, whose INT8 form is larger than
// its float one. The default recipe (search on) keeps it FP32 and says why;
// a recipe that names a calibration (search off) quantizes it as before.
StatusOr<RunReport> RunSmallMatMul(const testing::TempDir& dir, const std::string& quantize) {
  Model m;
  m.opset_imports = {{"", 17}};
  m.graph.inputs.push_back(testing::FloatInput("x", {{-1, "n"}, {50, ""}}));
  m.graph.outputs.push_back(testing::FloatInput("y", {{-1, "n"}, {1, ""}}));
  m.graph.initializers["w"] = testing::RandomFloats({50, 1}, 5, -0.5f, 0.5f);
  m.graph.nodes.push_back({"fc", "MatMul", "", {"x", "w"}, {"y"}, {}, ""});
  SPARQ_RETURN_IF_ERROR(SaveModel(m, dir.path("model.onnx")));
  SPARQ_RETURN_IF_ERROR(WriteNpz(dir.path("x.npz"), {{"x", testing::RandomFloats({32, 50}, 6)}}));
  auto r = ParseRecipe("version: 1\nmodel: model.onnx\ndata: {calibration: x.npz, evaluation: x.npz, batch_size: 8}\n"
                       "output: {dir: out, overwrite: true}\nevaluate: {metric: sqnr, gate: {min_sqnr_db: 20}}\n" +
                           quantize,
                       dir.root(), "r.yaml");
  if (!r.ok()) return r.status();
  return RunRecipe(*r, PipelineOptions{});
}

TEST(Search, DefaultRecipeKeepsAMatMulTooSmallForInt8Float) {
  testing::TempDir dir;
  auto report = RunSmallMatMul(dir, "");
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_FALSE(report->search.empty());
  EXPECT_EQ(report->quantized_layers, 0);
  ASSERT_EQ(report->layers.size(), 1u);
  EXPECT_EQ(report->layers[0].precision, Precision::kFP32);
  EXPECT_NE(report->layers[0].reason.find("too small for INT8: 50 weights save 150 bytes"), std::string::npos)
      << report->layers[0].reason;
  EXPECT_NE(report->nothing_quantized.find("too small for INT8"), std::string::npos) << report->nothing_quantized;

  testing::TempDir named;
  auto single = RunSmallMatMul(named, "quantize: {calibration: {method: max}}\n");
  ASSERT_TRUE(single.ok()) << single.status().ToString();
  EXPECT_TRUE(single->search.empty());
  EXPECT_EQ(single->quantized_layers, 1);
}

}  // namespace
}  // namespace sparq
