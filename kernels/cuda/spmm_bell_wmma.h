// sparq's own block-sparse SpMM on tensor cores (spmm_bell_wmma.cu):
// Y [m, n] = X [m, k] * W [k, n] for W^T in Blocked-ELL (layouts.h), the
// layout cuSPARSE's Blocked-ELL SpMM reads, so one prepared weight serves
// both (rows_sparse.cc; CudaBackendOptions::block_sparse_kernel or the
// kernel speed table pick between them). Float16 (float sums), and int8
// (int32 sums) with device_kernels.h's requantize / float epilogue fused.
// Tiling and the host statement of what the grid computes: spmm_bell_tiles.h.
#pragma once

#include <cuda_runtime_api.h>

#include "kernels/cuda/device_kernels.h"
#include "kernels/cuda/spmm_bell_tiles.h"
#include "sparq/status.h"

namespace sparq {
namespace cuda {

// CanImplementBellWmma, then the kernel queued on `stream` (float sums,
// float16 output rounded to nearest even). Needs sm_80+ (cp.async).
Status LaunchSpmmBellF16Wmma(const BellWmmaArgs& args, cudaStream_t stream);

// INT8 (values and x int8; Blocked-ELL<int8_t>): r.out = args.y [m, n] =
// RequantizeAccValue(sum, row, col, r) as int8 (r.out_signed) or uint8, with
// r.rows = m, r.cols = n (r.acc unused): one kernel, the int32 sums never
// written. The same integers as cuSPARSE's INT8 SpMM and the requantize
// kernel, so the same bits.
Status LaunchSpmmBellS8Requantize(const BellWmmaArgs& args, const RequantArgs& r, cudaStream_t stream);
// The same with sparq.MatMulIntegerToFloat's float epilogue (AccToFloatValue) into args.y (float [m, n]).
Status LaunchSpmmBellS8ToFloat(const BellWmmaArgs& args, const RequantArgs& r, const FloatEpilogue& e,
                               cudaStream_t stream);

}  // namespace cuda
}  // namespace sparq
