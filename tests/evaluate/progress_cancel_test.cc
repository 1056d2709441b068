// Progress callbacks can cancel: Calibrate, Evaluate and RunRecipe stop at the
// next batch with StatusCode::kCancelled and write no partial result.
#include <gtest/gtest.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "sparq/calibrate.h"
#include "sparq/evaluate.h"
#include "sparq/npy.h"
#include "sparq/onnx_io.h"
#include "sparq/pipeline.h"
#include "test_util.h"

namespace sparq {
namespace {

Model ReluModel() {
  Model m;
  m.ir_version = 8;
  m.opset_imports = {{"", 17}};
  m.graph.inputs.push_back(testing::FloatInput("x", {{-1, "n"}, {8, ""}}));
  m.graph.outputs.push_back(testing::FloatInput("y", {{-1, "n"}, {8, ""}}));
  m.graph.nodes.push_back({"relu", "Relu", "", {"x"}, {"y"}, {}, ""});
  return m;
}

TEST(ProgressCancel, CalibrateStopsWhenTheCallbackCancels) {
  auto served = std::make_shared<int>(0);
  BatchFn next = [served](TensorMap* batch) -> StatusOr<bool> {
    if (*served == 10) return false;
    (*batch)["x"] = testing::RandomFloats({4, 8}, 1 + (*served)++);
    return true;
  };
  CalibrationOptions opt;
  opt.method = CalibrationMethod::kMax;
  std::vector<int64_t> seen;
  opt.progress = [&](CalibrationProgress& p) {
    seen.push_back(p.samples);
    if (p.batches == 3) p.cancel = true;
  };
  auto table = Calibrate(ReluModel(), next, opt);
  ASSERT_FALSE(table.ok());
  EXPECT_EQ(table.status().code(), StatusCode::kCancelled);
  EXPECT_NE(table.status().message().find("after batch 3"), std::string::npos) << table.status().ToString();
  EXPECT_EQ(seen, (std::vector<int64_t>{4, 8, 12}));
  EXPECT_EQ(*served, 3);  // no batch read after the cancel
}

TEST(ProgressCancel, EvaluateStopsAndSavesNothing) {
  testing::TempDir dir;
  ASSERT_TRUE(SaveModel(ReluModel(), dir.path("m.onnx")).ok());
  ASSERT_TRUE(WriteNpy(dir.path("x.npy"), testing::RandomFloats({20, 8}, 3)).ok());
  EvalOptions o;
  o.inputs = dir.path("x.npy");
  o.batch = 5;
  o.save_outputs = dir.path("out.npz");
  int calls = 0;
  o.on_progress = [&](EvalProgress& p) {
    ++calls;
    p.cancel = p.done >= 10;
  };
  auto r = Evaluate(dir.path("m.onnx"), o);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kCancelled);
  EXPECT_NE(r.status().message().find("after 10 samples"), std::string::npos) << r.status().ToString();
  EXPECT_EQ(calls, 2);
  EXPECT_FALSE(std::filesystem::exists(dir.path("out.npz")));

  // A callback that only reads (const&) still fits, and never cancels.
  o.save_outputs.clear();
  int64_t last = 0;
  o.on_progress = [&](const EvalProgress& p) { last = p.done; };
  ASSERT_TRUE(Evaluate(dir.path("m.onnx"), o).ok());
  EXPECT_EQ(last, 20);
}

TEST(ProgressCancel, RunRecipeStopsInTheStageThatCancelled) {
  const std::string digits = std::string(SPARQ_SOURCE_DIR) + "/examples/digits/";
  testing::TempDir dir;
  std::string yaml = "version: 1\nname: t\nmodel: " + digits + "digits_cnn.onnx\n" +
                     "data:\n  calibration: " + digits + "calib.npz\n  evaluation: " + digits + "eval.npz\n" +
                     "  labels: " + digits + "eval_labels.npy\n  calibration_samples: 64\n" +
                     "output:\n  dir: " + dir.root() + "\n  overwrite: true\n";
  auto recipe = ParseRecipe(yaml, dir.root(), "test.yaml");
  ASSERT_TRUE(recipe.ok()) << recipe.status().ToString();
  PipelineOptions po;
  std::vector<std::string> stages;
  po.on_progress = [&](StageProgress& p) {
    if (stages.empty() || stages.back() != p.stage) stages.push_back(p.stage);
    if (p.stage == "calibrate") p.cancel = true;
  };
  auto report = RunRecipe(*recipe, po);
  ASSERT_FALSE(report.ok());
  EXPECT_EQ(report.status().code(), StatusCode::kCancelled) << report.status().ToString();
  EXPECT_EQ(stages.back(), "calibrate");
  EXPECT_NE(report.status().message().find("cancelled"), std::string::npos) << report.status().ToString();
}

}  // namespace
}  // namespace sparq
