// CUDA rows of the GEMM-shaped operators (cuda_rows.h lists them): MatMul and
// Gemm on cuBLASLt, Conv as im2col + cuBLASLt (one image at a time, the
// column buffer reused in stream order) or the own depthwise kernel, the
// INT8 QLinearMatMul / QLinearConv on cuBLASLt's IMMA GEMM (int32 sums) and
// the requantize kernel, and MatMul with a block-sparse float16 weight on
// cuSPARSE's Blocked-ELL SpMM.
//
// INT8 operands are made signed (uint8 x -> x ^ 0x80 = x - 128, zero points
// shifted alike, so every difference x - zero_point is unchanged), and the
// zero points are applied after the GEMM (RequantArgs in launch.h):
//   sum_k (a - za)(b - zb) = sum_k a b - zb sum_k a - za sum_k b + K za zb
// which equals the reference's int32 sums modulo 2^32, i.e. exactly.
#include <limits>
#include <mutex>
#include <string>
#include <vector>

#include "kernels/cuda/cuda_rows.h"
#include "kernels/cuda/cuda_status.h"
#include "kernels/cuda/gemm_cublaslt.h"
#include "kernels/cuda/geometry.h"
#include "kernels/cuda/launch.h"
#include "kernels/cuda/layouts.h"
#include "kernels/cuda/spmm_blocked_ell.h"
#include "kernels/ref/fused_conv.h"
#include "kernels/ref/quantize.h"

namespace sparq {
namespace cuda {
namespace {

// A float16 weight runs on Blocked-ELL only at or above this block sparsity
// (issue 23's H200 measurements: break-even near 80% with blocks of 32 / 64).
constexpr double kBlockedEllMinSparsity = 0.8;
constexpr int64_t kBlockedEllBlocks[] = {64, 32};

int64_t Product(const Shape& s, size_t begin, size_t end) {
  int64_t p = 1;
  for (size_t i = begin; i < end && i < s.size(); ++i) p *= s[i];
  return p;
}

StatusOr<LtGemmType> FloatGemmType(const OpContext& ctx, const CudaContext& cuda, DataType type) {
  switch (type) {
    case DataType::kFloat32: return cuda.options().allow_tf32 ? LtGemmType::kTF32 : LtGemmType::kF32;
    case DataType::kFloat16: return LtGemmType::kF16;
    default: return ctx.NotSupported("the cuBLASLt GEMM rows take float32 / float16, not " + DataTypeName(type));
  }
}

// One cuBLASLt GEMM on ctx's stream, its plan cached by the context.
Status RunGemm(CudaContext& cuda, const LtGemmArgs& args) {
  SPARQ_ASSIGN_OR_RETURN(std::shared_ptr<const LtGemm> gemm, cuda.Gemm(args));
  SPARQ_ASSIGN_OR_RETURN(std::shared_ptr<uint8_t> workspace, Scratch(cuda, gemm->workspace_size()));
  return gemm->Run(cuda.lt(), args, workspace.get(), cuda.stream());
}

// ---------------------------------------------------------------------------
// MatMul (float32 / float16): numpy matmul for operands of rank >= 2 whose
// batch dimensions are equal, or where one side has none.

struct MatMulShape {
  int64_t m = 0, n = 0, k = 0, batch = 1;
  int64_t stride_a = 0, stride_b = 0, stride_c = 0;
  Shape out;
};

StatusOr<MatMulShape> PlanMatMulShape(const OpContext& ctx, const Shape& a, const Shape& b) {
  if (a.size() < 2 || b.size() < 2) return ctx.NotSupported("the CUDA MatMul rows take operands of rank >= 2");
  MatMulShape s;
  s.k = a.back();
  if (b[b.size() - 2] != s.k) {
    return ctx.InvalidArgument("MatMul of " + ShapeToString(a) + " and " + ShapeToString(b) + ": inner dimensions differ");
  }
  s.n = b.back();
  if (b.size() == 2) {  // batch folded into the rows of A
    s.m = Product(a, 0, a.size() - 1);
    s.out = Shape(a.begin(), a.end() - 1);
    s.out.push_back(s.n);
    return s;
  }
  s.m = a[a.size() - 2];
  const Shape b_batch(b.begin(), b.end() - 2);
  if (a.size() == 2) {
    s.batch = Product(b_batch, 0, b_batch.size());
    s.stride_b = s.k * s.n;
    s.stride_c = s.m * s.n;
    s.out = b_batch;
  } else {
    const Shape a_batch(a.begin(), a.end() - 2);
    if (a_batch != b_batch) return ctx.NotSupported("the CUDA MatMul rows do not broadcast batch dimensions");
    s.batch = Product(a_batch, 0, a_batch.size());
    s.stride_a = s.m * s.k;
    s.stride_b = s.k * s.n;
    s.stride_c = s.m * s.n;
    s.out = a_batch;
  }
  s.out.push_back(s.m);
  s.out.push_back(s.n);
  return s;
}

Status MatMulDense(OpContext& ctx) {
  SPARQ_RETURN_IF_ERROR(RequireDeviceInput(ctx, 0));
  SPARQ_RETURN_IF_ERROR(RequireDeviceInput(ctx, 1));
  SPARQ_ASSIGN_OR_RETURN(CudaContext * cuda, CudaContextOf(ctx));
  const Tensor& a = ctx.input(0);
  const Tensor& b = ctx.input(1);
  if (a.dtype() != b.dtype()) return ctx.InvalidArgument("A and B differ in type");
  SPARQ_ASSIGN_OR_RETURN(const LtGemmType type, FloatGemmType(ctx, *cuda, a.dtype()));
  SPARQ_ASSIGN_OR_RETURN(const MatMulShape s, PlanMatMulShape(ctx, a.shape(), b.shape()));
  SPARQ_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, a.dtype(), s.out));
  if (y->numel() == 0) return Status::OK();
  LtGemmArgs args;
  args.type = type;
  args.m = s.m;
  args.n = s.n;
  args.k = s.k;
  args.a = a.raw_data();
  args.lda = s.k;
  args.b = b.raw_data();
  args.ldb = s.n;
  args.c = y->raw_data();
  args.ldc = s.n;
  args.batch = s.batch;
  args.stride_a = s.stride_a;
  args.stride_b = s.stride_b;
  args.stride_c = s.stride_c;
  return RunGemm(*cuda, args).WithContext(ctx.node().Describe());
}

// Names the kernel by a constant weight's type (gemm_f32_cublaslt, gemm_f16_cublaslt;
// float32 runs as TF32 when the context allows it); `check` may decline the node.
PrepareFn NameByWeight(Status (*check)(const Node&, const std::vector<const Tensor*>&)) {
  return [check](const Node& node, const std::vector<const Tensor*>& constants,
                 const PrepareContext&) -> StatusOr<PreparedKernel> {
    if (check != nullptr) SPARQ_RETURN_IF_ERROR(check(node, constants));
    PreparedKernel k;
    const Tensor* w = constants.size() > 1 ? constants[1] : nullptr;
    if (w != nullptr && w->dtype() == DataType::kFloat32) k.kernel_name = "gemm_f32_cublaslt";
    if (w != nullptr && w->dtype() == DataType::kFloat16) k.kernel_name = "gemm_f16_cublaslt";
    return k;
  };
}

// ---------------------------------------------------------------------------
// Gemm: Y = alpha * op(A) op(B) (+ C, broadcast, when beta is 1)

Status CheckGemm(const Node& node, const std::vector<const Tensor*>&) {
  const float beta = node.attr_float("beta", 1.0f);
  if (node.inputs.size() > 2 && !node.inputs[2].empty() && beta != 1.0f) {
    return Status::NotSupported(node.Describe() + ": gemm_cublaslt adds C with beta = 1 only");
  }
  return Status::OK();
}

Status Gemm(OpContext& ctx) {
  SPARQ_RETURN_IF_ERROR(RequireDeviceInput(ctx, 0));
  SPARQ_RETURN_IF_ERROR(RequireDeviceInput(ctx, 1));
  SPARQ_ASSIGN_OR_RETURN(CudaContext * cuda, CudaContextOf(ctx));
  const Tensor& a = ctx.input(0);
  const Tensor& b = ctx.input(1);
  if (a.rank() != 2 || b.rank() != 2) return ctx.InvalidArgument("Gemm takes 2-D A and B");
  if (a.dtype() != b.dtype()) return ctx.InvalidArgument("A and B differ in type");
  SPARQ_ASSIGN_OR_RETURN(const LtGemmType type, FloatGemmType(ctx, *cuda, a.dtype()));
  const bool ta = ctx.node().attr_int("transA", 0) != 0, tb = ctx.node().attr_int("transB", 0) != 0;
  const int64_t m = ta ? a.dim(1) : a.dim(0), k = ta ? a.dim(0) : a.dim(1);
  const int64_t kb = tb ? b.dim(1) : b.dim(0), n = tb ? b.dim(0) : b.dim(1);
  if (k != kb) return ctx.InvalidArgument("Gemm of " + ShapeToString(a.shape()) + " and " + ShapeToString(b.shape()) + ": inner dimensions differ");
  const bool has_c = ctx.has_input(2) && ctx.node().attr_float("beta", 1.0f) != 0.0f;
  if (has_c) {
    SPARQ_RETURN_IF_ERROR(RequireDeviceInput(ctx, 2));
    if (a.dtype() != DataType::kFloat32 || ctx.input(2).dtype() != DataType::kFloat32) {
      return ctx.NotSupported("gemm_cublaslt adds C to float32 results only");
    }
  }
  SPARQ_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, a.dtype(), {m, n}));
  if (y->numel() == 0) return Status::OK();
  LtGemmArgs args;
  args.type = type;
  args.m = m;
  args.n = n;
  args.k = k;
  args.a = a.raw_data();
  args.lda = a.dim(1);
  args.trans_a = ta;
  args.b = b.raw_data();
  args.ldb = b.dim(1);
  args.trans_b = tb;
  args.c = y->raw_data();
  args.ldc = n;
  args.alpha = ctx.node().attr_float("alpha", 1.0f);
  SPARQ_RETURN_IF_ERROR(RunGemm(*cuda, args).WithContext(ctx.node().Describe()));
  if (!has_c) return Status::OK();
  const Shape& c = ctx.input(2).shape();
  const int64_t y_dims[2] = {m, n};
  BroadcastPlan plan;
  int64_t out_dims[kMaxRank];
  int out_rank = 0;
  SPARQ_RETURN_IF_ERROR(PlanBroadcast(y_dims, 2, c.data(), static_cast<int>(c.size()), &plan, out_dims, &out_rank)
                            .WithContext(ctx.node().Describe()));
  if (out_rank != 2 || out_dims[0] != m || out_dims[1] != n) {
    return ctx.InvalidArgument("C of shape " + ShapeToString(c) + " does not broadcast to [M, N]");
  }
  float* yp = static_cast<float*>(y->raw_data());
  return LaunchBinaryF32(BinaryOp::kAdd, yp, static_cast<const float*>(ctx.input(2).raw_data()), yp, plan,
                         cuda->stream());
}

