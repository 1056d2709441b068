#include "sparq/executor.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <mutex>
#include <set>
#include <unordered_map>

#include "core/mapped_pages.h"
#include "kernels/backend.h"
#include "kernels/parallel.h"
#include "kernels/registry.h"
#include "runtime/control_flow.h"
#include "runtime/graph_capture.h"
#include "runtime/memory_plan.h"
#include "runtime/passes/fp16_lowering.h"
#include "runtime/passes/passes.h"

namespace sparq {

const char* GraphProfileName(GraphProfile profile) {
  switch (profile) {
    case GraphProfile::kAsWritten: return "as-written";
    case GraphProfile::kFoldedConstants: return "folded-constants";
    case GraphProfile::kObserveKept: return "observe-kept";
    case GraphProfile::kDeployment: return "deployment";
  }
  return "unknown";
}

namespace {

// A backend an executor runs nodes on, with its context.
struct Place {
  const Backend* backend = nullptr;
  std::shared_ptr<BackendContext> context;
};

// One step of a run: a node of the graph, or a copy of a value between
// devices that the executor inserted (node < 0).
struct Step {
  int node = -1;
  int place = 0;  // index into Impl::places
  const KernelDef* kernel = nullptr;
  std::shared_ptr<const void> prepared;  // the kernel's prepared state, or null
  std::string kernel_name;               // the row's name, or its prepare step's
  int64_t opset = 0;
  std::vector<int> inputs;   // slot per input (-1 = absent); a copy reads inputs[0]
  std::vector<int> outputs;  // slot per output (-1 = unnamed); a copy writes outputs[0]
  bool to_host = false;      // a copy: device -> host (else host -> device)
  // A node with subgraphs: their executors; its step reads the node's
  // inputs, then the subgraphs' outer reads (implicit_inputs()).
  std::shared_ptr<const NodeSubgraphs> subgraphs;
  std::string label;         // a copy: "<value> -> <device>"
};

// The largest arena a memory plan uses (see Run).
constexpr int64_t kMaxArenaBytes = int64_t{32} << 20;

// The first run at some shapes: notes what each output asked for.
class RecordingArena : public OutputArena {
 public:
  explicit RecordingArena(MemoryRecord* record) : record_(record) {}
  void set_step(size_t step) { step_ = step; }
  std::shared_ptr<uint8_t> Take(size_t index, size_t bytes) override {
    auto& row = record_->requested[step_];
    if (index < row.size()) row[index] = static_cast<int64_t>(bytes);
    return nullptr;
  }

 private:
  MemoryRecord* record_;
  size_t step_ = 0;
};

// Later runs: each planned output at its offset in one arena buffer.
class PlannedArena : public OutputArena {
 public:
  PlannedArena(const MemoryPlan& plan, std::shared_ptr<uint8_t> base) : plan_(plan), base_(std::move(base)) {}
  // `in_place_input`: the value the plan writes this step's output 0 over
  // (MemoryPlan::in_place_of), or null. Output 0 goes there only when that
  // value is still where the plan put it with the bytes it had when planned,
  // and the output asks for the same bytes: then the row's elementwise
  // contract holds (KernelDef::overwritable_inputs); a shape that changed
  // with the data gives the output a buffer of its own.
  void set_step(size_t step, const Tensor* in_place_input) {
    step_ = step;
    taken_.assign(plan_.offset[step].size(), false);
    in_place_ok_ = false;
    const int64_t want = plan_.in_place_bytes[step];
    if (in_place_input != nullptr && in_place_input->defined() && !plan_.offset[step].empty() &&
        plan_.offset[step][0] >= 0 && static_cast<int64_t>(in_place_input->nbytes()) == want &&
        in_place_input->raw_data() == base_.get() + plan_.offset[step][0]) {
      in_place_ok_ = true;
    }
  }
  std::shared_ptr<uint8_t> Take(size_t index, size_t bytes) override {
    if (index >= plan_.offset[step_].size()) return nullptr;
    const int64_t offset = plan_.offset[step_][index];
    if (offset < 0 || static_cast<int64_t>(bytes) > plan_.bytes[step_][index]) return nullptr;
    if (index == 0 && plan_.in_place_of[step_] >= 0 &&
        (!in_place_ok_ || static_cast<int64_t>(bytes) != plan_.in_place_bytes[step_])) {
      return nullptr;
    }
    taken_[index] = true;
    return std::shared_ptr<uint8_t>(base_, base_.get() + offset);
  }
  bool taken(size_t index) const { return index < taken_.size() && taken_[index]; }
  bool Contains(const void* p) const {
    auto* b = static_cast<const uint8_t*>(p);
    return b >= base_.get() && b < base_.get() + plan_.total;
  }

