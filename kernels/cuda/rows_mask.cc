// CUDA rows of the comparisons, logical operators and shape-built tensors
// that exporters write around an attention mask (cuda_rows.h lists them):
// transformers' BERT builds its mask from the attention_mask input with
// Range, GreaterOrEqual, And, Equal, ConstantOfShape, Where and Expand, all
// depending on the batch size, so no constant folding removes them, and
// without these rows every such node (and the values it reads) left the GPU.
//
//   Equal Greater GreaterOrEqual Less LessOrEqual   compare_cuda  (float32, float16, int32, int64, bool) -> bool
//   And Or Xor                                      logic_cuda    (bool)
//   Where                                           where_cuda    (any 1 / 2 / 4 / 8-byte elements, 3-way broadcast)
//   Expand                                          expand_cuda   (a broadcast copy: PermuteKernel, stride 0)
//   ConstantOfShape                                 constant_of_shape_cuda (the value uploaded once, broadcast)
//   Range                                           range_cuda    (host scalars: computed on the host, uploaded)
//
// Results are exact (device_logic.h; copies).
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/cuda/cuda_rows.h"
#include "kernels/cuda/cuda_status.h"
#include "kernels/cuda/geometry.h"
#include "kernels/cuda/launch.h"
#include "kernels/cuda/launch_logic.h"

