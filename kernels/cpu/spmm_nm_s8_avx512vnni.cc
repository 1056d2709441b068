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

// One activation row r of the tile: its 8 activations of step s broadcast,
// picked per channel and multiplied into the row's NP accumulators.
#define SPARQ_NM_ROW(r, A0, A1, A2, A3)                                                      \
  {                                                                                          \
    const __m512i xb = _mm512_set1_epi64(LoadS64(x + (r) * ld_x + s * 8));                   \
    A0 = _mm512_dpbusd_epi32(A0, _mm512_shuffle_epi8(xb, p0), w0);                           \
    if constexpr (NP > 1) A1 = _mm512_dpbusd_epi32(A1, _mm512_shuffle_epi8(xb, p1), w1);     \
    if constexpr (NP > 2) A2 = _mm512_dpbusd_epi32(A2, _mm512_shuffle_epi8(xb, p2), w2);     \
    if constexpr (NP > 3) A3 = _mm512_dpbusd_epi32(A3, _mm512_shuffle_epi8(xb, p3), w3);     \
  }

inline long long LoadS64(const uint8_t* p) {
  long long v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

// The accumulators are named variables, not an array: with __m512i acc[4][4]
// GCC 12 copied all of them between registers on every step (objdump).
template <int NP>
void TileVnni(int64_t steps, const uint8_t* x, int64_t ld_x, const uint8_t* panels, int64_t panel_stride,
              int32_t* out, int64_t ld_out) {
  static_assert(kMr == 4 && NP >= 1 && NP <= kMaxPanels, "the tile below is written for 4 rows, 1..4 panels");
  const __m512i zero = _mm512_setzero_si512();
  __m512i a00 = zero, a01 = zero, a02 = zero, a03 = zero, a10 = zero, a11 = zero, a12 = zero, a13 = zero;
  __m512i a20 = zero, a21 = zero, a22 = zero, a23 = zero, a30 = zero, a31 = zero, a32 = zero, a33 = zero;
  const uint8_t* const q0 = panels;
  const uint8_t* const q1 = panels + (NP > 1 ? panel_stride : 0);
  const uint8_t* const q2 = panels + (NP > 2 ? 2 * panel_stride : 0);
  const uint8_t* const q3 = panels + (NP > 3 ? 3 * panel_stride : 0);
  for (int64_t s = 0; s < steps; ++s) {
    const int64_t o = s * 128;
    const __m512i w0 = _mm512_loadu_si512(q0 + o), p0 = _mm512_loadu_si512(q0 + o + 64);
    const __m512i w1 = _mm512_loadu_si512(q1 + o), p1 = _mm512_loadu_si512(q1 + o + 64);
    const __m512i w2 = _mm512_loadu_si512(q2 + o), p2 = _mm512_loadu_si512(q2 + o + 64);
    const __m512i w3 = _mm512_loadu_si512(q3 + o), p3 = _mm512_loadu_si512(q3 + o + 64);
    SPARQ_NM_ROW(0, a00, a01, a02, a03)
    SPARQ_NM_ROW(1, a10, a11, a12, a13)
    SPARQ_NM_ROW(2, a20, a21, a22, a23)
    SPARQ_NM_ROW(3, a30, a31, a32, a33)
  }
  const __m512i acc[kMr][kMaxPanels] = {{a00, a01, a02, a03}, {a10, a11, a12, a13}, {a20, a21, a22, a23},
                                        {a30, a31, a32, a33}};
  for (int r = 0; r < kMr; ++r)
    for (int p = 0; p < NP; ++p) _mm512_storeu_si512(out + r * ld_out + p * kRows, acc[r][p]);
}

#undef SPARQ_NM_ROW

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
