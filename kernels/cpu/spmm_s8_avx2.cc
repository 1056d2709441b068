// spmm_bsr*_s8_avx2: INT8 block-sparse GEMM on vpmaddwd. The tile holds
// X - x_zp as int16 in pairs of k per lane ([K/2][mt][2], see spmm_s8.cc);
// each weight row of a block contributes 2 k at a time as one broadcast pair
// of int16 (vpmaddwd: exact, unlike the saturating vpmaddubsw). A 4x1 block
// puts its weight in the half of its k within the pair and 0 in the other.
#include <cstdint>

#include "kernels/cpu/cpu_target.h"
#include "kernels/cpu/internal.h"

#if SPARQ_CPU_X86
#include <immintrin.h>

namespace sparq {
namespace cpu {

SPARQ_CPU_TARGET_BEGIN(SPARQ_CPU_AVX2_FEATURES)

namespace {

constexpr int kLanes = 8;
constexpr int kMaxAccumulators = 8;

inline int32_t PairS16(int8_t lo, int8_t hi) {
  return static_cast<int32_t>(uint32_t{static_cast<uint16_t>(int16_t{lo})} |
                              (uint32_t{static_cast<uint16_t>(int16_t{hi})} << 16));
}

template <int BR, int BC, int V>
void BlockRowAvx2(const int16_t* xt, const int32_t* col_index, const int8_t* values, int64_t blocks, int32_t* out) {
  constexpr int64_t kMt = V * kLanes;
  constexpr int kRowsPerPass = BR < kMaxAccumulators / V ? BR : kMaxAccumulators / V;
  constexpr int kPairs = BC >= 2 ? BC / 2 : 1;
  static_assert(BR % kRowsPerPass == 0, "block rows must split into equal passes");
  for (int i0 = 0; i0 < BR; i0 += kRowsPerPass) {
    __m256i acc[kRowsPerPass][V];
    for (int i = 0; i < kRowsPerPass; ++i)
      for (int v = 0; v < V; ++v) acc[i][v] = _mm256_setzero_si256();
    for (int64_t b = 0; b < blocks; ++b) {
      const int64_t k0 = int64_t{col_index[b]} * BC;
      const int16_t* xb = xt + (k0 / 2) * kMt * 2;
      const int8_t* wb = values + b * (BR * BC) + i0 * BC;
      for (int p = 0; p < kPairs; ++p) {
        __m256i x[V];
        for (int v = 0; v < V; ++v) {
          x[v] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb + p * kMt * 2 + v * 2 * kLanes));
        }
        for (int i = 0; i < kRowsPerPass; ++i) {
          const int32_t wd = BC >= 2 ? PairS16(wb[i * BC + 2 * p], wb[i * BC + 2 * p + 1])
                                     : ((k0 & 1) == 0 ? PairS16(wb[i], 0) : PairS16(0, wb[i]));
          const __m256i wv = _mm256_set1_epi32(wd);
          for (int v = 0; v < V; ++v) acc[i][v] = _mm256_add_epi32(acc[i][v], _mm256_madd_epi16(x[v], wv));
        }
      }
    }
    for (int i = 0; i < kRowsPerPass; ++i)
      for (int v = 0; v < V; ++v)
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + (i0 + i) * kMt + v * kLanes), acc[i][v]);
  }
}

template <int BR, int BC>
void BlockRowForV(int v, const int16_t* xt, const int32_t* col_index, const int8_t* values, int64_t blocks,
                  int32_t* out) {
  switch (v) {
    case 4: BlockRowAvx2<BR, BC, 4>(xt, col_index, values, blocks, out); break;
    case 2: BlockRowAvx2<BR, BC, 2>(xt, col_index, values, blocks, out); break;
    default: BlockRowAvx2<BR, BC, 1>(xt, col_index, values, blocks, out); break;
  }
}

void BlockRow(int br, int bc, int v, const void* tile, const int32_t* col_index, const int8_t* values,
              int64_t blocks, int32_t* out) {
  const auto* xt = static_cast<const int16_t*>(tile);
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

constexpr SpmmS8Isa kIsa = {kLanes, 2, kMaxAccumulators, BlockRow, RequantRowAvx2};

}  // namespace

void SpmmBsrS8Avx2(const SpmmBsrS8Args& args) { SpmmBsrS8Driver(args, kIsa); }

SPARQ_CPU_TARGET_END

}  // namespace cpu
}  // namespace sparq

#endif  // SPARQ_CPU_X86
