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
// row's cuBLASLt GEMM (gemm_f16_cublaslt, rows_gemm.cc).
#include <limits>
#include <string>
#include <vector>

#include "kernels/cuda/cuda_rows.h"
#include "kernels/cuda/cuda_status.h"
#include "kernels/cuda/gemm_cublaslt.h"
#include "kernels/cuda/geometry.h"
#include "kernels/cuda/launch.h"
#include "kernels/cuda/launch_f16.h"
#include "kernels/cuda/launch_logic.h"

namespace sparq {
namespace cuda {
namespace {

// Between the general rows and the specialised ones (kCudaPrioritySpecial),
// so no float16 row ties another row of its op.
constexpr int kF16Priority = kCudaPriorityGeneral + 6;

const Half* InF16(const OpContext& ctx, size_t i) { return static_cast<const Half*>(ctx.input(i).raw_data()); }
Half* OutF16(Tensor* t) { return static_cast<Half*>(t->raw_data()); }

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

Status RequireF16(const OpContext& ctx, size_t i, const char* row) {
  SPARQ_RETURN_IF_ERROR(RequireDeviceInput(ctx, i));
  return RequireInputType(ctx, i, DataType::kFloat16, row);
}

// ---------------------------------------------------------------------------
// Elementwise

template <BinaryOp kOp>
Status BinaryF16(OpContext& ctx) {
  SPARQ_RETURN_IF_ERROR(RequireF16(ctx, 0, "the float16 binary rows"));
  SPARQ_RETURN_IF_ERROR(RequireF16(ctx, 1, "the float16 binary rows"));
  SPARQ_ASSIGN_OR_RETURN(CudaContext * cuda, CudaContextOf(ctx));
  const Shape& a = ctx.input(0).shape();
  const Shape& b = ctx.input(1).shape();
  BroadcastPlan plan;
  int64_t out_dims[kMaxRank];
  int out_rank = 0;
  SPARQ_RETURN_IF_ERROR(PlanBroadcast(a.data(), static_cast<int>(a.size()), b.data(), static_cast<int>(b.size()), &plan,
                                      out_dims, &out_rank)
                            .WithContext(ctx.node().Describe()));
  SPARQ_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, DataType::kFloat16, Shape(out_dims, out_dims + out_rank)));
  return LaunchBinary(kOp, InF16(ctx, 0), InF16(ctx, 1), OutF16(y), plan, cuda->stream());
}

Status RunUnaryF16(OpContext& ctx, UnaryOp op, float lo = 0.0f, float hi = 0.0f) {
  SPARQ_RETURN_IF_ERROR(RequireF16(ctx, 0, "the float16 unary rows"));
  SPARQ_ASSIGN_OR_RETURN(CudaContext * cuda, CudaContextOf(ctx));
  const Tensor& x = ctx.input(0);
  SPARQ_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, DataType::kFloat16, x.shape()));
  return LaunchUnary(op, InF16(ctx, 0), OutF16(y), x.numel(), lo, hi, 0.0f, cuda->stream());
}

template <UnaryOp kOp>
Status UnaryF16(OpContext& ctx) {
  return RunUnaryF16(ctx, kOp);
}

// Clip: bounds from attributes (opset < 11) or host inputs 1 and 2.
Status ClipF16(OpContext& ctx) {
  float lo = -std::numeric_limits<float>::infinity(), hi = std::numeric_limits<float>::infinity();
  if (ctx.opset() < 11) {
    if (ctx.node().attr("min") != nullptr) lo = ctx.node().attr_float("min", 0.0f);
    if (ctx.node().attr("max") != nullptr) hi = ctx.node().attr_float("max", 0.0f);
  } else {
    for (size_t i = 1; i <= 2; ++i) {
      if (!ctx.has_input(i)) continue;
      SPARQ_ASSIGN_OR_RETURN(std::vector<float> v, HostFloats(ctx, i, i == 1 ? "min" : "max"));
      if (v.size() != 1) return ctx.InvalidArgument(std::string(i == 1 ? "min" : "max") + " must be a scalar");
      (i == 1 ? lo : hi) = v[0];
    }
  }
  return RunUnaryF16(ctx, UnaryOp::kClip, lo, hi);
}

