// CUDA rows that move data without arithmetic: Shape, the aliases (Reshape,
// Flatten, Squeeze, Unsqueeze, Identity), Transpose, Concat, Slice, Split and
// Gather (cuda_rows.h lists them). Any element type.
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

// ---------------------------------------------------------------------------
// Shape-only operators: the output shares the input's device buffer.

Status SetAlias(OpContext& ctx, Shape shape) {
  SPARQ_RETURN_IF_ERROR(RequireDeviceInput(ctx, 0));
  StatusOr<Tensor> t = ctx.input(0).Reshaped(std::move(shape));
  if (!t.ok()) return t.status().WithContext(ctx.node().Describe());
  ctx.set_output(0, std::move(*t));
  return Status::OK();
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

// Resize (opset 11 on) with mode nearest, asymmetric coordinates and floor
// rounding by whole factors on the last two axes of a 4-D tensor (the 2x
// upsampling of YOLO's necks), as kernels/cpu/resize_nearest.cc takes it:
// a copy, any element type but 16-bit floats. Anything else: NotSupported,
// which the host fallback runs on the reference kernel.
Status CheckResize(const Node& node, const std::vector<const Tensor*>&) {
  if (node.attr_string("mode", "nearest") != "nearest" ||
      node.attr_string("coordinate_transformation_mode", "half_pixel") != "asymmetric" ||
      node.attr_string("nearest_mode", "round_prefer_floor") != "floor" || node.attr("axes") != nullptr ||
      node.attr_int("antialias", 0) != 0 || node.attr_string("keep_aspect_ratio_policy", "stretch") != "stretch") {
    return Status::NotSupported(node.Describe() + ": resize_nearest_cuda takes nearest / asymmetric / floor only");
  }
  return Status::OK();
}

Status ResizeNearest(OpContext& ctx) {
  if (!ctx.has_input(0) || !ctx.has_input(2) || ctx.has_input(3) || ctx.input(0).rank() != 4) {
    return ctx.NotSupported("resize_nearest_cuda takes a 4-D X and scales (no sizes)");
  }
  SPARQ_RETURN_IF_ERROR(RequireDeviceInput(ctx, 0));
  SPARQ_RETURN_IF_ERROR(RequireHost(ctx, 2, "scales"));
  SPARQ_ASSIGN_OR_RETURN(CudaContext * cuda, CudaContextOf(ctx));
  const Tensor& x = ctx.input(0);
  const Tensor& scales = ctx.input(2);
  const size_t elem = DataTypeSize(x.dtype());
  if (scales.dtype() != DataType::kFloat32 || scales.numel() != 4 || (elem != 1 && elem != 2 && elem != 4 && elem != 8) ||
      x.dtype() == DataType::kFloat16 || x.dtype() == DataType::kBFloat16) {
    return ctx.NotSupported("resize_nearest_cuda: float32 scales [4] and 8 / 32 / 64-bit elements only");
  }
  const float* s = scales.data<float>();
  const auto sh = static_cast<int64_t>(s[2]), sw = static_cast<int64_t>(s[3]);
  if (s[0] != 1.0f || s[1] != 1.0f || sh < 1 || sw < 1 || s[2] != static_cast<float>(sh) ||
      s[3] != static_cast<float>(sw) || sh > 64 || sw > 64) {
    return ctx.NotSupported("resize_nearest_cuda takes whole factors on the last two axes only");
  }
  SPARQ_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, x.dtype(), {x.dim(0), x.dim(1), x.dim(2) * sh, x.dim(3) * sw}));
  return LaunchResizeNearest(x.raw_data(), y->raw_data(), static_cast<int>(elem), x.dim(0) * x.dim(1), x.dim(2),
                             x.dim(3), sh, sw, cuda->stream());
}

}  // namespace

void RegisterCudaLayoutRows(KernelRegistry& r) {
  // Shape reads only its input's dimensions: taking it here keeps a device
  // tensor from being copied to the host just to be measured.
  r.Add(CudaRow("Shape", "", 1, WithHostFallback<ShapeOf>, "shape_cuda"));
  r.Add(CudaRow("Reshape", "", 5, WithHostFallback<Reshape>, "reshape_alias", nullptr, HostInput(1)));
  r.Add(CudaRow("Flatten", "", 1, WithHostFallback<Flatten>, "flatten_alias"));
  r.Add(CudaRow("Squeeze", "", 1, WithHostFallback<Squeeze>, "squeeze_alias", nullptr, HostInput(1)));
  r.Add(CudaRow("Unsqueeze", "", 1, WithHostFallback<Unsqueeze>, "unsqueeze_alias", nullptr, HostInput(1)));
  r.Add(CudaRow("Identity", "", 1, WithHostFallback<Identity>, "identity_alias"));
  r.Add(CudaRow("Transpose", "", 1, WithHostFallback<Transpose>, "transpose_cuda"));
  r.Add(CudaRow("Concat", "", 4, WithHostFallback<Concat>, "concat_cuda"));
  r.Add(CudaRow("Split", "", 2, WithHostFallback<Split>, "split_cuda", nullptr, HostInput(1)));
  r.Add(CudaRow("Slice", "", 1, WithHostFallback<Slice>, "slice_cuda", nullptr, HostInput(1) | HostInput(2) | HostInput(3) | HostInput(4)));
  r.Add(CudaRow("Resize", "", 11, WithHostFallback<ResizeNearest>, "resize_nearest_cuda", CheckOnly(CheckResize),
                HostInput(1) | HostInput(2) | HostInput(3)));
  r.Add(CudaRow("Gather", "", 1, WithHostFallback<Gather>, "gather_cuda", nullptr, HostInput(1)));
}

}  // namespace cuda
}  // namespace sparq
