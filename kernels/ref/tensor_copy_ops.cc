// Reference kernels that copy blocks or strided views of their inputs:
// Concat, Split, Slice, Transpose, Pad, Tile, DepthToSpace, SpaceToDepth.
//
// All of them work on raw bytes, so every data type is handled at once.
// Most reduce to StridedCopy: the output is a strided view of the input.
#include <algorithm>
#include <limits>

#include "kernels/ref/tensor_util.h"

namespace sparq {
namespace {

using namespace tensor_ops;  // NOLINT: this file's own helpers

// ---------------------------------------------------------------------------
// Concat

Status Concat(OpContext& ctx) {
  if (ctx.num_inputs() == 0) return ctx.InvalidArgument("needs at least one input");
  SPARQ_RETURN_IF_ERROR(ctx.RequireInputs(ctx.num_inputs()));
  const Tensor& first = ctx.input(0);
  const int64_t rank = static_cast<int64_t>(first.rank());
  if (rank == 0) return ctx.InvalidArgument("cannot concatenate scalars");
  // Opset 1 defaulted the axis to 1; later opsets require it.
  const Attribute* axis_attr = ctx.node().attr("axis");
  if (axis_attr == nullptr && ctx.opset() >= 4) return ctx.InvalidArgument("attribute 'axis' is required");
  SPARQ_ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(ctx, ctx.node().attr_int("axis", 1), rank));
  Shape out_shape = first.shape();
  out_shape[axis] = 0;
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    const Tensor& t = ctx.input(i);
    bool same = t.dtype() == first.dtype() && static_cast<int64_t>(t.rank()) == rank;
    for (int64_t d = 0; same && d < rank; ++d) same = d == axis || t.dim(d) == first.dim(d);
    if (!same) {
      return ctx.InvalidArgument("input " + std::to_string(i) + " (" + DataTypeName(t.dtype()) +
                                 ShapeToString(t.shape()) + ") does not match input 0 (" +
                                 DataTypeName(first.dtype()) + ShapeToString(first.shape()) +
                                 ") outside axis " + std::to_string(axis));
    }
    out_shape[axis] += t.dim(axis);
  }
  Tensor y(first.dtype(), out_shape);
  const size_t esize = DataTypeSize(first.dtype());
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= out_shape[d];
  for (int64_t d = axis + 1; d < rank; ++d) inner *= out_shape[d];
  const size_t out_block = static_cast<size_t>(out_shape[axis] * inner) * esize;
  auto* out = static_cast<uint8_t*>(y.raw_data());
  const int64_t grain = std::max<int64_t>(1, (int64_t{1} << 16) / std::max<int64_t>(1, out_block));
  ParallelFor(ctx.pool(), outer, grain, [&](int64_t begin, int64_t end) {
    for (int64_t o = begin; o < end; ++o) {
      uint8_t* dst = out + o * out_block;
      for (size_t i = 0; i < ctx.num_inputs(); ++i) {
        const Tensor& t = ctx.input(i);
        const size_t block = static_cast<size_t>(t.dim(axis) * inner) * esize;
        if (block == 0) continue;
        std::memcpy(dst, static_cast<const uint8_t*>(t.raw_data()) + o * block, block);
        dst += block;
      }
    }
  });
  ctx.set_output(0, std::move(y));
  return Status::OK();
}

// ---------------------------------------------------------------------------
// Split

// Copies x[..., start:start+size, ...] (along `axis`) into a new tensor.
Tensor SliceAlongAxis(const Tensor& x, int64_t axis, int64_t start, int64_t size, ThreadPool* pool) {
  Shape shape = x.shape();
  shape[axis] = size;
  Tensor y(x.dtype(), shape);
  const std::vector<int64_t> strides = ContiguousStrides(x.shape());
  const size_t esize = DataTypeSize(x.dtype());
  const auto* src = static_cast<const uint8_t*>(x.raw_data()) + start * strides[axis] * esize;
  StridedCopy(src, strides, shape, y.raw_data(), esize, pool);
  return y;
}

}  // namespace

