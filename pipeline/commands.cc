#include "sparq/commands.h"

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "pipeline/pinned_ifs.h"
#include "pipeline/provenance.h"
#include "sparq/executor.h"
#include "sparq/file_io.h"
#include "sparq/onnx_io.h"
#include "sparq/quantize.h"
#include "sparq/version.h"

namespace sparq {
namespace {

// The model a file command reads its data for, after checking the options
// they share; `d` gets the batch size and the sample limit.
StatusOr<Model> LoadModelForData(const std::string& path, int64_t batch_size, int64_t samples, DatasetOptions* d) {
  if (batch_size < 1) return Status::InvalidArgument("batch_size must be >= 1, got " + std::to_string(batch_size));
  if (samples < 0) return Status::InvalidArgument("samples must be >= 0, got " + std::to_string(samples));
  SPARQ_ASSIGN_OR_RETURN(Model model, LoadModel(path));
  if (model.graph.inputs.empty()) return Status::InvalidArgument(path + ": the model has no inputs");
  d->batch_size = batch_size;
  d->limit = samples;
  return model;
}

}  // namespace

namespace {

// What CalibrateFiles and CalibrateShardFiles share: the model, its data and
// the calibration options (int8_only's tensors, the progress total).
struct CalibrationInputs {
  Model model;  // as loaded, with the Ifs the constants decide folded (as `sparq run` folds them)
  PinnedValues folded_inputs;  // the constants that folded an If: recorded in the table
  BatchSource data;
  CalibrationOptions calibration;
};

StatusOr<CalibrationInputs> OpenCalibration(const CalibrateFilesOptions& options) {
  DatasetOptions d;
  CalibrationInputs in;
  SPARQ_ASSIGN_OR_RETURN(in.model, LoadModelForData(options.model, options.batch_size, options.samples, &d));
  SPARQ_ASSIGN_OR_RETURN(PinnedFold fold, FoldPinnedIfs(&in.model, options.constants, "--constant"));
  d.constants = options.constants;
  for (const auto& [name, values] : fold.inputs_removed) d.constants.erase(name);
  in.folded_inputs = std::move(fold.inputs_removed);
  SPARQ_ASSIGN_OR_RETURN(in.data, OpenDataset(options.data, in.model.graph, d));
  CalibrationOptions& c = in.calibration;
  c = options.calibration;
  if (options.int8_only && c.tensors.empty()) {
    if (!options.trt_cache.empty()) {
      return Status::InvalidArgument("int8_only (--int8-only) observes only the tensors INT8 quantization needs, and a "
                                     "TensorRT cache (trt_cache, --trt-cache) needs every tensor: leave one of them out");
    }
    SPARQ_ASSIGN_OR_RETURN(std::vector<CalibrationNeed> needs, CalibrationTensorsNeeded(in.model, QuantizeOptions{}));
    for (const auto& n : needs) c.tensors.push_back(n.tensor);
    if (c.tensors.empty()) return Status::InvalidArgument(options.model + ": INT8 quantization needs no tensor (no Conv, Gemm or MatMul with weights)");
  }
  return in;
}

// Writes the table and, when asked, the TensorRT cache; the cache is checked
// before anything is written.
Status WriteTable(const CalibrationTable& table, const std::string& output, const std::string& trt_cache,
                  const std::string& trt_version) {
  if (!trt_cache.empty()) SPARQ_RETURN_IF_ERROR(table.CheckTensorRtCache().WithContext("trt_cache"));
  SPARQ_RETURN_IF_ERROR(table.Save(output));
  if (!trt_cache.empty()) SPARQ_RETURN_IF_ERROR(WriteFileAtomically(trt_cache, table.ToTensorRtCache(trt_version)));
  return Status::OK();
}

void ReportTotal(CalibrationOptions* c, int64_t total) {
  if (!c->progress) return;
  c->progress = [user = c->progress, total](CalibrationProgress& p) {
    p.total_samples = total;
    user(p);
  };
}

}  // namespace

StatusOr<CalibrationTable> CalibrateFiles(const CalibrateFilesOptions& options) {
  SPARQ_ASSIGN_OR_RETURN(CalibrationInputs in, OpenCalibration(options));
  ReportTotal(&in.calibration, in.data.samples());
  SPARQ_ASSIGN_OR_RETURN(CalibrationTable table, Calibrate(in.model, in.data(), in.calibration));
  table.folded_inputs = in.folded_inputs;
  SPARQ_RETURN_IF_ERROR(WriteTable(table, options.output, options.trt_cache, options.trt_version));
  return table;
}

StatusOr<PartialCalibration> CalibrateShardFiles(const CalibrateFilesOptions& options) {
  if (!options.trt_cache.empty()) {
    return Status::InvalidArgument("a shard writes partial statistics; the TensorRT cache (trt_cache, --trt-cache) is "
                                   "written by the merge (sparq calibrate --merge ... --trt-cache)");
  }
  if (options.calibration.method == CalibrationMethod::kAuto) {
    return Status::InvalidArgument("method auto cannot be sharded (it reruns each tensor's consumers on the first batch "
                                   "of all the data to compare its candidates): calibrate auto in one process, or "
                                   "shard max, kl, percentile or mse");
  }
  SPARQ_ASSIGN_OR_RETURN(CalibrationInputs in, OpenCalibration(options));
  SPARQ_ASSIGN_OR_RETURN(BatchSource shard, ShardOf(in.data, options.shard, options.shards));
  ReportTotal(&in.calibration, shard.samples());
  SPARQ_ASSIGN_OR_RETURN(std::string model_bytes, ReadFile(options.model));
  SPARQ_ASSIGN_OR_RETURN(PartialCalibration partial, CalibrateShard(in.model, shard(), in.calibration));
  partial.model_id = "fnv1a64:" + Fnv1a64Hex(model_bytes);
  partial.data_samples = in.data.samples();
  partial.batch_size = in.data.batch_size();
  partial.shards = options.shards;
  partial.shard_ids = {options.shard};
  partial.folded_inputs = in.folded_inputs;
  SPARQ_RETURN_IF_ERROR(partial.Save(options.output));
  return partial;
}

StatusOr<CalibrationTable> MergeCalibrationFiles(const MergeCalibrationFilesOptions& options) {
  if (options.output.empty()) return Status::InvalidArgument("output path is empty");
  std::vector<PartialCalibration> parts;
  for (const std::string& path : options.parts) {
    if (path == options.output || path == options.trt_cache) {
      return Status::InvalidArgument("output " + path + " is one of the parts: sparq never overwrites them");
    }
    SPARQ_ASSIGN_OR_RETURN(PartialCalibration p, PartialCalibration::Load(path));
    parts.push_back(std::move(p));
  }
  SPARQ_ASSIGN_OR_RETURN(PartialCalibration merged, MergePartials(parts));
  SPARQ_ASSIGN_OR_RETURN(CalibrationTable table, FinishCalibration(merged, options.threads));
  SPARQ_RETURN_IF_ERROR(WriteTable(table, options.output, options.trt_cache, options.trt_version));
  return table;
}

namespace {

// QuantizeFiles' model: loaded, checked, and folded by the pinned inputs
// (options.constants) as CalibrateFiles and `sparq run` fold it. Quantizing
// reads no data (but for GPTQ / AWQ / AdaRound), so a constant that folds no
// If would change nothing: an error rather than a flag silently ignored. The
// rest pin the data's inputs (`d`).
StatusOr<Model> LoadQuantizeModel(const QuantizeFilesOptions& options, bool reads_data, DatasetOptions* d,
                                  QuantizeFilesResult* result) {
  SPARQ_ASSIGN_OR_RETURN(Model model, reads_data
                                          ? LoadModelForData(options.model, options.batch_size, options.samples, d)
                                          : LoadModel(options.model));
  SPARQ_RETURN_IF_ERROR(CheckSupported(model));
  SPARQ_ASSIGN_OR_RETURN(PinnedFold fold, FoldPinnedIfs(&model, options.constants, "--constant"));
  d->constants = options.constants;
  for (const auto& [name, values] : fold.inputs_removed) d->constants.erase(name);
  if (!reads_data && !d->constants.empty()) {
    const auto& [name, values] = *d->constants.begin();
    return Status::InvalidArgument(
        "--constant " + PinnedSpec(name, values) + ": no If of the model is decided by input '" + name +
        "' (its condition also reads a run input or a shape, or no If reads it), and quantizing reads no data, so "
        "pinning it changes nothing: leave it out");
  }
  result->folded_ifs = std::move(fold.folded);
  result->folded_inputs = std::move(fold.inputs_removed);
  result->report.warnings = std::move(fold.removed_lines);
  return model;
}

// QuantizeFiles with int4: the weights only, no table.
StatusOr<QuantizeFilesResult> QuantizeInt4Files(const QuantizeFilesOptions& options) {
  if (!options.scales.empty()) return Status::InvalidArgument("int4 quantizes weights only: no scales (calibration table)");
  const bool needs_data = options.int4_options.method != Int4Method::kRtn;
  if (needs_data && options.data.empty())
    return Status::InvalidArgument("int4 method gptq / awq needs data (the layers' inputs; --data)");
  if (!needs_data && !options.data.empty())
    return Status::InvalidArgument("int4 method rtn reads no data: leave data (--data) out");
  DatasetOptions d;
  QuantizeFilesResult result;
  SPARQ_ASSIGN_OR_RETURN(Model model, LoadQuantizeModel(options, needs_data, &d, &result));
  result.output = options.output;
  result.calibration = "none";
  const std::vector<std::string> fold_warnings = std::move(result.report.warnings);
  Model quantized;
  if (needs_data) {
    SPARQ_ASSIGN_OR_RETURN(BatchSource data, OpenDataset(options.data, model.graph, d));
    SPARQ_ASSIGN_OR_RETURN(quantized, QuantizeWeightsInt4(model, options.int4_options, data(), &result.report));
  } else {
    SPARQ_ASSIGN_OR_RETURN(quantized, QuantizeWeightsInt4(model, options.int4_options, &result.report));
  }
  result.report.warnings.insert(result.report.warnings.begin(), fold_warnings.begin(), fold_warnings.end());
  quantized.producer_name = "sparq";
  quantized.producer_version = Version();
  SetMetadataProp("sparq.calibration_method", "none", &quantized);
  SaveOptions save;
  save.external_data = options.external_data;
  SPARQ_RETURN_IF_ERROR(SaveModel(quantized, options.output, save));
  return result;
}

}  // namespace

StatusOr<QuantizeFilesResult> QuantizeFiles(const QuantizeFilesOptions& options) {
  for (const auto& [name, path] : {std::pair<const char*, const std::string&>{"model", options.model},
                                   {"scales", options.scales}, {"output", options.output}}) {
    if (path.empty() && !(options.int4 && std::string(name) == "scales"))
      return Status::InvalidArgument(std::string(name) + " path is empty");
  }
  std::error_code ec;
  if (options.output == options.model ||
      (std::filesystem::exists(options.output, ec) && std::filesystem::equivalent(options.output, options.model, ec))) {
    return Status::InvalidArgument("output " + options.output + " is the input model: sparq never overwrites it");
  }
  if (options.output == options.scales ||
      (std::filesystem::exists(options.output, ec) && std::filesystem::equivalent(options.output, options.scales, ec))) {
    return Status::InvalidArgument("output " + options.output + " is the calibration table: sparq never overwrites it");
  }
  if (options.int4) return QuantizeInt4Files(options);
  if (options.adaround && options.data.empty())
    return Status::InvalidArgument("adaround rounding needs data (the layers' inputs; --data)");
  DatasetOptions d;
  QuantizeFilesResult result;
  SPARQ_ASSIGN_OR_RETURN(Model model, LoadQuantizeModel(options, options.adaround, &d, &result));
  auto table = CalibrationTable::Load(options.scales);
  if (!table.ok()) return table.status().WithContext("scales " + options.scales);
  SPARQ_RETURN_IF_ERROR(CheckFoldedInputs(*table, result.folded_inputs, "scales " + options.scales, "--constant"));
  result.output = options.output;
  result.scales = options.scales;
  result.calibration = table->method;
  const QuantizeOptions& q = options.quantize;
  bool int8 = q.precision == Precision::kINT8;
  for (const auto& rule : q.layers) int8 |= rule.precision == Precision::kINT8;
  if (int8) {
    SPARQ_ASSIGN_OR_RETURN(result.opset_upgrade, UpgradeOpsetForInt8(model, q));
  }
  std::vector<std::string> check_warnings = std::move(result.report.warnings);  // the fold's, then the check's
  SPARQ_RETURN_IF_ERROR(
      CheckCalibrationTable(model, *table, q, &check_warnings).WithContext("scales " + options.scales));
  result.report.warnings.clear();
  QuantizeOptions rounded = q;
  if (options.adaround) {
    SPARQ_ASSIGN_OR_RETURN(BatchSource data, OpenDataset(options.data, model.graph, d));
    auto measured = MeasureAdaRound(model, data(), q, options.adaround_options);
    if (!measured.ok()) return measured.status().WithContext("adaround on " + options.data);
    rounded.rounded_weights = std::move(measured->weights);
  }
  SPARQ_ASSIGN_OR_RETURN(Model quantized, QuantizeModel(model, *table, rounded, &result.report));
  result.report.warnings.insert(result.report.warnings.begin(), check_warnings.begin(), check_warnings.end());
  // A file that is the float model again says so (as sparq run's reports do).
  if (std::none_of(result.report.layers.begin(), result.report.layers.end(),
                   [](const LayerDecision& l) { return l.precision != Precision::kFP32; })) {
    result.report.warnings.push_back(
        std::string("nothing was quantized (int8 layers: 0): ") +
        (result.report.layers.empty() ? "the outer graph has no Conv, Gemm or MatMul layer with a constant weight"
                                      : "every layer stayed float (their reasons in the layer list)") +
        "; the written model is float");
  }
  quantized.producer_name = "sparq";
  quantized.producer_version = Version();
  SetMetadataProp("sparq.calibration_method", int8 && !q.dynamic ? table->method : "none", &quantized);
  SaveOptions save;
  save.external_data = options.external_data;
  SPARQ_RETURN_IF_ERROR(SaveModel(quantized, options.output, save));
  return result;
}

std::string QuantizeFilesResult::ToJson() const {
  nlohmann::json j;
  j["schema_version"] = kJsonSchemaVersion;
  j["sparq_version"] = Version();
  j["output"] = output;
  j["scales"] = scales;
  j["calibration_method"] = calibration;
  j["opset_upgrade"] = opset_upgrade;
  if (!folded_ifs.empty()) j["folded_ifs"] = folded_ifs;
  j["warnings"] = report.warnings;
  j["layers"] = nlohmann::json::array();
  for (const auto& l : report.layers) {
    j["layers"].push_back(
        {{"node", l.node}, {"op_type", l.op_type}, {"precision", PrecisionName(l.precision)}, {"reason", l.reason}});
  }
  return j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

StatusOr<SensitivityFilesResult> SensitivityFiles(const SensitivityFilesOptions& options) {
  if (options.metric == Metric::kTop1 && options.labels.empty()) {
    return Status::InvalidArgument("metric top1 needs labels");
  }
  if (options.metric != Metric::kTop1 && options.metric != Metric::kAgreement && options.metric != Metric::kSqnr) {
    return Status::InvalidArgument(std::string("metric must be top1, agreement or sqnr, got ") +
                                   MetricName(options.metric));
  }
  DatasetOptions d;
  SPARQ_ASSIGN_OR_RETURN(Model model, LoadModelForData(options.model, options.batch_size, options.samples, &d));
  SPARQ_ASSIGN_OR_RETURN(BatchSource data, OpenDataset(options.data, model.graph, d));
  SPARQ_ASSIGN_OR_RETURN(BatchSource eval, OpenDataset(options.eval.empty() ? options.data : options.eval, model.graph, d));
  EvaluatorOptions e;
  e.threads = options.sensitivity.threads;
  std::unique_ptr<Evaluator> evaluator;
  if (options.metric == Metric::kTop1) {
    // Labels alone judge: no reference pass needed.
    e.labels = options.labels;
    SPARQ_ASSIGN_OR_RETURN(evaluator, Evaluator::Create(std::move(eval), e));
  } else {
    SPARQ_ASSIGN_OR_RETURN(evaluator, Evaluator::Create(model, std::move(eval), e));
  }
  SensitivityFilesResult result;
  PruneMetricFn judge = [&](const Model& m) -> StatusOr<PruneEvaluation> {
    SPARQ_ASSIGN_OR_RETURN(EvalReport r, evaluator->Evaluate(m));
    PruneEvaluation out;
    out.metric = MetricValue(options.metric, r);
    ++result.candidates;
    return out;
  };
  SPARQ_ASSIGN_OR_RETURN(result.table, SensitivityAnalysis(model, options.sensitivity, data, judge));
  return result;
}

}  // namespace sparq
