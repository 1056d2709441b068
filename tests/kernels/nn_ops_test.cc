// Tests of the reference NN math (kernels/ref/gemm.h, conv.h, pool.h) against
// naive loops, determinism across thread counts, and the NN kernels' edge
// cases and error messages (Gemm, MatMul, Conv, ConvTranspose, pooling).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/op_context.h"
#include "kernels/parallel.h"
#include "kernels/ref/conv.h"
#include "kernels/ref/gemm.h"
#include "kernels/ref/pool.h"
#include "kernels/registry.h"
#include "sparq/graph.h"
#include "sparq/tensor.h"
#include "test_util.h"
#include "kernels/op_test_util.h"

namespace sparq {
namespace {

using testing::OpNode;
using testing::RunRefKernel;

// Relative tolerance of float32 results against double-precision loops.
constexpr double kF32Tol = 1e-5;
constexpr double kF64Tol = 1e-12;

template <typename T>
std::vector<T> RandomVector(size_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<double> dist(-1.0, 1.0);
  std::vector<T> v(n);
  for (auto& x : v) x = static_cast<T>(dist(gen));
  return v;
}

// |got - want| <= tol * (1 + |want|) elementwise, with the first failure reported.
template <typename T>
void ExpectNear(const std::vector<T>& got, const std::vector<double>& want, double tol, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_LE(std::fabs(static_cast<double>(got[i]) - want[i]), tol * (1.0 + std::fabs(want[i])))
        << what << ": element " << i << " is " << got[i] << ", expected " << want[i];
  }
}

template <typename T>
bool BitwiseEqual(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

// ---------------------------------------------------------------------------
// GEMM

// C = alpha * op(A) op(B) + beta * C in double, straight triple loop.
template <typename T>
std::vector<double> NaiveGemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, double alpha, const std::vector<T>& A,
                              int64_t lda, const std::vector<T>& B, int64_t ldb, double beta, const std::vector<T>& C,
                              int64_t ldc) {
  std::vector<double> out(C.begin(), C.end());
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      double acc = 0;
      for (int64_t k = 0; k < K; ++k)
        acc += static_cast<double>(ta ? A[k * lda + i] : A[i * lda + k]) *
               static_cast<double>(tb ? B[j * ldb + k] : B[k * ldb + j]);
      out[i * ldc + j] = alpha * acc + (beta == 0 ? 0.0 : beta * static_cast<double>(C[i * ldc + j]));
    }
  return out;
}

template <typename T>
void CheckGemmAgainstNaive(int64_t M, int64_t N, int64_t K, double tol) {
  for (int ta = 0; ta < 2; ++ta)
    for (int tb = 0; tb < 2; ++tb) {
      // Leading dimensions larger than the matrix, to catch stride mix-ups.
      const int64_t lda = (ta ? M : K) + 3, ldb = (tb ? K : N) + 2, ldc = N + 5;
      auto A = RandomVector<T>(static_cast<size_t>((ta ? K : M) * lda), 1);
      auto B = RandomVector<T>(static_cast<size_t>((tb ? N : K) * ldb), 2);
      auto C = RandomVector<T>(static_cast<size_t>(M * ldc), 3);
      for (double beta : {0.0, 0.75}) {
        auto want = NaiveGemm<T>(ta, tb, M, N, K, 1.5, A, lda, B, ldb, beta, C, ldc);
        auto got = C;
        GemmRef(ta, tb, M, N, K, T(1.5), A.data(), lda, B.data(), ldb, T(beta), got.data(), ldc, nullptr);
        // Padding columns of C (j >= N) must stay untouched.
        for (int64_t i = 0; i < M; ++i)
          for (int64_t j = N; j < ldc; ++j) want[i * ldc + j] = static_cast<double>(C[i * ldc + j]);
        ExpectNear(got, want, tol,
                   "M=" + std::to_string(M) + " N=" + std::to_string(N) + " K=" + std::to_string(K) +
                       " transA=" + std::to_string(ta) + " transB=" + std::to_string(tb) +
                       " beta=" + std::to_string(beta));
      }
    }
}

