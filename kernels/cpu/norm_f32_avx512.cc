// layer_norm_f32_avx512 / _avx2: LayerNormalization of float rows with the
// reference's bits (norm_f32.h), eight rows at a time in the eight double
// lanes of a zmm register (two ymm registers for AVX2).
//
// The reference sums each row in order, in double; reordering those sums
// would change the last bit. So lane j holds row j's running sum, and step i
// adds column i of the eight rows: an 8 x 8 transpose of floats turns eight
// loads of eight columns (one per row) into eight columns of eight rows.
//
//   rows r0..r7, columns i..i+7          after the transpose
//   r0: x00 x01 ... x07                  col i  : x00 x10 ... x70  -> lanes
//   r1: x10 x11 ... x17          =>      col i+1: x01 x11 ... x71
//   ...                                  ...
//
// Two groups of eight rows go side by side, so that two chains of adds
// overlap. The output pass is per value and needs no order: eight values of
// one row a step, each computed in double and rounded once, as the reference.
// layer_norm_chain_f32_avx512 sums eight rows the same way (the values, then
// the float squares of x - mean) and does each per-value float step sixteen
// lanes at a time: the unfused nodes' operations in their order.
// Built with -ffp-contract=off: no product and sum fused into one rounding.
#include <cmath>
#include <cstdint>

#include "kernels/cpu/cpu_target.h"
#include "kernels/cpu/norm_f32.h"

#if SPARQ_CPU_X86
#include <immintrin.h>

namespace sparq {
namespace cpu {

namespace {
constexpr int kLanes = 8;  // rows side by side (one per double lane of a zmm register)
}  // namespace

// AVX2 instructions only: both rows below use it (an AVX-512 function may
// inline an AVX2 one).
SPARQ_CPU_TARGET_BEGIN(SPARQ_CPU_AVX2_FEATURES)
namespace {

// Transposes the 8 x 8 floats of r[0..7] (row j = r[j]) in place: r[i] then
// holds column i.
inline void Transpose8x8(__m256 (&r)[kLanes]) {
  const __m256 t0 = _mm256_unpacklo_ps(r[0], r[1]), t1 = _mm256_unpackhi_ps(r[0], r[1]);
  const __m256 t2 = _mm256_unpacklo_ps(r[2], r[3]), t3 = _mm256_unpackhi_ps(r[2], r[3]);
  const __m256 t4 = _mm256_unpacklo_ps(r[4], r[5]), t5 = _mm256_unpackhi_ps(r[4], r[5]);
  const __m256 t6 = _mm256_unpacklo_ps(r[6], r[7]), t7 = _mm256_unpackhi_ps(r[6], r[7]);
  const __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xEE);
  const __m256 u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xEE);
  const __m256 u4 = _mm256_shuffle_ps(t4, t6, 0x44), u5 = _mm256_shuffle_ps(t4, t6, 0xEE);
  const __m256 u6 = _mm256_shuffle_ps(t5, t7, 0x44), u7 = _mm256_shuffle_ps(t5, t7, 0xEE);
  r[0] = _mm256_permute2f128_ps(u0, u4, 0x20);
  r[1] = _mm256_permute2f128_ps(u1, u5, 0x20);
  r[2] = _mm256_permute2f128_ps(u2, u6, 0x20);
  r[3] = _mm256_permute2f128_ps(u3, u7, 0x20);
  r[4] = _mm256_permute2f128_ps(u0, u4, 0x31);
  r[5] = _mm256_permute2f128_ps(u1, u5, 0x31);
  r[6] = _mm256_permute2f128_ps(u2, u6, 0x31);
  r[7] = _mm256_permute2f128_ps(u3, u7, 0x31);
}

}  // namespace
SPARQ_CPU_TARGET_END

