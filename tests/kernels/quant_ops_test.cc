// Tests of the reference quantization math (kernels/ref/quantize.h,
// kernels/ref/gemm_int.h) and operators (kernels/ref/quant_ops.cc,
// quant_conv_ops.cc) beyond what ONNX's node tests cover: rounding ties,
// saturation, per-axis and blocked parameters, error messages, and random
// comparisons against naive or float computations.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "kernels/op_context.h"
#include "kernels/ref/gemm_int.h"
#include "kernels/ref/quantize.h"
#include "kernels/registry.h"
#include "kernels/op_test_util.h"

namespace sparq {
namespace {

using testing::OpNode;
using testing::RunRefKernel;

// Runs the reference kernel of `node` at `opset`; undefined tensors in
// `inputs` are absent optional inputs. Returns the outputs or the error.
StatusOr<std::vector<Tensor>> RunOp(Node node, int64_t opset, const std::vector<Tensor>& inputs, size_t outputs = 1) {
  return RunRefKernel(std::move(node), opset, inputs, outputs);
}

Node MakeNode(const std::string& op, const std::string& name = "", std::vector<Attribute> attrs = {}) {
  Node n;
  n.op_type = op;
  n.name = name;
  n.attributes = std::move(attrs);
  return n;
}

template <typename T>
std::vector<T> Values(const Tensor& t) {
  const T* p = t.data<T>();
  return std::vector<T>(p, p + t.numel());
}

// ---------------------------------------------------------------------------
// Rounding and single values

TEST(QuantizeMath, RoundHalfToEvenTies) {
  EXPECT_EQ(RoundHalfToEven(0.5f), 0.0f);
  EXPECT_EQ(RoundHalfToEven(1.5f), 2.0f);
  EXPECT_EQ(RoundHalfToEven(2.5f), 2.0f);
  EXPECT_EQ(RoundHalfToEven(3.5f), 4.0f);
  EXPECT_EQ(RoundHalfToEven(-0.5f), 0.0f);
  EXPECT_TRUE(std::signbit(RoundHalfToEven(-0.5f)));
  EXPECT_EQ(RoundHalfToEven(-1.5f), -2.0f);
  EXPECT_EQ(RoundHalfToEven(-2.5f), -2.0f);
  // Not ties: ordinary nearest.
  EXPECT_EQ(RoundHalfToEven(2.4999998f), 2.0f);
  EXPECT_EQ(RoundHalfToEven(2.5000002f), 3.0f);
  EXPECT_EQ(RoundHalfToEven(-7.6f), -8.0f);
  // Beyond 2^23 every float is an integer.
  EXPECT_EQ(RoundHalfToEven(16777216.0f), 16777216.0f);
  EXPECT_EQ(RoundHalfToEven(8388609.0f), 8388609.0f);
  EXPECT_TRUE(std::isinf(RoundHalfToEven(std::numeric_limits<float>::infinity())));
}

TEST(QuantizeMath, QuantizeValueSaturatesAndHandlesNaN) {
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(QuantizeValue<uint8_t>(1000.0f, 1.0f, 10), 255);
  EXPECT_EQ(QuantizeValue<uint8_t>(-1000.0f, 1.0f, 10), 0);
  EXPECT_EQ(QuantizeValue<uint8_t>(inf, 1.0f, 10), 255);
  EXPECT_EQ(QuantizeValue<uint8_t>(-inf, 1.0f, 10), 0);
  EXPECT_EQ(QuantizeValue<uint8_t>(std::nanf(""), 1.0f, 10), 10);
  EXPECT_EQ(QuantizeValue<int8_t>(127.5f, 1.0f, 0), 127);
  EXPECT_EQ(QuantizeValue<int8_t>(-128.5f, 1.0f, 0), -128);
  EXPECT_EQ(QuantizeValue<int8_t>(3.0f, 2.0f, -1), 1);  // 1.5 -> 2, + (-1)
  EXPECT_EQ(QuantizeValue<int16_t>(1e9f, 1.0f, 0), 32767);
}

TEST(QuantizeMath, RequantizeBiasReluAndTies) {
  const std::vector<int32_t> acc = {1, 3, 5, -1, -3, 1000, -1000, 0};
  const float half = 0.5f;  // acc * 0.5: ties everywhere for odd acc
  std::vector<int8_t> out(acc.size());
  RequantizeS32Ref<int8_t>(acc.size(), acc.data(), nullptr, 0, &half, 0, 0, false, out.data());
  EXPECT_EQ(out, (std::vector<int8_t>{0, 2, 2, 0, -2, 127, -128, 0}));
  // Bias per element, ReLU fused: never below the zero point.
  const std::vector<int32_t> bias = {1, 1, 1, 1, 1, 1, 1, 1};
  std::vector<uint8_t> out_u8(acc.size());
  RequantizeS32Ref<uint8_t>(acc.size(), acc.data(), bias.data(), 1, &half, 0, 100, true, out_u8.data());
  // (acc + 1) * 0.5 = 1, 2, 3, 0, -1, 500.5, -499.5, 0.5 -> rounded, + 100, then max(., 100).
  EXPECT_EQ(out_u8, (std::vector<uint8_t>{101, 102, 103, 100, 100, 255, 100, 100}));
}

// ---------------------------------------------------------------------------
// QuantizeLinear / DequantizeLinear / DynamicQuantizeLinear operators

TEST(QuantizeLinearOp, TiesRoundToEvenAndSaturate) {
  const Tensor x = Tensor::FromVector<float>({8}, {0.5f, 1.5f, 2.5f, -0.5f, -1.5f, -2.5f, 300.0f, -300.0f});
  auto out = RunOp(MakeNode("QuantizeLinear"), 13, {x, Tensor::Scalar<float>(1.0f), Tensor::Scalar<int8_t>(0)});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(Values<int8_t>((*out)[0]), (std::vector<int8_t>{0, 2, 2, 0, -2, -2, 127, -128}));

  // No zero point: uint8 output, zero point 0.
  out = RunOp(MakeNode("QuantizeLinear"), 13, {x, Tensor::Scalar<float>(1.0f)});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ((*out)[0].dtype(), DataType::kUInt8);
  EXPECT_EQ(Values<uint8_t>((*out)[0]), (std::vector<uint8_t>{0, 2, 2, 0, 0, 0, 255, 0}));
}

TEST(QuantizeLinearOp, PerAxis) {
  // x [2, 3], axis 1: column c uses scale[c], zero_point[c].
  const Tensor x = Tensor::FromVector<float>({2, 3}, {1.0f, 1.0f, 1.0f, -4.0f, 5.0f, 6.0f});
  const Tensor scale = Tensor::FromVector<float>({3}, {1.0f, 2.0f, 4.0f});
  const Tensor zp = Tensor::FromVector<uint8_t>({3}, {10, 20, 30});
  auto out = RunOp(MakeNode("QuantizeLinear"), 13, {x, scale, zp});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  // 1/2 = 0.5 -> 0, 1/4 -> 0, 5/2 = 2.5 -> 2, 6/4 = 1.5 -> 2
  EXPECT_EQ(Values<uint8_t>((*out)[0]), (std::vector<uint8_t>{11, 20, 30, 6, 22, 32}));

  // axis -2 (= 0): row r uses scale[r].
  const Tensor scale0 = Tensor::FromVector<float>({2}, {1.0f, 2.0f});
  out = RunOp(MakeNode("QuantizeLinear", "", {Attribute::Int("axis", -2)}), 13, {x, scale0});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(Values<uint8_t>((*out)[0]), (std::vector<uint8_t>{1, 1, 1, 0, 2, 3}));

  // DequantizeLinear inverts it per axis.
  auto back = RunOp(MakeNode("DequantizeLinear"), 13,
                    {Tensor::FromVector<uint8_t>({2, 3}, {11, 20, 30, 6, 22, 32}), scale, zp});
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(Values<float>((*back)[0]), (std::vector<float>{1.0f, 0.0f, 0.0f, -4.0f, 4.0f, 8.0f}));
}

TEST(QuantizeLinearOp, Blocked) {
  // x [1, 5] along axis 1 in blocks of 2: scales for columns {0,1}, {2,3}, {4}.
  const Tensor x = Tensor::FromVector<float>({1, 5}, {2.0f, 4.0f, 2.0f, 4.0f, 9.0f});
  const Tensor scale = Tensor::FromVector<float>({1, 3}, {1.0f, 2.0f, 3.0f});
  auto out = RunOp(MakeNode("QuantizeLinear", "", {Attribute::Int("axis", 1), Attribute::Int("block_size", 2)}), 21,
                   {x, scale, Tensor::FromVector<int8_t>({1, 3}, {0, 1, -1})});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(Values<int8_t>((*out)[0]), (std::vector<int8_t>{2, 4, 2, 3, 2}));

  // Wrong number of blocks is an error that says which shape was expected.
  out = RunOp(MakeNode("QuantizeLinear", "qb", {Attribute::Int("axis", 1), Attribute::Int("block_size", 2)}), 21,
              {x, Tensor::FromVector<float>({1, 2}, {1.0f, 2.0f})});
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("[1, 3]"), std::string::npos) << out.status().ToString();
}

TEST(QuantizeLinearOp, ScaleLengthMismatchNamesNode) {
  const Tensor x(DataType::kFloat32, {2, 3, 4});
  const Tensor scale = Tensor::FromVector<float>({4}, {1.0f, 1.0f, 1.0f, 1.0f});
  auto out = RunOp(MakeNode("QuantizeLinear", "quant_conv1"), 13, {x, scale});
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), StatusCode::kInvalidArgument);
  const std::string& msg = out.status().message();
  EXPECT_NE(msg.find("quant_conv1"), std::string::npos) << msg;
  EXPECT_NE(msg.find("y_scale"), std::string::npos) << msg;
  EXPECT_NE(msg.find("axis 1"), std::string::npos) << msg;

  // Zero point and scale lengths must agree too.
  out = RunOp(MakeNode("DequantizeLinear", "dq"), 13,
              {Tensor(DataType::kUInt8, {2, 3}), Tensor::FromVector<float>({3}, {1.0f, 1.0f, 1.0f}),
               Tensor::FromVector<uint8_t>({2}, {0, 0})});
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("'dq'"), std::string::npos) << out.status().ToString();
}

