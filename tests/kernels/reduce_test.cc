// Focused tests of the reference reduction, softmax, normalization and resize
// kernels (kernels/ref/{reduce,softmax,norm,resize}.cc): axes handling across
// opsets, empty reductions, numerical stability, hand-computed LayerNorm,
// legacy Resize-10 rounding, thread-count determinism and error messages.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "kernels/op_context.h"
#include "kernels/parallel.h"
#include "kernels/registry.h"
#include "sparq/graph.h"
#include "sparq/tensor.h"
#include "kernels/op_test_util.h"

namespace sparq {
namespace {

using testing::OpNode;
using testing::RunRefKernel;

// Runs the reference kernel of `op_type` at `opset` on `inputs` (an undefined
// tensor marks an absent optional input); returns all `num_outputs` outputs.
StatusOr<std::vector<Tensor>> RunOpAll(const std::string& op_type, int opset, const std::vector<Tensor>& inputs,
                                       std::vector<Attribute> attrs = {}, size_t num_outputs = 1,
                                       ThreadPool* pool = nullptr) {
  return RunRefKernel(OpNode(op_type, std::move(attrs), "my_node"), opset, inputs, num_outputs, pool);
}

StatusOr<Tensor> RunOp(const std::string& op_type, int opset, const std::vector<Tensor>& inputs,
                       std::vector<Attribute> attrs = {}, ThreadPool* pool = nullptr) {
  SPARQ_ASSIGN_OR_RETURN(std::vector<Tensor> outs, RunOpAll(op_type, opset, inputs, std::move(attrs), 1, pool));
  return outs[0];
}

std::vector<float> Values(const Tensor& t) {
  std::vector<float> v;
  for (int64_t i = 0; i < t.numel(); ++i) v.push_back(static_cast<float>(t.GetAsDouble(i)));
  return v;
}

// 0, 1, ..., 23 as a [2, 3, 4] float tensor.
Tensor Iota234() {
  std::vector<float> v(24);
  for (int i = 0; i < 24; ++i) v[i] = static_cast<float>(i);
  return Tensor::FromVector<float>({2, 3, 4}, v);
}

TEST(ReduceKernels, AxesInputWithNegativeAxesAndNoKeepdims) {
  // Sum over axes {-1, 0}: out[j] = sum_{i,k} x[i, j, k].
  auto out = RunOp("ReduceSum", 13, {Iota234(), Tensor::FromVector<int64_t>({2}, {-1, 0})}, {Attribute::Int("keepdims", 0)});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(out->shape(), (Shape{3}));
  EXPECT_EQ(Values(*out), (std::vector<float>{60, 92, 124}));
}

// Sums and means over a middle axis ([outer, n, inner] over n: LayerNorm
// statistics over channels) run neighbouring outputs together; each is still
// the double sum in input order, bit for bit, for inner wider than one group
// of columns, one column, and 1 or 3 threads; NaN and infinities propagate.
TEST(ReduceKernels, MiddleAxisSumsAreSummedInInputOrder) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(-1e4f, 1e4f);
  ThreadPool pool(3);
  for (const Shape& shape : {Shape{3, 37, 70}, Shape{2, 5, 1}, Shape{1, 512, 256}}) {
    std::vector<float> v(static_cast<size_t>(NumElements(shape)));
    for (float& f : v) f = dist(rng) * (rng() % 7 == 0 ? 1e-6f : 1.0f);
    v[5] = std::numeric_limits<float>::infinity();
    v[v.size() - 3] = std::numeric_limits<float>::quiet_NaN();
    const Tensor x = Tensor::FromVector<float>(shape, v);
    for (const char* op : {"ReduceSum", "ReduceMean"}) {
      SCOPED_TRACE(std::string(op) + " " + ShapeToString(shape));
      std::vector<Tensor> inputs = {x};
      std::vector<Attribute> attrs = {Attribute::Int("keepdims", 0)};
      if (std::string(op) == "ReduceSum") {
        inputs.push_back(Tensor::FromVector<int64_t>({1}, {1}));
      } else {
        attrs.push_back(Attribute::Ints("axes", {1}));
      }
      for (ThreadPool* p : {static_cast<ThreadPool*>(nullptr), &pool}) {
        auto out = RunOp(op, 13, inputs, attrs, p);
        ASSERT_TRUE(out.ok()) << out.status().ToString();
        ASSERT_EQ(out->shape(), (Shape{shape[0], shape[2]}));
        for (int64_t o = 0; o < shape[0]; ++o)
          for (int64_t j = 0; j < shape[2]; ++j) {
            double sum = 0.0;
            for (int64_t r = 0; r < shape[1]; ++r) sum += static_cast<double>(v[(o * shape[1] + r) * shape[2] + j]);
            const float want = std::string(op) == "ReduceSum" ? static_cast<float>(sum)
                                                                : static_cast<float>(sum / static_cast<double>(shape[1]));
            const float got = out->data<float>()[o * shape[2] + j];
            if (std::isnan(want)) {
              EXPECT_TRUE(std::isnan(got));
            } else {
              EXPECT_EQ(got, want) << "output " << o << ", " << j;
            }
          }
      }
    }
  }
}

TEST(ReduceKernels, AxesAttributeBeforeOpset18) {
  auto out = RunOp("ReduceMax", 13, {Iota234()}, {Attribute::Ints("axes", {1})});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(out->shape(), (Shape{2, 1, 4}));
  EXPECT_EQ(Values(*out), (std::vector<float>{8, 9, 10, 11, 20, 21, 22, 23}));
}

TEST(ReduceKernels, NoAxesReducesEverythingUnlessNoop) {
  auto all = RunOp("ReduceMean", 18, {Iota234()}, {Attribute::Int("keepdims", 0)});
  ASSERT_TRUE(all.ok()) << all.status().ToString();
  EXPECT_EQ(all->shape(), Shape{});
  EXPECT_FLOAT_EQ(Values(*all)[0], 11.5f);

  // noop_with_empty_axes with an empty axes input reduces over no axis:
  // ReduceL2 then is |x| elementwise.
  Tensor x = Tensor::FromVector<float>({2, 2}, {-3, 4, 0, -1});
  auto noop = RunOp("ReduceL2", 18, {x, Tensor(DataType::kInt64, {0})}, {Attribute::Int("noop_with_empty_axes", 1)});
  ASSERT_TRUE(noop.ok()) << noop.status().ToString();
  EXPECT_EQ(noop->shape(), (Shape{2, 2}));
  EXPECT_EQ(Values(*noop), (std::vector<float>{3, 4, 0, 1}));
}

TEST(ReduceKernels, EmptySetGivesIdentityOfTheOperation) {
  Tensor empty(DataType::kFloat32, {2, 0, 3});
  Tensor axes = Tensor::FromVector<int64_t>({1}, {1});
  auto max = RunOp("ReduceMax", 18, {empty, axes});
  ASSERT_TRUE(max.ok()) << max.status().ToString();
  EXPECT_EQ(max->shape(), (Shape{2, 1, 3}));
  EXPECT_EQ(Values(*max)[0], -std::numeric_limits<float>::infinity());
  auto prod = RunOp("ReduceProd", 18, {empty, axes});
  ASSERT_TRUE(prod.ok());
  EXPECT_EQ(Values(*prod)[0], 1.0f);
  auto sum = RunOp("ReduceSum", 13, {empty, axes});
  ASSERT_TRUE(sum.ok());
  EXPECT_EQ(Values(*sum)[0], 0.0f);
  auto lse = RunOp("ReduceLogSumExp", 18, {empty, axes});
  ASSERT_TRUE(lse.ok());
  EXPECT_EQ(Values(*lse)[0], -std::numeric_limits<float>::infinity());
  Tensor ints(DataType::kInt32, {0, 2});
  auto imin = RunOp("ReduceMin", 18, {ints, Tensor::FromVector<int64_t>({1}, {0})});
  ASSERT_TRUE(imin.ok());
  EXPECT_EQ(imin->data<int32_t>()[0], std::numeric_limits<int32_t>::max());
}

TEST(ReduceKernels, IntegerAndHalfInputs) {
  Tensor x = Tensor::FromVector<int32_t>({2, 2}, {1, -7, 3, 4});
  auto out = RunOp("ReduceL1", 18, {x, Tensor::FromVector<int64_t>({1}, {1})}, {Attribute::Int("keepdims", 0)});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(out->dtype(), DataType::kInt32);
  EXPECT_EQ(Values(*out), (std::vector<float>{8, 7}));

  Tensor h = Tensor::FromVector<float>({4}, {1, 2, 3, 4}).CastTo(DataType::kFloat16);
  auto mean = RunOp("ReduceMean", 13, {h});
  ASSERT_TRUE(mean.ok()) << mean.status().ToString();
  EXPECT_EQ(mean->dtype(), DataType::kFloat16);
  EXPECT_EQ(Values(*mean), (std::vector<float>{2.5f}));
}

TEST(ReduceKernels, OutOfRangeAxisNamesTheNode) {
  auto out = RunOp("ReduceMean", 13, {Iota234()}, {Attribute::Ints("axes", {3})});
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(out.status().message().find("my_node"), std::string::npos) << out.status().message();
  EXPECT_NE(out.status().message().find("3 is out of range for an input of rank 3"), std::string::npos)
      << out.status().message();

  auto dup = RunOp("ReduceSum", 13, {Iota234(), Tensor::FromVector<int64_t>({2}, {1, -2})});
  ASSERT_FALSE(dup.ok());
  EXPECT_NE(dup.status().message().find("more than once"), std::string::npos) << dup.status().message();

  auto arg = RunOp("ArgMax", 13, {Iota234()}, {Attribute::Int("axis", -4)});
  ASSERT_FALSE(arg.ok());
  EXPECT_NE(arg.status().message().find("my_node"), std::string::npos) << arg.status().message();
}

TEST(ReduceKernels, ResultsDoNotDependOnThreadCount) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(64 * 257);
  for (float& f : v) f = dist(rng);
  Tensor x = Tensor::FromVector<float>({64, 257}, v);
  ThreadPool pool(4);
  for (const char* op : {"ReduceSum", "ReduceLogSumExp", "ReduceL2"}) {
    for (int64_t axis : {0, 1}) {
      Tensor axes = Tensor::FromVector<int64_t>({1}, {axis});
      auto one = RunOp(op, 18, {x, axes}, {}, nullptr);
      auto many = RunOp(op, 18, {x, axes}, {}, &pool);
      ASSERT_TRUE(one.ok() && many.ok());
      EXPECT_TRUE(one->Equals(*many)) << op << " axis " << axis;
    }
  }
}

