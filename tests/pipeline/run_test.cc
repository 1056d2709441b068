// RunRecipe end to end on the bundled digits example.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <map>

#include "evaluate/dataset.h"  // SliceRows
#include "sparq/file_io.h"
#include "sparq/onnx_io.h"
#include "sparq/npy.h"
#include "sparq/metrics.h"
#include "sparq/calibrate.h"
#include "sparq/executor.h"
#include "sparq/pipeline.h"
#include "test_util.h"
#include "tests/pipeline/digits_recipe.h"
#include "tests/kernels/isa_sweep.h"

namespace sparq {
namespace {

const std::string kDigits = std::string(SPARQ_SOURCE_DIR) + "/examples/digits/";

Recipe MakeRecipe(const std::string& out_dir, const std::string& extra) {
  return testing::DigitsRecipe(out_dir, extra);
}

// Issue 24: a model with a scalar input pinned by data.constants and a state
// [2, N, 4] whose batch is axis 1 calibrates, quantizes and evaluates.
TEST(RunRecipe, ScalarPinnedByDataConstantsAndAStateWithItsBatchOnAxisOne) {
  testing::TempDir dir;
  ASSERT_TRUE(SaveModel(testing::SampleAxisModel(), dir.path("vad.onnx")).ok());
  NamedTensors data{{"x", testing::RandomFloats({10, 4}, 1)}, {"state", testing::RandomFloats({10, 2, 4}, 2)}};
  ASSERT_TRUE(WriteNpz(dir.path("data.npz"), data).ok());
  const std::string head = "version: 1\nname: t\nmodel: " + dir.path("vad.onnx") + "\ndata:\n  calibration: " +
                           dir.path("data.npz") + "\n  evaluation: " + dir.path("data.npz") +
                           "\n  batch_size: 3\n";
  const std::string tail = "output:\n  dir: " + dir.root() + "\n  overwrite: true\n" +
                           "quantize:\n  calibration: {method: max}\n" +
                           "evaluate:\n  metric: cosine\n  gate: {max_drop: 0.05}\n";
  auto recipe = ParseRecipe(head + "  constants: {sr: 2}\n" + tail, dir.root(), "vad.yaml");
  ASSERT_TRUE(recipe.ok()) << recipe.status().ToString();
  auto report = RunRecipe(*recipe);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_EQ(report->eval_samples, 10);
  EXPECT_TRUE(report->passed) << report->ToText();

  // A constant the model cannot take is named with its key.
  auto bad = ParseRecipe(head + "  constants: {sr: [1, 2]}\n" + tail, dir.root(), "vad.yaml");
  ASSERT_TRUE(bad.ok());
  auto failed = RunRecipe(*bad);
  ASSERT_FALSE(failed.ok());
  EXPECT_NE(failed.status().message().find("data.constants: constant for input 'sr': 2 values given"),
            std::string::npos)
      << failed.status().message();
}

// An unwritten evaluate.metric is argmax agreement; when the output it reads
// is not class scores [N, classes] the run says what to write, and only then.
TEST(RunRecipe, UnwrittenMetricOnAnOutputThatIsNotClassScoresWarns) {
  testing::TempDir dir;
  ASSERT_TRUE(SaveModel(testing::SampleAxisModel(), dir.path("vad.onnx")).ok());
  NamedTensors data{{"x", testing::RandomFloats({10, 4}, 1)}, {"state", testing::RandomFloats({10, 2, 4}, 2)}};
  ASSERT_TRUE(WriteNpz(dir.path("data.npz"), data).ok());
  auto warned = [&](const std::string& evaluate) {
    const std::string text =
        "version: 1\nname: t\nmodel: " + dir.path("vad.onnx") + "\ndata:\n  calibration: " + dir.path("data.npz") +
        "\n  evaluation: " + dir.path("data.npz") +
        "\n  batch_size: 5\n  constants: {sr: 2}\noutput:\n  dir: " + dir.root() +
        "\n  overwrite: true\nquantize:\n  calibration: {method: max}\n  fallback: {enabled: false}\n" + evaluate;
    auto recipe = ParseRecipe(text, dir.root(), "vad.yaml");
    EXPECT_TRUE(recipe.ok()) << recipe.status().ToString();
    if (!recipe.ok()) return std::string("parse failed");
    auto report = RunRecipe(*recipe);
    EXPECT_TRUE(report.ok()) << report.status().ToString();
    if (!report.ok()) return std::string("run failed");
    for (const std::string& w : report->warnings)
      if (w.find("evaluate.metric not written") != std::string::npos) return w;
    return std::string();
  };
  EXPECT_EQ(warned("evaluate:\n  output: new_state\n"),
            "evaluate.metric not written: agreement (argmax) reads output 'new_state' [2, N, 4], not class "
            "scores [N, classes]; write evaluate.metric: box_recall for a YOLO-style detector, mean_cosine for "
            "embeddings or hidden states, map_iou for a probability map, ctc_accuracy for a CTC recognizer, or sqnr");
  EXPECT_EQ(warned("evaluate:\n  output: y\n"), "");  // [N, 4]: class scores, as far as a shape says
  EXPECT_EQ(warned("evaluate:\n  metric: agreement\n  output: new_state\n"), "");  // written: the user's choice
}

TEST(RunRecipe, QuickstartPassesAndWritesEveryFile) {
  testing::TempDir dir;
  // As recipes/quickstart.yaml: method kl written (no search), so the
  // TensorRT cache is among the files.
  Recipe r = MakeRecipe(dir.root(), "quantize: {calibration: {method: kl}}\n"
                                    "evaluate:\n  metric: top1\n  gate: {max_drop: 0.5}\n");
  auto report = RunRecipe(r);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_TRUE(report->passed) << report->ToText();
  EXPECT_LE(report->drop, 0.5);
  EXPECT_GT(report->fp32_metric, 95.0);
  for (const auto& f : report->files) EXPECT_TRUE(std::filesystem::exists(f)) << f;
  EXPECT_EQ(report->files.size(), 6u);
  auto model = LoadModel(report->output_model);
  ASSERT_TRUE(model.ok());
  EXPECT_TRUE(CheckModel(*model).ok());
  EXPECT_NE(report->ToJUnit().find("failures=\"0\""), std::string::npos);
}

// quantize.bias_correction: one more pass over the calibration data, the
// corrected biases in the written model, the gate still holds.
// An unpruned INT8 model reports the sparsity of its FP32 weights (none),
// not the INT8 weights that round to zero (it reported several percent).
TEST(RunRecipe, UnprunedInt8ModelReportsNoSparsity) {
  testing::TempDir dir;
  auto report = RunRecipe(MakeRecipe(dir.root(), "quantize:\n  calibration: {method: max}\n"));
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_LT(report->weight_sparsity, 1e-3);
}

// Issue 25: the same 70% of the digits model's weights, shared by the
// sensitivity scan instead of uniformly, keeps the model working (no
// recovery here, so the allocation alone makes the difference; 99.0% dense,
// about 54% uniform, about 99% auto when written).
TEST(RunRecipe, PruneAllocationAutoPutsTheSparsityWhereItCostsLeast) {
  const std::string prune = "prune:\n  enabled: true\n  sparsity: 0.7\n  skip_first_last: false\n  recovery: false\n";
  const std::string rest = "quantize:\n  enabled: false\nevaluate:\n  metric: top1\n  gate: {max_drop: 60}\n";
  testing::TempDir a, b;
  auto uniform = RunRecipe(MakeRecipe(a.root(), prune + "  allocation: uniform\n" + rest));
  auto automatic = RunRecipe(MakeRecipe(b.root(), prune + "  allocation: auto\n" + rest));
  ASSERT_TRUE(uniform.ok()) << uniform.status().ToString();
  ASSERT_TRUE(automatic.ok()) << automatic.status().ToString();
  // The same share of zeros (by weight count) ...
  EXPECT_NEAR(uniform->weight_sparsity, 0.7, 0.02);
  EXPECT_NEAR(automatic->weight_sparsity, uniform->weight_sparsity, 0.01);
  // ... at a much smaller cost.
  EXPECT_GT(automatic->output_metric, uniform->output_metric + 20.0);
  EXPECT_GT(automatic->output_metric, automatic->fp32_metric - 2.0);
  EXPECT_NE(automatic->prune_text.find("Pruning plan"), std::string::npos);
}

TEST(RunRecipe, BiasCorrectionRunsAndChangesTheBiases) {
  testing::TempDir plain_dir, corrected_dir;
  const std::string gate = "evaluate:\n  metric: top1\n  gate: {max_drop: 0.5}\n";
  auto plain = RunRecipe(MakeRecipe(plain_dir.root(), "quantize:\n  calibration: {method: max}\n" + gate));
  ASSERT_TRUE(plain.ok()) << plain.status().ToString();
  std::vector<std::string> log;
  PipelineOptions o;
  o.on_log = [&](const std::string& line) { log.push_back(line); };
  auto corrected = RunRecipe(
      MakeRecipe(corrected_dir.root(), "quantize:\n  bias_correction: true\n  calibration: {method: max}\n" + gate), o);
  ASSERT_TRUE(corrected.ok()) << corrected.status().ToString();
  EXPECT_TRUE(corrected->passed) << corrected->ToText();
  EXPECT_TRUE(std::any_of(log.begin(), log.end(), [](const std::string& l) {
    return l.rfind("bias correction: ", 0) == 0 && l.find(" 0 INT8") == std::string::npos;
  })) << "no 'bias correction: N INT8 layer bias(es) corrected' line";
  const bool timed = std::any_of(corrected->stage_seconds.begin(), corrected->stage_seconds.end(),
                                 [](const auto& s) { return s.first == "bias correction"; });
  EXPECT_TRUE(timed);
  auto a = LoadModel(plain->output_model), b = LoadModel(corrected->output_model);
  ASSERT_TRUE(a.ok() && b.ok());
  int differ = 0;
  for (const auto& [name, t] : b->graph.initializers) {
    if (t.dtype() != DataType::kInt32) continue;
    auto it = a->graph.initializers.find(name);
    differ += it == a->graph.initializers.end() || it->second.numel() != t.numel() ||
              !std::equal(t.data<int32_t>(), t.data<int32_t>() + t.numel(), it->second.data<int32_t>());
  }
  EXPECT_GT(differ, 0);
}

// quantize.scales: a table from an earlier run quantizes without calibrating,
// checked against the model.
TEST(RunRecipe, ReusesACalibrationTable) {
  testing::TempDir first, second, wrong;
  auto calibrated = RunRecipe(MakeRecipe(first.root(), "quantize:\n  calibration: {method: max}\n"));
  ASSERT_TRUE(calibrated.ok()) << calibrated.status().ToString();
  const std::string scales = first.path("scales.json");
  auto reused = RunRecipe(MakeRecipe(second.root(), "quantize:\n  scales: " + scales + "\n"));
  ASSERT_TRUE(reused.ok()) << reused.status().ToString();
  // Same table, same options: the same graph (the recipe hashes differ); the
  // table's method in the provenance; the table is not written again.
  auto a = LoadModel(calibrated->output_model), b = LoadModel(reused->output_model);
  ASSERT_TRUE(a.ok() && b.ok());
  Model ga = *a, gb = *b;
  ga.metadata_props.clear();
  gb.metadata_props.clear();
  EXPECT_TRUE(*SerializeModel(ga) == *SerializeModel(gb));
  bool method_max = false;
  for (const auto& [key, value] : b->metadata_props) method_max |= key == "sparq.calibration_method" && value == "max";
  EXPECT_TRUE(method_max);
  EXPECT_FALSE(std::filesystem::exists(second.path("scales.json")));
  EXPECT_TRUE(std::filesystem::exists(second.path("calib.cache")));

  // A table missing a tensor the quantizer needs: an error naming it and the file.
  auto table = CalibrationTable::Load(scales);
  ASSERT_TRUE(table.ok());
  const std::string dropped = table->tensors.back().name;
  table->tensors.pop_back();
  ASSERT_TRUE(table->Save(wrong.path("partial.json")).ok());
  auto failed = RunRecipe(MakeRecipe(wrong.root(), "quantize:\n  scales: " + wrong.path("partial.json") + "\n"));
  ASSERT_FALSE(failed.ok());
  EXPECT_EQ(failed.status().code(), StatusCode::kNotFound);
  EXPECT_NE(failed.status().message().find("quantize.scales " + wrong.path("partial.json")), std::string::npos)
      << failed.status().message();
  EXPECT_NE(failed.status().message().find("'" + dropped + "'"), std::string::npos) << failed.status().message();
}

// Progress totals match the data, in samples for every stage (the calibrate
// bar once counted batches against a total of samples / batch of its own).
TEST(RunRecipe, ProgressTotalsMatchTheData) {
  testing::TempDir dir;
  Recipe r = MakeRecipe(dir.root(), "");
  r.data.batch_size = 48;  // 128 calibration samples: 48 + 48 + 32
  std::map<std::string, StageProgress> last;
  std::map<std::string, int> updates;
  PipelineOptions options;
  options.on_progress = [&](StageProgress& p) {
    last[p.stage] = p;
    ++updates[p.stage];
  };
  auto report = RunRecipe(r, options);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  ASSERT_TRUE(last.count("calibrate"));
  EXPECT_EQ(last["calibrate"].done, 128);
  EXPECT_EQ(last["calibrate"].total, 128);
  EXPECT_EQ(updates["calibrate"], 3);
  for (const char* stage : {"evaluate fp32", "evaluate output"}) {
    ASSERT_TRUE(last.count(stage)) << stage;
    EXPECT_GT(last[stage].total, 0) << stage;
    EXPECT_EQ(last[stage].done, last[stage].total) << stage;
  }
}

TEST(RunRecipe, SameModelBytesForAnyThreadCount) {
  testing::TempDir a, b;
  auto ra = RunRecipe(MakeRecipe(a.root(), "evaluate:\n  threads: 1\n"));
  auto rb = RunRecipe(MakeRecipe(b.root(), "evaluate:\n  threads: 2\n"));
  ASSERT_TRUE(ra.ok() && rb.ok());
  EXPECT_EQ(*ReadFile(ra->output_model), *ReadFile(rb->output_model));
  EXPECT_EQ(*ReadFile(a.path("scales.json")), *ReadFile(b.path("scales.json")));
}

// Without side files that want every tensor, calibration observes only what
// INT8 reads (the rest fused): the same model bytes.
TEST(RunRecipe, WithoutSideFilesCalibratesWhatInt8ReadsForTheSameModel) {
  testing::TempDir a, b;
  std::vector<std::string> log;
  PipelineOptions o;
  o.on_log = [&](const std::string& line) { log.push_back(line); };
  auto all = RunRecipe(MakeRecipe(a.root(), ""));
  auto fewer = RunRecipe(MakeRecipe(b.root(), "  scales: ''\n  trt_cache: ''\n"), o);
  ASSERT_TRUE(all.ok() && fewer.ok());
  EXPECT_EQ(*ReadFile(all->output_model), *ReadFile(fewer->output_model));
  EXPECT_FALSE(std::filesystem::exists(b.path("scales.json")));
  EXPECT_TRUE(std::any_of(log.begin(), log.end(), [](const std::string& l) {
    return l.find("calibrate: only the ") != std::string::npos;
  })) << "no restricted calibration in the log";
}

TEST(RunRecipe, FailingGateIsReportedNotAnError) {
  testing::TempDir dir;
  // INT8 output SQNR is ~40 dB against a 100 dB ceiling: a 20 dB budget fails.
  Recipe r = MakeRecipe(dir.root(), "quantize:\n  fallback: {enabled: false}\nevaluate:\n  metric: sqnr\n  gate: {max_drop: 20}\n");
  auto report = RunRecipe(r);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_FALSE(report->passed);
  EXPECT_NE(report->ToJUnit().find("<failure"), std::string::npos);
  EXPECT_NE(report->ToMarkdown().find("FAILED"), std::string::npos);
}

// Issue 24: evaluate.metric map_iou is what the search scores candidates by
// (held-out calibration batches), what the gate judges and what the fallback
// ranks layers by.
TEST(RunRecipe, MapIouDrivesTheSearchTheGateAndTheFallback) {
  testing::TempDir dir;
  Recipe r = MakeRecipe(dir.root(), "quantize:\n  fallback: {max_layers: 1}\n"
                                    "evaluate:\n  metric: map_iou\n  threshold: 0.5\n  gate: {max_drop: 0}\n");
  ASSERT_TRUE(r.evaluate.map.enabled);
  auto report = RunRecipe(r);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_EQ(report->metric, "map_iou");
  EXPECT_DOUBLE_EQ(report->fp32_metric, 100.0);
  EXPECT_GT(report->output_metric, 80.0);
  EXPECT_LE(report->output_metric, 100.0);
  ASSERT_FALSE(report->search.empty());
  for (const SearchRow& row : report->search) EXPECT_EQ(row.metric, "map_iou");
  ASSERT_EQ(report->fallback.size(), 1u) << report->ToText();  // INT8 logits cross 0.5 somewhere: below 100
  EXPECT_EQ(report->fallback[0].ranked_by, "metric");
  EXPECT_NE(report->ToJson().find("\"metric\": \"map_iou\""), std::string::npos);
}

TEST(RunRecipe, FallbackMovesTheWorstLayersAndSaysWhy) {
  testing::TempDir dir;
  Recipe r = MakeRecipe(dir.root(), "quantize:\n  fallback: {enabled: true, to: fp16, max_layers: 3}\n"
                                    "evaluate:\n  metric: sqnr\n  gate: {max_drop: 45}\n");
  auto report = RunRecipe(r);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  ASSERT_FALSE(report->fallback.empty());
  EXPECT_TRUE(report->passed) << report->ToText();
  for (const auto& f : report->fallback) {
    EXPECT_EQ(f.to, "fp16");
    bool found = false;
    for (const auto& l : report->layers)
      if (l.node == f.node) {
        found = true;
        EXPECT_EQ(l.precision, Precision::kFP16);
        EXPECT_NE(l.reason.find("fallback"), std::string::npos) << l.reason;
      }
    EXPECT_TRUE(found) << f.node;
  }
}

// Issue 11: stages talk in memory. A run with pruning, fallback and
// preprocessing writes exactly the files it reports (no candidate models, no
// preprocessed copy of the data), and preprocessing works on a folder of .npy
// with the same result as on the archive it was split from.
TEST(RunRecipe, WritesOnlyItsOutputsAndPreprocessesFolders) {
  testing::TempDir data, a, b;
  auto eval = ReadNpz(kDigits + "eval.npz");
  ASSERT_TRUE(eval.ok()) << eval.status().ToString();
  const Tensor& x = (*eval)[0].second;
  std::filesystem::create_directories(data.path("eval"));
  ASSERT_TRUE(WriteNpy(data.path("eval/0.npy"), SliceRows(x, 0, 200)).ok());
  ASSERT_TRUE(WriteNpy(data.path("eval/1.npy"), SliceRows(x, 200, x.dim(0) - 200)).ok());
  auto recipe = [&](const std::string& out, const std::string& evaluation, const std::string& preprocess) {
    const std::string yaml = "version: 1\nname: t\nmodel: " + kDigits + "digits_cnn.onnx\n" +
                             "data:\n  calibration: " + kDigits + "calib.npz\n  evaluation: " + evaluation + "\n" +
                             "  calibration_samples: 128\n" + preprocess + "output:\n  dir: " + out + "\n" +
                             "prune: {enabled: true, structure: unstructured, sparsity: 0.3}\n"
                             "quantize:\n  fallback: {enabled: true, to: fp16, max_layers: 2}\n"
                             "evaluate:\n  metric: sqnr\n  gate: {max_drop: 45}\n";
    auto r = ParseRecipe(yaml, out, "test.yaml");
    EXPECT_TRUE(r.ok()) << r.status().ToString() << "\n" << yaml;
    return r.ok() ? *r : Recipe{};
  };
  auto plain = RunRecipe(recipe(a.root(), kDigits + "eval.npz", ""));
  ASSERT_TRUE(plain.ok()) << plain.status().ToString();
  // An identity written out (mean 0, std 1) still takes the transform path.
  auto folder = RunRecipe(recipe(b.root(), data.path("eval"), "  preprocess: {mean: [0.0], std: [1.0]}\n"));
  ASSERT_TRUE(folder.ok()) << folder.status().ToString();
  EXPECT_FALSE(folder->fallback.empty());  // the fallback loop ran
  // The same model; only the recipe hash in its provenance differs (the
  // recipes name different data).
  auto recipe_hash = [](const std::string& path) {
    auto m = LoadModel(path);
    EXPECT_TRUE(m.ok()) << m.status().ToString();
    for (const auto& [key, value] : m.ok() ? m->metadata_props : decltype(m->metadata_props){})
      if (key == "sparq.recipe_fnv1a64") return value;
    return std::string("(none)");
  };
  const std::string plain_hash = recipe_hash(plain->output_model), folder_hash = recipe_hash(folder->output_model);
  EXPECT_NE(plain_hash, folder_hash);
  std::string folder_bytes = *ReadFile(folder->output_model);
  const size_t at = folder_bytes.find(folder_hash);
  ASSERT_NE(at, std::string::npos);
  folder_bytes.replace(at, folder_hash.size(), plain_hash);
  EXPECT_EQ(*ReadFile(plain->output_model), folder_bytes);
  EXPECT_EQ(plain->sqnr_db, folder->sqnr_db);

  std::vector<std::string> written, reported;
  for (const auto& e : std::filesystem::recursive_directory_iterator(b.root())) written.push_back(e.path().string());
  for (const auto& f : folder->files) reported.push_back(std::filesystem::path(f).lexically_normal().string());
  std::sort(written.begin(), written.end());
  std::sort(reported.begin(), reported.end());
  EXPECT_EQ(written, reported);
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(data.path("eval")), {}), 2);
}

