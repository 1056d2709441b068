// QLinearConv (group 1) on the INT8 kernels. Three ways, chosen at prepare:
//
// 1. conv_s8 (kernels/cpu/conv_s8.cc), when the weights' format allows it
//    (panel16x2_s16 always; panel16x4_s8 with weight zero points 0, the
//    usual symmetric weights): per image, in the NCHW layout,
//
//      Y [M, P] = W [M, K] x col [K, P]     col: the input unfolded as rows
//      (= the image's NCHW output)           (c, ky, kx), columns (oy, ox)
//
//    with the requantization (and the table of sparq.QLinearConvLut) in the
//    register tile's output stage: no transposition, no int32 round trip.
//
// 2. Pruned weights (zero point 0, see kernels/cpu/sparse_s8.h): when the
//    kernel speed table says their structure beats dense, the prepare step
//    packs them for spmm_bsr_s8 / spmm_nm_s8, run in the same NCHW layout.
//
// 3. Otherwise gemm_s8: per image, the input is unfolded into rows of A
//    [P, K] (one row per output position, K = kh * kw * C in (ky, kx, c)
//    order, copied from a padded NHWC copy of the image whose padding holds
//    the input's zero point), multiplied by the weights packed once at
//    prepare in the same K order, requantized per output channel, and
//    transposed into NCHW (the table applied before the transposition).
//
// The int32 sums are exact (mod 2^32), so the order of K does not change
// them. sparq.QLinearConvLut: QLinearConv then a 256-entry table, see
// kernels/ref/qdq_fused_ops.cc.
//
// Fast path (else the reference kernel): 2-D convolution, group 1, explicit
// pads (auto_pad NOTSET), int8 weights; every input but x constant; x_scale,
// y_scale, x_zero_point and y_zero_point single values; w_scale and
// w_zero_point one value or one per output channel. Results are bit for bit
// the reference's: the same int32 sums and RequantizeS32Ref's rounding.
#include <algorithm>
#include <cstring>
#include <memory>
#include <vector>

#include "kernels/cpu/dispatch.h"
#include "kernels/cpu/internal.h"
#include "kernels/cpu/quant_conv_params.h"
#include "kernels/cpu/sparse_s8.h"
#include "kernels/cpu/transpose_bytes.h"
#include "kernels/packed_formats.h"
#include "kernels/parallel.h"
#include "kernels/ref/quantize.h"
#include "kernels/registry.h"


