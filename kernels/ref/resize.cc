// Reference Resize (opsets 10..19) and Upsample (opsets 7..9).
//
// Every output coordinate x along an axis maps to a source coordinate x_ori
// (coordinate_transformation_mode), from which the mode picks input samples:
//
//   nearest  one sample, rounded per nearest_mode
//   linear   2 samples, weights (1 - t, t)           t = x_ori - floor(x_ori)
//   cubic    4 samples, Keys' cubic with cubic_coeff_a
//
// With antialias=1 (opset 18) a downscaling linear/cubic filter is widened by
// 1/scale. Samples past the border repeat the edge value, or with
// exclude_outside=1 get weight 0 and the other weights are renormalized.
// tf_crop_and_resize maps x through the roi and writes extrapolation_value
// where x_ori falls outside the input.
//
// The interpolation is separable, so linear and cubic resize one axis at a
// time (in increasing axis order, skipping axes that keep their size at scale
// 1), exactly as ONNX's reference implementation; nearest gathers directly.
// Resize-10 and Upsample use asymmetric coordinates and, for nearest, floor
// when upscaling and ceil when downscaling (ONNX Runtime's behavior; the old
// specs leave it open).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "kernels/parallel.h"
#include "kernels/ref/reduce_common.h"
#include "kernels/registry.h"

