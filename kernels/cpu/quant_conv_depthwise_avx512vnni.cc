// The AVX-512 VNNI plane of the INT8 depthwise convolution
// (quant_conv_depthwise.cc runs it): x - x_zero_point widened to int16 once,
// then each vpdpwssd adds two taps (kx, kx + 1) of 16 outputs, the int16
// pair of each 32-bit lane times the broadcast weight pair:
//
//   stride 2: output j reads columns 2j + kx, 2j + kx + 1: one load of 32
//             int16 from column kx - pad_left + 2 * first output holds every
//             pair in place;
//   stride 1: output j reads columns j + kx, j + kx + 1: a load from column
//             c holds the pairs of the even outputs, one from c + 1 those of
//             the odd outputs; 32 outputs per block, interleaved at the end.
//
// A window of odd width pairs its last tap with a zero weight. Loads are
// masked to the columns inside x (outside: 0, the zero point's padding);
// window rows above or below x read a row of zeros. Integer sums, then the
// steps of RequantRowAvx512 in registers: bit for bit the reference.
// Windows 3, 5 or 7 wide with stride 2, or stride 1 on rows over 16
// columns; others run the AVX-512 plane.
#include <cstdint>
#include <type_traits>

#include "kernels/cpu/cpu_target.h"
#include "kernels/cpu/internal.h"

#if SPARQ_CPU_X86
#include <immintrin.h>

