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
// The conversions restate core/tensor.cc's HalfToFloat / FloatToHalf with
// integer operations only, so host and device give the same bits
// (CudaF16Math.* checks every half and a sweep of floats against core).
#pragma once

#include <stdint.h>
#include <string.h>

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

// core's HalfToFloat: exact (every half is a float).
SPARQ_HD float HalfToFloatValue(uint16_t h) {
  const uint32_t sign = (static_cast<uint32_t>(h) & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  uint32_t bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else {  // subnormal: normalize
      int e = -1;
      do {
        ++e;
        mant <<= 1;
      } while ((mant & 0x400u) == 0);
      bits = sign | (static_cast<uint32_t>(112 - e) << 23) | ((mant & 0x3ffu) << 13);
    }
  } else if (exp == 31) {
    bits = sign | 0x7f800000u | (mant << 13);  // Inf / NaN
  } else {
    bits = sign | ((exp + 112) << 23) | (mant << 13);
  }
  return BitsFloat(bits);
}

// core's FloatToHalf: round to nearest even, overflow to infinity, NaN quiet.
SPARQ_HD uint16_t FloatToHalfValue(float f) {
  const uint32_t x = FloatBits(f);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t abs = x & 0x7fffffffu;
  if (abs >= 0x7f800000u) return static_cast<uint16_t>(sign | 0x7c00u | (abs > 0x7f800000u ? 0x200u : 0u));
  if (abs >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);
  if (abs < 0x38800000u) {  // half subnormal or zero: round(f / 2^-24)
    if (abs < 0x33000000u) return static_cast<uint16_t>(sign);
    const uint32_t exp = abs >> 23;
    const uint32_t mant = (abs & 0x7fffffu) | 0x800000u;
    const uint32_t shift = 126 - exp;  // in [14, 24]
    uint32_t result = mant >> shift;
    const uint32_t rem = mant & ((1u << shift) - 1u);
    const uint32_t halfway = 1u << (shift - 1);
    if (rem > halfway || (rem == halfway && (result & 1u))) ++result;
    return static_cast<uint16_t>(sign | result);
  }
  const uint32_t rounded = abs + 0xfffu + ((abs >> 13) & 1u);
  return static_cast<uint16_t>(sign | ((rounded - 0x38000000u) >> 13));
}

// An element of a float tensor as float32: the kernels below are templates
// over float and Half, so one body serves both.
SPARQ_HD float LoadF32(const float* p, int64_t i) { return p[i]; }
SPARQ_HD float LoadF32(const Half* p, int64_t i) { return HalfToFloatValue(p[i].bits); }
SPARQ_HD void StoreF32(float* p, int64_t i, float v) { p[i] = v; }
SPARQ_HD void StoreF32(Half* p, int64_t i, float v) { p[i].bits = FloatToHalfValue(v); }

// ---------------------------------------------------------------------------
// Elementwise

// The float16 rows' unary operators, each the float32 row's formula
// (device_math.h) on the float32 value, rounded once.
enum class HalfUnaryOp : int { kRelu, kSigmoid, kTanh, kErf, kSqrt, kExp, kNeg, kAbs, kClip, kGelu, kReciprocal };

SPARQ_HD float HalfUnaryValue(HalfUnaryOp op, float x, float lo, float hi) {
  switch (op) {
    case HalfUnaryOp::kRelu: return Relu(x);
    case HalfUnaryOp::kSigmoid: return Sigmoid(x);
    case HalfUnaryOp::kTanh: return tanhf(x);
    case HalfUnaryOp::kErf: return erff(x);
    case HalfUnaryOp::kSqrt: return sqrtf(x);
    case HalfUnaryOp::kExp: return expf(x);
    case HalfUnaryOp::kNeg: return -x;
    case HalfUnaryOp::kAbs: return fabsf(x);
    case HalfUnaryOp::kClip: return Clip(x, lo, hi);
    case HalfUnaryOp::kGelu: return GeluErf(x);
    case HalfUnaryOp::kReciprocal: return 1.0f / x;
  }
  return x;
}

SPARQ_HD Half HalfUnaryElement(HalfUnaryOp op, Half x, float lo, float hi) {
  return Half{FloatToHalfValue(HalfUnaryValue(op, HalfToFloatValue(x.bits), lo, hi))};
}

// Add / Sub / Mul / Div (op 0..3) of two float16 values: one float32
// operation (exact for Add / Sub / Mul of halves: their float32 result is
// then rounded once, as the reference's), rounded to float16.
SPARQ_HD float HalfBinaryValue(int op, float a, float b) {
  switch (op) {
    case 0: return AddRn(a, b);
    case 1: return AddRn(a, -b);
    case 2: return MulRn(a, b);
    default: return a / b;
  }
}

// Output element i of a broadcast binary operator over float16 a and b.
SPARQ_HD Half HalfBinaryElement(int64_t i, int op, const Half* a, const Half* b, const BroadcastPlan& plan) {
  const int64_t ia = plan.same_shape ? i : BroadcastOffset(i, plan.rank, plan.dims, plan.a_strides);
  const int64_t ib = plan.same_shape ? i : BroadcastOffset(i, plan.rank, plan.dims, plan.b_strides);
  return Half{FloatToHalfValue(HalfBinaryValue(op, HalfToFloatValue(a[ia].bits), HalfToFloatValue(b[ib].bits)))};
}

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

// ---------------------------------------------------------------------------
// Rows: Softmax and LayerNormalization of one row, as the float32 bodies
// (SoftmaxRow, LayerNormRow) on the row's float32 values, rounded once.
// The GPU kernels split the same passes over a block (elementwise_f16.cu).

