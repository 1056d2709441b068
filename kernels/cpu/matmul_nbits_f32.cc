// com.microsoft MatMulNBits on the CPU backend: the portable matmul_nbits_f32
// row and the op's kernel, which runs the active ISA's row over column
// ranges of the shared pool (matmul_nbits_f32.h).
#include "kernels/cpu/matmul_nbits_f32.h"

#include <memory>
#include <vector>

#include "kernels/cpu/dispatch.h"
#include "kernels/cpu/row_op.h"
#include "kernels/op_context.h"
#include "kernels/parallel.h"
#include "kernels/ref/matmul_nbits.h"
#include "kernels/registry.h"

namespace sparq {
namespace cpu {

// The reference's arithmetic (each weight dequantized, the sum in k order):
// its bits.
void MatMulNBitsF32Portable(const MatMulNBitsF32Args& p) {
  MatMulNBitsPlan plan;
  plan.m = p.m;
  plan.k = p.k;
  plan.block_size = p.block_size;
  plan.k_blocks = p.k_blocks;
  plan.blob_size = p.block_size / 2;
  std::vector<float> w(static_cast<size_t>(p.k));
  for (int64_t c = p.n0; c < p.n1; ++c) {
    for (int64_t k = 0; k < p.k; ++k) {
      const int64_t blk = k / p.block_size;
      w[k] = static_cast<float>(NBitsCode(p.b, plan, c, k) - NBitsZeroPoint(p.zero_points, plan, c, blk)) *
             p.scales[c * p.k_blocks + blk];
    }
    for (int64_t i = 0; i < p.m; ++i) {
      const float* a = p.a + i * p.k;
      float acc = 0.0f;
      for (int64_t k = 0; k < p.k; ++k) acc += a[k] * w[k];
      if (p.bias != nullptr) acc += p.bias[c];
      p.y[i * p.ld_y + c] = acc;
    }
  }
}

}  // namespace cpu

namespace {

// Columns per task: enough work per task that the pool's overhead vanishes
// (a batch-1 4096 x 4096 call has 4096 columns of 2 KiB of codes each).
constexpr int64_t kColumnsPerTask = 16;

Status MatMulNBitsFast(OpContext& ctx) {
  SPARQ_ASSIGN_OR_RETURN(const MatMulNBitsPlan p, PlanMatMulNBits(ctx));
  // float16 activations and float zero points: the reference.
  if (p.float_type != DataType::kFloat32 || p.float_zero_points) return RunReferenceKernel(ctx);
  Tensor y = ctx.OutputBuffer(0, DataType::kFloat32, p.out_shape);
  MatMulNBitsF32Args args;
  args.m = p.m;
  args.k = p.k;
  args.a = ctx.input(0).data<float>();
  args.b = static_cast<const uint8_t*>(ctx.input(1).raw_data());
  args.scales = ctx.input(2).data<float>();
  args.zero_points = ctx.has_input(3) ? static_cast<const uint8_t*>(ctx.input(3).raw_data()) : nullptr;
  args.bias = ctx.has_input(5) ? ctx.input(5).data<float>() : nullptr;
  args.block_size = p.block_size;
  args.k_blocks = p.k_blocks;
  args.y = y.data<float>();
  args.ld_y = p.n;
  const MatMulNBitsF32Fn row = cpu::PreparedRow<MatMulNBitsF32Fn>(ctx);
  if (p.m > 0) {
    ParallelFor(ctx.pool(), p.n, kColumnsPerTask, [&](int64_t b, int64_t e) {
      MatMulNBitsF32Args part = args;
      part.n0 = b;
      part.n1 = e;
      row(part);
    });
  }
  ctx.set_output(0, std::move(y));
  return Status::OK();
}

}  // namespace

void RegisterCpuMatMulNBitsOps(KernelRegistry& r) {
  r.Add({"MatMulNBits", "com.microsoft", 1, 1, MatMulNBitsFast, "matmul_nbits_f32",
         WithoutContext(cpu::PrepareRow<CpuOp::kMatMulNBitsF32>, cpu::RowKernel)});
}

}  // namespace sparq