// ---------------------------------------------------------------------------
// Conv (float32, 2-D)

Status CheckConvIm2Col(const Node& node, const std::vector<const Tensor*>& constants) {
  if (node.attr_int("group", 1) != 1) return Status::NotSupported(node.Describe() + ": conv_f32_im2col_cublaslt takes group 1");
  if (constants.size() > 1 && constants[1] != nullptr && constants[1]->rank() != 4) {
    return Status::NotSupported(node.Describe() + ": the CUDA Conv rows are 2-D only");
  }
  return Status::OK();
}

Status CheckConvDepthwise(const Node& node, const std::vector<const Tensor*>& constants) {
  const int64_t group = node.attr_int("group", 1);
  if (group <= 1) return Status::NotSupported(node.Describe() + ": conv_dw_f32_cuda takes depthwise convolutions only");
  if (constants.size() > 1 && constants[1] != nullptr) {
    const Shape& w = constants[1]->shape();
    if (w.size() != 4 || w[0] != group || w[1] != 1) {
      return Status::NotSupported(node.Describe() + ": conv_dw_f32_cuda takes weights [C, 1, kh, kw] with group = C");
    }
  }
  return Status::OK();
}

// Resolves the geometry of a 2-D Conv on x and w (geometry.h).
StatusOr<Conv2dGeometry> ConvGeometryOf(const OpContext& ctx, const Tensor& x, const Tensor& w, Shape* y_shape) {
  return Conv2dGeometryOf(ctx, x.shape(), w.shape(), y_shape);
}

Status ConvIm2ColF32(OpContext& ctx) {
  for (size_t i = 0; i < 2; ++i) {
    SPARQ_RETURN_IF_ERROR(RequireDeviceInput(ctx, i));
    SPARQ_RETURN_IF_ERROR(RequireInputType(ctx, i, DataType::kFloat32, "conv_f32_im2col_cublaslt"));
  }
  if (ctx.node().attr_int("group", 1) != 1) return ctx.NotSupported("conv_f32_im2col_cublaslt takes group 1");
  SPARQ_ASSIGN_OR_RETURN(CudaContext * cuda, CudaContextOf(ctx));
  const Tensor& x = ctx.input(0);
  const Tensor& w = ctx.input(1);
  Shape y_shape;
  SPARQ_ASSIGN_OR_RETURN(const Conv2dGeometry g, ConvGeometryOf(ctx, x, w, &y_shape));
  SPARQ_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, DataType::kFloat32, y_shape));
  if (y->numel() == 0) return Status::OK();
  const int64_t K = g.patch(), P = g.pixels(), M = g.out_channels;
  SPARQ_ASSIGN_OR_RETURN(std::shared_ptr<uint8_t> col, Scratch(*cuda, static_cast<size_t>(P * K) * sizeof(float)));
  const float* xp = static_cast<const float*>(x.raw_data());
  float* yp = static_cast<float*>(y->raw_data());
  for (int64_t n = 0; n < g.batch; ++n) {
    SPARQ_RETURN_IF_ERROR(LaunchIm2Col(xp + n * g.channels * g.height * g.width, col.get(), 4, 0u, g, cuda->stream()));
    LtGemmArgs args;  // y[n] [M, P] = w [M, K] * col [P, K]^T
    args.type = cuda->options().allow_tf32 ? LtGemmType::kTF32 : LtGemmType::kF32;
    args.m = M;
    args.n = P;
    args.k = K;
    args.a = w.raw_data();
    args.lda = K;
    args.b = col.get();
    args.ldb = K;
    args.trans_b = true;
    args.c = yp + n * M * P;
    args.ldc = P;
    SPARQ_RETURN_IF_ERROR(RunGemm(*cuda, args).WithContext(ctx.node().Describe()));
  }
  if (ctx.has_input(2)) {
    SPARQ_RETURN_IF_ERROR(RequireDeviceInput(ctx, 2));
    SPARQ_RETURN_IF_ERROR(RequireInputType(ctx, 2, DataType::kFloat32, "conv_f32_im2col_cublaslt"));
    if (ctx.input(2).numel() != M) return ctx.InvalidArgument("B must have one value per output channel");
    SPARQ_RETURN_IF_ERROR(LaunchAddChannelBiasF32(yp, static_cast<const float*>(ctx.input(2).raw_data()), g.batch, M, P,
                                                  cuda->stream()));
  }
  return Status::OK();
}

