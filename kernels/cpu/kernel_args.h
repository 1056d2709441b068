// Arguments of sparq's fast CPU kernels (kernels/cpu). Every kernel of an op
// takes the same argument struct, whatever its ISA; kernels/cpu/dispatch.h
// checks the arguments and picks the kernel. Results match kernels/ref: the
// INT8 kernels bit for bit, the FP32 kernels up to summation order.
#pragma once

#include <cstdint>
#include <limits>
#include <vector>

#include "kernels/packed_formats.h"
#include "kernels/parallel.h"
#include "kernels/ref/gemm_int.h"

namespace sparq {

// Output stage of the INT8 kernels. The int32 accumulator
//   acc[m, n] = sum_k (A[m, k] - a_zp) * (W[n, k] - w_zp[n])
// is written raw to out_s32 (when set) and/or requantized to out_q (when set)
// exactly as RequantizeS32Ref does (kernels/ref/quantize.h):
//   out_q = saturate(RoundHalfToEven(float(acc + bias[n]) * multiplier[n]) + zero_point), ReLU fused on request.
// Channel n is the output channel (the row of W); bias and multiplier are per
// channel or one value for all.
struct S8Epilogue {
  int32_t* out_s32 = nullptr;  // raw accumulators, or nullptr
  int64_t ld_s32 = 0;          // row stride of out_s32 (elements)

  void* out_q = nullptr;       // int8_t or uint8_t output, or nullptr
  bool out_q_signed = true;    // true: int8_t, false: uint8_t
  int64_t ld_q = 0;            // row stride of out_q (elements)
  const int32_t* bias = nullptr;  // added to acc before scaling; nullptr: none
  bool bias_per_channel = true;   // false: bias[0] for every channel
  const float* multiplier = nullptr;  // (a_scale * w_scale) / y_scale, see RequantMultiplier; required with out_q
  bool multiplier_per_channel = true;  // false: multiplier[0] for every channel
  int32_t zero_point = 0;
  bool fuse_relu = false;
};

// Layout of the dense activations of a sparse kernel:
enum class SpmmLayout : uint8_t {
  // X [M, K] (row stride ld_x >= K) and Y [M, N] (ld_y >= N): Y = X * W^T.
  // MatMul / Gemm. The kernel transposes tiles of X internally.
  kRowMajor,
  // X^T [K, M] (ld_x >= M) and Y^T [N, M] (ld_y >= M): Y^T = W * X^T. An NCHW
  // convolution (X^T = im2col columns, M = output pixels) in its native layout.
  kTransposed,
};

// INT8 dense GEMM: acc[m, n] = sum_k (A[m, k] - a_zp(m)) * (W[n, k] - w_zp(n)),
// W packed by PackGemmS8 (zero points included). A is int8 or uint8, row major
// [M, K] with row stride lda >= K. The zero points of A are per tensor or per
// row (GemmZeroPoints) and must lie in A's type range. Output per S8Epilogue
// (row m, column n). int32 sums wrap mod 2^32 as GemmS32Ref's do.
struct GemmS8Args {
  int64_t m = 0;
  const void* a = nullptr;
  bool a_signed = false;  // true: int8_t, false: uint8_t
  int64_t lda = 0;
  GemmZeroPoints a_zp;
  const PackedGemmS8* b = nullptr;
  S8Epilogue out;
  ThreadPool* pool = nullptr;  // null: the calling thread only
};

// FP32 block-sparse GEMM: Y = X * W^T (+ bias[n]) with W [N, K] in BSR.
struct SpmmBsrF32Args {
  SpmmLayout layout = SpmmLayout::kRowMajor;
  int64_t m = 0;
  const float* x = nullptr;
  int64_t ld_x = 0;
  const BsrF32* w = nullptr;
  const float* bias = nullptr;  // [N] or nullptr
  float* y = nullptr;           // must not alias x
  int64_t ld_y = 0;
  ThreadPool* pool = nullptr;
};

// FP32 N:M sparse GEMM: Y = X * W^T (+ bias[n]) with W [N, K] in N:M form.
struct SpmmNmF32Args {
  SpmmLayout layout = SpmmLayout::kRowMajor;
  int64_t m = 0;
  const float* x = nullptr;
  int64_t ld_x = 0;
  const NmF32* w = nullptr;
  const float* bias = nullptr;
  float* y = nullptr;
  int64_t ld_y = 0;
  ThreadPool* pool = nullptr;
};

// INT8 block-sparse GEMM: acc = (X - x_zp) * W^T with W [N, K] int8 BSR,
// symmetric (zero point 0); X int8 or uint8 with one zero point. Output per
// S8Epilogue, in the layout `layout` gives (row-major Y [M, N] or Y^T [N, M];
// channel n is a column of Y or a row of Y^T).
struct SpmmBsrS8Args {
  SpmmLayout layout = SpmmLayout::kRowMajor;
  int64_t m = 0;
  const void* x = nullptr;
  bool x_signed = false;
  int64_t ld_x = 0;
  int32_t x_zero_point = 0;
  const BsrS8* w = nullptr;
  S8Epilogue out;
  ThreadPool* pool = nullptr;
};

// FP32 dense GEMM with packed weights W [R, K] (PackedGemmF32):
//   C[r, j] = clamp(sum_k W[r, k] * B[k, j] + bias[r], out_min, out_max),
// the sum taken left to right in k (in fused multiply-adds), each C element by
// one thread: the same bits for every thread count. B and C come from one of
// two activation sources:
enum class GemmF32Source : uint8_t {
  // MatMul / Gemm: X [M, K] row-major (row stride ld_x), Y [M, R] row-major
  // (ld_y): Y = X * W^T, so B = X^T and C = Y^T. Columns j are the M rows of X.
  kRows,
  // Convolution, NCHW: B = the im2col columns of each image of x (see
  // ConvGeometry), C = that image's output [R, out_h * out_w] in y.
  kConv,
  // Convolution with stride 1, weights packed with K in (ky, kx, c) order
  // (PackGemmF32 of W permuted so): each tap multiplies the zero-padded image
  // shifted by the tap's offset, read in place, with no im2col packing. Same
  // x, y, conv and image strides as kConv (conv.pad_bottom / pad_right used).
  kShiftedConv,
};

// A 2-D convolution of `batch` images of `channels` x height x width (the
// channels of one group) into out_h x out_w outputs per channel.
struct ConvGeometry {
  int64_t channels = 0, height = 0, width = 0;
  int64_t kernel_h = 1, kernel_w = 1;
  int64_t stride_h = 1, stride_w = 1, dilation_h = 1, dilation_w = 1;
  int64_t pad_top = 0, pad_left = 0;
  int64_t pad_bottom = 0, pad_right = 0;  // kShiftedConv only
  int64_t out_h = 0, out_w = 0;

