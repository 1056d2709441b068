// AVX-512 row of xlogy_sum_f64 (xlogy_f64.cc): eight sums x log(y / z) side
// by side, the ratio and each logarithm computed in the vector:
//   y = m 2^e with m in [sqrt(1/2), sqrt(2)) (getexp / getmant, m halved and
//   e raised above sqrt(2)), log y = e ln 2 + log m, and
//   log m = 2 atanh(s) = 2 (s + s^3/3 + s^5/5 + ...), s = (m - 1) / (m + 1),
//   |s| <= 0.1716: the series' terms through s^23 leave a truncation error
//   below 2^-60 of log m; ln 2 in two parts so that e ln 2 is exact.
// About one ulp per logarithm; the lanes' sums are added at the end, so the
// result differs from the reference's in-order sum in the last bits
// (kXLogYSumF64RelTol).
#include <cstdint>

#include "kernels/cpu/cpu_target.h"
#include "kernels/cpu/internal.h"
#include "kernels/ref/quantize.h"

#if SPARQ_CPU_X86
#include <immintrin.h>

namespace sparq {
namespace cpu {

SPARQ_CPU_TARGET_BEGIN(SPARQ_CPU_AVX512_FEATURES)

namespace {

// log y for positive, finite, normal y.
inline __m512d LogPd(__m512d y) {
  const __m512d one = _mm512_set1_pd(1.0);
  __m512d e = _mm512_getexp_pd(y);                                   // floor(log2 y)
  __m512d m = _mm512_getmant_pd(y, _MM_MANT_NORM_1_2, _MM_MANT_SIGN_src);  // [1, 2)
  const __mmask8 high = _mm512_cmp_pd_mask(m, _mm512_set1_pd(1.4142135623730951), _CMP_GT_OQ);
  m = _mm512_mask_mul_pd(m, high, m, _mm512_set1_pd(0.5));  // exact
  e = _mm512_mask_add_pd(e, high, e, one);
  const __m512d s = _mm512_div_pd(_mm512_sub_pd(m, one), _mm512_add_pd(m, one));
  const __m512d z = _mm512_mul_pd(s, s);
  // 1/3 + z/5 + ... + z^10/23, Horner from the highest power.
  __m512d r = _mm512_set1_pd(1.0 / 23.0);
  for (double k : {21.0, 19.0, 17.0, 15.0, 13.0, 11.0, 9.0, 7.0, 5.0, 3.0}) {
    r = _mm512_fmadd_pd(r, z, _mm512_set1_pd(1.0 / k));
  }
  const __m512d two_s = _mm512_add_pd(s, s);
  const __m512d log_m = _mm512_fmadd_pd(_mm512_mul_pd(two_s, z), r, two_s);  // 2s + 2s z r
  // ln 2 = kLn2Hi + kLn2Lo, kLn2Hi with its low 32 bits zero: e * kLn2Hi is exact for |e| < 2^11.
  const __m512d ln2_hi = _mm512_set1_pd(6.93147180369123816490e-01);
  const __m512d ln2_lo = _mm512_set1_pd(1.90821492927058770002e-10);
  return _mm512_fmadd_pd(e, ln2_hi, _mm512_fmadd_pd(e, ln2_lo, log_m));
}

}  // namespace

double XLogYSumRowAvx512(const double* x, const double* y, const double* z, int64_t n) {
  // One vector of terms at offset i, the lanes of `keep` (the others add 0 log 1).
  auto term = [&](int64_t i, __mmask8 keep) {
    const __m512d one = _mm512_set1_pd(1.0);
    __m512d ratio = _mm512_mask_loadu_pd(one, keep, y + i);
    if (z != nullptr) ratio = _mm512_div_pd(ratio, _mm512_mask_loadu_pd(one, keep, z + i));
    return _mm512_mul_pd(_mm512_maskz_loadu_pd(keep, x + i), LogPd(ratio));
  };
  __m512d acc0 = _mm512_setzero_pd(), acc1 = _mm512_setzero_pd();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    acc0 = _mm512_add_pd(acc0, term(i, 0xff));
    acc1 = _mm512_add_pd(acc1, term(i + 8, 0xff));
  }
  for (; i < n; i += 8) acc0 = _mm512_add_pd(acc0, term(i, n - i >= 8 ? 0xff : static_cast<__mmask8>((1u << (n - i)) - 1)));
  // The lanes added in a fixed order (GCC 12 warns inside _mm512_reduce_add_pd).
  alignas(64) double lane[8];
  _mm512_store_pd(lane, _mm512_add_pd(acc0, acc1));
  return ((lane[0] + lane[1]) + (lane[2] + lane[3])) + ((lane[4] + lane[5]) + (lane[6] + lane[7]));
}

SPARQ_CPU_TARGET_END

}  // namespace cpu
}  // namespace sparq
#endif  // SPARQ_CPU_X86
