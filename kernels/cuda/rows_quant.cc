// CUDA rows of quantization outside the GEMMs: QuantizeLinear,
// DequantizeLinear, DynamicQuantizeLinear and the QDQ glue the fusion writes
// (sparq.QLinearAdd / QLinearMul / QLinearLut / ConcatLut / DequantizeConcat);
// integer results bit for bit with kernels/ref (cuda_rows.h lists them).
#include <algorithm>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "kernels/cuda/cuda_rows.h"
#include "kernels/cuda/cuda_status.h"
#include "kernels/cuda/geometry.h"
#include "kernels/cuda/launch.h"

namespace sparq {
namespace cuda {
namespace {

// ---------------------------------------------------------------------------
// QuantizeLinear / DequantizeLinear (float32 <-> int8 / uint8), per tensor or per axis

Status CheckQdq(const Node& node, const std::vector<const Tensor*>&) {
  if (node.attr_int("block_size", 0) != 0) return Status::NotSupported(node.Describe() + ": blocked quantization");
  const int64_t out = node.attr_int("output_dtype", 0);
  if (out != 0 && out != 2 && out != 3) {  // TensorProto UINT8 = 2, INT8 = 3
    return Status::NotSupported(node.Describe() + ": output_dtype other than int8 / uint8");
  }
  return Status::OK();
}

struct QuantParams {
  std::shared_ptr<uint8_t> scale, zero_point;  // device arrays
  int64_t axis_dim = 1, inner = 1;
};

// Uploads scale (input 1) and zero point (input 2, optional) for x's layout.
StatusOr<QuantParams> ReadQuantParams(OpContext& ctx, CudaContext& cuda, const Shape& x_shape) {
  SPARQ_ASSIGN_OR_RETURN(std::vector<float> scale, HostFloats(ctx, 1, "scale"));
  std::vector<int32_t> zp;
  if (ctx.has_input(2)) {
    SPARQ_ASSIGN_OR_RETURN(zp, HostInts(ctx, 2, "zero point"));
    if (zp.size() != scale.size()) return ctx.InvalidArgument("zero point and scale differ in size");
  }
  QuantParams p;  // one value: per tensor (axis_dim = inner = 1)
  if (scale.size() != 1) {
    const int64_t rank = static_cast<int64_t>(x_shape.size());
    SPARQ_ASSIGN_OR_RETURN(const int64_t axis, NormalizeAxisOf(ctx, ctx.node().attr_int("axis", 1), rank));
    p.axis_dim = x_shape[static_cast<size_t>(axis)];
    p.inner = Product(x_shape, static_cast<size_t>(axis) + 1, x_shape.size());
    if (static_cast<int64_t>(scale.size()) != p.axis_dim) {
      return ctx.InvalidArgument("scale has " + std::to_string(scale.size()) + " values for an axis of " +
                                 std::to_string(p.axis_dim));
    }
  }
  SPARQ_ASSIGN_OR_RETURN(p.scale, UploadVector(cuda, scale));
  if (!zp.empty()) {
    SPARQ_ASSIGN_OR_RETURN(p.zero_point, UploadVector(cuda, zp));
  }
  return p;
}

Status QuantizeF32(OpContext& ctx) {
  SPARQ_RETURN_IF_ERROR(ctx.RequireInputs(2));
  SPARQ_RETURN_IF_ERROR(RequireDeviceInput(ctx, 0));
  SPARQ_RETURN_IF_ERROR(RequireInputType(ctx, 0, DataType::kFloat32, "quantize_f32_s8_cuda"));
  SPARQ_ASSIGN_OR_RETURN(CudaContext * cuda, CudaContextOf(ctx));
  DataType out = ctx.node().attr_int("output_dtype", 0) == 3 ? DataType::kInt8 : DataType::kUInt8;
  if (ctx.has_input(2)) out = ctx.input(2).dtype();
  if (out != DataType::kInt8 && out != DataType::kUInt8) {
    return ctx.NotSupported("quantize_f32_s8_cuda writes int8 / uint8, not " + DataTypeName(out));
  }
  const Tensor& x = ctx.input(0);
  SPARQ_ASSIGN_OR_RETURN(const QuantParams p, ReadQuantParams(ctx, *cuda, x.shape()));
  SPARQ_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, out, x.shape()));
  return LaunchQuantizeF32(InF32(ctx, 0), y->raw_data(), out == DataType::kInt8, x.numel(),
                           reinterpret_cast<const float*>(p.scale.get()),
                           reinterpret_cast<const int32_t*>(p.zero_point.get()), p.axis_dim, p.inner, cuda->stream());
}

Status DequantizeToF32(OpContext& ctx) {
  SPARQ_RETURN_IF_ERROR(ctx.RequireInputs(2));
  SPARQ_RETURN_IF_ERROR(RequireDeviceInput(ctx, 0));
  SPARQ_ASSIGN_OR_RETURN(CudaContext * cuda, CudaContextOf(ctx));
  const Tensor& x = ctx.input(0);
  int type_code;
  switch (x.dtype()) {
    case DataType::kUInt8: type_code = 0; break;
    case DataType::kInt8: type_code = 1; break;
    case DataType::kInt32: type_code = 2; break;
    default: return ctx.NotSupported("dequantize_s8_f32_cuda reads int8 / uint8 / int32, not " + DataTypeName(x.dtype()));
  }
  if (ctx.input(1).dtype() != DataType::kFloat32) return ctx.NotSupported("dequantize_s8_f32_cuda writes float32 only");
  SPARQ_ASSIGN_OR_RETURN(const QuantParams p, ReadQuantParams(ctx, *cuda, x.shape()));
  SPARQ_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, DataType::kFloat32, x.shape()));
  return LaunchDequantize(x.raw_data(), type_code, static_cast<float*>(y->raw_data()), x.numel(),
                          reinterpret_cast<const float*>(p.scale.get()),
                          reinterpret_cast<const int32_t*>(p.zero_point.get()), p.axis_dim, p.inner, cuda->stream());
}

