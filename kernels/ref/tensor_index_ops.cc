// Reference kernels driven by index or position: Gather, GatherElements,
// GatherND, Scatter/ScatterElements, ScatterND, OneHot, NonZero, TopK,
// Trilu, CumSum, and sparq.OneHotLookup (a one-hot MatMul's rows read from a
// table, runtime/passes/one_hot_fusion.h).
//
// Index values are checked against the dimension they index before any
// memory is touched: an out-of-range index is InvalidArgument naming it.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "kernels/ref/broadcast.h"
#include "kernels/ref/tensor_util.h"

namespace sparq {
namespace {

using namespace tensor_ops;  // NOLINT: this file's own helpers

// Maps index `v` in [-n, n) to [0, n); InvalidArgument otherwise.
Status NormalizeIndex(const OpContext& ctx, int64_t* v, int64_t n, const std::string& what) {
  if (*v < -n || *v >= n) {
    return ctx.InvalidArgument(what + " value " + std::to_string(*v) + " is out of range [" + std::to_string(-n) +
                               ", " + std::to_string(n - 1) + "]");
  }
  if (*v < 0) *v += n;
  return Status::OK();
}

// Product of shape[begin, end).
int64_t Product(const Shape& shape, size_t begin, size_t end) {
  int64_t p = 1;
  for (size_t d = begin; d < end && d < shape.size(); ++d) p *= shape[d];
  return p;
}

// ---------------------------------------------------------------------------
// Gather family

Status Gather(OpContext& ctx) {
  SPARQ_RETURN_IF_ERROR(ctx.RequireInputs(2));
  const Tensor& data = ctx.input(0);
  const Tensor& indices = ctx.input(1);
  const int64_t rank = static_cast<int64_t>(data.rank());
  if (rank == 0) return ctx.InvalidArgument("data must have rank >= 1");
  SPARQ_ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(ctx, ctx.node().attr_int("axis", 0), rank));
  SPARQ_ASSIGN_OR_RETURN(std::vector<int64_t> idx, ReadIntInput(ctx, 1, "indices"));
  const int64_t n = data.dim(axis);
  for (int64_t& v : idx) SPARQ_RETURN_IF_ERROR(NormalizeIndex(ctx, &v, n, "indices"));
  Shape out_shape(data.shape().begin(), data.shape().begin() + axis);
  out_shape.insert(out_shape.end(), indices.shape().begin(), indices.shape().end());
  out_shape.insert(out_shape.end(), data.shape().begin() + axis + 1, data.shape().end());
  Tensor y(data.dtype(), out_shape);
  const int64_t outer = Product(data.shape(), 0, axis);
  const size_t block = static_cast<size_t>(Product(data.shape(), axis + 1, rank)) * DataTypeSize(data.dtype());
  const int64_t count = static_cast<int64_t>(idx.size());
  const auto* in = static_cast<const uint8_t*>(data.raw_data());
  auto* out = static_cast<uint8_t*>(y.raw_data());
  if (block > 0) {
    const int64_t grain = std::max<int64_t>(1, (int64_t{1} << 15) / static_cast<int64_t>(block));
    ParallelFor(ctx.pool(), outer * count, grain, [&](int64_t begin, int64_t end) {
      for (int64_t row = begin; row < end; ++row) {
        const int64_t o = row / count, k = row % count;
        std::memcpy(out + row * block, in + (o * n + idx[k]) * block, block);
      }
    });
  }
  ctx.set_output(0, std::move(y));
  return Status::OK();
}

// Calls fn(out_linear_index, data_offset) for each element of an index tensor
// of `shape` whose values select positions along `axis` of `data_shape`; the
// other coordinates are shared. Used by GatherElements and ScatterElements.
template <typename Fn>
Status ForEachAxisIndex(const OpContext& ctx, const Shape& shape, const std::vector<int64_t>& idx,
                        const Shape& data_shape, int64_t axis, Fn&& fn) {
  const size_t rank = shape.size();
  for (size_t d = 0; d < rank; ++d) {
    if (static_cast<int64_t>(d) != axis && shape[d] > data_shape[d]) {
      return ctx.InvalidArgument("indices shape " + ShapeToString(shape) + " exceeds data shape " +
                                 ShapeToString(data_shape) + " outside axis " + std::to_string(axis));
    }
  }
  const std::vector<int64_t> strides = ContiguousStrides(data_shape);
  const int64_t n = data_shape[axis];
  std::vector<int64_t> pos(rank, 0);
  for (int64_t i = 0; i < static_cast<int64_t>(idx.size()); ++i) {
    int64_t v = idx[i];
    SPARQ_RETURN_IF_ERROR(NormalizeIndex(ctx, &v, n, "indices"));
    int64_t offset = v * strides[axis];
    for (size_t d = 0; d < rank; ++d)
      if (static_cast<int64_t>(d) != axis) offset += pos[d] * strides[d];
    fn(i, offset);
    for (size_t d = rank; d-- > 0;) {
      if (++pos[d] < shape[d]) break;
      pos[d] = 0;
    }
  }
  return Status::OK();
}

Status GatherElements(OpContext& ctx) {
  SPARQ_RETURN_IF_ERROR(ctx.RequireInputs(2));
  const Tensor& data = ctx.input(0);
  const Tensor& indices = ctx.input(1);
  const int64_t rank = static_cast<int64_t>(data.rank());
  if (rank == 0 || indices.rank() != data.rank()) {
    return ctx.InvalidArgument("data " + ShapeToString(data.shape()) + " and indices " +
                               ShapeToString(indices.shape()) + " must have the same rank >= 1");
  }
  SPARQ_ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(ctx, ctx.node().attr_int("axis", 0), rank));
  SPARQ_ASSIGN_OR_RETURN(std::vector<int64_t> idx, ReadIntInput(ctx, 1, "indices"));
  Tensor y(data.dtype(), indices.shape());
  const size_t esize = DataTypeSize(data.dtype());
  const auto* in = static_cast<const uint8_t*>(data.raw_data());
  auto* out = static_cast<uint8_t*>(y.raw_data());
  SPARQ_RETURN_IF_ERROR(ForEachAxisIndex(ctx, indices.shape(), idx, data.shape(), axis, [&](int64_t i, int64_t off) {
    std::memcpy(out + i * esize, in + off * esize, esize);
  }));
  ctx.set_output(0, std::move(y));
  return Status::OK();
}

