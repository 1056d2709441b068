// Reference GEMM: packed panels and a small register-tile micro-kernel written
// in plain C++ (the compiler vectorizes the fixed-size inner loops), so the
// reference executor runs real models at a usable speed without any ISA code.
//
//   C is cut into tiles of kMC x kNC; each tile belongs to one ParallelFor
//   iteration. For each slice k0..k0+kKC of the K dimension the tile's rows of
//   op(A) and columns of op(B) are packed into contiguous strips:
//
//     A strip (MR rows):   k=0: a0 a1 a2 a3 | k=1: a0 a1 a2 a3 | ...
//     B strip (NR cols):   k=0: b0 .. b(NR-1) | k=1: b0 .. b(NR-1) | ...
//
//   and the micro-kernel accumulates an MR x NR block over the slice. Partial
//   sums live in a per-tile buffer between slices (stored in T, so splitting K
//   does not change the rounding), and alpha/beta are applied once at the end.
//   Strips are zero-padded at the edges; padded rows/columns are never written
//   back.
#include "kernels/ref/gemm.h"

#include <algorithm>
#include <vector>

namespace sparq {
namespace {

// Register tile of the micro-kernel. 4 x 8 floats are 8 SSE registers of
// accumulators (16 are available on x86-64 without AVX).
template <typename T>
struct MicroTile;
template <>
struct MicroTile<float> {
  static constexpr int kRows = 4;
  static constexpr int kCols = 8;
};
template <>
struct MicroTile<double> {
  static constexpr int kRows = 4;
  static constexpr int kCols = 4;
};

// Cache blocking: an A block (kMC x kKC) and a B block (kKC x kNC) stay in L2;
// one A strip and one B strip of a slice stay in L1.
constexpr int64_t kMC = 64;
constexpr int64_t kNC = 256;
constexpr int64_t kKC = 256;

int64_t RoundUp(int64_t x, int64_t m) { return (x + m - 1) / m * m; }

// Packs op(A)[i0 : i0+mc, k0 : k0+kc] into strips of MR rows (see top).
template <typename T, int MR>
void PackA(bool trans_a, const T* A, int64_t lda, int64_t i0, int64_t mc, int64_t k0, int64_t kc, T* out) {
  for (int64_t is = 0; is < mc; is += MR) {
    const int64_t rows = std::min<int64_t>(MR, mc - is);
    for (int64_t k = 0; k < kc; ++k) {
      T* dst = out + k * MR;
      for (int64_t r = 0; r < rows; ++r) {
        const int64_t i = i0 + is + r;
        dst[r] = trans_a ? A[(k0 + k) * lda + i] : A[i * lda + (k0 + k)];
      }
      for (int64_t r = rows; r < MR; ++r) dst[r] = T(0);
    }
    out += kc * MR;
  }
}

// Packs op(B)[k0 : k0+kc, j0 : j0+nc] into strips of NR columns (see top).
template <typename T, int NR>
void PackB(bool trans_b, const T* B, int64_t ldb, int64_t k0, int64_t kc, int64_t j0, int64_t nc, T* out) {
  for (int64_t js = 0; js < nc; js += NR) {
    const int64_t cols = std::min<int64_t>(NR, nc - js);
    for (int64_t k = 0; k < kc; ++k) {
      T* dst = out + k * NR;
      if (!trans_b) {
        const T* src = B + (k0 + k) * ldb + j0 + js;
        for (int64_t c = 0; c < cols; ++c) dst[c] = src[c];
      } else {
        const T* src = B + (j0 + js) * ldb + k0 + k;
        for (int64_t c = 0; c < cols; ++c) dst[c] = src[c * ldb];
      }
      for (int64_t c = cols; c < NR; ++c) dst[c] = T(0);
    }
    out += kc * NR;
  }
}

// tile[MR x NR] (row stride ldt) = (first ? 0 : tile) + sum_k ap[k] (outer) bp[k].
template <typename T, int MR, int NR>
inline void MicroKernel(int64_t kc, const T* __restrict ap, const T* __restrict bp, bool first, T* __restrict tile,
                        int64_t ldt) {
  T acc[MR][NR];
  for (int r = 0; r < MR; ++r)
    for (int c = 0; c < NR; ++c) acc[r][c] = first ? T(0) : tile[r * ldt + c];
  for (int64_t k = 0; k < kc; ++k) {
    for (int r = 0; r < MR; ++r) {
      const T a = ap[r];
      for (int c = 0; c < NR; ++c) acc[r][c] += a * bp[c];
    }
    ap += MR;
    bp += NR;
  }
  for (int r = 0; r < MR; ++r)
    for (int c = 0; c < NR; ++c) tile[r * ldt + c] = acc[r][c];
}

template <typename T>
void Gemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, T alpha, const T* A, int64_t lda, const T* B,
          int64_t ldb, T beta, T* C, int64_t ldc, ThreadPool* pool) {
  constexpr int MR = MicroTile<T>::kRows;
  constexpr int NR = MicroTile<T>::kCols;
  if (M <= 0 || N <= 0) return;
  if (K <= 0) {  // empty sum: C = beta * C
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) C[i * ldc + j] = beta == T(0) ? T(0) : beta * C[i * ldc + j];
    return;
  }
  const int64_t tiles_m = (M + kMC - 1) / kMC;
  const int64_t tiles_n = (N + kNC - 1) / kNC;
  ParallelFor(pool, tiles_m * tiles_n, 1, [&](int64_t begin, int64_t end) {
    std::vector<T> a_pack(static_cast<size_t>(RoundUp(kMC, MR) * kKC));
    std::vector<T> b_pack(static_cast<size_t>(RoundUp(kNC, NR) * kKC));
    std::vector<T> tile(static_cast<size_t>(RoundUp(kMC, MR) * RoundUp(kNC, NR)));
    for (int64_t t = begin; t < end; ++t) {
      const int64_t i0 = (t / tiles_n) * kMC, j0 = (t % tiles_n) * kNC;
      const int64_t mc = std::min(kMC, M - i0), nc = std::min(kNC, N - j0);
      const int64_t ldt = RoundUp(nc, NR);
      for (int64_t k0 = 0; k0 < K; k0 += kKC) {
        const int64_t kc = std::min(kKC, K - k0);
        PackA<T, MR>(trans_a, A, lda, i0, mc, k0, kc, a_pack.data());
        PackB<T, NR>(trans_b, B, ldb, k0, kc, j0, nc, b_pack.data());
        for (int64_t is = 0; is < mc; is += MR)
          for (int64_t js = 0; js < nc; js += NR)
            MicroKernel<T, MR, NR>(kc, a_pack.data() + is * kc, b_pack.data() + js * kc, k0 == 0,
                                   tile.data() + is * ldt + js, ldt);
      }
      for (int64_t i = 0; i < mc; ++i) {
        T* c_row = C + (i0 + i) * ldc + j0;
        const T* t_row = tile.data() + i * ldt;
        if (beta == T(0)) {
          for (int64_t j = 0; j < nc; ++j) c_row[j] = alpha * t_row[j];
        } else {
          for (int64_t j = 0; j < nc; ++j) c_row[j] = alpha * t_row[j] + beta * c_row[j];
        }
      }
    }
  });
}

}  // namespace

void GemmF32Ref(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float* A,
                int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc, ThreadPool* pool) {
  Gemm<float>(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, pool);
}

void GemmF64Ref(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, double alpha, const double* A,
                int64_t lda, const double* B, int64_t ldb, double beta, double* C, int64_t ldc, ThreadPool* pool) {
  Gemm<double>(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, pool);
}

}  // namespace sparq
