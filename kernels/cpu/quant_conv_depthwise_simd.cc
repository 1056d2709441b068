// The output row of the depthwise INT8 convolution (quant_conv_depthwise.cc):
// out[i] = sum_t w[t] * x[t][i] in int32, 8 (AVX2) or 16 (AVX-512) outputs
// per step with all taps accumulated in one register. Integer sums: every
// version gives the same bits.
#include <cstdint>

#include "kernels/cpu/cpu_target.h"
#include "kernels/cpu/internal.h"

#if SPARQ_CPU_X86
#include <immintrin.h>
#endif

namespace sparq {
namespace cpu {

void DepthwiseRowPortable(const int16_t* const* x, const int16_t* w, int taps, int64_t n, int32_t* out) {
  for (int64_t i = 0; i < n; ++i) out[i] = 0;
  for (int t = 0; t < taps; ++t) {
    const int32_t wt = w[t];
    const int16_t* xt = x[t];
    for (int64_t i = 0; i < n; ++i) out[i] += wt * xt[i];
  }
}

#if SPARQ_CPU_X86
SPARQ_CPU_TARGET_BEGIN(SPARQ_CPU_AVX2_FEATURES)

void DepthwiseRowAvx2(const int16_t* const* x, const int16_t* w, int taps, int64_t n, int32_t* out) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256i acc = _mm256_setzero_si256();
    for (int t = 0; t < taps; ++t) {
      const __m256i v = _mm256_cvtepi16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x[t] + i)));
      acc = _mm256_add_epi32(acc, _mm256_mullo_epi32(v, _mm256_set1_epi32(w[t])));
    }
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i), acc);
  }
  for (; i < n; ++i) {
    int32_t sum = 0;
    for (int t = 0; t < taps; ++t) sum += static_cast<int32_t>(w[t]) * x[t][i];
    out[i] = sum;
  }
}

SPARQ_CPU_TARGET_END

SPARQ_CPU_TARGET_BEGIN(SPARQ_CPU_AVX512_FEATURES)

void DepthwiseRowAvx512(const int16_t* const* x, const int16_t* w, int taps, int64_t n, int32_t* out) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    __m512i acc = _mm512_setzero_si512();
    for (int t = 0; t < taps; ++t) {
      const __m512i v = _mm512_cvtepi16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[t] + i)));
      acc = _mm512_add_epi32(acc, _mm512_mullo_epi32(v, _mm512_set1_epi32(w[t])));
    }
    _mm512_storeu_si512(out + i, acc);
  }
  if (i < n) {  // the last n - i < 16 outputs, masked
    const __mmask16 m = static_cast<__mmask16>((1u << (n - i)) - 1);
    __m512i acc = _mm512_setzero_si512();
    for (int t = 0; t < taps; ++t) {
      const __m512i v = _mm512_cvtepi16_epi32(_mm256_maskz_loadu_epi16(m, x[t] + i));
      acc = _mm512_add_epi32(acc, _mm512_mullo_epi32(v, _mm512_set1_epi32(w[t])));
    }
    _mm512_mask_storeu_epi32(out + i, m, acc);
  }
}

SPARQ_CPU_TARGET_END
#endif

}  // namespace cpu
}  // namespace sparq
