// gemv_f32: a few rows of X times GEMM weights packed as strips (GemvF32Args
// in kernel_args.h), the recurrent products of lstm_f32 / gru_f32. The x86
// rows are in gemv_f32_avx2.cc and gemv_f32_avx512.cc.
//
// Why not gemm_f32: its MatMul tile multiplies a panel of tile_rows rows of X
// by a strip; with one row (a batch-1 recurrence) it runs one row's two
// accumulators, a chain of dependent multiply-adds per strip, and packs X on
// every call. A GEMV reads the same strips (W^T, k-major, tile_cols outputs
// per k) but runs several strips at once, so that the multiply-adds of
// different strips overlap:
//
//   strip s:   k=0 [ W[s*tc + 0, 0] ... W[s*tc + tc-1, 0] ]   <- x[0] broadcast
//              k=1 [ W[s*tc + 0, 1] ... W[s*tc + tc-1, 1] ]   <- x[1]
//              ...
//   y[s*tc + j] = sum over k, in order, of x[k] * strip[k][j]
//
// Every output has one accumulator summed in k order, as gemm_f32's tile
// sums it, so the result does not depend on m, on the strips a call gets or
// on the thread count, and equals gemm_f32's bits on the same ISA.
#include <algorithm>

#include "kernels/cpu/internal.h"

namespace sparq {
namespace cpu {

void GemvF32Portable(const GemvF32Args& a) {
  const PackedGemmF32& w = *a.w;
  const int tc = w.height();  // strips: tile_cols rows of W each (at most 32)
  float acc[32];
  for (int64_t s = a.s0; s < a.s1; ++s) {
    const int64_t j0 = s * tc;
    const int cols = static_cast<int>(std::min<int64_t>(tc, w.rows - j0));
    const float* strip = w.panel(s);
    for (int64_t i = 0; i < a.m; ++i) {
      const float* x = a.x + i * a.ld_x;
      std::fill(acc, acc + tc, 0.0f);
      for (int64_t kk = 0; kk < w.k; ++kk) {
        const float xv = x[kk];
        const float* wk = strip + kk * tc;
        for (int j = 0; j < tc; ++j) acc[j] += xv * wk[j];
      }
      // The bias as gemm_f32's portable tile adds it: v + (0 + bias).
      float* y = a.y + i * a.ld_y + j0;
      for (int j = 0; j < cols; ++j) y[j] = acc[j] + (0.0f + (a.bias != nullptr ? a.bias[j0 + j] : 0.0f));
    }
  }
}

}  // namespace cpu
}  // namespace sparq
