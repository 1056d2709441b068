// Einsum of two operands as MatMul (internal): the reference Einsum
// (kernels/ref/einsum.cc) is a scalar loop over every label, far too slow on
// a model's hot path (DeepFilterNet's grouped linear layers, attention
// written as einsum); a two-operand contraction is a batched GEMM, which the
// fast MatMul rows run.
//
//   A[labels a] ── Einsum("a,b->o") ── Y      B[labels b]
//   =>
//   A ── Transpose ── (Reshape) ── Unsqueeze ──┐
//                                              MatMul ── (Squeeze) ── (Transpose) ── Y
//   B ── Transpose ── (Reshape ── Transpose) ── Unsqueeze ──┘
//
// Labels in both operands and the output are MatMul's batch dims; the ones
// in both operands only are summed (several are merged into one K by a
// Reshape that keeps the other dims: zeros in its shape); free labels of A
// give M, of B give N, the others become broadcast batch dims against
// inserted 1s. A constant B (a weight) is folded to one initializer by
// fold-constant-subgraphs, which runs after this pass. Lowered: explicit or
// implicit equations without an ellipsis or a repeated label, where every
// label is in both operands or in the output. The sums run in float32 on the
// MatMul rows (the reference sums in double): results agree within float32
// rounding, not bit for bit, as any fast row does.
#pragma once

#include <string>
#include <vector>

#include "sparq/graph.h"

namespace sparq {

// Rewrites the Einsum nodes of `model`'s main graph described above; returns
// their names.
std::vector<std::string> LowerEinsumToMatMul(Model* model);

}  // namespace sparq
