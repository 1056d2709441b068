#include "runtime/passes/fp8_fusion.h"

#include <set>

#include "graph/value_index.h"
#include "kernels/registry.h"
#include "runtime/passes/rewrite_util.h"

namespace sparq {
namespace {

bool IsOverridable(const Graph& g, const std::string& name) {
  for (const ValueInfo& v : g.initializer_inputs)
    if (v.name == name) return true;
  return false;
}

// A constant (not overridable) initializer, or nullptr.
const Tensor* ConstantOf(const Graph& g, const std::string& name) {
  auto it = g.initializers.find(name);
  if (it == g.initializers.end() || IsOverridable(g, name)) return nullptr;
  return &it->second;
}

// The per-tensor float32 scale of a float8e4m3fn Q or DQ node (inputs 1 and
// 2), when its zero point is a constant zero; else false.
bool ReadFp8Params(const Graph& g, const Node& n, float* scale) {
  if (n.inputs.size() != 3 || n.attr_int("block_size", 0) != 0) return false;
  const Tensor* s = ConstantOf(g, n.inputs[1]);
  const Tensor* zp = ConstantOf(g, n.inputs[2]);
  if (s == nullptr || zp == nullptr || s->dtype() != DataType::kFloat32 || s->numel() != 1) return false;
  if (zp->dtype() != DataType::kFloat8E4M3FN || zp->numel() != 1) return false;
  if (static_cast<const uint8_t*>(zp->raw_data())[0] != 0) return false;
  *scale = s->data<float>()[0];
  return true;
}

}  // namespace

std::vector<std::string> FuseFp8QdqPairs(Model* model) {
  std::vector<std::string> fused;
  if (model->opset() < 19) return fused;
  Graph& g = model->graph;
  const ValueIndex index(g);
  std::set<size_t> removed;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& q = g.nodes[i];
    float q_scale = 0.0f;
    if (q.op_type != "QuantizeLinear" || !q.domain.empty() || q.outputs.size() != 1 || q.attr_int("saturate", 1) != 1 ||
        q.attr_int("output_dtype", 0) != 0 || !ReadFp8Params(g, q, &q_scale) || index.IsGraphOutput(q.outputs[0])) {
      continue;
    }
    const std::vector<size_t>& readers = index.Readers(q.outputs[0]);
    bool pairs = !readers.empty();
    for (size_t r : readers) {
      const Node& dq = g.nodes[r];
      float dq_scale = 0.0f;
      pairs = pairs && dq.op_type == "DequantizeLinear" && dq.domain.empty() && dq.inputs[0] == q.outputs[0] &&
              dq.outputs.size() == 1 && dq.attr_int("output_dtype", 0) == 0 && ReadFp8Params(g, dq, &dq_scale) &&
              dq_scale == q_scale;
    }
    if (!pairs) continue;
    for (size_t r : readers) {
      Node& dq = g.nodes[r];
      dq.op_type = "FakeQuantFp8";
      dq.domain = kSparqDomain;
      dq.inputs = {q.inputs[0], q.inputs[1]};
      dq.attributes.clear();
      fused.push_back(dq.name);
    }
    removed.insert(i);
  }
  if (fused.empty()) return fused;
  EraseNodes(g, removed);
  ImportSparqDomain(model);
  return fused;
}

}  // namespace sparq