namespace sparq {
namespace cpu {

SPARQ_CPU_TARGET_BEGIN(SPARQ_CPU_AVX512VNNI_FEATURES)

namespace {

constexpr int kMaxBlocks = 64;       // output rows up to 1024 columns
constexpr int kMaxRows = 16;         // kernel_h up to 16
constexpr int kMaxPairs = 4;         // kernel_w up to 7
constexpr int64_t kMaxWidth = 4096;  // input rows up to this many columns (kZeroRow)
alignas(64) const int16_t kZeroRow[kMaxWidth] = {};

// Elements [lo, hi) of 32 set, clipped.
inline __mmask32 ElementRange(int64_t lo, int64_t hi) {
  lo = lo < 0 ? 0 : lo;
  hi = hi > 32 ? 32 : hi;
  if (hi <= lo) return 0;
  const uint64_t bits = ((uint64_t{1} << (hi - lo)) - 1) << lo;
  return static_cast<__mmask32>(bits);
}

// x[i] - zero_point as int16, i < n.
template <typename T>
void WidenPlane(const T* x, int64_t n, int32_t zero_point, int16_t* out) {
  const __m512i zp = _mm512_set1_epi16(static_cast<int16_t>(zero_point));
  for (int64_t i = 0; i < n; i += 32) {
    const __mmask32 k = n - i >= 32 ? ~__mmask32(0) : static_cast<__mmask32>((uint64_t{1} << (n - i)) - 1);
    const __m256i bytes = _mm256_maskz_loadu_epi8(k, x + i);
    const __m512i v = std::is_signed<T>::value ? _mm512_cvtepi8_epi16(bytes) : _mm512_cvtepu8_epi16(bytes);
    _mm512_mask_storeu_epi16(out + i, k, _mm512_sub_epi16(v, zp));
  }
}

struct Requant {
  __m512 real_lo, real_hi, mult;
  __m512i q_lo, q_hi, zp, bias;
};

// RequantRowAvx512's steps (RequantizeS32Ref, no fused ReLU) on 16 sums.
inline __m128i RequantBlock(const Requant& rq, __m512i acc) {
  __m512 real = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_add_epi32(acc, rq.bias)), rq.mult);
  real = _mm512_mask_mov_ps(real, _mm512_cmp_ps_mask(real, real, _CMP_UNORD_Q), _mm512_setzero_ps());  // NaN -> zp
  __m512 rounded = _mm512_roundscale_ps(real, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  rounded = _mm512_min_ps(_mm512_max_ps(rounded, rq.real_lo), rq.real_hi);
  __m512i q = _mm512_add_epi32(_mm512_cvttps_epi32(rounded), rq.zp);
  q = _mm512_min_epi32(_mm512_max_epi32(q, rq.q_lo), rq.q_hi);
  return _mm512_cvtepi32_epi8(q);  // low byte: int8 and uint8
}

inline __mmask16 Lanes(int64_t n) { return n >= 16 ? __mmask16(0xFFFF) : static_cast<__mmask16>((1u << n) - 1); }

template <bool kStride2>
void Plane(const DepthwiseS8Plane& p, const int16_t* x) {
  const int pairs = static_cast<int>((p.kernel_w + 1) / 2);
  const int kh = static_cast<int>(p.kernel_h);
  // Weight pairs (w[2q], w[2q + 1]) of each window row, as the int32 lanes vpdpwssd reads.
  int32_t wpair[kMaxRows][kMaxPairs];
  for (int ky = 0; ky < kh; ++ky)
    for (int q = 0; q < pairs; ++q) {
      const int64_t kx = 2 * q;
      const uint16_t lo = static_cast<uint16_t>(p.w[ky * p.kernel_w + kx]);
      const uint16_t hi = kx + 1 < p.kernel_w ? static_cast<uint16_t>(p.w[ky * p.kernel_w + kx + 1]) : 0;
      wpair[ky][q] = static_cast<int32_t>(static_cast<uint32_t>(lo) | (static_cast<uint32_t>(hi) << 16));
    }
  // Per block and pair: the first input column and the element masks of its load(s).
  constexpr int64_t kOut = kStride2 ? 16 : 32;  // outputs per block
  const int64_t blocks = (p.out_w + kOut - 1) / kOut;
  struct Load {
    int64_t col;
    __mmask32 m0, m1;  // stride 2: m0; stride 1: loads from col (even outputs) and col + 1 (odd)
  };
  Load loads[kMaxBlocks][kMaxPairs];
  for (int64_t bl = 0; bl < blocks; ++bl)
    for (int q = 0; q < pairs; ++q) {
      Load& l = loads[bl][q];
      l.col = bl * kOut * (kStride2 ? 2 : 1) + 2 * q - p.pad_left;
      l.m0 = ElementRange(-l.col, p.width - l.col);
      l.m1 = kStride2 ? 0 : ElementRange(-l.col - 1, p.width - l.col - 1);
    }
  Requant rq;
  const int32_t lo = p.y_signed ? -128 : 0, hi = p.y_signed ? 127 : 255;
  rq.real_lo = _mm512_set1_ps(static_cast<float>(lo - p.y_zero_point));
  rq.real_hi = _mm512_set1_ps(static_cast<float>(hi - p.y_zero_point));
  rq.q_lo = _mm512_set1_epi32(lo), rq.q_hi = _mm512_set1_epi32(hi), rq.zp = _mm512_set1_epi32(p.y_zero_point);
  rq.bias = _mm512_set1_epi32(p.bias), rq.mult = _mm512_set1_ps(p.multiplier);
  // Even lanes e0..e15 and odd lanes o0..o15 -> e0 o0 e1 o1 ... (two halves).
  const __m512i first_half = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
  const __m512i second_half = _mm512_setr_epi32(8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
  auto* y = static_cast<uint8_t*>(p.y);
  const int16_t* rows[kMaxRows];
  for (int64_t oy = 0; oy < p.out_h; ++oy) {
    for (int ky = 0; ky < kh; ++ky) {
      const int64_t iy = oy * p.stride_h - p.pad_top + ky * p.dilation_h;
      rows[ky] = iy < 0 || iy >= p.height ? kZeroRow : x + iy * p.width;
    }
    uint8_t* yr = y + oy * p.out_w;
    for (int64_t bl = 0; bl < blocks; ++bl) {
      const int64_t ox = bl * kOut, n = p.out_w - ox;
      if (kStride2) {
        __m512i acc = _mm512_setzero_si512();
        for (int ky = 0; ky < kh; ++ky)
          for (int q = 0; q < pairs; ++q) {
            const Load& l = loads[bl][q];
            const __m512i v = _mm512_maskz_loadu_epi16(l.m0, rows[ky] + l.col);  // masked lanes are not read
            acc = _mm512_dpwssd_epi32(acc, v, _mm512_set1_epi32(wpair[ky][q]));
          }
        _mm_mask_storeu_epi8(yr + ox, Lanes(n), RequantBlock(rq, acc));
      } else {
        __m512i even = _mm512_setzero_si512(), odd = _mm512_setzero_si512();
        for (int ky = 0; ky < kh; ++ky)
          for (int q = 0; q < pairs; ++q) {
            const Load& l = loads[bl][q];
            const __m512i w = _mm512_set1_epi32(wpair[ky][q]);
            even = _mm512_dpwssd_epi32(even, _mm512_maskz_loadu_epi16(l.m0, rows[ky] + l.col), w);
            odd = _mm512_dpwssd_epi32(odd, _mm512_maskz_loadu_epi16(l.m1, rows[ky] + l.col + 1), w);
          }
        _mm_mask_storeu_epi8(yr + ox, Lanes(n), RequantBlock(rq, _mm512_permutex2var_epi32(even, first_half, odd)));
        if (n > 16) {
          _mm_mask_storeu_epi8(yr + ox + 16, Lanes(n - 16),
                               RequantBlock(rq, _mm512_permutex2var_epi32(even, second_half, odd)));
        }
      }
    }
  }
}

}  // namespace

void DepthwiseS8PlaneAvx512Vnni(const DepthwiseS8Plane& p) {
  const bool fits = (p.kernel_w == 3 || p.kernel_w == 5 || p.kernel_w == 7) && p.kernel_h <= kMaxRows &&
                    p.dilation_w == 1 && (p.stride_w == 1 || p.stride_w == 2) && p.width <= kMaxWidth &&
                    (p.out_w + 31) / 32 <= kMaxBlocks / 2 &&
                    // Stride 1 fills 32 outputs per block: on rows of 16 or fewer the
                    // AVX-512 plane's 16-column FMAs do fewer operations.
                    (p.stride_w == 2 || p.out_w > 16);
  if (!fits) {
    DepthwiseS8PlaneAvx512(p);
    return;
  }
  auto* x = reinterpret_cast<int16_t*>(p.scratch);  // [height, width]
  if (p.x_signed) {
    WidenPlane(static_cast<const int8_t*>(p.x), p.height * p.width, p.x_zero_point, x);
  } else {
    WidenPlane(static_cast<const uint8_t*>(p.x), p.height * p.width, p.x_zero_point, x);
  }
  if (p.stride_w == 2) {
    Plane<true>(p, x);
  } else {
    Plane<false>(p, x);
  }
}

SPARQ_CPU_TARGET_END

}  // namespace cpu
}  // namespace sparq

#endif  // SPARQ_CPU_X86
