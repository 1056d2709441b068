// The reference integer GEMM: 8-bit operands with zero points, exact int32
// accumulation. The SPEC for fast INT8 GEMMs (gemm_s8s8_avx512vnni,
// gemm_s8s8_cublaslt, ...), which must return the same int32 values.
#pragma once

#include <cstdint>

namespace sparq {

// Zero points of one GEMM operand: none (all 0), one for the whole operand, or
// one per row of A / per column of B.
struct GemmZeroPoints {
  const int32_t* values = nullptr;  // nullptr: every zero point is 0
  bool per_channel = false;         // true: values[m] for row m of A, values[n] for column n of B

  int32_t at(int64_t i) const { return values == nullptr ? 0 : values[per_channel ? i : 0]; }
};

// C = (A - a_zp) * (B - b_zp) in int32:
//   C[m * ldc + n] = sum over k = 0..K-1 of
//                    (A[m * lda + k] - a_zp.at(m)) * (B[k * ldb + n] - b_zp.at(n))
// for 0 <= m < M, 0 <= n < N. A is M x K, B is K x N, C is M x N, all row
// major with leading dimensions lda, ldb, ldc (elements). TA and TB are each
// uint8_t or int8_t.
//
// Exactness: each product is exact in int32 as long as the zero points lie in
// their operand type's range (|product| <= 255 * 255); the sum is taken over
// k in increasing order with int32 wrap-around (mod 2^32) on overflow, which
// ONNX allows ("accumulation may overflow if and only if in 32 bits") and
// which is what int32 hardware accumulators do. Without overflow the result
// is the exact integer sum, independent of summation order, so a fast kernel
// may sum in any order and must still match bit for bit.
// C is overwritten (not accumulated into). Single threaded; callers split rows.
template <typename TA, typename TB>
void GemmS32Ref(int64_t M, int64_t N, int64_t K, const TA* A, int64_t lda, GemmZeroPoints a_zp, const TB* B,
                int64_t ldb, GemmZeroPoints b_zp, int32_t* C, int64_t ldc);

}  // namespace sparq
