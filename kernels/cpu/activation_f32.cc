// Float32 Erf, Softmax, Pow(x, 2), Sigmoid / SiLU, Tanh, Clip, GlobalAveragePool and GlobalMaxPool (activation_f32.h) and their
// registry rows.
#include "kernels/cpu/activation_f32.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "kernels/ref/reduce_common.h"
#include "kernels/cpu/row_op.h"
#include "kernels/registry.h"

#if SPARQ_CPU_X86
#include <immintrin.h>

#include "kernels/cpu/cpu_target.h"
#endif

namespace sparq {
namespace cpu {

void ErfRowPortable(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = std::erf(x[i]);
}

// The reference's Div, Erf (std::erf), Add, Mul and Mul, each rounded to float.
void GeluErfChainRowPortable(const float* x, float* y, int64_t n, float divisor, float offset, float scale) {
  for (int64_t i = 0; i < n; ++i) {
    const float e = std::erf(x[i] / divisor);
    y[i] = (x[i] * (e + offset)) * scale;
  }
}

// As kernels/ref/softmax.cc computes one row (inner = 1).
void SoftmaxRowPortable(const float* x, float* y, int64_t n) {
  if (n == 0) return;
  float max_v = x[0];
  for (int64_t i = 1; i < n; ++i)
    if (x[i] > max_v) max_v = x[i];
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    y[i] = std::exp(x[i] - max_v);
    sum += static_cast<double>(y[i]);
  }
  for (int64_t i = 0; i < n; ++i) y[i] = static_cast<float>(static_cast<double>(y[i]) / sum);
}

// As kernels/ref/softmax.cc computes a block of columns.
void SoftmaxColumnsPortable(const float* x, float* y, int64_t n, int64_t stride, int64_t width) {
  if (n == 0) return;
  for (int64_t c = 0; c < width; ++c) {
    float max_v = x[c];
    for (int64_t k = 1; k < n; ++k)
      if (x[c + k * stride] > max_v) max_v = x[c + k * stride];
    double sum = 0.0;
    for (int64_t k = 0; k < n; ++k) {
      y[c + k * stride] = std::exp(x[c + k * stride] - max_v);
      sum += static_cast<double>(y[c + k * stride]);
    }
    for (int64_t k = 0; k < n; ++k) y[c + k * stride] = static_cast<float>(static_cast<double>(y[c + k * stride]) / sum);
  }
}

// x * x in float is the exact square rounded once, as the reference's double pow.
void Pow2RowPortable(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] * x[i];
}

// As kernels/ref Sigmoid computes it (float exp, one division), then Mul's
// float product for SiLU.
void SigmoidRowPortable(const float* x, float* y, int64_t n, bool times_x) {
  if (times_x) {
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] * (1.0f / (1.0f + std::exp(-x[i])));
  } else {
    for (int64_t i = 0; i < n; ++i) y[i] = 1.0f / (1.0f + std::exp(-x[i]));
  }
}

// As kernels/ref Tanh computes it: std::tanh on float.
void TanhRowPortable(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = std::tanh(x[i]);
}

void ClipRowPortable(const float* x, float* y, int64_t n, float lo, float hi) {
  for (int64_t i = 0; i < n; ++i) {
    const float above = x[i] < lo ? lo : x[i];
    y[i] = above > hi ? hi : above;
  }
}

void HardSwishChainRowPortable(const float* x, float* y, int64_t n, float offset, float lo, float hi, float divisor) {
  for (int64_t i = 0; i < n; ++i) {
    const float t = x[i] + offset;
    const float above = t < lo ? lo : t;
    y[i] = (x[i] * (above > hi ? hi : above)) / divisor;
  }
}

#if SPARQ_CPU_X86
SPARQ_CPU_TARGET_BEGIN(SPARQ_CPU_AVX2_FEATURES)
namespace {

// e^x: x = k ln2 + r with |r| <= ln2 / 2, e^r by its Taylor polynomial to
// degree 6 (relative error below 2e-7), times 2^k through the exponent bits.
// x is clamped to [-87, 88]: e^x underflows to about 1.6e-38 there, not 0.
inline __m256 Exp8(__m256 x) {
  x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-87.0f)), _mm256_set1_ps(88.0f));
  const __m256 k = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(k, _mm256_set1_ps(0.693359375f), x);  // ln2 in two parts: exact k * hi
  r = _mm256_fnmadd_ps(k, _mm256_set1_ps(-2.12194440e-4f), r);
  __m256 p = _mm256_set1_ps(1.0f / 720);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 120));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 24));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 6));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0.5f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
  const __m256i scale = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(k), _mm256_set1_epi32(127)), 23);
  return _mm256_mul_ps(p, _mm256_castsi256_ps(scale));
}

// erf(x) = sign(x) (1 - t (a1 + t (a2 + ... + t a5)) e^(-x^2)), t = 1 / (1 + p|x|)
// (Abramowitz and Stegun 7.1.26: absolute error below 1.5e-7).
inline __m256 Erf8(__m256 x) {
  const __m256 sign = _mm256_and_ps(x, _mm256_set1_ps(-0.0f));
  const __m256 a = _mm256_andnot_ps(_mm256_set1_ps(-0.0f), x);
  const __m256 t = _mm256_div_ps(_mm256_set1_ps(1.0f), _mm256_fmadd_ps(_mm256_set1_ps(0.3275911f), a, _mm256_set1_ps(1.0f)));
  __m256 q = _mm256_set1_ps(1.061405429f);
  q = _mm256_fmadd_ps(q, t, _mm256_set1_ps(-1.453152027f));
  q = _mm256_fmadd_ps(q, t, _mm256_set1_ps(1.421413741f));
  q = _mm256_fmadd_ps(q, t, _mm256_set1_ps(-0.284496736f));
  q = _mm256_fmadd_ps(q, t, _mm256_set1_ps(0.254829592f));
  q = _mm256_mul_ps(q, t);
  const __m256 e = Exp8(_mm256_mul_ps(_mm256_sub_ps(_mm256_setzero_ps(), a), a));
  const __m256 r = _mm256_fnmadd_ps(q, e, _mm256_set1_ps(1.0f));
  const __m256 nan = _mm256_cmp_ps(x, x, _CMP_UNORD_Q);  // NaN stays NaN (the clamp in Exp8 would lose it)
  return _mm256_blendv_ps(_mm256_or_ps(r, sign), x, nan);
}

