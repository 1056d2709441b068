// The CUDA kernels' per-element bodies (kernels/cuda/device_kernels.h) run by
// a host loop over the grid, against the reference kernels: the INT8 paths
// (QLinearMatMul, QLinearConv as the CUDA rows compute them: signed operands,
// int32 GEMM, zero points applied after, requantization) bit for bit, pooling
// bit for bit, the depthwise convolution within a named tolerance. Runs on
// every machine; the GEMM itself (cuBLASLt) is a plain int32 loop here.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "kernels/cuda/device_kernels.h"
#include "kernels/cuda/geometry.h"
#include "kernels/op_test_util.h"
#include "kernels/ref/quantize.h"

namespace sparq {
namespace {

using cuda::Conv2dGeometry;
using cuda::Pool2dGeometry;
using cuda::RequantArgs;

constexpr double kDepthwiseTolerance = 1e-5;  // fused multiply-adds vs the reference's im2col GEMM

template <typename T>
Tensor RandomInt(Shape shape, uint32_t seed, int lo, int hi) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> dist(lo, hi);
  Tensor t(DataTypeOf<T>::value, std::move(shape));
  for (int64_t i = 0; i < t.numel(); ++i) t.data<T>()[i] = static_cast<T>(dist(rng));
  return t;
}

Tensor RandomF32(Shape shape, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-2.0f, 2.0f);
  Tensor t(DataType::kFloat32, std::move(shape));
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = dist(rng);
  return t;
}

// An int8 / uint8 tensor as the CUDA rows see it: int8, uint8 shifted by -128.
std::vector<int8_t> Signed(const Tensor& t, bool* shifted) {
  std::vector<int8_t> v(static_cast<size_t>(t.numel()));
  *shifted = t.dtype() == DataType::kUInt8;
  for (int64_t i = 0; i < t.numel(); ++i) {
    v[static_cast<size_t>(i)] = *shifted ? static_cast<int8_t>(t.data<uint8_t>()[i] ^ 0x80u) : t.data<int8_t>()[i];
  }
  return v;
}

std::vector<int32_t> ZeroPoints(const Tensor& t, bool shifted) {
  std::vector<int32_t> v(static_cast<size_t>(t.numel()));
  for (int64_t i = 0; i < t.numel(); ++i) v[static_cast<size_t>(i)] = static_cast<int32_t>(t.GetAsDouble(i)) - (shifted ? 128 : 0);
  return v;
}

// acc[m, n] = sum_k a[m, k] * b[n, k]; sums[r] = sum_k x[r, k]: what cuBLASLt and LaunchRowSumsS8 compute.
std::vector<int32_t> GemmS8(const std::vector<int8_t>& a, const std::vector<int8_t>& b, int64_t m, int64_t n, int64_t k) {
  std::vector<int32_t> acc(static_cast<size_t>(m * n), 0);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      int32_t s = 0;
      for (int64_t p = 0; p < k; ++p) s += a[i * k + p] * b[j * k + p];
      acc[i * n + j] = s;
    }
  return acc;
}
std::vector<int32_t> RowSums(const std::vector<int8_t>& x, int64_t rows, int64_t k) {
  std::vector<int32_t> s(static_cast<size_t>(rows), 0);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t p = 0; p < k; ++p) s[r] += x[r * k + p];
  return s;
}

