// QLinearConv on the INT8 GEMM (gemm_s8): per image, the input is unfolded
// into rows of A [P, K] (one row per output position, K = C * kh * kw, padding
// filled with the input's zero point so that it contributes 0), multiplied by
// the weights packed once at prepare, requantized per output channel, and
// transposed into NCHW.
//
// Pruned weights (zero point 0, see kernels/cpu/sparse_s8.h): when the kernel
// speed table says their structure beats dense, the prepare step packs them
// for spmm_bsr_s8 / spmm_nm_s8 instead, and each image runs in the NCHW
// layout without a transpose:
//
//   Y^T [Cout, P] = W [Cout, K] * col [K, P]     col: the input unfolded as
//   (= the image's NCHW output)                   rows (c, ky, kx), columns (oy, ox)
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
#include "kernels/cpu/sparse_s8.h"
#include "kernels/formats.h"
#include "kernels/parallel.h"
#include "kernels/ref/quantize.h"
#include "kernels/registry.h"

namespace sparq {
namespace {

struct QuantConv {
  int64_t m = 0, c = 0, kh = 0, kw = 0;
  int64_t stride_h = 1, stride_w = 1, dil_h = 1, dil_w = 1;
  int64_t pad_t = 0, pad_l = 0, pad_b = 0, pad_r = 0;
  DataType x_type = DataType::kUndefined, y_type = DataType::kUndefined;
  int32_t x_zp = 0, y_zp = 0;
  std::vector<float> multiplier;  // [M]
  std::vector<int32_t> bias;      // [M] or empty
  PackedGemmS8 w;                 // [M, C * kh * kw], when not sparse
  SparseS8Weights sparse;         // the same weights for a sparse kernel, when it is faster
};

int32_t ScalarInt(const Tensor& t) {
  return t.dtype() == DataType::kUInt8 ? static_cast<int32_t>(t.data<uint8_t>()[0])
                                       : static_cast<int32_t>(t.data<int8_t>()[0]);
}

bool IsByteType(DataType t) { return t == DataType::kUInt8 || t == DataType::kInt8; }

StatusOr<PreparedKernel> PrepareQuantConv(const Node& node, const std::vector<const Tensor*>& constants,
                                          const PrepareContext& context) {
  auto decline = [&](const std::string& why) -> Status {
    return Status::NotSupported(node.Describe() + ": gemm_s8 conv path: " + why);
  };
  auto constant = [&](size_t i) { return i < constants.size() ? constants[i] : nullptr; };
  auto named = [&](size_t i) { return i < node.inputs.size() && !node.inputs[i].empty(); };
  for (size_t i : {1, 2, 3, 4, 5, 6, 7, 8})
    if (named(i) && constant(i) == nullptr) return decline("input " + std::to_string(i) + " is not a constant");
  if (!named(2) || !named(5) || !named(7)) return decline("zero points must be given");
  const Tensor& w = *constant(3);
  const Tensor &x_scale = *constant(1), &x_zp = *constant(2), &w_scale = *constant(4), &w_zp = *constant(5);
  const Tensor &y_scale = *constant(6), &y_zp = *constant(7);
  if (w.dtype() != DataType::kInt8 || w.rank() != 4) return decline("weights are not 4-D int8");
  if (node.attr_int("group", 1) != 1) return decline("grouped convolution");
  const std::string auto_pad = node.attr_string("auto_pad", "NOTSET");
  if (auto_pad != "NOTSET") return decline("auto_pad " + auto_pad);
  auto q = std::make_shared<QuantConv>();
  q->m = w.dim(0), q->c = w.dim(1), q->kh = w.dim(2), q->kw = w.dim(3);
  const std::vector<int64_t> strides = node.attr_ints("strides", {1, 1});
  const std::vector<int64_t> dilations = node.attr_ints("dilations", {1, 1});
  const std::vector<int64_t> pads = node.attr_ints("pads", {0, 0, 0, 0});
  const std::vector<int64_t> kernel = node.attr_ints("kernel_shape", {q->kh, q->kw});
  if (strides.size() != 2 || dilations.size() != 2 || pads.size() != 4 || kernel != std::vector<int64_t>{q->kh, q->kw})
    return decline("attributes outside the 2-D path");
  q->stride_h = strides[0], q->stride_w = strides[1], q->dil_h = dilations[0], q->dil_w = dilations[1];
  q->pad_t = pads[0], q->pad_l = pads[1], q->pad_b = pads[2], q->pad_r = pads[3];
  for (int64_t v : {q->stride_h, q->stride_w, q->dil_h, q->dil_w})
    if (v < 1) return decline("stride or dilation below 1");
  for (int64_t v : pads)
    if (v < 0) return decline("negative pads");
  if (x_scale.dtype() != DataType::kFloat32 || x_scale.numel() != 1 || y_scale.dtype() != DataType::kFloat32 ||
      y_scale.numel() != 1 || w_scale.dtype() != DataType::kFloat32 ||
      (w_scale.numel() != 1 && w_scale.numel() != q->m)) {
    return decline("scales are not float32 per tensor (w_scale: or per output channel)");
  }
  if (!IsByteType(x_zp.dtype()) || x_zp.numel() != 1 || !IsByteType(y_zp.dtype()) || y_zp.numel() != 1 ||
      w_zp.dtype() != DataType::kInt8 || (w_zp.numel() != 1 && w_zp.numel() != q->m)) {
    return decline("zero points outside the fast path");
  }
  q->x_type = x_zp.dtype(), q->y_type = y_zp.dtype();
  q->x_zp = ScalarInt(x_zp), q->y_zp = ScalarInt(y_zp);
  for (int64_t o = 0; o < q->m; ++o) {
    q->multiplier.push_back(RequantMultiplier(x_scale.data<float>()[0], w_scale.data<float>()[w_scale.numel() == 1 ? 0 : o],
                                              y_scale.data<float>()[0]));
  }
  if (named(8)) {
    const Tensor& b = *constant(8);
    if (b.dtype() != DataType::kInt32 || b.numel() != q->m) return decline("B is not int32 with one value per channel");
    q->bias.assign(b.data<int32_t>(), b.data<int32_t>() + q->m);
  }
  std::vector<int32_t> zp(static_cast<size_t>(w_zp.numel()));
  bool symmetric = true;
  for (int64_t i = 0; i < w_zp.numel(); ++i) {
    zp[i] = w_zp.data<int8_t>()[i];
    symmetric = symmetric && zp[i] == 0;
  }
  const int64_t k = q->c * q->kh * q->kw;
  if (symmetric) {
    SPARQ_ASSIGN_OR_RETURN(q->sparse, ChooseSparseS8(w.data<int8_t>(), q->m, k, *context.kernel_table));
  }
  std::string kernel_name;
  if (q->sparse.sparse()) {
    kernel_name = q->sparse.kernel;
  } else {
    const GemmZeroPoints w_zero{zp.data(), zp.size() > 1};
    SPARQ_ASSIGN_OR_RETURN(q->w,
                           PackGemmS8<int8_t>(w.data<int8_t>(), q->m, k, w_zero, PreferredGemmS8Format(ActiveIsa())));
  }
  return PreparedKernel{std::shared_ptr<const void>(std::move(q)), kernel_name};
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
  if (x.dtype() != q.x_type || x.rank() != 4 || x.dim(1) != q.c) return RunReferenceKernel(ctx);
  const int64_t n = x.dim(0), h = x.dim(2), wd = x.dim(3);
  const int64_t ho_num = h + q.pad_t + q.pad_b - q.dil_h * (q.kh - 1) - 1;
  const int64_t wo_num = wd + q.pad_l + q.pad_r - q.dil_w * (q.kw - 1) - 1;
  if (ho_num < 0 || wo_num < 0) return RunReferenceKernel(ctx);  // the reference names the error
  const int64_t ho = ho_num / q.stride_h + 1, wo = wo_num / q.stride_w + 1, p = ho * wo;
  const int64_t k = q.c * q.kh * q.kw;
  Tensor y(q.y_type, {n, q.m, ho, wo});
  if (q.sparse.sparse()) {
    std::vector<uint8_t> col(static_cast<size_t>(k * p));
    for (int64_t img = 0; img < n; ++img) {
      SPARQ_RETURN_IF_ERROR(RunSparseImage(ctx, q, static_cast<const uint8_t*>(x.raw_data()) + img * q.c * h * wd, h,
                                           wd, ho, wo, &col, static_cast<uint8_t*>(y.raw_data()) + img * q.m * p));
    }
    ctx.set_output(0, std::move(y));
    return Status::OK();
  }
  std::vector<uint8_t> a(static_cast<size_t>(p * k));     // A [P, K], one byte per value
  std::vector<uint8_t> out(static_cast<size_t>(p * q.m));  // Y^T [P, M] from gemm_s8
  const uint8_t pad = static_cast<uint8_t>(q.x_zp);        // the zero point's byte
  const auto* xb = static_cast<const uint8_t*>(x.raw_data());
  auto* yb = static_cast<uint8_t*>(y.raw_data());
  for (int64_t img = 0; img < n; ++img) {
    const uint8_t* xi = xb + img * q.c * h * wd;
    // Unfold: row (oy, ox), column (c, ky, kx).
    ParallelFor(ctx.pool(), p, 64, [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        const int64_t oy = r / wo, ox = r % wo;
        uint8_t* row = a.data() + r * k;
        for (int64_t ch = 0; ch < q.c; ++ch)
          for (int64_t ky = 0; ky < q.kh; ++ky) {
            const int64_t iy = oy * q.stride_h - q.pad_t + ky * q.dil_h;
            for (int64_t kx = 0; kx < q.kw; ++kx) {
              const int64_t ix = ox * q.stride_w - q.pad_l + kx * q.dil_w;
              *row++ = (iy < 0 || iy >= h || ix < 0 || ix >= wd) ? pad : xi[(ch * h + iy) * wd + ix];
            }
          }
      }
    });
    GemmS8Args args;
    args.m = p;
    args.a = a.data();
    args.a_signed = q.x_type == DataType::kInt8;
    args.lda = k;
    args.a_zp = GemmZeroPoints{&q.x_zp, false};
    args.b = &q.w;
    args.out.out_q = out.data();
    args.out.out_q_signed = q.y_type == DataType::kInt8;
    args.out.ld_q = q.m;
    args.out.bias = q.bias.empty() ? nullptr : q.bias.data();
    args.out.multiplier = q.multiplier.data();
    args.out.zero_point = q.y_zp;
    args.pool = ctx.pool();
    Status st = RunGemmS8(args);
    if (!st.ok()) return ctx.Error(st.code(), st.message());
    // [P, M] -> [M, P] of this image.
    uint8_t* yi = yb + img * q.m * p;
    ParallelFor(ctx.pool(), q.m, 4, [&](int64_t m0, int64_t m1) {
      for (int64_t m = m0; m < m1; ++m)
        for (int64_t r = 0; r < p; ++r) yi[m * p + r] = out[r * q.m + m];
    });
  }
  ctx.set_output(0, std::move(y));
  return Status::OK();
}

}  // namespace

void RegisterPreparedCpuQuantConvOps(KernelRegistry& r) {
  r.Add({"QLinearConv", "", 10, 99, RunQuantConv, "gemm_s8", PrepareQuantConv});
}

}  // namespace sparq
