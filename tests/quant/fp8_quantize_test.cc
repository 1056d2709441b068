// FP8 E4M3 Q/DQ quantization (QuantizeOptions::fp8): what the rewrite
// writes (float8e4m3fn weights and zero points, amax / 448 scales, float
// biases, opset 19), what it refuses, the opset upgrade, and the accuracy of
// the written model on sparq's executor.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "kernels/ref/quantize_fp8.h"
#include "sparq/executor.h"
#include "sparq/onnx_io.h"
#include "sparq/quantize.h"
#include "test_util.h"

namespace sparq {
namespace {

// x[n,3,8,8] -> conv1 -> relu -> conv2(1x1) -> gap -> flatten -> fc(Gemm, transB) -> y[n,5]
Model SmallCnn(int64_t opset) {
  Model m;
  m.opset_imports = {{"", opset}};
  Graph& g = m.graph;
  g.inputs.push_back(testing::FloatInput("x", {{-1, "n"}, {3, ""}, {8, ""}, {8, ""}}));
  g.outputs.push_back(testing::FloatInput("y", {{-1, "n"}, {5, ""}}));
  g.initializers["w1"] = testing::RandomFloats({4, 3, 3, 3}, 1, -0.5f, 0.5f);
  g.initializers["b1"] = testing::RandomFloats({4}, 2, -0.1f, 0.1f);
  g.initializers["w2"] = testing::RandomFloats({6, 4, 1, 1}, 7, -0.5f, 0.5f);
  g.initializers["w3"] = testing::RandomFloats({5, 6}, 8, -0.5f, 0.5f);
  g.initializers["b3"] = testing::RandomFloats({5}, 9, -0.1f, 0.1f);
  g.initializers["shape"] = Tensor::FromVector<int64_t>({2}, {0, -1});
  g.nodes.push_back({"conv1", "Conv", "", {"x", "w1", "b1"}, {"c1"}, {Attribute::Ints("pads", {1, 1, 1, 1})}, ""});
  g.nodes.push_back({"relu", "Relu", "", {"c1"}, {"r1"}, {}, ""});
  g.nodes.push_back({"conv2", "Conv", "", {"r1", "w2"}, {"c2"}, {}, ""});
  g.nodes.push_back({"gap", "GlobalAveragePool", "", {"c2"}, {"p"}, {}, ""});
  g.nodes.push_back({"flat", "Reshape", "", {"p", "shape"}, {"f"}, {}, ""});
  g.nodes.push_back({"fc", "Gemm", "", {"f", "w3", "b3"}, {"y"}, {Attribute::Int("transB", 1)}, ""});
  return m;
}

Tensor Input(uint32_t seed, int64_t n = 4) { return testing::RandomFloats({n, 3, 8, 8}, seed, -1.0f, 1.0f); }

Tensor RunModel(const Model& m, const Tensor& x) {
  ExecutorOptions o;
  o.threads = 1;
  o.profile = GraphProfile::kDeployment;
  auto exec = Executor::Create(m, o);
  EXPECT_TRUE(exec.ok()) << exec.status().ToString();
  TensorMap out;
  Status st = (*exec)->Run({{"x", x}}, &out);
  EXPECT_TRUE(st.ok()) << st.ToString();
  return out["y"].ToFloat32();
}

double Sqnr(const Tensor& ref, const Tensor& got) { return testing::SqnrDb(ref, got); }

CalibrationTable CalibrateMax(const Model& m) {
  std::vector<Tensor> batches = {Input(11, 8), Input(12, 8)};
  size_t next = 0;
  CalibrationOptions opt;
  opt.method = CalibrationMethod::kMax;
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

QuantizeOptions Fp8Options() {
  QuantizeOptions o;
  o.fp8 = true;
  return o;
}

TEST(Fp8Quantize, WritesFloat8QdqWithAmaxScales) {
  const Model fp32 = SmallCnn(19);
  const CalibrationTable table = CalibrateMax(fp32);
  QuantizeReport report;
  auto q = QuantizeModel(fp32, table, Fp8Options(), &report);
  ASSERT_TRUE(q.ok()) << q.status().ToString();
  const Graph& g = q->graph;
  int quantize = 0, dequantize = 0;
  for (const Node& n : g.nodes) {
    if (n.op_type == "QuantizeLinear") {
      ++quantize;
      const Tensor* zp = g.FindWeight(n.inputs[2]);
      ASSERT_NE(zp, nullptr);
      EXPECT_EQ(zp->dtype(), DataType::kFloat8E4M3FN) << n.name;
      // Activation scale: the calibrated max |x| / 448.
      const TensorRange* r = table.Find(n.inputs[0]);
      ASSERT_NE(r, nullptr) << n.inputs[0];
      EXPECT_FLOAT_EQ(g.FindWeight(n.inputs[1])->data<float>()[0], r->abs_max / 448.0f) << n.inputs[0];
    }
    if (n.op_type == "DequantizeLinear") {
      ++dequantize;
      EXPECT_EQ(g.FindWeight(n.inputs[2])->dtype(), DataType::kFloat8E4M3FN) << n.name;
      EXPECT_NE(g.FindWeight(n.inputs[1])->dtype(), DataType::kInt32) << n.name;
    }
    // Biases stay float32 (no int32 bias DQ).
    if (n.op_type == "Conv" && n.inputs.size() > 2) EXPECT_EQ(n.inputs[2], "b1");
  }
  EXPECT_GT(quantize, 0);
  EXPECT_GT(dequantize, quantize);  // the weights' DQs too
  // conv1's weight: per output channel, max |w| / 448, stored as float8.
  const Tensor* wq = g.FindWeight("w1_quantized");
  ASSERT_NE(wq, nullptr);
  EXPECT_EQ(wq->dtype(), DataType::kFloat8E4M3FN);
  const Tensor* ws = g.FindWeight("w1_scale");
  ASSERT_NE(ws, nullptr);
  ASSERT_EQ(ws->numel(), 4);
  const Tensor& w = *fp32.graph.FindWeight("w1");
  for (int c = 0; c < 4; ++c) {
    float amax = 0.0f;
    for (int k = 0; k < 27; ++k) amax = std::max(amax, std::fabs(w.data<float>()[c * 27 + k]));
    EXPECT_FLOAT_EQ(ws->data<float>()[c], amax / 448.0f);
  }
  // Close to FP32: FP8 E4M3 keeps 3 mantissa bits (~30 dB on a small CNN).
  const Tensor x = Input(21);
  const double sqnr = Sqnr(RunModel(fp32, x), RunModel(*q, x));
  EXPECT_GT(sqnr, 20.0);
  // The file round trip keeps the float8 tensors.
  auto bytes = SerializeModel(*q);
  ASSERT_TRUE(bytes.ok()) << bytes.status().ToString();
  auto back = LoadModelFromBytes(*bytes);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  // CheckModel: onnx's checker accepts the float8 initializers and Q/DQ.
  EXPECT_TRUE(CheckModel(*q).ok()) << CheckModel(*q).ToString();
  EXPECT_EQ(back->graph.FindWeight("w1_quantized")->dtype(), DataType::kFloat8E4M3FN);
  EXPECT_EQ(Sqnr(RunModel(*q, x), RunModel(*back, x)), 200.0);
}

TEST(Fp8Quantize, RefusesDynamicQOperatorAndOldOpsets) {
  const Model fp32 = SmallCnn(19);
  const CalibrationTable table = CalibrateMax(fp32);
  QuantizeOptions dynamic = Fp8Options();
  dynamic.dynamic = true;
  EXPECT_EQ(QuantizeModel(fp32, table, dynamic, nullptr).status().code(), StatusCode::kInvalidArgument);
  QuantizeOptions qop = Fp8Options();
  qop.format = QuantFormat::kQOperator;
  EXPECT_EQ(QuantizeModel(fp32, table, qop, nullptr).status().code(), StatusCode::kInvalidArgument);
  const Model old = SmallCnn(17);
  auto refused = QuantizeModel(old, table, Fp8Options(), nullptr);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("opset >= 19"), std::string::npos) << refused.status().ToString();
}

TEST(Fp8Quantize, UpgradeConvertsToOpset19) {
  Model m = SmallCnn(17);
  auto line = UpgradeOpsetForInt8(m, Fp8Options());
  ASSERT_TRUE(line.ok()) << line.status().ToString();
  EXPECT_EQ(m.opset(), 19);
  EXPECT_NE(line->find("19"), std::string::npos) << *line;
  const CalibrationTable table = CalibrateMax(m);
  auto q = QuantizeModel(m, table, Fp8Options(), nullptr);
  EXPECT_TRUE(q.ok()) << q.status().ToString();
}

}  // namespace
}  // namespace sparq
