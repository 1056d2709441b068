// ConvInteger on the INT8 GEMM (kernels/cpu/conv_integer.cc), run by the
// executor with constant weights: bit for bit kernels/ref's ConvInteger on
// every ISA of this CPU and thread count, and chosen for the shapes of
// onnxruntime's dynamic INT8 files of the real models (magika, basic-pitch).
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/dispatch.h"
#include "sparq/executor.h"
#include "test_util.h"
#include "tests/kernels/isa_sweep.h"

namespace sparq {
namespace {

// w_zero_point: absent, one value 0 (as onnxruntime writes it), one other value, one per channel.
enum class WZp { kAbsent, kZero, kPerTensor, kPerChannel };

struct IntConvCase {
  const char* name;
  DataType x_type, w_type;
  Shape x_shape, w_shape;  // rank 3 (1-D) or 4 (2-D)
  std::vector<int64_t> strides, pads, dilations;  // empty: the default
  int64_t group = 1;
  WZp w_zp = WZp::kPerTensor;
  bool x_zp = true;  // a graph input, as DynamicQuantizeLinear's is
  const char* auto_pad = nullptr;
};

Tensor RandomBytes(DataType type, const Shape& shape, std::mt19937& rng) {
  Tensor t(type, shape);
  std::uniform_int_distribution<int> d(0, 255);
  auto* bytes = static_cast<uint8_t*>(t.raw_data());
  for (int64_t i = 0; i < t.numel(); ++i) bytes[i] = static_cast<uint8_t>(d(rng));
  return t;
}

// A zero point of `type` near the middle of its range, varied by i.
Tensor ZeroPoint(DataType type, int i) {
  if (type == DataType::kUInt8) return Tensor::Scalar<uint8_t>(static_cast<uint8_t>(121 + i % 17));
  return Tensor::Scalar<int8_t>(static_cast<int8_t>(-6 + i % 13));
}

Model ConvIntegerModel(const IntConvCase& cc, std::mt19937& rng) {
  Model m;
  m.ir_version = 8;
  m.opset_imports = {{"", 13}};
  ValueInfo x;
  x.name = "x";
  x.dtype = cc.x_type;
  m.graph.inputs.push_back(x);
  Node node{"conv", "ConvInteger", "", {"x", "w"}, {"y"}, {}, ""};
  if (cc.x_zp) {
    ValueInfo z;
    z.name = "x_zp";
    z.dtype = cc.x_type;
    m.graph.inputs.push_back(z);
    node.inputs.push_back("x_zp");
  }
  ValueInfo y;
  y.name = "y";
  y.dtype = DataType::kInt32;
  m.graph.outputs.push_back(y);
  m.graph.initializers["w"] = RandomBytes(cc.w_type, cc.w_shape, rng);
  if (cc.w_zp != WZp::kAbsent) {
    const int64_t n = cc.w_zp == WZp::kPerChannel ? cc.w_shape[0] : 1;
    Tensor zp(cc.w_type, {n});
    for (int64_t i = 0; i < n; ++i)
      std::memcpy(static_cast<uint8_t*>(zp.raw_data()) + i, ZeroPoint(cc.w_type, static_cast<int>(i)).raw_data(), 1);
    if (cc.w_zp == WZp::kZero) std::memset(zp.raw_data(), 0, 1);
    m.graph.initializers["w_zp"] = zp;
    if (!cc.x_zp) node.inputs.push_back("");
    node.inputs.push_back("w_zp");
  }
  if (!cc.strides.empty()) node.attributes.push_back(Attribute::Ints("strides", cc.strides));
  if (!cc.pads.empty()) node.attributes.push_back(Attribute::Ints("pads", cc.pads));
  if (!cc.dilations.empty()) node.attributes.push_back(Attribute::Ints("dilations", cc.dilations));
  if (cc.auto_pad != nullptr) node.attributes.push_back(Attribute::String("auto_pad", cc.auto_pad));
  node.attributes.push_back(Attribute::Int("group", cc.group));
  m.graph.nodes.push_back(node);
  return m;
}

TensorMap Inputs(const IntConvCase& cc, std::mt19937& rng) {
  TensorMap in{{"x", RandomBytes(cc.x_type, cc.x_shape, rng)}};
  if (cc.x_zp) in["x_zp"] = ZeroPoint(cc.x_type, 5);
  return in;
}

// The path a case takes on `isa`: conv_s8 (NCHW, raw sums out) for group 1
// and int8 weights whose zero points are 0, or any int8 weights on the
// panel16x2_s16 ISAs; im2col + gemm_s8 otherwise.
std::string ExpectedPath(const IntConvCase& cc, CpuIsa isa) {
  const bool symmetric = cc.w_zp == WZp::kAbsent || cc.w_zp == WZp::kZero;
  const bool s16 = PreferredGemmS8Format(isa) == PackedFormat::kPanel16x2S16;
  return cc.group == 1 && cc.w_type == DataType::kInt8 && (symmetric || s16) ? "conv_s8" : "im2col_nhwc+gemm_s8";
}

TEST(CpuConvInteger, MatchesTheReferenceBitForBit) {
  const DataType u8 = DataType::kUInt8, s8 = DataType::kInt8;
  const IntConvCase cases[] = {
      {"u8 x s8, 3x3 stride 2 pad 1", u8, s8, {2, 5, 11, 9}, {19, 5, 3, 3}, {2, 2}, {1, 1, 1, 1}, {}, 1, WZp::kZero},
      {"u8 x s8, 3x3 stride 2 pad 1, w_zero_point 3", u8, s8, {2, 5, 11, 9}, {19, 5, 3, 3}, {2, 2}, {1, 1, 1, 1}, {}},
      {"s8 x s8, 5x5 pads 2, zero w_zero_point", s8, s8, {1, 6, 12, 10}, {11, 6, 5, 5}, {}, {2, 2, 2, 2}, {}, 1,
       WZp::kZero},
      {"s8 x s8, dilation 2, asymmetric pads, per-channel zero points", s8, s8, {1, 7, 10, 13}, {17, 7, 3, 3}, {1, 1},
       {2, 0, 1, 3}, {2, 2}, 1, WZp::kPerChannel},
      {"u8 x u8 weights, per-channel zero points", u8, u8, {1, 6, 9, 8}, {20, 6, 3, 3}, {}, {1, 1, 1, 1}, {}, 1,
       WZp::kPerChannel},
      {"s8 x u8 weights", s8, u8, {2, 4, 6, 7}, {9, 4, 2, 3}, {}, {}, {}},
      {"1-D, K = 3 (not a multiple of 4)", u8, s8, {2, 3, 17}, {5, 3, 1}, {}, {}, {}, 1, WZp::kZero},
      {"1-D, K = 3, w_zero_point", u8, s8, {2, 3, 17}, {5, 3, 1}, {}, {}, {}},
      {"1-D kernel 7 stride 3 dilation 2, pads 2 / 1", u8, s8, {1, 4, 40}, {6, 4, 7}, {3}, {2, 1}, {2}, 1, WZp::kZero},
      {"groups 3, per-channel zero points", u8, s8, {2, 6, 7, 8}, {9, 2, 3, 3}, {}, {1, 1, 1, 1}, {}, 3,
       WZp::kPerChannel},
      {"groups 2, dilation_w 2", s8, s8, {1, 4, 6, 9}, {6, 2, 2, 3}, {1, 2}, {0, 1, 1, 0}, {1, 2}, 2},
      {"one output position", u8, s8, {1, 8, 5, 5}, {4, 8, 5, 5}, {}, {}, {}, 1, WZp::kZero},
      {"one output position, w_zero_point", u8, s8, {1, 8, 5, 5}, {4, 8, 5, 5}, {}, {}, {}},
      {"1x1 read in place", u8, s8, {3, 33, 6, 5}, {40, 33, 1, 1}, {}, {}, {}, 1, WZp::kZero},
      {"1x1 read in place, w_zero_point", u8, s8, {3, 33, 6, 5}, {40, 33, 1, 1}, {}, {}, {}},
      {"few positions, images stacked", u8, s8, {5, 4, 3, 3}, {7, 4, 3, 3}, {}, {1, 1, 1, 1}, {}},
      {"K sliced (K = 1600), 20 channels", u8, s8, {1, 64, 9, 7}, {20, 64, 5, 5}, {}, {2, 2, 2, 2}, {}, 1, WZp::kZero},
      {"auto_pad SAME_UPPER stride 2", u8, s8, {1, 3, 7, 8}, {4, 3, 3, 3}, {2, 2}, {}, {}, 1, WZp::kPerTensor, true,
       "SAME_UPPER"},
      {"many positions: rows in chunks", u8, s8, {1, 2, 40, 50}, {3, 2, 3, 5}, {}, {1, 2, 1, 2}, {}},
      {"many positions, zero w_zero_point", u8, s8, {1, 2, 40, 50}, {3, 2, 3, 5}, {}, {1, 2, 1, 2}, {}, 1, WZp::kZero},
      {"one output column (magika's [L, 1])", u8, s8, {2, 16, 300, 1}, {24, 16, 5, 1}, {}, {}, {}, 1, WZp::kZero},
      {"no zero points", u8, s8, {1, 5, 6, 6}, {8, 5, 3, 3}, {}, {}, {}, 1, WZp::kAbsent, false},
  };
  std::mt19937 rng(22);
  for (const IntConvCase& cc : cases) {
    SCOPED_TRACE(cc.name);
    const Model m = ConvIntegerModel(cc, rng);
    const TensorMap in = Inputs(cc, rng);
    auto ref = Executor::Create(m, ExecutorOptions{1, "reference"});
    ASSERT_TRUE(ref.ok()) << ref.status().ToString();
    TensorMap want;
    const Status ran = (*ref)->Run(in, &want);
    ASSERT_TRUE(ran.ok()) << ran.ToString();
    testing::ForEachIsa([&](CpuIsa isa) {
      for (int threads : {1, 2, 3}) {
        auto fast = Executor::Create(m, ExecutorOptions{threads, "cpu"});
        ASSERT_TRUE(fast.ok()) << fast.status().ToString();
        EXPECT_EQ(testing::KernelOps((*fast)->NodeKernels().at(0).kernel), ExpectedPath(cc, isa));
        TensorMap got;
        const Status st = (*fast)->Run(in, &got);
        ASSERT_TRUE(st.ok()) << st.ToString();
        ASSERT_EQ(got.at("y").shape(), want.at("y").shape());
        EXPECT_TRUE(got.at("y").Equals(want.at("y"))) << threads << " threads";
      }
    });
  }
}

// Weights that are not a constant: the reference kernel, named as such.
TEST(CpuConvInteger, DeclinesWeightsThatAreNotConstant) {
  std::mt19937 rng(3);
  const IntConvCase cc{"", DataType::kUInt8, DataType::kInt8, {1, 3, 5, 5}, {4, 3, 3, 3}, {}, {}, {}};
  Model m = ConvIntegerModel(cc, rng);
  ValueInfo w;
  w.name = "w";
  w.dtype = DataType::kInt8;
  m.graph.initializer_inputs.push_back(w);
  auto exec = Executor::Create(m, ExecutorOptions{1, "cpu"});
  ASSERT_TRUE(exec.ok()) << exec.status().ToString();
  EXPECT_EQ((*exec)->NodeKernels().at(0).kernel, "ref");
  TensorMap got;
  EXPECT_TRUE((*exec)->Run(Inputs(cc, rng), &got).ok());
}

// The ConvInteger nodes of onnxruntime's quantize_dynamic files of magika and
// basic-pitch (their shapes at batch 1, attributes and w_zero_point 0 as
// written) take conv_s8, not the reference; two of them checked bit for bit
// on this ISA.
TEST(CpuConvInteger, TakesTheRealModelsNodes) {
  const DataType u8 = DataType::kUInt8, s8 = DataType::kInt8;
  const IntConvCase cases[] = {
      {"magika Conv_0", u8, s8, {1, 256, 512, 1}, {512, 256, 5, 1}, {1, 1}, {}, {1, 1}, 1, WZp::kZero},
      {"basic-pitch CQT stride 256", u8, s8, {1, 1, 1, 44100}, {36, 1, 1, 256}, {1, 256}, {}, {1, 1}, 1, WZp::kZero},
      {"basic-pitch CQT stride 2, one channel out", u8, s8, {1, 1, 1, 44098}, {1, 1, 1, 256}, {1, 2}, {}, {1, 1}, 1, WZp::kZero},
      {"basic-pitch conv2d_4 5x5 stride (1, 3)", u8, s8, {1, 8, 172, 264}, {32, 8, 5, 5}, {1, 3}, {2, 1, 2, 1}, {1, 1}, 1, WZp::kZero},
      {"basic-pitch conv2d_1 3x39", u8, s8, {1, 8, 172, 264}, {8, 8, 3, 39}, {1, 1}, {1, 19, 1, 19}, {1, 1}, 1, WZp::kZero},
      {"basic-pitch contours 5x5", u8, s8, {1, 8, 172, 264}, {1, 8, 5, 5}, {1, 1}, {2, 2, 2, 2}, {1, 1}, 1, WZp::kZero},
      {"basic-pitch conv2d_2 7x7 stride (1, 3)", u8, s8, {1, 1, 172, 264}, {32, 1, 7, 7}, {1, 3}, {3, 2, 3, 2}, {1, 1}, 1, WZp::kZero},
      {"basic-pitch conv2d_3 7x3", u8, s8, {1, 32, 172, 88}, {1, 32, 7, 3}, {1, 1}, {3, 1, 3, 1}, {1, 1}, 1, WZp::kZero},
      {"basic-pitch conv2d_5 3x3", u8, s8, {1, 33, 172, 88}, {1, 33, 3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1, WZp::kZero},
  };
  std::mt19937 rng(5);
  int index = 0;
  for (const IntConvCase& cc : cases) {
    SCOPED_TRACE(cc.name);
    const Model m = ConvIntegerModel(cc, rng);
    auto fast = Executor::Create(m, ExecutorOptions{2, "cpu"});
    ASSERT_TRUE(fast.ok()) << fast.status().ToString();
    EXPECT_EQ(testing::KernelOps((*fast)->NodeKernels().at(0).kernel), "conv_s8");
    const bool check = index == 1 || index == 7;  // two runs: the reference is slow on the large ones
    ++index;
    if (!check) continue;
    const TensorMap in = Inputs(cc, rng);
    auto ref = Executor::Create(m, ExecutorOptions{2, "reference"});
    ASSERT_TRUE(ref.ok());
    TensorMap want, got;
    ASSERT_TRUE((*ref)->Run(in, &want).ok());
    ASSERT_TRUE((*fast)->Run(in, &got).ok());
    EXPECT_TRUE(got.at("y").Equals(want.at("y")));
  }
}

}  // namespace
}  // namespace sparq
