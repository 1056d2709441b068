// CUDA rows of float16 models (cuda_rows.h lists them): the operators an FP16
// transformer and CNN written by `sparq quantize --precision fp16` run, so
// that no node of MiniLM-L6 or EfficientNet-Lite0 leaves the GPU
// (tests/runtime/cuda_fp16_rows_test.cc). The CUDA backend runs float16 models
// as written (Backend::RunsFloat16AsWritten): float16 values stay float16 on
// the device, and each row computes in float32 inside each thread and rounds
// once (device_f16.h), as the reference kernels compute float16 ops.
//
// Each row takes a node only where the graph says its inputs are float16
// (Float16Only: constants, graph inputs, shape inference); a node whose types
// are unknown goes to the float32 row of its op, whose run-time check sends a
// float16 input to HostFallback. MatMul with float16 operands is the float32
// row's cuBLASLt GEMM (gemm_f16_cublaslt, rows_gemm.cc). The unary ops,
// Clip, Softmax, LayerNormalization, the reductions, pooling and depthwise
// Conv are the float32 rows' bodies on Half (FloatSoftmax<Half>, ...,
// cuda_rows.h); what is float16's own here: the prepare step, the binary
// rows, Cast, and Conv / Gemm with the bias or C as the GEMM's C (beta 1).
#include <string>
#include <vector>

#include "kernels/cuda/cuda_rows.h"
#include "kernels/cuda/cuda_status.h"
#include "kernels/cuda/gemm_cublaslt.h"
#include "kernels/cuda/geometry.h"
#include "kernels/cuda/launch.h"
#include "kernels/cuda/launch_f16.h"

namespace sparq {
namespace cuda {
namespace {

// Between the general rows and the specialised ones (kCudaPrioritySpecial),
// so no float16 row ties another row of its op.
constexpr int kF16Priority = kCudaPriorityGeneral + 6;

// The type of input i as the prepare step sees it: a constant's, else the graph's.
DataType KnownType(const std::vector<const Tensor*>& constants, const PrepareContext& context, size_t i) {
  if (i < constants.size() && constants[i] != nullptr) return constants[i]->dtype();
  return i < context.input_types.size() ? context.input_types[i] : DataType::kUndefined;
}

// Takes the node when every input in `mask` that is present is float16 where
// the graph says it (and at least input 0 is known float16), then runs `check`.
PrepareFn Float16Only(uint32_t mask, Status (*check)(const Node&, const std::vector<const Tensor*>&) = nullptr) {
  return [mask, check](const Node& node, const std::vector<const Tensor*>& constants,
                       const PrepareContext& context) -> StatusOr<PreparedKernel> {
    if (KnownType(constants, context, 0) != DataType::kFloat16) {
      return Status::NotSupported(node.Describe() + ": the float16 CUDA rows take inputs the graph says are float16");
    }
    for (size_t i = 1; i < node.inputs.size() && i < 32; ++i) {
      if (((mask >> i) & 1u) == 0 || node.inputs[i].empty()) continue;
      const DataType t = KnownType(constants, context, i);
      if (t != DataType::kUndefined && t != DataType::kFloat16) {
        return Status::NotSupported(node.Describe() + ": the float16 CUDA row takes float16, input " + std::to_string(i) +
                                    " is " + DataTypeName(t));
      }
    }
    if (check != nullptr) SPARQ_RETURN_IF_ERROR(check(node, constants));
    return PreparedKernel{};
  };
}

// ---------------------------------------------------------------------------
// Elementwise

template <BinaryOp kOp>
Status BinaryF16(OpContext& ctx) {
  SPARQ_RETURN_IF_ERROR(RequireFloatInput<Half>(ctx, 0, "the float16 binary rows"));
  SPARQ_RETURN_IF_ERROR(RequireFloatInput<Half>(ctx, 1, "the float16 binary rows"));
  SPARQ_ASSIGN_OR_RETURN(CudaContext * cuda, CudaContextOf(ctx));
  BroadcastPlan plan;
  SPARQ_ASSIGN_OR_RETURN(const Shape out, PlanBinaryBroadcast(ctx, &plan));
  SPARQ_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, DataType::kFloat16, out));
  return LaunchBinary(kOp, InAs<Half>(ctx, 0), InAs<Half>(ctx, 1), OutAs<Half>(y), plan, cuda->stream());
}

// sparq.RoundToFloat16 (runtime/passes/fp16_lowering.h) on float32 values:
// for executors that lower float16 to float32 (ExecutorOptions::float16 kRounded).
Status RoundToFloat16F32(OpContext& ctx) {
  SPARQ_RETURN_IF_ERROR(RequireDeviceInput(ctx, 0));
  SPARQ_RETURN_IF_ERROR(RequireInputType(ctx, 0, DataType::kFloat32, "round_f16_f32_cuda"));
  SPARQ_ASSIGN_OR_RETURN(CudaContext * cuda, CudaContextOf(ctx));
  const Tensor& x = ctx.input(0);
  SPARQ_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, DataType::kFloat32, x.shape()));
  return LaunchRoundToF16F32(InF32(ctx, 0), static_cast<float*>(y->raw_data()), x.numel(), cuda->stream());
}

