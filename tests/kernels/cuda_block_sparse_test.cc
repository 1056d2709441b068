// The block-sparse GPU layers, checked on the CPU: the one rule that decides
// whether a constant weight runs block-sparse and on which kernel
// (block_sparse_choice.h), the own WMMA kernel's grid run on the host with
// its tiling (spmm_bell_tiles.h) against the reference MatMul, its
// can_implement refusals, and the INT8 Blocked-ELL pipeline of
// qlinear_matmul_s8_bell_cusparse (int32 SpMM, then the shared requantize
// epilogue) bit for bit with the reference. Runs on every machine.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/cuda/block_sparse_choice.h"
#include "kernels/cuda/device_kernels.h"
#include "kernels/cuda/layouts.h"
#include "kernels/cuda/spmm_bell_tiles.h"
#include "kernels/op_test_util.h"
#include "kernels/ref/quantize.h"

namespace sparq {
namespace cuda {
namespace {

constexpr double kGemmF16 = 1e-2;  // float16 output of float sums in another order (one or two float16 ulp)

// W^T [n, k] float16 bits in which the 32 x 32 block (br, bc) is nonzero when keep(br, bc).
template <typename Keep>
std::vector<uint16_t> BlockPattern(int64_t n, int64_t k, Keep keep, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> val(-1.0f, 1.0f);
  std::vector<uint16_t> w(static_cast<size_t>(n * k), 0);
  for (int64_t r = 0; r < n; ++r)
    for (int64_t c = 0; c < k; ++c)
      if (keep(r / 32, c / 32)) w[r * k + c] = FloatToHalf(val(rng));
  return w;
}

StatusOr<KernelSpeedTable> Table(const std::string& rows) {
  return KernelSpeedTable::Parse("backend,structure,precision,sparsity,speedup,shape\n" + rows, "t.csv");
}

// n = 256, k = 512: one 32 x 32 block in 8 kept (87.5% at 32), which leaves
// two 64 x 64 blocks in 8 nonzero (75% at 64).
std::vector<uint16_t> EighthOfBlocks() {
  return BlockPattern(256, 512, [](int64_t br, int64_t bc) { return (br * 16 + bc) % 8 == 0; }, 1);
}

TEST(GpuBlockSparseChoice, WithoutGpuRowsTheDefaultThresholdOnCusparse) {
  const KernelSpeedTable empty;
  const std::vector<uint16_t> w = EighthOfBlocks();
  auto c = ChooseGpuBlockSparse(empty, "f16", true, w.data(), 256, 512);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->block, 32);  // 64 x 64 blocks are only 75% zero
  EXPECT_DOUBLE_EQ(c->sparsity, 0.875);
  EXPECT_EQ(c->kernel, BlockSparseKernel::kCusparse);
  // CPU rows and s8 rows say nothing about float16 on the GPU.
  auto other = Table("cpu,block4x4,f32,0.8,3.0,any\ncuda,block32x32,s8,0.9,0.5,any\n");
  ASSERT_TRUE(other.ok());
  EXPECT_TRUE(ChooseGpuBlockSparse(*other, "f16", true, w.data(), 256, 512).ok());
  const std::vector<uint16_t> half = BlockPattern(256, 512, [](int64_t br, int64_t bc) { return (br + bc) % 2 == 0; }, 2);
  auto dense = ChooseGpuBlockSparse(empty, "f16", true, half.data(), 256, 512);
  ASSERT_FALSE(dense.ok());
  EXPECT_EQ(dense.status().code(), StatusCode::kNotSupported);
  EXPECT_NE(dense.status().message().find("below 80%"), std::string::npos) << dense.status().message();
  const std::vector<uint16_t> odd(static_cast<size_t>(48 * 80), 0);
  EXPECT_FALSE(ChooseGpuBlockSparse(empty, "f16", true, odd.data(), 48, 80).ok());  // not multiples of 32
}

TEST(GpuBlockSparseChoice, GpuRowsDecideTheBlockAndTheKernel) {
  const std::vector<uint16_t> w = EighthOfBlocks();  // 87.5% at 32, 75% at 64
  auto slow = Table("cuda,block32x32,f16,0.8,0.9,any\ncuda,block32x32,f16,0.9,1.4,any\n");
  ASSERT_TRUE(slow.ok());
  auto c = ChooseGpuBlockSparse(*slow, "f16", true, w.data(), 256, 512);
  ASSERT_FALSE(c.ok());  // measured at 80%: 0.9x
  EXPECT_NE(c.status().message().find("cuSPARSE 0.90x"), std::string::npos) << c.status().message();

  auto pays = Table("cuda,block32x32,f16,0.8,1.3,any\ncuda,block64x64,f16,0.7,1.1,any\n");
  ASSERT_TRUE(pays.ok());
  c = ChooseGpuBlockSparse(*pays, "f16", true, w.data(), 256, 512);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->block, 32);  // 1.3x beats 64's 1.1x
  EXPECT_DOUBLE_EQ(c->speedup, 1.3);
  EXPECT_EQ(c->kernel, BlockSparseKernel::kCusparse);

