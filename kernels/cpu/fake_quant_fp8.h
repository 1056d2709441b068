// The fast row of sparq.FakeQuantFp8 (kernels/ref/quant_fp8_ops.h): FP8 E4M3
// fake quantization of a float32 row, bit for bit FakeQuantFp8Ref.
#pragma once

#include <cstdint>

namespace sparq {
namespace cpu {

// y[i] = float32(Float8E4M3(x[i] / scale, saturate)) * scale for i < n,
// branch-free on the float bits (the compiler vectorizes it): NaN stays NaN.
void FakeQuantFp8Row(int64_t n, const float* x, float scale, float* y);

}  // namespace cpu
}  // namespace sparq
