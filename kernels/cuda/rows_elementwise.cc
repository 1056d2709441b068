// CUDA rows of elementwise operators (float32, and int32 / int64 arithmetic),
// activations, Softmax, LayerNormalization, pooling, ReduceSum / ReduceMean
// and Cast (cuda_rows.h lists them).
#include <algorithm>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "kernels/cuda/cuda_rows.h"
#include "kernels/cuda/cuda_status.h"
#include "kernels/cuda/geometry.h"
#include "kernels/cuda/launch.h"

namespace sparq {
namespace cuda {
namespace {

// ---------------------------------------------------------------------------
// Elementwise

// Add / Sub / Mul / Div of float32, int32 or int64 (shape arithmetic stays on the device).
template <BinaryOp kOp>
Status Binary(OpContext& ctx) {
  SPARQ_RETURN_IF_ERROR(RequireDeviceInput(ctx, 0));
  SPARQ_RETURN_IF_ERROR(RequireDeviceInput(ctx, 1));
  const DataType type = ctx.input(0).dtype();
  if (ctx.input(1).dtype() != type) return ctx.InvalidArgument("A and B differ in type");
  if (type != DataType::kFloat32 && type != DataType::kInt32 && type != DataType::kInt64) {
    return ctx.NotSupported("the CUDA binary rows take float32, int32 and int64, not " + DataTypeName(type));
  }
  SPARQ_ASSIGN_OR_RETURN(CudaContext * cuda, CudaContextOf(ctx));
  const Shape& a = ctx.input(0).shape();
  const Shape& b = ctx.input(1).shape();
  BroadcastPlan plan;
  int64_t out_dims[kMaxRank];
  int out_rank = 0;
  Status st = PlanBroadcast(a.data(), static_cast<int>(a.size()), b.data(), static_cast<int>(b.size()), &plan, out_dims,
                            &out_rank);
  if (!st.ok()) return st.WithContext(ctx.node().Describe());
  SPARQ_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, type, Shape(out_dims, out_dims + out_rank)));
  if (type == DataType::kFloat32) {
    return LaunchBinary(kOp, InF32(ctx, 0), InF32(ctx, 1), static_cast<float*>(y->raw_data()), plan, cuda->stream());
  }
  return LaunchBinaryInt(kOp, static_cast<int>(DataTypeSize(type)), ctx.input(0).raw_data(), ctx.input(1).raw_data(),
                         y->raw_data(), plan, cuda->stream());
}

// Declines a node whose constant inputs in `mask` are not float32, int32 or int64.
PrepareFn NumericOnly(uint32_t mask) {
  return [mask](const Node& node, const std::vector<const Tensor*>& constants,
                const PrepareContext&) -> StatusOr<PreparedKernel> {
    for (size_t i = 0; i < constants.size() && i < 32; ++i) {
      if (((mask >> i) & 1u) == 0 || constants[i] == nullptr) continue;
      const DataType t = constants[i]->dtype();
      if (t != DataType::kFloat32 && t != DataType::kInt32 && t != DataType::kInt64) {
        return Status::NotSupported(node.Describe() + ": the CUDA binary rows take float32, int32 and int64, input " +
                                    std::to_string(i) + " is " + DataTypeName(t));
      }
    }
    return PreparedKernel{};
  };
}


Status RunUnary(OpContext& ctx, UnaryOp op, float p0 = 0.0f, float p1 = 0.0f, float p2 = 0.0f) {
  SPARQ_RETURN_IF_ERROR(RequireDeviceInput(ctx, 0));
  SPARQ_RETURN_IF_ERROR(RequireInputType(ctx, 0, DataType::kFloat32, "the CUDA unary row"));
  SPARQ_ASSIGN_OR_RETURN(CudaContext * cuda, CudaContextOf(ctx));
  const Tensor& x = ctx.input(0);
  SPARQ_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, DataType::kFloat32, x.shape()));
  return LaunchUnary(op, InF32(ctx, 0), static_cast<float*>(y->raw_data()), x.numel(), p0, p1, p2, cuda->stream());
}