// The fused INT8 GEMM (gemm_s8_fused.cu) as its grid computes it, one block
// and one thread at a time: operands staged by FusedStageSlot /
// FusedStageBytes into the chunked shared tiles, each warp's 2 x 2 16x16x16
// fragments summed from those tiles in the layout WMMA reads (A row-major,
// B column-major, ldm 16), stored to the shared result tile at the warp's
// offsets, then `epilogue(raw, row, col)` written by the kernel's index walk.
// Pins the tiling, padding and index arithmetic the device kernel shares.
template <typename TOut, typename Epilogue>
std::vector<TOut> FusedGemmOnHost(const std::vector<int8_t>& a, const std::vector<int8_t>& b, int64_t m, int64_t n,
                                  int64_t k, Epilogue epilogue) {
  using namespace cuda;
  constexpr int kChunks = kFusedBlockK / 16;
  std::vector<TOut> out(static_cast<size_t>(m * n), TOut{});
  std::vector<uint8_t> written(out.size(), 0);
  std::vector<int8_t> sa(kChunks * kFusedBlockM * 16), sb(kChunks * kFusedBlockN * 16);
  std::vector<int32_t> sc(kFusedBlockM * kFusedCLd);
  for (int64_t by = 0; by * kFusedBlockM < m; ++by)
    for (int64_t bx = 0; bx * kFusedBlockN < n; ++bx) {
      const int64_t row0 = by * kFusedBlockM, col0 = bx * kFusedBlockN;
      std::vector<int32_t> acc(kFusedWarpsM * kFusedWarpsN * 32 * 32, 0);  // [warp][32][32]
      for (int64_t k0 = 0; k0 < k; k0 += kFusedBlockK) {
        for (int t = 0; t < kFusedThreads; ++t)
          for (int s = 0; s < 2; ++s) {
            int row, chunk;
            FusedStageSlot(t, s, &row, &chunk);
            FusedStageBytes(a.data(), m, k, row0, k0, row, chunk, kFusedBlockM, sa.data());
            FusedStageBytes(b.data(), n, k, col0, k0, row, chunk, kFusedBlockN, sb.data());
          }
        for (int w = 0; w < kFusedWarpsM * kFusedWarpsN; ++w) {
          const int wm = w / kFusedWarpsN, wn = w % kFusedWarpsN;
          for (int c = 0; c < kChunks; ++c)
            for (int i = 0; i < 32; ++i)
              for (int j = 0; j < 32; ++j) {
                const int8_t* pa = sa.data() + (c * kFusedBlockM + wm * 32 + i) * 16;  // A fragment row i
                const int8_t* pb = sb.data() + (c * kFusedBlockN + wn * 32 + j) * 16;  // B fragment column j
                int32_t s = 0;
                for (int kk = 0; kk < 16; ++kk) s += pa[kk] * pb[kk];
                acc[(w * 32 + i) * 32 + j] += s;
              }
        }
      }
      for (int w = 0; w < kFusedWarpsM * kFusedWarpsN; ++w) {
        const int wm = w / kFusedWarpsN, wn = w % kFusedWarpsN;
        for (int i = 0; i < 32; ++i)
          for (int j = 0; j < 32; ++j) sc[(wm * 32 + i) * kFusedCLd + wn * 32 + j] = acc[(w * 32 + i) * 32 + j];
      }
      for (int t = 0; t < kFusedThreads; ++t)
        for (int idx = t; idx < kFusedBlockM * kFusedBlockN; idx += kFusedThreads) {
          const int rr = idx / kFusedBlockN, cc = idx % kFusedBlockN;
          const int64_t gr = row0 + rr, gc = col0 + cc;
          if (gr >= m || gc >= n) continue;
          out[static_cast<size_t>(gr * n + gc)] = epilogue(sc[rr * kFusedCLd + cc], gr, gc);
          ++written[static_cast<size_t>(gr * n + gc)];
        }
    }
  for (size_t i = 0; i < written.size(); ++i) EXPECT_EQ(written[i], 1) << "output " << i << " written " << int(written[i]) << " times";
  return out;
}

template <typename T>
void ExpectBytesEqual(const Tensor& want, const std::vector<T>& got) {
  ASSERT_EQ(static_cast<size_t>(want.numel()), got.size());
  for (int64_t i = 0; i < want.numel(); ++i) ASSERT_EQ(want.data<T>()[i], got[static_cast<size_t>(i)]) << "at " << i;
}

// QLinearMatMul the way qlinear_matmul_s8_wmma (and, fused_int8_gemm off, _cublaslt) computes it.
template <typename TY>
void CheckQLinearMatMul(const Tensor& a, const Tensor& a_zp, const Tensor& b, const Tensor& b_scale, const Tensor& b_zp,
                        const Tensor& y_zp) {
  const float a_scale = 0.02f, y_scale = 0.37f;
  auto want = testing::RunRefKernel(testing::OpNode("QLinearMatMul"), 10,
                                    {a, Tensor::Scalar(a_scale), a_zp, b, b_scale, b_zp, Tensor::Scalar(y_scale), y_zp});
  ASSERT_TRUE(want.ok()) << want.status().ToString();
  const int64_t M = a.dim(0), K = a.dim(1), N = b.dim(1);
  bool a_shift = false, b_shift = false;
  const std::vector<int8_t> a8 = Signed(a, &a_shift), b8 = Signed(b, &b_shift);
  std::vector<int8_t> bt(static_cast<size_t>(N * K));
  for (int64_t k = 0; k < K; ++k)
    for (int64_t n = 0; n < N; ++n) bt[n * K + k] = b8[k * N + n];
  const std::vector<int32_t> acc = GemmS8(a8, bt, M, N, K), a_sum = RowSums(a8, M, K), b_sum = RowSums(bt, N, K);
  const std::vector<int32_t> za = ZeroPoints(a_zp, a_shift), zb = ZeroPoints(b_zp, b_shift);
  std::vector<float> mult(static_cast<size_t>(b_scale.numel()));
  for (size_t j = 0; j < mult.size(); ++j) mult[j] = RequantMultiplier(a_scale, b_scale.data<float>()[j], y_scale);
  RequantArgs r;
  r.acc = acc.data();
  r.rows = M;
  r.cols = N;
  r.k = static_cast<int32_t>(K);
  r.a_sum = a_sum.data();
  r.b_sum = b_sum.data();
  r.a_zp_scalar = za[0];
  if (zb.size() > 1) r.b_zp = zb.data();
  else r.b_zp_scalar = zb[0];
  r.multiplier = mult.data();
  r.multiplier_per_col = mult.size() > 1;
  r.y_zp = static_cast<int32_t>(y_zp.GetAsDouble(0));
  std::vector<TY> got(static_cast<size_t>(M * N));
  for (int64_t i = 0; i < M * N; ++i) got[static_cast<size_t>(i)] = cuda::RequantizeElement<TY>(i, r);
  ExpectBytesEqual((*want)[0], got);
  // The fused GEMM: the same epilogue on sums that never left the block.
  r.acc = nullptr;
  ExpectBytesEqual((*want)[0], FusedGemmOnHost<TY>(a8, bt, M, N, K, [&](int32_t raw, int64_t row, int64_t col) {
                     return cuda::RequantizeAccValue<TY>(raw, row, col, r);
                   }));
}

