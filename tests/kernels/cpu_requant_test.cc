// The requantization rows of the fast INT8 kernels (requant_s32 in kernels/cpu/dispatch.h)
// against RequantizeS32Ref, the one rounding rule of sparq (kernels/ref/
// quantize.h): float32(acc + bias) * multiplier, rounded to the nearest
// integer with ties to even, plus the zero point, saturated. The values here
// are chosen to BE ties (x.5), saturate, and hit NaN, which the random kernel
// tests (cpu_kernels_test.cc) avoid on purpose.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "kernels/cpu/dispatch.h"
#include "kernels/ref/quantize.h"

namespace sparq {
namespace {

struct RequantRowImpl {
  const char* name;
  CpuIsa isa;
  RequantS32Fn fn;
};

// The requant_s32 rows of the dispatch table.
std::vector<RequantRowImpl> Implementations() {
  std::vector<RequantRowImpl> impls;
  for (const CpuKernelDef& def : CpuKernelTable())
    if (def.op() == CpuOp::kRequantS32) impls.push_back({def.name, def.isa, def.get<RequantS32Fn>()});
  return impls;
}

// Runs every implementation this CPU has on the same row and expects the
// reference's bytes. n = acc.size(); bias / multiplier have n entries (stride 1)
// or 1 (stride 0).
void ExpectRowsMatchReference(const std::vector<int32_t>& acc, const std::vector<int32_t>& bias,
                              const std::vector<float>& multiplier, int32_t zero_point, bool relu, bool out_signed,
                              const std::string& what) {
  const int64_t n = static_cast<int64_t>(acc.size());
  const int64_t bias_stride = bias.size() > 1 ? 1 : 0, mult_stride = multiplier.size() > 1 ? 1 : 0;
  const int32_t* b = bias.empty() ? nullptr : bias.data();
  std::vector<int8_t> ref(acc.size());
  if (out_signed) {
    RequantizeS32Ref<int8_t>(n, acc.data(), b, bias_stride, multiplier.data(), mult_stride, zero_point, relu,
                             ref.data());
  } else {
    RequantizeS32Ref<uint8_t>(n, acc.data(), b, bias_stride, multiplier.data(), mult_stride, zero_point, relu,
                              reinterpret_cast<uint8_t*>(ref.data()));
  }
  for (const RequantRowImpl& impl : Implementations()) {
    if (impl.isa > DetectedIsa()) continue;
    std::vector<int8_t> got(acc.size() + 3, 99);  // bytes past n must stay untouched
    impl.fn(n, acc.data(), b, bias_stride, multiplier.data(), mult_stride, zero_point, relu, out_signed, got.data());
    for (int64_t j = 0; j < n; ++j) {
      ASSERT_EQ(got[j], ref[j]) << impl.name << " " << what << ": element " << j << " acc " << acc[j];
    }
    for (size_t j = acc.size(); j < got.size(); ++j) EXPECT_EQ(got[j], 99) << impl.name << " wrote past n";
  }
}

TEST(CpuRequantRow, TiesRoundToEvenInEveryIsa) {
  // multiplier 0.5: every odd accumulator is a tie (..., -1.5, -0.5, 0.5, 1.5, ...).
  std::vector<int32_t> acc;
  for (int32_t v = -41; v <= 41; ++v) acc.push_back(v);  // 83 values: full vectors and a tail
  for (bool out_signed : {true, false}) {
    const int32_t zp = out_signed ? -3 : 128;
    ExpectRowsMatchReference(acc, {}, {0.5f}, zp, false, out_signed, "multiplier 0.5");
    ExpectRowsMatchReference(acc, {}, {0.5f}, zp, true, out_signed, "multiplier 0.5 relu");
    ExpectRowsMatchReference(acc, {7}, {0.25f}, zp, false, out_signed, "bias 7, multiplier 0.25");
  }
  // The rule itself, spelled out: 0.5 -> 0, 1.5 -> 2, 2.5 -> 2, -0.5 -> 0, -1.5 -> -2.
  const std::vector<int32_t> ties = {1, 3, 5, -1, -3};
  std::vector<int8_t> out(ties.size());
  const float half = 0.5f;
  RequantizeS32Ref<int8_t>(5, ties.data(), nullptr, 0, &half, 0, 0, false, out.data());
  EXPECT_EQ(out, (std::vector<int8_t>{0, 2, 2, 0, -2}));
}

TEST(CpuRequantRow, PerChannelParametersSaturationAndNan) {
  std::vector<int32_t> acc, bias;
  std::vector<float> mult;
  for (int j = 0; j < 53; ++j) {
    acc.push_back((j * 7919) % 2001 - 1000);
    bias.push_back((j % 5) * 13 - 20);
    mult.push_back(0.01f + 0.37f * static_cast<float>(j % 9));  // large ones saturate
  }
  mult[3] = std::numeric_limits<float>::quiet_NaN();  // NaN -> zero point
  mult[4] = std::numeric_limits<float>::infinity();   // +-Inf saturates, 0 * Inf is NaN
  acc[5] = std::numeric_limits<int32_t>::max();
  acc[6] = std::numeric_limits<int32_t>::min();
  bias[5] = 10;  // wraps mod 2^32 as in the reference
  for (bool out_signed : {true, false}) {
    for (bool relu : {false, true}) {
      const int32_t zp = out_signed ? 5 : 120;
      ExpectRowsMatchReference(acc, bias, mult, zp, relu, out_signed, "per channel");
      ExpectRowsMatchReference(acc, {bias[0]}, {mult[1]}, zp, relu, out_signed, "per tensor");
    }
  }
}

}  // namespace
}  // namespace sparq
