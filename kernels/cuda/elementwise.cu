// Elementwise, normalization, quantization and layout kernels of the CUDA
// backend (launch.h). Per-element arithmetic comes from device_math.h.
#include <cuda_fp16.h>
#include <math_constants.h>

#include <algorithm>
#include <limits>
#include <string>

#include "kernels/cuda/cuda_status.h"
#include "kernels/cuda/device_kernels.h"
#include "kernels/cuda/grid.cuh"
#include "kernels/cuda/launch.h"

namespace sparq {
namespace cuda {
namespace {

using grid::BlockSum;
using grid::BlocksFor;
using grid::kThreads;

// The float kernels below are templates over the element type (float or
// Half): float32 inside each thread (LoadF32), one rounding on the store
// (StoreF32); instantiated for both by the launchers at the end.

// Not __restrict__: rows run it in place (y == x).
template <typename T>
__global__ void UnaryKernel(UnaryOp op, const T* x, T* y, int64_t n, float p0, float p1, float p2, float p3) {
  SPARQ_GRID_STRIDE(i, n) { StoreF32(y, i, UnaryValue(op, LoadF32(x, i), p0, p1, p2, p3)); }
}

// Not __restrict__: Gemm adds C in place (y == a).
template <typename T>
__global__ void BinaryKernel(BinaryOp op, const T* a, const T* b, T* y, BroadcastPlan plan) {
  if (plan.same_shape) {
    SPARQ_GRID_STRIDE(i, plan.numel) { StoreF32(y, i, BinaryValue(op, LoadF32(a, i), LoadF32(b, i))); }
  } else {
    SPARQ_GRID_STRIDE(i, plan.numel) { StoreF32(y, i, BinaryElement(i, op, a, b, plan)); }
  }
}

template <typename T>
__global__ void BinaryIntKernel(int op, const T* a, const T* b, T* y, BroadcastPlan plan) {
  SPARQ_GRID_STRIDE(i, plan.numel) {
    const int64_t ia = plan.same_shape ? i : BroadcastOffset(i, plan.rank, plan.dims, plan.a_strides);
    const int64_t ib = plan.same_shape ? i : BroadcastOffset(i, plan.rank, plan.dims, plan.b_strides);
    y[i] = IntBinary<T>(op, a[ia], b[ib]);
  }
}

// One block per row: the row's max (float), then the sum of exp in double,
// then the division in double, as SoftmaxRow does serially. float32 keeps
// each exp in y between the passes; float16 computes it again (an exp stored
// as float16 would round twice).
template <typename T>
__global__ void SoftmaxRowsKernel(const T* __restrict__ x, T* __restrict__ y, int64_t n) {
  constexpr bool kKeepExp = std::is_same<T, float>::value;
  __shared__ float smax[kThreads];
  __shared__ double ssum[kThreads];
  const T* row = x + blockIdx.x * n;
  T* out = y + blockIdx.x * n;
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
  // A NaN anywhere makes the reference's max NaN only when it is x[0]; either way every output is NaN then.
  const float row_max = first != first ? first : smax[0];
  double sum = 0.0;
  for (int64_t k = threadIdx.x; k < n; k += blockDim.x) {
    const float e = expf(LoadF32(row, k) - row_max);
    if (kKeepExp) StoreF32(out, k, e);
    sum += static_cast<double>(e);
  }
  const double total = BlockSum(sum, ssum);
  for (int64_t k = threadIdx.x; k < n; k += blockDim.x) {
    const float e = kKeepExp ? LoadF32(out, k) : expf(LoadF32(row, k) - row_max);
    StoreF32(out, k, static_cast<float>(static_cast<double>(e) / total));
  }
}

// One block per row: the two-pass mean and variance of LayerNormRow, in double.
template <typename T>
__global__ void LayerNormRowsKernel(const T* __restrict__ x, const T* __restrict__ scale, const T* __restrict__ bias,
                                    double eps, int64_t n, T* __restrict__ y) {
  __shared__ double shared[kThreads];
  const T* row = x + blockIdx.x * n;
  T* out = y + blockIdx.x * n;
  double s = 0.0;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) s += static_cast<double>(LoadF32(row, i));
  const double m = BlockSum(s, shared) / static_cast<double>(n);
  double q = 0.0;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    const double d = static_cast<double>(LoadF32(row, i)) - m;
    q += d * d;
  }
  const double v = BlockSum(q, shared) / static_cast<double>(n);
  const double inv = 1.0 / sqrt(v + eps);
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    const double b = bias != nullptr ? static_cast<double>(LoadF32(bias, i)) : 0.0;
    StoreF32(out, i, static_cast<float>(__dadd_rn(__dmul_rn(__dmul_rn(static_cast<double>(LoadF32(row, i)) - m, inv),
                                                            static_cast<double>(LoadF32(scale, i))), b)));
  }
}

