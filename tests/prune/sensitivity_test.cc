// Sensitivity analysis, its CSV and SVG, and the per-layer allocation.
#include <gtest/gtest.h>

#include <array>
#include <limits>

#include "prune/prune_test_util.h"
#include "sparq/file_io.h"
#include "sparq/onnx_io.h"

namespace sparq {
namespace {

using namespace prune_test;  // NOLINT

// x[n,16] -> fcA (16->32) -> relu -> fcB (32->16) ──────────────────────┐
//         └> fcC (16->64) -> relu -> fcD (64->16) -> mul(1e-3) ─────────┴> add -> y
// The fcC/fcD branch barely reaches the output: pruning it costs nothing.
Model TwoBranchMlp() {
  Model m;
  m.opset_imports = {{"", 17}};
  m.graph.inputs.push_back(testing::FloatInput("x", {{-1, "n"}, {16, ""}}));
  m.graph.outputs.push_back(testing::FloatInput("y", {{-1, "n"}, {16, ""}}));
  auto fc = [&](const std::string& name, const std::string& in, const std::string& out, int64_t i, int64_t o,
                uint32_t seed) {
    m.graph.initializers[name + ".w"] = Gaussian({o, i}, seed, 1.0f / std::sqrt(static_cast<float>(i)));
    m.graph.initializers[name + ".b"] = Gaussian({o}, seed + 1, 0.1f);
    m.graph.nodes.push_back(MakeNode(name, "Gemm", {in, name + ".w", name + ".b"}, {out}, {IntAttr("transB", 1)}));
  };
  fc("fcA", "x", "a", 16, 32, 1);
  m.graph.nodes.push_back(MakeNode("reluA", "Relu", {"a"}, {"ra"}));
  fc("fcB", "ra", "b", 32, 16, 3);
  fc("fcC", "x", "c", 16, 64, 5);
  m.graph.nodes.push_back(MakeNode("reluC", "Relu", {"c"}, {"rc"}));
  fc("fcD", "rc", "d", 64, 16, 7);
  m.graph.initializers["tiny"] = Tensor::Scalar<float>(1e-3f);
  m.graph.nodes.push_back(MakeNode("mul", "Mul", {"d", "tiny"}, {"dd"}));
  m.graph.nodes.push_back(MakeNode("add", "Add", {"b", "dd"}, {"y"}));
  return m;
}

TEST(PruneSensitivity, ScanCsvSvgAndAllocationFavourTheInsensitiveBranch) {
  Model m = TwoBranchMlp();
  const Tensor x = Gaussian({64, 16}, 42);
  SensitivityOptions o;
  o.sparsities = {0.25, 0.5, 0.75, 0.9};
  o.threads = 1;
  auto table = SensitivityAnalysis(m, o, nullptr, FidelityMetric(m, x));
  ASSERT_TRUE(table.ok()) << table.status().ToString();
  EXPECT_NEAR(table->baseline, 100.0, 1e-9);
  ASSERT_EQ(table->points.size(), 16u);
  double worst_insensitive = 0.0, best_sensitive = 1e9;
  for (const auto& p : table->points) {
    EXPECT_NEAR(p.drop, table->baseline - p.metric, 1e-12);
    if (p.sparsity < 0.7) continue;
    if (p.layer == "fcC" || p.layer == "fcD") worst_insensitive = std::max(worst_insensitive, p.drop);
    else best_sensitive = std::min(best_sensitive, p.drop);
  }
  EXPECT_LT(worst_insensitive, 0.01);
  EXPECT_GT(best_sensitive, 1.0);

  const std::string csv = SensitivityCsv(*table);
  EXPECT_EQ(csv.rfind("layer,params,sparsity,metric,drop\n", 0), 0u);
  EXPECT_NE(csv.find("fcC,1024,0.75,"), std::string::npos) << csv;
  const std::string svg = SensitivitySvg(*table, "MLP <test>");
  EXPECT_EQ(svg.rfind("<svg xmlns=\"http://www.w3.org/2000/svg\"", 0), 0u);
  EXPECT_NE(svg.find("MLP &lt;test&gt;"), std::string::npos);
  size_t lines = 0;
  for (size_t pos = svg.find("<polyline"); pos != std::string::npos; pos = svg.find("<polyline", pos + 1)) ++lines;
  EXPECT_EQ(lines, 4u);
  for (const char* name : {"fcA", "fcB", "fcC", "fcD", "sparsity of the layer", "metric drop"})
    EXPECT_NE(svg.find(name), std::string::npos) << name;
  testing::TempDir dir;
  ASSERT_TRUE(WriteSensitivityCsv(*table, dir.path("s.csv")).ok());
  ASSERT_TRUE(WriteSensitivitySvg(*table, dir.path("s.svg")).ok());
  auto back = ReadFile(dir.path("s.csv"));
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(*back, csv);

  // 50% of 3072 weights: the insensitive branch (2048 weights) can carry it alone.
  auto a = AllocateSparsity(*table, 0.5, 1.0);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_TRUE(a->target_met) << a->message;
  EXPECT_GE(a->achieved_sparsity, 0.5);
  EXPECT_GE(a->sparsity["fcC"], 0.75);
  EXPECT_GE(a->sparsity["fcD"], 0.75);
  EXPECT_GT(a->sparsity["fcC"], a->sparsity["fcA"]);
  EXPECT_GT(a->sparsity["fcD"], a->sparsity["fcB"]);
  EXPECT_LE(a->predicted_drop, 1.0);

  // The target is met exactly: the last raise stops part-way.
  EXPECT_NEAR(a->achieved_sparsity, 0.5, 1e-9) << a->message;
  EXPECT_EQ(a->cost, "metric drop");

  // A tiny budget stops early and says so.
  auto tight = AllocateSparsity(*table, 0.8, 0.01);
  ASSERT_TRUE(tight.ok());
  EXPECT_FALSE(tight->target_met);
  EXPECT_NE(tight->message.find("budget"), std::string::npos) << tight->message;
  EXPECT_EQ(tight->sparsity["fcA"], 0.0);

  // The allocation feeds PruneModel as exact-name rules.
  PruneOptions po;
  po.skip_first_last = false;
  po.recovery = false;
  po.layers = a->ToRules();
  auto pruned = PruneModel(m, po, nullptr, FidelityMetric(m, x));
  ASSERT_TRUE(pruned.ok()) << pruned.status().ToString();
  EXPECT_NEAR(pruned->report.final_sparsity["fcC"], a->sparsity["fcC"], 0.01);
  EXPECT_GT(pruned->report.steps.back().metric, 99.0);
}

TEST(PruneSensitivity, Errors) {
  Model m = TwoBranchMlp();
  const Tensor x = Gaussian({8, 16}, 1);
  SensitivityOptions o;
  o.sparsities = {0.5, 1.2};
  auto bad = SensitivityAnalysis(m, o, nullptr, FidelityMetric(m, x));
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("must be in [0, 1)"), std::string::npos);
  o.sparsities = {0.5};
  o.structure = PruneStructure::Unstructured();
  o.layers = {"conv.*"};
  auto none = SensitivityAnalysis(m, o, nullptr, FidelityMetric(m, x));
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().code(), StatusCode::kNotFound);
  o.layers = {};
  EXPECT_FALSE(SensitivityAnalysis(m, o, nullptr, nullptr).ok());
  SensitivityTable empty;
  EXPECT_FALSE(AllocateSparsity(empty, 0.5, 1.0).ok());
}

