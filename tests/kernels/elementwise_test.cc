// Focused tests of the reference elementwise kernels (kernels/ref/elementwise*.cc):
// broadcasting runs under threads, integer edge cases, legacy attributes and
// error messages, beyond what ONNX's node tests cover.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "kernels/op_context.h"
#include "kernels/parallel.h"
#include "kernels/ref/broadcast.h"
#include "kernels/registry.h"
#include "sparq/graph.h"
#include "sparq/tensor.h"
#include "kernels/op_test_util.h"

namespace sparq {
namespace {

using testing::OpNode;
using testing::RunRefKernel;

// Runs the reference kernel of `op_type` at `opset` on `inputs` (an undefined
// tensor marks an absent optional input) and returns its first output.
StatusOr<Tensor> RunOp(const std::string& op_type, int opset, const std::vector<Tensor>& inputs,
                       std::vector<Attribute> attrs = {}, ThreadPool* pool = nullptr) {
  SPARQ_ASSIGN_OR_RETURN(std::vector<Tensor> outs, RunRefKernel(OpNode(op_type, std::move(attrs)), opset, inputs, 1, pool));
  return outs[0];
}

Tensor F32(Shape shape, std::vector<float> v) { return Tensor::FromVector<float>(std::move(shape), v); }

std::vector<double> Values(const Tensor& t) {
  std::vector<double> v;
  for (int64_t i = 0; i < t.numel(); ++i) v.push_back(t.GetAsDouble(i));
  return v;
}

Tensor Random(Shape shape, std::mt19937& rng) {
  std::uniform_real_distribution<float> dist(-4.0f, 4.0f);
  std::vector<float> v(static_cast<size_t>(NumElements(shape)));
  for (float& x : v) x = dist(rng);
  return Tensor::FromVector<float>(std::move(shape), v);
}

// Broadcast Sub (not commutative, so swapped operands would show) over shape
// pairs that collapse in different ways, with a pool whose chunks end in the
// middle of runs; compared with the plain odometer walk of broadcast.h.
TEST(ElementwiseBroadcast, MatchesOdometerUnderThreads) {
  ThreadPool pool(4);
  std::mt19937 rng(7);
  const std::vector<std::pair<Shape, Shape>> cases = {
      {{2, 64, 33, 17}, {64, 1, 1}},      // per-channel bias
      {{2, 64, 33, 17}, {2, 64, 33, 17}},  // equal shapes: one run
      {{}, {3, 40000}},                   // scalar A
      {{3, 40000}, {1}},                  // one-element B
      {{257, 1, 130}, {1, 129, 1}},       // both sides broadcast
      {{5, 1, 7, 1, 3000}, {4, 1, 6, 1}},
      {{0, 3}, {3}},                      // empty output
  };
  for (const auto& [sa, sb] : cases) {
    const Tensor a = Random(sa, rng), b = Random(sb, rng);
    auto got = RunOp("Sub", 13, {a, b}, {}, &pool);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    const Shape out = BroadcastShapes({sa, sb}).value();
    ASSERT_EQ(got->shape(), out);
    std::array<std::vector<int64_t>, 2> strides = {BroadcastStrides(sa, out), BroadcastStrides(sb, out)};
    const float* pa = a.data<float>();
    const float* pb = b.data<float>();
    const float* pg = got->data<float>();
    int64_t mismatches = 0;
    ForEachBroadcast<2>(out, strides, [&](int64_t i, const std::array<int64_t, 2>& off) {
      if (pg[i] != pa[off[0]] - pb[off[1]]) ++mismatches;
    });
    EXPECT_EQ(mismatches, 0) << ShapeToString(sa) << " - " << ShapeToString(sb);
  }
}

TEST(ElementwiseBroadcast, IncompatibleShapesNameBoth) {
  auto r = RunOp("Add", 14, {F32({2, 3}, {1, 2, 3, 4, 5, 6}), F32({2}, {1, 2})});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("[2, 3]"), std::string::npos) << r.status().message();
  EXPECT_NE(r.status().message().find("'n' (Add)"), std::string::npos) << r.status().message();
}

TEST(ElementwiseBroadcast, LegacyAxisAttribute) {
  // Opset 6: B of shape [3] aligned with A's dimension 1 of [2, 3, 2].
  std::vector<float> a(12, 1.0f);
  auto r = RunOp("Add", 6, {F32({2, 3, 2}, a), F32({3}, {10, 20, 30})}, {Attribute::Int("broadcast", 1), Attribute::Int("axis", 1)});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(Values(*r), (std::vector<double>{11, 11, 21, 21, 31, 31, 11, 11, 21, 21, 31, 31}));
  // Without broadcast=1 the shapes must be equal.
  auto bad = RunOp("Add", 6, {F32({2, 3, 2}, a), F32({3}, {10, 20, 30})});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("broadcast=0"), std::string::npos) << bad.status().message();
}

