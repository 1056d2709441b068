// Packed weight formats of sparq's fast kernels, defined once for CPU and CUDA
// code: block-sparse rows (BSR), N:M structured sparsity, and the panel layouts
// of the INT8 GEMM. One traits table (kPackedFormatTraits) names each format
// and gives its block geometry and element type; code asks the table instead
// of switching on formats.
//
// Every packer reads a DENSE ROW-MAJOR weight matrix W of shape [rows, cols] =
// [N, K]: one row per output channel, one column per input (the "B^T" layout
// of a GEMM Y[M, N] = X[M, K] * W^T, and the [Cout, Cin*kh*kw] layout of a
// convolution's weights). "Zero" always means an exact zero: 0.0f or -0.0f for
// float (NaN is a nonzero), 0 for int8. Packers never drop a nonzero value.
//
// Sparse kernels treat the zeros they skip as structural: for finite
// activations they compute what a dense GEMM with the zeros would compute, but
// 0 * Inf or 0 * NaN terms are not formed, as in every sparse library.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "kernels/ref/gemm_int.h"
#include "sparq/status.h"

namespace sparq {

// Element type of a packed format's values.
enum class ElemType : uint8_t { kF32, kS8, kS16 };

const char* ElemTypeName(ElemType type);  // "f32", "s8", "s16"
int ElemTypeBytes(ElemType type);

enum class LayoutKind : uint8_t {
  kBsr,    // block compressed sparse row (BsrMatrix)
  kNm,     // N:M structured sparsity (NmMatrix)
  kPanel,  // dense INT8 GEMM weights in register-panel order (PackedGemmS8)
};

// Every packed format. The order is the order of kPackedFormatTraits.
enum class PackedFormat : uint8_t {
  kBsr1x4F32,
  kBsr4x1F32,
  kBsr4x4F32,
  kBsr8x8F32,
  kBsr16x16F32,
  kBsr1x4S8,
  kBsr4x1S8,
  kBsr4x4S8,
  kBsr8x8S8,
  kBsr16x16S8,
  kNm2of4F32,
  kNm4of8F32,
  kNm2of4S8,
  kNm4of8S8,
  kPanel16x4S8,   // INT8 GEMM weights for vpdpbusd (AVX-512 VNNI) and the portable kernel
  kPanel16x2S16,  // INT8 GEMM weights widened to int16 pairs for vpmaddwd (AVX2)
  kPanel8x32F32,  // FP32 GEMM weights, 8-row panels for the 8 x 32 tile (AVX-512)
  kPanel6x16F32,  // FP32 GEMM weights, 6-row panels for the 6 x 16 tile (AVX2)
  kPanel4x8F32,   // FP32 GEMM weights, 4-row panels for the 4 x 8 tile (portable)
};
inline constexpr int kNumPackedFormats = 19;

struct PackedFormatTraits {
  PackedFormat format;
  const char* name;  // e.g. "bsr4x4_f32", "nm2:4_f32", "panel16x4_s8"
  LayoutKind kind;
  int block_rows;  // BSR: rows of W per block. N:M: 1. Panel: output channels per panel (f32: tile rows).
  int block_cols;  // BSR: columns per block. N:M: group size M. Panel: consecutive k per channel and step
                   // (f32: 1; the tile's activation columns are in tile_cols).
  int tile_cols;   // f32 panels: activation columns of the kernel's register tile; 0 otherwise
  int nm_keep;     // N:M: values kept per group (N); 0 otherwise
  ElemType elem;
};

// clang-format off
inline constexpr PackedFormatTraits kPackedFormatTraits[kNumPackedFormats] = {
  // format                        name             kind                 rows cols tile keep elem
  {PackedFormat::kBsr1x4F32,     "bsr1x4_f32",     LayoutKind::kBsr,     1,   4,   0,   0, ElemType::kF32},
  {PackedFormat::kBsr4x1F32,     "bsr4x1_f32",     LayoutKind::kBsr,     4,   1,   0,   0, ElemType::kF32},
  {PackedFormat::kBsr4x4F32,     "bsr4x4_f32",     LayoutKind::kBsr,     4,   4,   0,   0, ElemType::kF32},
  {PackedFormat::kBsr8x8F32,     "bsr8x8_f32",     LayoutKind::kBsr,     8,   8,   0,   0, ElemType::kF32},
  {PackedFormat::kBsr16x16F32,   "bsr16x16_f32",   LayoutKind::kBsr,    16,  16,   0,   0, ElemType::kF32},
  {PackedFormat::kBsr1x4S8,      "bsr1x4_s8",      LayoutKind::kBsr,     1,   4,   0,   0, ElemType::kS8},
  {PackedFormat::kBsr4x1S8,      "bsr4x1_s8",      LayoutKind::kBsr,     4,   1,   0,   0, ElemType::kS8},
  {PackedFormat::kBsr4x4S8,      "bsr4x4_s8",      LayoutKind::kBsr,     4,   4,   0,   0, ElemType::kS8},
  {PackedFormat::kBsr8x8S8,      "bsr8x8_s8",      LayoutKind::kBsr,     8,   8,   0,   0, ElemType::kS8},
  {PackedFormat::kBsr16x16S8,    "bsr16x16_s8",    LayoutKind::kBsr,    16,  16,   0,   0, ElemType::kS8},
  {PackedFormat::kNm2of4F32,     "nm2:4_f32",      LayoutKind::kNm,      1,   4,   0,   2, ElemType::kF32},
  {PackedFormat::kNm4of8F32,     "nm4:8_f32",      LayoutKind::kNm,      1,   8,   0,   4, ElemType::kF32},
  {PackedFormat::kNm2of4S8,      "nm2:4_s8",       LayoutKind::kNm,      1,   4,   0,   2, ElemType::kS8},
  {PackedFormat::kNm4of8S8,      "nm4:8_s8",       LayoutKind::kNm,      1,   8,   0,   4, ElemType::kS8},
  {PackedFormat::kPanel16x4S8,   "panel16x4_s8",   LayoutKind::kPanel,  16,   4,   0,   0, ElemType::kS8},
  {PackedFormat::kPanel16x2S16,  "panel16x2_s16",  LayoutKind::kPanel,  16,   2,   0,   0, ElemType::kS16},
  {PackedFormat::kPanel8x32F32,  "panel8x32_f32",  LayoutKind::kPanel,   8,   1,  32,   0, ElemType::kF32},
  {PackedFormat::kPanel6x16F32,  "panel6x16_f32",  LayoutKind::kPanel,   6,   1,  16,   0, ElemType::kF32},
  {PackedFormat::kPanel4x8F32,   "panel4x8_f32",   LayoutKind::kPanel,   4,   1,   8,   0, ElemType::kF32},
};
// clang-format on

constexpr bool PackedFormatTraitsInOrder() {
  for (int i = 0; i < kNumPackedFormats; ++i)
    if (static_cast<int>(kPackedFormatTraits[i].format) != i) return false;
  return true;
}
static_assert(PackedFormatTraitsInOrder(), "kPackedFormatTraits rows must follow the PackedFormat enum order");

inline const PackedFormatTraits& Traits(PackedFormat format) {
  return kPackedFormatTraits[static_cast<int>(format)];
}

// The format called `name` (a traits name such as "bsr4x4_f32"), or NotFound
// listing the known names.
StatusOr<PackedFormat> PackedFormatByName(std::string_view name);

// The BSR format with this block shape and element type, or NotSupported.
StatusOr<PackedFormat> BsrFormat(int block_rows, int block_cols, ElemType elem);

// How much of a packed matrix is real data. Counts are of the dense [rows,
// cols] matrix and of what the packed form stores.
struct DensityStats {
  int64_t elements = 0;       // rows * cols
  int64_t nonzeros = 0;       // elements that are not exactly zero
  int64_t blocks = 0;         // BSR: blocks of the block grid; N:M: groups
  int64_t stored_blocks = 0;  // BSR: blocks holding a nonzero; N:M: groups (all are stored)
  int64_t stored_values = 0;  // value slots the packed form holds (zeros inside stored blocks included)
  int64_t packed_bytes = 0;   // bytes of values + index arrays

