// Channel pruning: tied channel groups, the graph rewrite that removes
// channels, and a model that really shrinks and still runs.
#include <gtest/gtest.h>

#include "prune/prune_test_util.h"

namespace sparq {
namespace {

using namespace prune_test;  // NOLINT

const ChannelGroup* GroupOf(const std::vector<ChannelGroup>& groups, const std::string& producer) {
  for (const auto& g : groups)
    for (const auto& p : g.producers)
      if (p == producer) return &g;
  return nullptr;
}

int64_t WeightDim(const Model& m, const std::string& name, size_t axis) {
  auto it = m.graph.initializers.find(name);
  return it == m.graph.initializers.end() ? -1 : it->second.dim(axis);
}

TEST(PruneChannels, ResidualAddTiesTheProducersOfBothBranches) {
  auto groups = AnalyzeChannels(ResidualCnn());
  ASSERT_TRUE(groups.ok()) << groups.status().ToString();
  const ChannelGroup* g1 = GroupOf(*groups, "conv1");
  ASSERT_NE(g1, nullptr);
  EXPECT_EQ(g1, GroupOf(*groups, "conv3"));  // tied by the residual Add
  EXPECT_EQ(g1->producers.size(), 2u);
  EXPECT_EQ(g1->classes, 8);
  EXPECT_EQ(g1->locked_reason, "");
  EXPECT_NE(g1, GroupOf(*groups, "conv2"));
  EXPECT_EQ(GroupOf(*groups, "conv4")->classes, 16);  // via gap -> flatten -> fc
  const ChannelGroup* fc = GroupOf(*groups, "fc");
  ASSERT_NE(fc, nullptr);
  EXPECT_NE(fc->locked_reason.find("graph output 'y'"), std::string::npos) << fc->locked_reason;
}

TEST(PruneChannels, RewriteIsExactWhenRemovedChannelsCarryZeros) {
  Model masked = ResidualCnn(/*batch_norm=*/false, /*bias=*/false);
  ZeroRows(masked, "conv1", {1, 5});
  ZeroRows(masked, "conv3", {1, 5});
  ZeroRows(masked, "conv2", {0, 7, 3});
  ZeroRows(masked, "conv4", {2, 3, 9, 15});
  Model shrunk = masked;
  auto report = RemoveZeroChannels(&shrunk);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_EQ(report->producers.size(), 4u);
  EXPECT_EQ(WeightDim(shrunk, "conv1.w", 0), 6);
  EXPECT_EQ(WeightDim(shrunk, "conv2.w", 0), 5);
  EXPECT_EQ(WeightDim(shrunk, "conv2.w", 1), 6);
  EXPECT_EQ(WeightDim(shrunk, "conv3.w", 1), 5);
  EXPECT_EQ(WeightDim(shrunk, "conv4.w", 0), 12);
  EXPECT_EQ(WeightDim(shrunk, "fc.w", 1), 12);
  EXPECT_LT(report->params_after, report->params_before);
  const Tensor x = Gaussian({4, 3, 8, 8}, 5);
  const Tensor a = RunModel(masked, x), b = RunModel(shrunk, x);
  ASSERT_EQ(a.shape(), b.shape());
  for (int64_t i = 0; i < a.numel(); ++i) EXPECT_NEAR(a.data<float>()[i], b.data<float>()[i], 1e-5f);
}

TEST(PruneChannels, ConstantsOfRemovedChannelsFoldIntoTheConsumersBias) {
  // conv4 (1x1) -> relu -> gap -> flatten -> fc: a removed conv4 channel
  // outputs relu(bias), which the fold moves into fc's bias exactly.
  Model masked = ResidualCnn(/*batch_norm=*/true, /*bias=*/true);
  ZeroRows(masked, "conv4", {0, 4, 5, 11});
  Model shrunk = masked;
  auto report = RemoveZeroChannels(&shrunk);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_EQ(WeightDim(shrunk, "conv4.w", 0), 12);
  EXPECT_EQ(WeightDim(shrunk, "conv4.b", 0), 12);
  const Tensor x = Gaussian({4, 3, 8, 8}, 6);
  const Tensor a = RunModel(masked, x), b = RunModel(shrunk, x);
  for (int64_t i = 0; i < a.numel(); ++i) EXPECT_NEAR(a.data<float>()[i], b.data<float>()[i], 1e-4f);
}

TEST(PruneChannels, GemmTransposedProducerAndMatMulConsumerFoldExactly) {
  // x[n,16] -> g0 (Gemm transB=0, bias) -> relu -> mm (MatMul) -> add (bias) -> y[n,8]
  Model m;
  m.opset_imports = {{"", 17}};
  m.graph.inputs.push_back(testing::FloatInput("x", {{-1, "n"}, {16, ""}}));
  m.graph.outputs.push_back(testing::FloatInput("y", {{-1, "n"}, {8, ""}}));
  m.graph.initializers["g0.w"] = Gaussian({16, 12}, 1, 0.3f);
  m.graph.initializers["g0.b"] = Gaussian({12}, 2, 0.5f);
  m.graph.nodes.push_back(MakeNode("g0", "Gemm", {"x", "g0.w", "g0.b"}, {"h"}));
  m.graph.nodes.push_back(MakeNode("relu", "Relu", {"h"}, {"r"}));
  m.graph.initializers["mm.w"] = Gaussian({12, 8}, 3, 0.3f);
  m.graph.initializers["mm.b"] = Gaussian({8}, 4, 0.1f);
  m.graph.nodes.push_back(MakeNode("mm", "MatMul", {"r", "mm.w"}, {"z"}));
  m.graph.nodes.push_back(MakeNode("add", "Add", {"z", "mm.b"}, {"y"}));
  ZeroRows(m, "g0", {1, 5, 7});
  Model shrunk = m;
  auto report = RemoveZeroChannels(&shrunk);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_EQ(WeightDim(shrunk, "g0.w", 1), 9);
  EXPECT_EQ(WeightDim(shrunk, "g0.b", 0), 9);
  EXPECT_EQ(WeightDim(shrunk, "mm.w", 0), 9);
  const Tensor x = Gaussian({5, 16}, 9);
  const Tensor a = RunModel(m, x), b = RunModel(shrunk, x);
  for (int64_t i = 0; i < a.numel(); ++i) EXPECT_NEAR(a.data<float>()[i], b.data<float>()[i], 1e-5f);
}

TEST(PruneChannels, ConcatMapsChannelsToTheirProducers) {
  // x -> ca (3->4) ─┐
  //   -> cb (3->6) ─┴─ concat -> relu -> cc (10->5) -> gap -> flatten -> y
  Model m;
  m.opset_imports = {{"", 17}};
  m.graph.inputs.push_back(testing::FloatInput("x", {{-1, "n"}, {3, ""}, {6, ""}, {6, ""}}));
  m.graph.outputs.push_back(testing::FloatInput("y", {{-1, "n"}, {5, ""}}));
  AddConv(m, "ca", "x", "a", 3, 4, 3, false, 10);
  AddConv(m, "cb", "x", "b", 3, 6, 3, false, 20);
  m.graph.nodes.push_back(MakeNode("concat", "Concat", {"a", "b"}, {"c"}, {IntAttr("axis", 1)}));
  m.graph.nodes.push_back(MakeNode("relu", "Relu", {"c"}, {"r"}));
  AddConv(m, "cc", "r", "d", 10, 5, 3, false, 30);
  m.graph.nodes.push_back(MakeNode("gap", "GlobalAveragePool", {"d"}, {"g"}));
  m.graph.nodes.push_back(MakeNode("flatten", "Flatten", {"g"}, {"y"}));
  ZeroRows(m, "ca", {0});
  ZeroRows(m, "cb", {2, 5});
  Model shrunk = m;
  auto report = RemoveZeroChannels(&shrunk);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_EQ(WeightDim(shrunk, "ca.w", 0), 3);
  EXPECT_EQ(WeightDim(shrunk, "cb.w", 0), 4);
  EXPECT_EQ(WeightDim(shrunk, "cc.w", 1), 7);
  EXPECT_EQ(WeightDim(shrunk, "cc.w", 0), 5);  // feeds the graph output: locked
  const Tensor x = Gaussian({2, 3, 6, 6}, 4);
  const Tensor a = RunModel(m, x), b = RunModel(shrunk, x);
  for (int64_t i = 0; i < a.numel(); ++i) EXPECT_NEAR(a.data<float>()[i], b.data<float>()[i], 1e-5f);
}

TEST(PruneChannels, ThirtyPercentOfASmallResidualCnnShrinksItAndItStillRuns) {
  Model m = ResidualCnn();
  PruneOptions o;
  o.structure = PruneStructure::Channel();
  o.sparsity = 0.3;
  o.skip_first_last = false;
  o.recovery = true;
  o.threads = 1;
  const Tensor x = Gaussian({8, 3, 8, 8}, 8);
  auto result = PruneModel(m, o, ImageBatches(3, 8), FidelityMetric(m, x));
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  const PruneReport& r = result->report;
  EXPECT_EQ(WeightDim(result->model, "conv1.w", 0), 6);  // round(0.3 * 8) = 2 tied channels go
  EXPECT_EQ(WeightDim(result->model, "conv3.w", 0), 6);
  EXPECT_EQ(WeightDim(result->model, "conv2.w", 0), 6);
  EXPECT_EQ(WeightDim(result->model, "conv2.w", 1), 6);
  EXPECT_EQ(WeightDim(result->model, "conv4.w", 0), 11);  // round(0.3 * 16) = 5
  EXPECT_EQ(WeightDim(result->model, "conv4.w", 1), 6);
  EXPECT_EQ(WeightDim(result->model, "fc.w", 1), 11);
  EXPECT_EQ(WeightDim(result->model, "bn1.scale", 0), 6);
  // Parameters shrink about as (1 - 0.3)^2 for convs pruned on both sides.
  const double ratio = static_cast<double>(r.channels.params_after) / static_cast<double>(r.channels.params_before);
  EXPECT_LT(ratio, 0.7);
  EXPECT_GT(ratio, 0.45);
  // The shrunk model runs and stays close to the dense one.
  const Tensor y = RunModel(result->model, x);
  ASSERT_EQ(y.shape(), (Shape{8, 10}));
  EXPECT_LT(RelativeError(y, RunModel(m, x)), 0.5);
  EXPECT_NE(r.ToText().find("Channels removed"), std::string::npos);
}

TEST(PruneChannels, LockedGroupsKeepTheirChannels) {
  // The residual group tied to a skipped first layer stays dense.
  Model m = ResidualCnn();
  PruneOptions o;
  o.structure = PruneStructure::Channel();
  o.sparsity = 0.5;
  o.recovery = false;
  auto result = PruneModel(m, o, nullptr, nullptr);
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  EXPECT_EQ(WeightDim(result->model, "conv1.w", 0), 8);
  EXPECT_EQ(WeightDim(result->model, "conv3.w", 0), 8);
  for (const auto& p : result->report.plan) {
    if (p.layer.node != "conv3") continue;
    EXPECT_FALSE(p.prune);
    EXPECT_NE(p.reason.find("tied to those of 'conv1'"), std::string::npos) << p.reason;
  }
  EXPECT_EQ(WeightDim(result->model, "conv2.w", 0), 4);
  EXPECT_EQ(WeightDim(result->model, "conv4.w", 0), 8);
  EXPECT_EQ(RunModel(result->model, Gaussian({2, 3, 8, 8}, 1)).shape(), (Shape{2, 10}));
}

}  // namespace
}  // namespace sparq
