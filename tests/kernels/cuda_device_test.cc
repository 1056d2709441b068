#include <gtest/gtest.h>

#include "sparq/device.h"

namespace sparq {
namespace {

TEST(CudaDevice, ReportsDevicesOrSkips) {
  if (!BuiltWithCuda()) GTEST_SKIP() << "built without CUDA (-DSPARQ_CUDA=OFF or no nvcc)";
  if (CudaDeviceCount() == 0) GTEST_SKIP() << "no CUDA device on this machine";
  auto name = CudaDeviceName(0);
  ASSERT_TRUE(name.ok()) << name.status().ToString();
  EXPECT_NE(name->find("sm_"), std::string::npos);
  EXPECT_EQ(CudaDeviceName(CudaDeviceCount()).status().code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace sparq
