// Internals of kernels/cpu shared by the ISA files: the ISA-independent
// drivers (blocking, packing of activations, zero-point corrections, threads)
// and the small ISA-specific pieces they call (register tiles, block-row
// kernels, requantization of a row). A driver calls a piece once per tile of
// thousands of multiply-adds, so the indirect call costs nothing measurable.
//
// Files compiled for an ISA (gemm_s8_avx2.cc, ...) enable it with
// SPARQ_CPU_TARGET_BEGIN / END (see cpu_target.h) and define their pieces in
// an anonymous namespace, exporting only the kernel entry points declared here.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/cpu/dispatch.h"
#include "kernels/cpu/kernel_args.h"

namespace sparq {
namespace cpu {

// Rows of the requant_s32 op (dispatch.h: RequantS32Fn).
using RequantRowFn = RequantS32Fn;
void RequantRowPortable(int64_t n, const int32_t* acc, const int32_t* bias, int64_t bias_stride,
                        const float* multiplier, int64_t multiplier_stride, int32_t zero_point, bool fuse_relu,
                        bool out_signed, void* out);
// Vectorized versions (x86 builds only; gemm_s8_avx2.cc, gemm_s8_avx512vnni.cc).
void RequantRowAvx2(int64_t n, const int32_t* acc, const int32_t* bias, int64_t bias_stride, const float* multiplier,
                    int64_t multiplier_stride, int32_t zero_point, bool fuse_relu, bool out_signed, void* out);
void RequantRowAvx512(int64_t n, const int32_t* acc, const int32_t* bias, int64_t bias_stride,
                      const float* multiplier, int64_t multiplier_stride, int32_t zero_point, bool fuse_relu,
                      bool out_signed, void* out);

// ---------------------------------------------------------------------------
// INT8 dense GEMM (gemm_s8.cc).
//
// A strip of the packed activations holds `mr` rows of one K slice, step by
// step, in the weights' step width (see PackedGemmS8):
//   panel16x4_s8:  [step][mr][4] uint8   a_u = A + 128 for int8 A, A for uint8 A
//   panel16x2_s16: [step][mr][2] int16   A - a_zp (exact)
// A tile computes c[r * ldc + j] (r < mr, j < 16 * panels) = sum over `steps`
// of strip x panels, adding to c when `accumulate`. `b` is the first panel at
// the slice's first step; panel p starts b_panel_stride bytes after panel p-1.
struct GemmS8Isa {
  int mr;          // rows per tile
  int max_panels;  // panels of 16 columns per tile
  void (*tile)(int64_t steps, const void* a_strip, const void* b, int64_t b_panel_stride, int panels, int32_t* c,
               int64_t ldc, bool accumulate);
  RequantRowFn requant_row;
  // Optional (nullptr: the driver's plain loops): packs a FULL strip of mr
  // rows for panel16x4_s8. Row r of the slice is a + r * lda (k_count bytes,
  // int8 when `flip`: a_u = bits XOR 0x80); the strip (steps * mr * 4 bytes)
  // is already zeroed. Adds each row's sum of a_u to row_sums[r].
  void (*pack_strip_s8)(const uint8_t* a, int64_t lda, int64_t k_count, bool flip, uint8_t* strip,
                        int32_t* row_sums);
  // Optional (nullptr: DequantRowPortable): S8Epilogue's float output of one
  // row of n accumulators, the same bits.
  void (*dequant_row)(int64_t n, const int32_t* acc, const float* scale, const float* bias, float* out) = nullptr;
  // Optional (nullptr: CorrectRowPortable): the panel16x4_s8 correction of one
  // row, mod 2^32 (see gemm_s8.cc).
  void (*correct_row)(int64_t n, uint32_t* acc, uint32_t za_u, const int32_t* col_sums, uint32_t a_sum,
                      const int32_t* zb_s) = nullptr;
};
// acc[j] -= zb_s[j] * a_sum (zb_s null: no weight zero points), then
// acc[j] -= za_u * col_sums[j], all mod 2^32.
void CorrectRowPortable(int64_t n, uint32_t* acc, uint32_t za_u, const int32_t* col_sums, uint32_t a_sum,
                        const int32_t* zb_s);
// out[j] = float(acc[j]) * scale[j] (+ bias[j]), two roundings (S8Epilogue::out_f32).
void DequantRowPortable(int64_t n, const int32_t* acc, const float* scale, const float* bias, float* out);
void GemmS8Driver(const GemmS8Args& args, const GemmS8Isa& isa);

// ---------------------------------------------------------------------------
// FP32 sparse GEMM (spmm_f32.cc). Both kernels work on a tile of X^T: rows
// k = 0..K_padded-1, `mt` = v * lanes columns (activation rows m), row k at
// xt + k * ld_xt, rows past K zero. They write out[i * mt + l], i < rows.
struct SpmmF32Isa {
  int lanes;             // floats per vector register
  int max_accumulators;  // vector accumulators the tile may keep in registers
  // One block row of a BSR matrix (br x bc blocks) over the tile; bias: br values or nullptr.
  void (*bsr_block_row)(int br, int bc, int v, const float* xt, int64_t ld_xt, const int32_t* col_index,
                        const float* values, int64_t blocks, const float* bias, float* out);
  // `rows` (1..4) consecutive rows of an N:M matrix over the tile. values /
  // indices of row i start at i * row_stride (= groups * keep).
  void (*nm_rows)(int group, int keep, int v, const float* xt, int64_t ld_xt, const float* values,
                  const uint8_t* indices, int64_t groups, int64_t row_stride, int rows, const float* bias, float* out);
};
void SpmmBsrF32Driver(const SpmmBsrF32Args& args, const SpmmF32Isa& isa);
void SpmmNmF32Driver(const SpmmNmF32Args& args, const SpmmF32Isa& isa);

// ---------------------------------------------------------------------------
// INT8 block-sparse GEMM (spmm_s8.cc). The X^T tile is packed by the driver in
// the kernel's k-group layout, mt = v * lanes columns:
//   k_group 4: [K_padded / 4][mt][4] uint8  x_u = X + 128 for int8 X, X for uint8 X
//   k_group 2: [K_padded / 2][mt][2] int16  X - x_zp
//   k_group 1: [K_padded][mt]        int16  X - x_zp
// The block-row kernel writes out[i * mt + l] = sum over the row's blocks.
struct SpmmS8Isa {
  int lanes;
  int k_group;
  int max_accumulators;
  void (*bsr_block_row)(int br, int bc, int v, const void* xt, const int32_t* col_index, const int8_t* values,
                        int64_t blocks, int32_t* out);
  RequantRowFn requant_row;
};
void SpmmBsrS8Driver(const SpmmBsrS8Args& args, const SpmmS8Isa& isa);

// ---------------------------------------------------------------------------
// FP32 dense GEMM (gemm_f32.cc). The driver packs strips of B, k-major:
// strip[kk * cols + j] = B[k0 + kk][j0 + j] (zero past the last column), and
// calls the tile on one W panel (at its k0) and one strip for kc values of k.
// The tile computes the tile_rows x tile_cols block
//   c[i * ldc + j] (i < rows, j < cols) = (accumulate ? c : 0) + sum_kk a[kk * tr + i] * b[kk * ldb + j]
// adding the products one k at a time, in order, then, with `ep` (the last
// slice of k), adds the bias and clamps before it stores.
//
// A convolution strip's pixels fall into runs, each inside one output row:
// run r covers strip columns [t, t + len), output row oy, columns ox0... A
// strip packer fills strip[kk * tc + j] = im2col(image)[k0 + kk][pixel j]
// for kk < kc (zero in the padding and for j >= cols).
struct ConvStripRun {
  int64_t oy, ox0;
  int t, len;
};
using PackConvStripFn = void (*)(const ConvGeometry& g, const float* image, const ConvStripRun* runs, int num_runs,
                                 int cols, int64_t k0, int64_t kc, int tc, float* strip);
void PackConvStripPortable(const ConvGeometry& g, const float* image, const ConvStripRun* runs, int num_runs, int cols,
                           int64_t k0, int64_t kc, int tc, float* strip);

// The end of a GEMM, applied in registers: v += row_bias[i] + col_bias[j],
// then v < lo ? lo : v and v > hi ? hi : v when `clamp` (NaN stays NaN).
struct TileEpilogue {
  const float* row_bias = nullptr;  // tile_rows values (zero past `rows`), or nullptr
  const float* col_bias = nullptr;  // tile_cols values (zero past `cols`), or nullptr
  bool clamp = false;
  float lo = 0.0f, hi = 0.0f;
};

void StoreTransposedPortable(const float* tile, int64_t ldt, int rows, int cols, float* y, int64_t ld);
// panel[kk * tr + i] = x[i * ld_x + kk] for kk < kc, i < rows, and 0 for
// rows <= i < tr: tile_rows rows of a row-major X packed for the tile (kRows).
void PackRowsPanelPortable(const float* x, int64_t ld_x, int rows, int64_t kc, int tr, float* panel);

// kDirectConv's tile: the same block as `tile` with A read in place, pixel
// i's value for tap t and channel kk at pixels[i][taps[t] + kk * plane]:
//   c[i * ldc + j] = (accumulate ? c : 0) + sum_t sum_kk pixels[i][taps[t] + kk * plane] * b[t * b_tap + kk * tc + j]
// summed tap after tap, k in order within a tap; then `ep` as for `tile`.
// pixels[i] is read for i < rows only.
using DirectTileFn = void (*)(const float* const* pixels, const int64_t* taps, int num_taps, int64_t kc, int64_t plane,
                              const float* b, int64_t b_tap, float* c, int64_t ldc, int rows, int cols,
                              bool accumulate, const TileEpilogue* ep);

// kShiftedConv's tile, every tap of a channel slice in registers: the block
// of `tile` with a and b advanced per tap,
//   c[i * ldc + j] = (accumulate ? c : 0) + sum_t sum_kk a[t * a_tap + kk * tr + i] * b[taps[t] + kk * ldb + j]
// summed tap after tap, k in order within a tap; then `ep` as for `tile`.
using ShiftedTileFn = void (*)(const float* a, int64_t a_tap, const float* b, const int64_t* taps, int num_taps,
                               int64_t kc, int64_t ldb, float* c, int64_t ldc, int rows, int cols, bool accumulate,
                               const TileEpilogue* ep);

struct GemmF32Isa {
  int tile_rows;
  int tile_cols;
  // b: a packed strip (ldb = tile_cols) or, for 1x1 convolutions, the
  // activations themselves (ldb = output pixels; all tile_cols columns real).
  void (*tile)(int64_t kc, const float* a, const float* b, int64_t ldb, float* c, int64_t ldc, int rows, int cols,
               bool accumulate, const TileEpilogue* ep);
  PackConvStripFn pack_conv_strip = PackConvStripPortable;
  // y[j * ld + i] = tile[i * ldt + j] for i < rows <= tile_rows, j < cols <=
  // tile_cols: a tile of kPointwiseConv (pixels x channels) stored into NCHW.
  void (*store_transposed)(const float* tile, int64_t ldt, int rows, int cols, float* y, int64_t ld) =
      StoreTransposedPortable;
  void (*pack_rows_panel)(const float* x, int64_t ld_x, int rows, int64_t kc, int tr, float* panel) =
      PackRowsPanelPortable;
  DirectTileFn direct_tile = nullptr;  // nullptr: the driver's portable one for the tile's shape
  ShiftedTileFn shifted_tile = nullptr;  // nullptr: kShiftedConv calls `tile` once per tap
};
void GemmF32Driver(const GemmF32Args& args, const GemmF32Isa& isa);

// ---------------------------------------------------------------------------
// FP32 depthwise convolution planes (depthwise_f32*.cc; DepthwiseF32Plane in
// kernel_args.h), the rows of the depthwise_f32 op.
void DepthwiseF32PlanePortable(const DepthwiseF32Plane& p);
void DepthwiseF32PlaneAvx2(const DepthwiseF32Plane& p);
void DepthwiseF32PlaneAvx512(const DepthwiseF32Plane& p);
// The rows of the depthwise_f32 op (DepthwiseF32Channels in kernel_args.h):
// the planes one by one (depthwise_f32.cc), or 16 channels per register
// (depthwise_f32_lanes_avx512.cc).
void DepthwiseF32ByPlanes(const DepthwiseF32Channels& a, void (*plane)(const DepthwiseF32Plane&));
// The calling thread's working memory for the depthwise rows' `scratch`: at
// least `floats` floats, kept for the thread's next call (grown, never
// shrunk), so that a run allocates nothing once warm. One user at a time
// per thread.
float* DepthwiseThreadScratch(int64_t floats);
void DepthwiseF32ChannelsPortable(const DepthwiseF32Channels& a);
void DepthwiseF32ChannelsAvx2(const DepthwiseF32Channels& a);
void DepthwiseF32ChannelsLanesAvx512(const DepthwiseF32Channels& a);
// The rows of the pointwise_depthwise_f32 op (PointwiseDepthwiseF32 in
// kernel_args.h): the portable one computes t plane by plane and runs
// DepthwiseF32PlanePortable on it (depthwise_f32.cc), the AVX-512 one
// keeps 16 channels per register (depthwise_f32_lanes_avx512.cc).
void PointwiseDepthwiseF32Portable(const PointwiseDepthwiseF32& a);
void PointwiseDepthwiseF32LanesAvx512(const PointwiseDepthwiseF32& a);
// Whether the AVX-512 plane kernel's shifted rows take the planes (stride 1,
// "same" padding along x, windows 3 or 5 wide, rows of 16 to 4096 columns
// with at most a quarter of the last 16-lane block idle, kernel_h <= 16): there they beat the lanes kernel's transposes, which
// hands such planes to DepthwiseF32PlaneAvx512. Defined in depthwise_f32.cc
// (no ISA code), for both kernels.
bool DepthwiseF32ShiftedFits(const DepthwiseF32Plane& p);
bool DepthwiseF32ShiftedFits(const DepthwiseF32Channels& a);

// ---------------------------------------------------------------------------
// Per-tensor quantization glue (qdq_glue.cc, qdq_glue_avx2.cc, qdq_glue_avx512.cc): the rows of
// the quantize_f32, dequantize_s8, qlinear_add_s8 and qlinear_mul_s8 ops (dispatch.h).
void QuantizeRowPortable(int64_t n, const float* x, float scale, int32_t zero_point, bool out_signed, void* y);
void DequantizeRowPortable(int64_t n, const void* x, bool x_signed, float scale, int32_t zero_point, float* y);
void QLinearAddRowPortable(int64_t n, const void* a, float a_scale, int32_t a_zp, const void* b, float b_scale,
                           int32_t b_zp, float y_scale, int32_t y_zp, bool is_signed, void* y);
void QuantizeRowAvx2(int64_t n, const float* x, float scale, int32_t zero_point, bool out_signed, void* y);
void DequantizeRowAvx2(int64_t n, const void* x, bool x_signed, float scale, int32_t zero_point, float* y);
void QLinearAddRowAvx2(int64_t n, const void* a, float a_scale, int32_t a_zp, const void* b, float b_scale,
                       int32_t b_zp, float y_scale, int32_t y_zp, bool is_signed, void* y);
void QLinearMulRowPortable(int64_t n, const void* a, float a_scale, int32_t a_zp, const void* b, float b_scale,
                           int32_t b_zp, float y_scale, int32_t y_zp, bool is_signed, void* y);
void QLinearMulRowAvx2(int64_t n, const void* a, float a_scale, int32_t a_zp, const void* b, float b_scale,
                       int32_t b_zp, float y_scale, int32_t y_zp, bool is_signed, void* y);
void QuantizeRowAvx512(int64_t n, const float* x, float scale, int32_t zero_point, bool out_signed, void* y);
void QLinearAddRowAvx512(int64_t n, const void* a, float a_scale, int32_t a_zp, const void* b, float b_scale,
                         int32_t b_zp, float y_scale, int32_t y_zp, bool is_signed, void* y);
void QLinearMulRowAvx512(int64_t n, const void* a, float a_scale, int32_t a_zp, const void* b, float b_scale,
                         int32_t b_zp, float y_scale, int32_t y_zp, bool is_signed, void* y);

// The rows of abs_histogram_f32 (histogram_f32*.cc; dispatch.h:
// AbsHistogramF32Fn), and the scalar counting the SIMD rows share: bins
// counted into kWays sub-histograms in turn (uint32: drained into the int64
// counts at least every kDrainEvery values).
int64_t AbsHistogramRowPortable(const float* x, int64_t n, double scale, int64_t last, int64_t* counts);
int64_t AbsHistogramRowAvx2(const float* x, int64_t n, double scale, int64_t last, int64_t* counts);
int64_t AbsHistogramRowAvx512(const float* x, int64_t n, double scale, int64_t last, int64_t* counts);
class BinCounter {
 public:
  static constexpr int64_t kWays = 4;
  static constexpr int64_t kBlock = 1024;              // bins computed per Count call
  static constexpr int64_t kMinValuesPerBin = 4;       // fewer values than this per bin: the reference loop
  static constexpr int64_t kDrainEvery = int64_t{1} << 30;
  explicit BinCounter(int64_t bins);
  void Count(const int32_t* bin, int64_t n);  // each bin[i] < bins
  void Drain(int64_t* counts);                // adds the counts so far, and starts again from zero
 private:
  int64_t bins_;
  std::vector<uint32_t> sub_;
};

// The rows of xlogy_sum_f64 (xlogy_f64*.cc): the portable one is the
// reference's loop; the AVX-512 one sums 8 lanes apart with its own
// logarithm (about 1 ulp), so its sum differs from the reference's in the
// last bits: |got - want| <= kXLogYSumF64RelTol * sum |x log y|.
constexpr double kXLogYSumF64RelTol = 1e-14;
double XLogYSumRowPortable(const double* x, const double* y, const double* z, int64_t n);
double XLogYSumRowAvx512(const double* x, const double* y, const double* z, int64_t n);

// The range of a float row (binary_f32*.cc), the rows of the minmax_f32 op,
// and the rows of the binary_f32 op (dispatch.h: MinMaxF32Fn, BinaryF32Fn).
void MinMaxRowPortable(const float* x, int64_t n, float* lo, float* hi);
void MinMaxRowAvx2(const float* x, int64_t n, float* lo, float* hi);
void MinMaxRowAvx512(const float* x, int64_t n, float* lo, float* hi);
void BinaryRowPortable(BinaryF32Op op, int64_t n, const float* a, int64_t a_step, const float* b, int64_t b_step,
                       float* y);
void BinaryRowAvx2(BinaryF32Op op, int64_t n, const float* a, int64_t a_step, const float* b, int64_t b_step,
                   float* y);
void BinaryRowAvx512(BinaryF32Op op, int64_t n, const float* a, int64_t a_step, const float* b, int64_t b_step,
                     float* y);

// INT8 depthwise convolution planes (quant_conv_depthwise_simd.cc,
// quant_conv_depthwise_avx512*.cc; DepthwiseS8Plane in kernel_args.h).
void DepthwiseS8PlanePortable(const DepthwiseS8Plane& p);
void DepthwiseS8PlaneAvx2(const DepthwiseS8Plane& p);
void DepthwiseS8PlaneAvx512(const DepthwiseS8Plane& p);
void DepthwiseS8PlaneAvx512Vnni(const DepthwiseS8Plane& p);
// The rows of the depthwise_s8 op (DepthwiseS8Channels in kernel_args.h):
// the planes one by one, then the table (quant_conv_depthwise_simd.cc), or
// 16 channels per register (quant_conv_depthwise_lanes_avx512vbmi.cc).
void DepthwiseS8ByPlanes(const DepthwiseS8Channels& a, void (*plane)(const DepthwiseS8Plane&), Lut256Fn table);
void DepthwiseS8ChannelsPortable(const DepthwiseS8Channels& a);
void DepthwiseS8ChannelsAvx2(const DepthwiseS8Channels& a);
void DepthwiseS8ChannelsAvx512(const DepthwiseS8Channels& a);
void DepthwiseS8ChannelsAvx512Vnni(const DepthwiseS8Channels& a);
void DepthwiseS8ChannelsAvx512Vbmi(const DepthwiseS8Channels& a);

// 2-D MaxPool (pool.cc), the rows of the maxpool2d op: MaxPool2dWith runs
// the planes with `interior` for each float32 output row's interior columns
// (windows inside the input):
//   y[i] = taps[0][i * stride], then for t = 1 .. num_taps - 1 in order:
//   y[i] = taps[t][i * stride] if it is greater, or NaN where y[i] is not,
// for i < n (num_taps >= 1): the reference's maximum, bit for bit. Bytes
// take the portable path on every row (maxpool_f32_simd.cc: the SIMD rows).
using MaxPoolInteriorF32Fn = void (*)(const float* const* taps, int num_taps, int64_t stride, float* y, int64_t n);
void MaxPoolInteriorF32Portable(const float* const* taps, int num_taps, int64_t stride, float* y, int64_t n);
void MaxPool2dWith(const MaxPool2dArgs& args, MaxPoolInteriorF32Fn interior);
void MaxPool2dPortable(const MaxPool2dArgs& args);
void MaxPool2dAvx2(const MaxPool2dArgs& args);
void MaxPool2dAvx512(const MaxPool2dArgs& args);

// 256-entry byte tables (lut_avx512vbmi.cc), the rows of the lut256 op.
void ApplyTablePortable(const uint8_t* table, uint8_t flip, const uint8_t* in, uint8_t* out, int64_t n);
void ApplyTableAvx512Vbmi(const uint8_t* table, uint8_t flip, const uint8_t* in, uint8_t* out, int64_t n);

// ---------------------------------------------------------------------------
// INT8 convolution in NCHW (conv_s8.cc; ConvS8Args in kernel_args.h). Per
// image the driver packs the unfolded activations col [K, P] into blocks of
// 16 output positions, one 64-byte step after another, with the step size of
// the weights' panel format:
//
//   block b, step s: position i of the block at bytes 4i .. 4i + 3, holding
//     panel16x4_s8:   4 u8  x_u = col + 128 (int8 x; col for uint8) of k = 4s .. 4s + 3
//     panel16x2_s16:  2 s16 col - x_zero_point                      of k = 2s, 2s + 1
//   (k past K and positions past P: 0)
//
// Weights stay in their GEMM panels (PackGemmS8: 16 channels x 4 bytes per
// step), so a channel's step is one 4-byte broadcast. A tile multiplies 8
// channels by one or two blocks and requantizes in registers:
//   acc[c][i] = sum over steps of (block i's step) . (channel c's step)
//   y[c * ld_y + i] = RequantizeS32Ref(acc + offset[c], multiplier[c], zero_point)
// For panel16x4_s8, offset = bias - (x_zero_point + 128 or 0) * col_sums
// (the +128 trick of gemm_s8.cc, w_zp = 0); for panel16x2_s16, offset = bias.
// Long K runs in slices of steps (so that a slice of the blocks stays in L1):
// the sums of the slices before come from `partial` and, but for the last
// slice, go back there instead of to y. The order of K is the same for every
// thread count.
struct ConvS8Tile {
  int64_t steps = 0;             // steps of this slice
  int32_t* partial = nullptr;    // [8][32] int32 sums (channel c, position i at partial[32c + i]), or nullptr: one slice
  bool first_slice = true;       // the sums start at 0 (else from partial)
  bool last_slice = true;        // requantize into y (else store the sums to partial)
  const uint8_t* w = nullptr;  // the tile's first channel at step 0: channel c at + 4c, step s at + 64s
  int channels = 0;            // channels to store, 1..8 (all 8 are read: the panel is zero past the last)
  const uint8_t* col = nullptr;  // the first block
  int blocks = 1;                // 1 or 2
  int64_t block_stride = 0;      // bytes between blocks
  int positions = 0;             // positions to store, 1..16 * blocks
  bool s16 = false;              // panel16x2_s16 steps (else panel16x4_s8)
  const int32_t* offset = nullptr;    // [channels], readable (and 0) up to 8
  const float* multiplier = nullptr;  // [channels]
  bool multipliers_finite = false;    // every multiplier of the call is finite (no NaN products)
  bool multipliers_below_one = false;  // every |multiplier| < 1: each product rounds into int32's range
  int32_t zero_point = 0;
  bool out_signed = false;
  uint8_t* y = nullptr;  // channel c, position i at y[c * ld_y + i]
  int64_t ld_y = 0;
  // Raw sums finished by the tile (ConvS8Driver's raw_tile, only with
  // ConvS8Args::y_s32 / y_f32): in the last slice, acc = sums + offset[c]
  // (mod 2^32) stored as int32 at y_s32, or float(acc) * f32_scale[c], then
  // + f32_bias[c] when given (one rounding each, no fused multiply-add), at
  // y_f32 (channel c, position i at [c * ld_y + i]); y and multiplier unused.
  int32_t* y_s32 = nullptr;
  float* y_f32 = nullptr;
  const float* f32_scale = nullptr;  // [channels]
  const float* f32_bias = nullptr;   // [channels] or nullptr
};
using ConvS8TileFn = void (*)(const ConvS8Tile& tile);
// Optional (nullptr: the driver's SSE2 / plain loops): packs 4 whole blocks
// (64 positions) of u8 steps for panel16x4_s8. Step s of block b (b < 4)
// goes to dst + b * block_bytes + 64 s, from rows 4s .. 4s + 3 of col
// (row r at col + r * ld, 64 bytes each, XOR flip; rows past k: 0).
using ConvS8Pack4Fn = void (*)(const uint8_t* col, int64_t ld, int64_t k, int64_t steps, uint8_t flip, uint8_t* dst,
                               int64_t block_bytes);
// Optional (nullptr: tiles only): 1 to kConvS8ColumnMax consecutive output
// positions of one block, for up to 16 channels (one weight panel) of
// panel16x4_s8, over all steps: a last block that holds at most
// kConvS8ColumnMax positions (a 7 x 7 plane's 49th), or every position of a
// convolution with so few (Silero VAD's 1-4), which a tile would compute as a
// whole block of 16. Each step loads the panel's 64 bytes once for all the
// positions; a tile would multiply 16 positions where most are padding.
//   acc[j][i] = offset[j] + sum over steps of (position i's 4 bytes) . (panel channel j's 4 bytes)
// then for j in [lane_begin, lane_end) and i < positions, as the tile's:
//   y[j * ld_y + i]     = RequantizeS32Ref(acc[j][i], multiplier[j], zero_point)   (bytes), or
//   y_s32[j * ld_y + i] = acc[j][i]                                               (raw int32), or
//   y_f32[j * ld_y + i] = float(acc[j][i]) * f32_scale[j], then + f32_bias[j]      (raw float)
// (offset, multiplier, f32_scale and f32_bias start at the panel's first
// channel; offset is readable, and 0, up to 16 lanes; the others up to lane_end.)
struct ConvS8Column {
  const uint8_t* col = nullptr;  // position 0's step 0: 4 bytes; position i at + 4 i, step s at + 64 s
  int positions = 1;             // 1 .. kConvS8ColumnMax
  const uint8_t* w = nullptr;    // the panel's step 0 (64 bytes: 16 channels x 4 bytes)
  int64_t steps = 0;
  int lane_begin = 0, lane_end = 0;  // the panel's channels to store
  const int32_t* offset = nullptr;
  const float* multiplier = nullptr;  // bytes out
  bool multipliers_finite = false;
  int32_t zero_point = 0;
  bool out_signed = false;
  uint8_t* y = nullptr;
  int64_t ld_y = 0;
  int32_t* y_s32 = nullptr;  // raw int32 out (y and multiplier unused)
  float* y_f32 = nullptr;    // raw float out
  const float* f32_scale = nullptr;
  const float* f32_bias = nullptr;  // or nullptr
};
using ConvS8ColumnFn = void (*)(const ConvS8Column& column);
inline constexpr int kConvS8ColumnMax = 4;
// Optional (nullptr: the driver unfolds into a col, then packs it): blocks
// [b0, b1) of image xi's unfolded matrix [k, out_size] for panel16x4_s8,
// packed straight from the image, block b0 first (block b - b0 at
// packed + (b - b0) * steps * 64), the bytes PackBlocks writes from the col:
// tap bytes XOR flip, `pad` XOR flip where a tap falls outside the image, 0
// past the last position and in rows past k. The driver calls it only for a
// stride-1 convolution whose output rows have the input's width (row (c, ky,
// kx) at position q reads x[c][q + dy * width + dx]) and a width of at least
// kConvS8UnfoldPackMinWidth.
using ConvS8UnfoldPackFn = void (*)(const ConvGeometry& g, const uint8_t* xi, uint8_t pad, int64_t k, int64_t steps,
                                    uint8_t flip, int64_t b0, int64_t b1, uint8_t* packed);
inline constexpr int64_t kConvS8UnfoldPackMinWidth = 8;
// raw_tile: the tile finishes raw sums itself (ConvS8Tile::y_s32 / y_f32)
// when the call wants them; else they go through `partial` and the driver's loops.
void ConvS8Driver(const ConvS8Args& args, ConvS8TileFn tile, ConvS8Pack4Fn pack4 = nullptr,
                  ConvS8ColumnFn column = nullptr, bool raw_tile = false, ConvS8UnfoldPackFn unfold_pack = nullptr);

// ---------------------------------------------------------------------------
// INT8 N:M sparse GEMM (spmm_nm_s8.cc), vectorized over output channels: a
// vector lane holds one channel n, and a step covers 8 consecutive k, in
// which every row of a 2:4 or 4:8 matrix keeps exactly 4 values. The driver
// packs X row-major ([M_padded][K8], K8 = K rounded up to 8, zero padded) and
// uses W re-packed in panels of R = panel_rows channels (NmS8Panels, built once
// by PrepackSpmmNmS8, or by the driver per call when not given):
//
//   panel, per step s (128 bytes):
//     u8 activations (VNNI, portable):  [R][4] s8 weights | [R][4] u8 positions (0..7) of each weight in the step
//     s16 activations (AVX2), 2 halves: [R][2] s16 weights (kept values 2h, 2h+1) | [R][4] u8 byte
//                                       positions of those two k in the step's 8 int16 (2p, 2p+1 per value)
//
// A tile broadcasts the 8 activations of a step (row m) to every lane, picks
// each lane's 4 (or 2) with a byte shuffle by the positions and multiplies
// them with the lane's weights: 4 (or 2) useful products per instruction.
//   u8:  x_u = X + 128 for int8 X (X for uint8), corrected by (x_zp + shift) * row_sums[n]
//   s16: X - x_zp exactly, no correction
// tile: out[r * ld_out + j] (r < mr, j < panels * panel_rows) = sum over `steps`
// of x row r (x + r * ld_x elements) with panel p < panel_count at panels + p * panel_stride bytes.
struct SpmmNmS8Isa {
  int panel_rows;  // channels per panel (lanes of the vector)
  bool x_s16;      // activations as int16 X - x_zp (else u8 x_u)
  int mr;          // activation rows per tile
  int max_panels;  // panels per tile
  void (*tile)(int64_t steps, const void* x, int64_t ld_x, const uint8_t* panels, int64_t panel_stride,
               int panel_count, int32_t* out, int64_t ld_out);
  RequantRowFn requant_row;
};
void SpmmNmS8Driver(const SpmmNmS8Args& args, const SpmmNmS8Isa& isa);
// Every panel of w for a kernel with these panel_rows and x_s16 (the AVX2
// kernel: 8 and true; VNNI and portable: 16 and false).
NmS8Panels BuildNmS8Panels(const NmS8& w, int panel_rows, bool x_s16);

// ---------------------------------------------------------------------------
// Kernel entry points (the functions of the dispatch table).
void GemmF32Portable(const GemmF32Args& args);
void GemmF32Avx2(const GemmF32Args& args);
void GemmF32Avx512(const GemmF32Args& args);

// gemv_f32*.cc: GemvF32Args on strips of tile_cols rows (portable: any f32
// panel format; AVX2: panel6x16_f32; AVX-512: panel8x32_f32).
void GemvF32Portable(const GemvF32Args& args);
void GemvF32Avx2(const GemvF32Args& args);
void GemvF32Avx512(const GemvF32Args& args);

void GemmS8Portable(const GemmS8Args& args);
void GemmS8Avx2(const GemmS8Args& args);
void GemmS8Avx512Vnni(const GemmS8Args& args);

void SpmmBsrF32Portable(const SpmmBsrF32Args& args);
void SpmmBsrF32Avx2(const SpmmBsrF32Args& args);
void SpmmBsrF32Avx512(const SpmmBsrF32Args& args);

void SpmmNmF32Portable(const SpmmNmF32Args& args);
void SpmmNmF32Avx2(const SpmmNmF32Args& args);
void SpmmNmF32Avx512(const SpmmNmF32Args& args);

void SpmmBsrS8Portable(const SpmmBsrS8Args& args);
void SpmmBsrS8Avx2(const SpmmBsrS8Args& args);
void SpmmBsrS8Avx512Vnni(const SpmmBsrS8Args& args);

void SpmmNmS8Portable(const SpmmNmS8Args& args);
void SpmmNmS8Avx2(const SpmmNmS8Args& args);
void SpmmNmS8Avx512Vnni(const SpmmNmS8Args& args);

void ConvS8Portable(const ConvS8Args& args);
void ConvS8Avx2(const ConvS8Args& args);
void ConvS8Avx512Vnni(const ConvS8Args& args);
// At most 8 channels, undilated rows of stride 1 to 4: the window without unfolding
// (conv_s8_window_avx512vbmi.cc); else ConvS8Avx512Vnni.
void ConvS8Avx512Vbmi(const ConvS8Args& args);

// True when this build has the x86 ISA files (x86-64 with GCC or clang).
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define SPARQ_CPU_X86 1
#else
#define SPARQ_CPU_X86 0
#endif

}  // namespace cpu
}  // namespace sparq