TEST(ArgKernels, SelectLastIndexOnTies) {
  Tensor x = Tensor::FromVector<int32_t>({2, 3}, {5, 1, 5, 2, 2, 0});
  auto first = RunOp("ArgMax", 13, {x}, {Attribute::Int("axis", 1), Attribute::Int("keepdims", 0)});
  auto last = RunOp("ArgMax", 13, {x}, {Attribute::Int("axis", 1), Attribute::Int("keepdims", 0), Attribute::Int("select_last_index", 1)});
  ASSERT_TRUE(first.ok() && last.ok());
  EXPECT_EQ(first->dtype(), DataType::kInt64);
  EXPECT_EQ(Values(*first), (std::vector<float>{0, 0}));
  EXPECT_EQ(Values(*last), (std::vector<float>{2, 1}));
}

TEST(SoftmaxKernels, LargeValuesStayFinite) {
  Tensor x = Tensor::FromVector<float>({2, 3}, {1000, 1001, 1002, -1000, -1001, -1002});
  auto sm = RunOp("Softmax", 13, {x});
  ASSERT_TRUE(sm.ok()) << sm.status().ToString();
  const std::vector<float> want = {0.09003057f, 0.24472847f, 0.66524096f};
  for (int i = 0; i < 3; ++i) {
    EXPECT_NEAR(Values(*sm)[i], want[i], 1e-6);
    EXPECT_NEAR(Values(*sm)[3 + i], want[2 - i], 1e-6);
  }
  auto lsm = RunOp("LogSoftmax", 13, {x});
  ASSERT_TRUE(lsm.ok());
  EXPECT_NEAR(Values(*lsm)[2], std::log(want[2]), 1e-5);
  EXPECT_NEAR(Values(*lsm)[5], std::log(want[0]), 1e-5);
}

