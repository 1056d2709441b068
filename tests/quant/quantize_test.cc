// Quantization rewrites: BN folding, QDQ, QOperator, FP16, mixed precision.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "sparq/executor.h"
#include "sparq/onnx_io.h"
#include "sparq/quantize.h"
#include "test_util.h"

namespace sparq {
namespace {

// x[n,3,8,8] -> conv1 -> bn -> relu -> conv2(1x1) -> gap -> flatten -> fc(Gemm, transB) -> y[n,5]
Model SmallCnn() {
  Model m;
  m.opset_imports = {{"", 17}};
  Graph& g = m.graph;
  g.inputs.push_back(testing::FloatInput("x", {{-1, "n"}, {3, ""}, {8, ""}, {8, ""}}));
  g.outputs.push_back(testing::FloatInput("y", {{-1, "n"}, {5, ""}}));
  g.initializers["w1"] = testing::RandomFloats({4, 3, 3, 3}, 1, -0.5f, 0.5f);
  g.initializers["b1"] = testing::RandomFloats({4}, 2, -0.1f, 0.1f);
  g.initializers["gamma"] = testing::RandomFloats({4}, 3, 0.5f, 1.5f);
  g.initializers["beta"] = testing::RandomFloats({4}, 4, -0.2f, 0.2f);
  g.initializers["mean"] = testing::RandomFloats({4}, 5, -0.1f, 0.1f);
  g.initializers["var"] = testing::RandomFloats({4}, 6, 0.5f, 1.0f);
  g.initializers["w2"] = testing::RandomFloats({6, 4, 1, 1}, 7, -0.5f, 0.5f);
  g.initializers["w3"] = testing::RandomFloats({5, 6}, 8, -0.5f, 0.5f);
  g.initializers["b3"] = testing::RandomFloats({5}, 9, -0.1f, 0.1f);
  g.initializers["shape"] = Tensor::FromVector<int64_t>({2}, {0, -1});
  g.nodes.push_back({"conv1", "Conv", "", {"x", "w1", "b1"}, {"c1"}, {Attribute::Ints("pads", {1, 1, 1, 1})}, ""});
  g.nodes.push_back({"bn", "BatchNormalization", "", {"c1", "gamma", "beta", "mean", "var"}, {"n1"}, {}, ""});
  g.nodes.push_back({"relu", "Relu", "", {"n1"}, {"r1"}, {}, ""});
  g.nodes.push_back({"conv2", "Conv", "", {"r1", "w2"}, {"c2"}, {}, ""});
  g.nodes.push_back({"gap", "GlobalAveragePool", "", {"c2"}, {"p"}, {}, ""});
  g.nodes.push_back({"flat", "Reshape", "", {"p", "shape"}, {"f"}, {}, ""});
  g.nodes.push_back({"fc", "Gemm", "", {"f", "w3", "b3"}, {"y"}, {Attribute::Int("transB", 1)}, ""});
  return m;
}

Tensor Input(uint32_t seed, int64_t n = 4) { return testing::RandomFloats({n, 3, 8, 8}, seed, -1.0f, 1.0f); }

Tensor RunModel(const Model& m, const Tensor& x) {
  auto exec = Executor::Create(m, ExecutorOptions{1});
  EXPECT_TRUE(exec.ok()) << exec.status().ToString();
  TensorMap out;
  Status st = (*exec)->Run({{"x", x}}, &out);
  EXPECT_TRUE(st.ok()) << st.ToString();
  return out["y"].ToFloat32();
}

double Sqnr(const Tensor& ref, const Tensor& got) { return testing::SqnrDb(ref, got); }

CalibrationTable CalibrateCnn(const Model& m, bool symmetric = true) {
  std::vector<Tensor> batches = {Input(11, 8), Input(12, 8)};
  size_t next = 0;
  CalibrationOptions opt;
  opt.method = CalibrationMethod::kMax;
  opt.symmetric = symmetric;
  auto table = Calibrate(
      m,
      [&](TensorMap* b) -> StatusOr<bool> {
        if (next == batches.size()) return false;
        (*b)["x"] = batches[next++];
        return true;
      },
      opt);
  EXPECT_TRUE(table.ok()) << table.status().ToString();
  return *table;
}

int CountOps(const Model& m, const std::string& op) {
  int n = 0;
  for (const Node& node : m.graph.nodes) n += node.op_type == op;
  return n;
}

TEST(FoldBatchNorm, KeepsOutputsAndRemovesTheNode) {
  Model m = SmallCnn();
  Model folded = m;
  auto n = FoldBatchNorm(folded);
  ASSERT_TRUE(n.ok()) << n.status().ToString();
  EXPECT_EQ(*n, 1);
  EXPECT_EQ(CountOps(folded, "BatchNormalization"), 0);
  EXPECT_EQ(folded.graph.initializers.count("gamma"), 0u);
  Tensor x = Input(1);
  Tensor a = RunModel(m, x), b = RunModel(folded, x);
  for (int64_t i = 0; i < a.numel(); ++i) EXPECT_NEAR(a.data<float>()[i], b.data<float>()[i], 1e-5f);
}

TEST(QuantizeWeight, PerChannelScalesAndExactZeros) {
  Tensor w = Tensor::FromVector<float>({2, 3}, {0.0f, 1.27f, -0.635f, 2.54f, 0.0f, -1.0f});
  QuantizedWeight q = QuantizeWeightSymmetric(w, 0, true);
  EXPECT_FLOAT_EQ(q.scales.data<float>()[0], 0.01f);
  EXPECT_FLOAT_EQ(q.scales.data<float>()[1], 0.02f);
  const int8_t* v = q.values.data<int8_t>();
  EXPECT_EQ(v[0], 0);
  EXPECT_EQ(v[1], 127);
  EXPECT_EQ(v[2], -64);  // -63.5 rounds half to even
  EXPECT_EQ(v[3], 127);
  EXPECT_EQ(v[4], 0);
  EXPECT_EQ(v[5], -50);
}

TEST(Quantize, QdqModelRunsCloseToFloatAndPassesChecker) {
  Model m = SmallCnn();
  CalibrationTable table = CalibrateCnn(m);
  QuantizeReport report;
  auto q = QuantizeModel(m, table, QuantizeOptions{}, &report);
  ASSERT_TRUE(q.ok()) << q.status().ToString();
  EXPECT_EQ(report.folded_batchnorms, 1);
  EXPECT_EQ(report.layers.size(), 3u);
  for (const auto& l : report.layers) EXPECT_EQ(l.precision, Precision::kINT8) << l.node << ": " << l.reason;
  EXPECT_GE(CountOps(*q, "QuantizeLinear"), 3);
  EXPECT_GE(CountOps(*q, "DequantizeLinear"), 6);
  EXPECT_TRUE(CheckModel(*q).ok()) << CheckModel(*q).ToString();
  Tensor x = Input(21);
  EXPECT_GT(Sqnr(RunModel(m, x), RunModel(*q, x)), 25.0);
  // Weights are stored as int8 and the bias as int32.
  int int8_weights = 0, int32_bias = 0;
  for (const auto& [name, t] : q->graph.initializers) {
    const bool zero_point = name.find("zero_point") != std::string::npos;
    int8_weights += t.dtype() == DataType::kInt8 && t.numel() > 1 && !zero_point;
    int32_bias += t.dtype() == DataType::kInt32;
  }
  EXPECT_EQ(int8_weights, 3);
  EXPECT_EQ(int32_bias, 2);
}

// One quantizer after a fusable activation, none between the layer and it
// (as onnxruntime and TensorRT write): Conv -> Relu -> Q -> DQ, with the
// Relu's range. The executor fuses it all into one integer convolution.
TEST(Quantize, QuantizesAfterTheActivationNotBefore) {
  Model m = SmallCnn();
  CalibrationTable table = CalibrateCnn(m);
  for (QuantFormat format : {QuantFormat::kQDQ, QuantFormat::kQOperator}) {
    QuantizeOptions options;
    options.format = format;
    auto q = QuantizeModel(m, table, options, nullptr);
    ASSERT_TRUE(q.ok()) << q.status().ToString();
    const Graph& g = q->graph;
    const Node* relu = nullptr;
    for (const Node& n : g.nodes)
      if (n.op_type == "Relu") relu = &n;
    ASSERT_NE(relu, nullptr);
    const Node* producer = nullptr;
    for (const Node& n : g.nodes)
      if (!n.outputs.empty() && n.outputs[0] == relu->inputs[0]) producer = &n;
    ASSERT_NE(producer, nullptr);
    if (format == QuantFormat::kQDQ) {
      EXPECT_EQ(producer->op_type, "Conv");
      int after = 0;
      for (const Node& n : g.nodes) after += n.op_type == "QuantizeLinear" && n.inputs[0] == relu->outputs[0];
      EXPECT_EQ(after, 1);
      // The quantizer takes the Relu's range: zero below.
      EXPECT_EQ(table.Find("r1")->min, 0.0f);
      ExecutorOptions fused;
      fused.threads = 1;
      fused.profile = GraphProfile::kDeployment;
      auto exec = Executor::Create(*q, fused);
      ASSERT_TRUE(exec.ok()) << exec.status().ToString();
      bool conv_lut = false;
      for (const auto& k : (*exec)->NodeKernels()) conv_lut |= k.op_type == "QLinearConvLut";
      EXPECT_TRUE(conv_lut);
    } else {
      // QLinearConv's output takes the Relu's scale.
      EXPECT_EQ(producer->op_type, "DequantizeLinear");
      EXPECT_FLOAT_EQ(q->graph.initializers.at(producer->inputs[1]).data<float>()[0], table.Find("r1")->scale);
    }
    Tensor x = Input(21);
    EXPECT_GT(Sqnr(RunModel(m, x), RunModel(*q, x)), 25.0);
  }
}

TEST(Quantize, QdqIsDeterministic) {
  Model m = SmallCnn();
  CalibrationTable table = CalibrateCnn(m);
  auto a = QuantizeModel(m, table, QuantizeOptions{}, nullptr);
  auto b = QuantizeModel(m, table, QuantizeOptions{}, nullptr);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(*SerializeModel(*a), *SerializeModel(*b));
}

TEST(Quantize, QOperatorModelRuns) {
  Model m = SmallCnn();
  CalibrationTable table = CalibrateCnn(m);
  QuantizeOptions opt;
  opt.format = QuantFormat::kQOperator;
  auto q = QuantizeModel(m, table, opt, nullptr);
  ASSERT_TRUE(q.ok()) << q.status().ToString();
  EXPECT_EQ(CountOps(*q, "QLinearConv"), 2);
  EXPECT_EQ(CountOps(*q, "QLinearMatMul"), 1);
  EXPECT_EQ(CountOps(*q, "Conv"), 0);
  EXPECT_TRUE(CheckModel(*q).ok()) << CheckModel(*q).ToString();
  Tensor x = Input(22);
  EXPECT_GT(Sqnr(RunModel(m, x), RunModel(*q, x)), 20.0);
}

TEST(Quantize, AsymmetricUint8Activations) {
  Model m = SmallCnn();
  CalibrationTable table = CalibrateCnn(m, /*symmetric=*/false);
  auto q = QuantizeModel(m, table, QuantizeOptions{}, nullptr);
  ASSERT_TRUE(q.ok()) << q.status().ToString();
  Tensor x = Input(23);
  EXPECT_GT(Sqnr(RunModel(m, x), RunModel(*q, x)), 25.0);
}

TEST(Quantize, Float16ModelKeepsFloat32Io) {
  Model m = SmallCnn();
  CalibrationTable table = CalibrateCnn(m);
  QuantizeOptions opt;
  opt.precision = Precision::kFP16;
  auto q = QuantizeModel(m, table, opt, nullptr);
  ASSERT_TRUE(q.ok()) << q.status().ToString();
  EXPECT_GE(CountOps(*q, "Cast"), 2);
  EXPECT_EQ(q->graph.inputs[0].dtype, DataType::kFloat32);
  EXPECT_EQ(q->graph.initializers.at("w2").dtype(), DataType::kFloat16);
  EXPECT_TRUE(CheckModel(*q).ok()) << CheckModel(*q).ToString();
  Tensor x = Input(24);
  EXPECT_GT(Sqnr(RunModel(m, x), RunModel(*q, x)), 45.0);
}

TEST(Quantize, MixedPrecisionByRegex) {
  Model m = SmallCnn();
  CalibrationTable table = CalibrateCnn(m);
  QuantizeOptions opt;
  opt.layers = {{"conv.*", Precision::kFP16}, {"fc", Precision::kFP32}};
  QuantizeReport report;
  auto q = QuantizeModel(m, table, opt, &report);
  ASSERT_TRUE(q.ok()) << q.status().ToString();
  for (const auto& l : report.layers) {
    if (l.node == "fc") EXPECT_EQ(l.precision, Precision::kFP32);
    else EXPECT_EQ(l.precision, Precision::kFP16) << l.node;
  }
  EXPECT_EQ(CountOps(*q, "QuantizeLinear"), 0);
  Tensor x = Input(25);
  EXPECT_GT(Sqnr(RunModel(m, x), RunModel(*q, x)), 45.0);
}

TEST(Quantize, ExcludeOpsKeepsOpTypesInFloatUnlessARuleNamesTheNode) {
  Model m = SmallCnn();
  CalibrationTable table = CalibrateCnn(m);
  QuantizeOptions opt;
  opt.exclude_ops = {"Conv", "Softmax"};
  opt.layers = {{"conv2", Precision::kINT8}};  // a rule by name wins over the op type
  QuantizeReport report;
  auto q = QuantizeModel(m, table, opt, &report);
  ASSERT_TRUE(q.ok()) << q.status().ToString();
  ASSERT_EQ(report.layers.size(), 3u);
  for (const auto& l : report.layers) {
    if (l.node == "conv1") {
      EXPECT_EQ(l.precision, Precision::kFP32);
      EXPECT_EQ(l.reason, "exclude_ops 'Conv'");
    } else {
      EXPECT_EQ(l.precision, Precision::kINT8) << l.node;
    }
  }
  // The model has no Softmax: a warning, not an error.
  ASSERT_EQ(report.warnings.size(), 1u);
  EXPECT_EQ(report.warnings[0], "quantize.exclude_ops: the model has no 'Softmax' node");
  Tensor x = Input(26);
  EXPECT_GT(Sqnr(RunModel(m, x), RunModel(*q, x)), 25.0);
  opt.exclude_ops = {""};
  EXPECT_EQ(QuantizeModel(m, table, opt, nullptr).status().code(), StatusCode::kInvalidArgument);
}

// Calibrate once, quantize many times: what a table must hold for a model.
TEST(CalibrationTable, NeedsEachInt8LayersInputAndOutput) {
  Model m = SmallCnn();
  auto needs = CalibrationTensorsNeeded(m, QuantizeOptions{});
  ASSERT_TRUE(needs.ok()) << needs.status().ToString();
  std::vector<std::string> names;
  for (const auto& n : *needs) names.push_back(n.tensor);
  // BatchNormalization folded into conv1, whose output is quantized after the
  // Relu; INT8 flows on through the pooling (its input c2 is quantized).
  EXPECT_EQ(names, (std::vector<std::string>{"x", "r1", "c2", "p", "f", "y"}));
  EXPECT_EQ((*needs)[1].use, "output of INT8 layer 'conv1'");
  EXPECT_EQ((*needs)[3].use, "output of 'gap' (INT8 flows through GlobalAveragePool)");
  EXPECT_FALSE((*needs)[3].required);  // without it the pooling stays float

  // Layers kept in float need nothing; dynamic INT8 reads no ranges.
  QuantizeOptions fc_float;
  fc_float.layers = {{"fc", Precision::kFP32}};
  auto fewer = CalibrationTensorsNeeded(m, fc_float);
  ASSERT_TRUE(fewer.ok());
  EXPECT_EQ(fewer->size(), 4u);
  QuantizeOptions dynamic;
  dynamic.dynamic = true;
  EXPECT_TRUE(CalibrationTensorsNeeded(m, dynamic)->empty());
}

TEST(CalibrationTable, CheckNamesTheFirstMissingTensorAndWarnsOfUnknownOnes) {
  Model m = SmallCnn();
  CalibrationTable table = CalibrateCnn(m);
  std::vector<std::string> warnings;
  EXPECT_TRUE(CheckCalibrationTable(m, table, QuantizeOptions{}, &warnings).ok());
  EXPECT_TRUE(warnings.empty());

  CalibrationTable other = table;
  other.tensors.push_back(MakeRange("not_in_model", -1, 1, 1, true, "max"));
  other.tensors.erase(std::remove_if(other.tensors.begin(), other.tensors.end(),
                                     [](const TensorRange& r) { return r.name == "c2" || r.name == "y"; }),
                      other.tensors.end());
  Status st = CheckCalibrationTable(m, other, QuantizeOptions{}, &warnings);
  EXPECT_EQ(st.code(), StatusCode::kNotFound);
  EXPECT_NE(st.message().find("no range for tensor 'c2' (output of INT8 layer 'conv2'); 2 of the 5"),
            std::string::npos)
      << st.message();
  // Without the layers that read them the table is enough; the extra tensor is a warning.
  QuantizeOptions fewer;
  fewer.layers = {{"conv2|fc", Precision::kFP32}};
  EXPECT_TRUE(CheckCalibrationTable(m, other, fewer, &warnings).ok());
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("1 tensor(s) the model does not have (first: 'not_in_model')"), std::string::npos)
      << warnings[0];
}

TEST(Quantize, RuleMatchingNothingIsAnError) {
  Model m = SmallCnn();
  QuantizeOptions opt;
  opt.layers = {{"decoder\\..*", Precision::kFP16}};
  auto q = QuantizeModel(m, CalibrateCnn(m), opt, nullptr);
  ASSERT_FALSE(q.ok());
  EXPECT_NE(q.status().message().find("'decoder\\..*' matches no node"), std::string::npos) << q.status().message();
  opt.layers = {{"(", Precision::kFP16}};
  EXPECT_EQ(QuantizeModel(m, CalibrateCnn(m), opt, nullptr).status().code(), StatusCode::kInvalidArgument);
}

// QOperator at opset 11 has all it needs; QDQ per-channel needs 13.
TEST(Quantize, OpsetUpgradeOnlyWhenTheFormatNeedsIt) {
  auto model = LoadModel(std::string(SPARQ_SOURCE_DIR) + "/examples/digits/digits_cnn.onnx");
  ASSERT_TRUE(model.ok());
  model->opset_imports = {{"", 11}};
  QuantizeOptions qop;
  qop.format = QuantFormat::kQOperator;
  auto line = UpgradeOpsetForInt8(*model, qop);
  ASSERT_TRUE(line.ok()) << line.status().ToString();
  EXPECT_EQ(*line, "");
  EXPECT_EQ(model->opset(), 11);
  line = UpgradeOpsetForInt8(*model, QuantizeOptions{});
  ASSERT_TRUE(line.ok()) << line.status().ToString();
  EXPECT_NE(line->find("from opset 11 to 13"), std::string::npos) << *line;
  EXPECT_EQ(model->opset(), 13);
}

// x[n, k] -> MatMul(w [k, 1]) -> y[n, 1]: one output channel, k weights.
Model OneColumnMatMul(int64_t k) {
  Model m;
  m.opset_imports = {{"", 17}};
  Graph& g = m.graph;
  g.inputs.push_back(testing::FloatInput("x", {{-1, "n"}, {k, ""}}));
  g.outputs.push_back(testing::FloatInput("y", {{-1, "n"}, {1, ""}}));
  g.initializers["w"] = testing::RandomFloats({k, 1}, 31, -0.5f, 0.5f);
  g.nodes.push_back({"fc", "MatMul", "", {"x", "w"}, {"y"}, {}, ""});
  return m;
}

Precision FcPrecision(int64_t k, bool skip_small_layers, std::string* reason = nullptr) {
  Model m = OneColumnMatMul(k);
  CalibrationTable table;
  table.tensors.push_back(MakeRange("x", -1.0f, 1.0f, 1.0f, true, "max"));
  QuantizeOptions opt;
  opt.skip_small_layers = skip_small_layers;
  QuantizeReport report;
  auto q = QuantizeModel(m, table, opt, &report);
  EXPECT_TRUE(q.ok()) << q.status().ToString();
  EXPECT_EQ(report.layers.size(), 1u);
  if (report.layers.empty()) return Precision::kINT8;
  if (reason) *reason = report.layers[0].reason;
  return report.layers[0].precision;
}

// madmom's output layer: 50 weights save 150 bytes, its Q/DQ add ~517: it
// stays float when asked, and the boundary is 3 * weights against the overhead.
TEST(Quantize, SkipSmallLayersKeepsLayersINT8CannotShrinkFloat) {
  std::string reason;
  EXPECT_EQ(FcPrecision(50, false), Precision::kINT8);
  EXPECT_EQ(FcPrecision(50, true, &reason), Precision::kFP32);
  EXPECT_NE(reason.find("too small for INT8: 50 weights"), std::string::npos) << reason;
  const int64_t overhead = Int8LayerOverheadBytes(1);
  EXPECT_EQ(overhead, 517);
  EXPECT_EQ(FcPrecision(overhead / 3, true), Precision::kFP32);      // 172 weights save 516 bytes
  EXPECT_EQ(FcPrecision(overhead / 3 + 1, true), Precision::kINT8);  // 173 save 519
}

// Convs keep INT8 whatever their size (their weights run at every
// position); a `layers` rule naming a small Gemm still wins.
TEST(Quantize, SkipSmallLayersLeavesConvsAndYieldsToARule) {
  Model m = SmallCnn();  // conv1 108 weights, conv2 24, fc (Gemm) 30
  CalibrationTable table = CalibrateCnn(m);
  QuantizeOptions opt;
  opt.skip_small_layers = true;
  QuantizeReport report;
  ASSERT_TRUE(QuantizeModel(m, table, opt, &report).ok());
  for (const LayerDecision& d : report.layers)
    EXPECT_EQ(d.precision, d.op_type == "Conv" ? Precision::kINT8 : Precision::kFP32) << d.node;
  opt.layers = {{"fc", Precision::kINT8}};
  report = {};
  ASSERT_TRUE(QuantizeModel(m, table, opt, &report).ok());
  for (const LayerDecision& d : report.layers) EXPECT_EQ(d.precision, Precision::kINT8) << d.node;
}

}  // namespace
}  // namespace sparq
