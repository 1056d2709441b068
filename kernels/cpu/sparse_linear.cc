// FP32 MatMul and Gemm with a pruned constant weight on the block-sparse
// kernel (spmm_bsr4x4_f32): the executor's prepare step finds the weight's
// zero 4x4 blocks and packs the others once; each run skips the zero blocks.
//
// A node takes this path when its weight is a constant 2-D float32 tensor
// whose [outputs x inputs] view has at least kMinBlockSparsity of its 4x4
// blocks all zero (a block-pruned layer), and, for Gemm, transA = 0,
// alpha = 1 and C absent, or a constant [N] (or [1, N]) bias with beta = 1.
// Runs whose A is outside the path (not float32, wrong shape) use the
// reference kernel. Results equal the reference up to the order of float
// additions (the zeros skipped are exact zeros), the same for any thread
// count.
#include <memory>
#include <vector>

#include "kernels/cpu/dispatch.h"
#include "kernels/cpu/linear_weights.h"
#include "kernels/formats.h"
#include "kernels/registry.h"

namespace sparq {
namespace {

// Below this fraction of all-zero 4x4 blocks the layer stays on the dense
// kernel: the sparse kernel's gain there is not worth the second code path.
constexpr double kMinBlockSparsity = 0.5;

struct SparseLinear {
  BsrF32 w;                  // [N, K]
  std::vector<float> bias;   // [N] or empty
};

StatusOr<PreparedKernel> PrepareSparseLinear(const Node& node, const std::vector<const Tensor*>& constants,
                                             const PrepareContext& /*context*/) {
  SPARQ_ASSIGN_OR_RETURN(LinearWeights lw, ReadLinearWeights(node, constants, "bsr4x4_f32 path"));
  SPARQ_ASSIGN_OR_RETURN(BsrF32 packed, PackBsr(lw.w.data(), lw.n, lw.k, PackedFormat::kBsr4x4F32));
  const double zero_blocks =
      packed.stats.blocks > 0 ? 1.0 - static_cast<double>(packed.stats.stored_blocks) / packed.stats.blocks : 0.0;
  if (zero_blocks < kMinBlockSparsity)
    return Status::NotSupported(node.Describe() + ": bsr4x4_f32 path: too few zero 4x4 blocks");
  auto state = std::make_shared<SparseLinear>();
  state->w = std::move(packed);
  state->bias = std::move(lw.bias);
  return PreparedKernel{std::shared_ptr<const void>(std::move(state)), ""};
}

Status RunSparseLinear(OpContext& ctx) {
  const auto& s = *static_cast<const SparseLinear*>(ctx.prepared());
  if (!ctx.has_input(0) || ctx.input(0).dtype() != DataType::kFloat32) return RunReferenceKernel(ctx);
  const Tensor& a = ctx.input(0);
  const int64_t k = s.w.cols, n = s.w.rows;
  const bool gemm = ctx.node().op_type == "Gemm";
  // Gemm: A [M, K]; MatMul: A [..., M, K] (rank >= 2), every leading row at once.
  if (a.rank() < 2 || a.dim(a.rank() - 1) != k || (gemm && a.rank() != 2)) return RunReferenceKernel(ctx);
  Shape out_shape = a.shape();
  out_shape.back() = n;
  Tensor y(DataType::kFloat32, out_shape);
  if (y.numel() == 0) {
    ctx.set_output(0, std::move(y));
    return Status::OK();
  }
  SpmmBsrF32Args args;
  args.layout = SpmmLayout::kRowMajor;
  args.m = a.numel() / k;
  args.x = a.data<float>();
  args.ld_x = k;
  args.w = &s.w;
  args.bias = s.bias.empty() ? nullptr : s.bias.data();
  args.y = y.data<float>();
  args.ld_y = n;
  args.pool = ctx.pool();
  SPARQ_RETURN_IF_ERROR(RunSpmmBsrF32(args));
  ctx.set_output(0, std::move(y));
  return Status::OK();
}

}  // namespace

void RegisterPreparedCpuSparseOps(KernelRegistry& r) {
  r.Add({"MatMul", "", 1, 99, RunSparseLinear, "spmm_bsr4x4_f32", PrepareSparseLinear});
  r.Add({"Gemm", "", 1, 99, RunSparseLinear, "spmm_bsr4x4_f32", PrepareSparseLinear});
}

}  // namespace sparq
