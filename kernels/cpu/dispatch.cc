#include "kernels/cpu/dispatch.h"

#include <atomic>
#include <cstdlib>
#include <string>

#include "kernels/cpu/activation_f32.h"
#include "kernels/cpu/attention_f32.h"
#include "kernels/cpu/convert_f16.h"
#include "kernels/cpu/internal.h"
#include "kernels/cpu/matmul_nbits_f32.h"
#include "kernels/cpu/norm_f32.h"

#if SPARQ_CPU_X86
#include <cpuid.h>
#endif

namespace sparq {

namespace {

using cpu::GemmF32Avx2;
using cpu::GemmF32Avx512;
using cpu::GemmF32Portable;
using cpu::GemmS8Avx2;
using cpu::GemmS8Avx512Vnni;
using cpu::GemmS8Portable;
using cpu::SpmmBsrF32Avx2;
using cpu::SpmmBsrF32Avx512;
using cpu::SpmmBsrF32Portable;
using cpu::SpmmBsrS8Avx2;
using cpu::SpmmBsrS8Avx512Vnni;
using cpu::SpmmBsrS8Portable;
using cpu::SpmmNmF32Avx2;
using cpu::SpmmNmF32Avx512;
using cpu::SpmmNmF32Portable;
using cpu::SpmmNmS8Avx2;
using cpu::SpmmNmS8Avx512Vnni;
using cpu::SpmmNmS8Portable;

constexpr CpuIsa P = CpuIsa::kPortable;
constexpr CpuIsa F16C = CpuIsa::kF16c;
constexpr CpuIsa AVX2 = CpuIsa::kAvx2;
constexpr CpuIsa AVX512 = CpuIsa::kAvx512;
constexpr CpuIsa VNNI = CpuIsa::kAvx512Vnni;
constexpr CpuIsa VBMI = CpuIsa::kAvx512Vbmi;
constexpr PackedFormat NONE = kNoPackedFormat;
using F = PackedFormat;

// The table: {name, isa, priority, format, fn} (see dispatch.h). A sparse
// kernel handles every block shape of its element type; it has one row per
// shape so that the name says which format ran. Priorities: the measured
// order of the rows of one op and format (today: the higher ISA is faster
// everywhere, so 0 portable, 5 F16C, 10 AVX2, 20 AVX-512, 30 VNNI, 40 VBMI).
const std::vector<CpuKernelDef>& Table() {
  static const std::vector<CpuKernelDef>* table = new std::vector<CpuKernelDef>{
      // INT8 dense GEMM. The portable kernel reads both panel formats.
      {"gemm_s8s8_portable", P, 0, F::kPanel16x4S8, GemmS8Fn(GemmS8Portable)},
      {"gemm_s8s8_s16_portable", P, 0, F::kPanel16x2S16, GemmS8Fn(GemmS8Portable)},
#if SPARQ_CPU_X86
      {"gemm_s8s8_avx2", AVX2, 10, F::kPanel16x2S16, GemmS8Fn(GemmS8Avx2)},
      {"gemm_s8s8_avx512vnni", VNNI, 30, F::kPanel16x4S8, GemmS8Fn(GemmS8Avx512Vnni)},
#endif
      // FP32 dense GEMM. The portable kernel reads every f32 panel format.
      {"gemm_f32_panel4x8_portable", P, 0, F::kPanel4x8F32, GemmF32Fn(GemmF32Portable)},
      {"gemm_f32_panel6x16_portable", P, 0, F::kPanel6x16F32, GemmF32Fn(GemmF32Portable)},
      {"gemm_f32_panel8x32_portable", P, 0, F::kPanel8x32F32, GemmF32Fn(GemmF32Portable)},
#if SPARQ_CPU_X86
      {"gemm_f32_avx2", AVX2, 10, F::kPanel6x16F32, GemmF32Fn(GemmF32Avx2)},
      {"gemm_f32_avx512", AVX512, 20, F::kPanel8x32F32, GemmF32Fn(GemmF32Avx512)},
#endif
      // FP32 GEMV on the GEMM's strips (recurrent_f32.cc runs them). The portable kernel reads every f32 format.
      {"gemv_f32_panel4x8_portable", P, 0, F::kPanel4x8F32, GemvF32Fn(cpu::GemvF32Portable)},
      {"gemv_f32_panel6x16_portable", P, 0, F::kPanel6x16F32, GemvF32Fn(cpu::GemvF32Portable)},
      {"gemv_f32_panel8x32_portable", P, 0, F::kPanel8x32F32, GemvF32Fn(cpu::GemvF32Portable)},
#if SPARQ_CPU_X86
      {"gemv_f32_avx2", AVX2, 10, F::kPanel6x16F32, GemvF32Fn(cpu::GemvF32Avx2)},
      {"gemv_f32_avx512", AVX512, 20, F::kPanel8x32F32, GemvF32Fn(cpu::GemvF32Avx512)},
#endif
      // FP32 BSR: one function per ISA handles every block shape; one row per shape.
      {"spmm_bsr1x4_f32_portable", P, 0, F::kBsr1x4F32, SpmmBsrF32Fn(SpmmBsrF32Portable)},
      {"spmm_bsr4x1_f32_portable", P, 0, F::kBsr4x1F32, SpmmBsrF32Fn(SpmmBsrF32Portable)},
      {"spmm_bsr4x4_f32_portable", P, 0, F::kBsr4x4F32, SpmmBsrF32Fn(SpmmBsrF32Portable)},
      {"spmm_bsr8x8_f32_portable", P, 0, F::kBsr8x8F32, SpmmBsrF32Fn(SpmmBsrF32Portable)},
      {"spmm_bsr16x16_f32_portable", P, 0, F::kBsr16x16F32, SpmmBsrF32Fn(SpmmBsrF32Portable)},
#if SPARQ_CPU_X86
      {"spmm_bsr1x4_f32_avx2", AVX2, 10, F::kBsr1x4F32, SpmmBsrF32Fn(SpmmBsrF32Avx2)},
      {"spmm_bsr4x1_f32_avx2", AVX2, 10, F::kBsr4x1F32, SpmmBsrF32Fn(SpmmBsrF32Avx2)},
      {"spmm_bsr4x4_f32_avx2", AVX2, 10, F::kBsr4x4F32, SpmmBsrF32Fn(SpmmBsrF32Avx2)},
      {"spmm_bsr8x8_f32_avx2", AVX2, 10, F::kBsr8x8F32, SpmmBsrF32Fn(SpmmBsrF32Avx2)},
      {"spmm_bsr16x16_f32_avx2", AVX2, 10, F::kBsr16x16F32, SpmmBsrF32Fn(SpmmBsrF32Avx2)},
      {"spmm_bsr1x4_f32_avx512", AVX512, 20, F::kBsr1x4F32, SpmmBsrF32Fn(SpmmBsrF32Avx512)},
      {"spmm_bsr4x1_f32_avx512", AVX512, 20, F::kBsr4x1F32, SpmmBsrF32Fn(SpmmBsrF32Avx512)},
      {"spmm_bsr4x4_f32_avx512", AVX512, 20, F::kBsr4x4F32, SpmmBsrF32Fn(SpmmBsrF32Avx512)},
      {"spmm_bsr8x8_f32_avx512", AVX512, 20, F::kBsr8x8F32, SpmmBsrF32Fn(SpmmBsrF32Avx512)},
      {"spmm_bsr16x16_f32_avx512", AVX512, 20, F::kBsr16x16F32, SpmmBsrF32Fn(SpmmBsrF32Avx512)},
#endif
      // INT8 BSR.
      {"spmm_bsr1x4_s8_portable", P, 0, F::kBsr1x4S8, SpmmBsrS8Fn(SpmmBsrS8Portable)},
      {"spmm_bsr4x1_s8_portable", P, 0, F::kBsr4x1S8, SpmmBsrS8Fn(SpmmBsrS8Portable)},
      {"spmm_bsr4x4_s8_portable", P, 0, F::kBsr4x4S8, SpmmBsrS8Fn(SpmmBsrS8Portable)},
      {"spmm_bsr8x8_s8_portable", P, 0, F::kBsr8x8S8, SpmmBsrS8Fn(SpmmBsrS8Portable)},
      {"spmm_bsr16x16_s8_portable", P, 0, F::kBsr16x16S8, SpmmBsrS8Fn(SpmmBsrS8Portable)},
#if SPARQ_CPU_X86
      {"spmm_bsr1x4_s8_avx2", AVX2, 10, F::kBsr1x4S8, SpmmBsrS8Fn(SpmmBsrS8Avx2)},
      {"spmm_bsr4x1_s8_avx2", AVX2, 10, F::kBsr4x1S8, SpmmBsrS8Fn(SpmmBsrS8Avx2)},
      {"spmm_bsr4x4_s8_avx2", AVX2, 10, F::kBsr4x4S8, SpmmBsrS8Fn(SpmmBsrS8Avx2)},
      {"spmm_bsr8x8_s8_avx2", AVX2, 10, F::kBsr8x8S8, SpmmBsrS8Fn(SpmmBsrS8Avx2)},
      {"spmm_bsr16x16_s8_avx2", AVX2, 10, F::kBsr16x16S8, SpmmBsrS8Fn(SpmmBsrS8Avx2)},
      {"spmm_bsr1x4_s8_avx512vnni", VNNI, 30, F::kBsr1x4S8, SpmmBsrS8Fn(SpmmBsrS8Avx512Vnni)},
      {"spmm_bsr4x1_s8_avx512vnni", VNNI, 30, F::kBsr4x1S8, SpmmBsrS8Fn(SpmmBsrS8Avx512Vnni)},
      {"spmm_bsr4x4_s8_avx512vnni", VNNI, 30, F::kBsr4x4S8, SpmmBsrS8Fn(SpmmBsrS8Avx512Vnni)},
      {"spmm_bsr8x8_s8_avx512vnni", VNNI, 30, F::kBsr8x8S8, SpmmBsrS8Fn(SpmmBsrS8Avx512Vnni)},
      {"spmm_bsr16x16_s8_avx512vnni", VNNI, 30, F::kBsr16x16S8, SpmmBsrS8Fn(SpmmBsrS8Avx512Vnni)},
#endif
      // FP32 N:M.
      {"spmm_nm24_f32_portable", P, 0, F::kNm2of4F32, SpmmNmF32Fn(SpmmNmF32Portable)},
      {"spmm_nm48_f32_portable", P, 0, F::kNm4of8F32, SpmmNmF32Fn(SpmmNmF32Portable)},
#if SPARQ_CPU_X86
      {"spmm_nm24_f32_avx2", AVX2, 10, F::kNm2of4F32, SpmmNmF32Fn(SpmmNmF32Avx2)},
      {"spmm_nm48_f32_avx2", AVX2, 10, F::kNm4of8F32, SpmmNmF32Fn(SpmmNmF32Avx2)},
      {"spmm_nm24_f32_avx512", AVX512, 20, F::kNm2of4F32, SpmmNmF32Fn(SpmmNmF32Avx512)},
      {"spmm_nm48_f32_avx512", AVX512, 20, F::kNm4of8F32, SpmmNmF32Fn(SpmmNmF32Avx512)},
#endif
      // INT8 N:M.
      {"spmm_nm24_s8_portable", P, 0, F::kNm2of4S8, SpmmNmS8Fn(SpmmNmS8Portable)},
      {"spmm_nm48_s8_portable", P, 0, F::kNm4of8S8, SpmmNmS8Fn(SpmmNmS8Portable)},
#if SPARQ_CPU_X86
      {"spmm_nm24_s8_avx2", AVX2, 10, F::kNm2of4S8, SpmmNmS8Fn(SpmmNmS8Avx2)},
      {"spmm_nm48_s8_avx2", AVX2, 10, F::kNm4of8S8, SpmmNmS8Fn(SpmmNmS8Avx2)},
      {"spmm_nm24_s8_avx512vnni", VNNI, 30, F::kNm2of4S8, SpmmNmS8Fn(SpmmNmS8Avx512Vnni)},
      {"spmm_nm48_s8_avx512vnni", VNNI, 30, F::kNm4of8S8, SpmmNmS8Fn(SpmmNmS8Avx512Vnni)},
#endif
      // FP32 depthwise convolution, channels of one image (dense_f32.cc runs it):
      // plane by plane, or 16 channels per register on small planes (lanes).
      {"depthwise_f32_portable", P, 0, NONE, DepthwiseF32Fn(cpu::DepthwiseF32ChannelsPortable)},
#if SPARQ_CPU_X86
      {"depthwise_f32_avx2", AVX2, 10, NONE, DepthwiseF32Fn(cpu::DepthwiseF32ChannelsAvx2)},
      {"depthwise_f32_lanes_avx512", AVX512, 20, NONE, DepthwiseF32Fn(cpu::DepthwiseF32ChannelsLanesAvx512)},
#endif
      // FP32 pointwise convolution into a depthwise one (dense_f32.cc runs it):
      // the portable row composes the plane kernel; AVX-512 keeps the
      // pointwise output in the lanes kernel's padded input, never in memory.
      {"pointwise_depthwise_f32_portable", P, 0, NONE, PointwiseDepthwiseF32Fn(cpu::PointwiseDepthwiseF32Portable)},
#if SPARQ_CPU_X86
      {"pointwise_depthwise_f32_lanes_avx512", AVX512, 20, NONE,
       PointwiseDepthwiseF32Fn(cpu::PointwiseDepthwiseF32LanesAvx512)},
#endif
      // INT8 depthwise convolution, channels of one image (quant_conv_depthwise.cc runs it):
      // plane by plane, or 16 channels per register on small planes (lanes).
      {"depthwise_s8_portable", P, 0, NONE, DepthwiseS8Fn(cpu::DepthwiseS8ChannelsPortable)},
#if SPARQ_CPU_X86
      {"depthwise_s8_avx2", AVX2, 10, NONE, DepthwiseS8Fn(cpu::DepthwiseS8ChannelsAvx2)},
      {"depthwise_s8_avx512", AVX512, 20, NONE, DepthwiseS8Fn(cpu::DepthwiseS8ChannelsAvx512)},
      {"depthwise_s8_avx512vnni", VNNI, 30, NONE, DepthwiseS8Fn(cpu::DepthwiseS8ChannelsAvx512Vnni)},
      {"depthwise_s8_lanes_avx512vbmi", VBMI, 40, NONE, DepthwiseS8Fn(cpu::DepthwiseS8ChannelsAvx512Vbmi)},
#endif
      // Requantization of int32 rows outside the GEMMs (depthwise). The GEMM
      // and sparse INT8 kernels use their own ISA's version inside their tiles.
      {"requant_s32_portable", P, 0, NONE, RequantS32Fn(cpu::RequantRowPortable)},
#if SPARQ_CPU_X86
      {"requant_s32_avx2", AVX2, 10, NONE, RequantS32Fn(cpu::RequantRowAvx2)},
      {"requant_s32_avx512", AVX512, 20, NONE, RequantS32Fn(cpu::RequantRowAvx512)},
#endif
      // 256-entry byte tables (QLinearLut, and the tables fused into QLinearConv / QLinearAdd).
      {"lut256_portable", P, 0, NONE, Lut256Fn(cpu::ApplyTablePortable)},
#if SPARQ_CPU_X86
      {"lut256_avx512vbmi", VBMI, 40, NONE, Lut256Fn(cpu::ApplyTableAvx512Vbmi)},
#endif
      // Per-tensor QDQ glue (qdq_glue.cc; qdq_glue_avx2.cc, qdq_glue_avx512.cc).
      {"quantize_f32_s8_portable", P, 0, NONE, QuantizeF32Fn(cpu::QuantizeRowPortable)},
      {"dequantize_s8_f32_portable", P, 0, NONE, DequantizeS8Fn(cpu::DequantizeRowPortable)},
      {"qlinear_add_s8_portable", P, 0, NONE, QLinearAddS8Fn(cpu::QLinearAddRowPortable)},
#if SPARQ_CPU_X86
      {"quantize_f32_s8_avx2", AVX2, 10, NONE, QuantizeF32Fn(cpu::QuantizeRowAvx2)},
      {"dequantize_s8_f32_avx2", AVX2, 10, NONE, DequantizeS8Fn(cpu::DequantizeRowAvx2)},
      {"qlinear_add_s8_avx2", AVX2, 10, NONE, QLinearAddS8Fn(cpu::QLinearAddRowAvx2)},
      {"quantize_f32_s8_avx512", AVX512, 20, NONE, QuantizeF32Fn(cpu::QuantizeRowAvx512)},
      {"qlinear_add_s8_avx512", AVX512, 20, NONE, QLinearAddS8Fn(cpu::QLinearAddRowAvx512)},
#endif
      // MaxPool (pool.cc): plain C++ that the compiler vectorizes for the build's baseline;
      // float32 interiors in AVX2 / AVX-512 registers (maxpool_f32_simd.cc).
      {"maxpool2d_portable", P, 0, NONE, MaxPool2dFn(cpu::MaxPool2dPortable)},
#if SPARQ_CPU_X86
      {"maxpool2d_avx2", AVX2, 10, NONE, MaxPool2dFn(cpu::MaxPool2dAvx2)},
      {"maxpool2d_avx512", AVX512, 20, NONE, MaxPool2dFn(cpu::MaxPool2dAvx512)},
#endif
      // Float rows of transformer models (activation_f32.cc runs them).
      {"erf_f32_portable", P, 0, NONE, ErfF32Fn(cpu::ErfRowPortable)},
      {"softmax_f32_portable", P, 0, NONE, SoftmaxF32Fn(cpu::SoftmaxRowPortable)},
      {"pow2_f32_portable", P, 0, NONE, Pow2F32Fn(cpu::Pow2RowPortable)},
#if SPARQ_CPU_X86
      {"erf_f32_avx2", AVX2, 10, NONE, ErfF32Fn(cpu::ErfRowAvx2)},
      {"erf_f32_avx512", AVX512, 20, NONE, ErfF32Fn(cpu::ErfRowAvx512)},
      {"softmax_f32_avx2", AVX2, 10, NONE, SoftmaxF32Fn(cpu::SoftmaxRowAvx2)},
      {"softmax_f32_avx512", AVX512, 20, NONE, SoftmaxF32Fn(cpu::SoftmaxRowAvx512)},
#endif
      // sparq.Attention, one head per call (attention_f32.cc runs them).
      {"attention_f32_portable", P, 0, NONE, AttentionF32Fn(cpu::AttentionHeadPortable)},
#if SPARQ_CPU_X86
      {"attention_f32_avx2", AVX2, 10, NONE, AttentionF32Fn(cpu::AttentionHeadAvx2)},
      {"attention_f32_avx512", AVX512, 20, NONE, AttentionF32Fn(cpu::AttentionHeadAvx512)},
#endif
      // Softmax over an axis that is not the last (YOLO's DFL head): lanes across the columns.
      {"softmax_columns_f32_portable", P, 0, NONE, SoftmaxColumnsF32Fn(cpu::SoftmaxColumnsPortable)},
#if SPARQ_CPU_X86
      {"softmax_columns_f32_avx512", AVX512, 20, NONE, SoftmaxColumnsF32Fn(cpu::SoftmaxColumnsAvx512)},
#endif
      // float16 <-> float32 rows (convert_f16.cc; the float16 lowering of runtime/passes/fp16_lowering.cc).
      {"convert_f16_f32_portable", P, 0, NONE, ConvertF16F32Fn(cpu::HalfToFloatRowPortable)},
      {"convert_f32_f16_portable", P, 0, NONE, ConvertF32F16Fn(cpu::FloatToHalfRowPortable)},
#if SPARQ_CPU_X86
      {"convert_f16_f32_f16c", F16C, 5, NONE, ConvertF16F32Fn(cpu::HalfToFloatRowF16c)},
      {"convert_f32_f16_f16c", F16C, 5, NONE, ConvertF32F16Fn(cpu::FloatToHalfRowF16c)},
#endif
      // float32 -> float16 -> float32 in one pass (sparq.RoundToFloat16, tensor_copy.cc).
      {"round_f16_f32_portable", P, 0, NONE, RoundF16F32Fn(cpu::RoundToHalfRowPortable)},
#if SPARQ_CPU_X86
      {"round_f16_f32_f16c", F16C, 5, NONE, RoundF16F32Fn(cpu::RoundToHalfRowF16c)},
      {"round_f16_f32_avx512", AVX512, 20, NONE, RoundF16F32Fn(cpu::RoundToHalfRowAvx512)},
#endif
      // The range of a float row (DynamicQuantizeLinear, qdq_glue.cc).
      {"minmax_f32_portable", P, 0, NONE, MinMaxF32Fn(cpu::MinMaxRowPortable)},
#if SPARQ_CPU_X86
      {"minmax_f32_avx2", AVX2, 10, NONE, MinMaxF32Fn(cpu::MinMaxRowAvx2)},
      {"minmax_f32_avx512", AVX512, 20, NONE, MinMaxF32Fn(cpu::MinMaxRowAvx512)},
#endif
      // Calibration's |x| histograms (histogram_f32.cc).
      {"abs_histogram_f32_portable", P, 0, NONE, AbsHistogramF32Fn(cpu::AbsHistogramRowPortable)},
#if SPARQ_CPU_X86
      {"abs_histogram_f32_avx2", AVX2, 10, NONE, AbsHistogramF32Fn(cpu::AbsHistogramRowAvx2)},
      {"abs_histogram_f32_avx512", AVX512, 20, NONE, AbsHistogramF32Fn(cpu::AbsHistogramRowAvx512)},
#endif
      // Sums of x log y: calibration's KL threshold search (xlogy_f64.cc).
      {"xlogy_sum_f64_portable", P, 0, NONE, XLogYSumF64Fn(cpu::XLogYSumRowPortable)},
#if SPARQ_CPU_X86
      {"xlogy_sum_f64_avx512", AVX512, 20, NONE, XLogYSumF64Fn(cpu::XLogYSumRowAvx512)},
#endif
      // Add / Sub / Mul / Div of float32 tensors with broadcasting (binary_f32.cc).
      {"binary_f32_portable", P, 0, NONE, BinaryF32Fn(cpu::BinaryRowPortable)},
#if SPARQ_CPU_X86
      {"binary_f32_avx2", AVX2, 10, NONE, BinaryF32Fn(cpu::BinaryRowAvx2)},
      {"binary_f32_avx512", AVX512, 20, NONE, BinaryF32Fn(cpu::BinaryRowAvx512)},
#endif
      // sparq.QLinearMul (qdq_glue.cc), beside qlinear_add_s8.
      {"qlinear_mul_s8_portable", P, 0, NONE, QLinearMulS8Fn(cpu::QLinearMulRowPortable)},
#if SPARQ_CPU_X86
      {"qlinear_mul_s8_avx2", AVX2, 10, NONE, QLinearMulS8Fn(cpu::QLinearMulRowAvx2)},
      {"qlinear_mul_s8_avx512", AVX512, 20, NONE, QLinearMulS8Fn(cpu::QLinearMulRowAvx512)},
#endif
      // ReduceMean over the last axis (activation_f32.cc): plain C++, rows
      // interleaved so that the in-order double sums overlap.
      {"mean_rows_f32_portable", P, 0, NONE, MeanRowsF32Fn(cpu::MeanRowsPortable)},
      // INT8 convolution in NCHW with the requantization in the tile (conv_s8.cc;
      // quant_conv.cc runs it). The portable kernel reads both panel formats.
      {"conv_s8_nchw_portable", P, 0, F::kPanel16x4S8, ConvS8Fn(cpu::ConvS8Portable)},
      {"conv_s8_nchw_s16_portable", P, 0, F::kPanel16x2S16, ConvS8Fn(cpu::ConvS8Portable)},
#if SPARQ_CPU_X86
      {"conv_s8_nchw_avx2", AVX2, 10, F::kPanel16x2S16, ConvS8Fn(cpu::ConvS8Avx2)},
      {"conv_s8_nchw_avx512vnni", VNNI, 30, F::kPanel16x4S8, ConvS8Fn(cpu::ConvS8Avx512Vnni)},
      // At most 8 output channels, rows of stride 1 to 4: vpermb windows of the padded image, no unfolding.
      {"conv_s8_nchw_avx512vbmi", VBMI, 40, F::kPanel16x4S8, ConvS8Fn(cpu::ConvS8Avx512Vbmi)},
#endif
      // Sigmoid and SiLU of float rows (activation_f32.cc runs them).
      {"sigmoid_f32_portable", P, 0, NONE, SigmoidF32Fn(cpu::SigmoidRowPortable)},
#if SPARQ_CPU_X86
      {"sigmoid_f32_avx2", AVX2, 10, NONE, SigmoidF32Fn(cpu::SigmoidRowAvx2)},
      {"sigmoid_f32_avx512", AVX512, 20, NONE, SigmoidF32Fn(cpu::SigmoidRowAvx512)},
#endif
      // Paddle's HardSwish chain of float rows (activation_f32.cc runs them).
      {"hardswish_chain_f32_portable", P, 0, NONE, HardSwishChainF32Fn(cpu::HardSwishChainRowPortable)},
#if SPARQ_CPU_X86
      {"hardswish_chain_f32_avx2", AVX2, 10, NONE, HardSwishChainF32Fn(cpu::HardSwishChainRowAvx2)},
      {"hardswish_chain_f32_avx512", AVX512, 20, NONE, HardSwishChainF32Fn(cpu::HardSwishChainRowAvx512)},
#endif
      // BERT's GELU chain (activation_f32.cc runs them); each ISA's erf is its erf_f32 row's.
      {"gelu_erf_chain_f32_portable", P, 0, NONE, GeluErfChainF32Fn(cpu::GeluErfChainRowPortable)},
#if SPARQ_CPU_X86
      {"gelu_erf_chain_f32_avx2", AVX2, 10, NONE, GeluErfChainF32Fn(cpu::GeluErfChainRowAvx2)},
      {"gelu_erf_chain_f32_avx512", AVX512, 20, NONE, GeluErfChainF32Fn(cpu::GeluErfChainRowAvx512)},
#endif
      // Tanh of float rows (activation_f32.cc runs them).
      {"tanh_f32_portable", P, 0, NONE, TanhF32Fn(cpu::TanhRowPortable)},
#if SPARQ_CPU_X86
      {"tanh_f32_avx2", AVX2, 10, NONE, TanhF32Fn(cpu::TanhRowAvx2)},
      {"tanh_f32_avx512", AVX512, 20, NONE, TanhF32Fn(cpu::TanhRowAvx512)},
#endif
      // GlobalMaxPool's row maxima (activation_f32.cc runs them).
      {"max_rows_f32_portable", P, 0, NONE, MaxRowsF32Fn(cpu::MaxRowsPortable)},
#if SPARQ_CPU_X86
      {"max_rows_f32_avx512", AVX512, 20, NONE, MaxRowsF32Fn(cpu::MaxRowsAvx512)},
#endif
      // com.microsoft MatMulNBits, 4-bit weights decoded per block (matmul_nbits_f32.cc runs them).
      {"matmul_nbits_f32_portable", P, 0, NONE, MatMulNBitsF32Fn(cpu::MatMulNBitsF32Portable)},
#if SPARQ_CPU_X86
      {"matmul_nbits_f32_avx2", AVX2, 10, NONE, MatMulNBitsF32Fn(cpu::MatMulNBitsF32Avx2)},
      {"matmul_nbits_f32_avx512", AVX512, 20, NONE, MatMulNBitsF32Fn(cpu::MatMulNBitsF32Avx512)},
#endif
      // Clip of float rows (activation_f32.cc runs them).
      {"clip_f32_portable", P, 0, NONE, ClipF32Fn(cpu::ClipRowPortable)},
#if SPARQ_CPU_X86
      {"clip_f32_avx2", AVX2, 10, NONE, ClipF32Fn(cpu::ClipRowAvx2)},
      {"clip_f32_avx512", AVX512, 20, NONE, ClipF32Fn(cpu::ClipRowAvx512)},
#endif
      // BatchNormalization and LayerNormalization of float32 (norm_f32.cc):
      // plain C++, the reference's bits.
      {"scale_shift_f32_portable", P, 0, NONE, ScaleShiftF32Fn(cpu::ScaleShiftRowPortable)},
#if SPARQ_CPU_X86
      {"scale_shift_f32_avx512", AVX512, 20, NONE, ScaleShiftF32Fn(cpu::ScaleShiftRowAvx512)},
#endif
      {"layer_norm_f32_portable", P, 0, NONE, LayerNormF32Fn(cpu::LayerNormRowsPortable)},
#if SPARQ_CPU_X86
      {"layer_norm_f32_avx2", AVX2, 10, NONE, LayerNormF32Fn(cpu::LayerNormRowsAvx2)},
      {"layer_norm_f32_avx512", AVX512, 20, NONE, LayerNormF32Fn(cpu::LayerNormRowsAvx512)},
#endif
      // sparq.LayerNormChain of float32 (norm_f32.cc runs it): the unfused nodes' bits.
      {"layer_norm_chain_f32_portable", P, 0, NONE, LayerNormChainF32Fn(cpu::LayerNormChainRowsPortable)},
#if SPARQ_CPU_X86
      {"layer_norm_chain_f32_avx512", AVX512, 20, NONE, LayerNormChainF32Fn(cpu::LayerNormChainRowsAvx512)},
#endif
      // ConvTranspose with stride = kernel (conv_transpose_f32.cc): the
      // same loops compiled for each ISA, the reference's bits.
      {"conv_transpose_f32_portable", P, 0, NONE, ConvTransposeF32Fn(cpu::ConvTransposeF32Portable)},
#if SPARQ_CPU_X86
      {"conv_transpose_f32_avx2", AVX2, 10, NONE, ConvTransposeF32Fn(cpu::ConvTransposeF32Avx2)},
      {"conv_transpose_f32_avx512", AVX512, 20, NONE, ConvTransposeF32Fn(cpu::ConvTransposeF32Avx512)},
#endif
      // Resize, nearest by whole factors (resize_nearest.cc): row copies.
      {"resize_nearest_portable", P, 0, NONE, ResizeNearestFn(cpu::ResizeNearestPortable)},
  };
  return *table;
}

// ---------------------------------------------------------------------------
// ISA detection and override.

#if SPARQ_CPU_X86
// F16C from CPUID leaf 1 (ECX bit 29): clang 14's __builtin_cpu_supports does
// not know "f16c" (a compile error there).
bool CpuidHasF16c() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  return __get_cpuid(1, &eax, &ebx, &ecx, &edx) && ((ecx >> 29) & 1u);
}
#endif

CpuIsa Detect() {
#if SPARQ_CPU_X86
  __builtin_cpu_init();
  // __builtin_cpu_supports("avx") also checks that the OS saves the AVX state
  // (and "avx512f" the AVX-512 state); F16C needs that AVX state too.
  const bool f16c = __builtin_cpu_supports("avx") && CpuidHasF16c();
  const bool avx2 = f16c && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  const bool avx512 = avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
  const bool vnni = avx512 && __builtin_cpu_supports("avx512vnni");
  const bool vbmi = vnni && __builtin_cpu_supports("avx512vbmi");
  if (vbmi) return CpuIsa::kAvx512Vbmi;
  if (vnni) return CpuIsa::kAvx512Vnni;
  if (avx512) return CpuIsa::kAvx512;
  if (avx2) return CpuIsa::kAvx2;
  if (f16c) return CpuIsa::kF16c;
#endif
  return CpuIsa::kPortable;
}

struct IsaState {
  CpuIsa detected = CpuIsa::kPortable;
  CpuIsa from_environment = CpuIsa::kPortable;  // detected, or lowered by SPARQ_ISA
  Status environment_status;
  std::atomic<int> forced{-1};  // -1: none
};

IsaState& State() {
  static IsaState* state = [] {
    auto* s = new IsaState();
    s->detected = Detect();
    s->from_environment = s->detected;
    if (const char* env = std::getenv("SPARQ_ISA"); env != nullptr && env[0] != '\0') {
      StatusOr<CpuIsa> isa = ParseCpuIsa(env);
      if (!isa.ok()) {
        s->environment_status = Status::InvalidArgument("SPARQ_ISA: " + isa.status().message());
      } else if (*isa > s->detected) {
        s->environment_status = Status::InvalidArgument(std::string("SPARQ_ISA=") + env + ": this CPU supports up to " +
                                                        CpuIsaName(s->detected));
      } else {
        s->from_environment = *isa;
      }
    }
    return s;
  }();
  return *state;
}

// `cols`: columns of the output as stored (N for Y, M for Y^T).
Status CheckS8Epilogue(const char* op, const S8Epilogue& out, int64_t cols) {
  const std::string where = std::string(op) + ": ";
  const bool gemm = std::string(op) == "gemm_s8";
  if (out.out_f32 != nullptr && !gemm) return Status::InvalidArgument(where + "out.out_f32 is for gemm_s8 only");
  if (out.out_s32 == nullptr && out.out_q == nullptr && out.out_f32 == nullptr) {
    return Status::InvalidArgument(where + "no output: set out.out_s32, out.out_q and/or out.out_f32");
  }
  if (out.out_f32 != nullptr) {
    if (out.ld_f32 < cols) {
      return Status::InvalidArgument(where + "out.ld_f32 " + std::to_string(out.ld_f32) + " < " + std::to_string(cols));
    }
    if (out.f32_scale == nullptr) return Status::InvalidArgument(where + "out.f32_scale is required with out.out_f32");
  }
  if (out.out_s32 != nullptr && out.ld_s32 < cols) {
    return Status::InvalidArgument(where + "out.ld_s32 " + std::to_string(out.ld_s32) + " < " + std::to_string(cols));
  }
  if (out.out_q != nullptr) {
    if (out.ld_q < cols) {
      return Status::InvalidArgument(where + "out.ld_q " + std::to_string(out.ld_q) + " < " + std::to_string(cols));
    }
    if (out.multiplier == nullptr) return Status::InvalidArgument(where + "out.multiplier is required with out.out_q");
  }
  return Status::OK();
}

Status CheckA(const char* op, const char* field, const void* p, int64_t m, int64_t k, int64_t ld) {
  if (m < 0) return Status::InvalidArgument(std::string(op) + ": negative m " + std::to_string(m));
  if (p == nullptr && m > 0 && k > 0) return Status::InvalidArgument(std::string(op) + ": null " + field);
  if (ld < k) {
    return Status::InvalidArgument(std::string(op) + ": " + field + " row stride " + std::to_string(ld) + " < " +
                                   std::to_string(k));
  }
  return Status::OK();
}

Status CheckZeroPointRange(const char* op, GemmZeroPoints zp, int64_t count, bool is_signed) {
  const int32_t lo = is_signed ? -128 : 0, hi = is_signed ? 127 : 255;
  for (int64_t i = 0; i < (zp.per_channel ? count : 1); ++i) {
    if (zp.at(i) < lo || zp.at(i) > hi) {
      return Status::InvalidArgument(std::string(op) + ": activation zero point " + std::to_string(zp.at(i)) +
                                     " (index " + std::to_string(i) + ") outside [" + std::to_string(lo) + ", " +
                                     std::to_string(hi) + "]");
    }
  }
  return Status::OK();
}

// Dimensions of (X, Y) as stored: rows and columns with their strides.
Status CheckSpmmActivations(const char* op, SpmmLayout layout, const void* x, int64_t ld_x, const void* y,
                            int64_t ld_y, int64_t m, int64_t n, int64_t k) {
  if (m < 0) return Status::InvalidArgument(std::string(op) + ": negative m " + std::to_string(m));
  const bool row_major = layout == SpmmLayout::kRowMajor;
  const int64_t x_cols = row_major ? k : m, y_cols = row_major ? n : m;
  if (x == nullptr && m > 0 && k > 0) return Status::InvalidArgument(std::string(op) + ": null x");
  if (y == nullptr && m > 0 && n > 0) return Status::InvalidArgument(std::string(op) + ": null output");
  if (ld_x < x_cols) {
    return Status::InvalidArgument(std::string(op) + ": ld_x " + std::to_string(ld_x) + " < " +
                                   std::to_string(x_cols) + (row_major ? " (K)" : " (M)"));
  }
  if (y != nullptr && ld_y < y_cols) {
    return Status::InvalidArgument(std::string(op) + ": output row stride " + std::to_string(ld_y) + " < " +
                                   std::to_string(y_cols) + (row_major ? " (N)" : " (M)"));
  }
  return Status::OK();
}

template <typename Fn, typename Args>
Status Run(CpuOp op, PackedFormat format, const Args& args, const char** kernel_name) {
  const CpuKernelDef* def = SelectCpuKernel(op, format);
  if (def == nullptr) {
    return Status::NotSupported(std::string(CpuOpName(op)) + ": no kernel for weights in " + Traits(format).name);
  }
  if (kernel_name != nullptr) *kernel_name = def->name;
  std::get<Fn>(def->fn)(args);
  return Status::OK();
}

// The checks shared by the INT8 sparse kernels (weights [rows, cols]).
template <typename Args>
Status CheckSpmmS8(const char* op, const Args& args, int64_t rows, int64_t cols) {
  const void* y = args.out.out_s32 != nullptr ? static_cast<const void*>(args.out.out_s32) : args.out.out_q;
  SPARQ_RETURN_IF_ERROR(CheckSpmmActivations(op, args.layout, args.x, args.ld_x, y,
                                             args.out.out_s32 != nullptr ? args.out.ld_s32 : args.out.ld_q, args.m,
                                             rows, cols));
  const bool row_major = args.layout == SpmmLayout::kRowMajor;
  SPARQ_RETURN_IF_ERROR(CheckS8Epilogue(op, args.out, row_major ? rows : args.m));
  GemmZeroPoints zp;
  zp.values = &args.x_zero_point;
  return CheckZeroPointRange(op, zp, 1, args.x_signed);
}

}  // namespace

