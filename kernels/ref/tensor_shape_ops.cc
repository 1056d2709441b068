// Reference kernels that change a tensor's shape or type, or make a tensor
// from attributes: Reshape, Flatten, Squeeze, Unsqueeze, Identity, Dropout
// (inference), Shape, Size, Expand, Cast, CastLike, Constant,
// ConstantOfShape, EyeLike, Range.
//
// Reshape-like operators return views that share the input's buffer
// (Tensor::Reshaped); kernels never write to their inputs, so this is safe.
#include <algorithm>
#include <cmath>
#include <limits>

#include "kernels/ref/broadcast.h"
#include "kernels/ref/tensor_util.h"

namespace sparq {
namespace {

using namespace tensor_ops;  // NOLINT: this file's own helpers

// ---------------------------------------------------------------------------
// Reshape

// The target shape of Reshape: 0 copies the input dimension (unless
// allowzero), one -1 is inferred from the element count.
StatusOr<Shape> ReshapeTarget(const OpContext& ctx, const Shape& in, const std::vector<int64_t>& target,
                              bool allowzero) {
  Shape out(target.begin(), target.end());
  int64_t infer_at = -1;
  int64_t known = 1;
  auto fail = [&](const std::string& why) {
    return ctx.InvalidArgument("cannot reshape input of shape " + ShapeToString(in) + " (" +
                               std::to_string(NumElements(in)) + " elements) to target shape " +
                               ValuesToString(target) + ": " + why);
  };
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i] == -1) {
      if (infer_at >= 0) return fail("more than one -1");
      infer_at = static_cast<int64_t>(i);
      continue;
    }
    if (out[i] == 0 && !allowzero) {
      if (i >= in.size()) return fail("0 at position " + std::to_string(i) + " has no input dimension to copy");
      out[i] = in[i];
    }
    if (out[i] < 0) return fail("negative dimension " + std::to_string(out[i]));
    if (out[i] > 0 && known > std::numeric_limits<int64_t>::max() / out[i]) return fail("too many elements");
    known *= out[i];
  }
  if (allowzero && infer_at >= 0 && std::find(target.begin(), target.end(), 0) != target.end()) {
    return fail("allowzero=1 forbids both 0 and -1");
  }
  const int64_t total = NumElements(in);
  if (infer_at >= 0) {
    if (known == 0 || total % known != 0) return fail("the -1 dimension cannot be inferred");
    out[infer_at] = total / known;
  } else if (known != total) {
    return fail("element counts differ (" + std::to_string(known) + " vs " + std::to_string(total) + ")");
  }
  return out;
}

Status ReshapeImpl(OpContext& ctx, const std::vector<int64_t>& target, bool allowzero) {
  const Tensor& x = ctx.input(0);
  SPARQ_ASSIGN_OR_RETURN(Shape out, ReshapeTarget(ctx, x.shape(), target, allowzero));
  SPARQ_ASSIGN_OR_RETURN(Tensor y, x.Reshaped(out));
  ctx.set_output(0, std::move(y));
  return Status::OK();
}

// Opset 1-4: the target is the `shape` attribute.
Status Reshape1(OpContext& ctx) {
  SPARQ_RETURN_IF_ERROR(ctx.RequireInputs(1));
  if (ctx.node().attr("shape") == nullptr) return ctx.InvalidArgument("attribute 'shape' is required");
  return ReshapeImpl(ctx, ctx.node().attr_ints("shape"), false);
}

// Opset 5+: the target is input 1; allowzero from opset 14.
Status Reshape5(OpContext& ctx) {
  SPARQ_RETURN_IF_ERROR(ctx.RequireInputs(2));
  SPARQ_ASSIGN_OR_RETURN(std::vector<int64_t> target, ReadIntInput(ctx, 1, "shape"));
  const bool allowzero = ctx.opset() >= 14 && ctx.node().attr_int("allowzero", 0) != 0;
  return ReshapeImpl(ctx, target, allowzero);
}

