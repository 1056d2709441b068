// Running one unfused node's reference kernel inside a fused node's reference
// (sparq.Attention, sparq.LayerNormChain), so that the fused graph's
// reference computes the unfused graph's bits by construction.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "kernels/op_context.h"
#include "kernels/registry.h"
#include "sparq/status.h"
#include "sparq/tensor.h"

namespace sparq {

// Runs the reference kernel of the default-domain `op` (opset 13) on `inputs`
// with `attrs`, its output 0 into *out; errors are reported as ctx's (naming
// the fused node).
inline Status RunReferenceStep(OpContext& ctx, const char* op, std::vector<const Tensor*> inputs,
                               std::vector<Attribute> attrs, Tensor* out) {
  const KernelDef* def = KernelRegistry::Reference().Find(op, "", 13);
  if (def == nullptr) return ctx.NotSupported(std::string("no reference kernel for ") + op);
  const Node step{ctx.node().name + "/" + op, op, "", {}, {"y"}, std::move(attrs), ""};
  OpContext step_ctx(step, 13, std::move(inputs), ctx.pool());
  Status st = def->fn(step_ctx);
  if (!st.ok()) return ctx.Error(st.code(), st.message());
  *out = std::move(step_ctx.outputs()[0]);
  return Status::OK();
}

}  // namespace sparq