const char* CpuIsaName(CpuIsa isa) {
  switch (isa) {
    case CpuIsa::kPortable: return "portable";
    case CpuIsa::kF16c: return "f16c";
    case CpuIsa::kAvx2: return "avx2";
    case CpuIsa::kAvx512: return "avx512";
    case CpuIsa::kAvx512Vnni: return "avx512vnni";
    case CpuIsa::kAvx512Vbmi: return "avx512vbmi";
  }
  return "?";
}

StatusOr<CpuIsa> ParseCpuIsa(const std::string& name) {
  for (CpuIsa isa : kAllCpuIsas)
    if (name == CpuIsaName(isa)) return isa;
  return Status::InvalidArgument("unknown ISA '" + name +
                                 "' (expected portable, f16c, avx2, avx512, avx512vnni or avx512vbmi)");
}

const char* CpuOpName(CpuOp op) {
  switch (op) {
    case CpuOp::kGemmS8: return "gemm_s8";
    case CpuOp::kSpmmBsrF32: return "spmm_bsr_f32";
    case CpuOp::kSpmmBsrS8: return "spmm_bsr_s8";
    case CpuOp::kSpmmNmF32: return "spmm_nm_f32";
    case CpuOp::kGemmF32: return "gemm_f32";
    case CpuOp::kSpmmNmS8: return "spmm_nm_s8";
    case CpuOp::kDepthwiseF32: return "depthwise_f32";
    case CpuOp::kDepthwiseS8: return "depthwise_s8";
    case CpuOp::kRequantS32: return "requant_s32";
    case CpuOp::kLut256: return "lut256";
    case CpuOp::kQuantizeF32: return "quantize_f32_s8";
    case CpuOp::kDequantizeS8: return "dequantize_s8_f32";
    case CpuOp::kQLinearAddS8: return "qlinear_add_s8";
    case CpuOp::kMaxPool2d: return "maxpool2d";
    case CpuOp::kErfF32: return "erf_f32";
    case CpuOp::kSoftmaxF32: return "softmax_f32";
    case CpuOp::kPow2F32: return "pow2_f32";
    case CpuOp::kConvertF16F32: return "convert_f16_f32";
    case CpuOp::kConvertF32F16: return "convert_f32_f16";
    case CpuOp::kMinMaxF32: return "minmax_f32";
    case CpuOp::kAbsHistogramF32: return "abs_histogram_f32";
    case CpuOp::kBinaryF32: return "binary_f32";
    case CpuOp::kQLinearMulS8: return "qlinear_mul_s8";
    case CpuOp::kMeanRowsF32: return "mean_rows_f32";
    case CpuOp::kConvS8: return "conv_s8";
    case CpuOp::kSigmoidF32: return "sigmoid_f32";
    case CpuOp::kClipF32: return "clip_f32";
    case CpuOp::kScaleShiftF32: return "scale_shift_f32";
    case CpuOp::kLayerNormF32: return "layer_norm_f32";
    case CpuOp::kConvTransposeF32: return "conv_transpose_f32";
    case CpuOp::kResizeNearest: return "resize_nearest";
    case CpuOp::kHardSwishChainF32: return "hardswish_chain_f32";
    case CpuOp::kGeluErfChainF32: return "gelu_erf_chain_f32";
    case CpuOp::kSoftmaxColumnsF32: return "softmax_columns_f32";
    case CpuOp::kAttentionF32: return "attention_f32";
    case CpuOp::kPointwiseDepthwiseF32: return "pointwise_depthwise_f32";
    case CpuOp::kXLogYSumF64: return "xlogy_sum_f64";
    case CpuOp::kTanhF32: return "tanh_f32";
    case CpuOp::kMaxRowsF32: return "max_rows_f32";
    case CpuOp::kMatMulNBitsF32: return "matmul_nbits_f32";
    case CpuOp::kGemvF32: return "gemv_f32";
    case CpuOp::kLayerNormChainF32: return "layer_norm_chain_f32";
    case CpuOp::kRoundF16F32: return "round_f16_f32";
    case CpuOp::kNumCpuOps: break;
  }
  return "?";
}