TEST(NnGemmRef, F32MatchesNaiveOnOddShapes) {
  CheckGemmAgainstNaive<float>(7, 13, 29, kF32Tol);
  CheckGemmAgainstNaive<float>(1, 1, 1, kF32Tol);
  CheckGemmAgainstNaive<float>(5, 1, 3, kF32Tol);
}

TEST(NnGemmRef, F32MatchesNaiveAcrossTileAndSliceBoundaries) {
  // Larger than one 64 x 256 tile and one 256-deep K slice in every direction.
  CheckGemmAgainstNaive<float>(67, 261, 517, 1e-4);
}

TEST(NnGemmRef, F64MatchesNaive) {
  CheckGemmAgainstNaive<double>(7, 13, 29, kF64Tol);
  CheckGemmAgainstNaive<double>(66, 259, 300, kF64Tol);
}

TEST(NnGemmRef, BetaZeroIgnoresNaNInC) {
  std::vector<float> A{1, 2}, B{3, 4}, C{NAN};
  GemmF32Ref(false, false, 1, 1, 2, 1.0f, A.data(), 2, B.data(), 1, 0.0f, C.data(), 1, nullptr);
  EXPECT_EQ(C[0], 11.0f);
}

TEST(NnGemmRef, EmptyKScalesC) {
  std::vector<float> C{2, 4};
  GemmF32Ref(false, false, 1, 2, 0, 1.0f, nullptr, 0, nullptr, 2, 0.5f, C.data(), 2, nullptr);
  EXPECT_EQ(C, (std::vector<float>{1, 2}));
}

TEST(NnGemmRef, BitwiseIdenticalForOneAndFourThreads) {
  const int64_t M = 150, N = 530, K = 700;
  auto A = RandomVector<float>(M * K, 4), B = RandomVector<float>(K * N, 5);
  std::vector<float> c1(M * N), c4(M * N);
  ThreadPool one(1), four(4);
  GemmF32Ref(false, true, M, N, K, 1.0f, A.data(), K, B.data(), K, 0.0f, c1.data(), N, &one);
  GemmF32Ref(false, true, M, N, K, 1.0f, A.data(), K, B.data(), K, 0.0f, c4.data(), N, &four);
  EXPECT_TRUE(BitwiseEqual(c1, c4));
}

// ---------------------------------------------------------------------------
// Conv / ConvTranspose math

int64_t Prod(const Shape& s, size_t from) {
  int64_t p = 1;
  for (size_t i = from; i < s.size(); ++i) p *= s[i];
  return p;
}

// Multi-index of flat position `flat` in row-major `dims`.
std::vector<int64_t> Unravel(int64_t flat, const std::vector<int64_t>& dims) {
  std::vector<int64_t> idx(dims.size());
  for (size_t d = dims.size(); d-- > 0;) {
    idx[d] = flat % dims[d];
    flat /= dims[d];
  }
  return idx;
}

// Direct convolution in double: for every output, every channel of its group,
// every tap.
template <typename T>
std::vector<double> NaiveConv(const ConvParams& p, const Shape& xs, const std::vector<T>& x, const Shape& ws,
                              const std::vector<T>& w, const std::vector<T>* bias, const Shape& ys) {
  const size_t R = xs.size() - 2;
  const int64_t G = p.group, Cg = ws[1], Mg = ws[0] / G;
  const std::vector<int64_t> in(xs.begin() + 2, xs.end()), out(ys.begin() + 2, ys.end());
  const int64_t in_size = Prod(xs, 2), out_size = Prod(ys, 2), taps = Prod(ws, 2);
  std::vector<double> y(static_cast<size_t>(NumElements(ys)));
  for (int64_t n = 0; n < ys[0]; ++n)
    for (int64_t m = 0; m < ys[1]; ++m)
      for (int64_t o = 0; o < out_size; ++o) {
        const auto oi = Unravel(o, out);
        double acc = bias != nullptr ? static_cast<double>((*bias)[m]) : 0.0;
        for (int64_t c = 0; c < Cg; ++c)
          for (int64_t t = 0; t < taps; ++t) {
            const auto ti = Unravel(t, p.window.kernel);
            int64_t off = 0;
            bool inside = true;
            for (size_t d = 0; d < R; ++d) {
              const int64_t pos = oi[d] * p.window.strides[d] - p.window.pads[d] + ti[d] * p.window.dilations[d];
              inside = inside && pos >= 0 && pos < in[d];
              off = off * in[d] + pos;
            }
            if (!inside) continue;
            const int64_t xc = (m / Mg) * Cg + c;
            acc += static_cast<double>(x[(n * xs[1] + xc) * in_size + off]) *
                   static_cast<double>(w[(m * Cg + c) * taps + t]);
          }
        y[(n * ys[1] + m) * out_size + o] = acc;
      }
  return y;
}

