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

void Tile(int64_t kc, const float* a, const float* b, float* c, int64_t rs, int64_t cs, int rows, int cols,
          bool accumulate) {
  const bool direct = rows == kTr && cols == kTc && cs == 1;
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
      for (int j = 0; j < kTc; ++j) tmp[i * kTc + j] = (i < rows && j < cols) ? c[i * rs + j * cs] : 0.0f;
    const float* src = tmp;
    const int64_t ld = kTc;
    SPARQ_F32_ROWS(SPARQ_F32_LOAD)
  }
  for (int64_t kk = 0; kk < kc; ++kk) {
    const float* ak = a + kk * kTr;
    const __m256 b0 = _mm256_loadu_ps(b + kk * kTc), b1 = _mm256_loadu_ps(b + kk * kTc + 8);
    SPARQ_F32_ROWS(SPARQ_F32_FMA)
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
      for (int j = 0; j < cols; ++j) c[i * rs + j * cs] = tmp[i * kTc + j];
  }
}

#undef SPARQ_F32_ROWS
#undef SPARQ_F32_DECLARE
#undef SPARQ_F32_ZERO
#undef SPARQ_F32_LOAD
#undef SPARQ_F32_STORE
#undef SPARQ_F32_FMA

}  // namespace

void GemmF32Avx2(const GemmF32Args& args) { GemmF32Driver(args, {kTr, kTc, Tile, PackConvStripPortable}); }

SPARQ_CPU_TARGET_END

}  // namespace cpu
}  // namespace sparq

#endif  // SPARQ_CPU_X86