Status CheckGeluF16(const Node& node, const std::vector<const Tensor*>&) {
  if (node.attr_string("approximate", "none") != "none") {
    return Status::NotSupported(node.Describe() + ": gelu_f16_cuda computes approximate = \"none\" only");
  }
  return Status::OK();
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

int CastCodeF16(DataType t) {
  switch (t) {
    case DataType::kFloat16: return kCastF16;
    case DataType::kFloat32: return kCastF32;
    case DataType::kInt32: return kCastI32;
    case DataType::kInt64: return kCastI64;
    case DataType::kInt8: return kCastI8;
    case DataType::kUInt8: return kCastU8;
    case DataType::kBool: return kCastBool;
    default: return -1;
  }
}

DataType CastTargetF16(int64_t to) {
  switch (to) {
    case 1: return DataType::kFloat32;
    case 2: return DataType::kUInt8;
    case 3: return DataType::kInt8;
    case 6: return DataType::kInt32;
    case 7: return DataType::kInt64;
    case 9: return DataType::kBool;
    case 10: return DataType::kFloat16;
    default: return DataType::kUndefined;
  }
}

// Takes a Cast to float16 from a type the kernel reads, or from float16 (as
// the graph says) to one it writes; other casts are cast_cuda's.
StatusOr<PreparedKernel> PrepareCastF16(const Node& node, const std::vector<const Tensor*>& constants,
                                        const PrepareContext& context) {
  const DataType to = CastTargetF16(node.attr_int("to", 0));
  const DataType from = KnownType(constants, context, 0);
  const bool to_half = to == DataType::kFloat16, from_half = from == DataType::kFloat16;
  if (to == DataType::kUndefined || (!to_half && !from_half)) {
    return Status::NotSupported(node.Describe() + ": cast_f16_cuda casts to or from float16 only");
  }
  if (from != DataType::kUndefined && CastCodeF16(from) < 0) {
    return Status::NotSupported(node.Describe() + ": cast_f16_cuda does not read " + DataTypeName(from));
  }
  return PreparedKernel{};
}

Status CastF16(OpContext& ctx) {
  SPARQ_RETURN_IF_ERROR(RequireDeviceInput(ctx, 0));
  SPARQ_ASSIGN_OR_RETURN(CudaContext * cuda, CudaContextOf(ctx));
  const Tensor& x = ctx.input(0);
  const DataType to = CastTargetF16(ctx.node().attr_int("to", 0));
  const int from_code = CastCodeF16(x.dtype()), to_code = CastCodeF16(to);
  if (from_code < 0 || to_code < 0 || (from_code != kCastF16 && to_code != kCastF16)) {
    return ctx.NotSupported("cast_f16_cuda casts float16 to or from float32, int32, int64, int8, uint8 and bool, not " +
                            DataTypeName(x.dtype()) + " to " + DataTypeName(to));
  }
  if (x.dtype() == to) {
    ctx.set_output(0, x);  // as the reference: the input itself
    return Status::OK();
  }
  SPARQ_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, to, x.shape()));
  return LaunchCastF16(x.raw_data(), from_code, y->raw_data(), to_code, x.numel(), cuda->stream());
}

// ---------------------------------------------------------------------------
// Softmax, LayerNormalization, ReduceSum / ReduceMean over the last axis

Status SoftmaxF16(OpContext& ctx) {
  SPARQ_RETURN_IF_ERROR(RequireF16(ctx, 0, "softmax_f16_cuda"));
  SPARQ_ASSIGN_OR_RETURN(CudaContext * cuda, CudaContextOf(ctx));
  const Tensor& x = ctx.input(0);
  const int64_t rank = static_cast<int64_t>(x.rank());
  if (rank == 0) return ctx.NotSupported("softmax_f16_cuda takes inputs of rank >= 1");
  const bool coerce_2d = ctx.opset() < 13;
  SPARQ_ASSIGN_OR_RETURN(const int64_t axis, NormalizeAxisOf(ctx, ctx.node().attr_int("axis", coerce_2d ? 1 : -1), rank));
  if (!coerce_2d && axis != rank - 1) return ctx.NotSupported("softmax_f16_cuda runs over the last axis only");
  const int64_t rows = Product(x.shape(), 0, static_cast<size_t>(axis));
  const int64_t n = Product(x.shape(), static_cast<size_t>(axis), x.rank());
  SPARQ_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, DataType::kFloat16, x.shape()));
  return LaunchSoftmaxRows(InF16(ctx, 0), OutF16(y), rows, n, cuda->stream());
}

