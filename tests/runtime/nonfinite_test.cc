// FirstNonFiniteTensor: naming where a model first computes NaN or Inf.
#include <gtest/gtest.h>

#include <limits>

#include "runtime/nonfinite.h"
#include "test_util.h"

namespace sparq {
namespace {

// x[1,2] -> Mul(c) -> m -> Add(x) -> y, with c holding `scale` in both lanes.
Model ScaledSum(float scale) {
  Model m;
  m.opset_imports = {{"", 17}};
  Graph& g = m.graph;
  g.inputs.push_back(testing::FloatInput("x", {{1, ""}, {2, ""}}));
  g.outputs.push_back(testing::FloatInput("y", {{1, ""}, {2, ""}}));
  Tensor c(DataType::kFloat32, {2});
  c.data<float>()[0] = 1.0f;
  c.data<float>()[1] = scale;
  g.initializers["c"] = c;
  g.nodes.push_back({"mul", "Mul", "", {"x", "c"}, {"m"}, {}, ""});
  g.nodes.push_back({"add", "Add", "", {"m", "x"}, {"y"}, {}, ""});
  return m;
}

BatchFn OneBatch(float a, float b) {
  auto done = std::make_shared<bool>(false);
  return [=](TensorMap* batch) -> StatusOr<bool> {
    if (*done) return false;
    *done = true;
    Tensor x(DataType::kFloat32, {1, 2});
    x.data<float>()[0] = a;
    x.data<float>()[1] = b;
    (*batch)["x"] = x;
    return true;
  };
}

TEST(NonFinite, NamesTheFirstTensorAndNode) {
  // 3e38 * 10 overflows to +Inf in the Mul; the Add only inherits it.
  auto r = FirstNonFiniteTensor(ScaledSum(3e38f), OneBatch(1.0f, 10.0f), 1);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_NE(r->find("tensor 'm' (output of Mul node 'mul'): Inf at flat index 1 of batch 0"), std::string::npos) << *r;
}

TEST(NonFinite, NaNIsCalledNaN) {
  // 0 * Inf = NaN.
  auto r = FirstNonFiniteTensor(ScaledSum(std::numeric_limits<float>::infinity()), OneBatch(1.0f, 0.0f), 1);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_NE(r->find("'m' (output of Mul node 'mul'): NaN"), std::string::npos) << *r;
}

TEST(NonFinite, FiniteModelGivesEmptyString) {
  auto r = FirstNonFiniteTensor(ScaledSum(2.0f), OneBatch(1.0f, 3.0f), 2);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(*r, "");
}

}  // namespace
}  // namespace sparq
