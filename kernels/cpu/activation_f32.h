// Float32 Erf, Softmax (over the last axis) and Pow(x, 2) for transformer
// models (BERT's GELU is x * 0.5 * (1 + Erf(x / sqrt 2)); its LayerNorm, as
// exported at opset < 17, squares with Pow), and Sigmoid / SiLU for
// detectors (YOLO's x * Sigmoid(x)), Clip (ReLU6, hard activations). Rows
// of values: rows erf_f32_*, softmax_f32_*, pow2_f32_*, sigmoid_f32_* and
// clip_f32_* of the dispatch table
// (dispatch.h), which picks the version for the active ISA; the AVX2 rows
// of erf and softmax also run from AVX-512 up.
//
//   erf_f32      portable: std::erf per value, the reference's bits.
//                avx2: |erf - reference| <= kErfF32AbsTol (a rational
//                approximation with exp below); avx512: the same formula,
//                its reciprocal by vrcp14ps and one Newton step.
//   gelu_erf_chain_f32  (x * (erf(x / d) + a)) * h (sparq.GeluErfChain), the
//                erf of the same ISA's erf_f32 row: the unfused nodes' bits.
//   softmax_f32  portable: the reference's computation (double sums), the
//                reference's bits. avx2, avx512: exp by range reduction and a
//                degree-6 polynomial, float sums; |y - reference| <=
//                kSoftmaxF32AbsTol.
//   softmax_columns_f32  Softmax over an axis that is not the last, columns
//                side by side (one per lane): the same two kinds of rows.
//   pow2_f32     x * x: the reference's bits on every path (it computes x*x
//                exactly in double and rounds once to float).
//   sigmoid_f32  1 / (1 + e^-x), or x times that (SiLU). portable: the
//                reference's bits (float exp, then the float product). avx2,
//                avx512: the exp of softmax_f32's avx2 row, one division;
//                |sigmoid - reference| <= kSigmoidF32AbsTol (SiLU: times |x|).
//   clip_f32     Clip of float32 to [lo, hi]: the reference's bits on every
//                row (x < lo ? lo : x, then > hi; max / min in that operand
//                order keep NaN and -0 as the reference does).
//   tanh_f32     portable: std::tanh per value, the reference's bits. avx2,
//                avx512: x + x^3 P(x^2) (tanh's odd series to x^9) below
//                |x| = 1/4, (1 - e^-2|x|) / (1 + e^-2|x|) with the sign of x
//                above (|x| clamped to 9, where float tanh is 1); within
//                kTanhF32AbsTol, NaN kept.
//   max_rows_f32 GlobalMaxPool: each row's maximum as the reference picks it
//                (the first NaN, else the first of the greatest values); the
//                reference's bits on every row.
//   mean_rows_f32  ReduceMean over the last axis (LayerNorm's mean and
//                variance, as exported): the reference's bits (each row summed
//                in order in double), several rows at a time.
//
// Every result depends only on its own row, never on how rows are split
// among threads: the same bits for any thread count.
#pragma once

#include <cstdint>
#include <limits>

#include "kernels/cpu/dispatch.h"
#include "kernels/cpu/internal.h"  // SPARQ_CPU_X86
#include "sparq/graph.h"