CpuIsa DetectedIsa() { return State().detected; }

CpuIsa ActiveIsa() {
  IsaState& s = State();
  const int forced = s.forced.load(std::memory_order_relaxed);
  return forced >= 0 ? static_cast<CpuIsa>(forced) : s.from_environment;
}

Status IsaEnvironmentStatus() { return State().environment_status; }

Status ForceIsa(CpuIsa isa) {
  IsaState& s = State();
  if (isa > s.detected) {
    return Status::InvalidArgument(std::string("ForceIsa(") + CpuIsaName(isa) + "): this CPU supports up to " +
                                   CpuIsaName(s.detected));
  }
  s.forced.store(static_cast<int>(isa), std::memory_order_relaxed);
  return Status::OK();
}

void ResetIsa() { State().forced.store(-1, std::memory_order_relaxed); }

const std::vector<CpuKernelDef>& CpuKernelTable() { return Table(); }

const CpuKernelDef* SelectCpuKernel(CpuOp op, PackedFormat format) {
  return SelectCpuKernelAt(op, format, ActiveIsa());
}

const CpuKernelDef* SelectCpuKernelAt(CpuOp op, PackedFormat format, CpuIsa active) {
  const CpuKernelDef* best = nullptr;
  for (const CpuKernelDef& def : CpuKernelTable()) {
    if (def.op() != op || def.format != format || def.isa > active) continue;
    if (best == nullptr || def.priority > best->priority) best = &def;
  }
  return best;
}

