// Reference pooling operators: MaxPool, AveragePool, LpPool, GlobalMaxPool,
// GlobalAveragePool, GlobalLpPool.
//
// Every (n, c) plane uses the same windows, so the input offsets of each
// output's taps are tabulated once (a CSR table: per output position the list
// of in-bounds taps, plus the count of taps inside the padded extent) and each
// plane is then a loop over that table. Planes run in parallel; each output is
// computed by one thread in tap order.
#include "kernels/ref/pool.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include "kernels/ref/nn_common.h"

namespace sparq {
namespace {

int64_t Product(const Shape& s, size_t from) {
  int64_t p = 1;
  for (size_t i = from; i < s.size(); ++i) p *= s[i];
  return p;
}

struct WindowTable {
  std::vector<int64_t> start;         // output p's taps are entries [start[p], start[p+1])
  std::vector<int64_t> offset;        // row-major spatial offset into the x plane
  std::vector<int64_t> index;         // reported index (column-major offset); empty unless asked for
  std::vector<int64_t> padded_count;  // taps inside the padded extent, per output
};

WindowTable BuildWindowTable(const WindowGeometry& g, const Shape& x_shape, const Shape& y_shape,
                             bool column_major_index) {
  const size_t R = x_shape.size() - 2;
  std::vector<int64_t> in(x_shape.begin() + 2, x_shape.end()), out(y_shape.begin() + 2, y_shape.end());
  // Per dim and output coordinate: in-bounds tap positions and padded-extent tap count.
  std::vector<std::vector<std::vector<int64_t>>> valid(R);
  std::vector<std::vector<int64_t>> padded(R);
  for (size_t d = 0; d < R; ++d) {
    valid[d].resize(out[d]);
    padded[d].assign(out[d], 0);
    const int64_t lo = -g.pads[d], hi = in[d] + g.pads[R + d];
    for (int64_t o = 0; o < out[d]; ++o) {
      for (int64_t t = 0; t < g.kernel[d]; ++t) {
        const int64_t pos = o * g.strides[d] - g.pads[d] + t * g.dilations[d];
        if (pos >= 0 && pos < in[d]) valid[d][o].push_back(pos);
        if (pos >= lo && pos < hi) ++padded[d][o];
      }
    }
  }
  std::vector<int64_t> row_stride(R, 1), col_stride(R, 1);
  for (size_t d = R - 1; d-- > 0;) row_stride[d] = row_stride[d + 1] * in[d + 1];
  for (size_t d = 1; d < R; ++d) col_stride[d] = col_stride[d - 1] * in[d - 1];

  WindowTable table;
  const int64_t out_size = Product(out, 0);
  table.start.reserve(out_size + 1);
  table.padded_count.reserve(out_size);
  table.start.push_back(0);
  std::vector<int64_t> o(R, 0), j(R, 0);
  for (int64_t p = 0; p < out_size; ++p) {
    int64_t count = 1;
    bool any = true;
    for (size_t d = 0; d < R; ++d) {
      count *= padded[d][o[d]];
      any = any && !valid[d][o[d]].empty();
    }
    table.padded_count.push_back(count);
    if (any) {
      std::fill(j.begin(), j.end(), 0);
      for (;;) {  // odometer over the per-dim tap lists, row-major
        int64_t off = 0, idx = 0;
        for (size_t d = 0; d < R; ++d) {
          const int64_t pos = valid[d][o[d]][j[d]];
          off += pos * row_stride[d];
          idx += pos * col_stride[d];
        }
        table.offset.push_back(off);
        if (column_major_index) table.index.push_back(idx);
        size_t d = R;
        while (d-- > 0) {
          if (++j[d] < static_cast<int64_t>(valid[d][o[d]].size())) break;
          j[d] = 0;
        }
        if (d == static_cast<size_t>(-1)) break;
      }
    }
    table.start.push_back(static_cast<int64_t>(table.offset.size()));
    for (size_t d = R; d-- > 0;) {
      if (++o[d] < out[d]) break;
      o[d] = 0;
    }
  }
  return table;
}

// Runs fn(plane) for every (n, c) plane of y in parallel.
template <typename Fn>
void ForEachPlane(const Shape& y_shape, int64_t work_per_plane, ThreadPool* pool, Fn&& fn) {
  const int64_t planes = y_shape[0] * y_shape[1];
  const int64_t grain = std::max<int64_t>(1, 16384 / std::max<int64_t>(1, work_per_plane));
  ParallelFor(pool, planes, grain, [&](int64_t b, int64_t e) {
    for (int64_t plane = b; plane < e; ++plane) fn(plane);
  });
}

// a > b for the max reduction; a NaN wins over a number and then stays.
template <typename T>
bool Greater(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) return a > b || (std::isnan(a) && !std::isnan(b));
  else return a > b;
}

}  // namespace