  double density() const { return elements == 0 ? 0.0 : static_cast<double>(nonzeros) / elements; }
  double sparsity() const { return 1.0 - density(); }
  // Fraction of blocks stored (BSR), the work a block kernel does relative to dense.
  double block_density() const { return blocks == 0 ? 0.0 : static_cast<double>(stored_blocks) / blocks; }
  // Fraction of stored value slots that hold a nonzero (1.0: no zero is stored).
  double fill() const { return stored_values == 0 ? 1.0 : static_cast<double>(nonzeros) / stored_values; }
};

// ---------------------------------------------------------------------------
// BSR: block compressed sparse row.
//
// W [rows, cols] is cut into a grid of block_rows x block_cols blocks (edge
// blocks are zero padded). Only blocks holding a nonzero are stored, block row
// by block row, in increasing block column. Example: 4x4 blocks, W = 8 x 12:
//
//            block col 0   block col 1   block col 2
//          +-------------+-------------+-------------+
//   brow 0 |     A       |   (zero)    |     B       |     row_ptr   = [0, 2, 3]
//          +-------------+-------------+-------------+     col_index = [0, 2, 1]
//   brow 1 |   (zero)    |     C       |   (zero)    |     values    = [A | B | C]
//          +-------------+-------------+-------------+
//
//   Each block is stored row-major, block_rows * block_cols values:
//     A = a00 a01 a02 a03 a10 a11 ... a33     (a_ij = W[4*brow + i][4*bcol + j])
//
// The int8 form also keeps row_sums[n] = sum of row n's values, which kernels
// use to correct for the activation zero point (see kernels/cpu/spmm_s8.cc).
// INT8 weights are symmetric (zero point 0): an exact zero is a pruned weight.
template <typename T>
struct BsrMatrix {
  PackedFormat format = PackedFormat::kBsr4x4F32;
  int64_t rows = 0;  // N
  int64_t cols = 0;  // K
  int block_rows = 1;
  int block_cols = 1;
  std::vector<int64_t> row_ptr;    // block_row_count() + 1 entries; block row r owns blocks [row_ptr[r], row_ptr[r+1])
  std::vector<int32_t> col_index;  // per stored block: its block column (first column = col_index * block_cols)
  std::vector<T> values;           // stored_blocks() * block_rows * block_cols, each block row-major
  std::vector<int32_t> row_sums;   // int8 only: sum over k of W[n][k], `rows` entries
  DensityStats stats;