TEST(CudaKernelBodies, QLinearMatMulPipelineMatchesReferenceBitForBit) {
  const int64_t M = 23, K = 70, N = 31;
  std::vector<float> scales(N);
  std::vector<int8_t> zps(N);
  std::mt19937 rng(3);
  for (int64_t n = 0; n < N; ++n) {
    scales[n] = 0.001f + 0.0005f * static_cast<float>(n);
    zps[n] = static_cast<int8_t>(static_cast<int>(rng() % 21) - 10);
  }
  // uint8 activations, int8 per-column weights, uint8 output.
  CheckQLinearMatMul<uint8_t>(RandomInt<uint8_t>({M, K}, 1, 0, 255), Tensor::Scalar<uint8_t>(133),
                              RandomInt<int8_t>({K, N}, 2, -128, 127), Tensor::FromVector<float>({N}, scales),
                              Tensor::FromVector<int8_t>({N}, zps), Tensor::Scalar<uint8_t>(121));
  // int8 activations, uint8 per-tensor weights, int8 output.
  CheckQLinearMatMul<int8_t>(RandomInt<int8_t>({M, K}, 4, -128, 127), Tensor::Scalar<int8_t>(-7),
                             RandomInt<uint8_t>({K, N}, 5, 0, 255), Tensor::Scalar(0.004f), Tensor::Scalar<uint8_t>(140),
                             Tensor::Scalar<int8_t>(3));
}

// Shapes across the fused GEMM's block and k-step edges (64 x 64 tiles, k
// steps of 64): partial tiles in m, n and k, k not a multiple of 16, several
// blocks each way.
TEST(CudaKernelBodies, FusedGemmTilesMatchReferenceAcrossBlockEdges) {
  const int64_t shapes[][3] = {{1, 1, 1}, {64, 64, 64}, {65, 129, 130}, {130, 70, 17}, {7, 200, 192}};
  uint32_t seed = 50;
  for (const auto& s : shapes) {
    const int64_t M = s[0], N = s[1], K = s[2];
    SCOPED_TRACE("m " + std::to_string(M) + " n " + std::to_string(N) + " k " + std::to_string(K));
    CheckQLinearMatMul<uint8_t>(RandomInt<uint8_t>({M, K}, seed++, 0, 255), Tensor::Scalar<uint8_t>(129),
                                RandomInt<int8_t>({K, N}, seed++, -128, 127), Tensor::Scalar(0.003f),
                                Tensor::Scalar<int8_t>(0), Tensor::Scalar<uint8_t>(120));
  }
}

// The epilogue function the fused GEMM and the requantize kernel share
// (RequantizeAccValue: zero-point corrections, bias per row or column,
// multiplier per row, column or tensor, ReLU) against the CPU's requantize
// (RequantizeS32Ref) of the same corrected sums, over a sweep.
template <typename T>
void CheckEpilogueSweep(uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int32_t> acc_dist(-(1 << 22), 1 << 22), small(-300, 300);
  std::uniform_int_distribution<int32_t> wide(std::numeric_limits<int32_t>::min(), std::numeric_limits<int32_t>::max());
  std::uniform_real_distribution<float> mult_dist(1e-6f, 1e-2f);
  const int64_t rows = 9, cols = 37;
  for (int round = 0; round < 48; ++round) {
    std::vector<int32_t> raw(rows * cols), a_sum(rows), b_sum(cols), a_zp(rows), b_zp(cols), bias(std::max(rows, cols));
    for (auto& v : raw) v = (rng() % 61 == 0) ? wide(rng) : acc_dist(rng);
    for (auto& v : a_sum) v = small(rng) * 100;
    for (auto& v : b_sum) v = small(rng) * 100;
    for (auto& v : a_zp) v = small(rng) % 128;
    for (auto& v : b_zp) v = small(rng) % 128;
    for (auto& v : bias) v = (rng() % 13 == 0) ? wide(rng) : acc_dist(rng) / 8;
    std::vector<float> mult(std::max(rows, cols));
    for (size_t j = 0; j < mult.size(); ++j) mult[j] = (j % 3 == 0) ? 0.5f : mult_dist(rng);  // 0.5: ties
    RequantArgs r;
    r.rows = rows;
    r.cols = cols;
    r.k = 1 + static_cast<int32_t>(rng() % 5000);
    const int mode = round % 4;
    r.a_sum = (mode & 1) ? a_sum.data() : nullptr;
    r.b_sum = (mode & 2) ? b_sum.data() : nullptr;
    if (round % 3 == 0) r.a_zp = a_zp.data(); else r.a_zp_scalar = a_zp[0];
    if (round % 5 == 0) r.b_zp = b_zp.data(); else r.b_zp_scalar = b_zp[0];
    r.bias = (round % 7 == 6) ? nullptr : bias.data();
    r.bias_per_row = round % 2 == 0;
    r.multiplier = mult.data();
    r.multiplier_per_row = round % 3 == 1;
    r.multiplier_per_col = round % 3 == 2;
    r.y_zp = static_cast<int32_t>(rng() % 256) + QuantRange<T>::kMin;
    r.relu = round % 4 >= 2;
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < cols; ++j) {
        // The corrected sum in int64, wrapped to int32 as the reference's int32 sums wrap.
        const int64_t zr = r.a_zp ? r.a_zp[i] : r.a_zp_scalar, zc = r.b_zp ? r.b_zp[j] : r.b_zp_scalar;
        int64_t v = raw[i * cols + j] + static_cast<int64_t>(r.k) * zr * zc;
        if (r.a_sum) v -= zc * r.a_sum[i];
        if (r.b_sum) v -= zr * r.b_sum[j];
        const int32_t corrected = static_cast<int32_t>(static_cast<uint32_t>(static_cast<uint64_t>(v)));
        const int64_t bias_at = r.bias_per_row ? i : j;
        const int64_t mult_at = r.multiplier_per_row ? i : (r.multiplier_per_col ? j : 0);
        T want;
        RequantizeS32Ref<T>(1, &corrected, r.bias ? r.bias + bias_at : nullptr, 0, r.multiplier + mult_at, 0, r.y_zp,
                            r.relu, &want);
        ASSERT_EQ(cuda::RequantizeAccValue<T>(raw[i * cols + j], i, j, r), want)
            << "round " << round << " at (" << i << ", " << j << ")";
      }
  }
}

