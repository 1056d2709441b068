#include "sparq/executor.h"

#include <chrono>
#include <set>
#include <unordered_map>

#include "kernels/parallel.h"
#include "kernels/registry.h"
#include "runtime/float_fusion.h"
#include "runtime/fp16_lowering.h"
#include "runtime/graph_folding.h"
#include "runtime/qdq_fusion.h"

namespace sparq {

struct Executor::Impl {
  Model model;
  std::unique_ptr<ThreadPool> pool;
  std::vector<const KernelDef*> kernels;  // one per node
  std::vector<std::shared_ptr<const void>> prepared;  // per node: its kernel's prepared state, or null
  std::vector<std::string> kernel_names;  // per node: the kernel that runs it (row name, or the prepare step's)
  std::shared_ptr<const KernelSpeedTable> kernel_table;  // ExecutorOptions::kernel_table, kept alive
  std::vector<int64_t> node_opsets;
  std::vector<std::string> input_names;   // graph inputs that must or may be fed
  std::vector<std::string> output_names;
  // Value slots: every value name gets an index.
  std::unordered_map<std::string, int> slot_of;
  std::vector<std::vector<int>> node_inputs;   // slot per input (-1 = absent)
  std::vector<std::vector<int>> node_outputs;  // slot per output (-1 = unnamed)
  std::vector<int> last_use;                   // per slot: last node reading it
  std::vector<bool> keep;                      // per slot: never freed (inputs/weights/outputs)

