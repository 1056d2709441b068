// depthwise_s8_lanes_avx512vbmi: the INT8 depthwise convolution with 16
// channels in the 16 lanes of a register, for the small planes of MobileNet /
// EfficientNet blocks (7x7 to 28x28), where the plane kernels run rows of 7
// or 14 columns in 16-lane vectors and pay a plane's setup for 49 outputs.
//
//   x [16 channels][height * width] bytes
//     --16x16 byte transposes (vpermt2b), x - x_zero_point as float-->
//   X [padded_h][padded_w][16] float, the padding 0 (written once per call)
//     --per output row, strips of up to 8 columns: 8 accumulators, the
//       window row's kernel_w weight vectors in registers, each input
//       column loaded once and multiplied into every output it feeds-->
//   sums (exact integers: |x - zp|, |w| <= 255, at most 16 * 7 taps < 2^24)
//     --RequantizeS32Ref's steps per lane (per-channel bias, multiplier)-->
//   out [out_h * out_w][16] bytes
//     --the table (sparq.QLinearConvLut, vpermi2b), 16x16 transposes-->
//   y [16 channels][out_h * out_w]
//
// No masks in the inner loop (the padding is in X), no per-plane setup, and
// every lane busy on every shape. Integer sums and the reference's
// requantization: bit for bit the reference. Planes that do not fit
// (DepthwiseS8Channels::LanesFit, other windows) run plane by plane on the
// AVX-512 VNNI plane kernel.
#include <cstdint>

#include "kernels/cpu/cpu_target.h"
#include "kernels/cpu/internal.h"

#if SPARQ_CPU_X86
#include <immintrin.h>

namespace sparq {
namespace cpu {

SPARQ_CPU_TARGET_BEGIN(SPARQ_CPU_AVX512VBMI_FEATURES)
#if defined(__GNUC__) && !defined(__clang__)
// GCC bug 105593 again (cpu_target.h), reported here as -Wuninitialized.
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif

namespace {

#include "kernels/cpu/depthwise_lanes_avx512.inc"

// vpermt2b indices of a 16x16 byte transpose in two steps. A matrix is four
// registers, register j holding rows 4j..4j+3 (16 bytes each).
//   step 1: (rows 0-7, columns 0-7 or 8-15) from registers 0 and 1, the
//           same from 2 and 3 for rows 8-15; byte c * 8 + r is (r, c)
//   step 2: four columns, 16 rows each, from two step-1 registers
struct TransposeIndex {
  uint8_t cols_lo[64], cols_hi[64], rows_lo[64], rows_hi[64];
};
constexpr TransposeIndex MakeTransposeIndex() {
  TransposeIndex t{};
  for (int e = 0; e < 64; ++e) {
    const int c = e / 8, r = e % 8;
    t.cols_lo[e] = static_cast<uint8_t>(r * 16 + c);
    t.cols_hi[e] = static_cast<uint8_t>(r * 16 + c + 8);
  }
  for (int b = 0; b < 64; ++b) {
    const int c = b / 16, r = b % 16;
    const int from = r < 8 ? r : 64 + r - 8;
    t.rows_lo[b] = static_cast<uint8_t>(c * 8 + from);
    t.rows_hi[b] = static_cast<uint8_t>((c + 4) * 8 + from);
  }
  return t;
}
alignas(64) constexpr TransposeIndex kTranspose = MakeTransposeIndex();

inline void Transpose16x16(__m512i m[4]) {
  const __m512i cols_lo = _mm512_loadu_si512(kTranspose.cols_lo), cols_hi = _mm512_loadu_si512(kTranspose.cols_hi);
  const __m512i rows_lo = _mm512_loadu_si512(kTranspose.rows_lo), rows_hi = _mm512_loadu_si512(kTranspose.rows_hi);
  const __m512i e0 = _mm512_permutex2var_epi8(m[0], cols_lo, m[1]), e1 = _mm512_permutex2var_epi8(m[0], cols_hi, m[1]);
  const __m512i e2 = _mm512_permutex2var_epi8(m[2], cols_lo, m[3]), e3 = _mm512_permutex2var_epi8(m[2], cols_hi, m[3]);
  m[0] = _mm512_permutex2var_epi8(e0, rows_lo, e2), m[1] = _mm512_permutex2var_epi8(e0, rows_hi, e2);
  m[2] = _mm512_permutex2var_epi8(e1, rows_lo, e3), m[3] = _mm512_permutex2var_epi8(e1, rows_hi, e3);
}

inline __mmask16 First16(int64_t n) { return n >= 16 ? __mmask16(0xFFFF) : static_cast<__mmask16>((1u << n) - 1); }

struct Requant {
  __m512 real_lo, real_hi, mult, bias_f;
  __m512i q_lo, q_hi, zp, bias;
  bool float_bias;  // every bias below 2^24 in magnitude: bias_f exact
};

// RequantRowAvx512's steps (RequantizeS32Ref, no fused ReLU) on the exact
// integer sums of 16 channels.
inline __m128i RequantLanes(const Requant& rq, __m512 sums) {
  if (rq.float_bias) {
    // The same bits in fewer steps: sums + bias rounds once to float(acc + bias)
    // (both exact); rounding (embedded, to nearest even) commutes with the clamp
    // to integer bounds, after which the int32 clamp has nothing left to do.
    __m512 real = _mm512_mul_ps(_mm512_add_ps(sums, rq.bias_f), rq.mult);
    real = _mm512_mask_mov_ps(real, _mm512_cmp_ps_mask(real, real, _CMP_UNORD_Q), _mm512_setzero_ps());  // NaN -> zp
    real = _mm512_min_ps(_mm512_max_ps(real, rq.real_lo), rq.real_hi);
    const __m512i q = _mm512_add_epi32(_mm512_cvt_roundps_epi32(real, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC), rq.zp);
    return _mm512_cvtepi32_epi8(q);  // low byte: int8 and uint8
  }
  __m512 real = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_add_epi32(_mm512_cvtps_epi32(sums), rq.bias)), rq.mult);
  real = _mm512_mask_mov_ps(real, _mm512_cmp_ps_mask(real, real, _CMP_UNORD_Q), _mm512_setzero_ps());  // NaN -> zp
  __m512 rounded = _mm512_roundscale_ps(real, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  rounded = _mm512_min_ps(_mm512_max_ps(rounded, rq.real_lo), rq.real_hi);
  __m512i q = _mm512_add_epi32(_mm512_cvttps_epi32(rounded), rq.zp);
  q = _mm512_min_epi32(_mm512_max_epi32(q, rq.q_lo), rq.q_hi);
  return _mm512_cvtepi32_epi8(q);  // low byte: int8 and uint8
}

// The output stage of the strips: 16 requantized bytes per column.
struct ByteOut {
  Requant rq;
  uint8_t* out;  // [columns][16]
  void Store(int64_t column, __m512 sums) const {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + column * kLanes), RequantLanes(rq, sums));
  }
};