// float8e4m3fn (17) is supported (tests/kernels/quant_fp8_test.cc); the other
// float8 types are not.
TEST(QuantizeLinearOp, Float8OutputIsNotSupported) {
  auto out = RunOp(MakeNode("QuantizeLinear", "", {Attribute::Int("output_dtype", 19)}), 21,
                   {Tensor(DataType::kFloat32, {2}), Tensor::Scalar<float>(1.0f)});
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), StatusCode::kNotSupported) << out.status().ToString();
  auto e4m3 = RunOp(MakeNode("QuantizeLinear", "", {Attribute::Int("output_dtype", 17)}), 21,
                    {Tensor(DataType::kFloat32, {2}), Tensor::Scalar<float>(1.0f)});
  ASSERT_TRUE(e4m3.ok()) << e4m3.status().ToString();
  EXPECT_EQ((*e4m3)[0].dtype(), DataType::kFloat8E4M3FN);
}

TEST(DequantizeLinearOp, Int32Input) {
  auto out = RunOp(MakeNode("DequantizeLinear"), 13,
                   {Tensor::FromVector<int32_t>({3}, {-100000, 0, 7}), Tensor::Scalar<float>(0.5f)});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(Values<float>((*out)[0]), (std::vector<float>{-50000.0f, 0.0f, 3.5f}));
}

