// 2:4 through cuSPARSELt (kernels/cuda/spmm_cusparselt.h, rows_cusparselt.cc):
// on any machine of a CUDA build, the 2:4 check, the wrapper's refusals and
// the row's choice by the kernel speed table; with a GPU and the library, the
// GEMM against host float32 sums (skipped otherwise, saying which is missing).
#include <gtest/gtest.h>

#ifdef SPARQ_HAVE_CUDA
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "kernels/cuda/cuda_rows.h"
#include "kernels/cuda/sparse24.h"
#include "kernels/cuda/spmm_cusparselt.h"
#include "sparq/device.h"

namespace sparq {
namespace cuda {
namespace {

constexpr double kSparse24F16 = 2e-2;  // float16 inputs and outputs, float32 sums (as kGemmF16)

// W [k, n] float16 with two of every four k of a column kept (r + c) % 4 < 2.
std::vector<uint16_t> Pruned24(int64_t k, int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(-1.0f, 1.0f);
  std::vector<uint16_t> w(static_cast<size_t>(k * n));
  for (int64_t r = 0; r < k; ++r)
    for (int64_t c = 0; c < n; ++c) w[r * n + c] = (r + c) % 4 < 2 ? FloatToHalf(d(rng)) : 0;
  return w;
}

TEST(CudaSparse24, PatternIsTwoOfFourAlongK) {
  std::vector<uint16_t> w = Pruned24(16, 8, 1);
  EXPECT_TRUE(Is24SparseAlongK(w.data(), 16, 8));
  w[5 * 8 + 0] = 0x8000;  // -0 counts as zero
  EXPECT_TRUE(Is24SparseAlongK(w.data(), 16, 8));
  w[2 * 8 + 0] = FloatToHalf(1.0f);  // column 0, rows 0..3: a third nonzero
  EXPECT_FALSE(Is24SparseAlongK(w.data(), 16, 8));
  EXPECT_FALSE(Is24SparseAlongK(w.data(), 15, 8)) << "K not a multiple of 4";
}

TEST(CudaSparse24, CanImplementRefusesWithReasons) {
  SpmmLtArgs a;
  a.m = 32;
  a.n = 48;
  a.k = 40;
  Status st = SpmmLt::CanImplement(a);
  EXPECT_EQ(st.code(), StatusCode::kNotSupported);
  if (CusparseLtAvailable().code() == StatusCode::kNotSupported &&
      CusparseLtAvailable().message().find("built without") != std::string::npos) {
    GTEST_SKIP() << CusparseLtAvailable().message();
  }
  EXPECT_NE(st.message().find("multiples of 16"), std::string::npos) << st.message();
  a.k = 64;
  EXPECT_TRUE(SpmmLt::CanImplement(a).ok());
  a.m = 0;
  EXPECT_EQ(SpmmLt::CanImplement(a).code(), StatusCode::kInvalidArgument);
}

// The row takes a 2:4 float16 weight only where the speed table has a
// winning cuda 2:4 f16 row: never with the default table.
TEST(CudaSparse24, RowRunsOnlyWhereTheTableSaysItWins) {
  const KernelDef* row = nullptr;
  for (const KernelDef* def : CudaRows().FindMatching("MatMul", "", 17))
    if (def->name == "spmm_24_f16_cusparselt") row = def;
  ASSERT_NE(row, nullptr);
  const std::vector<uint16_t> bits = Pruned24(64, 32, 2);
  Tensor w(DataType::kFloat16, {64, 32});
  std::memcpy(w.raw_data(), bits.data(), bits.size() * 2);
  Node node;
  node.op_type = "MatMul";
  node.name = "mm";
  node.inputs = {"x", "w"};
  node.outputs = {"y"};
  const std::vector<const Tensor*> constants = {nullptr, &w};
  PrepareContext context;  // the default table: no cuda rows
  StatusOr<PreparedKernel> p = row->prepare(node, constants, context);
  ASSERT_EQ(p.status().code(), StatusCode::kNotSupported);
  EXPECT_NE(p.status().message().find("not measured faster"), std::string::npos) << p.status().message();

  auto losing = KernelSpeedTable::Parse("backend,structure,precision,sparsity,speedup\ncuda,2:4,f16,0.5,0.9\n", "t");
  ASSERT_TRUE(losing.ok()) << losing.status().ToString();
  context.kernel_table = &*losing;
  EXPECT_EQ(row->prepare(node, constants, context).status().code(), StatusCode::kNotSupported);

  auto winning = KernelSpeedTable::Parse("backend,structure,precision,sparsity,speedup\ncuda,2:4,f16,0.5,1.3\n", "t");
  ASSERT_TRUE(winning.ok()) << winning.status().ToString();
  context.kernel_table = &*winning;
  p = row->prepare(node, constants, context);
  if (!CusparseLtAvailable().ok()) {
    ASSERT_EQ(p.status().code(), StatusCode::kNotSupported);
    EXPECT_NE(p.status().message().find("cuSPARSELt"), std::string::npos) << p.status().message();
    GTEST_SKIP() << "the table's row would pick it; " << CusparseLtAvailable().message();
  }
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->kernel_name, "spmm_24_f16_cusparselt");
  // Not 2:4: declined whatever the table says.
  Tensor dense = w.Clone();
  static_cast<uint16_t*>(dense.raw_data())[2 * 32] = FloatToHalf(1.0f);
  const std::vector<const Tensor*> dense_constants = {nullptr, &dense};
  EXPECT_EQ(row->prepare(node, dense_constants, context).status().code(), StatusCode::kNotSupported);
}

// On a GPU with the library: Y = X W through the compressed weight and a
// searched plan, against float32 sums on the host.
TEST(CudaSparse24, GemmMatchesHostSums) {
  if (CudaDeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  if (Status st = CusparseLtAvailable(); !st.ok()) GTEST_SKIP() << st.message();
  const int64_t m = 64, n = 48, k = 96;
  const std::vector<uint16_t> w = Pruned24(k, n, 3);
  std::vector<uint16_t> x(static_cast<size_t>(m * k));
  std::mt19937 rng(4);
  std::uniform_real_distribution<float> d(-1.0f, 1.0f);
  for (auto& v : x) v = FloatToHalf(d(rng));
  void *dw = nullptr, *dx = nullptr, *dy = nullptr, *compressed = nullptr, *buffer = nullptr, *ws = nullptr;
  ASSERT_EQ(cudaMalloc(&dw, w.size() * 2), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&dx, x.size() * 2), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&dy, static_cast<size_t>(m * n) * 2), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(dw, w.data(), w.size() * 2, cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(dx, x.data(), x.size() * 2, cudaMemcpyHostToDevice), cudaSuccess);
  SpmmLtArgs args;
  args.m = m;
  args.n = n;
  args.k = k;
  args.x = dx;
  args.y = dy;
  SparseWeight24 weight;
  ASSERT_TRUE(weight.Init(args).ok());
  ASSERT_EQ(cudaMalloc(&compressed, std::max<size_t>(1, weight.compressed_size())), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&buffer, std::max<size_t>(1, weight.compress_buffer_size())), cudaSuccess);
  Status st = weight.Compress(dw, compressed, buffer, nullptr);
  ASSERT_TRUE(st.ok()) << st.ToString();
  SpmmLt plan;
  st = plan.Init(weight, args);
  ASSERT_TRUE(st.ok()) << st.ToString();
  ASSERT_EQ(cudaMalloc(&ws, std::max<size_t>(size_t{1} << 20, plan.workspace_size())), cudaSuccess);
  st = plan.Search(args, compressed, ws, nullptr);
  ASSERT_TRUE(st.ok()) << st.ToString();
  st = plan.Run(args, compressed, ws, nullptr);
  ASSERT_TRUE(st.ok()) << st.ToString();
  std::vector<uint16_t> y(static_cast<size_t>(m * n));
  ASSERT_EQ(cudaMemcpy(y.data(), dy, y.size() * 2, cudaMemcpyDeviceToHost), cudaSuccess);
  for (int64_t r = 0; r < m; ++r)
    for (int64_t c = 0; c < n; ++c) {
      float want = 0.0f;
      for (int64_t i = 0; i < k; ++i) want += HalfToFloat(x[r * k + i]) * HalfToFloat(w[i * n + c]);
      const float got = HalfToFloat(y[r * n + c]);
      ASSERT_LE(std::fabs(got - want), kSparse24F16 * std::max(1.0f, std::fabs(want))) << r << ", " << c;
    }
  for (void* p : {dw, dx, dy, compressed, buffer, ws}) (void)cudaFree(p);
}

}  // namespace
}  // namespace cuda
}  // namespace sparq
#endif  // SPARQ_HAVE_CUDA
