// CUDA rows of the layers whose constant weight is block-sparse (cuda_rows.h
// lists them), on the Blocked-ELL layout of layouts.h, decided by the one
// rule of block_sparse_choice.h (the kernel speed table's GPU rows, else
// issue 23's 80% default):
//
//   MatMul, float16 weight     spmm_bell<B>_f16_cusparse (cuSPARSE SpMM) or
//                              spmm_bell<B>_f16_wmma (the own kernel,
//                              spmm_bell_wmma.cu): the table's pick, or
//                              CudaBackendOptions::block_sparse_kernel
//   QLinearMatMul,             qlinear_matmul_s8_bell<B>_{cusparse,wmma} /
//   sparq.MatMulIntegerToFloat matmul_s8_f32_bell<B>_{cusparse,wmma}: cuSPARSE's
//                              INT8 SpMM into int32, then device_kernels.h's
//                              requantize (float) epilogue kernel, or the own
//                              INT8 kernel with that epilogue fused (int8 out,
//                              no int32 matrix); the dense rows' bits exactly
//
// Every product is Y [M, N] = X [M, K] * W [K, N] computed as
//   Y^T [N, M] (column-major = Y row-major) = W^T [N, K] (Blocked-ELL) * X^T
// (X row-major read as X^T column-major): no transposes, and column-major B
// and C, which cuSPARSE's INT8 SpMM requires.
//
// CudaBackendOptions::block_sparse_kernel overrides the table's kernel (the
// prepared name stays the table's); the own kernel falls back to cuSPARSE
// where it cannot run (unaligned operands, below sm_80).
//
// INT8: the weight must be symmetric (int8 with zero point 0, or uint8 with
// 128, shifted to int8 at prepare): the activations' zero point then needs
// only the weight's row sums, computed once at prepare. A weight zero point
// other than that would need the activations' row sums: declined, the dense
// INT8 rows take such a node.
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "kernels/cuda/block_sparse_choice.h"
#include "kernels/cuda/cuda_rows.h"
#include "kernels/cuda/cuda_status.h"
#include "kernels/cuda/launch.h"
#include "kernels/cuda/layouts.h"
#include "kernels/cuda/spmm_bell_wmma.h"
#include "kernels/cuda/spmm_blocked_ell.h"

namespace sparq {
namespace cuda {
namespace {

// A prepared block-sparse weight: W^T [N, K] in Blocked-ELL and, for INT8,
// its row sums. Device copies are made by the first run on a context (the
// prepare step has no device).
template <typename T>
struct SparseWeight {
  BlockSparseChoice choice;
  BlockedEll<T> ell;
  std::vector<int32_t> row_sums;  // INT8: [N]

  mutable std::mutex mu;
  mutable const CudaContext* uploaded_for = nullptr;
  mutable std::shared_ptr<uint8_t> col_ind, values, sums;