TEST(DynamicQuantizeLinearOp, AllZeroInputHasUsableScale) {
  auto out = RunOp(MakeNode("DynamicQuantizeLinear"), 11, {Tensor(DataType::kFloat32, {4})}, 3);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(Values<uint8_t>((*out)[0]), (std::vector<uint8_t>{0, 0, 0, 0}));
  EXPECT_EQ((*out)[1].data<float>()[0], 1.0f);
  EXPECT_EQ((*out)[2].data<uint8_t>()[0], 0);
}

// ---------------------------------------------------------------------------
// Integer GEMM

template <typename TA, typename TB>
void CheckGemmAgainstNaive(int64_t M, int64_t N, int64_t K, bool per_channel, std::mt19937& rng) {
  std::uniform_int_distribution<int> byte(std::numeric_limits<TA>::min(), std::numeric_limits<TA>::max());
  std::uniform_int_distribution<int> byte_b(std::numeric_limits<TB>::min(), std::numeric_limits<TB>::max());
  const int64_t lda = K + 3, ldb = N + 1, ldc = N + 2;  // padded leading dims
  std::vector<TA> A(M * lda);
  std::vector<TB> B(K * ldb);
  for (auto& v : A) v = static_cast<TA>(byte(rng));
  for (auto& v : B) v = static_cast<TB>(byte_b(rng));
  std::vector<int32_t> a_zp(per_channel ? M : 1), b_zp(per_channel ? N : 1);
  for (auto& v : a_zp) v = byte(rng);
  for (auto& v : b_zp) v = byte_b(rng);
  std::vector<int32_t> C(M * ldc, -7);
  GemmS32Ref<TA, TB>(M, N, K, A.data(), lda, {a_zp.data(), per_channel}, B.data(), ldb, {b_zp.data(), per_channel},
                     C.data(), ldc);
  for (int64_t m = 0; m < M; ++m) {
    for (int64_t n = 0; n < N; ++n) {
      int64_t want = 0;
      for (int64_t k = 0; k < K; ++k) {
        want += (int64_t{A[m * lda + k]} - a_zp[per_channel ? m : 0]) *
                (int64_t{B[k * ldb + n]} - b_zp[per_channel ? n : 0]);
      }
      ASSERT_EQ(C[m * ldc + n], want) << "M=" << M << " N=" << N << " K=" << K << " at (" << m << ", " << n << ")";
    }
    EXPECT_EQ(C[m * ldc + N], -7) << "wrote past N in row " << m;
  }
}

