#include "runtime/passes/dynamic_fusion.h"

#include <functional>
#include <optional>
#include <set>

#include "graph/value_index.h"
#include "kernels/registry.h"
#include "runtime/passes/rewrite_util.h"

namespace sparq {
namespace {

// What FuseDynamicMatMul and FuseDynamicConv read of the graph as it came
// (the fused nodes replace in place, so one index serves the whole pass).
class DynamicGraph {
 public:
  explicit DynamicGraph(Graph& g) : g_(g), index_(g) {
    for (const auto& v : g.initializer_inputs) overridable_.insert(v.name);
  }

  Graph& graph() { return g_; }
  const Graph& graph() const { return g_; }
  // A constant initializer a caller cannot override, or null.
  const Tensor* Constant(const std::string& name) const {
    if (name.empty() || overridable_.count(name)) return nullptr;
    auto it = g_.initializers.find(name);
    return it == g_.initializers.end() ? nullptr : &it->second;
  }
  // The only reader of `value` (which is no graph output), or -1.
  long SoleReader(const std::string& value) const {
    const std::vector<size_t>& readers = index_.Readers(value);
    if (index_.IsGraphOutput(value) || readers.size() != 1) return -1;
    return static_cast<long>(readers[0]);
  }
  bool Is(long i, const char* op) const {
    return i >= 0 && g_.nodes[static_cast<size_t>(i)].op_type == op && g_.nodes[static_cast<size_t>(i)].domain.empty();
  }
  const ValueIndex& index() const { return index_; }

