// Reference Softmax, LogSoftmax and Hardmax.
//
// Up to opset 12 the input is coerced to 2-D at `axis` (default 1): the
// operation runs over the flattened dimensions [axis, rank) of each of the
// prod(shape[0, axis)) rows. From opset 13 it runs over the single dimension
// `axis` (default -1). Both are the same loop over an (outer, n, inner) view:
// the old form is n = prod(shape[axis:]), inner = 1.
//
// Numerically stable: the row maximum is subtracted before exp, so large
// inputs do not overflow; sums accumulate in double.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <utility>
#include <vector>

#include "kernels/parallel.h"
#include "kernels/ref/reduce_common.h"
#include "kernels/ref/reference_steps.h"
#include "kernels/registry.h"

namespace sparq {
namespace {

using reduce_common::DimProduct;
using reduce_common::IsHalfType;
using reduce_common::NormalizeAxis;
using reduce_common::RunAsFloat32;

enum class SoftmaxKind { kSoftmax, kLogSoftmax, kHardmax };

// Columns handled together when the reduced axis is not the last one, so the
// inner loops run over contiguous memory.
constexpr int64_t kColumnBlock = 64;

// One (outer row, block of `width` inner columns): x and y point at element
// (o, 0, i0); elements along the axis are `inner` apart.
template <typename T, SoftmaxKind kKind>
void SoftmaxBlock(const T* x, T* y, int64_t n, int64_t inner, int64_t width) {
  T max_v[kColumnBlock];
  int64_t max_k[kColumnBlock];
  double sum[kColumnBlock];
  for (int64_t i = 0; i < width; ++i) {
    max_v[i] = -std::numeric_limits<T>::infinity();
    max_k[i] = 0;
    sum[i] = 0.0;
  }
  for (int64_t k = 0; k < n; ++k) {
    const T* row = x + k * inner;
    for (int64_t i = 0; i < width; ++i) {
      if (row[i] > max_v[i] || k == 0) {
        max_v[i] = row[i];
        max_k[i] = k;
      }
    }
  }
  if constexpr (kKind == SoftmaxKind::kHardmax) {
    for (int64_t k = 0; k < n; ++k) {
      T* out = y + k * inner;
      for (int64_t i = 0; i < width; ++i) out[i] = max_k[i] == k ? T(1) : T(0);
    }
    return;
  }
  for (int64_t k = 0; k < n; ++k) {
    const T* row = x + k * inner;
    T* out = y + k * inner;
    for (int64_t i = 0; i < width; ++i) {
      const T e = std::exp(row[i] - max_v[i]);
      sum[i] += static_cast<double>(e);
      if constexpr (kKind == SoftmaxKind::kSoftmax) out[i] = e;
    }
  }
  for (int64_t k = 0; k < n; ++k) {
    const T* row = x + k * inner;
    T* out = y + k * inner;
    for (int64_t i = 0; i < width; ++i) {
      if constexpr (kKind == SoftmaxKind::kSoftmax) {
        out[i] = static_cast<T>(static_cast<double>(out[i]) / sum[i]);
      } else {
        out[i] = static_cast<T>(static_cast<double>(row[i] - max_v[i]) - std::log(sum[i]));
      }
    }
  }
}

template <typename T, SoftmaxKind kKind>
void SoftmaxTyped(const Tensor& in, Tensor* out, int64_t outer, int64_t n, int64_t inner, ThreadPool* pool) {
  const T* x = in.data<T>();
  T* y = out->data<T>();
  const int64_t blocks = (inner + kColumnBlock - 1) / kColumnBlock;
  const int64_t grain = std::max<int64_t>(1, 16384 / std::max<int64_t>(1, n * std::min(inner, kColumnBlock)));
  ParallelFor(pool, outer * blocks, grain, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      const int64_t o = t / blocks;
      const int64_t i0 = (t % blocks) * kColumnBlock;
      const int64_t offset = o * n * inner + i0;
      SoftmaxBlock<T, kKind>(x + offset, y + offset, n, inner, std::min(kColumnBlock, inner - i0));
    }
  });
}

template <SoftmaxKind kKind>
Status SoftmaxKernel(OpContext& ctx) {
  SPARQ_RETURN_IF_ERROR(ctx.RequireInputs(1));
  const Tensor& x = ctx.input(0);
  if (IsHalfType(x.dtype())) return RunAsFloat32(ctx, SoftmaxKernel<kKind>, x.dtype());
  const bool coerce_2d = ctx.opset() < 13;
  const int64_t rank = static_cast<int64_t>(x.rank());
  SPARQ_ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(ctx, ctx.node().attr_int("axis", coerce_2d ? 1 : -1), rank));
  const size_t a = static_cast<size_t>(axis);
  const int64_t outer = DimProduct(x.shape(), 0, a);
  const int64_t n = coerce_2d ? DimProduct(x.shape(), a, x.rank()) : x.dim(a);
  const int64_t inner = coerce_2d ? 1 : DimProduct(x.shape(), a + 1, x.rank());
  Tensor out(x.dtype(), x.shape());
  if (x.numel() > 0) {
    switch (x.dtype()) {
      case DataType::kFloat32: SoftmaxTyped<float, kKind>(x, &out, outer, n, inner, ctx.pool()); break;
      case DataType::kFloat64: SoftmaxTyped<double, kKind>(x, &out, outer, n, inner, ctx.pool()); break;
      default:
        return ctx.NotSupported("input type " + DataTypeName(x.dtype()) + " is not supported (floats only)");
    }
  }
  ctx.set_output(0, std::move(out));
  return Status::OK();
}

}  // namespace

