#include "kernels/ref/quantize.h"

#include <algorithm>
#include <cmath>

namespace sparq {

template <typename T>
void QuantizeLinearRef(const float* x, const QuantParamLayout& layout, const float* scale, const int32_t* zero_point,
                       T* y) {
  ForEachQuantElement(layout, [&](int64_t e, int64_t p) {
    y[e] = QuantizeValue<T>(x[e], scale[p], zero_point != nullptr ? zero_point[p] : 0);
  });
}

template <typename T>
void DequantizeLinearRef(const T* x, const QuantParamLayout& layout, const float* scale, const int32_t* zero_point,
                         float* y) {
  ForEachQuantElement(layout, [&](int64_t e, int64_t p) {
    y[e] = DequantizeValue(x[e], scale[p], zero_point != nullptr ? zero_point[p] : 0);
  });
}

int64_t AbsHistogramRef(const float* x, int64_t n, double scale, int64_t last, int64_t* counts) {
  int64_t nans = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (std::isnan(x[i])) {
      ++nans;
      continue;
    }
    const double b = std::fabs(x[i]) * scale;  // compared before converting: past int64's range it would overflow
    counts[b < static_cast<double>(last) ? static_cast<int64_t>(b) : last] += 1;
  }
  return nans;
}

double XLogYSumRef(const double* x, const double* y, const double* z, int64_t n) {
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) sum += x[i] * std::log(z != nullptr ? y[i] / z[i] : y[i]);
  return sum;
}

void MinMaxRef(const float* x, int64_t n, float* lo, float* hi) {
  float l = *lo, h = *hi;
  for (int64_t i = 0; i < n; ++i) {
    if (x[i] < l) l = x[i];  // NaN compares false: ignored
    if (x[i] > h) h = x[i];
  }
  *lo = l;
  *hi = h;
}

DynamicQuantParams ComputeDynamicQuantParamsU8(const float* x, int64_t n) {
  float lo = 0.0f, hi = 0.0f;  // the range always includes 0
  MinMaxRef(x, n, &lo, &hi);
  return DynamicQuantParamsFromRangeU8(lo, hi);
}

DynamicQuantParams DynamicQuantParamsFromRangeU8(float lo, float hi) {
  DynamicQuantParams p;
  if (hi == lo) {  // all zero: any scale represents x exactly
    p.scale = 1.0f;
    return p;
  }
  p.scale = (hi - lo) / 255.0f;
  const float zero_point = 0.0f - lo / p.scale;
  p.zero_point = SaturateToInt(RoundHalfToEven(zero_point), 0, 255, 0);
  return p;
}

template <typename T>
void RequantizeS32Ref(int64_t n, const int32_t* acc, const int32_t* bias, int64_t bias_stride, const float* multiplier,
                      int64_t multiplier_stride, int32_t zero_point, bool fuse_relu, T* out) {
  const int32_t lo = fuse_relu ? std::max(QuantRange<T>::kMin, zero_point) : QuantRange<T>::kMin;
  const int32_t hi = QuantRange<T>::kMax;
  for (int64_t j = 0; j < n; ++j) {
    uint32_t sum = static_cast<uint32_t>(acc[j]);
    if (bias != nullptr) sum += static_cast<uint32_t>(bias[j * bias_stride]);  // wraps, like int32 hardware adds
    const float real = static_cast<float>(static_cast<int32_t>(sum)) * multiplier[j * multiplier_stride];
    const float rounded = RoundHalfToEven(real);
    int32_t q;
    if (std::isnan(rounded)) {
      q = zero_point;
    } else {
      // Clamp in float before converting so that infinities cannot overflow.
      const float clamped =
          std::min(std::max(rounded, static_cast<float>(lo - zero_point)), static_cast<float>(hi - zero_point));
      q = static_cast<int32_t>(clamped) + zero_point;
    }
    out[j] = static_cast<T>(std::min(std::max(q, lo), hi));
  }
}

template void QuantizeLinearRef<int8_t>(const float*, const QuantParamLayout&, const float*, const int32_t*, int8_t*);
template void QuantizeLinearRef<uint8_t>(const float*, const QuantParamLayout&, const float*, const int32_t*, uint8_t*);
template void QuantizeLinearRef<int16_t>(const float*, const QuantParamLayout&, const float*, const int32_t*, int16_t*);
template void QuantizeLinearRef<uint16_t>(const float*, const QuantParamLayout&, const float*, const int32_t*,
                                          uint16_t*);

template void DequantizeLinearRef<int8_t>(const int8_t*, const QuantParamLayout&, const float*, const int32_t*, float*);
template void DequantizeLinearRef<uint8_t>(const uint8_t*, const QuantParamLayout&, const float*, const int32_t*,
                                           float*);
template void DequantizeLinearRef<int16_t>(const int16_t*, const QuantParamLayout&, const float*, const int32_t*,
                                           float*);
template void DequantizeLinearRef<uint16_t>(const uint16_t*, const QuantParamLayout&, const float*, const int32_t*,
                                            float*);
template void DequantizeLinearRef<int32_t>(const int32_t*, const QuantParamLayout&, const float*, const int32_t*,
                                           float*);

template void RequantizeS32Ref<int8_t>(int64_t, const int32_t*, const int32_t*, int64_t, const float*, int64_t, int32_t,
                                       bool, int8_t*);
template void RequantizeS32Ref<uint8_t>(int64_t, const int32_t*, const int32_t*, int64_t, const float*, int64_t,
                                        int32_t, bool, uint8_t*);

}  // namespace sparq
