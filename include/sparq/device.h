// Which compute devices this build of sparq can use.
#pragma once

#include <string>

#include "sparq/status.h"

namespace sparq {

// True when sparq was built with the CUDA backend (-DSPARQ_CUDA=ON/AUTO with nvcc).
bool BuiltWithCuda();
// Number of usable CUDA devices; 0 without a GPU, a driver, or the CUDA build.
int CudaDeviceCount();
// "NVIDIA H100 80GB HBM3 (sm_90, 79.1 GiB)" for device `index`. Errors:
// NotSupported without the CUDA build, NotFound for a bad index.
StatusOr<std::string> CudaDeviceName(int index);

}  // namespace sparq
