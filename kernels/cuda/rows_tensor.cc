// CUDA rows of elementwise, normalization, pooling, layout and QDQ operators
// (cuda_rows.h lists them). Float rows take float32; see each row for the rest.
#include <algorithm>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "kernels/cuda/cuda_rows.h"
#include "kernels/cuda/cuda_status.h"
#include "kernels/cuda/geometry.h"
#include "kernels/cuda/launch.h"
#include "kernels/registry.h"

namespace sparq {
namespace cuda {

// ---------------------------------------------------------------------------
// Shared helpers (declared in cuda_rows.h)

Status RequireDeviceInput(const OpContext& ctx, size_t i) {
  if (!ctx.has_input(i)) return ctx.InvalidArgument("input " + std::to_string(i) + " is required");
  if (ctx.input(i).device().type != DeviceType::kCuda) {
    return ctx.InvalidArgument("input " + std::to_string(i) + " is on " + ctx.input(i).device().ToString() +
                               ", the CUDA row wants it on the GPU");
  }
  return Status::OK();
}

Status RequireInputType(const OpContext& ctx, size_t i, DataType type, const char* row) {
  if (ctx.input(i).dtype() != type) {
    return ctx.NotSupported(std::string(row) + " takes input " + std::to_string(i) + " of type " +
                            DataTypeName(type) + ", not " + DataTypeName(ctx.input(i).dtype()));
  }
  return Status::OK();
}

StatusOr<std::shared_ptr<uint8_t>> Upload(CudaContext& ctx, const void* host, size_t bytes) {
  SPARQ_ASSIGN_OR_RETURN(std::shared_ptr<uint8_t> buf, Scratch(ctx, bytes));
  SPARQ_RETURN_IF_ERROR(ctx.CopyFromHost(host, buf.get(), bytes));
  return buf;
}

namespace {
Status RequireHost(const OpContext& ctx, size_t i, const char* what) {
  if (!ctx.input(i).device().is_host()) {
    return ctx.InvalidArgument(std::string(what) + " must arrive on the host (a host input of the CUDA row)");
  }
  return Status::OK();
}
}  // namespace

StatusOr<std::vector<float>> HostFloats(const OpContext& ctx, size_t i, const char* what) {
  SPARQ_RETURN_IF_ERROR(RequireHost(ctx, i, what));
  const Tensor& t = ctx.input(i);
  const DataType d = t.dtype();
  if (d != DataType::kFloat32 && d != DataType::kFloat16 && d != DataType::kBFloat16 && d != DataType::kFloat64) {
    return ctx.InvalidArgument(std::string(what) + " has type " + DataTypeName(d) + "; expected a float type");
  }
  std::vector<float> v(static_cast<size_t>(t.numel()));
  for (int64_t k = 0; k < t.numel(); ++k) v[static_cast<size_t>(k)] = static_cast<float>(t.GetAsDouble(k));
  return v;
}

StatusOr<std::vector<int32_t>> HostInts(const OpContext& ctx, size_t i, const char* what) {
  SPARQ_RETURN_IF_ERROR(RequireHost(ctx, i, what));
  const Tensor& t = ctx.input(i);
  switch (t.dtype()) {
    case DataType::kInt8:
    case DataType::kUInt8:
    case DataType::kInt16:
    case DataType::kUInt16:
    case DataType::kInt32: break;
    default: return ctx.InvalidArgument(std::string(what) + " has type " + DataTypeName(t.dtype()) + "; expected an integer type");
  }
  std::vector<int32_t> v(static_cast<size_t>(t.numel()));
  for (int64_t k = 0; k < t.numel(); ++k) v[static_cast<size_t>(k)] = static_cast<int32_t>(t.GetAsDouble(k));
  return v;
}

Status HostFallback(OpContext& ctx) {
  SPARQ_ASSIGN_OR_RETURN(CudaContext * cuda, CudaContextOf(ctx));
  const Node& node = ctx.node();
  const KernelDef* ref = KernelRegistry::Reference().Find(node.op_type, node.domain, ctx.opset());
  if (ref == nullptr) return ctx.NotSupported("no CUDA kernel and no reference kernel for this node");
  std::vector<Tensor> host(ctx.num_inputs());
  std::vector<const Tensor*> inputs(ctx.num_inputs(), nullptr);
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    if (!ctx.has_input(i)) continue;
    if (ctx.input(i).device().is_host()) {
      inputs[i] = &ctx.input(i);
      continue;
    }
    SPARQ_ASSIGN_OR_RETURN(host[i], CopyTensorToHost(*cuda, ctx.input(i)));
    inputs[i] = &host[i];
  }
  OpContext on_host(node, ctx.opset(), std::move(inputs), static_cast<ThreadPool*>(nullptr));
  SPARQ_RETURN_IF_ERROR(ref->fn(on_host));
  for (size_t k = 0; k < on_host.outputs().size(); ++k) {
    const Tensor& out = on_host.outputs()[k];
    if (!out.defined()) {
      ctx.set_output(k, Tensor());
      continue;
    }
    SPARQ_ASSIGN_OR_RETURN(Tensor device, CopyTensorToDevice(*cuda, out));
    ctx.set_output(k, std::move(device));
  }
  return Status::OK();
}

PrepareFn CheckOnly(Status (*check)(const Node& node, const std::vector<const Tensor*>& constants)) {
  return [check](const Node& node, const std::vector<const Tensor*>& constants,
                 const PrepareContext&) -> StatusOr<PreparedKernel> {
    SPARQ_RETURN_IF_ERROR(check(node, constants));
    return PreparedKernel{};
  };
}

namespace {

// A prepare step for float32 rows: declines the node when one of the inputs
// in `mask` is a constant of another type (input types are otherwise only
// known when the node runs, where a wrong type is an error, not a fallback),
// then runs `check` when given.
PrepareFn Float32Only(uint32_t mask, Status (*check)(const Node&, const std::vector<const Tensor*>&) = nullptr) {
  return [mask, check](const Node& node, const std::vector<const Tensor*>& constants,
                       const PrepareContext&) -> StatusOr<PreparedKernel> {
    for (size_t i = 0; i < constants.size() && i < 32; ++i) {
      if (((mask >> i) & 1u) && constants[i] != nullptr && constants[i]->dtype() != DataType::kFloat32) {
        return Status::NotSupported(node.Describe() + ": the CUDA row takes float32, input " + std::to_string(i) +
                                    " is " + DataTypeName(constants[i]->dtype()));
      }
    }
    if (check != nullptr) SPARQ_RETURN_IF_ERROR(check(node, constants));
    return PreparedKernel{};
  };
}

const float* InF32(const OpContext& ctx, size_t i) { return static_cast<const float*>(ctx.input(i).raw_data()); }

// Normalizes `axis` into [0, rank); InvalidArgument naming the node otherwise.
StatusOr<int64_t> NormalizeAxisOf(const OpContext& ctx, int64_t axis, int64_t rank) {
  const int64_t a = axis < 0 ? axis + rank : axis;
  if (a < 0 || a >= rank) {
    return ctx.InvalidArgument("axis " + std::to_string(axis) + " is out of range for rank " + std::to_string(rank));
  }
  return a;
}

int64_t Product(const Shape& s, size_t begin, size_t end) {
  int64_t p = 1;
  for (size_t i = begin; i < end && i < s.size(); ++i) p *= s[i];
  return p;
}

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
    return LaunchBinaryF32(kOp, InF32(ctx, 0), InF32(ctx, 1), static_cast<float*>(y->raw_data()), plan, cuda->stream());
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

// Shape: the input's dimensions (opset 15: start / end) as an int64 device tensor; the input stays put.
Status ShapeOf(OpContext& ctx) {
  SPARQ_RETURN_IF_ERROR(ctx.RequireInputs(1));
  SPARQ_ASSIGN_OR_RETURN(CudaContext * cuda, CudaContextOf(ctx));
  const Shape& shape = ctx.input(0).shape();
  const int64_t rank = static_cast<int64_t>(shape.size());
  int64_t start = 0, end = rank;
  if (ctx.opset() >= 15) {
    start = ctx.node().attr_int("start", 0);
    end = ctx.node().attr_int("end", rank);
    if (start < 0) start += rank;
    if (end < 0) end += rank;
    start = std::min(std::max<int64_t>(start, 0), rank);
    end = std::min(std::max<int64_t>(end, 0), rank);
  }
  std::vector<int64_t> dims;
  for (int64_t d = start; d < end; ++d) dims.push_back(shape[static_cast<size_t>(d)]);
  SPARQ_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, DataType::kInt64, {static_cast<int64_t>(dims.size())}));
  return cuda->CopyFromHost(dims.data(), y->raw_data(), dims.size() * sizeof(int64_t));
}