// ---------------------------------------------------------------------------
// Flatten, Squeeze, Unsqueeze, Identity, Dropout

Status Flatten(OpContext& ctx) {
  SPARQ_RETURN_IF_ERROR(ctx.RequireInputs(1));
  const Tensor& x = ctx.input(0);
  const int64_t rank = static_cast<int64_t>(x.rank());
  int64_t axis = ctx.node().attr_int("axis", 1);
  if (axis < -rank || axis > rank) {
    return ctx.InvalidArgument("axis " + std::to_string(axis) + " is out of range [" + std::to_string(-rank) + ", " +
                               std::to_string(rank) + "] for input of shape " + ShapeToString(x.shape()));
  }
  if (axis < 0) axis += rank;
  int64_t outer = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= x.dim(d);
  int64_t inner = 1;
  for (int64_t d = axis; d < rank; ++d) inner *= x.dim(d);
  SPARQ_ASSIGN_OR_RETURN(Tensor y, x.Reshaped({outer, inner}));
  ctx.set_output(0, std::move(y));
  return Status::OK();
}

// Normalized, duplicate-free axes against `rank`.
StatusOr<std::vector<int64_t>> NormalizeAxes(const OpContext& ctx, const std::vector<int64_t>& axes, int64_t rank) {
  std::vector<int64_t> out;
  for (int64_t a : axes) {
    SPARQ_ASSIGN_OR_RETURN(int64_t n, NormalizeAxis(ctx, a, rank, "axes value"));
    if (std::find(out.begin(), out.end(), n) != out.end()) {
      return ctx.InvalidArgument("axes " + ValuesToString(axes) + " repeat an axis");
    }
    out.push_back(n);
  }
  return out;
}

// Axes from the `axes` attribute (opset < 13) or input 1 (opset >= 13);
// `present` tells whether any were given (an empty list counts as none, as
// in onnxruntime: Squeeze then removes every dimension of size 1).
StatusOr<std::vector<int64_t>> AxesFromAttrOrInput(const OpContext& ctx, bool* present) {
  std::vector<int64_t> axes;
  if (ctx.opset() < 13) {
    axes = ctx.node().attr_ints("axes");
  } else if (ctx.has_input(1)) {
    SPARQ_ASSIGN_OR_RETURN(axes, ReadIntInput(ctx, 1, "axes"));
  }
  *present = !axes.empty();
  return axes;
}

Status Squeeze(OpContext& ctx) {
  SPARQ_RETURN_IF_ERROR(ctx.RequireInputs(1));
  const Tensor& x = ctx.input(0);
  bool present = false;
  SPARQ_ASSIGN_OR_RETURN(std::vector<int64_t> raw_axes, AxesFromAttrOrInput(ctx, &present));
  const int64_t rank = static_cast<int64_t>(x.rank());
  SPARQ_ASSIGN_OR_RETURN(std::vector<int64_t> axes, NormalizeAxes(ctx, raw_axes, rank));
  Shape out;
  for (int64_t d = 0; d < rank; ++d) {
    const bool listed = std::find(axes.begin(), axes.end(), d) != axes.end();
    if (listed && x.dim(d) != 1) {
      return ctx.InvalidArgument("cannot squeeze axis " + std::to_string(d) + " of size " +
                                 std::to_string(x.dim(d)) + " (input shape " + ShapeToString(x.shape()) + ")");
    }
    const bool drop = present ? listed : x.dim(d) == 1;
    if (!drop) out.push_back(x.dim(d));
  }
  SPARQ_ASSIGN_OR_RETURN(Tensor y, x.Reshaped(out));
  ctx.set_output(0, std::move(y));
  return Status::OK();
}