TEST(RunRecipe, NeverWritesOverTheInputModel) {
  testing::TempDir dir;
  Recipe r = MakeRecipe(dir.root(), "");
  r.output.model = r.model;
  auto report = RunRecipe(r);
  ASSERT_FALSE(report.ok());
  EXPECT_NE(report.status().message().find("never overwrites"), std::string::npos) << report.status().message();
}

// A run that stops with an error (exit 2) under output.overwrite replaces an
// earlier run's reports with ones that say so: CI never publishes a stale
// junit.xml / report.md as this run's result. Without overwrite nothing is
// written (a report left behind would refuse the next run).
TEST(RunRecipe, ErrorReplacesAnEarlierRunsReports) {
  testing::TempDir dir;
  Recipe r = MakeRecipe(dir.root(), "quantize:\n  calibration: {method: max}\n");
  auto passed = RunRecipe(r);
  ASSERT_TRUE(passed.ok()) << passed.status().ToString();
  ASSERT_NE(ReadFile(dir.path("junit.xml"))->find("failures=\"0\""), std::string::npos);
  r.data.evaluation = dir.path("no_such_eval.npz");
  auto failed = RunRecipe(r);
  ASSERT_FALSE(failed.ok());
  const std::string json = *ReadFile(dir.path("report.json"));
  EXPECT_NE(json.find("\"error\""), std::string::npos) << json;
  EXPECT_NE(json.find("no_such_eval.npz"), std::string::npos) << json;
  EXPECT_EQ(json.find("\"gate\""), std::string::npos) << json;
  const std::string junit = *ReadFile(dir.path("junit.xml"));
  EXPECT_NE(junit.find("errors=\"1\""), std::string::npos) << junit;
  EXPECT_NE(junit.find("<error type=\"" + std::string(StatusCodeName(failed.status().code())) + "\""),
            std::string::npos)
      << junit;
  EXPECT_NE(ReadFile(dir.path("report.md"))->find("ERROR"), std::string::npos);

  testing::TempDir fresh;
  Recipe keep = MakeRecipe(fresh.root(), "");
  keep.output.overwrite = false;
  keep.data.evaluation = fresh.path("no_such_eval.npz");
  ASSERT_FALSE(RunRecipe(keep).ok());
  EXPECT_FALSE(std::filesystem::exists(fresh.path("report.json")));
  EXPECT_FALSE(std::filesystem::exists(fresh.path("junit.xml")));
}