  int64_t block_row_count() const { return (rows + block_rows - 1) / block_rows; }
  int64_t block_col_count() const { return (cols + block_cols - 1) / block_cols; }
  int64_t stored_blocks() const { return static_cast<int64_t>(col_index.size()); }
  int64_t block_size() const { return static_cast<int64_t>(block_rows) * block_cols; }
};
using BsrF32 = BsrMatrix<float>;
using BsrS8 = BsrMatrix<int8_t>;

// Packs dense row-major w [rows, cols] into `format` (a BSR format whose
// element type is T: float with *_f32, int8_t with *_s8). InvalidArgument for
// a non-BSR format, a mismatched element type, negative sizes, a null w with
// rows * cols > 0, or more block columns than int32 can index.
template <typename T>
StatusOr<BsrMatrix<T>> PackBsr(const T* w, int64_t rows, int64_t cols, PackedFormat format);

// The dense row-major [rows, cols] matrix that `m` stores (the inverse of PackBsr).
template <typename T>
std::vector<T> UnpackBsr(const BsrMatrix<T>& m);

// ---------------------------------------------------------------------------
// N:M structured sparsity: in every group of M consecutive columns of a row at
// most N values are nonzero (2:4 and 4:8). Each group stores exactly N values
// and their positions in the group. Example, 2:4, one row, K = 10:
//
//   W row:     [ 0  a  0  b | c  0  0  0 | 0  d ]      groups of 4 columns; the
//                  group 0       group 1    group 2     last one has 2 real columns
//   values:    [ a  b | c  0 | 0  d ]                  2 per group
//   indices:   [ 1  3 | 0  1 | 0  1 ]                  position of each value in its group
//
// A group with fewer than N nonzeros is filled with zero values at unused
// positions (the lowest ones); positions are increasing within a group, and
// always address a real column (< cols), repeating position 0 with a zero value
// when the last group has fewer than N real columns. Layout, row-major:
//   values [rows][groups_per_row][keep], indices likewise (uint8).
template <typename T>
struct NmMatrix {
  PackedFormat format = PackedFormat::kNm2of4F32;
  int64_t rows = 0;  // N (output channels)
  int64_t cols = 0;  // K
  int group_size = 4;  // M
  int keep = 2;        // N
  int64_t groups_per_row = 0;      // ceil(cols / group_size)
  std::vector<T> values;           // rows * groups_per_row * keep
  std::vector<uint8_t> indices;    // same count: position of each value within its group
  std::vector<int32_t> row_sums;   // int8 only: sum over k of W[n][k]
  DensityStats stats;
};
using NmF32 = NmMatrix<float>;
using NmS8 = NmMatrix<int8_t>;

// Packs dense row-major w [rows, cols] into N:M `format`. InvalidArgument when
// a group holds more than N nonzeros (the message names the row, the columns
// and the count), and for the argument errors listed at PackBsr.
template <typename T>
StatusOr<NmMatrix<T>> PackNm(const T* w, int64_t rows, int64_t cols, PackedFormat format);

template <typename T>
std::vector<T> UnpackNm(const NmMatrix<T>& m);

// ---------------------------------------------------------------------------
// Dense INT8 GEMM weights (packed once, used by every call):
//   C[m, n] = sum_k (A[m, k] - a_zp) * (W[n, k] - w_zp[n])
// with W [N, K] int8 or uint8 and a zero point per tensor or per output channel.
//
// panel16x4_s8, for vpdpbusd (u8 x s8 -> s32, 4 products per 32-bit lane):
//
//   columns n of W in panels of 16, K in steps of 4 (zero padded):
//     panel p, step s = 64 bytes:  [n=16p+0: k=4s..4s+3][n=16p+1: k=4s..4s+3] ... [n=16p+15: ...]
//   data = [panel 0: step 0 | step 1 | ... ][panel 1: ...] ...
//
//   Values are stored as signed bytes b_s = W - shift, shift = 128 for uint8 W
//   (0 for int8), so that one vpdpbusd lane computes sum of 4 a_u * b_s. The
//   zero points move along: zb_s[n] = w_zp[n] - shift (col_zero_points), and
//   col_sums[n] = sum_k (b_s - zb_s) corrects for the activation zero point.
//
// panel16x2_s16, for vpmaddwd (s16 x s16 -> s32, 2 products per lane):
//   the same panel order with steps of 2: 16 x 2 int16 = 64 bytes per step,
//   values (W - w_zp) exactly, so no zero-point correction is needed.
struct PackedGemmS8 {
  PackedFormat format = PackedFormat::kPanel16x4S8;
  int64_t n = 0;          // output channels (rows of W)
  int64_t k = 0;          // inputs (columns of W)
  int64_t k_padded = 0;   // k rounded up to the step (4 or 2)
  int64_t panels = 0;     // ceil(n / 16)
  bool weights_unsigned = false;          // W was uint8
  std::vector<int8_t> data_s8;            // panel16x4_s8: panels * k_padded * 16 bytes
  std::vector<int16_t> data_s16;          // panel16x2_s16: panels * k_padded * 16 values
  std::vector<int32_t> col_zero_points;   // panel16x4_s8: zb_s per column, panels * 16 (padding: 0)
  std::vector<int32_t> col_sums;          // panel16x4_s8: sum_k (b_s - zb_s) per column, panels * 16
  bool has_zero_points = false;           // panel16x4_s8: some zb_s != 0 (kernels then need A row sums)