// Direct transposed convolution in double: scatter every input through every tap.
template <typename T>
std::vector<double> NaiveConvTranspose(const ConvParams& p, const Shape& xs, const std::vector<T>& x, const Shape& ws,
                                       const std::vector<T>& w, const std::vector<T>* bias, const Shape& ys) {
  const size_t R = xs.size() - 2;
  const int64_t G = p.group, Cg = xs[1] / G, Mg = ws[1];
  const std::vector<int64_t> in(xs.begin() + 2, xs.end()), out(ys.begin() + 2, ys.end());
  const int64_t in_size = Prod(xs, 2), out_size = Prod(ys, 2), taps = Prod(ws, 2);
  std::vector<double> y(static_cast<size_t>(NumElements(ys)));
  for (int64_t n = 0; n < ys[0]; ++n)
    for (int64_t m = 0; m < ys[1]; ++m)
      for (int64_t o = 0; o < out_size; ++o)
        y[(n * ys[1] + m) * out_size + o] = bias != nullptr ? static_cast<double>((*bias)[m]) : 0.0;
  for (int64_t n = 0; n < xs[0]; ++n)
    for (int64_t c = 0; c < xs[1]; ++c)
      for (int64_t i = 0; i < in_size; ++i) {
        const auto ii = Unravel(i, in);
        const int64_t g = c / Cg;
        for (int64_t m = 0; m < Mg; ++m)
          for (int64_t t = 0; t < taps; ++t) {
            const auto ti = Unravel(t, p.window.kernel);
            int64_t off = 0;
            bool inside = true;
            for (size_t d = 0; d < R; ++d) {
              const int64_t pos = ii[d] * p.window.strides[d] - p.window.pads[d] + ti[d] * p.window.dilations[d];
              inside = inside && pos >= 0 && pos < out[d];
              off = off * out[d] + pos;
            }
            if (!inside) continue;
            y[(n * ys[1] + g * Mg + m) * out_size + off] +=
                static_cast<double>(x[(n * xs[1] + c) * in_size + i]) * static_cast<double>(w[(c * Mg + m) * taps + t]);
          }
      }
  return y;
}

struct ConvCase {
  std::string name;
  Shape x, w;
  int64_t group;
  std::vector<int64_t> strides, dilations, pads;
  AutoPad auto_pad = AutoPad::kNotSet;
};

std::vector<ConvCase> ConvCases() {
  return {
      {"2d_groups_dilation_stride_asym_pads", {2, 4, 9, 11}, {6, 2, 3, 2}, 2, {2, 1}, {2, 3}, {1, 0, 2, 1}},
      {"1d_stride3", {1, 3, 17}, {4, 3, 5}, 1, {3}, {1}, {2, 1}},
      {"3d", {1, 2, 5, 6, 7}, {3, 2, 2, 3, 2}, 1, {1, 2, 2}, {1, 1, 2}, {1, 0, 1, 0, 1, 1}},
      {"depthwise_padded", {1, 8, 10, 10}, {8, 1, 3, 3}, 8, {1, 1}, {1, 1}, {1, 1, 1, 1}},
      {"depthwise_multiplier", {2, 3, 7, 6}, {6, 1, 3, 3}, 3, {2, 2}, {1, 1}, {0, 1, 1, 0}},
      {"pointwise", {2, 16, 7, 7}, {8, 16, 1, 1}, 1, {1, 1}, {1, 1}, {0, 0, 0, 0}},
      {"same_lower", {1, 3, 8, 7}, {5, 3, 4, 3}, 1, {2, 3}, {1, 1}, {}, AutoPad::kSameLower},
      {"same_upper", {1, 3, 8, 7}, {5, 3, 4, 3}, 1, {2, 3}, {1, 1}, {}, AutoPad::kSameUpper},
  };
}

