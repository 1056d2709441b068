// precision int4 in recipes: the quantize.int4 keys (defaults, errors, round
// trip through RecipeToYaml) and `sparq run` end to end on a small model in
// both forms, without calibration data.
#include <gtest/gtest.h>

#include <filesystem>

#include "sparq/file_io.h"
#include "sparq/npy.h"
#include "sparq/onnx_io.h"
#include "sparq/pipeline.h"
#include "sparq/recipe.h"
#include "test_util.h"

namespace sparq {
namespace {

namespace fs = std::filesystem;

RecipeParseOptions NoFiles() {
  RecipeParseOptions o;
  o.check_files = false;
  return o;
}

StatusOr<Recipe> Parse(const std::string& yaml) { return ParseRecipe(yaml, "/r", "r.yaml", NoFiles()); }

const char* kInt4Minimal =
    "model: model.onnx\n"
    "data:\n"
    "  evaluation: eval.npz\n"
    "quantize:\n"
    "  precision: int4\n";

TEST(Int4Recipe, DefaultsNeedNoCalibrationData) {
  auto r = Parse(kInt4Minimal);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->quantize.precision, RecipeQuantize::Precision::kInt4);
  EXPECT_EQ(r->quantize.int4.block_size, 32);
  EXPECT_FALSE(r->quantize.int4.symmetric);  // onnxruntime's MatMulNBitsQuantizer default
  EXPECT_EQ(r->quantize.int4.format, Int4Format::kMatMulNBits);
  EXPECT_FALSE(r->quantize.search.enabled);
  // The effective recipe parses back to the same settings.
  auto again = ParseRecipe(RecipeToYaml(*r), "/r", "effective.yaml", NoFiles());
  ASSERT_TRUE(again.ok()) << again.status().ToString() << "\n" << RecipeToYaml(*r);
  EXPECT_EQ(again->quantize.precision, RecipeQuantize::Precision::kInt4);
}

TEST(Int4Recipe, KeysParse) {
  auto r = Parse(std::string(kInt4Minimal) +
                 "  int4: {block_size: 128, symmetric: true, method: rtn, format: qdq}\n"
                 "  layers: [{match: 'head.*', precision: fp32}]\n");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->quantize.int4.block_size, 128);
  EXPECT_TRUE(r->quantize.int4.symmetric);
  EXPECT_EQ(r->quantize.int4.format, Int4Format::kQdq);
  auto again = ParseRecipe(RecipeToYaml(*r), "/r", "effective.yaml", NoFiles());
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(again->quantize.int4.block_size, 128);
  EXPECT_EQ(again->quantize.int4.format, Int4Format::kQdq);
}

TEST(Int4Recipe, ErrorsNameTheKey) {
  struct Case {
    const char* yaml;
    const char* expect;
  } cases[] = {
      {"  int4: {block_size: 48}\n", "quantize.int4.block_size: must be 16, 32, 64, 128 or 256"},
      {"  int4: {method: gptq}\n", "data.calibration: required key is missing (quantize.int4.method is gptq)"},
      {"  int4: {method: magic}\n", "quantize.int4.method: 'magic' is not one of rtn, gptq, awq"},
      {"  int4: {format: qoperator}\n", "quantize.int4.format"},
      {"  int4: {blocksize: 32}\n", "quantize.int4.blocksize"},
      {"  layers: [{match: x, precision: int8}]\n", "takes fp32 rules only"},
  };
  for (const Case& c : cases) {
    auto r = Parse(std::string(kInt4Minimal) + c.yaml);
    ASSERT_FALSE(r.ok()) << c.yaml;
    EXPECT_NE(r.status().message().find(c.expect), std::string::npos) << c.yaml << "\n" << r.status().message();
  }
  // quantize.int4 under another precision is a warning, not an error.
  auto r = Parse("model: model.onnx\ndata: {calibration: c.npz, evaluation: eval.npz}\nquantize:\n  int4: {block_size: 64}\n");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_FALSE(r->warnings.empty());
}

// x[n,64] ─MatMul(W1 [64,48])─> h ─Relu─> r ─MatMul(W2 [48,8])─> y
Model TwoLayerMlp() {
  Model m;
  m.ir_version = 8;
  m.opset_imports = {{"", 17}};
  Graph& g = m.graph;
  g.inputs.push_back(testing::FloatInput("x", {{-1, "n"}, {64, ""}}));
  g.outputs.push_back(testing::FloatInput("y", {{-1, "n"}, {8, ""}}));
  g.initializers["W1"] = testing::RandomFloats({64, 48}, 1, -0.3f, 0.3f);
  g.initializers["W2"] = testing::RandomFloats({48, 8}, 2, -0.3f, 0.3f);
  g.nodes.push_back({"mm1", "MatMul", "", {"x", "W1"}, {"h"}, {}, ""});
  g.nodes.push_back({"relu", "Relu", "", {"h"}, {"r"}, {}, ""});
  g.nodes.push_back({"mm2", "MatMul", "", {"r", "W2"}, {"y"}, {}, ""});
  return m;
}

