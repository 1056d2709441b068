// AVX-512 row of abs_histogram_f32 (histogram_f32.cc): 16 bins a step. Bin 0
// (the zeros after a ReLU, padding) is counted in the vectors, by mask
// population; only the other bins are compressed into the block that the
// scalar counter takes, and NaNs are left out and counted.
#include <algorithm>
#include <cmath>
#include <cstdint>

#include "kernels/cpu/cpu_target.h"
#include "kernels/cpu/internal.h"
#include "kernels/ref/quantize.h"

#if SPARQ_CPU_X86
#include <immintrin.h>

namespace sparq {
namespace cpu {

SPARQ_CPU_TARGET_BEGIN(SPARQ_CPU_AVX512_FEATURES)

int64_t AbsHistogramRowAvx512(const float* x, int64_t n, double scale, int64_t last, int64_t* counts) {
  if (n < BinCounter::kMinValuesPerBin * (last + 1)) {  // a few values: not worth the sub-histograms
    return AbsHistogramRef(x, n, scale, last, counts);
  }
  BinCounter counter(last + 1);
  const __m512d vscale = _mm512_set1_pd(scale);
  // A power-of-two scale (calibration's: 2048 bins over a power-of-two range)
  // times a float is exact in float too (a product below 1 may round, but
  // truncates to bin 0 either way; one past the int32 range converts to
  // 0x80000000 either way): one multiply and one conversion for 16 values.
  int exponent = 0;
  const bool pow2 = std::frexp(scale, &exponent) == 0.5 && exponent > -120 && exponent < 120;
  const __m512 fscale = _mm512_set1_ps(static_cast<float>(scale));
  const __m512i vlast = _mm512_set1_epi32(static_cast<int32_t>(last));
  // One vector of slack: each step stores 16 bins and keeps the nonzero ones.
  alignas(64) int32_t bins[BinCounter::kBlock + 16];
  int64_t i = 0, counted = 0, zeros = 0, nans = 0;
  while (i + 16 <= n) {
    const int64_t block = std::min<int64_t>(BinCounter::kBlock, (n - i) / 16 * 16);
    int64_t kept = 0;
    for (int64_t j = 0; j < block; j += 16) {
      const __m512 v = _mm512_loadu_ps(x + i + j);
      const __m512 a = _mm512_abs_ps(v);
      __m512i raw;
      if (pow2) {
        raw = _mm512_cvttps_epi32(_mm512_mul_ps(a, fscale));
      } else {  // |x| to double (exact), times scale (the reference's product), truncated
        const __m256i lo = _mm512_cvttpd_epi32(_mm512_mul_pd(_mm512_cvtps_pd(_mm512_castps512_ps256(a)), vscale));
        const __m256i hi = _mm512_cvttpd_epi32(
            _mm512_mul_pd(_mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(a), 1))), vscale));
        raw = _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
      }
      // Out of int32 range converts to 0x80000000: as unsigned above last, so last, as the reference clamps.
      const __m512i b = _mm512_min_epu32(raw, vlast);
      const __mmask16 nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
      const __mmask16 nonzero = static_cast<__mmask16>(_mm512_test_epi32_mask(b, b) & ~nan);
      const int n_nan = __builtin_popcount(nan), n_nonzero = __builtin_popcount(nonzero);
      nans += n_nan;
      zeros += 16 - n_nan - n_nonzero;
      // Compressed in a register, then one full store (a compressing store is slow on some cores).
      _mm512_storeu_si512(bins + kept, _mm512_maskz_compress_epi32(nonzero, b));
      kept += n_nonzero;
    }
    counter.Count(bins, kept);
    i += block;
    if ((counted += block) >= BinCounter::kDrainEvery) {
      counter.Drain(counts);
      counted = 0;
    }
  }
  counter.Drain(counts);
  counts[0] += zeros;
  return nans + AbsHistogramRef(x + i, n - i, scale, last, counts);
}

SPARQ_CPU_TARGET_END

}  // namespace cpu
}  // namespace sparq
#endif  // SPARQ_CPU_X86