namespace tensor_ops {

StatusOr<std::vector<int64_t>> SplitSizes(const OpContext& ctx, int64_t axis) {
  const Tensor& x = ctx.input(0);
  const Node& node = ctx.node();
  const int64_t dim = x.dim(axis);
  int64_t n = static_cast<int64_t>(ctx.num_outputs());
  // Split sizes: input 1 from opset 13 (and optionally in opset 1), else the attribute.
  std::vector<int64_t> split;
  bool have_split = false;
  if ((ctx.opset() >= 13 || ctx.opset() == 1) && ctx.has_input(1)) {
    SPARQ_ASSIGN_OR_RETURN(split, ReadIntInput(ctx, 1, "split"));
    have_split = true;
  } else if (ctx.opset() < 13 && node.attr("split") != nullptr) {
    split = node.attr_ints("split");
    have_split = true;
  }
  if (ctx.opset() >= 18 && node.attr("num_outputs") != nullptr) {
    if (have_split) return ctx.InvalidArgument("give either the split input or the num_outputs attribute, not both");
    n = node.attr_int("num_outputs", n);
    if (n != static_cast<int64_t>(ctx.num_outputs())) {
      return ctx.InvalidArgument("num_outputs is " + std::to_string(n) + " but the node has " +
                                 std::to_string(ctx.num_outputs()) + " outputs");
    }
  }
  if (n <= 0) return ctx.InvalidArgument("needs at least one output");
  if (have_split) {
    int64_t sum = 0;
    bool negative = false;
    for (int64_t s : split) {
      negative = negative || s < 0;
      sum += s;
    }
    if (static_cast<int64_t>(split.size()) != n || negative || sum != dim) {
      return ctx.InvalidArgument("split " + ValuesToString(split) + " must have " + std::to_string(n) +
                                 " non-negative sizes summing to " + std::to_string(dim) + " (axis " +
                                 std::to_string(axis) + " of shape " + ShapeToString(x.shape()) + ")");
    }
  } else if (dim % n == 0) {
    split.assign(n, dim / n);
  } else if (ctx.opset() >= 18) {
    // Uneven split (opset 18): chunks of ceil(dim / n), the last one smaller.
    const int64_t chunk = (dim + n - 1) / n;
    split.assign(n, chunk);
    split.back() = dim - chunk * (n - 1);
    if (split.back() < 0) {
      return ctx.InvalidArgument("cannot split dimension " + std::to_string(dim) + " into " + std::to_string(n) +
                                 " chunks of " + std::to_string(chunk));
    }
  } else {
    return ctx.InvalidArgument("axis " + std::to_string(axis) + " of shape " + ShapeToString(x.shape()) +
                               " cannot be split evenly into " + std::to_string(n) + " outputs");
  }
  return split;
}

// ---------------------------------------------------------------------------
// Slice's geometry (the reference kernel below and kernels/cpu's slice_copy)

namespace {

StatusOr<SliceGeometry> SliceGeometryFrom(const OpContext& ctx, const std::vector<int64_t>& starts,
                                          const std::vector<int64_t>& ends, std::vector<int64_t> axes,
                                          std::vector<int64_t> steps) {
  const Tensor& x = ctx.input(0);
  const int64_t rank = static_cast<int64_t>(x.rank());
  const size_t n = starts.size();
  if (axes.empty()) {
    for (size_t i = 0; i < n; ++i) axes.push_back(static_cast<int64_t>(i));
  }
  if (steps.empty()) steps.assign(n, 1);
  if (ends.size() != n || axes.size() != n || steps.size() != n) {
    return ctx.InvalidArgument("starts " + ValuesToString(starts) + ", ends " + ValuesToString(ends) + ", axes " +
                               ValuesToString(axes) + " and steps " + ValuesToString(steps) +
                               " must have the same length");
  }
  SliceGeometry g;
  g.shape = x.shape();
  g.first.assign(rank, 0);
  g.step.assign(rank, 1);
  std::vector<bool> seen(rank, false);
  for (size_t i = 0; i < n; ++i) {
    SPARQ_ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(ctx, axes[i], rank, "axes value"));
    if (seen[axis]) return ctx.InvalidArgument("axes " + ValuesToString(axes) + " repeat axis " + std::to_string(axis));
    seen[axis] = true;
    if (steps[i] == 0) return ctx.InvalidArgument("steps " + ValuesToString(steps) + " contain a zero");
    const int64_t dim = x.dim(axis);
    int64_t s = starts[i], e = ends[i];
    if (s < 0) s += dim;
    if (e < 0) e += dim;
    int64_t count;
    // Written to avoid overflow for steps near the int64 limits.
    if (dim == 0) {
      count = 0;
    } else if (steps[i] > 0) {
      s = std::clamp<int64_t>(s, 0, dim);
      e = std::clamp<int64_t>(e, 0, dim);
      count = e > s ? 1 + (e - s - 1) / steps[i] : 0;
    } else {
      s = std::clamp<int64_t>(s, 0, dim - 1);
      e = std::clamp<int64_t>(e, -1, dim - 1);
      const int64_t stride = steps[i] == std::numeric_limits<int64_t>::min() ? std::numeric_limits<int64_t>::max()
                                                                              : -steps[i];
      count = s > e ? 1 + (s - e - 1) / stride : 0;
    }
    g.shape[axis] = count;
    g.first[axis] = count > 0 ? s : 0;
    g.step[axis] = count > 1 ? steps[i] : 1;  // a single element needs no step
  }
  g.whole = g.shape == x.shape();
  for (int64_t d = 0; d < rank && g.whole; ++d) g.whole = g.first[d] == 0 && g.step[d] == 1;
  return g;
}

}  // namespace