  Status Upload(CudaContext& cuda) const {
    std::lock_guard<std::mutex> lock(mu);
    if (uploaded_for == &cuda) return Status::OK();
    SPARQ_ASSIGN_OR_RETURN(col_ind, UploadVector(cuda, ell.col_ind));
    SPARQ_ASSIGN_OR_RETURN(values, UploadVector(cuda, ell.values));
    if (!row_sums.empty()) {
      SPARQ_ASSIGN_OR_RETURN(sums, UploadVector(cuda, row_sums));
    }
    uploaded_for = &cuda;
    return Status::OK();
  }
};

// e.g. spmm_bell32_f16_wmma, qlinear_matmul_s8_bell64_cusparse.
std::string KernelName(const std::string& prefix, const BlockSparseChoice& c, const std::string& type) {
  return prefix + std::to_string(c.block) + (type.empty() ? "" : "_" + type) + "_" + BlockSparseKernelName(c.kernel);
}

// Y^T [N, M] = W^T * X^T on cuSPARSE (the layout note at the top).
template <typename T>
Status RunCusparse(const OpContext& ctx, CudaContext& cuda, const SparseWeight<T>& w, SpmmType type, const void* x,
                   int64_t m, void* y) {
  SpmmBlockedEllArgs args;
  args.type = type;
  args.rows = w.ell.padded_rows;
  args.cols = w.ell.padded_cols;
  args.block_size = w.ell.block_size;
  args.ell_cols = w.ell.ell_cols;
  args.col_ind = reinterpret_cast<const int32_t*>(w.col_ind.get());
  args.values = w.values.get();
  args.n = m;
  args.b = x;
  args.ldb = args.cols;
  args.c = y;
  args.ldc = args.rows;
  args.col_major = true;
  SPARQ_RETURN_IF_ERROR_WITH_CONTEXT(SpmmBlockedEll::CanImplement(args), ctx.node().Describe());
  SpmmBlockedEll spmm;
  SPARQ_RETURN_IF_ERROR_WITH_CONTEXT(spmm.Init(cuda.sparse(), args), ctx.node().Describe());
  SPARQ_ASSIGN_OR_RETURN(std::shared_ptr<uint8_t> workspace, Scratch(cuda, spmm.workspace_size()));
  return spmm.Run(cuda.sparse(), args, workspace.get(), cuda.stream()).WithContext(ctx.node().Describe());
}

// ---------------------------------------------------------------------------
// MatMul with a block-sparse constant float16 weight

StatusOr<PreparedKernel> PrepareBlockSparseF16(const Node& node, const std::vector<const Tensor*>& constants,
                                               const PrepareContext& context) {
  const Tensor* w = constants.size() > 1 ? constants[1] : nullptr;
  if (w == nullptr) return Status::NotSupported(node.Describe() + ": spmm_bell_f16 needs a constant weight");
  if (w->dtype() != DataType::kFloat16 || w->rank() != 2 || !w->device().is_host()) {
    return Status::NotSupported(node.Describe() + ": spmm_bell_f16 takes a 2-D float16 weight");
  }
  const int64_t K = w->dim(0), N = w->dim(1);
  std::vector<uint16_t> wt(static_cast<size_t>(K * N));  // W^T [N, K]
  const uint16_t* src = static_cast<const uint16_t*>(w->raw_data());
  for (int64_t k = 0; k < K; ++k)
    for (int64_t n = 0; n < N; ++n) wt[static_cast<size_t>(n * K + k)] = src[k * N + n];
  const KernelSpeedTable& table = context.kernel_table != nullptr ? *context.kernel_table : KernelSpeedTable::Default();
  StatusOr<BlockSparseChoice> choice = ChooseGpuBlockSparse(table, "f16", true, wt.data(), N, K);
  if (!choice.ok()) return Status::NotSupported(node.Describe() + ": " + choice.status().message());
  auto state = std::make_shared<SparseWeight<uint16_t>>();
  state->choice = *choice;
  SPARQ_ASSIGN_OR_RETURN(state->ell, DenseToBlockedEll(wt.data(), N, K, K, choice->block));
  return PreparedKernel{state, KernelName("spmm_bell", *choice, "f16")};
}

// The kernel a layer runs: the backend option, else the table's pick.
BlockSparseKernel KernelFor(const CudaContext& cuda, const BlockSparseChoice& c) {
  switch (cuda.options().block_sparse_kernel) {
    case CudaBackendOptions::SparseKernel::kCusparse: return BlockSparseKernel::kCusparse;
    case CudaBackendOptions::SparseKernel::kWmma: return BlockSparseKernel::kWmma;
    case CudaBackendOptions::SparseKernel::kTable: break;
  }
  return c.kernel;
}

Status MatMulBlockSparseF16(OpContext& ctx) {
  const auto* w = static_cast<const SparseWeight<uint16_t>*>(ctx.prepared());
  if (w == nullptr) return ctx.Internal("spmm_bell_f16 ran without its prepared weight");
  SPARQ_RETURN_IF_ERROR(RequireDeviceInput(ctx, 0));
  SPARQ_RETURN_IF_ERROR(RequireInputType(ctx, 0, DataType::kFloat16, "spmm_bell_f16"));
  SPARQ_ASSIGN_OR_RETURN(CudaContext * cuda, CudaContextOf(ctx));
  const Tensor& x = ctx.input(0);
  const int64_t K = w->ell.cols, N = w->ell.rows;
  SPARQ_ASSIGN_OR_RETURN(const Shape out, LinearOutputShape(ctx, x, K, N));
  const int64_t M = x.numel() / K;
  SPARQ_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, DataType::kFloat16, out));
  if (y->numel() == 0) return Status::OK();
  SPARQ_RETURN_IF_ERROR(w->Upload(*cuda));
  if (KernelFor(*cuda, w->choice) == BlockSparseKernel::kWmma) {
    BellWmmaArgs a;
    a.block = w->ell.block_size;
    a.n = N;
    a.k = K;
    a.ell_cols = w->ell.ell_cols;
    a.col_ind = reinterpret_cast<const int32_t*>(w->col_ind.get());
    a.values = w->values.get();
    a.m = M;
    a.x = x.raw_data();
    a.y = y->raw_data();
    if (CanImplementBellWmma(a).ok() && cuda->sm() >= 80) {
      return LaunchSpmmBellF16Wmma(a, cuda->stream()).WithContext(ctx.node().Describe());
    }
    // Unaligned operands or an older GPU: the same product on cuSPARSE.
  }
  return RunCusparse(ctx, *cuda, *w, SpmmType::kF16, x.raw_data(), M, y->raw_data());
}

// ---------------------------------------------------------------------------
// INT8: QLinearMatMul and sparq.MatMulIntegerToFloat with a block-sparse weight

// Prepare for a node whose weight is input w_in and its zero point input zp_in.
template <size_t kWeight, size_t kZeroPoint>
StatusOr<PreparedKernel> PrepareBlockSparseS8(const Node& node, const std::vector<const Tensor*>& constants,
                                              const PrepareContext& context) {
  const char* row = node.op_type == "QLinearMatMul" ? "qlinear_matmul_s8_bell" : "matmul_s8_f32_bell";
  const Tensor* w = constants.size() > kWeight ? constants[kWeight] : nullptr;
  if (w == nullptr) return Status::NotSupported(node.Describe() + ": " + row + " needs a constant weight");
  SPARQ_RETURN_IF_ERROR(CheckIntegerToFloatActivation(node));
  const bool has_zp = node.inputs.size() > kZeroPoint && !node.inputs[kZeroPoint].empty();
  const Tensor* zp = has_zp && constants.size() > kZeroPoint ? constants[kZeroPoint] : nullptr;
  if (has_zp && zp == nullptr) return Status::NotSupported(node.Describe() + ": the weight zero point is not a constant");
  StatusOr<SignedSparseWeight> sw = SignedWeightForSparse(*w, zp);
  if (!sw.ok()) return Status::NotSupported(node.Describe() + ": " + sw.status().message());
  const KernelSpeedTable& table = context.kernel_table != nullptr ? *context.kernel_table : KernelSpeedTable::Default();
  StatusOr<BlockSparseChoice> choice = ChooseGpuBlockSparse(table, "s8", true, sw->wt.data(), sw->n, sw->k);
  if (!choice.ok()) return Status::NotSupported(node.Describe() + ": " + choice.status().message());
  auto state = std::make_shared<SparseWeight<int8_t>>();
  state->choice = *choice;
  SPARQ_ASSIGN_OR_RETURN(state->ell, DenseToBlockedEll(sw->wt.data(), sw->n, sw->k, sw->k, choice->block));
  state->row_sums = std::move(sw->row_sums);
  return PreparedKernel{state, KernelName(row, *choice, "")};
}

// Activations as int8 on the device (uint8 shifted into scratch) and the zero point, shifted alike.
struct SignedActivations {
  const int8_t* data = nullptr;
  std::shared_ptr<uint8_t> holder;
  int32_t zero_point = 0;
};

StatusOr<SignedActivations> ActivationsOf(const OpContext& ctx, CudaContext& cuda, size_t x_in, size_t zp_in) {
  SPARQ_RETURN_IF_ERROR(RequireDeviceInput(ctx, x_in));
  SignedActivations a;
  SPARQ_ASSIGN_OR_RETURN(const SignedView x, AsSigned(ctx, cuda, ctx.input(x_in), "the activations"));
  SPARQ_ASSIGN_OR_RETURN(const std::vector<int32_t> zp, ZeroPoints(ctx, zp_in, x.shifted, "the activations' zero point"));
  if (zp.size() != 1) return ctx.NotSupported("the activations' zero point per tensor only");
  a.data = x.data;
  a.holder = x.holder;
  a.zero_point = zp[0];
  return a;
}

// The operands of an INT8 layer's product: the signed activations [M, K] and
// the epilogue's arguments (zero-point correction by the weight's row sums,
// nothing else: the weight's zero point is 0), the output's shape.
struct SparseS8Operands {
  SignedActivations a;
  RequantArgs r;
  Shape out;
};

StatusOr<SparseS8Operands> S8Operands(OpContext& ctx, CudaContext& cuda, const SparseWeight<int8_t>& w, size_t x_in,
                                      size_t zp_in) {
  const Tensor& x = ctx.input(x_in);
  const int64_t K = w.ell.cols, N = w.ell.rows;
  SparseS8Operands p;
  SPARQ_ASSIGN_OR_RETURN(p.out, LinearOutputShape(ctx, x, K, N));
  p.r.rows = x.numel() / K;
  p.r.cols = N;
  p.r.k = static_cast<int32_t>(K);
  if (p.r.rows == 0) return p;
  SPARQ_ASSIGN_OR_RETURN(p.a, ActivationsOf(ctx, cuda, x_in, zp_in));
  SPARQ_RETURN_IF_ERROR(w.Upload(cuda));
  p.r.a_zp_scalar = p.a.zero_point;
  if (p.a.zero_point != 0) p.r.b_sum = reinterpret_cast<const int32_t*>(w.sums.get());
  return p;
}

// The own kernel's arguments for the layer, when it is to run and can:
// nullopt for cuSPARSE.
std::optional<BellWmmaArgs> OwnKernelArgs(const CudaContext& cuda, const BlockSparseChoice& choice,
                                          const SparseWeight<int8_t>& w, const SparseS8Operands& p, void* y) {
  if (KernelFor(cuda, choice) != BlockSparseKernel::kWmma || cuda.sm() < 80) return std::nullopt;
  BellWmmaArgs a;
  a.block = w.ell.block_size;
  a.n = w.ell.rows;
  a.k = w.ell.cols;
  a.ell_cols = w.ell.ell_cols;
  a.col_ind = reinterpret_cast<const int32_t*>(w.col_ind.get());
  a.values = w.values.get();
  a.m = p.r.rows;
  a.x = p.a.data;
  a.y = y;
  if (!CanImplementBellWmma(a).ok()) return std::nullopt;
  return a;
}

// cuSPARSE's int32 sums into a scratch matrix, which r.acc then points at (held by the returned buffer).
StatusOr<std::shared_ptr<uint8_t>> CusparseSums(const OpContext& ctx, CudaContext& cuda, const SparseWeight<int8_t>& w,
                                                SparseS8Operands& p) {
  SPARQ_ASSIGN_OR_RETURN(std::shared_ptr<uint8_t> acc,
                         Scratch(cuda, static_cast<size_t>(p.r.rows * p.r.cols) * sizeof(int32_t)));
  SPARQ_RETURN_IF_ERROR(RunCusparse(ctx, cuda, w, SpmmType::kS8, p.a.data, p.r.rows, acc.get()));
  p.r.acc = reinterpret_cast<const int32_t*>(acc.get());
  return acc;
}

Status QLinearMatMulBlockSparseS8(OpContext& ctx) {
  SPARQ_RETURN_IF_ERROR(ctx.RequireInputs(7));
  const auto* w = static_cast<const SparseWeight<int8_t>*>(ctx.prepared());
  if (w == nullptr) return ctx.Internal("qlinear_matmul_s8_bell ran without its prepared weight");
  SPARQ_ASSIGN_OR_RETURN(CudaContext * cuda, CudaContextOf(ctx));
  const DataType y_type = ctx.has_input(7) ? ctx.input(7).dtype() : ctx.input(0).dtype();
  if (y_type != DataType::kInt8 && y_type != DataType::kUInt8) return ctx.NotSupported("output type must be int8 / uint8");
  SPARQ_ASSIGN_OR_RETURN(const float a_scale, SingleFloat(ctx, 1, "a_scale"));
  SPARQ_ASSIGN_OR_RETURN(const std::vector<float> b_scale, HostFloats(ctx, 4, "b_scale"));
  SPARQ_ASSIGN_OR_RETURN(const float y_scale, SingleFloat(ctx, 6, "y_scale"));
  if (b_scale.size() != 1 && static_cast<int64_t>(b_scale.size()) != w->ell.rows) {
    return ctx.NotSupported("b_scale per tensor or per column only");
  }
  SPARQ_ASSIGN_OR_RETURN(const int32_t y_zp, OutputZeroPoint(ctx, 7));
  SPARQ_ASSIGN_OR_RETURN(SparseS8Operands p, S8Operands(ctx, *cuda, *w, 0, 2));
  SPARQ_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, y_type, p.out));
  if (y->numel() == 0) return Status::OK();
  SPARQ_ASSIGN_OR_RETURN(std::shared_ptr<uint8_t> mult_dev, UploadMultipliers(*cuda, a_scale, b_scale, y_scale));
  p.r.multiplier = reinterpret_cast<const float*>(mult_dev.get());
  p.r.multiplier_per_col = b_scale.size() > 1;
  p.r.y_zp = y_zp;
  p.r.out_signed = y_type == DataType::kInt8;
  p.r.out = y->raw_data();
  if (std::optional<BellWmmaArgs> own = OwnKernelArgs(*cuda, w->choice, *w, p, y->raw_data())) {
    return LaunchSpmmBellS8Requantize(*own, p.r, cuda->stream()).WithContext(ctx.node().Describe());
  }
  SPARQ_ASSIGN_OR_RETURN(std::shared_ptr<uint8_t> acc, CusparseSums(ctx, *cuda, *w, p));
  return LaunchRequantize(p.r, cuda->stream()).WithContext(ctx.node().Describe());
}

