// Which compute devices this build of sparq can use.
#pragma once

#include <string>

#include "sparq/export.h"
#include "sparq/status.h"

namespace sparq {

// True when sparq was built with the CUDA backend (-DSPARQ_CUDA=ON/AUTO with nvcc).
SPARQ_API bool BuiltWithCuda();
// Number of usable CUDA devices; 0 without a GPU, a driver, or the CUDA build.
SPARQ_API int CudaDeviceCount();
// "NVIDIA H100 80GB HBM3 (sm_90, 79.1 GiB)" for device `index`. Errors:
// NotSupported without the CUDA build, NotFound for a bad index.
SPARQ_API StatusOr<std::string> CudaDeviceName(int index);
// The backend `--backend name` (ExecutorOptions::backend) runs on here: its
// name ("cpu", "cuda", ...); for "auto", `note` (optional) says which and why
// ("backend auto: cpu (cuda: no CUDA device ...)"). Errors as the executor's:
// InvalidArgument for an unknown name, the backend's reason when it cannot run
// here (cuda without a GPU).
SPARQ_API StatusOr<std::string> ResolveBackendName(const std::string& name, std::string* note = nullptr);

}  // namespace sparq
