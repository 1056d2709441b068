// quantize_f32_s8_avx512: QuantizeLinear of a float row (per tensor) sixteen
// values a step, bit for bit QuantizeValue of kernels/ref/quantize.h, as the
// AVX2 row (qdq_glue_avx2.cc): a true division (vdivps), rounding to nearest
// even from the instruction's immediate (vrndscaleps, not MXCSR), NaN to the
// zero point, the clamp before the zero point is added; the tail under a
// mask. DynamicQuantizeLinear's second pass (MiniLM's activations).
#include <cstdint>

#include "kernels/cpu/cpu_target.h"
#include "kernels/cpu/internal.h"

#if SPARQ_CPU_X86
#include <immintrin.h>

namespace sparq {
namespace cpu {

SPARQ_CPU_TARGET_BEGIN(SPARQ_CPU_AVX512_FEATURES)

void QuantizeRowAvx512(int64_t n, const float* x, float scale, int32_t zero_point, bool out_signed, void* y) {
  const int32_t lo = out_signed ? -128 : 0, hi = out_signed ? 127 : 255;
  const __m512 vs = _mm512_set1_ps(scale);
  const __m512 vlo = _mm512_set1_ps(static_cast<float>(lo - zero_point));
  const __m512 vhi = _mm512_set1_ps(static_cast<float>(hi - zero_point));
  const __m512i zp = _mm512_set1_epi32(zero_point);
  auto* out = static_cast<uint8_t*>(y);
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 k = n - i >= 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << (n - i)) - 1);
    __m512 r = _mm512_roundscale_ps(_mm512_div_ps(_mm512_maskz_loadu_ps(k, x + i), vs),
                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    r = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(r, r, _CMP_ORD_Q), r);  // NaN -> 0, i.e. the zero point
    r = _mm512_min_ps(_mm512_max_ps(r, vlo), vhi);
    const __m512i q = _mm512_add_epi32(_mm512_cvttps_epi32(r), zp);  // within the output type: the low byte is exact
    if (k == static_cast<__mmask16>(0xFFFF)) _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), _mm512_cvtepi32_epi8(q));
    else _mm512_mask_cvtepi32_storeu_epi8(out + i, k, q);
  }
}

SPARQ_CPU_TARGET_END

}  // namespace cpu
}  // namespace sparq

#endif  // SPARQ_CPU_X86
