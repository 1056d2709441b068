// INT8 N:M sparse GEMM (2:4, 4:8): the ISA-independent driver and the portable
// kernel. Layouts and the per-step panel are described in internal.h
// (SpmmNmS8Isa).
//
// Why vectorize over channels, not over activation rows as the BSR kernels do:
// every channel keeps its own 4 of each 8 k, so a vector over activation rows
// would need all 8 activations of a step (dense work). With one channel per
// lane, each lane picks its 4 activations from a broadcast of the step's 8
// with one byte shuffle, so a multiply instruction does only useful products.
//
// The u8 form follows spmm_s8.cc: weights are symmetric, so
//   sum_k (X - x_zp) * W = sum_k x_u * W  -  (x_zp + shift) * row_sums[n]   (mod 2^32)
#include <algorithm>
#include <cstring>
#include <vector>

#include "kernels/cpu/internal.h"

namespace sparq {
namespace cpu {

namespace {

constexpr int kStep = 8;             // k per step
constexpr int kKeptPerStep = 4;      // values every row keeps in a step (2:4 and 4:8 alike)
constexpr int64_t kStepBytes = 128;  // panel bytes per step (both layouts, see internal.h)
constexpr int64_t kSlabRows = 256;   // transposed output: activation rows staged per flush
// Row stride of that slab: not a multiple of 1 KiB, so that a tile's column
// writes (one per channel row) do not all fall into the same L1 sets.
constexpr int64_t kSlabStride = kSlabRows + 16;

// Packs rows [m_begin, m_end) of X into xp ([rows][k8], row-major, padding
// zeroed) as stored value = X + offset.
template <typename TX, typename TP>
void PackRows(const SpmmNmS8Args& args, int64_t k, int64_t k8, int32_t offset, int64_t m_begin, int64_t m_end,
              TP* xp) {
  const TX* x = static_cast<const TX*>(args.x);
  if (args.layout == SpmmLayout::kRowMajor) {
    for (int64_t m = m_begin; m < m_end; ++m) {
      const TX* src = x + m * args.ld_x;
      TP* dst = xp + m * k8;
      for (int64_t kk = 0; kk < k; ++kk) dst[kk] = static_cast<TP>(static_cast<int32_t>(src[kk]) + offset);
    }
    return;
  }
  // X^T [K, M]: 8 rows of X^T at a time, so that each packed row gets 8
  // consecutive values per visit while the reads stay sequential.
  for (int64_t k0 = 0; k0 < k; k0 += 8) {
    const int rows = static_cast<int>(std::min<int64_t>(8, k - k0));
    const TX* src = x + k0 * args.ld_x;
    for (int64_t m = m_begin; m < m_end; ++m) {
      TP* dst = xp + m * k8 + k0;
      for (int t = 0; t < rows; ++t) dst[t] = static_cast<TP>(static_cast<int32_t>(src[t * args.ld_x + m]) + offset);
    }
  }
}

// Transposes the 8 x 8 bytes a[i] (row i = 8 bytes, little endian) in place:
// byte j of a[i] becomes byte i of a[j]. Three rounds of block swaps (4x4
// blocks, then 2x2 within them, then single bytes).
inline void Transpose8x8Bytes(uint64_t a[8]) {
  for (int i = 0; i < 4; ++i) {
    const uint64_t t = ((a[i] >> 32) ^ a[i + 4]) & 0x00000000FFFFFFFFull;
    a[i] ^= t << 32;
    a[i + 4] ^= t;
  }
  for (int i : {0, 1, 4, 5}) {
    const uint64_t t = ((a[i] >> 16) ^ a[i + 2]) & 0x0000FFFF0000FFFFull;
    a[i] ^= t << 16;
    a[i + 2] ^= t;
  }
  for (int i = 0; i < 8; i += 2) {
    const uint64_t t = ((a[i] >> 8) ^ a[i + 1]) & 0x00FF00FF00FF00FFull;
    a[i] ^= t << 8;
    a[i + 1] ^= t;
  }
}

// PackRows for u8 values from X^T [K, M]: whole 8 x 8 tiles (8 k x 8 m) with
// Transpose8x8Bytes, the rest byte by byte; `flip` = 0x80 for int8 X. Eight
// packed rows at a time, so that their writes stay in L1 while the reads
// walk down X^T (each line read serves the next 8 rows too, from L2).
void PackTransposedU8(const SpmmNmS8Args& args, int64_t k, int64_t k8, uint8_t flip, int64_t m_begin, int64_t m_end,
                      uint8_t* xp) {
  const auto* x = static_cast<const uint8_t*>(args.x);
  const uint64_t flip8 = 0x0101010101010101ull * flip;
  const int64_t k_full = k / 8 * 8, m_full = m_begin + (m_end - m_begin) / 8 * 8;
  for (int64_t m = m_begin; m < m_full; m += 8) {
    for (int64_t k0 = 0; k0 < k_full; k0 += 8) {
      uint64_t t[8];
      for (int i = 0; i < 8; ++i) std::memcpy(&t[i], x + (k0 + i) * args.ld_x + m, 8);
      Transpose8x8Bytes(t);
      for (int j = 0; j < 8; ++j) {
        const uint64_t v = t[j] ^ flip8;
        std::memcpy(xp + (m + j) * k8 + k0, &v, 8);
      }
    }
  }
  for (int64_t kk = 0; kk < k; ++kk) {  // what the tiles left: the last m rows, the last k columns
    const uint8_t* src = x + kk * args.ld_x;
    for (int64_t m = kk < k_full ? m_full : m_begin; m < m_end; ++m) xp[m * k8 + kk] = src[m] ^ flip;
  }
}

// The packed activations: u8 x_u (offset = 128 for int8 X) or int16 X - x_zp.
// `buffer` is reused from call to call (see SpmmNmS8Driver): only the padding
// (columns k..k8 of every row, rows m..m_padded) is zeroed here, the packers
// write the rest.
void PackActivations(const SpmmNmS8Args& args, bool s16, int64_t k, int64_t k8, int64_t m_padded,
                     std::vector<char>* buffer) {
  const size_t elem = s16 ? 2 : 1;
  const size_t bytes = static_cast<size_t>(m_padded * k8) * elem;
  if (buffer->size() < bytes) buffer->resize(bytes);
  char* data = buffer->data();
  for (int64_t m = 0; m < args.m && k8 > k; ++m) std::memset(data + (m * k8 + k) * elem, 0, (k8 - k) * elem);
  std::memset(data + args.m * k8 * elem, 0, static_cast<size_t>((m_padded - args.m) * k8) * elem);
  const int32_t offset = s16 ? -args.x_zero_point : (args.x_signed ? 128 : 0);
  ParallelFor(args.pool, args.m, 64, [&](int64_t b, int64_t e) {
    if (s16) {
      auto* xp = reinterpret_cast<int16_t*>(buffer->data());
      if (args.x_signed) {
        PackRows<int8_t>(args, k, k8, offset, b, e, xp);
      } else {
        PackRows<uint8_t>(args, k, k8, offset, b, e, xp);
      }
    } else if (args.layout == SpmmLayout::kTransposed) {
      PackTransposedU8(args, k, k8, args.x_signed ? 0x80 : 0, b, e, reinterpret_cast<uint8_t*>(buffer->data()));
    } else {
      auto* xp = reinterpret_cast<uint8_t*>(buffer->data());
      if (args.x_signed) {
        PackRows<int8_t>(args, k, k8, offset, b, e, xp);
      } else {
        PackRows<uint8_t>(args, k, k8, offset, b, e, xp);
      }
    }
  });
}

// Re-packs channels [n0, n0 + panels * R) of W into `panels` consecutive panels
// (internal.h); channels past N get zero weights. Kept value q (0..3) of a
// step sits at slot 4s + q of its row: for 4:8 that is the step's one group,
// for 2:4 the step's two groups (q = 2, 3: the second, 4 k further).
void BuildPanels(const NmS8& w, int r_count, bool x_s16, int64_t n0, int panels, int64_t steps, uint8_t* out) {
  const int64_t row_stride = w.groups_per_row * w.keep;  // kept values per row
  const uint8_t second_group = w.keep == 2 ? 4 : 0;
  std::memset(out, 0, static_cast<size_t>(panels * steps * kStepBytes));
  for (int p = 0; p < panels; ++p) {
    uint8_t* panel = out + p * steps * kStepBytes;
    for (int i = 0; i < r_count; ++i) {
      const int64_t n = n0 + int64_t{p} * r_count + i;
      if (n >= w.rows) break;
      const int8_t* values = w.values.data() + n * row_stride;
      const uint8_t* indices = w.indices.data() + n * row_stride;
      for (int64_t s = 0; s < steps; ++s) {
        int8_t v[kKeptPerStep] = {};
        uint8_t pos[kKeptPerStep] = {};
        const int kept = static_cast<int>(std::min<int64_t>(kKeptPerStep, row_stride - s * kKeptPerStep));
        for (int q = 0; q < kKeptPerStep && q < kept; ++q) {  // fewer only in the last step of a 2:4 row of odd groups
          v[q] = values[s * kKeptPerStep + q];
          pos[q] = static_cast<uint8_t>(indices[s * kKeptPerStep + q] + (q >= 2 ? second_group : 0));
        }
        uint8_t* step = panel + s * kStepBytes;
        if (!x_s16) {
          std::memcpy(step + i * 4, v, 4);
          std::memcpy(step + r_count * 4 + i * 4, pos, 4);
          continue;
        }
        for (int h = 0; h < 2; ++h) {
          uint8_t* half = step + h * r_count * 8;
          const int16_t pair[2] = {v[2 * h], v[2 * h + 1]};
          std::memcpy(half + i * 4, pair, sizeof(pair));
          uint8_t* ctrl = half + r_count * 4 + i * 4;
          for (int e = 0; e < 2; ++e) {
            ctrl[2 * e] = static_cast<uint8_t>(2 * pos[2 * h + e]);
            ctrl[2 * e + 1] = static_cast<uint8_t>(2 * pos[2 * h + e] + 1);
          }
        }
      }
    }
  }
}

// ---------------------------------------------------------------------------
// Portable kernel: the u8 layout with scalar loops (the shuffle is an index).

constexpr int kPortableRows = 16;
constexpr int kPortableMr = 4;

void TilePortable(int64_t steps, const void* x, int64_t ld_x, const uint8_t* panels, int64_t panel_stride,
                  int panel_count, int32_t* out, int64_t ld_out) {
  const auto* xu = static_cast<const uint8_t*>(x);
  for (int r = 0; r < kPortableMr; ++r) {
    for (int p = 0; p < panel_count; ++p) {
      uint32_t acc[kPortableRows] = {};  // wraps mod 2^32 like the reference
      for (int64_t s = 0; s < steps; ++s) {
        const uint8_t* window = xu + r * ld_x + s * kStep;
        const uint8_t* step = panels + p * panel_stride + s * kStepBytes;
        for (int i = 0; i < kPortableRows; ++i) {
          for (int q = 0; q < kKeptPerStep; ++q) {
            const int32_t wv = static_cast<int8_t>(step[i * 4 + q]);
            acc[i] += static_cast<uint32_t>(wv * int32_t{window[step[kPortableRows * 4 + i * 4 + q]]});
          }
        }
      }
      std::memcpy(out + r * ld_out + p * kPortableRows, acc, sizeof(acc));
    }
  }
}

constexpr SpmmNmS8Isa kPortable = {kPortableRows, false, kPortableMr, 4, TilePortable, RequantRowPortable};

int64_t NmSteps(const NmS8& w) { return (w.groups_per_row * w.group_size + kStep - 1) / kStep; }

}  // namespace

NmS8Panels BuildNmS8Panels(const NmS8& w, int panel_rows, bool x_s16) {
  NmS8Panels p;
  p.source_values = w.values.data();
  p.rows = w.rows;
  p.cols = w.cols;
  p.panel_rows = panel_rows;
  p.x_s16 = x_s16;
  p.steps = NmSteps(w);
  p.panels = (w.rows + panel_rows - 1) / panel_rows;
  p.data.resize(static_cast<size_t>(p.panels * p.steps * kStepBytes));
  BuildPanels(w, panel_rows, x_s16, 0, static_cast<int>(p.panels), p.steps, p.data.data());
  return p;
}

void SpmmNmS8Driver(const SpmmNmS8Args& args, const SpmmNmS8Isa& isa) {
  const NmS8& w = *args.w;
  const S8Epilogue& out = args.out;
  const int mr = isa.mr;
  const int64_t steps = NmSteps(w);
  const NmS8Panels* prepacked = args.panels;
  if (prepacked != nullptr &&
      (prepacked->source_values != w.values.data() || prepacked->rows != w.rows || prepacked->cols != w.cols ||
       prepacked->panel_rows != isa.panel_rows || prepacked->x_s16 != isa.x_s16)) {
    prepacked = nullptr;  // built for another matrix or kernel: build our own
  }
  const int64_t k8 = steps * kStep;
  const int64_t m_padded = (args.m + mr - 1) / mr * mr;
  const size_t elem_bytes = isa.x_s16 ? 2 : 1;
  // The packed activations live in a buffer of the calling thread that grows
  // to the largest call and is kept: a fresh one per call cost page faults on
  // every call (perf: a third of a 3136 x 576 conv's time).
  // (The tasks below run on other threads, whose thread_local differs: they
  // read it through x_packed.)
  thread_local std::vector<char> xp;
  PackActivations(args, isa.x_s16, w.cols, k8, m_padded, &xp);
  const char* const x_packed = xp.data();

  const int64_t tile_cols = int64_t{isa.panel_rows} * isa.max_panels;
  const int64_t n_blocks = (w.rows + tile_cols - 1) / tile_cols;
  const int64_t m_tiles = m_padded / mr;
  const int64_t threads = args.pool == nullptr ? 1 : args.pool->num_threads();
  // Tasks split channels first (each builds its own panels unless prepacked);
  // activation rows are split too only when there are too few channel blocks
  // for the threads.
  int64_t m_chunks = 1;
  if (threads > 1 && n_blocks < 2 * threads) m_chunks = std::min(m_tiles, (2 * threads + n_blocks - 1) / n_blocks);
  const int64_t tiles_per_chunk = (m_tiles + m_chunks - 1) / m_chunks;
  const bool row_major = args.layout == SpmmLayout::kRowMajor;
  const uint32_t correction =
      isa.x_s16 ? 0u : static_cast<uint32_t>(args.x_zero_point + (args.x_signed ? 128 : 0));

  ParallelFor(args.pool, n_blocks * m_chunks, 1, [&](int64_t t_begin, int64_t t_end) {
    std::vector<uint8_t> panels(prepacked != nullptr ? 0 : static_cast<size_t>(isa.max_panels * steps * kStepBytes));
    std::vector<int32_t> acc(static_cast<size_t>(mr * tile_cols));
    std::vector<int32_t> slab;  // transposed output: [tile_cols][kSlabStride]
    if (!row_major) slab.resize(static_cast<size_t>(tile_cols * kSlabStride));
    int64_t built_block = -1;
    for (int64_t t = t_begin; t < t_end; ++t) {
      const int64_t nb = t / m_chunks;
      const int64_t n0 = nb * tile_cols, cols = std::min(tile_cols, w.rows - n0);
      const int panel_count = static_cast<int>((cols + isa.panel_rows - 1) / isa.panel_rows);
      const uint8_t* block_panels =
          prepacked != nullptr ? prepacked->data.data() + nb * isa.max_panels * steps * kStepBytes : panels.data();
      if (prepacked == nullptr && nb != built_block) {
        BuildPanels(w, isa.panel_rows, isa.x_s16, n0, panel_count, steps, panels.data());
        built_block = nb;
      }
      const int64_t m_begin = (t % m_chunks) * tiles_per_chunk * mr;
      const int64_t m_end = std::min(args.m, m_begin + tiles_per_chunk * mr);
      for (int64_t s0 = m_begin; s0 < m_end; s0 += kSlabRows) {
        const int64_t s1 = std::min(m_end, s0 + kSlabRows);
        for (int64_t m0 = s0; m0 < s1; m0 += mr) {
          const int64_t rows_m = std::min<int64_t>(mr, s1 - m0);
          isa.tile(steps, x_packed + static_cast<size_t>(m0 * k8) * elem_bytes, k8, block_panels,
                   steps * kStepBytes, panel_count, acc.data(), tile_cols);
          for (int64_t r = 0; r < rows_m && correction != 0; ++r) {
            uint32_t* a = reinterpret_cast<uint32_t*>(acc.data() + r * tile_cols);
            for (int64_t j = 0; j < cols; ++j) a[j] -= correction * static_cast<uint32_t>(w.row_sums[n0 + j]);
          }
          for (int64_t r = 0; r < rows_m; ++r) {
            const int32_t* row = acc.data() + r * tile_cols;
            if (!row_major) {
              for (int64_t j = 0; j < cols; ++j) slab[j * kSlabStride + (m0 - s0 + r)] = row[j];
              continue;
            }
            const int64_t m = m0 + r;
            if (out.out_s32 != nullptr) std::memcpy(out.out_s32 + m * out.ld_s32 + n0, row, cols * sizeof(int32_t));
            if (out.out_q != nullptr) {
              const int32_t* bias = out.bias == nullptr ? nullptr : out.bias + (out.bias_per_channel ? n0 : 0);
              const float* mult = out.multiplier + (out.multiplier_per_channel ? n0 : 0);
              isa.requant_row(cols, row, bias, out.bias_per_channel ? 1 : 0, mult, out.multiplier_per_channel ? 1 : 0,
                              out.zero_point, out.fuse_relu, out.out_q_signed,
                              static_cast<int8_t*>(out.out_q) + m * out.ld_q + n0);
            }
          }
        }
        if (row_major) continue;
        for (int64_t j = 0; j < cols; ++j) {  // channel n0 + j: a row of Y^T, one bias and multiplier
          const int32_t* row = slab.data() + j * kSlabStride;
          const int64_t n = n0 + j;
          if (out.out_s32 != nullptr) std::memcpy(out.out_s32 + n * out.ld_s32 + s0, row, (s1 - s0) * sizeof(int32_t));
          if (out.out_q != nullptr) {
            const int32_t* bias = out.bias == nullptr ? nullptr : out.bias + (out.bias_per_channel ? n : 0);
            const float* mult = out.multiplier + (out.multiplier_per_channel ? n : 0);
            isa.requant_row(s1 - s0, row, bias, 0, mult, 0, out.zero_point, out.fuse_relu, out.out_q_signed,
                            static_cast<int8_t*>(out.out_q) + n * out.ld_q + s0);
          }
        }
      }
    }
  });
}

void SpmmNmS8Portable(const SpmmNmS8Args& args) { SpmmNmS8Driver(args, kPortable); }

}  // namespace cpu
}  // namespace sparq