// 1 / (1 + e^-x), or x times that. Where float e^-x overflows (x below
// -ln(FLT_MAX)) the sigmoid is 0, as the reference's 1 / inf, so that SiLU
// of -inf is NaN there too; NaN stays NaN.
inline __m256 Sigmoid8(__m256 x, bool times_x) {
  const __m256 e = Exp8(_mm256_sub_ps(_mm256_setzero_ps(), x));
  __m256 s = _mm256_div_ps(_mm256_set1_ps(1.0f), _mm256_add_ps(_mm256_set1_ps(1.0f), e));
  s = _mm256_andnot_ps(_mm256_cmp_ps(x, _mm256_set1_ps(-88.7228394f), _CMP_LT_OQ), s);
  if (times_x) s = _mm256_mul_ps(x, s);
  return _mm256_blendv_ps(s, x, _mm256_cmp_ps(x, x, _CMP_UNORD_Q));
}

// tanh(x): below |x| = 1/4 the odd series x + x^3 (-1/3 + x^2 (2/15 + x^2
// (-17/315 + x^2 62/2835))) (the next term is below 1e-8 of the value there),
// above it (1 - e^-2|x|) / (1 + e^-2|x|) with x's sign, |x| clamped to 9
// (float tanh is 1 from about 9.01): infinities give +-1. The series keeps
// signed zeros and tiny values exact; NaN stays NaN.
inline __m256 Tanh8(__m256 x) {
  const __m256 sign = _mm256_and_ps(x, _mm256_set1_ps(-0.0f));
  const __m256 a = _mm256_min_ps(_mm256_andnot_ps(_mm256_set1_ps(-0.0f), x), _mm256_set1_ps(9.0f));
  const __m256 e = Exp8(_mm256_mul_ps(a, _mm256_set1_ps(-2.0f)));
  const __m256 one = _mm256_set1_ps(1.0f);
  const __m256 big = _mm256_div_ps(_mm256_sub_ps(one, e), _mm256_add_ps(one, e));
  const __m256 z = _mm256_mul_ps(x, x);
  __m256 p = _mm256_set1_ps(62.0f / 2835);
  p = _mm256_fmadd_ps(p, z, _mm256_set1_ps(-17.0f / 315));
  p = _mm256_fmadd_ps(p, z, _mm256_set1_ps(2.0f / 15));
  p = _mm256_fmadd_ps(p, z, _mm256_set1_ps(-1.0f / 3));
  const __m256 small = _mm256_fmadd_ps(_mm256_mul_ps(x, z), p, x);
  // The sign of x on both (the series' fma turns -0 into +0).
  const __m256 r = _mm256_or_ps(_mm256_blendv_ps(big, small, _mm256_cmp_ps(a, _mm256_set1_ps(0.25f), _CMP_LT_OQ)), sign);
  return _mm256_blendv_ps(r, x, _mm256_cmp_ps(x, x, _CMP_UNORD_Q));
}

}  // namespace

void TanhRowAvx2(const float* x, float* y, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, Tanh8(_mm256_loadu_ps(x + i)));
  if (i < n) {
    alignas(32) float buf[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    std::copy(x + i, x + n, buf);
    _mm256_store_ps(buf, Tanh8(_mm256_load_ps(buf)));
    std::copy(buf, buf + (n - i), y + i);
  }
}

void SigmoidRowAvx2(const float* x, float* y, int64_t n, bool times_x) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, Sigmoid8(_mm256_loadu_ps(x + i), times_x));
  if (i < n) {
    alignas(32) float buf[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    std::copy(x + i, x + n, buf);
    _mm256_store_ps(buf, Sigmoid8(_mm256_load_ps(buf), times_x));
    std::copy(buf, buf + (n - i), y + i);
  }
}

// max(lo, x) then min(hi, .): MAXPS / MINPS return their second operand
// when either is NaN, so this is the reference's x < lo ? lo : x and
// x > hi ? hi : x exactly (NaN stays NaN, -0 stays -0).
void ClipRowAvx2(const float* x, float* y, int64_t n, float lo, float hi) {
  const __m256 vlo = _mm256_set1_ps(lo), vhi = _mm256_set1_ps(hi);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_min_ps(vhi, _mm256_max_ps(vlo, _mm256_loadu_ps(x + i))));
  for (; i < n; ++i) {
    const float above = x[i] < lo ? lo : x[i];
    y[i] = above > hi ? hi : above;
  }
}

// The Clip of ClipRowAvx2 between the float add and the product / quotient.
void HardSwishChainRowAvx2(const float* x, float* y, int64_t n, float offset, float lo, float hi, float divisor) {
  const __m256 va = _mm256_set1_ps(offset), vlo = _mm256_set1_ps(lo), vhi = _mm256_set1_ps(hi);
  const __m256 vd = _mm256_set1_ps(divisor);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_loadu_ps(x + i);
    const __m256 c = _mm256_min_ps(vhi, _mm256_max_ps(vlo, _mm256_add_ps(v, va)));
    _mm256_storeu_ps(y + i, _mm256_div_ps(_mm256_mul_ps(v, c), vd));
  }
  HardSwishChainRowPortable(x + i, y + i, n - i, offset, lo, hi, divisor);
}

void ErfRowAvx2(const float* x, float* y, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, Erf8(_mm256_loadu_ps(x + i)));
  if (i < n) {  // the tail through a padded buffer, so that it rounds as the body does
    alignas(32) float buf[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    std::copy(x + i, x + n, buf);
    _mm256_store_ps(buf, Erf8(_mm256_load_ps(buf)));
    std::copy(buf, buf + (n - i), y + i);
  }
}