namespace sparq {
namespace {

using reduce_common::AxesToMask;
using reduce_common::IsHalfType;
using reduce_common::RunAsFloat32;

enum class ResizeMode { kNearest, kLinear, kCubic };
enum class CoordMode {
  kHalfPixel,
  kHalfPixelSymmetric,
  kPytorchHalfPixel,
  kAlignCorners,
  kAsymmetric,
  kTfHalfPixelForNn,
  kTfCropAndResize
};
enum class NearestMode { kRoundPreferFloor, kRoundPreferCeil, kFloor, kCeil, kLegacy };

// Everything the resize needs, per dimension of the input.
struct ResizeSpec {
  ResizeMode mode = ResizeMode::kNearest;
  CoordMode coord = CoordMode::kHalfPixel;
  NearestMode nearest = NearestMode::kRoundPreferFloor;
  double cubic_a = -0.75;
  bool exclude_outside = false;
  bool antialias = false;
  double extrapolation = 0.0;
  std::vector<double> scales;    // per dimension
  Shape out_shape;
  std::vector<double> roi;       // 2 * rank (starts, then ends); empty unless tf_crop_and_resize
};

// How one axis maps output coordinates to input samples: output coordinate j
// reads input indices index[j * taps + t] with weights weight[j * taps + t];
// outside[j] marks tf_crop_and_resize coordinates that get extrapolation_value.
struct AxisPlan {
  bool identity = true;
  int64_t taps = 1;
  std::vector<int64_t> index;
  std::vector<double> weight;
  std::vector<uint8_t> outside;
};

// ---------------------------------------------------------------------------
// Coordinates and filter weights.

double SourceCoordinate(const ResizeSpec& s, size_t d, int64_t x, int64_t in_w, bool* outside) {
  const double scale = s.scales[d];
  const double out_w = scale * static_cast<double>(in_w);  // as the spec: not the rounded size
  const double xd = static_cast<double>(x);
  *outside = false;
  switch (s.coord) {
    case CoordMode::kAlignCorners:
      return out_w == 1.0 ? 0.0 : xd * static_cast<double>(in_w - 1) / (out_w - 1.0);
    case CoordMode::kAsymmetric:
      return xd / scale;
    case CoordMode::kTfCropAndResize: {
      const size_t rank = s.scales.size();
      const double start = s.roi[d], end = s.roi[rank + d];
      double x_ori = out_w == 1.0 ? (end - start) * static_cast<double>(in_w - 1) / 2.0
                                  : xd * (end - start) * static_cast<double>(in_w - 1) / (out_w - 1.0);
      x_ori += start * static_cast<double>(in_w - 1);
      *outside = x_ori < 0.0 || x_ori > static_cast<double>(in_w - 1);
      return x_ori;
    }
    case CoordMode::kPytorchHalfPixel:
      return out_w == 1.0 ? -0.5 : (xd + 0.5) / scale - 0.5;
    case CoordMode::kHalfPixel:
      return (xd + 0.5) / scale - 0.5;
    case CoordMode::kHalfPixelSymmetric: {
      const double adjustment = static_cast<double>(s.out_shape[d]) / out_w;
      const double center = static_cast<double>(in_w) / 2.0;
      return center * (1.0 - adjustment) + (xd + 0.5) / scale - 0.5;
    }
    case CoordMode::kTfHalfPixelForNn:
      return (xd + 0.5) / scale;
  }
  return 0.0;
}

int64_t NearestIndex(NearestMode mode, double x_ori, double scale) {
  if (mode == NearestMode::kLegacy) {
    return scale < 1.0 ? static_cast<int64_t>(std::ceil(x_ori)) : static_cast<int64_t>(x_ori);
  }
  const double x0 = std::floor(x_ori);
  const double ratio = x_ori - x0;
  if (ratio == 0.0) return static_cast<int64_t>(x0);
  bool up = false;
  switch (mode) {
    case NearestMode::kRoundPreferFloor: up = ratio > 0.5; break;
    case NearestMode::kRoundPreferCeil: up = ratio >= 0.5; break;
    case NearestMode::kFloor: up = false; break;
    case NearestMode::kCeil: up = true; break;
    case NearestMode::kLegacy: break;
  }
  return static_cast<int64_t>(x0) + (up ? 1 : 0);
}

// Keys' cubic convolution kernel at distance x.
double CubicKernel(double x, double a) {
  x = std::fabs(x);
  if (x <= 1.0) return ((a + 2.0) * x - (a + 3.0)) * x * x + 1.0;
  if (x < 2.0) return ((a * x - 5.0 * a) * x + 8.0 * a) * x - 4.0 * a;
  return 0.0;
}

// First tap offset (relative to floor(x_ori)) and the number of taps of the
// linear/cubic filter at `scale`.
void FilterExtent(const ResizeSpec& s, double scale, int64_t* first, int64_t* taps) {
  const double support = s.mode == ResizeMode::kLinear ? 1.0 : 2.0;
  if (s.antialias && scale < 1.0) {
    *first = static_cast<int64_t>(std::floor(-support / scale) + 1.0);
  } else {
    *first = s.mode == ResizeMode::kLinear ? 0 : -1;
  }
  *taps = 2 - 2 * *first;
}

// Weights of the taps first .. first + taps - 1 at fractional offset `ratio`.
void FilterWeights(const ResizeSpec& s, double scale, double ratio, int64_t first, int64_t taps, double* w) {
  if (!s.antialias) {
    if (s.mode == ResizeMode::kLinear) {
      w[0] = 1.0 - ratio;
      w[1] = ratio;
    } else {
      // The same expressions as ONNX's reference, so results match bit for bit.
      const double a = s.cubic_a;
      w[0] = ((a * (ratio + 1) - 5 * a) * (ratio + 1) + 8 * a) * (ratio + 1) - 4 * a;
      w[1] = ((a + 2) * ratio - (a + 3)) * ratio * ratio + 1;
      w[2] = ((a + 2) * (1 - ratio) - (a + 3)) * (1 - ratio) * (1 - ratio) + 1;
      w[3] = ((a * ((1 - ratio) + 1) - 5 * a) * ((1 - ratio) + 1) + 8 * a) * ((1 - ratio) + 1) - 4 * a;
    }
    return;
  }
  const double sc = std::min(scale, 1.0);
  double sum = 0.0;
  for (int64_t k = 0; k < taps; ++k) {
    const double arg = sc * (static_cast<double>(first + k) - ratio);
    w[k] = s.mode == ResizeMode::kLinear ? std::clamp(1.0 - std::fabs(arg), 0.0, 1.0) : CubicKernel(arg, s.cubic_a);
    sum += w[k];
  }
  for (int64_t k = 0; k < taps; ++k) w[k] /= sum;
}

AxisPlan PlanAxis(const ResizeSpec& s, size_t d, int64_t in_w) {
  AxisPlan p;
  const int64_t out_w = s.out_shape[d];
  const double scale = s.scales[d];
  const bool roi_identity = s.roi.empty() || (std::fabs(s.roi[d]) <= 1e-9 &&
                                              std::fabs(s.roi[s.scales.size() + d] - 1.0) <= 1e-9);
  p.identity = out_w == in_w && std::fabs(scale - 1.0) <= 1e-9 && roi_identity;
  if (p.identity) return p;
  p.outside.assign(static_cast<size_t>(out_w), 0);
  int64_t first = 0;
  if (s.mode == ResizeMode::kNearest) {
    p.taps = 1;
  } else {
    FilterExtent(s, scale, &first, &p.taps);
  }
  p.index.resize(static_cast<size_t>(out_w * p.taps));
  p.weight.resize(static_cast<size_t>(out_w * p.taps));
  for (int64_t j = 0; j < out_w; ++j) {
    bool outside = false;
    const double x_ori = SourceCoordinate(s, d, j, in_w, &outside);
    p.outside[static_cast<size_t>(j)] = outside ? 1 : 0;
    int64_t* idx = &p.index[static_cast<size_t>(j * p.taps)];
    double* w = &p.weight[static_cast<size_t>(j * p.taps)];
    if (s.mode == ResizeMode::kNearest) {
      idx[0] = std::clamp<int64_t>(NearestIndex(s.nearest, x_ori, scale), 0, in_w - 1);
      w[0] = 1.0;
      continue;
    }
    // An integral x_ori is taken as ratio 1 from the sample on its left, as
    // the reference does; it only matters with exclude_outside.
    double x0 = std::floor(x_ori);
    double ratio = x_ori - x0;
    if (ratio == 0.0) {
      x0 -= 1.0;
      ratio = 1.0;
    }
    FilterWeights(s, scale, ratio, first, p.taps, w);
    const int64_t start = static_cast<int64_t>(x0) + first;
    double sum = 0.0;
    for (int64_t k = 0; k < p.taps; ++k) {
      idx[k] = start + k;
      if (s.exclude_outside && (idx[k] < 0 || idx[k] >= in_w)) w[k] = 0.0;
      sum += w[k];
    }
    if (s.exclude_outside && sum != 0.0) {
      for (int64_t k = 0; k < p.taps; ++k) w[k] /= sum;
    }
    for (int64_t k = 0; k < p.taps; ++k) idx[k] = std::clamp<int64_t>(idx[k], 0, in_w - 1);
  }
  return p;
}

// ---------------------------------------------------------------------------
// Nearest: a gather of whole elements (exact for every type).

template <typename E>
void NearestGather(const E* in, E* out, const Shape& in_shape, const Shape& out_shape,
                   const std::vector<AxisPlan>& plans, E extrapolation, ThreadPool* pool) {
  const size_t rank = in_shape.size();
  std::vector<int64_t> in_stride(rank, 1);
  for (size_t d = rank; d-- > 1;) in_stride[d - 1] = in_stride[d] * in_shape[d];
  auto source = [&](size_t d, int64_t j, bool* outside) -> int64_t {
    const AxisPlan& p = plans[d];
    if (p.identity) return j;
    if (p.outside[static_cast<size_t>(j)]) *outside = true;
    return p.index[static_cast<size_t>(j)];
  };
  const int64_t width = out_shape[rank - 1];
  if (width == 0) return;
  const int64_t rows = NumElements(out_shape) / width;
  // row_stride[d]: how many output rows one step along dimension d (< rank - 1) spans.
  std::vector<int64_t> row_stride(rank, 1);
  for (size_t d = rank - 1; d-- > 1;) row_stride[d - 1] = row_stride[d] * out_shape[d];
  ParallelFor(pool, rows, std::max<int64_t>(1, 16384 / width), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      int64_t base = 0;
      bool row_outside = false;
      for (size_t d = 0; d + 1 < rank; ++d) {
        const int64_t j = (r / row_stride[d]) % out_shape[d];
        base += source(d, j, &row_outside) * in_stride[d];
      }
      E* dst = out + r * width;
      for (int64_t j = 0; j < width; ++j) {
        bool outside = row_outside;
        const int64_t i = source(rank - 1, j, &outside);
        dst[j] = outside ? extrapolation : in[base + i];
      }
    }
  });
}