// Where GatherND/ScatterND index tuples point: `tuples` offsets (in elements)
// into data, each starting a slice of `slice` elements.
struct NdIndex {
  std::vector<int64_t> offsets;
  int64_t slice = 1;
};

// Resolves indices [..., k] against data (with `batch_dims` leading batch
// dimensions shared by data and indices).
StatusOr<NdIndex> ResolveNdIndices(const OpContext& ctx, const Shape& data_shape, const Tensor& indices,
                                   int64_t batch_dims) {
  const int64_t r = static_cast<int64_t>(data_shape.size());
  const int64_t q = static_cast<int64_t>(indices.rank());
  if (q < 1 || batch_dims < 0 || batch_dims >= std::min(r, q)) {
    return ctx.InvalidArgument("batch_dims " + std::to_string(batch_dims) + " does not fit data " +
                               ShapeToString(data_shape) + " and indices " + ShapeToString(indices.shape()));
  }
  const int64_t k = indices.dim(q - 1);
  if (k < 1 || k > r - batch_dims) {
    return ctx.InvalidArgument("last dimension of indices " + ShapeToString(indices.shape()) + " must be in [1, " +
                               std::to_string(r - batch_dims) + "] for data " + ShapeToString(data_shape));
  }
  for (int64_t d = 0; d < batch_dims; ++d) {
    if (indices.dim(d) != data_shape[d]) {
      return ctx.InvalidArgument("batch dimensions of indices " + ShapeToString(indices.shape()) +
                                 " and data " + ShapeToString(data_shape) + " differ");
    }
  }
  SPARQ_ASSIGN_OR_RETURN(std::vector<int64_t> idx, ReadIntInput(ctx, 1, "indices"));
  const std::vector<int64_t> strides = ContiguousStrides(data_shape);
  const int64_t batch_size = Product(data_shape, batch_dims, r);  // elements per batch
  const int64_t tuples_per_batch = Product(indices.shape(), batch_dims, q - 1);
  const int64_t tuples = Product(indices.shape(), 0, q - 1);
  NdIndex out;
  out.slice = Product(data_shape, batch_dims + k, r);
  out.offsets.resize(tuples);
  for (int64_t t = 0; t < tuples; ++t) {
    int64_t offset = (t / tuples_per_batch) * batch_size;
    for (int64_t j = 0; j < k; ++j) {
      int64_t v = idx[t * k + j];
      SPARQ_RETURN_IF_ERROR(NormalizeIndex(ctx, &v, data_shape[batch_dims + j], "indices"));
      offset += v * strides[batch_dims + j];
    }
    out.offsets[t] = offset;
  }
  return out;
}

