// Folding If nodes decided by constants (runtime/passes/if_folding.h): the
// taken branch inlined, names kept or made fresh, nested subgraphs' reads of
// renamed values rewritten, undecided Ifs and pins left alone; the folded
// model's outputs against the original's on the executor (the reference
// kernels), with the pinned value fed to the original.
#include "runtime/passes/if_folding.h"

#include <gtest/gtest.h>

#include <memory>
#include <set>

#include "sparq/executor.h"
#include "sparq/onnx_io.h"
#include "test_util.h"

namespace sparq {
namespace {

using testing::GraphAttr;
using testing::MakeNode;
using testing::Typed;

Graph Branch(const std::string& name, std::vector<Node> nodes, std::vector<std::string> outputs) {
  Graph g;
  g.name = name;
  g.nodes = std::move(nodes);
  for (const auto& o : outputs) g.outputs.push_back(Typed(o, DataType::kFloat32));
  return g;
}

bool HasInput(const Graph& g, const std::string& name) {
  for (const auto& v : g.inputs)
    if (v.name == name) return true;
  return false;
}

int CountOps(const Graph& g, const std::string& op) {
  int n = 0;
  for (const Node& node : g.nodes) n += node.op_type == op;
  return n;
}

TensorMap RunModel(const Model& m, const TensorMap& feeds) {
  ExecutorOptions o;
  o.threads = 1;
  o.backend = "reference";
  auto exec = Executor::Create(m, o);
  EXPECT_TRUE(exec.ok()) << exec.status().ToString();
  TensorMap out;
  if (!exec.ok()) return out;
  Status st = (*exec)->Run(feeds, &out);
  EXPECT_TRUE(st.ok()) << st.ToString();
  return out;
}

std::vector<float> Values(const Tensor& t) { return {t.data<float>(), t.data<float>() + t.numel()}; }

// y = If(rate == 16000) then (Relu(x) + w) * b else (x * x), z = y + 1:
// `rate` is the input a caller pins (Silero VAD's sr), the then-branch has
// an initializer of its own (b) and reads an outer initializer (w).
Model RateIf() {
  Model m;
  m.opset_imports = {{"", 17}};
  Graph then_g = Branch("then",
                        {MakeNode("t_relu", "Relu", {"x"}, {"t_h"}), MakeNode("t_add", "Add", {"t_h", "w"}, {"t_s"}),
                         MakeNode("t_mul", "Mul", {"t_s", "b"}, {"t_out"})},
                        {"t_out"});
  then_g.initializers["b"] = Tensor::FromVector<float>({3}, {2, 2, 2});
  Graph else_g = Branch("else", {MakeNode("e_mul", "Mul", {"x", "x"}, {"e_out"})}, {"e_out"});
  Graph& g = m.graph;
  g.inputs = {Typed("x", DataType::kFloat32), Typed("rate", DataType::kInt64)};
  g.initializers["w"] = Tensor::FromVector<float>({3}, {10, 20, 30});
  g.initializers["one"] = Tensor::Scalar<float>(1.0f);
  g.nodes.push_back(MakeNode("k", "Constant", {}, {"k16"}, {Attribute::FromTensor("value", Tensor::Scalar<int64_t>(16000))}));
  g.nodes.push_back(MakeNode("eq", "Equal", {"rate", "k16"}, {"is16"}));
  g.nodes.push_back(MakeNode("if", "If", {"is16"}, {"y"},
                             {GraphAttr("then_branch", then_g), GraphAttr("else_branch", else_g)}));
  g.nodes.push_back(MakeNode("plus", "Add", {"y", "one"}, {"z"}));
  g.outputs = {Typed("z", DataType::kFloat32)};
  return m;
}

TEST(IfFolding, PinnedInputTakesEitherBranch) {
  const Tensor x = Tensor::FromVector<float>({3}, {-1, 2, 3});
  for (int64_t rate : {16000, 8000}) {
    SCOPED_TRACE(rate);
    Model original = RateIf();
    Model m = original;
    auto folded = FoldDecidedIfs(&m, {{"rate", Tensor::Scalar<int64_t>(rate)}});
    ASSERT_TRUE(folded.ok()) << folded.status().ToString();
    ASSERT_EQ(folded->folded.size(), 1u);
    EXPECT_EQ(folded->folded[0].taken, rate == 16000);
    EXPECT_EQ(folded->folded[0].condition, "is16");
    EXPECT_EQ(folded->inputs_removed, (std::vector<std::string>{"rate"}));
    EXPECT_EQ(CountOps(m.graph, "If"), 0);
    EXPECT_EQ(CountOps(m.graph, "Equal"), 0);  // the condition's nodes go with it
    EXPECT_FALSE(HasInput(m.graph, "rate"));
    EXPECT_EQ(m.graph.initializers.count("rate"), 0u);  // nothing reads it any more
    EXPECT_EQ(m.graph.initializers.count("b"), rate == 16000 ? 1u : 0u);
    const TensorMap want = RunModel(original, {{"x", x}, {"rate", Tensor::Scalar<int64_t>(rate)}});
    const TensorMap got = RunModel(m, {{"x", x}});
    ASSERT_TRUE(want.count("z") && got.count("z"));
    EXPECT_EQ(Values(got.at("z")), Values(want.at("z")));
    EXPECT_EQ(Values(got.at("z")), rate == 16000 ? (std::vector<float>{21, 45, 67}) : (std::vector<float>{2, 5, 10}));
  }
}

// The outer graph already uses some of the then-branch's names (a value
// "t_h", a node "t_relu"): they get fresh names, and the nested If inside
// the branch, whose branches read the renamed "t_h" and the outer "x",
// reads the new name. The nested If's condition is a run input, so it stays.
TEST(IfFolding, NestedSubgraphReadsFollowRenamedValues) {
  Model m;
  m.opset_imports = {{"", 17}};
  Graph inner_then = Branch("inner_then", {MakeNode("it_add", "Add", {"t_h", "x"}, {"it_out"})}, {"it_out"});
  Graph inner_else = Branch("inner_else", {MakeNode("ie_sub", "Sub", {"t_h", "x"}, {"ie_out"})}, {"ie_out"});
  Graph then_g = Branch("then",
                        {MakeNode("t_relu", "Relu", {"x"}, {"t_h"}),
                         MakeNode("t_if", "If", {"c2"}, {"t_out"},
                                  {GraphAttr("then_branch", inner_then), GraphAttr("else_branch", inner_else)})},
                        {"t_out"});
  Graph else_g = Branch("else", {}, {"x"});  // an outer value as the branch output
  Graph& g = m.graph;
  g.inputs = {Typed("x", DataType::kFloat32), Typed("c2", DataType::kBool)};
  g.initializers["flag"] = Tensor::Scalar<bool>(true);
  g.nodes.push_back(MakeNode("t_relu", "Neg", {"x"}, {"t_h"}));  // the outer graph's own "t_h" and "t_relu"
  g.nodes.push_back(MakeNode("if", "If", {"flag"}, {"y"},
                             {GraphAttr("then_branch", then_g), GraphAttr("else_branch", else_g)}));
  g.nodes.push_back(MakeNode("sum", "Add", {"y", "t_h"}, {"z"}));
  g.outputs = {Typed("z", DataType::kFloat32)};
  ASSERT_TRUE(g.TopoSort().ok());
  const Model original = m;

  auto folded = FoldDecidedIfs(&m, {});
  ASSERT_TRUE(folded.ok()) << folded.status().ToString();
  ASSERT_EQ(folded->folded.size(), 1u);
  EXPECT_TRUE(folded->inputs_removed.empty());
  EXPECT_EQ(CountOps(m.graph, "If"), 1);  // the nested one, on c2
  EXPECT_TRUE(HasInput(m.graph, "c2"));
  std::set<std::string> node_names;
  for (const Node& n : m.graph.nodes) EXPECT_TRUE(node_names.insert(n.name).second) << n.name;
  const Tensor x = Tensor::FromVector<float>({3}, {-1, 2, 3});
  for (bool c2 : {true, false}) {
    SCOPED_TRACE(c2);
    const TensorMap feeds = {{"x", x}, {"c2", Tensor::Scalar<bool>(c2)}};
    const TensorMap want = RunModel(original, feeds);
    const TensorMap got = RunModel(m, feeds);
    ASSERT_TRUE(want.count("z") && got.count("z"));
    EXPECT_EQ(Values(got.at("z")), Values(want.at("z")));
  }
  // The rewritten nested branches are written from the IR and load back.
  StatusOr<std::string> bytes = SerializeModel(m);
  ASSERT_TRUE(bytes.ok()) << bytes.status().ToString();
  StatusOr<Model> loaded = LoadModelFromBytes(*bytes, "");
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  const TensorMap again = RunModel(*loaded, {{"x", x}, {"c2", Tensor::Scalar<bool>(true)}});
  const TensorMap want = RunModel(original, {{"x", x}, {"c2", Tensor::Scalar<bool>(true)}});
  ASSERT_TRUE(again.count("z"));
  EXPECT_EQ(Values(again.at("z")), Values(want.at("z")));

  // The else branch: its output is the outer x itself, copied by an Identity.
  Model original2 = original;
  original2.graph.initializers["flag"] = Tensor::Scalar<bool>(false);
  Model m2 = original2;
  auto folded2 = FoldDecidedIfs(&m2, {});
  ASSERT_TRUE(folded2.ok()) << folded2.status().ToString();
  EXPECT_EQ(CountOps(m2.graph, "If"), 0);
  EXPECT_EQ(CountOps(m2.graph, "Identity"), 1);
  const TensorMap got2 = RunModel(m2, {{"x", x}, {"c2", Tensor::Scalar<bool>(true)}});
  ASSERT_TRUE(got2.count("z"));
  EXPECT_EQ(Values(got2.at("z")), Values(RunModel(original2, {{"x", x}, {"c2", Tensor::Scalar<bool>(true)}}).at("z")));
  EXPECT_EQ(Values(got2.at("z")), (std::vector<float>{0, 0, 0}));  // x + Neg(x)
}

// A condition on a run input, or on an initializer a run may override, is
// not decided: the model stays exactly as it was, the pinned input too.
TEST(IfFolding, UndecidedConditionsLeaveTheModelAlone) {
  Model m = RateIf();
  auto folded = FoldDecidedIfs(&m, {{"x", Tensor::FromVector<float>({3}, {1, 2, 3})}});  // pins x, not rate
  ASSERT_TRUE(folded.ok()) << folded.status().ToString();
  EXPECT_TRUE(folded->folded.empty());
  EXPECT_TRUE(folded->inputs_removed.empty());
  EXPECT_EQ(m.graph.nodes.size(), RateIf().graph.nodes.size());
  EXPECT_TRUE(HasInput(m.graph, "x"));
  EXPECT_TRUE(HasInput(m.graph, "rate"));
  EXPECT_EQ(m.graph.initializers.count("x"), 0u);

  Model o = RateIf();  // rate as an initializer that is also a graph input: a default, not a constant
  o.graph.inputs.pop_back();
  o.graph.initializers["rate"] = Tensor::Scalar<int64_t>(16000);
  o.graph.initializer_inputs.push_back(Typed("rate", DataType::kInt64));
  folded = FoldDecidedIfs(&o, {});
  ASSERT_TRUE(folded.ok()) << folded.status().ToString();
  EXPECT_TRUE(folded->folded.empty());
  EXPECT_EQ(CountOps(o.graph, "If"), 1);
}

// A pinned input that no folded condition reads stays an input, while the
// one that decided the If leaves; a second pin of the other is not used.
TEST(IfFolding, OnlyThePinsAConditionReadLeaveTheInputs) {
  Model m = RateIf();
  const Tensor x = Tensor::FromVector<float>({3}, {4, 5, 6});
  auto folded = FoldDecidedIfs(&m, {{"rate", Tensor::Scalar<int64_t>(16000)}, {"x", x}});
  ASSERT_TRUE(folded.ok()) << folded.status().ToString();
  EXPECT_EQ(folded->inputs_removed, (std::vector<std::string>{"rate"}));
  EXPECT_TRUE(HasInput(m.graph, "x"));
  EXPECT_EQ(m.graph.initializers.count("x"), 0u);
}

TEST(IfFolding, DecidedConditionThatIsNotOneBoolNamesTheIf) {
  Model m = RateIf();
  m.graph.nodes[2].inputs[0] = "rate";  // the If reads the int64 pin directly
  auto folded = FoldDecidedIfs(&m, {{"rate", Tensor::Scalar<int64_t>(16000)}});
  ASSERT_FALSE(folded.ok());
  EXPECT_NE(folded.status().message().find("'if' (If)"), std::string::npos) << folded.status().ToString();
  EXPECT_NE(folded.status().message().find("one bool"), std::string::npos) << folded.status().ToString();
  EXPECT_TRUE(HasInput(m.graph, "rate"));  // the model is left as it was

  Model w = RateIf();
  Graph bad = Branch("bad", {MakeNode("b", "Relu", {"x"}, {"b_out"})}, {"b_out", "b_out"});
  w.graph.nodes[2].mutable_attr("then_branch")->subgraph = std::make_shared<const Graph>(bad);
  folded = FoldDecidedIfs(&w, {{"rate", Tensor::Scalar<int64_t>(16000)}});
  ASSERT_FALSE(folded.ok());
  EXPECT_NE(folded.status().message().find("then_branch has 2 outputs"), std::string::npos)
      << folded.status().ToString();
}

TEST(IfFolding, AModelWithoutIfIsUntouched) {
  Model m;
  m.opset_imports = {{"", 17}};
  m.graph.inputs = {Typed("x", DataType::kFloat32)};
  m.graph.nodes.push_back(MakeNode("r", "Relu", {"x"}, {"y"}));
  m.graph.outputs = {Typed("y", DataType::kFloat32)};
  auto folded = FoldDecidedIfs(&m, {{"x", Tensor::Scalar<float>(1.0f)}});
  ASSERT_TRUE(folded.ok());
  EXPECT_TRUE(folded->folded.empty());
  EXPECT_TRUE(HasInput(m.graph, "x"));
  EXPECT_TRUE(m.graph.initializers.empty());
}

}  // namespace
}  // namespace sparq
