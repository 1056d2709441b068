// Layer-by-layer comparison of two models (sparq/compare.h): the matching
// rule, the two runs per batch and the statistics. The report's text, JSON
// and SVG forms are in compare_report.cc.
#include "sparq/compare.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <map>
#include <set>

#include "evaluate/dataset.h"
#include "evaluate/progress.h"
#include "sparq/executor.h"
#include "sparq/file_io.h"
#include "sparq/metrics.h"
#include "sparq/onnx_io.h"

namespace sparq {

const char* TensorMatchKindName(TensorMatchKind kind) {
  switch (kind) {
    case TensorMatchKind::kDequantized: return "dequantized";
    case TensorMatchKind::kSameName: return "same_name";
    case TensorMatchKind::kNodeOutput: return "node_output";
  }
  return "?";
}

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

bool IsFloat(DataType t) {
  const DataTypeInfo* info = GetDataTypeInfo(t);
  return info != nullptr && info->is_float;
}

// What MatchTensors needs to know about the candidate's values.
struct CandidateIndex {
  std::set<std::string> values;                  // graph inputs and node outputs
  std::map<std::string, std::string> quantized;  // x -> output of the first QuantizeLinear(x)
  std::map<std::string, std::string> dequantized;  // q -> output of the first DequantizeLinear(q)
  std::map<std::string, const Node*> node_by_name;

  explicit CandidateIndex(const Graph& g) {
    for (const ValueInfo& v : g.inputs) values.insert(v.name);
    for (const Node& n : g.nodes) {
      for (const std::string& out : n.outputs)
        if (!out.empty()) values.insert(out);
      if (!n.name.empty()) node_by_name.emplace(n.name, &n);
      if (n.domain.empty() || n.domain == "ai.onnx") {
        if (n.op_type == "QuantizeLinear" && !n.inputs.empty() && !n.outputs.empty())
          quantized.emplace(n.inputs[0], n.outputs[0]);
        if (n.op_type == "DequantizeLinear" && !n.inputs.empty() && !n.outputs.empty())
          dequantized.emplace(n.inputs[0], n.outputs[0]);
      }
    }
  }

  // The counterpart of reference value `name` (output `k` of `producer`, or a
  // graph input when `producer` is null); false when there is none.
  bool Find(const std::string& name, const Node* producer, size_t k, std::string* out, TensorMatchKind* kind) const {
    auto q = quantized.find(name);
    if (q != quantized.end()) {
      auto dq = dequantized.find(q->second);
      if (dq != dequantized.end()) {
        *out = dq->second, *kind = TensorMatchKind::kDequantized;
        return true;
      }
    }
    if (values.count(name)) {
      *out = name, *kind = TensorMatchKind::kSameName;
      return true;
    }
    if (producer != nullptr && !producer->name.empty()) {
      auto it = node_by_name.find(producer->name);
      if (it != node_by_name.end() && it->second->op_type == producer->op_type && k < it->second->outputs.size() &&
          !it->second->outputs[k].empty()) {
        *out = it->second->outputs[k], *kind = TensorMatchKind::kNodeOutput;
        return true;
      }
    }
    return false;
  }
};

}  // namespace

std::vector<TensorMatch> MatchTensors(const Model& reference, const Model& candidate,
                                      std::vector<UnmatchedTensor>* unmatched) {
  const CandidateIndex index(candidate.graph);
  std::vector<TensorMatch> matches;
  std::set<std::string> seen;
  int64_t position = 0;
  auto consider = [&](const std::string& name, const Node* producer, size_t k) {
    if (name.empty() || !seen.insert(name).second) return;
    const std::string op = producer != nullptr ? producer->op_type : "";
    TensorMatch m;
    if (index.Find(name, producer, k, &m.candidate_name, &m.kind)) {
      m.name = name, m.op_type = op, m.index = position;
      matches.push_back(std::move(m));
    } else if (unmatched != nullptr) {
      unmatched->push_back({name, op, position, "no counterpart in the candidate"});
    }
    ++position;
  };
  for (const ValueInfo& v : reference.graph.inputs) {
    if (v.is_tensor && (v.dtype == DataType::kUndefined || IsFloat(v.dtype))) consider(v.name, nullptr, 0);
  }
  for (const Node& n : reference.graph.nodes)
    for (size_t k = 0; k < n.outputs.size(); ++k) consider(n.outputs[k], &n, k);
  return matches;
}