// sparq.Attention (runtime/passes/float_fusion.h): Q, K^T, V, an optional mask and
// an optional scale constant; then, each optional, q_scale and k_scale (Q and
// K^T multiplied by them first, torch's SDPA export) and nan_fill (the
// probabilities' NaNs replaced by it: Where(IsNaN(p), nan_fill, p));
// attribute scale_op "Mul", "Div" or "none";
// layout "bhsd" (the default) or "bshd" (then Q, K, V and y are the
// Transposes' other sides, transposed here). The nodes it replaces, on their
// reference kernels, in their order:
//   scores = MatMul([Mul(Q, q_scale)], [Mul(K^T, k_scale)]) [Mul(., scale) | Div(., scale)] [Add(., mask)]
//   p = Softmax(scores, axis -1) [Where(IsNaN(p), nan_fill, p)]
//   y = MatMul(p, V)
// so the fused graph's reference gives the unfused graph's bits.
Status Attention(OpContext& ctx) {
  SPARQ_RETURN_IF_ERROR(ctx.RequireInputs(3));
  const std::string scale_op = ctx.node().attr_string("scale_op", "none");
  if (scale_op != "none" && scale_op != "Mul" && scale_op != "Div") {
    return ctx.InvalidArgument("scale_op must be Mul, Div or none, got '" + scale_op + "'");
  }
  if (scale_op != "none" && !ctx.has_input(4)) return ctx.InvalidArgument("scale_op " + scale_op + " needs input 4");
  auto run = [&](const char* op, std::vector<const Tensor*> inputs, std::vector<Attribute> attrs, Tensor* out) {
    return RunReferenceStep(ctx, op, std::move(inputs), std::move(attrs), out);
  };
  // Layout "bshd": Q [b, m, h, d], K [b, n, h, d], V [b, n, h, dv], y [b, m, h, dv],
  // the Transposes that BERT's export puts around its attention.
  const std::string layout = ctx.node().attr_string("layout", "bhsd");
  if (layout != "bhsd" && layout != "bshd") return ctx.InvalidArgument("layout must be bhsd or bshd, got '" + layout + "'");
  const bool bshd = layout == "bshd";
  Tensor q, kt, v;
  if (bshd) {
    SPARQ_RETURN_IF_ERROR(run("Transpose", {&ctx.input(0)}, {Attribute::Ints("perm", {0, 2, 1, 3})}, &q));
    SPARQ_RETURN_IF_ERROR(run("Transpose", {&ctx.input(1)}, {Attribute::Ints("perm", {0, 2, 3, 1})}, &kt));
    SPARQ_RETURN_IF_ERROR(run("Transpose", {&ctx.input(2)}, {Attribute::Ints("perm", {0, 2, 1, 3})}, &v));
  }
  if (!bshd) q = ctx.input(0), kt = ctx.input(1);
  if (ctx.has_input(5)) SPARQ_RETURN_IF_ERROR(run("Mul", {&q, &ctx.input(5)}, {}, &q));
  if (ctx.has_input(6)) SPARQ_RETURN_IF_ERROR(run("Mul", {&kt, &ctx.input(6)}, {}, &kt));
  Tensor scores, p, y;
  SPARQ_RETURN_IF_ERROR(run("MatMul", {&q, &kt}, {}, &scores));
  if (scale_op != "none") SPARQ_RETURN_IF_ERROR(run(scale_op.c_str(), {&scores, &ctx.input(4)}, {}, &scores));
  if (ctx.has_input(3)) SPARQ_RETURN_IF_ERROR(run("Add", {&scores, &ctx.input(3)}, {}, &scores));
  SPARQ_RETURN_IF_ERROR(run("Softmax", {&scores}, {Attribute::Int("axis", -1)}, &p));
  if (ctx.has_input(7)) {
    Tensor nan;
    SPARQ_RETURN_IF_ERROR(run("IsNaN", {&p}, {}, &nan));
    SPARQ_RETURN_IF_ERROR(run("Where", {&nan, &ctx.input(7), &p}, {}, &p));
  }
  SPARQ_RETURN_IF_ERROR(run("MatMul", {&p, bshd ? &v : &ctx.input(2)}, {}, &y));
  if (bshd) SPARQ_RETURN_IF_ERROR(run("Transpose", {&y}, {Attribute::Ints("perm", {0, 2, 1, 3})}, &y));
  ctx.set_output(0, std::move(y));
  return Status::OK();
}

void RegisterSoftmaxOps(KernelRegistry& r) {
  r.Add({"Attention", kSparqDomain, 1, 99, Attention, "ref"});
  r.Add({"Softmax", "", 1, 99, SoftmaxKernel<SoftmaxKind::kSoftmax>, "ref"});
  r.Add({"LogSoftmax", "", 1, 99, SoftmaxKernel<SoftmaxKind::kLogSoftmax>, "ref"});
  r.Add({"Hardmax", "", 1, 99, SoftmaxKernel<SoftmaxKind::kHardmax>, "ref"});
}

}  // namespace sparq
