// What to prune: PruneOptions (structure, target, schedule, scope, score,
// per-layer rules) and the per-layer plan they resolve to.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "sparq/export.h"
#include "sparq/graph.h"
#include "sparq/kernel_table.h"
#include "sparq/prune_layers.h"
#include "sparq/prune_masks.h"
#include "sparq/prune_recovery.h"
#include "sparq/prune_retrain.h"
#include "sparq/prune_schedule.h"
#include "sparq/prune_structure.h"
#include "sparq/status.h"

namespace sparq {

// Kernel speed (structure auto): KernelSpeedTable (sparq/kernel_table.h,
// shared with the executor) gives the speed-up of each sparse structure over
// dense, per backend and sparsity.

// A per-layer override; the first rule that matches a node wins.
struct SPARQ_API PruneLayerRule {
  // The node name, or an ECMAScript regex that must match the whole name.
  std::string match;
  std::optional<double> sparsity;             // default: PruneOptions::sparsity (0 = dense)
  std::optional<PruneStructure> structure;    // default: PruneOptions::structure
  // Where the rule was written, for messages (a recipe gives
  // "r.yaml:12: prune.layers[0]"); "" = "pruning rule layers[<index>]".
  std::string origin;
};

enum class PruneScope {
  kLayer,   // every layer reaches its own target
  kGlobal,  // one threshold over all layers (see PruneOptions::scope)
};
SPARQ_API const char* PruneScopeName(PruneScope s);  // "layer", "global"

// Block reconstruction after each step's least-squares recovery (BRECQ
// family, quant/reconstruct.h): the model is cut into blocks of a few
// weighted layers at tensors where one activation is live (a residual block,
// a transformer sub-layer), and each block's weights and biases are fitted by
// Adam so the block reproduces the DENSE model's block output on the
// calibration data, its input coming from the pruned model fitted so far;
// pruned weights stay 0. A block whose error would grow keeps its weights.
// Cost: about 3x the forward FLOPs of the model per calibration batch and
// iteration (iterations x batches of forward + backward over all blocks).
struct SPARQ_API PruneReconstruction {
  enum class Method {
    kNone,   // least squares alone (`recovery`)
    kBlock,  // then block reconstruction
  };
  Method method = Method::kNone;
  int iterations = 200;          // Adam steps per block (one calibration batch each, in order), >= 1
  double learning_rate = 1e-3;   // Adam's first step size, cosine-decayed to 0, in (0, 1]
  int block_layers = 2;          // weighted layers a block gathers before it closes at a cut, >= 1
};
SPARQ_API const char* PruneReconstructionName(PruneReconstruction::Method m);  // "none", "block"

struct SPARQ_API PruneOptions {
  PruneStructure structure;  // default unstructured
  // Target fraction of zero weights per layer, in [0, 1). With N:M it must be
  // 0 (dense) or 1 - n/m; a rule that sets another structure without a
  // sparsity gets that structure's natural target (1 - n/m for N:M).
  double sparsity = 0.5;
  PruneSchedule schedule = PruneSchedule::kOneShot;
  int steps = 1;  // >= 1; 1 with kOneShot
  // kGlobal: group scores are divided by their layer's mean group score (so a
  // layer of larger weights is not spared for its scale alone), then ranked
  // together; groups are pruned lowest first until `sparsity` of all the
  // scope's weights are zero, no layer going above max_layer_sparsity. Layers
  // with a rule sparsity and N:M layers keep their own targets; channel
  // pruning takes kLayer only (tied channels are ranked per group).
  PruneScope scope = PruneScope::kLayer;
  double max_layer_sparsity = 0.95;  // kGlobal only, in (0, 1)
  PruneScore score = PruneScore::kMagnitude;
  bool recovery = true;  // re-fit kept weights after each step (needs data)
  RecoveryOptions recovery_options;
  // After the least squares of each step (needs `recovery`); see PruneReconstruction.
  PruneReconstruction reconstruction;
  // Leave the first and the last weighted layer dense (a rule naming one
  // of them by its exact name still applies).
  bool skip_first_last = true;
  std::vector<PruneLayerRule> layers;
  // kAuto: per layer, among the candidates that fit it (an N:M candidate only
  // when the layer's target is 1 - n/m): with a kernel table, the one whose
  // kernel on `backend` is fastest at the layer's target, and the layer stays
  // dense when none beats dense; without one, the first that fits.
  std::vector<PruneStructure> auto_candidates = {PruneStructure::NM(2, 4), PruneStructure::Block(4, 4),
                                                 PruneStructure::Block(1, 4), PruneStructure::Unstructured()};
  std::shared_ptr<const KernelSpeedTable> kernel_table;  // optional
  std::string backend = "cpu";
  // Optional: runs after each step's masks (and recovery); its model's masked
  // weights are set back to 0 before the step is evaluated
  // (sparq/prune_retrain.h; MakeRetrainCommand runs a user's command).
  PruneRetrainFn retrain;
  // kChannel: remove the zeroed channels from the graph after the last step.
  bool remove_channels = true;
  int threads = 0;  // executor threads; 0 = one per hardware thread
  // Progress lines ("step 2/4: sparsity 0.41 ..."); optional.
  std::function<void(const std::string&)> log;
};

// InvalidArgument listing every out-of-range option.
SPARQ_API Status ValidatePruneOptions(const PruneOptions& options);

// What will happen to one weighted layer.
struct SPARQ_API LayerPlan {
  WeightedLayer layer;
  bool prune = false;            // false: left dense, see `reason`
  PruneStructure structure;      // resolved (never kAuto)
  // Final target. With scope global (unstructured and block layers without a
  // rule sparsity) this is the overall target; the ranking sets the layer's.
  double sparsity = 0.0;
  std::string rule;              // the rule's `match` that applied; "" = the defaults
  std::string reason;            // why it is left dense ("" when pruned)
  // Structure auto with a kernel table: the chosen structure's measured
  // speed-up over dense at this sparsity (0 = not chosen that way).
  double kernel_speedup = 0.0;
};

// Resolves every weighted layer's structure and target. A layer that the
// default structure does not fit is left dense with the reason; one that a
// rule naming it exactly asks for is an error. Errors: InvalidArgument (bad
// options, a bad regex, a rule's structure that does not fit the layer it
// names, a rule sparsity outside [0, 1) or not allowed by N:M); NotFound when
// a rule matches no weighted layer (the message lists them). With channel
// pruning, a layer whose channels cannot go (not a traceable producer, a
// locked group, tied to a layer left dense) stays dense with the reason: that
// depends on other layers, so it is never an error.
SPARQ_API StatusOr<std::vector<LayerPlan>> PlanPruning(const Model& model, const PruneOptions& options);

}  // namespace sparq
