#include "kernels/ref/gemm_int.h"

#include <algorithm>

namespace sparq {

namespace {

// Columns handled per pass over A: keeps the K x kColumnBlock slice of B in
// cache while every row of A streams past it. Only the memory order changes;
// each C element is still one sum over k in increasing order.
constexpr int64_t kColumnBlock = 512;

// c[n] += a * (b[n] - b_zp(n)) for n in [0, n_count), multiplied and added in
// uint32 so that overflow wraps (mod 2^32) instead of being undefined behaviour.
template <typename TB>
inline void AxpyRowPerTensorZp(int64_t n_count, int32_t a, const TB* b, int32_t b_zp, uint32_t* c) {
  const uint32_t ua = static_cast<uint32_t>(a);
  for (int64_t n = 0; n < n_count; ++n) c[n] += ua * static_cast<uint32_t>(static_cast<int32_t>(b[n]) - b_zp);
}

template <typename TB>
inline void AxpyRowPerColumnZp(int64_t n_count, int32_t a, const TB* b, const int32_t* b_zp, uint32_t* c) {
  const uint32_t ua = static_cast<uint32_t>(a);
  for (int64_t n = 0; n < n_count; ++n) c[n] += ua * static_cast<uint32_t>(static_cast<int32_t>(b[n]) - b_zp[n]);
}

}  // namespace

template <typename TA, typename TB>
void GemmS32Ref(int64_t M, int64_t N, int64_t K, const TA* A, int64_t lda, GemmZeroPoints a_zp, const TB* B,
                int64_t ldb, GemmZeroPoints b_zp, int32_t* C, int64_t ldc) {
  const bool b_per_column = b_zp.values != nullptr && b_zp.per_channel;
  const int32_t b_zp_scalar = b_zp.at(0);
  for (int64_t n0 = 0; n0 < N; n0 += kColumnBlock) {
    const int64_t n_count = std::min(kColumnBlock, N - n0);
    for (int64_t m = 0; m < M; ++m) {
      uint32_t* c = reinterpret_cast<uint32_t*>(C + m * ldc + n0);  // same bits, defined wrap-around
      std::fill(c, c + n_count, 0u);
      const TA* a_row = A + m * lda;
      const int32_t a_zero = a_zp.at(m);
      for (int64_t k = 0; k < K; ++k) {
        const int32_t a = static_cast<int32_t>(a_row[k]) - a_zero;
        if (a == 0) continue;  // adds nothing
        const TB* b = B + k * ldb + n0;
        if (b_per_column) {
          AxpyRowPerColumnZp(n_count, a, b, b_zp.values + n0, c);
        } else {
          AxpyRowPerTensorZp(n_count, a, b, b_zp_scalar, c);
        }
      }
    }
  }
}

template void GemmS32Ref<uint8_t, uint8_t>(int64_t, int64_t, int64_t, const uint8_t*, int64_t, GemmZeroPoints,
                                           const uint8_t*, int64_t, GemmZeroPoints, int32_t*, int64_t);
template void GemmS32Ref<uint8_t, int8_t>(int64_t, int64_t, int64_t, const uint8_t*, int64_t, GemmZeroPoints,
                                          const int8_t*, int64_t, GemmZeroPoints, int32_t*, int64_t);
template void GemmS32Ref<int8_t, uint8_t>(int64_t, int64_t, int64_t, const int8_t*, int64_t, GemmZeroPoints,
                                          const uint8_t*, int64_t, GemmZeroPoints, int32_t*, int64_t);
template void GemmS32Ref<int8_t, int8_t>(int64_t, int64_t, int64_t, const int8_t*, int64_t, GemmZeroPoints,
                                         const int8_t*, int64_t, GemmZeroPoints, int32_t*, int64_t);

}  // namespace sparq