namespace {

// `feed` (keyed by the reference's input names) for `graph`: as it is when
// it names every graph input, else the reference's inputs paired with
// `graph`'s by position (models whose input names differ).
StatusOr<TensorMap> FeedFor(const Graph& graph, const Graph& reference, const TensorMap& feed,
                            const std::string& what) {
  bool all = true;
  for (const ValueInfo& v : graph.inputs) all = all && feed.count(v.name) > 0;
  if (all) return feed;
  if (reference.inputs.size() != graph.inputs.size()) {
    return Status::InvalidArgument(what + ": its input names differ from the reference's and it has " +
                                   std::to_string(graph.inputs.size()) + " inputs, the reference " +
                                   std::to_string(reference.inputs.size()));
  }
  TensorMap out;
  for (size_t i = 0; i < graph.inputs.size(); ++i) {
    auto it = feed.find(reference.inputs[i].name);
    if (it == feed.end()) return Status::InvalidArgument(what + ": no data for input '" + graph.inputs[i].name + "'");
    out[graph.inputs[i].name] = it->second;
  }
  return out;
}

std::string SampleRange(int64_t done, int64_t rows) {
  return "samples [" + std::to_string(done) + ", " + std::to_string(done + rows) + ")";
}

// One matched pair and its statistics.
struct Pair {
  TensorMatch match;
  ErrorStats stats;
  bool active = true;
  std::string reason;  // why it was dropped
};

// The state of one comparison: pairs, lookups, and the reference values
// kept for the batch being compared.
class Comparer {
 public:
  Comparer(std::vector<TensorMatch> matches, std::vector<UnmatchedTensor> unmatched)
      : unmatched_(std::move(unmatched)) {
    for (TensorMatch& m : matches) {
      const size_t p = pairs_.size();
      by_reference_[m.name] = p;
      by_candidate_[m.candidate_name].push_back(p);
      pairs_.push_back({std::move(m), {}, true, ""});
    }
    for (size_t u = 0; u < unmatched_.size(); ++u) unmatched_by_name_[unmatched_[u].name] = u;
  }

  bool empty() const { return pairs_.empty(); }
  // Rows of the batch and of the run (with padding), to drop the padding.
  void StartBatch(int64_t rows, int64_t run_rows) {
    rows_ = rows, run_rows_ = run_rows;
    kept_.clear();
  }

  // A reference value was computed: keep it while its pair is active. Values
  // that are not floating point are no "float tensor": they leave the report.
  void OnReference(const std::string& name, const Tensor& t) {
    auto u = unmatched_by_name_.find(name);
    if (u != unmatched_by_name_.end()) {
      if (!IsFloat(t.dtype())) not_float_.insert(name);
      return;
    }
    auto it = by_reference_.find(name);
    if (it == by_reference_.end()) return;
    Pair& p = pairs_[it->second];
    if (!p.active) return;
    if (!IsFloat(t.dtype())) {
      p.active = false;
      not_float_.insert(name);
      return;
    }
    kept_[name] = t;
  }