// ---------------------------------------------------------------------------
// The QDQ glue the CPU executor fuses: sparq.QLinearAdd / QLinearMul / QLinearLut


// One per-tensor (scale, zero point) pair: inputs i and i + 1.
Status ReadQParams(const OpContext& ctx, size_t i, const char* what, float* scale, int32_t* zp) {
  SPARQ_ASSIGN_OR_RETURN(const std::vector<float> s, HostFloats(ctx, i, what));
  SPARQ_ASSIGN_OR_RETURN(const std::vector<int32_t> z, HostInts(ctx, i + 1, what));
  if (s.size() != 1 || z.size() != 1) return ctx.InvalidArgument(std::string(what) + " parameters must be per tensor");
  *scale = s[0];
  *zp = z[0];
  return Status::OK();
}

template <bool kMul>
Status QLinearBinary(OpContext& ctx) {
  SPARQ_RETURN_IF_ERROR(ctx.RequireInputs(8));
  SPARQ_RETURN_IF_ERROR(RequireDeviceInput(ctx, 0));
  SPARQ_RETURN_IF_ERROR(RequireDeviceInput(ctx, 3));
  SPARQ_ASSIGN_OR_RETURN(CudaContext * cuda, CudaContextOf(ctx));
  const Tensor& a = ctx.input(0);
  const Tensor& b = ctx.input(3);
  auto is_byte = [](DataType t) { return t == DataType::kUInt8 || t == DataType::kInt8; };
  const DataType y_type = ctx.input(7).dtype();
  if (!is_byte(a.dtype()) || !is_byte(b.dtype()) || !is_byte(y_type)) {
    return ctx.InvalidArgument("A, B and Y must be uint8 or int8");
  }
  QLinearBinaryArgs q;
  q.mul = kMul;
  q.a_signed = a.dtype() == DataType::kInt8;
  q.b_signed = b.dtype() == DataType::kInt8;
  q.y_signed = y_type == DataType::kInt8;
  SPARQ_RETURN_IF_ERROR(ReadQParams(ctx, 1, "A", &q.a_scale, &q.a_zp));
  SPARQ_RETURN_IF_ERROR(ReadQParams(ctx, 4, "B", &q.b_scale, &q.b_zp));
  SPARQ_RETURN_IF_ERROR(ReadQParams(ctx, 6, "Y", &q.y_scale, &q.y_zp));
  DataType out_type = y_type;
  if (ctx.has_input(8)) {
    SPARQ_ASSIGN_OR_RETURN(const std::vector<uint8_t> table, HostTable(ctx, 8));
    std::memcpy(q.table, table.data(), 256);
    q.has_table = true;
    out_type = ctx.input(8).dtype();
  }
  BroadcastPlan plan;
  int64_t out_dims[kMaxRank];
  int out_rank = 0;
  Status st = PlanBroadcast(a.shape().data(), static_cast<int>(a.rank()), b.shape().data(), static_cast<int>(b.rank()),
                            &plan, out_dims, &out_rank);
  if (!st.ok()) return st.WithContext(ctx.node().Describe());
  SPARQ_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, out_type, Shape(out_dims, out_dims + out_rank)));
  return LaunchQLinearBinary(a.raw_data(), b.raw_data(), y->raw_data(), plan, q, cuda->stream());
}

