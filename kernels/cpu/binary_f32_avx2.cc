// AVX2 rows of binary_f32 and minmax_f32 (binary_f32_simd.inc), 8 floats a step.
#include <cstdint>

#include "kernels/cpu/cpu_target.h"
#include "kernels/cpu/internal.h"
#include "kernels/ref/quantize.h"

#if SPARQ_CPU_X86
#include <immintrin.h>

namespace sparq {
namespace cpu {

SPARQ_CPU_TARGET_BEGIN(SPARQ_CPU_AVX2_FEATURES)

namespace {
using V = __m256;
constexpr int64_t kLanes = 8;
inline V LOAD(const float* p) { return _mm256_loadu_ps(p); }
inline void STORE(float* p, V v) { _mm256_storeu_ps(p, v); }
inline V SET1(float v) { return _mm256_set1_ps(v); }
inline V ADD(V a, V b) { return _mm256_add_ps(a, b); }
inline V SUB(V a, V b) { return _mm256_sub_ps(a, b); }
inline V MUL(V a, V b) { return _mm256_mul_ps(a, b); }
inline V DIV(V a, V b) { return _mm256_div_ps(a, b); }
inline V MIN(V a, V b) { return _mm256_min_ps(a, b); }
inline V MAX(V a, V b) { return _mm256_max_ps(a, b); }
}  // namespace
#define ROW_NAME(name) name##RowAvx2
#include "kernels/cpu/binary_f32_simd.inc"
#undef ROW_NAME

SPARQ_CPU_TARGET_END

}  // namespace cpu
}  // namespace sparq

#endif  // SPARQ_CPU_X86