  // A candidate value was computed: compare it with the kept reference values it pairs with.
  Status OnCandidate(const std::string& name, const Tensor& t, const std::string& samples) {
    auto it = by_candidate_.find(name);
    if (it == by_candidate_.end()) return Status::OK();
    for (size_t index : it->second) {
      Pair& p = pairs_[index];
      if (!p.active) continue;
      auto kept = kept_.find(p.match.name);
      if (kept == kept_.end()) continue;
      const Tensor ref = Unpadded(kept->second);
      kept_.erase(kept);
      if (!IsFloat(t.dtype())) {
        Drop(p, "candidate value '" + name + "' is " + DataTypeName(t.dtype()));
        continue;
      }
      const Tensor cand = Unpadded(t);
      if (ref.shape() != cand.shape()) {
        Drop(p, "shape " + ShapeToString(ref.shape()) + " differs from candidate value '" + name + "' " +
                    ShapeToString(cand.shape()) + " (" + samples + ")");
        continue;
      }
      Status added = p.stats.Add(ref, cand);
      if (!added.ok()) return added.WithContext("'" + p.match.name + "' vs '" + name + "', " + samples);
    }
    return Status::OK();
  }

  // The report's tensors (worst first) and unmatched values (graph order).
  void Finish(CompareReport* report) {
    for (Pair& p : pairs_) {
      if (not_float_.count(p.match.name)) continue;
      if (!p.active || p.stats.count() == 0) {
        unmatched_.push_back({p.match.name, p.match.op_type, p.match.index,
                              p.active ? "candidate value '" + p.match.candidate_name + "' was not computed"
                                       : p.reason});
        continue;
      }
      report->tensors.push_back({p.match, p.stats.count(), p.stats.sqnr_db(), p.stats.cosine(),
                                 p.stats.max_abs_error()});
    }
    // 0: not a number (NaN, or +inf with an error: the reference holds
    // infinities); 1: a number (-inf included); 2: identical.
    auto group = [](const TensorComparison& c) {
      if (c.identical()) return 2;
      return std::isnan(c.sqnr_db) || (std::isinf(c.sqnr_db) && c.sqnr_db > 0) ? 0 : 1;
    };
    std::stable_sort(report->tensors.begin(), report->tensors.end(),
                     [&](const TensorComparison& a, const TensorComparison& b) {
                       const int ga = group(a), gb = group(b);
                       if (ga != gb) return ga < gb;
                       if (ga == 1 && a.sqnr_db != b.sqnr_db) return a.sqnr_db < b.sqnr_db;
                       return a.match.index < b.match.index;
                     });
    for (UnmatchedTensor& u : unmatched_)
      if (!not_float_.count(u.name)) report->unmatched.push_back(std::move(u));
    std::stable_sort(report->unmatched.begin(), report->unmatched.end(),
                     [](const UnmatchedTensor& a, const UnmatchedTensor& b) { return a.index < b.index; });
  }

 private:
  Tensor Unpadded(const Tensor& t) const {
    if (rows_ == run_rows_ || t.rank() == 0 || t.dim(0) != run_rows_) return t;
    return SliceRows(t, 0, rows_);
  }
  static void Drop(Pair& p, std::string reason) {
    p.active = false;
    p.reason = std::move(reason);
  }

  std::vector<Pair> pairs_;
  std::map<std::string, size_t> by_reference_;
  std::map<std::string, std::vector<size_t>> by_candidate_;
  std::vector<UnmatchedTensor> unmatched_;
  std::map<std::string, size_t> unmatched_by_name_;
  std::set<std::string> not_float_;  // reference values that are not floating point
  std::map<std::string, Tensor> kept_;  // reference values of this batch not compared yet
  int64_t rows_ = 0, run_rows_ = 0;
};

// The sample axis dim the models fix (0 when neither does); InvalidArgument
// when they disagree. `axes`: the data's sample axes (empty: the reference's own).
StatusOr<int64_t> FixedBatchOfBoth(const Model& reference, const Model& candidate,
                                   const std::map<std::string, int>& data_axes = {}) {
  const std::map<std::string, int> axes = data_axes.empty() ? SampleAxes(reference.graph) : data_axes;
  const int64_t a = FixedBatchSizeOf(reference.graph, axes), b = FixedBatchSizeOf(candidate.graph, axes);
  if (a > 0 && b > 0 && a != b) {
    return Status::InvalidArgument("the reference's inputs fix a batch of " + std::to_string(a) +
                                   " and the candidate's a batch of " + std::to_string(b) +
                                   ": compare needs the same batch for both");
  }
  return std::max(a, b);
}

}  // namespace