StatusOr<SliceGeometry> SliceGeometryOf(const OpContext& ctx) {
  const Node& node = ctx.node();
  if (ctx.opset() < 10) {  // opset 1-9: starts, ends and axes are attributes; no steps
    SPARQ_RETURN_IF_ERROR(ctx.RequireInputs(1));
    if (node.attr("starts") == nullptr || node.attr("ends") == nullptr) {
      return ctx.InvalidArgument("attributes 'starts' and 'ends' are required");
    }
    return SliceGeometryFrom(ctx, node.attr_ints("starts"), node.attr_ints("ends"), node.attr_ints("axes"), {});
  }
  // Opset 10+: starts, ends, axes (optional), steps (optional) are inputs.
  SPARQ_RETURN_IF_ERROR(ctx.RequireInputs(3));
  SPARQ_ASSIGN_OR_RETURN(std::vector<int64_t> starts, ReadIntInput(ctx, 1, "starts"));
  SPARQ_ASSIGN_OR_RETURN(std::vector<int64_t> ends, ReadIntInput(ctx, 2, "ends"));
  std::vector<int64_t> axes, steps;
  if (ctx.has_input(3)) {
    SPARQ_ASSIGN_OR_RETURN(axes, ReadIntInput(ctx, 3, "axes"));
    if (axes.size() != starts.size()) {
      return ctx.InvalidArgument("axes " + ValuesToString(axes) + " and starts " + ValuesToString(starts) +
                                 " differ in length");
    }
  }
  if (ctx.has_input(4)) {
    SPARQ_ASSIGN_OR_RETURN(steps, ReadIntInput(ctx, 4, "steps"));
    if (steps.size() != starts.size()) {
      return ctx.InvalidArgument("steps " + ValuesToString(steps) + " and starts " + ValuesToString(starts) +
                                 " differ in length");
    }
  }
  return SliceGeometryFrom(ctx, starts, ends, axes, steps);
}

void CopySlice(const Tensor& x, const SliceGeometry& g, void* dst, ThreadPool* pool) {
  if (NumElements(g.shape) == 0) return;
  const std::vector<int64_t> in_strides = ContiguousStrides(x.shape());
  std::vector<int64_t> strides(in_strides.size());
  int64_t offset = 0;
  for (size_t d = 0; d < in_strides.size(); ++d) {
    strides[d] = in_strides[d] * g.step[d];
    offset += g.first[d] * in_strides[d];
  }
  const size_t esize = DataTypeSize(x.dtype());
  StridedCopy(static_cast<const uint8_t*>(x.raw_data()) + offset * esize, strides, g.shape, dst, esize, pool);
}

}  // namespace tensor_ops