Status PreparePool(const Shape& x_shape, AutoPad auto_pad, bool ceil_mode, PoolParams* p, Shape* y_shape) {
  if (x_shape.size() < 3) {
    return Status::InvalidArgument("X has shape " + ShapeToString(x_shape) +
                                   ", expected [N, C, D1, ...] with at least one spatial dim");
  }
  Shape out;
  SPARQ_RETURN_IF_ERROR_WITH_CONTEXT(
      ResolveWindow(Shape(x_shape.begin() + 2, x_shape.end()), auto_pad, ceil_mode, &p->window, &out),
      "X has shape " + ShapeToString(x_shape));
  *y_shape = {x_shape[0], x_shape[1]};
  y_shape->insert(y_shape->end(), out.begin(), out.end());
  return Status::OK();
}

template <typename T>
void MaxPoolRef(const PoolParams& p, const Shape& x_shape, const T* x, const Shape& y_shape, T* y, int64_t* indices,
                ThreadPool* pool) {
  const bool column_major = indices != nullptr && p.storage_order == 1;
  const WindowTable table = BuildWindowTable(p.window, x_shape, y_shape, column_major);
  const int64_t in_size = Product(x_shape, 2), out_size = Product(y_shape, 2);
  const std::vector<int64_t>& reported = column_major ? table.index : table.offset;
  ForEachPlane(y_shape, static_cast<int64_t>(table.offset.size()), pool, [&](int64_t plane) {
    const T* xp = x + plane * in_size;
    T* yp = y + plane * out_size;
    for (int64_t o = 0; o < out_size; ++o) {
      T best = std::numeric_limits<T>::lowest();
      int64_t best_tap = -1;
      for (int64_t k = table.start[o]; k < table.start[o + 1]; ++k) {
        const T v = xp[table.offset[k]];
        if (best_tap < 0 || Greater(v, best)) {
          best = v;
          best_tap = k;
        }
      }
      yp[o] = best;
      if (indices != nullptr) indices[plane * out_size + o] = best_tap < 0 ? -1 : plane * in_size + reported[best_tap];
    }
  });
}

template <typename T>
void AveragePoolRef(const PoolParams& p, const Shape& x_shape, const T* x, const Shape& y_shape, T* y,
                    ThreadPool* pool) {
  const WindowTable table = BuildWindowTable(p.window, x_shape, y_shape, false);
  const int64_t in_size = Product(x_shape, 2), out_size = Product(y_shape, 2);
  ForEachPlane(y_shape, static_cast<int64_t>(table.offset.size()), pool, [&](int64_t plane) {
    const T* xp = x + plane * in_size;
    T* yp = y + plane * out_size;
    for (int64_t o = 0; o < out_size; ++o) {
      double sum = 0;
      for (int64_t k = table.start[o]; k < table.start[o + 1]; ++k) sum += static_cast<double>(xp[table.offset[k]]);
      const int64_t divisor = p.count_include_pad ? table.padded_count[o] : table.start[o + 1] - table.start[o];
      yp[o] = static_cast<T>(sum / static_cast<double>(divisor));
    }
  });
}

template <typename T>
void LpPoolRef(const PoolParams& p, const Shape& x_shape, const T* x, const Shape& y_shape, T* y, ThreadPool* pool) {
  const WindowTable table = BuildWindowTable(p.window, x_shape, y_shape, false);
  const int64_t in_size = Product(x_shape, 2), out_size = Product(y_shape, 2);
  ForEachPlane(y_shape, static_cast<int64_t>(table.offset.size()), pool, [&](int64_t plane) {
    const T* xp = x + plane * in_size;
    T* yp = y + plane * out_size;
    for (int64_t o = 0; o < out_size; ++o) {
      double sum = 0;
      for (int64_t k = table.start[o]; k < table.start[o + 1]; ++k)
        sum += std::pow(std::fabs(static_cast<double>(xp[table.offset[k]])), p.p);
      yp[o] = static_cast<T>(std::pow(sum, 1.0 / p.p));
    }
  });
}

template <typename T>
void GlobalPoolRef(GlobalPoolKind kind, double p, const Shape& x_shape, const T* x, T* y, ThreadPool* pool) {
  const int64_t in_size = Product(x_shape, 2);
  ForEachPlane({x_shape[0], x_shape[1]}, in_size, pool, [&](int64_t plane) {
    const T* xp = x + plane * in_size;
    if (kind == GlobalPoolKind::kMax) {
      T best = in_size > 0 ? xp[0] : std::numeric_limits<T>::lowest();
      for (int64_t i = 1; i < in_size; ++i)
        if (Greater(xp[i], best)) best = xp[i];
      y[plane] = best;
      return;
    }
    double sum = 0;
    if (kind == GlobalPoolKind::kAverage) {
      for (int64_t i = 0; i < in_size; ++i) sum += static_cast<double>(xp[i]);
      y[plane] = static_cast<T>(sum / static_cast<double>(in_size));
    } else {
      for (int64_t i = 0; i < in_size; ++i) sum += std::pow(std::fabs(static_cast<double>(xp[i])), p);
      y[plane] = static_cast<T>(std::pow(sum, 1.0 / p));
    }
  });
}

