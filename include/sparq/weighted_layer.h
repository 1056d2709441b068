// A linear layer and its constant weight: sparq's one view of the Conv, Gemm
// and MatMul nodes that pruning re-shapes and quantization packs.
//
// The GEMM view. Every weight is handled as a row-major matrix [rows, cols]
// whose rows are outputs and whose cols are the reduction ("input") dimension:
//
//   Conv    W [O, I/g, k1..kR]                  -> [O, I/g * k1*..*kR]  (row = output channel)
//   Gemm    B [out, in] (transB=1)              -> [out, in]
//           B [in, out] (transB=0)              -> [out, in]  (transposed view)
//   MatMul  B [in, out] (2-D constant B)        -> [out, in]  (transposed view)
//
// Thread safety: the functions here are reentrant and keep no state.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "sparq/export.h"
#include "sparq/graph.h"
#include "sparq/status.h"

namespace sparq {

// A Conv, Gemm or MatMul node (default ONNX domain) whose input 1 is a
// constant weight (an initializer or a Constant node's output).
struct SPARQ_API WeightedLayer {
  std::string node;     // node name, or its first output when it has none
  std::string op_type;  // "Conv", "Gemm" or "MatMul"
  std::string input;    // the activation the layer multiplies (Conv X, Gemm A, MatMul A)
  std::string output;
  std::string weight;   // the weight's value name (an initializer or a Constant node output)
  // Conv B, Gemm C, or for MatMul the constant of an Add that is the MatMul's
  // only reader and holds one value per output; "" when absent.
  std::string bias;
  Shape weight_shape;
  int64_t rows = 0, cols = 0;  // the GEMM view (cols per group for a grouped Conv); 0 when the shape has none
  int64_t groups = 1;          // Conv `group` (rows and the input channels split into groups)
  bool transposed_view = false;  // the stored weight is [in, out]
  // Why pruning can never act on the layer (weight not float32, shared by
  // several nodes, Gemm with transA=1, ...); "" when it can.
  std::string unsupported;

  int64_t params() const { return rows * cols; }
  // The axis of the stored weight that indexes output channels (the rows).
  int weight_axis() const { return transposed_view ? 1 : 0; }
};

// The view of `n` in `g`, or nullopt when `n` is not a Conv / Gemm / MatMul
// of the default domain ("" or "ai.onnx") with an output and a constant
// input 1. Layers that pruning cannot handle are returned with `unsupported`
// set; other users apply their own conditions on top.
SPARQ_API std::optional<WeightedLayer> AsWeightedLayer(const Graph& g, const Node& n);

// Every weighted layer of `model`, in graph (topological) order. Errors:
// those of Graph::TopoSort.
SPARQ_API StatusOr<std::vector<WeightedLayer>> FindWeightedLayers(const Model& model);

}  // namespace sparq