template <typename T>
__global__ void QuantizeKernel(const float* __restrict__ x, T* __restrict__ y, int64_t n, const float* __restrict__ scale,
                               const int32_t* __restrict__ zp, int64_t axis_dim, int64_t inner) {
  SPARQ_GRID_STRIDE(i, n) {
    const int64_t p = (i / inner) % axis_dim;
    y[i] = QuantizeValue<T>(x[i], scale[p], zp != nullptr ? zp[p] : 0);
  }
}

template <typename T>
__global__ void DequantizeKernel(const T* __restrict__ x, float* __restrict__ y, int64_t n, const float* __restrict__ scale,
                                 const int32_t* __restrict__ zp, int64_t axis_dim, int64_t inner) {
  SPARQ_GRID_STRIDE(i, n) {
    const int64_t p = (i / inner) % axis_dim;
    y[i] = DequantizeValue(static_cast<int32_t>(x[i]), scale[p], zp != nullptr ? zp[p] : 0);
  }
}

template <typename T>
__global__ void RequantizeKernel(RequantArgs a) {
  T* out = static_cast<T*>(a.out);
  SPARQ_GRID_STRIDE(i, a.rows * a.cols) { out[i] = RequantizeElement<T>(i, a); }
}

__global__ void AccToFloatKernel(RequantArgs a, FloatEpilogue e, float* __restrict__ y) {
  SPARQ_GRID_STRIDE(i, a.rows * a.cols) { y[i] = AccToFloatElement(i, a, e); }
}

// DynamicQuantizeLinear: per-block ranges, then one block folds them and sets the parameters.
constexpr int kRangeBlocks = 256;

// A bound moves only for a value strictly beyond it (MinMaxRef): NaN is
// ignored and -0 never replaces +0, in any order of folding.
__device__ __forceinline__ void Widen(float v, float* lo, float* hi) {
  if (v < *lo) *lo = v;
  if (v > *hi) *hi = v;
}

__device__ void FoldRange(float* slo, float* shi, float lo, float hi) {
  slo[threadIdx.x] = lo;
  shi[threadIdx.x] = hi;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) {
      Widen(slo[threadIdx.x + s], &slo[threadIdx.x], &shi[threadIdx.x]);
      Widen(shi[threadIdx.x + s], &slo[threadIdx.x], &shi[threadIdx.x]);
    }
    __syncthreads();
  }
}

// Per-block ranges of x, each starting from [init_lo, init_hi] ([0, 0] for
// DynamicQuantizeLinear, which always includes 0; [+inf, -inf] for calibration).
__global__ void RangePartialKernel(const float* __restrict__ x, int64_t n, float* __restrict__ partial, float init_lo,
                                   float init_hi) {
  __shared__ float slo[kThreads], shi[kThreads];
  float lo = init_lo, hi = init_hi;
  SPARQ_GRID_STRIDE(i, n) { Widen(x[i], &lo, &hi); }
  FoldRange(slo, shi, lo, hi);
  if (threadIdx.x == 0) {
    partial[2 * blockIdx.x] = slo[0];
    partial[2 * blockIdx.x + 1] = shi[0];
  }
}

