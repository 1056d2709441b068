// QLinearConv of depthwise convolutions (group = input channels = output
// channels, weights [M, 1, kh, kw]), which the GEMM row (quant_conv.cc) does
// not take: each block of 16 channels of an image is one call of a
// depthwise_s8 row (DepthwiseS8Channels in kernel_args.h: int32 sums of
// (x - x_zero_point) * (w - w_zero_point), requantized like
// RequantizeS32Ref), so results are bit for bit the reference's. Blocks are
// split over the threads; each is computed by one thread, and no value
// depends on which, so every thread count gives the same bits.
//
// sparq.QLinearConvLut (QLinearConv then a 256-entry table) runs the same
// way, the row applying the table to the requantized bytes.
//
// Fast path (else the reference kernel): 2-D, group = C = M, explicit pads
// (auto_pad NOTSET), int8 weights; every input but x constant; x_scale,
// y_scale, x_zero_point and y_zero_point single values; w_scale and
// w_zero_point one value or one per channel.
#include <algorithm>
#include <memory>
#include <vector>

#include "kernels/cpu/dispatch.h"
#include "kernels/cpu/internal.h"
#include "kernels/cpu/quant_conv_params.h"
#include "kernels/parallel.h"
#include "kernels/ref/quantize.h"
#include "kernels/registry.h"