// Copies element bits through an unsigned integer of the element's size.
template <typename E>
void NearestAs(const Tensor& x, Tensor* y, const std::vector<AxisPlan>& plans, const Tensor& extrapolation,
               ThreadPool* pool) {
  E ext;
  std::memcpy(&ext, extrapolation.raw_data(), sizeof(E));
  NearestGather<E>(static_cast<const E*>(x.raw_data()), static_cast<E*>(y->raw_data()), x.shape(), y->shape(), plans,
                   ext, pool);
}

// ---------------------------------------------------------------------------
// Linear and cubic: one pass per resized axis in compute type C.

template <typename C>
void ResizeAxis(const std::vector<C>& src, std::vector<C>* dst, const Shape& shape, size_t d, int64_t out_w,
                const AxisPlan& p, C extrapolation, ThreadPool* pool) {
  const int64_t outer = reduce_common::DimProduct(shape, 0, d);
  const int64_t in_w = shape[d];
  const int64_t inner = reduce_common::DimProduct(shape, d + 1, shape.size());
  const int64_t taps = p.taps;
  const std::vector<C> weight(p.weight.begin(), p.weight.end());
  dst->assign(static_cast<size_t>(outer * out_w * inner), C(0));
  const C* in_data = src.data();
  C* out_data = dst->data();
  ParallelFor(pool, outer * out_w, std::max<int64_t>(1, 16384 / std::max<int64_t>(1, inner * taps)),
              [&](int64_t begin, int64_t end) {
                int64_t o = begin / out_w, j = begin % out_w;
                for (int64_t t = begin; t < end; ++t) {
                  C* out = out_data + t * inner;
                  const C* in_row = in_data + o * in_w * inner;
                  const int64_t* idx = &p.index[static_cast<size_t>(j * taps)];
                  const C* w = &weight[static_cast<size_t>(j * taps)];
                  if (p.outside[static_cast<size_t>(j)]) {
                    std::fill(out, out + inner, extrapolation);
                  } else if (inner == 1) {
                    C acc = 0;
                    for (int64_t k = 0; k < taps; ++k) {
                      if (w[k] != C(0)) acc += w[k] * in_row[idx[k]];
                    }
                    *out = acc;
                  } else {
                    for (int64_t k = 0; k < taps; ++k) {
                      if (w[k] == C(0)) continue;
                      const C* in = in_row + idx[k] * inner;
                      const C wk = w[k];
                      for (int64_t i = 0; i < inner; ++i) out[i] += wk * in[i];
                    }
                  }
                  if (++j == out_w) {
                    j = 0;
                    ++o;
                  }
                }
              });
}

