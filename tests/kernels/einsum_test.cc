// Einsum: the equation parser (kernels/ref/einsum.h) and the reference
// kernel against plain loops: contractions, transposes, diagonals,
// ellipsis broadcasting, the implicit output, integer wrapping, errors.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/op_test_util.h"
#include "kernels/parallel.h"
#include "kernels/ref/einsum.h"
#include "sparq/graph.h"
#include "sparq/tensor.h"

namespace sparq {
namespace {

using testing::OpNode;
using testing::RunRefKernel;

// Float32 results against sums in double: relative to 1 + |want|.
constexpr double kEinsumF32Tol = 1e-6;

Tensor Random(const Shape& shape, uint32_t seed) {
  Tensor t(DataType::kFloat32, shape);
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = dist(gen);
  return t;
}

StatusOr<Tensor> RunEinsum(const std::string& equation, const std::vector<Tensor>& inputs, ThreadPool* pool = nullptr) {
  SPARQ_ASSIGN_OR_RETURN(std::vector<Tensor> out,
                         RunRefKernel(OpNode("Einsum", {Attribute::String("equation", equation)}), 12, inputs, 1, pool));
  return out[0];
}

void ExpectNear(const Tensor& got, const Shape& shape, const std::vector<double>& want, const std::string& what) {
  ASSERT_EQ(got.shape(), shape) << what;
  ASSERT_EQ(static_cast<size_t>(got.numel()), want.size()) << what;
  for (size_t i = 0; i < want.size(); ++i) {
    ASSERT_NEAR(got.data<float>()[i], want[i], kEinsumF32Tol * (1.0 + std::abs(want[i]))) << what << ": element " << i;
  }
}

TEST(EinsumParse, ExplicitImplicitAndEllipsis) {
  StatusOr<EinsumSpec> s = ParseEinsum("ij,jk->ik", {2, 2});
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->operands[0], (std::vector<int>{'i', 'j'}));
  EXPECT_EQ(s->output, (std::vector<int>{'i', 'k'}));
  // Implicit: the letters that occur once, in character order (upper case first).
  s = ParseEinsum("kj, jI", {2, 2});
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->output, (std::vector<int>{'I', 'k'}));
  // Ellipses align to the right: the rank-1 one is the widest one's last dim.
  s = ParseEinsum("...ij,...jk", {4, 3});
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->ellipsis_rank, 2);
  EXPECT_EQ(s->operands[1], (std::vector<int>{kEinsumEllipsisLabel + 1, 'j', 'k'}));
  EXPECT_EQ(s->output, (std::vector<int>{kEinsumEllipsisLabel, kEinsumEllipsisLabel + 1, 'i', 'k'}));
  // An explicit output without the ellipsis sums its dims.
  s = ParseEinsum("...i->i", {3});
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->output, (std::vector<int>{'i'}));
}

TEST(EinsumParse, ErrorsNameTheTerm) {
  auto message = [](const std::string& eq, std::vector<int64_t> ranks) {
    StatusOr<EinsumSpec> s = ParseEinsum(eq, ranks);
    EXPECT_FALSE(s.ok()) << eq;
    return s.ok() ? std::string() : s.status().message();
  };
  EXPECT_NE(message("ij,jk->ik", {2}).find("2 input term(s) for 1 input(s)"), std::string::npos);
  EXPECT_NE(message("ij->i", {3}).find("term 0 'ij': 2 letter(s) for an input of rank 3"), std::string::npos);
  EXPECT_NE(message("i1->i", {2}).find("'1' is not a letter"), std::string::npos);
  EXPECT_NE(message("i..j->i", {2}).find("'.' outside an ellipsis"), std::string::npos);
  EXPECT_NE(message("...i...->i", {2}).find("more than one ellipsis"), std::string::npos);
  EXPECT_NE(message("ij->k", {2}).find("'k' is in no input"), std::string::npos);
  EXPECT_NE(message("ij->ii", {2}).find("'i' appears twice"), std::string::npos);
  EXPECT_NE(message("ijk...->i", {2}).find("3 letter(s) and an ellipsis for an input of rank 2"), std::string::npos);
}