// ---------------------------------------------------------------------------
// Cast with float16 on one side

// Takes a Cast to float16 from a type the kernel reads, or from float16 (as
// the graph says) to one it writes; other casts are cast_cuda's.
StatusOr<PreparedKernel> PrepareCastF16(const Node& node, const std::vector<const Tensor*>& constants,
                                        const PrepareContext& context) {
  const DataType to = CastTarget(node.attr_int("to", 0));
  const DataType from = KnownType(constants, context, 0);
  const bool to_half = to == DataType::kFloat16, from_half = from == DataType::kFloat16;
  if (to == DataType::kUndefined || (!to_half && !from_half)) {
    return Status::NotSupported(node.Describe() + ": cast_f16_cuda casts to or from float16 only");
  }
  if (from != DataType::kUndefined && CastCode(from) < 0) {
    return Status::NotSupported(node.Describe() + ": cast_f16_cuda does not read " + DataTypeName(from));
  }
  return PreparedKernel{};
}

Status CastF16(OpContext& ctx) { return RunCast(ctx, true); }

// ---------------------------------------------------------------------------
// Conv and Gemm on cuBLASLt's float16 GEMM (float32 sums; the bias or C is
// the GEMM's C with beta = 1, so it is added inside the float32 epilogue and
// each output rounded once)

Status ConvIm2ColF16(OpContext& ctx) {
  SPARQ_RETURN_IF_ERROR(RequireFloatInput<Half>(ctx, 0, "conv_f16_im2col_cublaslt"));
  SPARQ_RETURN_IF_ERROR(RequireFloatInput<Half>(ctx, 1, "conv_f16_im2col_cublaslt"));
  if (ctx.node().attr_int("group", 1) != 1) return ctx.NotSupported("conv_f16_im2col_cublaslt takes group 1");
  SPARQ_ASSIGN_OR_RETURN(CudaContext * cuda, CudaContextOf(ctx));
  const Tensor& x = ctx.input(0);
  const Tensor& w = ctx.input(1);
  Shape y_shape;
  SPARQ_ASSIGN_OR_RETURN(const Conv2dGeometry g, Conv2dGeometryOf(ctx, x.shape(), w.shape(), &y_shape));
  const int64_t M = g.out_channels;
  const Half* bias = nullptr;
  if (ctx.has_input(2)) {
    SPARQ_RETURN_IF_ERROR(RequireFloatInput<Half>(ctx, 2, "conv_f16_im2col_cublaslt"));
    if (ctx.input(2).numel() != M) return ctx.InvalidArgument("B must have one value per output channel");
    bias = InAs<Half>(ctx, 2);
  }
  SPARQ_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, DataType::kFloat16, y_shape));
  if (y->numel() == 0) return Status::OK();
  if (bias != nullptr) SPARQ_RETURN_IF_ERROR(LaunchChannelBiasF16(bias, OutAs<Half>(y), g.batch, M, g.pixels(), cuda->stream()));
  return ConvIm2ColGemm(ctx, *cuda, g, LtGemmType::kF16, sizeof(Half), x.raw_data(), w.raw_data(), y->raw_data(),
                        bias != nullptr ? 1.0f : 0.0f, true);
}

