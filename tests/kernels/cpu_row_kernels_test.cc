// The dispatch-table rows without packed weights (kernels/cpu/dispatch.h:
// depthwise_f32, pointwise_depthwise_f32, depthwise_s8, requant_s32, lut256, quantize_f32_s8,
// dequantize_s8_f32, qlinear_add_s8, maxpool2d, erf_f32, softmax_f32,
// pow2_f32, convert_f16_f32, convert_f32_f16), each called through its row on
// lengths that leave every vector tail, against kernels/ref: INT8, QDQ, Pow
// and float16 rows bit for bit (INT8 depthwise planes too), FP32 depthwise
// within testing::kF32RelTol,
// portable Erf / Softmax bit for bit and faster ones within
// cpu::kErfF32AbsTol / kSoftmaxF32AbsTol / kSigmoidF32AbsTol. CheckRowKernel is also what
// CpuKernelTable.EveryTableRowIsExercised (cpu_kernels_test.cc) runs for
// these ops.
//
// To add an op without packed weights: a case in CheckRowKernel.
#include "tests/kernels/cpu_row_kernels.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "kernels/cpu/activation_f32.h"
#include "kernels/cpu/attention_f32.h"
#include "kernels/ref/conv.h"
#include "kernels/ref/pool.h"
#include "kernels/ref/quantize.h"
#include "kernels/ref/reduce_common.h"
#include "sparq/tensor.h"
#include "tests/kernels/isa_sweep.h"

