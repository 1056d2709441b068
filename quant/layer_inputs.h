// The activations that MatMul / Gemm layers with constant weights multiply,
// and rescaling them along their channels (internal to quant). Shared by
// SmoothQuant-style smoothing (smooth.cc) and AWQ (gptq.cc):
//
//   P ── X ──┬── MatMul(X, W1)            P' ── X/s ──┬── MatMul(X/s, diag(s) W1)
//            └── MatMul(X, W2)     ==>                └── MatMul(X/s, diag(s) W2)
//
// X / s is folded into its producer P when exact (a LayerNormalization's
// scale and bias, or a MatMul / Gemm's output columns and bias) and nothing
// else reads X; else a Mul by 1/s is inserted in front of the group.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "graph/graph_editor.h"
#include "sparq/dataset.h"
#include "sparq/graph.h"
#include "sparq/status.h"

namespace sparq {

// A MatMul / Gemm (QuantizableLayer) that can be rescaled along its reduction axis K.
struct InputLayer {
  size_t index;     // node index
  int64_t k;        // input channels
  bool k_is_rows;   // stored weight [K, N] (MatMul, Gemm transB=0); else [N, K]
};
std::optional<InputLayer> AsInputLayer(const Graph& g, size_t index);

// Each activation read by InputLayers, in graph order, with those layers.
using InputGroup = std::pair<std::string, std::vector<InputLayer>>;
std::vector<InputGroup> LayerInputGroups(const Graph& g);

// Runs `model` over `batches` and calls observe(name, value) for each
// batch's inputs and every node output; `what` prefixes errors ("adaround:
// batch 3"). InvalidArgument when no batch came; observe's errors end the pass.
using ObserveValueFn = std::function<Status(const std::string& name, const Tensor& value)>;
Status ForEachActivation(const Model& model, const BatchFn& batches, int threads, const std::string& what,
                         const ObserveValueFn& observe);

// Runs `model` over `batches` and calls observe(name, value, k) for every
// float32 activation of LayerInputGroups (graph inputs included), after
// checking its last axis is the layers' K. `what` prefixes errors
// ("smooth", "awq"). InvalidArgument when one activation feeds layers of
// different K, or no batch came; observe's errors end the pass.
using ObserveInputFn = std::function<Status(const std::string& name, const Tensor& value, int64_t k)>;
Status ObserveLayerInputs(const Model& model, const BatchFn& batches, int threads, const std::string& what,
                          const ObserveInputFn& observe);

// The weight of `layer` as a [K, N] float32 matrix (transposed when stored [N, K]).
Tensor InputLayerWeightKN(const Graph& g, const InputLayer& layer);

// Rescales the group reading `x` by s (one factor per channel): the layers'
// weights get diag(s) W and x becomes x / s, folded into x's producer or
// through an inserted Mul. Replaced weight names go into `replaced` (see
// DropUnread); `tag` suffixes new names ("smooth", "awq"). Returns where x/s
// was folded: "LayerNormalization 'n'", "MatMul 'm'" or "Mul 'z'" (inserted).
std::string ScaleLayerInput(Graph& g, GraphEditor& ed, const InputGroup& group, const std::vector<float>& s,
                            const std::string& tag, std::set<std::string>* replaced);

// Removes the initializers of `replaced` that nothing reads any more.
void DropUnread(Graph& g, const std::set<std::string>& replaced);

}  // namespace sparq
