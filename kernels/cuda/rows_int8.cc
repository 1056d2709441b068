// CUDA rows of the INT8 GEMM-shaped operators (cuda_rows.h lists them):
// QLinearMatMul, sparq.MatMulIntegerToFloat and QLinearConv (+ sparq.QLinearConvLut)
// on the fused INT8 GEMM (gemm_s8_fused.cu: int8 tensor cores, the requantize
// / float epilogue applied on chip, int8 written; CudaBackendOptions::
// fused_int8_gemm, on by default) or cuBLASLt's IMMA GEMM into int32 (the own
// kernel for shapes it refuses) and the epilogue as a second kernel, and
// depthwise QLinearConv on its own kernel. Integer results bit for bit with
// kernels/ref either way (one epilogue function, device_kernels.h).
//
// INT8 operands are made signed (uint8 x -> x ^ 0x80 = x - 128, zero points
// shifted alike, so every difference x - zero_point is unchanged), and the
// zero points are applied after the GEMM (RequantArgs in device_kernels.h):
//   sum_k (a - za)(b - zb) = sum_k a b - zb sum_k a - za sum_k b + K za zb
// which equals the reference's int32 sums modulo 2^32, i.e. exactly.
#include <string>
#include <vector>

#include "kernels/cuda/cuda_rows.h"
#include "kernels/cuda/cuda_status.h"
#include "kernels/cuda/gemm_cublaslt.h"
#include "kernels/cuda/geometry.h"
#include "kernels/cuda/launch.h"