Status Unsqueeze(OpContext& ctx) {
  SPARQ_RETURN_IF_ERROR(ctx.RequireInputs(1));
  const Tensor& x = ctx.input(0);
  const bool given = ctx.opset() < 13 ? ctx.node().attr("axes") != nullptr : ctx.has_input(1);
  if (!given) return ctx.InvalidArgument(ctx.opset() < 13 ? "attribute 'axes' is required" : "input 1 (axes) is required");
  bool present = false;
  SPARQ_ASSIGN_OR_RETURN(std::vector<int64_t> raw_axes, AxesFromAttrOrInput(ctx, &present));
  const int64_t out_rank = static_cast<int64_t>(x.rank() + raw_axes.size());
  SPARQ_ASSIGN_OR_RETURN(std::vector<int64_t> axes, NormalizeAxes(ctx, raw_axes, out_rank));
  Shape out;
  size_t next_in = 0;
  for (int64_t d = 0; d < out_rank; ++d) {
    if (std::find(axes.begin(), axes.end(), d) != axes.end()) {
      out.push_back(1);
    } else {
      out.push_back(x.dim(next_in++));
    }
  }
  SPARQ_ASSIGN_OR_RETURN(Tensor y, x.Reshaped(out));
  ctx.set_output(0, std::move(y));
  return Status::OK();
}

Status Identity(OpContext& ctx) {
  SPARQ_RETURN_IF_ERROR(ctx.RequireInputs(1));
  ctx.set_output(0, ctx.input(0));
  return Status::OK();
}

// A tensor of `shape` whose elements all equal `value` converted to `type`.
Tensor Filled(DataType type, const Shape& shape, double value) {
  Tensor t(type, shape);
  if (value != 0.0) {
    std::vector<uint8_t> bytes = ScalarBytes(value, type);
    FillElements(static_cast<uint8_t*>(t.raw_data()), bytes.data(), t.numel(), bytes.size());
  }
  return t;
}

// Inference-mode Dropout: the output is the input and the mask keeps
// everything. Training mode with a nonzero ratio is random, which a reference
// executor cannot reproduce, so it is NotSupported.
Status Dropout(OpContext& ctx) {
  SPARQ_RETURN_IF_ERROR(ctx.RequireInputs(1));
  const Tensor& x = ctx.input(0);
  if (ctx.opset() >= 12 && ctx.has_input(2)) {
    const Tensor& training = ctx.input(2);
    const bool training_mode = training.numel() > 0 && training.GetAsDouble(0) != 0.0;
    double ratio = 0.5;
    if (ctx.has_input(1) && ctx.input(1).numel() > 0) ratio = ctx.input(1).GetAsDouble(0);
    if (training_mode && ratio != 0.0) {
      return ctx.NotSupported("training-mode Dropout (ratio " + std::to_string(ratio) +
                              ") is random; only inference is supported");
    }
  }
  ctx.set_output(0, x);
  if (ctx.wants_output(1)) {
    // The mask is bool from opset 10, the input's type before.
    ctx.set_output(1, Filled(ctx.opset() >= 10 ? DataType::kBool : x.dtype(), x.shape(), 1.0));
  }
  return Status::OK();
}

// ---------------------------------------------------------------------------
// Shape, Size, Expand

Status ShapeOp(OpContext& ctx) {
  SPARQ_RETURN_IF_ERROR(ctx.RequireInputs(1));
  const Shape& shape = ctx.input(0).shape();
  const int64_t rank = static_cast<int64_t>(shape.size());
  int64_t start = 0, end = rank;
  if (ctx.opset() >= 15) {  // start/end select a range of dimensions, clamped like Slice
    start = ctx.node().attr_int("start", 0);
    end = ctx.node().attr_int("end", rank);
    if (start < 0) start += rank;
    if (end < 0) end += rank;
    start = std::clamp<int64_t>(start, 0, rank);
    end = std::clamp<int64_t>(end, 0, rank);
  }
  std::vector<int64_t> dims;
  for (int64_t d = start; d < end; ++d) dims.push_back(shape[d]);
  const int64_t n = static_cast<int64_t>(dims.size());
  ctx.set_output(0, Tensor::FromVector<int64_t>({n}, dims));
  return Status::OK();
}

