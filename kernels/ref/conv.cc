// Reference Conv / ConvTranspose math and the shared window geometry.
//
// Conv runs as im2col + GEMM per (batch, group):
//
//   col[Cg * K, P]      row (c, t) = x_g[c] sampled at tap t for each output position p
//   y_g[Mg, P]  =  w_g[Mg, Cg * K] * col
//
// (K = taps per window, P = output positions.) Output positions are processed in
// blocks so col stays bounded for large images; block sizes depend on shapes
// only, never on the thread count. A 1x1 window with stride 1 and no padding
// multiplies x directly.
//
// ConvTranspose is the adjoint: col = w_g^T * x_g, then col2im scatter-adds each
// row (m, t) of col into y_g[m] at position i*stride - pad + t*dilation.
#include "kernels/ref/conv.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "kernels/ref/gemm.h"

namespace sparq {
namespace {

std::string ListToString(const std::vector<int64_t>& v) { return ShapeToString(v); }

int64_t Product(const std::vector<int64_t>& v, size_t from = 0) {
  int64_t p = 1;
  for (size_t i = from; i < v.size(); ++i) p *= v[i];
  return p;
}

// Largest im2col / col2im buffer, in elements (64 MiB of float).
constexpr int64_t kMaxColElements = int64_t{1} << 24;

// Fills `v` with `n` copies of `dflt` when empty; checks its length and that
// every value is >= min_value.
Status DefaultAndCheck(const char* name, size_t n, int64_t dflt, int64_t min_value, std::vector<int64_t>* v) {
  if (v->empty()) v->assign(n, dflt);
  if (v->size() != n) {
    return Status::InvalidArgument(std::string(name) + " has " + std::to_string(v->size()) + " values " +
                                   ListToString(*v) + ", expected " + std::to_string(n));
  }
  for (int64_t x : *v) {
    if (x < min_value) {
      return Status::InvalidArgument(std::string(name) + " " + ListToString(*v) + " has a value below " +
                                     std::to_string(min_value));
    }
  }
  return Status::OK();
}

// Spatial geometry of one (batch, group) slice, in the form the loops use.
struct Geometry {
  size_t rank = 0;                    // R
  std::vector<int64_t> in, out;       // spatial dims of x and y
  std::vector<int64_t> kernel, stride, dilation, pad_begin;
  int64_t in_size = 1, out_size = 1, taps = 1;

  Geometry(const ConvParams& p, const Shape& in_shape, const Shape& out_shape)
      : rank(in_shape.size() - 2),
        in(in_shape.begin() + 2, in_shape.end()),
        out(out_shape.begin() + 2, out_shape.end()),
        kernel(p.window.kernel),
        stride(p.window.strides),
        dilation(p.window.dilations),
        pad_begin(p.window.pads.begin(), p.window.pads.begin() + static_cast<std::ptrdiff_t>(in_shape.size() - 2)) {
    in_size = Product(in);
    out_size = Product(out);
    taps = Product(kernel);
  }

