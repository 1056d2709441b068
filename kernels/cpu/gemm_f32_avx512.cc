// gemm_f32_avx512: the FP32 GEMM register tile for AVX-512, weights in
// panel8x32_f32, its strip and row-panel packers and transposed store; the
// driver is in gemm_f32.cc.
//
// Tile: 8 rows (weight panel) x 32 columns (2 zmm of the activation strip) =
// 16 zmm accumulators. Per k: 2 loads of the strip, 8 broadcasts of the
// panel, 16 FMAs.
#include <cstdint>

#include "kernels/cpu/cpu_target.h"
#include "kernels/cpu/internal.h"

#if SPARQ_CPU_X86
#include <immintrin.h>

namespace sparq {
namespace cpu {

SPARQ_CPU_TARGET_BEGIN(SPARQ_CPU_AVX512_FEATURES)

namespace {

constexpr int kTr = 8, kTc = 32;

using Vec = __m512;
constexpr int kHalf = 16;
inline Vec Load(const float* p) { return _mm512_loadu_ps(p); }
inline Vec Zero() { return _mm512_setzero_ps(); }
inline Vec Set1(float v) { return _mm512_set1_ps(v); }
inline Vec Add(Vec a, Vec b) { return _mm512_add_ps(a, b); }
// v < lo ? lo : v, then v > hi ? hi : v: vmaxps / vminps return their
// second operand when either is NaN, so with v second NaN stays NaN (and
// -0 stays -0 against a bound of 0), in 2 instructions instead of 4.
inline Vec Clamp(Vec v, Vec lo, Vec hi) { return _mm512_min_ps(hi, _mm512_max_ps(lo, v)); }

// Accumulators are named variables, not an array (GCC 12 keeps arrays of
// vectors in memory; see gemm_s8_avx512vnni.cc). Every step is for the first
// kRows rows and kVecs vectors of 16 columns only: a tile cut short costs only
// the rows it has (a batch-1 Gemm: 1 of 8; a 7 x 7 plane's last pixel panel:
// 1 of 8) and, with at most 16 columns, half its multiply-adds (a 14 x 14
// plane's last strip of 4 pixels, a 28 x 28 plane's of 16).
#define SPARQ_F32_ROWS(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7)
#define SPARQ_F32_DECLARE(r) __m512 c##r##0 = _mm512_setzero_ps(), c##r##1 = _mm512_setzero_ps();
#define SPARQ_F32_LOAD(r)                                                     \
  if constexpr ((r) < kRows) {                                                \
    c##r##0 = _mm512_loadu_ps(c + (r) * rs);                                  \
    if constexpr (kVecs == 2) c##r##1 = _mm512_loadu_ps(c + (r) * rs + 16);   \
  }
#define SPARQ_F32_LOAD_MASKED(r)                                                     \
  if constexpr ((r) < kRows) {                                                       \
    c##r##0 = _mm512_maskz_loadu_ps(m0, c + (r) * rs);                               \
    if constexpr (kVecs == 2) c##r##1 = _mm512_maskz_loadu_ps(m1, c + (r) * rs + 16); \
  }
#define SPARQ_F32_STORE(r)                                                      \
  if constexpr ((r) < kRows) {                                                  \
    _mm512_storeu_ps(c + (r) * rs, c##r##0);                                    \
    if constexpr (kVecs == 2) _mm512_storeu_ps(c + (r) * rs + 16, c##r##1);     \
  }
#define SPARQ_F32_STORE_MASKED(r)                                                     \
  if constexpr ((r) < kRows) {                                                        \
    _mm512_mask_storeu_ps(c + (r) * rs, m0, c##r##0);                                 \
    if constexpr (kVecs == 2) _mm512_mask_storeu_ps(c + (r) * rs + 16, m1, c##r##1);  \
  }
#define SPARQ_F32_FMA(r)                                                   \
  if constexpr ((r) < kRows) {                                             \
    const __m512 av = _mm512_set1_ps(ak[r]);                               \
    c##r##0 = _mm512_fmadd_ps(av, b0, c##r##0);                            \
    if constexpr (kVecs == 2) c##r##1 = _mm512_fmadd_ps(av, b1, c##r##1);  \
  }
#define SPARQ_F32_BIAS(r)                                                      \
  if constexpr ((r) < kRows) {                                                 \
    const Vec rb = ep->row_bias != nullptr ? Set1(ep->row_bias[r]) : Zero();  \
    c##r##0 = Add(c##r##0, Add(rb, cb0));                                      \
    if constexpr (kVecs == 2) c##r##1 = Add(c##r##1, Add(rb, cb1));            \
  }
#define SPARQ_F32_CLAMP(r)                                             \
  if constexpr ((r) < kRows) {                                         \
    c##r##0 = Clamp(c##r##0, lo, hi);                                  \
    if constexpr (kVecs == 2) c##r##1 = Clamp(c##r##1, lo, hi);        \
  }
// Every tile's end: the epilogue (column and row bias, clamp) when there is
// one, then the store of its rows (masked when `full` is false).
#define SPARQ_F32_FINISH()                                                            \
  if (ep != nullptr) {                                                                \
    const Vec cb0 = ep->col_bias != nullptr ? Load(ep->col_bias) : Zero();            \
    const Vec cb1 = ep->col_bias != nullptr ? Load(ep->col_bias + kHalf) : Zero();    \
    SPARQ_F32_ROWS(SPARQ_F32_BIAS)                                                    \
    if (ep->clamp) {                                                                  \
      const Vec lo = Set1(ep->lo), hi = Set1(ep->hi);                                 \
      SPARQ_F32_ROWS(SPARQ_F32_CLAMP)                                                 \
    }                                                                                 \
  }                                                                                   \
  if (full) {                                                                         \
    SPARQ_F32_ROWS(SPARQ_F32_STORE)                                                   \
  } else {                                                                            \
    SPARQ_F32_ROWS(SPARQ_F32_STORE_MASKED)                                            \
  }

// The tile for its first kRows rows and kVecs * 16 columns; columns past
// `cols` are neither read nor written in c (masked), though b is read for
// all kVecs * 16 (strips are padded).
template <int kRows, int kVecs>
void TileRows(int64_t kc, const float* a, const float* b, int64_t ldb, float* c, int64_t rs, int cols,
              bool accumulate, const TileEpilogue* ep) {
  const bool full = cols == kVecs * kHalf;
  const __mmask16 m0 = static_cast<__mmask16>(cols >= kHalf ? 0xFFFF : (1u << cols) - 1);
  const __mmask16 m1 = static_cast<__mmask16>(cols >= kTc ? 0xFFFF : cols > kHalf ? (1u << (cols - kHalf)) - 1 : 0);
  SPARQ_F32_ROWS(SPARQ_F32_DECLARE)
  if (accumulate) {
    if (full) {
      SPARQ_F32_ROWS(SPARQ_F32_LOAD)
    } else {
      SPARQ_F32_ROWS(SPARQ_F32_LOAD_MASKED)
    }
  }
  for (int64_t kk = 0; kk < kc; ++kk) {
    const float* ak = a + kk * kTr;
    const __m512 b0 = _mm512_loadu_ps(b + kk * ldb);
    __m512 b1 = b0;
    if constexpr (kVecs == 2) b1 = _mm512_loadu_ps(b + kk * ldb + 16);
    SPARQ_F32_ROWS(SPARQ_F32_FMA)
  }
  SPARQ_F32_FINISH()
}

void Tile(int64_t kc, const float* a, const float* b, int64_t ldb, float* c, int64_t rs, int rows, int cols,
          bool accumulate, const TileEpilogue* ep) {
  using TileFn = void (*)(int64_t, const float*, const float*, int64_t, float*, int64_t, int, bool, const TileEpilogue*);
  static constexpr TileFn kTiles[2][kTr + 1] = {
      {nullptr, TileRows<1, 1>, TileRows<2, 1>, TileRows<3, 1>, TileRows<4, 1>, TileRows<5, 1>, TileRows<6, 1>,
       TileRows<7, 1>, TileRows<8, 1>},
      {nullptr, TileRows<1, 2>, TileRows<2, 2>, TileRows<3, 2>, TileRows<4, 2>, TileRows<5, 2>, TileRows<6, 2>,
       TileRows<7, 2>, TileRows<8, 2>}};
  if (rows < 1 || rows > kTr || cols < 1 || cols > kTc) return;  // the drivers never ask for an empty tile
  kTiles[cols > kHalf ? 1 : 0][rows](kc, a, b, ldb, c, rs, cols, accumulate, ep);
}

// kDirectConv's tile (DirectTileFn): TileRows with row r's value for k read
// in place at q<r>[kk * plane] (q<r> = pixel r's window at the tap) instead
// of a packed panel; every tap of the slice summed in the same registers.
#define SPARQ_F32_DIRECT_PTR(r) [[maybe_unused]] const float* q##r = pixels[(r) < kRows ? (r) : 0];
#define SPARQ_F32_DIRECT_FMA(r)                                            \
  if constexpr ((r) < kRows) {                                             \
    const __m512 av = _mm512_set1_ps(q##r[idx]);                           \
    c##r##0 = _mm512_fmadd_ps(av, b0, c##r##0);                            \
    if constexpr (kVecs == 2) c##r##1 = _mm512_fmadd_ps(av, b1, c##r##1);  \
  }
#define SPARQ_F32_DIRECT_SHIFT(r) \
  if constexpr ((r) < kRows) q##r = pixels[r] + off;

template <int kRows, int kVecs>
void DirectTileRows(const float* const* pixels, const int64_t* taps, int num_taps, int64_t kc, int64_t plane,
                    const float* b, int64_t b_tap, float* c, int64_t rs, int cols, bool accumulate,
                    const TileEpilogue* ep) {
  const bool full = cols == kVecs * kHalf;
  const __mmask16 m0 = static_cast<__mmask16>(cols >= kHalf ? 0xFFFF : (1u << cols) - 1);
  const __mmask16 m1 = static_cast<__mmask16>(cols >= kTc ? 0xFFFF : cols > kHalf ? (1u << (cols - kHalf)) - 1 : 0);
  SPARQ_F32_ROWS(SPARQ_F32_DECLARE)
  if (accumulate) {
    if (full) {
      SPARQ_F32_ROWS(SPARQ_F32_LOAD)
    } else {
      SPARQ_F32_ROWS(SPARQ_F32_LOAD_MASKED)
    }
  }
  SPARQ_F32_ROWS(SPARQ_F32_DIRECT_PTR)
  for (int t = 0; t < num_taps; ++t) {
    const int64_t off = taps[t];
    SPARQ_F32_ROWS(SPARQ_F32_DIRECT_SHIFT)
    const float* bt = b + t * b_tap;
    for (int64_t kk = 0, idx = 0; kk < kc; ++kk, idx += plane) {
      const __m512 b0 = _mm512_loadu_ps(bt + kk * kTc);
      __m512 b1 = b0;
      if constexpr (kVecs == 2) b1 = _mm512_loadu_ps(bt + kk * kTc + 16);
      SPARQ_F32_ROWS(SPARQ_F32_DIRECT_FMA)
    }
  }
  SPARQ_F32_FINISH()
}

void DirectTile(const float* const* pixels, const int64_t* taps, int num_taps, int64_t kc, int64_t plane,
                const float* b, int64_t b_tap, float* c, int64_t ldc, int rows, int cols, bool accumulate,
                const TileEpilogue* ep) {
  using TileFn = void (*)(const float* const*, const int64_t*, int, int64_t, int64_t, const float*, int64_t, float*,
                          int64_t, int, bool, const TileEpilogue*);
  static constexpr TileFn kTiles[2][kTr + 1] = {
      {nullptr, DirectTileRows<1, 1>, DirectTileRows<2, 1>, DirectTileRows<3, 1>, DirectTileRows<4, 1>,
       DirectTileRows<5, 1>, DirectTileRows<6, 1>, DirectTileRows<7, 1>, DirectTileRows<8, 1>},
      {nullptr, DirectTileRows<1, 2>, DirectTileRows<2, 2>, DirectTileRows<3, 2>, DirectTileRows<4, 2>,
       DirectTileRows<5, 2>, DirectTileRows<6, 2>, DirectTileRows<7, 2>, DirectTileRows<8, 2>}};
  if (rows < 1 || rows > kTr || cols < 1 || cols > kTc) return;  // the driver never asks for an empty tile
  kTiles[cols > kHalf ? 1 : 0][rows](pixels, taps, num_taps, kc, plane, b, b_tap, c, ldc, cols, accumulate, ep);
}

// kShiftedConv's tile (ShiftedTileFn): TileRows over every tap of the slice
// without storing in between, b at the tap's offset into the padded image.
template <int kRows, int kVecs>
void ShiftedTileRows(const float* a, int64_t a_tap, const float* b, const int64_t* taps, int num_taps, int64_t kc,
                     int64_t ldb, float* c, int64_t rs, int cols, bool accumulate, const TileEpilogue* ep) {
  const bool full = cols == kVecs * kHalf;
  const __mmask16 m0 = static_cast<__mmask16>(cols >= kHalf ? 0xFFFF : (1u << cols) - 1);
  const __mmask16 m1 = static_cast<__mmask16>(cols >= kTc ? 0xFFFF : cols > kHalf ? (1u << (cols - kHalf)) - 1 : 0);
  SPARQ_F32_ROWS(SPARQ_F32_DECLARE)
  if (accumulate) {
    if (full) {
      SPARQ_F32_ROWS(SPARQ_F32_LOAD)
    } else {
      SPARQ_F32_ROWS(SPARQ_F32_LOAD_MASKED)
    }
  }
  for (int t = 0; t < num_taps; ++t) {
    const float* at = a + t * a_tap;
    const float* bt = b + taps[t];
    for (int64_t kk = 0; kk < kc; ++kk) {
      const float* ak = at + kk * kTr;
      const __m512 b0 = _mm512_loadu_ps(bt + kk * ldb);
      __m512 b1 = b0;
      if constexpr (kVecs == 2) b1 = _mm512_loadu_ps(bt + kk * ldb + 16);
      SPARQ_F32_ROWS(SPARQ_F32_FMA)
    }
  }
  SPARQ_F32_FINISH()
}

void ShiftedTile(const float* a, int64_t a_tap, const float* b, const int64_t* taps, int num_taps, int64_t kc,
                 int64_t ldb, float* c, int64_t ldc, int rows, int cols, bool accumulate, const TileEpilogue* ep) {
  using TileFn = void (*)(const float*, int64_t, const float*, const int64_t*, int, int64_t, int64_t, float*, int64_t,
                          int, bool, const TileEpilogue*);
  static constexpr TileFn kTiles[2][kTr + 1] = {
      {nullptr, ShiftedTileRows<1, 1>, ShiftedTileRows<2, 1>, ShiftedTileRows<3, 1>, ShiftedTileRows<4, 1>,
       ShiftedTileRows<5, 1>, ShiftedTileRows<6, 1>, ShiftedTileRows<7, 1>, ShiftedTileRows<8, 1>},
      {nullptr, ShiftedTileRows<1, 2>, ShiftedTileRows<2, 2>, ShiftedTileRows<3, 2>, ShiftedTileRows<4, 2>,
       ShiftedTileRows<5, 2>, ShiftedTileRows<6, 2>, ShiftedTileRows<7, 2>, ShiftedTileRows<8, 2>}};
  if (rows < 1 || rows > kTr || cols < 1 || cols > kTc) return;  // the driver never asks for an empty tile
  kTiles[cols > kHalf ? 1 : 0][rows](a, a_tap, b, taps, num_taps, kc, ldb, c, ldc, cols, accumulate, ep);
}

#undef SPARQ_F32_DIRECT_PTR
#undef SPARQ_F32_DIRECT_FMA
#undef SPARQ_F32_DIRECT_SHIFT
#undef SPARQ_F32_ROWS
#undef SPARQ_F32_DECLARE
#undef SPARQ_F32_LOAD
#undef SPARQ_F32_LOAD_MASKED
#undef SPARQ_F32_STORE
#undef SPARQ_F32_STORE_MASKED
#undef SPARQ_F32_FMA
#undef SPARQ_F32_BIAS
#undef SPARQ_F32_CLAMP
#undef SPARQ_F32_FINISH

inline __mmask16 LaneRange(int64_t lo, int64_t hi) {  // bits [lo, hi) of 16, clipped
  lo = lo < 0 ? 0 : lo;
  hi = hi > 16 ? 16 : hi;
  if (hi <= lo) return 0;
  return static_cast<__mmask16>(((1u << (hi - lo)) - 1) << lo);
}

// PackConvStripPortable with masked loads: 16 strip columns per load (stride
// 1), or the even lanes of two loads (stride 2); padding lanes load as 0.
// Other strides use the portable packer.
void PackConvStrip(const ConvGeometry& g, const float* image, const ConvStripRun* runs, int num_runs, int cols,
                   int64_t k0, int64_t kc, int tc, float* strip) {
  const int64_t sw = g.stride_w;
  if ((sw != 1 && sw != 2) || tc != kTc) {
    PackConvStripPortable(g, image, runs, num_runs, cols, k0, kc, tc, strip);
    return;
  }
  const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  const int64_t window = g.kernel_h * g.kernel_w;
  int64_t c = k0 / window, ky = (k0 % window) / g.kernel_w, kx = k0 % g.kernel_w;
  for (int64_t kk = 0; kk < kc; ++kk) {
    float* dst = strip + kk * tc;
    _mm512_storeu_ps(dst, _mm512_setzero_ps());
    _mm512_storeu_ps(dst + 16, _mm512_setzero_ps());
    if (kk > 0 && ++kx == g.kernel_w) {  // (c, ky, kx) of k0 + kk, counted up without dividing
      kx = 0;
      if (++ky == g.kernel_h) ky = 0, ++c;
    }
    const float* plane = image + c * g.height * g.width;
    for (int r = 0; r < num_runs; ++r) {
      const ConvStripRun& run = runs[r];
      const int64_t iy = run.oy * g.stride_h - g.pad_top + ky * g.dilation_h;
      if (iy < 0 || iy >= g.height) continue;  // zeros already
      // Pixel u of the run reads column ix0 + u * sw, inside the row for u in [lo, hi).
      const int64_t ix0 = run.ox0 * sw - g.pad_left + kx * g.dilation_w;
      const int64_t lo = ix0 >= 0 ? 0 : (-ix0 + sw - 1) / sw;
      const int64_t hi = ix0 > g.width - 1 ? 0 : (g.width - 1 - ix0) / sw + 1;
      const float* src = plane + iy * g.width + ix0;  // may point before the row: masked lanes are not read
      for (int u0 = 0; u0 < run.len; u0 += 16) {
        const int n = run.len - u0 < 16 ? run.len - u0 : 16;
        const int64_t a = lo - u0, b = (hi < u0 + n ? hi : u0 + n) - u0;  // valid lanes [a, b)
        if (b <= a || b <= 0) continue;
        __m512 v;
        if (sw == 1) {
          v = _mm512_maskz_loadu_ps(LaneRange(a, b), src + u0);
        } else {  // lane j reads element 2j of src + 2 u0: elements [2a, 2b - 1)
          const float* s2 = src + 2 * u0;
          v = _mm512_permutex2var_ps(_mm512_maskz_loadu_ps(LaneRange(2 * a, 2 * b - 1), s2), even,
                                     _mm512_maskz_loadu_ps(LaneRange(2 * a - 16, 2 * b - 1 - 16), s2 + 16));
        }
        _mm512_mask_storeu_ps(dst + run.t + u0, LaneRange(0, n), v);
      }
    }
  }
}

// StoreTransposedPortable for the 8 x 32 tile (rows <= 8): each 8 x 16 half is
// transposed in registers and each channel's 8 pixels stored at once. In
// 128-bit lane L, u[m] holds pixels 0-3 and u[m + 4] pixels 4-7 of channel
// 4 L + m (of the half).
void StoreTransposed(const float* tile, int64_t ldt, int rows, int cols, float* y, int64_t ld) {
  const __mmask8 pixels = static_cast<__mmask8>((1u << rows) - 1);
  for (int c0 = 0; c0 < cols; c0 += kHalf) {
    __m512 r[kTr], t[kTr], u[kTr];
    for (int i = 0; i < kTr; ++i) r[i] = _mm512_loadu_ps(tile + i * ldt + c0);
    for (int i = 0; i < kTr; i += 2) {
      t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);      // per lane: r_i[0] r_i+1[0] r_i[1] r_i+1[1]
      t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);  // per lane: r_i[2] r_i+1[2] r_i[3] r_i+1[3]
    }
    for (int h = 0; h < 2; ++h) {  // pixels 4 h .. 4 h + 3
      const __m512* th = t + 4 * h;
      u[0 + 4 * h] = _mm512_shuffle_ps(th[0], th[2], 0x44);
      u[1 + 4 * h] = _mm512_shuffle_ps(th[0], th[2], 0xEE);
      u[2 + 4 * h] = _mm512_shuffle_ps(th[1], th[3], 0x44);
      u[3 + 4 * h] = _mm512_shuffle_ps(th[1], th[3], 0xEE);
    }
    for (int m = 0; m < 4; ++m) {
      // [u_m.L0, u_m+4.L0, u_m.L1, u_m+4.L1] = channels m, 4 + m; then 8 + m, 12 + m.
      const __m512 lo = _mm512_shuffle_f32x4(u[m], u[m + 4], _MM_SHUFFLE(1, 0, 1, 0));
      const __m512 hi = _mm512_shuffle_f32x4(u[m], u[m + 4], _MM_SHUFFLE(3, 2, 3, 2));
      const __m512 v[2] = {_mm512_shuffle_f32x4(lo, lo, _MM_SHUFFLE(3, 1, 2, 0)),
                           _mm512_shuffle_f32x4(hi, hi, _MM_SHUFFLE(3, 1, 2, 0))};
      for (int l = 0; l < 4; ++l) {
        const int ch = c0 + 4 * l + m;
        if (ch >= cols) continue;
        const __m256 p = (l & 1) ? _mm512_extractf32x8_ps(v[l >> 1], 1) : _mm512_castps512_ps256(v[l >> 1]);
        _mm256_mask_storeu_ps(y + ch * ld, pixels, p);
      }
    }
  }
}

// PackRowsPanelPortable for 8-row panels: 8 x 8 blocks transposed in
// registers (one 8-float load per row, one 8-float store per k).
void PackRowsPanel(const float* x, int64_t ld_x, int rows, int64_t kc, int tr, float* panel) {
  if (tr != kTr) {
    PackRowsPanelPortable(x, ld_x, rows, kc, tr, panel);
    return;
  }
  int64_t kk = 0;
  for (; kk + 8 <= kc; kk += 8) {
    __m256 r[8], t[8], u[8];
    for (int i = 0; i < 8; ++i) r[i] = i < rows ? _mm256_loadu_ps(x + i * ld_x + kk) : _mm256_setzero_ps();
    for (int i = 0; i < 8; i += 2) {
      t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
      t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
    }
    for (int h = 0; h < 8; h += 4) {  // u[h + m], 128-bit lane L: k = kk + 4 L + m of rows h .. h + 3
      u[h + 0] = _mm256_shuffle_ps(t[h], t[h + 2], 0x44);
      u[h + 1] = _mm256_shuffle_ps(t[h], t[h + 2], 0xEE);
      u[h + 2] = _mm256_shuffle_ps(t[h + 1], t[h + 3], 0x44);
      u[h + 3] = _mm256_shuffle_ps(t[h + 1], t[h + 3], 0xEE);
    }
    for (int m = 0; m < 4; ++m) {
      _mm256_storeu_ps(panel + (kk + m) * 8, _mm256_permute2f128_ps(u[m], u[m + 4], 0x20));
      _mm256_storeu_ps(panel + (kk + 4 + m) * 8, _mm256_permute2f128_ps(u[m], u[m + 4], 0x31));
    }
  }
  for (; kk < kc; ++kk)
    for (int i = 0; i < 8; ++i) panel[kk * 8 + i] = i < rows ? x[i * ld_x + kk] : 0.0f;
}

}  // namespace

void GemmF32Avx512(const GemmF32Args& args) {
  GemmF32Isa isa{kTr, kTc, Tile, PackConvStrip, StoreTransposed};
  isa.pack_rows_panel = PackRowsPanel;
  isa.direct_tile = DirectTile;
  isa.shifted_tile = ShiftedTile;
  GemmF32Driver(args, isa);
}

SPARQ_CPU_TARGET_END

}  // namespace cpu
}  // namespace sparq

#endif  // SPARQ_CPU_X86
