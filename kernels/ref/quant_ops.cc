// Reference kernels of ONNX's linear quantization operators:
//   QuantizeLinear, DequantizeLinear (per-tensor, per-axis, blocked),
//   DynamicQuantizeLinear (uint8),
//   MatMulInteger, QLinearMatMul (8-bit integer matmul with zero points).
// ConvInteger and QLinearConv live in quant_conv_ops.cc. The arithmetic itself
// is in quantize.h (rounding, saturation, requantization) and gemm_int.h (the
// int32 GEMM); this file checks inputs and lays the tensors out for them.
#include <algorithm>
#include <array>
#include <string>
#include <vector>

#include "kernels/op_context.h"
#include "kernels/parallel.h"
#include "kernels/ref/broadcast.h"
#include "kernels/ref/gemm_int.h"
#include "kernels/ref/quant_fp8_ops.h"
#include "kernels/ref/quant_util.h"
#include "kernels/ref/quantize.h"
#include "kernels/registry.h"

namespace sparq {

// ---------------------------------------------------------------------------
// Helpers declared in quant_util.h

StatusOr<std::vector<float>> ReadScales(const OpContext& ctx, const Tensor& t, const std::string& what) {
  const DataTypeInfo* info = GetDataTypeInfo(t.dtype());
  if (info == nullptr || !info->is_float) {
    return ctx.InvalidArgument(what + " has type " + DataTypeName(t.dtype()) + "; expected a float type");
  }
  if (t.numel() == 0) return ctx.InvalidArgument(what + " is empty");
  const Tensor f = t.ToFloat32();
  const float* p = f.data<float>();
  return std::vector<float>(p, p + f.numel());
}

StatusOr<std::vector<int32_t>> ReadZeroPoints(const OpContext& ctx, const Tensor& t, const std::string& what) {
  switch (t.dtype()) {
    case DataType::kInt8:
    case DataType::kUInt8:
    case DataType::kInt4:
    case DataType::kUInt4:
    case DataType::kInt16:
    case DataType::kUInt16:
    case DataType::kInt32: {
      std::vector<int32_t> v(static_cast<size_t>(t.numel()));
      for (int64_t i = 0; i < t.numel(); ++i) v[i] = static_cast<int32_t>(t.GetAsDouble(i));
      return v;
    }
    default:
      return ctx.InvalidArgument(what + " has type " + DataTypeName(t.dtype()) +
                                 "; expected int4, uint4, int8, uint8, int16, uint16 or int32");
  }
}

Status CheckZeroPoint(const OpContext& ctx, size_t zp_input, DataType expected, int64_t scale_numel,
                      const std::string& what) {
  if (!ctx.has_input(zp_input)) return Status::OK();
  const Tensor& zp = ctx.input(zp_input);
  if (zp.dtype() != expected) {
    return ctx.InvalidArgument(what + " has type " + DataTypeName(zp.dtype()) + " but its tensor has type " +
                               DataTypeName(expected) + "; they must match");
  }
  if (scale_numel >= 0 && zp.numel() != scale_numel) {
    return ctx.InvalidArgument(what + " has shape " + ShapeToString(zp.shape()) + " (" + std::to_string(zp.numel()) +
                               " values) but its scale has " + std::to_string(scale_numel) + "; they must match");
  }
  return Status::OK();
}

namespace {

StatusOr<int64_t> NormalizeAxisAttr(const OpContext& ctx, int64_t axis, size_t rank) {
  const int64_t r = static_cast<int64_t>(rank);
  if (axis < -r || axis >= r) {
    return ctx.InvalidArgument("axis " + std::to_string(axis) + " is out of range for an input of rank " +
                               std::to_string(r) + " (valid: [" + std::to_string(-r) + ", " + std::to_string(r - 1) +
                               "])");
  }
  return axis < 0 ? axis + r : axis;
}

// Maps an ONNX element type number of an output_dtype attribute; NotSupported
// for the types sparq cannot store (float8, int4, ...).
StatusOr<DataType> OutputDtypeAttr(const OpContext& ctx, int64_t onnx_type) {
  auto type = DataTypeFromOnnx(static_cast<int32_t>(onnx_type));
  if (!type.ok()) {
    return ctx.NotSupported("output_dtype " + std::to_string(onnx_type) +
                            " (float8/int4/... outputs) is not supported");
  }
  return *type;
}

// Works out how the scale (and zero point) of QuantizeLinear/DequantizeLinear
// map onto `x_shape`: per-tensor, per-axis (opset >= 13) or blocked (opset >= 21).
StatusOr<QuantParamLayout> ResolveQuantLayout(const OpContext& ctx, const Shape& x_shape, const Tensor& scale,
                                              const std::string& scale_name) {
  const int64_t opset = ctx.opset();
  const int64_t block_size = opset >= 21 ? ctx.node().attr_int("block_size", 0) : 0;
  if (block_size < 0) return ctx.InvalidArgument("block_size must be >= 0, got " + std::to_string(block_size));
  QuantParamLayout layout;
  if (block_size == 0 && scale.numel() == 1) {  // per-tensor
    layout.inner = NumElements(x_shape);
    return layout;
  }
  if (opset < 13) {
    return ctx.InvalidArgument(scale_name + " has shape " + ShapeToString(scale.shape()) +
                               "; before opset 13 it must be a scalar (per-tensor)");
  }
  SPARQ_ASSIGN_OR_RETURN(const int64_t axis, NormalizeAxisAttr(ctx, ctx.node().attr_int("axis", 1), x_shape.size()));
  layout.axis_dim = x_shape[axis];
  layout.outer = 1;
  for (int64_t d = 0; d < axis; ++d) layout.outer *= x_shape[d];
  layout.inner = 1;
  for (size_t d = axis + 1; d < x_shape.size(); ++d) layout.inner *= x_shape[d];
  if (block_size == 0) {
    if (scale.rank() != 1 || scale.dim(0) != layout.axis_dim) {
      return ctx.InvalidArgument(scale_name + " has shape " + ShapeToString(scale.shape()) + " but the input " +
                                 ShapeToString(x_shape) + " has " + std::to_string(layout.axis_dim) +
                                 " elements along axis " + std::to_string(axis) +
                                 "; a per-axis scale needs one value per element (or use one value per-tensor)");
    }
    return layout;
  }
  layout.block_size = block_size;
  Shape expected = x_shape;
  expected[axis] = layout.num_blocks();
  if (scale.shape() != expected) {
    return ctx.InvalidArgument(scale_name + " has shape " + ShapeToString(scale.shape()) +
                               "; blocked quantization of " + ShapeToString(x_shape) + " with block_size " +
                               std::to_string(block_size) + " along axis " + std::to_string(axis) + " needs shape " +
                               ShapeToString(expected));
  }
  return layout;
}

template <typename Fn>
Status VisitQuantizedType(const OpContext& ctx, DataType type, const std::string& what, bool allow_int32, Fn&& fn) {
  switch (type) {
    case DataType::kUInt8:
    case DataType::kUInt4: return fn(uint8_t{});  // 4-bit: one element per byte in memory
    case DataType::kInt8:
    case DataType::kInt4: return fn(int8_t{});
    case DataType::kUInt16: return fn(uint16_t{});
    case DataType::kInt16: return fn(int16_t{});
    case DataType::kInt32:
      if (allow_int32) return fn(int32_t{});
      break;
    default: break;
  }
  return ctx.NotSupported(what + " of type " + DataTypeName(type) + " is not supported (uint4, int4, uint8, int8, uint16, int16" +
                          (allow_int32 ? ", int32)" : ")"));
}

// ---------------------------------------------------------------------------
// QuantizeLinear: y = saturate(RoundHalfToEven(x / y_scale) + y_zero_point)

Status QuantizeLinear(OpContext& ctx) {
  SPARQ_RETURN_IF_ERROR(ctx.RequireInputs(2));
  const Tensor& x = ctx.input(0);
  const DataTypeInfo* x_info = GetDataTypeInfo(x.dtype());
  if (x_info == nullptr || !(x_info->is_float || x.dtype() == DataType::kInt32)) {
    return ctx.InvalidArgument("x has type " + DataTypeName(x.dtype()) + "; expected a float type or int32");
  }
  const Tensor& scale_t = ctx.input(1);
  SPARQ_ASSIGN_OR_RETURN(const std::vector<float> scale, ReadScales(ctx, scale_t, "y_scale"));

  // The output type: the zero point's, else output_dtype (opset 21), else uint8.
  DataType out_type = DataType::kUInt8;
  const int64_t output_dtype = ctx.opset() >= 21 ? ctx.node().attr_int("output_dtype", 0) : 0;
  if (output_dtype != 0) {
    SPARQ_ASSIGN_OR_RETURN(out_type, OutputDtypeAttr(ctx, output_dtype));
  }
  if (ctx.has_input(2)) {
    const DataType zp_type = ctx.input(2).dtype();
    if (output_dtype != 0 && zp_type != out_type) {
      return ctx.InvalidArgument("output_dtype is " + DataTypeName(out_type) + " but y_zero_point has type " +
                                 DataTypeName(zp_type));
    }
    out_type = zp_type;
  }
  SPARQ_RETURN_IF_ERROR(CheckZeroPoint(ctx, 2, out_type, scale_t.numel(), "y_zero_point"));
  SPARQ_ASSIGN_OR_RETURN(const QuantParamLayout layout, ResolveQuantLayout(ctx, x.shape(), scale_t, "y_scale"));
  if (out_type == DataType::kFloat8E4M3FN) return QuantizeLinearToFp8(ctx, layout, scale);
  std::vector<int32_t> zero_point;
  if (ctx.has_input(2)) {
    SPARQ_ASSIGN_OR_RETURN(zero_point, ReadZeroPoints(ctx, ctx.input(2), "y_zero_point"));
  }

  const Tensor xf = x.ToFloat32();
  return VisitQuantizedType(ctx, out_type, "output", /*allow_int32=*/false, [&](auto tag) {
    using T = decltype(tag);
    Tensor y(out_type, x.shape());
    T* yp = static_cast<T*>(y.raw_data());
    QuantizeLinearRef<T>(xf.data<float>(), layout, scale.data(), zero_point.empty() ? nullptr : zero_point.data(), yp);
    // 4-bit outputs: saturated to [-8, 7] / [0, 15]. Clamping the 8-bit result
    // equals clamping round(x / scale) + zero_point once (nested ranges).
    if (out_type == DataType::kInt4 || out_type == DataType::kUInt4) {
      const int lo = out_type == DataType::kInt4 ? -8 : 0, hi = out_type == DataType::kInt4 ? 7 : 15;
      for (int64_t i = 0; i < y.numel(); ++i) yp[i] = static_cast<T>(std::clamp<int>(yp[i], lo, hi));
    }
    ctx.set_output(0, std::move(y));
    return Status::OK();
  });
}

// ---------------------------------------------------------------------------
// DequantizeLinear: y = (x - x_zero_point) * x_scale

Status DequantizeLinear(OpContext& ctx) {
  SPARQ_RETURN_IF_ERROR(ctx.RequireInputs(2));
  const Tensor& x = ctx.input(0);
  const Tensor& scale_t = ctx.input(1);
  SPARQ_ASSIGN_OR_RETURN(const std::vector<float> scale, ReadScales(ctx, scale_t, "x_scale"));
  SPARQ_RETURN_IF_ERROR(CheckZeroPoint(ctx, 2, x.dtype(), scale_t.numel(), "x_zero_point"));
  SPARQ_ASSIGN_OR_RETURN(const QuantParamLayout layout, ResolveQuantLayout(ctx, x.shape(), scale_t, "x_scale"));
  std::vector<int32_t> zero_point;
  if (ctx.has_input(2) && x.dtype() != DataType::kFloat8E4M3FN) {
    SPARQ_ASSIGN_OR_RETURN(zero_point, ReadZeroPoints(ctx, ctx.input(2), "x_zero_point"));
  }

  // Output type: output_dtype when given, else the scale's type (float32 before opset 19).
  DataType out_type = ctx.opset() >= 19 ? scale_t.dtype() : DataType::kFloat32;
  const int64_t output_dtype = ctx.opset() >= 21 ? ctx.node().attr_int("output_dtype", 0) : 0;
  if (output_dtype != 0) {
    SPARQ_ASSIGN_OR_RETURN(out_type, OutputDtypeAttr(ctx, output_dtype));
  }
  const DataTypeInfo* out_info = GetDataTypeInfo(out_type);
  if (out_info == nullptr || !out_info->is_float) {
    return ctx.InvalidArgument("output type " + DataTypeName(out_type) + " is not a float type");
  }
  if (x.dtype() == DataType::kFloat8E4M3FN) return DequantizeLinearFromFp8(ctx, layout, scale, out_type);

  return VisitQuantizedType(ctx, x.dtype(), "x", /*allow_int32=*/true, [&](auto tag) {
    using T = decltype(tag);
    Tensor y(DataType::kFloat32, x.shape());
    DequantizeLinearRef<T>(static_cast<const T*>(x.raw_data()), layout, scale.data(), zero_point.empty() ? nullptr : zero_point.data(),
                           y.data<float>());
    // float16/bfloat16 outputs: the float32 product of an integer below 2^11
    // and a 16-bit scale is exact, so one rounding gives the 16-bit product.
    ctx.set_output(0, out_type == DataType::kFloat32 ? std::move(y) : y.CastTo(out_type));
    return Status::OK();
  });
}

// ---------------------------------------------------------------------------
// DynamicQuantizeLinear: uint8 quantization with parameters from x's range.

Status DynamicQuantizeLinear(OpContext& ctx) {
  SPARQ_RETURN_IF_ERROR(ctx.RequireInputs(1));
  const Tensor& x = ctx.input(0);
  if (x.dtype() != DataType::kFloat32) {
    return ctx.InvalidArgument("x has type " + DataTypeName(x.dtype()) + "; expected float32");
  }
  const float* xp = x.data<float>();
  const DynamicQuantParams params = ComputeDynamicQuantParamsU8(xp, x.numel());
  Tensor y(DataType::kUInt8, x.shape());
  const QuantParamLayout layout{1, 1, x.numel(), 0};
  QuantizeLinearRef<uint8_t>(xp, layout, &params.scale, &params.zero_point, y.data<uint8_t>());
  ctx.set_output(0, std::move(y));
  ctx.set_output(1, Tensor::Scalar<float>(params.scale));
  ctx.set_output(2, Tensor::Scalar<uint8_t>(static_cast<uint8_t>(params.zero_point)));
  return Status::OK();
}

// ---------------------------------------------------------------------------
// MatMulInteger and QLinearMatMul: numpy matmul semantics (1-D promotion,
// broadcast batch dimensions) over 8-bit integers.

// The layout of one integer matmul: `batch` products of [M, K] x [K, N].
struct MatMulPlan {
  Shape out_shape;
  Shape out_batch;  // broadcast batch dimensions
  int64_t batch = 1, M = 1, N = 1, K = 1;
  std::vector<int64_t> a_offset, b_offset;  // per batch: first element of its A / B matrix
};

StatusOr<MatMulPlan> PlanMatMul(const OpContext& ctx, const Shape& a_shape, const Shape& b_shape) {
  if (a_shape.empty() || b_shape.empty()) {
    return ctx.InvalidArgument("matmul inputs must have rank >= 1, got A " + ShapeToString(a_shape) + " and B " +
                               ShapeToString(b_shape));
  }
  Shape a2 = a_shape, b2 = b_shape;
  if (a2.size() == 1) a2.insert(a2.begin(), 1);  // [K] -> [1, K]
  if (b2.size() == 1) b2.push_back(1);           // [K] -> [K, 1]
  MatMulPlan p;
  p.M = a2[a2.size() - 2];
  p.K = a2.back();
  p.N = b2.back();
  if (b2[b2.size() - 2] != p.K) {
    return ctx.InvalidArgument("inner dimensions differ: A is " + ShapeToString(a_shape) + " and B is " +
                               ShapeToString(b_shape));
  }
  const Shape a_batch(a2.begin(), a2.end() - 2), b_batch(b2.begin(), b2.end() - 2);
  auto out_batch = BroadcastShapes({a_batch, b_batch});
  if (!out_batch.ok()) return out_batch.status().WithContext(ctx.node().Describe() + ": batch dimensions");
  p.out_batch = *out_batch;
  p.batch = NumElements(p.out_batch);
  p.out_shape = p.out_batch;
  if (a_shape.size() > 1) p.out_shape.push_back(p.M);
  if (b_shape.size() > 1) p.out_shape.push_back(p.N);
  const std::array<std::vector<int64_t>, 2> strides = {BroadcastStrides(a_batch, p.out_batch),
                                                       BroadcastStrides(b_batch, p.out_batch)};
  p.a_offset.resize(p.batch);
  p.b_offset.resize(p.batch);
  ForEachBroadcast<2>(p.out_batch, strides, [&](int64_t i, const std::array<int64_t, 2>& off) {
    p.a_offset[i] = off[0] * p.M * p.K;
    p.b_offset[i] = off[1] * p.K * p.N;
  });
  return p;
}

// A per-row (of A) or per-column (of B) parameter expanded to [batch, len]
// values; `uniform` when it is one value for everything.
template <typename T>
struct ExpandedParam {
  std::vector<T> values;
  bool uniform = true;
  int64_t len = 0;

