// The 4-bit reference kernels: blocked DequantizeLinear of int4/uint4 (opset
// 21), QuantizeLinear to int4/uint4 (round half to even, saturation) and
// com.microsoft MatMulNBits on hand-made cases.
#include <gtest/gtest.h>

#include <cstring>

#include "kernels/ref/matmul_nbits.h"
#include "kernels/op_test_util.h"
#include "test_util.h"

namespace sparq {
namespace {

using testing::OpNode;
using testing::RunRefKernel;

Tensor FourBit(DataType type, Shape shape, std::vector<int8_t> values) {
  Tensor t(type, std::move(shape));
  std::memcpy(t.raw_data(), values.data(), values.size());
  return t;
}

std::vector<float> Floats(const Tensor& t) {
  const Tensor f = t.ToFloat32();
  return std::vector<float>(f.data<float>(), f.data<float>() + f.numel());
}

std::vector<int> Ints(const Tensor& t) {
  std::vector<int> v;
  for (int64_t i = 0; i < t.numel(); ++i) v.push_back(static_cast<int>(t.GetAsDouble(i)));
  return v;
}

TEST(Int4Ref, BlockedDequantizeInt4AlongAxis0) {
  // x int4 [5, 2], blocks of 2 along axis 0: rows {0,1}, {2,3}, {4}.
  const Tensor x = FourBit(DataType::kInt4, {5, 2}, {-8, 7, 1, -1, 2, 3, -4, 5, 6, -7});
  const Tensor scale = Tensor::FromVector<float>({3, 2}, {0.5f, 1.0f, 2.0f, 0.25f, 1.0f, 3.0f});
  const Tensor zp = FourBit(DataType::kInt4, {3, 2}, {0, 1, -1, 2, 7, -8});
  auto out = RunRefKernel(OpNode("DequantizeLinear", {Attribute::Int("axis", 0), Attribute::Int("block_size", 2)}), 21,
                          {x, scale, zp});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(Floats((*out)[0]), (std::vector<float>{-4.0f, 6.0f, 0.5f, -2.0f, 6.0f, 0.25f, -6.0f, 0.75f, -1.0f, 3.0f}));
}

TEST(Int4Ref, BlockedDequantizeUint4AndInt8) {
  const Tensor x = FourBit(DataType::kUInt4, {1, 3}, {0, 15, 9});
  auto out = RunRefKernel(OpNode("DequantizeLinear", {Attribute::Int("axis", 1), Attribute::Int("block_size", 2)}), 21,
                          {x, Tensor::FromVector<float>({1, 2}, {1.0f, 2.0f}),
                           FourBit(DataType::kUInt4, {1, 2}, {8, 8})});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(Floats((*out)[0]), (std::vector<float>{-8.0f, 7.0f, 2.0f}));
  // A zero point of another type than x is refused, naming it.
  out = RunRefKernel(OpNode("DequantizeLinear", {Attribute::Int("axis", 1), Attribute::Int("block_size", 2)}, "dq4"),
                     21, {x, Tensor::FromVector<float>({1, 2}, {1.0f, 2.0f}), Tensor::FromVector<uint8_t>({1, 2}, {8, 8})});
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("x_zero_point"), std::string::npos) << out.status().ToString();
}

TEST(Int4Ref, QuantizeToInt4RoundsHalfToEvenAndSaturates) {
  const Tensor x = Tensor::FromVector<float>({8}, {2.5f, 3.5f, -2.5f, -9.0f, 7.6f, 0.4f, -0.5f, 100.0f});
  auto out = RunRefKernel(OpNode("QuantizeLinear"), 21,
                          {x, Tensor::Scalar<float>(1.0f), FourBit(DataType::kInt4, {}, {0})});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ((*out)[0].dtype(), DataType::kInt4);
  EXPECT_EQ(Ints((*out)[0]), (std::vector<int>{2, 4, -2, -8, 7, 0, 0, 7}));
  // uint4 by output_dtype, zero point 0: negatives saturate to 0, large to 15.
  out = RunRefKernel(OpNode("QuantizeLinear", {Attribute::Int("output_dtype", 21)}), 21,
                     {x, Tensor::Scalar<float>(1.0f)});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ((*out)[0].dtype(), DataType::kUInt4);
  EXPECT_EQ(Ints((*out)[0]), (std::vector<int>{2, 4, 0, 0, 8, 0, 0, 15}));
}

TEST(Int4Ref, QuantizeToUint4Blocked) {
  // x [4, 1] along axis 0, blocks of 3: rows {0,1,2} scale 0.5 zp 8, row {3} scale 2 zp 3.
  const Tensor x = Tensor::FromVector<float>({4, 1}, {1.25f, -4.0f, 10.0f, -7.0f});
  auto out = RunRefKernel(OpNode("QuantizeLinear", {Attribute::Int("axis", 0), Attribute::Int("block_size", 3)}), 21,
                          {x, Tensor::FromVector<float>({2, 1}, {0.5f, 2.0f}), FourBit(DataType::kUInt4, {2, 1}, {8, 3})});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  // 1.25/0.5 = 2.5 -> 2 (+8 = 10); -8 + 8 = 0; 20 + 8 -> 15; -3.5 -> -4 (+3 = -1) -> 0.
  EXPECT_EQ(Ints((*out)[0]), (std::vector<int>{10, 0, 15, 0}));
}

// A MatMulNBits case built by hand: K 20 (block 16: two blocks, the second
// padded), N 3, A [2, 20]. The expected output dequantizes the codes
// directly from the per-element lists, not through the packed layout.
struct NBitsCase {
  int64_t k = 20, n = 3, bs = 16;
  std::vector<int> codes;       // [n][k]
  std::vector<float> scales;    // [n][2]
  std::vector<int> zps;         // [n][2]
  Tensor a, b, scale_t, zp_t, bias;

