// The executor's graph rewrites by name: what a backend lists for a profile
// (Backend::Passes, kernels/backend.h) is run from this one table.
//
//   name                       rewrite (file)
//   lower-einsum               two-operand Einsum -> Transpose/Reshape/MatMul (einsum_lowering.h)
//   fold-constant-subgraphs    constant subgraphs -> initializers (graph_folding.h)
//   fold-pads                  zero Pad (also DQ -> Pad -> Q) into the next Conv (graph_folding.h)
//   fuse-qdq                   DQ -> op -> Q into integer operators (qdq_fusion.h)
//   fuse-conv-activation       Conv + Relu / Clip / SiLU into one node (float_fusion.h)
//   fuse-pointwise-depthwise   1x1 Conv + the depthwise Conv reading it (float_fusion.h)
#pragma once

#include <string>
#include <vector>

#include "sparq/graph.h"
#include "sparq/status.h"

namespace sparq {

// Runs the rewrite `name` on `model`. Errors: InvalidArgument for an unknown
// name (listing the known ones); the rewrite's own errors.
Status RunGraphPass(const std::string& name, Model* model);
// Every name RunGraphPass knows, in table order.
std::vector<std::string> GraphPassNames();

}  // namespace sparq
