// AdaRound (Nagel et al. 2020, "Up or Down? Adaptive Rounding for
// Post-Training Quantization") for INT8 weights: each weight of a Conv /
// MatMul / Gemm is rounded up or down, chosen per layer by the rounding that
// best keeps the layer's output on calibration data, instead of to nearest.
//
// Per layer (per Conv group), with W [rows, cols] its GEMM view
// (sparq/weighted_layer.h), s the per-row int8 scale QuantizeWeightSymmetric
// gives, H = X^T X of the layer's input rows on the float model's
// activations (Conv: im2col rows) and N their count:
//
//   h(V)   = clip(sigmoid(V) * (zeta - gamma) + gamma, 0, 1)    zeta 1.1, gamma -0.1
//   W~     = s * clamp(floor(W / s) + h(V), -127, 127)          V starts where h(V) = frac(W / s)
//   loss   = tr((W~ - W) H (W~ - W)^T) / N  +  lambda * sum (1 - |2 h(V) - 1|^beta)
//
// minimized by Adam (quant/adam.h); the regularizer is off for the first
// `warmup` of the iterations, then beta decays linearly from beta_start to
// beta_end; the codes are floor(W / s) + (h(V) >= 0.5). The output term in
// the Gram form needs no backward kernels: d/dW~ = 2 (W~ - W) H / N.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "sparq/dataset.h"  // BatchFn
#include "sparq/export.h"
#include "sparq/graph.h"
#include "sparq/quantize.h"
#include "sparq/status.h"

namespace sparq {

struct SPARQ_API AdaRoundOptions {
  int iterations = 500;         // Adam steps per layer (the paper: 10,000); >= 1
  double regularization = 0.01; // lambda; >= 0
  double warmup = 0.2;          // fraction of the iterations without the regularizer; [0, 1)
  double beta_start = 20.0;     // the regularizer's exponent, decayed linearly after warm-up
  double beta_end = 2.0;        // 0 < beta_end <= beta_start
  double learning_rate = 1e-2;  // Adam's, on V; > 0
  // Conv: im2col rows of at most this many output positions per sample
  // (evenly spread) go into H; MatMul / Gemm rows are all taken. >= 1.
  int64_t max_positions_per_sample = 1024;
  int threads = 0;  // the executor and the layers' fits; 0 = one per hardware thread
};

// What AdaRound did to one layer (NodeKey), errors in the loss's first term
// summed over the layer's groups.
struct SPARQ_API AdaRoundLayer {
  std::string layer;
  int64_t weights = 0;
  int64_t changed = 0;           // codes that differ from nearest rounding
  double error_nearest = 0.0;    // tr(E H E^T) / N of nearest rounding
  double error_adaround = 0.0;   // the same of the codes written
  bool kept_nearest = false;     // AdaRound's codes did no better on the data: nearest kept
};

struct SPARQ_API AdaRoundResult {
  // Keyed by NodeKey (node name, or "@<first output>" after BatchNorm folding):
  // the value for QuantizeOptions::rounded_weights.
  std::map<std::string, QuantizedWeight> weights;
  std::vector<AdaRoundLayer> layers;  // in graph order
};

// AdaRound's int8 weights for every Conv / MatMul / Gemm that
// QuantizeModel(model, _, options) may make static INT8 (after BatchNorm
// folding when options.fold_batchnorm; per channel when the model's opset
// allows it, as QuantizeModel), from one pass of `batches` through the float
// model. Deterministic: the same bytes for any thread count.
// Errors: InvalidArgument for options out of range (naming the field), for
// FP8, dynamic or QOperator quantize options, and when `batches` yields no
// batch; those of FoldBatchNorm and of the Executor on the data (named);
// InvalidArgument naming the layer when its input holds NaN or Inf.
SPARQ_API StatusOr<AdaRoundResult> MeasureAdaRound(const Model& model, const BatchFn& batches,
                                                   const QuantizeOptions& options, const AdaRoundOptions& adaround = {});

}  // namespace sparq
