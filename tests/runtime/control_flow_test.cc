// Control flow in the executor (runtime/control_flow.h, kernels/ref/control_flow.cc):
// If / Loop / Scan subgraphs reading values of the graphs around them,
// nesting, zero trips, errors, and graph passes that leave outer values a
// subgraph reads in place.
#include <gtest/gtest.h>

#include <memory>

#include "graph/graph_editor.h"
#include "graph/value_index.h"
#include "sparq/executor.h"
#include "sparq/onnx_io.h"
#include "test_util.h"

namespace sparq {
namespace {

using testing::GraphAttr;
using testing::MakeNode;
using testing::Typed;

std::vector<float> Values(const Tensor& t) { return {t.data<float>(), t.data<float>() + t.numel()}; }

// y = If(c) then (h + w) else (h * h), where h = Relu(x) is a node output
// of the outer graph and w an outer initializer: both branches read outer
// values only.
Model IfOverOuterValues() {
  Model m;
  m.opset_imports = {{"", 17}};
  Graph then_g;
  then_g.name = "then";
  then_g.nodes.push_back(MakeNode("then_add", "Add", {"h", "w"}, {"t_out"}));
  then_g.outputs.push_back(Typed("t_out", DataType::kFloat32));
  Graph else_g;
  else_g.name = "else";
  else_g.nodes.push_back(MakeNode("else_mul", "Mul", {"h", "h"}, {"e_out"}));
  else_g.outputs.push_back(Typed("e_out", DataType::kFloat32));
  Graph& g = m.graph;
  g.inputs.push_back(Typed("x", DataType::kFloat32));
  g.inputs.push_back(Typed("c", DataType::kBool));
  g.initializers["w"] = Tensor::FromVector<float>({3}, {10, 20, 30});
  g.outputs.push_back(Typed("y", DataType::kFloat32));
  g.nodes.push_back(MakeNode("if", "If", {"c"}, {"y"},
                             {GraphAttr("then_branch", then_g), GraphAttr("else_branch", else_g)}));
  g.nodes.push_back(MakeNode("relu", "Relu", {"x"}, {"h"}));  // after its reader: TopoSort must see the capture
  return m;
}

TEST(ControlFlow, IfReadsOuterValues) {
  Model m = IfOverOuterValues();
  auto exec = Executor::Create(m, ExecutorOptions{1});
  ASSERT_TRUE(exec.ok()) << exec.status().ToString();
  Tensor x = Tensor::FromVector<float>({3}, {-1, 2, 3});
  TensorMap out;
  ASSERT_TRUE((*exec)->Run({{"x", x}, {"c", Tensor::Scalar<bool>(true)}}, &out).ok());
  EXPECT_EQ(Values(out.at("y")), (std::vector<float>{10, 22, 33}));
  ASSERT_TRUE((*exec)->Run({{"x", x}, {"c", Tensor::Scalar<bool>(false)}}, &out).ok());
  EXPECT_EQ(Values(out.at("y")), (std::vector<float>{0, 4, 9}));
}

TEST(ControlFlow, SubgraphsBuiltInMemorySaveAndLoad) {
  Model m = IfOverOuterValues();
  ASSERT_TRUE(m.graph.TopoSort().ok());
  StatusOr<std::string> bytes = SerializeModel(m);  // the branches have no raw bytes: written from the IR
  ASSERT_TRUE(bytes.ok()) << bytes.status().ToString();
  StatusOr<Model> loaded = LoadModelFromBytes(*bytes, "");
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  const Attribute* then_branch = loaded->graph.nodes[1].attr("then_branch");
  ASSERT_NE(then_branch, nullptr);
  ASSERT_NE(then_branch->subgraph, nullptr);
  EXPECT_FALSE(then_branch->raw.empty());
  auto exec = Executor::Create(*loaded, ExecutorOptions{1});
  ASSERT_TRUE(exec.ok()) << exec.status().ToString();
  TensorMap out;
  ASSERT_TRUE((*exec)->Run({{"x", Tensor::FromVector<float>({3}, {-1, 2, 3})}, {"c", Tensor::Scalar<bool>(true)}}, &out)
                  .ok());
  EXPECT_EQ(Values(out.at("y")), (std::vector<float>{10, 22, 33}));
}

TEST(ControlFlow, SubgraphReadsCountAsReads) {
  Model m = IfOverOuterValues();
  ASSERT_TRUE(m.graph.TopoSort().ok());
  EXPECT_EQ(m.graph.nodes[0].op_type, "Relu");  // the If reads h inside its branches
  EXPECT_EQ(m.graph.nodes[1].ImplicitInputs(), (std::vector<std::string>{"h", "w"}));
  ValueIndex index(m.graph);
  EXPECT_EQ(index.Readers("h").size(), 1u);
  EXPECT_EQ(CountReaders(m.graph, "w"), 1);
}

// The rewrite helpers of graph/: a value read only inside a subgraph is
// read (RemoveDeadNodes keeps its producer and initializer), the node is its
// consumer, and fresh names avoid the subgraphs' names.
TEST(ControlFlow, GraphEditingSeesSubgraphReads) {
  Model m = IfOverOuterValues();
  Graph& g = m.graph;
  g.initializers["unread"] = Tensor::Scalar<float>(1.0f);
  EXPECT_EQ(ValuesRead(g).count("w"), 1u);
  EXPECT_EQ(ValuesRead(g).count("h"), 1u);
  EXPECT_TRUE(Reads(g.nodes[0], "h"));
  EXPECT_EQ(RemoveDeadNodes(g), 0);
  EXPECT_EQ(g.nodes.size(), 2u);
  EXPECT_EQ(g.initializers.count("w"), 1u);
  EXPECT_EQ(g.initializers.count("unread"), 0u);
  GraphEditor ed(g);
  EXPECT_EQ(ed.Consumers("h"), (std::vector<size_t>{0}));
  EXPECT_EQ(ed.FreshName("t_out"), "t_out_1");  // t_out: a value of the then branch
}

// Loop(M, cond="", acc0) with body: i, cond_in, acc ->
//   cond_in, If(flag) then acc + x else acc - x, and a scan output of the new acc.
// The If inside the body reads `acc` (a body value) and `x` and `flag`
// (values of the outermost graph).
Model LoopWithNestedIf() {
  Model m;
  m.opset_imports = {{"", 17}};
  Graph then_g;
  then_g.nodes.push_back(MakeNode("plus", "Add", {"acc", "x"}, {"p"}));
  then_g.outputs.push_back(Typed("p", DataType::kFloat32));
  Graph else_g;
  else_g.nodes.push_back(MakeNode("minus", "Sub", {"acc", "x"}, {"q"}));
  else_g.outputs.push_back(Typed("q", DataType::kFloat32));
  Graph body;
  body.inputs = {Typed("i", DataType::kInt64), Typed("cond_in", DataType::kBool), Typed("acc", DataType::kFloat32)};
  body.nodes.push_back(MakeNode("cond_id", "Identity", {"cond_in"}, {"cond_out"}));
  body.nodes.push_back(MakeNode("inner_if", "If", {"flag"}, {"acc_next"},
                                {GraphAttr("then_branch", then_g), GraphAttr("else_branch", else_g)}));
  body.nodes.push_back(MakeNode("copy", "Identity", {"acc_next"}, {"acc_scan"}));
  body.outputs = {Typed("cond_out", DataType::kBool), Typed("acc_next", DataType::kFloat32),
                  Typed("acc_scan", DataType::kFloat32)};
  Graph& g = m.graph;
  g.inputs = {Typed("M", DataType::kInt64), Typed("flag", DataType::kBool), Typed("acc0", DataType::kFloat32),
              Typed("x", DataType::kFloat32)};
  g.outputs = {Typed("acc_final", DataType::kFloat32), Typed("accs", DataType::kFloat32)};
  g.nodes.push_back(MakeNode("loop", "Loop", {"M", "", "acc0"}, {"acc_final", "accs"}, {GraphAttr("body", body)}));
  return m;
}

TEST(ControlFlow, NestedIfInsideLoop) {
  auto exec = Executor::Create(LoopWithNestedIf(), ExecutorOptions{1});
  ASSERT_TRUE(exec.ok()) << exec.status().ToString();
  TensorMap in = {{"M", Tensor::Scalar<int64_t>(3)},
                  {"flag", Tensor::Scalar<bool>(true)},
                  {"acc0", Tensor::FromVector<float>({2}, {1, 2})},
                  {"x", Tensor::FromVector<float>({2}, {10, 100})}};
  TensorMap out;
  ASSERT_TRUE((*exec)->Run(in, &out).ok());
  EXPECT_EQ(Values(out.at("acc_final")), (std::vector<float>{31, 302}));
  EXPECT_EQ(out.at("accs").shape(), (Shape{3, 2}));
  EXPECT_EQ(Values(out.at("accs")), (std::vector<float>{11, 102, 21, 202, 31, 302}));
  in["flag"] = Tensor::Scalar<bool>(false);
  ASSERT_TRUE((*exec)->Run(in, &out).ok());
  EXPECT_EQ(Values(out.at("acc_final")), (std::vector<float>{-29, -298}));
}

TEST(ControlFlow, ZeroTripLoopGivesTheInitialValuesAndEmptyScans) {
  auto exec = Executor::Create(LoopWithNestedIf(), ExecutorOptions{1});
  ASSERT_TRUE(exec.ok()) << exec.status().ToString();
  TensorMap out;
  ASSERT_TRUE((*exec)
                  ->Run({{"M", Tensor::Scalar<int64_t>(0)},
                         {"flag", Tensor::Scalar<bool>(true)},
                         {"acc0", Tensor::FromVector<float>({2}, {1, 2})},
                         {"x", Tensor::FromVector<float>({2}, {10, 100})}},
                        &out)
                  .ok());
  EXPECT_EQ(Values(out.at("acc_final")), (std::vector<float>{1, 2}));
  EXPECT_EQ(out.at("accs").dtype(), DataType::kFloat32);
  EXPECT_EQ(out.at("accs").numel(), 0);
  EXPECT_EQ(out.at("accs").dim(0), 0);
}

TEST(ControlFlow, LoopWithoutTripCountOrConditionIsRefused) {
  Model m = LoopWithNestedIf();
  m.graph.nodes[0].inputs[0] = "";  // M absent, cond absent: it would never end
  auto exec = Executor::Create(m, ExecutorOptions{1});
  ASSERT_TRUE(exec.ok()) << exec.status().ToString();
  TensorMap out;
  Status st = (*exec)->Run({{"M", Tensor::Scalar<int64_t>(3)},
                            {"flag", Tensor::Scalar<bool>(true)},
                            {"acc0", Tensor::FromVector<float>({2}, {1, 2})},
                            {"x", Tensor::FromVector<float>({2}, {10, 100})}},
                           &out);
  EXPECT_EQ(st.code(), StatusCode::kNotSupported) << st.ToString();
  EXPECT_NE(st.message().find("'loop' (Loop)"), std::string::npos) << st.message();
}

TEST(ControlFlow, ScanOutputsThatChangeShapeAreAnError) {
  // Loop whose scan output is the carried value, which grows each trip.
  Model m;
  m.opset_imports = {{"", 17}};
  Graph body;
  body.inputs = {Typed("i", DataType::kInt64), Typed("cond_in", DataType::kBool), Typed("v", DataType::kFloat32)};
  body.nodes.push_back(MakeNode("cond_id", "Identity", {"cond_in"}, {"cond_out"}));
  body.nodes.push_back(MakeNode("grow", "Concat", {"v", "v"}, {"v_next"}, {Attribute::Int("axis", 0)}));
  body.outputs = {Typed("cond_out", DataType::kBool), Typed("v_next", DataType::kFloat32),
                  Typed("v_next", DataType::kFloat32)};
  Graph& g = m.graph;
  g.inputs = {Typed("M", DataType::kInt64), Typed("v0", DataType::kFloat32)};
  g.outputs = {Typed("v_final", DataType::kFloat32), Typed("vs", DataType::kFloat32)};
  g.nodes.push_back(MakeNode("grow_loop", "Loop", {"M", "", "v0"}, {"v_final", "vs"}, {GraphAttr("body", body)}));
  auto exec = Executor::Create(m, ExecutorOptions{1});
  ASSERT_TRUE(exec.ok()) << exec.status().ToString();
  TensorMap out;
  Status st = (*exec)->Run({{"M", Tensor::Scalar<int64_t>(3)}, {"v0", Tensor::FromVector<float>({1}, {1})}}, &out);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.ToString();
  EXPECT_NE(st.message().find("'grow_loop' (Loop): scan output 0 changes"), std::string::npos) << st.message();
  // Without the scan output the carried value may grow: 1 -> 2 -> 4 -> 8 values.
  body.outputs.pop_back();
  m.graph.nodes[0] = MakeNode("grow_loop", "Loop", {"M", "", "v0"}, {"v_final"}, {GraphAttr("body", body)});
  m.graph.outputs.pop_back();
  exec = Executor::Create(m, ExecutorOptions{1});
  ASSERT_TRUE(exec.ok()) << exec.status().ToString();
  ASSERT_TRUE((*exec)->Run({{"M", Tensor::Scalar<int64_t>(3)}, {"v0", Tensor::FromVector<float>({1}, {1})}}, &out).ok());
  EXPECT_EQ(out.at("v_final").shape(), (Shape{8}));
}

TEST(ControlFlow, SameBitsForAnyThreadCount) {
  Model m = LoopWithNestedIf();
  TensorMap in = {{"M", Tensor::Scalar<int64_t>(5)},
                  {"flag", Tensor::Scalar<bool>(false)},
                  {"acc0", testing::RandomFloats({64}, 11)},
                  {"x", testing::RandomFloats({64}, 12)}};
  TensorMap first;
  for (int threads : {1, 2, 4}) {
    auto exec = Executor::Create(m, ExecutorOptions{threads});
    ASSERT_TRUE(exec.ok()) << exec.status().ToString();
    TensorMap out;
    ASSERT_TRUE((*exec)->Run(in, &out).ok());
    if (first.empty()) first = out;
    for (const auto& [name, t] : first) EXPECT_TRUE(out.at(name).Equals(t)) << name << " at " << threads << " threads";
  }
}

TEST(ControlFlow, BranchWithTooManyOutputsIsAnErrorNamingTheNode) {
  Model m = IfOverOuterValues();
  Node& if_node = m.graph.nodes[0];
  Graph then_g = *if_node.attr("then_branch")->subgraph;
  then_g.outputs.push_back(Typed("h", DataType::kFloat32));  // two outputs, the node has one
  *if_node.mutable_attr("then_branch") = GraphAttr("then_branch", then_g);
  auto exec = Executor::Create(m, ExecutorOptions{1});
  ASSERT_TRUE(exec.ok()) << exec.status().ToString();
  TensorMap out;
  Status st = (*exec)->Run({{"x", Tensor::FromVector<float>({3}, {1, 2, 3})}, {"c", Tensor::Scalar<bool>(true)}}, &out);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("'if' (If)"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("then_branch has 2 outputs"), std::string::npos) << st.message();
}

TEST(ControlFlow, SubgraphReadingAnUnknownValueFailsAtCreate) {
  Model m = IfOverOuterValues();
  Graph else_g = *m.graph.nodes[0].attr("else_branch")->subgraph;
  else_g.nodes[0].inputs[1] = "nowhere";
  *m.graph.nodes[0].mutable_attr("else_branch") = GraphAttr("else_branch", else_g);
  auto exec = Executor::Create(m, ExecutorOptions{1});
  ASSERT_FALSE(exec.ok());
  EXPECT_NE(exec.status().message().find("nowhere"), std::string::npos) << exec.status().ToString();
}

TEST(ControlFlow, UnsupportedOperatorInsideASubgraphIsNamed) {
  Model m = IfOverOuterValues();
  Graph else_g = *m.graph.nodes[0].attr("else_branch")->subgraph;
  else_g.nodes[0].op_type = "NoSuchOp";
  *m.graph.nodes[0].mutable_attr("else_branch") = GraphAttr("else_branch", else_g);
  Status st = CheckSupported(m);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("NoSuchOp"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("subgraph 'else_branch'"), std::string::npos) << st.message();
}

// Every profile's passes (folding, fusions) run on a graph whose outer
// values are read only inside subgraphs: a Conv output that a Relu fusion
// would absorb, and a Constant -> Cast chain that folding turns into a weight
// (the Constant's output read only inside the If).
TEST(ControlFlow, GraphPassesKeepValuesThatSubgraphsRead) {
  Model m;
  m.opset_imports = {{"", 17}};
  Graph then_g;  // reads k_int, which folding would keep only as far as k needs it
  then_g.nodes.push_back(MakeNode("then_cast", "Cast", {"k_int"}, {"k_then"}, {Attribute::Int("to", 1)}));
  then_g.nodes.push_back(MakeNode("then_add", "Add", {"conv_out", "k_then"}, {"t_out"}));
  then_g.outputs.push_back(Typed("t_out", DataType::kFloat32));
  Graph else_g;
  else_g.nodes.push_back(MakeNode("else_id", "Identity", {"relu_out"}, {"e_out"}));
  else_g.outputs.push_back(Typed("e_out", DataType::kFloat32));
  Graph& g = m.graph;
  g.inputs.push_back(testing::FloatInput("x", {{1, ""}, {2, ""}, {4, ""}, {4, ""}}));
  g.inputs.push_back(Typed("c", DataType::kBool));
  g.initializers["W"] = testing::RandomFloats({2, 2, 1, 1}, 7);
  g.outputs.push_back(Typed("y", DataType::kFloat32));
  g.outputs.push_back(Typed("y2", DataType::kFloat32));
  Node constant = MakeNode("k_const", "Constant", {}, {"k_int"},
                           {Attribute::FromTensor("value", Tensor::FromVector<int32_t>({1}, {3}))});
  g.nodes.push_back(constant);
  g.nodes.push_back(MakeNode("k_cast", "Cast", {"k_int"}, {"k"}, {Attribute::Int("to", 1)}));
  g.nodes.push_back(MakeNode("conv", "Conv", {"x", "W"}, {"conv_out"}));
  g.nodes.push_back(MakeNode("relu", "Relu", {"conv_out"}, {"relu_out"}));
  g.nodes.push_back(MakeNode("if", "If", {"c"}, {"y"},
                             {GraphAttr("then_branch", then_g), GraphAttr("else_branch", else_g)}));
  g.nodes.push_back(MakeNode("outer_add", "Add", {"relu_out", "k"}, {"y2"}));
  Tensor x = testing::RandomFloats({1, 2, 4, 4}, 8);
  std::map<bool, Tensor> want;
  for (GraphProfile profile : {GraphProfile::kAsWritten, GraphProfile::kFoldedConstants, GraphProfile::kObserveKept,
                               GraphProfile::kDeployment}) {
    ExecutorOptions options{1};
    options.profile = profile;
    auto exec = Executor::Create(m, options);
    ASSERT_TRUE(exec.ok()) << GraphProfileName(profile) << ": " << exec.status().ToString();
    for (bool c : {true, false}) {
      TensorMap out;
      Status st = (*exec)->Run({{"x", x}, {"c", Tensor::Scalar<bool>(c)}}, &out);
      ASSERT_TRUE(st.ok()) << GraphProfileName(profile) << ": " << st.ToString();
      if (profile == GraphProfile::kAsWritten) want[c] = out.at("y");
      EXPECT_TRUE(out.at("y").Equals(want[c])) << GraphProfileName(profile) << " c=" << c;
    }
  }
}

// Scan: a running sum over axis 1 of x [2, 3] read backwards, the partial
// sums stacked forwards along axis 0, and a state of the sum.
TEST(ControlFlow, ScanAxesAndDirections) {
  Model m;
  m.opset_imports = {{"", 17}};
  Graph body;
  body.inputs = {Typed("s", DataType::kFloat32), Typed("xt", DataType::kFloat32)};
  body.nodes.push_back(MakeNode("sum", "Add", {"s", "xt"}, {"s_next"}));
  body.nodes.push_back(MakeNode("y", "Mul", {"s_next", "scale"}, {"yt"}));  // scale: an outer value
  body.outputs = {Typed("s_next", DataType::kFloat32), Typed("yt", DataType::kFloat32)};
  Graph& g = m.graph;
  g.inputs = {Typed("s0", DataType::kFloat32), Typed("x", DataType::kFloat32)};
  g.initializers["scale"] = Tensor::Scalar<float>(2.0f);
  g.outputs = {Typed("s_final", DataType::kFloat32), Typed("ys", DataType::kFloat32)};
  g.nodes.push_back(MakeNode("scan", "Scan", {"s0", "x"}, {"s_final", "ys"},
                             {GraphAttr("body", body), Attribute::Int("num_scan_inputs", 1),
                              Attribute::Ints("scan_input_axes", {1}), Attribute::Ints("scan_input_directions", {1}),
                              Attribute::Ints("scan_output_axes", {-1})}));
  auto exec = Executor::Create(m, ExecutorOptions{1});
  ASSERT_TRUE(exec.ok()) << exec.status().ToString();
  TensorMap out;
  ASSERT_TRUE((*exec)
                  ->Run({{"s0", Tensor::FromVector<float>({2}, {0, 0})},
                         {"x", Tensor::FromVector<float>({2, 3}, {1, 2, 3, 4, 5, 6})}},
                        &out)
                  .ok());
  EXPECT_EQ(Values(out.at("s_final")), (std::vector<float>{6, 15}));
  // t = 0 reads column 2, t = 1 column 1, t = 2 column 0; stacked along the last axis.
  ASSERT_EQ(out.at("ys").shape(), (Shape{2, 3}));
  EXPECT_EQ(Values(out.at("ys")), (std::vector<float>{6, 10, 12, 12, 22, 30}));
}

}  // namespace
}  // namespace sparq
