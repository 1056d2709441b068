// Reference kernels of ONNX's integer convolutions:
//   ConvInteger:  y(int32) = conv(x - x_zero_point, w - w_zero_point)
//   QLinearConv:  y(int8/uint8) = requantize(conv(...) + B, x_scale * w_scale / y_scale, y_zero_point)
// Both run as im2col + GemmS32Ref per (batch, group), like the float Conv of
// conv.cc, whose shape checks and window geometry (PrepareConv) they reuse:
//
//   col[Cg * taps, P]   row (c, t) = x_g[c] sampled at tap t for each output position p,
//                       padding positions hold x_zero_point (so they add 0)
//   acc_g[Mg, P]  =  (w_g - w_zp)[Mg, Cg * taps] * (col - x_zp)
//
// The accumulation is exact int32 (gemm_int.h); QLinearConv then applies
// RequantizeS32Ref (quantize.h) per output channel.
#include <algorithm>
#include <string>
#include <vector>

#include "kernels/op_context.h"
#include "kernels/parallel.h"
#include "kernels/ref/conv.h"
#include "kernels/ref/gemm_int.h"
#include "kernels/ref/nn_common.h"
#include "kernels/ref/quant_util.h"
#include "kernels/ref/quantize.h"
#include "kernels/registry.h"

namespace sparq {
namespace {

// Largest im2col buffer, in elements (16 MiB of 8-bit values); larger images
// are processed in blocks of output positions (block size from shapes only).
constexpr int64_t kMaxColElements = int64_t{1} << 24;

// Spatial geometry of one (batch, group) slice, in the form the loops use.
// (Mirrors the private Geometry of conv.cc; see the report on sharing it.)
struct IntConvGeometry {
  size_t rank = 0;  // R spatial dims
  std::vector<int64_t> in, out, kernel, stride, dilation, pad_begin;
  int64_t in_size = 1, out_size = 1, taps = 1;
  bool direct = false;  // 1x1 window, stride 1, no padding: col would equal x

