// The ISA sweep shared by sparq's kernel tests: the ISA levels to run, a
// scoped ISA override, gtest parameter names, the named tolerances of the
// fast kernels against kernels/ref, and the kernel names of `eval --verbose`
// reduced to their ops (so that expectations do not depend on the CPU).
//
//   class MyIsaTest : public testing::IsaSweepTest {};   // GetParam(): the forced ISA
//   TEST_P(MyIsaTest, ...) { ... }
//   INSTANTIATE_TEST_SUITE_P(CpuKernels, MyIsaTest, ::testing::ValuesIn(kAllCpuIsas), testing::IsaParamName);
// or, inside one test:
//   testing::ForEachIsa([&](CpuIsa isa) { ... });  // every ISA this CPU has, forced in turn
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "kernels/cpu/dispatch.h"

namespace sparq {
namespace testing {

// FP32 kernels: |fast - ref| <= kF32RelTol * max |ref| (another summation
// order, FMA). Every INT8 kernel and every QDQ row is bit for bit its
// reference: no tolerance. The Erf, Softmax and Sigmoid rows' absolute
// tolerances are part of their contract, next to them: cpu::kErfF32AbsTol,
// cpu::kSoftmaxF32AbsTol and cpu::kSigmoidF32AbsTol
// (kernels/cpu/activation_f32.h); Pow(x, 2) and the
// float16 conversions are exact.
inline constexpr float kF32RelTol = 1e-5f;

// The ISA levels this CPU has, lowest first (kAllCpuIsas up to DetectedIsa()).
inline std::vector<CpuIsa> IsasOfThisCpu() {
  std::vector<CpuIsa> isas;
  for (CpuIsa isa : kAllCpuIsas)
    if (isa <= DetectedIsa()) isas.push_back(isa);
  return isas;
}

// For ::testing::ValuesIn(kAllCpuIsas): the parameter's CpuIsaName.
inline std::string IsaParamName(const ::testing::TestParamInfo<CpuIsa>& info) { return CpuIsaName(info.param); }

// Forces `isa` for the life of the object (ResetIsa() after). The test fails
// when the CPU lacks it; sweep IsasOfThisCpu() to avoid that.
class ScopedIsa {
 public:
  explicit ScopedIsa(CpuIsa isa) { EXPECT_TRUE(ForceIsa(isa).ok()) << CpuIsaName(isa); }
  ~ScopedIsa() { ResetIsa(); }
  ScopedIsa(const ScopedIsa&) = delete;
  ScopedIsa& operator=(const ScopedIsa&) = delete;
};

// A test parameterized by the ISA: skipped where the CPU lacks it, else run
// with it forced (ResetIsa() after).
class IsaSweepTest : public ::testing::TestWithParam<CpuIsa> {
 protected:
  void SetUp() override {
    if (GetParam() > DetectedIsa()) GTEST_SKIP() << "this CPU lacks " << CpuIsaName(GetParam());
    ASSERT_TRUE(ForceIsa(GetParam()).ok());
  }
  void TearDown() override { ResetIsa(); }
};

// Runs fn(isa) with each ISA of this CPU forced, its name in the trace.
template <typename Fn>
void ForEachIsa(Fn fn) {
  for (CpuIsa isa : IsasOfThisCpu()) {
    SCOPED_TRACE(CpuIsaName(isa));
    ScopedIsa scoped(isa);
    fn(isa);
  }
}

// The dispatch-table row named `name`, or nullptr.
inline const CpuKernelDef* TableRow(const std::string& name) {
  for (const CpuKernelDef& def : CpuKernelTable())
    if (name == def.name) return &def;
  return nullptr;
}

// A node's kernel name (Executor::NodeKernels) with each '+'-joined table row
// replaced by its op: "gemm_s8s8_avx2+lut256_portable" -> "gemm_s8+lut256",
// "spmm_bsr4x4_f32_avx512" -> "spmm_bsr_f32". Names that are not rows
// ("ref", "gemm_f32_batched") stay.
inline std::string KernelOps(const std::string& kernel) {
  std::string out;
  size_t begin = 0;
  while (true) {
    const size_t end = kernel.find('+', begin);
    const std::string part = kernel.substr(begin, end == std::string::npos ? std::string::npos : end - begin);
    const CpuKernelDef* row = TableRow(part);
    out += row != nullptr ? CpuOpName(row->op()) : part;
    if (end == std::string::npos) return out;
    out += "+";
    begin = end + 1;
  }
}

}  // namespace testing
}  // namespace sparq
