// AVX2 row of abs_histogram_f32 (histogram_f32.cc): 8 bins a step.
#include <algorithm>
#include <cstdint>

#include "kernels/cpu/cpu_target.h"
#include "kernels/cpu/internal.h"
#include "kernels/ref/quantize.h"

#if SPARQ_CPU_X86
#include <immintrin.h>

namespace sparq {
namespace cpu {

SPARQ_CPU_TARGET_BEGIN(SPARQ_CPU_AVX2_FEATURES)

int64_t AbsHistogramRowAvx2(const float* x, int64_t n, double scale, int64_t last, int64_t* counts) {
  if (n < BinCounter::kMinValuesPerBin * (last + 1)) {  // a few values: not worth the sub-histograms
    return AbsHistogramRef(x, n, scale, last, counts);
  }
  BinCounter counter(last + 1);
  const __m256d vscale = _mm256_set1_pd(scale);
  const __m256 sign = _mm256_set1_ps(-0.0f);
  const __m256i vlast = _mm256_set1_epi32(static_cast<int32_t>(last));
  alignas(32) int32_t bins[BinCounter::kBlock];
  int64_t i = 0, counted = 0, nans = 0;
  while (i + 8 <= n) {
    const int64_t block = std::min<int64_t>(BinCounter::kBlock, (n - i) / 8 * 8);
    int64_t kept = 0;
    for (int64_t j = 0; j < block; j += 8) {
      const __m256 v = _mm256_loadu_ps(x + i + j);
      if (_mm256_movemask_ps(_mm256_cmp_ps(v, v, _CMP_UNORD_Q)) != 0) {  // a NaN among these 8: the reference's loop
        nans += AbsHistogramRef(x + i + j, 8, scale, last, counts);
        continue;
      }
      const __m256 a = _mm256_andnot_ps(sign, v);
      // |x| to double (exact), times scale (the reference's product), truncated.
      const __m128i lo = _mm256_cvttpd_epi32(_mm256_mul_pd(_mm256_cvtps_pd(_mm256_castps256_ps128(a)), vscale));
      const __m128i hi = _mm256_cvttpd_epi32(_mm256_mul_pd(_mm256_cvtps_pd(_mm256_extractf128_ps(a, 1)), vscale));
      // Out of int32 range converts to 0x80000000: as unsigned above last, so last, as the reference clamps.
      const __m256i b = _mm256_set_m128i(hi, lo);
      _mm256_store_si256(reinterpret_cast<__m256i*>(bins + kept), _mm256_min_epu32(b, vlast));
      kept += 8;
    }
    counter.Count(bins, kept);
    i += block;
    if ((counted += block) >= BinCounter::kDrainEvery) {
      counter.Drain(counts);
      counted = 0;
    }
  }
  counter.Drain(counts);
  return nans + AbsHistogramRef(x + i, n - i, scale, last, counts);
}

SPARQ_CPU_TARGET_END

}  // namespace cpu
}  // namespace sparq
#endif  // SPARQ_CPU_X86