 private:
  const MemoryPlan& plan_;
  std::shared_ptr<uint8_t> base_;
  size_t step_ = 0;
  std::vector<bool> taken_;
  bool in_place_ok_ = false;
};

// Whether `out` points into the buffer of `in`.
bool Views(const Tensor& out, const Tensor& in) {
  if (!out.defined() || !in.defined() || in.nbytes() == 0 || out.nbytes() == 0) return false;
  auto* o = static_cast<const uint8_t*>(out.raw_data());
  auto* b = static_cast<const uint8_t*>(in.raw_data());
  return o >= b && o < b + in.nbytes();
}

// A captured device graph for one set of input shapes and types, with the
// fixed device buffers its inputs are copied into and its outputs read from.
struct GraphState {
  int64_t plain_runs = 0;           // runs before the capture (the first runs node by node)
  std::string declined;             // why the capture failed ("" = not failed)
  std::shared_ptr<void> graph;      // BackendContext::EndCapture's graph (owns the run's buffers)
  std::vector<std::pair<size_t, Tensor>> uploads;    // (upload step, its fixed device buffer)
  std::vector<std::pair<size_t, Tensor>> downloads;  // (download step, the device value it reads)
};

// Input shapes an executor keeps graphs for; runs at further shapes run node
// by node (each graph keeps every buffer its run used).
constexpr size_t kMaxGraphShapes = 16;

// The key of a GraphState: every run input's type and shape.
using GraphKey = std::vector<std::pair<DataType, Shape>>;

int64_t NodeOpset(const Model& model, const Node& node) {
  int64_t v = model.opset(node.domain);
  // Some exporters leave out the import of the default domain; ONNX then means
  // the latest version, which we take to be the newest one sparq knows.
  if (v == 0 && node.domain.empty()) v = 21;
  return v;
}

}  // namespace

struct Executor::Impl {
  Model model;
  std::vector<Place> places;  // places[0]: the chosen backend; a CPU place after it when nodes fall back
  std::string backend_name;
  std::vector<Step> steps;
  std::shared_ptr<const KernelSpeedTable> kernel_table;  // ExecutorOptions::kernel_table, kept alive
  std::vector<std::string> input_names;   // graph inputs that must or may be fed
  std::vector<std::string> output_names;
  // Value slots: every value name gets an index; a value copied to another
  // device gets a second slot ("<name>@<device>").
  std::unordered_map<std::string, int> slot_of;
  std::vector<Device> slot_device;           // where each slot's value lives
  std::map<std::string, int> output_slot;    // graph output -> its host slot
  std::map<int, Tensor> device_constants;    // initializers copied to a device once, at Create
  std::vector<int> last_use;                 // per slot: last step reading it
  std::vector<bool> keep;                    // per slot: never freed (inputs/weights/outputs)
  // Memory plans by the shapes of the run inputs (runtime/memory_plan.h).
  std::mutex plans_mu;
  std::map<std::vector<Shape>, std::shared_ptr<const MemoryPlan>> plans;
  std::vector<std::vector<int>> step_outputs;  // per step: the slots it writes
  std::vector<std::vector<int>> step_in_place; // per step: the input slots its output 0 may overwrite
  bool plan_memory = true;                     // ExecutorOptions::plan_memory
  // Device graphs (graph_capture.h): whether the steps can be captured, and
  // the graphs by input types and shapes. Declared after `places`, so graphs
  // go before the context that made them. graph_mu also serializes the Runs
  // of a capturable executor (they share one stream).
  Status capture_rule = Status::NotSupported("not checked");
  mutable std::mutex graph_mu;
  std::map<GraphKey, GraphState> graphs;
  int64_t graph_replays = 0;
  std::vector<std::string> graph_declined;
  std::vector<ValueAlias> aliases;  // kept values folded away (Executor::ValueAliases)
  // Fixed at Create, so that a run looks up no value by name: the constants
  // every run starts from (initializers, their device copies) by slot, and
  // the slots of the graph inputs and initializer inputs in graph order.
  std::vector<std::pair<int, Tensor>> constant_values;
  std::vector<int> graph_input_slots;
  std::vector<int> initializer_input_slots;
  std::vector<int> output_slots;  // per output_names entry: its host slot

  Status RunSteps(std::vector<Tensor> values, TensorMap* outputs, const RunOptions& options,
                  std::vector<NodeProfile>* profile);
  Status RunGraph(std::vector<Tensor> values, TensorMap* outputs);
  Status Capture(GraphState& state, std::vector<Tensor> values);
  Status RunNode(size_t i, std::vector<Tensor>& values);

