// The AVX-512 row of round_f16_f32 (convert_f16.h): 32 floats a step, the tail
// under a mask, so that no value goes through the scalar conversion.
#include <cstdint>

#include "kernels/cpu/convert_f16.h"

#if SPARQ_CPU_X86
#include <immintrin.h>

#include "kernels/cpu/cpu_target.h"

namespace sparq {
namespace cpu {

SPARQ_CPU_TARGET_BEGIN(SPARQ_CPU_AVX512_FEATURES)

namespace {
inline __m512 RoundToHalf(__m512 v) {
  return _mm512_cvtph_ps(_mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
}
}  // namespace

void RoundToHalfRowAvx512(const float* src, float* dst, int64_t n) {
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    const __m512 a = RoundToHalf(_mm512_loadu_ps(src + i));
    const __m512 b = RoundToHalf(_mm512_loadu_ps(src + i + 16));
    _mm512_storeu_ps(dst + i, a);
    _mm512_storeu_ps(dst + i + 16, b);
  }
  for (; i < n; i += 16) {
    const int64_t left = n - i;
    const __mmask16 m = left >= 16 ? static_cast<__mmask16>(0xffff) : static_cast<__mmask16>((1u << left) - 1);
    _mm512_mask_storeu_ps(dst + i, m, RoundToHalf(_mm512_maskz_loadu_ps(m, src + i)));
  }
}

SPARQ_CPU_TARGET_END

}  // namespace cpu
}  // namespace sparq
#endif  // SPARQ_CPU_X86
