#include "kernels/ref/elementwise_util.h"

namespace sparq {
namespace elementwise {

unsigned TypeBitOf(DataType t) {
  switch (t) {
    case DataType::kFloat32: return kF32;
    case DataType::kFloat64: return kF64;
    case DataType::kFloat16: return kF16;
    case DataType::kBFloat16: return kBF16;
    case DataType::kInt8: return kI8;
    case DataType::kInt16: return kI16;
    case DataType::kInt32: return kI32;
    case DataType::kInt64: return kI64;
    case DataType::kUInt8: return kU8;
    case DataType::kUInt16: return kU16;
    case DataType::kUInt32: return kU32;
    case DataType::kUInt64: return kU64;
    case DataType::kBool: return kBoolBit;
    default: return 0;
  }
}

std::string TypeListOf(unsigned mask) {
  static const DataType kOrder[] = {DataType::kFloat32, DataType::kFloat64, DataType::kFloat16, DataType::kBFloat16,
                                    DataType::kInt8,    DataType::kInt16,   DataType::kInt32,   DataType::kInt64,
                                    DataType::kUInt8,   DataType::kUInt16,  DataType::kUInt32,  DataType::kUInt64,
                                    DataType::kBool};
  std::vector<std::string> names;
  for (DataType t : kOrder)
    if ((mask & TypeBitOf(t)) != 0) names.push_back(DataTypeName(t));
  std::string out;
  for (size_t i = 0; i < names.size(); ++i) {
    if (i > 0) out += i + 1 == names.size() ? " or " : ", ";
    out += names[i];
  }
  return out;
}

Status CheckType(const OpContext& ctx, const Tensor& t, const char* what, unsigned mask) {
  if ((TypeBitOf(t.dtype()) & mask) != 0) return Status::OK();
  return ctx.InvalidArgument(std::string(what) + " has type " + DataTypeName(t.dtype()) + ", expected " +
                             TypeListOf(mask));
}

Status CheckSameTypes(const OpContext& ctx) {
  if (!ctx.has_input(0)) return Status::OK();
  const DataType first = ctx.input(0).dtype();
  for (size_t i = 1; i < ctx.num_inputs(); ++i) {
    if (!ctx.has_input(i) || ctx.input(i).dtype() == first) continue;
    return ctx.InvalidArgument("input " + std::to_string(i) + " has type " + DataTypeName(ctx.input(i).dtype()) +
                               " but input 0 has type " + DataTypeName(first) + "; they must match");
  }
  return Status::OK();
}

StatusOr<Shape> LegacyBroadcastShapeOfB(const OpContext& ctx, const Shape& a, const Shape& b) {
  if (ctx.opset() >= 7 || ctx.node().attr_int("broadcast", 0) == 0) return b;
  const int64_t rank_a = static_cast<int64_t>(a.size());
  const int64_t rank_b = static_cast<int64_t>(b.size());
  int64_t axis = rank_a - rank_b;  // no axis: B matches A's trailing dims
  if (ctx.node().attr("axis") != nullptr) {
    axis = ctx.node().attr_int("axis", 0);
    if (axis < 0) axis += rank_a;
  }
  if (axis < 0 || axis + rank_b > rank_a) {
    return ctx.InvalidArgument("legacy broadcast (opset < 7) of B " + ShapeToString(b) + " onto A " +
                               ShapeToString(a) + " at axis " + std::to_string(axis) + " does not fit");
  }
  Shape out(static_cast<size_t>(rank_a), 1);
  for (int64_t i = 0; i < rank_b; ++i) {
    const int64_t d = b[static_cast<size_t>(i)];
    if (d != 1 && d != a[static_cast<size_t>(axis + i)]) {
      return ctx.InvalidArgument("legacy broadcast (opset < 7): B " + ShapeToString(b) + " does not match A " +
                                 ShapeToString(a) + " at axis " + std::to_string(axis));
    }
    out[static_cast<size_t>(axis + i)] = d;
  }
  return out;
}

StatusOr<Shape> BinaryOutputShape(const OpContext& ctx, const Tensor& a, const Tensor& b, Shape* b_shape) {
  *b_shape = b.shape();
  if (ctx.opset() < 7) {
    if (ctx.node().attr_int("broadcast", 0) == 0) {
      if (a.shape() != b.shape()) {
        return ctx.InvalidArgument("inputs have shapes " + ShapeToString(a.shape()) + " and " +
                                   ShapeToString(b.shape()) + " but broadcast=0 (opset < 7) requires equal shapes");
      }
      return a.shape();
    }
    SPARQ_ASSIGN_OR_RETURN(*b_shape, LegacyBroadcastShapeOfB(ctx, a.shape(), b.shape()));
    return a.shape();
  }
  auto shape = BroadcastShapes({a.shape(), b.shape()});
  if (!shape.ok()) return ctx.InvalidArgument(shape.status().message());
  return std::move(shape).value();
}

}  // namespace elementwise
}  // namespace sparq
