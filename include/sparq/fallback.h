// Accuracy-aware fallback: when a quantized model fails its gate, find the
// INT8 layers that do the most harm and keep them off INT8. By default each
// layer is ranked by what it does alone: the model quantized with only that
// layer in INT8 (the rest float) is run on the first batch and its outputs
// compared with the float model's. The culprits then move to FP16/FP32, one
// more per attempt; the best attempt is kept (the first that passes the gate,
// else the one with the best metric), not the last. Candidates are evaluated
// in memory by an Evaluator; nothing is written to disk.
//
//   quantized ─gate fails─> rank the INT8 layers (FallbackRanking) ─┐
//        ┌──────────────────────────────────────────────────────────┘
//        v
//   next culprit to fp16/fp32 ─> quantize ─> evaluate ─> passes? stop : keep if best, repeat
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

// One INT8 layer's fidelity: of its own output (LayerOutputSqnr) or of the
// model's outputs with it alone in INT8 (LayerAloneOutputSqnr).
struct SPARQ_API LayerSqnr {
  std::string node;
  double sqnr_db = 0.0;  // float vs quantized, dB
};

// Layer sensitivity: the SQNR of each INT8 layer's output (per `layers`, a
// QuantizeReport's) in `quantized` against the same value in `float_model`,
// both run on `batch`; lowest first. Layers whose output value is not in both
// graphs are left out. Errors: the executors'.
SPARQ_API StatusOr<std::vector<LayerSqnr>> LayerOutputSqnr(const Model& float_model, const Model& quantized,
                                                 const std::vector<LayerDecision>& layers, const TensorMap& batch,
                                                 int threads = 0);

// Culprit ranking: for each INT8 layer of `layers` (a QuantizeReport's),
// `float_model` is quantized with `table` and `options` plus rules keeping
// every other INT8 layer in FP32, run on `batch`, and the SQNR of all its
// float graph outputs against the float model's is that layer's score;
// lowest (most harmful) first, ties in `layers` order. Costs one quantization
// and one run of the batch per INT8 layer. Errors: QuantizeModel's and the
// executors'.
SPARQ_API StatusOr<std::vector<LayerSqnr>> LayerAloneOutputSqnr(const Model& float_model,
                                                                const CalibrationTable& table,
                                                                const QuantizeOptions& options,
                                                                const std::vector<LayerDecision>& layers,
                                                                const TensorMap& batch, int threads = 0);

// LayerAloneOutputSqnr scoring the class-score rows (4 onwards) of the
// outputs that decode as detections by `boxes` (its `enabled` is implied)
// instead of every output element: a detector's box coordinates (pixels)
// dominate its output's SQNR, while its class scores decide which boxes
// cross the score threshold. A model with no such output is scored as by
// LayerAloneOutputSqnr. Errors: as LayerAloneOutputSqnr's.
SPARQ_API StatusOr<std::vector<LayerSqnr>> LayerAloneClassScoreSqnr(const Model& float_model,
                                                                    const CalibrationTable& table,
                                                                    const QuantizeOptions& options,
                                                                    const std::vector<LayerDecision>& layers,
                                                                    const TensorMap& batch, const BoxOptions& boxes,
                                                                    int threads = 0);

// How the fallback orders the INT8 layers, most harmful first.
enum class FallbackRanking {
  // The layer's own output SQNR in the quantized model (first batch), ranked
  // again after each move. Cheap, but a layer after a broken one scores low
  // too: it can pick victims rather than the culprit.
  kLayerSqnr,
  // The model's output SQNR with the layer alone in INT8 (first batch): one
  // quantization and one batch per INT8 layer, ranked once (the default).
  // With FallbackOptions::boxes enabled, the SQNR of the class-score rows
  // (LayerAloneClassScoreSqnr).
  kOutputSqnrAlone,
  // FallbackOptions::metric over the whole evaluation data with the layer
  // alone in INT8: one evaluation per INT8 layer, ranked once.
  kMetricAlone,
};
SPARQ_API const char* FallbackRankingName(FallbackRanking r);  // "sqnr", "output_sqnr", "metric"

struct SPARQ_API FallbackOptions {
  FallbackRanking ranking = FallbackRanking::kOutputSqnrAlone;
  Precision to = Precision::kFP32;  // where a layer goes: kFP16 or kFP32
  // Layers moved at most, >= 1; 0 (the default) = kAutoMaxLayers: half the
  // model's INT8 layers, at least 8 (FallbackLayerLimit).
  int max_layers = 0;
  int threads = 0;                  // executor threads of the layer SQNR runs; 0 = all
  // The value recorded in FallbackStep::metric_after, and what picks the kept
  // attempt when none passes (higher is better).
  Metric metric = Metric::kTop1;
  // Box decoding of the detector metrics (the recipe's evaluate.boxes);
  // enabled: kOutputSqnrAlone ranks by the class-score rows' SQNR.
  BoxOptions boxes;
  std::function<void(const std::string&)> log;  // optional: one line per layer moved
};

// The fallback's limit for a model of `int8_layers` INT8 layers:
// `max_layers` when >= 1, else max(8, ceil(int8_layers / 2)): past half its
// layers a model is no longer an INT8 model, and a gate that fails there
// says so rather than returning a float model.
SPARQ_API int FallbackLayerLimit(int max_layers, int int8_layers);

// One layer moved off INT8.
struct SPARQ_API FallbackStep {
  std::string node;
  std::string to;          // "fp16" or "fp32"
  std::string ranked_by;   // FallbackRankingName of the ranking
  double score = 0.0;      // what ranked it: an SQNR in dB ("sqnr", "output_sqnr"), or the metric ("metric")
  double metric_after = 0.0;  // the metric of the attempt that moved it (and the layers before)
  bool kept = false;       // the returned model has it moved (steps after the best attempt do not)
};

// A quantized model with what made it and how it scored.
struct SPARQ_API QuantizedCandidate {
  Model model;
  QuantizeReport report;
  EvalReport eval;
};

struct SPARQ_API FallbackResult {
  QuantizedCandidate final;        // the best model tried (`start` when no attempt beat it)
  QuantizeOptions options;         // the options that made it (fallback rules first)
  std::vector<FallbackStep> steps;  // every attempt, in order; `kept` marks those in `final`
  bool passed = false;             // `passes` accepted final.eval
};

// Starting from `start` (quantized from `float_model` with `options`, failing
// `passes`), orders the INT8 layers by `fallback.ranking` (on the evaluator's
// first batch, its first 8 samples where the model's batch size is free; on
// the whole data for kMetricAlone), then moves the next layer
// to `fallback.to` per attempt, quantizing and evaluating again, until
// `passes` accepts an attempt or `fallback.max_layers` layers were moved.
// Returns the first passing attempt, else the one with the highest
// `fallback.metric` (`start` when none beat it). Errors: those of
// QuantizeModel, the ranking and the evaluator.
SPARQ_API StatusOr<FallbackResult> QuantizeWithFallback(const Model& float_model, const CalibrationTable& table,
                                              const QuantizeOptions& options, QuantizedCandidate start,
                                              Evaluator& evaluator,
                                              const std::function<bool(const EvalReport&)>& passes,
                                              const FallbackOptions& fallback);

}  // namespace sparq