Status CheckLayerNormF16(const Node& node, const std::vector<const Tensor*>&) {
  for (size_t i = 1; i < node.outputs.size(); ++i) {
    if (!node.outputs[i].empty()) {
      return Status::NotSupported(node.Describe() + ": layernorm_f16_cuda does not write Mean / InvStdDev");
    }
  }
  return Status::OK();
}

Status LayerNormF16(OpContext& ctx) {
  SPARQ_RETURN_IF_ERROR(RequireF16(ctx, 0, "layernorm_f16_cuda"));
  SPARQ_RETURN_IF_ERROR(RequireF16(ctx, 1, "layernorm_f16_cuda"));
  if (ctx.has_input(2)) SPARQ_RETURN_IF_ERROR(RequireF16(ctx, 2, "layernorm_f16_cuda"));
  SPARQ_ASSIGN_OR_RETURN(CudaContext * cuda, CudaContextOf(ctx));
  const Tensor& x = ctx.input(0);
  const int64_t rank = static_cast<int64_t>(x.rank());
  if (rank == 0) return ctx.NotSupported("layernorm_f16_cuda takes inputs of rank >= 1");
  SPARQ_ASSIGN_OR_RETURN(const int64_t axis, NormalizeAxisOf(ctx, ctx.node().attr_int("axis", -1), rank));
  const int64_t rows = Product(x.shape(), 0, static_cast<size_t>(axis));
  const int64_t cols = Product(x.shape(), static_cast<size_t>(axis), x.rank());
  if (ctx.input(1).numel() != cols || (ctx.has_input(2) && ctx.input(2).numel() != cols)) {
    return ctx.NotSupported("layernorm_f16_cuda takes Scale and B of the full normalized shape (no broadcasting)");
  }
  const double eps = ctx.node().attr_float("epsilon", 1e-5f);
  SPARQ_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, DataType::kFloat16, x.shape()));
  return LaunchLayerNormRows(InF16(ctx, 0), InF16(ctx, 1), ctx.has_input(2) ? InF16(ctx, 2) : nullptr, eps, rows,
                                cols, OutF16(y), cuda->stream());
}

// ReduceSum / ReduceMean of float16 over any axes: the float32 row's layout
// (output o reduces x[base[o] + offsets[r]] in the reference's order),
// ReduceSumMeanElement per output.
std::vector<int64_t> EnumerateOffsetsF16(const std::vector<int64_t>& dims, const std::vector<int64_t>& strides) {
  std::vector<int64_t> out;
  const int64_t total = NumElements(dims);
  if (total == 0) return out;
  out.reserve(static_cast<size_t>(total));
  std::vector<int64_t> idx(dims.size(), 0);
  int64_t off = 0;
  for (int64_t i = 0; i < total; ++i) {
    out.push_back(off);
    for (size_t d = dims.size(); d-- > 0;) {
      if (++idx[d] < dims[d]) {
        off += strides[d];
        break;
      }
      off -= strides[d] * (dims[d] - 1);
      idx[d] = 0;
    }
  }
  return out;
}