StatusOr<CompareReport> CompareModels(const Model& reference, const Model& candidate, const BatchSource& data,
                                      const CompareOptions& options) {
  const auto start = Clock::now();
  if (!data) return Status::InvalidArgument("compare: no data");
  if (options.threads < 0) {
    return Status::InvalidArgument("threads must be >= 0, got " + std::to_string(options.threads));
  }
  SPARQ_ASSIGN_OR_RETURN(const int64_t fixed, FixedBatchOfBoth(reference, candidate, data.sample_axes()));
  std::vector<UnmatchedTensor> unmatched;
  std::vector<TensorMatch> matches = MatchTensors(reference, candidate, &unmatched);  // fills `unmatched` first
  Comparer comparer(std::move(matches), std::move(unmatched));
  if (comparer.empty()) {
    return Status::InvalidArgument("no value of the reference has a counterpart in the candidate (see "
                                   "sparq/compare.h for the matching rule)");
  }

  // No fusions or folding: every value of both graphs must exist.
  ExecutorOptions eo;
  eo.threads = options.threads;
  auto created_ref = Executor::Create(reference, eo);
  if (!created_ref.ok()) return created_ref.status().WithContext("reference model");
  auto created_cand = Executor::Create(candidate, eo);
  if (!created_cand.ok()) return created_cand.status().WithContext("candidate model");
  Executor& ref = **created_ref;
  Executor& cand = **created_cand;

  CompareReport report;
  report.inputs = data.name();
  report.batch_size = fixed > 0 ? fixed : data.batch_size();
  std::string samples;
  RunOptions ref_run, cand_run;
  ref_run.on_node_outputs = [&](const Node& n, const std::vector<Tensor>& outs) {
    for (size_t k = 0; k < outs.size() && k < n.outputs.size(); ++k) comparer.OnReference(n.outputs[k], outs[k]);
    return Status::OK();
  };
  cand_run.on_node_outputs = [&](const Node& n, const std::vector<Tensor>& outs) {
    for (size_t k = 0; k < outs.size() && k < n.outputs.size(); ++k)
      SPARQ_RETURN_IF_ERROR(comparer.OnCandidate(n.outputs[k], outs[k], samples));
    return Status::OK();
  };

  BatchFn next = data();
  TensorMap batch, outputs;
  int64_t done = 0;
  for (;;) {
    SPARQ_ASSIGN_OR_RETURN(bool more, next(&batch));
    if (!more) break;
    const int64_t rows = data.SamplesIn(batch);
    samples = SampleRange(done, rows);
    if (fixed > 0 && rows > fixed) {
      return Status::InvalidArgument(samples + ": a batch of " + std::to_string(rows) +
                                     " samples for models that fix a batch of " + std::to_string(fixed));
    }
    if (report.batches == 0 && report.batch_size == 0) report.batch_size = rows;
    TensorMap padded = batch;
    if (fixed > 0 && rows < fixed) {
      SPARQ_ASSIGN_OR_RETURN(padded, PadSamples(batch, data.sample_axes(), rows, fixed));
    }
    comparer.StartBatch(rows, fixed > 0 ? fixed : rows);

    SPARQ_ASSIGN_OR_RETURN(TensorMap ref_feed, FeedFor(reference.graph, reference.graph, padded, "reference model"));
    for (const ValueInfo& v : reference.graph.inputs) comparer.OnReference(v.name, ref_feed.at(v.name));
    Status ran = ref.Run(ref_feed, &outputs, ref_run);
    if (!ran.ok()) return ran.WithContext("reference model, " + samples);

    SPARQ_ASSIGN_OR_RETURN(TensorMap cand_feed, FeedFor(candidate.graph, reference.graph, padded, "candidate model"));
    for (const ValueInfo& v : candidate.graph.inputs)
      SPARQ_RETURN_IF_ERROR(comparer.OnCandidate(v.name, cand_feed.at(v.name), samples));
    ran = cand.Run(cand_feed, &outputs, cand_run);
    if (!ran.ok()) return ran.WithContext("candidate model, " + samples);

    done += rows;
    ++report.batches;
    SPARQ_RETURN_IF_ERROR(ReportProgress(options.on_progress, done, data.samples(),
                                         std::chrono::duration<double>(Clock::now() - start).count(), "compare"));
  }
  if (done == 0) return Status::InvalidArgument("dataset " + data.name() + " has no samples");
  report.samples = done;
  comparer.Finish(&report);
  return report;
}