  // The value for (batch, i); for a uniform parameter, the one value.
  const T* at(int64_t batch, int64_t i) const { return values.data() + (uniform ? 0 : batch * len + i); }
};

// Accepts a scalar (per-tensor), a 1-D tensor of `len` values, or an N-D
// tensor broadcastable to [batch..., len, 1] (rows of A, `rows` true) or
// [batch..., 1, len] (columns of B), as ONNX's MatMulInteger/QLinearMatMul
// describe.
template <typename T>
StatusOr<ExpandedParam<T>> ExpandMatMulParam(const OpContext& ctx, const std::vector<T>& values, const Shape& shape,
                                             const MatMulPlan& plan, bool rows, const std::string& what) {
  const int64_t len = rows ? plan.M : plan.N;
  ExpandedParam<T> e;
  e.len = len;
  if (values.size() == 1) {
    e.values = values;
    return e;
  }
  e.uniform = false;
  e.values.resize(static_cast<size_t>(plan.batch * len));
  if (shape.size() == 1 && shape[0] == len) {
    for (int64_t b = 0; b < plan.batch; ++b) std::copy(values.begin(), values.end(), e.values.begin() + b * len);
    return e;
  }
  Shape target = plan.out_batch;
  target.push_back(rows ? len : 1);
  target.push_back(rows ? 1 : len);
  auto merged = BroadcastShapes({shape, target});
  if (shape.size() < 2 || !merged.ok() || *merged != target) {
    return ctx.InvalidArgument(what + " has shape " + ShapeToString(shape) + "; expected one value (per-tensor), " +
                               std::to_string(len) + " values (one per " + (rows ? "row of A" : "column of B") +
                               ") or a shape broadcastable to " + ShapeToString(target));
  }
  ForEachBroadcast<1>(target, {BroadcastStrides(shape, target)},
                      [&](int64_t i, const std::array<int64_t, 1>& off) { e.values[i] = values[off[0]]; });
  return e;
}

// acc[b, m, n] = sum_k (A[b, m, k] - a_zp) * (B[b, k, n] - b_zp), rows of the
// output split across the pool.
template <typename TA, typename TB>
void IntegerMatMul(const MatMulPlan& p, const TA* A, const ExpandedParam<int32_t>& a_zp, const TB* B,
                   const ExpandedParam<int32_t>& b_zp, int32_t* acc, ThreadPool* pool) {
  const int64_t rows = p.batch * p.M;
  const int64_t grain = std::max<int64_t>(1, (int64_t{1} << 16) / std::max<int64_t>(1, p.N * p.K));
  ParallelFor(pool, rows, grain, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1;) {
      const int64_t b = r / p.M, m0 = r % p.M;
      const int64_t m1 = std::min(p.M, m0 + (r1 - r));
      const GemmZeroPoints azp{a_zp.at(b, m0), !a_zp.uniform};
      const GemmZeroPoints bzp{b_zp.at(b, 0), !b_zp.uniform};
      GemmS32Ref<TA, TB>(m1 - m0, p.N, p.K, A + p.a_offset[b] + m0 * p.K, p.K, azp, B + p.b_offset[b], p.N, bzp,
                         acc + r * p.N, p.N);
      r += m1 - m0;
    }
  });
}

