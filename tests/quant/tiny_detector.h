// A detector-shaped model for the tests of what reads class scores (the
// fallback's ranking, the search's held-out score).
#pragma once

#include <algorithm>

#include "sparq/graph.h"
#include "test_util.h"

namespace sparq::testing {

// x[n,8] ─┬─ box_fc ─ Reshape [n,4,4] ───────────┐
//         └─ cls_fc ─ Sigmoid ─ Reshape [n,2,4] ─┴─ Concat ─ y[n,6,4]
// A detector's output: 4 box rows in pixels (box weights 50-100), 2
// class-score rows in (0, 1), 4 anchors.
inline Model TinyDetector() {
  Model m;
  m.opset_imports = {{"", 17}};
  Graph& g = m.graph;
  g.inputs.push_back(testing::FloatInput("x", {{-1, "n"}, {8, ""}}));
  g.outputs.push_back(testing::FloatInput("y", {{-1, "n"}, {6, ""}, {4, ""}}));
  g.initializers["wbox"] = testing::RandomFloats({8, 16}, 4, 50.0f, 100.0f);
  g.initializers["wcls"] = testing::RandomFloats({8, 8}, 5, -1.0f, 1.0f);
  Tensor box_shape(DataType::kInt64, {3}), cls_shape(DataType::kInt64, {3});
  const int64_t bs[] = {-1, 4, 4}, cs[] = {-1, 2, 4};
  std::copy(bs, bs + 3, box_shape.data<int64_t>());
  std::copy(cs, cs + 3, cls_shape.data<int64_t>());
  g.initializers["box_shape"] = box_shape;
  g.initializers["cls_shape"] = cls_shape;
  g.nodes.push_back({"box_fc", "MatMul", "", {"x", "wbox"}, {"hbox"}, {}, ""});
  g.nodes.push_back({"cls_fc", "MatMul", "", {"x", "wcls"}, {"hcls"}, {}, ""});
  g.nodes.push_back({"sig", "Sigmoid", "", {"hcls"}, {"pcls"}, {}, ""});
  g.nodes.push_back({"box_r", "Reshape", "", {"hbox", "box_shape"}, {"rbox"}, {}, ""});
  g.nodes.push_back({"cls_r", "Reshape", "", {"pcls", "cls_shape"}, {"rcls"}, {}, ""});
  Node concat{"cat", "Concat", "", {"rbox", "rcls"}, {"y"}, {}, ""};
  concat.attributes.push_back(Attribute::Int("axis", 1));
  g.nodes.push_back(concat);
  return m;
}

}  // namespace sparq::testing