template void MaxPoolRef<float>(const PoolParams&, const Shape&, const float*, const Shape&, float*, int64_t*,
                                ThreadPool*);
template void MaxPoolRef<double>(const PoolParams&, const Shape&, const double*, const Shape&, double*, int64_t*,
                                 ThreadPool*);
template void MaxPoolRef<int8_t>(const PoolParams&, const Shape&, const int8_t*, const Shape&, int8_t*, int64_t*,
                                 ThreadPool*);
template void MaxPoolRef<uint8_t>(const PoolParams&, const Shape&, const uint8_t*, const Shape&, uint8_t*, int64_t*,
                                  ThreadPool*);
template void AveragePoolRef<float>(const PoolParams&, const Shape&, const float*, const Shape&, float*, ThreadPool*);
template void AveragePoolRef<double>(const PoolParams&, const Shape&, const double*, const Shape&, double*,
                                     ThreadPool*);
template void LpPoolRef<float>(const PoolParams&, const Shape&, const float*, const Shape&, float*, ThreadPool*);
template void LpPoolRef<double>(const PoolParams&, const Shape&, const double*, const Shape&, double*, ThreadPool*);
template void GlobalPoolRef<float>(GlobalPoolKind, double, const Shape&, const float*, float*, ThreadPool*);
template void GlobalPoolRef<double>(GlobalPoolKind, double, const Shape&, const double*, double*, ThreadPool*);
template void GlobalPoolRef<int8_t>(GlobalPoolKind, double, const Shape&, const int8_t*, int8_t*, ThreadPool*);
template void GlobalPoolRef<uint8_t>(GlobalPoolKind, double, const Shape&, const uint8_t*, uint8_t*, ThreadPool*);

// ---------------------------------------------------------------------------
// Kernels

