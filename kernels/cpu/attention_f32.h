// sparq.Attention of float32 (runtime/passes/float_fusion.h fuses it from BERT's
// MatMul -> Mul / Div -> Add(mask) -> Softmax -> MatMul) on the attention_f32
// rows of the dispatch table, one head per call, heads split among threads:
//
//   for each row i of Q (four at a time):
//     s = Q[i] K^T  (x or / scale) (+ mask row)      scores of one row, n floats
//     s = softmax(s)                                 the softmax_f32 row's computation
//     [s = fill where the reference's softmax is NaN: SoftmaxRowIsNaN, activation_f32.h]
//     y[i] = s V                                     dv floats
//
// nothing of the [heads, m, n] scores leaves the cache. Q and K^T scaled
// first (torch's SDPA export: q_scale, k_scale) are scaled per head as they
// are packed (RunAttentionF32), the unfused Muls' products. FP32 sums in another
// order than the reference MatMul's and the fast softmax's exp: within
// kAttentionF32RelTol * max(1, max |V|) of the unfused nodes' reference. Every
// head on its own: the same bits for any thread count.
//
//   attention_f32_portable  plain loops (the portable softmax_f32 row's arithmetic)
//   attention_f32_avx2      8 columns a step, four rows of Q sharing each load
//   attention_f32_avx512    16 columns a step, four rows of Q sharing each load
#pragma once

#include <cstdint>

#include "kernels/cpu/activation_f32.h"  // SoftmaxRowIsNaN
#include "kernels/cpu/internal.h"  // SPARQ_CPU_X86
#include "kernels/cpu/kernel_args.h"

namespace sparq {
namespace cpu {

constexpr float kAttentionF32RelTol = 1e-5f;

// The rows r < R of the probabilities p (n apart) that were NaN rows of scores
// (nan_row[r]) set to args.fill, after the softmax; nothing without nan_fill.
template <int R>
struct NaNRowGuard {
  bool nan_row[R] = {};
  NaNRowGuard(const AttentionF32Args& a, const float* scores) {
    if (a.nan_fill)
      for (int r = 0; r < R; ++r) nan_row[r] = SoftmaxRowIsNaN(scores + r * a.n, a.n);
  }
  void Fill(const AttentionF32Args& a, float* p) const {
    for (int r = 0; r < R; ++r)
      if (nan_row[r])
        for (int64_t j = 0; j < a.n; ++j) p[r * a.n + j] = a.fill;
  }
};

void AttentionHeadPortable(const AttentionF32Args& args);  // AttentionF32Fn
#if SPARQ_CPU_X86
void AttentionHeadAvx2(const AttentionF32Args& args);    // attention_f32_avx2.cc
void AttentionHeadAvx512(const AttentionF32Args& args);  // attention_f32_avx512.cc
#endif

}  // namespace cpu
}  // namespace sparq