namespace sparq {
namespace cuda {
namespace {

// Resolves the geometry of a 2-D convolution on x and w (geometry.h).
StatusOr<Conv2dGeometry> ConvGeometryOf(const OpContext& ctx, const Tensor& x, const Tensor& w, Shape* y_shape) {
  return Conv2dGeometryOf(ctx, x.shape(), w.shape(), y_shape);
}

// ---------------------------------------------------------------------------
// INT8: QLinearMatMul and QLinearConv

bool AnyNonzero(const std::vector<int32_t>& v) {
  for (int32_t x : v)
    if (x != 0) return true;
  return false;
}

// acc [m, n] = a [m, k] * b [n, k]^T in int32: cuBLASLt's IMMA GEMM where it
// takes the shape, else the own fallback kernel.
Status GemmS8(CudaContext& cuda, const int8_t* a, const int8_t* b, int32_t* acc, int64_t m, int64_t n, int64_t k) {
  LtGemmArgs args;
  args.type = LtGemmType::kS8S32;
  args.m = m;
  args.n = n;
  args.k = k;
  args.a = a;
  args.lda = k;
  args.b = b;
  args.ldb = k;
  args.trans_b = true;
  args.c = acc;
  args.ldc = n;
  if (LtGemm::CanImplement(args).ok()) {
    Status st = RunCudaGemm(cuda, args);
    if (st.ok() || st.code() != StatusCode::kNotSupported) return st;
  }
  return LaunchGemmS8S32Naive(a, b, acc, m, n, k, cuda.stream());
}

// out [m, n] = RequantizeAccValue(a [m, k] * b [n, k]^T) with r's corrections
// (r.out, r.rows = m, r.cols = n): the fused INT8 GEMM (gemm_s8_fused.cu) when
// the context asks for it and it takes the shape, else GemmS8 into an int32
// scratch matrix and the requantize kernel over it. The same bits either way.
Status GemmS8Requantize(CudaContext& cuda, const int8_t* a, const int8_t* b, int64_t k, RequantArgs r) {
  if (cuda.options().fused_int8_gemm) {
    Status st = LaunchGemmS8Requantize(a, b, r.rows, r.cols, k, r, cuda.stream());
    if (st.code() != StatusCode::kNotSupported) return st;
  }
  SPARQ_ASSIGN_OR_RETURN(std::shared_ptr<uint8_t> acc, Scratch(cuda, static_cast<size_t>(r.rows * r.cols) * sizeof(int32_t)));
  r.acc = reinterpret_cast<const int32_t*>(acc.get());
  SPARQ_RETURN_IF_ERROR(GemmS8(cuda, a, b, reinterpret_cast<int32_t*>(acc.get()), r.rows, r.cols, k));
  return LaunchRequantize(r, cuda.stream());
}

// The same with sparq.MatMulIntegerToFloat's float epilogue into y.
Status GemmS8ToFloat(CudaContext& cuda, const int8_t* a, const int8_t* b, int64_t k, RequantArgs r,
                     const FloatEpilogue& e, float* y) {
  if (cuda.options().fused_int8_gemm) {
    Status st = LaunchGemmS8ToFloat(a, b, r.rows, r.cols, k, r, e, y, cuda.stream());
    if (st.code() != StatusCode::kNotSupported) return st;
  }
  SPARQ_ASSIGN_OR_RETURN(std::shared_ptr<uint8_t> acc, Scratch(cuda, static_cast<size_t>(r.rows * r.cols) * sizeof(int32_t)));
  r.acc = reinterpret_cast<const int32_t*>(acc.get());
  SPARQ_RETURN_IF_ERROR(GemmS8(cuda, a, b, reinterpret_cast<int32_t*>(acc.get()), r.rows, r.cols, k));
  return LaunchAccToFloat(r, e, y, cuda.stream());
}

DataType OutputType(const OpContext& ctx, size_t zp_input) {
  return ctx.has_input(zp_input) ? ctx.input(zp_input).dtype() : ctx.input(0).dtype();
}

// The operands of the int32 product of A [..., M, K] and B [K, N] (int8 /
// uint8, zero points per tensor for A, per tensor or per column for B) as
// signed A [rows, K] and Bt [N, K], with the zero-point corrections in `r`,
// ready for GemmS8Requantize or GemmS8ToFloat.
struct IntMatMul {
  RequantArgs r;
  const int8_t* a = nullptr;   // [rows, K]
  const int8_t* bt = nullptr;  // [N, K]
  int64_t k = 0;
  Shape out;  // A's shape with K replaced by N
  std::vector<std::shared_ptr<uint8_t>> buffers;  // what r, a and bt point into
};

StatusOr<IntMatMul> PrepareIntMatMul(OpContext& ctx, CudaContext& cuda, size_t a_in, size_t a_zp_in, size_t b_in,
                                 size_t b_zp_in) {
  SPARQ_RETURN_IF_ERROR(RequireDeviceInput(ctx, a_in));
  SPARQ_RETURN_IF_ERROR(RequireDeviceInput(ctx, b_in));
  const Tensor& a = ctx.input(a_in);
  const Tensor& b = ctx.input(b_in);
  if (a.rank() < 1 || b.rank() != 2) return ctx.NotSupported("the CUDA INT8 MatMul rows take A [..., K] and B [K, N]");
  const int64_t K = a.shape().back(), N = b.dim(1);
  if (b.dim(0) != K) return ctx.InvalidArgument("A's K and B's rows differ");
  IntMatMul m;
  m.out = Shape(a.shape().begin(), a.shape().end() - 1);
  m.out.push_back(N);
  const int64_t rows = K > 0 ? a.numel() / K : NumElements(m.out) / std::max<int64_t>(N, 1);
  SPARQ_ASSIGN_OR_RETURN(const SignedView a8, AsSigned(ctx, cuda, a, "A"));
  SPARQ_ASSIGN_OR_RETURN(const SignedView b8, AsSigned(ctx, cuda, b, "B"));
  m.buffers = {a8.holder, b8.holder};
  SPARQ_ASSIGN_OR_RETURN(const std::vector<int32_t> za, ZeroPoints(ctx, a_zp_in, a8.shifted, "a_zero_point"));
  SPARQ_ASSIGN_OR_RETURN(const std::vector<int32_t> zb, ZeroPoints(ctx, b_zp_in, b8.shifted, "b_zero_point"));
  if (za.size() != 1) return ctx.NotSupported("a_zero_point per tensor only");
  if (zb.size() != 1 && static_cast<int64_t>(zb.size()) != N) return ctx.NotSupported("b_zero_point per tensor or per column only");
  // B [K, N] -> Bt [N, K]: cuBLASLt's INT8 GEMM reads both operands along K.
  SPARQ_ASSIGN_OR_RETURN(std::shared_ptr<uint8_t> bt, Scratch(cuda, static_cast<size_t>(N * K)));
  PermutePlan plan;
  plan.rank = 2;
  plan.numel = N * K;
  plan.out_dims[0] = N;
  plan.out_dims[1] = K;
  plan.in_strides[0] = 1;
  plan.in_strides[1] = N;
  SPARQ_RETURN_IF_ERROR(LaunchPermute(b8.data, bt.get(), 1, plan, cuda.stream()));
  const int8_t* btp = reinterpret_cast<const int8_t*>(bt.get());
  m.buffers.push_back(bt);
  m.a = a8.data;
  m.bt = btp;
  m.k = K;
  RequantArgs& r = m.r;
  r.rows = rows;
  r.cols = N;
  r.k = static_cast<int32_t>(K);
  r.a_zp_scalar = za[0];
  if (AnyNonzero(zb)) {
    SPARQ_ASSIGN_OR_RETURN(std::shared_ptr<uint8_t> a_sum, Scratch(cuda, static_cast<size_t>(rows) * sizeof(int32_t)));
    SPARQ_RETURN_IF_ERROR(LaunchRowSumsS8(a8.data, rows, K, reinterpret_cast<int32_t*>(a_sum.get()), cuda.stream()));
    r.a_sum = reinterpret_cast<const int32_t*>(a_sum.get());
    m.buffers.push_back(a_sum);
  }
  if (za[0] != 0) {
    SPARQ_ASSIGN_OR_RETURN(std::shared_ptr<uint8_t> b_sum, Scratch(cuda, static_cast<size_t>(N) * sizeof(int32_t)));
    SPARQ_RETURN_IF_ERROR(LaunchRowSumsS8(btp, N, K, reinterpret_cast<int32_t*>(b_sum.get()), cuda.stream()));
    r.b_sum = reinterpret_cast<const int32_t*>(b_sum.get());
    m.buffers.push_back(b_sum);
  }
  if (zb.size() > 1) {
    SPARQ_ASSIGN_OR_RETURN(std::shared_ptr<uint8_t> zb_dev, UploadVector(cuda, zb));
    r.b_zp = reinterpret_cast<const int32_t*>(zb_dev.get());
    m.buffers.push_back(zb_dev);
  } else {
    r.b_zp_scalar = zb[0];
  }
  return m;
}

Status QLinearMatMulS8(OpContext& ctx) {
  SPARQ_RETURN_IF_ERROR(ctx.RequireInputs(7));
  SPARQ_ASSIGN_OR_RETURN(CudaContext * cuda, CudaContextOf(ctx));
  const DataType y_type = OutputType(ctx, 7);
  if (y_type != DataType::kInt8 && y_type != DataType::kUInt8) return ctx.NotSupported("output type must be int8 / uint8");
  SPARQ_ASSIGN_OR_RETURN(const float a_scale, SingleFloat(ctx, 1, "a_scale"));
  SPARQ_ASSIGN_OR_RETURN(const std::vector<float> b_scale, HostFloats(ctx, 4, "b_scale"));
  SPARQ_ASSIGN_OR_RETURN(const float y_scale, SingleFloat(ctx, 6, "y_scale"));
  SPARQ_ASSIGN_OR_RETURN(const int32_t y_zp, OutputZeroPoint(ctx, 7));
  SPARQ_ASSIGN_OR_RETURN(IntMatMul m, PrepareIntMatMul(ctx, *cuda, 0, 2, 3, 5));
  if (b_scale.size() != 1 && static_cast<int64_t>(b_scale.size()) != m.r.cols) {
    return ctx.NotSupported("b_scale per tensor or per column only");
  }
  SPARQ_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, y_type, m.out));
  SPARQ_ASSIGN_OR_RETURN(std::shared_ptr<uint8_t> mult_dev, UploadMultipliers(*cuda, a_scale, b_scale, y_scale));
  m.r.multiplier = reinterpret_cast<const float*>(mult_dev.get());
  m.r.multiplier_per_col = b_scale.size() > 1;
  m.r.y_zp = y_zp;
  m.r.out_signed = y_type == DataType::kInt8;
  m.r.out = y->raw_data();
  if (m.r.rows == 0 || m.r.cols == 0) return Status::OK();
  return GemmS8Requantize(*cuda, m.a, m.bt, m.k, m.r).WithContext(ctx.node().Describe());
}

// sparq.MatMulIntegerToFloat(A, B, A_zero_point, B_zero_point, A_scale, B_scale[, Bias]):
// the INT8 GEMM, then float(sum) * (A_scale * B_scale[n]) [+ Bias[n]] [-> GeluErfChain].
Status CheckMatMulIntegerToFloat(const Node& node, const std::vector<const Tensor*>&) {
  return CheckIntegerToFloatActivation(node);
}

Status MatMulIntegerToFloatS8(OpContext& ctx) {
  SPARQ_RETURN_IF_ERROR(ctx.RequireInputs(6));
  SPARQ_ASSIGN_OR_RETURN(CudaContext * cuda, CudaContextOf(ctx));
  SPARQ_ASSIGN_OR_RETURN(IntMatMul m, PrepareIntMatMul(ctx, *cuda, 0, 2, 1, 3));
  std::shared_ptr<uint8_t> scale_dev;
  SPARQ_ASSIGN_OR_RETURN(const FloatEpilogue e, MakeFloatEpilogue(ctx, *cuda, m.r.cols, &scale_dev));
  SPARQ_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, DataType::kFloat32, m.out));
  if (m.r.rows == 0 || m.r.cols == 0) return Status::OK();
  return GemmS8ToFloat(*cuda, m.a, m.bt, m.k, m.r, e, static_cast<float*>(y->raw_data())).WithContext(ctx.node().Describe());
}

