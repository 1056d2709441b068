// Device queries of a build without the CUDA backend.
#ifndef SPARQ_HAVE_CUDA
#include "sparq/device.h"

namespace sparq {

bool BuiltWithCuda() { return false; }
int CudaDeviceCount() { return 0; }
StatusOr<std::string> CudaDeviceName(int) {
  return Status::NotSupported("sparq was built without CUDA (configure with -DSPARQ_CUDA=ON)");
}

}  // namespace sparq
#endif