Status QLinearLut(OpContext& ctx) {
  SPARQ_RETURN_IF_ERROR(ctx.RequireInputs(2));
  SPARQ_RETURN_IF_ERROR(RequireDeviceInput(ctx, 0));
  SPARQ_ASSIGN_OR_RETURN(CudaContext * cuda, CudaContextOf(ctx));
  const Tensor& x = ctx.input(0);
  if (x.dtype() != DataType::kUInt8 && x.dtype() != DataType::kInt8) return ctx.InvalidArgument("X must be uint8 or int8");
  SPARQ_ASSIGN_OR_RETURN(const std::vector<uint8_t> table, HostTable(ctx, 1));
  SPARQ_ASSIGN_OR_RETURN(std::shared_ptr<uint8_t> dev_table, UploadVector(*cuda, table));
  SPARQ_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, ctx.input(1).dtype(), x.shape()));
  return LaunchLut256(x.raw_data(), x.dtype() == DataType::kInt8, dev_table.get(), y->raw_data(), x.numel(),
                      cuda->stream());
}

// DynamicQuantizeLinear (float32 -> uint8, scale, zero point), all on the device.
Status DynamicQuantizeF32(OpContext& ctx) {
  SPARQ_RETURN_IF_ERROR(RequireDeviceInput(ctx, 0));
  SPARQ_RETURN_IF_ERROR(RequireInputType(ctx, 0, DataType::kFloat32, "dynamic_quantize_f32_u8_cuda"));
  SPARQ_ASSIGN_OR_RETURN(CudaContext * cuda, CudaContextOf(ctx));
  const Tensor& x = ctx.input(0);
  SPARQ_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, DataType::kUInt8, x.shape()));
  SPARQ_ASSIGN_OR_RETURN(Tensor * scale, ctx.AllocateOutput(1, DataType::kFloat32, {}));
  SPARQ_ASSIGN_OR_RETURN(Tensor * zero_point, ctx.AllocateOutput(2, DataType::kUInt8, {}));
  SPARQ_ASSIGN_OR_RETURN(std::shared_ptr<uint8_t> scratch, Scratch(*cuda, DynamicQuantizeScratchBytes()));
  return LaunchDynamicQuantizeU8(InF32(ctx, 0), x.numel(), static_cast<uint8_t*>(y->raw_data()),
                                 static_cast<float*>(scale->raw_data()), static_cast<uint8_t*>(zero_point->raw_data()),
                                 scratch.get(), cuda->stream());
}

// sparq.ConcatLut(X_0, Table_0, X_1, Table_1, ...): each X_i through its table ("" : as is), then Concat.
Status ConcatLut(OpContext& ctx) {
  if (ctx.num_inputs() == 0 || ctx.num_inputs() % 2 != 0) return ctx.InvalidArgument("expected pairs (X, Table)");
  SPARQ_ASSIGN_OR_RETURN(CudaContext * cuda, CudaContextOf(ctx));
  std::vector<Tensor> mapped(ctx.num_inputs() / 2);
  std::vector<const Tensor*> parts;
  for (size_t i = 0; i < mapped.size(); ++i) {
    SPARQ_RETURN_IF_ERROR(RequireDeviceInput(ctx, 2 * i));
    const Tensor& x = ctx.input(2 * i);
    if (!ctx.has_input(2 * i + 1)) {
      parts.push_back(&x);
      continue;
    }
    if (x.dtype() != DataType::kUInt8 && x.dtype() != DataType::kInt8) return ctx.InvalidArgument("X must be uint8 or int8");
    SPARQ_ASSIGN_OR_RETURN(const std::vector<uint8_t> table, HostTable(ctx, 2 * i + 1));
    SPARQ_ASSIGN_OR_RETURN(std::shared_ptr<uint8_t> dev_table, UploadVector(*cuda, table));
    SPARQ_ASSIGN_OR_RETURN(mapped[i], cuda->AllocateTensor(ctx.input(2 * i + 1).dtype(), x.shape()));
    SPARQ_RETURN_IF_ERROR(LaunchLut256(x.raw_data(), x.dtype() == DataType::kInt8, dev_table.get(), mapped[i].raw_data(),
                                       x.numel(), cuda->stream()));
    parts.push_back(&mapped[i]);
  }
  return ConcatInto(ctx, *cuda, parts, ctx.node().attr_int("axis", 0));
}