template <UnaryOp kOp>
Status UnaryF32(OpContext& ctx) {
  return RunUnary(ctx, kOp);
}

Status ClipF32(OpContext& ctx) {
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
  return RunUnary(ctx, UnaryOp::kClip, lo, hi);
}

Status GeluF32(OpContext& ctx) {
  if (ctx.node().attr_string("approximate", "none") != "none") {
    return ctx.NotSupported("the CUDA Gelu row computes approximate = \"none\" only");
  }
  return RunUnary(ctx, UnaryOp::kGelu);
}

Status CheckGelu(const Node& node, const std::vector<const Tensor*>&) {
  if (node.attr_string("approximate", "none") != "none") {
    return Status::NotSupported(node.Describe() + ": the CUDA Gelu row computes approximate = \"none\" only");
  }
  return Status::OK();
}

// sparq.GeluErfChain; the output has at least min_rank dimensions (leading ones added).
Status GeluErfChainF32(OpContext& ctx) {
  SPARQ_RETURN_IF_ERROR(RequireDeviceInput(ctx, 0));
  SPARQ_RETURN_IF_ERROR(RequireInputType(ctx, 0, DataType::kFloat32, "gelu_erf_chain_f32_cuda"));
  SPARQ_ASSIGN_OR_RETURN(CudaContext * cuda, CudaContextOf(ctx));
  const Tensor& x = ctx.input(0);
  Shape shape = x.shape();
  while (static_cast<int64_t>(shape.size()) < ctx.node().attr_int("min_rank", 0)) shape.insert(shape.begin(), 1);
  SPARQ_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, DataType::kFloat32, shape));
  return LaunchUnary(UnaryOp::kGeluErfChain, InF32(ctx, 0), static_cast<float*>(y->raw_data()), x.numel(),
                        ctx.node().attr_float("divisor", 1.41421356f), ctx.node().attr_float("offset", 1.0f),
                        ctx.node().attr_float("scale", 0.5f), cuda->stream());
}

// sparq.HardSwishChain; the output has at least min_rank dimensions (leading ones added).
Status HardSwishChainF32(OpContext& ctx) {
  SPARQ_RETURN_IF_ERROR(RequireDeviceInput(ctx, 0));
  SPARQ_RETURN_IF_ERROR(RequireInputType(ctx, 0, DataType::kFloat32, "hardswish_chain_f32_cuda"));
  SPARQ_ASSIGN_OR_RETURN(CudaContext * cuda, CudaContextOf(ctx));
  const Tensor& x = ctx.input(0);
  Shape shape = x.shape();
  while (static_cast<int64_t>(shape.size()) < ctx.node().attr_int("min_rank", 0)) shape.insert(shape.begin(), 1);
  SPARQ_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, DataType::kFloat32, shape));
  const Node& n = ctx.node();
  return LaunchUnary(UnaryOp::kHardSwishChain, InF32(ctx, 0), static_cast<float*>(y->raw_data()), x.numel(),
                        n.attr_float("offset", 3.0f), n.attr_float("lo", 0.0f), n.attr_float("hi", 6.0f),
                        cuda->stream(), n.attr_float("divisor", 6.0f));
}

// ---------------------------------------------------------------------------
// Softmax and LayerNormalization over the last axis

Status SoftmaxF32(OpContext& ctx) {
  SPARQ_RETURN_IF_ERROR(RequireDeviceInput(ctx, 0));
  SPARQ_RETURN_IF_ERROR(RequireInputType(ctx, 0, DataType::kFloat32, "softmax_f32_cuda"));
  SPARQ_ASSIGN_OR_RETURN(CudaContext * cuda, CudaContextOf(ctx));
  const Tensor& x = ctx.input(0);
  const int64_t rank = static_cast<int64_t>(x.rank());
  if (rank == 0) return ctx.NotSupported("softmax_f32_cuda takes inputs of rank >= 1");
  const bool coerce_2d = ctx.opset() < 13;
  SPARQ_ASSIGN_OR_RETURN(const int64_t axis, NormalizeAxisOf(ctx, ctx.node().attr_int("axis", coerce_2d ? 1 : -1), rank));
  if (!coerce_2d && axis != rank - 1) return ctx.NotSupported("softmax_f32_cuda runs over the last axis only");
  const int64_t rows = Product(x.shape(), 0, static_cast<size_t>(axis));
  const int64_t n = Product(x.shape(), static_cast<size_t>(axis), x.rank());
  SPARQ_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, DataType::kFloat32, x.shape()));
  return LaunchSoftmaxRows(InF32(ctx, 0), static_cast<float*>(y->raw_data()), rows, n, cuda->stream());
}