TEST(Einsum, GroupedLinearAsDeepFilterNetWritesIt) {
  // btgi,gih->btgh: one [i, h] matrix per group g (DeepFilterNet's GroupedLinear).
  const int64_t B = 2, T = 3, G = 4, I = 5, H = 6;
  Tensor x = Random({B, T, G, I}, 1), w = Random({G, I, H}, 2);
  ThreadPool pool(2);
  StatusOr<Tensor> y = RunEinsum("btgi,gih->btgh", {x, w}, &pool);
  ASSERT_TRUE(y.ok()) << y.status().ToString();
  std::vector<double> want;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < T; ++t)
      for (int64_t g = 0; g < G; ++g)
        for (int64_t h = 0; h < H; ++h) {
          double s = 0;
          for (int64_t i = 0; i < I; ++i)
            s += double(x.data<float>()[((b * T + t) * G + g) * I + i]) * w.data<float>()[(g * I + i) * H + h];
          want.push_back(s);
        }
  ExpectNear(*y, {B, T, G, H}, want, "btgi,gih->btgh");
  // Same bits for one thread and two.
  StatusOr<Tensor> y1 = RunEinsum("btgi,gih->btgh", {x, w});
  ASSERT_TRUE(y1.ok());
  EXPECT_EQ(0, std::memcmp(y1->data<float>(), y->data<float>(), y->numel() * sizeof(float)));
}

TEST(Einsum, TransposeTraceDiagonalAndSum) {
  Tensor a = Random({3, 3}, 3);
  const float* p = a.data<float>();
  StatusOr<Tensor> y = RunEinsum("ij->ji", {a});
  ASSERT_TRUE(y.ok()) << y.status().ToString();
  std::vector<double> want;
  for (int j = 0; j < 3; ++j)
    for (int i = 0; i < 3; ++i) want.push_back(p[i * 3 + j]);
  ExpectNear(*y, {3, 3}, want, "transpose");
  y = RunEinsum("ii", {a});  // implicit: the trace, a scalar
  ASSERT_TRUE(y.ok()) << y.status().ToString();
  ExpectNear(*y, {}, {double(p[0]) + p[4] + p[8]}, "trace");
  y = RunEinsum("ii->i", {a});
  ASSERT_TRUE(y.ok()) << y.status().ToString();
  ExpectNear(*y, {3}, {p[0], p[4], p[8]}, "diagonal");
  y = RunEinsum("ij->", {a});
  ASSERT_TRUE(y.ok()) << y.status().ToString();
  double total = 0;
  for (int i = 0; i < 9; ++i) total += p[i];
  ExpectNear(*y, {}, {total}, "sum");
}

TEST(Einsum, EllipsisBroadcastsLikeNumpy) {
  // [2, 1, 2, 3] x [4, 3, 2] -> [2, 4, 2, 2] (batch dims 2x1 and 4 broadcast).
  Tensor a = Random({2, 1, 2, 3}, 4), b = Random({4, 3, 2}, 5);
  StatusOr<Tensor> y = RunEinsum("...ij,...jk->...ik", {a, b});
  ASSERT_TRUE(y.ok()) << y.status().ToString();
  std::vector<double> want;
  for (int x = 0; x < 2; ++x)
    for (int z = 0; z < 4; ++z)
      for (int i = 0; i < 2; ++i)
        for (int k = 0; k < 2; ++k) {
          double s = 0;
          for (int j = 0; j < 3; ++j) s += double(a.data<float>()[(x * 2 + i) * 3 + j]) * b.data<float>()[(z * 3 + j) * 2 + k];
          want.push_back(s);
        }
  ExpectNear(*y, {2, 4, 2, 2}, want, "ellipsis matmul");
}

TEST(Einsum, IntegersWrapAndTypesMustMatch) {
  Tensor a(DataType::kInt32, {2}), b(DataType::kInt32, {2});
  a.data<int32_t>()[0] = 1 << 30, a.data<int32_t>()[1] = 3;
  b.data<int32_t>()[0] = 4, b.data<int32_t>()[1] = -2;
  StatusOr<Tensor> y = RunEinsum("i,i", {a, b});  // dot product: 2^32 - 6 wraps to -6
  ASSERT_TRUE(y.ok()) << y.status().ToString();
  EXPECT_EQ(y->data<int32_t>()[0], -6);
  Tensor f = Random({2}, 6);
  y = RunEinsum("i,i", {a, f});
  ASSERT_FALSE(y.ok());
  EXPECT_NE(y.status().message().find("input 1 has type float32 but input 0 has type int32"), std::string::npos)
      << y.status().message();
}

TEST(Einsum, MismatchedSizesAreAnError) {
  StatusOr<Tensor> y = RunEinsum("ij,jk->ik", {Random({2, 3}, 7), Random({4, 2}, 8)});
  ASSERT_FALSE(y.ok());
  EXPECT_NE(y.status().message().find("'j' has size 3 in one place and 4 in input 1 [4, 2]"), std::string::npos)
      << y.status().message();
  y = RunEinsum("ij,jk->ik", {Random({2, 3}, 7)});
  ASSERT_FALSE(y.ok());
  EXPECT_NE(y.status().message().find("2 input term(s) for 1 input(s)"), std::string::npos) << y.status().message();
}

}  // namespace
}  // namespace sparq
