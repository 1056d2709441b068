// Dense -> Blocked-ELL / BSR conversions of kernels/cuda/layouts.h, checked on
// the CPU: round trips, cuSPARSE's layout rules (-1 padding, ell_cols, block
// order) and the product against a dense matmul.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "kernels/cuda/layouts.h"

namespace sparq {
namespace cuda {
namespace {

// A rows x cols matrix in which each b x b block is zero with probability `sparsity`.
std::vector<float> BlockSparseMatrix(int64_t rows, int64_t cols, int64_t b, double sparsity, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> val(-1.0f, 1.0f);
  std::bernoulli_distribution keep(1.0 - sparsity);
  std::vector<float> m(static_cast<size_t>(rows * cols), 0.0f);
  for (int64_t br = 0; br * b < rows; ++br) {
    for (int64_t bc = 0; bc * b < cols; ++bc) {
      if (!keep(rng)) continue;
      for (int64_t r = br * b; r < std::min(rows, (br + 1) * b); ++r) {
        for (int64_t c = bc * b; c < std::min(cols, (bc + 1) * b); ++c) m[r * cols + c] = val(rng);
      }
    }
  }
  return m;
}

std::vector<double> DenseMatMul(const std::vector<float>& a, const std::vector<float>& b, int64_t m, int64_t k,
                                int64_t n) {
  std::vector<double> c(static_cast<size_t>(m * n), 0.0);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t p = 0; p < k; ++p)
      for (int64_t j = 0; j < n; ++j) c[i * n + j] += static_cast<double>(a[i * k + p]) * b[p * n + j];
  return c;
}

TEST(CudaLayouts, BlockedEllFollowsCusparseLayout) {
  // The example of layouts.h: b = 2, 4 x 6.
  const std::vector<float> dense = {1, 2, 0, 0, 3, 4,  //
                                    5, 6, 0, 0, 7, 8,  //
                                    0, 0, 9, 1, 0, 0,  //
                                    0, 0, 2, 3, 0, 0};
  auto ell = DenseToBlockedEll(dense.data(), 4, 6, 6, 2);
  ASSERT_TRUE(ell.ok()) << ell.status().ToString();
  EXPECT_EQ(ell->ell_cols, 4);
  EXPECT_EQ(ell->slots(), 2);
  EXPECT_EQ(ell->col_ind, (std::vector<int32_t>{0, 2, 1, -1}));
  EXPECT_EQ(ell->values, (std::vector<float>{1, 2, 3, 4, 5, 6, 7, 8, 9, 1, 0, 0, 2, 3, 0, 0}));
  EXPECT_EQ(ell->nonzero_blocks(), 3);
  EXPECT_EQ(BlockedEllToDense(*ell), dense);
}

TEST(CudaLayouts, BlockedEllProductEqualsDenseMatMul) {
  for (int64_t b : {1, 4, 16, 32}) {
    for (double sparsity : {0.0, 0.5, 0.9, 1.0}) {
      const int64_t m = 70, k = 100, n = 9;  // not multiples of b: padded
      const std::vector<float> a = BlockSparseMatrix(m, k, b, sparsity, static_cast<uint32_t>(b * 100 + sparsity * 10));
      const std::vector<float> x = BlockSparseMatrix(k, n, 1, 0.0, 77);
      auto ell = DenseToBlockedEll(a.data(), m, k, k, b);
      ASSERT_TRUE(ell.ok()) << ell.status().ToString();
      EXPECT_EQ(ell->padded_rows % b, 0);
      EXPECT_EQ(ell->padded_cols % b, 0);
      EXPECT_GE(ell->ell_cols, b);
      EXPECT_EQ(ell->values.size(), static_cast<size_t>(ell->padded_rows * ell->ell_cols));
      EXPECT_EQ(ell->col_ind.size(), static_cast<size_t>(ell->block_rows() * ell->slots()));
      for (int64_t br = 0; br < ell->block_rows(); ++br) {  // increasing columns, then -1s
        int32_t prev = -1;
        bool padding = false;
        for (int64_t s = 0; s < ell->slots(); ++s) {
          const int32_t c = ell->col_ind[br * ell->slots() + s];
          if (c < 0) {
            padding = true;
            continue;
          }
          EXPECT_FALSE(padding) << "a block after -1 padding in block-row " << br;
          EXPECT_GT(c, prev);
          EXPECT_LT(c, ell->padded_cols / b);
          prev = c;
        }
      }
      EXPECT_EQ(BlockedEllToDense(*ell), a);
      const std::vector<double> want = DenseMatMul(a, x, m, k, n);
      const std::vector<double> got = BlockedEllMatMulHost(*ell, x.data(), n);
      ASSERT_EQ(got.size(), want.size());
      for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-9) << "b " << b << " at " << i;
      EXPECT_NEAR(BlockSparsity(a.data(), m, k, k, b), 1.0 - static_cast<double>(ell->nonzero_blocks()) /
                                                                 static_cast<double>(ell->block_rows() * (ell->padded_cols / b)),
                  1e-12);
    }
  }
}

TEST(CudaLayouts, BsrRoundTripsAndCountsBlocks) {
  const int64_t m = 48, k = 40, b = 8;
  const std::vector<float> a = BlockSparseMatrix(m, k, b, 0.7, 5);
  auto bsr = DenseToBsr(a.data(), m, k, k, b);
  ASSERT_TRUE(bsr.ok()) << bsr.status().ToString();
  auto ell = DenseToBlockedEll(a.data(), m, k, k, b);
  ASSERT_TRUE(ell.ok());
  EXPECT_EQ(bsr->nnzb(), ell->nonzero_blocks());
  EXPECT_EQ(bsr->row_ptr.size(), static_cast<size_t>(m / b + 1));
  EXPECT_EQ(bsr->row_ptr.back(), bsr->nnzb());
  EXPECT_EQ(bsr->values.size(), static_cast<size_t>(bsr->nnzb() * b * b));
  EXPECT_EQ(BsrToDense(*bsr), a);
}

TEST(CudaLayouts, Int8AndHalfBitsConvert) {
  const std::vector<int8_t> a = {0, 0, 3, -4, 0, 0, 5, 6};  // 2 x 4, b = 2: block 0 empty
  auto ell = DenseToBlockedEll(a.data(), 2, 4, 4, 2);
  ASSERT_TRUE(ell.ok());
  EXPECT_EQ(ell->col_ind, (std::vector<int32_t>{1}));
  EXPECT_EQ(BlockedEllToDense(*ell), a);
  const std::vector<uint16_t> h = {0x8000, 0x0000, 0x3c00, 0x0000};  // -0, 0 | 1, 0: 1 x 4, b = 2
  auto he = DenseToBlockedEll(h.data(), 1, 4, 4, 2);
  ASSERT_TRUE(he.ok());
  EXPECT_EQ(he->col_ind, (std::vector<int32_t>{1}));  // the -0 block is empty
  const std::vector<uint16_t> x = {0x3c00, 0x4000, 0x4200, 0x4400};  // 1, 2, 3, 4 as a 4 x 1 column
  EXPECT_EQ(BlockedEllMatMulHost(*he, x.data(), 1), (std::vector<double>{3.0}));
}

TEST(CudaLayouts, EmptyMatrixKeepsOneSlotPerBlockRow) {
  const std::vector<float> zero(64, 0.0f);
  auto ell = DenseToBlockedEll(zero.data(), 8, 8, 8, 4);
  ASSERT_TRUE(ell.ok());
  EXPECT_EQ(ell->ell_cols, 4);
  EXPECT_EQ(ell->col_ind, (std::vector<int32_t>{-1, -1}));
}

TEST(CudaLayouts, BadSizesAreRefused) {
  const float one = 1.0f;
  EXPECT_EQ(DenseToBlockedEll(&one, 1, 1, 1, 0).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(DenseToBlockedEll(&one, 0, 1, 1, 1).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(DenseToBsr(&one, 1, 2, 1, 1).status().code(), StatusCode::kInvalidArgument);
}

TEST(CudaLayouts, PackingHelpers) {
  const std::vector<int8_t> a = {1, 2, 3, 4, 5, 6};  // 2 x 3
  EXPECT_EQ(ToColumnMajor(a.data(), 2, 3), (std::vector<int8_t>{1, 4, 2, 5, 3, 6}));
  EXPECT_EQ(PadMatrix(a.data(), 2, 3, 3, 4), (std::vector<int8_t>{1, 2, 3, 0, 4, 5, 6, 0, 0, 0, 0, 0}));
  EXPECT_EQ(RoundUp(17, 16), 32);
  EXPECT_EQ(RoundUp(32, 16), 32);
}

}  // namespace
}  // namespace cuda
}  // namespace sparq
