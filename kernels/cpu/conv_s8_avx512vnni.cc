// conv_s8_nchw_avx512vnni: the register tile of the NCHW INT8 convolution
// (driver and layouts: conv_s8.cc, internal.h ConvS8Tile) on vpdpbusd, with
// the requantization in registers.
//
// Tile: 8 channels x 2 blocks (32 positions) = 16 zmm accumulators (a tile
// of one channel: TileOneChannel). Per step
// of 4 k: 2 loads of activations (64 bytes each: 16 positions x 4 u8), 8
// broadcasts of weights (4 int8 of one channel), 16 vpdpbusd. The output
// stage adds the channel's offset, scales, rounds (ties to even), clamps and
// narrows to 16 bytes per (channel, block), stored straight into the NCHW row.
// The activations' blocks are packed 64 positions at a time (Pack4).
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "kernels/cpu/cpu_target.h"
#include "kernels/cpu/internal.h"

#if SPARQ_CPU_X86
#include <immintrin.h>

namespace sparq {
namespace cpu {

SPARQ_CPU_TARGET_BEGIN(SPARQ_CPU_AVX512VNNI_FEATURES)
#if defined(__GNUC__) && !defined(__clang__)
// GCC bug 105593 again (cpu_target.h), reported here as -Wuninitialized.
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif

namespace {

inline int32_t LoadS32(const void* p) {
  int32_t v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

// RequantizeS32Ref for 16 accumulators of one channel, stored as `count`
// bytes. The same value in fewer steps than RequantRowAvx512: clamping
// before rounding gives the same integer (the bounds are integers and
// rounding is monotone), the conversion rounds to nearest even by its
// embedded rounding (not MXCSR's mode), and the clamped value plus the zero
// point already lies in the type's range. A NaN product (only possible with
// a non-finite multiplier) becomes the zero point, as in the reference.
struct Requant {
  __m512 real_lo, real_hi;
  __m512i zp;
  bool nan_possible;

  Requant(int32_t zero_point, bool out_signed, bool multipliers_finite) {
    const int32_t lo = out_signed ? -128 : 0, hi = out_signed ? 127 : 255;
    real_lo = _mm512_set1_ps(static_cast<float>(lo - zero_point));
    real_hi = _mm512_set1_ps(static_cast<float>(hi - zero_point));
    zp = _mm512_set1_epi32(zero_point);
    nan_possible = !multipliers_finite;
  }
  // `acc` already holds the channel's offset.
  void Store(__m512i acc, float multiplier, uint8_t* dst, int count) const {
    __m512 real = _mm512_mul_ps(_mm512_cvtepi32_ps(acc), _mm512_set1_ps(multiplier));
    if (nan_possible) {
      real = _mm512_mask_mov_ps(real, _mm512_cmp_ps_mask(real, real, _CMP_UNORD_Q), _mm512_setzero_ps());
    }
    real = _mm512_min_ps(_mm512_max_ps(real, real_lo), real_hi);
    const __m512i q =
        _mm512_add_epi32(_mm512_cvt_roundps_epi32(real, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC), zp);
    if (count >= 16) {  // unmasked: the masked vpmovdb to memory is several times slower
      _mm_storeu_si128(reinterpret_cast<__m128i*>(dst), _mm512_cvtepi32_epi8(q));
    } else if (count > 0) {
      _mm_mask_storeu_epi8(dst, static_cast<__mmask16>((1u << count) - 1), _mm512_cvtepi32_epi8(q));
    }
  }
};

// Store's bytes for the two blocks of one channel (32 positions), in fewer
// steps when every |multiplier| < 1 (ConvS8Tile::multipliers_below_one): a
// product |float(acc) * m| < 2^31 then converts to its rounded int32 without
// a clamp, and saturating narrowing does the clamping. With r = round(real),
//   sat8(sat16(sat16(r) + zp)) = saturate(r + zp)
// because |zp| <= 255: wherever sat16 changes a value, the value and r + zp
// both lie beyond the byte range on the same side. vpackssdw, vpaddsw and
// vpack(u)swb work per 128-bit lane; one vpermd puts the 32 bytes in order.
struct PackedRequant {
  __m512i zp16, order;
  bool out_signed;

  PackedRequant(int32_t zero_point, bool out_signed_) : out_signed(out_signed_) {
    zp16 = _mm512_set1_epi16(static_cast<int16_t>(zero_point));
    // After the packs, lane L holds dwords (positions 4L..4L+3 of block 0, of block 1, copies).
    order = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 0, 0, 0, 0, 0, 0, 0, 0);
  }
  void Store(__m512i acc0, __m512i acc1, float multiplier, uint8_t* dst, int count) const {
    const __m512 m = _mm512_set1_ps(multiplier);
    const __m512i q0 = _mm512_cvt_roundps_epi32(_mm512_mul_ps(_mm512_cvtepi32_ps(acc0), m),
                                                _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    const __m512i q1 = _mm512_cvt_roundps_epi32(_mm512_mul_ps(_mm512_cvtepi32_ps(acc1), m),
                                                _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    const __m512i w = _mm512_adds_epi16(_mm512_packs_epi32(q0, q1), zp16);
    const __m512i b = out_signed ? _mm512_packs_epi16(w, w) : _mm512_packus_epi16(w, w);
    const __m256i bytes = _mm512_castsi512_si256(_mm512_permutexvar_epi32(order, b));
    if (count >= 32) {
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst), bytes);
    } else {
      _mm256_mask_storeu_epi8(dst, static_cast<__mmask32>((uint64_t{1} << count) - 1), bytes);
    }
  }
};

// The raw finish of one channel's blocks (ConvS8Tile::y_s32 / y_f32): the
// int32 sums (the offset already in), or float(acc) * scale then + bias, one
// rounding each (this file is built with -ffp-contract=off: no FMA), as
// ConvS8Driver's loops and the reference epilogue (kernels/ref/qdq_fused_ops.cc).
inline void StoreRaw(const ConvS8Tile& t, int c, __m512i acc0, __m512i acc1) {
  const int n0 = t.positions < 16 ? t.positions : 16, n1 = t.blocks == 2 ? t.positions - 16 : 0;
  const __mmask16 m0 = static_cast<__mmask16>(n0 >= 16 ? 0xFFFFu : (1u << n0) - 1);
  const __mmask16 m1 = static_cast<__mmask16>(n1 >= 16 ? 0xFFFFu : n1 > 0 ? (1u << n1) - 1 : 0u);
  if (t.y_s32 != nullptr) {
    int32_t* y = t.y_s32 + c * t.ld_y;
    if (n0 >= 16) {
      _mm512_storeu_si512(y, acc0);
    } else {
      _mm512_mask_storeu_epi32(y, m0, acc0);
    }
    if (n1 >= 16) {
      _mm512_storeu_si512(y + 16, acc1);
    } else if (n1 > 0) {
      _mm512_mask_storeu_epi32(y + 16, m1, acc1);
    }
    return;
  }
  float* y = t.y_f32 + c * t.ld_y;
  const __m512 scale = _mm512_set1_ps(t.f32_scale[c]);
  __m512 v0 = _mm512_mul_ps(_mm512_cvtepi32_ps(acc0), scale);
  __m512 v1 = _mm512_mul_ps(_mm512_cvtepi32_ps(acc1), scale);
  if (t.f32_bias != nullptr) {
    const __m512 bias = _mm512_set1_ps(t.f32_bias[c]);
    v0 = _mm512_add_ps(v0, bias);
    v1 = _mm512_add_ps(v1, bias);
  }
  if (n0 >= 16) {
    _mm512_storeu_ps(y, v0);
  } else {
    _mm512_mask_storeu_ps(y, m0, v0);
  }
  if (n1 >= 16) {
    _mm512_storeu_ps(y + 16, v1);
  } else if (n1 > 0) {
    _mm512_mask_storeu_ps(y + 16, m1, v1);
  }
}

// Named accumulators, not an array: GCC 12 spills an array of them (see
// gemm_s8_avx512vnni.cc).
#define SPARQ_CONV_CH2(c)                                              \
  {                                                                    \
    const __m512i wb = _mm512_set1_epi32(LoadS32(ws + 4 * (c)));       \
    a##c##0 = _mm512_dpbusd_epi32(a##c##0, x0, wb);                    \
    a##c##1 = _mm512_dpbusd_epi32(a##c##1, x1, wb);                    \
  }
#define SPARQ_CONV_CH1(c)                                              \
  {                                                                    \
    const __m512i wb = _mm512_set1_epi32(LoadS32(ws + 4 * (c)));       \
    a##c##0 = _mm512_dpbusd_epi32(a##c##0, x0, wb);                    \
  }

#define SPARQ_CONV_LOAD(c)                                                        \
  a##c##0 = _mm512_loadu_si512(t.partial + 32 * (c)), a##c##1 = _mm512_loadu_si512(t.partial + 32 * (c) + 16);

#define SPARQ_CONV_INIT(c) a##c##0 = a##c##1 = _mm512_set1_epi32(t.offset[c]);

// A tile of one channel (a convolution with one output channel, basic-pitch's
// last layers): per step 2 loads, 1 broadcast and 2 vpdpbusd instead of the
// 16 of which 14 would sum the panel's zero channels. Even and odd steps in
// separate sums (int32 sums wrap mod 2^32: the split changes no bit).
void TileOneChannel(const ConvS8Tile& t) {
  const __m512i zero = _mm512_setzero_si512();
  __m512i e0, e1, o0 = zero, o1 = zero;
  if (t.first_slice) {
    e0 = e1 = _mm512_set1_epi32(t.offset[0]);
  } else {
    e0 = _mm512_loadu_si512(t.partial), e1 = _mm512_loadu_si512(t.partial + 16);
  }
  const uint8_t* x0 = t.col;
  const uint8_t* x1 = t.col + t.block_stride;  // read only with 2 blocks
  const bool two = t.blocks == 2;
  int64_t s = 0;
  for (; s + 2 <= t.steps; s += 2) {
    const __m512i we = _mm512_set1_epi32(LoadS32(t.w + s * 64)), wo = _mm512_set1_epi32(LoadS32(t.w + s * 64 + 64));
    e0 = _mm512_dpbusd_epi32(e0, _mm512_loadu_si512(x0 + s * 64), we);
    o0 = _mm512_dpbusd_epi32(o0, _mm512_loadu_si512(x0 + s * 64 + 64), wo);
    if (two) {
      e1 = _mm512_dpbusd_epi32(e1, _mm512_loadu_si512(x1 + s * 64), we);
      o1 = _mm512_dpbusd_epi32(o1, _mm512_loadu_si512(x1 + s * 64 + 64), wo);
    }
  }
  if (s < t.steps) {
    const __m512i we = _mm512_set1_epi32(LoadS32(t.w + s * 64));
    e0 = _mm512_dpbusd_epi32(e0, _mm512_loadu_si512(x0 + s * 64), we);
    if (two) e1 = _mm512_dpbusd_epi32(e1, _mm512_loadu_si512(x1 + s * 64), we);
  }
  const __m512i a0 = _mm512_add_epi32(e0, o0), a1 = _mm512_add_epi32(e1, o1);
  if (!t.last_slice) {
    _mm512_storeu_si512(t.partial, a0), _mm512_storeu_si512(t.partial + 16, a1);
    return;
  }
  if (t.y_s32 != nullptr || t.y_f32 != nullptr) {
    StoreRaw(t, 0, a0, a1);
    return;
  }
  if (two && t.multipliers_below_one) {
    PackedRequant(t.zero_point, t.out_signed).Store(a0, a1, t.multiplier[0], t.y, t.positions);
    return;
  }
  const Requant rq(t.zero_point, t.out_signed, t.multipliers_finite);
  rq.Store(a0, t.multiplier[0], t.y, t.positions);
  if (two) rq.Store(a1, t.multiplier[0], t.y + 16, t.positions - 16);
}

void Tile(const ConvS8Tile& t) {
  if (t.channels == 1) return TileOneChannel(t);
  // The sums start at the channel's offset (added once, in the first slice).
  __m512i a00, a01, a10, a11, a20, a21, a30, a31, a40, a41, a50, a51, a60, a61, a70, a71;
  if (t.first_slice) {
    // clang-format off
    SPARQ_CONV_INIT(0) SPARQ_CONV_INIT(1) SPARQ_CONV_INIT(2) SPARQ_CONV_INIT(3)
    SPARQ_CONV_INIT(4) SPARQ_CONV_INIT(5) SPARQ_CONV_INIT(6) SPARQ_CONV_INIT(7)
    // clang-format on
  } else {
    // clang-format off
    SPARQ_CONV_LOAD(0) SPARQ_CONV_LOAD(1) SPARQ_CONV_LOAD(2) SPARQ_CONV_LOAD(3)
    SPARQ_CONV_LOAD(4) SPARQ_CONV_LOAD(5) SPARQ_CONV_LOAD(6) SPARQ_CONV_LOAD(7)
    // clang-format on
  }
  const uint8_t* w = t.w;
  const uint8_t* x = t.col;
  if (t.blocks == 2) {
    const uint8_t* x_second = x + t.block_stride;
    for (int64_t s = 0; s < t.steps; ++s) {
      const __m512i x0 = _mm512_loadu_si512(x + s * 64);
      const __m512i x1 = _mm512_loadu_si512(x_second + s * 64);
      const uint8_t* ws = w + s * 64;
      // clang-format off
      SPARQ_CONV_CH2(0) SPARQ_CONV_CH2(1) SPARQ_CONV_CH2(2) SPARQ_CONV_CH2(3)
      SPARQ_CONV_CH2(4) SPARQ_CONV_CH2(5) SPARQ_CONV_CH2(6) SPARQ_CONV_CH2(7)
      // clang-format on
    }
  } else {
    for (int64_t s = 0; s < t.steps; ++s) {
      const __m512i x0 = _mm512_loadu_si512(x + s * 64);
      const uint8_t* ws = w + s * 64;
      // clang-format off
      SPARQ_CONV_CH1(0) SPARQ_CONV_CH1(1) SPARQ_CONV_CH1(2) SPARQ_CONV_CH1(3)
      SPARQ_CONV_CH1(4) SPARQ_CONV_CH1(5) SPARQ_CONV_CH1(6) SPARQ_CONV_CH1(7)
      // clang-format on
    }
  }
  // Named registers here too: an array of them is spilled to the stack and
  // read back (32 extra memory operations per tile).
  if (!t.last_slice) {
#define SPARQ_CONV_SAVE(c) \
  _mm512_storeu_si512(t.partial + 32 * (c), a##c##0), _mm512_storeu_si512(t.partial + 32 * (c) + 16, a##c##1);
    // clang-format off
    SPARQ_CONV_SAVE(0) SPARQ_CONV_SAVE(1) SPARQ_CONV_SAVE(2) SPARQ_CONV_SAVE(3)
    SPARQ_CONV_SAVE(4) SPARQ_CONV_SAVE(5) SPARQ_CONV_SAVE(6) SPARQ_CONV_SAVE(7)
    // clang-format on
#undef SPARQ_CONV_SAVE
    return;
  }
  if (t.y_s32 != nullptr || t.y_f32 != nullptr) {
#define SPARQ_CONV_RAW(c) \
  if ((c) < t.channels) StoreRaw(t, (c), a##c##0, a##c##1);
    // clang-format off
    SPARQ_CONV_RAW(0) SPARQ_CONV_RAW(1) SPARQ_CONV_RAW(2) SPARQ_CONV_RAW(3)
    SPARQ_CONV_RAW(4) SPARQ_CONV_RAW(5) SPARQ_CONV_RAW(6) SPARQ_CONV_RAW(7)
    // clang-format on
#undef SPARQ_CONV_RAW
    return;
  }
  if (t.blocks == 2 && t.multipliers_below_one) {
    const PackedRequant rq(t.zero_point, t.out_signed);
#define SPARQ_CONV_STORE(c) \
  if ((c) < t.channels) rq.Store(a##c##0, a##c##1, t.multiplier[c], t.y + (c) * t.ld_y, t.positions);
    // clang-format off
    SPARQ_CONV_STORE(0) SPARQ_CONV_STORE(1) SPARQ_CONV_STORE(2) SPARQ_CONV_STORE(3)
    SPARQ_CONV_STORE(4) SPARQ_CONV_STORE(5) SPARQ_CONV_STORE(6) SPARQ_CONV_STORE(7)
    // clang-format on
#undef SPARQ_CONV_STORE
    return;
  }
  const Requant rq(t.zero_point, t.out_signed, t.multipliers_finite);
#define SPARQ_CONV_STORE(c)                                                                        \
  if ((c) < t.channels) {                                                                          \
    uint8_t* y = t.y + (c) * t.ld_y;                                                               \
    rq.Store(a##c##0, t.multiplier[c], y, t.positions);                                            \
    if (t.blocks == 2) rq.Store(a##c##1, t.multiplier[c], y + 16, t.positions - 16);              \
  }
  // clang-format off
  SPARQ_CONV_STORE(0) SPARQ_CONV_STORE(1) SPARQ_CONV_STORE(2) SPARQ_CONV_STORE(3)
  SPARQ_CONV_STORE(4) SPARQ_CONV_STORE(5) SPARQ_CONV_STORE(6) SPARQ_CONV_STORE(7)
  // clang-format on
#undef SPARQ_CONV_STORE
}

#undef SPARQ_CONV_INIT
#undef SPARQ_CONV_LOAD
#undef SPARQ_CONV_CH2
#undef SPARQ_CONV_CH1

// Pack4's interleave of one step: rows v[0..3] (64 positions each) into
// quads, block b's 64 bytes to dst + b * block_bytes (blocks [0, blocks)).
inline void StoreStep(const __m512i v[4], int64_t blocks, uint8_t* dst, int64_t block_bytes) {
  const __m512i ab_lo = _mm512_unpacklo_epi8(v[0], v[1]), ab_hi = _mm512_unpackhi_epi8(v[0], v[1]);
  const __m512i cd_lo = _mm512_unpacklo_epi8(v[2], v[3]), cd_hi = _mm512_unpackhi_epi8(v[2], v[3]);
  const __m512i o0 = _mm512_unpacklo_epi16(ab_lo, cd_lo), o1 = _mm512_unpackhi_epi16(ab_lo, cd_lo);
  const __m512i o2 = _mm512_unpacklo_epi16(ab_hi, cd_hi), o3 = _mm512_unpackhi_epi16(ab_hi, cd_hi);
  const __m512i t0 = _mm512_shuffle_i64x2(o0, o1, 0x44), t1 = _mm512_shuffle_i64x2(o0, o1, 0xEE);
  const __m512i t2 = _mm512_shuffle_i64x2(o2, o3, 0x44), t3 = _mm512_shuffle_i64x2(o2, o3, 0xEE);
  _mm512_storeu_si512(dst, _mm512_shuffle_i64x2(t0, t2, 0x88));
  if (blocks > 1) _mm512_storeu_si512(dst + block_bytes, _mm512_shuffle_i64x2(t0, t2, 0xDD));
  if (blocks > 2) _mm512_storeu_si512(dst + 2 * block_bytes, _mm512_shuffle_i64x2(t1, t3, 0x88));
  if (blocks > 3) _mm512_storeu_si512(dst + 3 * block_bytes, _mm512_shuffle_i64x2(t1, t3, 0xDD));
}

// Four blocks of u8 steps (ConvS8Pack4Fn): per step, 64 positions of 4 rows
// interleaved into quads (bytes, then pairs, within each 128-bit lane), then
// a 4 x 4 transpose of the lanes so that block b gets lane b of each.
void Pack4(const uint8_t* col, int64_t ld, int64_t k, int64_t steps, uint8_t flip, uint8_t* dst, int64_t block_bytes) {
  const __m512i f = _mm512_set1_epi8(static_cast<char>(flip));
  for (int64_t s = 0; s < steps; ++s) {
    __m512i v[4];
    for (int r = 0; r < 4; ++r) {
      const int64_t row = 4 * s + r;
      v[r] = row < k ? _mm512_xor_si512(_mm512_loadu_si512(col + row * ld), f) : _mm512_setzero_si512();
    }
    StoreStep(v, 4, dst + s * 64, block_bytes);
  }
}

// ConvS8UnfoldPackFn: 64 positions (4 blocks) per pass, as Pack4 packs them
// from a col, but each row (channel, tap) is one masked 64-byte load of the
// channel's plane shifted by the tap (q + dy * width + dx), with `pad` where
// the tap falls outside the image and 0 past the last position (both XOR
// flip). The taps' masks are built once per pass from the output rows the
// pass spans (at most 64 / kConvS8UnfoldPackMinWidth + 2). No col goes
// through memory: YOLOv8n's 3x3 layers unfolded 15 MB per image into pieces
// of [K, 256] that Pack4 read back (UnfoldPositions + Pack4: ~15% of the
// batch-16 time, bench/RESULTS.md, yolo22).
void UnfoldPack(const ConvGeometry& g, const uint8_t* xi, uint8_t pad, int64_t k, int64_t steps, uint8_t flip,
                int64_t b0, int64_t b1, uint8_t* packed) {
  const int64_t p = g.out_size(), w = g.width, h = g.height, plane = h * w;
  const int64_t taps = g.kernel_h * g.kernel_w, block_bytes = steps * 64;
  thread_local std::vector<int64_t> tap_buffer;  // per tap: dy, dx, shift, then the pass's mask (as int64_t bits)
  if (static_cast<int64_t>(tap_buffer.size()) < 4 * taps) tap_buffer.resize(static_cast<size_t>(4 * taps));
  int64_t* const tap_info = tap_buffer.data();
  for (int64_t ky = 0; ky < g.kernel_h; ++ky) {
    for (int64_t kx = 0; kx < g.kernel_w; ++kx) {
      int64_t* t = tap_info + 4 * (ky * g.kernel_w + kx);
      t[0] = ky * g.dilation_h - g.pad_top, t[1] = kx * g.dilation_w - g.pad_left, t[2] = t[0] * w + t[1];
    }
  }
  auto bits = [](int64_t n) { return n >= 64 ? ~uint64_t{0} : (uint64_t{1} << n) - 1; };
  const __m512i f = _mm512_set1_epi8(static_cast<char>(flip)), padv = _mm512_set1_epi8(static_cast<char>(pad));
  for (int64_t b = b0; b < b1; b += 4) {
    const int64_t q0 = b * 16, q_end = std::min(p, q0 + 64);
    const __mmask64 in_p = static_cast<__mmask64>(bits(q_end - q0));
    for (int64_t tap = 0; tap < taps; ++tap) {
      int64_t* t = tap_info + 4 * tap;
      const int64_t dy = t[0], dx = t[1];
      const int64_t col_lo = std::max<int64_t>(0, -dx), col_hi = std::min(w, w - dx);  // columns ox inside
      uint64_t m = 0;
      for (int64_t oy = q0 / w; oy * w < q_end; ++oy) {
        if (oy + dy < 0 || oy + dy >= h) continue;
        const int64_t lo = std::max(q0, oy * w + col_lo), hi = std::min(q_end, oy * w + col_hi);
        if (hi > lo) m |= bits(hi - lo) << (lo - q0);
      }
      t[3] = static_cast<int64_t>(m);
    }
    // Lanes before the last position: pad where the load is masked off, else flip (0 after the XOR).
    const __m512i fill = _mm512_mask_blend_epi8(in_p, f, padv);
    const int64_t blocks = std::min<int64_t>(4, b1 - b);
    uint8_t* dst = packed + (b - b0) * block_bytes;
    const uint8_t* src = xi + q0;  // channel ch's plane at src + ch * plane
    int64_t ch = 0, tap = 0;       // of row 4s + r
    for (int64_t s = 0; s < steps; ++s, dst += 64) {
      __m512i v[4];
      for (int r = 0; r < 4; ++r) {
        if (4 * s + r >= k) {
          v[r] = _mm512_setzero_si512();
          continue;
        }
        const int64_t* t = tap_info + 4 * tap;
        // Masked-off lanes are not read (no fault), wherever the shifted address points.
        const void* from = reinterpret_cast<const void*>(reinterpret_cast<uintptr_t>(src) + ch * plane + t[2]);
        v[r] = _mm512_xor_si512(_mm512_mask_loadu_epi8(fill, static_cast<__mmask64>(t[3]), from), f);
        if (++tap == taps) tap = 0, ++ch;
      }
      StoreStep(v, blocks, dst, block_bytes);
    }
  }
}

// ConvS8ColumnFn for N positions: each step loads the panel's 64 bytes once
// and runs one broadcast and one vpdpbusd per position (even and odd steps in
// two accumulators: the int32 sums wrap mod 2^32, so the split changes no
// bit), then each position's lanes are finished as the tile finishes them:
// Requant's steps to a byte, or the raw int32, or float(acc) * scale + bias
// with one rounding each (StoreRaw).
template <int N>
void ColumnN(const ConvS8Column& c) {
  __m512i even[N], odd[N];
  for (int i = 0; i < N; ++i) even[i] = _mm512_loadu_si512(c.offset), odd[i] = _mm512_setzero_si512();
  int64_t s = 0;
  for (; s + 2 <= c.steps; s += 2) {
    const uint8_t* x = c.col + s * 64;
    const __m512i w0 = _mm512_loadu_si512(c.w + s * 64), w1 = _mm512_loadu_si512(c.w + s * 64 + 64);
    for (int i = 0; i < N; ++i) {
      even[i] = _mm512_dpbusd_epi32(even[i], _mm512_set1_epi32(LoadS32(x + 4 * i)), w0);
      odd[i] = _mm512_dpbusd_epi32(odd[i], _mm512_set1_epi32(LoadS32(x + 64 + 4 * i)), w1);
    }
  }
  if (s < c.steps) {
    const __m512i w0 = _mm512_loadu_si512(c.w + s * 64);
    for (int i = 0; i < N; ++i)
      even[i] = _mm512_dpbusd_epi32(even[i], _mm512_set1_epi32(LoadS32(c.col + s * 64 + 4 * i)), w0);
  }
  const __mmask16 lanes = static_cast<__mmask16>((1u << c.lane_end) - 1);
  alignas(64) int32_t out[N][16];  // lane j of position i, for the strided stores
  if (c.y_s32 != nullptr || c.y_f32 != nullptr) {
    const __m512 scale = c.y_f32 != nullptr ? _mm512_maskz_loadu_ps(lanes, c.f32_scale) : _mm512_setzero_ps();
    const __m512 bias = c.f32_bias != nullptr ? _mm512_maskz_loadu_ps(lanes, c.f32_bias) : _mm512_setzero_ps();
    for (int i = 0; i < N; ++i) {
      const __m512i acc = _mm512_add_epi32(even[i], odd[i]);
      if (c.y_s32 != nullptr) {
        _mm512_store_si512(out[i], acc);
        continue;
      }
      __m512 v = _mm512_mul_ps(_mm512_cvtepi32_ps(acc), scale);
      if (c.f32_bias != nullptr) v = _mm512_add_ps(v, bias);
      _mm512_store_ps(reinterpret_cast<float*>(out[i]), v);
    }
    // Raw values are 4 bytes either way: copy them as int32 bits.
    int32_t* y = c.y_s32 != nullptr ? c.y_s32 : reinterpret_cast<int32_t*>(c.y_f32);
    for (int j = c.lane_begin; j < c.lane_end; ++j) {
      for (int i = 0; i < N; ++i) y[j * c.ld_y + i] = out[i][j];
    }
    return;
  }
  const int32_t lo = c.out_signed ? -128 : 0, hi = c.out_signed ? 127 : 255;
  const __m512 multiplier = _mm512_maskz_loadu_ps(lanes, c.multiplier);
  for (int i = 0; i < N; ++i) {
    __m512 real = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_add_epi32(even[i], odd[i])), multiplier);
    if (!c.multipliers_finite) {
      real = _mm512_mask_mov_ps(real, _mm512_cmp_ps_mask(real, real, _CMP_UNORD_Q), _mm512_setzero_ps());
    }
    real = _mm512_min_ps(_mm512_max_ps(real, _mm512_set1_ps(static_cast<float>(lo - c.zero_point))),
                         _mm512_set1_ps(static_cast<float>(hi - c.zero_point)));
    _mm512_store_si512(out[i],
                       _mm512_add_epi32(_mm512_cvt_roundps_epi32(real, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC),
                                        _mm512_set1_epi32(c.zero_point)));
  }
  for (int j = c.lane_begin; j < c.lane_end; ++j) {
    for (int i = 0; i < N; ++i) c.y[j * c.ld_y + i] = static_cast<uint8_t>(out[i][j]);
  }
}

void Column(const ConvS8Column& c) {
  static_assert(kConvS8ColumnMax == 4, "one ColumnN per position count");
  switch (c.positions) {
    case 1:
      return ColumnN<1>(c);
    case 2:
      return ColumnN<2>(c);
    case 3:
      return ColumnN<3>(c);
    default:
      return ColumnN<4>(c);
  }
}

}  // namespace

void ConvS8Avx512Vnni(const ConvS8Args& args) {
  ConvS8Driver(args, Tile, Pack4, Column, /*raw_tile=*/true, UnfoldPack);
}

SPARQ_CPU_TARGET_END

}  // namespace cpu
}  // namespace sparq

#endif  // SPARQ_CPU_X86
