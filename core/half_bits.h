// IEEE float16 <-> float32 conversion on bit patterns, with integer
// operations only, so the host (core/tensor.cc's FloatToHalf / HalfToFloat)
// and the CUDA kernels (kernels/cuda/device_f16.h) compile the same code and
// give the same bits. Float to half rounds to nearest even, overflows to
// infinity and keeps NaN quiet; half to float is exact. No CUDA headers:
// under nvcc the functions are __host__ __device__, under g++ plain inline.
#pragma once

#include <stdint.h>

#if defined(__CUDACC__)
#define SPARQ_HALF_BITS_FN __host__ __device__ __forceinline__
#else
#define SPARQ_HALF_BITS_FN inline
#endif

namespace sparq {

// float32 bits of the float16 `h`.
SPARQ_HALF_BITS_FN uint32_t HalfBitsToFloatBits(uint16_t h) {
  const uint32_t sign = (static_cast<uint32_t>(h) & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  if (exp == 0) {
    if (mant == 0) return sign;
    int e = -1;  // subnormal: normalize
    do {
      ++e;
      mant <<= 1;
    } while ((mant & 0x400u) == 0);
    return sign | (static_cast<uint32_t>(112 - e) << 23) | ((mant & 0x3ffu) << 13);
  }
  if (exp == 31) return sign | 0x7f800000u | (mant << 13);  // Inf / NaN
  return sign | ((exp + 112) << 23) | (mant << 13);
}

// float16 bits of the float32 whose bits are `x`.
SPARQ_HALF_BITS_FN uint16_t FloatBitsToHalfBits(uint32_t x) {
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t abs = x & 0x7fffffffu;
  if (abs >= 0x7f800000u) return static_cast<uint16_t>(sign | 0x7c00u | (abs > 0x7f800000u ? 0x200u : 0u));
  if (abs >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // overflow -> Inf
  if (abs < 0x38800000u) {  // half subnormal or zero: round(f / 2^-24)
    if (abs < 0x33000000u) return static_cast<uint16_t>(sign);  // below half the smallest subnormal
    const uint32_t exp = abs >> 23;
    const uint32_t mant = (abs & 0x7fffffu) | 0x800000u;  // with the implicit one
    const uint32_t shift = 126 - exp;                      // in [14, 24]
    uint32_t result = mant >> shift;
    const uint32_t rem = mant & ((1u << shift) - 1u);
    const uint32_t halfway = 1u << (shift - 1);
    if (rem > halfway || (rem == halfway && (result & 1u))) ++result;  // may carry into 0x400: fine
    return static_cast<uint16_t>(sign | result);
  }
  // Normal: rebias the exponent, round the mantissa from 23 to 10 bits (nearest even).
  const uint32_t rounded = abs + 0xfffu + ((abs >> 13) & 1u);
  return static_cast<uint16_t>(sign | ((rounded - 0x38000000u) >> 13));
}

}  // namespace sparq