// The bundled pruning recipes (acceptance of the pruning issue): at most 1.0
// point of top-1 lost, and the report shows recovery doing better than the
// same schedule without it.
void ExpectPruneRecipeKeepsAccuracyAndRecoveryHelps(const std::string& file) {
  const std::string recipes = std::string(SPARQ_SOURCE_DIR) + "/recipes/";
  auto yaml = ReadFile(recipes + file);
  ASSERT_TRUE(yaml.ok());
  testing::TempDir dir;
  std::string text = *yaml;
  const size_t at = text.find("output:");
  ASSERT_NE(at, std::string::npos);
  text.replace(at, text.find("\n\n", at) - at, "output:\n  dir: " + dir.root() + "\n  overwrite: true");
  auto r = ParseRecipe(text, recipes, file);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  auto report = RunRecipe(*r);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_TRUE(report->passed) << report->ToText();
  EXPECT_LE(report->drop, 1.0) << report->ToText();
  ASSERT_FALSE(report->prune_steps.empty());
  const PruneStepLine& last = report->prune_steps.back();
  EXPECT_GE(last.metric, last.metric_masked) << report->ToText();
  EXPECT_GT(last.sqnr_db, last.sqnr_masked_db + 3.0) << report->ToText();
  EXPECT_GE(last.agreement, last.agreement_masked) << report->ToText();
  EXPECT_NE(report->ToMarkdown().find("with recovery"), std::string::npos);
  if (file == "prune_auto_int8.yaml") {  // block4x4 chosen from the kernel table
    EXPECT_NE(report->prune_text.find("block4x4"), std::string::npos) << report->prune_text;
    EXPECT_NE(report->prune_text.find("pruned, kernel "), std::string::npos) << report->prune_text;
  }
}