// Reads an optional zero point input and expands it for `plan`.
StatusOr<ExpandedParam<int32_t>> MatMulZeroPoint(const OpContext& ctx, size_t input, const MatMulPlan& plan, bool rows,
                                                 const std::string& what) {
  if (!ctx.has_input(input)) return ExpandedParam<int32_t>{{0}, true, 0};
  SPARQ_ASSIGN_OR_RETURN(const std::vector<int32_t> values, ReadZeroPoints(ctx, ctx.input(input), what));
  if (values.empty()) return ctx.InvalidArgument(what + " is empty");
  return ExpandMatMulParam<int32_t>(ctx, values, ctx.input(input).shape(), plan, rows, what);
}

// The int32 accumulators of MatMulInteger / QLinearMatMul for inputs
// a = input(a_in), b = input(b_in) and their zero points.
StatusOr<Tensor> IntegerMatMulAcc(const OpContext& ctx, const MatMulPlan& plan, size_t a_in, size_t a_zp_in,
                                  size_t b_in, size_t b_zp_in) {
  const Tensor& a = ctx.input(a_in);
  const Tensor& b = ctx.input(b_in);
  SPARQ_RETURN_IF_ERROR(CheckZeroPoint(ctx, a_zp_in, a.dtype(), -1, "a_zero_point"));
  SPARQ_RETURN_IF_ERROR(CheckZeroPoint(ctx, b_zp_in, b.dtype(), -1, "b_zero_point"));
  SPARQ_ASSIGN_OR_RETURN(const auto a_zp, MatMulZeroPoint(ctx, a_zp_in, plan, /*rows=*/true, "a_zero_point"));
  SPARQ_ASSIGN_OR_RETURN(const auto b_zp, MatMulZeroPoint(ctx, b_zp_in, plan, /*rows=*/false, "b_zero_point"));
  Tensor acc(DataType::kInt32, plan.out_shape);
  Status st = VisitInt8Type(ctx, a.dtype(), "A", [&](auto a_tag) {
    using TA = decltype(a_tag);
    return VisitInt8Type(ctx, b.dtype(), "B", [&](auto b_tag) {
      using TB = decltype(b_tag);
      IntegerMatMul<TA, TB>(plan, a.data<TA>(), a_zp, b.data<TB>(), b_zp, acc.data<int32_t>(), ctx.pool());
      return Status::OK();
    });
  });
  if (!st.ok()) return st;
  return acc;
}