__global__ void DynamicParamsKernel(const float* __restrict__ partial, int blocks, float* scale, uint8_t* zero_point) {
  __shared__ float slo[kThreads], shi[kThreads];
  float lo = 0.0f, hi = 0.0f;
  for (int b = threadIdx.x; b < blocks; b += blockDim.x) {
    Widen(partial[2 * b], &lo, &hi);
    Widen(partial[2 * b + 1], &lo, &hi);
  }
  FoldRange(slo, shi, lo, hi);
  if (threadIdx.x == 0) {
    float s;
    int32_t z;
    DynamicQuantParamsU8(slo[0], shi[0], &s, &z);
    *scale = s;
    *zero_point = static_cast<uint8_t>(z);
  }
}

// Calibration: the per-block ranges folded into out[0] (least), out[1] (greatest).
__global__ void MinMaxFoldKernel(const float* __restrict__ partial, int blocks, float* __restrict__ out) {
  __shared__ float slo[kThreads], shi[kThreads];
  float lo = CUDART_INF_F, hi = -CUDART_INF_F;
  for (int b = threadIdx.x; b < blocks; b += blockDim.x) {
    Widen(partial[2 * b], &lo, &hi);
    Widen(partial[2 * b + 1], &lo, &hi);
  }
  FoldRange(slo, shi, lo, hi);
  if (threadIdx.x == 0) {
    out[0] = slo[0];
    out[1] = shi[0];
  }
}

__global__ void QuantizeDynamicKernel(const float* __restrict__ x, int64_t n, const float* scale,
                                      const uint8_t* zero_point, uint8_t* __restrict__ y) {
  const float s = *scale;
  const int32_t z = *zero_point;
  SPARQ_GRID_STRIDE(i, n) { y[i] = QuantizeValue<uint8_t>(x[i], s, z); }
}

__global__ void RowSumsS8Kernel(const int8_t* __restrict__ x, int64_t rows, int64_t k, int32_t* __restrict__ sums) {
  SPARQ_GRID_STRIDE(r, rows) {
    int32_t s = 0;
    const int8_t* row = x + r * k;
    for (int64_t j = 0; j < k; ++j) s += row[j];
    sums[r] = s;
  }
}

__global__ void ShiftU8ToS8Kernel(const uint8_t* __restrict__ x, int8_t* __restrict__ y, int64_t n) {
  SPARQ_GRID_STRIDE(i, n) { y[i] = static_cast<int8_t>(x[i] ^ 0x80u); }
}

template <typename T>
__global__ void PermuteKernel(const T* __restrict__ x, T* __restrict__ y, PermutePlan plan) {
  SPARQ_GRID_STRIDE(i, plan.numel) { y[i] = x[plan.base + BroadcastOffset(i, plan.rank, plan.out_dims, plan.in_strides)]; }
}

__global__ void QLinearBinaryKernel(const void* __restrict__ a, const void* __restrict__ b, uint8_t* __restrict__ y,
                                    BroadcastPlan plan, QLinearBinaryArgs q) {
  SPARQ_GRID_STRIDE(i, plan.numel) { y[i] = QLinearBinaryElement(i, a, b, plan, q); }
}

__global__ void Lut256Kernel(const uint8_t* __restrict__ x, int offset, const uint8_t* __restrict__ table,
                             uint8_t* __restrict__ y, int64_t n) {
  SPARQ_GRID_STRIDE(i, n) { y[i] = table[(x[i] + offset) & 0xff]; }  // int8 bytes + 128 = value - min
}

template <typename T>
__global__ void ReduceSumMeanKernel(const T* __restrict__ x, const int64_t* __restrict__ base, int64_t n_out,
                                    const int64_t* __restrict__ offsets, int64_t n, bool mean, T* __restrict__ y) {
  SPARQ_GRID_STRIDE(o, n_out) { StoreF32(y, o, ReduceSumMeanElement(o, x, base, offsets, n, mean)); }
}

__global__ void CastKernel(const void* x, int from, void* y, int to, int64_t n) {
  SPARQ_GRID_STRIDE(i, n) { CastElement(i, x, from, y, to); }
}

template <typename T>
__global__ void ResizeNearestKernel(const T* __restrict__ x, T* __restrict__ y, int64_t n, int64_t height,
                                    int64_t width, int64_t sh, int64_t sw) {
  SPARQ_GRID_STRIDE(i, n) { y[i] = x[ResizeNearestSource(i, height, width, sh, sw)]; }
}

