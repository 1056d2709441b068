// The own block-sparse kernels (spmm_bell_wmma.h): one thread block per
// B x kTokens output tile, over the nonzero blocks of its block-row only,
// each block and its X tile staged by cp.async into shared memory (double
// buffered: the next slot's copies fly while this one's fragments multiply),
// WMMA 16x16x16 products (float16 with float sums, or int8 with int32 sums),
// the output written once: float16 rounded to nearest even, or int8 / uint8
// / float through device_kernels.h's requantize / float epilogue, so an INT8
// layer writes its int8 output in one kernel, the int32 sums never leaving
// the chip. The index arithmetic is spmm_bell_tiles.h's, which
// CudaKernelBodies.BellWmma* run on the host.
#include <cuda_fp16.h>
#include <cuda_pipeline.h>
#include <mma.h>

#include <string>

#include "kernels/cuda/cuda_status.h"
#include "kernels/cuda/spmm_bell_wmma.h"

namespace sparq {
namespace cuda {
namespace {

namespace wmma = nvcuda::wmma;

struct F16 {
  using In = __half;
  using Acc = float;
  static constexpr int kBytes = 2;
};
struct S8 {
  using In = signed char;
  using Acc = int;
  static constexpr int kBytes = 1;
};

template <int B, typename Ty>
__device__ __forceinline__ void IssueStage(const int32_t* __restrict__ cols, int s, int64_t br, int64_t ell_cols,
                                           const typename Ty::In* __restrict__ values,
                                           const typename Ty::In* __restrict__ x, int64_t m0, int64_t m, int64_t k,
                                           typename Ty::In* stage) {
  using T = BellTile<B, Ty::kBytes>;
  for (int q = threadIdx.x; q < T::kAChunks; q += T::kThreads) {
    const BellCopy c = BellStageA<B, Ty::kBytes>(q, br, s, ell_cols);
    __pipeline_memcpy_async(stage + c.dst, values + c.src, 16);
  }
  const int64_t bc = cols[s];
  typename Ty::In* sx = stage + B * T::kLd;
  for (int q = threadIdx.x; q < T::kXChunks; q += T::kThreads) {
    const BellCopy c = BellStageX<B, Ty::kBytes>(q, m0, bc, m, k);
    if (c.valid) {
      __pipeline_memcpy_async(sx + c.dst, x + c.src, 16);
    } else {
      *reinterpret_cast<int4*>(sx + c.dst) = make_int4(0, 0, 0, 0);
    }
  }
  __pipeline_commit();
}

// The tile's sums: on return (after a __syncthreads) sc = smem as Ty::Acc
// [kTokens][kCLd] holds sum over the block-row's nonzero blocks, feature f
// of token t at sc[t * kCLd + f].
template <int B, typename Ty>
__device__ __forceinline__ void TileSums(const int32_t* __restrict__ col_ind, const typename Ty::In* __restrict__ values,
                                         int64_t ell_cols, int slots, const typename Ty::In* __restrict__ x, int64_t m,
                                         int64_t k, unsigned char* smem) {
  using T = BellTile<B, Ty::kBytes>;
  using In = typename Ty::In;
  using Acc = typename Ty::Acc;
  In* stages = reinterpret_cast<In*>(smem);
  const int64_t br = blockIdx.y, m0 = static_cast<int64_t>(blockIdx.x) * T::kTokens;
  const int32_t* cols = col_ind + br * slots;
  int count = 0;
  while (count < slots && cols[count] >= 0) ++count;
  const int w = threadIdx.x / 32;
  wmma::fragment<wmma::accumulator, 16, 16, 16, Acc> acc[2][2];
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 2; ++j) wmma::fill_fragment(acc[i][j], Acc(0));
  wmma::fragment<wmma::matrix_a, 16, 16, 16, In, wmma::row_major> fa[2];
  wmma::fragment<wmma::matrix_b, 16, 16, 16, In, wmma::col_major> fx[2];
  if (count > 0) IssueStage<B, Ty>(cols, 0, br, ell_cols, values, x, m0, m, k, stages);
  for (int s = 0; s < count; ++s) {
    if (s + 1 < count) {
      IssueStage<B, Ty>(cols, s + 1, br, ell_cols, values, x, m0, m, k, stages + ((s + 1) & 1) * T::kStageElems);
      __pipeline_wait_prior(1);
    } else {
      __pipeline_wait_prior(0);
    }
    __syncthreads();
    const In* sa = stages + (s & 1) * T::kStageElems;
    const In* sx = sa + B * T::kLd;
    for (int kk = 0; kk < B / 16; ++kk) {
      for (int i = 0; i < 2; ++i) wmma::load_matrix_sync(fa[i], sa + BellFragA<B, Ty::kBytes>(w, i, kk), T::kLd);
      for (int j = 0; j < 2; ++j) wmma::load_matrix_sync(fx[j], sx + BellFragX<B, Ty::kBytes>(w, j, kk), T::kLd);
      for (int i = 0; i < 2; ++i)
        for (int j = 0; j < 2; ++j) wmma::mma_sync(acc[i][j], fa[i], fx[j], acc[i][j]);
    }
    __syncthreads();  // this stage is refilled two slots on
  }
  Acc* sc = reinterpret_cast<Acc*>(smem);
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 2; ++j)
      wmma::store_matrix_sync(sc + BellFragC<B, Ty::kBytes>(w, i, j), acc[i][j], T::kCLd, wmma::mem_col_major);
  __syncthreads();
}

template <int B>
__global__ void __launch_bounds__(BellTile<B>::kThreads)
    SpmmBellF16WmmaKernel(const int32_t* __restrict__ col_ind, const __half* __restrict__ values, int64_t ell_cols,
                          int slots, const __half* __restrict__ x, int64_t m, int64_t k, __half* __restrict__ y,
                          int64_t n) {
  using T = BellTile<B>;
  __shared__ __align__(128) unsigned char smem[T::kSharedBytes];
  TileSums<B, F16>(col_ind, values, ell_cols, slots, x, m, k, smem);
  const float* sc = reinterpret_cast<const float*>(smem);
  const int64_t br = blockIdx.y, m0 = static_cast<int64_t>(blockIdx.x) * T::kTokens;
  for (int idx = threadIdx.x; idx < B * T::kTokens; idx += T::kThreads) {
    int f, t;
    BellOutElement<B>(idx, &f, &t);
    if (m0 + t >= m) continue;
    y[(m0 + t) * n + br * B + f] = __float2half_rn(sc[t * T::kCLd + f]);
  }
}

enum class S8Epilogue { kInt8, kUInt8, kFloat };

template <int B, S8Epilogue kEpi>
__global__ void __launch_bounds__(BellTile<B, 1>::kThreads)
    SpmmBellS8WmmaKernel(const int32_t* __restrict__ col_ind, const signed char* __restrict__ values, int64_t ell_cols,
                         int slots, const signed char* __restrict__ x, int64_t m, int64_t k, RequantArgs r,
                         FloatEpilogue e, void* __restrict__ out, int64_t n) {
  using T = BellTile<B, 1>;
  __shared__ __align__(128) unsigned char smem[T::kSharedBytes];
  TileSums<B, S8>(col_ind, values, ell_cols, slots, x, m, k, smem);
  const int32_t* sc = reinterpret_cast<const int32_t*>(smem);
  const int64_t br = blockIdx.y, m0 = static_cast<int64_t>(blockIdx.x) * T::kTokens;
  for (int idx = threadIdx.x; idx < B * T::kTokens; idx += T::kThreads) {
    int f, t;
    BellOutElement<B>(idx, &f, &t);
    const int64_t gr = m0 + t, gc = br * B + f;
    if (gr >= m) continue;
    const int32_t raw = sc[t * T::kCLd + f];
    if (kEpi == S8Epilogue::kInt8) {
      static_cast<int8_t*>(out)[gr * n + gc] = RequantizeAccValue<int8_t>(raw, gr, gc, r);
    } else if (kEpi == S8Epilogue::kUInt8) {
      static_cast<uint8_t*>(out)[gr * n + gc] = RequantizeAccValue<uint8_t>(raw, gr, gc, r);
    } else {
      static_cast<float*>(out)[gr * n + gc] = AccToFloatValue(raw, gr, gc, r, e);
    }
  }
}

template <int B>
dim3 GridOf(const BellWmmaArgs& a) {
  const int64_t tokens = BellTile<B>::kTokens;
  return dim3(static_cast<unsigned>((a.m + tokens - 1) / tokens), static_cast<unsigned>(a.n / B));
}

template <int B>
Status LaunchF16(const BellWmmaArgs& a, cudaStream_t stream) {
  SpmmBellF16WmmaKernel<B><<<GridOf<B>(a), BellTile<B>::kThreads, 0, stream>>>(
      a.col_ind, static_cast<const __half*>(a.values), a.ell_cols, static_cast<int>(a.ell_cols / B),
      static_cast<const __half*>(a.x), a.m, a.k, static_cast<__half*>(a.y), a.n);
  SPARQ_CUDA_RETURN_IF_LAUNCH_ERROR("SpmmBellF16WmmaKernel");
  return Status::OK();
}

template <int B, S8Epilogue kEpi>
Status LaunchS8(const BellWmmaArgs& a, const RequantArgs& r, const FloatEpilogue& e, cudaStream_t stream) {
  SpmmBellS8WmmaKernel<B, kEpi><<<GridOf<B>(a), BellTile<B, 1>::kThreads, 0, stream>>>(
      a.col_ind, static_cast<const signed char*>(a.values), a.ell_cols, static_cast<int>(a.ell_cols / B),
      static_cast<const signed char*>(a.x), a.m, a.k, r, e, a.y, a.n);
  SPARQ_CUDA_RETURN_IF_LAUNCH_ERROR("SpmmBellS8WmmaKernel");
  return Status::OK();
}

template <S8Epilogue kEpi>
Status LaunchS8Any(const BellWmmaArgs& a, const RequantArgs& r, const FloatEpilogue& e, cudaStream_t stream) {
  SPARQ_RETURN_IF_ERROR(CanImplementBellWmma(a));
  if (r.rows != a.m || r.cols != a.n) return Status::InvalidArgument("spmm_bell_s8_wmma: epilogue shape differs from the product's");
  if (a.m == 0) return Status::OK();
  return a.block == 32 ? LaunchS8<32, kEpi>(a, r, e, stream) : LaunchS8<64, kEpi>(a, r, e, stream);
}

}  // namespace

