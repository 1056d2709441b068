// Issue 24: `sparq calibrate` and `sparq quantize` fold the Ifs their
// --constant pins decide, as `sparq run` folds data.constants, so that
// calibrate -> quantize by table writes the model `sparq run` writes; the
// table records the pins, and quantizing with other pins (or none) is an
// error naming the input and both values.
#include <gtest/gtest.h>

#include <filesystem>

#include "pipeline/rate_model.h"
#include "sparq/commands.h"
#include "sparq/file_io.h"
#include "sparq/npy.h"
#include "sparq/onnx_io.h"
#include "sparq/pipeline.h"
#include "test_util.h"

namespace sparq {
namespace {

using testing::RateModel;

using Pins = std::map<std::string, std::vector<double>>;

// The rate model and its data (x only: sr is pinned) in `dir`.
void WriteRateFiles(const testing::TempDir& dir, const Model& model) {
  ASSERT_TRUE(SaveModel(model, dir.path("model.onnx")).ok());
  ASSERT_TRUE(WriteNpz(dir.path("x.npz"), {{"x", testing::RandomFloats({16, 4}, 3)}}).ok());
}

CalibrateFilesOptions Calibration(const testing::TempDir& dir, const Pins& pins, const std::string& output) {
  CalibrateFilesOptions c;
  c.model = dir.path("model.onnx");
  c.data = dir.path("x.npz");
  c.output = dir.path(output);
  c.batch_size = 8;
  c.calibration.method = CalibrationMethod::kMax;
  c.constants = pins;
  return c;
}

QuantizeFilesOptions Quantization(const testing::TempDir& dir, const Pins& pins, const std::string& scales,
                                  const std::string& output) {
  QuantizeFilesOptions q;
  q.model = dir.path("model.onnx");
  q.scales = dir.path(scales);
  q.output = dir.path(output);
  q.constants = pins;
  return q;
}

// `sparq run` on the rate model with sr pinned, calibrating by max (or with
// the table `scales`), writing its table to out/scales.json when it calibrates.
StatusOr<RunReport> RunPinned(const testing::TempDir& dir, int64_t sr, const std::string& scales = "") {
  const std::string quantize = scales.empty() ? "quantize: {calibration: {method: max}, fallback: {enabled: false}}\n"
                                              : "quantize: {scales: " + scales + ", fallback: {enabled: false}}\n";
  auto r = ParseRecipe("version: 1\nmodel: model.onnx\ndata:\n  calibration: x.npz\n  evaluation: x.npz\n"
                       "  batch_size: 8\n  constants: {sr: " + std::to_string(sr) + "}\n" +
                       "output: {dir: out, overwrite: true" + (scales.empty() ? ", scales: scales.json" : "") + "}\n" +
                       quantize + "evaluate: {metric: cosine, gate: {max_drop: 0.5}}\n",
                       dir.root(), "r.yaml");
  if (!r.ok()) return r.status();
  return RunRecipe(*r, PipelineOptions{});
}

// The graph a file holds, provenance left out (a run's names its recipe).
std::string GraphBytes(const std::string& path) {
  auto m = LoadModel(path);
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  if (!m.ok()) return "";
  m->metadata_props.clear();
  auto bytes = SerializeModel(*m);
  return bytes.ok() ? *bytes : "";
}

TEST(FoldCommands, CalibrateThenQuantizeByTableWritesTheModelRunWrites) {
  testing::TempDir dir;
  WriteRateFiles(dir, RateModel());
  auto table = CalibrateFiles(Calibration(dir, {{"sr", {16000}}}, "scales.json"));
  ASSERT_TRUE(table.ok()) << table.status().ToString();
  EXPECT_EQ(table->folded_inputs, (Pins{{"sr", {16000}}}));
  EXPECT_NE(table->Find("y"), nullptr);  // the inlined MatMul's output, named as the If's
  EXPECT_EQ(table->Find("sr"), nullptr);
  auto loaded = CalibrationTable::Load(dir.path("scales.json"));
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  EXPECT_EQ(loaded->folded_inputs, table->folded_inputs);

  auto quantized = QuantizeFiles(Quantization(dir, {{"sr", {16000}}}, "scales.json", "q.onnx"));
  ASSERT_TRUE(quantized.ok()) << quantized.status().ToString();
  ASSERT_EQ(quantized->folded_ifs.size(), 1u);
  EXPECT_NE(quantized->folded_ifs[0].find("then_branch"), std::string::npos) << quantized->folded_ifs[0];
  ASSERT_FALSE(quantized->report.warnings.empty());
  EXPECT_NE(quantized->report.warnings[0].find("has no input 'sr'"), std::string::npos) << quantized->report.warnings[0];
  ASSERT_EQ(quantized->report.layers.size(), 1u);
  EXPECT_EQ(quantized->report.layers[0].precision, Precision::kINT8);
  EXPECT_NE(quantized->ToJson().find("\"folded_ifs\""), std::string::npos);

  // sparq run calibrating itself writes the same table and the same graph;
  // with the calibrated table as quantize.scales, the same graph again.
  auto run = RunPinned(dir, 16000);
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  auto a = ReadFile(dir.path("scales.json")), b = ReadFile(dir.path("out/scales.json"));
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(*a, *b);
  const std::string want = GraphBytes(dir.path("q.onnx"));
  ASSERT_FALSE(want.empty());
  EXPECT_TRUE(GraphBytes(run->output_model) == want);
  auto reused = RunPinned(dir, 16000, dir.path("scales.json"));
  ASSERT_TRUE(reused.ok()) << reused.status().ToString();
  EXPECT_TRUE(GraphBytes(reused->output_model) == want);
  auto written = LoadModel(dir.path("q.onnx"));
  ASSERT_TRUE(written.ok());
  ASSERT_EQ(written->graph.inputs.size(), 1u);  // sr left with the If
  EXPECT_EQ(written->graph.inputs[0].name, "x");
}

TEST(FoldCommands, TableWithoutFoldedInputsKeepsItsBytes) {
  testing::TempDir dir;
  WriteRateFiles(dir, RateModel());
  ASSERT_TRUE(WriteNpz(dir.path("x.npz"), {{"x", testing::RandomFloats({16, 4}, 3)},
                                           {"sr", Tensor::Scalar<int64_t>(16000)}}).ok());
  auto table = CalibrateFiles(Calibration(dir, {}, "scales.json"));  // sr fed by the data: no fold
  ASSERT_TRUE(table.ok()) << table.status().ToString();
  EXPECT_TRUE(table->folded_inputs.empty());
  auto text = ReadFile(dir.path("scales.json"));
  ASSERT_TRUE(text.ok());
  EXPECT_EQ(text->find("folded_inputs"), std::string::npos);
}

TEST(FoldCommands, QuantizeNeedsTheTablesPins) {
  testing::TempDir dir;
  WriteRateFiles(dir, RateModel());
  ASSERT_TRUE(CalibrateFiles(Calibration(dir, {{"sr", {16000}}}, "scales.json")).ok());

  auto none = QuantizeFiles(Quantization(dir, {}, "scales.json", "q.onnx"));
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(none.status().message().find("scales " + dir.path("scales.json") +
                                         " was calibrated with input 'sr' pinned (sr=16000)"),
            std::string::npos)
      << none.status().message();
  EXPECT_NE(none.status().message().find("--constant sr=16000"), std::string::npos) << none.status().message();

  auto other = QuantizeFiles(Quantization(dir, {{"sr", {8000}}}, "scales.json", "q.onnx"));
  ASSERT_FALSE(other.ok());
  EXPECT_NE(other.status().message().find("--constant pins sr=8000"), std::string::npos) << other.status().message();
  EXPECT_FALSE(std::filesystem::exists(dir.path("q.onnx")));

  // sparq run with the table as quantize.scales and another rate: the same error, naming the recipe key.
  auto run = RunPinned(dir, 8000, dir.path("scales.json"));
  ASSERT_FALSE(run.ok());
  EXPECT_NE(run.status().message().find("data.constants pins sr=8000"), std::string::npos) << run.status().message();

  // A table that folded an input, quantized with pins that fold another: the table's pin is missing.
  auto table = CalibrationTable::Load(dir.path("scales.json"));
  ASSERT_TRUE(table.ok());
  table->folded_inputs = {{"rate", {1}}};
  ASSERT_TRUE(table->Save(dir.path("other.json")).ok());
  auto extra = QuantizeFiles(Quantization(dir, {{"sr", {16000}}}, "other.json", "q.onnx"));
  ASSERT_FALSE(extra.ok());
  EXPECT_NE(extra.status().message().find("input 'rate' pinned (rate=1)"), std::string::npos)
      << extra.status().message();
}

TEST(FoldCommands, PinsThatFoldNothingOrNameNoInputAreErrors) {
  testing::TempDir dir;
  WriteRateFiles(dir, RateModel());
  ASSERT_TRUE(CalibrateFiles(Calibration(dir, {{"sr", {16000}}}, "scales.json")).ok());

  auto unknown = QuantizeFiles(Quantization(dir, {{"rate", {16000}}}, "scales.json", "q.onnx"));
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(unknown.status().message().find("--constant: constant for input 'rate': the model has no such input "
                                            "(inputs: x, sr)"),
            std::string::npos)
      << unknown.status().message();
  auto calibrate_unknown = CalibrateFiles(Calibration(dir, {{"rate", {16000}}}, "s2.json"));
  ASSERT_FALSE(calibrate_unknown.ok());
  EXPECT_NE(calibrate_unknown.status().message().find("constant for input 'rate'"), std::string::npos)
      << calibrate_unknown.status().message();

  // The If reads sr == rate2: pinning sr alone decides nothing. Calibrating
  // pins the data (no fold, nothing recorded); quantizing reads no data, so
  // the pin would change nothing: an error naming it.
  testing::TempDir two;
  WriteRateFiles(two, RateModel(/*second_rate=*/true));
  ASSERT_TRUE(WriteNpz(two.path("x.npz"), {{"x", testing::RandomFloats({16, 4}, 3)},
                                           {"rate2", Tensor::Scalar<int64_t>(16000)}}).ok());
  auto calibrated = CalibrateFiles(Calibration(two, {{"sr", {16000}}}, "scales.json"));
  ASSERT_TRUE(calibrated.ok()) << calibrated.status().ToString();
  EXPECT_TRUE(calibrated->folded_inputs.empty());
  auto undecided = QuantizeFiles(Quantization(two, {{"sr", {16000}}}, "scales.json", "q.onnx"));
  ASSERT_FALSE(undecided.ok());
  EXPECT_EQ(undecided.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(undecided.status().message().find("--constant sr=16000: no If of the model is decided by input 'sr'"),
            std::string::npos)
      << undecided.status().message();
  // Pinning both decides it.
  auto decided = QuantizeFiles(Quantization(two, {{"sr", {16000}}, {"rate2", {16000}}}, "scales.json", "q.onnx"));
  ASSERT_TRUE(decided.ok()) << decided.status().ToString();
  EXPECT_EQ(decided->folded_inputs, (Pins{{"rate2", {16000}}, {"sr", {16000}}}));
}

TEST(FoldCommands, ShardsRecordThePinsAndDifferentlyFoldedPartsDoNotMerge) {
  testing::TempDir dir;
  WriteRateFiles(dir, RateModel());
  CalibrateFilesOptions c = Calibration(dir, {{"sr", {16000}}}, "part-0.hist");
  c.shards = 2;
  auto part0 = CalibrateShardFiles(c);
  ASSERT_TRUE(part0.ok()) << part0.status().ToString();
  EXPECT_EQ(part0->folded_inputs, (Pins{{"sr", {16000}}}));
  c = Calibration(dir, {{"sr", {16000}}}, "part-1.hist");
  c.shards = 2;
  c.shard = 1;
  ASSERT_TRUE(CalibrateShardFiles(c).ok());
  MergeCalibrationFilesOptions m;
  m.parts = {dir.path("part-0.hist"), dir.path("part-1.hist")};
  m.output = dir.path("merged.json");
  auto merged = MergeCalibrationFiles(m);
  ASSERT_TRUE(merged.ok()) << merged.status().ToString();
  EXPECT_EQ(merged->folded_inputs, (Pins{{"sr", {16000}}}));
  ASSERT_TRUE(CalibrateFiles(Calibration(dir, {{"sr", {16000}}}, "one.json")).ok());
  auto one = ReadFile(dir.path("one.json")), two = ReadFile(dir.path("merged.json"));
  ASSERT_TRUE(one.ok() && two.ok());
  EXPECT_EQ(*one, *two);

  c = Calibration(dir, {{"sr", {8000}}}, "part-1.hist");  // the else branch: other tensors, other pins
  c.shards = 2;
  c.shard = 1;
  ASSERT_TRUE(CalibrateShardFiles(c).ok());
  auto mixed = MergeCalibrationFiles(m);
  ASSERT_FALSE(mixed.ok());
  EXPECT_NE(mixed.status().message().find("the pinned inputs whose Ifs were folded"), std::string::npos)
      << mixed.status().message();
}

TEST(FoldCommands, DamagedFoldedInputsAreCorruption) {
  testing::TempDir dir;
  const std::string table = R"({"format": "sparq-calibration", "version": 1, "method": "max", "folded_inputs": )";
  for (const std::string bad : {"[16000]", R"({"sr": []})", R"({"sr": ["16000"]})"}) {
    ASSERT_TRUE(WriteFileAtomically(dir.path("t.json"), table + bad + R"(, "tensors": {}})").ok());
    auto loaded = CalibrationTable::Load(dir.path("t.json"));
    ASSERT_FALSE(loaded.ok()) << bad;
    EXPECT_EQ(loaded.status().code(), StatusCode::kCorruption) << bad;
    EXPECT_NE(loaded.status().message().find("\"folded_inputs\" must map input names"), std::string::npos)
        << loaded.status().message();
  }
}

}  // namespace
}  // namespace sparq
