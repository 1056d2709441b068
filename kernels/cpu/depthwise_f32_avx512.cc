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

#include "kernels/cpu/depthwise_rows_avx512.inc"

}  // namespace

void DepthwiseF32PlaneAvx512(const DepthwiseF32Plane& p) {
  if (!NarrowFits(p.kernel_w, p.kernel_h, p.stride_w, p.dilation_w, p.width, p.out_w)) {
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
  RowsNarrowAny(p.kernel_w, g, p.x, p.w, [&](int64_t oy, int64_t col, __mmask16 lanes, __m512 sums) {
    __m512 v = _mm512_add_ps(sums, bias);
    if (clamp) {
      v = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(v, lo, _CMP_LT_OQ), v, lo);  // NaN stays NaN
      v = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(v, hi, _CMP_GT_OQ), v, hi);
    }
    _mm512_mask_storeu_ps(y + oy * out_w + col, lanes, v);
  });
}

SPARQ_CPU_TARGET_END

}  // namespace cpu
}  // namespace sparq

#endif  // SPARQ_CPU_X86