SPARQ_CPU_TARGET_BEGIN(SPARQ_CPU_AVX512_FEATURES)
namespace {

// Walks kGroups groups of eight rows (group g at x + g * 8 * n) column by
// column, in order: the first n / 8 * 8 columns eight at a time, transposed
// so that `column(g, v)` gets one column of group g (its eight rows in v's
// lanes); then `vectors_done()`; then, row by row, the last n % 8 columns as
// `tail(row, value)`.
template <int kGroups, class Column, class VectorsDone, class Tail>
void WalkColumns(const float* x, int64_t n, Column column, VectorsDone vectors_done, Tail tail) {
  const int64_t n8 = n / kLanes * kLanes;
  for (int64_t i = 0; i < n8; i += kLanes) {
    __m256 cols[kGroups][kLanes];
    for (int g = 0; g < kGroups; ++g) {
      for (int j = 0; j < kLanes; ++j) cols[g][j] = _mm256_loadu_ps(x + (g * kLanes + j) * n + i);
      Transpose8x8(cols[g]);
    }
    for (int c = 0; c < kLanes; ++c) {
      for (int g = 0; g < kGroups; ++g) column(g, cols[g][c]);
    }
  }
  vectors_done();
  for (int r = 0; r < kGroups * kLanes; ++r) {
    const float* row = x + r * n;
    for (int64_t i = n8; i < n; ++i) tail(r, row[i]);
  }
}

// In-order double sums of kGroups groups of eight rows (group g starts at
// x + g * 8 * n): with `mean` null, sum x; else sum (x - mean[row])^2.
// sums[g * 8 + j] receives row j of group g's sum.
template <int kGroups>
void SumRows(const float* x, int64_t n, const double* mean, double* sums) {
  __m512d acc[kGroups], m[kGroups];
  for (int g = 0; g < kGroups; ++g) {
    acc[g] = _mm512_setzero_pd();
    m[g] = mean != nullptr ? _mm512_loadu_pd(mean + g * kLanes) : _mm512_setzero_pd();
  }
  WalkColumns<kGroups>(
      x, n,
      [&](int g, __m256 column) {
        const __m512d v = _mm512_cvtps_pd(column);
        if (mean == nullptr) {
          acc[g] = _mm512_add_pd(acc[g], v);
        } else {
          const __m512d d = _mm512_sub_pd(v, m[g]);
          acc[g] = _mm512_add_pd(acc[g], _mm512_mul_pd(d, d));
        }
      },
      [&] {
        for (int g = 0; g < kGroups; ++g) _mm512_storeu_pd(sums + g * kLanes, acc[g]);
      },
      [&](int r, float value) {  // the last n % 8 columns, still in order
        const double v = static_cast<double>(value);
        if (mean == nullptr) {
          sums[r] += v;
        } else {
          const double d = v - mean[r];
          sums[r] += d * d;
        }
      });
}

// kGroups * 8 rows normalized: the reference's mean, variance and values.
template <int kGroups>
void LayerNormBlock(const float* x, int64_t n, const double* scale, const double* bias, double epsilon, float* y) {
  constexpr int kRows = kGroups * kLanes;
  double s[kRows], m[kRows], q[kRows];
  SumRows<kGroups>(x, n, nullptr, s);
  for (int r = 0; r < kRows; ++r) m[r] = s[r] / static_cast<double>(n);
  SumRows<kGroups>(x, n, m, q);
  for (int r = 0; r < kRows; ++r) {
    const double inv = 1.0 / std::sqrt(q[r] / static_cast<double>(n) + epsilon);
    const __m512d vm = _mm512_set1_pd(m[r]), vinv = _mm512_set1_pd(inv);
    const float* src = x + r * n;
    float* dst = y + r * n;
    for (int64_t i = 0; i < n; i += kLanes) {
      const __mmask8 k = n - i >= kLanes ? static_cast<__mmask8>(0xFF) : static_cast<__mmask8>((1u << (n - i)) - 1);
      const __m512d v = _mm512_cvtps_pd(_mm256_maskz_loadu_ps(k, src + i));
      __m512d t = _mm512_mul_pd(_mm512_mul_pd(_mm512_sub_pd(v, vm), vinv), _mm512_maskz_loadu_pd(k, scale + i));
      t = _mm512_add_pd(t, _mm512_maskz_loadu_pd(k, bias + i));
      _mm256_mask_storeu_ps(dst + i, k, _mm512_cvtpd_ps(t));
    }
  }
}

// In-order double sums of eight rows (row j at x + j * n) in the lanes of
// one register, as SumRows<1>: of the values, or with `square` of their
// float squares v * v (each rounded to float, as Pow(d, 2) writes them).
template <bool kSquare>
void SumRowsChain(const float* x, int64_t n, double* sums) {
  __m512d acc = _mm512_setzero_pd();
  WalkColumns<1>(
      x, n,
      [&](int, __m256 column) {
        const __m256 v = kSquare ? _mm256_mul_ps(column, column) : column;
        acc = _mm512_add_pd(acc, _mm512_cvtps_pd(v));
      },
      [&] { _mm512_storeu_pd(sums, acc); },
      [&](int r, float value) {  // the last n % 8 columns, still in order
        sums[r] += static_cast<double>(kSquare ? value * value : value);
      });
}

// Eight rows of sparq.LayerNormChain (LayerNormChainF32Fn): d = x - mean
// written to y, the squares summed from y, then y = (d / sd) * gamma (+ beta),
// sixteen values a step (the tail under a mask), each a float operation.
void LayerNormChainBlock(const float* x, int64_t n, float epsilon, const float* gamma, const float* beta, float* y) {
  double s[kLanes], q[kLanes];
  SumRowsChain<false>(x, n, s);
  for (int r = 0; r < kLanes; ++r) {
    const __m512 mean = _mm512_set1_ps(static_cast<float>(s[r] / static_cast<double>(n)));  // ReduceMean
    const float* src = x + r * n;
    float* dst = y + r * n;
    for (int64_t i = 0; i < n; i += 16) {
      const __mmask16 k = n - i >= 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << (n - i)) - 1);
      _mm512_mask_storeu_ps(dst + i, k, _mm512_sub_ps(_mm512_maskz_loadu_ps(k, src + i), mean));  // Sub
    }
  }
  SumRowsChain<true>(y, n, q);  // Pow(d, 2), ReduceMean's sums
  for (int r = 0; r < kLanes; ++r) {
    const float sd = std::sqrt(static_cast<float>(q[r] / static_cast<double>(n)) + epsilon);  // Add, Sqrt
    const __m512 vsd = _mm512_set1_ps(sd);
    float* dst = y + r * n;
    for (int64_t i = 0; i < n; i += 16) {
      const __mmask16 k = n - i >= 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << (n - i)) - 1);
      __m512 t = _mm512_mul_ps(_mm512_div_ps(_mm512_maskz_loadu_ps(k, dst + i), vsd), _mm512_maskz_loadu_ps(k, gamma + i));
      if (beta != nullptr) t = _mm512_add_ps(t, _mm512_maskz_loadu_ps(k, beta + i));  // Div, Mul, Add
      _mm512_mask_storeu_ps(dst + i, k, t);
    }
  }
}

}  // namespace

