// Helpers shared by the pruning library's files. Internal to sparq.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "graph/graph_editor.h"
#include "graph/name_pattern.h"
#include "graph/value_index.h"
#include "sparq/executor.h"
#include "sparq/prune.h"

namespace sparq {
namespace prune_internal {

// --- names and rules -------------------------------------------------------

// Layer-name patterns: NameMatches, CheckNamePattern, EscapeRegex
// (graph/name_pattern.h).

// "a, b, c" (at most `limit` names, then ", ... (N in all)").
std::string JoinNames(const std::vector<std::string>& names, size_t limit = 12);
// "%.4g"-style short number.
std::string FormatNumber(double v, int precision = 4);

// --- graph access -----------------------------------------------------------

// The stored tensor of a weight value: an initializer or a Constant node's
// `value` attribute; nullptr when it is neither.
Tensor* MutableWeight(Graph& g, const std::string& name);
// Fresh names: GraphEditor::FreshName; reader counts: CountReaders
// (graph/).

// Index of the node named `name` in g.nodes, or -1.
int FindNodeIndex(const Graph& g, const std::string& name);
// Total elements of all float32 initializers and Constant tensors.
int64_t CountFloatParams(const Graph& g);

// Effective bias of a layer (Gemm: beta * C; MatMul: its bias Add's
// constant), zeros when it has none.
std::vector<double> LayerEffectiveBias(const Model& m, const WeightedLayer& L);
// Sets the layer's effective bias, adding a bias input (Conv, Gemm) or an Add
// node after a MatMul when it has none; a bias shared with other nodes is
// copied first.
Status SetLayerBias(Model* m, const WeightedLayer& L, const std::vector<double>& bias);

// --- masks -------------------------------------------------------------------

// One group of a structured mask: its pooled score and element count.
struct GroupScore {
  double score = 0.0;
  int64_t size = 0;
};
// Group scores of an unstructured (one group per element) or block
// structure, block-row major. Pooling: mean, or RMS for kL2.
std::vector<GroupScore> PooledGroupScores(const PruneStructure& structure, const Matrix& scores, PruneScore pooling);
// Score of a row (mean or RMS of its elements).
double PooledRowScore(const Matrix& scores, int64_t row, PruneScore pooling);

// Per-layer sparsities from one global ranking of the group scores of
// several layers (unstructured or block only); see PruneOptions::scope.
std::vector<double> GlobalSparsities(const std::vector<const Matrix*>& scores,
                                     const std::vector<PruneStructure>& structures, double target,
                                     double max_layer_sparsity, PruneScore pooling);

// --- activations ------------------------------------------------------------

// The rows a layer multiplies its weight with, for one Conv group: im2col
// rows (sampled positions) for Conv, the flattened [-1, K] input for Gemm and
// MatMul. `input` is the layer's input activation for one batch.
Status LayerInputRows(const Node& node, const WeightedLayer& layer, const Tensor& input, int64_t group,
                      int64_t max_rows_per_sample, Matrix* rows);

// Runs `exec` on `batch` and calls `fn(value, tensor)` once for each name in
// `values` when it becomes available (graph inputs first); the run stops as
// soon as every value was seen.
Status RunAndTap(Executor& exec, const TensorMap& batch, const std::set<std::string>& values,
                 const std::function<Status(const std::string&, const Tensor&)>& fn);

// Calls `fn(batch)` for every batch of `data`. InvalidArgument when there is
// none.
Status ForEachBatch(const BatchSource& data, const std::function<Status(const TensorMap&)>& fn, int64_t* batches);

// --- channels ------------------------------------------------------------------

// Channel masks for the channel-structured layers in `targets` (node ->
// sparsity): channels tied across producers are pruned together; a class is
// scored by the sum over its producers of the row score divided by that
// producer's mean row score. Producers of a locked group, or tied to a
// producer not in `targets`, stay dense and are reported in `skipped`.
StatusOr<std::map<std::string, PruneMask>> ComputeChannelMasks(
    const Model& model, const std::map<std::string, double>& targets, const std::map<std::string, Matrix>& scores,
    PruneScore pooling, std::vector<std::pair<std::string, std::string>>* skipped);

// For the channel-structured layers that `plans` prune: the ones that must
// stay dense after all (not a traceable producer, locked, or tied to a layer
// left dense), with the reason, into `dense`.
Status ChannelPlanReasons(const Model& model, const std::vector<LayerPlan>& plans,
                                         std::map<std::string, std::string>* dense);

// --- retraining -----------------------------------------------------------------

// InvalidArgument (prefixed by `where`) unless `after` has the graph of
// `before` (inputs, outputs, nodes in order with their inputs and outputs)
// and the same initializers by name, type and shape.
Status CheckRetrainedModel(const Model& before, const Model& after, const std::string& where);
// The mask in the layout of the layer's stored weight: uint8, 1 = kept.
Tensor MaskAsWeight(const WeightedLayer& layer, const PruneMask& mask);

}  // namespace prune_internal
}  // namespace sparq