Status ConvDepthwiseF32(OpContext& ctx) {
  for (size_t i = 0; i < 2; ++i) {
    SPARQ_RETURN_IF_ERROR(RequireDeviceInput(ctx, i));
    SPARQ_RETURN_IF_ERROR(RequireInputType(ctx, i, DataType::kFloat32, "conv_dw_f32_cuda"));
  }
  SPARQ_ASSIGN_OR_RETURN(CudaContext * cuda, CudaContextOf(ctx));
  const Tensor& x = ctx.input(0);
  const Tensor& w = ctx.input(1);
  const int64_t group = ctx.node().attr_int("group", 1);
  if (x.rank() != 4 || w.rank() != 4 || group != x.dim(1) || w.dim(0) != group || w.dim(1) != 1) {
    return ctx.NotSupported("conv_dw_f32_cuda takes x [N, C, H, W], w [C, 1, kh, kw] and group = C");
  }
  Shape y_shape;
  SPARQ_ASSIGN_OR_RETURN(Conv2dGeometry g, ConvGeometryOf(ctx, x, w, &y_shape));
  g.channels = x.dim(1);  // one channel per group: the kernel walks all C planes
  const float* bias = nullptr;
  if (ctx.has_input(2)) {
    SPARQ_RETURN_IF_ERROR(RequireDeviceInput(ctx, 2));
    SPARQ_RETURN_IF_ERROR(RequireInputType(ctx, 2, DataType::kFloat32, "conv_dw_f32_cuda"));
    if (ctx.input(2).numel() != group) return ctx.InvalidArgument("B must have one value per output channel");
    bias = static_cast<const float*>(ctx.input(2).raw_data());
  }
  SPARQ_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, DataType::kFloat32, y_shape));
  return LaunchDepthwiseConvF32(static_cast<const float*>(x.raw_data()), static_cast<const float*>(w.raw_data()), bias,
                                static_cast<float*>(y->raw_data()), g, cuda->stream());
}

// sparq.FusedConv (runtime/passes/float_fusion.h): the convolution, then its
// clamp [out_min, out_max] and, with activation "Silu", x * Sigmoid(x), in place.
Status ApplyFusedActivation(OpContext& ctx, CudaContext& cuda) {
  Tensor& y = ctx.outputs()[0];
  float* p = static_cast<float*>(y.raw_data());
  const float lo = ctx.node().attr_float("out_min", -std::numeric_limits<float>::infinity());
  const float hi = ctx.node().attr_float("out_max", std::numeric_limits<float>::infinity());
  SPARQ_RETURN_IF_ERROR(LaunchUnaryF32(UnaryOp::kClip, p, p, y.numel(), lo, hi, 0.0f, cuda.stream()));
  if (ctx.node().attr_string("activation", "") == "Silu") {
    SPARQ_RETURN_IF_ERROR(LaunchUnaryF32(UnaryOp::kSilu, p, p, y.numel(), 0.0f, 0.0f, 0.0f, cuda.stream()));
  }
  return Status::OK();
}

template <Status (*kConv)(OpContext&)>
Status FusedConvF32(OpContext& ctx) {
  SPARQ_RETURN_IF_ERROR(kConv(ctx));
  SPARQ_ASSIGN_OR_RETURN(CudaContext * cuda, CudaContextOf(ctx));
  return ApplyFusedActivation(ctx, *cuda);
}

// sparq.PointwiseDepthwise: its two FusedConv parts (kernels/ref/fused_conv.h), one after the other.
Status PointwiseDepthwiseF32(OpContext& ctx) {
  SPARQ_RETURN_IF_ERROR(ctx.RequireInputs(2));
  if (!ctx.has_input(3)) return ctx.InvalidArgument("input 3 (W_dw) is required");
  SPARQ_ASSIGN_OR_RETURN(CudaContext * cuda, CudaContextOf(ctx));
  const auto [pointwise, depthwise] = PointwiseDepthwiseParts(ctx.node());
  auto in = [&ctx](size_t i) { return ctx.has_input(i) ? &ctx.input(i) : nullptr; };
  OpContext pw(pointwise, ctx.opset(), {in(0), in(1), in(2)}, *cuda);
  SPARQ_RETURN_IF_ERROR(FusedConvF32<ConvIm2ColF32>(pw));
  const Tensor t = pw.outputs()[0];
  OpContext dw(depthwise, ctx.opset(), {&t, in(3), in(4)}, *cuda);
  SPARQ_RETURN_IF_ERROR(FusedConvF32<ConvDepthwiseF32>(dw));
  ctx.set_output(0, dw.outputs()[0]);
  return Status::OK();
}

Status CheckPointwiseDepthwise(const Node& node, const std::vector<const Tensor*>&) {
  const auto parts = PointwiseDepthwiseParts(node);
  if (parts.first.attr_int("group", 1) != 1) return Status::NotSupported(node.Describe() + ": the pointwise part is grouped");
  if (parts.second.attr_int("group", 1) <= 1) return Status::NotSupported(node.Describe() + ": the depthwise part is not");
  return Status::OK();
}

// ---------------------------------------------------------------------------
// sparq.Attention (kernels/ref/softmax.cc): the nodes it replaced, on the
// CUDA kernels: scores = Q K^T [* or / scale] [+ mask]; y = Softmax(scores) V;
// layout "bshd" transposes Q, K, V and y around them.

StatusOr<Tensor> PermuteOnDevice(CudaContext& cuda, const Tensor& x, const std::vector<int64_t>& perm) {
  const size_t rank = x.rank();
  std::vector<int64_t> strides(rank, 1);
  for (size_t d = rank; d-- > 1;) strides[d - 1] = strides[d] * x.dim(d);
  PermutePlan plan;
  plan.rank = static_cast<int>(rank);
  plan.numel = x.numel();
  Shape out(rank);
  for (size_t d = 0; d < rank; ++d) {
    out[d] = x.dim(static_cast<size_t>(perm[d]));
    plan.out_dims[d] = out[d];
    plan.in_strides[d] = strides[static_cast<size_t>(perm[d])];
  }
  SPARQ_ASSIGN_OR_RETURN(Tensor y, cuda.AllocateTensor(x.dtype(), out));
  SPARQ_RETURN_IF_ERROR(LaunchPermute(x.raw_data(), y.raw_data(), static_cast<int>(DataTypeSize(x.dtype())), plan,
                                      cuda.stream()));
  return y;
}

StatusOr<Tensor> MatMulOnDevice(const OpContext& ctx, CudaContext& cuda, const Tensor& a, const Tensor& b) {
  SPARQ_ASSIGN_OR_RETURN(const MatMulShape s, PlanMatMulShape(ctx, a.shape(), b.shape()));
  SPARQ_ASSIGN_OR_RETURN(Tensor y, cuda.AllocateTensor(a.dtype(), s.out));
  if (y.numel() == 0) return y;
  LtGemmArgs args;
  args.type = cuda.options().allow_tf32 ? LtGemmType::kTF32 : LtGemmType::kF32;
  args.m = s.m;
  args.n = s.n;
  args.k = s.k;
  args.a = a.raw_data();
  args.lda = s.k;
  args.b = b.raw_data();
  args.ldb = s.n;
  args.c = y.raw_data();
  args.ldc = s.n;
  args.batch = s.batch;
  args.stride_a = s.stride_a;
  args.stride_b = s.stride_b;
  args.stride_c = s.stride_c;
  SPARQ_RETURN_IF_ERROR(RunGemm(cuda, args).WithContext(ctx.node().Describe()));
  return y;
}

// y = y op b in place, b broadcast to y's shape.
Status BinaryInPlace(const OpContext& ctx, CudaContext& cuda, BinaryOp op, Tensor* y, const Tensor& b) {
  BroadcastPlan plan;
  int64_t out_dims[kMaxRank];
  int out_rank = 0;
  SPARQ_RETURN_IF_ERROR(PlanBroadcast(y->shape().data(), static_cast<int>(y->rank()), b.shape().data(),
                                      static_cast<int>(b.rank()), &plan, out_dims, &out_rank)
                            .WithContext(ctx.node().Describe()));
  if (Shape(out_dims, out_dims + out_rank) != y->shape()) {
    return ctx.NotSupported("attention_f32_cuda: an input of shape " + ShapeToString(b.shape()) +
                            " would grow the scores " + ShapeToString(y->shape()));
  }
  float* p = static_cast<float*>(y->raw_data());
  return LaunchBinaryF32(op, p, static_cast<const float*>(b.raw_data()), p, plan, cuda.stream());
}