namespace sparq {
namespace cuda {
namespace {

bool LogicTypeOf(DataType t, LogicType* out) {
  switch (t) {
    case DataType::kFloat32: *out = LogicType::kF32; return true;
    case DataType::kFloat16: *out = LogicType::kF16; return true;
    case DataType::kInt32: *out = LogicType::kI32; return true;
    case DataType::kInt64: *out = LogicType::kI64; return true;
    case DataType::kBool: *out = LogicType::kBool; return true;
    default: return false;
  }
}

// Declines a node whose input types (where the graph says them) the
// comparison rows do not read.
StatusOr<PreparedKernel> PrepareCompare(const Node& node, const std::vector<const Tensor*>& constants,
                                        const PrepareContext& context) {
  for (size_t i = 0; i < 2 && i < node.inputs.size(); ++i) {
    const DataType t = i < constants.size() && constants[i] != nullptr ? constants[i]->dtype()
                       : i < context.input_types.size()               ? context.input_types[i]
                                                                       : DataType::kUndefined;
    LogicType unused;
    if (t != DataType::kUndefined && !LogicTypeOf(t, &unused)) {
      return Status::NotSupported(node.Describe() + ": the CUDA comparison rows do not read " + DataTypeName(t));
    }
  }
  return PreparedKernel{};
}

template <LogicOp kOp>
Status Logic(OpContext& ctx) {
  SPARQ_RETURN_IF_ERROR(RequireDeviceInput(ctx, 0));
  SPARQ_RETURN_IF_ERROR(RequireDeviceInput(ctx, 1));
  SPARQ_ASSIGN_OR_RETURN(CudaContext * cuda, CudaContextOf(ctx));
  const Tensor& a = ctx.input(0);
  const Tensor& b = ctx.input(1);
  if (a.dtype() != b.dtype()) return ctx.InvalidArgument("A and B differ in type");
  LogicType type;
  if (!LogicTypeOf(a.dtype(), &type)) return ctx.NotSupported("the CUDA comparison rows do not read " + DataTypeName(a.dtype()));
  const bool logical = kOp == LogicOp::kAnd || kOp == LogicOp::kOr || kOp == LogicOp::kXor;
  if (logical && type != LogicType::kBool) return ctx.InvalidArgument("And / Or / Xor take bool inputs");
  BroadcastPlan plan;
  SPARQ_ASSIGN_OR_RETURN(const Shape out, PlanBinaryBroadcast(ctx, &plan));
  SPARQ_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, DataType::kBool, out));
  return LaunchLogic(kOp, type, a.raw_data(), b.raw_data(), static_cast<uint8_t*>(y->raw_data()), plan, cuda->stream());
}

// The output dims of broadcasting `shapes` together, and each one's strides
// right-aligned to them (0 where it broadcasts).
Status PlanWhere(const OpContext& ctx, const Shape& c, const Shape& x, const Shape& y, WherePlan* plan, Shape* out) {
  const Shape* shapes[3] = {&c, &x, &y};
  int rank = 0;
  for (const Shape* s : shapes) rank = std::max(rank, static_cast<int>(s->size()));
  if (rank > kMaxRank) return ctx.NotSupported("where_cuda takes up to 8 dimensions");
  WherePlan p;
  p.rank = rank;
  p.numel = 1;
  out->assign(static_cast<size_t>(rank), 1);
  for (int d = 0; d < rank; ++d) {
    int64_t od = 1;
    for (const Shape* s : shapes) {
      const int i = d - (rank - static_cast<int>(s->size()));
      const int64_t sd = i >= 0 ? (*s)[static_cast<size_t>(i)] : 1;
      if (sd != 1 && od != 1 && sd != od) return ctx.InvalidArgument("Where's inputs do not broadcast");
      if (sd != 1) od = sd;
    }
    p.dims[d] = od;
    (*out)[static_cast<size_t>(d)] = od;
    p.numel *= od;
  }
  int64_t* strides[3] = {p.c_strides, p.x_strides, p.y_strides};
  for (int k = 0; k < 3; ++k) {
    const Shape& s = *shapes[k];
    int64_t stride = 1;
    for (int d = rank - 1; d >= 0; --d) {
      const int i = d - (rank - static_cast<int>(s.size()));
      const int64_t sd = i >= 0 ? s[static_cast<size_t>(i)] : 1;
      strides[k][d] = sd == 1 ? 0 : stride;
      stride *= sd;
    }
  }
  *plan = p;
  return Status::OK();
}

Status Where(OpContext& ctx) {
  SPARQ_RETURN_IF_ERROR(ctx.RequireInputs(3));
  for (size_t i = 0; i < 3; ++i) SPARQ_RETURN_IF_ERROR(RequireDeviceInput(ctx, i));
  SPARQ_ASSIGN_OR_RETURN(CudaContext * cuda, CudaContextOf(ctx));
  const Tensor& c = ctx.input(0);
  const Tensor& x = ctx.input(1);
  const Tensor& y = ctx.input(2);
  if (c.dtype() != DataType::kBool) return ctx.InvalidArgument("condition must be bool");
  if (x.dtype() != y.dtype()) return ctx.InvalidArgument("X and Y differ in type");
  const size_t elem = DataTypeSize(x.dtype());
  if (elem != 1 && elem != 2 && elem != 4 && elem != 8) return ctx.NotSupported("where_cuda: " + DataTypeName(x.dtype()));
  WherePlan plan;
  Shape out;
  SPARQ_RETURN_IF_ERROR(PlanWhere(ctx, c.shape(), x.shape(), y.shape(), &plan, &out));
  SPARQ_ASSIGN_OR_RETURN(Tensor * o, ctx.AllocateOutput(0, x.dtype(), out));
  return LaunchWhere(static_cast<const uint8_t*>(c.raw_data()), x.raw_data(), y.raw_data(), o->raw_data(),
                     static_cast<int>(elem), plan, cuda->stream());
}

// Expand(x, shape): x broadcast to the shape broadcast with x's, as a copy
// whose strides are 0 along the broadcast dimensions.
Status Expand(OpContext& ctx) {
  SPARQ_RETURN_IF_ERROR(ctx.RequireInputs(2));
  SPARQ_RETURN_IF_ERROR(RequireDeviceInput(ctx, 0));
  SPARQ_ASSIGN_OR_RETURN(CudaContext * cuda, CudaContextOf(ctx));
  SPARQ_ASSIGN_OR_RETURN(const std::vector<int64_t> shape, HostInt64s(ctx, 1, "shape"));
  const Tensor& x = ctx.input(0);
  const int rank = static_cast<int>(std::max(shape.size(), x.rank()));
  if (rank > kMaxRank) return ctx.NotSupported("expand_cuda takes up to 8 dimensions");
  PermutePlan plan;
  plan.rank = std::max(rank, 1);
  plan.numel = 1;
  Shape out(static_cast<size_t>(rank), 1);
  int64_t stride = 1;
  for (int d = rank - 1; d >= 0; --d) {
    const int xi = d - (rank - static_cast<int>(x.rank())), si = d - (rank - static_cast<int>(shape.size()));
    const int64_t xd = xi >= 0 ? x.dim(static_cast<size_t>(xi)) : 1, sd = si >= 0 ? shape[static_cast<size_t>(si)] : 1;
    if (xd != sd && xd != 1 && sd != 1) return ctx.InvalidArgument("X of " + ShapeToString(x.shape()) + " does not expand to the shape");
    const int64_t od = xd == 1 ? sd : xd;
    out[static_cast<size_t>(d)] = od;
    plan.out_dims[d] = od;
    plan.in_strides[d] = xd == 1 ? 0 : stride;
    stride *= xd;
    plan.numel *= od;
  }
  if (rank == 0) {
    plan.out_dims[0] = 1;
    plan.in_strides[0] = 0;
  }
  SPARQ_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, x.dtype(), out));
  if (y->numel() == 0) return Status::OK();
  return LaunchPermute(x.raw_data(), y->raw_data(), static_cast<int>(DataTypeSize(x.dtype())), plan, cuda->stream());
}

