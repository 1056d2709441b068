// Einsum (ONNX opset 12+, numpy's einsum): the equation parsed against the
// operands' ranks, shared by the reference kernel (einsum.cc) and the
// executor's rewrite of two-operand contractions into MatMul
// (runtime/passes/einsum_lowering.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sparq/status.h"

namespace sparq {

// Labels are the equation's letters by character code ('A'..'Z', 'a'..'z');
// the dims an ellipsis stands for get kEinsumEllipsisLabel + k, k counted
// from the left of the widest ellipsis (operands' ellipsis dims align to the
// right and broadcast, as numpy's do).
constexpr int kEinsumEllipsisLabel = 256;

struct EinsumSpec {
  std::vector<std::vector<int>> operands;  // the label of each dim of each operand, in order
  std::vector<int> output;                 // the output's labels, in order
  int ellipsis_rank = 0;                   // dims the widest ellipsis stands for
};

// Parses `equation` ("ij,jk->ik", "...ii->...i", implicit "ij,jk") for
// operands of the given ranks. Spaces are ignored. Without "->" the output is
// the ellipsis dims followed by the letters that occur once, in character
// order; with an explicit output that omits "...", the ellipsis dims are
// summed. A letter repeated within an operand takes its diagonal. Errors
// (InvalidArgument, naming the term): a character that is not a letter, a
// second ellipsis or a stray '.', a term count other than ranks.size(), a
// term whose letters and ellipsis do not add up to its operand's rank, an
// output letter that no operand has or that repeats.
StatusOr<EinsumSpec> ParseEinsum(const std::string& equation, const std::vector<int64_t>& ranks);

}  // namespace sparq