  auto own = Table("cuda,block32x32,f16,0.8,1.3,any\ncuda.wmma,block32x32,f16,0.8,2.0,any\n");
  ASSERT_TRUE(own.ok());
  c = ChooseGpuBlockSparse(*own, "f16", true, w.data(), 256, 512);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->kernel, BlockSparseKernel::kWmma);
  EXPECT_DOUBLE_EQ(c->speedup, 2.0);
  c = ChooseGpuBlockSparse(*own, "f16", false, w.data(), 256, 512);  // no own kernel for this precision
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->kernel, BlockSparseKernel::kCusparse);

  // Only the own kernel measured, and slower than dense: stays dense (no default threshold then).
  auto only_own = Table("cuda.wmma,block32x32,f16,0.8,0.7,any\n");
  ASSERT_TRUE(only_own.ok());
  EXPECT_FALSE(ChooseGpuBlockSparse(*only_own, "f16", true, w.data(), 256, 512).ok());

  // INT8 reads the s8 rows.
  std::vector<int8_t> w8(w.size());
  for (size_t i = 0; i < w.size(); ++i) w8[i] = w[i] != 0 ? 3 : 0;
  auto s8 = Table("cuda,block32x32,s8,0.8,1.8,any\ncuda,block32x32,f16,0.8,0.5,any\n");
  ASSERT_TRUE(s8.ok());
  auto c8 = ChooseGpuBlockSparse(*s8, "s8", false, w8.data(), 256, 512);
  ASSERT_TRUE(c8.ok()) << c8.status().ToString();
  EXPECT_DOUBLE_EQ(c8->speedup, 1.8);
}

// The own kernels' grid (spmm_bell_wmma.cu) one block and one thread at a
// time: each slot's W^T block and X tile staged by BellStageA / BellStageX
// (every element a fragment reads must have been staged in this slot), each
// warp's 2 x 2 fragments summed from the stage in the layouts WMMA reads (sa
// row-major, sx column-major, ldm kLd), stored column-major at BellFragC,
// then the output walk of BellOutElement: epilogue(sum, row, col) at
// [row, col] of out [m, n]. E = 2: float16 bits with float sums; E = 1: int8
// with int32 sums.
inline float Product(uint16_t a, uint16_t b) { return HalfToFloat(a) * HalfToFloat(b); }
inline int32_t Product(int8_t a, int8_t b) { return static_cast<int32_t>(a) * b; }