const CpuKernelDef& SelectCpuKernel(CpuOp op) {
  // Not null: every op has a portable row (CpuKernelTable.PrioritiesAreDistinctPerOpAndFormat).
  return *SelectCpuKernel(op, kNoPackedFormat);
}

PackedFormat PreferredGemmS8Format(CpuIsa isa) {
  switch (isa) {
    case CpuIsa::kAvx2:
    case CpuIsa::kAvx512: return PackedFormat::kPanel16x2S16;
    case CpuIsa::kPortable:
    case CpuIsa::kF16c:
    case CpuIsa::kAvx512Vnni:
    case CpuIsa::kAvx512Vbmi: return PackedFormat::kPanel16x4S8;
  }
  return PackedFormat::kPanel16x4S8;
}

PackedFormat PreferredGemmF32Format(CpuIsa isa) {
  switch (isa) {
    case CpuIsa::kPortable:
    case CpuIsa::kF16c: return PackedFormat::kPanel4x8F32;
    case CpuIsa::kAvx2: return PackedFormat::kPanel6x16F32;
    case CpuIsa::kAvx512:
    case CpuIsa::kAvx512Vnni:
    case CpuIsa::kAvx512Vbmi: return PackedFormat::kPanel8x32F32;
  }
  return PackedFormat::kPanel4x8F32;
}