// ErfRowAvx2's erf between the float division and the add and products.
void GeluErfChainRowAvx2(const float* x, float* y, int64_t n, float divisor, float offset, float scale) {
  const __m256 vd = _mm256_set1_ps(divisor), va = _mm256_set1_ps(offset), vh = _mm256_set1_ps(scale);
  auto gelu = [&](__m256 v) {
    return _mm256_mul_ps(_mm256_mul_ps(v, _mm256_add_ps(Erf8(_mm256_div_ps(v, vd)), va)), vh);
  };
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, gelu(_mm256_loadu_ps(x + i)));
  if (i < n) {  // the tail through a padded buffer, as ErfRowAvx2's
    alignas(32) float buf[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    std::copy(x + i, x + n, buf);
    _mm256_store_ps(buf, gelu(_mm256_load_ps(buf)));
    std::copy(buf, buf + (n - i), y + i);
  }
}

void SoftmaxRowAvx2(const float* x, float* y, int64_t n) {
  if (n == 0) return;
  const float ninf = -std::numeric_limits<float>::infinity();
  float max_v = ninf;
  {
    __m256 m = _mm256_set1_ps(ninf);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) m = _mm256_max_ps(m, _mm256_loadu_ps(x + i));
    alignas(32) float lanes[8];
    _mm256_store_ps(lanes, m);
    for (float v : lanes) max_v = std::max(max_v, v);
    for (; i < n; ++i) max_v = std::max(max_v, x[i]);
  }
  const __m256 vmax = _mm256_set1_ps(max_v);
  __m256 acc = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 e = Exp8(_mm256_sub_ps(_mm256_loadu_ps(x + i), vmax));
    _mm256_storeu_ps(y + i, e);
    acc = _mm256_add_ps(acc, e);
  }
  if (i < n) {
    alignas(32) float buf[8];
    std::fill(buf, buf + 8, ninf);
    std::copy(x + i, x + n, buf);
    const __m256 e = _mm256_and_ps(Exp8(_mm256_sub_ps(_mm256_load_ps(buf), vmax)),
                                   _mm256_cmp_ps(_mm256_load_ps(buf), _mm256_set1_ps(ninf), _CMP_NEQ_OQ));
    _mm256_store_ps(buf, e);
    acc = _mm256_add_ps(acc, e);
    std::copy(buf, buf + (n - i), y + i);
  }
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, acc);
  const float sum = ((lanes[0] + lanes[1]) + (lanes[2] + lanes[3])) + ((lanes[4] + lanes[5]) + (lanes[6] + lanes[7]));
  const __m256 inv = _mm256_set1_ps(1.0f / sum);
  i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_loadu_ps(y + i), inv));
  for (; i < n; ++i) y[i] *= 1.0f / sum;
}

SPARQ_CPU_TARGET_END
#endif

}  // namespace cpu

namespace {

constexpr int64_t kChunk = 16384;  // values per parallel chunk

using cpu::PreparedRow;
using cpu::PrepareRow;
using cpu::RowKernel;

// Runs row(x, y, n) over input 0 (float32) into output 0 of its shape, in
// chunks that start at multiples of kChunk (a multiple of 16): every value
// rounds as in a one-thread run.
template <typename Row>
Status RunAlignedChunksF32(OpContext& ctx, const Row& row) {
  const Tensor& x = ctx.input(0);
  Tensor out = ctx.OutputBuffer(0, DataType::kFloat32, x.shape());
  const float* src = x.data<float>();
  float* dst = out.data<float>();
  ParallelFor(ctx.pool(), (x.numel() + kChunk - 1) / kChunk, 1, [&](int64_t c0, int64_t c1) {
    const int64_t begin = c0 * kChunk, end = std::min(x.numel(), c1 * kChunk);
    row(src + begin, dst + begin, end - begin);
  });
  ctx.set_output(0, std::move(out));
  return Status::OK();
}

// Runs row(x, y, n) over input 0 (float32) into output 0 of its shape, in
// ParallelFor's spans of at least kChunk values: for rows that compute every
// value on its own (the same bits for any split).
template <typename Row>
Status RunChunksF32(OpContext& ctx, const Row& row) {
  const Tensor& x = ctx.input(0);
  Tensor out = ctx.OutputBuffer(0, DataType::kFloat32, x.shape());
  const float* src = x.data<float>();
  float* dst = out.data<float>();
  ParallelFor(ctx.pool(), x.numel(), kChunk, [&](int64_t i0, int64_t i1) { row(src + i0, dst + i0, i1 - i0); });
  ctx.set_output(0, std::move(out));
  return Status::OK();
}

bool HasFloat32Input(const OpContext& ctx) { return ctx.has_input(0) && ctx.input(0).dtype() == DataType::kFloat32; }

// The guard of the fused chains (sparq.HardSwishChain, GeluErfChain,
// GeluTanhChain): a float32 input of at least min_rank dimensions, else the
// reference kernel runs the node.
bool ChainInputApplies(const OpContext& ctx) {
  return HasFloat32Input(ctx) && static_cast<int64_t>(ctx.input(0).rank()) >= ctx.node().attr_int("min_rank", 0);
}

Status RunErfF32(OpContext& ctx) {
  if (!HasFloat32Input(ctx)) return RunReferenceKernel(ctx);
  const ErfF32Fn row = PreparedRow<ErfF32Fn>(ctx);
  return RunAlignedChunksF32(ctx, row);
}

// Softmax of float32. Over the last axis (opset 13's default axis -1, or
// before opset 13 the dimensions from `axis` on, flattened) on the
// softmax_f32 row per row (a row the reference makes NaN throughout, NaN:
// SoftmaxRowIsNaN); over another axis (opset 13) on the
// softmax_columns_f32 row, the columns after the axis side by side.
Status RunSoftmaxF32(OpContext& ctx) {
  if (!ctx.has_input(0) || ctx.input(0).dtype() != DataType::kFloat32 || ctx.input(0).rank() == 0)
    return RunReferenceKernel(ctx);
  const Tensor& x = ctx.input(0);
  const int64_t rank = static_cast<int64_t>(x.rank());
  int64_t axis = ctx.node().attr_int("axis", ctx.opset() < 13 ? 1 : -1);
  if (axis < 0) axis += rank;
  if (axis < 0 || axis >= rank) return RunReferenceKernel(ctx);  // it names the error
  const bool flatten = ctx.opset() < 13;
  int64_t n = x.dim(static_cast<size_t>(axis)), inner = 1;
  for (int64_t d = axis + 1; d < rank; ++d) (flatten ? n : inner) *= x.dim(static_cast<size_t>(d));
  Tensor out = ctx.OutputBuffer(0, DataType::kFloat32, x.shape());
  const float* src = x.data<float>();
  float* dst = out.data<float>();
  if (n == 0 || x.numel() == 0) {
    ctx.set_output(0, std::move(out));
    return Status::OK();
  }
  const int64_t outer = x.numel() / (n * inner);
  const CpuKernelDef& prepared = *static_cast<const CpuKernelDef*>(ctx.prepared());
  auto row_of = [&](CpuOp op) -> const CpuKernelDef& { return prepared.op() == op ? prepared : SelectCpuKernel(op); };
  if (inner == 1) {
    const SoftmaxF32Fn row = row_of(CpuOp::kSoftmaxF32).get<SoftmaxF32Fn>();
    ParallelFor(ctx.pool(), outer, std::max<int64_t>(1, kChunk / n), [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        row(src + r * n, dst + r * n, n);
        if (cpu::SoftmaxRowIsNaN(src + r * n, n))  // the fast exp turns -inf - -inf into a number
          std::fill(dst + r * n, dst + (r + 1) * n, std::numeric_limits<float>::quiet_NaN());
      }
    });
  } else {
    // Tasks of (outer index, block of columns); every column on its own.
    const SoftmaxColumnsF32Fn columns = row_of(CpuOp::kSoftmaxColumnsF32).get<SoftmaxColumnsF32Fn>();
    constexpr int64_t kBlock = 256;  // columns per task
    const int64_t blocks = (inner + kBlock - 1) / kBlock;
    ParallelFor(ctx.pool(), outer * blocks, std::max<int64_t>(1, kChunk / (n * kBlock)), [&](int64_t t0, int64_t t1) {
      for (int64_t t = t0; t < t1; ++t) {
        const int64_t o = t / blocks, c0 = (t % blocks) * kBlock;
        const int64_t offset = o * n * inner + c0;
        columns(src + offset, dst + offset, n, inner, std::min(kBlock, inner - c0));
      }
    });
  }
  ctx.set_output(0, std::move(out));
  return Status::OK();
}

