// One-hot MatMul as a table lookup at executor creation (internal; the
// pass "fuse-one-hot" of runtime/passes/passes.h).
#pragma once

#include <string>
#include <vector>

#include "sparq/graph.h"

namespace sparq {

// Rewrites a MatMul whose left operand is a one-hot encoding built by Equal
// against constant classes (JAX's jax.nn.one_hot(x, V) @ W as jax2tf exports
// it: magika's byte embedding) into one sparq.OneHotLookup node that copies
// one row of a table per row of x (one_hot_fusion.cc draws the patterns and
// says when). The table holds, for each class and for "no class", the row
// the replaced nodes compute for that one-hot row, bit for bit: FP32 MatMul
// (W read as is) and, after fuse-qdq, QuantizeLinear -> QLinearMatMul (its
// int8 outputs, requantized by kernels/ref/quantize.h's rules). Returns the
// fused nodes' names (the MatMul's, which the lookup keeps).
std::vector<std::string> FuseOneHotMatMul(Model* model);

}  // namespace sparq