Status RunGemmF32(const GemmF32Args& args, const char** kernel_name) {
  if (args.w == nullptr) return Status::InvalidArgument("gemm_f32: null packed weights (w)");
  const PackedGemmF32& w = *args.w;
  if (args.source == GemmF32Source::kRows) {
    if (!w.strips) return Status::InvalidArgument("gemm_f32: MatMul weights must be packed as strips");
    SPARQ_RETURN_IF_ERROR(CheckA("gemm_f32", "x", args.x, args.m, w.k, args.ld_x));
    if (args.y == nullptr && args.m > 0 && w.rows > 0) return Status::InvalidArgument("gemm_f32: null y");
    if (args.ld_y < w.rows) {
      return Status::InvalidArgument("gemm_f32: ld_y " + std::to_string(args.ld_y) + " < " + std::to_string(w.rows));
    }
    if (args.m == 0 || w.rows == 0) return Status::OK();
  } else {
    const ConvGeometry& g = args.conv;
    if (args.source == GemmF32Source::kPointwiseConv) {
      if (!w.strips) return Status::InvalidArgument("gemm_f32: pointwise convolution weights must be packed as strips");
      if (g.kernel_h != 1 || g.kernel_w != 1 || g.stride_h != 1 || g.stride_w != 1 || g.pad_top != 0 ||
          g.pad_left != 0 || g.out_h != g.height || g.out_w != g.width) {
        return Status::InvalidArgument("gemm_f32: a pointwise convolution needs a 1x1 kernel, stride 1, no padding");
      }
    } else if (args.source == GemmF32Source::kDirectConv) {
      if (!w.strips) return Status::InvalidArgument("gemm_f32: direct convolution weights must be packed as strips");
      if (g.pad_top < 0 || g.pad_left < 0) return Status::InvalidArgument("gemm_f32: negative pads");
    } else if (w.strips) {
      return Status::InvalidArgument("gemm_f32: convolution weights must be packed as panels");
    }
    if (args.source == GemmF32Source::kShiftedConv) {
      if (g.stride_h != 1 || g.stride_w != 1) return Status::InvalidArgument("gemm_f32: shifted convolution needs stride 1");
      if (g.pad_top < 0 || g.pad_left < 0 || g.pad_bottom < 0 || g.pad_right < 0)
        return Status::InvalidArgument("gemm_f32: negative pads");
      if (g.out_h != g.height + g.pad_top + g.pad_bottom - (g.kernel_h - 1) * g.dilation_h ||
          g.out_w != g.width + g.pad_left + g.pad_right - (g.kernel_w - 1) * g.dilation_w) {
        return Status::InvalidArgument("gemm_f32: shifted convolution output size does not follow from its pads");
      }
    }
    if (args.batch < 0 || g.channels < 0 || g.height < 0 || g.width < 0 || g.out_h < 0 || g.out_w < 0)
      return Status::InvalidArgument("gemm_f32: negative convolution size");
    if (g.kernel_h < 1 || g.kernel_w < 1 || g.stride_h < 1 || g.stride_w < 1 || g.dilation_h < 1 || g.dilation_w < 1)
      return Status::InvalidArgument("gemm_f32: kernel, stride and dilation must be >= 1");
    if (g.k() != w.k) {
      return Status::InvalidArgument("gemm_f32: convolution depth " + std::to_string(g.k()) + " != weights' k " +
                                     std::to_string(w.k));
    }
    if (args.batch == 0 || g.out_size() == 0 || w.rows == 0) return Status::OK();
    if (args.x == nullptr || args.y == nullptr) return Status::InvalidArgument("gemm_f32: null x or y");
  }
  return Run<GemmF32Fn>(CpuOp::kGemmF32, w.format, args, kernel_name);
}

