// The AVX-512 rows of sigmoid_f32, tanh_f32, max_rows_f32, clip_f32, erf_f32, gelu_erf_chain_f32,
// softmax_f32 and softmax_columns_f32 (activation_f32.h): sixteen
// floats a step, the computations of the AVX2 rows (activation_f32.cc) in
// wider registers.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "kernels/cpu/activation_f32.h"
#include "kernels/cpu/cpu_target.h"

#if SPARQ_CPU_X86
#include <immintrin.h>

namespace sparq {
namespace cpu {

SPARQ_CPU_TARGET_BEGIN(SPARQ_CPU_AVX512_FEATURES)
namespace {

// e^x as the AVX2 row's Exp8: x = k ln2 + r, e^r by its degree-6 Taylor
// polynomial, times 2^k through the exponent bits; x clamped to [-87, 88].
inline __m512 Exp16(__m512 x) {
  x = _mm512_min_ps(_mm512_max_ps(x, _mm512_set1_ps(-87.0f)), _mm512_set1_ps(88.0f));
  const __m512 k = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(k, _mm512_set1_ps(0.693359375f), x);
  r = _mm512_fnmadd_ps(k, _mm512_set1_ps(-2.12194440e-4f), r);
  __m512 p = _mm512_set1_ps(1.0f / 720);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 120));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  const __m512i scale = _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(k), _mm512_set1_epi32(127)), 23);
  return _mm512_mul_ps(p, _mm512_castsi512_ps(scale));
}

// erf as the AVX2 row's Erf8 (Abramowitz and Stegun 7.1.26), but t = 1 / (1 +
// p|x|) from vrcp14ps and one Newton step (relative error about 2^-28)
// instead of a division; |x| clamped to 10 (erf is 1 in float well before),
// so that infinities give 1, not NaN. NaN stays NaN.
inline __m512 Erf16(__m512 x) {
  const __m512 sign = _mm512_and_ps(x, _mm512_set1_ps(-0.0f));
  const __m512 a = _mm512_min_ps(_mm512_andnot_ps(_mm512_set1_ps(-0.0f), x), _mm512_set1_ps(10.0f));
  const __m512 d = _mm512_fmadd_ps(_mm512_set1_ps(0.3275911f), a, _mm512_set1_ps(1.0f));
  const __m512 r0 = _mm512_rcp14_ps(d);
  const __m512 t = _mm512_fmadd_ps(_mm512_fnmadd_ps(d, r0, _mm512_set1_ps(1.0f)), r0, r0);
  __m512 q = _mm512_set1_ps(1.061405429f);
  q = _mm512_fmadd_ps(q, t, _mm512_set1_ps(-1.453152027f));
  q = _mm512_fmadd_ps(q, t, _mm512_set1_ps(1.421413741f));
  q = _mm512_fmadd_ps(q, t, _mm512_set1_ps(-0.284496736f));
  q = _mm512_fmadd_ps(q, t, _mm512_set1_ps(0.254829592f));
  q = _mm512_mul_ps(q, t);
  const __m512 e = Exp16(_mm512_mul_ps(_mm512_sub_ps(_mm512_setzero_ps(), a), a));
  const __m512 r = _mm512_fnmadd_ps(q, e, _mm512_set1_ps(1.0f));
  return _mm512_mask_mov_ps(_mm512_or_ps(r, sign), _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q), x);
}

// As Sigmoid8 of the AVX2 row: 0 where float e^-x overflows, NaN kept.
inline __m512 Sigmoid16(__m512 x, bool times_x) {
  const __m512 e = Exp16(_mm512_sub_ps(_mm512_setzero_ps(), x));
  __m512 s = _mm512_div_ps(_mm512_set1_ps(1.0f), _mm512_add_ps(_mm512_set1_ps(1.0f), e));
  const __mmask16 overflow = _mm512_cmp_ps_mask(x, _mm512_set1_ps(-88.7228394f), _CMP_LT_OQ);
  s = _mm512_mask_mov_ps(s, overflow, _mm512_setzero_ps());
  if (times_x) s = _mm512_mul_ps(x, s);
  return _mm512_mask_mov_ps(s, _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q), x);
}

