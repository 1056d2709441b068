// depthwise_f32 for AVX2: windows 3, 5 or 7 wide with stride 1 or 2 run whole
// output rows 8 columns at a time in ymm registers (depthwise_rows_avx2.inc),
// bias and clamp fused into the store. Other windows run
// depthwise_f32_plane.inc with a vector loop for the interior columns of
// 3-wide stride-1 windows.
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
#define SPARQ_DEPTHWISE_PLANE_FMA 1  // this target has FMA: LongWindowColumns fuses as the tap loop does
#include "kernels/cpu/depthwise_f32_plane.inc"
#undef SPARQ_DEPTHWISE_PLANE_FMA

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

#include "kernels/cpu/depthwise_rows_avx2.inc"

}  // namespace

void DepthwiseF32PlaneAvx2(const DepthwiseF32Plane& p) {
  if (!NarrowFits(p.kernel_w, p.kernel_h, p.stride_w, p.dilation_w, p.width, p.out_w)) {
    DepthwisePlaneBody(p, InteriorRowAvx2);
    return;
  }
  NarrowGeometry g;
  g.height = p.height, g.width = p.width, g.out_h = p.out_h, g.out_w = p.out_w;
  g.kernel_h = p.kernel_h, g.stride_h = p.stride_h, g.stride_w = p.stride_w, g.dilation_h = p.dilation_h;
  g.pad_top = p.pad_top, g.pad_left = p.pad_left;
  const __m256 lo = _mm256_set1_ps(p.out_min), hi = _mm256_set1_ps(p.out_max), bias = _mm256_set1_ps(p.bias);
  const bool clamp = p.out_min > -std::numeric_limits<float>::infinity() ||
                     p.out_max < std::numeric_limits<float>::infinity();
  float* y = p.y;
  const int64_t out_w = p.out_w;
  RowsNarrowAny(p.kernel_w, g, p.x, p.w, [&](int64_t oy, int64_t col, __m256i lanes, __m256 sums) {
    __m256 v = _mm256_add_ps(sums, bias);
    if (clamp) {
      v = _mm256_blendv_ps(v, lo, _mm256_cmp_ps(v, lo, _CMP_LT_OQ));  // NaN stays NaN
      v = _mm256_blendv_ps(v, hi, _mm256_cmp_ps(v, hi, _CMP_GT_OQ));
    }
    _mm256_maskstore_ps(y + oy * out_w + col, lanes, v);
  });
}

SPARQ_CPU_TARGET_END

}  // namespace cpu
}  // namespace sparq

#endif  // SPARQ_CPU_X86