Status CheckQLinearConv(const Node& node, const std::vector<const Tensor*>& constants) {
  if (node.attr_int("group", 1) != 1) return Status::NotSupported(node.Describe() + ": qlinear_conv_s8_wmma takes group 1");
  if (constants.size() > 3 && constants[3] != nullptr && constants[3]->rank() != 4) {
    return Status::NotSupported(node.Describe() + ": the CUDA QLinearConv row is 2-D only");
  }
  return Status::OK();
}

Status QLinearConvS8(OpContext& ctx) {
  SPARQ_RETURN_IF_ERROR(ctx.RequireInputs(7));
  SPARQ_RETURN_IF_ERROR(RequireDeviceInput(ctx, 0));
  SPARQ_RETURN_IF_ERROR(RequireDeviceInput(ctx, 3));
  if (ctx.node().attr_int("group", 1) != 1) return ctx.NotSupported("qlinear_conv_s8_wmma takes group 1");
  SPARQ_ASSIGN_OR_RETURN(CudaContext * cuda, CudaContextOf(ctx));
  const Tensor& x = ctx.input(0);
  const Tensor& w = ctx.input(3);
  Shape y_shape;
  SPARQ_ASSIGN_OR_RETURN(const Conv2dGeometry g, ConvGeometryOf(ctx, x, w, &y_shape));
  const DataType y_type = OutputType(ctx, 7);
  if (y_type != DataType::kInt8 && y_type != DataType::kUInt8) return ctx.NotSupported("output type must be int8 / uint8");
  const int64_t M = g.out_channels, K = g.patch(), P = g.pixels();
  SPARQ_ASSIGN_OR_RETURN(const float x_scale, SingleFloat(ctx, 1, "x_scale"));
  SPARQ_ASSIGN_OR_RETURN(const std::vector<float> w_scale, HostFloats(ctx, 4, "w_scale"));
  SPARQ_ASSIGN_OR_RETURN(const float y_scale, SingleFloat(ctx, 6, "y_scale"));
  if (w_scale.size() != 1 && static_cast<int64_t>(w_scale.size()) != M) return ctx.InvalidArgument("w_scale must have 1 or M values");
  SPARQ_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, y_type, y_shape));
  if (y->numel() == 0) return Status::OK();
  SPARQ_ASSIGN_OR_RETURN(const SignedView x8, AsSigned(ctx, *cuda, x, "x"));
  SPARQ_ASSIGN_OR_RETURN(const SignedView w8, AsSigned(ctx, *cuda, w, "w"));
  SPARQ_ASSIGN_OR_RETURN(const std::vector<int32_t> zx, ZeroPoints(ctx, 2, x8.shifted, "x_zero_point"));
  SPARQ_ASSIGN_OR_RETURN(const std::vector<int32_t> zw, ZeroPoints(ctx, 5, w8.shifted, "w_zero_point"));
  if (zx.size() != 1) return ctx.NotSupported("x_zero_point per tensor only");
  if (zw.size() != 1 && static_cast<int64_t>(zw.size()) != M) return ctx.InvalidArgument("w_zero_point must have 1 or M values");
  SPARQ_ASSIGN_OR_RETURN(const int32_t y_zp, OutputZeroPoint(ctx, 7));
  const int32_t* bias = nullptr;
  if (ctx.has_input(8)) {
    SPARQ_RETURN_IF_ERROR(RequireDeviceInput(ctx, 8));
    if (ctx.input(8).dtype() != DataType::kInt32 || ctx.input(8).numel() != M) {
      return ctx.InvalidArgument("B must be int32 with one value per output channel");
    }
    bias = static_cast<const int32_t*>(ctx.input(8).raw_data());
  }
  std::shared_ptr<uint8_t> w_sum, zw_dev, mult_dev, col_sum;
  if (zx[0] != 0) {
    SPARQ_ASSIGN_OR_RETURN(w_sum, Scratch(*cuda, static_cast<size_t>(M) * sizeof(int32_t)));
    SPARQ_RETURN_IF_ERROR(LaunchRowSumsS8(w8.data, M, K, reinterpret_cast<int32_t*>(w_sum.get()), cuda->stream()));
  }
  if (zw.size() > 1) {
    SPARQ_ASSIGN_OR_RETURN(zw_dev, UploadVector(*cuda, zw));
  }
  SPARQ_ASSIGN_OR_RETURN(mult_dev, UploadMultipliers(*cuda, x_scale, w_scale, y_scale));
  if (AnyNonzero(zw)) {
    SPARQ_ASSIGN_OR_RETURN(col_sum, Scratch(*cuda, static_cast<size_t>(P) * sizeof(int32_t)));
  }
  SPARQ_ASSIGN_OR_RETURN(std::shared_ptr<uint8_t> col, Scratch(*cuda, static_cast<size_t>(P * K)));
  const int8_t* colp = reinterpret_cast<const int8_t*>(col.get());
  const size_t elem = 1;
  for (int64_t n = 0; n < g.batch; ++n) {
    SPARQ_RETURN_IF_ERROR(LaunchIm2Col(x8.data + n * x.dim(1) * g.height * g.width, col.get(), 1,
                                       static_cast<uint32_t>(static_cast<uint8_t>(static_cast<int8_t>(zx[0]))), g,
                                       cuda->stream()));
    RequantArgs r;
    r.rows = M;
    r.cols = P;
    r.k = static_cast<int32_t>(K);
    r.a_sum = reinterpret_cast<const int32_t*>(w_sum.get());  // needed when x's zero point is not 0
    if (col_sum != nullptr) {
      SPARQ_RETURN_IF_ERROR(LaunchRowSumsS8(colp, P, K, reinterpret_cast<int32_t*>(col_sum.get()), cuda->stream()));
      r.b_sum = reinterpret_cast<const int32_t*>(col_sum.get());
    }
    r.a_zp = reinterpret_cast<const int32_t*>(zw_dev.get());
    r.a_zp_scalar = zw[0];
    r.b_zp_scalar = zx[0];
    r.bias = bias;
    r.bias_per_row = true;
    r.multiplier = reinterpret_cast<const float*>(mult_dev.get());
    r.multiplier_per_row = w_scale.size() > 1;
    r.y_zp = y_zp;
    r.out_signed = y_type == DataType::kInt8;
    r.out = static_cast<uint8_t*>(y->raw_data()) + static_cast<size_t>(n * M * P) * elem;
    SPARQ_RETURN_IF_ERROR_WITH_CONTEXT(GemmS8Requantize(*cuda, w8.data, colp, K, r), ctx.node().Describe());
  }
  return Status::OK();
}