  // Multi-index of tap number t (row-major over kernel).
  void TapIndex(int64_t t, std::vector<int64_t>* idx) const {
    for (size_t d = rank; d-- > 0;) {
      (*idx)[d] = t % kernel[d];
      t /= kernel[d];
    }
  }
};

// Visits positions [begin, end) of a row-major grid `dims` line by line along
// the last dim: fn(index of the line's first position (multi-index), length,
// offset from begin). The multi-index buffer is reused.
template <typename Fn>
void ForEachLine(const std::vector<int64_t>& dims, int64_t begin, int64_t end, Fn&& fn) {
  const size_t rank = dims.size();
  std::vector<int64_t> idx(rank);
  int64_t rest = begin;
  for (size_t d = rank; d-- > 0;) {
    idx[d] = rest % dims[d];
    rest /= dims[d];
  }
  for (int64_t pos = begin; pos < end;) {
    const int64_t len = std::min(dims[rank - 1] - idx[rank - 1], end - pos);
    fn(idx, len, pos - begin);
    pos += len;
    idx[rank - 1] += len;
    for (size_t d = rank - 1; d > 0 && idx[d] == dims[d]; --d) {
      idx[d] = 0;
      ++idx[d - 1];
    }
  }
}

// col[r, p - p0] for rows r = (c, t) of Cg * taps and output positions p in [p0, p1).
template <typename T>
void Im2Col(const Geometry& g, const T* x, int64_t channels, int64_t p0, int64_t p1, T* col, ThreadPool* pool) {
  const int64_t width = p1 - p0;
  const int64_t rows = channels * g.taps;
  const size_t last = g.rank - 1;
  ParallelFor(pool, rows, std::max<int64_t>(1, 16384 / std::max<int64_t>(1, width)), [&](int64_t r0, int64_t r1) {
    std::vector<int64_t> tap(g.rank);
    for (int64_t r = r0; r < r1; ++r) {
      const T* xc = x + (r / g.taps) * g.in_size;
      g.TapIndex(r % g.taps, &tap);
      T* dst = col + r * width;
      ForEachLine(g.out, p0, p1, [&](const std::vector<int64_t>& o, int64_t len, int64_t at) {
        // Offset of the line's outer input coordinates; -1 when any is padding.
        int64_t offset = 0;
        for (size_t d = 0; d < last; ++d) {
          const int64_t pos = o[d] * g.stride[d] - g.pad_begin[d] + tap[d] * g.dilation[d];
          if (pos < 0 || pos >= g.in[d]) {
            offset = -1;
            break;
          }
          offset = offset * g.in[d] + pos;
        }
        T* line = dst + at;
        if (offset < 0) {
          std::fill(line, line + len, T(0));
          return;
        }
        const T* xrow = xc + offset * g.in[last];
        const int64_t s = g.stride[last];
        const int64_t start = o[last] * s - g.pad_begin[last] + tap[last] * g.dilation[last];
        const int64_t w = g.in[last];
        for (int64_t j = 0; j < len; ++j) {
          const int64_t pos = start + j * s;
          line[j] = (pos >= 0 && pos < w) ? xrow[pos] : T(0);
        }
      });
    }
  });
}

// y[m, ...] += col rows (m, t) for m in [0, out_channels), input positions [i0, i1).
template <typename T>
void Col2Im(const Geometry& g, const T* col, int64_t out_channels, int64_t i0, int64_t i1, T* y, ThreadPool* pool) {
  const int64_t width = i1 - i0;
  const size_t last = g.rank - 1;
  ParallelFor(pool, out_channels, 1, [&](int64_t m0, int64_t m1) {
    std::vector<int64_t> tap(g.rank);
    for (int64_t m = m0; m < m1; ++m) {
      T* ym = y + m * g.out_size;
      for (int64_t t = 0; t < g.taps; ++t) {
        g.TapIndex(t, &tap);
        const T* src = col + (m * g.taps + t) * width;
        // Here the grid walked is the input (x) and the target is y.
        ForEachLine(g.in, i0, i1, [&](const std::vector<int64_t>& i, int64_t len, int64_t at) {
          int64_t offset = 0;
          for (size_t d = 0; d < last; ++d) {
            const int64_t pos = i[d] * g.stride[d] - g.pad_begin[d] + tap[d] * g.dilation[d];
            if (pos < 0 || pos >= g.out[d]) return;
            offset = offset * g.out[d] + pos;
          }
          T* yrow = ym + offset * g.out[last];
          const T* line = src + at;
          const int64_t s = g.stride[last];
          const int64_t start = i[last] * s - g.pad_begin[last] + tap[last] * g.dilation[last];
          const int64_t w = g.out[last];
          for (int64_t j = 0; j < len; ++j) {
            const int64_t pos = start + j * s;
            if (pos >= 0 && pos < w) yrow[pos] += line[j];
          }
        });
      }
    }
  });
}

// Runs body(item, pool_for_item) for item in [0, items): in parallel over items
// when there are enough of them to keep the pool busy, else one after another
// with the pool handed to the body. Either way the arithmetic is the same.
template <typename Body>
void ForEachItem(int64_t items, ThreadPool* pool, Body&& body) {
  if (pool != nullptr && pool->num_threads() > 1 && items >= 2 * pool->num_threads()) {
    ParallelFor(pool, items, 1, [&](int64_t b, int64_t e) {
      for (int64_t it = b; it < e; ++it) body(it, nullptr);
    });
  } else {
    for (int64_t it = 0; it < items; ++it) body(it, pool);
  }
}

template <typename T>
void Conv(const ConvParams& p, const Shape& xs, const T* x, const Shape& ws, const T* w, const T* bias,
          const Shape& ys, T* y, ThreadPool* pool) {
  const Geometry g(p, xs, ys);
  const int64_t N = xs[0], C = xs[1], M = ws[0], G = p.group;
  const int64_t Cg = C / G, Mg = M / G;
  const int64_t depth = Cg * g.taps;  // GEMM K
  bool direct = g.taps == 1;
  for (size_t d = 0; d < g.rank; ++d)
    direct = direct && g.stride[d] == 1 && p.window.pads[d] == 0 && p.window.pads[g.rank + d] == 0;
  const int64_t block =
      direct ? g.out_size : std::max<int64_t>(1, std::min(g.out_size, kMaxColElements / std::max<int64_t>(1, depth)));

  ForEachItem(N * G, pool, [&](int64_t item, ThreadPool* item_pool) {
    const int64_t n = item / G, grp = item % G;
    const T* xg = x + (n * C + grp * Cg) * g.in_size;
    const T* wg = w + grp * Mg * depth;
    T* yg = y + (n * M + grp * Mg) * g.out_size;
    std::vector<T> col;
    if (!direct) col.resize(static_cast<size_t>(depth * std::min(block, g.out_size)));
    for (int64_t p0 = 0; p0 < g.out_size; p0 += block) {
      const int64_t p1 = std::min(g.out_size, p0 + block);
      const T* b = xg;
      int64_t ldb = g.out_size;
      if (!direct) {
        Im2Col(g, xg, Cg, p0, p1, col.data(), item_pool);
        b = col.data();
        ldb = p1 - p0;
      }
      GemmRef(false, false, Mg, p1 - p0, depth, T(1), wg, depth, b, ldb, T(0), yg + p0, g.out_size, item_pool);
    }
    if (bias != nullptr) {
      for (int64_t m = 0; m < Mg; ++m) {
        const T bm = bias[grp * Mg + m];
        T* row = yg + m * g.out_size;
        for (int64_t q = 0; q < g.out_size; ++q) row[q] += bm;
      }
    }
  });
}

template <typename T>
void ConvTranspose(const ConvParams& p, const Shape& xs, const T* x, const Shape& ws, const T* w, const T* bias,
                   const Shape& ys, T* y, ThreadPool* pool) {
  const Geometry g(p, xs, ys);
  const int64_t N = xs[0], C = xs[1], G = p.group;
  const int64_t Cg = C / G, Mg = ws[1], M = Mg * G;
  const int64_t rows = Mg * g.taps;  // rows of col
  const int64_t block = std::max<int64_t>(1, std::min(g.in_size, kMaxColElements / std::max<int64_t>(1, rows)));

  ForEachItem(N * G, pool, [&](int64_t item, ThreadPool* item_pool) {
    const int64_t n = item / G, grp = item % G;
    const T* xg = x + (n * C + grp * Cg) * g.in_size;
    const T* wg = w + grp * Cg * rows;  // [Cg, rows]
    T* yg = y + (n * M + grp * Mg) * g.out_size;
    for (int64_t m = 0; m < Mg; ++m) {
      const T b0 = bias != nullptr ? bias[grp * Mg + m] : T(0);
      std::fill(yg + m * g.out_size, yg + (m + 1) * g.out_size, b0);
    }
    std::vector<T> col(static_cast<size_t>(rows * std::min(block, g.in_size)));
    for (int64_t i0 = 0; i0 < g.in_size; i0 += block) {
      const int64_t i1 = std::min(g.in_size, i0 + block);
      GemmRef(true, false, rows, i1 - i0, Cg, T(1), wg, rows, xg + i0, g.in_size, T(0), col.data(), i1 - i0,
              item_pool);
      Col2Im(g, col.data(), Mg, i0, i1, yg, item_pool);
    }
  });
}

}  // namespace

StatusOr<AutoPad> ParseAutoPad(const std::string& value) {
  if (value.empty() || value == "NOTSET") return AutoPad::kNotSet;
  if (value == "SAME_UPPER") return AutoPad::kSameUpper;
  if (value == "SAME_LOWER") return AutoPad::kSameLower;
  if (value == "VALID") return AutoPad::kValid;
  return Status::InvalidArgument("auto_pad '" + value + "' is not one of NOTSET, SAME_UPPER, SAME_LOWER, VALID");
}

Status ResolveWindow(const Shape& in, AutoPad auto_pad, bool ceil_mode, WindowGeometry* g, Shape* out) {
  const size_t R = in.size();
  if (g->kernel.size() != R) {
    return Status::InvalidArgument("kernel_shape " + ListToString(g->kernel) + " has " +
                                   std::to_string(g->kernel.size()) + " values, expected " + std::to_string(R) +
                                   " (one per spatial dim of the input)");
  }
  SPARQ_RETURN_IF_ERROR(DefaultAndCheck("kernel_shape", R, 1, 1, &g->kernel));
  SPARQ_RETURN_IF_ERROR(DefaultAndCheck("strides", R, 1, 1, &g->strides));
  SPARQ_RETURN_IF_ERROR(DefaultAndCheck("dilations", R, 1, 1, &g->dilations));
  SPARQ_RETURN_IF_ERROR(DefaultAndCheck("pads", 2 * R, 0, 0, &g->pads));
  out->assign(R, 0);
  for (size_t d = 0; d < R; ++d) {
    const int64_t s = g->strides[d], extent = g->Extent(d);
    if (auto_pad == AutoPad::kSameUpper || auto_pad == AutoPad::kSameLower) {
      const int64_t o = (in[d] + s - 1) / s;
      const int64_t total = std::max<int64_t>(0, (o - 1) * s + extent - in[d]);
      const int64_t small = total / 2;
      g->pads[d] = auto_pad == AutoPad::kSameUpper ? small : total - small;
      g->pads[R + d] = total - g->pads[d];
      (*out)[d] = o;
      continue;
    }
    if (auto_pad == AutoPad::kValid) g->pads[d] = g->pads[R + d] = 0;
    const int64_t span = in[d] + g->pads[d] + g->pads[R + d] - extent;
    if (span < 0) {
      return Status::InvalidArgument("window extent " + std::to_string(extent) + " (kernel " +
                                     std::to_string(g->kernel[d]) + ", dilation " + std::to_string(g->dilations[d]) +
                                     ") exceeds the padded input size " +
                                     std::to_string(in[d] + g->pads[d] + g->pads[R + d]) + " along spatial dim " +
                                     std::to_string(d));
    }
    int64_t o = (ceil_mode ? (span + s - 1) / s : span / s) + 1;
    if (ceil_mode && (o - 1) * s >= in[d] + g->pads[d]) --o;  // last window would start in the end padding
    (*out)[d] = o;
  }
  return Status::OK();
}

Status PrepareConv(const Shape& x_shape, const Shape& w_shape, AutoPad auto_pad, ConvParams* p, Shape* y_shape) {
  if (x_shape.size() < 3) {
    return Status::InvalidArgument("X has shape " + ShapeToString(x_shape) +
                                   ", expected [N, C, D1, ...] with at least one spatial dim");
  }
  if (w_shape.size() != x_shape.size()) {
    return Status::InvalidArgument("W has shape " + ShapeToString(w_shape) + " but X has shape " +
                                   ShapeToString(x_shape) + ": their ranks must be equal");
  }
  const int64_t G = p->group;
  if (G < 1) return Status::InvalidArgument("group is " + std::to_string(G) + ", expected >= 1");
  if (x_shape[1] != w_shape[1] * G) {
    return Status::InvalidArgument("X has shape " + ShapeToString(x_shape) + " (" + std::to_string(x_shape[1]) +
                                   " channels) but W has shape " + ShapeToString(w_shape) + ", which with group " +
                                   std::to_string(G) + " needs " + std::to_string(w_shape[1] * G) +
                                   " input channels");
  }
  if (w_shape[0] % G != 0) {
    return Status::InvalidArgument("W has shape " + ShapeToString(w_shape) + ": its " + std::to_string(w_shape[0]) +
                                   " output channels are not divisible by group " + std::to_string(G));
  }
  const std::vector<int64_t> w_spatial(w_shape.begin() + 2, w_shape.end());
  if (p->window.kernel.empty()) p->window.kernel = w_spatial;
  if (p->window.kernel != w_spatial) {
    return Status::InvalidArgument("kernel_shape " + ListToString(p->window.kernel) +
                                   " does not match the spatial dims of W, which has shape " +
                                   ShapeToString(w_shape));
  }
  Shape out;
  SPARQ_RETURN_IF_ERROR_WITH_CONTEXT(
      ResolveWindow(Shape(x_shape.begin() + 2, x_shape.end()), auto_pad, false, &p->window, &out),
      "X has shape " + ShapeToString(x_shape) + ", W has shape " + ShapeToString(w_shape));
  *y_shape = {x_shape[0], w_shape[0]};
  y_shape->insert(y_shape->end(), out.begin(), out.end());
  return Status::OK();
}

Status PrepareConvTranspose(const Shape& x_shape, const Shape& w_shape, AutoPad auto_pad,
                            const std::vector<int64_t>& output_padding, const std::vector<int64_t>& output_shape,
                            ConvParams* p, Shape* y_shape) {
  if (x_shape.size() < 3) {
    return Status::InvalidArgument("X has shape " + ShapeToString(x_shape) +
                                   ", expected [N, C, D1, ...] with at least one spatial dim");
  }
  if (w_shape.size() != x_shape.size()) {
    return Status::InvalidArgument("W has shape " + ShapeToString(w_shape) + " but X has shape " +
                                   ShapeToString(x_shape) + ": their ranks must be equal");
  }
  const int64_t G = p->group;
  if (G < 1) return Status::InvalidArgument("group is " + std::to_string(G) + ", expected >= 1");
  if (x_shape[1] != w_shape[0] || w_shape[0] % G != 0) {
    return Status::InvalidArgument("X has shape " + ShapeToString(x_shape) + " (" + std::to_string(x_shape[1]) +
                                   " channels) but W has shape " + ShapeToString(w_shape) +
                                   ": ConvTranspose needs W.shape[0] == channels, divisible by group " +
                                   std::to_string(G));
  }
  const size_t R = x_shape.size() - 2;
  const std::vector<int64_t> w_spatial(w_shape.begin() + 2, w_shape.end());
  WindowGeometry& win = p->window;
  if (win.kernel.empty()) win.kernel = w_spatial;
  if (win.kernel != w_spatial) {
    return Status::InvalidArgument("kernel_shape " + ListToString(win.kernel) +
                                   " does not match the spatial dims of W, which has shape " +
                                   ShapeToString(w_shape));
  }
  SPARQ_RETURN_IF_ERROR(DefaultAndCheck("kernel_shape", R, 1, 1, &win.kernel));
  SPARQ_RETURN_IF_ERROR(DefaultAndCheck("strides", R, 1, 1, &win.strides));
  SPARQ_RETURN_IF_ERROR(DefaultAndCheck("dilations", R, 1, 1, &win.dilations));
  SPARQ_RETURN_IF_ERROR(DefaultAndCheck("pads", 2 * R, 0, 0, &win.pads));
  std::vector<int64_t> adj = output_padding;
  SPARQ_RETURN_IF_ERROR(DefaultAndCheck("output_padding", R, 0, 0, &adj));
  // output_shape may list only the spatial dims or (older exporters) all dims.
  std::vector<int64_t> forced;
  if (!output_shape.empty()) {
    if (output_shape.size() == R) forced = output_shape;
    else if (output_shape.size() == R + 2) forced.assign(output_shape.begin() + 2, output_shape.end());
    else {
      return Status::InvalidArgument("output_shape " + ListToString(output_shape) + " has " +
                                     std::to_string(output_shape.size()) + " values, expected " + std::to_string(R) +
                                     " (the spatial dims)");
    }
  }
  *y_shape = {x_shape[0], w_shape[1] * G};
  for (size_t d = 0; d < R; ++d) {
    const int64_t full = win.strides[d] * (x_shape[2 + d] - 1) + adj[d] + win.Extent(d);
    const bool same = auto_pad == AutoPad::kSameUpper || auto_pad == AutoPad::kSameLower;
    int64_t out;
    if (!forced.empty() || same) {
      out = !forced.empty() ? forced[d] : x_shape[2 + d] * win.strides[d];
      // Padding implied by the output size: positive crops, negative (a forced
      // output larger than the full result) adds bias-only positions at the end.
      const int64_t total = full - out;
      if (total <= 0) {
        win.pads[d] = 0;
      } else if (auto_pad == AutoPad::kSameUpper) {
        win.pads[d] = total / 2;
      } else {
        win.pads[d] = total - total / 2;
      }
      win.pads[R + d] = total - win.pads[d];
    } else {
      if (auto_pad == AutoPad::kValid) win.pads[d] = win.pads[R + d] = 0;
      out = full - win.pads[d] - win.pads[R + d];
    }
    if (out < 0) {
      return Status::InvalidArgument("output size " + std::to_string(out) + " along spatial dim " +
                                     std::to_string(d) + " is negative (X has shape " + ShapeToString(x_shape) +
                                     ", W has shape " + ShapeToString(w_shape) + ", pads " + ListToString(win.pads) +
                                     ")");
    }
    y_shape->push_back(out);
  }
  return Status::OK();
}

void ConvF32Ref(const ConvParams& p, const Shape& x_shape, const float* x, const Shape& w_shape, const float* w,
                const float* bias, const Shape& y_shape, float* y, ThreadPool* pool) {
  Conv<float>(p, x_shape, x, w_shape, w, bias, y_shape, y, pool);
}
void ConvF64Ref(const ConvParams& p, const Shape& x_shape, const double* x, const Shape& w_shape, const double* w,
                const double* bias, const Shape& y_shape, double* y, ThreadPool* pool) {
  Conv<double>(p, x_shape, x, w_shape, w, bias, y_shape, y, pool);
}
void ConvTransposeF32Ref(const ConvParams& p, const Shape& x_shape, const float* x, const Shape& w_shape,
                         const float* w, const float* bias, const Shape& y_shape, float* y, ThreadPool* pool) {
  ConvTranspose<float>(p, x_shape, x, w_shape, w, bias, y_shape, y, pool);
}
void ConvTransposeF64Ref(const ConvParams& p, const Shape& x_shape, const double* x, const Shape& w_shape,
                         const double* w, const double* bias, const Shape& y_shape, double* y, ThreadPool* pool) {
  ConvTranspose<double>(p, x_shape, x, w_shape, w, bias, y_shape, y, pool);
}

}  // namespace sparq
