// The one rule by which the CUDA rows run a constant weight block-sparse
// (spmm_bell_f16_* in rows_gemm.cc, the INT8 rows of rows_sparse.cc), and on
// which kernel. Plain C++ (no CUDA headers), built in every build, so
// tests/kernels/cuda_layouts_test.cc checks it on any machine.
//
// For W^T [n, k] (the layer's output features x its reduction), each block
// size b of {64, 32} that divides n and k, at the weight's block sparsity s
// (the share of all-zero b x b blocks):
//
//   the kernel speed table (sparq/kernel_table.h) has GPU rows for
//   block<b>x<b> at this precision (backend "cuda" = cuSPARSE Blocked-ELL,
//   "cuda.wmma" = the own kernel, spmm_bell_wmma.cu):
//       speed-up = MeasuredAtOrBelow(backend, block<b>x<b>, precision, s, the
//       layer's shape class) per kernel, the executor's rule of the CPU rows;
//       the block runs sparse when the better kernel's is > 1 (the own kernel
//       only when strictly better than cuSPARSE)
//   no GPU row for either kernel at this precision for any of the blocks:
//       issue 23's H200 measurement, break-even near 80% with blocks of 32 /
//       64: sparse on cuSPARSE when s >= kDefaultMinBlockSparsity
//
// Among the blocks that run sparse, the highest speed-up wins (the larger
// block on a tie, and without rows the first of 64, 32 that qualifies).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sparq/kernel_table.h"
#include "sparq/status.h"
#include "sparq/tensor.h"

namespace sparq {
namespace cuda {

enum class BlockSparseKernel {
  kCusparse,  // cuSPARSE Blocked-ELL SpMM (spmm_blocked_ell.h)
  kWmma       // sparq's own WMMA kernel over Blocked-ELL (spmm_bell_wmma.h; float16 only)
};

inline constexpr double kDefaultMinBlockSparsity = 0.8;
inline constexpr int64_t kGpuSparseBlocks[] = {64, 32};
// The kernel speed table's backend column of each kernel.
inline constexpr const char* kCusparseTableBackend = "cuda";
inline constexpr const char* kWmmaTableBackend = "cuda.wmma";

struct BlockSparseChoice {
  int64_t block = 0;
  double sparsity = 0.0;  // of b x b blocks
  double speedup = 0.0;   // the table's, or 0 when the default threshold decided
  BlockSparseKernel kernel = BlockSparseKernel::kCusparse;
};

// The choice for W^T [n, k] row-major (T: uint16_t float16 bits or int8_t);
// precision "f16" or "s8" (the table's column); `wmma_available`: whether the
// own kernel exists for this precision (its rows are ignored otherwise).
// NotSupported saying what was measured when no block size pays;
// InvalidArgument for empty sizes.
template <typename T>
StatusOr<BlockSparseChoice> ChooseGpuBlockSparse(const KernelSpeedTable& table, const std::string& precision,
                                                 bool wmma_available, const T* wt, int64_t n, int64_t k);

// The constant weight of an INT8 layer (QLinearMatMul's B, MatMulIntegerToFloat's
// B) as the block-sparse INT8 rows take it: W [k, n] int8 with zero point 0
// or uint8 with zero point 128 (shifted by -128: x ^ 0x80), so the weight's
// zero point is 0 and no correction needs the activations' row sums; as
// W^T [n, k] int8 and its row sums (sum over k of W[k, c], int32), for the
// correction of the activations' zero point:
//   sum_k (a - za) w = sum_k a w - za * row_sums[c]
// NotSupported for another type, rank or zero point (per tensor or per
// column, all equal to the above); zero_point may be null (0).
struct SignedSparseWeight {
  int64_t n = 0, k = 0;
  std::vector<int8_t> wt;         // [n, k]
  std::vector<int32_t> row_sums;  // [n]
};
StatusOr<SignedSparseWeight> SignedWeightForSparse(const Tensor& w, const Tensor* zero_point);

// "cusparse" / "wmma", for kernel names and messages.
const char* BlockSparseKernelName(BlockSparseKernel kernel);

}  // namespace cuda
}  // namespace sparq