TEST(CudaKernelBodies, RequantizeEpilogueMatchesCpuRequantizeOverASweep) {
  CheckEpilogueSweep<int8_t>(60);
  CheckEpilogueSweep<uint8_t>(61);
}

// sparq.MatMulIntegerToFloat the way matmul_s8_f32_wmma computes it.
void CheckMatMulIntegerToFloat(bool with_bias, bool gelu) {
  const int64_t M = 13, K = 40, N = 24;
  const Tensor a = RandomInt<uint8_t>({M, K}, 21, 0, 255), b = RandomInt<int8_t>({K, N}, 22, -128, 127);
  const Tensor a_zp = Tensor::Scalar<uint8_t>(131), b_zp = RandomInt<int8_t>({N}, 23, -5, 5);
  const Tensor a_scale = Tensor::Scalar(0.013f), b_scale = RandomF32({N}, 24), bias = RandomF32({N}, 25);
  std::vector<Attribute> attrs;
  if (gelu) attrs.push_back(Attribute::String("activation", "GeluErfChain"));
  Node node = testing::OpNode("MatMulIntegerToFloat", attrs);
  node.domain = kSparqDomain;
  std::vector<Tensor> inputs = {a, b, a_zp, b_zp, a_scale, b_scale};
  if (with_bias) inputs.push_back(bias);
  auto want = testing::RunRefKernel(node, 1, inputs);
  ASSERT_TRUE(want.ok()) << want.status().ToString();
  bool a_shift = false, b_shift = false;
  const std::vector<int8_t> a8 = Signed(a, &a_shift), b8 = Signed(b, &b_shift);
  std::vector<int8_t> bt(static_cast<size_t>(N * K));
  for (int64_t k = 0; k < K; ++k)
    for (int64_t n = 0; n < N; ++n) bt[n * K + k] = b8[k * N + n];
  const std::vector<int32_t> acc = GemmS8(a8, bt, M, N, K), a_sum = RowSums(a8, M, K), b_sum = RowSums(bt, N, K);
  const std::vector<int32_t> za = ZeroPoints(a_zp, a_shift), zb = ZeroPoints(b_zp, b_shift);
  RequantArgs r;
  r.acc = acc.data();
  r.rows = M;
  r.cols = N;
  r.k = static_cast<int32_t>(K);
  r.a_sum = a_sum.data();
  r.b_sum = b_sum.data();
  r.a_zp_scalar = za[0];
  r.b_zp = zb.data();
  std::vector<float> scale(N);
  for (int64_t n = 0; n < N; ++n) scale[n] = a_scale.data<float>()[0] * b_scale.data<float>()[n];
  cuda::FloatEpilogue e;
  e.scale = scale.data();
  e.scale_per_col = true;
  e.bias = with_bias ? bias.data<float>() : nullptr;
  e.gelu = gelu;
  std::vector<float> got(static_cast<size_t>(M * N));
  for (int64_t i = 0; i < M * N; ++i) got[static_cast<size_t>(i)] = cuda::AccToFloatElement(i, r, e);
  ExpectBytesEqual((*want)[0], got);
  r.acc = nullptr;
  ExpectBytesEqual((*want)[0], FusedGemmOnHost<float>(a8, bt, M, N, K, [&](int32_t raw, int64_t row, int64_t col) {
                     return cuda::AccToFloatValue(raw, row, col, r, e);
                   }));
}

TEST(CudaKernelBodies, MatMulIntegerToFloatPipelineMatchesReferenceBitForBit) {
  CheckMatMulIntegerToFloat(false, false);
  CheckMatMulIntegerToFloat(true, false);
  CheckMatMulIntegerToFloat(true, true);
}

