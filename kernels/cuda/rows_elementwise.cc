// CUDA rows of elementwise operators (float32, and int32 / int64 arithmetic),
// activations, Softmax, LayerNormalization, pooling, ReduceSum / ReduceMean
// and Cast (cuda_rows.h lists them).
#include <algorithm>
#include <cstring>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "kernels/cuda/cuda_rows.h"
#include "kernels/cuda/cuda_status.h"
#include "kernels/cuda/geometry.h"
#include "kernels/cuda/launch.h"
#include "kernels/cuda/launch_f16.h"

namespace sparq {
namespace cuda {
// ---------------------------------------------------------------------------
// The float rows float32 and float16 share (cuda_rows.h; rows_f16.cc registers
// the Half instances): T = float or Half, float32 inside each thread.

template <typename T>
Status RunFloatUnary(OpContext& ctx, UnaryOp op, float p0, float p1, float p2) {
  SPARQ_RETURN_IF_ERROR(RequireFloatInput<T>(ctx, 0, "the CUDA unary rows"));
  SPARQ_ASSIGN_OR_RETURN(CudaContext * cuda, CudaContextOf(ctx));
  const Tensor& x = ctx.input(0);
  SPARQ_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, FloatRowType<T>::kType, x.shape()));
  return LaunchUnary(op, InAs<T>(ctx, 0), OutAs<T>(y), x.numel(), p0, p1, p2, cuda->stream());
}

// Clip: bounds from attributes (opset < 11) or host inputs 1 and 2.
template <typename T>
Status FloatClip(OpContext& ctx) {
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
  return RunFloatUnary<T>(ctx, UnaryOp::kClip, lo, hi);
}

Status CheckGelu(const Node& node, const std::vector<const Tensor*>&) {
  if (node.attr_string("approximate", "none") != "none") {
    return Status::NotSupported(node.Describe() + ": the CUDA Gelu rows compute approximate = \"none\" only");
  }
  return Status::OK();
}

// Softmax over the last axis (opset < 13: the 2-D coercion at `axis`).
template <typename T>
Status FloatSoftmax(OpContext& ctx) {
  const std::string row = FloatRowName<T>("softmax");
  SPARQ_RETURN_IF_ERROR(RequireFloatInput<T>(ctx, 0, row.c_str()));
  SPARQ_ASSIGN_OR_RETURN(CudaContext * cuda, CudaContextOf(ctx));
  const Tensor& x = ctx.input(0);
  const int64_t rank = static_cast<int64_t>(x.rank());
  if (rank == 0) return ctx.NotSupported(row + " takes inputs of rank >= 1");
  const bool coerce_2d = ctx.opset() < 13;
  SPARQ_ASSIGN_OR_RETURN(const int64_t axis, NormalizeAxisOf(ctx, ctx.node().attr_int("axis", coerce_2d ? 1 : -1), rank));
  if (!coerce_2d && axis != rank - 1) return ctx.NotSupported(row + " runs over the last axis only");
  const int64_t rows = Product(x.shape(), 0, static_cast<size_t>(axis));
  const int64_t n = Product(x.shape(), static_cast<size_t>(axis), x.rank());
  SPARQ_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, FloatRowType<T>::kType, x.shape()));
  return LaunchSoftmaxRows(InAs<T>(ctx, 0), OutAs<T>(y), rows, n, cuda->stream());
}

Status CheckLayerNorm(const Node& node, const std::vector<const Tensor*>&) {
  for (size_t i = 1; i < node.outputs.size(); ++i) {
    if (!node.outputs[i].empty()) {
      return Status::NotSupported(node.Describe() + ": the CUDA LayerNormalization rows do not write Mean / InvStdDev");
    }
  }
  return Status::OK();
}

