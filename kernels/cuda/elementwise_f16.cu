// The float16 kernels of the CUDA backend (launch_f16.h): each thread loads
// float16 bits, computes in float32 (device_f16.h, the host tests' bodies) and
// rounds once. Row reductions (softmax, layer norm, global average) split the
// float32 bodies' passes over a block, sums in double as theirs.
#include <cuda_runtime.h>

#include <string>

#include "kernels/cuda/cuda_status.h"
#include "kernels/cuda/launch_f16.h"

namespace sparq {
namespace cuda {
namespace {

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = 65535;
static_assert((kThreads & (kThreads - 1)) == 0 && kThreads <= 1024, "the block reductions halve the block");

unsigned BlocksFor(int64_t n) {
  const int64_t b = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(b < 1 ? 1 : (b > kMaxBlocks ? kMaxBlocks : b));
}

#define SPARQ_GRID_STRIDE(i, n) \
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < (n); i += static_cast<int64_t>(blockDim.x) * gridDim.x)

// Not __restrict__: rows may run in place.
__global__ void UnaryF16Kernel(HalfUnaryOp op, const Half* x, Half* y, int64_t n, float lo, float hi) {
  SPARQ_GRID_STRIDE(i, n) { y[i] = HalfUnaryElement(op, x[i], lo, hi); }
}

__global__ void BinaryF16Kernel(int op, const Half* a, const Half* b, Half* y, BroadcastPlan plan) {
  SPARQ_GRID_STRIDE(i, plan.numel) { y[i] = HalfBinaryElement(i, op, a, b, plan); }
}

__device__ double BlockSumF16(double v, double* shared) {
  shared[threadIdx.x] = v;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) shared[threadIdx.x] += shared[threadIdx.x + s];
    __syncthreads();
  }
  const double total = shared[0];
  __syncthreads();
  return total;
}

// SoftmaxRowHalf over a block: the row's max, the sum of exp in double, then
// each exp again divided by the sum and rounded once.
__global__ void SoftmaxRowsF16Kernel(const Half* __restrict__ x, Half* __restrict__ y, int64_t n) {
  __shared__ float smax[kThreads];
  __shared__ double ssum[kThreads];
  const Half* row = x + blockIdx.x * n;
  Half* out = y + blockIdx.x * n;
  const float first = LoadF32(row, 0);
  float m = first;
  for (int64_t k = threadIdx.x; k < n; k += blockDim.x) {
    const float v = LoadF32(row, k);
    m = v > m ? v : m;
  }
  smax[threadIdx.x] = m;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) smax[threadIdx.x] = smax[threadIdx.x + s] > smax[threadIdx.x] ? smax[threadIdx.x + s] : smax[threadIdx.x];
    __syncthreads();
  }
  const float row_max = first != first ? first : smax[0];
  double sum = 0.0;
  for (int64_t k = threadIdx.x; k < n; k += blockDim.x) sum += static_cast<double>(expf(LoadF32(row, k) - row_max));
  const double total = BlockSumF16(sum, ssum);
  for (int64_t k = threadIdx.x; k < n; k += blockDim.x) {
    StoreF32(out, k, static_cast<float>(static_cast<double>(expf(LoadF32(row, k) - row_max)) / total));
  }
}

__global__ void LayerNormRowsF16Kernel(const Half* __restrict__ x, const Half* __restrict__ scale,
                                       const Half* __restrict__ bias, double eps, int64_t n, Half* __restrict__ y) {
  __shared__ double shared[kThreads];
  const Half* row = x + blockIdx.x * n;
  Half* out = y + blockIdx.x * n;
  double s = 0.0;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) s += static_cast<double>(LoadF32(row, i));
  const double m = BlockSumF16(s, shared) / static_cast<double>(n);
  double q = 0.0;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    const double d = static_cast<double>(LoadF32(row, i)) - m;
    q += d * d;
  }
  const double v = BlockSumF16(q, shared) / static_cast<double>(n);
  const double inv = 1.0 / sqrt(v + eps);
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    const double b = bias != nullptr ? static_cast<double>(LoadF32(bias, i)) : 0.0;
    StoreF32(out, i, static_cast<float>(__dadd_rn(__dmul_rn(__dmul_rn(static_cast<double>(LoadF32(row, i)) - m, inv),
                                                            static_cast<double>(LoadF32(scale, i))), b)));
  }
}

__global__ void CastF16Kernel(const void* x, int from, void* y, int to, int64_t n) {
  SPARQ_GRID_STRIDE(i, n) { CastHalfElement(i, x, from, y, to); }
}

__global__ void DepthwiseConvF16Kernel(const Half* __restrict__ x, const Half* __restrict__ w,
                                       const Half* __restrict__ bias, Half* __restrict__ y, Conv2dGeometry g) {
  SPARQ_GRID_STRIDE(i, g.batch * g.channels * g.pixels()) { y[i] = DepthwiseConvHalfElement(i, x, w, bias, g); }
}

template <bool kMax>
__global__ void Pool2dF16Kernel(const Half* __restrict__ x, Half* __restrict__ y, Pool2dGeometry g) {
  SPARQ_GRID_STRIDE(i, g.planes * g.out_height * g.out_width) { y[i] = Pool2dHalfElement<kMax>(i, x, g); }
}

