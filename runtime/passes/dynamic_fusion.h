// Fusion of quantize.mode dynamic's MatMul epilogue at executor creation (internal).
#pragma once

#include <string>
#include <vector>

#include "sparq/graph.h"

namespace sparq {

// Rewrites the float epilogue of onnxruntime-style dynamic quantization
//
//   MatMulInteger(A, B, A_zp, B_zp) ─> acc ─Cast(float)─> accf ─┐
//   DynamicQuantizeLinear(..)[1] = A_scale ─Mul(B_scale)─> s ──── Mul ─> y [─ Add(bias) ─> z]
//
// into sparq.MatMulIntegerToFloat(A, B, A_zp, B_zp, A_scale, B_scale[, bias]) ─> y [z]
// (kernels/ref/qdq_fused_ops.cc), the int32 tensor and its float copy never
// materialized, bit for bit the graph's result. The bias Add joins when it
// alone reads y and its other input is a constant float32 [N]. Fuses only when B and
// B_scale are constants (B_scale one value or one per column of B), A_scale
// is a DynamicQuantizeLinear's scale, and acc, accf (and s, unless other
// nodes read it) are read by the pattern alone and are no graph outputs.
// Returns the names of the fused nodes (their final Mul's names).
std::vector<std::string> FuseDynamicMatMul(Model* model);

// The same for onnxruntime's dynamic convolutions:
//
//   ConvInteger(X, W, X_zp, W_zp) ─> acc ─Cast(float)─> accf ─┐
//   DynamicQuantizeLinear(..)[1] = X_scale ─Mul(W_scale)─> s ── Mul ─> y [─ Add(bias) ─> z]
//
// into sparq.ConvIntegerToFloat(X, W, X_zp, W_zp, X_scale, W_scale[, bias]) ─> y [z]
// with ConvInteger's attributes (kernels/ref/qdq_fused_ops.cc), bit for bit the
// graph. W is a constant of rank 3 or 4; W_scale and the bias constant float32
// tensors of one value or one per output channel, shaped to broadcast along the
// output's channel axis ([M, 1, 1], [1, M, 1, 1], ...), no larger in rank
// than the output; the rest as FuseDynamicMatMul. Returns the fused nodes' names.
std::vector<std::string> FuseDynamicConv(Model* model);

}  // namespace sparq
