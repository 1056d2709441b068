// Float32 BatchNormalization (inference) and LayerNormalization rows of the
// dispatch table (dispatch.h), both the reference's bits (kernels/ref/norm.cc):
//
//   scale_shift_f32  y = x * a + b over a row, one float multiply and one
//                    float add per value (never fused: this file is built
//                    with -ffp-contract=off), as the reference's
//                    BatchNormalization applies its per-channel a and b.
//   layer_norm_f32   rows of n values normalized as the reference does: mean
//                    and variance summed in order in double (several rows
//                    interleaved so that the sums overlap), each value
//                    computed in double and rounded once.
//
// Every result depends only on its own row: the same bits for any thread count.
#pragma once

#include <cstdint>

namespace sparq {
namespace cpu {

void ScaleShiftRowPortable(const float* x, float* y, int64_t n, float a, float b);  // ScaleShiftF32Fn
void LayerNormRowsPortable(const float* x, int64_t rows, int64_t n, const double* scale, const double* bias,
                           double epsilon, float* y);  // LayerNormF32Fn

}  // namespace cpu
}  // namespace sparq