Status CheckGemmF16(const Node& node, const std::vector<const Tensor*>&) {
  if (node.inputs.size() > 2 && !node.inputs[2].empty() && node.attr_float("beta", 1.0f) != 1.0f) {
    return Status::NotSupported(node.Describe() + ": gemm_f16_cublaslt adds C with beta = 1 only");
  }
  return Status::OK();
}

// Gemm of float16 A, B (and C, broadcast to [M, N] first, then the GEMM's C).
Status GemmF16(OpContext& ctx) {
  SPARQ_RETURN_IF_ERROR(RequireFloatInput<Half>(ctx, 0, "gemm_f16_cublaslt"));
  SPARQ_RETURN_IF_ERROR(RequireFloatInput<Half>(ctx, 1, "gemm_f16_cublaslt"));
  SPARQ_ASSIGN_OR_RETURN(CudaContext * cuda, CudaContextOf(ctx));
  SPARQ_ASSIGN_OR_RETURN(const GemmShape s, GemmShapeOf(ctx));
  const int64_t m = s.m, n = s.n;
  SPARQ_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, DataType::kFloat16, {m, n}));
  if (y->numel() == 0) return Status::OK();
  if (s.has_c) {  // y = C broadcast to [M, N] (a strided copy), then the GEMM's C
    SPARQ_RETURN_IF_ERROR(RequireFloatInput<Half>(ctx, 2, "gemm_f16_cublaslt"));
    const Shape& c = ctx.input(2).shape();
    if (c.size() > 2) return ctx.InvalidArgument("C of shape " + ShapeToString(c) + " does not broadcast to [M, N]");
    const int64_t cm = c.size() == 2 ? c[0] : 1, cn = c.empty() ? 1 : c.back();
    if ((cm != 1 && cm != m) || (cn != 1 && cn != n)) {
      return ctx.InvalidArgument("C of shape " + ShapeToString(c) + " does not broadcast to [M, N]");
    }
    PermutePlan copy;
    copy.rank = 2;
    copy.numel = m * n;
    copy.out_dims[0] = m;
    copy.out_dims[1] = n;
    copy.in_strides[0] = cm == 1 ? 0 : cn;
    copy.in_strides[1] = cn == 1 ? 0 : 1;
    SPARQ_RETURN_IF_ERROR(LaunchPermute(ctx.input(2).raw_data(), y->raw_data(), 2, copy, cuda->stream()));
  }
  LtGemmArgs args = GemmArgsOf(ctx, s, LtGemmType::kF16, y->raw_data());
  args.beta = s.has_c ? 1.0f : 0.0f;
  return RunCudaGemm(*cuda, args).WithContext(ctx.node().Describe());
}

}  // namespace