Status RunUnary(OpContext& ctx, UnaryOp op, float p0 = 0.0f, float p1 = 0.0f, float p2 = 0.0f) {
  SPARQ_RETURN_IF_ERROR(RequireDeviceInput(ctx, 0));
  SPARQ_RETURN_IF_ERROR(RequireInputType(ctx, 0, DataType::kFloat32, "the CUDA unary row"));
  SPARQ_ASSIGN_OR_RETURN(CudaContext * cuda, CudaContextOf(ctx));
  const Tensor& x = ctx.input(0);
  SPARQ_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, DataType::kFloat32, x.shape()));
  return LaunchUnaryF32(op, InF32(ctx, 0), static_cast<float*>(y->raw_data()), x.numel(), p0, p1, p2, cuda->stream());
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
  return LaunchUnaryF32(UnaryOp::kGeluErfChain, InF32(ctx, 0), static_cast<float*>(y->raw_data()), x.numel(),
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
  return LaunchUnaryF32(UnaryOp::kHardSwishChain, InF32(ctx, 0), static_cast<float*>(y->raw_data()), x.numel(),
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
  return LaunchSoftmaxRowsF32(InF32(ctx, 0), static_cast<float*>(y->raw_data()), rows, n, cuda->stream());
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
  return LaunchLayerNormRowsF32(InF32(ctx, 0), InF32(ctx, 1), ctx.has_input(2) ? InF32(ctx, 2) : nullptr, eps, rows,
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
  return kMax ? LaunchMaxPool2dF32(InF32(ctx, 0), yp, g, cuda->stream())
              : LaunchAveragePool2dF32(InF32(ctx, 0), yp, g, cuda->stream());
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
  return LaunchGlobalAveragePoolF32(InF32(ctx, 0), static_cast<float*>(y->raw_data()), x.dim(0) * x.dim(1),
                                    Product(x.shape(), 2, x.rank()), cuda->stream());
}

// ---------------------------------------------------------------------------
// Shape-only operators: the output shares the input's device buffer.

Status SetAlias(OpContext& ctx, Shape shape) {
  SPARQ_RETURN_IF_ERROR(RequireDeviceInput(ctx, 0));
  StatusOr<Tensor> t = ctx.input(0).Reshaped(std::move(shape));
  if (!t.ok()) return t.status().WithContext(ctx.node().Describe());
  ctx.set_output(0, std::move(*t));
  return Status::OK();
}

StatusOr<std::vector<int64_t>> HostInt64s(const OpContext& ctx, size_t i, const char* what) {
  SPARQ_RETURN_IF_ERROR(RequireHost(ctx, i, what));
  const DataType d = ctx.input(i).dtype();
  if (d != DataType::kInt64 && d != DataType::kInt32) {
    return ctx.InvalidArgument(std::string(what) + " has type " + DataTypeName(d) + "; expected int64");
  }
  return ctx.input(i).ToInt64Vector();
}

Status Reshape(OpContext& ctx) {
  SPARQ_RETURN_IF_ERROR(ctx.RequireInputs(2));
  SPARQ_ASSIGN_OR_RETURN(std::vector<int64_t> shape, HostInt64s(ctx, 1, "shape"));
  const Shape& in = ctx.input(0).shape();
  const bool allow_zero = ctx.opset() >= 14 && ctx.node().attr_int("allowzero", 0) != 0;
  int64_t known = 1;
  int infer = -1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == 0 && !allow_zero) {
      if (i >= in.size()) return ctx.InvalidArgument("shape copies dimension " + std::to_string(i) + " that the input lacks");
      shape[i] = in[i];
    }
    if (shape[i] == -1) {
      if (infer >= 0) return ctx.InvalidArgument("shape has more than one -1");
      infer = static_cast<int>(i);
    } else if (shape[i] < 0) {
      return ctx.InvalidArgument("shape has a negative dimension " + std::to_string(shape[i]));
    } else {
      known *= shape[i];
    }
  }
  if (infer >= 0) {
    if (known == 0 || ctx.input(0).numel() % known != 0) {
      return ctx.InvalidArgument("cannot infer the -1 of the shape for " + ShapeToString(in));
    }
    shape[static_cast<size_t>(infer)] = ctx.input(0).numel() / known;
  }
  return SetAlias(ctx, shape);
}

Status Flatten(OpContext& ctx) {
  SPARQ_RETURN_IF_ERROR(ctx.RequireInputs(1));
  const Shape& in = ctx.input(0).shape();
  const int64_t rank = static_cast<int64_t>(in.size());
  int64_t axis = ctx.node().attr_int("axis", 1);
  if (axis < 0) axis += rank;
  if (axis < 0 || axis > rank) return ctx.InvalidArgument("axis is out of range for rank " + std::to_string(rank));
  return SetAlias(ctx, {Product(in, 0, static_cast<size_t>(axis)), Product(in, static_cast<size_t>(axis), in.size())});
}

