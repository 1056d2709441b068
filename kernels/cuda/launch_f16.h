// The CUDA backend's float16-only kernels (elementwise_f16.cu), as host
// functions that launch them on a stream, like launch.h's (whose float
// launchers, templates over float and Half, serve float16 too): each checks its arguments,
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

// Cast with float16 on one side (CastHalfElement; from / to: CastType codes or kCastF16).
Status LaunchCastF16(const void* x, int from, void* y, int to, int64_t n, cudaStream_t stream);
// y [batch, channels, pixels] = bias[channel]: the C a GEMM adds with beta = 1.
Status LaunchChannelBiasF16(const Half* bias, Half* y, int64_t batch, int64_t channels, int64_t pixels,
                            cudaStream_t stream);
// sparq.RoundToFloat16 of float32 values: y = float(half(x)) (executors that lower float16 to float32).
Status LaunchRoundToF16F32(const float* x, float* y, int64_t n, cudaStream_t stream);

}  // namespace cuda
}  // namespace sparq