TEST(CudaKernelBodies, QLinearConvPipelineMatchesReferenceBitForBit) {
  const Tensor x = RandomInt<uint8_t>({2, 3, 11, 9}, 6, 0, 255), w = RandomInt<uint8_t>({5, 3, 3, 3}, 7, 0, 255);
  const Tensor bias = RandomInt<int32_t>({5}, 8, -2000, 2000);
  const std::vector<float> w_scale = {0.003f, 0.002f, 0.004f, 0.001f, 0.0025f};
  const std::vector<uint8_t> w_zp = {128, 120, 130, 127, 140};
  const float x_scale = 0.05f, y_scale = 0.4f;
  const std::vector<Attribute> attrs = {Attribute::Ints("pads", {1, 2, 1, 0}), Attribute::Ints("strides", {2, 1})};
  const std::vector<Tensor> inputs = {x, Tensor::Scalar(x_scale), Tensor::Scalar<uint8_t>(118), w,
                                      Tensor::FromVector<float>({5}, w_scale), Tensor::FromVector<uint8_t>({5}, w_zp),
                                      Tensor::Scalar(y_scale), Tensor::Scalar<uint8_t>(125), bias};
  auto want = testing::RunRefKernel(testing::OpNode("QLinearConv", attrs), 10, inputs);
  ASSERT_TRUE(want.ok()) << want.status().ToString();

  Node node = testing::OpNode("QLinearConv", attrs);
  OpContext ctx(node, 10, {}, static_cast<ThreadPool*>(nullptr));
  Shape y_shape;
  auto geometry = cuda::Conv2dGeometryOf(ctx, x.shape(), w.shape(), &y_shape);
  ASSERT_TRUE(geometry.ok()) << geometry.status().ToString();
  const Conv2dGeometry g = *geometry;
  ASSERT_EQ(y_shape, (*want)[0].shape());
  bool x_shift = false, w_shift = false;
  const std::vector<int8_t> x8 = Signed(x, &x_shift), w8 = Signed(w, &w_shift);
  const std::vector<int32_t> zx = ZeroPoints(inputs[2], x_shift), zw = ZeroPoints(inputs[5], w_shift);
  const int64_t M = g.out_channels, K = g.patch(), P = g.pixels();
  std::vector<float> mult(w_scale.size());
  for (size_t j = 0; j < mult.size(); ++j) mult[j] = RequantMultiplier(x_scale, w_scale[j], y_scale);
  const std::vector<int32_t> w_sum = RowSums(w8, M, K);
  std::vector<uint8_t> got, fused;
  for (int64_t n = 0; n < g.batch; ++n) {
    std::vector<int8_t> col(static_cast<size_t>(P * K));
    for (int64_t i = 0; i < P * K; ++i) {
      col[static_cast<size_t>(i)] = cuda::Im2ColValue<int8_t>(i, x8.data() + n * g.channels * g.height * g.width,
                                                              static_cast<int8_t>(zx[0]), g);
    }
    const std::vector<int32_t> acc = GemmS8(w8, col, M, P, K), col_sum = RowSums(col, P, K);
    RequantArgs r;
    r.acc = acc.data();
    r.rows = M;
    r.cols = P;
    r.k = static_cast<int32_t>(K);
    r.a_sum = w_sum.data();
    r.b_sum = col_sum.data();
    r.a_zp = zw.data();
    r.b_zp_scalar = zx[0];
    r.bias = bias.data<int32_t>();
    r.bias_per_row = true;
    r.multiplier = mult.data();
    r.multiplier_per_row = true;
    r.y_zp = 125;
    for (int64_t i = 0; i < M * P; ++i) got.push_back(cuda::RequantizeElement<uint8_t>(i, r));
    r.acc = nullptr;
    const std::vector<uint8_t> image = FusedGemmOnHost<uint8_t>(
        w8, col, M, P, K, [&](int32_t raw, int64_t row, int64_t c) { return cuda::RequantizeAccValue<uint8_t>(raw, row, c, r); });
    fused.insert(fused.end(), image.begin(), image.end());
  }
  ExpectBytesEqual((*want)[0], got);
  ExpectBytesEqual((*want)[0], fused);
}

