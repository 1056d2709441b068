// The 2:4 structured sparsity of a weight for cuSPARSELt (spmm_cusparselt.h),
// plain C++ (the prepare steps and host tests use it on any machine):
//
//   W [K, N] row-major (MatMul's B):   for every column n and every group of
//   four rows k = 4g .. 4g+3, at most two of W[k, n] are nonzero.
//
// That is the pattern sparq's 2:4 pruning writes for a MatMul / Gemm weight
// (four consecutive inputs of one output) and the one cuSPARSELt's structured
// operand holds along the GEMM's reduction dimension (spmm_cusparselt.cc:
// W read as the column-major A = W^T [N, K]).
#pragma once

#include <cstdint>

namespace sparq {
namespace cuda {

// Whether float16 bits are a zero (+0 or -0).
inline bool HalfIsZero(uint16_t bits) { return (bits & 0x7fffu) == 0; }

// Whether W [k, n] (float16 bits) is 2:4 sparse along k; k must be a multiple of 4.
inline bool Is24SparseAlongK(const uint16_t* w, int64_t k, int64_t n) {
  if (k % 4 != 0) return false;
  for (int64_t g = 0; g < k; g += 4)
    for (int64_t c = 0; c < n; ++c) {
      int nonzero = 0;
      for (int64_t r = g; r < g + 4; ++r) nonzero += HalfIsZero(w[r * n + c]) ? 0 : 1;
      if (nonzero > 2) return false;
    }
  return true;
}

}  // namespace cuda
}  // namespace sparq
