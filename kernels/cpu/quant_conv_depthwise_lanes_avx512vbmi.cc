// depthwise_s8_lanes_avx512vbmi: the INT8 depthwise convolution with 16
// channels in the 16 lanes of a register, where the plane kernels run rows of
// 7 or 14 columns in 16-lane vectors and pay a plane's setup for 49 outputs
// (MobileNet / EfficientNet: 7x7 to 112x112 planes, in bands of output rows).
//
//   x [16 channels][height * width] bytes
//     --16x16 byte transposes (vpermt2b), x - x_zero_point-->
//   X [band rows][padded_w][16 int16 pairs (x[c], x[c + 1])], the padding 0
//     --per output row, strips of up to 8 columns: 8 int32 accumulators, the
//       window row's weight pairs in registers, one vpdpwssd per two taps
//       of 16 channels, each input column loaded once-->
//   sums (int32, exact)
//     --RequantizeS32Ref's steps per lane (per-channel bias, multiplier)-->
//   out [band outputs][16] bytes
//     --the table (sparq.QLinearConvLut, vpermi2b), 16x16 transposes-->
//   y [16 channels][out_h * out_w]
//
// No masks in the inner loop (the padding is in X), no per-plane setup, and
// every lane busy on every shape. Integer sums and the reference's
// requantization: bit for bit the reference. Planes that do not fit
// (DepthwiseWindow::LanesFit, other windows) run plane by plane on the
// AVX-512 VNNI plane kernel.
#include <cmath>
#include <cstdint>
#include <vector>

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

// A buffer of at least `size` bytes (grown, never shrunk).
inline uint8_t* ReserveBytes(std::vector<uint8_t>& v, int64_t size) {
  if (v.size() < static_cast<size_t>(size)) v.resize(static_cast<size_t>(size));
  return v.data();
}

inline __mmask16 First16(int64_t n) { return n >= 16 ? __mmask16(0xFFFF) : static_cast<__mmask16>((1u << n) - 1); }

struct Requant {
  __m512 real_lo, real_hi, mult;
  __m512i zp, bias;
};

// RequantizeS32Ref (no fused ReLU) on the int32 sums of 16 channels, as
// RequantRowAvx512 computes it, in fewer steps with the same bits: rounding
// (embedded, to nearest even) commutes with the clamp to integer bounds,
// after which the int32 clamp has nothing left to do.
inline __m128i RequantLanes(const Requant& rq, __m512i acc) {
  __m512 real = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_add_epi32(acc, rq.bias)), rq.mult);
  real = _mm512_mask_mov_ps(real, _mm512_cmp_ps_mask(real, real, _CMP_UNORD_Q), _mm512_setzero_ps());  // NaN -> zp
  real = _mm512_min_ps(_mm512_max_ps(real, rq.real_lo), rq.real_hi);
  const __m512i q = _mm512_add_epi32(_mm512_cvt_roundps_epi32(real, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC), rq.zp);
  return _mm512_cvtepi32_epi8(q);  // low byte: int8 and uint8
}

// RequantLanes for two columns (32 bytes, column 0's 16 lanes first) when
// every |multiplier| < 1 (ByteOut::narrow): each product then converts to its
// rounded int32 without a clamp, and saturating narrowing clamps, with the
// reference's bits: sat8(sat16(sat16(r) + zp)) = saturate(r + zp) for
// |zp| <= 255 (conv_s8_avx512vnni.cc, PackedRequant, says why).
inline __m256i RequantLanesPair(const Requant& rq, __m512i zp16, __m512i order, bool out_signed, __m512i acc0,
                                __m512i acc1) {
  const __m512i q0 = _mm512_cvt_roundps_epi32(_mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_add_epi32(acc0, rq.bias)), rq.mult),
                                              _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  const __m512i q1 = _mm512_cvt_roundps_epi32(_mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_add_epi32(acc1, rq.bias)), rq.mult),
                                              _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  const __m512i w = _mm512_adds_epi16(_mm512_packs_epi32(q0, q1), zp16);
  const __m512i b = out_signed ? _mm512_packs_epi16(w, w) : _mm512_packus_epi16(w, w);
  return _mm512_castsi512_si256(_mm512_permutexvar_epi32(order, b));
}