  int Slot(const std::string& name) {
    auto it = slot_of.find(name);
    if (it != slot_of.end()) return it->second;
    int s = static_cast<int>(slot_of.size());
    slot_of.emplace(name, s);
    return s;
  }
};

Executor::Executor(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Executor::~Executor() = default;

const Model& Executor::model() const { return impl_->model; }
const std::vector<std::string>& Executor::input_names() const { return impl_->input_names; }
const std::vector<std::string>& Executor::output_names() const { return impl_->output_names; }
int Executor::num_threads() const { return impl_->pool->num_threads(); }

std::vector<NodeKernel> Executor::NodeKernels() const {
  std::vector<NodeKernel> out;
  const Graph& g = impl_->model.graph;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& n = g.nodes[i];
    out.push_back({n.name.empty() ? n.outputs[0] : n.name, n.op_type, impl_->kernel_names[i]});
  }
  return out;
}

namespace {

int64_t NodeOpset(const Model& model, const Node& node) {
  int64_t v = model.opset(node.domain);
  // Some exporters leave out the import of the default domain; ONNX then means
  // the latest version, which we take to be the newest one sparq knows.
  if (v == 0 && node.domain.empty()) v = 21;
  return v;
}

}  // namespace

Status CheckSupported(const Model& model) {
  const KernelRegistry& reg = KernelRegistry::Reference();
  std::string missing;
  std::map<std::string, std::string> seen;
  for (const Node& n : model.graph.nodes) {
    int64_t opset = NodeOpset(model, n);
    if (reg.Find(n.op_type, n.domain, opset) != nullptr) continue;
    std::string key = (n.domain.empty() ? "" : n.domain + ".") + n.op_type + " (opset " + std::to_string(opset) + ")";
    if (seen.count(key)) continue;
    seen[key] = n.Describe();
    missing += (missing.empty() ? "" : "; ") + std::string("operator ") + key + " used by " + n.Describe();
  }
  if (missing.empty()) return Status::OK();
  return Status::NotSupported("unsupported operator: " + missing);
}

StatusOr<std::unique_ptr<Executor>> Executor::Create(const Model& model, const ExecutorOptions& options) {
  SPARQ_RETURN_IF_ERROR(CheckSupported(model));
  auto impl = std::make_unique<Impl>();
  impl->model = model;
  SPARQ_RETURN_IF_ERROR(impl->model.graph.TopoSort());
  if (options.lower_fp16) LowerFloat16ToFloat32(&impl->model);
  // Kept values are graph outputs while the rewrites run: every rewrite
  // leaves a graph output where it is.
  std::vector<ValueInfo>& outputs = impl->model.graph.outputs;
  const size_t real_outputs = outputs.size();
  {
    std::set<std::string> present;
    for (const auto& v : outputs) present.insert(v.name);
    for (const auto& name : options.keep_values)
      if (present.insert(name).second) {
        ValueInfo kept;
        kept.name = name;
        outputs.push_back(std::move(kept));
      }
  }
  if (options.fold_constants || options.fold_constant_subgraphs)
    SPARQ_RETURN_IF_ERROR(FoldConstants(&impl->model).status());
  if (options.fold_constants) FoldPadsIntoConvs(&impl->model);
  if (options.fuse_qdq) FuseQdqToIntegerOps(&impl->model);
  if (options.fuse_activations) {
    FuseConvActivations(&impl->model);
    FusePointwiseDepthwise(&impl->model);
  }
  outputs.resize(real_outputs);
  const Graph& g = impl->model.graph;
  impl->pool = std::make_unique<ThreadPool>(options.threads);

  for (const auto& v : g.inputs) impl->input_names.push_back(v.name);
  for (const auto& v : g.initializer_inputs) impl->input_names.push_back(v.name);
  for (const auto& v : g.outputs) impl->output_names.push_back(v.name);
  for (const auto& name : impl->input_names) impl->Slot(name);
  for (const auto& kv : g.initializers) impl->Slot(kv.first);

  const KernelRegistry& reg = options.reference_kernels ? KernelRegistry::Reference() : KernelRegistry::Default();
  std::set<std::string> overridable;  // initializers that run inputs may replace
  for (const auto& v : g.initializer_inputs) overridable.insert(v.name);
  impl->kernel_table = options.kernel_table;
  PrepareContext prepare_context;
  if (impl->kernel_table) prepare_context.kernel_table = impl->kernel_table.get();
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& n = g.nodes[i];
    int64_t opset = NodeOpset(impl->model, n);
    // The first matching row that takes the node (rows with a prepare step
    // may decline it).
    const KernelDef* chosen = nullptr;
    std::shared_ptr<const void> state;
    std::string kernel_name;
    for (const KernelDef* def : reg.FindMatching(n.op_type, n.domain, opset)) {
      if (!def->prepare) {
        chosen = def;
        break;
      }
      std::vector<const Tensor*> constants;
      for (const auto& in : n.inputs) {
        auto it = g.initializers.find(in);
        constants.push_back(it != g.initializers.end() && !overridable.count(in) ? &it->second : nullptr);
      }
      StatusOr<PreparedKernel> prepared = def->prepare(n, constants, prepare_context);
      if (prepared.ok()) {
        chosen = def;
        state = std::move(prepared->state);
        kernel_name = std::move(prepared->kernel_name);
        break;
      }
      if (prepared.status().code() != StatusCode::kNotSupported) {
        return prepared.status().WithContext("preparing kernel '" + def->name + "'");
      }
    }
    if (chosen == nullptr) return Status::Internal(n.Describe() + ": no kernel row took the node");
    impl->kernels.push_back(chosen);
    impl->prepared.push_back(std::move(state));
    impl->kernel_names.push_back(kernel_name.empty() ? chosen->name : kernel_name);
    impl->node_opsets.push_back(opset);
    std::vector<int> ins, outs;
    for (const auto& in : n.inputs) ins.push_back(in.empty() ? -1 : impl->Slot(in));
    for (const auto& out : n.outputs) outs.push_back(out.empty() ? -1 : impl->Slot(out));
    impl->node_inputs.push_back(std::move(ins));
    impl->node_outputs.push_back(std::move(outs));
  }
  for (const auto& name : impl->output_names) {
    if (!impl->slot_of.count(name)) {
      return Status::InvalidArgument("graph output '" + name + "' is not produced by any node");
    }
  }
  const size_t slots = impl->slot_of.size();
  impl->last_use.assign(slots, -1);
  impl->keep.assign(slots, false);
  for (size_t i = 0; i < g.nodes.size(); ++i)
    for (int s : impl->node_inputs[i])
      if (s >= 0) impl->last_use[s] = static_cast<int>(i);
  for (const auto& name : impl->input_names) impl->keep[impl->slot_of[name]] = true;
  for (const auto& kv : g.initializers) impl->keep[impl->slot_of[kv.first]] = true;
  for (const auto& name : impl->output_names) impl->keep[impl->slot_of[name]] = true;
  return std::unique_ptr<Executor>(new Executor(std::move(impl)));
}

