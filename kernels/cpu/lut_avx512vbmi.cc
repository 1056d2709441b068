// 256-entry byte table lookups (the tables of sparq.QLinearLut and of the
// fused QLinearConvLut / QLinearAdd): out[i] = table[in[i] ^ flip].
//
// AVX-512 VBMI: vpermi2b looks 64 bytes up in a 128-byte table (index bits
// 0-6); two of them cover both halves of the table and the index's top bit
// picks between them. 64 bytes per five instructions, against about one byte
// per cycle for the scalar loop.
#include <cstdint>

#include "kernels/cpu/cpu_target.h"
#include "kernels/cpu/internal.h"

#if SPARQ_CPU_X86
#include <immintrin.h>
#endif

namespace sparq {
namespace cpu {

void ApplyTablePortable(const uint8_t* table, uint8_t flip, const uint8_t* in, uint8_t* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = table[in[i] ^ flip];
}

#if SPARQ_CPU_X86
SPARQ_CPU_TARGET_BEGIN(SPARQ_CPU_AVX512VBMI_FEATURES)

void ApplyTableAvx512Vbmi(const uint8_t* table, uint8_t flip, const uint8_t* in, uint8_t* out, int64_t n) {
  const __m512i t0 = _mm512_loadu_si512(table), t1 = _mm512_loadu_si512(table + 64);
  const __m512i t2 = _mm512_loadu_si512(table + 128), t3 = _mm512_loadu_si512(table + 192);
  const __m512i f = _mm512_set1_epi8(static_cast<char>(flip));
  int64_t i = 0;
  for (; i + 64 <= n; i += 64) {
    const __m512i idx = _mm512_xor_si512(_mm512_loadu_si512(in + i), f);
    const __m512i low = _mm512_permutex2var_epi8(t0, idx, t1);
    const __m512i high = _mm512_permutex2var_epi8(t2, idx, t3);
    _mm512_storeu_si512(out + i, _mm512_mask_blend_epi8(_mm512_movepi8_mask(idx), low, high));
  }
  if (i < n) {
    const __mmask64 m = (~uint64_t{0}) >> (64 - (n - i));
    const __m512i idx = _mm512_xor_si512(_mm512_maskz_loadu_epi8(m, in + i), f);
    const __m512i low = _mm512_permutex2var_epi8(t0, idx, t1);
    const __m512i high = _mm512_permutex2var_epi8(t2, idx, t3);
    _mm512_mask_storeu_epi8(out + i, m, _mm512_mask_blend_epi8(_mm512_movepi8_mask(idx), low, high));
  }
}

SPARQ_CPU_TARGET_END
#endif

}  // namespace cpu
}  // namespace sparq
