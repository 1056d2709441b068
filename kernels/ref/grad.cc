// Reference backward kernels (kernels/ref/grad.h).
#include "kernels/ref/grad.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "kernels/ref/broadcast.h"
#include "kernels/ref/gemm.h"

namespace sparq {

namespace {

// Normalized 2-D conv geometry (a 1-D conv is a 2-D one of height 1).
struct Conv2d {
  int64_t N, C, H, W, M, OH, OW, kh, kw, sh, sw, dh, dw, ph, pw, group;
};

StatusOr<Conv2d> Geometry2d(const ConvParams& p, const Shape& x_shape, const Shape& w_shape, const Shape& y_shape) {
  const size_t R = x_shape.size() >= 2 ? x_shape.size() - 2 : 0;
  if (R < 1 || R > 2 || w_shape.size() != R + 2 || y_shape.size() != R + 2 || p.window.kernel.size() != R ||
      p.window.strides.size() != R || p.window.dilations.size() != R || p.window.pads.size() != 2 * R) {
    return Status::InvalidArgument("ConvBackwardRef: needs 1 or 2 spatial dims and a resolved window, got x " +
                                   ShapeToString(x_shape) + ", w " + ShapeToString(w_shape));
  }
  Conv2d g;
  g.N = x_shape[0];
  g.C = x_shape[1];
  g.M = w_shape[0];
  g.group = p.group;
  if (R == 2) {
    g.H = x_shape[2], g.W = x_shape[3], g.OH = y_shape[2], g.OW = y_shape[3];
    g.kh = p.window.kernel[0], g.kw = p.window.kernel[1];
    g.sh = p.window.strides[0], g.sw = p.window.strides[1];
    g.dh = p.window.dilations[0], g.dw = p.window.dilations[1];
    g.ph = p.window.pads[0], g.pw = p.window.pads[1];
  } else {
    g.H = 1, g.W = x_shape[2], g.OH = 1, g.OW = y_shape[2];
    g.kh = 1, g.kw = p.window.kernel[0];
    g.sh = 1, g.sw = p.window.strides[0];
    g.dh = 1, g.dw = p.window.dilations[0];
    g.ph = 0, g.pw = p.window.pads[0];
  }
  if (g.group < 1 || g.C % g.group != 0 || g.M % g.group != 0 || w_shape[1] != g.C / g.group ||
      y_shape[0] != g.N || y_shape[1] != g.M) {
    return Status::InvalidArgument("ConvBackwardRef: x " + ShapeToString(x_shape) + ", w " + ShapeToString(w_shape) +
                                   ", y " + ShapeToString(y_shape) + " do not fit group " + std::to_string(g.group));
  }
  return g;
}

// col[(c, i, j), (oh, ow)] = x[c, oh*sh - ph + i*dh, ow*sw - pw + j*dw] (0 outside).
template <typename T>
void Im2Col2d(const Conv2d& g, const T* x, int64_t channels, T* col) {
  const int64_t P = g.OH * g.OW;
  for (int64_t c = 0; c < channels; ++c)
    for (int64_t i = 0; i < g.kh; ++i)
      for (int64_t j = 0; j < g.kw; ++j) {
        T* row = col + ((c * g.kh + i) * g.kw + j) * P;
        const T* xc = x + c * g.H * g.W;
        for (int64_t oh = 0; oh < g.OH; ++oh) {
          const int64_t h = oh * g.sh - g.ph + i * g.dh;
          T* out = row + oh * g.OW;
          if (h < 0 || h >= g.H) {
            std::fill(out, out + g.OW, T(0));
            continue;
          }
          for (int64_t ow = 0; ow < g.OW; ++ow) {
            const int64_t w = ow * g.sw - g.pw + j * g.dw;
            out[ow] = (w >= 0 && w < g.W) ? xc[h * g.W + w] : T(0);
          }
        }
      }
}

// The adjoint of Im2Col2d: dx[c, h, w] += col entries that read it, in
// (c, i, j, oh, ow) order.
template <typename T>
void Col2Im2d(const Conv2d& g, const T* col, int64_t channels, T* dx) {
  const int64_t P = g.OH * g.OW;
  for (int64_t c = 0; c < channels; ++c)
    for (int64_t i = 0; i < g.kh; ++i)
      for (int64_t j = 0; j < g.kw; ++j) {
        const T* row = col + ((c * g.kh + i) * g.kw + j) * P;
        T* xc = dx + c * g.H * g.W;
        for (int64_t oh = 0; oh < g.OH; ++oh) {
          const int64_t h = oh * g.sh - g.ph + i * g.dh;
          if (h < 0 || h >= g.H) continue;
          for (int64_t ow = 0; ow < g.OW; ++ow) {
            const int64_t w = ow * g.sw - g.pw + j * g.dw;
            if (w >= 0 && w < g.W) xc[h * g.W + w] += row[oh * g.OW + ow];
          }
        }
      }
}

// Depthwise (one input and one output channel per group): direct loops, one
// channel per task.
template <typename T>
void DepthwiseBackward(const Conv2d& g, const T* x, const T* w, const T* dy, T* dx, T* dw, ThreadPool* pool) {
  const int64_t HW = g.H * g.W, P = g.OH * g.OW, K = g.kh * g.kw;
  ParallelFor(pool, g.C, 1, [&](int64_t c0, int64_t c1) {
    for (int64_t c = c0; c < c1; ++c) {
      if (dw) std::fill(dw + c * K, dw + (c + 1) * K, T(0));
      for (int64_t n = 0; n < g.N; ++n) {
        const T* xc = x + (n * g.C + c) * HW;
        const T* dyc = dy + (n * g.C + c) * P;
        T* dxc = dx ? dx + (n * g.C + c) * HW : nullptr;
        if (dxc) std::fill(dxc, dxc + HW, T(0));
        for (int64_t i = 0; i < g.kh; ++i)
          for (int64_t j = 0; j < g.kw; ++j) {
            const T wv = w[c * K + i * g.kw + j];
            T acc = 0;
            // Output columns whose tap lands inside the row: ow in [lo, hi).
            const int64_t off = j * g.dw - g.pw;
            int64_t lo = off >= 0 ? 0 : (-off + g.sw - 1) / g.sw;
            int64_t hi = g.W - 1 - off < 0 ? 0 : (g.W - 1 - off) / g.sw + 1;
            hi = std::min(hi, g.OW);
            lo = std::min(lo, hi);
            for (int64_t oh = 0; oh < g.OH; ++oh) {
              const int64_t h = oh * g.sh - g.ph + i * g.dh;
              if (h < 0 || h >= g.H) continue;
              const T* dyr = dyc + oh * g.OW;
              const T* xr = xc + h * g.W + off;
              T* dxr = dxc ? dxc + h * g.W + off : nullptr;
              if (g.sw == 1) {
                for (int64_t ow = lo; ow < hi; ++ow) acc += dyr[ow] * xr[ow];
                if (dxr)
                  for (int64_t ow = lo; ow < hi; ++ow) dxr[ow] += dyr[ow] * wv;
              } else {
                for (int64_t ow = lo; ow < hi; ++ow) acc += dyr[ow] * xr[ow * g.sw];
                if (dxr)
                  for (int64_t ow = lo; ow < hi; ++ow) dxr[ow * g.sw] += dyr[ow] * wv;
              }
            }
            if (dw) dw[c * K + i * g.kw + j] += acc;
          }
      }
    }
  });
}

}  // namespace

template <typename T>
Status ConvBackwardRef(const ConvParams& p, const Shape& x_shape, const T* x, const Shape& w_shape, const T* w,
                       const Shape& y_shape, const T* dy, T* dx, T* dw, T* db, ThreadPool* pool,
                       GradGemmFn<T> gemm) {
  if (!gemm) gemm = GemmRef;
  SPARQ_ASSIGN_OR_RETURN(Conv2d g, Geometry2d(p, x_shape, w_shape, y_shape));
  const int64_t P = g.OH * g.OW, Cg = g.C / g.group, Mg = g.M / g.group, K = Cg * g.kh * g.kw;
  if (db) {
    for (int64_t m = 0; m < g.M; ++m) {
      T acc = 0;
      for (int64_t n = 0; n < g.N; ++n) {
        const T* r = dy + (n * g.M + m) * P;
        for (int64_t i = 0; i < P; ++i) acc += r[i];
      }
      db[m] = acc;
    }
  }
  if (!dx && !dw) return Status::OK();
  if (Cg == 1 && Mg == 1) {
    DepthwiseBackward(g, x, w, dy, dx, dw, pool);
    return Status::OK();
  }
  if (dx) std::fill(dx, dx + g.N * g.C * g.H * g.W, T(0));
  if (dw) std::fill(dw, dw + g.M * K, T(0));
  // A 1x1 convolution of stride 1 without padding reads x as its im2col matrix.
  const bool pointwise = g.kh == 1 && g.kw == 1 && g.sh == 1 && g.sw == 1 && g.ph == 0 && g.pw == 0 && g.OH == g.H &&
                         g.OW == g.W;
  std::vector<T> col(pointwise ? 0 : static_cast<size_t>(K * P));
  for (int64_t n = 0; n < g.N; ++n) {
    for (int64_t grp = 0; grp < g.group; ++grp) {
      const T* dyg = dy + (n * g.M + grp * Mg) * P;
      const T* xg = x + (n * g.C + grp * Cg) * g.H * g.W;
      T* dxg = dx ? dx + (n * g.C + grp * Cg) * g.H * g.W : nullptr;
      if (pointwise) {
        if (dw) gemm(false, true, Mg, K, P, T(1), dyg, P, xg, P, T(1), dw + grp * Mg * K, K, pool);
        if (dx) gemm(true, false, K, P, Mg, T(1), w + grp * Mg * K, K, dyg, P, T(0), dxg, P, pool);
        continue;
      }
      if (dw) {
        Im2Col2d(g, xg, Cg, col.data());
        // dw_g[Mg, K] += dy_g[Mg, P] col[K, P]^T
        gemm(false, true, Mg, K, P, T(1), dyg, P, col.data(), P, T(1), dw + grp * Mg * K, K, pool);
      }
      if (dx) {
        // dcol[K, P] = w_g[Mg, K]^T dy_g[Mg, P]
        gemm(true, false, K, P, Mg, T(1), w + grp * Mg * K, K, dyg, P, T(0), col.data(), P, pool);
        Col2Im2d(g, col.data(), Cg, dxg);
      }
    }
  }
  return Status::OK();
}

// ---------------------------------------------------------------------------
// MatMul / Gemm

template <typename T>
Status MatMulBackwardRef(const Shape& a_shape_in, const T* a, const Shape& b_shape_in, const T* b, const T* dy, T* da,
                         T* db, ThreadPool* pool, GradGemmFn<T> gemm) {
  if (!gemm) gemm = GemmRef;
  if (a_shape_in.empty() || b_shape_in.empty())
    return Status::InvalidArgument("MatMulBackwardRef: scalar operands");
  Shape as = a_shape_in, bs = b_shape_in;
  if (as.size() == 1) as.insert(as.begin(), 1);
  if (bs.size() == 1) bs.push_back(1);
  const int64_t M = as[as.size() - 2], K = as.back(), N = bs.back();
  if (bs[bs.size() - 2] != K)
    return Status::InvalidArgument("MatMulBackwardRef: a " + ShapeToString(a_shape_in) + " and b " +
                                   ShapeToString(b_shape_in) + " differ in the inner dimension");
  const Shape a_batch(as.begin(), as.end() - 2), b_batch(bs.begin(), bs.end() - 2);
  SPARQ_ASSIGN_OR_RETURN(Shape batch, BroadcastShapes({a_batch, b_batch}));
  const int64_t B = NumElements(batch), a_count = NumElements(a_batch), b_count = NumElements(b_batch);
  // A 2-D b shared by every batch of a: one GEMM over all of a's rows.
  if (b_batch.empty() && a_count == B) {
    if (da) gemm(false, true, B * M, K, N, T(1), dy, N, b, N, T(0), da, K, pool);
    if (db) gemm(true, false, K, N, B * M, T(1), a, K, dy, N, T(0), db, N, pool);
    return Status::OK();
  }
  // Offsets of a's and b's matrices for each output batch (broadcast strides).
  auto offsets = [&](const Shape& part) {
    std::vector<int64_t> off(static_cast<size_t>(B), 0);
    const size_t r = batch.size(), pr = part.size();
    std::vector<int64_t> stride(r, 0);
    int64_t s = 1;
    for (size_t d = 0; d < pr; ++d) {
      const size_t od = r - 1 - d, pd = pr - 1 - d;
      stride[od] = part[pd] == 1 ? 0 : s;
      s *= part[pd];
    }
    for (int64_t i = 0; i < B; ++i) {
      int64_t rem = i, o = 0;
      for (size_t d = r; d-- > 0;) {
        o += (rem % batch[d]) * stride[d];
        rem /= batch[d];
      }
      off[static_cast<size_t>(i)] = o;
    }
    return off;
  };
  const std::vector<int64_t> ao = offsets(a_batch), bo = offsets(b_batch);
  if (da) std::fill(da, da + a_count * M * K, T(0));
  if (db) std::fill(db, db + b_count * K * N, T(0));
  for (int64_t i = 0; i < B; ++i) {
    const T* dyi = dy + i * M * N;
    if (da) gemm(false, true, M, K, N, T(1), dyi, N, b + bo[i] * K * N, N, T(1), da + ao[i] * M * K, K, pool);
    if (db) gemm(true, false, K, N, M, T(1), a + ao[i] * M * K, K, dyi, N, T(1), db + bo[i] * K * N, N, pool);
  }
  return Status::OK();
}

template <typename T>
Status GemmBackwardRef(const Shape& a_shape, const T* a, const Shape& b_shape, const T* b, const Shape& c_shape,
                       bool trans_a, bool trans_b, double alpha, double beta, const T* dy, T* da, T* db, T* dc,
                       ThreadPool* pool, GradGemmFn<T> gemm) {
  if (!gemm) gemm = GemmRef;
  if (a_shape.size() != 2 || b_shape.size() != 2 || c_shape.size() > 2)
    return Status::InvalidArgument("GemmBackwardRef: A and B must be 2-D, C at most 2-D");
  const int64_t M = trans_a ? a_shape[1] : a_shape[0], K = trans_a ? a_shape[0] : a_shape[1];
  const int64_t N = trans_b ? b_shape[0] : b_shape[1];
  if ((trans_b ? b_shape[1] : b_shape[0]) != K)
    return Status::InvalidArgument("GemmBackwardRef: A " + ShapeToString(a_shape) + " and B " + ShapeToString(b_shape) +
                                   " differ in the inner dimension");
  const T al = static_cast<T>(alpha);
  // d op(A) = alpha dy B'^T, d op(B) = alpha A'^T dy, with A' = op(A), B' = op(B).
  if (da) {
    if (!trans_a)  // da[M, K] = dy[M, N] op(B)^T
      gemm(false, !trans_b, M, K, N, al, dy, N, b, trans_b ? K : N, T(0), da, K, pool);
    else  // da[K, M] = op(B)[K, N] dy^T
      gemm(trans_b, true, K, M, N, al, b, trans_b ? K : N, dy, N, T(0), da, M, pool);
  }
  if (db) {
    if (!trans_b)  // db[K, N] = op(A)^T dy
      gemm(!trans_a, false, K, N, M, al, a, trans_a ? M : K, dy, N, T(0), db, N, pool);
    else  // db[N, K] = dy^T op(A)
      gemm(true, trans_a, N, K, M, al, dy, N, a, trans_a ? M : K, T(0), db, K, pool);
  }
  if (dc && !c_shape.empty()) {
    Shape cs = c_shape;
    while (cs.size() < 2) cs.insert(cs.begin(), 1);
    const int64_t cm = cs[0], cn = cs[1];
    if ((cm != 1 && cm != M) || (cn != 1 && cn != N))
      return Status::InvalidArgument("GemmBackwardRef: C " + ShapeToString(c_shape) + " does not broadcast to [" +
                                     std::to_string(M) + ", " + std::to_string(N) + "]");
    std::fill(dc, dc + cm * cn, T(0));
    const T be = static_cast<T>(beta);
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) dc[(cm == 1 ? 0 : i) * cn + (cn == 1 ? 0 : j)] += be * dy[i * N + j];
  }
  return Status::OK();
}

