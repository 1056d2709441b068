// CUDA rows of the float GEMM-shaped operators (cuda_rows.h lists them):
// MatMul and Gemm on cuBLASLt, Conv as im2col + cuBLASLt (one image at a
// time, the column buffer reused in stream order) or the own depthwise
// kernel, and sparq's float fusions (FusedConv, PointwiseDepthwise, Attention).
// (MatMul with a block-sparse float16 weight: rows_sparse.cc.)
#include <limits>
#include <string>
#include <vector>

#include "kernels/cuda/cuda_rows.h"
#include "kernels/cuda/cuda_status.h"
#include "kernels/cuda/gemm_cublaslt.h"
#include "kernels/cuda/geometry.h"
#include "kernels/cuda/launch.h"
#include "kernels/ref/fused_conv.h"

namespace sparq {
namespace cuda {
namespace {

StatusOr<LtGemmType> FloatGemmType(const OpContext& ctx, const CudaContext& cuda, DataType type) {
  switch (type) {
    case DataType::kFloat32: return cuda.options().allow_tf32 ? LtGemmType::kTF32 : LtGemmType::kF32;
    case DataType::kFloat16: return LtGemmType::kF16;
    default: return ctx.NotSupported("the cuBLASLt GEMM rows take float32 / float16, not " + DataTypeName(type));
  }
}

}  // namespace

// One cuBLASLt GEMM on ctx's stream, its plan cached by the context.
Status RunCudaGemm(CudaContext& cuda, const LtGemmArgs& args) {
  SPARQ_ASSIGN_OR_RETURN(std::shared_ptr<const LtGemm> gemm, cuda.Gemm(args));
  SPARQ_ASSIGN_OR_RETURN(std::shared_ptr<uint8_t> workspace, Scratch(cuda, gemm->workspace_size()));
  return gemm->Run(cuda.lt(), args, workspace.get(), cuda.stream());
}

StatusOr<GemmShape> GemmShapeOf(const OpContext& ctx) {
  const Tensor& a = ctx.input(0);
  const Tensor& b = ctx.input(1);
  if (a.rank() != 2 || b.rank() != 2) return ctx.InvalidArgument("Gemm takes 2-D A and B");
  GemmShape s;
  s.trans_a = ctx.node().attr_int("transA", 0) != 0;
  s.trans_b = ctx.node().attr_int("transB", 0) != 0;
  s.m = s.trans_a ? a.dim(1) : a.dim(0);
  s.k = s.trans_a ? a.dim(0) : a.dim(1);
  const int64_t kb = s.trans_b ? b.dim(1) : b.dim(0);
  s.n = s.trans_b ? b.dim(0) : b.dim(1);
  if (s.k != kb) {
    return ctx.InvalidArgument("Gemm of " + ShapeToString(a.shape()) + " and " + ShapeToString(b.shape()) +
                               ": inner dimensions differ");
  }
  s.has_c = ctx.has_input(2) && ctx.node().attr_float("beta", 1.0f) != 0.0f;
  return s;
}

LtGemmArgs GemmArgsOf(const OpContext& ctx, const GemmShape& s, LtGemmType type, void* y) {
  LtGemmArgs args;
  args.type = type;
  args.m = s.m;
  args.n = s.n;
  args.k = s.k;
  args.a = ctx.input(0).raw_data();
  args.lda = ctx.input(0).dim(1);
  args.trans_a = s.trans_a;
  args.b = ctx.input(1).raw_data();
  args.ldb = ctx.input(1).dim(1);
  args.trans_b = s.trans_b;
  args.c = y;
  args.ldc = s.n;
  args.alpha = ctx.node().attr_float("alpha", 1.0f);
  return args;
}

Status CheckConvIm2Col(const Node& node, const std::vector<const Tensor*>& constants) {
  if (node.attr_int("group", 1) != 1) return Status::NotSupported(node.Describe() + ": the CUDA im2col Conv rows take group 1");
  if (constants.size() > 1 && constants[1] != nullptr && constants[1]->rank() != 4) {
    return Status::NotSupported(node.Describe() + ": the CUDA Conv rows are 2-D only");
  }
  return Status::OK();
}

Status CheckConvDepthwise(const Node& node, const std::vector<const Tensor*>& constants) {
  const int64_t group = node.attr_int("group", 1);
  if (group <= 1) return Status::NotSupported(node.Describe() + ": the CUDA depthwise Conv rows take depthwise convolutions only");
  if (constants.size() > 1 && constants[1] != nullptr) {
    const Shape& w = constants[1]->shape();
    if (w.size() != 4 || w[0] != group || w[1] != 1) {
      return Status::NotSupported(node.Describe() + ": the CUDA depthwise Conv rows take weights [C, 1, kh, kw] with group = C");
    }
  }
  return Status::OK();
}

template <typename T>
Status FloatConvDepthwise(OpContext& ctx) {
  const std::string row = FloatRowName<T>("conv_dw");
  SPARQ_RETURN_IF_ERROR(RequireFloatInput<T>(ctx, 0, row.c_str()));
  SPARQ_RETURN_IF_ERROR(RequireFloatInput<T>(ctx, 1, row.c_str()));
  SPARQ_ASSIGN_OR_RETURN(CudaContext * cuda, CudaContextOf(ctx));
  const Tensor& x = ctx.input(0);
  const Tensor& w = ctx.input(1);
  const int64_t group = ctx.node().attr_int("group", 1);
  if (x.rank() != 4 || w.rank() != 4 || group != x.dim(1) || w.dim(0) != group || w.dim(1) != 1) {
    return ctx.NotSupported(row + " takes x [N, C, H, W], w [C, 1, kh, kw] and group = C");
  }
  Shape y_shape;
  SPARQ_ASSIGN_OR_RETURN(Conv2dGeometry g, Conv2dGeometryOf(ctx, x.shape(), w.shape(), &y_shape));
  g.channels = x.dim(1);  // one channel per group: the kernel walks all C planes
  const T* bias = nullptr;
  if (ctx.has_input(2)) {
    SPARQ_RETURN_IF_ERROR(RequireFloatInput<T>(ctx, 2, row.c_str()));
    if (ctx.input(2).numel() != group) return ctx.InvalidArgument("B must have one value per output channel");
    bias = InAs<T>(ctx, 2);
  }
  SPARQ_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, FloatRowType<T>::kType, y_shape));
  return LaunchDepthwiseConv(InAs<T>(ctx, 0), InAs<T>(ctx, 1), bias, OutAs<T>(y), g, cuda->stream());
}
template Status FloatConvDepthwise<float>(OpContext&);
template Status FloatConvDepthwise<Half>(OpContext&);