TEST(RunRecipe, TwoFourPruningPlusInt8RecipeKeepsAccuracy) {
  ExpectPruneRecipeKeepsAccuracyAndRecoveryHelps("prune_2to4_int8.yaml");
}

TEST(RunRecipe, Block4x4PruningPlusInt8RecipeKeepsAccuracy) {
  ExpectPruneRecipeKeepsAccuracyAndRecoveryHelps("prune_block4x4_int8.yaml");
}

TEST(RunRecipe, KernelAwareAutoPruningRecipeKeepsAccuracy) {
  ExpectPruneRecipeKeepsAccuracyAndRecoveryHelps("prune_auto_int8.yaml");
}

// The QDQ model sparq writes is evaluated as a deployment runtime runs it: its
// DequantizeLinear -> Conv -> QuantizeLinear patterns fused into QLinearConv
// on the INT8 GEMM. Outputs stay within rounding of the float QDQ graph.
TEST(RunRecipe, WrittenQdqModelFusesIntoIntegerConvolutions) {
  testing::TempDir dir;
  auto report = RunRecipe(MakeRecipe(dir.root(), ""));
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  auto model = LoadModel(report->output_model);
  ASSERT_TRUE(model.ok());
  ExecutorOptions fused_options;
  fused_options.profile = GraphProfile::kDeployment;
  ExecutorOptions float_options;
  float_options.backend = "reference";
  auto fused = Executor::Create(*model, fused_options);
  auto qdq = Executor::Create(*model, float_options);
  ASSERT_TRUE(fused.ok() && qdq.ok()) << fused.status().ToString();
  int integer_convs = 0;
  // A convolution that feeds a ReLU's table takes the table in (sparq.QLinearConvLut).
  for (const NodeKernel& k : (*fused)->NodeKernels()) {
    const std::string ops = testing::KernelOps(k.kernel);
    integer_convs += (k.op_type == "QLinearConv" && ops == "conv_s8") ||
                     (k.op_type == "QLinearConvLut" && ops == "conv_s8+lut256");
  }
  EXPECT_EQ(integer_convs, 2);
  auto eval = ReadNpz(kDigits + "eval.npz");
  ASSERT_TRUE(eval.ok());
  const TensorMap in = {{model->graph.inputs[0].name, (*eval)[0].second}};
  TensorMap a, b;
  ASSERT_TRUE((*fused)->Run(in, &a).ok());
  ASSERT_TRUE((*qdq)->Run(in, &b).ok());
  const std::string out = model->graph.outputs[0].name;
  ErrorStats stats;
  ASSERT_TRUE(stats.Add(b.at(out), a.at(out)).ok());
  EXPECT_GT(stats.sqnr_db(), 30.0);
  const int64_t rows = a.at(out).dim(0), classes = a.at(out).dim(1);
  const float* pa = a.at(out).data<float>();
  const float* pb = b.at(out).data<float>();
  int64_t agree = 0;
  for (int64_t r = 0; r < rows; ++r)
    agree += std::max_element(pa + r * classes, pa + (r + 1) * classes) - (pa + r * classes) ==
             std::max_element(pb + r * classes, pb + (r + 1) * classes) - (pb + r * classes);
  EXPECT_GE(static_cast<double>(agree) / static_cast<double>(rows), 0.99);

  // A float value that is also a graph output keeps its pattern unfused.
  Model exposed = *model;
  std::string conv_output;
  for (const Node& n : exposed.graph.nodes)
    if (n.op_type == "Conv" && conv_output.empty()) conv_output = n.outputs[0];
  ValueInfo extra;
  extra.name = conv_output;
  exposed.graph.outputs.push_back(extra);
  auto partly = Executor::Create(exposed, fused_options);
  ASSERT_TRUE(partly.ok());
  integer_convs = 0;
  for (const NodeKernel& k : (*partly)->NodeKernels())
    integer_convs += k.op_type == "QLinearConv" || k.op_type == "QLinearConvLut";
  EXPECT_EQ(integer_convs, 1);
}

