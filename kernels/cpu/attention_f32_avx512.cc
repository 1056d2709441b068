// attention_f32_avx512 (attention_f32.h): one head of sparq.Attention, rows
// of Q in groups of kRows so that each load of K^T and V serves kRows
// independent accumulators (kRows chains of fused multiply-adds in flight).
// The softmax of each row of scores is softmax_f32_avx512's.
#include <algorithm>
#include <cstdint>

#include "kernels/cpu/activation_f32.h"
#include "kernels/cpu/attention_f32.h"
#include "kernels/cpu/cpu_target.h"

#if SPARQ_CPU_X86
#include <immintrin.h>

namespace sparq {
namespace cpu {

SPARQ_CPU_TARGET_BEGIN(SPARQ_CPU_AVX512_FEATURES)
namespace {

constexpr int kRows = 4;

inline __mmask16 TailMask(int64_t left) {
  return left >= 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << left) - 1);
}

// Rows i0 .. i0 + R - 1: their scores into s (R rows of n), softmax, then y.
template <int R>
void Rows(const AttentionF32Args& a, int64_t i0, float* s) {
  const __m512 scale = _mm512_set1_ps(a.scale);
  for (int64_t j = 0; j < a.n; j += 16) {
    const __mmask16 k = TailMask(a.n - j);
    __m512 acc[R];
    for (int r = 0; r < R; ++r) acc[r] = _mm512_setzero_ps();
    for (int64_t t = 0; t < a.d; ++t) {
      const __m512 kv = _mm512_maskz_loadu_ps(k, a.kt + t * a.n + j);
      for (int r = 0; r < R; ++r) acc[r] = _mm512_fmadd_ps(_mm512_set1_ps(a.q[(i0 + r) * a.q_ld + t]), kv, acc[r]);
    }
    for (int r = 0; r < R; ++r) {
      __m512 x = a.divide ? _mm512_div_ps(acc[r], scale) : _mm512_mul_ps(acc[r], scale);
      if (a.mask != nullptr) {
        const float* mrow = a.mask + (i0 + r) * a.mask_row_stride;
        x = _mm512_add_ps(x, a.mask_col_stride == 0 ? _mm512_set1_ps(mrow[0])
                                                    : _mm512_maskz_loadu_ps(k, mrow + j));  // col stride 1
      }
      _mm512_mask_storeu_ps(s + r * a.n + j, k, x);
    }
  }
  const NaNRowGuard<R> guard(a, s);
  SoftmaxRowsAvx512(s, s, R, a.n, a.n);
  guard.Fill(a, s);
  for (int64_t c = 0; c < a.dv; c += 16) {
    const __mmask16 k = TailMask(a.dv - c);
    __m512 acc[R];
    for (int r = 0; r < R; ++r) acc[r] = _mm512_setzero_ps();
    for (int64_t j = 0; j < a.n; ++j) {
      const __m512 vv = _mm512_maskz_loadu_ps(k, a.v + j * a.v_ld + c);
      for (int r = 0; r < R; ++r) acc[r] = _mm512_fmadd_ps(_mm512_set1_ps(s[r * a.n + j]), vv, acc[r]);
    }
    for (int r = 0; r < R; ++r) _mm512_mask_storeu_ps(a.y + (i0 + r) * a.y_ld + c, k, acc[r]);
  }
}

}  // namespace

void AttentionHeadAvx512(const AttentionF32Args& a) {
  // The mask's columns are contiguous or one value (RunAttentionF32 passes no other).
  int64_t i = 0;
  for (; i + kRows <= a.m; i += kRows) Rows<kRows>(a, i, a.scratch);
  for (; i < a.m; ++i) Rows<1>(a, i, a.scratch);
}

SPARQ_CPU_TARGET_END

}  // namespace cpu
}  // namespace sparq

#endif  // SPARQ_CPU_X86
