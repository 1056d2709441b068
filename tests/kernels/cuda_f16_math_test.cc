// The float16 rows' shared host/device arithmetic (kernels/cuda/device_f16.h)
// against kernels/ref's float16 kernels, on the CPU (no GPU needed): the
// conversions bit for bit with core's, every per-element body within the
// named tolerances below (each is one float16 rounding of a float32 result,
// so most are exact here; the GPU's expf / erff / tanhf differ from glibc's
// by a few float32 ulp, which can move a float16 result by one ulp).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "kernels/cuda/device_f16.h"
#include "kernels/cuda/geometry.h"
#include "kernels/op_test_util.h"

namespace sparq {
namespace {

using cuda::Half;

// Relative to max(1, |want|), on the float16 values as floats.
constexpr float kF16Exact = 0.0f;            // one float32 operation rounded once: the reference's bits
constexpr float kF16Transcendental = 1e-3f;  // one float16 ulp (2^-10): device expf / erff / tanhf
constexpr float kF16Reduction = 1e-3f;       // softmax, layer norm, pooling averages: sums in another order
constexpr float kF16Conv = 2e-3f;            // depthwise fmaf chains vs the reference's products and sums

Tensor RandomHalf(Shape shape, uint32_t seed, float lo, float hi) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  Tensor t(DataType::kFloat16, std::move(shape));
  uint16_t* p = static_cast<uint16_t*>(t.raw_data());
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = FloatToHalf(dist(rng));
  return t;
}

const Half* HalfData(const Tensor& t) { return static_cast<const Half*>(t.raw_data()); }
// A float body's float32 result stored as the float16 kernels store it (one rounding).
Half Rounded(float v) {
  Half h;
  cuda::StoreF32(&h, 0, v);
  return h;
}

Tensor RunRef(const Node& node, int64_t opset, const std::vector<Tensor>& inputs) {
  auto out = testing::RunRefKernel(node, opset, inputs);
  EXPECT_TRUE(out.ok()) << out.status().ToString();
  return out.ok() ? (*out)[0] : Tensor();
}

// got (float16 bits) vs the reference's float16 output.
void ExpectHalvesNear(const std::vector<Half>& got, const Tensor& want, float tol, const std::string& what) {
  ASSERT_EQ(want.dtype(), DataType::kFloat16) << what;
  ASSERT_EQ(static_cast<int64_t>(got.size()), want.numel()) << what;
  const uint16_t* w = static_cast<const uint16_t*>(want.raw_data());
  int bad = 0;
  for (size_t i = 0; i < got.size() && bad < 5; ++i) {
    const float g = HalfToFloat(got[i].bits), v = HalfToFloat(w[i]);
    if (std::isnan(v) || std::isnan(g)) {
      bad += std::isnan(v) != std::isnan(g);
      EXPECT_EQ(std::isnan(g), std::isnan(v)) << what << " [" << i << "]";
      continue;
    }
    const bool ok = tol == 0.0f ? got[i].bits == w[i] || (g == 0.0f && v == 0.0f)
                                : std::fabs(g - v) <= tol * std::max(1.0f, std::fabs(v)) || g == v;
    if (!ok) ++bad;
    EXPECT_TRUE(ok) << what << " [" << i << "]: " << g << " vs " << v;
  }
}

TEST(CudaF16Math, ConversionsAreCoresBitForBit) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const float got = cuda::HalfToFloatValue(static_cast<uint16_t>(h)), want = HalfToFloat(static_cast<uint16_t>(h));
    uint32_t a, b;
    std::memcpy(&a, &got, 4);
    std::memcpy(&b, &want, 4);
    ASSERT_EQ(a, b) << "half 0x" << std::hex << h;
  }
  std::mt19937 rng(16);
  std::vector<float> xs = {0.0f, -0.0f, 65504.0f, 65520.0f, 65519.99f, 6.1e-5f, 5.96e-8f, 2.98e-8f, 2.99e-8f,
                           std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                           std::numeric_limits<float>::quiet_NaN(), 1e-45f, 3.4e38f};
  for (int i = 0; i < 400000; ++i) {
    uint32_t bits = rng();
    float f;
    std::memcpy(&f, &bits, 4);
    xs.push_back(f);
  }
  // Exact ties between neighbouring halves: round to even.
  for (uint32_t h = 0; h < 0x7bff; h += 7) xs.push_back(0.5f * (HalfToFloat(static_cast<uint16_t>(h)) + HalfToFloat(static_cast<uint16_t>(h + 1))));
  for (float x : xs) ASSERT_EQ(cuda::FloatToHalfValue(x), FloatToHalf(x)) << x;
}

