// gemv_f32_avx2: GemvF32Args on panel6x16_f32 strips (16 outputs a strip,
// 2 ymm); the portable row and the layout are in gemv_f32.cc.
//
// The loops (one row of X 4 strips at a time; several rows 4 at a time) are
// gemv_f32_simd.inc's, shared with gemv_f32_avx512.cc.
#include <algorithm>
#include <cstdint>

#include "kernels/cpu/cpu_target.h"
#include "kernels/cpu/internal.h"

#if SPARQ_CPU_X86
#include <immintrin.h>

namespace sparq {
namespace cpu {

SPARQ_CPU_TARGET_BEGIN(SPARQ_CPU_AVX2_FEATURES)

namespace {

constexpr int kTc = 16;

// Row `row`'s outputs of strip s: acc + (0 + bias), as gemm_f32's tile adds
// its column bias, stored without writing past W's last row.
inline void StoreStrip(const GemvF32Args& a, int64_t s, int64_t row, __m256 lo, __m256 hi) {
  const int64_t j0 = s * kTc;
  const int cols = static_cast<int>(std::min<int64_t>(kTc, a.w->rows - j0));
  float* y = a.y + row * a.ld_y + j0;
  alignas(32) float bias[kTc] = {};
  if (a.bias != nullptr) std::copy(a.bias + j0, a.bias + j0 + cols, bias);
  lo = _mm256_add_ps(lo, _mm256_add_ps(_mm256_setzero_ps(), _mm256_load_ps(bias)));
  hi = _mm256_add_ps(hi, _mm256_add_ps(_mm256_setzero_ps(), _mm256_load_ps(bias + 8)));
  if (cols == kTc) {
    _mm256_storeu_ps(y, lo);
    _mm256_storeu_ps(y + 8, hi);
    return;
  }
  alignas(32) float out[kTc];
  _mm256_store_ps(out, lo);
  _mm256_store_ps(out + 8, hi);
  std::copy(out, out + cols, y);
}

using V = __m256;
inline V Zero() { return _mm256_setzero_ps(); }
inline V Set1(float v) { return _mm256_set1_ps(v); }
inline V Load(const float* p) { return _mm256_loadu_ps(p); }
inline V Fma(V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); }

}  // namespace

#define GEMV_NAME GemvF32Avx2
#include "kernels/cpu/gemv_f32_simd.inc"
#undef GEMV_NAME

SPARQ_CPU_TARGET_END

}  // namespace cpu
}  // namespace sparq

#endif  // SPARQ_CPU_X86
