// RunRecipe: the stages of `sparq run`, in order.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>

#include "pipeline/data_prep.h"
#include "pipeline/prune_stage.h"
#include "runtime/dataset.h"
#include "sparq/calibrate.h"
#include "sparq/evaluate.h"
#include "sparq/executor.h"
#include "sparq/metrics.h"
#include "sparq/onnx_io.h"
#include "sparq/pipeline.h"

namespace sparq {
namespace fs = std::filesystem;

namespace {

Precision ToPrecision(RecipeQuantize::LayerPrecision p) {
  switch (p) {
    case RecipeQuantize::LayerPrecision::kInt8: return Precision::kINT8;
    case RecipeQuantize::LayerPrecision::kFp16: return Precision::kFP16;
    case RecipeQuantize::LayerPrecision::kFp32: return Precision::kFP32;
  }
  return Precision::kFP32;
}

QuantizeOptions ToQuantizeOptions(const Recipe& r) {
  QuantizeOptions q;
  q.format = r.output.format == RecipeOutput::Format::kQOperator ? QuantFormat::kQOperator : QuantFormat::kQDQ;
  switch (r.quantize.precision) {
    case RecipeQuantize::Precision::kInt8: q.precision = Precision::kINT8; break;
    case RecipeQuantize::Precision::kFp16: q.precision = Precision::kFP16; break;
    case RecipeQuantize::Precision::kMixed:
      q.precision = Precision::kINT8;
      q.other_precision = Precision::kFP16;
      break;
  }
  q.per_channel = r.quantize.per_channel;
  q.fold_batchnorm = r.quantize.fold_batchnorm;
  for (const auto& rule : r.quantize.layers) q.layers.push_back({rule.match, ToPrecision(rule.precision)});
  q.fp16_block_ops = r.quantize.fp16.block_ops;
  q.keep_io_types = r.quantize.fp16.keep_io_types;
  return q;
}

const char* MetricName(RecipeEvaluate::Metric m) {
  switch (m) {
    case RecipeEvaluate::Metric::kTop1: return "top1";
    case RecipeEvaluate::Metric::kTop5: return "top5";
    case RecipeEvaluate::Metric::kAgreement: return "agreement";
    case RecipeEvaluate::Metric::kSqnr: return "sqnr";
    case RecipeEvaluate::Metric::kCosine: return "cosine";
    case RecipeEvaluate::Metric::kTop5Overlap: return "top5_overlap";
    case RecipeEvaluate::Metric::kMeanCosine: return "mean_cosine";
    case RecipeEvaluate::Metric::kCtcAccuracy: return "ctc_accuracy";
  }
  return "?";
}

// The FP32 model's own value of a metric that compares against FP32.
constexpr double kSqnrCeilingDb = 100.0;

class Runner {
 public:
  Runner(const Recipe& r, const PipelineOptions& o) : r_(r), o_(o) {}

  StatusOr<RunReport> Run();

