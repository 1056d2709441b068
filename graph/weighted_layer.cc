// The linear-layer view (sparq/weighted_layer.h).
#include "sparq/weighted_layer.h"

#include "graph/value_index.h"

namespace sparq {

std::optional<WeightedLayer> AsWeightedLayer(const Graph& g, const Node& n) {
  if (!n.domain.empty() && n.domain != "ai.onnx") return std::nullopt;
  if (n.op_type != "Conv" && n.op_type != "Gemm" && n.op_type != "MatMul") return std::nullopt;
  if (n.inputs.size() < 2 || n.outputs.empty()) return std::nullopt;
  const Tensor* found = g.FindWeight(n.inputs[1]);
  if (found == nullptr) return std::nullopt;
  const Tensor& w = *found;

  WeightedLayer L;
  L.node = n.name.empty() ? n.outputs[0] : n.name;
  L.op_type = n.op_type;
  L.input = n.inputs[0];
  L.output = n.outputs[0];
  L.weight = n.inputs[1];
  L.weight_shape = w.shape();
  auto unsupported = [&](const std::string& why) {
    if (L.unsupported.empty()) L.unsupported = why;
  };
  const std::string shape = ShapeToString(w.shape());
  if (n.op_type == "Conv") {
    if (w.rank() < 3) {
      unsupported("Conv weight " + shape + " has rank below 3");
    } else {
      L.rows = w.dim(0);
      L.cols = NumElements(Shape(w.shape().begin() + 1, w.shape().end()));
      L.groups = n.attr_int("group", 1);
      if (L.groups < 1 || L.rows % L.groups != 0) {
        unsupported("Conv group " + std::to_string(L.groups) + " does not divide its " + std::to_string(L.rows) +
                    " output channels");
      }
    }
    if (n.inputs.size() > 2 && !n.inputs[2].empty()) L.bias = n.inputs[2];
  } else if (n.op_type == "Gemm") {
    L.transposed_view = n.attr_int("transB", 0) == 0;  // B is [in, out] unless transB
    if (w.rank() != 2) {
      unsupported("Gemm weight " + shape + " is not 2-D");
    } else {
      L.rows = L.transposed_view ? w.dim(1) : w.dim(0);
      L.cols = L.transposed_view ? w.dim(0) : w.dim(1);
    }
    if (n.attr_int("transA", 0) != 0) unsupported("Gemm with transA=1 is not handled");
    if (n.inputs.size() > 2 && !n.inputs[2].empty()) {
      L.bias = n.inputs[2];
      const Tensor* c = g.FindWeight(L.bias);
      if (c == nullptr || c->numel() != L.rows || (c->rank() == 2 && c->dim(0) != 1) || c->rank() > 2) {
        unsupported("Gemm C '" + L.bias + "' is not a constant with one value per output");
      }
    }
  } else {  // MatMul
    if (w.rank() != 2) {
      unsupported("MatMul weight " + shape + " is not 2-D");
    } else {
      L.transposed_view = true;
      L.rows = w.dim(1);
      L.cols = w.dim(0);
    }
    // A bias is the constant of an Add that is the MatMul's only reader.
    if (CountReaders(g, L.output) == 1) {
      for (const Node& add : g.nodes) {
        if (add.op_type != "Add" || add.inputs.size() != 2) continue;
        for (int k = 0; k < 2; ++k) {
          if (add.inputs[k] != L.output) continue;
          const Tensor* b = g.FindWeight(add.inputs[1 - k]);
          if (b != nullptr && b->dtype() == DataType::kFloat32 && b->numel() == L.rows && b->rank() >= 1 &&
              b->dim(b->rank() - 1) == L.rows)
            L.bias = add.inputs[1 - k];
        }
      }
    }
  }
  if (w.dtype() != DataType::kFloat32) unsupported("weight '" + L.weight + "' is " + DataTypeName(w.dtype()) + ", not float32");
  if (CountReaders(g, L.weight) > 1) unsupported("weight '" + L.weight + "' is shared by several nodes");
  if (g.FindWeight(L.input) != nullptr) unsupported("input '" + L.input + "' is a constant");
  if (!L.bias.empty()) {
    const Tensor* b = g.FindWeight(L.bias);
    if (b == nullptr) unsupported("bias '" + L.bias + "' is computed, not a constant");
    else if (b->dtype() != DataType::kFloat32) unsupported("bias '" + L.bias + "' is not float32");
  }
  if (L.rows == 0 || L.cols == 0) unsupported("empty weight " + shape);
  return L;
}

StatusOr<std::vector<WeightedLayer>> FindWeightedLayers(const Model& model) {
  Graph g = model.graph;  // shares the tensors; only the node order changes
  SPARQ_RETURN_IF_ERROR(g.TopoSort());
  std::vector<WeightedLayer> out;
  for (const Node& n : g.nodes)
    if (std::optional<WeightedLayer> L = AsWeightedLayer(g, n)) out.push_back(std::move(*L));
  return out;
}

}  // namespace sparq
