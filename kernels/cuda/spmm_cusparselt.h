// 2:4 structured-sparse GEMM through cuSPARSELt, an optional dependency:
// compiled when CMake finds cusparseLt.h (SPARQ_CUSPARSELT, kernels/cuda/
// CMakeLists.txt: the PyPI wheel nvidia-cusparselt-cu13 has it) and the
// library opened at run time (dlopen of libcusparseLt.so.0: $SPARQ_CUSPARSELT_LIB,
// the loader's path, then the file CMake found), so no sparq binary needs the
// library to start and a machine without it runs the dense rows.
//
// In row-major terms, Y [m, n] = X [m, k] * W [k, n] with W 2:4 sparse along k
// (sparse24.h). cuSPARSELt sees the column-major Y^T = W^T X^T: its
// structured A is W^T [n, k] (W's bytes, ld n), B is X^T [k, m] (X's, ld k),
// C = D is Y^T [n, m] (Y's, ld n); float16 data, float32 sums. In CUTLASS's
// order (STYLE.md), every cuSPARSELt return code a Status naming the call:
//
//   SpmmLtArgs args{...};
//   SpmmLt::CanImplement(args)          types, shapes, alignment
//   SparseWeight24 w;  w.Init(args)     the structured descriptor, compressed sizes
//   w.Compress(dense_w, out, buffer, stream)        once per weight and device
//   SpmmLt plan;  plan.Init(w, args)    descriptors and the plan for this m
//   plan.workspace_size()
//   plan.Search(args, compressed, workspace, stream)   once per shape: cusparseLtMatmulSearch
//                                       (runs the GEMM a few times, keeps the fastest)
//   plan.Run(args, compressed, workspace, stream)      cusparseLtMatmul
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "sparq/status.h"

namespace sparq {
namespace cuda {

// OK when this build has the cuSPARSELt path and the library opens here
// (loaded once, thread-safe); NotSupported saying why otherwise.
Status CusparseLtAvailable();
// The version of the library opened ("0.8.0"), or "" when none is.
std::string CusparseLtVersion();

struct SpmmLtArgs {
  int64_t m = 0, n = 0, k = 0;
  const void* x = nullptr;  // [m, k] float16, row-major (device)
  void* y = nullptr;        // [m, n] float16, row-major (device)
  int device = 0;           // the CUDA device (one library handle per device)
};

// The structured operand: W [k, n] float16, 2:4 along k, compressed.
class SparseWeight24 {
 public:
  SparseWeight24();
  ~SparseWeight24();
  SparseWeight24(const SparseWeight24&) = delete;
  SparseWeight24& operator=(const SparseWeight24&) = delete;

  // The descriptor of W^T [n, k] and its compressed sizes (args.m unused).
  Status Init(const SpmmLtArgs& args);
  size_t compressed_size() const { return compressed_size_; }
  size_t compress_buffer_size() const { return compress_buffer_size_; }
  // cusparseLtSpMMACompress2 of the dense device weight `w` [k, n] into
  // `compressed` (compressed_size() bytes), with `buffer` as its scratch.
  Status Compress(const void* w, void* compressed, void* buffer, cudaStream_t stream) const;

 private:
  friend class SpmmLt;
  struct Impl;
  std::unique_ptr<Impl> impl_;
  size_t compressed_size_ = 0, compress_buffer_size_ = 0;
};

class SpmmLt {
 public:
  SpmmLt();
  ~SpmmLt();
  SpmmLt(const SpmmLt&) = delete;
  SpmmLt& operator=(const SpmmLt&) = delete;

  // NotSupported with a reason for what cuSPARSELt does not take here (m, n,
  // k multiples of 16 and the pointers 16-byte aligned: the float16 limits,
  // kept for every version); InvalidArgument for inconsistent arguments.
  static Status CanImplement(const SpmmLtArgs& args);
  // The descriptors of X^T and Y^T for args.m, the matmul descriptor and the
  // plan (default algorithm until Search).
  Status Init(const SparseWeight24& w, const SpmmLtArgs& args);
  size_t workspace_size() const { return workspace_size_; }
  // Picks the fastest algorithm by running the GEMM (cusparseLtMatmulSearch:
  // y is written; synchronous on `stream`). Once per shape.
  Status Search(const SpmmLtArgs& args, const void* compressed, void* workspace, cudaStream_t stream);
  // Queues Y = W X on `stream` (pointers may differ from Init's, not shapes).
  Status Run(const SpmmLtArgs& args, const void* compressed, void* workspace, cudaStream_t stream) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  size_t workspace_size_ = 0;
};

}  // namespace cuda
}  // namespace sparq