Status RunGemmS8(const GemmS8Args& args, const char** kernel_name) {
  if (args.b == nullptr) return Status::InvalidArgument("gemm_s8: null packed weights (b)");
  const PackedGemmS8& b = *args.b;
  SPARQ_RETURN_IF_ERROR(CheckA("gemm_s8", "a", args.a, args.m, b.k, args.lda));
  SPARQ_RETURN_IF_ERROR(CheckZeroPointRange("gemm_s8", args.a_zp, args.m, args.a_signed));
  SPARQ_RETURN_IF_ERROR(CheckS8Epilogue("gemm_s8", args.out, b.n));
  if (args.m == 0 || b.n == 0) return Status::OK();
  return Run<GemmS8Fn>(CpuOp::kGemmS8, b.format, args, kernel_name);
}

Status RunConvS8(const ConvS8Args& args, const char** kernel_name) {
  if (args.w == nullptr) return Status::InvalidArgument("conv_s8: null packed weights (w)");
  const PackedGemmS8& w = *args.w;
  const ConvGeometry& g = args.conv;
  if (static_cast<int>(w.format) >= kNumPackedFormats || Traits(w.format).kind != LayoutKind::kPanel ||
      Traits(w.format).elem == ElemType::kF32) {
    return Status::InvalidArgument("conv_s8: weights are not in an int8 panel format");
  }
  if (w.format == PackedFormat::kPanel16x4S8 && w.has_zero_points) {
    return Status::InvalidArgument("conv_s8: panel16x4_s8 weights with zero points (pack them as panel16x2_s16)");
  }
  if (g.channels < 0 || g.height < 0 || g.width < 0 || g.kernel_h < 1 || g.kernel_w < 1 || g.stride_h < 1 ||
      g.stride_w < 1 || g.dilation_h < 1 || g.dilation_w < 1 || g.pad_top < 0 || g.pad_left < 0 || g.out_h < 0 ||
      g.out_w < 0 || args.batch < 0) {
    return Status::InvalidArgument("conv_s8: bad geometry (negative size, or kernel, stride or dilation < 1)");
  }
  if (g.k() != w.k) {
    return Status::InvalidArgument("conv_s8: channels * kernel_h * kernel_w = " + std::to_string(g.k()) +
                                   " but the weights have K = " + std::to_string(w.k));
  }
  const int32_t x_lo = args.x_signed ? -128 : 0, x_hi = args.x_signed ? 127 : 255;
  if (args.x_zero_point < x_lo || args.x_zero_point > x_hi) {
    return Status::InvalidArgument("conv_s8: x zero point " + std::to_string(args.x_zero_point) +
                                   " is outside the range of x's type");
  }
  const int32_t y_lo = args.y_signed ? -128 : 0, y_hi = args.y_signed ? 127 : 255;
  if (args.y_zero_point < y_lo || args.y_zero_point > y_hi) {
    return Status::InvalidArgument("conv_s8: y zero point " + std::to_string(args.y_zero_point) +
                                   " is outside the range of y's type");
  }
  if (args.table != nullptr && args.apply_table == nullptr) {
    return Status::InvalidArgument("conv_s8: a table without apply_table (a lut256 row)");
  }
  const int64_t outputs = args.batch * w.n * g.out_size();
  if (outputs == 0) return Status::OK();
  if (args.y_s32 != nullptr || args.y_f32 != nullptr || args.y_q != nullptr) {  // raw sums out
    const int outs = (args.y_s32 != nullptr) + (args.y_f32 != nullptr) + (args.y_q != nullptr);
    if (args.x == nullptr || (args.y_s32 == nullptr && args.f32_scale == nullptr) || args.table != nullptr ||
        outs != 1 || (args.y_q != nullptr && args.f32_quantize == nullptr)) {
      return Status::InvalidArgument(
          "conv_s8: raw output needs x, one of y_s32 / y_f32 / y_q (with f32_scale; y_q with f32_quantize), no table");
    }
  } else if (args.x == nullptr || args.y == nullptr || args.multiplier == nullptr) {
    return Status::InvalidArgument("conv_s8: null x, y or multiplier");
  }
  return Run<ConvS8Fn>(CpuOp::kConvS8, w.format, args, kernel_name);
}