// The row `eval --verbose` names for a Softmax node: softmax_columns_f32 when
// its axis attribute is given and not -1 (opset 13's other axes; the opset is
// not known here), else softmax_f32. RunSoftmaxF32 takes the other row itself
// when the shapes call for it.
StatusOr<std::shared_ptr<const void>> PrepareSoftmax(const Node& node, const std::vector<const Tensor*>&) {
  const Attribute* axis = node.attr("axis");
  const bool columns = axis != nullptr && axis->kind == Attribute::Kind::kInt && axis->i != -1;
  return std::shared_ptr<const void>(&SelectCpuKernel(columns ? CpuOp::kSoftmaxColumnsF32 : CpuOp::kSoftmaxF32),
                                     [](const void*) {});  // the table outlives executors
}

// Pow with a constant scalar exponent of exactly 2 on float32: x * x.
Status RunPow2F32(OpContext& ctx) {
  if (!ctx.has_input(0) || !ctx.has_input(1)) return RunReferenceKernel(ctx);
  const Tensor& x = ctx.input(0);
  const Tensor& e = ctx.input(1);
  if (x.dtype() != DataType::kFloat32 || e.numel() != 1 || e.rank() > x.rank()) return RunReferenceKernel(ctx);
  double exponent;
  switch (e.dtype()) {
    case DataType::kFloat32: exponent = e.data<float>()[0]; break;
    case DataType::kFloat64: exponent = e.data<double>()[0]; break;
    case DataType::kInt64: exponent = static_cast<double>(e.data<int64_t>()[0]); break;
    case DataType::kInt32: exponent = e.data<int32_t>()[0]; break;
    default: return RunReferenceKernel(ctx);
  }
  if (exponent != 2.0) return RunReferenceKernel(ctx);
  return RunChunksF32(ctx, PreparedRow<Pow2F32Fn>(ctx));
}

// Sigmoid of float32 (sigmoid_f32, times_x off); the fused SiLU of
// runtime/passes/float_fusion.cc runs the same row with times_x on.
template <bool kTimesX>
Status RunSigmoidF32(OpContext& ctx) {
  if (!HasFloat32Input(ctx)) return RunReferenceKernel(ctx);
  const SigmoidF32Fn row = PreparedRow<SigmoidF32Fn>(ctx);
  return RunAlignedChunksF32(ctx, [row](const float* x, float* y, int64_t n) { row(x, y, n, kTimesX); });
}

// Tanh of float32 (tanh_f32).
Status RunTanhF32(OpContext& ctx) {
  if (!HasFloat32Input(ctx)) return RunReferenceKernel(ctx);
  const TanhF32Fn row = PreparedRow<TanhF32Fn>(ctx);
  return RunAlignedChunksF32(ctx, [row](const float* x, float* y, int64_t n) { row(x, y, n); });
}

// Clip of float32, the bounds read at each run: the min / max
// inputs (opset 11 on) or attributes (before), each absent bound unbounded,
// as the reference reads them; other types and bad bounds run the reference
// kernel (which names the error).
Status RunClipF32(OpContext& ctx) {
  if (!HasFloat32Input(ctx)) return RunReferenceKernel(ctx);
  float lo = -std::numeric_limits<float>::infinity(), hi = std::numeric_limits<float>::infinity();
  if (ctx.opset() < 11) {
    if (ctx.node().attr("min") != nullptr) lo = ctx.node().attr_float("min", 0.0f);
    if (ctx.node().attr("max") != nullptr) hi = ctx.node().attr_float("max", 0.0f);
  } else {
    for (size_t i = 0; i < 2; ++i) {
      if (!ctx.has_input(i + 1)) continue;
      const Tensor& b = ctx.input(i + 1);
      if (b.dtype() != DataType::kFloat32 || b.numel() != 1) return RunReferenceKernel(ctx);
      (i == 0 ? lo : hi) = b.data<float>()[0];
    }
  }
  const ClipF32Fn row = PreparedRow<ClipF32Fn>(ctx);
  return RunChunksF32(ctx, [row, lo, hi](const float* x, float* y, int64_t n) { row(x, y, n, lo, hi); });
}

