// The graph IR (sparq/graph.h): attributes, nodes, value shapes, Graph's
// lookups and TopoSort.
//
// graph/ is the layer that every pass builds on (formats reads and writes the
// IR; runtime, quant and prune rewrite it):
//   graph.cc          the IR itself
//   graph_editor.h    GraphEditor: fresh names, added nodes and initializers
//   value_index.h     ValueIndex: who produces and who reads each value
//   weighted_layer.cc AsWeightedLayer (sparq/weighted_layer.h): a linear layer
//                     and its constant weight
//   name_pattern.h    NamePattern: layer names in options and recipes
#include "sparq/graph.h"

#include <queue>
#include <set>
#include <unordered_map>

namespace sparq {

namespace {
Attribute Make(std::string name, Attribute::Kind kind) {
  Attribute a;
  a.name = std::move(name);
  a.kind = kind;
  return a;
}
}  // namespace

Attribute Attribute::Int(std::string name, int64_t v) {
  Attribute a = Make(std::move(name), Kind::kInt);
  a.i = v;
  return a;
}
Attribute Attribute::Float(std::string name, float v) {
  Attribute a = Make(std::move(name), Kind::kFloat);
  a.f = v;
  return a;
}
Attribute Attribute::String(std::string name, std::string v) {
  Attribute a = Make(std::move(name), Kind::kString);
  a.s = std::move(v);
  return a;
}
Attribute Attribute::Ints(std::string name, std::vector<int64_t> v) {
  Attribute a = Make(std::move(name), Kind::kInts);
  a.ints = std::move(v);
  return a;
}
Attribute Attribute::Floats(std::string name, std::vector<float> v) {
  Attribute a = Make(std::move(name), Kind::kFloats);
  a.floats = std::move(v);
  return a;
}
Attribute Attribute::FromTensor(std::string name, Tensor v) {
  Attribute a = Make(std::move(name), Kind::kTensor);
  a.t = std::move(v);
  return a;
}

const Attribute* Node::attr(const std::string& name) const {
  for (const auto& a : attributes)
    if (a.name == name) return &a;
  return nullptr;
}

Attribute* Node::mutable_attr(const std::string& name) {
  for (auto& a : attributes)
    if (a.name == name) return &a;
  return nullptr;
}

int64_t Node::attr_int(const std::string& name, int64_t dflt) const {
  const Attribute* a = attr(name);
  return a != nullptr && a->kind == Attribute::Kind::kInt ? a->i : dflt;
}

float Node::attr_float(const std::string& name, float dflt) const {
  const Attribute* a = attr(name);
  if (a == nullptr) return dflt;
  if (a->kind == Attribute::Kind::kFloat) return a->f;
  if (a->kind == Attribute::Kind::kInt) return static_cast<float>(a->i);
  return dflt;
}

std::string Node::attr_string(const std::string& name, const std::string& dflt) const {
  const Attribute* a = attr(name);
  return a != nullptr && a->kind == Attribute::Kind::kString ? a->s : dflt;
}

std::vector<int64_t> Node::attr_ints(const std::string& name, std::vector<int64_t> dflt) const {
  const Attribute* a = attr(name);
  if (a == nullptr) return dflt;
  if (a->kind == Attribute::Kind::kInts) return a->ints;
  if (a->kind == Attribute::Kind::kInt) return {a->i};
  return dflt;
}

std::vector<float> Node::attr_floats(const std::string& name, std::vector<float> dflt) const {
  const Attribute* a = attr(name);
  if (a == nullptr) return dflt;
  if (a->kind == Attribute::Kind::kFloats) return a->floats;
  if (a->kind == Attribute::Kind::kFloat) return {a->f};
  return dflt;
}

std::string Node::Describe() const {
  std::string who = name.empty() ? (outputs.empty() ? std::string("<unnamed>") : "producing '" + outputs[0] + "'")
                                 : "'" + name + "'";
  return "node " + who + " (" + (domain.empty() ? "" : domain + ".") + op_type + ")";
}

Shape ValueInfo::StaticShape() const {
  Shape s;
  for (const Dim& d : dims) s.push_back(d.known() ? d.value : -1);
  return s;
}

std::string ValueInfo::Describe() const {
  std::string out = dtype != DataType::kUndefined ? DataTypeName(dtype)
                                                  : "onnx_type(" + std::to_string(onnx_elem_type) + ")";
  if (!is_tensor) return "non-tensor";
  if (!has_shape) return out + "[?]";
  out += "[";
  for (size_t i = 0; i < dims.size(); ++i) {
    if (i) out += ", ";
    out += dims[i].known() ? std::to_string(dims[i].value) : (dims[i].param.empty() ? "?" : dims[i].param);
  }
  return out + "]";
}

const Tensor* Graph::FindWeight(const std::string& name) const {
  auto it = initializers.find(name);
  if (it != initializers.end()) return &it->second;
  const Node* n = Producer(name);
  if (n != nullptr && n->op_type == "Constant" && n->domain.empty()) {
    const Attribute* a = n->attr("value");
    if (a != nullptr && a->kind == Attribute::Kind::kTensor) return &a->t;
  }
  return nullptr;
}

const Node* Graph::Producer(const std::string& value) const {
  for (const Node& n : nodes)
    for (const auto& o : n.outputs)
      if (o == value) return &n;
  return nullptr;
}

const ValueInfo* Graph::FindValueInfo(const std::string& value) const {
  for (const auto* list : {&inputs, &outputs, &value_info, &initializer_inputs})
    for (const auto& v : *list)
      if (v.name == value) return &v;
  return nullptr;
}

bool Node::HasSubgraphs() const {
  for (const auto& a : attributes)
    if (a.subgraph) return true;
  return false;
}

std::vector<std::string> Node::ImplicitInputs() const {
  std::vector<std::string> out;
  std::set<std::string> seen;
  for (const auto& a : attributes) {
    if (!a.subgraph) continue;
    for (auto& name : OuterScopeReads(*a.subgraph))
      if (seen.insert(name).second) out.push_back(std::move(name));
  }
  return out;
}

std::vector<std::string> OuterScopeReads(const Graph& g) {
  std::set<std::string> defined;
  for (const auto& v : g.inputs) defined.insert(v.name);
  for (const auto& v : g.initializer_inputs) defined.insert(v.name);
  for (const auto& kv : g.initializers) defined.insert(kv.first);
  for (const Node& n : g.nodes)
    for (const auto& o : n.outputs)
      if (!o.empty()) defined.insert(o);
  std::vector<std::string> reads;
  std::set<std::string> seen;
  auto read = [&](const std::string& name) {
    if (!name.empty() && !defined.count(name) && seen.insert(name).second) reads.push_back(name);
  };
  for (const Node& n : g.nodes) {
    for (const auto& in : n.inputs) read(in);
    if (n.HasSubgraphs())
      for (const auto& in : n.ImplicitInputs()) read(in);
  }
  for (const auto& v : g.outputs) read(v.name);
  return reads;
}

Status Graph::TopoSort(bool outer_scope) {
  // Kahn's algorithm, taking ready nodes in their original order so that an
  // already sorted graph keeps its order exactly.
  std::unordered_map<std::string, size_t> producer;
  for (size_t i = 0; i < nodes.size(); ++i)
    for (const auto& o : nodes[i].outputs)
      if (!o.empty()) {
        if (producer.count(o)) {
          return Status::InvalidArgument("value '" + o + "' is produced twice (by " +
                                         nodes[producer[o]].Describe() + " and " + nodes[i].Describe() + ")");
        }
        producer[o] = i;
      }
  std::set<std::string> available;
  for (const auto& v : inputs) available.insert(v.name);
  for (const auto& kv : initializers) available.insert(kv.first);
  std::vector<int> pending(nodes.size(), 0);
  std::vector<std::vector<size_t>> consumers(nodes.size());
  for (size_t i = 0; i < nodes.size(); ++i) {
    std::set<size_t> deps;
    std::vector<std::string> implicit;
    if (nodes[i].HasSubgraphs()) implicit = nodes[i].ImplicitInputs();
    for (const auto* list : {&nodes[i].inputs, &implicit}) {
      for (const auto& in : *list) {
        if (in.empty() || available.count(in)) continue;
        auto it = producer.find(in);
        if (it == producer.end() && outer_scope) continue;
        if (it == producer.end()) {
          return Status::InvalidArgument(nodes[i].Describe() + " reads '" + in +
                                         "', which is neither a graph input, an initializer nor a node output");
        }
        deps.insert(it->second);
      }
    }
    pending[i] = static_cast<int>(deps.size());
    for (size_t d : deps) consumers[d].push_back(i);
  }
  std::priority_queue<size_t, std::vector<size_t>, std::greater<size_t>> ready;
  for (size_t i = 0; i < nodes.size(); ++i)
    if (pending[i] == 0) ready.push(i);
  std::vector<size_t> order;
  order.reserve(nodes.size());
  while (!ready.empty()) {
    size_t i = ready.top();
    ready.pop();
    order.push_back(i);
    for (size_t c : consumers[i])
      if (--pending[c] == 0) ready.push(c);
  }
  if (order.size() != nodes.size()) return Status::InvalidArgument("graph has a cycle");
  std::vector<Node> sorted;
  sorted.reserve(nodes.size());
  for (size_t i : order) sorted.push_back(std::move(nodes[i]));
  nodes = std::move(sorted);
  return Status::OK();
}

int64_t Model::opset() const { return opset(""); }

int64_t Model::opset(const std::string& domain) const {
  const std::string want = domain == "ai.onnx" ? "" : domain;
  for (const auto& op : opset_imports)
    if (op.domain == want) return op.version;
  return 0;
}

}  // namespace sparq
