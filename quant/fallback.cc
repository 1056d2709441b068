#include "sparq/fallback.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "graph/name_pattern.h"
#include "graph/value_index.h"
#include "evaluate/dataset.h"
#include "sparq/executor.h"
#include "sparq/metrics.h"

namespace sparq {

StatusOr<std::vector<LayerSqnr>> LayerOutputSqnr(const Model& float_model, const Model& quantized,
                                                 const std::vector<LayerDecision>& layers, const TensorMap& batch,
                                                 int threads) {
  std::vector<std::string> outputs;
  std::map<std::string, std::string> node_of;
  for (const LayerDecision& d : layers) {
    if (d.precision != Precision::kINT8) continue;
    for (const Node& n : float_model.graph.nodes)
      if (n.name == d.node && !n.name.empty()) {
        outputs.push_back(n.outputs[0]);
        node_of[n.outputs[0]] = n.name;
      }
  }
  // With BN folded, a Conv's output name is the BN's: look both up.
  const ValueIndex float_values(float_model.graph), quantized_values(quantized.graph);
  std::vector<std::string> present;
  for (const auto& o : outputs)
    if (float_values.Producer(o) && quantized_values.Producer(o)) present.push_back(o);
  RunOptions ro;
  ro.extra_outputs = present;
  TensorMap float_out, q_out;
  SPARQ_ASSIGN_OR_RETURN(auto float_exec, Executor::Create(float_model, ExecutorOptions{threads}));
  SPARQ_RETURN_IF_ERROR(float_exec->Run(batch, &float_out, ro));
  SPARQ_ASSIGN_OR_RETURN(auto q_exec, Executor::Create(quantized, ExecutorOptions{threads}));
  SPARQ_RETURN_IF_ERROR(q_exec->Run(batch, &q_out, ro));
  std::vector<LayerSqnr> out;
  for (const auto& name : present) {
    ErrorStats s;
    SPARQ_RETURN_IF_ERROR(s.Add(float_out[name].ToFloat32(), q_out[name].ToFloat32()));
    out.push_back({node_of[name], s.sqnr_db()});
  }
  std::sort(out.begin(), out.end(), [](const LayerSqnr& a, const LayerSqnr& b) { return a.sqnr_db < b.sqnr_db; });
  return out;
}

namespace {

std::vector<std::string> Int8Layers(const std::vector<LayerDecision>& layers) {
  std::vector<std::string> int8;
  for (const LayerDecision& d : layers)
    if (d.precision == Precision::kINT8 && !d.node.empty()) int8.push_back(d.node);
  return int8;
}

// `options` with every layer of `int8` but `node` kept in FP32 by an
// exact-name rule ahead of the caller's rules.
QuantizeOptions AloneInInt8(const QuantizeOptions& options, const std::vector<std::string>& int8,
                            const std::string& node) {
  QuantizeOptions alone = options;
  std::vector<LayerRule> rules;
  for (const std::string& other : int8)
    if (other != node) rules.push_back({EscapeRegex(other), Precision::kFP32});
  alone.layers.insert(alone.layers.begin(), rules.begin(), rules.end());
  return alone;
}

// The rankings run one batch per INT8 layer (or per step): at most
// kRankingRows samples of the first batch, where the model's batch dimension
// is free to take them.
constexpr int64_t kRankingRows = 8;
TensorMap RankingBatch(const Graph& g, TensorMap batch) {
  if (FixedBatchSize(g) > 0) return batch;  // a fixed batch size
  // Along each input's own sample axis (a state [2, batch, 128]: axis 1);
  // inputs without one are kept whole.
  BatchSource samples_of;
  samples_of.set_sample_axes(SampleAxes(g));
  if (samples_of.SamplesIn(batch) <= kRankingRows) return batch;
  return SliceSamples(batch, samples_of.sample_axes(), 0, kRankingRows);
}

void SortLowestFirst(std::vector<LayerSqnr>& v) {
  std::stable_sort(v.begin(), v.end(), [](const LayerSqnr& a, const LayerSqnr& b) { return a.sqnr_db < b.sqnr_db; });
}

}  // namespace

const char* FallbackRankingName(FallbackRanking r) {
  switch (r) {
    case FallbackRanking::kLayerSqnr: return "sqnr";
    case FallbackRanking::kOutputSqnrAlone: return "output_sqnr";
    case FallbackRanking::kMetricAlone: return "metric";
  }
  return "?";
}

namespace {

// Each INT8 layer of `layers` alone in INT8, run on `batch`, scored against
// the float model's outputs: the SQNR of every float output, or with
// `boxes` enabled the SQNR of the class-score rows of the outputs that
// decode as detections (the whole output's SQNR where none does).
StatusOr<std::vector<LayerSqnr>> LayerAloneScores(const Model& float_model, const CalibrationTable& table,
                                                  const QuantizeOptions& options,
                                                  const std::vector<LayerDecision>& layers, const TensorMap& batch,
                                                  int threads, const BoxOptions& boxes) {
  const std::vector<std::string> int8 = Int8Layers(layers);
  TensorMap reference;
  SPARQ_ASSIGN_OR_RETURN(auto float_exec, Executor::Create(float_model, ExecutorOptions{threads}));
  SPARQ_RETURN_IF_ERROR(float_exec->Run(batch, &reference));
  std::vector<LayerSqnr> out;
  for (const std::string& node : int8) {
    SPARQ_ASSIGN_OR_RETURN(Model candidate, QuantizeModel(float_model, table, AloneInInt8(options, int8, node), nullptr));
    SPARQ_ASSIGN_OR_RETURN(auto exec, Executor::Create(candidate, ExecutorOptions{threads}));
    TensorMap outputs;
    SPARQ_RETURN_IF_ERROR(exec->Run(batch, &outputs));
    ErrorStats s;
    ReferenceMetrics scores(boxes);
    for (const auto& v : float_model.graph.outputs) {
      auto want = reference.find(v.name);
      auto got = outputs.find(v.name);
      if (want == reference.end() || got == outputs.end()) {
        return Status::Internal("fallback ranking: output '" + v.name + "' missing with only '" + node + "' in INT8");
      }
      const DataType t = want->second.dtype();
      if (t != DataType::kFloat32 && t != DataType::kFloat16) continue;
      const Tensor a = want->second.ToFloat32(), b = got->second.ToFloat32();
      SPARQ_RETURN_IF_ERROR(s.Add(a, b));
      if (boxes.enabled) SPARQ_RETURN_IF_ERROR(scores.Add(a, b));
    }
    const bool by_scores = boxes.enabled && scores.box_samples() > 0 && !std::isnan(scores.class_score_sqnr_db());
    out.push_back({node, by_scores ? scores.class_score_sqnr_db() : s.sqnr_db()});
  }
  SortLowestFirst(out);
  return out;
}

}  // namespace

StatusOr<std::vector<LayerSqnr>> LayerAloneOutputSqnr(const Model& float_model, const CalibrationTable& table,
                                                      const QuantizeOptions& options,
                                                      const std::vector<LayerDecision>& layers, const TensorMap& batch,
                                                      int threads) {
  return LayerAloneScores(float_model, table, options, layers, batch, threads, BoxOptions{});
}

StatusOr<std::vector<LayerSqnr>> LayerAloneClassScoreSqnr(const Model& float_model, const CalibrationTable& table,
                                                          const QuantizeOptions& options,
                                                          const std::vector<LayerDecision>& layers,
                                                          const TensorMap& batch, const BoxOptions& boxes,
                                                          int threads) {
  BoxOptions on = boxes;
  on.enabled = true;
  return LayerAloneScores(float_model, table, options, layers, batch, threads, on);
}

namespace {

// kMetricAlone: each layer alone in INT8, scored by `metric` on the whole data.
StatusOr<std::vector<LayerSqnr>> LayerAloneMetric(const Model& float_model, const CalibrationTable& table,
                                                  const QuantizeOptions& options,
                                                  const std::vector<LayerDecision>& layers, Evaluator& evaluator,
                                                  Metric metric) {
  const std::vector<std::string> int8 = Int8Layers(layers);
  std::vector<LayerSqnr> out;
  for (const std::string& node : int8) {
    SPARQ_ASSIGN_OR_RETURN(Model candidate, QuantizeModel(float_model, table, AloneInInt8(options, int8, node), nullptr));
    EvaluateCallOptions call;
    call.name = "fallback ranking " + node;
    SPARQ_ASSIGN_OR_RETURN(EvalReport e, evaluator.Evaluate(candidate, call));
    out.push_back({node, MetricValue(metric, e)});
  }
  SortLowestFirst(out);
  return out;
}

}  // namespace

int FallbackLayerLimit(int max_layers, int int8_layers) {
  if (max_layers >= 1) return max_layers;
  return std::max(8, (int8_layers + 1) / 2);
}

StatusOr<FallbackResult> QuantizeWithFallback(const Model& float_model, const CalibrationTable& table,
                                              const QuantizeOptions& options, QuantizedCandidate start,
                                              Evaluator& evaluator,
                                              const std::function<bool(const EvalReport&)>& passes,
                                              const FallbackOptions& fallback) {
  FallbackResult result;
  result.options = options;
  result.final = std::move(start);
  result.passed = passes(result.final.eval);
  if (result.passed) return result;
  SPARQ_ASSIGN_OR_RETURN(TensorMap first, evaluator.FirstBatch());
  const TensorMap batch = RankingBatch(float_model.graph, std::move(first));
  // Layers ranked alone are ranked once: moving one layer does not change
  // what another does alone. kLayerSqnr ranks the latest attempt again.
  std::vector<LayerSqnr> ranked;
  if (fallback.ranking == FallbackRanking::kOutputSqnrAlone) {
    SPARQ_ASSIGN_OR_RETURN(ranked, LayerAloneScores(float_model, table, options, result.final.report.layers, batch,
                                                    fallback.threads, fallback.boxes));
  } else if (fallback.ranking == FallbackRanking::kMetricAlone) {
    SPARQ_ASSIGN_OR_RETURN(ranked, LayerAloneMetric(float_model, table, options, result.final.report.layers,
                                                    evaluator, fallback.metric));
  }
  const char* unit = fallback.ranking == FallbackRanking::kMetricAlone ? "" : " dB";
  const std::string what = fallback.ranking == FallbackRanking::kLayerSqnr ? "its output SQNR"
                           : fallback.ranking == FallbackRanking::kOutputSqnrAlone
                               ? (fallback.boxes.enabled ? "class-score SQNR with it alone in INT8"
                                                         : "model output SQNR with it alone in INT8")
                               : std::string(MetricName(fallback.metric)) + " with it alone in INT8";
  // The best attempt so far: the first that passes, else the highest metric
  // (the fewest layers moved on a tie). A NaN metric (a model computing
  // NaN/Inf) is below every number, so any finite attempt beats such a start.
  auto score = [&](const EvalReport& e) {
    const double v = MetricValue(fallback.metric, e);
    return std::isnan(v) ? -HUGE_VAL : v;
  };
  double best_metric = score(result.final.eval);
  size_t best_steps = 0;
  QuantizeOptions attempt = options;
  QuantizedCandidate latest_storage;
  const QuantizedCandidate* latest = &result.final;
  auto moved = [&](const std::string& node) {
    return std::any_of(result.steps.begin(), result.steps.end(), [&](const FallbackStep& s) { return s.node == node; });
  };
  const int limit = FallbackLayerLimit(fallback.max_layers,
                                       static_cast<int>(Int8Layers(result.final.report.layers).size()));
  while (static_cast<int>(result.steps.size()) < limit) {
    if (fallback.ranking == FallbackRanking::kLayerSqnr) {
      SPARQ_ASSIGN_OR_RETURN(ranked, LayerOutputSqnr(float_model, latest->model, latest->report.layers, batch,
                                                     fallback.threads));
    }
    const LayerSqnr* culprit = nullptr;
    for (const LayerSqnr& l : ranked)
      if (!moved(l.node)) {
        culprit = &l;
        break;
      }
    if (culprit == nullptr) break;
    const LayerSqnr chosen = *culprit;
    attempt.layers.insert(attempt.layers.begin(), LayerRule{EscapeRegex(chosen.node), fallback.to});
    if (fallback.log) {
      fallback.log("fallback: " + chosen.node + " to " + PrecisionName(fallback.to) + " (" + what + ": " +
                   std::to_string(chosen.sqnr_db) + unit + ")");
    }
    QuantizedCandidate next;
    SPARQ_ASSIGN_OR_RETURN(next.model, QuantizeModel(float_model, table, attempt, &next.report));
    EvaluateCallOptions call;
    call.name = "fallback " + std::to_string(result.steps.size() + 1);
    SPARQ_ASSIGN_OR_RETURN(next.eval, evaluator.Evaluate(next.model, call));
    const bool passed = passes(next.eval);
    const double metric = MetricValue(fallback.metric, next.eval);
    result.steps.push_back(
        {chosen.node, PrecisionName(fallback.to), FallbackRankingName(fallback.ranking), chosen.sqnr_db, metric});
    if (passed || score(next.eval) > best_metric) {
      best_metric = score(next.eval);
      best_steps = result.steps.size();
      result.final = std::move(next);
      result.options = attempt;
      latest = &result.final;
    } else {
      latest_storage = std::move(next);
      latest = &latest_storage;
    }
    if (passed) {
      result.passed = true;
      break;
    }
  }
  for (size_t k = 0; k < result.steps.size(); ++k) result.steps[k].kept = k < best_steps;
  if (!result.passed) result.passed = passes(result.final.eval);  // the caller's verdict is the kept model's
  return result;
}

}  // namespace sparq
