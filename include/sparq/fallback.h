// Accuracy-aware fallback: when a quantized model fails its gate, move the
// INT8 layer whose output suffers most off INT8 and quantize again, until the
// gate passes or enough layers were moved. Candidates are evaluated in memory
// by an Evaluator; nothing is written to disk.
//
//   quantized ─gate fails─> rank INT8 layers by output SQNR ─> worst layer to
//        ^                  (float model vs quantized, first batch)   fp16/fp32
//        └───────── evaluate <── quantize again with the new rule first ─┘
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "sparq/calibrate.h"
#include "sparq/evaluate.h"
#include "sparq/export.h"
#include "sparq/quantize.h"
#include "sparq/status.h"

namespace sparq {

// One INT8 layer's output fidelity.
struct SPARQ_API LayerSqnr {
  std::string node;
  double sqnr_db = 0.0;  // the float model's layer output vs the quantized model's
};

// Layer sensitivity: the SQNR of each INT8 layer's output (per `layers`, a
// QuantizeReport's) in `quantized` against the same value in `float_model`,
// both run on `batch`; lowest first. Layers whose output value is not in both
// graphs are left out. Errors: the executors'.
SPARQ_API StatusOr<std::vector<LayerSqnr>> LayerOutputSqnr(const Model& float_model, const Model& quantized,
                                                 const std::vector<LayerDecision>& layers, const TensorMap& batch,
                                                 int threads = 0);

struct SPARQ_API FallbackOptions {
  Precision to = Precision::kFP32;  // where a layer goes: kFP16 or kFP32
  int max_layers = 8;               // layers moved at most, >= 1
  int threads = 0;                  // executor threads of the layer SQNR runs; 0 = all
  Metric metric = Metric::kTop1;    // the value recorded in FallbackStep::metric_after
  std::function<void(const std::string&)> log;  // optional: one line per layer moved
};

// One layer moved off INT8.
struct SPARQ_API FallbackStep {
  std::string node;
  std::string to;          // "fp16" or "fp32"
  double sqnr_db = 0.0;    // the layer output's SQNR that ranked it
  double metric_after = 0.0;
};

// A quantized model with what made it and how it scored.
struct SPARQ_API QuantizedCandidate {
  Model model;
  QuantizeReport report;
  EvalReport eval;
};

struct SPARQ_API FallbackResult {
  QuantizedCandidate final;        // the last model tried
  QuantizeOptions options;         // the options that made it (fallback rules first)
  std::vector<FallbackStep> steps;
  bool passed = false;             // `passes` accepted final.eval
};

// Starting from `start` (quantized from `float_model` with `options`), moves
// the lowest-SQNR INT8 layer to `fallback.to` and quantizes again until
// `passes` accepts the evaluation, `fallback.max_layers` layers were moved, or
// no INT8 layer is left. The SQNR ranking uses the evaluator's first batch.
// Errors: those of QuantizeModel, LayerOutputSqnr and the evaluator.
SPARQ_API StatusOr<FallbackResult> QuantizeWithFallback(const Model& float_model, const CalibrationTable& table,
                                              const QuantizeOptions& options, QuantizedCandidate start,
                                              Evaluator& evaluator,
                                              const std::function<bool(const EvalReport&)>& passes,
                                              const FallbackOptions& fallback);

}  // namespace sparq
