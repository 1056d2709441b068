// Small dense linear algebra in double precision, for the least-squares fits
// of pruning recovery and of GPTQ (quant/gptq.cc): symmetric positive
// definite factorizations on row-major k x k matrices. Sums run in a fixed
// order, so results are the same on every run.
#pragma once

#include <cstdint>
#include <vector>

namespace sparq {

// a . b over n elements, four interleaved accumulators combined as
// (s0 + s1) + (s2 + s3).
double DotF64(const double* a, const double* b, int64_t n);

// In-place Cholesky A = L L^T of a k x k row-major SPD matrix: the lower
// triangle (diagonal included) becomes L, the upper one is left as it was.
// False when a pivot is not positive (A not SPD to working precision).
bool Cholesky(std::vector<double>& a, int64_t k);

// Solves L L^T x = b in place (b becomes x), L from Cholesky.
void CholeskySolve(const std::vector<double>& l, int64_t k, std::vector<double>& b);

// The upper triangular U with U^T U = A^-1 (the Cholesky factor of A's
// inverse, in upper form: GPTQ's update rows), for a k x k SPD A, in place
// (the lower triangle becomes 0). False when A is not SPD; a's contents are
// then unchanged.
bool UpperCholeskyOfInverse(std::vector<double>& a, int64_t k);

}  // namespace sparq
