// depthwise_f32_lanes_avx512: the FP32 depthwise convolution with 16
// channels in the 16 lanes of a register, for small planes (7x7 to 28x28 in
// MobileNet / EfficientNet), where the plane kernel runs rows of 7 or 14
// columns in 16-lane vectors and pays a plane's setup for 49 outputs.
//
//   x [16 channels][height * width]
//     --16x16 transposes-->  X [padded_h][padded_w][16], the padding 0
//     --depthwise_lanes_avx512.inc: strips of 8 accumulators-->
//   sums + bias, clamped: out [out_h * out_w][16]
//     --16x16 transposes-->  y [16 channels][out_h * out_w]
//
// PointwiseDepthwiseF32LanesAvx512 (sparq.PointwiseDepthwise) fills X
// with the pointwise convolution that feeds the depthwise one instead: 12
// pixels x 32 channels (two blocks) per register tile, stored straight into
// both blocks' X, so that its output never goes to memory and needs no
// transposes; then the sums and the copy-out per block as above.
//
// Each value sums its taps in (ky, kx) order with FMAs, like the plane
// kernels: within testing::kF32RelTol of the reference. Planes that do not
// fit (DepthwiseWindow::LanesFit, other windows), and stride-1 planes of 16
// columns or more (DepthwiseF32ShiftedFits: its rows need no transposes and
// measured faster, 0.16 vs 0.25 ms on EfficientNet's 112x112 layer) run
// plane by plane on the AVX-512 plane kernel.
#include <cstdint>
#include <limits>

#include "kernels/cpu/cpu_target.h"
#include "kernels/cpu/internal.h"

#if SPARQ_CPU_X86
#include <immintrin.h>

namespace sparq {
namespace cpu {

SPARQ_CPU_TARGET_BEGIN(SPARQ_CPU_AVX512_FEATURES)
#if defined(__GNUC__) && !defined(__clang__)
// GCC bug 105593 again (cpu_target.h), reported here as -Wuninitialized.
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif

namespace {

#include "kernels/cpu/depthwise_lanes_avx512.inc"

inline __mmask16 First16(int64_t n) { return n >= 16 ? __mmask16(0xFFFF) : static_cast<__mmask16>((1u << n) - 1); }

// Transposes the 16x16 matrix of rows r[0..15] in place.
inline void Transpose16x16(__m512* r) {
  __m512 t[16];
  for (int i = 0; i < 16; i += 2) {
    t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);      // r_i0 r_{i+1}0 r_i1 r_{i+1}1 per 128-bit lane
    t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);  // r_i2 r_{i+1}2 r_i3 r_{i+1}3
  }
  for (int i = 0; i < 16; i += 4) {
    r[i] = _mm512_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(1, 0, 1, 0));      // column 0 of rows i..i+3
    r[i + 1] = _mm512_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(3, 2, 3, 2));  // column 1
    r[i + 2] = _mm512_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(1, 0, 1, 0));
    r[i + 3] = _mm512_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(3, 2, 3, 2));
  }
  // r[4g + k], lane l (128-bit): column 4l + k of rows 4g..4g+3.
  for (int k = 0; k < 4; ++k) {
    t[k] = _mm512_shuffle_f32x4(r[k], r[4 + k], 0x88);       // lanes 0, 2 of r[k], then of r[4 + k]
    t[4 + k] = _mm512_shuffle_f32x4(r[k], r[4 + k], 0xdd);   // lanes 1, 3
    t[8 + k] = _mm512_shuffle_f32x4(r[8 + k], r[12 + k], 0x88);
    t[12 + k] = _mm512_shuffle_f32x4(r[8 + k], r[12 + k], 0xdd);
  }
  for (int k = 0; k < 4; ++k) {
    r[k] = _mm512_shuffle_f32x4(t[k], t[8 + k], 0x88);            // column k
    r[4 + k] = _mm512_shuffle_f32x4(t[4 + k], t[12 + k], 0x88);   // column 4 + k
    r[8 + k] = _mm512_shuffle_f32x4(t[k], t[8 + k], 0xdd);        // column 8 + k
    r[12 + k] = _mm512_shuffle_f32x4(t[4 + k], t[12 + k], 0xdd);  // column 12 + k
  }
}