Status Size(OpContext& ctx) {
  SPARQ_RETURN_IF_ERROR(ctx.RequireInputs(1));
  ctx.set_output(0, Tensor::Scalar<int64_t>(ctx.input(0).numel()));
  return Status::OK();
}

// Broadcasts the input to the broadcast of its shape and the shape input.
Status Expand(OpContext& ctx) {
  SPARQ_RETURN_IF_ERROR(ctx.RequireInputs(2));
  const Tensor& x = ctx.input(0);
  SPARQ_ASSIGN_OR_RETURN(std::vector<int64_t> target, ReadIntInput(ctx, 1, "shape"));
  for (int64_t d : target) {
    if (d < 0) return ctx.InvalidArgument("shape " + ValuesToString(target) + " has a negative dimension");
  }
  auto out_shape = BroadcastShapes({x.shape(), Shape(target.begin(), target.end())});
  if (!out_shape.ok()) return ctx.InvalidArgument(out_shape.status().message());
  SPARQ_RETURN_IF_ERROR(CheckOutputShape(ctx, *out_shape, x.dtype(), "output shape"));
  Tensor y(x.dtype(), *out_shape);
  StridedCopy(x.raw_data(), BroadcastStrides(x.shape(), *out_shape), *out_shape, y.raw_data(),
              DataTypeSize(x.dtype()), ctx.pool());
  ctx.set_output(0, std::move(y));
  return Status::OK();
}

// ---------------------------------------------------------------------------
// Cast, CastLike

// The type an ONNX type number names; NotSupported (strings, float8, ...).
StatusOr<DataType> TargetType(const OpContext& ctx, int64_t onnx_type) {
  auto t = DataTypeFromOnnx(static_cast<int32_t>(onnx_type));
  if (!t.ok()) return ctx.NotSupported("cannot cast to " + t.status().message());
  return *t;
}

// Opset 1 spells `to` as a type name ("FLOAT"); later opsets use the number.
StatusOr<int64_t> CastTargetNumber(const OpContext& ctx) {
  const Attribute* to = ctx.node().attr("to");
  if (to == nullptr) return ctx.InvalidArgument("attribute 'to' is required");
  if (to->kind == Attribute::Kind::kInt) return to->i;
  if (to->kind == Attribute::Kind::kString) {
    static const char* kNames[] = {"UNDEFINED", "FLOAT", "UINT8",  "INT8",   "UINT16", "INT16",  "INT32",
                                   "INT64",     "STRING", "BOOL",  "FLOAT16", "DOUBLE", "UINT32", "UINT64"};
    for (size_t i = 0; i < sizeof(kNames) / sizeof(kNames[0]); ++i)
      if (to->s == kNames[i]) return static_cast<int64_t>(i);
    return ctx.InvalidArgument("attribute 'to' names unknown type '" + to->s + "'");
  }
  return ctx.InvalidArgument("attribute 'to' must be an int (or a type name in opset 1)");
}

Status CastTensor(OpContext& ctx, DataType to) {
  const Tensor& x = ctx.input(0);
  if (GetDataTypeInfo(x.dtype()) == nullptr) {
    return ctx.NotSupported("cannot cast from " + DataTypeName(x.dtype()));
  }
  // A cast to the same type is the input itself (shared, never mutated).
  ctx.set_output(0, x.dtype() == to ? x : x.CastTo(to));
  return Status::OK();
}

Status Cast(OpContext& ctx) {
  SPARQ_RETURN_IF_ERROR(ctx.RequireInputs(1));
  SPARQ_ASSIGN_OR_RETURN(int64_t number, CastTargetNumber(ctx));
  SPARQ_ASSIGN_OR_RETURN(DataType to, TargetType(ctx, number));
  return CastTensor(ctx, to);
}