TEST(GemmS32Ref, MatchesNaiveOnOddShapes) {
  std::mt19937 rng(42);
  const int64_t shapes[][3] = {{1, 1, 1}, {3, 5, 7}, {7, 1, 13}, {1, 17, 3}, {5, 600, 9}, {2, 3, 0}, {13, 1030, 31}};
  for (const auto& s : shapes) {
    for (bool per_channel : {false, true}) {
      CheckGemmAgainstNaive<uint8_t, uint8_t>(s[0], s[1], s[2], per_channel, rng);
      CheckGemmAgainstNaive<uint8_t, int8_t>(s[0], s[1], s[2], per_channel, rng);
      CheckGemmAgainstNaive<int8_t, uint8_t>(s[0], s[1], s[2], per_channel, rng);
      CheckGemmAgainstNaive<int8_t, int8_t>(s[0], s[1], s[2], per_channel, rng);
    }
  }
}

TEST(GemmS32Ref, NoZeroPoints) {
  const std::vector<int8_t> A = {-128, 127, 1, -1};  // 2 x 2
  const std::vector<int8_t> B = {-128, 2, -128, 3};  // 2 x 2
  std::vector<int32_t> C(4);
  GemmS32Ref<int8_t, int8_t>(2, 2, 2, A.data(), 2, {}, B.data(), 2, {}, C.data(), 2);
  EXPECT_EQ(C, (std::vector<int32_t>{16384 - 16256, -256 + 381, -128 + 128, 2 - 3}));
}

// ---------------------------------------------------------------------------
// QLinearMatMul and QLinearConv operators

// QLinearMatMul on random data against the float computation
// round(dequant(a) @ dequant(b) / y_scale) + y_zp: the requantized result may
// differ by 1 LSB where float32 rounding lands near a tie, never more.
template <typename T>
void CheckQLinearMatMulAgainstFloat(bool per_column_b, std::mt19937& rng) {
  const int64_t M = 7, K = 33, N = 5;
  std::uniform_int_distribution<int> byte(std::numeric_limits<T>::min(), std::numeric_limits<T>::max());
  std::uniform_real_distribution<float> scale_dist(0.005f, 0.05f);
  std::vector<T> a(M * K), b(K * N);
  for (auto& v : a) v = static_cast<T>(byte(rng));
  for (auto& v : b) v = static_cast<T>(byte(rng));
  const float a_scale = scale_dist(rng), y_scale = scale_dist(rng) * 8;
  const T a_zp = static_cast<T>(byte(rng) / 4), y_zp = static_cast<T>(byte(rng) / 4);
  const int64_t nb = per_column_b ? N : 1;
  std::vector<float> b_scale(nb);
  std::vector<T> b_zp(nb);
  for (auto& v : b_scale) v = scale_dist(rng);
  for (auto& v : b_zp) v = static_cast<T>(byte(rng) / 4);
  const Shape scale_shape = per_column_b ? Shape{N} : Shape{};
  auto out = RunOp(MakeNode("QLinearMatMul"), 10,
                   {Tensor::FromVector<T>({M, K}, a), Tensor::Scalar<float>(a_scale), Tensor::Scalar<T>(a_zp),
                    Tensor::FromVector<T>({K, N}, b), Tensor::FromVector<float>(scale_shape, b_scale),
                    Tensor::FromVector<T>(scale_shape, b_zp), Tensor::Scalar<float>(y_scale), Tensor::Scalar<T>(y_zp)});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  const T* y = (*out)[0].template data<T>();
  for (int64_t m = 0; m < M; ++m) {
    for (int64_t n = 0; n < N; ++n) {
      double real = 0.0;
      const int64_t c = per_column_b ? n : 0;
      for (int64_t k = 0; k < K; ++k) {
        real += (double{a_scale} * (a[m * K + k] - a_zp)) * (double{b_scale[c]} * (b[k * N + n] - b_zp[c]));
      }
      const double want =
          std::min<double>(std::max<double>(std::nearbyint(real / y_scale) + y_zp, std::numeric_limits<T>::min()),
                           std::numeric_limits<T>::max());
      EXPECT_LE(std::fabs(static_cast<double>(y[m * N + n]) - want), 1.0) << "at (" << m << ", " << n << ")";
    }
  }
}

