#include "sparq/commands.h"

#include "sparq/file_io.h"
#include "sparq/onnx_io.h"

namespace sparq {

StatusOr<CalibrationTable> CalibrateFiles(const CalibrateFilesOptions& options) {
  if (options.batch_size < 1) {
    return Status::InvalidArgument("batch_size must be >= 1, got " + std::to_string(options.batch_size));
  }
  if (options.samples < 0) return Status::InvalidArgument("samples must be >= 0, got " + std::to_string(options.samples));
  SPARQ_ASSIGN_OR_RETURN(Model model, LoadModel(options.model));
  if (model.graph.inputs.empty()) return Status::InvalidArgument(options.model + ": the model has no inputs");
  DatasetOptions d;
  d.batch_size = options.batch_size;
  d.limit = options.samples;
  SPARQ_ASSIGN_OR_RETURN(BatchSource data, OpenDataset(options.data, model.graph, d));
  SPARQ_ASSIGN_OR_RETURN(CalibrationTable table, Calibrate(model, data(), options.calibration));
  // Refused before anything is written: a method without a TensorRT calibrator, or zero points.
  if (!options.trt_cache.empty()) SPARQ_RETURN_IF_ERROR(table.CheckTensorRtCache().WithContext("trt_cache"));
  SPARQ_RETURN_IF_ERROR(table.Save(options.output));
  if (!options.trt_cache.empty()) {
    SPARQ_RETURN_IF_ERROR(WriteFileAtomically(options.trt_cache, table.ToTensorRtCache(options.trt_version)));
  }
  return table;
}

StatusOr<SensitivityFilesResult> SensitivityFiles(const SensitivityFilesOptions& options) {
  if (options.metric == Metric::kTop1 && options.labels.empty()) {
    return Status::InvalidArgument("metric top1 needs labels");
  }
  if (options.metric != Metric::kTop1 && options.metric != Metric::kAgreement && options.metric != Metric::kSqnr) {
    return Status::InvalidArgument(std::string("metric must be top1, agreement or sqnr, got ") +
                                   MetricName(options.metric));
  }
  if (options.batch_size < 1) {
    return Status::InvalidArgument("batch_size must be >= 1, got " + std::to_string(options.batch_size));
  }
  SPARQ_ASSIGN_OR_RETURN(Model model, LoadModel(options.model));
  if (model.graph.inputs.empty()) return Status::InvalidArgument(options.model + ": the model has no inputs");
  DatasetOptions d;
  d.batch_size = options.batch_size;
  d.limit = options.samples;
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