// A model below opset 13 is converted before anything runs (QDQ per-channel
// weights need per-axis DequantizeLinear), and the run says so.
TEST(RunRecipe, OldOpsetModelIsConvertedAndSaysSo) {
  testing::TempDir dir;
  auto model = LoadModel(kDigits + "digits_cnn.onnx");
  ASSERT_TRUE(model.ok());
  model->opset_imports = {{"", 9}};  // its ops (Conv, Relu, MaxPool, Flatten, Gemm) are valid at 9
  ASSERT_TRUE(SaveModel(*model, dir.path("digits9.onnx")).ok());
  Recipe r = MakeRecipe(dir.path("out"), "evaluate:\n  metric: top1\n");
  r.model = dir.path("digits9.onnx");
  auto report = RunRecipe(r);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  bool said = false;
  for (const auto& w : report->warnings) said |= w.find("converted the model from opset 9 to 13") != std::string::npos;
  EXPECT_TRUE(said) << report->ToText();
  auto written = LoadModel(report->output_model);
  ASSERT_TRUE(written.ok());
  EXPECT_EQ(written->opset(), 13);
  bool per_axis = false;
  for (const Node& n : written->graph.nodes)
    if (n.op_type == "DequantizeLinear") {
      auto it = written->graph.initializers.find(n.inputs[1]);
      per_axis |= it != written->graph.initializers.end() && it->second.rank() == 1 && it->second.numel() > 1;
    }
  EXPECT_TRUE(per_axis) << "weights fell back to per tensor";
  EXPECT_GT(report->output_metric, 95.0);
}

}  // namespace
}  // namespace sparq