StatusOr<std::vector<int64_t>> AxesOf(const OpContext& ctx) {
  if (ctx.opset() >= 13) {
    if (!ctx.has_input(1)) return std::vector<int64_t>{};
    return HostInt64s(ctx, 1, "axes");
  }
  return ctx.node().attr_ints("axes");
}

Status Squeeze(OpContext& ctx) {
  SPARQ_RETURN_IF_ERROR(ctx.RequireInputs(1));
  const Shape& in = ctx.input(0).shape();
  SPARQ_ASSIGN_OR_RETURN(const std::vector<int64_t> axes, AxesOf(ctx));
  std::vector<bool> drop(in.size(), false);
  for (int64_t a : axes) {
    SPARQ_ASSIGN_OR_RETURN(const int64_t n, NormalizeAxisOf(ctx, a, static_cast<int64_t>(in.size())));
    if (in[static_cast<size_t>(n)] != 1) return ctx.InvalidArgument("cannot squeeze axis " + std::to_string(a) + " of size != 1");
    drop[static_cast<size_t>(n)] = true;
  }
  Shape out;
  for (size_t i = 0; i < in.size(); ++i) {
    if (axes.empty() ? in[i] != 1 : !drop[i]) out.push_back(in[i]);
  }
  return SetAlias(ctx, out);
}

Status Unsqueeze(OpContext& ctx) {
  SPARQ_RETURN_IF_ERROR(ctx.RequireInputs(1));
  const Shape& in = ctx.input(0).shape();
  SPARQ_ASSIGN_OR_RETURN(const std::vector<int64_t> axes, AxesOf(ctx));
  const int64_t out_rank = static_cast<int64_t>(in.size() + axes.size());
  std::vector<bool> inserted(static_cast<size_t>(out_rank), false);
  for (int64_t a : axes) {
    SPARQ_ASSIGN_OR_RETURN(const int64_t n, NormalizeAxisOf(ctx, a, out_rank));
    if (inserted[static_cast<size_t>(n)]) return ctx.InvalidArgument("axes repeat " + std::to_string(a));
    inserted[static_cast<size_t>(n)] = true;
  }
  Shape out;
  size_t next = 0;
  for (int64_t i = 0; i < out_rank; ++i) out.push_back(inserted[static_cast<size_t>(i)] ? 1 : in[next++]);
  return SetAlias(ctx, out);
}

Status Identity(OpContext& ctx) {
  SPARQ_RETURN_IF_ERROR(ctx.RequireInputs(1));
  return SetAlias(ctx, ctx.input(0).shape());
}

// ---------------------------------------------------------------------------
// Transpose and Concat

Status Transpose(OpContext& ctx) {
  SPARQ_RETURN_IF_ERROR(RequireDeviceInput(ctx, 0));
  SPARQ_ASSIGN_OR_RETURN(CudaContext * cuda, CudaContextOf(ctx));
  const Tensor& x = ctx.input(0);
  const size_t rank = x.rank();
  std::vector<int64_t> perm = ctx.node().attr_ints("perm");
  if (perm.empty()) {
    for (size_t i = 0; i < rank; ++i) perm.push_back(static_cast<int64_t>(rank - 1 - i));
  }
  if (perm.size() != rank) return ctx.InvalidArgument("perm has " + std::to_string(perm.size()) + " entries for rank " + std::to_string(rank));
  if (rank > static_cast<size_t>(kMaxRank)) return ctx.NotSupported("transpose_cuda takes up to 8 dimensions");
  std::vector<int64_t> in_strides(rank, 1);
  for (size_t d = rank; d-- > 1;) in_strides[d - 1] = in_strides[d] * x.dim(d);
  PermutePlan plan;
  plan.rank = static_cast<int>(rank);
  plan.numel = x.numel();
  std::vector<bool> seen(rank, false);
  Shape out(rank);
  for (size_t d = 0; d < rank; ++d) {
    const int64_t p = perm[d] < 0 ? perm[d] + static_cast<int64_t>(rank) : perm[d];
    if (p < 0 || p >= static_cast<int64_t>(rank) || seen[static_cast<size_t>(p)]) return ctx.InvalidArgument("perm is not a permutation");
    seen[static_cast<size_t>(p)] = true;
    out[d] = x.dim(static_cast<size_t>(p));
    plan.out_dims[d] = out[d];
    plan.in_strides[d] = in_strides[static_cast<size_t>(p)];
  }
  SPARQ_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, x.dtype(), out));
  if (rank == 0) {
    SPARQ_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(y->raw_data(), x.raw_data(), x.nbytes(), cudaMemcpyDeviceToDevice, cuda->stream()));
    return Status::OK();
  }
  return LaunchPermute(x.raw_data(), y->raw_data(), static_cast<int>(DataTypeSize(x.dtype())), plan, cuda->stream());
}

// Output 0 = the concatenation of `parts` (device tensors of one type) on `axis`.
Status ConcatInto(OpContext& ctx, CudaContext& cuda, const std::vector<const Tensor*>& parts, int64_t axis_attr) {
  if (parts.empty()) return ctx.InvalidArgument("Concat of nothing");
  const Tensor& first = *parts[0];
  const int64_t rank = static_cast<int64_t>(first.rank());
  if (rank == 0) return ctx.InvalidArgument("Concat of scalars");
  SPARQ_ASSIGN_OR_RETURN(const int64_t axis, NormalizeAxisOf(ctx, axis_attr, rank));
  Shape out = first.shape();
  out[static_cast<size_t>(axis)] = 0;
  for (size_t i = 0; i < parts.size(); ++i) {
    const Tensor& t = *parts[i];
    if (t.dtype() != first.dtype() || static_cast<int64_t>(t.rank()) != rank) {
      return ctx.InvalidArgument("input " + std::to_string(i) + " differs from input 0 in type or rank");
    }
    for (int64_t d = 0; d < rank; ++d) {
      if (d != axis && t.dim(static_cast<size_t>(d)) != first.dim(static_cast<size_t>(d))) {
        return ctx.InvalidArgument("input " + std::to_string(i) + " has shape " + ShapeToString(t.shape()) +
                                   ", which does not match " + ShapeToString(first.shape()) + " off the axis");
      }
    }
    out[static_cast<size_t>(axis)] += t.dim(static_cast<size_t>(axis));
  }
  SPARQ_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, first.dtype(), out));
  const size_t elem = DataTypeSize(first.dtype());
  const int64_t outer = Product(out, 0, static_cast<size_t>(axis));
  const int64_t inner = Product(out, static_cast<size_t>(axis) + 1, out.size());
  const size_t out_row = static_cast<size_t>(out[static_cast<size_t>(axis)] * inner) * elem;
  size_t offset = 0;
  for (const Tensor* t : parts) {
    const size_t row = static_cast<size_t>(t->dim(static_cast<size_t>(axis)) * inner) * elem;
    if (row > 0 && outer > 0) {
      // One strided 2-D copy: `outer` rows of `row` bytes into rows of out_row bytes.
      SPARQ_CUDA_RETURN_IF_ERROR(cudaMemcpy2DAsync(static_cast<uint8_t*>(y->raw_data()) + offset, out_row, t->raw_data(),
                                                   row, row, static_cast<size_t>(outer), cudaMemcpyDeviceToDevice,
                                                   cuda.stream()));
    }
    offset += row;
  }
  return Status::OK();
}

