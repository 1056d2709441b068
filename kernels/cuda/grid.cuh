// The launch geometry the CUDA backend's own kernels share (elementwise.cu,
// elementwise_f16.cu, logic.cu, nn.cu): blocks of kThreads threads, at most
// kMaxBlocks blocks of a grid-stride loop, and the block-wide sum in double
// of the row kernels (softmax, layer norm, global average). CUDA only: the
// per-element bodies the loops call are in the CUDA-free device_*.h headers.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace sparq {
namespace cuda {
namespace grid {

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = 65535;
static_assert(kThreads % 32 == 0 && kThreads <= 1024, "block size must be whole warps within the limit");
static_assert((kThreads & (kThreads - 1)) == 0, "the block reductions halve the block: a power of two");

// Blocks for a grid-stride loop over n elements: at least 1, at most kMaxBlocks.
inline unsigned BlocksFor(int64_t n) {
  const int64_t b = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(b < 1 ? 1 : (b > kMaxBlocks ? kMaxBlocks : b));
}

// The sum of every thread's v over the block (shared: kThreads doubles), the
// same halving tree in every kernel; shared is free again on return.
__device__ inline double BlockSum(double v, double* shared) {
  shared[threadIdx.x] = v;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) shared[threadIdx.x] += shared[threadIdx.x + s];
    __syncthreads();
  }
  const double total = shared[0];
  __syncthreads();  // shared is reused by the next sum
  return total;
}

}  // namespace grid
}  // namespace cuda
}  // namespace sparq

// for (i = this thread's first element; i < n; i += the grid's threads)
#define SPARQ_GRID_STRIDE(i, n) \
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < (n); i += static_cast<int64_t>(blockDim.x) * gridDim.x)