Status CastLike(OpContext& ctx) {
  SPARQ_RETURN_IF_ERROR(ctx.RequireInputs(2));
  return CastTensor(ctx, ctx.input(1).dtype());
}

// ---------------------------------------------------------------------------
// Constant, ConstantOfShape, EyeLike, Range

Status Constant(OpContext& ctx) {
  const Node& node = ctx.node();
  for (const char* name : {"sparse_value", "value_string", "value_strings"}) {
    if (node.attr(name) != nullptr) return ctx.NotSupported(std::string("attribute '") + name + "' is not supported");
  }
  if (const Attribute* v = node.attr("value")) {
    if (v->kind != Attribute::Kind::kTensor) {
      return ctx.NotSupported("attribute 'value' holds a tensor of a type sparq does not store");
    }
    ctx.set_output(0, v->t);
    return Status::OK();
  }
  if (const Attribute* v = node.attr("value_float")) {
    ctx.set_output(0, Tensor::Scalar<float>(v->f));
    return Status::OK();
  }
  if (const Attribute* v = node.attr("value_int")) {
    ctx.set_output(0, Tensor::Scalar<int64_t>(v->i));
    return Status::OK();
  }
  if (const Attribute* v = node.attr("value_floats")) {
    ctx.set_output(0, Tensor::FromVector<float>({static_cast<int64_t>(v->floats.size())}, v->floats));
    return Status::OK();
  }
  if (const Attribute* v = node.attr("value_ints")) {
    ctx.set_output(0, Tensor::FromVector<int64_t>({static_cast<int64_t>(v->ints.size())}, v->ints));
    return Status::OK();
  }
  return ctx.InvalidArgument("needs one of the attributes value, value_float(s), value_int(s)");
}

Status ConstantOfShape(OpContext& ctx) {
  SPARQ_RETURN_IF_ERROR(ctx.RequireInputs(1));
  SPARQ_ASSIGN_OR_RETURN(std::vector<int64_t> dims, ReadIntInput(ctx, 0, "shape"));
  Shape shape(dims.begin(), dims.end());
  DataType type = DataType::kFloat32;
  const uint8_t* value = nullptr;  // null: zeros
  if (const Attribute* v = ctx.node().attr("value")) {
    if (v->kind != Attribute::Kind::kTensor) return ctx.NotSupported("attribute 'value' has an unsupported type");
    if (v->t.numel() != 1) {
      return ctx.InvalidArgument("attribute 'value' must hold one element, has shape " + ShapeToString(v->t.shape()));
    }
    type = v->t.dtype();
    value = static_cast<const uint8_t*>(v->t.raw_data());
  }
  SPARQ_RETURN_IF_ERROR(CheckOutputShape(ctx, shape, type, "shape"));
  Tensor y(type, shape);
  if (value != nullptr) FillElements(static_cast<uint8_t*>(y.raw_data()), value, y.numel(), DataTypeSize(type));
  ctx.set_output(0, std::move(y));
  return Status::OK();
}

Status EyeLike(OpContext& ctx) {
  SPARQ_RETURN_IF_ERROR(ctx.RequireInputs(1));
  const Tensor& x = ctx.input(0);
  if (x.rank() != 2) return ctx.InvalidArgument("input must be 2-D, has shape " + ShapeToString(x.shape()));
  DataType type = x.dtype();
  if (ctx.node().attr("dtype") != nullptr) {
    SPARQ_ASSIGN_OR_RETURN(type, TargetType(ctx, ctx.node().attr_int("dtype", 1)));
  }
  const int64_t k = ctx.node().attr_int("k", 0);
  Tensor y(type, x.shape());
  const std::vector<uint8_t> one = ScalarBytes(1.0, type);
  auto* out = static_cast<uint8_t*>(y.raw_data());
  const int64_t rows = x.dim(0), cols = x.dim(1);
  for (int64_t i = 0; i < rows; ++i) {
    const int64_t j = i + k;
    if (j >= 0 && j < cols) std::memcpy(out + (i * cols + j) * one.size(), one.data(), one.size());
  }
  ctx.set_output(0, std::move(y));
  return Status::OK();
}

