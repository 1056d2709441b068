// The CUDA backend's kernel rows (KernelDef, kernels/registry.h) and the
// helpers they share. A row's prepare step decides from the node's attributes
// and constants whether it can implement the node (NotSupported with a reason
// otherwise, so the executor runs the node elsewhere); its fn runs on device
// tensors, queued on the CudaContext's stream, and allocates its outputs
// through OpContext::AllocateOutput. Input types are known at prepare where
// the graph says them (PrepareContext::input_types: Float32Only declines
// others, so the executor partitions the node to the CPU); the rest only when
// the node runs: every row is registered through WithHostFallback, so a type
// or layout it does not take then runs the node's reference kernel on the
// host (HostFallback: inputs copied down, outputs up) instead of failing.
//
// Rows (name: what runs), by file:
//   rows_elementwise.cc  add / sub / mul / div _cuda (float32, int32, int64, numpy
//                        broadcasting), relu / sigmoid / tanh / erf / sqrt / exp / neg /
//                        abs / clip / gelu _f32_cuda, silu / gelu_erf_chain / gelu_erf_scaled_chain /
//                        hardswish_chain _f32_cuda (sparq), softmax_f32_cuda (last
//                        axis), layernorm_f32_cuda, maxpool2d_cuda (float32, int8,
//                        uint8), avgpool2d / global_avgpool _f32_cuda, reduce_mean /
//                        reduce_sum _f32_cuda (any axes, the reference's order),
//                        cast_cuda (float32 / int32 / int64 / int8 / uint8 / bool)
//   rows_layout.cc       shape_cuda, reshape / flatten / squeeze / unsqueeze / identity
//                        _alias (the output shares the input's buffer), transpose_cuda,
//                        concat_cuda, split_cuda (cudaMemcpy2DAsync), slice_cuda,
//                        gather_cuda (any element type), resize_nearest_cuda (whole
//                        factors, nearest / asymmetric / floor, as the CPU's row)
//   rows_quant.cc        quantize_f32_s8_cuda, dequantize_s8_f32_cuda,
//                        dynamic_quantize_f32_u8_cuda, qlinear_add / qlinear_mul _s8_cuda,
//                        lut256_cuda, concat_lut_cuda, dequantize_concat_cuda (sparq)
//   rows_gemm.cc         gemm_cublaslt (MatMul, Gemm; named gemm_f32 / gemm_f16
//                        _cublaslt by a constant weight; FP32 as TF32 by
//                        CudaBackendOptions), conv_f32_im2col_cublaslt, conv_dw_f32_cuda,
//                        fused_conv_dw_f32_cuda / fused_conv_f32_im2col_cublaslt,
//                        pointwise_depthwise_f32_cuda, attention_f32_cuda (sparq's
//                        float fusions)
//   rows_int8.cc         qlinear_matmul_s8_wmma, qlinear_conv_s8_wmma, matmul_s8_f32_wmma
//                        (sparq.MatMulIntegerToFloat): the fused INT8 GEMM of
//                        gemm_s8_fused.cu, requantized on chip by device_kernels.h's
//                        epilogue. A context with CudaBackendOptions::fused_int8_gemm
//                        off runs the same rows as cuBLASLt's INT8 GEMM into int32 and
//                        the epilogue kernel: Int8GemmKernelName says `_cublaslt` then
//                        (the executor's contexts keep the default, on);
//                        qlinear_conv_dw_s8_cuda, qlinear_conv_lut_s8_cuda
//   rows_sparse.cc       layers with a block-sparse constant weight (Blocked-ELL,
//                        blocks 64 / 32; when: block_sparse_choice.h):
//                        spmm_bell_f16 (MatMul, float16: named spmm_bell<B>_f16_cusparse
//                        or spmm_bell<B>_f16_wmma, the own kernel of spmm_bell_wmma.cu,
//                        by the kernel speed table or CudaBackendOptions::
//                        block_sparse_kernel), qlinear_matmul_s8_bell,
//                        matmul_s8_f32_bell (QLinearMatMul / sparq.MatMulIntegerToFloat
//                        with a symmetric int8 weight, named <row><B>_cusparse:
//                        cuSPARSE's INT8 SpMM into int32, then the requantize /
//                        float epilogue kernel, or <row><B>_wmma: the own INT8
//                        kernel with the epilogue fused)
//   rows_f16.cc          float16 models as written (Backend::RunsFloat16AsWritten):
//                        add / sub / mul / div _f16_cuda (numpy broadcasting), relu /
//                        sigmoid / tanh / erf / sqrt / exp / neg / abs / reciprocal /
//                        clip / gelu _f16_cuda, softmax_f16_cuda (last axis),
//                        layernorm_f16_cuda, reduce_sum / reduce_mean _f16_cuda,
//                        maxpool2d / avgpool2d / global_avgpool
//                        _f16_cuda, cast_f16_cuda (float16 <-> float32 / int32 / int64 /
//                        int8 / uint8 / bool), conv_f16_im2col_cublaslt, conv_dw_f16_cuda,
//                        gemm_f16_cublaslt (Gemm; C as the GEMM's C, beta 1): float32
//                        inside each thread, one rounding (device_f16.h); and
//                        round_f16_f32_cuda (sparq.RoundToFloat16, for lowered executors)
//   rows_cusparselt.cc   spmm_24_f16_cusparselt (MatMul with a constant 2:4 float16 weight on
//                        cuSPARSELt, only where the kernel speed table has a winning
//                        `cuda,2:4,f16` row; none by default: measured slower than dense)
//   rows_mask.cc         compare_cuda (Equal, Greater, GreaterOrEqual, Less, LessOrEqual of
//                        float32 / float16 / int32 / int64 / bool), logic_cuda (And, Or,
//                        Xor), where_cuda, expand_cuda, constant_of_shape_cuda, range_cuda
//                        (host scalars, computed on the host and uploaded): an attention
//                        mask's arithmetic
//   rows_common.cc       the helpers below, HostFallback
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kernels/cuda/cuda_context.h"
#include "kernels/cuda/device_f16.h"
#include "kernels/cuda/device_kernels.h"
#include "kernels/cuda/geometry.h"
#include "kernels/registry.h"

