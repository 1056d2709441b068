#include "sparq/evaluate.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "formats/text_table.h"
#include "runtime/dataset.h"
#include "sparq/executor.h"
#include "sparq/metrics.h"
#include "sparq/npy.h"
#include "sparq/onnx_io.h"

namespace sparq {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::ordered_json;  // keys in insertion order
using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// True when `a` and `b` name the same file (or would, once created).
bool SamePath(const std::string& a, const std::string& b) {
  std::error_code ec;
  if (fs::exists(a, ec) && fs::exists(b, ec)) return fs::equivalent(a, b, ec);
  return fs::weakly_canonical(a, ec) == fs::weakly_canonical(b, ec);
}

Status CheckSavePath(const std::string& save, const std::string& model_path, const EvalOptions& options) {
  const std::pair<const char*, std::string> protected_paths[] = {
      {"the model", model_path}, {"the reference model", options.reference},
      {"the dataset", options.inputs}, {"the labels", options.labels}};
  for (const auto& [role, path] : protected_paths) {
    if (!path.empty() && SamePath(save, path)) {
      return Status::InvalidArgument("--save-outputs " + save + " would overwrite " + role + " " + path);
    }
  }
  if (fs::path(save).extension() != ".npz") {
    return Status::InvalidArgument("--save-outputs " + save + " must name a .npz file");
  }
  const fs::path parent = fs::path(save).has_parent_path() ? fs::path(save).parent_path() : fs::path(".");
  std::error_code ec;
  if (!fs::is_directory(parent, ec)) {
    return Status::NotFound("--save-outputs folder does not exist: " + parent.string());
  }
  return Status::OK();
}

// Samples per run: the fixed first dim of the inputs, else `requested`, else 1.
StatusOr<int64_t> ChooseBatch(const Model& model, int64_t requested, bool* fixed) {
  *fixed = false;
  int64_t batch = 0;
  for (const ValueInfo& v : model.graph.inputs) {
    if (!v.is_tensor) return Status::NotSupported("model input '" + v.name + "' is not a tensor");
    if (!v.has_shape) continue;
    if (v.dims.empty()) {
      return Status::InvalidArgument("model input '" + v.name + "' is a scalar; eval needs inputs with a sample "
                                     "(batch) axis first");
    }
    if (!v.dims[0].known()) continue;
    if (v.dims[0].value == 0) return Status::InvalidArgument("model input '" + v.name + "' has a batch size of 0");
    if (batch == 0) batch = v.dims[0].value;
    *fixed = true;
    if (requested > 0 && requested != v.dims[0].value) {
      return Status::InvalidArgument("--batch " + std::to_string(requested) + " does not match model input '" +
                                     v.name + "', whose first dim is fixed: " + v.Describe() +
                                     " (leave out --batch, or export the model with a dynamic batch dim)");
    }
  }
  if (batch > 0) return batch;
  return requested > 0 ? requested : 1;
}

// Class ids from a .npy (or a one-array .npz), flattened.
StatusOr<Tensor> LoadLabels(const std::string& path) {
  SPARQ_ASSIGN_OR_RETURN(NamedTensors arrays, ReadArrays(path));
  if (arrays.size() != 1) {
    return Status::InvalidArgument(path + ": labels must be one array, the file has " + std::to_string(arrays.size()));
  }
  const Tensor& t = arrays[0].second;
  const DataTypeInfo* info = GetDataTypeInfo(t.dtype());
  if (info == nullptr || info->is_float || t.dtype() == DataType::kBool) {
    return Status::InvalidArgument(path + ": labels must be integer class ids (int64 or int32), got " +
                                   DataTypeName(t.dtype()));
  }
  if (t.rank() > 2 || (t.rank() == 2 && t.dim(1) != 1)) {
    return Status::InvalidArgument(path + ": labels must have shape [N] or [N, 1], got " + ShapeToString(t.shape()));
  }
  return t.CastTo(DataType::kInt64).Reshaped({t.numel()});
}

// For each name in `wanted`, the name in `available` it pairs with: the same
// name, or else the same position when both lists have the same length.
StatusOr<std::vector<std::string>> PairNames(const std::vector<std::string>& wanted,
                                             const std::vector<std::string>& available, const std::string& what) {
  std::vector<std::string> out;
  for (size_t i = 0; i < wanted.size(); ++i) {
    if (std::find(available.begin(), available.end(), wanted[i]) != available.end()) {
      out.push_back(wanted[i]);
    } else if (available.size() == wanted.size()) {
      out.push_back(available[i]);
    } else {
      return Status::InvalidArgument(what + ": no counterpart for '" + wanted[i] +
                                     "' (names differ and the counts differ too)");
    }
  }
  return out;
}

// The first `rows` samples of a model output computed on a padded batch.
StatusOr<Tensor> DropPadding(const Tensor& t, int64_t batch, int64_t rows, const std::string& name) {
  if (rows == batch) return t;
  if (t.rank() == 0 || t.dim(0) != batch) {
    return Status::InvalidArgument("output '" + name + "' has shape " + ShapeToString(t.shape()) +
                                   ", whose first axis is not the batch of " + std::to_string(batch) +
                                   ": cannot drop the padding of the last partial batch (use --limit with a "
                                   "multiple of the batch size)");
  }
  return SliceRows(t, 0, rows);
}

// Repeats the last sample of each input until the batch has `batch` rows.
StatusOr<TensorMap> PadBatch(const TensorMap& feed, int64_t rows, int64_t batch) {
  TensorMap padded;
  for (const auto& [name, t] : feed) {
    std::vector<Tensor> parts{t};
    for (int64_t r = rows; r < batch; ++r) parts.push_back(SliceRows(t, rows - 1, 1));
    SPARQ_ASSIGN_OR_RETURN(padded[name], ConcatRows(parts, "input '" + name + "'"));
  }
  return padded;
}

json NumberOrNull(double v) { return std::isfinite(v) ? json(v) : json(nullptr); }

std::string Percent(int64_t part, int64_t whole) {
  return FormatDouble("%.2f%%", whole > 0 ? 100.0 * static_cast<double>(part) / static_cast<double>(whole) : 0.0) +
         " (" + std::to_string(part) + "/" + std::to_string(whole) + ")";
}

}  // namespace

