// float16 arithmetic of the CUDA backend's float16 rows (rows_f16.cc,
// elementwise_f16.cu), shared with the host tests as device_math.h is
// (__host__ __device__ under nvcc, plain inline C++ under g++; no CUDA
// headers).
//
// Every float16 row computes as the reference kernels do for float16 (the
// spec: kernels/ref converts each float16 input to float32, runs the float32
// operator, and rounds its output to float16 once): each thread loads float16
// bits, computes in float32 (sums in double where the float32 body does),
// and rounds once to float16 (round to nearest even, overflow to infinity).
// The conversions are core/half_bits.h's, the code core/tensor.cc's
// HalfToFloat / FloatToHalf run, so host and device give the same bits
// (CudaF16Math.* checks every half and a sweep of floats against core).
#pragma once

#include <stdint.h>
#include <string.h>

#include "core/half_bits.h"
#include "kernels/cuda/device_kernels.h"
#include "kernels/cuda/device_math.h"

namespace sparq {
namespace cuda {

// float16 bits in memory; a distinct type so a template over the element
// type never takes uint16_t (an integer) for a half.
struct Half {
  uint16_t bits;
};
static_assert(sizeof(Half) == 2, "float16 is two bytes in every tensor");

SPARQ_HD uint32_t FloatBits(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  uint32_t x;
  memcpy(&x, &f, 4);
  return x;
#endif
}

SPARQ_HD float BitsFloat(uint32_t x) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(x);
#else
  float f;
  memcpy(&f, &x, 4);
  return f;
#endif
}

// core's HalfToFloat / FloatToHalf (core/half_bits.h, the same code on host
// and device).
SPARQ_HD float HalfToFloatValue(uint16_t h) { return BitsFloat(HalfBitsToFloatBits(h)); }
SPARQ_HD uint16_t FloatToHalfValue(float f) { return FloatBitsToHalfBits(FloatBits(f)); }

// A float16 element as float32 and back, one rounding (device_math.h has the
// float32 pair): the float bodies of device_math.h / device_kernels.h are
// templates over the element type and find these by argument lookup.
SPARQ_HD float LoadF32(const Half* p, int64_t i) { return HalfToFloatValue(p[i].bits); }
SPARQ_HD void StoreF32(Half* p, int64_t i, float v) { p[i].bits = FloatToHalfValue(v); }

// ---------------------------------------------------------------------------
// Casts and the channel bias (the unary and binary operators, softmax, layer
// norm, the reductions, pooling and depthwise convolution of float16 are the
// float32 bodies' templates on Half: UnaryValue, BinaryElement, SoftmaxRow,
// LayerNormRow, ReduceSumMeanElement, Pool2dValue, DepthwiseConvValue)

// Cast to or from float16: the other side float32, int32, int64, int8, uint8
// or bool (CastType codes of device_kernels.h; kCastF16 for float16 itself).
// From float16: the value as float32, then CastElement's rules (through
// double; to an integer NaN -> 0, truncated and saturated). To float16: float
// as FloatToHalf; integers and bool through float32 (Tensor::CastTo's path).
inline constexpr int kCastF16 = 16;

// Bytes of one element of a CastType (or kCastF16).
SPARQ_HD int CastTypeBytes(int t) {
  switch (t) {
    case kCastF32: case kCastI32: return 4;
    case kCastI64: return 8;
    case kCastF16: return 2;
    default: return 1;  // int8, uint8, bool
  }
}

SPARQ_HD void CastHalfElement(int64_t i, const void* x, int from, void* y, int to) {
  if (from == kCastF16) {
    if (to == kCastF16) {
      static_cast<Half*>(y)[i] = static_cast<const Half*>(x)[i];
      return;
    }
    const float v = HalfToFloatValue(static_cast<const Half*>(x)[i].bits);
    CastElement(0, &v, kCastF32, static_cast<uint8_t*>(y) + i * CastTypeBytes(to), to);
    return;
  }
  static_cast<Half*>(y)[i].bits = FloatToHalfValue(static_cast<float>(CastLoadDouble(x, from, i)));
}

// Element i of y [batch, channels, pixels] set to bias[channel] (the C of a
// GEMM with beta = 1: the bias added inside cuBLASLt's float32 epilogue, one
// rounding).
SPARQ_HD Half ChannelBiasHalfElement(int64_t i, const Half* bias, int64_t channels, int64_t pixels) {
  return bias[(i / pixels) % channels];
}

}  // namespace cuda
}  // namespace sparq
