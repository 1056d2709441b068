// gemm_s8s8_avx512vnni: the INT8 GEMM register tile on vpdpbusd, the packing
// of A strips (an 8 x 8 transpose of 4-byte groups) and the AVX-512
// requantization of a row. Weights in panel16x4_s8; the driver and the +128
// correction are in gemm_s8.cc.
//
// Tile: 8 rows x 2 panels (32 columns) = 16 zmm accumulators. Per step of 4 k:
//   2 loads of W (64 bytes each: 16 columns x 4 k), 8 broadcasts of A (4 bytes
//   of one row), 16 vpdpbusd (each 16 lanes x 4 u8*s8 products into int32).
// One row of A (M = 1) runs a 1 x 4 panels tile instead (TileRow).
#include <cstdint>
#include <cstring>

#include "kernels/cpu/cpu_target.h"
#include "kernels/cpu/internal.h"

#if SPARQ_CPU_X86
#include <immintrin.h>

namespace sparq {
namespace cpu {

SPARQ_CPU_TARGET_BEGIN(SPARQ_CPU_AVX512VNNI_FEATURES)

namespace {

constexpr int kMr = 8;
constexpr int kMaxPanels = 2;

inline int32_t LoadS32(const void* p) {
  int32_t v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

// Writes (or adds, with `accumulate`) the 8 x 16 * kPanels accumulators to c.
template <int kPanels>
void StoreTile(const __m512i (&acc)[kMr][kPanels], int32_t* c, int64_t ldc, bool accumulate) {
  for (int r = 0; r < kMr; ++r) {
    for (int p = 0; p < kPanels; ++p) {
      int32_t* dst = c + r * ldc + p * 16;
      __m512i v = acc[r][p];
      if (accumulate) v = _mm512_add_epi32(v, _mm512_loadu_si512(dst));
      _mm512_storeu_si512(dst, v);
    }
  }
}

// The accumulators are named variables, not an array: with an array GCC 12
// copies every accumulator through other registers (and the stack) on each
// step, which halved the tile's speed; clang compiles either form cleanly.
#define SPARQ_VNNI_ROW2(r)                                      \
  {                                                             \
    const __m512i x = _mm512_set1_epi32(LoadS32(as + 4 * (r))); \
    c##r##0 = _mm512_dpbusd_epi32(c##r##0, x, w0);              \
    c##r##1 = _mm512_dpbusd_epi32(c##r##1, x, w1);              \
  }
#define SPARQ_VNNI_ROW1(r)                                      \
  {                                                             \
    const __m512i x = _mm512_set1_epi32(LoadS32(as + 4 * (r))); \
    c##r##0 = _mm512_dpbusd_epi32(c##r##0, x, w0);              \
  }

void TileVnni2(int64_t steps, const uint8_t* a, const int8_t* b, int64_t b_panel_stride, int32_t* c, int64_t ldc,
               bool accumulate) {
  const __m512i z = _mm512_setzero_si512();
  __m512i c00 = z, c01 = z, c10 = z, c11 = z, c20 = z, c21 = z, c30 = z, c31 = z;
  __m512i c40 = z, c41 = z, c50 = z, c51 = z, c60 = z, c61 = z, c70 = z, c71 = z;
  for (int64_t s = 0; s < steps; ++s) {
    const __m512i w0 = _mm512_loadu_si512(b + s * 64);
    const __m512i w1 = _mm512_loadu_si512(b + b_panel_stride + s * 64);
    const uint8_t* as = a + s * kMr * 4;
    // clang-format off
    SPARQ_VNNI_ROW2(0) SPARQ_VNNI_ROW2(1) SPARQ_VNNI_ROW2(2) SPARQ_VNNI_ROW2(3)
    SPARQ_VNNI_ROW2(4) SPARQ_VNNI_ROW2(5) SPARQ_VNNI_ROW2(6) SPARQ_VNNI_ROW2(7)
    // clang-format on
  }
  const __m512i acc[kMr][2] = {{c00, c01}, {c10, c11}, {c20, c21}, {c30, c31},
                               {c40, c41}, {c50, c51}, {c60, c61}, {c70, c71}};
  StoreTile<2>(acc, c, ldc, accumulate);
}

void TileVnni1(int64_t steps, const uint8_t* a, const int8_t* b, int32_t* c, int64_t ldc, bool accumulate) {
  const __m512i z = _mm512_setzero_si512();
  __m512i c00 = z, c10 = z, c20 = z, c30 = z, c40 = z, c50 = z, c60 = z, c70 = z;
  for (int64_t s = 0; s < steps; ++s) {
    const __m512i w0 = _mm512_loadu_si512(b + s * 64);
    const uint8_t* as = a + s * kMr * 4;
    // clang-format off
    SPARQ_VNNI_ROW1(0) SPARQ_VNNI_ROW1(1) SPARQ_VNNI_ROW1(2) SPARQ_VNNI_ROW1(3)
    SPARQ_VNNI_ROW1(4) SPARQ_VNNI_ROW1(5) SPARQ_VNNI_ROW1(6) SPARQ_VNNI_ROW1(7)
    // clang-format on
  }
  const __m512i acc[kMr][1] = {{c00}, {c10}, {c20}, {c30}, {c40}, {c50}, {c60}, {c70}};
  StoreTile<1>(acc, c, ldc, accumulate);
}

#undef SPARQ_VNNI_ROW2
#undef SPARQ_VNNI_ROW1

// The one-row tile (GEMV: M = 1, a batch-1 classifier), 1 x kPanels * 16
// columns: per step one broadcast of the row's 4 bytes and kPanels vpdpbusd,
// even and odd steps into separate accumulators (two dependency chains per
// panel; int32 sums wrap mod 2^32, so the split changes no bit). The weights
// stream once: no 8-row strip of zeros multiplied as with the 8-row tile.
template <int kPanels>
void TileRowVnni(int64_t steps, const uint8_t* a, const int8_t* b, int64_t b_panel_stride, int32_t* c,
                 bool accumulate) {
  __m512i even[kPanels], odd[kPanels];
  for (int p = 0; p < kPanels; ++p) even[p] = odd[p] = _mm512_setzero_si512();
  int64_t s = 0;
  for (; s + 2 <= steps; s += 2) {
    const __m512i x0 = _mm512_set1_epi32(LoadS32(a + 4 * s)), x1 = _mm512_set1_epi32(LoadS32(a + 4 * s + 4));
    for (int p = 0; p < kPanels; ++p) {
      even[p] = _mm512_dpbusd_epi32(even[p], x0, _mm512_loadu_si512(b + p * b_panel_stride + s * 64));
      odd[p] = _mm512_dpbusd_epi32(odd[p], x1, _mm512_loadu_si512(b + p * b_panel_stride + s * 64 + 64));
    }
  }
  if (s < steps) {
    const __m512i x0 = _mm512_set1_epi32(LoadS32(a + 4 * s));
    for (int p = 0; p < kPanels; ++p)
      even[p] = _mm512_dpbusd_epi32(even[p], x0, _mm512_loadu_si512(b + p * b_panel_stride + s * 64));
  }
  for (int p = 0; p < kPanels; ++p) {
    __m512i v = _mm512_add_epi32(even[p], odd[p]);
    if (accumulate) v = _mm512_add_epi32(v, _mm512_loadu_si512(c + p * 16));
    _mm512_storeu_si512(c + p * 16, v);
  }
}

constexpr int kRowMaxPanels = 4;

void TileRow(int64_t steps, const void* a_strip, const void* b, int64_t b_panel_stride, int panels, int32_t* c,
             int64_t /*ldc: one row*/, bool accumulate) {
  const auto* a = static_cast<const uint8_t*>(a_strip);
  const auto* w = static_cast<const int8_t*>(b);
  switch (panels) {
    case 4: TileRowVnni<4>(steps, a, w, b_panel_stride, c, accumulate); break;
    case 3: TileRowVnni<3>(steps, a, w, b_panel_stride, c, accumulate); break;
    case 2: TileRowVnni<2>(steps, a, w, b_panel_stride, c, accumulate); break;
    default: TileRowVnni<1>(steps, a, w, b_panel_stride, c, accumulate); break;
  }
}

// PackA for a full strip of kMr = 8 rows: 8 k-steps (32 bytes) of the 8 rows
// at a time, an 8 x 8 transpose of 4-byte groups, so that step s holds the
// 4 bytes of row 0, then row 1, ... (the layout TileVnni* reads). Row sums
// via vpsadbw. The last k % 32 columns take the plain loop.
void PackStripS8(const uint8_t* a, int64_t lda, int64_t k_count, bool flip, uint8_t* strip, int32_t* row_sums) {
  static_assert(kMr == 8, "the transpose is 8 x 8");
  const uint8_t flip_byte = flip ? 0x80 : 0;
  const __m256i flip_v = _mm256_set1_epi8(static_cast<char>(flip_byte));
  const __m256i zero = _mm256_setzero_si256();
  __m256i sums[kMr];
  for (int r = 0; r < kMr; ++r) sums[r] = zero;
  const int64_t groups = k_count / 32;
  for (int64_t g = 0; g < groups; ++g) {
    __m256i v[kMr];
    for (int r = 0; r < kMr; ++r) {
      v[r] = _mm256_xor_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(a + r * lda + g * 32)), flip_v);
      sums[r] = _mm256_add_epi64(sums[r], _mm256_sad_epu8(v[r], zero));
    }
    // v[r] = 8 dwords (steps 8g..8g+7) of row r  ->  o[s] = dword s of rows 0..7.
    const __m256i t0 = _mm256_unpacklo_epi32(v[0], v[1]), t1 = _mm256_unpackhi_epi32(v[0], v[1]);
    const __m256i t2 = _mm256_unpacklo_epi32(v[2], v[3]), t3 = _mm256_unpackhi_epi32(v[2], v[3]);
    const __m256i t4 = _mm256_unpacklo_epi32(v[4], v[5]), t5 = _mm256_unpackhi_epi32(v[4], v[5]);
    const __m256i t6 = _mm256_unpacklo_epi32(v[6], v[7]), t7 = _mm256_unpackhi_epi32(v[6], v[7]);
    const __m256i u0 = _mm256_unpacklo_epi64(t0, t2), u1 = _mm256_unpackhi_epi64(t0, t2);
    const __m256i u2 = _mm256_unpacklo_epi64(t1, t3), u3 = _mm256_unpackhi_epi64(t1, t3);
    const __m256i u4 = _mm256_unpacklo_epi64(t4, t6), u5 = _mm256_unpackhi_epi64(t4, t6);
    const __m256i u6 = _mm256_unpacklo_epi64(t5, t7), u7 = _mm256_unpackhi_epi64(t5, t7);
    const __m256i o[8] = {_mm256_permute2x128_si256(u0, u4, 0x20), _mm256_permute2x128_si256(u1, u5, 0x20),
                          _mm256_permute2x128_si256(u2, u6, 0x20), _mm256_permute2x128_si256(u3, u7, 0x20),
                          _mm256_permute2x128_si256(u0, u4, 0x31), _mm256_permute2x128_si256(u1, u5, 0x31),
                          _mm256_permute2x128_si256(u2, u6, 0x31), _mm256_permute2x128_si256(u3, u7, 0x31)};
    for (int s = 0; s < 8; ++s) {
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(strip + (g * 8 + s) * kMr * 4), o[s]);
    }
  }
  for (int r = 0; r < kMr; ++r) {
    const __m128i half = _mm_add_epi64(_mm256_castsi256_si128(sums[r]), _mm256_extracti128_si256(sums[r], 1));
    int64_t sum = _mm_cvtsi128_si64(half) + _mm_extract_epi64(half, 1);
    const uint8_t* src = a + r * lda;
    for (int64_t k = groups * 32; k < k_count; ++k) {
      const uint8_t u = static_cast<uint8_t>(src[k] ^ flip_byte);
      strip[(k / 4) * kMr * 4 + r * 4 + k % 4] = u;
      sum += u;
    }
    row_sums[r] += static_cast<int32_t>(sum);
  }
}

void Tile(int64_t steps, const void* a_strip, const void* b, int64_t b_panel_stride, int panels, int32_t* c,
          int64_t ldc, bool accumulate) {
  const auto* a = static_cast<const uint8_t*>(a_strip);
  const auto* w = static_cast<const int8_t*>(b);
  if (panels == 2) {
    TileVnni2(steps, a, w, b_panel_stride, c, ldc, accumulate);
  } else {
    TileVnni1(steps, a, w, c, ldc, accumulate);
  }
}

}  // namespace