// QLinearConv with group = C and w [C, 1, kh, kw]: the own depthwise kernel.
Status CheckQLinearConvDepthwise(const Node& node, const std::vector<const Tensor*>& constants) {
  const int64_t group = node.attr_int("group", 1);
  if (group <= 1) return Status::NotSupported(node.Describe() + ": qlinear_conv_dw_s8_cuda takes depthwise convolutions only");
  if (constants.size() > 3 && constants[3] != nullptr) {
    const Shape& w = constants[3]->shape();
    if (w.size() != 4 || w[0] != group || w[1] != 1) {
      return Status::NotSupported(node.Describe() + ": qlinear_conv_dw_s8_cuda takes weights [C, 1, kh, kw] with group = C");
    }
  }
  return Status::OK();
}

Status QLinearConvDepthwiseS8(OpContext& ctx) {
  SPARQ_RETURN_IF_ERROR(ctx.RequireInputs(7));
  SPARQ_RETURN_IF_ERROR(RequireDeviceInput(ctx, 0));
  SPARQ_RETURN_IF_ERROR(RequireDeviceInput(ctx, 3));
  SPARQ_ASSIGN_OR_RETURN(CudaContext * cuda, CudaContextOf(ctx));
  const Tensor& x = ctx.input(0);
  const Tensor& w = ctx.input(3);
  const int64_t group = ctx.node().attr_int("group", 1);
  auto is_byte = [](DataType t) { return t == DataType::kUInt8 || t == DataType::kInt8; };
  if (x.rank() != 4 || w.rank() != 4 || group != x.dim(1) || w.dim(0) != group || w.dim(1) != 1 ||
      !is_byte(x.dtype()) || !is_byte(w.dtype())) {
    return ctx.NotSupported("qlinear_conv_dw_s8_cuda takes 8-bit x [N, C, H, W], w [C, 1, kh, kw] and group = C");
  }
  Shape y_shape;
  SPARQ_ASSIGN_OR_RETURN(Conv2dGeometry g, ConvGeometryOf(ctx, x, w, &y_shape));
  g.channels = x.dim(1);  // one channel per group: the kernel walks all C planes
  const DataType y_type = OutputType(ctx, 7);
  if (!is_byte(y_type)) return ctx.NotSupported("output type must be int8 / uint8");
  SPARQ_ASSIGN_OR_RETURN(const float x_scale, SingleFloat(ctx, 1, "x_scale"));
  SPARQ_ASSIGN_OR_RETURN(const std::vector<float> w_scale, HostFloats(ctx, 4, "w_scale"));
  SPARQ_ASSIGN_OR_RETURN(const float y_scale, SingleFloat(ctx, 6, "y_scale"));
  if (w_scale.size() != 1 && static_cast<int64_t>(w_scale.size()) != group) {
    return ctx.InvalidArgument("w_scale must have 1 or C values");
  }
  SPARQ_ASSIGN_OR_RETURN(const std::vector<int32_t> zx, ZeroPoints(ctx, 2, false, "x_zero_point"));
  SPARQ_ASSIGN_OR_RETURN(const std::vector<int32_t> zw, ZeroPoints(ctx, 5, false, "w_zero_point"));
  if (zx.size() != 1) return ctx.NotSupported("x_zero_point per tensor only");
  if (zw.size() != 1 && static_cast<int64_t>(zw.size()) != group) return ctx.InvalidArgument("w_zero_point must have 1 or C values");
  DepthwiseS8Args a;
  a.x = x.raw_data();
  a.x_signed = x.dtype() == DataType::kInt8;
  a.w = w.raw_data();
  a.w_signed = w.dtype() == DataType::kInt8;
  a.x_zp = zx[0];
  std::shared_ptr<uint8_t> zw_dev, mult_dev;
  if (zw.size() > 1) {
    SPARQ_ASSIGN_OR_RETURN(zw_dev, UploadVector(*cuda, zw));
    a.w_zp = reinterpret_cast<const int32_t*>(zw_dev.get());
  } else {
    a.w_zp_scalar = zw[0];
  }
  if (ctx.has_input(8)) {
    SPARQ_RETURN_IF_ERROR(RequireDeviceInput(ctx, 8));
    if (ctx.input(8).dtype() != DataType::kInt32 || ctx.input(8).numel() != group) {
      return ctx.InvalidArgument("B must be int32 with one value per channel");
    }
    a.bias = static_cast<const int32_t*>(ctx.input(8).raw_data());
  }
  SPARQ_ASSIGN_OR_RETURN(mult_dev, UploadMultipliers(*cuda, x_scale, w_scale, y_scale));
  a.multiplier = reinterpret_cast<const float*>(mult_dev.get());
  a.multiplier_per_channel = w_scale.size() > 1;
  SPARQ_ASSIGN_OR_RETURN(a.y_zp, OutputZeroPoint(ctx, 7));
  a.y_signed = y_type == DataType::kInt8;
  SPARQ_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, y_type, y_shape));
  return LaunchDepthwiseConvS8(a, y->raw_data(), g, cuda->stream());
}