Status LaunchSpmmBellF16Wmma(const BellWmmaArgs& args, cudaStream_t stream) {
  SPARQ_RETURN_IF_ERROR(CanImplementBellWmma(args));
  if (args.m == 0) return Status::OK();
  return args.block == 32 ? LaunchF16<32>(args, stream) : LaunchF16<64>(args, stream);
}

Status LaunchSpmmBellS8Requantize(const BellWmmaArgs& args, const RequantArgs& r, cudaStream_t stream) {
  if (r.multiplier == nullptr) return Status::InvalidArgument("spmm_bell_s8_wmma: multipliers are required");
  if (r.out != args.y) return Status::InvalidArgument("spmm_bell_s8_wmma: r.out must be args.y");
  return r.out_signed ? LaunchS8Any<S8Epilogue::kInt8>(args, r, FloatEpilogue{}, stream)
                      : LaunchS8Any<S8Epilogue::kUInt8>(args, r, FloatEpilogue{}, stream);
}

Status LaunchSpmmBellS8ToFloat(const BellWmmaArgs& args, const RequantArgs& r, const FloatEpilogue& e,
                               cudaStream_t stream) {
  if (e.scale == nullptr) return Status::InvalidArgument("spmm_bell_s8_wmma: scales are required");
  return LaunchS8Any<S8Epilogue::kFloat>(args, r, e, stream);
}

}  // namespace cuda
}  // namespace sparq
