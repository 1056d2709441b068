// Float16 <-> float32 conversion of whole rows: the portable version (the
// reference's HalfToFloat / FloatToHalf per value, include/sparq/tensor.h)
// and an F16C one, 8 values at a time: rows convert_f16_f32_* and
// convert_f32_f16_* of the dispatch table (dispatch.h), which picks the F16C
// row from CpuIsa::kF16c up (every AVX2 CPU has F16C). Both convert exactly as
// the reference does (half -> float is exact; float -> half rounds to nearest
// even), so the bits are the same on every path.
#pragma once

#include <cstdint>

#include "kernels/cpu/dispatch.h"
#include "kernels/cpu/internal.h"  // SPARQ_CPU_X86

namespace sparq {
namespace cpu {

// The functions of the table's rows (ConvertF16F32Fn, ConvertF32F16Fn).
void HalfToFloatRowPortable(const uint16_t* src, float* dst, int64_t n);
void FloatToHalfRowPortable(const float* src, uint16_t* dst, int64_t n);
// RoundF16F32Fn: float -> half -> float in registers (one read, one write).
void RoundToHalfRowPortable(const float* src, float* dst, int64_t n);
#if SPARQ_CPU_X86
void HalfToFloatRowF16c(const uint16_t* src, float* dst, int64_t n);
void FloatToHalfRowF16c(const float* src, uint16_t* dst, int64_t n);
void RoundToHalfRowF16c(const float* src, float* dst, int64_t n);
void RoundToHalfRowAvx512(const float* src, float* dst, int64_t n);  // convert_f16_avx512.cc
#endif

}  // namespace cpu
}  // namespace sparq