TEST(QLinearMatMulOp, WithinOneLsbOfFloat) {
  std::mt19937 rng(7);
  for (int rep = 0; rep < 5; ++rep) {
    CheckQLinearMatMulAgainstFloat<uint8_t>(false, rng);
    CheckQLinearMatMulAgainstFloat<uint8_t>(true, rng);
    CheckQLinearMatMulAgainstFloat<int8_t>(false, rng);
    CheckQLinearMatMulAgainstFloat<int8_t>(true, rng);
  }
}

TEST(QLinearMatMulOp, BadScaleLengthNamesNode) {
  auto out = RunOp(MakeNode("QLinearMatMul", "fc1"), 10,
                   {Tensor(DataType::kUInt8, {2, 4}), Tensor::Scalar<float>(1.0f), Tensor::Scalar<uint8_t>(0),
                    Tensor(DataType::kUInt8, {4, 3}), Tensor::FromVector<float>({2}, {1.0f, 1.0f}),
                    Tensor::FromVector<uint8_t>({2}, {0, 0}), Tensor::Scalar<float>(1.0f), Tensor::Scalar<uint8_t>(0)});
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("'fc1'"), std::string::npos) << out.status().ToString();
  EXPECT_NE(out.status().message().find("b_scale"), std::string::npos) << out.status().ToString();
}

TEST(MatMulIntegerOp, PerRowAndPerColumnZeroPointsWithBroadcast) {
  // A [2, 2, 3] (batch 2), B [3, 2] shared; a_zp per row, b_zp per column.
  const Tensor A = Tensor::FromVector<uint8_t>({2, 2, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12});
  const Tensor B = Tensor::FromVector<uint8_t>({3, 2}, {1, 0, 0, 1, 1, 1});
  auto out = RunOp(MakeNode("MatMulInteger"), 10,
                   {A, B, Tensor::FromVector<uint8_t>({2}, {1, 4}), Tensor::FromVector<uint8_t>({2}, {0, 1})});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ((*out)[0].shape(), (Shape{2, 2, 2}));
  // Row [a0 a1 a2] - zp; column 0 = a0 + a2, column 1 = -a0 + 0*a1 + 0*a2 ... with B - [0, 1].
  // Batch 0 row 0: [0 1 2] -> col0 0+2 = 2, col1 (B col1 - 1 = [-1, 0, 0]) -> 0.
  // Batch 0 row 1: [0 1 2] -> 2, 0. Batch 1 row 0: [6 7 8] -> 14, -6. row 1: [6 7 8] -> 14, -6.
  EXPECT_EQ(Values<int32_t>((*out)[0]), (std::vector<int32_t>{2, 0, 2, 0, 14, -6, 14, -6}));
}