  int64_t k() const { return channels * kernel_h * kernel_w; }
  int64_t out_size() const { return out_h * out_w; }
};

struct GemmF32Args {
  const PackedGemmF32* w = nullptr;  // [R, K]
  const float* bias = nullptr;       // [R] or nullptr
  // The clamp of a fused activation: v < out_min ? out_min : v, then
  // v > out_max ? out_max : v (NaN stays NaN). Relu: [0, inf]; Clip: [min, max].
  float out_min = -std::numeric_limits<float>::infinity();
  float out_max = std::numeric_limits<float>::infinity();
  GemmF32Source source = GemmF32Source::kRows;
  // kRows:
  int64_t m = 0;
  const float* x = nullptr;  // [m, K], also kConv's first image
  int64_t ld_x = 0;
  float* y = nullptr;        // [m, R], also kConv's first output; must not alias x
  int64_t ld_y = 0;
  // kConv: image b reads x + b * x_image_stride and writes y + b * y_image_stride.
  int64_t batch = 0;
  ConvGeometry conv;
  int64_t x_image_stride = 0;
  int64_t y_image_stride = 0;
  // kShiftedConv: most bytes of scratch held at once (padded images and
  // outputs on the padded width); larger batches run in groups of images.
  int64_t workspace_bytes = int64_t{64} << 20;
  ThreadPool* pool = nullptr;
};

// The weights of an N:M INT8 matrix re-packed into the per-step panels of one
// spmm_nm_s8 kernel (layout: kernels/cpu/internal.h, SpmmNmS8Isa). The kernel
// builds them on every call unless it gets them prepacked (PrepackSpmmNmS8 in
// dispatch.h), as dense gemm_s8 gets its weights packed once.
struct NmS8Panels {
  // The matrix they were built from, by its values' buffer (which moving the
  // NmS8 keeps) and shape.
  const int8_t* source_values = nullptr;
  int64_t rows = 0, cols = 0;
  int panel_rows = 0;            // channels per panel: 16 (u8 activations) or 8 (int16)
  bool x_s16 = false;            // built for int16 activations (AVX2)
  int64_t steps = 0;             // steps of 8 k
  int64_t panels = 0;            // ceil(N / panel_rows)
  std::vector<uint8_t> data;     // panels * steps * 128 bytes, panel after panel
};

// INT8 N:M sparse GEMM (2:4, 4:8): acc = (X - x_zp) * W^T with W [N, K] int8
// in N:M form, symmetric (zero point 0); X int8 or uint8 with one zero point.
// Output per S8Epilogue in the layout `layout` gives, as for SpmmBsrS8Args.
struct SpmmNmS8Args {
  SpmmLayout layout = SpmmLayout::kRowMajor;
  int64_t m = 0;
  const void* x = nullptr;
  bool x_signed = false;
  int64_t ld_x = 0;
  int32_t x_zero_point = 0;
  const NmS8* w = nullptr;
  // Optional: w's panels from PrepackSpmmNmS8. Used when built from w for the
  // layout of the kernel that runs; otherwise the kernel builds its own.
  const NmS8Panels* panels = nullptr;
  S8Epilogue out;
  ThreadPool* pool = nullptr;
};

// FP32 depthwise convolution of one channel of one image,
//   y[oy, ox] = clamp(bias + sum over (ky, kx) of w[ky, kx] * x[oy * sh - pt + ky * dh, ox * sw - pl + kx * dw])
// with taps outside x skipped, summed in (ky, kx) order like the reference.
struct DepthwiseF32Plane {
  const float* x = nullptr;  // [height, width]
  const float* w = nullptr;  // [kernel_h, kernel_w]
  float bias = 0.0f;
  float* y = nullptr;  // [out_h, out_w]
  int64_t height = 0, width = 0, out_h = 0, out_w = 0;
  int64_t kernel_h = 1, kernel_w = 1, stride_h = 1, stride_w = 1, dilation_h = 1, dilation_w = 1;
  int64_t pad_top = 0, pad_left = 0;
  float out_min = 0.0f, out_max = 0.0f;  // the clamp (see GemmF32Args)
};

// INT8 depthwise convolution of one channel of one image (QLinearConv with
// group = channels), bit for bit the reference's:
//   acc[oy, ox] = sum over (ky, kx) of w[ky, kx] * (x[oy * sh - pt + ky * dh, ox * sw - pl + kx * dw] - x_zero_point)
//                 (int32; taps outside x add 0, as x_zero_point padding does)
//   y[oy, ox]   = RequantizeS32Ref(acc + bias, multiplier, y_zero_point)   (kernels/ref/quantize.h)
struct DepthwiseS8Plane {
  const void* x = nullptr;  // [height, width], int8_t (x_signed) or uint8_t
  bool x_signed = false;
  int32_t x_zero_point = 0;
  const int16_t* w = nullptr;  // [kernel_h, kernel_w]: w - w_zero_point, in [-255, 255]
  int32_t bias = 0;
  float multiplier = 0.0f;  // x_scale * w_scale / y_scale
  int32_t y_zero_point = 0;
  bool y_signed = false;
  void* y = nullptr;  // [out_h, out_w], int8_t (y_signed) or uint8_t
  int64_t height = 0, width = 0, out_h = 0, out_w = 0;
  int64_t kernel_h = 1, kernel_w = 1, stride_h = 1, stride_w = 1, dilation_h = 1, dilation_w = 1;
  int64_t pad_top = 0, pad_left = 0;
  // Working memory of the kernel, ScratchFloats() floats, not
  // shared with another thread; its contents on entry do not matter.
  float* scratch = nullptr;
  int64_t ScratchFloats() const { return height * width + out_h * out_w; }
};

// 2-D max pooling of NCHW planes without indices, exactly MaxPoolRef:
//   y[p, oy, ox] = max over in-bounds taps (ky, kx) of x[p, oy * sh - pt + ky * dh, ox * sw - pl + kx * dw]
// (the type's lowest value when no tap is in bounds; a NaN wins).
struct MaxPool2dArgs {
  enum class Elem : uint8_t { kF32, kS8, kU8 };
  Elem elem = Elem::kF32;
  const void* x = nullptr;  // [planes, height, width] of elem
  void* y = nullptr;        // [planes, out_h, out_w] of elem
  int64_t planes = 0, height = 0, width = 0, out_h = 0, out_w = 0;
  int64_t kernel_h = 1, kernel_w = 1, stride_h = 1, stride_w = 1, dilation_h = 1, dilation_w = 1;
  int64_t pad_top = 0, pad_left = 0;
  ThreadPool* pool = nullptr;  // planes are split over it; null: this thread
};

// Output channels [m_begin, m_end) of one (batch item, group) of a 2-D
// ConvTranspose whose stride equals its kernel (no dilation, no pads, no
// output padding): the windows do not overlap, so
//   y[m, i * kh + a, j * kw + b] = bias[m] + sum over c = 0, 1, ... of x[c, i, j] * w[c, m, a, b]
// with the sum accumulated left to right in float from 0 and the bias added
// last, as kernels/ref's ConvTranspose computes it (col = w^T x, then the
// scatter-add onto the bias): its bits.
struct ConvTransposeF32Args {
  const float* x = nullptr;     // [channels, height, width]
  const float* w = nullptr;     // [channels, out_channels, kernel_h, kernel_w]
  const float* bias = nullptr;  // [out_channels], or null (0)
  float* y = nullptr;           // [out_channels, height * kernel_h, width * kernel_w]
  int64_t channels = 0, out_channels = 0, height = 0, width = 0, kernel_h = 1, kernel_w = 1;
  int64_t m_begin = 0, m_end = 0;
};

// Nearest-neighbour upsampling of planes by whole factors (Resize with mode
// nearest, asymmetric coordinates, floor rounding, scales [1, 1, sh, sw]):
//   y[p, i, j] = x[p, i / scale_h, j / scale_w]   (integer division)
// for elements of elem_size bytes: a copy, the reference's bytes.
struct ResizeNearestArgs {
  const void* x = nullptr;  // [planes, height, width]
  void* y = nullptr;        // [planes, height * scale_h, width * scale_w]
  int64_t planes = 0, height = 0, width = 0, scale_h = 1, scale_w = 1;
  size_t elem_size = 4;  // 1, 2, 4 or 8
};

}  // namespace sparq
