// maxpool2d, the 2-D MaxPool row of the dispatch table (kernels/cpu/
// dispatch.h), over NCHW planes without indices, exactly the reference's
// result (MaxPoolRef): taps outside x are skipped, a window without taps gives
// the type's lowest value.
//   float32:      per output row, the interior columns (window inside the
//                 row) by a MaxPoolInteriorF32Fn over the window's taps in the
//                 reference's order (so that the first of equal values, -0
//                 or +0, and the first NaN win as in the reference): the
//                 portable loop here, AVX2 / AVX-512 in maxpool_f32_simd.cc;
//                 the border columns check each tap
//   uint8 / int8: separably: per output row, the max over the window's input
//                 rows for every input column (contiguous, vectorizable), then
//                 per output the max over the window's columns (for windows
//                 inside the row, read from a vectorized running max of kw
//                 neighbours); max is exact on integers, so the order of the
//                 taps does not matter; windows centred on their output
//                 over planes narrower than 64 columns (YOLO's SPPF) run the
//                 same two steps over the whole plane at once
//                 (MaxPoolPlaneCentred), as its rows are too short to vectorize
// RunMaxPool2d is the executor's MaxPool (qdq_glue.cc registers it).
#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include "kernels/ref/nn_common.h"
#include "kernels/ref/pool.h"
#include "kernels/cpu/internal.h"
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

struct Pool2d {
  int64_t h, wd, ho, wo, kh, kw, sh, sw, dh, dw, pt, pl;
};

// A window centred on its output (stride 1, no dilation, odd kernel, pads
// (k - 1) / 2, y the size of x: YOLO's SPPF) over a plane narrower than 64
// columns, whose rows are too short for the row loops to vectorize: both
// element types then run whole planes at once.
bool CentredOnSmallPlane(const Pool2d& g) {
  return g.sh == 1 && g.sw == 1 && g.dh == 1 && g.dw == 1 && g.kh % 2 == 1 && g.kw % 2 == 1 && g.pt == g.kh / 2 &&
         g.pl == g.kw / 2 && g.ho == g.h && g.wo == g.wd && g.h > 0 && g.wd > 0 && g.wd < 64;
}