TEST(ElementwiseTypes, MismatchedInputTypesAreRejected) {
  auto r = RunOp("Mul", 14, {F32({1}, {1}), Tensor::FromVector<int64_t>({1}, {2})});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("int64"), std::string::npos) << r.status().message();
  auto s = RunOp("Sqrt", 13, {Tensor::FromVector<int32_t>({1}, {4})});
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("int32"), std::string::npos) << s.status().message();
}

TEST(ElementwiseTypes, Float16ComputedInFloat32) {
  Tensor a = F32({3}, {1.5f, -2.0f, 1000.0f}).CastTo(DataType::kFloat16);
  Tensor b = F32({3}, {0.25f, 3.0f, 24.0f}).CastTo(DataType::kFloat16);
  auto r = RunOp("Add", 14, {a, b});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->dtype(), DataType::kFloat16);
  EXPECT_EQ(Values(*r), (std::vector<double>{1.75, 1.0, 1024.0}));
}

TEST(ElementwiseInteger, DivisionTruncatesAndNeverTraps) {
  const int32_t kMin = std::numeric_limits<int32_t>::min();
  auto a = Tensor::FromVector<int32_t>({4}, {7, -7, 5, kMin});
  auto b = Tensor::FromVector<int32_t>({4}, {2, 2, 0, -1});
  auto r = RunOp("Div", 14, {a, b});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(Values(*r), (std::vector<double>{3, -3, 0, static_cast<double>(kMin)}));
}

TEST(ElementwiseInteger, ModSignFollowsDivisorOrDividend) {
  auto a = Tensor::FromVector<int64_t>({4}, {-7, 7, -7, 5});
  auto b = Tensor::FromVector<int64_t>({4}, {3, -3, -3, 0});
  auto python = RunOp("Mod", 13, {a, b});
  ASSERT_TRUE(python.ok()) << python.status().ToString();
  EXPECT_EQ(Values(*python), (std::vector<double>{2, -2, -1, 0}));
  auto c = RunOp("Mod", 13, {a, b}, {Attribute::Int("fmod", 1)});
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(Values(*c), (std::vector<double>{-1, 1, -1, 0}));
  auto bad = RunOp("Mod", 13, {F32({1}, {1}), F32({1}, {2})});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("fmod must be 1"), std::string::npos) << bad.status().message();
}

TEST(ElementwiseInteger, PowIsExactForInt64) {
  auto base = Tensor::FromVector<int64_t>({4}, {3, 2, -1, 5});
  auto exp = Tensor::FromVector<int64_t>({4}, {39, -1, -3, 0});
  auto r = RunOp("Pow", 15, {base, exp});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->dtype(), DataType::kInt64);
  const int64_t* p = r->data<int64_t>();
  EXPECT_EQ(p[0], 4052555153018976267LL);  // 3**39, not representable in a double
  EXPECT_EQ(p[1], 0);
  EXPECT_EQ(p[2], -1);
  EXPECT_EQ(p[3], 1);
}

TEST(ElementwiseInteger, BitShiftPastWidthGivesZero) {
  auto x = Tensor::FromVector<uint8_t>({3}, {1, 255, 16});
  auto s = Tensor::FromVector<uint8_t>({3}, {7, 8, 2});
  auto r = RunOp("BitShift", 11, {x, s}, {Attribute::String("direction", "LEFT")});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(Values(*r), (std::vector<double>{128, 0, 64}));
  auto bad = RunOp("BitShift", 11, {x, s}, {Attribute::String("direction", "left")});
  EXPECT_FALSE(bad.ok());
}

TEST(ElementwiseUnary, RoundHalfToEven) {
  auto r = RunOp("Round", 11, {F32({7}, {0.5f, 1.5f, 2.5f, -0.5f, -1.5f, 2.4999f, -2.6f})});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(Values(*r), (std::vector<double>{0, 2, 2, 0, -2, 2, -3}));
}

TEST(ElementwiseUnary, SigmoidAndSoftplusDoNotOverflow) {
  auto s = RunOp("Sigmoid", 13, {F32({2}, {-1000.0f, 1000.0f})});
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(Values(*s), (std::vector<double>{0, 1}));
  auto p = RunOp("Softplus", 1, {F32({2}, {-1000.0f, 1000.0f})});
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(Values(*p), (std::vector<double>{0, 1000}));
}

