// sparq.FakeQuantFp8 on the CPU: the row below over the thread pool (chunks
// of independent elements, so the result does not depend on the thread count).
//
// The row rounds x / scale to float8e4m3fn and back without the byte:
//   |v| >= 2^-6 (normal):  round the float32 mantissa to 3 bits, nearest even,
//                          on the bits (the carry may bump the exponent);
//   |v| <  2^-6 (subnormal): a multiple of 2^-9, rounded by (|v| + 2^14) - 2^14
//                          (float32 addition rounds to nearest even);
//   beyond 448 once rounded (and infinities): 448; NaN: NaN; the sign is kept.
#include "kernels/cpu/fake_quant_fp8.h"

#include <cstdint>
#include <cstring>

#include "kernels/op_context.h"
#include "kernels/parallel.h"
#include "kernels/ref/quant_fp8_ops.h"
#include "kernels/registry.h"

namespace sparq {
namespace cpu {

void FakeQuantFp8Row(int64_t n, const float* x, float scale, float* y) {
  // Selections as masks (no branches, no ternaries), so the loop vectorizes.
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i] / scale;  // a division, as QuantizeLinear computes it
    int32_t bits;
    std::memcpy(&bits, &v, 4);
    const int32_t sign = bits & static_cast<int32_t>(0x80000000u);
    const int32_t abs = bits & 0x7fffffff;  // >= 0, so signed comparisons order it
    float a;
    std::memcpy(&a, &abs, 4);
    // In unsigned arithmetic: NaN payloads near 0x7fffffff carry past the sign
    // (their result is replaced below).
    const int32_t normal = static_cast<int32_t>(
        (static_cast<uint32_t>(abs) + 0x7ffffu + ((static_cast<uint32_t>(abs) >> 20) & 1u)) & 0xfff00000u);
    const float sub = (a + 16384.0f) - 16384.0f;
    int32_t sub_bits;
    std::memcpy(&sub_bits, &sub, 4);
    const int32_t is_sub = -static_cast<int32_t>(abs < 0x3c800000);
    int32_t r = (sub_bits & is_sub) | (normal & ~is_sub);
    const int32_t over = -static_cast<int32_t>(r > 0x43e00000);  // beyond 448 (also infinities)
    r = (0x43e00000 & over) | (r & ~over);
    const int32_t nan = -static_cast<int32_t>(abs > 0x7f800000);
    r = (0x7fc00000 & nan) | (r & ~nan);
    r |= sign;
    float q;
    std::memcpy(&q, &r, 4);
    y[i] = q * scale;
  }
}

}  // namespace cpu

namespace {

constexpr int64_t kElementsPerTask = 16384;

Status FakeQuantFp8Fast(OpContext& ctx) {
  if (!ctx.has_input(0) || !ctx.has_input(1) || ctx.input(0).dtype() != DataType::kFloat32 ||
      ctx.input(1).dtype() != DataType::kFloat32 || ctx.input(1).numel() != 1) {
    return RunReferenceKernel(ctx);  // it names what is wrong
  }
  const Tensor& x = ctx.input(0);
  const float scale = ctx.input(1).data<float>()[0];
  Tensor y = Tensor::Uninitialized(DataType::kFloat32, x.shape());
  const float* in = x.data<float>();
  float* out = y.data<float>();
  ParallelFor(ctx.pool(), x.numel(), kElementsPerTask,
              [&](int64_t b, int64_t e) { cpu::FakeQuantFp8Row(e - b, in + b, scale, out + b); });
  ctx.set_output(0, std::move(y));
  return Status::OK();
}

}  // namespace

void RegisterCpuFakeQuantFp8Ops(KernelRegistry& r) {
  r.Add({"FakeQuantFp8", kSparqDomain, 1, 1, FakeQuantFp8Fast, "fake_quant_fp8_f32"});
}

}  // namespace sparq