Status Concat(OpContext& ctx) {
  SPARQ_RETURN_IF_ERROR(ctx.RequireInputs(1));
  SPARQ_ASSIGN_OR_RETURN(CudaContext * cuda, CudaContextOf(ctx));
  std::vector<const Tensor*> parts;
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    SPARQ_RETURN_IF_ERROR(RequireDeviceInput(ctx, i));
    parts.push_back(&ctx.input(i));
  }
  return ConcatInto(ctx, *cuda, parts, ctx.node().attr_int("axis", 0));
}

// Slice: starts / ends / axes / steps (inputs from opset 10, host inputs;
// attributes before), resolved as the reference does, then one strided copy.
Status Slice(OpContext& ctx) {
  SPARQ_RETURN_IF_ERROR(RequireDeviceInput(ctx, 0));
  SPARQ_ASSIGN_OR_RETURN(CudaContext * cuda, CudaContextOf(ctx));
  const Tensor& x = ctx.input(0);
  std::vector<int64_t> starts, ends, axes, steps;
  if (ctx.opset() >= 10) {
    SPARQ_RETURN_IF_ERROR(ctx.RequireInputs(3));
    SPARQ_ASSIGN_OR_RETURN(starts, HostInt64s(ctx, 1, "starts"));
    SPARQ_ASSIGN_OR_RETURN(ends, HostInt64s(ctx, 2, "ends"));
    if (ctx.has_input(3)) {
      SPARQ_ASSIGN_OR_RETURN(axes, HostInt64s(ctx, 3, "axes"));
    }
    if (ctx.has_input(4)) {
      SPARQ_ASSIGN_OR_RETURN(steps, HostInt64s(ctx, 4, "steps"));
    }
  } else {
    starts = ctx.node().attr_ints("starts");
    ends = ctx.node().attr_ints("ends");
    axes = ctx.node().attr_ints("axes");
  }
  Shape out;
  SPARQ_ASSIGN_OR_RETURN(const PermutePlan plan, PlanSlice(ctx, x.shape(), starts, ends, axes, steps, &out));
  SPARQ_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, x.dtype(), out));
  if (y->numel() == 0) return Status::OK();
  if (x.rank() == 0) {
    SPARQ_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(y->raw_data(), x.raw_data(), x.nbytes(), cudaMemcpyDeviceToDevice, cuda->stream()));
    return Status::OK();
  }
  return LaunchPermute(x.raw_data(), y->raw_data(), static_cast<int>(DataTypeSize(x.dtype())), plan, cuda->stream());
}

// Split: each output one strided 2-D copy. Sizes from the `split` input
// (opset >= 13, a host input) or attribute, else num_outputs / equal parts.
Status Split(OpContext& ctx) {
  SPARQ_RETURN_IF_ERROR(RequireDeviceInput(ctx, 0));
  SPARQ_ASSIGN_OR_RETURN(CudaContext * cuda, CudaContextOf(ctx));
  const Tensor& x = ctx.input(0);
  const int64_t rank = static_cast<int64_t>(x.rank());
  if (rank == 0) return ctx.InvalidArgument("Split of a scalar");
  SPARQ_ASSIGN_OR_RETURN(const int64_t axis, NormalizeAxisOf(ctx, ctx.node().attr_int("axis", 0), rank));
  const int64_t dim = x.dim(static_cast<size_t>(axis));
  const int64_t n_out = static_cast<int64_t>(ctx.num_outputs());
  std::vector<int64_t> sizes;
  if (ctx.opset() >= 13 && ctx.has_input(1)) {
    SPARQ_ASSIGN_OR_RETURN(sizes, HostInt64s(ctx, 1, "split"));
  } else if (ctx.opset() < 13) {
    sizes = ctx.node().attr_ints("split");
  }
  if (sizes.empty()) {  // equal parts; the last one smaller when they do not divide (opset 18)
    if (n_out < 1) return ctx.InvalidArgument("Split has no outputs");
    const int64_t part = (dim + n_out - 1) / n_out;
    for (int64_t i = 0; i < n_out; ++i) sizes.push_back(std::max<int64_t>(0, std::min(part, dim - i * part)));
  }
  int64_t total = 0;
  for (int64_t s : sizes) total += s;
  if (static_cast<int64_t>(sizes.size()) != n_out || total != dim) {
    return ctx.InvalidArgument("split sizes do not add up to dimension " + std::to_string(dim) + " in " +
                               std::to_string(n_out) + " outputs");
  }
  const size_t elem = DataTypeSize(x.dtype());
  const int64_t outer = Product(x.shape(), 0, static_cast<size_t>(axis));
  const int64_t inner = Product(x.shape(), static_cast<size_t>(axis) + 1, x.rank());
  const size_t in_row = static_cast<size_t>(dim * inner) * elem;
  size_t offset = 0;
  for (int64_t i = 0; i < n_out; ++i) {
    Shape shape = x.shape();
    shape[static_cast<size_t>(axis)] = sizes[static_cast<size_t>(i)];
    const size_t row = static_cast<size_t>(sizes[static_cast<size_t>(i)] * inner) * elem;
    if (ctx.wants_output(static_cast<size_t>(i))) {
      SPARQ_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(static_cast<size_t>(i), x.dtype(), shape));
      if (row > 0 && outer > 0) {
        SPARQ_CUDA_RETURN_IF_ERROR(cudaMemcpy2DAsync(y->raw_data(), row, static_cast<const uint8_t*>(x.raw_data()) + offset,
                                                     in_row, row, static_cast<size_t>(outer), cudaMemcpyDeviceToDevice,
                                                     cuda->stream()));
      }
    }
    offset += row;
  }
  return Status::OK();
}

