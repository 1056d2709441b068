// The pruning stage of `sparq run` (internal): recipe -> PruneOptions ->
// PruneModel, with the evaluation set as the metric and the gate as the limit.
#pragma once

#include <functional>
#include <string>

#include "sparq/prune.h"
#include "sparq/recipe.h"

namespace sparq {

// structure auto's candidates for a target backend. The CPU's (PruneOptions'
// default) everywhere; on "cuda" with a kernel table, Blocked-ELL's blocks of
// 64 x 64 and 32 x 32 first (cuSPARSE's Blocked-ELL pays from about 80% block
// sparsity on an H200, issue 23), chosen only where the table's cuda rows
// (gpu_bench --speedups) measure them faster than dense. Without a table the
// candidates stay the CPU's: no data, no 64 x 64 blocks.
std::vector<PruneStructure> AutoCandidatesFor(const std::string& backend, bool have_kernel_table);

// Maps the recipe's prune section (validated by the parser) to options.
StatusOr<PruneOptions> ToPruneOptions(const Recipe& recipe);

// Evaluates a candidate model: its metric, and optionally its fidelity to the
// dense model; `acceptable` is decided by RunPruneStage. The pipeline supplies it.
using ModelMetricFn = std::function<StatusOr<PruneEvaluation>(const Model& model)>;

// Prunes `model`: per-layer sparsities from a sensitivity scan when the recipe
// has prune.sensitivity, then the schedule with recovery on `calibration`
// data, stopping before a step whose metric drop from `dense_metric` exceeds
// `max_drop`. Returns the pruned model and its report.
StatusOr<PruneResult> RunPruneStage(const Recipe& recipe, const Model& model, const BatchSource& calibration,
                                    const ModelMetricFn& metric, double dense_metric, double max_drop,
                                    const std::function<void(const std::string&)>& log);

}  // namespace sparq
