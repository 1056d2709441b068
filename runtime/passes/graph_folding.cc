#include "runtime/passes/graph_folding.h"

#include <algorithm>
#include <cstring>
#include <optional>
#include <set>
#include <utility>

#include "graph/value_index.h"
#include "sparq/executor.h"

namespace sparq {
namespace {

bool HasSubgraph(const Node& n) {
  for (const Attribute& a : n.attributes)
    if (a.kind == Attribute::Kind::kOpaque) return true;
  return false;
}

// QuantizeLinear of constants is folded (a weight that an exporter wrote in
// float, Constant -> QuantizeLinear -> DequantizeLinear: the folded integers
// are exactly the bytes QuantizeLinear computes, and QDQ fusion then sees a
// constant int8 weight); DequantizeLinear is not, QDQ fusion reads it, but
// a blocked one (opset 21's block_size: INT4 weight-only models) is, since no
// fusion takes it: its constant weight becomes float32 once, at prepare.
bool Foldable(const Node& n) {
  if (n.op_type == "DequantizeLinear" && n.domain.empty() && n.attr_int("block_size", 0) != 0) return true;
  static const std::set<std::string> kNever = {
      "DequantizeLinear", "DynamicQuantizeLinear", "RandomNormal", "RandomUniform", "RandomNormalLike",
      "RandomUniformLike", "Multinomial",          "Bernoulli",    "If",            "Loop",
      "Scan"};
  return n.domain.empty() && !kNever.count(n.op_type) && !HasSubgraph(n) && !n.outputs.empty();
}

std::set<std::string> Overridable(const Graph& g) {
  std::set<std::string> names;
  for (const ValueInfo& v : g.initializer_inputs) names.insert(v.name);
  return names;
}

}  // namespace

StatusOr<std::vector<std::string>> FoldConstants(Model* model) {
  Graph& g = model->graph;
  const std::set<std::string> overridable = Overridable(g);
  std::set<std::string> constant;
  for (const auto& kv : g.initializers)
    if (!overridable.count(kv.first)) constant.insert(kv.first);
  std::vector<size_t> folded;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& n = g.nodes[i];
    if (!Foldable(n)) continue;
    bool all = true;
    for (const std::string& in : n.inputs) all = all && (in.empty() || constant.count(in));
    if (!all) continue;
    folded.push_back(i);
    for (const std::string& out : n.outputs)
      if (!out.empty()) constant.insert(out);
  }
  std::vector<std::string> names;
  if (folded.empty()) return names;

  // The folded nodes as a model of their own, with the values that the rest
  // of the graph reads as outputs; run once on the reference kernels.
  std::set<size_t> folded_set(folded.begin(), folded.end());
  std::set<std::string> needed;  // folded values read by kept nodes or graph outputs
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    if (folded_set.count(i)) continue;
    for (const std::string& in : g.nodes[i].inputs) needed.insert(in);
    if (g.nodes[i].HasSubgraphs())  // values a subgraph reads are read by its node
      for (const std::string& in : g.nodes[i].ImplicitInputs()) needed.insert(in);
  }
  for (const ValueInfo& v : g.outputs) needed.insert(v.name);
  Model sub;
  sub.ir_version = model->ir_version;
  sub.opset_imports = model->opset_imports;
  std::set<std::string> sub_outputs;
  for (size_t i : folded) {
    const Node& n = g.nodes[i];
    sub.graph.nodes.push_back(n);
    for (const std::string& in : n.inputs)
      if (!in.empty() && g.initializers.count(in)) sub.graph.initializers[in] = g.initializers.at(in);
    for (const std::string& out : n.outputs)
      if (!out.empty() && needed.count(out) && sub_outputs.insert(out).second) {
        ValueInfo v;
        v.name = out;
        sub.graph.outputs.push_back(v);
      }
  }
  if (sub.graph.outputs.empty()) return names;  // nothing reads them: leave the graph as it is
  ExecutorOptions options;
  options.threads = 1;
  options.backend = "reference";
  StatusOr<std::unique_ptr<Executor>> exec = Executor::Create(sub, options);
  if (!exec.ok()) return exec.status().WithContext("folding constant subgraphs");
  TensorMap values;
  SPARQ_RETURN_IF_ERROR(exec.value()->Run({}, &values).WithContext("folding constant subgraphs"));
  for (const std::string& out : sub_outputs) g.initializers[out] = values.at(out);
  std::vector<Node> kept;
  kept.reserve(g.nodes.size() - folded.size());
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    if (folded_set.count(i)) {
      names.push_back(g.nodes[i].name);
    } else {
      kept.push_back(std::move(g.nodes[i]));
    }
  }
  g.nodes = std::move(kept);
  // Initializers that only the folded nodes read are dropped.
  const std::set<std::string> read = ValuesRead(g);
  for (auto it = g.initializers.begin(); it != g.initializers.end();) {
    if (!read.count(it->first) && !overridable.count(it->first)) it = g.initializers.erase(it);
    else ++it;
  }
  return names;
}

