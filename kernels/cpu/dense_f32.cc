// FP32 Conv, MatMul and Gemm with constant weights on the FP32 GEMM
// (gemm_f32): the executor's prepare step packs the weights once for the
// active ISA's register tile; each run packs activation strips on the fly
// (im2col for convolutions, without a full im2col buffer) and writes NCHW /
// row-major outputs directly.
//
// ai.sparq FusedConv (Conv -> Relu / Clip / SiLU, runtime/passes/float_fusion.h)
// runs the same path with the activation's clamp, or its SiLU, in the GEMM's
// epilogue. Pointwise
// convolutions on small planes run with pixels as the GEMM's rows
// (kPointwiseConv, weights also packed as strips), where that wastes less
// of the register tile on tails (PointwiseRowsWin). Wider windows run with
// pixels as rows read in place from the padded image (kDirectConv) where
// DirectConvWins, else the shifted taps (stride 1) or im2col strips.
//
// Depthwise Conv (group = channels, one filter each): a direct loop per
// channel (depthwise_f32), since its few multiply-adds per output would waste
// the GEMM's register tile.
//
// sparq.PointwiseDepthwise (a 1x1 Conv into a depthwise one, MobileNet /
// EfficientNet blocks, runtime/passes/float_fusion.h) on pointwise_depthwise_f32:
// the 1x1 convolution's output goes straight into the depthwise lanes
// kernel's padded input, a band of rows at a time, never to memory. Where the
// geometry does not fit, the two parts run as the unfused nodes did.
//
// Conv fast path: 2-D, float32, constant W (and B); any group, stride,
// dilation, padding or auto_pad (resolved per input shape by the reference's
// PrepareConv). MatMul: constant 2-D B, A of rank >= 2. Gemm: transA = 0,
// alpha = 1, constant B, C absent or a constant [N] / [1, N] bias with
// beta = 1. MatMul of two activations: gemm_f32_batched, B packed per run.
// Anything else, and runs with unexpected inputs, use the reference
// kernel. Results match the reference within float rounding (FMA and the
// order of the bias addition differ), the same bits for any thread count.
#include <algorithm>
#include <limits>
#include <memory>
#include <tuple>
#include <vector>

#include "kernels/cpu/activation_f32.h"
#include "kernels/cpu/dispatch.h"
#include "kernels/cpu/internal.h"
#include "kernels/cpu/linear_weights.h"
#include "kernels/packed_formats.h"
#include "kernels/ref/conv.h"
#include "kernels/ref/fused_conv.h"
#include "kernels/ref/nn_common.h"
#include "kernels/registry.h"

