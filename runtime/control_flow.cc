#include "runtime/control_flow.h"

#include <algorithm>

namespace sparq {

class BoundSubgraphs : public SubgraphRunner {
 public:
  BoundSubgraphs(const NodeSubgraphs& subgraphs, std::vector<const Tensor*> outer)
      : subgraphs_(subgraphs), outer_(std::move(outer)) {}

  Status Run(const std::string& attribute, const std::vector<Tensor>& inputs, std::vector<Tensor>* outputs) override {
    for (const NodeSubgraphs::Body& body : subgraphs_.bodies_) {
      if (body.attribute != attribute) continue;
      if (inputs.size() != body.inputs.size()) {
        return Status::InvalidArgument("subgraph '" + attribute + "' has " + std::to_string(body.inputs.size()) +
                                       " inputs, given " + std::to_string(inputs.size()));
      }
      TensorMap feed;
      for (size_t i = 0; i < inputs.size(); ++i) feed[body.inputs[i]] = inputs[i];
      for (size_t k : body.outer) {
        const Tensor* t = outer_[k];
        if (t == nullptr || !t->defined()) {
          return Status::Internal("subgraph '" + attribute + "': outer value '" + subgraphs_.implicit_[k] +
                                  "' was not computed");
        }
        feed[subgraphs_.implicit_[k]] = *t;
      }
      TensorMap result;
      SPARQ_RETURN_IF_ERROR(body.executor->Run(feed, &result));
      outputs->clear();
      for (const std::string& name : body.executor->output_names()) outputs->push_back(result.at(name));
      return Status::OK();
    }
    return Status::InvalidArgument("no subgraph attribute '" + attribute + "'");
  }

 private:
  const NodeSubgraphs& subgraphs_;
  std::vector<const Tensor*> outer_;
};

StatusOr<std::shared_ptr<const NodeSubgraphs>> NodeSubgraphs::Create(const Model& parent, const Node& node,
                                                                     const ExecutorOptions& options) {
  auto made = std::make_shared<NodeSubgraphs>();
  made->implicit_ = node.ImplicitInputs();
  ExecutorOptions sub = options;
  sub.cuda_graphs = false;
  sub.keep_values.clear();
  for (const Attribute& a : node.attributes) {
    if (!a.subgraph) continue;
    Model model;
    model.ir_version = parent.ir_version;
    model.opset_imports = parent.opset_imports;
    model.raw_functions = parent.raw_functions;
    model.graph = *a.subgraph;
    Body body;
    body.attribute = a.name;
    for (const ValueInfo& v : model.graph.inputs) body.inputs.push_back(v.name);
    for (const std::string& name : OuterScopeReads(*a.subgraph)) {
      ValueInfo v;  // type and shape unknown here: the parent's value decides
      v.name = name;
      model.graph.inputs.push_back(std::move(v));
      const auto at = std::find(made->implicit_.begin(), made->implicit_.end(), name);
      body.outer.push_back(static_cast<size_t>(at - made->implicit_.begin()));
    }
    StatusOr<std::unique_ptr<Executor>> executor = Executor::Create(model, sub);
    if (!executor.ok()) return executor.status().WithContext(node.Describe() + " subgraph '" + a.name + "'");
    body.executor = std::move(executor).value();
    made->bodies_.push_back(std::move(body));
  }
  return std::shared_ptr<const NodeSubgraphs>(std::move(made));
}

std::unique_ptr<SubgraphRunner> NodeSubgraphs::Bind(const std::vector<const Tensor*>& outer) const {
  return std::make_unique<BoundSubgraphs>(*this, outer);
}

}  // namespace sparq
