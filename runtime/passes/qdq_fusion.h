// QDQ -> integer operator fusion at executor creation (internal).
#pragma once

#include <string>
#include <vector>

#include "sparq/graph.h"

namespace sparq {

// Rewrites DequantizeLinear -> Conv/MatMul -> QuantizeLinear patterns of
// `model` into QLinearConv / QLinearMatMul, then the float glue between
// quantized values (DequantizeLinear -> elementwise ops / MaxPool / Add /
// Reshape-like moves -> QuantizeLinear) into integer ops and internal
// integer operators of domain "sparq" (see
// qdq_fusion.cc for the patterns and the exact conditions); returns the
// names of the fused nodes. The graph keeps its
// inputs and outputs; a pattern that does not meet every condition is left
// as it is.
std::vector<std::string> FuseQdqToIntegerOps(Model* model);


}  // namespace sparq
