// The progressive pruning loop: for each step of the schedule, score, mask,
// evaluate, recover, evaluate, and stop when the gate would break.
#include <algorithm>
#include <chrono>
#include <cmath>

#include "formats/text_table.h"
#include "prune/internal.h"
#include "quant/reconstruct.h"

namespace sparq {

using namespace prune_internal;  // NOLINT

namespace {

bool IsRankable(const PruneStructure& s) {
  return s.kind == PruneStructure::Kind::kUnstructured || s.kind == PruneStructure::Kind::kBlock;
}

// Whether the rule that applied to `plan` set its own sparsity.
bool RuleSetsSparsity(const PruneOptions& o, const LayerPlan& plan) {
  if (plan.rule.empty()) return false;
  for (const auto& r : o.layers)
    if (r.match == plan.rule) return r.sparsity.has_value();
  return false;
}

std::string Pct(double v) { return FormatDouble("%.1f%%", 100.0 * v); }

// Zero fraction of each planned layer's weight in `m`.
StatusOr<std::map<std::string, double>> LayerSparsity(const Model& m, const std::vector<const LayerPlan*>& active) {
  std::map<std::string, double> out;
  for (const LayerPlan* p : active) {
    SPARQ_ASSIGN_OR_RETURN(Matrix w, ReadWeightMatrix(m, p->layer));
    out[p->layer.node] = PruneMask::FromNonZeros(w).sparsity();
  }
  return out;
}

}  // namespace

StatusOr<PruneResult> PruneModel(const Model& model, const PruneOptions& options, const BatchSource& data,
                                 const PruneMetricFn& metric) {
  using Clock = std::chrono::steady_clock;
  auto log = [&](const std::string& line) {
    if (options.log) options.log(line);
  };
  PruneResult result{model, {}};
  PruneReport& report = result.report;
  SPARQ_ASSIGN_OR_RETURN(report.plan, PlanPruning(model, options));
  std::vector<const LayerPlan*> active;
  std::vector<std::string> names;
  for (const LayerPlan& p : report.plan) {
    report.params_before += p.layer.params();
    if (!p.prune) continue;
    active.push_back(&p);
    names.push_back(p.layer.node);
  }
  report.params_after = report.params_before;
  const bool channel = options.structure.kind == PruneStructure::Kind::kChannel;
  const bool needs_data = options.recovery || options.score == PruneScore::kActivation;
  if (!active.empty() && needs_data && !data) {
    return Status::InvalidArgument(std::string("pruning with ") +
                                   (options.recovery ? "recovery" : "activation scores") +
                                   " needs calibration data, and none was given");
  }
  if (metric) {
    SPARQ_ASSIGN_OR_RETURN(PruneEvaluation dense, metric(model));
    report.has_metric = true;
    report.dense_metric = dense.metric;
    log("dense model: metric " + FormatNumber(dense.metric, 6));
  }
  if (active.empty()) {
    report.stop_message = "no layer to prune (see the plan for why each layer stays dense)";
    log(report.stop_message);
    return result;
  }

  // Per-layer schedules, and the global one.
  std::vector<std::vector<double>> schedule(active.size());
  for (size_t l = 0; l < active.size(); ++l) {
    SPARQ_ASSIGN_OR_RETURN(schedule[l], ScheduleSparsities(options.schedule, active[l]->sparsity, options.steps));
  }
  SPARQ_ASSIGN_OR_RETURN(std::vector<double> global, ScheduleSparsities(options.schedule, options.sparsity, options.steps));
  const PruneScore pooling = options.score;

  // Scores, masks and their application for step t on `m`; fills the step's
  // sparsities when `step` is given.
  auto mask_step = [&](Model& m, int t, bool log_skips, PruneStepReport* step,
                       std::vector<PruneMask>* masks_out) -> Status {
    // Scores.
    std::map<std::string, std::vector<double>> norms;
    if (options.score == PruneScore::kActivation) {
      SPARQ_ASSIGN_OR_RETURN(norms, ActivationColumnNorms(m, names, data,
                                                          options.recovery_options.max_rows_per_sample, options.threads));
    }
    std::vector<Matrix> weights(active.size()), scores(active.size());
    for (size_t l = 0; l < active.size(); ++l) {
      SPARQ_ASSIGN_OR_RETURN(weights[l], ReadWeightMatrix(m, active[l]->layer));
      SPARQ_ASSIGN_OR_RETURN(scores[l], ElementScores(weights[l], options.score, norms[active[l]->layer.node]));
    }
    // This step's per-layer sparsity.
    std::vector<double> target(active.size());
    for (size_t l = 0; l < active.size(); ++l) target[l] = schedule[l][t - 1];
    if (options.scope == PruneScope::kGlobal) {
      std::vector<size_t> pool;
      std::vector<const Matrix*> pool_scores;
      std::vector<PruneStructure> pool_structures;
      for (size_t l = 0; l < active.size(); ++l) {
        if (!IsRankable(active[l]->structure) || RuleSetsSparsity(options, *active[l])) continue;
        pool.push_back(l);
        pool_scores.push_back(&scores[l]);
        pool_structures.push_back(active[l]->structure);
      }
      const std::vector<double> s =
          GlobalSparsities(pool_scores, pool_structures, global[t - 1], options.max_layer_sparsity, pooling);
      for (size_t k = 0; k < pool.size(); ++k) target[pool[k]] = s[k];
    }
    // Masks.
    std::vector<PruneMask> masks(active.size());
    if (channel) {
      std::map<std::string, double> targets;
      std::map<std::string, Matrix> by_name;
      for (size_t l = 0; l < active.size(); ++l) {
        targets[names[l]] = target[l];
        by_name[names[l]] = scores[l];
      }
      std::vector<std::pair<std::string, std::string>> skipped;
      SPARQ_ASSIGN_OR_RETURN(auto cm, ComputeChannelMasks(m, targets, by_name, pooling, &skipped));
      for (size_t l = 0; l < active.size(); ++l) masks[l] = cm.at(names[l]);
      if (log_skips)
        for (const auto& [node, why] : skipped) log("channel pruning leaves '" + node + "' dense: " + why);
    } else {
      for (size_t l = 0; l < active.size(); ++l) {
        auto mask = ComputeMask(active[l]->structure, scores[l], target[l], pooling);
        if (!mask.ok()) return mask.status().WithContext("layer '" + names[l] + "'");
        masks[l] = std::move(mask).value();
      }
    }
    int64_t zeros = 0, total = 0;
    for (size_t l = 0; l < active.size(); ++l) {
      SPARQ_RETURN_IF_ERROR(ApplyMask(masks[l], &weights[l]));
      SPARQ_RETURN_IF_ERROR(WriteWeightMatrix(&m, active[l]->layer, weights[l]));
      const int64_t z = PruneMask::FromNonZeros(weights[l]).pruned();
      if (step) step->layer_sparsity[names[l]] = static_cast<double>(z) / static_cast<double>(weights[l].values.size());
      zeros += z;
      total += static_cast<int64_t>(weights[l].values.size());
    }
    if (step) step->sparsity = total > 0 ? static_cast<double>(zeros) / static_cast<double>(total) : 0.0;
    if (masks_out) *masks_out = std::move(masks);
    return Status::OK();
  };

  // The retrain hook on `m` (masked and recovered): checks its model, masks
  // it again, and counts the weights the training had moved off 0.
  auto retrain_step = [&](int t, double target, const std::vector<PruneMask>& masks, Model* m,
                          PruneStepReport* step) -> Status {
    const auto begin = Clock::now();
    const std::string where = "retrain step " + std::to_string(t) + "/" + std::to_string(options.steps);
    NamedTensors mask_tensors;
    for (size_t l = 0; l < active.size(); ++l) mask_tensors.emplace_back(active[l]->layer.weight, MaskAsWeight(active[l]->layer, masks[l]));
    RetrainRequest request;
    request.step = t;
    request.steps = options.steps;
    request.target = target;
    request.model = m;
    request.masks = &mask_tensors;
    SPARQ_ASSIGN_OR_RETURN(Model retrained, options.retrain(request));
    SPARQ_RETURN_IF_ERROR(CheckRetrainedModel(*m, retrained, where));
    int64_t rezeroed = 0;
    for (size_t l = 0; l < active.size(); ++l) {
      auto w = ReadWeightMatrix(retrained, active[l]->layer);
      if (!w.ok()) return w.status().WithContext(where);
      for (size_t i = 0; i < w->values.size(); ++i) rezeroed += masks[l].keep[i] == 0 && w->values[i] != 0.0f;
      SPARQ_RETURN_IF_ERROR(ApplyMask(masks[l], &*w));
      SPARQ_RETURN_IF_ERROR(WriteWeightMatrix(&retrained, active[l]->layer, *w));
    }
    *m = std::move(retrained);
    step->retrained = true;
    step->retrain_rezeroed = rezeroed;
    step->retrain_seconds = std::chrono::duration<double>(Clock::now() - begin).count();
    log(where + ": masks applied again, " + WithThousands(rezeroed) +
        " pruned weights the training had made non-zero set back to 0");
    return Status::OK();
  };

  Model current = model;
  // The same schedule without recovery, for the report (copied only when used).
  const bool compare_unrecovered = metric && options.recovery;
  Model unrecovered = compare_unrecovered ? model : Model{};
  for (int t = 1; t <= options.steps; ++t) {
    const auto start = Clock::now();
    PruneStepReport step;
    step.step = t;
    step.target = global[t - 1];
    std::vector<PruneMask> masks;
    SPARQ_RETURN_IF_ERROR(mask_step(current, t, t == 1, &step, &masks));
    if (compare_unrecovered) SPARQ_RETURN_IF_ERROR(mask_step(unrecovered, t, false, nullptr, nullptr));
    // Evaluate, recover, evaluate.
    if (metric) {
      SPARQ_ASSIGN_OR_RETURN(PruneEvaluation e, metric(options.recovery ? unrecovered : current));
      step.evaluated = true;
      step.metric_masked = step.metric = e.metric;
      step.masked = step.recovered = e;
      step.acceptable = e.acceptable;
      step.note = e.note;
    }
    if (options.recovery) {
      RecoveryOptions ro = options.recovery_options;
      if (ro.threads == 0) ro.threads = options.threads;
      if (!ro.log) ro.log = options.log;
      if (ro.method == RecoveryMethod::kObs)
        for (const LayerPlan* p : active) ro.structures.emplace(p->layer.node, p->structure);
      SPARQ_ASSIGN_OR_RETURN(step.recovery, RecoverModel(model, &current, names, data, ro));
      if (ro.method == RecoveryMethod::kObs) {  // OBS chose the masks again: the retrain hook keeps those
        for (size_t l = 0; l < active.size(); ++l) {
          SPARQ_ASSIGN_OR_RETURN(Matrix w, ReadWeightMatrix(current, active[l]->layer));
          masks[l] = PruneMask::FromNonZeros(w);
        }
      }
      if (options.reconstruction.method == PruneReconstruction::Method::kBlock) {
        const auto rstart = Clock::now();
        BlockReconstructionOptions bo;
        bo.iterations = options.reconstruction.iterations;
        bo.learning_rate = options.reconstruction.learning_rate;
        bo.block_layers = options.reconstruction.block_layers;
        bo.threads = options.threads;
        bo.log = ro.log;
        SPARQ_ASSIGN_OR_RETURN(BlockReconstructionReport br, ReconstructBlocks(model, &current, data, bo));
        for (const auto& b : br.blocks) (b.skipped.empty() ? step.reconstructed_blocks : step.reconstruction_skipped)++;
        step.reconstruction_seconds = std::chrono::duration<double>(Clock::now() - rstart).count();
        if (options.log)
          options.log("block reconstruction: " + std::to_string(step.reconstructed_blocks) + " blocks fitted, " +
                      std::to_string(step.reconstruction_skipped) + " left to least squares (" +
                      FormatDouble("%.1f", step.reconstruction_seconds) + " s)");
      }
    }
    if (options.retrain) {
      SPARQ_RETURN_IF_ERROR(retrain_step(t, global[t - 1], masks, &current, &step));
    }
    if (options.recovery || options.retrain) {
      if (metric) {
        SPARQ_ASSIGN_OR_RETURN(PruneEvaluation e, metric(current));
        step.metric = e.metric;
        step.recovered = e;
        step.acceptable = e.acceptable;
        step.note = e.note;
      }
    }
    step.seconds = std::chrono::duration<double>(Clock::now() - start).count();
    std::string line = "step " + std::to_string(t) + "/" + std::to_string(options.steps) + ": sparsity " +
                       Pct(step.sparsity) + " of the pruned layers";
    if (step.evaluated) {
      line += ", metric " + FormatNumber(step.metric, 6);
      if (options.recovery || options.retrain)
        line += std::string(" (without ") + (options.retrain ? "recovery or retraining " : "recovery ") +
                FormatNumber(step.metric_masked, 6) + ")";
      if (std::isfinite(step.recovered.sqnr_db)) {
        line += ", output SQNR vs dense " + FormatDouble("%.1f", step.recovered.sqnr_db) + " dB";
        if (options.recovery || options.retrain) line += " (without " + FormatDouble("%.1f", step.masked.sqnr_db) + " dB)";
      }
      if (!step.acceptable) line += ": gate broken" + (step.note.empty() ? "" : " (" + step.note + ")");
    }
    log(line);
    report.steps.push_back(step);
    if (!step.acceptable) {
      report.stopped_early = true;
      report.stop_message = "stopped at step " + std::to_string(t) + "/" + std::to_string(options.steps) +
                            ": at sparsity " + Pct(step.sparsity) + " the metric is " + FormatNumber(step.metric, 6) +
                            " (dense " + FormatNumber(report.dense_metric, 6) + ") and the gate would fail" +
                            (step.note.empty() ? "" : " (" + step.note + ")") + "; returning the " +
                            (report.accepted_steps == 0
                                 ? std::string("dense model")
                                 : "model of step " + std::to_string(report.accepted_steps) + " (sparsity " +
                                       Pct(report.steps[report.accepted_steps - 1].sparsity) + ")");
      log(report.stop_message);
      break;
    }
    result.model = current;
    report.accepted_steps = t;
  }

  SPARQ_ASSIGN_OR_RETURN(report.final_sparsity, LayerSparsity(result.model, active));
  if (channel && options.remove_channels && report.accepted_steps > 0) {
    SPARQ_ASSIGN_OR_RETURN(report.channels, RemoveZeroChannels(&result.model));
    for (const auto& [node, why] : report.channels.skipped) log("zero channels of '" + node + "' stay: " + why);
    SPARQ_ASSIGN_OR_RETURN(std::vector<WeightedLayer> after, FindWeightedLayers(result.model));
    report.params_after = 0;
    for (const auto& L : after) report.params_after += L.params();
    log("channel removal: float parameters " + WithThousands(report.channels.params_before) + " -> " +
        WithThousands(report.channels.params_after));
  }
  SPARQ_ASSIGN_OR_RETURN(std::vector<WeightedLayer> final_layers, FindWeightedLayers(result.model));
  for (const WeightedLayer& L : final_layers) {
    if (std::find(names.begin(), names.end(), L.node) == names.end()) continue;
    SPARQ_ASSIGN_OR_RETURN(Matrix w, ReadWeightMatrix(result.model, L));
    report.zeros_after += PruneMask::FromNonZeros(w).pruned();
  }
  return result;
}

std::string PruneReport::ToText() const {
  std::string out = "Pruning plan:\n";
  TextTable plan_table({"layer", "op", "params", "structure", "target", "status"},
                       {false, false, true, false, true, false});
  for (const LayerPlan& p : plan) {
    plan_table.AddRow({p.layer.node, p.layer.op_type, WithThousands(p.layer.params()),
                       p.prune ? p.structure.ToString() : "-", p.prune ? Pct(p.sparsity) : "-",
                       p.prune ? (p.rule.empty() ? "pruned" : "pruned (rule '" + p.rule + "')") +
                                     (p.kernel_speedup > 0 ? FormatDouble(", kernel %.2fx dense", p.kernel_speedup) : "")
                               : "dense: " + p.reason});
  }
  out += plan_table.Render();
  if (has_metric) out += "\nDense metric: " + FormatNumber(dense_metric, 6) + "\n";
  if (!steps.empty()) {
    out += "\nSteps:\n";
    const bool retrained = std::any_of(steps.begin(), steps.end(), [](const PruneStepReport& s) { return s.retrained; });
    std::vector<std::string> header = {"step", "target", "sparsity", "metric (no recovery)", "metric",
                                       "SQNR dB (no recovery)", "SQNR dB", "gate", "seconds"};
    std::vector<bool> right = {true, true, true, true, true, true, true, false, true};
    if (retrained) {
      header.insert(header.end(), {"retrain s", "re-zeroed"});
      right.insert(right.end(), {true, true});
    }
    TextTable t(header, right);
    auto db = [](double v) { return std::isfinite(v) ? FormatDouble("%.1f", v) : std::string("-"); };
    for (const auto& s : steps) {
      std::vector<std::string> row = {std::to_string(s.step), Pct(s.target), Pct(s.sparsity),
                                      s.evaluated ? FormatNumber(s.metric_masked, 6) : "-",
                                      s.evaluated ? FormatNumber(s.metric, 6) : "-", db(s.masked.sqnr_db),
                                      db(s.recovered.sqnr_db), s.evaluated ? (s.acceptable ? "pass" : "FAIL") : "-",
                                      FormatDouble("%.2f", s.seconds)};
      if (retrained) {
        row.push_back(s.retrained ? FormatDouble("%.2f", s.retrain_seconds) : "-");
        row.push_back(s.retrained ? WithThousands(s.retrain_rezeroed) : "-");
      }
      t.AddRow(row);
    }
    out += t.Render();
  }
  if (!final_sparsity.empty()) {
    out += "\nFinal sparsity:\n";
    TextTable t({"layer", "sparsity"}, {false, true});
    for (const auto& [node, s] : final_sparsity) t.AddRow({node, Pct(s)});
    out += t.Render();
  }
  out += "\nWeights of weighted layers: " + WithThousands(params_before) + " -> " + WithThousands(params_after) +
         ", " + WithThousands(zeros_after) + " of them zero\n";
  if (!channels.producers.empty()) {
    out += "Channels removed:\n";
    TextTable t({"layer", "channels"}, {false, true});
    for (const auto& p : channels.producers)
      t.AddRow({p.node, std::to_string(p.channels_before) + " -> " + std::to_string(p.channels_after)});
    out += t.Render();
  }
  if (!stop_message.empty()) out += (stopped_early ? "Stopped early: " : "") + stop_message + "\n";
  return out;
}

}  // namespace sparq