namespace {

// True when `a` and `b` name the same file (or would, once created).
bool SamePath(const std::string& a, const std::string& b) {
  std::error_code ec;
  if (fs::exists(a, ec) && fs::exists(b, ec)) return fs::equivalent(a, b, ec);
  return fs::weakly_canonical(a, ec) == fs::weakly_canonical(b, ec);
}

Status CheckPlotPath(const std::string& plot, const std::string& reference, const std::string& candidate,
                     const std::string& inputs) {
  const std::pair<const char*, std::string> protected_paths[] = {
      {"the reference model", reference}, {"the candidate model", candidate}, {"the dataset", inputs}};
  for (const auto& [role, path] : protected_paths) {
    if (!path.empty() && SamePath(plot, path)) {
      return Status::InvalidArgument("plot " + plot + " would overwrite " + role + " " + path);
    }
  }
  if (fs::path(plot).extension() != ".svg") return Status::InvalidArgument("plot " + plot + " must name a .svg file");
  const fs::path parent = fs::path(plot).has_parent_path() ? fs::path(plot).parent_path() : fs::path(".");
  std::error_code ec;
  if (!fs::is_directory(parent, ec)) return Status::NotFound("plot folder does not exist: " + parent.string());
  return Status::OK();
}

}  // namespace

StatusOr<CompareReport> Compare(const std::string& reference_path, const std::string& candidate_path,
                                const CompareOptions& options) {
  if (options.inputs.empty()) return Status::InvalidArgument("no dataset given (inputs)");
  if (options.batch < 0) return Status::InvalidArgument("batch must be >= 1, got " + std::to_string(options.batch));
  if (options.limit < 0) return Status::InvalidArgument("limit must be >= 0, got " + std::to_string(options.limit));
  if (!options.plot.empty()) {
    SPARQ_RETURN_IF_ERROR(CheckPlotPath(options.plot, reference_path, candidate_path, options.inputs));
  }
  LoadOptions load;
  load.infer_shapes = false;  // the executor infers shapes as it runs
  SPARQ_ASSIGN_OR_RETURN(Model reference, LoadModel(reference_path, load));
  SPARQ_ASSIGN_OR_RETURN(Model candidate, LoadModel(candidate_path, load));
  StatusOr<int64_t> fixed = FixedBatchOfBoth(reference, candidate);
  if (!fixed.ok()) return fixed.status().WithContext(reference_path + " vs " + candidate_path);
  if (*fixed > 0 && options.batch > 0 && options.batch != *fixed) {
    return Status::InvalidArgument("batch " + std::to_string(options.batch) +
                                   " does not match the models' fixed batch of " + std::to_string(*fixed) +
                                   " (leave the batch option out)");
  }
  DatasetOptions d;
  d.batch_size = *fixed > 0 ? *fixed : options.batch;
  d.limit = options.limit;
  d.constants = options.constants;
  SPARQ_ASSIGN_OR_RETURN(BatchSource data, OpenDataset(options.inputs, reference.graph, d));
  SPARQ_ASSIGN_OR_RETURN(CompareReport report, CompareModels(reference, candidate, data, options));
  report.reference = reference_path;
  report.candidate = candidate_path;
  if (!options.plot.empty()) {
    SPARQ_RETURN_IF_ERROR(WriteFileAtomically(options.plot, report.ToSvg()));
    report.plot = options.plot;
  }
  return report;
}

}  // namespace sparq