// The output stage of the strips: bias, then the clamp.
struct FloatOut {
  __m512 bias, lo, hi;
  bool clamp;
  float* out;  // [outputs][16]
  void Store(int64_t index, __m512 sums) const {
    __m512 v = _mm512_add_ps(sums, bias);
    if (clamp) v = _mm512_min_ps(hi, _mm512_max_ps(lo, v));  // max(lo, NaN) and min(hi, NaN) are the NaN
    _mm512_storeu_ps(out + index * kLanes, v);
  }
};

// Outputs [0, count) of out [count][16] to the nc planes of y (out_plane
// floats apart), 16 positions at a time: y[ch * out_plane + i] = out[i][ch].
void FlushLanes(const float* out, int64_t count, int64_t nc, int64_t out_plane, float* y) {
  for (int64_t p0 = 0; p0 < count; p0 += 16) {
    const __mmask16 pmask = First16(count - p0);
    __m512 m[16];
    for (int q = 0; q < 16; ++q) m[q] = _mm512_loadu_ps(out + (p0 + q) * kLanes);  // past count: not stored
    Transpose16x16(m);
    float* yp = y + p0;
    if (nc == kLanes && pmask == 0xFFFF) {
      for (int ch = 0; ch < kLanes; ++ch, yp += out_plane) _mm512_storeu_ps(yp, m[ch]);
    } else {
      for (int64_t ch = 0; ch < nc; ++ch) _mm512_mask_storeu_ps(yp + ch * out_plane, pmask, m[ch]);
    }
  }
}

// The pointwise part of PointwiseDepthwiseF32: the bias and clamp of t, and
// where its two blocks of 16 channels go.
struct PointwiseOut {
  __m512 bias[2], lo, hi;
  bool clamp;
  __m512 Finish(__m512 sums, int block) const {
    __m512 v = _mm512_add_ps(sums, bias[block]);  // after the sums, as gemm_f32's epilogue
    return clamp ? _mm512_min_ps(hi, _mm512_max_ps(lo, v)) : v;  // NaN stays NaN
  }
};

// kR consecutive pixels of t, one per accumulator, from x (the first pixel in
// input channel 0, `plane` floats from one channel to the next) and w [depth]
// [32]: block 0's 16 channels to d0 + r * 16, with kTwo block 1's to d1 + r *
// 16. Each input value is broadcast once for both blocks.
template <int kR, bool kTwo>
void PointwisePixels(const float* x, int64_t plane, int64_t depth, const float* w, const PointwiseOut& o, float* d0,
                     float* d1) {
  __m512 a0[kR], a1[kR];
#pragma GCC unroll 16
  for (int r = 0; r < kR; ++r) a0[r] = a1[r] = _mm512_setzero_ps();
  for (int64_t k = 0; k < depth; ++k, x += plane, w += 2 * kLanes) {
    const __m512 w0 = _mm512_loadu_ps(w);
    const __m512 w1 = kTwo ? _mm512_loadu_ps(w + kLanes) : w0;
#pragma GCC unroll 16
    for (int r = 0; r < kR; ++r) {
      const __m512 v = _mm512_set1_ps(x[r]);
      a0[r] = _mm512_fmadd_ps(v, w0, a0[r]);
      if (kTwo) a1[r] = _mm512_fmadd_ps(v, w1, a1[r]);
    }
  }
#pragma GCC unroll 16
  for (int r = 0; r < kR; ++r) {
    _mm512_storeu_ps(d0 + r * kLanes, o.Finish(a0[r], 0));
    if (kTwo) _mm512_storeu_ps(d1 + r * kLanes, o.Finish(a1[r], 1));
  }
}

// 12 pixels a step: 24 accumulators, a broadcast for every two multiply-adds.
constexpr int kPixels = 12;
using PointwisePixelsFn = void (*)(const float*, int64_t, int64_t, const float*, const PointwiseOut&, float*, float*);