template <bool kMean, bool kAxesFromInput>
Status ReduceSumMeanF16(OpContext& ctx) {
  SPARQ_RETURN_IF_ERROR(RequireF16(ctx, 0, kMean ? "reduce_mean_f16_cuda" : "reduce_sum_f16_cuda"));
  SPARQ_ASSIGN_OR_RETURN(CudaContext * cuda, CudaContextOf(ctx));
  const Tensor& x = ctx.input(0);
  std::vector<int64_t> axes;
  bool noop = false;
  if (kAxesFromInput) {
    if (ctx.has_input(1)) {
      SPARQ_ASSIGN_OR_RETURN(axes, HostInt64s(ctx, 1, "axes"));
    }
    noop = axes.empty() && ctx.node().attr_int("noop_with_empty_axes", 0) != 0;
  } else {
    axes = ctx.node().attr_ints("axes");
  }
  const int64_t rank = static_cast<int64_t>(x.rank());
  std::vector<bool> mask(static_cast<size_t>(rank), !noop);
  if (!axes.empty()) {
    mask.assign(static_cast<size_t>(rank), false);
    for (int64_t a : axes) {
      SPARQ_ASSIGN_OR_RETURN(const int64_t axis, NormalizeAxisOf(ctx, a, rank));
      if (mask[static_cast<size_t>(axis)]) return ctx.InvalidArgument("axes list axis " + std::to_string(a) + " twice");
      mask[static_cast<size_t>(axis)] = true;
    }
  }
  const bool keepdims = ctx.node().attr_int("keepdims", 1) != 0;
  std::vector<int64_t> stride(x.rank(), 1), kept_dims, kept_strides, red_dims, red_strides;
  for (size_t d = x.rank(); d-- > 1;) stride[d - 1] = stride[d] * x.dim(d);
  Shape out;
  for (size_t d = 0; d < x.rank(); ++d) {
    if (mask[d]) {
      red_dims.push_back(x.dim(d));
      red_strides.push_back(stride[d]);
      if (keepdims) out.push_back(1);
    } else {
      kept_dims.push_back(x.dim(d));
      kept_strides.push_back(stride[d]);
      out.push_back(x.dim(d));
    }
  }
  const std::vector<int64_t> base = EnumerateOffsetsF16(kept_dims, kept_strides);
  const std::vector<int64_t> offsets = EnumerateOffsetsF16(red_dims, red_strides);
  SPARQ_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, DataType::kFloat16, out));
  if (y->numel() == 0) return Status::OK();
  SPARQ_ASSIGN_OR_RETURN(std::shared_ptr<uint8_t> base_dev, UploadVector(*cuda, base));
  std::shared_ptr<uint8_t> offsets_dev;
  if (!offsets.empty()) {
    SPARQ_ASSIGN_OR_RETURN(offsets_dev, UploadVector(*cuda, offsets));
  }
  return LaunchReduceSumMean(InF16(ctx, 0), reinterpret_cast<const int64_t*>(base_dev.get()),
                                static_cast<int64_t>(base.size()), reinterpret_cast<const int64_t*>(offsets_dev.get()),
                                static_cast<int64_t>(offsets.size()), kMean, OutF16(y), cuda->stream());
}

// ---------------------------------------------------------------------------
// Pooling (2-D, NCHW)

Status CheckPoolF16(const Node& node, const std::vector<const Tensor*>&) {
  if (node.outputs.size() > 1 && !node.outputs[1].empty()) {
    return Status::NotSupported(node.Describe() + ": the CUDA pooling rows do not write Indices");
  }
  if (node.attr_int("storage_order", 0) != 0) return Status::NotSupported(node.Describe() + ": storage_order 1");
  if (node.attr_ints("kernel_shape").size() != 2) return Status::NotSupported(node.Describe() + ": the CUDA pooling rows are 2-D only");
  return Status::OK();
}

template <bool kMax>
Status Pool2dF16(OpContext& ctx) {
  SPARQ_RETURN_IF_ERROR(RequireF16(ctx, 0, kMax ? "maxpool2d_f16_cuda" : "avgpool2d_f16_cuda"));
  SPARQ_ASSIGN_OR_RETURN(CudaContext * cuda, CudaContextOf(ctx));
  Shape y_shape;
  SPARQ_ASSIGN_OR_RETURN(const Pool2dGeometry g, Pool2dGeometryOf(ctx, ctx.input(0).shape(), &y_shape));
  SPARQ_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, DataType::kFloat16, y_shape));
  return LaunchPool2d(kMax, InF16(ctx, 0), OutF16(y), g, cuda->stream());
}

Status GlobalAveragePoolF16(OpContext& ctx) {
  SPARQ_RETURN_IF_ERROR(RequireF16(ctx, 0, "global_avgpool_f16_cuda"));
  SPARQ_ASSIGN_OR_RETURN(CudaContext * cuda, CudaContextOf(ctx));
  const Tensor& x = ctx.input(0);
  if (x.rank() < 3) return ctx.InvalidArgument("X must have rank >= 3, got " + ShapeToString(x.shape()));
  Shape y_shape(x.rank(), 1);
  y_shape[0] = x.dim(0);
  y_shape[1] = x.dim(1);
  SPARQ_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, DataType::kFloat16, y_shape));
  return LaunchGlobalAveragePool(InF16(ctx, 0), OutF16(y), x.dim(0) * x.dim(1), Product(x.shape(), 2, x.rank()),
                                    cuda->stream());
}

// ---------------------------------------------------------------------------
// Conv and Gemm on cuBLASLt's float16 GEMM (float32 sums; the bias or C is
// the GEMM's C with beta = 1, so it is added inside the float32 epilogue and
// each output rounded once)