// sparq.DequantizeConcat(X_0, scale_0, zero_point_0, X_1, ...): each X_i dequantized (per tensor), then Concat.
Status DequantizeConcat(OpContext& ctx) {
  if (ctx.num_inputs() == 0 || ctx.num_inputs() % 3 != 0) return ctx.InvalidArgument("expected triples (X, scale, zero point)");
  SPARQ_ASSIGN_OR_RETURN(CudaContext * cuda, CudaContextOf(ctx));
  std::vector<Tensor> values(ctx.num_inputs() / 3);
  std::vector<const Tensor*> parts;
  for (size_t i = 0; i < values.size(); ++i) {
    SPARQ_RETURN_IF_ERROR(RequireDeviceInput(ctx, 3 * i));
    const Tensor& x = ctx.input(3 * i);
    if (x.dtype() != DataType::kUInt8 && x.dtype() != DataType::kInt8) return ctx.InvalidArgument("X must be uint8 or int8");
    SPARQ_ASSIGN_OR_RETURN(const std::vector<float> scale, HostFloats(ctx, 3 * i + 1, "scale"));
    SPARQ_ASSIGN_OR_RETURN(const std::vector<int32_t> zp, HostInts(ctx, 3 * i + 2, "zero point"));
    if (scale.size() != 1 || zp.size() != 1) return ctx.InvalidArgument("DequantizeConcat parameters must be per tensor");
    SPARQ_ASSIGN_OR_RETURN(std::shared_ptr<uint8_t> scale_dev, UploadVector(*cuda, scale));
    SPARQ_ASSIGN_OR_RETURN(std::shared_ptr<uint8_t> zp_dev, UploadVector(*cuda, zp));
    SPARQ_ASSIGN_OR_RETURN(values[i], cuda->AllocateTensor(DataType::kFloat32, x.shape()));
    SPARQ_RETURN_IF_ERROR(LaunchDequantize(x.raw_data(), x.dtype() == DataType::kInt8 ? 1 : 0,
                                           static_cast<float*>(values[i].raw_data()), x.numel(),
                                           reinterpret_cast<const float*>(scale_dev.get()),
                                           reinterpret_cast<const int32_t*>(zp_dev.get()), 1, 1, cuda->stream()));
    parts.push_back(&values[i]);
  }
  return ConcatInto(ctx, *cuda, parts, ctx.node().attr_int("axis", 0));
}

}  // namespace

void RegisterCudaQuantRows(KernelRegistry& r) {
  const uint32_t x = HostInput(0);
  const uint32_t qparams = HostInput(1) | HostInput(2) | HostInput(4) | HostInput(5) | HostInput(6) | HostInput(7);
  r.Add(CudaRow("QLinearAdd", kSparqDomain, 1, WithHostFallback<QLinearBinary<false>>, "qlinear_add_s8_cuda", nullptr, qparams | HostInput(8)));
  r.Add(CudaRow("QLinearMul", kSparqDomain, 1, WithHostFallback<QLinearBinary<true>>, "qlinear_mul_s8_cuda", nullptr, qparams | HostInput(8)));
  r.Add(CudaRow("QLinearLut", kSparqDomain, 1, WithHostFallback<QLinearLut>, "lut256_cuda", nullptr, HostInput(1)));
  uint32_t odd = 0, params3 = 0;  // the tables of ConcatLut; the scales and zero points of DequantizeConcat
  for (int i = 0; i < 32; ++i) {
    if (i % 2 == 1) odd |= HostInput(i);
    if (i % 3 != 0) params3 |= HostInput(i);
  }
  r.Add(CudaRow("ConcatLut", kSparqDomain, 1, WithHostFallback<ConcatLut>, "concat_lut_cuda", nullptr, odd));
  r.Add(CudaRow("DequantizeConcat", kSparqDomain, 1, WithHostFallback<DequantizeConcat>, "dequantize_concat_cuda", nullptr, params3));
  r.Add(CudaRow("DynamicQuantizeLinear", "", 11, WithHostFallback<DynamicQuantizeF32>, "dynamic_quantize_f32_u8_cuda", Float32Only(x)));
  r.Add(CudaRow("QuantizeLinear", "", 10, WithHostFallback<QuantizeF32>, "quantize_f32_s8_cuda", CheckOnly(CheckQdq),
            HostInput(1) | HostInput(2)));
  r.Add(CudaRow("DequantizeLinear", "", 10, WithHostFallback<DequantizeToF32>, "dequantize_s8_f32_cuda", CheckOnly(CheckQdq),
            HostInput(1) | HostInput(2)));
}

}  // namespace cuda
}  // namespace sparq