// ---------------------------------------------------------------------------
// Elementwise

namespace {

// Strides of `part` (right-aligned) inside `full`, 0 along broadcast axes.
std::vector<int64_t> GradBroadcastStrides(const Shape& part, const Shape& full) {
  std::vector<int64_t> stride(full.size(), 0);
  int64_t s = 1;
  for (size_t d = 0; d < part.size(); ++d) {
    const size_t fd = full.size() - 1 - d, pd = part.size() - 1 - d;
    stride[fd] = part[pd] == 1 ? 0 : s;
    s *= part[pd];
  }
  return stride;
}

}  // namespace

template <typename T>
Status BinaryBackwardRef(BinaryGradOp op, const Shape& a_shape, const T* a, const Shape& b_shape, const T* b,
                         const Shape& y_shape, const T* dy, T* da, T* db) {
  SPARQ_ASSIGN_OR_RETURN(Shape full, BroadcastShapes({a_shape, b_shape}));
  if (full != y_shape)
    return Status::InvalidArgument("BinaryBackwardRef: " + ShapeToString(a_shape) + " and " + ShapeToString(b_shape) +
                                   " broadcast to " + ShapeToString(full) + ", not " + ShapeToString(y_shape));
  const int64_t n = NumElements(y_shape);
  if (da) std::fill(da, da + NumElements(a_shape), T(0));
  if (db) std::fill(db, db + NumElements(b_shape), T(0));
  const std::vector<int64_t> sa = GradBroadcastStrides(a_shape, full), sb = GradBroadcastStrides(b_shape, full);
  const size_t r = full.size();
  std::vector<int64_t> idx(r, 0);
  int64_t ia = 0, ib = 0;
  for (int64_t i = 0; i < n; ++i) {
    const T g = dy[i];
    switch (op) {
      case BinaryGradOp::kAdd:
        if (da) da[ia] += g;
        if (db) db[ib] += g;
        break;
      case BinaryGradOp::kSub:
        if (da) da[ia] += g;
        if (db) db[ib] -= g;
        break;
      case BinaryGradOp::kMul:
        if (da) da[ia] += g * b[ib];
        if (db) db[ib] += g * a[ia];
        break;
      case BinaryGradOp::kDiv:
        if (da) da[ia] += g / b[ib];
        if (db) db[ib] -= g * a[ia] / (b[ib] * b[ib]);
        break;
    }
    for (size_t d = r; d-- > 0;) {  // odometer over the output
      ++idx[d];
      ia += sa[d];
      ib += sb[d];
      if (idx[d] < full[d]) break;
      ia -= sa[d] * full[d];
      ib -= sb[d] * full[d];
      idx[d] = 0;
    }
  }
  return Status::OK();
}

