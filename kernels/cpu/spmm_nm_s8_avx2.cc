// spmm_nm24_s8_avx2, spmm_nm48_s8_avx2: INT8 N:M GEMM on vpmaddwd (exact,
// unlike the saturating vpmaddubsw), 8 channels per ymm. Per step of 8 k: the
// 8 int16 activations X - x_zp of a row are broadcast to both 128-bit lanes;
// for each half of a channel's 4 kept values, vpshufb picks its 2 activations
// and vpmaddwd multiplies them with the 2 weights (layouts: internal.h).
#include <cstdint>

#include "kernels/cpu/cpu_target.h"
#include "kernels/cpu/internal.h"

#if SPARQ_CPU_X86
#include <immintrin.h>

namespace sparq {
namespace cpu {

SPARQ_CPU_TARGET_BEGIN(SPARQ_CPU_AVX2_FEATURES)

namespace {

constexpr int kRows = 8;  // channels per panel
constexpr int kMr = 4;
constexpr int kMaxPanels = 2;  // 8 accumulators; weights and positions are read from L1

template <int NP>
void TileAvx2(int64_t steps, const int16_t* x, int64_t ld_x, const uint8_t* panels, int64_t panel_stride,
              int32_t* out, int64_t ld_out) {
  __m256i acc[kMr][NP];
  for (int r = 0; r < kMr; ++r)
    for (int p = 0; p < NP; ++p) acc[r][p] = _mm256_setzero_si256();
  for (int64_t s = 0; s < steps; ++s) {
    for (int r = 0; r < kMr; ++r) {
      const __m256i xb = _mm256_broadcastsi128_si256(
          _mm_loadu_si128(reinterpret_cast<const __m128i*>(x + r * ld_x + s * 8)));
      for (int p = 0; p < NP; ++p) {
        const uint8_t* step = panels + p * panel_stride + s * 128;
        for (int h = 0; h < 2; ++h) {
          const __m256i wv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(step + h * 64));
          const __m256i pos = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(step + h * 64 + 32));
          acc[r][p] = _mm256_add_epi32(acc[r][p], _mm256_madd_epi16(_mm256_shuffle_epi8(xb, pos), wv));
        }
      }
    }
  }
  for (int r = 0; r < kMr; ++r)
    for (int p = 0; p < NP; ++p)
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + r * ld_out + p * kRows), acc[r][p]);
}

void Tile(int64_t steps, const void* x, int64_t ld_x, const uint8_t* panels, int64_t panel_stride, int panel_count,
          int32_t* out, int64_t ld_out) {
  const auto* xs = static_cast<const int16_t*>(x);
  if (panel_count == 2) {
    TileAvx2<2>(steps, xs, ld_x, panels, panel_stride, out, ld_out);
  } else {
    TileAvx2<1>(steps, xs, ld_x, panels, panel_stride, out, ld_out);
  }
}

constexpr SpmmNmS8Isa kIsa = {kRows, true, kMr, kMaxPanels, Tile, RequantRowAvx2};

}  // namespace

void SpmmNmS8Avx2(const SpmmNmS8Args& args) { SpmmNmS8Driver(args, kIsa); }

SPARQ_CPU_TARGET_END

}  // namespace cpu
}  // namespace sparq

#endif  // SPARQ_CPU_X86