template <bool kTwo>
PointwisePixelsFn PickPixels(int r) {
  switch (r) {
    case 1: return PointwisePixels<1, kTwo>;
    case 2: return PointwisePixels<2, kTwo>;
    case 3: return PointwisePixels<3, kTwo>;
    case 4: return PointwisePixels<4, kTwo>;
    case 5: return PointwisePixels<5, kTwo>;
    case 6: return PointwisePixels<6, kTwo>;
    case 7: return PointwisePixels<7, kTwo>;
    case 8: return PointwisePixels<8, kTwo>;
    case 9: return PointwisePixels<9, kTwo>;
    case 10: return PointwisePixels<10, kTwo>;
    case 11: return PointwisePixels<11, kTwo>;
    default: return PointwisePixels<kPixels, kTwo>;
  }
}

}  // namespace

void PointwiseDepthwiseF32LanesAvx512(const PointwiseDepthwiseF32& a) {
  const int64_t wp = a.PaddedWidth(), band = a.LanesBandRows(), width = a.width;
  const int64_t plane = a.height * a.width, out_plane = a.out_h * a.out_w, taps = a.kernel_h * a.kernel_w;
  const bool two = a.channels > kLanes;
  float* const xs[2] = {a.scratch, a.scratch + a.LanesPaddedFloats()};  // X of each block's band
  float* out = a.scratch + 2 * a.LanesPaddedFloats();                   // [LanesBandOutputs()][16]
  PointwiseOut pw;
  pw.bias[0] = _mm512_loadu_ps(a.b_pw), pw.bias[1] = _mm512_loadu_ps(a.b_pw + kLanes);
  pw.lo = _mm512_set1_ps(a.pw_min), pw.hi = _mm512_set1_ps(a.pw_max);
  pw.clamp = a.pw_min > -std::numeric_limits<float>::infinity() || a.pw_max < std::numeric_limits<float>::infinity();
  const PointwisePixelsFn full = two ? PickPixels<true>(kPixels) : PickPixels<false>(kPixels);
  const int tail_pixels = static_cast<int>(width % kPixels);
  const PointwisePixelsFn tail = two ? PickPixels<true>(tail_pixels) : PickPixels<false>(tail_pixels);
  FloatOut store;
  store.lo = _mm512_set1_ps(a.out_min), store.hi = _mm512_set1_ps(a.out_max);
  store.clamp = a.out_min > -std::numeric_limits<float>::infinity() ||
                a.out_max < std::numeric_limits<float>::infinity();
  store.out = out;
  for (int64_t b = a.band_begin; b < a.band_end && b * band < a.out_h; ++b) {
    const int64_t oy0 = b * band, rows = a.out_h - oy0 < band ? a.out_h - oy0 : band;
    const int64_t in_rows = a.BandInputRows(rows), first = oy0 * a.stride_h - a.pad_top;  // X's row 0
    for (int blk = 0; blk < (two ? 2 : 1); ++blk) LanesZeroPadding(a, xs[blk], first, in_rows);
    const int64_t lo = first > 0 ? first : 0, hi = first + in_rows < a.height ? first + in_rows : a.height;
    for (int64_t iy = lo; iy < hi; ++iy) {  // the rows of t the band reads, both blocks
      const float* xr = a.x + iy * width;
      const int64_t at = ((iy - first) * wp + a.pad_left) * kLanes;
      int64_t ix = 0;
      for (; ix + kPixels <= width; ix += kPixels)
        full(xr + ix, plane, a.in_channels, a.w_pw, pw, xs[0] + at + ix * kLanes, xs[1] + at + ix * kLanes);
      if (tail_pixels > 0)
        tail(xr + ix, plane, a.in_channels, a.w_pw, pw, xs[0] + at + ix * kLanes, xs[1] + at + ix * kLanes);
    }
    for (int blk = 0; blk < (two ? 2 : 1); ++blk) {
      const int64_t nc = a.channels - blk * kLanes < kLanes ? a.channels - blk * kLanes : kLanes;
      store.bias = _mm512_maskz_loadu_ps(First16(nc), a.b_dw + blk * kLanes);
      LanesSums(xs[blk], wp, a.w_dw + blk * taps * kLanes, rows, a.out_w, a.kernel_h, a.kernel_w, a.stride_h,
                a.stride_w, a.dilation_h, store);
      FlushLanes(out, rows * a.out_w, nc, out_plane, a.y + blk * kLanes * out_plane + oy0 * a.out_w);
    }
  }
}