TEST(QLinearConvOp, PerChannelScaleAndBias) {
  // 1x1 conv, 2 output channels, x [1, 1, 1, 3].
  const Tensor x = Tensor::FromVector<uint8_t>({1, 1, 1, 3}, {10, 20, 30});
  const Tensor w = Tensor::FromVector<int8_t>({2, 1, 1, 1}, {1, -1});
  auto out =
      RunOp(MakeNode("QLinearConv"), 10,
            {x, Tensor::Scalar<float>(1.0f), Tensor::Scalar<uint8_t>(10), w,
             Tensor::FromVector<float>({2}, {0.5f, 1.0f}), Tensor::FromVector<int8_t>({2}, {0, 0}),
             Tensor::Scalar<float>(1.0f), Tensor::Scalar<uint8_t>(100), Tensor::FromVector<int32_t>({2}, {1, 0})});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  // channel 0: (x - 10 + 1) * 0.5 = 0.5, 5.5, 10.5 -> 0, 6, 10; channel 1: -(x - 10) = 0, -10, -20.
  EXPECT_EQ(Values<uint8_t>((*out)[0]), (std::vector<uint8_t>{100, 106, 110, 100, 90, 80}));

  // A w_scale with neither 1 nor M values names the node and both counts.
  out = RunOp(MakeNode("QLinearConv", "conv7"), 10,
              {x, Tensor::Scalar<float>(1.0f), Tensor::Scalar<uint8_t>(10), w,
               Tensor::FromVector<float>({3}, {0.5f, 1.0f, 1.0f}), Tensor::Scalar<int8_t>(0),
               Tensor::Scalar<float>(1.0f), Tensor::Scalar<uint8_t>(100)});
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("'conv7'"), std::string::npos) << out.status().ToString();
  EXPECT_NE(out.status().message().find("w_scale has 3 values"), std::string::npos) << out.status().ToString();
}

TEST(ConvIntegerOp, GroupsStridesPadsMatchNaive) {
  // x [1, 4, 5, 6], w [4, 2, 3, 2], group 2, stride [2, 1], pads [1, 0, 1, 1], dilations [1, 2].
  std::mt19937 rng(3);
  std::uniform_int_distribution<int> byte(0, 255);
  const int64_t C = 4, H = 5, W = 6, M = 4, Cg = 2, KH = 3, KW = 2;
  std::vector<uint8_t> xv(C * H * W), wv(M * Cg * KH * KW);
  for (auto& v : xv) v = static_cast<uint8_t>(byte(rng));
  for (auto& v : wv) v = static_cast<uint8_t>(byte(rng));
  const uint8_t x_zp = 17;
  const std::vector<uint8_t> w_zp = {3, 200, 0, 128};
  auto out = RunOp(MakeNode("ConvInteger", "",
                            {Attribute::Int("group", 2), Attribute::Ints("strides", {2, 1}), Attribute::Ints("pads", {1, 0, 1, 1}),
                             Attribute::Ints("dilations", {1, 2})}),
                   10,
                   {Tensor::FromVector<uint8_t>({1, C, H, W}, xv), Tensor::FromVector<uint8_t>({M, Cg, KH, KW}, wv),
                    Tensor::Scalar<uint8_t>(x_zp), Tensor::FromVector<uint8_t>({M}, w_zp)});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  const int64_t OH = (H + 2 - 3) / 2 + 1, OW = (W + 1 - 3) / 1 + 1;
  ASSERT_EQ((*out)[0].shape(), (Shape{1, M, OH, OW}));
  const int32_t* y = (*out)[0].data<int32_t>();
  for (int64_t m = 0; m < M; ++m) {
    const int64_t g = m / 2;
    for (int64_t oh = 0; oh < OH; ++oh) {
      for (int64_t ow = 0; ow < OW; ++ow) {
        int64_t want = 0;
        for (int64_t c = 0; c < Cg; ++c) {
          for (int64_t kh = 0; kh < KH; ++kh) {
            for (int64_t kw = 0; kw < KW; ++kw) {
              const int64_t ih = oh * 2 - 1 + kh, iw = ow - 0 + kw * 2;
              if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
              want += (int64_t{xv[((g * Cg + c) * H + ih) * W + iw]} - x_zp) *
                      (int64_t{wv[((m * Cg + c) * KH + kh) * KW + kw]} - w_zp[m]);
            }
          }
        }
        ASSERT_EQ(y[(m * OH + oh) * OW + ow], want) << "at (" << m << ", " << oh << ", " << ow << ")";
      }
    }
  }
}

}  // namespace
}  // namespace sparq
