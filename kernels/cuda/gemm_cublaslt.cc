#include "kernels/cuda/gemm_cublaslt.h"

#include <algorithm>
#include <cstdint>

#include "kernels/cuda/cuda_status.h"

namespace sparq {
namespace cuda {
namespace {

struct LtTypes {
  cublasComputeType_t compute;
  cudaDataType_t scale, ab, c;
  size_t ab_size, c_size;
};

LtTypes TypesOf(LtGemmType type) {
  switch (type) {
    case LtGemmType::kTF32: return {CUBLAS_COMPUTE_32F_FAST_TF32, CUDA_R_32F, CUDA_R_32F, CUDA_R_32F, 4, 4};
    case LtGemmType::kF16: return {CUBLAS_COMPUTE_32F, CUDA_R_32F, CUDA_R_16F, CUDA_R_16F, 2, 2};
    case LtGemmType::kS8S32: return {CUBLAS_COMPUTE_32I, CUDA_R_32I, CUDA_R_8I, CUDA_R_32I, 1, 4};
    case LtGemmType::kF32: break;
  }
  return {CUBLAS_COMPUTE_32F, CUDA_R_32F, CUDA_R_32F, CUDA_R_32F, 4, 4};
}

// The largest power of two (<= 256) dividing the address.
uint32_t AlignmentOf(const void* p) {
  const uintptr_t v = reinterpret_cast<uintptr_t>(p);
  uint32_t a = 256;
  while (a > 1 && v % a != 0) a /= 2;
  return a;
}

std::string Dims(const LtGemmArgs& a) {
  return std::string(LtGemmTypeName(a.type)) + " GEMM m=" + std::to_string(a.m) + " n=" + std::to_string(a.n) +
         " k=" + std::to_string(a.k);
}

}  // namespace

const char* LtGemmTypeName(LtGemmType type) {
  switch (type) {
    case LtGemmType::kF32: return "f32";
    case LtGemmType::kTF32: return "tf32";
    case LtGemmType::kF16: return "f16";
    case LtGemmType::kS8S32: return "s8s32";
  }
  return "?";
}

std::string LtGemm::Key(const LtGemmArgs& a) {
  const int64_t v[] = {static_cast<int64_t>(a.type), a.m, a.n, a.k, a.lda, a.ldb, a.ldc, a.trans_a, a.trans_b,
                       a.batch, a.stride_a, a.stride_b, a.stride_c, AlignmentOf(a.a), AlignmentOf(a.b),
                       AlignmentOf(a.c)};
  std::string key;
  for (int64_t x : v) key += std::to_string(x) + ",";
  return key;
}

LtGemm::~LtGemm() { Destroy(); }

void LtGemm::Destroy() {
  // Destroying a descriptor cannot fail on valid handles; nothing could report it here.
  if (a_layout_ != nullptr) (void)cublasLtMatrixLayoutDestroy(a_layout_);
  if (b_layout_ != nullptr) (void)cublasLtMatrixLayoutDestroy(b_layout_);
  if (c_layout_ != nullptr) (void)cublasLtMatrixLayoutDestroy(c_layout_);
  if (desc_ != nullptr) (void)cublasLtMatmulDescDestroy(desc_);
  a_layout_ = b_layout_ = c_layout_ = nullptr;
  desc_ = nullptr;
  ready_ = false;
}

Status LtGemm::CanImplement(const LtGemmArgs& a) {
  if (a.m < 1 || a.n < 1 || a.k < 1 || a.batch < 1) {
    return Status::InvalidArgument(Dims(a) + " batch=" + std::to_string(a.batch) + ": every size must be positive");
  }
  if (a.a == nullptr || a.b == nullptr || a.c == nullptr) return Status::InvalidArgument(Dims(a) + ": null operand");
  const int64_t a_cols = a.trans_a ? a.m : a.k, b_cols = a.trans_b ? a.k : a.n;
  if (a.lda < a_cols || a.ldb < b_cols || a.ldc < a.n) {
    return Status::InvalidArgument(Dims(a) + ": a leading dimension is below its row length");
  }
  if (a.m > INT32_MAX || a.n > INT32_MAX || a.k > INT32_MAX || a.batch > INT32_MAX) {
    return Status::NotSupported(Dims(a) + ": sizes past 2^31");
  }
  if (a.type == LtGemmType::kS8S32) {
    if (a.trans_a || !a.trans_b) {
      return Status::NotSupported(Dims(a) + ": INT8 GEMM takes A [m, k] and B as [n, k] (cuBLASLt's TN form) only");
    }
    if (a.k % 4 != 0 || a.lda % 4 != 0 || a.ldb % 4 != 0 || a.ldc % 4 != 0) {
      return Status::NotSupported(Dims(a) + ": INT8 GEMM needs k and leading dimensions in multiples of 4");
    }
    if (AlignmentOf(a.a) < 4 || AlignmentOf(a.b) < 4 || AlignmentOf(a.c) < 16) {
      return Status::NotSupported(Dims(a) + ": INT8 GEMM operands are misaligned");
    }
  }
  return Status::OK();
}

Status LtGemm::Init(cublasLtHandle_t lt, const LtGemmArgs& a, size_t max_workspace) {
  Destroy();
  const LtTypes t = TypesOf(a.type);
  SPARQ_CUDA_RETURN_IF_ERROR(cublasLtMatmulDescCreate(&desc_, t.compute, t.scale));
  // cuBLASLt's A is our B, its B our A (see the header).
  const cublasOperation_t op_a = a.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_b = a.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  SPARQ_CUDA_RETURN_IF_ERROR(
      cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_TRANSA, &op_a, sizeof(op_a)));
  SPARQ_CUDA_RETURN_IF_ERROR(
      cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_TRANSB, &op_b, sizeof(op_b)));
  // Stored column-major shapes: our B [k, n] is n x k, [n, k] is k x n; our A [m, k] is k x m, [k, m] is m x k.
  const uint64_t la_rows = a.trans_b ? a.k : a.n, la_cols = a.trans_b ? a.n : a.k;
  const uint64_t lb_rows = a.trans_a ? a.m : a.k, lb_cols = a.trans_a ? a.k : a.m;
  SPARQ_CUDA_RETURN_IF_ERROR(cublasLtMatrixLayoutCreate(&a_layout_, t.ab, la_rows, la_cols, a.ldb));
  SPARQ_CUDA_RETURN_IF_ERROR(cublasLtMatrixLayoutCreate(&b_layout_, t.ab, lb_rows, lb_cols, a.lda));
  SPARQ_CUDA_RETURN_IF_ERROR(cublasLtMatrixLayoutCreate(&c_layout_, t.c, a.n, a.m, a.ldc));
  if (a.batch > 1) {
    const int32_t batch = static_cast<int32_t>(a.batch);
    const struct {
      cublasLtMatrixLayout_t layout;
      int64_t stride;
    } layouts[] = {{a_layout_, a.stride_b}, {b_layout_, a.stride_a}, {c_layout_, a.stride_c}};
    for (const auto& l : layouts) {
      SPARQ_CUDA_RETURN_IF_ERROR(
          cublasLtMatrixLayoutSetAttribute(l.layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &batch, sizeof(batch)));
      SPARQ_CUDA_RETURN_IF_ERROR(cublasLtMatrixLayoutSetAttribute(l.layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                                                                  &l.stride, sizeof(l.stride)));
    }
  }
  cublasLtMatmulPreference_t pref = nullptr;
  SPARQ_CUDA_RETURN_IF_ERROR(cublasLtMatmulPreferenceCreate(&pref));
  struct PrefGuard {
    cublasLtMatmulPreference_t p;
    ~PrefGuard() { (void)cublasLtMatmulPreferenceDestroy(p); }
  } guard{pref};
  const uint64_t ws = max_workspace;
  SPARQ_CUDA_RETURN_IF_ERROR(
      cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws)));
  // The alignment the operands really have (batched strides included), so the
  // algorithm chosen never assumes more.
  uint32_t align_a = AlignmentOf(a.b), align_b = AlignmentOf(a.a), align_c = AlignmentOf(a.c);
  if (a.batch > 1) {
    align_a = std::min(align_a, AlignmentOf(reinterpret_cast<const void*>(a.stride_b * static_cast<int64_t>(t.ab_size))));
    align_b = std::min(align_b, AlignmentOf(reinterpret_cast<const void*>(a.stride_a * static_cast<int64_t>(t.ab_size))));
    align_c = std::min(align_c, AlignmentOf(reinterpret_cast<const void*>(a.stride_c * static_cast<int64_t>(t.c_size))));
  }
  SPARQ_CUDA_RETURN_IF_ERROR(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES,
                                                                  &align_a, sizeof(align_a)));
  SPARQ_CUDA_RETURN_IF_ERROR(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                                                                  &align_b, sizeof(align_b)));
  SPARQ_CUDA_RETURN_IF_ERROR(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES,
                                                                  &align_c, sizeof(align_c)));
  SPARQ_CUDA_RETURN_IF_ERROR(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES,
                                                                  &align_c, sizeof(align_c)));
  cublasLtMatmulHeuristicResult_t result{};
  int returned = 0;
  SPARQ_CUDA_RETURN_IF_ERROR(cublasLtMatmulAlgoGetHeuristic(lt, desc_, a_layout_, b_layout_, c_layout_, c_layout_, pref,
                                                            1, &result, &returned));
  if (returned == 0) return Status::NotSupported(Dims(a) + ": cuBLASLt has no algorithm for it on this device");
  algo_ = result.algo;
  workspace_size_ = result.workspaceSize;
  ready_ = true;
  return Status::OK();
}

Status LtGemm::Run(cublasLtHandle_t lt, const LtGemmArgs& a, void* workspace, cudaStream_t stream) const {
  if (!ready_) return Status::Internal(Dims(a) + ": LtGemm::Run before a successful Init");
  if (workspace_size_ > 0 && workspace == nullptr) return Status::InvalidArgument(Dims(a) + ": no workspace");
  if (a.type == LtGemmType::kS8S32) {
    const int32_t alpha = static_cast<int32_t>(a.alpha), beta = static_cast<int32_t>(a.beta);
    SPARQ_CUDA_RETURN_IF_ERROR(cublasLtMatmul(lt, desc_, &alpha, a.b, a_layout_, a.a, b_layout_, &beta, a.c, c_layout_,
                                              a.c, c_layout_, &algo_, workspace, workspace_size_, stream));
  } else {
    const float alpha = a.alpha, beta = a.beta;
    SPARQ_CUDA_RETURN_IF_ERROR(cublasLtMatmul(lt, desc_, &alpha, a.b, a_layout_, a.a, b_layout_, &beta, a.c, c_layout_,
                                              a.c, c_layout_, &algo_, workspace, workspace_size_, stream));
  }
  return Status::OK();
}

}  // namespace cuda
}  // namespace sparq
