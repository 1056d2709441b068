// Layer inputs and their rescaling (quant/layer_inputs.h).
#include "quant/layer_inputs.h"

#include <algorithm>
#include <cmath>

#include "quant/passes.h"
#include "sparq/executor.h"

namespace sparq {

std::optional<InputLayer> AsInputLayer(const Graph& g, size_t i) {
  const Node& n = g.nodes[i];
  if (n.op_type != "MatMul" && n.op_type != "Gemm") return std::nullopt;
  std::optional<WeightedLayer> layer = QuantizableLayer(g, n);
  if (!layer) return std::nullopt;
  const bool k_is_rows = n.op_type == "MatMul" || n.attr_int("transB", 0) == 0;
  return InputLayer{i, layer->weight_shape[k_is_rows ? 0 : 1], k_is_rows};
}

std::vector<InputGroup> LayerInputGroups(const Graph& g) {
  std::vector<InputGroup> groups;
  std::map<std::string, size_t> at;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    std::optional<InputLayer> l = AsInputLayer(g, i);
    if (!l) continue;
    const std::string& x = g.nodes[i].inputs[0];
    auto it = at.find(x);
    if (it == at.end()) {
      at[x] = groups.size();
      groups.push_back({x, {*l}});
    } else {
      groups[it->second].second.push_back(*l);
    }
  }
  return groups;
}