// Needs AVX-512 only (its table row is requant_s32_avx512): compiled without VNNI.
SPARQ_CPU_TARGET_END
SPARQ_CPU_TARGET_BEGIN(SPARQ_CPU_AVX512_FEATURES)

void RequantRowAvx512(int64_t n, const int32_t* acc, const int32_t* bias, int64_t bias_stride,
                      const float* multiplier, int64_t multiplier_stride, int32_t zero_point, bool fuse_relu,
                      bool out_signed, void* out) {
  if ((bias != nullptr && bias_stride > 1) || multiplier_stride > 1) {
    RequantRowPortable(n, acc, bias, bias_stride, multiplier, multiplier_stride, zero_point, fuse_relu, out_signed,
                       out);
    return;
  }
  // The steps of RequantizeS32Ref, 16 lanes at a time (see kernels/ref/quantize.h).
  const int32_t type_min = out_signed ? -128 : 0, type_max = out_signed ? 127 : 255;
  const int32_t lo = fuse_relu ? (zero_point > type_min ? zero_point : type_min) : type_min;
  const int32_t hi = type_max;
  const __m512 real_lo = _mm512_set1_ps(static_cast<float>(lo - zero_point));
  const __m512 real_hi = _mm512_set1_ps(static_cast<float>(hi - zero_point));
  const __m512i q_lo = _mm512_set1_epi32(lo), q_hi = _mm512_set1_epi32(hi), zp = _mm512_set1_epi32(zero_point);
  const __m512i bias_all = _mm512_set1_epi32(bias != nullptr ? bias[0] : 0);
  const __m512 mult_all = _mm512_set1_ps(multiplier[0]);
  int8_t* dst = static_cast<int8_t*>(out);
  for (int64_t j = 0; j < n; j += 16) {
    const __mmask16 k = n - j >= 16 ? __mmask16(0xFFFF) : static_cast<__mmask16>((1u << (n - j)) - 1);
    __m512i v = _mm512_maskz_loadu_epi32(k, acc + j);
    if (bias != nullptr) v = _mm512_add_epi32(v, bias_stride == 1 ? _mm512_maskz_loadu_epi32(k, bias + j) : bias_all);
    const __m512 mult = multiplier_stride == 1 ? _mm512_maskz_loadu_ps(k, multiplier + j) : mult_all;
    __m512 real = _mm512_mul_ps(_mm512_cvtepi32_ps(v), mult);
    real = _mm512_mask_mov_ps(real, _mm512_cmp_ps_mask(real, real, _CMP_UNORD_Q), _mm512_setzero_ps());  // NaN -> zp
    // Nearest, ties to even (RoundHalfToEven), from the immediate: MXCSR's rounding mode is not used.
    __m512 rounded = _mm512_roundscale_ps(real, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    rounded = _mm512_min_ps(_mm512_max_ps(rounded, real_lo), real_hi);
    __m512i q = _mm512_add_epi32(_mm512_cvttps_epi32(rounded), zp);
    q = _mm512_min_epi32(_mm512_max_epi32(q, q_lo), q_hi);
    // Low byte: right for int8 and uint8. A full block stores 16 bytes
    // unmasked: the masked vpmovdb to memory is several times slower.
    if (k == __mmask16(0xFFFF)) _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + j), _mm512_cvtepi32_epi8(q));
    else _mm512_mask_cvtepi32_storeu_epi8(dst + j, k, q);
  }
}