TEST(ElementwiseVariadic, MaxPropagatesNaNAndBroadcasts) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  auto r = RunOp("Max", 13, {F32({2, 1}, {nan, 1}), F32({3}, {0, 5, -1}), F32({}, {2})});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->shape(), (Shape{2, 3}));
  const std::vector<double> v = Values(*r);
  EXPECT_TRUE(std::isnan(v[0]) && std::isnan(v[1]) && std::isnan(v[2]));
  EXPECT_EQ(std::vector<double>(v.begin() + 3, v.end()), (std::vector<double>{2, 5, 2}));
}

TEST(ElementwiseVariadic, MeanOfThree) {
  auto r = RunOp("Mean", 13, {F32({2}, {1, 2}), F32({2}, {3, 4}), F32({1}, {5})});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(Values(*r), (std::vector<double>{3, static_cast<double>(11.0f / 3.0f)}));
}

TEST(ElementwiseClip, BoundsFromInputsAndAttributes) {
  const Tensor x = F32({4}, {-5, 0.5f, 3, 10});
  auto r = RunOp("Clip", 13, {x, Tensor(), Tensor::Scalar<float>(2)});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(Values(*r), (std::vector<double>{-5, 0.5, 2, 2}));
  auto legacy = RunOp("Clip", 6, {x}, {Attribute::Float("min", 0), Attribute::Float("max", 4)});
  ASSERT_TRUE(legacy.ok()) << legacy.status().ToString();
  EXPECT_EQ(Values(*legacy), (std::vector<double>{0, 0.5, 3, 4}));
  // min > max: every value becomes max.
  auto crossed = RunOp("Clip", 13, {x, Tensor::Scalar<float>(5), Tensor::Scalar<float>(1)});
  ASSERT_TRUE(crossed.ok());
  EXPECT_EQ(Values(*crossed), (std::vector<double>{1, 1, 1, 1}));
  auto ints = RunOp("Clip", 13, {Tensor::FromVector<int8_t>({3}, {-128, 0, 127}), Tensor::Scalar<int8_t>(-3)});
  ASSERT_TRUE(ints.ok()) << ints.status().ToString();
  EXPECT_EQ(Values(*ints), (std::vector<double>{-3, 0, 127}));
  auto bad = RunOp("Clip", 13, {x, F32({2}, {0, 1})});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("min must be a scalar"), std::string::npos) << bad.status().message();
}

TEST(ElementwisePRelu, SlopeBroadcastsOneWayOnly) {
  const Tensor x = F32({2, 2}, {-1, 2, -3, 4});
  auto r = RunOp("PRelu", 16, {x, F32({2}, {0.5f, 0.25f})});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(Values(*r), (std::vector<double>{-0.5, 2, -1.5, 4}));
  auto bad = RunOp("PRelu", 16, {F32({2}, {-1, 1}), F32({2, 2}, {1, 1, 1, 1})});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("does not broadcast"), std::string::npos) << bad.status().message();
  // Opset 6: a 1-D slope is per channel (dimension 1), not per last dimension.
  auto legacy = RunOp("PRelu", 6, {F32({1, 2, 3}, {-1, -1, -1, -1, -1, -1}), F32({2}, {1, 2})});
  ASSERT_TRUE(legacy.ok()) << legacy.status().ToString();
  EXPECT_EQ(Values(*legacy), (std::vector<double>{-1, -1, -1, -2, -2, -2}));
}

TEST(ElementwiseWhere, BroadcastsAnyElementSize) {
  const Tensor cond = Tensor::FromVector<bool>({2, 1}, {true, false});
  const Tensor x = F32({3}, {1, 2, 3}).CastTo(DataType::kFloat16);
  const Tensor y = Tensor::Scalar<float>(-1).CastTo(DataType::kFloat16);
  auto r = RunOp("Where", 16, {cond, x, y});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->dtype(), DataType::kFloat16);
  EXPECT_EQ(Values(*r), (std::vector<double>{1, 2, 3, -1, -1, -1}));
}

TEST(ElementwiseActivation, GeluVariants) {
  const Tensor x = F32({3}, {-1, 0, 2});
  auto exact = RunOp("Gelu", 20, {x});
  ASSERT_TRUE(exact.ok()) << exact.status().ToString();
  EXPECT_NEAR(Values(*exact)[0], -0.15865525, 1e-6);
  EXPECT_NEAR(Values(*exact)[2], 1.95449974, 1e-6);
  auto approx = RunOp("Gelu", 20, {x}, {Attribute::String("approximate", "tanh")});
  ASSERT_TRUE(approx.ok());
  EXPECT_NEAR(Values(*approx)[2], 1.95459769, 1e-6);
  auto bad = RunOp("Gelu", 20, {x}, {Attribute::String("approximate", "erf")});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("\"erf\""), std::string::npos) << bad.status().message();
}

}  // namespace
}  // namespace sparq