namespace {

// The integer values of a constant int64 tensor, or nullopt.
std::optional<std::vector<int64_t>> ConstantInts(const Graph& g, const std::set<std::string>& overridable,
                                                 const std::string& name) {
  if (overridable.count(name)) return std::nullopt;
  auto it = g.initializers.find(name);
  if (it == g.initializers.end() || it->second.dtype() != DataType::kInt64) return std::nullopt;
  const int64_t* p = it->second.data<int64_t>();
  return std::vector<int64_t>(p, p + it->second.numel());
}

// Whether the optional input `name` is absent or a constant of all-zero bytes
// (the pad value 0 of any type).
bool AbsentOrZero(const Graph& g, const std::set<std::string>& overridable, const std::string& name) {
  if (name.empty()) return true;
  if (overridable.count(name)) return false;
  auto it = g.initializers.find(name);
  if (it == g.initializers.end()) return false;
  const auto* bytes = static_cast<const unsigned char*>(it->second.raw_data());
  for (size_t i = 0; i < it->second.nbytes(); ++i)
    if (bytes[i] != 0) return false;
  return true;
}

// Whether two optional zero-point inputs hold the same constant (absent = 0 of uint8).
bool SameZeroPoint(const Graph& g, const std::set<std::string>& overridable, const Node& q, const Node& dq) {
  const std::string a = q.inputs.size() > 2 ? q.inputs[2] : "", b = dq.inputs.size() > 2 ? dq.inputs[2] : "";
  if (a.empty() || b.empty()) return a.empty() && b.empty();
  if (a == b) return !overridable.count(a) && g.initializers.count(a);
  if (overridable.count(a) || overridable.count(b)) return false;
  auto ta = g.initializers.find(a), tb = g.initializers.find(b);
  if (ta == g.initializers.end() || tb == g.initializers.end()) return false;
  const Tensor &x = ta->second, &y = tb->second;
  return x.dtype() == y.dtype() && x.numel() == 1 && y.numel() == 1 &&
         std::memcmp(x.raw_data(), y.raw_data(), x.nbytes()) == 0;
}

}  // namespace

