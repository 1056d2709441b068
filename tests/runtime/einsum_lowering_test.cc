// lower-einsum (runtime/passes/einsum_lowering.h): two-operand Einsums run
// as Transpose/Reshape/Unsqueeze/MatMul in the deployment profile and match
// the reference Einsum within float32 rounding, at opsets 12 (axes as
// attributes) and 13+ (axes as inputs), with weights constant or not; the
// equations it does not take are left to the reference kernel.
#include <gtest/gtest.h>

#include <cmath>
#include <set>
#include <string>
#include <vector>

#include "runtime/passes/einsum_lowering.h"
#include "sparq/executor.h"
#include "test_util.h"

namespace sparq {
namespace {

// Lowered (float32 sums) against the reference (double sums), relative to 1 + |want|.
constexpr double kLoweredEinsumTol = 1e-5;

struct Case {
  std::string equation;
  Shape a, b, y;
  bool lowered;  // whether the pass takes it
};

// y = Einsum(a, b) with b an initializer (a weight) or a second input.
Model EinsumModel(const Case& c, int64_t opset, bool b_constant) {
  Model m;
  m.opset_imports = {{"", opset}};
  Graph& g = m.graph;
  auto dims = [](const Shape& s) {
    std::vector<Dim> d;
    for (int64_t v : s) d.push_back({v, ""});
    return d;
  };
  g.inputs.push_back(testing::FloatInput("a", dims(c.a)));
  if (b_constant) {
    g.initializers["b"] = testing::RandomFloats(c.b, 2, -1.0f, 1.0f);
  } else {
    g.inputs.push_back(testing::FloatInput("b", dims(c.b)));
  }
  g.outputs.push_back(testing::FloatInput("y", dims(c.y)));
  g.nodes.push_back({"e", "Einsum", "", {"a", "b"}, {"y"}, {Attribute::String("equation", c.equation)}, ""});
  return m;
}

Tensor RunY(const Model& m, const TensorMap& feeds, GraphProfile profile) {
  ExecutorOptions o;
  o.threads = 1;
  o.profile = profile;
  auto exec = Executor::Create(m, o);
  EXPECT_TRUE(exec.ok()) << exec.status().ToString();
  if (!exec.ok()) return Tensor();
  TensorMap out;
  const Status st = (*exec)->Run(feeds, &out);
  EXPECT_TRUE(st.ok()) << st.ToString();
  return out["y"];
}

const std::vector<Case>& Cases() {
  static const std::vector<Case> cases = {
      {"btgi,gih->btgh", {2, 5, 3, 4}, {3, 4, 6}, {2, 5, 3, 6}, true},  // DeepFilterNet's GroupedLinear
      {"ij,jk->ik", {3, 4}, {4, 5}, {3, 5}, true},
      {"ij,kj->ik", {3, 4}, {5, 4}, {3, 5}, true},
      {"bhqd,bhkd->bhqk", {2, 3, 4, 8}, {2, 3, 5, 8}, {2, 3, 4, 5}, true},  // attention scores
      {"ijk,jkl->il", {2, 3, 4}, {3, 4, 5}, {2, 5}, true},                  // two summed labels
      {"abc,cd->dba", {2, 3, 4}, {4, 5}, {5, 3, 2}, true},                  // output transposed
      {"i,j->ij", {3}, {4}, {3, 4}, true},                                  // outer product (no K)
      {"i,i->", {6}, {6}, {}, true},                                        // dot (no M, no N)
      {"bi,bi->b", {3, 6}, {3, 6}, {3}, true},                              // batched dot
      {"ab,cd->abcd", {2, 3}, {4, 5}, {2, 3, 4, 5}, true},                  // several free dims each
      {"ij,jk", {3, 4}, {4, 5}, {3, 5}, true},                              // implicit output
      {"ii,ij->j", {3, 3}, {3, 4}, {4}, false},                             // a diagonal
      {"ij,k->k", {3, 4}, {5}, {5}, false},                                 // summed in one operand only
  };
  return cases;
}

TEST(EinsumLowering, MatchesTheReferenceAtEveryOpsetWithOrWithoutConstantWeights) {
  for (int64_t opset : {12, 13, 17})
  for (bool b_constant : {true, false})
  for (const Case& c : Cases()) {
    SCOPED_TRACE(c.equation + " opset " + std::to_string(opset) + (b_constant ? " constant b" : " input b"));
    const Model m = EinsumModel(c, opset, b_constant);
    Model lowered = m;
    EXPECT_EQ(LowerEinsumToMatMul(&lowered).size(), c.lowered ? 1u : 0u);
    bool einsum_left = false;
    for (const Node& n : lowered.graph.nodes) einsum_left = einsum_left || n.op_type == "Einsum";
    EXPECT_EQ(einsum_left, !c.lowered);

    TensorMap feeds = {{"a", testing::RandomFloats(c.a, 1, -1.0f, 1.0f)}};
    if (!b_constant) feeds["b"] = testing::RandomFloats(c.b, 2, -1.0f, 1.0f);
    const Tensor want = RunY(m, feeds, GraphProfile::kAsWritten);
    const Tensor got = RunY(m, feeds, GraphProfile::kDeployment);
    ASSERT_TRUE(want.defined() && got.defined());
    ASSERT_EQ(got.shape(), c.y);
    ASSERT_EQ(want.shape(), c.y);
    for (int64_t i = 0; i < want.numel(); ++i) {
      const double w = want.data<float>()[i];
      ASSERT_NEAR(got.data<float>()[i], w, kLoweredEinsumTol * (1.0 + std::fabs(w))) << "element " << i;
    }
  }
}

TEST(EinsumLowering, NewNamesDoNotCollideWithTheGraphs) {
  Model m = EinsumModel(Cases()[0], 17, true);
  // A value already named like the first name the pass would pick.
  m.graph.inputs.push_back(testing::FloatInput("e/einsum_Transpose_out", {{1, ""}}));
  LowerEinsumToMatMul(&m);
  std::set<std::string> outputs;
  for (const Node& n : m.graph.nodes)
    for (const std::string& o : n.outputs) EXPECT_TRUE(outputs.insert(o).second) << o;
  EXPECT_EQ(outputs.count("e/einsum_Transpose_out"), 0u);
  EXPECT_EQ(m.graph.nodes.back().outputs[0], "y");
}

}  // namespace
}  // namespace sparq
