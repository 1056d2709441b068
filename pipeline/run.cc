// RunRecipe: the stages of `sparq run`, in order.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <sstream>

#include "pipeline/data_prep.h"
#include "pipeline/gate.h"
#include "pipeline/pinned_ifs.h"
#include "pipeline/provenance.h"
#include "pipeline/report.h"
#include "pipeline/prune_stage.h"
#include "runtime/nonfinite.h"
#include "sparq/adaround.h"
#include "sparq/bias_correction.h"
#include "sparq/calibrate.h"
#include "sparq/evaluate.h"
#include "sparq/fallback.h"
#include "sparq/file_io.h"
#include "sparq/memory.h"
#include "sparq/onnx_io.h"
#include "sparq/pipeline.h"
#include "sparq/search.h"
#include "sparq/smooth.h"

namespace sparq {
namespace fs = std::filesystem;

namespace {

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
  EvaluateCallOptions CallOptions(const std::string& stage) const;
  Status OpenData();
  StatusOr<CalibrationTable> CalibrateModel(const QuantizeOptions& q);
  StatusOr<CalibrationTable> LoadTable(const QuantizeOptions& q);
  StatusOr<std::map<std::string, std::vector<float>>> MeasureBiasCorrection(const QuantizeOptions& q);
  StatusOr<std::map<std::string, QuantizedWeight>> MeasureAdaRound(const QuantizeOptions& q);
  Status UpgradeOpsetForInt8();
  Status FoldPinnedIfs();
  void NoteQuantizedLayers();
  Status PruneStage(double dense_metric);
  StatusOr<EvalReport> EvaluateModel(const Model& m, const std::string& stage);
  double MetricOf(const EvalReport& e) const { return MetricValue(r_.evaluate.metric, e); }
  void Judge(const EvalReport& e);
  Status WriteOutputModel(const Model& m);
  Status WriteReports();
  Status CheckFinite(const Model& m, const EvalReport& e);
  Status SearchStage(QuantizeOptions* qopt);

