// Fast rows for the integer glue of QDQ models: per-tensor QuantizeLinear
// (float32 -> uint8/int8) and DequantizeLinear (uint8/int8 -> float32), the
// internal sparq.QLinearAdd and sparq.QLinearLut that runtime/passes/qdq_fusion.cc
// writes, and MaxPool (its kernel is in pool.cc). All are elementwise or per output, so
// they split the work over the thread pool with results independent of the
// thread count, and all are bit for bit their reference kernels (the AVX2
// rows: see qdq_glue_avx2.cc; the portable rows call the reference's own
// QuantizeValue / DequantizeValue). Each op row runs the row function of the
// dispatch table (kernels/cpu/dispatch.h: quantize_f32_s8, dequantize_s8_f32,
// qlinear_add_s8, lut256, maxpool2d) that its prepare step picks for the
// active ISA.
//
// Fast paths (else the reference kernel runs the node):
//   QuantizeLinear    x float32, y_scale float32 and y_zero_point uint8/int8, one value each
//   DequantizeLinear  x uint8/int8, x_scale float32 and x_zero_point of x's type, one value each
//   sparq.QLinearAdd, sparq.QLinearMul
//                     A, B and Y of one type (uint8 or int8), numpy broadcasting (the row runs over
//                     each contiguous run of the output; a repeated value is expanded into a
//                     small buffer); an optional table (input 8) is applied to each chunk as it is written
//   DynamicQuantizeLinear  x float32 (the range by the minmax_f32 row, then quantize_f32_s8 to uint8)
//   sparq.QLinearLut  always (X and the table are checked like the reference does)
//   sparq.ConcatLut   X_i uint8/int8, tables of 256 bytes, one type after the tables, shapes as Concat's
//   sparq.DequantizeConcat  X_i uint8/int8, per-tensor parameters of X_i's type, shapes as Concat's
//   MaxPool           float32/uint8/int8 x of rank 4, no Indices output
#include <algorithm>
#include <array>
#include <cstring>
#include <cstdint>
#include <limits>
#include <memory>
#include <vector>

#include "kernels/cpu/dispatch.h"
#include "kernels/cpu/internal.h"
#include "kernels/cpu/pool.h"
#include "kernels/parallel.h"
#include "kernels/ref/broadcast.h"
#include "kernels/ref/elementwise_util.h"
#include "kernels/ref/nn_common.h"
#include "kernels/ref/pool.h"
#include "kernels/ref/quantize.h"
#include "kernels/registry.h"