Status CheckSoftmax(const Node& node, const std::vector<const Tensor*>&) {
  return Status::OK();  // the axis is checked against the rank when the node runs
}

Status CheckLayerNorm(const Node& node, const std::vector<const Tensor*>&) {
  for (size_t i = 1; i < node.outputs.size(); ++i) {
    if (!node.outputs[i].empty()) {
      return Status::NotSupported(node.Describe() + ": layernorm_f32_cuda does not write Mean / InvStdDev");
    }
  }
  return Status::OK();
}

Status LayerNormF32(OpContext& ctx) {
  SPARQ_RETURN_IF_ERROR(RequireDeviceInput(ctx, 0));
  SPARQ_RETURN_IF_ERROR(RequireDeviceInput(ctx, 1));
  for (size_t i = 0; i < 3; ++i) {
    if (ctx.has_input(i)) SPARQ_RETURN_IF_ERROR(RequireInputType(ctx, i, DataType::kFloat32, "layernorm_f32_cuda"));
  }
  if (ctx.has_input(2)) SPARQ_RETURN_IF_ERROR(RequireDeviceInput(ctx, 2));
  SPARQ_ASSIGN_OR_RETURN(CudaContext * cuda, CudaContextOf(ctx));
  const Tensor& x = ctx.input(0);
  const int64_t rank = static_cast<int64_t>(x.rank());
  if (rank == 0) return ctx.NotSupported("layernorm_f32_cuda takes inputs of rank >= 1");
  SPARQ_ASSIGN_OR_RETURN(const int64_t axis, NormalizeAxisOf(ctx, ctx.node().attr_int("axis", -1), rank));
  const int64_t rows = Product(x.shape(), 0, static_cast<size_t>(axis));
  const int64_t cols = Product(x.shape(), static_cast<size_t>(axis), x.rank());
  if (ctx.input(1).numel() != cols || (ctx.has_input(2) && ctx.input(2).numel() != cols)) {
    return ctx.NotSupported("layernorm_f32_cuda takes Scale and B of the full normalized shape (no broadcasting)");
  }
  const double eps = ctx.node().attr_float("epsilon", 1e-5f);
  SPARQ_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, DataType::kFloat32, x.shape()));
  return LaunchLayerNormRows(InF32(ctx, 0), InF32(ctx, 1), ctx.has_input(2) ? InF32(ctx, 2) : nullptr, eps, rows,
                                cols, static_cast<float*>(y->raw_data()), cuda->stream());
}

// ---------------------------------------------------------------------------
// Pooling (2-D, NCHW)

Status CheckPool(const Node& node, const std::vector<const Tensor*>&) {
  if (node.outputs.size() > 1 && !node.outputs[1].empty()) {
    return Status::NotSupported(node.Describe() + ": the CUDA pooling rows do not write Indices");
  }
  if (node.attr_int("storage_order", 0) != 0) return Status::NotSupported(node.Describe() + ": storage_order 1");
  const std::vector<int64_t> kernel = node.attr_ints("kernel_shape");
  if (kernel.size() != 2) return Status::NotSupported(node.Describe() + ": the CUDA pooling rows are 2-D only");
  return Status::OK();
}