// The output stage of the strips: 16 requantized bytes per column.
struct ByteOut {
  Requant rq;
  uint8_t* out;      // [columns][16]
  bool narrow;       // every |multiplier| < 1: StorePair's narrowing
  bool out_signed;
  __m512i zp16, order;  // for StorePair: the zero point as int16; the dwords in order after the packs
  void Store(int64_t column, __m512i acc) const {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + column * kLanes), RequantLanes(rq, acc));
  }
  // Columns `column` and `column + 1`.
  void StorePair(int64_t column, __m512i acc0, __m512i acc1) const {
    if (!narrow) {
      Store(column, acc0);
      Store(column + 1, acc1);
      return;
    }
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + column * kLanes),
                        RequantLanesPair(rq, zp16, order, out_signed, acc0, acc1));
  }
};

// The INT8 padded band X holds, per position (row, column), the 16
// channels' int16 pairs (x[column] - zp, x[column + 1] - zp), one per int32
// lane (64 bytes, like the FP32 kernel's 16 floats), so that one vpdpwssd
// adds two taps (kx, kx + 1) of 16 channels: the window row's weight pairs
// stay in registers, (w[2q], w[2q + 1]) of each channel, the last pair of an
// odd width with a zero weight.
constexpr int kMaxPairRows = 16;  // kernel_h of the pair weights on the stack

template <int kKw, int kS, int kR>
inline void PairStrip(const int16_t* x, int64_t row_step, const int32_t* w, int kernel_h, __m512i* acc) {
  constexpr int kPairs = (kKw + 1) / 2;
  constexpr int kCols = (kR - 1) * kS + 2 * (kPairs - 1) + 1;
#pragma GCC unroll 8
  for (int r = 0; r < kR; ++r) acc[r] = _mm512_setzero_si512();
  for (int ky = 0; ky < kernel_h; ++ky, x += row_step, w += kPairs * kLanes) {
    __m512i wv[kPairs];
#pragma GCC unroll 4
    for (int q = 0; q < kPairs; ++q) wv[q] = _mm512_loadu_si512(w + q * kLanes);
#pragma GCC unroll 32
    for (int ic = 0; ic < kCols; ++ic) {
      const __m512i v = _mm512_loadu_si512(x + ic * 2 * kLanes);
#pragma GCC unroll 4
      for (int q = 0; q < kPairs; ++q) {
        const int d = ic - 2 * q;
        if (d >= 0 && d % kS == 0 && d / kS < kR) acc[d / kS] = _mm512_dpwssd_epi32(acc[d / kS], v, wv[q]);
      }
    }
  }
}

template <int kKw, int kS, int kR>
void PairRowStrip(const int16_t* x, int64_t row_step, const int32_t* w, int kernel_h, const ByteOut& out,
                  int64_t index) {
  __m512i acc[kR] = {};
  PairStrip<kKw, kS, kR>(x, row_step, w, kernel_h, acc);
#pragma GCC unroll 4
  for (int r = 0; r + 1 < kR; r += 2) out.StorePair(index + r, acc[r], acc[r + 1]);
  if (kR % 2 == 1) out.Store(index + kR - 1, acc[kR - 1]);
}

using PairRowStripFn = void (*)(const int16_t*, int64_t, const int32_t*, int, const ByteOut&, int64_t);

template <int kKw, int kS>
PairRowStripFn PickPairStrip(int r) {
  switch (r) {
    case 1: return PairRowStrip<kKw, kS, 1>;
    case 2: return PairRowStrip<kKw, kS, 2>;
    case 3: return PairRowStrip<kKw, kS, 3>;
    case 4: return PairRowStrip<kKw, kS, 4>;
    case 5: return PairRowStrip<kKw, kS, 5>;
    case 6: return PairRowStrip<kKw, kS, 6>;
    case 7: return PairRowStrip<kKw, kS, 7>;
    default: return PairRowStrip<kKw, kS, 8>;
  }
}

PairRowStripFn PickPairStrip(int64_t kernel_w, int64_t stride_w, int r) {
  const bool s2 = stride_w == 2;
  if (kernel_w == 3) return s2 ? PickPairStrip<3, 2>(r) : PickPairStrip<3, 1>(r);
  if (kernel_w == 5) return s2 ? PickPairStrip<5, 2>(r) : PickPairStrip<5, 1>(r);
  return s2 ? PickPairStrip<7, 2>(r) : PickPairStrip<7, 1>(r);
}

// out[i] = table[in[i] ^ flip] on 64 bytes (lut_avx512vbmi.cc's steps).
inline __m512i Lookup(const __m512i table[4], __m512i flip, __m512i in) {
  const __m512i idx = _mm512_xor_si512(in, flip);
  const __m512i low = _mm512_permutex2var_epi8(table[0], idx, table[1]);
  const __m512i high = _mm512_permutex2var_epi8(table[2], idx, table[3]);
  return _mm512_mask_blend_epi8(_mm512_movepi8_mask(idx), low, high);
}

}  // namespace