void LayerNormChainRowsAvx512(const float* x, int64_t rows, int64_t n, float epsilon, const float* gamma,
                              const float* beta, float* y) {
  int64_t r = 0;
  for (; r + kLanes <= rows; r += kLanes) LayerNormChainBlock(x + r * n, n, epsilon, gamma, beta, y + r * n);
  if (r < rows) LayerNormChainRowsPortable(x + r * n, rows - r, n, epsilon, gamma, beta, y + r * n);
}


void LayerNormRowsAvx512(const float* x, int64_t rows, int64_t n, const double* scale, const double* bias,
                         double epsilon, float* y) {
  int64_t r = 0;
  for (; r + 2 * kLanes <= rows; r += 2 * kLanes) LayerNormBlock<2>(x + r * n, n, scale, bias, epsilon, y + r * n);
  for (; r + kLanes <= rows; r += kLanes) LayerNormBlock<1>(x + r * n, n, scale, bias, epsilon, y + r * n);
  if (r < rows) LayerNormRowsPortable(x + r * n, rows - r, n, scale, bias, epsilon, y + r * n);
}

SPARQ_CPU_TARGET_END

SPARQ_CPU_TARGET_BEGIN(SPARQ_CPU_AVX2_FEATURES)
namespace {

// The AVX-512 row's algorithm in AVX2: the eight rows' sums in two registers
// of four double lanes (rows 0-3 and 4-7), the output four values a step.
// SumRows of the AVX-512 row for one group of eight rows.
void SumRowsAvx2(const float* x, int64_t n, const double* mean, double* sums) {
  __m256d lo = _mm256_setzero_pd(), hi = _mm256_setzero_pd();
  const __m256d m_lo = mean != nullptr ? _mm256_loadu_pd(mean) : _mm256_setzero_pd();
  const __m256d m_hi = mean != nullptr ? _mm256_loadu_pd(mean + 4) : _mm256_setzero_pd();
  const int64_t n8 = n / kLanes * kLanes;
  for (int64_t i = 0; i < n8; i += kLanes) {
    __m256 cols[kLanes];
    for (int j = 0; j < kLanes; ++j) cols[j] = _mm256_loadu_ps(x + j * n + i);
    Transpose8x8(cols);
    for (int c = 0; c < kLanes; ++c) {
      __m256d a = _mm256_cvtps_pd(_mm256_castps256_ps128(cols[c]));
      __m256d b = _mm256_cvtps_pd(_mm256_extractf128_ps(cols[c], 1));
      if (mean != nullptr) {
        a = _mm256_sub_pd(a, m_lo), b = _mm256_sub_pd(b, m_hi);
        a = _mm256_mul_pd(a, a), b = _mm256_mul_pd(b, b);
      }
      lo = _mm256_add_pd(lo, a), hi = _mm256_add_pd(hi, b);
    }
  }
  _mm256_storeu_pd(sums, lo);
  _mm256_storeu_pd(sums + 4, hi);
  for (int r = 0; r < kLanes; ++r) {  // the last n % 8 columns, still in order
    const float* row = x + r * n;
    for (int64_t i = n8; i < n; ++i) {
      const double v = static_cast<double>(row[i]);
      if (mean == nullptr) {
        sums[r] += v;
      } else {
        const double d = v - mean[r];
        sums[r] += d * d;
      }
    }
  }
}

void LayerNormBlockAvx2(const float* x, int64_t n, const double* scale, const double* bias, double epsilon, float* y) {
  double s[kLanes], m[kLanes], q[kLanes];
  SumRowsAvx2(x, n, nullptr, s);
  for (int r = 0; r < kLanes; ++r) m[r] = s[r] / static_cast<double>(n);
  SumRowsAvx2(x, n, m, q);
  for (int r = 0; r < kLanes; ++r) {
    const double inv = 1.0 / std::sqrt(q[r] / static_cast<double>(n) + epsilon);
    const __m256d vm = _mm256_set1_pd(m[r]), vinv = _mm256_set1_pd(inv);
    const float* src = x + r * n;
    float* dst = y + r * n;
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) {
      const __m256d v = _mm256_cvtps_pd(_mm_loadu_ps(src + i));
      __m256d t = _mm256_mul_pd(_mm256_mul_pd(_mm256_sub_pd(v, vm), vinv), _mm256_loadu_pd(scale + i));
      t = _mm256_add_pd(t, _mm256_loadu_pd(bias + i));
      _mm_storeu_ps(dst + i, _mm256_cvtpd_ps(t));
    }
    for (; i < n; ++i) dst[i] = static_cast<float>((static_cast<double>(src[i]) - m[r]) * inv * scale[i] + bias[i]);
  }
}

}  // namespace

