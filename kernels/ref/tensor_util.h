// Helpers shared by the reference tensor/shape operators (kernels/ref/tensor_*.cc).
//
// Most of these operators only move elements around, so they work on raw
// bytes with the element size taken from DataTypeSize: one code path serves
// every data type (bool and float16 included). The few that compute (CumSum,
// TopK, scatter reductions, Range) dispatch on the type with VisitNumericType.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "kernels/op_context.h"
#include "kernels/registry.h"
#include "sparq/status.h"
#include "sparq/tensor.h"

namespace sparq {

// Registration hooks of the tensor operator files, called by RegisterTensorOps.
void RegisterTensorShapeOps(KernelRegistry& r);   // tensor_shape_ops.cc
void RegisterTensorCopyOps(KernelRegistry& r);    // tensor_copy_ops.cc
void RegisterTensorIndexOps(KernelRegistry& r);   // tensor_index_ops.cc

// Helpers live in their own namespace so they cannot clash with the helpers
// of other kernel files.
namespace tensor_ops {

// Largest output a reference tensor kernel allocates (bytes); a bigger request
// (a shape tensor gone wrong) is reported instead of attempting the allocation.
constexpr int64_t kMaxOutputBytes = int64_t{1} << 40;

// "[1, 2, 3]" for any list of integers (values in messages).
std::string ValuesToString(const std::vector<int64_t>& values);

// Maps `axis` in [-rank, rank) to [0, rank); InvalidArgument naming the node,
// the attribute/input (`what`) and the valid range otherwise.
StatusOr<int64_t> NormalizeAxis(const OpContext& ctx, int64_t axis, int64_t rank, const std::string& what = "axis");

// Checks that every dimension is >= 0 and the tensor stays below
// kMaxOutputBytes; `what` names the shape in the message.
Status CheckOutputShape(const OpContext& ctx, const Shape& shape, DataType type, const std::string& what);

// Values of integer input `i` (shape-like inputs: shapes, axes, pads, indices);
// InvalidArgument when the input is not an integer tensor.
StatusOr<std::vector<int64_t>> ReadIntInput(const OpContext& ctx, size_t i, const std::string& what);

// The output sizes along `axis` (normalized) of Split node ctx.node() on
// input 0: its split input (opset 13 on, or 1) or attribute (before 13),
// else equal parts, from opset 18 num_outputs with a smaller last part;
// InvalidArgument naming the node when they do not fit the dimension
// (tensor_copy_ops.cc; the fast Split of kernels/cpu uses it too).
StatusOr<std::vector<int64_t>> SplitSizes(const OpContext& ctx, int64_t axis);

// Where Slice node ctx.node() reads input 0: the output's shape, and per
// axis the first index read and the step between reads (clamped as ONNX
// says; 1 where one element or none is read). `whole` when the output is the
// input, in order. Starts / ends / axes / steps from the attributes (opset
// 1-9) or the inputs (10+); InvalidArgument naming the node otherwise
// (tensor_copy_ops.cc; the fast Slice of kernels/cpu uses it too).
struct SliceGeometry {
  Shape shape;
  std::vector<int64_t> first;
  std::vector<int64_t> step;
  bool whole = false;
};
StatusOr<SliceGeometry> SliceGeometryOf(const OpContext& ctx);
// Copies the elements `g` selects from x into the contiguous buffer dst
// (g.shape, x's element type), split over `pool` by rows.
void CopySlice(const Tensor& x, const SliceGeometry& g, void* dst, ThreadPool* pool);

// Row-major element strides of a contiguous tensor of `shape`.
std::vector<int64_t> ContiguousStrides(const Shape& shape);

// Copies a strided view of a source buffer into the contiguous buffer `dst` of
// shape `out_shape`: dst[i_0, ..., i_n] = src[sum_d i_d * src_strides[d]].
// Strides are in elements and may be zero (broadcast) or negative (reversed);
// `src` points at the element with all indices zero. Parallel over rows of
// `pool` (null: inline); every element is written by exactly one chunk.
void StridedCopy(const void* src, const std::vector<int64_t>& src_strides, const Shape& out_shape, void* dst,
                 size_t elem_size, ThreadPool* pool);

// Copies `n` elements of `elem_size` bytes from src (stepping `src_stride`
// elements) to contiguous dst.
inline void CopyStridedRow(uint8_t* dst, const uint8_t* src, int64_t n, int64_t src_stride, size_t elem_size) {
  auto copy = [&](auto tag) {
    using U = decltype(tag);
    U* d = reinterpret_cast<U*>(dst);
    for (int64_t i = 0; i < n; ++i) std::memcpy(d + i, src + i * src_stride * elem_size, sizeof(U));
  };
  if (src_stride == 1) {
    std::memcpy(dst, src, static_cast<size_t>(n) * elem_size);
    return;
  }
  switch (elem_size) {
    case 1: copy(uint8_t{}); return;
    case 2: copy(uint16_t{}); return;
    case 4: copy(uint32_t{}); return;
    case 8: copy(uint64_t{}); return;
    default:
      for (int64_t i = 0; i < n; ++i) std::memcpy(dst + i * elem_size, src + i * src_stride * elem_size, elem_size);
  }
}

// Fills `n` elements at dst with the one element at `value`.
inline void FillElements(uint8_t* dst, const uint8_t* value, int64_t n, size_t elem_size) {
  for (int64_t i = 0; i < n; ++i) std::memcpy(dst + i * elem_size, value, elem_size);
}

// Bytes of the single value `v` converted to `type` (fill values, ones).
std::vector<uint8_t> ScalarBytes(double v, DataType type);

// Arithmetic on a stored type: C is the type computed in (float for the
// 16-bit floats, T itself otherwise).
template <typename T>
struct Arith {
  using C = T;
  static C Load(T v) { return v; }
  static T Store(C c) { return c; }
};
template <>
struct Arith<Float16> {
  using C = float;
  static C Load(Float16 v) { return HalfToFloat(v.bits); }
  static Float16 Store(C c) { return Float16{FloatToHalf(c)}; }
};
template <>
struct Arith<BFloat16> {
  using C = float;
  static C Load(BFloat16 v) { return BFloat16ToFloat(v.bits); }
  static BFloat16 Store(C c) { return BFloat16{FloatToBFloat16(c)}; }
};

// Calls fn(T{}) with T the storage type of `type` among the numeric types
// (bool excluded) and returns its Status; NotSupported for other types.
template <typename Fn>
Status VisitNumericType(const OpContext& ctx, DataType type, Fn&& fn) {
  switch (type) {
    case DataType::kFloat32: return fn(float{});
    case DataType::kFloat64: return fn(double{});
    case DataType::kFloat16: return fn(Float16{});
    case DataType::kBFloat16: return fn(BFloat16{});
    case DataType::kInt8: return fn(int8_t{});
    case DataType::kUInt8: return fn(uint8_t{});
    case DataType::kInt16: return fn(int16_t{});
    case DataType::kUInt16: return fn(uint16_t{});
    case DataType::kInt32: return fn(int32_t{});
    case DataType::kUInt32: return fn(uint32_t{});
    case DataType::kInt64: return fn(int64_t{});
    case DataType::kUInt64: return fn(uint64_t{});
    default: break;
  }
  return ctx.NotSupported("data type " + DataTypeName(type) + " is not supported");
}

}  // namespace tensor_ops
}  // namespace sparq
