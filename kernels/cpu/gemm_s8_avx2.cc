// gemm_s8s8_avx2: the INT8 GEMM register tile on vpmaddwd, and the AVX2
// requantization of a row. Weights in panel16x2_s16 (W - w_zp as int16 pairs);
// the driver packs A - a_zp as int16 pairs, so no zero-point correction.
//
// Why not vpmaddubsw (u8 x s8 -> s16 pairs)? It saturates the pair sum to
// int16 (255 * 127 * 2 > 32767), which would break exactness. vpmaddwd sums two
// s16 x s16 products in int32: |(a - za)(w - zw)| <= 255 * 255, exact.
//
// Tile: 6 rows x 1 panel (16 columns) = 12 ymm accumulators. Per step of 2 k:
//   2 loads of W (8 columns x 2 k each), 6 broadcasts of an A pair, 12 vpmaddwd + 12 vpaddd.
#include <cstdint>
#include <cstring>

#include "kernels/cpu/cpu_target.h"
#include "kernels/cpu/internal.h"

#if SPARQ_CPU_X86
#include <immintrin.h>

namespace sparq {
namespace cpu {

SPARQ_CPU_TARGET_BEGIN(SPARQ_CPU_AVX2_FEATURES)

namespace {

constexpr int kMr = 6;

inline int32_t LoadS32(const void* p) {
  int32_t v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

void Tile(int64_t steps, const void* a_strip, const void* b, int64_t /*b_panel_stride*/, int /*panels: always 1*/,
          int32_t* c, int64_t ldc, bool accumulate) {
  const auto* a = static_cast<const int16_t*>(a_strip);
  const auto* w = static_cast<const int16_t*>(b);
  __m256i acc[kMr][2];
  for (int r = 0; r < kMr; ++r) acc[r][0] = acc[r][1] = _mm256_setzero_si256();
  for (int64_t s = 0; s < steps; ++s) {
    const __m256i w0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + s * 32));
    const __m256i w1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + s * 32 + 16));
    const int16_t* as = a + s * kMr * 2;
    for (int r = 0; r < kMr; ++r) {
      const __m256i x = _mm256_set1_epi32(LoadS32(as + r * 2));
      acc[r][0] = _mm256_add_epi32(acc[r][0], _mm256_madd_epi16(x, w0));
      acc[r][1] = _mm256_add_epi32(acc[r][1], _mm256_madd_epi16(x, w1));
    }
  }
  for (int r = 0; r < kMr; ++r) {
    for (int h = 0; h < 2; ++h) {
      auto* dst = reinterpret_cast<__m256i*>(c + r * ldc + h * 8);
      __m256i v = acc[r][h];
      if (accumulate) v = _mm256_add_epi32(v, _mm256_loadu_si256(dst));
      _mm256_storeu_si256(dst, v);
    }
  }
}

}  // namespace

void RequantRowAvx2(int64_t n, const int32_t* acc, const int32_t* bias, int64_t bias_stride, const float* multiplier,
                    int64_t multiplier_stride, int32_t zero_point, bool fuse_relu, bool out_signed, void* out) {
  if ((bias != nullptr && bias_stride > 1) || multiplier_stride > 1) {
    RequantRowPortable(n, acc, bias, bias_stride, multiplier, multiplier_stride, zero_point, fuse_relu, out_signed,
                       out);
    return;
  }
  // The steps of RequantizeS32Ref, 8 lanes at a time (see kernels/ref/quantize.h).
  const int32_t type_min = out_signed ? -128 : 0, type_max = out_signed ? 127 : 255;
  const int32_t lo = fuse_relu ? (zero_point > type_min ? zero_point : type_min) : type_min;
  const int32_t hi = type_max;
  const __m256 real_lo = _mm256_set1_ps(static_cast<float>(lo - zero_point));
  const __m256 real_hi = _mm256_set1_ps(static_cast<float>(hi - zero_point));
  const __m256i q_lo = _mm256_set1_epi32(lo), q_hi = _mm256_set1_epi32(hi), zp = _mm256_set1_epi32(zero_point);
  const __m256i bias_all = _mm256_set1_epi32(bias != nullptr ? bias[0] : 0);
  const __m256 mult_all = _mm256_set1_ps(multiplier[0]);
  int8_t* dst = static_cast<int8_t*>(out);
  int64_t j = 0;
  for (; j + 8 <= n; j += 8) {
    __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(acc + j));
    if (bias != nullptr) {
      v = _mm256_add_epi32(v, bias_stride == 1 ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(bias + j))
                                               : bias_all);
    }
    const __m256 mult = multiplier_stride == 1 ? _mm256_loadu_ps(multiplier + j) : mult_all;
    __m256 real = _mm256_mul_ps(_mm256_cvtepi32_ps(v), mult);
    real = _mm256_blendv_ps(real, _mm256_setzero_ps(), _mm256_cmp_ps(real, real, _CMP_UNORD_Q));  // NaN -> zp
    // Nearest, ties to even (RoundHalfToEven), from the immediate: MXCSR's rounding mode is not used.
    __m256 rounded = _mm256_round_ps(real, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    rounded = _mm256_min_ps(_mm256_max_ps(rounded, real_lo), real_hi);
    __m256i q = _mm256_add_epi32(_mm256_cvttps_epi32(rounded), zp);
    q = _mm256_min_epi32(_mm256_max_epi32(q, q_lo), q_hi);
    // Narrow 8 x int32 (all within the output type) to 8 bytes.
    const __m128i q16 = _mm_packs_epi32(_mm256_castsi256_si128(q), _mm256_extracti128_si256(q, 1));
    const __m128i q8 = out_signed ? _mm_packs_epi16(q16, q16) : _mm_packus_epi16(q16, q16);
    _mm_storel_epi64(reinterpret_cast<__m128i*>(dst + j), q8);
  }
  if (j < n) {
    RequantRowPortable(n - j, acc + j, bias == nullptr ? nullptr : bias + j * bias_stride, bias_stride,
                       multiplier + j * multiplier_stride, multiplier_stride, zero_point, fuse_relu, out_signed,
                       dst + j);
  }
}

void GemmS8Avx2(const GemmS8Args& args) {
  static constexpr GemmS8Isa kIsa = {kMr, 1, Tile, RequantRowAvx2, nullptr};
  GemmS8Driver(args, kIsa);
}

SPARQ_CPU_TARGET_END

}  // namespace cpu
}  // namespace sparq

#endif  // SPARQ_CPU_X86