TEST(SoftmaxKernels, Opset11CoercesTo2DAtAxis) {
  // axis=0 before opset 13 normalizes over all 6 elements; from 13 over each column.
  Tensor x = Tensor::FromVector<float>({2, 3}, {0, 0, 0, 0, 0, std::log(2.0f)});
  auto old = RunOp("Softmax", 11, {x}, {Attribute::Int("axis", 0)});
  auto now = RunOp("Softmax", 13, {x}, {Attribute::Int("axis", 0)});
  ASSERT_TRUE(old.ok() && now.ok());
  const std::vector<float> o = Values(*old), n = Values(*now);
  EXPECT_NEAR(o[0], 1.0f / 7.0f, 1e-6);
  EXPECT_NEAR(o[5], 2.0f / 7.0f, 1e-6);
  EXPECT_NEAR(n[0], 0.5f, 1e-6);
  EXPECT_NEAR(n[5], 2.0f / 3.0f, 1e-6);
  // Hardmax-11 with the default axis 1 on [2, 3] picks one element per row.
  auto hm = RunOp("Hardmax", 11, {x});
  ASSERT_TRUE(hm.ok());
  EXPECT_EQ(Values(*hm), (std::vector<float>{1, 0, 0, 0, 0, 1}));
}

TEST(NormKernels, LayerNormMatchesHandComputation) {
  // Row [1, 2, 3]: mean 2, variance 2/3. Row [4, 6, 8]: mean 6, variance 8/3.
  Tensor x = Tensor::FromVector<float>({2, 3}, {1, 2, 3, 4, 6, 8});
  Tensor scale = Tensor::FromVector<float>({3}, {1, 2, 0.5f});
  Tensor bias = Tensor::FromVector<float>({3}, {0, 1, -1});
  const float eps = 1e-3f;
  auto outs = RunOpAll("LayerNormalization", 17, {x, scale, bias}, {Attribute::Float("epsilon", eps)}, 3);
  ASSERT_TRUE(outs.ok()) << outs.status().ToString();
  const double inv0 = 1.0 / std::sqrt(2.0 / 3.0 + eps), inv1 = 1.0 / std::sqrt(8.0 / 3.0 + eps);
  const std::vector<double> want = {-1 * inv0 * 1 + 0, 0 * inv0 * 2 + 1, 1 * inv0 * 0.5 - 1,
                                    -2 * inv1 * 1 + 0, 0 * inv1 * 2 + 1, 2 * inv1 * 0.5 - 1};
  const std::vector<float> y = Values((*outs)[0]);
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(y[i], want[i], 1e-5) << i;
  EXPECT_EQ((*outs)[1].shape(), (Shape{2, 1}));
  EXPECT_EQ(Values((*outs)[1]), (std::vector<float>{2, 6}));
  EXPECT_NEAR(Values((*outs)[2])[0], inv0, 1e-5);
  EXPECT_NEAR(Values((*outs)[2])[1], inv1, 1e-5);
}