template <int B, int E, typename In, typename Acc, typename Out, typename Epilogue>
std::vector<Out> BellGridOnHost(const BlockedEll<In>& ell, const std::vector<In>& x, int64_t m, Epilogue epilogue) {
  using T = BellTile<B, E>;
  const int64_t n = ell.padded_rows, k = ell.padded_cols, slots = ell.slots();
  std::vector<Out> out(static_cast<size_t>(m * n), Out{});
  std::vector<uint8_t> written(out.size(), 0);
  std::vector<In> stage(static_cast<size_t>(T::kStageElems));
  std::vector<uint8_t> staged(stage.size());
  std::vector<Acc> sc(static_cast<size_t>(T::kTokens * T::kCLd));
  bool unstaged_read = false;
  for (int64_t by = 0; by < n / B; ++by)
    for (int64_t bx = 0; bx * T::kTokens < m; ++bx) {
      const int64_t m0 = bx * T::kTokens;
      const int32_t* cols = ell.col_ind.data() + by * slots;
      std::vector<Acc> acc(4 * 2 * 2 * 16 * 16, Acc(0));  // [warp][i][j][row][col]
      for (int64_t s = 0; s < slots && cols[s] >= 0; ++s) {
        std::fill(staged.begin(), staged.end(), uint8_t{0});
        for (int t = 0; t < T::kThreads; ++t) {
          for (int q = t; q < T::kAChunks; q += T::kThreads) {
            const BellCopy c = BellStageA<B, E>(q, by, s, ell.ell_cols);
            for (int e = 0; e < T::kChunkElems; ++e) {
              stage[c.dst + e] = ell.values[c.src + e];
              staged[c.dst + e] = 1;
            }
          }
          for (int q = t; q < T::kXChunks; q += T::kThreads) {
            const BellCopy c = BellStageX<B, E>(q, m0, cols[s], m, k);
            for (int e = 0; e < T::kChunkElems; ++e) {
              stage[B * T::kLd + c.dst + e] = c.valid ? x[c.src + e] : In(0);
              staged[B * T::kLd + c.dst + e] = 1;
            }
          }
        }
        const In* sa = stage.data();
        const In* sx = sa + B * T::kLd;
        for (int w = 0; w < 4; ++w)
          for (int kk = 0; kk < B / 16; ++kk)
            for (int i = 0; i < 2; ++i)
              for (int j = 0; j < 2; ++j)
                for (int r = 0; r < 16; ++r)
                  for (int col = 0; col < 16; ++col) {
                    Acc sum = Acc(0);
                    for (int e = 0; e < 16; ++e) {
                      const int oa = BellFragA<B, E>(w, i, kk) + r * T::kLd + e;
                      const int ox = B * T::kLd + BellFragX<B, E>(w, j, kk) + col * T::kLd + e;
                      unstaged_read = unstaged_read || !staged[oa] || !staged[ox];
                      sum += Product(sa[oa], sx[ox - B * T::kLd]);
                    }
                    acc[((((w * 2 + i) * 2 + j) * 16) + r) * 16 + col] += sum;
                  }
      }
      for (int w = 0; w < 4; ++w)
        for (int i = 0; i < 2; ++i)
          for (int j = 0; j < 2; ++j)
            for (int r = 0; r < 16; ++r)
              for (int col = 0; col < 16; ++col)
                sc[BellFragC<B, E>(w, i, j) + col * T::kCLd + r] = acc[((((w * 2 + i) * 2 + j) * 16) + r) * 16 + col];
      for (int t = 0; t < T::kThreads; ++t)
        for (int idx = t; idx < B * T::kTokens; idx += T::kThreads) {
          int f, tok;
          BellOutElement<B>(idx, &f, &tok);
          if (m0 + tok >= m) continue;
          const size_t o = static_cast<size_t>((m0 + tok) * n + by * B + f);
          out[o] = epilogue(sc[tok * T::kCLd + f], m0 + tok, by * B + f);
          ++written[o];
        }
    }
  EXPECT_FALSE(unstaged_read) << "a fragment read shared memory no copy of this slot wrote";
  for (size_t i = 0; i < written.size(); ++i) EXPECT_EQ(written[i], 1) << "output " << i << " written " << int(written[i]) << " times";
  return out;
}