Status AttentionF32(OpContext& ctx) {
  SPARQ_RETURN_IF_ERROR(ctx.RequireInputs(3));
  for (size_t i = 0; i < 5; ++i) {
    if (!ctx.has_input(i)) continue;
    SPARQ_RETURN_IF_ERROR(RequireDeviceInput(ctx, i));
    SPARQ_RETURN_IF_ERROR(RequireInputType(ctx, i, DataType::kFloat32, "attention_f32_cuda"));
  }
  SPARQ_ASSIGN_OR_RETURN(CudaContext * cuda, CudaContextOf(ctx));
  const std::string scale_op = ctx.node().attr_string("scale_op", "none");
  if (scale_op != "none" && scale_op != "Mul" && scale_op != "Div") return ctx.InvalidArgument("scale_op must be Mul, Div or none");
  if (scale_op != "none" && !ctx.has_input(4)) return ctx.InvalidArgument("scale_op " + scale_op + " needs input 4");
  const std::string layout = ctx.node().attr_string("layout", "bhsd");
  if (layout != "bhsd" && layout != "bshd") return ctx.InvalidArgument("layout must be bhsd or bshd");
  const bool bshd = layout == "bshd";
  Tensor q = ctx.input(0), kt = ctx.input(1), v = ctx.input(2);
  if (bshd) {
    if (q.rank() != 4 || kt.rank() != 4 || v.rank() != 4) return ctx.InvalidArgument("layout bshd takes 4-D Q, K, V");
    SPARQ_ASSIGN_OR_RETURN(q, PermuteOnDevice(*cuda, ctx.input(0), {0, 2, 1, 3}));
    SPARQ_ASSIGN_OR_RETURN(kt, PermuteOnDevice(*cuda, ctx.input(1), {0, 2, 3, 1}));
    SPARQ_ASSIGN_OR_RETURN(v, PermuteOnDevice(*cuda, ctx.input(2), {0, 2, 1, 3}));
  }
  SPARQ_ASSIGN_OR_RETURN(Tensor scores, MatMulOnDevice(ctx, *cuda, q, kt));
  if (scale_op != "none") {
    SPARQ_RETURN_IF_ERROR(BinaryInPlace(ctx, *cuda, scale_op == "Mul" ? BinaryOp::kMul : BinaryOp::kDiv, &scores,
                                        ctx.input(4)));
  }
  if (ctx.has_input(3)) SPARQ_RETURN_IF_ERROR(BinaryInPlace(ctx, *cuda, BinaryOp::kAdd, &scores, ctx.input(3)));
  if (scores.rank() == 0) return ctx.InvalidArgument("scores of rank 0");
  const int64_t n = scores.shape().back();
  float* sp = static_cast<float*>(scores.raw_data());
  SPARQ_RETURN_IF_ERROR(LaunchSoftmaxRowsF32(sp, sp, n > 0 ? scores.numel() / n : 0, n, cuda->stream()));
  SPARQ_ASSIGN_OR_RETURN(Tensor y, MatMulOnDevice(ctx, *cuda, scores, v));
  if (bshd) {
    SPARQ_ASSIGN_OR_RETURN(y, PermuteOnDevice(*cuda, y, {0, 2, 1, 3}));
  }
  ctx.set_output(0, std::move(y));
  return Status::OK();
}

// ---------------------------------------------------------------------------
// INT8: QLinearMatMul and QLinearConv

// An int8 device view of an int8 / uint8 tensor: uint8 shifted into a scratch buffer.
struct SignedView {
  const int8_t* data = nullptr;
  std::shared_ptr<uint8_t> holder;
  bool shifted = false;
};

StatusOr<SignedView> AsSigned(const OpContext& ctx, CudaContext& cuda, const Tensor& t, const char* what) {
  SignedView v;
  if (t.dtype() == DataType::kInt8) {
    v.data = static_cast<const int8_t*>(t.raw_data());
    return v;
  }
  if (t.dtype() != DataType::kUInt8) {
    return ctx.NotSupported(std::string(what) + " has type " + DataTypeName(t.dtype()) + "; expected int8 or uint8");
  }
  SPARQ_ASSIGN_OR_RETURN(v.holder, Scratch(cuda, static_cast<size_t>(t.numel())));
  SPARQ_RETURN_IF_ERROR(
      LaunchShiftU8ToS8(static_cast<const uint8_t*>(t.raw_data()), reinterpret_cast<int8_t*>(v.holder.get()), t.numel(),
                        cuda.stream()));
  v.data = reinterpret_cast<const int8_t*>(v.holder.get());
  v.shifted = true;
  return v;
}

// A zero point input (or 0 when absent) with `count` values (1 = per tensor), shifted by -128 for uint8 data.
StatusOr<std::vector<int32_t>> ZeroPoints(const OpContext& ctx, size_t i, bool shifted, const char* what) {
  std::vector<int32_t> zp{0};
  if (ctx.has_input(i)) {
    SPARQ_ASSIGN_OR_RETURN(zp, HostInts(ctx, i, what));
    if (zp.empty()) return ctx.InvalidArgument(std::string(what) + " is empty");
  }
  if (shifted) {
    for (int32_t& z : zp) z -= 128;
  }
  return zp;
}

bool AnyNonzero(const std::vector<int32_t>& v) {
  for (int32_t x : v)
    if (x != 0) return true;
  return false;
}

StatusOr<float> SingleFloat(const OpContext& ctx, size_t i, const char* what) {
  SPARQ_ASSIGN_OR_RETURN(std::vector<float> v, HostFloats(ctx, i, what));
  if (v.size() != 1) return ctx.NotSupported(std::string(what) + " per tensor only in the CUDA INT8 rows");
  return v[0];
}

// acc [m, n] = a [m, k] * b [n, k]^T in int32: cuBLASLt's IMMA GEMM where it
// takes the shape, else the own fallback kernel.
Status GemmS8(CudaContext& cuda, const int8_t* a, const int8_t* b, int32_t* acc, int64_t m, int64_t n, int64_t k) {
  LtGemmArgs args;
  args.type = LtGemmType::kS8S32;
  args.m = m;
  args.n = n;
  args.k = k;
  args.a = a;
  args.lda = k;
  args.b = b;
  args.ldb = k;
  args.trans_b = true;
  args.c = acc;
  args.ldc = n;
  if (LtGemm::CanImplement(args).ok()) {
    Status st = RunGemm(cuda, args);
    if (st.ok() || st.code() != StatusCode::kNotSupported) return st;
  }
  return LaunchGemmS8S32Naive(a, b, acc, m, n, k, cuda.stream());
}

DataType OutputType(const OpContext& ctx, size_t zp_input) {
  return ctx.has_input(zp_input) ? ctx.input(zp_input).dtype() : ctx.input(0).dtype();
}

// The int32 product of A [..., M, K] and B [K, N] (int8 / uint8, zero points
// per tensor for A, per tensor or per column for B) with its zero-point
// corrections in `r`, ready for RequantizeElement or AccToFloatElement.
struct IntMatMul {
  RequantArgs r;
  Shape out;  // A's shape with K replaced by N
  std::vector<std::shared_ptr<uint8_t>> buffers;  // what r points into
};