Status GatherND(OpContext& ctx) {
  SPARQ_RETURN_IF_ERROR(ctx.RequireInputs(2));
  const Tensor& data = ctx.input(0);
  const Tensor& indices = ctx.input(1);
  const int64_t batch_dims = ctx.node().attr_int("batch_dims", 0);
  SPARQ_ASSIGN_OR_RETURN(NdIndex nd, ResolveNdIndices(ctx, data.shape(), indices, batch_dims));
  const int64_t k = indices.dim(indices.rank() - 1);
  Shape out_shape(indices.shape().begin(), indices.shape().end() - 1);
  out_shape.insert(out_shape.end(), data.shape().begin() + batch_dims + k, data.shape().end());
  Tensor y(data.dtype(), out_shape);
  const size_t block = static_cast<size_t>(nd.slice) * DataTypeSize(data.dtype());
  const auto* in = static_cast<const uint8_t*>(data.raw_data());
  auto* out = static_cast<uint8_t*>(y.raw_data());
  for (size_t t = 0; t < nd.offsets.size(); ++t) {
    std::memcpy(out + t * block, in + nd.offsets[t] * DataTypeSize(data.dtype()), block);
  }
  ctx.set_output(0, std::move(y));
  return Status::OK();
}

// ---------------------------------------------------------------------------
// Scatter family

enum class Reduction { kNone, kAdd, kMul, kMax, kMin };

StatusOr<Reduction> ReadReduction(const OpContext& ctx) {
  const std::string name = ctx.node().attr_string("reduction", "none");
  if (name == "none") return Reduction::kNone;
  if (name == "add" && ctx.opset() >= 16) return Reduction::kAdd;
  if (name == "mul" && ctx.opset() >= 16) return Reduction::kMul;
  if (name == "max" && ctx.opset() >= 18) return Reduction::kMax;
  if (name == "min" && ctx.opset() >= 18) return Reduction::kMin;
  return ctx.InvalidArgument("reduction '" + name + "' is not valid at opset " + std::to_string(ctx.opset()));
}

// Combines `n` elements of src into dst (in order, so duplicates are deterministic).
template <typename T>
void Combine(T* dst, const T* src, int64_t n, Reduction reduction) {
  using A = Arith<T>;
  for (int64_t i = 0; i < n; ++i) {
    const auto a = A::Load(dst[i]), b = A::Load(src[i]);
    switch (reduction) {
      case Reduction::kNone: dst[i] = src[i]; break;
      case Reduction::kAdd: dst[i] = A::Store(static_cast<typename A::C>(a + b)); break;
      case Reduction::kMul: dst[i] = A::Store(static_cast<typename A::C>(a * b)); break;
      case Reduction::kMax: dst[i] = A::Store(std::max(a, b)); break;
      case Reduction::kMin: dst[i] = A::Store(std::min(a, b)); break;
    }
  }
}

// Applies updates to `out` at element offsets: update block i (of `block`
// elements) goes to offsets[i].
Status ScatterBlocks(const OpContext& ctx, Tensor& out, const Tensor& updates, const std::vector<int64_t>& offsets,
                     int64_t block, Reduction reduction) {
  const size_t esize = DataTypeSize(out.dtype());
  auto* dst = static_cast<uint8_t*>(out.raw_data());
  const auto* src = static_cast<const uint8_t*>(updates.raw_data());
  if (reduction == Reduction::kNone) {
    for (size_t i = 0; i < offsets.size(); ++i)
      std::memcpy(dst + offsets[i] * esize, src + i * block * esize, block * esize);
    return Status::OK();
  }
  return VisitNumericType(ctx, out.dtype(), [&](auto tag) -> Status {
    using T = decltype(tag);
    for (size_t i = 0; i < offsets.size(); ++i) {
      Combine(reinterpret_cast<T*>(dst) + offsets[i], reinterpret_cast<const T*>(src) + i * block, block, reduction);
    }
    return Status::OK();
  });
}