// ConstantOfShape(shape; value): the value (float32 0 by default) uploaded, then broadcast.
Status ConstantOfShape(OpContext& ctx) {
  SPARQ_ASSIGN_OR_RETURN(CudaContext * cuda, CudaContextOf(ctx));
  SPARQ_ASSIGN_OR_RETURN(const std::vector<int64_t> shape, HostInt64s(ctx, 0, "input"));
  Tensor value = Tensor::Scalar(0.0f);
  if (const Attribute* a = ctx.node().attr("value"); a != nullptr && a->kind == Attribute::Kind::kTensor) value = a->t;
  if (value.numel() != 1) return ctx.InvalidArgument("value must hold one element");
  const size_t elem = DataTypeSize(value.dtype());
  if (elem != 1 && elem != 2 && elem != 4 && elem != 8) return ctx.NotSupported("constant_of_shape_cuda: " + DataTypeName(value.dtype()));
  for (int64_t d : shape)
    if (d < 0) return ctx.InvalidArgument("negative dimension");
  SPARQ_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, value.dtype(), Shape(shape.begin(), shape.end())));
  if (y->numel() == 0) return Status::OK();
  SPARQ_ASSIGN_OR_RETURN(std::shared_ptr<uint8_t> one, Upload(*cuda, value.raw_data(), elem));
  PermutePlan plan;
  plan.rank = 1;
  plan.numel = y->numel();
  plan.out_dims[0] = y->numel();
  plan.in_strides[0] = 0;
  return LaunchPermute(one.get(), y->raw_data(), static_cast<int>(elem), plan, cuda->stream());
}

// Range(start, limit, delta): host scalars; the values computed on the host
// as the reference computes them (its kernel), then uploaded.
Status Range(OpContext& ctx) {
  SPARQ_RETURN_IF_ERROR(ctx.RequireInputs(3));
  SPARQ_ASSIGN_OR_RETURN(CudaContext * cuda, CudaContextOf(ctx));
  for (size_t i = 0; i < 3; ++i) SPARQ_RETURN_IF_ERROR(RequireHost(ctx, i, "Range's inputs"));
  const KernelDef* ref = KernelRegistry::Reference().Find("Range", "", ctx.opset());
  if (ref == nullptr) return ctx.NotSupported("no reference Range kernel");
  OpContext on_host(ctx.node(), ctx.opset(), {&ctx.input(0), &ctx.input(1), &ctx.input(2)}, static_cast<ThreadPool*>(nullptr));
  SPARQ_RETURN_IF_ERROR(ref->fn(on_host));
  const Tensor& values = on_host.outputs()[0];
  SPARQ_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, values.dtype(), values.shape()));
  if (values.nbytes() == 0) return Status::OK();
  return cuda->CopyFromHost(values.raw_data(), y->raw_data(), values.nbytes());
}

}  // namespace

void RegisterCudaMaskRows(KernelRegistry& r) {
  r.Add(CudaRow("Equal", "", 7, WithHostFallback<Logic<LogicOp::kEqual>>, "compare_cuda", PrepareCompare));
  r.Add(CudaRow("Greater", "", 7, WithHostFallback<Logic<LogicOp::kGreater>>, "compare_cuda", PrepareCompare));
  r.Add(CudaRow("GreaterOrEqual", "", 12, WithHostFallback<Logic<LogicOp::kGreaterOrEqual>>, "compare_cuda", PrepareCompare));
  r.Add(CudaRow("Less", "", 7, WithHostFallback<Logic<LogicOp::kLess>>, "compare_cuda", PrepareCompare));
  r.Add(CudaRow("LessOrEqual", "", 12, WithHostFallback<Logic<LogicOp::kLessOrEqual>>, "compare_cuda", PrepareCompare));
  r.Add(CudaRow("And", "", 7, WithHostFallback<Logic<LogicOp::kAnd>>, "logic_cuda", PrepareCompare));
  r.Add(CudaRow("Or", "", 7, WithHostFallback<Logic<LogicOp::kOr>>, "logic_cuda", PrepareCompare));
  r.Add(CudaRow("Xor", "", 7, WithHostFallback<Logic<LogicOp::kXor>>, "logic_cuda", PrepareCompare));
  r.Add(CudaRow("Where", "", 9, WithHostFallback<Where>, "where_cuda"));
  r.Add(CudaRow("Expand", "", 8, WithHostFallback<Expand>, "expand_cuda", nullptr, HostInput(1)));
  r.Add(CudaRow("ConstantOfShape", "", 9, WithHostFallback<ConstantOfShape>, "constant_of_shape_cuda", nullptr, HostInput(0)));
  r.Add(CudaRow("Range", "", 11, WithHostFallback<Range>, "range_cuda", nullptr, HostInput(0) | HostInput(1) | HostInput(2)));
}

}  // namespace cuda
}  // namespace sparq
