// FP32 MatMul, Gemm and Conv with a pruned constant weight on the
// block-sparse kernel (spmm_bsr4x4_f32): the executor's prepare step finds
// the weight's zero 4x4 blocks and packs the others once; each run skips the
// zero blocks.
//
// A node takes this path when its weight ([outputs x inputs] view) has enough
// all-zero 4x4 blocks that the kernel speed table (PrepareContext) says block
// 4x4 f32 beats the dense FP32 GEMM at that sparsity. MatMul / Gemm: a
// constant 2-D float32 B and, for Gemm, transA = 0, alpha = 1 and C absent,
// or a constant [N] (or [1, N]) bias with beta = 1. Conv: 2-D, group 1,
// constant float32 W (and B); the input is unfolded per image into
// col [C * kh * kw, P] and Y^T = W * col written straight to NCHW.
// Runs whose A is outside the path (not float32, wrong shape) use the
// reference kernel. Results equal the reference up to the order of float
// additions (the zeros skipped are exact zeros), the same for any thread
// count.
#include <cstring>
#include <limits>
#include <memory>
#include <optional>
#include <vector>

#include "kernels/cpu/activation_f32.h"
#include "kernels/cpu/dispatch.h"
#include "kernels/cpu/linear_weights.h"
#include "kernels/packed_formats.h"
#include "kernels/ref/conv.h"
#include "kernels/ref/nn_common.h"
#include "kernels/registry.h"