// QLinearConvLut's prepare: a convolution one of the two INT8 conv rows takes.
Status CheckQLinearConvAny(const Node& node, const std::vector<const Tensor*>& constants) {
  if (CheckQLinearConv(node, constants).ok()) return Status::OK();
  return CheckQLinearConvDepthwise(node, constants);
}

// sparq.QLinearConvLut: QLinearConv's nine inputs, then input 9's 256-entry
// table applied to the result in place.
Status QLinearConvLutS8(OpContext& ctx) {
  if (ctx.num_inputs() != 10 || !ctx.has_input(9)) return ctx.InvalidArgument("expected 10 inputs, the last the table");
  SPARQ_RETURN_IF_ERROR(ctx.node().attr_int("group", 1) == 1 ? QLinearConvS8(ctx) : QLinearConvDepthwiseS8(ctx));
  SPARQ_ASSIGN_OR_RETURN(CudaContext * cuda, CudaContextOf(ctx));
  const Tensor& table = ctx.input(9);
  if (!table.device().is_host() || (table.dtype() != DataType::kUInt8 && table.dtype() != DataType::kInt8) ||
      table.numel() != 256) {
    return ctx.InvalidArgument("Table must hold 256 uint8 or int8 values on the host");
  }
  SPARQ_ASSIGN_OR_RETURN(std::shared_ptr<uint8_t> dev_table, Upload(*cuda, table.raw_data(), 256));
  const Tensor conv = ctx.outputs()[0];  // held until the lookup below has been queued
  SPARQ_ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, table.dtype(), conv.shape()));  // the table's type
  SPARQ_RETURN_IF_ERROR(LaunchLut256(conv.raw_data(), conv.dtype() == DataType::kInt8, dev_table.get(), y->raw_data(),
                                     conv.numel(), cuda->stream()));
  return Status::OK();
}

}  // namespace