namespace sparq {
namespace {

// Output positions of a plane below which a pointwise convolution skips the
// VBMI window row (QuantConv::nchw_small): one tile of the window row is 32
// output columns.
constexpr int64_t kWindowMinPositions = 32;

struct QuantConv : QuantConvParams {
  // The conv_s8 row, or nullptr for gemm_s8. With it, w is [M, C * kh * kw]
  // in W's own (c, ky, kx) order; with gemm_s8, in (ky, kx, c) order.
  const CpuKernelDef* nchw = nullptr;
  // A pointwise (1 x 1) convolution whose nchw row is the VBMI window row
  // (conv_s8_nchw_avx512vbmi): the row below it, which the window row's own
  // fallback runs, for planes of fewer than kWindowMinPositions positions.
  // There the window row has nothing to save (a 1 x 1 window unfolds
  // nothing) and 3 of each 4 weight bytes it multiplies are its padding;
  // its per-call repacking of the weights and padding of the image cost
  // 2.0 us on Silero VAD's decoder conv (128 -> 1 channels, 1 position)
  // against the VNNI row's 0.5 us. Same bytes: both are conv_s8 rows.
  const CpuKernelDef* nchw_small = nullptr;
  PackedGemmS8 w;          // when not sparse
  SparseS8Weights sparse;  // the weights for a sparse kernel, when it is faster
  const CpuKernelDef* lut = nullptr;  // the lut256 row, chosen at prepare time
};

// For `eval --verbose`: the table rows it runs, e.g.
// conv_s8_nchw_avx512vnni, gemm_s8s8_avx512vnni or spmm_nm24_s8_avx2+lut256_portable.
std::string QuantConvKernel(const QuantConv& q) {
  std::string name = q.sparse.sparse() ? q.sparse.kernel : "gemm_s8";
  if (q.nchw != nullptr) {
    name = q.nchw->name;
    // conv_s8_nchw_avx512vbmi+conv_s8_nchw_avx512vnni: the second on planes of few positions
    if (q.nchw_small != nullptr) name += std::string("+") + q.nchw_small->name;
  } else if (!q.sparse.sparse()) {
    const CpuKernelDef* def = SelectCpuKernel(CpuOp::kGemmS8, q.w.format);
    if (def != nullptr) name = def->name;
  }
  if (!q.table.empty()) name += std::string("+") + q.lut->name;
  return name;
}

// Output positions per GEMM call below which images are stacked into one call.
constexpr int64_t kMinGemmRows = 512;

StatusOr<std::shared_ptr<QuantConv>> PrepareQuantConvState(const Node& node, const std::vector<const Tensor*>& constants,
                                                          const PrepareContext& context, bool lut) {
  SPARQ_ASSIGN_OR_RETURN(QuantConvParams params, ReadQuantConvParams(node, constants, "gemm_s8 conv path", lut));
  if (node.attr_int("group", 1) != 1)
    return Status::NotSupported(node.Describe() + ": gemm_s8 conv path: grouped convolution");
  auto q = std::make_shared<QuantConv>();
  static_cast<QuantConvParams&>(*q) = std::move(params);
  q->lut = &SelectCpuKernel(CpuOp::kLut256);
  const Tensor& w = *constants[3];
  const Tensor& w_zp = *constants[5];
  std::vector<int32_t> zp(static_cast<size_t>(w_zp.numel()));
  bool symmetric = true;
  for (int64_t i = 0; i < w_zp.numel(); ++i) {
    zp[i] = w_zp.data<int8_t>()[i];
    symmetric = symmetric && zp[i] == 0;
  }
  // Pruned weights: a sparse kernel where the table says it beats dense.
  if (symmetric) {
    SPARQ_ASSIGN_OR_RETURN(q->sparse, ChooseSparseS8(w.data<int8_t>(), q->m, q->c * q->kh * q->kw, *context.kernel_table,
                                                           /*conv=*/true));
  }
  if (q->sparse.sparse()) return q;
  const GemmZeroPoints w_zero{zp.data(), zp.size() > 1};
  const PackedFormat format = PreferredGemmS8Format(ActiveIsa());
  q->nchw = SelectCpuKernel(CpuOp::kConvS8, format);
  if (q->nchw != nullptr && (symmetric || format == PackedFormat::kPanel16x2S16)) {
    SPARQ_ASSIGN_OR_RETURN(q->w, PackGemmS8<int8_t>(w.data<int8_t>(), q->m, q->c * q->kh * q->kw, w_zero, format));
    if (q->nchw->isa == CpuIsa::kAvx512Vbmi && q->kh == 1 && q->kw == 1) {
      q->nchw_small = SelectCpuKernelAt(CpuOp::kConvS8, format, CpuIsa::kAvx512Vnni);
    }
    return q;
  }
  q->nchw = nullptr;
  // K in the unfolded rows' order (ky, kx, c); W is stored (c, ky, kx).
  const int64_t taps = q->kh * q->kw;
  std::vector<int8_t> w_hwc(static_cast<size_t>(q->m * q->c * taps));
  for (int64_t o = 0; o < q->m; ++o)
    for (int64_t ch = 0; ch < q->c; ++ch)
      for (int64_t t = 0; t < taps; ++t)
        w_hwc[(o * taps + t) * q->c + ch] = w.data<int8_t>()[(o * q->c + ch) * taps + t];
  SPARQ_ASSIGN_OR_RETURN(q->w, PackGemmS8<int8_t>(w_hwc.data(), q->m, q->c * taps, w_zero, format));
  return q;
}

StatusOr<PreparedKernel> PrepareQuantConv(const Node& node, const std::vector<const Tensor*>& constants,
                                          const PrepareContext& context) {
  SPARQ_ASSIGN_OR_RETURN(std::shared_ptr<QuantConv> q, PrepareQuantConvState(node, constants, context, false));
  std::string kernel = QuantConvKernel(*q);
  return PreparedKernel{std::shared_ptr<const void>(std::move(q)), kernel};
}

// sparq.QLinearConvLut: QLinearConv's inputs, then the constant table (input 9).
StatusOr<PreparedKernel> PrepareQuantConvLut(const Node& node, const std::vector<const Tensor*>& constants,
                                             const PrepareContext& context) {
  SPARQ_ASSIGN_OR_RETURN(std::shared_ptr<QuantConv> q, PrepareQuantConvState(node, constants, context, true));
  std::string kernel = QuantConvKernel(*q);
  return PreparedKernel{std::shared_ptr<const void>(std::move(q)), kernel};
}

// One image on the sparse kernel: col [K, P] (NCHW im2col), then
// Y^T [M, P] = W * col written straight into the image's NCHW output.
Status RunSparseImage(OpContext& ctx, const QuantConv& q, const uint8_t* xi, int64_t h, int64_t wd, int64_t ho,
                      int64_t wo, std::vector<uint8_t>* col, uint8_t* yi) {
  const int64_t p = ho * wo;
  const uint8_t pad = static_cast<uint8_t>(q.x_zp);
  // Row (ch, ky, kx) of col holds that input tap for every output position.
  ParallelFor(ctx.pool(), q.c * q.kh * q.kw, 4, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t ch = r / (q.kh * q.kw), ky = r / q.kw % q.kh, kx = r % q.kw;
      uint8_t* row = col->data() + r * p;
      for (int64_t oy = 0; oy < ho; ++oy) {
        const int64_t iy = oy * q.stride_h - q.pad_t + ky * q.dil_h;
        if (iy < 0 || iy >= h) {
          row = std::fill_n(row, wo, pad);
          continue;
        }
        // Output columns [ox_begin, ox_end) read inside the row; the others are padding.
        const int64_t ix0 = kx * q.dil_w - q.pad_l;  // ix of ox = 0
        const int64_t ox_begin = std::min(wo, ix0 >= 0 ? 0 : (-ix0 + q.stride_w - 1) / q.stride_w);
        const int64_t ox_end = std::max(ox_begin, std::min(wo, wd - ix0 <= 0 ? 0 : (wd - ix0 - 1) / q.stride_w + 1));
        const uint8_t* src = xi + (ch * h + iy) * wd;
        row = std::fill_n(row, ox_begin, pad);
        if (q.stride_w == 1) {
          row = std::copy(src + ix0 + ox_begin, src + ix0 + ox_end, row);
        } else {
          for (int64_t ox = ox_begin; ox < ox_end; ++ox) *row++ = src[ix0 + ox * q.stride_w];
        }
        row = std::fill_n(row, wo - ox_end, pad);
      }
    }
  });
  S8Epilogue out;
  out.out_q = yi;
  out.out_q_signed = q.y_type == DataType::kInt8;
  out.ld_q = p;
  out.bias = q.bias.empty() ? nullptr : q.bias.data();
  out.multiplier = q.multiplier.data();
  out.zero_point = q.y_zp;
  Status st = RunSparseS8(q.sparse, SpmmLayout::kTransposed, p, col->data(), q.x_type == DataType::kInt8, p, q.x_zp,
                          out, ctx.pool());
  return st.ok() ? st : ctx.Error(st.code(), st.message());
}

