// Reference kernels of the internal operators that runtime/passes/qdq_fusion.cc
// writes into an executor's private graph (domain "sparq", version 1). They
// never appear in a model file; their definition is the float QDQ subgraph
// they replace, computed with the reference quantization rules
// (kernels/ref/quantize.h):
//
//   sparq.QLinearLut(X, Table) -> Y
//     X uint8 or int8, Table [256] uint8 or int8; Y has X's shape and Table's
//     type: Y[i] = Table[X[i] - min(X's type)]. The fusion fills Table by
//     running DequantizeLinear -> (elementwise float ops) -> QuantizeLinear
//     on the reference kernels for all 256 values of X's type.
//
//   sparq.QLinearConvLut(X, X_scale, X_zero_point, W, W_scale, W_zero_point,
//                        Y_scale, Y_zero_point, B, Table) -> Y
//     QLinearConv (B may be absent, "") followed by QLinearLut(., Table): the
//     fusion folds a table into the convolution that alone feeds it, so that
//     fast rows apply it while they write the output.
//
//   sparq.QLinearAdd(A, A_scale, A_zero_point, B, B_scale, B_zero_point,
//                    Y_scale, Y_zero_point[, Table]) -> Y
//     A, B uint8 or int8 (numpy broadcasting), scales float32 and zero points
//     of A's, B's and Y's type, one value each:
//       Y = QuantizeValue(DequantizeValue(A) + DequantizeValue(B))
//     every step a float32 operation, exactly the DequantizeLinear, Add and
//     QuantizeLinear reference kernels one after the other; with Table, Y is
//     then mapped through it as QLinearLut does (the fusion folds a table
//     that alone reads the sum into the QLinearAdd).
//
//   sparq.QLinearMul(A, A_scale, A_zero_point, B, B_scale, B_zero_point,
//                    Y_scale, Y_zero_point[, Table]) -> Y
//     QLinearAdd with a product: Y = QuantizeValue(DequantizeValue(A) * DequantizeValue(B)),
//     the DequantizeLinear, Mul and QuantizeLinear reference kernels one after
//     the other (onnxruntime's Q/DQ around GELU's product and LayerNorm's gamma).
//
//   sparq.ConcatLut(X_0, Table_0, X_1, Table_1, ...) -> Y   (attribute axis)
//     Concat(axis) of QLinearLut(X_i, Table_i), of X_i itself where Table_i
//     is "": the fusion folds the tables that alone feed a Concat into it
//     (runtime/passes/island_fusion.cc), so that fast rows apply them as they copy.
//
//   sparq.DequantizeConcat(X_0, X_0_scale, X_0_zero_point, X_1, ...) -> Y   (attribute axis)
//     Concat(axis) of DequantizeLinear(X_i, X_i_scale, X_i_zero_point), each
//     per tensor: the fusion moves the DequantizeLinear nodes that alone feed
//     a float Concat into it (YOLO's detection head), one pass from the integers.
//
//   sparq.MatMulIntegerToFloat(A, B, A_zero_point, B_zero_point, A_scale, B_scale[, Bias]) -> Y
//     quantize.mode dynamic's MatMulInteger -> Cast -> Mul(A_scale * B_scale) [-> Add(Bias)]:
//       Y[..., n] = float(MatMulInteger(A, B, A_zero_point, B_zero_point)[..., n]) * (A_scale * B_scale[n])
//                   [+ Bias[n], rounded after the product, as the Add does]
//     A_scale float32, one value; B_scale float32, one value or one per
//     column of B (the last dim); each product one float32 rounding, as the
//     Mul reference kernels compute it.
//
//   sparq.ConvIntegerToFloat(X, W, X_zero_point, W_zero_point, X_scale, W_scale[, Bias]) -> Y
//     (ConvInteger's attributes) quantize_dynamic's ConvInteger -> Cast ->
//     Mul(X_scale * W_scale) [-> Add(Bias)] (runtime/passes/dynamic_fusion.h):
//       Y[n, m, ...] = float(ConvInteger(X, W, X_zero_point, W_zero_point)[n, m, ...]) * (X_scale * W_scale[m])
//                      [+ Bias[m], rounded after the product, as the Add does]
//     X_scale float32, one value; W_scale and Bias float32, one value or one
//     per output channel m (the graph's tensors broadcast along axis 1).
//     Attribute activation "Silu" (optional; runtime/passes/float_fusion.h):
//     then sparq.Silu's reference kernel on Y, as the separate node.
//     Optional inputs 7 and 8, Y_scale and Y_zero_point (one value each: the
//     QuantizeLinear that was Y's only reader, runtime/passes/float_fusion.h):
//     then QuantizeLinear's reference kernel on Y, whose bytes are the output.
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/ref/broadcast.h"
#include "kernels/ref/quant_util.h"
#include "kernels/ref/quantize.h"

