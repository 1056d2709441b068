// depthwise_f32 for AVX2: the plane body of depthwise_f32_plane.inc with the
// interior columns of stride-1 windows 8 at a time in ymm registers.
#include <cstdint>

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

}  // namespace

void DepthwiseF32PlaneAvx2(const DepthwiseF32Plane& p) { DepthwisePlaneBody(p, InteriorRowAvx2); }

SPARQ_CPU_TARGET_END

}  // namespace cpu
}  // namespace sparq

#endif  // SPARQ_CPU_X86