TEST(Int4Recipe, RunWritesBothFormsAndGates) {
  testing::TempDir dir;
  ASSERT_TRUE(SaveModel(TwoLayerMlp(), dir.path("model.onnx")).ok());
  auto npz = SerializeNpz({{"x", testing::RandomFloats({16, 64}, 5)}});
  ASSERT_TRUE(npz.ok());
  ASSERT_TRUE(WriteFileAtomically(dir.path("eval.npz"), *npz).ok());
  for (const char* format : {"matmulnbits", "qdq"}) {
    const std::string yaml = std::string(kInt4Minimal) + "  int4: {format: " + format +
                             "}\n"
                             "evaluate: {metric: cosine, threads: 1, gate: {min_cosine: 0.99}}\n"
                             "output: {dir: out_" + format + ", overwrite: true}\n";
    auto r = ParseRecipe(yaml, dir.root(), "r.yaml");
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    auto report = RunRecipe(*r);
    ASSERT_TRUE(report.ok()) << format << ": " << report.status().ToString();
    EXPECT_TRUE(report->passed) << format << " cosine " << report->cosine;
    EXPECT_GT(report->cosine, 0.99);
    auto written = LoadModel(r->output.model);
    ASSERT_TRUE(written.ok()) << written.status().ToString();
    // The linked C++ checker knows IR <= 8 only; python's checks the QDQ form (IR 10).
    if (std::string(format) == "matmulnbits") EXPECT_TRUE(CheckModel(*written).ok()) << CheckModel(*written).ToString();
    int int4_nodes = 0;
    for (const Node& n : written->graph.nodes) int4_nodes += n.op_type == "MatMulNBits" || n.op_type == "DequantizeLinear";
    EXPECT_EQ(int4_nodes, 2) << format;
    for (const auto& [key, value] : written->metadata_props)
      if (key == "sparq.calibration_method") EXPECT_EQ(value, "none");
  }
}

TEST(Int4Recipe, GptqAndAwqRunOnCalibrationData) {
  testing::TempDir dir;
  ASSERT_TRUE(SaveModel(TwoLayerMlp(), dir.path("model.onnx")).ok());
  for (const char* name : {"calib.npz", "eval.npz"}) {
    auto npz = SerializeNpz({{"x", testing::RandomFloats({16, 64}, name[0] == 'c' ? 6 : 5)}});
    ASSERT_TRUE(npz.ok());
    ASSERT_TRUE(WriteFileAtomically(dir.path(name), *npz).ok());
  }
  for (const char* method : {"gptq", "awq"}) {
    const std::string yaml = std::string("model: model.onnx\ndata: {calibration: calib.npz, evaluation: eval.npz}\n") +
                             "quantize:\n  precision: int4\n  int4: {block_size: 16, method: " + method + "}\n" +
                             "evaluate: {metric: cosine, threads: 1, gate: {min_cosine: 0.99}}\n"
                             "output: {dir: out_" + method + ", overwrite: true}\n";
    auto r = ParseRecipe(yaml, dir.root(), "r.yaml");
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->quantize.int4.method, std::string(method) == "gptq" ? Int4Method::kGptq : Int4Method::kAwq);
    auto again = ParseRecipe(RecipeToYaml(*r), dir.root(), "effective.yaml");
    ASSERT_TRUE(again.ok()) << again.status().ToString();
    EXPECT_EQ(again->quantize.int4.method, r->quantize.int4.method);
    auto report = RunRecipe(*r);
    ASSERT_TRUE(report.ok()) << method << ": " << report.status().ToString();
    EXPECT_TRUE(report->passed) << method << " cosine " << report->cosine;
    int int4_layers = 0;
    for (const LayerDecision& d : report->layers) {
      if (d.reason.rfind("int4", 0) != 0) continue;
      ++int4_layers;
      EXPECT_NE(d.reason.find(method), std::string::npos) << d.reason;
    }
    EXPECT_EQ(int4_layers, 2) << method;
  }
}

}  // namespace
}  // namespace sparq
