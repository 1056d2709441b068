// Block reconstruction (quant/reconstruct.h): the blocks cut where one
// activation is live, the fit lowers each block's error against the dense
// model with the pruning mask held, and a block is never left worse.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
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

// A one-head transformer layer as BERT exports it: attention (MatMul + Add
// bias, Transpose, scaled MatMul, Softmax, MatMul), residual Add and
// LayerNormalization, then the GELU (Div, Erf, Add, Mul, Mul) feed-forward
// with its residual and LayerNormalization; x [n, 6, 8].
Model TinyTransformer() {
  Model m;
  m.opset_imports = {{"", 17}};
  m.graph.inputs.push_back(testing::FloatInput("x", {{-1, "n"}, {6, ""}, {8, ""}}));
  m.graph.outputs.push_back(testing::FloatInput("y", {{-1, "n"}, {6, ""}, {8, ""}}));
  auto& init = m.graph.initializers;
  auto& nodes = m.graph.nodes;
  auto linear = [&](const std::string& name, const std::string& in, const std::string& out, int64_t k, int64_t n,
                    uint32_t seed) {
    init[name + ".w"] = Gaussian({k, n}, seed, 1.0f / std::sqrt(static_cast<float>(k)));
    init[name + ".b"] = Gaussian({n}, seed + 1, 0.1f);
    nodes.push_back(MakeNode(name, "MatMul", {in, name + ".w"}, {name + ".mm"}));
    nodes.push_back(MakeNode(name + "/add", "Add", {name + ".b", name + ".mm"}, {out}));
  };
  auto scalar = [&](const std::string& name, float v) { init[name] = Tensor::FromVector<float>({}, {v}); };
  auto layer_norm = [&](const std::string& name, const std::string& in, const std::string& out, uint32_t seed) {
    Tensor scale = Gaussian({8}, seed, 0.1f);
    for (int64_t i = 0; i < 8; ++i) scale.data<float>()[i] += 1.0f;
    init[name + ".scale"] = scale;
    init[name + ".bias"] = Gaussian({8}, seed + 1, 0.1f);
    nodes.push_back(MakeNode(name, "LayerNormalization", {in, name + ".scale", name + ".bias"}, {out},
                             {IntAttr("axis", -1)}));
  };
  linear("q", "x", "q.out", 8, 8, 10);
  linear("k", "x", "k.out", 8, 8, 20);
  linear("v", "x", "v.out", 8, 8, 30);
  nodes.push_back(MakeNode("kt", "Transpose", {"k.out"}, {"kt.out"}, {IntsAttr("perm", {0, 2, 1})}));
  nodes.push_back(MakeNode("scores", "MatMul", {"q.out", "kt.out"}, {"scores.out"}));
  scalar("scale", 0.35f);
  nodes.push_back(MakeNode("scaled", "Mul", {"scores.out", "scale"}, {"scaled.out"}));
  nodes.push_back(MakeNode("softmax", "Softmax", {"scaled.out"}, {"probs"}, {IntAttr("axis", -1)}));
  nodes.push_back(MakeNode("context", "MatMul", {"probs", "v.out"}, {"context.out"}));
  linear("o", "context.out", "o.out", 8, 8, 40);
  nodes.push_back(MakeNode("res1", "Add", {"o.out", "x"}, {"res1.out"}));
  layer_norm("ln1", "res1.out", "h", 50);
  linear("up", "h", "up.out", 8, 16, 60);
  scalar("sqrt2", 1.4142135f);
  scalar("one", 1.0f);
  scalar("half", 0.5f);
  nodes.push_back(MakeNode("gelu/div", "Div", {"up.out", "sqrt2"}, {"gelu.div"}));
  nodes.push_back(MakeNode("gelu/erf", "Erf", {"gelu.div"}, {"gelu.erf"}));
  nodes.push_back(MakeNode("gelu/add", "Add", {"gelu.erf", "one"}, {"gelu.add"}));
  nodes.push_back(MakeNode("gelu/mul", "Mul", {"up.out", "gelu.add"}, {"gelu.mul"}));
  nodes.push_back(MakeNode("gelu/mul2", "Mul", {"gelu.mul", "half"}, {"gelu.out"}));
  linear("down", "gelu.out", "down.out", 16, 8, 70);
  nodes.push_back(MakeNode("res2", "Add", {"down.out", "h"}, {"res2.out"}));
  layer_norm("ln2", "res2.out", "y", 80);
  return m;
}

BatchSource TokenBatches(int count, int64_t batch, uint32_t seed) {
  return [=]() -> BatchFn {
    auto next = std::make_shared<int>(0);
    return [=](TensorMap* b) -> StatusOr<bool> {
      if (*next == count) return false;
      (*b)["x"] = Gaussian({batch, 6, 8}, seed + static_cast<uint32_t>(*next));
      ++*next;
      return true;
    };
  };
}

TEST(BlockReconstruction, TransformerSubLayersAreBlocksAndTheirFitLowersTheError) {
  const Model dense = TinyTransformer();
  auto blocks = FindReconstructionBlocks(dense, 2);
  ASSERT_TRUE(blocks.ok()) << blocks.status().ToString();
  ASSERT_EQ(blocks->size(), 2u);  // attention (q, k, v, o) | feed-forward (up, down)
  EXPECT_EQ((*blocks)[0].weighted_layers, 4);
  EXPECT_EQ((*blocks)[0].outputs, std::vector<std::string>{"h"});
  EXPECT_EQ((*blocks)[1].weighted_layers, 2);
  EXPECT_EQ((*blocks)[1].inputs, std::vector<std::string>{"h"});
  for (const auto& b : *blocks) EXPECT_EQ(b.unsupported, "");
  EXPECT_EQ((*blocks)[0].params.size(), 8u);  // 4 weights and their bias Adds' constants

  const Model pruned = Pruned(dense, {"q", "k", "v", "o", "up", "down"});
  Model fitted = pruned;
  BlockReconstructionOptions o;
  o.iterations = 200;
  o.learning_rate = 1e-2;
  o.threads = 1;
  auto report = ReconstructBlocks(dense, &fitted, TokenBatches(4, 16, 5), o);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  ASSERT_EQ(report->blocks.size(), 2u);
  for (const auto& b : report->blocks) {
    EXPECT_TRUE(b.kept) << b.first_node;
    EXPECT_LT(b.error_after, 0.7 * b.error_before) << b.first_node;
  }
  // On other samples too.
  const Tensor x = Gaussian({16, 6, 8}, 1234);
  auto run = [&](const Model& m) {
    auto exec = Executor::Create(m, ExecutorOptions{1});
    TensorMap out;
    EXPECT_TRUE(exec.ok() && (*exec)->Run({{"x", x}}, &out).ok());
    return out["y"];
  };
  EXPECT_LT(RelativeError(run(fitted), run(dense)), RelativeError(run(pruned), run(dense)));
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