  int Slot(const std::string& name, Device device = Device{}) {
    auto it = slot_of.find(name);
    if (it != slot_of.end()) return it->second;
    int s = static_cast<int>(slot_of.size());
    slot_of.emplace(name, s);
    slot_device.push_back(device);
    return s;
  }
  int PlaceOn(Device device) const {
    for (size_t p = 0; p < places.size(); ++p)
      if (places[p].context->device() == device) return static_cast<int>(p);
    return -1;
  }
  const std::string& SlotName(int s) const {
    for (const auto& kv : slot_of)
      if (kv.second == s) return kv.first;
    static const std::string none;
    return none;
  }
};

Executor::Executor(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Executor::~Executor() = default;

const Model& Executor::model() const { return impl_->model; }
const std::vector<std::string>& Executor::input_names() const { return impl_->input_names; }
const std::vector<std::string>& Executor::output_names() const { return impl_->output_names; }
const std::string& Executor::backend() const { return impl_->backend_name; }
const std::vector<ValueAlias>& Executor::ValueAliases() const { return impl_->aliases; }

int64_t ValueAlias::ZerosAround(const Shape& shape) const {
  const size_t rank = shape.size();
  if (zero_pads.size() != 2 * rank) return -1;
  int64_t padded = 1, numel = 1;
  for (size_t d = 0; d < rank; ++d) {
    padded *= shape[d] + zero_pads[d] + zero_pads[d + rank];
    numel *= shape[d];
  }
  return padded - numel;
}
int Executor::num_threads() const {
  for (const Place& p : impl_->places)
    if (p.context->pool() != nullptr) return p.context->pool()->num_threads();
  return 1;
}

std::vector<NodeKernel> Executor::NodeKernels() const {
  std::vector<NodeKernel> out;
  const Graph& g = impl_->model.graph;
  for (const Step& step : impl_->steps) {
    const std::string& backend = impl_->places[step.place].backend->name();
    if (step.node < 0) {
      out.push_back({step.label, step.to_host ? "CopyToHost" : "CopyToDevice", "copy", backend});
      continue;
    }
    const Node& n = g.nodes[step.node];
    out.push_back({n.name.empty() ? n.outputs[0] : n.name, n.op_type, step.kernel_name, backend});
  }
  return out;
}

Status CheckSupported(const Model& model) {
  const KernelRegistry& reg = KernelRegistry::Reference();
  std::string missing;
  std::map<std::string, std::string> seen;
  // The graph and, below its nodes, their subgraphs (`where` says which).
  std::function<void(const Graph&, const std::string&)> check = [&](const Graph& g, const std::string& where) {
    for (const Node& n : g.nodes) {
      for (const Attribute& a : n.attributes)
        if (a.subgraph) check(*a.subgraph, " in subgraph '" + a.name + "' of " + n.Describe());
      int64_t opset = NodeOpset(model, n);
      if (reg.Find(n.op_type, n.domain, opset) != nullptr) continue;
      std::string key = (n.domain.empty() ? "" : n.domain + ".") + n.op_type + " (opset " + std::to_string(opset) + ")";
      if (seen.count(key)) continue;
      seen[key] = n.Describe();
      missing += (missing.empty() ? "" : "; ") + std::string("operator ") + key + " used by " + n.Describe() + where;
    }
  };
  check(model.graph, "");
  if (missing.empty()) return Status::OK();
  return Status::NotSupported("unsupported operator: " + missing);
}

namespace {

// The first row of `rows` that takes node `n`: rows by priority, each
// prepare step may decline with NotSupported. Null when none takes it.
StatusOr<const KernelDef*> SelectRow(const KernelRegistry& rows, const Graph& g, const Node& n, int64_t opset,
                                     const std::set<std::string>& overridable, const PrepareContext& context,
                                     std::shared_ptr<const void>* state, std::string* kernel_name) {
  PrepareContext typed = context;
  typed.input_types.clear();
  for (const auto& in : n.inputs) {
    auto it = g.initializers.find(in);
    const ValueInfo* info = in.empty() ? nullptr : g.FindValueInfo(in);
    typed.input_types.push_back(it != g.initializers.end() ? it->second.dtype()
                                : info != nullptr      ? info->dtype
                                                       : DataType::kUndefined);
  }
  for (const KernelDef* def : rows.FindMatching(n.op_type, n.domain, opset)) {
    if (!def->prepare) return def;
    std::vector<const Tensor*> constants;
    for (const auto& in : n.inputs) {
      auto it = g.initializers.find(in);
      constants.push_back(it != g.initializers.end() && !overridable.count(in) ? &it->second : nullptr);
    }
    StatusOr<PreparedKernel> prepared = def->prepare(n, constants, typed);
    if (prepared.ok()) {
      *state = std::move(prepared->state);
      *kernel_name = std::move(prepared->kernel_name);
      return def;
    }
    if (prepared.status().code() != StatusCode::kNotSupported) {
      return prepared.status().WithContext("preparing kernel '" + def->name + "'");
    }
  }
  return static_cast<const KernelDef*>(nullptr);
}

}  // namespace

GraphCaptureInfo Executor::GraphCapture() const {
  GraphCaptureInfo info;
  if (!impl_->capture_rule.ok()) info.why_not = impl_->capture_rule.message();
  std::lock_guard<std::mutex> lock(impl_->graph_mu);
  for (const auto& kv : impl_->graphs)
    if (kv.second.graph) ++info.captured;
  info.replays = impl_->graph_replays;
  info.declined = impl_->graph_declined;
  return info;
}

StatusOr<std::unique_ptr<Executor>> Executor::Create(const Model& model, const ExecutorOptions& options) {
  SPARQ_RETURN_IF_ERROR(CheckSupported(model));
  SPARQ_ASSIGN_OR_RETURN(const Backend* backend, ResolveBackend(options.backend));
  auto impl = std::make_unique<Impl>();
  impl->backend_name = backend->name();
  impl->plan_memory = options.plan_memory;
  {
    SPARQ_ASSIGN_OR_RETURN(std::shared_ptr<BackendContext> context, backend->CreateContext({options.threads, options.allow_tf32}));
    impl->places.push_back({backend, std::move(context)});
  }
  impl->model = model;
  SPARQ_RETURN_IF_ERROR(impl->model.graph.TopoSort());
  Float16Execution float16 = options.float16;
  if (float16 == Float16Execution::kDefault) {
    float16 = backend->name() == "reference" || backend->RunsFloat16AsWritten() ? Float16Execution::kNative
                                                                                  : Float16Execution::kRounded;
  }
  bool has_subgraphs = false;
  for (const Node& n : impl->model.graph.nodes) has_subgraphs = has_subgraphs || n.HasSubgraphs();
  // The lowering would change the types of outer values that subgraphs
  // (lowered or not on their own) read as written: graphs with subgraphs
  // run float16 as written.
  if (has_subgraphs) float16 = Float16Execution::kNative;
  std::set<std::string> half_values;  // values to round to float16 between operators
  const bool lowered = float16 != Float16Execution::kNative && LowerFloat16ToFloat32(&impl->model, &half_values);
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
  // Kept values that may be folded as aliases: not the real graph outputs.
  FoldableOutputs foldable;
  if (options.keep_values_as_aliases)
    for (size_t i = real_outputs; i < outputs.size(); ++i) foldable.names.insert(outputs[i].name);
  for (const std::string& pass : backend->Passes(options.profile))
    SPARQ_RETURN_IF_ERROR_WITH_CONTEXT(RunGraphPass(pass, &impl->model, &foldable), "graph pass " + pass);
  impl->aliases = std::move(foldable.made);
  outputs.resize(real_outputs);
  if (lowered && float16 == Float16Execution::kRounded) RoundFloat16Values(&impl->model, half_values);
  const Graph& g = impl->model.graph;

  for (const auto& v : g.inputs) impl->input_names.push_back(v.name);
  for (const auto& v : g.initializer_inputs) impl->input_names.push_back(v.name);
  for (const auto& v : g.outputs) impl->output_names.push_back(v.name);
  for (const auto& name : impl->input_names) impl->Slot(name);
  for (const auto& kv : g.initializers) impl->Slot(kv.first);

  std::set<std::string> overridable;  // initializers that run inputs may replace
  for (const auto& v : g.initializer_inputs) overridable.insert(v.name);
  impl->kernel_table = options.kernel_table;
  PrepareContext prepare_context;
  if (impl->kernel_table) prepare_context.kernel_table = impl->kernel_table.get();

  // The place of the CPU backend, made when a first node falls back to it.
  auto cpu_place = [&]() -> StatusOr<int> {
    const Backend* cpu = FindBackend("cpu");
    for (size_t p = 0; p < impl->places.size(); ++p)
      if (impl->places[p].backend == cpu) return static_cast<int>(p);
    SPARQ_ASSIGN_OR_RETURN(std::shared_ptr<BackendContext> context, cpu->CreateContext({options.threads, options.allow_tf32}));
    impl->places.push_back({cpu, std::move(context)});
    return static_cast<int>(impl->places.size() - 1);
  };
  // The slot of value `s` on `device`: itself, or a copy made once (an
  // initializer at Create, anything else by a copy step here).
  std::map<std::pair<int, int>, int> copies;  // (slot, place) -> slot of the copy
  auto on_device = [&](int s, Device device) -> StatusOr<int> {
    if (impl->slot_device[s] == device) return s;
    const bool to_host = device.is_host() && device.index == 0;
    // A copy runs on the device's context: the target's, or the source's
    // for a copy to the host.
    const int target = to_host ? -1 : impl->PlaceOn(device);
    const int source = to_host ? impl->PlaceOn(impl->slot_device[s]) : -1;
    if (target < 0 && source < 0) return Status::Internal("no backend context for a copy to " + device.ToString());
    auto key = std::make_pair(s, to_host ? -1 : target);
    if (auto it = copies.find(key); it != copies.end()) return it->second;
    const std::string name = impl->SlotName(s);
    if (!to_host && !impl->slot_device[s].is_host()) {
      return Status::NotSupported("value '" + name + "' would move from " + impl->slot_device[s].ToString() + " to " +
                                  device.ToString() + ": copies go through the host");
    }
    int copy = impl->Slot(name + "@" + device.ToString(), device);
    auto init = g.initializers.find(name);
    if (!to_host && init != g.initializers.end() && !overridable.count(name)) {
      SPARQ_ASSIGN_OR_RETURN(Tensor uploaded, CopyTensorToDevice(*impl->places[target].context, init->second));
      impl->device_constants[copy] = std::move(uploaded);
    } else {
      Step step;
      step.place = to_host ? source : target;
      step.to_host = to_host;
      step.inputs = {s};
      step.outputs = {copy};
      step.label = name + " -> " + device.ToString();
      impl->steps.push_back(std::move(step));
    }
    copies[key] = copy;
    return copy;
  };

  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& n = g.nodes[i];
    Step step;
    step.node = static_cast<int>(i);
    step.opset = NodeOpset(impl->model, n);
    SPARQ_ASSIGN_OR_RETURN(step.kernel, SelectRow(backend->rows(), g, n, step.opset, overridable, prepare_context,
                                                  &step.prepared, &step.kernel_name));
    step.place = 0;
    if (step.kernel == nullptr && backend->name() != "cpu") {  // partitioning: the CPU takes the rest
      SPARQ_ASSIGN_OR_RETURN(step.place, cpu_place());
      SPARQ_ASSIGN_OR_RETURN(step.kernel, SelectRow(impl->places[step.place].backend->rows(), g, n, step.opset,
                                                    overridable, prepare_context, &step.prepared, &step.kernel_name));
    }
    if (step.kernel == nullptr) return Status::Internal(n.Describe() + ": no kernel row took the node");
    if (step.kernel_name.empty()) step.kernel_name = step.kernel->name;
    // A prepare step that kept state has (in practice) packed the node's
    // constant weights: the pages of weights mapped from a file go back to
    // the kernel, so a model's weights and their packed copy are not both
    // resident (docs/scale.md). Read again, they page in from the file.
    if (step.prepared) {
      for (const std::string& in : n.inputs) {
        auto w = g.initializers.find(in);
        if (w != g.initializers.end() && w->second.device().is_host() && w->second.nbytes() >= (1u << 20))
          ReclaimMappedPages(w->second.raw_data(), w->second.nbytes());
      }
    }
    const Device device = impl->places[step.place].context->device();
    std::vector<std::string> implicit;
    if (n.HasSubgraphs()) {
      if (!device.is_host()) {
        return Status::NotSupported(n.Describe() + ": a node with subgraphs runs on the host, backend '" +
                                    impl->places[step.place].backend->name() + "' took it");
      }
      ExecutorOptions sub = options;
      sub.float16 = float16;
      SPARQ_ASSIGN_OR_RETURN(step.subgraphs, NodeSubgraphs::Create(impl->model, n, sub));
      implicit = step.subgraphs->implicit_inputs();
    }
    for (size_t k = 0; k < n.inputs.size(); ++k) {
      if (n.inputs[k].empty()) {
        step.inputs.push_back(-1);
        continue;
      }
      int s = impl->Slot(n.inputs[k]);
      const bool host = k < 32 && (step.kernel->host_inputs >> k) & 1u;
      SPARQ_ASSIGN_OR_RETURN(s, on_device(s, host ? Device{} : device));
      step.inputs.push_back(s);
    }
    for (const std::string& name : implicit) {  // values the subgraphs read: on the host
      auto it = impl->slot_of.find(name);
      if (it == impl->slot_of.end()) {
        return Status::InvalidArgument(n.Describe() + ": its subgraphs read '" + name +
                                       "', which is no value of the graph around it");
      }
      SPARQ_ASSIGN_OR_RETURN(int s, on_device(it->second, Device{}));
      step.inputs.push_back(s);
    }
    for (const auto& out : n.outputs) {
      if (out.empty()) {
        step.outputs.push_back(-1);
        continue;
      }
      int s = impl->Slot(out, device);
      impl->slot_device[s] = device;
      step.outputs.push_back(s);
    }
    impl->steps.push_back(std::move(step));
  }
  for (const auto& name : impl->output_names) {
    auto it = impl->slot_of.find(name);
    if (it == impl->slot_of.end()) {
      return Status::InvalidArgument("graph output '" + name + "' is not produced by any node");
    }
    SPARQ_ASSIGN_OR_RETURN(impl->output_slot[name], on_device(it->second, Device{}));
  }
  const size_t slots = impl->slot_of.size();
  impl->last_use.assign(slots, -1);
  impl->keep.assign(slots, false);
  for (size_t i = 0; i < impl->steps.size(); ++i)
    for (int s : impl->steps[i].inputs)
      if (s >= 0) impl->last_use[s] = static_cast<int>(i);
  for (const auto& name : impl->input_names) impl->keep[impl->slot_of[name]] = true;
  for (const auto& kv : g.initializers) impl->keep[impl->slot_of[kv.first]] = true;
  for (const auto& kv : impl->device_constants) impl->keep[kv.first] = true;
  for (const auto& kv : impl->output_slot) impl->keep[kv.second] = true;
  for (const auto& kv : g.initializers) impl->constant_values.emplace_back(impl->slot_of.at(kv.first), kv.second);
  for (const auto& kv : impl->device_constants) impl->constant_values.emplace_back(kv.first, kv.second);
  for (const ValueInfo& v : g.inputs) impl->graph_input_slots.push_back(impl->slot_of.at(v.name));
  for (const ValueInfo& v : g.initializer_inputs) impl->initializer_input_slots.push_back(impl->slot_of.at(v.name));
  for (const auto& name : impl->output_names) impl->output_slots.push_back(impl->output_slot.at(name));
  for (const Step& step : impl->steps) {
    impl->step_outputs.push_back(step.outputs);
    std::vector<int> overwritable;  // the input slots output 0 may go over (KernelDef::overwritable_inputs)
    if (step.node >= 0 && step.kernel != nullptr)
      for (size_t k = 0; k < step.inputs.size() && k < 32; ++k)
        if ((step.kernel->overwritable_inputs >> k & 1u) && step.inputs[k] >= 0) overwritable.push_back(step.inputs[k]);
    impl->step_in_place.push_back(std::move(overwritable));
  }

  // Can the steps run as one device graph?
  if (!options.cuda_graphs) {
    impl->capture_rule = Status::NotSupported("ExecutorOptions::cuda_graphs is off");
  } else {
    CaptureLayout layout;
    layout.context_supports_capture = impl->places[0].context->SupportsGraphCapture();
    layout.graph_input.assign(slots, false);
    layout.constant.assign(slots, false);
    layout.on_device.assign(slots, false);
    layout.slot_name.assign(slots, "");
    for (const auto& kv : impl->slot_of) layout.slot_name[kv.second] = kv.first;
    for (const auto& name : impl->input_names) layout.graph_input[impl->slot_of[name]] = true;
    for (const auto& kv : g.initializers)
      if (!overridable.count(kv.first)) layout.constant[impl->slot_of[kv.first]] = true;
    for (const auto& kv : impl->device_constants) layout.constant[kv.first] = true;
    const Device device = impl->places[0].context->device();
    for (size_t s = 0; s < slots; ++s) layout.on_device[s] = impl->slot_device[s] == device;
    if (device == Device{}) layout.context_supports_capture = false;  // the CPU itself: nothing to capture
    for (const Step& step : impl->steps) {
      CaptureStep c;
      c.kind = step.node >= 0 ? CaptureStep::Kind::kNode
                              : (step.to_host ? CaptureStep::Kind::kDownload : CaptureStep::Kind::kUpload);
      c.place = step.place;
      c.label = step.node >= 0 ? g.nodes[step.node].Describe() : step.label;
      c.inputs = step.inputs;
      c.outputs = step.outputs;
      layout.steps.push_back(std::move(c));
    }
    impl->capture_rule = CheckCapturable(layout);
  }
  return std::unique_ptr<Executor>(new Executor(std::move(impl)));
}

Status Executor::Run(const TensorMap& inputs, TensorMap* outputs, const RunOptions& options,
                     std::vector<NodeProfile>* profile) {
  Impl& im = *impl_;
  const Graph& g = im.model.graph;
  std::vector<Tensor> values(im.slot_of.size());
  for (const auto& [slot, tensor] : im.constant_values) values[slot] = tensor;

  // Check and bind the inputs.
  for (const auto& kv : inputs) {
    if (!im.slot_of.count(kv.first) ||
        std::find(im.input_names.begin(), im.input_names.end(), kv.first) == im.input_names.end()) {
      std::string names;
      for (const auto& n : im.input_names) names += (names.empty() ? "" : ", ") + n;
      return Status::InvalidArgument("'" + kv.first + "' is not an input of the model (inputs: " + names + ")");
    }
  }
  for (size_t i = 0; i < g.inputs.size(); ++i) {
    const ValueInfo& v = g.inputs[i];
    auto it = inputs.find(v.name);
    if (it == inputs.end()) return Status::InvalidArgument("missing input '" + v.name + "' (" + v.Describe() + ")");
    const Tensor& t = it->second;
    if (!t.defined()) {
      return Status::InvalidArgument("input '" + v.name + "' is an undefined tensor (no type, no data; e.g. " +
                                     "Tensor::FromVector with the wrong number of values)");
    }
    if (!t.device().is_host()) {
      return Status::InvalidArgument("input '" + v.name + "' is on " + t.device().ToString() +
                                     "; inputs are host tensors");
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
    values[im.graph_input_slots[i]] = t;
  }
  for (size_t i = 0; i < g.initializer_inputs.size(); ++i) {
    auto it = inputs.find(g.initializer_inputs[i].name);
    if (it != inputs.end()) values[im.initializer_input_slots[i]] = it->second;
  }

  if (!im.capture_rule.ok()) return im.RunSteps(std::move(values), outputs, options, profile);
  std::lock_guard<std::mutex> lock(im.graph_mu);  // runs that may capture share one stream: one at a time
  if (!options.extra_outputs.empty() || options.on_node_outputs || options.on_device_node_outputs || profile != nullptr) {
    return im.RunSteps(std::move(values), outputs, options, profile);
  }
  return im.RunGraph(std::move(values), outputs);
}

// Node by node: every step in order, host outputs in the memory plan.
Status Executor::Impl::RunSteps(std::vector<Tensor> values, TensorMap* outputs, const RunOptions& options,
                                std::vector<NodeProfile>* profile) {
  Impl& im = *this;
  const Graph& g = im.model.graph;
  // The slots never freed: the executor's, plus the extra outputs (copied only then).
  std::vector<bool> keep_extra;
  for (const auto& name : options.extra_outputs) {
    auto it = im.slot_of.find(name);
    if (it == im.slot_of.end()) return Status::NotFound("no value named '" + name + "' in the graph");
    if (keep_extra.empty()) keep_extra = im.keep;
    keep_extra[it->second] = true;
  }
  const std::vector<bool>& keep = keep_extra.empty() ? im.keep : keep_extra;

  // The memory plan for these shapes, or a record to make one. Not with
  // extra outputs or node callbacks: they may keep values past their last use.
  std::shared_ptr<const MemoryPlan> plan;
  std::unique_ptr<MemoryRecord> record;
  std::vector<Shape> signature;
  const bool plannable =
      im.plan_memory && options.extra_outputs.empty() && !options.on_node_outputs && !options.on_device_node_outputs;
  if (plannable) {
    signature.reserve(im.graph_input_slots.size() + im.initializer_input_slots.size());
    for (int s : im.graph_input_slots) signature.push_back(values[s].shape());
    for (int s : im.initializer_input_slots) signature.push_back(values[s].shape());
    std::lock_guard<std::mutex> lock(im.plans_mu);
    auto it = im.plans.find(signature);
    if (it != im.plans.end()) plan = it->second;
  }
  std::unique_ptr<PlannedArena> planned;
  std::unique_ptr<RecordingArena> recording;
  if (plan != nullptr && plan->total > 0) {
    Tensor arena = Tensor::Uninitialized(DataType::kUInt8, {plan->total});
    auto* base = static_cast<uint8_t*>(arena.raw_data());
    planned = std::make_unique<PlannedArena>(*plan, std::shared_ptr<uint8_t>(std::make_shared<Tensor>(std::move(arena)), base));
  } else if (plannable && plan == nullptr) {
    record = std::make_unique<MemoryRecord>();
    record->requested.resize(im.steps.size());
    for (size_t i = 0; i < im.steps.size(); ++i) record->requested[i].assign(im.steps[i].outputs.size(), -1);
    record->root.assign(im.slot_of.size(), -1);
    record->produced_at.assign(im.slot_of.size(), -1);
    recording = std::make_unique<RecordingArena>(record.get());
  }

  using Clock = std::chrono::steady_clock;
  const auto run_start = profile != nullptr ? Clock::now() : Clock::time_point{};
  for (size_t i = 0; i < im.steps.size(); ++i) {
    const Step& step = im.steps[i];
    BackendContext& context = *im.places[step.place].context;
    const auto start = profile != nullptr ? Clock::now() : Clock::time_point{};  // no clock read per node otherwise
    if (step.node < 0) {  // a copy between devices
      const Tensor& src = values[step.inputs[0]];
      if (!src.defined()) return Status::Internal("copy " + step.label + ": the value was not computed");
      StatusOr<Tensor> copied = step.to_host ? CopyTensorToHost(context, src) : CopyTensorToDevice(context, src);
      if (!copied.ok()) return copied.status().WithContext("copy " + step.label);
      values[step.outputs[0]] = std::move(*copied);
      if (profile != nullptr) {
        double us = std::chrono::duration<double, std::micro>(Clock::now() - start).count();
        double since_run = std::chrono::duration<double, std::micro>(start - run_start).count();
        profile->push_back({step.label, step.to_host ? "CopyToHost" : "CopyToDevice", "copy", us, since_run});
      }
    } else {
      const Node& n = g.nodes[step.node];
      std::vector<const Tensor*> ins;
      ins.reserve(step.inputs.size());
      for (int s : step.inputs) {
        if (s < 0) {
          ins.push_back(nullptr);
          continue;
        }
        if (!values[s].defined()) return Status::Internal(n.Describe() + ": input value '" + SlotName(s) + "' was not computed");
        ins.push_back(&values[s]);
      }
      std::unique_ptr<SubgraphRunner> runner;
      if (step.subgraphs) {  // the outer values the subgraphs read follow the node's inputs
        runner = step.subgraphs->Bind({ins.begin() + n.inputs.size(), ins.end()});
        ins.resize(n.inputs.size());
      }
      OpContext ctx(n, step.opset, std::move(ins), context);
      ctx.set_prepared(step.prepared.get());
      ctx.set_subgraphs(runner.get());
      const bool host = context.device() == Device{};
      if (host && planned) {
        const int over = plan->in_place_of[i];
        planned->set_step(i, over >= 0 ? &values[over] : nullptr);
        ctx.set_arena(planned.get());
      } else if (host && recording) {
        recording->set_step(i);
        ctx.set_arena(recording.get());
      }
      Status st = step.kernel->fn(ctx);
      if (!st.ok()) return st;
      if (profile != nullptr) {
        if (!context.device().is_host()) SPARQ_RETURN_IF_ERROR(context.Synchronize());
        double us = std::chrono::duration<double, std::micro>(Clock::now() - start).count();
        double since_run = std::chrono::duration<double, std::micro>(start - run_start).count();
        profile->push_back({n.name.empty() ? n.outputs[0] : n.name, n.op_type, step.kernel_name, us, since_run});
      }
      for (size_t k = 0; k < step.outputs.size(); ++k) {
        int s = step.outputs[k];
        if (s < 0) continue;
        if (!ctx.outputs()[k].defined()) {
          return Status::Internal(n.Describe() + ": kernel '" + step.kernel->name + "' did not produce output '" +
                                  n.outputs[k] + "'");
        }
        if (ctx.outputs()[k].device() != context.device()) {
          return Status::Internal(n.Describe() + ": kernel '" + step.kernel->name + "' left output '" + n.outputs[k] +
                                  "' on " + ctx.outputs()[k].device().ToString() + ", its backend is on " +
                                  context.device().ToString());
        }
        // Moved when no callback reads the node's outputs after: a Tensor's
        // copy copies its shape (an allocation per output per node).
        if (options.on_node_outputs || options.on_device_node_outputs) {
          values[s] = ctx.outputs()[k];
        } else {
          values[s] = std::move(ctx.outputs()[k]);
        }
        if (record) {  // what this output's buffer is: its own, or a view of an input's
          record->produced_at[s] = static_cast<int>(i);
          record->root[s] = s;
          for (int in : step.inputs)
            if (in >= 0 && in != s && Views(values[s], values[in])) {
              record->root[s] = record->root[in] >= 0 ? record->root[in] : in;
              break;
            }
        } else if (planned && !planned->taken(k) && values[s].nbytes() > 0 && planned->Contains(values[s].raw_data()) &&
                   !plan->in_arena[s]) {
          values[s] = values[s].Clone();  // a view the plan did not foresee would outlive its region
        }
      }
      if (context.device() == Device{}) {
        if (options.on_node_outputs) SPARQ_RETURN_IF_ERROR(options.on_node_outputs(n, ctx.outputs()));
      } else if (options.on_node_outputs || options.on_device_node_outputs) {
        std::vector<bool> consumed(ctx.outputs().size(), false);  // reduced on the device: no copy
        if (options.on_device_node_outputs) {
          SPARQ_RETURN_IF_ERROR(options.on_device_node_outputs(n, ctx.outputs(), context, &consumed));
        }
        if (options.on_node_outputs) {  // callbacks read host tensors
          std::vector<Tensor> host(ctx.outputs().size());
          for (size_t k = 0; k < host.size(); ++k) {
            if (!ctx.outputs()[k].defined() || (k < consumed.size() && consumed[k])) continue;
            SPARQ_ASSIGN_OR_RETURN(host[k], CopyTensorToHost(context, ctx.outputs()[k]));
          }
          SPARQ_RETURN_IF_ERROR(options.on_node_outputs(n, host));
        }
      }
    }
    for (int s : step.inputs)  // free values nobody reads any more
      if (s >= 0 && !keep[s] && im.last_use[s] == static_cast<int>(i)) values[s] = Tensor();
  }

  if (record) {
    MemoryPlan made = PlanMemory(*record, im.step_outputs, im.last_use, keep, im.step_in_place);
    // Large arenas are not used: beyond kMaxArenaBytes the buffer cache's
    // reuse of just-freed buffers ran as fast on the real-model suite at
    // batch 16 without holding the recording run's buffers and the arena at
    // once (bench/RESULTS.md, "Memory plan"); an empty plan means that.
    if (made.total > kMaxArenaBytes) made = MemoryPlan{};
    std::lock_guard<std::mutex> lock(im.plans_mu);
    im.plans.emplace(std::move(signature), std::make_shared<const MemoryPlan>(std::move(made)));
  }
  // A map that already holds exactly these outputs (a caller's map from the
  // previous run) is refilled in place: no node allocated per run.
  bool refill = options.extra_outputs.empty() && outputs->size() == im.output_names.size();
  for (size_t k = 0; refill && k < im.output_names.size(); ++k) refill = outputs->count(im.output_names[k]) == 1;
  if (!refill) outputs->clear();
  for (size_t k = 0; k < im.output_names.size(); ++k) (*outputs)[im.output_names[k]] = values[im.output_slots[k]];
  for (const auto& name : options.extra_outputs) {
    const int s = im.slot_of.at(name);
    Tensor t = values[s];
    if (t.defined() && !(t.device().is_host() && t.device().index == 0)) {
      const int place = im.PlaceOn(t.device());
      if (place < 0) return Status::Internal("no backend context for " + t.device().ToString());
      SPARQ_ASSIGN_OR_RETURN(t, CopyTensorToHost(*im.places[place].context, t));
    }
    (*outputs)[name] = std::move(t);
  }
  return Status::OK();
}

// One node step on its context, its outputs into `values` (the capture's
// loop: no profile, no arena, no callbacks).
Status Executor::Impl::RunNode(size_t i, std::vector<Tensor>& values) {
  const Step& step = steps[i];
  BackendContext& context = *places[step.place].context;
  const Node& n = model.graph.nodes[step.node];
  std::vector<const Tensor*> ins;
  ins.reserve(step.inputs.size());
  for (int s : step.inputs) {
    if (s >= 0 && !values[s].defined()) return Status::Internal(n.Describe() + ": input value '" + SlotName(s) + "' was not computed");
    ins.push_back(s < 0 ? nullptr : &values[s]);
  }
  std::unique_ptr<SubgraphRunner> runner;
  if (step.subgraphs) {
    runner = step.subgraphs->Bind({ins.begin() + n.inputs.size(), ins.end()});
    ins.resize(n.inputs.size());
  }
  OpContext ctx(n, step.opset, std::move(ins), context);
  ctx.set_prepared(step.prepared.get());
  ctx.set_subgraphs(runner.get());
  SPARQ_RETURN_IF_ERROR(step.kernel->fn(ctx));
  for (size_t k = 0; k < step.outputs.size(); ++k) {
    const int s = step.outputs[k];
    if (s < 0) continue;
    if (!ctx.outputs()[k].defined() || ctx.outputs()[k].device() != context.device()) {
      return Status::Internal(n.Describe() + ": kernel '" + step.kernel->name + "' left output '" + n.outputs[k] +
                              "' undefined or off its device");
    }
    values[s] = std::move(ctx.outputs()[k]);
  }
  return Status::OK();
}

// Captures the node steps into one graph for `state`'s shapes: the uploads
// first, into device buffers kept by `state`, then every node step between
// BeginCapture and EndCapture (nothing runs; the buffers the nodes take are
// kept by the graph), then the values the downloads read. Errors leave
// `state` without a graph.
Status Executor::Impl::Capture(GraphState& state, std::vector<Tensor> values) {
  BackendContext& context = *places[0].context;
  std::vector<std::pair<size_t, Tensor>> uploads;
  for (size_t i = 0; i < steps.size(); ++i) {
    const Step& step = steps[i];
    if (step.node >= 0 || step.to_host) continue;
    const Tensor& host = values[step.inputs[0]];
    if (!host.defined()) return Status::Internal("copy " + step.label + ": no input value");
    SPARQ_ASSIGN_OR_RETURN(Tensor device, CopyTensorToDevice(context, host));
    values[step.outputs[0]] = device;
    uploads.emplace_back(i, std::move(device));
  }
  SPARQ_RETURN_IF_ERROR(context.BeginCapture());
  for (size_t i = 0; i < steps.size(); ++i) {
    if (steps[i].node < 0) continue;
    Status st = RunNode(i, values);
    if (!st.ok()) {
      context.AbortCapture();
      return st;
    }
  }
  SPARQ_ASSIGN_OR_RETURN(std::shared_ptr<void> graph, context.EndCapture());
  std::vector<std::pair<size_t, Tensor>> downloads;
  for (size_t i = 0; i < steps.size(); ++i) {
    const Step& step = steps[i];
    if (step.node >= 0 || !step.to_host) continue;
    if (!values[step.inputs[0]].defined()) return Status::Internal("copy " + step.label + ": the value was not computed");
    downloads.emplace_back(i, values[step.inputs[0]]);
  }
  state.graph = std::move(graph);
  state.uploads = std::move(uploads);
  state.downloads = std::move(downloads);
  return Status::OK();
}

// A run that may use a device graph (graph_mu held): the first run at these
// input types and shapes runs node by node, the second captures, every run
// from then on copies its inputs into the graph's buffers and replays it.
Status Executor::Impl::RunGraph(std::vector<Tensor> values, TensorMap* outputs) {
  const Graph& g = model.graph;
  GraphKey key;
  for (const ValueInfo& v : g.inputs) {
    const Tensor& t = values[slot_of.at(v.name)];
    key.emplace_back(t.dtype(), t.shape());
  }
  for (const ValueInfo& v : g.initializer_inputs) {
    const Tensor& t = values[slot_of.at(v.name)];
    key.emplace_back(t.defined() ? t.dtype() : DataType::kUndefined, t.defined() ? t.shape() : Shape{});
  }
  auto found = graphs.find(key);
  if (found == graphs.end() && graphs.size() >= kMaxGraphShapes) {
    return RunSteps(std::move(values), outputs, RunOptions{}, nullptr);  // each graph keeps its buffers: bounded
  }
  GraphState& state = graphs[key];
  if (!state.graph && (state.plain_runs == 0 || !state.declined.empty())) {
    SPARQ_RETURN_IF_ERROR(RunSteps(std::move(values), outputs, RunOptions{}, nullptr));
    ++state.plain_runs;
    return Status::OK();
  }
  if (!state.graph) {
    Status st = Capture(state, values);
    if (!st.ok()) {
      state.declined = st.message();
      std::string shapes;
      for (const auto& kv : key) shapes += (shapes.empty() ? "" : ", ") + ShapeToString(kv.second);
      graph_declined.push_back("inputs " + shapes + ": " + st.message());
      return RunSteps(std::move(values), outputs, RunOptions{}, nullptr);
    }
  }
  BackendContext& context = *places[0].context;
  for (auto& [i, device] : state.uploads) {
    const Tensor& host = values[steps[i].inputs[0]];
    if (host.nbytes() != device.nbytes()) return Status::Internal("copy " + steps[i].label + ": size changed");
    SPARQ_RETURN_IF_ERROR_WITH_CONTEXT(context.CopyFromHost(host.raw_data(), device.raw_data(), host.nbytes()),
                                       "copy " + steps[i].label);
  }
  SPARQ_RETURN_IF_ERROR(context.Replay(state.graph.get()));
  ++graph_replays;
  for (const auto& [i, device] : state.downloads) {
    StatusOr<Tensor> host = CopyTensorToHost(context, device);
    if (!host.ok()) return host.status().WithContext("copy " + steps[i].label);
    values[steps[i].outputs[0]] = std::move(*host);
  }
  outputs->clear();
  for (const auto& name : output_names) (*outputs)[name] = values[output_slot.at(name)];
  return Status::OK();
}

}  // namespace sparq
