// MaxPool over 2-D NCHW planes of float32, without indices (the MaxPool row
// of qdq_glue.cc runs uint8 / int8 itself and float32 here):
// strided passes over output rows instead of the reference's per-tap offset
// table. The result is the reference's exactly (the maximum of finite values
// is order-independent; NaN wins as in the reference's comparison). Anything
// else runs the reference kernel.
#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include "kernels/ref/nn_common.h"
#include "kernels/ref/pool.h"
#include "kernels/cpu/pool.h"
#include "kernels/registry.h"

namespace sparq {
namespace {

// v if it beats best under the reference's order (NaN wins), else best;
// branch-free so that the column loops vectorize.
template <typename T>
inline T Max(T v, T best) {
  if constexpr (std::is_floating_point_v<T>) return (v > best || (v != v && best == best)) ? v : best;
  else return v > best ? v : best;
}

// Per output row: the interior columns (whole window inside x) are reduced
// tap by tap over the row, each tap a strided pass over the columns (no
// bounds checks, vectorizable); the border columns check each tap.
template <typename T>
void MaxPool2d(const WindowGeometry& w, const Shape& x_shape, const T* x, const Shape& y_shape, T* y,
               ThreadPool* pool) {
  const int64_t h = x_shape[2], wd = x_shape[3], oh = y_shape[2], ow = y_shape[3];
  const int64_t kh = w.kernel[0], kw = w.kernel[1], sh = w.strides[0], sw = w.strides[1];
  const int64_t dh = w.dilations[0], dw = w.dilations[1], pt = w.pads[0], pl = w.pads[1];
  // Interior output columns: ox * sw - pl >= 0 and ox * sw - pl + (kw - 1) * dw <= wd - 1.
  const int64_t in_lo = std::min(ow, (pl + sw - 1) / sw);
  const int64_t last = wd - 1 - (kw - 1) * dw + pl;
  const int64_t in_hi = std::max(in_lo, std::min(ow, last < 0 ? int64_t{0} : last / sw + 1));
  ParallelFor(pool, x_shape[0] * x_shape[1], 1, [&](int64_t p0, int64_t p1) {
    for (int64_t plane = p0; plane < p1; ++plane) {
      const T* xp = x + plane * h * wd;
      T* yp = y + plane * oh * ow;
      for (int64_t oy = 0; oy < oh; ++oy) {
        T* yr = yp + oy * ow;
        bool first = true;
        for (int64_t ky = 0; ky < kh; ++ky) {
          const int64_t iy = oy * sh - pt + ky * dh;
          if (iy < 0 || iy >= h) continue;
          const T* row = xp + iy * wd - pl;
          for (int64_t kx = 0; kx < kw; ++kx, first = false) {
            const T* t = row + kx * dw;
            if (first) {
              for (int64_t ox = in_lo; ox < in_hi; ++ox) yr[ox] = t[ox * sw];
            } else {
              for (int64_t ox = in_lo; ox < in_hi; ++ox) yr[ox] = Max(t[ox * sw], yr[ox]);
            }
          }
        }
        auto border = [&](int64_t ox) {
          bool found = false;
          T best = std::numeric_limits<T>::lowest();
          for (int64_t ky = 0; ky < kh; ++ky) {
            const int64_t iy = oy * sh - pt + ky * dh;
            if (iy < 0 || iy >= h) continue;
            for (int64_t kx = 0; kx < kw; ++kx) {
              const int64_t ix = ox * sw - pl + kx * dw;
              if (ix < 0 || ix >= wd) continue;
              best = found ? Max(xp[iy * wd + ix], best) : xp[iy * wd + ix];
              found = true;
            }
          }
          yr[ox] = best;
        };
        for (int64_t ox = 0; ox < in_lo; ++ox) border(ox);
        for (int64_t ox = in_hi; ox < ow; ++ox) border(ox);
        if (first)  // no input row in the window: the reference's empty maximum
          for (int64_t ox = in_lo; ox < in_hi; ++ox) yr[ox] = std::numeric_limits<T>::lowest();
      }
    }
  });
}

}  // namespace

Status MaxPoolF32(OpContext& ctx) {
  if (!ctx.has_input(0) || ctx.wants_output(1) || ctx.input(0).rank() != 4) return RunReferenceKernel(ctx);
  const Tensor& x = ctx.input(0);
  const DataType type = x.dtype();
  if (type != DataType::kFloat32) return RunReferenceKernel(ctx);
  const Node& node = ctx.node();
  PoolParams params;
  AutoPad auto_pad = AutoPad::kNotSet;
  if (node.attr("kernel_shape") == nullptr || !ReadWindowAttributes(ctx, &params.window, &auto_pad).ok())
    return RunReferenceKernel(ctx);
  Shape y_shape;
  if (!PreparePool(x.shape(), auto_pad, node.attr_int("ceil_mode", 0) != 0, &params, &y_shape).ok())
    return RunReferenceKernel(ctx);  // the reference names the error
  Tensor y(type, y_shape);
  MaxPool2d(params.window, x.shape(), x.data<float>(), y_shape, y.data<float>(), ctx.pool());
  ctx.set_output(0, std::move(y));
  return Status::OK();
}

}  // namespace sparq