StatusOr<IntMatMul> RunIntMatMul(OpContext& ctx, CudaContext& cuda, size_t a_in, size_t a_zp_in, size_t b_in,
                                 size_t b_zp_in) {
  SPARQ_RETURN_IF_ERROR(RequireDeviceInput(ctx, a_in));
  SPARQ_RETURN_IF_ERROR(RequireDeviceInput(ctx, b_in));
  const Tensor& a = ctx.input(a_in);
  const Tensor& b = ctx.input(b_in);
  if (a.rank() < 1 || b.rank() != 2) return ctx.NotSupported("the CUDA INT8 MatMul rows take A [..., K] and B [K, N]");
  const int64_t K = a.shape().back(), N = b.dim(1);
  if (b.dim(0) != K) return ctx.InvalidArgument("A's K and B's rows differ");
  IntMatMul m;
  m.out = Shape(a.shape().begin(), a.shape().end() - 1);
  m.out.push_back(N);
  const int64_t rows = K > 0 ? a.numel() / K : NumElements(m.out) / std::max<int64_t>(N, 1);
  SPARQ_ASSIGN_OR_RETURN(const SignedView a8, AsSigned(ctx, cuda, a, "A"));
  SPARQ_ASSIGN_OR_RETURN(const SignedView b8, AsSigned(ctx, cuda, b, "B"));
  m.buffers = {a8.holder, b8.holder};
  SPARQ_ASSIGN_OR_RETURN(const std::vector<int32_t> za, ZeroPoints(ctx, a_zp_in, a8.shifted, "a_zero_point"));
  SPARQ_ASSIGN_OR_RETURN(const std::vector<int32_t> zb, ZeroPoints(ctx, b_zp_in, b8.shifted, "b_zero_point"));
  if (za.size() != 1) return ctx.NotSupported("a_zero_point per tensor only");
  if (zb.size() != 1 && static_cast<int64_t>(zb.size()) != N) return ctx.NotSupported("b_zero_point per tensor or per column only");
  // B [K, N] -> Bt [N, K]: cuBLASLt's INT8 GEMM reads both operands along K.
  SPARQ_ASSIGN_OR_RETURN(std::shared_ptr<uint8_t> bt, Scratch(cuda, static_cast<size_t>(N * K)));
  PermutePlan plan;
  plan.rank = 2;
  plan.numel = N * K;
  plan.out_dims[0] = N;
  plan.out_dims[1] = K;
  plan.in_strides[0] = 1;
  plan.in_strides[1] = N;
  SPARQ_RETURN_IF_ERROR(LaunchPermute(b8.data, bt.get(), 1, plan, cuda.stream()));
  const int8_t* btp = reinterpret_cast<const int8_t*>(bt.get());
  SPARQ_ASSIGN_OR_RETURN(std::shared_ptr<uint8_t> acc, Scratch(cuda, static_cast<size_t>(rows * N) * sizeof(int32_t)));
  int32_t* accp = reinterpret_cast<int32_t*>(acc.get());
  if (rows > 0 && N > 0) SPARQ_RETURN_IF_ERROR(GemmS8(cuda, a8.data, btp, accp, rows, N, K).WithContext(ctx.node().Describe()));
  m.buffers.push_back(bt);
  m.buffers.push_back(acc);
  RequantArgs& r = m.r;
  r.acc = accp;
  r.rows = rows;
  r.cols = N;
  r.k = static_cast<int32_t>(K);
  r.a_zp_scalar = za[0];
  if (AnyNonzero(zb)) {
    SPARQ_ASSIGN_OR_RETURN(std::shared_ptr<uint8_t> a_sum, Scratch(cuda, static_cast<size_t>(rows) * sizeof(int32_t)));
    SPARQ_RETURN_IF_ERROR(LaunchRowSumsS8(a8.data, rows, K, reinterpret_cast<int32_t*>(a_sum.get()), cuda.stream()));
    r.a_sum = reinterpret_cast<const int32_t*>(a_sum.get());
    m.buffers.push_back(a_sum);
  }
  if (za[0] != 0) {
    SPARQ_ASSIGN_OR_RETURN(std::shared_ptr<uint8_t> b_sum, Scratch(cuda, static_cast<size_t>(N) * sizeof(int32_t)));
    SPARQ_RETURN_IF_ERROR(LaunchRowSumsS8(btp, N, K, reinterpret_cast<int32_t*>(b_sum.get()), cuda.stream()));
    r.b_sum = reinterpret_cast<const int32_t*>(b_sum.get());
    m.buffers.push_back(b_sum);
  }
  if (zb.size() > 1) {
    SPARQ_ASSIGN_OR_RETURN(std::shared_ptr<uint8_t> zb_dev, UploadVector(cuda, zb));
    r.b_zp = reinterpret_cast<const int32_t*>(zb_dev.get());
    m.buffers.push_back(zb_dev);
  } else {
    r.b_zp_scalar = zb[0];
  }
  return m;
}

Status QLinearMatMulS8(OpContext& ctx) {
  SPARQ_RETURN_IF_ERROR(ctx.RequireInputs(7));
  SPARQ_ASSIGN_OR_RETURN(CudaContext * cuda, CudaContextOf(ctx));
  const DataType y_type = OutputType(ctx, 7);
  if (y_type != DataType::kInt8 && y_type != DataType::kUInt8) return ctx.NotSupported("output type must be int8 / uint8");
  SPARQ_ASSIGN_OR_RETURN(const float a_scale, SingleFloat(ctx, 1, "a_scale"));
  SPARQ_ASSIGN_OR_RETURN(const std::vector<float> b_scale, HostFloats(ctx, 4, "b_scale"));
  SPARQ_ASSIGN_OR_RETURN(const float y_scale, SingleFloat(ctx, 6, "y_scale"));
  int32_t y_zp = 0;
  if (ctx.has_input(7)) {
    SPARQ_ASSIGN_OR_RETURN(const std::vector<int32_t> v, HostInts(ctx, 7, "y_zero_point"));
    if (v.size() != 1) return ctx.NotSupported("y_zero_point per tensor only");
    y_zp = v[0];
  }
  SPARQ_ASSIGN_OR_RETURN(IntMatMul m, RunIntMatMul(ctx, *cuda, 0, 2, 3, 5));
  if (b_scale.size() != 1 && static_cast<int64_t>(b_scale.size()) != m.r.cols) {
    return ctx.NotSupported("b_scale per tensor or per column only");
  }
  SPARQ_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, y_type, m.out));
  std::vector<float> mult(b_scale.size());
  for (size_t j = 0; j < mult.size(); ++j) mult[j] = RequantMultiplier(a_scale, b_scale[j], y_scale);
  SPARQ_ASSIGN_OR_RETURN(std::shared_ptr<uint8_t> mult_dev, UploadVector(*cuda, mult));
  m.r.multiplier = reinterpret_cast<const float*>(mult_dev.get());
  m.r.multiplier_per_col = mult.size() > 1;
  m.r.y_zp = y_zp;
  m.r.out_signed = y_type == DataType::kInt8;
  m.r.out = y->raw_data();
  return LaunchRequantize(m.r, cuda->stream());
}

// sparq.MatMulIntegerToFloat(A, B, A_zero_point, B_zero_point, A_scale, B_scale[, Bias]):
// the INT8 GEMM, then float(sum) * (A_scale * B_scale[n]) [+ Bias[n]] [-> GeluErfChain].
Status CheckMatMulIntegerToFloat(const Node& node, const std::vector<const Tensor*>&) {
  const std::string activation = node.attr_string("activation", "");
  if (!activation.empty() && activation != "GeluErfChain") {
    return Status::NotSupported(node.Describe() + ": activation '" + activation + "'");
  }
  return Status::OK();
}

Status MatMulIntegerToFloatS8(OpContext& ctx) {
  SPARQ_RETURN_IF_ERROR(ctx.RequireInputs(6));
  SPARQ_ASSIGN_OR_RETURN(CudaContext * cuda, CudaContextOf(ctx));
  SPARQ_ASSIGN_OR_RETURN(const float a_scale, SingleFloat(ctx, 4, "A_scale"));
  SPARQ_ASSIGN_OR_RETURN(const std::vector<float> b_scale, HostFloats(ctx, 5, "B_scale"));
  SPARQ_ASSIGN_OR_RETURN(IntMatMul m, RunIntMatMul(ctx, *cuda, 0, 2, 1, 3));
  const int64_t N = m.r.cols;
  if (b_scale.size() != 1 && static_cast<int64_t>(b_scale.size()) != N) {
    return ctx.InvalidArgument("B_scale must have one value or one per column");
  }
  FloatEpilogue e;
  std::vector<float> scale(b_scale.size());
  for (size_t j = 0; j < scale.size(); ++j) scale[j] = a_scale * b_scale[j];
  SPARQ_ASSIGN_OR_RETURN(std::shared_ptr<uint8_t> scale_dev, UploadVector(*cuda, scale));
  e.scale = reinterpret_cast<const float*>(scale_dev.get());
  e.scale_per_col = scale.size() > 1;
  if (ctx.has_input(6)) {
    SPARQ_RETURN_IF_ERROR(RequireDeviceInput(ctx, 6));
    const Tensor& bias = ctx.input(6);
    if (bias.dtype() != DataType::kFloat32 || bias.rank() != 1 || bias.dim(0) != N) {
      return ctx.InvalidArgument("Bias must be float32 [" + std::to_string(N) + "]");
    }
    e.bias = static_cast<const float*>(bias.raw_data());
  }
  if (ctx.node().attr_string("activation", "") == "GeluErfChain") {
    e.gelu = true;
    e.gelu_divisor = ctx.node().attr_float("gelu_divisor", 1.41421356f);
    e.gelu_offset = ctx.node().attr_float("gelu_offset", 1.0f);
    e.gelu_scale = ctx.node().attr_float("gelu_scale", 0.5f);
  }
  SPARQ_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, DataType::kFloat32, m.out));
  return LaunchAccToFloat(m.r, e, static_cast<float*>(y->raw_data()), cuda->stream());
}

