// The dispatch table of sparq's fast CPU kernels and the choice of ISA.
//
// Every ISA-specific function of kernels/cpu is one row of ONE table,
// {name, isa, priority, format, fn}:
//   name      <op>_<format>_<isa> (gemm_s8s8_avx512vnni, spmm_bsr4x4_f32_avx512,
//             requant_s32_avx2, lut256_avx512vbmi); `eval --verbose` prints it
//   isa       the CPU features the function needs (the column SPARQ_ISA governs)
//   priority  which row wins when several can run: the highest priority among
//             the rows of the op (and weight format) whose isa is not above the
//             active ISA. Explicit, so the choice never depends on row order;
//             rows that could compete must not share a priority (a test checks)
//   format    the packed weight format the function reads, or kNoPackedFormat
//             for ops without packed weights (requantization, tables, QDQ glue)
//   fn        the function, one type per op (CpuKernelFn)
// Every op has a portable row for every format, so every model runs on every
// x86-64 CPU (and on other architectures, where only portable rows exist).
// The op-level rows of the executor (kernels/registry.h: QLinearConv,
// QuantizeLinear, ...) pick their inner kernels here when they prepare a node
// and name them in PreparedKernel::kernel_name.
//
// The active ISA is the best the CPU supports (cpuid, checked once), lowered
// by the environment variable SPARQ_ISA=portable|f16c|avx2|avx512|avx512vnni|
// avx512vbmi, or by ForceIsa() (tests, benchmarks). Only dispatch.cc asks
// the CPU (cpuid); no kernel file checks a feature or compares ISA levels:
// a choice between versions of a function is rows of this table.
//
// Adding a kernel for an existing op: one row in dispatch.cc, e.g.
//   {"depthwise_s8_avx512vnni", VNNI, 30, NONE, DepthwiseS8Fn(cpu::DepthwiseS8ChannelsAvx512Vnni)},
// with the function compiled for its ISA (cpu_target.h: SPARQ_CPU_TARGET_BEGIN)
// and declared in internal.h. Give it a priority above the rows it should
// beat (10 per ISA level today; 5 for F16C).
// CpuKernelTable.EveryTableRowIsExercised then checks it against kernels/ref
// on this CPU, with no test edit.
// Adding an op (say a LayerNorm row):
//   1. its arguments: a struct in kernel_args.h (or plain parameters), and the
//      function type `using LayerNormF32Fn = void (*)(const LayerNormF32Args&);`
//      below, with a comment that states what it computes. When another op
//      has the same signature, tag it so that the type still names the op:
//      `using LayerNormF32Fn = CpuOpFn<CpuOp::kLayerNormF32, void(const float*, float*, int64_t)>;`;
//   2. a CpuOp value before kNumCpuOps, the function type at the same index in
//      CpuKernelFn (a static_assert checks the count), its name in CpuOpName;
//   3. a portable row (priority 0) and the ISA rows in dispatch.cc;
//   4. the caller: SelectCpuKernel(CpuOp::kLayerNormF32) when it prepares a
//      node (keep the row; name it in PreparedKernel::kernel_name so that
//      `eval --verbose` shows it), then row.get<LayerNormF32Fn>()(args);
//   5. a case in tests/kernels/cpu_row_kernels_test.cc (CheckRowKernel) that
//      compares the row with kernels/ref (named tolerances: isa_sweep.h).
#pragma once

#include <cstdint>
#include <string>
#include <type_traits>
#include <variant>
#include <vector>

#include "kernels/cpu/kernel_args.h"
#include "sparq/status.h"

