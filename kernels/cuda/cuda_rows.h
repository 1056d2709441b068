// The CUDA backend's kernel rows (KernelDef, kernels/registry.h) and the
// helpers they share. A row's prepare step decides from the node's attributes
// and constants whether it can implement the node (NotSupported with a reason
// otherwise, so the executor runs the node elsewhere); its fn runs on device
// tensors, queued on the CudaContext's stream, and allocates its outputs
// through OpContext::AllocateOutput. Input types are only known when the
// node runs: every row is registered through WithHostFallback, so a type or
// layout it does not take then runs the node's reference kernel on the host
// (HostFallback: inputs copied down, outputs up) instead of failing.
//
// Rows (name: what runs):
//   rows_tensor.cc  add_cuda / sub_cuda / mul_cuda / div_cuda (float32, int32, int64,
//                   numpy broadcasting), relu / sigmoid / tanh / erf / sqrt / exp /
//                   neg / abs / clip / gelu _f32_cuda, silu_f32_cuda and cast_cuda
//                   (float32 / int32 / int64 / int8 / uint8 / bool), and
//                   gelu_erf_chain_f32_cuda (sparq), softmax_f32_cuda (last axis),
//                   layernorm_f32_cuda, maxpool2d / avgpool2d / global_avgpool _f32_cuda,
//                   reduce_mean / reduce_sum _f32_cuda (any axes, the reference's order),
//                   reshape / flatten / squeeze / unsqueeze / identity _alias (the
//                   output shares the input's buffer), shape_cuda, transpose_cuda,
//                   concat_cuda, split_cuda (cudaMemcpy2DAsync), slice_cuda, gather_cuda,
//                   quantize_f32_s8_cuda, dequantize_s8_f32_cuda,
//                   dynamic_quantize_f32_u8_cuda, qlinear_add / qlinear_mul _s8_cuda,
//                   lut256_cuda, concat_lut_cuda, dequantize_concat_cuda (sparq)
//   rows_gemm.cc    gemm_cublaslt (MatMul, Gemm; named gemm_f32 / gemm_f16 _cublaslt by
//                   a constant weight; FP32 as TF32 by CudaBackendOptions),
//                   conv_f32_im2col_cublaslt, conv_dw_f32_cuda,
//                   qlinear_matmul_s8_cublaslt, qlinear_conv_s8_cublaslt (INT8 GEMM,
//                   int32 sums, requantized by device_math.h's arithmetic),
//                   qlinear_conv_dw_s8_cuda, qlinear_conv_lut_s8_cuda and
//                   matmul_s8_f32_cublaslt (sparq.QLinearConvLut,
//                   sparq.MatMulIntegerToFloat), spmm_bell_f16_cusparse (MatMul with
//                   a block-sparse constant float16 weight, Blocked-ELL),
//                   fused_conv_dw_f32_cuda / fused_conv_f32_im2col_cublaslt,
//                   pointwise_depthwise_f32_cuda, attention_f32_cuda (sparq's float
//                   fusions: the CUDA backend takes the CPU's passes)
//   rows_tensor.cc  also hardswish_chain_f32_cuda; maxpool2d_cuda takes int8 / uint8
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kernels/cuda/cuda_context.h"
#include "kernels/registry.h"

namespace sparq {
namespace cuda {

// Every CUDA row (built once).
const KernelRegistry& CudaRows();
void RegisterCudaTensorRows(KernelRegistry& r);
void RegisterCudaGemmRows(KernelRegistry& r);

// Row priorities within the CUDA registry: a specialised row ahead of the
// general row of the same op.
inline constexpr int kCudaPriorityGeneral = 10;
inline constexpr int kCudaPrioritySpecial = 20;

// Host-input masks (KernelDef::host_inputs).
inline constexpr uint32_t HostInput(int i) { return uint32_t{1} << i; }

// InvalidArgument naming the node unless input i is present and on a CUDA device.
Status RequireDeviceInput(const OpContext& ctx, size_t i);
// NotSupported naming the node unless input i has `type`.
Status RequireInputType(const OpContext& ctx, size_t i, DataType type, const char* row);
// A device copy of `bytes` host bytes (queued on ctx's stream; `host` may be
// freed when it returns).
StatusOr<std::shared_ptr<uint8_t>> Upload(CudaContext& ctx, const void* host, size_t bytes);
template <typename T>
StatusOr<std::shared_ptr<uint8_t>> UploadVector(CudaContext& ctx, const std::vector<T>& v) {
  return Upload(ctx, v.data(), v.size() * sizeof(T));
}
// A host tensor's values as float / int32 (any float / integer type); InvalidArgument naming `what`.
StatusOr<std::vector<float>> HostFloats(const OpContext& ctx, size_t i, const char* what);
StatusOr<std::vector<int32_t>> HostInts(const OpContext& ctx, size_t i, const char* what);
// Runs ctx's node on the reference kernel on the host: its device inputs
// copied down, its outputs copied up (synchronous; slow, but right). What a
// row does with inputs it finds it cannot take when the node runs (a type or
// layout its prepare step could not see): input types are only known then.
Status HostFallback(OpContext& ctx);

// A row function that falls back to HostFallback when it returns
// NotSupported (every CUDA row is registered through it).
template <KernelFn kFn>
Status WithHostFallback(OpContext& ctx) {
  Status st = kFn(ctx);
  if (st.code() != StatusCode::kNotSupported) return st;
  return HostFallback(ctx);
}

// An attribute-only prepare step: `check(node)` returns OK or NotSupported.
PrepareFn CheckOnly(Status (*check)(const Node& node, const std::vector<const Tensor*>& constants));

}  // namespace cuda
}  // namespace sparq