namespace {

Status Split(OpContext& ctx) {
  SPARQ_RETURN_IF_ERROR(ctx.RequireInputs(1));
  const Tensor& x = ctx.input(0);
  SPARQ_ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(ctx, ctx.node().attr_int("axis", 0), static_cast<int64_t>(x.rank())));
  SPARQ_ASSIGN_OR_RETURN(std::vector<int64_t> split, SplitSizes(ctx, axis));
  const int64_t n = static_cast<int64_t>(split.size());
  int64_t start = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (ctx.wants_output(i)) ctx.set_output(i, SliceAlongAxis(x, axis, start, split[i], ctx.pool()));
    start += split[i];
  }
  return Status::OK();
}

// ---------------------------------------------------------------------------
// Slice

// The whole input, in order (jax2tf's strided_slice with ends past every
// dimension): the output is the input's buffer, as Identity's, not a copy.
Status Slice(OpContext& ctx) {
  SPARQ_ASSIGN_OR_RETURN(SliceGeometry g, SliceGeometryOf(ctx));
  const Tensor& x = ctx.input(0);
  if (g.whole) {
    ctx.set_output(0, x);
    return Status::OK();
  }
  Tensor y(x.dtype(), g.shape);
  CopySlice(x, g, y.raw_data(), ctx.pool());
  ctx.set_output(0, std::move(y));
  return Status::OK();
}

// ---------------------------------------------------------------------------
// Transpose

Status Transpose(OpContext& ctx) {
  SPARQ_RETURN_IF_ERROR(ctx.RequireInputs(1));
  const Tensor& x = ctx.input(0);
  const int64_t rank = static_cast<int64_t>(x.rank());
  std::vector<int64_t> perm = ctx.node().attr_ints("perm");
  if (ctx.node().attr("perm") == nullptr) {  // default: reverse the dimensions
    for (int64_t d = rank; d-- > 0;) perm.push_back(d);
  }
  std::vector<bool> used(rank, false);
  bool valid = static_cast<int64_t>(perm.size()) == rank;
  for (size_t i = 0; valid && i < perm.size(); ++i) {
    int64_t p = perm[i] < 0 ? perm[i] + rank : perm[i];
    valid = p >= 0 && p < rank && !used[p];
    if (valid) used[p] = true;
    perm[i] = p;
  }
  if (!valid) {
    return ctx.InvalidArgument("perm " + ValuesToString(ctx.node().attr_ints("perm")) +
                               " is not a permutation of the dimensions of shape " + ShapeToString(x.shape()));
  }
  const std::vector<int64_t> in_strides = ContiguousStrides(x.shape());
  Shape out_shape(rank);
  std::vector<int64_t> strides(rank);
  for (int64_t d = 0; d < rank; ++d) {
    out_shape[d] = x.dim(perm[d]);
    strides[d] = in_strides[perm[d]];
  }
  Tensor y(x.dtype(), out_shape);
  StridedCopy(x.raw_data(), strides, out_shape, y.raw_data(), DataTypeSize(x.dtype()), ctx.pool());
  ctx.set_output(0, std::move(y));
  return Status::OK();
}

// ---------------------------------------------------------------------------
// Pad

enum class PadMode { kConstant, kReflect, kEdge, kWrap };

// For each index along one output dimension, the source index along the
// input dimension of size `n`, or -1 where the constant value goes.
std::vector<int64_t> PadSourceIndices(PadMode mode, int64_t n, int64_t pad_begin, int64_t out_n) {
  std::vector<int64_t> src(out_n);
  for (int64_t o = 0; o < out_n; ++o) {
    const int64_t i = o - pad_begin;  // position in input coordinates
    int64_t s = -1;  // kConstant outside the input
    switch (mode) {
      case PadMode::kConstant: s = (i >= 0 && i < n) ? i : -1; break;
      case PadMode::kEdge: s = std::clamp<int64_t>(i, 0, n - 1); break;
      case PadMode::kWrap: s = ((i % n) + n) % n; break;
      case PadMode::kReflect: {
        // Mirror without repeating the edge: period 2(n-1).
        if (n == 1) {
          s = 0;
          break;
        }
        const int64_t period = 2 * (n - 1);
        s = ((i % period) + period) % period;
        if (s >= n) s = period - s;
        break;
      }
    }
    src[o] = s;
  }
  return src;
}