Status CheckConvF16(const Node& node, const std::vector<const Tensor*>& constants) {
  if (node.attr_int("group", 1) != 1) return Status::NotSupported(node.Describe() + ": conv_f16_im2col_cublaslt takes group 1");
  if (constants.size() > 1 && constants[1] != nullptr && constants[1]->rank() != 4) {
    return Status::NotSupported(node.Describe() + ": the CUDA Conv rows are 2-D only");
  }
  return Status::OK();
}

Status CheckConvDepthwiseF16(const Node& node, const std::vector<const Tensor*>& constants) {
  const int64_t group = node.attr_int("group", 1);
  if (group <= 1) return Status::NotSupported(node.Describe() + ": conv_dw_f16_cuda takes depthwise convolutions only");
  if (constants.size() > 1 && constants[1] != nullptr) {
    const Shape& w = constants[1]->shape();
    if (w.size() != 4 || w[0] != group || w[1] != 1) {
      return Status::NotSupported(node.Describe() + ": conv_dw_f16_cuda takes weights [C, 1, kh, kw] with group = C");
    }
  }
  return Status::OK();
}

Status ConvIm2ColF16(OpContext& ctx) {
  SPARQ_RETURN_IF_ERROR(RequireF16(ctx, 0, "conv_f16_im2col_cublaslt"));
  SPARQ_RETURN_IF_ERROR(RequireF16(ctx, 1, "conv_f16_im2col_cublaslt"));
  if (ctx.node().attr_int("group", 1) != 1) return ctx.NotSupported("conv_f16_im2col_cublaslt takes group 1");
  SPARQ_ASSIGN_OR_RETURN(CudaContext * cuda, CudaContextOf(ctx));
  const Tensor& x = ctx.input(0);
  const Tensor& w = ctx.input(1);
  Shape y_shape;
  SPARQ_ASSIGN_OR_RETURN(const Conv2dGeometry g, Conv2dGeometryOf(ctx, x.shape(), w.shape(), &y_shape));
  const int64_t K = g.patch(), P = g.pixels(), M = g.out_channels;
  const Half* bias = nullptr;
  if (ctx.has_input(2)) {
    SPARQ_RETURN_IF_ERROR(RequireF16(ctx, 2, "conv_f16_im2col_cublaslt"));
    if (ctx.input(2).numel() != M) return ctx.InvalidArgument("B must have one value per output channel");
    bias = InF16(ctx, 2);
  }
  SPARQ_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, DataType::kFloat16, y_shape));
  if (y->numel() == 0) return Status::OK();
  if (bias != nullptr) SPARQ_RETURN_IF_ERROR(LaunchChannelBiasF16(bias, OutF16(y), g.batch, M, P, cuda->stream()));
  // A 1x1 stride-1 unpadded convolution reads x [C, H*W] as it is: no column matrix.
  const bool pointwise = g.kernel_h == 1 && g.kernel_w == 1 && g.stride_h == 1 && g.stride_w == 1 && g.pad_top == 0 &&
                         g.pad_left == 0 && g.out_height == g.height && g.out_width == g.width;
  std::shared_ptr<uint8_t> col;
  if (!pointwise) {
    SPARQ_ASSIGN_OR_RETURN(col, Scratch(*cuda, static_cast<size_t>(P * K) * sizeof(Half)));
  }
  const Half* xp = InF16(ctx, 0);
  for (int64_t n = 0; n < g.batch; ++n) {
    const Half* image = xp + n * g.channels * g.height * g.width;
    LtGemmArgs args;  // y[n] [M, P] = w [M, K] * col [P, K]^T  (pointwise: w [M, C] * x [C, P])
    args.type = LtGemmType::kF16;
    args.m = M;
    args.n = P;
    args.k = K;
    args.a = w.raw_data();
    args.lda = K;
    if (pointwise) {
      args.b = image;
      args.ldb = P;
    } else {
      SPARQ_RETURN_IF_ERROR(LaunchIm2Col(image, col.get(), 2, 0u, g, cuda->stream()));
      args.b = col.get();
      args.ldb = K;
      args.trans_b = true;
    }
    args.c = OutF16(y) + n * M * P;
    args.ldc = P;
    args.beta = bias != nullptr ? 1.0f : 0.0f;
    SPARQ_RETURN_IF_ERROR(RunCudaGemm(*cuda, args).WithContext(ctx.node().Describe()));
  }
  return Status::OK();
}

