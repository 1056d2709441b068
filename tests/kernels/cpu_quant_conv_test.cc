// QLinearConv on the INT8 GEMM (kernels/cpu/quant_conv.cc), run by the
// executor with constant weights: bit for bit the reference kernel's output.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <set>

#include "kernels/cpu/dispatch.h"
#include "sparq/executor.h"
#include "test_util.h"
#include "tests/kernels/isa_sweep.h"

namespace sparq {
namespace {

struct ConvCase {
  const char* name;
  DataType x_type;
  int64_t n, c, h, w, m, kh, kw;
  std::vector<int64_t> strides, pads, dilations;
  bool per_channel, bias;
  int64_t group = 1;
  bool w_zero_points = false;  // non-zero weight zero points (always for group > 1)
};

template <typename T>
Tensor RandomBytes(Shape shape, std::mt19937& rng) {
  Tensor t(std::is_same_v<T, int8_t> ? DataType::kInt8 : DataType::kUInt8, shape);
  std::uniform_int_distribution<int> d(std::is_same_v<T, int8_t> ? -128 : 0, std::is_same_v<T, int8_t> ? 127 : 255);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<T>()[i] = static_cast<T>(d(rng));
  return t;
}

Model QLinearConvModel(const ConvCase& cc, std::mt19937& rng) {
  Model m;
  m.ir_version = 8;
  m.opset_imports = {{"", 13}};
  ValueInfo x;
  x.name = "x";
  x.dtype = cc.x_type;
  m.graph.inputs.push_back(x);
  ValueInfo y = x;
  y.name = "y";
  m.graph.outputs.push_back(y);
  Graph& g = m.graph;
  g.initializers["w"] = RandomBytes<int8_t>({cc.m, cc.c / cc.group, cc.kh, cc.kw}, rng);
  // Scales chosen so that requantized values spread over the range without
  // landing on .5 ties (an irrational-ish multiplier).
  g.initializers["x_scale"] = Tensor::Scalar<float>(0.0173f);
  g.initializers["y_scale"] = Tensor::Scalar<float>(0.213f);
  std::vector<float> ws(cc.per_channel ? cc.m : 1);
  for (size_t i = 0; i < ws.size(); ++i) ws[i] = 0.0031f * (1.0f + 0.137f * static_cast<float>(i));
  g.initializers["w_scale"] = Tensor::FromVector<float>({static_cast<int64_t>(ws.size())}, ws);
  std::vector<int8_t> w_zp(ws.size());
  for (size_t i = 0; i < ws.size(); ++i) w_zp[i] = cc.group > 1 || cc.w_zero_points ? static_cast<int8_t>(i % 7) - 3 : 0;
  g.initializers["w_zp"] = Tensor::FromVector<int8_t>({static_cast<int64_t>(ws.size())}, w_zp);
  if (cc.x_type == DataType::kUInt8) {
    g.initializers["x_zp"] = Tensor::Scalar<uint8_t>(131);
    g.initializers["y_zp"] = Tensor::Scalar<uint8_t>(119);
  } else {
    g.initializers["x_zp"] = Tensor::Scalar<int8_t>(-3);
    g.initializers["y_zp"] = Tensor::Scalar<int8_t>(5);
  }
  Node node{"conv", "QLinearConv", "", {"x", "x_scale", "x_zp", "w", "w_scale", "w_zp", "y_scale", "y_zp"}, {"y"}, {}, ""};
  if (cc.bias) {
    std::vector<int32_t> b(cc.m);
    for (int64_t i = 0; i < cc.m; ++i) b[i] = static_cast<int32_t>(i * 977 % 4001) - 2000;
    g.initializers["b"] = Tensor::FromVector<int32_t>({cc.m}, b);
    node.inputs.push_back("b");
  }
  node.attributes = {Attribute::Ints("strides", cc.strides), Attribute::Ints("pads", cc.pads),
                     Attribute::Ints("dilations", cc.dilations), Attribute::Ints("kernel_shape", {cc.kh, cc.kw}),
                     Attribute::Int("group", cc.group)};
  g.nodes.push_back(node);
  return m;
}

// Group 1: conv_s8 (NCHW, requantized in the tile) on every ISA and thread
// count; gemm_s8 for weight zero points on panel16x4_s8 (VNNI, portable).
TEST(CpuQuantConv, MatchesTheReferenceBitForBit) {
  const ConvCase cases[] = {
      {"u8 3x3 stride 2 pad 1, per-channel, bias", DataType::kUInt8, 2, 5, 11, 9, 19, 3, 3, {2, 2}, {1, 1, 1, 1}, {1, 1}, true, true},
      {"s8 3x3 dilation 2, asymmetric pads", DataType::kInt8, 1, 7, 10, 13, 17, 3, 3, {1, 1}, {2, 0, 1, 3}, {2, 2}, false, false},
      {"u8 1x1", DataType::kUInt8, 3, 33, 6, 5, 40, 1, 1, {1, 1}, {0, 0, 0, 0}, {1, 1}, true, true},
      {"s8 1x1, 32 x 32", DataType::kInt8, 1, 24, 32, 32, 36, 1, 1, {1, 1}, {0, 0, 0, 0}, {1, 1}, true, true},
      {"u8 7x7 stride 2 pad 3 (a stem)", DataType::kUInt8, 1, 3, 23, 21, 16, 7, 7, {2, 2}, {3, 3, 3, 3}, {1, 1}, true, true},
      {"u8 3x3, weight zero points", DataType::kUInt8, 1, 6, 9, 8, 20, 3, 3, {1, 1}, {1, 1, 1, 1}, {1, 1}, true, true, 1, true},
      // Pointwise with few output channels: the VBMI window row from 32 positions a plane, the VNNI row
      // below (Silero VAD's decoder conv: 128 -> 1 channels on one position).
      {"s8 1x1 128 -> 1, one position", DataType::kInt8, 40, 128, 1, 1, 1, 1, 1, {1, 1}, {0, 0, 0, 0}, {1, 1}, true, true},
      {"u8 1x1 16 -> 3, 31 positions", DataType::kUInt8, 2, 16, 31, 1, 3, 1, 1, {1, 1}, {0, 0, 0, 0}, {1, 1}, true, true},
      {"u8 1x1 128 -> 1, 64 positions", DataType::kUInt8, 1, 128, 8, 8, 1, 1, 1, {1, 1}, {0, 0, 0, 0}, {1, 1}, false, true},
  };
  std::mt19937 rng(42);
  for (const ConvCase& cc : cases) {
    SCOPED_TRACE(cc.name);
    Model m = QLinearConvModel(cc, rng);
    const Tensor x = cc.x_type == DataType::kUInt8 ? RandomBytes<uint8_t>({cc.n, cc.c, cc.h, cc.w}, rng)
                                                   : RandomBytes<int8_t>({cc.n, cc.c, cc.h, cc.w}, rng);
    auto ref = Executor::Create(m, ExecutorOptions{1, "reference"});
    ASSERT_TRUE(ref.ok());
    TensorMap want;
    ASSERT_TRUE((*ref)->Run({{"x", x}}, &want).ok());
    // The data exercise the requantization, not only its saturation.
    const auto* bytes = static_cast<const uint8_t*>(want.at("y").raw_data());
    const std::set<uint8_t> distinct(bytes, bytes + want.at("y").numel());
    EXPECT_GT(distinct.size(), 20u);
    for (CpuIsa isa : testing::IsasOfThisCpu()) {
      ASSERT_TRUE(ForceIsa(isa).ok());
      const bool s8_panels = PreferredGemmS8Format(isa) == PackedFormat::kPanel16x4S8;
      for (int threads : {1, 2, 3}) {
        auto fast = Executor::Create(m, ExecutorOptions{threads, "cpu"});
        ASSERT_TRUE(fast.ok()) << fast.status().ToString();
        // A pointwise conv on the VBMI window row names the VNNI row it runs on small planes too.
        const bool pointwise_window = isa >= CpuIsa::kAvx512Vbmi && cc.kh == 1 && cc.kw == 1;
        EXPECT_EQ(testing::KernelOps((*fast)->NodeKernels().at(0).kernel),
                  cc.w_zero_points && s8_panels ? "gemm_s8" : pointwise_window ? "conv_s8+conv_s8" : "conv_s8")
            << CpuIsaName(isa);
        TensorMap got;
        ASSERT_TRUE((*fast)->Run({{"x", x}}, &got).ok());
        ASSERT_EQ(got.at("y").shape(), want.at("y").shape());
        EXPECT_TRUE(got.at("y").Equals(want.at("y"))) << CpuIsaName(isa) << ", " << threads << " threads";
      }
    }
    ResetIsa();
    // Not a constant weight: the reference kernel.
    Model plain = m;
    ValueInfo w;
    w.name = "w";
    w.dtype = DataType::kInt8;
    plain.graph.initializer_inputs.push_back(w);
    auto declined = Executor::Create(plain, ExecutorOptions{1, "cpu"});
    ASSERT_TRUE(declined.ok());
    EXPECT_EQ((*declined)->NodeKernels().at(0).kernel, "ref");
  }
}

// Depthwise QLinearConv (group = channels, kernels/cpu/quant_conv_depthwise.cc):
// bit for bit the reference for every thread count and ISA.
TEST(CpuQuantConv, DepthwiseMatchesTheReferenceBitForBit) {
  const ConvCase cases[] = {
      {"u8 3x3 stride 1 pad 1, per-channel, bias", DataType::kUInt8, 2, 13, 11, 9, 13, 3, 3, {1, 1}, {1, 1, 1, 1}, {1, 1}, true, true, 13},
      {"s8 3x3 stride 2 pad 1", DataType::kInt8, 3, 6, 15, 17, 6, 3, 3, {2, 2}, {1, 1, 1, 1}, {1, 1}, false, true, 6},
      {"u8 5x3 dilation 2, asymmetric pads, no bias", DataType::kUInt8, 1, 5, 14, 12, 5, 5, 3, {1, 2}, {2, 0, 1, 3}, {2, 2}, true, false, 5},
      {"s8 3x3 wide rows (full vectors and a tail)", DataType::kInt8, 1, 4, 5, 37, 4, 3, 3, {1, 1}, {1, 1, 1, 1}, {1, 1}, true, true, 4},
      {"u8 3x3 stride 3, dilation 2", DataType::kUInt8, 1, 3, 20, 41, 3, 3, 3, {3, 3}, {1, 2, 1, 1}, {1, 2}, false, true, 3},
      {"u8 3x3 stride 2, odd width", DataType::kUInt8, 2, 5, 19, 35, 5, 3, 3, {2, 2}, {1, 1, 1, 1}, {1, 1}, true, true, 5},
      {"u8 5x5 stride 2, TF same pads (EfficientNet)", DataType::kUInt8, 2, 6, 14, 14, 6, 5, 5, {2, 2}, {1, 1, 2, 2}, {1, 1}, true, true, 6},
      {"s8 5x5 on 7x7 planes", DataType::kInt8, 1, 8, 7, 7, 8, 5, 5, {1, 1}, {2, 2, 2, 2}, {1, 1}, true, true, 8},
      // Blocks of 16 channels and a tail (depthwise_s8_lanes), split over images and threads.
      {"u8 5x5 on 7x7 planes, 40 channels", DataType::kUInt8, 2, 40, 7, 7, 40, 5, 5, {1, 1}, {2, 2, 2, 2}, {1, 1}, true, true, 40},
      {"s8 3x3 stride 2 on 14x14, 33 channels", DataType::kInt8, 1, 33, 14, 14, 33, 3, 3, {2, 2}, {0, 0, 1, 1}, {1, 1}, true, false, 33},
  };
  std::mt19937 rng(7);
  const std::vector<CpuIsa> isas = testing::IsasOfThisCpu();
  for (const ConvCase& cc : cases) {
    SCOPED_TRACE(cc.name);
    Model m = QLinearConvModel(cc, rng);
    const Tensor x = cc.x_type == DataType::kUInt8 ? RandomBytes<uint8_t>({cc.n, cc.c, cc.h, cc.w}, rng)
                                                   : RandomBytes<int8_t>({cc.n, cc.c, cc.h, cc.w}, rng);
    auto ref = Executor::Create(m, ExecutorOptions{1, "reference"});
    ASSERT_TRUE(ref.ok());
    TensorMap want;
    ASSERT_TRUE((*ref)->Run({{"x", x}}, &want).ok());
    const auto* bytes = static_cast<const uint8_t*>(want.at("y").raw_data());
    EXPECT_GT(std::set<uint8_t>(bytes, bytes + want.at("y").numel()).size(), 20u);
    for (CpuIsa isa : isas) {
      ASSERT_TRUE(ForceIsa(isa).ok());
      for (int threads : {1, 2, 3}) {
        auto fast = Executor::Create(m, ExecutorOptions{threads, "cpu"});
        ASSERT_TRUE(fast.ok()) << fast.status().ToString();
        EXPECT_EQ(testing::KernelOps((*fast)->NodeKernels().at(0).kernel), "depthwise_s8");
        if (isa >= CpuIsa::kAvx512Vbmi)  // 16 channels per register from AVX-512 VBMI up
          EXPECT_EQ((*fast)->NodeKernels().at(0).kernel, "depthwise_s8_lanes_avx512vbmi");
        TensorMap got;
        ASSERT_TRUE((*fast)->Run({{"x", x}}, &got).ok());
        EXPECT_TRUE(got.at("y").Equals(want.at("y"))) << CpuIsaName(isa) << ", " << threads << " threads";
      }
    }
    ResetIsa();
  }
}

// 1-D QLinearConv (W [M, C/group, k], x [N, C, L]; Silero VAD's and other
// audio models' convolutions) on the same rows, run as [N, C, L, 1]: bit for
// bit the reference, group 1 (conv_s8 / gemm_s8) and depthwise.
TEST(CpuQuantConv, OneDimensionalMatchesTheReferenceBitForBit) {
  const ConvCase cases[] = {
      {"u8 k3 pad 1, per-channel, bias", DataType::kUInt8, 2, 33, 21, 1, 40, 3, 1, {1}, {1, 1}, {1}, true, true},
      {"s8 k5 stride 2, asymmetric pads", DataType::kInt8, 1, 16, 37, 1, 24, 5, 1, {2}, {2, 1}, {1}, false, true},
      {"u8 k3 dilation 2, no bias", DataType::kUInt8, 1, 8, 30, 1, 12, 3, 1, {1}, {2, 2}, {2}, true, false},
      {"u8 k1 (pointwise)", DataType::kUInt8, 2, 24, 17, 1, 20, 1, 1, {1}, {0, 0}, {1}, true, true},
      {"s8 k3 depthwise", DataType::kInt8, 2, 20, 25, 1, 20, 3, 1, {1}, {1, 1}, {1}, true, true, 20},
  };
  std::mt19937 rng(11);
  for (const ConvCase& cc : cases) {
    SCOPED_TRACE(cc.name);
    Model m = QLinearConvModel(cc, rng);
    Graph& g = m.graph;
    Tensor& w4 = g.initializers["w"];  // [M, C/g, k, 1] -> [M, C/g, k]: the same bytes
    Tensor w3(DataType::kInt8, {w4.dim(0), w4.dim(1), w4.dim(2)});
    std::memcpy(w3.raw_data(), w4.raw_data(), static_cast<size_t>(w4.numel()));
    w4 = std::move(w3);
    g.nodes[0].attributes = {Attribute::Ints("strides", cc.strides), Attribute::Ints("pads", cc.pads),
                             Attribute::Ints("dilations", cc.dilations), Attribute::Ints("kernel_shape", {cc.kh}),
                             Attribute::Int("group", cc.group)};
    const Tensor x = cc.x_type == DataType::kUInt8 ? RandomBytes<uint8_t>({cc.n, cc.c, cc.h}, rng)
                                                   : RandomBytes<int8_t>({cc.n, cc.c, cc.h}, rng);
    auto ref = Executor::Create(m, ExecutorOptions{1, "reference"});
    ASSERT_TRUE(ref.ok());
    TensorMap want;
    ASSERT_TRUE((*ref)->Run({{"x", x}}, &want).ok());
    ASSERT_EQ(want.at("y").rank(), 3u);
    const auto* bytes = static_cast<const uint8_t*>(want.at("y").raw_data());
    EXPECT_GT(std::set<uint8_t>(bytes, bytes + want.at("y").numel()).size(), 20u);
    for (CpuIsa isa : testing::IsasOfThisCpu()) {
      ASSERT_TRUE(ForceIsa(isa).ok());
      for (int threads : {1, 2}) {
        auto fast = Executor::Create(m, ExecutorOptions{threads, "cpu"});
        ASSERT_TRUE(fast.ok()) << fast.status().ToString();
        EXPECT_NE((*fast)->NodeKernels().at(0).kernel, "ref") << CpuIsaName(isa);
        TensorMap got;
        ASSERT_TRUE((*fast)->Run({{"x", x}}, &got).ok());
        ASSERT_EQ(got.at("y").shape(), want.at("y").shape());
        EXPECT_TRUE(got.at("y").Equals(want.at("y"))) << CpuIsaName(isa) << ", " << threads << " threads";
      }
    }
    ResetIsa();
  }
}

}  // namespace
}  // namespace sparq
