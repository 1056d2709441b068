// The reference kernel of com.microsoft MatMulNBits (layout: matmul_nbits.h).
#include "kernels/ref/matmul_nbits.h"

#include <string>

#include "kernels/ref/quant_util.h"
#include "kernels/registry.h"

namespace sparq {

namespace {

bool IsFloatType(DataType t) { return t == DataType::kFloat32 || t == DataType::kFloat16; }

}  // namespace

StatusOr<MatMulNBitsPlan> PlanMatMulNBits(const OpContext& ctx) {
  SPARQ_RETURN_IF_ERROR(ctx.RequireInputs(3));
  const Node& node = ctx.node();
  MatMulNBitsPlan p;
  p.k = node.attr_int("K", 0);
  p.n = node.attr_int("N", 0);
  const int64_t bits = node.attr_int("bits", 4);
  p.block_size = node.attr_int("block_size", 0);
  if (bits != 4) return ctx.NotSupported("bits " + std::to_string(bits) + " is not supported (4 only)");
  if (p.k <= 0 || p.n <= 0) {
    return ctx.InvalidArgument("attributes K and N must be positive, got K " + std::to_string(p.k) + ", N " +
                               std::to_string(p.n));
  }
  if (p.block_size < 16 || (p.block_size & (p.block_size - 1)) != 0) {
    return ctx.InvalidArgument("block_size must be a power of 2 >= 16, got " + std::to_string(p.block_size));
  }
  if (ctx.has_input(4)) return ctx.NotSupported("g_idx (input 4) is not supported");
  p.k_blocks = (p.k + p.block_size - 1) / p.block_size;
  p.blob_size = p.block_size * bits / 8;

  const Tensor& a = ctx.input(0);
  if (!IsFloatType(a.dtype())) {
    return ctx.InvalidArgument("A has type " + DataTypeName(a.dtype()) + "; expected float32 or float16");
  }
  p.float_type = a.dtype();
  if (a.rank() < 1 || a.shape().back() != p.k) {
    return ctx.InvalidArgument("A has shape " + ShapeToString(a.shape()) + " but attribute K is " +
                               std::to_string(p.k) + "; its last dimension must be K");
  }
  p.m = a.numel() / p.k;
  p.out_shape = a.shape();
  p.out_shape.back() = p.n;

  const Tensor& b = ctx.input(1);
  const Shape b_shape{p.n, p.k_blocks, p.blob_size};
  if (b.dtype() != DataType::kUInt8 || NumElements(b.shape()) != NumElements(b_shape) ||
      (b.rank() == 3 && b.shape() != b_shape)) {
    return ctx.InvalidArgument("B is " + DataTypeName(b.dtype()) + " " + ShapeToString(b.shape()) +
                               "; K " + std::to_string(p.k) + ", N " + std::to_string(p.n) + ", block_size " +
                               std::to_string(p.block_size) + " need uint8 " + ShapeToString(b_shape));
  }
  const Tensor& scales = ctx.input(2);
  if (scales.dtype() != a.dtype() || scales.numel() != p.n * p.k_blocks) {
    return ctx.InvalidArgument("scales is " + DataTypeName(scales.dtype()) + " " + ShapeToString(scales.shape()) +
                               "; expected " + DataTypeName(a.dtype()) + " with N * k_blocks = " +
                               std::to_string(p.n * p.k_blocks) + " values");
  }
  if (ctx.has_input(3)) {
    const Tensor& zp = ctx.input(3);
    if (zp.dtype() == DataType::kUInt8) {
      const int64_t want = p.n * ((p.k_blocks + 1) / 2);
      if (zp.numel() != want) {
        return ctx.InvalidArgument("zero_points has shape " + ShapeToString(zp.shape()) + "; packed uint8 needs " +
                                   std::to_string(want) + " bytes (N * ceil(k_blocks / 2))");
      }
    } else if (zp.dtype() == a.dtype()) {
      if (zp.numel() != p.n * p.k_blocks) {
        return ctx.InvalidArgument("zero_points has shape " + ShapeToString(zp.shape()) + "; float zero points need " +
                                   std::to_string(p.n * p.k_blocks) + " values (N * k_blocks)");
      }
      p.float_zero_points = true;
    } else {
      return ctx.InvalidArgument("zero_points has type " + DataTypeName(zp.dtype()) + "; expected uint8 or " +
                                 DataTypeName(a.dtype()));
    }
  }
  if (ctx.has_input(5)) {
    const Tensor& bias = ctx.input(5);
    if (bias.dtype() != a.dtype() || bias.numel() != p.n) {
      return ctx.InvalidArgument("bias is " + DataTypeName(bias.dtype()) + " " + ShapeToString(bias.shape()) +
                                 "; expected " + DataTypeName(a.dtype()) + " [" + std::to_string(p.n) + "]");
    }
  }
  return p;
}

void MatMulNBitsRef(const MatMulNBitsPlan& p, const MatMulNBitsInputs& in, float* y) {
  std::vector<float> w(static_cast<size_t>(p.k));
  for (int64_t n = 0; n < p.n; ++n) {
    for (int64_t k = 0; k < p.k; ++k) {
      const int64_t blk = k / p.block_size;
      const float scale = in.scales[n * p.k_blocks + blk];
      const int32_t code = NBitsCode(in.b, p, n, k);
      w[k] = in.float_zero_points != nullptr
                 ? (static_cast<float>(code) - in.float_zero_points[n * p.k_blocks + blk]) * scale
                 : static_cast<float>(code - NBitsZeroPoint(in.zero_points, p, n, blk)) * scale;
    }
    for (int64_t i = 0; i < p.m; ++i) {
      const float* a = in.a + i * p.k;
      float acc = 0.0f;
      for (int64_t k = 0; k < p.k; ++k) acc += a[k] * w[k];
      if (in.bias != nullptr) acc += in.bias[n];
      y[i * p.n + n] = acc;
    }
  }
}

namespace {

Status MatMulNBits(OpContext& ctx) {
  SPARQ_ASSIGN_OR_RETURN(const MatMulNBitsPlan p, PlanMatMulNBits(ctx));
  const Tensor a = ctx.input(0).ToFloat32();
  const Tensor scales = ctx.input(2).ToFloat32();
  Tensor zp_float, bias;
  MatMulNBitsInputs in;
  in.a = a.data<float>();
  in.b = static_cast<const uint8_t*>(ctx.input(1).raw_data());
  in.scales = scales.data<float>();
  if (ctx.has_input(3)) {
    if (p.float_zero_points) {
      zp_float = ctx.input(3).ToFloat32();
      in.float_zero_points = zp_float.data<float>();
    } else {
      in.zero_points = static_cast<const uint8_t*>(ctx.input(3).raw_data());
    }
  }
  if (ctx.has_input(5)) {
    bias = ctx.input(5).ToFloat32();
    in.bias = bias.data<float>();
  }
  Tensor y(DataType::kFloat32, p.out_shape);
  MatMulNBitsRef(p, in, y.data<float>());
  ctx.set_output(0, p.float_type == DataType::kFloat32 ? std::move(y) : y.CastTo(p.float_type));
  return Status::OK();
}

}  // namespace

void RegisterMatMulNBitsOps(KernelRegistry& r) {
  r.Add({"MatMulNBits", "com.microsoft", 1, 1, MatMulNBits, "ref"});
}

}  // namespace sparq