Status ConvIm2ColGemm(const OpContext& ctx, CudaContext& cuda, const Conv2dGeometry& g, LtGemmType type,
                      size_t elem_size, const void* x, const void* w, void* y, float beta, bool pointwise_direct) {
  const int64_t K = g.patch(), P = g.pixels(), M = g.out_channels;
  const bool pointwise = pointwise_direct && g.kernel_h == 1 && g.kernel_w == 1 && g.stride_h == 1 && g.stride_w == 1 &&
                         g.pad_top == 0 && g.pad_left == 0 && g.out_height == g.height && g.out_width == g.width;
  std::shared_ptr<uint8_t> col;
  if (!pointwise) {
    SPARQ_ASSIGN_OR_RETURN(col, Scratch(cuda, static_cast<size_t>(P * K) * elem_size));
  }
  for (int64_t n = 0; n < g.batch; ++n) {
    const void* image = static_cast<const uint8_t*>(x) + static_cast<size_t>(n * g.channels * g.height * g.width) * elem_size;
    LtGemmArgs args;  // y[n] [M, P] = w [M, K] * col [P, K]^T  (pointwise: w [M, C] * x [C, P])
    args.type = type;
    args.m = M;
    args.n = P;
    args.k = K;
    args.a = w;
    args.lda = K;
    if (pointwise) {
      args.b = image;
      args.ldb = P;
    } else {
      SPARQ_RETURN_IF_ERROR(LaunchIm2Col(image, col.get(), static_cast<int>(elem_size), 0u, g, cuda.stream()));
      args.b = col.get();
      args.ldb = K;
      args.trans_b = true;
    }
    args.c = static_cast<uint8_t*>(y) + static_cast<size_t>(n * M * P) * elem_size;
    args.ldc = P;
    args.beta = beta;
    SPARQ_RETURN_IF_ERROR_WITH_CONTEXT(RunCudaGemm(cuda, args), ctx.node().Describe());
  }
  return Status::OK();
}

