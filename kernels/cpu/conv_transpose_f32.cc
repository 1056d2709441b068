// Float32 2-D ConvTranspose whose stride equals its kernel, or of one input
// channel per group (depthwise: any stride, dilation, pads, output padding):
// the conv_transpose_f32 rows (ConvTransposeF32Args, kernel_args.h) and their
// registry row. Other ConvTransposes (several input channels per group with
// overlapping windows, pads or dilations, 1-D / 3-D, other types) run the
// reference kernel, which also names every error.
#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kernels/cpu/cpu_target.h"
#include "kernels/cpu/dispatch.h"
#include "kernels/cpu/norm_f32.h"
#include "kernels/ref/conv.h"
#include "kernels/ref/nn_common.h"
#include "kernels/registry.h"

namespace sparq {
namespace cpu {

#define CT_NAME ConvTransposeF32Portable
#include "kernels/cpu/conv_transpose_f32.inc"
#undef CT_NAME

#if SPARQ_CPU_X86
SPARQ_CPU_TARGET_BEGIN(SPARQ_CPU_AVX2_FEATURES)
#define CT_NAME ConvTransposeF32Avx2
#include "kernels/cpu/conv_transpose_f32.inc"
#undef CT_NAME
SPARQ_CPU_TARGET_END

SPARQ_CPU_TARGET_BEGIN(SPARQ_CPU_AVX512_FEATURES)
#define CT_NAME ConvTransposeF32Avx512
#include "kernels/cpu/conv_transpose_f32.inc"
#undef CT_NAME
SPARQ_CPU_TARGET_END
#endif

}  // namespace cpu

namespace {

StatusOr<std::shared_ptr<const void>> PrepareRow(const Node&, const std::vector<const Tensor*>&) {
  return std::shared_ptr<const void>(&SelectCpuKernel(CpuOp::kConvTransposeF32), [](const void*) {});
}
std::string RowKernel(const void* state) { return static_cast<const CpuKernelDef*>(state)->name; }

Status RunConvTransposeF32(OpContext& ctx) {
  if (!ctx.has_input(0) || !ctx.has_input(1)) return RunReferenceKernel(ctx);
  const Tensor& x = ctx.input(0);
  const Tensor& w = ctx.input(1);
  if (x.dtype() != DataType::kFloat32 || w.dtype() != DataType::kFloat32 || x.rank() != 4 || w.rank() != 4)
    return RunReferenceKernel(ctx);
  if (ctx.has_input(2) && (ctx.input(2).dtype() != DataType::kFloat32 || ctx.input(2).rank() != 1))
    return RunReferenceKernel(ctx);
  const Node& node = ctx.node();
  ConvParams params;
  AutoPad auto_pad = AutoPad::kNotSet;
  if (!ReadWindowAttributes(ctx, &params.window, &auto_pad).ok()) return RunReferenceKernel(ctx);
  params.group = node.attr_int("group", 1);
  Shape y_shape;
  if (!PrepareConvTranspose(x.shape(), w.shape(), auto_pad, node.attr_ints("output_padding"),
                            node.attr_ints("output_shape"), &params, &y_shape)
           .ok())
    return RunReferenceKernel(ctx);  // the reference names the error
  const WindowGeometry& g = params.window;
  const int64_t kh = w.dim(2), kw = w.dim(3);
  const bool strided = g.strides == std::vector<int64_t>{kh, kw} && g.dilations == std::vector<int64_t>{1, 1} &&
                       std::all_of(g.pads.begin(), g.pads.end(), [](int64_t p) { return p == 0; }) &&
                       y_shape[2] == x.dim(2) * kh && y_shape[3] == x.dim(3) * kw;
  const int64_t n = x.dim(0), c = x.dim(1), groups = params.group, cg = c / groups, mg = w.dim(1);
  const bool windowed = !strided && cg == 1;  // one input channel per group: any window
  if (!strided && !windowed) return RunReferenceKernel(ctx);
  if (ctx.has_input(2) && ctx.input(2).numel() != mg * groups) return RunReferenceKernel(ctx);
  Tensor y = ctx.OutputBuffer(0, DataType::kFloat32, y_shape);
  const int64_t in_plane = x.dim(2) * x.dim(3), out_plane = y_shape[2] * y_shape[3];
  const ConvTransposeF32Fn row = static_cast<const CpuKernelDef*>(ctx.prepared())->get<ConvTransposeF32Fn>();
  const float* bias = ctx.has_input(2) ? ctx.input(2).data<float>() : nullptr;
  // One item per (batch item, group, output channel): each output value is
  // computed by one call, in the same order whatever the split.
  ParallelFor(ctx.pool(), n * groups * mg, 1, [&](int64_t i0, int64_t i1) {
    for (int64_t item = i0; item < i1; ++item) {
      const int64_t b = item / (groups * mg), grp = (item / mg) % groups, m = item % mg;
      ConvTransposeF32Args a;
      a.x = x.data<float>() + (b * c + grp * cg) * in_plane;
      a.w = w.data<float>() + grp * cg * mg * kh * kw;
      a.bias = bias != nullptr ? bias + grp * mg : nullptr;
      a.y = y.data<float>() + (b * mg * groups + grp * mg) * out_plane;
      a.channels = cg, a.out_channels = mg, a.height = x.dim(2), a.width = x.dim(3), a.kernel_h = kh, a.kernel_w = kw;
      a.m_begin = m, a.m_end = m + 1;
      if (windowed) {
        a.windowed = true;
        a.stride_h = g.strides[0], a.stride_w = g.strides[1], a.dilation_h = g.dilations[0], a.dilation_w = g.dilations[1];
        a.pad_top = g.pads[0], a.pad_left = g.pads[1], a.out_h = y_shape[2], a.out_w = y_shape[3];
      }
      row(a);
    }
  });
  ctx.set_output(0, std::move(y));
  return Status::OK();
}

}  // namespace

void RegisterCpuConvTransposeF32Ops(KernelRegistry& r) {
  r.Add({"ConvTranspose", "", 1, 99, RunConvTransposeF32, "conv_transpose_f32", WithoutContext(PrepareRow, RowKernel)});
}

}  // namespace sparq