StatusOr<EvalReport> Evaluate(const std::string& model_path, const EvalOptions& options) {
  const auto start = Clock::now();
  if (options.inputs.empty()) return Status::InvalidArgument("no dataset given (--inputs)");
  if (options.batch < 0) return Status::InvalidArgument("--batch must be >= 1, got " + std::to_string(options.batch));
  if (options.limit < 0) return Status::InvalidArgument("--limit must be >= 0, got " + std::to_string(options.limit));
  if (options.threads < 0) {
    return Status::InvalidArgument("--threads must be >= 0, got " + std::to_string(options.threads));
  }
  if (!options.save_outputs.empty()) SPARQ_RETURN_IF_ERROR(CheckSavePath(options.save_outputs, model_path, options));

  LoadOptions load_options;
  load_options.infer_shapes = false;  // the executor infers shapes as it runs
  SPARQ_ASSIGN_OR_RETURN(Model model, LoadModel(model_path, load_options));
  ExecutorOptions exec_options;
  exec_options.threads = options.threads;
  exec_options.reference_kernels = options.reference_kernels;
  exec_options.fuse_qdq = !options.reference_kernels || options.fused_graph;
  exec_options.fuse_activations = !options.reference_kernels || options.fused_graph;
  if (!options.kernel_table.empty()) {
    StatusOr<KernelSpeedTable> table = KernelSpeedTable::Load(options.kernel_table);
    if (!table.ok()) return table.status().WithContext("--kernel-table");
    exec_options.kernel_table = std::make_shared<const KernelSpeedTable>(std::move(table).value());
  }
  auto exec = Executor::Create(model, exec_options);
  if (!exec.ok()) return exec.status().WithContext(model_path);
  std::unique_ptr<Executor> ref_exec;
  if (!options.reference.empty()) {
    SPARQ_ASSIGN_OR_RETURN(Model ref_model, LoadModel(options.reference, load_options));
    auto created = Executor::Create(ref_model, exec_options);
    if (!created.ok()) return created.status().WithContext("reference model " + options.reference);
    ref_exec = std::move(*created);
  }

  bool fixed_batch = false;
  auto chosen = ChooseBatch(model, options.batch, &fixed_batch);
  if (!chosen.ok()) return chosen.status().WithContext(model_path);
  const int64_t batch = *chosen;
  SPARQ_ASSIGN_OR_RETURN(std::unique_ptr<Dataset> data,
                         Dataset::Open(options.inputs, model.graph.inputs, model.graph.initializer_inputs));
  const int64_t total = data->total() < 0 ? -1
                        : options.limit > 0 ? std::min(options.limit, data->total())
                                            : data->total();

  Tensor labels;
  if (!options.labels.empty()) {
    SPARQ_ASSIGN_OR_RETURN(labels, LoadLabels(options.labels));
    if (data->total() >= 0 && labels.numel() != data->total()) {
      return Status::InvalidArgument(options.labels + " has " + std::to_string(labels.numel()) +
                                     " labels but the dataset " + options.inputs + " has " +
                                     std::to_string(data->total()) + " samples");
    }
  }

  const std::vector<std::string>& outputs = exec.value()->output_names();
  if (outputs.empty()) return Status::InvalidArgument(model_path + ": the model has no outputs");
  std::vector<std::string> ref_inputs, ref_outputs;
  if (ref_exec) {
    std::vector<std::string> fed;
    for (const ValueInfo& v : model.graph.inputs) fed.push_back(v.name);
    std::vector<std::string> ref_required;
    for (const ValueInfo& v : ref_exec->model().graph.inputs) ref_required.push_back(v.name);
    SPARQ_ASSIGN_OR_RETURN(ref_inputs, PairNames(ref_required, fed, "reference model inputs"));
    SPARQ_ASSIGN_OR_RETURN(ref_outputs, PairNames(outputs, ref_exec->output_names(), "reference model outputs"));
  }

  EvalReport report;
  report.model = model_path;
  report.inputs = options.inputs;
  report.batch_size = batch;
  report.threads = exec.value()->num_threads();
  report.has_labels = labels.defined();
  report.has_reference = ref_exec != nullptr;
  report.reference = options.reference;
  std::vector<ErrorStats> stats(outputs.size());
  std::vector<std::vector<Tensor>> saved(options.save_outputs.empty() ? 0 : outputs.size());
  std::map<std::pair<std::string, std::string>, OpProfile> op_times;
  std::vector<NodeProfile> node_times;

  int64_t done = 0;
  while (options.limit == 0 || done < options.limit) {
    const int64_t want = options.limit > 0 ? std::min(batch, options.limit - done) : batch;
    TensorMap feed;
    int64_t rows = 0;
    SPARQ_RETURN_IF_ERROR(data->Next(want, &feed, &rows));
    if (rows == 0) break;
    const std::string samples = "samples [" + std::to_string(done) + ", " + std::to_string(done + rows) + ")";
    if (fixed_batch && rows < batch) {
      SPARQ_ASSIGN_OR_RETURN(feed, PadBatch(feed, rows, batch));
    }
    const int64_t run_rows = fixed_batch ? batch : rows;

    TensorMap outs;
    const auto run_start = Clock::now();
    node_times.clear();
    Status st = exec.value()->Run(feed, &outs, {}, options.profile ? &node_times : nullptr);
    report.model_seconds += SecondsSince(run_start);
    for (const NodeProfile& p : node_times) {
      OpProfile& o = op_times[{p.op_type, p.kernel}];
      o.op_type = p.op_type, o.kernel = p.kernel;
      ++o.nodes;
      o.seconds += p.micros * 1e-6;
    }
    if (!st.ok()) return st.WithContext(model_path + ", " + samples);
    std::vector<Tensor> results;
    for (const std::string& name : outputs) {
      SPARQ_ASSIGN_OR_RETURN(Tensor t, DropPadding(outs.at(name), run_rows, rows, name));
      results.push_back(std::move(t));
    }

    if (labels.defined()) {
      if (done + rows > labels.numel()) {
        return Status::InvalidArgument(options.labels + " has " + std::to_string(labels.numel()) +
                                       " labels, fewer than the samples in " + options.inputs);
      }
      const Tensor batch_labels = SliceRows(labels, done, rows);
      const std::string where = "output '" + outputs[0] + "' against " + options.labels + ", " + samples;
      auto top1 = CountTopK(results[0], batch_labels, 1);
      if (!top1.ok()) return top1.status().WithContext(where);
      auto top5 = CountTopK(results[0], batch_labels, 5);
      if (!top5.ok()) return top5.status().WithContext(where);
      report.top1_correct += *top1;
      report.top5_correct += *top5;
      report.num_classes = results[0].shape().back();
    }

    if (ref_exec) {
      TensorMap ref_feed, ref_outs;
      const auto& ref_names = ref_exec->model().graph.inputs;
      for (size_t i = 0; i < ref_names.size(); ++i) ref_feed[ref_names[i].name] = feed.at(ref_inputs[i]);
      Status rst = ref_exec->Run(ref_feed, &ref_outs);
      if (!rst.ok()) return rst.WithContext("reference model " + options.reference + ", " + samples);
      std::vector<Tensor> ref_results;
      for (size_t i = 0; i < outputs.size(); ++i) {
        SPARQ_ASSIGN_OR_RETURN(Tensor t, DropPadding(ref_outs.at(ref_outputs[i]), run_rows, rows, ref_outputs[i]));
        Status added = stats[i].Add(t, results[i]);
        if (!added.ok()) return added.WithContext("output '" + outputs[i] + "' vs reference, " + samples);
        ref_results.push_back(std::move(t));
      }
      Status task = report.task.Add(ref_results[0], results[0]);
      if (!task.ok()) return task.WithContext("output '" + outputs[0] + "' vs reference, " + samples);
      // Outputs without a class axis (scalars, non-numeric) have no agreement.
      auto ours = ArgMaxLastAxis(results[0]);
      auto theirs = ArgMaxLastAxis(ref_results[0]);
      if (ours.ok() && theirs.ok()) {
        const size_t n = std::min(ours->size(), theirs->size());
        for (size_t i = 0; i < n; ++i) report.top1_agree += (*ours)[i] == (*theirs)[i] ? 1 : 0;
        report.top1_rows += static_cast<int64_t>(n);
      }
    }

    for (size_t i = 0; i < saved.size(); ++i) saved[i].push_back(results[i]);
    done += rows;
    ++report.batches;
    if (options.on_progress) options.on_progress({done, total, SecondsSince(start)});
  }
  if (done == 0) return Status::InvalidArgument("dataset " + options.inputs + " has no samples");
  report.samples = done;

  if (ref_exec) {
    for (size_t i = 0; i < outputs.size(); ++i) {
      report.comparisons.push_back(
          {outputs[i], stats[i].count(), stats[i].sqnr_db(), stats[i].cosine(), stats[i].max_abs_error()});
    }
  }
  if (!saved.empty()) {
    NamedTensors arrays;
    for (size_t i = 0; i < outputs.size(); ++i) {
      SPARQ_ASSIGN_OR_RETURN(Tensor all, ConcatRows(saved[i], "output '" + outputs[i] + "'"));
      saved[i].clear();
      arrays.emplace_back(outputs[i], std::move(all));
    }
    SPARQ_RETURN_IF_ERROR(WriteNpz(options.save_outputs, arrays));
    report.saved_outputs = options.save_outputs;
  }
  if (options.list_kernels) report.node_kernels = (*exec)->NodeKernels();
  for (auto& kv : op_times) report.op_profile.push_back(std::move(kv.second));
  std::stable_sort(report.op_profile.begin(), report.op_profile.end(),
                   [](const OpProfile& a, const OpProfile& b) { return a.seconds > b.seconds; });
  report.wall_seconds = SecondsSince(start);
  return report;
}

