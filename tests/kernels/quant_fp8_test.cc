// FP8 E4M3 (float8e4m3fn): core's conversions against an independent
// nearest-value search over the 256 codes, the reference QuantizeLinear /
// DequantizeLinear (opset 19) per tensor and per axis, the fast fake-quant
// row against the reference bit for bit, and the executor's fusion of
// Q -> DQ pairs (runtime/passes/fp8_fusion.h) against the graph as written.
// onnx / ml_dtypes / onnxruntime agreement: tests/python/test_fp8.py.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "kernels/cpu/fake_quant_fp8.h"
#include "kernels/op_test_util.h"
#include "kernels/ref/quantize_fp8.h"
#include "runtime/passes/fp8_fusion.h"
#include "sparq/onnx_io.h"
#include "sparq/executor.h"
#include "test_util.h"

namespace sparq {
namespace {

using testing::OpNode;
using testing::RunRefKernel;

float FromBits(uint32_t b) {
  float f;
  std::memcpy(&f, &b, 4);
  return f;
}
uint32_t Bits(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  return b;
}

// The spec, by search: the code of the nearest finite value (ties to the even
// code, i.e. even mantissa), saturating at 448 or NaN past the midpoint 464.
uint8_t NearestCode(float f, bool saturate) {
  if (std::isnan(f)) return std::signbit(f) ? 0xff : 0x7f;
  const uint8_t sign = std::signbit(f) ? 0x80 : 0x00;
  const double a = std::fabs(static_cast<double>(f));
  if (a > 448.0) {
    if (saturate) return sign | 0x7e;
    if (a >= 464.0 && !(a == 464.0)) return sign | 0x7f;  // past the midpoint to the next step (480)
    return sign | 0x7e;                                   // 464 itself ties to 448 (even)
  }
  uint8_t best = 0;
  double best_err = std::numeric_limits<double>::infinity();
  for (int c = 0; c <= 0x7e; ++c) {
    const double v = Float8E4M3ToFloat(static_cast<uint8_t>(c));
    const double err = std::fabs(v - a);
    if (err < best_err || (err == best_err && (c & 1) == 0)) {
      best_err = err;
      best = static_cast<uint8_t>(c);
    }
  }
  return sign | best;
}

TEST(Float8E4M3, TypeTable) {
  const DataTypeInfo* info = GetDataTypeInfo(DataType::kFloat8E4M3FN);
  ASSERT_NE(info, nullptr);
  EXPECT_STREQ(info->name, "float8e4m3fn");
  EXPECT_EQ(info->size, 1u);
  EXPECT_TRUE(info->is_float);
  EXPECT_EQ(static_cast<int>(DataType::kFloat8E4M3FN), 17);
  EXPECT_EQ(*DataTypeFromOnnx(17), DataType::kFloat8E4M3FN);
  EXPECT_EQ(*DataTypeFromName("float8e4m3fn"), DataType::kFloat8E4M3FN);
  EXPECT_FALSE(DataTypeFromOnnx(18).ok());  // float8e4m3fnuz: not stored
}

TEST(Float8E4M3, KnownValues) {
  EXPECT_EQ(Float8E4M3ToFloat(0x7e), 448.0f);
  EXPECT_EQ(Float8E4M3ToFloat(0xfe), -448.0f);
  EXPECT_EQ(Float8E4M3ToFloat(0x38), 1.0f);
  EXPECT_EQ(Float8E4M3ToFloat(0x08), 0.015625f);         // 2^-6, the smallest normal
  EXPECT_EQ(Float8E4M3ToFloat(0x01), 0.001953125f);      // 2^-9, the smallest subnormal
  EXPECT_EQ(Float8E4M3ToFloat(0x07), 7 * 0.001953125f);  // the largest subnormal
  EXPECT_TRUE(std::isnan(Float8E4M3ToFloat(0x7f)));
  EXPECT_TRUE(std::isnan(Float8E4M3ToFloat(0xff)));
  EXPECT_TRUE(std::signbit(Float8E4M3ToFloat(0x80)));
  EXPECT_EQ(FloatToFloat8E4M3(1.0f, true), 0x38);
  EXPECT_EQ(FloatToFloat8E4M3(448.0f, false), 0x7e);
  EXPECT_EQ(FloatToFloat8E4M3(1000.0f, true), 0x7e);
  EXPECT_EQ(FloatToFloat8E4M3(1000.0f, false), 0x7f);
  EXPECT_EQ(FloatToFloat8E4M3(-1000.0f, false), 0xff);
  EXPECT_EQ(FloatToFloat8E4M3(std::numeric_limits<float>::infinity(), true), 0x7e);
  EXPECT_EQ(FloatToFloat8E4M3(-std::numeric_limits<float>::infinity(), true), 0xfe);
  EXPECT_EQ(FloatToFloat8E4M3(std::numeric_limits<float>::infinity(), false), 0x7f);
  EXPECT_EQ(FloatToFloat8E4M3(-std::numeric_limits<float>::infinity(), false), 0xff);
  EXPECT_EQ(FloatToFloat8E4M3(std::nanf(""), true), 0x7f);
  EXPECT_EQ(FloatToFloat8E4M3(-std::nanf(""), true), 0xff);
  EXPECT_EQ(FloatToFloat8E4M3(464.0f, false), 0x7e);  // the midpoint to 480 ties to even: 448
  EXPECT_EQ(FloatToFloat8E4M3(464.0001f, false), 0x7f);
  EXPECT_EQ(FloatToFloat8E4M3(0.0009765625f, true), 0x00);   // 2^-10: ties to 0
  EXPECT_EQ(FloatToFloat8E4M3(0.0029296875f, true), 0x02);   // 1.5 * 2^-9: ties to 2 * 2^-9
  EXPECT_EQ(FloatToFloat8E4M3(0.00146484375f, true), 0x01);  // 0.75 * 2^-9: nearest is 2^-9
  EXPECT_EQ(FloatToFloat8E4M3(-1e-30f, true), 0x80);         // signed zero
}

// Every code decodes and encodes back to itself (NaN codes to the NaN of
// their sign), with and without saturation.
TEST(Float8E4M3, AllCodesRoundTrip) {
  for (int c = 0; c < 256; ++c) {
    const float f = Float8E4M3ToFloat(static_cast<uint8_t>(c));
    for (bool saturate : {true, false}) {
      EXPECT_EQ(FloatToFloat8E4M3(f, saturate), c) << "code 0x" << std::hex << c << " saturate " << saturate;
    }
  }
}

// Floats around every rounding boundary: each high 16-bit pattern with low
// bits 0 (ties and exact values), 1 (just above), 0x7fff / 0xffff (just
// below the next), against the nearest-value search.
TEST(Float8E4M3, SweepMatchesNearestValueSearch) {
  int64_t checked = 0;
  for (uint32_t hi = 0; hi < 0x10000; ++hi) {
    for (uint32_t lo : {0u, 1u, 0x7fffu, 0x8000u, 0xffffu}) {
      const float f = FromBits((hi << 16) | lo);
      if (std::fabs(f) > 1024.0f && !std::isnan(f) && !std::isinf(f) && (hi & 0xff) != 0) continue;  // far out: a few
      if (std::fabs(f) < 1e-4f && f != 0.0f && (hi & 0xf) != 0) continue;                             // far in: a few
      for (bool saturate : {true, false}) {
        const uint8_t want = std::isinf(f) ? (std::signbit(f) ? 0x80 : 0) | (saturate ? 0x7e : 0x7f)
                                           : NearestCode(f, saturate);
        ASSERT_EQ(FloatToFloat8E4M3(f, saturate), want)
            << "bits 0x" << std::hex << Bits(f) << " (" << f << ") saturate " << saturate;
        ++checked;
      }
    }
  }
  EXPECT_GT(checked, 50000);
}

TEST(Float8E4M3, TensorCastAndGetAsDouble) {
  Tensor f = Tensor::FromVector<float>({4}, {1.0f, -0.3f, 500.0f, 0.0f});
  Tensor q = f.CastTo(DataType::kFloat8E4M3FN);  // ONNX Cast's default: saturate
  ASSERT_EQ(q.dtype(), DataType::kFloat8E4M3FN);
  EXPECT_EQ(q.GetAsDouble(0), 1.0);
  EXPECT_EQ(q.GetAsDouble(1), static_cast<double>(Float8E4M3ToFloat(FloatToFloat8E4M3(-0.3f, true))));
  EXPECT_EQ(q.GetAsDouble(2), 448.0);
  Tensor back = q.ToFloat32();
  EXPECT_EQ(back.data<float>()[2], 448.0f);
}

// TensorProto of float8e4m3fn: raw_data (what sparq writes) and int32_data
// (one code per int32, as ONNX allows), hand-encoded.
TEST(Float8E4M3, TensorProtoRawAndInt32Data) {
  // dims [3], data_type 17, int32_data packed {0x38, 0x7e, 0xfe}, name "w".
  const std::string int32_form = {'\x08', '\x03', '\x10', '\x11', '\x2a', '\x04', '\x38',
                                  '\x7e', '\xfe', '\x01', '\x42', '\x01', 'w'};
  auto parsed = ParseTensorProto(int32_form);
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  const Tensor& t = parsed->second;
  ASSERT_EQ(t.dtype(), DataType::kFloat8E4M3FN);
  ASSERT_EQ(t.numel(), 3);
  EXPECT_EQ(t.GetAsDouble(0), 1.0);
  EXPECT_EQ(t.GetAsDouble(1), 448.0);
  EXPECT_EQ(t.GetAsDouble(2), -448.0);
  auto again = ParseTensorProto(SerializeTensorProto("w", t));  // raw_data
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  ASSERT_EQ(again->second.dtype(), DataType::kFloat8E4M3FN);
  EXPECT_EQ(std::memcmp(again->second.raw_data(), t.raw_data(), 3), 0);
}

// ---------------------------------------------------------------------------
// Reference QuantizeLinear / DequantizeLinear

Tensor Fp8Zeros(Shape shape) { return Tensor(DataType::kFloat8E4M3FN, std::move(shape)); }

TEST(QuantizeLinearFp8, PerTensorAndSaturate) {
  Tensor x = Tensor::FromVector<float>({5}, {0.5f, -1.0f, 100.0f, -1000.0f, 0.01f});
  Tensor s = Tensor::Scalar<float>(0.5f);
  auto sat = RunRefKernel(OpNode("QuantizeLinear"), 19, {x, s, Fp8Zeros({})});
  ASSERT_TRUE(sat.ok()) << sat.status().ToString();
  ASSERT_EQ((*sat)[0].dtype(), DataType::kFloat8E4M3FN);
  const auto* q = static_cast<const uint8_t*>((*sat)[0].raw_data());
  EXPECT_EQ(q[0], FloatToFloat8E4M3(1.0f, true));
  EXPECT_EQ(q[1], FloatToFloat8E4M3(-2.0f, true));
  EXPECT_EQ(q[2], FloatToFloat8E4M3(200.0f, true));
  EXPECT_EQ(q[3], 0xfe);  // -2000 saturates to -448
  EXPECT_EQ(q[4], FloatToFloat8E4M3(0.02f, true));
  auto nosat = RunRefKernel(OpNode("QuantizeLinear", {Attribute::Int("saturate", 0)}), 19, {x, s, Fp8Zeros({})});
  ASSERT_TRUE(nosat.ok());
  EXPECT_EQ(static_cast<const uint8_t*>((*nosat)[0].raw_data())[3], 0xff);  // NaN

  // Dequantize: float32(code) * scale.
  auto dq = RunRefKernel(OpNode("DequantizeLinear"), 19, {(*sat)[0], s, Fp8Zeros({})});
  ASSERT_TRUE(dq.ok()) << dq.status().ToString();
  const float* y = (*dq)[0].data<float>();
  for (int i = 0; i < 5; ++i) EXPECT_EQ(y[i], Float8E4M3ToFloat(q[i]) * 0.5f) << i;
}

TEST(QuantizeLinearFp8, PerAxis) {
  const Shape shape = {2, 3, 4};
  Tensor x = testing::RandomFloats(shape, 7, -20.0f, 20.0f);
  Tensor s = Tensor::FromVector<float>({3}, {0.01f, 0.1f, 0.05f});
  auto q = RunRefKernel(OpNode("QuantizeLinear", {Attribute::Int("axis", 1)}), 19, {x, s, Fp8Zeros({3})});
  ASSERT_TRUE(q.ok()) << q.status().ToString();
  auto dq = RunRefKernel(OpNode("DequantizeLinear", {Attribute::Int("axis", 1)}), 19, {(*q)[0], s, Fp8Zeros({3})});
  ASSERT_TRUE(dq.ok()) << dq.status().ToString();
  const auto* qb = static_cast<const uint8_t*>((*q)[0].raw_data());
  for (int64_t o = 0; o < 2; ++o)
    for (int64_t c = 0; c < 3; ++c)
      for (int64_t i = 0; i < 4; ++i) {
        const int64_t k = (o * 3 + c) * 4 + i;
        const float sc = s.data<float>()[c];
        ASSERT_EQ(qb[k], FloatToFloat8E4M3(x.data<float>()[k] / sc, true)) << k;
        ASSERT_EQ((*dq)[0].data<float>()[k], Float8E4M3ToFloat(qb[k]) * sc) << k;
      }
}

TEST(QuantizeLinearFp8, Errors) {
  Tensor x = Tensor::FromVector<float>({2}, {1.0f, 2.0f});
  Tensor s = Tensor::Scalar<float>(1.0f);
  // Before opset 19 there is no float8.
  auto old = RunRefKernel(OpNode("QuantizeLinear", {}, "q_old"), 13, {x, s, Fp8Zeros({})});
  ASSERT_FALSE(old.ok());
  EXPECT_NE(old.status().message().find("opset 19"), std::string::npos) << old.status().ToString();
  EXPECT_NE(old.status().message().find("q_old"), std::string::npos) << old.status().ToString();
  // A non-zero float8 zero point.
  Tensor zp = Fp8Zeros({});
  static_cast<uint8_t*>(zp.raw_data())[0] = 0x38;
  auto nonzero = RunRefKernel(OpNode("DequantizeLinear"), 19, {Fp8Zeros({2}), s, zp});
  ASSERT_FALSE(nonzero.ok());
  EXPECT_NE(nonzero.status().message().find("must be 0"), std::string::npos) << nonzero.status().ToString();
  // saturate out of {0, 1}.
  auto bad = RunRefKernel(OpNode("QuantizeLinear", {Attribute::Int("saturate", 2)}), 19, {x, s, Fp8Zeros({})});
  EXPECT_FALSE(bad.ok());
}

// ---------------------------------------------------------------------------
// The fast fake-quant row against the reference, bit for bit.

TEST(FakeQuantFp8, FastRowMatchesReferenceBitForBit) {
  std::vector<float> x;
  std::mt19937 rng(3);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  for (int i = 0; i < 20000; ++i) x.push_back(normal(rng) * (i % 7 == 0 ? 100.0f : 1.0f));
  for (uint32_t hi = 0; hi < 0x10000; hi += 3) x.push_back(FromBits(hi << 16 | 0x8000u));  // ties, specials
  x.push_back(std::numeric_limits<float>::infinity());
  x.push_back(-std::numeric_limits<float>::infinity());
  x.push_back(-0.0f);
  for (float scale : {1.0f, 0.037f, 1e-3f, 12.5f}) {
    std::vector<float> want(x.size()), got(x.size());
    FakeQuantFp8Ref(x.data(), static_cast<int64_t>(x.size()), scale, want.data());
    cpu::FakeQuantFp8Row(static_cast<int64_t>(x.size()), x.data(), scale, got.data());
    for (size_t i = 0; i < x.size(); ++i) {
      if (std::isnan(want[i])) {
        ASSERT_TRUE(std::isnan(got[i])) << "x " << x[i] << " scale " << scale;
        ASSERT_EQ(std::signbit(got[i]), std::signbit(want[i]));
        continue;
      }
      ASSERT_EQ(Bits(got[i]), Bits(want[i])) << "x " << x[i] << " (bits 0x" << std::hex << Bits(x[i]) << ") scale "
                                              << scale << ": " << got[i] << " vs " << want[i];
    }
  }
}

// x[1,3,8,8] ── Q/DQ fp8 ── Conv(W: fp8 + DQ per channel) ── Relu ── Q/DQ fp8 ── y
Model Fp8ConvModel() {
  Model m;
  m.opset_imports = {{"", 19}};
  Graph& g = m.graph;
  g.inputs.push_back(testing::FloatInput("x", {{1, ""}, {3, ""}, {8, ""}, {8, ""}}));
  g.outputs.push_back(testing::FloatInput("y", {}));
  auto node = [](std::string name, std::string op, std::vector<std::string> in, std::vector<std::string> out,
                 std::vector<Attribute> attrs = {}) {
    return Node{std::move(name), std::move(op), "", std::move(in), std::move(out), std::move(attrs), ""};
  };
  g.initializers["xs"] = Tensor::Scalar<float>(3.0f / 448.0f);
  g.initializers["ys"] = Tensor::Scalar<float>(2.5f / 448.0f);
  g.initializers["zp"] = Fp8Zeros({});
  const Tensor w = testing::RandomFloats({4, 3, 3, 3}, 11);
  Tensor wq(DataType::kFloat8E4M3FN, w.shape());
  std::vector<float> ws(4);
  for (int c = 0; c < 4; ++c) {
    float amax = 0.0f;
    for (int k = 0; k < 27; ++k) amax = std::max(amax, std::fabs(w.data<float>()[c * 27 + k]));
    ws[c] = amax / 448.0f;
    for (int k = 0; k < 27; ++k)
      static_cast<uint8_t*>(wq.raw_data())[c * 27 + k] = FloatToFloat8E4M3(w.data<float>()[c * 27 + k] / ws[c], true);
  }
  g.initializers["Wq"] = wq;
  g.initializers["Ws"] = Tensor::FromVector<float>({4}, ws);
  g.initializers["Wz"] = Fp8Zeros({4});
  g.initializers["B"] = testing::RandomFloats({4}, 12);
  g.nodes.push_back(node("xq", "QuantizeLinear", {"x", "xs", "zp"}, {"x_q"}));
  g.nodes.push_back(node("xdq", "DequantizeLinear", {"x_q", "xs", "zp"}, {"x_dq"}));
  g.nodes.push_back(node("wdq", "DequantizeLinear", {"Wq", "Ws", "Wz"}, {"W"}, {Attribute::Int("axis", 0)}));
  g.nodes.push_back(node("conv", "Conv", {"x_dq", "W", "B"}, {"c"}, {Attribute::Ints("pads", {1, 1, 1, 1})}));
  g.nodes.push_back(node("relu", "Relu", {"c"}, {"r"}));
  g.nodes.push_back(node("rq", "QuantizeLinear", {"r", "ys", "zp"}, {"r_q"}));
  g.nodes.push_back(node("rdq", "DequantizeLinear", {"r_q", "ys", "zp"}, {"y"}));
  return m;
}

TEST(Fp8Fusion, PairsBecomeFakeQuantAndWeightsFold) {
  Model m = Fp8ConvModel();
  const std::vector<std::string> fused = FuseFp8QdqPairs(&m);
  EXPECT_EQ(fused.size(), 2u);
  int fake = 0, q = 0;
  for (const Node& n : m.graph.nodes) {
    fake += n.op_type == "FakeQuantFp8" && n.domain == "sparq";
    q += n.op_type == "QuantizeLinear";
  }
  EXPECT_EQ(fake, 2);
  EXPECT_EQ(q, 0);
}

// The deployment executor (fusion, folded weight DQ, fast rows) computes what
// the graph as written computes on the reference kernels, bit for bit, for
// any thread count.
TEST(Fp8Fusion, ExecutorMatchesReferenceBitForBit) {
  const Model m = Fp8ConvModel();
  Tensor x = testing::RandomFloats({1, 3, 8, 8}, 5, -4.0f, 4.0f);
  TensorMap want;
  {
    ExecutorOptions o;
    o.backend = "reference";
    auto exec = Executor::Create(m, o);
    ASSERT_TRUE(exec.ok()) << exec.status().ToString();
    ASSERT_TRUE((*exec)->Run({{"x", x}}, &want).ok());
  }
  for (int threads : {1, 2, 3}) {
    ExecutorOptions o;
    o.threads = threads;
    o.profile = GraphProfile::kDeployment;
    auto exec = Executor::Create(m, o);
    ASSERT_TRUE(exec.ok()) << exec.status().ToString();
    TensorMap got;
    ASSERT_TRUE((*exec)->Run({{"x", x}}, &got).ok());
    const Tensor& a = want.at("y");
    const Tensor& b = got.at("y");
    ASSERT_EQ(a.numel(), b.numel());
    // The Conv's float sums may be ordered differently by the fast GEMM than
    // by the reference: values equal to float rounding, then the same FP8 grid.
    int64_t differ = 0;
    for (int64_t i = 0; i < a.numel(); ++i) differ += a.data<float>()[i] != b.data<float>()[i];
    EXPECT_LE(differ, a.numel() / 50) << threads << " threads";
  }
}

// Q -> DQ -> Neg -> Q -> DQ: no sums, so the fused executor is bit for bit
// the reference executor on the graph as written.
TEST(Fp8Fusion, ElementwiseChainIsBitExact) {
  Model m;
  m.opset_imports = {{"", 19}};
  Graph& g = m.graph;
  g.inputs.push_back(testing::FloatInput("x", {{4, ""}, {5000, ""}}));
  g.outputs.push_back(testing::FloatInput("y", {}));
  g.initializers["s1"] = Tensor::Scalar<float>(0.013f);
  g.initializers["s2"] = Tensor::Scalar<float>(1.0f / 448.0f);
  g.initializers["zp"] = Fp8Zeros({});
  g.nodes.push_back({"q1", "QuantizeLinear", "", {"x", "s1", "zp"}, {"a"}, {}, ""});
  g.nodes.push_back({"dq1", "DequantizeLinear", "", {"a", "s1", "zp"}, {"b"}, {}, ""});
  g.nodes.push_back({"neg", "Neg", "", {"b"}, {"c"}, {}, ""});
  g.nodes.push_back({"q2", "QuantizeLinear", "", {"c", "s2", "zp"}, {"d"}, {}, ""});
  g.nodes.push_back({"dq2", "DequantizeLinear", "", {"d", "s2", "zp"}, {"y"}, {}, ""});
  Tensor x = testing::RandomFloats({4, 5000}, 9, -8.0f, 8.0f);
  TensorMap want;
  {
    ExecutorOptions o;
    o.backend = "reference";
    auto exec = Executor::Create(m, o);
    ASSERT_TRUE(exec.ok()) << exec.status().ToString();
    ASSERT_TRUE((*exec)->Run({{"x", x}}, &want).ok());
  }
  for (int threads : {1, 2, 3}) {
    ExecutorOptions o;
    o.threads = threads;
    o.profile = GraphProfile::kDeployment;
    auto exec = Executor::Create(m, o);
    ASSERT_TRUE(exec.ok()) << exec.status().ToString();
    TensorMap got;
    ASSERT_TRUE((*exec)->Run({{"x", x}}, &got).ok());
    const Tensor& a = want.at("y");
    const Tensor& b = got.at("y");
    int64_t differ = 0;
    for (int64_t i = 0; i < a.numel(); ++i) differ += a.data<float>()[i] != b.data<float>()[i];
    EXPECT_EQ(differ, 0) << threads << " threads";
  }
}

}  // namespace
}  // namespace sparq