 private:
  void Log(const std::string& line) {
    if (o_.on_log) o_.on_log(line);
  }
  template <typename Fn>
  auto Timed(const std::string& stage, Fn fn) {
    auto start = std::chrono::steady_clock::now();
    auto result = fn();
    report_.stage_seconds.emplace_back(
        stage, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    return result;
  }
  EvalOptions BaseEvalOptions(const std::string& stage) const;
  BatchSource Batches(const std::string& path, int64_t limit) const;
  StatusOr<CalibrationTable> CalibrateModel();
  Status PruneStage(double dense_metric);
  StatusOr<EvalReport> EvaluateModel(const std::string& path, bool with_reference, const std::string& stage);
  double MetricOf(const EvalReport& e, bool is_fp32) const;
  Status WriteOutputModel(const Model& m);
  StatusOr<std::vector<std::pair<std::string, double>>> LayerSqnr(const Model& quantized);
  Status WriteReports();

  const Recipe& r_;
  const PipelineOptions& o_;
  RunReport report_;
  Model fp32_;
  std::string calib_path_, eval_path_;  // data after preprocessing
  std::unique_ptr<TempFolder> tmp_;
};

EvalOptions Runner::BaseEvalOptions(const std::string& stage) const {
  EvalOptions e;
  e.inputs = eval_path_;
  e.labels = r_.data.labels;
  e.threads = r_.evaluate.threads;
  e.limit = r_.data.evaluation_samples;
  e.batch = r_.data.batch_size;
  const ValueInfo& in = fp32_.graph.inputs.front();
  if (in.has_shape && !in.dims.empty() && in.dims[0].known()) e.batch = 0;  // fixed batch: use it
  if (o_.on_progress) {
    auto cb = o_.on_progress;
    e.on_progress = [cb, stage](const EvalProgress& p) { cb({stage, p.done, p.total}); };
  }
  return e;
}

StatusOr<EvalReport> Runner::EvaluateModel(const std::string& path, bool with_reference, const std::string& stage) {
  EvalOptions e = BaseEvalOptions(stage);
  if (with_reference) e.reference = r_.model;
  auto rep = Evaluate(path, e);
  if (!rep.ok()) return rep.status().WithContext(stage);
  return rep;
}

double Runner::MetricOf(const EvalReport& e, bool is_fp32) const {
  switch (r_.evaluate.metric) {
    case RecipeEvaluate::Metric::kTop1: return 100.0 * e.top1();
    case RecipeEvaluate::Metric::kTop5: return 100.0 * e.top5();
    case RecipeEvaluate::Metric::kAgreement: return is_fp32 ? 100.0 : 100.0 * e.top1_agreement();
    case RecipeEvaluate::Metric::kSqnr:
      if (is_fp32 || e.comparisons.empty()) return kSqnrCeilingDb;
      return std::min(kSqnrCeilingDb, e.comparisons[0].sqnr_db);
    case RecipeEvaluate::Metric::kCosine:
      return is_fp32 || e.comparisons.empty() ? 1.0 : e.comparisons[0].cosine;
    case RecipeEvaluate::Metric::kTop5Overlap: return is_fp32 ? 100.0 : 100.0 * e.task.top5_overlap();
    case RecipeEvaluate::Metric::kMeanCosine: return is_fp32 ? 1.0 : e.task.mean_cosine();
    case RecipeEvaluate::Metric::kCtcAccuracy: return is_fp32 ? 100.0 : 100.0 * (1.0 - e.task.ctc_cer());
  }
  return 0.0;
}

// Batches of `path`, at most `limit` samples (0 = all); each call of the
// returned source reads the data again from the start.
BatchSource Runner::Batches(const std::string& path, int64_t limit) const {
  const Graph& g = fp32_.graph;
  int64_t size = r_.data.batch_size;
  const ValueInfo& in = g.inputs.front();
  if (in.has_shape && !in.dims.empty() && in.dims[0].known()) size = in.dims[0].value;  // fixed batch
  return DatasetBatches(path, g.inputs, g.initializer_inputs, size, limit);
}

StatusOr<CalibrationTable> Runner::CalibrateModel() {
  const int64_t limit = r_.data.calibration_samples;
  BatchFn next = Batches(calib_path_, limit)();
  CalibrationOptions c;
  c.method = r_.quantize.calibration.method;
  c.bins = r_.quantize.calibration.bins;
  c.percentile = r_.quantize.calibration.percentile;
  c.symmetric = r_.quantize.calibration.symmetric;
  c.threads = r_.evaluate.threads;
  int64_t total_batches = -1;
  if (limit > 0) total_batches = (limit + r_.data.batch_size - 1) / r_.data.batch_size;
  if (o_.on_progress) {
    auto cb = o_.on_progress;
    c.progress = [cb, total_batches](int64_t done) { cb({"calibrate", done, total_batches}); };
  }
  return Calibrate(fp32_, next, c);
}

Status Runner::WriteOutputModel(const Model& m) {
  SaveOptions s;
  s.external_data = r_.output.external_data;
  s.sparse_initializers = r_.output.sparse_initializers;
  SPARQ_RETURN_IF_ERROR(SaveModel(m, r_.output.model, s));
  std::error_code ec;
  report_.output_bytes = static_cast<int64_t>(fs::file_size(r_.output.model, ec));
  if (r_.output.external_data) report_.output_bytes += static_cast<int64_t>(fs::file_size(r_.output.model + ".data", ec));
  return Status::OK();
}

// SQNR of every INT8 layer's output, FP32 model vs quantized model, on the
// first evaluation batch; lowest first.
StatusOr<std::vector<std::pair<std::string, double>>> Runner::LayerSqnr(const Model& quantized) {
  SPARQ_ASSIGN_OR_RETURN(auto data, Dataset::Open(eval_path_, fp32_.graph.inputs, fp32_.graph.initializer_inputs));
  TensorMap batch;
  int64_t rows = 0;
  int64_t want = r_.data.batch_size;
  const ValueInfo& in = fp32_.graph.inputs.front();
  if (in.has_shape && !in.dims.empty() && in.dims[0].known()) want = in.dims[0].value;
  SPARQ_RETURN_IF_ERROR(data->Next(want, &batch, &rows));
  std::vector<std::string> outputs;
  std::map<std::string, std::string> node_of;
  for (const auto& d : report_.layers) {
    if (d.precision != Precision::kINT8) continue;
    for (const Node& n : fp32_.graph.nodes)
      if (n.name == d.node && !n.name.empty()) {
        outputs.push_back(n.outputs[0]);
        node_of[n.outputs[0]] = n.name;
      }
  }
  // With BN folded, a Conv's output name is the BN's: look both up.
  std::vector<std::string> present;
  for (const auto& o : outputs) {
    bool in_fp32 = false, in_q = false;
    for (const Node& n : fp32_.graph.nodes)
      for (const auto& x : n.outputs) in_fp32 |= x == o;
    for (const Node& n : quantized.graph.nodes)
      for (const auto& x : n.outputs) in_q |= x == o;
    if (in_fp32 && in_q) present.push_back(o);
  }
  RunOptions ro;
  ro.extra_outputs = present;
  TensorMap ref_out, q_out;
  SPARQ_ASSIGN_OR_RETURN(auto ref_exec, Executor::Create(fp32_, ExecutorOptions{r_.evaluate.threads}));
  SPARQ_RETURN_IF_ERROR(ref_exec->Run(batch, &ref_out, ro));
  SPARQ_ASSIGN_OR_RETURN(auto q_exec, Executor::Create(quantized, ExecutorOptions{r_.evaluate.threads}));
  SPARQ_RETURN_IF_ERROR(q_exec->Run(batch, &q_out, ro));
  std::vector<std::pair<std::string, double>> out;
  for (const auto& name : present) {
    ErrorStats s;
    SPARQ_RETURN_IF_ERROR(s.Add(ref_out[name].ToFloat32(), q_out[name].ToFloat32()));
    out.emplace_back(node_of[name], s.sqnr_db());
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.second < b.second; });
  return out;
}

Status Runner::PruneStage(double dense_metric) {
  const std::string candidate = tmp_->path("prune_candidate.onnx");
  ModelMetricFn metric = [&](const Model& m) -> StatusOr<PruneEvaluation> {
    SPARQ_RETURN_IF_ERROR(SaveModel(m, candidate));
    SPARQ_ASSIGN_OR_RETURN(EvalReport e, EvaluateModel(candidate, true, "prune: evaluate"));
    PruneEvaluation out;
    out.metric = MetricOf(e, false);
    if (!e.comparisons.empty()) {
      out.sqnr_db = std::min(kSqnrCeilingDb, e.comparisons[0].sqnr_db);
      out.agreement = 100.0 * e.top1_agreement();
    }
    return out;
  };
  double max_drop = r_.evaluate.gate.max_drop;
  if (r_.evaluate.gate.relative) max_drop *= std::fabs(dense_metric);
  auto log = [this](const std::string& line) { Log(line); };
  SPARQ_ASSIGN_OR_RETURN(PruneResult result, RunPruneStage(r_, fp32_, Batches(calib_path_, r_.data.calibration_samples),
                                                           metric, dense_metric, max_drop, log));
  report_.pruned = true;
  report_.prune_text = result.report.ToText();
  for (const auto& st : result.report.steps) {
    report_.prune_steps.push_back({st.step, st.target, st.sparsity, st.metric_masked, st.metric, st.masked.sqnr_db,
                                   st.recovered.sqnr_db, st.masked.agreement, st.recovered.agreement, st.acceptable,
                                   r_.prune.recovery});
  }
  if (result.report.stopped_early) report_.warnings.push_back("prune: " + result.report.stop_message);
  fp32_ = std::move(result.model);
  return Status::OK();
}

StatusOr<RunReport> Runner::Run() {
  report_.recipe = r_.source;
  report_.name = r_.name;
  report_.model = r_.model;
  report_.output_model = r_.output.model;
  report_.metric = MetricName(r_.evaluate.metric);
  report_.max_drop = r_.evaluate.gate.max_drop;
  report_.relative = r_.evaluate.gate.relative;
  report_.warnings = r_.warnings;

  std::error_code ec;
  if (fs::exists(r_.output.model, ec) && fs::equivalent(r_.output.model, r_.model, ec)) {
    return Status::InvalidArgument("output.model " + r_.output.model + " is the input model: sparq never overwrites it");
  }
  SPARQ_RETURN_IF_ERROR(CheckOutputsWritable(r_));
  fs::create_directories(r_.output.dir, ec);
  if (ec) return Status::IOError("cannot create output folder " + r_.output.dir + ": " + ec.message());

  Log("load " + r_.model);
  SPARQ_ASSIGN_OR_RETURN(fp32_, LoadModel(r_.model));
  SPARQ_RETURN_IF_ERROR(CheckSupported(fp32_));
  if (fp32_.graph.inputs.empty()) return Status::InvalidArgument(r_.model + ": the model has no inputs");
  SPARQ_RETURN_IF_ERROR(CheckRecipeAgainstModel(r_, fp32_));
  report_.fp32_bytes = static_cast<int64_t>(fs::file_size(r_.model, ec));

  // Data, preprocessed once into temporary files when the recipe asks for it.
  tmp_ = std::make_unique<TempFolder>(r_.output.dir);
  SPARQ_ASSIGN_OR_RETURN(calib_path_, PrepareData(r_.data.calibration.empty() ? r_.data.evaluation : r_.data.calibration,
                                                  r_.data, fp32_, tmp_->path("calibration.npz")));
  SPARQ_ASSIGN_OR_RETURN(eval_path_, PrepareData(r_.data.evaluation, r_.data, fp32_, tmp_->path("evaluation.npz")));

  Log("evaluate fp32");
  SPARQ_ASSIGN_OR_RETURN(EvalReport fp32_eval, Timed("evaluate fp32", [&] { return EvaluateModel(r_.model, false, "evaluate fp32"); }));
  report_.fp32_metric = MetricOf(fp32_eval, true);

  if (r_.prune.enabled) {
    Log("prune (" + r_.prune.structure.ToString() + ")");
    SPARQ_RETURN_IF_ERROR(Timed("prune", [&] { return PruneStage(report_.fp32_metric); }));
  }

  // Calibrate (also for FP16: the table tells which values are float32).
  Log("calibrate (" + std::string(CalibrationMethodName(r_.quantize.calibration.method)) + ") on " + r_.data.calibration);
  SPARQ_ASSIGN_OR_RETURN(CalibrationTable table, Timed("calibrate", [&] { return CalibrateModel(); }));
  const bool int8 = r_.quantize.enabled && r_.quantize.precision != RecipeQuantize::Precision::kFp16;
  if (int8 && !r_.output.scales.empty()) {
    SPARQ_RETURN_IF_ERROR(table.Save(r_.output.scales));
    report_.files.push_back(r_.output.scales);
  }
  if (int8 && !r_.output.trt_cache.empty()) {
    SPARQ_RETURN_IF_ERROR(WriteFileAtomically(r_.output.trt_cache, table.ToTensorRtCache()));
    report_.files.push_back(r_.output.trt_cache);
  }

  QuantizeOptions qopt = ToQuantizeOptions(r_);
  if (!r_.quantize.enabled) {
    qopt.precision = Precision::kFP32;
    qopt.fold_batchnorm = false;
  }
  QuantizeReport qrep;
  SPARQ_ASSIGN_OR_RETURN(Model compressed, Timed("quantize", [&] { return QuantizeModel(fp32_, table, qopt, &qrep); }));
  report_.layers = qrep.layers;
  for (const auto& w : qrep.warnings) report_.warnings.push_back(w);
  SPARQ_RETURN_IF_ERROR(WriteOutputModel(compressed));

  Log("evaluate");
  auto judge = [&](const EvalReport& e) {
    report_.output_metric = MetricOf(e, false);
    report_.top1_agreement = 100.0 * e.top1_agreement();
    report_.sqnr_db = e.comparisons.empty() ? 0.0 : e.comparisons[0].sqnr_db;
    report_.eval_samples = e.samples;
    double drop = report_.fp32_metric - report_.output_metric;
    if (r_.evaluate.gate.relative) drop = report_.fp32_metric != 0.0 ? drop / std::fabs(report_.fp32_metric) : 0.0;
    report_.drop = drop;
    report_.passed = drop <= r_.evaluate.gate.max_drop;
  };
  SPARQ_ASSIGN_OR_RETURN(EvalReport out_eval, Timed("evaluate output", [&] {
    return EvaluateModel(r_.output.model, true, "evaluate output");
  }));
  judge(out_eval);

  // Accuracy-aware fallback: move the worst INT8 layer off INT8 and retry.
  const auto& fb = r_.quantize.fallback;
  while (!report_.passed && int8 && fb.enabled && static_cast<int>(report_.fallback.size()) < fb.max_layers) {
    SPARQ_ASSIGN_OR_RETURN(auto ranked, LayerSqnr(compressed));
    std::string worst;
    double worst_sqnr = 0.0;
    for (const auto& [node, sqnr] : ranked) {
      bool done = false;
      for (const auto& f : report_.fallback) done |= f.node == node;
      if (!done) {
        worst = node;
        worst_sqnr = sqnr;
        break;
      }
    }
    if (worst.empty()) break;
    Precision to = ToPrecision(fb.to);
    qopt.layers.insert(qopt.layers.begin(), LayerRule{worst, to});
    Log("fallback: " + worst + " to " + PrecisionName(to) + " (output SQNR " + std::to_string(worst_sqnr) + " dB)");
    SPARQ_ASSIGN_OR_RETURN(compressed, QuantizeModel(fp32_, table, qopt, &qrep));
    report_.layers = qrep.layers;
    SPARQ_RETURN_IF_ERROR(WriteOutputModel(compressed));
    SPARQ_ASSIGN_OR_RETURN(out_eval, EvaluateModel(r_.output.model, true, "evaluate output"));
    judge(out_eval);
    report_.fallback.push_back({worst, PrecisionName(to), worst_sqnr, report_.output_metric});
  }
  for (const auto& f : report_.fallback)
    for (auto& l : report_.layers)
      if (l.node == f.node) {
        char buf[96];
        std::snprintf(buf, sizeof buf, "fallback: output SQNR %.1f dB, the lowest of the INT8 layers", f.sqnr_db);
        l.reason = buf;
      }
  report_.files.insert(report_.files.begin(), r_.output.model);
  if (r_.output.external_data) report_.files.insert(report_.files.begin() + 1, r_.output.model + ".data");
  report_.weight_sparsity = WeightSparsity(compressed);
  SPARQ_RETURN_IF_ERROR(WriteReports());
  return report_;
}

Status Runner::WriteReports() {
  // List every report first, so that report.json names all files written.
  for (const std::string* path : {&r_.report.json, &r_.report.junit, &r_.report.markdown})
    if (!path->empty()) report_.files.push_back(*path);
  if (!r_.report.json.empty()) SPARQ_RETURN_IF_ERROR(WriteFileAtomically(r_.report.json, report_.ToJson()));
  if (!r_.report.junit.empty()) SPARQ_RETURN_IF_ERROR(WriteFileAtomically(r_.report.junit, report_.ToJUnit()));
  if (!r_.report.markdown.empty()) SPARQ_RETURN_IF_ERROR(WriteFileAtomically(r_.report.markdown, report_.ToMarkdown()));
  return Status::OK();
}

}  // namespace

StatusOr<RunReport> RunRecipe(const Recipe& recipe, const PipelineOptions& options) {
  Runner runner(recipe, options);
  return runner.Run();
}

}  // namespace sparq