TEST(CudaKernelBodies, DepthwiseQLinearConvMatchesReferenceBitForBit) {
  const Tensor x = RandomInt<uint8_t>({2, 5, 9, 7}, 30, 0, 255), w = RandomInt<int8_t>({5, 1, 3, 3}, 31, -127, 127);
  const Tensor bias = RandomInt<int32_t>({5}, 32, -3000, 3000);
  const std::vector<float> w_scale = {0.01f, 0.02f, 0.005f, 0.03f, 0.012f};
  const std::vector<int8_t> w_zp = {0, 0, 0, 0, 0};
  const std::vector<Attribute> attrs = {Attribute::Int("group", 5), Attribute::Ints("pads", {1, 1, 1, 1}),
                                        Attribute::Ints("strides", {2, 1})};
  const std::vector<Tensor> inputs = {x, Tensor::Scalar(0.04f), Tensor::Scalar<uint8_t>(117), w,
                                      Tensor::FromVector<float>({5}, w_scale), Tensor::FromVector<int8_t>({5}, w_zp),
                                      Tensor::Scalar(0.25f), Tensor::Scalar<uint8_t>(130), bias};
  auto want = testing::RunRefKernel(testing::OpNode("QLinearConv", attrs), 10, inputs);
  ASSERT_TRUE(want.ok()) << want.status().ToString();
  Node node = testing::OpNode("QLinearConv", attrs);
  OpContext ctx(node, 10, {}, static_cast<ThreadPool*>(nullptr));
  Shape y_shape;
  auto geometry = cuda::Conv2dGeometryOf(ctx, x.shape(), w.shape(), &y_shape);
  ASSERT_TRUE(geometry.ok()) << geometry.status().ToString();
  Conv2dGeometry g = *geometry;
  g.channels = x.dim(1);
  ASSERT_EQ(y_shape, (*want)[0].shape());
  std::vector<float> mult(5);
  for (size_t c = 0; c < 5; ++c) mult[c] = RequantMultiplier(0.04f, w_scale[c], 0.25f);
  cuda::DepthwiseS8Args a;
  a.x = x.raw_data();
  a.w = w.raw_data();
  a.x_zp = 117;
  a.bias = bias.data<int32_t>();
  a.multiplier = mult.data();
  a.multiplier_per_channel = true;
  a.y_zp = 130;
  std::vector<uint8_t> got(static_cast<size_t>((*want)[0].numel()));
  for (size_t i = 0; i < got.size(); ++i) got[i] = cuda::DepthwiseS8Element(static_cast<int64_t>(i), a, g);
  ExpectBytesEqual((*want)[0], got);
}

TEST(CudaKernelBodies, CastMatchesReference) {
  const std::vector<float> f = {0.0f, -0.0f, 1.5f, -1.5f, 2.7e9f, -3e10f, 1e20f, 255.9f, -129.5f,
                                std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity()};
  const std::vector<int64_t> i64 = {0, -1, 300, -300, INT64_MAX, INT64_MIN, 1LL << 40, 255, 128};
  const struct {
    DataType type;
    int code;
    int64_t onnx;
  } types[] = {{DataType::kFloat32, cuda::kCastF32, 1}, {DataType::kInt32, cuda::kCastI32, 6},
               {DataType::kInt64, cuda::kCastI64, 7},   {DataType::kInt8, cuda::kCastI8, 3},
               {DataType::kUInt8, cuda::kCastU8, 2},    {DataType::kBool, cuda::kCastBool, 9}};
  const Tensor sources[] = {Tensor::FromVector<float>({static_cast<int64_t>(f.size())}, f),
                            Tensor::FromVector<int64_t>({static_cast<int64_t>(i64.size())}, i64),
                            Tensor::FromVector<int64_t>({static_cast<int64_t>(i64.size())}, i64).CastTo(DataType::kInt32),
                            Tensor::FromVector<int64_t>({static_cast<int64_t>(i64.size())}, i64).CastTo(DataType::kUInt8),
                            Tensor::FromVector<int64_t>({static_cast<int64_t>(i64.size())}, i64).CastTo(DataType::kBool)};
  for (const Tensor& x : sources) {
    int from = -1;
    for (const auto& t : types)
      if (t.type == x.dtype()) from = t.code;
    ASSERT_GE(from, 0);
    for (const auto& t : types) {
      auto want = testing::RunRefKernel(testing::OpNode("Cast", {Attribute::Int("to", t.onnx)}), 13, {x});
      ASSERT_TRUE(want.ok()) << want.status().ToString();
      const Tensor& w = (*want)[0];
      std::vector<uint8_t> got(w.nbytes());
      for (int64_t i = 0; i < x.numel(); ++i) cuda::CastElement(i, x.raw_data(), from, got.data(), t.code);
      if (t.type == DataType::kFloat32) {  // NaN bits may differ in sign; compare as values
        for (int64_t i = 0; i < x.numel(); ++i) {
          float a, b;
          std::memcpy(&a, got.data() + 4 * i, 4);
          std::memcpy(&b, static_cast<const uint8_t*>(w.raw_data()) + 4 * i, 4);
          ASSERT_TRUE((std::isnan(a) && std::isnan(b)) || a == b) << DataTypeName(x.dtype()) << " -> float32 at " << i;
        }
      } else {
        ASSERT_EQ(std::memcmp(got.data(), w.raw_data(), w.nbytes()), 0)
            << DataTypeName(x.dtype()) << " -> " << DataTypeName(t.type);
      }
    }
  }
}