// sparq.HardSwishChain (Paddle's x * Clip(x + 3, 0, 6) / 6, fused by
// runtime/passes/float_fusion.h) on the hardswish_chain_f32 row: the reference's
// four float operations per value in one pass, chunks split among the
// threads (every value on its own: the same bits for any split).
Status RunHardSwishChainF32(OpContext& ctx) {
  if (!ChainInputApplies(ctx)) return RunReferenceKernel(ctx);
  const float offset = ctx.node().attr_float("offset", 3.0f), lo = ctx.node().attr_float("lo", 0.0f);
  const float hi = ctx.node().attr_float("hi", 6.0f), divisor = ctx.node().attr_float("divisor", 6.0f);
  const HardSwishChainF32Fn row = PreparedRow<HardSwishChainF32Fn>(ctx);
  return RunChunksF32(ctx, [=](const float* x, float* y, int64_t n) { row(x, y, n, offset, lo, hi, divisor); });
}

// sparq.GeluErfChain (BERT's x * 0.5 * (1 + erf(x / sqrt 2)) as exported,
// fused by runtime/passes/float_fusion.h) on the gelu_erf_chain_f32 row: the five
// float operations per value in one pass, chunks split among the threads
// (every value on its own: the same bits for any split).
Status RunGeluErfChainF32(OpContext& ctx) {
  if (!ChainInputApplies(ctx)) return RunReferenceKernel(ctx);
  const float divisor = ctx.node().attr_float("divisor", 1.41421356f);
  const float offset = ctx.node().attr_float("offset", 1.0f), scale = ctx.node().attr_float("scale", 0.5f);
  const GeluErfChainF32Fn row = PreparedRow<GeluErfChainF32Fn>(ctx);
  // Chunks start at multiples of kChunk (a multiple of 16): the AVX2 row's
  // padded tail falls where it falls in a one-thread run.
  return RunChunksF32(ctx, [=](const float* x, float* y, int64_t n) { row(x, y, n, divisor, offset, scale); });
}

// sparq.GeluErfScaledChain (torch.onnx dynamo's x * ((1 + erf(x / sqrt 2)) * 0.5),
// fused by runtime/passes/float_fusion.h): per chunk the division and the
// add and products as IEEE operations on their own (no contraction) around
// the erf_f32 row, in place in y (that row reads each vector before it
// stores it): each value within cpu::kErfF32AbsTol of the reference's,
// bit for bit on the portable row, the same bits for any split.
Status RunGeluErfScaledChainF32(OpContext& ctx) {
  if (!ChainInputApplies(ctx)) return RunReferenceKernel(ctx);
  const float divisor = ctx.node().attr_float("divisor", 1.41421356f);
  const float offset = ctx.node().attr_float("offset", 1.0f), scale = ctx.node().attr_float("scale", 0.5f);
  const ErfF32Fn erf = PreparedRow<ErfF32Fn>(ctx);
  return RunChunksF32(ctx, [=](const float* x, float* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] / divisor;
    erf(y, y, n);
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] * ((y[i] + offset) * scale);
  });
}

// sparq.GeluTanhChain (JAX's tanh GELU, fused by runtime/passes/float_fusion.h):
// the nine nodes' operations on the rows those nodes run, a block of
// kGeluTanhBlock values at a time while it is in L1: each product and sum on
// the binary_f32 row (one IEEE operation per value), the tanh on the tanh_f32
// row, so every value gets the unfused nodes' bits (both rows compute each
// value on its own, wherever a block or chunk starts). One pass over memory
// instead of nine: magika's [512, 508] activation, 16 images at a time, no
// longer streams 33 MB through L3 per node.
constexpr int64_t kGeluTanhBlock = 1024;  // two 4 KiB blocks of intermediates

Status RunGeluTanhChainF32(OpContext& ctx) {
  if (!ChainInputApplies(ctx)) return RunReferenceKernel(ctx);
  const float cube = ctx.node().attr_float("cube", 0.044715f), inner = ctx.node().attr_float("inner", 0.7978846f);
  const float offset = ctx.node().attr_float("offset", 1.0f), half = ctx.node().attr_float("half", 0.5f);
  const Tensor& x = ctx.input(0);
  Tensor out = ctx.OutputBuffer(0, DataType::kFloat32, x.shape());
  const float* src = x.data<float>();
  float* dst = out.data<float>();
  const TanhF32Fn tanh_row = PreparedRow<TanhF32Fn>(ctx);
  const BinaryF32Fn binary = SelectCpuKernel(CpuOp::kBinaryF32).get<BinaryF32Fn>();
  using Op = BinaryF32Op;
  ParallelFor(ctx.pool(), x.numel(), kChunk, [&](int64_t i0, int64_t i1) {
    float m[kGeluTanhBlock], t[kGeluTanhBlock];
    for (int64_t b = i0; b < i1; b += kGeluTanhBlock) {
      const int64_t n = std::min(kGeluTanhBlock, i1 - b);
      const float* v = src + b;
      binary(Op::kMul, n, &cube, 0, v, 1, m);  // cube * x
      binary(Op::kMul, n, v, 1, m, 1, m);      // x * that
      binary(Op::kMul, n, v, 1, m, 1, m);      // x * that: cube * x^3
      binary(Op::kAdd, n, v, 1, m, 1, m);      // x + that
      binary(Op::kMul, n, &inner, 0, m, 1, m);
      tanh_row(m, t, n);
      binary(Op::kAdd, n, &offset, 0, t, 1, t);
      binary(Op::kMul, n, &half, 0, t, 1, t);
      binary(Op::kMul, n, v, 1, t, 1, dst + b);
    }
  });
  ctx.set_output(0, std::move(out));
  return Status::OK();
}

// Relu of float32: Clip to [0, inf) on the clip_f32 row, the reference's
// x < 0 ? 0 : x bit for bit.
Status RunReluF32(OpContext& ctx) {
  if (!HasFloat32Input(ctx)) return RunReferenceKernel(ctx);
  const ClipF32Fn row = PreparedRow<ClipF32Fn>(ctx);
  const float inf = std::numeric_limits<float>::infinity();
  return RunChunksF32(ctx, [row, inf](const float* x, float* y, int64_t n) { row(x, y, n, 0.0f, inf); });
}