template <typename T>
Status FloatLayerNorm(OpContext& ctx) {
  const std::string row = FloatRowName<T>("layernorm");
  SPARQ_RETURN_IF_ERROR(RequireFloatInput<T>(ctx, 0, row.c_str()));
  SPARQ_RETURN_IF_ERROR(RequireFloatInput<T>(ctx, 1, row.c_str()));
  if (ctx.has_input(2)) SPARQ_RETURN_IF_ERROR(RequireFloatInput<T>(ctx, 2, row.c_str()));
  SPARQ_ASSIGN_OR_RETURN(CudaContext * cuda, CudaContextOf(ctx));
  const Tensor& x = ctx.input(0);
  const int64_t rank = static_cast<int64_t>(x.rank());
  if (rank == 0) return ctx.NotSupported(row + " takes inputs of rank >= 1");
  SPARQ_ASSIGN_OR_RETURN(const int64_t axis, NormalizeAxisOf(ctx, ctx.node().attr_int("axis", -1), rank));
  const int64_t rows = Product(x.shape(), 0, static_cast<size_t>(axis));
  const int64_t cols = Product(x.shape(), static_cast<size_t>(axis), x.rank());
  if (ctx.input(1).numel() != cols || (ctx.has_input(2) && ctx.input(2).numel() != cols)) {
    return ctx.NotSupported(row + " takes Scale and B of the full normalized shape (no broadcasting)");
  }
  const double eps = ctx.node().attr_float("epsilon", 1e-5f);
  SPARQ_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, FloatRowType<T>::kType, x.shape()));
  return LaunchLayerNormRows(InAs<T>(ctx, 0), InAs<T>(ctx, 1), ctx.has_input(2) ? InAs<T>(ctx, 2) : nullptr, eps, rows,
                             cols, OutAs<T>(y), cuda->stream());
}

Status CheckPool(const Node& node, const std::vector<const Tensor*>&) {
  if (node.outputs.size() > 1 && !node.outputs[1].empty()) {
    return Status::NotSupported(node.Describe() + ": the CUDA pooling rows do not write Indices");
  }
  if (node.attr_int("storage_order", 0) != 0) return Status::NotSupported(node.Describe() + ": storage_order 1");
  const std::vector<int64_t> kernel = node.attr_ints("kernel_shape");
  if (kernel.size() != 2) return Status::NotSupported(node.Describe() + ": the CUDA pooling rows are 2-D only");
  return Status::OK();
}

// MaxPool (max) or AveragePool, 2-D NCHW; float32 MaxPool also of int8 / uint8
// (integers after the QDQ fusion).
template <typename T>
Status RunFloatPool2d(OpContext& ctx, bool max) {
  SPARQ_RETURN_IF_ERROR(RequireDeviceInput(ctx, 0));
  const DataType type = ctx.input(0).dtype();
  const bool bytes = std::is_same<T, float>::value && max && (type == DataType::kInt8 || type == DataType::kUInt8);
  if (!bytes) SPARQ_RETURN_IF_ERROR(RequireFloatInput<T>(ctx, 0, FloatRowName<T>(max ? "maxpool2d" : "avgpool2d").c_str()));
  SPARQ_ASSIGN_OR_RETURN(CudaContext * cuda, CudaContextOf(ctx));
  const Tensor& x = ctx.input(0);
  Shape y_shape;
  SPARQ_ASSIGN_OR_RETURN(const Pool2dGeometry g, Pool2dGeometryOf(ctx, x.shape(), &y_shape));
  SPARQ_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, type, y_shape));
  if (bytes) return LaunchMaxPool2dS8(x.raw_data(), type == DataType::kInt8, y->raw_data(), g, cuda->stream());
  return LaunchPool2d(max, InAs<T>(ctx, 0), OutAs<T>(y), g, cuda->stream());
}

template <typename T>
Status FloatGlobalAveragePool(OpContext& ctx) {
  SPARQ_RETURN_IF_ERROR(RequireFloatInput<T>(ctx, 0, FloatRowName<T>("global_avgpool").c_str()));
  SPARQ_ASSIGN_OR_RETURN(CudaContext * cuda, CudaContextOf(ctx));
  const Tensor& x = ctx.input(0);
  if (x.rank() < 3) return ctx.InvalidArgument("X must have rank >= 3, got " + ShapeToString(x.shape()));
  Shape y_shape(x.rank(), 1);
  y_shape[0] = x.dim(0);
  y_shape[1] = x.dim(1);
  SPARQ_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, FloatRowType<T>::kType, y_shape));
  return LaunchGlobalAveragePool(InAs<T>(ctx, 0), OutAs<T>(y), x.dim(0) * x.dim(1), Product(x.shape(), 2, x.rank()),
                                 cuda->stream());
}

