// depthwise_f32 for AVX-512: windows 3, 5 or 7 wide with stride 1 or 2 run
// whole output rows 16 columns at a time in zmm registers, each tap a masked
// load (lanes whose input column lies in the padding load 0, as the
// reference's zero padding contributes 0) and an FMA; stride 2 takes the even
// lanes of two loads (vpermt2ps). Other windows use depthwise_f32_plane.inc
// with the same vector loop for the interior columns of 3-wide windows.
#include <cstdint>
#include <limits>

#include "kernels/cpu/cpu_target.h"
#include "kernels/cpu/internal.h"

#if SPARQ_CPU_X86
#include <immintrin.h>

namespace sparq {
namespace cpu {

SPARQ_CPU_TARGET_BEGIN(SPARQ_CPU_AVX512_FEATURES)

namespace {
#include "kernels/cpu/depthwise_f32_plane.inc"

void InteriorRowAvx512(const float* const* rows, const float* const* weights, int valid_rows, int64_t lo, int64_t hi,
                       int64_t pad_left, int64_t stride, float* yr) {
  const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  for (int64_t ox = lo; ox < hi; ox += 16) {
    // n columns (16, or the tail); masks keep every load inside the row.
    const int n = static_cast<int>(hi - ox < 16 ? hi - ox : 16);
    const __mmask16 cols = static_cast<__mmask16>((1u << n) - 1);
    // Stride 2 reads x[2j + kx], j < n: 2n - 1 values, in two loads of up to 16.
    const int wide = 2 * n - 1;
    const __mmask16 first = static_cast<__mmask16>(wide >= 16 ? 0xffff : (1u << wide) - 1);
    const __mmask16 second = static_cast<__mmask16>(wide > 16 ? (1u << (wide - 16)) - 1 : 0);
    const int64_t ix = ox * stride - pad_left;
    __m512 acc = _mm512_setzero_ps();
    for (int r = 0; r < valid_rows; ++r) {
      const float* x = rows[r] + ix;
      for (int kx = 0; kx < 3; ++kx) {
        const __m512 v = stride == 1 ? _mm512_maskz_loadu_ps(cols, x + kx)
                                     : _mm512_permutex2var_ps(_mm512_maskz_loadu_ps(first, x + kx), even,
                                                              _mm512_maskz_loadu_ps(second, x + kx + 16));
        acc = _mm512_fmadd_ps(_mm512_set1_ps(weights[r][kx]), v, acc);
      }
    }
    _mm512_mask_storeu_ps(yr + ox, cols, acc);
  }
}

inline int64_t FloorDiv(int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }

inline __mmask16 LaneRange(int64_t lo, int64_t hi) {  // bits [lo, hi) of 16, clipped
  lo = lo < 0 ? 0 : lo;
  hi = hi > 16 ? 16 : hi;
  if (hi <= lo) return 0;
  return static_cast<__mmask16>(((1u << (hi - lo)) - 1) << lo);
}

// Rows of a window kKw = 3, 5 or 7 wide, stride 1 or 2, no dilation along x.
// Each output row goes 16 columns at a time; the load masks depend on the
// column block and tap only: computed once per plane. A value sums its taps
// in (ky, kx) order, then the bias, then the clamp.
template <int kKw>
void RowsNarrow(const DepthwiseF32Plane& p) {
  const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  const int64_t s = p.stride_w;
  const __m512 lo_v = _mm512_set1_ps(p.out_min), hi_v = _mm512_set1_ps(p.out_max), bias = _mm512_set1_ps(p.bias);
  const bool clamp = p.out_min > -std::numeric_limits<float>::infinity() ||
                     p.out_max < std::numeric_limits<float>::infinity();
  constexpr int kMaxBlocks = 64;  // output rows up to 1024 columns; wider ones take the generic body
  const int64_t blocks = (p.out_w + 15) / 16;
  if (blocks > kMaxBlocks) {
    DepthwisePlaneBody(p, InteriorRowAvx512);
    return;
  }
  struct Tap {
    int64_t first_col;  // input column of the block's lane 0
    __mmask16 m0, m1;   // loads: lanes (stride 1) or elements [0, 16) and [16, 32) (stride 2)
  };
  Tap taps[kMaxBlocks][kKw];
  __mmask16 cols[kMaxBlocks];
  for (int64_t bl = 0; bl < blocks; ++bl) {
    const int64_t ox = bl * 16, n = p.out_w - ox < 16 ? p.out_w - ox : 16;
    cols[bl] = LaneRange(0, n);
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
        t.m0 = t.m1 = 0;
      } else if (s == 1) {
        t.m0 = LaneRange(jlo, jhi), t.m1 = 0;
      } else {
        t.m0 = LaneRange(2 * jlo, 2 * jhi - 1), t.m1 = LaneRange(2 * jlo - 16, 2 * jhi - 1 - 16);
      }
    }
  }
  for (int64_t oy = 0; oy < p.out_h; ++oy) {
    const float* rows[16];
    const float* weights[16];
    int valid_rows = 0;
    for (int64_t ky = 0; ky < p.kernel_h; ++ky) {
      const int64_t iy = oy * p.stride_h - p.pad_top + ky * p.dilation_h;
      if (iy < 0 || iy >= p.height) continue;
      rows[valid_rows] = p.x + iy * p.width;
      weights[valid_rows++] = p.w + ky * kKw;
    }
    float* yr = p.y + oy * p.out_w;
    for (int64_t bl = 0; bl < blocks; ++bl) {
      const Tap* t = taps[bl];
      __m512 acc = _mm512_setzero_ps();
      for (int r = 0; r < valid_rows; ++r) {
        for (int kx = 0; kx < kKw; ++kx) {
          const float* x = rows[r] + t[kx].first_col;  // may point outside the row: masked lanes are not read
          const __m512 v = s == 1 ? _mm512_maskz_loadu_ps(t[kx].m0, x)
                                  : _mm512_permutex2var_ps(_mm512_maskz_loadu_ps(t[kx].m0, x), even,
                                                           _mm512_maskz_loadu_ps(t[kx].m1, x + 16));
          acc = _mm512_fmadd_ps(_mm512_set1_ps(weights[r][kx]), v, acc);
        }
      }
      __m512 v = _mm512_add_ps(acc, bias);
      if (clamp) {
        v = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(v, lo_v, _CMP_LT_OQ), v, lo_v);  // NaN stays NaN
        v = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(v, hi_v, _CMP_GT_OQ), v, hi_v);
      }
      _mm512_mask_storeu_ps(yr + bl * 16, cols[bl], v);
    }
  }
}

}  // namespace

void DepthwiseF32PlaneAvx512(const DepthwiseF32Plane& p) {
  const bool narrow = p.dilation_w == 1 && (p.stride_w == 1 || p.stride_w == 2) && p.kernel_h <= 16;
  if (narrow && p.kernel_w == 3) {
    RowsNarrow<3>(p);
  } else if (narrow && p.kernel_w == 5) {
    RowsNarrow<5>(p);
  } else if (narrow && p.kernel_w == 7) {
    RowsNarrow<7>(p);
  } else {
    DepthwisePlaneBody(p, InteriorRowAvx512);
  }
}

SPARQ_CPU_TARGET_END

}  // namespace cpu
}  // namespace sparq

#endif  // SPARQ_CPU_X86
