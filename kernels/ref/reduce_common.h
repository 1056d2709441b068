// Helpers shared by the reference reduction, normalization, softmax and resize
// kernels (reduce.cc, norm.cc, softmax.cc, resize.cc): axis checks, the
// "which input elements feed which output element" layout of a reduction, and
// running a float32 kernel on float16/bfloat16 data.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "kernels/op_context.h"
#include "sparq/status.h"
#include "sparq/tensor.h"

namespace sparq {
namespace reduce_common {

// Maps `axis` from [-rank, rank) to [0, rank); InvalidArgument naming the node
// and the attribute (`what`) otherwise.
inline StatusOr<int64_t> NormalizeAxis(const OpContext& ctx, int64_t axis, int64_t rank,
                                       const std::string& what = "axis") {
  if (axis < -rank || axis >= rank) {
    return ctx.InvalidArgument(what + " " + std::to_string(axis) + " is out of range for an input of rank " +
                               std::to_string(rank) + " (expected " + std::to_string(-rank) + " to " +
                               std::to_string(rank - 1) + ")");
  }
  return axis < 0 ? axis + rank : axis;
}

// Turns a list of (possibly negative) axes into a per-dimension mask; rejects
// out-of-range and repeated axes.
inline StatusOr<std::vector<bool>> AxesToMask(const OpContext& ctx, const std::vector<int64_t>& axes, int64_t rank,
                                              const std::string& what = "axes") {
  std::vector<bool> mask(static_cast<size_t>(rank), false);
  for (int64_t a : axes) {
    SPARQ_ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(ctx, a, rank, what + " entry"));
    if (mask[axis]) return ctx.InvalidArgument(what + " lists axis " + std::to_string(a) + " more than once");
    mask[axis] = true;
  }
  return mask;
}

// ReduceMean of n contiguous float32 values, as the reference computes it
// (reduce.cc): summed in input order in double, divided in double, rounded
// once to float (NaN for n == 0). The spec of the mean_rows_f32 rows
// (kernels/cpu/dispatch.h).
inline float MeanOfRowRef(const float* x, int64_t n) {
  double s = 0.0;
  for (int64_t i = 0; i < n; ++i) s += static_cast<double>(x[i]);
  return static_cast<float>(s / static_cast<double>(n));
}

// Where the input elements of each output element of a reduction live.
// Output element o (row-major over the kept dimensions) reduces the input
// elements at base[o] + offsets[r] for r = 0 .. offsets.size() - 1, in order.
struct ReductionLayout {
  Shape keepdims_shape;          // input shape with reduced dimensions set to 1
  std::vector<int64_t> base;     // one per output element
  std::vector<int64_t> offsets;  // one per reduced element (empty for an empty reduction)
};

// Builds the layout for reducing the dimensions of `shape` where mask is true.
inline ReductionLayout MakeReductionLayout(const Shape& shape, const std::vector<bool>& mask) {
  const size_t rank = shape.size();
  std::vector<int64_t> stride(rank, 1);
  for (size_t d = rank; d-- > 1;) stride[d - 1] = stride[d] * shape[d];
  ReductionLayout layout;
  layout.keepdims_shape = shape;
  std::vector<int64_t> kept_dims, kept_strides, red_dims, red_strides;
  for (size_t d = 0; d < rank; ++d) {
    if (mask[d]) {
      layout.keepdims_shape[d] = 1;
      red_dims.push_back(shape[d]);
      red_strides.push_back(stride[d]);
    } else {
      kept_dims.push_back(shape[d]);
      kept_strides.push_back(stride[d]);
    }
  }
  // Odometer over `dims`, appending the element offset of every index.
  auto enumerate = [](const std::vector<int64_t>& dims, const std::vector<int64_t>& strides,
                      std::vector<int64_t>* out) {
    const int64_t total = NumElements(dims);
    out->reserve(static_cast<size_t>(total));
    if (total == 0) return;
    std::vector<int64_t> idx(dims.size(), 0);
    int64_t off = 0;
    for (int64_t i = 0; i < total; ++i) {
      out->push_back(off);
      for (size_t d = dims.size(); d-- > 0;) {
        if (++idx[d] < dims[d]) {
          off += strides[d];
          break;
        }
        off -= strides[d] * (dims[d] - 1);
        idx[d] = 0;
      }
    }
  };
  enumerate(kept_dims, kept_strides, &layout.base);
  enumerate(red_dims, red_strides, &layout.offsets);
  return layout;
}

// Product of shape[begin, end).
inline int64_t DimProduct(const Shape& shape, size_t begin, size_t end) {
  int64_t p = 1;
  for (size_t d = begin; d < end && d < shape.size(); ++d) p *= shape[d];
  return p;
}

// Converts a computed value to T: floats directly; integers round toward zero
// (as a float-to-int Cast), NaN becomes 0 and out-of-range values saturate.
template <typename T>
T FromDouble(double v) {
  if constexpr (std::is_floating_point_v<T>) {
    return static_cast<T>(v);
  } else {
    if (std::isnan(v)) return 0;
    const double t = std::trunc(v);
    if (t <= static_cast<double>(std::numeric_limits<T>::lowest())) return std::numeric_limits<T>::lowest();
    if (t >= static_cast<double>(std::numeric_limits<T>::max())) return std::numeric_limits<T>::max();
    return static_cast<T>(t);
  }
}

inline bool IsHalfType(DataType t) { return t == DataType::kFloat16 || t == DataType::kBFloat16; }

// Runs `fn` on float32 copies of the node's float16/bfloat16 inputs and casts
// its float32 outputs back to `half_type` (outputs whose bit is clear in
// `cast_back_mask` keep float32, e.g. LayerNormalization's Mean). This is how
// the reference kernels support 16-bit floats: compute in float32.
inline Status RunAsFloat32(OpContext& ctx, KernelFn fn, DataType half_type, uint32_t cast_back_mask = ~0u) {
  std::vector<Tensor> converted(ctx.num_inputs());
  std::vector<const Tensor*> inputs(ctx.num_inputs(), nullptr);
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    if (!ctx.has_input(i)) continue;
    const Tensor& t = ctx.input(i);
    if (IsHalfType(t.dtype())) {
      converted[i] = t.ToFloat32();
      inputs[i] = &converted[i];
    } else {
      inputs[i] = &t;
    }
  }
  OpContext inner(ctx.node(), ctx.opset(), std::move(inputs), ctx.pool());
  SPARQ_RETURN_IF_ERROR(fn(inner));
  for (size_t i = 0; i < inner.num_outputs(); ++i) {
    Tensor& t = inner.outputs()[i];
    const bool cast_back = i < 32 && ((cast_back_mask >> i) & 1u) != 0;
    if (cast_back && t.defined() && t.dtype() == DataType::kFloat32) t = t.CastTo(half_type);
    ctx.set_output(i, std::move(t));
  }
  return Status::OK();
}

}  // namespace reduce_common
}  // namespace sparq
