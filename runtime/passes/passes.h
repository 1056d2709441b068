// The executor's graph rewrites by name: what a backend lists for a profile
// (Backend::Passes, kernels/backend.h) is run from this one table.
//
//   name                       rewrite (file)
//   lower-einsum               two-operand Einsum -> Transpose/Reshape/MatMul (einsum_lowering.h)
//   fold-constant-subgraphs    constant subgraphs -> initializers (graph_folding.h)
//   fold-pads                  zero Pad (also DQ -> Pad -> Q) into the next Conv (graph_folding.h)
//   fuse-qdq                   DQ -> op -> Q into integer operators (qdq_fusion.h)
//   fuse-one-hot               Equal -> Cast -> MatMul (or -> Q -> QLinearMatMul) into a table lookup
//                              (one_hot_fusion.h)
//   fuse-conv-activation       Conv + Relu / Clip / SiLU into one node; SiLU, HardSwish, GELU,
//                              attention (BERT's, torch SDPA's) and LayerNorm chains
//                              (below opset 17) each one node (float_fusion.h)
//   fuse-pointwise-depthwise   1x1 Conv + the depthwise Conv reading it (float_fusion.h)
#pragma once

#include <string>
#include <vector>

#include "runtime/passes/graph_folding.h"
#include "sparq/graph.h"
#include "sparq/status.h"

namespace sparq {

// Runs the rewrite `name` on `model`. With `foldable`, the rewrites that can
// fold a value away as an alias of another (fold-pads) may fold those graph
// outputs and note them there. Errors: InvalidArgument for an unknown name
// (listing the known ones); the rewrite's own errors.
Status RunGraphPass(const std::string& name, Model* model, FoldableOutputs* foldable = nullptr);
// Every name RunGraphPass knows, in table order.
std::vector<std::string> GraphPassNames();

}  // namespace sparq