Status RunSpmmBsrF32(const SpmmBsrF32Args& args, const char** kernel_name) {
  if (args.w == nullptr) return Status::InvalidArgument("spmm_bsr_f32: null weights (w)");
  SPARQ_RETURN_IF_ERROR(CheckSpmmActivations("spmm_bsr_f32", args.layout, args.x, args.ld_x, args.y, args.ld_y,
                                             args.m, args.w->rows, args.w->cols));
  if (args.m == 0 || args.w->rows == 0) return Status::OK();
  return Run<SpmmBsrF32Fn>(CpuOp::kSpmmBsrF32, args.w->format, args, kernel_name);
}

Status RunSpmmNmF32(const SpmmNmF32Args& args, const char** kernel_name) {
  if (args.w == nullptr) return Status::InvalidArgument("spmm_nm_f32: null weights (w)");
  SPARQ_RETURN_IF_ERROR(CheckSpmmActivations("spmm_nm_f32", args.layout, args.x, args.ld_x, args.y, args.ld_y,
                                             args.m, args.w->rows, args.w->cols));
  if (args.m == 0 || args.w->rows == 0) return Status::OK();
  return Run<SpmmNmF32Fn>(CpuOp::kSpmmNmF32, args.w->format, args, kernel_name);
}

Status RunSpmmBsrS8(const SpmmBsrS8Args& args, const char** kernel_name) {
  if (args.w == nullptr) return Status::InvalidArgument("spmm_bsr_s8: null weights (w)");
  const BsrS8& w = *args.w;
  SPARQ_RETURN_IF_ERROR(CheckSpmmS8("spmm_bsr_s8", args, w.rows, w.cols));
  if (args.m == 0 || w.rows == 0) return Status::OK();
  return Run<SpmmBsrS8Fn>(CpuOp::kSpmmBsrS8, w.format, args, kernel_name);
}