void DepthwiseF32ChannelsLanesAvx512(const DepthwiseF32Channels& a) {
  const bool fits = a.LanesFit() && a.w_lanes != nullptr && LanesWindowFits(a.kernel_w, a.stride_w, a.dilation_w);
  if (!fits || DepthwiseF32ShiftedFits(a)) {  // rows of 16 columns beat the transposes there
    DepthwiseF32ByPlanes(a, DepthwiseF32PlaneAvx512);
    return;
  }
  const int64_t wp = a.PaddedWidth(), width = a.width, pad_left = a.pad_left;
  const int64_t in_plane = a.height * a.width, out_plane = a.out_h * a.out_w;
  const int64_t taps = a.kernel_h * a.kernel_w;
  float* xp = a.scratch;                      // X of a band [rows][wp][16]
  float* out = xp + a.LanesPaddedFloats();  // [LanesBandOutputs()][16]
  FloatOut store;
  store.lo = _mm512_set1_ps(a.out_min), store.hi = _mm512_set1_ps(a.out_max);
  store.clamp = a.out_min > -std::numeric_limits<float>::infinity() ||
                a.out_max < std::numeric_limits<float>::infinity();
  store.out = out;
  for (int64_t c0 = 0; c0 < a.channels; c0 += kLanes) {
    const int64_t nc = a.channels - c0 < kLanes ? a.channels - c0 : kLanes;
    const float* x = a.x + c0 * in_plane;
    float* y = a.y + c0 * out_plane;
    // Plane rows [lo, hi) of 16 channels into X, 16 positions at a time.
    auto fill = [&](int64_t lo, int64_t hi, float* xr) {
      const int64_t end = hi * width;
      int64_t iy = 0, ix = 0;  // of position p0 + q, from row lo
      for (int64_t p0 = lo * width; p0 < end; p0 += 16) {
        const int64_t n = end - p0 < 16 ? end - p0 : 16;
        const __mmask16 pmask = First16(n);
        __m512 m[16];
        if (nc == kLanes) {
          const float* s = x + p0;  // channel by channel: one pointer, not 16 kept in registers
          for (int ch = 0; ch < kLanes; ++ch, s += in_plane) m[ch] = _mm512_maskz_loadu_ps(pmask, s);
        } else {
          for (int ch = 0; ch < kLanes; ++ch)
            m[ch] = ch < nc ? _mm512_maskz_loadu_ps(pmask, x + ch * in_plane + p0) : _mm512_setzero_ps();
        }
        Transpose16x16(m);
        if (n == 16 && ix + 16 <= width) {  // 16 columns of one row: consecutive in X
          float* d = xr + (iy * wp + ix + pad_left) * kLanes;
          for (int q = 0; q < 16; ++q) _mm512_storeu_ps(d + q * kLanes, m[q]);
          ix += 16;
          if (ix == width) ix = 0, ++iy;
          continue;
        }
        for (int64_t q = 0; q < n; ++q) {
          _mm512_storeu_ps(xr + (iy * wp + ix + pad_left) * kLanes, m[q]);
          if (++ix == width) ix = 0, ++iy;
        }
      }
    };
    auto flush = [&](int64_t first, int64_t count) { FlushLanes(out, count, nc, out_plane, y + first); };
    store.bias = _mm512_maskz_loadu_ps(First16(nc), a.bias + c0);
    const float* w = a.w_lanes + (c0 / kLanes) * taps * kLanes;
    auto sums = [&](int64_t rows) {
      LanesSums(xp, wp, w, rows, a.out_w, a.kernel_h, a.kernel_w, a.stride_h, a.stride_w, a.dilation_h, store);
    };
    LanesBlock(a, xp, fill, sums, flush);
  }
}

SPARQ_CPU_TARGET_END

}  // namespace cpu
}  // namespace sparq

#endif  // SPARQ_CPU_X86