// out[i] = table[in[i] ^ flip] on 64 bytes (lut_avx512vbmi.cc's steps).
inline __m512i Lookup(const __m512i table[4], __m512i flip, __m512i in) {
  const __m512i idx = _mm512_xor_si512(in, flip);
  const __m512i low = _mm512_permutex2var_epi8(table[0], idx, table[1]);
  const __m512i high = _mm512_permutex2var_epi8(table[2], idx, table[3]);
  return _mm512_mask_blend_epi8(_mm512_movepi8_mask(idx), low, high);
}

}  // namespace

void DepthwiseS8ChannelsAvx512Vbmi(const DepthwiseS8Channels& a) {
  const bool fits = a.LanesFit() && a.w_lanes != nullptr && LanesWindowFits(a.kernel_w, a.stride_w, a.dilation_w);
  if (!fits) {
    DepthwiseS8ByPlanes(a, DepthwiseS8PlaneAvx512Vnni, ApplyTableAvx512Vbmi);
    return;
  }
  const int64_t wp = a.PaddedWidth(), width = a.width, pad_left = a.pad_left;
  const int64_t in_plane = a.height * a.width, out_plane = a.out_h * a.out_w;
  const int64_t taps = a.kernel_h * a.kernel_w;
  float* xp = a.scratch;                                                    // X of a band [rows][wp][16]
  auto* out = reinterpret_cast<uint8_t*>(xp + a.LanesPaddedFloats());       // [LanesBandOutputs()][16]
  auto* block = out + a.LanesBandOutputs() * kLanes;                          // one transposed 16x16 block
  const int32_t lo = a.y_signed ? -128 : 0, hi = a.y_signed ? 127 : 255;
  ByteOut store;
  Requant& rq = store.rq;
  store.out = out;
  rq.real_lo = _mm512_set1_ps(static_cast<float>(lo - a.y_zero_point));
  rq.real_hi = _mm512_set1_ps(static_cast<float>(hi - a.y_zero_point));
  rq.q_lo = _mm512_set1_epi32(lo), rq.q_hi = _mm512_set1_epi32(hi), rq.zp = _mm512_set1_epi32(a.y_zero_point);
  __m512i table[4];
  if (a.table != nullptr)
    for (int i = 0; i < 4; ++i) table[i] = _mm512_loadu_si512(a.table + 64 * i);
  const __m512i flip = _mm512_set1_epi8(static_cast<char>(a.y_signed ? 0x80 : 0));
  const __m512i x_zp = _mm512_set1_epi32(a.x_zero_point);
  const auto* xb = static_cast<const uint8_t*>(a.x);
  auto* yb = static_cast<uint8_t*>(a.y);
  for (int64_t c0 = 0; c0 < a.channels; c0 += kLanes) {
    const int64_t nc = a.channels - c0 < kLanes ? a.channels - c0 : kLanes;
    const __mmask16 cmask = First16(nc);
    const uint8_t* x = xb + c0 * in_plane;
    uint8_t* y = yb + c0 * out_plane;
    // Plane rows [lo, hi) of 16 channels into X, 16 positions at a time.
    auto fill = [&](int64_t lo, int64_t hi, float* xr) {
      const int64_t end = hi * width;
      int64_t iy = 0, ix = 0;  // of position p0 + q, from row lo
      for (int64_t p0 = lo * width; p0 < end; p0 += 16) {
        const int64_t n = end - p0 < 16 ? end - p0 : 16;
        const __mmask16 pmask = First16(n);
        __m512i m[4];
        for (int j = 0; j < 4; ++j) {
          __m128i rows[4];
          for (int r = 0; r < 4; ++r) {
            const int64_t ch = 4 * j + r;
            rows[r] = ch < nc ? _mm_maskz_loadu_epi8(pmask, x + ch * in_plane + p0) : _mm_setzero_si128();
          }
          m[j] = _mm512_inserti32x4(_mm512_castsi128_si512(rows[0]), rows[1], 1);
          m[j] = _mm512_inserti32x4(_mm512_inserti32x4(m[j], rows[2], 2), rows[3], 3);
        }
        Transpose16x16(m);
        for (int j = 0; j < 4; ++j) _mm512_storeu_si512(block + 64 * j, m[j]);
        if (n == 16 && ix + 16 <= width) {  // 16 columns of one row: consecutive in X
          float* d = xr + (iy * wp + ix + pad_left) * kLanes;
          for (int q = 0; q < 16; ++q) {
            const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(block + 16 * q));
            const __m512i v = a.x_signed ? _mm512_cvtepi8_epi32(bytes) : _mm512_cvtepu8_epi32(bytes);
            _mm512_storeu_ps(d + q * kLanes, _mm512_cvtepi32_ps(_mm512_sub_epi32(v, x_zp)));
          }
          ix += 16;
          if (ix == width) ix = 0, ++iy;
          continue;
        }
        for (int64_t q = 0; q < n; ++q) {
          const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(block + 16 * q));
          const __m512i v = a.x_signed ? _mm512_cvtepi8_epi32(bytes) : _mm512_cvtepu8_epi32(bytes);
          _mm512_storeu_ps(xr + (iy * wp + ix + pad_left) * kLanes, _mm512_cvtepi32_ps(_mm512_sub_epi32(v, x_zp)));
          if (++ix == width) ix = 0, ++iy;
        }
      }
    };
    // Outputs [first, first + count) from out to y through the table, 16 positions at a time.
    auto flush = [&](int64_t first, int64_t count) {
      for (int64_t p0 = 0; p0 < count; p0 += 16) {
        const __mmask16 pmask = First16(count - p0);
        __m512i m[4];
        for (int j = 0; j < 4; ++j) {
          m[j] = _mm512_loadu_si512(out + (p0 + 4 * j) * kLanes);  // past count: not stored
          if (a.table != nullptr) m[j] = Lookup(table, flip, m[j]);
        }
        Transpose16x16(m);
        for (int64_t ch = 0; ch < nc; ++ch) {
          const __m512i rows = m[ch / 4];
          __m128i row;
          switch (ch % 4) {
            case 0: row = _mm512_castsi512_si128(rows); break;
            case 1: row = _mm512_extracti32x4_epi32(rows, 1); break;
            case 2: row = _mm512_extracti32x4_epi32(rows, 2); break;
            default: row = _mm512_extracti32x4_epi32(rows, 3); break;
          }
          _mm_mask_storeu_epi8(y + ch * out_plane + first + p0, pmask, row);
        }
      }
    };
    rq.bias = _mm512_maskz_loadu_epi32(cmask, a.bias + c0);
    rq.bias_f = _mm512_cvtepi32_ps(rq.bias);
    const __m512i limit = _mm512_set1_epi32(1 << 24);
    rq.float_bias = _mm512_cmpge_epu32_mask(_mm512_abs_epi32(rq.bias), limit) == 0;  // unsigned: |INT32_MIN| = 2^31
    rq.mult = _mm512_maskz_loadu_ps(cmask, a.multiplier + c0);
    LanesBlock(a, xp, a.w_lanes + (c0 / kLanes) * taps * kLanes, store, fill, flush);
  }
}

SPARQ_CPU_TARGET_END

}  // namespace cpu
}  // namespace sparq

#endif  // SPARQ_CPU_X86
