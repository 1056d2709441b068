// ConvInteger and sparq.ConvIntegerToFloat on the INT8 kernels: the
// convolutions of onnxruntime's dynamic INT8 files (quantize_dynamic:
// DynamicQuantizeLinear -> ConvInteger -> Cast -> Mul [-> Add], whose float
// epilogue runtime/passes/dynamic_fusion.h folds into sparq.ConvIntegerToFloat).
// Two ways, chosen at prepare:
//
// 1. conv_s8 (kernels/cpu/conv_s8.cc), as QLinearConv runs it, for group 1
//    and int8 weights whose format allows it (zero points 0, onnxruntime's
//    symmetric weights, on panel16x4_s8; any on panel16x2_s16): NCHW, no
//    transposition; the tiles' raw sums are finished by its driver as int32
//    or as float(acc) * scale[m] (+ bias[m]) (ConvS8Args::y_s32 / y_f32), so
//    the int32 tensor never reaches memory. About 2x faster than way 2 on
//    basic-pitch's file (its 3 x 39 layer 8.1 vs 15.9 ms), 1.3x on magika's
//    layer (bench/RESULTS.md, convint22).
//
// 2. Otherwise (groups, uint8 weights, weight zero points on panel16x4_s8),
//    im2col + gemm_s8, per stack of images (few output positions: several
//    images per GEMM call) and per group g, P output positions, Kg = kh * kw * C / group:
//
//   x [N, C, H, W] ──copy──> xp [hp, wp, C]     padded NHWC; the padding holds x's
//                                               zero point, so it adds 0
//        ──unfold──> A [P, Kg]                  row (oy, ox), columns (ky, kx, c of g):
//                                               runs of kw * C bytes (group 1, dilation_w 1);
//                                               a 1x1 stride-1 unpadded group-1 conv reads xp;
//                                               many positions: chunks of rows per task
//        ──gemm_s8──> Y^T [P, M] columns of g   W_g packed once at prepare in (ky, kx, c)
//                                               order, its zero points with it; int32, or
//                                               float(acc) * scale[m] (+ bias[m]) in the
//                                               GEMM's output stage (S8Epilogue::out_f32)
//        ──transpose──> y [M, P]                NCHW
//
// 1-D convolutions run as 2-D ones with H = 1. The int32 sums are exact (mod
// 2^32, as kernels/ref's), so the order of K does not change them, and each
// float is float(acc) * scale[m] then + bias[m], one rounding each, as the
// reference epilogue (kernels/ref/qdq_fused_ops.cc): bit for bit the
// reference for every ISA and thread count. ConvIntegerToFloat's activation
// "Silu" runs the sigmoid_f32 row of a separate sparq.Silu node (its bits)
// in conv_s8's driver over each task's finished rows (kMinImagesForTileSilu
// images on; fewer: one pass after), or over each block of channel rows (im2col).
// Inputs 7 and 8 (Y_scale, Y_zero_point: a QuantizeLinear fused in,
// runtime/passes/float_fusion.h) make the output bytes: the quantize_f32_s8
// row the QuantizeLinear node runs, over each task's finished float rows in
// conv_s8's driver (their SiLU there too, at any batch), or over each block of
// channel rows (im2col, from a float buffer); the separate nodes' bits.
//
// Takes (prepare, else NotSupported with the reason): W a constant int8 or
// uint8 tensor of rank 3 or 4, w_zero_point absent or a constant of W's type,
// one value or one per output channel; group dividing M. At run time x must be
// uint8 or int8 with one x_zero_point of its type and C = group * W's channels,
// pads not negative, the float node's scales float32 (x_scale one value,
// w_scale and bias one or one per channel): otherwise the reference kernel
// runs (and names any error).
#include <algorithm>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "kernels/cpu/dispatch.h"
#include "kernels/cpu/transpose_bytes.h"
#include "kernels/packed_formats.h"
#include "kernels/parallel.h"
#include "kernels/ref/conv.h"
#include "kernels/ref/nn_common.h"
#include "kernels/registry.h"