// The axes a Reduce* node of a float32 input reduces, normalized and sorted:
// an attribute below opset `axes_input_since`, an input from it; no axes =
// all (unless noop_with_empty_axes). False for anything else (the reference
// kernel then names the error).
bool ReduceAxesF32(const OpContext& ctx, int64_t axes_input_since, std::vector<int64_t>* axes) {
  if (!ctx.has_input(0) || ctx.input(0).dtype() != DataType::kFloat32 || ctx.input(0).rank() == 0) return false;
  const int64_t rank = static_cast<int64_t>(ctx.input(0).rank());
  axes->clear();
  if (ctx.opset() >= axes_input_since) {
    if (ctx.has_input(1)) {
      if (ctx.input(1).dtype() != DataType::kInt64) return false;
      const Tensor& a = ctx.input(1);
      axes->assign(a.data<int64_t>(), a.data<int64_t>() + a.numel());
    }
  } else {
    *axes = ctx.node().attr_ints("axes");
  }
  if (axes->empty()) {
    if (ctx.node().attr_int("noop_with_empty_axes", 0) != 0) return false;
    for (int64_t a = 0; a < rank; ++a) axes->push_back(a);
  }
  for (int64_t& a : *axes) {
    if (a < -rank || a >= rank) return false;  // the reference's error
    if (a < 0) a += rank;
  }
  std::sort(axes->begin(), axes->end());
  return std::adjacent_find(axes->begin(), axes->end()) == axes->end();
}

// The output shape of a reduction of x over `axes` (sorted), keepdims or not.
Shape ReducedShape(const OpContext& ctx, const Shape& x, const std::vector<int64_t>& axes) {
  const bool keepdims = ctx.node().attr_int("keepdims", 1) != 0;
  Shape shape;
  for (size_t d = 0; d < x.size(); ++d) {
    if (!std::binary_search(axes.begin(), axes.end(), static_cast<int64_t>(d))) shape.push_back(x[d]);
    else if (keepdims) shape.push_back(1);
  }
  return shape;
}

// Whether a Reduce* node reduces a float32 input over its trailing axes (the
// last, the last few, or all of them: one contiguous row per output, read in
// the reference's order; ReduceAxesF32). Then the row length and the output
// shape.
bool ReducesTrailingAxesF32(const OpContext& ctx, int64_t axes_input_since, int64_t* n, Shape* shape) {
  std::vector<int64_t> axes;
  if (!ReduceAxesF32(ctx, axes_input_since, &axes)) return false;
  const Tensor& x = ctx.input(0);
  const int64_t rank = static_cast<int64_t>(x.rank());
  for (size_t k = 0; k < axes.size(); ++k)
    if (axes[k] != rank - static_cast<int64_t>(axes.size()) + static_cast<int64_t>(k)) return false;
  const size_t first = static_cast<size_t>(axes.front());
  *n = 1;
  for (size_t d = first; d < x.rank(); ++d) *n *= x.dim(d);
  if (*n == 0) return false;
  *shape = ReducedShape(ctx, x.shape(), axes);
  return true;
}

// Whether a Reduce* node reduces a float32 input over neighbouring axes that
// end before the last: x as [outer, n, inner] reduced over n, inner > 1 (a
// LayerNorm's statistics over channels; magika's over 2,048 rows). Then the
// three sizes and the output shape.
bool ReducesMiddleAxesF32(const OpContext& ctx, int64_t axes_input_since, int64_t* outer, int64_t* n,
                          int64_t* inner, Shape* shape) {
  std::vector<int64_t> axes;
  if (!ReduceAxesF32(ctx, axes_input_since, &axes)) return false;
  const Tensor& x = ctx.input(0);
  const int64_t rank = static_cast<int64_t>(x.rank());
  if (axes.back() >= rank - 1 || axes.back() - axes.front() + 1 != static_cast<int64_t>(axes.size())) return false;
  *outer = *n = *inner = 1;
  for (int64_t d = 0; d < rank; ++d) {
    if (d < axes.front()) *outer *= x.dim(d);
    else if (d <= axes.back()) *n *= x.dim(d);
    else *inner *= x.dim(d);
  }
  if (*n == 0 || *inner < 2) return false;
  *shape = ReducedShape(ctx, x.shape(), axes);
  return true;
}

// A float32 sum (or mean) over the middle axes of [outer, n, inner]
// (ReducesMiddleAxesF32): kColumns neighbouring outputs at a time, each summed
// in double in input order, as the reference's column sums
// (kernels/ref/reduce.cc) add them: its bits, without its offset lists and
// zero fill; the blocks of columns split among the threads.
template <bool kMean>
bool RunColumnSumsF32(OpContext& ctx, int64_t axes_input_since) {
  int64_t outer = 0, n = 0, inner = 0;
  Shape shape;
  if (!ReducesMiddleAxesF32(ctx, axes_input_since, &outer, &n, &inner, &shape)) return false;
  constexpr int64_t kColumns = 64;
  const Tensor& x = ctx.input(0);
  Tensor out = ctx.OutputBuffer(0, DataType::kFloat32, shape);
  const float* src = x.data<float>();
  float* dst = out.data<float>();
  const int64_t blocks = (inner + kColumns - 1) / kColumns;
  ParallelFor(ctx.pool(), outer * blocks, std::max<int64_t>(1, kChunk / (n * kColumns)), [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t o = t / blocks, c0 = (t % blocks) * kColumns, count = std::min(kColumns, inner - c0);
      double s[kColumns] = {};
      const float* first = src + o * n * inner + c0;
      for (int64_t r = 0; r < n; ++r) {
        const float* row = first + r * inner;
        for (int64_t k = 0; k < count; ++k) s[k] += static_cast<double>(row[k]);
      }
      float* y = dst + o * inner + c0;
      for (int64_t k = 0; k < count; ++k)
        y[k] = static_cast<float>(kMean ? s[k] / static_cast<double>(n) : s[k]);
    }
  });
  ctx.set_output(0, std::move(out));
  return true;
}

