#include "pipeline/prune_stage.h"
#include "pipeline/gate.h"
#include "sparq/pipeline.h"

namespace sparq {

StatusOr<PruneOptions> ToPruneOptions(const Recipe& recipe) {
  const RecipePrune& p = recipe.prune;
  PruneOptions o;
  o.structure = p.structure;
  o.sparsity = p.structure.kind == RecipePrune::Structure::Kind::kNM && p.sparsity == 0.0 ? 0.0 : p.sparsity;
  o.schedule = p.schedule;
  o.steps = p.steps;
  o.scope = p.scope;
  o.score = p.score;
  o.recovery = p.recovery;
  o.recovery_options.method = p.recovery_method;
  o.recovery_options.token_mask = p.token_mask;
  o.recovery_options.damping = p.recovery_damping;
  o.recovery_options.obs_block = p.obs_block;
  o.reconstruction = p.reconstruction;
  o.skip_first_last = p.skip_first_last;
  o.threads = recipe.evaluate.threads;
  o.recovery_options.threads = recipe.evaluate.threads;
  for (size_t i = 0; i < p.layers.size(); ++i) {
    const RecipePrune::LayerRule& rule = p.layers[i];
    PruneLayerRule r;
    r.origin = recipe.source + ":" + std::to_string(rule.line) + ": prune.layers[" + std::to_string(i) + "]";
    r.match = rule.match;
    r.sparsity = rule.sparsity;
    if (rule.structure) r.structure = *rule.structure;
    o.layers.push_back(std::move(r));
  }
  if (!p.kernel_table.empty()) {
    SPARQ_ASSIGN_OR_RETURN(KernelSpeedTable table, KernelSpeedTable::Load(p.kernel_table));
    o.kernel_table = std::make_shared<const KernelSpeedTable>(std::move(table));
  }
  auto backend = ResolveBackend(recipe.evaluate.backend);
  o.backend = backend.ok() ? backend->name : "cpu";
  o.auto_candidates = AutoCandidatesFor(o.backend, o.kernel_table != nullptr);
  SPARQ_RETURN_IF_ERROR(ValidatePruneOptions(o).WithContext("prune"));
  return o;
}

std::vector<PruneStructure> AutoCandidatesFor(const std::string& backend, bool have_kernel_table) {
  std::vector<PruneStructure> candidates = PruneOptions().auto_candidates;
  if (backend == "cuda" && have_kernel_table) {
    candidates.insert(candidates.begin(), {PruneStructure::Block(64, 64), PruneStructure::Block(32, 32)});
  }
  return candidates;
}

StatusOr<PruneResult> RunPruneStage(const Recipe& recipe, const Model& model, const BatchSource& calibration,
                                    const ModelMetricFn& metric, double dense_metric, double max_drop,
                                    const std::function<void(const std::string&)>& log) {
  SPARQ_ASSIGN_OR_RETURN(PruneOptions options, ToPruneOptions(recipe));
  options.log = log;
  options.recovery_options.log = log;
  if (recipe.prune.retrain) {
    const RecipePrune::Retrain& t = *recipe.prune.retrain;
    RetrainCommandOptions c;
    c.command = t.command;
    c.shell = t.shell;
    c.timeout_seconds = t.timeout;
    c.data = t.data.empty() ? recipe.data.calibration : t.data;
    c.working_dir = recipe.base_dir;
    c.log = log;
    SPARQ_RETURN_IF_ERROR(CheckRetrainCommand(c).WithContext(recipe.source + ":" + std::to_string(t.line) + ": prune.retrain"));
    options.retrain = MakeRetrainCommand(std::move(c));
  }
  PruneMetricFn judge = [&](const Model& m) -> StatusOr<PruneEvaluation> {
    SPARQ_ASSIGN_OR_RETURN(PruneEvaluation e, metric(m));
    const double drop = dense_metric - e.metric;
    e.acceptable = drop <= max_drop;
    if (!e.acceptable) e.note = "metric drop " + std::to_string(drop) + " exceeds the gate's " + std::to_string(max_drop);
    return e;
  };
  if (recipe.prune.sensitivity) {
    // Scan each layer alone, then give the insensitive layers more sparsity.
    SensitivityOptions s;
    s.structure = options.structure;
    s.score = options.score;
    s.sparsities = recipe.prune.sensitivity->sparsities;
    s.recovery = recipe.prune.sensitivity->recovery;
    s.recovery_options = options.recovery_options;
    s.skip_first_last = options.skip_first_last;
    s.threads = options.threads;
    s.log = log;
    SPARQ_ASSIGN_OR_RETURN(SensitivityTable table, SensitivityAnalysis(model, s, calibration, judge));
    SPARQ_ASSIGN_OR_RETURN(SparsityAllocation alloc,
                           AllocateSparsity(table, options.sparsity, recipe.prune.sensitivity->budget));
    if (log) log("prune: sensitivity allocation: " + alloc.message);
    std::vector<PruneLayerRule> rules = alloc.ToRules();
    rules.insert(rules.end(), options.layers.begin(), options.layers.end());
    options.layers = std::move(rules);
  }
  return PruneModel(model, options, calibration, judge);
}

Status CheckRecipeAgainstModel(const Recipe& recipe, const Model& model) {
  if (!recipe.prune.enabled) return Status::OK();
  SPARQ_ASSIGN_OR_RETURN(PruneOptions options, ToPruneOptions(recipe));
  return PlanPruning(model, options).status();
}

}  // namespace sparq