template <int B>
void CheckBellGrid(int64_t m, int64_t k, int64_t n, uint32_t seed) {
  SCOPED_TRACE("block " + std::to_string(B) + ", m " + std::to_string(m) + " k " + std::to_string(k) + " n " +
               std::to_string(n));
  // Block-rows with different counts of nonzero blocks, one with none.
  std::vector<uint16_t> wt = BlockPattern(
      n, k, [](int64_t br, int64_t bc) { return br != 1 && (br * 7 + bc * 3) % (br % 3 + 2) == 0; }, seed);
  Tensor w(DataType::kFloat16, {k, n}), xt(DataType::kFloat16, {m, k});
  for (int64_t r = 0; r < n; ++r)
    for (int64_t c = 0; c < k; ++c) w.data<Float16>()[c * n + r] = Float16{wt[r * k + c]};
  std::mt19937 rng(seed + 1);
  std::uniform_real_distribution<float> val(-1.0f, 1.0f);
  std::vector<uint16_t> x(static_cast<size_t>(m * k));
  for (size_t i = 0; i < x.size(); ++i) {
    x[i] = FloatToHalf(val(rng));
    xt.data<Float16>()[i] = Float16{x[i]};
  }
  auto want = testing::RunRefKernel(testing::OpNode("MatMul"), 13, {xt, w});
  ASSERT_TRUE(want.ok()) << want.status().ToString();
  auto ell = DenseToBlockedEll(wt.data(), n, k, k, B);
  ASSERT_TRUE(ell.ok());
  BellWmmaArgs args;
  args.block = B;
  args.n = n;
  args.k = k;
  args.ell_cols = ell->ell_cols;
  args.col_ind = ell->col_ind.data();
  args.values = ell->values.data();
  args.m = m;
  args.x = x.data();
  args.y = x.data();
  ASSERT_TRUE(CanImplementBellWmma(args).ok()) << CanImplementBellWmma(args).ToString();
  const std::vector<uint16_t> got = BellGridOnHost<B, 2, uint16_t, float, uint16_t>(
      *ell, x, m, [](float sum, int64_t, int64_t) { return FloatToHalf(sum); });
  const Tensor& ref = (*want)[0];
  ASSERT_EQ(ref.numel(), m * n);
  for (int64_t i = 0; i < m * n; ++i) {
    const double g = HalfToFloat(got[static_cast<size_t>(i)]), r = HalfToFloat(ref.data<Float16>()[i].bits);
    ASSERT_LE(std::fabs(g - r) / std::max(1.0, std::fabs(r)), kGemmF16) << "at " << i << ": " << g << " vs " << r;
  }
}

TEST(CudaKernelBodies, BellWmmaGridMatchesReference) {
  CheckBellGrid<32>(200, 256, 192, 11);  // partial token tiles (128 per tile)
  CheckBellGrid<64>(200, 256, 192, 12);  // 64 per tile
  CheckBellGrid<32>(1, 96, 64, 13);      // one token
  CheckBellGrid<64>(64, 128, 128, 14);   // whole tiles
}

TEST(CudaKernelBodies, BellWmmaRefusesWhatItCannotRun) {
  std::vector<int32_t> col_ind(4, 0);
  std::vector<uint16_t> values(64 * 64), x(64 * 64), y(64 * 64);
  BellWmmaArgs a;
  a.block = 32;
  a.n = 64;
  a.k = 64;
  a.ell_cols = 32;
  a.col_ind = col_ind.data();
  a.values = values.data();
  a.m = 64;
  a.x = x.data();
  a.y = y.data();
  EXPECT_TRUE(CanImplementBellWmma(a).ok());
  BellWmmaArgs b = a;
  b.block = 16;
  EXPECT_EQ(CanImplementBellWmma(b).code(), StatusCode::kNotSupported);
  b = a;
  b.k = 80;
  EXPECT_EQ(CanImplementBellWmma(b).code(), StatusCode::kNotSupported);
  b = a;
  b.x = reinterpret_cast<const uint8_t*>(x.data()) + 2;
  EXPECT_EQ(CanImplementBellWmma(b).code(), StatusCode::kNotSupported);
  b = a;
  b.values = nullptr;
  EXPECT_EQ(CanImplementBellWmma(b).code(), StatusCode::kInvalidArgument);
}

// ---------------------------------------------------------------------------
// INT8: the rows' arithmetic on the host, against the reference bit for bit:
// cuSPARSE's int32 product (as BlockedEllMatMulHost, exact for integers) and
// the epilogue kernel, and the own kernel's grid with the epilogue fused.

