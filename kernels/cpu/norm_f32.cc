// Float32 BatchNormalization (inference) and LayerNormalization on the
// scale_shift_f32 and layer_norm_f32 rows (norm_f32.h), and their registry
// rows. Anything outside these paths (training mode, per-element
// parameters, requested statistics outputs, other types) runs the reference
// kernel, which also names every error.
#include "kernels/cpu/norm_f32.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "kernels/cpu/dispatch.h"
#include "kernels/cpu/row_op.h"
#include "kernels/registry.h"

namespace sparq {
namespace cpu {

// y may be x itself (the memory plan writes BatchNormalization over its
// input): element i is read before it is written, so the loop vectorizes
// without the compiler's overlap check, which ran y == x scalar.
void ScaleShiftRowPortable(const float* x, float* y, int64_t n, float a, float b) {
#if defined(__clang__)
#pragma clang loop vectorize(assume_safety)
#elif defined(__GNUC__)
#pragma GCC ivdep
#endif
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] * a + b;
}

namespace {

// One group of kRows rows (or fewer), the reference's arithmetic per row; the
// rows' in-order sums interleave, so each add waits only for its own row's
// previous one.
template <int kRows>
void LayerNormGroup(const float* x, int64_t n, const double* scale, const double* bias, double epsilon, float* y) {
  double s[kRows] = {}, q[kRows] = {}, m[kRows], inv[kRows];
  for (int64_t i = 0; i < n; ++i)
    for (int j = 0; j < kRows; ++j) s[j] += static_cast<double>(x[j * n + i]);
  for (int j = 0; j < kRows; ++j) m[j] = s[j] / static_cast<double>(n);
  for (int64_t i = 0; i < n; ++i) {
    for (int j = 0; j < kRows; ++j) {
      const double d = static_cast<double>(x[j * n + i]) - m[j];
      q[j] += d * d;
    }
  }
  for (int j = 0; j < kRows; ++j) inv[j] = 1.0 / std::sqrt(q[j] / static_cast<double>(n) + epsilon);
  for (int j = 0; j < kRows; ++j) {
    const float* src = x + j * n;
    float* dst = y + j * n;
    for (int64_t i = 0; i < n; ++i)
      dst[i] = static_cast<float>((static_cast<double>(src[i]) - m[j]) * inv[j] * scale[i] + bias[i]);
  }
}

}  // namespace

// Each step the unfused node's float operation (the mean and the mean of
// squares summed in order in double and rounded as ReduceMean rounds them),
// kRows rows' sums interleaved.
void LayerNormChainRowsPortable(const float* x, int64_t rows, int64_t n, float eps, const float* gamma,
                                const float* beta, float* y) {
  constexpr int64_t kRows = 8;  // independent in-order sums in flight
  thread_local std::vector<float> squares;
  if (squares.size() < static_cast<size_t>(kRows * n)) squares.resize(static_cast<size_t>(kRows * n));
  float* sq = squares.data();
  for (int64_t r = 0; r < rows; r += kRows) {
    const int64_t k = std::min(kRows, rows - r);
    const float* xr = x + r * n;
    float* yr = y + r * n;
    double s[kRows] = {}, q[kRows] = {};
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < k; ++j) s[j] += static_cast<double>(xr[j * n + i]);
    for (int64_t j = 0; j < k; ++j) {  // per row, so that the loops vectorize
      const float mean = static_cast<float>(s[j] / static_cast<double>(n));
      const float* x_row = xr + j * n;
      float* d = yr + j * n;
      float* d2 = sq + j * n;
      for (int64_t i = 0; i < n; ++i) d[i] = x_row[i] - mean;  // Sub
      for (int64_t i = 0; i < n; ++i) d2[i] = d[i] * d[i];     // Pow(d, 2)
    }
    for (int64_t i = 0; i < n; ++i)  // ReduceMean's in-order sums
      for (int64_t j = 0; j < k; ++j) q[j] += static_cast<double>(sq[j * n + i]);
    for (int64_t j = 0; j < k; ++j) {
      const float sd = std::sqrt(static_cast<float>(q[j] / static_cast<double>(n)) + eps);  // Add, Sqrt
      float* yj = yr + j * n;
      for (int64_t i = 0; i < n; ++i) yj[i] = (yj[i] / sd) * gamma[i];  // Div, Mul
      if (beta != nullptr)
        for (int64_t i = 0; i < n; ++i) yj[i] = yj[i] + beta[i];  // Add
    }
  }
}

void LayerNormRowsPortable(const float* x, int64_t rows, int64_t n, const double* scale, const double* bias,
                           double epsilon, float* y) {
  constexpr int kRows = 4;
  int64_t r = 0;
  for (; r + kRows <= rows; r += kRows) LayerNormGroup<kRows>(x + r * n, n, scale, bias, epsilon, y + r * n);
  for (; r < rows; ++r) LayerNormGroup<1>(x + r * n, n, scale, bias, epsilon, y + r * n);
}

}  // namespace cpu

