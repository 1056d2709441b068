// Pruned INT8 weights in the executor's prepare steps (quant_conv.cc,
// quant_matmul.cc): which sparse structure int8 W [N, K] ([out, in] view,
// zero point 0) has, whether the kernel speed table says its sparse kernel
// beats dense gemm_s8 at that sparsity, and the weights packed for it.
//
// Candidates: BSR 1x4, 4x1, 4x4, 8x8, 16x16 (spmm_bsr_s8) at the fraction of
// all-zero blocks of that shape, and N:M 2:4, 4:8 (spmm_nm_s8) at 1 - N/M when
// every group holds at most N nonzeros. Each is looked up in the table for
// backend "cpu", precision "s8" (KernelSpeedTable::MeasuredAtOrBelow: the
// speed-up measured at the highest sparsity at or below the candidate's);
// the fastest candidate above 1.0x wins, otherwise the layer stays dense.
#pragma once

#include <cstdint>
#include <string>

#include "kernels/cpu/kernel_args.h"
#include "sparq/kernel_table.h"
#include "sparq/status.h"

namespace sparq {

struct SparseS8Weights {
  LayoutKind kind = LayoutKind::kPanel;  // kPanel: dense (not chosen); kBsr or kNm: `bsr` / `nm` hold W
  BsrS8 bsr;
  NmS8 nm;
  NmS8Panels nm_panels;     // nm prepacked for the spmm_nm_s8 kernel of the ISA active at ChooseSparseS8
  std::string kernel;       // the table row of the active ISA, e.g. "spmm_bsr4x4_s8_avx2", "spmm_nm24_s8_avx512vnni"
  double sparsity = 0.0;    // of the chosen structure (zero blocks, or 1 - N/M)
  double speedup = 0.0;     // the table's speed-up for it

  bool sparse() const { return kind != LayoutKind::kPanel; }
};

// Chooses and packs as described above; a result with sparse() false when no
// candidate beats dense (nothing is packed then). Errors only from packing.
StatusOr<SparseS8Weights> ChooseSparseS8(const int8_t* w, int64_t n, int64_t k, const KernelSpeedTable& table,
                                         bool conv = false);

// Runs the chosen kernel: acc = (X - x_zp) * W^T in `layout` (see SpmmBsrS8Args),
// output per `out`. Precondition: weights.sparse().
Status RunSparseS8(const SparseS8Weights& weights, SpmmLayout layout, int64_t m, const void* x, bool x_signed,
                   int64_t ld_x, int32_t x_zero_point, const S8Epilogue& out, ThreadPool* pool);

}  // namespace sparq