TEST(NnConvRef, MatchesDirectConvolution) {
  for (const ConvCase& c : ConvCases()) {
    SCOPED_TRACE(c.name);
    ConvParams p;
    p.group = c.group;
    p.window.strides = c.strides;
    p.window.dilations = c.dilations;
    p.window.pads = c.pads;
    Shape ys;
    ASSERT_TRUE(PrepareConv(c.x, c.w, c.auto_pad, &p, &ys).ok());
    auto x = RandomVector<float>(NumElements(c.x), 10);
    auto w = RandomVector<float>(NumElements(c.w), 11);
    auto bias = RandomVector<float>(c.w[0], 12);
    std::vector<float> y(NumElements(ys));
    ConvF32Ref(p, c.x, x.data(), c.w, w.data(), bias.data(), ys, y.data(), nullptr);
    ExpectNear(y, NaiveConv(p, c.x, x, c.w, w, &bias, ys), kF32Tol, c.name);

    auto xd = RandomVector<double>(NumElements(c.x), 13);
    auto wd = RandomVector<double>(NumElements(c.w), 14);
    std::vector<double> yd(NumElements(ys));
    ConvF64Ref(p, c.x, xd.data(), c.w, wd.data(), nullptr, ys, yd.data(), nullptr);
    ExpectNear(yd, NaiveConv<double>(p, c.x, xd, c.w, wd, nullptr, ys), kF64Tol, c.name + " f64");
  }
}

TEST(NnConvRef, SameUpperPutsOddPaddingAtTheEnd) {
  ConvParams p;
  p.window.strides = {1};
  Shape ys;
  ASSERT_TRUE(PrepareConv({1, 1, 5}, {1, 1, 4}, AutoPad::kSameUpper, &p, &ys).ok());
  EXPECT_EQ(ys, (Shape{1, 1, 5}));
  EXPECT_EQ(p.window.pads, (std::vector<int64_t>{1, 2}));
  ConvParams q;
  ASSERT_TRUE(PrepareConv({1, 1, 5}, {1, 1, 4}, AutoPad::kSameLower, &q, &ys).ok());
  EXPECT_EQ(q.window.pads, (std::vector<int64_t>{2, 1}));
}