namespace {

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

}  // namespace

// ReduceSum / ReduceMean over any axes: the reference's layout (output o
// reduces x[base[o] + offsets[r]] in order) uploaded, one thread per output
// element.
template <typename T>
Status RunFloatReduceSumMean(OpContext& ctx, bool mean, bool axes_from_input) {
  SPARQ_RETURN_IF_ERROR(RequireFloatInput<T>(ctx, 0, FloatRowName<T>(mean ? "reduce_mean" : "reduce_sum").c_str()));
  SPARQ_ASSIGN_OR_RETURN(CudaContext * cuda, CudaContextOf(ctx));
  const Tensor& x = ctx.input(0);
  std::vector<int64_t> axes;
  bool noop = false;
  if (axes_from_input) {
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
  const std::vector<int64_t> base = EnumerateOffsets(kept_dims, kept_strides);
  const std::vector<int64_t> offsets = EnumerateOffsets(red_dims, red_strides);
  SPARQ_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, FloatRowType<T>::kType, out));
  if (y->numel() == 0) return Status::OK();
  SPARQ_ASSIGN_OR_RETURN(std::shared_ptr<uint8_t> base_dev, UploadVector(*cuda, base));
  std::shared_ptr<uint8_t> offsets_dev;
  if (!offsets.empty()) {
    SPARQ_ASSIGN_OR_RETURN(offsets_dev, UploadVector(*cuda, offsets));
  }
  return LaunchReduceSumMean(InAs<T>(ctx, 0), reinterpret_cast<const int64_t*>(base_dev.get()),
                             static_cast<int64_t>(base.size()), reinterpret_cast<const int64_t*>(offsets_dev.get()),
                             static_cast<int64_t>(offsets.size()), mean, OutAs<T>(y), cuda->stream());
}

int CastCode(DataType t) {
  switch (t) {
    case DataType::kFloat32: return kCastF32;
    case DataType::kFloat16: return kCastF16;
    case DataType::kInt32: return kCastI32;
    case DataType::kInt64: return kCastI64;
    case DataType::kInt8: return kCastI8;
    case DataType::kUInt8: return kCastU8;
    case DataType::kBool: return kCastBool;
    default: return -1;
  }
}

DataType CastTarget(int64_t to) {
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

Status RunCast(OpContext& ctx, bool half) {
  SPARQ_RETURN_IF_ERROR(RequireDeviceInput(ctx, 0));
  SPARQ_ASSIGN_OR_RETURN(CudaContext * cuda, CudaContextOf(ctx));
  const Tensor& x = ctx.input(0);
  const DataType to = CastTarget(ctx.node().attr_int("to", 0));
  const int from_code = CastCode(x.dtype()), to_code = CastCode(to);
  if (from_code < 0 || to_code < 0 || (from_code == kCastF16 || to_code == kCastF16) != half) {
    return ctx.NotSupported(std::string(half ? "cast_f16_cuda casts float16 to or from" : "cast_cuda casts among") +
                            " float32, int32, int64, int8, uint8 and bool, not " + DataTypeName(x.dtype()) + " to " +
                            DataTypeName(to));
  }
  if (x.dtype() == to) {
    ctx.set_output(0, x);  // as the reference: the input itself
    return Status::OK();
  }
  SPARQ_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, to, x.shape()));
  if (half) return LaunchCastF16(x.raw_data(), from_code, y->raw_data(), to_code, x.numel(), cuda->stream());
  return LaunchCast(x.raw_data(), from_code, y->raw_data(), to_code, x.numel(), cuda->stream());
}

#define SPARQ_FLOAT_ROWS(T)                                                                    \
  template Status RunFloatUnary<T>(OpContext&, UnaryOp, float, float, float);                 \
  template Status FloatClip<T>(OpContext&);                                                    \
  template Status FloatSoftmax<T>(OpContext&);                                                 \
  template Status FloatLayerNorm<T>(OpContext&);                                               \
  template Status RunFloatPool2d<T>(OpContext&, bool);                                         \
  template Status FloatGlobalAveragePool<T>(OpContext&);                                       \
  template Status RunFloatReduceSumMean<T>(OpContext&, bool, bool);
