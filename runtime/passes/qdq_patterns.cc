#include "runtime/passes/qdq_patterns.h"

#include <set>
#include <string>

namespace sparq {

// Elementwise float ops whose value per element depends on that element
// (and on constant attributes or inputs) only.
bool IsElementwiseFloatOp(const Node& n) {
  static const std::set<std::string> kLutOps = {
      "Relu",     "Clip",     "LeakyRelu", "Sigmoid", "Tanh",  "HardSigmoid", "HardSwish", "Identity",
      "Elu",      "Selu",     "Celu",      "Softplus", "Softsign", "ThresholdedRelu", "Abs", "Neg",
      "Erf",      "Gelu",     "Mish",      "Exp",     "Floor", "Ceil",        "Round"};
  return n.domain.empty() && n.outputs.size() == 1 && !n.inputs.empty() && kLutOps.count(n.op_type) > 0;
}

// Ops that only move, drop or repeat elements of input 0 (the other inputs
// say where): they commute with any elementwise map, so a DequantizeLinear
// before one and a QuantizeLinear after it compose to one table, applied to
// the integers after the move (no table at all when it is the identity).
bool IsElementMoveOp(const Node& n) {
  static const std::set<std::string> kMoveOps = {"Reshape", "Transpose", "Squeeze", "Unsqueeze",
                                                 "Flatten", "Slice",     "Expand"};
  return n.domain.empty() && n.outputs.size() == 1 && !n.inputs.empty() && kMoveOps.count(n.op_type) > 0;
}

// MaxPool without Indices whose every window holds at least one tap of x.
bool IsMaxPoolOfIntegers(const Node& n) {
  if (n.op_type != "MaxPool" || !n.domain.empty() || n.inputs.size() != 1) return false;
  if (n.outputs.size() > 1 && !n.outputs[1].empty()) return false;
  const std::string auto_pad = n.attr_string("auto_pad", "NOTSET");
  if (auto_pad != "NOTSET" && auto_pad != "VALID" && !auto_pad.empty()) return false;
  for (int64_t d : n.attr_ints("dilations"))
    if (d != 1) return false;
  const std::vector<int64_t> kernel = n.attr_ints("kernel_shape");
  const std::vector<int64_t> pads = n.attr_ints("pads");
  if (kernel.empty() || (!pads.empty() && pads.size() != 2 * kernel.size())) return false;
  for (size_t i = 0; i < pads.size(); ++i)
    if (pads[i] < 0 || pads[i] >= kernel[i % kernel.size()]) return false;
  return true;
}

}  // namespace sparq
