// Reference kernels of the dense NN operators: Gemm, MatMul, Conv,
// ConvTranspose (the math is in gemm.h / conv.h), and the registration of the
// pooling operators (pool.cc) and Einsum (einsum.cc).
//
// Floating point computes in the input type (float16/bfloat16 via float32);
// integer Gemm/MatMul accumulate in 64 bits and wrap to the output type.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#include "kernels/ref/broadcast.h"
#include "kernels/ref/conv.h"
#include "kernels/ref/fused_conv.h"
#include "kernels/ref/gemm.h"
#include "kernels/ref/nn_common.h"

namespace sparq {
namespace {

// C[M,N] = alpha * op(A) * op(B) + beta * C for integer types, naive i-k-j.
// Products accumulate in 64-bit unsigned arithmetic (wrapping, no overflow UB)
// and wrap to T; alpha/beta other than 1/0 and 1/1 go through double.
template <typename T>
void GemmInteger(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, double alpha, const T* A, int64_t lda,
                 const T* B, int64_t ldb, double beta, T* C, int64_t ldc, ThreadPool* pool) {
  using Signed = std::conditional_t<std::is_signed_v<T>, int64_t, uint64_t>;  // how an accumulator reads back
  ParallelFor(pool, M, 1, [&](int64_t i0, int64_t i1) {
    std::vector<uint64_t> acc(static_cast<size_t>(N));
    for (int64_t i = i0; i < i1; ++i) {
      std::fill(acc.begin(), acc.end(), uint64_t{0});
      for (int64_t k = 0; k < K; ++k) {
        const auto a = static_cast<uint64_t>(static_cast<Signed>(trans_a ? A[k * lda + i] : A[i * lda + k]));
        for (int64_t j = 0; j < N; ++j)
          acc[j] += a * static_cast<uint64_t>(static_cast<Signed>(trans_b ? B[j * ldb + k] : B[k * ldb + j]));
      }
      T* c = C + i * ldc;
      for (int64_t j = 0; j < N; ++j) {
        const uint64_t c_old = static_cast<uint64_t>(static_cast<Signed>(c[j]));
        if (alpha == 1.0 && beta == 0.0) {
          c[j] = static_cast<T>(acc[j]);
        } else if (alpha == 1.0 && beta == 1.0) {
          c[j] = static_cast<T>(acc[j] + c_old);
        } else {
          const double prod = alpha * static_cast<double>(static_cast<Signed>(acc[j]));
          c[j] = static_cast<T>(prod + (beta == 0.0 ? 0.0 : beta * static_cast<double>(c[j])));
        }
      }
    }
  });
}

// Dispatch of one GEMM to the float reference or the integer loop.
template <typename T>
void GemmAny(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, double alpha, const T* A, int64_t lda,
             const T* B, int64_t ldb, double beta, T* C, int64_t ldc, ThreadPool* pool) {
  if constexpr (std::is_floating_point_v<T>) {
    GemmRef(trans_a, trans_b, M, N, K, static_cast<T>(alpha), A, lda, B, ldb, static_cast<T>(beta), C, ldc, pool);
  } else {
    GemmInteger(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, pool);
  }
}

// Calls fn(T{}) for the element types Gemm and MatMul compute in.
template <typename Fn>
Status VisitMatMulType(const OpContext& ctx, DataType type, Fn&& fn) {
  switch (type) {
    case DataType::kFloat32: return fn(float{});
    case DataType::kFloat64: return fn(double{});
    case DataType::kInt32: return fn(int32_t{});
    case DataType::kInt64: return fn(int64_t{});
    case DataType::kUInt32: return fn(uint32_t{});
    case DataType::kUInt64: return fn(uint64_t{});
    default: break;
  }
  return ctx.NotSupported("data type " + DataTypeName(type) + " is not supported");
}

// ---------------------------------------------------------------------------
// Gemm: Y = alpha * op(A) * op(B) + beta * C, C broadcast to [M, N].
// Opsets 1-10 require C; 11+ make it optional. The `broadcast` attribute of
// opsets 1-6 is accepted and C is always broadcast (a superset).

Status Gemm(OpContext& ctx) {
  SPARQ_RETURN_IF_ERROR(ctx.RequireInputs(ctx.opset() < 11 ? 3 : 2));
  SPARQ_RETURN_IF_ERROR(RequireSameType(ctx, "A", {{1, "B"}, {2, "C"}}));
  const Tensor& a = ctx.input(0);
  const Tensor& b = ctx.input(1);
  if (IsHalfType(a.dtype())) return RunInFloat32(ctx, Gemm);
  const Node& node = ctx.node();
  const bool trans_a = node.attr_int("transA", 0) != 0, trans_b = node.attr_int("transB", 0) != 0;
  const double alpha = node.attr_float("alpha", 1.0f), beta = node.attr_float("beta", 1.0f);
  if (a.rank() != 2 || b.rank() != 2) {
    return ctx.InvalidArgument("A has shape " + ShapeToString(a.shape()) + " and B has shape " +
                               ShapeToString(b.shape()) + ", both must be 2-D");
  }
  const int64_t M = trans_a ? a.dim(1) : a.dim(0), K = trans_a ? a.dim(0) : a.dim(1);
  const int64_t Kb = trans_b ? b.dim(1) : b.dim(0), N = trans_b ? b.dim(0) : b.dim(1);
  if (K != Kb) {
    return ctx.InvalidArgument("A has shape " + ShapeToString(a.shape()) + " (transA=" + std::to_string(trans_a) +
                               ", K=" + std::to_string(K) + ") but B has shape " + ShapeToString(b.shape()) +
                               " (transB=" + std::to_string(trans_b) + ", K=" + std::to_string(Kb) + ")");
  }
  const bool has_c = ctx.has_input(2);
  std::vector<int64_t> c_strides;
  if (has_c) {
    const Shape& cs = ctx.input(2).shape();
    bool ok = cs.size() <= 2;
    for (size_t i = 0; ok && i < cs.size(); ++i) {
      const int64_t want = (cs.size() - i == 1) ? N : M;
      ok = cs[i] == 1 || cs[i] == want;
    }
    if (!ok) {
      return ctx.InvalidArgument("C has shape " + ShapeToString(cs) + ", which does not broadcast to [" +
                                 std::to_string(M) + ", " + std::to_string(N) + "] (A has shape " +
                                 ShapeToString(a.shape()) + ", B has shape " + ShapeToString(b.shape()) + ")");
    }
    c_strides = BroadcastStrides(cs, {M, N});
  }
  Tensor y(a.dtype(), {M, N});
  SPARQ_RETURN_IF_ERROR(VisitMatMulType(ctx, a.dtype(), [&](auto tag) -> Status {
    using T = decltype(tag);
    T* out = y.data<T>();
    if (has_c && beta != 0.0) {
      const T* c = ctx.input(2).data<T>();
      for (int64_t i = 0; i < M; ++i)
        for (int64_t j = 0; j < N; ++j) out[i * N + j] = c[i * c_strides[0] + j * c_strides[1]];
    }
    GemmAny<T>(trans_a, trans_b, M, N, K, alpha, a.data<T>(), a.dim(1), b.data<T>(), b.dim(1),
               has_c ? beta : 0.0, out, N, ctx.pool());
    return Status::OK();
  }));
  ctx.set_output(0, std::move(y));
  return Status::OK();
}

// ---------------------------------------------------------------------------
// MatMul: numpy matmul. 1-D operands get a 1 prepended (A) or appended (B)
// that is removed from the result; batch dims broadcast.

Status MatMul(OpContext& ctx) {
  SPARQ_RETURN_IF_ERROR(ctx.RequireInputs(2));
  SPARQ_RETURN_IF_ERROR(RequireSameType(ctx, "A", {{1, "B"}}));
  const Tensor& a = ctx.input(0);
  const Tensor& b = ctx.input(1);
  if (IsHalfType(a.dtype())) return RunInFloat32(ctx, MatMul);
  if (a.rank() == 0 || b.rank() == 0) {
    return ctx.InvalidArgument("A has shape " + ShapeToString(a.shape()) + " and B has shape " +
                               ShapeToString(b.shape()) + ": MatMul operands must have rank >= 1");
  }
  Shape as = a.shape(), bs = b.shape();
  if (as.size() == 1) as.insert(as.begin(), 1);
  if (bs.size() == 1) bs.push_back(1);
  const int64_t M = as[as.size() - 2], K = as.back(), Kb = bs[bs.size() - 2], N = bs.back();
  if (K != Kb) {
    return ctx.InvalidArgument("A has shape " + ShapeToString(a.shape()) + " and B has shape " +
                               ShapeToString(b.shape()) + ": inner dims " + std::to_string(K) + " and " +
                               std::to_string(Kb) + " differ");
  }
  const Shape batch_a(as.begin(), as.end() - 2), batch_b(bs.begin(), bs.end() - 2);
  StatusOr<Shape> batch = BroadcastShapes({batch_a, batch_b});
  if (!batch.ok()) {
    return ctx.InvalidArgument("batch dims of A " + ShapeToString(a.shape()) + " and B " + ShapeToString(b.shape()) +
                               " do not broadcast: " + batch.status().message());
  }
  Shape y_shape = *batch;
  if (a.rank() > 1) y_shape.push_back(M);
  if (b.rank() > 1) y_shape.push_back(N);
  Tensor y(a.dtype(), y_shape);
  const int64_t batches = NumElements(*batch);

  // Offsets (in matrices) of A and B for every batch index, in order.
  std::vector<int64_t> a_index, b_index;
  a_index.reserve(batches);
  b_index.reserve(batches);
  ForEachBroadcast<2>(*batch, {BroadcastStrides(batch_a, *batch), BroadcastStrides(batch_b, *batch)},
                      [&](int64_t, const std::array<int64_t, 2>& off) {
                        a_index.push_back(off[0]);
                        b_index.push_back(off[1]);
                      });
  SPARQ_RETURN_IF_ERROR(VisitMatMulType(ctx, a.dtype(), [&](auto tag) -> Status {
    using T = decltype(tag);
    const T* ap = a.data<T>();
    const T* bp = b.data<T>();
    T* yp = y.data<T>();
    if (batches == 0 || M == 0 || N == 0) return Status::OK();
    // A batched over one shared B matrix ([B, S, K] x [K, N]): a single GEMM
    // over all rows of A (same per-element arithmetic, better blocking).
    if (NumElements(batch_b) == 1 && NumElements(batch_a) == batches) {
      GemmAny<T>(false, false, batches * M, N, K, 1.0, ap, K, bp, N, 0.0, yp, N, ctx.pool());
      return Status::OK();
    }
    ThreadPool* pool = ctx.pool();
    auto one = [&](int64_t i, ThreadPool* p) {
      GemmAny<T>(false, false, M, N, K, 1.0, ap + a_index[i] * M * K, K, bp + b_index[i] * K * N, N, 0.0,
                 yp + i * M * N, N, p);
    };
    if (pool != nullptr && pool->num_threads() > 1 && batches >= 2 * pool->num_threads()) {
      ParallelFor(pool, batches, 1, [&](int64_t b0, int64_t b1) {
        for (int64_t i = b0; i < b1; ++i) one(i, nullptr);
      });
    } else {
      for (int64_t i = 0; i < batches; ++i) one(i, pool);
    }
    return Status::OK();
  }));
  ctx.set_output(0, std::move(y));
  return Status::OK();
}

// ---------------------------------------------------------------------------
// Conv and ConvTranspose (opset 1 and 11 differ only in documentation).

// Checks the optional bias input (slot 2): shape [channels].
Status CheckBias(const OpContext& ctx, int64_t channels) {
  if (!ctx.has_input(2)) return Status::OK();
  const Shape& bs = ctx.input(2).shape();
  if (bs.size() != 1 || bs[0] != channels) {
    return ctx.InvalidArgument("B has shape " + ShapeToString(bs) + ", expected [" + std::to_string(channels) +
                               "] (one bias per output channel)");
  }
  return Status::OK();
}

template <bool kTranspose>
Status ConvKernel(OpContext& ctx) {
  SPARQ_RETURN_IF_ERROR(ctx.RequireInputs(2));
  SPARQ_RETURN_IF_ERROR(RequireSameType(ctx, "X", {{1, "W"}, {2, "B"}}));
  const Tensor& x = ctx.input(0);
  const Tensor& w = ctx.input(1);
  if (IsHalfType(x.dtype())) return RunInFloat32(ctx, ConvKernel<kTranspose>);
  if (x.dtype() != DataType::kFloat32 && x.dtype() != DataType::kFloat64)
    return ctx.NotSupported("data type " + DataTypeName(x.dtype()) + " is not supported");
  const Node& node = ctx.node();
  ConvParams params;
  AutoPad auto_pad;
  SPARQ_RETURN_IF_ERROR(ReadWindowAttributes(ctx, &params.window, &auto_pad));
  params.group = node.attr_int("group", 1);
  Shape y_shape;
  Status s = kTranspose ? PrepareConvTranspose(x.shape(), w.shape(), auto_pad, node.attr_ints("output_padding"),
                                               node.attr_ints("output_shape"), &params, &y_shape)
                        : PrepareConv(x.shape(), w.shape(), auto_pad, &params, &y_shape);
  if (!s.ok()) return s.WithContext(node.Describe());
  SPARQ_RETURN_IF_ERROR(CheckBias(ctx, y_shape[1]));
  Tensor y(x.dtype(), y_shape);
  ThreadPool* pool = ctx.pool();
  if (x.dtype() == DataType::kFloat32) {
    const float* bias = ctx.has_input(2) ? ctx.input(2).data<float>() : nullptr;
    auto fn = kTranspose ? ConvTransposeF32Ref : ConvF32Ref;
    fn(params, x.shape(), x.data<float>(), w.shape(), w.data<float>(), bias, y_shape, y.data<float>(), pool);
  } else {
    const double* bias = ctx.has_input(2) ? ctx.input(2).data<double>() : nullptr;
    auto fn = kTranspose ? ConvTransposeF64Ref : ConvF64Ref;
    fn(params, x.shape(), x.data<double>(), w.shape(), w.data<double>(), bias, y_shape, y.data<double>(), pool);
  }
  ctx.set_output(0, std::move(y));
  return Status::OK();
}

// ai.sparq FusedConv (runtime/passes/float_fusion.h): Conv, then the clamp of its
// activation, [out_min, out_max], in place, as Clip computes it; with
// activation "Silu", then x * Sigmoid(x) as the reference's sparq.Silu
// computes it (the sigmoid rounded to float, then the product).
Status FusedConvKernel(OpContext& ctx) {
  SPARQ_RETURN_IF_ERROR(ConvKernel<false>(ctx));
  Tensor& y = ctx.outputs()[0];
  if (y.dtype() != DataType::kFloat32) return ctx.NotSupported("FusedConv runs float32 only");
  const float lo = ctx.node().attr_float("out_min", -std::numeric_limits<float>::infinity());
  const float hi = ctx.node().attr_float("out_max", std::numeric_limits<float>::infinity());
  float* v = y.data<float>();
  for (int64_t i = 0; i < y.numel(); ++i) {
    const float above = v[i] < lo ? lo : v[i];  // NaN stays NaN
    v[i] = above > hi ? hi : above;
  }
  if (ctx.node().attr_string("activation", "") == "Silu")
    for (int64_t i = 0; i < y.numel(); ++i) v[i] = v[i] * (1.0f / (1.0f + std::exp(-v[i])));
  return Status::OK();
}

// sparq.PointwiseDepthwise (runtime/passes/float_fusion.h): its two FusedConv
// parts, one after the other.
Status PointwiseDepthwiseKernel(OpContext& ctx) {
  SPARQ_RETURN_IF_ERROR(ctx.RequireInputs(2));
  if (!ctx.has_input(3)) return ctx.InvalidArgument("input 3 (W_dw) is required");
  const auto [pointwise, depthwise] = PointwiseDepthwiseParts(ctx.node());
  auto in = [&ctx](size_t i) { return ctx.has_input(i) ? &ctx.input(i) : nullptr; };
  OpContext pw(pointwise, ctx.opset(), {in(0), in(1), in(2)}, ctx.pool());
  SPARQ_RETURN_IF_ERROR(FusedConvKernel(pw));
  OpContext dw(depthwise, ctx.opset(), {&pw.outputs()[0], in(3), in(4)}, ctx.pool());
  SPARQ_RETURN_IF_ERROR(FusedConvKernel(dw));
  ctx.set_output(0, std::move(dw.outputs()[0]));
  return Status::OK();
}

}  // namespace

std::pair<Node, Node> PointwiseDepthwiseParts(const Node& fused) {
  auto input = [&fused](size_t i) { return i < fused.inputs.size() ? fused.inputs[i] : std::string(); };
  Node pw;
  pw.name = fused.name + "/pointwise", pw.op_type = "FusedConv", pw.domain = kSparqDomain;
  pw.inputs = {input(0), input(1), input(2)};
  pw.outputs = {fused.name + "/pointwise:t"};
  pw.attributes = {Attribute::Float("out_min", fused.attr_float("pw_out_min", -std::numeric_limits<float>::infinity())),
                   Attribute::Float("out_max", fused.attr_float("pw_out_max", std::numeric_limits<float>::infinity()))};
  Node dw;
  dw.name = fused.name + "/depthwise", dw.op_type = "FusedConv", dw.domain = kSparqDomain;
  dw.inputs = {pw.outputs[0], input(3), input(4)};
  dw.outputs = fused.outputs;
  for (const Attribute& a : fused.attributes)
    if (a.name != "pw_out_min" && a.name != "pw_out_max") dw.attributes.push_back(a);
  return {std::move(pw), std::move(dw)};
}

void RegisterNnOps(KernelRegistry& r) {
  r.Add({"FusedConv", kSparqDomain, 1, 99, FusedConvKernel, "ref"});
  r.Add({"PointwiseDepthwise", kSparqDomain, 1, 99, PointwiseDepthwiseKernel, "ref"});
  r.Add({"Gemm", "", 1, 99, Gemm, "ref"});
  r.Add({"MatMul", "", 1, 99, MatMul, "ref"});
  r.Add({"Conv", "", 1, 99, ConvKernel<false>, "ref"});
  r.Add({"ConvTranspose", "", 1, 99, ConvKernel<true>, "ref"});
  RegisterPoolOps(r);
  RegisterEinsumOps(r);
}

}  // namespace sparq