// As Tanh8 of the AVX2 row: the odd series below |x| = 1/4, the exponential
// form above, |x| clamped to 9; NaN kept.
inline __m512 Tanh16(__m512 x) {
  const __m512 sign = _mm512_and_ps(x, _mm512_set1_ps(-0.0f));
  const __m512 a = _mm512_min_ps(_mm512_andnot_ps(_mm512_set1_ps(-0.0f), x), _mm512_set1_ps(9.0f));
  const __m512 e = Exp16(_mm512_mul_ps(a, _mm512_set1_ps(-2.0f)));
  const __m512 one = _mm512_set1_ps(1.0f);
  const __m512 big = _mm512_div_ps(_mm512_sub_ps(one, e), _mm512_add_ps(one, e));
  const __m512 z = _mm512_mul_ps(x, x);
  __m512 p = _mm512_set1_ps(62.0f / 2835);
  p = _mm512_fmadd_ps(p, z, _mm512_set1_ps(-17.0f / 315));
  p = _mm512_fmadd_ps(p, z, _mm512_set1_ps(2.0f / 15));
  p = _mm512_fmadd_ps(p, z, _mm512_set1_ps(-1.0f / 3));
  const __m512 small = _mm512_fmadd_ps(_mm512_mul_ps(x, z), p, x);
  const __m512 r = _mm512_or_ps(  // the sign of x on both (the series' fma turns -0 into +0)
      _mm512_mask_mov_ps(big, _mm512_cmp_ps_mask(a, _mm512_set1_ps(0.25f), _CMP_LT_OQ), small), sign);
  return _mm512_mask_mov_ps(r, _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q), x);
}

}  // namespace

void TanhRowAvx512(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = n - i >= 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << (n - i)) - 1);
    _mm512_mask_storeu_ps(y + i, m, Tanh16(_mm512_maskz_loadu_ps(m, x + i)));
  }
}

// Each row's maximum in sixteen lanes (MAXPS ignores a NaN in its first
// operand), NaNs noted on the side; then the reference's choice among equals:
// a row with a NaN gives its first NaN, and a maximum of zero the first zero
// (-0 or +0, as the row has it).
void MaxRowsAvx512(const float* x, int64_t rows, int64_t n, float* y) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* row = x + r * n;
    __m512 best = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
    __mmask16 nan = 0;
    for (int64_t i = 0; i < n; i += 16) {
      const __mmask16 m = n - i >= 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << (n - i)) - 1);
      const __m512 v = _mm512_mask_loadu_ps(best, m, row + i);  // masked-off lanes repeat best
      nan |= _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
      best = _mm512_max_ps(v, best);
    }
    alignas(64) float lanes[16];
    _mm512_store_ps(lanes, best);
    float m = lanes[0];
    for (float v : lanes) m = std::max(m, v);
    if (nan != 0 || m == 0.0f) {
      for (int64_t i = 0; i < n; ++i) {
        if (nan != 0 ? std::isnan(row[i]) : row[i] == 0.0f) {
          m = row[i];
          break;
        }
      }
    }
    y[r] = m;
  }
}

void SigmoidRowAvx512(const float* x, float* y, int64_t n, bool times_x) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) _mm512_storeu_ps(y + i, Sigmoid16(_mm512_loadu_ps(x + i), times_x));
  if (i < n) {  // the tail under a mask: each value rounds as in the body
    const __mmask16 m = static_cast<__mmask16>((1u << (n - i)) - 1);
    _mm512_mask_storeu_ps(y + i, m, Sigmoid16(_mm512_maskz_loadu_ps(m, x + i), times_x));
  }
}

// The tails under a mask: each value rounds as in the body.
void ErfRowAvx512(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = n - i >= 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << (n - i)) - 1);
    _mm512_mask_storeu_ps(y + i, m, Erf16(_mm512_maskz_loadu_ps(m, x + i)));
  }
}

// ErfRowAvx512's erf between the float division and the add and products.
void GeluErfChainRowAvx512(const float* x, float* y, int64_t n, float divisor, float offset, float scale) {
  const __m512 vd = _mm512_set1_ps(divisor), va = _mm512_set1_ps(offset), vh = _mm512_set1_ps(scale);
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = n - i >= 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << (n - i)) - 1);
    const __m512 v = _mm512_maskz_loadu_ps(m, x + i);
    const __m512 g = _mm512_mul_ps(_mm512_mul_ps(v, _mm512_add_ps(Erf16(_mm512_div_ps(v, vd)), va)), vh);
    _mm512_mask_storeu_ps(y + i, m, g);
  }
}

namespace {

// R rows of n values (row r at x + r * ld) side by side, each pass over all R
// before the next, so that the rows' reductions overlap; every row computed
// as alone (the same operations per row and lane).
template <int R>
void SoftmaxRowsR(const float* x, float* y, int64_t ld, int64_t n) {
  const __m512 ninf = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
  __m512 m[R], acc[R], inv[R];
  for (int r = 0; r < R; ++r) m[r] = ninf, acc[r] = _mm512_setzero_ps();
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 k = n - i >= 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << (n - i)) - 1);
    for (int r = 0; r < R; ++r) m[r] = _mm512_max_ps(m[r], _mm512_mask_loadu_ps(ninf, k, x + r * ld + i));
  }
  for (int r = 0; r < R; ++r) m[r] = _mm512_set1_ps(_mm512_reduce_max_ps(m[r]));
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 k = n - i >= 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << (n - i)) - 1);
    for (int r = 0; r < R; ++r) {
      const __m512 e = _mm512_maskz_mov_ps(k, Exp16(_mm512_sub_ps(_mm512_maskz_loadu_ps(k, x + r * ld + i), m[r])));
      _mm512_mask_storeu_ps(y + r * ld + i, k, e);
      acc[r] = _mm512_add_ps(acc[r], e);
    }
  }
  for (int r = 0; r < R; ++r) inv[r] = _mm512_set1_ps(1.0f / _mm512_reduce_add_ps(acc[r]));
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 k = n - i >= 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << (n - i)) - 1);
    for (int r = 0; r < R; ++r)
      _mm512_mask_storeu_ps(y + r * ld + i, k, _mm512_mul_ps(_mm512_maskz_loadu_ps(k, y + r * ld + i), inv[r]));
  }
}

}  // namespace

