// Dense GEMM through cuBLASLt, in row-major terms, following CUTLASS's order:
//
//   LtGemmArgs args{...};                       what to compute
//   SPARQ_RETURN_IF_ERROR(LtGemm::CanImplement(args));   shapes, alignment, types
//   LtGemm gemm;  SPARQ_RETURN_IF_ERROR(gemm.Init(lt, args, max_workspace));
//                                               descriptors + cuBLASLt's heuristic
//   gemm.workspace_size()                       bytes of device workspace it wants
//   gemm.Run(lt, args, workspace, stream)       one cublasLtMatmul on the stream
//
// CudaContext::Gemm keeps initialized LtGemms by LtGemm::Key, so a node run
// again only runs.
//
// Row-major C[m, n] = alpha * op(A) op(B) + beta * C is computed as the
// column-major C^T = op(B)^T op(A)^T: cuBLASLt's "A" is our B and its "B" our
// A, so no data moves. INT8 (int8 x int8 -> int32, the tensor cores' IMMA)
// wants cuBLASLt's TN form: A not transposed and B transposed (B given as
// [n, k]), every leading dimension and pointer a multiple of 4 / 16 bytes.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "sparq/status.h"

namespace sparq {
namespace cuda {

enum class LtGemmType {
  kF32,   // float32, exact float32 products (no tensor cores)
  kTF32,  // float32 data, tensor-core TF32 products, float32 sums
  kF16,   // float16 data and output, float32 sums and scale
  kS8S32  // int8 data, int32 output and sums (alpha, beta integers)
};
const char* LtGemmTypeName(LtGemmType type);  // "f32", "tf32", "f16", "s8s32"

struct LtGemmArgs {
  LtGemmType type = LtGemmType::kF32;
  int64_t m = 0, n = 0, k = 0;
  // Row-major operands: A is [m, k] ([k, m] when trans_a), B [k, n] ([n, k]
  // when trans_b), C [m, n]; lda / ldb / ldc are their row strides (elements).
  const void* a = nullptr;
  int64_t lda = 0;
  bool trans_a = false;
  const void* b = nullptr;
  int64_t ldb = 0;
  bool trans_b = false;
  void* c = nullptr;
  int64_t ldc = 0;
  // Strided batches (1: none); a stride of 0 reuses one operand (a shared weight).
  int64_t batch = 1;
  int64_t stride_a = 0, stride_b = 0, stride_c = 0;
  float alpha = 1.0f, beta = 0.0f;  // kS8S32: converted to int32
};

class LtGemm {
 public:
  LtGemm() = default;
  ~LtGemm();
  LtGemm(const LtGemm&) = delete;
  LtGemm& operator=(const LtGemm&) = delete;

  // NotSupported with a reason for shapes or layouts it does not take;
  // InvalidArgument for inconsistent arguments.
  static Status CanImplement(const LtGemmArgs& args);
  // Creates the descriptors and asks cuBLASLt's heuristic for an algorithm
  // within max_workspace bytes; NotSupported when it has none.
  Status Init(cublasLtHandle_t lt, const LtGemmArgs& args, size_t max_workspace);
  size_t workspace_size() const { return workspace_size_; }
  // What Init's choice depends on: type, shapes, transposes, leading
  // dimensions, batch strides and the operands' alignment. Two argument sets
  // with one key may share an initialized LtGemm (CudaContext caches them).
  static std::string Key(const LtGemmArgs& args);
  // Queues the GEMM on `stream`; the pointers of `args` may differ from
  // Init's, not its shapes.
  Status Run(cublasLtHandle_t lt, const LtGemmArgs& args, void* workspace, cudaStream_t stream) const;

 private:
  void Destroy();
  cublasLtMatmulDesc_t desc_ = nullptr;
  cublasLtMatrixLayout_t a_layout_ = nullptr, b_layout_ = nullptr, c_layout_ = nullptr;
  cublasLtMatmulAlgo_t algo_{};
  size_t workspace_size_ = 0;
  bool ready_ = false;
};

}  // namespace cuda
}  // namespace sparq