namespace {

// Scales the K axis of a stored 2-D weight by f (rows of [K, N] or columns of [N, K]).
Tensor ScaleAlong(const Tensor& w, bool rows, const std::vector<float>& f) {
  Tensor out = w.ToFloat32().Clone();
  const int64_t r = out.dim(0), c = out.dim(1);
  float* p = out.data<float>();
  for (int64_t i = 0; i < r; ++i)
    for (int64_t j = 0; j < c; ++j) p[i * c + j] *= f[static_cast<size_t>(rows ? i : j)];
  return out;
}

Tensor ScaleVector(const Tensor& v, const std::vector<float>& f) {
  Tensor out = v.ToFloat32().Clone();
  for (int64_t i = 0; i < out.numel(); ++i) out.data<float>()[i] *= f[static_cast<size_t>(i)];
  return out;
}

bool IsConstVector(const Graph& g, const std::string& name, int64_t k) {
  const Tensor* t = name.empty() ? nullptr : g.FindWeight(name);
  return t != nullptr && t->dtype() == DataType::kFloat32 && t->numel() == k && t->rank() == 1;
}

// Points `slot` (a node input naming a weight) at a new initializer `t`;
// the old name goes into `replaced`.
void Replace(GraphEditor& ed, std::string& slot, Tensor t, const std::string& tag, std::set<std::string>* replaced) {
  replaced->insert(slot);
  slot = ed.AddInitializer(slot + "_" + tag, std::move(t));
}

// Folds x * f (f = 1/s) into the producer of x when exact; returns what it
// folded into, or "" when it cannot (the caller inserts a Mul).
std::string FoldIntoProducer(Graph& g, GraphEditor& ed, const std::string& x, const std::set<size_t>& group,
                             const std::vector<float>& f, const std::string& tag, std::set<std::string>* replaced) {
  if (ed.IsGraphOutput(x)) return "";
  for (size_t r : ed.Consumers(x))
    if (!group.count(r)) return "";
  const int64_t k = static_cast<int64_t>(f.size());
  size_t p = g.nodes.size();
  for (size_t i = 0; i < g.nodes.size(); ++i)
    if (!g.nodes[i].outputs.empty() && g.nodes[i].outputs[0] == x) p = i;
  if (p == g.nodes.size()) return "";
  Node& n = g.nodes[p];
  if (!n.domain.empty()) return "";
  if (n.op_type == "LayerNormalization" && n.attr_int("axis", -1) == -1 && n.inputs.size() >= 2 &&
      IsConstVector(g, n.inputs[1], k) && (n.inputs.size() < 3 || n.inputs[2].empty() || IsConstVector(g, n.inputs[2], k))) {
    // y = (x - mean) / std * gamma + beta: scaling gamma and beta scales y.
    Replace(ed, n.inputs[1], ScaleVector(*g.FindWeight(n.inputs[1]), f), tag, replaced);
    if (n.inputs.size() >= 3 && !n.inputs[2].empty())
      Replace(ed, n.inputs[2], ScaleVector(*g.FindWeight(n.inputs[2]), f), tag, replaced);
    return "LayerNormalization '" + NodeKey(n) + "'";
  }
  // A MatMul / Gemm producing x (its output columns are x's channels), with
  // its bias in the node (Gemm C) or in an Add that alone reads it.
  size_t layer_index = p;
  std::string bias_input;
  size_t bias_node = g.nodes.size();
  if (n.op_type == "Add" && n.inputs.size() == 2) {
    for (int b = 0; b < 2; ++b) {
      if (!IsConstVector(g, n.inputs[b], k)) continue;
      const std::string& other = n.inputs[1 - b];
      const std::vector<size_t> readers = ed.Consumers(other);
      if (readers.size() != 1 || ed.IsGraphOutput(other)) continue;
      for (size_t i = 0; i < g.nodes.size(); ++i)
        if (!g.nodes[i].outputs.empty() && g.nodes[i].outputs[0] == other) layer_index = i;
      bias_input = n.inputs[b];
      bias_node = p;
    }
    if (bias_node == g.nodes.size()) return "";
  }
  std::optional<InputLayer> l = AsInputLayer(g, layer_index);
  if (!l) return "";
  Node& m = g.nodes[layer_index];
  const Tensor* w = g.FindWeight(m.inputs[1]);
  const int64_t n_out = w->dim(l->k_is_rows ? 1 : 0);
  if (n_out != k) return "";
  const bool gemm_bias = m.op_type == "Gemm" && m.inputs.size() > 2 && !m.inputs[2].empty();
  if (gemm_bias && !IsConstVector(g, m.inputs[2], k)) return "";  // a broadcast C: leave it
  if (m.op_type == "Gemm" && (m.attr_float("alpha", 1.0f) != 1.0f)) return "";
  Replace(ed, m.inputs[1], ScaleAlong(*w, !l->k_is_rows, f), tag, replaced);
  if (gemm_bias) Replace(ed, m.inputs[2], ScaleVector(*g.FindWeight(m.inputs[2]), f), tag, replaced);
  if (bias_node != g.nodes.size()) {
    Node& a = g.nodes[bias_node];
    for (auto& in : a.inputs)
      if (in == bias_input) Replace(ed, in, ScaleVector(*g.FindWeight(bias_input), f), tag, replaced);
  }
  return m.op_type + " '" + NodeKey(m) + "'";
}


}  // namespace

Status ObserveLayerInputs(const Model& model, const BatchFn& batches, int threads, const std::string& what,
                          const ObserveInputFn& observe) {
  std::map<std::string, int64_t> channels;  // tensor -> K
  for (const auto& [x, layers] : LayerInputGroups(model.graph)) {
    for (const InputLayer& l : layers) {
      auto [it, fresh] = channels.emplace(x, l.k);
      if (!fresh && it->second != l.k) {
        return Status::InvalidArgument(what + ": '" + x + "' feeds layers of " + std::to_string(it->second) + " and " +
                                       std::to_string(l.k) + " input channels");
      }
    }
  }
  auto check = [&](const std::string& name, const Tensor& t) -> Status {
    auto c = channels.find(name);
    if (c == channels.end() || t.dtype() != DataType::kFloat32) return Status::OK();
    const int64_t k = c->second;
    if (t.rank() == 0 || t.dim(t.rank() - 1) != k) {
      return Status::InvalidArgument(what + ": tensor '" + name + "' has last axis " +
                                     (t.rank() ? std::to_string(t.dim(t.rank() - 1)) : std::string("(scalar)")) +
                                     ", its layer's weight " + std::to_string(k) + " input channels");
    }
    return observe(name, t, k);
  };
  if (channels.empty()) return Status::OK();
  return ForEachActivation(model, batches, threads, what, check);
}

