// Silero VAD's shape in miniature, for the tests of If folding in `sparq
// run`, `sparq calibrate` and `sparq quantize`:
//   y = If(sr == 16000) then MatMul(x, w16) else MatMul(x, w8); x [N, 4], sr an int64 scalar.
// With `second_rate`, the condition is sr == rate2 (another int64 scalar
// input), so pinning sr alone decides nothing.
#pragma once

#include <string>

#include "sparq/graph.h"
#include "test_util.h"

namespace sparq {
namespace testing {

inline ValueInfo Int64Scalar(const std::string& name) {
  ValueInfo v;
  v.name = name;
  v.dtype = DataType::kInt64;
  v.has_shape = true;
  return v;
}

inline Model RateModel(bool second_rate = false) {
  Model m;
  m.ir_version = 8;
  m.opset_imports = {{"", 17}};
  const Dim n{-1, "N"};
  auto branch = [&](const std::string& tag) {
    Graph b;
    b.name = tag;
    b.initializers["w" + tag] = RandomFloats({4, 3}, tag == "16" ? 5 : 6);
    b.nodes.push_back(MakeNode("mm" + tag, "MatMul", {"x", "w" + tag}, {"y" + tag}));
    b.outputs.push_back(FloatInput("y" + tag, {n, {3, ""}}));
    return b;
  };
  Graph& g = m.graph;
  g.name = "rate";
  g.inputs.push_back(FloatInput("x", {n, {4, ""}}));
  g.inputs.push_back(Int64Scalar("sr"));
  if (second_rate) g.inputs.push_back(Int64Scalar("rate2"));
  g.outputs.push_back(FloatInput("y", {n, {3, ""}}));
  g.initializers["k16"] = Tensor::Scalar<int64_t>(16000);
  g.nodes.push_back(MakeNode("eq", "Equal", {"sr", second_rate ? "rate2" : "k16"}, {"is16"}));
  Node node = MakeNode("if", "If", {"is16"}, {"y"});
  node.attributes = {GraphAttr("then_branch", branch("16")), GraphAttr("else_branch", branch("8"))};
  g.nodes.push_back(std::move(node));
  return m;
}

}  // namespace testing
}  // namespace sparq
