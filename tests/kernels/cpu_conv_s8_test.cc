// The conv_s8 rows (kernels/cpu/conv_s8*.cc): the NCHW INT8 convolution with
// the requantization and table in the tile, bit for bit a direct evaluation
// of the spec (kernel_args.h, ConvS8Args) with RequantizeS32Ref, on every
// ISA of this CPU, both weight formats, 1 to 3 threads, and geometries that
// hit every tail (K not a multiple of the step, P not a multiple of 16 or 32,
// M not a multiple of 8 or 16, several tasks per image).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "kernels/cpu/dispatch.h"
#include "kernels/packed_formats.h"
#include "kernels/parallel.h"
#include "kernels/ref/quantize.h"
#include "tests/kernels/cpu_row_kernels.h"
#include "tests/kernels/isa_sweep.h"

namespace sparq {
namespace {

struct ConvS8Case {
  const char* name;
  int64_t batch, c, h, w, m, kh, kw, sh, sw, dh, dw, pt, pl, pb, pr;
  bool x_signed, y_signed, bias, table;
  bool w_zp = false;  // per-channel weight zero points (panel16x2_s16 only)
  bool nonfinite = false;  // channels 0-2 with multipliers inf, NaN, -inf (NaN products give the zero point)
  // Multipliers set to `multiplier` (alternating signs by channel) instead of
  // spreading the outputs: near 1, most products saturate, beyond int16 too
  // (the narrowing of multipliers below 1); from 1 up, the clamping path.
  float multiplier = 0.0f;
};

const std::vector<ConvS8Case>& Cases() {
  static const std::vector<ConvS8Case> cases = {
      // name                                   n   c   h   w   m kh kw sh sw dh dw pt pl pb pr  x_s    y_s    bias   table
      {"1x1 direct, K tail, P tail, table",     1, 33,  5,  7, 19, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, false, false, true,  true},
      {"1x1 direct s8, P = 16 blocks",          1, 64, 16, 16, 40, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, true,  true,  false, false},
      {"3x3 stride 2 pad 1, batch 2",           2,  5, 11,  9, 17, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, false, true,  true,  false},
      {"3x3 dilation 2, asymmetric pads, s8",   1,  7, 10, 13,  8, 3, 3, 1, 1, 2, 2, 2, 0, 1, 3, true,  false, true,  true},
      {"1x1 stride 2 (unfolded)",               1, 24,  9,  9, 24, 1, 1, 2, 2, 1, 1, 0, 0, 0, 0, true,  true,  true,  false},
      {"1x1, K = 600",                          1, 600, 4,  5,  9, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, false, false, true,  false},
      {"1x1, K = 800 (K slices), 400 positions", 1, 800, 20, 20, 10, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, false, true, true,  false},
      {"3x3, K = 1323 (K slices)",              1, 147, 6,  9, 70, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, true,  false, true,  true},
      {"1x1, 2 x 7 tasks",                      1,  8, 40, 40, 72, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, false, false, true,  true},
      {"3x3 stride 2 stem, 3 channels",         1,  3, 23, 21, 32, 3, 3, 2, 2, 1, 1, 0, 0, 1, 1, false, true,  true,  false},
      {"5x3 stride (1, 2), w zero points",      1,  6,  8, 12, 13, 5, 3, 1, 2, 1, 1, 2, 1, 2, 1, true,  false, true,  false, true},
      {"3x3 same (pad 1), batch 2",             2,  9, 12, 17, 21, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, false, false, true,  false},
      {"5x3 same, dilation 2, uneven pads, s8", 1,  4,  9,  6, 10, 5, 3, 1, 1, 2, 1, 4, 0, 4, 2, true,  true,  true,  false},
      {"3x3 same on 2x2 (taps off the plane)",  1,  5,  2,  2,  9, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, false, true,  true,  false},
      {"7x7 stride 2 pad 3, wide rows",         1,  3, 12, 75, 16, 7, 7, 2, 2, 1, 1, 3, 3, 3, 2, true,  false, true,  false},
      {"1x1, non-finite multipliers",           1,  5,  6,  6, 11, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, false, true,  false, false, false, true},
      // Last blocks of 1..4 positions (7x7, 14x14 planes) go position by position on the VNNI row.
      {"1x1 7x7, K = 1152 (K slices), 40 ch",   1, 1152, 7, 7, 40, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, false, false, true,  true},
      {"1x1 14x14 s8, 24 channels",             1, 72, 14, 14, 24, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, true,  true,  true,  false},
      {"3x3 on 2x2: one block of 4 positions",  1, 10,  2,  2, 37, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, false, true,  false, false},
      {"1x1, 17 positions",                     1, 12,  1, 17, 20, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, true,  false, true,  false},
      // Position tasks that unfold their own positions (runs that start and end inside output rows):
      {"3x39 same, 8 -> 8 (basic-pitch), K slices", 1, 8, 9, 70,  8, 3, 39, 1, 1, 1, 1, 1, 19, 1, 19, false, false, true, true},
      {"5x5 stride (1, 3), 8 -> 32",            2,  8, 11, 100, 32, 5, 5, 1, 3, 1, 1, 2, 1, 2, 1, true,  false, true,  false},
      {"5x5 same, one output channel",          1,  8, 10, 40,  1, 5, 5, 1, 1, 1, 1, 2, 2, 2, 2, false, true,  true,  false},
      {"7x3 same, 32 -> 1",                     1, 32,  9, 50,  1, 7, 3, 1, 1, 1, 1, 3, 1, 3, 1, true,  false, false, false},
      {"3x3 stride 2 pad 1, 525 positions",     1,  4, 30, 70,  9, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, false, false, true,  false},
      {"3x3 stride 2, no padding, wide, s8",    1,  3, 11, 121, 12, 3, 3, 2, 2, 1, 1, 0, 0, 0, 0, true,  true,  true,  false, true},
      {"7x5 same, 32 -> 1, K slices",           1, 32,  9, 40,  1, 7, 5, 1, 1, 1, 1, 3, 2, 3, 2, false, false, true,  false},
      {"3x3, 96 -> 1, K slices, few positions", 1, 96,  7,  9,  1, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, true,  true,  true,  false},
      {"3x3, 5 -> 1, 17 positions (one block)", 2,  5,  1, 17,  1, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, false, false, false, false},
      {"5x5 one channel, multiplier 1",         1,  6, 10, 30,  1, 5, 5, 1, 1, 1, 1, 2, 2, 2, 2, false, true,  true,  false, false, false, 1.0f},
      {"5x5 one channel, just below 1, K slices", 1, 40, 9, 30,  1, 5, 5, 1, 1, 1, 1, 2, 2, 2, 2, true,  false, true,  false, false, false, 0.99999994f},
      // At most 8 channels, rows of stride 1 to 4 (the VBMI row's windows):
      {"3x3 window, 5 channels, batch 2, table", 2,  6,  9, 21,  5, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, true,  false, true,  true},
      {"5x7, stride_h 2, dilation_h 2, 3 ch",   1,  4, 13, 40,  3, 5, 7, 2, 1, 2, 1, 2, 0, 1, 6, false, true,  true,  false},
      {"1x1, 7 channels, non-finite",           1,  9,  5, 33,  7, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, false, false, true,  false, false, true},
      {"2x9, 3 -> 2, rows past the last unread", 1, 3,  9, 70,  2, 2, 9, 2, 1, 1, 1, 0, 4, 0, 4, true,  true,  false, false},
      {"1x66 window, 2 -> 4, 90 columns",        1,  2,  3, 90,  4, 1, 66, 1, 1, 1, 1, 0, 30, 0, 35, false, false, true, false},
      {"1x40 stride 2 (a CQT filter), 1 channel", 1, 1, 1, 300, 1, 1, 40, 1, 2, 1, 1, 0, 0, 0, 5, false, true, true,  false},
      {"3x5 stride (2, 3), 4 ch, x s8",         2,  3, 11, 50,  4, 3, 5, 2, 3, 1, 1, 1, 2, 1, 2, true,  false, true,  false},
      {"2x6 stride 4, 8 ch, table",             1,  2,  6, 83,  8, 2, 6, 1, 4, 1, 1, 0, 1, 1, 3, false, false, false, true},
      {"1x3 stride 5 (the VNNI tiles)",         1,  2,  4, 60,  3, 1, 3, 1, 5, 1, 1, 0, 0, 0, 0, false, false, true,  false},
      // One output column (magika's 1-D convolution as [H, 1]): a tap's run spans output rows.
      {"5x1 on [600, 1], 16 -> 24",            1, 16, 600, 1, 24, 5, 1, 1, 1, 1, 1, 0, 0, 0, 0, false, false, true,  false},
      {"3x1 stride 2 pad 1 on [700, 1], batch 2", 2, 3, 700, 1, 16, 3, 1, 2, 1, 1, 1, 1, 0, 1, 0, true,  true,  true,  false},
      {"3x3 on [300, 3]: one output column",   1,  2, 300, 3, 12, 3, 3, 1, 1, 1, 1, 0, 0, 0, 0, false, false, true,  false},
      {"3x3 dilation 2 on [400, 5], column 1 of 1", 1, 2, 400, 5, 10, 3, 3, 1, 2, 2, 2, 2, 0, 2, 0, true, false, true, false},
      {"1x1, multipliers just below 1",         1, 40,  6,  7, 11, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, false, false, true,  false, false, false, 0.99999994f},
      {"1x1 s8, multipliers just below 1",      1, 40,  6,  7, 11, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, true,  true,  true,  false, false, false, 0.99999994f},
      {"3x3, multipliers of 1 and more",        1,  6,  7,  9, 13, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, true,  false, true,  false, false, false, 1.0f},
      {"1x1, small multipliers, 0.01",          1, 20,  8,  9, 10, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, false, true,  true,  false, false, false, 0.01f},
      // A batch of small planes that 2 and 3 threads share out image by image (one task per image).
      {"3x3 pad 1, batch 6, table",             6, 70,  5,  6, 40, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, false, false, true,  true},
      {"1x1 direct s8, batch 6",                6, 33,  4,  5, 19, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, true,  true,  true,  false},
      // Image tasks of many positions, each run by position tasks on its thread (speed22): 20 x 20 "same"
      // (13 position tiles), and 17 x 17 1x1 with K slices and a last block of 1 position (by columns).
      {"3x3 same 20x20, batch 6, table",        6,  9, 20, 20, 24, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, false, true,  true,  true},
      {"1x1 17x17, K = 800, batch 4",           4, 800, 17, 17, 12, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, true,  false, true,  false},
      {"3x3 stride 2 on 41x41, batch 4, s8",    4,  5, 41, 41, 20, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, true,  true,  false, false},
      // "Same" convolutions unfolded by position tasks (one shifted copy per row, speed22): dilated with
      // uneven pads, and taps wider than the image (every column of a row padding).
      {"5x5 same, dilation 2, 20x21, uneven pads", 1, 3, 20, 21, 10, 5, 5, 1, 1, 2, 2, 3, 5, 5, 3, true, false, true, false},
      {"1x9 same on [200, 3], pads 4",          2,  4, 200, 3, 11, 1, 9, 1, 1, 1, 1, 0, 4, 0, 4, false, false, true,  false},
      // Few positions split into channel parts, each packing the image itself (small22): 3 parts of 5, 5
      // and 3 channel tiles on 3 threads, image by image (batch 3 on 2 threads); 4 tiles in 3 parts of 2
      // (the last part empty); an unfolded 3x3 on 7x7.
      {"1x1 7x7, K = 1152, 100 ch, batch 3",    3, 1152, 7, 7, 100, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, true,  false, true,  true},
      {"1x1 7x7, K = 2048, 32 ch, s8",          1, 2048, 7, 7, 32, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, true,  true,  true,  false},
      {"3x3 pad 1 on 7x7, 128 -> 48",           1, 128, 7,  7, 48, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, false, false, true,  false},
      // Few positions, each row gathered through its tap's offsets (small22): Silero VAD's STFT (1x256
      // stride 128 on [1, 640]) and its stride-2 encoder layers on 4 and 2 columns; a 3x3 on 3x4 with padding.
      {"1x256 stride 128 on [1, 640], 258 ch",  1,  1,  1, 640, 258, 1, 256, 1, 128, 1, 1, 0, 0, 0, 0, false, true, true, false},
      {"1x3 stride 2 pad 1 on [1, 4], 128 -> 64", 1, 128, 1, 4, 64, 1, 3, 1, 2, 1, 1, 0, 1, 0, 1, true,  false, true,  true},
      {"1x3 pad 1 on [1, 1], batch 2",          2, 64,  1,  1, 20, 1, 3, 1, 1, 1, 1, 0, 1, 0, 1, false, false, false, false},
      {"3x3 pad (2, 1) on 3x4, dilation 2",     1,  5,  3,  4, 11, 3, 3, 1, 1, 2, 1, 2, 1, 1, 1, true,  true,  true,  false},
      // Planes of at most 4 positions run by columns alone, raw outputs too (the VNNI row): 2 channel parts
      // whose boundary splits a weight panel (74 tiles of 8 channels, 37 each: channel 296 of panel 18).
      {"1x512 stride 512, 2 ch on [1, 2048], 590 ch", 1, 2,  1, 2048, 590, 1, 512, 1, 512, 1, 1, 0, 0, 0, 0, true, false, true, false},
      {"3x3 stride 2 pad 1 on 3x3: 4 positions", 1,  9,  3,  3, 33, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, false, true,  true,  true},
      {"1x3 dilation 2 pad 2 on [1, 3], 5 -> 18", 1,  5,  1,  3, 18, 1, 3, 1, 1, 1, 2, 0, 2, 0, 2, true,  true,  true,  false},
      // Stride 1, output rows as wide as the input: the VNNI row packs the image's taps straight into
      // blocks (ConvS8UnfoldPackFn, yolo22): position pieces with a last pass of 1480 % 64 = 8 positions
      // (half a block), K = 135 (rows past K in the last step); no bottom padding (23 output rows of 24);
      // few positions in channel parts with K slices (YOLOv8n's 10 x 10); width 8 (passes over 9 rows).
      {"3x3 same on 40x37, 15 -> 20, s8",       1, 15, 40, 37, 20, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, true,  false, true,  false},
      {"3x3 pad (1, 1, 0, 1) on 24x20, batch 2", 2,  6, 24, 20, 17, 3, 3, 1, 1, 1, 1, 1, 1, 0, 1, false, true,  true,  true},
      {"3x3 same on 10x10, 128 -> 40, K slices", 1, 128, 10, 10, 40, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, true,  true,  true,  false},
      {"5x3 same on 13x8, dilation (2, 1), batch 4", 4, 7, 13, 8, 9, 5, 3, 1, 1, 2, 1, 4, 1, 4, 1, false, false, true,  false},
  };
  return cases;
}

struct Data {
  ConvGeometry g;
  std::vector<uint8_t> x;
  std::vector<int8_t> w;
  std::vector<int32_t> w_zp, bias;
  std::vector<float> multiplier;
  std::vector<uint8_t> table;
  int32_t x_zp = 0, y_zp = 0;
  std::vector<uint8_t> want;  // [batch, M, P]
  std::vector<int32_t> acc;   // [batch, M, P]: the sums + bias (mod 2^32), ConvS8Args::y_s32's spec
};

Data MakeData(std::mt19937& rng, const ConvS8Case& cc, bool w_zp) {
  Data d;
  ConvGeometry& g = d.g;
  g.channels = cc.c, g.height = cc.h, g.width = cc.w, g.kernel_h = cc.kh, g.kernel_w = cc.kw;
  g.stride_h = cc.sh, g.stride_w = cc.sw, g.dilation_h = cc.dh, g.dilation_w = cc.dw;
  g.pad_top = cc.pt, g.pad_left = cc.pl, g.pad_bottom = cc.pb, g.pad_right = cc.pr;
  g.out_h = (cc.h + cc.pt + cc.pb - cc.dh * (cc.kh - 1) - 1) / cc.sh + 1;
  g.out_w = (cc.w + cc.pl + cc.pr - cc.dw * (cc.kw - 1) - 1) / cc.sw + 1;
  std::uniform_int_distribution<int> byte(0, 255);
  d.x.resize(static_cast<size_t>(cc.batch * cc.c * cc.h * cc.w));
  for (uint8_t& v : d.x) v = static_cast<uint8_t>(byte(rng));
  const int64_t k = g.k(), p = g.out_size();
  d.w.resize(static_cast<size_t>(cc.m * k));
  for (int8_t& v : d.w) v = static_cast<int8_t>(byte(rng) - 128);
  d.w_zp.assign(static_cast<size_t>(cc.m), 0);
  if (w_zp)
    for (int32_t& z : d.w_zp) z = byte(rng) % 21 - 10;
  d.x_zp = cc.x_signed ? byte(rng) % 41 - 20 : 100 + byte(rng) % 41;
  d.y_zp = cc.y_signed ? byte(rng) % 21 - 10 : 110 + byte(rng) % 21;
  if (cc.bias) {
    d.bias.resize(static_cast<size_t>(cc.m));
    for (int32_t& b : d.bias) b = byte(rng) * 97 - 12000;
  }
  // Outputs spread over the byte range: the sums' spread is about 74^2 sqrt(K).
  const float base = 50.0f / (74.0f * 74.0f * std::sqrt(static_cast<float>(k)));
  d.multiplier.resize(static_cast<size_t>(cc.m));
  for (int64_t o = 0; o < cc.m; ++o) d.multiplier[o] = base * (1.0f + 0.0731f * static_cast<float>(o % 9));
  if (cc.multiplier != 0.0f) {
    for (int64_t o = 0; o < cc.m; ++o)
      d.multiplier[o] = (o % 2 ? -1.0f : 1.0f) * cc.multiplier * (cc.multiplier >= 1.0f ? 1.0f + static_cast<float>(o % 3) : 1.0f);
  }
  if (cc.nonfinite) {
    d.multiplier[0] = std::numeric_limits<float>::infinity();
    d.multiplier[1] = std::numeric_limits<float>::quiet_NaN();
    d.multiplier[2] = -std::numeric_limits<float>::infinity();
    // Zero sums (0 * inf = NaN) on some positions: x at its zero point in every channel.
    for (int64_t ch = 0; ch < cc.c; ++ch)
      for (int64_t i = 0; i < 7; ++i) d.x[ch * cc.h * cc.w + i] = static_cast<uint8_t>(d.x_zp);
  }
  if (cc.table) {
    d.table.resize(256);
    for (uint8_t& t : d.table) t = static_cast<uint8_t>(byte(rng));
  }
  // The spec, term by term.
  d.want.resize(static_cast<size_t>(cc.batch * cc.m * p));
  d.acc.resize(d.want.size());
  for (int64_t b = 0; b < cc.batch; ++b) {
    for (int64_t o = 0; o < cc.m; ++o) {
      for (int64_t oy = 0; oy < g.out_h; ++oy) {
        for (int64_t ox = 0; ox < g.out_w; ++ox) {
          uint32_t acc = 0;
          for (int64_t ch = 0; ch < cc.c; ++ch) {
            for (int64_t ky = 0; ky < cc.kh; ++ky) {
              for (int64_t kx = 0; kx < cc.kw; ++kx) {
                const int64_t iy = oy * cc.sh - cc.pt + ky * cc.dh, ix = ox * cc.sw - cc.pl + kx * cc.dw;
                int32_t xv = d.x_zp;
                if (iy >= 0 && iy < cc.h && ix >= 0 && ix < cc.w) {
                  const uint8_t raw = d.x[((b * cc.c + ch) * cc.h + iy) * cc.w + ix];
                  xv = cc.x_signed ? int32_t{static_cast<int8_t>(raw)} : int32_t{raw};
                }
                const int32_t wv = d.w[(o * cc.c + ch) * cc.kh * cc.kw + ky * cc.kw + kx] - d.w_zp[o];
                acc += static_cast<uint32_t>((xv - d.x_zp) * wv);
              }
            }
          }
          const int32_t a = static_cast<int32_t>(acc);
          const int32_t* bias = cc.bias ? &d.bias[o] : nullptr;
          d.acc[(b * cc.m + o) * p + oy * g.out_w + ox] =
              static_cast<int32_t>(acc + (bias != nullptr ? static_cast<uint32_t>(*bias) : 0u));
          uint8_t q;
          if (cc.y_signed) {
            int8_t s;
            RequantizeS32Ref<int8_t>(1, &a, bias, 0, &d.multiplier[o], 0, d.y_zp, false, &s);
            q = static_cast<uint8_t>(s);
          } else {
            RequantizeS32Ref<uint8_t>(1, &a, bias, 0, &d.multiplier[o], 0, d.y_zp, false, &q);
          }
          if (cc.table) q = d.table[q ^ (cc.y_signed ? 0x80 : 0)];
          d.want[(b * cc.m + o) * p + oy * g.out_w + ox] = q;
        }
      }
    }
  }
  return d;
}

// Runs `fn` (or RunConvS8 when null) and compares with the spec; guard bytes
// after the output must stay untouched.
void Check(std::mt19937& rng, const ConvS8Case& cc, PackedFormat format, ConvS8Fn fn, int threads,
           const std::string& expected_name) {
  const bool w_zp = cc.w_zp && format == PackedFormat::kPanel16x2S16;
  SCOPED_TRACE(std::string(cc.name) + ", " + Traits(format).name + ", " + std::to_string(threads) + " threads" +
               (w_zp ? ", w zero points" : ""));
  const Data d = MakeData(rng, cc, w_zp);
  StatusOr<PackedGemmS8> packed =
      PackGemmS8(d.w.data(), cc.m, d.g.k(), GemmZeroPoints{d.w_zp.data(), true}, format);
  ASSERT_TRUE(packed.ok()) << packed.status().ToString();
  ThreadPool pool(threads);
  ConvS8Args args;
  args.w = &*packed;
  args.conv = d.g;
  args.batch = cc.batch;
  args.x = d.x.data();
  args.x_signed = cc.x_signed;
  args.x_zero_point = d.x_zp;
  args.bias = cc.bias ? d.bias.data() : nullptr;
  args.multiplier = d.multiplier.data();
  args.y_zero_point = d.y_zp;
  args.y_signed = cc.y_signed;
  if (cc.table) {
    args.table = d.table.data();
    args.table_flip = cc.y_signed ? 0x80 : 0;
    args.apply_table = SelectCpuKernel(CpuOp::kLut256).get<Lut256Fn>();
  }
  std::vector<uint8_t> y(d.want.size() + 64, 0xA5);
  args.y = y.data();
  args.pool = &pool;
  if (fn != nullptr) {
    fn(args);
  } else {
    const char* name = nullptr;
    const Status st = RunConvS8(args, &name);
    ASSERT_TRUE(st.ok()) << st.ToString();
    ASSERT_NE(name, nullptr);
    EXPECT_EQ(std::string(name), expected_name);
  }
  // The data exercise the requantization, not only its saturation.
  if (!cc.table && !cc.nonfinite && cc.multiplier == 0.0f && d.want.size() >= 200) EXPECT_GT(std::set<uint8_t>(d.want.begin(), d.want.end()).size(), 30u);
  for (size_t i = 0; i < d.want.size(); ++i) ASSERT_EQ(int{y[i]}, int{d.want[i]}) << "output byte " << i;
  for (size_t i = d.want.size(); i < y.size(); ++i) ASSERT_EQ(y[i], 0xA5) << "wrote past the output";
}

class ConvS8IsaTest : public testing::IsaSweepTest {};

TEST_P(ConvS8IsaTest, MatchesTheSpecBitForBit) {
  std::mt19937 rng(1405);
  for (PackedFormat format : {PackedFormat::kPanel16x4S8, PackedFormat::kPanel16x2S16}) {
    const CpuKernelDef* def = SelectCpuKernel(CpuOp::kConvS8, format);
    ASSERT_NE(def, nullptr);
    for (const ConvS8Case& cc : Cases())
      for (int threads : {1, 2, 3}) Check(rng, cc, format, nullptr, threads, def->name);
  }
}

// The raw outputs (ConvS8Args::y_s32 / y_f32: ConvInteger and
// sparq.ConvIntegerToFloat), finished in the VNNI tile's registers or by the
// driver's loops: the spec's int32 sums, and float(acc) * scale then + bias
// (one rounding each), on every ISA, both formats, 1-3 threads, every
// geometry above (tails of K, P and M, K slices, one channel, image tasks).
void CheckRaw(std::mt19937& rng, const ConvS8Case& cc, PackedFormat format, int threads, int mode,
              const std::string& expected_name) {
  const bool w_zp = cc.w_zp && format == PackedFormat::kPanel16x2S16;
  const char* modes[] = {"int32", "float", "float + bias", "float + bias, quantized"};
  SCOPED_TRACE(std::string(cc.name) + ", " + Traits(format).name + ", " + std::to_string(threads) + " threads, " +
               modes[mode]);
  const Data d = MakeData(rng, cc, w_zp);
  StatusOr<PackedGemmS8> packed =
      PackGemmS8(d.w.data(), cc.m, d.g.k(), GemmZeroPoints{d.w_zp.data(), true}, format);
  ASSERT_TRUE(packed.ok()) << packed.status().ToString();
  ThreadPool pool(threads);
  ConvS8Args args;
  args.w = &*packed;
  args.conv = d.g;
  args.batch = cc.batch;
  args.x = d.x.data();
  args.x_signed = cc.x_signed;
  args.x_zero_point = d.x_zp;
  args.bias = cc.bias ? d.bias.data() : nullptr;
  args.pool = &pool;
  std::vector<float> scale(static_cast<size_t>(cc.m)), fbias(static_cast<size_t>(cc.m));
  for (int64_t o = 0; o < cc.m; ++o) {
    scale[o] = (o % 2 ? -1.0f : 1.0f) * 3.1e-4f * (1.0f + 0.173f * static_cast<float>(o % 7));
    fbias[o] = 0.37f * static_cast<float>(o % 5) - 0.61f;
  }
  std::vector<int32_t> y(d.acc.size() + 16, int32_t{-0x5A5A5A5B});
  const int32_t guard = y.back();
  // Mode 3: QuantizeLinear's row over the floats, bytes out (ConvS8Args::y_q).
  const float q_scale = 0.0173f;
  const int32_t q_zp = cc.y_signed ? -3 : 119;
  std::vector<uint8_t> yq(d.acc.size() + 64, 0xA5);
  if (mode == 0) {
    args.y_s32 = y.data();
  } else if (mode == 3) {
    args.y_q = yq.data();
    args.f32_scale = scale.data();
    args.f32_bias = fbias.data();
    args.q_scale = q_scale, args.q_zero_point = q_zp, args.q_signed = cc.y_signed;
    args.f32_quantize = SelectCpuKernel(CpuOp::kQuantizeF32).get<QuantizeF32Fn>();
  } else {
    args.y_f32 = reinterpret_cast<float*>(y.data());
    args.f32_scale = scale.data();
    args.f32_bias = mode == 2 ? fbias.data() : nullptr;
  }
  const char* name = nullptr;
  const Status st = RunConvS8(args, &name);
  ASSERT_TRUE(st.ok()) << st.ToString();
  ASSERT_NE(name, nullptr);
  EXPECT_EQ(std::string(name), expected_name);
  const int64_t p = d.g.out_size();
  for (size_t i = 0; i < d.acc.size(); ++i) {
    if (mode == 0) {
      ASSERT_EQ(y[i], d.acc[i]) << "output " << i;
      continue;
    }
    const int64_t o = static_cast<int64_t>(i) / p % cc.m;
    volatile float v = static_cast<float>(d.acc[i]) * scale[o];  // rounded before the bias is added
    float want = v;
    if (mode >= 2) want = v + fbias[o];
    if (mode == 3) {
      const int q = cc.y_signed ? int{QuantizeValue<int8_t>(want, q_scale, q_zp)}
                                : int{QuantizeValue<uint8_t>(want, q_scale, q_zp)};
      ASSERT_EQ(int{cc.y_signed ? static_cast<int>(static_cast<int8_t>(yq[i])) : int{yq[i]}}, q) << "output " << i;
      continue;
    }
    float got;
    std::memcpy(&got, &y[i], sizeof(got));
    ASSERT_EQ(std::memcmp(&got, &want, sizeof(got)), 0) << "output " << i << ": " << got << " vs " << want;
  }
  for (size_t i = d.acc.size(); i < y.size(); ++i) ASSERT_EQ(y[i], guard) << "wrote past the output";
  if (mode == 3)
    for (size_t i = d.acc.size(); i < yq.size(); ++i) ASSERT_EQ(yq[i], 0xA5) << "wrote past the output";
}

TEST_P(ConvS8IsaTest, RawSumsMatchTheSpecBitForBit) {
  std::mt19937 rng(2207);
  for (PackedFormat format : {PackedFormat::kPanel16x4S8, PackedFormat::kPanel16x2S16}) {
    const CpuKernelDef* def = SelectCpuKernel(CpuOp::kConvS8, format);
    ASSERT_NE(def, nullptr);
    int i = 0;
    for (const ConvS8Case& cc : Cases()) {
      for (int threads : {1, 2, 3}) CheckRaw(rng, cc, format, threads, (i + threads) % 4, def->name);
      ++i;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(CpuKernels, ConvS8IsaTest, ::testing::ValuesIn(kAllCpuIsas), testing::IsaParamName);

TEST(ConvS8, RejectsBadArguments) {
  ConvS8Args args;
  EXPECT_EQ(RunConvS8(args).code(), StatusCode::kInvalidArgument);  // no weights
  std::vector<int8_t> w(2 * 12, 1);
  std::vector<int32_t> zp = {3, 0};
  StatusOr<PackedGemmS8> with_zp = PackGemmS8(w.data(), 2, 12, GemmZeroPoints{zp.data(), true},
                                              PackedFormat::kPanel16x4S8);
  ASSERT_TRUE(with_zp.ok());
  args.w = &*with_zp;
  args.conv.channels = 3, args.conv.height = 4, args.conv.width = 4, args.conv.kernel_h = 2, args.conv.kernel_w = 2;
  args.conv.out_h = 3, args.conv.out_w = 3;
  args.batch = 1;
  const Status st = RunConvS8(args);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("zero points"), std::string::npos) << st.message();
  StatusOr<PackedGemmS8> plain = PackGemmS8(w.data(), 2, 12, GemmZeroPoints{}, PackedFormat::kPanel16x4S8);
  ASSERT_TRUE(plain.ok());
  args.w = &*plain;
  args.conv.kernel_w = 1;  // K = 6, not 12
  EXPECT_NE(RunConvS8(args).message().find("K = 12"), std::string::npos);
}

}  // namespace

namespace testing {

// For CpuKernelTable.EveryTableRowIsExercised: a few cases on def's function.
bool CheckConvS8Row(std::mt19937& rng, const CpuKernelDef& def) {
  if (def.op() != CpuOp::kConvS8) return false;
  for (size_t i : {size_t{0}, size_t{2}, size_t{8}}) Check(rng, Cases()[i], def.format, def.get<ConvS8Fn>(), 2, "");
  return true;
}

}  // namespace testing
}  // namespace sparq
