// Row conversions between float16 and float32 (convert_f16.h).
#include "kernels/cpu/convert_f16.h"

#include "sparq/tensor.h"

#if SPARQ_CPU_X86
#include <immintrin.h>

#include "kernels/cpu/cpu_target.h"
#endif

namespace sparq {
namespace cpu {

void HalfToFloatRowPortable(const uint16_t* src, float* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = HalfToFloat(src[i]);
}

void FloatToHalfRowPortable(const float* src, uint16_t* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = FloatToHalf(src[i]);
}

void RoundToHalfRowPortable(const float* src, float* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = HalfToFloat(FloatToHalf(src[i]));
}

#if SPARQ_CPU_X86
// AVX and F16C only: CpuIsa::kF16c does not promise AVX2.
SPARQ_CPU_TARGET_BEGIN("avx,f16c")

void HalfToFloatRowF16c(const uint16_t* src, float* dst, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i))));
  for (; i < n; ++i) dst[i] = HalfToFloat(src[i]);
}

void FloatToHalfRowF16c(const float* src, uint16_t* dst, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i), h);
  }
  for (; i < n; ++i) dst[i] = FloatToHalf(src[i]);
}

void RoundToHalfRowF16c(const float* src, float* dst, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m128i a = _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    const __m128i b = _mm256_cvtps_ph(_mm256_loadu_ps(src + i + 8), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(a));
    _mm256_storeu_ps(dst + i + 8, _mm256_cvtph_ps(b));
  }
  for (; i < n; ++i) dst[i] = HalfToFloat(FloatToHalf(src[i]));
}

SPARQ_CPU_TARGET_END
#endif

}  // namespace cpu
}  // namespace sparq
