#include "sparq/inspect.h"

#include <gtest/gtest.h>

namespace sparq {
namespace {

// x ─ QuantizeLinear ─ DequantizeLinear ─┐
// w_q (uint8) ─ DequantizeLinear ────────┴─ MatMul "mm" ─ y
Model QdqMatMul() {
  Model m;
  m.ir_version = 8;
  m.opset_imports = {{"", 13}};
  Graph& g = m.graph;
  // Column 0 has zero point 128, column 1 zero point 0: three elements
  // dequantize to zero (two 128s in column 0, one 0 in column 1); the raw 0 in
  // column 0 is -128 * scale, not a zero.
  g.initializers["w_q"] = Tensor::FromVector<uint8_t>({3, 2}, {128, 0, 128, 5, 0, 7});
  g.initializers["w_scale"] = Tensor::FromVector<float>({2}, {0.1f, 0.2f});
  g.initializers["w_zp"] = Tensor::FromVector<uint8_t>({2}, {128, 0});
  g.initializers["x_scale"] = Tensor::Scalar<float>(0.05f);
  g.initializers["x_zp"] = Tensor::Scalar<uint8_t>(0);
  g.nodes.push_back({"x_q", "QuantizeLinear", "", {"x", "x_scale", "x_zp"}, {"xq"}, {}, ""});
  g.nodes.push_back({"x_dq", "DequantizeLinear", "", {"xq", "x_scale", "x_zp"}, {"xd"}, {}, ""});
  g.nodes.push_back({"w_dq", "DequantizeLinear", "", {"w_q", "w_scale", "w_zp"}, {"w"}, {}, ""});
  g.nodes.back().attributes.push_back(Attribute::Int("axis", 1));
  g.nodes.push_back({"mm", "MatMul", "", {"xd", "w"}, {"y"}, {}, ""});
  return m;
}

TEST(Inspect, QdqLayerIsOneRowWithItsQuantizedWeight) {
  const ModelSummary s = SummarizeModel(QdqMatMul());
  ASSERT_EQ(s.layers.size(), 1u);  // no rows for the Q/DQ nodes
  const LayerSummary& l = s.layers[0];
  EXPECT_EQ(l.node, "mm");
  EXPECT_EQ(l.precision, "uint8");
  EXPECT_TRUE(l.qdq);
  EXPECT_TRUE(s.qdq);
  EXPECT_EQ(l.weights, std::vector<std::string>{"w_q"});
  EXPECT_EQ(l.params, 6);
  EXPECT_EQ(l.zeros, 3);
  EXPECT_EQ(l.bytes, 6 + 8 + 2);  // weight, scales, zero points
  // Scales and zero points are bytes in the file, not parameters.
  EXPECT_EQ(s.total_params, 6);
  EXPECT_EQ(s.total_zeros, 3);
  EXPECT_EQ(s.total_bytes, 6 + 8 + 2 + 4 + 1);
  const std::string json = s.ToJson();
  EXPECT_NE(json.find("\"qdq\": true"), std::string::npos) << json;
  EXPECT_NE(json.find("\"precision\": \"uint8\""), std::string::npos) << json;
  EXPECT_NE(s.ToText().find("uint8 (QDQ)"), std::string::npos) << s.ToText();
}

TEST(Inspect, QOperatorScalesAndZeroPointsAreNotParams) {
  Model m;
  m.opset_imports = {{"", 13}};
  Graph& g = m.graph;
  g.initializers["b"] = Tensor::FromVector<int8_t>({2, 2}, {3, 0, 3, -1});  // column 0: zero point 3
  g.initializers["b_zp"] = Tensor::FromVector<int8_t>({2}, {3, 0});
  g.initializers["b_scale"] = Tensor::FromVector<float>({2}, {0.1f, 0.1f});
  g.initializers["s"] = Tensor::Scalar<float>(0.5f);
  g.initializers["zp"] = Tensor::Scalar<int8_t>(0);
  g.nodes.push_back({"qmm", "QLinearMatMul", "", {"a", "s", "zp", "b", "b_scale", "b_zp", "s", "zp"}, {"y"}, {}, ""});
  const ModelSummary s = SummarizeModel(m);
  ASSERT_EQ(s.layers.size(), 1u);
  const LayerSummary& l = s.layers[0];
  EXPECT_EQ(l.precision, "int8");
  EXPECT_FALSE(l.qdq);
  EXPECT_EQ(l.weights, std::vector<std::string>{"b"});
  EXPECT_EQ(l.params, 4);
  EXPECT_EQ(l.zeros, 3);  // two 3s in column 0, one 0 in column 1
  EXPECT_EQ(l.bytes, 4 + 4 + 1 + 8 + 2);
  EXPECT_EQ(s.total_params, 4);
  EXPECT_EQ(s.total_bytes, l.bytes);
}

TEST(Inspect, FloatLayerKeepsItsPrecision) {
  Model m;
  m.graph.initializers["w"] = Tensor::FromVector<float>({2, 2}, {0.0f, 1.0f, -0.0f, 2.0f});
  m.graph.nodes.push_back({"", "MatMul", "", {"x", "w"}, {"y"}, {}, ""});
  const ModelSummary s = SummarizeModel(m);
  ASSERT_EQ(s.layers.size(), 1u);
  EXPECT_EQ(s.layers[0].node, "MatMul#0");
  EXPECT_EQ(s.layers[0].precision, "float32");
  EXPECT_FALSE(s.layers[0].qdq);
  EXPECT_FALSE(s.qdq);
  EXPECT_DOUBLE_EQ(s.layers[0].sparsity(), 0.5);
}

}  // namespace
}  // namespace sparq
