// spmm_bsr*_s8_avx512vnni: INT8 block-sparse GEMM on vpdpbusd. The tile holds
// u8 activations in groups of 4 k per lane ([K/4][mt][4], see spmm_s8.cc);
// each weight row of a block contributes 4 k at a time as one broadcast
// dword of 4 signed bytes. A block narrower than 4 (4x1) puts its weight in
// the byte of its k within the group and zeros in the others.
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

constexpr int kLanes = 16;
constexpr int kMaxAccumulators = 16;

inline int32_t LoadS32(const void* p) {
  int32_t v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

template <int BR, int BC, int V>
void BlockRowVnni(const uint8_t* xt, const int32_t* col_index, const int8_t* values, int64_t blocks, int32_t* out) {
  constexpr int64_t kMt = V * kLanes;
  constexpr int kRowsPerPass = BR < kMaxAccumulators / V ? BR : kMaxAccumulators / V;
  constexpr int kGroups = BC >= 4 ? BC / 4 : 1;
  static_assert(BR % kRowsPerPass == 0, "block rows must split into equal passes");
  for (int i0 = 0; i0 < BR; i0 += kRowsPerPass) {
    __m512i acc[kRowsPerPass][V];
    for (int i = 0; i < kRowsPerPass; ++i)
      for (int v = 0; v < V; ++v) acc[i][v] = _mm512_setzero_si512();
    for (int64_t b = 0; b < blocks; ++b) {
      const int64_t k0 = int64_t{col_index[b]} * BC;
      const uint8_t* xb = xt + (k0 / 4) * kMt * 4;
      const int8_t* wb = values + b * (BR * BC) + i0 * BC;
      for (int g = 0; g < kGroups; ++g) {
        __m512i x[V];
        for (int v = 0; v < V; ++v) x[v] = _mm512_loadu_si512(xb + g * kMt * 4 + v * 64);
        for (int i = 0; i < kRowsPerPass; ++i) {
          const int32_t wd = BC >= 4 ? LoadS32(wb + i * BC + g * 4)
                                     : static_cast<int32_t>(uint32_t{static_cast<uint8_t>(wb[i])} << (8 * (k0 & 3)));
          const __m512i wv = _mm512_set1_epi32(wd);
          for (int v = 0; v < V; ++v) acc[i][v] = _mm512_dpbusd_epi32(acc[i][v], x[v], wv);
        }
      }
    }
    for (int i = 0; i < kRowsPerPass; ++i)
      for (int v = 0; v < V; ++v) _mm512_storeu_si512(out + (i0 + i) * kMt + v * kLanes, acc[i][v]);
  }
}

template <int BR, int BC>
void BlockRowForV(int v, const uint8_t* xt, const int32_t* col_index, const int8_t* values, int64_t blocks,
                  int32_t* out) {
  switch (v) {
    case 4: BlockRowVnni<BR, BC, 4>(xt, col_index, values, blocks, out); break;
    case 2: BlockRowVnni<BR, BC, 2>(xt, col_index, values, blocks, out); break;
    default: BlockRowVnni<BR, BC, 1>(xt, col_index, values, blocks, out); break;
  }
}

void BlockRow(int br, int bc, int v, const void* tile, const int32_t* col_index, const int8_t* values,
              int64_t blocks, int32_t* out) {
  const auto* xt = static_cast<const uint8_t*>(tile);
  if (br == 1 && bc == 4) {
    BlockRowForV<1, 4>(v, xt, col_index, values, blocks, out);
  } else if (br == 4 && bc == 1) {
    BlockRowForV<4, 1>(v, xt, col_index, values, blocks, out);
  } else if (br == 4 && bc == 4) {
    BlockRowForV<4, 4>(v, xt, col_index, values, blocks, out);
  } else if (br == 8 && bc == 8) {
    BlockRowForV<8, 8>(v, xt, col_index, values, blocks, out);
  } else {
    BlockRowForV<16, 16>(v, xt, col_index, values, blocks, out);
  }
}

constexpr SpmmS8Isa kIsa = {kLanes, 4, kMaxAccumulators, BlockRow, RequantRowAvx512};

}  // namespace

void SpmmBsrS8Avx512Vnni(const SpmmBsrS8Args& args) { SpmmBsrS8Driver(args, kIsa); }

SPARQ_CPU_TARGET_END

}  // namespace cpu
}  // namespace sparq

#endif  // SPARQ_CPU_X86