  static constexpr int kPanelWidth = 16;
  int step() const { return Traits(format).block_cols; }  // k per step: 4 or 2
};

// Packs W [n, k] (TW = int8_t or uint8_t) with zero points `w_zp` (per tensor,
// or per output channel n) into a panel format. InvalidArgument for a non-panel
// format, negative sizes, null pointers, or a zero point outside TW's range.
template <typename TW>
StatusOr<PackedGemmS8> PackGemmS8(const TW* w, int64_t n, int64_t k, GemmZeroPoints w_zp, PackedFormat format);

// ---------------------------------------------------------------------------
// Dense FP32 GEMM weights (packed once, used by every call) for
//   C[r, j] = sum_k W[r, k] * B[k, j]
// where W [rows, k] is the weights ([Cout, Cin/group * kh * kw] of a
// convolution, [N, K] of a MatMul's B^T) and B the activations, packed per
// call into strips of tile_cols columns. A register tile multiplies one panel
// of W by one strip of B: tile_rows x tile_cols accumulators.
//
//   panel p = rows [tile_rows * p, tile_rows * (p + 1)), k-major:
//     data[p * k * tile_rows + kk * tile_rows + i] = W[tile_rows * p + i][kk]   (0 past the last row)
//
// so a tile reads tile_rows consecutive floats per k (one broadcast each).
// The weights of a MatMul / Gemm are the tile's other operand: packed as
// strips (strips = true), the same layout with tile_cols rows per panel, so a
// tile reads one vector row of tile_cols output columns per k.
struct PackedGemmF32 {
  PackedFormat format = PackedFormat::kPanel8x32F32;
  int64_t rows = 0;     // output channels
  int64_t k = 0;        // inputs per output
  bool strips = false;  // panels of tile_cols rows (MatMul / Gemm) instead of tile_rows (Conv)
  int64_t panels = 0;   // ceil(rows / height())
  std::vector<float> data;

  int tile_rows() const { return Traits(format).block_rows; }
  int tile_cols() const { return Traits(format).tile_cols; }
  int height() const { return strips ? tile_cols() : tile_rows(); }  // rows of W per panel
  const float* panel(int64_t p) const { return data.data() + p * k * height(); }
};

// Packs W [rows, k] (row-major) into an f32 panel format, as panels of
// tile_rows rows (convolution weights) or, with `strips`, of tile_cols rows
// (MatMul / Gemm weights, W = B^T). InvalidArgument for another format,
// negative sizes or a null w with rows * k > 0.
StatusOr<PackedGemmF32> PackGemmF32(const float* w, int64_t rows, int64_t k, PackedFormat format, bool strips = false);

}  // namespace sparq