// A reduction of float32 over its trailing axes (ReducesTrailingAxesF32):
// `row(x, rows, n, y)` over chunks of rows into OutputBuffer; any other
// reduction runs the reference kernel.
template <typename Row>
Status RunTrailingRowsF32(OpContext& ctx, int axes_input_opset, Row row) {
  int64_t n = 0;
  Shape shape;
  if (!ReducesTrailingAxesF32(ctx, axes_input_opset, &n, &shape)) return RunReferenceKernel(ctx);
  const Tensor& x = ctx.input(0);
  Tensor out = ctx.OutputBuffer(0, DataType::kFloat32, shape);
  const float* src = x.data<float>();
  float* dst = out.data<float>();
  ParallelFor(ctx.pool(), x.numel() / n, std::max<int64_t>(1, kChunk / n),
              [&](int64_t r0, int64_t r1) { row(src + r0 * n, r1 - r0, n, dst + r0); });
  ctx.set_output(0, std::move(out));
  return Status::OK();
}

// ReduceSum of float32 over its trailing axes (kernel "sum_rows_f32"):
// each row summed in order in double and rounded once, as kernels/ref/reduce.cc
// sums, so the reference's bits; the output without its zero fill. Over
// middle axes: RunColumnSumsF32.
// basic-pitch's [1, 309, 172, 2] sum over pairs took ~6% of its run on the
// reference kernel, which built an offset per element first (small22).
Status RunSumLastAxisF32(OpContext& ctx) {
  if (RunColumnSumsF32<false>(ctx, 13)) return Status::OK();
  return RunTrailingRowsF32(ctx, 13, [](const float* x, int64_t rows, int64_t n, float* y) {
    for (int64_t r = 0; r < rows; ++r) {
      const float* v = x + r * n;
      double s = 0.0;
      for (int64_t i = 0; i < n; ++i) s += static_cast<double>(v[i]);
      y[r] = static_cast<float>(s);
    }
  });
}

// Sqrt of float32 (kernel "sqrt_f32"): std::sqrt per value, as the reference
// computes it (IEEE square root, correctly rounded: the same bits), in chunks
// into OutputBuffer; the reference's loop took ~4.6 us for Silero VAD's 516
// values and 2.3% of basic-pitch's run (small22). Other types: the reference.
Status RunSqrtF32(OpContext& ctx) {
  if (!HasFloat32Input(ctx)) return RunReferenceKernel(ctx);
  return RunChunksF32(ctx, [](const float* x, float* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] = std::sqrt(x[i]);
  });
}

// ReduceMean of float32 over its trailing axes (the axes attribute up to
// opset 17, the axes input from 18), keepdims either way, or over middle
// axes (RunColumnSumsF32); anything else runs the reference kernel.
Status RunMeanLastAxisF32(OpContext& ctx) {
  if (RunColumnSumsF32<true>(ctx, 18)) return Status::OK();
  return RunTrailingRowsF32(ctx, 18, PreparedRow<MeanRowsF32Fn>(ctx));
}

// ReduceMax of float32 over its trailing axes on the max_rows_f32 row
// (GlobalMaxPool's): the reference's bits, since both keep the first NaN and,
// among equal values (zeros of both signs), the first; basic-pitch's
// ReduceMax over all axes built an offset per element on the reference.
Status RunMaxTrailingF32(OpContext& ctx) { return RunTrailingRowsF32(ctx, 18, PreparedRow<MaxRowsF32Fn>(ctx)); }

// The minimum of one float row (n > 0) as kernels/ref/reduce.cc's ReduceMin
// picks it: +inf, replaced by each later value that is smaller; the row's
// first NaN returned as it is. Sixteen lanes of `v < m ? v : m` (one minps per
// four, no reassociation: a min of numbers is exact in any order), then the
// two cases where the order shows: a NaN (the first one, bits kept) and a
// zero minimum (the first zero: -0 and +0 compare equal).
float MinOfRowF32(const float* x, int64_t n) {
  constexpr int kLanes = 16;
  float m[kLanes];
  int32_t nan[kLanes];
  for (int j = 0; j < kLanes; ++j) {
    m[j] = std::numeric_limits<float>::infinity();
    nan[j] = 0;
  }
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int j = 0; j < kLanes; ++j) {
      const float v = x[i + j];
      m[j] = v < m[j] ? v : m[j];
      nan[j] |= v != v;
    }
  }
  for (; i < n; ++i) {
    const float v = x[i];
    m[0] = v < m[0] ? v : m[0];
    nan[0] |= v != v;
  }
  float best = m[0];
  int32_t any_nan = nan[0];
  for (int j = 1; j < kLanes; ++j) {
    best = m[j] < best ? m[j] : best;
    any_nan |= nan[j];
  }
  if (any_nan != 0 || best == 0.0f) {
    for (int64_t k = 0; k < n; ++k)
      if (any_nan != 0 ? std::isnan(x[k]) : x[k] == 0.0f) return x[k];
  }
  return best;
}

// ReduceMin of float32 over its trailing axes (kernel "min_rows_f32"):
// MinOfRowF32 per row, the reference's bits. basic-pitch's minimum of its
// log-CQT ([1, 172, 309] over both axes) took ~3% of its run on the
// reference, which built an offset per element and compared one at a time.
Status RunMinTrailingF32(OpContext& ctx) {
  return RunTrailingRowsF32(ctx, 18, [](const float* x, int64_t rows, int64_t n, float* y) {
    for (int64_t r = 0; r < rows; ++r) y[r] = MinOfRowF32(x + r * n, n);
  });
}

// GlobalAveragePool / GlobalMaxPool of float32 [N, C, spatial...]: each
// channel plane is a row of a reduction row, mean_rows_f32 (summed in order
// in double as kernels/ref/pool.cc does) or max_rows_f32: the reference's
// bits. Empty planes run the reference (which names them).
template <typename RowsFn>
Status RunGlobalPoolF32(OpContext& ctx) {
  if (!ctx.has_input(0) || ctx.input(0).dtype() != DataType::kFloat32 || ctx.input(0).rank() < 3)
    return RunReferenceKernel(ctx);
  const Tensor& x = ctx.input(0);
  const int64_t planes = x.dim(0) * x.dim(1);
  const int64_t n = planes == 0 ? 0 : x.numel() / planes;
  if (n == 0) return RunReferenceKernel(ctx);
  Shape shape = x.shape();
  for (size_t d = 2; d < shape.size(); ++d) shape[d] = 1;
  Tensor out = ctx.OutputBuffer(0, DataType::kFloat32, shape);
  const float* src = x.data<float>();
  float* dst = out.data<float>();
  const RowsFn row = PreparedRow<RowsFn>(ctx);
  ParallelFor(ctx.pool(), planes, std::max<int64_t>(1, kChunk / n),
              [&](int64_t r0, int64_t r1) { row(src + r0 * n, r1 - r0, n, dst + r0); });
  ctx.set_output(0, std::move(out));
  return Status::OK();
}

}  // namespace