// ScatterElements (and the deprecated Scatter of opsets 9-10).
Status ScatterElements(OpContext& ctx) {
  SPARQ_RETURN_IF_ERROR(ctx.RequireInputs(3));
  const Tensor& data = ctx.input(0);
  const Tensor& indices = ctx.input(1);
  const Tensor& updates = ctx.input(2);
  const int64_t rank = static_cast<int64_t>(data.rank());
  if (rank == 0 || indices.rank() != data.rank() || updates.shape() != indices.shape() ||
      updates.dtype() != data.dtype()) {
    return ctx.InvalidArgument("data " + DataTypeName(data.dtype()) + ShapeToString(data.shape()) + ", indices " +
                               ShapeToString(indices.shape()) + " and updates " + DataTypeName(updates.dtype()) +
                               ShapeToString(updates.shape()) +
                               " must have one rank >= 1, indices and updates one shape, data and updates one type");
  }
  SPARQ_ASSIGN_OR_RETURN(Reduction reduction, ReadReduction(ctx));
  SPARQ_ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(ctx, ctx.node().attr_int("axis", 0), rank));
  SPARQ_ASSIGN_OR_RETURN(std::vector<int64_t> idx, ReadIntInput(ctx, 1, "indices"));
  std::vector<int64_t> offsets(idx.size());
  SPARQ_RETURN_IF_ERROR(ForEachAxisIndex(ctx, indices.shape(), idx, data.shape(), axis,
                                         [&](int64_t i, int64_t off) { offsets[i] = off; }));
  Tensor y = data.Clone();
  SPARQ_RETURN_IF_ERROR(ScatterBlocks(ctx, y, updates, offsets, 1, reduction));
  ctx.set_output(0, std::move(y));
  return Status::OK();
}

Status ScatterND(OpContext& ctx) {
  SPARQ_RETURN_IF_ERROR(ctx.RequireInputs(3));
  const Tensor& data = ctx.input(0);
  const Tensor& indices = ctx.input(1);
  const Tensor& updates = ctx.input(2);
  SPARQ_ASSIGN_OR_RETURN(Reduction reduction, ReadReduction(ctx));
  SPARQ_ASSIGN_OR_RETURN(NdIndex nd, ResolveNdIndices(ctx, data.shape(), indices, 0));
  const int64_t k = indices.dim(indices.rank() - 1);
  Shape want(indices.shape().begin(), indices.shape().end() - 1);
  want.insert(want.end(), data.shape().begin() + k, data.shape().end());
  if (updates.shape() != want || updates.dtype() != data.dtype()) {
    return ctx.InvalidArgument("updates " + DataTypeName(updates.dtype()) + ShapeToString(updates.shape()) +
                               " must be " + DataTypeName(data.dtype()) + ShapeToString(want));
  }
  Tensor y = data.Clone();
  SPARQ_RETURN_IF_ERROR(ScatterBlocks(ctx, y, updates, nd.offsets, nd.slice, reduction));
  ctx.set_output(0, std::move(y));
  return Status::OK();
}

// ---------------------------------------------------------------------------
// OneHot, NonZero