template <typename T>
__global__ void GatherKernel(const T* __restrict__ x, const int64_t* __restrict__ indices, T* __restrict__ y, int64_t n,
                             int64_t n_indices, int64_t axis_dim, int64_t inner) {
  SPARQ_GRID_STRIDE(i, n) { y[i] = x[GatherSource(i, indices, n_indices, axis_dim, inner)]; }
}

__global__ void AbsHistogramKernel(const float* __restrict__ x, int64_t n, double scale, int64_t last,
                                   unsigned long long* __restrict__ counts, unsigned long long* __restrict__ nans) {
  SPARQ_GRID_STRIDE(i, n) {
    const int64_t b = AbsHistogramBin(x[i], scale, last);
    if (b < 0) atomicAdd(nans, 1ull);
    else atomicAdd(counts + b, 1ull);
  }
}

// The same with a private histogram per block in shared memory (bins, then
// the NaN count), added to the global one once per block: activations crowd
// into few bins (a ReLU's zeros), which global atomics would serialize on.
// Integer counts: the result does not depend on the order.
constexpr int kMaxSharedHistogramBins = 4096;
constexpr int kHistogramBlocks = 512;
static_assert((kMaxSharedHistogramBins + 1) * sizeof(unsigned long long) <= 48 * 1024,
              "the private histogram fits the default shared memory of a block");
__global__ void AbsHistogramSharedKernel(const float* __restrict__ x, int64_t n, double scale, int64_t last,
                                         unsigned long long* __restrict__ counts, unsigned long long* __restrict__ nans) {
  extern __shared__ unsigned long long local[];
  const int bins = static_cast<int>(last) + 1;
  for (int i = threadIdx.x; i <= bins; i += blockDim.x) local[i] = 0;
  __syncthreads();
  SPARQ_GRID_STRIDE(i, n) {
    const int64_t b = AbsHistogramBin(x[i], scale, last);
    atomicAdd(&local[b < 0 ? bins : b], 1ull);
  }
  __syncthreads();
  for (int i = threadIdx.x; i <= bins; i += blockDim.x)
    if (local[i] != 0) atomicAdd(i < bins ? counts + i : nans, local[i]);
}

}  // namespace

template <typename T>
Status LaunchUnary(UnaryOp op, const T* x, T* y, int64_t n, float p0, float p1, float p2, cudaStream_t stream, float p3) {
  if (n <= 0) return Status::OK();
  UnaryKernel<T><<<BlocksFor(n), kThreads, 0, stream>>>(op, x, y, n, p0, p1, p2, p3);
  SPARQ_CUDA_RETURN_IF_LAUNCH_ERROR("UnaryKernel");
  return Status::OK();
}

template <typename T>
Status LaunchBinary(BinaryOp op, const T* a, const T* b, T* y, const BroadcastPlan& plan, cudaStream_t stream) {
  if (plan.numel <= 0) return Status::OK();
  BinaryKernel<T><<<BlocksFor(plan.numel), kThreads, 0, stream>>>(op, a, b, y, plan);
  SPARQ_CUDA_RETURN_IF_LAUNCH_ERROR("BinaryKernel");
  return Status::OK();
}

Status LaunchBinaryInt(BinaryOp op, int elem_size, const void* a, const void* b, void* y, const BroadcastPlan& plan,
                       cudaStream_t stream) {
  if (plan.numel <= 0) return Status::OK();
  const int code = static_cast<int>(op);  // kAdd, kSub, kMul, kDiv = 0..3 as IntBinary's op
  if (elem_size == 4) {
    BinaryIntKernel<int32_t><<<BlocksFor(plan.numel), kThreads, 0, stream>>>(
        code, static_cast<const int32_t*>(a), static_cast<const int32_t*>(b), static_cast<int32_t*>(y), plan);
  } else if (elem_size == 8) {
    BinaryIntKernel<int64_t><<<BlocksFor(plan.numel), kThreads, 0, stream>>>(
        code, static_cast<const int64_t*>(a), static_cast<const int64_t*>(b), static_cast<int64_t*>(y), plan);
  } else {
    return Status::NotSupported("integer binary op on " + std::to_string(elem_size) + "-byte elements");
  }
  SPARQ_CUDA_RETURN_IF_LAUNCH_ERROR("BinaryIntKernel");
  return Status::OK();
}