Status RunQuantConv(OpContext& ctx) {
  const QuantConv& q = *static_cast<const QuantConv*>(ctx.prepared());
  const Tensor& x = ctx.input(0);
  if (x.dtype() != q.x_type || x.rank() != (q.one_d ? 3 : 4) || x.dim(1) != q.c) return RunReferenceKernel(ctx);
  const int64_t n = x.dim(0), h = x.dim(2), wd = q.one_d ? 1 : x.dim(3);
  const int64_t ho_num = h + q.pad_t + q.pad_b - q.dil_h * (q.kh - 1) - 1;
  const int64_t wo_num = wd + q.pad_l + q.pad_r - q.dil_w * (q.kw - 1) - 1;
  if (ho_num < 0 || wo_num < 0) return RunReferenceKernel(ctx);  // the reference names the error
  const int64_t ho = ho_num / q.stride_h + 1, wo = wo_num / q.stride_w + 1, p = ho * wo;
  const int64_t k = q.c * q.kh * q.kw;
  Tensor y = ctx.OutputBuffer(0, q.out_type, q.one_d ? Shape{n, q.m, ho} : Shape{n, q.m, ho, wo});  // every path writes every byte
  const Lut256Fn apply_table = q.lut->get<Lut256Fn>();
  const uint8_t flip = q.y_type == DataType::kInt8 ? 0x80 : 0;  // table index of an int8 y: its byte ^ 0x80
  if (q.nchw != nullptr) {
    ConvS8Args args;
    args.w = &q.w;
    args.conv.channels = q.c, args.conv.height = h, args.conv.width = wd;
    args.conv.kernel_h = q.kh, args.conv.kernel_w = q.kw;
    args.conv.stride_h = q.stride_h, args.conv.stride_w = q.stride_w;
    args.conv.dilation_h = q.dil_h, args.conv.dilation_w = q.dil_w;
    args.conv.pad_top = q.pad_t, args.conv.pad_left = q.pad_l;
    args.conv.pad_bottom = q.pad_b, args.conv.pad_right = q.pad_r;
    args.conv.out_h = ho, args.conv.out_w = wo;
    args.batch = n;
    args.x = x.raw_data();
    args.x_signed = q.x_type == DataType::kInt8;
    args.x_zero_point = q.x_zp;
    args.bias = q.bias.empty() ? nullptr : q.bias.data();
    args.multiplier = q.multiplier.data();
    args.y_zero_point = q.y_zp;
    args.y_signed = q.y_type == DataType::kInt8;
    if (!q.table.empty()) {
      args.table = q.table.data();
      args.table_flip = flip;
      args.apply_table = apply_table;
    }
    args.y = y.raw_data();
    args.pool = ctx.pool();
    const bool small = q.nchw_small != nullptr && p < kWindowMinPositions;
    (small ? q.nchw_small : q.nchw)->get<ConvS8Fn>()(args);
    ctx.set_output(0, std::move(y));
    return Status::OK();
  }
  if (q.sparse.sparse()) {
    std::vector<uint8_t> col(static_cast<size_t>(k * p));
    auto* yb = static_cast<uint8_t*>(y.raw_data());
    for (int64_t img = 0; img < n; ++img) {
      SPARQ_RETURN_IF_ERROR(RunSparseImage(ctx, q, static_cast<const uint8_t*>(x.raw_data()) + img * q.c * h * wd, h,
                                           wd, ho, wo, &col, yb + img * q.m * p));
    }
    if (!q.table.empty()) {
      ParallelFor(ctx.pool(), y.numel(), 16384,
                  [&](int64_t i0, int64_t i1) { apply_table(q.table.data(), flip, yb + i0, yb + i0, i1 - i0); });
    }
    ctx.set_output(0, std::move(y));
    return Status::OK();
  }
  // Each image is copied once into a padded NHWC plane [hp, wp, C]
  // (padding: the zero point's byte, so it contributes 0); a row of A for
  // output (oy, ox) is then kh runs of kw * C contiguous bytes (dilation_w 1).
  // A 1x1 stride-1 convolution without padding reads the copy itself as A.
  // Images with few output positions go through the GEMM together (their
  // rows stacked in A), so that every call has work for all threads.
  const int64_t hp = h + q.pad_t + q.pad_b, wp = wd + q.pad_l + q.pad_r, image = hp * wp * q.c;
  const bool direct = q.kh == 1 && q.kw == 1 && q.stride_h == 1 && q.stride_w == 1 && hp == h && wp == wd;
  const int64_t group = std::max<int64_t>(1, std::min<int64_t>(n, (kMinGemmRows + p - 1) / p));
  // Work buffers, kept by the calling thread from run to run: fresh ones of
  // this size come from mmap and cost a page fault per 4 KiB on every run.
  thread_local std::vector<uint8_t> xp_buffer, a_buffer, out_buffer;
  auto reserve = [](std::vector<uint8_t>& v, int64_t size) {
    if (v.size() < static_cast<size_t>(size)) v.resize(static_cast<size_t>(size));
    return v.data();
  };
  uint8_t* const xp = reserve(xp_buffer, group * image);              // padded NHWC images [group, hp, wp, C]
  uint8_t* const a = direct ? xp : reserve(a_buffer, group * p * k);  // A [group * P, K], one byte per value
  uint8_t* const out = reserve(out_buffer, group * p * q.m);          // Y^T [group * P, M] from gemm_s8
  if (hp != h || wp != wd) std::memset(xp, q.x_zp, static_cast<size_t>(group * image));  // the padding
  const auto* xb = static_cast<const uint8_t*>(x.raw_data());
  auto* yb = static_cast<uint8_t*>(y.raw_data());
  const int64_t run = q.dil_w == 1 ? q.kw * q.c : q.c;  // contiguous bytes per copy
  for (int64_t img0 = 0; img0 < n; img0 += group) {
    const int64_t g = std::min(group, n - img0);
    // NCHW -> padded NHWC: per input row, [C, W] -> [W, C].
    ParallelFor(ctx.pool(), g * h, 4, [&](int64_t y0, int64_t y1) {
      for (int64_t gy = y0; gy < y1; ++gy) {
        const int64_t gi = gy / h, iy = gy % h;
        TransposeBytes(xb + ((img0 + gi) * q.c * h + iy) * wd, h * wd,
                       xp + gi * image + ((iy + q.pad_t) * wp + q.pad_l) * q.c, q.c, q.c, 0, wd);
      }
    });
    // Unfold: row (image, oy, ox), column (ky, kx, c).
    if (!direct) {
      ParallelFor(ctx.pool(), g * p, 64, [&](int64_t r0, int64_t r1) {
        for (int64_t r = r0; r < r1; ++r) {
          const int64_t gi = r / p, oy = (r % p) / wo, ox = r % wo;
          uint8_t* row = a + r * k;
          for (int64_t ky = 0; ky < q.kh; ++ky) {
            const uint8_t* src = xp + gi * image + ((oy * q.stride_h + ky * q.dil_h) * wp + ox * q.stride_w) * q.c;
            for (int64_t kx = 0; kx < q.kw; kx += run / q.c) {
              std::memcpy(row, src + kx * q.dil_w * q.c, static_cast<size_t>(run));
              row += run;
            }
          }
        }
      });
    }
    GemmS8Args args;
    args.m = g * p;
    args.a = a;
    args.a_signed = q.x_type == DataType::kInt8;
    args.lda = k;
    args.a_zp = GemmZeroPoints{&q.x_zp, false};
    args.b = &q.w;
    args.out.out_q = out;
    args.out.out_q_signed = q.y_type == DataType::kInt8;
    args.out.ld_q = q.m;
    args.out.bias = q.bias.empty() ? nullptr : q.bias.data();
    args.out.multiplier = q.multiplier.data();
    args.out.zero_point = q.y_zp;
    args.pool = ctx.pool();
    Status st = RunGemmS8(args);
    if (!st.ok()) return ctx.Error(st.code(), st.message());
    // [P, M] -> [M, P] per image, through the table when there is one.
    if (!q.table.empty()) {
      ParallelFor(ctx.pool(), g * p * q.m, 16384,
                  [&](int64_t i0, int64_t i1) { apply_table(q.table.data(), flip, out + i0, out + i0, i1 - i0); });
    }
    const int64_t m_blocks = (q.m + 31) / 32;
    ParallelFor(ctx.pool(), g * m_blocks, 1, [&](int64_t b0, int64_t b1) {
      for (int64_t b = b0; b < b1; ++b) {
        const int64_t gi = b / m_blocks, m0 = (b % m_blocks) * 32, m1 = std::min(q.m, m0 + 32);
        TransposeBytes(out + gi * p * q.m, q.m, yb + (img0 + gi) * q.m * p, p, p, m0, m1);
      }
    });
  }
  ctx.set_output(0, std::move(y));
  return Status::OK();
}

}  // namespace

void RegisterPreparedCpuQuantConvOps(KernelRegistry& r) {
  r.Add({"QLinearConv", "", 10, 99, RunQuantConv, "gemm_s8", PrepareQuantConv, kPrioritySecond});
  r.Add({"QLinearConvLut", kSparqDomain, 1, 1, RunQuantConv, "gemm_s8_lut", PrepareQuantConvLut, kPrioritySecond});
}

}  // namespace sparq
