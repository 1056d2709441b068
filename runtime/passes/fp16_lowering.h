// Float16 models run as float32 (internal): this CPU family has no float16
// arithmetic, and the reference kernels compute each float16 op in float32
// anyway, converting every input and output. Lowering the executor's private
// copy once instead lets every fast float32 kernel and fusion take the nodes.
#pragma once

#include "sparq/graph.h"

namespace sparq {

// Rewrites `model` so that it computes in float32 what it computed in
// float16:
//
//   float16 initializers, Constant / ConstantOfShape values  ->  float32 (exact,
//                                                                F16C rows at load)
//   Cast(to=float16)                                        ->  Cast(to=float)
//   graph input x: float16     ->  x ── Cast(to=float) ── x'    (x' read by the nodes)
//   graph output y: float16    ->  ... ── y' ── Cast(to=float16) ── y
//
// so the graph's inputs and outputs keep their types while nothing inside
// rounds to float16 any more: outputs differ from the float16 graph's by
// float16 rounding (kFp16LoweringTolerance in the tests), and are more
// accurate. Models with no float16 tensor, with subgraphs, with float16
// initializers that run inputs may override, or with other ops that make
// float16 values (a dtype attribute of 10) are left as they are. Returns
// whether the model was rewritten.
bool LowerFloat16ToFloat32(Model* model);

}  // namespace sparq