  const Recipe& r_;
  const PipelineOptions& o_;
  RunReport report_;
  Model fp32_;               // the float model: as loaded (Ifs decided by data.constants folded), then pruned
  RecipeData data_;          // the data section as fed: less the constants of inputs folding removed
  PinnedValues folded_inputs_;  // data.constants whose Ifs were folded (CalibrationTable::folded_inputs)
  BatchSource calibration_;  // data.calibration (else data.evaluation), preprocessed per batch
  std::unique_ptr<Evaluator> evaluator_;  // data.evaluation against the model as loaded
  std::string prune_stop_;                // why pruning stopped below its target ("" = it did not)
  std::string scales_method_;             // quantize.scales: the table's calibration method
  // The recipe's quantize section as this run applies it: quantize.search
  // replaces its calibration, bias_correction, quantize_outputs and smooth.
  RecipeQuantize q_;
 public:
  bool model_written_ = false;  // output.model holds this run's (unjudged) model
};

EvaluateCallOptions Runner::CallOptions(const std::string& stage) const {
  EvaluateCallOptions call;
  call.name = stage;
  if (o_.on_progress) {
    auto cb = o_.on_progress;
    call.on_progress = [cb, stage](EvalProgress& p) {
      StageProgress s{stage, p.done, p.total};
      cb(s);
      p.cancel = s.cancel;
    };
  }
  return call;
}

// The data, opened once for the whole run, and the evaluator: the model as
// loaded is the reference that every later model is compared with, run once.
Status Runner::OpenData() {
  const RecipeData& d = data_;
  SPARQ_ASSIGN_OR_RETURN(calibration_, RecipeBatches(d.calibration.empty() ? d.evaluation : d.calibration, d, fp32_,
                                                     d.calibration_samples));
  SPARQ_ASSIGN_OR_RETURN(BatchSource evaluation, RecipeBatches(d.evaluation, d, fp32_, d.evaluation_samples));
  const std::vector<ValueInfo>& outs = fp32_.graph.outputs;
  if (outs.size() > 1 && r_.evaluate.output.empty()) {
    std::string names;
    for (const ValueInfo& v : outs) names += (names.empty() ? "" : ", ") + v.name;
    const std::string w = "evaluate: metric " + std::string(MetricName(r_.evaluate.metric)) + " reads output '" +
                          outs[0].name + "', the first of the model's " + std::to_string(outs.size()) +
                          " outputs (" + names + "); name the one that matters with evaluate.output";
    Log("warning: " + w);
    report_.warnings.push_back(w);
  }
  // The unwritten metric, argmax agreement, means little unless the output is
  // class scores [N, classes]: YOLOv8n's [N, 22, 2100] kept 27 convolutions in
  // FP32 and failed the gate. Choosing mean_cosine there instead passed a
  // detector that lost boxes (bench/ACCURACY.md, twelfth stop), so the run
  // says what to write rather than guess.
  const std::string& read = r_.evaluate.output.empty() && !outs.empty() ? outs[0].name : r_.evaluate.output;
  const auto v = std::find_if(outs.begin(), outs.end(), [&](const ValueInfo& o) { return o.name == read; });
  if (!r_.evaluate.metric_written && r_.evaluate.metric == Metric::kAgreement && v != outs.end() && v->has_shape &&
      !(v->dims.size() == 2 && v->dims[1].known() && v->dims[1].value >= 2)) {
    // The declared dims; a long symbolic one (an exporter's formula) as "?".
    auto dim = [](const Dim& d) {
      if (d.known()) return std::to_string(d.value);
      return d.param.empty() || d.param.size() > 16 ? std::string("?") : d.param;
    };
    std::string shape;
    for (const Dim& d : v->dims) shape += (shape.empty() ? "" : ", ") + dim(d);
    const std::string w = "evaluate.metric not written: agreement (argmax) reads output '" + v->name + "' [" + shape +
                          "], not class scores [N, classes]; write evaluate.metric: box_recall for a YOLO-style "
                          "detector, mean_cosine for embeddings or hidden states, map_iou for a probability map, "
                          "ctc_accuracy for a CTC recognizer, or sqnr";
    Log("warning: " + w);
    report_.warnings.push_back(w);
  }
  EvaluatorOptions e;
  e.labels = d.labels;
  e.threads = r_.evaluate.threads;
  e.backend = report_.backend;  // resolved in Run: what the report names is what runs
  e.boxes = r_.evaluate.boxes;
  e.map = r_.evaluate.map;
  e.output = r_.evaluate.output;
  e.on_progress = CallOptions("evaluate fp32").on_progress;
  auto created = Evaluator::Create(fp32_, std::move(evaluation), e);
  if (!created.ok()) return created.status().WithContext("evaluate fp32");
  evaluator_ = std::move(created).value();
  return Status::OK();
}

StatusOr<EvalReport> Runner::EvaluateModel(const Model& m, const std::string& stage) {
  auto rep = evaluator_->Evaluate(m, CallOptions(stage));
  if (!rep.ok()) return rep.status().WithContext(stage);
  return rep;
}

void Runner::Judge(const EvalReport& e) {
  report_.output_metric = MetricOf(e);
  report_.top1_agreement = 100.0 * e.top1_agreement();
  report_.sqnr_db = e.comparisons.empty() ? std::nan("") : e.comparisons[0].sqnr_db;
  report_.cosine = e.comparisons.empty() ? std::nan("") : e.comparisons[0].cosine;
  report_.top1 = r_.data.labels.empty() ? std::nan("") : 100.0 * e.top1();
  report_.eval_samples = e.samples;
  JudgeGate(r_.evaluate.gate, &report_);
}

// Which tensors to calibrate: only those static INT8 quantization reads
// (CalibrationTensorsNeeded), so that the rest of the graph fuses while
// calibrating, unless float16 may appear (it keeps a node in float32 by its
// values' ranges) or a side file (output.scales, output.trt_cache) should
// hold every tensor. Empty = every tensor.
StatusOr<std::vector<std::string>> CalibrationScope(const Model& model, const QuantizeOptions& q,
                                                    const Recipe& r) {
  bool every = q.dynamic || q.precision != Precision::kINT8 || q.other_precision != Precision::kFP32 ||
               !r.output.scales.empty() || !r.output.trt_cache.empty() ||
               (r.quantize.fallback.enabled && r.quantize.fallback.to == Precision::kFP16);
  for (const auto& rule : q.layers) every |= rule.precision == Precision::kFP16;
  std::vector<std::string> tensors;
  if (every) return tensors;
  SPARQ_ASSIGN_OR_RETURN(std::vector<CalibrationNeed> needs, CalibrationTensorsNeeded(model, q));
  for (auto& n : needs) tensors.push_back(std::move(n.tensor));
  return tensors;
}

StatusOr<CalibrationTable> Runner::CalibrateModel(const QuantizeOptions& q) {
  BatchFn next = calibration_();
  CalibrationOptions c;
  static_cast<CalibrationMethodOptions&>(c) = q_.calibration;
  c.threads = r_.evaluate.threads;
  // The forward passes (and, on a GPU, the histogram binning) on the backend
  // evaluate.backend resolved to (Run): cpu unless a GPU was asked for.
  c.backend = report_.backend.empty() ? "cpu" : report_.backend;
  SPARQ_ASSIGN_OR_RETURN(c.tensors, CalibrationScope(fp32_, q, r_));
  if (!c.tensors.empty()) {
    Log("calibrate: only the " + std::to_string(c.tensors.size()) +
        " tensors INT8 reads (no scales.json or TensorRT cache to write), the rest fused");
  }
  // In samples, as the evaluation stages count: the source knows its size
  // (after data.calibration_samples).
  const int64_t total = calibration_.samples();
  if (o_.on_progress) {
    auto cb = o_.on_progress;
    c.progress = [cb, total](CalibrationProgress& p) {
      StageProgress s{"calibrate", p.samples, total};
      cb(s);
      p.cancel = s.cancel;
    };
  }
  // Side files list every tensor, INT8 reads only some: a tensor holding
  // NaN or an infinity that INT8 does not read (an SDPA export's -inf
  // attention mask) is left out of them rather than failing the run.
  c.skip_non_finite = c.tensors.empty();
  SPARQ_ASSIGN_OR_RETURN(CalibrationTable table, Calibrate(fp32_, next, c));
  if (table.skipped.empty()) return table;
  if (q.precision == Precision::kINT8 && !q.dynamic) {
    SPARQ_ASSIGN_OR_RETURN(std::vector<CalibrationNeed> needs, CalibrationTensorsNeeded(fp32_, q));
    for (const CalibrationNeed& need : needs) {
      if (std::binary_search(table.skipped.begin(), table.skipped.end(), need.tensor)) {
        return Status::InvalidArgument("calibration: activation '" + need.tensor +
                                       "' holds NaN or an infinity on the calibration data, and INT8 reads it: "
                                       "check the data and preprocessing, or keep the layers reading it in float "
                                       "(quantize.layers)");
      }
    }
  }
  std::string names;
  for (size_t i = 0; i < table.skipped.size() && i < 4; ++i) names += (i ? ", " : "") + table.skipped[i];
  if (table.skipped.size() > 4) names += ", ...";
  report_.warnings.push_back("calibration: " + std::to_string(table.skipped.size()) +
                             " tensor(s) hold NaN or an infinity (" + names +
                             "): left out of the calibration table and its side files; INT8 does not read them");
  return table;
}

// quantize.bias_correction: measured on the calibration data, for the layers
// as QuantizeModel will quantize them.
StatusOr<std::map<std::string, std::vector<float>>> Runner::MeasureBiasCorrection(const QuantizeOptions& q) {
  BiasCorrectionOptions b;
  b.threads = r_.evaluate.threads;
  auto measured = sparq::MeasureBiasCorrection(fp32_, calibration_(), q, b);
  if (!measured.ok()) return measured.status().WithContext("quantize.bias_correction");
  return measured;
}

// quantize.rounding adaround: each layer's rounding fitted on the calibration
// data (sparq/adaround.h), for the layers as QuantizeModel will quantize them.
StatusOr<std::map<std::string, QuantizedWeight>> Runner::MeasureAdaRound(const QuantizeOptions& q) {
  AdaRoundOptions a = r_.quantize.adaround;
  a.threads = r_.evaluate.threads;
  auto measured = sparq::MeasureAdaRound(fp32_, calibration_(), q, a);
  if (!measured.ok()) return measured.status().WithContext("quantize.rounding adaround");
  int64_t weights = 0, changed = 0, kept = 0;
  double before = 0.0, after = 0.0;
  for (const AdaRoundLayer& l : measured->layers) {
    weights += l.weights;
    changed += l.changed;
    kept += l.kept_nearest;
    before += l.error_nearest;
    after += l.error_adaround;
  }
  char line[256];
  std::snprintf(line, sizeof line,
                "adaround: %zu layers, %lld of %lld weights rounded the other way (%.1f%%), layer output error "
                "%.4g -> %.4g (summed), %lld layer(s) kept nearest",
                measured->layers.size(), static_cast<long long>(changed), static_cast<long long>(weights),
                weights > 0 ? 100.0 * static_cast<double>(changed) / static_cast<double>(weights) : 0.0, before, after,
                static_cast<long long>(kept));
  Log(line);
  return std::move(measured->weights);
}

// quantize.scales: a table calibrated earlier, checked against the model.
StatusOr<CalibrationTable> Runner::LoadTable(const QuantizeOptions& q) {
  const std::string where = "quantize.scales " + r_.quantize.scales;
  auto table = CalibrationTable::Load(r_.quantize.scales);
  if (!table.ok()) return table.status().WithContext(where);
  scales_method_ = table->method;
  std::vector<std::string> warnings;
  SPARQ_RETURN_IF_ERROR(CheckFoldedInputs(*table, folded_inputs_, where, "data.constants"));
  SPARQ_RETURN_IF_ERROR(CheckCalibrationTable(fp32_, *table, q, &warnings).WithContext(where));
  for (const auto& w : warnings) {
    Log(where + ": " + w);
    report_.warnings.push_back(where + ": " + w);
  }
  return table;
}

Status Runner::WriteOutputModel(const Model& m) {
  SaveOptions s;
  s.external_data = r_.output.external_data;
  s.sparse_initializers = r_.output.sparse_initializers;
  Model stamped = m;  // shares the weights
  StampProvenance(r_, &stamped);
  const bool int8 = r_.quantize.enabled && r_.quantize.precision != RecipeQuantize::Precision::kFp16 &&
                    r_.quantize.precision != RecipeQuantize::Precision::kInt4;
  if (int8 && !scales_method_.empty()) SetMetadataProp("sparq.calibration_method", scales_method_, &stamped);
  SPARQ_RETURN_IF_ERROR(SaveModel(stamped, r_.output.model, s));
  model_written_ = true;
  std::error_code ec;
  report_.output_bytes = static_cast<int64_t>(fs::file_size(r_.output.model, ec));
  if (r_.output.external_data) report_.output_bytes += static_cast<int64_t>(fs::file_size(r_.output.model + ".data", ec));
  return Status::OK();
}

Status Runner::PruneStage(double dense_metric) {
  ModelMetricFn metric = [&](const Model& m) -> StatusOr<PruneEvaluation> {
    SPARQ_ASSIGN_OR_RETURN(EvalReport e, EvaluateModel(m, "prune: evaluate"));
    PruneEvaluation out;
    out.metric = MetricOf(e);
    if (!e.comparisons.empty()) {
      out.sqnr_db = std::min(kSqnrCeilingDb, e.comparisons[0].sqnr_db);
      out.agreement = 100.0 * e.top1_agreement();
    }
    return out;
  };
  double max_drop = r_.evaluate.gate.max_drop;
  if (r_.evaluate.gate.relative) max_drop *= std::fabs(dense_metric);
  auto log = [this](const std::string& line) { Log(line); };
  SPARQ_ASSIGN_OR_RETURN(PruneResult result, RunPruneStage(r_, fp32_, calibration_, metric, dense_metric, max_drop, log));
  report_.pruned = true;
  report_.prune_text = result.report.ToText();
  for (const auto& st : result.report.steps) {
    report_.prune_steps.push_back({st.step, st.target, st.sparsity, st.metric_masked, st.metric, st.masked.sqnr_db,
                                   st.recovered.sqnr_db, st.masked.agreement, st.recovered.agreement, st.acceptable,
                                   r_.prune.recovery, st.retrained, st.retrain_rezeroed, st.retrain_seconds});
  }
  if (result.report.stopped_early) prune_stop_ = result.report.stop_message;
  fp32_ = std::move(result.model);
  return Status::OK();
}

// quantize.search: the candidates scored on held-out calibration batches;
// the chosen one's calibration and switches replace the recipe's for the
// rest of the run (smoothing, calibration, bias correction, the fallback).
Status Runner::SearchStage(QuantizeOptions* qopt) {
  SearchOptions so;
  for (const std::string& spec : r_.quantize.search.candidates) {
    auto c = ParseSearchCandidate(spec, r_.quantize.calibration);
    if (!c.ok()) return c.status().WithContext("quantize.search");
    so.candidates.push_back(std::move(*c));
  }
  so.budget_s = r_.quantize.search.budget_s;
  so.holdout_every = r_.quantize.smooth.holdout_every;
  so.metric = r_.evaluate.metric;
  so.boxes = r_.evaluate.boxes;
  so.map = r_.evaluate.map;
  so.output = r_.evaluate.output;
  so.smooth = r_.quantize.smooth;
  so.threads = r_.evaluate.threads;
  so.log = [this](const std::string& line) { Log(line); };
  Log("search: " + std::to_string(so.candidates.size()) + " candidates on " + calibration_.name());
  auto found = SearchQuantization(fp32_, calibration_, *qopt, so);
  if (!found.ok()) return found.status().WithContext("quantize.search");
  const SearchCandidate& c = found->chosen;
  q_.calibration = c.calibration;
  q_.bias_correction = c.bias_correction;
  q_.quantize_outputs = qopt->quantize_outputs = c.quantize_outputs;
  if (c.smooth) {
    q_.smooth.enabled = true;
    q_.smooth.auto_alpha = false;
    q_.smooth.alpha = c.smooth_alpha;  // chosen by the search, on the same held-out batches
  }
  Log("search: chose " + c.name);
  report_.search = std::move(found->rows);
  if (!found->split) {
    report_.warnings.push_back("quantize.search: " + std::to_string(found->fit_batches) +
                               " calibration batch(es), fewer than smooth.holdout_every: every batch both fit and "
                               "judged the candidates");
  }
  if (found->budget_hit) {
    report_.warnings.push_back("quantize.search: budget_s " + std::to_string(r_.quantize.search.budget_s) +
                               " s reached: some candidates were not tried (the choice depends on this machine's "
                               "speed; raise budget_s or list fewer candidates)");
  }
  return Status::OK();
}

// data.constants that decide an If (Silero VAD's sample rate): the taken
// branch is inlined before any stage (runtime/passes/if_folding.h), so that
// calibration and quantization see the layers inside it. The pinned value is
// what every batch feeds, so the folded model is the model for that value;
// the written model has no such input (feeding it fails loudly), and the FP32
// reference is the folded model (the same arithmetic, no If).
Status Runner::FoldPinnedIfs() {
  data_ = r_.data;
  SPARQ_ASSIGN_OR_RETURN(PinnedFold fold, sparq::FoldPinnedIfs(&fp32_, r_.data.constants, "data.constants"));
  for (const std::string& line : fold.folded) {
    Log("fold If " + line);
    report_.folded_ifs.push_back(line);
  }
  for (const std::string& line : fold.removed_lines) {
    Log(line);
    report_.warnings.push_back(line);
  }
  for (const auto& [name, values] : fold.inputs_removed) {
    report_.inputs_removed.push_back(name);
    data_.constants.erase(name);
  }
  folded_inputs_ = std::move(fold.inputs_removed);
  return Status::OK();
}

// Conv / Gemm / MatMul nodes in the subgraphs of g's nodes, at any depth.
int64_t LayersInSubgraphs(const Graph& g, bool inside = false) {
  int64_t n = 0;
  for (const Node& node : g.nodes) {
    n += inside && node.domain.empty() &&
         (node.op_type == "Conv" || node.op_type == "Gemm" || node.op_type == "MatMul");
    for (const Attribute& a : node.attributes)
      if (a.subgraph) n += LayersInSubgraphs(*a.subgraph, true);
  }
  return n;
}

// A run that asked for quantization and quantized no layer says so, with
// why, in the log, the warnings and the reports. The gate still passes on
// accuracy alone: the model written is right (it is the float model), and a
// gate failing on it would read as an accuracy regression; the reports carry
// "nothing_quantized" for a CI that wants to fail on it.
void Runner::NoteQuantizedLayers() {
  report_.quantized_layers = 0;
  for (const LayerDecision& l : report_.layers)
    report_.quantized_layers += l.precision != Precision::kFP32 || l.reason.rfind("int4", 0) == 0;
  if (!r_.quantize.enabled || report_.quantized_layers > 0) return;
  const int64_t inside = LayersInSubgraphs(fp32_.graph);
  const std::string subgraphs = std::to_string(inside) +
                                " Conv/Gemm/MatMul layer(s) inside If/Loop/Scan subgraphs, which sparq leaves float "
                                "(an If decided by an input that every run feeds the same value is folded when "
                                "data.constants pins that input)";
  std::string why;
  if (report_.layers.empty()) {
    why = inside > 0 ? "the model's only layers are " + subgraphs
                     : "the model has no Conv, Gemm or MatMul layer with a constant weight";
  } else {
    std::map<std::string, int> reasons;
    for (const LayerDecision& l : report_.layers) ++reasons[l.reason.empty() ? "no reason given" : l.reason];
    why = "every one of its " + std::to_string(report_.layers.size()) + " layer(s) stayed float (";
    int listed = 0;
    for (const auto& [reason, count] : reasons) {
      if (listed++ == 3) {
        why += "; ...";
        break;
      }
      why += (listed > 1 ? "; " : "") + std::to_string(count) + ": " + reason;
    }
    why += ")";
    if (inside > 0) why += ", and the model has " + subgraphs;
  }
  report_.nothing_quantized = why;
  const std::string line = "nothing was quantized (int8 layers: 0): " + why + "; the written model is float";
  Log("warning: " + line);
  report_.warnings.push_back(line);
}

// Older models are converted before any evaluation or calibration; the FP32
// reference stays the original file.
Status Runner::UpgradeOpsetForInt8() {
  // int4 converts in QuantizeWeightsInt4 when its format needs it (qdq: opset 21).
  if (!r_.quantize.enabled || r_.quantize.precision == RecipeQuantize::Precision::kFp16 ||
      r_.quantize.precision == RecipeQuantize::Precision::kInt4)
    return Status::OK();
  SPARQ_ASSIGN_OR_RETURN(std::string line, sparq::UpgradeOpsetForInt8(fp32_, ToQuantizeOptions(r_)));
  if (!line.empty()) {
    Log(line);
    report_.warnings.push_back(line);
  }
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
  q_ = r_.quantize;
  SPARQ_ASSIGN_OR_RETURN(BackendChoice backend, ResolveBackend(r_.evaluate.backend));
  report_.backend = backend.name;
  if (r_.evaluate.backend == RecipeEvaluate::Backend::kAuto) {
    Log("evaluate.backend " + backend.reason + ": picked " + backend.name);
  }

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
  SPARQ_RETURN_IF_ERROR(FoldPinnedIfs());
  SPARQ_RETURN_IF_ERROR(CheckRecipeAgainstModel(r_, fp32_));
  report_.fp32_bytes = static_cast<int64_t>(fs::file_size(r_.model, ec));
  {
    // Weights in external data are not in the file (a few KB for a model over
    // 2 GB): count them too. (Their tensors' bytes; the data file adds padding.)
    int64_t weights = 0;
    for (const auto& kv : fp32_.graph.initializers) weights += static_cast<int64_t>(kv.second.nbytes());
    if (weights > report_.fp32_bytes) report_.fp32_bytes += weights;
  }
  SPARQ_RETURN_IF_ERROR(UpgradeOpsetForInt8());
  QuantizeOptions qopt = ToQuantizeOptions(r_);
  if (!r_.quantize.enabled) {
    qopt.precision = Precision::kFP32;
    qopt.fold_batchnorm = false;
  }
  // A table given in quantize.scales is checked before any work (pruning
  // keeps every value name, so the check holds for the pruned model too).
  CalibrationTable table;
  if (!r_.quantize.scales.empty()) {
    Log("calibration table " + r_.quantize.scales);
    SPARQ_ASSIGN_OR_RETURN(table, Timed("calibrate", [&] { return LoadTable(qopt); }));
  }

  // The evaluation data's reference outputs come from this run, once: every
  // later model (prune candidates, quantized, fallback) is compared with them.
  Log("evaluate fp32");
  SPARQ_RETURN_IF_ERROR(Timed("evaluate fp32", [&] { return OpenData(); }));
  report_.fp32_metric = MetricOf(evaluator_->reference_report());

  if (r_.prune.enabled) {
    Log("prune (" + r_.prune.structure.ToString() + ")");
    SPARQ_RETURN_IF_ERROR(Timed("prune", [&] { return PruneStage(report_.fp32_metric); }));
  }

  // quantize.smooth: the float model with its activation outliers moved into
  // the weights (equal outputs); calibration, quantization and the fallback
  // start from it. The evaluation's reference stays the model as loaded.
  // precision int4: weights only, round to nearest: no search, smoothing or calibration.
  const bool int4 = r_.quantize.enabled && r_.quantize.precision == RecipeQuantize::Precision::kInt4;
  const bool static_int8 = r_.quantize.enabled && r_.quantize.precision != RecipeQuantize::Precision::kFp16 && !int4 &&
                           r_.quantize.mode == RecipeQuantize::Mode::kStatic;
  if (static_int8 && r_.quantize.search.enabled && r_.quantize.scales.empty()) {
    // The default recipe leaves layers too small for INT8 to pay in FP32
    // (QuantizeOptions::skip_small_layers): for the search, the run and the fallback.
    qopt.skip_small_layers = true;
    SPARQ_RETURN_IF_ERROR(Timed("search", [&] { return SearchStage(&qopt); }));
  }
  if (static_int8 && q_.smooth.enabled && r_.quantize.scales.empty()) {
    SmoothOptions so = q_.smooth;
    so.threads = r_.evaluate.threads;
    Log("smooth (alpha " + (so.auto_alpha ? std::string("auto") : std::to_string(so.alpha)) + ") on " +
        (r_.data.calibration.empty() ? r_.data.evaluation : r_.data.calibration));
    SmoothReport sr;
    auto smoothed = Timed("smooth", [&] {
      return SmoothForInt8(fp32_, calibration_, qopt, q_.calibration, so, &sr);
    });
    if (!smoothed.ok()) return smoothed.status().WithContext("quantize.smooth");
    fp32_ = std::move(*smoothed);
    for (const auto& [alpha, db] : sr.alpha_sqnr_db)
      Log("smooth: alpha " + std::to_string(alpha) + ": held-out output SQNR " + std::to_string(db) + " dB");
    Log("smooth: alpha " + std::to_string(sr.alpha) + ", " + std::to_string(sr.inputs.size()) +
        " activation(s) smoothed");
    for (const auto& in : sr.inputs)
      Log("smooth: '" + in.tensor + "' outlier ratio " + std::to_string(in.outlier_ratio) + " -> " +
          std::to_string(in.ratio_after) + " (" + in.folded_into + ")");
  }

  // Calibrate (also for FP16: the table tells which values are float32), or
  // reuse quantize.scales (loaded and checked above).
  if (r_.quantize.scales.empty() && !int4) {
    Log("calibrate (" + std::string(CalibrationMethodName(q_.calibration.method)) + ") on " + r_.data.calibration);
    SPARQ_ASSIGN_OR_RETURN(table, Timed("calibrate", [&] { return CalibrateModel(qopt); }));
    table.folded_inputs = folded_inputs_;  // output.scales: quantizing with it must fold the same way
  }
  const bool int8 = r_.quantize.enabled && r_.quantize.precision != RecipeQuantize::Precision::kFp16 && !int4;
  if (int8 && !r_.output.scales.empty() && r_.quantize.scales.empty()) {
    SPARQ_RETURN_IF_ERROR(table.Save(r_.output.scales));
    report_.files.push_back(r_.output.scales);
  }
  bool trt_cache = int8 && !r_.output.trt_cache.empty();
  if (trt_cache && r_.quantize.search.enabled) {
    // The search may choose a table TensorRT cannot take (asymmetric, ...).
    if (Status st = table.CheckTensorRtCache(); !st.ok()) {
      report_.warnings.push_back("output.trt_cache not written: the calibration the search chose has none: " +
                                 st.message());
      trt_cache = false;
    }
  }
  if (trt_cache) {
    SPARQ_RETURN_IF_ERROR(table.CheckTensorRtCache().WithContext("output.trt_cache"));
    SPARQ_RETURN_IF_ERROR(WriteFileAtomically(r_.output.trt_cache, table.ToTensorRtCache(r_.output.trt_version)));
    report_.files.push_back(r_.output.trt_cache);
  }

  if (int8 && !qopt.dynamic && !qopt.fp8 && r_.quantize.rounding == RecipeQuantize::Rounding::kAdaRound) {
    Log("adaround (" + std::to_string(r_.quantize.adaround.iterations) + " iterations per layer) on " +
        (r_.data.calibration.empty() ? r_.data.evaluation : r_.data.calibration));
    SPARQ_ASSIGN_OR_RETURN(qopt.rounded_weights, Timed("adaround", [&] { return MeasureAdaRound(qopt); }));
  }
  if (int8 && !qopt.dynamic && q_.bias_correction) {
    Log("bias correction on " + (r_.data.calibration.empty() ? r_.data.evaluation : r_.data.calibration));
    SPARQ_ASSIGN_OR_RETURN(qopt.bias_correction, Timed("bias correction", [&] { return MeasureBiasCorrection(qopt); }));
  }
  QuantizedCandidate quantized;
  if (int4) {
    Int4Options o = r_.quantize.int4;
    o.layers = r_.quantize.layers;
    o.exclude_ops = r_.quantize.exclude_ops;
    o.threads = r_.evaluate.threads;
    const char* method = o.method == Int4Method::kGptq ? "gptq" : o.method == Int4Method::kAwq ? "awq" : "rtn";
    Log(std::string("quantize int4 weights (") + method + ", block " + std::to_string(o.block_size) +
        (o.symmetric ? ", symmetric, " : ", zero points, ") +
        (o.format == Int4Format::kQdq ? "DequantizeLinear" : "MatMulNBits") + ")" +
        (o.method == Int4Method::kRtn ? "" : " from the layers' inputs on " + r_.data.calibration));
    SPARQ_ASSIGN_OR_RETURN(quantized.model, Timed("quantize", [&] {
                             return o.method == Int4Method::kRtn
                                        ? QuantizeWeightsInt4(fp32_, o, &quantized.report)
                                        : QuantizeWeightsInt4(fp32_, o, calibration_(), &quantized.report);
                           }));
  } else {
    SPARQ_ASSIGN_OR_RETURN(quantized.model,
                           Timed("quantize", [&] { return QuantizeModel(fp32_, table, qopt, &quantized.report); }));
  }

  for (const auto& w : quantized.report.warnings) report_.warnings.push_back(w);
  if (!qopt.bias_correction.empty()) {
    Log("bias correction: " + std::to_string(quantized.report.bias_corrected) + " INT8 layer bias(es) corrected");
  }

  Log("evaluate");
  SPARQ_ASSIGN_OR_RETURN(quantized.eval,
                         Timed("evaluate output", [&] { return EvaluateModel(quantized.model, "evaluate output"); }));
  Judge(quantized.eval);

  // Accuracy-aware fallback: move the most harmful INT8 layers off INT8, keep the best attempt.
  const auto& fb = r_.quantize.fallback;
  if (!report_.passed && int8 && fb.enabled) {
    FallbackOptions f;
    f.to = fb.to;
    f.max_layers = fb.max_layers;
    using RankBy = RecipeQuantize::RankBy;
    f.ranking = fb.rank_by == RankBy::kSqnr     ? FallbackRanking::kLayerSqnr
                : fb.rank_by == RankBy::kMetric ? FallbackRanking::kMetricAlone
                                                : FallbackRanking::kOutputSqnrAlone;
    f.threads = r_.evaluate.threads;
    f.metric = r_.evaluate.metric;
    f.boxes = r_.evaluate.boxes;
    f.log = [this](const std::string& line) { Log(line); };
    auto passes = [&](const EvalReport& e) {
      Judge(e);
      return report_.passed;
    };
    SPARQ_ASSIGN_OR_RETURN(FallbackResult result, QuantizeWithFallback(fp32_, table, qopt, std::move(quantized),
                                                                       *evaluator_, passes, f));
    quantized = std::move(result.final);
    report_.fallback = std::move(result.steps);
    Judge(quantized.eval);
  }
  const Model& compressed = quantized.model;
  report_.layers = quantized.report.layers;
  NoteQuantizedLayers();
  SPARQ_RETURN_IF_ERROR(CheckFinite(compressed, quantized.eval));
  // The run's one model file.
  SPARQ_RETURN_IF_ERROR(WriteOutputModel(compressed));
  for (const auto& f : report_.fallback)
    for (auto& l : report_.layers)
      if (l.node == f.node && f.kept) {
        char buf[160];
        std::snprintf(buf, sizeof buf, "fallback: ranked by %s (%.2f%s)", f.ranked_by.c_str(), f.score,
                      f.ranked_by == "metric" ? "" : " dB");
        l.reason = buf;
      }
  report_.files.insert(report_.files.begin(), r_.output.model);
  if (r_.output.external_data) report_.files.insert(report_.files.begin() + 1, r_.output.model + ".data");
  // Sparsity is what pruning (or the file) left in the weights before
  // quantization: INT8 weights that round to zero are not pruned weights
  // (an unpruned INT8 model reported 9% of its weights zero).
  report_.weight_sparsity = WeightSparsity(fp32_);
  JudgePruneTarget(r_, prune_stop_, &report_);
  SPARQ_RETURN_IF_ERROR(SettleFailedModel(r_, &report_));  // a failed model must not look like a result
  model_written_ = false;
  SPARQ_RETURN_IF_ERROR(WriteReports());
  return report_;
}

// A model whose output holds NaN or Inf fails the gate (exit 1, reports
// written, so CI records the failure), with the first non-finite value named.
// Not an error (exit 2): the run itself worked, the written model is what is
// wrong, and the reports should say what broke it.
Status Runner::CheckFinite(const Model& m, const EvalReport& e) {
  bool finite = std::isfinite(report_.output_metric);
  for (const auto& c : e.comparisons) finite &= std::isfinite(c.max_abs_error) && !std::isnan(c.cosine);
  if (finite) return Status::OK();
  report_.passed = false;
  SPARQ_ASSIGN_OR_RETURN(report_.nonfinite, FirstNonFiniteTensor(m, evaluator_->data()(), r_.evaluate.threads));
  if (report_.nonfinite.empty()) report_.nonfinite = "the outputs only (no intermediate value of the reference kernels)";
  Log("the compressed model computes NaN/Inf: first at " + report_.nonfinite);
  return Status::OK();
}

Status Runner::WriteReports() {
  report_.peak_rss_mib = PeakRssMiB();
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
  auto report = runner.Run();
  // An error (or a cancel) after the model was written: no unjudged model stays.
  if (!report.ok() && runner.model_written_) {
    std::error_code ec;
    fs::remove(recipe.output.model, ec);
    if (recipe.output.external_data) fs::remove(recipe.output.model + ".data", ec);
  }
  // ... and no earlier run's reports stay behind as if they were this run's.
  // Only with output.overwrite: without it, reports of an earlier run stopped
  // this run before it began (CheckOutputsWritable) and are the user's to keep,
  // and none written now should block the next run.
  if (!report.ok() && recipe.output.overwrite) (void)WriteErrorReports(recipe, report.status());
  return report;
}

}  // namespace sparq