template <typename T>
Status LaunchSoftmaxRows(const T* x, T* y, int64_t rows, int64_t n, cudaStream_t stream) {
  if (rows <= 0 || n <= 0) return Status::OK();
  if (rows > 0x7fffffffLL) return Status::NotSupported("Softmax of more than 2^31 rows");
  SoftmaxRowsKernel<T><<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(x, y, n);
  SPARQ_CUDA_RETURN_IF_LAUNCH_ERROR("SoftmaxRowsKernel");
  return Status::OK();
}

template <typename T>
Status LaunchLayerNormRows(const T* x, const T* scale, const T* bias, double eps, int64_t rows, int64_t n, T* y,
                           cudaStream_t stream) {
  if (rows <= 0 || n <= 0) return Status::OK();
  if (rows > 0x7fffffffLL) return Status::NotSupported("LayerNormalization of more than 2^31 rows");
  LayerNormRowsKernel<T><<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(x, scale, bias, eps, n, y);
  SPARQ_CUDA_RETURN_IF_LAUNCH_ERROR("LayerNormRowsKernel");
  return Status::OK();
}

Status LaunchQuantizeF32(const float* x, void* y, bool out_signed, int64_t n, const float* scale,
                         const int32_t* zero_point, int64_t axis_dim, int64_t inner, cudaStream_t stream) {
  if (n <= 0) return Status::OK();
  if (axis_dim < 1 || inner < 1) return Status::InvalidArgument("quantization axis of size 0");
  if (out_signed) {
    QuantizeKernel<int8_t><<<BlocksFor(n), kThreads, 0, stream>>>(x, static_cast<int8_t*>(y), n, scale, zero_point,
                                                                  axis_dim, inner);
  } else {
    QuantizeKernel<uint8_t><<<BlocksFor(n), kThreads, 0, stream>>>(x, static_cast<uint8_t*>(y), n, scale, zero_point,
                                                                   axis_dim, inner);
  }
  SPARQ_CUDA_RETURN_IF_LAUNCH_ERROR("QuantizeKernel");
  return Status::OK();
}

Status LaunchDequantize(const void* x, int in_type, float* y, int64_t n, const float* scale, const int32_t* zero_point,
                        int64_t axis_dim, int64_t inner, cudaStream_t stream) {
  if (n <= 0) return Status::OK();
  if (axis_dim < 1 || inner < 1) return Status::InvalidArgument("quantization axis of size 0");
  switch (in_type) {
    case 0:
      DequantizeKernel<uint8_t><<<BlocksFor(n), kThreads, 0, stream>>>(static_cast<const uint8_t*>(x), y, n, scale,
                                                                       zero_point, axis_dim, inner);
      break;
    case 1:
      DequantizeKernel<int8_t><<<BlocksFor(n), kThreads, 0, stream>>>(static_cast<const int8_t*>(x), y, n, scale,
                                                                      zero_point, axis_dim, inner);
      break;
    case 2:
      DequantizeKernel<int32_t><<<BlocksFor(n), kThreads, 0, stream>>>(static_cast<const int32_t*>(x), y, n, scale,
                                                                       zero_point, axis_dim, inner);
      break;
    default: return Status::InvalidArgument("DequantizeLinear input type code " + std::to_string(in_type));
  }
  SPARQ_CUDA_RETURN_IF_LAUNCH_ERROR("DequantizeKernel");
  return Status::OK();
}

Status LaunchRequantize(const RequantArgs& args, cudaStream_t stream) {
  const int64_t n = args.rows * args.cols;
  if (n <= 0) return Status::OK();
  if (args.acc == nullptr || args.multiplier == nullptr || args.out == nullptr) {
    return Status::InvalidArgument("requantize: accumulators, multipliers and output are required");
  }
  if (args.out_signed) {
    RequantizeKernel<int8_t><<<BlocksFor(n), kThreads, 0, stream>>>(args);
  } else {
    RequantizeKernel<uint8_t><<<BlocksFor(n), kThreads, 0, stream>>>(args);
  }
  SPARQ_CUDA_RETURN_IF_LAUNCH_ERROR("RequantizeKernel");
  return Status::OK();
}

