// Sparse weight x dense activations through cuSPARSE's Blocked-ELL SpMM:
// C [rows, n] = alpha * A [rows, cols] * B [cols, n] + beta * C, A in the
// Blocked-ELL layout of layouts.h (its arrays already on the device). In
// CUTLASS's order: SpmmBlockedEllArgs -> CanImplement -> Init (descriptors,
// workspace size) -> Run(stream).
//
// For a layer Y [M, N] = X [M, K] * W [K, N] with W constant, A = W^T
// ([N, K]) and B = X read column-major (K x M, ld K), C = Y column-major
// (N x M, ld N) = Y row-major: no transposes. INT8 wants B and C
// column-major (measured: cuSPARSE refuses row-major INT8); FP16 takes both.
#pragma once

#include <cuda_runtime_api.h>
#include <cusparse.h>

#include <cstddef>
#include <cstdint>

#include "sparq/status.h"

namespace sparq {
namespace cuda {

enum class SpmmType {
  kF16,  // float16 A, B, C; float32 compute
  kF32,  // float32 A, B, C
  kS8    // int8 A, B; int32 C and compute
};

struct SpmmBlockedEllArgs {
  SpmmType type = SpmmType::kF16;
  int64_t rows = 0, cols = 0;  // of A, multiples of block_size
  int64_t block_size = 0, ell_cols = 0;
  const int32_t* col_ind = nullptr;  // device [rows / b][ell_cols / b], -1 = empty
  const void* values = nullptr;      // device [rows][ell_cols]
  int64_t n = 0;
  const void* b = nullptr;  // [cols, n]
  int64_t ldb = 0;
  void* c = nullptr;  // [rows, n]
  int64_t ldc = 0;
  bool col_major = true;  // B and C column-major (ld >= cols / rows) or row-major (ld >= n)
  float alpha = 1.0f, beta = 0.0f;
};

class SpmmBlockedEll {
 public:
  SpmmBlockedEll() = default;
  ~SpmmBlockedEll();
  SpmmBlockedEll(const SpmmBlockedEll&) = delete;
  SpmmBlockedEll& operator=(const SpmmBlockedEll&) = delete;

  // NotSupported for what cuSPARSE's Blocked-ELL SpMM does not take here
  // (INT8 row-major, sizes not multiples of the block); InvalidArgument for
  // inconsistent arguments.
  static Status CanImplement(const SpmmBlockedEllArgs& args);
  // Descriptors for args' shapes and the workspace cuSPARSE asks for.
  Status Init(cusparseHandle_t handle, const SpmmBlockedEllArgs& args);
  size_t workspace_size() const { return workspace_size_; }
  // Binds handle to `stream` and queues the SpMM; args' pointers may differ
  // from Init's (same shapes).
  Status Run(cusparseHandle_t handle, const SpmmBlockedEllArgs& args, void* workspace, cudaStream_t stream);

 private:
  void Destroy();
  cusparseSpMatDescr_t a_ = nullptr;
  cusparseDnMatDescr_t b_ = nullptr, c_ = nullptr;
  size_t workspace_size_ = 0;
  bool ready_ = false;
};

}  // namespace cuda
}  // namespace sparq