template <typename T>
void UnaryBackwardRef(UnaryGradOp op, double pa, double pb, int64_t n, const T* x, const T* dy, T* dx) {
  const T a = static_cast<T>(pa), b = static_cast<T>(pb);
  const T two_over_sqrt_pi = static_cast<T>(1.1283791670955126);
  switch (op) {  // one loop per op, so each vectorizes
    case UnaryGradOp::kRelu:
      for (int64_t i = 0; i < n; ++i) dx[i] = x[i] > T(0) ? dy[i] : T(0);
      return;
    case UnaryGradOp::kClip:
      for (int64_t i = 0; i < n; ++i) dx[i] = (x[i] >= a && x[i] <= b) ? dy[i] : T(0);
      return;
    case UnaryGradOp::kSigmoid:
      for (int64_t i = 0; i < n; ++i) {
        const T s = T(1) / (T(1) + std::exp(-x[i]));
        dx[i] = dy[i] * s * (T(1) - s);
      }
      return;
    case UnaryGradOp::kHardSigmoid:
      for (int64_t i = 0; i < n; ++i) {
        const T t = a * x[i] + b;
        dx[i] = (t > T(0) && t < T(1)) ? dy[i] * a : T(0);
      }
      return;
    case UnaryGradOp::kHardSwish:
      for (int64_t i = 0; i < n; ++i) {
        const T v = x[i], t = v / T(6) + T(0.5);
        dx[i] = t <= T(0) ? T(0) : (t >= T(1) ? dy[i] : dy[i] * (t + v / T(6)));
      }
      return;
    case UnaryGradOp::kTanh:
      for (int64_t i = 0; i < n; ++i) {
        const T t = std::tanh(x[i]);
        dx[i] = dy[i] * (T(1) - t * t);
      }
      return;
    case UnaryGradOp::kErf:
      for (int64_t i = 0; i < n; ++i) dx[i] = dy[i] * two_over_sqrt_pi * std::exp(-x[i] * x[i]);
      return;
    case UnaryGradOp::kIdentity:
      std::copy_n(dy, n, dx);
      return;
  }
}

