// Written models carry their provenance; the TensorRT cache is written only
// when it can be honest (named calibrator, symmetric table, chosen version).
#include <gtest/gtest.h>

#include <map>

#include "pipeline/provenance.h"
#include "sparq/file_io.h"
#include "sparq/onnx_io.h"
#include "sparq/pipeline.h"
#include "sparq/version.h"
#include "test_util.h"

namespace sparq {
namespace {

const std::string kDigits = std::string(SPARQ_SOURCE_DIR) + "/examples/digits/";

std::string Yaml(const std::string& out_dir, const std::string& output_extra, const std::string& extra) {
  return "version: 1\nname: prov\nmodel: " + kDigits + "digits_cnn.onnx\n" + "data:\n  calibration: " + kDigits +
         "calib.npz\n  evaluation: " + kDigits + "eval.npz\n  calibration_samples: 64\n  evaluation_samples: 128\n" +
         "output:\n  dir: " + out_dir + "\n  overwrite: true\n" + output_extra + extra;
}

TEST(Provenance, WrittenModelNamesSparqTheRecipeAndTheMethod) {
  testing::TempDir dir;
  auto recipe = ParseRecipe(Yaml(dir.root(), "  trt_version: \"100100\"\n",
                                 "quantize:\n  calibration: {method: max}\nevaluate:\n  gate: {max_drop: 100}\n"),
                            dir.root(), "r.yaml");
  ASSERT_TRUE(recipe.ok()) << recipe.status().ToString();
  auto report = RunRecipe(*recipe);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  ASSERT_TRUE(report->passed) << report->ToText();
  auto m = LoadModel(report->output_model);
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->producer_name, "sparq");
  EXPECT_EQ(m->producer_version, Version());
  std::map<std::string, std::string> props(m->metadata_props.begin(), m->metadata_props.end());
  EXPECT_EQ(props["sparq.calibration_method"], "max");
  EXPECT_EQ(props["sparq.recipe_name"], "prov");
  EXPECT_EQ(props["sparq.recipe_fnv1a64"], ModelRecipeHash(*recipe));
  EXPECT_EQ(props["sparq.recipe_fnv1a64"].size(), 16u);
  auto cache = ReadFile(recipe->output.trt_cache);
  ASSERT_TRUE(cache.ok());
  EXPECT_EQ(cache->substr(0, cache->find('\n')), "TRT-100100-MinMaxCalibration");
}

TEST(Provenance, Fnv1a64KnownValues) {
  EXPECT_EQ(Fnv1a64Hex(""), "cbf29ce484222325");
  EXPECT_EQ(Fnv1a64Hex("a"), "af63dc4c8601ec8c");
}

TEST(TensorRtCacheRecipe, UnnamedMethodOrAsymmetricTableIsRefusedOrLeftOut) {
  testing::TempDir dir;
  // Written trt_cache with a method TensorRT has no calibrator for: error.
  auto bad = ParseRecipe(Yaml(dir.root(), "  trt_cache: c.cache\n", "quantize:\n  calibration: {method: percentile}\n"),
                         dir.root(), "r.yaml");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("output.trt_cache: TensorRT has no calibrator for quantize.calibration.method "
                                        "percentile"),
            std::string::npos)
      << bad.status().ToString();
  auto asym = ParseRecipe(Yaml(dir.root(), "  trt_cache: c.cache\n", "quantize:\n  calibration: {symmetric: false}\n"),
                          dir.root(), "r.yaml");
  ASSERT_FALSE(asym.ok());
  EXPECT_NE(asym.status().message().find("asymmetric"), std::string::npos) << asym.status().ToString();
  // The default cache is then simply not written.
  auto dflt = ParseRecipe(Yaml(dir.root(), "", "quantize:\n  calibration: {method: mse}\n"), dir.root(), "r.yaml");
  ASSERT_TRUE(dflt.ok()) << dflt.status().ToString();
  EXPECT_EQ(dflt->output.trt_cache, "");
  // Dynamic quantization has no activation ranges for TensorRT to use.
  auto dynamic = ParseRecipe(Yaml(dir.root(), "  trt_cache: c.cache\n", "quantize:\n  mode: dynamic\n"),
                             dir.root(), "r.yaml");
  ASSERT_FALSE(dynamic.ok());
  EXPECT_NE(dynamic.status().message().find("quantize.mode is dynamic"), std::string::npos)
      << dynamic.status().ToString();
  auto dynamic_default = ParseRecipe(Yaml(dir.root(), "", "quantize:\n  mode: dynamic\n"), dir.root(), "r.yaml");
  ASSERT_TRUE(dynamic_default.ok()) << dynamic_default.status().ToString();
  EXPECT_EQ(dynamic_default->output.trt_cache, "");
  auto version = ParseRecipe(Yaml(dir.root(), "  trt_version: 8.6\n", ""), dir.root(), "r.yaml");
  ASSERT_FALSE(version.ok());
  EXPECT_NE(version.status().message().find("output.trt_version"), std::string::npos) << version.status().ToString();
}

}  // namespace
}  // namespace sparq
