// spmm_bsr*_f32_avx2, spmm_nm*_f32_avx2: the FP32 sparse kernels of
// spmm_f32_simd.h on 8-lane ymm vectors (16 registers: up to 8 accumulators).
#include <cstdint>

#include "kernels/cpu/cpu_target.h"
#include "kernels/cpu/internal.h"

#if SPARQ_CPU_X86
#include <immintrin.h>

namespace sparq {
namespace cpu {

SPARQ_CPU_TARGET_BEGIN(SPARQ_CPU_AVX2_FEATURES)

namespace {

struct F32x8 {
  using Reg = __m256;
  static constexpr int kLanes = 8;
  static constexpr int kMaxAccumulators = 8;
  static Reg Zero() { return _mm256_setzero_ps(); }
  static Reg Set1(float v) { return _mm256_set1_ps(v); }
  static Reg Load(const float* p) { return _mm256_loadu_ps(p); }
  static void Store(float* p, Reg v) { _mm256_storeu_ps(p, v); }
  static Reg Fma(Reg a, Reg b, Reg c) { return _mm256_fmadd_ps(a, b, c); }
};

#include "kernels/cpu/spmm_f32_simd.h"

constexpr SpmmF32Isa kIsa = {F32x8::kLanes, F32x8::kMaxAccumulators, BsrBlockRow<F32x8>, NmRows<F32x8>};

}  // namespace

void SpmmBsrF32Avx2(const SpmmBsrF32Args& args) { SpmmBsrF32Driver(args, kIsa); }
void SpmmNmF32Avx2(const SpmmNmF32Args& args) { SpmmNmF32Driver(args, kIsa); }

SPARQ_CPU_TARGET_END

}  // namespace cpu
}  // namespace sparq

#endif  // SPARQ_CPU_X86
