// The digits example's recipe for pipeline tests: model, calibration (128
// samples), evaluation data and labels from examples/digits, `data_extra`
// appended to the data section (e.g. "  batch_size: 16\n"), the output in
// `out_dir`, then `extra` (more sections).
#pragma once

#include <string>

#include <gtest/gtest.h>

#include "sparq/recipe.h"

namespace sparq {
namespace testing {

inline const std::string kDigitsDir = std::string(SPARQ_SOURCE_DIR) + "/examples/digits/";

inline Recipe DigitsRecipe(const std::string& out_dir, const std::string& extra, const std::string& data_extra = "") {
  const std::string& d = kDigitsDir;
  std::string yaml = "version: 1\nname: t\nmodel: " + d + "digits_cnn.onnx\n" + "data:\n  calibration: " + d +
                     "calib.npz\n  evaluation: " + d + "eval.npz\n" + "  labels: " + d +
                     "eval_labels.npy\n  calibration_samples: 128\n" + data_extra + "output:\n  dir: " + out_dir +
                     "\n  overwrite: true\n" + extra;
  auto r = ParseRecipe(yaml, out_dir, "test.yaml");
  EXPECT_TRUE(r.ok()) << r.status().ToString() << "\n" << yaml;
  return r.ok() ? *r : Recipe{};
}

}  // namespace testing
}  // namespace sparq
