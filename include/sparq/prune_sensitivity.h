// Sensitivity analysis (each layer pruned alone at several sparsities) and
// the sparsity allocation it feeds.
#pragma once

#include <functional>
#include <limits>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "sparq/export.h"
#include "sparq/graph.h"
#include "sparq/prune_model.h"
#include "sparq/prune_options.h"
#include "sparq/status.h"

namespace sparq {

struct SPARQ_API SensitivityOptions {
  // kAuto is resolved per layer as in PruneOptions (among the candidates that
  // are not N:M). An N:M structure fixes each layer's sparsity at 1 - n/m, so
  // its layers are scanned at that one point (`sparsities` is not used for
  // them) and marked all_or_nothing.
  PruneStructure structure;
  PruneScore score = PruneScore::kMagnitude;
  std::vector<double> sparsities = {0.25, 0.5, 0.75, 0.9};  // each in [0, 1)
  bool recovery = false;  // recover the single pruned layer before measuring
  RecoveryOptions recovery_options;
  bool skip_first_last = false;  // true: leave them out of the scan
  // Only layers whose name matches one of these (exact or regex); empty = all.
  std::vector<std::string> layers;
  int threads = 0;
  std::function<void(const std::string&)> log;
};

struct SPARQ_API SensitivityPoint {
  std::string layer;
  int64_t params = 0;
  double sparsity = 0.0;  // achieved
  double metric = 0.0;
  double drop = 0.0;      // baseline - metric
  // The metric callback's output SQNR against the dense model (dB); NaN when
  // it measures none.
  double sqnr_db = std::numeric_limits<double>::quiet_NaN();
  // N:M: the layer is either dense or at exactly this sparsity.
  bool all_or_nothing = false;
};

struct SPARQ_API SensitivityTable {
  double baseline = 0.0;                // metric of the unpruned model
  std::vector<SensitivityPoint> points;  // by layer (graph order), then sparsity
  std::vector<std::pair<std::string, std::string>> skipped;  // (layer, reason)
};

// Prunes each layer alone at each sparsity and records the metric drop.
// `data` may be null unless recovery or activation scores are used.
// Errors: InvalidArgument for bad sparsities or a structure that is N:M (its
// sparsity is fixed); NotFound when a `layers` pattern matches nothing; the
// callbacks' errors.
SPARQ_API StatusOr<SensitivityTable> SensitivityAnalysis(const Model& model, const SensitivityOptions& options,
                                               const BatchSource& data, const PruneMetricFn& metric);

// "layer,params,sparsity,metric,drop" then one line per point (names quoted
// when they hold a comma or quote).
SPARQ_API std::string SensitivityCsv(const SensitivityTable& table);
// A self-contained SVG line chart: metric drop against sparsity, one
// polyline per layer, with axes, ticks, labels and a legend.
SPARQ_API std::string SensitivitySvg(const SensitivityTable& table, const std::string& title = "Pruning sensitivity");
// Write the two files atomically. Errors: IOError.
SPARQ_API Status WriteSensitivityCsv(const SensitivityTable& table, const std::string& path);
SPARQ_API Status WriteSensitivitySvg(const SensitivityTable& table, const std::string& path,
                           const std::string& title = "Pruning sensitivity");

struct SPARQ_API SparsityAllocation {
  std::map<std::string, double> sparsity;  // per layer of the table (0 = dense)
  double achieved_sparsity = 0.0;          // over the table's layers' params
  double predicted_drop = 0.0;             // sum of the chosen points' drops
  bool target_met = false;
  std::string message;                     // how the allocation ended
  // What the greedy ranked by: "output noise" (every point has an SQNR) or
  // "metric drop".
  std::string cost;

  // Exact-name rules for PruneOptions::layers.
  std::vector<PruneLayerRule> ToRules() const;
};

// Greedy allocation: every layer starts dense; repeatedly the layer whose next
// scanned sparsity costs the least per removed parameter is raised to it,
// until `target_sparsity` of the table's parameters are zero or the next raise
// would push the summed metric drop above `budget` (infinity: no limit).
// The cost is the output noise the point adds (10^(-SQNR/10), relative to the
// dense output's power; noise of independent layers adds up) when every point
// has an SQNR, else the metric drop: a label metric on a small evaluation set
// moves by whole samples and ties most points at 0. The last raise stops at
// the target exactly (the layer's sparsity and drop interpolated between its
// two scanned points, from dense below the first) unless the layer is
// all_or_nothing (N:M), which goes to its point or stays. Errors:
// InvalidArgument for a target outside [0, 1), a negative budget or an empty
// table.
SPARQ_API StatusOr<SparsityAllocation>
AllocateSparsity(const SensitivityTable& table, double target_sparsity, double budget);

}  // namespace sparq