// Pads (or crops, for negative pads) x. pads: [begin_0..begin_r, end_0..end_r].
Status PadImpl(OpContext& ctx, const std::vector<int64_t>& pads, const std::string& mode_name,
               const std::vector<uint8_t>& value) {
  const Tensor& x = ctx.input(0);
  int64_t rank = static_cast<int64_t>(x.rank());
  if (static_cast<int64_t>(pads.size()) != 2 * rank) {
    return ctx.InvalidArgument("pads " + ValuesToString(pads) + " must have 2 * rank = " + std::to_string(2 * rank) +
                               " values for input of shape " + ShapeToString(x.shape()));
  }
  PadMode mode;
  if (mode_name == "constant") mode = PadMode::kConstant;
  else if (mode_name == "reflect") mode = PadMode::kReflect;
  else if (mode_name == "edge") mode = PadMode::kEdge;
  else if (mode_name == "wrap") mode = PadMode::kWrap;
  else return ctx.InvalidArgument("unknown mode '" + mode_name + "' (constant, reflect, edge, wrap)");
  for (int64_t p : pads) {
    if (p > kMaxOutputBytes || p < -kMaxOutputBytes) {
      return ctx.InvalidArgument("pads " + ValuesToString(pads) + " hold an implausibly large value");
    }
  }
  Shape out_shape(rank);
  for (int64_t d = 0; d < rank; ++d) {
    out_shape[d] = x.dim(d) + pads[d] + pads[d + rank];
    if (out_shape[d] < 0) {
      return ctx.InvalidArgument("pads " + ValuesToString(pads) + " crop more than dimension " + std::to_string(d) +
                                 " of shape " + ShapeToString(x.shape()) + " holds");
    }
    if (mode != PadMode::kConstant && x.dim(d) == 0 && out_shape[d] > 0) {
      return ctx.InvalidArgument("cannot " + mode_name + "-pad empty dimension " + std::to_string(d) + " of shape " +
                                 ShapeToString(x.shape()));
    }
  }
  SPARQ_RETURN_IF_ERROR(CheckOutputShape(ctx, out_shape, x.dtype(), "output shape"));
  Tensor y(x.dtype(), out_shape);
  if (y.numel() == 0) {
    ctx.set_output(0, std::move(y));
    return Status::OK();
  }
  size_t esize = DataTypeSize(x.dtype());
  if (rank == 0) {
    std::memcpy(y.raw_data(), x.raw_data(), esize);
    ctx.set_output(0, std::move(y));
    return Status::OK();
  }
  // The dimensions after the last padded one are copied whole: they count as
  // one wider element (a [1, 1, T, 1] padded along T copies runs of T, not
  // one value per row).
  std::vector<uint8_t> wide_value = value;
  Shape in_shape = x.shape();
  const int64_t full_rank = rank;
  while (rank > 1 && pads[rank - 1] == 0 && pads[rank - 1 + full_rank] == 0) {
    const int64_t n = in_shape[rank - 1];
    esize *= static_cast<size_t>(n);
    std::vector<uint8_t> wider;
    for (int64_t i = 0; i < n; ++i) wider.insert(wider.end(), wide_value.begin(), wide_value.end());
    wide_value = std::move(wider);
    in_shape.pop_back();
    out_shape.pop_back();
    --rank;
  }
  std::vector<std::vector<int64_t>> src_index(rank);
  for (int64_t d = 0; d < rank; ++d) src_index[d] = PadSourceIndices(mode, in_shape[d], pads[d], out_shape[d]);
  // The last dimension as runs: consecutive source indices copy in one memcpy.
  struct Run {
    int64_t out_start, length, src_start;  // src_start -1: constant
  };
  std::vector<Run> runs;
  const std::vector<int64_t>& last = src_index[rank - 1];
  for (int64_t j = 0; j < static_cast<int64_t>(last.size()); ++j) {
    if (!runs.empty()) {
      Run& r = runs.back();
      const bool extends = r.src_start < 0 ? last[j] < 0 : last[j] == r.src_start + r.length;
      if (extends) {
        ++r.length;
        continue;
      }
    }
    runs.push_back({j, 1, last[j]});
  }
  const std::vector<int64_t> in_strides = ContiguousStrides(in_shape);
  const int64_t inner = out_shape[rank - 1];
  int64_t rows = 1;
  for (int64_t d = 0; d + 1 < rank; ++d) rows *= out_shape[d];
  const auto* in = static_cast<const uint8_t*>(x.raw_data());
  auto* out = static_cast<uint8_t*>(y.raw_data());
  const int64_t grain = std::max<int64_t>(1, (int64_t{1} << 14) / inner);
  ParallelFor(ctx.pool(), rows, grain, [&](int64_t begin, int64_t end) {
    std::vector<int64_t> idx(rank - 1);
    for (int64_t row = begin; row < end; ++row) {
      int64_t rest = row, offset = 0;
      bool constant_row = false;
      for (int64_t d = rank - 1; d-- > 0;) {
        idx[d] = rest % out_shape[d];
        rest /= out_shape[d];
        const int64_t s = src_index[d][idx[d]];
        if (s < 0) constant_row = true;
        offset += s * in_strides[d];
      }
      uint8_t* dst = out + row * inner * esize;
      if (constant_row) {
        FillElements(dst, wide_value.data(), inner, esize);
        continue;
      }
      for (const Run& r : runs) {
        if (r.src_start < 0) {
          FillElements(dst + r.out_start * esize, wide_value.data(), r.length, esize);
        } else {
          std::memcpy(dst + r.out_start * esize, in + (offset + r.src_start) * esize, r.length * esize);
        }
      }
    }
  });
  ctx.set_output(0, std::move(y));
  return Status::OK();
}