// MaxPool of float32, int8 or uint8 (integers after the QDQ fusion); AveragePool of float32.
template <bool kMax>
Status Pool2d(OpContext& ctx) {
  SPARQ_RETURN_IF_ERROR(RequireDeviceInput(ctx, 0));
  const DataType type = ctx.input(0).dtype();
  const bool bytes = kMax && (type == DataType::kInt8 || type == DataType::kUInt8);
  if (!bytes) SPARQ_RETURN_IF_ERROR(RequireInputType(ctx, 0, DataType::kFloat32, kMax ? "maxpool2d_cuda" : "avgpool2d_f32_cuda"));
  SPARQ_ASSIGN_OR_RETURN(CudaContext * cuda, CudaContextOf(ctx));
  const Tensor& x = ctx.input(0);
  Shape y_shape;
  SPARQ_ASSIGN_OR_RETURN(const Pool2dGeometry g, Pool2dGeometryOf(ctx, x.shape(), &y_shape));
  SPARQ_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, type, y_shape));
  if (bytes) return LaunchMaxPool2dS8(x.raw_data(), type == DataType::kInt8, y->raw_data(), g, cuda->stream());
  float* yp = static_cast<float*>(y->raw_data());
  return LaunchPool2d(kMax, InF32(ctx, 0), yp, g, cuda->stream());
}

Status GlobalAveragePoolF32(OpContext& ctx) {
  SPARQ_RETURN_IF_ERROR(RequireDeviceInput(ctx, 0));
  SPARQ_RETURN_IF_ERROR(RequireInputType(ctx, 0, DataType::kFloat32, "global_avgpool_f32_cuda"));
  SPARQ_ASSIGN_OR_RETURN(CudaContext * cuda, CudaContextOf(ctx));
  const Tensor& x = ctx.input(0);
  if (x.rank() < 3) return ctx.InvalidArgument("X must have rank >= 3, got " + ShapeToString(x.shape()));
  Shape y_shape(x.rank(), 1);
  y_shape[0] = x.dim(0);
  y_shape[1] = x.dim(1);
  SPARQ_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, DataType::kFloat32, y_shape));
  return LaunchGlobalAveragePool(InF32(ctx, 0), static_cast<float*>(y->raw_data()), x.dim(0) * x.dim(1),
                                    Product(x.shape(), 2, x.rank()), cuda->stream());
}

// Row-major offsets of every index of `dims` (strides in elements): the
// reference's enumeration (kernels/ref/reduce_common.h MakeReductionLayout,
// not included here: its IsHalfType collides with nn_common.h's).
std::vector<int64_t> EnumerateOffsets(const std::vector<int64_t>& dims, const std::vector<int64_t>& strides) {
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

// ReduceSum / ReduceMean of float32 over any axes: the reference's layout
// (output o reduces x[base[o] + offsets[r]] in order) uploaded, one thread
// per output element.
template <bool kMean, bool kAxesFromInput>
Status ReduceSumMeanF32(OpContext& ctx) {
  SPARQ_RETURN_IF_ERROR(RequireDeviceInput(ctx, 0));
  SPARQ_RETURN_IF_ERROR(RequireInputType(ctx, 0, DataType::kFloat32, kMean ? "reduce_mean_f32_cuda" : "reduce_sum_f32_cuda"));
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
  struct {
    std::vector<int64_t> base, offsets;
  } layout{EnumerateOffsets(kept_dims, kept_strides), EnumerateOffsets(red_dims, red_strides)};
  SPARQ_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, DataType::kFloat32, out));
  if (y->numel() == 0) return Status::OK();
  SPARQ_ASSIGN_OR_RETURN(std::shared_ptr<uint8_t> base, UploadVector(*cuda, layout.base));
  std::shared_ptr<uint8_t> offsets;
  if (!layout.offsets.empty()) {
    SPARQ_ASSIGN_OR_RETURN(offsets, UploadVector(*cuda, layout.offsets));
  }
  return LaunchReduceSumMean(InF32(ctx, 0), reinterpret_cast<const int64_t*>(base.get()),
                                static_cast<int64_t>(layout.base.size()), reinterpret_cast<const int64_t*>(offsets.get()),
                                static_cast<int64_t>(layout.offsets.size()), kMean, static_cast<float*>(y->raw_data()),
                                cuda->stream());
}

