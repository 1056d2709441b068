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

  // Float output (MatMulIntegerToFloat): out_f32[m, n] = float(acc) * f32_scale[n],
  // then + f32_bias[n] when given, each step rounded to float (no fused
  // multiply-add): the bits of kernels/ref's MatMulIntegerToFloatFromAcc.
  float* out_f32 = nullptr;
  int64_t ld_f32 = 0;                // row stride of out_f32 (elements)
  const float* f32_scale = nullptr;  // one per column; required with out_f32
  const float* f32_bias = nullptr;   // one per column, or nullptr
  // Optional: applied to each row of out_f32 after the bias, in place,
  // f32_post(row, row, n, p0, p1, p2) (a gelu_erf_chain_f32 row: a
  // MatMulIntegerToFloat with a GELU fused, runtime/passes/float_fusion.h). Each
  // value on its own, so the row split does not change bits.
  void (*f32_post)(const float* x, float* y, int64_t n, float p0, float p1, float p2) = nullptr;
  float f32_post_params[3] = {0, 0, 0};
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
// these activation sources:
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
  // Pointwise convolution (1x1 kernel, stride 1, no padding, out = in size),
  // weights packed as strips like kRows': the roles of kRows with X = the
  // image read as [pixels, channels] (NCHW transposed, packed per call) and
  // the output written back transposed into NCHW. Same x, y, conv and image
  // strides as kConv. For small planes (14 x 14, 7 x 7), where kConv's strips
  // of tile_cols pixels would be mostly tail.
  kPointwiseConv,
  // Convolution (any window, stride, dilation, padding), weights packed as
  // strips like kRows' with K in (ky, kx, c) order (PackGemmF32 of W permuted
  // so, strips = true): output pixels are the tile's rows, each read from the
  // image by broadcast at its window's offset per tap (a zero-padded copy of
  // the image when the window reaches past it), with no im2col packing; the
  // tile's pixels x channels block is stored transposed into NCHW. Same x, y,
  // conv and image strides as kConv (pad_bottom / pad_right not needed).
  kDirectConv,
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

// INT8 convolution (QLinearConv, group 1) in the NCHW layout, the
// requantization and an optional 256-entry table fused into the output stage.
// Per image b, output channel o < M and output position p = (oy, ox):
//   acc[o, p] = sum_k (W[o, k] - w_zp(o)) * (col[k, p] - x_zero_point)    (int32, wraps mod 2^32)
//   q[o, p]   = RequantizeS32Ref(acc + bias[o], multiplier[o], y_zero_point)   (kernels/ref/quantize.h)
//   y[o, p]   = table == nullptr ? q : table[q ^ table_flip]
// where col [K, P] is the image unfolded in W's own K order: row k = (c, ky,
// kx), taps outside the image holding x_zero_point (so they add 0). Bit for
// bit the reference's QLinearConv (QLinearConvLut with a table). Each output
// byte comes from one task with a fixed K order: the same bytes for every
// thread count.
struct ConvS8Args {
  const PackedGemmS8* w = nullptr;  // W [M, K] (PackGemmS8); panel16x4_s8 needs has_zero_points false
  ConvGeometry conv;                // of one image; conv.k() == w->k
  int64_t batch = 0;
  const void* x = nullptr;  // [batch, C, H, W] bytes, int8_t (x_signed) or uint8_t
  bool x_signed = false;
  int32_t x_zero_point = 0;
  const int32_t* bias = nullptr;      // [M], or nullptr
  const float* multiplier = nullptr;  // [M]: RequantMultiplier(x_scale, w_scale[o], y_scale)
  int32_t y_zero_point = 0;
  bool y_signed = false;
  const uint8_t* table = nullptr;  // 256 bytes, or nullptr
  uint8_t table_flip = 0;
  // A lut256 row (dispatch.h: Lut256Fn), required with a table.
  void (*apply_table)(const uint8_t* table, uint8_t flip, const uint8_t* in, uint8_t* out, int64_t n) = nullptr;
  void* y = nullptr;  // [batch, M, out_h, out_w] bytes
  // Instead of y (ConvInteger, sparq.ConvIntegerToFloat: kernels/cpu/conv_integer.cc),
  // [batch, M, out_h, out_w] of either
  //   y_s32[o, p] = acc[o, p] + bias[o]                                  (int32, wraps)
  //   y_f32[o, p] = float(acc[o, p] + bias[o]) * f32_scale[o] (+ f32_bias[o]) [-> SiLU]   (each step one rounding)
  // multiplier, y_zero_point, y_signed and the table unused then. The VNNI
  // tile finishes the sums in its registers (ConvS8Tile::y_s32 / y_f32); the
  // other rows' tiles leave them raw and the driver finishes them.
  int32_t* y_s32 = nullptr;
  float* y_f32 = nullptr;
  const float* f32_scale = nullptr;  // [M], required with y_f32
  const float* f32_bias = nullptr;   // [M], or nullptr
  // With y_f32: a sigmoid_f32 row (dispatch.h: SigmoidF32Fn) run with times_x
  // over each channel's positions a task finished (ConvIntegerToFloat's
  // activation "Silu": the bits of a separate sparq.Silu node), or nullptr.
  void (*f32_silu)(const float* x, float* y, int64_t n, bool times_x) = nullptr;
  // Or, instead of y_f32, the float values above (after the SiLU) quantized
  // as QuantizeLinear(scale q_scale, zero point q_zero_point) by f32_quantize
  // (a quantize_f32_s8 row, dispatch.h: QuantizeF32Fn) into y_q [batch, M,
  // out_h, out_w] bytes (int8 when q_signed): a sparq.ConvIntegerToFloat
  // whose only reader was a QuantizeLinear (runtime/passes/float_fusion.h).
  void* y_q = nullptr;
  float q_scale = 1.0f;
  int32_t q_zero_point = 0;
  bool q_signed = false;
  void (*f32_quantize)(int64_t n, const float* x, float scale, int32_t zero_point, bool out_signed, void* y) = nullptr;
  ThreadPool* pool = nullptr;
};