Status LaunchAccToFloat(const RequantArgs& args, const FloatEpilogue& epilogue, float* y, cudaStream_t stream) {
  const int64_t n = args.rows * args.cols;
  if (n <= 0) return Status::OK();
  if (args.acc == nullptr || epilogue.scale == nullptr || y == nullptr) {
    return Status::InvalidArgument("AccToFloat: accumulators, scales and output are required");
  }
  AccToFloatKernel<<<BlocksFor(n), kThreads, 0, stream>>>(args, epilogue, y);
  SPARQ_CUDA_RETURN_IF_LAUNCH_ERROR("AccToFloatKernel");
  return Status::OK();
}

size_t DynamicQuantizeScratchBytes() { return 2 * kRangeBlocks * sizeof(float); }

Status LaunchDynamicQuantizeU8(const float* x, int64_t n, uint8_t* y, float* scale, uint8_t* zero_point, void* scratch,
                               cudaStream_t stream) {
  float* partial = static_cast<float*>(scratch);
  RangePartialKernel<<<kRangeBlocks, kThreads, 0, stream>>>(x, n, partial, 0.0f, 0.0f);
  SPARQ_CUDA_RETURN_IF_LAUNCH_ERROR("RangePartialKernel");
  DynamicParamsKernel<<<1, kThreads, 0, stream>>>(partial, kRangeBlocks, scale, zero_point);
  SPARQ_CUDA_RETURN_IF_LAUNCH_ERROR("DynamicParamsKernel");
  if (n <= 0) return Status::OK();
  QuantizeDynamicKernel<<<BlocksFor(n), kThreads, 0, stream>>>(x, n, scale, zero_point, y);
  SPARQ_CUDA_RETURN_IF_LAUNCH_ERROR("QuantizeDynamicKernel");
  return Status::OK();
}

Status LaunchRowSumsS8(const int8_t* x, int64_t rows, int64_t k, int32_t* sums, cudaStream_t stream) {
  if (rows <= 0) return Status::OK();
  RowSumsS8Kernel<<<BlocksFor(rows), kThreads, 0, stream>>>(x, rows, k, sums);
  SPARQ_CUDA_RETURN_IF_LAUNCH_ERROR("RowSumsS8Kernel");
  return Status::OK();
}

Status LaunchShiftU8ToS8(const uint8_t* x, int8_t* y, int64_t n, cudaStream_t stream) {
  if (n <= 0) return Status::OK();
  ShiftU8ToS8Kernel<<<BlocksFor(n), kThreads, 0, stream>>>(x, y, n);
  SPARQ_CUDA_RETURN_IF_LAUNCH_ERROR("ShiftU8ToS8Kernel");
  return Status::OK();
}

Status LaunchPermute(const void* x, void* y, int elem_size, const PermutePlan& plan, cudaStream_t stream) {
  if (plan.numel <= 0) return Status::OK();
  if (plan.rank < 1 || plan.rank > kMaxRank) return Status::NotSupported("permutation of rank " + std::to_string(plan.rank));
  const unsigned blocks = BlocksFor(plan.numel);
  switch (elem_size) {
    case 1: PermuteKernel<uint8_t><<<blocks, kThreads, 0, stream>>>(static_cast<const uint8_t*>(x), static_cast<uint8_t*>(y), plan); break;
    case 2: PermuteKernel<uint16_t><<<blocks, kThreads, 0, stream>>>(static_cast<const uint16_t*>(x), static_cast<uint16_t*>(y), plan); break;
    case 4: PermuteKernel<uint32_t><<<blocks, kThreads, 0, stream>>>(static_cast<const uint32_t*>(x), static_cast<uint32_t*>(y), plan); break;
    case 8: PermuteKernel<uint64_t><<<blocks, kThreads, 0, stream>>>(static_cast<const uint64_t*>(x), static_cast<uint64_t*>(y), plan); break;
    default: return Status::NotSupported("permutation of " + std::to_string(elem_size) + "-byte elements");
  }
  SPARQ_CUDA_RETURN_IF_LAUNCH_ERROR("PermuteKernel");
  return Status::OK();
}