// Opset 1-10: pads ("paddings" in opset 1) and value are attributes.
Status Pad1(OpContext& ctx) {
  SPARQ_RETURN_IF_ERROR(ctx.RequireInputs(1));
  const Node& node = ctx.node();
  const char* pads_name = ctx.opset() == 1 ? "paddings" : "pads";
  if (node.attr(pads_name) == nullptr) return ctx.InvalidArgument(std::string("attribute '") + pads_name + "' is required");
  const DataType type = ctx.input(0).dtype();
  return PadImpl(ctx, node.attr_ints(pads_name), node.attr_string("mode", "constant"),
                 ScalarBytes(node.attr_float("value", 0.0f), type));
}

// Opset 11+: pads, constant_value (optional) and axes (optional, opset 18) are inputs.
Status Pad11(OpContext& ctx) {
  SPARQ_RETURN_IF_ERROR(ctx.RequireInputs(2));
  const Tensor& x = ctx.input(0);
  const int64_t rank = static_cast<int64_t>(x.rank());
  SPARQ_ASSIGN_OR_RETURN(std::vector<int64_t> pads, ReadIntInput(ctx, 1, "pads"));
  std::vector<uint8_t> value = ScalarBytes(0.0, x.dtype());
  if (ctx.has_input(2) && ctx.input(2).numel() > 0) {
    const Tensor v = ctx.input(2).dtype() == x.dtype() ? ctx.input(2) : ctx.input(2).CastTo(x.dtype());
    const auto* p = static_cast<const uint8_t*>(v.raw_data());
    value.assign(p, p + DataTypeSize(x.dtype()));
  }
  if (ctx.opset() >= 18 && ctx.has_input(3)) {
    // pads covers only the listed axes: expand it to all dimensions.
    SPARQ_ASSIGN_OR_RETURN(std::vector<int64_t> axes, ReadIntInput(ctx, 3, "axes"));
    const int64_t k = static_cast<int64_t>(axes.size());
    if (static_cast<int64_t>(pads.size()) != 2 * k) {
      return ctx.InvalidArgument("pads " + ValuesToString(pads) + " must have 2 * " + std::to_string(k) +
                                 " values for axes " + ValuesToString(axes));
    }
    std::vector<int64_t> full(2 * rank, 0);
    std::vector<bool> seen(rank, false);
    for (int64_t i = 0; i < k; ++i) {
      SPARQ_ASSIGN_OR_RETURN(int64_t a, NormalizeAxis(ctx, axes[i], rank, "axes value"));
      if (seen[a]) return ctx.InvalidArgument("axes " + ValuesToString(axes) + " repeat axis " + std::to_string(a));
      seen[a] = true;
      full[a] = pads[i];
      full[a + rank] = pads[i + k];
    }
    pads = std::move(full);
  }
  return PadImpl(ctx, pads, ctx.node().attr_string("mode", "constant"), value);
}