TEST(NormKernels, BatchNormRejectsMismatchedParameters) {
  Tensor x(DataType::kFloat32, {1, 3, 2, 2});
  Tensor c3 = Tensor::FromVector<float>({3}, {1, 1, 1});
  Tensor c2 = Tensor::FromVector<float>({2}, {1, 1});
  auto out = RunOp("BatchNormalization", 15, {x, c3, c3, c2, c3});
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("input_mean"), std::string::npos) << out.status().message();
}

TEST(ResizeKernels, Opset10NearestUsesAsymmetricFloorOrCeil) {
  // ONNX's old Resize-10 example: downscaling [1 2 3 4; 5 6 7 8] by 0.6 gives [1 3].
  std::vector<float> v = {1, 2, 3, 4, 5, 6, 7, 8};
  Tensor x = Tensor::FromVector<float>({1, 1, 2, 4}, v);
  Attribute mode;
  mode.name = "mode";
  mode.kind = Attribute::Kind::kString;
  mode.s = "nearest";
  auto down = RunOp("Resize", 10, {x, Tensor::FromVector<float>({4}, {1, 1, 0.6f, 0.6f})}, {mode});
  ASSERT_TRUE(down.ok()) << down.status().ToString();
  EXPECT_EQ(down->shape(), (Shape{1, 1, 1, 2}));
  EXPECT_EQ(Values(*down), (std::vector<float>{1, 3}));
  auto up = RunOp("Upsample", 9, {x, Tensor::FromVector<float>({4}, {1, 1, 1, 2})}, {mode});
  ASSERT_TRUE(up.ok()) << up.status().ToString();
  EXPECT_EQ(Values(*up), (std::vector<float>{1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7, 8, 8}));
}

TEST(ResizeKernels, LinearOnIntegersRoundsAndScalesAndSizesAreExclusive) {
  Tensor x = Tensor::FromVector<uint8_t>({1, 2}, {0, 255});
  Attribute mode;
  mode.name = "mode";
  mode.kind = Attribute::Kind::kString;
  mode.s = "linear";
  auto out = RunOp("Resize", 13, {x, Tensor(), Tensor(), Tensor::FromVector<int64_t>({2}, {1, 4})}, {mode});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  // half_pixel: x_ori = -0.25, 0.25, 0.75, 1.25 -> 0, 63.75, 191.25, 255.
  EXPECT_EQ(Values(*out), (std::vector<float>{0, 64, 191, 255}));

  auto both = RunOp("Resize", 13,
                    {x, Tensor(), Tensor::FromVector<float>({2}, {1, 2}), Tensor::FromVector<int64_t>({2}, {1, 4})},
                    {mode});
  ASSERT_FALSE(both.ok());
  EXPECT_NE(both.status().message().find("only one of 'scales' and 'sizes'"), std::string::npos);
}

}  // namespace
}  // namespace sparq
