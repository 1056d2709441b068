#include "kernels/ref/tensor_util.h"

#include <algorithm>
#include <limits>

namespace sparq {
namespace tensor_ops {

std::string ValuesToString(const std::vector<int64_t>& values) { return ShapeToString(values); }

StatusOr<int64_t> NormalizeAxis(const OpContext& ctx, int64_t axis, int64_t rank, const std::string& what) {
  if (axis < -rank || axis >= rank) {
    return ctx.InvalidArgument(what + " " + std::to_string(axis) + " is out of range [" + std::to_string(-rank) +
                               ", " + std::to_string(rank - 1) + "] for rank " + std::to_string(rank));
  }
  return axis < 0 ? axis + rank : axis;
}

Status CheckOutputShape(const OpContext& ctx, const Shape& shape, DataType type, const std::string& what) {
  const int64_t elem = static_cast<int64_t>(std::max<size_t>(DataTypeSize(type), 1));
  int64_t bytes = elem;
  bool too_big = false;
  for (int64_t d : shape) {
    if (d < 0) return ctx.InvalidArgument(what + " " + ShapeToString(shape) + " has a negative dimension");
    if (d != 0 && bytes > kMaxOutputBytes / d) too_big = true;
    bytes = too_big ? kMaxOutputBytes : bytes * d;
  }
  // A zero dimension makes the tensor empty whatever the other dimensions say.
  if (too_big && std::find(shape.begin(), shape.end(), 0) == shape.end()) {
    return ctx.InvalidArgument(what + " " + ShapeToString(shape) + " of " + DataTypeName(type) +
                               " is too large to allocate");
  }
  return Status::OK();
}

StatusOr<std::vector<int64_t>> ReadIntInput(const OpContext& ctx, size_t i, const std::string& what) {
  const Tensor& t = ctx.input(i);
  const DataTypeInfo* info = GetDataTypeInfo(t.dtype());
  if (info == nullptr || info->is_float || t.dtype() == DataType::kBool) {
    return ctx.InvalidArgument(what + " (input " + std::to_string(i) + ") must be an integer tensor, got " +
                               DataTypeName(t.dtype()));
  }
  return t.ToInt64Vector();
}

std::vector<int64_t> ContiguousStrides(const Shape& shape) {
  std::vector<int64_t> strides(shape.size(), 1);
  for (size_t d = shape.size(); d-- > 1;) strides[d - 1] = strides[d] * shape[d];
  return strides;
}

void StridedCopy(const void* src, const std::vector<int64_t>& src_strides, const Shape& out_shape, void* dst,
                 size_t elem_size, ThreadPool* pool) {
  if (NumElements(out_shape) == 0) return;
  // Drop unit dimensions, then merge neighbours that are contiguous in the
  // source, so the innermost loop runs as long as possible.
  Shape shape;
  std::vector<int64_t> strides;
  for (size_t d = 0; d < out_shape.size(); ++d) {
    if (out_shape[d] == 1) continue;
    if (!shape.empty() && strides.back() == src_strides[d] * out_shape[d]) {
      shape.back() *= out_shape[d];
      strides.back() = src_strides[d];
      continue;
    }
    shape.push_back(out_shape[d]);
    strides.push_back(src_strides[d]);
  }
  const auto* in = static_cast<const uint8_t*>(src);
  auto* out = static_cast<uint8_t*>(dst);
  if (shape.empty()) {
    std::memcpy(out, in, elem_size);
    return;
  }
  const size_t outer_rank = shape.size() - 1;
  const int64_t inner = shape.back();
  const int64_t inner_stride = strides.back();
  const int64_t rows = NumElements(shape) / inner;
  const int64_t grain = std::max<int64_t>(1, (int64_t{1} << 15) / inner);
  const int64_t esize = static_cast<int64_t>(elem_size);
  ParallelFor(pool, rows, grain, [&](int64_t begin, int64_t end) {
    // Multi-index and source offset of row `begin`.
    std::vector<int64_t> idx(outer_rank, 0);
    int64_t offset = 0;
    for (size_t d = outer_rank, rest = static_cast<size_t>(begin); d-- > 0;) {
      idx[d] = static_cast<int64_t>(rest % static_cast<size_t>(shape[d]));
      rest /= static_cast<size_t>(shape[d]);
      offset += idx[d] * strides[d];
    }
    for (int64_t row = begin; row < end; ++row) {
      CopyStridedRow(out + row * inner * esize, in + offset * esize, inner, inner_stride, elem_size);
      for (size_t d = outer_rank; d-- > 0;) {  // odometer step over the outer dimensions
        offset += strides[d];
        if (++idx[d] < shape[d]) break;
        offset -= strides[d] * shape[d];
        idx[d] = 0;
      }
    }
  });
}

std::vector<uint8_t> ScalarBytes(double v, DataType type) {
  Tensor one = Tensor::Scalar<double>(v).CastTo(type);
  const auto* p = static_cast<const uint8_t*>(one.raw_data());
  return std::vector<uint8_t>(p, p + DataTypeSize(type));
}

}  // namespace tensor_ops
}  // namespace sparq