// A hand-made table: `layer` with `params` weights, (sparsity, drop, SQNR) points.
void AddLayer(SensitivityTable* t, const std::string& layer, int64_t params,
              const std::vector<std::array<double, 3>>& points, bool all_or_nothing = false) {
  for (const auto& p : points) {
    SensitivityPoint sp;
    sp.layer = layer;
    sp.params = params;
    sp.sparsity = p[0];
    sp.drop = p[1];
    sp.metric = 100.0 - p[1];
    sp.sqnr_db = p[2];
    sp.all_or_nothing = all_or_nothing;
    t->points.push_back(sp);
  }
}

TEST(PruneSensitivity, AllocationRanksByOutputNoiseWhenEveryPointHasAnSqnr) {
  // A label metric that does not move (drop 0 everywhere) says nothing; the
  // output SQNR says layer "b" loses much more than "a" at the same sparsity.
  SensitivityTable t;
  t.baseline = 100.0;
  AddLayer(&t, "a", 1000, {{0.25, 0.0, 40.0}, {0.5, 0.0, 30.0}, {0.75, 0.0, 20.0}});
  AddLayer(&t, "b", 1000, {{0.25, 0.0, 20.0}, {0.5, 0.0, 10.0}, {0.75, 0.0, 5.0}});
  auto a = AllocateSparsity(t, 0.5, std::numeric_limits<double>::infinity());
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ(a->cost, "output noise");
  EXPECT_TRUE(a->target_met) << a->message;
  EXPECT_NEAR(a->achieved_sparsity, 0.5, 1e-9);
  // Noise per removed weight: a reaches 0.75 (1e-2 in all) before b takes
  // anything, b takes the last 0.25 of its range.
  EXPECT_DOUBLE_EQ(a->sparsity["a"], 0.75);
  EXPECT_NEAR(a->sparsity["b"], 0.25, 1e-9);
  EXPECT_NE(a->message.find("output noise"), std::string::npos) << a->message;

  // One point without an SQNR: the metric drop ranks (ties: graph order).
  t.points[0].sqnr_db = std::numeric_limits<double>::quiet_NaN();
  auto d = AllocateSparsity(t, 0.5, 1.0);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->cost, "metric drop");
  EXPECT_NEAR(d->achieved_sparsity, 0.5, 1e-9);
}

