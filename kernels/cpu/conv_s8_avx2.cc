// conv_s8_nchw_avx2: the register tile of the NCHW INT8 convolution
// (driver and layouts: conv_s8.cc, internal.h ConvS8Tile) on vpmaddwd, with
// the requantization in registers. Weights in panel16x2_s16 (W - w_zp) and
// activations as int16 pairs x - x_zp: exact sums, no correction, any weight
// zero point (vpmaddubsw would saturate; see gemm_s8_avx2.cc).
//
// Tile pass: 4 channels x 1 block (16 positions, 2 ymm) = 8 ymm accumulators.
// Per step of 2 k: 2 loads of activations, 4 broadcasts of a weight pair,
// 8 vpmaddwd + 8 vpaddd. A ConvS8Tile of 8 channels x 2 blocks is 4 passes.
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

inline int32_t LoadS32(const void* p) {
  int32_t v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

// RequantizeS32Ref for 8 accumulators of one channel (see RequantRowAvx2),
// stored as `count` bytes.
void Store8(__m256i acc, int32_t offset, float multiplier, int32_t zero_point, bool out_signed, uint8_t* dst,
            int count) {
  if (count <= 0) return;
  const int32_t lo = out_signed ? -128 : 0, hi = out_signed ? 127 : 255;
  const __m256i v = _mm256_add_epi32(acc, _mm256_set1_epi32(offset));
  __m256 real = _mm256_mul_ps(_mm256_cvtepi32_ps(v), _mm256_set1_ps(multiplier));
  real = _mm256_blendv_ps(real, _mm256_setzero_ps(), _mm256_cmp_ps(real, real, _CMP_UNORD_Q));  // NaN -> zp
  __m256 rounded = _mm256_round_ps(real, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  rounded = _mm256_min_ps(_mm256_max_ps(rounded, _mm256_set1_ps(static_cast<float>(lo - zero_point))),
                          _mm256_set1_ps(static_cast<float>(hi - zero_point)));
  __m256i q = _mm256_add_epi32(_mm256_cvttps_epi32(rounded), _mm256_set1_epi32(zero_point));
  q = _mm256_min_epi32(_mm256_max_epi32(q, _mm256_set1_epi32(lo)), _mm256_set1_epi32(hi));
  const __m128i q16 = _mm_packs_epi32(_mm256_castsi256_si128(q), _mm256_extracti128_si256(q, 1));
  const __m128i q8 = out_signed ? _mm_packs_epi16(q16, q16) : _mm_packus_epi16(q16, q16);
  if (count >= 8) {
    _mm_storel_epi64(reinterpret_cast<__m128i*>(dst), q8);
  } else {
    alignas(16) uint8_t bytes[16];
    _mm_store_si128(reinterpret_cast<__m128i*>(bytes), q8);
    std::memcpy(dst, bytes, static_cast<size_t>(count));
  }
}

// Channels [c0, c0 + 4) of the tile times block `block`.
void Pass(const ConvS8Tile& t, int c0, int block) {
  const int16_t* x = reinterpret_cast<const int16_t*>(t.col + block * t.block_stride);
  const uint8_t* w = t.w + 4 * c0;
  __m256i a00 = _mm256_setzero_si256(), a01 = a00, a10 = a00, a11 = a00, a20 = a00, a21 = a00, a30 = a00, a31 = a00;
  // Sums of the slices before: partial[32c + i], this pass's channels and block.
  auto part = [&](int c, int half) { return t.partial + 32 * (c0 + c) + 16 * block + 8 * half; };
  if (!t.first_slice) {
    const auto load = [&](int c, int half) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(part(c, half))); };
    a00 = load(0, 0), a01 = load(0, 1), a10 = load(1, 0), a11 = load(1, 1);
    a20 = load(2, 0), a21 = load(2, 1), a30 = load(3, 0), a31 = load(3, 1);
  }
  for (int64_t s = 0; s < t.steps; ++s) {
    const __m256i x0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + s * 32));
    const __m256i x1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + s * 32 + 16));
    const uint8_t* ws = w + s * 64;
    __m256i wb = _mm256_set1_epi32(LoadS32(ws));
    a00 = _mm256_add_epi32(a00, _mm256_madd_epi16(x0, wb));
    a01 = _mm256_add_epi32(a01, _mm256_madd_epi16(x1, wb));
    wb = _mm256_set1_epi32(LoadS32(ws + 4));
    a10 = _mm256_add_epi32(a10, _mm256_madd_epi16(x0, wb));
    a11 = _mm256_add_epi32(a11, _mm256_madd_epi16(x1, wb));
    wb = _mm256_set1_epi32(LoadS32(ws + 8));
    a20 = _mm256_add_epi32(a20, _mm256_madd_epi16(x0, wb));
    a21 = _mm256_add_epi32(a21, _mm256_madd_epi16(x1, wb));
    wb = _mm256_set1_epi32(LoadS32(ws + 12));
    a30 = _mm256_add_epi32(a30, _mm256_madd_epi16(x0, wb));
    a31 = _mm256_add_epi32(a31, _mm256_madd_epi16(x1, wb));
  }
  // Named registers, not an array (which would go through the stack).
  if (!t.last_slice) {
    const auto save = [&](int c, int half, __m256i v) {
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(part(c, half)), v);
    };
    save(0, 0, a00), save(0, 1, a01), save(1, 0, a10), save(1, 1, a11);
    save(2, 0, a20), save(2, 1, a21), save(3, 0, a30), save(3, 1, a31);
    return;
  }
  const int positions = t.positions - 16 * block;
  const auto store = [&](int c, __m256i lo, __m256i hi) {
    if (c0 + c >= t.channels) return;
    uint8_t* y = t.y + (c0 + c) * t.ld_y + 16 * block;
    const int32_t offset = t.offset[c0 + c];
    const float mult = t.multiplier[c0 + c];
    Store8(lo, offset, mult, t.zero_point, t.out_signed, y, positions);
    Store8(hi, offset, mult, t.zero_point, t.out_signed, y + 8, positions - 8);
  };
  store(0, a00, a01), store(1, a10, a11), store(2, a20, a21), store(3, a30, a31);
}

void Tile(const ConvS8Tile& t) {
  // Every channel of the tile when the sums go to partial (the next slice reads all 8).
  const int channels = t.last_slice ? t.channels : 8;
  for (int block = 0; block < t.blocks; ++block) {
    for (int c0 = 0; c0 < channels; c0 += 4) Pass(t, c0, block);
  }
}

}  // namespace

void ConvS8Avx2(const ConvS8Args& args) { ConvS8Driver(args, Tile); }

SPARQ_CPU_TARGET_END

}  // namespace cpu
}  // namespace sparq

#endif  // SPARQ_CPU_X86
