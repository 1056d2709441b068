// Issue 24: `sparq run` on a model whose layers sit inside an If on a
// sample-rate input (Silero VAD's shape). Pinned by data.constants, the If
// is folded and its MatMul quantized; not pinned, nothing is quantized and
// the run says so, loudly, in the log, the warnings and every report.
#include <gtest/gtest.h>

#include <memory>

#include "sparq/executor.h"
#include "sparq/file_io.h"
#include "sparq/npy.h"
#include "sparq/onnx_io.h"
#include "sparq/pipeline.h"
#include "pipeline/rate_model.h"
#include "test_util.h"

namespace sparq {
namespace {

using testing::MakeNode;
using testing::RateModel;

StatusOr<RunReport> RunRate(const testing::TempDir& dir, const std::string& constants, const Model& model) {
  Status saved = SaveModel(model, dir.path("model.onnx"));
  if (!saved.ok()) return saved;
  NamedTensors data{{"x", testing::RandomFloats({16, 4}, 3)}};
  if (constants.empty()) data.emplace_back("sr", Tensor::Scalar<int64_t>(16000));  // the one value every batch gets
  saved = WriteNpz(dir.path("x.npz"), data);
  if (!saved.ok()) return saved;
  auto r = ParseRecipe("version: 1\nmodel: model.onnx\ndata:\n  calibration: x.npz\n  evaluation: x.npz\n"
                       "  batch_size: 8\n" + constants +
                       "output: {dir: out, overwrite: true}\n"
                       "evaluate: {metric: cosine, gate: {max_drop: 0.05}}\n"
                       // A named calibration: the default recipe would keep the
                       // 12-weight MatMul float (too small for INT8 to pay).
                       "quantize: {calibration: {method: max}}\n",
                       dir.root(), "r.yaml");
  if (!r.ok()) return r.status();
  return RunRecipe(*r, PipelineOptions{});
}

TEST(RunIf, PinnedSampleRateFoldsTheIfAndQuantizesItsLayer) {
  testing::TempDir dir;
  auto report = RunRate(dir, "  constants: {sr: 16000}\n", RateModel());
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_TRUE(report->passed) << report->ToText();
  EXPECT_EQ(report->quantized_layers, 1);
  EXPECT_TRUE(report->nothing_quantized.empty()) << report->nothing_quantized;
  ASSERT_EQ(report->folded_ifs.size(), 1u);
  EXPECT_NE(report->folded_ifs[0].find("then_branch"), std::string::npos) << report->folded_ifs[0];
  EXPECT_EQ(report->inputs_removed, (std::vector<std::string>{"sr"}));
  bool warned = false;
  for (const std::string& w : report->warnings) warned |= w.find("has no input 'sr'") != std::string::npos;
  EXPECT_TRUE(warned) << report->ToText();

  auto written = LoadModel(dir.path("out/model.sparq.onnx"));
  ASSERT_TRUE(written.ok()) << written.status().ToString();
  ASSERT_EQ(written->graph.inputs.size(), 1u);
  EXPECT_EQ(written->graph.inputs[0].name, "x");
  int ifs = 0, integer_matmuls = 0;
  for (const Node& n : written->graph.nodes) {
    ifs += n.op_type == "If";
    integer_matmuls += n.op_type == "QuantizeLinear";
  }
  EXPECT_EQ(ifs, 0);
  EXPECT_GT(integer_matmuls, 0);
  auto text = ReadFile(dir.path("out/report.json"));
  ASSERT_TRUE(text.ok());
  EXPECT_NE(text->find("\"folded_ifs\""), std::string::npos);
  EXPECT_NE(text->find("\"quantized_layers\": 1"), std::string::npos);
}

TEST(RunIf, NothingQuantizedIsSaidInTheLogAndEveryReport) {
  testing::TempDir dir;
  auto report = RunRate(dir, "", RateModel());  // sr in the data, not pinned: the If stays
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_TRUE(report->passed) << report->ToText();  // the float model is correct: the gate judges accuracy only
  EXPECT_EQ(report->quantized_layers, 0);
  EXPECT_TRUE(report->folded_ifs.empty());
  EXPECT_NE(report->nothing_quantized.find("the model's only layers are 2 Conv/Gemm/MatMul layer(s) inside If/Loop/Scan subgraphs"),
            std::string::npos)
      << report->nothing_quantized;
  EXPECT_NE(report->nothing_quantized.find("data.constants"), std::string::npos) << report->nothing_quantized;
  bool warned = false;
  for (const std::string& w : report->warnings) warned |= w.find("nothing was quantized (int8 layers: 0)") == 0;
  EXPECT_TRUE(warned) << report->ToText();
  EXPECT_NE(report->ToText().find("quantized   NOTHING"), std::string::npos) << report->ToText();
  auto md = ReadFile(dir.path("out/report.md"));
  ASSERT_TRUE(md.ok());
  EXPECT_NE(md->find("**Nothing was quantized** (int8 layers: 0)"), std::string::npos) << *md;
  auto json = ReadFile(dir.path("out/report.json"));
  ASSERT_TRUE(json.ok());
  EXPECT_NE(json->find("\"nothing_quantized\""), std::string::npos);
  EXPECT_NE(json->find("\"quantized_layers\": 0"), std::string::npos);
}

TEST(RunIf, ModelWithoutWeightedLayersSaysWhyNothingWasQuantized) {
  testing::TempDir dir;
  Model m;
  m.ir_version = 8;
  m.opset_imports = {{"", 17}};
  const Dim n{-1, "N"};
  m.graph.inputs.push_back(testing::FloatInput("x", {n, {4, ""}}));
  m.graph.inputs.push_back(testing::FloatInput("sr", {}));
  m.graph.outputs.push_back(testing::FloatInput("y", {n, {4, ""}}));
  m.graph.nodes.push_back(MakeNode("relu", "Relu", {"x"}, {"y"}));
  auto report = RunRate(dir, "  constants: {sr: 16000}\n", m);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_TRUE(report->folded_ifs.empty());
  EXPECT_TRUE(report->inputs_removed.empty());  // a pin that decides no If changes nothing
  EXPECT_NE(report->nothing_quantized.find("no Conv, Gemm or MatMul layer"), std::string::npos)
      << report->nothing_quantized;
}

}  // namespace
}  // namespace sparq