TEST(NnConvRef, TransposeMatchesDirectScatter) {
  struct Case {
    std::string name;
    Shape x, w;
    int64_t group;
    std::vector<int64_t> strides, dilations, pads, output_padding;
  };
  const std::vector<Case> cases = {
      {"2d_groups_stride_dilation", {2, 4, 5, 4}, {4, 3, 3, 2}, 2, {2, 3}, {1, 2}, {1, 0, 0, 1}, {1, 0}},
      {"1d", {1, 3, 6}, {3, 2, 4}, 1, {2}, {1}, {0, 0}, {}},
      {"3d", {1, 2, 3, 4, 3}, {2, 2, 2, 2, 3}, 1, {1, 2, 1}, {1, 1, 1}, {0, 1, 0, 1, 0, 1}, {}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    ConvParams p;
    p.group = c.group;
    p.window.strides = c.strides;
    p.window.dilations = c.dilations;
    p.window.pads = c.pads;
    Shape ys;
    ASSERT_TRUE(PrepareConvTranspose(c.x, c.w, AutoPad::kNotSet, c.output_padding, {}, &p, &ys).ok());
    auto x = RandomVector<float>(NumElements(c.x), 20);
    auto w = RandomVector<float>(NumElements(c.w), 21);
    auto bias = RandomVector<float>(ys[1], 22);
    std::vector<float> y(NumElements(ys));
    ConvTransposeF32Ref(p, c.x, x.data(), c.w, w.data(), bias.data(), ys, y.data(), nullptr);
    ExpectNear(y, NaiveConvTranspose(p, c.x, x, c.w, w, &bias, ys), kF32Tol, c.name);
  }
}

TEST(NnConvRef, BitwiseIdenticalForOneAndFourThreads) {
  ThreadPool four(4);
  // Few (batch, group) items: the GEMM and im2col parallelize inside; many
  // items (batch 8, depthwise): the items are spread over the threads.
  const std::vector<ConvCase> cases = {
      {"dense", {2, 16, 20, 20}, {32, 16, 3, 3}, 1, {1, 1}, {1, 1}, {1, 1, 1, 1}},
      {"batched", {8, 8, 12, 12}, {16, 8, 3, 3}, 1, {2, 2}, {1, 1}, {1, 0, 0, 1}},
      {"depthwise", {1, 32, 15, 15}, {32, 1, 3, 3}, 32, {1, 1}, {1, 1}, {1, 1, 1, 1}},
  };
  for (const ConvCase& c : cases) {
    SCOPED_TRACE(c.name);
    ConvParams p;
    p.group = c.group;
    p.window.strides = c.strides;
    p.window.dilations = c.dilations;
    p.window.pads = c.pads;
    Shape ys;
    ASSERT_TRUE(PrepareConv(c.x, c.w, c.auto_pad, &p, &ys).ok());
    auto x = RandomVector<float>(NumElements(c.x), 30);
    auto w = RandomVector<float>(NumElements(c.w), 31);
    std::vector<float> y1(NumElements(ys)), y4(NumElements(ys));
    ConvF32Ref(p, c.x, x.data(), c.w, w.data(), nullptr, ys, y1.data(), nullptr);
    ConvF32Ref(p, c.x, x.data(), c.w, w.data(), nullptr, ys, y4.data(), &four);
    EXPECT_TRUE(BitwiseEqual(y1, y4));

    // The transposed convolution with the same window (x and y swap roles).
    const Shape wt = {c.w[1] * c.group, c.w[0] / c.group, c.w[2], c.w[3]};
    const Shape xt = {c.x[0], wt[0], ys[2], ys[3]};
    ConvParams pt;
    pt.group = c.group;
    pt.window.strides = c.strides;
    pt.window.dilations = c.dilations;
    pt.window.pads = c.pads;
    Shape yts;
    ASSERT_TRUE(PrepareConvTranspose(xt, wt, AutoPad::kNotSet, {}, {}, &pt, &yts).ok());
    auto xtv = RandomVector<float>(NumElements(xt), 32);
    std::vector<float> t1(NumElements(yts)), t4(NumElements(yts));
    ConvTransposeF32Ref(pt, xt, xtv.data(), wt, w.data(), nullptr, yts, t1.data(), nullptr);
    ConvTransposeF32Ref(pt, xt, xtv.data(), wt, w.data(), nullptr, yts, t4.data(), &four);
    EXPECT_TRUE(BitwiseEqual(t1, t4));
  }
}

// ---------------------------------------------------------------------------
// Kernels through the registry

// Runs the reference kernel of `op_type` at `opset`; an undefined input tensor
// is an absent optional input.
StatusOr<std::vector<Tensor>> RunOp(const std::string& op_type, int opset, const std::vector<Tensor>& inputs,
                                    std::vector<Attribute> attrs = {}, int num_outputs = 1,
                                    const std::string& name = "n") {
  return RunRefKernel(OpNode(op_type, std::move(attrs), name), opset, inputs, static_cast<size_t>(num_outputs));
}

std::vector<double> Values(const Tensor& t) {
  std::vector<double> v;
  for (int64_t i = 0; i < t.numel(); ++i) v.push_back(t.GetAsDouble(i));
  return v;
}

TEST(NnKernels, ConvChannelMismatchNamesNodeAndBothShapes) {
  Tensor x(DataType::kFloat32, {1, 3, 5, 5}), w(DataType::kFloat32, {2, 4, 3, 3});
  auto out = RunOp("Conv", 13, {x, w}, {}, 1, "conv1");
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), StatusCode::kInvalidArgument);
  const std::string& msg = out.status().message();
  EXPECT_NE(msg.find("'conv1' (Conv)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("[1, 3, 5, 5]"), std::string::npos) << msg;
  EXPECT_NE(msg.find("[2, 4, 3, 3]"), std::string::npos) << msg;
}

TEST(NnKernels, ConvRejectsBadBiasAndKernelShape) {
  Tensor x(DataType::kFloat32, {1, 2, 5, 5}), w(DataType::kFloat32, {4, 2, 3, 3});
  auto bad_bias = RunOp("Conv", 11, {x, w, Tensor(DataType::kFloat32, {3})});
  ASSERT_FALSE(bad_bias.ok());
  EXPECT_NE(bad_bias.status().message().find("[3]"), std::string::npos) << bad_bias.status().message();
  auto bad_kernel = RunOp("Conv", 11, {x, w}, {Attribute::Ints("kernel_shape", {2, 2})});
  ASSERT_FALSE(bad_kernel.ok());
  EXPECT_NE(bad_kernel.status().message().find("kernel_shape"), std::string::npos);
  auto bad_pads = RunOp("Conv", 11, {x, w}, {Attribute::Ints("pads", {1, 1})});
  ASSERT_FALSE(bad_pads.ok());
  EXPECT_NE(bad_pads.status().message().find("pads"), std::string::npos);
}

TEST(NnKernels, ConvFloat16ComputesInFloat32) {
  Tensor x = testing::RandomFloats({1, 2, 6, 6}, 40), w = testing::RandomFloats({3, 2, 3, 3}, 41);
  auto want = RunOp("Conv", 11, {x, w}, {Attribute::Ints("pads", {1, 1, 1, 1})});
  auto got = RunOp("Conv", 11, {x.CastTo(DataType::kFloat16), w.CastTo(DataType::kFloat16)},
                   {Attribute::Ints("pads", {1, 1, 1, 1})});
  ASSERT_TRUE(want.ok() && got.ok()) << got.status().ToString();
  ASSERT_EQ((*got)[0].dtype(), DataType::kFloat16);
  std::vector<double> g = Values((*got)[0]), e = Values((*want)[0]);
  ASSERT_EQ(g.size(), e.size());
  for (size_t i = 0; i < g.size(); ++i) EXPECT_NEAR(g[i], e[i], 1e-2 * (1 + std::fabs(e[i])));
}

TEST(NnKernels, ConvTransposeOutputShapeAddsBiasOnlyRows) {
  // Full output is 3 wide; output_shape asks for 4: the extra position gets only the bias.
  Tensor x = Tensor::FromVector<float>({1, 1, 2}, {1, 2});
  Tensor w = Tensor::FromVector<float>({1, 1, 2}, {1, 10});
  Tensor b = Tensor::FromVector<float>({1}, {100});
  auto out = RunOp("ConvTranspose", 11, {x, w, b}, {Attribute::Ints("output_shape", {4})});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ((*out)[0].shape(), (Shape{1, 1, 4}));
  EXPECT_EQ(Values((*out)[0]), (std::vector<double>{101, 112, 120, 100}));
}

TEST(NnKernels, GemmBroadcastsColumnBiasAndRejectsBadC) {
  Tensor a = Tensor::FromVector<float>({2, 3}, {1, 2, 3, 4, 5, 6});
  Tensor b = Tensor::FromVector<float>({2, 3}, {1, 0, 0, 0, 1, 0});  // B^T picks columns 0 and 1
  Tensor c = Tensor::FromVector<float>({2, 1}, {10, 20});
  auto out = RunOp("Gemm", 13, {a, b, c}, {Attribute::Int("transB", 1)});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(Values((*out)[0]), (std::vector<double>{11, 12, 24, 25}));
  auto bad = RunOp("Gemm", 13, {a, b, Tensor(DataType::kFloat32, {3})}, {Attribute::Int("transB", 1)}, 1, "fc");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("'fc'"), std::string::npos);
  EXPECT_NE(bad.status().message().find("C has shape [3]"), std::string::npos) << bad.status().message();
  // Before opset 11 C is required.
  EXPECT_FALSE(RunOp("Gemm", 9, {a, a, Tensor()}, {Attribute::Int("transB", 1)}).ok());
  EXPECT_TRUE(RunOp("Gemm", 11, {a, a, Tensor()}, {Attribute::Int("transB", 1)}).ok());
}