  NBitsCase() {
    for (int64_t i = 0; i < n * k; ++i) codes.push_back(static_cast<int>((i * 7 + 3) % 16));
    scales = {0.5f, 0.25f, 1.0f, 2.0f, 0.125f, 0.75f};
    zps = {8, 3, 0, 15, 7, 9};
    a = testing::RandomFloats({2, k}, 3);
    b = Tensor(DataType::kUInt8, {n, 2, 8});
    auto* bp = static_cast<uint8_t*>(b.raw_data());
    for (int64_t c = 0; c < n; ++c)
      for (int64_t kk = 0; kk < k; ++kk) {
        const int64_t blk = kk / bs, j = kk % bs;
        bp[(c * 2 + blk) * 8 + j / 2] |= static_cast<uint8_t>(codes[c * k + kk] << (4 * (j & 1)));
      }
    scale_t = Tensor::FromVector<float>({n * 2}, scales);
    zp_t = Tensor(DataType::kUInt8, {n});  // ceil(2 / 2) = 1 byte per column
    for (int64_t c = 0; c < n; ++c)
      static_cast<uint8_t*>(zp_t.raw_data())[c] = static_cast<uint8_t>(zps[c * 2] | (zps[c * 2 + 1] << 4));
    bias = Tensor::FromVector<float>({n}, {0.5f, -1.0f, 2.0f});
  }
  Node MakeNode(int64_t bits = 4) const {
    Node node = OpNode("MatMulNBits", {Attribute::Int("K", k), Attribute::Int("N", n), Attribute::Int("bits", bits),
                                       Attribute::Int("block_size", bs)}, "mmnb");
    node.domain = "com.microsoft";
    return node;
  }
  // with_zp false: every zero point 8.
  std::vector<float> Expected(bool with_zp, bool with_bias) const {
    std::vector<float> y;
    for (int64_t i = 0; i < 2; ++i)
      for (int64_t c = 0; c < n; ++c) {
        float acc = 0.0f;
        for (int64_t kk = 0; kk < k; ++kk) {
          const int64_t blk = kk / bs;
          const int zp = with_zp ? zps[c * 2 + blk] : 8;
          acc += a.data<float>()[i * k + kk] * (static_cast<float>(codes[c * k + kk] - zp) * scales[c * 2 + blk]);
        }
        y.push_back(acc + (with_bias ? bias.data<float>()[c] : 0.0f));
      }
    return y;
  }
};

TEST(Int4Ref, MatMulNBitsHandMadeCase) {
  const NBitsCase c;
  auto out = RunRefKernel(c.MakeNode(), 1, {c.a, c.b, c.scale_t, c.zp_t, Tensor(), c.bias});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ((*out)[0].shape(), (Shape{2, 3}));
  EXPECT_EQ(Floats((*out)[0]), c.Expected(true, true));
  out = RunRefKernel(c.MakeNode(), 1, {c.a, c.b, c.scale_t});  // no zero points: 8
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(Floats((*out)[0]), c.Expected(false, false));
  // Float zero points equal to the packed ones give the same result.
  std::vector<float> fzp(c.zps.begin(), c.zps.end());
  out = RunRefKernel(c.MakeNode(), 1, {c.a, c.b, c.scale_t, Tensor::FromVector<float>({6}, fzp)});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(Floats((*out)[0]), c.Expected(true, false));
}

TEST(Int4Ref, MatMulNBitsRejectsWhatItCannotRun) {
  const NBitsCase c;
  auto out = RunRefKernel(c.MakeNode(8), 1, {c.a, c.b, c.scale_t});
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), StatusCode::kNotSupported) << out.status().ToString();
  out = RunRefKernel(c.MakeNode(), 1, {c.a, c.b, c.scale_t, Tensor(), Tensor::FromVector<int32_t>({1}, {0})});
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), StatusCode::kNotSupported);
  EXPECT_NE(out.status().message().find("g_idx"), std::string::npos) << out.status().ToString();
  out = RunRefKernel(c.MakeNode(), 1, {c.a, Tensor(DataType::kUInt8, {3, 2, 4}), c.scale_t});
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(out.status().message().find("mmnb"), std::string::npos) << out.status().ToString();
  out = RunRefKernel(c.MakeNode(), 1, {testing::RandomFloats({2, 19}, 1), c.b, c.scale_t});
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("K"), std::string::npos) << out.status().ToString();
}

}  // namespace
}  // namespace sparq