Status ForEachActivation(const Model& model, const BatchFn& batches, int threads, const std::string& what,
                         const ObserveValueFn& observe) {
  ExecutorOptions eo;
  eo.threads = threads;
  SPARQ_ASSIGN_OR_RETURN(auto exec, Executor::Create(model, eo));
  RunOptions ro;
  ro.on_node_outputs = [&](const Node& n, const std::vector<Tensor>& outs) -> Status {
    for (size_t i = 0; i < outs.size() && i < n.outputs.size(); ++i)
      if (outs[i].defined()) SPARQ_RETURN_IF_ERROR(observe(n.outputs[i], outs[i]));
    return Status::OK();
  };
  int64_t index = 0;
  for (;; ++index) {
    TensorMap batch;
    SPARQ_ASSIGN_OR_RETURN(bool more, batches(&batch));
    if (!more) break;
    for (const auto& [name, t] : batch) SPARQ_RETURN_IF_ERROR(observe(name, t));
    TensorMap outputs;
    SPARQ_RETURN_IF_ERROR(exec->Run(batch, &outputs, ro).WithContext(what + ": batch " + std::to_string(index)));
  }
  if (index == 0) return Status::InvalidArgument(what + ": no calibration batch");
  return Status::OK();
}

Tensor InputLayerWeightKN(const Graph& g, const InputLayer& layer) {
  const Tensor w = g.FindWeight(g.nodes[layer.index].inputs[1])->ToFloat32();
  if (layer.k_is_rows) return w;
  const int64_t r = w.dim(0), c = w.dim(1);
  Tensor t(DataType::kFloat32, {c, r});
  for (int64_t i = 0; i < r; ++i)
    for (int64_t j = 0; j < c; ++j) t.data<float>()[j * r + i] = w.data<float>()[i * c + j];
  return t;
}

std::string ScaleLayerInput(Graph& g, GraphEditor& ed, const InputGroup& group, const std::vector<float>& s,
                            const std::string& tag, std::set<std::string>* replaced) {
  const auto& [x, layers] = group;
  const int64_t k = static_cast<int64_t>(s.size());
  std::vector<float> inv(s.size());
  for (size_t j = 0; j < s.size(); ++j) inv[j] = 1.0f / s[j];
  std::set<size_t> members;
  for (const InputLayer& l : layers) members.insert(l.index);
  for (const InputLayer& l : layers) {
    Node& n = g.nodes[l.index];
    Replace(ed, n.inputs[1], ScaleAlong(*g.FindWeight(n.inputs[1]), l.k_is_rows, s), tag, replaced);
  }
  std::string folded = FoldIntoProducer(g, ed, x, members, inv, tag, replaced);
  if (!folded.empty()) return folded;
  //   x ── Mul(x, 1/s) ── x_<tag> ── the scaled layers (other readers keep x)
  const std::string name = ed.FreshName(x + "_" + tag);
  Node mul{ed.FreshName(x + "_" + tag + "_mul"), "Mul", "",
           {x, ed.AddInitializer(x + "_" + tag + "_inv", Tensor::FromVector<float>({k}, inv))}, {name}, {}, ""};
  folded = "Mul '" + mul.name + "'";
  for (size_t i : members) g.nodes[i].inputs[0] = name;
  ed.AddNode(std::move(mul));
  return folded;
}

void DropUnread(Graph& g, const std::set<std::string>& replaced) {
  std::set<std::string> read;
  for (const Node& n : g.nodes) read.insert(n.inputs.begin(), n.inputs.end());
  for (const auto& o : g.outputs) read.insert(o.name);
  for (const auto& v : g.initializer_inputs) read.insert(v.name);
  for (const std::string& name : replaced)
    if (!read.count(name)) g.initializers.erase(name);
}

}  // namespace sparq
