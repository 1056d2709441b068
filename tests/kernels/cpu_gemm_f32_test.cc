// The FP32 GEMM (kernels/cpu/gemm_f32*.cc) on every ISA this CPU has, against
// the reference GEMM and convolution (kernels/ref), on odd shapes that leave
// tails in every register tile and k slice; the same bits for every thread
// count. Then the executor rows built on it (Conv, ai.sparq FusedConv,
// MatMul, Gemm: kernels/cpu/dense_f32.cc) and the MaxPool row
// (kernels/cpu/pool.cc) against the reference executor.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/dispatch.h"
#include "kernels/packed_formats.h"
#include "kernels/ref/conv.h"
#include "kernels/ref/gemm.h"
#include "runtime/passes/float_fusion.h"
#include "sparq/executor.h"
#include "sparq/kernel_table.h"
#include "test_util.h"
#include "tests/kernels/isa_sweep.h"

namespace sparq {
namespace {

// A float32 input of fixed shape.
ValueInfo FloatInput(const std::string& name, const Shape& shape) {
  std::vector<Dim> dims;
  for (int64_t d : shape) dims.push_back(Dim{d, ""});
  return testing::FloatInput(name, dims);
}

using testing::KernelOps;
using testing::kF32RelTol;  // |fast - ref| <= kF32RelTol * max |ref| (another summation order, FMA)

// Uniform in +-[0.1, 1]: no zeros, no tiny values.
std::vector<float> RandomNonzero(std::mt19937& rng, size_t n) {
  std::uniform_real_distribution<float> mag(0.1f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = (rng() & 1) ? mag(rng) : -mag(rng);
  return v;
}

void ExpectClose(const std::vector<float>& got, const std::vector<float>& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  float scale = 0.0f;
  for (float v : want) scale = std::max(scale, std::fabs(v));
  for (size_t i = 0; i < want.size(); ++i) {
    ASSERT_LE(std::fabs(got[i] - want[i]), kF32RelTol * std::max(scale, 1.0f)) << what << " at " << i;
  }
}

class GemmF32IsaTest : public testing::IsaSweepTest {};

struct RowsCase {
  int64_t m, n, k;
  bool bias, relu;
};

// Tails of the 4/6/8-row panels and 8/16/32-column strips, k = 0, k across the 256-value slices.
const std::vector<RowsCase> kRowsCases = {{1, 1, 1, false, false},   {1, 1000, 64, true, false},
                                          {7, 5, 3, true, true},      {3, 4, 0, true, false},
                                          {33, 17, 257, false, true}, {64, 64, 64, true, true},
                                          {130, 9, 513, true, false}, {5, 70, 31, false, false}};

TEST_P(GemmF32IsaTest, RowsMatchReferenceGemm) {
  std::mt19937 rng(11);
  for (const RowsCase& c : kRowsCases) {
    const std::string what = "M=" + std::to_string(c.m) + " N=" + std::to_string(c.n) + " K=" + std::to_string(c.k);
    const std::vector<float> x = RandomNonzero(rng, c.m * c.k), w = RandomNonzero(rng, c.n * c.k),
                             bias = RandomNonzero(rng, c.n);
    std::vector<float> want(c.m * c.n);
    GemmF32Ref(false, true, c.m, c.n, c.k, 1.0f, x.data(), c.k, w.data(), c.k, 0.0f, want.data(), c.n, nullptr);
    for (int64_t i = 0; i < c.m; ++i)
      for (int64_t j = 0; j < c.n; ++j) {
        float& v = want[i * c.n + j];
        if (c.bias) v += bias[j];
        if (c.relu) v = std::max(v, 0.0f);
      }
    StatusOr<PackedGemmF32> packed = PackGemmF32(w.data(), c.n, c.k, PreferredGemmF32Format(GetParam()), true);
    ASSERT_TRUE(packed.ok()) << packed.status().ToString();
    std::vector<float> first;
    for (int threads : {1, 2, 3}) {
      ThreadPool pool(threads);
      std::vector<float> y(c.m * c.n, NAN);
      GemmF32Args args;
      args.w = &*packed;
      args.bias = c.bias ? bias.data() : nullptr;
      if (c.relu) args.out_min = 0.0f;
      args.m = c.m, args.x = x.data(), args.ld_x = c.k, args.y = y.data(), args.ld_y = c.n, args.pool = &pool;
      const char* name = nullptr;
      ASSERT_TRUE(RunGemmF32(args, &name).ok()) << what;
      // Below AVX2 (portable, F16C) the portable kernel runs.
      EXPECT_NE(std::string(name).find(GetParam() < CpuIsa::kAvx2 ? "portable" : "avx"), std::string::npos) << name;
      ExpectClose(y, want, what);
      if (first.empty()) first = y;
      EXPECT_EQ(y, first) << what << ": " << threads << " threads changed the bits";
    }
  }
}

// gemv_f32 (the recurrent steps' products, kernels/cpu/recurrent_f32.cc) on
// the GEMM's strips: within kF32RelTol of the reference, gemm_f32's bits on
// the same ISA, the same bits whatever strips a call gets (as threads split
// them), and nothing written past W's rows. Cases: one row of DeepFilterNet3's
// GRU (768 x 256), the 4-strip blocks' tails, 2-5 and 9 rows (the 4-row
// blocks' tails), strip tails, k = 0.
TEST_P(GemmF32IsaTest, GemvMatchesReferenceAndGemmBits) {
  struct GemvCase {
    int64_t m, n, k;
    bool bias;
  };
  std::mt19937 rng(13);
  const PackedFormat format = PreferredGemmF32Format(GetParam());
  const CpuKernelDef* row = SelectCpuKernel(CpuOp::kGemvF32, format);
  ASSERT_NE(row, nullptr) << Traits(format).name;
  EXPECT_NE(std::string(row->name).find(GetParam() < CpuIsa::kAvx2 ? "portable" : "avx"), std::string::npos)
      << row->name;
  for (const GemvCase& c : {GemvCase{1, 768, 256, true}, GemvCase{1, 1, 1, false}, GemvCase{1, 70, 31, true},
                            GemvCase{1, 161, 300, false}, GemvCase{2, 37, 40, true}, GemvCase{3, 100, 17, false},
                            GemvCase{4, 33, 9, true}, GemvCase{5, 512, 128, true}, GemvCase{9, 37, 40, false},
                            GemvCase{1, 5, 0, true}}) {
    const std::string what = "M=" + std::to_string(c.m) + " N=" + std::to_string(c.n) + " K=" + std::to_string(c.k);
    const std::vector<float> x = RandomNonzero(rng, c.m * c.k), w = RandomNonzero(rng, c.n * c.k),
                             bias = RandomNonzero(rng, c.n);
    std::vector<float> want(c.m * c.n);
    GemmF32Ref(false, true, c.m, c.n, c.k, 1.0f, x.data(), c.k, w.data(), c.k, 0.0f, want.data(), c.n, nullptr);
    if (c.bias)
      for (int64_t i = 0; i < c.m; ++i)
        for (int64_t j = 0; j < c.n; ++j) want[i * c.n + j] += bias[j];
    StatusOr<PackedGemmF32> packed = PackGemmF32(w.data(), c.n, c.k, format, true);
    ASSERT_TRUE(packed.ok()) << packed.status().ToString();
    const int64_t ld_y = c.n + 3;  // 3 columns past W's rows that must stay untouched
    std::vector<float> y(c.m * ld_y, -7.0f), split(y), gemm(y);
    GemvF32Args args;
    args.w = &*packed, args.m = c.m, args.x = x.data(), args.ld_x = c.k;
    args.bias = c.bias ? bias.data() : nullptr;
    args.y = y.data(), args.ld_y = ld_y, args.s0 = 0, args.s1 = packed->panels;
    row->get<GemvF32Fn>()(args);
    std::vector<float> got;
    for (int64_t i = 0; i < c.m; ++i) {
      got.insert(got.end(), y.begin() + i * ld_y, y.begin() + i * ld_y + c.n);
      for (int64_t j = c.n; j < ld_y; ++j) EXPECT_EQ(y[i * ld_y + j], -7.0f) << what << ": wrote past W's rows";
    }
    ExpectClose(got, want, what);
    args.y = split.data();  // in two calls, as two threads would
    args.s0 = 0, args.s1 = packed->panels / 2;
    row->get<GemvF32Fn>()(args);
    args.s0 = packed->panels / 2, args.s1 = packed->panels;
    row->get<GemvF32Fn>()(args);
    EXPECT_EQ(std::memcmp(split.data(), y.data(), sizeof(float) * y.size()), 0) << what << ": a split changed the bits";
    GemmF32Args gemm_args;
    gemm_args.w = &*packed, gemm_args.bias = args.bias;
    gemm_args.m = c.m, gemm_args.x = x.data(), gemm_args.ld_x = c.k, gemm_args.y = gemm.data(), gemm_args.ld_y = ld_y;
    ASSERT_TRUE(RunGemmF32(gemm_args).ok()) << what;
    EXPECT_EQ(std::memcmp(gemm.data(), y.data(), sizeof(float) * y.size()), 0) << what << ": not gemm_f32's bits";
  }
}

struct ConvCase {
  int64_t n, c, h, w, m, kh, kw, stride, pad, dilation;
};

// Pointwise (the strip copy path), strided, dilated, padded, 7x7 stem, odd sizes.
const std::vector<ConvCase> kConvCases = {
    {2, 8, 9, 11, 13, 1, 1, 1, 0, 1}, {1, 3, 23, 23, 16, 7, 7, 2, 3, 1}, {3, 5, 7, 6, 9, 3, 3, 1, 1, 1},
    {1, 16, 15, 13, 33, 3, 3, 2, 1, 1}, {2, 4, 12, 12, 7, 3, 3, 1, 2, 2}, {1, 40, 6, 5, 17, 1, 1, 2, 0, 1},
    {1, 30, 5, 5, 8, 3, 3, 1, 0, 1}, {1, 300, 7, 7, 40, 1, 1, 1, 0, 1}, {3, 17, 4, 3, 70, 1, 1, 1, 0, 1},
    // kDirectConv's channel slices (> 64 channels) and strip tails (> 32 outputs), strided and not.
    {1, 70, 9, 10, 40, 3, 3, 2, 1, 1}, {2, 130, 5, 6, 33, 3, 3, 1, 1, 1}, {1, 9, 11, 9, 17, 5, 5, 3, 2, 1},
    // kDirectConv's groups of images (padded planes of 900 KiB: groups of 2, 2 and 1 on 2+ threads).
    {5, 64, 58, 58, 9, 3, 3, 1, 1, 1},
    // kDirectConv's tasks of one image each (batch 8 over 2 threads, 10 over 5; 4 on 1 and 5 threads: groups),
    // padded and in place, strided, the strips in one task.
    {8, 20, 13, 11, 40, 3, 3, 2, 1, 1}, {10, 70, 6, 7, 33, 3, 3, 1, 1, 1}, {4, 12, 9, 9, 17, 3, 3, 1, 0, 1}};

TEST_P(GemmF32IsaTest, ConvMatchesReferenceConv) {
  std::mt19937 rng(12);
  for (const ConvCase& c : kConvCases) {
    const std::string what = "conv c=" + std::to_string(c.c) + " h=" + std::to_string(c.h) + " k=" +
                             std::to_string(c.kh) + " s=" + std::to_string(c.stride);
    ConvParams p;
    p.window.kernel = {c.kh, c.kw};
    p.window.strides = {c.stride, c.stride};
    p.window.dilations = {c.dilation, c.dilation};
    p.window.pads = {c.pad, c.pad, c.pad, c.pad};
    const Shape x_shape{c.n, c.c, c.h, c.w}, w_shape{c.m, c.c, c.kh, c.kw};
    Shape y_shape;
    ASSERT_TRUE(PrepareConv(x_shape, w_shape, AutoPad::kNotSet, &p, &y_shape).ok()) << what;
    const std::vector<float> x = RandomNonzero(rng, c.n * c.c * c.h * c.w),
                             w = RandomNonzero(rng, c.m * c.c * c.kh * c.kw), bias = RandomNonzero(rng, c.m);
    std::vector<float> want(c.n * c.m * y_shape[2] * y_shape[3]);
    ConvF32Ref(p, x_shape, x.data(), w_shape, w.data(), bias.data(), y_shape, want.data(), nullptr);
    StatusOr<PackedGemmF32> packed = PackGemmF32(w.data(), c.m, c.c * c.kh * c.kw, PreferredGemmF32Format(GetParam()));
    ASSERT_TRUE(packed.ok());
    // K in (ky, kx, c) order: kShiftedConv's panels and kDirectConv's strips.
    const int64_t taps = c.kh * c.kw;
    std::vector<float> permuted(w.size());
    for (int64_t o = 0; o < c.m; ++o)
      for (int64_t ch = 0; ch < c.c; ++ch)
        for (int64_t t = 0; t < taps; ++t) permuted[(o * taps + t) * c.c + ch] = w[(o * c.c + ch) * taps + t];
    StatusOr<PackedGemmF32> direct_w =
        PackGemmF32(permuted.data(), c.m, c.c * taps, PreferredGemmF32Format(GetParam()), /*strips=*/true);
    ASSERT_TRUE(direct_w.ok());
    std::vector<float> first, first_direct;
    for (int threads : {1, 2, 5}) {
      ThreadPool pool(threads);
      std::vector<float> y(want.size(), NAN);
      GemmF32Args args;
      args.w = &*packed;
      args.bias = bias.data();
      args.source = GemmF32Source::kConv;
      args.batch = c.n;
      ConvGeometry& g = args.conv;
      g.channels = c.c, g.height = c.h, g.width = c.w, g.kernel_h = c.kh, g.kernel_w = c.kw;
      g.stride_h = g.stride_w = c.stride, g.dilation_h = g.dilation_w = c.dilation, g.pad_top = g.pad_left = c.pad;
      g.out_h = y_shape[2], g.out_w = y_shape[3];
      args.x = x.data(), args.y = y.data(), args.pool = &pool;
      args.x_image_stride = c.c * c.h * c.w, args.y_image_stride = c.m * g.out_size();
      ASSERT_TRUE(RunGemmF32(args).ok()) << what;
      ExpectClose(y, want, what);
      if (first.empty()) first = y;
      EXPECT_EQ(y, first) << what << ": " << threads << " threads changed the bits";
      {
        // Pixels as the tile's rows, read in place from the padded image.
        GemmF32Args direct = args;
        direct.source = GemmF32Source::kDirectConv;
        direct.w = &*direct_w;
        std::vector<float> y_direct(want.size(), NAN);
        direct.y = y_direct.data();
        ASSERT_TRUE(RunGemmF32(direct).ok()) << what;
        ExpectClose(y_direct, want, what + " (direct)");
        if (first_direct.empty()) first_direct = y_direct;
        EXPECT_EQ(y_direct, first_direct) << what << ": " << threads << " threads changed the direct bits";
        direct.w = &*packed;
        EXPECT_NE(RunGemmF32(direct).message().find("strips"), std::string::npos);
      }
      if (c.kh == 1 && c.kw == 1 && c.stride == 1 && c.pad == 0) {
        // Pixels as the tile's rows, weights as strips: the same sums in the same order.
        StatusOr<PackedGemmF32> strips =
            PackGemmF32(w.data(), c.m, c.c, PreferredGemmF32Format(GetParam()), /*strips=*/true);
        ASSERT_TRUE(strips.ok());
        GemmF32Args pointwise = args;
        pointwise.source = GemmF32Source::kPointwiseConv;
        pointwise.w = &*strips;
        std::vector<float> y_pointwise(want.size(), NAN);
        pointwise.y = y_pointwise.data();
        ASSERT_TRUE(RunGemmF32(pointwise).ok()) << what;
        EXPECT_EQ(y_pointwise, first) << what << ": the pointwise source changed the bits";
        pointwise.w = &*packed;
        EXPECT_NE(RunGemmF32(pointwise).message().find("strips"), std::string::npos);
      }
      if (c.stride != 1) continue;
      // The same convolution as shifted taps of the padded image (K in (ky, kx, c) order).
      StatusOr<PackedGemmF32> shifted_w =
          PackGemmF32(permuted.data(), c.m, c.c * taps, PreferredGemmF32Format(GetParam()));
      ASSERT_TRUE(shifted_w.ok());
      std::fill(y.begin(), y.end(), NAN);
      args.source = GemmF32Source::kShiftedConv;
      args.w = &*shifted_w;
      g.pad_bottom = g.pad_right = c.pad;
      ASSERT_TRUE(RunGemmF32(args).ok()) << what;
      ExpectClose(y, want, what + " (shifted)");
      const std::vector<float> whole_batch = y;
      args.workspace_bytes = 1;  // one image at a time
      std::fill(y.begin(), y.end(), NAN);
      ASSERT_TRUE(RunGemmF32(args).ok()) << what;
      EXPECT_EQ(y, whole_batch) << what << ": image groups changed the bits";
    }
  }
}

// The fused clamp (ReLU6) keeps NaN as NaN, as the reference Clip does: a
// NaN in row 0 of X poisons row 0 of Y only; row 1 clamps to 6, the rest to 0.
TEST_P(GemmF32IsaTest, ClampKeepsNanAndNegativeZero) {
  const int64_t m = 9, n = 35, k = 5;
  std::vector<float> x(m * k, -1.0f), w(n * k, 1.0f), bias(n, 0.5f);
  x[0] = std::numeric_limits<float>::quiet_NaN();
  for (int64_t i = k; i < 2 * k; ++i) x[i] = 2.0f;  // row 1: 10 + bias, clamped to 6
  StatusOr<PackedGemmF32> packed = PackGemmF32(w.data(), n, k, PreferredGemmF32Format(GetParam()), true);
  ASSERT_TRUE(packed.ok());
  std::vector<float> y(m * n, 1.0f);
  GemmF32Args args;
  args.w = &*packed;
  args.bias = bias.data();
  args.out_min = 0.0f, args.out_max = 6.0f;
  args.m = m, args.x = x.data(), args.ld_x = k, args.y = y.data(), args.ld_y = n;
  ASSERT_TRUE(RunGemmF32(args).ok());
  for (int64_t j = 0; j < n; ++j) {
    EXPECT_TRUE(std::isnan(y[j])) << j;
    EXPECT_EQ(y[n + j], 6.0f) << j;
    for (int64_t i = 2; i < m; ++i) EXPECT_EQ(y[i * n + j], 0.0f) << i << "," << j;
  }
}

// A pointwise convolution of no input channels: every output is its clamped bias.
TEST_P(GemmF32IsaTest, PointwiseWithoutInputChannelsIsTheClampedBias) {
  const std::vector<float> bias = {-1.0f, 0.5f, 2.0f, -0.25f, 3.0f};
  StatusOr<PackedGemmF32> strips = PackGemmF32(nullptr, 5, 0, PreferredGemmF32Format(GetParam()), true);
  ASSERT_TRUE(strips.ok()) << strips.status().ToString();
  GemmF32Args args;
  args.w = &*strips;
  args.bias = bias.data();
  args.out_min = 0.0f;
  args.source = GemmF32Source::kPointwiseConv;
  args.batch = 2;
  args.conv.channels = 0, args.conv.height = args.conv.out_h = 3, args.conv.width = args.conv.out_w = 4;
  const std::vector<float> x(1, 0.0f);
  std::vector<float> y(2 * 5 * 12, NAN);
  args.x = x.data(), args.y = y.data(), args.x_image_stride = 0, args.y_image_stride = 5 * 12;
  ASSERT_TRUE(RunGemmF32(args).ok());
  for (size_t i = 0; i < y.size(); ++i) EXPECT_EQ(y[i], std::max(bias[(i / 12) % 5], 0.0f)) << i;
}

// A thread that runs several chunks of one task group packs their shared
// operand once per call (AlreadyPacked): the chunks of one call reuse it, a
// later call never does, even with new values at the same address (the
// arena reuses them). A 7 x 7 pointwise plane of 200 output channels and a
// 40-row MatMul of 300 columns, each run on new values in one buffer, on 2
// and 3 threads: the bits of 1 thread every time.
TEST_P(GemmF32IsaTest, SharedPackingIsReusedWithinACallOnly) {
  std::mt19937 rng(29);
  const PackedFormat format = PreferredGemmF32Format(GetParam());
  const int64_t channels = 96, outputs = 200, plane = 7 * 7, rows = 40, depth = 72, columns = 300;
  const std::vector<float> wc = RandomNonzero(rng, channels * outputs), wr = RandomNonzero(rng, depth * columns);
  StatusOr<PackedGemmF32> conv_w = PackGemmF32(wc.data(), outputs, channels, format, /*strips=*/true);
  StatusOr<PackedGemmF32> rows_w = PackGemmF32(wr.data(), columns, depth, format, /*strips=*/true);
  ASSERT_TRUE(conv_w.ok() && rows_w.ok());
  std::vector<float> xc(channels * plane), xr(rows * depth);  // one buffer each, new values every round
  auto run = [&](bool conv, ThreadPool* pool) {
    std::vector<float> y(conv ? outputs * plane : rows * columns, NAN);
    GemmF32Args args;
    args.pool = pool;
    args.y = y.data();
    if (conv) {
      args.w = &*conv_w;
      args.source = GemmF32Source::kPointwiseConv;
      args.batch = 1;
      args.conv.channels = channels, args.conv.height = args.conv.out_h = 7, args.conv.width = args.conv.out_w = 7;
      args.x = xc.data(), args.x_image_stride = channels * plane, args.y_image_stride = outputs * plane;
    } else {
      args.w = &*rows_w;
      args.m = rows, args.x = xr.data(), args.ld_x = depth, args.ld_y = columns;
    }
    EXPECT_TRUE(RunGemmF32(args).ok());
    return y;
  };
  ThreadPool two(2), three(3);
  for (int round = 0; round < 3; ++round) {
    xc = RandomNonzero(rng, xc.size()), xr = RandomNonzero(rng, xr.size());
    for (bool conv : {true, false}) {
      const std::vector<float> want = run(conv, nullptr);
      EXPECT_EQ(run(conv, &two), want) << (conv ? "pointwise" : "rows") << ", round " << round << ", 2 threads";
      EXPECT_EQ(run(conv, &three), want) << (conv ? "pointwise" : "rows") << ", round " << round << ", 3 threads";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(CpuKernels, GemmF32IsaTest, ::testing::ValuesIn(kAllCpuIsas), testing::IsaParamName);

TEST(GemmF32Args, EntryPointRejectsBadArguments) {
  GemmF32Args args;
  EXPECT_EQ(RunGemmF32(args).code(), StatusCode::kInvalidArgument);
  const std::vector<float> w(6, 1.0f);
  StatusOr<PackedGemmF32> packed = PackGemmF32(w.data(), 2, 3, PackedFormat::kPanel4x8F32);
  ASSERT_TRUE(packed.ok());
  args.w = &*packed;
  args.m = 1, args.ld_x = 3;
  Status st = RunGemmF32(args);
  EXPECT_NE(st.message().find("strips"), std::string::npos) << st.message();  // rows need strips
  StatusOr<PackedGemmF32> strips = PackGemmF32(w.data(), 2, 3, PackedFormat::kPanel4x8F32, true);
  ASSERT_TRUE(strips.ok());
  args.w = &*strips;
  args.ld_x = 2;  // < k
  st = RunGemmF32(args);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  args.w = &*packed;
  args.source = GemmF32Source::kConv;
  args.batch = 1;
  args.conv.channels = 2;  // k() = 2 != 3
  args.conv.out_h = args.conv.out_w = 1;
  st = RunGemmF32(args);
  EXPECT_NE(st.message().find("depth"), std::string::npos) << st.message();
  EXPECT_EQ(PackGemmF32(w.data(), 2, 3, PackedFormat::kPanel16x4S8).status().code(), StatusCode::kInvalidArgument);
  // Shifted convolutions: stride 1 only, and an output size that follows from the pads.
  StatusOr<PackedGemmF32> taps = PackGemmF32(w.data(), 2, 3, PackedFormat::kPanel4x8F32);
  ASSERT_TRUE(taps.ok());
  GemmF32Args shifted;
  shifted.w = &*taps;
  shifted.source = GemmF32Source::kShiftedConv;
  shifted.batch = 1;
  shifted.conv.channels = 3, shifted.conv.height = shifted.conv.width = 4;
  shifted.conv.stride_w = 2;
  shifted.conv.out_h = 4, shifted.conv.out_w = 2;
  EXPECT_NE(RunGemmF32(shifted).message().find("stride 1"), std::string::npos);
  shifted.conv.stride_w = 1;
  shifted.conv.out_w = 3;  // a 1x1 window without padding keeps the width 4
  EXPECT_NE(RunGemmF32(shifted).message().find("does not follow from its pads"), std::string::npos);
  // Pointwise convolutions: a 1x1 window, stride 1, no padding.
  StatusOr<PackedGemmF32> pointwise_w = PackGemmF32(w.data(), 2, 3, PackedFormat::kPanel4x8F32, true);
  ASSERT_TRUE(pointwise_w.ok());
  GemmF32Args pointwise = shifted;
  pointwise.w = &*pointwise_w;
  pointwise.source = GemmF32Source::kPointwiseConv;
  pointwise.conv.out_w = 3;  // not the input's width
  EXPECT_NE(RunGemmF32(pointwise).message().find("1x1 kernel, stride 1"), std::string::npos);
  pointwise.conv.out_w = 4;
  pointwise.conv.kernel_h = 3;
  pointwise.conv.channels = 1;  // k() = 3
  EXPECT_NE(RunGemmF32(pointwise).message().find("1x1 kernel, stride 1"), std::string::npos);
}

// ---------------------------------------------------------------------------
// Executor rows: fast kernels (with Conv -> Relu fused) against the reference executor.

Model OneGraph(std::vector<ValueInfo> inputs, std::vector<Node> nodes, std::vector<std::string> outputs) {
  Model m;
  m.ir_version = 8;
  m.opset_imports = {{"", 13}};
  m.graph.inputs = std::move(inputs);
  m.graph.nodes = std::move(nodes);
  for (const std::string& o : outputs) {
    ValueInfo v;
    v.name = o;
    v.dtype = DataType::kFloat32;
    m.graph.outputs.push_back(v);
  }
  return m;
}

Tensor RandomTensor(std::mt19937& rng, Shape shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return Tensor::FromVector<float>(shape, RandomNonzero(rng, static_cast<size_t>(n)));
}

// `m` on the fast kernels, activations fused, on `threads` threads (nullptr
// and a test failure when it cannot be created).
std::unique_ptr<Executor> FusedExecutor(const Model& m, int threads) {
  ExecutorOptions options;
  options.profile = GraphProfile::kObserveKept;
  options.threads = threads;
  auto fast = Executor::Create(m, options);
  EXPECT_TRUE(fast.ok()) << fast.status().ToString();
  return fast.ok() ? std::move(*fast) : nullptr;
}

// Runs `m` on the fast kernels (activations fused) and on the reference
// kernels; returns the fast run's kernel names.
std::vector<std::string> ExpectFastMatchesReference(const Model& m, const TensorMap& feed, bool exact = false) {
  ExecutorOptions ref_options;
  ref_options.backend = "reference";
  ref_options.threads = 1;
  auto ref = Executor::Create(m, ref_options);
  EXPECT_TRUE(ref.ok()) << ref.status().ToString();
  TensorMap want;
  EXPECT_TRUE((*ref)->Run(feed, &want).ok());
  std::vector<std::string> kernels;
  for (int threads : {1, 3}) {
    std::unique_ptr<Executor> fast = FusedExecutor(m, threads);
    if (fast == nullptr) return {};
    TensorMap got;
    Status st = fast->Run(feed, &got);
    EXPECT_TRUE(st.ok()) << st.ToString();
    for (const auto& kv : want) {
      const Tensor& g = got.at(kv.first);
      std::vector<float> a(g.data<float>(), g.data<float>() + g.numel());
      std::vector<float> b(kv.second.data<float>(), kv.second.data<float>() + kv.second.numel());
      EXPECT_EQ(g.shape(), kv.second.shape());
      if (exact) {
        EXPECT_EQ(a, b);
      } else {
        ExpectClose(a, b, kv.first);
      }
    }
    kernels.clear();
    for (const NodeKernel& k : fast->NodeKernels()) kernels.push_back(k.op_type + ":" + KernelOps(k.kernel));
  }
  return kernels;
}

// `m`'s outputs on the fast kernels, activations fused, on `threads` threads.
TensorMap RunFused(const Model& m, const TensorMap& feed, int threads) {
  std::unique_ptr<Executor> fast = FusedExecutor(m, threads);
  TensorMap out;
  if (fast != nullptr) EXPECT_TRUE(fast->Run(feed, &out).ok());
  return out;
}

TEST(DenseF32Rows, ConvReluFusedGroupedAndSamePadded) {
  std::mt19937 rng(21);
  Model m = OneGraph({FloatInput("x", {2, 6, 9, 10})},
                     {Node{"c1", "Conv", "", {"x", "w1", "b1"}, {"t1"},
                           {Attribute::Ints("kernel_shape", {3, 3}), Attribute::Ints("pads", {1, 1, 1, 1})}, ""},
                      Node{"r1", "Relu", "", {"t1"}, {"a1"}, {}, ""},
                      Node{"c2", "Conv", "", {"a1", "w2"}, {"t2"},
                           {Attribute::Int("group", 2), Attribute::String("auto_pad", "SAME_UPPER"),
                            Attribute::Ints("strides", {2, 2})},
                           ""},
                      Node{"r2", "Relu", "", {"t2"}, {"y"}, {}, ""},
                      Node{"keep", "Relu", "", {"t2"}, {"y2"}, {}, ""}},
                     {"y", "y2"});
  m.graph.initializers["w1"] = RandomTensor(rng, {12, 6, 3, 3});
  m.graph.initializers["b1"] = RandomTensor(rng, {12});
  m.graph.initializers["w2"] = RandomTensor(rng, {8, 6, 3, 3});
  TensorMap feed{{"x", RandomTensor(rng, {2, 6, 9, 10})}};
  const std::vector<std::string> kernels = ExpectFastMatchesReference(m, feed);
  // c1 + r1 fuse; c2's output has two readers, so it stays a Conv (the
  // Relus run the clip_f32 row).
  EXPECT_EQ(kernels, (std::vector<std::string>{"FusedConv:gemm_f32", "Conv:gemm_f32", "Relu:clip_f32", "Relu:clip_f32"}));
}

// A stride-1 convolution with an even window and SAME_UPPER padding (more
// padding at the end): the shifted-taps path with asymmetric pads.
TEST(DenseF32Rows, StrideOneConvWithAsymmetricPads) {
  std::mt19937 rng(28);
  Model m = OneGraph({FloatInput("x", {2, 5, 9, 11})},
                     {Node{"c", "Conv", "", {"x", "w", "b"}, {"y"}, {Attribute::String("auto_pad", "SAME_UPPER")}, ""}},
                     {"y"});
  m.graph.initializers["w"] = RandomTensor(rng, {10, 5, 2, 4});
  m.graph.initializers["b"] = RandomTensor(rng, {10});
  TensorMap feed{{"x", RandomTensor(rng, {2, 5, 9, 11})}};
  EXPECT_EQ(ExpectFastMatchesReference(m, feed), (std::vector<std::string>{"Conv:gemm_f32"}));
}

// 1-D convolutions (audio and byte-sequence models) run the 2-D rows with a
// height of 1: dense with padding, stride and dilation, grouped, SAME
// padding, and depthwise, fused with their activations; not the reference.
TEST(DenseF32Rows, OneDimensionalConvsRunTheFastRows) {
  std::mt19937 rng(31);
  testing::ForEachIsa([&](CpuIsa) {
    Model m = OneGraph({FloatInput("x", {2, 8, 37})},
                       {Node{"c1", "Conv", "", {"x", "w1", "b1"}, {"t1"},
                             {Attribute::Ints("kernel_shape", {5}), Attribute::Ints("pads", {2, 2})}, ""},
                        Node{"r1", "Relu", "", {"t1"}, {"a1"}, {}, ""},
                        Node{"c2", "Conv", "", {"a1", "w2"}, {"t2"},
                             {Attribute::Ints("strides", {2}), Attribute::Ints("dilations", {2}),
                              Attribute::String("auto_pad", "SAME_UPPER")},
                             ""},
                        Node{"dw", "Conv", "", {"t2", "w3", "b3"}, {"y"},
                             {Attribute::Int("group", 16), Attribute::Ints("pads", {1, 2})}, ""},
                        Node{"g", "Conv", "", {"a1", "w4"}, {"z"}, {Attribute::Int("group", 2)}, ""}},
                       {"y", "z"});
    m.graph.initializers["w1"] = RandomTensor(rng, {16, 8, 5});
    m.graph.initializers["b1"] = RandomTensor(rng, {16});
    m.graph.initializers["w2"] = RandomTensor(rng, {16, 16, 3});
    m.graph.initializers["w3"] = RandomTensor(rng, {16, 1, 4});
    m.graph.initializers["b3"] = RandomTensor(rng, {16});
    m.graph.initializers["w4"] = RandomTensor(rng, {12, 8, 3});
    TensorMap feed{{"x", RandomTensor(rng, {2, 8, 37})}};
    EXPECT_EQ(ExpectFastMatchesReference(m, feed),
              (std::vector<std::string>{"FusedConv:gemm_f32", "Conv:gemm_f32", "Conv:depthwise_f32", "Conv:gemm_f32"}));
  });
}

// A grouped convolution with few multiply-adds per output but many output
// channels per group (DeepFilterNet3's first df conv: 2 groups of one input
// channel, 32 filters of 3x3 each) fills the GEMM tile and runs gemm_f32; with
// few of both (4 groups of 2 filters of 3x3) the reference stays.
TEST(DenseF32Rows, ShallowGroupedConvRunsTheGemmWhenItsGroupsAreTall) {
  std::mt19937 rng(33);
  testing::ForEachIsa([&](CpuIsa) {
    Model m = OneGraph({FloatInput("x", {2, 2, 20, 24}), FloatInput("u", {2, 4, 9, 10})},
                       {Node{"tall", "Conv", "", {"x", "w1", "b1"}, {"y"},
                             {Attribute::Int("group", 2), Attribute::Ints("pads", {0, 1, 0, 1})}, ""},
                        Node{"short", "Conv", "", {"u", "w2"}, {"z"}, {Attribute::Int("group", 4)}, ""}},
                       {"y", "z"});
    m.graph.initializers["w1"] = RandomTensor(rng, {64, 1, 3, 3});
    m.graph.initializers["b1"] = RandomTensor(rng, {64});
    m.graph.initializers["w2"] = RandomTensor(rng, {8, 1, 3, 3});
    TensorMap feed{{"x", RandomTensor(rng, {2, 2, 20, 24})}, {"u", RandomTensor(rng, {2, 4, 9, 10})}};
    EXPECT_EQ(ExpectFastMatchesReference(m, feed), (std::vector<std::string>{"Conv:gemm_f32", "Conv:ref"}));
  });
}

// A block-pruned FP32 convolution (87.5% zero 4x4 blocks of the [M, C*kh*kw]
// view) runs spmm_bsr4x4_f32 where the kernel table says it beats dense, the
// dense GEMM where it does not.
TEST(DenseF32Rows, BlockPrunedConvRunsSparseWhereTheTableSays) {
  std::mt19937 rng(29);
  Model m = OneGraph({FloatInput("x", {2, 6, 9, 10})},
                     {Node{"c", "Conv", "", {"x", "w", "b"}, {"t"},
                           {Attribute::Ints("pads", {1, 0, 1, 2}), Attribute::Ints("strides", {2, 1})}, ""},
                      Node{"r", "Relu", "", {"t"}, {"y"}, {}, ""}},
                     {"y"});
  Tensor w = RandomTensor(rng, {16, 6, 3, 3});
  const int64_t k = 6 * 9;
  for (int64_t o = 0; o < 16; ++o)
    for (int64_t i = 0; i < k; ++i)
      if ((i / 4 + o / 4) % 8 != 0) w.data<float>()[o * k + i] = 0.0f;
  m.graph.initializers["w"] = w;
  m.graph.initializers["b"] = RandomTensor(rng, {16});
  TensorMap feed{{"x", RandomTensor(rng, {2, 6, 9, 10})}};
  EXPECT_EQ(ExpectFastMatchesReference(m, feed), (std::vector<std::string>{"FusedConv:spmm_bsr_f32"}));
  ExecutorOptions slower;
  slower.profile = GraphProfile::kObserveKept;
  StatusOr<KernelSpeedTable> table = KernelSpeedTable::Parse("backend,structure,precision,sparsity,speedup\n"
                                                             "cpu,block4x4,f32,0.5,0.9\n", "t");
  ASSERT_TRUE(table.ok());
  slower.kernel_table = std::make_shared<const KernelSpeedTable>(*table);
  auto dense = Executor::Create(m, slower);
  ASSERT_TRUE(dense.ok());
  EXPECT_EQ(KernelOps((*dense)->NodeKernels().at(0).kernel), "gemm_f32");
}

// The same pruned convolution with SiLU after it (Conv -> x * Sigmoid(x)):
// one FusedConv on spmm_bsr4x4_f32, its SiLU the sigmoid_f32 row over the
// output, within the FP32 tolerance of the reference, 1 and 3 threads.
TEST(DenseF32Rows, BlockPrunedConvWithSiluRunsSparse) {
  std::mt19937 rng(31);
  Model m = OneGraph({FloatInput("x", {2, 6, 9, 10})},
                     {Node{"c", "Conv", "", {"x", "w", "b"}, {"t"}, {Attribute::Ints("pads", {1, 1, 1, 1})}, ""},
                      Node{"s", "Sigmoid", "", {"t"}, {"u"}, {}, ""}, Node{"m", "Mul", "", {"t", "u"}, {"y"}, {}, ""}},
                     {"y"});
  Tensor w = RandomTensor(rng, {16, 6, 3, 3});
  const int64_t k = 6 * 9;
  for (int64_t o = 0; o < 16; ++o)
    for (int64_t i = 0; i < k; ++i)
      if ((i / 4 + o / 4) % 8 != 0) w.data<float>()[o * k + i] = 0.0f;
  m.graph.initializers["w"] = w;
  m.graph.initializers["b"] = RandomTensor(rng, {16});
  TensorMap feed{{"x", RandomTensor(rng, {2, 6, 9, 10})}};
  EXPECT_EQ(ExpectFastMatchesReference(m, feed), (std::vector<std::string>{"FusedConv:spmm_bsr_f32"}));
}

// 1x1 convolutions with a fused Clip (ReLU6) on a 7 x 7 plane (pixels as the
// GEMM's rows: kPointwiseConv) and a 16 x 16 one (pixels as its columns), on
// every ISA, batch 2, 1 and 3 threads: within the FP32 tolerance of the
// reference.
TEST(DenseF32Rows, PointwiseConvOnSmallAndLargePlanes) {
  std::mt19937 rng(30);
  testing::ForEachIsa([&](CpuIsa) {
    for (int64_t side : {7, 16}) {
      Model m = OneGraph({FloatInput("x", {2, 40, side, side})},
                         {Node{"pw", "Conv", "", {"x", "w", "b"}, {"t"}, {}, ""},
                          Node{"clip", "Clip", "", {"t", "lo", "hi"}, {"y"}, {}, ""}},
                         {"y"});
      m.graph.initializers["w"] = RandomTensor(rng, {64, 40, 1, 1});
      m.graph.initializers["b"] = RandomTensor(rng, {64});
      m.graph.initializers["lo"] = Tensor::Scalar<float>(0.0f);
      m.graph.initializers["hi"] = Tensor::Scalar<float>(6.0f);
      TensorMap feed{{"x", RandomTensor(rng, {2, 40, side, side})}};
      EXPECT_EQ(ExpectFastMatchesReference(m, feed), (std::vector<std::string>{"FusedConv:gemm_f32"})) << side;
    }
  });
}

// Convolutions that DirectConvWins picks (kDirectConv on AVX-512: pixels
// as the tile's rows, read in place): stride 2 with a fused SiLU and stride 1
// with SAME_UPPER's asymmetric pads, batch 2, on every ISA: within the FP32
// tolerance of the reference, and the same bits for 1 and 2 threads.
TEST(DenseF32Rows, WideConvsWithSiluAndAsymmetricPadsOnEveryIsa) {
  std::mt19937 rng(32);
  testing::ForEachIsa([&](CpuIsa) {
    Model m = OneGraph({FloatInput("x", {2, 12, 13, 11})},
                       {Node{"c1", "Conv", "", {"x", "w1", "b1"}, {"t"},
                             {Attribute::Ints("pads", {1, 1, 1, 1}), Attribute::Ints("strides", {2, 2})}, ""},
                        Node{"s", "Sigmoid", "", {"t"}, {"u"}, {}, ""},
                        Node{"m", "Mul", "", {"t", "u"}, {"a"}, {}, ""},
                        Node{"c2", "Conv", "", {"a", "w2", "b2"}, {"y"}, {Attribute::String("auto_pad", "SAME_UPPER")},
                             ""}},
                       {"y"});
    m.graph.initializers["w1"] = RandomTensor(rng, {40, 12, 3, 3});
    m.graph.initializers["b1"] = RandomTensor(rng, {40});
    m.graph.initializers["w2"] = RandomTensor(rng, {32, 40, 2, 4});
    m.graph.initializers["b2"] = RandomTensor(rng, {32});
    TensorMap feed{{"x", RandomTensor(rng, {2, 12, 13, 11})}};
    EXPECT_EQ(ExpectFastMatchesReference(m, feed), (std::vector<std::string>{"FusedConv:gemm_f32", "Conv:gemm_f32"}));
    std::vector<float> first;
    for (int threads : {1, 2}) {
      ExecutorOptions options;
      options.profile = GraphProfile::kObserveKept;
      options.threads = threads;
      auto fast = Executor::Create(m, options);
      ASSERT_TRUE(fast.ok()) << fast.status().ToString();
      TensorMap got;
      ASSERT_TRUE((*fast)->Run(feed, &got).ok());
      const Tensor& y = got.at("y");
      std::vector<float> v(y.data<float>(), y.data<float>() + y.numel());
      if (first.empty()) first = v;
      EXPECT_EQ(v, first) << threads << " threads changed the bits";
    }
  });
}

// Group-1 convolutions of fewer than 16 multiply-adds per output (12 -> 40
// 1x1, 1 -> 24 3x3 strided) run the GEMM too, within the FP32 tolerance.
TEST(DenseF32Rows, ShallowGroupOneConvsRunTheGemm) {
  std::mt19937 rng(33);
  Model m = OneGraph({FloatInput("x", {2, 12, 9, 10}), FloatInput("g", {1, 1, 11, 8})},
                     {Node{"pw", "Conv", "", {"x", "w1", "b1"}, {"y1"}, {}, ""},
                      Node{"c", "Conv", "", {"g", "w2"}, {"y2"},
                           {Attribute::Ints("pads", {1, 1, 1, 1}), Attribute::Ints("strides", {2, 2})}, ""}},
                     {"y1", "y2"});
  m.graph.initializers["w1"] = RandomTensor(rng, {40, 12, 1, 1});
  m.graph.initializers["b1"] = RandomTensor(rng, {40});
  m.graph.initializers["w2"] = RandomTensor(rng, {24, 1, 3, 3});
  TensorMap feed{{"x", RandomTensor(rng, {2, 12, 9, 10})}, {"g", RandomTensor(rng, {1, 1, 11, 8})}};
  EXPECT_EQ(ExpectFastMatchesReference(m, feed), (std::vector<std::string>{"Conv:gemm_f32", "Conv:gemm_f32"}));
}

TEST(DenseF32Rows, MatMulAndGemmWithBias) {
  std::mt19937 rng(22);
  Model m = OneGraph({FloatInput("x", {2, 5, 24})},
                     {Node{"mm", "MatMul", "", {"x", "w"}, {"h"}, {}, ""},
                      Node{"flat", "Reshape", "", {"h", "shape"}, {"h2"}, {}, ""},
                      Node{"fc", "Gemm", "", {"h2", "wt", "bias"}, {"y"}, {Attribute::Int("transB", 1)}, ""}},
                     {"y"});
  m.graph.initializers["w"] = RandomTensor(rng, {24, 19});
  m.graph.initializers["shape"] = Tensor::FromVector<int64_t>({2}, {10, 19});
  m.graph.initializers["wt"] = RandomTensor(rng, {7, 19});
  m.graph.initializers["bias"] = RandomTensor(rng, {7});
  TensorMap feed{{"x", RandomTensor(rng, {2, 5, 24})}};
  const std::vector<std::string> kernels = ExpectFastMatchesReference(m, feed);
  EXPECT_EQ(kernels, (std::vector<std::string>{"MatMul:gemm_f32", "Reshape:ref", "Gemm:gemm_f32"}));
}

TEST(DenseF32Rows, MatMulOfTwoActivations) {
  std::mt19937 rng(26);
  Model m = OneGraph({FloatInput("q", {2, 3, 9, 16}), FloatInput("k", {2, 3, 16, 11}), FloatInput("v", {16, 5})},
                     {Node{"s", "MatMul", "", {"q", "k"}, {"s"}, {}, ""},
                      Node{"t", "MatMul", "", {"q", "v"}, {"t"}, {}, ""}},
                     {"s", "t"});
  TensorMap feed{{"q", RandomTensor(rng, {2, 3, 9, 16})},
                 {"k", RandomTensor(rng, {2, 3, 16, 11})},
                 {"v", RandomTensor(rng, {16, 5})}};
  EXPECT_EQ(ExpectFastMatchesReference(m, feed),
            (std::vector<std::string>{"MatMul:gemm_f32_batched", "MatMul:gemm_f32_batched"}));
}

TEST(DenseF32Rows, DepthwiseConvWithClipAndGroupedConvFewTaps) {
  std::mt19937 rng(23);
  testing::ForEachIsa([&](CpuIsa) {
    Model m = OneGraph({FloatInput("x", {2, 4, 11, 45})},
                       {Node{"dw", "Conv", "", {"x", "w", "b"}, {"t"},
                             {Attribute::Int("group", 4), Attribute::Ints("pads", {1, 0, 2, 1}),
                              Attribute::Ints("strides", {2, 1})},  // 43 columns: vector blocks and tails
                             ""},
                        Node{"clip", "Clip", "", {"t", "lo", "hi"}, {"u"}, {}, ""},
                        Node{"dw2", "Conv", "", {"u", "w2"}, {"y"},
                             {Attribute::Int("group", 4), Attribute::Ints("dilations", {2, 2}),
                              Attribute::Ints("strides", {1, 2}), Attribute::String("auto_pad", "SAME_LOWER")},
                             ""},
                        Node{"g2", "Conv", "", {"u", "w3"}, {"z"}, {Attribute::Int("group", 2)}, ""},
                        Node{"dw3", "Conv", "", {"u", "w2"}, {"s2"},
                             {Attribute::Int("group", 4), Attribute::Ints("pads", {1, 1, 1, 1}),
                              Attribute::Ints("strides", {2, 2})},
                             ""}},
                       {"y", "z", "s2"});
    m.graph.initializers["w"] = RandomTensor(rng, {4, 1, 3, 3});
    m.graph.initializers["b"] = RandomTensor(rng, {4});
    m.graph.initializers["lo"] = Tensor::Scalar<float>(-0.2f);
    m.graph.initializers["hi"] = Tensor::Scalar<float>(0.6f);
    m.graph.initializers["w2"] = RandomTensor(rng, {4, 1, 3, 3});
    m.graph.initializers["w3"] = RandomTensor(rng, {6, 2, 2, 2});  // 8 taps: too few for the GEMM
    TensorMap feed{{"x", RandomTensor(rng, {2, 4, 11, 45})}};
    EXPECT_EQ(ExpectFastMatchesReference(m, feed),
              (std::vector<std::string>{"FusedConv:depthwise_f32", "Conv:depthwise_f32", "Conv:ref",
                                        "Conv:depthwise_f32"}));
  });
}

// Long windows (basic-pitch's CQT: one 1 x 256 filter, stride 2): the
// interior columns 16 at a time (LongWindowColumns), the edges tap by
// tap, on every ISA; within the float tolerance of the reference, and the
// same bits for 1, 2 and 3 threads (a long single row: chunks of columns).
TEST(DenseF32Rows, LongDepthwiseWindowsMatchTheReference) {
  std::mt19937 rng(31);
  testing::ForEachIsa([&](CpuIsa isa) {
    Model m = OneGraph({FloatInput("x", {2, 1, 1, 700}), FloatInput("x3", {1, 3, 6, 150}),
                        FloatInput("xl", {1, 1, 1, 9000})},
                       {Node{"cqt", "Conv", "", {"x", "w", "b"}, {"y"},
                             {Attribute::Int("group", 1), Attribute::Ints("pads", {0, 10, 0, 13}),
                              Attribute::Ints("strides", {1, 2})},
                             ""},
                        Node{"rows", "Conv", "", {"x3", "w3"}, {"z"},
                             {Attribute::Int("group", 3), Attribute::Ints("pads", {1, 20, 0, 3}),
                              Attribute::Ints("strides", {1, 3})},
                             ""},
                        // One image, one channel, 5,529 columns: chunks of columns among the threads.
                        Node{"cqt_long", "Conv", "", {"xl", "w", "b"}, {"u"},
                             {Attribute::Int("group", 1), Attribute::Ints("pads", {0, 2100, 0, 40}),
                              Attribute::Ints("strides", {1, 2})},
                             ""}},
                       {"y", "z", "u"});
    m.graph.initializers["w"] = RandomTensor(rng, {1, 1, 1, 83});   // 5 lanes of 16 and a tail of 3
    m.graph.initializers["b"] = RandomTensor(rng, {1});
    m.graph.initializers["w3"] = RandomTensor(rng, {3, 1, 2, 40});  // two rows per window
    TensorMap feed{{"x", RandomTensor(rng, {2, 1, 1, 700})}, {"x3", RandomTensor(rng, {1, 3, 6, 150})},
                   {"xl", RandomTensor(rng, {1, 1, 1, 9000})}};
    EXPECT_EQ(ExpectFastMatchesReference(m, feed),
              (std::vector<std::string>{"Conv:depthwise_f32", "Conv:depthwise_f32", "Conv:depthwise_f32"}));
    const TensorMap by_threads[3] = {RunFused(m, feed, 1), RunFused(m, feed, 2), RunFused(m, feed, 3)};
    for (const char* out : {"y", "z", "u"}) {
      EXPECT_TRUE(by_threads[0].at(out).Equals(by_threads[1].at(out))) << CpuIsaName(isa) << " " << out;
      EXPECT_TRUE(by_threads[0].at(out).Equals(by_threads[2].at(out))) << CpuIsaName(isa) << " " << out;
    }
  });
}

// EfficientNet-Lite0's depthwise shapes (5x5 stride 2 with TensorFlow "same"
// padding, 5x5 and 3x3 stride 1, ReLU6 fused; the stride-1 planes 20 wide,
// on AVX-512's shifted rows): the fast rows on every ISA match the
// reference, and 1 and 2 threads give the same bits.
TEST(DenseF32Rows, EfficientNetDepthwiseBlocksAreBitIdenticalForOneAndTwoThreads) {
  std::mt19937 rng(29);
  testing::ForEachIsa([&](CpuIsa isa) {
    Model m = OneGraph({FloatInput("x", {2, 24, 33, 40})},
                       {Node{"dw5s2", "Conv", "", {"x", "w5", "b"}, {"t"},
                             {Attribute::Int("group", 24), Attribute::Ints("pads", {1, 1, 2, 2}),
                              Attribute::Ints("strides", {2, 2})},
                             ""},
                        Node{"relu6", "Clip", "", {"t", "lo", "hi"}, {"u"}, {}, ""},
                        Node{"dw5", "Conv", "", {"u", "w5b"}, {"v"},
                             {Attribute::Int("group", 24), Attribute::Ints("pads", {2, 2, 2, 2})}, ""},
                        Node{"dw3", "Conv", "", {"v", "w3", "b"}, {"y"},
                             {Attribute::Int("group", 24), Attribute::Ints("pads", {1, 1, 1, 1})}, ""}},
                       {"y"});
    m.graph.initializers["w5"] = RandomTensor(rng, {24, 1, 5, 5});
    m.graph.initializers["w5b"] = RandomTensor(rng, {24, 1, 5, 5});
    m.graph.initializers["w3"] = RandomTensor(rng, {24, 1, 3, 3});
    m.graph.initializers["b"] = RandomTensor(rng, {24});
    m.graph.initializers["lo"] = Tensor::Scalar<float>(0.0f);
    m.graph.initializers["hi"] = Tensor::Scalar<float>(6.0f);
    TensorMap feed{{"x", RandomTensor(rng, {2, 24, 33, 40})}};
    EXPECT_EQ(ExpectFastMatchesReference(m, feed),
              (std::vector<std::string>{"FusedConv:depthwise_f32", "Conv:depthwise_f32", "Conv:depthwise_f32"}));
    const TensorMap by_threads[2] = {RunFused(m, feed, 1), RunFused(m, feed, 2)};
    EXPECT_TRUE(by_threads[0].at("y").Equals(by_threads[1].at("y"))) << CpuIsaName(isa);
  });
}

// MobileNet / EfficientNet blocks: a 1x1 Conv (ReLU6, or none) read only by
// a depthwise Conv (ReLU6, or none) is one sparq.PointwiseDepthwise node
// (AVX-512: pointwise_depthwise_f32; below it the parts on their own rows),
// within the FP32 tolerance of the reference, the same bits for 1 and 2
// threads and the same as the unfused nodes'. A 1x1 Conv whose output is also
// a graph output, or read by another node, stays unfused.
TEST(DenseF32Rows, PointwiseIntoDepthwiseIsOneNodeOnEveryIsa) {
  std::mt19937 rng(31);
  testing::ForEachIsa([&](CpuIsa isa) {
    Model m = OneGraph({FloatInput("x", {2, 20, 23, 30})},
                       {Node{"expand", "Conv", "", {"x", "w1", "b1"}, {"t"}, {}, ""},
                        Node{"relu6", "Clip", "", {"t", "lo", "hi"}, {"u"}, {}, ""},
                        Node{"dw", "Conv", "", {"u", "w2", "b2"}, {"v"},
                             {Attribute::Int("group", 40), Attribute::Ints("kernel_shape", {3, 3}),
                              Attribute::Ints("pads", {1, 1, 1, 1}), Attribute::Ints("strides", {2, 2})},
                             ""},
                        Node{"relu6b", "Clip", "", {"v", "lo", "hi"}, {"y"}, {}, ""},
                        Node{"expand2", "Conv", "", {"x", "w3"}, {"t2"}, {}, ""},
                        Node{"dw2", "Conv", "", {"t2", "w4", "b4"}, {"y2"},
                             {Attribute::Int("group", 16), Attribute::Ints("pads", {2, 2, 2, 2})}, ""},
                        Node{"expand3", "Conv", "", {"x", "w3"}, {"t3"}, {}, ""},
                        Node{"dw3", "Conv", "", {"t3", "w4"}, {"y3"},
                             {Attribute::Int("group", 16), Attribute::Ints("pads", {2, 2, 2, 2})}, ""}},
                       {"y", "y2", "y3", "t3"});
    m.graph.initializers["w1"] = RandomTensor(rng, {40, 20, 1, 1});
    m.graph.initializers["b1"] = RandomTensor(rng, {40});
    m.graph.initializers["w2"] = RandomTensor(rng, {40, 1, 3, 3});
    m.graph.initializers["b2"] = RandomTensor(rng, {40});
    m.graph.initializers["w3"] = RandomTensor(rng, {16, 20, 1, 1});
    m.graph.initializers["w4"] = RandomTensor(rng, {16, 1, 5, 5});
    m.graph.initializers["b4"] = RandomTensor(rng, {16});
    m.graph.initializers["lo"] = Tensor::Scalar<float>(0.0f);
    m.graph.initializers["hi"] = Tensor::Scalar<float>(6.0f);
    TensorMap feed{{"x", RandomTensor(rng, {2, 20, 23, 30})}};
    const std::string fused = isa >= CpuIsa::kAvx512 ? "pointwise_depthwise_f32" : "gemm_f32+depthwise_f32";
    EXPECT_EQ(ExpectFastMatchesReference(m, feed),
              (std::vector<std::string>{"PointwiseDepthwise:" + fused, "PointwiseDepthwise:" + fused,
                                        "Conv:gemm_f32", "Conv:depthwise_f32"}));
    const TensorMap by_threads[2] = {RunFused(m, feed, 1), RunFused(m, feed, 2)};
    for (const char* y : {"y", "y2", "y3"})
      EXPECT_TRUE(by_threads[0].at(y).Equals(by_threads[1].at(y))) << y << ", " << CpuIsaName(isa);
    // The unfused nodes on the same rows (the fused chain's twin): the same bits.
    Model unfused = m;
    for (const char* t : {"u", "t2"}) {  // graph outputs: the 1x1 outputs stay
      ValueInfo v = unfused.graph.outputs[0];
      v.name = t;
      unfused.graph.outputs.push_back(v);
    }
    const TensorMap got = RunFused(unfused, feed, 1);
    for (const char* y : {"y", "y2"})
      EXPECT_TRUE(got.at(y).Equals(by_threads[0].at(y))) << y << " fused vs unfused, " << CpuIsaName(isa);
  });
}

TEST(FloatFusion, PointwiseDepthwiseKeepsTheDepthwiseNodesPlaceAndAttributes) {
  Model m = OneGraph({FloatInput("x", {1, 3, 8, 8})},
                     {Node{"pw", "Conv", "", {"x", "w1"}, {"t"}, {Attribute::Ints("strides", {1, 1})}, ""},
                      Node{"r", "Relu", "", {"t"}, {"u"}, {}, ""},
                      Node{"dw", "Conv", "", {"u", "w2", "b2"}, {"y"},
                           {Attribute::Int("group", 4), Attribute::Ints("pads", {1, 1, 1, 1})}, ""}},
                     {"y"});
  m.graph.initializers["w1"] = Tensor::FromVector<float>({4, 3, 1, 1}, std::vector<float>(12, 0.5f));
  m.graph.initializers["w2"] = Tensor::FromVector<float>({4, 1, 3, 3}, std::vector<float>(36, 0.25f));
  m.graph.initializers["b2"] = Tensor::FromVector<float>({4}, {1, 2, 3, 4});
  EXPECT_EQ(FuseConvActivations(&m), (std::vector<std::string>{"pw"}));
  EXPECT_EQ(FusePointwiseDepthwise(&m), (std::vector<std::string>{"dw"}));
  ASSERT_EQ(m.graph.nodes.size(), 1u);
  const Node& n = m.graph.nodes[0];
  EXPECT_EQ(n.op_type, "PointwiseDepthwise");
  EXPECT_EQ(n.inputs, (std::vector<std::string>{"x", "w1", "", "w2", "b2"}));
  EXPECT_EQ(n.outputs, (std::vector<std::string>{"y"}));
  EXPECT_EQ(n.attr_int("group", 0), 4);
  EXPECT_EQ(n.attr_float("pw_out_min", -1.0f), 0.0f);
  EXPECT_EQ(n.attr_ints("pads"), (std::vector<int64_t>{1, 1, 1, 1}));
  // A strided or padded 1x1, or one run inputs may override, stays.
  for (int variant = 0; variant < 3; ++variant) {
    Model k = OneGraph({FloatInput("x", {1, 3, 8, 8})},
                       {Node{"pw", "Conv", "", {"x", "w1"}, {"t"}, {}, ""},
                        Node{"dw", "Conv", "", {"t", "w2"}, {"y"}, {Attribute::Int("group", 4)}, ""}},
                       {"y"});
    k.graph.initializers = m.graph.initializers;
    if (variant == 0) k.graph.nodes[0].attributes.push_back(Attribute::Ints("strides", {2, 2}));
    if (variant == 1) k.graph.nodes[0].attributes.push_back(Attribute::Ints("pads", {0, 1, 0, 1}));
    if (variant == 2) k.graph.initializer_inputs.push_back(FloatInput("w1", {4, 3, 1, 1}));
    EXPECT_TRUE(FusePointwiseDepthwise(&k).empty()) << "variant " << variant;
  }
}

TEST(CpuMaxPool, MatchesReferenceExactly) {
  std::mt19937 rng(24);
  struct Case {
    std::vector<int64_t> kernel, strides, pads, dilations;
    int64_t ceil_mode;
  };
  const std::vector<Case> cases = {{{3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}, 0},
                                   {{2, 3}, {1, 2}, {0, 1, 1, 0}, {1, 1}, 1},
                                   {{3, 2}, {2, 1}, {1, 0, 1, 1}, {2, 1}, 0}};
  for (const Case& c : cases) {
    Model m = OneGraph({FloatInput("x", {2, 3, 11, 9})},
                       {Node{"mp", "MaxPool", "", {"x"}, {"y"},
                             {Attribute::Ints("kernel_shape", c.kernel), Attribute::Ints("strides", c.strides),
                              Attribute::Ints("pads", c.pads), Attribute::Ints("dilations", c.dilations),
                              Attribute::Int("ceil_mode", c.ceil_mode)},
                             ""}},
                       {"y"});
    TensorMap feed{{"x", RandomTensor(rng, {2, 3, 11, 9})}};
    EXPECT_EQ(ExpectFastMatchesReference(m, feed, /*exact=*/true), (std::vector<std::string>{"MaxPool:maxpool2d"}));
  }
}

TEST(FloatFusion, LeavesConvWhoseOutputIsAGraphOutput) {
  Model m = OneGraph({FloatInput("x", {1, 1, 4, 4})},
                     {Node{"c", "Conv", "", {"x", "w"}, {"t"}, {}, ""}, Node{"r", "Relu", "", {"t"}, {"y"}, {}, ""}},
                     {"y", "t"});
  m.graph.initializers["w"] = Tensor::FromVector<float>({1, 1, 1, 1}, {2.0f});
  EXPECT_TRUE(FuseConvActivations(&m).empty());
  EXPECT_EQ(m.graph.nodes.size(), 2u);
}

TEST(FloatFusion, LeavesFloat16ConvAlone) {
  Model m = OneGraph({FloatInput("x", {1, 1, 4, 4})},
                     {Node{"c", "Conv", "", {"x", "w"}, {"t"}, {}, ""}, Node{"r", "Relu", "", {"t"}, {"y"}, {}, ""}},
                     {"y"});
  m.graph.initializers["w"] = Tensor(DataType::kFloat16, {1, 1, 1, 1});
  EXPECT_TRUE(FuseConvActivations(&m).empty());
  m.graph.initializers["w"] = Tensor::FromVector<float>({1, 1, 1, 1}, {2.0f});
  EXPECT_EQ(FuseConvActivations(&m), (std::vector<std::string>{"c"}));
}

}  // namespace
}  // namespace sparq

namespace sparq {
namespace {

// A float Gemm fed by a dequantized activation and dequantized constant
// weights without a zero point (a QDQ model's classifier, no QuantizeLinear
// after it) runs on integers: sparq.MatMulIntegerToFloat on gemm_s8, within
// the FP32 tolerance of the float Gemm (runtime/passes/qdq_fusion.cc, TryFuseGemm).
TEST(FloatFusion, DequantizedClassifierGemmRunsOnIntegers) {
  std::mt19937 rng(25);
  Model m = OneGraph({FloatInput("x", {3, 20})},
                     {Node{"qx", "QuantizeLinear", "", {"x", "xs", "xz"}, {"xq"}, {}, ""},
                      Node{"dx", "DequantizeLinear", "", {"xq", "xs", "xz"}, {"xd"}, {}, ""},
                      Node{"dw", "DequantizeLinear", "", {"wq", "ws"}, {"wd"}, {}, ""},
                      Node{"db", "DequantizeLinear", "", {"bq", "bs"}, {"bd"}, {}, ""},
                      Node{"fc", "Gemm", "", {"xd", "wd", "bd"}, {"y"}, {Attribute::Int("transB", 1)}, ""}},
                     {"y"});
  std::vector<int8_t> wq(7 * 20);
  for (auto& v : wq) v = static_cast<int8_t>(static_cast<int>(rng() % 255) - 127);
  m.graph.initializers["wq"] = Tensor::FromVector<int8_t>({7, 20}, wq);
  m.graph.initializers["ws"] = Tensor::Scalar<float>(0.0123f);
  m.graph.initializers["xs"] = Tensor::Scalar<float>(0.0087f);
  m.graph.initializers["xz"] = Tensor::Scalar<int8_t>(3);
  m.graph.initializers["bq"] = Tensor::FromVector<int32_t>({7}, {5, -9, 100, 0, 77, -3, 12});
  m.graph.initializers["bs"] = Tensor::Scalar<float>(0.0123f * 0.0087f);
  TensorMap feed{{"x", RandomTensor(rng, {3, 20})}};
  ExecutorOptions ref_options;
  ref_options.backend = "reference";
  auto ref = Executor::Create(m, ref_options);
  ASSERT_TRUE(ref.ok());
  TensorMap want, got;
  ASSERT_TRUE((*ref)->Run(feed, &want).ok());
  ExecutorOptions options;
  options.profile = GraphProfile::kDeployment;
  auto fast = Executor::Create(m, options);
  ASSERT_TRUE(fast.ok()) << fast.status().ToString();
  { Status st = (*fast)->Run(feed, &got); ASSERT_TRUE(st.ok()) << st.ToString(); }
  std::vector<std::string> kernels;
  for (const NodeKernel& k : (*fast)->NodeKernels()) kernels.push_back(k.op_type + ":" + KernelOps(k.kernel));
  EXPECT_EQ(kernels.back(), "MatMulIntegerToFloat:gemm_s8");
  EXPECT_EQ(kernels.size(), 2u);  // Q, the integer Gemm
  const Tensor& a = got.at("y");
  const Tensor& b = want.at("y");
  ExpectClose(std::vector<float>(a.data<float>(), a.data<float>() + a.numel()),
              std::vector<float>(b.data<float>(), b.data<float>() + b.numel()), "y");
}

}  // namespace
}  // namespace sparq

namespace sparq {
namespace {

// binary_f32 (kernels/cpu/binary_f32.cc): the reference's bits for every
// broadcast shape, on every ISA's row, with 1 and 3 threads.
TEST(CpuBinaryF32, MatchesReferenceExactly) {
  std::mt19937 rng(27);
  struct Case {
    Shape a, b;
    const char* kernel;
  };
  // Rows, columns (LayerNorm's (x - mean) / std), scalars, masks, both sides
  // repeating, and sizes that split into several chunks among threads.
  const std::vector<Case> cases = {
      {{2, 3, 5}, {2, 3, 5}, "binary_f32"}, {{2, 3, 5}, {5}, "binary_f32"},
      {{5}, {2, 3, 5}, "binary_f32"},       {{}, {4, 7}, "binary_f32"},
      {{4, 7}, {1}, "binary_f32"},          {{2, 3, 5}, {3, 1}, "binary_f32"},
      {{1, 64, 37}, {1, 64, 1}, "binary_f32"}, {{1, 12, 9, 64}, {1, 1, 1, 64}, "binary_f32"},
      {{3, 1, 5}, {1, 4, 1}, "binary_f32"},  {{3, 70, 200}, {200}, "binary_f32"},
      {{3, 70, 200}, {3, 70, 1}, "binary_f32"}, {{}, {}, "binary_f32"}, {{0, 5}, {5}, "binary_f32"}};
  testing::ForEachIsa([&](CpuIsa isa) {
    for (const char* op : {"Add", "Sub", "Mul", "Div"}) {
      for (const Case& c : cases) {
        Model m;
        m.ir_version = 8;
        m.opset_imports = {{"", 13}};
        ValueInfo a, b;
        a.name = "a", b.name = "b";
        a.dtype = b.dtype = DataType::kFloat32;
        m.graph.inputs = {a, b};
        m.graph.nodes = {Node{"op", op, "", {"a", "b"}, {"y"}, {}, ""}};
        ValueInfo y;
        y.name = "y";
        m.graph.outputs = {y};
        TensorMap feed{{"a", RandomTensor(rng, c.a)}, {"b", RandomTensor(rng, c.b)}};
        SCOPED_TRACE(std::string(op) + " " + ShapeToString(c.a) + " " + ShapeToString(c.b) + " " + CpuIsaName(isa));
        EXPECT_EQ(ExpectFastMatchesReference(m, feed, /*exact=*/true), (std::vector<std::string>{std::string(op) + ":" +
                                                                                                 c.kernel}));
      }
    }
  });
}

}  // namespace
}  // namespace sparq
