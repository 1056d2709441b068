// depthwise_f32 for AVX-512: windows 3, 5 or 7 wide with stride 1 or 2 run
// whole output rows 16 columns at a time in zmm registers, each tap a masked
// load (lanes whose input column lies in the padding load 0, as the
// reference's zero padding contributes 0) and an FMA; stride 2 takes the even
// lanes of two loads (vpermt2ps). Stride 1 with "same" padding along x
// (DepthwiseF32ShiftedFits) shares each input row between four output rows
// and builds the taps by shifting registers (ShiftedRows). Other windows use
// depthwise_f32_plane.inc with the same vector loop for the interior columns
// of 3-wide windows.
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
#define SPARQ_DEPTHWISE_PLANE_FMA 1  // this target has FMA: LongWindowColumns fuses as the tap loop does
#include "kernels/cpu/depthwise_f32_plane.inc"
#undef SPARQ_DEPTHWISE_PLANE_FMA

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

#include "kernels/cpu/depthwise_rows_avx512.inc"


// Stride 1 along both axes, "same" padding along x (pad_left = kKw / 2,
// out_w = width), windows 3 or 5 wide: the taps of a 16-column block are
// the block's row shifted by -kKw/2 .. kKw/2 columns, built from three loads
// (the block, its left and right neighbours; outside the row: 0, the
// padding) with valignd instead of one unaligned load per tap. Each input row
// is shifted once per block and feeds every output row of the kR that reads
// it, each value still summing its taps in (ky, kx) order.
//
//   output rows oy0 .. oy0 + kR - 1 read input rows oy0 - pad_top + i,
//   i < kR - 1 + kernel_h; row i feeds output row r with window row i - r.
// DepthwiseF32ShiftedFits (internal.h) says which planes.
template <int kKw>
inline void ShiftedTaps(const float* row, int64_t col, bool left, __mmask16 cur, __mmask16 next, __m512* s) {
  const __m512i a = _mm512_castps_si512(_mm512_maskz_loadu_ps(cur, row + col));
  const __m512i n = _mm512_castps_si512(_mm512_maskz_loadu_ps(next, row + col + 16));
  const __m512i l = left ? _mm512_castps_si512(_mm512_loadu_ps(row + col - 16)) : _mm512_setzero_si512();
  if constexpr (kKw == 3) {
    s[0] = _mm512_castsi512_ps(_mm512_alignr_epi32(a, l, 15));
    s[1] = _mm512_castsi512_ps(a);
    s[2] = _mm512_castsi512_ps(_mm512_alignr_epi32(n, a, 1));
  } else {
    s[0] = _mm512_castsi512_ps(_mm512_alignr_epi32(a, l, 14));
    s[1] = _mm512_castsi512_ps(_mm512_alignr_epi32(a, l, 15));
    s[2] = _mm512_castsi512_ps(a);
    s[3] = _mm512_castsi512_ps(_mm512_alignr_epi32(n, a, 1));
    s[4] = _mm512_castsi512_ps(_mm512_alignr_epi32(n, a, 2));
  }
}

// kR output rows from oy0; store(oy, column, lanes, sums) as RowsNarrow.
template <int kKw, int kR, typename Store>
void ShiftedRows(const DepthwiseF32Plane& p, int64_t oy0, Store& store) {
  const int64_t width = p.width, blocks = (width + 15) / 16;
  const int kh = static_cast<int>(p.kernel_h), inputs = kR - 1 + kh;
  const float* rows[kNarrowMaxRows + 3];
  for (int i = 0; i < inputs; ++i) {
    const int64_t iy = oy0 - p.pad_top + i;
    rows[i] = iy < 0 || iy >= p.height ? kZeroRow : p.x + iy * width;
  }
  for (int64_t bl = 0; bl < blocks; ++bl) {
    const int64_t col = bl * 16;
    const __mmask16 cur = LaneRange(0, width - col), next = LaneRange(0, width - col - 16);
    __m512 acc[kR];
#pragma GCC unroll 4
    for (int r = 0; r < kR; ++r) acc[r] = _mm512_setzero_ps();
    for (int i = 0; i < inputs; ++i) {
      __m512 s[kKw];
      ShiftedTaps<kKw>(rows[i], col, bl > 0, cur, next, s);
#pragma GCC unroll 4
      for (int r = 0; r < kR; ++r) {
        const int ky = i - r;
        if (ky < 0 || ky >= kh) continue;
        const float* w = p.w + ky * kKw;
#pragma GCC unroll 5
        for (int kx = 0; kx < kKw; ++kx) acc[r] = _mm512_fmadd_ps(_mm512_set1_ps(w[kx]), s[kx], acc[r]);
      }
    }
#pragma GCC unroll 4
    for (int r = 0; r < kR; ++r) store(oy0 + r, col, cur, acc[r]);
  }
}

template <int kKw, typename Store>
void ShiftedPlane(const DepthwiseF32Plane& p, Store& store) {
  int64_t oy = 0;
  for (; oy + 4 <= p.out_h; oy += 4) ShiftedRows<kKw, 4>(p, oy, store);
  switch (p.out_h - oy) {
    case 3: ShiftedRows<kKw, 3>(p, oy, store); break;
    case 2: ShiftedRows<kKw, 2>(p, oy, store); break;
    case 1: ShiftedRows<kKw, 1>(p, oy, store); break;
    default: break;
  }
}

}  // namespace

void DepthwiseF32PlaneAvx512(const DepthwiseF32Plane& p) {
  const bool shifted = DepthwiseF32ShiftedFits(p);
  if (!shifted && !NarrowFits(p.kernel_w, p.kernel_h, p.stride_w, p.dilation_w, p.width, p.out_w)) {
    DepthwisePlaneBody(p, InteriorRowAvx512);
    return;
  }
  NarrowGeometry g;
  g.height = p.height, g.width = p.width, g.out_h = p.out_h, g.out_w = p.out_w;
  g.kernel_h = p.kernel_h, g.stride_h = p.stride_h, g.stride_w = p.stride_w, g.dilation_h = p.dilation_h;
  g.pad_top = p.pad_top, g.pad_left = p.pad_left;
  const __m512 lo = _mm512_set1_ps(p.out_min), hi = _mm512_set1_ps(p.out_max), bias = _mm512_set1_ps(p.bias);
  const bool clamp = p.out_min > -std::numeric_limits<float>::infinity() ||
                     p.out_max < std::numeric_limits<float>::infinity();
  float* y = p.y;
  const int64_t out_w = p.out_w;
  auto store = [&](int64_t oy, int64_t col, __mmask16 lanes, __m512 sums) {
    __m512 v = _mm512_add_ps(sums, bias);
    if (clamp) {
      v = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(v, lo, _CMP_LT_OQ), v, lo);  // NaN stays NaN
      v = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(v, hi, _CMP_GT_OQ), v, hi);
    }
    _mm512_mask_storeu_ps(y + oy * out_w + col, lanes, v);
  };
  if (shifted) {
    p.kernel_w == 3 ? ShiftedPlane<3>(p, store) : ShiftedPlane<5>(p, store);
    return;
  }
  RowsNarrowAny(p.kernel_w, g, p.x, p.w, store);
}

SPARQ_CPU_TARGET_END

}  // namespace cpu
}  // namespace sparq

#endif  // SPARQ_CPU_X86