namespace {

Status SplitAxis(const Shape& shape, int64_t axis, const char* what, int64_t* outer, int64_t* mid, int64_t* inner) {
  const int64_t r = static_cast<int64_t>(shape.size());
  if (axis < 0) axis += r;
  if (axis < 0 || axis >= r)
    return Status::InvalidArgument(std::string(what) + ": axis out of range for shape " + ShapeToString(shape));
  *outer = 1, *mid = shape[static_cast<size_t>(axis)], *inner = 1;
  for (int64_t d = 0; d < axis; ++d) *outer *= shape[static_cast<size_t>(d)];
  for (int64_t d = axis + 1; d < r; ++d) *inner *= shape[static_cast<size_t>(d)];
  return Status::OK();
}

}  // namespace

template <typename T>
Status SoftmaxBackwardRef(const Shape& shape, int64_t axis, const T* y, const T* dy, T* dx) {
  int64_t outer, mid, inner;
  SPARQ_RETURN_IF_ERROR(SplitAxis(shape, axis, "SoftmaxBackwardRef", &outer, &mid, &inner));
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t in = 0; in < inner; ++in) {
      const int64_t base = o * mid * inner + in;
      T dot = 0;
      for (int64_t k = 0; k < mid; ++k) dot += dy[base + k * inner] * y[base + k * inner];
      for (int64_t k = 0; k < mid; ++k) {
        const int64_t i = base + k * inner;
        dx[i] = y[i] * (dy[i] - dot);
      }
    }
  return Status::OK();
}

