// Focused tests of the reference tensor/shape kernels (kernels/ref/tensor_*.cc):
// edge cases and error messages beyond what ONNX's node tests cover.
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "kernels/op_context.h"
#include "kernels/registry.h"
#include "sparq/graph.h"
#include "sparq/tensor.h"
#include "kernels/op_test_util.h"

namespace sparq {
namespace {

using testing::OpNode;
using testing::RunRefKernel;

// Runs the reference kernel of `op_type` at `opset` on `inputs` (an undefined
// tensor marks an absent optional input) and returns its outputs.
StatusOr<std::vector<Tensor>> RunOp(const std::string& op_type, int opset, const std::vector<Tensor>& inputs,
                                    std::vector<Attribute> attrs = {}, int num_outputs = 1,
                                    const std::string& name = "n") {
  return RunRefKernel(OpNode(op_type, std::move(attrs), name), opset, inputs, static_cast<size_t>(num_outputs));
}

Tensor Iota(Shape shape) {
  std::vector<float> v(static_cast<size_t>(NumElements(shape)));
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i);
  return Tensor::FromVector<float>(std::move(shape), v);
}

Tensor Ints(std::vector<int64_t> v) {
  const int64_t n = static_cast<int64_t>(v.size());
  return Tensor::FromVector<int64_t>({n}, v);
}

std::vector<float> Floats(const Tensor& t) {
  std::vector<float> v;
  for (int64_t i = 0; i < t.numel(); ++i) v.push_back(static_cast<float>(t.GetAsDouble(i)));
  return v;
}

TEST(TensorOpsTest, ReshapeCopiesZeroAndInfersMinusOne) {
  auto out = RunOp("Reshape", 14, {Iota({2, 3, 4}), Ints({0, -1})});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ((*out)[0].shape(), (Shape{2, 12}));
  EXPECT_EQ(Floats((*out)[0]), Floats(Iota({2, 3, 4})));
}

TEST(TensorOpsTest, ReshapeAllowZeroKeepsZero) {
  Tensor empty(DataType::kFloat32, {0, 3});
  auto out = RunOp("Reshape", 14, {empty, Ints({3, 0})}, {Attribute::Int("allowzero", 1)});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ((*out)[0].shape(), (Shape{3, 0}));
  // Without allowzero the 0 copies input dimension 1 (3): 0 elements into [3, 3] fails.
  auto bad = RunOp("Reshape", 14, {empty, Ints({3, 0})});
  EXPECT_FALSE(bad.ok());
}

TEST(TensorOpsTest, ReshapeErrorNamesNodeAndBothShapes) {
  auto out = RunOp("Reshape", 13, {Iota({2, 3}), Ints({4, -1})}, {}, 1, "bad_reshape");
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), StatusCode::kInvalidArgument);
  const std::string& msg = out.status().message();
  EXPECT_NE(msg.find("'bad_reshape'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("[2, 3]"), std::string::npos) << msg;
  EXPECT_NE(msg.find("[4, -1]"), std::string::npos) << msg;
}

TEST(TensorOpsTest, ReshapeIsAViewOfTheInput) {
  Tensor x = Iota({6});
  auto out = RunOp("Reshape", 13, {x, Ints({2, 3})});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].raw_data(), x.raw_data());
}

TEST(TensorOpsTest, SliceNegativeStepWithClampedEnds) {
  const int64_t kMin = std::numeric_limits<int64_t>::min();
  auto out = RunOp("Slice", 13, {Iota({10}), Ints({-1}), Ints({kMin}), Ints({0}), Ints({-3})});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(Floats((*out)[0]), (std::vector<float>{9, 6, 3, 0}));
  // 2-D: reverse rows, every column from 1 on with INT_MAX end.
  const int64_t kMax = std::numeric_limits<int64_t>::max();
  out = RunOp("Slice", 13, {Iota({3, 3}), Ints({kMax, 1}), Ints({kMin, kMax}), Ints({0, 1}), Ints({-1, 1})});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ((*out)[0].shape(), (Shape{3, 2}));
  EXPECT_EQ(Floats((*out)[0]), (std::vector<float>{7, 8, 4, 5, 1, 2}));
}

// jax2tf's strided_slice: every axis from 0 to past its end, step 1. The
// output is the input's buffer (as Identity's); a slice that drops anything
// is a copy.
TEST(TensorOpsTest, SliceOfTheWholeInputIsAViewOfIt) {
  Tensor x = Iota({2, 3, 1});
  auto out = RunOp("Slice", 13, {x, Ints({0, 0, 0}), Ints({2147483647, 1000000000, 1}), Ints({0, 1, 2}), Ints({1, 1, 1})});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ((*out)[0].shape(), (Shape{2, 3, 1}));
  EXPECT_EQ((*out)[0].raw_data(), x.raw_data());
  out = RunOp("Slice", 13, {x, Ints({0}), Ints({2}), Ints({1})});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_NE((*out)[0].raw_data(), x.raw_data());
  EXPECT_EQ(Floats((*out)[0]), (std::vector<float>{0, 1, 3, 4}));
}

