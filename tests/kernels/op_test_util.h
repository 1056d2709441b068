// Running one reference kernel on hand-made tensors, for the kernel tests.
#pragma once

#include <string>
#include <vector>

#include "kernels/op_context.h"
#include "kernels/registry.h"
#include "sparq/graph.h"

namespace sparq {
namespace testing {

// A node of `op_type` named `name` with `attrs` (inputs/outputs are filled by RunRefKernel).
inline Node OpNode(std::string op_type, std::vector<Attribute> attrs = {}, std::string name = "n") {
  Node n;
  n.name = std::move(name);
  n.op_type = std::move(op_type);
  n.attributes = std::move(attrs);
  return n;
}

// Runs the reference kernel of `node` at `opset` on `inputs` (an undefined
// tensor marks an absent optional input); returns its `num_outputs` outputs or
// the kernel's error.
inline StatusOr<std::vector<Tensor>> RunRefKernel(Node node, int64_t opset, const std::vector<Tensor>& inputs,
                                                  size_t num_outputs = 1, ThreadPool* pool = nullptr) {
  std::vector<const Tensor*> ptrs;
  for (size_t i = 0; i < inputs.size(); ++i) {
    node.inputs.push_back(inputs[i].defined() ? "in" + std::to_string(i) : "");
    ptrs.push_back(inputs[i].defined() ? &inputs[i] : nullptr);
  }
  for (size_t i = 0; i < num_outputs; ++i) node.outputs.push_back("out" + std::to_string(i));
  const KernelDef* def = KernelRegistry::Reference().Find(node.op_type, node.domain, opset);
  if (def == nullptr) return Status::NotFound("no kernel for " + node.op_type);
  OpContext ctx(node, opset, std::move(ptrs), pool);
  SPARQ_RETURN_IF_ERROR(def->fn(ctx));
  return ctx.outputs();
}

}  // namespace testing
}  // namespace sparq
