// Helpers shared by the CUDA rows (declared in cuda_rows.h): input checks,
// host inputs, uploads, the host fallback, prepare steps and row building.
#include <algorithm>
#include <string>
#include <vector>

#include "kernels/cuda/cuda_rows.h"
#include "kernels/cuda/cuda_status.h"
#include "kernels/cuda/launch.h"
#include "kernels/ref/quantize.h"
#include "kernels/registry.h"

namespace sparq {
namespace cuda {

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

StatusOr<Shape> LinearOutputShape(const OpContext& ctx, const Tensor& x, int64_t k, int64_t n) {
  if (x.rank() < 1 || x.shape().back() != k) return ctx.InvalidArgument("A's last dimension differs from the weight's K");
  Shape out(x.shape().begin(), x.shape().end() - 1);
  out.push_back(n);
  return out;
}

StatusOr<std::shared_ptr<uint8_t>> Upload(CudaContext& ctx, const void* host, size_t bytes) {
  SPARQ_ASSIGN_OR_RETURN(std::shared_ptr<uint8_t> buf, Scratch(ctx, bytes));
  SPARQ_RETURN_IF_ERROR(ctx.CopyFromHost(host, buf.get(), bytes));
  return buf;
}

Status RequireHost(const OpContext& ctx, size_t i, const char* what) {
  if (!ctx.input(i).device().is_host()) {
    return ctx.InvalidArgument(std::string(what) + " must arrive on the host (a host input of the CUDA row)");
  }
  return Status::OK();
}

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
  if (cuda->capturing()) {
    return ctx.NotSupported("runs on the host (HostFallback: an input type or layout the CUDA row does not take), "
                            "which a CUDA graph cannot capture");
  }
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

// A prepare step for float32 rows: declines the node when one of the inputs
// in `mask` is of another type where the graph says its type
// (PrepareContext::input_types: constants, graph inputs, shape inference;
// other types are known only when the node runs, where the row falls back to
// the host), then runs `check` when given.
PrepareFn Float32Only(uint32_t mask, Status (*check)(const Node&, const std::vector<const Tensor*>&)) {
  return [mask, check](const Node& node, const std::vector<const Tensor*>& constants,
                       const PrepareContext& context) -> StatusOr<PreparedKernel> {
    for (size_t i = 0; i < node.inputs.size() && i < 32; ++i) {
      if (((mask >> i) & 1u) == 0) continue;
      const DataType type = i < constants.size() && constants[i] != nullptr ? constants[i]->dtype()
                            : i < context.input_types.size()                ? context.input_types[i]
                                                                            : DataType::kUndefined;
      if (type != DataType::kUndefined && type != DataType::kFloat32) {
        return Status::NotSupported(node.Describe() + ": the CUDA row takes float32, input " + std::to_string(i) +
                                    " is " + DataTypeName(type));
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

StatusOr<std::vector<int64_t>> HostInt64s(const OpContext& ctx, size_t i, const char* what) {
  SPARQ_RETURN_IF_ERROR(RequireHost(ctx, i, what));
  const DataType d = ctx.input(i).dtype();
  if (d != DataType::kInt64 && d != DataType::kInt32) {
    return ctx.InvalidArgument(std::string(what) + " has type " + DataTypeName(d) + "; expected int64");
  }
  return ctx.input(i).ToInt64Vector();
}

StatusOr<std::vector<uint8_t>> HostTable(const OpContext& ctx, size_t i) {
  SPARQ_RETURN_IF_ERROR(RequireHost(ctx, i, "Table"));
  const Tensor& t = ctx.input(i);
  if ((t.dtype() != DataType::kUInt8 && t.dtype() != DataType::kInt8) || t.numel() != 256) {
    return ctx.InvalidArgument("Table must hold 256 uint8 or int8 values");
  }
  const uint8_t* p = static_cast<const uint8_t*>(t.raw_data());
  return std::vector<uint8_t>(p, p + 256);
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

StatusOr<Shape> PlanBinaryBroadcast(const OpContext& ctx, BroadcastPlan* plan) {
  const Shape& a = ctx.input(0).shape();
  const Shape& b = ctx.input(1).shape();
  int64_t out_dims[kMaxRank];
  int out_rank = 0;
  SPARQ_RETURN_IF_ERROR_WITH_CONTEXT(PlanBroadcast(a.data(), static_cast<int>(a.size()), b.data(),
                                                   static_cast<int>(b.size()), plan, out_dims, &out_rank),
                                     ctx.node().Describe());
  return Shape(out_dims, out_dims + out_rank);
}

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
  SPARQ_RETURN_IF_ERROR(LaunchShiftU8ToS8(static_cast<const uint8_t*>(t.raw_data()),
                                          reinterpret_cast<int8_t*>(v.holder.get()), t.numel(), cuda.stream()));
  v.data = reinterpret_cast<const int8_t*>(v.holder.get());
  v.shifted = true;
  return v;
}

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

StatusOr<float> SingleFloat(const OpContext& ctx, size_t i, const char* what) {
  SPARQ_ASSIGN_OR_RETURN(std::vector<float> v, HostFloats(ctx, i, what));
  if (v.size() != 1) return ctx.NotSupported(std::string(what) + " per tensor only in the CUDA INT8 rows");
  return v[0];
}

StatusOr<int32_t> OutputZeroPoint(const OpContext& ctx, size_t i) {
  if (!ctx.has_input(i)) return 0;
  SPARQ_ASSIGN_OR_RETURN(const std::vector<int32_t> v, HostInts(ctx, i, "y_zero_point"));
  if (v.size() != 1) return ctx.NotSupported("y_zero_point per tensor only");
  return v[0];
}

StatusOr<std::shared_ptr<uint8_t>> UploadMultipliers(CudaContext& cuda, float x_scale, const std::vector<float>& w_scale,
                                                     float y_scale) {
  std::vector<float> mult(w_scale.size());
  for (size_t j = 0; j < mult.size(); ++j) mult[j] = RequantMultiplier(x_scale, w_scale[j], y_scale);
  return UploadVector(cuda, mult);
}

Status CheckIntegerToFloatActivation(const Node& node) {
  const std::string activation = node.attr_string("activation", "");
  if (!activation.empty() && activation != "GeluErfChain") {
    return Status::NotSupported(node.Describe() + ": activation '" + activation + "'");
  }
  return Status::OK();
}

StatusOr<FloatEpilogue> MakeFloatEpilogue(const OpContext& ctx, CudaContext& cuda, int64_t cols,
                                          std::shared_ptr<uint8_t>* held) {
  SPARQ_RETURN_IF_ERROR(CheckIntegerToFloatActivation(ctx.node()));
  SPARQ_ASSIGN_OR_RETURN(const float a_scale, SingleFloat(ctx, 4, "A_scale"));
  SPARQ_ASSIGN_OR_RETURN(const std::vector<float> b_scale, HostFloats(ctx, 5, "B_scale"));
  if (b_scale.size() != 1 && static_cast<int64_t>(b_scale.size()) != cols) {
    return ctx.InvalidArgument("B_scale must have one value or one per column");
  }
  FloatEpilogue e;
  std::vector<float> scale(b_scale.size());
  for (size_t j = 0; j < scale.size(); ++j) scale[j] = a_scale * b_scale[j];
  SPARQ_ASSIGN_OR_RETURN(*held, UploadVector(cuda, scale));
  e.scale = reinterpret_cast<const float*>(held->get());
  e.scale_per_col = scale.size() > 1;
  if (ctx.has_input(6)) {
    SPARQ_RETURN_IF_ERROR(RequireDeviceInput(ctx, 6));
    const Tensor& bias = ctx.input(6);
    if (bias.dtype() != DataType::kFloat32 || bias.rank() != 1 || bias.dim(0) != cols) {
      return ctx.InvalidArgument("Bias must be float32 [" + std::to_string(cols) + "]");
    }
    e.bias = static_cast<const float*>(bias.raw_data());
  }
  if (ctx.node().attr_string("activation", "") == "GeluErfChain") {
    e.gelu = true;
    e.gelu_divisor = ctx.node().attr_float("gelu_divisor", 1.41421356f);
    e.gelu_offset = ctx.node().attr_float("gelu_offset", 1.0f);
    e.gelu_scale = ctx.node().attr_float("gelu_scale", 0.5f);
  }
  return e;
}

KernelDef CudaRow(const char* op, const char* domain, int since, KernelFn fn, const char* name, PrepareFn prepare,
                  uint32_t host_inputs, int priority) {
  KernelDef d;
  d.op_type = op;
  d.domain = domain;
  d.since_opset = since;
  d.until_opset = 99;
  d.fn = fn;
  d.name = name;
  d.prepare = std::move(prepare);
  d.priority = priority;
  d.host_inputs = host_inputs;
  return d;
}

}  // namespace cuda
}  // namespace sparq