 private:
  Graph& g_;
  const ValueIndex index_;
  std::set<std::string> overridable_;
};

// onnxruntime's dynamic float epilogue after an integer product `acc`:
//   acc ─Cast(float)─> accf ─┐
//   DynamicQuantizeLinear(..)[1] = x_scale ─Mul(w_scale)─> s ── Mul ─> y [─ Add(bias) ─> z]
// w_scale and bias constants that `scale_ok` / `bias_ok` accept.
struct DynamicEpilogue {
  size_t cast = 0, mul = 0;
  std::optional<size_t> scale_mul;  // s's producer, when the pattern alone reads s
  std::optional<size_t> add;        // the bias Add, when it joins
  std::string x_scale, w_scale, bias;
  std::string name;                 // the final Mul's
  std::vector<std::string> outputs; // y, or z with the bias
};

std::optional<DynamicEpilogue> MatchDynamicEpilogue(const DynamicGraph& d, const std::string& acc,
                                                    const std::function<bool(const Tensor&)>& scale_ok,
                                                    const std::function<bool(const Tensor&)>& bias_ok) {
  const Graph& g = d.graph();
  const ValueIndex& index = d.index();
  DynamicEpilogue e;
  const long cast_i = d.SoleReader(acc);
  if (!d.Is(cast_i, "Cast") || g.nodes[cast_i].attr_int("to", 0) != 1) return std::nullopt;
  const long mul_i = d.SoleReader(g.nodes[cast_i].outputs[0]);
  if (!d.Is(mul_i, "Mul") || g.nodes[mul_i].inputs.size() != 2) return std::nullopt;
  const Node& mul = g.nodes[mul_i];
  const std::string& s = mul.inputs[0] == g.nodes[cast_i].outputs[0] ? mul.inputs[1] : mul.inputs[0];
  const std::optional<size_t> sp = index.Producer(s);
  if (!sp || index.IsGraphOutput(s) || !d.Is(static_cast<long>(*sp), "Mul") || g.nodes[*sp].inputs.size() != 2) {
    return std::nullopt;
  }
  const Node& scale_mul = g.nodes[*sp];
  // One input of the scale product is the constant w_scale, the other x's dynamic scale.
  int w = -1;
  for (int k = 0; k < 2; ++k) {
    const Tensor* t = d.Constant(scale_mul.inputs[k]);
    if (t != nullptr && scale_ok(*t)) w = k;
  }
  if (w < 0) return std::nullopt;
  e.x_scale = scale_mul.inputs[1 - w];
  e.w_scale = scale_mul.inputs[w];
  const std::optional<size_t> xp = index.Producer(e.x_scale);
  if (!xp || !d.Is(static_cast<long>(*xp), "DynamicQuantizeLinear") || g.nodes[*xp].outputs.size() < 2 ||
      g.nodes[*xp].outputs[1] != e.x_scale) {
    return std::nullopt;
  }
  e.cast = static_cast<size_t>(cast_i);
  e.mul = static_cast<size_t>(mul_i);
  if (d.SoleReader(s) == mul_i) e.scale_mul = *sp;
  e.name = mul.name;
  e.outputs = {mul.outputs[0]};
  const long add_i = d.SoleReader(mul.outputs[0]);
  if (d.Is(add_i, "Add") && g.nodes[add_i].inputs.size() == 2 && g.nodes[add_i].outputs.size() == 1) {
    const Node& add = g.nodes[add_i];
    const std::string& bias = add.inputs[0] == mul.outputs[0] ? add.inputs[1] : add.inputs[0];
    const Tensor* t = d.Constant(bias);
    if (bias != mul.outputs[0] && t != nullptr && bias_ok(*t)) {
      e.bias = bias;
      e.add = static_cast<size_t>(add_i);
      e.outputs = add.outputs;
    }
  }
  return e;
}

// Puts `fused` (built from `op`'s inputs and e) in place of op `i`, the
// epilogue's nodes into *removed.
void Replace(Graph& g, size_t i, Node fused, const DynamicEpilogue& e, std::set<size_t>* removed) {
  fused.inputs.push_back(e.x_scale);
  fused.inputs.push_back(e.w_scale);
  if (e.add) fused.inputs.push_back(e.bias);
  fused.outputs = e.outputs;
  removed->insert(e.cast);
  removed->insert(e.mul);
  if (e.scale_mul) removed->insert(*e.scale_mul);
  if (e.add) removed->insert(*e.add);
  g.nodes[i] = std::move(fused);
}

std::vector<std::string> Finish(Model* model, const std::set<size_t>& removed, std::vector<std::string> fused) {
  if (fused.empty()) return fused;
  EraseNodes(model->graph, removed);
  ImportSparqDomain(model);
  return fused;
}

// One value, or one per output channel of a rank-`rank` NCHW-like output:
// the dims (aligned right) all 1 but axis 1, which is m.
bool PerChannelOf(const Tensor& t, int64_t m, size_t rank) {
  if (t.dtype() != DataType::kFloat32 || t.rank() > rank) return false;
  if (t.numel() == 1) return true;
  const size_t lead = rank - t.rank();
  for (size_t d = 0; d < t.rank(); ++d)
    if (t.dim(d) != (lead + d == 1 ? m : 1)) return false;
  return true;
}

}  // namespace

std::vector<std::string> FuseDynamicMatMul(Model* model) {
  DynamicGraph d(model->graph);
  Graph& g = model->graph;
  std::vector<std::string> fused;
  std::set<size_t> removed;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& mm = g.nodes[i];
    if (!d.Is(static_cast<long>(i), "MatMulInteger") || mm.inputs.size() != 4 || mm.outputs.size() != 1) continue;
    const Tensor* b = d.Constant(mm.inputs[1]);
    if (b == nullptr || b->rank() != 2) continue;
    const int64_t n = b->dim(1);
    const std::optional<DynamicEpilogue> e = MatchDynamicEpilogue(
        d, mm.outputs[0],
        [n](const Tensor& t) {
          return t.dtype() == DataType::kFloat32 && (t.numel() == 1 || (t.rank() == 1 && t.dim(0) == n));
        },
        [n](const Tensor& t) { return t.dtype() == DataType::kFloat32 && t.rank() == 1 && t.dim(0) == n; });
    if (!e) continue;
    fused.push_back(e->name);
    Replace(g, i, Node{e->name, "MatMulIntegerToFloat", kSparqDomain, mm.inputs, {}, {}, ""}, *e, &removed);
  }
  return Finish(model, removed, std::move(fused));
}

std::vector<std::string> FuseDynamicConv(Model* model) {
  DynamicGraph d(model->graph);
  Graph& g = model->graph;
  std::vector<std::string> fused;
  std::set<size_t> removed;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& conv = g.nodes[i];
    if (!d.Is(static_cast<long>(i), "ConvInteger") || conv.inputs.size() < 2 || conv.inputs.size() > 4 ||
        conv.outputs.size() != 1) {
      continue;
    }
    const Tensor* w = d.Constant(conv.inputs[1]);
    if (w == nullptr || (w->rank() != 3 && w->rank() != 4)) continue;
    const int64_t m = w->dim(0);
    const size_t rank = w->rank();  // the output's
    auto per_channel = [m, rank](const Tensor& t) { return PerChannelOf(t, m, rank); };
    const std::optional<DynamicEpilogue> e = MatchDynamicEpilogue(d, conv.outputs[0], per_channel, per_channel);
    if (!e) continue;
    std::vector<std::string> inputs = conv.inputs;
    inputs.resize(4);
    fused.push_back(e->name);
    Replace(g, i, Node{e->name, "ConvIntegerToFloat", kSparqDomain, inputs, {}, conv.attributes, ""}, *e, &removed);
  }
  return Finish(model, removed, std::move(fused));
}

}  // namespace sparq
