// gemv_f32_avx512: GemvF32Args on panel8x32_f32 strips (32 outputs a strip,
// 2 zmm); the portable row and the layout are in gemv_f32.cc.
//
// The loops (one row of X 4 strips at a time; several rows 4 at a time) are
// gemv_f32_simd.inc's, shared with gemv_f32_avx2.cc.
#include <algorithm>
#include <cstdint>

#include "kernels/cpu/cpu_target.h"
#include "kernels/cpu/internal.h"

#if SPARQ_CPU_X86
#include <immintrin.h>

namespace sparq {
namespace cpu {

SPARQ_CPU_TARGET_BEGIN(SPARQ_CPU_AVX512_FEATURES)

namespace {

constexpr int kTc = 32;

// Row `row`'s outputs of strip s: acc + (0 + bias), as gemm_f32's tile adds
// its column bias, stored without writing past W's last row.
inline void StoreStrip(const GemvF32Args& a, int64_t s, int64_t row, __m512 lo, __m512 hi) {
  const int64_t j0 = s * kTc;
  const int64_t cols = std::min<int64_t>(kTc, a.w->rows - j0);
  const __mmask16 m0 = static_cast<__mmask16>(cols >= 16 ? 0xFFFF : (1u << cols) - 1);
  const __mmask16 m1 = static_cast<__mmask16>(cols >= 32 ? 0xFFFF : cols > 16 ? (1u << (cols - 16)) - 1 : 0);
  __m512 b0 = _mm512_setzero_ps(), b1 = _mm512_setzero_ps();
  if (a.bias != nullptr) {
    b0 = _mm512_maskz_loadu_ps(m0, a.bias + j0);
    b1 = _mm512_maskz_loadu_ps(m1, a.bias + j0 + 16);
  }
  lo = _mm512_add_ps(lo, _mm512_add_ps(_mm512_setzero_ps(), b0));
  hi = _mm512_add_ps(hi, _mm512_add_ps(_mm512_setzero_ps(), b1));
  float* y = a.y + row * a.ld_y + j0;
  _mm512_mask_storeu_ps(y, m0, lo);
  _mm512_mask_storeu_ps(y + 16, m1, hi);
}

using V = __m512;
inline V Zero() { return _mm512_setzero_ps(); }
inline V Set1(float v) { return _mm512_set1_ps(v); }
inline V Load(const float* p) { return _mm512_loadu_ps(p); }
inline V Fma(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }

}  // namespace

#define GEMV_NAME GemvF32Avx512
#include "kernels/cpu/gemv_f32_simd.inc"
#undef GEMV_NAME

SPARQ_CPU_TARGET_END

}  // namespace cpu
}  // namespace sparq

#endif  // SPARQ_CPU_X86