TEST(TensorOpsTest, SliceOpset1UsesAttributes) {
  auto out = RunOp("Slice", 9, {Iota({2, 4})},
                   {Attribute::Ints("starts", {1}), Attribute::Ints("ends", {1000}), Attribute::Ints("axes", {1})});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(Floats((*out)[0]), (std::vector<float>{1, 2, 3, 5, 6, 7}));
}

TEST(TensorOpsTest, PadReflectAndEdge) {
  Tensor x = Tensor::FromVector<int32_t>({2, 3}, {1, 2, 3, 4, 5, 6});
  auto out = RunOp("Pad", 13, {x, Ints({0, 2, 0, 1})}, {Attribute::String("mode", "reflect")});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ((*out)[0].shape(), (Shape{2, 6}));
  EXPECT_EQ(Floats((*out)[0]), (std::vector<float>{3, 2, 1, 2, 3, 2, 6, 5, 4, 5, 6, 5}));
  out = RunOp("Pad", 13, {x, Ints({1, 0, 0, 1})}, {Attribute::String("mode", "edge")});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(Floats((*out)[0]), (std::vector<float>{1, 2, 3, 3, 1, 2, 3, 3, 4, 5, 6, 6}));
}

TEST(TensorOpsTest, PadConstantWithCropAndAttributeForm) {
  // Opset 11: negative pads crop; the constant comes from input 2.
  auto out = RunOp("Pad", 11, {Iota({2, 3}), Ints({0, -1, 1, 1}), Tensor::Scalar<float>(9.0f)});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ((*out)[0].shape(), (Shape{3, 3}));
  EXPECT_EQ(Floats((*out)[0]), (std::vector<float>{1, 2, 9, 4, 5, 9, 9, 9, 9}));
  // Opset 2: pads and value are attributes.
  Attribute value;
  value.name = "value";
  value.kind = Attribute::Kind::kFloat;
  value.f = -1.0f;
  out = RunOp("Pad", 2, {Iota({2})}, {Attribute::Ints("pads", {1, 0}), value});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(Floats((*out)[0]), (std::vector<float>{-1, 0, 1}));
}

TEST(TensorOpsTest, PadWrapWithAxes) {
  auto out = RunOp("Pad", 19, {Iota({2, 3}), Ints({1, 2}), Tensor(), Ints({-1})}, {Attribute::String("mode", "wrap")});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(Floats((*out)[0]), (std::vector<float>{2, 0, 1, 2, 0, 1, 5, 3, 4, 5, 3, 4}));
}

TEST(TensorOpsTest, SplitUnevenLastChunkOpset18) {
  auto out = RunOp("Split", 18, {Iota({5})}, {Attribute::Int("num_outputs", 3)}, 3);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(Floats((*out)[0]), (std::vector<float>{0, 1}));
  EXPECT_EQ(Floats((*out)[1]), (std::vector<float>{2, 3}));
  EXPECT_EQ(Floats((*out)[2]), (std::vector<float>{4}));
  // Before opset 18 an uneven split is an error.
  EXPECT_FALSE(RunOp("Split", 13, {Iota({5})}, {}, 3).ok());
}

TEST(TensorOpsTest, TransposeDefaultReversesAndWorksOnFloat16) {
  Tensor x = Iota({2, 3, 4}).CastTo(DataType::kFloat16);
  auto out = RunOp("Transpose", 13, {x});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  const Tensor& y = (*out)[0];
  EXPECT_EQ(y.shape(), (Shape{4, 3, 2}));
  EXPECT_EQ(y.dtype(), DataType::kFloat16);
  EXPECT_EQ(y.GetAsDouble(1), 12.0);  // y[0, 0, 1] = x[1, 0, 0]
  EXPECT_EQ(y.GetAsDouble(2), 4.0);   // y[0, 1, 0] = x[0, 1, 0]
}

TEST(TensorOpsTest, GatherNegativeIndicesAndOutOfRange) {
  auto out = RunOp("Gather", 13, {Iota({3, 2}), Ints({-1, 0})});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(Floats((*out)[0]), (std::vector<float>{4, 5, 0, 1}));
  auto bad = RunOp("Gather", 13, {Iota({3, 2}), Ints({3})});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("3 is out of range [-3, 2]"), std::string::npos) << bad.status().message();
}

TEST(TensorOpsTest, SqueezeRejectsNonUnitAxis) {
  auto out = RunOp("Squeeze", 13, {Iota({1, 3}), Ints({1})}, {}, 1, "sq");
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("'sq'"), std::string::npos);
  out = RunOp("Squeeze", 11, {Iota({1, 3, 1})});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].shape(), (Shape{3}));
}

