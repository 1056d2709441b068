// The matmul_nbits_f32_avx2 row: 8 floats per vector (matmul_nbits_f32.h).
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

SPARQ_CPU_TARGET_BEGIN(SPARQ_CPU_AVX2_FEATURES)

namespace {

struct Isa {
  using Vec = __m256;
  static constexpr int64_t kW = 8;
  static Vec Zero() { return _mm256_setzero_ps(); }
  static Vec Load(const float* p) { return _mm256_loadu_ps(p); }
  static Vec Fma(Vec a, Vec b, Vec acc) { return _mm256_fmadd_ps(a, b, acc); }
  static float Sum(Vec v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
  }
  static Vec Add(Vec a, Vec b) { return _mm256_add_ps(a, b); }
  struct Table {
    __m256i zp;
    __m256 scale;
  };
  static Table MakeTable(int32_t zp, float scale) { return {_mm256_set1_epi32(zp), _mm256_set1_ps(scale)}; }
  static Vec Decode(const uint8_t* bytes, const Table& t) {
    int32_t four;
    std::memcpy(&four, bytes, 4);
    const __m128i v = _mm_cvtsi32_si128(four);
    const __m128i mask = _mm_set1_epi8(0x0f);
    const __m128i codes = _mm_unpacklo_epi8(_mm_and_si128(v, mask), _mm_and_si128(_mm_srli_epi16(v, 4), mask));
    const __m256i q = _mm256_sub_epi32(_mm256_cvtepu8_epi32(codes), t.zp);
    return _mm256_mul_ps(_mm256_cvtepi32_ps(q), t.scale);
  }
};

#include "kernels/cpu/matmul_nbits_f32.inc"

}  // namespace

void MatMulNBitsF32Avx2(const MatMulNBitsF32Args& args) { MatMulNBitsRows(args); }

SPARQ_CPU_TARGET_END

}  // namespace cpu
}  // namespace sparq
#endif  // SPARQ_CPU_X86