Status CheckQLinearConv(const Node& node, const std::vector<const Tensor*>& constants) {
  if (node.attr_int("group", 1) != 1) return Status::NotSupported(node.Describe() + ": qlinear_conv_s8_cublaslt takes group 1");
  if (constants.size() > 3 && constants[3] != nullptr && constants[3]->rank() != 4) {
    return Status::NotSupported(node.Describe() + ": the CUDA QLinearConv row is 2-D only");
  }
  return Status::OK();
}

Status QLinearConvS8(OpContext& ctx) {
  SPARQ_RETURN_IF_ERROR(ctx.RequireInputs(7));
  SPARQ_RETURN_IF_ERROR(RequireDeviceInput(ctx, 0));
  SPARQ_RETURN_IF_ERROR(RequireDeviceInput(ctx, 3));
  if (ctx.node().attr_int("group", 1) != 1) return ctx.NotSupported("qlinear_conv_s8_cublaslt takes group 1");
  SPARQ_ASSIGN_OR_RETURN(CudaContext * cuda, CudaContextOf(ctx));
  const Tensor& x = ctx.input(0);
  const Tensor& w = ctx.input(3);
  Shape y_shape;
  SPARQ_ASSIGN_OR_RETURN(const Conv2dGeometry g, ConvGeometryOf(ctx, x, w, &y_shape));
  const DataType y_type = OutputType(ctx, 7);
  if (y_type != DataType::kInt8 && y_type != DataType::kUInt8) return ctx.NotSupported("output type must be int8 / uint8");
  const int64_t M = g.out_channels, K = g.patch(), P = g.pixels();
  SPARQ_ASSIGN_OR_RETURN(const float x_scale, SingleFloat(ctx, 1, "x_scale"));
  SPARQ_ASSIGN_OR_RETURN(const std::vector<float> w_scale, HostFloats(ctx, 4, "w_scale"));
  SPARQ_ASSIGN_OR_RETURN(const float y_scale, SingleFloat(ctx, 6, "y_scale"));
  if (w_scale.size() != 1 && static_cast<int64_t>(w_scale.size()) != M) return ctx.InvalidArgument("w_scale must have 1 or M values");
  SPARQ_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, y_type, y_shape));
  if (y->numel() == 0) return Status::OK();
  SPARQ_ASSIGN_OR_RETURN(const SignedView x8, AsSigned(ctx, *cuda, x, "x"));
  SPARQ_ASSIGN_OR_RETURN(const SignedView w8, AsSigned(ctx, *cuda, w, "w"));
  SPARQ_ASSIGN_OR_RETURN(const std::vector<int32_t> zx, ZeroPoints(ctx, 2, x8.shifted, "x_zero_point"));
  SPARQ_ASSIGN_OR_RETURN(const std::vector<int32_t> zw, ZeroPoints(ctx, 5, w8.shifted, "w_zero_point"));
  if (zx.size() != 1) return ctx.NotSupported("x_zero_point per tensor only");
  if (zw.size() != 1 && static_cast<int64_t>(zw.size()) != M) return ctx.InvalidArgument("w_zero_point must have 1 or M values");
  int32_t y_zp = 0;
  if (ctx.has_input(7)) {
    SPARQ_ASSIGN_OR_RETURN(const std::vector<int32_t> v, HostInts(ctx, 7, "y_zero_point"));
    if (v.size() != 1) return ctx.NotSupported("y_zero_point per tensor only");
    y_zp = v[0];
  }
  const int32_t* bias = nullptr;
  if (ctx.has_input(8)) {
    SPARQ_RETURN_IF_ERROR(RequireDeviceInput(ctx, 8));
    if (ctx.input(8).dtype() != DataType::kInt32 || ctx.input(8).numel() != M) {
      return ctx.InvalidArgument("B must be int32 with one value per output channel");
    }
    bias = static_cast<const int32_t*>(ctx.input(8).raw_data());
  }
  std::shared_ptr<uint8_t> w_sum, zw_dev, mult_dev, col_sum;
  if (zx[0] != 0) {
    SPARQ_ASSIGN_OR_RETURN(w_sum, Scratch(*cuda, static_cast<size_t>(M) * sizeof(int32_t)));
    SPARQ_RETURN_IF_ERROR(LaunchRowSumsS8(w8.data, M, K, reinterpret_cast<int32_t*>(w_sum.get()), cuda->stream()));
  }
  if (zw.size() > 1) {
    SPARQ_ASSIGN_OR_RETURN(zw_dev, UploadVector(*cuda, zw));
  }
  std::vector<float> mult(w_scale.size());
  for (size_t j = 0; j < mult.size(); ++j) mult[j] = RequantMultiplier(x_scale, w_scale[j], y_scale);
  SPARQ_ASSIGN_OR_RETURN(mult_dev, UploadVector(*cuda, mult));
  if (AnyNonzero(zw)) {
    SPARQ_ASSIGN_OR_RETURN(col_sum, Scratch(*cuda, static_cast<size_t>(P) * sizeof(int32_t)));
  }
  SPARQ_ASSIGN_OR_RETURN(std::shared_ptr<uint8_t> col, Scratch(*cuda, static_cast<size_t>(P * K)));
  SPARQ_ASSIGN_OR_RETURN(std::shared_ptr<uint8_t> acc, Scratch(*cuda, static_cast<size_t>(M * P) * sizeof(int32_t)));
  const int8_t* colp = reinterpret_cast<const int8_t*>(col.get());
  int32_t* accp = reinterpret_cast<int32_t*>(acc.get());
  const size_t elem = 1;
  for (int64_t n = 0; n < g.batch; ++n) {
    SPARQ_RETURN_IF_ERROR(LaunchIm2Col(x8.data + n * x.dim(1) * g.height * g.width, col.get(), 1,
                                       static_cast<uint32_t>(static_cast<uint8_t>(static_cast<int8_t>(zx[0]))), g,
                                       cuda->stream()));
    SPARQ_RETURN_IF_ERROR(GemmS8(*cuda, w8.data, colp, accp, M, P, K).WithContext(ctx.node().Describe()));
    RequantArgs r;
    r.acc = accp;
    r.rows = M;
    r.cols = P;
    r.k = static_cast<int32_t>(K);
    r.a_sum = reinterpret_cast<const int32_t*>(w_sum.get());  // needed when x's zero point is not 0
    if (col_sum != nullptr) {
      SPARQ_RETURN_IF_ERROR(LaunchRowSumsS8(colp, P, K, reinterpret_cast<int32_t*>(col_sum.get()), cuda->stream()));
      r.b_sum = reinterpret_cast<const int32_t*>(col_sum.get());
    }
    r.a_zp = reinterpret_cast<const int32_t*>(zw_dev.get());
    r.a_zp_scalar = zw[0];
    r.b_zp_scalar = zx[0];
    r.bias = bias;
    r.bias_per_row = true;
    r.multiplier = reinterpret_cast<const float*>(mult_dev.get());
    r.multiplier_per_row = mult.size() > 1;
    r.y_zp = y_zp;
    r.out_signed = y_type == DataType::kInt8;
    r.out = static_cast<uint8_t*>(y->raw_data()) + static_cast<size_t>(n * M * P) * elem;
    SPARQ_RETURN_IF_ERROR(LaunchRequantize(r, cuda->stream()));
  }
  return Status::OK();
}

// QLinearConv with group = C and w [C, 1, kh, kw]: the own depthwise kernel.
Status CheckQLinearConvDepthwise(const Node& node, const std::vector<const Tensor*>& constants) {
  const int64_t group = node.attr_int("group", 1);
  if (group <= 1) return Status::NotSupported(node.Describe() + ": qlinear_conv_dw_s8_cuda takes depthwise convolutions only");
  if (constants.size() > 3 && constants[3] != nullptr) {
    const Shape& w = constants[3]->shape();
    if (w.size() != 4 || w[0] != group || w[1] != 1) {
      return Status::NotSupported(node.Describe() + ": qlinear_conv_dw_s8_cuda takes weights [C, 1, kh, kw] with group = C");
    }
  }
  return Status::OK();
}

