// Float16 <-> float32 conversion of whole rows: the portable version (the
// reference's HalfToFloat / FloatToHalf per value, include/sparq/tensor.h)
// and an F16C one (x86 CPUs with AVX2 all have it), 8 values at a time.
// Both convert exactly as the reference does (half -> float is exact;
// float -> half rounds to nearest even), so the bits are the same on every path.
#pragma once

#include <cstdint>

#include "kernels/cpu/dispatch.h"
#include "kernels/cpu/internal.h"  // SPARQ_CPU_X86

namespace sparq {
namespace cpu {

using HalfToFloatRowFn = void (*)(const uint16_t* src, float* dst, int64_t n);
using FloatToHalfRowFn = void (*)(const float* src, uint16_t* dst, int64_t n);

void HalfToFloatRowPortable(const uint16_t* src, float* dst, int64_t n);
void FloatToHalfRowPortable(const float* src, uint16_t* dst, int64_t n);
#if SPARQ_CPU_X86
void HalfToFloatRowF16c(const uint16_t* src, float* dst, int64_t n);
void FloatToHalfRowF16c(const float* src, uint16_t* dst, int64_t n);
#endif

// The version for `isa` (F16C from kAvx2 up, when cpuid reports F16C).
HalfToFloatRowFn SelectHalfToFloatRow(CpuIsa isa);
FloatToHalfRowFn SelectFloatToHalfRow(CpuIsa isa);

// Kernel names for `eval --verbose` and the unified dispatch table:
// "convert_f16_f32_portable" / "convert_f16_f32_f16c".
const char* HalfToFloatRowName(CpuIsa isa);

}  // namespace cpu
}  // namespace sparq