TEST(CudaF16Math, UnaryBodiesMatchReferenceFloat16Kernels) {
  const Tensor x = RandomHalf({4000}, 1, -9.0f, 9.0f);
  struct Case {
    const char* op;
    int64_t opset;
    cuda::UnaryOp body;
    float tol;
    float lo, hi;  // the input range (Sqrt: non-negative)
  };
  const Case cases[] = {
      {"Relu", 14, cuda::UnaryOp::kRelu, kF16Exact, -9, 9},
      {"Neg", 13, cuda::UnaryOp::kNeg, kF16Exact, -9, 9},
      {"Abs", 13, cuda::UnaryOp::kAbs, kF16Exact, -9, 9},
      {"Sqrt", 13, cuda::UnaryOp::kSqrt, kF16Exact, 0, 60000},
      {"Reciprocal", 13, cuda::UnaryOp::kReciprocal, kF16Exact, -9, 9},
      {"Sigmoid", 13, cuda::UnaryOp::kSigmoid, kF16Transcendental, -12, 12},
      {"Tanh", 13, cuda::UnaryOp::kTanh, kF16Transcendental, -5, 5},
      {"Erf", 13, cuda::UnaryOp::kErf, kF16Transcendental, -4, 4},
      {"Exp", 13, cuda::UnaryOp::kExp, kF16Transcendental, -12, 11},
      {"Gelu", 20, cuda::UnaryOp::kGelu, kF16Transcendental, -6, 6},
  };
  uint32_t seed = 2;
  for (const Case& c : cases) {
    const Tensor in = RandomHalf({4000}, seed++, c.lo, c.hi);
    const Tensor want = RunRef(testing::OpNode(c.op), c.opset, {in});
    std::vector<Half> got(static_cast<size_t>(in.numel()));
    for (int64_t i = 0; i < in.numel(); ++i) got[static_cast<size_t>(i)] = Rounded(cuda::UnaryValue(c.body, cuda::LoadF32(HalfData(in), i), 0, 0, 0, 0));
    ExpectHalvesNear(got, want, c.tol, c.op);
  }
  // Clip with float16 bounds.
  Tensor lo(DataType::kFloat16, {}), hi(DataType::kFloat16, {});
  *static_cast<uint16_t*>(lo.raw_data()) = FloatToHalf(0.0f);
  *static_cast<uint16_t*>(hi.raw_data()) = FloatToHalf(6.0f);
  const Tensor want = RunRef(testing::OpNode("Clip"), 13, {x, lo, hi});
  std::vector<Half> got(static_cast<size_t>(x.numel()));
  for (int64_t i = 0; i < x.numel(); ++i) got[static_cast<size_t>(i)] = Rounded(cuda::UnaryValue(cuda::UnaryOp::kClip, cuda::LoadF32(HalfData(x), i), 0.0f, 6.0f, 0, 0));
  ExpectHalvesNear(got, want, kF16Exact, "Clip");
}

