// Arithmetic shared by the CUDA kernels and the host: each function is
// __host__ __device__ under nvcc and plain inline C++ under g++, so the host
// tests (tests/kernels/cuda_math_test.cc) pin down the bits the GPU computes
// (STYLE.md, "Adding a second backend": CUTLASS's host-device epilogues).
//
// The integer paths are the spec of kernels/ref/quantize.h, restated in
// functions a device can call (no std::, no <cmath> templates), and must stay
// bit-identical to it:
//   RoundHalfToEven      kernels/ref/quantize.h RoundHalfToEven
//   QuantizeValue<T>     QuantizeValue<T> (QuantizeLinear)
//   DequantizeValue      DequantizeValue (DequantizeLinear)
//   RequantizeValue<T>   one element of RequantizeS32Ref<T>
//   AbsHistogramBin      one element of AbsHistogramRef (calibration histograms)
// The float paths (activations, softmax, layer norm) follow the reference's
// formulas and order of operations; device exp/erf/tanh differ from glibc's
// by a few ulp, which the tests bound by named tolerances.
//
// Nothing here depends on the floating point environment, and nothing may be
// contracted into a fused multiply-add where a rounding is part of the spec:
// the integer paths have no a * b + c, so -fmad cannot change them.
#pragma once

#include <math.h>
#include <stdint.h>

#include <type_traits>

#if defined(__CUDACC__)
#define SPARQ_HD __host__ __device__ __forceinline__
#else
#define SPARQ_HD inline
#endif