template <typename T, typename C>
void InterpolateTyped(const Tensor& x, Tensor* y, const ResizeSpec& s, const std::vector<AxisPlan>& plans,
                      ThreadPool* pool) {
  const T* in = x.data<T>();
  std::vector<C> cur(in, in + x.numel());
  std::vector<C> next;
  Shape shape = x.shape();
  for (size_t d = 0; d < shape.size(); ++d) {
    if (plans[d].identity) continue;
    ResizeAxis<C>(cur, &next, shape, d, s.out_shape[d], plans[d], static_cast<C>(s.extrapolation), pool);
    cur.swap(next);
    shape[d] = s.out_shape[d];
  }
  T* out = y->data<T>();
  for (size_t i = 0; i < cur.size(); ++i) {
    if constexpr (std::is_floating_point_v<T>) {
      out[i] = static_cast<T>(cur[i]);
    } else {
      // As ONNX's reference: round half to even, then saturate.
      const double v = std::nearbyint(static_cast<double>(cur[i]));
      out[i] = std::isnan(v) ? T(0) : reduce_common::FromDouble<T>(v);
    }
  }
}

// ---------------------------------------------------------------------------
// Attribute and input parsing.

StatusOr<ResizeMode> ParseMode(const OpContext& ctx, bool legacy) {
  const std::string m = ctx.node().attr_string("mode", "nearest");
  if (m == "nearest") return ResizeMode::kNearest;
  if (m == "linear" || (legacy && m == "bilinear")) return ResizeMode::kLinear;
  if (m == "cubic" && !legacy) return ResizeMode::kCubic;
  return ctx.InvalidArgument("unknown mode '" + m + "' (expected nearest, linear" + (legacy ? "" : " or cubic") + ")");
}

StatusOr<CoordMode> ParseCoordMode(const OpContext& ctx) {
  const std::string m = ctx.node().attr_string("coordinate_transformation_mode", "half_pixel");
  if (m == "half_pixel") return CoordMode::kHalfPixel;
  if (m == "half_pixel_symmetric" && ctx.opset() >= 18) return CoordMode::kHalfPixelSymmetric;
  if (m == "pytorch_half_pixel") return CoordMode::kPytorchHalfPixel;
  if (m == "align_corners") return CoordMode::kAlignCorners;
  if (m == "asymmetric") return CoordMode::kAsymmetric;
  if (m == "tf_half_pixel_for_nn" && ctx.opset() < 13) return CoordMode::kTfHalfPixelForNn;
  if (m == "tf_crop_and_resize") return CoordMode::kTfCropAndResize;
  return ctx.InvalidArgument("unknown coordinate_transformation_mode '" + m + "' for opset " +
                             std::to_string(ctx.opset()));
}

