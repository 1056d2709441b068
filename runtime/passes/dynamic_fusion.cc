#include "runtime/passes/dynamic_fusion.h"

#include <optional>
#include <set>

#include "graph/value_index.h"
#include "kernels/registry.h"
#include "runtime/passes/rewrite_util.h"

namespace sparq {

std::vector<std::string> FuseDynamicMatMul(Model* model) {
  Graph& g = model->graph;
  const ValueIndex index(g);  // of the graph as it came: fused nodes replace in place
  std::set<std::string> overridable;
  for (const auto& v : g.initializer_inputs) overridable.insert(v.name);
  auto constant = [&](const std::string& name) -> const Tensor* {
    if (overridable.count(name)) return nullptr;
    auto it = g.initializers.find(name);
    return it == g.initializers.end() ? nullptr : &it->second;
  };
  // The only reader of `value` (which is no graph output), or -1.
  auto sole_reader = [&](const std::string& value) -> long {
    const std::vector<size_t>& readers = index.Readers(value);
    if (index.IsGraphOutput(value) || readers.size() != 1) return -1;
    return static_cast<long>(readers[0]);
  };
  auto is = [&](const Node& n, const char* op) { return n.op_type == op && n.domain.empty(); };

  std::vector<std::string> fused;
  std::set<size_t> removed;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& mm = g.nodes[i];
    if (!is(mm, "MatMulInteger") || mm.inputs.size() != 4 || mm.outputs.size() != 1) continue;
    const Tensor* b = constant(mm.inputs[1]);
    if (b == nullptr || b->rank() != 2) continue;
    const long cast_i = sole_reader(mm.outputs[0]);
    if (cast_i < 0 || !is(g.nodes[cast_i], "Cast") || g.nodes[cast_i].attr_int("to", 0) != 1) continue;
    const long mul_i = sole_reader(g.nodes[cast_i].outputs[0]);
    if (mul_i < 0 || !is(g.nodes[mul_i], "Mul") || g.nodes[mul_i].inputs.size() != 2) continue;
    const Node& mul = g.nodes[mul_i];
    const std::string& s = mul.inputs[0] == g.nodes[cast_i].outputs[0] ? mul.inputs[1] : mul.inputs[0];
    const std::optional<size_t> sp = index.Producer(s);
    if (!sp || index.IsGraphOutput(s)) continue;
    const Node& scale_mul = g.nodes[*sp];
    if (!is(scale_mul, "Mul") || scale_mul.inputs.size() != 2) continue;
    // One input of the scale product is a constant B_scale, the other A's dynamic scale.
    int w = -1;
    for (int k = 0; k < 2; ++k) {
      const Tensor* t = constant(scale_mul.inputs[k]);
      if (t != nullptr && t->dtype() == DataType::kFloat32 && (t->numel() == 1 || (t->rank() == 1 && t->dim(0) == b->dim(1))))
        w = k;
    }
    if (w < 0) continue;
    const std::string& a_scale = scale_mul.inputs[1 - w];
    const std::optional<size_t> ap = index.Producer(a_scale);
    if (!ap || !is(g.nodes[*ap], "DynamicQuantizeLinear") || g.nodes[*ap].outputs.size() < 2 ||
        g.nodes[*ap].outputs[1] != a_scale) {
      continue;
    }
    Node f{mul.name, "MatMulIntegerToFloat", kSparqDomain,
           {mm.inputs[0], mm.inputs[1], mm.inputs[2], mm.inputs[3], a_scale, scale_mul.inputs[w]},
           {mul.outputs[0]}, {}, ""};
    // A bias Add after the product (onnxruntime's quantize_dynamic keeps the
    // float bias): a constant float32 [N] on either side.
    const long add_i = sole_reader(mul.outputs[0]);
    if (add_i >= 0 && is(g.nodes[add_i], "Add") && g.nodes[add_i].inputs.size() == 2 &&
        g.nodes[add_i].outputs.size() == 1) {
      const Node& add = g.nodes[add_i];
      const std::string& bias = add.inputs[0] == mul.outputs[0] ? add.inputs[1] : add.inputs[0];
      const Tensor* t = constant(bias);
      if (bias != mul.outputs[0] && t != nullptr && t->dtype() == DataType::kFloat32 && t->rank() == 1 &&
          t->dim(0) == b->dim(1)) {
        f.inputs.push_back(bias);
        f.outputs = add.outputs;
        removed.insert(static_cast<size_t>(add_i));
      }
    }
    removed.insert(static_cast<size_t>(cast_i));
    removed.insert(static_cast<size_t>(mul_i));
    if (sole_reader(s) == mul_i) removed.insert(*sp);
    fused.push_back(mul.name);
    g.nodes[i] = std::move(f);
  }
  if (fused.empty()) return fused;
  EraseNodes(g, removed);
  ImportSparqDomain(model);
  return fused;
}

