// The matmul_nbits_f32_avx512 row: 16 floats per vector (matmul_nbits_f32.h).
#include <algorithm>
#include <cstdint>
#include <cstring>

#include "kernels/cpu/cpu_target.h"
#include "kernels/cpu/internal.h"
#include "kernels/cpu/matmul_nbits_f32.h"

#if SPARQ_CPU_X86
#include <immintrin.h>

namespace sparq {
namespace cpu {

SPARQ_CPU_TARGET_BEGIN(SPARQ_CPU_AVX512_FEATURES)

namespace {

struct Isa {
  using Vec = __m512;
  static constexpr int64_t kW = 16;
  static Vec Zero() { return _mm512_setzero_ps(); }
  static Vec Load(const float* p) { return _mm512_loadu_ps(p); }
  static Vec Fma(Vec a, Vec b, Vec acc) { return _mm512_fmadd_ps(a, b, acc); }
  static float Sum(Vec v) { return _mm512_reduce_add_ps(v); }
  static Vec Add(Vec a, Vec b) { return _mm512_add_ps(a, b); }
  // The block's 16 possible weights, (code - zp) * scale for code 0..15: one
  // permute per 16 codes then replaces the subtraction, conversion and product.
  using Table = __m512;
  static Table MakeTable(int32_t zp, float scale) {
    const __m512i codes = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    return _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(codes, _mm512_set1_epi32(zp))), _mm512_set1_ps(scale));
  }
  static Vec Decode(const uint8_t* bytes, const Table& table) {
    const __m128i v = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(bytes));
    const __m128i mask = _mm_set1_epi8(0x0f);
    const __m128i codes = _mm_unpacklo_epi8(_mm_and_si128(v, mask), _mm_and_si128(_mm_srli_epi16(v, 4), mask));
    return _mm512_permutexvar_ps(_mm512_cvtepu8_epi32(codes), table);
  }
};

#include "kernels/cpu/matmul_nbits_f32.inc"

}  // namespace

void MatMulNBitsF32Avx512(const MatMulNBitsF32Args& args) { MatMulNBitsRows(args); }

SPARQ_CPU_TARGET_END

}  // namespace cpu
}  // namespace sparq
#endif  // SPARQ_CPU_X86