void DepthwiseS8ChannelsAvx512Vbmi(const DepthwiseS8Channels& a) {
  const bool fits = a.LanesFit() && a.w_lanes != nullptr && LanesWindowFits(a.kernel_w, a.stride_w, a.dilation_w) &&
                    a.kernel_h <= kMaxPairRows;
  if (!fits) {
    DepthwiseS8ByPlanes(a, DepthwiseS8PlaneAvx512Vnni, ApplyTableAvx512Vbmi);
    return;
  }
  const int64_t wp = a.PaddedWidth(), width = a.width, pad_left = a.pad_left;
  const int64_t in_plane = a.height * a.width, out_plane = a.out_h * a.out_w;
  const int64_t taps = a.kernel_h * a.kernel_w;
  float* xp = a.scratch;                                                    // X of a band [rows][wp][16]
  auto* out = reinterpret_cast<uint8_t*>(xp + a.LanesPaddedFloats());       // [LanesBandOutputs()][16]
  const int32_t lo = a.y_signed ? -128 : 0, hi = a.y_signed ? 127 : 255;
  ByteOut store;
  Requant& rq = store.rq;
  store.out = out;
  rq.real_lo = _mm512_set1_ps(static_cast<float>(lo - a.y_zero_point));
  rq.real_hi = _mm512_set1_ps(static_cast<float>(hi - a.y_zero_point));
  rq.zp = _mm512_set1_epi32(a.y_zero_point);
  store.narrow = true;  // false for a NaN multiplier too
  for (int64_t c = 0; c < a.channels; ++c) store.narrow = store.narrow && std::fabs(a.multiplier[c]) < 1.0f;
  store.out_signed = a.y_signed;
  store.zp16 = _mm512_set1_epi16(static_cast<int16_t>(a.y_zero_point));
  store.order = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 0, 0, 0, 0, 0, 0, 0, 0);
  const PairRowStripFn full = PickPairStrip(a.kernel_w, a.stride_w, kStrip);
  const int tail_cols = static_cast<int>(a.out_w % kStrip);
  const PairRowStripFn tail = PickPairStrip(a.kernel_w, a.stride_w, tail_cols);
  const int64_t pairs = (a.kernel_w + 1) / 2;
  const __m512i low16 = _mm512_set1_epi32(0xFFFF);
  alignas(64) int32_t w_pairs[kMaxPairRows * 4 * kLanes];  // [kernel_h][pairs][16]
  __m512i table[4];
  if (a.table != nullptr)
    for (int i = 0; i < 4; ++i) table[i] = _mm512_loadu_si512(a.table + 64 * i);
  const __m512i flip = _mm512_set1_epi8(static_cast<char>(a.y_signed ? 0x80 : 0));
  const __m512i x_zp16 = _mm512_set1_epi16(static_cast<int16_t>(a.x_zero_point));
  // vpermw indices: pair_index puts element c (channel c of the first position) at int16 2c
  // and element 16 + c (of the second) at 2c + 1; pad_index puts element c at both, and
  // the mask 0xAAAAAAAA then keeps (0, the first position's channel c).
  alignas(64) int16_t pair_indices[32], pad_indices[32];
  for (int c = 0; c < kLanes; ++c) {
    pair_indices[2 * c] = pad_indices[2 * c] = pad_indices[2 * c + 1] = static_cast<int16_t>(c);
    pair_indices[2 * c + 1] = static_cast<int16_t>(16 + c);
  }
  const __m512i pair_index = _mm512_load_si512(pair_indices), pad_index = _mm512_load_si512(pad_indices);
  thread_local std::vector<uint8_t> t_buffer;  // fill's transposed positions, kept from call to call
  const auto* xb = static_cast<const uint8_t*>(a.x);
  auto* yb = static_cast<uint8_t*>(a.y);
  for (int64_t c0 = 0; c0 < a.channels; c0 += kLanes) {
    const int64_t nc = a.channels - c0 < kLanes ? a.channels - c0 : kLanes;
    const __mmask16 cmask = First16(nc);
    const uint8_t* x = xb + c0 * in_plane;
    uint8_t* y = yb + c0 * out_plane;
    // Plane rows [lo, hi) of 16 channels into X: the positions' 16 channel
    // bytes first (16x16 transposes into `t`, [position][16]), then per
    // position the pair (x[ix], x[ix + 1]) - zp of each channel from one
    // 32-byte load of t (two positions), widened to int16 and interleaved by
    // one vpermw; the last column of a row pairs with 0, and the padding
    // column left of a row holds (0, x[0]).
    auto fill = [&](int64_t lo, int64_t hi, float* xr) {
      auto* xq = reinterpret_cast<int16_t*>(xr);
      const int64_t first = lo * width, end = hi * width;
      // Whole groups of 16 positions, and 16 bytes more: the pair load of the last position.
      uint8_t* t = ReserveBytes(t_buffer, ((end - first + 15) / 16 * 16 + 1) * kLanes);
      for (int64_t p0 = first; p0 < end; p0 += 16) {
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
        for (int j = 0; j < 4; ++j) _mm512_storeu_si512(t + (p0 - first) * kLanes + 64 * j, m[j]);
      }
      auto widen = [&](const uint8_t* two, __mmask32 keep) {  // positions (p, p + 1) - zp as int16, masked
        const __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(two));
        return _mm512_maskz_sub_epi16(keep, a.x_signed ? _mm512_cvtepi8_epi16(b) : _mm512_cvtepu8_epi16(b), x_zp16);
      };
      // With stride_w 2 the strips read the pairs of even columns of X only (a
      // window's pair starts at 2 ox + 2q): the odd ones are left unwritten.
      const int64_t step = a.stride_w == 2 ? 2 : 1;
      const int64_t ix0 = step == 2 && pad_left % 2 == 1 ? 1 : 0;  // X column ix + pad_left even
      const bool last = step == 1 || (width - 1 + pad_left) % 2 == 0, pad = pad_left > 0 && (step == 1 || pad_left % 2 == 1);
      for (int64_t iy = 0; iy < hi - lo; ++iy) {
        const uint8_t* tr = t + iy * width * kLanes;
        int16_t* row = xq + (iy * wp + pad_left) * 2 * kLanes;
        for (int64_t ix = ix0; ix + 1 < width; ix += step)
          _mm512_storeu_si512(row + ix * 2 * kLanes, _mm512_permutexvar_epi16(pair_index, widen(tr + ix * kLanes, ~0u)));
        if (last) {
          _mm512_storeu_si512(row + (width - 1) * 2 * kLanes,
                              _mm512_permutexvar_epi16(pair_index, widen(tr + (width - 1) * kLanes, 0xFFFFu)));
        }
        if (pad) {
          _mm512_storeu_si512(row - 2 * kLanes, _mm512_maskz_permutexvar_epi16(0xAAAAAAAAu, pad_index,
                                                                                   widen(tr, 0xFFFFu)));
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
    rq.mult = _mm512_maskz_loadu_ps(cmask, a.multiplier + c0);
    // The weight pairs of the block (from w_lanes: exact small integers in float).
    const float* wl = a.w_lanes + (c0 / kLanes) * taps * kLanes;
    for (int64_t ky = 0; ky < a.kernel_h; ++ky)
      for (int64_t q = 0; q < pairs; ++q) {
        const int64_t kx = 2 * q;
        const __m512i first = _mm512_cvttps_epi32(_mm512_loadu_ps(wl + (ky * a.kernel_w + kx) * kLanes));
        const __m512i second = kx + 1 < a.kernel_w
                                   ? _mm512_cvttps_epi32(_mm512_loadu_ps(wl + (ky * a.kernel_w + kx + 1) * kLanes))
                                   : _mm512_setzero_si512();
        _mm512_store_si512(w_pairs + (ky * pairs + q) * kLanes,
                           _mm512_or_si512(_mm512_and_si512(first, low16), _mm512_slli_epi32(second, 16)));
      }
    auto sums = [&](int64_t rows) {
      const auto* xq = reinterpret_cast<const int16_t*>(xp);
      const int64_t row_step = a.dilation_h * wp * 2 * kLanes;  // int16 from one window row to the next
      const int kh = static_cast<int>(a.kernel_h);
      for (int64_t oy = 0; oy < rows; ++oy) {
        const int16_t* xr = xq + oy * a.stride_h * wp * 2 * kLanes;
        int64_t ox = 0;
        for (; ox + kStrip <= a.out_w; ox += kStrip)
          full(xr + ox * a.stride_w * 2 * kLanes, row_step, w_pairs, kh, store, oy * a.out_w + ox);
        if (tail_cols > 0) tail(xr + ox * a.stride_w * 2 * kLanes, row_step, w_pairs, kh, store, oy * a.out_w + ox);
      }
    };
    LanesBlock(a, xp, fill, sums, flush);
  }
}

SPARQ_CPU_TARGET_END

}  // namespace cpu
}  // namespace sparq

#endif  // SPARQ_CPU_X86