Status LaunchQLinearBinary(const void* a, const void* b, void* y, const BroadcastPlan& plan, const QLinearBinaryArgs& q,
                           cudaStream_t stream) {
  if (plan.numel <= 0) return Status::OK();
  QLinearBinaryKernel<<<BlocksFor(plan.numel), kThreads, 0, stream>>>(a, b, static_cast<uint8_t*>(y), plan, q);
  SPARQ_CUDA_RETURN_IF_LAUNCH_ERROR("QLinearBinaryKernel");
  return Status::OK();
}

Status LaunchLut256(const void* x, bool x_signed, const uint8_t* table, void* y, int64_t n, cudaStream_t stream) {
  if (n <= 0) return Status::OK();
  Lut256Kernel<<<BlocksFor(n), kThreads, 0, stream>>>(static_cast<const uint8_t*>(x), x_signed ? 128 : 0, table,
                                                      static_cast<uint8_t*>(y), n);
  SPARQ_CUDA_RETURN_IF_LAUNCH_ERROR("Lut256Kernel");
  return Status::OK();
}

template <typename T>
Status LaunchReduceSumMean(const T* x, const int64_t* base, int64_t n_out, const int64_t* offsets, int64_t n, bool mean,
                           T* y, cudaStream_t stream) {
  if (n_out <= 0) return Status::OK();
  ReduceSumMeanKernel<T><<<BlocksFor(n_out), kThreads, 0, stream>>>(x, base, n_out, offsets, n, mean, y);
  SPARQ_CUDA_RETURN_IF_LAUNCH_ERROR("ReduceSumMeanKernel");
  return Status::OK();
}

Status LaunchCast(const void* x, int from, void* y, int to, int64_t n, cudaStream_t stream) {
  if (n <= 0) return Status::OK();
  CastKernel<<<BlocksFor(n), kThreads, 0, stream>>>(x, from, y, to, n);
  SPARQ_CUDA_RETURN_IF_LAUNCH_ERROR("CastKernel");
  return Status::OK();
}

Status LaunchResizeNearest(const void* x, void* y, int elem_size, int64_t planes, int64_t height, int64_t width,
                           int64_t sh, int64_t sw, cudaStream_t stream) {
  const int64_t n = planes * height * sh * width * sw;
  if (n <= 0) return Status::OK();
  const unsigned blocks = BlocksFor(n);
  switch (elem_size) {
    case 1: ResizeNearestKernel<uint8_t><<<blocks, kThreads, 0, stream>>>(static_cast<const uint8_t*>(x), static_cast<uint8_t*>(y), n, height, width, sh, sw); break;
    case 2: ResizeNearestKernel<uint16_t><<<blocks, kThreads, 0, stream>>>(static_cast<const uint16_t*>(x), static_cast<uint16_t*>(y), n, height, width, sh, sw); break;
    case 4: ResizeNearestKernel<uint32_t><<<blocks, kThreads, 0, stream>>>(static_cast<const uint32_t*>(x), static_cast<uint32_t*>(y), n, height, width, sh, sw); break;
    case 8: ResizeNearestKernel<uint64_t><<<blocks, kThreads, 0, stream>>>(static_cast<const uint64_t*>(x), static_cast<uint64_t*>(y), n, height, width, sh, sw); break;
    default: return Status::NotSupported("Resize of " + std::to_string(elem_size) + "-byte elements");
  }
  SPARQ_CUDA_RETURN_IF_LAUNCH_ERROR("ResizeNearestKernel");
  return Status::OK();
}