// Gather with host indices (token ids, positions): uploaded, then one kernel.
Status Gather(OpContext& ctx) {
  SPARQ_RETURN_IF_ERROR(ctx.RequireInputs(2));
  SPARQ_RETURN_IF_ERROR(RequireDeviceInput(ctx, 0));
  SPARQ_ASSIGN_OR_RETURN(CudaContext * cuda, CudaContextOf(ctx));
  const Tensor& x = ctx.input(0);
  const int64_t rank = static_cast<int64_t>(x.rank());
  if (rank == 0) return ctx.InvalidArgument("Gather from a scalar");
  SPARQ_ASSIGN_OR_RETURN(const int64_t axis, NormalizeAxisOf(ctx, ctx.node().attr_int("axis", 0), rank));
  SPARQ_ASSIGN_OR_RETURN(std::vector<int64_t> indices, HostInt64s(ctx, 1, "indices"));
  const int64_t dim = x.dim(static_cast<size_t>(axis));
  for (int64_t& v : indices) {
    if (v < -dim || v >= dim) return ctx.InvalidArgument("index " + std::to_string(v) + " is out of range for dimension " + std::to_string(dim));
    if (v < 0) v += dim;
  }
  Shape out(x.shape().begin(), x.shape().begin() + axis);
  for (int64_t d : ctx.input(1).shape()) out.push_back(d);
  out.insert(out.end(), x.shape().begin() + axis + 1, x.shape().end());
  SPARQ_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, x.dtype(), out));
  if (y->numel() == 0) return Status::OK();
  SPARQ_ASSIGN_OR_RETURN(std::shared_ptr<uint8_t> idx, UploadVector(*cuda, indices));
  return LaunchGather(x.raw_data(), reinterpret_cast<const int64_t*>(idx.get()), y->raw_data(),
                      static_cast<int>(DataTypeSize(x.dtype())), Product(x.shape(), 0, static_cast<size_t>(axis)), dim,
                      Product(x.shape(), static_cast<size_t>(axis) + 1, x.rank()), static_cast<int64_t>(indices.size()),
                      cuda->stream());
}

// ---------------------------------------------------------------------------
// QuantizeLinear / DequantizeLinear (float32 <-> int8 / uint8), per tensor or per axis

Status CheckQdq(const Node& node, const std::vector<const Tensor*>&) {
  if (node.attr_int("block_size", 0) != 0) return Status::NotSupported(node.Describe() + ": blocked quantization");
  const int64_t out = node.attr_int("output_dtype", 0);
  if (out != 0 && out != 2 && out != 3) {  // TensorProto UINT8 = 2, INT8 = 3
    return Status::NotSupported(node.Describe() + ": output_dtype other than int8 / uint8");
  }
  return Status::OK();
}

struct QuantParams {
  std::shared_ptr<uint8_t> scale, zero_point;  // device arrays
  int64_t axis_dim = 1, inner = 1;
};

// Uploads scale (input 1) and zero point (input 2, optional) for x's layout.
StatusOr<QuantParams> ReadQuantParams(OpContext& ctx, CudaContext& cuda, const Shape& x_shape) {
  SPARQ_ASSIGN_OR_RETURN(std::vector<float> scale, HostFloats(ctx, 1, "scale"));
  std::vector<int32_t> zp;
  if (ctx.has_input(2)) {
    SPARQ_ASSIGN_OR_RETURN(zp, HostInts(ctx, 2, "zero point"));
    if (zp.size() != scale.size()) return ctx.InvalidArgument("zero point and scale differ in size");
  }
  QuantParams p;  // one value: per tensor (axis_dim = inner = 1)
  if (scale.size() != 1) {
    const int64_t rank = static_cast<int64_t>(x_shape.size());
    SPARQ_ASSIGN_OR_RETURN(const int64_t axis, NormalizeAxisOf(ctx, ctx.node().attr_int("axis", 1), rank));
    p.axis_dim = x_shape[static_cast<size_t>(axis)];
    p.inner = Product(x_shape, static_cast<size_t>(axis) + 1, x_shape.size());
    if (static_cast<int64_t>(scale.size()) != p.axis_dim) {
      return ctx.InvalidArgument("scale has " + std::to_string(scale.size()) + " values for an axis of " +
                                 std::to_string(p.axis_dim));
    }
  }
  SPARQ_ASSIGN_OR_RETURN(p.scale, UploadVector(cuda, scale));
  if (!zp.empty()) {
    SPARQ_ASSIGN_OR_RETURN(p.zero_point, UploadVector(cuda, zp));
  }
  return p;
}

Status QuantizeF32(OpContext& ctx) {
  SPARQ_RETURN_IF_ERROR(ctx.RequireInputs(2));
  SPARQ_RETURN_IF_ERROR(RequireDeviceInput(ctx, 0));
  SPARQ_RETURN_IF_ERROR(RequireInputType(ctx, 0, DataType::kFloat32, "quantize_f32_s8_cuda"));
  SPARQ_ASSIGN_OR_RETURN(CudaContext * cuda, CudaContextOf(ctx));
  DataType out = ctx.node().attr_int("output_dtype", 0) == 3 ? DataType::kInt8 : DataType::kUInt8;
  if (ctx.has_input(2)) out = ctx.input(2).dtype();
  if (out != DataType::kInt8 && out != DataType::kUInt8) {
    return ctx.NotSupported("quantize_f32_s8_cuda writes int8 / uint8, not " + DataTypeName(out));
  }
  const Tensor& x = ctx.input(0);
  SPARQ_ASSIGN_OR_RETURN(const QuantParams p, ReadQuantParams(ctx, *cuda, x.shape()));
  SPARQ_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, out, x.shape()));
  return LaunchQuantizeF32(InF32(ctx, 0), y->raw_data(), out == DataType::kInt8, x.numel(),
                           reinterpret_cast<const float*>(p.scale.get()),
                           reinterpret_cast<const int32_t*>(p.zero_point.get()), p.axis_dim, p.inner, cuda->stream());
}

Status DequantizeToF32(OpContext& ctx) {
  SPARQ_RETURN_IF_ERROR(ctx.RequireInputs(2));
  SPARQ_RETURN_IF_ERROR(RequireDeviceInput(ctx, 0));
  SPARQ_ASSIGN_OR_RETURN(CudaContext * cuda, CudaContextOf(ctx));
  const Tensor& x = ctx.input(0);
  int type_code;
  switch (x.dtype()) {
    case DataType::kUInt8: type_code = 0; break;
    case DataType::kInt8: type_code = 1; break;
    case DataType::kInt32: type_code = 2; break;
    default: return ctx.NotSupported("dequantize_s8_f32_cuda reads int8 / uint8 / int32, not " + DataTypeName(x.dtype()));
  }
  if (ctx.input(1).dtype() != DataType::kFloat32) return ctx.NotSupported("dequantize_s8_f32_cuda writes float32 only");
  SPARQ_ASSIGN_OR_RETURN(const QuantParams p, ReadQuantParams(ctx, *cuda, x.shape()));
  SPARQ_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, DataType::kFloat32, x.shape()));
  return LaunchDequantize(x.raw_data(), type_code, static_cast<float*>(y->raw_data()), x.numel(),
                          reinterpret_cast<const float*>(p.scale.get()),
                          reinterpret_cast<const int32_t*>(p.zero_point.get()), p.axis_dim, p.inner, cuda->stream());
}

