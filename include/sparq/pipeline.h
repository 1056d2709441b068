// `sparq run`: a recipe in, a compressed model and a verdict out.
//
//   load ─> (prune) ─> calibrate ─> quantize ─> write ─> evaluate FP32 and
//   compressed ─> gate ─(fails and fallback on)─> move the most harmful INT8
//   layer to FP16/FP32, quantize again, evaluate again ... (keep the best)
//
// The library does everything `sparq run` does; the CLI only prints.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "sparq/export.h"
#include "sparq/fallback.h"  // FallbackStep
#include "sparq/quantize.h"
#include "sparq/recipe.h"
#include "sparq/search.h"  // SearchRow
#include "sparq/status.h"

namespace sparq {

// Progress of the current stage, for progress bars.
struct SPARQ_API StageProgress {
  std::string stage;   // "calibrate", "evaluate fp32", ...
  int64_t done = 0;    // samples done in this stage (calibrate and evaluate stages alike)
  int64_t total = -1;  // samples the stage will do; -1 when not known
  // Set to true in the callback to stop the run at the next batch: RunRecipe
  // returns StatusCode::kCancelled naming the stage.
  bool cancel = false;
};

struct SPARQ_API PipelineOptions {
  // Optional; called on the running thread after each batch of calibration
  // and evaluation. A callback taking `const StageProgress&` fits too.
  std::function<void(StageProgress&)> on_progress;
  std::function<void(const std::string&)> on_log;         // optional: one line per event
};

// One step of progressive pruning.
struct SPARQ_API PruneStepLine {
  int step = 0;
  double target = 0.0, sparsity = 0.0;
  double metric_masked = 0.0;  // before recovery
  double metric = 0.0;         // after recovery
  // Output of the pruned FP32 model against the dense one, before and after
  // recovery: SQNR in dB and top-1 agreement in percent (NaN: not measured).
  double sqnr_masked_db = 0.0, sqnr_db = 0.0;
  double agreement_masked = 0.0, agreement = 0.0;
  bool acceptable = true;
  bool recovery = true;  // false: the recipe turned recovery off (both columns are the pruned model)
  // prune.retrain ran after the step's masks: pruned weights its model had
  // made non-zero (set back to 0), and the hook's time.
  bool retrained = false;
  int64_t retrain_rezeroed = 0;
  double retrain_seconds = 0.0;
};

// One limit of the gate and how the compressed model fared against it.
struct SPARQ_API GateCheck {
  std::string metric;     // "top1", "sqnr", "cosine", "sparsity", ...: what was measured
  std::string limit_key;  // evaluate.gate key: "max_drop", "min_sqnr_db", ...
  double value = 0.0;     // the drop for max_drop, else the measured value
  double limit = 0.0;
  bool passed = false;
  std::string text;       // "sqnr 38.21 dB < min_sqnr_db 40.00 dB"
};

struct SPARQ_API RunReport {
  std::string recipe;         // recipe file
  std::string name;
  std::string model;          // input model
  std::string output_model;   // written model
  std::vector<std::string> files;  // every file written
  // Bytes of the input model file (plus its weights when they are in external
  // data beside it) and of the written model (plus its .data file).
  int64_t fp32_bytes = 0, output_bytes = 0;
  double weight_sparsity = 0.0;      // fraction of exact zeros in the weights before quantization (pruned ones)
  std::string metric;                // "top1", ...
  double fp32_metric = 0.0, output_metric = 0.0;
  double drop = 0.0;                 // fp32_metric - output_metric (points, or a fraction when relative); NaN when max_drop is off
  double max_drop = 0.0;
  bool relative = false;
  bool passed = false;
  // Set when the compressed model's evaluation produced NaN or +-Inf: the
  // first non-finite value in execution order ("tensor 'x' (output of ...)").
  // Such a model fails the gate whatever its metric.
  std::string nonfinite;
  double top1_agreement = 0.0;       // % of samples with the FP32 model's argmax
  double sqnr_db = 0.0;              // output 0 against FP32, dB (+inf when identical)
  double cosine = 0.0;               // output 0 against FP32
  double top1 = 0.0;                 // % of samples with the label as argmax; NaN without labels
  std::vector<GateCheck> gate_checks;  // every limit checked; passed = all passed
  std::string backend;               // evaluate.backend as resolved ("cpu", "cuda")
  int64_t eval_samples = 0;
  std::vector<LayerDecision> layers;  // final precision of each weighted layer
  // Layers the written model computes below FP32 (INT8, FP8, INT4 or FP16).
  int64_t quantized_layers = 0;
  // Set when the recipe asked for quantization and no layer was quantized:
  // why ("the model's 12 Conv/Gemm/MatMul layers are inside If/Loop/Scan
  // subgraphs ..."). Also a warning. The gate still judges accuracy only: the
  // written model is correct, merely not compressed (recipes/README.md).
  std::string nothing_quantized;
  // If nodes folded before any stage because data.constants decided their
  // condition (runtime/passes/if_folding.h), one line each, and the pinned
  // inputs the written model therefore no longer has.
  std::vector<std::string> folded_ifs;
  std::vector<std::string> inputs_removed;
  std::vector<FallbackStep> fallback;
  // quantize.search: every candidate, its held-out score and time; the one
  // chosen is marked. Empty when the run did not search.
  std::vector<SearchRow> search;
  bool pruned = false;
  std::string prune_text;              // PruneReport::ToText(): plan, steps, final sparsity per layer
  std::vector<PruneStepLine> prune_steps;
  std::vector<std::string> warnings;
  std::vector<std::pair<std::string, double>> stage_seconds;
  // The run's peak resident memory in MiB (PeakRssMiB, sparq/memory.h), read
  // as the reports are written; 0 when unknown. docs/scale.md: its bound.
  double peak_rss_mib = 0.0;

  std::string ToJson() const;
  std::string ToJUnit() const;     // one test case for the gate
  std::string ToMarkdown() const;
  std::string ToText() const;      // the final table `sparq run` prints
};

// Runs the recipe. Errors (bad data, unsupported model, unwritable outputs)
// are returned as a Status; a failed gate is not an error: check
// report.passed. Outputs are written atomically; the input model is never
// written to.
SPARQ_API StatusOr<RunReport> RunRecipe(const Recipe& recipe, const PipelineOptions& options = {});

// Checks what a recipe asks of a particular model, before any work: with
// pruning enabled, that every prune.layers rule matches a weighted layer and
// fits the layers it names. Errors (all together) name the recipe file, the
// line and the key: InvalidArgument, or NotFound for rules that match nothing.
SPARQ_API Status CheckRecipeAgainstModel(const Recipe& recipe, const Model& model);

}  // namespace sparq
