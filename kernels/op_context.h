// What a kernel sees when it runs one node: the node (attributes), the opset
// it was imported with, its input tensors and a place for its outputs.
//
// A kernel is a function `Status Fn(OpContext&)`. It reads inputs, checks them
// (returning InvalidArgument/NotSupported through ctx.Error so the message
// names the node), computes, and sets every output the node asks for.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "kernels/backend.h"
#include "kernels/parallel.h"
#include "sparq/graph.h"
#include "sparq/status.h"
#include "sparq/tensor.h"

namespace sparq {

// Where the executor places a node's host outputs: its memory plan for the
// shapes of this run (runtime/executor.cc). Take returns a buffer of at
// least `bytes` for output `index` of the running node, or null (the output
// then gets its own buffer).
class OutputArena {
 public:
  virtual ~OutputArena() = default;
  virtual std::shared_ptr<uint8_t> Take(size_t index, size_t bytes) = 0;
};

// Runs the subgraphs of the node being run (If's branches, Loop's and
// Scan's body): the executor gives one to OpContext for a node with graph
// attributes (runtime/control_flow.h), with the values the subgraphs read
// from the enclosing graphs already bound.
class SubgraphRunner {
 public:
  virtual ~SubgraphRunner() = default;
  // Runs the graph of attribute `attribute` with its graph inputs, in order,
  // bound to `inputs`; `outputs` gets its graph outputs in order, on the
  // host. Errors: the subgraph's (an input of the wrong type, a kernel's).
  virtual Status Run(const std::string& attribute, const std::vector<Tensor>& inputs,
                     std::vector<Tensor>* outputs) = 0;
};

class OpContext {
 public:
  OpContext(const Node& node, int64_t opset, std::vector<const Tensor*> inputs, ThreadPool* pool)
      : node_(node), opset_(opset), inputs_(std::move(inputs)), outputs_(node.outputs.size()), pool_(pool) {}
  // A node run by a backend: its context gives the pool, the device and the
  // allocator of the outputs.
  OpContext(const Node& node, int64_t opset, std::vector<const Tensor*> inputs, BackendContext& backend)
      : node_(node), opset_(opset), inputs_(std::move(inputs)), outputs_(node.outputs.size()),
        pool_(backend.pool()), backend_(&backend) {}

  const Node& node() const { return node_; }
  // Version of the node's domain imported by the model (e.g. 13 for opset 13).
  int64_t opset() const { return opset_; }
  ThreadPool* pool() const { return pool_; }
  // The backend context the node runs on; null for a kernel called directly
  // (tests), which then runs on the host.
  BackendContext* backend_context() const { return backend_; }
  // The device the node's outputs live on.
  Device device() const { return backend_ != nullptr ? backend_->device() : Device{}; }
  // The state the kernel row's prepare step made for this node (nullptr
  // without one); see PrepareFn in kernels/registry.h.
  const void* prepared() const { return prepared_; }
  void set_prepared(const void* state) { prepared_ = state; }
  // The runner of the node's subgraphs (null outside an executor).
  SubgraphRunner* subgraphs() const { return subgraphs_; }
  void set_subgraphs(SubgraphRunner* runner) { subgraphs_ = runner; }

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
  // A host tensor for output i (contents unspecified; the kernel writes it
  // in full and sets it as output i): a place in the executor's memory plan
  // when it has one, else a buffer of its own. Kernels of host backends ask
  // here instead of allocating, so the executor can reuse one arena per run.
  Tensor OutputBuffer(size_t i, DataType type, Shape shape) {
    if (arena_ != nullptr) {
      const size_t bytes = static_cast<size_t>(NumElements(shape)) * DataTypeSize(type);
      if (std::shared_ptr<uint8_t> buffer = arena_->Take(i, bytes)) {
        return Tensor::OnDevice(type, std::move(shape), std::move(buffer), Device{});
      }
    }
    return Tensor::Uninitialized(type, std::move(shape));
  }
  void set_arena(OutputArena* arena) { arena_ = arena; }

  // Allocates output i (contents unspecified) on the node's device and
  // returns it; the kernel writes it in full. Errors: the allocator's (a
  // device out of memory), or InvalidArgument for a bad shape.
  StatusOr<Tensor*> AllocateOutput(size_t i, DataType type, Shape shape) {
    if (i >= outputs_.size()) return Internal("output " + std::to_string(i) + " does not exist");
    if (backend_ != nullptr) {
      StatusOr<Tensor> t = backend_->AllocateTensor(type, std::move(shape));
      if (!t.ok()) return t.status().WithContext(node_.Describe());
      outputs_[i] = std::move(*t);
    } else {
      outputs_[i] = Tensor::Uninitialized(type, std::move(shape));
    }
    return &outputs_[i];
  }
  std::vector<Tensor>& outputs() { return outputs_; }

  // Errors whose message starts with the node's description.
  Status Error(StatusCode code, const std::string& msg) const { return Status(code, node_.Describe() + ": " + msg); }
  Status InvalidArgument(const std::string& msg) const { return Error(StatusCode::kInvalidArgument, msg); }
  Status NotSupported(const std::string& msg) const { return Error(StatusCode::kNotSupported, msg); }
  Status Internal(const std::string& msg) const { return Error(StatusCode::kInternal, msg); }

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
  BackendContext* backend_ = nullptr;
  OutputArena* arena_ = nullptr;
  SubgraphRunner* subgraphs_ = nullptr;
};

using KernelFn = Status (*)(OpContext& ctx);

}  // namespace sparq