TEST(CudaKernelBodies, SlicePlanMatchesReference) {
  const Tensor x = RandomF32({4, 5, 6}, 40);
  const struct {
    std::vector<int64_t> starts, ends, axes, steps;
  } cases[] = {{{1}, {3}, {}, {}},
               {{-1, 0}, {-100, 6}, {2, 1}, {-2, 2}},
               {{0, 10, 2}, {4, -10, 5}, {0, 1, 2}, {3, -1, 1}},
               {{3}, {3}, {1}, {}},
               {{5}, {0}, {-1}, {-1}}};
  for (const auto& c : cases) {
    std::vector<Tensor> inputs = {x, Tensor::FromVector<int64_t>({static_cast<int64_t>(c.starts.size())}, c.starts),
                                  Tensor::FromVector<int64_t>({static_cast<int64_t>(c.ends.size())}, c.ends)};
    if (!c.axes.empty() || !c.steps.empty()) {
      std::vector<int64_t> axes = c.axes;
      if (axes.empty()) for (size_t i = 0; i < c.starts.size(); ++i) axes.push_back(static_cast<int64_t>(i));
      inputs.push_back(Tensor::FromVector<int64_t>({static_cast<int64_t>(axes.size())}, axes));
    }
    if (!c.steps.empty()) inputs.push_back(Tensor::FromVector<int64_t>({static_cast<int64_t>(c.steps.size())}, c.steps));
    auto want = testing::RunRefKernel(testing::OpNode("Slice"), 13, inputs);
    ASSERT_TRUE(want.ok()) << want.status().ToString();
    Node node = testing::OpNode("Slice");
    OpContext ctx(node, 13, {}, static_cast<ThreadPool*>(nullptr));
    Shape out;
    auto plan = cuda::PlanSlice(ctx, x.shape(), c.starts, c.ends, c.axes, c.steps, &out);
    ASSERT_TRUE(plan.ok()) << plan.status().ToString();
    ASSERT_EQ(out, (*want)[0].shape());
    std::vector<float> got(static_cast<size_t>(plan->numel));
    for (int64_t i = 0; i < plan->numel; ++i) {
      got[static_cast<size_t>(i)] =
          x.data<float>()[plan->base + cuda::BroadcastOffset(i, plan->rank, plan->out_dims, plan->in_strides)];
    }
    ExpectBytesEqual((*want)[0], got);
  }
}

TEST(CudaKernelBodies, ResizeNearestMatchesReference) {
  const Tensor x = RandomInt<uint8_t>({2, 3, 4, 5}, 41, 0, 255);
  const std::vector<Attribute> attrs = {Attribute::String("mode", "nearest"),
                                        Attribute::String("coordinate_transformation_mode", "asymmetric"),
                                        Attribute::String("nearest_mode", "floor")};
  auto want = testing::RunRefKernel(testing::OpNode("Resize", attrs), 13,
                                    {x, Tensor(), Tensor::FromVector<float>({4}, {1.0f, 1.0f, 2.0f, 3.0f})});
  ASSERT_TRUE(want.ok()) << want.status().ToString();
  ASSERT_EQ((*want)[0].shape(), (Shape{2, 3, 8, 15}));
  std::vector<uint8_t> got(static_cast<size_t>((*want)[0].numel()));
  for (size_t i = 0; i < got.size(); ++i) got[i] = x.data<uint8_t>()[cuda::ResizeNearestSource(static_cast<int64_t>(i), 4, 5, 2, 3)];
  ExpectBytesEqual((*want)[0], got);
}

template <bool kMax>
void CheckPool(const std::vector<Attribute>& attrs) {
  const Tensor x = RandomF32({2, 3, 13, 10}, 9);
  const char* op = kMax ? "MaxPool" : "AveragePool";
  auto want = testing::RunRefKernel(testing::OpNode(op, attrs), 19, {x});
  ASSERT_TRUE(want.ok()) << want.status().ToString();
  Node node = testing::OpNode(op, attrs);
  OpContext ctx(node, 19, {}, static_cast<ThreadPool*>(nullptr));
  Shape y_shape;
  auto g = cuda::Pool2dGeometryOf(ctx, x.shape(), &y_shape);
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  ASSERT_EQ(y_shape, (*want)[0].shape());
  std::vector<float> got(static_cast<size_t>((*want)[0].numel()));
  for (size_t i = 0; i < got.size(); ++i) got[i] = cuda::Pool2dValue<kMax>(static_cast<int64_t>(i), x.data<float>(), *g);
  ExpectBytesEqual((*want)[0], got);
}

TEST(CudaKernelBodies, IntegerMaxPoolMatchesReference) {
  const Tensor x = RandomInt<int8_t>({2, 3, 9, 8}, 33, -128, 127);
  const std::vector<Attribute> attrs = {Attribute::Ints("kernel_shape", {3, 3}), Attribute::Ints("strides", {2, 2}),
                                        Attribute::Ints("pads", {1, 1, 1, 1})};
  auto want = testing::RunRefKernel(testing::OpNode("MaxPool", attrs), 12, {x});
  ASSERT_TRUE(want.ok()) << want.status().ToString();
  Node node = testing::OpNode("MaxPool", attrs);
  OpContext ctx(node, 12, {}, static_cast<ThreadPool*>(nullptr));
  Shape y_shape;
  auto g = cuda::Pool2dGeometryOf(ctx, x.shape(), &y_shape);
  ASSERT_TRUE(g.ok());
  std::vector<int8_t> got(static_cast<size_t>((*want)[0].numel()));
  for (size_t i = 0; i < got.size(); ++i) got[i] = cuda::MaxPool2dIntValue<int8_t>(static_cast<int64_t>(i), x.data<int8_t>(), *g);
  ExpectBytesEqual((*want)[0], got);
}

