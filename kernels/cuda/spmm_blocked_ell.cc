#include "kernels/cuda/spmm_blocked_ell.h"

#include <string>

#include "kernels/cuda/cuda_status.h"

namespace sparq {
namespace cuda {
namespace {

struct SpmmTypes {
  cudaDataType_t ab, c, compute;
};

SpmmTypes TypesOf(SpmmType t) {
  switch (t) {
    case SpmmType::kF32: return {CUDA_R_32F, CUDA_R_32F, CUDA_R_32F};
    case SpmmType::kS8: return {CUDA_R_8I, CUDA_R_32I, CUDA_R_32I};
    case SpmmType::kF16: break;
  }
  return {CUDA_R_16F, CUDA_R_16F, CUDA_R_32F};
}

std::string Dims(const SpmmBlockedEllArgs& a) {
  return "Blocked-ELL SpMM " + std::to_string(a.rows) + " x " + std::to_string(a.cols) + " (block " +
         std::to_string(a.block_size) + ", " + std::to_string(a.ell_cols) + " ELL columns) x n=" + std::to_string(a.n);
}

// alpha and beta in the compute type, as cusparseSpMM reads them.
struct Scalars {
  float f[2];
  int32_t i[2];
  const void* alpha(SpmmType t) const { return t == SpmmType::kS8 ? static_cast<const void*>(&i[0]) : &f[0]; }
  const void* beta(SpmmType t) const { return t == SpmmType::kS8 ? static_cast<const void*>(&i[1]) : &f[1]; }
};
Scalars ScalarsOf(const SpmmBlockedEllArgs& a) {
  return {{a.alpha, a.beta}, {static_cast<int32_t>(a.alpha), static_cast<int32_t>(a.beta)}};
}

}  // namespace

SpmmBlockedEll::~SpmmBlockedEll() { Destroy(); }

void SpmmBlockedEll::Destroy() {
  if (a_ != nullptr) (void)cusparseDestroySpMat(a_);
  if (b_ != nullptr) (void)cusparseDestroyDnMat(b_);
  if (c_ != nullptr) (void)cusparseDestroyDnMat(c_);
  a_ = nullptr;
  b_ = c_ = nullptr;
  ready_ = false;
}

Status SpmmBlockedEll::CanImplement(const SpmmBlockedEllArgs& a) {
  if (a.rows < 1 || a.cols < 1 || a.n < 1 || a.block_size < 1 || a.ell_cols < a.block_size) {
    return Status::InvalidArgument(Dims(a) + ": sizes must be positive, ell_cols at least one block");
  }
  if (a.rows % a.block_size != 0 || a.cols % a.block_size != 0 || a.ell_cols % a.block_size != 0) {
    return Status::NotSupported(Dims(a) + ": rows, columns and ELL columns must be multiples of the block size");
  }
  if (a.col_ind == nullptr || a.values == nullptr || a.b == nullptr || a.c == nullptr) {
    return Status::InvalidArgument(Dims(a) + ": null operand");
  }
  if (a.type == SpmmType::kS8 && !a.col_major) {
    return Status::NotSupported(Dims(a) + ": INT8 Blocked-ELL SpMM needs column-major B and C");
  }
  const int64_t min_ldb = a.col_major ? a.cols : a.n, min_ldc = a.col_major ? a.rows : a.n;
  if (a.ldb < min_ldb || a.ldc < min_ldc) return Status::InvalidArgument(Dims(a) + ": leading dimension too small");
  return Status::OK();
}

Status SpmmBlockedEll::Init(cusparseHandle_t handle, const SpmmBlockedEllArgs& a) {
  Destroy();
  const SpmmTypes t = TypesOf(a.type);
  const cusparseOrder_t order = a.col_major ? CUSPARSE_ORDER_COL : CUSPARSE_ORDER_ROW;
  SPARQ_CUDA_RETURN_IF_ERROR(cusparseCreateBlockedEll(&a_, a.rows, a.cols, a.block_size, a.ell_cols,
                                                      const_cast<int32_t*>(a.col_ind), const_cast<void*>(a.values),
                                                      CUSPARSE_INDEX_32I, CUSPARSE_INDEX_BASE_ZERO, t.ab));
  SPARQ_CUDA_RETURN_IF_ERROR(cusparseCreateDnMat(&b_, a.cols, a.n, a.ldb, const_cast<void*>(a.b), t.ab, order));
  SPARQ_CUDA_RETURN_IF_ERROR(cusparseCreateDnMat(&c_, a.rows, a.n, a.ldc, a.c, t.c, order));
  const Scalars s = ScalarsOf(a);
  SPARQ_CUDA_RETURN_IF_ERROR(cusparseSpMM_bufferSize(handle, CUSPARSE_OPERATION_NON_TRANSPOSE,
                                                     CUSPARSE_OPERATION_NON_TRANSPOSE, s.alpha(a.type), a_, b_,
                                                     s.beta(a.type), c_, t.compute, CUSPARSE_SPMM_BLOCKED_ELL_ALG1,
                                                     &workspace_size_));
  ready_ = true;
  return Status::OK();
}

Status SpmmBlockedEll::Run(cusparseHandle_t handle, const SpmmBlockedEllArgs& a, void* workspace,
                           cudaStream_t stream) {
  if (!ready_) return Status::Internal(Dims(a) + ": SpmmBlockedEll::Run before a successful Init");
  const SpmmTypes t = TypesOf(a.type);
  SPARQ_CUDA_RETURN_IF_ERROR(cusparseSetStream(handle, stream));
  SPARQ_CUDA_RETURN_IF_ERROR(cusparseSpMatSetValues(a_, const_cast<void*>(a.values)));
  SPARQ_CUDA_RETURN_IF_ERROR(cusparseDnMatSetValues(b_, const_cast<void*>(a.b)));
  SPARQ_CUDA_RETURN_IF_ERROR(cusparseDnMatSetValues(c_, a.c));
  const Scalars s = ScalarsOf(a);
  SPARQ_CUDA_RETURN_IF_ERROR(cusparseSpMM(handle, CUSPARSE_OPERATION_NON_TRANSPOSE, CUSPARSE_OPERATION_NON_TRANSPOSE,
                                          s.alpha(a.type), a_, b_, s.beta(a.type), c_, t.compute,
                                          CUSPARSE_SPMM_BLOCKED_ELL_ALG1, workspace));
  return Status::OK();
}

}  // namespace cuda
}  // namespace sparq