TEST(NnKernels, GemmIntegerIsExactAndWraps) {
  Tensor a = Tensor::FromVector<int32_t>({1, 2}, {2, 3});
  Tensor b = Tensor::FromVector<int32_t>({2, 1}, {4, 5});
  Tensor c = Tensor::FromVector<int32_t>({1}, {1});
  auto out = RunOp("Gemm", 13, {a, b, c});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(Values((*out)[0]), (std::vector<double>{24}));
  // 65536 * 65536 = 2^32 wraps to 0 in int32.
  Tensor big = Tensor::FromVector<int32_t>({1, 1}, {65536});
  auto wrapped = RunOp("Gemm", 13, {big, big, c});
  ASSERT_TRUE(wrapped.ok());
  EXPECT_EQ(Values((*wrapped)[0]), (std::vector<double>{1}));
}

TEST(NnKernels, MatMulVectorsAndBroadcastBatch) {
  Tensor v = Tensor::FromVector<float>({3}, {1, 2, 3});
  auto dot = RunOp("MatMul", 13, {v, v});
  ASSERT_TRUE(dot.ok());
  EXPECT_EQ((*dot)[0].shape(), Shape{});
  EXPECT_EQ(Values((*dot)[0]), (std::vector<double>{14}));

  Tensor a = testing::RandomFloats({2, 1, 3, 4}, 50), b = testing::RandomFloats({5, 4, 2}, 51);
  auto out = RunOp("MatMul", 13, {a, b});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  ASSERT_EQ((*out)[0].shape(), (Shape{2, 5, 3, 2}));
  const float* ap = a.data<float>();
  const float* bp = b.data<float>();
  std::vector<double> want;
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 5; ++j)
      for (int m = 0; m < 3; ++m)
        for (int n = 0; n < 2; ++n) {
          double acc = 0;
          for (int k = 0; k < 4; ++k) acc += double(ap[(i * 3 + m) * 4 + k]) * bp[(j * 4 + k) * 2 + n];
          want.push_back(acc);
        }
  ExpectNear(Values((*out)[0]), want, kF32Tol, "broadcast batch");

  // Matrix times vector drops the vector's dim: [2, 3] x [3] -> [2].
  auto mv = RunOp("MatMul", 13, {Tensor::FromVector<float>({2, 3}, {1, 0, 0, 0, 1, 1}), v});
  ASSERT_TRUE(mv.ok());
  EXPECT_EQ(Values((*mv)[0]), (std::vector<double>{1, 5}));
  auto bad = RunOp("MatMul", 13, {a, testing::RandomFloats({3, 2}, 52)});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("[2, 1, 3, 4]"), std::string::npos) << bad.status().message();
}