SPARQ_HD void SoftmaxRowHalf(const Half* x, Half* y, int64_t n) {
  if (n <= 0) return;
  float m = LoadF32(x, 0);
  for (int64_t k = 1; k < n; ++k) {
    const float v = LoadF32(x, k);
    m = v > m ? v : m;
  }
  double sum = 0.0;
  for (int64_t k = 0; k < n; ++k) sum += static_cast<double>(expf(LoadF32(x, k) - m));
  for (int64_t k = 0; k < n; ++k) {
    const float e = expf(LoadF32(x, k) - m);  // again: an exp stored as float16 would round twice
    StoreF32(y, k, static_cast<float>(static_cast<double>(e) / sum));
  }
}

SPARQ_HD void LayerNormRowHalf(const Half* x, const Half* scale, const Half* bias, double eps, int64_t n, Half* y) {
  double s = 0.0;
  for (int64_t i = 0; i < n; ++i) s += static_cast<double>(LoadF32(x, i));
  const double m = n > 0 ? s / static_cast<double>(n) : 0.0;
  double q = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    const double d = static_cast<double>(LoadF32(x, i)) - m;
    q += d * d;
  }
  const double v = n > 0 ? q / static_cast<double>(n) : 0.0;
  const double inv = 1.0 / sqrt(v + eps);
  for (int64_t i = 0; i < n; ++i) {
    const double b = bias != nullptr ? static_cast<double>(LoadF32(bias, i)) : 0.0;
    StoreF32(y, i, static_cast<float>((static_cast<double>(LoadF32(x, i)) - m) * inv * static_cast<double>(LoadF32(scale, i)) + b));
  }
}

// Output element o of ReduceSum / ReduceMean over float16: ReduceSumMeanElement's
// double sum (and mean) on the float32 values, rounded to float32, then to float16.
SPARQ_HD Half ReduceSumMeanHalfElement(int64_t o, const Half* x, const int64_t* base, const int64_t* offsets, int64_t n,
                                       bool mean) {
  double s = 0.0;
  for (int64_t r = 0; r < n; ++r) s += static_cast<double>(LoadF32(x, base[o] + offsets[r]));
  return Half{FloatToHalfValue(static_cast<float>(mean ? s / static_cast<double>(n) : s))};
}

// ---------------------------------------------------------------------------
// Convolution and pooling over float16 planes (NCHW)

// Output element i of a depthwise convolution (DepthwiseConvValue's float32
// fused multiply-adds and bias on the float32 values), rounded once.
SPARQ_HD Half DepthwiseConvHalfElement(int64_t i, const Half* x, const Half* w, const Half* bias, const Conv2dGeometry& g) {
  const int64_t ox = i % g.out_width, oy = (i / g.out_width) % g.out_height, plane = i / g.pixels();
  const int64_t c = plane % g.channels;
  const int64_t x0 = plane * g.height * g.width, w0 = c * g.kernel_h * g.kernel_w;
  float acc = 0.0f;
  for (int64_t ky = 0; ky < g.kernel_h; ++ky) {
    const int64_t iy = oy * g.stride_h - g.pad_top + ky * g.dilation_h;
    if (iy < 0 || iy >= g.height) continue;
    for (int64_t kx = 0; kx < g.kernel_w; ++kx) {
      const int64_t ix = ox * g.stride_w - g.pad_left + kx * g.dilation_w;
      if (ix < 0 || ix >= g.width) continue;
      acc = fmaf(LoadF32(x, x0 + iy * g.width + ix), LoadF32(w, w0 + ky * g.kernel_w + kx), acc);
    }
  }
  return Half{FloatToHalfValue(bias != nullptr ? acc + LoadF32(bias, c) : acc)};
}

// Output element i of MaxPool (kMax) or AveragePool over float16 planes:
// Pool2dValue's rules on the float32 values, rounded once.
template <bool kMax>
SPARQ_HD Half Pool2dHalfElement(int64_t i, const Half* x, const Pool2dGeometry& g) {
  const int64_t ox = i % g.out_width, oy = (i / g.out_width) % g.out_height, plane = i / (g.out_width * g.out_height);
  const int64_t x0 = plane * g.height * g.width;
  float best = -3.402823466e+38f;
  bool any = false;
  double sum = 0.0;
  int64_t count = 0;
  for (int64_t ky = 0; ky < g.kernel_h; ++ky) {
    const int64_t iy = oy * g.stride_h - g.pad_top + ky * g.dilation_h;
    for (int64_t kx = 0; kx < g.kernel_w; ++kx) {
      const int64_t ix = ox * g.stride_w - g.pad_left + kx * g.dilation_w;
      const bool inside = iy >= 0 && iy < g.height && ix >= 0 && ix < g.width;
      if (kMax) {
        if (!inside) continue;
        const float v = LoadF32(x, x0 + iy * g.width + ix);
        if (!any || v > best || (IsNan(v) && !IsNan(best))) best = v;
        any = true;
      } else {
        if (inside) sum += static_cast<double>(LoadF32(x, x0 + iy * g.width + ix));
        const bool in_padded = iy >= -g.pad_top && iy < g.height + g.pad_bottom && ix >= -g.pad_left &&
                               ix < g.width + g.pad_right;
        if (g.count_include_pad ? in_padded : inside) ++count;
      }
    }
  }
  return Half{FloatToHalfValue(kMax ? best : static_cast<float>(sum / static_cast<double>(count)))};
}

// Element i of y [batch, channels, pixels] set to bias[channel] (the C of a
// GEMM with beta = 1: the bias added inside cuBLASLt's float32 epilogue, one
// rounding).
SPARQ_HD Half ChannelBiasHalfElement(int64_t i, const Half* bias, int64_t channels, int64_t pixels) {
  return bias[(i / pixels) % channels];
}

}  // namespace cuda
}  // namespace sparq
