// quantize.rounding: adaround: the recipe keys, their refusals, and `sparq
// run` end to end on the digits example (AdaRound on the calibration data,
// INT8 QDQ written, checked and gated).
#include <gtest/gtest.h>

#include <fstream>

#include "sparq/onnx_io.h"
#include "sparq/pipeline.h"
#include "sparq/recipe.h"
#include "test_util.h"
#include "tests/pipeline/digits_recipe.h"

namespace sparq {
namespace {

class AdaRoundRecipeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* f : {"model.onnx", "calib.npz", "eval.npz"}) std::ofstream(dir_.path(f)) << "x";
  }
  StatusOr<Recipe> Parse(const std::string& quantize, const std::string& more = "") {
    return ParseRecipe("model: model.onnx\ndata:\n  calibration: calib.npz\n  evaluation: eval.npz\n" + quantize + more,
                       dir_.root(), "r.yaml");
  }
  std::string Error(const std::string& quantize, const std::string& more = "") {
    auto r = Parse(quantize, more);
    EXPECT_FALSE(r.ok()) << quantize << more;
    return r.ok() ? std::string() : r.status().message();
  }
  testing::TempDir dir_;
};

TEST_F(AdaRoundRecipeTest, ParsesAndDumpsTheKeys) {
  auto off = Parse("quantize:\n  precision: int8\n");
  ASSERT_TRUE(off.ok()) << off.status().ToString();
  EXPECT_EQ(off->quantize.rounding, RecipeQuantize::Rounding::kNearest);
  auto r = Parse("quantize:\n  precision: int8\n  rounding: adaround\n  adaround: {iterations: 300}\n");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->quantize.rounding, RecipeQuantize::Rounding::kAdaRound);
  EXPECT_EQ(r->quantize.adaround.iterations, 300);
  EXPECT_EQ(r->quantize.adaround.regularization, AdaRoundOptions{}.regularization);
  auto again = ParseRecipe(RecipeToYaml(*r), dir_.root(), "effective.yaml");
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(again->quantize.rounding, RecipeQuantize::Rounding::kAdaRound);
  EXPECT_EQ(again->quantize.adaround.iterations, 300);
}

TEST_F(AdaRoundRecipeTest, RefusesWhatAdaRoundCannotDo) {
  EXPECT_NE(Error("quantize:\n  rounding: adaroud\n").find("adaround"), std::string::npos);  // did you mean
  EXPECT_NE(Error("quantize:\n  rounding: adaround\n  adaround: {iterations: 0}\n").find("quantize.adaround.iterations"),
            std::string::npos);
  EXPECT_NE(Error("quantize:\n  rounding: adaround\n  adaround: {iteration: 5}\n").find("iteration"), std::string::npos);
  EXPECT_NE(Error("quantize:\n  precision: fp16\n  rounding: adaround\n").find("quantize.rounding"), std::string::npos);
  EXPECT_NE(Error("quantize:\n  precision: fp8\n  rounding: adaround\n").find("quantize.rounding"), std::string::npos);
  EXPECT_NE(Error("quantize:\n  mode: dynamic\n  rounding: adaround\n").find("quantize.rounding"), std::string::npos);
  EXPECT_NE(Error("quantize:\n  rounding: adaround\n", "output:\n  format: qoperator\n").find("quantize.rounding"),
            std::string::npos);
}

// `sparq run` with rounding adaround on the digits CNN: the gate passes and
// the written model is a valid INT8 QDQ model.
TEST(AdaRoundRun, DigitsEndToEnd) {
  testing::TempDir dir;
  Recipe r = testing::DigitsRecipe(dir.root(),
                                   "quantize:\n  precision: int8\n  calibration: {method: max}\n"
                                   "  rounding: adaround\n  adaround: {iterations: 100}\n  bias_correction: true\n"
                                   "  fallback: {enabled: false}\n"
                                   "evaluate:\n  metric: top1\n  gate: {max_drop: 2.0}\n");
  std::vector<std::string> log;
  PipelineOptions o;
  o.on_log = [&](const std::string& line) { log.push_back(line); };
  auto report = RunRecipe(r, o);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_TRUE(report->passed) << report->ToText();
  bool said = false;
  for (const std::string& line : log) said |= line.rfind("adaround: ", 0) == 0;
  EXPECT_TRUE(said);
  auto model = LoadModel(report->output_model);
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  EXPECT_TRUE(CheckModel(*model).ok()) << CheckModel(*model).ToString();
  int int8_weights = 0;
  for (const auto& [name, t] : model->graph.initializers) int8_weights += t.dtype() == DataType::kInt8;
  EXPECT_GT(int8_weights, 2);
}

}  // namespace
}  // namespace sparq