std::string EvalReport::ToText() const {
  TextTable t({"", ""});
  t.AddRow({"Model", model});
  t.AddRow({"Dataset", inputs + ": " + std::to_string(samples) + " samples, " + std::to_string(batches) +
                           (batches == 1 ? " batch of " : " batches of ") + std::to_string(batch_size)});
  t.AddRow({"Throughput", FormatDouble("%.1f samples/s", samples_per_second()) + " (" +
                              FormatDouble("%.3f s", model_seconds) + " in the model, " +
                              FormatDouble("%.3f s", wall_seconds) + " total, " + std::to_string(threads) +
                              " threads)"});
  if (has_labels) {
    t.AddRow({"Top-1", Percent(top1_correct, samples)});
    t.AddRow({"Top-5", Percent(top5_correct, samples)});
  }
  if (has_reference) {
    t.AddRow({"Reference", reference});
    t.AddRow({"Top-1 agreement", top1_rows > 0 ? Percent(top1_agree, top1_rows)
                                                : std::string("n/a (output 0 has no class axis)")});
    std::string tasks = FormatDouble("top-5 overlap %.2f%%, ", 100.0 * task.top5_overlap()) +
                        FormatDouble("sample cosine mean %.6f", task.mean_cosine()) +
                        FormatDouble(" (min %.6f)", task.min_cosine());
    if (task.ctc_samples() > 0) tasks += FormatDouble(", CTC character error rate %.2f%%", 100.0 * task.ctc_cer());
    t.AddRow({"Task metrics", tasks});
  }
  if (!saved_outputs.empty()) t.AddRow({"Saved outputs", saved_outputs});
  std::string text = t.Render("");
  text = text.substr(text.find('\n') + 1);  // drop the empty header row
  if (has_reference) {
    TextTable c({"output", "elements", "SQNR (dB)", "cosine", "max abs error"}, {false, true, true, true, true});
    for (const OutputComparison& o : comparisons) {
      c.AddRow({o.name, std::to_string(o.elements), FormatDouble("%.2f", o.sqnr_db), FormatDouble("%.6f", o.cosine),
                FormatDouble("%.6g", o.max_abs_error)});
    }
    text += "\nOutputs vs reference\n" + c.Render();
  }
  if (!node_kernels.empty()) {
    TextTable k({"node", "op", "kernel"});
    for (const NodeKernel& n : node_kernels) k.AddRow({n.node, n.op_type, n.kernel});
    text += "\nKernels\n" + k.Render();
  }
  if (!op_profile.empty()) {
    double total = 0.0;
    for (const OpProfile& o : op_profile) total += o.seconds;
    TextTable p({"op", "kernel", "runs", "ms", "share"}, {false, false, true, true, true});
    for (const OpProfile& o : op_profile) {
      p.AddRow({o.op_type, o.kernel, std::to_string(o.nodes), FormatDouble("%.1f", o.seconds * 1e3),
                FormatDouble("%.1f%%", total > 0 ? 100.0 * o.seconds / total : 0.0)});
    }
    text += "\nTime per operator and kernel\n" + p.Render();
  }
  return text;
}