// ---------------------------------------------------------------------------
// The QDQ glue the CPU executor fuses: sparq.QLinearAdd / QLinearMul / QLinearLut

StatusOr<std::vector<uint8_t>> HostTable(const OpContext& ctx, size_t i) {
  SPARQ_RETURN_IF_ERROR(RequireHost(ctx, i, "Table"));
  const Tensor& t = ctx.input(i);
  if ((t.dtype() != DataType::kUInt8 && t.dtype() != DataType::kInt8) || t.numel() != 256) {
    return ctx.InvalidArgument("Table must hold 256 uint8 or int8 values");
  }
  const uint8_t* p = static_cast<const uint8_t*>(t.raw_data());
  return std::vector<uint8_t>(p, p + 256);
}

// One per-tensor (scale, zero point) pair: inputs i and i + 1.
Status ReadQParams(const OpContext& ctx, size_t i, const char* what, float* scale, int32_t* zp) {
  SPARQ_ASSIGN_OR_RETURN(const std::vector<float> s, HostFloats(ctx, i, what));
  SPARQ_ASSIGN_OR_RETURN(const std::vector<int32_t> z, HostInts(ctx, i + 1, what));
  if (s.size() != 1 || z.size() != 1) return ctx.InvalidArgument(std::string(what) + " parameters must be per tensor");
  *scale = s[0];
  *zp = z[0];
  return Status::OK();
}

template <bool kMul>
Status QLinearBinary(OpContext& ctx) {
  SPARQ_RETURN_IF_ERROR(ctx.RequireInputs(8));
  SPARQ_RETURN_IF_ERROR(RequireDeviceInput(ctx, 0));
  SPARQ_RETURN_IF_ERROR(RequireDeviceInput(ctx, 3));
  SPARQ_ASSIGN_OR_RETURN(CudaContext * cuda, CudaContextOf(ctx));
  const Tensor& a = ctx.input(0);
  const Tensor& b = ctx.input(3);
  auto is_byte = [](DataType t) { return t == DataType::kUInt8 || t == DataType::kInt8; };
  const DataType y_type = ctx.input(7).dtype();
  if (!is_byte(a.dtype()) || !is_byte(b.dtype()) || !is_byte(y_type)) {
    return ctx.InvalidArgument("A, B and Y must be uint8 or int8");
  }
  QLinearBinaryArgs q;
  q.mul = kMul;
  q.a_signed = a.dtype() == DataType::kInt8;
  q.b_signed = b.dtype() == DataType::kInt8;
  q.y_signed = y_type == DataType::kInt8;
  SPARQ_RETURN_IF_ERROR(ReadQParams(ctx, 1, "A", &q.a_scale, &q.a_zp));
  SPARQ_RETURN_IF_ERROR(ReadQParams(ctx, 4, "B", &q.b_scale, &q.b_zp));
  SPARQ_RETURN_IF_ERROR(ReadQParams(ctx, 6, "Y", &q.y_scale, &q.y_zp));
  DataType out_type = y_type;
  if (ctx.has_input(8)) {
    SPARQ_ASSIGN_OR_RETURN(const std::vector<uint8_t> table, HostTable(ctx, 8));
    std::memcpy(q.table, table.data(), 256);
    q.has_table = true;
    out_type = ctx.input(8).dtype();
  }
  BroadcastPlan plan;
  int64_t out_dims[kMaxRank];
  int out_rank = 0;
  Status st = PlanBroadcast(a.shape().data(), static_cast<int>(a.rank()), b.shape().data(), static_cast<int>(b.rank()),
                            &plan, out_dims, &out_rank);
  if (!st.ok()) return st.WithContext(ctx.node().Describe());
  SPARQ_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, out_type, Shape(out_dims, out_dims + out_rank)));
  return LaunchQLinearBinary(a.raw_data(), b.raw_data(), y->raw_data(), plan, q, cuda->stream());
}

Status QLinearLut(OpContext& ctx) {
  SPARQ_RETURN_IF_ERROR(ctx.RequireInputs(2));
  SPARQ_RETURN_IF_ERROR(RequireDeviceInput(ctx, 0));
  SPARQ_ASSIGN_OR_RETURN(CudaContext * cuda, CudaContextOf(ctx));
  const Tensor& x = ctx.input(0);
  if (x.dtype() != DataType::kUInt8 && x.dtype() != DataType::kInt8) return ctx.InvalidArgument("X must be uint8 or int8");
  SPARQ_ASSIGN_OR_RETURN(const std::vector<uint8_t> table, HostTable(ctx, 1));
  SPARQ_ASSIGN_OR_RETURN(std::shared_ptr<uint8_t> dev_table, UploadVector(*cuda, table));
  SPARQ_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, ctx.input(1).dtype(), x.shape()));
  return LaunchLut256(x.raw_data(), x.dtype() == DataType::kInt8, dev_table.get(), y->raw_data(), x.numel(),
                      cuda->stream());
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
  return LaunchReduceSumMeanF32(InF32(ctx, 0), reinterpret_cast<const int64_t*>(base.get()),
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

// DynamicQuantizeLinear (float32 -> uint8, scale, zero point), all on the device.
Status DynamicQuantizeF32(OpContext& ctx) {
  SPARQ_RETURN_IF_ERROR(RequireDeviceInput(ctx, 0));
  SPARQ_RETURN_IF_ERROR(RequireInputType(ctx, 0, DataType::kFloat32, "dynamic_quantize_f32_u8_cuda"));
  SPARQ_ASSIGN_OR_RETURN(CudaContext * cuda, CudaContextOf(ctx));
  const Tensor& x = ctx.input(0);
  SPARQ_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, DataType::kUInt8, x.shape()));
  SPARQ_ASSIGN_OR_RETURN(Tensor * scale, ctx.AllocateOutput(1, DataType::kFloat32, {}));
  SPARQ_ASSIGN_OR_RETURN(Tensor * zero_point, ctx.AllocateOutput(2, DataType::kUInt8, {}));
  SPARQ_ASSIGN_OR_RETURN(std::shared_ptr<uint8_t> scratch, Scratch(*cuda, DynamicQuantizeScratchBytes()));
  return LaunchDynamicQuantizeU8(InF32(ctx, 0), x.numel(), static_cast<uint8_t*>(y->raw_data()),
                                 static_cast<float*>(scale->raw_data()), static_cast<uint8_t*>(zero_point->raw_data()),
                                 scratch.get(), cuda->stream());
}