// Per output row: the interior columns (whole window inside x) by
// `interior` over the in-bounds taps (no bounds checks); the border columns
// check each tap. When every window holds a column of x, each plane's rows
// are first copied between -inf columns, and then every column is interior:
// a -inf tap never changes the maximum nor its bits (it loses to every value
// but -inf, which it equals bit for bit, and to NaN), so this is the
// reference's result with the out-of-bounds taps skipped.
void MaxPool2dFloat(const WindowGeometry& w, const Shape& x_shape, const float* x, const Shape& y_shape, float* y,
                    ThreadPool* pool, cpu::MaxPoolInteriorF32Fn interior) {
  using T = float;
  const int64_t h = x_shape[2], wd = x_shape[3], oh = y_shape[2], ow = y_shape[3];
  const int64_t kh = w.kernel[0], kw = w.kernel[1], sh = w.strides[0], sw = w.strides[1];
  const int64_t dh = w.dilations[0], dw = w.dilations[1], pt = w.pads[0], pl = w.pads[1];
  // Interior output columns: ox * sw - pl >= 0 and ox * sw - pl + (kw - 1) * dw <= wd - 1.
  const int64_t in_lo = std::min(ow, (pl + sw - 1) / sw);
  const int64_t last = wd - 1 - (kw - 1) * dw + pl;
  const int64_t in_hi = std::max(in_lo, std::min(ow, last < 0 ? int64_t{0} : last / sw + 1));
  // The padded rows: column j holds x's column j - pl (-inf outside), for
  // every column a window reads.
  const int64_t padded_w = ow > 0 ? (ow - 1) * sw + (kw - 1) * dw + 1 : 0;
  bool padded = (in_lo > 0 || in_hi < ow) && padded_w <= 4 * (wd + kw * dw);  // not for strides far past the input
  for (int64_t ox = 0; padded && ox < ow; ++ox) {
    bool column = false;  // a tap of this window inside x's columns
    for (int64_t kx = 0; kx < kw && !column; ++kx) column = ox * sw - pl + kx * dw >= 0 && ox * sw - pl + kx * dw < wd;
    padded = column;
  }
  // A window centred on its output over a small plane (YOLO's SPPF: 5x5 on
  // 10 x 10): each plane goes between -inf rows and columns once, and one run
  // of `interior` over the whole padded plane computes every output, its
  // taps whole rows of the padded plane apart (row ends line up: the windows
  // of a row's last outputs read only padding past it). Rows of 10 outputs
  // would leave the vector loop one short chain of taps per row.
  if (CentredOnSmallPlane({h, wd, oh, ow, kh, kw, sh, sw, dh, dw, pt, pl})) {
    const int64_t pw = wd + 2 * pl, ph = h + 2 * pt, run = (h - 1) * pw + wd;
    ParallelFor(pool, x_shape[0] * x_shape[1], 1, [&](int64_t p0, int64_t p1) {
      std::vector<T> padded_plane(static_cast<size_t>(ph * pw), -std::numeric_limits<T>::infinity());
      std::vector<T> out(static_cast<size_t>(run));
      std::vector<const T*> taps;
      for (int64_t ky = 0; ky < kh; ++ky)
        for (int64_t kx = 0; kx < kw; ++kx) taps.push_back(padded_plane.data() + ky * pw + kx);
      for (int64_t plane = p0; plane < p1; ++plane) {
        const T* xp = x + plane * h * wd;
        T* yp = y + plane * oh * ow;
        for (int64_t iy = 0; iy < h; ++iy) std::copy(xp + iy * wd, xp + (iy + 1) * wd, &padded_plane[(iy + pt) * pw + pl]);
        interior(taps.data(), static_cast<int>(taps.size()), 1, out.data(), run);
        for (int64_t oy = 0; oy < oh; ++oy) std::copy(&out[oy * pw], &out[oy * pw + ow], yp + oy * ow);
      }
    });
    return;
  }
  ParallelFor(pool, x_shape[0] * x_shape[1], 1, [&](int64_t p0, int64_t p1) {
    std::vector<const T*> taps(static_cast<size_t>(kh * kw));
    std::vector<T> rows(padded ? static_cast<size_t>(h * padded_w) : 0);
    const int64_t copy_lo = std::min(pl, padded_w), copy_hi = std::max(copy_lo, std::min(padded_w, pl + wd));
    for (int64_t plane = p0; plane < p1; ++plane) {
      const T* xp = x + plane * h * wd;
      T* yp = y + plane * oh * ow;
      if (padded) {
        for (int64_t iy = 0; iy < h; ++iy) {
          T* dst = rows.data() + iy * padded_w;
          std::fill(dst, dst + copy_lo, -std::numeric_limits<T>::infinity());
          std::copy(xp + iy * wd + (copy_lo - pl), xp + iy * wd + (copy_hi - pl), dst + copy_lo);
          std::fill(dst + copy_hi, dst + padded_w, -std::numeric_limits<T>::infinity());
        }
        for (int64_t oy = 0; oy < oh; ++oy) {
          int num_taps = 0;
          for (int64_t ky = 0; ky < kh; ++ky) {
            const int64_t iy = oy * sh - pt + ky * dh;
            if (iy < 0 || iy >= h) continue;
            for (int64_t kx = 0; kx < kw; ++kx) taps[num_taps++] = rows.data() + iy * padded_w + kx * dw;
          }
          if (num_taps > 0) {
            interior(taps.data(), num_taps, sw, yp + oy * ow, ow);
          } else {  // no input row in the window: the reference's empty maximum
            std::fill(yp + oy * ow, yp + (oy + 1) * ow, std::numeric_limits<T>::lowest());
          }
        }
        continue;
      }
      for (int64_t oy = 0; oy < oh; ++oy) {
        T* yr = yp + oy * ow;
        int num_taps = 0;  // tap t of output column in_lo + i reads taps[t][i * sw]
        for (int64_t ky = 0; ky < kh; ++ky) {
          const int64_t iy = oy * sh - pt + ky * dh;
          if (iy < 0 || iy >= h) continue;
          const T* row = xp + iy * wd - pl + in_lo * sw;
          for (int64_t kx = 0; kx < kw; ++kx) taps[num_taps++] = row + kx * dw;
        }
        const bool first = num_taps == 0;
        if (!first && in_hi > in_lo) interior(taps.data(), num_taps, sw, yr + in_lo, in_hi - in_lo);
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

// The taps k < kernel with 0 <= start + k * dilation < size: [*begin, *end).
void TapRange(int64_t start, int64_t kernel, int64_t dilation, int64_t size, int64_t* begin, int64_t* end) {
  int64_t b = 0, e = kernel;
  while (b < e && start + b * dilation < 0) ++b;
  while (e > b && start + (e - 1) * dilation >= size) --e;
  *begin = b, *end = e;
}


// One (n, c) plane. The geometry comes by value and lives in locals: with
// byte stores in the loops, the compiler could not keep values read through
// a reference in registers (nor vectorize).
template <typename T>
void MaxPoolPlane(const Pool2d g, const T* xp, T* yp, T* cols, T* windows, const int64_t* kx_begin,
                  const int64_t* kx_end) {
  const int64_t h = g.h, wd = g.wd, ho = g.ho, wo = g.wo, kh = g.kh, kw = g.kw, sh = g.sh, sw = g.sw;
  const int64_t dh = g.dh, dw = g.dw, pt = g.pt, pl = g.pl;
  const T lowest = std::numeric_limits<T>::lowest();
  for (int64_t oy = 0; oy < ho; ++oy) {
    T* out = yp + oy * wo;
    int64_t ky0 = 0, ky1 = 0;
    TapRange(oy * sh - pt, kh, dh, h, &ky0, &ky1);
    if (ky0 == ky1) {
      std::fill(out, out + wo, lowest);
      continue;
    }
    const T* first = xp + (oy * sh - pt + ky0 * dh) * wd;
    std::copy(first, first + wd, cols);
    for (int64_t ky = ky0 + 1; ky < ky1; ++ky) {
      const T* row = xp + (oy * sh - pt + ky * dh) * wd;
      for (int64_t ix = 0; ix < wd; ++ix) cols[ix] = std::max(cols[ix], row[ix]);
    }
    // Windows inside the row (dilation 1): the max of kw neighbours at
    // every column, contiguous and vectorizable, then one read each.
    const int64_t starts = dw == 1 ? wd - kw + 1 : 0;
    if (starts > 0) {
      std::copy(cols, cols + starts, windows);
      for (int64_t kx = 1; kx < kw; ++kx)
        for (int64_t i = 0; i < starts; ++i) windows[i] = std::max(windows[i], cols[i + kx]);
    }
    for (int64_t ox = 0; ox < wo; ++ox) {
      const int64_t start = ox * sw - pl;
      if (start >= 0 && start < starts) {
        out[ox] = windows[start];
        continue;
      }
      T best = lowest;
      for (int64_t kx = kx_begin[ox]; kx < kx_end[ox]; ++kx) best = std::max(best, cols[start + kx * dw]);
      out[ox] = best;
    }
  }
}

// A window centred on its output (stride 1, no dilation, odd kernel, pads
// (k - 1) / 2, y the size of x: YOLO's SPPF) over small planes, whose rows
// are too short for MaxPoolPlane's row loops to vectorize: each step is one
// run over the whole plane. The max over the window's rows is the plane
// against itself shifted by whole rows (row ends line up); its rows then go
// between `rw` lowest values each side, and 2 * rw passes of
// max(v[i], v[i + 1]) along that padded run widen every window by one
// column. `a` and `b` hold h * (w + 2 * rw) values each.
template <typename T>
void MaxPoolPlaneCentred(const Pool2d g, const T* __restrict xp, T* __restrict yp, T* __restrict a, T* __restrict b) {
  const int64_t h = g.h, w = g.wd, rh = g.pt, rw = g.pl, n = h * w, pw = w + 2 * rw, pn = h * pw;
  std::copy(xp, xp + n, b);
  for (int64_t d = 1; d <= rh && d < h; ++d) {
    const int64_t s = d * w;
    for (int64_t i = 0; i < n - s; ++i) b[i] = std::max(b[i], xp[i + s]);
    for (int64_t i = s; i < n; ++i) b[i] = std::max(b[i], xp[i - s]);
  }
  std::fill(a, a + pn, std::numeric_limits<T>::lowest());
  for (int64_t r = 0; r < h; ++r) std::copy(b + r * w, b + (r + 1) * w, a + r * pw + rw);
  for (int64_t k = 0; k < 2 * rw; ++k) {
    for (int64_t i = 0; i + 1 < pn; ++i) b[i] = std::max(a[i], a[i + 1]);
    std::swap(a, b);
  }
  for (int64_t r = 0; r < h; ++r) std::copy(a + r * pw, a + r * pw + w, yp + r * w);
}

template <typename T>
void MaxPool2dBytes(const WindowGeometry& w, const Shape& xs, const T* x, const Shape& ys, T* y, ThreadPool* pool) {
  const Pool2d g = {xs[2],          xs[3],        ys[2],          ys[3],          w.kernel[0], w.kernel[1],
                    w.strides[0],   w.strides[1], w.dilations[0], w.dilations[1], w.pads[0],   w.pads[1]};
  if (CentredOnSmallPlane(g)) {
    ParallelFor(pool, xs[0] * xs[1], 1, [&](int64_t p0, int64_t p1) {
      const size_t size = static_cast<size_t>(g.h * (g.wd + 2 * g.pl));
      std::vector<T> a(size), b(size);
      for (int64_t plane = p0; plane < p1; ++plane)
        MaxPoolPlaneCentred(g, x + plane * g.h * g.wd, y + plane * g.ho * g.wo, a.data(), b.data());
    });
    return;
  }
  std::vector<int64_t> kx_begin(g.wo), kx_end(g.wo);
  for (int64_t ox = 0; ox < g.wo; ++ox) TapRange(ox * g.sw - g.pl, g.kw, g.dw, g.wd, &kx_begin[ox], &kx_end[ox]);
  ParallelFor(pool, xs[0] * xs[1], 1, [&](int64_t p0, int64_t p1) {
    std::vector<T> cols(static_cast<size_t>(g.wd)), windows(static_cast<size_t>(g.wd));
    for (int64_t plane = p0; plane < p1; ++plane) {
      MaxPoolPlane(g, x + plane * g.h * g.wd, y + plane * g.ho * g.wo, cols.data(), windows.data(), kx_begin.data(),
                   kx_end.data());
    }
  });
}

}  // namespace

namespace cpu {

void MaxPoolInteriorF32Portable(const float* const* taps, int num_taps, int64_t stride, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = taps[0][i * stride];
  for (int t = 1; t < num_taps; ++t)
    for (int64_t i = 0; i < n; ++i) y[i] = Max(taps[t][i * stride], y[i]);
}

void MaxPool2dWith(const MaxPool2dArgs& a, MaxPoolInteriorF32Fn interior) {
  WindowGeometry w;
  w.kernel = {a.kernel_h, a.kernel_w}, w.strides = {a.stride_h, a.stride_w};
  w.dilations = {a.dilation_h, a.dilation_w}, w.pads = {a.pad_top, a.pad_left, 0, 0};  // the ends are implied
  const Shape xs = {1, a.planes, a.height, a.width}, ys = {1, a.planes, a.out_h, a.out_w};
  switch (a.elem) {
    case MaxPool2dArgs::Elem::kF32:
      MaxPool2dFloat(w, xs, static_cast<const float*>(a.x), ys, static_cast<float*>(a.y), a.pool, interior);
      break;
    case MaxPool2dArgs::Elem::kS8:
      MaxPool2dBytes(w, xs, static_cast<const int8_t*>(a.x), ys, static_cast<int8_t*>(a.y), a.pool);
      break;
    case MaxPool2dArgs::Elem::kU8:
      MaxPool2dBytes(w, xs, static_cast<const uint8_t*>(a.x), ys, static_cast<uint8_t*>(a.y), a.pool);
      break;
  }
}

void MaxPool2dPortable(const MaxPool2dArgs& a) { MaxPool2dWith(a, MaxPoolInteriorF32Portable); }

}  // namespace cpu

Status RunMaxPool2d(OpContext& ctx, MaxPool2dFn fn) {
  if (!ctx.has_input(0) || ctx.wants_output(1) || ctx.input(0).rank() != 4) return RunReferenceKernel(ctx);
  const Tensor& x = ctx.input(0);
  MaxPool2dArgs args;
  switch (x.dtype()) {
    case DataType::kFloat32: args.elem = MaxPool2dArgs::Elem::kF32; break;
    case DataType::kInt8: args.elem = MaxPool2dArgs::Elem::kS8; break;
    case DataType::kUInt8: args.elem = MaxPool2dArgs::Elem::kU8; break;
    default: return RunReferenceKernel(ctx);
  }
  const Node& node = ctx.node();
  PoolParams params;
  AutoPad auto_pad = AutoPad::kNotSet;
  if (node.attr("kernel_shape") == nullptr || !ReadWindowAttributes(ctx, &params.window, &auto_pad).ok())
    return RunReferenceKernel(ctx);
  Shape y_shape;
  if (!PreparePool(x.shape(), auto_pad, node.attr_int("ceil_mode", 0) != 0, &params, &y_shape).ok())
    return RunReferenceKernel(ctx);  // the reference names the error
  Tensor y(x.dtype(), y_shape);
  const WindowGeometry& w = params.window;
  args.x = x.raw_data(), args.y = y.raw_data();
  args.planes = x.dim(0) * x.dim(1), args.height = x.dim(2), args.width = x.dim(3);
  args.out_h = y_shape[2], args.out_w = y_shape[3];
  args.kernel_h = w.kernel[0], args.kernel_w = w.kernel[1], args.stride_h = w.strides[0], args.stride_w = w.strides[1];
  args.dilation_h = w.dilations[0], args.dilation_w = w.dilations[1], args.pad_top = w.pads[0], args.pad_left = w.pads[1];
  args.pool = ctx.pool();
  fn(args);
  ctx.set_output(0, std::move(y));
  return Status::OK();
}

}  // namespace sparq