template <typename T>
Status LayerNormBackwardRef(const Shape& x_shape, int64_t axis, double epsilon, const T* x, const T* scale,
                            const T* dy, T* dx, T* dscale, T* dbias) {
  const int64_t r = static_cast<int64_t>(x_shape.size());
  if (axis < 0) axis += r;
  if (axis < 0 || axis >= r)
    return Status::InvalidArgument("LayerNormBackwardRef: axis out of range for shape " + ShapeToString(x_shape));
  int64_t rows = 1, D = 1;
  for (int64_t d = 0; d < r; ++d) (d < axis ? rows : D) *= x_shape[static_cast<size_t>(d)];
  if (dscale) std::fill(dscale, dscale + D, T(0));
  if (dbias) std::fill(dbias, dbias + D, T(0));
  std::vector<T> xhat(static_cast<size_t>(D));
  for (int64_t row = 0; row < rows; ++row) {
    const T* xr = x + row * D;
    const T* g = dy + row * D;
    T mean = 0;
    for (int64_t k = 0; k < D; ++k) mean += xr[k];
    mean /= static_cast<T>(D);
    T var = 0;
    for (int64_t k = 0; k < D; ++k) var += (xr[k] - mean) * (xr[k] - mean);
    var /= static_cast<T>(D);
    const T rstd = T(1) / std::sqrt(var + static_cast<T>(epsilon));
    T sum_g = 0, sum_gx = 0;  // of g * scale, and of g * scale * xhat
    for (int64_t k = 0; k < D; ++k) {
      xhat[k] = (xr[k] - mean) * rstd;
      const T gs = g[k] * scale[k];
      sum_g += gs;
      sum_gx += gs * xhat[k];
      if (dscale) dscale[k] += g[k] * xhat[k];
      if (dbias) dbias[k] += g[k];
    }
    if (dx) {
      const T inv_d = T(1) / static_cast<T>(D);
      for (int64_t k = 0; k < D; ++k)
        dx[row * D + k] = rstd * (g[k] * scale[k] - inv_d * sum_g - xhat[k] * inv_d * sum_gx);
    }
  }
  return Status::OK();
}

