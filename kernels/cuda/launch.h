// The CUDA backend's own kernels, as host functions that launch them on a
// stream (elementwise.cu, nn.cu). Each checks its arguments (can_implement),
// launches, and returns the launch's Status; none synchronizes. Pointers are
// device pointers unless a comment says otherwise. The per-element arithmetic
// is device_math.h's, which tests/kernels/cuda_math_test.cc pins on the CPU.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/cuda/device_f16.h"
#include "kernels/cuda/device_kernels.h"
#include "sparq/status.h"

namespace sparq {
namespace cuda {

// ---------------------------------------------------------------------------
// Elementwise (elementwise.cu)

// The float launchers (templates over T = float or Half, instantiated for
// both in elementwise.cu / nn.cu): one kernel body for float32 and float16,
// float32 inside each thread (LoadF32), one rounding per output (StoreF32).

// y[i] = UnaryValue(op, x[i], p0..p3) (device_math.h; y may be x).
template <typename T>
Status LaunchUnary(UnaryOp op, const T* x, T* y, int64_t n, float p0, float p1, float p2, cudaStream_t stream,
                   float p3 = 0.0f);
// y = a op b, numpy broadcasting (PlanBroadcast, geometry.h, makes the plan); y may be a.
template <typename T>
Status LaunchBinary(BinaryOp op, const T* a, const T* b, T* y, const BroadcastPlan& plan, cudaStream_t stream);
// The same for int32 / int64 (elem_size 4 / 8) with IntBinary's semantics (device_math.h).
Status LaunchBinaryInt(BinaryOp op, int elem_size, const void* a, const void* b, void* y, const BroadcastPlan& plan,
                       cudaStream_t stream);

// Softmax over the last dimension of `rows` rows of n floats (one block per row).
template <typename T>
Status LaunchSoftmaxRows(const T* x, T* y, int64_t rows, int64_t n, cudaStream_t stream);
// LayerNormalization of `rows` rows of n floats; scale [n], bias [n] or null.
template <typename T>
Status LaunchLayerNormRows(const T* x, const T* scale, const T* bias, double eps, int64_t rows, int64_t n, T* y,
                           cudaStream_t stream);

// QuantizeLinear of n floats to int8 (out_signed) or uint8; the parameters of
// element e are scale[(e / inner) % axis_dim], zero_point[...] (zero_point
// may be null: 0). Per-tensor: axis_dim = 1.
Status LaunchQuantizeF32(const float* x, void* y, bool out_signed, int64_t n, const float* scale,
                         const int32_t* zero_point, int64_t axis_dim, int64_t inner, cudaStream_t stream);
// DequantizeLinear of n int8 / uint8 / int32 values (in_type: 0 = uint8, 1 = int8, 2 = int32).
Status LaunchDequantize(const void* x, int in_type, float* y, int64_t n, const float* scale, const int32_t* zero_point,
                        int64_t axis_dim, int64_t inner, cudaStream_t stream);

// out = RequantizeElement over acc (RequantArgs, device_kernels.h).
Status LaunchRequantize(const RequantArgs& args, cudaStream_t stream);

// y[i] = AccToFloatElement(i, args, epilogue): sparq.MatMulIntegerToFloat's output.
Status LaunchAccToFloat(const RequantArgs& args, const FloatEpilogue& epilogue, float* y, cudaStream_t stream);

// DynamicQuantizeLinear of n floats, all on the device: the range (NaN
// ignored, 0 always inside), DynamicQuantParamsU8 into scale[0] and
// zero_point[0], then y. `scratch` holds DynamicQuantizeScratchBytes().
size_t DynamicQuantizeScratchBytes();
Status LaunchDynamicQuantizeU8(const float* x, int64_t n, uint8_t* y, float* scale, uint8_t* zero_point, void* scratch,
                               cudaStream_t stream);

// sums[r] = sum over j < k of x[r * k + j] (int8), for the zero point corrections.
Status LaunchRowSumsS8(const int8_t* x, int64_t rows, int64_t k, int32_t* sums, cudaStream_t stream);
// y = x ^ 0x80: uint8 values as int8 shifted by -128 (zero points shift alike).
Status LaunchShiftU8ToS8(const uint8_t* x, int8_t* y, int64_t n, cudaStream_t stream);

// y = x permuted or sliced (PermutePlan, device_kernels.h; strides may be negative).
Status LaunchPermute(const void* x, void* y, int elem_size, const PermutePlan& plan, cudaStream_t stream);

// sparq.QLinearAdd / QLinearMul (QLinearBinaryElement) into y (bytes).
Status LaunchQLinearBinary(const void* a, const void* b, void* y, const BroadcastPlan& plan, const QLinearBinaryArgs& q,
                           cudaStream_t stream);
// y[i] = table[x[i] - min(X's type)] (sparq.QLinearLut); table: 256 device bytes.
Status LaunchLut256(const void* x, bool x_signed, const uint8_t* table, void* y, int64_t n, cudaStream_t stream);

// y = Cast(x) elementwise (CastElement: CastType codes, device_kernels.h).
Status LaunchCast(const void* x, int from, void* y, int to, int64_t n, cudaStream_t stream);

// y[o] = ReduceSumMeanElement(o, ...) for o < n_out (base, offsets: device arrays).
template <typename T>
Status LaunchReduceSumMean(const T* x, const int64_t* base, int64_t n_out, const int64_t* offsets, int64_t n, bool mean,
                           T* y, cudaStream_t stream);

// Nearest Resize by whole factors (ResizeNearestSource): y [planes, H * sh, W * sw].
Status LaunchResizeNearest(const void* x, void* y, int elem_size, int64_t planes, int64_t height, int64_t width,
                           int64_t sh, int64_t sw, cudaStream_t stream);

// Gather: y [outer, n_indices, inner] from x [outer, axis_dim, inner] at
// indices (device, int64, each in [0, axis_dim)), elements of elem_size bytes.
Status LaunchGather(const void* x, const int64_t* indices, void* y, int elem_size, int64_t outer, int64_t axis_dim,
                    int64_t inner, int64_t n_indices, cudaStream_t stream);

// Calibration: counts[AbsHistogramBin(x[i], scale, last)] += 1 (device_math.h),
// NaNs counted into *nans; counts has last + 1 bins (added to). Up to 4096
// bins each block counts in shared memory first.
Status LaunchAbsHistogramF32(const float* x, int64_t n, double scale, int64_t last, unsigned long long* counts,
                             unsigned long long* nans, cudaStream_t stream);

// Calibration: the least and greatest non-NaN values of x (a bound moves
// only for a value strictly beyond it, MinMaxRef's rule; +inf / -inf when
// there are none) into scratch's floats [2 * 256, +2): scratch holds
// MinMaxScratchBytes(). (The sign of a zero bound depends on the order.)
size_t MinMaxScratchBytes();
Status LaunchMinMaxF32(const float* x, int64_t n, void* scratch, cudaStream_t stream);

// ---------------------------------------------------------------------------
// Convolution and pooling (nn.cu), NCHW, 2-D

// One image x [C, H, W] -> col [P, K] (patch-major: each output pixel's
// patch contiguous, c then ky then kx), padding read as pad_value; T is float
// (elem_size 4), int8 (1) or float16 bits (2).
Status LaunchIm2Col(const void* x, void* col, int elem_size, uint32_t pad_bits, const Conv2dGeometry& g,
                    cudaStream_t stream);
// Depthwise convolution (group = C = M, weights [C, 1, kh, kw]), bias [C] or null.
template <typename T>
Status LaunchDepthwiseConv(const T* x, const T* w, const T* bias, T* y, const Conv2dGeometry& g, cudaStream_t stream);
// QLinearConv with group = C (DepthwiseS8Element), y bytes [N, C, OH, OW].
Status LaunchDepthwiseConvS8(const DepthwiseS8Args& args, void* y, const Conv2dGeometry& g, cudaStream_t stream);
// y[n, m, p] += bias[m] over [batch, channels, pixels].
Status LaunchAddChannelBiasF32(float* y, const float* bias, int64_t batch, int64_t channels, int64_t pixels,
                               cudaStream_t stream);

// MaxPool (max) or AveragePool of float32 / float16 planes (Pool2dValue).
template <typename T>
Status LaunchPool2d(bool max, const T* x, T* y, const Pool2dGeometry& g, cudaStream_t stream);
// MaxPool of int8 (is_signed) or uint8 planes (MaxPool2dIntValue).
Status LaunchMaxPool2dS8(const void* x, bool is_signed, void* y, const Pool2dGeometry& g, cudaStream_t stream);
// y[p] = mean of x[p * hw, (p + 1) * hw), in double, rounded once.
template <typename T>
Status LaunchGlobalAveragePool(const T* x, T* y, int64_t planes, int64_t hw, cudaStream_t stream);

// The fused INT8 GEMM (gemm_s8_fused.cu; tiling in device_kernels.h):
// r.out [m, n] = RequantizeAccValue(sum over k of a[m, k] * b[n, k], ...) as
// int8 (r.out_signed) or uint8, the int32 sums never written (r.acc unused;
// r.rows = m, r.cols = n). Int8 tensor cores (WMMA, sm_72+); NotSupported when
// the grid would exceed CUDA's limits (m > 65535 * 64).
Status LaunchGemmS8Requantize(const int8_t* a, const int8_t* b, int64_t m, int64_t n, int64_t k, const RequantArgs& r,
                              cudaStream_t stream);
// The same with sparq.MatMulIntegerToFloat's float epilogue (AccToFloatValue) into y [m, n].
Status LaunchGemmS8ToFloat(const int8_t* a, const int8_t* b, int64_t m, int64_t n, int64_t k, const RequantArgs& r,
                           const FloatEpilogue& e, float* y, cudaStream_t stream);

// acc[m, n] = sum over k of a[m, k] * b[n, k] (int8, int32 sums): the
// fallback of the INT8 GEMM for shapes cuBLASLt's IMMA kernels refuse.
Status LaunchGemmS8S32Naive(const int8_t* a, const int8_t* b, int32_t* acc, int64_t m, int64_t n, int64_t k,
                            cudaStream_t stream);

}  // namespace cuda
}  // namespace sparq
