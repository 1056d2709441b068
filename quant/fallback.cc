#include "sparq/fallback.h"

#include <algorithm>
#include <map>

#include "graph/value_index.h"
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
  SPARQ_ASSIGN_OR_RETURN(TensorMap batch, evaluator.FirstBatch());
  while (!result.passed && static_cast<int>(result.steps.size()) < fallback.max_layers) {
    SPARQ_ASSIGN_OR_RETURN(std::vector<LayerSqnr> ranked,
                           LayerOutputSqnr(float_model, result.final.model, result.final.report.layers, batch,
                                           fallback.threads));
    const LayerSqnr* worst = nullptr;
    for (const LayerSqnr& l : ranked) {
      const bool moved = std::any_of(result.steps.begin(), result.steps.end(),
                                     [&](const FallbackStep& s) { return s.node == l.node; });
      if (!moved) {
        worst = &l;
        break;
      }
    }
    if (worst == nullptr) break;
    result.options.layers.insert(result.options.layers.begin(), LayerRule{worst->node, fallback.to});
    if (fallback.log) {
      fallback.log("fallback: " + worst->node + " to " + PrecisionName(fallback.to) + " (output SQNR " +
                   std::to_string(worst->sqnr_db) + " dB)");
    }
    QuantizedCandidate next;
    SPARQ_ASSIGN_OR_RETURN(next.model, QuantizeModel(float_model, table, result.options, &next.report));
    EvaluateCallOptions call;
    call.name = "fallback " + std::to_string(result.steps.size() + 1);
    SPARQ_ASSIGN_OR_RETURN(next.eval, evaluator.Evaluate(next.model, call));
    result.passed = passes(next.eval);
    result.steps.push_back({worst->node, PrecisionName(fallback.to), worst->sqnr_db,
                            MetricValue(fallback.metric, next.eval)});
    result.final = std::move(next);
  }
  return result;
}

}  // namespace sparq
