#include "sparq/evaluate.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <set>
#include <cmath>
#include <ctime>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "formats/text_table.h"
#include "evaluate/dataset.h"
#include "evaluate/eval_shards.h"
#include "evaluate/progress.h"
#include "sparq/executor.h"
#include "sparq/file_io.h"
#include "sparq/memory.h"
#include "sparq/metrics.h"
#include "sparq/npy.h"
#include "sparq/onnx_io.h"
#include "sparq/version.h"

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

// Checks an output file of `sparq eval` (`key` names the option): it must not
// overwrite an input, must end in `extension` and its folder must exist.
Status CheckOutputPath(const std::string& key, const std::string& save, const std::string& extension,
                       const std::string& model_path, const EvalOptions& options) {
  const std::pair<const char*, std::string> protected_paths[] = {
      {"the model", model_path}, {"the reference model", options.reference},
      {"the dataset", options.inputs}, {"the labels", options.labels}};
  for (const auto& [role, path] : protected_paths) {
    if (!path.empty() && SamePath(save, path)) {
      return Status::InvalidArgument(key + " " + save + " would overwrite " + role + " " + path);
    }
  }
  if (fs::path(save).extension() != extension) {
    return Status::InvalidArgument(key + " " + save + " must name a " + extension + " file");
  }
  const fs::path parent = fs::path(save).has_parent_path() ? fs::path(save).parent_path() : fs::path(".");
  std::error_code ec;
  if (!fs::is_directory(parent, ec)) {
    return Status::NotFound(key + " folder does not exist: " + parent.string());
  }
  return Status::OK();
}

// Checks the model's inputs and an explicit `requested` batch against the one
// batch rule (BatchSizeFor): a value that contradicts a fixed sample axis is
// an error rather than overridden. `axes`: each input's sample axis.
Status CheckBatchOption(const Model& model, int64_t requested, const std::map<std::string, int>& axes) {
  for (const ValueInfo& v : model.graph.inputs) {
    if (!v.is_tensor) return Status::NotSupported("model input '" + v.name + "' is not a tensor");
    auto axis = axes.find(v.name);
    if (!v.has_shape || axis == axes.end() || axis->second < 0) continue;
    const Dim& dim = v.dims[static_cast<size_t>(axis->second)];
    if (!dim.known()) continue;
    if (dim.value == 0) return Status::InvalidArgument("model input '" + v.name + "' has a batch size of 0");
    if (requested > 0 && requested != dim.value) {
      return Status::InvalidArgument("batch " + std::to_string(requested) + " does not match model input '" +
                                     v.name + "', whose first dim is fixed: " + v.Describe() +
                                     " (leave the batch option out, or export the model with a dynamic batch dim)");
    }
  }
  return Status::OK();
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
                                   ": cannot drop the padding of the last partial batch (set the limit to a "
                                   "multiple of the batch size)");
  }
  return SliceRows(t, 0, rows);
}

json NumberOrNull(double v) { return std::isfinite(v) ? json(v) : json(nullptr); }

std::string Percent(int64_t part, int64_t whole) {
  return FormatDouble("%.2f%%", whole > 0 ? 100.0 * static_cast<double>(part) / static_cast<double>(whole) : 0.0) +
         " (" + std::to_string(part) + "/" + std::to_string(whole) + ")";
}

// One node run of a trace: a Chrome "complete" event.
struct TraceEvent {
  std::string node, op_type, kernel;
  int64_t batch = 0;
  double start_micros = 0.0;  // since the start of the evaluation
  double micros = 0.0;
};

// The Chrome trace format (chrome://tracing, Perfetto): {"traceEvents": [...]}
// with "ph": "X" events whose times are in microseconds.
Status WriteChromeTrace(const std::string& path, const std::string& model, const std::vector<TraceEvent>& events) {
  json list = json::array();
  list.push_back({{"name", "process_name"}, {"ph", "M"}, {"pid", 0}, {"tid", 0}, {"args", {{"name", model}}}});
  for (const TraceEvent& e : events) {
    list.push_back({{"name", e.node},
                    {"cat", e.op_type},
                    {"ph", "X"},
                    {"ts", e.start_micros},
                    {"dur", e.micros},
                    {"pid", 0},
                    {"tid", 0},
                    {"args", {{"kernel", e.kernel}, {"batch", e.batch}}}});
  }
  json doc = {{"traceEvents", std::move(list)}, {"displayTimeUnit", "ms"}};
  Status st = WriteFileAtomically(path, doc.dump(1, ' ', false, json::error_handler_t::replace) + "\n");
  return st.ok() ? st : st.WithContext("trace");
}

}  // namespace

// ---------------------------------------------------------------------------
// Latency