Status ConvDepthwiseF16(OpContext& ctx) {
  SPARQ_RETURN_IF_ERROR(RequireF16(ctx, 0, "conv_dw_f16_cuda"));
  SPARQ_RETURN_IF_ERROR(RequireF16(ctx, 1, "conv_dw_f16_cuda"));
  SPARQ_ASSIGN_OR_RETURN(CudaContext * cuda, CudaContextOf(ctx));
  const Tensor& x = ctx.input(0);
  const Tensor& w = ctx.input(1);
  const int64_t group = ctx.node().attr_int("group", 1);
  if (x.rank() != 4 || w.rank() != 4 || group != x.dim(1) || w.dim(0) != group || w.dim(1) != 1) {
    return ctx.NotSupported("conv_dw_f16_cuda takes x [N, C, H, W], w [C, 1, kh, kw] and group = C");
  }
  Shape y_shape;
  SPARQ_ASSIGN_OR_RETURN(Conv2dGeometry g, Conv2dGeometryOf(ctx, x.shape(), w.shape(), &y_shape));
  g.channels = x.dim(1);  // one channel per group: the kernel walks all C planes
  const Half* bias = nullptr;
  if (ctx.has_input(2)) {
    SPARQ_RETURN_IF_ERROR(RequireF16(ctx, 2, "conv_dw_f16_cuda"));
    if (ctx.input(2).numel() != group) return ctx.InvalidArgument("B must have one value per output channel");
    bias = InF16(ctx, 2);
  }
  SPARQ_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, DataType::kFloat16, y_shape));
  return LaunchDepthwiseConv(InF16(ctx, 0), InF16(ctx, 1), bias, OutF16(y), g, cuda->stream());
}

Status CheckGemmF16(const Node& node, const std::vector<const Tensor*>&) {
  if (node.inputs.size() > 2 && !node.inputs[2].empty() && node.attr_float("beta", 1.0f) != 1.0f) {
    return Status::NotSupported(node.Describe() + ": gemm_f16_cublaslt adds C with beta = 1 only");
  }
  return Status::OK();
}

