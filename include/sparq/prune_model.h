// The progressive pruning loop: PruneModel, its metric callback and its
// report.
#pragma once

#include <functional>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "sparq/export.h"
#include "sparq/graph.h"
#include "sparq/prune_channels.h"
#include "sparq/prune_options.h"
#include "sparq/prune_recovery.h"
#include "sparq/status.h"

namespace sparq {

// A metric of a candidate model (higher is better: accuracy, agreement,
// SQNR, ...) and whether the quality gate would still pass with it.
struct SPARQ_API PruneEvaluation {
  double metric = 0.0;
  bool acceptable = true;  // false: the gate would fail; PruneModel stops
  std::string note;        // why (shown in the report), optional
  // Optional, NaN when not measured: how closely the candidate reproduces the
  // dense model's output (SQNR of output 0 in dB, top-1 agreement in percent).
  // A label metric on a small evaluation set moves by a sample or two either
  // way; these show what recovery does to the layer outputs it re-fits.
  double sqnr_db = std::numeric_limits<double>::quiet_NaN();
  double agreement = std::numeric_limits<double>::quiet_NaN();
};
using PruneMetricFn = std::function<StatusOr<PruneEvaluation>(const Model& model)>;

struct SPARQ_API PruneStepReport {
  int step = 0;                   // 1-based
  double target = 0.0;            // the schedule's sparsity for the default target
  double sparsity = 0.0;          // achieved over the pruned layers' weights
  std::map<std::string, double> layer_sparsity;  // by node
  bool evaluated = false;         // a metric callback was given
  // With recovery, "masked" is the same schedule run without recovery (a
  // model pruned alongside, never re-fitted): the report's comparison.
  // Without recovery both are the pruned model's.
  double metric_masked = 0.0;     // without recovery
  double metric = 0.0;            // with recovery
  PruneEvaluation masked;         // the whole evaluation without recovery
  PruneEvaluation recovered;      // and with it
  bool acceptable = true;
  std::string note;               // the callback's note
  ModelRecoveryReport recovery;   // empty without recovery
  // Block reconstruction (PruneOptions::reconstruction): blocks fitted (the
  // fit kept), blocks left to least squares, and its time.
  int reconstructed_blocks = 0;
  int reconstruction_skipped = 0;
  double reconstruction_seconds = 0.0;
  // PruneOptions::retrain ran: the weights its model had made non-zero at
  // pruned positions (set back to 0), and its time.
  bool retrained = false;
  int64_t retrain_rezeroed = 0;
  double retrain_seconds = 0.0;
  double seconds = 0.0;
};

struct SPARQ_API PruneReport {
  bool has_metric = false;
  double dense_metric = 0.0;
  std::vector<LayerPlan> plan;               // per weighted layer (skipped ones with reasons)
  std::vector<PruneStepReport> steps;        // steps run (including a rejected last one)
  int accepted_steps = 0;                    // the returned model is the one after this many steps
  std::map<std::string, double> final_sparsity;  // by node, of the returned model
  bool stopped_early = false;
  std::string stop_message;
  ChannelRemovalReport channels;             // kChannel with remove_channels
  int64_t params_before = 0, params_after = 0, zeros_after = 0;  // float weights of weighted layers

  // Aligned text: the plan, one row per step, final sparsity per layer.
  std::string ToText() const;
};

struct SPARQ_API PruneResult {
  Model model;
  PruneReport report;
};

// Prunes `model` progressively: for each step of the schedule, scores the
// weights (with activation norms from `data` for kActivation), masks every
// planned layer at the step's sparsity, evaluates the masked model, recovers
// (options.recovery), retrains (options.retrain: the model it returns must
// keep the graph and the weights' names and shapes, InvalidArgument
// otherwise; its pruned weights are set to 0 again and counted), evaluates
// again, and logs the step. When `metric`
// returns acceptable = false the loop stops and the model of the last
// accepted step (the dense model when it is the first) is returned, with a
// message saying which step broke the gate. `data` may be null when neither
// recovery nor activation scores are used, `metric` when no evaluation is
// wanted. Errors: those of ValidatePruneOptions and PlanPruning;
// InvalidArgument when data is needed but missing; the callbacks' errors.
SPARQ_API StatusOr<PruneResult> PruneModel(const Model& model, const PruneOptions& options, const BatchSource& data,
                                 const PruneMetricFn& metric);

}  // namespace sparq
