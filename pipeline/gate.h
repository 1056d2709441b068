// The honest gate of `sparq run` (internal to pipeline/): which backend
// evaluate.backend means here, the verdict from every limit the recipe sets,
// and what happens to the model file when the verdict is "failed".
#pragma once

#include <string>
#include <vector>

#include "sparq/evaluate.h"
#include "sparq/pipeline.h"
#include "sparq/recipe.h"

namespace sparq {

// evaluate.backend resolved on this machine.
struct BackendChoice {
  std::string name;    // "cpu" or "cuda"
  std::string reason;  // why (for `auto`): "no CUDA device found", ...
};

// kCpu -> cpu; kCuda -> cuda when this build has CUDA and a device is
// visible, else InvalidArgument saying which is missing; kAuto -> cuda when
// it could run, else cpu, with the reason.
StatusOr<BackendChoice> ResolveBackend(RecipeEvaluate::Backend backend);

// Fills report->drop, passed and gate_checks from the measured metrics:
// max_drop (unless the recipe turned it off) and every floor set. Expects
// report->fp32_metric, output_metric, sqnr_db, cosine and top1 to be set.
void JudgeGate(const RecipeEvaluate::Gate& gate, RunReport* report);

// Decimals of `metric`'s values and drops in gate messages and reports: 4
// for the cosines (limits like 0.01) and for relative drops, else 2.
int GateDigits(const std::string& metric, bool relative);

// Adds the prune check: a final sparsity below the requested one fails the
// gate (unless prune.allow_partial, then it is a warning). `stop_message`
// is the pruning loop's reason for stopping early ("" = it did not).
void JudgePruneTarget(const Recipe& recipe, const std::string& stop_message, RunReport* report);

// After a failed gate, the model at output.model must not look like a
// result: failed_model rename moves it (and its external data) to
// <stem>.FAILED.onnx, discard deletes it. Updates report->output_model and
// report->files. A passed run is left alone. Errors: IOError.
Status SettleFailedModel(const Recipe& recipe, RunReport* report);

// "<dir>/<stem>.FAILED.onnx" for output.model "<dir>/<stem>.onnx".
std::string FailedModelPath(const std::string& model_path);

}  // namespace sparq
