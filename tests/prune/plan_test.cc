// Weighted layers, their GEMM views, and the per-layer plan: overrides,
// layers that a structure does not fit, and the errors users see.
#include <gtest/gtest.h>

#include "pipeline/prune_stage.h"
#include "prune/prune_test_util.h"

namespace sparq {
namespace {

using namespace prune_test;  // NOLINT

const LayerPlan* FindPlan(const std::vector<LayerPlan>& plans, const std::string& node) {
  for (const auto& p : plans)
    if (p.layer.node == node) return &p;
  return nullptr;
}

// x[n,4,6,6] -> dw (Conv group 2) -> gap -> flatten -> g0 (Gemm transB=0) -> g1 (Gemm transB=1)
//   -> mm (MatMul) -> add (bias) -> y
Model ViewsModel() {
  Model m;
  m.opset_imports = {{"", 17}};
  m.graph.inputs.push_back(testing::FloatInput("x", {{2, ""}, {4, ""}, {6, ""}, {6, ""}}));
  m.graph.outputs.push_back(testing::FloatInput("y", {{2, ""}, {3, ""}}));
  m.graph.initializers["dw.w"] = Gaussian({6, 2, 3, 3}, 1);
  m.graph.nodes.push_back(MakeNode("dw", "Conv", {"x", "dw.w"}, {"c"}, {IntAttr("group", 2)}));
  m.graph.nodes.push_back(MakeNode("gap", "GlobalAveragePool", {"c"}, {"p"}));
  m.graph.nodes.push_back(MakeNode("flat", "Flatten", {"p"}, {"f"}));
  m.graph.initializers["g0.w"] = Gaussian({6, 5}, 2);  // [in, out], transB = 0
  m.graph.nodes.push_back(MakeNode("g0", "Gemm", {"f", "g0.w"}, {"h0"}));
  m.graph.initializers["g1.w"] = Gaussian({7, 5}, 3);  // [out, in], transB = 1
  m.graph.initializers["g1.b"] = Gaussian({7}, 4);
  m.graph.nodes.push_back(MakeNode("g1", "Gemm", {"h0", "g1.w", "g1.b"}, {"h1"}, {IntAttr("transB", 1)}));
  m.graph.initializers["mm.w"] = Gaussian({7, 3}, 5);  // [in, out]
  m.graph.initializers["mm.b"] = Gaussian({3}, 6);
  m.graph.nodes.push_back(MakeNode("mm", "MatMul", {"h1", "mm.w"}, {"h2"}));
  m.graph.nodes.push_back(MakeNode("add", "Add", {"h2", "mm.b"}, {"y"}));
  return m;
}

TEST(PruneLayers, GemmViewsOfConvGemmAndMatMul) {
  Model m = ViewsModel();
  auto layers = FindWeightedLayers(m);
  ASSERT_TRUE(layers.ok()) << layers.status().ToString();
  ASSERT_EQ(layers->size(), 4u);
  const WeightedLayer& dw = (*layers)[0];
  EXPECT_EQ(dw.node, "dw");
  EXPECT_EQ(dw.rows, 6);
  EXPECT_EQ(dw.cols, 18);
  EXPECT_EQ(dw.groups, 2);
  const WeightedLayer& g0 = (*layers)[1];
  EXPECT_TRUE(g0.transposed_view);
  EXPECT_EQ(g0.rows, 5);
  EXPECT_EQ(g0.cols, 6);
  const WeightedLayer& g1 = (*layers)[2];
  EXPECT_FALSE(g1.transposed_view);
  EXPECT_EQ(g1.bias, "g1.b");
  const WeightedLayer& mm = (*layers)[3];
  EXPECT_TRUE(mm.transposed_view);
  EXPECT_EQ(mm.rows, 3);
  EXPECT_EQ(mm.cols, 7);
  EXPECT_EQ(mm.bias, "mm.b");
  for (const auto& L : *layers) EXPECT_EQ(L.unsupported, "") << L.node;

  // The view of a [in, out] weight is its transpose; writing leaves copies alone.
  auto w = ReadWeightMatrix(m, g0);
  ASSERT_TRUE(w.ok());
  const Tensor& stored = m.graph.initializers["g0.w"];
  EXPECT_EQ(w->at(4, 2), stored.data<float>()[2 * 5 + 4]);
  Model copy = m;
  w->at(4, 2) = 42.0f;
  ASSERT_TRUE(WriteWeightMatrix(&copy, g0, *w).ok());
  EXPECT_EQ(copy.graph.initializers["g0.w"].data<float>()[2 * 5 + 4], 42.0f);
  EXPECT_NE(m.graph.initializers["g0.w"].data<float>()[2 * 5 + 4], 42.0f);
}

TEST(PruneLayers, SharedWeightsAreNotPrunable) {
  Model m = ViewsModel();
  m.graph.nodes.push_back(MakeNode("other", "Mul", {"y", "mm.w"}, {"z"}));
  auto layers = FindWeightedLayers(m);
  ASSERT_TRUE(layers.ok());
  EXPECT_NE((*layers)[3].unsupported.find("shared"), std::string::npos);
}

TEST(PrunePlan, SkipFirstLastAndReasons) {
  Model m = ResidualCnn();
  PruneOptions o;
  o.structure = PruneStructure::Block(4, 4);
  auto plans = PlanPruning(m, o);
  ASSERT_TRUE(plans.ok()) << plans.status().ToString();
  ASSERT_EQ(plans->size(), 5u);
  EXPECT_FALSE(FindPlan(*plans, "conv1")->prune);
  EXPECT_NE(FindPlan(*plans, "conv1")->reason.find("first weighted layer"), std::string::npos);
  EXPECT_FALSE(FindPlan(*plans, "fc")->prune);
  EXPECT_NE(FindPlan(*plans, "fc")->reason.find("last weighted layer"), std::string::npos);
  EXPECT_TRUE(FindPlan(*plans, "conv2")->prune);
  EXPECT_DOUBLE_EQ(FindPlan(*plans, "conv2")->sparsity, 0.5);
  // A rule naming the first layer exactly still prunes it.
  o.layers.push_back({"conv1", 0.3, std::nullopt, ""});
  plans = PlanPruning(m, o);
  ASSERT_TRUE(plans.ok());
  EXPECT_TRUE(FindPlan(*plans, "conv1")->prune);
  EXPECT_DOUBLE_EQ(FindPlan(*plans, "conv1")->sparsity, 0.3);
  EXPECT_EQ(FindPlan(*plans, "conv1")->rule, "conv1");
}

TEST(PrunePlan, BlockThatDoesNotFitIsSkippedFromTheDefaultButAnErrorWhenNamed) {
  Model m = ResidualCnn();
  PruneOptions o;
  o.skip_first_last = false;
  o.structure = PruneStructure::Block(16, 16);  // conv1..3 have 8 outputs
  auto plans = PlanPruning(m, o);
  ASSERT_TRUE(plans.ok()) << plans.status().ToString();
  const LayerPlan* c2 = FindPlan(*plans, "conv2");
  EXPECT_FALSE(c2->prune);
  EXPECT_NE(c2->reason.find("block 16x16 does not fit"), std::string::npos) << c2->reason;
  EXPECT_NE(c2->reason.find("8x72"), std::string::npos) << c2->reason;
  // A regex rule is a setting for many layers: still a skip, with the rule named.
  o.layers = {{"conv[23]", std::nullopt, PruneStructure::Block(16, 16)}};
  plans = PlanPruning(m, o);
  ASSERT_TRUE(plans.ok());
  EXPECT_NE(FindPlan(*plans, "conv3")->reason.find("rule 'conv[23]'"), std::string::npos);
  // Naming the layer exactly: the user asked for it, so it is an error.
  o.layers = {{"conv2", std::nullopt, PruneStructure::Block(16, 16)}};
  auto err = PlanPruning(m, o);
  ASSERT_FALSE(err.ok());
  EXPECT_EQ(err.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(err.status().message().find("asks for block16x16 on layer 'conv2', which it does not fit"),
            std::string::npos)
      << err.status().message();
}

TEST(PrunePlan, NMNeedsTheInputDimensionToBeAMultipleOfM) {
  Model m = ResidualCnn();
  PruneOptions o;
  o.skip_first_last = false;
  o.structure = PruneStructure::NM(2, 4);
  auto plans = PlanPruning(m, o);
  ASSERT_TRUE(plans.ok()) << plans.status().ToString();
  EXPECT_FALSE(FindPlan(*plans, "conv1")->prune);  // 3 * 9 = 27 inputs
  EXPECT_NE(FindPlan(*plans, "conv1")->reason.find("multiple of 4"), std::string::npos);
  EXPECT_TRUE(FindPlan(*plans, "conv2")->prune);  // 72 inputs
  EXPECT_DOUBLE_EQ(FindPlan(*plans, "conv2")->sparsity, 0.5);
}

TEST(PrunePlan, AutoPicksTheFirstCandidateThatFits) {
  Model m = ResidualCnn();
  PruneOptions o;
  o.skip_first_last = false;
  o.structure = PruneStructure::Auto();
  auto plans = PlanPruning(m, o);
  ASSERT_TRUE(plans.ok());
  EXPECT_EQ(FindPlan(*plans, "conv1")->structure.ToString(), "block4x4");
  EXPECT_EQ(FindPlan(*plans, "conv2")->structure.ToString(), "2:4");
  o.sparsity = 0.7;  // 2:4 only serves 50%
  plans = PlanPruning(m, o);
  ASSERT_TRUE(plans.ok());
  EXPECT_EQ(FindPlan(*plans, "conv2")->structure.ToString(), "block4x4");
}

TEST(PrunePlan, AutoWithAKernelTablePicksTheFastestAndLeavesSlowLayersDense) {
  auto table = KernelSpeedTable::Parse(
      "backend,structure,sparsity,speedup\n"
      "# block 4x4 pays off from 60% on, 2:4 never does on this CPU\n"
      "cpu,block4x4,0.5,0.9\ncpu,block4x4,0.7,1.5\ncpu,block4x4,0.9,3.0\n"
      "cpu,2:4,0.5,0.8\ncpu,block1x4,0.7,1.2\n"
      "cuda,2:4,0.5,1.6\n",
      "speed.csv");
  ASSERT_TRUE(table.ok()) << table.status().ToString();
  EXPECT_NEAR(*table->SpeedupAt("cpu", PruneStructure::Block(4, 4).ToString(), 0.8), 2.25, 1e-12);  // interpolated
  EXPECT_NEAR(*table->SpeedupAt("cpu", PruneStructure::Block(4, 4).ToString(), 0.95), 3.0, 1e-12);  // beyond: the last
  EXPECT_FALSE(table->SpeedupAt("cpu", PruneStructure::Block(4, 4).ToString(), 0.3).has_value());   // below: unknown
  EXPECT_FALSE(table->SpeedupAt("cpu", PruneStructure::Block(8, 8).ToString(), 0.7).has_value());

  Model m = ResidualCnn();
  PruneOptions o;
  o.skip_first_last = false;
  o.structure = PruneStructure::Auto();
  o.kernel_table = std::make_shared<const KernelSpeedTable>(*table);
  o.sparsity = 0.7;
  auto plans = PlanPruning(m, o);
  ASSERT_TRUE(plans.ok()) << plans.status().ToString();
  const LayerPlan* conv2 = FindPlan(*plans, "conv2");
  EXPECT_TRUE(conv2->prune);
  EXPECT_EQ(conv2->structure.ToString(), "block4x4");  // 1.5x beats block1x4's 1.2x
  EXPECT_NEAR(conv2->kernel_speedup, 1.5, 1e-12);
  // At 50% nothing on the CPU beats dense: the layer stays dense and says why.
  o.sparsity = 0.5;
  plans = PlanPruning(m, o);
  ASSERT_TRUE(plans.ok());
  conv2 = FindPlan(*plans, "conv2");
  EXPECT_FALSE(conv2->prune);
  EXPECT_NE(conv2->reason.find("no sparse kernel on cpu beats dense at 50% (2:4 0.80x, block4x4 0.90x"),
            std::string::npos)
      << conv2->reason;
  // On the GPU 2:4 does.
  o.backend = "cuda";
  plans = PlanPruning(m, o);
  ASSERT_TRUE(plans.ok());
  EXPECT_EQ(FindPlan(*plans, "conv2")->structure.ToString(), "2:4");
}

// structure auto for a GPU target: Blocked-ELL's 64 x 64 and 32 x 32 blocks
// join the candidates when there is a kernel table, and win only where its
// cuda rows (gpu_bench --speedups) measure them faster than dense.
TEST(PrunePlan, AutoForTheGpuPicksLargeBlocksWhereTheTableSaysTheyPay) {
  EXPECT_EQ(AutoCandidatesFor("cpu", true).size(), PruneOptions().auto_candidates.size());
  EXPECT_EQ(AutoCandidatesFor("cuda", false).size(), PruneOptions().auto_candidates.size());  // no data: as the CPU
  const std::vector<PruneStructure> gpu = AutoCandidatesFor("cuda", true);
  ASSERT_EQ(gpu.size(), PruneOptions().auto_candidates.size() + 2);
  EXPECT_EQ(gpu[0].ToString(), "block64x64");
  EXPECT_EQ(gpu[1].ToString(), "block32x32");

  // x [2, 128] -> mm0 (w [128, 128]) -> mm1 (w [128, 128]) -> y
  Model m;
  m.opset_imports = {{"", 17}};
  m.graph.inputs.push_back(testing::FloatInput("x", {{2, ""}, {128, ""}}));
  m.graph.outputs.push_back(testing::FloatInput("y", {{2, ""}, {128, ""}}));
  m.graph.initializers["w0"] = Gaussian({128, 128}, 1);
  m.graph.initializers["w1"] = Gaussian({128, 128}, 2);
  m.graph.nodes.push_back(MakeNode("mm0", "MatMul", {"x", "w0"}, {"h"}));
  m.graph.nodes.push_back(MakeNode("mm1", "MatMul", {"h", "w1"}, {"y"}));
  auto table = KernelSpeedTable::Parse(
      "backend,structure,precision,sparsity,speedup\n"
      "cuda,block64x64,s8,0.8,0.95\ncuda,block64x64,s8,0.9,1.8\ncuda,block32x32,s8,0.9,1.5\n"
      "cpu,block4x4,s8,0.8,2.2\n",
      "gpu.csv");
  ASSERT_TRUE(table.ok()) << table.status().ToString();
  PruneOptions o;
  o.skip_first_last = false;
  o.structure = PruneStructure::Auto();
  o.kernel_table = std::make_shared<const KernelSpeedTable>(*table);
  o.backend = "cuda";
  o.auto_candidates = gpu;
  o.sparsity = 0.9;
  auto plans = PlanPruning(m, o);
  ASSERT_TRUE(plans.ok()) << plans.status().ToString();
  EXPECT_EQ(FindPlan(*plans, "mm0")->structure.ToString(), "block64x64");  // 1.8x beats 32 x 32's 1.5x
  EXPECT_NEAR(FindPlan(*plans, "mm0")->kernel_speedup, 1.8, 1e-12);
  // At 80% no block pays on the GPU (0.95x; 32 x 32 not measured there): dense, and why.
  o.sparsity = 0.8;
  plans = PlanPruning(m, o);
  ASSERT_TRUE(plans.ok());
  const LayerPlan* mm1 = FindPlan(*plans, "mm1");
  EXPECT_FALSE(mm1->prune);
  EXPECT_NE(mm1->reason.find("no sparse kernel on cuda beats dense at 80% (block64x64 0.95x"), std::string::npos)
      << mm1->reason;
}

// The own kernels' rows (backend cuda.wmma) count beside cuSPARSE's: the
// CUDA rows run whichever is faster (kernels/cuda/block_sparse_choice.h).
TEST(PrunePlan, AutoForTheGpuCountsTheOwnKernelsRows) {
  Model m;
  m.opset_imports = {{"", 17}};
  m.graph.inputs.push_back(testing::FloatInput("x", {{2, ""}, {128, ""}}));
  m.graph.outputs.push_back(testing::FloatInput("y", {{2, ""}, {128, ""}}));
  m.graph.initializers["w0"] = Gaussian({128, 128}, 1);
  m.graph.nodes.push_back(MakeNode("mm0", "MatMul", {"x", "w0"}, {"y"}));
  auto table = KernelSpeedTable::Parse(
      "backend,structure,precision,sparsity,speedup\n"
      "cuda,block64x64,s8,0.9,1.8\ncuda,block32x32,s8,0.9,1.5\ncuda.wmma,block32x32,s8,0.9,2.4\n",
      "gpu.csv");
  ASSERT_TRUE(table.ok()) << table.status().ToString();
  PruneOptions o;
  o.skip_first_last = false;
  o.structure = PruneStructure::Auto();
  o.kernel_table = std::make_shared<const KernelSpeedTable>(*table);
  o.backend = "cuda";
  o.auto_candidates = AutoCandidatesFor("cuda", true);
  o.sparsity = 0.9;
  auto plans = PlanPruning(m, o);
  ASSERT_TRUE(plans.ok()) << plans.status().ToString();
  EXPECT_EQ(FindPlan(*plans, "mm0")->structure.ToString(), "block32x32");  // the own kernel's 2.4x
  EXPECT_NEAR(FindPlan(*plans, "mm0")->kernel_speedup, 2.4, 1e-12);
}

TEST(PrunePlan, KernelTableErrorsNameTheLine) {
  auto bad = KernelSpeedTable::Parse("backend,structure,sparsity,speedup\ncpu,block4x4,1.5,2\ncpu,blok4x4,0.5,2\n"
                                     "cpu,2:4,0.5\n", "t.csv");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("t.csv:2: sparsity '1.5' must be a number in [0, 1)"), std::string::npos)
      << bad.status().message();
  EXPECT_NE(bad.status().message().find("t.csv:3: 'blok4x4' is not"), std::string::npos) << bad.status().message();
  EXPECT_NE(bad.status().message().find("t.csv:4: expected 4 cells, got 3"), std::string::npos);
  EXPECT_FALSE(KernelSpeedTable::Parse("a,b\n", "t.csv").ok());
  EXPECT_EQ(KernelSpeedTable::Load("/nonexistent/speed.csv").status().code(), StatusCode::kNotFound);
}

TEST(PrunePlan, RegexMatchingNothingIsNotFound) {
  Model m = ResidualCnn();
  PruneOptions o;
  o.layers = {{"conv2", 0.2, std::nullopt, ""}, {"layer4\\..*", 0.9, std::nullopt, ""}};
  auto err = PlanPruning(m, o);
  ASSERT_FALSE(err.ok());
  EXPECT_EQ(err.status().code(), StatusCode::kNotFound);
  EXPECT_NE(err.status().message().find("'layer4\\..*' matches no weighted layer"), std::string::npos)
      << err.status().message();
  EXPECT_NE(err.status().message().find("conv1, conv2, conv3, conv4, fc"), std::string::npos);
}

TEST(PrunePlan, OptionErrorsAreCollected) {
  Model m = ResidualCnn();
  PruneOptions o;
  o.sparsity = 1.0;
  o.steps = 3;  // oneshot
  o.layers = {{"conv(", 0.5, std::nullopt, ""}, {"conv2", -0.5, std::nullopt, ""}, {"fc", std::nullopt, std::nullopt, ""}};
  auto err = PlanPruning(m, o);
  ASSERT_FALSE(err.ok());
  const std::string& msg = err.status().message();
  EXPECT_NE(msg.find("sparsity 1 is out of range: must be in [0, 1)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("oneshot schedule takes exactly 1"), std::string::npos) << msg;
  EXPECT_NE(msg.find("'conv(' is not a valid regular expression"), std::string::npos) << msg;
  EXPECT_NE(msg.find("sparsity -0.5 is out of range"), std::string::npos) << msg;
  EXPECT_NE(msg.find("sets neither sparsity nor structure"), std::string::npos) << msg;

  PruneOptions nm;
  nm.structure = PruneStructure::NM(2, 4);
  nm.sparsity = 0.3;
  auto nm_err = PlanPruning(m, nm);
  ASSERT_FALSE(nm_err.ok());
  EXPECT_NE(nm_err.status().message().find("N:M fixes it at 0.5"), std::string::npos) << nm_err.status().message();
  PruneOptions bad_nm;
  bad_nm.structure = PruneStructure::NM(4, 4);
  EXPECT_FALSE(PlanPruning(m, bad_nm).ok());
}

}  // namespace
}  // namespace sparq