// The AVX2 row's softmax sixteen lanes a step: the maximum, e^(x - max)
// stored and summed in float lanes (the tail's lanes masked to 0), the sum
// reduced in a fixed order, then one product by its reciprocal.
void SoftmaxRowAvx512(const float* x, float* y, int64_t n) {
  if (n > 0) SoftmaxRowsR<1>(x, y, n, n);
}

void SoftmaxRowsAvx512(const float* x, float* y, int64_t rows, int64_t ld, int64_t n) {
  if (n == 0) return;
  int64_t r = 0;
  for (; r + 4 <= rows; r += 4) SoftmaxRowsR<4>(x + r * ld, y + r * ld, ld, n);
  for (; r < rows; ++r) SoftmaxRowsR<1>(x + r * ld, y + r * ld, ld, n);
}

// SoftmaxRowAvx512's arithmetic with one column per lane: sixteen columns a
// step (the last ones under a mask), the n values of each `stride` apart.
// x - max is NaN where the reference's is (a column of -inf: -inf - -inf; a
// NaN value), and its e^ is that NaN, not Exp16's clamped e^-87, so that
// the column's sum and every value of it are NaN as in the reference.
void SoftmaxColumnsAvx512(const float* x, float* y, int64_t n, int64_t stride, int64_t width) {
  if (n == 0) return;
  for (int64_t c = 0; c < width; c += 16) {
    const __mmask16 k =
        width - c >= 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << (width - c)) - 1);
    __m512 m = _mm512_maskz_loadu_ps(k, x + c);
    for (int64_t j = 1; j < n; ++j) m = _mm512_max_ps(m, _mm512_maskz_loadu_ps(k, x + c + j * stride));
    __m512 sum = _mm512_setzero_ps();
    for (int64_t j = 0; j < n; ++j) {
      const __m512 d = _mm512_sub_ps(_mm512_maskz_loadu_ps(k, x + c + j * stride), m);
      const __m512 e = _mm512_mask_mov_ps(Exp16(d), _mm512_cmp_ps_mask(d, d, _CMP_UNORD_Q), d);
      _mm512_mask_storeu_ps(y + c + j * stride, k, e);
      sum = _mm512_add_ps(sum, e);
    }
    const __m512 inv = _mm512_div_ps(_mm512_set1_ps(1.0f), sum);
    for (int64_t j = 0; j < n; ++j) {
      float* p = y + c + j * stride;
      _mm512_mask_storeu_ps(p, k, _mm512_mul_ps(_mm512_maskz_loadu_ps(k, p), inv));
    }
  }
}

// max(lo, x) then min(hi, .) with the operand order of the reference's
// x < lo ? lo : x and x > hi ? hi : x: NaN stays NaN, -0 stays -0.
void ClipRowAvx512(const float* x, float* y, int64_t n, float lo, float hi) {
  const __m512 vlo = _mm512_set1_ps(lo), vhi = _mm512_set1_ps(hi);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    _mm512_storeu_ps(y + i, _mm512_min_ps(vhi, _mm512_max_ps(vlo, _mm512_loadu_ps(x + i))));
  if (i < n) {
    const __mmask16 m = static_cast<__mmask16>((1u << (n - i)) - 1);
    _mm512_mask_storeu_ps(y + i, m, _mm512_min_ps(vhi, _mm512_max_ps(vlo, _mm512_maskz_loadu_ps(m, x + i))));
  }
}

// The Clip of ClipRowAvx512 between the float add and the product / quotient;
// the tail under a mask.
void HardSwishChainRowAvx512(const float* x, float* y, int64_t n, float offset, float lo, float hi, float divisor) {
  const __m512 va = _mm512_set1_ps(offset), vlo = _mm512_set1_ps(lo), vhi = _mm512_set1_ps(hi);
  const __m512 vd = _mm512_set1_ps(divisor);
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = n - i >= 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << (n - i)) - 1);
    const __m512 v = _mm512_maskz_loadu_ps(m, x + i);
    const __m512 c = _mm512_min_ps(vhi, _mm512_max_ps(vlo, _mm512_add_ps(v, va)));
    _mm512_mask_storeu_ps(y + i, m, _mm512_div_ps(_mm512_mul_ps(v, c), vd));
  }
}

SPARQ_CPU_TARGET_END

}  // namespace cpu
}  // namespace sparq
#endif