Status Range(OpContext& ctx) {
  SPARQ_RETURN_IF_ERROR(ctx.RequireInputs(3));
  const DataType type = ctx.input(0).dtype();
  for (size_t i = 0; i < 3; ++i) {
    const Tensor& t = ctx.input(i);
    if (t.numel() != 1 || t.dtype() != type) {
      return ctx.InvalidArgument("start, limit and delta must be scalars of one type; input " + std::to_string(i) +
                                 " is " + DataTypeName(t.dtype()) + ShapeToString(t.shape()));
    }
  }
  return VisitNumericType(ctx, type, [&](auto tag) -> Status {
    using T = decltype(tag);
    using C = typename Arith<T>::C;
    const C start = Arith<T>::Load(static_cast<const T*>(ctx.input(0).raw_data())[0]);
    const C limit = Arith<T>::Load(static_cast<const T*>(ctx.input(1).raw_data())[0]);
    const C delta = Arith<T>::Load(static_cast<const T*>(ctx.input(2).raw_data())[0]);
    if (delta == C(0)) return ctx.InvalidArgument("delta must not be zero");
    // Element count max(ceil((limit - start) / delta), 0), in double so that
    // integer ranges near the type's limits do not overflow.
    const double span = (static_cast<double>(limit) - static_cast<double>(start)) / static_cast<double>(delta);
    if (!(std::fabs(span) < static_cast<double>(kMaxOutputBytes))) {
      return ctx.InvalidArgument("start, limit and delta give an invalid length " + std::to_string(span));
    }
    const int64_t n = std::max<int64_t>(0, static_cast<int64_t>(std::ceil(span)));
    SPARQ_RETURN_IF_ERROR(CheckOutputShape(ctx, {n}, type, "output shape"));
    Tensor y(type, {n});
    T* out = static_cast<T*>(y.raw_data());
    for (int64_t i = 0; i < n; ++i) out[i] = Arith<T>::Store(static_cast<C>(start + static_cast<C>(i) * delta));
    ctx.set_output(0, std::move(y));
    return Status::OK();
  });
}

}  // namespace

void RegisterTensorShapeOps(KernelRegistry& r) {
  r.Add({"Reshape", "", 1, 4, Reshape1, "ref"});
  r.Add({"Reshape", "", 5, 99, Reshape5, "ref"});
  r.Add({"Flatten", "", 1, 99, Flatten, "ref"});
  r.Add({"Squeeze", "", 1, 99, Squeeze, "ref"});      // axes: attribute < 13, input >= 13
  r.Add({"Unsqueeze", "", 1, 99, Unsqueeze, "ref"});  // axes: attribute < 13, input >= 13
  r.Add({"Identity", "", 1, 99, Identity, "ref"});
  r.Add({"Dropout", "", 1, 99, Dropout, "ref"});
  r.Add({"Shape", "", 1, 99, ShapeOp, "ref"});  // start/end from opset 15
  r.Add({"Size", "", 1, 99, Size, "ref"});
  r.Add({"Expand", "", 8, 99, Expand, "ref"});
  r.Add({"Cast", "", 1, 99, Cast, "ref"});
  r.Add({"CastLike", "", 15, 99, CastLike, "ref"});
  r.Add({"Constant", "", 1, 99, Constant, "ref"});
  r.Add({"ConstantOfShape", "", 9, 99, ConstantOfShape, "ref"});
  r.Add({"EyeLike", "", 9, 99, EyeLike, "ref"});
  r.Add({"Range", "", 11, 99, Range, "ref"});
}

}  // namespace sparq
