// The reference rules of linear (affine) INT8 quantization: rounding,
// saturation, quantize / dequantize and the requantization of int32
// accumulators. These functions are the SPEC that every fast quantized kernel
// of sparq (AVX-512 VNNI, cuBLASLt epilogues, ...) is tested against: a fast
// kernel must reproduce them bit for bit.
//
// Rounding rule. A real value v is rounded to the nearest integer; a value
// exactly halfway between two integers (a tie, |v - trunc(v)| == 0.5) goes to
// the even one: 0.5 -> 0, 1.5 -> 2, 2.5 -> 2, -0.5 -> -0, -1.5 -> -2. This is
// IEEE 754 roundTiesToEven, what ONNX (numpy.rint), ONNX Runtime (MLAS) and
// the x86 `cvtps2dq` / CUDA `__float2int_rn` instructions do in their default
// mode. Every intermediate value is an IEEE float32 (not float64), so a tie is
// a tie of the float32 value that the stated operations produce, e.g. for
// QuantizeLinear the float32 quotient x / scale. The zero point is added after
// rounding and the sum is then saturated (clamped) to the range of the output
// type; NaN quantizes to the zero point. No step depends on the floating
// point environment: RoundHalfToEven does not use the current rounding mode.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>

namespace sparq {

// Nearest integer to v, ties to even (see the rounding rule above). Values too
// large to have a fraction (|v| >= 2^23), infinities and NaN come back as is.
inline float RoundHalfToEven(float v) {
  float r = std::round(v);                                                    // nearest, ties away from zero
  if (std::fabs(v - std::trunc(v)) == 0.5f) r = 2.0f * std::round(0.5f * v);  // tie: the even neighbour
  return r;
}

// Clamps an integral-valued float to [lo, hi] and converts; NaN gives `nan_value`.
inline int32_t SaturateToInt(float v, int32_t lo, int32_t hi, int32_t nan_value) {
  if (std::isnan(v)) return nan_value;
  if (v <= static_cast<float>(lo)) return lo;
  if (v >= static_cast<float>(hi)) return hi;
  return static_cast<int32_t>(v);
}

// Quantized integer types: int8, uint8, int16, uint16.
template <typename T>
struct QuantRange {
  static_assert(std::numeric_limits<T>::is_integer && sizeof(T) <= 2, "quantized types are 8 or 16 bit integers");
  static constexpr int32_t kMin = std::numeric_limits<T>::min();
  static constexpr int32_t kMax = std::numeric_limits<T>::max();
};

// One value of QuantizeLinear:
//   q = saturate(RoundHalfToEven(x / scale) + zero_point)
// with x / scale a float32 division (not a multiplication by 1/scale, which
// rounds differently). NaN x (or 0/0) gives zero_point.
template <typename T>
inline T QuantizeValue(float x, float scale, int32_t zero_point) {
  const float rounded = RoundHalfToEven(x / scale);
  if (std::isnan(rounded)) return static_cast<T>(zero_point);
  // Clamp before adding so that huge values and infinities cannot overflow.
  const float lo = static_cast<float>(QuantRange<T>::kMin - zero_point);
  const float hi = static_cast<float>(QuantRange<T>::kMax - zero_point);
  const float clamped = rounded < lo ? lo : (rounded > hi ? hi : rounded);
  return static_cast<T>(static_cast<int32_t>(clamped) + zero_point);
}

// One value of DequantizeLinear: y = float32(q - zero_point) * scale, the
// difference taken exactly in integers.
inline float DequantizeValue(int64_t q, float scale, int64_t zero_point) {
  return static_cast<float>(q - zero_point) * scale;
}

// Where the quantization parameters (scale, zero point) of each element of a
// tensor live. The tensor is viewed as [outer, axis_dim, inner] around the
// quantization axis:
//   per-tensor (num_params 1):           parameter 0 for every element
//   per-axis   (block_size 0):           parameter a for element (o, a, i)
//   blocked    (block_size B > 0):       parameter (o * ceil(axis_dim / B) + a / B) * inner + i
// Per-tensor is expressed as outer = 1, axis_dim = 1, inner = numel.
struct QuantParamLayout {
  int64_t outer = 1;
  int64_t axis_dim = 1;
  int64_t inner = 1;
  int64_t block_size = 0;  // 0: per-tensor or per-axis