namespace sparq {
namespace cuda {

// ---------------------------------------------------------------------------
// Rounding and saturation

SPARQ_HD bool IsNan(float v) { return v != v; }
SPARQ_HD bool IsNan(double v) { return v != v; }

// Nearest integer to v, ties to the even neighbour; |v| >= 2^23, infinities
// and NaN come back as they are. The reference's own formula (not rintf,
// whose host result depends on the rounding mode).
SPARQ_HD float RoundHalfToEven(float v) {
  float r = roundf(v);                                         // ties away from zero
  if (fabsf(v - truncf(v)) == 0.5f) r = 2.0f * roundf(0.5f * v);  // a tie: the even one
  return r;
}

SPARQ_HD int32_t MinI32(int32_t a, int32_t b) { return a < b ? a : b; }
SPARQ_HD int32_t MaxI32(int32_t a, int32_t b) { return a > b ? a : b; }

// The range of an 8- or 16-bit quantized type.
template <typename T> struct DeviceQuantRange;
template <> struct DeviceQuantRange<int8_t> { static constexpr int32_t kMin = -128, kMax = 127; };
template <> struct DeviceQuantRange<uint8_t> { static constexpr int32_t kMin = 0, kMax = 255; };
template <> struct DeviceQuantRange<int16_t> { static constexpr int32_t kMin = -32768, kMax = 32767; };
template <> struct DeviceQuantRange<uint16_t> { static constexpr int32_t kMin = 0, kMax = 65535; };

// QuantizeLinear of one value: saturate(RoundHalfToEven(x / scale) + zero_point),
// a float32 division; NaN gives zero_point.
template <typename T>
SPARQ_HD T QuantizeValue(float x, float scale, int32_t zero_point) {
  const float rounded = RoundHalfToEven(x / scale);
  if (IsNan(rounded)) return static_cast<T>(zero_point);
  const float lo = static_cast<float>(DeviceQuantRange<T>::kMin - zero_point);
  const float hi = static_cast<float>(DeviceQuantRange<T>::kMax - zero_point);
  const float clamped = rounded < lo ? lo : (rounded > hi ? hi : rounded);
  return static_cast<T>(static_cast<int32_t>(clamped) + zero_point);
}

// DequantizeLinear of one value: float32(q - zero_point) * scale.
SPARQ_HD float DequantizeValue(int32_t q, float scale, int32_t zero_point) {
  return static_cast<float>(static_cast<int64_t>(q) - zero_point) * scale;
}

// One int32 accumulator to T (int8_t or uint8_t), exactly RequantizeS32Ref:
//   sum  = acc + bias                       (int32, wrapping)
//   real = float32(sum) * multiplier        (one float32 product)
//   q    = saturate(RoundHalfToEven(real) + zero_point), NaN -> zero_point
// and with fuse_relu q = max(q, zero_point).
template <typename T>
SPARQ_HD T RequantizeValue(int32_t acc, int32_t bias, float multiplier, int32_t zero_point, bool fuse_relu) {
  const int32_t lo = fuse_relu ? MaxI32(DeviceQuantRange<T>::kMin, zero_point) : DeviceQuantRange<T>::kMin;
  const int32_t hi = DeviceQuantRange<T>::kMax;
  const uint32_t sum = static_cast<uint32_t>(acc) + static_cast<uint32_t>(bias);  // wraps like int32 hardware adds
  const float real = static_cast<float>(static_cast<int32_t>(sum)) * multiplier;
  const float rounded = RoundHalfToEven(real);
  int32_t q;
  if (IsNan(rounded)) {
    q = zero_point;
  } else {
    const float flo = static_cast<float>(lo - zero_point), fhi = static_cast<float>(hi - zero_point);
    const float clamped = rounded < flo ? flo : (rounded > fhi ? fhi : rounded);  // before converting: no overflow
    q = static_cast<int32_t>(clamped) + zero_point;
  }
  return static_cast<T>(MinI32(MaxI32(q, lo), hi));
}

// The float32 factor (a_scale * b_scale) / y_scale, in the reference's order.
SPARQ_HD float RequantMultiplier(float a_scale, float b_scale, float y_scale) {
  const float ab = a_scale * b_scale;
  return ab / y_scale;
}

// DynamicQuantizeLinear's uint8 parameters from the range [lo, hi] (lo <= 0 <= hi),
// exactly DynamicQuantParamsFromRangeU8: scale = (hi - lo) / 255, zero point
// saturate(RoundHalfToEven(0 - lo / scale)) to [0, 255]; an empty range gives (1, 0).
SPARQ_HD void DynamicQuantParamsU8(float lo, float hi, float* scale, int32_t* zero_point) {
  if (hi == lo) {
    *scale = 1.0f;
    *zero_point = 0;
    return;
  }
  const float s = (hi - lo) / 255.0f;
  const float z = RoundHalfToEven(0.0f - lo / s);
  *scale = s;
  *zero_point = IsNan(z) ? 0 : (z <= 0.0f ? 0 : (z >= 255.0f ? 255 : static_cast<int32_t>(z)));
}

// One float32 operation, never fused with its neighbours into a multiply-add
// (nvcc contracts a * b + c by default): for the steps a spec rounds one by one.
SPARQ_HD float AddRn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fadd_rn(a, b);
#else
  return a + b;
#endif
}
SPARQ_HD float MulRn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}
SPARQ_HD float SubRn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fsub_rn(a, b);
#else
  return a - b;
#endif
}
SPARQ_HD float DivRn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fdiv_rn(a, b);
#else
  return a / b;
#endif
}

// An element of a float tensor as float32 and back: the float kernels are
// templates over the element type (float here, Half in device_f16.h), so one
// body serves float32 and float16: load as float32, compute in float32, store
// with one rounding.
SPARQ_HD float LoadF32(const float* p, int64_t i) { return p[i]; }
SPARQ_HD void StoreF32(float* p, int64_t i, float v) { p[i] = v; }

// sparq.QLinearAdd / QLinearMul of one pair (kernels/ref/qdq_fused_ops.cc):
//   Y = QuantizeValue(op(DequantizeValue(a), DequantizeValue(b)))
// each step one float32 rounding, as the separate reference kernels.
template <typename T>
SPARQ_HD T QLinearBinaryValue(bool mul, int32_t a, float a_scale, int32_t a_zp, int32_t b, float b_scale, int32_t b_zp,
                              float y_scale, int32_t y_zp) {
  const float x = MulRn(static_cast<float>(a - a_zp), a_scale);
  const float z = MulRn(static_cast<float>(b - b_zp), b_scale);
  return QuantizeValue<T>(mul ? MulRn(x, z) : AddRn(x, z), y_scale, y_zp);
}

