#include "kernels/ref/quantize_fp8.h"

namespace sparq {

void QuantizeLinearFp8Ref(const float* x, const QuantParamLayout& layout, const float* scale, bool saturate,
                          uint8_t* y) {
  ForEachQuantElement(layout, [&](int64_t e, int64_t p) { y[e] = FloatToFloat8E4M3(x[e] / scale[p], saturate); });
}

void DequantizeLinearFp8Ref(const uint8_t* x, const QuantParamLayout& layout, const float* scale, float* y) {
  ForEachQuantElement(layout, [&](int64_t e, int64_t p) { y[e] = Float8E4M3ToFloat(x[e]) * scale[p]; });
}

void FakeQuantFp8Ref(const float* x, int64_t n, float scale, float* y) {
  for (int64_t i = 0; i < n; ++i) y[i] = Float8E4M3ToFloat(FloatToFloat8E4M3(x[i] / scale, true)) * scale;
}

}  // namespace sparq