// Gemm of float16 A, B (and C, broadcast to [M, N] first, then the GEMM's C).
Status GemmF16(OpContext& ctx) {
  SPARQ_RETURN_IF_ERROR(RequireF16(ctx, 0, "gemm_f16_cublaslt"));
  SPARQ_RETURN_IF_ERROR(RequireF16(ctx, 1, "gemm_f16_cublaslt"));
  SPARQ_ASSIGN_OR_RETURN(CudaContext * cuda, CudaContextOf(ctx));
  const Tensor& a = ctx.input(0);
  const Tensor& b = ctx.input(1);
  if (a.rank() != 2 || b.rank() != 2) return ctx.InvalidArgument("Gemm takes 2-D A and B");
  const bool ta = ctx.node().attr_int("transA", 0) != 0, tb = ctx.node().attr_int("transB", 0) != 0;
  const int64_t m = ta ? a.dim(1) : a.dim(0), k = ta ? a.dim(0) : a.dim(1);
  const int64_t kb = tb ? b.dim(1) : b.dim(0), n = tb ? b.dim(0) : b.dim(1);
  if (k != kb) return ctx.InvalidArgument("Gemm of " + ShapeToString(a.shape()) + " and " + ShapeToString(b.shape()) + ": inner dimensions differ");
  const bool has_c = ctx.has_input(2) && ctx.node().attr_float("beta", 1.0f) != 0.0f;
  SPARQ_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, DataType::kFloat16, {m, n}));
  if (y->numel() == 0) return Status::OK();
  if (has_c) {  // y = C broadcast to [M, N] (a strided copy), then the GEMM's C
    SPARQ_RETURN_IF_ERROR(RequireF16(ctx, 2, "gemm_f16_cublaslt"));
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
  LtGemmArgs args;
  args.type = LtGemmType::kF16;
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
  args.beta = has_c ? 1.0f : 0.0f;
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
  row("Relu", "", 6, WithHostFallback<UnaryF16<UnaryOp::kRelu>>, "relu_f16_cuda", Float16Only(x));
  row("Sigmoid", "", 6, WithHostFallback<UnaryF16<UnaryOp::kSigmoid>>, "sigmoid_f16_cuda", Float16Only(x));
  row("Tanh", "", 6, WithHostFallback<UnaryF16<UnaryOp::kTanh>>, "tanh_f16_cuda", Float16Only(x));
  row("Erf", "", 9, WithHostFallback<UnaryF16<UnaryOp::kErf>>, "erf_f16_cuda", Float16Only(x));
  row("Sqrt", "", 6, WithHostFallback<UnaryF16<UnaryOp::kSqrt>>, "sqrt_f16_cuda", Float16Only(x));
  row("Exp", "", 6, WithHostFallback<UnaryF16<UnaryOp::kExp>>, "exp_f16_cuda", Float16Only(x));
  row("Neg", "", 6, WithHostFallback<UnaryF16<UnaryOp::kNeg>>, "neg_f16_cuda", Float16Only(x));
  row("Abs", "", 6, WithHostFallback<UnaryF16<UnaryOp::kAbs>>, "abs_f16_cuda", Float16Only(x));
  row("Reciprocal", "", 6, WithHostFallback<UnaryF16<UnaryOp::kReciprocal>>, "reciprocal_f16_cuda", Float16Only(x));
  row("Clip", "", 6, WithHostFallback<ClipF16>, "clip_f16_cuda", Float16Only(x), HostInput(1) | HostInput(2));
  row("Gelu", "", 20, WithHostFallback<UnaryF16<UnaryOp::kGelu>>, "gelu_f16_cuda", Float16Only(x, CheckGeluF16));
  row("Cast", "", 6, WithHostFallback<CastF16>, "cast_f16_cuda", PrepareCastF16);
  row("Softmax", "", 1, WithHostFallback<SoftmaxF16>, "softmax_f16_cuda", Float16Only(x));
  row("LayerNormalization", "", 1, WithHostFallback<LayerNormF16>, "layernorm_f16_cuda", Float16Only(xyz, CheckLayerNormF16));
  {
    KernelDef mean_attr = CudaRow("ReduceMean", "", 1, WithHostFallback<ReduceSumMeanF16<true, false>>, "reduce_mean_f16_cuda",
                                  Float16Only(x), 0, kF16Priority);
    mean_attr.until_opset = 17;
    r.Add(std::move(mean_attr));
    KernelDef sum_attr = CudaRow("ReduceSum", "", 1, WithHostFallback<ReduceSumMeanF16<false, false>>, "reduce_sum_f16_cuda",
                                 Float16Only(x), 0, kF16Priority);
    sum_attr.until_opset = 12;
    r.Add(std::move(sum_attr));
  }
  row("ReduceMean", "", 18, WithHostFallback<ReduceSumMeanF16<true, true>>, "reduce_mean_f16_cuda", Float16Only(x), HostInput(1));
  row("ReduceSum", "", 13, WithHostFallback<ReduceSumMeanF16<false, true>>, "reduce_sum_f16_cuda", Float16Only(x), HostInput(1));
  row("MaxPool", "", 1, WithHostFallback<Pool2dF16<true>>, "maxpool2d_f16_cuda", Float16Only(x, CheckPoolF16));
  row("AveragePool", "", 1, WithHostFallback<Pool2dF16<false>>, "avgpool2d_f16_cuda", Float16Only(x, CheckPoolF16));
  row("GlobalAveragePool", "", 1, WithHostFallback<GlobalAveragePoolF16>, "global_avgpool_f16_cuda", Float16Only(x));
  row("Conv", "", 1, WithHostFallback<ConvIm2ColF16>, "conv_f16_im2col_cublaslt", Float16Only(xyz, CheckConvF16));
  // Depthwise ahead of the float32 depthwise row (kCudaPrioritySpecial), whose
  // prepare step does not look at types.
  r.Add(CudaRow("Conv", "", 1, WithHostFallback<ConvDepthwiseF16>, "conv_dw_f16_cuda",
                Float16Only(xyz, CheckConvDepthwiseF16), 0, kCudaPrioritySpecial + 1));
  row("Gemm", "", 1, WithHostFallback<GemmF16>, "gemm_f16_cublaslt", Float16Only(xyz, CheckGemmF16));
  row("RoundToFloat16", kSparqDomain, 1, WithHostFallback<RoundToFloat16F32>, "round_f16_f32_cuda", nullptr);
}

}  // namespace cuda
}  // namespace sparq