StatusOr<NearestMode> ParseNearestMode(const OpContext& ctx) {
  const std::string m = ctx.node().attr_string("nearest_mode", "round_prefer_floor");
  if (m == "round_prefer_floor") return NearestMode::kRoundPreferFloor;
  if (m == "round_prefer_ceil") return NearestMode::kRoundPreferCeil;
  if (m == "floor") return NearestMode::kFloor;
  if (m == "ceil") return NearestMode::kCeil;
  return ctx.InvalidArgument("unknown nearest_mode '" + m + "'");
}

std::vector<double> ToDoubles(const Tensor& t) {
  std::vector<double> v(static_cast<size_t>(t.numel()));
  for (int64_t i = 0; i < t.numel(); ++i) v[static_cast<size_t>(i)] = t.GetAsDouble(i);
  return v;
}

// Fills spec.scales and spec.out_shape from per-axis `scales` or `sizes`
// (given for `axes`, in that order), applying keep_aspect_ratio_policy.
Status ComputeOutputShape(const OpContext& ctx, const Shape& in_shape, const std::vector<int64_t>& axes,
                          const std::vector<double>& scales, const std::vector<int64_t>& sizes,
                          const std::string& policy, ResizeSpec* s) {
  const size_t rank = in_shape.size();
  s->scales.assign(rank, 1.0);
  s->out_shape = in_shape;
  if (!scales.empty()) {
    for (size_t i = 0; i < axes.size(); ++i) {
      const size_t d = static_cast<size_t>(axes[i]);
      if (!(scales[i] > 0.0)) {
        return ctx.InvalidArgument("scale " + std::to_string(scales[i]) + " for axis " + std::to_string(d) +
                                   " must be positive");
      }
      s->scales[d] = scales[i];
      s->out_shape[d] = static_cast<int64_t>(std::floor(scales[i] * static_cast<double>(in_shape[d])));
    }
    return Status::OK();
  }
  for (size_t i = 0; i < axes.size(); ++i) {
    const size_t d = static_cast<size_t>(axes[i]);
    if (sizes[i] < 0) {
      return ctx.InvalidArgument("size " + std::to_string(sizes[i]) + " for axis " + std::to_string(d) +
                                 " must not be negative");
    }
    if (in_shape[d] == 0 && sizes[i] != 0) {
      return ctx.InvalidArgument("cannot resize axis " + std::to_string(d) + " of size 0 to " +
                                 std::to_string(sizes[i]));
    }
    s->scales[d] = in_shape[d] == 0 ? 1.0 : static_cast<double>(sizes[i]) / static_cast<double>(in_shape[d]);
    s->out_shape[d] = sizes[i];
  }
  if (policy == "stretch" || axes.empty()) return Status::OK();
  if (policy != "not_larger" && policy != "not_smaller") {
    return ctx.InvalidArgument("unknown keep_aspect_ratio_policy '" + policy +
                               "' (expected stretch, not_larger or not_smaller)");
  }
  double scale = s->scales[static_cast<size_t>(axes[0])];
  for (int64_t a : axes) {
    const double v = s->scales[static_cast<size_t>(a)];
    scale = policy == "not_larger" ? std::min(scale, v) : std::max(scale, v);
  }
  for (int64_t a : axes) {
    const size_t d = static_cast<size_t>(a);
    s->scales[d] = scale;
    s->out_shape[d] = static_cast<int64_t>(scale * static_cast<double>(in_shape[d]) + 0.5);  // round half up
  }
  return Status::OK();
}