// ---------------------------------------------------------------------------
// Data movement

template <typename T>
Status TransposeBackwardRef(const Shape& x_shape, const std::vector<int64_t>& perm_in, const T* dy, T* dx) {
  const size_t r = x_shape.size();
  std::vector<int64_t> perm = perm_in;
  if (perm.empty())
    for (size_t d = 0; d < r; ++d) perm.push_back(static_cast<int64_t>(r - 1 - d));
  if (perm.size() != r) return Status::InvalidArgument("TransposeBackwardRef: perm does not match the rank");
  // y[j] = x[idx] with y's axis k = x's axis perm[k]; dx[idx] = dy[j].
  Shape y_shape(r);
  for (size_t k = 0; k < r; ++k) {
    if (perm[k] < 0 || perm[k] >= static_cast<int64_t>(r)) return Status::InvalidArgument("TransposeBackwardRef: bad perm");
    y_shape[k] = x_shape[static_cast<size_t>(perm[k])];
  }
  std::vector<int64_t> x_stride(r, 1);
  for (size_t d = r; d-- > 1;) x_stride[d - 1] = x_stride[d] * x_shape[d];
  std::vector<int64_t> step(r);  // x offset per step along y's axis k
  for (size_t k = 0; k < r; ++k) step[k] = x_stride[static_cast<size_t>(perm[k])];
  const int64_t n = NumElements(y_shape);
  std::vector<int64_t> idx(r, 0);
  int64_t off = 0;
  for (int64_t j = 0; j < n; ++j) {
    dx[off] = dy[j];
    for (size_t k = r; k-- > 0;) {
      ++idx[k];
      off += step[k];
      if (idx[k] < y_shape[k]) break;
      off -= step[k] * y_shape[k];
      idx[k] = 0;
    }
  }
  return Status::OK();
}