SPARQ_FLOAT_ROWS(float)
SPARQ_FLOAT_ROWS(Half)
#undef SPARQ_FLOAT_ROWS

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
  BroadcastPlan plan;
  SPARQ_ASSIGN_OR_RETURN(const Shape out, PlanBinaryBroadcast(ctx, &plan));
  SPARQ_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, type, out));
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


Status GeluF32(OpContext& ctx) {
  if (ctx.node().attr_string("approximate", "none") != "none") {
    return ctx.NotSupported("the CUDA Gelu row computes approximate = \"none\" only");
  }
  return RunFloatUnary<float>(ctx, UnaryOp::kGelu);
}

// sparq.GeluErfChain and sparq.GeluErfScaledChain (kOp); the output has at
// least min_rank dimensions (leading ones added).
template <UnaryOp kOp>
Status GeluErfChainF32(OpContext& ctx) {
  SPARQ_RETURN_IF_ERROR(RequireDeviceInput(ctx, 0));
  SPARQ_RETURN_IF_ERROR(RequireInputType(ctx, 0, DataType::kFloat32, "gelu_erf_chain_f32_cuda"));
  SPARQ_ASSIGN_OR_RETURN(CudaContext * cuda, CudaContextOf(ctx));
  const Tensor& x = ctx.input(0);
  Shape shape = x.shape();
  while (static_cast<int64_t>(shape.size()) < ctx.node().attr_int("min_rank", 0)) shape.insert(shape.begin(), 1);
  SPARQ_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, DataType::kFloat32, shape));
  return LaunchUnary(kOp, InF32(ctx, 0), static_cast<float*>(y->raw_data()), x.numel(),
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

Status CheckCast(const Node& node, const std::vector<const Tensor*>& constants) {
  const Attribute* to = node.attr("to");
  if (to == nullptr || to->kind != Attribute::Kind::kInt || CastTarget(to->i) == DataType::kUndefined ||
      CastTarget(to->i) == DataType::kFloat16) {
    return Status::NotSupported(node.Describe() + ": cast_cuda casts to float32, int32, int64, int8, uint8 and bool only");
  }
  if (!constants.empty() && constants[0] != nullptr) {
    const int from = CastCode(constants[0]->dtype());
    if (from < 0 || from == kCastF16) {
      return Status::NotSupported(node.Describe() + ": cast_cuda does not read " + DataTypeName(constants[0]->dtype()));
    }
  }
  return Status::OK();
}

Status Cast(OpContext& ctx) { return RunCast(ctx, false); }

}  // namespace