TEST(TensorOpsTest, CastToStringIsNotSupported) {
  auto out = RunOp("Cast", 13, {Iota({2})}, {Attribute::Int("to", 8)});
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), StatusCode::kNotSupported);
  out = RunOp("Cast", 13, {Tensor::FromVector<float>({3}, {-1.5f, 0.0f, 2.7f})}, {Attribute::Int("to", 9)});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].dtype(), DataType::kBool);
  EXPECT_EQ(Floats((*out)[0]), (std::vector<float>{1, 0, 1}));
}

TEST(TensorOpsTest, TopKKeepsLowerIndexOnTies) {
  Tensor x = Tensor::FromVector<float>({5}, {1, 3, 3, 2, 3});
  auto out = RunOp("TopK", 11, {x, Ints({3})}, {}, 2);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(Floats((*out)[0]), (std::vector<float>{3, 3, 3}));
  EXPECT_EQ((*out)[1].ToInt64Vector(), (std::vector<int64_t>{1, 2, 4}));
}

TEST(TensorOpsTest, ConcatMismatchNamesBothShapes) {
  auto out = RunOp("Concat", 13, {Iota({2, 3}), Iota({2, 4})}, {Attribute::Int("axis", 0)});
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("[2, 4]"), std::string::npos) << out.status().message();
  out = RunOp("Concat", 13, {Iota({2, 3}), Iota({2, 4})}, {Attribute::Int("axis", -1)});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].shape(), (Shape{2, 7}));
}

TEST(TensorOpsTest, ExpandAndTileOnBool) {
  Tensor b = Tensor::FromVector<bool>({2, 1}, {true, false});
  auto out = RunOp("Expand", 13, {b, Ints({2, 3})});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(Floats((*out)[0]), (std::vector<float>{1, 1, 1, 0, 0, 0}));
  out = RunOp("Tile", 13, {b, Ints({2, 2})});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ((*out)[0].shape(), (Shape{4, 2}));
  EXPECT_EQ(Floats((*out)[0]), (std::vector<float>{1, 1, 0, 0, 1, 1, 0, 0}));
}

}  // namespace
}  // namespace sparq

namespace sparq {
namespace {

// Pad with dimensions after the last padded one (copied as whole blocks):
// every mode against the element-by-element definition, a constant of its own
// value, float32 and int64, including a pad on the last dimension and none.
TEST(PadRef, TrailingUnpaddedDimensionsCopyAsBlocks) {
  const Shape shape = {2, 3, 2, 4};
  Tensor x(DataType::kFloat32, shape);
  for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = static_cast<float>(i) * 0.5f - 3.0f;
  const std::vector<std::vector<int64_t>> all_pads = {
      {0, 2, 0, 0, 1, 1, 0, 0}, {1, 0, 0, 0, 0, 2, 0, 0}, {0, 0, 1, 0, 0, 0, 2, 0}, {0, 1, 0, 1, 0, 0, 0, 2},
      {0, 0, 0, 0, 0, 0, 0, 0}};
  for (const char* mode : {"constant", "edge", "reflect", "wrap"}) {
    for (const auto& pads : all_pads) {
      SCOPED_TRACE(std::string(mode) + " pads " + std::to_string(pads[1]) + std::to_string(pads[2]));
      Attribute m;
      m.name = "mode", m.kind = Attribute::Kind::kString, m.s = mode;
      auto out = RunRefKernel(OpNode("Pad", {m}), 13,
                              {x, Tensor::FromVector<int64_t>({8}, pads), Tensor::Scalar<float>(7.25f)});
      ASSERT_TRUE(out.ok()) << out.status().ToString();
      const Tensor& y = out.value()[0];
      Shape ys(4);
      for (int d = 0; d < 4; ++d) ys[d] = shape[d] + pads[d] + pads[d + 4];
      ASSERT_EQ(y.shape(), ys);
      for (int64_t i = 0; i < y.numel(); ++i) {
        int64_t rest = i, src = 0, stride = 1;
        bool outside = false;
        for (int d = 3; d >= 0; --d) {
          const int64_t o = rest % ys[d], n = shape[d];
          rest /= ys[d];
          int64_t s = o - pads[d];
          if (std::string(mode) == "constant") outside |= s < 0 || s >= n;
          else if (std::string(mode) == "edge") s = std::min(std::max<int64_t>(s, 0), n - 1);
          else if (std::string(mode) == "wrap") s = ((s % n) + n) % n;
          else if (n == 1) s = 0;  // reflect: mirrored without the edge, period 2 (n - 1)
          else s = ((s % (2 * (n - 1))) + 2 * (n - 1)) % (2 * (n - 1)), s = s >= n ? 2 * (n - 1) - s : s;
          src += s * stride;
          stride *= n;
        }
        const float want = outside ? 7.25f : x.data<float>()[src];
        ASSERT_EQ(y.data<float>()[i], want) << "element " << i;
      }
    }
  }
}

}  // namespace
}  // namespace sparq