LatencyStats ComputeLatency(const std::vector<double>& batch_seconds, int64_t warmup) {
  LatencyStats l;
  const int64_t n = static_cast<int64_t>(batch_seconds.size());
  l.warmup_batches = std::min(std::max<int64_t>(warmup, 0), n);
  std::vector<double> timed(batch_seconds.begin() + l.warmup_batches, batch_seconds.end());
  l.timed_batches = static_cast<int64_t>(timed.size());
  if (timed.empty()) return l;
  std::sort(timed.begin(), timed.end());
  // Nearest rank: the smallest value with at least q of the batches at or below it.
  auto rank = [&](double q) {
    const auto k = static_cast<size_t>(std::ceil(q * static_cast<double>(timed.size())));
    return timed[std::min(timed.size(), std::max<size_t>(k, 1)) - 1];
  };
  l.p50_seconds = rank(0.50);
  l.p90_seconds = rank(0.90);
  l.p99_seconds = rank(0.99);
  double sum = 0.0;
  for (double t : timed) sum += t;
  l.mean_seconds = sum / static_cast<double>(timed.size());
  l.max_seconds = timed.back();
  return l;
}

// ---------------------------------------------------------------------------
// Metrics

StatusOr<Metric> ParseMetric(const std::string& name) {
  std::string all;
  for (const auto& [value, spelling] : kMetricNames) {
    if (name == spelling) return value;
    all += (all.empty() ? "" : ", ") + std::string(spelling);
  }
  return Status::InvalidArgument("unknown metric '" + name + "' (expected one of " + all + ")");
}

double MetricValue(Metric metric, const EvalReport& e) {
  const bool reference = !e.has_reference;
  switch (metric) {
    case Metric::kTop1: return 100.0 * e.top1();
    case Metric::kTop5: return 100.0 * e.top5();
    case Metric::kAgreement: return reference ? 100.0 : 100.0 * e.top1_agreement();
    case Metric::kSqnr: {
      if (reference || e.comparisons.empty()) return kSqnrCeilingDb;
      // NaN (outputs holding NaN/Inf) stays NaN: std::min would read it as the ceiling.
      const double db = e.comparisons[0].sqnr_db;
      return std::isnan(db) ? db : std::min(kSqnrCeilingDb, db);
    }
    case Metric::kCosine: return reference || e.comparisons.empty() ? 1.0 : e.comparisons[0].cosine;
    case Metric::kTop5Overlap: return reference ? 100.0 : 100.0 * e.task.top5_overlap();
    case Metric::kMeanCosine: return reference ? 1.0 : e.task.mean_cosine();
    case Metric::kCtcAccuracy: return reference ? 100.0 : 100.0 * (1.0 - e.task.ctc_cer());
    case Metric::kBoxRecall: return reference ? 100.0 : 100.0 * e.task.box_recall();
    case Metric::kMapIou: return reference ? 100.0 : 100.0 * e.task.map_iou();
    case Metric::kClassScoreSqnr: {
      if (reference) return kSqnrCeilingDb;
      const double db = e.task.class_score_sqnr_db();
      return std::isnan(db) ? db : std::min(kSqnrCeilingDb, db);
    }
  }
  return 0.0;
}

// ---------------------------------------------------------------------------
// Evaluator

namespace {

// `feed` for `model`: as it is when it names every required input, else
// paired by position (a reference whose input names differ).
StatusOr<TensorMap> FeedFor(const Model& model, const TensorMap& feed) {
  std::vector<std::string> required, available;
  for (const ValueInfo& v : model.graph.inputs) required.push_back(v.name);
  bool all = true;
  for (const auto& name : required) all = all && feed.count(name) > 0;
  if (all) return feed;
  for (const auto& kv : feed) available.push_back(kv.first);
  SPARQ_ASSIGN_OR_RETURN(std::vector<std::string> paired, PairNames(required, available, "model inputs"));
  TensorMap out;
  for (size_t i = 0; i < required.size(); ++i) out[required[i]] = feed.at(paired[i]);
  return out;
}

// The fixed batch of `graph` fed by `data` (its sample axes; a source without
// them: the model's own).
int64_t FixedBatchOf(const Graph& graph, const BatchSource& data) {
  return FixedBatchSizeOf(graph, data.sample_axes().empty() ? SampleAxes(graph) : data.sample_axes());
}

// Runs `exec` on one batch of `rows` samples (padded to `fixed` when the model
// has a fixed batch) and returns `outputs` without the padding.
StatusOr<std::vector<Tensor>> RunBatch(Executor& exec, int64_t fixed, const TensorMap& batch, int64_t rows,
                                       const std::map<std::string, int>& axes,
                                       const std::vector<std::string>& outputs, double* seconds,
                                       std::vector<NodeProfile>* profile) {
  TensorMap padded;
  if (fixed > 0 && rows < fixed) {
    SPARQ_ASSIGN_OR_RETURN(padded, PadSamples(batch, axes, rows, fixed));
  }
  SPARQ_ASSIGN_OR_RETURN(TensorMap feed, FeedFor(exec.model(), padded.empty() ? batch : padded));
  const int64_t run_rows = fixed > 0 ? fixed : rows;
  TensorMap outs;
  const auto start = Clock::now();
  Status st = exec.Run(feed, &outs, {}, profile);
  if (seconds != nullptr) *seconds += SecondsSince(start);
  SPARQ_RETURN_IF_ERROR(st);
  std::vector<Tensor> results;
  for (const std::string& name : outputs) {
    SPARQ_ASSIGN_OR_RETURN(Tensor t, DropPadding(outs.at(name), run_rows, rows, name));
    results.push_back(std::move(t));
  }
  return results;
}

// Adds the top-1/top-5 counts of output 0 for samples [done, done + rows).
Status AddLabelCounts(const Tensor& output, const Tensor& labels, const std::string& labels_name, int64_t done,
                      int64_t rows, const std::string& where, EvalReport* report) {
  if (done + rows > labels.numel()) {
    return Status::InvalidArgument(labels_name + " has " + std::to_string(labels.numel()) +
                                   " labels, fewer than the samples in " + report->inputs);
  }
  const Tensor batch_labels = SliceRows(labels, done, rows);
  auto top1 = CountTopK(output, batch_labels, 1);
  if (!top1.ok()) return top1.status().WithContext(where);
  auto top5 = CountTopK(output, batch_labels, 5);
  if (!top5.ok()) return top5.status().WithContext(where);
  report->top1_correct += *top1;
  report->top5_correct += *top5;
  report->num_classes = output.shape().back();
  return Status::OK();
}

// `names` with `primary` moved to the front (the output the metrics read);
// unchanged for "". InvalidArgument listing the names when it is none of them.
StatusOr<std::vector<std::string>> PrimaryFirst(std::vector<std::string> names, const std::string& primary,
                                                const std::string& whose) {
  if (primary.empty()) return names;
  auto it = std::find(names.begin(), names.end(), primary);
  if (it == names.end()) {
    std::string all;
    for (const std::string& n : names) all += (all.empty() ? "" : ", ") + n;
    return Status::InvalidArgument("output '" + primary + "' is not an output of the " + whose + " (its outputs: " +
                                   all + ")");
  }
  std::rotate(names.begin(), it, it + 1);
  return names;
}

std::string SampleRange(int64_t done, int64_t rows) {
  return "samples [" + std::to_string(done) + ", " + std::to_string(done + rows) + ")";
}

}  // namespace

