// The constant weights of an FP32 MatMul or Gemm, in the [outputs, inputs]
// view that the packers read: shared by the dense (dense_f32.cc) and
// block-sparse (sparse_linear.cc) rows.
#pragma once

#include <string>
#include <vector>

#include "sparq/graph.h"
#include "sparq/status.h"
#include "sparq/tensor.h"

namespace sparq {

struct LinearWeights {
  int64_t n = 0, k = 0;     // outputs, inputs
  std::vector<float> w;     // W [N, K] row-major = B^T
  std::vector<float> bias;  // [N] or empty
};

// Reads B (input 1; constant 2-D float32) and, for Gemm, transB and a bias C
// (constant [N] or [1, N] float32 with beta 1; transA 0 and alpha 1 required).
// NotSupported "<node>: <path>: <why>" when the node is outside that form.
StatusOr<LinearWeights> ReadLinearWeights(const Node& node, const std::vector<const Tensor*>& constants,
                                          const std::string& path);

}  // namespace sparq