Status MatMulIntegerToFloatBlockSparseS8(OpContext& ctx) {
  SPARQ_RETURN_IF_ERROR(ctx.RequireInputs(6));
  const auto* w = static_cast<const SparseWeight<int8_t>*>(ctx.prepared());
  if (w == nullptr) return ctx.Internal("matmul_s8_f32_bell ran without its prepared weight");
  SPARQ_ASSIGN_OR_RETURN(CudaContext * cuda, CudaContextOf(ctx));
  std::shared_ptr<uint8_t> scale_dev;
  SPARQ_ASSIGN_OR_RETURN(const FloatEpilogue e, MakeFloatEpilogue(ctx, *cuda, w->ell.rows, &scale_dev));
  SPARQ_ASSIGN_OR_RETURN(SparseS8Operands p, S8Operands(ctx, *cuda, *w, 0, 2));
  SPARQ_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, DataType::kFloat32, p.out));
  if (y->numel() == 0) return Status::OK();
  float* yp = static_cast<float*>(y->raw_data());
  if (std::optional<BellWmmaArgs> own = OwnKernelArgs(*cuda, w->choice, *w, p, yp)) {
    return LaunchSpmmBellS8ToFloat(*own, p.r, e, cuda->stream()).WithContext(ctx.node().Describe());
  }
  SPARQ_ASSIGN_OR_RETURN(std::shared_ptr<uint8_t> acc, CusparseSums(ctx, *cuda, *w, p));
  return LaunchAccToFloat(p.r, e, yp, cuda->stream()).WithContext(ctx.node().Describe());
}

}  // namespace

void RegisterCudaSparseRows(KernelRegistry& r) {
  r.Add(CudaRow("MatMul", "", 1, WithHostFallback<MatMulBlockSparseF16>, "spmm_bell_f16", PrepareBlockSparseF16, 0,
                kCudaPrioritySpecial));
  const uint32_t qlinear_params = HostInput(1) | HostInput(2) | HostInput(4) | HostInput(5) | HostInput(6) | HostInput(7);
  r.Add(CudaRow("QLinearMatMul", "", 10, WithHostFallback<QLinearMatMulBlockSparseS8>, "qlinear_matmul_s8_bell",
                PrepareBlockSparseS8<3, 5>, qlinear_params, kCudaPrioritySpecial));
  r.Add(CudaRow("MatMulIntegerToFloat", kSparqDomain, 1, WithHostFallback<MatMulIntegerToFloatBlockSparseS8>,
                "matmul_s8_f32_bell", PrepareBlockSparseS8<1, 3>,
                HostInput(2) | HostInput(3) | HostInput(4) | HostInput(5), kCudaPrioritySpecial));
}

}  // namespace cuda
}  // namespace sparq