Status MatMulInteger(OpContext& ctx) {
  SPARQ_RETURN_IF_ERROR(ctx.RequireInputs(2));
  SPARQ_ASSIGN_OR_RETURN(const MatMulPlan plan, PlanMatMul(ctx, ctx.input(0).shape(), ctx.input(1).shape()));
  SPARQ_ASSIGN_OR_RETURN(Tensor acc, IntegerMatMulAcc(ctx, plan, 0, 2, 1, 3));
  ctx.set_output(0, std::move(acc));
  return Status::OK();
}

// QLinearMatMul: y = saturate(RoundHalfToEven(acc * (a_scale * b_scale / y_scale)) + y_zero_point)
// with acc the exact int32 product of the zero-point-shifted inputs.
Status QLinearMatMul(OpContext& ctx) {
  SPARQ_RETURN_IF_ERROR(ctx.RequireInputs(7));  // y_zero_point (7) may be absent: 0, type of a
  const Tensor& a = ctx.input(0);
  const Tensor& b = ctx.input(3);
  SPARQ_ASSIGN_OR_RETURN(const MatMulPlan plan, PlanMatMul(ctx, a.shape(), b.shape()));
  SPARQ_ASSIGN_OR_RETURN(const std::vector<float> a_scale_v, ReadScales(ctx, ctx.input(1), "a_scale"));
  SPARQ_ASSIGN_OR_RETURN(const std::vector<float> b_scale_v, ReadScales(ctx, ctx.input(4), "b_scale"));
  SPARQ_ASSIGN_OR_RETURN(const std::vector<float> y_scale_v, ReadScales(ctx, ctx.input(6), "y_scale"));
  SPARQ_ASSIGN_OR_RETURN(const float y_scale, SingleValue(ctx, y_scale_v, "y_scale"));
  SPARQ_RETURN_IF_ERROR(CheckZeroPoint(ctx, 2, a.dtype(), ctx.input(1).numel(), "a_zero_point"));
  SPARQ_RETURN_IF_ERROR(CheckZeroPoint(ctx, 5, b.dtype(), ctx.input(4).numel(), "b_zero_point"));
  SPARQ_ASSIGN_OR_RETURN(const auto a_scale,
                         ExpandMatMulParam<float>(ctx, a_scale_v, ctx.input(1).shape(), plan, true, "a_scale"));
  SPARQ_ASSIGN_OR_RETURN(const auto b_scale,
                         ExpandMatMulParam<float>(ctx, b_scale_v, ctx.input(4).shape(), plan, false, "b_scale"));
  const DataType y_type = ctx.has_input(7) ? ctx.input(7).dtype() : a.dtype();
  int32_t y_zp = 0;
  if (ctx.has_input(7)) {
    SPARQ_ASSIGN_OR_RETURN(const std::vector<int32_t> zp, ReadZeroPoints(ctx, ctx.input(7), "y_zero_point"));
    SPARQ_ASSIGN_OR_RETURN(y_zp, SingleValue(ctx, zp, "y_zero_point"));
  }
  SPARQ_ASSIGN_OR_RETURN(const Tensor acc, IntegerMatMulAcc(ctx, plan, 0, 2, 3, 5));

  return VisitInt8Type(ctx, y_type, "y_zero_point", [&](auto tag) {
    using T = decltype(tag);
    Tensor y(y_type, plan.out_shape);
    const int32_t* accp = acc.data<int32_t>();
    T* yp = y.data<T>();
    const int64_t rows = plan.batch * plan.M, N = plan.N;
    ParallelFor(ctx.pool(), rows, std::max<int64_t>(1, 4096 / std::max<int64_t>(1, N)), [&](int64_t r0, int64_t r1) {
      std::vector<float> multiplier(static_cast<size_t>(N));
      for (int64_t r = r0; r < r1; ++r) {
        const int64_t bi = r / plan.M, m = r % plan.M;
        const float sa = *a_scale.at(bi, m);
        const int64_t count = b_scale.uniform ? 1 : N;
        for (int64_t n = 0; n < count; ++n) multiplier[n] = RequantMultiplier(sa, *b_scale.at(bi, n), y_scale);
        RequantizeS32Ref<T>(N, accp + r * N, nullptr, 0, multiplier.data(), b_scale.uniform ? 0 : 1, y_zp, false,
                            yp + r * N);
      }
    });
    ctx.set_output(0, std::move(y));
    return Status::OK();
  });
}

}  // namespace

void RegisterQuantOps(KernelRegistry& r) {
  r.Add({"QuantizeLinear", "", 10, 99, QuantizeLinear, "ref"});
  r.Add({"DequantizeLinear", "", 10, 99, DequantizeLinear, "ref"});
  r.Add({"DynamicQuantizeLinear", "", 11, 99, DynamicQuantizeLinear, "ref"});
  r.Add({"MatMulInteger", "", 10, 99, MatMulInteger, "ref"});
  r.Add({"QLinearMatMul", "", 10, 99, QLinearMatMul, "ref"});
  RegisterQuantConvOps(r);
  RegisterQdqFusedOps(r);
  RegisterMatMulNBitsOps(r);
  RegisterQuantFp8Ops(r);
}

}  // namespace sparq
