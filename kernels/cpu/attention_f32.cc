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
    const float* q = a.q + i * a.q_ld;
    std::fill(s, s + a.n, 0.0f);
    for (int64_t t = 0; t < a.d; ++t)  // each s[j] sums over t in order; rows of K^T read contiguously
      for (int64_t j = 0; j < a.n; ++j) s[j] += q[t] * a.kt[t * a.n + j];
    for (int64_t j = 0; j < a.n; ++j) {
      s[j] = a.divide ? s[j] / a.scale : s[j] * a.scale;
      if (a.mask != nullptr) s[j] += a.mask[i * a.mask_row_stride + j * a.mask_col_stride];
    }
    const NaNRowGuard<1> guard(a, s);
    SoftmaxRowPortable(s, s, a.n);
    guard.Fill(a, s);
    float* y = a.y + i * a.y_ld;
    std::fill(y, y + a.dv, 0.0f);
    for (int64_t j = 0; j < a.n; ++j)
      for (int64_t c = 0; c < a.dv; ++c) y[c] += s[j] * a.v[j * a.v_ld + c];
  }
}

}  // namespace cpu

namespace {

using cpu::PreparedRow;
using cpu::PrepareRow;
using cpu::RowKernel;

// The fast path: float32 Q [..., m, d], K^T [..., d, n], V [..., n, dv] with
// the same leading dimensions (layout "bshd": Q [b, m, h, d], K [b, n, h, d],
// V [b, n, h, dv] and y [b, m, h, dv], the Transposes around BERT's attention
// folded in), a one-value scale of rank <= Q's, a float32 mask that
// broadcasts to the scores [..., m, n] without adding dimensions, one-value
// q_scale / k_scale / nan_fill as the scale; anything else runs the reference
// (the unfused nodes), which names errors.
Status RunAttentionF32(OpContext& ctx) {
  const std::string scale_op = ctx.node().attr_string("scale_op", "none");
  const bool bshd = ctx.node().attr_string("layout", "bhsd") == "bshd";
  for (size_t i = 0; i < 3; ++i)
    if (!ctx.has_input(i) || ctx.input(i).dtype() != DataType::kFloat32) return RunReferenceKernel(ctx);
  const Tensor& q = ctx.input(0);
  const Tensor& k = ctx.input(1);
  const Tensor& v = ctx.input(2);
  const size_t rank = q.rank();
  if (rank < 2 || k.rank() != rank || v.rank() != rank || (bshd && rank != 4)) return RunReferenceKernel(ctx);
  // The scores' leading dimensions (batch, heads) and the matrices' sizes.
  std::vector<int64_t> lead;
  AttentionF32Args args;
  if (bshd) {
    lead = {q.dim(0), q.dim(2)};
    args.m = q.dim(1), args.d = q.dim(3), args.n = k.dim(1), args.dv = v.dim(3);
    if (k.dim(0) != q.dim(0) || k.dim(2) != q.dim(2) || k.dim(3) != args.d || v.dim(0) != q.dim(0) ||
        v.dim(1) != args.n || v.dim(2) != q.dim(2)) {
      return RunReferenceKernel(ctx);
    }
  } else {
    lead.assign(q.shape().begin(), q.shape().end() - 2);
    args.m = q.dim(rank - 2), args.d = q.dim(rank - 1), args.n = k.dim(rank - 1), args.dv = v.dim(rank - 1);
    for (size_t d = 0; d + 2 < rank; ++d)
      if (k.dim(d) != q.dim(d) || v.dim(d) != q.dim(d)) return RunReferenceKernel(ctx);
    if (k.dim(rank - 2) != args.d || v.dim(rank - 2) != args.n) return RunReferenceKernel(ctx);
  }
  const int64_t heads_per_batch = bshd ? lead[1] : 1;
  args.q_ld = args.d * heads_per_batch, args.v_ld = args.dv * heads_per_batch, args.y_ld = args.dv * heads_per_batch;
  if (scale_op != "none") {
    if ((scale_op != "Mul" && scale_op != "Div") || !ctx.has_input(4)) return RunReferenceKernel(ctx);
    const Tensor& c = ctx.input(4);
    if (c.dtype() != DataType::kFloat32 || c.numel() != 1 || c.rank() > rank) return RunReferenceKernel(ctx);
    args.scale = c.data<float>()[0];
    args.divide = scale_op == "Div";
  }
  const size_t srank = lead.size() + 2;
  // q_scale, k_scale, nan_fill (torch's SDPA export): one float32 value each,
  // of a rank that does not widen what it applies to.
  float q_scale = 1.0f, k_scale = 1.0f;
  const bool scale_q = ctx.has_input(5), scale_k = ctx.has_input(6);
  for (size_t i = 5; i < 8; ++i) {
    if (!ctx.has_input(i)) continue;
    const Tensor& c = ctx.input(i);
    if (c.dtype() != DataType::kFloat32 || c.numel() != 1 || c.rank() > (i == 7 ? srank : rank))
      return RunReferenceKernel(ctx);
    (i == 5 ? q_scale : i == 6 ? k_scale : args.fill) = c.data<float>()[0];
  }
  args.nan_fill = ctx.has_input(7);
  // The mask's strides over the scores' dimensions [lead..., m, n] (0 where it broadcasts).
  std::vector<int64_t> mask_strides(srank, 0);
  if (ctx.has_input(3)) {
    const Tensor& mask = ctx.input(3);
    if (mask.dtype() != DataType::kFloat32 || mask.rank() > srank) return RunReferenceKernel(ctx);
    int64_t stride = 1;
    for (size_t i = 0; i < mask.rank(); ++i) {
      const size_t md = mask.rank() - 1 - i, sd = srank - 1 - i;
      const int64_t full = sd == srank - 1 ? args.n : sd == srank - 2 ? args.m : lead[sd];
      if (mask.dim(md) != 1 && mask.dim(md) != full) return RunReferenceKernel(ctx);
      mask_strides[sd] = mask.dim(md) == 1 ? 0 : stride;
      stride *= mask.dim(md);
    }
    args.mask = mask.data<float>();
    args.mask_row_stride = mask_strides[srank - 2];
    args.mask_col_stride = mask_strides[srank - 1];
  }
  Shape out_shape = q.shape();
  out_shape.back() = args.dv;
  Tensor y = ctx.OutputBuffer(0, DataType::kFloat32, out_shape);
  int64_t heads = 1;
  for (int64_t l : lead) heads *= l;
  if (y.numel() == 0) {
    ctx.set_output(0, std::move(y));
    return Status::OK();
  }
  const AttentionF32Fn head_fn = PreparedRow<AttentionF32Fn>(ctx);
  ParallelFor(ctx.pool(), heads, 1, [&](int64_t h0, int64_t h1) {
    thread_local std::vector<float> scratch, kt_packed, q_packed;
    if (scratch.size() < static_cast<size_t>(4 * args.n)) scratch.resize(static_cast<size_t>(4 * args.n));
    if ((bshd || scale_k) && kt_packed.size() < static_cast<size_t>(args.d * args.n)) kt_packed.resize(args.d * args.n);
    if (scale_q && q_packed.size() < static_cast<size_t>(args.m * args.d)) q_packed.resize(args.m * args.d);
    for (int64_t h = h0; h < h1; ++h) {
      AttentionF32Args head = args;
      if (bshd) {  // batch b, head e: Q[b, :, e, :] and so on; K^T of the head packed
        const int64_t b = h / lead[1], e = h % lead[1];
        head.q = q.data<float>() + (b * args.m * lead[1] + e) * args.d;
        head.v = v.data<float>() + (b * args.n * lead[1] + e) * args.dv;
        head.y = y.data<float>() + (b * args.m * lead[1] + e) * args.dv;
        const float* kh = k.data<float>() + (b * args.n * lead[1] + e) * args.d;
        const int64_t k_ld = args.d * lead[1];
        for (int64_t t = 0; t < args.d; ++t)  // K's rows of the head stay in L1 (n * d floats)
          for (int64_t j = 0; j < args.n; ++j) kt_packed[t * args.n + j] = kh[j * k_ld + t] * k_scale;  // x 1: exact
        head.kt = kt_packed.data();
      } else {
        head.q = q.data<float>() + h * args.m * args.d;
        head.kt = k.data<float>() + h * args.d * args.n;
        head.v = v.data<float>() + h * args.n * args.dv;
        head.y = y.data<float>() + h * args.m * args.dv;
        if (scale_k) {  // the unfused Mul's products
          for (int64_t e = 0; e < args.d * args.n; ++e) kt_packed[e] = head.kt[e] * k_scale;
          head.kt = kt_packed.data();
        }
      }
      if (scale_q) {
        for (int64_t r = 0; r < args.m; ++r)
          for (int64_t t = 0; t < args.d; ++t) q_packed[r * args.d + t] = head.q[r * head.q_ld + t] * q_scale;
        head.q = q_packed.data(), head.q_ld = args.d;
      }
      if (head.mask != nullptr) {
        int64_t offset = 0, rest = h;
        for (size_t d = lead.size(); d-- > 0;) {  // the head's index, last leading dimension first
          offset += (rest % lead[d]) * mask_strides[d];
          rest /= lead[d];
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
