// Finite-difference checks of the reference backward kernels (kernels/ref/grad.h):
// for L = sum(r * f(inputs)) with a fixed random r, every analytic gradient
// element is compared with the central difference (L(v + h) - L(v - h)) / 2h,
// all in double.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <random>
#include <vector>

#include "kernels/ref/conv.h"
#include "kernels/ref/grad.h"

namespace sparq {
namespace {

constexpr double kStep = 1e-6;
constexpr double kTolerance = 1e-6;  // absolute + relative, in double

using Vec = std::vector<double>;

Vec Random(int64_t n, uint32_t seed, double lo = -1.0, double hi = 1.0) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(lo, hi);
  Vec v(static_cast<size_t>(n));
  for (double& x : v) x = u(rng);
  return v;
}

double Dot(const Vec& a, const Vec& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

// Checks `grad` (analytic dL/dv) against central differences of loss() in v.
void ExpectGradient(const char* what, Vec* v, const Vec& grad, const std::function<double()>& loss) {
  ASSERT_EQ(v->size(), grad.size()) << what;
  for (size_t i = 0; i < v->size(); ++i) {
    const double keep = (*v)[i];
    (*v)[i] = keep + kStep;
    const double up = loss();
    (*v)[i] = keep - kStep;
    const double down = loss();
    (*v)[i] = keep;
    const double fd = (up - down) / (2 * kStep);
    EXPECT_NEAR(grad[i], fd, kTolerance * (1 + std::fabs(fd))) << what << " element " << i;
  }
}

struct ConvCase {
  Shape x, w;
  std::vector<int64_t> strides, pads, dilations;
  int64_t group;
};

class ConvGradTest : public ::testing::TestWithParam<ConvCase> {};

TEST_P(ConvGradTest, MatchesFiniteDifferences) {
  const ConvCase& c = GetParam();
  ConvParams p;
  p.group = c.group;
  p.window.strides = c.strides;
  p.window.pads = c.pads;
  p.window.dilations = c.dilations;
  Shape y_shape;
  ASSERT_TRUE(PrepareConv(c.x, c.w, AutoPad::kNotSet, &p, &y_shape).ok());
  Vec x = Random(NumElements(c.x), 1), w = Random(NumElements(c.w), 2), b = Random(c.w[0], 3);
  const Vec r = Random(NumElements(y_shape), 4);
  auto loss = [&] {
    Vec y(static_cast<size_t>(NumElements(y_shape)));
    ConvF64Ref(p, c.x, x.data(), c.w, w.data(), b.data(), y_shape, y.data(), nullptr);
    return Dot(r, y);
  };
  Vec dx(x.size()), dw(w.size()), db(b.size());
  ASSERT_TRUE(ConvBackwardRef<double>(p, c.x, x.data(), c.w, w.data(), y_shape, r.data(), dx.data(), dw.data(),
                                      db.data(), nullptr)
                  .ok());
  ExpectGradient("dx", &x, dx, loss);
  ExpectGradient("dw", &w, dw, loss);
  ExpectGradient("db", &b, db, loss);
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, ConvGradTest,
    ::testing::Values(ConvCase{{2, 3, 5, 6}, {4, 3, 3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1},          // plain
                      ConvCase{{1, 4, 7, 7}, {6, 2, 3, 2}, {2, 1}, {1, 0, 2, 1}, {1, 2}, 2},          // groups
                      ConvCase{{2, 3, 7, 6}, {3, 1, 3, 3}, {2, 2}, {0, 1, 1, 0}, {1, 1}, 3},          // depthwise
                      ConvCase{{1, 2, 9, 9}, {2, 1, 5, 5}, {1, 1}, {2, 2, 2, 2}, {2, 1}, 2},          // dilated dw
                      ConvCase{{2, 3, 8}, {2, 3, 3}, {2}, {1, 1}, {1}, 1},                            // 1-D
                      ConvCase{{1, 5, 4, 4}, {3, 5, 1, 1}, {1, 1}, {0, 0, 0, 0}, {1, 1}, 1}));       // 1x1

TEST(ConvGradTest, SameBitsForOneOrTwoThreads) {
  const Shape xs = {2, 8, 9, 9}, ws = {8, 8, 3, 3};
  ConvParams p;
  Shape ys;
  ASSERT_TRUE(PrepareConv(xs, ws, AutoPad::kSameUpper, &p, &ys).ok());
  std::vector<float> x(NumElements(xs)), w(NumElements(ws)), dy(NumElements(ys));
  for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(0.1f * i);
  for (size_t i = 0; i < w.size(); ++i) w[i] = std::cos(0.3f * i);
  for (size_t i = 0; i < dy.size(); ++i) dy[i] = std::sin(0.7f * i);
  std::vector<float> dx1(x.size()), dw1(w.size()), dx2(x.size()), dw2(w.size());
  ThreadPool pool(2);
  ASSERT_TRUE(ConvBackwardRef<float>(p, xs, x.data(), ws, w.data(), ys, dy.data(), dx1.data(), dw1.data(), nullptr,
                                     nullptr).ok());
  ASSERT_TRUE(ConvBackwardRef<float>(p, xs, x.data(), ws, w.data(), ys, dy.data(), dx2.data(), dw2.data(), nullptr,
                                     &pool).ok());
  EXPECT_EQ(dx1, dx2);
  EXPECT_EQ(dw1, dw2);
}

// Naive numpy matmul in double with broadcasting batch axes.
Vec MatMulNaive(const Shape& as_in, const Vec& a, const Shape& bs_in, const Vec& b) {
  Shape as = as_in, bs = bs_in;
  const int64_t M = as[as.size() - 2], K = as.back(), N = bs.back();
  const Shape ab(as.begin(), as.end() - 2), bb(bs.begin(), bs.end() - 2);
  const size_t r = std::max(ab.size(), bb.size());
  Shape batch(r);
  for (size_t d = 0; d < r; ++d) {
    const int64_t x = d + ab.size() >= r ? ab[d + ab.size() - r] : 1, y = d + bb.size() >= r ? bb[d + bb.size() - r] : 1;
    batch[d] = std::max(x, y);
  }
  const int64_t B = NumElements(batch);
  Vec y(static_cast<size_t>(B * M * N));
  auto offset = [&](const Shape& part, int64_t i) {
    int64_t o = 0, s = 1, rem = i;
    std::vector<int64_t> idx(r);
    for (size_t d = r; d-- > 0;) idx[d] = rem % batch[d], rem /= batch[d];
    for (size_t d = 0; d < part.size(); ++d) {
      const size_t pd = part.size() - 1 - d, bd = r - 1 - d;
      o += (part[pd] == 1 ? 0 : idx[bd]) * s;
      s *= part[pd];
    }
    return o;
  };
  for (int64_t i = 0; i < B; ++i) {
    const int64_t ao = offset(ab, i) * M * K, bo = offset(bb, i) * K * N;
    for (int64_t m = 0; m < M; ++m)
      for (int64_t n = 0; n < N; ++n) {
        double s = 0;
        for (int64_t k = 0; k < K; ++k) s += a[ao + m * K + k] * b[bo + k * N + n];
        y[i * M * N + m * N + n] = s;
      }
  }
  return y;
}

TEST(MatMulGradTest, BroadcastBatchesMatchFiniteDifferences) {
  const std::vector<std::pair<Shape, Shape>> cases = {
      {{2, 3, 4}, {4, 5}},           // shared weight (the one-GEMM path)
      {{2, 1, 3, 4}, {3, 4, 2}},     // both broadcast
      {{3, 4}, {2, 4, 3}},           // a shared
  };
  for (const auto& [as, bs] : cases) {
    Vec a = Random(NumElements(as), 5), b = Random(NumElements(bs), 6);
    const Vec y0 = MatMulNaive(as, a, bs, b);
    const Vec r = Random(static_cast<int64_t>(y0.size()), 7);
    auto loss = [&] { return Dot(r, MatMulNaive(as, a, bs, b)); };
    Vec da(a.size()), db(b.size());
    ASSERT_TRUE(MatMulBackwardRef<double>(as, a.data(), bs, b.data(), r.data(), da.data(), db.data(), nullptr).ok());
    ExpectGradient("da", &a, da, loss);
    ExpectGradient("db", &b, db, loss);
  }
}

TEST(GemmGradTest, TransposesAndBiasMatchFiniteDifferences) {
  for (int ta = 0; ta < 2; ++ta)
    for (int tb = 0; tb < 2; ++tb) {
      const int64_t M = 3, K = 4, N = 5;
      const Shape as = ta ? Shape{K, M} : Shape{M, K}, bs = tb ? Shape{N, K} : Shape{K, N}, cs = {N};
      Vec a = Random(M * K, 8), b = Random(K * N, 9), c = Random(N, 10);
      const Vec r = Random(M * N, 11);
      const double alpha = 0.7, beta = 1.3;
      auto loss = [&] {
        double s = 0;
        for (int64_t i = 0; i < M; ++i)
          for (int64_t j = 0; j < N; ++j) {
            double acc = 0;
            for (int64_t k = 0; k < K; ++k) acc += (ta ? a[k * M + i] : a[i * K + k]) * (tb ? b[j * K + k] : b[k * N + j]);
            s += r[i * N + j] * (alpha * acc + beta * c[j]);
          }
        return s;
      };
      Vec da(a.size()), db(b.size()), dc(c.size());
      ASSERT_TRUE(GemmBackwardRef<double>(as, a.data(), bs, b.data(), cs, ta, tb, alpha, beta, r.data(), da.data(),
                                          db.data(), dc.data(), nullptr).ok());
      ExpectGradient("dA", &a, da, loss);
      ExpectGradient("dB", &b, db, loss);
      ExpectGradient("dC", &c, dc, loss);
    }
}

TEST(BinaryGradTest, BroadcastOperandsSumTheirGradients) {
  const Shape as = {2, 1, 4}, bs = {3, 1}, ys = {2, 3, 4};
  for (BinaryGradOp op : {BinaryGradOp::kAdd, BinaryGradOp::kSub, BinaryGradOp::kMul, BinaryGradOp::kDiv}) {
    Vec a = Random(NumElements(as), 12), b = Random(NumElements(bs), 13, 0.5, 1.5);
    const Vec r = Random(NumElements(ys), 14);
    auto loss = [&] {
      double s = 0;
      for (int64_t i = 0; i < 2; ++i)
        for (int64_t j = 0; j < 3; ++j)
          for (int64_t k = 0; k < 4; ++k) {
            const double x = a[i * 4 + k], y = b[j];
            const double v = op == BinaryGradOp::kAdd ? x + y
                             : op == BinaryGradOp::kSub ? x - y
                             : op == BinaryGradOp::kMul ? x * y
                                                        : x / y;
            s += r[(i * 3 + j) * 4 + k] * v;
          }
      return s;
    };
    Vec da(a.size()), db(b.size());
    ASSERT_TRUE(BinaryBackwardRef<double>(op, as, a.data(), bs, b.data(), ys, r.data(), da.data(), db.data()).ok());
    ExpectGradient("da", &a, da, loss);
    ExpectGradient("db", &b, db, loss);
  }
}

double UnaryForward(UnaryGradOp op, double a, double b, double x) {
  switch (op) {
    case UnaryGradOp::kRelu: return std::max(x, 0.0);
    case UnaryGradOp::kClip: return std::min(std::max(x, a), b);
    case UnaryGradOp::kSigmoid: return 1 / (1 + std::exp(-x));
    case UnaryGradOp::kHardSigmoid: return std::max(0.0, std::min(1.0, a * x + b));
    case UnaryGradOp::kHardSwish: return x * std::max(0.0, std::min(1.0, x / 6 + 0.5));
    case UnaryGradOp::kTanh: return std::tanh(x);
    case UnaryGradOp::kErf: return std::erf(x);
    case UnaryGradOp::kIdentity: return x;
  }
  return 0;
}

TEST(UnaryGradTest, ActivationsMatchFiniteDifferencesAwayFromKinks) {
  struct Case { UnaryGradOp op; double a, b; };
  const Case cases[] = {{UnaryGradOp::kRelu, 0, 0},        {UnaryGradOp::kClip, -0.5, 0.6},
                        {UnaryGradOp::kSigmoid, 0, 0},     {UnaryGradOp::kHardSigmoid, 0.2, 0.5},
                        {UnaryGradOp::kHardSwish, 0, 0},   {UnaryGradOp::kTanh, 0, 0},
                        {UnaryGradOp::kErf, 0, 0},         {UnaryGradOp::kIdentity, 0, 0}};
  for (const Case& c : cases) {
    // Points spread over [-4, 4] that stay 1e-3 away from every kink.
    Vec x;
    for (int i = 0; i < 40; ++i) x.push_back(-3.9 + 0.2 * i + 0.0371);
    const Vec r = Random(static_cast<int64_t>(x.size()), 15);
    auto loss = [&] {
      double s = 0;
      for (size_t i = 0; i < x.size(); ++i) s += r[i] * UnaryForward(c.op, c.a, c.b, x[i]);
      return s;
    };
    Vec dx(x.size());
    UnaryBackwardRef<double>(c.op, c.a, c.b, static_cast<int64_t>(x.size()), x.data(), r.data(), dx.data());
    ExpectGradient("dx", &x, dx, loss);
  }
}

TEST(SoftmaxGradTest, AnyAxisMatchesFiniteDifferences) {
  const Shape s = {2, 3, 4};
  for (int64_t axis : {-1, 1, 0}) {
    Vec x = Random(NumElements(s), 16, -2, 2);
    const Vec r = Random(NumElements(s), 17);
    const int64_t ax = axis < 0 ? axis + 3 : axis;
    int64_t outer = 1, inner = 1;
    for (int64_t d = 0; d < ax; ++d) outer *= s[d];
    for (int64_t d = ax + 1; d < 3; ++d) inner *= s[d];
    const int64_t mid = s[ax];
    auto forward = [&] {
      Vec y(x.size());
      for (int64_t o = 0; o < outer; ++o)
        for (int64_t in = 0; in < inner; ++in) {
          double mx = -1e300, sum = 0;
          for (int64_t k = 0; k < mid; ++k) mx = std::max(mx, x[(o * mid + k) * inner + in]);
          for (int64_t k = 0; k < mid; ++k) sum += std::exp(x[(o * mid + k) * inner + in] - mx);
          for (int64_t k = 0; k < mid; ++k)
            y[(o * mid + k) * inner + in] = std::exp(x[(o * mid + k) * inner + in] - mx) / sum;
        }
      return y;
    };
    auto loss = [&] { return Dot(r, forward()); };
    const Vec y = forward();
    Vec dx(x.size());
    ASSERT_TRUE(SoftmaxBackwardRef<double>(s, axis, y.data(), r.data(), dx.data()).ok());
    ExpectGradient("dx", &x, dx, loss);
  }
}

TEST(LayerNormGradTest, InputScaleAndBiasMatchFiniteDifferences) {
  const Shape s = {3, 2, 5};
  for (int64_t axis : {-1, 1}) {
    const int64_t D = axis == -1 ? 5 : 10, rows = 30 / D;
    Vec x = Random(30, 18, -2, 2), scale = Random(D, 19), bias = Random(D, 20);
    const Vec r = Random(30, 21);
    const double eps = 1e-5;
    auto loss = [&] {
      double s2 = 0;
      for (int64_t row = 0; row < rows; ++row) {
        double mean = 0, var = 0;
        for (int64_t k = 0; k < D; ++k) mean += x[row * D + k];
        mean /= D;
        for (int64_t k = 0; k < D; ++k) var += (x[row * D + k] - mean) * (x[row * D + k] - mean);
        var /= D;
        for (int64_t k = 0; k < D; ++k)
          s2 += r[row * D + k] * ((x[row * D + k] - mean) / std::sqrt(var + eps) * scale[k] + bias[k]);
      }
      return s2;
    };
    Vec dx(x.size()), ds(scale.size()), dbias(bias.size());
    ASSERT_TRUE(LayerNormBackwardRef<double>(s, axis, eps, x.data(), scale.data(), r.data(), dx.data(), ds.data(),
                                             dbias.data()).ok());
    ExpectGradient("dx", &x, dx, loss);
    ExpectGradient("dscale", &scale, ds, loss);
    ExpectGradient("dbias", &bias, dbias, loss);
  }
}

TEST(DataMovementGradTest, TransposePadConcatAndPoolAreAdjoints) {
  // For a linear map y = A x the gradient is A^T r: check <A x, r> = <x, A^T r>
  // on random vectors (exact up to rounding) and finite differences once.
  const Shape xs = {2, 3, 4};
  Vec x = Random(24, 22);
  {  // Transpose [2, 3, 4] by (1, 2, 0) -> [3, 4, 2]
    const std::vector<int64_t> perm = {1, 2, 0};
    const Vec r = Random(24, 23);
    auto loss = [&] {
      double s = 0;
      for (int64_t i = 0; i < 2; ++i)
        for (int64_t j = 0; j < 3; ++j)
          for (int64_t k = 0; k < 4; ++k) s += r[(j * 4 + k) * 2 + i] * x[(i * 3 + j) * 4 + k];
      return s;
    };
    Vec dx(24);
    ASSERT_TRUE(TransposeBackwardRef<double>(xs, perm, r.data(), dx.data()).ok());
    ExpectGradient("transpose dx", &x, dx, loss);
  }
  {  // Pad by begins (0, 1, -1) and ends (1, 0, 2): y [3, 4, 5]
    const std::vector<int64_t> pads = {0, 1, -1, 1, 0, 2};
    const Shape ys = {3, 4, 5};
    const Vec r = Random(NumElements(ys), 24);
    auto loss = [&] {
      double s = 0;
      for (int64_t i = 0; i < 3; ++i)
        for (int64_t j = 0; j < 4; ++j)
          for (int64_t k = 0; k < 5; ++k) {
            const int64_t xi = i - 0, xj = j - 1, xk = k + 1;
            if (xi < 2 && xj >= 0 && xj < 3 && xk < 4) s += r[(i * 4 + j) * 5 + k] * x[(xi * 3 + xj) * 4 + xk];
          }
      return s;
    };
    Vec dx(24);
    ASSERT_TRUE(PadBackwardRef<double>(xs, pads, r.data(), dx.data()).ok());
    ExpectGradient("pad dx", &x, dx, loss);
  }
  {  // Concat of [2, 3, 4] and [2, 1, 4] along axis 1
    Vec x2 = Random(8, 25);
    const Vec r = Random(32, 26);
    auto loss = [&] {
      double s = 0;
      for (int64_t i = 0; i < 2; ++i)
        for (int64_t j = 0; j < 4; ++j)
          for (int64_t k = 0; k < 4; ++k)
            s += r[(i * 4 + j) * 4 + k] * (j < 3 ? x[(i * 3 + j) * 4 + k] : x2[i * 4 + k]);
      return s;
    };
    Vec dx(24), dx2(8);
    ASSERT_TRUE(ConcatBackwardRef<double>({xs, {2, 1, 4}}, 1, r.data(), {dx.data(), dx2.data()}).ok());
    ExpectGradient("concat dx0", &x, dx, loss);
    ExpectGradient("concat dx1", &x2, dx2, loss);
  }
  {  // GlobalAveragePool of [2, 3, 4] (one spatial axis)
    const Vec r = Random(6, 27);
    auto loss = [&] {
      double s = 0;
      for (int64_t i = 0; i < 6; ++i) {
        double m = 0;
        for (int64_t k = 0; k < 4; ++k) m += x[i * 4 + k];
        s += r[i] * m / 4;
      }
      return s;
    };
    Vec dx(24);
    ASSERT_TRUE(GlobalAveragePoolBackwardRef<double>(xs, r.data(), dx.data()).ok());
    ExpectGradient("pool dx", &x, dx, loss);
  }
}

TEST(ReduceGradTest, MeanOverMiddleAxisMatchesFiniteDifferences) {
  const Shape xs = {2, 3, 4}, ks = {2, 1, 4};
  Vec x = Random(24, 28);
  const Vec r = Random(8, 29);
  auto loss = [&] {
    double s = 0;
    for (int64_t i = 0; i < 2; ++i)
      for (int64_t k = 0; k < 4; ++k) {
        double m = 0;
        for (int64_t j = 0; j < 3; ++j) m += x[(i * 3 + j) * 4 + k];
        s += r[i * 4 + k] * m / 3;
      }
    return s;
  };
  Vec dx(24);
  ASSERT_TRUE(ReduceBackwardRef<double>(xs, ks, 1.0 / 3, r.data(), dx.data()).ok());
  ExpectGradient("dx", &x, dx, loss);
}

}  // namespace
}  // namespace sparq