Status Executor::Run(const TensorMap& inputs, TensorMap* outputs, const RunOptions& options,
                     std::vector<NodeProfile>* profile) {
  Impl& im = *impl_;
  const Graph& g = im.model.graph;
  std::vector<Tensor> values(im.slot_of.size());
  for (const auto& kv : g.initializers) values[im.slot_of.at(kv.first)] = kv.second;

  // Check and bind the inputs.
  for (const auto& kv : inputs) {
    if (!im.slot_of.count(kv.first) ||
        std::find(im.input_names.begin(), im.input_names.end(), kv.first) == im.input_names.end()) {
      std::string names;
      for (const auto& n : im.input_names) names += (names.empty() ? "" : ", ") + n;
      return Status::InvalidArgument("'" + kv.first + "' is not an input of the model (inputs: " + names + ")");
    }
  }
  for (const ValueInfo& v : g.inputs) {
    auto it = inputs.find(v.name);
    if (it == inputs.end()) return Status::InvalidArgument("missing input '" + v.name + "' (" + v.Describe() + ")");
    const Tensor& t = it->second;
    if (!t.defined()) {
      return Status::InvalidArgument("input '" + v.name + "' is an undefined tensor (no type, no data; e.g. " +
                                     "Tensor::FromVector with the wrong number of values)");
    }
    if (v.dtype != DataType::kUndefined && t.dtype() != v.dtype) {
      return Status::InvalidArgument("input '" + v.name + "' has type " + DataTypeName(t.dtype()) +
                                     ", the model expects " + v.Describe());
    }
    if (v.has_shape) {
      bool ok = v.dims.size() == t.rank();
      for (size_t d = 0; ok && d < v.dims.size(); ++d)
        if (v.dims[d].known() && v.dims[d].value != t.dim(d)) ok = false;
      if (!ok) {
        return Status::InvalidArgument("input '" + v.name + "' has shape " + ShapeToString(t.shape()) +
                                       ", the model expects " + v.Describe());
      }
    }
    values[im.slot_of.at(v.name)] = t;
  }
  for (const ValueInfo& v : g.initializer_inputs) {
    auto it = inputs.find(v.name);
    if (it != inputs.end()) values[im.slot_of.at(v.name)] = it->second;
  }

  std::vector<bool> keep = im.keep;
  for (const auto& name : options.extra_outputs) {
    auto it = im.slot_of.find(name);
    if (it == im.slot_of.end()) return Status::NotFound("no value named '" + name + "' in the graph");
    keep[it->second] = true;
  }

  using Clock = std::chrono::steady_clock;
  const auto run_start = Clock::now();
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& n = g.nodes[i];
    std::vector<const Tensor*> ins;
    ins.reserve(im.node_inputs[i].size());
    for (int s : im.node_inputs[i]) {
      if (s < 0) {
        ins.push_back(nullptr);
        continue;
      }
      if (!values[s].defined()) {
        return Status::Internal(n.Describe() + ": input value '" + n.inputs[ins.size()] + "' was not computed");
      }
      ins.push_back(&values[s]);
    }
    OpContext ctx(n, im.node_opsets[i], std::move(ins), im.pool.get());
    ctx.set_prepared(im.prepared[i].get());
    auto start = Clock::now();
    Status st = im.kernels[i]->fn(ctx);
    if (!st.ok()) return st;
    if (profile != nullptr) {
      double us = std::chrono::duration<double, std::micro>(Clock::now() - start).count();
      double since_run = std::chrono::duration<double, std::micro>(start - run_start).count();
      profile->push_back({n.name.empty() ? n.outputs[0] : n.name, n.op_type, im.kernel_names[i], us, since_run});
    }
    for (size_t k = 0; k < im.node_outputs[i].size(); ++k) {
      int s = im.node_outputs[i][k];
      if (s < 0) continue;
      if (!ctx.outputs()[k].defined()) {
        return Status::Internal(n.Describe() + ": kernel '" + im.kernels[i]->name + "' did not produce output '" +
                                n.outputs[k] + "'");
      }
      values[s] = ctx.outputs()[k];
    }
    if (options.on_node_outputs) SPARQ_RETURN_IF_ERROR(options.on_node_outputs(n, ctx.outputs()));
    for (int s : im.node_inputs[i])  // free values nobody reads any more
      if (s >= 0 && !keep[s] && im.last_use[s] == static_cast<int>(i)) values[s] = Tensor();
  }

  outputs->clear();
  for (const auto& name : im.output_names) (*outputs)[name] = values[im.slot_of.at(name)];
  for (const auto& name : options.extra_outputs) (*outputs)[name] = values[im.slot_of.at(name)];
  return Status::OK();
}

}  // namespace sparq