namespace sparq {
namespace {

// Below this many multiply-adds per output value and output channels per
// group, a grouped convolution (depthwise: kh * kw, one channel) wastes most
// of the register tile: the reference wins. Tall groups fill the tile at any
// depth (DeepFilterNet3's 2 groups of 32 3x3 filters on one channel each:
// 0.53 ms a call against the reference's 1.43).
// A group-1 convolution is one GEMM over the whole image, and its tile wins
// at any depth (PP-OCR det's 12 -> 96 1x1 on 80 x 80: 0.21 ms against the
// reference's 0.8).
constexpr int64_t kMinConvDepth = 16;

struct DenseConv {
  int64_t out_channels = 0, group = 1;
  std::vector<PackedGemmF32> w;  // one per group: [M / group, C / group * kh * kw], K in (c, ky, kx) order
  PackedGemmF32 w_taps;          // group 1, window > 1x1: K in (ky, kx, c) order, for stride-1 runs
  PackedGemmF32 w_direct;        // group 1, 8 x 32 tile: strips, K in (ky, kx, c) order (kDirectConv)
  PackedGemmF32 w_strips;        // group 1, 1x1 window: strips (W^T), for pointwise runs on small planes
  std::vector<float> bias;       // [M] or empty
  SigmoidF32Fn silu = nullptr;   // FusedConv with SiLU: its sigmoid_f32 row (FusedSiluRow)
};

// A depthwise convolution: group == input channels == output channels.
struct DepthwiseConv {
  std::vector<float> w;        // [C, kh * kw]
  std::vector<float> w_lanes;  // the same, PackDepthwiseLanes
  std::vector<float> bias;     // [C] or zeros
  const CpuKernelDef* plane = nullptr;  // a depthwise_f32 row
  SigmoidF32Fn silu = nullptr;          // FusedConv with SiLU: its sigmoid_f32 row (FusedSiluRow)
};

struct DenseLinear {
  PackedGemmF32 w;          // [N, K] = B^T
  std::vector<float> bias;  // [N] or empty
};

// Whether a group-1 convolution with a window wider than 1x1 runs faster as
// kDirectConv (pixels as the AVX-512 tile's rows, read in place) than with
// the weights as rows (kShiftedConv at stride 1, kConv's im2col strips
// otherwise), from `rows` output channels, `depth` = C * kh * kw and the
// strides. The direct tile broadcasts one value per pixel row and k, and
// this core runs one broadcast every 2 cycles: its 32 columns balance the
// broadcasts with the multiply-adds, a strip of 16 or fewer columns (the
// tail of 24 or 48 channels) runs at half speed. Measured, 1 thread, CPU
// time, YOLOv8n's and PP-OCR det's 3x3 layers (bench/RESULTS.md, i14-g32):
//   stride 1, 32 | rows:  104-110 GFLOP/s against kShiftedConv's 88-96
//   stride 1, 24 / 40 / 48 rows: 69-83 against 96-98 (shifted stays)
//   stride 2, > 16 rows:  69-107 against kConv's 40-75, its strip packing
//   stride 2, 16 rows:    48 against 41 with depth 288, 30 against 40 with
//                         depth 27 (the 3-channel stem keeps kConv)
bool DirectConvWins(int64_t rows, int64_t depth, bool strided) {
  return strided ? rows > 16 || depth >= 64 : rows % 32 == 0;
}

// A 1-D convolution runs as the 2-D one of height 1 (the rows below take
// 4-D tensors): W [M, C, K] as [M, C, 1, K], X [N, C, L] as [N, C, 1, L],
// the window's attributes lifted with a leading dim of extent 1, stride 1,
// no padding. Same sums in the same order: the bits of a 2-D model.
struct Conv1dAs2d {
  Tensor w4;  // the 4-D view of a 3-D weight (shares its buffer)
};

// `w` as a 4-D weight: itself, or the view of a 3-D one in *lifted.
const Tensor* AsConv2dWeight(const Tensor* w, Conv1dAs2d* lifted) {
  if (w == nullptr || w->rank() != 3) return w;
  StatusOr<Tensor> view = w->Reshaped({w->dim(0), w->dim(1), 1, w->dim(2)});
  if (!view.ok()) return nullptr;
  lifted->w4 = std::move(*view);
  return &lifted->w4;
}

// Lifts a resolved 1-D window to 2-D (PrepareConv on the 3-D shapes first).
void LiftWindowTo2d(WindowGeometry* w) {
  w->kernel = {1, w->kernel[0]};
  w->strides = {1, w->strides[0]};
  w->dilations = {1, w->dilations[0]};
  w->pads = {0, w->pads[0], 0, w->pads[1]};
}

// The input and geometry of a Conv row for x of rank 3 or 4: x4 (x, or its
// [N, C, 1, L] view), the window resolved (and lifted for 1-D), y's shape in
// 4-D and as the node outputs it. False: not a shape the rows take.
bool ResolveConvRow(OpContext& ctx, int64_t group, Tensor* x4, ConvParams* params, Shape* y4, Shape* y_shape) {
  const Tensor& x = ctx.input(0);
  if (x.dtype() != DataType::kFloat32 || (x.rank() != 4 && x.rank() != 3)) return false;
  AutoPad auto_pad = AutoPad::kNotSet;
  if (!ReadWindowAttributes(ctx, &params->window, &auto_pad).ok()) return false;
  params->group = group;
  if (!PrepareConv(x.shape(), ctx.input(1).shape(), auto_pad, params, y_shape).ok()) return false;
  *x4 = x;
  *y4 = *y_shape;
  if (x.rank() == 3) {
    LiftWindowTo2d(&params->window);
    StatusOr<Tensor> view = x.Reshaped({x.dim(0), x.dim(1), 1, x.dim(2)});
    if (!view.ok()) return false;
    *x4 = std::move(*view);
    *y4 = {(*y_shape)[0], (*y_shape)[1], 1, (*y_shape)[2]};
  }
  return true;
}

// Sets output 0 from the 4-D result, in the node's rank.
Status SetConvOutput(OpContext& ctx, Tensor y4, const Shape& y_shape) {
  if (y4.rank() == y_shape.size()) {
    ctx.set_output(0, std::move(y4));
    return Status::OK();
  }
  SPARQ_ASSIGN_OR_RETURN(Tensor y, y4.Reshaped(y_shape));
  ctx.set_output(0, std::move(y));
  return Status::OK();
}

StatusOr<std::shared_ptr<const void>> PrepareDenseConv(const Node& node, const std::vector<const Tensor*>& constants) {
  auto decline = [&](const std::string& why) -> Status {
    return Status::NotSupported(node.Describe() + ": gemm_f32 conv path: " + why);
  };
  Conv1dAs2d lifted;
  const Tensor* w = AsConv2dWeight(constants.size() > 1 ? constants[1] : nullptr, &lifted);
  if (w == nullptr || w->dtype() != DataType::kFloat32 || w->rank() != 4) return decline("W is not a constant 3-D or 4-D float32");
  const bool has_bias = node.inputs.size() > 2 && !node.inputs[2].empty();
  const Tensor* b = has_bias ? constants[2] : nullptr;
  if (has_bias && (b == nullptr || b->dtype() != DataType::kFloat32 || b->numel() != w->dim(0)))
    return decline("B is not a constant float32 bias per output channel");
  auto conv = std::make_shared<DenseConv>();
  conv->out_channels = w->dim(0);
  conv->group = node.attr_int("group", 1);
  if (conv->group < 1 || conv->out_channels % conv->group != 0) return decline("bad group");
  const int64_t rows = conv->out_channels / conv->group, depth = w->numel() / std::max<int64_t>(1, w->dim(0));
  if (conv->group > 1 && depth < kMinConvDepth && rows < kMinConvDepth)
    return decline("too few multiply-adds per output (" + std::to_string(depth) + ")");
  const PackedFormat format = PreferredGemmF32Format(ActiveIsa());
  for (int64_t g = 0; g < conv->group; ++g) {
    SPARQ_ASSIGN_OR_RETURN(PackedGemmF32 packed, PackGemmF32(w->data<float>() + g * rows * depth, rows, depth, format));
    conv->w.push_back(std::move(packed));
  }
  const int64_t taps = w->dim(2) * w->dim(3);
  if (conv->group == 1 && taps > 1) {
    const int64_t channels = w->dim(1);
    std::vector<float> permuted(static_cast<size_t>(w->numel()));
    const float* src = w->data<float>();
    for (int64_t o = 0; o < rows; ++o)
      for (int64_t c = 0; c < channels; ++c)
        for (int64_t t = 0; t < taps; ++t) permuted[(o * taps + t) * channels + c] = src[(o * channels + c) * taps + t];
    const std::vector<int64_t> strides = node.attr_ints("strides", {1, 1});
    const bool strided = std::any_of(strides.begin(), strides.end(), [](int64_t v) { return v != 1; });
    if (format == PackedFormat::kPanel8x32F32 && DirectConvWins(rows, depth, strided)) {  // measured on AVX-512 only
      SPARQ_ASSIGN_OR_RETURN(conv->w_direct, PackGemmF32(permuted.data(), rows, depth, format, /*strips=*/true));
    } else {
      SPARQ_ASSIGN_OR_RETURN(conv->w_taps, PackGemmF32(permuted.data(), rows, depth, format));
    }
  }
  if (conv->group == 1 && taps == 1) {
    SPARQ_ASSIGN_OR_RETURN(conv->w_strips, PackGemmF32(w->data<float>(), rows, depth, format, /*strips=*/true));
  }
  if (b != nullptr) conv->bias.assign(b->data<float>(), b->data<float>() + b->numel());
  conv->silu = cpu::FusedSiluRow(node);
  return std::shared_ptr<const void>(std::move(conv));
}

// Whether a pointwise convolution of `pixels` per image into `channels`
// outputs runs faster with pixels as the tile's rows (kPointwiseConv) than as
// its columns (kConv). A tile's columns are vector lanes, paid a whole vector
// at a time even when masked; its rows cost only the rows used (the AVX-512
// tile: vectors of 16 of its 32 columns; the AVX2 and portable tiles pay
// their full width and their 6 or 4 rows). So the question is which
// dimension fills the lanes better: pixels as rows wins where it spends at
// most 9/10 of kConv's lane work, the margin measured on EfficientNet-Lite0's
// layers (bench/kernels_bench.cc effnet_lite0 rows, bench/RESULTS.md: 7 x 7
// planes, 49 pixels in lanes of 64, go to kPointwiseConv; 14 x 14 planes,
// 196 pixels in 208 lanes, and larger stay on kConv).
bool PointwiseRowsWin(const PackedGemmF32& strips, int64_t pixels, int64_t channels) {
  const int64_t lanes = strips.format == PackedFormat::kPanel8x32F32 ? 16 : strips.tile_cols();
  auto padded = [lanes](int64_t n) { return (n + lanes - 1) / lanes * lanes; };
  return 10 * pixels * padded(channels) <= 9 * padded(pixels) * channels;
}

Status RunDenseConv(OpContext& ctx) {
  const DenseConv& conv = *static_cast<const DenseConv*>(ctx.prepared());
  Tensor x;
  ConvParams params;
  Shape y_shape, node_y_shape;
  if (!ResolveConvRow(ctx, conv.group, &x, &params, &y_shape, &node_y_shape)) {
    return RunReferenceKernel(ctx);  // the reference names the error
  }
  Tensor y = ctx.OutputBuffer(0, DataType::kFloat32, y_shape);  // every group writes its channels
  const int64_t channels = x.dim(1) / conv.group, rows = conv.out_channels / conv.group;
  GemmF32Args args;
  args.source = GemmF32Source::kConv;
  args.batch = x.dim(0);
  ConvGeometry& g = args.conv;
  g.channels = channels, g.height = x.dim(2), g.width = x.dim(3);
  g.kernel_h = params.window.kernel[0], g.kernel_w = params.window.kernel[1];
  g.stride_h = params.window.strides[0], g.stride_w = params.window.strides[1];
  g.dilation_h = params.window.dilations[0], g.dilation_w = params.window.dilations[1];
  g.pad_top = params.window.pads[0], g.pad_left = params.window.pads[1];
  g.out_h = y_shape[2], g.out_w = y_shape[3];
  args.x_image_stride = x.dim(1) * g.height * g.width;
  args.y_image_stride = conv.out_channels * g.out_size();
  args.pool = ctx.pool();
  if (ctx.node().domain == kSparqDomain) {  // FusedConv
    args.out_min = ctx.node().attr_float("out_min", args.out_min);
    args.out_max = ctx.node().attr_float("out_max", args.out_max);
    args.silu = conv.silu;
  }
  const bool pointwise = g.kernel_h == 1 && g.kernel_w == 1 && g.stride_h == 1 && g.stride_w == 1 &&
                         g.pad_top == 0 && g.pad_left == 0 && g.out_h == g.height && g.out_w == g.width;
  // One GEMM over the whole image batch with these weights, read from x as `source` says.
  auto run_whole = [&](GemmF32Source source, const PackedGemmF32* w) {
    args.source = source;
    args.w = w;
    args.bias = conv.bias.empty() ? nullptr : conv.bias.data();
    args.x = x.data<float>();
    args.y = y.data<float>();
    Status st = RunGemmF32(args);
    if (!st.ok()) return ctx.Error(st.code(), st.message());
    return SetConvOutput(ctx, std::move(y), node_y_shape);
  };
  if (pointwise && !conv.w_strips.data.empty() && PointwiseRowsWin(conv.w_strips, g.out_size(), conv.out_channels))
    return run_whole(GemmF32Source::kPointwiseConv, &conv.w_strips);
  // Pixels as the tile's rows, read in place from the (padded) image: the
  // windows wider than 1x1 where DirectConvWins (1x1: the paths above and
  // kConv, faster on YOLOv8n's and EfficientNet's layers).
  if (!conv.w_direct.data.empty())
    return run_whole(GemmF32Source::kDirectConv, &conv.w_direct);
  // Stride 1 with a window wider than 1x1: the padded image shifted per tap,
  // no im2col.
  if (g.stride_h == 1 && g.stride_w == 1 && conv.group == 1 && !conv.w_taps.data.empty()) {
    g.pad_bottom = params.window.pads[2], g.pad_right = params.window.pads[3];
    return run_whole(GemmF32Source::kShiftedConv, &conv.w_taps);
  }
  for (int64_t grp = 0; grp < conv.group; ++grp) {
    args.w = &conv.w[grp];
    args.bias = conv.bias.empty() ? nullptr : conv.bias.data() + grp * rows;
    args.x = x.data<float>() + grp * channels * g.height * g.width;
    args.y = y.data<float>() + grp * rows * g.out_size();
    Status st = RunGemmF32(args);
    if (!st.ok()) return ctx.Error(st.code(), st.message());
  }
  return SetConvOutput(ctx, std::move(y), node_y_shape);
}

// RunDepthwiseConv's chunks of output columns for one long-window row.
constexpr int64_t kMinSplitWindow = 32;
constexpr int64_t kSplitColumns = 1024;

StatusOr<std::shared_ptr<const void>> PrepareDepthwiseConv(const Node& node,
                                                           const std::vector<const Tensor*>& constants) {
  auto decline = [&](const std::string& why) -> Status {
    return Status::NotSupported(node.Describe() + ": depthwise_f32 path: " + why);
  };
  Conv1dAs2d lifted;
  const Tensor* w = AsConv2dWeight(constants.size() > 1 ? constants[1] : nullptr, &lifted);
  if (w == nullptr || w->dtype() != DataType::kFloat32 || w->rank() != 4) return decline("W is not a constant 3-D or 4-D float32");
  if (w->dim(1) != 1 || node.attr_int("group", 1) != w->dim(0)) return decline("not depthwise");
  const bool has_bias = node.inputs.size() > 2 && !node.inputs[2].empty();
  const Tensor* b = has_bias ? constants[2] : nullptr;
  if (has_bias && (b == nullptr || b->dtype() != DataType::kFloat32 || b->numel() != w->dim(0)))
    return decline("B is not a constant float32 bias per channel");
  auto conv = std::make_shared<DepthwiseConv>();
  conv->w.assign(w->data<float>(), w->data<float>() + w->numel());
  conv->bias.assign(static_cast<size_t>(w->dim(0)), 0.0f);
  if (b != nullptr) conv->bias.assign(b->data<float>(), b->data<float>() + b->numel());
  conv->w_lanes = PackDepthwiseLanes(conv->w.data(), w->dim(0), w->numel() / w->dim(0));
  conv->plane = &SelectCpuKernel(CpuOp::kDepthwiseF32);
  conv->silu = cpu::FusedSiluRow(node);
  return std::shared_ptr<const void>(std::move(conv));
}

Status RunDepthwiseConv(OpContext& ctx) {
  const DepthwiseConv& conv = *static_cast<const DepthwiseConv*>(ctx.prepared());
  const int64_t channels = static_cast<int64_t>(conv.bias.size());
  Tensor x;
  ConvParams params;
  Shape y_shape, node_y_shape;
  if (ctx.input(0).rank() < 2 || ctx.input(0).dim(1) != channels ||
      !ResolveConvRow(ctx, channels, &x, &params, &y_shape, &node_y_shape)) {
    return RunReferenceKernel(ctx);
  }
  Tensor y = ctx.OutputBuffer(0, DataType::kFloat32, y_shape);  // every plane is written
  DepthwiseF32Channels base;  // depthwise_f32: blocks of 16 channels of an image per call, split over the threads
  base.height = x.dim(2), base.width = x.dim(3), base.out_h = y_shape[2], base.out_w = y_shape[3];
  base.kernel_h = params.window.kernel[0], base.kernel_w = params.window.kernel[1];
  base.stride_h = params.window.strides[0], base.stride_w = params.window.strides[1];
  base.dilation_h = params.window.dilations[0], base.dilation_w = params.window.dilations[1];
  base.pad_top = params.window.pads[0], base.pad_left = params.window.pads[1];
  if (ctx.node().domain == kSparqDomain) {  // FusedConv
    base.out_min = ctx.node().attr_float("out_min", base.out_min);
    base.out_max = ctx.node().attr_float("out_max", base.out_max);
  }
  const int64_t in_plane = base.height * base.width, out_plane = base.out_h * base.out_w;
  const int64_t taps = base.kernel_h * base.kernel_w, lanes = DepthwiseWindow::kLanes;
  const int64_t blocks = (channels + lanes - 1) / lanes;  // per image
  const float* xd = x.data<float>();
  float* yd = y.data<float>();
  const DepthwiseF32Fn channels_fn = conv.plane->get<DepthwiseF32Fn>();
  // One channel of one input row and a long window (basic-pitch's CQT filter,
  // 1 x 256 at stride 2 over 44,098 samples): the images alone would leave
  // threads idle, so the output row is cut into chunks of columns too. A chunk
  // past the columns whose windows start left of the image reads x from its
  // first window's column, without left padding: every output sums the same
  // taps in the same order, so any split gives the same bits.
  const int64_t threads = ctx.pool() != nullptr ? ctx.pool()->num_threads() : 1;
  if (channels == 1 && base.height == 1 && base.out_h == 1 && base.kernel_w >= kMinSplitWindow &&
      x.dim(0) < threads && base.out_w >= 2 * kSplitColumns) {
    const int64_t sw = base.stride_w;
    const int64_t first = std::min(base.out_w, std::max<int64_t>(kSplitColumns, (base.pad_left + sw - 1) / sw));
    const int64_t chunks = 1 + (base.out_w - first + kSplitColumns - 1) / kSplitColumns;
    ParallelFor(ctx.pool(), x.dim(0) * chunks, 1, [&](int64_t t0, int64_t t1) {
      float* scratch = cpu::DepthwiseThreadScratch(base.ScratchFloats());
      for (int64_t t = t0; t < t1; ++t) {
        DepthwiseF32Channels a = base;
        const int64_t image = t / chunks, chunk = t % chunks;
        const int64_t c0 = chunk == 0 ? 0 : first + (chunk - 1) * kSplitColumns;
        const int64_t c1 = chunk == 0 ? first : std::min(base.out_w, c0 + kSplitColumns);
        const int64_t shift = chunk == 0 ? 0 : c0 * sw - base.pad_left;  // >= 0: c0 >= first
        a.channels = 1;
        a.x = xd + image * in_plane + shift, a.width = base.width - shift;
        a.pad_left = chunk == 0 ? base.pad_left : 0;
        a.out_w = c1 - c0;
        a.y = yd + image * out_plane + c0;
        a.w = conv.w.data(), a.w_lanes = conv.w_lanes.data(), a.bias = conv.bias.data();
        a.scratch = scratch;
        channels_fn(a);
        if (conv.silu != nullptr) conv.silu(a.y, a.y, a.out_w, true);
      }
    });
    return SetConvOutput(ctx, std::move(y), node_y_shape);
  }
  ParallelFor(ctx.pool(), x.dim(0) * blocks, 1, [&](int64_t b0, int64_t b1) {
    float* scratch = cpu::DepthwiseThreadScratch(base.ScratchFloats());
    for (int64_t b = b0; b < b1; ++b) {
      DepthwiseF32Channels a = base;
      const int64_t image = b / blocks, c0 = (b % blocks) * lanes;
      a.channels = std::min(lanes, channels - c0);
      a.x = xd + (image * channels + c0) * in_plane, a.y = yd + (image * channels + c0) * out_plane;
      a.w = conv.w.data() + c0 * taps, a.w_lanes = conv.w_lanes.data() + c0 * taps, a.bias = conv.bias.data() + c0;
      a.scratch = scratch;
      channels_fn(a);
      if (conv.silu != nullptr) conv.silu(a.y, a.y, a.channels * out_plane, true);  // while the block is in cache
    }
  });
  return SetConvOutput(ctx, std::move(y), node_y_shape);
}

// sparq.PointwiseDepthwise: the fused row's weights, and its parts
// (PointwiseDepthwiseParts) prepared as the unfused nodes would be, for the
// geometries the row does not take (PointwiseDepthwiseF32::Fits).
struct PointwiseDepthwise {
  int64_t in_channels = 0, channels = 0;  // the pointwise convolution's K and M
  std::vector<float> w_pw;                // [pairs][in_channels][32]: W_pw^T, 32 channels a pair, 0 past M
  std::vector<float> b_pw;                // [pairs][32]
  std::vector<float> w_dw;                // PackDepthwiseLanes
  std::vector<float> b_dw;                // [channels]
  const CpuKernelDef* row = nullptr;      // a pointwise_depthwise_f32 row, or nullptr: the parts run
  Node pw_node, dw_node;
  std::shared_ptr<const void> pw_state, dw_state;  // PrepareDenseConv, PrepareDepthwiseConv
};

StatusOr<std::shared_ptr<const void>> PreparePointwiseDepthwise(const Node& node,
                                                                const std::vector<const Tensor*>& constants) {
  auto decline = [&](const std::string& why) -> Status {
    return Status::NotSupported(node.Describe() + ": pointwise_depthwise_f32 path: " + why);
  };
  auto constant = [&](size_t i) { return i < constants.size() ? constants[i] : nullptr; };
  auto bias_absent = [&](size_t i) { return i >= node.inputs.size() || node.inputs[i].empty(); };
  const Tensor *w1 = constant(1), *b1 = constant(2), *w2 = constant(3), *b2 = constant(4);
  if (w1 == nullptr || w2 == nullptr || (!bias_absent(2) && b1 == nullptr) || (!bias_absent(4) && b2 == nullptr))
    return decline("weights or biases are not constants");
  auto p = std::make_shared<PointwiseDepthwise>();
  std::tie(p->pw_node, p->dw_node) = PointwiseDepthwiseParts(node);
  SPARQ_ASSIGN_OR_RETURN(p->pw_state, PrepareDenseConv(p->pw_node, {nullptr, w1, b1}));
  SPARQ_ASSIGN_OR_RETURN(p->dw_state, PrepareDepthwiseConv(p->dw_node, {nullptr, w2, b2}));
  if (w1->dim(2) != 1 || w1->dim(3) != 1 || w1->dim(0) != w2->dim(0)) return decline("not a 1x1 convolution into W_dw");
  p->channels = w1->dim(0), p->in_channels = w1->dim(1);
  const int64_t pair = 2 * DepthwiseWindow::kLanes, pairs = (p->channels + pair - 1) / pair;
  p->w_pw.assign(static_cast<size_t>(pairs * p->in_channels * pair), 0.0f);
  p->b_pw.assign(static_cast<size_t>(pairs * pair), 0.0f);
  const float* w = w1->data<float>();
  for (int64_t c = 0; c < p->channels; ++c) {
    float* dst = p->w_pw.data() + (c / pair) * p->in_channels * pair + c % pair;
    for (int64_t k = 0; k < p->in_channels; ++k) dst[k * pair] = w[c * p->in_channels + k];
    if (b1 != nullptr) p->b_pw[static_cast<size_t>(c)] = b1->data<float>()[c];  // pairs * 32 + c % 32 == c
  }
  const auto& dw = *static_cast<const DepthwiseConv*>(p->dw_state.get());
  p->w_dw = dw.w_lanes, p->b_dw = dw.bias;
  // The portable row (scalar sums, the rows' twin in tests) is slower than
  // the parts on their own rows, whatever the ISA below AVX-512 gives them.
  const CpuKernelDef& row = SelectCpuKernel(CpuOp::kPointwiseDepthwiseF32);
  p->row = row.isa != CpuIsa::kPortable ? &row : nullptr;
  return std::shared_ptr<const void>(std::move(p));
}

// The two parts on their own rows, as the unfused nodes ran.
Status RunPointwiseDepthwiseParts(OpContext& ctx, const PointwiseDepthwise& p) {
  auto in = [&ctx](size_t i) { return ctx.has_input(i) ? &ctx.input(i) : nullptr; };
  OpContext pw(p.pw_node, ctx.opset(), {in(0), in(1), in(2)}, ctx.pool());
  pw.set_prepared(p.pw_state.get());
  SPARQ_RETURN_IF_ERROR(RunDenseConv(pw));
  OpContext dw(p.dw_node, ctx.opset(), {&pw.outputs()[0], in(3), in(4)}, ctx.pool());
  dw.set_prepared(p.dw_state.get());
  SPARQ_RETURN_IF_ERROR(RunDepthwiseConv(dw));
  ctx.set_output(0, std::move(dw.outputs()[0]));
  return Status::OK();
}

// Tasks of (image, pair of 16-channel blocks, band of output rows), in that
// order: a thread's consecutive tasks share a pair's weights. Every output
// is computed by one task the same way, whatever the split.
Status RunPointwiseDepthwise(OpContext& ctx) {
  const PointwiseDepthwise& p = *static_cast<const PointwiseDepthwise*>(ctx.prepared());
  const Tensor& x = ctx.input(0);
  if (p.row == nullptr || x.dtype() != DataType::kFloat32 || x.rank() != 4 || x.dim(1) != p.in_channels)
    return RunPointwiseDepthwiseParts(ctx, p);
  ConvParams params;
  AutoPad auto_pad = AutoPad::kNotSet;
  if (!ReadWindowAttributes(ctx, &params.window, &auto_pad).ok()) return RunPointwiseDepthwiseParts(ctx, p);
  params.group = p.channels;
  const Shape t_shape = {x.dim(0), p.channels, x.dim(2), x.dim(3)};
  Shape y_shape;
  if (!PrepareConv(t_shape, ctx.input(3).shape(), auto_pad, &params, &y_shape).ok())
    return RunPointwiseDepthwiseParts(ctx, p);  // the depthwise part names the error
  PointwiseDepthwiseF32 base;
  base.height = x.dim(2), base.width = x.dim(3), base.out_h = y_shape[2], base.out_w = y_shape[3];
  base.kernel_h = params.window.kernel[0], base.kernel_w = params.window.kernel[1];
  base.stride_h = params.window.strides[0], base.stride_w = params.window.strides[1];
  base.dilation_h = params.window.dilations[0], base.dilation_w = params.window.dilations[1];
  base.pad_top = params.window.pads[0], base.pad_left = params.window.pads[1];
  if (!base.Fits()) return RunPointwiseDepthwiseParts(ctx, p);
  base.in_channels = p.in_channels;
  base.pw_min = ctx.node().attr_float("pw_out_min", base.pw_min);
  base.pw_max = ctx.node().attr_float("pw_out_max", base.pw_max);
  base.out_min = ctx.node().attr_float("out_min", base.out_min);
  base.out_max = ctx.node().attr_float("out_max", base.out_max);
  Tensor y = ctx.OutputBuffer(0, DataType::kFloat32, y_shape);  // every band of every pair is written
  const int64_t pair = 2 * DepthwiseWindow::kLanes, pairs = (p.channels + pair - 1) / pair, bands = base.Bands();
  const int64_t in_image = p.in_channels * base.height * base.width, out_plane = base.out_h * base.out_w;
  const int64_t taps = base.kernel_h * base.kernel_w;
  const float* xd = x.data<float>();
  float* yd = y.data<float>();
  const PointwiseDepthwiseF32Fn fn = p.row->get<PointwiseDepthwiseF32Fn>();
  ParallelFor(ctx.pool(), x.dim(0) * pairs * bands, 1, [&](int64_t t0, int64_t t1) {
    float* scratch = cpu::DepthwiseThreadScratch(base.ScratchFloats());
    for (int64_t t = t0; t < t1; ++t) {
      PointwiseDepthwiseF32 a = base;
      const int64_t image = t / (pairs * bands), pr = t / bands % pairs, c0 = pr * pair;
      a.channels = std::min(pair, p.channels - c0);
      a.x = xd + image * in_image;
      a.w_pw = p.w_pw.data() + pr * p.in_channels * pair, a.b_pw = p.b_pw.data() + pr * pair;
      a.w_dw = p.w_dw.data() + c0 * taps, a.b_dw = p.b_dw.data() + c0;
      a.y = yd + (image * p.channels + c0) * out_plane;
      a.band_begin = t % bands, a.band_end = a.band_begin + 1;
      a.scratch = scratch;
      fn(a);
    }
  });
  ctx.set_output(0, std::move(y));
  return Status::OK();
}

StatusOr<std::shared_ptr<const void>> PrepareDenseLinear(const Node& node,
                                                         const std::vector<const Tensor*>& constants) {
  SPARQ_ASSIGN_OR_RETURN(LinearWeights lw, ReadLinearWeights(node, constants, "gemm_f32 path"));
  auto linear = std::make_shared<DenseLinear>();
  SPARQ_ASSIGN_OR_RETURN(linear->w,
                         PackGemmF32(lw.w.data(), lw.n, lw.k, PreferredGemmF32Format(ActiveIsa()), /*strips=*/true));
  linear->bias = std::move(lw.bias);
  return std::shared_ptr<const void>(std::move(linear));
}

Status RunDenseLinear(OpContext& ctx) {
  const DenseLinear& s = *static_cast<const DenseLinear*>(ctx.prepared());
  if (!ctx.has_input(0) || ctx.input(0).dtype() != DataType::kFloat32) return RunReferenceKernel(ctx);
  const Tensor& a = ctx.input(0);
  const int64_t k = s.w.k, n = s.w.rows;
  const bool gemm = ctx.node().op_type == "Gemm";
  // Gemm: A [M, K]; MatMul: A [..., M, K], every leading row at once.
  if (a.rank() < 2 || a.dim(a.rank() - 1) != k || (gemm && a.rank() != 2)) return RunReferenceKernel(ctx);
  Shape out_shape = a.shape();
  out_shape.back() = n;
  Tensor y = ctx.OutputBuffer(0, DataType::kFloat32, out_shape);  // written in full (K = 0: the bias)
  GemmF32Args args;
  args.source = GemmF32Source::kRows;
  args.w = &s.w;
  args.bias = s.bias.empty() ? nullptr : s.bias.data();
  args.m = k > 0 ? a.numel() / k : 0;
  args.x = a.data<float>();
  args.ld_x = k;
  args.y = y.data<float>();
  args.ld_y = n;
  args.pool = ctx.pool();
  if (k == 0) args.m = y.numel() / std::max<int64_t>(1, n);
  Status st = RunGemmF32(args);
  if (!st.ok()) return ctx.Error(st.code(), st.message());
  ctx.set_output(0, std::move(y));
  return Status::OK();
}

// MatMul of two activations (attention scores and mixing): A [..., M, K] x
// B [..., K, N] with equal batch dims, or B [K, N] for every batch; B is
// packed per matrix on each run (K * N work against M * K * N multiply-adds).
Status RunBatchedMatMul(OpContext& ctx) {
  if (!ctx.has_input(0) || !ctx.has_input(1)) return RunReferenceKernel(ctx);
  const Tensor& a = ctx.input(0);
  const Tensor& b = ctx.input(1);
  if (a.dtype() != DataType::kFloat32 || b.dtype() != DataType::kFloat32 || a.rank() < 2 || b.rank() < 2 ||
      (b.rank() != 2 && b.rank() != a.rank())) {
    return RunReferenceKernel(ctx);
  }
  const int64_t m = a.dim(a.rank() - 2), k = a.dim(a.rank() - 1), n = b.dim(b.rank() - 1);
  if (b.dim(b.rank() - 2) != k) return RunReferenceKernel(ctx);  // the reference names the error
  for (size_t d = 0; b.rank() > 2 && d + 2 < a.rank(); ++d)
    if (a.dim(d) != b.dim(d)) return RunReferenceKernel(ctx);  // broadcasting: the reference
  Shape out_shape = a.shape();
  out_shape.back() = n;
  Tensor y(DataType::kFloat32, out_shape);
  const int64_t batches = m * k > 0 ? a.numel() / (m * k) : 0;
  const PackedFormat format = PreferredGemmF32Format(ActiveIsa());
  std::vector<float> bt(static_cast<size_t>(n * k));  // B^T [N, K] of one matrix
  PackedGemmF32 packed;
  for (int64_t i = 0; i < batches; ++i) {
    if (i == 0 || b.rank() > 2) {
      const float* src = b.data<float>() + (b.rank() > 2 ? i * k * n : 0);
      for (int64_t o = 0; o < n; ++o)
        for (int64_t j = 0; j < k; ++j) bt[o * k + j] = src[j * n + o];
      SPARQ_ASSIGN_OR_RETURN(packed, PackGemmF32(bt.data(), n, k, format, /*strips=*/true));
    }
    GemmF32Args args;
    args.w = &packed;
    args.m = m, args.x = a.data<float>() + i * m * k, args.ld_x = k;
    args.y = y.data<float>() + i * m * n, args.ld_y = n;
    args.pool = ctx.pool();
    Status st = RunGemmF32(args);
    if (!st.ok()) return ctx.Error(st.code(), st.message());
  }
  ctx.set_output(0, std::move(y));
  return Status::OK();
}

// The kernels' names for `eval --verbose`: the table rows the state runs.
std::string DenseConvKernel(const void* state) {
  const auto& conv = *static_cast<const DenseConv*>(state);
  const CpuKernelDef* def = conv.w.empty() ? nullptr : SelectCpuKernel(CpuOp::kGemmF32, conv.w[0].format);
  return def != nullptr ? def->name : "";
}
std::string DenseLinearKernel(const void* state) {
  const CpuKernelDef* def = SelectCpuKernel(CpuOp::kGemmF32, static_cast<const DenseLinear*>(state)->w.format);
  return def != nullptr ? def->name : "";
}
std::string DepthwiseConvKernel(const void* state) { return static_cast<const DepthwiseConv*>(state)->plane->name; }
std::string PointwiseDepthwiseKernel(const void* state) {
  const auto& p = *static_cast<const PointwiseDepthwise*>(state);
  if (p.row != nullptr) return p.row->name;
  return DenseConvKernel(p.pw_state.get()) + "+" + DepthwiseConvKernel(p.dw_state.get());
}

}  // namespace

void RegisterPreparedCpuDenseF32Ops(KernelRegistry& r) {
  const PrepareFn depthwise = WithoutContext(PrepareDepthwiseConv, DepthwiseConvKernel);
  const PrepareFn conv = WithoutContext(PrepareDenseConv, DenseConvKernel);
  const PrepareFn linear = WithoutContext(PrepareDenseLinear, DenseLinearKernel);
  r.Add({"PointwiseDepthwise", kSparqDomain, 1, 99, RunPointwiseDepthwise, "pointwise_depthwise_f32",
         WithoutContext(PreparePointwiseDepthwise, PointwiseDepthwiseKernel)});
  r.Add({"Conv", "", 1, 99, RunDepthwiseConv, "depthwise_f32", depthwise, kPrioritySecond});
  r.Add({"FusedConv", kSparqDomain, 1, 99, RunDepthwiseConv, "depthwise_f32", depthwise, kPrioritySecond});
  r.Add({"Conv", "", 1, 99, RunDenseConv, "gemm_f32", conv});
  r.Add({"FusedConv", kSparqDomain, 1, 99, RunDenseConv, "gemm_f32", conv});
  r.Add({"MatMul", "", 1, 99, RunDenseLinear, "gemm_f32", linear, kPrioritySecond});
  r.Add({"MatMul", "", 1, 99, RunBatchedMatMul, "gemm_f32_batched"});
  r.Add({"Gemm", "", 1, 99, RunDenseLinear, "gemm_f32", linear});
}

}  // namespace sparq