namespace sparq {
namespace cuda {

// Every CUDA row (built once), from the registration hooks of the rows files.
const KernelRegistry& CudaRows();
void RegisterCudaElementwiseRows(KernelRegistry& r);  // rows_elementwise.cc
void RegisterCudaLayoutRows(KernelRegistry& r);       // rows_layout.cc
void RegisterCudaQuantRows(KernelRegistry& r);        // rows_quant.cc
void RegisterCudaGemmRows(KernelRegistry& r);         // rows_gemm.cc
void RegisterCudaInt8Rows(KernelRegistry& r);         // rows_int8.cc
void RegisterCudaSparseRows(KernelRegistry& r);       // rows_sparse.cc
void RegisterCudaF16Rows(KernelRegistry& r);          // rows_f16.cc
void RegisterCudaSparse24Rows(KernelRegistry& r);     // rows_cusparselt.cc
void RegisterCudaMaskRows(KernelRegistry& r);         // rows_mask.cc

// The kernel an INT8 GEMM row (named `..._wmma`, the fused kernel) runs on a
// context with `options`: its name, or `..._cublaslt` with fused_int8_gemm off.
// Other names are returned as they are. (rows_int8.cc)
std::string Int8GemmKernelName(const std::string& row_name, const CudaBackendOptions& options);

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
// The output shape [..., N] of a linear layer whose input x is [..., K] (a
// weight of K inputs and N outputs); InvalidArgument naming the node when x's
// last dimension is not K.
StatusOr<Shape> LinearOutputShape(const OpContext& ctx, const Tensor& x, int64_t k, int64_t n);
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
// layout its prepare step could not see: a value the graph gives no type).
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
// A prepare step for float32 rows: declines the node when an input in `mask`
// is a constant of another type, then runs `check` when given.
PrepareFn Float32Only(uint32_t mask, Status (*check)(const Node&, const std::vector<const Tensor*>&) = nullptr);

// InvalidArgument naming the node unless input i arrived on the host (a host input).
Status RequireHost(const OpContext& ctx, size_t i, const char* what);
// A host input's values as int64 (int64 or int32 tensors).
StatusOr<std::vector<int64_t>> HostInt64s(const OpContext& ctx, size_t i, const char* what);
// A host input holding a 256-entry uint8 / int8 table, its bytes.
StatusOr<std::vector<uint8_t>> HostTable(const OpContext& ctx, size_t i);
// Input i's device pointer as float (precondition: float32).
const float* InF32(const OpContext& ctx, size_t i);
// `axis` in [0, rank); InvalidArgument naming the node otherwise.
StatusOr<int64_t> NormalizeAxisOf(const OpContext& ctx, int64_t axis, int64_t rank);
// Product of s[begin, end).
int64_t Product(const Shape& s, size_t begin, size_t end);
// Output 0 = Concat(parts, axis) of device tensors of one type (cudaMemcpy2DAsync per part).
Status ConcatInto(OpContext& ctx, CudaContext& cuda, const std::vector<const Tensor*>& parts, int64_t axis);
// One cuBLASLt GEMM on ctx's stream, its plan cached by the context (CudaContext::Gemm).
Status RunCudaGemm(CudaContext& cuda, const LtGemmArgs& args);
// ---------------------------------------------------------------------------
// The float rows float32 and float16 share: one body, a template over T =
// float or Half (rows_elementwise.cc / rows_gemm.cc define and instantiate
// them; rows_f16.cc registers the Half ones behind its float16 prepare step).

template <typename T> struct FloatRowType;
template <> struct FloatRowType<float> {
  static constexpr DataType kType = DataType::kFloat32;
  static constexpr const char* kTag = "f32";
};
template <> struct FloatRowType<Half> {
  static constexpr DataType kType = DataType::kFloat16;
  static constexpr const char* kTag = "f16";
};
// e.g. FloatRowName<Half>("softmax") = "softmax_f16_cuda".
template <typename T>
std::string FloatRowName(const char* op) {
  return std::string(op) + "_" + FloatRowType<T>::kTag + "_cuda";
}
// Input i's device pointer as T (precondition: its type is T's).
template <typename T>
const T* InAs(const OpContext& ctx, size_t i) {
  return static_cast<const T*>(ctx.input(i).raw_data());
}
template <typename T>
T* OutAs(Tensor* t) {
  return static_cast<T*>(t->raw_data());
}
// RequireDeviceInput and RequireInputType(T's type).
template <typename T>
Status RequireFloatInput(const OpContext& ctx, size_t i, const char* row) {
  SPARQ_RETURN_IF_ERROR(RequireDeviceInput(ctx, i));
  return RequireInputType(ctx, i, FloatRowType<T>::kType, row);
}
// The broadcast of inputs 0 and 1 (numpy rules): *plan and the output shape.
StatusOr<Shape> PlanBinaryBroadcast(const OpContext& ctx, BroadcastPlan* plan);

// rows_elementwise.cc
template <typename T>
Status RunFloatUnary(OpContext& ctx, UnaryOp op, float p0 = 0.0f, float p1 = 0.0f, float p2 = 0.0f);
template <typename T, UnaryOp kOp>
Status FloatUnary(OpContext& ctx) {
  return RunFloatUnary<T>(ctx, kOp);
}
template <typename T> Status FloatClip(OpContext& ctx);
template <typename T> Status FloatSoftmax(OpContext& ctx);  // the last axis
template <typename T> Status FloatLayerNorm(OpContext& ctx);
template <typename T> Status RunFloatPool2d(OpContext& ctx, bool max);
template <typename T, bool kMax>
Status FloatPool2d(OpContext& ctx) {
  return RunFloatPool2d<T>(ctx, kMax);
}
template <typename T> Status FloatGlobalAveragePool(OpContext& ctx);
template <typename T> Status RunFloatReduceSumMean(OpContext& ctx, bool mean, bool axes_from_input);
template <typename T, bool kMean, bool kAxesFromInput>
Status FloatReduceSumMean(OpContext& ctx) {
  return RunFloatReduceSumMean<T>(ctx, kMean, kAxesFromInput);
}
// Cast: CastType codes of device_kernels.h (kCastF16 for float16; -1: none)
// and ONNX's `to` numbers of the types the rows cast; RunCast casts with
// float16 on one side (half: cast_f16_cuda) or on neither (cast_cuda).
int CastCode(DataType t);
DataType CastTarget(int64_t to);
Status RunCast(OpContext& ctx, bool half);
// Prepare checks of those rows (NotSupported naming the node).
Status CheckGelu(const Node& node, const std::vector<const Tensor*>& constants);       // approximate = "none"
Status CheckLayerNorm(const Node& node, const std::vector<const Tensor*>& constants);  // no Mean / InvStdDev
Status CheckPool(const Node& node, const std::vector<const Tensor*>& constants);       // 2-D, no Indices

// rows_gemm.cc: Conv (2-D) and Gemm
Status CheckConvIm2Col(const Node& node, const std::vector<const Tensor*>& constants);     // group 1, 2-D
Status CheckConvDepthwise(const Node& node, const std::vector<const Tensor*>& constants);  // group = C, w [C, 1, kh, kw]
// Depthwise Conv (DepthwiseConvValue, bias in the float32 sum, one rounding).
template <typename T> Status FloatConvDepthwise(OpContext& ctx);
// y[n] [M, P] = w [M, K] * im2col(x[n]) for each image n of `g` on cuBLASLt
// (`type`, elements of elem_size bytes; beta 1: y's contents are the GEMM's
// C). With `pointwise_direct`, a 1x1 stride-1 unpadded convolution reads x
// [C, H * W] as it is (no column matrix).
Status ConvIm2ColGemm(const OpContext& ctx, CudaContext& cuda, const Conv2dGeometry& g, LtGemmType type,
                      size_t elem_size, const void* x, const void* w, void* y, float beta, bool pointwise_direct);
// Gemm's operands: op(A) [m, k], op(B) [k, n], whether C is added (beta != 0).
struct GemmShape {
  bool trans_a = false, trans_b = false, has_c = false;
  int64_t m = 0, n = 0, k = 0;
};
StatusOr<GemmShape> GemmShapeOf(const OpContext& ctx);
// The cuBLASLt arguments of y [m, n] = alpha * op(A) op(B) (beta 0: C is the caller's).
LtGemmArgs GemmArgsOf(const OpContext& ctx, const GemmShape& s, LtGemmType type, void* y);

// ---------------------------------------------------------------------------
// The INT8 GEMM rows' operands (rows_int8.cc, rows_sparse.cc)

// An int8 device view of an int8 / uint8 device tensor: uint8 is shifted
// (x ^ 0x80 = x - 128) into a scratch buffer that `holder` keeps.
struct SignedView {
  const int8_t* data = nullptr;
  std::shared_ptr<uint8_t> holder;
  bool shifted = false;  // uint8 made int8: its zero points move by -128 too
};
// NotSupported naming `what` for types other than int8 / uint8.
StatusOr<SignedView> AsSigned(const OpContext& ctx, CudaContext& cuda, const Tensor& t, const char* what);
// Host input i's zero points ({0} when absent), shifted by -128 when the data
// were (`shifted`); InvalidArgument naming `what` when present but empty.
StatusOr<std::vector<int32_t>> ZeroPoints(const OpContext& ctx, size_t i, bool shifted, const char* what);
// Host input i's one float (NotSupported naming `what` unless per tensor).
StatusOr<float> SingleFloat(const OpContext& ctx, size_t i, const char* what);
// The output zero point, host input i (0 when absent; NotSupported unless per tensor).
StatusOr<int32_t> OutputZeroPoint(const OpContext& ctx, size_t i);
// RequantMultiplier(x_scale, w_scale[j], y_scale) per j, uploaded (one value or one per row / column).
StatusOr<std::shared_ptr<uint8_t>> UploadMultipliers(CudaContext& cuda, float x_scale, const std::vector<float>& w_scale,
                                                     float y_scale);
// NotSupported naming the node unless its `activation` is none or GeluErfChain
// (what sparq.MatMulIntegerToFloat's float epilogue applies).
Status CheckIntegerToFloatActivation(const Node& node);
// sparq.MatMulIntegerToFloat(A, B, A_zero_point, B_zero_point, A_scale,
// B_scale[, Bias])'s float epilogue for `cols` output columns:
// A_scale (input 4) x B_scale[n] (input 5, one value or `cols`) uploaded and
// kept by *held, Bias (input 6, float32 [cols] on the device) when present,
// the node's GeluErfChain activation.
StatusOr<FloatEpilogue> MakeFloatEpilogue(const OpContext& ctx, CudaContext& cuda, int64_t cols,
                                          std::shared_ptr<uint8_t>* held);

// One CUDA row (opset since .. 99).
KernelDef CudaRow(const char* op, const char* domain, int since, KernelFn fn, const char* name,
                  PrepareFn prepare = nullptr, uint32_t host_inputs = 0, int priority = kCudaPriorityGeneral);

}  // namespace cuda
}  // namespace sparq
