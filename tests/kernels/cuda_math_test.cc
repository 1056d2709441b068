// The CUDA backend's shared host/device arithmetic (kernels/cuda/device_math.h)
// against kernels/ref, on the CPU: integer paths bit for bit, float paths
// within the named tolerances below. Runs on every machine (no GPU needed):
// these are the functions the CUDA kernels call per element.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "kernels/cuda/device_math.h"
#include "kernels/ref/quantize.h"
#include "kernels/op_test_util.h"

namespace sparq {
namespace {

// Device expf / erff / tanhf are within 2 ulp of glibc's; these bound the
// results of the float formulas built on them (relative, or absolute near 0).
constexpr float kActivationTolerance = 1e-6f;
constexpr float kSoftmaxTolerance = 1e-6f;
constexpr float kLayerNormTolerance = 1e-5f;

uint32_t Bits(float v) {
  uint32_t u;
  std::memcpy(&u, &v, sizeof(u));
  return u;
}

// Random floats that include exact ties (k + 0.5), integers, NaN, infinities and huge values.
std::vector<float> TrickyFloats(std::mt19937& rng, size_t n, float range) {
  std::uniform_real_distribution<float> uni(-range, range);
  std::uniform_int_distribution<int> kind(0, 9), small(-300, 300);
  std::vector<float> v(n);
  for (auto& x : v) {
    switch (kind(rng)) {
      case 0: x = static_cast<float>(small(rng)) + 0.5f; break;
      case 1: x = static_cast<float>(small(rng)); break;
      case 2: x = std::numeric_limits<float>::quiet_NaN(); break;
      case 3: x = (small(rng) & 1) ? std::numeric_limits<float>::infinity() : -std::numeric_limits<float>::infinity(); break;
      case 4: x = uni(rng) * 1e30f; break;
      default: x = uni(rng);
    }
  }
  return v;
}

TEST(CudaDeviceMath, RoundHalfToEvenMatchesReferenceBitForBit) {
  std::mt19937 rng(1);
  for (float x : TrickyFloats(rng, 100000, 1000.0f)) {
    ASSERT_EQ(Bits(cuda::RoundHalfToEven(x)), Bits(RoundHalfToEven(x))) << x;
  }
  EXPECT_EQ(cuda::RoundHalfToEven(2.5f), 2.0f);
  EXPECT_EQ(cuda::RoundHalfToEven(-1.5f), -2.0f);
  EXPECT_EQ(Bits(cuda::RoundHalfToEven(-0.5f)), Bits(-0.0f));
}

template <typename T>
void CheckQuantize(uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> scale_dist(1e-3f, 2.0f);
  std::uniform_int_distribution<int32_t> zp_dist(QuantRange<T>::kMin, QuantRange<T>::kMax);
  const std::vector<float> xs = TrickyFloats(rng, 50000, 300.0f);
  for (size_t i = 0; i < xs.size(); ++i) {
    const float scale = (i % 7 == 0) ? 0.5f : scale_dist(rng);  // 0.5: x / scale hits exact ties
    const int32_t zp = zp_dist(rng);
    ASSERT_EQ(cuda::QuantizeValue<T>(xs[i], scale, zp), QuantizeValue<T>(xs[i], scale, zp))
        << "x " << xs[i] << " scale " << scale << " zp " << zp;
    const T q = static_cast<T>(zp_dist(rng));
    ASSERT_EQ(Bits(cuda::DequantizeValue(q, scale, zp)), Bits(DequantizeValue(q, scale, zp)));
  }
}

TEST(CudaDeviceMath, QuantizeAndDequantizeMatchReferenceBitForBit) {
  CheckQuantize<int8_t>(2);
  CheckQuantize<uint8_t>(3);
}

template <typename T>
void CheckRequantize(uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int32_t> acc_dist(-(1 << 22), 1 << 22), zp_dist(QuantRange<T>::kMin, QuantRange<T>::kMax);
  std::uniform_int_distribution<int32_t> wide(std::numeric_limits<int32_t>::min(), std::numeric_limits<int32_t>::max());
  std::uniform_real_distribution<float> mult_dist(1e-6f, 1e-2f);
  constexpr int64_t kN = 4096;
  for (int round = 0; round < 40; ++round) {
    std::vector<int32_t> acc(kN), bias(kN);
    std::vector<float> mult(kN);
    for (int64_t j = 0; j < kN; ++j) {
      acc[j] = (j % 97 == 0) ? wide(rng) : acc_dist(rng);  // some wrap when the bias is added
      bias[j] = (j % 89 == 0) ? wide(rng) : acc_dist(rng) / 16;
      mult[j] = (j % 5 == 0) ? 0.5f : mult_dist(rng);      // 0.5: odd sums are exact ties
    }
    mult[1] = std::numeric_limits<float>::infinity();  // inf * 0 = NaN -> zero point
    acc[1] = 0;
    bias[1] = 0;
    const int32_t zp = zp_dist(rng);
    const bool relu = round % 2 == 1;
    std::vector<T> want(kN);
    RequantizeS32Ref<T>(kN, acc.data(), bias.data(), 1, mult.data(), 1, zp, relu, want.data());
    for (int64_t j = 0; j < kN; ++j) {
      ASSERT_EQ(cuda::RequantizeValue<T>(acc[j], bias[j], mult[j], zp, relu), want[j])
          << "acc " << acc[j] << " bias " << bias[j] << " multiplier " << mult[j] << " zp " << zp << " relu " << relu;
    }
  }
  EXPECT_EQ(Bits(cuda::RequantMultiplier(0.02f, 0.003f, 0.7f)), Bits(RequantMultiplier(0.02f, 0.003f, 0.7f)));
}

TEST(CudaDeviceMath, RequantizeMatchesReferenceBitForBit) {
  CheckRequantize<int8_t>(4);
  CheckRequantize<uint8_t>(5);
}

TEST(CudaDeviceMath, DynamicQuantParamsMatchReferenceBitForBit) {
  std::mt19937 rng(10);
  std::uniform_real_distribution<float> mag(0.0f, 50.0f);
  for (int i = 0; i < 20000; ++i) {
    float lo = -mag(rng), hi = mag(rng);
    if (i % 5 == 0) lo = 0.0f;
    if (i % 7 == 0) hi = 0.0f;
    if (i % 11 == 0) lo = -hi * 127.0f / 128.0f;  // zero points near ties
    float scale = 0.0f;
    int32_t zp = -1;
    cuda::DynamicQuantParamsU8(lo, hi, &scale, &zp);
    const DynamicQuantParams want = DynamicQuantParamsFromRangeU8(lo, hi);
    ASSERT_EQ(Bits(scale), Bits(want.scale)) << lo << " " << hi;
    ASSERT_EQ(zp, want.zero_point) << lo << " " << hi;
  }
}

TEST(CudaDeviceMath, AbsHistogramBinCountsLikeReference) {
  std::mt19937 rng(6);
  const std::vector<float> xs = TrickyFloats(rng, 100000, 50.0f);
  for (double scale : {0.0, 1.0, 2047.0 / 48.7, 1e300}) {
    constexpr int64_t kLast = 2047;
    std::vector<int64_t> want(kLast + 1, 0), got(kLast + 1, 0);
    const int64_t want_nans = AbsHistogramRef(xs.data(), static_cast<int64_t>(xs.size()), scale, kLast, want.data());
    int64_t nans = 0;
    for (float x : xs) {
      const int64_t b = cuda::AbsHistogramBin(x, scale, kLast);
      if (b < 0) ++nans;
      else got[static_cast<size_t>(b)] += 1;
    }
    EXPECT_EQ(nans, want_nans);
    EXPECT_EQ(got, want) << "scale " << scale;
  }
}

// Runs a one-input reference kernel on a float tensor.
std::vector<float> RunRef(const Node& node, int64_t opset, const std::vector<Tensor>& inputs) {
  auto out = testing::RunRefKernel(node, opset, inputs);
  EXPECT_TRUE(out.ok()) << out.status().ToString();
  if (!out.ok()) return {};
  const Tensor& y = (*out)[0];
  return std::vector<float>(y.data<float>(), y.data<float>() + y.numel());
}

void ExpectNear(float got, float want, float tol, const std::string& what, size_t i) {
  if (std::isnan(want)) {
    EXPECT_TRUE(std::isnan(got)) << what << " [" << i << "]";
    return;
  }
  if (std::isinf(want)) {
    EXPECT_EQ(got, want) << what << " [" << i << "]";
    return;
  }
  EXPECT_LE(std::fabs(got - want), tol * std::max(1.0f, std::fabs(want))) << what << " [" << i << "]: " << got
                                                                          << " vs " << want;
}

TEST(CudaDeviceMath, ActivationsMatchReferenceKernels) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(-12.0f, 12.0f);
  std::vector<float> xs(20000);
  for (auto& x : xs) x = dist(rng);
  xs[0] = 0.0f;
  xs[1] = std::numeric_limits<float>::quiet_NaN();
  xs[2] = -200.0f;
  xs[3] = 200.0f;
  const Tensor x = Tensor::FromVector<float>({static_cast<int64_t>(xs.size())}, xs);
  struct Case {
    const char* op;
    const char* domain;
    int64_t opset;
    float (*fn)(float);
  };
  const Case cases[] = {
      {"Sigmoid", "", 13, [](float v) { return cuda::Sigmoid(v); }},
      {"Silu", kSparqDomain, 1, [](float v) { return cuda::Silu(v); }},
      {"Gelu", "", 20, [](float v) { return cuda::GeluErf(v); }},
      {"GeluErfChain", kSparqDomain, 1, [](float v) { return cuda::GeluErfChain(v, 1.41421356f, 1.0f, 0.5f); }},
      {"GeluErfScaledChain", kSparqDomain, 1,
       [](float v) { return cuda::GeluErfScaledChain(v, 1.41421356f, 1.0f, 0.5f); }},
      {"Relu", "", 14, [](float v) { return cuda::Relu(v); }},
      {"HardSwishChain", kSparqDomain, 1, [](float v) { return cuda::HardSwishChain(v, 3.0f, 0.0f, 6.0f, 6.0f); }},
  };
  for (const Case& c : cases) {
    Node node = testing::OpNode(c.op);
    node.domain = c.domain;
    const std::vector<float> want = RunRef(node, c.opset, {x});
    ASSERT_EQ(want.size(), xs.size()) << c.op;
    for (size_t i = 0; i < xs.size(); ++i) ExpectNear(c.fn(xs[i]), want[i], kActivationTolerance, c.op, i);
  }
}

TEST(CudaDeviceMath, SoftmaxRowMatchesReference) {
  std::mt19937 rng(8);
  std::uniform_real_distribution<float> dist(-30.0f, 30.0f);
  for (int64_t n : {1, 7, 128, 1000}) {
    constexpr int64_t kRows = 5;
    std::vector<float> xs(static_cast<size_t>(kRows * n));
    for (auto& x : xs) x = dist(rng);
    xs[0] = 3000.0f;  // stable: no overflow
    const Tensor x = Tensor::FromVector<float>({kRows, n}, xs);
    const std::vector<float> want = RunRef(testing::OpNode("Softmax"), 13, {x});
    std::vector<float> got(xs.size());
    for (int64_t r = 0; r < kRows; ++r) cuda::SoftmaxRow(xs.data() + r * n, got.data() + r * n, n);
    for (size_t i = 0; i < xs.size(); ++i) ExpectNear(got[i], want[i], kSoftmaxTolerance, "Softmax", i);
  }
}

TEST(CudaDeviceMath, LayerNormRowMatchesReference) {
  std::mt19937 rng(9);
  std::uniform_real_distribution<float> dist(-4.0f, 4.0f);
  for (int64_t n : {1, 64, 768}) {
    constexpr int64_t kRows = 4;
    std::vector<float> xs(static_cast<size_t>(kRows * n)), scale(static_cast<size_t>(n)), bias(static_cast<size_t>(n));
    for (auto& x : xs) x = dist(rng) + 100.0f;  // a large mean: the two-pass variance matters
    for (auto& s : scale) s = dist(rng);
    for (auto& b : bias) b = dist(rng);
    const Tensor x = Tensor::FromVector<float>({kRows, n}, xs);
    const Tensor s = Tensor::FromVector<float>({n}, scale), b = Tensor::FromVector<float>({n}, bias);
    const std::vector<float> want =
        RunRef(testing::OpNode("LayerNormalization", {Attribute::Float("epsilon", 1e-5f)}), 17, {x, s, b});
    std::vector<float> got(xs.size());
    for (int64_t r = 0; r < kRows; ++r) {
      cuda::LayerNormRow(xs.data() + r * n, scale.data(), bias.data(), static_cast<double>(1e-5f), n,
                         got.data() + r * n, nullptr, nullptr);
    }
    for (size_t i = 0; i < xs.size(); ++i) ExpectNear(got[i], want[i], kLayerNormTolerance, "LayerNorm", i);
  }
}

TEST(CudaDeviceMath, IntegerBinaryOpsMatchReferenceKernels) {
  const std::vector<int64_t> a = {7, -7, 5, std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max(), 0, 9};
  const std::vector<int64_t> b = {2, 2, 0, -1, 1, 3, -4};
  const Tensor ta = Tensor::FromVector<int64_t>({7}, a), tb = Tensor::FromVector<int64_t>({7}, b);
  const char* ops[] = {"Add", "Sub", "Mul", "Div"};
  for (int op = 0; op < 4; ++op) {
    auto want = testing::RunRefKernel(testing::OpNode(ops[op]), 14, {ta, tb});
    ASSERT_TRUE(want.ok()) << want.status().ToString();
    for (size_t i = 0; i < a.size(); ++i) {
      EXPECT_EQ(cuda::IntBinary<int64_t>(op, a[i], b[i]), (*want)[0].data<int64_t>()[i]) << ops[op] << " " << i;
      const int32_t a32 = static_cast<int32_t>(a[i] % 100000), b32 = static_cast<int32_t>(b[i]);
      auto want32 = testing::RunRefKernel(testing::OpNode(ops[op]), 14,
                                          {Tensor::Scalar<int32_t>(a32), Tensor::Scalar<int32_t>(b32)});
      ASSERT_TRUE(want32.ok());
      EXPECT_EQ(cuda::IntBinary<int32_t>(op, a32, b32), (*want32)[0].data<int32_t>()[0]) << ops[op] << " " << i;
    }
  }
}

TEST(CudaDeviceMath, BroadcastOffsetWalksNumpyBroadcasting) {
  // out [2, 3, 4]; input [3, 1] right-aligned: dims (1) 3 1 -> strides 0 1 0.
  const int64_t dims[3] = {2, 3, 4};
  const int64_t strides[3] = {0, 1, 0};
  for (int64_t i = 0; i < 24; ++i) EXPECT_EQ(cuda::BroadcastOffset(i, 3, dims, strides), (i / 4) % 3) << i;
}

}  // namespace
}  // namespace sparq