std::string Int8GemmKernelName(const std::string& row_name, const CudaBackendOptions& options) {
  const std::string suffix = "_wmma";
  if (options.fused_int8_gemm || row_name.size() < suffix.size() ||
      row_name.compare(row_name.size() - suffix.size(), suffix.size(), suffix) != 0) {
    return row_name;
  }
  return row_name.substr(0, row_name.size() - suffix.size()) + "_cublaslt";
}

void RegisterCudaInt8Rows(KernelRegistry& r) {
  const uint32_t qlinear_params = HostInput(1) | HostInput(2) | HostInput(4) | HostInput(5) | HostInput(6) | HostInput(7);
  r.Add(CudaRow("QLinearMatMul", "", 10, WithHostFallback<QLinearMatMulS8>, "qlinear_matmul_s8_wmma", nullptr,
                qlinear_params));
  r.Add(CudaRow("QLinearConv", "", 10, WithHostFallback<QLinearConvS8>, "qlinear_conv_s8_wmma",
                CheckOnly(CheckQLinearConv), qlinear_params));
  r.Add(CudaRow("QLinearConv", "", 10, WithHostFallback<QLinearConvDepthwiseS8>, "qlinear_conv_dw_s8_cuda",
                CheckOnly(CheckQLinearConvDepthwise), qlinear_params, kCudaPrioritySpecial));
  r.Add(CudaRow("QLinearConvLut", kSparqDomain, 1, WithHostFallback<QLinearConvLutS8>, "qlinear_conv_lut_s8_cuda",
                CheckOnly(CheckQLinearConvAny), qlinear_params | HostInput(9)));
  r.Add(CudaRow("MatMulIntegerToFloat", kSparqDomain, 1, WithHostFallback<MatMulIntegerToFloatS8>, "matmul_s8_f32_wmma",
                CheckOnly(CheckMatMulIntegerToFloat), HostInput(2) | HostInput(3) | HostInput(4) | HostInput(5)));
}

}  // namespace cuda
}  // namespace sparq
