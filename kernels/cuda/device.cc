// CUDA device queries; every CUDA error becomes a Status naming the call.
#include <cuda_runtime.h>

#include <cstdio>

#include "sparq/device.h"

namespace sparq {

bool BuiltWithCuda() { return true; }

int CudaDeviceCount() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky error of a missing driver
    return 0;
  }
  return count;
}

StatusOr<std::string> CudaDeviceName(int index) {
  if (index < 0 || index >= CudaDeviceCount()) {
    return Status::NotFound("no CUDA device " + std::to_string(index));
  }
  cudaDeviceProp prop{};
  cudaError_t err = cudaGetDeviceProperties(&prop, index);
  if (err != cudaSuccess) {
    return Status::Internal(std::string("cudaGetDeviceProperties: ") + cudaGetErrorString(err));
  }
  char buf[512];
  std::snprintf(buf, sizeof(buf), "%s (sm_%d%d, %.1f GiB)", prop.name, prop.major, prop.minor,
                static_cast<double>(prop.totalGlobalMem) / (1024.0 * 1024.0 * 1024.0));
  return std::string(buf);
}

}  // namespace sparq