// sparq.ConcatLut(X_0, Table_0, X_1, Table_1, ...): each X_i through its table ("" : as is), then Concat.
Status ConcatLut(OpContext& ctx) {
  if (ctx.num_inputs() == 0 || ctx.num_inputs() % 2 != 0) return ctx.InvalidArgument("expected pairs (X, Table)");
  SPARQ_ASSIGN_OR_RETURN(CudaContext * cuda, CudaContextOf(ctx));
  std::vector<Tensor> mapped(ctx.num_inputs() / 2);
  std::vector<const Tensor*> parts;
  for (size_t i = 0; i < mapped.size(); ++i) {
    SPARQ_RETURN_IF_ERROR(RequireDeviceInput(ctx, 2 * i));
    const Tensor& x = ctx.input(2 * i);
    if (!ctx.has_input(2 * i + 1)) {
      parts.push_back(&x);
      continue;
    }
    if (x.dtype() != DataType::kUInt8 && x.dtype() != DataType::kInt8) return ctx.InvalidArgument("X must be uint8 or int8");
    SPARQ_ASSIGN_OR_RETURN(const std::vector<uint8_t> table, HostTable(ctx, 2 * i + 1));
    SPARQ_ASSIGN_OR_RETURN(std::shared_ptr<uint8_t> dev_table, UploadVector(*cuda, table));
    SPARQ_ASSIGN_OR_RETURN(mapped[i], cuda->AllocateTensor(ctx.input(2 * i + 1).dtype(), x.shape()));
    SPARQ_RETURN_IF_ERROR(LaunchLut256(x.raw_data(), x.dtype() == DataType::kInt8, dev_table.get(), mapped[i].raw_data(),
                                       x.numel(), cuda->stream()));
    parts.push_back(&mapped[i]);
  }
  return ConcatInto(ctx, *cuda, parts, ctx.node().attr_int("axis", 0));
}

// sparq.DequantizeConcat(X_0, scale_0, zero_point_0, X_1, ...): each X_i dequantized (per tensor), then Concat.
Status DequantizeConcat(OpContext& ctx) {
  if (ctx.num_inputs() == 0 || ctx.num_inputs() % 3 != 0) return ctx.InvalidArgument("expected triples (X, scale, zero point)");
  SPARQ_ASSIGN_OR_RETURN(CudaContext * cuda, CudaContextOf(ctx));
  std::vector<Tensor> values(ctx.num_inputs() / 3);
  std::vector<const Tensor*> parts;
  for (size_t i = 0; i < values.size(); ++i) {
    SPARQ_RETURN_IF_ERROR(RequireDeviceInput(ctx, 3 * i));
    const Tensor& x = ctx.input(3 * i);
    if (x.dtype() != DataType::kUInt8 && x.dtype() != DataType::kInt8) return ctx.InvalidArgument("X must be uint8 or int8");
    SPARQ_ASSIGN_OR_RETURN(const std::vector<float> scale, HostFloats(ctx, 3 * i + 1, "scale"));
    SPARQ_ASSIGN_OR_RETURN(const std::vector<int32_t> zp, HostInts(ctx, 3 * i + 2, "zero point"));
    if (scale.size() != 1 || zp.size() != 1) return ctx.InvalidArgument("DequantizeConcat parameters must be per tensor");
    SPARQ_ASSIGN_OR_RETURN(std::shared_ptr<uint8_t> scale_dev, UploadVector(*cuda, scale));
    SPARQ_ASSIGN_OR_RETURN(std::shared_ptr<uint8_t> zp_dev, UploadVector(*cuda, zp));
    SPARQ_ASSIGN_OR_RETURN(values[i], cuda->AllocateTensor(DataType::kFloat32, x.shape()));
    SPARQ_RETURN_IF_ERROR(LaunchDequantize(x.raw_data(), x.dtype() == DataType::kInt8 ? 1 : 0,
                                           static_cast<float*>(values[i].raw_data()), x.numel(),
                                           reinterpret_cast<const float*>(scale_dev.get()),
                                           reinterpret_cast<const int32_t*>(zp_dev.get()), 1, 1, cuda->stream()));
    parts.push_back(&values[i]);
  }
  return ConcatInto(ctx, *cuda, parts, ctx.node().attr_int("axis", 0));
}

KernelDef Row(const char* op, const char* domain, int since, KernelFn fn, const char* name, PrepareFn prepare = nullptr,
              uint32_t host_inputs = 0) {
  KernelDef d;
  d.op_type = op;
  d.domain = domain;
  d.since_opset = since;
  d.until_opset = 99;
  d.fn = fn;
  d.name = name;
  d.prepare = std::move(prepare);
  d.priority = kCudaPriorityGeneral;
  d.host_inputs = host_inputs;
  return d;
}

}  // namespace