namespace sparq {
namespace cpu {

// The sigmoid_f32 row that an ai.sparq FusedConv with activation "Silu"
// (runtime/passes/float_fusion.h) runs over its output after the convolution, with
// times_x on (the row a separate sparq.Silu node would run: the same bits);
// nullptr for any other node. For the conv rows (gemm_f32, depthwise_f32,
// spmm_bsr4x4_f32) when they prepare.
SigmoidF32Fn FusedSiluRow(const Node& node);

// Whether the reference's Softmax of this row of scores is NaN throughout: the
// row holds a NaN, or its maximum is infinite (+inf - +inf; every score -inf,
// a fully masked row). Otherwise none of its values is NaN. The softmax_f32
// rows give such rows NaN as the reference does (RunSoftmaxF32); torch's SDPA
// export replaces those NaNs (Where(IsNaN(p), c, p)): AttentionF32Args::nan_fill.
// Counted with compares only (NaN or +inf: not below +inf), so that the loop
// vectorizes.
inline bool SoftmaxRowIsNaN(const float* s, int64_t n) {
  constexpr float kInf = std::numeric_limits<float>::infinity();
  int32_t nan_or_inf = 0, minus_inf = 0;
  for (int64_t j = 0; j < n; ++j) {
    nan_or_inf += !(s[j] < kInf);
    minus_inf += s[j] == -kInf;
  }
  return nan_or_inf != 0 || minus_inf == n;
}

constexpr float kErfF32AbsTol = 1e-6f;
constexpr float kSoftmaxF32AbsTol = 1e-6f;
constexpr float kSigmoidF32AbsTol = 1e-6f;
constexpr float kTanhF32AbsTol = 1e-6f;

// The functions of the table's rows (ErfF32Fn, SoftmaxF32Fn, Pow2F32Fn).
void ErfRowPortable(const float* x, float* y, int64_t n);
void SoftmaxRowPortable(const float* x, float* y, int64_t n);
void SoftmaxColumnsPortable(const float* x, float* y, int64_t n, int64_t stride, int64_t width);  // SoftmaxColumnsF32Fn
void Pow2RowPortable(const float* x, float* y, int64_t n);
void MeanRowsPortable(const float* x, int64_t rows, int64_t n, float* y);  // MeanRowsF32Fn
void SigmoidRowPortable(const float* x, float* y, int64_t n, bool times_x);  // SigmoidF32Fn
void ClipRowPortable(const float* x, float* y, int64_t n, float lo, float hi);  // ClipF32Fn
void TanhRowPortable(const float* x, float* y, int64_t n);                      // TanhF32Fn
void MaxRowsPortable(const float* x, int64_t rows, int64_t n, float* y);        // MaxRowsF32Fn
// HardSwishChainF32Fn (dispatch.h): the reference's bits on every row.
void HardSwishChainRowPortable(const float* x, float* y, int64_t n, float offset, float lo, float hi, float divisor);
// GeluErfChainF32Fn (dispatch.h): each row's erf is its ISA's erf_f32 row's.
void GeluErfChainRowPortable(const float* x, float* y, int64_t n, float divisor, float offset, float scale);
#if SPARQ_CPU_X86
void GeluErfChainRowAvx2(const float* x, float* y, int64_t n, float divisor, float offset, float scale);
void GeluErfChainRowAvx512(const float* x, float* y, int64_t n, float divisor, float offset, float scale);
void ErfRowAvx512(const float* x, float* y, int64_t n);
void SoftmaxRowAvx512(const float* x, float* y, int64_t n);
// SoftmaxRowAvx512 of `rows` rows ld apart, four at a time side by side (the
// same bits per row): for sparq.Attention's rows of scores.
void SoftmaxRowsAvx512(const float* x, float* y, int64_t rows, int64_t ld, int64_t n);
void SoftmaxColumnsAvx512(const float* x, float* y, int64_t n, int64_t stride, int64_t width);
void SigmoidRowAvx2(const float* x, float* y, int64_t n, bool times_x);
void TanhRowAvx2(const float* x, float* y, int64_t n);
void ClipRowAvx2(const float* x, float* y, int64_t n, float lo, float hi);
void HardSwishChainRowAvx2(const float* x, float* y, int64_t n, float offset, float lo, float hi, float divisor);
// activation_f32_avx512.cc:
void SigmoidRowAvx512(const float* x, float* y, int64_t n, bool times_x);
void TanhRowAvx512(const float* x, float* y, int64_t n);
void MaxRowsAvx512(const float* x, int64_t rows, int64_t n, float* y);
void ClipRowAvx512(const float* x, float* y, int64_t n, float lo, float hi);
void HardSwishChainRowAvx512(const float* x, float* y, int64_t n, float offset, float lo, float hi, float divisor);
void ErfRowAvx2(const float* x, float* y, int64_t n);
void SoftmaxRowAvx2(const float* x, float* y, int64_t n);
#endif

}  // namespace cpu
}  // namespace sparq
