// spmm_bsr*_f32_avx512, spmm_nm*_f32_avx512: the FP32 sparse kernels of
// spmm_f32_simd.h on 16-lane zmm vectors (32 registers: up to 16 accumulators).
#include <cstdint>

#include "kernels/cpu/cpu_target.h"
#include "kernels/cpu/internal.h"

#if SPARQ_CPU_X86
#include <immintrin.h>

namespace sparq {
namespace cpu {

SPARQ_CPU_TARGET_BEGIN(SPARQ_CPU_AVX512_FEATURES)

namespace {

struct F32x16 {
  using Reg = __m512;
  static constexpr int kLanes = 16;
  static constexpr int kMaxAccumulators = 16;
  static Reg Zero() { return _mm512_setzero_ps(); }
  static Reg Set1(float v) { return _mm512_set1_ps(v); }
  static Reg Load(const float* p) { return _mm512_loadu_ps(p); }
  static void Store(float* p, Reg v) { _mm512_storeu_ps(p, v); }
  static Reg Fma(Reg a, Reg b, Reg c) { return _mm512_fmadd_ps(a, b, c); }
};

#include "kernels/cpu/spmm_f32_simd.h"

constexpr SpmmF32Isa kIsa = {F32x16::kLanes, F32x16::kMaxAccumulators, BsrBlockRow<F32x16>, NmRows<F32x16>};

}  // namespace

void SpmmBsrF32Avx512(const SpmmBsrF32Args& args) { SpmmBsrF32Driver(args, kIsa); }
void SpmmNmF32Avx512(const SpmmNmF32Args& args) { SpmmNmF32Driver(args, kIsa); }

SPARQ_CPU_TARGET_END

}  // namespace cpu
}  // namespace sparq

#endif  // SPARQ_CPU_X86