namespace sparq {
namespace {

// Element i of a uint8 or int8 tensor, as int32.
int32_t ByteValue(const Tensor& t, int64_t i) {
  return t.dtype() == DataType::kUInt8 ? static_cast<int32_t>(t.data<uint8_t>()[i])
                                       : static_cast<int32_t>(t.data<int8_t>()[i]);
}

bool IsByteType(DataType t) { return t == DataType::kUInt8 || t == DataType::kInt8; }

// Y[i] = table[X[i] - min(X's type)].
Status ApplyLut(const OpContext& ctx, const Tensor& x, const Tensor& table, Tensor* out_tensor) {
  if (!IsByteType(x.dtype())) return ctx.InvalidArgument("X has type " + DataTypeName(x.dtype()) + "; expected uint8 or int8");
  if (!IsByteType(table.dtype()) || table.numel() != 256) {
    return ctx.InvalidArgument("Table must hold 256 uint8 or int8 values, got " + DataTypeName(table.dtype()) + " " +
                               ShapeToString(table.shape()));
  }
  const int32_t offset = x.dtype() == DataType::kInt8 ? 128 : 0;
  const auto* t = static_cast<const uint8_t*>(table.raw_data());  // the table's bytes
  Tensor y(table.dtype(), x.shape());
  auto* out = static_cast<uint8_t*>(y.raw_data());
  for (int64_t i = 0; i < x.numel(); ++i) out[i] = t[ByteValue(x, i) + offset];
  *out_tensor = std::move(y);
  return Status::OK();
}

Status QLinearLut(OpContext& ctx) {
  SPARQ_RETURN_IF_ERROR(ctx.RequireInputs(2));
  Tensor y;
  SPARQ_RETURN_IF_ERROR(ApplyLut(ctx, ctx.input(0), ctx.input(1), &y));
  ctx.set_output(0, std::move(y));
  return Status::OK();
}

Status QLinearConvLut(OpContext& ctx) {
  SPARQ_RETURN_IF_ERROR(ctx.RequireInputs(8));
  if (ctx.num_inputs() != 10 || !ctx.has_input(9)) return ctx.InvalidArgument("expected 10 inputs, the last the table");
  // The convolution: ONNX's QLinearConv reference kernel on the first nine inputs.
  const KernelDef* conv = KernelRegistry::Reference().Find("QLinearConv", "", 10);
  if (conv == nullptr) return ctx.NotSupported("no QLinearConv reference kernel");
  std::vector<const Tensor*> inputs;
  for (size_t i = 0; i < 9; ++i) inputs.push_back(ctx.has_input(i) ? &ctx.input(i) : nullptr);
  OpContext conv_ctx(ctx.node(), 10, std::move(inputs), ctx.pool());
  SPARQ_RETURN_IF_ERROR(conv->fn(conv_ctx));
  Tensor y;
  SPARQ_RETURN_IF_ERROR(ApplyLut(ctx, conv_ctx.outputs()[0], ctx.input(9), &y));
  ctx.set_output(0, std::move(y));
  return Status::OK();
}

Status ConcatLut(OpContext& ctx) {
  if (ctx.num_inputs() == 0 || ctx.num_inputs() % 2 != 0) return ctx.InvalidArgument("expected pairs (X, Table)");
  std::vector<Tensor> mapped(ctx.num_inputs() / 2);
  std::vector<const Tensor*> inputs;
  for (size_t i = 0; i < mapped.size(); ++i) {
    if (!ctx.has_input(2 * i)) return ctx.InvalidArgument("X_" + std::to_string(i) + " is absent");
    if (ctx.has_input(2 * i + 1)) SPARQ_RETURN_IF_ERROR(ApplyLut(ctx, ctx.input(2 * i), ctx.input(2 * i + 1), &mapped[i]));
    inputs.push_back(ctx.has_input(2 * i + 1) ? &mapped[i] : &ctx.input(2 * i));
  }
  const KernelDef* concat = KernelRegistry::Reference().Find("Concat", "", 13);
  if (concat == nullptr) return ctx.NotSupported("no Concat reference kernel");
  OpContext concat_ctx(ctx.node(), 13, std::move(inputs), ctx.pool());
  SPARQ_RETURN_IF_ERROR(concat->fn(concat_ctx));
  ctx.set_output(0, std::move(concat_ctx.outputs()[0]));
  return Status::OK();
}

Status DequantizeConcat(OpContext& ctx) {
  if (ctx.num_inputs() == 0 || ctx.num_inputs() % 3 != 0) return ctx.InvalidArgument("expected triples (X, scale, zero point)");
  const KernelDef* dq = KernelRegistry::Reference().Find("DequantizeLinear", "", 13);
  const KernelDef* concat = KernelRegistry::Reference().Find("Concat", "", 13);
  if (dq == nullptr || concat == nullptr) return ctx.NotSupported("no DequantizeLinear / Concat reference kernel");
  std::vector<Tensor> values(ctx.num_inputs() / 3);
  std::vector<const Tensor*> inputs;
  for (size_t i = 0; i < values.size(); ++i) {
    for (size_t k = 0; k < 3; ++k)
      if (!ctx.has_input(3 * i + k)) return ctx.InvalidArgument("input " + std::to_string(3 * i + k) + " is absent");
    OpContext dq_ctx(ctx.node(), 13, {&ctx.input(3 * i), &ctx.input(3 * i + 1), &ctx.input(3 * i + 2)}, ctx.pool());
    SPARQ_RETURN_IF_ERROR(dq->fn(dq_ctx));
    values[i] = std::move(dq_ctx.outputs()[0]);
    inputs.push_back(&values[i]);
  }
  OpContext concat_ctx(ctx.node(), 13, std::move(inputs), ctx.pool());
  SPARQ_RETURN_IF_ERROR(concat->fn(concat_ctx));
  ctx.set_output(0, std::move(concat_ctx.outputs()[0]));
  return Status::OK();
}

// One per-tensor (scale, zero point) pair of QLinearAdd / QLinearMul, checked: inputs
// `scale_input` and `scale_input + 1`; the zero point's type must be `type`.
Status ReadParams(const OpContext& ctx, size_t scale_input, DataType type, const std::string& what, float* scale,
                  int32_t* zero_point) {
  SPARQ_ASSIGN_OR_RETURN(const std::vector<float> scales, ReadScales(ctx, ctx.input(scale_input), what + "_scale"));
  SPARQ_ASSIGN_OR_RETURN(*scale, SingleValue(ctx, scales, what + "_scale"));
  SPARQ_RETURN_IF_ERROR(CheckZeroPoint(ctx, scale_input + 1, type, 1, what + "_zero_point"));
  SPARQ_ASSIGN_OR_RETURN(const std::vector<int32_t> zps,
                         ReadZeroPoints(ctx, ctx.input(scale_input + 1), what + "_zero_point"));
  SPARQ_ASSIGN_OR_RETURN(*zero_point, SingleValue(ctx, zps, what + "_zero_point"));
  return Status::OK();
}

// sparq.QLinearAdd and sparq.QLinearMul: Y = Q(op(DQ(A), DQ(B))).
template <bool kMul>
Status QLinearBinary(OpContext& ctx) {
  SPARQ_RETURN_IF_ERROR(ctx.RequireInputs(8));
  const Tensor& a = ctx.input(0);
  const Tensor& b = ctx.input(3);
  if (!IsByteType(a.dtype()) || !IsByteType(b.dtype())) {
    return ctx.InvalidArgument("A and B must be uint8 or int8, got " + DataTypeName(a.dtype()) + " and " +
                               DataTypeName(b.dtype()));
  }
  const DataType y_type = ctx.input(7).dtype();
  float a_scale = 0, b_scale = 0, y_scale = 0;
  int32_t a_zp = 0, b_zp = 0, y_zp = 0;
  SPARQ_RETURN_IF_ERROR(ReadParams(ctx, 1, a.dtype(), "A", &a_scale, &a_zp));
  SPARQ_RETURN_IF_ERROR(ReadParams(ctx, 4, b.dtype(), "B", &b_scale, &b_zp));
  SPARQ_RETURN_IF_ERROR(ReadParams(ctx, 6, y_type, "Y", &y_scale, &y_zp));
  auto shape = BroadcastShapes({a.shape(), b.shape()});
  if (!shape.ok()) return ctx.InvalidArgument(shape.status().message());
  const std::array<std::vector<int64_t>, 2> strides = {BroadcastStrides(a.shape(), *shape),
                                                       BroadcastStrides(b.shape(), *shape)};
  Tensor y(y_type, *shape);
  return VisitInt8Type(ctx, y_type, "Y_zero_point", [&](auto tag) {
    using T = decltype(tag);
    T* out = y.data<T>();
    ForEachBroadcast<2>(*shape, strides, [&](int64_t i, const std::array<int64_t, 2>& off) {
      const float x = DequantizeValue(ByteValue(a, off[0]), a_scale, a_zp);
      const float z = DequantizeValue(ByteValue(b, off[1]), b_scale, b_zp);
      out[i] = QuantizeValue<T>(kMul ? x * z : x + z, y_scale, y_zp);
    });
    if (!ctx.has_input(8)) {
      ctx.set_output(0, std::move(y));
      return Status::OK();
    }
    Tensor mapped;
    SPARQ_RETURN_IF_ERROR(ApplyLut(ctx, y, ctx.input(8), &mapped));
    ctx.set_output(0, std::move(mapped));
    return Status::OK();
  });
}

}  // namespace

Status MatMulIntegerToFloatFromAcc(const OpContext& ctx, const Tensor& acc, const Tensor& a_scale, const Tensor& b_scale,
                                   const Tensor* bias, Tensor* y) {
  const int64_t n = acc.rank() == 0 ? 1 : acc.dim(acc.rank() - 1);
  if (a_scale.dtype() != DataType::kFloat32 || a_scale.numel() != 1) {
    return ctx.InvalidArgument("A_scale must be one float32 value, got " + DataTypeName(a_scale.dtype()) + " " +
                               ShapeToString(a_scale.shape()));
  }
  if (b_scale.dtype() != DataType::kFloat32 || (b_scale.numel() != 1 && b_scale.numel() != n)) {
    return ctx.InvalidArgument("B_scale must be float32, one value or one per column (" + std::to_string(n) +
                               "), got " + DataTypeName(b_scale.dtype()) + " " + ShapeToString(b_scale.shape()));
  }
  if (bias != nullptr && (bias->dtype() != DataType::kFloat32 || bias->rank() != 1 || bias->dim(0) != n)) {
    return ctx.InvalidArgument("Bias must be float32 [" + std::to_string(n) + "], got " + DataTypeName(bias->dtype()) +
                               " " + ShapeToString(bias->shape()));
  }
  std::vector<float> scale(static_cast<size_t>(n));
  const float sa = a_scale.data<float>()[0];
  for (int64_t c = 0; c < n; ++c) scale[c] = sa * b_scale.data<float>()[b_scale.numel() == 1 ? 0 : c];
  Tensor out(DataType::kFloat32, acc.shape());
  const int32_t* in = acc.data<int32_t>();
  float* o = out.data<float>();
  const int64_t rows = n == 0 ? 0 : acc.numel() / n;
  for (int64_t row = 0; row < rows; ++row)
    for (int64_t c = 0; c < n; ++c) o[row * n + c] = static_cast<float>(in[row * n + c]) * scale[c];
  if (bias != nullptr) {  // a second rounding, as the Add after the Mul (no contraction: -ffp-contract=off)
    const float* b = bias->data<float>();
    for (int64_t row = 0; row < rows; ++row)
      for (int64_t c = 0; c < n; ++c) o[row * n + c] = o[row * n + c] + b[c];
  }
  *y = std::move(out);
  return Status::OK();
}

namespace {

// sparq.MatMulIntegerToFloat may carry a GELU (runtime/passes/float_fusion.h:
// activation "GeluErfChain", gelu_divisor / gelu_offset / gelu_scale), and
// sparq.ConvIntegerToFloat a SiLU (activation "Silu"): the sparq.GeluErfChain
// or sparq.Silu reference kernel on its output, as the separate node.
// `allowed`: the one activation the operator takes.
Status ApplyActivation(OpContext& ctx, const char* allowed, Tensor* y) {
  const std::string activation = ctx.node().attr_string("activation", "");
  if (activation.empty()) return Status::OK();
  if (activation != allowed) return ctx.InvalidArgument("unknown activation '" + activation + "'");
  const KernelDef* row = KernelRegistry::Reference().Find(activation, kSparqDomain, 1);
  if (row == nullptr) return ctx.NotSupported("no " + activation + " reference kernel");
  const Node& n = ctx.node();
  std::vector<Attribute> attributes;
  if (activation == "GeluErfChain") {
    attributes = {Attribute::Float("divisor", n.attr_float("gelu_divisor", 1.41421356f)),
                  Attribute::Float("offset", n.attr_float("gelu_offset", 1.0f)),
                  Attribute::Float("scale", n.attr_float("gelu_scale", 0.5f))};
  }
  const Node step{n.name + "/" + activation, activation, kSparqDomain, {}, {"y"}, attributes, ""};
  OpContext step_ctx(step, 1, {y}, ctx.pool());
  SPARQ_RETURN_IF_ERROR(row->fn(step_ctx));
  *y = std::move(step_ctx.outputs()[0]);
  return Status::OK();
}

// sparq.ConvIntegerToFloat: ConvInteger's reference kernel, then the
// per-channel epilogue, each step one float32 rounding, then its activation
// (ApplyActivation: "Silu" or none).
Status ConvIntegerToFloat(OpContext& ctx) {
  SPARQ_RETURN_IF_ERROR(ctx.RequireInputs(6));
  const KernelDef* conv = KernelRegistry::Reference().Find("ConvInteger", "", 10);
  if (conv == nullptr) return ctx.NotSupported("no ConvInteger reference kernel");
  OpContext conv_ctx(ctx.node(), 10, {&ctx.input(0), &ctx.input(1), ctx.has_input(2) ? &ctx.input(2) : nullptr,
                                      ctx.has_input(3) ? &ctx.input(3) : nullptr},
                     ctx.pool());
  SPARQ_RETURN_IF_ERROR(conv->fn(conv_ctx));
  const Tensor& acc = conv_ctx.outputs()[0];
  const int64_t m = acc.rank() >= 2 ? acc.dim(1) : 0;
  const Tensor& x_scale = ctx.input(4);
  const Tensor& w_scale = ctx.input(5);
  const Tensor* bias = ctx.has_input(6) ? &ctx.input(6) : nullptr;
  if (x_scale.dtype() != DataType::kFloat32 || x_scale.numel() != 1) {
    return ctx.InvalidArgument("X_scale must be one float32 value, got " + DataTypeName(x_scale.dtype()) + " " +
                               ShapeToString(x_scale.shape()));
  }
  auto per_channel = [&](const Tensor& t, const char* what) -> Status {
    if (t.dtype() == DataType::kFloat32 && (t.numel() == 1 || t.numel() == m)) return Status::OK();
    return ctx.InvalidArgument(std::string(what) + " must be float32, one value or one per output channel (" +
                               std::to_string(m) + "), got " + DataTypeName(t.dtype()) + " " + ShapeToString(t.shape()));
  };
  SPARQ_RETURN_IF_ERROR(per_channel(w_scale, "W_scale"));
  if (bias != nullptr) SPARQ_RETURN_IF_ERROR(per_channel(*bias, "Bias"));
  Tensor y(DataType::kFloat32, acc.shape());
  const int64_t rows = acc.dim(0) * m;  // (n, m) planes
  const int64_t plane = rows == 0 ? 0 : acc.numel() / rows;
  const float sx = x_scale.data<float>()[0];
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t c = r % m;
    const float s = sx * w_scale.data<float>()[w_scale.numel() == 1 ? 0 : c];
    const int32_t* in = acc.data<int32_t>() + r * plane;
    float* o = y.data<float>() + r * plane;
    for (int64_t i = 0; i < plane; ++i) o[i] = static_cast<float>(in[i]) * s;
    if (bias != nullptr) {  // a second rounding, as the Add after the Mul
      const float b = bias->data<float>()[bias->numel() == 1 ? 0 : c];
      for (int64_t i = 0; i < plane; ++i) o[i] = o[i] + b;
    }
  }
  SPARQ_RETURN_IF_ERROR(ApplyActivation(ctx, "Silu", &y));
  if (ctx.has_input(7) || ctx.has_input(8)) {  // a fused QuantizeLinear: its reference kernel on Y
    if (!ctx.has_input(7) || !ctx.has_input(8)) return ctx.InvalidArgument("Y_scale and Y_zero_point go together");
    const KernelDef* quantize = KernelRegistry::Reference().Find("QuantizeLinear", "", 13);
    if (quantize == nullptr) return ctx.NotSupported("no QuantizeLinear reference kernel");
    const Node step{ctx.node().name + "/QuantizeLinear", "QuantizeLinear", "", {"y", "y_scale", "y_zero_point"}, {"q"}, {}, ""};
    OpContext q_ctx(step, 13, {&y, &ctx.input(7), &ctx.input(8)}, ctx.pool());
    SPARQ_RETURN_IF_ERROR(quantize->fn(q_ctx));
    y = std::move(q_ctx.outputs()[0]);
  }
  ctx.set_output(0, std::move(y));
  return Status::OK();
}

Status MatMulIntegerToFloat(OpContext& ctx) {
  SPARQ_RETURN_IF_ERROR(ctx.RequireInputs(6));
  const KernelDef* mm = KernelRegistry::Reference().Find("MatMulInteger", "", 10);
  if (mm == nullptr) return ctx.NotSupported("no MatMulInteger reference kernel");
  OpContext mm_ctx(ctx.node(), 10, {&ctx.input(0), &ctx.input(1), &ctx.input(2), &ctx.input(3)}, ctx.pool());
  SPARQ_RETURN_IF_ERROR(mm->fn(mm_ctx));
  Tensor y;
  SPARQ_RETURN_IF_ERROR(MatMulIntegerToFloatFromAcc(ctx, mm_ctx.outputs()[0], ctx.input(4), ctx.input(5),
                                                    ctx.has_input(6) ? &ctx.input(6) : nullptr, &y));
  SPARQ_RETURN_IF_ERROR(ApplyActivation(ctx, "GeluErfChain", &y));
  ctx.set_output(0, std::move(y));
  return Status::OK();
}

}  // namespace

void RegisterQdqFusedOps(KernelRegistry& r) {
  r.Add({"MatMulIntegerToFloat", kSparqDomain, 1, 1, MatMulIntegerToFloat, "ref"});
  r.Add({"ConvIntegerToFloat", kSparqDomain, 1, 1, ConvIntegerToFloat, "ref"});
  r.Add({"QLinearLut", kSparqDomain, 1, 1, QLinearLut, "ref"});
  r.Add({"QLinearAdd", kSparqDomain, 1, 1, QLinearBinary<false>, "ref"});
  r.Add({"QLinearMul", kSparqDomain, 1, 1, QLinearBinary<true>, "ref"});
  r.Add({"QLinearConvLut", kSparqDomain, 1, 1, QLinearConvLut, "ref"});
  r.Add({"ConcatLut", kSparqDomain, 1, 1, ConcatLut, "ref"});
  r.Add({"DequantizeConcat", kSparqDomain, 1, 1, DequantizeConcat, "ref"});
}

}  // namespace sparq