Status OneHot(OpContext& ctx) {
  SPARQ_RETURN_IF_ERROR(ctx.RequireInputs(3));
  const Tensor& indices = ctx.input(0);
  const Tensor& depth_t = ctx.input(1);
  const Tensor& values = ctx.input(2);
  if (depth_t.numel() != 1) return ctx.InvalidArgument("depth must hold one value, has shape " + ShapeToString(depth_t.shape()));
  if (values.numel() != 2) return ctx.InvalidArgument("values must hold [off, on], has shape " + ShapeToString(values.shape()));
  const double depth_value = depth_t.GetAsDouble(0);
  if (!(depth_value >= 1.0 && depth_value <= static_cast<double>(kMaxOutputBytes))) {
    return ctx.InvalidArgument("depth must be a positive size, got " + std::to_string(depth_value));
  }
  const int64_t depth = static_cast<int64_t>(depth_value);
  const int64_t q = static_cast<int64_t>(indices.rank());
  SPARQ_ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(ctx, ctx.node().attr_int("axis", -1), q + 1));
  Shape out_shape = indices.shape();
  out_shape.insert(out_shape.begin() + axis, depth);
  SPARQ_RETURN_IF_ERROR(CheckOutputShape(ctx, out_shape, values.dtype(), "output shape"));
  Tensor y(values.dtype(), out_shape);
  const size_t esize = DataTypeSize(values.dtype());
  const auto* off_on = static_cast<const uint8_t*>(values.raw_data());
  auto* out = static_cast<uint8_t*>(y.raw_data());
  FillElements(out, off_on, y.numel(), esize);
  const int64_t inner = Product(indices.shape(), axis, q);
  for (int64_t i = 0; i < indices.numel(); ++i) {
    const double raw = indices.GetAsDouble(i);
    if (!(std::fabs(raw) < static_cast<double>(kMaxOutputBytes))) continue;  // NaN or far out of range
    int64_t v = static_cast<int64_t>(raw);
    if (v < 0) v += depth;
    if (v < 0 || v >= depth) continue;  // out of range: all "off"
    const int64_t o = i / inner, j = i % inner;
    std::memcpy(out + ((o * depth + v) * inner + j) * esize, off_on + esize, esize);
  }
  ctx.set_output(0, std::move(y));
  return Status::OK();
}

Status NonZero(OpContext& ctx) {
  SPARQ_RETURN_IF_ERROR(ctx.RequireInputs(1));
  const Tensor& x = ctx.input(0);
  // A scalar is treated as shape [1], as numpy and onnxruntime do.
  const Shape shape = x.rank() == 0 ? Shape{1} : x.shape();
  const size_t rank = shape.size();
  std::vector<int64_t> hits;
  for (int64_t i = 0; i < x.numel(); ++i)
    if (x.GetAsDouble(i) != 0.0) hits.push_back(i);  // NaN counts as nonzero
  const int64_t nnz = static_cast<int64_t>(hits.size());
  Tensor y(DataType::kInt64, {static_cast<int64_t>(rank), nnz});
  int64_t* out = y.data<int64_t>();
  for (int64_t h = 0; h < nnz; ++h) {
    int64_t rest = hits[h];
    for (size_t d = rank; d-- > 0;) {
      out[d * nnz + h] = rest % shape[d];
      rest /= shape[d];
    }
  }
  ctx.set_output(0, std::move(y));
  return Status::OK();
}

// ---------------------------------------------------------------------------
// TopK

template <typename C>
bool IsNaN(C v) {
  if constexpr (std::is_floating_point_v<C>) return std::isnan(v);
  return false;
}

// Strict order with NaN above every number, so sorting is well defined.
template <typename C>
bool Greater(C a, C b) {
  if (IsNaN(a)) return !IsNaN(b);
  if (IsNaN(b)) return false;
  return a > b;
}