  int64_t num_blocks() const { return block_size > 0 ? (axis_dim + block_size - 1) / block_size : axis_dim; }
  // Number of scale / zero point values the layout expects.
  int64_t num_params() const { return block_size > 0 ? outer * num_blocks() * inner : axis_dim; }
  int64_t numel() const { return outer * axis_dim * inner; }
};

// Calls fn(element_index, param_index) for every element of `layout`, in
// order: the one indexing rule of every Q/DQ reference (int and float8).
template <typename Fn>
void ForEachQuantElement(const QuantParamLayout& layout, Fn&& fn) {
  const int64_t num_blocks = layout.num_blocks();
  int64_t e = 0;
  for (int64_t o = 0; o < layout.outer; ++o) {
    for (int64_t a = 0; a < layout.axis_dim; ++a) {
      if (layout.block_size > 0) {
        const int64_t row = (o * num_blocks + a / layout.block_size) * layout.inner;
        for (int64_t i = 0; i < layout.inner; ++i) fn(e++, row + i);
      } else {
        for (int64_t i = 0; i < layout.inner; ++i) fn(e++, a);
      }
    }
  }
}

// QuantizeLinear of a whole tensor laid out as `layout` says. `scale` holds
// layout.num_params() values; `zero_point` as many, or nullptr for all zero.
// T is int8_t, uint8_t, int16_t or uint16_t.
template <typename T>
void QuantizeLinearRef(const float* x, const QuantParamLayout& layout, const float* scale, const int32_t* zero_point,
                       T* y);

// DequantizeLinear of a whole tensor: y = (x - zero_point) * scale per element,
// parameters indexed as in QuantizeLinearRef. T is int8_t, uint8_t, int16_t,
// uint16_t or int32_t.
template <typename T>
void DequantizeLinearRef(const T* x, const QuantParamLayout& layout, const float* scale, const int32_t* zero_point,
                         float* y);

// DynamicQuantizeLinear's parameters for uint8 (ONNX's formula, in float32):
//   lo = min(0, min(x)), hi = max(0, max(x))        (the range always holds 0)
//   scale = (hi - lo) / 255
//   zero_point = saturate(RoundHalfToEven(0 - lo / scale))  to [0, 255]
// When the range is empty (x all zero, or empty) scale is 1 and zero_point 0,
// as in ONNX Runtime, so that y = 0 and the scale is still usable. NaN
// elements are ignored by min/max.
struct DynamicQuantParams {
  float scale = 0.0f;
  int32_t zero_point = 0;
};
DynamicQuantParams ComputeDynamicQuantParamsU8(const float* x, int64_t n);
// The same from the range already found: lo = min(0, min(x)), hi = max(0, max(x)).
DynamicQuantParams DynamicQuantParamsFromRangeU8(float lo, float hi);
// Widens [*lo, *hi] to hold x[0, n): a bound moves only for a value strictly
// beyond it, so NaN is ignored (and -0 does not replace +0). The spec of the
// minmax_f32 rows (kernels/cpu/dispatch.h).
void MinMaxRef(const float* x, int64_t n, float* lo, float* hi);
// Counts x[0, n) into a histogram of |x|: counts[min(int64(|x[i]| * scale),
// last)] += 1, the product in double (any size: past last is last) (calibration's streaming histograms,
// calibrate/calibrator.cc; AbsHistogram::Add bins the same way). A NaN is
// not counted; returns how many there were (calibration refuses them, and
// learns of them in this pass). The spec of the abs_histogram_f32 rows
// (kernels/cpu/dispatch.h).
int64_t AbsHistogramRef(const float* x, int64_t n, double scale, int64_t last, int64_t* counts);
// sum of x[i] * log(y[i] / z[i]) over i < n, in order (z null: of
// x[i] * log(y[i])), each ratio > 0 (the KL threshold search's sums of
// p log(p / q), calibrate/histogram.cc). The spec of the xlogy_sum_f64 rows
// (kernels/cpu/dispatch.h).
double XLogYSumRef(const double* x, const double* y, const double* z, int64_t n);

// The float32 factor that maps an int32 accumulator of (a - a_zp) * (b - b_zp)
// products to output units: (a_scale * b_scale) / y_scale, multiplied first,
// then divided, each step rounded to float32 (ONNX's reference order).
inline float RequantMultiplier(float a_scale, float b_scale, float y_scale) {
  const float ab = a_scale * b_scale;
  return ab / y_scale;
}

// Requantizes n int32 accumulators to T (int8_t or uint8_t):
//   acc'   = acc[j] + bias[j * bias_stride]               (int32, wraps mod 2^32)
//   real   = float32(acc') * multiplier[j * multiplier_stride]   (one float32 product)
//   out[j] = saturate(RoundHalfToEven(real) + zero_point)
// and with fuse_relu additionally out[j] = max(out[j], zero_point), i.e. the
// quantized image of ReLU. `bias` may be nullptr (no bias). A stride of 0
// uses one value for all j (per-tensor, or one output channel); 1 walks them
// (per-column). float32(acc') is exact for |acc'| <= 2^24.
template <typename T>
void RequantizeS32Ref(int64_t n, const int32_t* acc, const int32_t* bias, int64_t bias_stride, const float* multiplier,
                      int64_t multiplier_stride, int32_t zero_point, bool fuse_relu, T* out);

}  // namespace sparq
