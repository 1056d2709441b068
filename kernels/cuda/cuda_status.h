// CUDA, cuBLAS(Lt) and cuSPARSE return codes as sparq::Status, at the call
// site, naming the call (STYLE.md: the library never aborts):
//
//   SPARQ_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(dst, src, n, kind, stream));
//   -> Internal "cudaMemcpyAsync(dst, src, n, kind, stream): invalid argument
//      (cudaErrorInvalidValue)"
//
// One macro serves the three libraries: ToStatus is overloaded on the code's
// type. A kernel launch is checked with SPARQ_CUDA_RETURN_IF_LAUNCH_ERROR("name")
// (cudaGetLastError after the <<<...>>>).
//
// (cuBLAS codes are read with cublasLt*: sparq links cuBLASLt, not cuBLAS.)
// Codes that mean "this machine cannot" (no device, driver too old, an
// unsupported architecture or configuration) become NotSupported; all others
// Internal, since a well-formed call that fails is a bug or an exhausted device.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime.h>
#include <cusparse.h>

#include <string>

#include "sparq/status.h"

namespace sparq {
namespace cuda {

inline Status ToStatus(cudaError_t err, const char* call) {
  if (err == cudaSuccess) return Status::OK();
  (void)cudaGetLastError();  // clears a non-sticky error so the next call does not see it
  std::string msg = std::string(call) + ": " + cudaGetErrorString(err) + " (" + cudaGetErrorName(err) + ")";
  switch (err) {
    case cudaErrorNoDevice:
    case cudaErrorInsufficientDriver:
    case cudaErrorNoKernelImageForDevice:
    case cudaErrorUnsupportedPtxVersion:
    case cudaErrorNotSupported: return Status::NotSupported(std::move(msg));
    default: return Status::Internal(std::move(msg));
  }
}

inline Status ToStatus(cublasStatus_t st, const char* call) {
  if (st == CUBLAS_STATUS_SUCCESS) return Status::OK();
  std::string msg = std::string(call) + ": " + cublasLtGetStatusString(st) + " (" + cublasLtGetStatusName(st) + ")";
  switch (st) {
    case CUBLAS_STATUS_NOT_SUPPORTED:
    case CUBLAS_STATUS_ARCH_MISMATCH: return Status::NotSupported(std::move(msg));
    default: return Status::Internal(std::move(msg));
  }
}

inline Status ToStatus(cusparseStatus_t st, const char* call) {
  if (st == CUSPARSE_STATUS_SUCCESS) return Status::OK();
  std::string msg = std::string(call) + ": " + cusparseGetErrorString(st) + " (" + cusparseGetErrorName(st) + ")";
  switch (st) {
    case CUSPARSE_STATUS_NOT_SUPPORTED:
    case CUSPARSE_STATUS_ARCH_MISMATCH: return Status::NotSupported(std::move(msg));
    default: return Status::Internal(std::move(msg));
  }
}

}  // namespace cuda
}  // namespace sparq

// Returns the Status of a failed CUDA / cuBLAS(Lt) / cuSPARSE call, naming it.
#define SPARQ_CUDA_RETURN_IF_ERROR(call)                                      \
  do {                                                                        \
    ::sparq::Status _sparq_cuda_status = ::sparq::cuda::ToStatus((call), #call); \
    if (!_sparq_cuda_status.ok()) return _sparq_cuda_status;                  \
  } while (0)

// After a kernel launch: a launch error (bad configuration, no kernel image
// for this device) as a Status naming the kernel.
#define SPARQ_CUDA_RETURN_IF_LAUNCH_ERROR(kernel_name)                                          \
  do {                                                                                          \
    ::sparq::Status _sparq_cuda_status = ::sparq::cuda::ToStatus(cudaGetLastError(), kernel_name \
                                                                 " launch");                    \
    if (!_sparq_cuda_status.ok()) return _sparq_cuda_status;                                    \
  } while (0)