// Cast among float32, int32, int64, int8, uint8 and bool; to the same type: the input itself.
int CastCode(DataType t) {
  switch (t) {
    case DataType::kFloat32: return kCastF32;
    case DataType::kInt32: return kCastI32;
    case DataType::kInt64: return kCastI64;
    case DataType::kInt8: return kCastI8;
    case DataType::kUInt8: return kCastU8;
    case DataType::kBool: return kCastBool;
    default: return -1;
  }
}

// ONNX's TensorProto type numbers of the types above.
DataType CastTarget(int64_t to) {
  switch (to) {
    case 1: return DataType::kFloat32;
    case 2: return DataType::kUInt8;
    case 3: return DataType::kInt8;
    case 6: return DataType::kInt32;
    case 7: return DataType::kInt64;
    case 9: return DataType::kBool;
    default: return DataType::kUndefined;
  }
}

Status CheckCast(const Node& node, const std::vector<const Tensor*>& constants) {
  const Attribute* to = node.attr("to");
  if (to == nullptr || to->kind != Attribute::Kind::kInt || CastTarget(to->i) == DataType::kUndefined) {
    return Status::NotSupported(node.Describe() + ": cast_cuda casts to float32, int32, int64, int8, uint8 and bool only");
  }
  if (!constants.empty() && constants[0] != nullptr && CastCode(constants[0]->dtype()) < 0) {
    return Status::NotSupported(node.Describe() + ": cast_cuda does not read " + DataTypeName(constants[0]->dtype()));
  }
  return Status::OK();
}

Status Cast(OpContext& ctx) {
  SPARQ_RETURN_IF_ERROR(RequireDeviceInput(ctx, 0));
  SPARQ_ASSIGN_OR_RETURN(CudaContext * cuda, CudaContextOf(ctx));
  const Tensor& x = ctx.input(0);
  const DataType to = CastTarget(ctx.node().attr_int("to", 0));
  const int from_code = CastCode(x.dtype()), to_code = CastCode(to);
  if (from_code < 0 || to_code < 0) {
    return ctx.NotSupported("cast_cuda casts among float32, int32, int64, int8, uint8 and bool, not " +
                            DataTypeName(x.dtype()) + " to " + DataTypeName(to));
  }
  if (x.dtype() == to) {
    ctx.set_output(0, x);  // as the reference: the input itself
    return Status::OK();
  }
  SPARQ_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, to, x.shape()));
  return LaunchCast(x.raw_data(), from_code, y->raw_data(), to_code, x.numel(), cuda->stream());
}

}  // namespace