void RegisterCudaTensorRows(KernelRegistry& r) {
  const uint32_t x = HostInput(0), xy = HostInput(0) | HostInput(1);
  r.Add(Row("Add", "", 7, WithHostFallback<Binary<BinaryOp::kAdd>>, "add_cuda", NumericOnly(xy)));
  r.Add(Row("Sub", "", 7, WithHostFallback<Binary<BinaryOp::kSub>>, "sub_cuda", NumericOnly(xy)));
  r.Add(Row("Mul", "", 7, WithHostFallback<Binary<BinaryOp::kMul>>, "mul_cuda", NumericOnly(xy)));
  r.Add(Row("Div", "", 7, WithHostFallback<Binary<BinaryOp::kDiv>>, "div_cuda", NumericOnly(xy)));
  // Shape reads only its input's dimensions: taking it here keeps a device
  // tensor from being copied to the host just to be measured.
  r.Add(Row("Shape", "", 1, WithHostFallback<ShapeOf>, "shape_cuda"));
  r.Add(Row("Relu", "", 6, WithHostFallback<UnaryF32<UnaryOp::kRelu>>, "relu_f32_cuda", Float32Only(x)));
  r.Add(Row("Sigmoid", "", 6, WithHostFallback<UnaryF32<UnaryOp::kSigmoid>>, "sigmoid_f32_cuda", Float32Only(x)));
  r.Add(Row("Tanh", "", 6, WithHostFallback<UnaryF32<UnaryOp::kTanh>>, "tanh_f32_cuda", Float32Only(x)));
  r.Add(Row("Erf", "", 9, WithHostFallback<UnaryF32<UnaryOp::kErf>>, "erf_f32_cuda", Float32Only(x)));
  r.Add(Row("Sqrt", "", 6, WithHostFallback<UnaryF32<UnaryOp::kSqrt>>, "sqrt_f32_cuda", Float32Only(x)));
  r.Add(Row("Exp", "", 6, WithHostFallback<UnaryF32<UnaryOp::kExp>>, "exp_f32_cuda", Float32Only(x)));
  r.Add(Row("Neg", "", 6, WithHostFallback<UnaryF32<UnaryOp::kNeg>>, "neg_f32_cuda", Float32Only(x)));
  r.Add(Row("Abs", "", 6, WithHostFallback<UnaryF32<UnaryOp::kAbs>>, "abs_f32_cuda", Float32Only(x)));
  r.Add(Row("Clip", "", 6, WithHostFallback<ClipF32>, "clip_f32_cuda", Float32Only(x), HostInput(1) | HostInput(2)));
  r.Add(Row("Gelu", "", 20, WithHostFallback<GeluF32>, "gelu_f32_cuda", Float32Only(x, CheckGelu)));
  r.Add(Row("Silu", kSparqDomain, 1, WithHostFallback<UnaryF32<UnaryOp::kSilu>>, "silu_f32_cuda", Float32Only(x)));
  r.Add(Row("GeluErfChain", kSparqDomain, 1, WithHostFallback<GeluErfChainF32>, "gelu_erf_chain_f32_cuda", Float32Only(x)));
  r.Add(Row("HardSwishChain", kSparqDomain, 1, WithHostFallback<HardSwishChainF32>, "hardswish_chain_f32_cuda", Float32Only(x)));
  r.Add(Row("Softmax", "", 1, WithHostFallback<SoftmaxF32>, "softmax_f32_cuda", Float32Only(x, CheckSoftmax)));
  r.Add(Row("LayerNormalization", "", 1, WithHostFallback<LayerNormF32>, "layernorm_f32_cuda", Float32Only(0x7u, CheckLayerNorm)));
  r.Add(Row("MaxPool", "", 1, WithHostFallback<Pool2d<true>>, "maxpool2d_cuda", CheckOnly(CheckPool)));
  r.Add(Row("AveragePool", "", 1, WithHostFallback<Pool2d<false>>, "avgpool2d_f32_cuda", Float32Only(x, CheckPool)));
  r.Add(Row("GlobalAveragePool", "", 1, WithHostFallback<GlobalAveragePoolF32>, "global_avgpool_f32_cuda", Float32Only(x)));
  r.Add(Row("Reshape", "", 5, WithHostFallback<Reshape>, "reshape_alias", nullptr, HostInput(1)));
  r.Add(Row("Flatten", "", 1, WithHostFallback<Flatten>, "flatten_alias"));
  r.Add(Row("Squeeze", "", 1, WithHostFallback<Squeeze>, "squeeze_alias", nullptr, HostInput(1)));
  r.Add(Row("Unsqueeze", "", 1, WithHostFallback<Unsqueeze>, "unsqueeze_alias", nullptr, HostInput(1)));
  r.Add(Row("Identity", "", 1, WithHostFallback<Identity>, "identity_alias"));
  r.Add(Row("Transpose", "", 1, WithHostFallback<Transpose>, "transpose_cuda"));
  KernelDef mean_attr = Row("ReduceMean", "", 1, WithHostFallback<ReduceSumMeanF32<true, false>>, "reduce_mean_f32_cuda", Float32Only(x));
  mean_attr.until_opset = 17;
  r.Add(std::move(mean_attr));
  r.Add(Row("ReduceMean", "", 18, WithHostFallback<ReduceSumMeanF32<true, true>>, "reduce_mean_f32_cuda", Float32Only(x), HostInput(1)));
  KernelDef sum_attr = Row("ReduceSum", "", 1, WithHostFallback<ReduceSumMeanF32<false, false>>, "reduce_sum_f32_cuda", Float32Only(x));
  sum_attr.until_opset = 12;
  r.Add(std::move(sum_attr));
  r.Add(Row("ReduceSum", "", 13, WithHostFallback<ReduceSumMeanF32<false, true>>, "reduce_sum_f32_cuda", Float32Only(x), HostInput(1)));
  r.Add(Row("Cast", "", 6, WithHostFallback<Cast>, "cast_cuda", CheckOnly(CheckCast)));
  r.Add(Row("Concat", "", 4, WithHostFallback<Concat>, "concat_cuda"));
  r.Add(Row("Split", "", 2, WithHostFallback<Split>, "split_cuda", nullptr, HostInput(1)));
  r.Add(Row("Slice", "", 1, WithHostFallback<Slice>, "slice_cuda", nullptr, HostInput(1) | HostInput(2) | HostInput(3) | HostInput(4)));
  r.Add(Row("Gather", "", 1, WithHostFallback<Gather>, "gather_cuda", nullptr, HostInput(1)));
  const uint32_t qparams = HostInput(1) | HostInput(2) | HostInput(4) | HostInput(5) | HostInput(6) | HostInput(7);
  r.Add(Row("QLinearAdd", kSparqDomain, 1, WithHostFallback<QLinearBinary<false>>, "qlinear_add_s8_cuda", nullptr, qparams | HostInput(8)));
  r.Add(Row("QLinearMul", kSparqDomain, 1, WithHostFallback<QLinearBinary<true>>, "qlinear_mul_s8_cuda", nullptr, qparams | HostInput(8)));
  r.Add(Row("QLinearLut", kSparqDomain, 1, WithHostFallback<QLinearLut>, "lut256_cuda", nullptr, HostInput(1)));
  uint32_t odd = 0, params3 = 0;  // the tables of ConcatLut; the scales and zero points of DequantizeConcat
  for (int i = 0; i < 32; ++i) {
    if (i % 2 == 1) odd |= HostInput(i);
    if (i % 3 != 0) params3 |= HostInput(i);
  }
  r.Add(Row("ConcatLut", kSparqDomain, 1, WithHostFallback<ConcatLut>, "concat_lut_cuda", nullptr, odd));
  r.Add(Row("DequantizeConcat", kSparqDomain, 1, WithHostFallback<DequantizeConcat>, "dequantize_concat_cuda", nullptr, params3));
  r.Add(Row("DynamicQuantizeLinear", "", 11, WithHostFallback<DynamicQuantizeF32>, "dynamic_quantize_f32_u8_cuda", Float32Only(x)));
  r.Add(Row("QuantizeLinear", "", 10, WithHostFallback<QuantizeF32>, "quantize_f32_s8_cuda", CheckOnly(CheckQdq),
            HostInput(1) | HostInput(2)));
  r.Add(Row("DequantizeLinear", "", 10, WithHostFallback<DequantizeToF32>, "dequantize_s8_f32_cuda", CheckOnly(CheckQdq),
            HostInput(1) | HostInput(2)));
}

}  // namespace cuda
}  // namespace sparq
