// Who produces and who reads each value of a graph: sparq's one
// producer/consumer index.
//
// A snapshot by node index, taken when it is built: passes that collect
// their matches first and rewrite afterwards ("mark, then rewrite") query it
// freely while they mark; after nodes are added, removed or reordered, build
// a new one.
#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "sparq/graph.h"

namespace sparq {

class ValueIndex {
 public:
  // Indexes `g` (which must outlive the index only while Node() is used).
  explicit ValueIndex(const Graph& g);

  // Index of the node producing `value`; nullopt for graph inputs,
  // initializers, unknown names and "" (an absent optional value). When an
  // invalid graph produces a value twice, the later node.
  std::optional<size_t> Producer(const std::string& value) const;
  // The node producing `value`, or nullptr (as Producer).
  const Node* ProducerNode(const std::string& value) const;
  // Indices of the nodes reading `value`, in graph order, one entry per input
  // slot (a node reading it twice is listed twice), and once for a node whose
  // subgraphs read it (Node::ImplicitInputs); empty for "" and values nobody
  // reads.
  const std::vector<size_t>& Readers(const std::string& value) const;
  // True when `value` is one of the graph's outputs.
  bool IsGraphOutput(const std::string& value) const;
  // Readers(value).size(), plus 1 when it is a graph output: how many places
  // see the value (CountReaders, from the snapshot).
  int ReadCount(const std::string& value) const;

 private:
  const Graph& g_;
  std::map<std::string, size_t> producer_;
  std::map<std::string, std::vector<size_t>> readers_;
  std::set<std::string> graph_outputs_;
};

// Every value some node reads (its inputs and, for a node with subgraphs,
// its ImplicitInputs) or that is a graph output: what a rewrite that drops
// unread nodes or initializers must keep.
std::set<std::string> ValuesRead(const Graph& g);

// Whether `node` reads `value` (an input, or inside one of its subgraphs).
bool Reads(const Node& node, const std::string& value);

// Number of node input slots (all nodes) that read `value`, plus 1 per node
// whose subgraphs read it, plus 1 when it is
// a graph output; a scan of `g` as it is now, for graphs being edited.
int CountReaders(const Graph& g, const std::string& value);

}  // namespace sparq
