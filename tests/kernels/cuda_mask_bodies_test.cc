// The per-element bodies of the CUDA mask rows (kernels/cuda/device_logic.h:
// comparisons, And / Or / Xor, Where) and the float16 reduction
// (device_f16.h), run by a host loop against kernels/ref, on any machine:
// all exact (comparisons of the same values, copies, one rounding).
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/cuda/device_logic.h"
#include "kernels/cuda/geometry.h"
#include "kernels/op_test_util.h"

namespace sparq {
namespace {

Tensor RunRef(const Node& node, int64_t opset, const std::vector<Tensor>& inputs) {
  auto out = testing::RunRefKernel(node, opset, inputs);
  EXPECT_TRUE(out.ok()) << out.status().ToString();
  return out.ok() ? (*out)[0] : Tensor();
}

template <typename T>
Tensor RandomOf(Shape shape, uint32_t seed, int lo, int hi) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> d(lo, hi);
  Tensor t(DataTypeOf<T>::value, std::move(shape));
  for (int64_t i = 0; i < t.numel(); ++i) t.data<T>()[i] = static_cast<T>(d(rng));
  return t;
}

template <typename T>
void ExpectLogicLikeReference(const char* op, cuda::LogicOp body, const Tensor& a, const Tensor& b) {
  const Tensor want = RunRef(testing::OpNode(op), 16, {a, b});
  ASSERT_EQ(want.dtype(), DataType::kBool) << op;
  cuda::BroadcastPlan plan;
  int64_t dims[cuda::kMaxRank];
  int rank = 0;
  ASSERT_TRUE(cuda::PlanBroadcast(a.shape().data(), static_cast<int>(a.rank()), b.shape().data(), static_cast<int>(b.rank()),
                                  &plan, dims, &rank)
                  .ok());
  ASSERT_EQ(Shape(dims, dims + rank), want.shape());
  const T* pa = static_cast<const T*>(a.raw_data());
  const T* pb = static_cast<const T*>(b.raw_data());
  for (int64_t i = 0; i < plan.numel; ++i)
    ASSERT_EQ(cuda::LogicElement<T>(i, body, pa, pb, plan), static_cast<const uint8_t*>(want.raw_data())[i]) << op << " [" << i << "]";
}

TEST(CudaMaskBodies, ComparisonsAndLogicMatchReference) {
  const Tensor fa = RandomOf<float>({2, 3, 5}, 1, -3, 3), fb = RandomOf<float>({3, 1}, 2, -3, 3);
  const Tensor ia = RandomOf<int64_t>({4, 6}, 3, -5, 5), ib = RandomOf<int64_t>({6}, 4, -5, 5);
  const struct {
    const char* op;
    cuda::LogicOp body;
  } cmp[] = {{"Equal", cuda::LogicOp::kEqual},     {"Greater", cuda::LogicOp::kGreater},
             {"GreaterOrEqual", cuda::LogicOp::kGreaterOrEqual}, {"Less", cuda::LogicOp::kLess},
             {"LessOrEqual", cuda::LogicOp::kLessOrEqual}};
  for (const auto& c : cmp) {
    ExpectLogicLikeReference<float>(c.op, c.body, fa, fb);
    ExpectLogicLikeReference<int64_t>(c.op, c.body, ia, ib);
    ExpectLogicLikeReference<cuda::Half>(c.op, c.body, fa.CastTo(DataType::kFloat16), fb.CastTo(DataType::kFloat16));
  }
  const Tensor ba = RandomOf<int32_t>({3, 4}, 5, 0, 1).CastTo(DataType::kBool), bb = RandomOf<int32_t>({4}, 6, 0, 1).CastTo(DataType::kBool);
  ExpectLogicLikeReference<uint8_t>("And", cuda::LogicOp::kAnd, ba, bb);
  ExpectLogicLikeReference<uint8_t>("Or", cuda::LogicOp::kOr, ba, bb);
  ExpectLogicLikeReference<uint8_t>("Xor", cuda::LogicOp::kXor, ba, bb);
  ExpectLogicLikeReference<uint8_t>("Equal", cuda::LogicOp::kEqual, ba, bb);
}

TEST(CudaMaskBodies, WhereBroadcastsThreeWays) {
  const Tensor c = RandomOf<int32_t>({2, 1, 4}, 7, 0, 1).CastTo(DataType::kBool);
  const Tensor x = RandomOf<float>({3, 1}, 8, -9, 9), y = RandomOf<float>({2, 3, 4}, 9, -9, 9);
  const Tensor want = RunRef(testing::OpNode("Where"), 16, {c, x, y});
  ASSERT_EQ(want.shape(), (Shape{2, 3, 4}));
  cuda::WherePlan p;
  p.rank = 3;
  p.numel = 24;
  const int64_t dims[3] = {2, 3, 4}, cs[3] = {4, 0, 1}, xs[3] = {0, 1, 0}, ys[3] = {12, 4, 1};
  for (int d = 0; d < 3; ++d) {
    p.dims[d] = dims[d];
    p.c_strides[d] = cs[d];
    p.x_strides[d] = xs[d];
    p.y_strides[d] = ys[d];
  }
  for (int64_t i = 0; i < 24; ++i)
    ASSERT_EQ(cuda::WhereElement<float>(i, static_cast<const uint8_t*>(c.raw_data()), x.data<float>(), y.data<float>(), p),
              want.data<float>()[i]) << i;
}

TEST(CudaMaskBodies, Float16ReduceSumIsTheReferences) {
  std::mt19937 rng(10);
  std::uniform_real_distribution<float> d(-4.0f, 4.0f);
  Tensor x(DataType::kFloat16, {2, 64, 24});
  for (int64_t i = 0; i < x.numel(); ++i) static_cast<uint16_t*>(x.raw_data())[i] = FloatToHalf(d(rng));
  const Tensor want = RunRef(testing::OpNode("ReduceSum"), 13, {x, Tensor::FromVector<int64_t>({1}, {1})});
  ASSERT_EQ(want.shape(), (Shape{2, 1, 24}));
  std::vector<int64_t> base, offsets;
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t c = 0; c < 24; ++c) base.push_back(b * 64 * 24 + c);
  for (int64_t r = 0; r < 64; ++r) offsets.push_back(r * 24);
  const auto* xp = static_cast<const cuda::Half*>(x.raw_data());
  for (size_t o = 0; o < base.size(); ++o) {
    cuda::Half got;
    cuda::StoreF32(&got, 0, cuda::ReduceSumMeanElement(static_cast<int64_t>(o), xp, base.data(), offsets.data(), 64, false));
    ASSERT_EQ(got.bits, static_cast<const uint16_t*>(want.raw_data())[o]) << o;
  }
}

}  // namespace
}  // namespace sparq
