// The float8e4m3fn branches of the reference QuantizeLinear / DequantizeLinear
// (kernels/ref/quant_ops.cc calls them once it has read the scale and its
// layout; the arithmetic is kernels/ref/quantize_fp8.h).
#pragma once

#include <vector>

#include "kernels/op_context.h"
#include "kernels/ref/quantize.h"
#include "kernels/registry.h"

namespace sparq {

// QuantizeLinear with a float8e4m3fn output: checks the opset (>= 19) and that
// the zero point, if any, is 0; reads `saturate` (default 1); sets output 0.
Status QuantizeLinearToFp8(OpContext& ctx, const QuantParamLayout& layout, const std::vector<float>& scale);
// DequantizeLinear of a float8e4m3fn input to `out_type` (a float type):
// the same checks; sets output 0.
Status DequantizeLinearFromFp8(OpContext& ctx, const QuantParamLayout& layout, const std::vector<float>& scale,
                               DataType out_type);

// sparq.FakeQuantFp8 (domain "sparq", version 1), written by
// runtime/passes/fp8_fusion.cc for a float8e4m3fn QuantizeLinear (saturate=1)
// whose output only DequantizeLinear nodes of the same per-tensor scale read:
//   inputs  x (float32), scale (float32, one value)
//   output  y = float32(Float8E4M3(x / scale)) * scale   (FakeQuantFp8Ref)
// Checks its inputs like Q/DQ do; the reference kernel of the fast row.
Status FakeQuantFp8(OpContext& ctx);
// Registers the reference sparq.FakeQuantFp8 (called by RegisterQuantOps).
void RegisterQuantFp8Ops(KernelRegistry& r);

}  // namespace sparq
