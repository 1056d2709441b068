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

}  // namespace

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
    // Outputs [first, first + count) from out to y, 16 positions at a time.
    auto flush = [&](int64_t first, int64_t count) {
      for (int64_t p0 = 0; p0 < count; p0 += 16) {
        const __mmask16 pmask = First16(count - p0);
        __m512 m[16];
        for (int q = 0; q < 16; ++q) m[q] = _mm512_loadu_ps(out + (p0 + q) * kLanes);  // past count: not stored
        Transpose16x16(m);
        float* yp = y + first + p0;
        if (nc == kLanes && pmask == 0xFFFF) {
          for (int ch = 0; ch < kLanes; ++ch, yp += out_plane) _mm512_storeu_ps(yp, m[ch]);
        } else {
          for (int64_t ch = 0; ch < nc; ++ch) _mm512_mask_storeu_ps(yp + ch * out_plane, pmask, m[ch]);
        }
      }
    };
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