namespace sparq {
namespace {

// A model that FP16 cannot run on the evaluation data: y = x * x, with |x|
// below 1 in calibration (so the Mul computes in float16) and 300 in
// evaluation (90000 > 65504: +inf in float16, finite in float32).
TEST(RunRecipe, ModelComputingInfFailsTheGateNamingTheTensor) {
  testing::TempDir dir;
  Model m;
  m.opset_imports = {{"", 17}};
  m.graph.inputs.push_back(testing::FloatInput("x", {{-1, "n"}, {4, ""}}));
  m.graph.outputs.push_back(testing::FloatInput("y", {{-1, "n"}, {4, ""}}));
  m.graph.nodes.push_back({"square", "Mul", "", {"x", "x"}, {"y"}, {}, ""});
  ASSERT_TRUE(SaveModel(m, dir.path("m.onnx")).ok());
  Tensor big(DataType::kFloat32, {8, 4});
  for (int64_t i = 0; i < big.numel(); ++i) big.data<float>()[i] = 300.0f;
  ASSERT_TRUE(WriteNpz(dir.path("calib.npz"), {{"x", testing::RandomFloats({8, 4}, 3)}}).ok());
  ASSERT_TRUE(WriteNpz(dir.path("eval.npz"), {{"x", big}}).ok());
  const std::string yaml = "model: " + dir.path("m.onnx") + "\ndata:\n  calibration: " + dir.path("calib.npz") +
                           "\n  evaluation: " + dir.path("eval.npz") + "\noutput:\n  dir: " + dir.path("out") +
                           "\nquantize:\n  precision: fp16\nevaluate:\n  metric: cosine\n  gate: {max_drop: 1.0}\n";
  auto r = ParseRecipe(yaml, dir.root(), "nan.yaml");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  auto report = RunRecipe(*r);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_FALSE(report->passed);
  EXPECT_NE(report->nonfinite.find("(output of Mul node 'square'): Inf"), std::string::npos) << report->nonfinite;
  EXPECT_NE(report->ToText().find("computes NaN/Inf"), std::string::npos) << report->ToText();
  EXPECT_NE(report->ToJson().find("\"nonfinite\""), std::string::npos);
}

}  // namespace
}  // namespace sparq