Status QLinearConvDepthwiseS8(OpContext& ctx) {
  SPARQ_RETURN_IF_ERROR(ctx.RequireInputs(7));
  SPARQ_RETURN_IF_ERROR(RequireDeviceInput(ctx, 0));
  SPARQ_RETURN_IF_ERROR(RequireDeviceInput(ctx, 3));
  SPARQ_ASSIGN_OR_RETURN(CudaContext * cuda, CudaContextOf(ctx));
  const Tensor& x = ctx.input(0);
  const Tensor& w = ctx.input(3);
  const int64_t group = ctx.node().attr_int("group", 1);
  auto is_byte = [](DataType t) { return t == DataType::kUInt8 || t == DataType::kInt8; };
  if (x.rank() != 4 || w.rank() != 4 || group != x.dim(1) || w.dim(0) != group || w.dim(1) != 1 ||
      !is_byte(x.dtype()) || !is_byte(w.dtype())) {
    return ctx.NotSupported("qlinear_conv_dw_s8_cuda takes 8-bit x [N, C, H, W], w [C, 1, kh, kw] and group = C");
  }
  Shape y_shape;
  SPARQ_ASSIGN_OR_RETURN(Conv2dGeometry g, ConvGeometryOf(ctx, x, w, &y_shape));
  g.channels = x.dim(1);  // one channel per group: the kernel walks all C planes
  const DataType y_type = OutputType(ctx, 7);
  if (!is_byte(y_type)) return ctx.NotSupported("output type must be int8 / uint8");
  SPARQ_ASSIGN_OR_RETURN(const float x_scale, SingleFloat(ctx, 1, "x_scale"));
  SPARQ_ASSIGN_OR_RETURN(const std::vector<float> w_scale, HostFloats(ctx, 4, "w_scale"));
  SPARQ_ASSIGN_OR_RETURN(const float y_scale, SingleFloat(ctx, 6, "y_scale"));
  if (w_scale.size() != 1 && static_cast<int64_t>(w_scale.size()) != group) {
    return ctx.InvalidArgument("w_scale must have 1 or C values");
  }
  SPARQ_ASSIGN_OR_RETURN(const std::vector<int32_t> zx, ZeroPoints(ctx, 2, false, "x_zero_point"));
  SPARQ_ASSIGN_OR_RETURN(const std::vector<int32_t> zw, ZeroPoints(ctx, 5, false, "w_zero_point"));
  if (zx.size() != 1) return ctx.NotSupported("x_zero_point per tensor only");
  if (zw.size() != 1 && static_cast<int64_t>(zw.size()) != group) return ctx.InvalidArgument("w_zero_point must have 1 or C values");
  DepthwiseS8Args a;
  a.x = x.raw_data();
  a.x_signed = x.dtype() == DataType::kInt8;
  a.w = w.raw_data();
  a.w_signed = w.dtype() == DataType::kInt8;
  a.x_zp = zx[0];
  std::shared_ptr<uint8_t> zw_dev, mult_dev;
  if (zw.size() > 1) {
    SPARQ_ASSIGN_OR_RETURN(zw_dev, UploadVector(*cuda, zw));
    a.w_zp = reinterpret_cast<const int32_t*>(zw_dev.get());
  } else {
    a.w_zp_scalar = zw[0];
  }
  if (ctx.has_input(8)) {
    SPARQ_RETURN_IF_ERROR(RequireDeviceInput(ctx, 8));
    if (ctx.input(8).dtype() != DataType::kInt32 || ctx.input(8).numel() != group) {
      return ctx.InvalidArgument("B must be int32 with one value per channel");
    }
    a.bias = static_cast<const int32_t*>(ctx.input(8).raw_data());
  }
  std::vector<float> mult(w_scale.size());
  for (size_t j = 0; j < mult.size(); ++j) mult[j] = RequantMultiplier(x_scale, w_scale[j], y_scale);
  SPARQ_ASSIGN_OR_RETURN(mult_dev, UploadVector(*cuda, mult));
  a.multiplier = reinterpret_cast<const float*>(mult_dev.get());
  a.multiplier_per_channel = mult.size() > 1;
  if (ctx.has_input(7)) {
    SPARQ_ASSIGN_OR_RETURN(const std::vector<int32_t> v, HostInts(ctx, 7, "y_zero_point"));
    if (v.size() != 1) return ctx.NotSupported("y_zero_point per tensor only");
    a.y_zp = v[0];
  }
  a.y_signed = y_type == DataType::kInt8;
  SPARQ_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, y_type, y_shape));
  return LaunchDepthwiseConvS8(a, y->raw_data(), g, cuda->stream());
}

// QLinearConvLut's prepare: a convolution one of the two INT8 conv rows takes.
Status CheckQLinearConvAny(const Node& node, const std::vector<const Tensor*>& constants) {
  if (CheckQLinearConv(node, constants).ok()) return Status::OK();
  return CheckQLinearConvDepthwise(node, constants);
}

// sparq.QLinearConvLut: QLinearConv's nine inputs, then input 9's 256-entry
// table applied to the result in place.
Status QLinearConvLutS8(OpContext& ctx) {
  if (ctx.num_inputs() != 10 || !ctx.has_input(9)) return ctx.InvalidArgument("expected 10 inputs, the last the table");
  SPARQ_RETURN_IF_ERROR(ctx.node().attr_int("group", 1) == 1 ? QLinearConvS8(ctx) : QLinearConvDepthwiseS8(ctx));
  SPARQ_ASSIGN_OR_RETURN(CudaContext * cuda, CudaContextOf(ctx));
  const Tensor& table = ctx.input(9);
  if (!table.device().is_host() || (table.dtype() != DataType::kUInt8 && table.dtype() != DataType::kInt8) ||
      table.numel() != 256) {
    return ctx.InvalidArgument("Table must hold 256 uint8 or int8 values on the host");
  }
  SPARQ_ASSIGN_OR_RETURN(std::shared_ptr<uint8_t> dev_table, Upload(*cuda, table.raw_data(), 256));
  const Tensor conv = ctx.outputs()[0];  // held until the lookup below has been queued
  SPARQ_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, table.dtype(), conv.shape()));  // the table's type
  SPARQ_RETURN_IF_ERROR(LaunchLut256(conv.raw_data(), conv.dtype() == DataType::kInt8, dev_table.get(), y->raw_data(),
                                     conv.numel(), cuda->stream()));
  return Status::OK();
}

// ---------------------------------------------------------------------------
// MatMul with a block-sparse constant float16 weight: cuSPARSE Blocked-ELL

struct BlockedEllWeight {
  BlockedEll<uint16_t> ell;  // W^T [N, K]
  // Device copies, made by the first run (the prepare step has no device).
  mutable std::mutex mu;
  mutable const CudaContext* uploaded_for = nullptr;
  mutable std::shared_ptr<uint8_t> col_ind, values;
};

