// quantize.precision fp8: the recipe's defaults and refusals, and `sparq run`
// end to end on the digits example (calibrate with max, FP8 Q/DQ at opset 19,
// evaluate, gate; the fallback on top).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "sparq/onnx_io.h"
#include "sparq/pipeline.h"
#include "sparq/recipe.h"
#include "test_util.h"
#include "tests/pipeline/digits_recipe.h"

namespace sparq {
namespace {

namespace fs = std::filesystem;

class Fp8RecipeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* f : {"model.onnx", "calib.npz", "eval.npz"}) std::ofstream(dir_.path(f)) << "x";
  }
  StatusOr<Recipe> Parse(const std::string& quantize, const std::string& more = "") {
    return ParseRecipe("model: model.onnx\ndata:\n  calibration: calib.npz\n  evaluation: eval.npz\n" + quantize + more,
                       dir_.root(), "r.yaml");
  }
  testing::TempDir dir_;
};

TEST_F(Fp8RecipeTest, DefaultsToMaxCalibrationAndNoSearch) {
  auto r = Parse("quantize:\n  precision: fp8\n");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->quantize.precision, RecipeQuantize::Precision::kFp8);
  EXPECT_EQ(r->quantize.calibration.method, CalibrationMethod::kMax);
  EXPECT_FALSE(r->quantize.search.enabled);
  EXPECT_TRUE(r->output.trt_cache.empty());  // INT8 scales only
  EXPECT_TRUE(ToQuantizeOptions(*r).fp8);
  EXPECT_EQ(ToQuantizeOptions(*r).precision, Precision::kINT8);
  // The method the recipe writes wins; the effective recipe parses back.
  auto kl = Parse("quantize:\n  precision: fp8\n  calibration: {method: percentile, percentile: 99.9}\n");
  ASSERT_TRUE(kl.ok()) << kl.status().ToString();
  EXPECT_EQ(kl->quantize.calibration.method, CalibrationMethod::kPercentile);
  auto again = ParseRecipe(RecipeToYaml(*r), dir_.root(), "effective.yaml");
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(again->quantize.precision, RecipeQuantize::Precision::kFp8);
  EXPECT_EQ(again->quantize.calibration.method, CalibrationMethod::kMax);
}

TEST_F(Fp8RecipeTest, RefusesWhatFp8CannotDo) {
  auto err = [&](const std::string& q, const std::string& more = "") {
    auto r = Parse(q, more);
    EXPECT_FALSE(r.ok()) << q;
    return r.ok() ? std::string() : r.status().message();
  };
  EXPECT_NE(err("quantize:\n  precision: fp8\n  search: on\n").find("quantize.search"), std::string::npos);
  EXPECT_NE(err("quantize:\n  precision: fp8\n  mode: dynamic\n").find("quantize.mode"), std::string::npos);
  EXPECT_NE(err("quantize:\n  precision: fp8\n  calibration: {symmetric: false}\n").find("symmetric"),
            std::string::npos);
  EXPECT_NE(err("quantize:\n  precision: fp8\n", "output:\n  format: qoperator\n").find("output.format"),
            std::string::npos);
  EXPECT_NE(err("quantize:\n  precision: fp8\n  bias_correction: true\n").find("bias_correction"),
            std::string::npos);
}

// `sparq run` with precision fp8 on the digits CNN: the gate passes, the
// written model holds float8e4m3fn Q/DQ at opset 19 and passes ONNX's checker.
TEST(Fp8Run, DigitsEndToEnd) {
  testing::TempDir dir;
  Recipe r = testing::DigitsRecipe(dir.root(), "quantize:\n  precision: fp8\n  fallback: {enabled: false}\n"
                                               "evaluate:\n  metric: top1\n  gate: {max_drop: 1.0}\n");
  auto report = RunRecipe(r);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_TRUE(report->passed) << report->ToText();
  EXPECT_GT(report->fp32_metric, 95.0);
  auto model = LoadModel(report->output_model);
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  EXPECT_EQ(model->opset(), 19);
  EXPECT_TRUE(CheckModel(*model).ok()) << CheckModel(*model).ToString();
  int fp8_weights = 0;
  for (const auto& [name, t] : model->graph.initializers) fp8_weights += t.dtype() == DataType::kFloat8E4M3FN;
  EXPECT_GT(fp8_weights, 2);
}

// The fallback moves layers out of FP8 as it does out of INT8: with a gate
// no quantized model meets, it moves up to max_layers and says so.
TEST(Fp8Run, FallbackMovesLayersToFp32) {
  testing::TempDir dir;
  Recipe r = testing::DigitsRecipe(dir.root(), "quantize:\n  precision: fp8\n  fallback: {max_layers: 2}\n"
                                               "evaluate:\n  metric: sqnr\n  gate: {min_sqnr_db: 200}\n");
  auto report = RunRecipe(r);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_FALSE(report->passed);
  EXPECT_EQ(report->fallback.size(), 2u) << report->ToText();
}

}  // namespace
}  // namespace sparq
