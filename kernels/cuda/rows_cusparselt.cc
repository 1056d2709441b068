// The CUDA row of MatMul with a constant 2:4-sparse float16 weight on
// cuSPARSELt (spmm_cusparselt.h; cuda_rows.h lists it): spmm_24_f16_cusparselt.
//
// It takes a node only where the kernel speed table says 2:4 beats dense on
// this backend (a `cuda,2:4,f16,...` row with a speed-up above 1 for the
// layer, KernelSpeedTable::MeasuredAtOrBelow): on an H200 cuSPARSELt's 2:4
// GEMM was slower than dense cuBLASLt FP16 at every real layer shape (issue
// 23: 0.81-0.97x), so the default table has no such row and the dense
// gemm_f16_cublaslt runs. `gpu_bench --speedups` measures and writes the row.
//
//   prepare (host, no GPU)  W [K, N] float16 constant, 2:4 along K (sparse24.h),
//                           N and K multiples of 16, the table, the library opens
//   first run per context   cusparseLtSpMMACompress2 of the weight's device copy
//                           (the executor uploaded it as the node's input 1)
//   first run per M         the plan (descriptors for X^T, Y^T), its workspace,
//                           cusparseLtMatmulSearch (runs it: Y is written)
//   every run               cusparseLtMatmul on the context's stream
//
// Rows of X that cuSPARSELt does not take (M not a multiple of 16, a
// misaligned view) run the dense cuBLASLt GEMM on the same weight instead:
// the node stays on the GPU.
#include <map>
#include <mutex>
#include <optional>
#include <string>

#include "kernels/cuda/cuda_rows.h"
#include "kernels/cuda/cuda_status.h"
#include "kernels/cuda/gemm_cublaslt.h"
#include "kernels/cuda/sparse24.h"
#include "kernels/cuda/spmm_cusparselt.h"