Tensor Iota(Shape shape) {
  std::vector<float> v(static_cast<size_t>(NumElements(shape)));
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i);
  return Tensor::FromVector<float>(std::move(shape), v);
}

TEST(NnKernels, MaxPoolIndicesRowAndColumnMajor) {
  const std::vector<Attribute> base = {Attribute::Ints("kernel_shape", {2, 2})};
  auto row = RunOp("MaxPool", 12, {Iota({1, 1, 3, 3})}, base, 2);
  ASSERT_TRUE(row.ok()) << row.status().ToString();
  EXPECT_EQ(Values((*row)[0]), (std::vector<double>{4, 5, 7, 8}));
  EXPECT_EQ(Values((*row)[1]), (std::vector<double>{4, 5, 7, 8}));
  auto attrs = base;
  attrs.push_back(Attribute::Int("storage_order", 1));
  // Column-major offsets h + w * H, plus the plane offset of the second channel.
  auto col = RunOp("MaxPool", 12, {Iota({1, 2, 3, 3})}, attrs, 2);
  ASSERT_TRUE(col.ok()) << col.status().ToString();
  EXPECT_EQ(Values((*col)[1]), (std::vector<double>{4, 7, 5, 8, 13, 16, 14, 17}));
}

TEST(NnKernels, AveragePoolCeilModeAndCountIncludePad) {
  Tensor ones = Tensor::FromVector<float>({1, 1, 4, 4}, std::vector<float>(16, 1.0f));
  std::vector<Attribute> attrs = {Attribute::Ints("kernel_shape", {3, 3}), Attribute::Ints("strides", {2, 2}),
                                  Attribute::Ints("pads", {1, 1, 1, 1}), Attribute::Int("ceil_mode", 1)};
  auto plain = RunOp("AveragePool", 11, {ones}, attrs);
  ASSERT_TRUE(plain.ok()) << plain.status().ToString();
  EXPECT_EQ((*plain)[0].shape(), (Shape{1, 1, 3, 3}));
  EXPECT_EQ(Values((*plain)[0]), std::vector<double>(9, 1.0));
  attrs.push_back(Attribute::Int("count_include_pad", 1));
  auto incl = RunOp("AveragePool", 11, {ones}, attrs);
  ASSERT_TRUE(incl.ok());
  // Corner windows: 4 real taps of 9 in the padded extent; the last window
  // (positions 3..5) has 1 real tap per dim and 2 inside the padding.
  std::vector<double> got = Values((*incl)[0]);
  EXPECT_NEAR(got[0], 4.0 / 9.0, 1e-6);
  EXPECT_NEAR(got[1], 6.0 / 9.0, 1e-6);
  EXPECT_NEAR(got[8], 1.0 / 4.0, 1e-6);
}

