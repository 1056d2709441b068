// One node's model run on the reference backend or on the CPU backend's
// rows: what the tests of a fast row (Pad, Slice, OneHotLookup, Clip, the
// reductions, the normalizations) compare, bytes, shapes, errors and the
// kernel that ran.
#pragma once

#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "sparq/executor.h"

namespace sparq {
namespace testing {

struct NodeRun {
  Status status;
  Tensor y;            // the output "y"
  std::string kernel;  // the kernel of node 0
};

// Runs `m` (one node writing "y") on input `name` = `x`. float16 kNative:
// the bytes of any element type, float16 as written.
inline NodeRun RunSingleNode(const Model& m, const std::string& name, const Tensor& x, bool reference, int threads,
                             Float16Execution float16 = Float16Execution::kNative) {
  ExecutorOptions options;
  options.backend = reference ? "reference" : "cpu";
  options.threads = threads;
  options.float16 = float16;
  NodeRun r;
  auto exec = Executor::Create(m, options);
  if (!exec.ok()) {
    r.status = exec.status();
    return r;
  }
  TensorMap out;
  r.status = (*exec)->Run({{name, x}}, &out);
  if (r.status.ok()) r.y = out.at("y");
  r.kernel = (*exec)->NodeKernels()[0].kernel;
  return r;
}

// `got` ran on `kernel` and gave `want`'s status and, when ok, its bytes.
inline void ExpectSameRun(const NodeRun& got, const NodeRun& want, const std::string& kernel) {
  EXPECT_EQ(got.kernel, kernel);
  ASSERT_EQ(got.status.ToString(), want.status.ToString());
  if (!want.status.ok()) return;
  ASSERT_EQ(got.y.dtype(), want.y.dtype());
  ASSERT_EQ(got.y.shape(), want.y.shape());
  EXPECT_EQ(std::memcmp(got.y.raw_data(), want.y.raw_data(), want.y.nbytes()), 0);
}

// A bad node: the fast row's status is the reference kernel's error.
inline void ExpectSameError(const NodeRun& fast, const NodeRun& ref) {
  EXPECT_FALSE(fast.status.ok());
  EXPECT_EQ(fast.status.ToString(), ref.status.ToString());
}

// `m` run on the reference backend, then on the CPU rows at 1 and 3 threads:
// node 0 ran on `kernel` (unless nullptr) and every output has the
// reference's bytes.
inline void ExpectSameBitsAsReference(const Model& m, const TensorMap& inputs, const char* kernel) {
  TensorMap want;
  for (int run = 0; run < 3; ++run) {
    ExecutorOptions options;
    options.backend = run == 0 ? "reference" : "cpu";
    options.threads = run == 2 ? 3 : 1;
    auto exec = Executor::Create(m, options);
    ASSERT_TRUE(exec.ok()) << exec.status().ToString();
    TensorMap got;
    const Status st = (*exec)->Run(inputs, &got);
    ASSERT_TRUE(st.ok()) << st.ToString();
    if (run == 0) {
      want = got;
      continue;
    }
    if (kernel != nullptr) EXPECT_EQ((*exec)->NodeKernels().at(0).kernel, kernel);
    for (const auto& kv : want) {
      const Tensor& g = got.at(kv.first);
      ASSERT_EQ(g.dtype(), kv.second.dtype());
      ASSERT_EQ(g.shape(), kv.second.shape());
      EXPECT_EQ(std::memcmp(g.raw_data(), kv.second.raw_data(), g.nbytes()), 0) << kv.first << ", run " << run;
    }
  }
}

}  // namespace testing
}  // namespace sparq