namespace sparq {

// Instruction set levels, each including the ones before it.
enum class CpuIsa : uint8_t {
  kPortable = 0,    // plain C++
  kF16c = 1,        // AVX + F16C (vcvtph2ps / vcvtps2ph): Ivy Bridge, Piledriver and later
  kAvx2 = 2,        // kF16c + AVX2 + FMA (x86-64-v3: every AVX2 CPU has F16C)
  kAvx512 = 3,      // AVX-512 F, BW, VL, DQ
  kAvx512Vnni = 4,  // kAvx512 + AVX-512 VNNI (vpdpbusd)
  kAvx512Vbmi = 5,  // kAvx512Vnni + AVX-512 VBMI (vpermi2b): Ice Lake, Zen 4 and later
};
// Every level, lowest first.
inline constexpr CpuIsa kAllCpuIsas[] = {CpuIsa::kPortable,   CpuIsa::kF16c,      CpuIsa::kAvx2,
                                         CpuIsa::kAvx512,     CpuIsa::kAvx512Vnni, CpuIsa::kAvx512Vbmi};

const char* CpuIsaName(CpuIsa isa);  // "portable", "f16c", "avx2", "avx512", "avx512vnni", "avx512vbmi"
// Parses a CpuIsaName; InvalidArgument listing the names otherwise.
StatusOr<CpuIsa> ParseCpuIsa(const std::string& name);

// The best ISA this CPU (and OS) supports. Thread safe.
CpuIsa DetectedIsa();
// The ISA kernels are chosen for: DetectedIsa(), lowered by SPARQ_ISA or ForceIsa.
CpuIsa ActiveIsa();
// Why SPARQ_ISA was ignored (unknown name, or an ISA this CPU lacks), or OK.
// The environment is read once, at the first ActiveIsa() call.
Status IsaEnvironmentStatus();
// Makes `isa` the active ISA; InvalidArgument when the CPU lacks it. Affects
// every thread; meant for tests and benchmarks, not for concurrent use with
// running kernels.
Status ForceIsa(CpuIsa isa);
// Undoes ForceIsa: back to SPARQ_ISA or the detected ISA.
void ResetIsa();

// The ops of the table and their function types.
enum class CpuOp : uint8_t {
  kGemmS8,
  kSpmmBsrF32,
  kSpmmBsrS8,
  kSpmmNmF32,
  kSpmmNmS8,
  kGemmF32,
  kDepthwiseF32,    // channels of one image of an FP32 depthwise convolution
  kDepthwiseS8,     // channels of one image of an INT8 depthwise convolution, requantized (and a table)
  kRequantS32,      // a row of int32 accumulators to int8 / uint8
  kLut256,          // a 256-entry byte table over a byte array
  kQuantizeF32,     // per-tensor QuantizeLinear of a float row
  kDequantizeS8,    // per-tensor DequantizeLinear of a byte row
  kQLinearAddS8,    // sparq.QLinearAdd of two byte rows
  kMaxPool2d,       // 2-D MaxPool of float32 / int8 / uint8 planes
  kErfF32,          // Erf of a float row
  kSoftmaxF32,      // Softmax of one float row (the last axis)
  kPow2F32,         // Pow(x, 2) of a float row
  kConvertF16F32,   // float16 -> float32 row
  kConvertF32F16,   // float32 -> float16 row
  kMinMaxF32,       // the range of a float row (DynamicQuantizeLinear)
  kBinaryF32,       // Add / Sub / Mul / Div of float rows, either side repeated (broadcasting)
  kQLinearMulS8,    // sparq.QLinearMul of two byte rows
  kMeanRowsF32,     // ReduceMean of float rows (the last axis: LayerNorm's mean and variance)
  kConvS8,          // INT8 convolution in NCHW, requantized (and a table) in the tile's output stage
  kSigmoidF32,      // Sigmoid of a float row, or x * Sigmoid(x) (SiLU)
  kClipF32,         // Clip of a float row to [lo, hi]
  kScaleShiftF32,   // x * a + b of a float row (BatchNormalization)
  kLayerNormF32,    // LayerNormalization of float rows
  kConvTransposeF32,  // a float ConvTranspose whose stride equals its kernel
  kResizeNearest,   // nearest-neighbour upsampling by whole factors (any element size)
  kHardSwishChainF32,  // Paddle's HardSwish x * Clip(x + a, lo, hi) / d of a float row (sparq.HardSwishChain)
  kAbsHistogramF32,  // a float row counted into a histogram of |x| (calibration)
  kGeluErfChainF32,    // BERT's GELU (x * (Erf(x / d) + a)) * h of a float row (sparq.GeluErfChain)
  kSoftmaxColumnsF32,  // Softmax over an axis that is not the last: columns side by side
  kAttentionF32,       // one head of sparq.Attention: MatMul, scale, mask, Softmax, MatMul
  kPointwiseDepthwiseF32,  // sparq.PointwiseDepthwise: a 1x1 convolution into a depthwise one, 32 channels a call
  kXLogYSumF64,            // sum of x log y over double rows (calibration's KL threshold search)
  kTanhF32,                // Tanh of a float row
  kMaxRowsF32,             // the maximum of each float row (GlobalMaxPool), NaN first
  kMatMulNBitsF32,         // com.microsoft MatMulNBits: float rows times block-wise 4-bit weights
  kGemvF32,                // a few float rows times FP32 GEMM weights packed as strips (LSTM / GRU steps)
  kLayerNormChainF32,      // sparq.LayerNormChain of float rows (LayerNorm as exported below opset 17)
  kRoundF16F32,            // float32 rounded to float16 and back (sparq.RoundToFloat16)
  kNumCpuOps,
};
const char* CpuOpName(CpuOp op);

using GemmS8Fn = void (*)(const GemmS8Args&);
using SpmmBsrF32Fn = void (*)(const SpmmBsrF32Args&);
using SpmmBsrS8Fn = void (*)(const SpmmBsrS8Args&);
using SpmmNmF32Fn = void (*)(const SpmmNmF32Args&);
using SpmmNmS8Fn = void (*)(const SpmmNmS8Args&);
using GemmF32Fn = void (*)(const GemmF32Args&);
// Planes of consecutive channels of an FP32 depthwise convolution, bias and
// clamp (DepthwiseF32Channels in kernel_args.h).
using DepthwiseF32Fn = void (*)(const DepthwiseF32Channels&);
// Requantized planes of consecutive channels of an INT8 depthwise
// convolution, then the table if any, bit for bit the reference
// (DepthwiseS8Channels in kernel_args.h).
using DepthwiseS8Fn = void (*)(const DepthwiseS8Channels&);
// Requantizes n accumulators exactly like RequantizeS32Ref<int8_t or uint8_t>
// (kernels/ref/quantize.h); `out` points to int8_t (out_signed) or uint8_t.
using RequantS32Fn = void (*)(int64_t n, const int32_t* acc, const int32_t* bias, int64_t bias_stride,
                              const float* multiplier, int64_t multiplier_stride, int32_t zero_point, bool fuse_relu,
                              bool out_signed, void* out);
// out[i] = table[in[i] ^ flip] for i < n; `out` may be `in`.
using Lut256Fn = void (*)(const uint8_t* table, uint8_t flip, const uint8_t* in, uint8_t* out, int64_t n);
// Bit for bit QuantizeValue / DequantizeValue of kernels/ref/quantize.h over n
// contiguous values; bytes are int8_t when the *_signed flag is set, else uint8_t.
//   quantize:     y[i] = QuantizeValue(x[i], scale, zero_point)
//   dequantize:   y[i] = DequantizeValue(x[i], scale, zero_point)
//   qlinear_add:  y[i] = QuantizeValue(DequantizeValue(a[i]) + DequantizeValue(b[i]), y_scale, y_zp)
using QuantizeF32Fn = void (*)(int64_t n, const float* x, float scale, int32_t zero_point, bool out_signed, void* y);
using DequantizeS8Fn = void (*)(int64_t n, const void* x, bool x_signed, float scale, int32_t zero_point, float* y);
using QLinearAddS8Fn = void (*)(int64_t n, const void* a, float a_scale, int32_t a_zp, const void* b, float b_scale,
                                int32_t b_zp, float y_scale, int32_t y_zp, bool is_signed, void* y);
using MaxPool2dFn = void (*)(const MaxPool2dArgs&);

// A function pointer of signature Sig whose type also names its op, for ops
// that share a signature (the variant below needs one type per op). Built
// from the function, called like it: ErfF32Fn(cpu::ErfRowPortable)(x, y, n).
template <CpuOp kOp, typename Sig>
class CpuOpFn {
 public:
  using Ptr = Sig*;
  constexpr explicit CpuOpFn(Ptr fn) : fn_(fn) {}
  constexpr operator Ptr() const { return fn_; }  // NOLINT: callable as the function

