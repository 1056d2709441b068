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

}  // namespace sparq