template <typename T>
Tensor RandomInt(Shape shape, uint32_t seed, int lo, int hi) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> dist(lo, hi);
  Tensor t(DataTypeOf<T>::value, std::move(shape));
  for (int64_t i = 0; i < t.numel(); ++i) t.data<T>()[i] = static_cast<T>(dist(rng));
  return t;
}

// Zeroes all but the 32 x 32 blocks (of W [k, n]) with (r / 32 + 2 * (c / 32)) % 5 == 0.
template <typename T>
Tensor BlockSparse(Tensor w, T zero) {
  for (int64_t r = 0; r < w.dim(0); ++r)
    for (int64_t c = 0; c < w.dim(1); ++c)
      if ((r / 32 + 2 * (c / 32)) % 5 != 0) w.data<T>()[r * w.dim(1) + c] = zero;
  return w;
}

// The int32 sums acc [m, n] (row-major) of the signed activations a [m, k] and
// the prepared weight, as rows_sparse.cc's cuSPARSE call computes them
// (Y^T = W^T * A^T), with the RequantArgs of the zero-point correction.
struct HostSparseSums {
  std::vector<int32_t> acc, row_sums;
  std::vector<int8_t> a8;  // the signed activations [M, K], what the own kernel reads
  BlockedEll<int8_t> ell;
  RequantArgs r;
};

HostSparseSums SparseSums(const Tensor& a, const Tensor& a_zp, const Tensor& w, const Tensor* w_zp, int64_t block) {
  HostSparseSums h;
  StatusOr<SignedSparseWeight> sw = SignedWeightForSparse(w, w_zp);
  EXPECT_TRUE(sw.ok()) << sw.status().ToString();
  if (!sw.ok()) return h;
  const int64_t M = a.dim(0), K = a.dim(1), N = w.dim(1);
  auto ell = DenseToBlockedEll(sw->wt.data(), N, K, K, block);
  EXPECT_TRUE(ell.ok());
  if (!ell.ok()) return h;
  const bool shifted = a.dtype() == DataType::kUInt8;
  std::vector<int8_t> at(static_cast<size_t>(K * M));  // A^T [K, M]: A row-major read column-major
  for (int64_t m = 0; m < M; ++m)
    for (int64_t k = 0; k < K; ++k)
      at[k * M + m] = shifted ? static_cast<int8_t>(a.data<uint8_t>()[m * K + k] ^ 0x80u) : a.data<int8_t>()[m * K + k];
  const std::vector<double> ct = BlockedEllMatMulHost(*ell, at.data(), M);  // [N, M]
  h.a8.resize(static_cast<size_t>(M * K));
  for (int64_t m = 0; m < M; ++m)
    for (int64_t k = 0; k < K; ++k) h.a8[m * K + k] = at[k * M + m];
  h.ell = *ell;
  h.acc.resize(static_cast<size_t>(M * N));
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n) h.acc[m * N + n] = static_cast<int32_t>(ct[n * M + m]);
  h.row_sums = sw->row_sums;
  h.r.acc = h.acc.data();
  h.r.rows = M;
  h.r.cols = N;
  h.r.k = static_cast<int32_t>(K);
  h.r.a_zp_scalar = static_cast<int32_t>(a_zp.GetAsDouble(0)) - (shifted ? 128 : 0);
  if (h.r.a_zp_scalar != 0) h.r.b_sum = h.row_sums.data();
  return h;
}

// The own INT8 kernel's grid with an epilogue, for block 32 or 64.
template <typename Out, typename Epilogue>
std::vector<Out> OwnS8Grid(const HostSparseSums& h, Epilogue epilogue) {
  if (h.ell.block_size == 64)
    return BellGridOnHost<64, 1, int8_t, int32_t, Out>(h.ell, h.a8, h.r.rows, epilogue);
  return BellGridOnHost<32, 1, int8_t, int32_t, Out>(h.ell, h.a8, h.r.rows, epilogue);
}

