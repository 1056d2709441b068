// Add, Sub, Mul and Div of float32 tensors without the reference's general
// broadcasting machinery, for the shapes models use: equal shapes, a scalar
// on either side, or one side's shape a suffix of the other's (a bias, a
// per-position scale). One IEEE operation per element, as the reference does:
// the same bits. Other shapes and types run the reference kernel.
#include <algorithm>

#include "kernels/registry.h"

namespace sparq {
namespace {

struct AddOp {
  float operator()(float x, float y) const { return x + y; }
};
struct SubOp {
  float operator()(float x, float y) const { return x - y; }
};
struct MulOp {
  float operator()(float x, float y) const { return x * y; }
};
struct DivOp {
  float operator()(float x, float y) const { return x / y; }
};

// True when `suffix` equals the trailing dims of `shape` (rank <= shape's).
bool IsSuffix(const Shape& suffix, const Shape& shape) {
  if (suffix.size() > shape.size()) return false;
  return std::equal(suffix.begin(), suffix.end(), shape.end() - static_cast<std::ptrdiff_t>(suffix.size()));
}

template <typename Op>
Status RunBinaryF32(OpContext& ctx) {
  if (ctx.opset() < 7 || !ctx.has_input(0) || !ctx.has_input(1)) return RunReferenceKernel(ctx);
  const Tensor& a = ctx.input(0);
  const Tensor& b = ctx.input(1);
  if (a.dtype() != DataType::kFloat32 || b.dtype() != DataType::kFloat32) return RunReferenceKernel(ctx);
  // out[i * inner + j] = op(x, y) with x, y each either the full tensor or repeated every `inner` values.
  const bool b_repeats = b.numel() == 1 || IsSuffix(b.shape(), a.shape());
  const bool a_repeats = !b_repeats && (a.numel() == 1 || IsSuffix(a.shape(), b.shape()));
  if (!a_repeats && !b_repeats) return RunReferenceKernel(ctx);
  const Tensor& big = b_repeats ? a : b;
  const int64_t inner = b_repeats ? b.numel() : a.numel();
  Tensor out = Tensor::Uninitialized(DataType::kFloat32, big.shape());  // written in full below
  const int64_t n = out.numel();
  if (n == 0 || inner == 0) {
    ctx.set_output(0, std::move(out));
    return Status::OK();
  }
  const float* x = a.data<float>();
  const float* y = b.data<float>();
  float* z = out.data<float>();
  const Op op;
  const int64_t blocks = n / inner;
  const int64_t grain = std::max<int64_t>(1, 16384 / inner);  // about 16K values per chunk
  ParallelFor(ctx.pool(), blocks, grain, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      float* zi = z + i * inner;
      if (b_repeats) {
        const float* xi = x + i * inner;
        for (int64_t j = 0; j < inner; ++j) zi[j] = op(xi[j], y[j]);
      } else {
        const float* yi = y + i * inner;
        for (int64_t j = 0; j < inner; ++j) zi[j] = op(x[j], yi[j]);
      }
    }
  });
  ctx.set_output(0, std::move(out));
  return Status::OK();
}

}  // namespace

void RegisterCpuBinaryF32Ops(KernelRegistry& r) {
  r.Add({"Add", "", 7, 99, RunBinaryF32<AddOp>, "binary_f32"});
  r.Add({"Sub", "", 7, 99, RunBinaryF32<SubOp>, "binary_f32"});
  r.Add({"Mul", "", 7, 99, RunBinaryF32<MulOp>, "binary_f32"});
  r.Add({"Div", "", 7, 99, RunBinaryF32<DivOp>, "binary_f32"});
}

}  // namespace sparq
