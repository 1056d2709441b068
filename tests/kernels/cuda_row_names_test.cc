// The CUDA rows' names say what runs (cuda_rows.h): every row of the
// registry, checked on any machine of a CUDA build (no GPU needed).
#include <gtest/gtest.h>

#ifdef SPARQ_HAVE_CUDA
#include <set>
#include <string>

#include "kernels/cuda/cuda_rows.h"

namespace sparq {
namespace cuda {
namespace {

std::set<std::string> RowNames() {
  std::set<std::string> names;
  for (const std::string& op : {"QLinearMatMul", "QLinearConv"})
    for (const KernelDef* def : CudaRows().FindMatching(op, "", 21)) names.insert(def->name);
  for (const KernelDef* def : CudaRows().FindMatching("MatMulIntegerToFloat", kSparqDomain, 1)) names.insert(def->name);
  return names;
}

// The INT8 GEMM rows run the fused WMMA kernel (gemm_s8_fused.cu) on the
// executor's contexts; they were named `_cublaslt` before it existed.
TEST(CudaRowNames, Int8GemmRowsAreNamedByTheKernelThatRuns) {
  const std::set<std::string> names = RowNames();
  for (const char* want : {"qlinear_matmul_s8_wmma", "qlinear_conv_s8_wmma", "matmul_s8_f32_wmma", "qlinear_conv_dw_s8_cuda"})
    EXPECT_EQ(names.count(want), 1u) << want;
  for (const std::string& name : names) EXPECT_EQ(name.find("_cublaslt"), std::string::npos) << name;
  CudaBackendOptions fused, plain;
  plain.fused_int8_gemm = false;
  EXPECT_EQ(Int8GemmKernelName("qlinear_matmul_s8_wmma", fused), "qlinear_matmul_s8_wmma");
  EXPECT_EQ(Int8GemmKernelName("qlinear_matmul_s8_wmma", plain), "qlinear_matmul_s8_cublaslt");
  EXPECT_EQ(Int8GemmKernelName("qlinear_conv_s8_wmma", plain), "qlinear_conv_s8_cublaslt");
  EXPECT_EQ(Int8GemmKernelName("qlinear_conv_dw_s8_cuda", plain), "qlinear_conv_dw_s8_cuda");
}

}  // namespace
}  // namespace cuda
}  // namespace sparq
#endif  // SPARQ_HAVE_CUDA