// CorrectRowPortable 16 lanes at a time (vpmulld keeps the low 32 bits: the
// same sums mod 2^32).
void CorrectRowAvx512(int64_t n, uint32_t* acc, uint32_t za_u, const int32_t* col_sums, uint32_t a_sum,
                      const int32_t* zb_s) {
  const __m512i vza = _mm512_set1_epi32(static_cast<int32_t>(za_u)), vsum = _mm512_set1_epi32(static_cast<int32_t>(a_sum));
  for (int64_t j = 0; j < n; j += 16) {
    const __mmask16 k = n - j >= 16 ? __mmask16(0xFFFF) : static_cast<__mmask16>((1u << (n - j)) - 1);
    __m512i v = _mm512_maskz_loadu_epi32(k, acc + j);
    if (zb_s != nullptr) v = _mm512_sub_epi32(v, _mm512_mullo_epi32(_mm512_maskz_loadu_epi32(k, zb_s + j), vsum));
    v = _mm512_sub_epi32(v, _mm512_mullo_epi32(_mm512_maskz_loadu_epi32(k, col_sums + j), vza));
    _mm512_mask_storeu_epi32(acc + j, k, v);
  }
}

// DequantRowPortable 16 lanes at a time: the same conversion, product and
// sum, each rounded (this file is built with -ffp-contract=off).
void DequantRowAvx512(int64_t n, const int32_t* acc, const float* scale, const float* bias, float* out) {
  for (int64_t j = 0; j < n; j += 16) {
    const __mmask16 k = n - j >= 16 ? __mmask16(0xFFFF) : static_cast<__mmask16>((1u << (n - j)) - 1);
    __m512 v = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_maskz_loadu_epi32(k, acc + j)), _mm512_maskz_loadu_ps(k, scale + j));
    if (bias != nullptr) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(k, bias + j));
    _mm512_mask_storeu_ps(out + j, k, v);
  }
}

SPARQ_CPU_TARGET_END
SPARQ_CPU_TARGET_BEGIN(SPARQ_CPU_AVX512VNNI_FEATURES)

void GemmS8Avx512Vnni(const GemmS8Args& args) {
  static constexpr GemmS8Isa kIsa = {kMr, kMaxPanels, Tile, RequantRowAvx512, PackStripS8, DequantRowAvx512,
                                     CorrectRowAvx512};
  static constexpr GemmS8Isa kRowIsa = {1, kRowMaxPanels, TileRow, RequantRowAvx512, nullptr, DequantRowAvx512,
                                        CorrectRowAvx512};
  GemmS8Driver(args, args.m == 1 ? kRowIsa : kIsa);
}

SPARQ_CPU_TARGET_END

}  // namespace cpu
}  // namespace sparq

#endif  // SPARQ_CPU_X86