void RegisterCudaElementwiseRows(KernelRegistry& r) {
  const uint32_t x = HostInput(0), xy = HostInput(0) | HostInput(1);
  r.Add(CudaRow("Add", "", 7, WithHostFallback<Binary<BinaryOp::kAdd>>, "add_cuda", NumericOnly(xy)));
  r.Add(CudaRow("Sub", "", 7, WithHostFallback<Binary<BinaryOp::kSub>>, "sub_cuda", NumericOnly(xy)));
  r.Add(CudaRow("Mul", "", 7, WithHostFallback<Binary<BinaryOp::kMul>>, "mul_cuda", NumericOnly(xy)));
  r.Add(CudaRow("Div", "", 7, WithHostFallback<Binary<BinaryOp::kDiv>>, "div_cuda", NumericOnly(xy)));
  r.Add(CudaRow("Relu", "", 6, WithHostFallback<UnaryF32<UnaryOp::kRelu>>, "relu_f32_cuda", Float32Only(x)));
  r.Add(CudaRow("Sigmoid", "", 6, WithHostFallback<UnaryF32<UnaryOp::kSigmoid>>, "sigmoid_f32_cuda", Float32Only(x)));
  r.Add(CudaRow("Tanh", "", 6, WithHostFallback<UnaryF32<UnaryOp::kTanh>>, "tanh_f32_cuda", Float32Only(x)));
  r.Add(CudaRow("Erf", "", 9, WithHostFallback<UnaryF32<UnaryOp::kErf>>, "erf_f32_cuda", Float32Only(x)));
  r.Add(CudaRow("Sqrt", "", 6, WithHostFallback<UnaryF32<UnaryOp::kSqrt>>, "sqrt_f32_cuda", Float32Only(x)));
  r.Add(CudaRow("Exp", "", 6, WithHostFallback<UnaryF32<UnaryOp::kExp>>, "exp_f32_cuda", Float32Only(x)));
  r.Add(CudaRow("Neg", "", 6, WithHostFallback<UnaryF32<UnaryOp::kNeg>>, "neg_f32_cuda", Float32Only(x)));
  r.Add(CudaRow("Abs", "", 6, WithHostFallback<UnaryF32<UnaryOp::kAbs>>, "abs_f32_cuda", Float32Only(x)));
  r.Add(CudaRow("Clip", "", 6, WithHostFallback<ClipF32>, "clip_f32_cuda", Float32Only(x), HostInput(1) | HostInput(2)));
  r.Add(CudaRow("Gelu", "", 20, WithHostFallback<GeluF32>, "gelu_f32_cuda", Float32Only(x, CheckGelu)));
  r.Add(CudaRow("Silu", kSparqDomain, 1, WithHostFallback<UnaryF32<UnaryOp::kSilu>>, "silu_f32_cuda", Float32Only(x)));
  r.Add(CudaRow("GeluErfChain", kSparqDomain, 1, WithHostFallback<GeluErfChainF32>, "gelu_erf_chain_f32_cuda", Float32Only(x)));
  r.Add(CudaRow("HardSwishChain", kSparqDomain, 1, WithHostFallback<HardSwishChainF32>, "hardswish_chain_f32_cuda", Float32Only(x)));
  r.Add(CudaRow("Softmax", "", 1, WithHostFallback<SoftmaxF32>, "softmax_f32_cuda", Float32Only(x, CheckSoftmax)));
  r.Add(CudaRow("LayerNormalization", "", 1, WithHostFallback<LayerNormF32>, "layernorm_f32_cuda", Float32Only(0x7u, CheckLayerNorm)));
  r.Add(CudaRow("MaxPool", "", 1, WithHostFallback<Pool2d<true>>, "maxpool2d_cuda", CheckOnly(CheckPool)));
  r.Add(CudaRow("AveragePool", "", 1, WithHostFallback<Pool2d<false>>, "avgpool2d_f32_cuda", Float32Only(x, CheckPool)));
  r.Add(CudaRow("GlobalAveragePool", "", 1, WithHostFallback<GlobalAveragePoolF32>, "global_avgpool_f32_cuda", Float32Only(x)));
  KernelDef mean_attr = CudaRow("ReduceMean", "", 1, WithHostFallback<ReduceSumMeanF32<true, false>>, "reduce_mean_f32_cuda", Float32Only(x));
  mean_attr.until_opset = 17;
  r.Add(std::move(mean_attr));
  r.Add(CudaRow("ReduceMean", "", 18, WithHostFallback<ReduceSumMeanF32<true, true>>, "reduce_mean_f32_cuda", Float32Only(x), HostInput(1)));
  KernelDef sum_attr = CudaRow("ReduceSum", "", 1, WithHostFallback<ReduceSumMeanF32<false, false>>, "reduce_sum_f32_cuda", Float32Only(x));
  sum_attr.until_opset = 12;
  r.Add(std::move(sum_attr));
  r.Add(CudaRow("ReduceSum", "", 13, WithHostFallback<ReduceSumMeanF32<false, true>>, "reduce_sum_f32_cuda", Float32Only(x), HostInput(1)));
  r.Add(CudaRow("Cast", "", 6, WithHostFallback<Cast>, "cast_cuda", CheckOnly(CheckCast)));
}

}  // namespace cuda
}  // namespace sparq