std::string EvalReport::ToJson() const {
  json j;
  j["model"] = model;
  j["inputs"] = inputs;
  j["samples"] = samples;
  j["batches"] = batches;
  j["batch_size"] = batch_size;
  j["threads"] = threads;
  j["model_seconds"] = model_seconds;
  j["wall_seconds"] = wall_seconds;
  j["samples_per_second"] = samples_per_second();
  if (has_labels) {
    j["accuracy"] = {{"top1", top1()},
                     {"top5", top5()},
                     {"top1_correct", top1_correct},
                     {"top5_correct", top5_correct},
                     {"num_classes", num_classes}};
  } else {
    j["accuracy"] = nullptr;
  }
  if (has_reference) {
    json outs = json::array();
    for (const OutputComparison& o : comparisons) {
      outs.push_back({{"name", o.name},
                      {"elements", o.elements},
                      {"sqnr_db", NumberOrNull(o.sqnr_db)},
                      {"cosine", NumberOrNull(o.cosine)},
                      {"max_abs_error", NumberOrNull(o.max_abs_error)}});
    }
    j["reference"] = {{"path", reference},
                      {"top1_agreement", top1_rows > 0 ? json(top1_agreement()) : json(nullptr)},
                      {"top1_agree", top1_agree},
                      {"top1_rows", top1_rows},
                      {"top5_overlap", NumberOrNull(task.top5_overlap())},
                      {"mean_cosine", NumberOrNull(task.mean_cosine())},
                      {"min_cosine", NumberOrNull(task.min_cosine())},
                      {"ctc_cer", NumberOrNull(task.ctc_cer())},
                      {"outputs", outs}};
  } else {
    j["reference"] = nullptr;
  }
  j["saved_outputs"] = saved_outputs.empty() ? json(nullptr) : json(saved_outputs);
  if (!node_kernels.empty()) {
    json kernels = json::array();
    for (const NodeKernel& n : node_kernels) kernels.push_back({{"node", n.node}, {"op", n.op_type}, {"kernel", n.kernel}});
    j["kernels"] = kernels;
  }
  if (!op_profile.empty()) {
    json prof = json::array();
    for (const OpProfile& o : op_profile)
      prof.push_back({{"op", o.op_type}, {"kernel", o.kernel}, {"runs", o.nodes}, {"seconds", o.seconds}});
    j["profile"] = prof;
  }
  return j.dump(2, ' ', false, json::error_handler_t::replace);
}

}  // namespace sparq