void LayerNormRowsAvx2(const float* x, int64_t rows, int64_t n, const double* scale, const double* bias,
                       double epsilon, float* y) {
  int64_t r = 0;
  for (; r + kLanes <= rows; r += kLanes) LayerNormBlockAvx2(x + r * n, n, scale, bias, epsilon, y + r * n);
  if (r < rows) LayerNormRowsPortable(x + r * n, rows - r, n, scale, bias, epsilon, y + r * n);
}

SPARQ_CPU_TARGET_END

SPARQ_CPU_TARGET_BEGIN(SPARQ_CPU_AVX512_FEATURES)

// scale_shift_f32_avx512: y[i] = x[i] * a + b, the product rounded before the
// sum (the file is built without contraction), sixteen values a step and the
// tail under a mask; y may be x (each vector is read before it is stored).
void ScaleShiftRowAvx512(const float* x, float* y, int64_t n, float a, float b) {
  const __m512 va = _mm512_set1_ps(a), vb = _mm512_set1_ps(b);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) _mm512_storeu_ps(y + i, _mm512_add_ps(_mm512_mul_ps(_mm512_loadu_ps(x + i), va), vb));
  if (i < n) {
    const __mmask16 m = static_cast<__mmask16>((1u << (n - i)) - 1);
    _mm512_mask_storeu_ps(y + i, m, _mm512_add_ps(_mm512_mul_ps(_mm512_maskz_loadu_ps(m, x + i), va), vb));
  }
}

SPARQ_CPU_TARGET_END

}  // namespace cpu
}  // namespace sparq

#endif  // SPARQ_CPU_X86