TEST(CudaF16Math, BinaryBodiesBroadcastLikeReference) {
  const Tensor a = RandomHalf({3, 1, 5, 8}, 20, -300.0f, 300.0f), b = RandomHalf({4, 1, 8}, 21, -3.0f, 3.0f);
  const char* ops[] = {"Add", "Sub", "Mul", "Div"};
  for (int op = 0; op < 4; ++op) {
    const Tensor want = RunRef(testing::OpNode(ops[op]), 14, {a, b});
    cuda::BroadcastPlan plan;
    int64_t dims[cuda::kMaxRank];
    int rank = 0;
    ASSERT_TRUE(cuda::PlanBroadcast(a.shape().data(), 4, b.shape().data(), 3, &plan, dims, &rank).ok());
    ASSERT_EQ(Shape(dims, dims + rank), want.shape());
    std::vector<Half> got(static_cast<size_t>(plan.numel));
    for (int64_t i = 0; i < plan.numel; ++i) got[static_cast<size_t>(i)] = Rounded(cuda::BinaryElement(i, static_cast<cuda::BinaryOp>(op), HalfData(a), HalfData(b), plan));
    ExpectHalvesNear(got, want, kF16Exact, ops[op]);
  }
}

TEST(CudaF16Math, SoftmaxAndLayerNormRowsMatchReference) {
  for (int64_t n : {1, 7, 128, 384}) {
    const Tensor x = RandomHalf({3, n}, 30 + static_cast<uint32_t>(n), -10.0f, 10.0f);
    const Tensor want = RunRef(testing::OpNode("Softmax"), 13, {x});
    std::vector<Half> got(static_cast<size_t>(x.numel()));
    for (int64_t r = 0; r < 3; ++r) cuda::SoftmaxRow(HalfData(x) + r * n, got.data() + r * n, n);
    ExpectHalvesNear(got, want, kF16Reduction, "Softmax n=" + std::to_string(n));
  }
  for (int64_t n : {1, 64, 384}) {
    const Tensor x = RandomHalf({4, n}, 40 + static_cast<uint32_t>(n), 90.0f, 110.0f);  // a large mean
    const Tensor s = RandomHalf({n}, 41, -2.0f, 2.0f), b = RandomHalf({n}, 42, -1.0f, 1.0f);
    const Tensor want = RunRef(testing::OpNode("LayerNormalization", {Attribute::Float("epsilon", 1e-5f)}), 17, {x, s, b});
    std::vector<Half> got(static_cast<size_t>(x.numel()));
    for (int64_t r = 0; r < 4; ++r) {
      cuda::LayerNormRow(HalfData(x) + r * n, HalfData(s), HalfData(b), static_cast<double>(1e-5f), n, got.data() + r * n);
    }
    ExpectHalvesNear(got, want, kF16Reduction, "LayerNormalization n=" + std::to_string(n));
  }
}

TEST(CudaF16Math, PoolingAndDepthwiseConvMatchReference) {
  const Tensor x = RandomHalf({2, 3, 9, 11}, 50, -4.0f, 4.0f);
  const std::vector<Attribute> attrs = {Attribute::Ints("kernel_shape", {3, 3}), Attribute::Ints("strides", {2, 2}),
                                        Attribute::Ints("pads", {1, 1, 1, 1})};
  cuda::Pool2dGeometry g;
  g.planes = 6;
  g.height = 9;
  g.width = 11;
  g.out_height = 5;
  g.out_width = 6;
  g.kernel_h = g.kernel_w = 3;
  g.stride_h = g.stride_w = 2;
  g.pad_top = g.pad_left = g.pad_bottom = g.pad_right = 1;
  const int64_t n_out = g.planes * g.out_height * g.out_width;
  for (bool max : {true, false}) {
    const Tensor want = RunRef(testing::OpNode(max ? "MaxPool" : "AveragePool", attrs), 19, {x});
    std::vector<Half> got(static_cast<size_t>(n_out));
    for (int64_t i = 0; i < n_out; ++i)
      got[static_cast<size_t>(i)] = Rounded(max ? cuda::Pool2dValue<true>(i, HalfData(x), g) : cuda::Pool2dValue<false>(i, HalfData(x), g));
    ExpectHalvesNear(got, want, max ? kF16Exact : kF16Reduction, max ? "MaxPool" : "AveragePool");
  }
  const Tensor w = RandomHalf({3, 1, 3, 3}, 51, -1.0f, 1.0f), bias = RandomHalf({3}, 52, -1.0f, 1.0f);
  const Tensor want = RunRef(testing::OpNode("Conv", {Attribute::Int("group", 3), Attribute::Ints("kernel_shape", {3, 3}),
                                                      Attribute::Ints("strides", {2, 2}), Attribute::Ints("pads", {1, 1, 1, 1})}),
                             11, {x, w, bias});
  cuda::Conv2dGeometry c;
  c.batch = 2;
  c.channels = 3;
  c.height = 9;
  c.width = 11;
  c.out_channels = 3;
  c.out_height = 5;
  c.out_width = 6;
  c.kernel_h = c.kernel_w = 3;
  c.stride_h = c.stride_w = 2;
  c.pad_top = c.pad_left = 1;
  std::vector<Half> got(static_cast<size_t>(want.numel()));
  for (int64_t i = 0; i < want.numel(); ++i) got[static_cast<size_t>(i)] = Rounded(cuda::DepthwiseConvValue(i, HalfData(x), HalfData(w), HalfData(bias), c));
  ExpectHalvesNear(got, want, kF16Conv, "depthwise Conv");
}