Status TopK(OpContext& ctx) {
  SPARQ_RETURN_IF_ERROR(ctx.RequireInputs(1));
  const Tensor& x = ctx.input(0);
  const Node& node = ctx.node();
  const int64_t rank = static_cast<int64_t>(x.rank());
  if (rank == 0) return ctx.InvalidArgument("input must have rank >= 1");
  SPARQ_ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(ctx, node.attr_int("axis", -1), rank));
  int64_t k;
  if (ctx.opset() < 10) {
    if (node.attr("k") == nullptr) return ctx.InvalidArgument("attribute 'k' is required");
    k = node.attr_int("k", 0);
  } else {
    SPARQ_RETURN_IF_ERROR(ctx.RequireInputs(2));
    SPARQ_ASSIGN_OR_RETURN(std::vector<int64_t> kv, ReadIntInput(ctx, 1, "K"));
    if (kv.size() != 1) return ctx.InvalidArgument("K must hold one value, got " + ValuesToString(kv));
    k = kv[0];
  }
  const int64_t n = x.dim(axis);
  if (k < 0 || k > n) {
    return ctx.InvalidArgument("k = " + std::to_string(k) + " is out of range [0, " + std::to_string(n) +
                               "] for axis " + std::to_string(axis) + " of shape " + ShapeToString(x.shape()));
  }
  // Ties keep the lower index first; `sorted` = 0 allows any order, sorted is one of them.
  const bool largest = ctx.opset() < 11 || node.attr_int("largest", 1) != 0;
  Shape out_shape = x.shape();
  out_shape[axis] = k;
  Tensor values(x.dtype(), out_shape);
  Tensor indices(DataType::kInt64, out_shape);
  const int64_t outer = Product(x.shape(), 0, axis), inner = Product(x.shape(), axis + 1, rank);
  SPARQ_RETURN_IF_ERROR(VisitNumericType(ctx, x.dtype(), [&](auto tag) -> Status {
    using T = decltype(tag);
    using C = typename Arith<T>::C;
    const T* in = static_cast<const T*>(x.raw_data());
    T* out_v = static_cast<T*>(values.raw_data());
    int64_t* out_i = indices.data<int64_t>();
    ParallelFor(ctx.pool(), outer * inner, 16, [&](int64_t begin, int64_t end) {
      std::vector<std::pair<C, int64_t>> row(n);
      for (int64_t r = begin; r < end; ++r) {
        const int64_t o = r / inner, j = r % inner;
        for (int64_t i = 0; i < n; ++i) row[i] = {Arith<T>::Load(in[(o * n + i) * inner + j]), i};
        auto before = [largest](const std::pair<C, int64_t>& a, const std::pair<C, int64_t>& b) {
          const bool a_first = largest ? Greater(a.first, b.first) : Greater(b.first, a.first);
          const bool b_first = largest ? Greater(b.first, a.first) : Greater(a.first, b.first);
          return a_first || (!b_first && a.second < b.second);
        };
        std::partial_sort(row.begin(), row.begin() + k, row.end(), before);
        for (int64_t i = 0; i < k; ++i) {
          out_v[(o * k + i) * inner + j] = in[(o * n + row[i].second) * inner + j];
          out_i[(o * k + i) * inner + j] = row[i].second;
        }
      }
    });
    return Status::OK();
  }));
  ctx.set_output(0, std::move(values));
  ctx.set_output(1, std::move(indices));
  return Status::OK();
}

// ---------------------------------------------------------------------------
// Trilu, CumSum

// Keeps the upper (j - i >= k) or lower (j - i <= k) triangle of the last two
// dimensions and zeros the rest.
Status Trilu(OpContext& ctx) {
  SPARQ_RETURN_IF_ERROR(ctx.RequireInputs(1));
  const Tensor& x = ctx.input(0);
  if (x.rank() < 2) return ctx.InvalidArgument("input must have rank >= 2, has shape " + ShapeToString(x.shape()));
  int64_t k = 0;
  if (ctx.has_input(1)) {
    SPARQ_ASSIGN_OR_RETURN(std::vector<int64_t> kv, ReadIntInput(ctx, 1, "k"));
    if (kv.size() != 1) return ctx.InvalidArgument("k must hold one value, got " + ValuesToString(kv));
    k = kv[0];
  }
  const bool upper = ctx.node().attr_int("upper", 1) != 0;
  const int64_t rows = x.dim(x.rank() - 2), cols = x.dim(x.rank() - 1);
  const int64_t matrices = rows * cols == 0 ? 0 : x.numel() / (rows * cols);
  const size_t esize = DataTypeSize(x.dtype());
  Tensor y(x.dtype(), x.shape());  // zero-filled
  const auto* in = static_cast<const uint8_t*>(x.raw_data());
  auto* out = static_cast<uint8_t*>(y.raw_data());
  for (int64_t m = 0; m < matrices; ++m) {
    for (int64_t i = 0; i < rows; ++i) {
      // Clamp in a wide range first: i + k may lie far outside [0, cols].
      const int64_t lo = upper ? std::clamp<int64_t>(i + k, 0, cols) : 0;
      const int64_t hi = upper ? cols : std::clamp<int64_t>(i + k + 1, 0, cols);
      if (hi <= lo) continue;
      const int64_t base = (m * rows + i) * cols;
      std::memcpy(out + (base + lo) * esize, in + (base + lo) * esize, (hi - lo) * esize);
    }
  }
  ctx.set_output(0, std::move(y));
  return Status::OK();
}

