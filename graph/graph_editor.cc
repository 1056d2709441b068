#include "graph/graph_editor.h"

#include "graph/value_index.h"

namespace sparq {

namespace {

// Every name `g` and its subgraphs use: a fresh name must shadow none (ONNX
// names are unique across a graph and the subgraphs below it).
void CollectNames(const Graph& g, std::set<std::string>* used) {
  for (const auto& v : g.inputs) used->insert(v.name);
  for (const auto& v : g.outputs) used->insert(v.name);
  for (const auto& kv : g.initializers) used->insert(kv.first);
  for (const Node& n : g.nodes) {
    if (!n.name.empty()) used->insert(n.name);
    for (const auto& s : n.inputs) used->insert(s);
    for (const auto& s : n.outputs) used->insert(s);
    for (const Attribute& a : n.attributes)
      if (a.subgraph) CollectNames(*a.subgraph, used);
  }
}

}  // namespace

GraphEditor::GraphEditor(Graph& g) : g_(g) { CollectNames(g, &used_); }

std::string GraphEditor::FreshName(const std::string& base) {
  std::string name = base;
  for (int i = 1; used_.count(name); ++i) name = base + "_" + std::to_string(i);
  used_.insert(name);
  return name;
}

std::string GraphEditor::AddInitializer(const std::string& base, Tensor t) {
  std::string name = FreshName(base);
  g_.initializers[name] = std::move(t);
  return name;
}

void GraphEditor::AddNode(Node n) {
  if (!n.name.empty()) used_.insert(n.name);
  for (const auto& s : n.outputs) used_.insert(s);
  g_.nodes.push_back(std::move(n));
}

std::vector<size_t> GraphEditor::Consumers(const std::string& value) const {
  std::vector<size_t> out;
  for (size_t i = 0; i < g_.nodes.size(); ++i)
    if (Reads(g_.nodes[i], value)) out.push_back(i);  // a subgraph's read included
  return out;
}

bool GraphEditor::IsGraphOutput(const std::string& value) const {
  for (const auto& v : g_.outputs)
    if (v.name == value) return true;
  return false;
}

void GraphEditor::RewireConsumers(const std::string& from, const std::string& to, const std::set<size_t>& skip) {
  for (size_t i = 0; i < g_.nodes.size(); ++i) {
    if (skip.count(i)) continue;
    for (auto& in : g_.nodes[i].inputs)
      if (in == from) in = to;
  }
}

int RemoveDeadNodes(Graph& g) {
  int removed = 0;
  for (bool changed = true; changed;) {
    changed = false;
    const std::set<std::string> read = ValuesRead(g);  // subgraphs' outer reads included
    std::vector<Node> kept;
    for (Node& n : g.nodes) {
      bool live = false;
      for (const auto& o : n.outputs) live |= !o.empty() && read.count(o) > 0;
      if (live) kept.push_back(std::move(n));
      else changed = true, ++removed;
    }
    g.nodes = std::move(kept);
  }
  std::set<std::string> read = ValuesRead(g);
  for (const auto& v : g.initializer_inputs) read.insert(v.name);
  for (auto it = g.initializers.begin(); it != g.initializers.end();)
    it = read.count(it->first) ? std::next(it) : g.initializers.erase(it);
  return removed;
}

Tensor FloatTensor(const std::vector<float>& v, bool scalar) {
  if (scalar) return Tensor::Scalar<float>(v.at(0));
  return Tensor::FromVector<float>({static_cast<int64_t>(v.size())}, v);
}

}  // namespace sparq
