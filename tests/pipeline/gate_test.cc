// The honest gate: floors besides max_drop with messages naming the metric,
// evaluate.backend checked against the machine, a failed model never left at
// output.model, and a requested sparsity that is not reached failing the run.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "pipeline/gate.h"
#include "sparq/device.h"
#include "sparq/onnx_io.h"
#include "sparq/pipeline.h"
#include "test_util.h"

namespace sparq {
namespace {

namespace fs = std::filesystem;

const std::string kDigits = std::string(SPARQ_SOURCE_DIR) + "/examples/digits/";

std::string DigitsYaml(const std::string& out_dir, const std::string& extra, bool labels = true) {
  return "version: 1\nname: t\nmodel: " + kDigits + "digits_cnn.onnx\n" + "data:\n  calibration: " + kDigits +
         "calib.npz\n  evaluation: " + kDigits + "eval.npz\n" +
         (labels ? "  labels: " + kDigits + "eval_labels.npy\n" : std::string()) +
         "  calibration_samples: 128\n  evaluation_samples: 256\n" + "output:\n  dir: " + out_dir +
         "\n  overwrite: true\n" + extra;
}

RunReport Measured(const std::string& metric, double fp32, double out) {
  RunReport r;
  r.metric = metric;
  r.fp32_metric = fp32;
  r.output_metric = out;
  r.sqnr_db = 35.0;
  r.cosine = 0.999;
  r.top1 = 97.5;
  return r;
}

TEST(Gate, MeanCosineCollapseFailsTheDefaultGate) {
  // Issue 24: a transformer at mean cosine 0.56 passed "drop 0.44 <= max_drop 1.00".
  RecipeEvaluate::Gate g;
  g.max_drop = DefaultMaxDrop(Metric::kMeanCosine);
  RunReport r = Measured("mean_cosine", 1.0, 0.56);
  JudgeGate(g, &r);
  ASSERT_EQ(r.gate_checks.size(), 1u);
  EXPECT_FALSE(r.passed);
  EXPECT_EQ(r.gate_checks[0].text, "mean_cosine 1.0000 -> 0.5600, drop 0.4400 > max_drop 0.0100");
  r = Measured("mean_cosine", 1.0, 0.995);
  JudgeGate(g, &r);
  EXPECT_TRUE(r.passed) << r.gate_checks[0].text;
}

TEST(Gate, MaxDropAndFloorsEachNameTheirMetric) {
  RecipeEvaluate::Gate g;
  g.max_drop = 0.5;
  g.min_sqnr_db = 40.0;
  g.min_cosine = 0.99;
  g.min_top1 = 97.0;
  RunReport r = Measured("top1", 98.0, 97.8);
  JudgeGate(g, &r);
  ASSERT_EQ(r.gate_checks.size(), 4u);
  EXPECT_FALSE(r.passed);  // only the SQNR floor fails
  EXPECT_NEAR(r.drop, 0.2, 1e-9);
  EXPECT_TRUE(r.gate_checks[0].passed);
  EXPECT_EQ(r.gate_checks[1].text, "sqnr 35.00 dB < min_sqnr_db 40.00 dB");
  EXPECT_FALSE(r.gate_checks[1].passed);
  EXPECT_TRUE(r.gate_checks[2].passed);
  EXPECT_TRUE(r.gate_checks[3].passed);
  g.min_sqnr_db = 30.0;
  JudgeGate(g, &r);
  EXPECT_TRUE(r.passed);
  // A floor on something not measured (no labels: top1 NaN) fails, saying so.
  r.top1 = std::nan("");
  JudgeGate(g, &r);
  EXPECT_FALSE(r.passed);
  EXPECT_NE(r.gate_checks[3].text.find("not measured"), std::string::npos) << r.gate_checks[3].text;
  // The reports say which metric failed instead of "accuracy".
  EXPECT_EQ(r.ToJUnit().find("accuracy"), std::string::npos) << r.ToJUnit();
  EXPECT_NE(r.ToJUnit().find("gate failed: top1 not measured (needs data.labels or a reference), min_top1 97.00%"), std::string::npos) << r.ToJUnit();
}

TEST(Gate, SqnrIsAValueNotADrop) {
  RecipeEvaluate::Gate g;
  g.check_drop = false;
  g.min_sqnr_db = 30.0;
  RunReport r = Measured("sqnr", 100.0, 35.0);
  JudgeGate(g, &r);
  ASSERT_EQ(r.gate_checks.size(), 1u);
  EXPECT_TRUE(r.passed);
  EXPECT_TRUE(std::isnan(r.drop));
  EXPECT_NE(r.ToText().find("sqnr        35.0 dB"), std::string::npos) << r.ToText();
  EXPECT_NE(r.ToJson().find("\"drop\": null"), std::string::npos) << r.ToJson();
}

// One unit convention in JSON: percent metrics (values, drops, limits) are
// fractions there; the text and Markdown reports keep the recipe's percent.
TEST(Gate, JsonGivesPercentMetricsAsFractions) {
  RecipeEvaluate::Gate g;
  g.max_drop = 1.0;
  g.min_top1 = 97.0;
  RunReport r = Measured("top1", 98.0, 97.5);
  r.max_drop = g.max_drop;  // as RunRecipe copies them
  r.top1_agreement = 99.0;
  JudgeGate(g, &r);
  ASSERT_TRUE(r.passed);
  const auto j = nlohmann::json::parse(r.ToJson());
  EXPECT_DOUBLE_EQ(j["gate"]["fp32"].get<double>(), 0.98);
  EXPECT_DOUBLE_EQ(j["gate"]["output"].get<double>(), 0.975);
  EXPECT_NEAR(j["gate"]["drop"].get<double>(), 0.005, 1e-12);
  EXPECT_DOUBLE_EQ(j["gate"]["max_drop"].get<double>(), 0.01);
  EXPECT_DOUBLE_EQ(j["agreement"]["top1_agreement"].get<double>(), 0.99);
  EXPECT_DOUBLE_EQ(j["agreement"]["top1"].get<double>(), 0.975);
  EXPECT_DOUBLE_EQ(j["agreement"]["sqnr_db"].get<double>(), 35.0);  // dB stays dB
  for (const auto& c : j["gate"]["checks"]) {
    if (c["limit_key"] == "min_top1") EXPECT_DOUBLE_EQ(c["limit"].get<double>(), 0.97);
    if (c["limit_key"] == "max_drop") EXPECT_DOUBLE_EQ(c["limit"].get<double>(), 0.01);
  }
  EXPECT_NE(r.ToMarkdown().find("97.50"), std::string::npos) << r.ToMarkdown();

  // A relative drop is a fraction of the FP32 value already: as is.
  RecipeEvaluate::Gate rel;
  rel.relative = true;
  rel.max_drop = 0.02;
  RunReport q = Measured("top1", 98.0, 97.5);
  q.max_drop = rel.max_drop;
  q.relative = true;
  JudgeGate(rel, &q);
  const auto k = nlohmann::json::parse(q.ToJson());
  EXPECT_DOUBLE_EQ(k["gate"]["max_drop"].get<double>(), 0.02);
  EXPECT_NEAR(k["gate"]["drop"].get<double>(), 0.5 / 98.0, 1e-12);
}

TEST(Gate, RecipeKeys) {
  testing::TempDir dir;
  auto ok = ParseRecipe(DigitsYaml(dir.root(), "evaluate:\n  metric: sqnr\n  gate: {min_sqnr_db: 30, failed_model: discard}\n"),
                        dir.root(), "r.yaml");
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_FALSE(ok->evaluate.gate.check_drop);
  EXPECT_EQ(*ok->evaluate.gate.min_sqnr_db, 30.0);
  EXPECT_EQ(ok->evaluate.gate.failed_model, RecipeEvaluate::Gate::FailedModel::kDiscard);
  // Round trip through --print.
  auto again = ParseRecipe(RecipeToYaml(*ok), dir.root(), "printed.yaml");
  ASSERT_TRUE(again.ok()) << again.status().ToString() << "\n" << RecipeToYaml(*ok);
  EXPECT_FALSE(again->evaluate.gate.check_drop);
  EXPECT_EQ(again->evaluate.gate.failed_model, RecipeEvaluate::Gate::FailedModel::kDiscard);

  auto no_floor = ParseRecipe(DigitsYaml(dir.root(), "evaluate:\n  metric: sqnr\n"), dir.root(), "r.yaml");
  ASSERT_FALSE(no_floor.ok());
  EXPECT_NE(no_floor.status().message().find("evaluate.gate.min_sqnr_db: metric sqnr is a value, not a drop"),
            std::string::npos)
      << no_floor.status().ToString();
  auto no_labels = ParseRecipe(DigitsYaml(dir.root(), "evaluate:\n  gate: {min_top1: 90}\n", false), dir.root(), "r.yaml");
  ASSERT_FALSE(no_labels.ok());
  EXPECT_NE(no_labels.status().message().find("evaluate.gate.min_top1: needs data.labels"), std::string::npos)
      << no_labels.status().ToString();
  auto bad = ParseRecipe(DigitsYaml(dir.root(), "evaluate:\n  gate: {min_cosine: 2, failed_model: keep}\n"), dir.root(),
                         "r.yaml");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("evaluate.gate.min_cosine"), std::string::npos);
  EXPECT_NE(bad.status().message().find("'keep' is not one of rename, discard"), std::string::npos)
      << bad.status().ToString();
}

TEST(Gate, BackendMustBeAbleToRun) {
  auto cpu = ResolveBackend(RecipeEvaluate::Backend::kCpu);
  ASSERT_TRUE(cpu.ok());
  EXPECT_EQ(cpu->name, "cpu");
  auto autos = ResolveBackend(RecipeEvaluate::Backend::kAuto);
  ASSERT_TRUE(autos.ok());
  const bool cuda_here = BuiltWithCuda() && CudaDeviceCount() > 0;
  EXPECT_EQ(autos->name, cuda_here ? "cuda" : "cpu");
  EXPECT_EQ(autos->reason.rfind("auto: ", 0), 0u) << autos->reason;
  if (cuda_here) GTEST_SKIP() << "this machine can run cuda";
  auto cuda = ResolveBackend(RecipeEvaluate::Backend::kCuda);
  ASSERT_FALSE(cuda.ok());
  EXPECT_NE(cuda.status().message().find("evaluate.backend: cuda cannot run here: "), std::string::npos)
      << cuda.status().ToString();
  // The recipe itself is valid: it means the same on every machine.
  testing::TempDir dir;
  auto r = ParseRecipe(DigitsYaml(dir.root(), "evaluate:\n  backend: cuda\n"), dir.root(), "r.yaml");
  EXPECT_TRUE(r.ok()) << r.status().ToString();
}

TEST(Gate, FailedModelPath) {
  EXPECT_EQ(FailedModelPath("/o/m.sparq.onnx"), "/o/m.sparq.FAILED.onnx");
  EXPECT_EQ(FailedModelPath("/o/model"), "/o/model.FAILED.onnx");
}

// A gate the INT8 digits model cannot pass (SQNR ~40 dB).
const char* kImpossible = "quantize:\n  fallback: {enabled: false}\nevaluate:\n  metric: sqnr\n  gate: {min_sqnr_db: 90";

TEST(GateRun, FailedModelIsRenamedNotLeftAtTheOutputPath) {
  testing::TempDir dir;
  auto recipe = ParseRecipe(DigitsYaml(dir.root(), std::string(kImpossible) + "}\n"), dir.root(), "r.yaml");
  ASSERT_TRUE(recipe.ok()) << recipe.status().ToString();
  auto report = RunRecipe(*recipe);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_FALSE(report->passed);
  EXPECT_FALSE(fs::exists(recipe->output.model));
  const std::string failed = FailedModelPath(recipe->output.model);
  EXPECT_EQ(report->output_model, failed);
  EXPECT_TRUE(fs::exists(failed));
  EXPECT_TRUE(LoadModel(failed).ok());
  EXPECT_EQ(report->files.front(), failed);
  for (const auto& f : report->files) EXPECT_TRUE(fs::exists(f)) << f;
  EXPECT_NE(report->ToJUnit().find("gate failed: sqnr "), std::string::npos) << report->ToJUnit();

  // A later passing run removes the stale FAILED model.
  auto pass = ParseRecipe(DigitsYaml(dir.root(), "evaluate:\n  metric: sqnr\n  gate: {min_sqnr_db: 20}\n"),
                          dir.root(), "r.yaml");
  ASSERT_TRUE(pass.ok());
  auto passed = RunRecipe(*pass);
  ASSERT_TRUE(passed.ok()) << passed.status().ToString();
  EXPECT_TRUE(passed->passed) << passed->ToText();
  EXPECT_TRUE(fs::exists(pass->output.model));
  EXPECT_FALSE(fs::exists(failed));
}

TEST(GateRun, FailedModelDiscardedWithItsExternalData) {
  testing::TempDir dir;
  std::string yaml = DigitsYaml(dir.root(), std::string(kImpossible) + ", failed_model: discard}\n");
  yaml.replace(yaml.find("  overwrite: true\n"), 0, "  external_data: true\n");
  auto recipe = ParseRecipe(yaml, dir.root(), "r.yaml");
  ASSERT_TRUE(recipe.ok()) << recipe.status().ToString();
  auto report = RunRecipe(*recipe);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_FALSE(report->passed);
  EXPECT_FALSE(fs::exists(recipe->output.model));
  EXPECT_FALSE(fs::exists(recipe->output.model + ".data"));
  EXPECT_FALSE(fs::exists(FailedModelPath(recipe->output.model)));
  EXPECT_EQ(report->output_model, "");
  for (const auto& f : report->files) EXPECT_TRUE(fs::exists(f)) << f;
}

TEST(GateRun, RenamedModelKeepsItsExternalData) {
  testing::TempDir dir;
  std::string yaml = DigitsYaml(dir.root(), std::string(kImpossible) + "}\n");
  yaml.replace(yaml.find("  overwrite: true\n"), 0, "  external_data: true\n");
  auto recipe = ParseRecipe(yaml, dir.root(), "r.yaml");
  ASSERT_TRUE(recipe.ok()) << recipe.status().ToString();
  auto report = RunRecipe(*recipe);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  const std::string failed = FailedModelPath(recipe->output.model);
  EXPECT_FALSE(fs::exists(recipe->output.model));
  EXPECT_FALSE(fs::exists(recipe->output.model + ".data"));
  ASSERT_TRUE(fs::exists(failed + ".data"));
  auto m = LoadModel(failed);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
}

TEST(GateRun, UnreachedSparsityFailsUnlessPartialIsAllowed) {
  // max_drop 0 lets no pruning step through: the run stops below the target.
  const std::string prune = "prune:\n  enabled: true\n  sparsity: 0.9\n  schedule: linear\n  steps: 2\n"
                            "  recovery: false\n";
  testing::TempDir dir;
  auto recipe = ParseRecipe(DigitsYaml(dir.root(), prune + "quantize:\n  enabled: false\n" +
                                                       "evaluate:\n  metric: agreement\n  gate: {max_drop: 0}\n"),
                            dir.root(), "r.yaml");
  ASSERT_TRUE(recipe.ok()) << recipe.status().ToString();
  auto report = RunRecipe(*recipe);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_FALSE(report->passed);
  bool named = false;
  for (const auto& c : report->gate_checks) named |= c.metric == "sparsity" && !c.passed;
  EXPECT_TRUE(named) << report->ToText();
  EXPECT_NE(report->ToText().find("prune.allow_partial"), std::string::npos) << report->ToText();

  auto partial = ParseRecipe(DigitsYaml(dir.root(), prune + "  allow_partial: true\nquantize:\n  enabled: false\n" +
                                                        "evaluate:\n  metric: agreement\n  gate: {max_drop: 0}\n"),
                             dir.root(), "r.yaml");
  ASSERT_TRUE(partial.ok()) << partial.status().ToString();
  auto ok = RunRecipe(*partial);
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_TRUE(ok->passed) << ok->ToText();
  bool warned = false;
  for (const auto& w : ok->warnings) warned |= w.find("requested sparsity not reached") != std::string::npos;
  EXPECT_TRUE(warned);
}

}  // namespace
}  // namespace sparq
