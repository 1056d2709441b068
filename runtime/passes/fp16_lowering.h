// Float16 models run as float32 (internal): this CPU family has no float16
// arithmetic, and the reference kernels compute each float16 op in float32
// anyway, converting every input and output. Lowering the executor's private
// copy once instead lets every fast float32 kernel and fusion take the nodes.
#pragma once

#include <set>
#include <string>

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
// whether the model was rewritten. With `float16_values`, also returns the
// values inside the graph that were float16 before the rewrite (by their
// names after it), for RoundFloat16Values.
bool LowerFloat16ToFloat32(Model* model, std::set<std::string>* float16_values = nullptr);

// Rounds each of `values` (node outputs; graph outputs and values no node
// produces are left out) to float16 after its producer, with a
// sparq.RoundToFloat16 node:
//
//   producer ── v          ->   producer ── v' ── RoundToFloat16 ── v
//
// so that a lowered graph computes each operator in float32 and keeps
// float16's rounding and overflow (to infinity) between operators, as
// onnxruntime computes float16 on a CPU. Run after the fusions: a fused
// node's inner values are not rounded. A value made by an ONNX op that only
// moves, selects or sign-flips values (Reshape, Transpose, Concat, Slice,
// MaxPool, Relu, nearest Resize, ...) out of values already float16 (rounded
// ones, or such moves of them) gets no rounding node: it would change no bit.
// Returns the number of nodes added.
size_t RoundFloat16Values(Model* model, const std::set<std::string>& values);

}  // namespace sparq