TEST(CudaF16Math, CastsToAndFromFloat16AreTheReferencesBits) {
  struct Type {
    DataType type;
    int code;
    int64_t onnx;  // Cast's `to`
  };
  const Type types[] = {{DataType::kFloat32, cuda::kCastF32, 1}, {DataType::kInt32, cuda::kCastI32, 6},
                        {DataType::kInt64, cuda::kCastI64, 7},   {DataType::kInt8, cuda::kCastI8, 3},
                        {DataType::kUInt8, cuda::kCastU8, 2},    {DataType::kBool, cuda::kCastBool, 9}};
  Tensor h = RandomHalf({3000}, 60, -70000.0f, 70000.0f);  // past float16's range: infinities
  uint16_t* hp = static_cast<uint16_t*>(h.raw_data());
  hp[0] = 0x7e00;  // NaN
  hp[1] = 0x8000;  // -0
  for (int i = 2; i < 300; ++i) hp[i] = FloatToHalf(static_cast<float>(i - 150) * 0.75f);  // small values for the 8-bit types
  for (const Type& t : types) {
    SCOPED_TRACE(DataTypeName(t.type));
    // float16 -> t
    const Tensor want = RunRef(testing::OpNode("Cast", {Attribute::Int("to", t.onnx)}), 19, {h});
    ASSERT_EQ(want.dtype(), t.type);
    std::vector<uint8_t> got(static_cast<size_t>(want.nbytes()));
    for (int64_t i = 0; i < h.numel(); ++i) cuda::CastHalfElement(i, h.raw_data(), cuda::kCastF16, got.data(), t.code);
    for (int64_t i = 0; i < want.numel(); ++i) {
      const size_t bytes = DataTypeSize(t.type);
      if (t.type == DataType::kFloat32 && std::isnan(want.data<float>()[i])) continue;
      ASSERT_EQ(std::memcmp(got.data() + i * bytes, static_cast<const uint8_t*>(want.raw_data()) + i * bytes, bytes), 0) << i;
    }
    // t -> float16 (the values just cast, so each type's range is exercised)
    const Tensor back = RunRef(testing::OpNode("Cast", {Attribute::Int("to", 10)}), 19, {want});
    std::vector<Half> got_back(static_cast<size_t>(want.numel()));
    for (int64_t i = 0; i < want.numel(); ++i) cuda::CastHalfElement(i, want.raw_data(), t.code, got_back.data(), cuda::kCastF16);
    ExpectHalvesNear(got_back, back, kF16Exact, "Cast to float16");
  }
}

}  // namespace
}  // namespace sparq