namespace {

constexpr int64_t kChunk = 16384;  // values per parallel chunk

using cpu::PreparedRow;
using cpu::PrepareRow;
using cpu::RowKernel;

// BatchNormalization of float32 in inference: per channel a = scale /
// sqrt(var + epsilon) and b = B - mean * a in double, rounded to float, then
// y = x * a + b per value, as the reference computes them.
Status RunBatchNormF32(OpContext& ctx) {
  if (ctx.num_inputs() < 5 || !ctx.has_input(0) || ctx.input(0).dtype() != DataType::kFloat32 ||
      ctx.input(0).rank() < 2)
    return RunReferenceKernel(ctx);
  const Node& node = ctx.node();
  if (ctx.opset() >= 14 && node.attr_int("training_mode", 0) != 0) return RunReferenceKernel(ctx);
  if (ctx.opset() < 9 && node.attr_int("spatial", 1) == 0) return RunReferenceKernel(ctx);
  for (size_t i = 1; i < node.outputs.size(); ++i)
    if (ctx.wants_output(i)) return RunReferenceKernel(ctx);
  const Tensor& x = ctx.input(0);
  const int64_t c = x.dim(1);
  for (size_t i = 1; i < 5; ++i)
    if (!ctx.has_input(i) || ctx.input(i).dtype() != DataType::kFloat32 || ctx.input(i).numel() != c)
      return RunReferenceKernel(ctx);
  const double eps = node.attr_float("epsilon", 1e-5f);
  std::vector<float> a(static_cast<size_t>(c)), b(static_cast<size_t>(c));
  for (int64_t j = 0; j < c; ++j) {
    const double scale = ctx.input(1).data<float>()[j], bias = ctx.input(2).data<float>()[j];
    const double mean = ctx.input(3).data<float>()[j], var = ctx.input(4).data<float>()[j];
    const double aj = scale / std::sqrt(var + eps);
    a[static_cast<size_t>(j)] = static_cast<float>(aj);
    b[static_cast<size_t>(j)] = static_cast<float>(bias - mean * aj);
  }
  const int64_t planes = x.dim(0) * c;
  const int64_t len = planes == 0 ? 0 : x.numel() / planes;
  Tensor out = ctx.OutputBuffer(0, DataType::kFloat32, x.shape());
  const float* src = x.data<float>();
  float* dst = out.data<float>();
  const ScaleShiftF32Fn row = PreparedRow<ScaleShiftF32Fn>(ctx);
  ParallelFor(ctx.pool(), planes, std::max<int64_t>(1, kChunk / std::max<int64_t>(1, len)), [&](int64_t p0, int64_t p1) {
    for (int64_t p = p0; p < p1; ++p) {
      const size_t ch = static_cast<size_t>(p % c);
      row(src + p * len, dst + p * len, len, a[ch], b[ch]);
    }
  });
  ctx.set_output(0, std::move(out));
  return Status::OK();
}

// LayerNormalization of float32 whose Scale and B hold one value per
// normalized element (their shapes equal the normalized shape, or any shape
// of as many values that broadcasts to it, which is then the same layout),
// without the Mean / InvStdDev outputs.
Status RunLayerNormF32(OpContext& ctx) {
  if (!ctx.has_input(0) || !ctx.has_input(1) || ctx.input(0).dtype() != DataType::kFloat32 || ctx.input(0).rank() == 0)
    return RunReferenceKernel(ctx);
  if (ctx.wants_output(1) || ctx.wants_output(2)) return RunReferenceKernel(ctx);
  const Tensor& x = ctx.input(0);
  const int64_t rank = static_cast<int64_t>(x.rank());
  int64_t axis = ctx.node().attr_int("axis", -1);
  if (axis < 0) axis += rank;
  if (axis < 0 || axis >= rank) return RunReferenceKernel(ctx);
  int64_t cols = 1;
  for (int64_t d = axis; d < rank; ++d) cols *= x.dim(static_cast<size_t>(d));
  if (cols == 0) return RunReferenceKernel(ctx);
  const int64_t rows = x.numel() / cols;
  auto same_layout = [&](const Tensor& t) {
    if (t.dtype() != DataType::kFloat32 || t.numel() != cols || static_cast<int64_t>(t.rank()) > rank - axis) return false;
    for (size_t i = 0; i < t.rank(); ++i)
      if (t.dim(t.rank() - 1 - i) != x.dim(static_cast<size_t>(rank - 1) - i)) return false;
    return true;
  };
  const bool has_bias = ctx.has_input(2);
  if (!same_layout(ctx.input(1)) || (has_bias && !same_layout(ctx.input(2)))) return RunReferenceKernel(ctx);
  std::vector<double> scale(static_cast<size_t>(cols)), bias(static_cast<size_t>(cols), 0.0);
  for (int64_t j = 0; j < cols; ++j) {
    scale[static_cast<size_t>(j)] = ctx.input(1).data<float>()[j];
    if (has_bias) bias[static_cast<size_t>(j)] = ctx.input(2).data<float>()[j];
  }
  const double eps = ctx.node().attr_float("epsilon", 1e-5f);
  Tensor out = ctx.OutputBuffer(0, DataType::kFloat32, x.shape());
  const float* src = x.data<float>();
  float* dst = out.data<float>();
  const LayerNormF32Fn row = PreparedRow<LayerNormF32Fn>(ctx);
  ParallelFor(ctx.pool(), rows, std::max<int64_t>(1, kChunk / cols), [&](int64_t r0, int64_t r1) {
    row(src + r0 * cols, r1 - r0, cols, scale.data(), bias.data(), eps, dst + r0 * cols);
  });
  ctx.set_output(0, std::move(out));
  return Status::OK();
}

// Whether `t` is float32 with one value per element of the last axis (n of
// them, every other dimension 1) and a rank that does not widen x's.
bool LastAxisVector(const Tensor& t, int64_t n, size_t x_rank) {
  if (t.dtype() != DataType::kFloat32 || t.numel() != n || t.rank() > x_rank) return false;
  return t.rank() == 0 ? n == 1 : t.dim(t.rank() - 1) == n;
}

// sparq.LayerNormChain of float32 (norm_f32.h): rows of the last axis, each
// step the unfused node's float operation (the mean and the mean of squares
// summed in order in double and rounded as ReduceMean rounds them), on the
// layer_norm_chain_f32 row prepared for the node (dispatch.h). Other shapes
// and types run the reference.
Status RunLayerNormChainF32(OpContext& ctx) {
  for (size_t i = 0; i < 4; ++i)
    if (!ctx.has_input(i) || ctx.input(i).dtype() != DataType::kFloat32) return RunReferenceKernel(ctx);
  const Tensor& x = ctx.input(0);
  if (x.rank() == 0 || x.dim(x.rank() - 1) == 0) return RunReferenceKernel(ctx);
  const int64_t n = x.dim(x.rank() - 1);
  const int64_t rows = x.numel() / n;
  const Tensor &exponent = ctx.input(1), &eps_t = ctx.input(2), &gamma_t = ctx.input(3);
  if (exponent.numel() != 1 || exponent.rank() > x.rank() || exponent.data<float>()[0] != 2.0f ||
      eps_t.numel() != 1 || eps_t.rank() > x.rank() || !LastAxisVector(gamma_t, n, x.rank()) ||
      (ctx.has_input(4) && (ctx.input(4).dtype() != DataType::kFloat32 || !LastAxisVector(ctx.input(4), n, x.rank())))) {
    return RunReferenceKernel(ctx);
  }
  const float eps = eps_t.data<float>()[0];
  const float* gamma = gamma_t.data<float>();
  const float* beta = ctx.has_input(4) ? ctx.input(4).data<float>() : nullptr;
  Tensor out = ctx.OutputBuffer(0, DataType::kFloat32, x.shape());
  const float* src = x.data<float>();
  float* dst = out.data<float>();
  const LayerNormChainF32Fn row = PreparedRow<LayerNormChainF32Fn>(ctx);
  ParallelFor(ctx.pool(), rows, std::max<int64_t>(1, kChunk / n), [&](int64_t r0, int64_t r1) {
    row(src + r0 * n, r1 - r0, n, eps, gamma, beta, dst + r0 * n);
  });
  ctx.set_output(0, std::move(out));
  return Status::OK();
}

}  // namespace

void RegisterCpuNormF32Ops(KernelRegistry& r) {
  r.Add({"LayerNormChain", kSparqDomain, 1, 99, RunLayerNormChainF32, "layer_norm_chain_f32",
         WithoutContext(PrepareRow<CpuOp::kLayerNormChainF32>, RowKernel)});
  // scale_shift_f32 reads x[i] before it stores y[i] (vectorized without an
  // overlap check: ScaleShiftRowPortable): output 0 may go over input 0
  // (KernelDef::overwritable_inputs).
  r.Add({"BatchNormalization", "", 1, 99, RunBatchNormF32, "scale_shift_f32",
         WithoutContext(PrepareRow<CpuOp::kScaleShiftF32>, RowKernel), kPriorityFast, 0, 0b1});
  r.Add({"LayerNormalization", "", 1, 99, RunLayerNormF32, "layer_norm_f32",
         WithoutContext(PrepareRow<CpuOp::kLayerNormF32>, RowKernel)});
}

}  // namespace sparq