namespace {

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

// The cuBLASLt arguments of y = a * b for the plan s.
LtGemmArgs MatMulArgs(const MatMulShape& s, LtGemmType type, const void* a, const void* b, void* y) {
  LtGemmArgs args;
  args.type = type;
  args.m = s.m;
  args.n = s.n;
  args.k = s.k;
  args.a = a;
  args.lda = s.k;
  args.b = b;
  args.ldb = s.n;
  args.c = y;
  args.ldc = s.n;
  args.batch = s.batch;
  args.stride_a = s.stride_a;
  args.stride_b = s.stride_b;
  args.stride_c = s.stride_c;
  return args;
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
  return RunCudaGemm(*cuda, MatMulArgs(s, type, a.raw_data(), b.raw_data(), y->raw_data()))
      .WithContext(ctx.node().Describe());
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
  SPARQ_ASSIGN_OR_RETURN(const GemmShape s, GemmShapeOf(ctx));
  if (a.dtype() != ctx.input(1).dtype()) return ctx.InvalidArgument("A and B differ in type");
  SPARQ_ASSIGN_OR_RETURN(const LtGemmType type, FloatGemmType(ctx, *cuda, a.dtype()));
  if (s.has_c) {
    SPARQ_RETURN_IF_ERROR(RequireDeviceInput(ctx, 2));
    if (a.dtype() != DataType::kFloat32 || ctx.input(2).dtype() != DataType::kFloat32) {
      return ctx.NotSupported("gemm_cublaslt adds C to float32 results only");
    }
  }
  SPARQ_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, a.dtype(), {s.m, s.n}));
  if (y->numel() == 0) return Status::OK();
  SPARQ_RETURN_IF_ERROR_WITH_CONTEXT(RunCudaGemm(*cuda, GemmArgsOf(ctx, s, type, y->raw_data())),
                                     ctx.node().Describe());
  if (!s.has_c) return Status::OK();
  const Shape& c = ctx.input(2).shape();
  const int64_t y_dims[2] = {s.m, s.n};
  BroadcastPlan plan;
  int64_t out_dims[kMaxRank];
  int out_rank = 0;
  SPARQ_RETURN_IF_ERROR_WITH_CONTEXT(
      PlanBroadcast(y_dims, 2, c.data(), static_cast<int>(c.size()), &plan, out_dims, &out_rank),
      ctx.node().Describe());
  if (out_rank != 2 || out_dims[0] != s.m || out_dims[1] != s.n) {
    return ctx.InvalidArgument("C of shape " + ShapeToString(c) + " does not broadcast to [M, N]");
  }
  float* yp = static_cast<float*>(y->raw_data());
  return LaunchBinary(BinaryOp::kAdd, yp, static_cast<const float*>(ctx.input(2).raw_data()), yp, plan,
                      cuda->stream());
}

// ---------------------------------------------------------------------------
// Conv (float32, 2-D)

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
  SPARQ_ASSIGN_OR_RETURN(const Conv2dGeometry g, Conv2dGeometryOf(ctx, x.shape(), w.shape(), &y_shape));
  SPARQ_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, DataType::kFloat32, y_shape));
  if (y->numel() == 0) return Status::OK();
  const LtGemmType type = cuda->options().allow_tf32 ? LtGemmType::kTF32 : LtGemmType::kF32;
  SPARQ_RETURN_IF_ERROR(ConvIm2ColGemm(ctx, *cuda, g, type, sizeof(float), x.raw_data(), w.raw_data(), y->raw_data(),
                                       0.0f, false));
  if (ctx.has_input(2)) {
    SPARQ_RETURN_IF_ERROR(RequireDeviceInput(ctx, 2));
    SPARQ_RETURN_IF_ERROR(RequireInputType(ctx, 2, DataType::kFloat32, "conv_f32_im2col_cublaslt"));
    const int64_t M = g.out_channels;
    if (ctx.input(2).numel() != M) return ctx.InvalidArgument("B must have one value per output channel");
    SPARQ_RETURN_IF_ERROR(LaunchAddChannelBiasF32(static_cast<float*>(y->raw_data()),
                                                  static_cast<const float*>(ctx.input(2).raw_data()), g.batch, M,
                                                  g.pixels(), cuda->stream()));
  }
  return Status::OK();
}

