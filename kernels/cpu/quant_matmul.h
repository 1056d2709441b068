// MatMulInteger and QLinearMatMul on the fast INT8 GEMM (gemm_s8, kernels/cpu)
// for the common case of a model's weights: B a 2-D [K, N] tensor that does
// not change between runs, packed once.
//
//   A [..., M, K] (u8/s8) x B [K, N] (u8/s8)  ->  Y [..., M, N]
//   MatMulInteger: int32 accumulators; QLinearMatMul: requantized to u8/s8.
//
// The results are bit for bit those of the reference kernels (kernels/ref/
// quant_ops.cc): the same exact int32 sums (mod 2^32) and the same
// requantization (RequantizeS32Ref). Inputs outside the fast path (below) run
// the reference kernel instead, so the "cpu" rows accept everything the "ref"
// rows accept, with the same error messages.
//
// Fast path: B 2-D; b_zero_point absent, one value or one per column (shape
// [N] or [1, N]); a_zero_point absent or one value (MatMulInteger: also one
// per row of A, shape [M]); QLinearMatMul: float32 scales, a_scale and
// y_scale one value, b_scale one value or one per column with b_zero_point of
// the same count, y_zero_point absent or one value.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "kernels/cpu/sparse_s8.h"
#include "kernels/packed_formats.h"
#include "kernels/op_context.h"
#include "kernels/registry.h"
#include "sparq/graph.h"
#include "sparq/status.h"
#include "sparq/tensor.h"

namespace sparq {

// B of a MatMulInteger / QLinearMatMul, packed for gemm_s8 (W = B^T [N, K]
// with the b zero points folded in; see PackGemmS8).
struct QuantMatMulWeights {
  int64_t k = 0;  // rows of B
  int64_t n = 0;  // columns of B
  DataType b_type = DataType::kUndefined;
  PackedGemmS8 packed;     // for gemm_s8, when not sparse
  SparseS8Weights sparse;  // W = B^T for a sparse kernel, when the kernel table says it is faster

  // The kernel these weights run on at the active ISA: the table row
  // (kernels/cpu/dispatch.h), e.g. "gemm_s8s8_avx2" or "spmm_bsr4x4_s8_avx512vnni".
  std::string KernelName() const;
};

// Packs B [K, N] and its zero point (nullptr: none) in the weight format of
// the active ISA (PreferredGemmS8Format). NotSupported, saying why, when B or
// the zero point is outside the fast path; callers then use the reference
// kernel. Call it once per model (B is a constant) and reuse the result.
// With a kernel table, int8 B with zero point 0 whose structure the table
// rates faster than dense is packed for its sparse kernel instead
// (kernels/cpu/sparse_s8.h); runs with a per-row a_zero_point then take the
// reference kernel.
StatusOr<QuantMatMulWeights> PackQuantMatMulWeights(const Tensor& b, const Tensor* b_zero_point,
                                                    const KernelSpeedTable* kernel_table = nullptr);

// MatMulInteger (inputs A, B, a_zero_point, b_zero_point) and QLinearMatMul
// (A, a_scale, a_zero_point, B, b_scale, b_zero_point, y_scale, y_zero_point)
// with B and b_zero_point already packed in `w` (from this node's B; its shape
// and type are checked). NotSupported when another input is outside the fast
// path; InvalidArgument for inputs the reference kernel rejects too.
Status MatMulIntegerPacked(OpContext& ctx, const QuantMatMulWeights& w);
Status QLinearMatMulPacked(OpContext& ctx, const QuantMatMulWeights& w);

// For an executor with a per-node prepare step (see the note in
// kernels/cpu/quant_matmul.cc): packs the node's B once. `constants[i]` is
// input i when it is a constant of the model (an initializer that run inputs
// cannot override), nullptr otherwise. NotSupported when B, or a present
// b_zero_point, is not constant or is outside the fast path.
StatusOr<std::shared_ptr<const QuantMatMulWeights>> PrepareQuantMatMul(const Node& node,
                                                                       const std::vector<const Tensor*>& constants,
                                                                       const KernelSpeedTable* kernel_table = nullptr);

// The kernel of a prepared MatMulInteger / QLinearMatMul node: the fast path
// with `w`, or the reference kernel when this run's inputs are outside it.
Status RunPreparedQuantMatMul(OpContext& ctx, const QuantMatMulWeights& w);

// Kernel functions for a registry row named "gemm_s8": fast path when the
// inputs allow it, the reference kernel otherwise. They pack B on every call,
// since a KernelFn has no per-node state; an executor with a prepare step
// would call PackQuantMatMulWeights once and then *Packed.
// QLinearMatMulCpu also takes B of rank > 2 with A's batch dimensions
// (activation x activation, as in attention): each batch packed and run on one
// thread of the pool.
Status MatMulIntegerCpu(OpContext& ctx);
Status QLinearMatMulCpu(OpContext& ctx);

// Adds the rows {MatMulInteger, QLinearMatMul} x opset 10.. named "gemm_s8".
// KernelRegistry::Find returns the first matching row, so register these
// before the reference rows for them to take precedence.
void RegisterCpuQuantOps(KernelRegistry& r);

}  // namespace sparq
