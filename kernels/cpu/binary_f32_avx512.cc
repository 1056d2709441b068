// AVX-512 rows of binary_f32 and minmax_f32 (binary_f32_simd.inc), 16 floats a step.
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
using V = __m512;
constexpr int64_t kLanes = 16;
inline V LOAD(const float* p) { return _mm512_loadu_ps(p); }
inline void STORE(float* p, V v) { _mm512_storeu_ps(p, v); }
inline V SET1(float v) { return _mm512_set1_ps(v); }
inline V ADD(V a, V b) { return _mm512_add_ps(a, b); }
inline V SUB(V a, V b) { return _mm512_sub_ps(a, b); }
inline V MUL(V a, V b) { return _mm512_mul_ps(a, b); }
inline V DIV(V a, V b) { return _mm512_div_ps(a, b); }
inline V MIN(V a, V b) { return _mm512_min_ps(a, b); }
inline V MAX(V a, V b) { return _mm512_max_ps(a, b); }
}  // namespace
#define ROW_NAME(name) name##RowAvx512
#include "kernels/cpu/binary_f32_simd.inc"
#undef ROW_NAME

SPARQ_CPU_TARGET_END

}  // namespace cpu
}  // namespace sparq

#endif  // SPARQ_CPU_X86
