// FP32 sparse GEMM (BSR and N:M): the ISA-independent driver and the portable
// kernels.
//
// The kernels vectorize over M, the activation rows: a stored weight w[n][k]
// is broadcast and multiplied into a vector of X^T row k (X[m..m+L-1][k]),
// accumulating into Y^T row n. Any block shape, even 1x4 or 4x1, then uses
// full vectors:
//
//            X^T tile (K_padded x mt, mt = v * lanes)
//              k ->  [ x x x x ... ]  <- one row: X[m0 .. m0+mt-1][k]
//   block row r of W: blocks at block columns c0, c1, ...
//   acc[i][0..mt) += W[r*br + i][c*bc + j] * XT[c*bc + j][0..mt)   for each stored block, j, i
//
// The tile is X^T itself for SpmmLayout::kTransposed (full tiles, K a multiple
// of the block width) and a packed, zero-padded copy otherwise (a transpose of
// X for kRowMajor). Each task (an M tile x a range of block rows) packs its
// tile once and sweeps its block rows over it; each output element is summed
// by one task in a fixed order, so results do not depend on the thread count.
#include <algorithm>
#include <cstring>
#include <vector>

#include "kernels/cpu/internal.h"

namespace sparq {
namespace cpu {

namespace {

constexpr int64_t kMaxTileBytes = 512 * 1024;  // the X^T tile stays in L2

// Vectors per tile row: as many as the accumulators allow (up to 4), fewer
// when the tile would not fit in L2 or M is small.
int ChooseVectors(const SpmmF32Isa& isa, int rows_per_pass, int64_t k_padded, int64_t m) {
  int v = 4;
  while (v > 1 && v * std::min(rows_per_pass, isa.max_accumulators) > isa.max_accumulators) v /= 2;
  while (v > 1 && int64_t{v} * isa.lanes * k_padded * int64_t{sizeof(float)} > kMaxTileBytes) v /= 2;
  while (v > 1 && int64_t{v / 2} * isa.lanes >= m) v /= 2;
  return v;
}

// Copies X's rows [m0, m0 + rows) as a zero-padded X^T tile [k_padded][mt].
void PackTile(SpmmLayout layout, const float* x, int64_t ld_x, int64_t m0, int64_t rows, int64_t k, int64_t k_padded,
              int64_t mt, float* xt) {
  if (layout == SpmmLayout::kTransposed) {
    for (int64_t kk = 0; kk < k; ++kk) {
      std::memcpy(xt + kk * mt, x + kk * ld_x + m0, rows * sizeof(float));
      std::fill(xt + kk * mt + rows, xt + (kk + 1) * mt, 0.0f);
    }
  } else {
    // Transpose in 8 x 64 blocks: reads stay in a few rows, writes in a few cache lines.
    constexpr int64_t kRowsPerBlock = 8, kColsPerBlock = 64;
    for (int64_t k0 = 0; k0 < k; k0 += kColsPerBlock) {
      const int64_t k1 = std::min(k, k0 + kColsPerBlock);
      for (int64_t l0 = 0; l0 < rows; l0 += kRowsPerBlock) {
        const int64_t l1 = std::min(rows, l0 + kRowsPerBlock);
        for (int64_t l = l0; l < l1; ++l) {
          const float* src = x + (m0 + l) * ld_x;
          for (int64_t kk = k0; kk < k1; ++kk) xt[kk * mt + l] = src[kk];
        }
      }
    }
    if (rows < mt) {
      for (int64_t kk = 0; kk < k; ++kk) std::fill(xt + kk * mt + rows, xt + (kk + 1) * mt, 0.0f);
    }
  }
  std::fill(xt + k * mt, xt + k_padded * mt, 0.0f);
}

// Writes out[i * mt + l] (i < rows_n, l < rows_m) to output channels n0.. and activation rows m0..
void StoreTile(SpmmLayout layout, const float* out, int64_t mt, int64_t n0, int64_t rows_n, int64_t m0,
               int64_t rows_m, float* y, int64_t ld_y) {
  if (layout == SpmmLayout::kTransposed) {
    for (int64_t i = 0; i < rows_n; ++i) std::memcpy(y + (n0 + i) * ld_y + m0, out + i * mt, rows_m * sizeof(float));
  } else {
    for (int64_t l = 0; l < rows_m; ++l) {
      float* dst = y + (m0 + l) * ld_y + n0;
      for (int64_t i = 0; i < rows_n; ++i) dst[i] = out[i * mt + l];
    }
  }
}

// Splits the work into (M tile, range of row groups) tasks: M tiles first; the
// row groups too when there are too few M tiles to keep the threads busy.
struct TaskGrid {
  int64_t m_tiles = 0;
  int64_t row_chunks = 1;
  int64_t rows_per_chunk = 0;  // in row groups (block rows or N:M row quads)
};

TaskGrid MakeGrid(ThreadPool* pool, int64_t m, int64_t mt, int64_t row_groups) {
  TaskGrid g;
  g.m_tiles = (m + mt - 1) / mt;
  const int64_t threads = pool == nullptr ? 1 : pool->num_threads();
  if (threads > 1 && g.m_tiles < 2 * threads) {
    g.row_chunks = std::min(row_groups, (2 * threads + g.m_tiles - 1) / g.m_tiles);
  }
  g.row_chunks = std::max<int64_t>(1, g.row_chunks);
  g.rows_per_chunk = (row_groups + g.row_chunks - 1) / g.row_chunks;
  return g;
}

// ---------------------------------------------------------------------------
// Portable kernels: loops over the tile columns, which the compiler vectorizes.

constexpr int kPortableLanes = 8;

void BsrBlockRowPortable(int br, int bc, int v, const float* xt, int64_t ld_xt, const int32_t* col_index,
                         const float* values, int64_t blocks, const float* bias, float* out) {
  const int64_t mt = int64_t{v} * kPortableLanes;
  for (int i = 0; i < br; ++i) std::fill(out + i * mt, out + (i + 1) * mt, bias != nullptr ? bias[i] : 0.0f);
  for (int64_t b = 0; b < blocks; ++b) {
    const float* xb = xt + int64_t{col_index[b]} * bc * ld_xt;
    const float* wb = values + b * br * bc;
    for (int i = 0; i < br; ++i) {
      float* acc = out + i * mt;
      for (int j = 0; j < bc; ++j) {
        const float w = wb[i * bc + j];
        const float* xr = xb + j * ld_xt;
        for (int64_t l = 0; l < mt; ++l) acc[l] += w * xr[l];
      }
    }
  }
}

void NmRowsPortable(int group, int keep, int v, const float* xt, int64_t ld_xt, const float* values,
                    const uint8_t* indices, int64_t groups, int64_t row_stride, int rows, const float* bias,
                    float* out) {
  const int64_t mt = int64_t{v} * kPortableLanes;
  for (int i = 0; i < rows; ++i) {
    float* acc = out + i * mt;
    std::fill(acc, acc + mt, bias != nullptr ? bias[i] : 0.0f);
    const float* wv = values + i * row_stride;
    const uint8_t* ix = indices + i * row_stride;
    for (int64_t g = 0; g < groups; ++g) {
      for (int t = 0; t < keep; ++t) {
        const float w = wv[g * keep + t];
        const float* xr = xt + (g * group + ix[g * keep + t]) * ld_xt;
        for (int64_t l = 0; l < mt; ++l) acc[l] += w * xr[l];
      }
    }
  }
}

constexpr SpmmF32Isa kPortable = {kPortableLanes, 16, BsrBlockRowPortable, NmRowsPortable};

}  // namespace

void SpmmBsrF32Driver(const SpmmBsrF32Args& args, const SpmmF32Isa& isa) {
  const BsrF32& w = *args.w;
  const int br = w.block_rows, bc = w.block_cols;
  const int64_t k_padded = w.block_col_count() * bc;
  const int v = ChooseVectors(isa, br, k_padded, args.m);
  const int64_t mt = int64_t{v} * isa.lanes;
  const TaskGrid grid = MakeGrid(args.pool, args.m, mt, w.block_row_count());
  // Full tiles of X^T are read in place when no block reaches past K.
  const bool in_place = args.layout == SpmmLayout::kTransposed && w.cols % bc == 0;

  ParallelFor(args.pool, grid.m_tiles * grid.row_chunks, 1, [&](int64_t t_begin, int64_t t_end) {
    std::vector<float> tile;
    std::vector<float> out(static_cast<size_t>(br * mt));
    float bias[16];
    for (int64_t t = t_begin; t < t_end; ++t) {
      const int64_t m0 = (t / grid.row_chunks) * mt, rows_m = std::min(mt, args.m - m0);
      const int64_t r_begin = (t % grid.row_chunks) * grid.rows_per_chunk;
      const int64_t r_end = std::min(w.block_row_count(), r_begin + grid.rows_per_chunk);
      const float* xt = args.x + m0;
      int64_t ld_xt = args.ld_x;
      if (!in_place || rows_m < mt) {
        tile.resize(static_cast<size_t>(k_padded * mt));
        PackTile(args.layout, args.x, args.ld_x, m0, rows_m, w.cols, k_padded, mt, tile.data());
        xt = tile.data();
        ld_xt = mt;
      }
      for (int64_t r = r_begin; r < r_end; ++r) {
        const int64_t n0 = r * br, rows_n = std::min<int64_t>(br, w.rows - n0);
        if (args.bias != nullptr) {
          for (int i = 0; i < br; ++i) bias[i] = i < rows_n ? args.bias[n0 + i] : 0.0f;
        }
        const int64_t b0 = w.row_ptr[r];
        isa.bsr_block_row(br, bc, v, xt, ld_xt, w.col_index.data() + b0, w.values.data() + b0 * br * bc,
                          w.row_ptr[r + 1] - b0, args.bias != nullptr ? bias : nullptr, out.data());
        StoreTile(args.layout, out.data(), mt, n0, rows_n, m0, rows_m, args.y, args.ld_y);
      }
    }
  });
}

void SpmmNmF32Driver(const SpmmNmF32Args& args, const SpmmF32Isa& isa) {
  constexpr int kRowsPerCall = 4;
  const NmF32& w = *args.w;
  const int64_t k_padded = w.groups_per_row * w.group_size;
  const int64_t row_stride = w.groups_per_row * w.keep;
  const int v = ChooseVectors(isa, kRowsPerCall, k_padded, args.m);
  const int64_t mt = int64_t{v} * isa.lanes;
  const int64_t quads = (w.rows + kRowsPerCall - 1) / kRowsPerCall;
  const TaskGrid grid = MakeGrid(args.pool, args.m, mt, quads);
  const bool in_place = args.layout == SpmmLayout::kTransposed && w.cols % w.group_size == 0;

  ParallelFor(args.pool, grid.m_tiles * grid.row_chunks, 1, [&](int64_t t_begin, int64_t t_end) {
    std::vector<float> tile;
    std::vector<float> out(static_cast<size_t>(kRowsPerCall * mt));
    for (int64_t t = t_begin; t < t_end; ++t) {
      const int64_t m0 = (t / grid.row_chunks) * mt, rows_m = std::min(mt, args.m - m0);
      const int64_t q_begin = (t % grid.row_chunks) * grid.rows_per_chunk;
      const int64_t q_end = std::min(quads, q_begin + grid.rows_per_chunk);
      const float* xt = args.x + m0;
      int64_t ld_xt = args.ld_x;
      if (!in_place || rows_m < mt) {
        tile.resize(static_cast<size_t>(k_padded * mt));
        PackTile(args.layout, args.x, args.ld_x, m0, rows_m, w.cols, k_padded, mt, tile.data());
        xt = tile.data();
        ld_xt = mt;
      }
      for (int64_t q = q_begin; q < q_end; ++q) {
        const int64_t n0 = q * kRowsPerCall;
        const int rows = static_cast<int>(std::min<int64_t>(kRowsPerCall, w.rows - n0));
        isa.nm_rows(w.group_size, w.keep, v, xt, ld_xt, w.values.data() + n0 * row_stride,
                    w.indices.data() + n0 * row_stride, w.groups_per_row, row_stride, rows,
                    args.bias != nullptr ? args.bias + n0 : nullptr, out.data());
        StoreTile(args.layout, out.data(), mt, n0, rows, m0, rows_m, args.y, args.ld_y);
      }
    }
  });
}

void SpmmBsrF32Portable(const SpmmBsrF32Args& args) { SpmmBsrF32Driver(args, kPortable); }
void SpmmNmF32Portable(const SpmmNmF32Args& args) { SpmmNmF32Driver(args, kPortable); }

}  // namespace cpu
}  // namespace sparq