  IntConvGeometry(const ConvParams& p, const Shape& x_shape, const Shape& y_shape)
      : rank(x_shape.size() - 2),
        in(x_shape.begin() + 2, x_shape.end()),
        out(y_shape.begin() + 2, y_shape.end()),
        kernel(p.window.kernel),
        stride(p.window.strides),
        dilation(p.window.dilations),
        pad_begin(p.window.pads.begin(), p.window.pads.begin() + static_cast<std::ptrdiff_t>(rank)) {
    for (int64_t v : in) in_size *= v;
    for (int64_t v : out) out_size *= v;
    for (int64_t v : kernel) taps *= v;
    direct = taps == 1;
    for (size_t d = 0; d < rank; ++d) {
      direct = direct && stride[d] == 1 && p.window.pads[d] == 0 && p.window.pads[rank + d] == 0;
    }
  }
};

// col[r, p - p0] for rows r = (c, t), c < channels, t < taps (row-major over
// the kernel), and output positions p in [p0, p1); taps that fall in the
// padding read `pad`.
template <typename T>
void Im2ColInt(const IntConvGeometry& g, const T* x, int64_t channels, int64_t p0, int64_t p1, T pad, T* col,
               ThreadPool* pool) {
  const int64_t width = p1 - p0;
  const size_t last = g.rank - 1;
  const int64_t line_len = g.out[last];
  ParallelFor(pool, channels * g.taps, std::max<int64_t>(1, 16384 / std::max<int64_t>(1, width)),
              [&](int64_t r0, int64_t r1) {
                std::vector<int64_t> tap(g.rank), o(g.rank);
                for (int64_t r = r0; r < r1; ++r) {
                  const T* xc = x + (r / g.taps) * g.in_size;
                  for (int64_t t = r % g.taps, d = static_cast<int64_t>(last); d >= 0; --d) {
                    tap[d] = t % g.kernel[d];
                    t /= g.kernel[d];
                  }
                  // Multi-index of output position p0.
                  for (int64_t rest = p0, d = static_cast<int64_t>(last); d >= 0; --d) {
                    o[d] = rest % g.out[d];
                    rest /= g.out[d];
                  }
                  T* dst = col + r * width;
                  for (int64_t p = p0; p < p1;) {
                    const int64_t len = std::min(line_len - o[last], p1 - p);
                    T* line = dst + (p - p0);
                    // Offset of the line's outer input coordinates; -1 when any lies in the padding.
                    int64_t offset = 0;
                    for (size_t d = 0; d < last && offset >= 0; ++d) {
                      const int64_t pos = o[d] * g.stride[d] - g.pad_begin[d] + tap[d] * g.dilation[d];
                      offset = (pos < 0 || pos >= g.in[d]) ? -1 : offset * g.in[d] + pos;
                    }
                    if (offset < 0) {
                      std::fill(line, line + len, pad);
                    } else {
                      const T* xrow = xc + offset * g.in[last];
                      const int64_t s = g.stride[last], w = g.in[last];
                      const int64_t start = o[last] * s - g.pad_begin[last] + tap[last] * g.dilation[last];
                      for (int64_t j = 0; j < len; ++j) {
                        const int64_t pos = start + j * s;
                        line[j] = (pos >= 0 && pos < w) ? xrow[pos] : pad;
                      }
                    }
                    p += len;
                    o[last] += len;
                    for (size_t d = last; d > 0 && o[d] == g.out[d]; --d) {
                      o[d] = 0;
                      ++o[d - 1];
                    }
                  }
                }
              });
}

// Runs body(item, pool_for_item) for item in [0, items): in parallel over
// items when there are enough to keep the pool busy (depthwise convs, large
// batches), else one after another with the pool handed to the body.
template <typename Body>
void ForEachConvItem(int64_t items, ThreadPool* pool, Body&& body) {
  if (pool != nullptr && pool->num_threads() > 1 && items >= 2 * pool->num_threads()) {
    ParallelFor(pool, items, 1, [&](int64_t b, int64_t e) {
      for (int64_t it = b; it < e; ++it) body(it, nullptr);
    });
  } else {
    for (int64_t it = 0; it < items; ++it) body(it, pool);
  }
}

// acc[n, m, p] = sum over (c, t) of (x[n, g*Cg + c, tap t of p] - x_zp) * (w[m, c, t] - w_zp[m]),
// taps in the padding contributing 0. w_zp holds one value, or one per output channel.
template <typename TX, typename TW>
void IntegerConv(const ConvParams& p, const Shape& xs, const TX* x, int32_t x_zp, const Shape& ws, const TW* w,
                 const std::vector<int32_t>& w_zp, const Shape& ys, int32_t* acc, ThreadPool* pool) {
  const IntConvGeometry g(p, xs, ys);
  const int64_t N = xs[0], C = xs[1], M = ws[0], G = p.group;
  const int64_t Cg = C / G, Mg = M / G;
  const int64_t depth = Cg * g.taps;  // GEMM K
  const int64_t block =
      g.direct ? g.out_size : std::max<int64_t>(1, std::min(g.out_size, kMaxColElements / std::max<int64_t>(1, depth)));
  const bool w_zp_per_channel = w_zp.size() > 1;

  ForEachConvItem(N * G, pool, [&](int64_t item, ThreadPool* item_pool) {
    const int64_t n = item / G, grp = item % G;
    const TX* xg = x + (n * C + grp * Cg) * g.in_size;
    const TW* wg = w + grp * Mg * depth;
    int32_t* accg = acc + (n * M + grp * Mg) * g.out_size;
    const GemmZeroPoints a_zp{w_zp.data() + (w_zp_per_channel ? grp * Mg : 0), w_zp_per_channel};
    std::vector<TX> col;
    if (!g.direct) col.resize(static_cast<size_t>(depth * std::min(block, g.out_size)));
    for (int64_t p0 = 0; p0 < g.out_size; p0 += block) {
      const int64_t p1 = std::min(g.out_size, p0 + block);
      const TX* b = xg;
      int64_t ldb = g.out_size;
      if (!g.direct) {
        Im2ColInt(g, xg, Cg, p0, p1, static_cast<TX>(x_zp), col.data(), item_pool);
        b = col.data();
        ldb = p1 - p0;
      }
      // Rows of w_g (output channels) split across the pool.
      const int64_t grain = std::max<int64_t>(1, (int64_t{1} << 16) / std::max<int64_t>(1, (p1 - p0) * depth));
      ParallelFor(item_pool, Mg, grain, [&](int64_t m0, int64_t m1) {
        const GemmZeroPoints azp{a_zp.values + (w_zp_per_channel ? m0 : 0), w_zp_per_channel};
        GemmS32Ref<TW, TX>(m1 - m0, p1 - p0, depth, wg + m0 * depth, depth, azp, b, ldb, GemmZeroPoints{&x_zp, false},
                           accg + m0 * g.out_size + p0, g.out_size);
      });
    }
  });
}

// Reads group and the window attributes and checks shapes (PrepareConv).
Status PrepareIntConv(const OpContext& ctx, const Tensor& x, const Tensor& w, ConvParams* p, Shape* y_shape) {
  AutoPad auto_pad = AutoPad::kNotSet;
  SPARQ_RETURN_IF_ERROR(ReadWindowAttributes(ctx, &p->window, &auto_pad));
  p->group = ctx.node().attr_int("group", 1);
  Status st = PrepareConv(x.shape(), w.shape(), auto_pad, p, y_shape);
  if (!st.ok()) return st.WithContext(ctx.node().Describe());
  return Status::OK();
}

// x's zero point (one value) and w's (one value or one per output channel M).
struct ConvZeroPoints {
  int32_t x = 0;
  std::vector<int32_t> w{0};
};

// x = input(0), w = input(w_in); their zero points are inputs x_zp_in, w_zp_in.
StatusOr<ConvZeroPoints> ReadConvZeroPoints(const OpContext& ctx, size_t x_zp_in, size_t w_in, size_t w_zp_in) {
  const int64_t M = ctx.input(w_in).dim(0);
  ConvZeroPoints zp;
  SPARQ_RETURN_IF_ERROR(CheckZeroPoint(ctx, x_zp_in, ctx.input(0).dtype(), -1, "x_zero_point"));
  SPARQ_RETURN_IF_ERROR(CheckZeroPoint(ctx, w_zp_in, ctx.input(w_in).dtype(), -1, "w_zero_point"));
  if (ctx.has_input(x_zp_in)) {
    SPARQ_ASSIGN_OR_RETURN(const std::vector<int32_t> v, ReadZeroPoints(ctx, ctx.input(x_zp_in), "x_zero_point"));
    SPARQ_ASSIGN_OR_RETURN(zp.x, SingleValue(ctx, v, "x_zero_point"));
  }
  if (ctx.has_input(w_zp_in)) {
    SPARQ_ASSIGN_OR_RETURN(zp.w, ReadZeroPoints(ctx, ctx.input(w_zp_in), "w_zero_point"));
    const int64_t n = static_cast<int64_t>(zp.w.size());
    if (n != 1 && n != M) {
      return ctx.InvalidArgument("w_zero_point has " + std::to_string(n) + " values; expected 1 (per-tensor) or " +
                                 std::to_string(M) + " (one per output channel)");
    }
  }
  return zp;
}

// The int32 accumulators of ConvInteger / QLinearConv; x = input(0) and
// w = input(w_in) are uint8 or int8.
StatusOr<Tensor> IntegerConvAcc(const OpContext& ctx, size_t w_in, const ConvParams& p, const Shape& y_shape,
                                const ConvZeroPoints& zp) {
  const Tensor& x = ctx.input(0);
  const Tensor& w = ctx.input(w_in);
  Tensor acc(DataType::kInt32, y_shape);
  Status st = VisitInt8Type(ctx, x.dtype(), "x", [&](auto x_tag) {
    using TX = decltype(x_tag);
    return VisitInt8Type(ctx, w.dtype(), "w", [&](auto w_tag) {
      using TW = decltype(w_tag);
      IntegerConv<TX, TW>(p, x.shape(), x.data<TX>(), zp.x, w.shape(), w.data<TW>(), zp.w, y_shape, acc.data<int32_t>(),
                          ctx.pool());
      return Status::OK();
    });
  });
  if (!st.ok()) return st;
  return acc;
}

// ConvInteger(x, w, x_zero_point, w_zero_point) -> int32.
Status ConvInteger(OpContext& ctx) {
  SPARQ_RETURN_IF_ERROR(ctx.RequireInputs(2));
  ConvParams p;
  Shape y_shape;
  SPARQ_RETURN_IF_ERROR(PrepareIntConv(ctx, ctx.input(0), ctx.input(1), &p, &y_shape));
  SPARQ_ASSIGN_OR_RETURN(const ConvZeroPoints zp, ReadConvZeroPoints(ctx, 2, 1, 3));
  SPARQ_ASSIGN_OR_RETURN(Tensor acc, IntegerConvAcc(ctx, 1, p, y_shape, zp));
  ctx.set_output(0, std::move(acc));
  return Status::OK();
}

// QLinearConv(x, x_scale, x_zero_point, w, w_scale, w_zero_point, y_scale, y_zero_point, B):
//   y[n, m, p] = saturate(RoundHalfToEven(float32(acc + B[m]) * multiplier[m]) + y_zero_point)
//   multiplier[m] = (x_scale * w_scale[m]) / y_scale          (float32, RequantMultiplier)
Status QLinearConv(OpContext& ctx) {
  SPARQ_RETURN_IF_ERROR(ctx.RequireInputs(8));
  const Tensor& x = ctx.input(0);
  const Tensor& w = ctx.input(3);
  ConvParams p;
  Shape y_shape;
  SPARQ_RETURN_IF_ERROR(PrepareIntConv(ctx, x, w, &p, &y_shape));
  const int64_t M = w.dim(0);

  SPARQ_ASSIGN_OR_RETURN(const std::vector<float> x_scale_v, ReadScales(ctx, ctx.input(1), "x_scale"));
  SPARQ_ASSIGN_OR_RETURN(const float x_scale, SingleValue(ctx, x_scale_v, "x_scale"));
  SPARQ_ASSIGN_OR_RETURN(const std::vector<float> w_scale, ReadScales(ctx, ctx.input(4), "w_scale"));
  const int64_t num_w_scales = static_cast<int64_t>(w_scale.size());
  if (num_w_scales != 1 && num_w_scales != M) {
    return ctx.InvalidArgument("w_scale has " + std::to_string(num_w_scales) + " values; expected 1 (per-tensor) or " +
                               std::to_string(M) + " (one per output channel of w " + ShapeToString(w.shape()) + ")");
  }
  SPARQ_ASSIGN_OR_RETURN(const std::vector<float> y_scale_v, ReadScales(ctx, ctx.input(6), "y_scale"));
  SPARQ_ASSIGN_OR_RETURN(const float y_scale, SingleValue(ctx, y_scale_v, "y_scale"));
  SPARQ_ASSIGN_OR_RETURN(const ConvZeroPoints zp, ReadConvZeroPoints(ctx, 2, 3, 5));
  const DataType y_type = ctx.input(7).dtype();
  SPARQ_ASSIGN_OR_RETURN(const std::vector<int32_t> y_zp_v, ReadZeroPoints(ctx, ctx.input(7), "y_zero_point"));
  SPARQ_ASSIGN_OR_RETURN(const int32_t y_zp, SingleValue(ctx, y_zp_v, "y_zero_point"));

  const int32_t* bias = nullptr;
  if (ctx.has_input(8)) {
    const Tensor& b = ctx.input(8);
    if (b.dtype() != DataType::kInt32 || b.numel() != M) {
      return ctx.InvalidArgument("B has type " + DataTypeName(b.dtype()) + " and shape " + ShapeToString(b.shape()) +
                                 "; expected int32 with " + std::to_string(M) + " values (one per output channel)");
    }
    bias = b.data<int32_t>();
  }
  std::vector<float> multiplier(static_cast<size_t>(M));
  for (int64_t m = 0; m < M; ++m) {
    multiplier[m] = RequantMultiplier(x_scale, w_scale[num_w_scales == 1 ? 0 : m], y_scale);
  }

  SPARQ_ASSIGN_OR_RETURN(const Tensor acc, IntegerConvAcc(ctx, 3, p, y_shape, zp));
  return VisitInt8Type(ctx, y_type, "y_zero_point", [&](auto tag) {
    using T = decltype(tag);
    Tensor y(y_type, y_shape);
    const int64_t rows = y_shape[0] * M;  // (n, m) rows of P output positions
    const int64_t P = rows == 0 ? 0 : acc.numel() / rows;
    const int32_t* accp = acc.data<int32_t>();
    T* yp = y.data<T>();
    ParallelFor(ctx.pool(), rows, std::max<int64_t>(1, 4096 / std::max<int64_t>(1, P)), [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        const int64_t m = r % M;
        RequantizeS32Ref<T>(P, accp + r * P, bias != nullptr ? bias + m : nullptr, 0, &multiplier[m], 0, y_zp,
                            /*fuse_relu=*/false, yp + r * P);
      }
    });
    ctx.set_output(0, std::move(y));
    return Status::OK();
  });
}

}  // namespace

void RegisterQuantConvOps(KernelRegistry& r) {
  r.Add({"ConvInteger", "", 10, 99, ConvInteger, "ref"});
  r.Add({"QLinearConv", "", 10, 99, QLinearConv, "ref"});
}

}  // namespace sparq