namespace sparq {

namespace cpu {

void QuantizeRowPortable(int64_t n, const float* x, float scale, int32_t zero_point, bool out_signed, void* y) {
  if (out_signed) {
    for (int64_t i = 0; i < n; ++i) static_cast<int8_t*>(y)[i] = QuantizeValue<int8_t>(x[i], scale, zero_point);
  } else {
    for (int64_t i = 0; i < n; ++i) static_cast<uint8_t*>(y)[i] = QuantizeValue<uint8_t>(x[i], scale, zero_point);
  }
}

void DequantizeRowPortable(int64_t n, const void* x, bool x_signed, float scale, int32_t zero_point, float* y) {
  const auto* in = static_cast<const uint8_t*>(x);
  for (int64_t i = 0; i < n; ++i) {
    const int32_t q = x_signed ? static_cast<int8_t>(in[i]) : in[i];
    y[i] = DequantizeValue(q, scale, zero_point);
  }
}

namespace {
template <bool kMul, typename T>
void QLinearBinaryRowOf(int64_t n, const T* a, float a_scale, int32_t a_zp, const T* b, float b_scale, int32_t b_zp,
                        float y_scale, int32_t y_zp, T* y) {
  for (int64_t i = 0; i < n; ++i) {
    const float x = DequantizeValue(a[i], a_scale, a_zp), z = DequantizeValue(b[i], b_scale, b_zp);
    y[i] = QuantizeValue<T>(kMul ? x * z : x + z, y_scale, y_zp);
  }
}

template <bool kMul>
void QLinearBinaryRow(int64_t n, const void* a, float a_scale, int32_t a_zp, const void* b, float b_scale,
                      int32_t b_zp, float y_scale, int32_t y_zp, bool is_signed, void* y) {
  if (is_signed) {
    QLinearBinaryRowOf<kMul>(n, static_cast<const int8_t*>(a), a_scale, a_zp, static_cast<const int8_t*>(b), b_scale,
                             b_zp, y_scale, y_zp, static_cast<int8_t*>(y));
  } else {
    QLinearBinaryRowOf<kMul>(n, static_cast<const uint8_t*>(a), a_scale, a_zp, static_cast<const uint8_t*>(b),
                             b_scale, b_zp, y_scale, y_zp, static_cast<uint8_t*>(y));
  }
}
}  // namespace

void QLinearAddRowPortable(int64_t n, const void* a, float a_scale, int32_t a_zp, const void* b, float b_scale,
                           int32_t b_zp, float y_scale, int32_t y_zp, bool is_signed, void* y) {
  QLinearBinaryRow<false>(n, a, a_scale, a_zp, b, b_scale, b_zp, y_scale, y_zp, is_signed, y);
}

void QLinearMulRowPortable(int64_t n, const void* a, float a_scale, int32_t a_zp, const void* b, float b_scale,
                           int32_t b_zp, float y_scale, int32_t y_zp, bool is_signed, void* y) {
  QLinearBinaryRow<true>(n, a, a_scale, a_zp, b, b_scale, b_zp, y_scale, y_zp, is_signed, y);
}

}  // namespace cpu

namespace {

constexpr int64_t kElementsPerTask = 16384;  // grain of the elementwise loops

bool IsByteType(DataType t) { return t == DataType::kUInt8 || t == DataType::kInt8; }

int32_t ByteScalar(const Tensor& t) {
  return t.dtype() == DataType::kUInt8 ? static_cast<int32_t>(t.data<uint8_t>()[0])
                                       : static_cast<int32_t>(t.data<int8_t>()[0]);
}

// The state of the QuantizeLinear, DequantizeLinear and QLinearLut rows: the
// dispatch table row they run, chosen for the active ISA when the executor
// prepares the node.
template <CpuOp kOp>
StatusOr<std::shared_ptr<const void>> PrepareRow(const Node&, const std::vector<const Tensor*>&) {
  return std::shared_ptr<const void>(&SelectCpuKernel(kOp), [](const void*) {});  // the table outlives executors
}
std::string RowKernel(const void* state) { return static_cast<const CpuKernelDef*>(state)->name; }
const CpuKernelDef& PreparedRow(const OpContext& ctx) { return *static_cast<const CpuKernelDef*>(ctx.prepared()); }

// The per-tensor scale and zero point of a QuantizeLinear / DequantizeLinear
// (inputs 1 and 2), when the node is inside the fast path.
struct PerTensor {
  float scale = 1.0f;
  int32_t zero_point = 0;
  DataType type = DataType::kUndefined;  // the zero point's, i.e. the quantized tensor's
};
bool ReadPerTensor(const OpContext& ctx, PerTensor* p) {
  if (!ctx.has_input(1) || !ctx.has_input(2)) return false;
  const Tensor& scale = ctx.input(1);
  const Tensor& zp = ctx.input(2);
  if (scale.dtype() != DataType::kFloat32 || scale.numel() != 1 || !IsByteType(zp.dtype()) || zp.numel() != 1)
    return false;
  if (ctx.node().attr_int("block_size", 0) != 0 || ctx.node().attr_int("output_dtype", 0) != 0) return false;
  p->scale = scale.data<float>()[0];
  p->zero_point = ByteScalar(zp);
  p->type = zp.dtype();
  return true;
}

// ---------------------------------------------------------------------------
// QuantizeLinear / DequantizeLinear

Status QuantizeLinearFast(OpContext& ctx) {
  PerTensor p;
  if (!ctx.has_input(0) || ctx.input(0).dtype() != DataType::kFloat32 || !ReadPerTensor(ctx, &p))
    return RunReferenceKernel(ctx);
  const Tensor& x = ctx.input(0);
  Tensor y(p.type, x.shape());
  const float* in = x.data<float>();
  auto* out = static_cast<uint8_t*>(y.raw_data());
  const bool out_signed = p.type == DataType::kInt8;
  const QuantizeF32Fn row = PreparedRow(ctx).get<QuantizeF32Fn>();
  ParallelFor(ctx.pool(), x.numel(), kElementsPerTask, [&](int64_t b, int64_t e) {
    row(e - b, in + b, p.scale, p.zero_point, out_signed, out + b);
  });
  ctx.set_output(0, std::move(y));
  return Status::OK();
}

Status DequantizeLinearFast(OpContext& ctx) {
  PerTensor p;
  if (!ctx.has_input(0) || !ReadPerTensor(ctx, &p) || ctx.input(0).dtype() != p.type) return RunReferenceKernel(ctx);
  const Tensor& x = ctx.input(0);
  Tensor y(DataType::kFloat32, x.shape());
  const auto* in = static_cast<const uint8_t*>(x.raw_data());
  float* out = y.data<float>();
  const bool in_signed = p.type == DataType::kInt8;
  const DequantizeS8Fn row = PreparedRow(ctx).get<DequantizeS8Fn>();
  ParallelFor(ctx.pool(), x.numel(), kElementsPerTask, [&](int64_t b, int64_t e) {
    row(e - b, in + b, in_signed, p.scale, p.zero_point, out + b);
  });
  ctx.set_output(0, std::move(y));
  return Status::OK();
}

// ---------------------------------------------------------------------------
// DynamicQuantizeLinear: the range of x in chunks (minmax_f32; min and max
// are exact, so the chunks' order does not matter), the reference's
// parameters from it, then the quantize_f32_s8 row (uint8).

struct DynamicQuant {
  const CpuKernelDef* minmax = nullptr;
  const CpuKernelDef* quantize = nullptr;
};

StatusOr<std::shared_ptr<const void>> PrepareDynamicQuant(const Node&, const std::vector<const Tensor*>&) {
  auto d = std::make_shared<DynamicQuant>();
  d->minmax = &SelectCpuKernel(CpuOp::kMinMaxF32);
  d->quantize = &SelectCpuKernel(CpuOp::kQuantizeF32);
  return std::shared_ptr<const void>(std::move(d));
}

// For `eval --verbose`: e.g. minmax_f32_avx512+quantize_f32_s8_avx2.
std::string DynamicQuantKernel(const void* state) {
  const auto& d = *static_cast<const DynamicQuant*>(state);
  return std::string(d.minmax->name) + "+" + d.quantize->name;
}

Status DynamicQuantizeLinearFast(OpContext& ctx) {
  if (!ctx.has_input(0) || ctx.input(0).dtype() != DataType::kFloat32) return RunReferenceKernel(ctx);
  const auto& d = *static_cast<const DynamicQuant*>(ctx.prepared());
  const Tensor& x = ctx.input(0);
  const float* in = x.data<float>();
  const int64_t n = x.numel();
  const int64_t chunks = (n + kElementsPerTask - 1) / kElementsPerTask;
  std::vector<float> lo(static_cast<size_t>(chunks), 0.0f), hi(static_cast<size_t>(chunks), 0.0f);
  const MinMaxF32Fn minmax = d.minmax->get<MinMaxF32Fn>();
  ParallelFor(ctx.pool(), chunks, 1, [&](int64_t c0, int64_t c1) {
    for (int64_t c = c0; c < c1; ++c) {
      const int64_t b = c * kElementsPerTask;
      minmax(in + b, std::min(kElementsPerTask, n - b), &lo[c], &hi[c]);
    }
  });
  float range_lo = 0.0f, range_hi = 0.0f;  // the range always holds 0
  MinMaxRef(lo.data(), chunks, &range_lo, &range_hi);
  MinMaxRef(hi.data(), chunks, &range_lo, &range_hi);
  const DynamicQuantParams params = DynamicQuantParamsFromRangeU8(range_lo, range_hi);
  Tensor y(DataType::kUInt8, x.shape());
  auto* out = static_cast<uint8_t*>(y.raw_data());
  const QuantizeF32Fn quantize = d.quantize->get<QuantizeF32Fn>();
  ParallelFor(ctx.pool(), n, kElementsPerTask, [&](int64_t b, int64_t e) {
    quantize(e - b, in + b, params.scale, params.zero_point, /*out_signed=*/false, out + b);
  });
  ctx.set_output(0, std::move(y));
  ctx.set_output(1, Tensor::Scalar<float>(params.scale));
  ctx.set_output(2, Tensor::Scalar<uint8_t>(static_cast<uint8_t>(params.zero_point)));
  return Status::OK();
}

// ---------------------------------------------------------------------------
// sparq.QLinearAdd and sparq.QLinearMul (the same code, another row)

struct QuantAdd {
  float a_scale = 1, b_scale = 1, y_scale = 1;
  int32_t a_zp = 0, b_zp = 0, y_zp = 0;
  DataType type = DataType::kUndefined;  // of A, B and the sum's quantized value
  std::vector<uint8_t> table;            // optional input 8: the output is table[sum - min(type)]
  DataType out_type = DataType::kUndefined;
  const CpuKernelDef* add = nullptr;  // the qlinear_add_s8 or qlinear_mul_s8 row
  const CpuKernelDef* lut = nullptr;  // the lut256 row
  QLinearAddS8Fn row = nullptr;       // add's function
};

StatusOr<std::shared_ptr<const void>> PrepareQuantAdd(const Node& node, const std::vector<const Tensor*>& constants) {
  auto constant = [&](size_t i) { return i < constants.size() ? constants[i] : nullptr; };
  for (size_t i : {1, 2, 4, 5, 6, 7}) {
    const Tensor* t = constant(i);
    if (t == nullptr || t->numel() != 1) return Status::NotSupported(node.Describe() + ": parameters not constant");
  }
  auto q = std::make_shared<QuantAdd>();
  if (node.op_type == "QLinearMul") {
    q->add = &SelectCpuKernel(CpuOp::kQLinearMulS8);
    q->row = q->add->get<QLinearMulS8Fn>();  // the same signature
  } else {
    q->add = &SelectCpuKernel(CpuOp::kQLinearAddS8);
    q->row = q->add->get<QLinearAddS8Fn>();
  }
  q->lut = &SelectCpuKernel(CpuOp::kLut256);
  q->type = constant(7)->dtype();
  for (size_t i : {1, 4, 6})
    if (constant(i)->dtype() != DataType::kFloat32) return Status::NotSupported(node.Describe() + ": scale type");
  for (size_t i : {2, 5})
    if (constant(i)->dtype() != q->type || !IsByteType(q->type))
      return Status::NotSupported(node.Describe() + ": zero points of different types");
  const Tensor *a_scale = constant(1), *b_scale = constant(4), *y_scale = constant(6);
  q->a_scale = a_scale->data<float>()[0], q->b_scale = b_scale->data<float>()[0];
  q->y_scale = y_scale->data<float>()[0];
  q->a_zp = ByteScalar(*constant(2)), q->b_zp = ByteScalar(*constant(5)), q->y_zp = ByteScalar(*constant(7));
  q->out_type = q->type;
  if (node.inputs.size() > 8 && !node.inputs[8].empty()) {
    const Tensor* table = constant(8);
    if (table == nullptr || table->numel() != 256 || !IsByteType(table->dtype()))
      return Status::NotSupported(node.Describe() + ": the table is not 256 constant bytes");
    const auto* bytes = static_cast<const uint8_t*>(table->raw_data());
    q->table.assign(bytes, bytes + 256);
    q->out_type = table->dtype();
  }
  return std::shared_ptr<const void>(std::move(q));
}

// For `eval --verbose`: e.g. qlinear_add_s8_avx2, qlinear_add_s8_avx2+lut256_avx512vbmi.
std::string QuantAddKernel(const void* state) {
  const auto& q = *static_cast<const QuantAdd*>(state);
  return q.table.empty() ? q.add->name : std::string(q.add->name) + "+" + q.lut->name;
}

Status QuantAddFast(OpContext& ctx) {
  const QuantAdd& q = *static_cast<const QuantAdd*>(ctx.prepared());
  if (!ctx.has_input(0) || !ctx.has_input(3)) return RunReferenceKernel(ctx);
  const Tensor& a = ctx.input(0);
  const Tensor& b = ctx.input(3);
  if (a.dtype() != q.type || b.dtype() != q.type) return RunReferenceKernel(ctx);
  const uint8_t flip = q.type == DataType::kInt8 ? 0x80 : 0;  // table index of an int8 sum: its byte ^ 0x80
  const auto* pa = static_cast<const uint8_t*>(a.raw_data());
  const auto* pb = static_cast<const uint8_t*>(b.raw_data());
  const bool is_signed = q.type == DataType::kInt8;
  const QLinearAddS8Fn add = q.row;
  const Lut256Fn apply_table = q.lut->get<Lut256Fn>();
  // y[0, n) = A[0, n) + B[0, n) (each walked with stride 1, or one value repeated: stride 0).
  auto add_run = [&](int64_t n, const uint8_t* x, int64_t x_stride, const uint8_t* z, int64_t z_stride, uint8_t* y) {
    uint8_t x_repeated[256], z_repeated[256];  // stride-0 operands, expanded for 256 values at a time
    const auto fill = static_cast<size_t>(std::min<int64_t>(256, n));
    if (x_stride == 0) std::memset(x_repeated, *x, fill);
    if (z_stride == 0) std::memset(z_repeated, *z, fill);
    for (int64_t s = 0; s < n; s += 256) {
      const int64_t len = std::min<int64_t>(256, n - s);
      const uint8_t* xs = x_stride == 0 ? x_repeated : x + s;
      const uint8_t* zs = z_stride == 0 ? z_repeated : z + s;
      add(len, xs, q.a_scale, q.a_zp, zs, q.b_scale, q.b_zp, q.y_scale, q.y_zp, is_signed, y + s);
    }
  };
  if (a.shape() == b.shape()) {
    Tensor y(q.out_type, a.shape());
    auto* py = static_cast<uint8_t*>(y.raw_data());
    ParallelFor(ctx.pool(), a.numel(), kElementsPerTask, [&](int64_t s, int64_t e) {
      add(e - s, pa + s, q.a_scale, q.a_zp, pb + s, q.b_scale, q.b_zp, q.y_scale, q.y_zp, is_signed, py + s);
      if (!q.table.empty()) apply_table(q.table.data(), flip, py + s, py + s, e - s);
    });
    ctx.set_output(0, std::move(y));
    return Status::OK();
  }
  // Broadcasting (a bias row, a residual of another shape, a scalar): runs of
  // the output along which each input walks contiguously or repeats one value.
  StatusOr<Shape> shape = BroadcastShapes({a.shape(), b.shape()});
  if (!shape.ok()) return RunReferenceKernel(ctx);  // the reference names the error
  Tensor y(q.out_type, *shape);
  auto* py = static_cast<uint8_t*>(y.raw_data());
  const auto plan = elementwise::MakeBroadcastPlan<2>(*shape, {&a.shape(), &b.shape()});
  if (plan.strides[0].back() > 1 || plan.strides[1].back() > 1) return RunReferenceKernel(ctx);
  elementwise::ForEachRun(ctx.pool(), plan,
                          [&](int64_t o, const std::array<int64_t, 2>& off, const std::array<int64_t, 2>& st,
                              int64_t n) {
                            if (n == 0) return;
                            add_run(n, pa + off[0], st[0], pb + off[1], st[1], py + o);
                            if (!q.table.empty()) apply_table(q.table.data(), flip, py + o, py + o, n);
                          });
  ctx.set_output(0, std::move(y));
  return Status::OK();
}

// ---------------------------------------------------------------------------
// sparq.QLinearLut: y = table[x - min(x's type)]; for int8 that index is the
// byte of x with its top bit flipped.

Status LutFast(OpContext& ctx) {
  if (!ctx.has_input(0) || !ctx.has_input(1)) return RunReferenceKernel(ctx);
  const Tensor& x = ctx.input(0);
  const Tensor& table = ctx.input(1);
  if (!IsByteType(x.dtype()) || !IsByteType(table.dtype()) || table.numel() != 256) return RunReferenceKernel(ctx);
  const uint8_t flip = x.dtype() == DataType::kInt8 ? 0x80 : 0;
  const auto* t = static_cast<const uint8_t*>(table.raw_data());
  const auto* in = static_cast<const uint8_t*>(x.raw_data());
  Tensor y(table.dtype(), x.shape());
  auto* out = static_cast<uint8_t*>(y.raw_data());
  const Lut256Fn apply = PreparedRow(ctx).get<Lut256Fn>();
  ParallelFor(ctx.pool(), x.numel(), kElementsPerTask,
              [&](int64_t b, int64_t e) { apply(t, flip, in + b, out + b, e - b); });
  ctx.set_output(0, std::move(y));
  return Status::OK();
}

// ---------------------------------------------------------------------------
// sparq.ConcatLut: Concat's block copies (tensor_copy.cc), each block of an
// input with a table mapped through it by the lut256 row as it is written.
// Every output byte is written by one task: the same bytes for every thread count.

Status ConcatLutFast(OpContext& ctx) {
  const size_t pairs = ctx.num_inputs() / 2;
  if (pairs == 0 || ctx.num_inputs() % 2 != 0 || ctx.node().attr("axis") == nullptr) return RunReferenceKernel(ctx);
  for (size_t i = 0; i < pairs; ++i) {
    if (!ctx.has_input(2 * i) || !IsByteType(ctx.input(2 * i).dtype())) return RunReferenceKernel(ctx);
    if (ctx.has_input(2 * i + 1) && (!IsByteType(ctx.input(2 * i + 1).dtype()) || ctx.input(2 * i + 1).numel() != 256))
      return RunReferenceKernel(ctx);
  }
  auto type_of = [&](size_t i) { return ctx.input(ctx.has_input(2 * i + 1) ? 2 * i + 1 : 2 * i).dtype(); };
  const Tensor& first = ctx.input(0);
  const int64_t rank = static_cast<int64_t>(first.rank());
  int64_t axis = ctx.node().attr_int("axis", 1);
  if (axis < 0) axis += rank;
  if (rank == 0 || axis < 0 || axis >= rank) return RunReferenceKernel(ctx);
  Shape out_shape = first.shape();
  out_shape[axis] = 0;
  for (size_t i = 0; i < pairs; ++i) {
    const Tensor& t = ctx.input(2 * i);
    bool same = type_of(i) == type_of(0) && static_cast<int64_t>(t.rank()) == rank;
    for (int64_t d = 0; same && d < rank; ++d) same = d == axis || t.dim(d) == first.dim(d);
    if (!same) return RunReferenceKernel(ctx);  // it names the mismatch
    out_shape[axis] += t.dim(axis);
  }
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= out_shape[d];
  for (int64_t d = axis + 1; d < rank; ++d) inner *= out_shape[d];
  Tensor y = ctx.OutputBuffer(0, type_of(0), out_shape);
  struct Piece {
    uint8_t* dst;
    const uint8_t* src;
    int64_t n;
    const uint8_t* table;  // nullptr: a copy
    uint8_t flip;
  };
  std::vector<Piece> pieces;
  auto* out = static_cast<uint8_t*>(y.raw_data());
  for (int64_t o = 0; o < outer; ++o) {
    for (size_t i = 0; i < pairs; ++i) {
      const Tensor& x = ctx.input(2 * i);
      const int64_t block = x.dim(axis) * inner;
      const auto* src = static_cast<const uint8_t*>(x.raw_data()) + o * block;
      const uint8_t* table = ctx.has_input(2 * i + 1) ? static_cast<const uint8_t*>(ctx.input(2 * i + 1).raw_data()) : nullptr;
      const uint8_t flip = x.dtype() == DataType::kInt8 ? 0x80 : 0;
      for (int64_t b = 0; b < block; b += kElementsPerTask)
        pieces.push_back({out + b, src + b, std::min(kElementsPerTask, block - b), table, flip});
      out += block;
    }
  }
  const Lut256Fn apply = PreparedRow(ctx).get<Lut256Fn>();
  ParallelFor(ctx.pool(), static_cast<int64_t>(pieces.size()), 1, [&](int64_t b, int64_t e) {
    for (int64_t t = b; t < e; ++t) {
      const Piece& p = pieces[t];
      if (p.table != nullptr) apply(p.table, p.flip, p.src, p.dst, p.n);
      else std::memcpy(p.dst, p.src, static_cast<size_t>(p.n));
    }
  });
  ctx.set_output(0, std::move(y));
  return Status::OK();
}

// ---------------------------------------------------------------------------
// sparq.DequantizeConcat: Concat's block copies, each block dequantized by the
// dequantize_s8_f32 row as it is written (one writer per value).

Status DequantizeConcatFast(OpContext& ctx) {
  const size_t n = ctx.num_inputs() / 3;
  if (n == 0 || ctx.num_inputs() % 3 != 0 || ctx.node().attr("axis") == nullptr) return RunReferenceKernel(ctx);
  std::vector<PerTensor> params(n);
  for (size_t i = 0; i < n; ++i) {
    for (size_t k = 0; k < 3; ++k)
      if (!ctx.has_input(3 * i + k)) return RunReferenceKernel(ctx);
    const Tensor& scale = ctx.input(3 * i + 1);
    const Tensor& zp = ctx.input(3 * i + 2);
    if (scale.dtype() != DataType::kFloat32 || scale.numel() != 1 || !IsByteType(zp.dtype()) || zp.numel() != 1 ||
        ctx.input(3 * i).dtype() != zp.dtype()) {
      return RunReferenceKernel(ctx);
    }
    params[i] = {scale.data<float>()[0], ByteScalar(zp), zp.dtype()};
  }
  const Tensor& first = ctx.input(0);
  const int64_t rank = static_cast<int64_t>(first.rank());
  int64_t axis = ctx.node().attr_int("axis", 1);
  if (axis < 0) axis += rank;
  if (rank == 0 || axis < 0 || axis >= rank) return RunReferenceKernel(ctx);
  Shape out_shape = first.shape();
  out_shape[axis] = 0;
  for (size_t i = 0; i < n; ++i) {
    const Tensor& t = ctx.input(3 * i);
    bool same = static_cast<int64_t>(t.rank()) == rank;
    for (int64_t d = 0; same && d < rank; ++d) same = d == axis || t.dim(d) == first.dim(d);
    if (!same) return RunReferenceKernel(ctx);  // it names the mismatch
    out_shape[axis] += t.dim(axis);
  }
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= out_shape[d];
  for (int64_t d = axis + 1; d < rank; ++d) inner *= out_shape[d];
  Tensor y = ctx.OutputBuffer(0, DataType::kFloat32, out_shape);
  struct Piece {
    float* dst;
    const uint8_t* src;
    int64_t n;
    size_t input;
  };
  std::vector<Piece> pieces;
  float* out = y.data<float>();
  for (int64_t o = 0; o < outer; ++o) {
    for (size_t i = 0; i < n; ++i) {
      const Tensor& x = ctx.input(3 * i);
      const int64_t block = x.dim(axis) * inner;
      const auto* src = static_cast<const uint8_t*>(x.raw_data()) + o * block;
      for (int64_t b = 0; b < block; b += kElementsPerTask)
        pieces.push_back({out + b, src + b, std::min(kElementsPerTask, block - b), i});
      out += block;
    }
  }
  const DequantizeS8Fn row = PreparedRow(ctx).get<DequantizeS8Fn>();
  ParallelFor(ctx.pool(), static_cast<int64_t>(pieces.size()), 1, [&](int64_t b, int64_t e) {
    for (int64_t t = b; t < e; ++t) {
      const Piece& p = pieces[t];
      const PerTensor& q = params[p.input];
      row(p.n, p.src, q.type == DataType::kInt8, q.scale, q.zero_point, p.dst);
    }
  });
  ctx.set_output(0, std::move(y));
  return Status::OK();
}

// ---------------------------------------------------------------------------
// MaxPool: the maxpool2d row of the dispatch table (kernels/cpu/pool.cc),
// float32, uint8 and int8.

StatusOr<std::shared_ptr<const void>> PrepareMaxPool(const Node& node, const std::vector<const Tensor*>& constants) {
  if (node.outputs.size() > 1 && !node.outputs[1].empty())
    return Status::NotSupported(node.Describe() + ": Indices output");
  return PrepareRow<CpuOp::kMaxPool2d>(node, constants);
}

Status MaxPoolFast(OpContext& ctx) { return RunMaxPool2d(ctx, PreparedRow(ctx).get<MaxPool2dFn>()); }

}  // namespace

void RegisterCpuQdqGlueOps(KernelRegistry& r) {
  r.Add({"QuantizeLinear", "", 10, 99, QuantizeLinearFast, "quantize_f32_s8",
         WithoutContext(PrepareRow<CpuOp::kQuantizeF32>, RowKernel)});
  r.Add({"DequantizeLinear", "", 10, 99, DequantizeLinearFast, "dequantize_s8_f32",
         WithoutContext(PrepareRow<CpuOp::kDequantizeS8>, RowKernel)});
  r.Add({"DynamicQuantizeLinear", "", 11, 99, DynamicQuantizeLinearFast, "minmax_f32+quantize_f32_s8",
         WithoutContext(PrepareDynamicQuant, DynamicQuantKernel)});
  r.Add({"QLinearAdd", kSparqDomain, 1, 1, QuantAddFast, "qlinear_add_s8", WithoutContext(PrepareQuantAdd, QuantAddKernel)});
  r.Add({"QLinearMul", kSparqDomain, 1, 1, QuantAddFast, "qlinear_mul_s8", WithoutContext(PrepareQuantAdd, QuantAddKernel)});
  r.Add({"QLinearLut", kSparqDomain, 1, 1, LutFast, "lut256", WithoutContext(PrepareRow<CpuOp::kLut256>, RowKernel)});
  r.Add({"ConcatLut", kSparqDomain, 1, 1, ConcatLutFast, "lut256", WithoutContext(PrepareRow<CpuOp::kLut256>, RowKernel)});
  r.Add({"DequantizeConcat", kSparqDomain, 1, 1, DequantizeConcatFast, "dequantize_s8_f32",
         WithoutContext(PrepareRow<CpuOp::kDequantizeS8>, RowKernel)});
  r.Add({"MaxPool", "", 1, 99, MaxPoolFast, "maxpool2d", WithoutContext(PrepareMaxPool, RowKernel)});
}

}  // namespace sparq