Status CumSum(OpContext& ctx) {
  SPARQ_RETURN_IF_ERROR(ctx.RequireInputs(2));
  const Tensor& x = ctx.input(0);
  const int64_t rank = static_cast<int64_t>(x.rank());
  SPARQ_ASSIGN_OR_RETURN(std::vector<int64_t> axis_v, ReadIntInput(ctx, 1, "axis"));
  if (axis_v.size() != 1) return ctx.InvalidArgument("axis must hold one value, got " + ValuesToString(axis_v));
  if (rank == 0) return ctx.InvalidArgument("input must have rank >= 1");
  SPARQ_ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(ctx, axis_v[0], rank));
  const bool exclusive = ctx.node().attr_int("exclusive", 0) != 0;
  const bool reverse = ctx.node().attr_int("reverse", 0) != 0;
  const int64_t n = x.dim(axis);
  const int64_t outer = Product(x.shape(), 0, axis), inner = Product(x.shape(), axis + 1, rank);
  Tensor y(x.dtype(), x.shape());
  SPARQ_RETURN_IF_ERROR(VisitNumericType(ctx, x.dtype(), [&](auto tag) -> Status {
    using T = decltype(tag);
    using C = typename Arith<T>::C;
    const T* in = static_cast<const T*>(x.raw_data());
    T* out = static_cast<T*>(y.raw_data());
    ParallelFor(ctx.pool(), outer * inner, 64, [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r) {
        const int64_t o = r / inner, j = r % inner;
        C sum = C(0);
        for (int64_t step = 0; step < n; ++step) {
          const int64_t i = reverse ? n - 1 - step : step;
          const int64_t at = (o * n + i) * inner + j;
          const C v = Arith<T>::Load(in[at]);
          if (!exclusive) sum = static_cast<C>(sum + v);
          out[at] = Arith<T>::Store(sum);
          if (exclusive) sum = static_cast<C>(sum + v);
        }
      }
    });
    return Status::OK();
  }));
  ctx.set_output(0, std::move(y));
  return Status::OK();
}