namespace {

enum class PoolOp { kMax, kAverage, kLp };

// The LpPool exponent: a float attribute in opset 1, an int from opset 2.
double ReadLpExponent(const Node& node) {
  const Attribute* a = node.attr("p");
  if (a == nullptr) return 2.0;
  return a->kind == Attribute::Kind::kFloat ? static_cast<double>(a->f) : static_cast<double>(a->i);
}

template <PoolOp kOp>
Status Pool(OpContext& ctx) {
  SPARQ_RETURN_IF_ERROR(ctx.RequireInputs(1));
  const Tensor& x = ctx.input(0);
  if (IsHalfType(x.dtype())) return RunInFloat32(ctx, Pool<kOp>);
  const Node& node = ctx.node();
  PoolParams params;
  AutoPad auto_pad;
  SPARQ_RETURN_IF_ERROR(ReadWindowAttributes(ctx, &params.window, &auto_pad));
  if (node.attr("kernel_shape") == nullptr) return ctx.InvalidArgument("attribute kernel_shape is required");
  params.count_include_pad = node.attr_int("count_include_pad", 0) != 0;
  params.storage_order = node.attr_int("storage_order", 0);
  if (params.storage_order != 0 && params.storage_order != 1)
    return ctx.InvalidArgument("storage_order is " + std::to_string(params.storage_order) + ", expected 0 or 1");
  params.p = ReadLpExponent(node);
  if (kOp == PoolOp::kLp && !(params.p > 0))
    return ctx.InvalidArgument("p is " + std::to_string(params.p) + ", expected > 0");
  const bool ceil_mode = node.attr_int("ceil_mode", 0) != 0;
  Shape y_shape;
  Status s = PreparePool(x.shape(), auto_pad, ceil_mode, &params, &y_shape);
  if (!s.ok()) return s.WithContext(node.Describe());

  const DataType type = x.dtype();
  Tensor y(type, y_shape);
  Tensor indices;
  if (kOp == PoolOp::kMax && ctx.wants_output(1)) indices = Tensor(DataType::kInt64, y_shape);
  int64_t* idx = indices.defined() ? indices.data<int64_t>() : nullptr;
  ThreadPool* pool = ctx.pool();
  switch (type) {
    case DataType::kFloat32:
      if (kOp == PoolOp::kMax) MaxPoolRef(params, x.shape(), x.data<float>(), y_shape, y.data<float>(), idx, pool);
      if (kOp == PoolOp::kAverage) AveragePoolRef(params, x.shape(), x.data<float>(), y_shape, y.data<float>(), pool);
      if (kOp == PoolOp::kLp) LpPoolRef(params, x.shape(), x.data<float>(), y_shape, y.data<float>(), pool);
      break;
    case DataType::kFloat64:
      if (kOp == PoolOp::kMax) MaxPoolRef(params, x.shape(), x.data<double>(), y_shape, y.data<double>(), idx, pool);
      if (kOp == PoolOp::kAverage)
        AveragePoolRef(params, x.shape(), x.data<double>(), y_shape, y.data<double>(), pool);
      if (kOp == PoolOp::kLp) LpPoolRef(params, x.shape(), x.data<double>(), y_shape, y.data<double>(), pool);
      break;
    case DataType::kInt8:
      if (kOp != PoolOp::kMax) return ctx.NotSupported("data type int8 is only supported by MaxPool");
      MaxPoolRef(params, x.shape(), x.data<int8_t>(), y_shape, y.data<int8_t>(), idx, pool);
      break;
    case DataType::kUInt8:
      if (kOp != PoolOp::kMax) return ctx.NotSupported("data type uint8 is only supported by MaxPool");
      MaxPoolRef(params, x.shape(), x.data<uint8_t>(), y_shape, y.data<uint8_t>(), idx, pool);
      break;
    default:
      return ctx.NotSupported("data type " + DataTypeName(type) + " is not supported");
  }
  ctx.set_output(0, std::move(y));
  if (indices.defined()) ctx.set_output(1, std::move(indices));
  return Status::OK();
}

template <GlobalPoolKind kKind>
Status GlobalPool(OpContext& ctx) {
  SPARQ_RETURN_IF_ERROR(ctx.RequireInputs(1));
  const Tensor& x = ctx.input(0);
  if (IsHalfType(x.dtype())) return RunInFloat32(ctx, GlobalPool<kKind>);
  if (x.rank() < 2) {
    return ctx.InvalidArgument("X has shape " + ShapeToString(x.shape()) + ", expected [N, C, D1, ...]");
  }
  Shape y_shape = x.shape();
  for (size_t d = 2; d < y_shape.size(); ++d) y_shape[d] = 1;
  if (kKind != GlobalPoolKind::kMax && x.numel() > 0 && Product(x.shape(), 2) == 0) {
    return ctx.InvalidArgument("X has shape " + ShapeToString(x.shape()) + " with an empty spatial extent");
  }
  const double p = ReadLpExponent(ctx.node());
  Tensor y(x.dtype(), y_shape);
  switch (x.dtype()) {
    case DataType::kFloat32:
      GlobalPoolRef(kKind, p, x.shape(), x.data<float>(), y.data<float>(), ctx.pool());
      break;
    case DataType::kFloat64:
      GlobalPoolRef(kKind, p, x.shape(), x.data<double>(), y.data<double>(), ctx.pool());
      break;
    case DataType::kInt8:
      if (kKind != GlobalPoolKind::kMax) return ctx.NotSupported("data type int8 is not supported");
      GlobalPoolRef(kKind, p, x.shape(), x.data<int8_t>(), y.data<int8_t>(), ctx.pool());
      break;
    case DataType::kUInt8:
      if (kKind != GlobalPoolKind::kMax) return ctx.NotSupported("data type uint8 is not supported");
      GlobalPoolRef(kKind, p, x.shape(), x.data<uint8_t>(), y.data<uint8_t>(), ctx.pool());
      break;
    default:
      return ctx.NotSupported("data type " + DataTypeName(x.dtype()) + " is not supported");
  }
  ctx.set_output(0, std::move(y));
  return Status::OK();
}

}  // namespace

void RegisterPoolOps(KernelRegistry& r) {
  // One kernel per operator covers every opset: attributes added over time
  // (storage_order and Indices in 8, ceil_mode/dilations in 10, dilations for
  // AveragePool in 19, for LpPool in 18) default to the older behaviour.
  r.Add({"MaxPool", "", 1, 99, Pool<PoolOp::kMax>, "ref"});
  r.Add({"AveragePool", "", 1, 99, Pool<PoolOp::kAverage>, "ref"});
  r.Add({"LpPool", "", 1, 99, Pool<PoolOp::kLp>, "ref"});
  r.Add({"GlobalMaxPool", "", 1, 99, GlobalPool<GlobalPoolKind::kMax>, "ref"});
  r.Add({"GlobalAveragePool", "", 1, 99, GlobalPool<GlobalPoolKind::kAverage>, "ref"});
  r.Add({"GlobalLpPool", "", 1, 99, GlobalPool<GlobalPoolKind::kLp>, "ref"});
}

}  // namespace sparq
