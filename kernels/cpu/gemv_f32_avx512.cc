// gemv_f32_avx512: GemvF32Args on panel8x32_f32 strips (32 outputs a strip,
// 2 zmm); the portable row and the layout are in gemv_f32.cc.
//
// One row of X: 4 strips at a time, 8 independent accumulators (per k: one
// broadcast, 8 loads, 8 FMAs), so that the multiply-adds are not one chain.
// Several rows: 4 rows of one strip at a time (per k: 2 loads, 4 broadcasts,
// 8 FMAs), so that a strip is read once per 4 rows.
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

// One row of X, strips [s0, s1).
void OneRow(const GemvF32Args& a) {
  const int64_t k = a.w->k, step = k * kTc;  // floats per strip
  const float* x = a.x;
  int64_t s = a.s0;
  for (; s + 4 <= a.s1; s += 4) {
    const float* p = a.w->panel(s);
    __m512 c0 = _mm512_setzero_ps(), c1 = _mm512_setzero_ps(), c2 = _mm512_setzero_ps(), c3 = _mm512_setzero_ps();
    __m512 c4 = _mm512_setzero_ps(), c5 = _mm512_setzero_ps(), c6 = _mm512_setzero_ps(), c7 = _mm512_setzero_ps();
    for (int64_t kk = 0; kk < k; ++kk, p += kTc) {
      const __m512 xv = _mm512_set1_ps(x[kk]);
      c0 = _mm512_fmadd_ps(xv, _mm512_loadu_ps(p), c0);
      c1 = _mm512_fmadd_ps(xv, _mm512_loadu_ps(p + 16), c1);
      c2 = _mm512_fmadd_ps(xv, _mm512_loadu_ps(p + step), c2);
      c3 = _mm512_fmadd_ps(xv, _mm512_loadu_ps(p + step + 16), c3);
      c4 = _mm512_fmadd_ps(xv, _mm512_loadu_ps(p + 2 * step), c4);
      c5 = _mm512_fmadd_ps(xv, _mm512_loadu_ps(p + 2 * step + 16), c5);
      c6 = _mm512_fmadd_ps(xv, _mm512_loadu_ps(p + 3 * step), c6);
      c7 = _mm512_fmadd_ps(xv, _mm512_loadu_ps(p + 3 * step + 16), c7);
    }
    StoreStrip(a, s, 0, c0, c1);
    StoreStrip(a, s + 1, 0, c2, c3);
    StoreStrip(a, s + 2, 0, c4, c5);
    StoreStrip(a, s + 3, 0, c6, c7);
  }
  for (; s < a.s1; ++s) {
    const float* p = a.w->panel(s);
    __m512 c0 = _mm512_setzero_ps(), c1 = _mm512_setzero_ps();
    for (int64_t kk = 0; kk < k; ++kk, p += kTc) {
      const __m512 xv = _mm512_set1_ps(x[kk]);
      c0 = _mm512_fmadd_ps(xv, _mm512_loadu_ps(p), c0);
      c1 = _mm512_fmadd_ps(xv, _mm512_loadu_ps(p + 16), c1);
    }
    StoreStrip(a, s, 0, c0, c1);
  }
}

// Accumulators are named variables (GCC 12 keeps arrays of vectors in memory).
#define SPARQ_GEMV_ROWS(X) X(0) X(1) X(2) X(3)
#define SPARQ_GEMV_DECLARE(r) __m512 c##r##0 = _mm512_setzero_ps(), c##r##1 = _mm512_setzero_ps();
#define SPARQ_GEMV_FMA(r)                                      \
  if constexpr ((r) < kRows) {                                 \
    const __m512 xv = _mm512_set1_ps(x##r[kk]);                \
    c##r##0 = _mm512_fmadd_ps(xv, w0, c##r##0);                \
    c##r##1 = _mm512_fmadd_ps(xv, w1, c##r##1);                \
  }
#define SPARQ_GEMV_STORE(r) \
  if constexpr ((r) < kRows) StoreStrip(a, s, i0 + (r), c##r##0, c##r##1);

// Rows [i0, i0 + kRows) of X, strips [s0, s1).
template <int kRows>
void Rows(const GemvF32Args& a, int64_t i0) {
  const int64_t k = a.w->k;
  const float* x0 = a.x + i0 * a.ld_x;
  [[maybe_unused]] const float* x1 = kRows > 1 ? x0 + a.ld_x : x0;
  [[maybe_unused]] const float* x2 = kRows > 2 ? x0 + 2 * a.ld_x : x0;
  [[maybe_unused]] const float* x3 = kRows > 3 ? x0 + 3 * a.ld_x : x0;
  for (int64_t s = a.s0; s < a.s1; ++s) {
    const float* p = a.w->panel(s);
    SPARQ_GEMV_ROWS(SPARQ_GEMV_DECLARE)
    for (int64_t kk = 0; kk < k; ++kk, p += kTc) {
      const __m512 w0 = _mm512_loadu_ps(p), w1 = _mm512_loadu_ps(p + 16);
      SPARQ_GEMV_ROWS(SPARQ_GEMV_FMA)
    }
    SPARQ_GEMV_ROWS(SPARQ_GEMV_STORE)
  }
}

#undef SPARQ_GEMV_ROWS
#undef SPARQ_GEMV_DECLARE
#undef SPARQ_GEMV_FMA
#undef SPARQ_GEMV_STORE

}  // namespace

void GemvF32Avx512(const GemvF32Args& a) {
  if (a.m == 1) {
    OneRow(a);
    return;
  }
  int64_t i = 0;
  for (; i + 4 <= a.m; i += 4) Rows<4>(a, i);
  switch (a.m - i) {
    case 3: Rows<3>(a, i); break;
    case 2: Rows<2>(a, i); break;
    case 1: Rows<1>(a, i); break;
    default: break;
  }
}

SPARQ_CPU_TARGET_END

}  // namespace cpu
}  // namespace sparq

#endif  // SPARQ_CPU_X86
