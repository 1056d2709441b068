#include "kernels/cpu/quant_matmul.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "kernels/cpu/dispatch.h"
#include "kernels/parallel.h"
#include "kernels/ref/quant_util.h"
#include "kernels/ref/quantize.h"

namespace sparq {

namespace {

bool IsInt8Type(DataType t) { return t == DataType::kInt8 || t == DataType::kUInt8; }

// An int8 / uint8 tensor's values as int32.
std::vector<int32_t> Int8Values(const Tensor& t) {
  std::vector<int32_t> v(static_cast<size_t>(t.numel()));
  for (int64_t i = 0; i < t.numel(); ++i) {
    v[i] = t.dtype() == DataType::kInt8 ? int32_t{t.data<int8_t>()[i]} : int32_t{t.data<uint8_t>()[i]};
  }
  return v;
}

// One value per column of B: shape [N] or [1, N] (one value is per-tensor,
// not this; an empty parameter is an error the reference reports).
bool IsPerColumn(const Tensor& t, int64_t n) {
  return n > 0 && ((t.rank() == 1 && t.dim(0) == n) || (t.rank() == 2 && t.dim(0) == 1 && t.dim(1) == n));
}

Status NotFast(const OpContext& ctx, const std::string& why) { return ctx.NotSupported("gemm_s8 fast path: " + why); }

// Checks B and A against the packed weights and describes the GEMM:
// A [..., M, K] -> rows = prod(...) * M, Y [..., M, N] (A 1-D: [K] -> [N]).
struct MatMulGeometry {
  Shape out_shape;
  int64_t rows = 0;  // all rows of A, batches included
  int64_t m = 0;     // rows per batch (the last but one dimension of A; 1 for 1-D A)
};

StatusOr<MatMulGeometry> Geometry(const OpContext& ctx, const Tensor& a, const Tensor& b, const QuantMatMulWeights& w) {
  if (b.dtype() != w.b_type || b.shape() != Shape{w.k, w.n}) {
    return ctx.InvalidArgument("packed weights are for B " + std::string(DataTypeName(w.b_type)) + " " +
                               ShapeToString({w.k, w.n}) + ", got B " + DataTypeName(b.dtype()) + " " +
                               ShapeToString(b.shape()));
  }
  if (!IsInt8Type(a.dtype())) return NotFast(ctx, "A has type " + std::string(DataTypeName(a.dtype())));
  if (a.rank() == 0 || a.shape().back() != w.k) {
    return NotFast(ctx, "A " + ShapeToString(a.shape()) + " does not end in K = " + std::to_string(w.k));
  }
  MatMulGeometry g;
  g.out_shape.assign(a.shape().begin(), a.shape().end() - 1);
  g.out_shape.push_back(w.n);
  g.rows = 1;
  for (size_t d = 0; d + 1 < a.rank(); ++d) g.rows *= a.dim(d);
  g.m = a.rank() >= 2 ? a.dim(a.rank() - 2) : 1;
  return g;
}

// Runs gemm_s8 over all rows of A: one call with a per-tensor a zero point,
// one per batch with a per-row one (a_zp_values has M entries then).
Status RunRows(const OpContext& ctx, const Tensor& a, const QuantMatMulWeights& w, const MatMulGeometry& g,
               const std::vector<int32_t>& a_zp_values, const S8Epilogue& out, int64_t out_elem_bytes) {
  const bool per_row = a_zp_values.size() > 1;
  if (w.sparse.sparse()) {  // one call over all rows: Y [rows, N] = (A - a_zp) * W^T
    if (per_row) return NotFast(ctx, "a per-row a_zero_point on sparse weights");
    Status st = RunSparseS8(w.sparse, SpmmLayout::kRowMajor, g.rows, a.raw_data(), a.dtype() == DataType::kInt8, w.k,
                            a_zp_values.empty() ? 0 : a_zp_values[0], out, ctx.pool());
    return st.ok() ? st : ctx.Error(st.code(), st.message());
  }
  const int64_t calls = per_row ? (g.m == 0 ? 0 : g.rows / g.m) : 1;
  const int64_t rows_per_call = per_row ? g.m : g.rows;
  for (int64_t c = 0; c < calls; ++c) {
    GemmS8Args args;
    args.m = rows_per_call;
    args.a = static_cast<const int8_t*>(a.raw_data()) + c * rows_per_call * w.k;  // 1-byte elements
    args.a_signed = a.dtype() == DataType::kInt8;
    args.lda = w.k;
    args.a_zp = GemmZeroPoints{a_zp_values.empty() ? nullptr : a_zp_values.data(), per_row};
    args.b = &w.packed;
    args.out = out;
    const int64_t offset = c * rows_per_call * w.n;
    if (out.out_s32 != nullptr) args.out.out_s32 = out.out_s32 + offset;
    if (out.out_f32 != nullptr) args.out.out_f32 = out.out_f32 + offset;
    if (out.out_q != nullptr) args.out.out_q = static_cast<char*>(out.out_q) + offset * out_elem_bytes;
    args.pool = ctx.pool();
    Status st = RunGemmS8(args);
    if (!st.ok()) return ctx.Error(st.code(), st.message());
  }
  return Status::OK();
}

// A float32 scale with one value, or (per_column) one value per column of B.
bool ScaleFits(const Tensor& t, int64_t n, bool per_column_allowed) {
  if (t.dtype() != DataType::kFloat32) return false;
  return t.numel() == 1 || (per_column_allowed && IsPerColumn(t, n));
}

}  // namespace

StatusOr<QuantMatMulWeights> PackQuantMatMulWeights(const Tensor& b, const Tensor* b_zero_point,
                                                    const KernelSpeedTable* kernel_table) {
  if (!IsInt8Type(b.dtype())) {
    return Status::NotSupported("gemm_s8 fast path: B has type " + std::string(DataTypeName(b.dtype())));
  }
  if (b.rank() != 2) {
    return Status::NotSupported("gemm_s8 fast path: B " + ShapeToString(b.shape()) + " is not 2-D");
  }
  QuantMatMulWeights w;
  w.k = b.dim(0);
  w.n = b.dim(1);
  w.b_type = b.dtype();
  std::vector<int32_t> zp;
  bool per_column = false;
  if (b_zero_point != nullptr) {
    if (b_zero_point->dtype() != b.dtype() || (b_zero_point->numel() != 1 && !IsPerColumn(*b_zero_point, w.n))) {
      return Status::NotSupported("gemm_s8 fast path: b_zero_point " + ShapeToString(b_zero_point->shape()) + " " +
                                  DataTypeName(b_zero_point->dtype()) + " is not one value or one per column of B");
    }
    zp = Int8Values(*b_zero_point);
    per_column = zp.size() > 1;
  }
  const GemmZeroPoints w_zp{zp.empty() ? nullptr : zp.data(), per_column};
  const PackedFormat format = PreferredGemmS8Format(ActiveIsa());
  // gemm_s8 wants W = B^T [N, K], one row per output column.
  auto pack = [&](auto tag) -> Status {
    using T = decltype(tag);
    const T* src = b.data<T>();
    std::vector<T> wt(static_cast<size_t>(w.n * w.k));
    for (int64_t kk = 0; kk < w.k; ++kk)
      for (int64_t nn = 0; nn < w.n; ++nn) wt[nn * w.k + kk] = src[kk * w.n + nn];
    if constexpr (std::is_same<T, int8_t>::value) {
      const bool symmetric = std::all_of(zp.begin(), zp.end(), [](int32_t z) { return z == 0; });
      if (kernel_table != nullptr && symmetric) {
        SPARQ_ASSIGN_OR_RETURN(w.sparse, ChooseSparseS8(wt.data(), w.n, w.k, *kernel_table));
        if (w.sparse.sparse()) return Status::OK();
      }
    }
    SPARQ_ASSIGN_OR_RETURN(w.packed, PackGemmS8<T>(wt.data(), w.n, w.k, w_zp, format));
    return Status::OK();
  };
  SPARQ_RETURN_IF_ERROR(b.dtype() == DataType::kInt8 ? pack(int8_t{}) : pack(uint8_t{}));
  return w;
}

Status MatMulIntegerPacked(OpContext& ctx, const QuantMatMulWeights& w) {
  if (!ctx.has_input(0) || !ctx.has_input(1)) return NotFast(ctx, "A or B is missing");
  const Tensor& a = ctx.input(0);
  SPARQ_ASSIGN_OR_RETURN(const MatMulGeometry g, Geometry(ctx, a, ctx.input(1), w));
  std::vector<int32_t> a_zp;
  if (ctx.has_input(2)) {
    const Tensor& z = ctx.input(2);
    const bool per_row = a.rank() >= 2 && z.rank() == 1 && z.dim(0) == g.m && g.m > 0;
    if (z.dtype() != a.dtype() || (z.numel() != 1 && !per_row)) {
      return NotFast(ctx, "a_zero_point " + ShapeToString(z.shape()) + " is not one value or one per row of A");
    }
    a_zp = Int8Values(z);
  }
  Tensor y(DataType::kInt32, g.out_shape);
  S8Epilogue out;
  out.out_s32 = y.data<int32_t>();
  out.ld_s32 = w.n;
  SPARQ_RETURN_IF_ERROR(RunRows(ctx, a, w, g, a_zp, out, 0));
  ctx.set_output(0, std::move(y));
  return Status::OK();
}

// The GELU a MatMulIntegerToFloat node carries (runtime/passes/float_fusion.h) on
// the active ISA's gelu_erf_chain_f32 row, or false; params: divisor,
// offset, scale.
bool FusedGelu(const Node& node, float params[3]) {
  if (node.attr_string("activation", "") != "GeluErfChain") return false;
  params[0] = node.attr_float("gelu_divisor", 1.41421356f);
  params[1] = node.attr_float("gelu_offset", 1.0f);
  params[2] = node.attr_float("gelu_scale", 0.5f);
  return true;
}

// MatMulIntegerToFloat with the dequantization in the GEMM's epilogue (no
// int32 tensor): dense weights, one a_zero_point, float32 scales (A_scale one
// value, B_scale one or one per column) and bias [N]. NotSupported outside
// that; MatMulIntegerToFloatFromAcc then names any error.
Status MatMulIntegerToFloatPacked(OpContext& ctx, const QuantMatMulWeights& w) {
  if (w.sparse.sparse()) return NotFast(ctx, "sparse weights");
  const Tensor& a = ctx.input(0);
  SPARQ_ASSIGN_OR_RETURN(const MatMulGeometry g, Geometry(ctx, a, ctx.input(1), w));
  std::vector<int32_t> a_zp;
  if (ctx.has_input(2)) {
    const Tensor& z = ctx.input(2);
    if (z.dtype() != a.dtype() || z.numel() != 1) return NotFast(ctx, "a_zero_point is not one value of A's type");
    a_zp = Int8Values(z);
  }
  const Tensor& a_scale = ctx.input(4);
  const Tensor& b_scale = ctx.input(5);
  if (!ScaleFits(a_scale, w.n, false) || !ScaleFits(b_scale, w.n, true)) {
    return NotFast(ctx, "scales must be float32, A_scale one value, B_scale one or one per column");
  }
  const Tensor* bias = ctx.has_input(6) ? &ctx.input(6) : nullptr;
  if (bias != nullptr && (bias->dtype() != DataType::kFloat32 || bias->rank() != 1 || bias->dim(0) != w.n)) {
    return NotFast(ctx, "bias is not float32 [N]");
  }
  // The reference's per-column scale: A_scale * B_scale[n], rounded to float.
  std::vector<float> scale(static_cast<size_t>(w.n));
  const float sa = a_scale.data<float>()[0];
  for (int64_t c = 0; c < w.n; ++c) scale[c] = sa * b_scale.data<float>()[b_scale.numel() == 1 ? 0 : c];
  Tensor y = ctx.OutputBuffer(0, DataType::kFloat32, g.out_shape);
  S8Epilogue out;
  out.out_f32 = y.data<float>();
  out.ld_f32 = w.n;
  out.f32_scale = scale.data();
  out.f32_bias = bias != nullptr ? bias->data<float>() : nullptr;
  if (FusedGelu(ctx.node(), out.f32_post_params)) out.f32_post = SelectCpuKernel(CpuOp::kGeluErfChainF32).get<GeluErfChainF32Fn>();
  SPARQ_RETURN_IF_ERROR(RunRows(ctx, a, w, g, a_zp, out, 0));
  ctx.set_output(0, std::move(y));
  return Status::OK();
}

Status QLinearMatMulPacked(OpContext& ctx, const QuantMatMulWeights& w) {
  for (size_t i = 0; i < 7; ++i) {
    if (!ctx.has_input(i)) return NotFast(ctx, "input " + std::to_string(i) + " is missing");
  }
  const Tensor& a = ctx.input(0);
  SPARQ_ASSIGN_OR_RETURN(const MatMulGeometry g, Geometry(ctx, a, ctx.input(3), w));
  const Tensor& a_scale = ctx.input(1);
  const Tensor& a_zp = ctx.input(2);
  const Tensor& b_scale = ctx.input(4);
  const Tensor& y_scale = ctx.input(6);
  if (!ScaleFits(a_scale, w.n, false) || !ScaleFits(b_scale, w.n, true) || !ScaleFits(y_scale, w.n, false)) {
    return NotFast(ctx, "scales must be float32, a_scale and y_scale one value, b_scale one or one per column");
  }
  if (a_zp.dtype() != a.dtype() || a_zp.numel() != 1) return NotFast(ctx, "a_zero_point is not one value of A's type");
  if (ctx.has_input(5) && ctx.input(5).numel() != b_scale.numel()) {
    return NotFast(ctx, "b_zero_point and b_scale differ in size");
  }
  DataType y_type = a.dtype();
  int32_t y_zp = 0;
  if (ctx.has_input(7)) {
    const Tensor& z = ctx.input(7);
    if (!IsInt8Type(z.dtype()) || z.numel() != 1) return NotFast(ctx, "y_zero_point is not one int8/uint8 value");
    y_type = z.dtype();
    y_zp = Int8Values(z)[0];
  }
  // The reference's multiplier: (a_scale * b_scale[n]) / y_scale, per column when b_scale is.
  const float sa = a_scale.data<float>()[0], sy = y_scale.data<float>()[0];
  std::vector<float> multiplier(static_cast<size_t>(b_scale.numel()));
  for (int64_t n = 0; n < b_scale.numel(); ++n) multiplier[n] = RequantMultiplier(sa, b_scale.data<float>()[n], sy);

  Tensor y(y_type, g.out_shape);
  S8Epilogue out;
  out.out_q = y.raw_data();
  out.out_q_signed = y_type == DataType::kInt8;
  out.ld_q = w.n;
  out.multiplier = multiplier.data();
  out.multiplier_per_channel = multiplier.size() > 1;
  out.zero_point = y_zp;
  SPARQ_RETURN_IF_ERROR(RunRows(ctx, a, w, g, Int8Values(a_zp), out, 1));
  ctx.set_output(0, std::move(y));
  return Status::OK();
}

// Executor integration. KernelFn has no per-node state, so the "gemm_s8"
// rows below pack B on every call. With a prepare step the executor would,
// once per node at Executor::Create, call PrepareQuantMatMul with the node's
// constant inputs and keep the result; each run then calls
// RunPreparedQuantMatMul with it (falling back to the reference per run
// when, e.g., A's zero point is per row).

StatusOr<std::shared_ptr<const QuantMatMulWeights>> PrepareQuantMatMul(const Node& node,
                                                                       const std::vector<const Tensor*>& constants,
                                                                       const KernelSpeedTable* kernel_table) {
  const bool qlinear = node.op_type == "QLinearMatMul";
  if (!qlinear && node.op_type != "MatMulInteger" && node.op_type != "MatMulIntegerToFloat") {
    return Status::NotSupported(node.Describe() + ": not MatMulInteger, MatMulIntegerToFloat or QLinearMatMul");
  }
  const size_t b_in = qlinear ? 3 : 1, zp_in = qlinear ? 5 : 3;
  auto constant = [&](size_t i) { return i < constants.size() ? constants[i] : nullptr; };
  const bool zp_named = zp_in < node.inputs.size() && !node.inputs[zp_in].empty();
  if (constant(b_in) == nullptr || (zp_named && constant(zp_in) == nullptr)) {
    return Status::NotSupported(node.Describe() + ": B or b_zero_point is not a constant");
  }
  StatusOr<QuantMatMulWeights> w =
      PackQuantMatMulWeights(*constant(b_in), zp_named ? constant(zp_in) : nullptr, kernel_table);
  if (!w.ok()) return w.status().WithContext(node.Describe());
  return std::shared_ptr<const QuantMatMulWeights>(std::make_shared<QuantMatMulWeights>(std::move(*w)));
}

Status RunPreparedQuantMatMul(OpContext& ctx, const QuantMatMulWeights& w) {
  if (ctx.node().op_type == "MatMulIntegerToFloat") {
    SPARQ_RETURN_IF_ERROR(ctx.RequireInputs(6));
    Status st = MatMulIntegerToFloatPacked(ctx, w);
    if (st.code() != StatusCode::kNotSupported) return st;
    // Otherwise MatMulInteger on the first four inputs, then the reference epilogue.
    st = MatMulIntegerPacked(ctx, w);
    if (st.code() == StatusCode::kNotSupported) return RunReferenceKernel(ctx);
    SPARQ_RETURN_IF_ERROR(st);
    Tensor y;
    SPARQ_RETURN_IF_ERROR(MatMulIntegerToFloatFromAcc(ctx, ctx.outputs()[0], ctx.input(4), ctx.input(5),
                                                      ctx.has_input(6) ? &ctx.input(6) : nullptr, &y));
    if (float p[3]; FusedGelu(ctx.node(), p)) {
      const GeluErfChainF32Fn gelu = SelectCpuKernel(CpuOp::kGeluErfChainF32).get<GeluErfChainF32Fn>();
      gelu(y.data<float>(), y.data<float>(), y.numel(), p[0], p[1], p[2]);
    }
    ctx.set_output(0, std::move(y));
    return Status::OK();
  }
  const Status st = ctx.node().op_type == "QLinearMatMul" ? QLinearMatMulPacked(ctx, w) : MatMulIntegerPacked(ctx, w);
  if (st.code() == StatusCode::kNotSupported) return RunReferenceKernel(ctx);
  return st;
}

std::string QuantMatMulWeights::KernelName() const {
  if (sparse.sparse()) return sparse.kernel;
  const CpuKernelDef* def = SelectCpuKernel(CpuOp::kGemmS8, packed.format);
  return def != nullptr ? def->name : "gemm_s8";
}

namespace {

// Packs B (input b_in, zero point input zp_in) and runs `packed`; the
// reference kernel when any part is outside the fast path.
Status PackAndRun(OpContext& ctx, size_t b_in, size_t zp_in, Status (*packed)(OpContext&, const QuantMatMulWeights&)) {
  if (!ctx.has_input(b_in)) return RunReferenceKernel(ctx);
  StatusOr<QuantMatMulWeights> w =
      PackQuantMatMulWeights(ctx.input(b_in), ctx.has_input(zp_in) ? &ctx.input(zp_in) : nullptr);
  if (!w.ok()) return RunReferenceKernel(ctx);
  Status st = packed(ctx, *w);
  if (st.code() == StatusCode::kNotSupported) return RunReferenceKernel(ctx);
  return st;
}

// A [..., M, K] x B [..., K, N], the same batch dimensions (attention's
// activation x activation products, onnxruntime's QDQ placement of them):
// each batch's B packed and multiplied on one thread, batches spread over
// the pool; the reference kernel for anything else (broadcast batches, 1-D).
Status QLinearMatMulBatched(OpContext& ctx) {
  for (size_t i = 0; i < 8; ++i)
    if (!ctx.has_input(i)) return RunReferenceKernel(ctx);
  const Tensor& a = ctx.input(0);
  const Tensor& b = ctx.input(3);
  const size_t rank = a.rank();
  if (rank < 3 || b.rank() != rank || !IsInt8Type(a.dtype()) || !IsInt8Type(b.dtype()) ||
      !IsInt8Type(ctx.input(7).dtype()) || a.dim(rank - 1) != b.dim(rank - 2)) {
    return RunReferenceKernel(ctx);
  }
  for (size_t d = 0; d + 2 < rank; ++d)
    if (a.dim(d) != b.dim(d)) return RunReferenceKernel(ctx);
  const int64_t m = a.dim(rank - 2), k = a.dim(rank - 1), n = b.dim(rank - 1);
  int64_t batches = 1;
  for (size_t d = 0; d + 2 < rank; ++d) batches *= a.dim(d);
  if (batches == 0 || m == 0 || k == 0 || n == 0) return RunReferenceKernel(ctx);
  Shape out_shape = a.shape();
  out_shape.back() = n;
  Tensor y(ctx.input(7).dtype(), out_shape);
  std::vector<Status> status(static_cast<size_t>(batches));
  ParallelFor(ctx.pool(), batches, 1, [&](int64_t b0, int64_t b1) {
    for (int64_t i = b0; i < b1; ++i) {
      Tensor a_i(a.dtype(), {m, k}), b_i(b.dtype(), {k, n});
      std::memcpy(a_i.raw_data(), static_cast<const uint8_t*>(a.raw_data()) + i * m * k, static_cast<size_t>(m * k));
      std::memcpy(b_i.raw_data(), static_cast<const uint8_t*>(b.raw_data()) + i * k * n, static_cast<size_t>(k * n));
      StatusOr<QuantMatMulWeights> w = PackQuantMatMulWeights(b_i, &ctx.input(5));
      if (!w.ok()) {
        status[i] = w.status();
        continue;
      }
      OpContext one(ctx.node(), ctx.opset(),
                    {&a_i, &ctx.input(1), &ctx.input(2), &b_i, &ctx.input(4), &ctx.input(5), &ctx.input(6),
                     &ctx.input(7)},
                    nullptr);
      status[i] = QLinearMatMulPacked(one, *w);
      if (status[i].ok()) {
        std::memcpy(static_cast<uint8_t*>(y.raw_data()) + i * m * n, one.outputs()[0].raw_data(),
                    static_cast<size_t>(m * n));
      }
    }
  });
  for (const Status& st : status) {
    if (st.code() == StatusCode::kNotSupported) return RunReferenceKernel(ctx);
    SPARQ_RETURN_IF_ERROR(st);
  }
  ctx.set_output(0, std::move(y));
  return Status::OK();
}

}  // namespace

Status MatMulIntegerCpu(OpContext& ctx) { return PackAndRun(ctx, 1, 3, MatMulIntegerPacked); }
Status QLinearMatMulCpu(OpContext& ctx) {
  if (ctx.has_input(3) && ctx.input(3).rank() > 2) return QLinearMatMulBatched(ctx);
  return PackAndRun(ctx, 3, 5, QLinearMatMulPacked);
}

void RegisterPreparedCpuQuantOps(KernelRegistry& r) {
  PrepareFn prepare = [](const Node& node, const std::vector<const Tensor*>& constants,
                         const PrepareContext& context) -> StatusOr<PreparedKernel> {
    SPARQ_ASSIGN_OR_RETURN(std::shared_ptr<const QuantMatMulWeights> w,
                           PrepareQuantMatMul(node, constants, context.kernel_table));
    std::string name = w->KernelName();
    if (float p[3]; FusedGelu(node, p)) name += std::string("+") + SelectCpuKernel(CpuOp::kGeluErfChainF32).name;
    return PreparedKernel{std::shared_ptr<const void>(std::move(w)), name};
  };
  KernelFn run = [](OpContext& ctx) -> Status {
    return RunPreparedQuantMatMul(ctx, *static_cast<const QuantMatMulWeights*>(ctx.prepared()));
  };
  r.Add({"MatMulInteger", "", 10, 99, run, "gemm_s8", prepare});
  r.Add({"QLinearMatMul", "", 10, 99, run, "gemm_s8", prepare, kPrioritySecond});
  r.Add({"MatMulIntegerToFloat", kSparqDomain, 1, 1, run, "gemm_s8", prepare});
  // QLinearMatMul whose B is not a constant (two activations, as the QDQ
  // fusion writes attention's products): B packed per call (per batch).
  PrepareFn activations = [](const Node&, const std::vector<const Tensor*>&,
                             const PrepareContext&) -> StatusOr<PreparedKernel> {
    const CpuKernelDef* gemm = SelectCpuKernel(CpuOp::kGemmS8, PreferredGemmS8Format(ActiveIsa()));
    return PreparedKernel{nullptr, gemm != nullptr ? gemm->name : "gemm_s8"};
  };
  r.Add({"QLinearMatMul", "", 10, 99, QLinearMatMulCpu, "gemm_s8", activations});
}

void RegisterCpuQuantOps(KernelRegistry& r) {
  r.Add({"MatMulInteger", "", 10, 99, MatMulIntegerCpu, "gemm_s8"});
  r.Add({"QLinearMatMul", "", 10, 99, QLinearMatMulCpu, "gemm_s8"});
}

}  // namespace sparq