// Integer Add / Sub / Mul / Div of int32 / int64 as kernels/ref computes them
// (elementwise_util.h): two's complement wrapping, Div truncating toward zero,
// x / 0 = 0 and lowest / -1 wrapping to lowest. op: 0 add, 1 sub, 2 mul, 3 div.
template <typename T>
SPARQ_HD T IntBinary(int op, T a, T b) {
  using U = typename std::conditional<(sizeof(T) < 8), uint32_t, uint64_t>::type;
  switch (op) {
    case 0: return static_cast<T>(static_cast<U>(a) + static_cast<U>(b));
    case 1: return static_cast<T>(static_cast<U>(a) - static_cast<U>(b));
    case 2: return static_cast<T>(static_cast<U>(a) * static_cast<U>(b));
    default:
      if (b == 0) return 0;
      if (b == -1) return static_cast<T>(U{0} - static_cast<U>(a));
      return static_cast<T>(a / b);
  }
}

// ---------------------------------------------------------------------------
// Calibration histograms

// The bin of x in a histogram of |x| with `last` + 1 bins of width 1 / scale:
// min(int64(|x| * scale), last), the product in double; -1 for NaN (not
// counted). One element of AbsHistogramRef.
SPARQ_HD int64_t AbsHistogramBin(float x, double scale, int64_t last) {
  if (IsNan(x)) return -1;
  const double b = static_cast<double>(fabsf(x)) * scale;  // compared before converting: no overflow
  return b < static_cast<double>(last) ? static_cast<int64_t>(b) : last;
}

// ---------------------------------------------------------------------------
// Activations (float32), as the reference kernels compute them

SPARQ_HD float Sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }
// sparq.Silu: Sigmoid rounded to float, then the product.
SPARQ_HD float Silu(float x) {
  const float s = 1.0f / (1.0f + expf(-x));
  return x * s;
}
// Gelu (approximate = "none"): 0.5 x (1 + erf(x / sqrt 2)).
SPARQ_HD float GeluErf(float x) { return 0.5f * x * (1.0f + erff(x * 0.70710678118654752440f)); }
// sparq.GeluErfChain: ((x * (erf(x / divisor) + offset)) * scale), each step rounded.
SPARQ_HD float GeluErfChain(float x, float divisor, float offset, float scale) {
  const float e = erff(x / divisor);
  const float t = e + offset;
  const float p = x * t;
  return p * scale;
}
// sparq.GeluErfScaledChain (torch.onnx dynamo's order): x * ((erf(x / divisor)
// + offset) * scale), each step rounded.
SPARQ_HD float GeluErfScaledChain(float x, float divisor, float offset, float scale) {
  const float e = erff(x / divisor);
  const float t = e + offset;
  const float h = t * scale;
  return x * h;
}
// sparq.HardSwishChain: Div(Mul(x, Clip(Add(x, offset), lo, hi)), divisor),
// each step rounded to float32 (NaN stays NaN through the Clip).
SPARQ_HD float HardSwishChain(float x, float offset, float lo, float hi, float divisor) {
  const float t = x + offset;
  const float above = t < lo ? lo : t;
  const float clipped = above > hi ? hi : above;
  const float p = x * clipped;
  return p / divisor;
}
SPARQ_HD float Relu(float x) { return x < 0.0f ? 0.0f : x; }  // NaN stays NaN
// Clip: NaN stays NaN.
SPARQ_HD float Clip(float x, float lo, float hi) {
  const float a = x < lo ? lo : x;
  return a > hi ? hi : a;
}

