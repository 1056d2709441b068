// The reference rules of FP8 (float8e4m3fn) quantization, ONNX opset 19's
// QuantizeLinear / DequantizeLinear with a float8e4m3fn zero point:
//
//   QuantizeLinear:   y = Float8E4M3(x / scale, saturate)     x / scale in float32
//   DequantizeLinear: y = float32(x) * scale                  one float32 product
//
// The zero point must be 0 (ONNX's reference refuses any other for float8);
// the conversion is core's FloatToFloat8E4M3 (round to nearest even; saturate
// clamps to +-448, else out-of-range values become NaN). Scales are indexed as
// for the integer types (QuantParamLayout: per-tensor, per-axis, blocked).
// These functions are the spec the fast fake-quant rows are tested against,
// bit for bit.
#pragma once

#include <cstdint>

#include "kernels/ref/quantize.h"
#include "sparq/tensor.h"

namespace sparq {

// The largest finite float8e4m3fn value: amax / kFloat8E4M3Max is the scale
// that maps a tensor's max-abs onto it.
inline constexpr float kFloat8E4M3Max = 448.0f;

// QuantizeLinear to float8e4m3fn of a whole tensor laid out as `layout` says;
// `scale` holds layout.num_params() values.
void QuantizeLinearFp8Ref(const float* x, const QuantParamLayout& layout, const float* scale, bool saturate,
                          uint8_t* y);
// DequantizeLinear from float8e4m3fn: y = float32(x) * scale per element.
void DequantizeLinearFp8Ref(const uint8_t* x, const QuantParamLayout& layout, const float* scale, float* y);
// DequantizeLinear(QuantizeLinear(x)) with one per-tensor scale and
// saturate=1, the pair the FP8 QDQ quantizer writes around an activation:
// y = float32(Float8E4M3(x / scale)) * scale. The spec of the
// fake_quant_fp8_f32 rows.
void FakeQuantFp8Ref(const float* x, int64_t n, float scale, float* y);

}  // namespace sparq