template <typename T>
Status PadBackwardRef(const Shape& x_shape, const std::vector<int64_t>& pads, const T* dy, T* dx) {
  const size_t r = x_shape.size();
  if (pads.size() != 2 * r) return Status::InvalidArgument("PadBackwardRef: pads must hold 2 * rank values");
  if (r == 0) {
    dx[0] = dy[0];
    return Status::OK();
  }
  Shape y_shape(r);
  for (size_t d = 0; d < r; ++d) y_shape[d] = x_shape[d] + pads[d] + pads[d + r];
  std::vector<int64_t> y_stride(r, 1);
  for (size_t d = r; d-- > 1;) y_stride[d - 1] = y_stride[d] * y_shape[d];
  // Row by row along the last axis: x[.., k] came from y[.., k + pad_begin].
  const int64_t W = x_shape[r - 1], pb = pads[r - 1], YW = y_shape[r - 1];
  const int64_t lo = std::max<int64_t>(0, -pb), hi = std::min<int64_t>(W, YW - pb);  // x columns kept
  const int64_t rows = W > 0 ? NumElements(x_shape) / W : 0;
  std::vector<int64_t> idx(r, 0);
  for (int64_t row = 0; row < rows; ++row) {
    int64_t off = 0;
    bool inside = true;
    for (size_t d = 0; d + 1 < r; ++d) {
      const int64_t yd = idx[d] + pads[d];
      if (yd < 0 || yd >= y_shape[d]) inside = false;
      off += yd * y_stride[d];
    }
    T* out = dx + row * W;
    std::fill(out, out + W, T(0));  // cropped-away (negative pad) entries get no gradient
    if (inside)
      for (int64_t k = lo; k < hi; ++k) out[k] = dy[off + k + pb];
    for (size_t d = r - 1; d-- > 0;) {
      if (++idx[d] < x_shape[d]) break;
      idx[d] = 0;
    }
  }
  return Status::OK();
}

template <typename T>
Status ConcatBackwardRef(const std::vector<Shape>& x_shapes, int64_t axis, const T* dy, const std::vector<T*>& dxs) {
  if (x_shapes.empty() || x_shapes.size() != dxs.size())
    return Status::InvalidArgument("ConcatBackwardRef: one gradient slot per input needed");
  const int64_t r = static_cast<int64_t>(x_shapes[0].size());
  if (axis < 0) axis += r;
  if (axis < 0 || axis >= r) return Status::InvalidArgument("ConcatBackwardRef: axis out of range");
  int64_t outer = 1, inner = 1, total = 0;
  for (int64_t d = 0; d < axis; ++d) outer *= x_shapes[0][static_cast<size_t>(d)];
  for (int64_t d = axis + 1; d < r; ++d) inner *= x_shapes[0][static_cast<size_t>(d)];
  for (const Shape& s : x_shapes) total += s[static_cast<size_t>(axis)] * inner;
  int64_t start = 0;
  for (size_t i = 0; i < x_shapes.size(); ++i) {
    const int64_t len = x_shapes[i][static_cast<size_t>(axis)] * inner;
    if (dxs[i])
      for (int64_t o = 0; o < outer; ++o) std::copy_n(dy + o * total + start, len, dxs[i] + o * len);
    start += len;
  }
  return Status::OK();
}