TEST(CudaKernelBodies, PoolingMatchesReferenceBitForBit) {
  CheckPool<true>({Attribute::Ints("kernel_shape", {3, 3}), Attribute::Ints("strides", {2, 2}),
                   Attribute::Ints("pads", {1, 1, 1, 1})});
  CheckPool<true>({Attribute::Ints("kernel_shape", {2, 3}), Attribute::Ints("dilations", {2, 1}),
                   Attribute::Int("ceil_mode", 1), Attribute::Ints("strides", {2, 2})});
  CheckPool<false>({Attribute::Ints("kernel_shape", {3, 2}), Attribute::Ints("pads", {1, 0, 1, 1}),
                    Attribute::Int("count_include_pad", 1), Attribute::Int("ceil_mode", 1),
                    Attribute::Ints("strides", {2, 2})});
  CheckPool<false>({Attribute::Ints("kernel_shape", {3, 3}), Attribute::String("auto_pad", "SAME_UPPER")});
}

TEST(CudaKernelBodies, DepthwiseConvMatchesReference) {
  const Tensor x = RandomF32({2, 4, 12, 9}, 10), w = RandomF32({4, 1, 3, 3}, 11), b = RandomF32({4}, 12);
  const std::vector<Attribute> attrs = {Attribute::Int("group", 4), Attribute::Ints("pads", {2, 1, 2, 1}),
                                        Attribute::Ints("dilations", {2, 1}), Attribute::Ints("strides", {1, 2})};
  auto want = testing::RunRefKernel(testing::OpNode("Conv", attrs), 11, {x, w, b});
  ASSERT_TRUE(want.ok()) << want.status().ToString();
  Node node = testing::OpNode("Conv", attrs);
  OpContext ctx(node, 11, {}, static_cast<ThreadPool*>(nullptr));
  Shape y_shape;
  auto geometry = cuda::Conv2dGeometryOf(ctx, x.shape(), w.shape(), &y_shape);
  ASSERT_TRUE(geometry.ok()) << geometry.status().ToString();
  Conv2dGeometry g = *geometry;
  g.channels = x.dim(1);  // as conv_dw_f32_cuda: one channel per group
  const Tensor& y = (*want)[0];
  ASSERT_EQ(y_shape, y.shape());
  for (int64_t i = 0; i < y.numel(); ++i) {
    const float got = cuda::DepthwiseConvValue(i, x.data<float>(), w.data<float>(), b.data<float>(), g);
    ASSERT_NEAR(got, y.data<float>()[i], kDepthwiseTolerance * std::max(1.0f, std::fabs(y.data<float>()[i]))) << i;
  }
}

TEST(CudaKernelBodies, QLinearAddAndMulMatchReferenceBitForBit) {
  const Tensor a = RandomInt<uint8_t>({2, 3, 8}, 13, 0, 255), b = RandomInt<int8_t>({3, 1}, 14, -128, 127);
  std::vector<uint8_t> table(256);
  for (int i = 0; i < 256; ++i) table[i] = static_cast<uint8_t>((i * 37 + 11) & 0xff);
  for (bool mul : {false, true}) {
    for (bool with_table : {false, true}) {
      std::vector<Tensor> inputs = {a, Tensor::Scalar(0.031f), Tensor::Scalar<uint8_t>(129), b, Tensor::Scalar(0.017f),
                                    Tensor::Scalar<int8_t>(-4), Tensor::Scalar(mul ? 0.011f : 0.05f),
                                    Tensor::Scalar<int8_t>(2)};
      if (with_table) inputs.push_back(Tensor::FromVector<uint8_t>({256}, table));
      Node node = testing::OpNode(mul ? "QLinearMul" : "QLinearAdd");
      node.domain = kSparqDomain;
      auto want = testing::RunRefKernel(node, 1, inputs);
      ASSERT_TRUE(want.ok()) << want.status().ToString();
      cuda::BroadcastPlan plan;
      int64_t dims[cuda::kMaxRank];
      int rank = 0;
      ASSERT_TRUE(cuda::PlanBroadcast(a.shape().data(), 3, b.shape().data(), 2, &plan, dims, &rank).ok());
      ASSERT_EQ(Shape(dims, dims + rank), (Shape{2, 3, 8}));
      cuda::QLinearBinaryArgs q;
      q.mul = mul;
      q.a_signed = false;
      q.b_signed = true;
      q.y_signed = true;
      q.a_scale = 0.031f;
      q.a_zp = 129;
      q.b_scale = 0.017f;
      q.b_zp = -4;
      q.y_scale = mul ? 0.011f : 0.05f;
      q.y_zp = 2;
      q.has_table = with_table;
      for (int i = 0; i < 256; ++i) q.table[i] = table[i];
      std::vector<uint8_t> got(48);
      for (int64_t i = 0; i < 48; ++i) got[i] = cuda::QLinearBinaryElement(i, a.raw_data(), b.raw_data(), plan, q);
      const Tensor& y = (*want)[0];
      ASSERT_EQ(y.numel(), 48);
      const uint8_t* wp = static_cast<const uint8_t*>(y.raw_data());
      for (int64_t i = 0; i < 48; ++i) ASSERT_EQ(wp[i], got[i]) << "mul " << mul << " table " << with_table << " at " << i;
    }
  }
}

}  // namespace
}  // namespace sparq