// ---------------------------------------------------------------------------
// Tile

Status TileImpl(OpContext& ctx, const std::vector<int64_t>& repeats) {
  const Tensor& x = ctx.input(0);
  const size_t rank = x.rank();
  if (repeats.size() != rank) {
    return ctx.InvalidArgument("repeats " + ValuesToString(repeats) + " must have one value per dimension of shape " +
                               ShapeToString(x.shape()));
  }
  // The output read as shape [r0, d0, r1, d1, ...] is x with stride 0 on each r.
  const std::vector<int64_t> in_strides = ContiguousStrides(x.shape());
  Shape out_shape(rank), view_shape;
  std::vector<int64_t> view_strides;
  for (size_t d = 0; d < rank; ++d) {
    if (repeats[d] < 0) return ctx.InvalidArgument("repeats " + ValuesToString(repeats) + " contain a negative value");
    view_shape.insert(view_shape.end(), {repeats[d], x.dim(d)});
    view_strides.insert(view_strides.end(), {0, in_strides[d]});
  }
  SPARQ_RETURN_IF_ERROR(CheckOutputShape(ctx, view_shape, x.dtype(), "output shape"));
  for (size_t d = 0; d < rank; ++d) out_shape[d] = x.dim(d) * repeats[d];
  Tensor y(x.dtype(), out_shape);
  StridedCopy(x.raw_data(), view_strides, view_shape, y.raw_data(), DataTypeSize(x.dtype()), ctx.pool());
  ctx.set_output(0, std::move(y));
  return Status::OK();
}

// Opset 1-5: inputs (input, tiles, axis) repeat one axis `tiles` times.
Status Tile1(OpContext& ctx) {
  SPARQ_RETURN_IF_ERROR(ctx.RequireInputs(3));
  SPARQ_ASSIGN_OR_RETURN(std::vector<int64_t> tiles, ReadIntInput(ctx, 1, "tiles"));
  SPARQ_ASSIGN_OR_RETURN(std::vector<int64_t> axis, ReadIntInput(ctx, 2, "axis"));
  if (tiles.size() != 1 || axis.size() != 1) return ctx.InvalidArgument("tiles and axis must be scalars");
  const int64_t rank = static_cast<int64_t>(ctx.input(0).rank());
  SPARQ_ASSIGN_OR_RETURN(int64_t a, NormalizeAxis(ctx, axis[0], rank));
  std::vector<int64_t> repeats(rank, 1);
  repeats[a] = tiles[0];
  return TileImpl(ctx, repeats);
}

// Opset 6+: input 1 holds one repeat count per dimension.
Status Tile6(OpContext& ctx) {
  SPARQ_RETURN_IF_ERROR(ctx.RequireInputs(2));
  SPARQ_ASSIGN_OR_RETURN(std::vector<int64_t> repeats, ReadIntInput(ctx, 1, "repeats"));
  return TileImpl(ctx, repeats);
}

// ---------------------------------------------------------------------------
// DepthToSpace, SpaceToDepth: a reshape to 6-D, a transpose and a reshape back.

// Writes y (shape out_shape) as the transpose `perm` of x viewed as `view`.
void CopyPermutedView(const Tensor& x, const Shape& view, const std::vector<int64_t>& perm, Tensor& y,
                      ThreadPool* pool) {
  const std::vector<int64_t> view_strides = ContiguousStrides(view);
  Shape shape(perm.size());
  std::vector<int64_t> strides(perm.size());
  for (size_t d = 0; d < perm.size(); ++d) {
    shape[d] = view[perm[d]];
    strides[d] = view_strides[perm[d]];
  }
  StridedCopy(x.raw_data(), strides, shape, y.raw_data(), DataTypeSize(x.dtype()), pool);
}