TEST(NnKernels, PoolsRejectMissingKernelShapeAndOversizedWindow) {
  auto missing = RunOp("MaxPool", 12, {Iota({1, 1, 3, 3})}, {}, 1, "pool0");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("kernel_shape"), std::string::npos);
  auto big = RunOp("AveragePool", 11, {Iota({1, 1, 3, 3})}, {Attribute::Ints("kernel_shape", {4, 4})}, 1, "pool1");
  ASSERT_FALSE(big.ok());
  EXPECT_NE(big.status().message().find("'pool1'"), std::string::npos) << big.status().message();
  EXPECT_NE(big.status().message().find("[1, 1, 3, 3]"), std::string::npos) << big.status().message();
}

TEST(NnKernels, LpPoolAndGlobalPools) {
  Tensor x = Tensor::FromVector<float>({1, 1, 2, 2}, {3, -4, 0, 0});
  auto lp = RunOp("LpPool", 11, {x}, {Attribute::Ints("kernel_shape", {2, 2})});
  ASSERT_TRUE(lp.ok()) << lp.status().ToString();
  EXPECT_NEAR(Values((*lp)[0])[0], 5.0, 1e-6);
  auto glp = RunOp("GlobalLpPool", 2, {x}, {Attribute::Int("p", 1)});
  ASSERT_TRUE(glp.ok());
  EXPECT_NEAR(Values((*glp)[0])[0], 7.0, 1e-6);
  auto gmax = RunOp("GlobalMaxPool", 1, {x});
  ASSERT_TRUE(gmax.ok());
  EXPECT_EQ((*gmax)[0].shape(), (Shape{1, 1, 1, 1}));
  EXPECT_EQ(Values((*gmax)[0])[0], 3.0);
  auto gavg = RunOp("GlobalAveragePool", 1, {x});
  ASSERT_TRUE(gavg.ok());
  EXPECT_NEAR(Values((*gavg)[0])[0], -0.25, 1e-7);
}

}  // namespace
}  // namespace sparq