struct Evaluator::Impl {
  EvaluatorOptions options;
  BatchSource data;
  ExecutorOptions exec_options;
  // The reference's executor: null without a reference, and freed once every
  // batch's outputs are cached (its prepared weights are a copy of the model's,
  // 2.7 GB for a 2.7 GB model: docs/scale.md).
  std::unique_ptr<Executor> ref;
  bool has_ref = false;
  std::vector<std::string> ref_outputs;  // the reference's graph output names
  int64_t ref_fixed = 0;
  Tensor labels;
  EvalReport ref_report;
  std::vector<std::vector<Tensor>> cache;  // per batch: the reference's graph outputs
  int64_t ref_batches = 0;
  bool cached_all = false;  // the cache holds every batch (ReferencePass)

  StatusOr<std::vector<Tensor>> RunReference(const TensorMap& batch, int64_t rows, int64_t done) {
    ++ref_batches;
    if (!ref) return Status::Internal("reference model, " + SampleRange(done, rows) + ": not cached and freed");
    auto out = RunBatch(*ref, ref_fixed, batch, rows, data.sample_axes(), ref_outputs, nullptr, nullptr);
    if (!out.ok()) return out.status().WithContext("reference model, " + SampleRange(done, rows));
    return out;
  }
  Status ReferencePass();
};

