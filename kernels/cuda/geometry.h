// Host-side planning of the CUDA kernels. The geometry of a node's 2-D convolution or pooling window, resolved by the
// reference's own rules (kernels/ref/conv.h ReadWindowAttributes +
// PrepareConv / PreparePool: auto_pad, ceil_mode, defaults), in the form the
// CUDA kernel bodies take (device_kernels.h). Host code, free of CUDA
// headers: the rows and the host tests of the kernel bodies share it.
#pragma once

#include <algorithm>
#include <limits>
#include <string>
#include <vector>

#include "kernels/cuda/device_kernels.h"
#include "kernels/op_context.h"
#include "kernels/ref/nn_common.h"
#include "kernels/ref/pool.h"

namespace sparq {
namespace cuda {

// The 2-D window both geometries share: x's and y's planes (NCHW shapes),
// kernel, strides, dilations and the leading pads.
template <typename Geometry>
void SetWindow2d(const WindowGeometry& w, const Shape& x, const Shape& y, Geometry* g) {
  g->height = x[2];
  g->width = x[3];
  g->out_height = y[2];
  g->out_width = y[3];
  g->kernel_h = w.kernel[0];
  g->kernel_w = w.kernel[1];
  g->stride_h = w.strides[0];
  g->stride_w = w.strides[1];
  g->dilation_h = w.dilations[0];
  g->dilation_w = w.dilations[1];
  g->pad_top = w.pads[0];
  g->pad_left = w.pads[1];
}

// x [N, C, H, W] and w [M, C / group, kh, kw] -> the geometry of one group
// (channels = C / group) and y's shape. NotSupported for other ranks; the
// reference's InvalidArgument (naming the node) for bad attributes or shapes.
inline StatusOr<Conv2dGeometry> Conv2dGeometryOf(const OpContext& ctx, const Shape& x, const Shape& w, Shape* y_shape) {
  if (x.size() != 4 || w.size() != 4) return ctx.NotSupported("the CUDA Conv rows are 2-D (NCHW) only");
  ConvParams p;
  AutoPad auto_pad = AutoPad::kNotSet;
  SPARQ_RETURN_IF_ERROR(ReadWindowAttributes(ctx, &p.window, &auto_pad));
  p.group = ctx.node().attr_int("group", 1);
  Status st = PrepareConv(x, w, auto_pad, &p, y_shape);
  if (!st.ok()) return st.WithContext(ctx.node().Describe());
  Conv2dGeometry g;
  g.batch = x[0];
  g.channels = x[1] / p.group;
  g.out_channels = w[0];
  SetWindow2d(p.window, x, *y_shape, &g);
  return g;
}

// x [N, C, H, W] -> the geometry of MaxPool / AveragePool and y's shape.
inline StatusOr<Pool2dGeometry> Pool2dGeometryOf(const OpContext& ctx, const Shape& x, Shape* y_shape) {
  if (x.size() != 4) return ctx.NotSupported("the CUDA pooling rows take NCHW inputs");
  PoolParams p;
  AutoPad auto_pad = AutoPad::kNotSet;
  SPARQ_RETURN_IF_ERROR(ReadWindowAttributes(ctx, &p.window, &auto_pad));
  Status st = PreparePool(x, auto_pad, ctx.node().attr_int("ceil_mode", 0) != 0, &p, y_shape);
  if (!st.ok()) return st.WithContext(ctx.node().Describe());
  Pool2dGeometry g;
  g.planes = x[0] * x[1];
  SetWindow2d(p.window, x, *y_shape, &g);
  g.pad_bottom = p.window.pads[2];
  g.pad_right = p.window.pads[3];
  g.count_include_pad = ctx.node().attr_int("count_include_pad", 0) != 0;
  return g;
}

// Plans y = a op b under numpy broadcasting; InvalidArgument when the shapes
// do not broadcast, NotSupported past kMaxRank dims. out_dims / out_rank get
// the result's shape.
inline Status PlanBroadcast(const int64_t* a_dims, int a_rank, const int64_t* b_dims, int b_rank, BroadcastPlan* plan,
                     int64_t* out_dims, int* out_rank) {
  const int rank = a_rank > b_rank ? a_rank : b_rank;
  if (rank > kMaxRank) return Status::NotSupported("broadcast of rank " + std::to_string(rank) + " (CUDA: up to 8)");
  BroadcastPlan p;
  p.rank = rank;
  int64_t a_stride = 1, b_stride = 1;
  p.numel = 1;
  for (int d = rank - 1; d >= 0; --d) {
    const int ai = d - (rank - a_rank), bi = d - (rank - b_rank);
    const int64_t ad = ai >= 0 ? a_dims[ai] : 1, bd = bi >= 0 ? b_dims[bi] : 1;
    if (ad != bd && ad != 1 && bd != 1) {
      return Status::InvalidArgument("shapes do not broadcast: dimension " + std::to_string(ad) + " vs " +
                                     std::to_string(bd));
    }
    const int64_t od = ad == 1 ? bd : ad;
    p.dims[d] = od;
    p.a_strides[d] = ad == 1 ? 0 : a_stride;
    p.b_strides[d] = bd == 1 ? 0 : b_stride;
    a_stride *= ad;
    b_stride *= bd;
    p.numel *= od;
    out_dims[d] = od;
  }
  p.same_shape = a_stride == p.numel && b_stride == p.numel;
  p.b_scalar = b_stride == 1;
  *plan = p;
  *out_rank = rank;
  return Status::OK();
}

// Slice of x's shape by starts / ends / axes / steps (axes and steps may be
// empty: 0, 1, ... and ones), resolved as the reference's SliceImpl: y's shape
// in *out_shape and the strided copy (base and signed strides) that makes y.
inline StatusOr<int64_t> NormalizeSliceAxis(const OpContext& ctx, int64_t axis, int64_t rank) {
  const int64_t a = axis < 0 ? axis + rank : axis;
  if (a < 0 || a >= rank) return ctx.InvalidArgument("axes value " + std::to_string(axis) + " is out of range for rank " + std::to_string(rank));
  return a;
}

inline StatusOr<PermutePlan> PlanSlice(const OpContext& ctx, const Shape& x, const std::vector<int64_t>& starts,
                                       const std::vector<int64_t>& ends, std::vector<int64_t> axes,
                                       std::vector<int64_t> steps, Shape* out_shape) {
  const int64_t rank = static_cast<int64_t>(x.size());
  const size_t n = starts.size();
  if (axes.empty()) {
    for (size_t i = 0; i < n; ++i) axes.push_back(static_cast<int64_t>(i));
  }
  if (steps.empty()) steps.assign(n, 1);
  if (ends.size() != n || axes.size() != n || steps.size() != n) {
    return ctx.InvalidArgument("starts, ends, axes and steps must have the same length");
  }
  if (rank > kMaxRank) return ctx.NotSupported("slice_cuda takes up to 8 dimensions");
  Shape& out = *out_shape;
  out = x;
  std::vector<int64_t> first(static_cast<size_t>(rank), 0), step(static_cast<size_t>(rank), 1);
  std::vector<bool> seen(static_cast<size_t>(rank), false);
  for (size_t i = 0; i < n; ++i) {
    SPARQ_ASSIGN_OR_RETURN(const int64_t axis, NormalizeSliceAxis(ctx, axes[i], rank));
    if (seen[static_cast<size_t>(axis)]) return ctx.InvalidArgument("axes repeat axis " + std::to_string(axis));
    seen[static_cast<size_t>(axis)] = true;
    if (steps[i] == 0) return ctx.InvalidArgument("steps contain a zero");
    const int64_t dim = x[static_cast<size_t>(axis)];
    int64_t s = starts[i], e = ends[i], count;
    if (s < 0) s += dim;
    if (e < 0) e += dim;
    if (dim == 0) {
      count = 0;
    } else if (steps[i] > 0) {
      s = std::min(std::max<int64_t>(s, 0), dim);
      e = std::min(std::max<int64_t>(e, 0), dim);
      count = e > s ? 1 + (e - s - 1) / steps[i] : 0;
    } else {
      s = std::min(std::max<int64_t>(s, 0), dim - 1);
      e = std::min(std::max<int64_t>(e, -1), dim - 1);
      const int64_t stride = steps[i] == std::numeric_limits<int64_t>::min() ? std::numeric_limits<int64_t>::max() : -steps[i];
      count = s > e ? 1 + (s - e - 1) / stride : 0;
    }
    out[static_cast<size_t>(axis)] = count;
    first[static_cast<size_t>(axis)] = count > 0 ? s : 0;
    step[static_cast<size_t>(axis)] = count > 1 ? steps[i] : 1;
  }
  PermutePlan plan;
  plan.rank = static_cast<int>(rank);
  plan.numel = NumElements(out);
  int64_t stride = 1;
  for (int64_t d = rank - 1; d >= 0; --d) {
    plan.out_dims[d] = out[static_cast<size_t>(d)];
    plan.in_strides[d] = stride * step[static_cast<size_t>(d)];
    plan.base += first[static_cast<size_t>(d)] * stride;
    stride *= x[static_cast<size_t>(d)];
  }
  return plan;
}

}  // namespace cuda
}  // namespace sparq
