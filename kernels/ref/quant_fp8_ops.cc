#include "kernels/ref/quant_fp8_ops.h"

#include <string>

#include "kernels/ref/quantize_fp8.h"

namespace sparq {
namespace {

// float8 Q/DQ exist from opset 19; their zero point, when given, must be 0
// (ONNX's reference refuses others; onnxruntime ignores it).
Status CheckFp8Node(const OpContext& ctx, size_t zp_input, const std::string& zp_name) {
  if (ctx.opset() < 19) {
    return ctx.InvalidArgument("float8e4m3fn quantization needs opset 19 or later, the model has opset " +
                               std::to_string(ctx.opset()));
  }
  if (!ctx.has_input(zp_input)) return Status::OK();
  const Tensor& zp = ctx.input(zp_input);
  const auto* bits = static_cast<const uint8_t*>(zp.raw_data());
  for (int64_t i = 0; i < zp.numel(); ++i) {
    if (bits[i] != 0) {
      return ctx.InvalidArgument(zp_name + " value " + std::to_string(i) + " is " +
                                 std::to_string(Float8E4M3ToFloat(bits[i])) + "; it must be 0 for float8 types");
    }
  }
  return Status::OK();
}

}  // namespace

Status QuantizeLinearToFp8(OpContext& ctx, const QuantParamLayout& layout, const std::vector<float>& scale) {
  SPARQ_RETURN_IF_ERROR(CheckFp8Node(ctx, 2, "y_zero_point"));
  const int64_t saturate = ctx.node().attr_int("saturate", 1);
  if (saturate != 0 && saturate != 1) {
    return ctx.InvalidArgument("saturate must be 0 or 1, got " + std::to_string(saturate));
  }
  const Tensor& x = ctx.input(0);
  const Tensor xf = x.ToFloat32();
  Tensor y(DataType::kFloat8E4M3FN, x.shape());
  QuantizeLinearFp8Ref(xf.data<float>(), layout, scale.data(), saturate == 1, static_cast<uint8_t*>(y.raw_data()));
  ctx.set_output(0, std::move(y));
  return Status::OK();
}

Status DequantizeLinearFromFp8(OpContext& ctx, const QuantParamLayout& layout, const std::vector<float>& scale,
                               DataType out_type) {
  SPARQ_RETURN_IF_ERROR(CheckFp8Node(ctx, 2, "x_zero_point"));
  const Tensor& x = ctx.input(0);
  Tensor y(DataType::kFloat32, x.shape());
  DequantizeLinearFp8Ref(static_cast<const uint8_t*>(x.raw_data()), layout, scale.data(), y.data<float>());
  // A float8 value times a 16-bit scale is exact in float32 (4 + 11 significant
  // bits), so one rounding gives the 16-bit product.
  ctx.set_output(0, out_type == DataType::kFloat32 ? std::move(y) : y.CastTo(out_type));
  return Status::OK();
}

Status FakeQuantFp8(OpContext& ctx) {
  SPARQ_RETURN_IF_ERROR(ctx.RequireInputs(2));
  const Tensor& x = ctx.input(0);
  const Tensor& scale = ctx.input(1);
  if (x.dtype() != DataType::kFloat32) {
    return ctx.InvalidArgument("x has type " + DataTypeName(x.dtype()) + "; expected float32");
  }
  if (scale.dtype() != DataType::kFloat32 || scale.numel() != 1) {
    return ctx.InvalidArgument("scale must be one float32 value, got " + ShapeToString(scale.shape()) + " of " +
                               DataTypeName(scale.dtype()));
  }
  Tensor y(DataType::kFloat32, x.shape());
  FakeQuantFp8Ref(x.data<float>(), x.numel(), scale.data<float>()[0], y.data<float>());
  ctx.set_output(0, std::move(y));
  return Status::OK();
}

void RegisterQuantFp8Ops(KernelRegistry& r) { r.Add({"FakeQuantFp8", kSparqDomain, 1, 1, FakeQuantFp8, "ref"}); }

}  // namespace sparq
