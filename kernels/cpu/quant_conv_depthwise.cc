// QLinearConv of depthwise convolutions (group = input channels = output
// channels, weights [M, 1, kh, kw]), which the GEMM row (quant_conv.cc) does
// not take: per (image, channel) plane, x - x_zero_point is copied into a
// zero-padded int16 plane (rows split by column phase, see RunDepthwise),
// each output row sums its kh * kw taps times w - w_zero_point in int32
// (DepthwiseRow*, exact: |sum| <= taps * 255 * 255), and the plane is
// requantized with the same row function as the GEMM (RequantizeS32Ref's
// rounding), so results are bit for bit the reference's.
//
// sparq.QLinearConvLut (QLinearConv then a 256-entry table) runs the same
// way, the table applied to each requantized plane.
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
  std::vector<int16_t> w;  // [C, kh * kw]: w - w_zero_point
  // The rows of kernels/cpu/dispatch.h it runs, chosen at prepare time.
  const CpuKernelDef* row = nullptr;      // depthwise_s8
  const CpuKernelDef* requant = nullptr;  // requant_s32
  const CpuKernelDef* lut = nullptr;      // lut256, with a table
};

// dst[j] = x[j * stride] - zero_point for j < n, x int8 (T = int8_t) or
// uint8. A function of its own with every value a parameter: inside the
// kernel's lambda the compiler kept reloading captured values and did not
// vectorize. Strides 1 and 2 are compile-time constants.
template <typename T, int kStride>
void WidenRow(const uint8_t* x, int64_t stride, int64_t n, int32_t zero_point, int16_t* dst) {
  const T* src = reinterpret_cast<const T*>(x);
  const int64_t step = kStride > 0 ? kStride : stride;
  for (int64_t j = 0; j < n; ++j) dst[j] = static_cast<int16_t>(static_cast<int32_t>(src[j * step]) - zero_point);
}
using WidenFn = void (*)(const uint8_t* x, int64_t stride, int64_t n, int32_t zero_point, int16_t* dst);
template <typename T>
WidenFn SelectWidenOf(int64_t stride) {
  return stride == 1 ? WidenRow<T, 1> : stride == 2 ? WidenRow<T, 2> : WidenRow<T, 0>;
}
WidenFn SelectWiden(bool x_signed, int64_t stride) {
  return x_signed ? SelectWidenOf<int8_t>(stride) : SelectWidenOf<uint8_t>(stride);
}

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
  if (q->bias.empty()) q->bias.assign(static_cast<size_t>(c), 0);
  q->row = &SelectCpuKernel(CpuOp::kDepthwiseS8);
  q->requant = &SelectCpuKernel(CpuOp::kRequantS32);
  q->lut = &SelectCpuKernel(CpuOp::kLut256);
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
  if (x.dtype() != q.x_type || x.rank() != 4 || x.dim(1) != q.channels) return RunReferenceKernel(ctx);
  const int64_t n = x.dim(0), h = x.dim(2), wd = x.dim(3);
  const int64_t ho_num = h + q.pad_t + q.pad_b - q.dil_h * (q.kh - 1) - 1;
  const int64_t wo_num = wd + q.pad_l + q.pad_r - q.dil_w * (q.kw - 1) - 1;
  if (ho_num < 0 || wo_num < 0) return RunReferenceKernel(ctx);  // the reference names the error
  const int64_t ho = ho_num / q.stride_h + 1, wo = wo_num / q.stride_w + 1, p = ho * wo;
  // The padded plane, each row split into stride_w phases (phase f holds
  // columns f, f + s, f + 2s, ...), so that a tap reads wo contiguous values
  // whatever the stride: column ox * s + c is phase c % s, index ox + c / s.
  const int64_t hp = h + q.pad_t + q.pad_b, wp = wd + q.pad_l + q.pad_r, taps = q.kh * q.kw;
  const int64_t s = q.stride_w, wq = (wp + s - 1) / s, row_len = s * wq;
  Tensor y(q.out_type, {n, q.channels, ho, wo});
  const uint8_t flip = q.y_type == DataType::kInt8 ? 0x80 : 0;  // table index of an int8 y: its byte ^ 0x80
  const bool x_signed = q.x_type == DataType::kInt8, y_signed = q.y_type == DataType::kInt8;
  const auto* xb = static_cast<const uint8_t*>(x.raw_data());
  auto* yb = static_cast<uint8_t*>(y.raw_data());
  const DepthwiseS8RowFn row_fn = q.row->get<DepthwiseS8RowFn>();
  const RequantS32Fn requant_fn = q.requant->get<RequantS32Fn>();
  const Lut256Fn apply_table = q.lut->get<Lut256Fn>();
  const WidenFn widen = SelectWiden(x_signed, s);
  std::vector<int64_t> tap_offset(static_cast<size_t>(taps));  // of tap (ky, kx) from its output row's base
  for (int64_t ky = 0; ky < q.kh; ++ky)
    for (int64_t kx = 0; kx < q.kw; ++kx) {
      const int64_t c = kx * q.dil_w;
      tap_offset[ky * q.kw + kx] = ky * q.dil_h * row_len + (c % s) * wq + c / s;
    }
  ParallelFor(ctx.pool(), n * q.channels, 1, [&](int64_t p0, int64_t p1) {
    // Zeros (x_zero_point - x_zero_point) where the padding is: every plane
    // writes the same interior positions, so the padding stays zero.
    std::vector<int16_t> padded(static_cast<size_t>(hp * row_len), 0);
    std::vector<int32_t> acc(static_cast<size_t>(p));
    std::vector<const int16_t*> tap_rows(static_cast<size_t>(taps));
    for (int64_t plane = p0; plane < p1; ++plane) {
      const int64_t ch = plane % q.channels;
      const uint8_t* xp = xb + plane * h * wd;
      for (int64_t iy = 0; iy < h; ++iy) {
        int16_t* row = padded.data() + (iy + q.pad_t) * row_len;
        const uint8_t* in = xp + iy * wd;
        for (int64_t f = 0; f < s; ++f) {  // phase f: padded columns j * s + f, input column j * s + f - pad_l
          const int64_t j0 = q.pad_l > f ? (q.pad_l - f + s - 1) / s : 0;
          const int64_t j1 = std::min(wq, (wd + q.pad_l - f + s - 1) / s);
          if (j1 > j0) widen(in + f - q.pad_l + j0 * s, s, j1 - j0, q.x_zp, row + f * wq + j0);
        }
      }
      const int16_t* wc = q.w.data() + ch * taps;
      for (int64_t oy = 0; oy < ho; ++oy) {
        const int16_t* base = padded.data() + oy * q.stride_h * row_len;
        for (int64_t t = 0; t < taps; ++t) tap_rows[t] = base + tap_offset[t];
        row_fn(tap_rows.data(), wc, static_cast<int>(taps), wo, acc.data() + oy * wo);
      }
      uint8_t* yp = yb + plane * p;
      requant_fn(p, acc.data(), &q.bias[ch], 0, &q.multiplier[ch], 0, q.y_zp, /*fuse_relu=*/false, y_signed, yp);
      if (!q.table.empty()) apply_table(q.table.data(), flip, yp, yp, p);
    }
  });
  ctx.set_output(0, std::move(y));
  return Status::OK();
}

// For `eval --verbose`: the rows it runs, e.g. depthwise_s8_avx512+requant_s32_avx512.
std::string DepthwiseKernel(const void* state) {
  const auto& q = *static_cast<const DepthwiseConv*>(state);
  std::string name = std::string(q.row->name) + "+" + q.requant->name;
  if (!q.table.empty()) name += std::string("+") + q.lut->name;
  return name;
}

}  // namespace

void RegisterPreparedCpuDepthwiseConvOps(KernelRegistry& r) {
  r.Add({"QLinearConv", "", 10, 99, RunDepthwise, "depthwise_s8", WithoutContext(PrepareDepthwise, DepthwiseKernel)});
  r.Add({"QLinearConvLut", kSparqDomain, 1, 1, RunDepthwise, "depthwise_s8_lut",
         WithoutContext(PrepareDepthwiseLut, DepthwiseKernel)});
}

}  // namespace sparq