struct GemmF32Args {
  const PackedGemmF32* w = nullptr;  // [R, K]
  const float* bias = nullptr;       // [R] or nullptr
  // The clamp of a fused activation: v < out_min ? out_min : v, then
  // v > out_max ? out_max : v (NaN stays NaN). Relu: [0, inf]; Clip: [min, max].
  float out_min = -std::numeric_limits<float>::infinity();
  float out_max = std::numeric_limits<float>::infinity();
  // SiLU of a fused activation, after the clamp: each output row of a tile,
  // while it is in L1, becomes silu(c, c, n, true) (a sigmoid_f32 row, the
  // row a separate sparq.Silu node would run: the same bits), or nullptr.
  void (*silu)(const float* x, float* y, int64_t n, bool times_x) = nullptr;
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

// Rows of a matrix-vector product on GEMM weights packed as strips
// (PackedGemmF32 with strips = true, the layout MatMul's W^T takes): for the
// recurrent products of LSTM / GRU, a few rows of X at a time, where the GEMM
// tile would spend most of its multiply-adds on padding rows.
//   y[i * ld_y + j] = sum_k x[i * ld_x + k] * W[j, k]  (+ bias[j])
// for i < m and the rows j of strips [s0, s1) of W (w->panel(s): rows
// [s * height, (s + 1) * height), the last one cut at w->rows). Each output
// sums its k products in order from 0 in one float accumulator (a fused
// multiply-add per product on SIMD rows), then adds its bias: the bits of
// gemm_f32's tile on the same format, whatever m and [s0, s1).
struct GemvF32Args {
  const PackedGemmF32* w = nullptr;  // [R, K] as strips
  int64_t m = 0;
  const float* x = nullptr;  // [m, K]
  int64_t ld_x = 0;
  const float* bias = nullptr;  // [R] or nullptr
  float* y = nullptr;           // [m, ld_y], ld_y >= R; must not alias x
  int64_t ld_y = 0;
  int64_t s0 = 0, s1 = 0;  // strips of W
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

// The planes of a depthwise convolution that one call of a depthwise row
// computes: `channels` consecutive channels of one image, each [height,
// width] -> [out_h, out_w], and the padded input of the channel-vectorized
// ("lanes") kernels, which hold kLanes channels per register.
struct DepthwiseWindow {
  static constexpr int64_t kLanes = 16;  // channels per register of the lanes kernels
  int64_t channels = 0;
  int64_t height = 0, width = 0, out_h = 0, out_w = 0;
  int64_t kernel_h = 1, kernel_w = 1, stride_h = 1, stride_w = 1, dilation_h = 1, dilation_w = 1;
  int64_t pad_top = 0, pad_left = 0;

