// attention_f32_avx2 (attention_f32.h): attention_f32_avx512's loops with
// eight lanes: rows of Q four at a time, eight columns a step (the last ones
// under a mask), the softmax of each row softmax_f32_avx2's.
#include <cstdint>

#include "kernels/cpu/activation_f32.h"
#include "kernels/cpu/attention_f32.h"
#include "kernels/cpu/cpu_target.h"

#if SPARQ_CPU_X86
#include <immintrin.h>

namespace sparq {
namespace cpu {

SPARQ_CPU_TARGET_BEGIN(SPARQ_CPU_AVX2_FEATURES)
namespace {

constexpr int kRows = 4;

// Lanes below `left` (all eight when left >= 8) as a vmaskmovps mask.
inline __m256i TailMask8(int64_t left) {
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int32_t>(left < 8 ? left : 8)), lane);
}

template <int R>
void Rows(const AttentionF32Args& a, int64_t i0, float* s) {
  const __m256 scale = _mm256_set1_ps(a.scale);
  for (int64_t j = 0; j < a.n; j += 8) {
    const __m256i k = TailMask8(a.n - j);
    __m256 acc[R];
    for (int r = 0; r < R; ++r) acc[r] = _mm256_setzero_ps();
    for (int64_t t = 0; t < a.d; ++t) {
      const __m256 kv = _mm256_maskload_ps(a.kt + t * a.n + j, k);
      for (int r = 0; r < R; ++r) acc[r] = _mm256_fmadd_ps(_mm256_set1_ps(a.q[(i0 + r) * a.q_ld + t]), kv, acc[r]);
    }
    for (int r = 0; r < R; ++r) {
      __m256 x = a.divide ? _mm256_div_ps(acc[r], scale) : _mm256_mul_ps(acc[r], scale);
      if (a.mask != nullptr) {
        const float* mrow = a.mask + (i0 + r) * a.mask_row_stride;
        x = _mm256_add_ps(x, a.mask_col_stride == 0 ? _mm256_set1_ps(mrow[0]) : _mm256_maskload_ps(mrow + j, k));
      }
      _mm256_maskstore_ps(s + r * a.n + j, k, x);
    }
  }
  const NaNRowGuard<R> guard(a, s);
  for (int r = 0; r < R; ++r) SoftmaxRowAvx2(s + r * a.n, s + r * a.n, a.n);
  guard.Fill(a, s);
  for (int64_t c = 0; c < a.dv; c += 8) {
    const __m256i k = TailMask8(a.dv - c);
    __m256 acc[R];
    for (int r = 0; r < R; ++r) acc[r] = _mm256_setzero_ps();
    for (int64_t j = 0; j < a.n; ++j) {
      const __m256 vv = _mm256_maskload_ps(a.v + j * a.v_ld + c, k);
      for (int r = 0; r < R; ++r) acc[r] = _mm256_fmadd_ps(_mm256_set1_ps(s[r * a.n + j]), vv, acc[r]);
    }
    for (int r = 0; r < R; ++r) _mm256_maskstore_ps(a.y + (i0 + r) * a.y_ld + c, k, acc[r]);
  }
}

}  // namespace

void AttentionHeadAvx2(const AttentionF32Args& a) {
  int64_t i = 0;
  for (; i + kRows <= a.m; i += kRows) Rows<kRows>(a, i, a.scratch);
  for (; i < a.m; ++i) Rows<1>(a, i, a.scratch);
}

SPARQ_CPU_TARGET_END

}  // namespace cpu
}  // namespace sparq

#endif  // SPARQ_CPU_X86
