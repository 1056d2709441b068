// MaxPool over 2-D NCHW planes of float32, int8 or uint8, without indices:
// one pass per output row with the window clipped to the input once per row
// and column, instead of the reference's per-tap offset table. The result is
// the reference's exactly (the maximum is order-independent; NaN wins as in
// the reference's comparison). Anything else runs the reference kernel.
#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>

#include "kernels/ref/nn_common.h"
#include "kernels/ref/pool.h"
#include "kernels/registry.h"

namespace sparq {
namespace {

template <typename T>
inline bool Greater(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) return a > b || (std::isnan(a) && !std::isnan(b));
  else return a > b;
}

template <typename T>
void MaxPool2d(const WindowGeometry& w, const Shape& x_shape, const T* x, const Shape& y_shape, T* y,
               ThreadPool* pool) {
  const int64_t h = x_shape[2], wd = x_shape[3], oh = y_shape[2], ow = y_shape[3];
  const int64_t kh = w.kernel[0], kw = w.kernel[1], sh = w.strides[0], sw = w.strides[1];
  const int64_t dh = w.dilations[0], dw = w.dilations[1], pt = w.pads[0], pl = w.pads[1];
  ParallelFor(pool, x_shape[0] * x_shape[1], 1, [&](int64_t p0, int64_t p1) {
    for (int64_t plane = p0; plane < p1; ++plane) {
      const T* xp = x + plane * h * wd;
      T* yp = y + plane * oh * ow;
      for (int64_t oy = 0; oy < oh; ++oy) {
        const int64_t iy0 = oy * sh - pt;
        for (int64_t ox = 0; ox < ow; ++ox) {
          const int64_t ix0 = ox * sw - pl;
          T best = std::numeric_limits<T>::lowest();
          bool any = false;
          for (int64_t ky = 0; ky < kh; ++ky) {
            const int64_t iy = iy0 + ky * dh;
            if (iy < 0 || iy >= h) continue;
            const T* row = xp + iy * wd;
            for (int64_t kx = 0; kx < kw; ++kx) {
              const int64_t ix = ix0 + kx * dw;
              if (ix < 0 || ix >= wd) continue;
              if (!any || Greater(row[ix], best)) best = row[ix];
              any = true;
            }
          }
          yp[oy * ow + ox] = best;
        }
      }
    }
  });
}

Status RunMaxPool(OpContext& ctx) {
  if (!ctx.has_input(0) || ctx.wants_output(1) || ctx.input(0).rank() != 4) return RunReferenceKernel(ctx);
  const Tensor& x = ctx.input(0);
  const DataType type = x.dtype();
  if (type != DataType::kFloat32 && type != DataType::kInt8 && type != DataType::kUInt8) return RunReferenceKernel(ctx);
  const Node& node = ctx.node();
  PoolParams params;
  AutoPad auto_pad = AutoPad::kNotSet;
  if (node.attr("kernel_shape") == nullptr || !ReadWindowAttributes(ctx, &params.window, &auto_pad).ok())
    return RunReferenceKernel(ctx);
  Shape y_shape;
  if (!PreparePool(x.shape(), auto_pad, node.attr_int("ceil_mode", 0) != 0, &params, &y_shape).ok())
    return RunReferenceKernel(ctx);  // the reference names the error
  Tensor y(type, y_shape);
  switch (type) {
    case DataType::kFloat32: MaxPool2d(params.window, x.shape(), x.data<float>(), y_shape, y.data<float>(), ctx.pool()); break;
    case DataType::kInt8: MaxPool2d(params.window, x.shape(), x.data<int8_t>(), y_shape, y.data<int8_t>(), ctx.pool()); break;
    default: MaxPool2d(params.window, x.shape(), x.data<uint8_t>(), y_shape, y.data<uint8_t>(), ctx.pool()); break;
  }
  ctx.set_output(0, std::move(y));
  return Status::OK();
}

}  // namespace

void RegisterCpuPoolOps(KernelRegistry& r) { r.Add({"MaxPool", "", 1, 99, RunMaxPool, "maxpool2d"}); }

}  // namespace sparq