// sparq.OneHotLookup(a, classes, table[, shape]) (runtime/passes/one_hot_fusion.h):
//   e = Equal(Expand(a, shape), classes)            (no shape: Equal(a, classes))
//   y[r, :] = table[v, :] where e[r, v] holds, table[V, :] where no v does
// with classes' V values distinct and along the last axis (shape [1, ..., 1,
// V]) and a's last dimension 1, so that each row r compares one value of a:
// the rows of MatMul(Cast(e), W) when table[v] holds that product for the
// one-hot row v (and table[V] for the zero row). a and classes: int32 or
// int64; table [V + 1, D], any type; y: e's shape with its last axis D.
Status OneHotLookup(OpContext& ctx) {
  SPARQ_RETURN_IF_ERROR(ctx.RequireInputs(3));
  const Tensor& a = ctx.input(0);
  const Tensor& classes = ctx.input(1);
  const Tensor& table = ctx.input(2);
  if (a.dtype() != classes.dtype() || (a.dtype() != DataType::kInt32 && a.dtype() != DataType::kInt64))
    return ctx.NotSupported("a and classes must both be int32 or both int64");
  const int64_t V = classes.numel();
  if (V == 0 || classes.rank() == 0 || classes.dim(classes.rank() - 1) != V)
    return ctx.InvalidArgument("classes must hold its values along its last axis, shape [1, ..., 1, V]");
  if (table.rank() != 2 || table.dim(0) != V + 1)
    return ctx.InvalidArgument("table must be [" + std::to_string(V + 1) + ", D] for " + std::to_string(V) +
                               " classes, not " + ShapeToString(table.shape()));
  if (a.rank() == 0 || a.dim(a.rank() - 1) != 1)
    return ctx.InvalidArgument("a's last dimension must be 1 (one value per row), not " + ShapeToString(a.shape()));
  Shape full = a.shape();
  if (ctx.has_input(3)) {
    SPARQ_ASSIGN_OR_RETURN(std::vector<int64_t> target, ReadIntInput(ctx, 3, "shape"));
    auto expanded = BroadcastShapes({full, Shape(target.begin(), target.end())});
    if (!expanded.ok()) return ctx.InvalidArgument(expanded.status().message());
    full = *expanded;
  }
  auto compared = BroadcastShapes({full, classes.shape()});
  if (!compared.ok()) return ctx.InvalidArgument(compared.status().message());
  full = *compared;
  if (full.back() != V) return ctx.InvalidArgument("a broadcast along the last axis must meet V classes");
  // Class value -> its row of the table: sorted (value, v) pairs.
  std::vector<std::pair<int64_t, int64_t>> sorted(static_cast<size_t>(V));
  for (int64_t v = 0; v < V; ++v) {
    const int64_t c = a.dtype() == DataType::kInt32 ? classes.data<int32_t>()[v] : classes.data<int64_t>()[v];
    sorted[v] = {c, v};
  }
  std::sort(sorted.begin(), sorted.end());
  for (int64_t v = 1; v < V; ++v)
    if (sorted[v].first == sorted[v - 1].first)
      return ctx.InvalidArgument("classes must be distinct (" + std::to_string(sorted[v].first) + " twice)");
  // classes 0, 1, ..., V - 1 in order (one_hot's): the row is the value itself.
  bool iota = true;
  for (int64_t v = 0; v < V && iota; ++v) iota = sorted[v].first == sorted[0].first + v && sorted[v].second == v;
  const int64_t first = sorted[0].first;
  auto row_of = [&](int64_t value) -> int64_t {
    if (iota) return value >= first && value - first < V ? value - first : V;
    auto it = std::lower_bound(sorted.begin(), sorted.end(), std::make_pair(value, int64_t{0}));
    return it != sorted.end() && it->first == value ? it->second : V;
  };
  const Shape rows(full.begin(), full.end() - 1);
  const int64_t D = table.dim(1);
  Shape y_shape = rows;
  y_shape.push_back(D);
  SPARQ_RETURN_IF_ERROR(CheckOutputShape(ctx, y_shape, table.dtype(), "output shape"));
  Tensor y = ctx.OutputBuffer(0, table.dtype(), y_shape);
  const Shape a_rows(a.shape().begin(), a.shape().end() - 1);
  const size_t row_bytes = static_cast<size_t>(D) * DataTypeSize(table.dtype());
  const auto* src = static_cast<const uint8_t*>(table.raw_data());
  auto* dst = static_cast<uint8_t*>(y.raw_data());
  const std::array<std::vector<int64_t>, 1> strides = {BroadcastStrides(a_rows, rows)};
  ForEachBroadcast(rows, strides, [&](int64_t r, const std::array<int64_t, 1>& off) {
    const int64_t value = a.dtype() == DataType::kInt32 ? a.data<int32_t>()[off[0]] : a.data<int64_t>()[off[0]];
    if (row_bytes > 0) std::memcpy(dst + r * row_bytes, src + row_of(value) * row_bytes, row_bytes);
  });
  ctx.set_output(0, std::move(y));
  return Status::OK();
}

}  // namespace

void RegisterTensorIndexOps(KernelRegistry& r) {
  r.Add({"Gather", "", 1, 99, Gather, "ref"});
  r.Add({"GatherElements", "", 11, 99, GatherElements, "ref"});
  r.Add({"GatherND", "", 11, 99, GatherND, "ref"});
  r.Add({"Scatter", "", 9, 10, ScatterElements, "ref"});
  r.Add({"ScatterElements", "", 11, 99, ScatterElements, "ref"});
  r.Add({"ScatterND", "", 11, 99, ScatterND, "ref"});
  r.Add({"OneHot", "", 9, 99, OneHot, "ref"});
  r.Add({"NonZero", "", 9, 99, NonZero, "ref"});
  r.Add({"TopK", "", 1, 99, TopK, "ref"});
  r.Add({"Trilu", "", 14, 99, Trilu, "ref"});
  r.Add({"CumSum", "", 11, 99, CumSum, "ref"});
  r.Add({"OneHotLookup", kSparqDomain, 1, 99, OneHotLookup, "ref"});
}

}  // namespace sparq
