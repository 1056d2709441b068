// Reference dense matrix multiply: the spec that fast GEMM kernels (AVX-512,
// CUDA) are tested against, and the engine of the reference Gemm, MatMul, Conv
// and ConvTranspose kernels.
//
// Summation order (the contract fast kernels are compared under):
//
//   acc(i, j) = sum over k = 0, 1, ..., K-1 of  op(A)(i, k) * op(B)(k, j)
//               accumulated left to right in T, starting from 0
//   C(i, j)   = alpha * acc(i, j) + beta * C(i, j)      (beta == 0: C not read)
//
// Every C element is computed by exactly one thread in that order, so the result
// is bitwise identical for every thread count and equal to the naive triple loop
// (up to the compiler contracting a*b+c into an FMA).
#pragma once

#include <cstdint>

#include "kernels/parallel.h"

namespace sparq {

// C[M,N] = alpha * op(A)[M,K] * op(B)[K,N] + beta * C, all row-major.
//   op(A) = A (stored M x K, row stride lda) or, with trans_a, A^T (A stored K x M).
//   op(B) = B (stored K x N, row stride ldb) or, with trans_b, B^T (B stored N x K).
//   C is M x N with row stride ldc; when beta == 0 it is write-only (NaNs in it
//   do not propagate), as in BLAS. K == 0 gives C = beta * C.
// Parallel over tiles of C on `pool` (null: the calling thread only).
// C must not alias A or B.
void GemmF32Ref(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float* A,
                int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc, ThreadPool* pool);

// The same contract in double precision.
void GemmF64Ref(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, double alpha, const double* A,
                int64_t lda, const double* B, int64_t ldb, double beta, double* C, int64_t ldc, ThreadPool* pool);

// Overloads so templated callers (Conv, MatMul over float and double) can write GemmRef<T>.
inline void GemmRef(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float* A,
                    int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc, ThreadPool* pool) {
  GemmF32Ref(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, pool);
}
inline void GemmRef(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, double alpha, const double* A,
                    int64_t lda, const double* B, int64_t ldb, double beta, double* C, int64_t ldc, ThreadPool* pool) {
  GemmF64Ref(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, pool);
}

}  // namespace sparq
