// FP8 Q/DQ pairs -> one fake-quantization node, at executor creation (internal).
#pragma once

#include <string>
#include <vector>

#include "sparq/graph.h"

namespace sparq {

// Rewrites each float8e4m3fn QuantizeLinear whose output only
// DequantizeLinear nodes with the same parameters read (the pair the FP8
// quantizer writes around an activation):
//
//   x ── QuantizeLinear(s, zp: float8e4m3fn 0) ── DequantizeLinear(s, zp) ── y
//        =>   x ── sparq.FakeQuantFp8(s) ── y
//
// when s is one constant float32 value, the zero points are constant zeros,
// saturate is 1 and the quantized value is not a graph output. The result is
// bit for bit the pair's (FakeQuantFp8Ref). The weights' DequantizeLinear of
// constants is folded by FuseQdqToIntegerOps (FoldConstantDequantize), so the
// layers then run their float32 rows. Returns the names of the new nodes.
std::vector<std::string> FuseFp8QdqPairs(Model* model);

}  // namespace sparq