template <typename TY>
void CheckSparseQLinearMatMul(const Tensor& a, const Tensor& a_zp, const Tensor& w, const Tensor& w_scale,
                              const Tensor& w_zp, const Tensor& y_zp, int64_t block = 32) {
  const float a_scale = 0.02f, y_scale = 0.29f;
  auto want = testing::RunRefKernel(testing::OpNode("QLinearMatMul"), 10,
                                    {a, Tensor::Scalar(a_scale), a_zp, w, w_scale, w_zp, Tensor::Scalar(y_scale), y_zp});
  ASSERT_TRUE(want.ok()) << want.status().ToString();
  HostSparseSums h = SparseSums(a, a_zp, w, &w_zp, block);
  ASSERT_EQ(h.acc.size(), static_cast<size_t>(a.dim(0) * w.dim(1)));
  std::vector<float> mult(static_cast<size_t>(w_scale.numel()));
  for (size_t j = 0; j < mult.size(); ++j) mult[j] = RequantMultiplier(a_scale, w_scale.data<float>()[j], y_scale);
  h.r.multiplier = mult.data();
  h.r.multiplier_per_col = mult.size() > 1;
  h.r.y_zp = static_cast<int32_t>(y_zp.GetAsDouble(0));
  const Tensor& ref = (*want)[0];
  for (int64_t i = 0; i < ref.numel(); ++i) ASSERT_EQ(ref.data<TY>()[i], RequantizeElement<TY>(i, h.r)) << "at " << i;
  // The own kernel: the same epilogue on sums that never left the block.
  RequantArgs r = h.r;
  r.acc = nullptr;
  const std::vector<TY> own =
      OwnS8Grid<TY>(h, [&](int32_t raw, int64_t row, int64_t col) { return RequantizeAccValue<TY>(raw, row, col, r); });
  for (int64_t i = 0; i < ref.numel(); ++i) ASSERT_EQ(ref.data<TY>()[i], own[static_cast<size_t>(i)]) << "own, at " << i;
}

TEST(CudaKernelBodies, BlockSparseQLinearMatMulPipelineMatchesReferenceBitForBit) {
  const int64_t M = 37, K = 160, N = 96;
  std::vector<float> scales(N);
  for (int64_t n = 0; n < N; ++n) scales[n] = 0.001f + 0.0003f * static_cast<float>(n);
  // uint8 activations, symmetric int8 weight per column (zero points 0), uint8 output.
  CheckSparseQLinearMatMul<uint8_t>(RandomInt<uint8_t>({M, K}, 1, 0, 255), Tensor::Scalar<uint8_t>(133),
                                    BlockSparse<int8_t>(RandomInt<int8_t>({K, N}, 2, -127, 127), 0),
                                    Tensor::FromVector<float>({N}, scales),
                                    Tensor::FromVector<int8_t>({N}, std::vector<int8_t>(N, 0)), Tensor::Scalar<uint8_t>(121));
  // int8 activations, uint8 weight with zero point 128, int8 output.
  CheckSparseQLinearMatMul<int8_t>(RandomInt<int8_t>({M, K}, 3, -128, 127), Tensor::Scalar<int8_t>(-7),
                                   BlockSparse<uint8_t>(RandomInt<uint8_t>({K, N}, 4, 0, 255), 128),
                                   Tensor::Scalar(0.004f), Tensor::Scalar<uint8_t>(128), Tensor::Scalar<int8_t>(3));
  // Blocks of 64 (the own kernel's 64 x 64 tiles), tokens across two tiles.
  CheckSparseQLinearMatMul<uint8_t>(RandomInt<uint8_t>({100, 192}, 11, 0, 255), Tensor::Scalar<uint8_t>(140),
                                    BlockSparse<int8_t>(RandomInt<int8_t>({192, 128}, 12, -127, 127), 0),
                                    Tensor::Scalar(0.002f), Tensor::Scalar<int8_t>(0), Tensor::Scalar<uint8_t>(127), 64);
  // Activations' zero point 0: no correction at all.
  CheckSparseQLinearMatMul<int8_t>(RandomInt<int8_t>({M, K}, 5, -128, 127), Tensor::Scalar<int8_t>(0),
                                   BlockSparse<int8_t>(RandomInt<int8_t>({K, N}, 6, -127, 127), 0), Tensor::Scalar(0.004f),
                                   Tensor::Scalar<int8_t>(0), Tensor::Scalar<int8_t>(-2));
}

