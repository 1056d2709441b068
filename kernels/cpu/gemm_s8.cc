// INT8 dense GEMM: the ISA-independent driver and the portable kernel.
//
// Blocking (C = the int32 accumulator, W packed once by PackGemmS8):
//
//   for each block of kMcTiles * mr rows of A  x  kNc columns of W   (one ParallelFor task)
//     for each K slice of kKc
//       pack the slice of A into strips of mr rows (u8 quads or s16 pairs)
//       for each tile column (max_panels * 16 columns), for each strip:
//         c[mr x 16 * panels] (+)= strip x panels        <- the ISA's register tile
//     epilogue per row: zero-point correction, int32 out, requantization
//
// The +128 trick (panel16x4_s8). vpdpbusd multiplies UNSIGNED bytes by SIGNED
// bytes. With a_u = A + 128 for int8 A (a_u = A for uint8 A, both in [0, 255])
// and b_s = W - 128 for uint8 W (b_s = W for int8 W), shifting the zero points
// along (za_u = a_zp + sA, zb_s = w_zp - sB):
//
//   sum_k (A - a_zp)(W - w_zp) = sum_k (a_u - za_u)(b_s - zb_s)
//     = sum_k a_u b_s  -  zb_s * sum_k a_u  -  za_u * sum_k (b_s - zb_s)
//       [vpdpbusd]        [A row sums, here]   [col_sums, precomputed at packing]
//
// Every term is taken mod 2^32, so the result equals GemmS32Ref's wrapped sum
// bit for bit even when it overflows. panel16x2_s16 stores W - w_zp and the
// strips A - a_zp (both fit int16, products fit int32), so needs no correction.
#include <algorithm>
#include <cstring>
#include <vector>

#include "kernels/cpu/internal.h"
#include "kernels/ref/quantize.h"

