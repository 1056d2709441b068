// Float16 <-> float32 row conversion (kernels/cpu/convert_f16.h) on every
// ISA this CPU has, against the reference's per-value HalfToFloat /
// FloatToHalf: the bits must be identical (no tolerance), for every one of
// the 65536 halves, for floats at and around every rounding boundary, and for
// every row tail length.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "kernels/cpu/convert_f16.h"
#include "sparq/tensor.h"

namespace sparq {
namespace {

constexpr CpuIsa kAllIsas[] = {CpuIsa::kPortable, CpuIsa::kAvx2, CpuIsa::kAvx512, CpuIsa::kAvx512Vnni};

uint32_t Bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
float FromBits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

class ConvertF16Test : public ::testing::TestWithParam<CpuIsa> {
 protected:
  void SetUp() override {
    if (GetParam() > DetectedIsa()) GTEST_SKIP() << "this CPU lacks " << CpuIsaName(GetParam());
  }
};

TEST_P(ConvertF16Test, EveryHalfConvertsExactly) {
  std::vector<uint16_t> halves(65536);
  for (uint32_t i = 0; i < 65536; ++i) halves[i] = static_cast<uint16_t>(i);
  std::vector<float> out(halves.size());
  cpu::SelectHalfToFloatRow(GetParam())(halves.data(), out.data(), static_cast<int64_t>(halves.size()));
  for (uint32_t i = 0; i < 65536; ++i) {
    const float want = HalfToFloat(halves[i]);
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(out[i])) << "half 0x" << std::hex << i;
    } else {
      EXPECT_EQ(Bits(out[i]), Bits(want)) << "half 0x" << std::hex << i;
    }
  }
}

TEST_P(ConvertF16Test, FloatsRoundLikeTheReference) {
  std::vector<float> floats;
  // Every half value, the midpoints between neighbours (ties to even) and one ulp either side of them.
  for (uint32_t h = 0; h < 0x7c00; ++h) {
    const float a = HalfToFloat(static_cast<uint16_t>(h)), b = HalfToFloat(static_cast<uint16_t>(h + 1));
    const float mid = a + (b - a) / 2;
    for (float f : {a, mid, std::nextafter(mid, 0.0f), std::nextafter(mid, 1e9f)}) {
      floats.push_back(f);
      floats.push_back(-f);
    }
  }
  for (float f : {65504.0f, 65519.0f, 65520.0f, 1e10f, std::numeric_limits<float>::infinity(),
                  std::numeric_limits<float>::denorm_min(), 1e-30f})
    for (float s : {f, -f}) floats.push_back(s);
  std::mt19937 rng(7);
  for (int i = 0; i < 100000; ++i) floats.push_back(FromBits(rng() & 0x7f7fffffu) * ((i & 1) ? -1.0f : 1.0f));
  std::vector<uint16_t> out(floats.size());
  cpu::SelectFloatToHalfRow(GetParam())(floats.data(), out.data(), static_cast<int64_t>(floats.size()));
  for (size_t i = 0; i < floats.size(); ++i)
    ASSERT_EQ(out[i], FloatToHalf(floats[i])) << "float " << floats[i] << " (0x" << std::hex << Bits(floats[i]) << ")";
}

TEST_P(ConvertF16Test, NanStaysNan) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> in(9, nan);
  std::vector<uint16_t> half(in.size());
  cpu::SelectFloatToHalfRow(GetParam())(in.data(), half.data(), static_cast<int64_t>(in.size()));
  for (uint16_t h : half) EXPECT_TRUE(std::isnan(HalfToFloat(h))) << std::hex << h;
}

TEST_P(ConvertF16Test, EveryTailLengthAndNothingBeyond) {
  for (int64_t n = 0; n <= 37; ++n) {
    std::vector<uint16_t> half(n + 1, 0x3c00);  // 1.0
    std::vector<float> back(n + 1, -7.0f);
    std::vector<uint16_t> again(n + 1, 0xabcd);
    for (int64_t i = 0; i < n; ++i) half[i] = static_cast<uint16_t>(0x1000 + 37 * i);
    cpu::SelectHalfToFloatRow(GetParam())(half.data(), back.data(), n);
    cpu::SelectFloatToHalfRow(GetParam())(back.data(), again.data(), n);
    for (int64_t i = 0; i < n; ++i) EXPECT_EQ(again[i], half[i]) << "n=" << n << " i=" << i;
    EXPECT_EQ(back[n], -7.0f) << "n=" << n;
    EXPECT_EQ(again[n], 0xabcd) << "n=" << n;
  }
}

TEST_P(ConvertF16Test, NameSaysWhichPathRuns) {
  const std::string name = cpu::HalfToFloatRowName(GetParam());
  if (GetParam() == CpuIsa::kPortable) EXPECT_EQ(name, "convert_f16_f32_portable");
  else EXPECT_TRUE(name == "convert_f16_f32_f16c" || name == "convert_f16_f32_portable") << name;
}

INSTANTIATE_TEST_SUITE_P(CpuKernels, ConvertF16Test, ::testing::ValuesIn(kAllIsas),
                         [](const ::testing::TestParamInfo<CpuIsa>& info) { return CpuIsaName(info.param); });

}  // namespace
}  // namespace sparq
