// The cuBLASLt GEMM and cuSPARSE Blocked-ELL SpMM wrappers of the CUDA backend
// (kernels/cuda/gemm_cublaslt.h, spmm_blocked_ell.h): their CanImplement
// checks on any machine of a CUDA build; with a GPU, INT8 GEMM and INT8
// Blocked-ELL SpMM against exact host sums (float types: through the rows,
// cuda_backend_test.cc).
#include <gtest/gtest.h>

#ifdef SPARQ_HAVE_CUDA
#include <cuda_fp16.h>

#include <cstring>
#include <random>
#include <vector>

#include "kernels/cuda/cuda_status.h"
#include "kernels/cuda/gemm_cublaslt.h"
#include "kernels/cuda/launch.h"
#include "kernels/cuda/layouts.h"
#include "kernels/cuda/spmm_blocked_ell.h"
#include "sparq/device.h"

namespace sparq {
namespace cuda {
namespace {

#define SKIP_WITHOUT_GPU() \
  if (CudaDeviceCount() == 0) GTEST_SKIP() << "no CUDA device"

// A device copy of a host vector, freed with the object.
template <typename T>
struct DeviceVector {
  T* p = nullptr;
  Status Init(const std::vector<T>& v) {
    SPARQ_CUDA_RETURN_IF_ERROR(cudaMalloc(&p, std::max<size_t>(1, v.size() * sizeof(T))));
    SPARQ_CUDA_RETURN_IF_ERROR(cudaMemcpy(p, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice));
    return Status::OK();
  }
  Status Get(std::vector<T>* v) const {
    SPARQ_CUDA_RETURN_IF_ERROR(cudaMemcpy(v->data(), p, v->size() * sizeof(T), cudaMemcpyDeviceToHost));
    return Status::OK();
  }
  ~DeviceVector() {
    if (p != nullptr) (void)cudaFree(p);
  }
};

std::vector<int8_t> RandomS8(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> d(-128, 127);
  std::vector<int8_t> v(n);
  for (auto& x : v) x = static_cast<int8_t>(d(rng));
  return v;
}

TEST(CudaWrappers, CanImplementRefusesWithReasons) {
  alignas(256) static int8_t buf[4096];
  LtGemmArgs a;
  a.type = LtGemmType::kS8S32;
  a.m = 8;
  a.n = 8;
  a.k = 16;
  a.a = a.b = a.c = buf;
  a.lda = a.ldb = 16;
  a.ldc = 8;
  a.trans_b = true;
  EXPECT_TRUE(LtGemm::CanImplement(a).ok()) << LtGemm::CanImplement(a).ToString();
  a.trans_b = false;
  a.ldb = 8;
  EXPECT_EQ(LtGemm::CanImplement(a).code(), StatusCode::kNotSupported);  // INT8 wants TN
  a.trans_b = true;
  a.ldb = 16;
  a.k = a.lda = a.ldb = 18;
  EXPECT_EQ(LtGemm::CanImplement(a).code(), StatusCode::kNotSupported);  // k not a multiple of 4
  a.type = LtGemmType::kF32;
  EXPECT_TRUE(LtGemm::CanImplement(a).ok());
  a.ldc = 4;
  EXPECT_EQ(LtGemm::CanImplement(a).code(), StatusCode::kInvalidArgument);

  SpmmBlockedEllArgs s;
  s.type = SpmmType::kS8;
  s.rows = 64;
  s.cols = 64;
  s.block_size = 32;
  s.ell_cols = 32;
  s.col_ind = reinterpret_cast<const int32_t*>(buf);
  s.values = s.b = buf;
  s.c = buf;
  s.n = 8;
  s.ldb = 64;
  s.ldc = 64;
  EXPECT_TRUE(SpmmBlockedEll::CanImplement(s).ok()) << SpmmBlockedEll::CanImplement(s).ToString();
  s.col_major = false;
  s.ldb = s.ldc = 8;
  EXPECT_EQ(SpmmBlockedEll::CanImplement(s).code(), StatusCode::kNotSupported);  // INT8 row-major
  s.type = SpmmType::kF16;
  EXPECT_TRUE(SpmmBlockedEll::CanImplement(s).ok());
  s.rows = 48;
  EXPECT_EQ(SpmmBlockedEll::CanImplement(s).code(), StatusCode::kNotSupported);  // not a multiple of the block
}

TEST(CudaWrappers, Int8GemmIsExact) {
  SKIP_WITHOUT_GPU();
  const int64_t m = 70, n = 48, k = 96;
  const std::vector<int8_t> a = RandomS8(m * k, 1), b = RandomS8(n * k, 2);  // b as [n, k]
  DeviceVector<int8_t> da, db;
  DeviceVector<int32_t> dc;
  ASSERT_TRUE(da.Init(a).ok());
  ASSERT_TRUE(db.Init(b).ok());
  ASSERT_TRUE(dc.Init(std::vector<int32_t>(m * n, 0)).ok());
  cublasLtHandle_t lt = nullptr;
  ASSERT_TRUE(ToStatus(cublasLtCreate(&lt), "cublasLtCreate").ok());
  LtGemmArgs args;
  args.type = LtGemmType::kS8S32;
  args.m = m;
  args.n = n;
  args.k = k;
  args.a = da.p;
  args.lda = k;
  args.b = db.p;
  args.ldb = k;
  args.trans_b = true;
  args.c = dc.p;
  args.ldc = n;
  ASSERT_TRUE(LtGemm::CanImplement(args).ok());
  LtGemm gemm;
  Status st = gemm.Init(lt, args, size_t{4} << 20);
  ASSERT_TRUE(st.ok()) << st.ToString();
  DeviceVector<uint8_t> ws;
  ASSERT_TRUE(ws.Init(std::vector<uint8_t>(gemm.workspace_size() + 1)).ok());
  st = gemm.Run(lt, args, ws.p, nullptr);
  ASSERT_TRUE(st.ok()) << st.ToString();
  std::vector<int32_t> c(m * n);
  ASSERT_TRUE(dc.Get(&c).ok());
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      int32_t want = 0;
      for (int64_t p = 0; p < k; ++p) want += a[i * k + p] * b[j * k + p];
      ASSERT_EQ(c[i * n + j], want) << i << ", " << j;
    }
  (void)cublasLtDestroy(lt);
}

// The fused INT8 GEMM (LaunchGemmS8Requantize, gemm_s8_fused.cu) against the
// host's exact sums and the shared epilogue, at shapes across its 64 x 64
// tiles and 64-byte k steps, with the 128-bit staging (k % 16 == 0) and the
// byte staging (k odd), int8 and uint8 outputs, zero-point corrections on.
TEST(CudaWrappers, FusedInt8GemmIsExact) {
  SKIP_WITHOUT_GPU();
  const int64_t shapes[][3] = {{1, 1, 1}, {70, 48, 96}, {129, 65, 768}, {64, 200, 17}, {300, 130, 130}};
  uint32_t seed = 10;
  for (const auto& shape : shapes) {
    const int64_t m = shape[0], n = shape[1], k = shape[2];
    SCOPED_TRACE(std::to_string(m) + " x " + std::to_string(n) + " x " + std::to_string(k));
    const std::vector<int8_t> a = RandomS8(m * k, seed++), b = RandomS8(n * k, seed++);
    std::vector<int32_t> a_sum(m, 0), b_sum(n, 0);
    for (int64_t i = 0; i < m; ++i)
      for (int64_t p = 0; p < k; ++p) a_sum[i] += a[i * k + p];
    for (int64_t j = 0; j < n; ++j)
      for (int64_t p = 0; p < k; ++p) b_sum[j] += b[j * k + p];
    std::vector<float> mult(n);
    for (int64_t j = 0; j < n; ++j) mult[j] = 0.0004f + 0.00001f * static_cast<float>(j % 7);
    for (bool out_signed : {true, false}) {
      DeviceVector<int8_t> da, db;
      DeviceVector<int32_t> da_sum, db_sum;
      DeviceVector<float> dmult;
      DeviceVector<uint8_t> dy;
      ASSERT_TRUE(da.Init(a).ok() && db.Init(b).ok() && da_sum.Init(a_sum).ok() && db_sum.Init(b_sum).ok());
      ASSERT_TRUE(dmult.Init(mult).ok() && dy.Init(std::vector<uint8_t>(m * n, 0)).ok());
      RequantArgs r;
      r.rows = m;
      r.cols = n;
      r.k = static_cast<int32_t>(k);
      r.a_sum = da_sum.p;
      r.b_sum = db_sum.p;
      r.a_zp_scalar = -3;
      r.b_zp_scalar = 5;
      r.multiplier = dmult.p;
      r.multiplier_per_col = true;
      r.y_zp = out_signed ? 4 : 131;
      r.out_signed = out_signed;
      r.out = dy.p;
      Status st = LaunchGemmS8Requantize(da.p, db.p, m, n, k, r, nullptr);
      ASSERT_TRUE(st.ok()) << st.ToString();
      ASSERT_TRUE(ToStatus(cudaDeviceSynchronize(), "cudaDeviceSynchronize").ok());
      std::vector<uint8_t> got(m * n);
      ASSERT_TRUE(dy.Get(&got).ok());
      RequantArgs host = r;  // the same epilogue on the host's sums
      host.a_sum = a_sum.data();
      host.b_sum = b_sum.data();
      host.multiplier = mult.data();
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n; ++j) {
          int32_t raw = 0;
          for (int64_t p = 0; p < k; ++p) raw += a[i * k + p] * b[j * k + p];
          const uint8_t want = out_signed ? static_cast<uint8_t>(RequantizeAccValue<int8_t>(raw, i, j, host))
                                          : RequantizeAccValue<uint8_t>(raw, i, j, host);
          ASSERT_EQ(got[i * n + j], want) << i << ", " << j;
        }
    }
  }
}

TEST(CudaWrappers, BlockedEllSpmmMatchesHost) {
  SKIP_WITHOUT_GPU();
  const int64_t rows = 128, cols = 96, n = 40, b = 32;
  std::vector<int8_t> a = RandomS8(rows * cols, 3);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c)
      if (((r / b) + (c / b)) % 2 == 1) a[r * cols + c] = 0;
  auto ell = DenseToBlockedEll(a.data(), rows, cols, cols, b);
  ASSERT_TRUE(ell.ok());
  const std::vector<int8_t> x = RandomS8(cols * n, 4);  // row-major [cols, n]
  const std::vector<int8_t> x_cm = ToColumnMajor(x.data(), cols, n);
  const std::vector<double> want = BlockedEllMatMulHost(*ell, x.data(), n);
  cusparseHandle_t sp = nullptr;
  ASSERT_TRUE(ToStatus(cusparseCreate(&sp), "cusparseCreate").ok());
  DeviceVector<int32_t> col_ind, y;
  DeviceVector<int8_t> values, dx;
  ASSERT_TRUE(col_ind.Init(ell->col_ind).ok());
  ASSERT_TRUE(values.Init(ell->values).ok());
  ASSERT_TRUE(dx.Init(x_cm).ok());
  ASSERT_TRUE(y.Init(std::vector<int32_t>(rows * n, 0)).ok());
  SpmmBlockedEllArgs args;
  args.type = SpmmType::kS8;
  args.rows = rows;
  args.cols = cols;
  args.block_size = b;
  args.ell_cols = ell->ell_cols;
  args.col_ind = col_ind.p;
  args.values = values.p;
  args.n = n;
  args.b = dx.p;
  args.ldb = cols;
  args.c = y.p;
  args.ldc = rows;
  ASSERT_TRUE(SpmmBlockedEll::CanImplement(args).ok());
  SpmmBlockedEll spmm;
  Status st = spmm.Init(sp, args);
  ASSERT_TRUE(st.ok()) << st.ToString();
  DeviceVector<uint8_t> ws;
  ASSERT_TRUE(ws.Init(std::vector<uint8_t>(spmm.workspace_size() + 1)).ok());
  st = spmm.Run(sp, args, ws.p, nullptr);
  ASSERT_TRUE(st.ok()) << st.ToString();
  std::vector<int32_t> got(rows * n);
  ASSERT_TRUE(y.Get(&got).ok());
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < n; ++j) ASSERT_EQ(got[j * rows + r], static_cast<int32_t>(want[r * n + j])) << r << ", " << j;
  (void)cusparseDestroy(sp);
}

}  // namespace
}  // namespace cuda
}  // namespace sparq

#else
TEST(CudaWrappers, NeedCuda) { GTEST_SKIP() << "built without CUDA (-DSPARQ_CUDA=OFF)"; }
#endif
