// The op classes the QDQ fusions share (qdq_fusion.cc, island_fusion.cc),
// kept apart so that neither fusion includes the other.
#pragma once

#include "sparq/graph.h"

namespace sparq {

// An elementwise float op whose value per element depends on that element
// (and constant attributes or inputs) only.
bool IsElementwiseFloatOp(const Node& n);
// An op that only moves, drops or repeats elements of its input 0.
bool IsElementMoveOp(const Node& n);
// A MaxPool that commutes with a nondecreasing map of its input (no Indices,
// every window holds a tap).
bool IsMaxPoolOfIntegers(const Node& n);

}  // namespace sparq