Status LaunchGather(const void* x, const int64_t* indices, void* y, int elem_size, int64_t outer, int64_t axis_dim,
                    int64_t inner, int64_t n_indices, cudaStream_t stream) {
  const int64_t n = outer * n_indices * inner;
  if (n <= 0) return Status::OK();
  const unsigned blocks = BlocksFor(n);
  switch (elem_size) {
    case 1: GatherKernel<uint8_t><<<blocks, kThreads, 0, stream>>>(static_cast<const uint8_t*>(x), indices, static_cast<uint8_t*>(y), n, n_indices, axis_dim, inner); break;
    case 2: GatherKernel<uint16_t><<<blocks, kThreads, 0, stream>>>(static_cast<const uint16_t*>(x), indices, static_cast<uint16_t*>(y), n, n_indices, axis_dim, inner); break;
    case 4: GatherKernel<uint32_t><<<blocks, kThreads, 0, stream>>>(static_cast<const uint32_t*>(x), indices, static_cast<uint32_t*>(y), n, n_indices, axis_dim, inner); break;
    case 8: GatherKernel<uint64_t><<<blocks, kThreads, 0, stream>>>(static_cast<const uint64_t*>(x), indices, static_cast<uint64_t*>(y), n, n_indices, axis_dim, inner); break;
    default: return Status::NotSupported("Gather of " + std::to_string(elem_size) + "-byte elements");
  }
  SPARQ_CUDA_RETURN_IF_LAUNCH_ERROR("GatherKernel");
  return Status::OK();
}

Status LaunchAbsHistogramF32(const float* x, int64_t n, double scale, int64_t last, unsigned long long* counts,
                             unsigned long long* nans, cudaStream_t stream) {
  if (n <= 0) return Status::OK();
  if (last < 0) return Status::InvalidArgument("histogram with no bins");
  if (last + 1 <= kMaxSharedHistogramBins) {
    const unsigned blocks = std::min<unsigned>(BlocksFor(n), kHistogramBlocks);
    const size_t shared = static_cast<size_t>(last + 2) * sizeof(unsigned long long);
    AbsHistogramSharedKernel<<<blocks, kThreads, shared, stream>>>(x, n, scale, last, counts, nans);
    SPARQ_CUDA_RETURN_IF_LAUNCH_ERROR("AbsHistogramSharedKernel");
    return Status::OK();
  }
  AbsHistogramKernel<<<BlocksFor(n), kThreads, 0, stream>>>(x, n, scale, last, counts, nans);
  SPARQ_CUDA_RETURN_IF_LAUNCH_ERROR("AbsHistogramKernel");
  return Status::OK();
}

size_t MinMaxScratchBytes() { return (2 * kRangeBlocks + 2) * sizeof(float); }

Status LaunchMinMaxF32(const float* x, int64_t n, void* scratch, cudaStream_t stream) {
  float* partial = static_cast<float*>(scratch);
  const float inf = std::numeric_limits<float>::infinity();
  RangePartialKernel<<<kRangeBlocks, kThreads, 0, stream>>>(x, n, partial, inf, -inf);
  SPARQ_CUDA_RETURN_IF_LAUNCH_ERROR("RangePartialKernel");
  MinMaxFoldKernel<<<1, kThreads, 0, stream>>>(partial, kRangeBlocks, partial + 2 * kRangeBlocks);
  SPARQ_CUDA_RETURN_IF_LAUNCH_ERROR("MinMaxFoldKernel");
  return Status::OK();
}

// The float launchers' two element types.
#define SPARQ_FLOAT_LAUNCHERS(T)                                                                                      \
  template Status LaunchUnary<T>(UnaryOp, const T*, T*, int64_t, float, float, float, cudaStream_t, float);           \
  template Status LaunchBinary<T>(BinaryOp, const T*, const T*, T*, const BroadcastPlan&, cudaStream_t);              \
  template Status LaunchSoftmaxRows<T>(const T*, T*, int64_t, int64_t, cudaStream_t);                                  \
  template Status LaunchLayerNormRows<T>(const T*, const T*, const T*, double, int64_t, int64_t, T*, cudaStream_t);    \
  template Status LaunchReduceSumMean<T>(const T*, const int64_t*, int64_t, const int64_t*, int64_t, bool, T*,         \
                                         cudaStream_t);
SPARQ_FLOAT_LAUNCHERS(float)
SPARQ_FLOAT_LAUNCHERS(Half)
#undef SPARQ_FLOAT_LAUNCHERS

}  // namespace cuda
}  // namespace sparq