Status CheckBlockInput(const OpContext& ctx, const Tensor& x, int64_t* block) {
  if (ctx.node().attr("blocksize") == nullptr) return ctx.InvalidArgument("attribute 'blocksize' is required");
  *block = ctx.node().attr_int("blocksize", 0);
  if (*block <= 0) return ctx.InvalidArgument("blocksize must be positive, got " + std::to_string(*block));
  if (x.rank() != 4) return ctx.InvalidArgument("input must be 4-D (N, C, H, W), has shape " + ShapeToString(x.shape()));
  return Status::OK();
}

Status DepthToSpace(OpContext& ctx) {
  SPARQ_RETURN_IF_ERROR(ctx.RequireInputs(1));
  const Tensor& x = ctx.input(0);
  int64_t b = 0;
  SPARQ_RETURN_IF_ERROR(CheckBlockInput(ctx, x, &b));
  const int64_t n = x.dim(0), c = x.dim(1), h = x.dim(2), w = x.dim(3);
  if (c % (b * b) != 0) {
    return ctx.InvalidArgument("channels " + std::to_string(c) + " are not a multiple of blocksize^2 = " +
                               std::to_string(b * b));
  }
  const std::string mode = ctx.opset() >= 11 ? ctx.node().attr_string("mode", "DCR") : "DCR";
  Tensor y(x.dtype(), {n, c / (b * b), h * b, w * b});
  if (mode == "DCR") {
    CopyPermutedView(x, {n, b, b, c / (b * b), h, w}, {0, 3, 4, 1, 5, 2}, y, ctx.pool());
  } else if (mode == "CRD") {
    CopyPermutedView(x, {n, c / (b * b), b, b, h, w}, {0, 1, 4, 2, 5, 3}, y, ctx.pool());
  } else {
    return ctx.InvalidArgument("unknown mode '" + mode + "' (DCR or CRD)");
  }
  ctx.set_output(0, std::move(y));
  return Status::OK();
}

Status SpaceToDepth(OpContext& ctx) {
  SPARQ_RETURN_IF_ERROR(ctx.RequireInputs(1));
  const Tensor& x = ctx.input(0);
  int64_t b = 0;
  SPARQ_RETURN_IF_ERROR(CheckBlockInput(ctx, x, &b));
  const int64_t n = x.dim(0), c = x.dim(1), h = x.dim(2), w = x.dim(3);
  if (h % b != 0 || w % b != 0) {
    return ctx.InvalidArgument("height and width of shape " + ShapeToString(x.shape()) +
                               " are not multiples of blocksize " + std::to_string(b));
  }
  // `mode` arrived in opset 28; before it the layout is always DCR.
  const std::string mode = ctx.node().attr_string("mode", "DCR");
  Tensor y(x.dtype(), {n, c * b * b, h / b, w / b});
  if (mode == "DCR") {
    CopyPermutedView(x, {n, c, h / b, b, w / b, b}, {0, 3, 5, 1, 2, 4}, y, ctx.pool());
  } else if (mode == "CRD") {
    CopyPermutedView(x, {n, c, h / b, b, w / b, b}, {0, 1, 3, 5, 2, 4}, y, ctx.pool());
  } else {
    return ctx.InvalidArgument("unknown mode '" + mode + "' (DCR or CRD)");
  }
  ctx.set_output(0, std::move(y));
  return Status::OK();
}

}  // namespace

void RegisterTensorCopyOps(KernelRegistry& r) {
  r.Add({"Concat", "", 1, 99, Concat, "ref"});
  r.Add({"Split", "", 1, 99, Split, "ref"});  // split: attribute < 13, input >= 13; num_outputs 18
  r.Add({"Slice", "", 1, 9, Slice, "ref"});  // starts, ends and axes: attributes
  r.Add({"Slice", "", 10, 99, Slice, "ref"});  // inputs, and steps
  r.Add({"Transpose", "", 1, 99, Transpose, "ref"});
  r.Add({"Pad", "", 1, 10, Pad1, "ref"});
  r.Add({"Pad", "", 11, 99, Pad11, "ref"});
  r.Add({"Tile", "", 1, 5, Tile1, "ref"});
  r.Add({"Tile", "", 6, 99, Tile6, "ref"});
  r.Add({"DepthToSpace", "", 1, 99, DepthToSpace, "ref"});
  r.Add({"SpaceToDepth", "", 1, 99, SpaceToDepth, "ref"});
}

}  // namespace sparq