namespace sparq {
namespace {

// W [n, k] packed for spmm_bsr4x4_f32 when the table says it beats dense
// there; NotSupported (naming `path`) otherwise.
StatusOr<BsrF32> PackWhenFaster(const Node& node, const float* w, int64_t n, int64_t k, const KernelSpeedTable& table,
                                const char* path, bool conv) {
  SPARQ_ASSIGN_OR_RETURN(BsrF32 packed, PackBsr(w, n, k, PackedFormat::kBsr4x4F32));
  const KernelTableLayer layer{conv, k};
  const double zero_blocks =
      packed.stats.blocks > 0 ? 1.0 - static_cast<double>(packed.stats.stored_blocks) / packed.stats.blocks : 0.0;
  const std::optional<double> speedup = table.MeasuredAtOrBelow("cpu", "block4x4", "f32", zero_blocks, &layer);
  if (!speedup || *speedup <= 1.0) {
    return Status::NotSupported(node.Describe() + ": " + path + ": the kernel table does not say block 4x4 beats " +
                                "dense at " + std::to_string(zero_blocks) + " zero blocks");
  }
  return packed;
}

// The table row that runs bsr4x4_f32 weights at the active ISA, for `eval --verbose`.
std::string Bsr4x4F32Kernel() {
  const CpuKernelDef* def = SelectCpuKernel(CpuOp::kSpmmBsrF32, PackedFormat::kBsr4x4F32);
  return def != nullptr ? def->name : "";
}

struct SparseLinear {
  BsrF32 w;                  // [N, K]
  std::vector<float> bias;   // [N] or empty
};

StatusOr<PreparedKernel> PrepareSparseLinear(const Node& node, const std::vector<const Tensor*>& constants,
                                             const PrepareContext& context) {
  SPARQ_ASSIGN_OR_RETURN(LinearWeights lw, ReadLinearWeights(node, constants, "bsr4x4_f32 path"));
  SPARQ_ASSIGN_OR_RETURN(BsrF32 packed,
                         PackWhenFaster(node, lw.w.data(), lw.n, lw.k, *context.kernel_table, "bsr4x4_f32 path", false));
  auto state = std::make_shared<SparseLinear>();
  state->w = std::move(packed);
  state->bias = std::move(lw.bias);
  return PreparedKernel{std::shared_ptr<const void>(std::move(state)), Bsr4x4F32Kernel()};
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

struct SparseConv {
  BsrF32 w;                     // [M, C * kh * kw]
  std::vector<float> bias;      // [M] or empty
  SigmoidF32Fn silu = nullptr;  // FusedConv with SiLU: its sigmoid_f32 row (FusedSiluRow)
};

StatusOr<PreparedKernel> PrepareSparseConv(const Node& node, const std::vector<const Tensor*>& constants,
                                           const PrepareContext& context) {
  auto decline = [&](const std::string& why) -> Status {
    return Status::NotSupported(node.Describe() + ": bsr4x4_f32 conv path: " + why);
  };
  const Tensor* w = constants.size() > 1 ? constants[1] : nullptr;
  if (w == nullptr || w->dtype() != DataType::kFloat32 || w->rank() != 4) return decline("W is not a constant 4-D float32");
  if (node.attr_int("group", 1) != 1) return decline("grouped convolution");
  const bool has_bias = node.inputs.size() > 2 && !node.inputs[2].empty();
  const Tensor* b = has_bias ? constants[2] : nullptr;
  if (has_bias && (b == nullptr || b->dtype() != DataType::kFloat32 || b->numel() != w->dim(0)))
    return decline("B is not a constant float32 bias per output channel");
  const int64_t m = w->dim(0), k = w->numel() / std::max<int64_t>(1, m);
  auto state = std::make_shared<SparseConv>();
  SPARQ_ASSIGN_OR_RETURN(state->w,
                         PackWhenFaster(node, w->data<float>(), m, k, *context.kernel_table, "bsr4x4_f32 conv path", true));
  if (b != nullptr) state->bias.assign(b->data<float>(), b->data<float>() + m);
  state->silu = cpu::FusedSiluRow(node);
  return PreparedKernel{std::shared_ptr<const void>(std::move(state)), Bsr4x4F32Kernel()};
}

Status RunSparseConv(OpContext& ctx) {
  const SparseConv& s = *static_cast<const SparseConv*>(ctx.prepared());
  const Tensor& x = ctx.input(0);
  if (x.dtype() != DataType::kFloat32 || x.rank() != 4) return RunReferenceKernel(ctx);
  ConvParams params;
  AutoPad auto_pad = AutoPad::kNotSet;
  if (!ReadWindowAttributes(ctx, &params.window, &auto_pad).ok()) return RunReferenceKernel(ctx);
  Shape y_shape;
  if (!PrepareConv(x.shape(), ctx.input(1).shape(), auto_pad, &params, &y_shape).ok()) return RunReferenceKernel(ctx);
  const int64_t c = x.dim(1), h = x.dim(2), wd = x.dim(3), ho = y_shape[2], wo = y_shape[3], p = ho * wo;
  const int64_t kh = params.window.kernel[0], kw = params.window.kernel[1];
  const int64_t sh = params.window.strides[0], sw = params.window.strides[1];
  const int64_t dh = params.window.dilations[0], dw = params.window.dilations[1];
  const int64_t pt = params.window.pads[0], pl = params.window.pads[1];
  float lo = -std::numeric_limits<float>::infinity(), hi = std::numeric_limits<float>::infinity();
  if (ctx.node().domain == kSparqDomain) {  // FusedConv
    lo = ctx.node().attr_float("out_min", lo);
    hi = ctx.node().attr_float("out_max", hi);
  }
  Tensor y(DataType::kFloat32, y_shape);
  Tensor col(DataType::kFloat32, {c * kh * kw, p});  // zeroed: the padding
  for (int64_t img = 0; img < x.dim(0); ++img) {
    const float* xi = x.data<float>() + img * c * h * wd;
    // Row (ch, ky, kx) of col: that tap of the input for every output pixel.
    ParallelFor(ctx.pool(), c * kh * kw, 4, [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        const int64_t ch = r / (kh * kw), ky = r / kw % kh, kx = r % kw;
        float* row = col.data<float>() + r * p;
        for (int64_t oy = 0; oy < ho; ++oy) {
          const int64_t iy = oy * sh - pt + ky * dh;
          float* out = row + oy * wo;
          if (iy < 0 || iy >= h) {
            std::memset(out, 0, sizeof(float) * wo);
            continue;
          }
          const float* src = xi + (ch * h + iy) * wd;
          for (int64_t ox = 0; ox < wo; ++ox) {
            const int64_t ix = ox * sw - pl + kx * dw;
            out[ox] = ix >= 0 && ix < wd ? src[ix] : 0.0f;
          }
        }
      }
    });
    SpmmBsrF32Args args;
    args.layout = SpmmLayout::kTransposed;
    args.m = p;
    args.x = col.data<float>();
    args.ld_x = p;
    args.w = &s.w;
    args.bias = s.bias.empty() ? nullptr : s.bias.data();
    args.y = y.data<float>() + img * s.w.rows * p;
    args.ld_y = p;
    args.pool = ctx.pool();
    Status st = RunSpmmBsrF32(args);
    if (!st.ok()) return ctx.Error(st.code(), st.message());
  }
  if (lo > -std::numeric_limits<float>::infinity() || hi < std::numeric_limits<float>::infinity()) {
    float* v = y.data<float>();
    ParallelFor(ctx.pool(), y.numel(), 16384, [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i) {
        const float above = v[i] < lo ? lo : v[i];  // NaN stays NaN
        v[i] = above > hi ? hi : above;
      }
    });
  }
  if (s.silu != nullptr) {  // each value on its own: any split gives the same bits
    float* v = y.data<float>();
    ParallelFor(ctx.pool(), y.numel(), 16384, [&](int64_t i0, int64_t i1) { s.silu(v + i0, v + i0, i1 - i0, true); });
  }
  ctx.set_output(0, std::move(y));
  return Status::OK();
}

}  // namespace

void RegisterPreparedCpuSparseOps(KernelRegistry& r) {
  r.Add({"Conv", "", 1, 99, RunSparseConv, "spmm_bsr4x4_f32", PrepareSparseConv, kPriorityFirst});
  r.Add({"FusedConv", kSparqDomain, 1, 99, RunSparseConv, "spmm_bsr4x4_f32", PrepareSparseConv, kPriorityFirst});
  r.Add({"MatMul", "", 1, 99, RunSparseLinear, "spmm_bsr4x4_f32", PrepareSparseLinear, kPriorityFirst});
  r.Add({"Gemm", "", 1, 99, RunSparseLinear, "spmm_bsr4x4_f32", PrepareSparseLinear, kPriorityFirst});
}

}  // namespace sparq
