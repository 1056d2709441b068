// Float32 BatchNormalization (inference), LayerNormalization and strided
// ConvTranspose rows of the dispatch table (dispatch.h), all the reference's
// bits (kernels/ref/norm.cc, kernels/ref/conv.cc):
//
//   scale_shift_f32  y = x * a + b over a row, one float multiply and one
//                    float add per value (never fused: this file is built
//                    with -ffp-contract=off), as the reference's
//                    BatchNormalization applies its per-channel a and b.
//   layer_norm_f32   rows of n values normalized as the reference does: mean
//                    and variance summed in order in double (several rows
//                    interleaved so that the sums overlap; avx512: eight
//                    rows in the lanes of a register), each value computed
//                    in double and rounded once.
//   layer_norm_chain_f32  sparq.LayerNormChain (LayerNorm as exported below
//                    opset 17: ReduceMean, Sub, Pow 2, ReduceMean, Add, Sqrt,
//                    Div, Mul, Add, fused by runtime/passes/float_fusion.h):
//                    one pass per row for the mean, one for the squares, one
//                    for the output, each value through the unfused nodes'
//                    float operations (avx512: the sums of eight rows in the
//                    double lanes of a register, as layer_norm_f32's).
//   conv_transpose_f32  a ConvTranspose whose stride equals its kernel
//                    (ConvTransposeF32Args), e.g. the 2x2 / stride 2
//                    upsampling of PP-OCR's detector head.
//
// Every result depends only on its own row: the same bits for any thread count.
#pragma once

#include <cstdint>

#include "kernels/cpu/internal.h"  // SPARQ_CPU_X86
#include "kernels/cpu/kernel_args.h"

namespace sparq {
namespace cpu {

void ScaleShiftRowPortable(const float* x, float* y, int64_t n, float a, float b);  // ScaleShiftF32Fn
#if SPARQ_CPU_X86
void ScaleShiftRowAvx512(const float* x, float* y, int64_t n, float a, float b);  // norm_f32_avx512.cc
#endif
// conv_transpose_f32.cc (ConvTransposeF32Fn): the loops of
// conv_transpose_f32.inc compiled for each ISA.
void ConvTransposeF32Portable(const ConvTransposeF32Args& args);
#if SPARQ_CPU_X86
void ConvTransposeF32Avx2(const ConvTransposeF32Args& args);
void ConvTransposeF32Avx512(const ConvTransposeF32Args& args);
#endif
// resize_nearest.cc (ResizeNearestFn).
void ResizeNearestPortable(const ResizeNearestArgs& args);
void LayerNormRowsPortable(const float* x, int64_t rows, int64_t n, const double* scale, const double* bias,
                           double epsilon, float* y);  // LayerNormF32Fn
// LayerNormChainF32Fn: eight rows' in-order double sums interleaved.
void LayerNormChainRowsPortable(const float* x, int64_t rows, int64_t n, float epsilon, const float* gamma,
                                const float* beta, float* y);
#if SPARQ_CPU_X86
// LayerNormChainF32Fn: blocks of eight rows as layer_norm_f32_avx512 sums
// them (the squares rounded to float first), the per-value steps 16 lanes a step.
void LayerNormChainRowsAvx512(const float* x, int64_t rows, int64_t n, float epsilon, const float* gamma,
                              const float* beta, float* y);
// norm_f32_avx512.cc: eight rows in the double lanes, the same in-order sums.
void LayerNormRowsAvx512(const float* x, int64_t rows, int64_t n, const double* scale, const double* bias,
                         double epsilon, float* y);
void LayerNormRowsAvx2(const float* x, int64_t rows, int64_t n, const double* scale, const double* bias,
                       double epsilon, float* y);
#endif

}  // namespace cpu
}  // namespace sparq