Status RunSpmmNmS8(const SpmmNmS8Args& args, const char** kernel_name) {
  if (args.w == nullptr) return Status::InvalidArgument("spmm_nm_s8: null weights (w)");
  const NmS8& w = *args.w;
  if (static_cast<int>(w.format) >= kNumPackedFormats || Traits(w.format).kind != LayoutKind::kNm ||
      Traits(w.format).elem != ElemType::kS8) {
    return Status::InvalidArgument("spmm_nm_s8: weights are not in an int8 N:M format");
  }
  SPARQ_RETURN_IF_ERROR(CheckSpmmS8("spmm_nm_s8", args, w.rows, w.cols));
  if (args.m == 0 || w.rows == 0) return Status::OK();
  return Run<SpmmNmS8Fn>(CpuOp::kSpmmNmS8, w.format, args, kernel_name);
}

StatusOr<NmS8Panels> PrepackSpmmNmS8(const NmS8& w) {
  if (static_cast<int>(w.format) >= kNumPackedFormats || Traits(w.format).kind != LayoutKind::kNm ||
      Traits(w.format).elem != ElemType::kS8) {
    return Status::InvalidArgument("PrepackSpmmNmS8: weights are not in an int8 N:M format");
  }
  // The panel layout of the kernel that would run (internal.h): int16
  // activations for the AVX2 kernel, u8 for VNNI and portable.
  const CpuKernelDef* def = SelectCpuKernel(CpuOp::kSpmmNmS8, w.format);
  const bool s16 = def != nullptr && def->isa == CpuIsa::kAvx2;
  return cpu::BuildNmS8Panels(w, s16 ? 8 : 16, s16);
}

}  // namespace sparq
