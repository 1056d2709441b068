#include "kernels/ref/quantize_fp8.h"

namespace sparq {
namespace {

// Calls fn(element, parameter) for every element of the layout, in order.
template <typename Fn>
void ForEachElement(const QuantParamLayout& layout, Fn&& fn) {
  const int64_t blocks = layout.num_blocks();
  int64_t e = 0;
  for (int64_t o = 0; o < layout.outer; ++o) {
    for (int64_t a = 0; a < layout.axis_dim; ++a) {
      if (layout.block_size > 0) {
        const int64_t base = (o * blocks + a / layout.block_size) * layout.inner;
        for (int64_t i = 0; i < layout.inner; ++i) fn(e++, base + i);
      } else {
        const int64_t p = layout.axis_dim == 1 ? 0 : a;
        for (int64_t i = 0; i < layout.inner; ++i) fn(e++, p);
      }
    }
  }
}

}  // namespace

void QuantizeLinearFp8Ref(const float* x, const QuantParamLayout& layout, const float* scale, bool saturate,
                          uint8_t* y) {
  ForEachElement(layout, [&](int64_t e, int64_t p) { y[e] = FloatToFloat8E4M3(x[e] / scale[p], saturate); });
}

void DequantizeLinearFp8Ref(const uint8_t* x, const QuantParamLayout& layout, const float* scale, float* y) {
  ForEachElement(layout, [&](int64_t e, int64_t p) { y[e] = Float8E4M3ToFloat(x[e]) * scale[p]; });
}

void FakeQuantFp8Ref(const float* x, int64_t n, float scale, float* y) {
  for (int64_t i = 0; i < n; ++i) y[i] = Float8E4M3ToFloat(FloatToFloat8E4M3(x[i] / scale, true)) * scale;
}

}  // namespace sparq
