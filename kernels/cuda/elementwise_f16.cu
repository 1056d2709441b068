// The float16-only kernels of the CUDA backend (launch_f16.h): casts, the
// channel bias a float16 GEMM adds as its C, and sparq.RoundToFloat16. The
// float kernels float16 shares with float32 (unary, binary, softmax, layer
// norm, reductions, pooling, depthwise conv) are elementwise.cu's and nn.cu's
// templates over the element type.
#include <cuda_runtime.h>

#include <string>

#include "kernels/cuda/cuda_status.h"
#include "kernels/cuda/grid.cuh"
#include "kernels/cuda/launch_f16.h"

namespace sparq {
namespace cuda {
namespace {

using grid::BlocksFor;
using grid::kThreads;

__global__ void CastF16Kernel(const void* x, int from, void* y, int to, int64_t n) {
  SPARQ_GRID_STRIDE(i, n) { CastHalfElement(i, x, from, y, to); }
}

__global__ void ChannelBiasF16Kernel(const Half* __restrict__ bias, Half* __restrict__ y, int64_t channels,
                                     int64_t pixels, int64_t n) {
  SPARQ_GRID_STRIDE(i, n) { y[i] = ChannelBiasHalfElement(i, bias, channels, pixels); }
}

__global__ void RoundToF16F32Kernel(const float* x, float* y, int64_t n) {
  SPARQ_GRID_STRIDE(i, n) { y[i] = HalfToFloatValue(FloatToHalfValue(x[i])); }
}

}  // namespace

Status LaunchCastF16(const void* x, int from, void* y, int to, int64_t n, cudaStream_t stream) {
  if (n <= 0) return Status::OK();
  if (from != kCastF16 && to != kCastF16) return Status::InvalidArgument("LaunchCastF16: neither side is float16");
  CastF16Kernel<<<BlocksFor(n), kThreads, 0, stream>>>(x, from, y, to, n);
  SPARQ_CUDA_RETURN_IF_LAUNCH_ERROR("CastF16Kernel");
  return Status::OK();
}

Status LaunchChannelBiasF16(const Half* bias, Half* y, int64_t batch, int64_t channels, int64_t pixels,
                            cudaStream_t stream) {
  const int64_t n = batch * channels * pixels;
  if (n <= 0) return Status::OK();
  ChannelBiasF16Kernel<<<BlocksFor(n), kThreads, 0, stream>>>(bias, y, channels, pixels, n);
  SPARQ_CUDA_RETURN_IF_LAUNCH_ERROR("ChannelBiasF16Kernel");
  return Status::OK();
}

Status LaunchRoundToF16F32(const float* x, float* y, int64_t n, cudaStream_t stream) {
  if (n <= 0) return Status::OK();
  RoundToF16F32Kernel<<<BlocksFor(n), kThreads, 0, stream>>>(x, y, n);
  SPARQ_CUDA_RETURN_IF_LAUNCH_ERROR("RoundToF16F32Kernel");
  return Status::OK();
}

}  // namespace cuda
}  // namespace sparq