namespace cpu {

// kernels/ref GlobalMaxPool's loop: a value replaces the best when greater,
// or when it is NaN and the best is not.
void MaxRowsPortable(const float* x, int64_t rows, int64_t n, float* y) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* row = x + r * n;
    float best = row[0];
    for (int64_t i = 1; i < n; ++i)
      if (row[i] > best || (std::isnan(row[i]) && !std::isnan(best))) best = row[i];
    y[r] = best;
  }
}

SigmoidF32Fn FusedSiluRow(const Node& node) {
  if (node.op_type != "FusedConv" || node.domain != kSparqDomain || node.attr_string("activation", "") != "Silu")
    return nullptr;
  return SelectCpuKernel(CpuOp::kSigmoidF32).get<SigmoidF32Fn>();
}

void MeanRowsPortable(const float* x, int64_t rows, int64_t n, float* y) {
  constexpr int64_t kRows = 8;  // independent sums in flight: each add waits only for its own row's last
  int64_t r = 0;
  for (; r + kRows <= rows; r += kRows) {
    double s[kRows] = {};
    const float* base = x + r * n;
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < kRows; ++j) s[j] += static_cast<double>(base[j * n + i]);
    for (int64_t j = 0; j < kRows; ++j) y[r + j] = static_cast<float>(s[j] / static_cast<double>(n));
  }
  for (; r < rows; ++r) y[r] = reduce_common::MeanOfRowRef(x + r * n, n);
}

}  // namespace cpu

void RegisterCpuActivationF32Ops(KernelRegistry& r) {
  r.Add({"Erf", "", 9, 99, RunErfF32, "erf_f32", WithoutContext(PrepareRow<CpuOp::kErfF32>, RowKernel)});
  r.Add({"Softmax", "", 1, 99, RunSoftmaxF32, "softmax_f32", WithoutContext(PrepareSoftmax, RowKernel)});
  r.Add({"Pow", "", 7, 99, RunPow2F32, "pow2_f32", WithoutContext(PrepareRow<CpuOp::kPow2F32>, RowKernel)});
  r.Add({"ReduceMean", "", 1, 99, RunMeanLastAxisF32, "mean_rows_f32",
         WithoutContext(PrepareRow<CpuOp::kMeanRowsF32>, RowKernel)});
  r.Add({"ReduceSum", "", 1, 99, RunSumLastAxisF32, "sum_rows_f32"});
  r.Add({"ReduceMax", "", 1, 99, RunMaxTrailingF32, "max_rows_f32",
         WithoutContext(PrepareRow<CpuOp::kMaxRowsF32>, RowKernel)});
  r.Add({"ReduceMin", "", 1, 99, RunMinTrailingF32, "min_rows_f32", nullptr, kPriorityFast});
  // Reads x[i] before it stores y[i]: output 0 may go over input 0.
  r.Add({"Sqrt", "", 6, 99, RunSqrtF32, "sqrt_f32", nullptr, kPriorityFast, 0, 0b1});
  r.Add({"GlobalAveragePool", "", 1, 99, RunGlobalPoolF32<MeanRowsF32Fn>, "mean_rows_f32",
         WithoutContext(PrepareRow<CpuOp::kMeanRowsF32>, RowKernel)});
  r.Add({"GlobalMaxPool", "", 1, 99, RunGlobalPoolF32<MaxRowsF32Fn>, "max_rows_f32",
         WithoutContext(PrepareRow<CpuOp::kMaxRowsF32>, RowKernel)});
  r.Add({"Tanh", "", 6, 99, RunTanhF32, "tanh_f32", WithoutContext(PrepareRow<CpuOp::kTanhF32>, RowKernel)});
  // The clip_f32 rows read x[i] (a vector at a time, or one) before they
  // store y[i]: output 0 may go over input 0 (KernelDef::overwritable_inputs).
  r.Add({"Relu", "", 6, 99, RunReluF32, "clip_f32", WithoutContext(PrepareRow<CpuOp::kClipF32>, RowKernel),
         kPriorityFast, 0, 0b1});
  r.Add({"Clip", "", 6, 99, RunClipF32, "clip_f32", WithoutContext(PrepareRow<CpuOp::kClipF32>, RowKernel),
         kPriorityFast, 0, 0b1});
  r.Add({"Sigmoid", "", 6, 99, RunSigmoidF32<false>, "sigmoid_f32",
         WithoutContext(PrepareRow<CpuOp::kSigmoidF32>, RowKernel)});
  r.Add({"Silu", kSparqDomain, 1, 99, RunSigmoidF32<true>, "sigmoid_f32",
         WithoutContext(PrepareRow<CpuOp::kSigmoidF32>, RowKernel)});
  r.Add({"HardSwishChain", kSparqDomain, 1, 99, RunHardSwishChainF32, "hardswish_chain_f32",
         WithoutContext(PrepareRow<CpuOp::kHardSwishChainF32>, RowKernel)});
  r.Add({"GeluErfChain", kSparqDomain, 1, 99, RunGeluErfChainF32, "gelu_erf_chain_f32",
         WithoutContext(PrepareRow<CpuOp::kGeluErfChainF32>, RowKernel)});
  r.Add({"GeluErfScaledChain", kSparqDomain, 1, 99, RunGeluErfScaledChainF32, "erf_f32",
         WithoutContext(PrepareRow<CpuOp::kErfF32>, RowKernel)});
  r.Add({"GeluTanhChain", kSparqDomain, 1, 99, RunGeluTanhChainF32, "tanh_f32",
         WithoutContext(PrepareRow<CpuOp::kTanhF32>, RowKernel)});
}

}  // namespace sparq