Evaluator::Evaluator(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Evaluator::~Evaluator() = default;

const EvalReport& Evaluator::reference_report() const { return impl_->ref_report; }
bool Evaluator::has_reference() const { return impl_->has_ref; }
const BatchSource& Evaluator::data() const { return impl_->data; }
int64_t Evaluator::reference_batches_run() const { return impl_->ref_batches; }
int64_t Evaluator::cached_batches() const { return static_cast<int64_t>(impl_->cache.size()); }

StatusOr<TensorMap> Evaluator::FirstBatch() const {
  BatchFn next = impl_->data();
  TensorMap batch;
  SPARQ_ASSIGN_OR_RETURN(bool got, next(&batch));
  if (!got) return Status::InvalidArgument("dataset " + impl_->data.name() + " has no samples");
  return batch;
}

Status Evaluator::Impl::ReferencePass() {
  const auto start = Clock::now();
  EvalReport& r = ref_report;
  r.model = "reference";
  r.inputs = data.name();
  r.batch_size = ref_fixed > 0 ? ref_fixed : data.batch_size();
  r.threads = ref->num_threads();
  r.has_labels = labels.defined();
  const std::vector<std::string>& outputs = ref_outputs;
  if (outputs.empty()) return Status::InvalidArgument("reference model: the model has no outputs");
  int64_t cached_bytes = 0;
  bool caching = true;
  BatchFn next = data();
  int64_t done = 0;
  TensorMap batch;
  for (;;) {
    SPARQ_ASSIGN_OR_RETURN(bool more, next(&batch));
    if (!more) break;
    const int64_t rows = data.SamplesIn(batch);
    if (r.batches == 0 && r.batch_size == 0) r.batch_size = rows;
    ++ref_batches;
    auto results = RunBatch(*ref, ref_fixed, batch, rows, data.sample_axes(), outputs, &r.model_seconds, nullptr);
    if (!results.ok()) return results.status().WithContext("reference model, " + SampleRange(done, rows));
    if (labels.defined()) {
      SPARQ_RETURN_IF_ERROR(AddLabelCounts((*results)[0], labels, options.labels, options.first_label + done, rows,
                                           "output '" + outputs[0] + "' against " + options.labels + ", " +
                                               SampleRange(done, rows),
                                           &r));
    }
    if (caching) {
      for (const Tensor& t : *results) cached_bytes += static_cast<int64_t>(t.nbytes());
      caching = cached_bytes <= options.cache_bytes;
      if (caching) cache.push_back(std::move(results).value());
    }
    done += rows;
    ++r.batches;
    SPARQ_RETURN_IF_ERROR(
        ReportProgress(options.on_progress, done, data.samples(), SecondsSince(start), "reference run"));
  }
  if (done == 0) return Status::InvalidArgument("dataset " + data.name() + " has no samples");
  cached_all = caching;
  r.samples = done;
  r.wall_seconds = SecondsSince(start);
  return Status::OK();
}

StatusOr<std::unique_ptr<Evaluator>> Evaluator::Create(BatchSource data, EvaluatorOptions options) {
  if (!data) return Status::InvalidArgument("Evaluator: no data");
  if (options.threads < 0) return Status::InvalidArgument("threads must be >= 0, got " + std::to_string(options.threads));
  if (options.boxes.enabled) SPARQ_RETURN_IF_ERROR(CheckBoxOptions(options.boxes));
  if (options.map.enabled) SPARQ_RETURN_IF_ERROR(CheckMapOptions(options.map));
  auto impl = std::make_unique<Impl>();
  impl->exec_options.threads = options.threads;
  impl->exec_options.backend = options.reference_kernels ? "reference" : options.backend;
  impl->exec_options.plan_memory = options.plan_memory;
  impl->exec_options.allow_tf32 = options.allow_tf32;
  impl->exec_options.profile =
      !options.reference_kernels || options.fused_graph ? GraphProfile::kDeployment : GraphProfile::kAsWritten;
  impl->exec_options.float16 = options.fp16_as_fp32 ? Float16Execution::kFloat32 : Float16Execution::kDefault;
  impl->exec_options.kernel_table = options.kernel_table;
  if (!options.labels.empty()) {
    SPARQ_ASSIGN_OR_RETURN(impl->labels, LoadLabels(options.labels));
    if (data.available() >= 0 && impl->labels.numel() != data.available()) {
      return Status::InvalidArgument(options.labels + " has " + std::to_string(impl->labels.numel()) +
                                     " labels but the dataset " + data.name() + " has " +
                                     std::to_string(data.available()) + " samples");
    }
  }
  impl->data = std::move(data);
  impl->options = std::move(options);
  return std::unique_ptr<Evaluator>(new Evaluator(std::move(impl)));
}

StatusOr<std::unique_ptr<Evaluator>> Evaluator::Create(const Model& reference, BatchSource data,
                                                       EvaluatorOptions options) {
  SPARQ_ASSIGN_OR_RETURN(std::unique_ptr<Evaluator> ev, Create(std::move(data), std::move(options)));
  Impl& impl = *ev->impl_;
  auto created = Executor::Create(reference, impl.exec_options);
  if (!created.ok()) return created.status().WithContext("reference model");
  impl.ref = std::move(created).value();
  impl.has_ref = true;
  SPARQ_ASSIGN_OR_RETURN(impl.ref_outputs, PrimaryFirst(impl.ref->output_names(), impl.options.output, "reference model"));
  if (impl.options.map.enabled && !impl.ref_outputs.empty()) {
    // A map of class ids or counts has no probability to threshold: say so
    // before the reference pass, naming the output.
    for (const ValueInfo& v : reference.graph.outputs) {
      const DataTypeInfo* info = GetDataTypeInfo(v.dtype);
      if (v.name != impl.ref_outputs[0] || v.dtype == DataType::kUndefined || (info != nullptr && info->is_float))
        continue;
      return Status::InvalidArgument("map_iou thresholds a probability map, but output '" + v.name + "' is " +
                                     DataTypeName(v.dtype) + ", not floating point (name a float output with "
                                     "evaluate.output / --output)");
    }
  }
  impl.ref_fixed = FixedBatchOf(reference.graph, impl.data);
  SPARQ_RETURN_IF_ERROR(impl.ReferencePass());
  if (impl.cached_all) impl.ref.reset();  // never run again
  return ev;
}

StatusOr<EvalReport> Evaluator::Evaluate(const Model& candidate, const EvaluateCallOptions& call) {
  Impl& impl = *impl_;
  const auto start = Clock::now();
  const std::string name = call.name.empty() ? "candidate" : call.name;
  auto created = Executor::Create(candidate, impl.exec_options);
  if (!created.ok()) return created.status().WithContext(name);
  Executor& exec = **created;
  const int64_t fixed = FixedBatchOf(candidate.graph, impl.data);
  StatusOr<std::vector<std::string>> ordered = PrimaryFirst(exec.output_names(), impl.options.output, "model");
  if (!ordered.ok()) return ordered.status().WithContext(name);
  const std::vector<std::string>& outputs = *ordered;
  if (outputs.empty()) return Status::InvalidArgument(name + ": the model has no outputs");
  std::vector<size_t> ref_index;  // for each output, the reference output it pairs with
  if (impl.has_ref) {
    const std::vector<std::string>& ref_names = impl.ref_outputs;
    SPARQ_ASSIGN_OR_RETURN(std::vector<std::string> paired, PairNames(outputs, ref_names, "reference model outputs"));
    for (const std::string& p : paired)
      ref_index.push_back(static_cast<size_t>(std::find(ref_names.begin(), ref_names.end(), p) - ref_names.begin()));
  }

  EvalReport report;
  report.model = name;
  report.inputs = impl.data.name();
  report.batch_size = fixed > 0 ? fixed : impl.data.batch_size();
  report.threads = exec.num_threads();
  report.backend = exec.backend();
  report.allow_tf32 = impl.exec_options.allow_tf32;
  report.has_labels = impl.labels.defined();
  report.has_reference = impl.has_ref;
  report.task = ReferenceMetrics(impl.options.boxes, impl.options.map);
  std::vector<ErrorStats> stats(outputs.size());
  std::vector<std::vector<Tensor>> saved(call.save_outputs.empty() ? 0 : outputs.size());
  std::map<std::pair<std::string, std::string>, OpProfile> op_times;
  std::vector<NodeProfile> node_times;
  const bool time_nodes = call.profile || !call.trace.empty();
  std::vector<double> batch_seconds, batch_cpu_seconds;
  std::vector<TraceEvent> trace;

  BatchFn next = impl.data();
  TensorMap batch;
  int64_t done = 0;
  for (size_t index = 0;; ++index) {
    SPARQ_ASSIGN_OR_RETURN(bool more, next(&batch));
    if (!more) break;
    const int64_t rows = impl.data.SamplesIn(batch);
    if (index == 0 && report.batch_size == 0) report.batch_size = rows;
    const std::string samples = SampleRange(done, rows);
    node_times.clear();
    double run_seconds = 0.0;
    const double batch_start_micros = SecondsSince(start) * 1e6;
    const std::clock_t cpu_start = std::clock();  // process CPU time, every thread
    auto results =
        RunBatch(exec, fixed, batch, rows, impl.data.sample_axes(), outputs, &run_seconds, time_nodes ? &node_times : nullptr);
    batch_cpu_seconds.push_back(static_cast<double>(std::clock() - cpu_start) / CLOCKS_PER_SEC);
    report.model_seconds += run_seconds;
    batch_seconds.push_back(run_seconds);
    for (const NodeProfile& p : node_times) {
      if (call.profile) {
        OpProfile& o = op_times[{p.op_type, p.kernel}];
        o.op_type = p.op_type, o.kernel = p.kernel;
        ++o.nodes;
        o.seconds += p.micros * 1e-6;
      }
      if (!call.trace.empty()) {
        trace.push_back({p.node, p.op_type, p.kernel, static_cast<int64_t>(index),
                         batch_start_micros + p.start_micros, p.micros});
      }
    }
    if (!results.ok()) return results.status().WithContext(name + ", " + samples);

    if (impl.labels.defined()) {
      SPARQ_RETURN_IF_ERROR(AddLabelCounts((*results)[0], impl.labels, impl.options.labels,
                                           impl.options.first_label + done, rows,
                                           "output '" + outputs[0] + "' against " + impl.options.labels + ", " +
                                               samples,
                                           &report));
    }

    if (impl.has_ref) {
      std::vector<Tensor> streamed;
      const std::vector<Tensor>* ref_results = nullptr;
      if (index < impl.cache.size()) {
        ref_results = &impl.cache[index];
      } else {
        SPARQ_ASSIGN_OR_RETURN(streamed, impl.RunReference(batch, rows, done));
        ref_results = &streamed;
      }
      for (size_t i = 0; i < outputs.size(); ++i) {
        Status added = stats[i].Add((*ref_results)[ref_index[i]], (*results)[i]);
        if (!added.ok()) return added.WithContext("output '" + outputs[i] + "' vs reference, " + samples);
      }
      Status task = report.task.Add((*ref_results)[ref_index[0]], (*results)[0]);
      if (!task.ok()) return task.WithContext("output '" + outputs[0] + "' vs reference, " + samples);
      // Outputs without a class axis (scalars, non-numeric) have no agreement.
      auto ours = ArgMaxLastAxis((*results)[0]);
      auto theirs = ArgMaxLastAxis((*ref_results)[ref_index[0]]);
      if (ours.ok() && theirs.ok()) {
        const size_t n = std::min(ours->size(), theirs->size());
        for (size_t i = 0; i < n; ++i) report.top1_agree += (*ours)[i] == (*theirs)[i] ? 1 : 0;
        report.top1_rows += static_cast<int64_t>(n);
      }
    }

    for (size_t i = 0; i < saved.size(); ++i) saved[i].push_back((*results)[i]);
    done += rows;
    ++report.batches;
    SPARQ_RETURN_IF_ERROR(
        ReportProgress(call.on_progress, done, impl.data.samples(), SecondsSince(start), "evaluation"));
  }
  if (done == 0) return Status::InvalidArgument("dataset " + impl.data.name() + " has no samples");
  report.samples = done;
  report.latency = ComputeLatency(batch_seconds, call.warmup);
  if (report.latency.timed_batches > 0) {
    double cpu = 0.0;
    for (size_t i = static_cast<size_t>(report.latency.warmup_batches); i < batch_cpu_seconds.size(); ++i)
      cpu += batch_cpu_seconds[i];
    report.latency.cpu_mean_seconds = cpu / static_cast<double>(report.latency.timed_batches);
  }

  if (impl.has_ref) {
    for (size_t i = 0; i < outputs.size(); ++i) {
      report.comparisons.push_back(
          {outputs[i], stats[i].count(), stats[i].sqnr_db(), stats[i].cosine(), stats[i].max_abs_error()});
    }
  }
  if (impl.has_ref) report.output_stats = stats;
  report.batch_seconds = batch_seconds;
  if (!saved.empty()) {
    NamedTensors arrays;
    for (size_t i = 0; i < outputs.size(); ++i) {
      // Along the output's own sample axis, written samples first (as data files hold them).
      auto info = std::find_if(candidate.graph.outputs.begin(), candidate.graph.outputs.end(),
                               [&](const ValueInfo& v) { return v.name == outputs[i]; });
      const int axis = info == candidate.graph.outputs.end() ? 0 : OutputSampleAxis(candidate.graph, *info);
      SPARQ_ASSIGN_OR_RETURN(Tensor all, ConcatAxis(saved[i], axis, "output '" + outputs[i] + "'"));
      all = MoveAxisToFirst(all, axis);
      saved[i].clear();
      arrays.emplace_back(outputs[i], std::move(all));
    }
    SPARQ_RETURN_IF_ERROR(WriteNpz(call.save_outputs, arrays));
    report.saved_outputs = call.save_outputs;
  }
  if (!call.trace.empty()) {
    SPARQ_RETURN_IF_ERROR(WriteChromeTrace(call.trace, name, trace));
    report.trace = call.trace;
  }
  if (call.list_kernels) report.node_kernels = exec.NodeKernels();
  report.graphs = exec.GraphCapture();
  for (auto& kv : op_times) report.op_profile.push_back(std::move(kv.second));
  std::stable_sort(report.op_profile.begin(), report.op_profile.end(),
                   [](const OpProfile& a, const OpProfile& b) { return a.seconds > b.seconds; });
  report.wall_seconds = SecondsSince(start);
  return report;
}

// ---------------------------------------------------------------------------
// `sparq eval`: files in, one Evaluator

StatusOr<EvalReport> Evaluate(const std::string& model_path, const EvalOptions& options) {
  const auto start = Clock::now();
  if (options.inputs.empty()) return Status::InvalidArgument("no dataset given (inputs)");
  if (options.batch < 0) return Status::InvalidArgument("batch must be >= 1, got " + std::to_string(options.batch));
  if (options.limit < 0) return Status::InvalidArgument("limit must be >= 0, got " + std::to_string(options.limit));
  if (options.threads < 0) {
    return Status::InvalidArgument("threads must be >= 0, got " + std::to_string(options.threads));
  }
  if (options.warmup < 0) return Status::InvalidArgument("warmup must be >= 0, got " + std::to_string(options.warmup));
  if (!options.save_outputs.empty()) {
    SPARQ_RETURN_IF_ERROR(CheckOutputPath("save_outputs", options.save_outputs, ".npz", model_path, options));
  }
  if (!options.trace.empty()) {
    SPARQ_RETURN_IF_ERROR(CheckOutputPath("trace", options.trace, ".json", model_path, options));
    if (!options.save_outputs.empty() && SamePath(options.trace, options.save_outputs)) {
      return Status::InvalidArgument("trace " + options.trace + " is also the save_outputs file");
    }
  }

  if (options.boxes.enabled) {
    if (options.reference.empty()) {
      return Status::InvalidArgument("boxes: the box metrics match output 0's boxes with a reference model's; "
                                     "give the reference");
    }
    SPARQ_RETURN_IF_ERROR(CheckBoxOptions(options.boxes));
  }
  if (options.map.enabled) {
    if (options.reference.empty()) {
      return Status::InvalidArgument("map: the map IoU compares output 0's thresholded map with a reference "
                                     "model's; give the reference");
    }
    SPARQ_RETURN_IF_ERROR(CheckMapOptions(options.map));
  }
  LoadOptions load_options;
  load_options.infer_shapes = false;  // the executor infers shapes as it runs
  SPARQ_ASSIGN_OR_RETURN(Model model, LoadModel(model_path, load_options));
  EvaluatorOptions eo;
  eo.labels = options.labels;
  eo.threads = options.threads;
  eo.backend = options.backend;
  eo.plan_memory = options.plan_memory;
  eo.allow_tf32 = options.allow_tf32;
  eo.reference_kernels = options.reference_kernels;
  eo.fused_graph = options.fused_graph;
  eo.fp16_as_fp32 = options.fp16_as_fp32;
  eo.boxes = options.boxes;
  eo.map = options.map;
  eo.output = options.output;
  if (!options.kernel_table.empty()) {
    StatusOr<KernelSpeedTable> table = KernelSpeedTable::Load(options.kernel_table);
    if (!table.ok()) return table.status().WithContext("kernel_table");
    eo.kernel_table = std::make_shared<const KernelSpeedTable>(std::move(table).value());
  }
  Model ref_model;
  if (!options.reference.empty()) {
    SPARQ_ASSIGN_OR_RETURN(ref_model, LoadModel(options.reference, load_options));
  }
  {
    std::set<std::string> pinned;
    for (const auto& kv : options.constants) pinned.insert(kv.first);
    Status batch_ok = CheckBatchOption(model, options.batch, SampleAxes(model.graph, pinned));
    if (!batch_ok.ok()) return batch_ok.WithContext(model_path);
  }
  DatasetOptions d;
  d.batch_size = options.batch;
  d.limit = options.limit;
  d.constants = options.constants;
  SPARQ_ASSIGN_OR_RETURN(BatchSource data, OpenDataset(options.inputs, model.graph, d));
  const int64_t data_samples = data.samples();
  if (options.shards > 0) {
    SPARQ_ASSIGN_OR_RETURN(data, ShardOf(data, options.shard, options.shards));
    // The shard's first sample, as ShardOf cuts: batch floor(B * shard / shards).
    const int64_t size = data.batch_size(), batches = (data_samples + size - 1) / size;
    eo.first_label = batches * options.shard / options.shards * size;
  }

  EvaluateCallOptions call;
  call.name = model_path;
  call.save_outputs = options.save_outputs;
  call.list_kernels = options.list_kernels;
  call.profile = options.profile;
  call.warmup = options.warmup;
  call.trace = options.trace;
  if (options.on_progress) {
    // One bar over the whole run: the reference pass, then the model's.
    call.on_progress = [&](EvalProgress& p) {
      EvalProgress q{p.done, p.total, SecondsSince(start)};
      options.on_progress(q);
      p.cancel = q.cancel;
    };
  }
  std::unique_ptr<Evaluator> evaluator;
  if (options.reference.empty()) {
    SPARQ_ASSIGN_OR_RETURN(evaluator, Evaluator::Create(std::move(data), eo));
  } else {
    auto created = Evaluator::Create(ref_model, std::move(data), eo);
    if (!created.ok()) return created.status().WithContext(options.reference);
    evaluator = std::move(created).value();
  }
  SPARQ_ASSIGN_OR_RETURN(EvalReport report, evaluator->Evaluate(model, call));
  report.reference = options.reference;
  report.wall_seconds = SecondsSince(start);
  if (options.shards > 0) {
    report.shard = options.shard;
    report.shards = options.shards;
    report.shard_ids = {options.shard};
    report.data_samples = data_samples;
  }
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
  if (backend != "cpu" && backend != "reference") {
    std::string g = graphs.why_not.empty()
                        ? std::to_string(graphs.replays) + " runs replayed, " + std::to_string(graphs.captured) +
                              (graphs.captured == 1 ? " graph" : " graphs")
                        : "not used: " + graphs.why_not;
    for (const std::string& d : graphs.declined) g += "; capture failed: " + d;
    t.AddRow({"CUDA graphs", g});
  }
  if (allow_tf32) t.AddRow({"Float32 math", "TF32 on a GPU backend's tensor cores (--tf32; the CPU ignores it)"});
  if (latency.timed_batches > 0) {
    t.AddRow({"Latency per batch", FormatDouble("p50 %.3f ms, ", latency.p50_seconds * 1e3) +
                                       FormatDouble("p90 %.3f ms, ", latency.p90_seconds * 1e3) +
                                       FormatDouble("p99 %.3f ms", latency.p99_seconds * 1e3) +
                                       FormatDouble(", CPU %.3f ms mean", latency.cpu_mean_seconds * 1e3) + " (" +
                                       std::to_string(latency.timed_batches) + " batches after " +
                                       std::to_string(latency.warmup_batches) + " warm-up)"});
  } else {
    t.AddRow({"Latency per batch", "n/a (all " + std::to_string(latency.warmup_batches) +
                                       " batches were warm-up; lower the warm-up or evaluate more samples)"});
  }
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
    if (task.box_options().enabled) {
      t.AddRow({"Boxes", task.box_samples() == 0
                             ? std::string("n/a (output 0 is not a detector output [N, 4 + classes, anchors])")
                             : std::to_string(task.matched_boxes()) + " of " + std::to_string(task.reference_boxes()) +
                                   " reference boxes matched (" + FormatDouble("%.2f%%", 100.0 * task.box_recall()) +
                                   "), precision " + FormatDouble("%.2f%%", 100.0 * task.box_precision()) +
                                   FormatDouble(", score drift %.4f", task.score_drift()) +
                                   FormatDouble(", class-score SQNR %.2f dB", task.class_score_sqnr_db())});
    }
  }
  if (has_reference && task.map_options().enabled) {
    t.AddRow({"Map IoU", task.map_elements() == 0
                             ? std::string("n/a (no elements compared)")
                             : FormatDouble("%.2f%%", 100.0 * task.map_iou()) + " at threshold " +
                                   FormatDouble("%g", task.map_options().threshold) + " (" +
                                   std::to_string(task.map_intersection()) + " of " +
                                   std::to_string(task.map_union()) + " elements above in either map are above in both)"});
  }
  if (!saved_outputs.empty()) t.AddRow({"Saved outputs", saved_outputs});
  if (!trace.empty()) t.AddRow({"Trace", trace});
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
    TextTable k({"node", "op", "kernel", "backend"});
    for (const NodeKernel& n : node_kernels) k.AddRow({n.node, n.op_type, n.kernel, n.backend});
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
  j["schema_version"] = kJsonSchemaVersion;
  j["sparq_version"] = Version();
  j["model"] = model;
  j["inputs"] = inputs;
  j["samples"] = samples;
  j["batches"] = batches;
  j["batch_size"] = batch_size;
  j["threads"] = threads;
  j["backend"] = backend;
  if (allow_tf32) j["allow_tf32"] = true;
  if (backend != "cpu" && backend != "reference") {
    j["cuda_graphs"] = {{"captured", graphs.captured},
                        {"replays", graphs.replays},
                        {"not_used", graphs.why_not},
                        {"declined", graphs.declined}};
  }
  j["model_seconds"] = model_seconds;
  j["wall_seconds"] = wall_seconds;
  j["samples_per_second"] = samples_per_second();
  j["peak_rss_mib"] = std::round(PeakRssMiB());  // of the process writing the report
  // Seconds per batch; the percentiles are null when every batch was warm-up.
  auto timed = [&](double v) { return latency.timed_batches > 0 ? json(v) : json(nullptr); };
  j["latency"] = {{"warmup_batches", latency.warmup_batches},
                  {"timed_batches", latency.timed_batches},
                  {"p50_seconds", timed(latency.p50_seconds)},
                  {"p90_seconds", timed(latency.p90_seconds)},
                  {"p99_seconds", timed(latency.p99_seconds)},
                  {"mean_seconds", timed(latency.mean_seconds)},
                  {"max_seconds", timed(latency.max_seconds)},
                  {"cpu_mean_seconds", timed(latency.cpu_mean_seconds)}};
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
    if (task.box_options().enabled) {
      j["reference"]["boxes"] = {{"score_threshold", task.box_options().score_threshold},
                                 {"nms_iou", task.box_options().nms_iou},
                                 {"match_iou", task.box_options().match_iou},
                                 {"samples", task.box_samples()},
                                 {"reference_boxes", task.reference_boxes()},
                                 {"candidate_boxes", task.candidate_boxes()},
                                 {"matched", task.matched_boxes()},
                                 {"box_recall", NumberOrNull(task.box_recall())},
                                 {"box_precision", NumberOrNull(task.box_precision())},
                                 {"score_drift", NumberOrNull(task.score_drift())},
                                 {"class_score_sqnr_db", NumberOrNull(task.class_score_sqnr_db())}};
    }
    if (task.map_options().enabled) {
      j["reference"]["map"] = {{"threshold", task.map_options().threshold},
                               {"elements", task.map_elements()},
                               {"intersection", task.map_intersection()},
                               {"union", task.map_union()},
                               {"map_iou", NumberOrNull(task.map_iou())}};
    }
  } else {
    j["reference"] = nullptr;
  }
  j["saved_outputs"] = saved_outputs.empty() ? json(nullptr) : json(saved_outputs);
  if (!trace.empty()) j["trace"] = trace;
  if (!node_kernels.empty()) {
    json kernels = json::array();
    for (const NodeKernel& n : node_kernels) kernels.push_back({{"node", n.node}, {"op", n.op_type}, {"kernel", n.kernel}, {"backend", n.backend}});
    j["kernels"] = kernels;
  }
  if (!op_profile.empty()) {
    json prof = json::array();
    for (const OpProfile& o : op_profile)
      prof.push_back({{"op", o.op_type}, {"kernel", o.kernel}, {"runs", o.nodes}, {"seconds", o.seconds}});
    j["profile"] = prof;
  }
  if (shards > 0) j["partial"] = json::parse(ShardSumsJson(*this));
  return j.dump(2, ' ', false, json::error_handler_t::replace);
}

}  // namespace sparq