  // Columns of x with its padding as the windows read it.
  int64_t PaddedWidth() const {
    const int64_t reach = (out_w - 1) * stride_w + (kernel_w - 1) * dilation_w + 1;
    return reach > pad_left + width ? reach : pad_left + width;
  }
  // Rows of x with its padding that `rows` consecutive output rows read.
  int64_t BandInputRows(int64_t rows) const { return (rows - 1) * stride_h + (kernel_h - 1) * dilation_h + 1; }
  // The lanes kernels go in bands of output rows whose padded input, 64
  // bytes per position (kLanes floats, or INT8's kLanes int16 pairs), fits
  // kLanesBandFloats (128 KB, in L2): all the rows of a 7x7 to 28x28 plane,
  // 5 to 15 rows of a 56x56 or 112x112 one.
  static constexpr int64_t kLanesBandFloats = 32768;
  bool LanesFit() const {
    return out_h > 0 && out_w > 0 && kLanes * BandInputRows(1) * PaddedWidth() <= kLanesBandFloats;
  }
  int64_t LanesBandRows() const {  // output rows per band (LanesFit())
    const int64_t input_rows = kLanesBandFloats / (kLanes * PaddedWidth());
    const int64_t rows = (input_rows - BandInputRows(1)) / stride_h + 1;
    return rows < out_h ? rows : out_h;
  }
  // Floats of the lanes kernels' padded input of one band (0 when !LanesFit()).
  int64_t LanesPaddedFloats() const { return LanesFit() ? kLanes * BandInputRows(LanesBandRows()) * PaddedWidth() : 0; }
  // Outputs of one band of the lanes kernels, rounded up to 16.
  int64_t LanesBandOutputs() const { return LanesFit() ? (LanesBandRows() * out_w + 15) / 16 * 16 : 0; }
};

// INT8 depthwise convolution of the channels of DepthwiseWindow (the op
// depthwise_s8): channel c is the DepthwiseS8Plane of x + c * height * width,
// w + c * kernel_h * kernel_w, bias[c] and multiplier[c], written to
// y + c * out_h * out_w, then, with a table (sparq.QLinearConvLut), each byte
// b of it replaced by table[b ^ (y_signed ? 0x80 : 0)].
struct DepthwiseS8Channels : DepthwiseWindow {
  const void* x = nullptr;  // [channels, height, width], int8_t (x_signed) or uint8_t
  bool x_signed = false;
  int32_t x_zero_point = 0;
  const int16_t* w = nullptr;  // [channels, kernel_h, kernel_w]: w - w_zero_point, in [-255, 255]
  // The same weights as float, channel-minor in blocks of kLanes channels:
  // [ceil(channels / kLanes), kernel_h * kernel_w, kLanes], lanes past
  // `channels` 0 (PackDepthwiseLanes). The lanes kernels read it.
  const float* w_lanes = nullptr;
  const int32_t* bias = nullptr;      // [channels]
  const float* multiplier = nullptr;  // [channels]: x_scale * w_scale[c] / y_scale
  int32_t y_zero_point = 0;
  bool y_signed = false;
  void* y = nullptr;               // [channels, out_h, out_w], int8_t (y_signed) or uint8_t
  const uint8_t* table = nullptr;  // 256 entries, or nullptr
  // Working memory of the kernel, ScratchFloats() floats, not
  // shared with another thread; its contents on entry do not matter.
  float* scratch = nullptr;
  int64_t ScratchFloats() const {
    const int64_t plane = height * width + out_h * out_w;  // DepthwiseS8Plane::ScratchFloats
    if (!LanesFit()) return plane;
    // The padded input of a band, its byte outputs [LanesBandOutputs()][kLanes], a 256-byte block.
    const int64_t lanes = LanesPaddedFloats() + LanesBandOutputs() * kLanes / 4 + 64;
    return plane > lanes ? plane : lanes;
  }
};

// FP32 depthwise convolution of the channels of DepthwiseWindow (the op
// depthwise_f32): channel c is the DepthwiseF32Plane of x + c * height *
// width, w + c * kernel_h * kernel_w and bias[c], written to y + c * out_h *
// out_w, clamped to [out_min, out_max].
struct DepthwiseF32Channels : DepthwiseWindow {
  const float* x = nullptr;        // [channels, height, width]
  const float* w = nullptr;        // [channels, kernel_h, kernel_w]
  const float* w_lanes = nullptr;  // the same, PackDepthwiseLanes: the lanes kernels read it
  const float* bias = nullptr;     // [channels]
  float* y = nullptr;              // [channels, out_h, out_w]
  float out_min = -std::numeric_limits<float>::infinity(), out_max = std::numeric_limits<float>::infinity();
  // Working memory, ScratchFloats() floats, as DepthwiseS8Channels::scratch.
  float* scratch = nullptr;
  int64_t ScratchFloats() const {
    // The padded input of a band, its outputs [LanesBandOutputs()][kLanes].
    return LanesFit() ? LanesPaddedFloats() + LanesBandOutputs() * kLanes : 0;
  }
};

// A pointwise (1x1) FP32 convolution, its clamp, then the depthwise
// convolution of its output and that clamp (the op pointwise_depthwise_f32,
// sparq.PointwiseDepthwise): for the pointwise output channels [c0, c0 +
// channels), channels <= 2 * kLanes, of one image,
//   t[c, p] = clamp(sum over k in order of w_pw[k][c - c0] * x[k, p], then + b_pw[c - c0], pw_min, pw_max)
//   y[c - c0] = the depthwise convolution of the plane t[c] (DepthwiseWindow:
//               height x width -> out_h x out_w), + b_dw[c - c0], clamped to [out_min, out_max]
// for the output rows of bands [band_begin, band_end) of LanesBandRows()
// rows each (band b: rows [b * LanesBandRows(), ...)). t never goes to
// memory: a band computes the rows of t its windows read into the lanes
// kernels' padded input (a row shared by two bands is computed by both, with
// the same bits). Precondition: Fits().
struct PointwiseDepthwiseF32 : DepthwiseWindow {
  const float* x = nullptr;  // [in_channels, height, width]
  int64_t in_channels = 0;
  const float* w_pw = nullptr;  // [in_channels][2 * kLanes], lanes past `channels` 0
  const float* b_pw = nullptr;  // [2 * kLanes], lanes past `channels` 0
  float pw_min = -std::numeric_limits<float>::infinity(), pw_max = std::numeric_limits<float>::infinity();
  const float* w_dw = nullptr;  // [2][kernel_h * kernel_w][kLanes] (PackDepthwiseLanes of the channels from c0)
  const float* b_dw = nullptr;  // [channels]
  float out_min = -std::numeric_limits<float>::infinity(), out_max = std::numeric_limits<float>::infinity();
  float* y = nullptr;  // [channels, out_h, out_w]: the rows of the bands
  int64_t band_begin = 0, band_end = 0;
  // Working memory, ScratchFloats() floats, as DepthwiseS8Channels::scratch.
  float* scratch = nullptr;
  // Whether the rows take the geometry: LanesFit(), windows 3, 5 or 7 wide
  // with stride 1 or 2 and no dilation along x (the lanes kernels'
  // LanesWindowFits, depthwise_lanes_avx512.inc).
  bool Fits() const {
    return LanesFit() && (kernel_w == 3 || kernel_w == 5 || kernel_w == 7) && (stride_w == 1 || stride_w == 2) &&
           dilation_w == 1;
  }
  int64_t Bands() const { return LanesFit() ? (out_h + LanesBandRows() - 1) / LanesBandRows() : 0; }
  int64_t ScratchFloats() const {
    const int64_t lanes = 2 * LanesPaddedFloats() + LanesBandOutputs() * kLanes;  // two blocks' X, one's outputs
    const int64_t planes = height * width + kernel_h * kernel_w;                    // the portable row: t, a channel's w
    return lanes > planes ? lanes : planes;
  }
};

// w_lanes of DepthwiseS8Channels / DepthwiseF32Channels from w [channels, taps].
template <typename T>
std::vector<float> PackDepthwiseLanes(const T* w, int64_t channels, int64_t taps) {
  const int64_t lanes = DepthwiseWindow::kLanes;
  const int64_t blocks = (channels + lanes - 1) / lanes;
  std::vector<float> out(static_cast<size_t>(blocks * taps * lanes), 0.0f);
  for (int64_t c = 0; c < channels; ++c)
    for (int64_t t = 0; t < taps; ++t) out[static_cast<size_t>(((c / lanes) * taps + t) * lanes + c % lanes)] = w[c * taps + t];
  return out;
}

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
// ConvTranspose, in one of two cases, each with kernels/ref's bits (its
// ConvTranspose computes col = w^T x, each value summed left to right in
// float from 0, then scatter-adds col onto the bias tap by tap):
//  - its stride equals its kernel (no dilation, no pads, no output padding):
//    the windows do not overlap, so
//      y[m, i * kh + a, j * kw + b] = bias[m] + sum over c = 0, 1, ... of x[c, i, j] * w[c, m, a, b]
//    with the bias added last;
//  - `windowed`: one input channel (channels 1: a depthwise ConvTranspose,
//    group = channels), any strides, dilations, pads and output size (output
//    padding): each output starts at its bias and adds, tap after tap in
//    (a, b) order, the (0 + x * w) of the input its window places there:
//      y[m, i * sh - pt + a * dh, j * sw - pl + b * dw] += 0 + x[0, i, j] * w[0, m, a, b]
//    (DeepFilterNet3's ERB decoder: 1 x 3 windows at stride 1 x 2 over 100 x 8 planes).
struct ConvTransposeF32Args {
  const float* x = nullptr;     // [channels, height, width]
  const float* w = nullptr;     // [channels, out_channels, kernel_h, kernel_w]
  const float* bias = nullptr;  // [out_channels], or null (0)
  float* y = nullptr;           // [out_channels, out_h, out_w]; out = in * kernel unless windowed
  int64_t channels = 0, out_channels = 0, height = 0, width = 0, kernel_h = 1, kernel_w = 1;
  int64_t m_begin = 0, m_end = 0;
  bool windowed = false;  // the second case: the fields below; channels must be 1
  int64_t stride_h = 1, stride_w = 1, dilation_h = 1, dilation_w = 1, pad_top = 0, pad_left = 0;
  int64_t out_h = 0, out_w = 0;
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

// One head of sparq.Attention (attention_f32.h), all matrices row major:
// Q [m, d] (rows q_ld apart), K^T [d, n] (contiguous), V [n, dv] (rows v_ld
// apart), y [m, dv] (rows y_ld apart). Per row i:
//   s[j] = (sum_t Q[i, t] K^T[t, j]) * scale   (/ scale when divide)
//          + mask[i * mask_row_stride + j * mask_col_stride]   (when mask)
//   y[i, :] = sum_j softmax(s)[j] V[j, :]
struct AttentionF32Args {
  int64_t m = 0, n = 0, d = 0, dv = 0;
  int64_t q_ld = 0, v_ld = 0, y_ld = 0;  // >= d, dv, dv
  const float* q = nullptr;
  const float* kt = nullptr;
  const float* v = nullptr;
  float* y = nullptr;
  float scale = 1.0f;
  bool divide = false;
  const float* mask = nullptr;  // nullptr: none
  int64_t mask_row_stride = 0;  // 0: one mask row for every i
  int64_t mask_col_stride = 1;  // 0: one value for every j
  bool nan_fill = false;        // rows whose softmax is NaN (SoftmaxRowIsNaN) become `fill`
  float fill = 0.0f;
  float* scratch = nullptr;     // 4 * n floats, the kernel's
};

// Columns [n0, n1) of com.microsoft MatMulNBits with 4-bit weights (layout:
// kernels/ref/matmul_nbits.h): y[i, c] = sum_k a[i, k] * w(c, k) + bias[c]
// for i < m, w(c, k) = (code - zero_point) * scale in float32.
struct MatMulNBitsF32Args {
  int64_t m = 0, k = 0;
  const float* a = nullptr;              // [m, k]
  const uint8_t* b = nullptr;            // [n, k_blocks, block_size / 2]
  const float* scales = nullptr;         // [n, k_blocks]
  const uint8_t* zero_points = nullptr;  // [n, ceil(k_blocks / 2)] packed, or nullptr (8)
  const float* bias = nullptr;           // [n] or nullptr
  int64_t block_size = 32, k_blocks = 0;
  int64_t n0 = 0, n1 = 0;
  float* y = nullptr;  // [m, ld_y]
  int64_t ld_y = 0;
};

}  // namespace sparq
