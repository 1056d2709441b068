// Add, Sub, Mul and Div of float32 tensors with numpy broadcasting, on the
// binary_f32 rows of the dispatch table (portable here, binary_f32_avx2.cc,
// binary_f32_avx512.cc). The output is walked in runs along which each input
// either advances by one or repeats one value (the reference's broadcast
// plan, kernels/ref/elementwise_util.h): equal shapes are one run, a bias or
// a per-position scale repeats a row, LayerNorm's (x - mean) / std repeats a
// column value, a scalar repeats everywhere. One IEEE operation per element,
// as the reference computes it: the same bits, for any thread count (each
// element is computed once, by one thread). Other types run the reference
// kernel.
//
// Also the portable minmax_f32 row (DynamicQuantizeLinear's range,
// qdq_glue.cc): MinMaxRef itself.
#include <array>

#include "kernels/cpu/dispatch.h"
#include "kernels/cpu/internal.h"
#include "kernels/ref/broadcast.h"
#include "kernels/ref/elementwise_util.h"
#include "kernels/ref/quantize.h"
#include "kernels/cpu/row_op.h"
#include "kernels/registry.h"

namespace sparq {

namespace cpu {

namespace {
template <typename Op>
void BinaryRowsPortable(int64_t n, const float* a, int64_t as, const float* b, int64_t bs, float* y, Op op) {
  if (as == 1 && bs == 1) {
    for (int64_t i = 0; i < n; ++i) y[i] = op(a[i], b[i]);
  } else if (as == 1) {
    const float bv = *b;
    for (int64_t i = 0; i < n; ++i) y[i] = op(a[i], bv);
  } else if (bs == 1) {
    const float av = *a;
    for (int64_t i = 0; i < n; ++i) y[i] = op(av, b[i]);
  } else {
    const float v = op(*a, *b);
    for (int64_t i = 0; i < n; ++i) y[i] = v;
  }
}
}  // namespace

void BinaryRowPortable(BinaryF32Op op, int64_t n, const float* a, int64_t a_step, const float* b, int64_t b_step,
                       float* y) {
  switch (op) {
    case BinaryF32Op::kAdd: BinaryRowsPortable(n, a, a_step, b, b_step, y, [](float x, float z) { return x + z; }); return;
    case BinaryF32Op::kSub: BinaryRowsPortable(n, a, a_step, b, b_step, y, [](float x, float z) { return x - z; }); return;
    case BinaryF32Op::kMul: BinaryRowsPortable(n, a, a_step, b, b_step, y, [](float x, float z) { return x * z; }); return;
    case BinaryF32Op::kDiv: BinaryRowsPortable(n, a, a_step, b, b_step, y, [](float x, float z) { return x / z; }); return;
  }
}

void MinMaxRowPortable(const float* x, int64_t n, float* lo, float* hi) { MinMaxRef(x, n, lo, hi); }

}  // namespace cpu

namespace {


template <BinaryF32Op kOp>
Status RunBinaryF32(OpContext& ctx) {
  if (ctx.opset() < 7 || !ctx.has_input(0) || !ctx.has_input(1)) return RunReferenceKernel(ctx);
  const Tensor& a = ctx.input(0);
  const Tensor& b = ctx.input(1);
  if (a.dtype() != DataType::kFloat32 || b.dtype() != DataType::kFloat32) return RunReferenceKernel(ctx);
  StatusOr<Shape> shape = a.shape() == b.shape() ? StatusOr<Shape>(a.shape()) : BroadcastShapes({a.shape(), b.shape()});
  if (!shape.ok()) return RunReferenceKernel(ctx);  // the reference names the error
  const auto plan = elementwise::MakeBroadcastPlan<2>(*shape, {&a.shape(), &b.shape()});
  if (plan.strides[0].back() > 1 || plan.strides[1].back() > 1) return RunReferenceKernel(ctx);
  Tensor out = ctx.OutputBuffer(0, DataType::kFloat32, *shape);  // every element written below
  const float* x = a.data<float>();
  const float* y = b.data<float>();
  float* z = out.data<float>();
  const auto* prepared = static_cast<const CpuKernelDef*>(ctx.prepared());
  const BinaryF32Fn row = (prepared != nullptr ? *prepared : SelectCpuKernel(CpuOp::kBinaryF32)).get<BinaryF32Fn>();
  elementwise::ForEachRun(ctx.pool(), plan,
                          [&](int64_t o, const std::array<int64_t, 2>& off, const std::array<int64_t, 2>& st,
                              int64_t n) { row(kOp, n, x + off[0], st[0], y + off[1], st[1], z + o); });
  ctx.set_output(0, std::move(out));
  return Status::OK();
}

}  // namespace

void RegisterCpuBinaryF32Ops(KernelRegistry& r) {
  const PrepareFn prepare = WithoutContext(cpu::PrepareRow<CpuOp::kBinaryF32>, cpu::RowKernel);
  // Either input may be written over (KernelDef::overwritable_inputs): one
  // with the output's bytes has its layout, and every row function reads
  // a[i], b[i] before it stores y[i] (a vector at a time, or one float).
  constexpr uint32_t kBoth = 0b11;
  r.Add({"Add", "", 7, 99, RunBinaryF32<BinaryF32Op::kAdd>, "binary_f32", prepare, kPriorityFast, 0, kBoth});
  r.Add({"Sub", "", 7, 99, RunBinaryF32<BinaryF32Op::kSub>, "binary_f32", prepare, kPriorityFast, 0, kBoth});
  r.Add({"Mul", "", 7, 99, RunBinaryF32<BinaryF32Op::kMul>, "binary_f32", prepare, kPriorityFast, 0, kBoth});
  r.Add({"Div", "", 7, 99, RunBinaryF32<BinaryF32Op::kDiv>, "binary_f32", prepare, kPriorityFast, 0, kBoth});
}

}  // namespace sparq