namespace sparq {
namespace {

// QuantConvParams with m = channels and bias zeros without B.
struct DepthwiseConv : QuantConvParams {
  int64_t channels = 0;
  std::vector<int16_t> w;      // [C, kh * kw]: w - w_zero_point
  std::vector<float> w_lanes;  // the same, PackDepthwiseLanes
  // The row of kernels/cpu/dispatch.h it runs, chosen at prepare time.
  const CpuKernelDef* row = nullptr;  // depthwise_s8
};

StatusOr<std::shared_ptr<DepthwiseConv>> PrepareDepthwiseState(const Node& node,
                                                              const std::vector<const Tensor*>& constants, bool lut) {
  auto decline = [&](const std::string& why) -> Status {
    return Status::NotSupported(node.Describe() + ": depthwise path: " + why);
  };
  SPARQ_ASSIGN_OR_RETURN(QuantConvParams params, ReadQuantConvParams(node, constants, "depthwise path", lut));
  if (params.c != 1) return decline("weights are not [M, 1, kh, kw] int8");
  if (node.attr_int("group", 1) != params.m || params.m < 2) return decline("not depthwise");
  auto q = std::make_shared<DepthwiseConv>();
  static_cast<QuantConvParams&>(*q) = std::move(params);
  const int64_t c = q->channels = q->m;
  const Tensor& w = *constants[3];
  const Tensor& w_zp = *constants[5];
  const int64_t taps = q->kh * q->kw;
  q->w.resize(static_cast<size_t>(c * taps));
  for (int64_t o = 0; o < c; ++o) {
    const int32_t zp = w_zp.data<int8_t>()[w_zp.numel() == 1 ? 0 : o];
    for (int64_t t = 0; t < taps; ++t)
      q->w[o * taps + t] = static_cast<int16_t>(static_cast<int32_t>(w.data<int8_t>()[o * taps + t]) - zp);
  }
  q->w_lanes = PackDepthwiseLanes(q->w.data(), c, taps);
  if (q->bias.empty()) q->bias.assign(static_cast<size_t>(c), 0);
  q->row = &SelectCpuKernel(CpuOp::kDepthwiseS8);
  return q;
}

StatusOr<std::shared_ptr<const void>> PrepareDepthwise(const Node& node, const std::vector<const Tensor*>& constants) {
  SPARQ_ASSIGN_OR_RETURN(std::shared_ptr<DepthwiseConv> q, PrepareDepthwiseState(node, constants, false));
  return std::shared_ptr<const void>(std::move(q));
}

// sparq.QLinearConvLut: QLinearConv's inputs, then the constant table (input 9).
StatusOr<std::shared_ptr<const void>> PrepareDepthwiseLut(const Node& node,
                                                          const std::vector<const Tensor*>& constants) {
  SPARQ_ASSIGN_OR_RETURN(std::shared_ptr<DepthwiseConv> q, PrepareDepthwiseState(node, constants, true));
  return std::shared_ptr<const void>(std::move(q));
}

Status RunDepthwise(OpContext& ctx) {
  const DepthwiseConv& q = *static_cast<const DepthwiseConv*>(ctx.prepared());
  const Tensor& x = ctx.input(0);
  if (x.dtype() != q.x_type || x.rank() != (q.one_d ? 3 : 4) || x.dim(1) != q.channels) return RunReferenceKernel(ctx);
  const int64_t n = x.dim(0), h = x.dim(2), wd = q.one_d ? 1 : x.dim(3);
  const int64_t ho_num = h + q.pad_t + q.pad_b - q.dil_h * (q.kh - 1) - 1;
  const int64_t wo_num = wd + q.pad_l + q.pad_r - q.dil_w * (q.kw - 1) - 1;
  if (ho_num < 0 || wo_num < 0) return RunReferenceKernel(ctx);  // the reference names the error
  const int64_t ho = ho_num / q.stride_h + 1, wo = wo_num / q.stride_w + 1, p = ho * wo;
  Tensor y = ctx.OutputBuffer(0, q.out_type, q.one_d ? Shape{n, q.channels, ho} : Shape{n, q.channels, ho, wo});  // every plane is written
  DepthwiseS8Channels base;
  base.x_signed = q.x_type == DataType::kInt8, base.x_zero_point = q.x_zp;
  base.y_signed = q.y_type == DataType::kInt8, base.y_zero_point = q.y_zp;
  base.table = q.table.empty() ? nullptr : q.table.data();
  base.height = h, base.width = wd, base.out_h = ho, base.out_w = wo;
  base.kernel_h = q.kh, base.kernel_w = q.kw, base.stride_h = q.stride_h, base.stride_w = q.stride_w;
  base.dilation_h = q.dil_h, base.dilation_w = q.dil_w, base.pad_top = q.pad_t, base.pad_left = q.pad_l;
  const auto* xb = static_cast<const uint8_t*>(x.raw_data());
  auto* yb = static_cast<uint8_t*>(y.raw_data());
  const DepthwiseS8Fn row = q.row->get<DepthwiseS8Fn>();
  const int64_t taps = q.kh * q.kw, lanes = DepthwiseS8Channels::kLanes;
  const int64_t blocks = (q.channels + lanes - 1) / lanes;  // per image
  ParallelFor(ctx.pool(), n * blocks, 1, [&](int64_t b0, int64_t b1) {
    float* scratch = cpu::DepthwiseThreadScratch(base.ScratchFloats());
    for (int64_t b = b0; b < b1; ++b) {
      const int64_t image = b / blocks, c0 = (b % blocks) * lanes;
      DepthwiseS8Channels args = base;
      args.channels = std::min(lanes, q.channels - c0);
      args.x = xb + (image * q.channels + c0) * h * wd, args.y = yb + (image * q.channels + c0) * p;
      args.w = q.w.data() + c0 * taps, args.w_lanes = q.w_lanes.data() + c0 * taps;
      args.bias = q.bias.data() + c0, args.multiplier = q.multiplier.data() + c0;
      args.scratch = scratch;
      row(args);
    }
  });
  ctx.set_output(0, std::move(y));
  return Status::OK();
}

// For `eval --verbose`: the row it runs, e.g. depthwise_s8_lanes_avx512vbmi.
std::string DepthwiseKernel(const void* state) { return static_cast<const DepthwiseConv*>(state)->row->name; }

}  // namespace

void RegisterPreparedCpuDepthwiseConvOps(KernelRegistry& r) {
  r.Add({"QLinearConv", "", 10, 99, RunDepthwise, "depthwise_s8", WithoutContext(PrepareDepthwise, DepthwiseKernel)});
  r.Add({"QLinearConvLut", kSparqDomain, 1, 1, RunDepthwise, "depthwise_s8_lut",
         WithoutContext(PrepareDepthwiseLut, DepthwiseKernel)});
}

}  // namespace sparq