// The float rows' unary operators (float32 and float16 alike, on the float32
// value). Parameters: kClip (p0 = lo, p1 = hi), kGeluErfChain and
// kGeluErfScaledChain (p0 = divisor, p1 = offset, p2 = scale), kHardSwishChain (p0 = offset, p1 = lo, p2 = hi,
// p3 = divisor).
enum class UnaryOp {
  kRelu, kSigmoid, kTanh, kErf, kSqrt, kExp, kSilu, kGelu, kGeluErfChain, kClip, kNeg, kAbs, kHardSwishChain,
  kReciprocal, kGeluErfScaledChain
};

SPARQ_HD float UnaryValue(UnaryOp op, float x, float p0, float p1, float p2, float p3) {
  switch (op) {
    case UnaryOp::kRelu: return Relu(x);
    case UnaryOp::kSigmoid: return Sigmoid(x);
    case UnaryOp::kTanh: return tanhf(x);
    case UnaryOp::kErf: return erff(x);
    case UnaryOp::kSqrt: return sqrtf(x);
    case UnaryOp::kExp: return expf(x);
    case UnaryOp::kSilu: return Silu(x);
    case UnaryOp::kGelu: return GeluErf(x);
    case UnaryOp::kGeluErfChain: return GeluErfChain(x, p0, p1, p2);
    case UnaryOp::kGeluErfScaledChain: return GeluErfScaledChain(x, p0, p1, p2);
    case UnaryOp::kClip: return Clip(x, p0, p1);
    case UnaryOp::kNeg: return -x;
    case UnaryOp::kAbs: return fabsf(x);
    case UnaryOp::kHardSwishChain: return HardSwishChain(x, p0, p1, p2, p3);
    case UnaryOp::kReciprocal: return DivRn(1.0f, x);
  }
  return x;
}

// Add / Sub / Mul / Div of two float32 values, one IEEE operation (float16
// inputs: exact for Add / Sub / Mul, so the float16 result is rounded once,
// as the reference's). The op's value is IntBinary's op code too.
enum class BinaryOp { kAdd, kSub, kMul, kDiv };

SPARQ_HD float BinaryValue(BinaryOp op, float a, float b) {
  switch (op) {
    case BinaryOp::kAdd: return AddRn(a, b);
    case BinaryOp::kSub: return SubRn(a, b);
    case BinaryOp::kMul: return MulRn(a, b);
    case BinaryOp::kDiv: return DivRn(a, b);
  }
  return a;
}

// ---------------------------------------------------------------------------
// Rows of Softmax and LayerNormalization (the reference's algorithm, one row),
// over float32 or float16 (T = float or Half: float32 values, one rounding)

// Softmax of x[0, n) into y: y = exp(x - max) / sum, the sum and the division
// in double, as kernels/ref/softmax.cc. A row of one thread; the GPU kernel
// splits the same three passes over a block.
template <typename T>
SPARQ_HD void SoftmaxRow(const T* x, T* y, int64_t n) {
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

// LayerNormalization of one row of n values: mean and population variance in
// double (two passes), inv = 1 / sqrt(var + eps), y = (x - mean) * inv *
// scale + bias in double, as kernels/ref/norm.cc. bias may be null. Writes the
// row's mean and inv when asked (non-null).
template <typename T>
SPARQ_HD void LayerNormRow(const T* x, const T* scale, const T* bias, double eps, int64_t n, T* y,
                           double* mean_out = nullptr, double* inv_out = nullptr) {
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
  if (mean_out != nullptr) *mean_out = m;
  if (inv_out != nullptr) *inv_out = inv;
}

// ---------------------------------------------------------------------------
// Broadcasting (numpy rules), for elementwise kernels of up to kMaxRank dims

inline constexpr int kMaxBroadcastRank = 8;

// An output index -> the offset into an input whose strides are 0 along the
// broadcast dimensions. dims/strides are the output's dims and the input's
// element strides, both right-aligned to `rank`.
SPARQ_HD int64_t BroadcastOffset(int64_t index, int rank, const int64_t* dims, const int64_t* strides) {
  int64_t offset = 0;
  for (int d = rank - 1; d >= 0; --d) {
    const int64_t i = index % dims[d];
    index /= dims[d];
    offset += i * strides[d];
  }
  return offset;
}

}  // namespace cuda
}  // namespace sparq
