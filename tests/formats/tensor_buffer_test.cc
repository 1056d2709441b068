// Tensor storage: large buffers freed by one tensor are reused by later ones
// (formats/tensor.cc, BufferCache), and every new tensor starts zeroed.
#include <gtest/gtest.h>

#include <cstring>

#include "sparq/tensor.h"

namespace sparq {
namespace {

TEST(TensorBuffers, LargeBuffersAreReusedAndZeroed) {
  ReleaseCachedTensorBuffers();  // blocks freed by earlier tests would fit better
  const void* first = nullptr;
  {
    Tensor t(DataType::kFloat32, {512, 1024});  // 2 MiB
    first = t.raw_data();
    std::memset(t.raw_data(), 0xab, static_cast<size_t>(t.nbytes()));
  }
  Tensor u(DataType::kFloat32, {400, 1024});  // fits the freed block with less than 2x to spare
  EXPECT_EQ(u.raw_data(), first);
  for (int64_t i = 0; i < u.numel(); ++i) ASSERT_EQ(u.data<float>()[i], 0.0f) << i;
  Tensor v(DataType::kFloat32, {100, 1024});  // the block is taken, and would waste > 2x anyway
  EXPECT_NE(v.raw_data(), first);
  for (int64_t i = 0; i < v.numel(); ++i) ASSERT_EQ(v.data<float>()[i], 0.0f) << i;
}

TEST(TensorBuffers, ReleaseFreesTheCachedBlocks) {
  { Tensor t(DataType::kFloat32, {512, 1024}); }
  EXPECT_GE(ReleaseCachedTensorBuffers(), size_t{2} << 20);
  EXPECT_EQ(ReleaseCachedTensorBuffers(), 0u);
}

}  // namespace
}  // namespace sparq