 private:
  Ptr fn_;
};
// y[i] = f(x[i]) for i < n (float rows; each result depends on x[i] alone):
//   erf_f32   f = erf; portable: std::erf (the reference's bits); faster rows
//             within cpu::kErfF32AbsTol (kernels/cpu/activation_f32.h).
//   pow2_f32  f(x) = x * x, the reference's bits (rounded once) on every row.
using ErfF32Fn = CpuOpFn<CpuOp::kErfF32, void(const float* x, float* y, int64_t n)>;
using Pow2F32Fn = CpuOpFn<CpuOp::kPow2F32, void(const float* x, float* y, int64_t n)>;
// y = softmax(x) over one row of n values (n may be 0); portable: the
// reference's bits (kernels/ref/softmax.cc), faster rows within
// cpu::kSoftmaxF32AbsTol.
using SoftmaxF32Fn = CpuOpFn<CpuOp::kSoftmaxF32, void(const float* x, float* y, int64_t n)>;
// n float16 values (IEEE binary16 bits) to float32 and back, bit for bit the
// reference's HalfToFloat / FloatToHalf (include/sparq/tensor.h): exact, and
// round to nearest even.
using ConvertF16F32Fn = void (*)(const uint16_t* src, float* dst, int64_t n);
using ConvertF32F16Fn = void (*)(const float* src, uint16_t* dst, int64_t n);
// Widens [*lo, *hi] to hold every non-NaN x[i], i < n, exactly as
// MinMaxRef (kernels/ref/quantize.h): NaN is ignored, and a bound only moves
// for a value strictly beyond it (so 0 stays +0 for -0 inputs). Exact, so
// chunks may be reduced in any order.
using MinMaxF32Fn = void (*)(const float* x, int64_t n, float* lo, float* hi);
// The four float32 operations of binary_f32, one IEEE operation per element
// (the reference's bits on every row).
enum class BinaryF32Op : uint8_t { kAdd, kSub, kMul, kDiv };
// y[i] = a[i * a_step] op b[i * b_step] for i < n, each step 0 (one value
// repeated: broadcasting) or 1; y does not alias a or b unless the step is 1.
using BinaryF32Fn = void (*)(BinaryF32Op op, int64_t n, const float* a, int64_t a_step, const float* b,
                             int64_t b_step, float* y);
//   qlinear_mul:  y[i] = QuantizeValue(DequantizeValue(a[i]) * DequantizeValue(b[i]), y_scale, y_zp)
// (QLinearAddS8Fn's signature, tagged with its op.)
using QLinearMulS8Fn = CpuOpFn<CpuOp::kQLinearMulS8, void(int64_t n, const void* a, float a_scale, int32_t a_zp,
                                                          const void* b, float b_scale, int32_t b_zp, float y_scale,
                                                          int32_t y_zp, bool is_signed, void* y)>;
// y[r] = MeanOfRowRef(x + r * n, n) for r < rows (kernels/ref/reduce_common.h):
// each row summed in order in double, the reference's bits.
using MeanRowsF32Fn = void (*)(const float* x, int64_t rows, int64_t n, float* y);
// The INT8 NCHW convolution of ConvS8Args (kernel_args.h), bit for bit the reference.
using ConvS8Fn = void (*)(const ConvS8Args&);
// y[i] = 1 / (1 + e^-x[i]), or x[i] times that when `times_x` (SiLU, YOLO's
// activation); portable: the reference's bits (kernels/ref Sigmoid, then the
// float product of Mul); faster rows within cpu::kSigmoidF32AbsTol of the
// sigmoid (times |x| for SiLU).
using SigmoidF32Fn = void (*)(const float* x, float* y, int64_t n, bool times_x);
// y[i] = min(max(x[i], lo), hi) exactly as kernels/ref Clip: x < lo ? lo : x,
// then > hi ? hi : that (NaN stays NaN); the reference's bits on every row.
using ClipF32Fn = void (*)(const float* x, float* y, int64_t n, float lo, float hi);
// y[i] = x[i] * a + b, the product rounded before the sum (the reference
// BatchNormalization's bits). (ClipF32Fn's signature, tagged with its op.)
using ScaleShiftF32Fn = CpuOpFn<CpuOp::kScaleShiftF32, void(const float* x, float* y, int64_t n, float a, float b)>;
// Each of `rows` rows of n values (n > 0) as kernels/ref/norm.cc's
// LayerNormalization computes it: m, v = mean and population variance summed
// in order in double; y[j] = float((x[j] - m) * (1 / sqrt(v + epsilon)) *
// scale[j] + bias[j]) in double. The reference's bits.
using LayerNormF32Fn = void (*)(const float* x, int64_t rows, int64_t n, const double* scale, const double* bias,
                                double epsilon, float* y);
// ConvTransposeF32Args (kernel_args.h): the reference's bits.
using ConvTransposeF32Fn = void (*)(const ConvTransposeF32Args&);
// ResizeNearestArgs (kernel_args.h): a copy, the reference's bytes.
using ResizeNearestFn = void (*)(const ResizeNearestArgs&);
// y[i] = (x[i] * clip(x[i] + offset, lo, hi)) / divisor, each operation
// rounded to float in that order, the clip as ClipF32Fn's: the reference's
// bits (sparq.HardSwishChain: the Add, Clip, Mul and Div it replaces).
using HardSwishChainF32Fn = CpuOpFn<CpuOp::kHardSwishChainF32, void(const float* x, float* y, int64_t n, float offset,
                                                                    float lo, float hi, float divisor)>;
// AbsHistogramRef (kernels/ref/quantize.h): counts[min(int64(|x[i]| * scale),
// last)] += 1 for i < n, the product in double; NaNs not counted, their
// number returned. Integer counts: the reference's on every row.
using AbsHistogramF32Fn = int64_t (*)(const float* x, int64_t n, double scale, int64_t last, int64_t* counts);
// y[i] = (x[i] * (erf(x[i] / divisor) + offset)) * scale, each operation
// rounded to float in that order, erf as the ErfF32Fn row of the same ISA
// computes it: the bits of the Div, Erf, Add, Mul and Mul it replaces on the
// rows of that ISA (sparq.GeluErfChain); the portable row the reference's.
using GeluErfChainF32Fn = CpuOpFn<CpuOp::kGeluErfChainF32, void(const float* x, float* y, int64_t n, float divisor,
                                                                float offset, float scale)>;
// Softmax of `width` columns side by side over an axis of n values `stride`
// apart: column c is x[c], x[c + stride], ..., x[c + (n - 1) * stride] (and
// y likewise); each column on its own, so any split of the columns gives the
// same bits. The portable row is the reference's computation (its bits),
// faster ones within cpu::kSoftmaxF32AbsTol.
using SoftmaxColumnsF32Fn = CpuOpFn<CpuOp::kSoftmaxColumnsF32, void(const float* x, float* y, int64_t n,
                                                                    int64_t stride, int64_t width)>;
// One head of sparq.Attention (AttentionF32Args in kernel_args.h); within
// cpu::kAttentionF32RelTol of the unfused nodes' reference.
using AttentionF32Fn = void (*)(const AttentionF32Args&);
// Bands of output rows of up to 32 channels of sparq.PointwiseDepthwise
// (PointwiseDepthwiseF32 in kernel_args.h): within testing::kF32RelTol of
// the reference's Conv, clamp, Conv, clamp.
using PointwiseDepthwiseF32Fn = void (*)(const PointwiseDepthwiseF32&);
// sum of x[i] * log(y[i] / z[i]) over i < n (z null: x[i] * log(y[i])),
// each ratio > 0 (XLogYSumRef, kernels/ref/quantize.h); portable: the
// reference's bits, faster rows within cpu::kXLogYSumF64RelTol of the sum of
// the terms' magnitudes.
using XLogYSumF64Fn = double (*)(const double* x, const double* y, const double* z, int64_t n);
// y[i] = tanh(x[i]) for i < n; portable: std::tanh on float (the reference's
// bits); faster rows within cpu::kTanhF32AbsTol (and exact for |x| below 2^-12
// and for signed zeros, infinities, NaN).
using TanhF32Fn = CpuOpFn<CpuOp::kTanhF32, void(const float* x, float* y, int64_t n)>;
// y[r] = the maximum of row r (x + r * n, n > 0) as kernels/ref GlobalMaxPool
// picks it: the first value, replaced by each later one that is greater, a
// NaN counting as greater than any number (so the row's first NaN wins, and of
// equal values, such as -0 and +0, the first). The reference's bits on every row.
using MaxRowsF32Fn = CpuOpFn<CpuOp::kMaxRowsF32, void(const float* x, int64_t rows, int64_t n, float* y)>;
// MatMulNBitsF32Args (kernel_args.h): the weights decoded per block as
// kernels/ref/matmul_nbits.h's reference does ((code - zp) * scale, exact),
// the sums in another order: within testing::kF32RelTol of the reference
// (relative to the largest |y| of the call). Each column's result does not
// depend on [n0, n1), so any split over threads gives the same bits.
using MatMulNBitsF32Fn = void (*)(const MatMulNBitsF32Args&);
// GemvF32Args (kernel_args.h) on the strips of a PackedGemmF32 in the row's
// format: gemm_f32's bits on the same ISA (each output summed in k order,
// then its bias), so any m, strip range and thread count give the same bits.
using GemvF32Fn = void (*)(const GemvF32Args&);
// Each of `rows` rows of n values (n > 0) through sparq.LayerNormChain's
// unfused nodes on the reference kernels: mean = float(in-order double sum /
// n) (ReduceMean), d = x - mean, the float square d * d, var = float(in-order
// double sum of the squares / n), sd = sqrt(var + epsilon) in float,
// y = (d / sd) * gamma[i] (+ beta[i] when beta is not null), each a float
// operation. The reference's bits on every row.
// y[i] = float(half(x[i])), i < n: one pass of FloatToHalf then HalfToFloat
// (round to nearest even, overflow to infinity), bit for bit the reference's
// sparq.RoundToFloat16 (kernels/ref/elementwise_activation.cc); y may be x.
using RoundF16F32Fn = CpuOpFn<CpuOp::kRoundF16F32, void(const float* x, float* y, int64_t n)>;
using LayerNormChainF32Fn = void (*)(const float* x, int64_t rows, int64_t n, float epsilon, const float* gamma,
                                     const float* beta, float* y);
// The variant's alternative index is the CpuOp.
using CpuKernelFn = std::variant<GemmS8Fn, SpmmBsrF32Fn, SpmmBsrS8Fn, SpmmNmF32Fn, SpmmNmS8Fn, GemmF32Fn,
                                 DepthwiseF32Fn, DepthwiseS8Fn, RequantS32Fn, Lut256Fn, QuantizeF32Fn,
                                 DequantizeS8Fn, QLinearAddS8Fn, MaxPool2dFn, ErfF32Fn, SoftmaxF32Fn, Pow2F32Fn,
                                 ConvertF16F32Fn, ConvertF32F16Fn, MinMaxF32Fn, BinaryF32Fn, QLinearMulS8Fn,
                                 MeanRowsF32Fn, ConvS8Fn, SigmoidF32Fn, ClipF32Fn, ScaleShiftF32Fn, LayerNormF32Fn,
                                 ConvTransposeF32Fn, ResizeNearestFn, HardSwishChainF32Fn,
                                 AbsHistogramF32Fn, GeluErfChainF32Fn, SoftmaxColumnsF32Fn, AttentionF32Fn,
                                 PointwiseDepthwiseF32Fn, XLogYSumF64Fn, TanhF32Fn, MaxRowsF32Fn,
                                 MatMulNBitsF32Fn, GemvF32Fn, LayerNormChainF32Fn, RoundF16F32Fn>;
static_assert(std::variant_size_v<CpuKernelFn> == static_cast<size_t>(CpuOp::kNumCpuOps),
              "one function type per CpuOp");
// CpuKernelDef::op() reads the op from the alternative's index: each
// alternative must sit at its op's index, or a row would report another op.
namespace internal {
template <CpuOp kOp, typename Fn>
inline constexpr bool AltIs = std::is_same_v<std::variant_alternative_t<static_cast<size_t>(kOp), CpuKernelFn>, Fn>;
}  // namespace internal
static_assert(internal::AltIs<CpuOp::kGemmS8, GemmS8Fn>, "CpuKernelFn: GemmS8Fn must be alternative CpuOp::kGemmS8");
static_assert(internal::AltIs<CpuOp::kSpmmBsrF32, SpmmBsrF32Fn>, "CpuKernelFn: SpmmBsrF32Fn must be alternative CpuOp::kSpmmBsrF32");
static_assert(internal::AltIs<CpuOp::kSpmmBsrS8, SpmmBsrS8Fn>, "CpuKernelFn: SpmmBsrS8Fn must be alternative CpuOp::kSpmmBsrS8");
static_assert(internal::AltIs<CpuOp::kSpmmNmF32, SpmmNmF32Fn>, "CpuKernelFn: SpmmNmF32Fn must be alternative CpuOp::kSpmmNmF32");
static_assert(internal::AltIs<CpuOp::kSpmmNmS8, SpmmNmS8Fn>, "CpuKernelFn: SpmmNmS8Fn must be alternative CpuOp::kSpmmNmS8");
static_assert(internal::AltIs<CpuOp::kGemmF32, GemmF32Fn>, "CpuKernelFn: GemmF32Fn must be alternative CpuOp::kGemmF32");
static_assert(internal::AltIs<CpuOp::kDepthwiseF32, DepthwiseF32Fn>, "CpuKernelFn: DepthwiseF32Fn must be alternative CpuOp::kDepthwiseF32");
static_assert(internal::AltIs<CpuOp::kDepthwiseS8, DepthwiseS8Fn>, "CpuKernelFn: DepthwiseS8Fn must be alternative CpuOp::kDepthwiseS8");
static_assert(internal::AltIs<CpuOp::kRequantS32, RequantS32Fn>, "CpuKernelFn: RequantS32Fn must be alternative CpuOp::kRequantS32");
static_assert(internal::AltIs<CpuOp::kLut256, Lut256Fn>, "CpuKernelFn: Lut256Fn must be alternative CpuOp::kLut256");
static_assert(internal::AltIs<CpuOp::kQuantizeF32, QuantizeF32Fn>, "CpuKernelFn: QuantizeF32Fn must be alternative CpuOp::kQuantizeF32");
static_assert(internal::AltIs<CpuOp::kDequantizeS8, DequantizeS8Fn>, "CpuKernelFn: DequantizeS8Fn must be alternative CpuOp::kDequantizeS8");
static_assert(internal::AltIs<CpuOp::kQLinearAddS8, QLinearAddS8Fn>, "CpuKernelFn: QLinearAddS8Fn must be alternative CpuOp::kQLinearAddS8");
static_assert(internal::AltIs<CpuOp::kMaxPool2d, MaxPool2dFn>, "CpuKernelFn: MaxPool2dFn must be alternative CpuOp::kMaxPool2d");
static_assert(internal::AltIs<CpuOp::kErfF32, ErfF32Fn>, "CpuKernelFn: ErfF32Fn must be alternative CpuOp::kErfF32");
static_assert(internal::AltIs<CpuOp::kSoftmaxF32, SoftmaxF32Fn>, "CpuKernelFn: SoftmaxF32Fn must be alternative CpuOp::kSoftmaxF32");
static_assert(internal::AltIs<CpuOp::kPow2F32, Pow2F32Fn>, "CpuKernelFn: Pow2F32Fn must be alternative CpuOp::kPow2F32");
static_assert(internal::AltIs<CpuOp::kConvertF16F32, ConvertF16F32Fn>, "CpuKernelFn: ConvertF16F32Fn must be alternative CpuOp::kConvertF16F32");
static_assert(internal::AltIs<CpuOp::kConvertF32F16, ConvertF32F16Fn>, "CpuKernelFn: ConvertF32F16Fn must be alternative CpuOp::kConvertF32F16");
static_assert(internal::AltIs<CpuOp::kMinMaxF32, MinMaxF32Fn>, "CpuKernelFn: MinMaxF32Fn must be alternative CpuOp::kMinMaxF32");
static_assert(internal::AltIs<CpuOp::kBinaryF32, BinaryF32Fn>, "CpuKernelFn: BinaryF32Fn must be alternative CpuOp::kBinaryF32");
static_assert(internal::AltIs<CpuOp::kQLinearMulS8, QLinearMulS8Fn>, "CpuKernelFn: QLinearMulS8Fn must be alternative CpuOp::kQLinearMulS8");
static_assert(internal::AltIs<CpuOp::kMeanRowsF32, MeanRowsF32Fn>, "CpuKernelFn: MeanRowsF32Fn must be alternative CpuOp::kMeanRowsF32");
static_assert(internal::AltIs<CpuOp::kConvS8, ConvS8Fn>, "CpuKernelFn: ConvS8Fn must be alternative CpuOp::kConvS8");
static_assert(internal::AltIs<CpuOp::kSigmoidF32, SigmoidF32Fn>, "CpuKernelFn: SigmoidF32Fn must be alternative CpuOp::kSigmoidF32");
static_assert(internal::AltIs<CpuOp::kClipF32, ClipF32Fn>, "CpuKernelFn: ClipF32Fn must be alternative CpuOp::kClipF32");
static_assert(internal::AltIs<CpuOp::kScaleShiftF32, ScaleShiftF32Fn>, "CpuKernelFn: ScaleShiftF32Fn must be alternative CpuOp::kScaleShiftF32");
static_assert(internal::AltIs<CpuOp::kLayerNormF32, LayerNormF32Fn>, "CpuKernelFn: LayerNormF32Fn must be alternative CpuOp::kLayerNormF32");
static_assert(internal::AltIs<CpuOp::kConvTransposeF32, ConvTransposeF32Fn>, "CpuKernelFn: ConvTransposeF32Fn must be alternative CpuOp::kConvTransposeF32");
static_assert(internal::AltIs<CpuOp::kResizeNearest, ResizeNearestFn>, "CpuKernelFn: ResizeNearestFn must be alternative CpuOp::kResizeNearest");
static_assert(internal::AltIs<CpuOp::kHardSwishChainF32, HardSwishChainF32Fn>, "CpuKernelFn: HardSwishChainF32Fn must be alternative CpuOp::kHardSwishChainF32");
static_assert(internal::AltIs<CpuOp::kAbsHistogramF32, AbsHistogramF32Fn>, "CpuKernelFn: AbsHistogramF32Fn must be alternative CpuOp::kAbsHistogramF32");
static_assert(internal::AltIs<CpuOp::kGeluErfChainF32, GeluErfChainF32Fn>, "CpuKernelFn: GeluErfChainF32Fn must be alternative CpuOp::kGeluErfChainF32");
static_assert(internal::AltIs<CpuOp::kSoftmaxColumnsF32, SoftmaxColumnsF32Fn>, "CpuKernelFn: SoftmaxColumnsF32Fn must be alternative CpuOp::kSoftmaxColumnsF32");
static_assert(internal::AltIs<CpuOp::kAttentionF32, AttentionF32Fn>, "CpuKernelFn: AttentionF32Fn must be alternative CpuOp::kAttentionF32");
static_assert(internal::AltIs<CpuOp::kPointwiseDepthwiseF32, PointwiseDepthwiseF32Fn>, "CpuKernelFn: PointwiseDepthwiseF32Fn must be alternative CpuOp::kPointwiseDepthwiseF32");
static_assert(internal::AltIs<CpuOp::kXLogYSumF64, XLogYSumF64Fn>, "CpuKernelFn: XLogYSumF64Fn must be alternative CpuOp::kXLogYSumF64");
static_assert(internal::AltIs<CpuOp::kTanhF32, TanhF32Fn>, "CpuKernelFn: TanhF32Fn must be alternative CpuOp::kTanhF32");
static_assert(internal::AltIs<CpuOp::kMaxRowsF32, MaxRowsF32Fn>, "CpuKernelFn: MaxRowsF32Fn must be alternative CpuOp::kMaxRowsF32");
static_assert(internal::AltIs<CpuOp::kLayerNormChainF32, LayerNormChainF32Fn>, "CpuKernelFn: LayerNormChainF32Fn must be alternative CpuOp::kLayerNormChainF32");
static_assert(internal::AltIs<CpuOp::kRoundF16F32, RoundF16F32Fn>, "CpuKernelFn: RoundF16F32Fn must be alternative CpuOp::kRoundF16F32");
static_assert(internal::AltIs<CpuOp::kMatMulNBitsF32, MatMulNBitsF32Fn>, "CpuKernelFn: MatMulNBitsF32Fn must be alternative CpuOp::kMatMulNBitsF32");
static_assert(internal::AltIs<CpuOp::kGemvF32, GemvF32Fn>, "CpuKernelFn: GemvF32Fn must be alternative CpuOp::kGemvF32");

// The format column of rows whose op reads no packed weights.
inline constexpr PackedFormat kNoPackedFormat = static_cast<PackedFormat>(0xff);

struct CpuKernelDef {
  const char* name;     // <op>_<format>_<isa>
  CpuIsa isa;           // features the function needs
  int priority;         // the highest priority among the rows that can run wins
  PackedFormat format;  // weight format it reads, or kNoPackedFormat
  CpuKernelFn fn;

