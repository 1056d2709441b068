// Float operator fusion at executor creation (internal): activations folded
// into the producing convolution, as deployment runtimes do.
#pragma once

#include <string>
#include <vector>

#include "kernels/registry.h"  // kSparqDomain
#include "sparq/graph.h"

namespace sparq {

// Rewrites Conv -> Relu and Conv -> Clip (constant bounds) into one ai.sparq
// FusedConv node: Conv's inputs and attributes plus activation (the op type)
// and the clamp out_min / out_max, when the activation is the Conv output's
// only reader and the Conv output is not a graph output. Returns the fused
// nodes' names. FusedConv has a reference kernel (Conv, then the clamp) and
// runs on the FP32 GEMM with the clamp in its epilogue. Conv -> x *
// Sigmoid(x) becomes a FusedConv too, activation "Silu" (unbounded clamp),
// its SiLU applied to each GEMM tile as it is stored. Also rewrites
// Mul(x, Sigmoid(x)) into one sparq.Silu node (float_fusion.cc says when),
// computed in one pass by the sigmoid_f32 rows (into a sparq.ConvIntegerToFloat
// before it, as its activation "Silu", when x has no other reader and is
// not a graph output; then a QuantizeLinear that is the conv's only reader
// goes into the conv too, as its inputs Y_scale and Y_zero_point: the conv
// writes the quantized bytes; a Concat read only by a QuantizeLinear first
// becomes a QuantizeLinear per input and a Concat of bytes), Paddle's HardSwish chain
// into sparq.HardSwishChain, BERT's erf GELU chain (Div, Erf, Add, Mul,
// Mul) into sparq.GeluErfChain and JAX's tanh GELU chain (six Mul, two Add,
// Tanh) into sparq.GeluTanhChain, each one pass with the unfused nodes' bits.
// Attention (BERT's MatMul -> scale -> mask -> Softmax -> MatMul, and
// torch's SDPA export with its Q / K^T scales and NaN guard) becomes one
// sparq.Attention node (float_fusion.cc says when), and LayerNorm written as
// ReduceMean / Sub / Pow / ReduceMean / Add / Sqrt / Div / Mul / Add (exports
// below opset 17) one sparq.LayerNormChain node with the same bits.
std::vector<std::string> FuseConvActivations(Model* model);

// Rewrites a 1x1 Conv / FusedConv read only by a depthwise Conv / FusedConv
// into one sparq.PointwiseDepthwise node (float_fusion.cc says when), which
// keeps the 1x1 convolution's output in the depthwise kernel's working
// memory instead of memory. Returns the fused nodes' names. Run after
// FuseConvActivations (it fuses the clamps first).
std::vector<std::string> FusePointwiseDepthwise(Model* model);

}  // namespace sparq
