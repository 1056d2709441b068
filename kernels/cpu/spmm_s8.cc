// INT8 block-sparse GEMM: the ISA-independent driver and the portable kernel.
//
// Same tiling as the FP32 kernels (spmm_f32.cc: vectorized over M, one task =
// an M tile x a range of block rows), with the X^T tile always packed, in the
// kernel's k-group layout (internal.h). For VNNI the tile holds u8 values
// x_u = X + 128 for int8 X (X itself for uint8), and weights are symmetric
// (zero point 0), so
//
//   sum_k (X - x_zp) * W = sum_k x_u * W  -  (x_zp + shift) * row_sums[n]
//                          [vpdpbusd]        [BsrS8::row_sums, from packing]
//
// taken mod 2^32 like GemmS32Ref. The AVX2 and portable tiles hold X - x_zp as
// int16 and need no correction.
#include <algorithm>
#include <cstring>
#include <type_traits>
#include <vector>

#include "kernels/cpu/internal.h"

namespace sparq {
namespace cpu {

namespace {

constexpr int64_t kMaxTileBytes = 512 * 1024;
constexpr int64_t kMaxSlabBytes = 32 * 1024;  // row-major int32 output staged per flush (L1)

int ChooseVectors(const SpmmS8Isa& isa, int block_rows, int64_t tile_bytes_per_column, int64_t m) {
  int v = 4;
  while (v > 1 && v * std::min(block_rows, isa.max_accumulators) > isa.max_accumulators) v /= 2;
  while (v > 1 && int64_t{v} * isa.lanes * tile_bytes_per_column > kMaxTileBytes) v /= 2;
  while (v > 1 && int64_t{v / 2} * isa.lanes >= m) v /= 2;
  return v;
}

// PackTile for the VNNI layout (G = 4, u8 values x_u = X's bits XOR 0x80 for
// int8 X): whole 4-byte groups at a time, in loops the compiler vectorizes.
// The tile is already zeroed.
void PackTileU8Quads(const SpmmBsrS8Args& args, int64_t m0, int64_t rows, int64_t k, int64_t mt, uint8_t* tile) {
  const auto* x = static_cast<const uint8_t*>(args.x);  // int8 and uint8 alike: bytes
  const uint8_t flip = args.x_signed ? 0x80 : 0;
  const uint32_t flip4 = args.x_signed ? 0x80808080u : 0u;
  const int64_t quads = k / 4, tail = k % 4;
  if (args.layout == SpmmLayout::kRowMajor) {
    // Row l of X: its bytes k = 4q..4q+3 go to tile + q * mt * 4 + l * 4.
    for (int64_t l = 0; l < rows; ++l) {
      const uint8_t* src = x + (m0 + l) * args.ld_x;
      uint8_t* dst = tile + l * 4;
      for (int64_t q = 0; q < quads; ++q) {
        uint32_t v;
        std::memcpy(&v, src + 4 * q, sizeof(v));
        v ^= flip4;
        std::memcpy(dst + q * mt * 4, &v, sizeof(v));
      }
      for (int64_t t = 0; t < tail; ++t) dst[quads * mt * 4 + t] = src[4 * quads + t] ^ flip;
    }
    return;
  }
  // X^T rows 4q..4q+3 interleave byte by byte: tile + q * mt * 4 + l * 4 + t = X^T[4q + t][m0 + l].
  for (int64_t q = 0; q < quads; ++q) {
    const uint8_t* r0 = x + (4 * q) * args.ld_x + m0;
    const uint8_t* r1 = r0 + args.ld_x;
    const uint8_t* r2 = r1 + args.ld_x;
    const uint8_t* r3 = r2 + args.ld_x;
    uint8_t* dst = tile + q * mt * 4;
    for (int64_t l = 0; l < rows; ++l) {
      const uint32_t v =
          (uint32_t{r0[l]} | uint32_t{r1[l]} << 8 | uint32_t{r2[l]} << 16 | uint32_t{r3[l]} << 24) ^ flip4;
      std::memcpy(dst + l * 4, &v, sizeof(v));
    }
  }
  for (int64_t t = 0; t < tail; ++t) {
    const uint8_t* src = x + (4 * quads + t) * args.ld_x + m0;
    uint8_t* dst = tile + quads * mt * 4 + t;
    for (int64_t l = 0; l < rows; ++l) dst[l * 4] = src[l] ^ flip;
  }
}

// Packs X's rows [m0, m0 + rows) as the X^T tile of a k-group layout: element
// (k, l) at (k / G) * mt * G + l * G + k % G; padding (k >= K or l >= rows) is 0.
// G is a template argument so that the index math is shifts, not divisions.
template <typename TX, typename TT, int G>
void PackTile(const SpmmBsrS8Args& args, int64_t m0, int64_t rows, int64_t k, int64_t k_padded, int64_t mt, TT* tile) {
  const TX* x = static_cast<const TX*>(args.x);
  std::memset(tile, 0, static_cast<size_t>(k_padded * mt) * sizeof(TT));
  if constexpr (G == 4 && sizeof(TT) == 1) {
    PackTileU8Quads(args, m0, rows, k, mt, tile);
    return;
  }
  const bool to_u8 = sizeof(TT) == 1;
  const int32_t shift = to_u8 && std::is_same<TX, int8_t>::value ? 128 : 0;
  const int32_t offset = shift - (to_u8 ? 0 : args.x_zero_point);  // stored value = X + offset
  if (args.layout == SpmmLayout::kRowMajor) {
    for (int64_t l = 0; l < rows; ++l) {
      const TX* src = x + (m0 + l) * args.ld_x;
      TT* dst = tile + l * G;
      for (int64_t kk = 0; kk < k; ++kk) {
        dst[(kk / G) * mt * G + kk % G] = static_cast<TT>(static_cast<int32_t>(src[kk]) + offset);
      }
    }
  } else {
    for (int64_t kk = 0; kk < k; ++kk) {
      const TX* src = x + kk * args.ld_x + m0;
      TT* dst = tile + (kk / G) * mt * G + kk % G;
      for (int64_t l = 0; l < rows; ++l) dst[l * G] = static_cast<TT>(static_cast<int32_t>(src[l]) + offset);
    }
  }
}

// PackTile for the ISA's k group and the activation type.
void PackTileFor(const SpmmBsrS8Args& args, int k_group, int64_t m0, int64_t rows, int64_t k, int64_t k_padded,
                 int64_t mt, void* tile) {
  auto* u8 = static_cast<uint8_t*>(tile);
  auto* s16 = static_cast<int16_t*>(tile);
  if (k_group == 4) {
    if (args.x_signed) {
      PackTile<int8_t, uint8_t, 4>(args, m0, rows, k, k_padded, mt, u8);
    } else {
      PackTile<uint8_t, uint8_t, 4>(args, m0, rows, k, k_padded, mt, u8);
    }
  } else if (k_group == 2) {
    if (args.x_signed) {
      PackTile<int8_t, int16_t, 2>(args, m0, rows, k, k_padded, mt, s16);
    } else {
      PackTile<uint8_t, int16_t, 2>(args, m0, rows, k, k_padded, mt, s16);
    }
  } else if (args.x_signed) {
    PackTile<int8_t, int16_t, 1>(args, m0, rows, k, k_padded, mt, s16);
  } else {
    PackTile<uint8_t, int16_t, 1>(args, m0, rows, k, k_padded, mt, s16);
  }
}

// ---------------------------------------------------------------------------
// Portable kernel (k_group 1, int16 tile).

constexpr int kPortableLanes = 8;

void BsrBlockRowPortable(int br, int bc, int v, const void* tile, const int32_t* col_index, const int8_t* values,
                         int64_t blocks, int32_t* out) {
  const int16_t* xt = static_cast<const int16_t*>(tile);
  const int64_t mt = int64_t{v} * kPortableLanes;
  uint32_t* acc = reinterpret_cast<uint32_t*>(out);  // wraps mod 2^32 like the reference
  std::fill(acc, acc + br * mt, 0u);
  for (int64_t b = 0; b < blocks; ++b) {
    const int64_t k0 = int64_t{col_index[b]} * bc;
    const int8_t* wb = values + b * br * bc;
    for (int i = 0; i < br; ++i) {
      for (int j = 0; j < bc; ++j) {
        const int32_t w = wb[i * bc + j];
        if (w == 0) continue;
        const int16_t* xr = xt + (k0 + j) * mt;
        for (int64_t l = 0; l < mt; ++l) acc[i * mt + l] += static_cast<uint32_t>(w * int32_t{xr[l]});
      }
    }
  }
}

constexpr SpmmS8Isa kPortable = {kPortableLanes, 1, 16, BsrBlockRowPortable, RequantRowPortable};

}  // namespace

void SpmmBsrS8Driver(const SpmmBsrS8Args& args, const SpmmS8Isa& isa) {
  const BsrS8& w = *args.w;
  const S8Epilogue& out = args.out;
  const int br = w.block_rows, bc = w.block_cols;
  const int64_t k_padded = (w.block_col_count() * bc + 3) / 4 * 4;
  const size_t elem_bytes = isa.k_group == 4 ? 1 : 2;
  const int v = ChooseVectors(isa, br, k_padded * static_cast<int64_t>(elem_bytes), args.m);
  const int64_t mt = int64_t{v} * isa.lanes;
  const int64_t m_tiles = (args.m + mt - 1) / mt;
  const int64_t block_rows = w.block_row_count();
  const int64_t threads = args.pool == nullptr ? 1 : args.pool->num_threads();
  int64_t row_chunks = 1;
  if (threads > 1 && m_tiles < 2 * threads) row_chunks = std::min(block_rows, (2 * threads + m_tiles - 1) / m_tiles);
  row_chunks = std::max<int64_t>(1, row_chunks);
  const int64_t rows_per_chunk = (block_rows + row_chunks - 1) / row_chunks;
  const bool row_major = args.layout == SpmmLayout::kRowMajor;
  const uint32_t correction = isa.k_group == 4 ? static_cast<uint32_t>(args.x_zero_point + (args.x_signed ? 128 : 0))
                                               : 0u;

  // Row-major output goes through a slab [mt][columns] that is flushed every
  // `slab_block_rows` block rows, so that it stays in L2 however large N is.
  const int64_t slab_block_rows = std::max<int64_t>(1, kMaxSlabBytes / (mt * br * int64_t{sizeof(int32_t)}));

  ParallelFor(args.pool, m_tiles * row_chunks, 1, [&](int64_t t_begin, int64_t t_end) {
    std::vector<char> tile(static_cast<size_t>(k_padded * mt) * elem_bytes);
    std::vector<int32_t> acc(static_cast<size_t>(br * mt));
    std::vector<int32_t> slab;  // row-major output: [mt][slab columns]
    if (row_major) slab.resize(static_cast<size_t>(mt * slab_block_rows * br));
    for (int64_t t = t_begin; t < t_end; ++t) {
      const int64_t m0 = (t / row_chunks) * mt, rows_m = std::min(mt, args.m - m0);
      const int64_t r_begin = (t % row_chunks) * rows_per_chunk;
      const int64_t r_end = std::min(block_rows, r_begin + rows_per_chunk);
      if (r_begin >= r_end) continue;
      PackTileFor(args, isa.k_group, m0, rows_m, w.cols, k_padded, mt, tile.data());
      for (int64_t s_begin = r_begin; s_begin < r_end; s_begin += slab_block_rows) {
        const int64_t s_end = std::min(r_end, s_begin + slab_block_rows);
        const int64_t n_begin = s_begin * br, slab_cols = std::min(w.rows, s_end * br) - n_begin;
        for (int64_t r = s_begin; r < s_end; ++r) {
          const int64_t n0 = r * br, rows_n = std::min<int64_t>(br, w.rows - n0);
          const int64_t b0 = w.row_ptr[r];
          isa.bsr_block_row(br, bc, v, tile.data(), w.col_index.data() + b0, w.values.data() + b0 * br * bc,
                            w.row_ptr[r + 1] - b0, acc.data());
          for (int64_t i = 0; i < rows_n && correction != 0; ++i) {
            uint32_t* a = reinterpret_cast<uint32_t*>(acc.data() + i * mt);
            const uint32_t c = correction * static_cast<uint32_t>(w.row_sums[n0 + i]);
            for (int64_t l = 0; l < rows_m; ++l) a[l] -= c;
          }
          if (row_major) {  // the block row's rows_n channels, contiguous in each slab row
            for (int64_t l = 0; l < rows_m; ++l) {
              int32_t* dst = slab.data() + l * slab_cols + (n0 - n_begin);
              for (int64_t i = 0; i < rows_n; ++i) dst[i] = acc[i * mt + l];
            }
            continue;
          }
          for (int64_t i = 0; i < rows_n; ++i) {
            const int32_t* row = acc.data() + i * mt;
            const int64_t n = n0 + i;
            if (out.out_s32 != nullptr) std::memcpy(out.out_s32 + n * out.ld_s32 + m0, row, rows_m * sizeof(int32_t));
            if (out.out_q != nullptr) {
              const int32_t* bias = out.bias == nullptr ? nullptr : out.bias + (out.bias_per_channel ? n : 0);
              const float* mult = out.multiplier + (out.multiplier_per_channel ? n : 0);
              isa.requant_row(rows_m, row, bias, 0, mult, 0, out.zero_point, out.fuse_relu, out.out_q_signed,
                              static_cast<int8_t*>(out.out_q) + n * out.ld_q + m0);
            }
          }
        }
        if (!row_major) continue;
        for (int64_t l = 0; l < rows_m; ++l) {
          const int32_t* row = slab.data() + l * slab_cols;
          const int64_t m = m0 + l;
          if (out.out_s32 != nullptr) {
            std::memcpy(out.out_s32 + m * out.ld_s32 + n_begin, row, slab_cols * sizeof(int32_t));
          }
          if (out.out_q != nullptr) {
            const int32_t* bias = out.bias == nullptr ? nullptr : out.bias + (out.bias_per_channel ? n_begin : 0);
            const float* mult = out.multiplier + (out.multiplier_per_channel ? n_begin : 0);
            isa.requant_row(slab_cols, row, bias, out.bias_per_channel ? 1 : 0, mult,
                            out.multiplier_per_channel ? 1 : 0, out.zero_point, out.fuse_relu, out.out_q_signed,
                            static_cast<int8_t*>(out.out_q) + m * out.ld_q + n_begin);
          }
        }
      }
    }
  });
}

void SpmmBsrS8Portable(const SpmmBsrS8Args& args) { SpmmBsrS8Driver(args, kPortable); }

}  // namespace cpu
}  // namespace sparq
