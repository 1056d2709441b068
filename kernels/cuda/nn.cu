// Convolution helpers and pooling kernels of the CUDA backend (launch.h), NCHW.
#include <string>

#include "kernels/cuda/cuda_status.h"
#include "kernels/cuda/grid.cuh"
#include "kernels/cuda/launch.h"

namespace sparq {
namespace cuda {
namespace {

using grid::BlockSum;
using grid::BlocksFor;
using grid::kThreads;

template <typename T>
__global__ void Im2ColKernel(const T* __restrict__ x, T* __restrict__ col, T pad, Conv2dGeometry g) {
  SPARQ_GRID_STRIDE(i, g.pixels() * g.patch()) { col[i] = Im2ColValue<T>(i, x, pad, g); }
}

// The float kernels (DepthwiseConvKernel, Pool2dKernel, GlobalAveragePoolKernel)
// are templates over the element type, float or Half: float32 inside each
// thread, one rounding on the store.
template <typename T>
__global__ void DepthwiseConvKernel(const T* __restrict__ x, const T* __restrict__ w, const T* __restrict__ bias,
                                    T* __restrict__ y, Conv2dGeometry g) {
  SPARQ_GRID_STRIDE(i, g.batch * g.channels * g.pixels()) { StoreF32(y, i, DepthwiseConvValue(i, x, w, bias, g)); }
}

__global__ void DepthwiseConvS8Kernel(DepthwiseS8Args a, uint8_t* __restrict__ y, Conv2dGeometry g) {
  SPARQ_GRID_STRIDE(i, g.batch * g.channels * g.pixels()) { y[i] = DepthwiseS8Element(i, a, g); }
}

__global__ void AddChannelBiasKernel(float* __restrict__ y, const float* __restrict__ bias, int64_t channels,
                                     int64_t pixels, int64_t n) {
  SPARQ_GRID_STRIDE(i, n) { y[i] += bias[(i / pixels) % channels]; }
}

template <bool kMax, typename T>
__global__ void Pool2dKernel(const T* __restrict__ x, T* __restrict__ y, Pool2dGeometry g) {
  SPARQ_GRID_STRIDE(i, g.planes * g.out_height * g.out_width) { StoreF32(y, i, Pool2dValue<kMax>(i, x, g)); }
}

template <typename T>
__global__ void MaxPool2dIntKernel(const T* __restrict__ x, T* __restrict__ y, Pool2dGeometry g) {
  SPARQ_GRID_STRIDE(i, g.planes * g.out_height * g.out_width) { y[i] = MaxPool2dIntValue<T>(i, x, g); }
}

// One block per plane.
template <typename T>
__global__ void GlobalAveragePoolKernel(const T* __restrict__ x, T* __restrict__ y, int64_t hw) {
  __shared__ double shared[kThreads];
  const T* p = x + blockIdx.x * hw;
  double s = 0.0;
  for (int64_t i = threadIdx.x; i < hw; i += blockDim.x) s += static_cast<double>(LoadF32(p, i));
  const double total = BlockSum(s, shared);
  if (threadIdx.x == 0) StoreF32(y, blockIdx.x, static_cast<float>(total / static_cast<double>(hw)));
}

// 16 x 16 tiles through shared memory.
constexpr int kTile = 16;
static_assert(kTile * kTile <= 1024 && (kTile * kTile) % 32 == 0, "a tile is one block of whole warps");
__global__ void GemmS8S32NaiveKernel(const int8_t* __restrict__ a, const int8_t* __restrict__ b, int32_t* __restrict__ acc,
                                     int64_t m, int64_t n, int64_t k) {
  __shared__ int32_t ta[kTile][kTile + 1];
  __shared__ int32_t tb[kTile][kTile + 1];
  const int64_t row = blockIdx.y * static_cast<int64_t>(kTile) + threadIdx.y;
  const int64_t col = blockIdx.x * static_cast<int64_t>(kTile) + threadIdx.x;
  int32_t sum = 0;
  for (int64_t k0 = 0; k0 < k; k0 += kTile) {
    const int64_t ka = k0 + threadIdx.x;
    ta[threadIdx.y][threadIdx.x] = row < m && ka < k ? a[row * k + ka] : 0;
    const int64_t bcol = blockIdx.x * static_cast<int64_t>(kTile) + threadIdx.y;  // b row (= output column)
    tb[threadIdx.y][threadIdx.x] = bcol < n && k0 + threadIdx.x < k ? b[bcol * k + k0 + threadIdx.x] : 0;
    __syncthreads();
    for (int j = 0; j < kTile; ++j) sum += ta[threadIdx.y][j] * tb[threadIdx.x][j];
    __syncthreads();
  }
  if (row < m && col < n) acc[row * n + col] = sum;
}

}  // namespace

Status LaunchIm2Col(const void* x, void* col, int elem_size, uint32_t pad_bits, const Conv2dGeometry& g,
                    cudaStream_t stream) {
  const int64_t n = g.pixels() * g.patch();
  if (n <= 0) return Status::OK();
  const unsigned blocks = BlocksFor(n);
  switch (elem_size) {
    case 1:
      Im2ColKernel<int8_t><<<blocks, kThreads, 0, stream>>>(static_cast<const int8_t*>(x), static_cast<int8_t*>(col),
                                                            static_cast<int8_t>(pad_bits & 0xff), g);
      break;
    case 2:
      Im2ColKernel<uint16_t><<<blocks, kThreads, 0, stream>>>(static_cast<const uint16_t*>(x),
                                                              static_cast<uint16_t*>(col),
                                                              static_cast<uint16_t>(pad_bits & 0xffff), g);
      break;
    case 4:
      Im2ColKernel<uint32_t><<<blocks, kThreads, 0, stream>>>(static_cast<const uint32_t*>(x),
                                                              static_cast<uint32_t*>(col), pad_bits, g);
      break;
    default: return Status::NotSupported("im2col of " + std::to_string(elem_size) + "-byte elements");
  }
  SPARQ_CUDA_RETURN_IF_LAUNCH_ERROR("Im2ColKernel");
  return Status::OK();
}

template <typename T>
Status LaunchDepthwiseConv(const T* x, const T* w, const T* bias, T* y, const Conv2dGeometry& g, cudaStream_t stream) {
  const int64_t n = g.batch * g.channels * g.pixels();
  if (n <= 0) return Status::OK();
  DepthwiseConvKernel<T><<<BlocksFor(n), kThreads, 0, stream>>>(x, w, bias, y, g);
  SPARQ_CUDA_RETURN_IF_LAUNCH_ERROR("DepthwiseConvKernel");
  return Status::OK();
}

Status LaunchDepthwiseConvS8(const DepthwiseS8Args& args, void* y, const Conv2dGeometry& g, cudaStream_t stream) {
  const int64_t n = g.batch * g.channels * g.pixels();
  if (n <= 0) return Status::OK();
  if (args.x == nullptr || args.w == nullptr || args.multiplier == nullptr) {
    return Status::InvalidArgument("depthwise INT8 conv: x, w and multipliers are required");
  }
  DepthwiseConvS8Kernel<<<BlocksFor(n), kThreads, 0, stream>>>(args, static_cast<uint8_t*>(y), g);
  SPARQ_CUDA_RETURN_IF_LAUNCH_ERROR("DepthwiseConvS8Kernel");
  return Status::OK();
}

Status LaunchAddChannelBiasF32(float* y, const float* bias, int64_t batch, int64_t channels, int64_t pixels,
                               cudaStream_t stream) {
  const int64_t n = batch * channels * pixels;
  if (n <= 0) return Status::OK();
  AddChannelBiasKernel<<<BlocksFor(n), kThreads, 0, stream>>>(y, bias, channels, pixels, n);
  SPARQ_CUDA_RETURN_IF_LAUNCH_ERROR("AddChannelBiasKernel");
  return Status::OK();
}

template <typename T>
Status LaunchPool2d(bool max, const T* x, T* y, const Pool2dGeometry& g, cudaStream_t stream) {
  const int64_t n = g.planes * g.out_height * g.out_width;
  if (n <= 0) return Status::OK();
  if (max) {
    Pool2dKernel<true, T><<<BlocksFor(n), kThreads, 0, stream>>>(x, y, g);
  } else {
    Pool2dKernel<false, T><<<BlocksFor(n), kThreads, 0, stream>>>(x, y, g);
  }
  SPARQ_CUDA_RETURN_IF_LAUNCH_ERROR("Pool2dKernel");
  return Status::OK();
}

Status LaunchMaxPool2dS8(const void* x, bool is_signed, void* y, const Pool2dGeometry& g, cudaStream_t stream) {
  const int64_t n = g.planes * g.out_height * g.out_width;
  if (n <= 0) return Status::OK();
  if (is_signed) {
    MaxPool2dIntKernel<int8_t><<<BlocksFor(n), kThreads, 0, stream>>>(static_cast<const int8_t*>(x), static_cast<int8_t*>(y), g);
  } else {
    MaxPool2dIntKernel<uint8_t><<<BlocksFor(n), kThreads, 0, stream>>>(static_cast<const uint8_t*>(x), static_cast<uint8_t*>(y), g);
  }
  SPARQ_CUDA_RETURN_IF_LAUNCH_ERROR("MaxPool2dIntKernel");
  return Status::OK();
}

template <typename T>
Status LaunchGlobalAveragePool(const T* x, T* y, int64_t planes, int64_t hw, cudaStream_t stream) {
  if (planes <= 0) return Status::OK();
  if (hw <= 0) return Status::InvalidArgument("GlobalAveragePool of an empty plane");
  if (planes > 0x7fffffffLL) return Status::NotSupported("GlobalAveragePool of more than 2^31 planes");
  GlobalAveragePoolKernel<T><<<static_cast<unsigned>(planes), kThreads, 0, stream>>>(x, y, hw);
  SPARQ_CUDA_RETURN_IF_LAUNCH_ERROR("GlobalAveragePoolKernel");
  return Status::OK();
}

Status LaunchGemmS8S32Naive(const int8_t* a, const int8_t* b, int32_t* acc, int64_t m, int64_t n, int64_t k,
                            cudaStream_t stream) {
  if (m <= 0 || n <= 0) return Status::OK();
  const int64_t gx = (n + kTile - 1) / kTile, gy = (m + kTile - 1) / kTile;
  if (gx > 0x7fffffffLL || gy > 65535) return Status::NotSupported("INT8 GEMM fallback of " + std::to_string(m) + " rows");
  GemmS8S32NaiveKernel<<<dim3(static_cast<unsigned>(gx), static_cast<unsigned>(gy)), dim3(kTile, kTile), 0, stream>>>(
      a, b, acc, m, n, k);
  SPARQ_CUDA_RETURN_IF_LAUNCH_ERROR("GemmS8S32NaiveKernel");
  return Status::OK();
}

// The float launchers' two element types.
#define SPARQ_FLOAT_LAUNCHERS(T)                                                                                  \
  template Status LaunchDepthwiseConv<T>(const T*, const T*, const T*, T*, const Conv2dGeometry&, cudaStream_t);  \
  template Status LaunchPool2d<T>(bool, const T*, T*, const Pool2dGeometry&, cudaStream_t);                       \
  template Status LaunchGlobalAveragePool<T>(const T*, T*, int64_t, int64_t, cudaStream_t);
SPARQ_FLOAT_LAUNCHERS(float)
SPARQ_FLOAT_LAUNCHERS(Half)
#undef SPARQ_FLOAT_LAUNCHERS

}  // namespace cuda
}  // namespace sparq