namespace sparq {
namespace cpu {

namespace {

constexpr int64_t kKc = 512;      // K per slice: a strip (mr x kKc) stays in L1
constexpr int64_t kNc = 512;      // columns per task: the W block (kKc x kNc) stays in L2
constexpr int64_t kMcTiles = 16;  // strips per task

constexpr int kPanelWidth = PackedGemmS8::kPanelWidth;

// A thread's work buffer of at least `size` elements (grown, never shrunk).
template <typename T>
T* Reserve(std::vector<T>& v, int64_t size) {
  if (v.size() < static_cast<size_t>(size)) v.resize(static_cast<size_t>(size));
  return v.data();
}

// Packs rows [i0, i0 + rows) and columns [k0, k0 + kc) of A into strips of
// `mr` rows (see internal.h); rows past `rows` and columns past K are zero.
// For panel16x4_s8 (kStep 4) also adds each row's sum of a_u over the real
// columns to row_sums. kStep is a template argument so that the index math
// is shifts, not divisions: packing is O(M * K) per column block of W.
template <typename TA, int kStep>
void PackA(const GemmS8Args& args, const PackedGemmS8& b, const GemmS8Isa& isa, int64_t i0, int64_t rows, int64_t k0,
           int64_t kc, void* out, int32_t* row_sums) {
  const TA* a = static_cast<const TA*>(args.a);
  const int mr = isa.mr;
  const int64_t steps = kc / kStep;
  const int64_t k_count = std::min(b.k, k0 + kc) - k0;  // real columns in the slice
  const int64_t strips = (rows + mr - 1) / mr;
  const int64_t step_stride = int64_t{mr} * kStep;  // elements between consecutive steps of one row
  if (kStep == 4) {
    // a_u = A + 128 for int8 A is A's bits XOR 0x80, four bytes at a time.
    const uint8_t flip = args.a_signed ? 0x80 : 0;
    const uint32_t flip4 = args.a_signed ? 0x80808080u : 0u;
    const int64_t full_steps = k_count / kStep, tail = k_count % kStep;
    uint8_t* dst = static_cast<uint8_t*>(out);
    const int64_t strip_bytes = steps * step_stride;
    for (int64_t st = 0; st < strips; ++st) {
      const int64_t r0 = st * mr, strip_rows = std::min<int64_t>(mr, rows - r0);
      uint8_t* strip = dst + st * strip_bytes;
      if (strip_rows == mr && isa.pack_strip_s8 != nullptr) {  // a full strip: the ISA's packer
        // It writes every byte of the real columns; zero the steps it may leave (past k_count).
        std::memset(strip + full_steps * step_stride, 0, static_cast<size_t>((steps - full_steps) * step_stride));
        isa.pack_strip_s8(reinterpret_cast<const uint8_t*>(a + (i0 + r0) * args.lda + k0), args.lda, k_count,
                          args.a_signed, strip, row_sums + r0);
        continue;
      }
      std::memset(strip, 0, static_cast<size_t>(strip_bytes));
      for (int64_t r = r0; r < r0 + strip_rows; ++r) {
        const uint8_t* src = reinterpret_cast<const uint8_t*>(a + (i0 + r) * args.lda + k0);
        uint8_t* d = strip + (r % mr) * kStep;
        int32_t sum = 0;
        for (int64_t k = 0; k < k_count; ++k) sum += static_cast<uint8_t>(src[k] ^ flip);
        row_sums[r] += sum;
        for (int64_t s = 0; s < full_steps; ++s) {
          uint32_t quad;
          std::memcpy(&quad, src + s * kStep, sizeof(quad));
          quad ^= flip4;
          std::memcpy(d + s * step_stride, &quad, sizeof(quad));
        }
        for (int64_t t = 0; t < tail; ++t) d[full_steps * step_stride + t] = src[full_steps * kStep + t] ^ flip;
      }
    }
  } else {
    int16_t* dst = static_cast<int16_t*>(out);
    std::memset(dst, 0, static_cast<size_t>(strips * steps * step_stride) * sizeof(int16_t));
    for (int64_t r = 0; r < rows; ++r) {
      const TA* src = a + (i0 + r) * args.lda + k0;
      const int32_t zp = args.a_zp.at(i0 + r);
      int16_t* d = dst + (r / mr) * steps * step_stride + (r % mr) * kStep;
      for (int64_t k = 0; k < k_count; k += kStep, d += step_stride) {
        const int64_t n = std::min<int64_t>(kStep, k_count - k);
        for (int64_t t = 0; t < n; ++t) d[t] = static_cast<int16_t>(src[k + t] - zp);
      }
    }
  }
}

// Corrections (panel16x4_s8), raw output and requantization of a block's rows.
void Epilogue(const GemmS8Args& args, const PackedGemmS8& b, const GemmS8Isa& isa, int64_t i0, int64_t rows,
              int64_t j0, int64_t cols, int32_t* c, int64_t ldc, const int32_t* row_sums) {
  const S8Epilogue& out = args.out;
  const bool corrected = b.format == PackedFormat::kPanel16x4S8;
  const int32_t a_shift = args.a_signed ? 128 : 0;
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t i = i0 + r;
    uint32_t* acc = reinterpret_cast<uint32_t*>(c + r * ldc);  // same bits; wraps mod 2^32
    if (corrected) {
      const uint32_t za_u = static_cast<uint32_t>(args.a_zp.at(i) + a_shift);
      const uint32_t a_sum = static_cast<uint32_t>(row_sums[r]);
      const int32_t* zb_s = b.has_zero_points ? b.col_zero_points.data() + j0 : nullptr;
      const int32_t* col_sums = b.col_sums.data() + j0;
      if (zb_s != nullptr || za_u != 0) {
        if (isa.correct_row != nullptr) isa.correct_row(cols, acc, za_u, col_sums, a_sum, zb_s);
        else CorrectRowPortable(cols, acc, za_u, col_sums, a_sum, zb_s);
      }
    }
    const int32_t* row = c + r * ldc;
    if (out.out_s32 != nullptr) std::memcpy(out.out_s32 + i * out.ld_s32 + j0, row, cols * sizeof(int32_t));
    if (out.out_f32 != nullptr) {
      const float* bias = out.f32_bias == nullptr ? nullptr : out.f32_bias + j0;
      float* dst = out.out_f32 + i * out.ld_f32 + j0;
      if (isa.dequant_row != nullptr) isa.dequant_row(cols, row, out.f32_scale + j0, bias, dst);
      else DequantRowPortable(cols, row, out.f32_scale + j0, bias, dst);
      if (out.f32_post != nullptr) {
        out.f32_post(dst, dst, cols, out.f32_post_params[0], out.f32_post_params[1], out.f32_post_params[2]);
      }
    }
    if (out.out_q != nullptr) {
      const int32_t* bias = out.bias == nullptr ? nullptr : out.bias + (out.bias_per_channel ? j0 : 0);
      const float* mult = out.multiplier + (out.multiplier_per_channel ? j0 : 0);
      void* dst = static_cast<int8_t*>(out.out_q) + i * out.ld_q + j0;  // int8 and uint8 are both 1 byte
      isa.requant_row(cols, row, bias, out.bias_per_channel ? 1 : 0, mult, out.multiplier_per_channel ? 1 : 0,
                      out.zero_point, out.fuse_relu, out.out_q_signed, dst);
    }
  }
}

// ---------------------------------------------------------------------------
// Portable tiles: plain loops over the packed layouts.

constexpr int kPortableMr = 4;

void TilePortableS8(int64_t steps, const void* a_strip, const void* b, int64_t b_panel_stride, int panels,
                    int32_t* c, int64_t ldc, bool accumulate) {
  const uint8_t* a = static_cast<const uint8_t*>(a_strip);
  for (int p = 0; p < panels; ++p) {
    const int8_t* bp = static_cast<const int8_t*>(b) + p * b_panel_stride;
    int32_t acc[kPortableMr][kPanelWidth] = {};
    for (int64_t s = 0; s < steps; ++s) {
      const uint8_t* as = a + s * kPortableMr * 4;
      const int8_t* bs = bp + s * kPanelWidth * 4;
      for (int r = 0; r < kPortableMr; ++r)
        for (int j = 0; j < kPanelWidth; ++j)
          for (int t = 0; t < 4; ++t) acc[r][j] += int32_t{as[r * 4 + t]} * int32_t{bs[j * 4 + t]};
    }
    for (int r = 0; r < kPortableMr; ++r)
      for (int j = 0; j < kPanelWidth; ++j) {
        int32_t& dst = c[r * ldc + p * kPanelWidth + j];
        dst = accumulate ? static_cast<int32_t>(static_cast<uint32_t>(dst) + static_cast<uint32_t>(acc[r][j]))
                         : acc[r][j];
      }
  }
}

void TilePortableS16(int64_t steps, const void* a_strip, const void* b, int64_t b_panel_stride, int panels,
                     int32_t* c, int64_t ldc, bool accumulate) {
  const int16_t* a = static_cast<const int16_t*>(a_strip);
  for (int p = 0; p < panels; ++p) {
    const int16_t* bp = reinterpret_cast<const int16_t*>(static_cast<const char*>(b) + p * b_panel_stride);
    int32_t acc[kPortableMr][kPanelWidth] = {};
    for (int64_t s = 0; s < steps; ++s) {
      const int16_t* as = a + s * kPortableMr * 2;
      const int16_t* bs = bp + s * kPanelWidth * 2;
      for (int r = 0; r < kPortableMr; ++r)
        for (int j = 0; j < kPanelWidth; ++j)
          for (int t = 0; t < 2; ++t) acc[r][j] += int32_t{as[r * 2 + t]} * int32_t{bs[j * 2 + t]};
    }
    for (int r = 0; r < kPortableMr; ++r)
      for (int j = 0; j < kPanelWidth; ++j) {
        int32_t& dst = c[r * ldc + p * kPanelWidth + j];
        dst = accumulate ? static_cast<int32_t>(static_cast<uint32_t>(dst) + static_cast<uint32_t>(acc[r][j]))
                         : acc[r][j];
      }
  }
}

}  // namespace

void RequantRowPortable(int64_t n, const int32_t* acc, const int32_t* bias, int64_t bias_stride,
                        const float* multiplier, int64_t multiplier_stride, int32_t zero_point, bool fuse_relu,
                        bool out_signed, void* out) {
  if (out_signed) {
    RequantizeS32Ref<int8_t>(n, acc, bias, bias_stride, multiplier, multiplier_stride, zero_point, fuse_relu,
                             static_cast<int8_t*>(out));
  } else {
    RequantizeS32Ref<uint8_t>(n, acc, bias, bias_stride, multiplier, multiplier_stride, zero_point, fuse_relu,
                              static_cast<uint8_t*>(out));
  }
}

void CorrectRowPortable(int64_t n, uint32_t* acc, uint32_t za_u, const int32_t* col_sums, uint32_t a_sum,
                        const int32_t* zb_s) {
  if (zb_s != nullptr) {
    for (int64_t j = 0; j < n; ++j) acc[j] -= static_cast<uint32_t>(zb_s[j]) * a_sum;
  }
  if (za_u != 0) {
    for (int64_t j = 0; j < n; ++j) acc[j] -= za_u * static_cast<uint32_t>(col_sums[j]);
  }
}

void DequantRowPortable(int64_t n, const int32_t* acc, const float* scale, const float* bias, float* out) {
  for (int64_t j = 0; j < n; ++j) out[j] = static_cast<float>(acc[j]) * scale[j];
  if (bias != nullptr)
    for (int64_t j = 0; j < n; ++j) out[j] = out[j] + bias[j];
}

void GemmS8Driver(const GemmS8Args& args, const GemmS8Isa& isa) {
  const PackedGemmS8& b = *args.b;
  const int step = b.step();
  const int64_t m = args.m, n = b.n;
  const int mr = isa.mr;
  const int64_t steps_total = b.k_padded / step;
  // K slices of at most kKc, all about the same size (576 = 288 + 288, not 512 + 64).
  const int64_t max_slice_steps = kKc / step;
  const int64_t slices = std::max<int64_t>(1, (steps_total + max_slice_steps - 1) / max_slice_steps);
  const int64_t slice_steps = std::max<int64_t>(1, (steps_total + slices - 1) / slices);
  const int64_t mc = mr * kMcTiles;
  const int64_t tile_cols = int64_t{kPanelWidth} * isa.max_panels;
  const int64_t m_blocks = (m + mc - 1) / mc, n_tiles = (n + tile_cols - 1) / tile_cols;
  // Column blocks of at most kNc; with several threads, at least about four
  // tasks per thread where the tile columns allow (a 64-token MatMul with N =
  // 384 was one task: MiniLM's projections ran on one thread). Each output is
  // still summed by one task in k order: the same bits for any split.
  const int64_t threads = args.pool != nullptr ? args.pool->num_threads() : 1;
  int64_t n_blocks = (n_tiles * tile_cols + kNc / tile_cols * tile_cols - 1) / (kNc / tile_cols * tile_cols);
  if (threads > 1) n_blocks = std::max(n_blocks, std::min(n_tiles, (4 * threads + m_blocks - 1) / m_blocks));
  n_blocks = std::max<int64_t>(1, n_blocks);
  const int64_t nc = (n_tiles + n_blocks - 1) / n_blocks * tile_cols;
  n_blocks = (n + nc - 1) / nc;
  const size_t elem_bytes = b.format == PackedFormat::kPanel16x4S8 ? 1 : 2;
  const int64_t panel_bytes = steps_total * kPanelWidth * step * static_cast<int64_t>(elem_bytes);
  const char* b_data = b.format == PackedFormat::kPanel16x4S8 ? reinterpret_cast<const char*>(b.data_s8.data())
                                                              : reinterpret_cast<const char*>(b.data_s16.data());

  ParallelFor(args.pool, m_blocks * n_blocks, 1, [&](int64_t t_begin, int64_t t_end) {
    // Scratch kept by each thread from call to call: the tiles write c
    // before reading it (accumulate is false on the first K slice) and PackA
    // zeroes what it does not write, so nothing needs clearing here.
    thread_local std::vector<int32_t> c_buffer, row_sums_buffer;
    thread_local std::vector<char> a_pack_buffer;
    int32_t* const c = Reserve(c_buffer, mc * nc);
    char* const a_pack = Reserve(a_pack_buffer, mc * slice_steps * step * static_cast<int64_t>(elem_bytes));
    int32_t* const row_sums = Reserve(row_sums_buffer, mc);
    for (int64_t t = t_begin; t < t_end; ++t) {
      const int64_t i0 = (t / n_blocks) * mc, j0 = (t % n_blocks) * nc;
      const int64_t rows = std::min(mc, m - i0), cols = std::min(nc, n - j0);
      const int64_t col_panels = (cols + kPanelWidth - 1) / kPanelWidth;
      std::fill(row_sums, row_sums + mc, 0);
      if (steps_total == 0) std::fill(c, c + mc * nc, 0);
      for (int64_t s0 = 0; s0 < steps_total; s0 += slice_steps) {
        const int64_t steps = std::min(slice_steps, steps_total - s0);
        const int64_t k0 = s0 * step, kc = steps * step;
        if (step == 4) {
          if (args.a_signed) {
            PackA<int8_t, 4>(args, b, isa, i0, rows, k0, kc, a_pack, row_sums);
          } else {
            PackA<uint8_t, 4>(args, b, isa, i0, rows, k0, kc, a_pack, row_sums);
          }
        } else if (args.a_signed) {
          PackA<int8_t, 2>(args, b, isa, i0, rows, k0, kc, a_pack, row_sums);
        } else {
          PackA<uint8_t, 2>(args, b, isa, i0, rows, k0, kc, a_pack, row_sums);
        }
        const int64_t strip_bytes = steps * mr * step * static_cast<int64_t>(elem_bytes);
        const int64_t slice_bytes = steps * kPanelWidth * step * static_cast<int64_t>(elem_bytes);
        const int64_t strips = (rows + mr - 1) / mr;
        for (int64_t p = 0; p < col_panels; p += isa.max_panels) {
          const int panels = static_cast<int>(std::min<int64_t>(isa.max_panels, col_panels - p));
          const char* bp = b_data + (j0 / kPanelWidth + p) * panel_bytes +
                           s0 * kPanelWidth * step * static_cast<int64_t>(elem_bytes);
          // The next tile column's slice of W (weights are read once per run,
          // often from memory): a share of it before each strip's tile.
          const int next_panels = static_cast<int>(std::min<int64_t>(isa.max_panels, col_panels - p - panels));
          const int64_t share = (slice_bytes + strips - 1) / strips;
          for (int64_t r = 0; r < rows; r += mr) {
            for (int q = 0; q < next_panels; ++q) {
              const char* next = bp + (panels + q) * panel_bytes;
              const int64_t begin = (r / mr) * share, end = std::min(slice_bytes, begin + share);
              for (int64_t off = begin; off < end; off += 64) __builtin_prefetch(next + off);
            }
            isa.tile(steps, a_pack + (r / mr) * strip_bytes, bp, panel_bytes, panels,
                     c + r * nc + p * kPanelWidth, nc, s0 > 0);
          }
        }
      }
      Epilogue(args, b, isa, i0, rows, j0, cols, c, nc, row_sums);
    }
  });
}

void GemmS8Portable(const GemmS8Args& args) {
  static constexpr GemmS8Isa kS8 = {kPortableMr, 1, TilePortableS8, RequantRowPortable, nullptr};
  static constexpr GemmS8Isa kS16 = {kPortableMr, 1, TilePortableS16, RequantRowPortable, nullptr};
  GemmS8Driver(args, args.b->format == PackedFormat::kPanel16x4S8 ? kS8 : kS16);
}

}  // namespace cpu
}  // namespace sparq