namespace sparq {
namespace cuda {
namespace {

// Above the Blocked-ELL row (kCudaPrioritySpecial): a 2:4 weight is 50%
// sparse, below Blocked-ELL's threshold, so the two never compete for a node.
constexpr int kSparse24Priority = kCudaPrioritySpecial + 3;

struct Sparse24Weight {
  int64_t k = 0, n = 0;
  // Per context: the compressed weight, and a searched plan per M.
  struct OnContext {
    SparseWeight24 weight;
    std::shared_ptr<uint8_t> compressed;
    std::map<int64_t, std::unique_ptr<SpmmLt>> plans;
  };
  mutable std::mutex mu;
  mutable std::map<const CudaContext*, std::unique_ptr<OnContext>> contexts;
};

StatusOr<PreparedKernel> PrepareSparse24(const Node& node, const std::vector<const Tensor*>& constants,
                                         const PrepareContext& context) {
  const Tensor* w = constants.size() > 1 ? constants[1] : nullptr;
  if (w == nullptr || w->dtype() != DataType::kFloat16 || w->rank() != 2 || !w->device().is_host()) {
    return Status::NotSupported(node.Describe() + ": spmm_24_f16_cusparselt takes a constant 2-D float16 weight");
  }
  const int64_t K = w->dim(0), N = w->dim(1);
  if (K % 16 != 0 || N % 16 != 0) {
    return Status::NotSupported(node.Describe() + ": spmm_24_f16_cusparselt wants K and N multiples of 16");
  }
  if (!Is24SparseAlongK(static_cast<const uint16_t*>(w->raw_data()), K, N)) {
    return Status::NotSupported(node.Describe() + ": the weight is not 2:4 sparse along K");
  }
  KernelTableLayer layer;
  layer.k = K;
  const std::optional<double> speedup = context.kernel_table->MeasuredAtOrBelow("cuda", "2:4", "f16", 0.5, &layer);
  if (!speedup || *speedup <= 1.0) {
    return Status::NotSupported(node.Describe() + ": 2:4 on cuSPARSELt is not measured faster than dense here (" +
                                (speedup ? "speed-up " + std::to_string(*speedup) : std::string("no cuda 2:4 f16 row")) +
                                " in the kernel speed table)");
  }
  SPARQ_RETURN_IF_ERROR_WITH_CONTEXT(CusparseLtAvailable(), node.Describe());
  auto state = std::make_shared<Sparse24Weight>();
  state->k = K;
  state->n = N;
  return PreparedKernel{state, "spmm_24_f16_cusparselt"};
}

// The dense GEMM of the same node (rows cuSPARSELt does not take).
Status DenseF16(CudaContext& cuda, const Tensor& x, const Tensor& w, Tensor* y, int64_t m, int64_t k, int64_t n) {
  LtGemmArgs args;
  args.type = LtGemmType::kF16;
  args.m = m;
  args.n = n;
  args.k = k;
  args.a = x.raw_data();
  args.lda = k;
  args.b = w.raw_data();
  args.ldb = n;
  args.c = y->raw_data();
  args.ldc = n;
  return RunCudaGemm(cuda, args);
}

Status MatMulSparse24F16(OpContext& ctx) {
  const auto* state = static_cast<const Sparse24Weight*>(ctx.prepared());
  if (state == nullptr) return ctx.Internal("spmm_24_f16_cusparselt ran without its prepared weight");
  SPARQ_RETURN_IF_ERROR(RequireDeviceInput(ctx, 0));
  SPARQ_RETURN_IF_ERROR(RequireDeviceInput(ctx, 1));
  SPARQ_RETURN_IF_ERROR(RequireInputType(ctx, 0, DataType::kFloat16, "spmm_24_f16_cusparselt"));
  SPARQ_RETURN_IF_ERROR(RequireInputType(ctx, 1, DataType::kFloat16, "spmm_24_f16_cusparselt"));
  SPARQ_ASSIGN_OR_RETURN(CudaContext * cuda, CudaContextOf(ctx));
  const Tensor& x = ctx.input(0);
  const Tensor& w = ctx.input(1);
  const int64_t K = state->k, N = state->n;
  SPARQ_ASSIGN_OR_RETURN(const Shape out, LinearOutputShape(ctx, x, K, N));
  const int64_t M = x.numel() / K;
  SPARQ_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, DataType::kFloat16, out));
  if (y->numel() == 0) return Status::OK();
  SpmmLtArgs args;
  args.m = M;
  args.n = N;
  args.k = K;
  args.x = x.raw_data();
  args.y = y->raw_data();
  args.device = cuda->device().index;
  if (!SpmmLt::CanImplement(args).ok()) {
    return DenseF16(*cuda, x, w, y, M, K, N).WithContext(ctx.node().Describe());
  }
  std::lock_guard<std::mutex> lock(state->mu);
  std::unique_ptr<Sparse24Weight::OnContext>& on = state->contexts[cuda];
  if (on == nullptr) {
    auto made = std::make_unique<Sparse24Weight::OnContext>();
    SPARQ_RETURN_IF_ERROR_WITH_CONTEXT(made->weight.Init(args), ctx.node().Describe());
    SPARQ_ASSIGN_OR_RETURN(made->compressed, Scratch(*cuda, made->weight.compressed_size()));
    SPARQ_ASSIGN_OR_RETURN(std::shared_ptr<uint8_t> buffer, Scratch(*cuda, made->weight.compress_buffer_size()));
    SPARQ_RETURN_IF_ERROR_WITH_CONTEXT(
        made->weight.Compress(w.raw_data(), made->compressed.get(), buffer.get(), cuda->stream()),
        ctx.node().Describe());
    on = std::move(made);
  }
  std::unique_ptr<SpmmLt>& plan = on->plans[M];
  if (plan == nullptr) {
    auto made = std::make_unique<SpmmLt>();
    SPARQ_RETURN_IF_ERROR_WITH_CONTEXT(made->Init(on->weight, args), ctx.node().Describe());
    SPARQ_ASSIGN_OR_RETURN(std::shared_ptr<uint8_t> workspace, Scratch(*cuda, made->workspace_size()));
    SPARQ_RETURN_IF_ERROR_WITH_CONTEXT(made->Search(args, on->compressed.get(), workspace.get(), cuda->stream()),
                                       ctx.node().Describe());
    plan = std::move(made);
  }
  // (After a search too: Y is then the chosen algorithm's, as on every later run.)
  SPARQ_ASSIGN_OR_RETURN(std::shared_ptr<uint8_t> workspace, Scratch(*cuda, plan->workspace_size()));
  return plan->Run(args, on->compressed.get(), workspace.get(), cuda->stream()).WithContext(ctx.node().Describe());
}

}  // namespace

void RegisterCudaSparse24Rows(KernelRegistry& r) {
  r.Add(CudaRow("MatMul", "", 1, WithHostFallback<MatMulSparse24F16>, "spmm_24_f16_cusparselt", PrepareSparse24, 0,
                kSparse24Priority));
}

}  // namespace cuda
}  // namespace sparq
