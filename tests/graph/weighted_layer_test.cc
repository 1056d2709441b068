#include "sparq/weighted_layer.h"

#include <gtest/gtest.h>

namespace sparq {
namespace {

Tensor Zeros(Shape shape) { return Tensor(DataType::kFloat32, std::move(shape)); }

TEST(WeightedLayer, ConvGemmAndMatMulInTheirGemmView) {
  Model m;
  Graph& g = m.graph;
  g.inputs.push_back({"x", DataType::kFloat32});
  g.initializers["cw"] = Zeros({8, 2, 3, 3});
  g.initializers["cb"] = Zeros({8});
  g.initializers["gw"] = Zeros({16, 10});  // [in, out] with transB = 0
  g.initializers["mw"] = Zeros({10, 4});
  g.initializers["mb"] = Zeros({4});
  g.nodes.push_back({"conv", "Conv", "", {"x", "cw", "cb"}, {"c"}, {Attribute::Int("group", 2)}, ""});
  g.nodes.push_back({"flat", "Flatten", "", {"c"}, {"f"}, {}, ""});
  g.nodes.push_back({"gemm", "Gemm", "", {"f", "gw"}, {"h"}, {}, ""});
  g.nodes.push_back({"mm", "MatMul", "", {"h", "mw"}, {"p"}, {}, ""});
  g.nodes.push_back({"bias", "Add", "", {"p", "mb"}, {"y"}, {}, ""});
  g.outputs.push_back({"y", DataType::kFloat32});

  StatusOr<std::vector<WeightedLayer>> layers = FindWeightedLayers(m);
  ASSERT_TRUE(layers.ok()) << layers.status().ToString();
  ASSERT_EQ(layers->size(), 3u);
  const WeightedLayer& conv = (*layers)[0];
  EXPECT_EQ(conv.node, "conv");
  EXPECT_EQ(conv.rows, 8);
  EXPECT_EQ(conv.cols, 18);
  EXPECT_EQ(conv.groups, 2);
  EXPECT_EQ(conv.bias, "cb");
  EXPECT_EQ(conv.weight_axis(), 0);
  EXPECT_TRUE(conv.unsupported.empty());
  const WeightedLayer& gemm = (*layers)[1];
  EXPECT_TRUE(gemm.transposed_view);
  EXPECT_EQ(gemm.rows, 10);
  EXPECT_EQ(gemm.cols, 16);
  EXPECT_EQ(gemm.weight_axis(), 1);
  EXPECT_TRUE(gemm.bias.empty());
  const WeightedLayer& mm = (*layers)[2];
  EXPECT_EQ(mm.rows, 4);
  EXPECT_EQ(mm.cols, 10);
  EXPECT_EQ(mm.bias, "mb");  // the constant of the Add that is its only reader
  EXPECT_EQ(mm.params(), 40);
}

TEST(WeightedLayer, OnlyLinearNodesWithAConstantWeight) {
  Graph g;
  g.inputs.push_back({"x", DataType::kFloat32});
  g.inputs.push_back({"w", DataType::kFloat32});
  g.initializers["k"] = Zeros({4, 4});
  const Node computed{"mm", "MatMul", "", {"x", "w"}, {"y"}, {}, ""};
  EXPECT_FALSE(AsWeightedLayer(g, computed));  // the weight is no constant
  const Node other_domain{"mm", "MatMul", "com.example", {"x", "k"}, {"y"}, {}, ""};
  EXPECT_FALSE(AsWeightedLayer(g, other_domain));
  const Node add{"add", "Add", "", {"x", "k"}, {"y"}, {}, ""};
  EXPECT_FALSE(AsWeightedLayer(g, add));
  const Node onnx_domain{"mm", "MatMul", "ai.onnx", {"x", "k"}, {"y"}, {}, ""};
  EXPECT_TRUE(AsWeightedLayer(g, onnx_domain));
}

TEST(WeightedLayer, LayersPruningCannotHandleSayWhy) {
  Graph g;
  g.inputs.push_back({"x", DataType::kFloat32});
  g.initializers["k"] = Zeros({4, 4});
  g.nodes.push_back({"a", "MatMul", "", {"x", "k"}, {"y"}, {}, ""});
  g.nodes.push_back({"b", "MatMul", "", {"x", "k"}, {"z"}, {}, ""});
  std::optional<WeightedLayer> L = AsWeightedLayer(g, g.nodes[0]);
  ASSERT_TRUE(L);
  EXPECT_NE(L->unsupported.find("shared by several nodes"), std::string::npos);
  const Node trans_a{"t", "Gemm", "", {"x", "k"}, {"t"}, {Attribute::Int("transA", 1)}, ""};
  L = AsWeightedLayer(g, trans_a);
  ASSERT_TRUE(L);
  EXPECT_FALSE(L->unsupported.empty());
}

}  // namespace
}  // namespace sparq