namespace sparq {
namespace {

// W packed for gemm_s8, one panel set per group.
struct ConvIntegerWeights {
  Shape w_shape;  // as given (rank 3 or 4)
  DataType w_type = DataType::kUndefined;
  int64_t m = 0, group = 1, cg = 0, kh = 1, kw = 1;  // cg: input channels per group
  std::vector<PackedGemmS8> packed;  // [group]: W_g [M / group, kh * kw * cg], K in (ky, kx, c) order
  // Or the conv_s8 row (NCHW, its raw sums out) and W [M, C * kh * kw] in W's own order.
  const CpuKernelDef* nchw = nullptr;
  PackedGemmS8 nchw_w;
  // ConvIntegerToFloat's activation "Silu": the sigmoid_f32 row a separate
  // sparq.Silu node runs (times_x), over the float output; else nullptr.
  SigmoidF32Fn silu = nullptr;
  // ConvIntegerToFloat with Y_scale and Y_zero_point (inputs 7 and 8: a
  // QuantizeLinear fused in, runtime/passes/float_fusion.h): the
  // quantize_f32_s8 row the QuantizeLinear node runs; else nullptr.
  QuantizeF32Fn quantize = nullptr;
};

std::string ConvIntegerKernelName(const ConvIntegerWeights& w) {
  if (w.nchw != nullptr) return w.nchw->name;
  const CpuKernelDef* def = w.packed.empty() ? nullptr : SelectCpuKernel(CpuOp::kGemmS8, w.packed[0].format);
  return std::string("im2col_nhwc+") + (def != nullptr ? def->name : "gemm_s8");
}

Status Decline(const Node& node, const std::string& why) {
  return Status::NotSupported(node.Describe() + ": gemm_s8 ConvInteger path: " + why);
}

int32_t ByteAt(const Tensor& t, int64_t i) {
  return t.dtype() == DataType::kUInt8 ? int32_t{t.data<uint8_t>()[i]} : int32_t{t.data<int8_t>()[i]};
}

StatusOr<PreparedKernel> PrepareConvInteger(const Node& node, const std::vector<const Tensor*>& constants,
                                            const PrepareContext&) {
  auto constant = [&](size_t i) { return i < constants.size() ? constants[i] : nullptr; };
  auto named = [&](size_t i) { return i < node.inputs.size() && !node.inputs[i].empty(); };
  const Tensor* w = constant(1);
  if (w == nullptr) return Decline(node, "W is not a constant");
  if (w->dtype() != DataType::kInt8 && w->dtype() != DataType::kUInt8)
    return Decline(node, "W has type " + DataTypeName(w->dtype()));
  if (w->rank() != 3 && w->rank() != 4) return Decline(node, "W " + ShapeToString(w->shape()) + " is not 1-D or 2-D");
  const Tensor* w_zp = named(3) ? constant(3) : nullptr;
  if (named(3) && w_zp == nullptr) return Decline(node, "w_zero_point is not a constant");
  auto q = std::make_shared<ConvIntegerWeights>();
  const std::string activation = node.attr_string("activation", "");
  if (!activation.empty() && (node.op_type != "ConvIntegerToFloat" || activation != "Silu"))
    return Decline(node, "activation '" + activation + "'");
  if (!activation.empty()) q->silu = SelectCpuKernel(CpuOp::kSigmoidF32).get<SigmoidF32Fn>();
  if (node.op_type == "ConvIntegerToFloat" && (named(7) || named(8))) {
    if (!named(7) || !named(8)) return Decline(node, "Y_scale without Y_zero_point or the reverse");
    q->quantize = SelectCpuKernel(CpuOp::kQuantizeF32).get<QuantizeF32Fn>();
  }
  q->w_shape = w->shape();
  q->w_type = w->dtype();
  q->m = w->dim(0);
  q->group = node.attr_int("group", 1);
  q->cg = w->dim(1);
  q->kh = w->rank() == 4 ? w->dim(2) : 1;
  q->kw = w->dim(w->rank() - 1);
  if (q->group < 1 || q->m % q->group != 0) return Decline(node, "group does not divide the output channels");
  std::vector<int32_t> zp;
  if (w_zp != nullptr) {
    if (w_zp->dtype() != w->dtype() || (w_zp->numel() != 1 && w_zp->numel() != q->m))
      return Decline(node, "w_zero_point is not one value or one per output channel of W's type");
    for (int64_t i = 0; i < w_zp->numel(); ++i) zp.push_back(ByteAt(*w_zp, i));
  }
  const int64_t mg = q->m / q->group, taps = q->kh * q->kw, kg = q->cg * taps;
  const PackedFormat format = PreferredGemmS8Format(ActiveIsa());
  // conv_s8 as QLinearConv runs it (quant_conv.cc), at most at the VNNI
  // level: the VBMI window kernel requantizes only, so that row would run
  // the VNNI driver anyway.
  const bool symmetric = std::all_of(zp.begin(), zp.end(), [](int32_t z) { return z == 0; });
  if (q->group == 1 && w->dtype() == DataType::kInt8) {
    q->nchw = SelectCpuKernelAt(CpuOp::kConvS8, format, std::min(ActiveIsa(), CpuIsa::kAvx512Vnni));
    if (q->nchw != nullptr && (symmetric || format == PackedFormat::kPanel16x2S16)) {
      const bool per_channel = zp.size() > 1;
      StatusOr<PackedGemmS8> p = PackGemmS8<int8_t>(w->data<int8_t>(), q->m, kg,
                                                    GemmZeroPoints{zp.empty() ? nullptr : zp.data(), per_channel}, format);
      if (!p.ok()) return Decline(node, p.status().message());
      q->nchw_w = std::move(*p);
      std::string name = ConvIntegerKernelName(*q);
      return PreparedKernel{std::shared_ptr<const void>(std::move(q)), std::move(name)};
    }
    q->nchw = nullptr;
  }
  auto pack = [&](auto tag) -> Status {
    using T = decltype(tag);
    const T* src = w->data<T>();
    std::vector<T> w_hwc(static_cast<size_t>(mg * kg));
    for (int64_t g = 0; g < q->group; ++g) {
      // W [M, Cg, taps] -> W_g [Mg, taps, Cg].
      for (int64_t o = 0; o < mg; ++o)
        for (int64_t ch = 0; ch < q->cg; ++ch)
          for (int64_t t = 0; t < taps; ++t) w_hwc[(o * taps + t) * q->cg + ch] = src[((g * mg + o) * q->cg + ch) * taps + t];
      const bool per_channel = zp.size() > 1;
      const GemmZeroPoints w_zero{zp.empty() ? nullptr : zp.data() + (per_channel ? g * mg : 0), per_channel};
      SPARQ_ASSIGN_OR_RETURN(PackedGemmS8 p, PackGemmS8<T>(w_hwc.data(), mg, kg, w_zero, format));
      q->packed.push_back(std::move(p));
    }
    return Status::OK();
  };
  Status st = w->dtype() == DataType::kInt8 ? pack(int8_t{}) : pack(uint8_t{});
  if (!st.ok()) return Decline(node, st.message());
  std::string name = ConvIntegerKernelName(*q);
  return PreparedKernel{std::shared_ptr<const void>(std::move(q)), std::move(name)};
}

// dst[j * ld_dst + i] = src[i * ld_src + j] for i < rows, j in [j0, j1), 4-byte values.
template <typename T>
void Transpose32(const T* src, int64_t ld_src, T* dst, int64_t ld_dst, int64_t rows, int64_t j0, int64_t j1) {
  static_assert(sizeof(T) == 4, "32-bit values");
  constexpr int64_t kBlock = 16;
  for (int64_t i0 = 0; i0 < rows; i0 += kBlock) {
    const int64_t i1 = std::min(rows, i0 + kBlock);
    for (int64_t j = j0; j < j1; ++j) {
      T* d = dst + j * ld_dst;
      for (int64_t i = i0; i < i1; ++i) d[i] = src[i * ld_src + j];
    }
  }
}

// ConvIntegerToFloat's SiLU on conv_s8: in its driver, over each channel's
// finished positions of a task, from this many images on; below, one pass
// over the output after it (chunks of kSiluChunk values), as the separate
// sparq.Silu node ran. YOLOv8n's default INT8 file, `sparq eval --profile`,
// 1 thread: at batch 16 the driver's SiLU cost 13.5 ms of conv time for 48 ms
// of Silu nodes; at batch 1 42.5 ms for 32.5 (32 batches; bench/RESULTS.md, silu22).
constexpr int64_t kMinImagesForTileSilu = 4;
constexpr int64_t kSiluChunk = 16384;

// Output positions per GEMM call below which images are stacked into one call.
constexpr int64_t kMinGemmRows = 512;
// Rows of A a task unfolds and multiplies at a time when there are many.
constexpr int64_t kChunkRows = 128;

Status RunConvInteger(OpContext& ctx) {
  const ConvIntegerWeights& q = *static_cast<const ConvIntegerWeights*>(ctx.prepared());
  const bool to_float = ctx.node().op_type == "ConvIntegerToFloat";
  if (!ctx.has_input(0) || !ctx.has_input(1) || (to_float && (!ctx.has_input(4) || !ctx.has_input(5))))
    return RunReferenceKernel(ctx);
  const Tensor& x = ctx.input(0);
  const Tensor& w = ctx.input(1);
  if ((x.dtype() != DataType::kUInt8 && x.dtype() != DataType::kInt8) || w.dtype() != q.w_type ||
      w.shape() != q.w_shape || x.rank() != w.rank() || x.dim(1) != q.cg * q.group) {
    return RunReferenceKernel(ctx);
  }
  int32_t x_zp = 0;
  if (ctx.has_input(2)) {
    const Tensor& z = ctx.input(2);
    if (z.dtype() != x.dtype() || z.numel() != 1) return RunReferenceKernel(ctx);
    x_zp = ByteAt(z, 0);
  }
  // The float node's scale per output channel (x_scale * w_scale[m], rounded
  // to float as the graph's Mul of the two scales) and bias.
  std::vector<float> scale, bias;
  // The fused QuantizeLinear's parameters (one scale, one zero point).
  float q_scale = 1.0f;
  int32_t q_zp = 0;
  DataType out_type = to_float ? DataType::kFloat32 : DataType::kInt32;
  if (q.quantize != nullptr) {
    if (!ctx.has_input(7) || !ctx.has_input(8)) return RunReferenceKernel(ctx);
    const Tensor& ys = ctx.input(7);
    const Tensor& yz = ctx.input(8);
    if (ys.dtype() != DataType::kFloat32 || ys.numel() != 1 ||
        (yz.dtype() != DataType::kUInt8 && yz.dtype() != DataType::kInt8) || yz.numel() != 1) {
      return RunReferenceKernel(ctx);
    }
    q_scale = ys.data<float>()[0];
    q_zp = ByteAt(yz, 0);
    out_type = yz.dtype();
  }
  if (to_float) {
    const Tensor& xs = ctx.input(4);
    const Tensor& ws = ctx.input(5);
    if (xs.dtype() != DataType::kFloat32 || xs.numel() != 1 || ws.dtype() != DataType::kFloat32 ||
        (ws.numel() != 1 && ws.numel() != q.m)) {
      return RunReferenceKernel(ctx);
    }
    scale.resize(static_cast<size_t>(q.m));
    for (int64_t o = 0; o < q.m; ++o) scale[o] = xs.data<float>()[0] * ws.data<float>()[ws.numel() == 1 ? 0 : o];
    if (ctx.has_input(6)) {
      const Tensor& b = ctx.input(6);
      if (b.dtype() != DataType::kFloat32 || (b.numel() != 1 && b.numel() != q.m)) return RunReferenceKernel(ctx);
      bias.resize(static_cast<size_t>(q.m));
      for (int64_t o = 0; o < q.m; ++o) bias[o] = b.data<float>()[b.numel() == 1 ? 0 : o];
    }
  }
  ConvParams params;
  AutoPad auto_pad = AutoPad::kNotSet;
  Shape y_shape;
  if (!ReadWindowAttributes(ctx.node(), &params.window, &auto_pad).ok()) return RunReferenceKernel(ctx);
  params.group = q.group;
  if (!PrepareConv(x.shape(), w.shape(), auto_pad, &params, &y_shape).ok()) return RunReferenceKernel(ctx);
  // The 2-D geometry (1-D: H = 1, one row of taps).
  const bool two_d = x.rank() == 4;
  const WindowGeometry& win = params.window;
  const int64_t spatial = two_d ? 2 : 1;
  const int64_t n = x.dim(0), c = x.dim(1), h = two_d ? x.dim(2) : 1, wd = x.dim(x.rank() - 1);
  const int64_t ho = two_d ? y_shape[2] : 1, wo = y_shape[y_shape.size() - 1];
  const int64_t sh = two_d ? win.strides[0] : 1, sw = win.strides[spatial - 1];
  const int64_t dh = two_d ? win.dilations[0] : 1, dw = win.dilations[spatial - 1];
  const int64_t pad_t = two_d ? win.pads[0] : 0, pad_l = win.pads[spatial - 1];
  const int64_t pad_b = two_d ? win.pads[2] : 0, pad_r = win.pads[2 * spatial - 1];
  for (int64_t v : win.pads)
    if (v < 0) return RunReferenceKernel(ctx);
  const int64_t p = ho * wo, m = q.m, mg = m / q.group, taps = q.kh * q.kw, kg = q.cg * taps;
  Tensor y = ctx.OutputBuffer(0, out_type, y_shape);
  if (y.numel() == 0) {
    ctx.set_output(0, std::move(y));
    return Status::OK();
  }

  if (q.nchw != nullptr) {  // conv_s8 in NCHW, its raw sums finished as int32 or float
    ConvS8Args args;
    args.w = &q.nchw_w;
    args.conv.channels = c, args.conv.height = h, args.conv.width = wd;
    args.conv.kernel_h = q.kh, args.conv.kernel_w = q.kw;
    args.conv.stride_h = sh, args.conv.stride_w = sw;
    args.conv.dilation_h = dh, args.conv.dilation_w = dw;
    args.conv.pad_top = pad_t, args.conv.pad_left = pad_l;
    args.conv.pad_bottom = pad_b, args.conv.pad_right = pad_r;
    args.conv.out_h = ho, args.conv.out_w = wo;
    args.batch = n;
    args.x = x.raw_data();
    args.x_signed = x.dtype() == DataType::kInt8;
    args.x_zero_point = x_zp;
    if (q.quantize != nullptr) {  // the float values quantized in the driver: its SiLU there too
      args.y_q = y.raw_data();
      args.q_scale = q_scale, args.q_zero_point = q_zp, args.q_signed = out_type == DataType::kInt8;
      args.f32_quantize = q.quantize;
      args.f32_scale = scale.data();
      args.f32_bias = bias.empty() ? nullptr : bias.data();
      args.f32_silu = q.silu;
    } else if (to_float) {
      args.y_f32 = y.data<float>();
      args.f32_scale = scale.data();
      args.f32_bias = bias.empty() ? nullptr : bias.data();
      args.f32_silu = q.silu != nullptr && n >= kMinImagesForTileSilu ? q.silu : nullptr;
    } else {
      args.y_s32 = y.data<int32_t>();
    }
    args.pool = ctx.pool();
    q.nchw->get<ConvS8Fn>()(args);
    if (q.quantize == nullptr && q.silu != nullptr && args.f32_silu == nullptr) {  // few images: one pass after, as the separate node
      float* yf = y.data<float>();
      const int64_t total = y.numel();
      ParallelFor(ctx.pool(), (total + kSiluChunk - 1) / kSiluChunk, 1, [&](int64_t c0, int64_t c1) {
        const int64_t b = c0 * kSiluChunk, e = std::min(total, c1 * kSiluChunk);
        q.silu(yf + b, yf + b, e - b, true);
      });
    }
    ctx.set_output(0, std::move(y));
    return Status::OK();
  }
  const int64_t hp = h + pad_t + pad_b, wp = wd + pad_l + pad_r, image = hp * wp * c;
  const bool direct = q.group == 1 && taps == 1 && sh == 1 && sw == 1 && hp == h && wp == wd;
  const int64_t threads = ctx.pool() != nullptr ? std::max(1, ctx.pool()->num_threads()) : 1;
  const int64_t stack = std::max<int64_t>(1, std::min<int64_t>(n, (kMinGemmRows + p - 1) / p));
  // Work buffers, kept by the calling thread from run to run (fresh ones of
  // this size come from mmap and cost a page fault per 4 KiB on every run).
  thread_local std::vector<uint8_t> xp_buffer, a_buffer;
  thread_local std::vector<int32_t> out_buffer;  // int32 or float bits
  auto reserve = [](auto& v, int64_t size) {
    if (v.size() < static_cast<size_t>(size)) v.resize(static_cast<size_t>(size));
    return v.data();
  };
  uint8_t* const xp = reserve(xp_buffer, stack * image);                 // [stack, hp, wp, C]
  // A [stack * P, Kg] when it is unfolded whole (few positions).
  const bool chunked = !direct && (stack * p + kChunkRows - 1) / kChunkRows >= (threads > 1 ? 2 * threads : 2);
  uint8_t* const a = direct ? xp : chunked ? nullptr : reserve(a_buffer, stack * p * kg);
  int32_t* const out = reserve(out_buffer, stack * p * m);               // Y^T [stack * P, M]
  if (hp != h || wp != wd) std::memset(xp, static_cast<uint8_t>(x_zp), static_cast<size_t>(stack * image));
  const auto* xb = static_cast<const uint8_t*>(x.raw_data());
  // Contiguous bytes per copy in a row of A: kw taps of all C channels at once
  // (group 1, dilation_w 1), else one tap of the group's channels.
  const int64_t run = q.group == 1 && dw == 1 ? q.kw * c : q.cg;
  for (int64_t img0 = 0; img0 < n; img0 += stack) {
    const int64_t s = std::min(stack, n - img0);
    // NCHW -> padded NHWC: per input row, [C, W] -> [W, C].
    ParallelFor(ctx.pool(), s * h, 4, [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        const int64_t si = r / h, iy = r % h;
        TransposeBytes(xb + ((img0 + si) * c * h + iy) * wd, h * wd, xp + si * image + ((iy + pad_t) * wp + pad_l) * c,
                       c, c, 0, wd);
      }
    });
    for (int64_t g = 0; g < q.group; ++g) {
      // Rows [r0, r1) of A for group g into dst (row r: image r / P, position r % P).
      auto unfold = [&](int64_t r0, int64_t r1, uint8_t* dst) {
        for (int64_t r = r0; r < r1; ++r) {
          const int64_t si = r / p, oy = (r % p) / wo, ox = r % wo;
          uint8_t* row = dst + (r - r0) * kg;
          for (int64_t ky = 0; ky < q.kh; ++ky) {
            const uint8_t* src = xp + si * image + ((oy * sh + ky * dh) * wp + ox * sw) * c + g * q.cg;
            for (int64_t kx = 0; kx < q.kw; kx += run / q.cg) {
              std::memcpy(row, src + kx * dw * c, static_cast<size_t>(run));
              row += run;
            }
          }
        }
      };
      // gemm_s8 over rows [r0, r1) of A (at a_rows, row stride lda) into Y^T's rows.
      auto gemm = [&](int64_t r0, int64_t r1, const uint8_t* a_rows, int64_t lda, ThreadPool* pool) {
        GemmS8Args args;
        args.m = r1 - r0;
        args.a = a_rows;
        args.a_signed = x.dtype() == DataType::kInt8;
        args.lda = lda;
        args.a_zp = GemmZeroPoints{&x_zp, false};
        args.b = &q.packed[g];
        if (to_float) {
          args.out.out_f32 = reinterpret_cast<float*>(out) + r0 * m + g * mg;
          args.out.ld_f32 = m;
          args.out.f32_scale = scale.data() + g * mg;
          args.out.f32_bias = bias.empty() ? nullptr : bias.data() + g * mg;
        } else {
          args.out.out_s32 = out + r0 * m + g * mg;
          args.out.ld_s32 = m;
        }
        args.pool = pool;
        return RunGemmS8(args);
      };
      const int64_t rows = s * p;
      const int64_t chunks = (rows + kChunkRows - 1) / kChunkRows;
      if (chunked) {
        // Many positions: each task unfolds a chunk of rows in its own cache
        // and multiplies it (the whole A of basic-pitch's 3 x 39 window over
        // 172 x 264 positions is 42 MB).
        std::vector<Status> status(static_cast<size_t>(chunks));
        ParallelFor(ctx.pool(), chunks, 1, [&](int64_t c0, int64_t c1) {
          thread_local std::vector<uint8_t> chunk_buffer;
          uint8_t* const chunk = reserve(chunk_buffer, kChunkRows * kg);
          for (int64_t ch = c0; ch < c1; ++ch) {
            const int64_t r0 = ch * kChunkRows, r1 = std::min(rows, r0 + kChunkRows);
            unfold(r0, r1, chunk);
            status[ch] = gemm(r0, r1, chunk, kg, nullptr);
          }
        });
        for (const Status& st : status)
          if (!st.ok()) return ctx.Error(st.code(), st.message());
        continue;
      }
      if (!direct) ParallelFor(ctx.pool(), rows, 64, [&](int64_t r0, int64_t r1) { unfold(r0, r1, a + r0 * kg); });
      Status st = gemm(0, rows, a, direct ? c : kg, ctx.pool());
      if (!st.ok()) return ctx.Error(st.code(), st.message());
    }
    // Y^T [P, M] -> y [M, P] per image, 32 channels a task.
    const int64_t m_blocks = (m + 31) / 32;
    // int32 or float bits: a copy either way; with a fused QuantizeLinear, the
    // floats of this stack in a buffer, quantized block by block into y.
    thread_local std::vector<int32_t> float_buffer;
    int32_t* const yb = q.quantize != nullptr ? reserve(float_buffer, s * m * p) : static_cast<int32_t*>(y.raw_data());
    const int64_t y_img0 = q.quantize != nullptr ? 0 : img0;  // yb's first image
    ParallelFor(ctx.pool(), s * m_blocks, 1, [&](int64_t b0, int64_t b1) {
      for (int64_t b = b0; b < b1; ++b) {
        const int64_t si = b / m_blocks, m0 = (b % m_blocks) * 32, m1 = std::min(m, m0 + 32);
        Transpose32(out + si * p * m, m, yb + (y_img0 + si) * m * p, p, p, m0, m1);
        float* rows = reinterpret_cast<float*>(yb) + ((y_img0 + si) * m + m0) * p;
        if (to_float && q.silu != nullptr) q.silu(rows, rows, (m1 - m0) * p, true);  // the block's channel rows, just written
        if (q.quantize != nullptr) {
          q.quantize((m1 - m0) * p, rows, q_scale, q_zp, out_type == DataType::kInt8,
                     static_cast<uint8_t*>(y.raw_data()) + ((img0 + si) * m + m0) * p);
        }
      }
    });
  }
  ctx.set_output(0, std::move(y));
  return Status::OK();
}

}  // namespace

void RegisterCpuConvIntegerOps(KernelRegistry& r) {
  r.Add({"ConvInteger", "", 10, 99, RunConvInteger, "gemm_s8", PrepareConvInteger});
  r.Add({"ConvIntegerToFloat", kSparqDomain, 1, 1, RunConvInteger, "gemm_s8", PrepareConvInteger});
}

}  // namespace sparq
