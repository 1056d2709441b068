// Control-flow nodes (If, Loop, Scan): the executor runs each graph
// attribute of such a node with an executor of its own, made at Create over
// the subgraph on the parent's backend (and so its thread pool). The values
// a subgraph reads from the enclosing graphs (Node::ImplicitInputs) become
// extra inputs of the node's step in the parent, so they are ordered,
// copied to the host and kept alive like any input, and graph inputs of the
// subgraph's model. What the node does with its subgraphs (which branch,
// how many trips, slicing and stacking) is its kernel in
// kernels/ref/control_flow.cc, which calls them through SubgraphRunner.
//
//   parent step:  If(cond) + implicit [w, x]          (inputs: cond, w, x)
//                   |
//   NodeSubgraphs:  then_branch -> Executor(model: then_branch + inputs w)
//                   else_branch -> Executor(model: else_branch + inputs x)
//   a run:          Bind({w, x}) -> SubgraphRunner::Run("then_branch", {}, &outs)
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "kernels/op_context.h"
#include "sparq/executor.h"

namespace sparq {

class NodeSubgraphs {
 public:
  // One executor per graph attribute of `node` (a node of `parent`), with
  // `options` (graph capture off). Errors: a subgraph's Create error (an
  // unsupported operator, ...), with the node and attribute named.
  static StatusOr<std::shared_ptr<const NodeSubgraphs>> Create(const Model& parent, const Node& node,
                                                               const ExecutorOptions& options);

  // The node's ImplicitInputs: the values Bind takes, in this order.
  const std::vector<std::string>& implicit_inputs() const { return implicit_; }

  // A runner for one run of the node, the implicit inputs bound to `outer`
  // (host tensors, implicit_inputs() order); it must not outlive `outer`.
  std::unique_ptr<SubgraphRunner> Bind(const std::vector<const Tensor*>& outer) const;

 private:
  friend class BoundSubgraphs;
  struct Body {
    std::string attribute;
    std::unique_ptr<Executor> executor;
    std::vector<std::string> inputs;   // the subgraph's own graph inputs, in order
    std::vector<size_t> outer;         // its outer reads: indices into implicit_
  };
  std::vector<std::string> implicit_;
  std::vector<Body> bodies_;
};

}  // namespace sparq
