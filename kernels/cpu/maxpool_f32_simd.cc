// The AVX2 and AVX-512 rows of maxpool2d (pool.cc has the planes, the border
// columns and the bytes): the interior columns of a float32 output row,
// 8 or 16 outputs per register, one register per output block kept across
// every tap of the window (YOLO's SPPF: 25 taps, one store). The taps are
// taken in the reference's order with its comparison (v > best, or v NaN
// where best is not), so equal values of other bits (-0, +0) and NaNs come
// out as the reference's. Stride 1 loads the taps contiguously (AVX-512: four
// registers of outputs side by side, so that four chains of taps overlap);
// other strides run the portable loop.
#include <cstdint>

#include "kernels/cpu/cpu_target.h"
#include "kernels/cpu/internal.h"

#if SPARQ_CPU_X86
#include <immintrin.h>

namespace sparq {
namespace cpu {

SPARQ_CPU_TARGET_BEGIN(SPARQ_CPU_AVX2_FEATURES)
namespace {

// best := v where v > best or (v is NaN and best is not).
inline __m256 Max8(__m256 v, __m256 best) {
  const __m256 nan_wins = _mm256_and_ps(_mm256_cmp_ps(v, v, _CMP_UNORD_Q), _mm256_cmp_ps(best, best, _CMP_ORD_Q));
  return _mm256_blendv_ps(best, v, _mm256_or_ps(_mm256_cmp_ps(v, best, _CMP_GT_OQ), nan_wins));
}

void InteriorAvx2(const float* const* taps, int num_taps, int64_t stride, float* y, int64_t n) {
  if (stride != 1) return MaxPoolInteriorF32Portable(taps, num_taps, stride, y, n);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 best = _mm256_loadu_ps(taps[0] + i);
    for (int t = 1; t < num_taps; ++t) best = Max8(_mm256_loadu_ps(taps[t] + i), best);
    _mm256_storeu_ps(y + i, best);
  }
  for (; i < n; ++i) {  // the tail, one column at a time, as the portable loop
    float best = taps[0][i];
    for (int t = 1; t < num_taps; ++t) {
      const float v = taps[t][i];
      best = (v > best || (v != v && best == best)) ? v : best;
    }
    y[i] = best;
  }
}

}  // namespace

void MaxPool2dAvx2(const MaxPool2dArgs& args) { MaxPool2dWith(args, InteriorAvx2); }

SPARQ_CPU_TARGET_END

SPARQ_CPU_TARGET_BEGIN(SPARQ_CPU_AVX512_FEATURES)
namespace {

inline __m512 Max16(__m512 v, __m512 best) {
  const __mmask16 wins = _mm512_cmp_ps_mask(v, best, _CMP_GT_OQ) |
                         (_mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q) & _mm512_cmp_ps_mask(best, best, _CMP_ORD_Q));
  return _mm512_mask_mov_ps(best, wins, v);
}

void InteriorAvx512(const float* const* taps, int num_taps, int64_t stride, float* y, int64_t n) {
  if (stride != 1) return MaxPoolInteriorF32Portable(taps, num_taps, stride, y, n);
  int64_t i = 0;
  for (; i + 64 <= n; i += 64) {  // four independent chains of taps (one is latency-bound)
    __m512 best[4];
    for (int j = 0; j < 4; ++j) best[j] = _mm512_loadu_ps(taps[0] + i + 16 * j);
    for (int t = 1; t < num_taps; ++t)
      for (int j = 0; j < 4; ++j) best[j] = Max16(_mm512_loadu_ps(taps[t] + i + 16 * j), best[j]);
    for (int j = 0; j < 4; ++j) _mm512_storeu_ps(y + i + 16 * j, best[j]);
  }
  for (; i < n; i += 16) {
    const __mmask16 m = n - i >= 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << (n - i)) - 1);
    __m512 best = _mm512_maskz_loadu_ps(m, taps[0] + i);
    for (int t = 1; t < num_taps; ++t) best = Max16(_mm512_maskz_loadu_ps(m, taps[t] + i), best);
    _mm512_mask_storeu_ps(y + i, m, best);
  }
}

}  // namespace

void MaxPool2dAvx512(const MaxPool2dArgs& args) { MaxPool2dWith(args, InteriorAvx512); }

SPARQ_CPU_TARGET_END

}  // namespace cpu
}  // namespace sparq

#endif  // SPARQ_CPU_X86
