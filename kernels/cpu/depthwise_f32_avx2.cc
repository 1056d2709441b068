// depthwise_f32 for AVX2: windows 3, 5 or 7 wide with stride 1 or 2 run whole
// output rows 8 columns at a time in ymm registers, like the AVX-512 row
// (depthwise_rows_avx512.inc): each tap a masked load (vmaskmovps: lanes whose
// input column lies in the padding read nothing and give 0, the reference's
// zero padding) and an FMA; stride 2 loads 16 consecutive columns and keeps
// the even ones. Window rows above or below x read a row of zeros, so every
// value sums all its taps in (ky, kx) order and four output rows share one
// loop. Other windows run depthwise_f32_plane.inc with a vector loop for the
// interior columns of 3-wide stride-1 windows.
#include <cstdint>
#include <limits>

#include "kernels/cpu/cpu_target.h"
#include "kernels/cpu/internal.h"

#if SPARQ_CPU_X86
#include <immintrin.h>

namespace sparq {
namespace cpu {

SPARQ_CPU_TARGET_BEGIN(SPARQ_CPU_AVX2_FEATURES)

namespace {
#include "kernels/cpu/depthwise_f32_plane.inc"

void InteriorRowAvx2(const float* const* rows, const float* const* weights, int valid_rows, int64_t lo, int64_t hi,
                     int64_t pad_left, int64_t stride, float* yr) {
  int64_t ox = lo;
  if (stride == 1) {
    for (; ox + 8 <= hi; ox += 8) {
      const int64_t ix = ox - pad_left;
      __m256 acc = _mm256_setzero_ps();
      for (int r = 0; r < valid_rows; ++r)
        for (int kx = 0; kx < 3; ++kx)
          acc = _mm256_fmadd_ps(_mm256_set1_ps(weights[r][kx]), _mm256_loadu_ps(rows[r] + ix + kx), acc);
      _mm256_storeu_ps(yr + ox, acc);
    }
  }
  InteriorRow(rows, weights, valid_rows, ox, hi, pad_left, stride, yr);
}

constexpr int kMaxBlocks = 128;             // output rows up to 1024 columns
constexpr int kMaxRows = 16;                // kernel_h up to 16
constexpr int64_t kMaxWidth = 4096;         // input rows up to this many columns (kZeroRow)
alignas(32) const float kZeroRow[kMaxWidth] = {};

// Lanes [lo, hi) of 8 set (all bits), clipped.
inline __m256i LaneMask(int64_t lo, int64_t hi) {
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  return _mm256_and_si256(_mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(hi)), lane),
                          _mm256_cmpgt_epi32(lane, _mm256_set1_epi32(static_cast<int>(lo) - 1)));
}

inline int64_t FloorDiv(int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }

struct Tap {
  int64_t first_col;  // input column of the block's lane 0
  __m256i m0, m1;     // loads: lanes (stride 1) or elements [0, 8) and [8, 16) (stride 2)
};

template <int kKw, int kR, bool kStride2>
inline void Block(const float* const (*rows)[kMaxRows], const float* const* weights, int kh, const Tap* t,
                  __m256* acc) {
  for (int k = 0; k < kh; ++k) {
    for (int kx = 0; kx < kKw; ++kx) {
      const __m256 w = _mm256_set1_ps(weights[k][kx]);
      for (int r = 0; r < kR; ++r) {
        const float* x = rows[r][k] + t[kx].first_col;  // may point outside the row: masked lanes are not read
        __m256 v;
        if (kStride2) {
          // [a0 a2 b0 b2 | a4 a6 b4 b6] -> [a0 a2 a4 a6 b0 b2 b4 b6]
          const __m256 e = _mm256_shuffle_ps(_mm256_maskload_ps(x, t[kx].m0), _mm256_maskload_ps(x + 8, t[kx].m1),
                                             _MM_SHUFFLE(2, 0, 2, 0));
          v = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(e), _MM_SHUFFLE(3, 1, 2, 0)));
        } else {
          v = _mm256_maskload_ps(x, t[kx].m0);
        }
        acc[r] = _mm256_fmadd_ps(w, v, acc[r]);
      }
    }
  }
}