// sparq.FusedConv (runtime/passes/float_fusion.h): the convolution, then its
// clamp [out_min, out_max] and, with activation "Silu", x * Sigmoid(x), in place.
Status ApplyFusedActivation(OpContext& ctx, CudaContext& cuda) {
  Tensor& y = ctx.outputs()[0];
  float* p = static_cast<float*>(y.raw_data());
  const float lo = ctx.node().attr_float("out_min", -std::numeric_limits<float>::infinity());
  const float hi = ctx.node().attr_float("out_max", std::numeric_limits<float>::infinity());
  SPARQ_RETURN_IF_ERROR(LaunchUnary(UnaryOp::kClip, p, p, y.numel(), lo, hi, 0.0f, cuda.stream()));
  if (ctx.node().attr_string("activation", "") == "Silu") {
    SPARQ_RETURN_IF_ERROR(LaunchUnary(UnaryOp::kSilu, p, p, y.numel(), 0.0f, 0.0f, 0.0f, cuda.stream()));
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
  SPARQ_RETURN_IF_ERROR(FusedConvF32<FloatConvDepthwise<float>>(dw));
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
  const LtGemmType type = cuda.options().allow_tf32 ? LtGemmType::kTF32 : LtGemmType::kF32;
  SPARQ_RETURN_IF_ERROR_WITH_CONTEXT(RunCudaGemm(cuda, MatMulArgs(s, type, a.raw_data(), b.raw_data(), y.raw_data())),
                                     ctx.node().Describe());
  return y;
}

// y = y op b in place, b broadcast to y's shape.
Status BinaryInPlace(const OpContext& ctx, CudaContext& cuda, BinaryOp op, Tensor* y, const Tensor& b) {
  BroadcastPlan plan;
  int64_t out_dims[kMaxRank];
  int out_rank = 0;
  SPARQ_RETURN_IF_ERROR_WITH_CONTEXT(PlanBroadcast(y->shape().data(), static_cast<int>(y->rank()), b.shape().data(),
                                                   static_cast<int>(b.rank()), &plan, out_dims, &out_rank),
                                     ctx.node().Describe());
  if (Shape(out_dims, out_dims + out_rank) != y->shape()) {
    return ctx.NotSupported("attention_f32_cuda: an input of shape " + ShapeToString(b.shape()) +
                            " would grow the scores " + ShapeToString(y->shape()));
  }
  float* p = static_cast<float*>(y->raw_data());
  return LaunchBinary(op, p, static_cast<const float*>(b.raw_data()), p, plan, cuda.stream());
}

Status AttentionF32(OpContext& ctx) {
  SPARQ_RETURN_IF_ERROR(ctx.RequireInputs(3));
  for (size_t i = 5; i < ctx.num_inputs(); ++i)  // torch's SDPA form: the host's rows
    if (ctx.has_input(i)) return ctx.NotSupported("attention_f32_cuda takes no q_scale, k_scale or nan_fill");
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
  SPARQ_RETURN_IF_ERROR(LaunchSoftmaxRows(sp, sp, n > 0 ? scores.numel() / n : 0, n, cuda->stream()));
  SPARQ_ASSIGN_OR_RETURN(Tensor y, MatMulOnDevice(ctx, *cuda, scores, v));
  if (bshd) {
    SPARQ_ASSIGN_OR_RETURN(y, PermuteOnDevice(*cuda, y, {0, 2, 1, 3}));
  }
  ctx.set_output(0, std::move(y));
  return Status::OK();
}

}  // namespace

void RegisterCudaGemmRows(KernelRegistry& r) {
  r.Add(CudaRow("MatMul", "", 1, WithHostFallback<MatMulDense>, "gemm_cublaslt", NameByWeight(nullptr)));
  r.Add(CudaRow("Gemm", "", 1, WithHostFallback<Gemm>, "gemm_cublaslt", NameByWeight(CheckGemm)));
  r.Add(CudaRow("Conv", "", 1, WithHostFallback<FloatConvDepthwise<float>>, "conv_dw_f32_cuda", CheckOnly(CheckConvDepthwise), 0,
                kCudaPrioritySpecial));
  r.Add(CudaRow("Conv", "", 1, WithHostFallback<ConvIm2ColF32>, "conv_f32_im2col_cublaslt", CheckOnly(CheckConvIm2Col)));
  r.Add(CudaRow("FusedConv", kSparqDomain, 1, WithHostFallback<FusedConvF32<FloatConvDepthwise<float>>>, "fused_conv_dw_f32_cuda",
                CheckOnly(CheckConvDepthwise), 0, kCudaPrioritySpecial));
  r.Add(CudaRow("FusedConv", kSparqDomain, 1, WithHostFallback<FusedConvF32<ConvIm2ColF32>>,
                "fused_conv_f32_im2col_cublaslt", CheckOnly(CheckConvIm2Col)));
  r.Add(CudaRow("PointwiseDepthwise", kSparqDomain, 1, WithHostFallback<PointwiseDepthwiseF32>,
                "pointwise_depthwise_f32_cuda", CheckOnly(CheckPointwiseDepthwise)));
  r.Add(CudaRow("Attention", kSparqDomain, 1, WithHostFallback<AttentionF32>, "attention_f32_cuda"));
}

}  // namespace cuda
}  // namespace sparq