StatusOr<PreparedKernel> PrepareBlockedEll(const Node& node, const std::vector<const Tensor*>& constants,
                                           const PrepareContext&) {
  const Tensor* w = constants.size() > 1 ? constants[1] : nullptr;
  if (w == nullptr) return Status::NotSupported(node.Describe() + ": spmm_bell_f16_cusparse needs a constant weight");
  if (w->dtype() != DataType::kFloat16 || w->rank() != 2 || !w->device().is_host()) {
    return Status::NotSupported(node.Describe() + ": spmm_bell_f16_cusparse takes a 2-D float16 weight");
  }
  const int64_t K = w->dim(0), N = w->dim(1);
  std::vector<uint16_t> wt(static_cast<size_t>(K * N));  // W^T [N, K]
  const uint16_t* src = static_cast<const uint16_t*>(w->raw_data());
  for (int64_t k = 0; k < K; ++k)
    for (int64_t n = 0; n < N; ++n) wt[static_cast<size_t>(n * K + k)] = src[k * N + n];
  std::string why;
  for (int64_t b : kBlockedEllBlocks) {
    if (K % b != 0 || N % b != 0) continue;
    const double sparsity = BlockSparsity(wt.data(), N, K, K, b);
    if (sparsity < kBlockedEllMinSparsity) {
      why += (why.empty() ? "" : ", ") + std::to_string(static_cast<int>(sparsity * 100)) + "% at block " + std::to_string(b);
      continue;
    }
    SPARQ_ASSIGN_OR_RETURN(BlockedEll<uint16_t> ell, DenseToBlockedEll(wt.data(), N, K, K, b));
    auto state = std::make_shared<BlockedEllWeight>();
    state->ell = std::move(ell);
    return PreparedKernel{state, "spmm_bell" + std::to_string(b) + "_f16_cusparse"};
  }
  return Status::NotSupported(node.Describe() + ": weight block sparsity below " +
                              std::to_string(static_cast<int>(kBlockedEllMinSparsity * 100)) + "% (" +
                              (why.empty() ? "K, N not multiples of 32" : why) + ")");
}

Status MatMulBlockedEllF16(OpContext& ctx) {
  const auto* state = static_cast<const BlockedEllWeight*>(ctx.prepared());
  if (state == nullptr) return ctx.Internal("spmm_bell_f16_cusparse ran without its prepared weight");
  SPARQ_RETURN_IF_ERROR(RequireDeviceInput(ctx, 0));
  SPARQ_RETURN_IF_ERROR(RequireInputType(ctx, 0, DataType::kFloat16, "spmm_bell_f16_cusparse"));
  SPARQ_ASSIGN_OR_RETURN(CudaContext * cuda, CudaContextOf(ctx));
  const BlockedEll<uint16_t>& ell = state->ell;
  const Tensor& x = ctx.input(0);
  const int64_t K = ell.cols, N = ell.rows;
  if (x.rank() < 1 || x.shape().back() != K) return ctx.InvalidArgument("A's last dimension differs from the weight's K");
  const int64_t M = x.numel() / K;
  Shape out(x.shape().begin(), x.shape().end() - 1);
  out.push_back(N);
  SPARQ_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, DataType::kFloat16, out));
  if (y->numel() == 0) return Status::OK();
  {
    std::lock_guard<std::mutex> lock(state->mu);
    if (state->uploaded_for != cuda) {
      SPARQ_ASSIGN_OR_RETURN(state->col_ind, UploadVector(*cuda, ell.col_ind));
      SPARQ_ASSIGN_OR_RETURN(state->values, UploadVector(*cuda, ell.values));
      state->uploaded_for = cuda;
    }
  }
  SpmmBlockedEllArgs args;  // Y^T [N, M] (column-major = Y row-major) = W^T [N, K] * X^T (X read column-major)
  args.type = SpmmType::kF16;
  args.rows = N;
  args.cols = K;
  args.block_size = ell.block_size;
  args.ell_cols = ell.ell_cols;
  args.col_ind = reinterpret_cast<const int32_t*>(state->col_ind.get());
  args.values = state->values.get();
  args.n = M;
  args.b = x.raw_data();
  args.ldb = K;
  args.c = y->raw_data();
  args.ldc = N;
  args.col_major = true;
  SPARQ_RETURN_IF_ERROR(SpmmBlockedEll::CanImplement(args).WithContext(ctx.node().Describe()));
  SpmmBlockedEll spmm;
  SPARQ_RETURN_IF_ERROR(spmm.Init(cuda->sparse(), args).WithContext(ctx.node().Describe()));
  SPARQ_ASSIGN_OR_RETURN(std::shared_ptr<uint8_t> workspace, Scratch(*cuda, spmm.workspace_size()));
  return spmm.Run(cuda->sparse(), args, workspace.get(), cuda->stream()).WithContext(ctx.node().Describe());
}

KernelDef Row(const char* op, int since, KernelFn fn, const char* name, int priority, PrepareFn prepare = nullptr,
              uint32_t host_inputs = 0) {
  KernelDef d;
  d.op_type = op;
  d.since_opset = since;
  d.until_opset = 99;
  d.fn = fn;
  d.name = name;
  d.prepare = std::move(prepare);
  d.priority = priority;
  d.host_inputs = host_inputs;
  return d;
}

}  // namespace

void RegisterCudaGemmRows(KernelRegistry& r) {
  r.Add(Row("MatMul", 1, WithHostFallback<MatMulBlockedEllF16>, "spmm_bell_f16_cusparse", kCudaPrioritySpecial, PrepareBlockedEll));
  r.Add(Row("MatMul", 1, WithHostFallback<MatMulDense>, "gemm_cublaslt", kCudaPriorityGeneral, NameByWeight(nullptr)));
  r.Add(Row("Gemm", 1, WithHostFallback<Gemm>, "gemm_cublaslt", kCudaPriorityGeneral, NameByWeight(CheckGemm)));
  r.Add(Row("Conv", 1, WithHostFallback<ConvDepthwiseF32>, "conv_dw_f32_cuda", kCudaPrioritySpecial, CheckOnly(CheckConvDepthwise)));
  r.Add(Row("Conv", 1, WithHostFallback<ConvIm2ColF32>, "conv_f32_im2col_cublaslt", kCudaPriorityGeneral, CheckOnly(CheckConvIm2Col)));
  auto sparq_row = [](KernelDef d) {
    d.domain = kSparqDomain;
    return d;
  };
  r.Add(sparq_row(Row("FusedConv", 1, WithHostFallback<FusedConvF32<ConvDepthwiseF32>>, "fused_conv_dw_f32_cuda", kCudaPrioritySpecial,
                      CheckOnly(CheckConvDepthwise))));
  r.Add(sparq_row(Row("FusedConv", 1, WithHostFallback<FusedConvF32<ConvIm2ColF32>>, "fused_conv_f32_im2col_cublaslt",
                      kCudaPriorityGeneral, CheckOnly(CheckConvIm2Col))));
  r.Add(sparq_row(Row("PointwiseDepthwise", 1, WithHostFallback<PointwiseDepthwiseF32>, "pointwise_depthwise_f32_cuda",
                      kCudaPriorityGeneral, CheckOnly(CheckPointwiseDepthwise))));
  r.Add(sparq_row(Row("Attention", 1, WithHostFallback<AttentionF32>, "attention_f32_cuda", kCudaPriorityGeneral)));
  const uint32_t qlinear_params = HostInput(1) | HostInput(2) | HostInput(4) | HostInput(5) | HostInput(6) | HostInput(7);
  r.Add(Row("QLinearMatMul", 10, WithHostFallback<QLinearMatMulS8>, "qlinear_matmul_s8_cublaslt", kCudaPriorityGeneral, nullptr,
            qlinear_params));
  r.Add(Row("QLinearConv", 10, WithHostFallback<QLinearConvS8>, "qlinear_conv_s8_cublaslt", kCudaPriorityGeneral,
            CheckOnly(CheckQLinearConv), qlinear_params));
  r.Add(Row("QLinearConv", 10, WithHostFallback<QLinearConvDepthwiseS8>, "qlinear_conv_dw_s8_cuda", kCudaPrioritySpecial,
            CheckOnly(CheckQLinearConvDepthwise), qlinear_params));
  KernelDef conv_lut = Row("QLinearConvLut", 1, WithHostFallback<QLinearConvLutS8>, "qlinear_conv_lut_s8_cuda", kCudaPriorityGeneral,
                           CheckOnly(CheckQLinearConvAny), qlinear_params | HostInput(9));
  conv_lut.domain = kSparqDomain;
  r.Add(std::move(conv_lut));
  KernelDef mm_float = Row("MatMulIntegerToFloat", 1, WithHostFallback<MatMulIntegerToFloatS8>, "matmul_s8_f32_cublaslt",
                           kCudaPriorityGeneral, CheckOnly(CheckMatMulIntegerToFloat),
                           HostInput(2) | HostInput(3) | HostInput(4) | HostInput(5));
  mm_float.domain = kSparqDomain;
  r.Add(std::move(mm_float));
}

}  // namespace cuda
}  // namespace sparq