TEST(CudaKernelBodies, BlockSparseMatMulIntegerToFloatMatchesReferenceBitForBit) {
  const int64_t M = 19, K = 128, N = 64;
  const Tensor a = RandomInt<uint8_t>({M, K}, 7, 0, 255), a_zp = Tensor::Scalar<uint8_t>(125);
  const Tensor w = BlockSparse<int8_t>(RandomInt<int8_t>({K, N}, 8, -127, 127), 0), w_zp = Tensor::Scalar<int8_t>(0);
  std::vector<float> b_scale(N), bias(N);
  for (int64_t n = 0; n < N; ++n) {
    b_scale[n] = 0.002f + 0.0001f * static_cast<float>(n);
    bias[n] = 0.1f * static_cast<float>(n % 7) - 0.3f;
  }
  Node node = testing::OpNode("MatMulIntegerToFloat", {Attribute::String("activation", "GeluErfChain")});
  node.domain = kSparqDomain;
  const Tensor a_scale = Tensor::Scalar(0.013f);
  auto want = testing::RunRefKernel(node, 1, {a, w, a_zp, w_zp, a_scale, Tensor::FromVector<float>({N}, b_scale),
                                              Tensor::FromVector<float>({N}, bias)});
  ASSERT_TRUE(want.ok()) << want.status().ToString();
  HostSparseSums h = SparseSums(a, a_zp, w, &w_zp, 32);
  ASSERT_EQ(h.acc.size(), static_cast<size_t>(M * N));
  std::vector<float> scale(N);
  for (int64_t n = 0; n < N; ++n) scale[n] = 0.013f * b_scale[n];
  FloatEpilogue e;
  e.scale = scale.data();
  e.scale_per_col = true;
  e.bias = bias.data();
  e.gelu = true;
  const Tensor& ref = (*want)[0];
  RequantArgs r = h.r;
  r.acc = nullptr;
  const std::vector<float> own =
      OwnS8Grid<float>(h, [&](int32_t raw, int64_t row, int64_t col) { return AccToFloatValue(raw, row, col, r, e); });
  for (int64_t i = 0; i < ref.numel(); ++i) {
    const float g = AccToFloatElement(i, h.r, e);
    ASSERT_EQ(0, std::memcmp(&ref.data<float>()[i], &g, sizeof(float))) << "at " << i;
    ASSERT_EQ(0, std::memcmp(&ref.data<float>()[i], &own[static_cast<size_t>(i)], sizeof(float))) << "own, at " << i;
  }
}

TEST(CudaKernelBodies, BlockSparseInt8DeclinesAsymmetricWeights) {
  const Tensor w = RandomInt<int8_t>({64, 32}, 9, -127, 127);
  const Tensor zp = Tensor::Scalar<int8_t>(3);
  auto sw = SignedWeightForSparse(w, &zp);
  ASSERT_FALSE(sw.ok());
  EXPECT_EQ(sw.status().code(), StatusCode::kNotSupported);
  EXPECT_NE(sw.status().message().find("symmetric"), std::string::npos) << sw.status().message();
  const Tensor u = RandomInt<uint8_t>({64, 32}, 10, 0, 255), uzp = Tensor::Scalar<uint8_t>(0);
  EXPECT_FALSE(SignedWeightForSparse(u, &uzp).ok());  // uint8 needs 128
  EXPECT_FALSE(SignedWeightForSparse(u, nullptr).ok());  // absent: 0
  const Tensor f = Tensor(DataType::kFloat32, {64, 32});
  EXPECT_FALSE(SignedWeightForSparse(f, nullptr).ok());
}

}  // namespace
}  // namespace cuda
}  // namespace sparq
