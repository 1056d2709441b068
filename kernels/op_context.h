// What a kernel sees when it runs one node: the node (attributes), the opset
// it was imported with, its input tensors and a place for its outputs.
//
// A kernel is a function `Status Fn(OpContext&)`. It reads inputs, checks them
// (returning InvalidArgument/NotSupported through ctx.Error so the message
// names the node), computes, and sets every output the node asks for.
#pragma once

#include <string>
#include <vector>

#include "kernels/parallel.h"
#include "sparq/graph.h"
#include "sparq/status.h"
#include "sparq/tensor.h"

namespace sparq {

class OpContext {
 public:
  OpContext(const Node& node, int64_t opset, std::vector<const Tensor*> inputs, ThreadPool* pool)
      : node_(node), opset_(opset), inputs_(std::move(inputs)), outputs_(node.outputs.size()), pool_(pool) {}

  const Node& node() const { return node_; }
  // Version of the node's domain imported by the model (e.g. 13 for opset 13).
  int64_t opset() const { return opset_; }
  ThreadPool* pool() const { return pool_; }
  // The state the kernel row's prepare step made for this node (nullptr
  // without one); see PrepareFn in kernels/registry.h.
  const void* prepared() const { return prepared_; }
  void set_prepared(const void* state) { prepared_ = state; }

  // Number of input slots, trailing absent optional inputs included.
  size_t num_inputs() const { return inputs_.size(); }
  // True when input slot i exists and is not an absent optional input ("").
  bool has_input(size_t i) const { return i < inputs_.size() && inputs_[i] != nullptr; }
  // Input i; precondition has_input(i).
  const Tensor& input(size_t i) const { return *inputs_[i]; }

  size_t num_outputs() const { return outputs_.size(); }
  // True when the node names output i (optional outputs may be left out).
  bool wants_output(size_t i) const { return i < node_.outputs.size() && !node_.outputs[i].empty(); }
  void set_output(size_t i, Tensor t) {
    if (i < outputs_.size()) outputs_[i] = std::move(t);
  }
  std::vector<Tensor>& outputs() { return outputs_; }

  // Errors whose message starts with the node's description.
  Status Error(StatusCode code, const std::string& msg) const { return Status(code, node_.Describe() + ": " + msg); }
  Status InvalidArgument(const std::string& msg) const { return Error(StatusCode::kInvalidArgument, msg); }
  Status NotSupported(const std::string& msg) const { return Error(StatusCode::kNotSupported, msg); }

  // Fails unless inputs [0, n) are present.
  Status RequireInputs(size_t n) const {
    for (size_t i = 0; i < n; ++i)
      if (!has_input(i)) return InvalidArgument("input " + std::to_string(i) + " is required");
    return Status::OK();
  }

 private:
  const Node& node_;
  int64_t opset_;
  std::vector<const Tensor*> inputs_;
  std::vector<Tensor> outputs_;
  const void* prepared_ = nullptr;
  ThreadPool* pool_;
};

using KernelFn = Status (*)(OpContext& ctx);

}  // namespace sparq