TEST(PruneSensitivity, AllocationTakesNmLayersWholeOrNotAtAll) {
  SensitivityTable t;
  t.baseline = 100.0;
  // Two 2:4 layers (one point each, 50%) and an unstructured one.
  AddLayer(&t, "nm_cheap", 1000, {{0.5, 0.1, 30.0}}, true);
  AddLayer(&t, "nm_dear", 1000, {{0.5, 5.0, 8.0}}, true);
  AddLayer(&t, "u", 2000, {{0.25, 0.2, 25.0}, {0.5, 1.0, 15.0}, {0.75, 3.0, 9.0}});
  // 30% of 4000 = 1200 zeros: nm_cheap (500), then u (interpolated, 700 = 35%).
  auto a = AllocateSparsity(t, 0.3, std::numeric_limits<double>::infinity());
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_DOUBLE_EQ(a->sparsity["nm_cheap"], 0.5);
  EXPECT_DOUBLE_EQ(a->sparsity["nm_dear"], 0.0);
  EXPECT_NEAR(a->sparsity["u"], 0.35, 1e-9);
  EXPECT_NEAR(a->achieved_sparsity, 0.3, 1e-9);
  // The rules keep the N:M layers at 0 or 1 - n/m, which PlanPruning accepts.
  for (const PruneLayerRule& r : a->ToRules()) {
    if (r.match.rfind("nm", 0) == 0) EXPECT_TRUE(*r.sparsity == 0.0 || *r.sparsity == 0.5) << r.match;
  }
}

TEST(PruneSensitivity, NmStructureScansEachLayerAtItsOnePoint) {
  Model m = TwoBranchMlp();
  const Tensor x = Gaussian({32, 16}, 3);
  SensitivityOptions o;
  o.structure = PruneStructure::NM(2, 4);
  o.sparsities = {0.25, 0.9};  // not used by N:M layers
  o.threads = 1;
  auto table = SensitivityAnalysis(m, o, nullptr, FidelityMetric(m, x));
  ASSERT_TRUE(table.ok()) << table.status().ToString();
  ASSERT_EQ(table->points.size(), 4u);
  for (const auto& p : table->points) {
    EXPECT_NEAR(p.sparsity, 0.5, 1e-12) << p.layer;
    EXPECT_TRUE(p.all_or_nothing) << p.layer;
  }
}

}  // namespace
}  // namespace sparq
