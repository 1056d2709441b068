#include "graph/value_index.h"

namespace sparq {

ValueIndex::ValueIndex(const Graph& g) : g_(g) {
  for (const auto& o : g.outputs) graph_outputs_.insert(o.name);
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    for (const auto& out : g.nodes[i].outputs)
      if (!out.empty()) producer_[out] = i;
    for (const auto& in : g.nodes[i].inputs)
      if (!in.empty()) readers_[in].push_back(i);
    if (g.nodes[i].HasSubgraphs())  // a value read inside a subgraph is read by its node
      for (const auto& in : g.nodes[i].ImplicitInputs()) readers_[in].push_back(i);
  }
}

std::optional<size_t> ValueIndex::Producer(const std::string& value) const {
  auto it = producer_.find(value);
  if (it == producer_.end()) return std::nullopt;
  return it->second;
}

const Node* ValueIndex::ProducerNode(const std::string& value) const {
  std::optional<size_t> i = Producer(value);
  return i ? &g_.nodes[*i] : nullptr;
}

const std::vector<size_t>& ValueIndex::Readers(const std::string& value) const {
  static const std::vector<size_t> kNone;
  auto it = readers_.find(value);
  return it == readers_.end() ? kNone : it->second;
}

bool ValueIndex::IsGraphOutput(const std::string& value) const { return graph_outputs_.count(value) > 0; }

int ValueIndex::ReadCount(const std::string& value) const {
  return static_cast<int>(Readers(value).size()) + (IsGraphOutput(value) ? 1 : 0);
}

std::set<std::string> ValuesRead(const Graph& g) {
  std::set<std::string> read;
  for (const auto& o : g.outputs) read.insert(o.name);
  for (const Node& n : g.nodes) {
    read.insert(n.inputs.begin(), n.inputs.end());
    if (n.HasSubgraphs())
      for (auto& in : n.ImplicitInputs()) read.insert(std::move(in));
  }
  return read;
}

bool Reads(const Node& node, const std::string& value) {
  for (const auto& in : node.inputs)
    if (in == value) return true;
  if (!node.HasSubgraphs()) return false;
  for (const auto& in : node.ImplicitInputs())
    if (in == value) return true;
  return false;
}

int CountReaders(const Graph& g, const std::string& value) {
  int n = 0;
  for (const Node& node : g.nodes) {
    for (const auto& in : node.inputs) n += in == value;
    if (node.HasSubgraphs())
      for (const auto& in : node.ImplicitInputs()) n += in == value;
  }
  for (const auto& o : g.outputs) n += o.name == value;
  return n;
}

}  // namespace sparq
