// Device queries of a build without the CUDA backend (SPARQ_CUDA=OFF, or no
// CUDA compiler found); device.cc is the CUDA version.
#ifndef SPARQ_HAVE_CUDA
#include "kernels/backend.h"
#include "sparq/device.h"

namespace sparq {

bool BuiltWithCuda() { return false; }
int CudaDeviceCount() { return 0; }
StatusOr<std::string> CudaDeviceName(int) {
  return Status::NotSupported("sparq was built without CUDA (configure with -DSPARQ_CUDA=ON)");
}

std::shared_ptr<const Backend> MakeCudaBackend() { return nullptr; }

}  // namespace sparq
#endif
