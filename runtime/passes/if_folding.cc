#include "runtime/passes/if_folding.h"

#include <algorithm>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <utility>

#include "graph/graph_editor.h"
#include "graph/value_index.h"
#include "runtime/passes/graph_folding.h"

namespace sparq {
namespace {

bool IsIf(const Node& n) { return n.op_type == "If" && (n.domain.empty() || n.domain == "ai.onnx"); }

// `g` (a subgraph) with its reads of outer values renamed by `rename`; the
// names it defines itself are its own (ONNX forbids shadowing, so none of
// them is a renamed outer name) and stay. Nested subgraphs likewise.
Graph RenameOuterReads(const Graph& g, const std::map<std::string, std::string>& rename) {
  Graph out = g;
  auto apply = [&](std::string* name) {
    auto it = rename.find(*name);
    if (it != rename.end()) *name = it->second;
  };
  for (Node& n : out.nodes) {
    for (std::string& in : n.inputs) apply(&in);
    for (Attribute& a : n.attributes) {
      if (!a.subgraph) continue;
      a.subgraph = std::make_shared<const Graph>(RenameOuterReads(*a.subgraph, rename));
      a.raw.clear();  // saved from the rewritten body
    }
  }
  for (ValueInfo& v : out.outputs) apply(&v.name);
  return out;
}

// Whether `g` (or a subgraph below it) reads one of `names` from outside.
bool ReadsAny(const Graph& g, const std::map<std::string, std::string>& names) {
  for (const std::string& r : OuterScopeReads(g))
    if (names.count(r)) return true;
  return false;
}

const Graph* Branch(const Node& n, const char* name) {
  const Attribute* a = n.attr(name);
  return a != nullptr ? a->subgraph.get() : nullptr;
}

// Replaces the If at `index` of `g` by the nodes of `branch`.
Status InlineBranch(Graph& g, size_t index, const Graph& branch, const char* branch_name) {
  const Node node = g.nodes[index];
  const std::string where = node.Describe() + " " + branch_name;
  if (!branch.inputs.empty()) return Status::InvalidArgument(where + " has inputs (an If branch takes none)");
  if (branch.outputs.size() != node.outputs.size()) {
    return Status::InvalidArgument(where + " has " + std::to_string(branch.outputs.size()) +
                                   " outputs, the node " + std::to_string(node.outputs.size()));
  }
  g.nodes.erase(g.nodes.begin() + static_cast<std::ptrdiff_t>(index));  // its names are free from here on

  std::set<std::string> defined;  // by the branch's nodes (not its initializers)
  for (const Node& n : branch.nodes)
    for (const std::string& o : n.outputs)
      if (!o.empty()) defined.insert(o);

  // Branch outputs that a branch node computes are written under the If's
  // output names; the rest are copied by an Identity.
  std::map<std::string, std::string> rename;  // branch name -> outer name
  std::vector<std::pair<std::string, std::string>> copies;  // (If output, branch value)
  for (size_t k = 0; k < node.outputs.size(); ++k) {
    const std::string& out = node.outputs[k];
    const std::string& value = branch.outputs[k].name;
    if (out.empty()) continue;
    if (defined.count(value) && !rename.count(value)) {
      rename[value] = out;
    } else {
      copies.emplace_back(out, value);
    }
  }
  GraphEditor editor(g);
  for (const std::string& d : defined)
    if (!rename.count(d)) rename[d] = editor.FreshName(d);  // d itself when free
  for (const auto& kv : branch.initializers) rename[kv.first] = editor.FreshName(kv.first);
  auto renamed = [&](const std::string& name) {
    auto it = rename.find(name);
    return it == rename.end() ? name : it->second;
  };
  std::map<std::string, std::string> changed;  // only the names that differ, for nested reads
  for (const auto& [from, to] : rename)
    if (from != to) changed[from] = to;

  std::vector<Node> inlined;
  inlined.reserve(branch.nodes.size() + copies.size());
  for (const Node& bn : branch.nodes) {
    Node n = bn;
    if (!n.name.empty()) n.name = editor.FreshName(n.name);
    for (std::string& in : n.inputs)
      if (!in.empty()) in = renamed(in);
    for (std::string& o : n.outputs)
      if (!o.empty()) o = renamed(o);
    if (!changed.empty()) {
      for (Attribute& a : n.attributes) {
        if (!a.subgraph || !ReadsAny(*a.subgraph, changed)) continue;
        a.subgraph = std::make_shared<const Graph>(RenameOuterReads(*a.subgraph, changed));
        a.raw.clear();
      }
    }
    inlined.push_back(std::move(n));
  }
  for (const auto& [out, value] : copies) {
    Node id;
    id.name = editor.FreshName(out + "_identity");
    id.op_type = "Identity";
    id.inputs = {renamed(value)};
    id.outputs = {out};
    inlined.push_back(std::move(id));
  }
  for (const auto& kv : branch.initializers) g.initializers[renamed(kv.first)] = kv.second;

  // Shapes the branch knew, under their outer names (the graph's own entries win).
  std::set<std::string> known;
  for (const auto* list : {&g.inputs, &g.outputs, &g.value_info})
    for (const ValueInfo& v : *list) known.insert(v.name);
  for (const auto* list : {&branch.value_info, &branch.outputs}) {
    for (const ValueInfo& v : *list) {
      ValueInfo info = v;
      info.name = renamed(v.name);
      if (known.insert(info.name).second) g.value_info.push_back(std::move(info));
    }
  }
  for (size_t k = 0; k < node.outputs.size(); ++k) {
    if (node.outputs[k].empty() || !known.insert(node.outputs[k]).second) continue;
    ValueInfo info = branch.outputs[k];
    info.name = node.outputs[k];
    g.value_info.push_back(std::move(info));
  }
  g.nodes.insert(g.nodes.begin() + static_cast<std::ptrdiff_t>(index), std::make_move_iterator(inlined.begin()),
                 std::make_move_iterator(inlined.end()));
  return Status::OK();
}

// The values (graph inputs, initializers, node outputs) `value` is computed from (outer graph only:
// a decided condition never reads a node with subgraphs, FoldConstants does
// not fold those).
void Ancestors(const Graph& g, const ValueIndex& index, const std::string& value, std::set<std::string>* values) {
  std::vector<std::string> todo = {value};
  while (!todo.empty()) {
    const std::string v = todo.back();
    todo.pop_back();
    if (v.empty() || !values->insert(v).second) continue;
    std::optional<size_t> p = index.Producer(v);
    if (!p) continue;
    for (const std::string& in : g.nodes[*p].inputs) todo.push_back(in);
  }
}

}  // namespace

StatusOr<IfFoldReport> FoldDecidedIfs(Model* model, const TensorMap& pinned) {
  IfFoldReport report;
  if (std::none_of(model->graph.nodes.begin(), model->graph.nodes.end(), IsIf)) return report;

  Model work = *model;  // shares the weights; committed only when an If folds
  Graph& g = work.graph;
  std::set<std::string> overridable;
  for (const ValueInfo& v : g.initializer_inputs) overridable.insert(v.name);
  std::vector<ValueInfo> inputs;  // the graph's inputs less the pinned ones, in order
  std::set<std::string> pinned_here;
  for (const ValueInfo& v : g.inputs) {
    auto it = pinned.find(v.name);
    if (it == pinned.end()) {
      inputs.push_back(v);
    } else {
      g.initializers[v.name] = it->second;
      pinned_here.insert(v.name);
    }
  }
  g.inputs = inputs;

  std::set<std::string> read_pins;         // pinned inputs a folded condition read
  std::set<std::string> condition_values;  // the values a folded condition was computed from
  // Each round folds the decided Ifs of the outer graph; nested ones that
  // became outer nodes are decided in the next. A branch holds fewer Ifs than
  // the graph it sits in, so the rounds end; the bound guards a bug.
  for (int round = 0; round < 1000; ++round) {
    if (std::none_of(g.nodes.begin(), g.nodes.end(), IsIf)) break;
    Model probe = work;
    if (StatusOr<std::vector<std::string>> f = FoldConstants(&probe); !f.ok())
      return f.status().WithContext("folding If nodes decided by constants");
    const ValueIndex index(g);
    std::vector<std::pair<size_t, bool>> decided;  // (node index, condition)
    for (size_t i = 0; i < g.nodes.size(); ++i) {
      const Node& n = g.nodes[i];
      if (!IsIf(n) || n.inputs.empty() || overridable.count(n.inputs[0])) continue;
      auto it = probe.graph.initializers.find(n.inputs[0]);
      if (it == probe.graph.initializers.end()) continue;
      const Tensor& c = it->second;
      if (c.dtype() != DataType::kBool || c.numel() != 1) {
        return Status::InvalidArgument(n.Describe() + ": condition '" + n.inputs[0] + "' is " +
                                       DataTypeName(c.dtype()) + " with " + std::to_string(c.numel()) +
                                       " element(s); If needs one bool");
      }
      decided.emplace_back(i, c.data<bool>()[0]);
      std::set<std::string> values;
      Ancestors(g, index, n.inputs[0], &values);
      for (const std::string& v : values) {
        if (pinned_here.count(v)) read_pins.insert(v);
        condition_values.insert(v);
      }
    }
    if (decided.empty()) break;
    // From the back, so that the indices before each one stay valid.
    for (auto it = decided.rbegin(); it != decided.rend(); ++it) {
      const Node& n = g.nodes[it->first];
      const char* name = it->second ? "then_branch" : "else_branch";
      const Graph* branch = Branch(n, name);
      if (branch == nullptr) return Status::InvalidArgument(n.Describe() + " has no " + name + " graph");
      FoldedIf f;
      f.node = n.Describe();
      f.condition = n.inputs[0];
      f.taken = it->second;
      f.nodes = static_cast<int64_t>(branch->nodes.size());
      const Graph taken = *branch;  // the node goes away with its attributes
      SPARQ_RETURN_IF_ERROR(InlineBranch(g, it->first, taken, name));
      report.folded.push_back(std::move(f));
    }
    std::reverse(report.folded.end() - static_cast<std::ptrdiff_t>(decided.size()), report.folded.end());
  }
  if (report.folded.empty()) return report;  // *model untouched

  // The nodes that computed the conditions, now unread (others may still read
  // them, and nodes dead in the file as loaded are not this pass's to remove).
  // A node goes when every output of it was on a condition's way and none is read.
  for (bool removed = true; removed;) {
    removed = false;
    const std::set<std::string> read = ValuesRead(g);
    for (size_t i = g.nodes.size(); i-- > 0;) {
      const Node& n = g.nodes[i];
      if (n.HasSubgraphs()) continue;
      bool live = n.outputs.empty();
      for (const std::string& o : n.outputs) live |= !o.empty() && (read.count(o) > 0 || !condition_values.count(o));
      if (live) continue;
      g.nodes.erase(g.nodes.begin() + static_cast<std::ptrdiff_t>(i));
      removed = true;
    }
  }
  // Pinned inputs no folded condition read are inputs again; the others stay
  // constants while something reads them.
  const std::set<std::string> read = ValuesRead(g);
  std::vector<ValueInfo> restored;
  for (const ValueInfo& v : model->graph.inputs) {
    if (!pinned_here.count(v.name) || !read_pins.count(v.name)) {
      restored.push_back(v);
      if (pinned_here.count(v.name)) g.initializers.erase(v.name);
    } else {
      report.inputs_removed.push_back(v.name);
      if (!read.count(v.name)) g.initializers.erase(v.name);
    }
  }
  g.inputs = std::move(restored);
  for (auto it = g.initializers.begin(); it != g.initializers.end();) {
    const bool unread_condition_constant =
        condition_values.count(it->first) && !read.count(it->first) && !overridable.count(it->first);
    it = unread_condition_constant ? g.initializers.erase(it) : std::next(it);
  }
  SPARQ_RETURN_IF_ERROR(g.TopoSort().WithContext("folding If nodes decided by constants"));
  *model = std::move(work);
  return report;
}

}  // namespace sparq