  CpuOp op() const { return static_cast<CpuOp>(fn.index()); }
  template <typename Fn>
  Fn get() const { return std::get<Fn>(fn); }
};

// Every row of the table.
const std::vector<CpuKernelDef>& CpuKernelTable();

// The row that runs `op` on weights in `format` at the active ISA (the
// highest priority among those whose isa is not above it), or nullptr when no
// row fits. Ops without packed weights pass kNoPackedFormat.
const CpuKernelDef* SelectCpuKernel(CpuOp op, PackedFormat format);
// The row of an op without packed weights at the active ISA; never fails
// (every such op has a portable row).
const CpuKernelDef& SelectCpuKernel(CpuOp op);
// The row SelectCpuKernel would pick if `isa` were active (tests, names).
const CpuKernelDef* SelectCpuKernelAt(CpuOp op, PackedFormat format, CpuIsa isa);

// The INT8 GEMM weight format whose kernel is fastest on `isa`
// (panel16x4_s8 for VNNI, portable and F16C, panel16x2_s16 for AVX2 / AVX-512).
PackedFormat PreferredGemmS8Format(CpuIsa isa);
// The FP32 GEMM weight format of `isa`'s register tile (panel8x32_f32 for
// AVX-512, panel6x16_f32 for AVX2, panel4x8_f32 for portable and F16C).
PackedFormat PreferredGemmF32Format(CpuIsa isa);

// Checked entry points: validate the arguments (InvalidArgument naming the
// field), select the kernel and run it. When `kernel_name` is not null it
// receives the name of the kernel that ran.
Status RunGemmS8(const GemmS8Args& args, const char** kernel_name = nullptr);
Status RunSpmmBsrF32(const SpmmBsrF32Args& args, const char** kernel_name = nullptr);
Status RunSpmmBsrS8(const SpmmBsrS8Args& args, const char** kernel_name = nullptr);
Status RunSpmmNmF32(const SpmmNmF32Args& args, const char** kernel_name = nullptr);
Status RunGemmF32(const GemmF32Args& args, const char** kernel_name = nullptr);
Status RunSpmmNmS8(const SpmmNmS8Args& args, const char** kernel_name = nullptr);
Status RunConvS8(const ConvS8Args& args, const char** kernel_name = nullptr);

// Builds w's panels for the spmm_nm_s8 kernel of the active ISA, to pass as
// SpmmNmS8Args::panels on every call with w (w must outlive them and not
// change). InvalidArgument when w is not an int8 N:M matrix.
StatusOr<NmS8Panels> PrepackSpmmNmS8(const NmS8& w);

}  // namespace sparq
