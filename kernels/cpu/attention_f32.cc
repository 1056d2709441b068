// sparq.Attention of float32 (attention_f32.h): the portable row and the
// registry row that splits the heads among the threads.
#include "kernels/cpu/attention_f32.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "kernels/cpu/activation_f32.h"
#include "kernels/cpu/dispatch.h"
#include "kernels/cpu/row_op.h"
#include "kernels/registry.h"

namespace sparq {
namespace cpu {

void AttentionHeadPortable(const AttentionF32Args& a) {
  float* s = a.scratch;
  for (int64_t i = 0; i < a.m; ++i) {
    const float* q = a.q + i * a.d;
    for (int64_t j = 0; j < a.n; ++j) {
      float acc = 0.0f;
      for (int64_t t = 0; t < a.d; ++t) acc += q[t] * a.kt[t * a.n + j];
      s[j] = a.divide ? acc / a.scale : acc * a.scale;
      if (a.mask != nullptr) s[j] += a.mask[i * a.mask_row_stride + j * a.mask_col_stride];
    }
    SoftmaxRowPortable(s, s, a.n);
    float* y = a.y + i * a.dv;
    std::fill(y, y + a.dv, 0.0f);
    for (int64_t j = 0; j < a.n; ++j)
      for (int64_t c = 0; c < a.dv; ++c) y[c] += s[j] * a.v[j * a.dv + c];
  }
}

}  // namespace cpu

namespace {

using cpu::PreparedRow;
using cpu::PrepareRow;
using cpu::RowKernel;

// The fast path: float32 Q [..., m, d], K^T [..., d, n], V [..., n, dv] with
// the same leading dimensions, a one-value scale of rank <= Q's, a float32
// mask that broadcasts to the scores [..., m, n] without adding dimensions;
// anything else runs the reference (the unfused nodes), which names errors.
Status RunAttentionF32(OpContext& ctx) {
  const std::string scale_op = ctx.node().attr_string("scale_op", "none");
  for (size_t i = 0; i < 3; ++i)
    if (!ctx.has_input(i) || ctx.input(i).dtype() != DataType::kFloat32) return RunReferenceKernel(ctx);
  const Tensor& q = ctx.input(0);
  const Tensor& kt = ctx.input(1);
  const Tensor& v = ctx.input(2);
  const size_t rank = q.rank();
  if (rank < 2 || kt.rank() != rank || v.rank() != rank) return RunReferenceKernel(ctx);
  for (size_t d = 0; d + 2 < rank; ++d)
    if (kt.dim(d) != q.dim(d) || v.dim(d) != q.dim(d)) return RunReferenceKernel(ctx);
  AttentionF32Args args;
  args.m = q.dim(rank - 2), args.d = q.dim(rank - 1), args.n = kt.dim(rank - 1), args.dv = v.dim(rank - 1);
  if (kt.dim(rank - 2) != args.d || v.dim(rank - 2) != args.n) return RunReferenceKernel(ctx);
  if (scale_op != "none") {
    if ((scale_op != "Mul" && scale_op != "Div") || !ctx.has_input(4)) return RunReferenceKernel(ctx);
    const Tensor& c = ctx.input(4);
    if (c.dtype() != DataType::kFloat32 || c.numel() != 1 || c.rank() > rank) return RunReferenceKernel(ctx);
    args.scale = c.data<float>()[0];
    args.divide = scale_op == "Div";
  }
  // The mask's strides over the scores' dimensions (0 where it broadcasts).
  std::vector<int64_t> mask_strides(rank, 0);
  if (ctx.has_input(3)) {
    const Tensor& mask = ctx.input(3);
    if (mask.dtype() != DataType::kFloat32 || mask.rank() > rank) return RunReferenceKernel(ctx);
    int64_t stride = 1;
    for (size_t k = 0; k < mask.rank(); ++k) {
      const size_t md = mask.rank() - 1 - k, sd = rank - 1 - k;
      const int64_t full = sd == rank - 1 ? args.n : sd == rank - 2 ? args.m : q.dim(sd);
      if (mask.dim(md) != 1 && mask.dim(md) != full) return RunReferenceKernel(ctx);
      mask_strides[sd] = mask.dim(md) == 1 ? 0 : stride;
      stride *= mask.dim(md);
    }
    args.mask = mask.data<float>();
    args.mask_row_stride = mask_strides[rank - 2];
    args.mask_col_stride = mask_strides[rank - 1];
  }
  Shape out_shape = q.shape();
  out_shape.back() = args.dv;
  Tensor y = Tensor::Uninitialized(DataType::kFloat32, out_shape);
  int64_t heads = 1;
  for (size_t d = 0; d + 2 < rank; ++d) heads *= q.dim(d);
  if (y.numel() == 0) {
    ctx.set_output(0, std::move(y));
    return Status::OK();
  }
  const AttentionF32Fn head_fn = PreparedRow<AttentionF32Fn>(ctx);
  ParallelFor(ctx.pool(), heads, 1, [&](int64_t h0, int64_t h1) {
    thread_local std::vector<float> scratch;
    if (scratch.size() < static_cast<size_t>(4 * args.n)) scratch.resize(static_cast<size_t>(4 * args.n));
    for (int64_t h = h0; h < h1; ++h) {
      AttentionF32Args head = args;
      head.q = q.data<float>() + h * args.m * args.d;
      head.kt = kt.data<float>() + h * args.d * args.n;
      head.v = v.data<float>() + h * args.n * args.dv;
      head.y = y.data<float>() + h * args.m * args.dv;
      if (head.mask != nullptr) {
        int64_t offset = 0, rest = h;
        for (size_t d = rank - 2; d-- > 0;) {  // the head's index, last leading dimension first
          offset += (rest % q.dim(d)) * mask_strides[d];
          rest /= q.dim(d);
        }
        head.mask += offset;
      }
      head.scratch = scratch.data();
      head_fn(head);
    }
  });
  ctx.set_output(0, std::move(y));
  return Status::OK();
}

}  // namespace

void RegisterCpuAttentionF32Ops(KernelRegistry& r) {
  r.Add({"Attention", kSparqDomain, 1, 99, RunAttentionF32, "attention_f32",
         WithoutContext(PrepareRow<CpuOp::kAttentionF32>, RowKernel)});
}

}  // namespace sparq
