// sparq.PointwiseDepthwise (runtime/passes/float_fusion.h) as the two nodes it
// replaced: its reference kernel runs them, and the fast rows run them where
// their geometry does not fit (kernels/cpu/dense_f32.cc).
#pragma once

#include <utility>

#include "sparq/graph.h"

namespace sparq {

// The node's two parts, both ai.sparq FusedConv nodes:
//   first:  the pointwise convolution, inputs (X, W_pw, B_pw), clamp
//           [pw_out_min, pw_out_max], output "<name>/pointwise:t"
//   second: the depthwise convolution, inputs (t, W_dw, B_dw), the fused
//           node's other attributes (its window, group, out_min, out_max),
//           output Y
// The fused node's inputs are (X, W_pw, B_pw, W_dw, B_dw), a bias "" when
// absent.
std::pair<Node, Node> PointwiseDepthwiseParts(const Node& fused);

}  // namespace sparq
