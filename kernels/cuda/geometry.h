// The geometry of a node's 2-D convolution or pooling window, resolved by the
// reference's own rules (kernels/ref/conv.h ReadWindowAttributes +
// PrepareConv / PreparePool: auto_pad, ceil_mode, defaults), in the form the
// CUDA kernel bodies take (device_kernels.h). Host code, free of CUDA
// headers: the rows and the host tests of the kernel bodies share it.
#pragma once

#include "kernels/cuda/device_kernels.h"
#include "kernels/op_context.h"
#include "kernels/ref/nn_common.h"
#include "kernels/ref/pool.h"

namespace sparq {
namespace cuda {

// x [N, C, H, W] and w [M, C / group, kh, kw] -> the geometry of one group
// (channels = C / group) and y's shape. NotSupported for other ranks; the
// reference's InvalidArgument (naming the node) for bad attributes or shapes.
inline StatusOr<Conv2dGeometry> Conv2dGeometryOf(const OpContext& ctx, const Shape& x, const Shape& w, Shape* y_shape) {
  if (x.size() != 4 || w.size() != 4) return ctx.NotSupported("the CUDA Conv rows are 2-D (NCHW) only");
  ConvParams p;
  AutoPad auto_pad;
  SPARQ_RETURN_IF_ERROR(ReadWindowAttributes(ctx, &p.window, &auto_pad));
  p.group = ctx.node().attr_int("group", 1);
  Status st = PrepareConv(x, w, auto_pad, &p, y_shape);
  if (!st.ok()) return st.WithContext(ctx.node().Describe());
  Conv2dGeometry g;
  g.batch = x[0];
  g.channels = x[1] / p.group;
  g.height = x[2];
  g.width = x[3];
  g.out_channels = w[0];
  g.out_height = (*y_shape)[2];
  g.out_width = (*y_shape)[3];
  g.kernel_h = p.window.kernel[0];
  g.kernel_w = p.window.kernel[1];
  g.stride_h = p.window.strides[0];
  g.stride_w = p.window.strides[1];
  g.dilation_h = p.window.dilations[0];
  g.dilation_w = p.window.dilations[1];
  g.pad_top = p.window.pads[0];
  g.pad_left = p.window.pads[1];
  return g;
}

// x [N, C, H, W] -> the geometry of MaxPool / AveragePool and y's shape.
inline StatusOr<Pool2dGeometry> Pool2dGeometryOf(const OpContext& ctx, const Shape& x, Shape* y_shape) {
  if (x.size() != 4) return ctx.NotSupported("the CUDA pooling rows take NCHW inputs");
  PoolParams p;
  AutoPad auto_pad;
  SPARQ_RETURN_IF_ERROR(ReadWindowAttributes(ctx, &p.window, &auto_pad));
  Status st = PreparePool(x, auto_pad, ctx.node().attr_int("ceil_mode", 0) != 0, &p, y_shape);
  if (!st.ok()) return st.WithContext(ctx.node().Describe());
  Pool2dGeometry g;
  g.planes = x[0] * x[1];
  g.height = x[2];
  g.width = x[3];
  g.out_height = (*y_shape)[2];
  g.out_width = (*y_shape)[3];
  g.kernel_h = p.window.kernel[0];
  g.kernel_w = p.window.kernel[1];
  g.stride_h = p.window.strides[0];
  g.stride_w = p.window.strides[1];
  g.dilation_h = p.window.dilations[0];
  g.dilation_w = p.window.dilations[1];
  g.pad_top = p.window.pads[0];
  g.pad_left = p.window.pads[1];
  g.pad_bottom = p.window.pads[2];
  g.pad_right = p.window.pads[3];
  g.count_include_pad = ctx.node().attr_int("count_include_pad", 0) != 0;
  return g;
}

}  // namespace cuda
}  // namespace sparq