void RegisterCudaF16Rows(KernelRegistry& r) {
  const uint32_t x = HostInput(0), xy = HostInput(0) | HostInput(1), xyz = xy | HostInput(2);
  auto row = [&r](const char* op, const char* domain, int since, KernelFn fn, const char* name, PrepareFn prepare,
                  uint32_t host_inputs = 0) {
    r.Add(CudaRow(op, domain, since, fn, name, std::move(prepare), host_inputs, kF16Priority));
  };
  row("Add", "", 7, WithHostFallback<BinaryF16<BinaryOp::kAdd>>, "add_f16_cuda", Float16Only(xy));
  row("Sub", "", 7, WithHostFallback<BinaryF16<BinaryOp::kSub>>, "sub_f16_cuda", Float16Only(xy));
  row("Mul", "", 7, WithHostFallback<BinaryF16<BinaryOp::kMul>>, "mul_f16_cuda", Float16Only(xy));
  row("Div", "", 7, WithHostFallback<BinaryF16<BinaryOp::kDiv>>, "div_f16_cuda", Float16Only(xy));
  row("Relu", "", 6, WithHostFallback<FloatUnary<Half, UnaryOp::kRelu>>, "relu_f16_cuda", Float16Only(x));
  row("Sigmoid", "", 6, WithHostFallback<FloatUnary<Half, UnaryOp::kSigmoid>>, "sigmoid_f16_cuda", Float16Only(x));
  row("Tanh", "", 6, WithHostFallback<FloatUnary<Half, UnaryOp::kTanh>>, "tanh_f16_cuda", Float16Only(x));
  row("Erf", "", 9, WithHostFallback<FloatUnary<Half, UnaryOp::kErf>>, "erf_f16_cuda", Float16Only(x));
  row("Sqrt", "", 6, WithHostFallback<FloatUnary<Half, UnaryOp::kSqrt>>, "sqrt_f16_cuda", Float16Only(x));
  row("Exp", "", 6, WithHostFallback<FloatUnary<Half, UnaryOp::kExp>>, "exp_f16_cuda", Float16Only(x));
  row("Neg", "", 6, WithHostFallback<FloatUnary<Half, UnaryOp::kNeg>>, "neg_f16_cuda", Float16Only(x));
  row("Abs", "", 6, WithHostFallback<FloatUnary<Half, UnaryOp::kAbs>>, "abs_f16_cuda", Float16Only(x));
  row("Reciprocal", "", 6, WithHostFallback<FloatUnary<Half, UnaryOp::kReciprocal>>, "reciprocal_f16_cuda", Float16Only(x));
  row("Clip", "", 6, WithHostFallback<FloatClip<Half>>, "clip_f16_cuda", Float16Only(x), HostInput(1) | HostInput(2));
  row("Gelu", "", 20, WithHostFallback<FloatUnary<Half, UnaryOp::kGelu>>, "gelu_f16_cuda", Float16Only(x, CheckGelu));
  row("Cast", "", 6, WithHostFallback<CastF16>, "cast_f16_cuda", PrepareCastF16);
  row("Softmax", "", 1, WithHostFallback<FloatSoftmax<Half>>, "softmax_f16_cuda", Float16Only(x));
  row("LayerNormalization", "", 1, WithHostFallback<FloatLayerNorm<Half>>, "layernorm_f16_cuda", Float16Only(xyz, CheckLayerNorm));
  {
    KernelDef mean_attr = CudaRow("ReduceMean", "", 1, WithHostFallback<FloatReduceSumMean<Half, true, false>>, "reduce_mean_f16_cuda",
                                  Float16Only(x), 0, kF16Priority);
    mean_attr.until_opset = 17;
    r.Add(std::move(mean_attr));
    KernelDef sum_attr = CudaRow("ReduceSum", "", 1, WithHostFallback<FloatReduceSumMean<Half, false, false>>, "reduce_sum_f16_cuda",
                                 Float16Only(x), 0, kF16Priority);
    sum_attr.until_opset = 12;
    r.Add(std::move(sum_attr));
  }
  row("ReduceMean", "", 18, WithHostFallback<FloatReduceSumMean<Half, true, true>>, "reduce_mean_f16_cuda", Float16Only(x), HostInput(1));
  row("ReduceSum", "", 13, WithHostFallback<FloatReduceSumMean<Half, false, true>>, "reduce_sum_f16_cuda", Float16Only(x), HostInput(1));
  row("MaxPool", "", 1, WithHostFallback<FloatPool2d<Half, true>>, "maxpool2d_f16_cuda", Float16Only(x, CheckPool));
  row("AveragePool", "", 1, WithHostFallback<FloatPool2d<Half, false>>, "avgpool2d_f16_cuda", Float16Only(x, CheckPool));
  row("GlobalAveragePool", "", 1, WithHostFallback<FloatGlobalAveragePool<Half>>, "global_avgpool_f16_cuda", Float16Only(x));
  row("Conv", "", 1, WithHostFallback<ConvIm2ColF16>, "conv_f16_im2col_cublaslt", Float16Only(xyz, CheckConvIm2Col));
  // Depthwise ahead of the float32 depthwise row (kCudaPrioritySpecial), whose
  // prepare step does not look at types.
  r.Add(CudaRow("Conv", "", 1, WithHostFallback<FloatConvDepthwise<Half>>, "conv_dw_f16_cuda",
                Float16Only(xyz, CheckConvDepthwise), 0, kCudaPrioritySpecial + 1));
  row("Gemm", "", 1, WithHostFallback<GemmF16>, "gemm_f16_cublaslt", Float16Only(xyz, CheckGemmF16));
  row("RoundToFloat16", kSparqDomain, 1, WithHostFallback<RoundToFloat16F32>, "round_f16_f32_cuda", nullptr);
}

}  // namespace cuda
}  // namespace sparq