void RegisterCudaElementwiseRows(KernelRegistry& r) {
  const uint32_t x = HostInput(0), xy = HostInput(0) | HostInput(1);
  r.Add(CudaRow("Add", "", 7, WithHostFallback<Binary<BinaryOp::kAdd>>, "add_cuda", NumericOnly(xy)));
  r.Add(CudaRow("Sub", "", 7, WithHostFallback<Binary<BinaryOp::kSub>>, "sub_cuda", NumericOnly(xy)));
  r.Add(CudaRow("Mul", "", 7, WithHostFallback<Binary<BinaryOp::kMul>>, "mul_cuda", NumericOnly(xy)));
  r.Add(CudaRow("Div", "", 7, WithHostFallback<Binary<BinaryOp::kDiv>>, "div_cuda", NumericOnly(xy)));
  r.Add(CudaRow("Relu", "", 6, WithHostFallback<FloatUnary<float, UnaryOp::kRelu>>, "relu_f32_cuda", Float32Only(x)));
  r.Add(CudaRow("Sigmoid", "", 6, WithHostFallback<FloatUnary<float, UnaryOp::kSigmoid>>, "sigmoid_f32_cuda", Float32Only(x)));
  r.Add(CudaRow("Tanh", "", 6, WithHostFallback<FloatUnary<float, UnaryOp::kTanh>>, "tanh_f32_cuda", Float32Only(x)));
  r.Add(CudaRow("Erf", "", 9, WithHostFallback<FloatUnary<float, UnaryOp::kErf>>, "erf_f32_cuda", Float32Only(x)));
  r.Add(CudaRow("Sqrt", "", 6, WithHostFallback<FloatUnary<float, UnaryOp::kSqrt>>, "sqrt_f32_cuda", Float32Only(x)));
  r.Add(CudaRow("Exp", "", 6, WithHostFallback<FloatUnary<float, UnaryOp::kExp>>, "exp_f32_cuda", Float32Only(x)));
  r.Add(CudaRow("Neg", "", 6, WithHostFallback<FloatUnary<float, UnaryOp::kNeg>>, "neg_f32_cuda", Float32Only(x)));
  r.Add(CudaRow("Abs", "", 6, WithHostFallback<FloatUnary<float, UnaryOp::kAbs>>, "abs_f32_cuda", Float32Only(x)));
  r.Add(CudaRow("Clip", "", 6, WithHostFallback<FloatClip<float>>, "clip_f32_cuda", Float32Only(x), HostInput(1) | HostInput(2)));
  r.Add(CudaRow("Gelu", "", 20, WithHostFallback<GeluF32>, "gelu_f32_cuda", Float32Only(x, CheckGelu)));
  r.Add(CudaRow("Silu", kSparqDomain, 1, WithHostFallback<FloatUnary<float, UnaryOp::kSilu>>, "silu_f32_cuda", Float32Only(x)));
  r.Add(CudaRow("GeluErfChain", kSparqDomain, 1, WithHostFallback<GeluErfChainF32<UnaryOp::kGeluErfChain>>,
                "gelu_erf_chain_f32_cuda", Float32Only(x)));
  r.Add(CudaRow("GeluErfScaledChain", kSparqDomain, 1, WithHostFallback<GeluErfChainF32<UnaryOp::kGeluErfScaledChain>>,
                "gelu_erf_scaled_chain_f32_cuda", Float32Only(x)));
  r.Add(CudaRow("HardSwishChain", kSparqDomain, 1, WithHostFallback<HardSwishChainF32>, "hardswish_chain_f32_cuda", Float32Only(x)));
  r.Add(CudaRow("Softmax", "", 1, WithHostFallback<FloatSoftmax<float>>, "softmax_f32_cuda", Float32Only(x)));
  r.Add(CudaRow("LayerNormalization", "", 1, WithHostFallback<FloatLayerNorm<float>>, "layernorm_f32_cuda", Float32Only(0x7u, CheckLayerNorm)));
  r.Add(CudaRow("MaxPool", "", 1, WithHostFallback<FloatPool2d<float, true>>, "maxpool2d_cuda", CheckOnly(CheckPool)));
  r.Add(CudaRow("AveragePool", "", 1, WithHostFallback<FloatPool2d<float, false>>, "avgpool2d_f32_cuda", Float32Only(x, CheckPool)));
  r.Add(CudaRow("GlobalAveragePool", "", 1, WithHostFallback<FloatGlobalAveragePool<float>>, "global_avgpool_f32_cuda", Float32Only(x)));
  KernelDef mean_attr = CudaRow("ReduceMean", "", 1, WithHostFallback<FloatReduceSumMean<float, true, false>>, "reduce_mean_f32_cuda", Float32Only(x));
  mean_attr.until_opset = 17;
  r.Add(std::move(mean_attr));
  r.Add(CudaRow("ReduceMean", "", 18, WithHostFallback<FloatReduceSumMean<float, true, true>>, "reduce_mean_f32_cuda", Float32Only(x), HostInput(1)));
  KernelDef sum_attr = CudaRow("ReduceSum", "", 1, WithHostFallback<FloatReduceSumMean<float, false, false>>, "reduce_sum_f32_cuda", Float32Only(x));
  sum_attr.until_opset = 12;
  r.Add(std::move(sum_attr));
  r.Add(CudaRow("ReduceSum", "", 13, WithHostFallback<FloatReduceSumMean<float, false, true>>, "reduce_sum_f32_cuda", Float32Only(x), HostInput(1)));
  r.Add(CudaRow("Cast", "", 6, WithHostFallback<Cast>, "cast_cuda", CheckOnly(CheckCast)));
}

}  // namespace cuda
}  // namespace sparq
