// Float islands between quantized values -> integer operators, at executor
// creation (internal; runs inside FuseQdqToIntegerOps, after the glue fusions).
#pragma once

#include <string>
#include <vector>

#include "sparq/graph.h"

namespace sparq {

// Rewrites what the glue fusions of qdq_fusion.cc leave in float between
// DequantizeLinear and QuantizeLinear nodes when the float values branch:
// elementwise chains (SiLU) read by Split / Concat / Resize / Slice / ... and
// by residual Adds, each QuantizeLinear then computed from the integers
// (sparq.QLinearLut, moves and Concat on the integers, sparq.QLinearAdd). See
// island_fusion.cc for the rules and exactness; returns the names of the
// QuantizeLinear nodes replaced. The graph keeps its inputs and outputs; a
// QuantizeLinear whose float inputs are still needed elsewhere is left as it is.
std::vector<std::string> FuseFloatIslands(Model* model);

// A Concat whose inputs are sparq.QLinearLut outputs that it alone reads
// becomes sparq.ConcatLut, the tables applied as it copies; where the inputs
// are, in order, every output of one Split along the same axis with one
// table, it reads the Split's input instead (the Split keeps only the outputs
// others read). Returns the names of the Concat nodes rewritten.
std::vector<std::string> FoldTablesIntoConcats(Graph& g);

// A float Concat whose every input is a per-tensor DequantizeLinear (then
// move ops: Reshape, ...) that only it reads (and Shape / Size, which then
// read the integers) becomes sparq.DequantizeConcat of the integers, the
// moves done on them (YOLO's detection head). Exact.
// Returns the names of the Concat nodes rewritten.
std::vector<std::string> FoldDequantizeIntoConcats(Model* model);

}  // namespace sparq
