#include "graph/value_index.h"

#include <gtest/gtest.h>

#include "graph/graph_editor.h"

namespace sparq {
namespace {

// x -> Relu(a) -> Add(a, a) = b -> [graph output b], Mul(b, w) = c -> output c
Graph SmallGraph() {
  Graph g;
  g.inputs.push_back({"x", DataType::kFloat32});
  g.initializers["w"] = Tensor::Scalar<float>(2.0f);
  g.nodes.push_back({"relu", "Relu", "", {"x"}, {"a"}, {}, ""});
  g.nodes.push_back({"add", "Add", "", {"a", "a"}, {"b"}, {}, ""});
  g.nodes.push_back({"mul", "Mul", "", {"b", "w", ""}, {"c"}, {}, ""});
  g.outputs.push_back({"b", DataType::kFloat32});
  g.outputs.push_back({"c", DataType::kFloat32});
  return g;
}

TEST(ValueIndex, ProducersAndReaders) {
  const Graph g = SmallGraph();
  const ValueIndex index(g);
  EXPECT_EQ(index.Producer("a"), std::optional<size_t>(0));
  EXPECT_EQ(index.Producer("c"), std::optional<size_t>(2));
  EXPECT_FALSE(index.Producer("x"));  // a graph input
  EXPECT_FALSE(index.Producer("w"));  // an initializer
  EXPECT_FALSE(index.Producer(""));
  EXPECT_EQ(index.ProducerNode("b"), &g.nodes[1]);
  EXPECT_EQ(index.ProducerNode("nothing"), nullptr);

  EXPECT_EQ(index.Readers("a"), (std::vector<size_t>{1, 1}));  // one entry per input slot
  EXPECT_EQ(index.Readers("w"), (std::vector<size_t>{2}));
  EXPECT_TRUE(index.Readers("c").empty());
  EXPECT_TRUE(index.Readers("").empty());  // absent optional inputs are no value
}

TEST(ValueIndex, GraphOutputsCountAsReaders) {
  const Graph g = SmallGraph();
  const ValueIndex index(g);
  EXPECT_TRUE(index.IsGraphOutput("b"));
  EXPECT_FALSE(index.IsGraphOutput("a"));
  EXPECT_EQ(index.ReadCount("b"), 2);  // Mul, and the graph output
  EXPECT_EQ(index.ReadCount("c"), 1);
  EXPECT_EQ(index.ReadCount("a"), 2);
  for (const char* v : {"a", "b", "c", "w", "x"}) EXPECT_EQ(CountReaders(g, v), index.ReadCount(v)) << v;
}

TEST(GraphEditor, FreshNamesAvoidEveryNameInUse) {
  Graph g = SmallGraph();
  GraphEditor ed(g);
  EXPECT_EQ(ed.FreshName("y"), "y");
  EXPECT_EQ(ed.FreshName("y"), "y_1");  // a name handed out counts as used
  EXPECT_EQ(ed.FreshName("a"), "a_1");     // a node output
  EXPECT_EQ(ed.FreshName("w"), "w_1");     // an initializer
  EXPECT_EQ(ed.FreshName("x"), "x_1");     // a graph input
  EXPECT_EQ(ed.FreshName("relu"), "relu_1");  // a node name
  g.initializers["z_1"] = Tensor::Scalar<float>(0.0f);
  EXPECT_EQ(GraphEditor(g).FreshName("z"), "z");
  g.initializers["z"] = Tensor::Scalar<float>(0.0f);
  EXPECT_EQ(GraphEditor(g).FreshName("z"), "z_2");
  const std::string init = ed.AddInitializer("w", Tensor::Scalar<float>(1.0f));
  EXPECT_EQ(init, "w_2");
  EXPECT_EQ(g.initializers.count("w_2"), 1u);
}

TEST(GraphEditor, ConsumersSeeEditsAsTheyHappen) {
  Graph g = SmallGraph();
  GraphEditor ed(g);
  EXPECT_EQ(ed.Consumers("a"), (std::vector<size_t>{1}));  // each node once
  EXPECT_TRUE(ed.IsGraphOutput("c"));
  ed.RewireConsumers("a", "x");
  EXPECT_TRUE(ed.Consumers("a").empty());
  EXPECT_EQ(ed.Consumers("x"), (std::vector<size_t>{0, 1}));
}

}  // namespace
}  // namespace sparq