namespace sparq {
namespace testing {
namespace {

// Lengths around the 16-, 32- and 64-lane vectors and their tails.
const int64_t kRowLengths[] = {0, 1, 7, 15, 16, 17, 31, 33, 63, 64, 65, 130, 257};

std::vector<uint8_t> RandomBytes(std::mt19937& rng, int64_t n) {
  std::vector<uint8_t> v(static_cast<size_t>(n));
  for (uint8_t& b : v) b = static_cast<uint8_t>(rng());
  return v;
}

// Depthwise plane geometries of the FP32 and INT8 row checks: plane h x w,
// window kh x kw, strides, dilations, pads (top, left, bottom, right).
struct DepthwiseCase {
  int64_t h, w, kh, kw, sh, sw, dh, dw, pt, pl, pb, pr;
};
constexpr DepthwiseCase kDepthwiseCases[] = {
    {9, 45, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1}, {11, 40, 3, 3, 2, 1, 1, 1, 1, 0, 2, 1}, {7, 19, 3, 3, 1, 2, 2, 2, 2, 2, 2, 2},
    {5, 70, 5, 5, 1, 1, 1, 1, 2, 2, 2, 2}, {4, 3, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0},   {6, 33, 3, 5, 2, 2, 1, 1, 0, 0, 0, 0},
    // EfficientNet's 5x5 windows: 7x7 and 14x14 planes, stride 2 with
    // TensorFlow "same" padding (1 before, 2 after), rows past 16 columns.
    {7, 7, 5, 5, 1, 1, 1, 1, 2, 2, 2, 2}, {14, 14, 5, 5, 2, 2, 1, 1, 1, 1, 2, 2}, {28, 37, 5, 5, 2, 2, 1, 1, 2, 1, 2, 2},
    {5, 40, 5, 5, 1, 2, 1, 1, 0, 3, 0, 4}, {9, 23, 7, 7, 1, 1, 1, 1, 3, 3, 3, 3}, {9, 50, 3, 7, 1, 2, 1, 1, 1, 2, 1, 2},
    {3, 4, 5, 5, 1, 1, 1, 1, 2, 2, 2, 2},  {13, 20, 3, 3, 3, 3, 1, 1, 1, 1, 1, 1}, {2, 1100, 3, 5, 1, 1, 1, 1, 1, 2, 1, 2},
    // Planes the lanes kernels take in several bands of output rows (DepthwiseWindow::LanesBandRows).
    {60, 100, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1}, {57, 90, 5, 5, 2, 2, 1, 1, 1, 1, 2, 2}, {40, 120, 3, 3, 1, 1, 2, 1, 2, 1, 2, 1},
    // Stride 1, "same" padding along x (the AVX-512 shifted rows): rows of
    // exactly 7 blocks of 16, of 3.5 blocks (a tail), of 40 and 16 columns,
    // windows taller than wide, output rows not a multiple of 4.
    {6, 112, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1}, {11, 56, 5, 5, 1, 1, 1, 1, 2, 2, 2, 2}, {7, 40, 5, 3, 1, 1, 1, 1, 2, 1, 2, 1},
    {5, 16, 3, 5, 1, 1, 1, 1, 0, 2, 2, 2}, {30, 28, 5, 5, 1, 1, 1, 1, 2, 2, 2, 2},
    // 1x1 windows (a scale per channel): DeepFilterNet3's ERB decoder's 100 x 32
    // planes (the whole plane as one row), and strided (tap by tap).
    {100, 32, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0}, {9, 20, 1, 1, 2, 2, 1, 1, 0, 0, 0, 0}};

// got[i] within testing::kF32RelTol of want[i] clamped to [lo, hi] (relative
// to the largest |want|, at least 1), and got's one extra value (42) untouched.
void ExpectClampedWithin(const std::vector<float>& got, const std::vector<float>& want, float lo, float hi) {
  float scale = 1.0f;
  for (float v : want) scale = std::max(scale, std::fabs(v));
  for (size_t i = 0; i < want.size(); ++i) {
    const float clamped = std::min(std::max(want[i], lo), hi);
    ASSERT_LE(std::fabs(got[i] - clamped), kF32RelTol * scale) << "element " << i;
  }
  EXPECT_EQ(got[want.size()], 42.0f) << "wrote past the planes";
}

// The depthwise convolution of `c` over `channels` channels, its output
// shape in *y_shape (empty when PrepareConv rejects it).
ConvParams DepthwiseParams(const DepthwiseCase& c, int64_t channels, Shape* y_shape) {
  ConvParams p;
  p.window.kernel = {c.kh, c.kw}, p.window.strides = {c.sh, c.sw}, p.window.dilations = {c.dh, c.dw};
  p.window.pads = {c.pt, c.pl, c.pb, c.pr};
  p.group = channels;
  if (!PrepareConv({1, channels, c.h, c.w}, {channels, 1, c.kh, c.kw}, AutoPad::kNotSet, &p, y_shape).ok())
    y_shape->clear();
  return p;
}

// FP32 depthwise channels against ConvF32Ref, then the clamp: 1, 16 and 21
// channels (a block of 16 lanes and a tail) of each geometry.
void CheckDepthwiseF32(std::mt19937& rng, DepthwiseF32Fn fn) {
  std::uniform_real_distribution<float> value(-1.0f, 1.0f);
  const int64_t channel_counts[] = {1, 16, 21};
  int round = 0;
  for (const DepthwiseCase& c : kDepthwiseCases) {
    const int64_t channels = channel_counts[round++ % 3];
    SCOPED_TRACE("depthwise " + std::to_string(c.h) + "x" + std::to_string(c.w) + " k" + std::to_string(c.kh) + "x" +
                 std::to_string(c.kw) + ", " + std::to_string(channels) + " channels");
    Shape y_shape;
    const ConvParams p = DepthwiseParams(c, channels, &y_shape);
    ASSERT_EQ(y_shape.size(), 4u);
    const int64_t taps = c.kh * c.kw;
    std::vector<float> x(static_cast<size_t>(channels * c.h * c.w)), w(static_cast<size_t>(channels * taps));
    std::vector<float> bias(static_cast<size_t>(channels));
    for (float& v : x) v = value(rng);
    for (float& v : w) v = value(rng);
    for (float& v : bias) v = value(rng);
    std::vector<float> want(static_cast<size_t>(channels * y_shape[2] * y_shape[3]));
    ConvF32Ref(p, {1, channels, c.h, c.w}, x.data(), {channels, 1, c.kh, c.kw}, w.data(), bias.data(), y_shape,
               want.data(), nullptr);
    const std::vector<float> w_lanes = PackDepthwiseLanes(w.data(), channels, taps);
    DepthwiseF32Channels a;
    a.channels = channels;
    a.x = x.data(), a.w = w.data(), a.w_lanes = w_lanes.data(), a.bias = bias.data();
    a.height = c.h, a.width = c.w, a.out_h = y_shape[2], a.out_w = y_shape[3];
    a.kernel_h = c.kh, a.kernel_w = c.kw, a.stride_h = c.sh, a.stride_w = c.sw;
    a.dilation_h = c.dh, a.dilation_w = c.dw, a.pad_top = c.pt, a.pad_left = c.pl;
    a.out_min = -0.5f, a.out_max = 0.75f;
    std::vector<float> scratch(static_cast<size_t>(a.ScratchFloats()), std::nanf(""));
    a.scratch = scratch.data();
    std::vector<float> got(want.size() + 1, 42.0f);
    a.y = got.data();
    fn(a);
    ExpectClampedWithin(got, want, a.out_min, a.out_max);
  }
}

// sparq.PointwiseDepthwise's rows against ConvF32Ref (1x1), the clamp,
// ConvF32Ref (depthwise), the clamp: the geometries of CheckDepthwiseF32 that
// the rows take (PointwiseDepthwiseF32::Fits), 1 to 32 channels, 1 to 19 input
// channels; all bands in one call, and band by band with the same bits.
void CheckPointwiseDepthwiseF32(std::mt19937& rng, PointwiseDepthwiseF32Fn fn) {
  std::uniform_real_distribution<float> value(-1.0f, 1.0f);
  const int64_t channel_counts[] = {32, 5, 16, 21, 1};
  const int64_t in_counts[] = {3, 19, 1, 8};
  int round = 0;
  for (const DepthwiseCase& c : kDepthwiseCases) {
    const int64_t channels = channel_counts[round % 5], in_channels = in_counts[round % 4];
    ++round;
    Shape y_shape;
    const ConvParams p = DepthwiseParams(c, channels, &y_shape);
    ASSERT_EQ(y_shape.size(), 4u);
    PointwiseDepthwiseF32 a;
    a.channels = channels, a.in_channels = in_channels;
    a.height = c.h, a.width = c.w, a.out_h = y_shape[2], a.out_w = y_shape[3];
    a.kernel_h = c.kh, a.kernel_w = c.kw, a.stride_h = c.sh, a.stride_w = c.sw;
    a.dilation_h = c.dh, a.dilation_w = c.dw, a.pad_top = c.pt, a.pad_left = c.pl;
    if (!a.Fits()) continue;
    SCOPED_TRACE("pointwise " + std::to_string(in_channels) + " -> " + std::to_string(channels) + ", depthwise " +
                 std::to_string(c.h) + "x" + std::to_string(c.w) + " k" + std::to_string(c.kh) + "x" +
                 std::to_string(c.kw) + " s" + std::to_string(c.sh) + "x" + std::to_string(c.sw));
    const int64_t taps = c.kh * c.kw, plane = c.h * c.w;
    std::vector<float> x(static_cast<size_t>(in_channels * plane)), w1(static_cast<size_t>(channels * in_channels));
    std::vector<float> b1(static_cast<size_t>(channels)), w2(static_cast<size_t>(channels * taps));
    std::vector<float> b2(static_cast<size_t>(channels));
    for (auto* v : {&x, &w1, &b1, &w2, &b2})
      for (float& e : *v) e = value(rng);
    a.pw_min = -0.25f, a.pw_max = 0.8f, a.out_min = -0.5f, a.out_max = 0.75f;
    // The reference: t = clamp(Conv 1x1), y = clamp(depthwise Conv of t).
    ConvParams p1;
    p1.window.kernel = {1, 1}, p1.window.strides = {1, 1}, p1.window.dilations = {1, 1}, p1.window.pads = {0, 0, 0, 0};
    Shape t_shape;
    ASSERT_TRUE(PrepareConv({1, in_channels, c.h, c.w}, {channels, in_channels, 1, 1}, AutoPad::kNotSet, &p1,
                            &t_shape).ok());
    std::vector<float> t(static_cast<size_t>(channels * plane));
    ConvF32Ref(p1, {1, in_channels, c.h, c.w}, x.data(), {channels, in_channels, 1, 1}, w1.data(), b1.data(), t_shape,
               t.data(), nullptr);
    for (float& v : t) v = std::min(std::max(v, a.pw_min), a.pw_max);
    std::vector<float> want(static_cast<size_t>(channels * y_shape[2] * y_shape[3]));
    ConvF32Ref(p, {1, channels, c.h, c.w}, t.data(), {channels, 1, c.kh, c.kw}, w2.data(), b2.data(), y_shape,
               want.data(), nullptr);
    // The rows' weights: W1^T [in_channels][32], biases [32], 0 past `channels`.
    std::vector<float> w_pw(static_cast<size_t>(in_channels * 32), 0.0f), b_pw(32, 0.0f);
    for (int64_t o = 0; o < channels; ++o) {
      for (int64_t k = 0; k < in_channels; ++k) w_pw[k * 32 + o] = w1[o * in_channels + k];
      b_pw[o] = b1[o];
    }
    const std::vector<float> w_dw = PackDepthwiseLanes(w2.data(), channels, taps);
    a.x = x.data(), a.w_pw = w_pw.data(), a.b_pw = b_pw.data(), a.w_dw = w_dw.data(), a.b_dw = b2.data();
    std::vector<float> scratch(static_cast<size_t>(a.ScratchFloats()), std::nanf(""));
    a.scratch = scratch.data();
    std::vector<float> got(want.size() + 1, 42.0f), by_band(want.size() + 1, 42.0f);
    a.y = got.data(), a.band_begin = 0, a.band_end = a.Bands();
    fn(a);
    a.y = by_band.data();
    for (int64_t b = a.Bands() - 1; b >= 0; --b) {
      a.band_begin = b, a.band_end = b + 1;
      fn(a);
    }
    ExpectClampedWithin(got, want, a.out_min, a.out_max);
    EXPECT_EQ(std::memcmp(got.data(), by_band.data(), got.size() * sizeof(float)), 0) << "band by band differs";
  }
}

// INT8 depthwise channels against int32 sums of the definition and
// RequantizeS32Ref (then the table), bit for bit: the geometries of
// CheckDepthwiseF32 and the 7x7 / 14x14 planes of EfficientNet, int8 and
// uint8 x and y, 1, 16 and 21 channels (a block of 16 lanes and a tail),
// weights and zero points at the ends of their ranges, with and without a
// table.
void CheckDepthwiseS8(std::mt19937& rng, DepthwiseS8Fn fn) {
  std::uniform_int_distribution<int> byte(0, 255), weight(-255, 255);
  const int64_t channel_counts[] = {1, 16, 21};
  for (const DepthwiseCase& c : kDepthwiseCases) {
    for (int variant = 0; variant < 8; ++variant) {
      const bool x_signed = variant & 1, y_signed = variant & 2, with_table = variant & 4;
      const int64_t channels = channel_counts[(variant + c.kw) % 3];
      SCOPED_TRACE("depthwise " + std::to_string(c.h) + "x" + std::to_string(c.w) + " k" + std::to_string(c.kh) +
                   "x" + std::to_string(c.kw) + " s" + std::to_string(c.sh) + "," + std::to_string(c.sw) +
                   (x_signed ? " x s8" : " x u8") + (y_signed ? " y s8" : " y u8") + (with_table ? " table" : "") +
                   ", " + std::to_string(channels) + " channels");
      const int64_t oh = (c.h + c.pt + c.pb - c.dh * (c.kh - 1) - 1) / c.sh + 1;
      const int64_t ow = (c.w + c.pl + c.pr - c.dw * (c.kw - 1) - 1) / c.sw + 1;
      const int64_t in_plane = c.h * c.w, out_plane = oh * ow, taps = c.kh * c.kw;
      std::vector<uint8_t> x(static_cast<size_t>(channels * in_plane));
      for (uint8_t& v : x) v = static_cast<uint8_t>(byte(rng));
      std::vector<int16_t> w(static_cast<size_t>(channels * taps));
      for (int16_t& v : w) v = static_cast<int16_t>(weight(rng));
      w[0] = 255, w[w.size() - 1] = -255;
      std::vector<int32_t> bias(static_cast<size_t>(channels));
      std::vector<float> multiplier(static_cast<size_t>(channels));
      for (int64_t ch = 0; ch < channels; ++ch) {
        bias[ch] = static_cast<int32_t>(weight(rng)) * 40;
        // Sums of kh * kw taps spread about 20000 * sqrt(kh * kw): outputs spread some 30 steps, a few saturate.
        multiplier[ch] = (1.0f + 0.05f * static_cast<float>(ch % 7)) / static_cast<float>(taps * 150);
      }
      // A bias past float's exact integers (2^24): acc + bias in int32, then one rounding to float.
      if (variant == 5) bias[channels - 1] = -(1 << 26) + 3;
      // Multipliers just below 1 (outputs saturate, past int16 too: the rows'
      // narrowing when every |multiplier| < 1), or one of 2 (their clamping path).
      if (variant == 6)
        for (int64_t ch = 0; ch < channels; ++ch) multiplier[ch] = (ch % 2 ? -1.0f : 1.0f) * 0.99999994f;
      if (variant == 7) multiplier[channels - 1] = 2.0f;
      std::vector<uint8_t> table(256);
      for (uint8_t& v : table) v = static_cast<uint8_t>(byte(rng));
      const int32_t x_zp = x_signed ? (variant % 4 == 1 ? -128 : 5) : 255 - variant;
      const int32_t y_zp = y_signed ? 3 : 120;
      std::vector<uint8_t> want(static_cast<size_t>(channels * out_plane));
      for (int64_t ch = 0; ch < channels; ++ch) {
        auto x_at = [&](int64_t i) {
          const uint8_t b = x[ch * in_plane + i];
          return x_signed ? int32_t{static_cast<int8_t>(b)} : int32_t{b};
        };
        std::vector<int32_t> acc(static_cast<size_t>(out_plane), 0);
        for (int64_t oy = 0; oy < oh; ++oy)
          for (int64_t ox = 0; ox < ow; ++ox)
            for (int64_t ky = 0; ky < c.kh; ++ky)
              for (int64_t kx = 0; kx < c.kw; ++kx) {
                const int64_t iy = oy * c.sh - c.pt + ky * c.dh, ix = ox * c.sw - c.pl + kx * c.dw;
                if (iy >= 0 && iy < c.h && ix >= 0 && ix < c.w)
                  acc[oy * ow + ox] += w[ch * taps + ky * c.kw + kx] * (x_at(iy * c.w + ix) - x_zp);
              }
        uint8_t* out = want.data() + ch * out_plane;
        if (y_signed) {
          RequantizeS32Ref<int8_t>(out_plane, acc.data(), &bias[ch], 0, &multiplier[ch], 0, y_zp, false,
                                   reinterpret_cast<int8_t*>(out));
        } else {
          RequantizeS32Ref<uint8_t>(out_plane, acc.data(), &bias[ch], 0, &multiplier[ch], 0, y_zp, false, out);
        }
        if (with_table)
          for (int64_t i = 0; i < out_plane; ++i) out[i] = table[out[i] ^ (y_signed ? 0x80 : 0)];
      }
      const std::vector<float> w_lanes = PackDepthwiseLanes(w.data(), channels, taps);
      DepthwiseS8Channels args;
      args.x = x.data(), args.x_signed = x_signed, args.x_zero_point = x_zp;
      args.w = w.data(), args.w_lanes = w_lanes.data(), args.bias = bias.data(), args.multiplier = multiplier.data();
      args.y_zero_point = y_zp, args.y_signed = y_signed, args.table = with_table ? table.data() : nullptr;
      args.channels = channels;
      args.height = c.h, args.width = c.w, args.out_h = oh, args.out_w = ow;
      args.kernel_h = c.kh, args.kernel_w = c.kw, args.stride_h = c.sh, args.stride_w = c.sw;
      args.dilation_h = c.dh, args.dilation_w = c.dw, args.pad_top = c.pt, args.pad_left = c.pl;
      std::vector<float> scratch(static_cast<size_t>(args.ScratchFloats()), std::nanf(""));
      args.scratch = scratch.data();
      std::vector<uint8_t> got(want.size() + 1, 0x5a);
      args.y = got.data();
      fn(args);
      for (size_t i = 0; i < want.size(); ++i) ASSERT_EQ(got[i], want[i]) << "element " << i;
      EXPECT_EQ(got[want.size()], 0x5a) << "wrote past the planes";
      if (out_plane >= 100 && !with_table)
        EXPECT_GT(std::set<uint8_t>(want.begin(), want.begin() + out_plane).size(), 10u) << "saturated";
    }
  }
}

// Requantization against RequantizeS32Ref, per-tensor and per-column.
void CheckRequantS32(std::mt19937& rng, RequantS32Fn fn) {
  std::uniform_int_distribution<int32_t> acc_value(-40000, 40000);
  std::uniform_real_distribution<float> mult(1e-4f, 1e-2f);
  for (int64_t n : kRowLengths) {
    for (int variant = 0; variant < 4; ++variant) {
      const bool out_signed = variant & 1, relu = variant & 2;
      SCOPED_TRACE("n " + std::to_string(n) + (out_signed ? " s8" : " u8") + (relu ? " relu" : ""));
      std::vector<int32_t> acc(static_cast<size_t>(n)), bias(static_cast<size_t>(n) + 1);
      std::vector<float> multiplier(static_cast<size_t>(n) + 1);
      for (int32_t& v : acc) v = acc_value(rng);
      for (int32_t& v : bias) v = acc_value(rng) / 8;
      for (float& v : multiplier) v = mult(rng);
      const int64_t stride = variant < 2 ? 1 : 0;
      const int32_t zp = out_signed ? 3 : 120;
      std::vector<uint8_t> want(static_cast<size_t>(n)), got(static_cast<size_t>(n) + 2, 99);
      if (out_signed) {
        RequantizeS32Ref<int8_t>(n, acc.data(), bias.data(), stride, multiplier.data(), stride, zp, relu,
                                 reinterpret_cast<int8_t*>(want.data()));
      } else {
        RequantizeS32Ref<uint8_t>(n, acc.data(), bias.data(), stride, multiplier.data(), stride, zp, relu,
                                  want.data());
      }
      fn(n, acc.data(), bias.data(), stride, multiplier.data(), stride, zp, relu, out_signed, got.data());
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(got[i], want[i]) << "element " << i << " acc " << acc[i];
      EXPECT_EQ(got[n], 99) << "wrote past n";
    }
  }
}

void CheckLut256(std::mt19937& rng, Lut256Fn fn) {
  const std::vector<uint8_t> table = RandomBytes(rng, 256);
  for (uint8_t flip : {uint8_t{0}, uint8_t{0x80}}) {
    for (int64_t n : kRowLengths) {
      SCOPED_TRACE("n " + std::to_string(n) + " flip " + std::to_string(flip));
      const std::vector<uint8_t> in = RandomBytes(rng, n);
      std::vector<uint8_t> got(static_cast<size_t>(n) + 2, 99), in_place = in;
      fn(table.data(), flip, in.data(), got.data(), n);
      fn(table.data(), flip, in_place.data(), in_place.data(), n);  // out may be in
      for (int64_t i = 0; i < n; ++i) {
        ASSERT_EQ(got[i], table[in[i] ^ flip]) << "element " << i;
        ASSERT_EQ(in_place[i], got[i]) << "in place, element " << i;
      }
      EXPECT_EQ(got[n], 99) << "wrote past n";
    }
  }
}

// Values that hit the rounding ties, saturation and NaN, then random ones.
std::vector<float> QuantizeInputs(std::mt19937& rng, int64_t n, float scale) {
  std::uniform_real_distribution<float> value(-300.0f * scale, 300.0f * scale);
  std::vector<float> x(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    switch (i % 5) {
      case 0: x[i] = (static_cast<float>(i % 40) - 20.0f + 0.5f) * scale; break;  // ties
      case 1: x[i] = i % 7 == 1 ? std::nanf("") : 1e9f; break;
      default: x[i] = value(rng);
    }
  }
  return x;
}

void CheckQuantizeF32(std::mt19937& rng, QuantizeF32Fn fn) {
  for (bool out_signed : {false, true}) {
    for (int64_t n : kRowLengths) {
      SCOPED_TRACE("n " + std::to_string(n) + (out_signed ? " s8" : " u8"));
      const float scale = 0.037f;
      const int32_t zp = out_signed ? -5 : 131;
      const std::vector<float> x = QuantizeInputs(rng, n, scale);
      std::vector<uint8_t> got(static_cast<size_t>(n) + 2, 99);
      fn(n, x.data(), scale, zp, out_signed, got.data());
      for (int64_t i = 0; i < n; ++i) {
        const uint8_t want = out_signed ? static_cast<uint8_t>(QuantizeValue<int8_t>(x[i], scale, zp))
                                        : QuantizeValue<uint8_t>(x[i], scale, zp);
        ASSERT_EQ(got[i], want) << "element " << i << " x " << x[i];
      }
      EXPECT_EQ(got[n], 99) << "wrote past n";
    }
  }
}

void CheckDequantizeS8(std::mt19937& rng, DequantizeS8Fn fn) {
  for (bool x_signed : {false, true}) {
    for (int64_t n : kRowLengths) {
      SCOPED_TRACE("n " + std::to_string(n) + (x_signed ? " s8" : " u8"));
      const float scale = 0.0123f;
      const int32_t zp = x_signed ? 7 : 128;
      const std::vector<uint8_t> x = RandomBytes(rng, n);
      std::vector<float> got(static_cast<size_t>(n) + 1, 99.0f);
      fn(n, x.data(), x_signed, scale, zp, got.data());
      for (int64_t i = 0; i < n; ++i) {
        const int32_t q = x_signed ? static_cast<int8_t>(x[i]) : x[i];
        ASSERT_EQ(got[i], DequantizeValue(q, scale, zp)) << "element " << i;  // bit for bit
      }
      EXPECT_EQ(got[n], 99.0f) << "wrote past n";
    }
  }
}

template <bool kMul, typename Fn>
void CheckQLinearBinaryS8(std::mt19937& rng, Fn fn) {
  for (bool is_signed : {false, true}) {
    for (int64_t n : kRowLengths) {
      SCOPED_TRACE("n " + std::to_string(n) + (is_signed ? " s8" : " u8"));
      const float a_scale = 0.02f, b_scale = 0.031f, y_scale = 0.04f;
      const int32_t a_zp = is_signed ? -3 : 120, b_zp = is_signed ? 9 : 133, y_zp = is_signed ? 1 : 127;
      const std::vector<uint8_t> a = RandomBytes(rng, n), b = RandomBytes(rng, n);
      std::vector<uint8_t> got(static_cast<size_t>(n) + 2, 99);
      fn(n, a.data(), a_scale, a_zp, b.data(), b_scale, b_zp, y_scale, y_zp, is_signed, got.data());
      for (int64_t i = 0; i < n; ++i) {
        const int32_t qa = is_signed ? static_cast<int8_t>(a[i]) : a[i];
        const int32_t qb = is_signed ? static_cast<int8_t>(b[i]) : b[i];
        const float x = DequantizeValue(qa, a_scale, a_zp), z = DequantizeValue(qb, b_scale, b_zp);
        const float sum = kMul ? x * z : x + z;
        const uint8_t want = is_signed ? static_cast<uint8_t>(QuantizeValue<int8_t>(sum, y_scale, y_zp))
                                       : QuantizeValue<uint8_t>(sum, y_scale, y_zp);
        ASSERT_EQ(got[i], want) << "element " << i;
      }
      EXPECT_EQ(got[n], 99) << "wrote past n";
    }
  }
}

uint32_t Bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

// Histograms of rows long and short (the SIMD rows count long ones in
// sub-histograms), with runs of zeros, values past the range (clamped to the
// last bin), -0, denormals and NaNs (left out, counted), against
// AbsHistogramRef (exact counts).
void CheckAbsHistogramF32(std::mt19937& rng, AbsHistogramF32Fn fn) {
  std::uniform_real_distribution<float> value(-8.0f, 8.0f);
  for (int64_t bins : {128, 2048}) {
    for (int64_t n : {int64_t{0}, int64_t{1}, int64_t{17}, int64_t{1000}, int64_t{65536 + 13}, 20 * bins + 7}) {
      for (int variant = 0; variant < 4; ++variant) {
        SCOPED_TRACE("bins " + std::to_string(bins) + " n " + std::to_string(n) + " variant " + std::to_string(variant));
        std::vector<float> x(static_cast<size_t>(n));
        for (int64_t i = 0; i < n; ++i) {
          x[i] = value(rng);
          if (variant == 1 && i % 3 != 0) x[i] = i % 2 ? -0.0f : 0.0f;  // ReLU-like runs
          if (variant == 2 && i % 7 == 0) x[i] = i % 2 ? 1e30f : -1e-40f;  // past the range, denormal
          if (variant == 2 && i % 7 == 3) x[i] = 3e38f;                     // past float's range once scaled
          if (variant == 0 && i % 4 == 1) x[i] = std::nextafter(static_cast<float>(i % 64) / 8.0f, 0.0f);  // below an edge
          if (variant == 3 && i % 5 == 2) x[i] = i % 2 ? std::nanf("") : -std::nanf("");  // not counted
          if (variant == 3 && i % 5 == 3) x[i] = 0.0f;
        }
        // A power-of-two scale (calibration's: rows may take a float path)
        // and another.
        for (double scale : {static_cast<double>(bins) / 8.0, static_cast<double>(bins) / 6.0}) {
          std::vector<int64_t> want(static_cast<size_t>(bins), 5), got = want;
          const int64_t want_nans = AbsHistogramRef(x.data(), n, scale, bins - 1, want.data());
          const int64_t got_nans = fn(x.data(), n, scale, bins - 1, got.data());
          ASSERT_EQ(got, want) << "scale " << scale;
          ASSERT_EQ(got_nans, want_nans);
          if (variant == 3) ASSERT_EQ(want_nans, (n + 2) / 5);
        }
      }
    }
  }
}

// Sums of x log(y / z) and x log y as the KL search makes them
// (probabilities and their ratios: y from denormal-small to large, on either
// side of 1, and at exactly 1), rows of every length about the vector widths,
// against XLogYSumRef.
void CheckXLogYSumF64(std::mt19937& rng, XLogYSumF64Fn fn, bool exact) {
  std::uniform_real_distribution<double> unit(0.0, 1.0), exponent(-30.0, 30.0);
  for (int64_t n : {0, 1, 7, 8, 9, 15, 16, 17, 31, 128, 1000, 2047}) {
    for (int variant = 0; variant < 4; ++variant) {
      SCOPED_TRACE("n " + std::to_string(n) + " variant " + std::to_string(variant));
      std::vector<double> x(static_cast<size_t>(n)), y(x.size()), z(x.size());
      for (int64_t i = 0; i < n; ++i) {
        x[i] = unit(rng) * (variant == 2 && i % 2 ? -1.0 : 1.0);
        y[i] = variant == 0 ? std::exp2(exponent(rng)) : 0.5 + unit(rng);  // near 1: log's hardest relative error
        if (variant == 1 && i % 5 == 0) y[i] = 1.0;
        if (variant == 2 && i % 11 == 0) y[i] = 1e-310 * (1.0 + unit(rng));  // denormal
        z[i] = y[i] * (0.25 + unit(rng));
      }
      const double* zs = variant == 3 ? z.data() : nullptr;  // p log(p / q)
      if (variant == 3) y = x, std::transform(y.begin(), y.end(), y.begin(), [](double v) { return v + 1e-9; });
      const double want = XLogYSumRef(x.data(), y.data(), zs, n);
      const double got = fn(x.data(), y.data(), zs, n);
      if (exact) {
        ASSERT_EQ(std::memcmp(&got, &want, sizeof got), 0) << got << " vs " << want;
        continue;
      }
      double magnitude = 0.0;
      for (int64_t i = 0; i < n; ++i) magnitude += std::fabs(x[i] * std::log(zs ? y[i] / zs[i] : y[i]));
      ASSERT_LE(std::fabs(got - want), cpu::kXLogYSumF64RelTol * magnitude) << got << " vs " << want;
    }
  }
  // One logarithm at a time, across the exponent range: about an ulp.
  for (double y : {1.0, 1.0 + 0x1p-52, 1.0 - 0x1p-53, 0.70710678118654752, 1.41421356237309505, 2.0, 0.5, 3.0,
                   1e-300, 1e300, 4.9e-324, 0.1, 7.389056098930650}) {
    const double one = 1.0, got = fn(&one, &y, nullptr, 1), want = std::log(y);
    ASSERT_LE(std::fabs(got - want), 4e-16 * std::fabs(want) + 1e-300) << "log " << y << ": " << got << " vs " << want;
  }
}

// The range of rows with NaNs, -0, infinities and values on either side of
// the starting bounds, against MinMaxRef (exact: the same floats).
void CheckMinMaxF32(std::mt19937& rng, MinMaxF32Fn fn) {
  std::uniform_real_distribution<float> value(-50.0f, 50.0f);
  for (int64_t n : kRowLengths) {
    for (int variant = 0; variant < 4; ++variant) {
      SCOPED_TRACE("n " + std::to_string(n) + " variant " + std::to_string(variant));
      std::vector<float> x(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) {
        x[i] = value(rng);
        if (variant == 1 && i % 3 == 0) x[i] = std::nanf("");
        if (variant == 2) x[i] = i % 2 ? -0.0f : 0.0f;
        if (variant == 3 && i == n / 2) x[i] = i % 2 ? INFINITY : -INFINITY;
      }
      float lo = variant == 2 ? 0.0f : -3.0f, hi = variant == 2 ? 0.0f : 4.0f;
      float want_lo = lo, want_hi = hi;
      MinMaxRef(x.data(), n, &want_lo, &want_hi);
      fn(x.data(), n, &lo, &hi);
      ASSERT_EQ(Bits(lo), Bits(want_lo)) << lo << " vs " << want_lo;
      ASSERT_EQ(Bits(hi), Bits(want_hi)) << hi << " vs " << want_hi;
    }
  }
}

// Means of rows (more and fewer than the kernel's 8 at a time, with a NaN
// row), against MeanOfRowRef bit for bit.
void CheckMeanRowsF32(std::mt19937& rng, MeanRowsF32Fn fn) {
  std::uniform_real_distribution<float> value(-10.0f, 30.0f);
  for (int64_t rows : {1, 7, 8, 9, 17}) {
    for (int64_t n : {1, 3, 64, 385}) {
      SCOPED_TRACE("rows " + std::to_string(rows) + " n " + std::to_string(n));
      std::vector<float> x(static_cast<size_t>(rows * n));
      for (float& v : x) v = value(rng);
      if (rows > 1) x[static_cast<size_t>(n)] = std::nanf("");  // row 1 starts with a NaN
      std::vector<float> got(static_cast<size_t>(rows) + 1, 99.0f);
      fn(x.data(), rows, n, got.data());
      for (int64_t r = 0; r < rows; ++r) {
        const float want = reduce_common::MeanOfRowRef(x.data() + r * n, n);
        ASSERT_TRUE(Bits(got[r]) == Bits(want) || (std::isnan(got[r]) && std::isnan(want))) << "row " << r;
      }
      EXPECT_EQ(got[rows], 99.0f) << "wrote past the rows";
    }
  }
}

// Row maxima as kernels/ref GlobalMaxPool picks them, bit for bit: random
// rows, rows with a NaN (first, inside, two of them with different payloads),
// rows whose maximum is a zero of either sign (the first one wins), all -inf.
void CheckMaxRowsF32(std::mt19937& rng, MaxRowsF32Fn fn) {
  std::uniform_real_distribution<float> value(-10.0f, 30.0f);
  const float inf = std::numeric_limits<float>::infinity();
  for (int64_t n : {1, 3, 15, 16, 17, 64, 385}) {
    const int64_t rows = 8;
    SCOPED_TRACE("n " + std::to_string(n));
    std::vector<float> x(static_cast<size_t>(rows * n));
    for (float& v : x) v = value(rng);
    auto row = [&](int64_t r) { return x.data() + r * n; };
    row(1)[0] = std::nanf("1");
    row(2)[n / 2] = std::nanf("2");
    row(2)[n - 1] = std::nanf("3");
    for (int64_t i = 0; i < n; ++i) row(3)[i] = -std::fabs(row(3)[i]) - 1.0f;
    row(3)[n - 1] = -0.0f;
    if (n > 2) row(3)[n / 2] = -0.0f, row(3)[n - 1] = 0.0f;
    for (int64_t i = 0; i < n; ++i) row(4)[i] = -inf;
    for (int64_t i = 0; i < n; ++i) row(5)[i] = (i % 2) ? 0.0f : -0.0f;
    std::vector<float> got(static_cast<size_t>(rows) + 1, 99.0f);
    fn(x.data(), rows, n, got.data());
    for (int64_t r = 0; r < rows; ++r) {
      float want = row(r)[0];
      for (int64_t i = 1; i < n; ++i)
        if (row(r)[i] > want || (std::isnan(row(r)[i]) && !std::isnan(want))) want = row(r)[i];
      ASSERT_EQ(Bits(got[r]), Bits(want)) << "row " << r << ": " << got[r] << " vs " << want;
    }
    EXPECT_EQ(got[rows], 99.0f) << "wrote past the rows";
  }
}

// Tanh (the reference's std::tanh on float) on random values of [-12, 12],
// values near the series' edge (1/4) and the special ones: signed zeros,
// tiny, saturated, infinities, NaN; those last exact on every row.
void CheckTanhF32(std::mt19937& rng, TanhF32Fn fn, float abs_tol) {
  std::uniform_real_distribution<float> value(-12.0f, 12.0f);
  const float inf = std::numeric_limits<float>::infinity();
  const float special[] = {0.0f, -0.0f, 1e-8f, -1e-30f, 0.2499f, 0.25f, -0.2501f, 9.5f, -20.0f, inf, -inf, std::nanf("")};
  constexpr int64_t kSpecial = sizeof(special) / sizeof(special[0]);
  for (int64_t n : kRowLengths) {
    SCOPED_TRACE("n " + std::to_string(n));
    std::vector<float> x(static_cast<size_t>(n)), got(x.size() + 1, 99.0f);
    for (int64_t i = 0; i < n; ++i) x[i] = i < kSpecial && n >= kSpecial ? special[i] : value(rng);
    if (n >= 64) for (int64_t i = kSpecial; i < 40; ++i) x[i] = value(rng) / 32;  // inside the series
    fn(x.data(), got.data(), n);
    for (int64_t i = 0; i < n; ++i) {
      const float want = std::tanh(x[i]);
      if (std::isnan(want)) ASSERT_TRUE(std::isnan(got[i])) << "element " << i;
      else if (abs_tol == 0 || std::isinf(x[i]) || std::fabs(x[i]) < 1e-6f) ASSERT_EQ(Bits(got[i]), Bits(want)) << "x " << x[i];
      else ASSERT_NEAR(got[i], want, abs_tol) << "element " << i << " x " << x[i];
    }
    EXPECT_EQ(got[n], 99.0f) << "wrote past n";
  }
}

// Every operation and step pattern, with NaN, infinities and zeros among the
// values: one IEEE operation, so the bits of a op b.
void CheckBinaryF32(std::mt19937& rng, BinaryF32Fn fn) {
  std::uniform_real_distribution<float> value(-4.0f, 4.0f);
  const float specials[] = {0.0f, -0.0f, INFINITY, -INFINITY, std::nanf(""), 1e-40f};
  for (BinaryF32Op op : {BinaryF32Op::kAdd, BinaryF32Op::kSub, BinaryF32Op::kMul, BinaryF32Op::kDiv}) {
    for (int64_t n : kRowLengths) {
      for (int steps = 0; steps < 4; ++steps) {
        const int64_t a_step = steps & 1, b_step = steps >> 1;
        SCOPED_TRACE("op " + std::to_string(static_cast<int>(op)) + " n " + std::to_string(n) + " steps " +
                     std::to_string(a_step) + "," + std::to_string(b_step));
        std::vector<float> a(static_cast<size_t>(n) + 1), b(static_cast<size_t>(n) + 1);
        for (size_t i = 0; i < a.size(); ++i) {
          a[i] = i % 11 == 5 ? specials[i % 6] : value(rng);
          b[i] = i % 13 == 7 ? specials[(i + 1) % 6] : value(rng);
        }
        std::vector<float> got(static_cast<size_t>(n) + 1, 99.0f);
        fn(op, n, a.data(), a_step, b.data(), b_step, got.data());
        for (int64_t i = 0; i < n; ++i) {
          const float x = a[i * a_step], z = b[i * b_step];
          const float want = op == BinaryF32Op::kAdd   ? x + z
                             : op == BinaryF32Op::kSub ? x - z
                             : op == BinaryF32Op::kMul ? x * z
                                                       : x / z;
          ASSERT_TRUE(Bits(got[i]) == Bits(want) || (std::isnan(got[i]) && std::isnan(want)))
              << "element " << i << ": " << got[i] << " vs " << want;
        }
        EXPECT_EQ(got[n], 99.0f) << "wrote past n";
      }
    }
  }
}

// MaxPool of float32 (with NaNs and signed zeros), int8 and uint8 planes
// against MaxPoolRef, with windows that leave the input (pads larger than the
// dilated window) and YOLO's SPPF window (5 x 5, stride 1, pads 2).
void CheckMaxPool2d(std::mt19937& rng, MaxPool2dFn fn) {
  struct Case {
    int64_t planes, h, w, kh, kw, sh, sw, dh, dw, pt, pl, pb, pr;
  };
  const Case cases[] = {{3, 9, 45, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1}, {2, 8, 8, 2, 2, 2, 2, 1, 1, 0, 0, 0, 0},
                        {1, 7, 70, 3, 5, 1, 1, 2, 1, 2, 2, 2, 2}, {2, 5, 4, 3, 3, 3, 3, 1, 1, 2, 2, 2, 2},
                        {1, 13, 33, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0}, {3, 20, 20, 5, 5, 1, 1, 1, 1, 2, 2, 2, 2},
                        {2, 11, 41, 5, 5, 1, 1, 1, 1, 2, 2, 2, 2}, {2, 10, 27, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1},
                        // centred windows on small planes (SPPF's whole-plane runs), the window past the plane
                        {128, 10, 10, 5, 5, 1, 1, 1, 1, 2, 2, 2, 2}, {2, 3, 4, 7, 7, 1, 1, 1, 1, 3, 3, 3, 3},
                        {1, 1, 1, 5, 5, 1, 1, 1, 1, 2, 2, 2, 2}, {2, 6, 5, 3, 5, 1, 1, 1, 1, 1, 2, 1, 2}};
  std::uniform_real_distribution<float> value(-1.0f, 1.0f);
  for (const Case& c : cases) {
    for (int mode = 0; mode < 4; ++mode) {  // float32, float32 of -1 / +0 / -0 (ties of other bits), int8, uint8
      const auto elem = mode < 2 ? MaxPool2dArgs::Elem::kF32 : mode == 2 ? MaxPool2dArgs::Elem::kS8
                                                                        : MaxPool2dArgs::Elem::kU8;
      SCOPED_TRACE("maxpool " + std::to_string(c.h) + "x" + std::to_string(c.w) + " k" + std::to_string(c.kh) + "x" +
                   std::to_string(c.kw) + " mode " + std::to_string(mode));
      PoolParams p;
      p.window.kernel = {c.kh, c.kw}, p.window.strides = {c.sh, c.sw}, p.window.dilations = {c.dh, c.dw};
      p.window.pads = {c.pt, c.pl, c.pb, c.pr};
      const Shape xs = {1, c.planes, c.h, c.w};
      Shape ys;
      ASSERT_TRUE(PreparePool(xs, AutoPad::kNotSet, false, &p, &ys).ok());
      const int64_t nx = c.planes * c.h * c.w, ny = ys[1] * ys[2] * ys[3];
      const size_t bytes = elem == MaxPool2dArgs::Elem::kF32 ? 4 : 1;
      std::vector<uint8_t> x(static_cast<size_t>(nx) * bytes), want(static_cast<size_t>(ny) * bytes);
      std::vector<uint8_t> got(want.size() + bytes, 99);
      if (elem == MaxPool2dArgs::Elem::kF32) {
        auto* xf = reinterpret_cast<float*>(x.data());
        const float ties[] = {-1.0f, 0.0f, -0.0f};
        for (int64_t i = 0; i < nx; ++i) xf[i] = i % 97 == 5 ? std::nanf("") : mode == 0 ? value(rng) : ties[rng() % 3];
        MaxPoolRef<float>(p, xs, xf, ys, reinterpret_cast<float*>(want.data()), nullptr, nullptr);
      } else {
        for (uint8_t& b : x) b = static_cast<uint8_t>(rng());
        if (elem == MaxPool2dArgs::Elem::kS8) {
          MaxPoolRef<int8_t>(p, xs, reinterpret_cast<const int8_t*>(x.data()), ys,
                             reinterpret_cast<int8_t*>(want.data()), nullptr, nullptr);
        } else {
          MaxPoolRef<uint8_t>(p, xs, x.data(), ys, want.data(), nullptr, nullptr);
        }
      }
      MaxPool2dArgs a;
      a.elem = elem, a.x = x.data(), a.y = got.data();
      a.planes = c.planes, a.height = c.h, a.width = c.w, a.out_h = ys[2], a.out_w = ys[3];
      a.kernel_h = c.kh, a.kernel_w = c.kw, a.stride_h = c.sh, a.stride_w = c.sw;
      a.dilation_h = c.dh, a.dilation_w = c.dw, a.pad_top = c.pt, a.pad_left = c.pl;
      fn(a);
      // Bytes equal: the same maximum, NaN for NaN (the reference's NaN is x's NaN).
      for (size_t i = 0; i < want.size(); ++i) ASSERT_EQ(got[i], want[i]) << "byte " << i;
      EXPECT_EQ(got[want.size()], 99) << "wrote past the output";
    }
  }
}

// Equal bits when abs_tol is 0 (any NaN for a NaN), else |got - want| <= abs_tol.
void ExpectFloatRow(const std::vector<float>& got, const std::vector<float>& want, float abs_tol) {
  for (size_t i = 0; i < want.size(); ++i) {
    if (std::isnan(want[i])) {
      ASSERT_TRUE(std::isnan(got[i])) << "element " << i;
    } else if (abs_tol == 0) {
      ASSERT_EQ(Bits(got[i]), Bits(want[i])) << "element " << i << ": " << got[i] << " vs " << want[i];
    } else {
      ASSERT_NEAR(got[i], want[i], abs_tol) << "element " << i;
    }
  }
}

// Erf (the reference's std::erf on float) on random values of [-6, 6] and
// the special ones: signed zeros, tiny, saturated, infinities, NaN.
void CheckErfF32(std::mt19937& rng, ErfF32Fn fn, float abs_tol) {
  std::uniform_real_distribution<float> value(-6.0f, 6.0f);
  const float inf = std::numeric_limits<float>::infinity();
  const float special[] = {0.0f, -0.0f, 1e-8f, -1e-30f, 10.0f, -10.0f, inf, -inf, std::nanf("")};
  for (int64_t n : kRowLengths) {
    SCOPED_TRACE("n " + std::to_string(n));
    std::vector<float> x(static_cast<size_t>(n)), want(x.size()), got(x.size() + 1, 99.0f);
    for (int64_t i = 0; i < n; ++i) x[i] = i < 9 && n >= 9 ? special[i] : value(rng);
    for (int64_t i = 0; i < n; ++i) want[i] = std::erf(x[i]);
    fn(x.data(), got.data(), n);
    ExpectFloatRow(got, want, abs_tol);
    EXPECT_EQ(got[n], 99.0f) << "wrote past n";
  }
}

// Sigmoid as kernels/ref computes it (float exp, one division) and SiLU
// (then Mul's float product) on random values of [-20, 20] and the special
// ones: signed zeros, tiny, saturated, where float e^-x overflows,
// infinities (SiLU of -inf is NaN, as inf * 0), NaN. SiLU's tolerance is
// abs_tol times max(1, |x|).
void CheckSigmoidF32(std::mt19937& rng, SigmoidF32Fn fn, float abs_tol) {
  std::uniform_real_distribution<float> value(-20.0f, 20.0f);
  const float inf = std::numeric_limits<float>::infinity();
  const float special[] = {0.0f, -0.0f, 1e-8f, -1e-30f, 30.0f, -30.0f, 88.5f, -88.5f, -88.8f, -100.0f,
                           inf,  -inf, std::nanf("")};
  constexpr int64_t kSpecial = sizeof(special) / sizeof(special[0]);
  for (bool times_x : {false, true}) {
    for (int64_t n : kRowLengths) {
      SCOPED_TRACE("n " + std::to_string(n) + (times_x ? " silu" : " sigmoid"));
      std::vector<float> x(static_cast<size_t>(n)), want(x.size()), got(x.size() + 1, 99.0f);
      for (int64_t i = 0; i < n; ++i) x[i] = i < kSpecial && n >= kSpecial ? special[i] : value(rng);
      for (int64_t i = 0; i < n; ++i) {
        const float s = 1.0f / (1.0f + std::exp(-x[i]));
        want[i] = times_x ? x[i] * s : s;
      }
      fn(x.data(), got.data(), n, times_x);
      for (int64_t i = 0; i < n; ++i) {
        if (std::isnan(want[i]) || std::isinf(want[i]) || abs_tol == 0) {
          if (std::isnan(want[i])) ASSERT_TRUE(std::isnan(got[i])) << "element " << i << " x " << x[i];
          else ASSERT_EQ(Bits(got[i]), Bits(want[i])) << "element " << i << " x " << x[i];
        } else {
          ASSERT_NEAR(got[i], want[i], abs_tol * std::max(1.0f, std::fabs(x[i]))) << "element " << i << " x " << x[i];
        }
      }
      EXPECT_EQ(got[n], 99.0f) << "wrote past n";
    }
  }
}

// Clip as kernels/ref computes it (x < lo ? lo : x, then > hi ? hi : that),
// bit for bit: NaN, signed zeros, infinities, and bounds that are infinite,
// NaN, zero or crossed (lo > hi).
void CheckClipF32(std::mt19937& rng, ClipF32Fn fn) {
  std::uniform_real_distribution<float> value(-8.0f, 8.0f);
  const float inf = std::numeric_limits<float>::infinity(), nan = std::nanf("");
  const float special[] = {0.0f, -0.0f, 6.0f, -6.0f, inf, -inf, nan, 1e-30f};
  const std::pair<float, float> bounds[] = {{0.0f, 6.0f}, {-1.5f, 2.25f}, {-inf, 0.0f}, {0.0f, inf},
                                            {-0.0f, 0.0f}, {nan, 1.0f}, {-1.0f, nan}, {3.0f, -3.0f}};
  for (const auto& [lo, hi] : bounds) {
    for (int64_t n : kRowLengths) {
      SCOPED_TRACE("n " + std::to_string(n) + " lo " + std::to_string(lo) + " hi " + std::to_string(hi));
      std::vector<float> x(static_cast<size_t>(n)), want(x.size()), got(x.size() + 1, 99.0f);
      for (int64_t i = 0; i < n; ++i) x[i] = i < 8 && n >= 8 ? special[i] : value(rng);
      for (int64_t i = 0; i < n; ++i) {
        const float above = x[i] < lo ? lo : x[i];
        want[i] = above > hi ? hi : above;
      }
      fn(x.data(), got.data(), n, lo, hi);
      ExpectFloatRow(std::vector<float>(got.begin(), got.begin() + n), want, 0.0f);
      EXPECT_EQ(got[n], 99.0f) << "wrote past n";
    }
  }
}

// (x * clip(x + offset, lo, hi)) / divisor, each step rounded to float
// (sparq.HardSwishChain), bit for bit, with special values and bounds.
void CheckHardSwishChainF32(std::mt19937& rng, HardSwishChainF32Fn fn) {
  std::uniform_real_distribution<float> value(-9.0f, 9.0f);
  const float inf = std::numeric_limits<float>::infinity(), nan = std::nanf("");
  const float special[] = {0.0f, -0.0f, -3.0f, 3.0f, inf, -inf, nan, 1e-30f};
  const float params[][4] = {{3.0f, 0.0f, 6.0f, 6.0f}, {0.5f, -1.0f, 2.0f, 3.0f}, {3.0f, 0.0f, inf, -2.5f}};
  for (const auto& p : params) {
    for (int64_t n : kRowLengths) {
      SCOPED_TRACE("n " + std::to_string(n) + " offset " + std::to_string(p[0]));
      std::vector<float> x(static_cast<size_t>(n)), want(x.size()), got(x.size() + 1, 99.0f);
      for (int64_t i = 0; i < n; ++i) x[i] = i < 8 && n >= 8 ? special[i] : value(rng);
      for (int64_t i = 0; i < n; ++i) {
        const float t = x[i] + p[0];
        const float above = t < p[1] ? p[1] : t;
        want[i] = (x[i] * (above > p[2] ? p[2] : above)) / p[3];
      }
      fn(x.data(), got.data(), n, p[0], p[1], p[2], p[3]);
      ExpectFloatRow(std::vector<float>(got.begin(), got.begin() + n), want, 0.0f);
      EXPECT_EQ(got[n], 99.0f) << "wrote past n";
    }
  }
}

// (x * (erf(x / d) + a)) * h (sparq.GeluErfChain) against the reference's
// std::erf on random values of [-8, 8] and the special ones, for BERT's
// constants and others: within abs_tol * |h| * max(1, |x|) (0: bit for bit).
void CheckGeluErfChainF32(std::mt19937& rng, GeluErfChainF32Fn fn, float abs_tol) {
  std::uniform_real_distribution<float> value(-8.0f, 8.0f);
  const float inf = std::numeric_limits<float>::infinity();
  const float special[] = {0.0f, -0.0f, 1e-8f, -1e-30f, 10.0f, -10.0f, inf, -inf, std::nanf("")};
  const float params[][3] = {{1.41421356f, 1.0f, 0.5f}, {2.0f, 0.5f, -3.0f}};
  for (const auto& p : params) {
    for (int64_t n : kRowLengths) {
      SCOPED_TRACE("n " + std::to_string(n) + " divisor " + std::to_string(p[0]));
      std::vector<float> x(static_cast<size_t>(n)), want(x.size()), got(x.size() + 1, 99.0f);
      for (int64_t i = 0; i < n; ++i) x[i] = i < 9 && n >= 9 ? special[i] : value(rng);
      for (int64_t i = 0; i < n; ++i) want[i] = (x[i] * (std::erf(x[i] / p[0]) + p[1])) * p[2];
      fn(x.data(), got.data(), n, p[0], p[1], p[2]);
      for (int64_t i = 0; i < n; ++i) {
        if (std::isnan(want[i]) || std::isinf(want[i]) || abs_tol == 0) {
          if (std::isnan(want[i])) ASSERT_TRUE(std::isnan(got[i])) << "element " << i << " x " << x[i];
          else ASSERT_EQ(Bits(got[i]), Bits(want[i])) << "element " << i << " x " << x[i];
        } else {
          ASSERT_NEAR(got[i], want[i], abs_tol * std::fabs(p[2]) * std::max(1.0f, std::fabs(x[i])))
              << "element " << i << " x " << x[i];
        }
      }
      EXPECT_EQ(got[n], 99.0f) << "wrote past n";
    }
  }
}

// x * a + b, the product rounded first (the reference BatchNormalization's
// per-channel affine), bit for bit, with special values; also with y == x.
void CheckScaleShiftF32(std::mt19937& rng, ScaleShiftF32Fn fn) {
  std::uniform_real_distribution<float> value(-8.0f, 8.0f);
  const float inf = std::numeric_limits<float>::infinity();
  const float special[] = {0.0f, -0.0f, inf, -inf, std::nanf(""), 1e-30f, 3e38f, -3e38f};
  for (const auto& [a, b] : {std::pair<float, float>{1.7f, -0.3f}, {0.0f, 2.0f}, {-3.1f, 0.0f}, {1e20f, 1e-20f}}) {
    for (int64_t n : kRowLengths) {
      SCOPED_TRACE("n " + std::to_string(n));
      std::vector<float> x(static_cast<size_t>(n)), want(x.size()), got(x.size() + 1, 99.0f);
      for (int64_t i = 0; i < n; ++i) x[i] = i < 8 && n >= 8 ? special[i] : value(rng);
      for (int64_t i = 0; i < n; ++i) {
        volatile float product = x[i] * a;  // rounded before the sum
        want[i] = product + b;
      }
      fn(x.data(), got.data(), n, a, b);
      ExpectFloatRow(std::vector<float>(got.begin(), got.begin() + n), want, 0.0f);
      EXPECT_EQ(got[n], 99.0f) << "wrote past n";
      std::vector<float> in_place = x;  // y == x: the memory plan writes BatchNormalization over its input
      fn(in_place.data(), in_place.data(), n, a, b);
      ExpectFloatRow(in_place, want, 0.0f);
    }
  }
}

// LayerNorm of rows as kernels/ref/norm.cc computes it: double sums in order,
// double arithmetic per value, one rounding; bit for bit, for row counts
// around the row kernel's group and lengths from 1.
void CheckLayerNormF32(std::mt19937& rng, LayerNormF32Fn fn) {
  std::uniform_real_distribution<float> value(-3.0f, 5.0f);
  for (int64_t rows : {1, 3, 4, 5, 9, 16, 25, 40}) {  // the AVX-512 row: blocks of 16 and 8 rows, then the rest
    for (int64_t n : {1, 7, 64, 385}) {
      SCOPED_TRACE("rows " + std::to_string(rows) + " n " + std::to_string(n));
      std::vector<float> x(static_cast<size_t>(rows * n)), want(x.size()), got(x.size() + 1, 99.0f);
      for (float& v : x) v = value(rng);
      x[0] = 1e6f;
      std::vector<double> scale(static_cast<size_t>(n)), bias(static_cast<size_t>(n));
      for (int64_t j = 0; j < n; ++j) scale[j] = value(rng), bias[j] = value(rng);
      const double eps = 1e-5f;
      for (int64_t r = 0; r < rows; ++r) {
        const float* p = x.data() + r * n;
        double s = 0.0, q = 0.0;
        for (int64_t i = 0; i < n; ++i) s += static_cast<double>(p[i]);
        const double m = s / static_cast<double>(n);
        for (int64_t i = 0; i < n; ++i) {
          volatile double d = static_cast<double>(p[i]) - m;
          volatile double dd = d * d;
          q += dd;
        }
        const double inv = 1.0 / std::sqrt(q / static_cast<double>(n) + eps);
        for (int64_t i = 0; i < n; ++i) {
          volatile double t = (static_cast<double>(p[i]) - m) * inv * scale[i];
          want[r * n + i] = static_cast<float>(t + bias[i]);
        }
      }
      fn(x.data(), rows, n, scale.data(), bias.data(), eps, got.data());
      ExpectFloatRow(std::vector<float>(got.begin(), got.begin() + rows * n), want, 0.0f);
      EXPECT_EQ(got[rows * n], 99.0f) << "wrote past the rows";
    }
  }
}

// sparq.LayerNormChain's rows against its unfused nodes computed one float
// operation at a time (ReduceMean as an in-order double sum over n, rounded
// to float): bit for bit, for row counts around the AVX-512 row's block of 8,
// lengths from 1 (masked tails of 16, sums' tails of 8), with and without beta.
void CheckLayerNormChainF32(std::mt19937& rng, LayerNormChainF32Fn fn) {
  std::uniform_real_distribution<float> value(-3.0f, 5.0f);
  for (int64_t rows : {1, 7, 8, 9, 16, 21}) {
    for (int64_t n : {1, 7, 17, 64, 385}) {
      for (bool with_beta : {true, false}) {
        SCOPED_TRACE("rows " + std::to_string(rows) + " n " + std::to_string(n) + (with_beta ? " beta" : ""));
        std::vector<float> x(static_cast<size_t>(rows * n)), want(x.size()), got(x.size() + 1, 99.0f);
        for (float& v : x) v = value(rng);
        x[0] = 1e4f;  // a row whose mean is far from most of its values
        std::vector<float> gamma(static_cast<size_t>(n)), beta(static_cast<size_t>(n));
        for (int64_t j = 0; j < n; ++j) gamma[j] = value(rng), beta[j] = value(rng);
        const float eps = 1e-5f;
        for (int64_t r = 0; r < rows; ++r) {
          const float* p = x.data() + r * n;
          double s = 0.0, q = 0.0;
          for (int64_t i = 0; i < n; ++i) s += static_cast<double>(p[i]);
          const float mean = static_cast<float>(s / static_cast<double>(n));
          std::vector<float> d(static_cast<size_t>(n));
          for (int64_t i = 0; i < n; ++i) {
            volatile float di = p[i] - mean;
            volatile float sq = di * di;
            d[i] = di;
            q += static_cast<double>(sq);
          }
          volatile float var = static_cast<float>(q / static_cast<double>(n));
          volatile float var_eps = var + eps;
          const float sd = std::sqrt(static_cast<float>(var_eps));
          for (int64_t i = 0; i < n; ++i) {
            volatile float t = d[i] / sd;
            volatile float u = t * gamma[i];
            want[r * n + i] = with_beta ? u + beta[i] : u;
          }
        }
        fn(x.data(), rows, n, eps, gamma.data(), with_beta ? beta.data() : nullptr, got.data());
        ExpectFloatRow(std::vector<float>(got.begin(), got.begin() + rows * n), want, 0.0f);
        EXPECT_EQ(got[rows * n], 99.0f) << "wrote past the rows";
      }
    }
  }
}

// A ConvTranspose with stride = kernel against ConvTransposeF32Ref, bit for
// bit: kernels 1x1, 2x2 and 3x2, positions across the row's block of 256, a
// bias or none, and an output-channel range in the middle (the rest of y is
// left as it was).
void CheckConvTransposeF32(std::mt19937& rng, ConvTransposeF32Fn fn) {
  std::uniform_real_distribution<float> value(-2.0f, 2.0f);
  struct Case {
    int64_t c, m, h, w, kh, kw;
  };
  for (const Case& k : {Case{3, 4, 5, 7, 2, 2}, Case{16, 5, 17, 19, 2, 2}, Case{2, 3, 4, 3, 3, 2}, Case{5, 2, 9, 1, 1, 1}}) {
    for (bool with_bias : {true, false}) {
      SCOPED_TRACE("c " + std::to_string(k.c) + " m " + std::to_string(k.m) + " " + std::to_string(k.h) + "x" +
                   std::to_string(k.w) + " kernel " + std::to_string(k.kh) + "x" + std::to_string(k.kw));
      std::vector<float> x(static_cast<size_t>(k.c * k.h * k.w)), w(static_cast<size_t>(k.c * k.m * k.kh * k.kw));
      std::vector<float> bias(static_cast<size_t>(k.m));
      for (float& v : x) v = value(rng);
      for (float& v : w) v = value(rng);
      for (float& v : bias) v = value(rng);
      x[0] = -0.0f;
      ConvParams p;
      const Shape xs = {1, k.c, k.h, k.w}, ws = {k.c, k.m, k.kh, k.kw};
      p.window.kernel = {k.kh, k.kw};
      p.window.strides = {k.kh, k.kw};
      Shape ys;
      ASSERT_TRUE(PrepareConvTranspose(xs, ws, AutoPad::kNotSet, {}, {}, &p, &ys).ok());
      std::vector<float> want(static_cast<size_t>(k.m * ys[2] * ys[3]));
      ConvTransposeF32Ref(p, xs, x.data(), ws, w.data(), with_bias ? bias.data() : nullptr, ys, want.data(), nullptr);
      std::vector<float> got(want.size() + 1, 99.0f);
      ConvTransposeF32Args a;
      a.x = x.data(), a.w = w.data(), a.bias = with_bias ? bias.data() : nullptr, a.y = got.data();
      a.channels = k.c, a.out_channels = k.m, a.height = k.h, a.width = k.w, a.kernel_h = k.kh, a.kernel_w = k.kw;
      a.m_begin = 1, a.m_end = k.m;  // channel 0 untouched
      fn(a);
      const size_t plane = want.size() / static_cast<size_t>(k.m);
      for (size_t i = 0; i < plane; ++i) ASSERT_EQ(got[i], 99.0f) << "wrote outside [m_begin, m_end)";
      ExpectFloatRow(std::vector<float>(got.begin() + plane, got.end() - 1),
                     std::vector<float>(want.begin() + plane, want.end()), 0.0f);
      a.m_begin = 0, a.m_end = 1;
      fn(a);
      ExpectFloatRow(std::vector<float>(got.begin(), got.end() - 1), want, 0.0f);
      EXPECT_EQ(got.back(), 99.0f) << "wrote past y";
    }
  }
  // Windowed: one input channel, overlapping windows, pads, dilations, output
  // padding (DeepFilterNet3's ERB decoder: 1 x 3 at stride 1 x 2, pads 1 on
  // the width, output padding 1), zero and negative-zero inputs and weights.
  struct Windowed {
    int64_t m, h, w, kh, kw, sh, sw, dh, dw, pt, pl, pb, pr, oph, opw;
  };
  for (const Windowed& k : {Windowed{1, 6, 8, 1, 3, 1, 2, 1, 1, 0, 1, 0, 1, 0, 1},
                            Windowed{3, 4, 5, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 1, 1},
                            Windowed{2, 3, 6, 2, 3, 1, 3, 2, 1, 1, 0, 0, 2, 0, 0},
                            Windowed{1, 5, 7, 3, 2, 1, 1, 1, 3, 2, 0, 2, 3, 0, 0}}) {
    for (bool with_bias : {true, false}) {
      SCOPED_TRACE("windowed m " + std::to_string(k.m) + " " + std::to_string(k.h) + "x" + std::to_string(k.w) +
                   " kernel " + std::to_string(k.kh) + "x" + std::to_string(k.kw) + " stride " + std::to_string(k.sh) +
                   "x" + std::to_string(k.sw));
      std::vector<float> x(static_cast<size_t>(k.h * k.w)), w(static_cast<size_t>(k.m * k.kh * k.kw));
      std::vector<float> bias(static_cast<size_t>(k.m));
      for (float& v : x) v = value(rng);
      for (float& v : w) v = value(rng);
      for (float& v : bias) v = value(rng);
      x[0] = -0.0f, x[1] = 0.0f, w[0] = -0.0f;
      ConvParams p;
      const Shape xs = {1, 1, k.h, k.w}, ws = {1, k.m, k.kh, k.kw};
      p.window.kernel = {k.kh, k.kw};
      p.window.strides = {k.sh, k.sw};
      p.window.dilations = {k.dh, k.dw};
      p.window.pads = {k.pt, k.pl, k.pb, k.pr};
      Shape ys;
      ASSERT_TRUE(PrepareConvTranspose(xs, ws, AutoPad::kNotSet, {k.oph, k.opw}, {}, &p, &ys).ok());
      std::vector<float> want(static_cast<size_t>(k.m * ys[2] * ys[3]));
      ConvTransposeF32Ref(p, xs, x.data(), ws, w.data(), with_bias ? bias.data() : nullptr, ys, want.data(), nullptr);
      std::vector<float> got(want.size() + 1, 99.0f);
      ConvTransposeF32Args a;
      a.x = x.data(), a.w = w.data(), a.bias = with_bias ? bias.data() : nullptr, a.y = got.data();
      a.channels = 1, a.out_channels = k.m, a.height = k.h, a.width = k.w, a.kernel_h = k.kh, a.kernel_w = k.kw;
      a.windowed = true;
      a.stride_h = k.sh, a.stride_w = k.sw, a.dilation_h = k.dh, a.dilation_w = k.dw, a.pad_top = k.pt, a.pad_left = k.pl;
      a.out_h = ys[2], a.out_w = ys[3];
      a.m_begin = 0, a.m_end = k.m;
      fn(a);
      ExpectFloatRow(std::vector<float>(got.begin(), got.end() - 1), want, 0.0f);  // the reference's bits
      EXPECT_EQ(got.back(), 99.0f) << "wrote past y";
    }
  }
}

// Nearest upsampling by whole factors: y[p, i, j] = x[p, i / sh, j / sw],
// the same bytes, for each element size.
void CheckResizeNearest(std::mt19937& rng, ResizeNearestFn fn) {
  for (size_t elem : {1, 2, 4, 8}) {
    for (const auto& [sh, sw, w] : {std::tuple<int64_t, int64_t, int64_t>{2, 2, 7}, {2, 2, 37}, {1, 2, 70}, {1, 3, 7},
                                     {3, 1, 7}, {1, 1, 7}}) {  // wide rows: the vectorized 2x repeat
      const int64_t planes = 3, h = 5;
      SCOPED_TRACE("elem " + std::to_string(elem) + " scales " + std::to_string(sh) + "x" + std::to_string(sw) +
                   " width " + std::to_string(w));
      const std::vector<uint8_t> x = RandomBytes(rng, planes * h * w * static_cast<int64_t>(elem));
      const size_t out = static_cast<size_t>(planes * h * sh * w * sw) * elem;
      std::vector<uint8_t> got(out + 1, 0xab), want(out);
      for (int64_t p = 0; p < planes; ++p)
        for (int64_t i = 0; i < h * sh; ++i)
          for (int64_t j = 0; j < w * sw; ++j)
            std::memcpy(&want[static_cast<size_t>((p * h * sh + i) * w * sw + j) * elem],
                        &x[static_cast<size_t>((p * h + i / sh) * w + j / sw) * elem], elem);
      ResizeNearestArgs a;
      a.x = x.data(), a.y = got.data(), a.planes = planes, a.height = h, a.width = w, a.scale_h = sh, a.scale_w = sw;
      a.elem_size = elem;
      fn(a);
      ASSERT_EQ(std::memcmp(got.data(), want.data(), out), 0);
      EXPECT_EQ(got[out], 0xab) << "wrote past y";
    }
  }
}

// Softmax of one row as kernels/ref/softmax.cc computes it (inner = 1):
// float exp of x - max, double sums.
void CheckSoftmaxF32(std::mt19937& rng, SoftmaxF32Fn fn, float abs_tol) {
  std::uniform_real_distribution<float> value(-20.0f, 20.0f);
  for (int64_t n : {int64_t{0}, int64_t{1}, int64_t{7}, int64_t{8}, int64_t{9}, int64_t{64}, int64_t{257},
                    int64_t{1000}}) {
    SCOPED_TRACE("n " + std::to_string(n));
    std::vector<float> x(static_cast<size_t>(n)), want(x.size()), got(x.size() + 1, 99.0f);
    for (float& v : x) v = value(rng);
    if (n > 0) {
      float max_v = x[0];
      for (float v : x) max_v = v > max_v ? v : max_v;
      double sum = 0.0;
      for (int64_t i = 0; i < n; ++i) {
        want[i] = std::exp(x[i] - max_v);
        sum += static_cast<double>(want[i]);
      }
      for (float& v : want) v = static_cast<float>(static_cast<double>(v) / sum);
    }
    fn(x.data(), got.data(), n);
    ExpectFloatRow(got, want, abs_tol);
    EXPECT_EQ(got[n], 99.0f) << "wrote past n";
  }
}

// Softmax of columns side by side (kernels/ref/softmax.cc's blocks: float
// exp, double sums) for several axis lengths, strides and widths (full and
// partial vectors); y between the columns is left as it was.
void CheckSoftmaxColumnsF32(std::mt19937& rng, SoftmaxColumnsF32Fn fn, float abs_tol) {
  std::uniform_real_distribution<float> value(-20.0f, 20.0f);
  for (int64_t n : {1, 2, 16, 33}) {
    for (int64_t width : {1, 15, 16, 40}) {
      const int64_t stride = width + 3;
      SCOPED_TRACE("n " + std::to_string(n) + " width " + std::to_string(width));
      std::vector<float> x(static_cast<size_t>(n * stride)), want(x.size(), 99.0f), got(x.size(), 99.0f);
      for (float& v : x) v = value(rng);
      for (int64_t c = 0; c < width; ++c) {
        float max_v = x[c];
        for (int64_t k = 1; k < n; ++k) max_v = x[c + k * stride] > max_v ? x[c + k * stride] : max_v;
        double sum = 0.0;
        for (int64_t k = 0; k < n; ++k) {
          want[c + k * stride] = std::exp(x[c + k * stride] - max_v);
          sum += static_cast<double>(want[c + k * stride]);
        }
        for (int64_t k = 0; k < n; ++k)
          want[c + k * stride] = static_cast<float>(static_cast<double>(want[c + k * stride]) / sum);
      }
      fn(x.data(), got.data(), n, stride, width);
      ExpectFloatRow(got, want, abs_tol);
    }
  }
}

// One head of attention against the same math in double: shapes with full
// and partial vectors and row groups, Mul or Div by the scale, a mask per row,
// one mask row, one mask value, or none, Q, V and y rows 3 floats apart more
// than their length; within kAttentionF32RelTol * max(1, max |V|) (the
// outputs are convex combinations of V's rows).
void CheckAttentionF32(std::mt19937& rng, AttentionF32Fn fn) {
  std::uniform_real_distribution<float> value(-2.0f, 2.0f);
  struct Case {
    int64_t m, n, d, dv;
    bool divide;
    int mask;  // 0 none, 1 per row, 2 one row, 3 one value
  };
  const Case cases[] = {{64, 64, 32, 32, false, 2}, {5, 17, 8, 33, true, 1}, {9, 3, 1, 16, false, 0},
                        {1, 40, 20, 7, true, 3},    {7, 1, 4, 4, false, 1}};
  for (const Case& c : cases) {
    SCOPED_TRACE("m " + std::to_string(c.m) + " n " + std::to_string(c.n) + " mask " + std::to_string(c.mask));
    const int64_t q_ld = c.d + 3, v_ld = c.dv + 3, y_ld = c.dv + 3;
    std::vector<float> q(c.m * q_ld), kt(c.d * c.n), v(c.n * v_ld), mask(c.m * c.n), y(c.m * y_ld + 1, 99.0f);
    for (std::vector<float>* t : {&q, &kt, &v, &mask}) for (float& x : *t) x = value(rng);
    // Some masked-out positions (not with one value for all: -1e4 on every
    // score would cost float scores their low bits).
    if (c.mask != 3) for (float& x : mask) x = x < -1.5f ? -1e4f : x;
    std::vector<float> scratch(4 * c.n);
    AttentionF32Args a;
    a.m = c.m, a.n = c.n, a.d = c.d, a.dv = c.dv;
    a.q_ld = q_ld, a.v_ld = v_ld, a.y_ld = y_ld;
    a.q = q.data(), a.kt = kt.data(), a.v = v.data(), a.y = y.data();
    a.scale = c.divide ? 5.0f : 0.125f;
    a.divide = c.divide;
    a.mask = c.mask == 0 ? nullptr : mask.data();
    a.mask_row_stride = c.mask == 1 ? c.n : 0;
    a.mask_col_stride = c.mask == 3 ? 0 : 1;
    a.scratch = scratch.data();
    fn(a);
    float peak = 1.0f;
    for (float x : v) peak = std::max(peak, std::fabs(x));
    for (int64_t i = 0; i < c.m; ++i) {
      std::vector<double> s(c.n);
      double max_s = -1e300, sum = 0.0;
      for (int64_t j = 0; j < c.n; ++j) {
        double acc = 0.0;
        for (int64_t t = 0; t < c.d; ++t) acc += double{q[i * q_ld + t]} * kt[t * c.n + j];
        s[j] = c.divide ? acc / a.scale : acc * a.scale;
        if (a.mask != nullptr) s[j] += mask[i * a.mask_row_stride + j * a.mask_col_stride];
        max_s = std::max(max_s, s[j]);
      }
      for (double& x : s) sum += (x = std::exp(x - max_s));
      for (int64_t col = 0; col < c.dv; ++col) {
        double want = 0.0;
        for (int64_t j = 0; j < c.n; ++j) want += s[j] / sum * v[j * v_ld + col];
        ASSERT_NEAR(y[i * y_ld + col], want, cpu::kAttentionF32RelTol * peak) << "row " << i << " column " << col;
      }
      for (int64_t col = c.dv; col < y_ld; ++col) ASSERT_EQ(y[i * y_ld + col], 99.0f) << "wrote between rows";
    }
    EXPECT_EQ(y[c.m * y_ld], 99.0f) << "wrote past y";
  }
}

// Pow(x, 2) as the reference computes it (in double, rounded once), including
// overflow to infinity.
void CheckPow2F32(std::mt19937& rng, Pow2F32Fn fn) {
  std::uniform_real_distribution<float> value(-1e20f, 1e20f);
  for (int64_t n : kRowLengths) {
    SCOPED_TRACE("n " + std::to_string(n));
    std::vector<float> x(static_cast<size_t>(n)), want(x.size()), got(x.size() + 1, 99.0f);
    for (float& v : x) v = value(rng);
    if (n > 0) x[0] = 3e30f;
    for (int64_t i = 0; i < n; ++i) want[i] = static_cast<float>(std::pow(static_cast<double>(x[i]), 2.0));
    fn(x.data(), got.data(), n);
    ExpectFloatRow(got, want, 0.0f);
    EXPECT_EQ(got[n], 99.0f) << "wrote past n";
  }
}

// float16 -> float32: every one of the 65536 halves, then every tail length
// (nothing written beyond n); bit for bit the reference's HalfToFloat.
void CheckConvertF16F32(ConvertF16F32Fn fn) {
  std::vector<uint16_t> halves(65536);
  for (uint32_t i = 0; i < 65536; ++i) halves[i] = static_cast<uint16_t>(i);
  std::vector<float> out(halves.size());
  fn(halves.data(), out.data(), static_cast<int64_t>(halves.size()));
  for (uint32_t i = 0; i < 65536; ++i) {
    const float want = HalfToFloat(halves[i]);
    if (std::isnan(want)) {
      ASSERT_TRUE(std::isnan(out[i])) << "half 0x" << std::hex << i;
    } else {
      ASSERT_EQ(Bits(out[i]), Bits(want)) << "half 0x" << std::hex << i;
    }
  }
  for (int64_t n : kRowLengths) {
    std::vector<float> got(static_cast<size_t>(n) + 1, -7.0f);
    fn(halves.data() + 0x1000, got.data(), n);
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(Bits(got[i]), Bits(HalfToFloat(halves[0x1000 + i]))) << "n " << n;
    EXPECT_EQ(got[n], -7.0f) << "n " << n << ": wrote past n";
  }
}

// The float classes a float16 conversion must get right: every `half_step`-th
// finite half value, the midpoints to its neighbour (ties to even) and one ulp
// either side, both signs; overflow, subnormals, NaN; and `random` random
// finite floats.
std::vector<float> HalfConversionCases(std::mt19937& rng, uint32_t half_step, int random) {
  std::vector<float> floats;
  for (uint32_t h = 0; h < 0x7c00; h += half_step) {
    const float a = HalfToFloat(static_cast<uint16_t>(h)), b = HalfToFloat(static_cast<uint16_t>(h + 1));
    const float mid = a + (b - a) / 2;
    for (float f : {a, mid, std::nextafter(mid, 0.0f), std::nextafter(mid, 1e9f)}) {
      floats.push_back(f);
      floats.push_back(-f);
    }
  }
  for (float f : {65504.0f, 65519.0f, 65520.0f, 1e10f, std::numeric_limits<float>::infinity(),
                  std::numeric_limits<float>::denorm_min(), 1e-30f})
    for (float s : {f, -f}) floats.push_back(s);
  for (int i = 0; i < 9; ++i) floats.push_back(std::nanf(""));
  for (int i = 0; i < random; ++i) {
    float f;
    const uint32_t bits = static_cast<uint32_t>(rng()) & 0x7f7fffffu;
    std::memcpy(&f, &bits, 4);
    floats.push_back((i & 1) ? -f : f);
  }
  return floats;
}

// float32 -> float16: every half value, the midpoints between neighbours
// (ties to even) and one ulp either side, overflow, subnormals, NaN and random
// floats, at every tail length; bit for bit the reference's FloatToHalf.
void CheckConvertF32F16(std::mt19937& rng, ConvertF32F16Fn fn) {
  const std::vector<float> floats = HalfConversionCases(rng, /*half_step=*/1, /*random=*/100000);
  std::vector<uint16_t> out(floats.size());
  fn(floats.data(), out.data(), static_cast<int64_t>(floats.size()));
  for (size_t i = 0; i < floats.size(); ++i) {
    if (std::isnan(floats[i])) {
      ASSERT_TRUE(std::isnan(HalfToFloat(out[i]))) << "NaN became 0x" << std::hex << out[i];
    } else {
      ASSERT_EQ(out[i], FloatToHalf(floats[i])) << "float " << floats[i] << " (0x" << std::hex << Bits(floats[i])
                                                << ")";
    }
  }
  for (int64_t n : kRowLengths) {
    std::vector<uint16_t> got(static_cast<size_t>(n) + 1, 0xabcd);
    fn(floats.data() + 1000, got.data(), n);
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(got[i], FloatToHalf(floats[1000 + i])) << "n " << n;
    EXPECT_EQ(got[n], 0xabcd) << "n " << n << ": wrote past n";
  }
}

// float32 -> float16 -> float32 (sparq.RoundToFloat16): the same float
// classes as CheckConvertF32F16, bit for bit the reference's
// HalfToFloat(FloatToHalf(x)), at every tail length, and in place.
void CheckRoundF16F32(std::mt19937& rng, RoundF16F32Fn fn) {
  const std::vector<float> floats = HalfConversionCases(rng, /*half_step=*/3, /*random=*/50000);
  auto want = [](float f) { return HalfToFloat(FloatToHalf(f)); };
  std::vector<float> out(floats.size());
  fn(floats.data(), out.data(), static_cast<int64_t>(floats.size()));
  for (size_t i = 0; i < floats.size(); ++i) {
    if (std::isnan(floats[i])) {
      ASSERT_TRUE(std::isnan(out[i])) << "NaN became " << out[i];
    } else {
      ASSERT_EQ(Bits(out[i]), Bits(want(floats[i]))) << "float " << floats[i] << " (0x" << std::hex
                                                    << Bits(floats[i]) << ")";
    }
  }
  for (int64_t n : kRowLengths) {
    std::vector<float> got(static_cast<size_t>(n) + 1, -7.0f);
    fn(floats.data() + 1000, got.data(), n);
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(Bits(got[i]), Bits(want(floats[1000 + i]))) << "n " << n;
    EXPECT_EQ(got[n], -7.0f) << "n " << n << ": wrote past n";
    std::vector<float> same(floats.begin() + 1000, floats.begin() + 1000 + n);
    fn(same.data(), same.data(), n);
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(Bits(same[i]), Bits(want(floats[1000 + i]))) << "in place, n " << n;
  }
}

}  // namespace

bool CheckRowKernel(std::mt19937& rng, const CpuKernelDef& def) {
  SCOPED_TRACE(def.name);
  switch (def.op()) {
    case CpuOp::kDepthwiseF32: CheckDepthwiseF32(rng, def.get<DepthwiseF32Fn>()); return true;
    case CpuOp::kPointwiseDepthwiseF32: CheckPointwiseDepthwiseF32(rng, def.get<PointwiseDepthwiseF32Fn>()); return true;
    case CpuOp::kDepthwiseS8: CheckDepthwiseS8(rng, def.get<DepthwiseS8Fn>()); return true;
    case CpuOp::kRequantS32: CheckRequantS32(rng, def.get<RequantS32Fn>()); return true;
    case CpuOp::kLut256: CheckLut256(rng, def.get<Lut256Fn>()); return true;
    case CpuOp::kQuantizeF32: CheckQuantizeF32(rng, def.get<QuantizeF32Fn>()); return true;
    case CpuOp::kDequantizeS8: CheckDequantizeS8(rng, def.get<DequantizeS8Fn>()); return true;
    case CpuOp::kQLinearAddS8: CheckQLinearBinaryS8<false>(rng, def.get<QLinearAddS8Fn>()); return true;
    case CpuOp::kQLinearMulS8: CheckQLinearBinaryS8<true>(rng, def.get<QLinearMulS8Fn>()); return true;
    case CpuOp::kMeanRowsF32: CheckMeanRowsF32(rng, def.get<MeanRowsF32Fn>()); return true;
    case CpuOp::kMaxRowsF32: CheckMaxRowsF32(rng, def.get<MaxRowsF32Fn>()); return true;
    case CpuOp::kTanhF32:
      CheckTanhF32(rng, def.get<TanhF32Fn>(), def.isa == CpuIsa::kPortable ? 0.0f : cpu::kTanhF32AbsTol);
      return true;
    case CpuOp::kMaxPool2d: CheckMaxPool2d(rng, def.get<MaxPool2dFn>()); return true;
    // The portable Erf and Softmax rows are the reference's computation: exact.
    case CpuOp::kErfF32:
      CheckErfF32(rng, def.get<ErfF32Fn>(), def.isa == CpuIsa::kPortable ? 0.0f : cpu::kErfF32AbsTol);
      return true;
    case CpuOp::kSoftmaxF32:
      CheckSoftmaxF32(rng, def.get<SoftmaxF32Fn>(), def.isa == CpuIsa::kPortable ? 0.0f : cpu::kSoftmaxF32AbsTol);
      return true;
    case CpuOp::kSoftmaxColumnsF32:
      CheckSoftmaxColumnsF32(rng, def.get<SoftmaxColumnsF32Fn>(),
                             def.isa == CpuIsa::kPortable ? 0.0f : cpu::kSoftmaxF32AbsTol);
      return true;
    case CpuOp::kPow2F32: CheckPow2F32(rng, def.get<Pow2F32Fn>()); return true;
    case CpuOp::kAttentionF32: CheckAttentionF32(rng, def.get<AttentionF32Fn>()); return true;
    case CpuOp::kClipF32: CheckClipF32(rng, def.get<ClipF32Fn>()); return true;
    case CpuOp::kHardSwishChainF32: CheckHardSwishChainF32(rng, def.get<HardSwishChainF32Fn>()); return true;
    case CpuOp::kGeluErfChainF32:
      CheckGeluErfChainF32(rng, def.get<GeluErfChainF32Fn>(), def.isa == CpuIsa::kPortable ? 0.0f : cpu::kErfF32AbsTol);
      return true;
    case CpuOp::kScaleShiftF32: CheckScaleShiftF32(rng, def.get<ScaleShiftF32Fn>()); return true;
    case CpuOp::kLayerNormF32: CheckLayerNormF32(rng, def.get<LayerNormF32Fn>()); return true;
    case CpuOp::kLayerNormChainF32: CheckLayerNormChainF32(rng, def.get<LayerNormChainF32Fn>()); return true;
    case CpuOp::kConvTransposeF32: CheckConvTransposeF32(rng, def.get<ConvTransposeF32Fn>()); return true;
    case CpuOp::kResizeNearest: CheckResizeNearest(rng, def.get<ResizeNearestFn>()); return true;
    case CpuOp::kSigmoidF32:
      CheckSigmoidF32(rng, def.get<SigmoidF32Fn>(), def.isa == CpuIsa::kPortable ? 0.0f : cpu::kSigmoidF32AbsTol);
      return true;
    case CpuOp::kConvertF16F32: CheckConvertF16F32(def.get<ConvertF16F32Fn>()); return true;
    case CpuOp::kConvertF32F16: CheckConvertF32F16(rng, def.get<ConvertF32F16Fn>()); return true;
    case CpuOp::kRoundF16F32: CheckRoundF16F32(rng, def.get<RoundF16F32Fn>()); return true;
    case CpuOp::kMinMaxF32: CheckMinMaxF32(rng, def.get<MinMaxF32Fn>()); return true;
    case CpuOp::kAbsHistogramF32: CheckAbsHistogramF32(rng, def.get<AbsHistogramF32Fn>()); return true;
    case CpuOp::kXLogYSumF64:
      CheckXLogYSumF64(rng, def.get<XLogYSumF64Fn>(), def.isa == CpuIsa::kPortable);
      return true;
    case CpuOp::kBinaryF32: CheckBinaryF32(rng, def.get<BinaryF32Fn>()); return true;
    case CpuOp::kMatMulNBitsF32: return CheckMatMulNBitsRow(rng, def);
    default: return false;  // ops with packed weights: cpu_kernels_test.cc
  }
}

namespace {

// Each ISA of this CPU forced in turn: the row each of these ops selects
// matches the reference, and it is the highest-priority row at or below it.
TEST(CpuRowKernels, SelectedRowMatchesTheReferenceOnEveryIsa) {
  std::mt19937 rng(611);
  ForEachIsa([&](CpuIsa isa) {
    for (int op = 0; op < static_cast<int>(CpuOp::kNumCpuOps); ++op) {
      const CpuKernelDef* def = SelectCpuKernel(static_cast<CpuOp>(op), kNoPackedFormat);
      if (def == nullptr) continue;  // an op with packed weights
      EXPECT_LE(def->isa, isa) << def->name;
      for (const CpuKernelDef& other : CpuKernelTable()) {
        if (other.op() == def->op() && other.format == def->format && other.isa <= isa) {
          EXPECT_LE(other.priority, def->priority) << other.name << " outranks " << def->name;
        }
      }
      EXPECT_TRUE(CheckRowKernel(rng, *def));
    }
  });
}

}  // namespace
}  // namespace testing
}  // namespace sparq
