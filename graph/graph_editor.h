// Small helpers for graph rewrites: fresh names, consumers, constants.
//
// Rewrites follow "mark, then rewrite": passes first decide what to change,
// then edit through a GraphEditor, and finish with Graph::TopoSort().
#pragma once

#include <set>
#include <string>
#include <vector>

#include "sparq/graph.h"

namespace sparq {

class GraphEditor {
 public:
  // Takes note of every name `g` uses (inputs, outputs, initializers, node
  // names, node inputs and outputs); the editor must not outlive `g`.
  explicit GraphEditor(Graph& g);

  Graph& graph() { return g_; }
  // The name of a value or node not used yet in the graph: `base` itself, or
  // else `base_1`, `base_2`, ... (the first one free). The name counts as used
  // from then on. sparq's one fresh-name rule: every pass names what it adds
  // through it (a one-off: GraphEditor(g).FreshName(base)).
  std::string FreshName(const std::string& base);
  // Adds an initializer under a fresh name derived from `base`; returns the name.
  std::string AddInitializer(const std::string& base, Tensor t);
  // Appends a node (TopoSort() restores the order later).
  void AddNode(Node n);
  // Indices of the nodes reading `value` now, inside their subgraphs too
  // (each node once; a scan, so it sees the edits made so far; ValueIndex is
  // the snapshot for many queries).
  std::vector<size_t> Consumers(const std::string& value) const;
  // True when `value` is a graph output.
  bool IsGraphOutput(const std::string& value) const;
  // Makes every consumer of `from` read `to` instead (graph outputs unchanged),
  // except nodes whose index is in `skip`; subgraphs keep reading `from`
  // (their bodies are not rewritten), so `from` must stay computed.
  void RewireConsumers(const std::string& from, const std::string& to, const std::set<size_t>& skip = {});

 private:
  Graph& g_;
  std::set<std::string> used_;
};

// Removes nodes whose outputs nobody reads (and that are not graph outputs),
// repeatedly, then initializers nobody reads. Returns the number of nodes removed.
int RemoveDeadNodes(Graph& g);

// A scalar or 1-D float32 tensor.
Tensor FloatTensor(const std::vector<float>& v, bool scalar);

}  // namespace sparq
