// Helpers shared by the reference quantization operators
// (kernels/ref/quant_ops.cc and kernels/ref/quant_conv_ops.cc): reading scale
// and zero point tensors, and dispatching on the 8-bit integer types.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/op_context.h"
#include "kernels/registry.h"
#include "sparq/status.h"
#include "sparq/tensor.h"

namespace sparq {

// Registration hook of quant_conv_ops.cc (ConvInteger, QLinearConv), called by
// RegisterQuantOps.
void RegisterQuantConvOps(KernelRegistry& r);
// Registration hook of qdq_fused_ops.cc (the internal sparq.QLinearLut and
// sparq.QLinearAdd that runtime/passes/qdq_fusion.cc writes), called by RegisterQuantOps.
void RegisterQdqFusedOps(KernelRegistry& r);
// Registration hook of matmul_nbits.cc (com.microsoft MatMulNBits), called by RegisterQuantOps.
void RegisterMatMulNBitsOps(KernelRegistry& r);

// The epilogue of sparq.MatMulIntegerToFloat (qdq_fused_ops.cc), shared by its
// reference and fast kernels: Y = float(acc) * (A_scale * B_scale[column])
// [+ bias[column], a second rounding], checking the scales and the bias
// (float32 [N], or nullptr for none).
Status MatMulIntegerToFloatFromAcc(const OpContext& ctx, const Tensor& acc, const Tensor& a_scale, const Tensor& b_scale,
                                   const Tensor* bias, Tensor* y);

// Calls fn(T{}) with T = uint8_t or int8_t for `type` and returns its Status;
// InvalidArgument naming `what` for any other type.
template <typename Fn>
Status VisitInt8Type(const OpContext& ctx, DataType type, const std::string& what, Fn&& fn) {
  switch (type) {
    case DataType::kUInt8: return fn(uint8_t{});
    case DataType::kInt8: return fn(int8_t{});
    default: return ctx.InvalidArgument(what + " has type " + DataTypeName(type) + "; expected uint8 or int8");
  }
}

// The values of a scale input (any float type) as float32; InvalidArgument
// naming `what` when the tensor is not a float tensor or is empty.
StatusOr<std::vector<float>> ReadScales(const OpContext& ctx, const Tensor& t, const std::string& what);

// The values of a zero point input (any integer type up to 32 bits) as int32;
// InvalidArgument naming `what` for other types.
StatusOr<std::vector<int32_t>> ReadZeroPoints(const OpContext& ctx, const Tensor& t, const std::string& what);

// Fails unless zero point input `zp_input` (when present) has the type
// `expected` (that of the tensor it belongs to) and, when `scale_numel` >= 0,
// as many elements as its scale. `what` names the zero point.
Status CheckZeroPoint(const OpContext& ctx, size_t zp_input, DataType expected, int64_t scale_numel,
                      const std::string& what);

// The single value of a per-tensor parameter: InvalidArgument naming `what`
// unless `values` has exactly one element.
template <typename T>
StatusOr<T> SingleValue(const OpContext& ctx, const std::vector<T>& values, const std::string& what) {
  if (values.size() != 1) {
    return ctx.InvalidArgument(what + " must hold one value (per-tensor), got " + std::to_string(values.size()));
  }
  return values[0];
}

}  // namespace sparq
