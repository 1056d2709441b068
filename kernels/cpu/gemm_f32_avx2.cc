// gemm_f32_avx2: the FP32 GEMM register tile for AVX2 + FMA, weights in
// panel6x16_f32; the driver is in gemm_f32.cc.
//
// Tile: 6 rows (weight panel) x 16 columns (2 ymm of the activation strip) =
// 12 ymm accumulators. Per k: 2 loads of the strip, 6 broadcasts, 12 FMAs.
#include <cstdint>

#include "kernels/cpu/cpu_target.h"
#include "kernels/cpu/internal.h"

#if SPARQ_CPU_X86
#include <immintrin.h>

namespace sparq {
namespace cpu {

SPARQ_CPU_TARGET_BEGIN(SPARQ_CPU_AVX2_FEATURES)

namespace {

constexpr int kTr = 6, kTc = 16;

using Vec = __m256;
constexpr int kHalf = 8;
inline Vec Load(const float* p) { return _mm256_loadu_ps(p); }
inline Vec Zero() { return _mm256_setzero_ps(); }
inline Vec Set1(float v) { return _mm256_set1_ps(v); }
inline Vec Add(Vec a, Vec b) { return _mm256_add_ps(a, b); }
// v < lo ? lo : v, then v > hi ? hi : v (ordered compares: NaN stays NaN).
inline Vec Clamp(Vec v, Vec lo, Vec hi) {
  v = _mm256_blendv_ps(v, lo, _mm256_cmp_ps(v, lo, _CMP_LT_OQ));
  return _mm256_blendv_ps(v, hi, _mm256_cmp_ps(v, hi, _CMP_GT_OQ));
}

#define SPARQ_F32_BIAS(r)                                                      \
  {                                                                            \
    const Vec rb = ep->row_bias != nullptr ? Set1(ep->row_bias[r]) : Zero();  \
    c##r##0 = Add(c##r##0, Add(rb, cb0));                                      \
    c##r##1 = Add(c##r##1, Add(rb, cb1));                                      \
  }
#define SPARQ_F32_CLAMP(r) c##r##0 = Clamp(c##r##0, lo, hi), c##r##1 = Clamp(c##r##1, lo, hi);

#define SPARQ_F32_ROWS(X) X(0) X(1) X(2) X(3) X(4) X(5)
#define SPARQ_F32_DECLARE(r) __m256 c##r##0, c##r##1;
#define SPARQ_F32_ZERO(r) c##r##0 = _mm256_setzero_ps(), c##r##1 = _mm256_setzero_ps();
#define SPARQ_F32_LOAD(r) c##r##0 = _mm256_loadu_ps(src + (r) * ld), c##r##1 = _mm256_loadu_ps(src + (r) * ld + 8);
#define SPARQ_F32_STORE(r) _mm256_storeu_ps(dst + (r) * ld, c##r##0), _mm256_storeu_ps(dst + (r) * ld + 8, c##r##1);
#define SPARQ_F32_FMA(r)                         \
  {                                              \
    const __m256 av = _mm256_set1_ps(ak[r]);     \
    c##r##0 = _mm256_fmadd_ps(av, b0, c##r##0);  \
    c##r##1 = _mm256_fmadd_ps(av, b1, c##r##1);  \
  }

void Tile(int64_t kc, const float* a, const float* b, int64_t ldb, float* c, int64_t rs, int rows, int cols,
          bool accumulate, const TileEpilogue* ep) {
  const bool direct = rows == kTr && cols == kTc;
  alignas(32) float tmp[kTr * kTc];
  SPARQ_F32_ROWS(SPARQ_F32_DECLARE)
  if (!accumulate) {
    SPARQ_F32_ROWS(SPARQ_F32_ZERO)
  } else if (direct) {
    const float* src = c;
    const int64_t ld = rs;
    SPARQ_F32_ROWS(SPARQ_F32_LOAD)
  } else {
    for (int i = 0; i < kTr; ++i)
      for (int j = 0; j < kTc; ++j) tmp[i * kTc + j] = (i < rows && j < cols) ? c[i * rs + j] : 0.0f;
    const float* src = tmp;
    const int64_t ld = kTc;
    SPARQ_F32_ROWS(SPARQ_F32_LOAD)
  }
  for (int64_t kk = 0; kk < kc; ++kk) {
    const float* ak = a + kk * kTr;
    const __m256 b0 = _mm256_loadu_ps(b + kk * ldb), b1 = _mm256_loadu_ps(b + kk * ldb + 8);
    SPARQ_F32_ROWS(SPARQ_F32_FMA)
  }
  if (ep != nullptr) {
    const Vec cb0 = ep->col_bias != nullptr ? Load(ep->col_bias) : Zero();
    const Vec cb1 = ep->col_bias != nullptr ? Load(ep->col_bias + kHalf) : Zero();
    SPARQ_F32_ROWS(SPARQ_F32_BIAS)
    if (ep->clamp) {
      const Vec lo = Set1(ep->lo), hi = Set1(ep->hi);
      SPARQ_F32_ROWS(SPARQ_F32_CLAMP)
    }
  }
  if (direct) {
    float* dst = c;
    const int64_t ld = rs;
    SPARQ_F32_ROWS(SPARQ_F32_STORE)
  } else {
    float* dst = tmp;
    const int64_t ld = kTc;
    SPARQ_F32_ROWS(SPARQ_F32_STORE)
    for (int i = 0; i < rows; ++i)
      for (int j = 0; j < cols; ++j) c[i * rs + j] = tmp[i * kTc + j];
  }
}

#undef SPARQ_F32_ROWS
#undef SPARQ_F32_DECLARE
#undef SPARQ_F32_ZERO
#undef SPARQ_F32_LOAD
#undef SPARQ_F32_STORE
#undef SPARQ_F32_FMA
#undef SPARQ_F32_BIAS
#undef SPARQ_F32_CLAMP

}  // namespace

void GemmF32Avx2(const GemmF32Args& args) { GemmF32Driver(args, {kTr, kTc, Tile, PackConvStripPortable}); }

SPARQ_CPU_TARGET_END

}  // namespace cpu
}  // namespace sparq

#endif  // SPARQ_CPU_X86
