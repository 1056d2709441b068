// Block reconstruction (quant/reconstruct.h): the blocks cut where one
// activation is live, the fit lowers each block's error against the dense
// model with the pruning mask held, and a block is never left worse.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>

#include "prune/prune_test_util.h"
#include "quant/reconstruct.h"
#include "sparq/prune.h"

namespace sparq {
namespace {

using namespace prune_test;  // NOLINT

// `m` with 60% of the weights of `layers` zeroed by magnitude.
Model Pruned(const Model& m, const std::vector<std::string>& layers) {
  Model pruned = m;
  auto all = FindWeightedLayers(pruned);
  EXPECT_TRUE(all.ok());
  for (const auto& L : *all) {
    if (std::find(layers.begin(), layers.end(), L.node) == layers.end()) continue;
    auto w = ReadWeightMatrix(pruned, L);
    auto s = ElementScores(*w, PruneScore::kMagnitude);
    auto mask = ComputeMask(PruneStructure::Unstructured(), *s, 0.6);
    EXPECT_TRUE(mask.ok());
    EXPECT_TRUE(ApplyMask(*mask, &*w).ok());
    EXPECT_TRUE(WriteWeightMatrix(&pruned, L, *w).ok());
  }
  return pruned;
}

TEST(BlockReconstruction, BlocksCutWhereOneActivationIsLive) {
  const Model m = ResidualCnn(/*batch_norm=*/false);
  auto blocks = FindReconstructionBlocks(m, 2);
  ASSERT_TRUE(blocks.ok()) << blocks.status().ToString();
  // Cuts after relu1 (r1), the residual Add, relu3, conv4, ...: conv1 alone
  // is below 2 layers, so the residual block joins it; then conv4 .. fc.
  ASSERT_EQ(blocks->size(), 2u);
  EXPECT_EQ((*blocks)[0].weighted_layers, 3);
  EXPECT_EQ((*blocks)[1].weighted_layers, 2);
  EXPECT_EQ((*blocks)[0].inputs, std::vector<std::string>{"x"});
  EXPECT_EQ((*blocks)[0].outputs, std::vector<std::string>{"r3"});
  EXPECT_EQ((*blocks)[1].outputs, std::vector<std::string>{"y"});
  for (const auto& b : *blocks) EXPECT_EQ(b.unsupported, "") << b.nodes.size();
  EXPECT_EQ((*blocks)[1].params, (std::vector<std::string>{"conv4.w", "conv4.b", "fc.w", "fc.b"}));
  auto one = FindReconstructionBlocks(m, 1);
  ASSERT_TRUE(one.ok());
  ASSERT_EQ(one->size(), 4u);  // conv1 | conv2, conv3 (the residual block cannot be cut) | conv4 | fc
  EXPECT_EQ((*one)[1].weighted_layers, 2);
  EXPECT_EQ((*one)[1].inputs, std::vector<std::string>{"r1"});
  EXPECT_EQ((*one)[1].outputs, std::vector<std::string>{"r3"});
}

TEST(BlockReconstruction, FitLowersTheErrorAndHoldsTheMask) {
  const Model dense = ResidualCnn(/*batch_norm=*/false);
  const Model pruned = Pruned(dense, {"conv2", "conv3", "conv4"});
  const Tensor x = Gaussian({16, 3, 8, 8}, 99);
  const double masked_error = RelativeError(RunModel(pruned, x), RunModel(dense, x));
  Model fitted = pruned;
  BlockReconstructionOptions o;
  o.iterations = 150;
  o.learning_rate = 3e-3;
  o.threads = 1;
  auto report = ReconstructBlocks(dense, &fitted, ImageBatches(4, 16), o);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  ASSERT_EQ(report->blocks.size(), 2u);
  for (const auto& b : report->blocks) {
    EXPECT_EQ(b.skipped, "");
    EXPECT_LE(b.error_after, b.error_before) << b.first_node;
  }
  EXPECT_LT(report->blocks[0].error_after, 0.8 * report->blocks[0].error_before);
  const double error = RelativeError(RunModel(fitted, x), RunModel(dense, x));
  EXPECT_LT(error, 0.7 * masked_error) << "masked " << masked_error << ", fitted " << error;
  auto before = FindWeightedLayers(pruned);
  ASSERT_TRUE(before.ok());
  for (const auto& L : *before) {
    auto a = ReadWeightMatrix(pruned, L), b = ReadWeightMatrix(fitted, L);
    ASSERT_TRUE(a.ok() && b.ok());
    for (size_t i = 0; i < a->values.size(); ++i)
      if (a->values[i] == 0.0f) EXPECT_EQ(b->values[i], 0.0f) << L.node << " " << i;
  }
  // Deterministic: a second run gives the same weights bit for bit.
  Model again = pruned;
  o.threads = 2;
  ASSERT_TRUE(ReconstructBlocks(dense, &again, ImageBatches(4, 16), o).ok());
  for (const auto& kv : fitted.graph.initializers) {
    const Tensor& t = again.graph.initializers.at(kv.first);
    ASSERT_EQ(t.nbytes(), kv.second.nbytes());
    EXPECT_EQ(0, std::memcmp(t.raw_data(), kv.second.raw_data(), t.nbytes())) << kv.first;
  }
}

TEST(BlockReconstruction, NeverLeavesABlockWorse) {
  // The dense model itself: error 0 cannot improve, so every block keeps its weights.
  const Model dense = ResidualCnn(/*batch_norm=*/false);
  Model same = dense;
  BlockReconstructionOptions o;
  o.iterations = 5;
  o.learning_rate = 1e-2;
  o.threads = 1;
  auto report = ReconstructBlocks(dense, &same, ImageBatches(2, 4), o);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  for (const auto& b : report->blocks) EXPECT_FALSE(b.kept);
  for (const auto& kv : dense.graph.initializers)
    EXPECT_EQ(0, std::memcmp(kv.second.raw_data(), same.graph.initializers.at(kv.first).raw_data(), kv.second.nbytes()));
}

TEST(BlockReconstruction, PruneModelRunsItAfterTheLeastSquares) {
  const Model m = ResidualCnn(/*batch_norm=*/false);
  const Tensor x = Gaussian({16, 3, 8, 8}, 99);
  PruneOptions o;
  o.sparsity = 0.6;
  o.threads = 1;
  auto ls = PruneModel(m, o, ImageBatches(4, 16), FidelityMetric(m, x));
  ASSERT_TRUE(ls.ok()) << ls.status().ToString();
  o.reconstruction.method = PruneReconstruction::Method::kBlock;
  o.reconstruction.iterations = 100;
  o.reconstruction.learning_rate = 3e-3;
  auto block = PruneModel(m, o, ImageBatches(4, 16), FidelityMetric(m, x));
  ASSERT_TRUE(block.ok()) << block.status().ToString();
  const PruneStepReport& s = block->report.steps.at(0);
  EXPECT_EQ(s.reconstructed_blocks + s.reconstruction_skipped, 2);
  EXPECT_GT(s.reconstructed_blocks, 0);
  EXPECT_GT(s.metric, ls->report.steps.at(0).metric) << "least squares alone " << ls->report.steps.at(0).metric;
  // Block reconstruction needs the least squares to start from.
  o.recovery = false;
  EXPECT_FALSE(ValidatePruneOptions(o).ok());
}

TEST(BlockReconstruction, BadOptionsAndMissingDataAreErrors) {
  const Model dense = ResidualCnn(false);
  Model m = dense;
  BlockReconstructionOptions o;
  EXPECT_FALSE(ReconstructBlocks(dense, &m, BatchSource(), o).ok());
  o.learning_rate = 0;
  EXPECT_FALSE(ReconstructBlocks(dense, &m, ImageBatches(1, 2), o).ok());
}

}  // namespace
}  // namespace sparq