__global__ void GlobalAveragePoolF16Kernel(const Half* __restrict__ x, Half* __restrict__ y, int64_t hw) {
  __shared__ double shared[kThreads];
  const Half* p = x + blockIdx.x * hw;
  double s = 0.0;
  for (int64_t i = threadIdx.x; i < hw; i += blockDim.x) s += static_cast<double>(LoadF32(p, i));
  const double total = BlockSumF16(s, shared);
  if (threadIdx.x == 0) StoreF32(y, blockIdx.x, static_cast<float>(total / static_cast<double>(hw)));
}

__global__ void ChannelBiasF16Kernel(const Half* __restrict__ bias, Half* __restrict__ y, int64_t channels,
                                     int64_t pixels, int64_t n) {
  SPARQ_GRID_STRIDE(i, n) { y[i] = ChannelBiasHalfElement(i, bias, channels, pixels); }
}

__global__ void RoundToF16F32Kernel(const float* x, float* y, int64_t n) {
  SPARQ_GRID_STRIDE(i, n) { y[i] = HalfToFloatValue(FloatToHalfValue(x[i])); }
}

}  // namespace

Status LaunchUnaryF16(HalfUnaryOp op, const Half* x, Half* y, int64_t n, float lo, float hi, cudaStream_t stream) {
  if (n <= 0) return Status::OK();
  UnaryF16Kernel<<<BlocksFor(n), kThreads, 0, stream>>>(op, x, y, n, lo, hi);
  SPARQ_CUDA_RETURN_IF_LAUNCH_ERROR("UnaryF16Kernel");
  return Status::OK();
}

Status LaunchBinaryF16(int op, const Half* a, const Half* b, Half* y, const BroadcastPlan& plan, cudaStream_t stream) {
  if (plan.numel <= 0) return Status::OK();
  if (op < 0 || op > 3) return Status::InvalidArgument("LaunchBinaryF16: op " + std::to_string(op));
  BinaryF16Kernel<<<BlocksFor(plan.numel), kThreads, 0, stream>>>(op, a, b, y, plan);
  SPARQ_CUDA_RETURN_IF_LAUNCH_ERROR("BinaryF16Kernel");
  return Status::OK();
}

Status LaunchSoftmaxRowsF16(const Half* x, Half* y, int64_t rows, int64_t n, cudaStream_t stream) {
  if (rows <= 0 || n <= 0) return Status::OK();
  if (rows > 0x7fffffffLL) return Status::NotSupported("Softmax of more than 2^31 rows");
  SoftmaxRowsF16Kernel<<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(x, y, n);
  SPARQ_CUDA_RETURN_IF_LAUNCH_ERROR("SoftmaxRowsF16Kernel");
  return Status::OK();
}

Status LaunchLayerNormRowsF16(const Half* x, const Half* scale, const Half* bias, double eps, int64_t rows, int64_t n,
                              Half* y, cudaStream_t stream) {
  if (rows <= 0 || n <= 0) return Status::OK();
  if (rows > 0x7fffffffLL) return Status::NotSupported("LayerNormalization of more than 2^31 rows");
  LayerNormRowsF16Kernel<<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(x, scale, bias, eps, n, y);
  SPARQ_CUDA_RETURN_IF_LAUNCH_ERROR("LayerNormRowsF16Kernel");
  return Status::OK();
}

Status LaunchCastF16(const void* x, int from, void* y, int to, int64_t n, cudaStream_t stream) {
  if (n <= 0) return Status::OK();
  if (from != kCastF16 && to != kCastF16) return Status::InvalidArgument("LaunchCastF16: neither side is float16");
  CastF16Kernel<<<BlocksFor(n), kThreads, 0, stream>>>(x, from, y, to, n);
  SPARQ_CUDA_RETURN_IF_LAUNCH_ERROR("CastF16Kernel");
  return Status::OK();
}

Status LaunchDepthwiseConvF16(const Half* x, const Half* w, const Half* bias, Half* y, const Conv2dGeometry& g,
                              cudaStream_t stream) {
  const int64_t n = g.batch * g.channels * g.pixels();
  if (n <= 0) return Status::OK();
  DepthwiseConvF16Kernel<<<BlocksFor(n), kThreads, 0, stream>>>(x, w, bias, y, g);
  SPARQ_CUDA_RETURN_IF_LAUNCH_ERROR("DepthwiseConvF16Kernel");
  return Status::OK();
}

Status LaunchPool2dF16(bool max, const Half* x, Half* y, const Pool2dGeometry& g, cudaStream_t stream) {
  const int64_t n = g.planes * g.out_height * g.out_width;
  if (n <= 0) return Status::OK();
  if (max) {
    Pool2dF16Kernel<true><<<BlocksFor(n), kThreads, 0, stream>>>(x, y, g);
  } else {
    Pool2dF16Kernel<false><<<BlocksFor(n), kThreads, 0, stream>>>(x, y, g);
  }
  SPARQ_CUDA_RETURN_IF_LAUNCH_ERROR("Pool2dF16Kernel");
  return Status::OK();
}

Status LaunchGlobalAveragePoolF16(const Half* x, Half* y, int64_t planes, int64_t hw, cudaStream_t stream) {
  if (planes <= 0) return Status::OK();
  if (hw <= 0) return Status::InvalidArgument("GlobalAveragePool of an empty plane");
  if (planes > 0x7fffffffLL) return Status::NotSupported("GlobalAveragePool of more than 2^31 planes");
  GlobalAveragePoolF16Kernel<<<static_cast<unsigned>(planes), kThreads, 0, stream>>>(x, y, hw);
  SPARQ_CUDA_RETURN_IF_LAUNCH_ERROR("GlobalAveragePoolF16Kernel");
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