template <int kKw, bool kStride2>
void RowsNarrow(const DepthwiseF32Plane& p) {
  constexpr int64_t s = kStride2 ? 2 : 1;
  const int64_t blocks = (p.out_w + 7) / 8;
  Tap taps[kMaxBlocks][kKw];
  __m256i cols[kMaxBlocks];
  for (int64_t bl = 0; bl < blocks; ++bl) {
    const int64_t ox = bl * 8, n = p.out_w - ox < 8 ? p.out_w - ox : 8;
    cols[bl] = LaneMask(0, n);
    for (int kx = 0; kx < kKw; ++kx) {
      // Lane j reads input column first_col + j * s: valid for j in [jlo, jhi).
      const int64_t first_col = ox * s + kx - p.pad_left;
      const int64_t lowest = -FloorDiv(first_col, s);  // ceil(-first_col / s)
      const int64_t jlo = lowest < 0 ? 0 : lowest;
      const int64_t past = FloorDiv(p.width - 1 - first_col, s) + 1;
      const int64_t jhi = past < n ? past : n;
      Tap& t = taps[bl][kx];
      t.first_col = first_col;
      if (jhi <= jlo) {
        t.m0 = t.m1 = _mm256_setzero_si256();
      } else if (!kStride2) {
        t.m0 = LaneMask(jlo, jhi), t.m1 = _mm256_setzero_si256();
      } else {
        t.m0 = LaneMask(2 * jlo, 2 * jhi - 1), t.m1 = LaneMask(2 * jlo - 8, 2 * jhi - 1 - 8);
      }
    }
  }
  const __m256 lo = _mm256_set1_ps(p.out_min), hi = _mm256_set1_ps(p.out_max), bias = _mm256_set1_ps(p.bias);
  const bool clamp = p.out_min > -std::numeric_limits<float>::infinity() ||
                     p.out_max < std::numeric_limits<float>::infinity();
  auto store = [&](int64_t oy, int64_t bl, __m256 sums) {
    __m256 v = _mm256_add_ps(sums, bias);
    if (clamp) {
      v = _mm256_blendv_ps(v, lo, _mm256_cmp_ps(v, lo, _CMP_LT_OQ));  // NaN stays NaN
      v = _mm256_blendv_ps(v, hi, _mm256_cmp_ps(v, hi, _CMP_GT_OQ));
    }
    _mm256_maskstore_ps(p.y + oy * p.out_w + bl * 8, cols[bl], v);
  };
  const float* weights[kMaxRows];
  for (int64_t ky = 0; ky < p.kernel_h; ++ky) weights[ky] = p.w + ky * kKw;
  const float* rows[4][kMaxRows];
  auto set_rows = [&](int r, int64_t oy) {
    for (int64_t ky = 0; ky < p.kernel_h; ++ky) {
      const int64_t iy = oy * p.stride_h - p.pad_top + ky * p.dilation_h;
      rows[r][ky] = iy < 0 || iy >= p.height ? kZeroRow : p.x + iy * p.width;
    }
  };
  const int kh = static_cast<int>(p.kernel_h);
  int64_t oy = 0;
  for (; oy + 4 <= p.out_h; oy += 4) {
    for (int r = 0; r < 4; ++r) set_rows(r, oy + r);
    for (int64_t bl = 0; bl < blocks; ++bl) {
      __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
      Block<kKw, 4, kStride2>(rows, weights, kh, taps[bl], acc);
      for (int r = 0; r < 4; ++r) store(oy + r, bl, acc[r]);
    }
  }
  for (; oy < p.out_h; ++oy) {
    set_rows(0, oy);
    for (int64_t bl = 0; bl < blocks; ++bl) {
      __m256 acc[1] = {_mm256_setzero_ps()};
      Block<kKw, 1, kStride2>(rows, weights, kh, taps[bl], acc);
      store(oy, bl, acc[0]);
    }
  }
}

}  // namespace

void DepthwiseF32PlaneAvx2(const DepthwiseF32Plane& p) {
  const bool narrow = p.kernel_h <= kMaxRows && p.dilation_w == 1 && (p.stride_w == 1 || p.stride_w == 2) &&
                      (p.out_w + 7) / 8 <= kMaxBlocks && p.width <= kMaxWidth;
  const bool s2 = p.stride_w == 2;
  if (narrow && p.kernel_w == 3) {
    s2 ? RowsNarrow<3, true>(p) : RowsNarrow<3, false>(p);
  } else if (narrow && p.kernel_w == 5) {
    s2 ? RowsNarrow<5, true>(p) : RowsNarrow<5, false>(p);
  } else if (narrow && p.kernel_w == 7) {
    s2 ? RowsNarrow<7, true>(p) : RowsNarrow<7, false>(p);
  } else {
    DepthwisePlaneBody(p, InteriorRowAvx2);
  }
}

SPARQ_CPU_TARGET_END

}  // namespace cpu
}  // namespace sparq

#endif  // SPARQ_CPU_X86