namespace sparq {
namespace {

// Side-file calibration (scales.json) observes every tensor. An infinity in
// one that no INT8 layer reads (Log -> Exp, as an SDPA export's -inf mask
// before Softmax) is left out with a warning naming it; in one that a MatMul
// reads, the run fails naming it and writes nothing.
Model LogModel(bool exp_before_matmul) {
  Model m;
  m.ir_version = 8;
  m.opset_imports = {{"", 17}};
  Graph& g = m.graph;
  g.name = "log";
  const Dim n{-1, "N"};
  g.inputs.push_back(testing::FloatInput("x", {n, {4, ""}}));
  g.outputs.push_back(testing::FloatInput("y", {n, {3, ""}}));
  g.initializers["w"] = testing::RandomFloats({4, 3}, 7);
  g.nodes.push_back({"log", "Log", "", {"x"}, {"lx"}, {}, ""});
  std::string read = "lx";
  if (exp_before_matmul) {
    g.nodes.push_back({"exp", "Exp", "", {"lx"}, {"ex"}, {}, ""});
    read = "ex";
  }
  g.nodes.push_back({"mm", "MatMul", "", {read, "w"}, {"y"}, {}, ""});
  return m;
}

StatusOr<RunReport> RunLogModel(const testing::TempDir& dir, bool exp_before_matmul) {
  Status saved = SaveModel(LogModel(exp_before_matmul), dir.path("model.onnx"));
  if (!saved.ok()) return saved;
  Tensor x = testing::RandomFloats({16, 4}, 3, 0.5f, 2.0f);
  x.data<float>()[5] = 0.0f;  // Log(0) = -inf
  saved = WriteNpz(dir.path("x.npz"), {{"x", x}});
  if (!saved.ok()) return saved;
  auto r = ParseRecipe("version: 1\nmodel: model.onnx\ndata: {calibration: x.npz, evaluation: x.npz, batch_size: 8}\n"
                       "quantize: {precision: int8, calibration: {method: max}, fallback: {enabled: false}}\n"
                       "output: {dir: out, overwrite: true}\n"
                       "evaluate: {metric: cosine, gate: {max_drop: 1}}\n",
                       dir.root(), "r.yaml");
  if (!r.ok()) return r.status();
  return RunRecipe(*r, PipelineOptions{});
}

TEST(RunNonFinite, TensorNoInt8LayerReadsIsLeftOutWithAWarning) {
  testing::TempDir dir;
  auto report = RunLogModel(dir, /*exp_before_matmul=*/true);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  bool warned = false;
  for (const std::string& w : report->warnings) warned |= w.find("hold NaN or an infinity (lx)") != std::string::npos;
  EXPECT_TRUE(warned) << report->ToText();
  auto table = CalibrationTable::Load(dir.path("out/scales.json"));
  ASSERT_TRUE(table.ok()) << table.status().ToString();
  EXPECT_EQ(table->Find("lx"), nullptr);
  EXPECT_NE(table->Find("ex"), nullptr);
}

TEST(RunNonFinite, Int8ReadTensorHoldingAnInfinityIsNamed) {
  testing::TempDir dir;
  auto report = RunLogModel(dir, /*exp_before_matmul=*/false);
  ASSERT_FALSE(report.ok());
  const std::string& message = report.status().message();
  EXPECT_NE(message.find("activation 'lx'"), std::string::npos) << message;
  EXPECT_NE(message.find("INT8 reads it"), std::string::npos) << message;
  EXPECT_FALSE(std::filesystem::exists(dir.path("out/model.sparq.onnx")));
}

}  // namespace
}  // namespace sparq