std::vector<std::string> FoldPadsIntoConvs(Model* model, FoldableOutputs* foldable) {
  Graph& g = model->graph;
  const std::set<std::string> overridable = Overridable(g);
  const ValueIndex index(g);  // of the graph as it came: folded nodes are only marked until the end
  // The one node reading `value` (nullptr when none, several, or a graph output).
  auto only_reader = [&](const std::string& value) -> Node* {
    const std::vector<size_t>& readers = index.Readers(value);
    if (index.IsGraphOutput(value) || readers.size() != 1) return nullptr;
    return &g.nodes[readers[0]];
  };

  std::vector<std::string> folded;
  std::set<const Node*> removed;
  const int64_t opset = model->opset();
  for (Node& pad : g.nodes) {
    if (pad.op_type != "Pad" || !pad.domain.empty() || pad.outputs.size() != 1) continue;
    if (pad.attr_string("mode", "constant") != "constant") continue;
    std::optional<std::vector<int64_t>> pads;
    if (opset < 11) {
      if (pad.attr("value") != nullptr && pad.attr_float("value", 0.0f) != 0.0f) continue;
      pads = pad.attr_ints("pads");
    } else {
      if (pad.inputs.size() < 2 || pad.inputs.size() > 3) continue;  // opset 18's axes input: not folded
      if (!AbsentOrZero(g, overridable, pad.inputs.size() > 2 ? pad.inputs[2] : "")) continue;
      pads = ConstantInts(g, overridable, pad.inputs[1]);
    }
    if (!pads || pads->size() < 6 || pads->size() % 2 != 0) continue;
    const size_t rank = pads->size() / 2;
    bool ok = (*pads)[0] == 0 && (*pads)[1] == 0 && (*pads)[rank] == 0 && (*pads)[rank + 1] == 0;
    for (int64_t p : *pads) ok = ok && p >= 0;
    if (!ok) continue;

    // Pad -> Conv, or Pad -> Q -> DQ -> Conv. A foldable output (a kept value)
    // is rebuilt from the Pad's input, which must be computed or fed.
    const std::string& padded = pad.outputs[0];
    const bool aliased = foldable != nullptr && foldable->names.count(padded) > 0 && !pad.inputs[0].empty() &&
                         !g.initializers.count(pad.inputs[0]);
    Node* next = only_reader(padded);
    if (aliased && index.Readers(padded).size() == 1) next = &g.nodes[index.Readers(padded)[0]];
    Node* q = nullptr;
    if (next != nullptr && next->op_type == "QuantizeLinear" && next->domain.empty() && next->inputs[0] == pad.outputs[0]) {
      q = next;
      Node* dq = only_reader(q->outputs[0]);
      if (dq == nullptr || dq->op_type != "DequantizeLinear" || !dq->domain.empty() || q->attr("axis") != nullptr ||
          !SameZeroPoint(g, overridable, *q, *dq))
        continue;
      next = only_reader(dq->outputs[0]);
      if (next != nullptr && next->inputs[0] != dq->outputs[0]) continue;
    } else if (next != nullptr && next->inputs[0] != pad.outputs[0]) {
      continue;
    }
    if (next == nullptr || next->op_type != "Conv" || !next->domain.empty()) continue;
    Node& conv = *next;
    const std::string auto_pad = conv.attr_string("auto_pad", "NOTSET");
    if (auto_pad != "NOTSET" && auto_pad != "VALID") continue;
    const size_t spatial = rank - 2;
    std::vector<int64_t> conv_pads = conv.attr_ints("pads", std::vector<int64_t>(2 * spatial, 0));
    if (conv_pads.size() != 2 * spatial) continue;
    for (size_t d = 0; d < spatial; ++d) {
      conv_pads[d] += (*pads)[2 + d];
      conv_pads[spatial + d] += (*pads)[rank + 2 + d];
    }
    if (Attribute* a = conv.mutable_attr("auto_pad")) a->s = "NOTSET";
    if (Attribute* a = conv.mutable_attr("pads")) {
      a->ints = conv_pads;
    } else {
      conv.attributes.push_back(Attribute::Ints("pads", conv_pads));
    }
    // The Pad's reader now reads the Pad's input.
    Node& reader = q != nullptr ? *q : conv;
    reader.inputs[0] = pad.inputs[0];
    removed.insert(&pad);
    folded.push_back(pad.name);
    if (index.IsGraphOutput(padded)) {  // foldable: the input is kept in its place
      foldable->made.push_back(ValueAlias{padded, pad.inputs[0], *pads});
      std::vector<ValueInfo>& outputs = g.outputs;
      const bool input_kept = std::any_of(outputs.begin(), outputs.end(),
                                          [&](const ValueInfo& v) { return v.name == pad.inputs[0]; });
      for (auto it = outputs.begin(); it != outputs.end(); ++it) {
        if (it->name != padded) continue;
        if (input_kept) {
          outputs.erase(it);
        } else {
          *it = ValueInfo{};
          it->name = pad.inputs[0];
        }
        break;
      }
    }
  }
  if (removed.empty()) return folded;
  std::vector<Node> kept;
  for (Node& n : g.nodes)
    if (!removed.count(&n)) kept.push_back(std::move(n));
  g.nodes = std::move(kept);
  return folded;
}

}  // namespace sparq
