// The CUDA backend's float16 kernels (elementwise_f16.cu), as host functions
// that launch them on a stream, like launch.h's: each checks its arguments,
// launches, returns the launch's Status and never synchronizes. Per-element
// arithmetic is device_f16.h's: float32 inside each thread, one rounding to
// float16 per output. Pointers are device pointers.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/cuda/device_f16.h"
#include "sparq/status.h"

namespace sparq {
namespace cuda {

// y[i] = op(x[i]) (y may be x); lo / hi: kClip's bounds.
Status LaunchUnaryF16(HalfUnaryOp op, const Half* x, Half* y, int64_t n, float lo, float hi, cudaStream_t stream);
// y = a op b, numpy broadcasting (PlanBroadcast); op: 0 add, 1 sub, 2 mul, 3 div. y may be a.
Status LaunchBinaryF16(int op, const Half* a, const Half* b, Half* y, const BroadcastPlan& plan, cudaStream_t stream);
// Softmax over the last dimension of `rows` rows of n halves (one block per row).
Status LaunchSoftmaxRowsF16(const Half* x, Half* y, int64_t rows, int64_t n, cudaStream_t stream);
// LayerNormalization of `rows` rows of n halves; scale [n], bias [n] or null.
Status LaunchLayerNormRowsF16(const Half* x, const Half* scale, const Half* bias, double eps, int64_t rows, int64_t n,
                              Half* y, cudaStream_t stream);
// Cast with float16 on one side (CastHalfElement; from / to: CastType codes or kCastF16).
Status LaunchCastF16(const void* x, int from, void* y, int to, int64_t n, cudaStream_t stream);
// Depthwise convolution of float16 (group = C, weights [C, 1, kh, kw]), bias [C] or null.
Status LaunchDepthwiseConvF16(const Half* x, const Half* w, const Half* bias, Half* y, const Conv2dGeometry& g,
                              cudaStream_t stream);
// MaxPool (max) or AveragePool of float16 planes.
Status LaunchPool2dF16(bool max, const Half* x, Half* y, const Pool2dGeometry& g, cudaStream_t stream);
// y[p] = mean of the float16 plane p (sum in double), rounded once.
Status LaunchGlobalAveragePoolF16(const Half* x, Half* y, int64_t planes, int64_t hw, cudaStream_t stream);
// y [batch, channels, pixels] = bias[channel]: the C a GEMM adds with beta = 1.
Status LaunchChannelBiasF16(const Half* bias, Half* y, int64_t batch, int64_t channels, int64_t pixels,
                            cudaStream_t stream);
// sparq.RoundToFloat16 of float32 values: y = float(half(x)) (executors that lower float16 to float32).
Status LaunchRoundToF16F32(const float* x, float* y, int64_t n, cudaStream_t stream);

}  // namespace cuda
}  // namespace sparq
