// Reference reductions: ReduceSum/Mean/Max/Min/Prod/L1/L2/SumSquare/LogSum/
// LogSumExp and ArgMax/ArgMin. RegisterReduceOps also registers the kernels
// of softmax.cc, norm.cc and resize.cc.
//
// Axes: an attribute up to ReduceSum-11 / other Reduce*-17, an optional int64
// input from ReduceSum-13 / other Reduce*-18. No axes means "all axes", unless
// noop_with_empty_axes=1, which reduces over no axis (each output element is
// the reduction of one input element, e.g. ReduceL2 gives |x|).
//
// Each output element is reduced by one thread in input order, accumulating
// floats in double and integers in 64 bits, so results do not depend on the
// thread count. Reducing an empty set gives the identity of the operation:
// 0 for sums, 1 for products, -inf/+inf (or the integer limits) for max/min,
// NaN for the mean of floats, -inf for LogSum/LogSumExp.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "kernels/parallel.h"
#include "kernels/ref/reduce_common.h"
#include "kernels/registry.h"

namespace sparq {

// Defined in softmax.cc, norm.cc and resize.cc.
void RegisterSoftmaxOps(KernelRegistry& r);
void RegisterNormOps(KernelRegistry& r);
void RegisterResizeOps(KernelRegistry& r);

namespace {

using reduce_common::AxesToMask;
using reduce_common::FromDouble;
using reduce_common::IsHalfType;
using reduce_common::MakeReductionLayout;
using reduce_common::NormalizeAxis;
using reduce_common::ReductionLayout;
using reduce_common::RunAsFloat32;

enum class ReduceOp { kSum, kMean, kMax, kMin, kProd, kL1, kL2, kSumSquare, kLogSum, kLogSumExp };

// Accumulator of a sum or product of T: double for floats, 64-bit integers otherwise.
template <typename T>
using AccOf = std::conditional_t<std::is_floating_point_v<T>, double,
                                 std::conditional_t<std::is_signed_v<T>, int64_t, uint64_t>>;

// Elements processed per ParallelFor chunk (roughly); keeps tiny reductions inline.
constexpr int64_t kGrainElements = 16384;

int64_t GrainFor(int64_t per_item) { return std::max<int64_t>(1, kGrainElements / std::max<int64_t>(1, per_item)); }

// Reduces the elements x[off[0]], x[off[1]], ... of one output element.
template <typename T, ReduceOp kOp>
T ReduceOne(const T* x, const int64_t* off, int64_t n) {
  using Acc = AccOf<T>;
  constexpr bool kFloat = std::is_floating_point_v<T>;
  if constexpr (kOp == ReduceOp::kMax || kOp == ReduceOp::kMin) {
    constexpr bool kMax = kOp == ReduceOp::kMax;
    T best;
    if constexpr (kFloat) best = kMax ? -std::numeric_limits<T>::infinity() : std::numeric_limits<T>::infinity();
    else best = kMax ? std::numeric_limits<T>::lowest() : std::numeric_limits<T>::max();
    for (int64_t r = 0; r < n; ++r) {
      const T v = x[off[r]];
      if constexpr (kFloat) {
        if (std::isnan(v)) return v;  // NaN propagates, as numpy's maximum/minimum
      }
      if (kMax ? v > best : v < best) best = v;
    }
    return best;
  } else if constexpr (kOp == ReduceOp::kLogSumExp) {
    double m = -std::numeric_limits<double>::infinity();
    for (int64_t r = 0; r < n; ++r) m = std::max(m, static_cast<double>(x[off[r]]));
    if (std::isinf(m)) return FromDouble<T>(m);  // empty, all -inf, or some +inf
    double s = 0.0;
    for (int64_t r = 0; r < n; ++r) s += std::exp(static_cast<double>(x[off[r]]) - m);
    return FromDouble<T>(m + std::log(s));
  } else if constexpr (kOp == ReduceOp::kProd) {
    Acc p = 1;
    for (int64_t r = 0; r < n; ++r) p *= static_cast<Acc>(x[off[r]]);
    return static_cast<T>(p);
  } else {
    Acc s = 0;
    for (int64_t r = 0; r < n; ++r) {
      const Acc v = static_cast<Acc>(x[off[r]]);
      if constexpr (kOp == ReduceOp::kL1) {
        if constexpr (std::is_unsigned_v<Acc>) s += v;
        else s += v < 0 ? -v : v;
      } else if constexpr (kOp == ReduceOp::kL2 || kOp == ReduceOp::kSumSquare) {
        s += v * v;
      } else {
        s += v;
      }
    }
    if constexpr (kOp == ReduceOp::kMean) {
      if constexpr (kFloat) return static_cast<T>(s / static_cast<double>(n));  // NaN when n == 0
      else return n == 0 ? T(0) : static_cast<T>(s / static_cast<Acc>(n));
    } else if constexpr (kOp == ReduceOp::kL2) {
      return FromDouble<T>(std::sqrt(static_cast<double>(s)));
    } else if constexpr (kOp == ReduceOp::kLogSum) {
      return FromDouble<T>(std::log(static_cast<double>(s)));
    } else {
      return static_cast<T>(s);
    }
  }
}

// Sums and means of floats over an axis that is not the last ([outer, n,
// inner] reduced over n: a LayerNorm's statistics over channels, magika's over
// 512 rows of 256): up to kColumns neighbouring outputs at once, each still
// summed in double in input order (ReduceOne's bits), reading whole rows of
// the input instead of one value every `inner` floats per output.
constexpr int64_t kColumns = 64;

// The outputs [o, o + count) when they are neighbouring columns of one strided
// reduction (base[o + k] = base[o] + k, offsets r * stride): how many; 0 otherwise.
int64_t NeighbourColumns(const int64_t* base, const int64_t* off, int64_t n, int64_t o, int64_t end) {
  if (n < 2 || off[0] != 0 || off[1] < 2) return 0;
  int64_t count = 1;
  while (count < kColumns && o + count < end && base[o + count] == base[o] + count && count < off[1]) ++count;
  return count;
}

template <typename T, ReduceOp kOp>
Tensor ReduceTyped(const Tensor& x, const ReductionLayout& layout, const Shape& out_shape, ThreadPool* pool) {
  Tensor out(x.dtype(), out_shape);
  const T* in = x.data<T>();
  T* dst = out.data<T>();
  const int64_t n = static_cast<int64_t>(layout.offsets.size());
  const int64_t* off = layout.offsets.data();
  const int64_t* base = layout.base.data();
  constexpr bool kColumnSums = std::is_floating_point_v<T> && (kOp == ReduceOp::kSum || kOp == ReduceOp::kMean);
  bool strided = kColumnSums && n >= 2 && off[0] == 0 && off[1] >= 2;
  for (int64_t r = 2; r < n && strided; ++r) strided = off[r] == r * off[1];
  ParallelFor(pool, static_cast<int64_t>(layout.base.size()), GrainFor(n), [&](int64_t begin, int64_t end) {
    for (int64_t o = begin; o < end;) {
      const int64_t count = strided ? NeighbourColumns(base, off, n, o, end) : 0;
      if (count < 2) {
        dst[o] = ReduceOne<T, kOp>(in + base[o], off, n);
        ++o;
        continue;
      }
      double s[kColumns] = {};
      const T* first = in + base[o];
      for (int64_t r = 0; r < n; ++r) {
        const T* row = first + r * off[1];
        for (int64_t k = 0; k < count; ++k) s[k] += static_cast<double>(row[k]);
      }
      for (int64_t k = 0; k < count; ++k) {
        if constexpr (kOp == ReduceOp::kMean) {
          dst[o + k] = static_cast<T>(s[k] / static_cast<double>(n));
        } else {
          dst[o + k] = static_cast<T>(s[k]);
        }
      }
      o += count;
    }
  });
  return out;
}

// Runs the reduction for x's element type. Integer inputs of L2, LogSum and
// LogSumExp are computed in double and truncated toward zero.
template <ReduceOp kOp>
StatusOr<Tensor> ReduceDispatch(const OpContext& ctx, const Tensor& x, const ReductionLayout& layout,
                                const Shape& out_shape) {
  ThreadPool* pool = ctx.pool();
  switch (x.dtype()) {
    case DataType::kFloat32: return ReduceTyped<float, kOp>(x, layout, out_shape, pool);
    case DataType::kFloat64: return ReduceTyped<double, kOp>(x, layout, out_shape, pool);
    case DataType::kInt32: return ReduceTyped<int32_t, kOp>(x, layout, out_shape, pool);
    case DataType::kInt64: return ReduceTyped<int64_t, kOp>(x, layout, out_shape, pool);
    case DataType::kUInt32: return ReduceTyped<uint32_t, kOp>(x, layout, out_shape, pool);
    case DataType::kUInt64: return ReduceTyped<uint64_t, kOp>(x, layout, out_shape, pool);
    case DataType::kInt8: return ReduceTyped<int8_t, kOp>(x, layout, out_shape, pool);
    case DataType::kUInt8: return ReduceTyped<uint8_t, kOp>(x, layout, out_shape, pool);
    case DataType::kInt16: return ReduceTyped<int16_t, kOp>(x, layout, out_shape, pool);
    case DataType::kUInt16: return ReduceTyped<uint16_t, kOp>(x, layout, out_shape, pool);
    case DataType::kBool:  // ReduceMax/ReduceMin-20: any / all
      if constexpr (kOp == ReduceOp::kMax || kOp == ReduceOp::kMin) {
        return ReduceTyped<bool, kOp>(x, layout, out_shape, pool);
      }
      break;
    default:
      break;
  }
  return ctx.NotSupported("input type " + DataTypeName(x.dtype()) + " is not supported");
}

// The axes to reduce: from the "axes" attribute or the optional input 1.
// Sets *noop when the node asks to reduce over no axis.
Status ReadAxes(const OpContext& ctx, bool axes_from_input, std::vector<int64_t>* axes, bool* noop) {
  *noop = false;
  if (!axes_from_input) {
    *axes = ctx.node().attr_ints("axes");
    return Status::OK();
  }
  if (ctx.has_input(1)) {
    const Tensor& a = ctx.input(1);
    if (a.dtype() != DataType::kInt64 && a.dtype() != DataType::kInt32) {
      return ctx.InvalidArgument("input 'axes' must be int64, got " + DataTypeName(a.dtype()));
    }
    if (a.rank() > 1) return ctx.InvalidArgument("input 'axes' must be 1-D, got shape " + ShapeToString(a.shape()));
    *axes = a.ToInt64Vector();
  }
  *noop = axes->empty() && ctx.node().attr_int("noop_with_empty_axes", 0) != 0;
  return Status::OK();
}

template <ReduceOp kOp, bool kAxesFromInput>
Status ReduceKernel(OpContext& ctx) {
  SPARQ_RETURN_IF_ERROR(ctx.RequireInputs(1));
  const Tensor& x = ctx.input(0);
  if (IsHalfType(x.dtype())) return RunAsFloat32(ctx, ReduceKernel<kOp, kAxesFromInput>, x.dtype());
  std::vector<int64_t> axes;
  bool noop = false;
  SPARQ_RETURN_IF_ERROR(ReadAxes(ctx, kAxesFromInput, &axes, &noop));
  const int64_t rank = static_cast<int64_t>(x.rank());
  std::vector<bool> mask(static_cast<size_t>(rank), !noop);
  if (!axes.empty()) {
    SPARQ_ASSIGN_OR_RETURN(mask, AxesToMask(ctx, axes, rank));
  }
  const bool keepdims = ctx.node().attr_int("keepdims", 1) != 0;
  ReductionLayout layout = MakeReductionLayout(x.shape(), mask);
  Shape out_shape;
  for (size_t d = 0; d < x.rank(); ++d) {
    if (!mask[d]) out_shape.push_back(x.dim(d));
    else if (keepdims) out_shape.push_back(1);
  }
  SPARQ_ASSIGN_OR_RETURN(Tensor out, ReduceDispatch<kOp>(ctx, x, layout, out_shape));
  ctx.set_output(0, std::move(out));
  return Status::OK();
}

// ---------------------------------------------------------------------------
// ArgMax / ArgMin: the index of the first (or, with select_last_index=1, the
// last) extreme value along `axis`, as int64. NaN counts as the extreme.

template <typename T, bool kMax>
void ArgTyped(const Tensor& x, int64_t outer, int64_t n, int64_t inner, bool last, int64_t* dst, ThreadPool* pool) {
  const T* in = x.data<T>();
  ParallelFor(pool, outer * inner, GrainFor(n), [&](int64_t begin, int64_t end) {
    for (int64_t o = begin; o < end; ++o) {
      const T* p = in + (o / inner) * n * inner + (o % inner);
      int64_t best_i = 0;
      T best = p[0];
      for (int64_t k = 1; k < n; ++k) {
        const T v = p[k * inner];
        bool better;
        if constexpr (std::is_floating_point_v<T>) {
          if (std::isnan(best)) {
            better = last && std::isnan(v);
          } else if (std::isnan(v)) {
            better = true;
          } else {
            better = kMax ? (last ? v >= best : v > best) : (last ? v <= best : v < best);
          }
        } else {
          better = kMax ? (last ? v >= best : v > best) : (last ? v <= best : v < best);
        }
        if (better) {
          best = v;
          best_i = k;
        }
      }
      dst[o] = best_i;
    }
  });
}

template <bool kMax>
Status ArgKernel(OpContext& ctx) {
  SPARQ_RETURN_IF_ERROR(ctx.RequireInputs(1));
  const Tensor& x = ctx.input(0);
  if (IsHalfType(x.dtype())) return RunAsFloat32(ctx, ArgKernel<kMax>, x.dtype());
  const int64_t rank = static_cast<int64_t>(x.rank());
  SPARQ_ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(ctx, ctx.node().attr_int("axis", 0), rank));
  const int64_t n = x.dim(static_cast<size_t>(axis));
  const int64_t outer = reduce_common::DimProduct(x.shape(), 0, static_cast<size_t>(axis));
  const int64_t inner = reduce_common::DimProduct(x.shape(), static_cast<size_t>(axis) + 1, x.rank());
  if (n == 0 && outer * inner > 0) {
    return ctx.InvalidArgument("cannot take the arg" + std::string(kMax ? "max" : "min") + " along axis " +
                               std::to_string(axis) + " of size 0 (input shape " + ShapeToString(x.shape()) + ")");
  }
  const bool keepdims = ctx.node().attr_int("keepdims", 1) != 0;
  const bool last = ctx.node().attr_int("select_last_index", 0) != 0;
  Shape out_shape;
  for (int64_t d = 0; d < rank; ++d) {
    if (d != axis) out_shape.push_back(x.dim(static_cast<size_t>(d)));
    else if (keepdims) out_shape.push_back(1);
  }
  Tensor out(DataType::kInt64, out_shape);
  int64_t* dst = out.data<int64_t>();
  ThreadPool* pool = ctx.pool();
  switch (x.dtype()) {
    case DataType::kFloat32: ArgTyped<float, kMax>(x, outer, n, inner, last, dst, pool); break;
    case DataType::kFloat64: ArgTyped<double, kMax>(x, outer, n, inner, last, dst, pool); break;
    case DataType::kInt8: ArgTyped<int8_t, kMax>(x, outer, n, inner, last, dst, pool); break;
    case DataType::kUInt8: ArgTyped<uint8_t, kMax>(x, outer, n, inner, last, dst, pool); break;
    case DataType::kInt16: ArgTyped<int16_t, kMax>(x, outer, n, inner, last, dst, pool); break;
    case DataType::kUInt16: ArgTyped<uint16_t, kMax>(x, outer, n, inner, last, dst, pool); break;
    case DataType::kInt32: ArgTyped<int32_t, kMax>(x, outer, n, inner, last, dst, pool); break;
    case DataType::kUInt32: ArgTyped<uint32_t, kMax>(x, outer, n, inner, last, dst, pool); break;
    case DataType::kInt64: ArgTyped<int64_t, kMax>(x, outer, n, inner, last, dst, pool); break;
    case DataType::kUInt64: ArgTyped<uint64_t, kMax>(x, outer, n, inner, last, dst, pool); break;
    default:
      return ctx.NotSupported("input type " + DataTypeName(x.dtype()) + " is not supported");
  }
  ctx.set_output(0, std::move(out));
  return Status::OK();
}

// Registers op_type with the axes attribute until `last_attr_opset` and the
// axes input from the next opset on.
template <ReduceOp kOp>
void AddReduce(KernelRegistry& r, const char* op_type, int last_attr_opset) {
  r.Add({op_type, "", 1, last_attr_opset, ReduceKernel<kOp, false>, "ref"});
  r.Add({op_type, "", last_attr_opset + 1, 99, ReduceKernel<kOp, true>, "ref"});
}

}  // namespace

void RegisterReduceOps(KernelRegistry& r) {
  AddReduce<ReduceOp::kSum>(r, "ReduceSum", 12);
  AddReduce<ReduceOp::kMean>(r, "ReduceMean", 17);
  AddReduce<ReduceOp::kMax>(r, "ReduceMax", 17);
  AddReduce<ReduceOp::kMin>(r, "ReduceMin", 17);
  AddReduce<ReduceOp::kProd>(r, "ReduceProd", 17);
  AddReduce<ReduceOp::kL1>(r, "ReduceL1", 17);
  AddReduce<ReduceOp::kL2>(r, "ReduceL2", 17);
  AddReduce<ReduceOp::kSumSquare>(r, "ReduceSumSquare", 17);
  AddReduce<ReduceOp::kLogSum>(r, "ReduceLogSum", 17);
  AddReduce<ReduceOp::kLogSumExp>(r, "ReduceLogSumExp", 17);
  r.Add({"ArgMax", "", 1, 99, ArgKernel<true>, "ref"});
  r.Add({"ArgMin", "", 1, 99, ArgKernel<false>, "ref"});
  RegisterSoftmaxOps(r);
  RegisterNormOps(r);
  RegisterResizeOps(r);
}

}  // namespace sparq
