// Row conversions between float16 and float32 (convert_f16.h).
#include "kernels/cpu/convert_f16.h"

#include "sparq/tensor.h"

#if SPARQ_CPU_X86
#include <immintrin.h>

#include "kernels/cpu/cpu_target.h"
#endif

namespace sparq {
namespace cpu {

void HalfToFloatRowPortable(const uint16_t* src, float* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = HalfToFloat(src[i]);
}

void FloatToHalfRowPortable(const float* src, uint16_t* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = FloatToHalf(src[i]);
}

#if SPARQ_CPU_X86
SPARQ_CPU_TARGET_BEGIN("avx2,fma,f16c")

void HalfToFloatRowF16c(const uint16_t* src, float* dst, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i))));
  for (; i < n; ++i) dst[i] = HalfToFloat(src[i]);
}

void FloatToHalfRowF16c(const float* src, uint16_t* dst, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i), h);
  }
  for (; i < n; ++i) dst[i] = FloatToHalf(src[i]);
}

SPARQ_CPU_TARGET_END

namespace {
bool HasF16c() {
  static const bool has = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("f16c") != 0;
  }();
  return has;
}
}  // namespace
#endif

HalfToFloatRowFn SelectHalfToFloatRow(CpuIsa isa) {
#if SPARQ_CPU_X86
  if (isa >= CpuIsa::kAvx2 && HasF16c()) return HalfToFloatRowF16c;
#endif
  return HalfToFloatRowPortable;
}

FloatToHalfRowFn SelectFloatToHalfRow(CpuIsa isa) {
#if SPARQ_CPU_X86
  if (isa >= CpuIsa::kAvx2 && HasF16c()) return FloatToHalfRowF16c;
#endif
  return FloatToHalfRowPortable;
}

const char* HalfToFloatRowName(CpuIsa isa) {
  return SelectHalfToFloatRow(isa) == HalfToFloatRowPortable ? "convert_f16_f32_portable" : "convert_f16_f32_f16c";
}

}  // namespace cpu
}  // namespace sparq
