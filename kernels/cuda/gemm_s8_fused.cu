// The fused INT8 GEMM of the INT8 rows (launch.h, LaunchGemmS8Fused): int8
// tensor-core fragments (WMMA, sm_72+), int32 sums kept on chip, and the
// requantize (or float) epilogue of device_kernels.h applied before anything
// is written, so a QLinearMatMul / QLinearConv writes its int8 output in one
// kernel instead of an int32 matrix and a second pass over it. The tiling,
// staging and epilogue arithmetic are device_kernels.h's (kFused*,
// FusedStageSlot, FusedStageBytes, RequantizeAccValue, AccToFloatValue),
// which tests/kernels/cuda_kernel_bodies_test.cc runs by a host loop over the
// grid; the int32 sums are exact in any order, so the output is the
// reference's bit for bit.
#include <mma.h>

#include <string>

#include "kernels/cuda/cuda_status.h"
#include "kernels/cuda/device_kernels.h"
#include "kernels/cuda/launch.h"

namespace sparq {
namespace cuda {
namespace {

namespace wmma = nvcuda::wmma;
constexpr int kChunks = kFusedBlockK / 16;
static_assert(kFusedThreads <= 1024 && kFusedThreads % 32 == 0, "whole warps within the block limit");

enum class Epilogue { kInt8, kUInt8, kFloat };

// Stages one k step of an operand: 16 bytes per slot, one 128-bit load when
// the whole chunk is inside src and aligned (`vec`: k % 16 == 0 and src 16-byte
// aligned), FusedStageBytes otherwise.
__device__ __forceinline__ void Stage(const int8_t* __restrict__ src, int64_t rows, int64_t k, int64_t row0, int64_t k0,
                                      bool vec, int8_t* tile) {
  for (int s = 0; s < 2; ++s) {
    int row, chunk;
    FusedStageSlot(threadIdx.x, s, &row, &chunk);
    const int64_t gr = row0 + row, gk = k0 + 16 * chunk;
    if (vec && gr < rows && gk + 16 <= k) {
      *reinterpret_cast<int4*>(tile + (chunk * kFusedBlockM + row) * 16) =
          *reinterpret_cast<const int4*>(src + gr * k + gk);
    } else {
      FusedStageBytes(src, rows, k, row0, k0, row, chunk, kFusedBlockM, tile);
    }
  }
}

template <Epilogue kEpi>
__global__ void __launch_bounds__(kFusedThreads) GemmS8FusedKernel(const int8_t* __restrict__ a,
                                                                   const int8_t* __restrict__ b, int64_t m, int64_t n,
                                                                   int64_t k, bool vec, RequantArgs r, FloatEpilogue e,
                                                                   void* __restrict__ out) {
  __shared__ __align__(128) int8_t sa[kChunks * kFusedBlockM * 16];
  __shared__ __align__(128) int8_t sb[kChunks * kFusedBlockN * 16];
  __shared__ __align__(128) int32_t sc[kFusedBlockM * kFusedCLd];
  const int warp = threadIdx.x / 32, wm = warp / kFusedWarpsN, wn = warp % kFusedWarpsN;
  const int64_t row0 = static_cast<int64_t>(blockIdx.y) * kFusedBlockM;
  const int64_t col0 = static_cast<int64_t>(blockIdx.x) * kFusedBlockN;
  wmma::fragment<wmma::accumulator, 16, 16, 16, int> acc[2][2];
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 2; ++j) wmma::fill_fragment(acc[i][j], 0);
  wmma::fragment<wmma::matrix_a, 16, 16, 16, signed char, wmma::row_major> fa[2];
  wmma::fragment<wmma::matrix_b, 16, 16, 16, signed char, wmma::col_major> fb[2];
  for (int64_t k0 = 0; k0 < k; k0 += kFusedBlockK) {
    Stage(a, m, k, row0, k0, vec, sa);
    Stage(b, n, k, col0, k0, vec, sb);
    __syncthreads();
    for (int c = 0; c < kChunks; ++c) {
      // A's fragment: element (row, kk) at row * 16 + kk; B's (kk, col), col-major, at col * 16 + kk.
      for (int i = 0; i < 2; ++i) wmma::load_matrix_sync(fa[i], sa + (c * kFusedBlockM + wm * 32 + i * 16) * 16, 16);
      for (int j = 0; j < 2; ++j) wmma::load_matrix_sync(fb[j], sb + (c * kFusedBlockN + wn * 32 + j * 16) * 16, 16);
      for (int i = 0; i < 2; ++i)
        for (int j = 0; j < 2; ++j) wmma::mma_sync(acc[i][j], fa[i], fb[j], acc[i][j]);
    }
    __syncthreads();
  }
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 2; ++j)
      wmma::store_matrix_sync(sc + (wm * 32 + i * 16) * kFusedCLd + wn * 32 + j * 16, acc[i][j], kFusedCLd,
                              wmma::mem_row_major);
  __syncthreads();
  for (int idx = threadIdx.x; idx < kFusedBlockM * kFusedBlockN; idx += kFusedThreads) {
    const int rr = idx / kFusedBlockN, cc = idx % kFusedBlockN;
    const int64_t gr = row0 + rr, gc = col0 + cc;
    if (gr >= m || gc >= n) continue;
    const int32_t raw = sc[rr * kFusedCLd + cc];
    if (kEpi == Epilogue::kInt8) {
      static_cast<int8_t*>(out)[gr * n + gc] = RequantizeAccValue<int8_t>(raw, gr, gc, r);
    } else if (kEpi == Epilogue::kUInt8) {
      static_cast<uint8_t*>(out)[gr * n + gc] = RequantizeAccValue<uint8_t>(raw, gr, gc, r);
    } else {
      static_cast<float*>(out)[gr * n + gc] = AccToFloatValue(raw, gr, gc, r, e);
    }
  }
}

Status LaunchFused(Epilogue epi, const int8_t* a, const int8_t* b, int64_t m, int64_t n, int64_t k,
                   const RequantArgs& r, const FloatEpilogue& e, void* out, cudaStream_t stream) {
  if (m <= 0 || n <= 0) return Status::OK();
  const int64_t gx = (n + kFusedBlockN - 1) / kFusedBlockN, gy = (m + kFusedBlockM - 1) / kFusedBlockM;
  if (gx > 0x7fffffffLL || gy > 65535) {
    return Status::NotSupported("fused INT8 GEMM of " + std::to_string(m) + " x " + std::to_string(n) + ": grid too large");
  }
  if (r.rows != m || r.cols != n) return Status::InvalidArgument("fused INT8 GEMM: epilogue shape differs from the GEMM's");
  const bool vec = k % 16 == 0 && reinterpret_cast<uintptr_t>(a) % 16 == 0 && reinterpret_cast<uintptr_t>(b) % 16 == 0;
  const dim3 grid(static_cast<unsigned>(gx), static_cast<unsigned>(gy));
  switch (epi) {
    case Epilogue::kInt8:
      GemmS8FusedKernel<Epilogue::kInt8><<<grid, kFusedThreads, 0, stream>>>(a, b, m, n, k, vec, r, e, out);
      break;
    case Epilogue::kUInt8:
      GemmS8FusedKernel<Epilogue::kUInt8><<<grid, kFusedThreads, 0, stream>>>(a, b, m, n, k, vec, r, e, out);
      break;
    case Epilogue::kFloat:
      GemmS8FusedKernel<Epilogue::kFloat><<<grid, kFusedThreads, 0, stream>>>(a, b, m, n, k, vec, r, e, out);
      break;
  }
  SPARQ_CUDA_RETURN_IF_LAUNCH_ERROR("GemmS8FusedKernel");
  return Status::OK();
}

}  // namespace

Status LaunchGemmS8Requantize(const int8_t* a, const int8_t* b, int64_t m, int64_t n, int64_t k, const RequantArgs& r,
                              cudaStream_t stream) {
  if (r.multiplier == nullptr || r.out == nullptr) {
    return Status::InvalidArgument("fused INT8 GEMM: multipliers and output are required");
  }
  return LaunchFused(r.out_signed ? Epilogue::kInt8 : Epilogue::kUInt8, a, b, m, n, k, r, FloatEpilogue{}, r.out, stream);
}

Status LaunchGemmS8ToFloat(const int8_t* a, const int8_t* b, int64_t m, int64_t n, int64_t k, const RequantArgs& r,
                           const FloatEpilogue& e, float* y, cudaStream_t stream) {
  if (e.scale == nullptr || y == nullptr) return Status::InvalidArgument("fused INT8 GEMM: scales and output are required");
  return LaunchFused(Epilogue::kFloat, a, b, m, n, k, r, e, y, stream);
}

}  // namespace cuda
}  // namespace sparq
