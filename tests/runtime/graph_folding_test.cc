// Graph folding at executor creation (runtime/passes/graph_folding.h): constant
// subgraphs become initializers, zero Pads fold into the following Conv
// (float and Q -> DQ forms), and the outputs keep the same bits.
#include <gtest/gtest.h>

#include <cstring>
#include <set>

#include "runtime/passes/graph_folding.h"
#include "sparq/executor.h"
#include "test_util.h"

namespace sparq {
namespace {

using testing::MakeNode;

// x[1,3,9,9] ── Pad(pads from Constant -> Concat) ── Conv(3x3, stride 2) ── Clip(bounds: Constant -> Cast) ── y
Model PadConvClip(bool quantized) {
  Model m;
  m.opset_imports = {{"", 13}};
  Graph& g = m.graph;
  g.inputs.push_back(testing::FloatInput("x", {{1, ""}, {3, ""}, {9, ""}, {9, ""}}));
  g.outputs.push_back(testing::FloatInput("y", {}));
  g.initializers["W"] = testing::RandomFloats({4, 3, 3, 3}, 1);
  g.initializers["B"] = testing::RandomFloats({4}, 2);
  g.initializers["batch_channel"] = Tensor::FromVector<int64_t>({4}, {0, 0, 0, 0});
  g.nodes.push_back(MakeNode("spatial", "Constant", {}, {"spatial_pads"},
                             {Attribute::FromTensor("value", Tensor::FromVector<int64_t>({4}, {0, 1, 1, 2}))}));
  // ONNX order: [x0_begin, x1_begin, x2_begin, x3_begin, x0_end, ...]
  g.nodes.push_back(MakeNode("concat", "Concat", {"batch_channel", "spatial_pads"}, {"pads8"},
                             {Attribute::Int("axis", 0)}));
  g.nodes.push_back(MakeNode("reorder", "Gather", {"pads8", "order"}, {"pads"}, {Attribute::Int("axis", 0)}));
  g.initializers["order"] = Tensor::FromVector<int64_t>({8}, {0, 1, 4, 5, 2, 3, 6, 7});
  std::string conv_in = "padded";
  g.nodes.push_back(MakeNode("pad", "Pad", {"x", "pads"}, {"padded"}));
  if (quantized) {
    g.initializers["s"] = Tensor::Scalar<float>(0.02f);
    g.initializers["z"] = Tensor::Scalar<uint8_t>(128);
    g.nodes.push_back(MakeNode("q", "QuantizeLinear", {"padded", "s", "z"}, {"padded_q"}));
    g.nodes.push_back(MakeNode("dq", "DequantizeLinear", {"padded_q", "s", "z"}, {"padded_dq"}));
    conv_in = "padded_dq";
  }
  g.nodes.push_back(MakeNode("conv", "Conv", {conv_in, "W", "B"}, {"c"}, {Attribute::Ints("strides", {2, 2})}));
  g.nodes.push_back(MakeNode("lo_d", "Constant", {}, {"lo_d"},
                             {Attribute::FromTensor("value", Tensor::Scalar<double>(0.0))}));
  g.nodes.push_back(MakeNode("lo", "Cast", {"lo_d"}, {"lo"}, {Attribute::Int("to", 1)}));
  g.nodes.push_back(MakeNode("clip", "Clip", {"c", "lo", ""}, {"y"}));
  return m;
}

TensorMap RunModel(const Model& m, bool fold, int threads) {
  ExecutorOptions options;
  options.threads = threads;
  // Folded: Pads into the Conv and the Clip into it; else the graph as written.
  options.profile = fold ? GraphProfile::kObserveKept : GraphProfile::kAsWritten;
  auto exec = Executor::Create(m, options);
  EXPECT_TRUE(exec.ok()) << exec.status().ToString();
  TensorMap out;
  if (exec.ok()) EXPECT_TRUE(exec.value()->Run({{"x", testing::RandomFloats({1, 3, 9, 9}, 3)}}, &out).ok());
  return out;
}

void ExpectSameBits(const TensorMap& a, const TensorMap& b) {
  ASSERT_TRUE(a.count("y") && b.count("y"));
  ASSERT_EQ(a.at("y").shape(), b.at("y").shape());
  EXPECT_EQ(std::memcmp(a.at("y").raw_data(), b.at("y").raw_data(), a.at("y").nbytes()), 0);
}

TEST(GraphFolding, ConstantSubgraphsBecomeInitializers) {
  Model m = PadConvClip(false);
  StatusOr<std::vector<std::string>> folded = FoldConstants(&m);
  ASSERT_TRUE(folded.ok()) << folded.status().ToString();
  EXPECT_EQ(*folded, (std::vector<std::string>{"spatial", "concat", "reorder", "lo_d", "lo"}));
  ASSERT_TRUE(m.graph.initializers.count("pads"));
  EXPECT_EQ(m.graph.initializers.at("pads").data<int64_t>()[3], 1);
  EXPECT_TRUE(m.graph.initializers.count("lo"));
  EXPECT_FALSE(m.graph.initializers.count("order"));  // read only by folded nodes
  EXPECT_EQ(m.graph.nodes.size(), 3u);                // pad, conv, clip
}

TEST(GraphFolding, PadFoldsIntoConv) {
  Model m = PadConvClip(false);
  ASSERT_TRUE(FoldConstants(&m).ok());
  EXPECT_EQ(FoldPadsIntoConvs(&m), (std::vector<std::string>{"pad"}));
  ASSERT_EQ(m.graph.nodes.size(), 2u);
  const Node& conv = m.graph.nodes[0];
  EXPECT_EQ(conv.inputs[0], "x");
  EXPECT_EQ(conv.attr_ints("pads"), (std::vector<int64_t>{0, 1, 1, 2}));
}

TEST(GraphFolding, PadFoldsThroughQuantizeDequantize) {
  Model m = PadConvClip(true);
  ASSERT_TRUE(FoldConstants(&m).ok());
  EXPECT_EQ(FoldPadsIntoConvs(&m), (std::vector<std::string>{"pad"}));
  EXPECT_EQ(m.graph.nodes[0].op_type, "QuantizeLinear");
  EXPECT_EQ(m.graph.nodes[0].inputs[0], "x");
}

TEST(GraphFolding, PadWithOtherZeroPointsOrReadersStays) {
  Model m = PadConvClip(true);
  m.graph.initializers["z2"] = Tensor::Scalar<uint8_t>(127);
  for (Node& n : m.graph.nodes)
    if (n.name == "dq") n.inputs[2] = "z2";
  ASSERT_TRUE(FoldConstants(&m).ok());
  EXPECT_TRUE(FoldPadsIntoConvs(&m).empty());
  Model two = PadConvClip(false);
  two.graph.outputs.push_back(testing::FloatInput("padded", {}));
  ASSERT_TRUE(FoldConstants(&two).ok());
  EXPECT_TRUE(FoldPadsIntoConvs(&two).empty());
  Model reflect = PadConvClip(false);
  for (Node& n : reflect.graph.nodes)
    if (n.name == "pad") n.attributes.push_back(Attribute::String("mode", "reflect"));
  ASSERT_TRUE(FoldConstants(&reflect).ok());
  EXPECT_TRUE(FoldPadsIntoConvs(&reflect).empty());
}

TEST(GraphFolding, SameBitsFoldedOrNotAndForAnyThreadCount) {
  for (bool quantized : {false, true}) {
    SCOPED_TRACE(quantized ? "quantized" : "float");
    const Model m = PadConvClip(quantized);
    const TensorMap plain = RunModel(m, false, 1), folded1 = RunModel(m, true, 1), folded2 = RunModel(m, true, 2);
    ExpectSameBits(plain, folded1);
    ExpectSameBits(folded1, folded2);
  }
}

// What calibration runs: the constant subgraphs folded, every activation
// (the Pad's output too) still reaches on_node_outputs, with the same bits.
TEST(GraphFolding, ConstantSubgraphsOnlyKeepEveryActivation) {
  const Model m = PadConvClip(false);
  ExecutorOptions options;
  options.profile = GraphProfile::kFoldedConstants;
  auto exec = Executor::Create(m, options);
  ASSERT_TRUE(exec.ok()) << exec.status().ToString();
  std::set<std::string> seen;
  RunOptions run;
  run.on_node_outputs = [&](const Node& n, const std::vector<Tensor>&) {
    seen.insert(n.outputs.begin(), n.outputs.end());
    return Status::OK();
  };
  TensorMap out;
  ASSERT_TRUE(exec.value()->Run({{"x", testing::RandomFloats({1, 3, 9, 9}, 3)}}, &out, run).ok());
  EXPECT_EQ(seen, (std::set<std::string>{"padded", "c", "y"}));
  ExpectSameBits(out, RunModel(m, false, 1));
}

// A kept value folds all the same with keep_values_as_aliases: the executor
// keeps the Pad's input instead and says what the Pad's output was (its
// input with the pads' zeros around it). Without the option it stays.
TEST(GraphFolding, KeptPadOutputFoldsAsAnAliasOfItsInput) {
  const Model m = PadConvClip(false);
  ExecutorOptions options;
  options.profile = GraphProfile::kObserveKept;
  options.keep_values = {"padded"};
  auto strict = Executor::Create(m, options);
  ASSERT_TRUE(strict.ok()) << strict.status().ToString();
  EXPECT_TRUE((*strict)->ValueAliases().empty());
  EXPECT_EQ((*strict)->model().graph.nodes.size(), 2u);  // the Pad, the Conv with the Clip folded in

  options.keep_values_as_aliases = true;
  auto exec = Executor::Create(m, options);
  ASSERT_TRUE(exec.ok()) << exec.status().ToString();
  ASSERT_EQ((*exec)->ValueAliases().size(), 1u);
  const ValueAlias& alias = (*exec)->ValueAliases()[0];
  EXPECT_EQ(alias.value, "padded");
  EXPECT_EQ(alias.source, "x");
  EXPECT_EQ(alias.zero_pads, (std::vector<int64_t>{0, 0, 0, 1, 0, 0, 1, 2}));
  EXPECT_EQ(alias.ZerosAround({1, 3, 9, 9}), 1 * 3 * 10 * 12 - 1 * 3 * 9 * 9);
  EXPECT_EQ(alias.ZerosAround({3, 9, 9}), -1);  // the pads do not fit
  ASSERT_EQ((*exec)->model().graph.nodes.size(), 1u);  // the Conv with the Pad and the Clip folded in
  EXPECT_EQ((*exec)->model().graph.nodes[0].inputs[0], "x");
  EXPECT_EQ((*exec)->output_names(), std::vector<std::string>{"y"});  // kept values are not outputs
  TensorMap out;
  ASSERT_TRUE((*exec)->Run({{"x", testing::RandomFloats({1, 3, 9, 9}, 3)}}, &out).ok());
  ExpectSameBits(out, RunModel(m, false, 1));

  // A graph output is never folded, nor a Pad whose output another node reads.
  Model output = PadConvClip(false);
  output.graph.outputs.push_back(testing::FloatInput("padded", {}));
  auto kept = Executor::Create(output, options);
  ASSERT_TRUE(kept.ok()) << kept.status().ToString();
  EXPECT_TRUE((*kept)->ValueAliases().empty());
  Model two = PadConvClip(false);
  two.graph.nodes.push_back(MakeNode("also", "Relu", {"padded"}, {"r"}));
  two.graph.outputs.push_back(testing::FloatInput("r", {}));
  auto read_twice = Executor::Create(two, options);
  ASSERT_TRUE(read_twice.ok()) << read_twice.status().ToString();
  EXPECT_TRUE((*read_twice)->ValueAliases().empty());
}

}  // namespace
}  // namespace sparq