Status RunResize(OpContext& ctx, const ResizeSpec& s) {
  const Tensor& x = ctx.input(0);
  const size_t rank = x.rank();
  std::vector<AxisPlan> plans(rank);
  for (size_t d = 0; d < rank; ++d) plans[d] = PlanAxis(s, d, x.dim(d));
  Tensor y(x.dtype(), s.out_shape);
  if (y.numel() == 0 || rank == 0) {
    ctx.set_output(0, rank == 0 ? x : y);
    return Status::OK();
  }
  if (x.numel() == 0) return ctx.InvalidArgument("cannot resize the empty input of shape " + ShapeToString(x.shape()));
  ThreadPool* pool = ctx.pool();
  if (s.mode == ResizeMode::kNearest) {
    const Tensor ext = Tensor::Scalar<double>(s.extrapolation).CastTo(x.dtype());
    switch (DataTypeSize(x.dtype())) {
      case 1: NearestAs<uint8_t>(x, &y, plans, ext, pool); break;
      case 2: NearestAs<uint16_t>(x, &y, plans, ext, pool); break;
      case 4: NearestAs<uint32_t>(x, &y, plans, ext, pool); break;
      case 8: NearestAs<uint64_t>(x, &y, plans, ext, pool); break;
      default: return ctx.NotSupported("input type " + DataTypeName(x.dtype()) + " is not supported");
    }
  } else {
    switch (x.dtype()) {
      case DataType::kFloat32: InterpolateTyped<float, float>(x, &y, s, plans, pool); break;
      case DataType::kFloat64: InterpolateTyped<double, double>(x, &y, s, plans, pool); break;
      case DataType::kInt8: InterpolateTyped<int8_t, float>(x, &y, s, plans, pool); break;
      case DataType::kUInt8: InterpolateTyped<uint8_t, float>(x, &y, s, plans, pool); break;
      case DataType::kInt16: InterpolateTyped<int16_t, float>(x, &y, s, plans, pool); break;
      case DataType::kUInt16: InterpolateTyped<uint16_t, float>(x, &y, s, plans, pool); break;
      case DataType::kInt32: InterpolateTyped<int32_t, double>(x, &y, s, plans, pool); break;
      case DataType::kUInt32: InterpolateTyped<uint32_t, double>(x, &y, s, plans, pool); break;
      case DataType::kInt64: InterpolateTyped<int64_t, double>(x, &y, s, plans, pool); break;
      case DataType::kUInt64: InterpolateTyped<uint64_t, double>(x, &y, s, plans, pool); break;
      default:
        return ctx.NotSupported("input type " + DataTypeName(x.dtype()) + " is not supported for mode " +
                                ctx.node().attr_string("mode", "nearest"));
    }
  }
  ctx.set_output(0, std::move(y));
  return Status::OK();
}

// Resize-11 and later: X, roi, scales, sizes.
Status ResizeKernel(OpContext& ctx) {
  SPARQ_RETURN_IF_ERROR(ctx.RequireInputs(1));
  const Tensor& x = ctx.input(0);
  if (IsHalfType(x.dtype())) return RunAsFloat32(ctx, ResizeKernel, x.dtype());
  const Node& node = ctx.node();
  const int64_t rank = static_cast<int64_t>(x.rank());
  ResizeSpec s;
  SPARQ_ASSIGN_OR_RETURN(s.mode, ParseMode(ctx, false));
  SPARQ_ASSIGN_OR_RETURN(s.coord, ParseCoordMode(ctx));
  SPARQ_ASSIGN_OR_RETURN(s.nearest, ParseNearestMode(ctx));
  s.cubic_a = node.attr_float("cubic_coeff_a", -0.75f);
  s.exclude_outside = node.attr_int("exclude_outside", 0) != 0;
  s.extrapolation = node.attr_float("extrapolation_value", 0.0f);
  s.antialias = ctx.opset() >= 18 && node.attr_int("antialias", 0) != 0;

  std::vector<int64_t> axes;
  if (ctx.opset() >= 18 && node.attr("axes") != nullptr) {
    const std::vector<int64_t> given = node.attr_ints("axes");
    // Checks range and repeats; the order of `given` is kept (it orders scales/sizes/roi).
    SPARQ_RETURN_IF_ERROR(AxesToMask(ctx, given, rank).status());
    for (int64_t a : given) axes.push_back(a < 0 ? a + rank : a);
  } else {
    for (int64_t d = 0; d < rank; ++d) axes.push_back(d);
  }
  const size_t n = axes.size();

  std::vector<double> scales;
  std::vector<int64_t> sizes;
  if (ctx.has_input(2)) scales = ToDoubles(ctx.input(2));
  if (ctx.has_input(3)) sizes = ctx.input(3).ToInt64Vector();
  if (!scales.empty() && !sizes.empty()) return ctx.InvalidArgument("only one of 'scales' and 'sizes' may be given");
  if (scales.empty() && sizes.empty()) return ctx.InvalidArgument("one of 'scales' and 'sizes' must be given");
  if (!scales.empty() && scales.size() != n) {
    return ctx.InvalidArgument("'scales' has " + std::to_string(scales.size()) + " values, expected " +
                               std::to_string(n) + " for input of shape " + ShapeToString(x.shape()));
  }
  if (!sizes.empty() && sizes.size() != n) {
    return ctx.InvalidArgument("'sizes' has " + std::to_string(sizes.size()) + " values, expected " +
                               std::to_string(n) + " for input of shape " + ShapeToString(x.shape()));
  }
  const std::string policy = ctx.opset() >= 18 ? node.attr_string("keep_aspect_ratio_policy", "stretch") : "stretch";
  SPARQ_RETURN_IF_ERROR(ComputeOutputShape(ctx, x.shape(), axes, scales, sizes, policy, &s));

  if (s.coord == CoordMode::kTfCropAndResize) {
    const std::vector<double> roi = ctx.has_input(1) ? ToDoubles(ctx.input(1)) : std::vector<double>();
    if (roi.size() != 2 * n) {
      return ctx.InvalidArgument("tf_crop_and_resize needs 'roi' with " + std::to_string(2 * n) + " values, got " +
                                 std::to_string(roi.size()));
    }
    s.roi.assign(2 * static_cast<size_t>(rank), 0.0);
    for (int64_t d = 0; d < rank; ++d) s.roi[static_cast<size_t>(rank + d)] = 1.0;
    for (size_t i = 0; i < n; ++i) {
      s.roi[static_cast<size_t>(axes[i])] = roi[i];
      s.roi[static_cast<size_t>(rank + axes[i])] = roi[n + i];
    }
  }
  return RunResize(ctx, s);
}

