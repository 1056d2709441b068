// spmm_nm24_s8_avx512vnni, spmm_nm48_s8_avx512vnni: INT8 N:M GEMM on vpdpbusd,
// 16 channels per zmm (one per 32-bit lane). Per step of 8 k: the 8 u8
// activations of a row are broadcast to every 64-bit lane, vpshufb picks each
// channel's 4 kept ones by their positions, vpdpbusd multiplies them with the
// channel's 4 weights (spmm_nm_s8.cc and internal.h give the layouts).
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

constexpr int kRows = 16;  // channels per panel
constexpr int kMr = 4;
constexpr int kMaxPanels = 4;  // 16 accumulators + 8 weight / position registers

template <int NP>
void TileVnni(int64_t steps, const uint8_t* x, int64_t ld_x, const uint8_t* panels, int64_t panel_stride,
              int32_t* out, int64_t ld_out) {
  __m512i acc[kMr][NP];
  for (int r = 0; r < kMr; ++r)
    for (int p = 0; p < NP; ++p) acc[r][p] = _mm512_setzero_si512();
  for (int64_t s = 0; s < steps; ++s) {
    __m512i wv[NP], pos[NP];
    for (int p = 0; p < NP; ++p) {
      const uint8_t* step = panels + p * panel_stride + s * 128;
      wv[p] = _mm512_loadu_si512(step);
      pos[p] = _mm512_loadu_si512(step + 64);
    }
    for (int r = 0; r < kMr; ++r) {
      long long window;
      std::memcpy(&window, x + r * ld_x + s * 8, sizeof(window));
      const __m512i xb = _mm512_set1_epi64(window);
      for (int p = 0; p < NP; ++p) acc[r][p] = _mm512_dpbusd_epi32(acc[r][p], _mm512_shuffle_epi8(xb, pos[p]), wv[p]);
    }
  }
  for (int r = 0; r < kMr; ++r)
    for (int p = 0; p < NP; ++p) _mm512_storeu_si512(out + r * ld_out + p * kRows, acc[r][p]);
}

void Tile(int64_t steps, const void* x, int64_t ld_x, const uint8_t* panels, int64_t panel_stride, int panel_count,
          int32_t* out, int64_t ld_out) {
  const auto* xu = static_cast<const uint8_t*>(x);
  switch (panel_count) {
    case 4: TileVnni<4>(steps, xu, ld_x, panels, panel_stride, out, ld_out); break;
    case 3: TileVnni<3>(steps, xu, ld_x, panels, panel_stride, out, ld_out); break;
    case 2: TileVnni<2>(steps, xu, ld_x, panels, panel_stride, out, ld_out); break;
    default: TileVnni<1>(steps, xu, ld_x, panels, panel_stride, out, ld_out); break;
  }
}

constexpr SpmmNmS8Isa kIsa = {kRows, false, kMr, kMaxPanels, Tile, RequantRowAvx512};

}  // namespace

void SpmmNmS8Avx512Vnni(const SpmmNmS8Args& args) { SpmmNmS8Driver(args, kIsa); }

SPARQ_CPU_TARGET_END

}  // namespace cpu
}  // namespace sparq

#endif  // SPARQ_CPU_X86