template <typename T>
Status GlobalAveragePoolBackwardRef(const Shape& x_shape, const T* dy, T* dx) {
  if (x_shape.size() < 3) return Status::InvalidArgument("GlobalAveragePoolBackwardRef: x needs spatial axes");
  const int64_t nc = x_shape[0] * x_shape[1], s = NumElements(x_shape) / std::max<int64_t>(nc, 1);
  for (int64_t i = 0; i < nc; ++i) std::fill(dx + i * s, dx + (i + 1) * s, dy[i] / static_cast<T>(s));
  return Status::OK();
}

template <typename T>
Status ReduceBackwardRef(const Shape& x_shape, const Shape& dy_shape, double scale, const T* dy, T* dx) {
  if (dy_shape.size() != x_shape.size())
    return Status::InvalidArgument("ReduceBackwardRef: dy " + ShapeToString(dy_shape) + " must keep x's rank " +
                                   ShapeToString(x_shape));
  for (size_t d = 0; d < x_shape.size(); ++d)
    if (dy_shape[d] != 1 && dy_shape[d] != x_shape[d])
      return Status::InvalidArgument("ReduceBackwardRef: dy " + ShapeToString(dy_shape) + " does not broadcast to " +
                                     ShapeToString(x_shape));
  const std::vector<int64_t> st = GradBroadcastStrides(dy_shape, x_shape);
  const size_t r = x_shape.size();
  const int64_t n = NumElements(x_shape);
  const T s = static_cast<T>(scale);
  std::vector<int64_t> idx(r, 0);
  int64_t off = 0;
  for (int64_t i = 0; i < n; ++i) {
    dx[i] = dy[off] * s;
    for (size_t d = r; d-- > 0;) {
      ++idx[d];
      off += st[d];
      if (idx[d] < x_shape[d]) break;
      off -= st[d] * x_shape[d];
      idx[d] = 0;
    }
  }
  return Status::OK();
}

#define SPARQ_GRAD_INSTANTIATE(T)                                                                                  \
  template Status ConvBackwardRef<T>(const ConvParams&, const Shape&, const T*, const Shape&, const T*,           \
                                     const Shape&, const T*, T*, T*, T*, ThreadPool*, GradGemmFn<T>);             \
  template Status MatMulBackwardRef<T>(const Shape&, const T*, const Shape&, const T*, const T*, T*, T*,          \
                                       ThreadPool*, GradGemmFn<T>);                                               \
  template Status GemmBackwardRef<T>(const Shape&, const T*, const Shape&, const T*, const Shape&, bool, bool,    \
                                     double, double, const T*, T*, T*, T*, ThreadPool*, GradGemmFn<T>);           \
  template Status BinaryBackwardRef<T>(BinaryGradOp, const Shape&, const T*, const Shape&, const T*,              \
                                       const Shape&, const T*, T*, T*);                                           \
  template void UnaryBackwardRef<T>(UnaryGradOp, double, double, int64_t, const T*, const T*, T*);                \
  template Status SoftmaxBackwardRef<T>(const Shape&, int64_t, const T*, const T*, T*);                           \
  template Status LayerNormBackwardRef<T>(const Shape&, int64_t, double, const T*, const T*, const T*, T*, T*,    \
                                          T*);                                                                    \
  template Status TransposeBackwardRef<T>(const Shape&, const std::vector<int64_t>&, const T*, T*);               \
  template Status PadBackwardRef<T>(const Shape&, const std::vector<int64_t>&, const T*, T*);                     \
  template Status ConcatBackwardRef<T>(const std::vector<Shape>&, int64_t, const T*, const std::vector<T*>&);     \
  template Status GlobalAveragePoolBackwardRef<T>(const Shape&, const T*, T*);                                    \
  template Status ReduceBackwardRef<T>(const Shape&, const Shape&, double, const T*, T*);

SPARQ_GRAD_INSTANTIATE(float)
SPARQ_GRAD_INSTANTIATE(double)
#undef SPARQ_GRAD_INSTANTIATE

}  // namespace sparq