// Resize-10 and Upsample: X and scales (an input, or Upsample-7's attribute),
// asymmetric coordinates, legacy nearest rounding.
Status LegacyResize(OpContext& ctx, const std::vector<double>& scales) {
  const Tensor& x = ctx.input(0);
  ResizeSpec s;
  SPARQ_ASSIGN_OR_RETURN(s.mode, ParseMode(ctx, true));
  s.coord = CoordMode::kAsymmetric;
  s.nearest = NearestMode::kLegacy;
  if (scales.size() != x.rank()) {
    return ctx.InvalidArgument("'scales' has " + std::to_string(scales.size()) + " values, expected " +
                               std::to_string(x.rank()) + " for input of shape " + ShapeToString(x.shape()));
  }
  std::vector<int64_t> axes;
  for (size_t d = 0; d < x.rank(); ++d) axes.push_back(static_cast<int64_t>(d));
  SPARQ_RETURN_IF_ERROR(ComputeOutputShape(ctx, x.shape(), axes, scales, {}, "stretch", &s));
  return RunResize(ctx, s);
}

Status ResizeV10Kernel(OpContext& ctx) {
  SPARQ_RETURN_IF_ERROR(ctx.RequireInputs(2));
  if (IsHalfType(ctx.input(0).dtype())) return RunAsFloat32(ctx, ResizeV10Kernel, ctx.input(0).dtype());
  return LegacyResize(ctx, ToDoubles(ctx.input(1)));
}

Status UpsampleKernel(OpContext& ctx) {
  SPARQ_RETURN_IF_ERROR(ctx.RequireInputs(1));
  if (IsHalfType(ctx.input(0).dtype())) return RunAsFloat32(ctx, UpsampleKernel, ctx.input(0).dtype());
  if (ctx.opset() >= 9) {
    SPARQ_RETURN_IF_ERROR(ctx.RequireInputs(2));
    return LegacyResize(ctx, ToDoubles(ctx.input(1)));
  }
  const std::vector<float> attr = ctx.node().attr_floats("scales");
  return LegacyResize(ctx, std::vector<double>(attr.begin(), attr.end()));
}

}  // namespace

void RegisterResizeOps(KernelRegistry& r) {
  r.Add({"Resize", "", 10, 10, ResizeV10Kernel, "ref"});
  r.Add({"Resize", "", 11, 99, ResizeKernel, "ref"});
  r.Add({"Upsample", "", 7, 9, UpsampleKernel, "ref"});
}

}  // namespace sparq