namespace {

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

std::vector<std::string> FuseDynamicConv(Model* model) {
  Graph& g = model->graph;
  const ValueIndex index(g);  // of the graph as it came: fused nodes replace in place
  std::set<std::string> overridable;
  for (const auto& v : g.initializer_inputs) overridable.insert(v.name);
  auto constant = [&](const std::string& name) -> const Tensor* {
    if (name.empty() || overridable.count(name)) return nullptr;
    auto it = g.initializers.find(name);
    return it == g.initializers.end() ? nullptr : &it->second;
  };
  auto sole_reader = [&](const std::string& value) -> long {
    const std::vector<size_t>& readers = index.Readers(value);
    if (index.IsGraphOutput(value) || readers.size() != 1) return -1;
    return static_cast<long>(readers[0]);
  };
  auto is = [&](const Node& n, const char* op) { return n.op_type == op && n.domain.empty(); };

  std::vector<std::string> fused;
  std::set<size_t> removed;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& conv = g.nodes[i];
    if (!is(conv, "ConvInteger") || conv.inputs.size() < 2 || conv.inputs.size() > 4 || conv.outputs.size() != 1)
      continue;
    const Tensor* w = constant(conv.inputs[1]);
    if (w == nullptr || (w->rank() != 3 && w->rank() != 4)) continue;
    const int64_t m = w->dim(0);
    const size_t rank = w->rank();  // the output's
    const long cast_i = sole_reader(conv.outputs[0]);
    if (cast_i < 0 || !is(g.nodes[cast_i], "Cast") || g.nodes[cast_i].attr_int("to", 0) != 1) continue;
    const long mul_i = sole_reader(g.nodes[cast_i].outputs[0]);
    if (mul_i < 0 || !is(g.nodes[mul_i], "Mul") || g.nodes[mul_i].inputs.size() != 2) continue;
    const Node& mul = g.nodes[mul_i];
    const std::string& s = mul.inputs[0] == g.nodes[cast_i].outputs[0] ? mul.inputs[1] : mul.inputs[0];
    const std::optional<size_t> sp = index.Producer(s);
    if (!sp || index.IsGraphOutput(s)) continue;
    const Node& scale_mul = g.nodes[*sp];
    if (!is(scale_mul, "Mul") || scale_mul.inputs.size() != 2) continue;
    // One input of the scale product is the constant W_scale, the other X's dynamic scale (a scalar).
    int ws = -1;
    for (int k = 0; k < 2; ++k) {
      const Tensor* t = constant(scale_mul.inputs[k]);
      if (t != nullptr && PerChannelOf(*t, m, rank)) ws = k;
    }
    if (ws < 0) continue;
    const std::string& x_scale = scale_mul.inputs[1 - ws];
    const std::optional<size_t> xp = index.Producer(x_scale);
    if (!xp || !is(g.nodes[*xp], "DynamicQuantizeLinear") || g.nodes[*xp].outputs.size() < 2 ||
        g.nodes[*xp].outputs[1] != x_scale) {
      continue;
    }
    std::vector<std::string> inputs = conv.inputs;
    inputs.resize(4);
    inputs.push_back(x_scale);
    inputs.push_back(scale_mul.inputs[ws]);
    Node f{mul.name, "ConvIntegerToFloat", kSparqDomain, inputs, {mul.outputs[0]}, conv.attributes, ""};
    const long add_i = sole_reader(mul.outputs[0]);
    if (add_i >= 0 && is(g.nodes[add_i], "Add") && g.nodes[add_i].inputs.size() == 2 &&
        g.nodes[add_i].outputs.size() == 1) {
      const Node& add = g.nodes[add_i];
      const std::string& bias = add.inputs[0] == mul.outputs[0] ? add.inputs[1] : add.inputs[0];
      const Tensor* t = constant(bias);
      if (bias != mul.outputs[0] && t != nullptr && PerChannelOf(*t, m, rank)) {
        f.inputs.push_back(bias);
        f.outputs = add.outputs;
        removed.insert(static_cast<size_t>(add_i));
      }
    }
    removed.insert(static_cast<size_t>(cast_i));
    removed.insert(static_cast<size_t>(mul_i));
    if (sole_reader(s) == mul_i) removed.insert(*sp);
    fused.push_back(mul.name);
    g.nodes[i] = std::move(f);
  }
  if (fused.empty()) return fused;
  EraseNodes(g, removed);
  ImportSparqDomain(model);
  return fused;
}

}  // namespace sparq
