// SmoothQuant-style scale migration (Xiao et al. 2023, "SmoothQuant"): a
// MatMul / Gemm whose activation has a few channels far larger than the rest
// loses them to one per-tensor int8 scale. Per input channel j,
//
//   s_j = max|X_j|^alpha / max|W_j|^(1 - alpha)
//
//   X ── (X / s) ── MatMul(·, diag(s) W) ──   the same product in exact
//                                              arithmetic; X / s is flat
//
// moves part of each outlier channel's range from the activation into the
// weight's row j (weights are quantized per output column, so a large row
// costs the weight little). X / s is folded into the producer when it can
// take it exactly and nothing else reads X: a LayerNormalization's scale and
// bias, or a MatMul / Gemm's weight columns and bias; else a Mul by 1/s is
// inserted in front of the smoothed layers (TensorRT fuses it into the
// following QuantizeLinear). The result is a float32 model: calibrate and
// quantize it as any other (static Q/DQ, per-tensor activation scales).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "sparq/calibrate.h"
#include "sparq/dataset.h"  // BatchFn, BatchSource
#include "sparq/export.h"
#include "sparq/graph.h"
#include "sparq/quantize.h"
#include "sparq/status.h"

namespace sparq {

// Recipes hold this struct (quantize.smooth).
struct SPARQ_API SmoothOptions {
  bool enabled = false;
  // Migration strength in [0, 1] (0: nothing moves to the weights; 1: the
  // activation becomes flat). Ignored when auto_alpha.
  double alpha = 0.5;
  // Choose alpha among `alphas`: each candidate is smoothed, calibrated and
  // quantized on the fit batches of the calibration data and compared with
  // the float model on its held-out batches (every holdout_every-th batch);
  // the one with the highest output SQNR wins; the model returned is then
  // smoothed at that alpha with the maxima of every calibration batch.
  // Never the evaluation data.
  bool auto_alpha = false;
  std::vector<double> alphas = {0.3, 0.4, 0.5, 0.6, 0.7, 0.8};
  int holdout_every = 4;  // >= 2; with fewer batches than that, every batch both fits and judges
  // Only activations whose largest channel max-abs is at least this many
  // times their median channel's are smoothed (the "outlier channels"); >= 1.
  double min_outlier_ratio = 8.0;
  int threads = 0;  // executor threads; 0 = one per hardware thread
};

// Per input channel (the last axis) max |x| of each activation that a
// MatMul / Gemm with a constant 2-D weight multiplies, over `batches` (the
// float model's own values). Keyed by tensor name. Memory: one float per
// channel and tensor. Errors: those of the Executor (named); InvalidArgument
// when a tensor's last axis does not match its layer's weight, or no batch came.
SPARQ_API StatusOr<std::map<std::string, std::vector<float>>>
MeasureChannelMaxAbs(const Model& model, const BatchFn& batches, int threads = 0);

// What smoothing did to one activation.
struct SPARQ_API SmoothedInput {
  std::string tensor;              // the activation (before smoothing)
  std::vector<std::string> layers;  // the MatMul / Gemm nodes (NodeKey) that read it
  std::string folded_into;         // "LayerNormalization 'x'", "MatMul 'y'", or "Mul 'z'" (inserted)
  double outlier_ratio = 0;        // max channel / median channel max-abs, before
  double ratio_after = 0;          // the same after
};

struct SPARQ_API SmoothReport {
  double alpha = 0;
  std::vector<SmoothedInput> inputs;
  // auto_alpha: each candidate's held-out output SQNR (dB), in `alphas` order.
  std::vector<std::pair<double, double>> alpha_sqnr_db;
};

// The float32 model with each MatMul / Gemm activation of `channel_max` whose
// outlier ratio reaches options.min_outlier_ratio smoothed at `alpha`. Its
// outputs equal the input model's up to float rounding. New weights are new
// initializers; nothing of `model` changes. Errors: InvalidArgument for an
// alpha outside [0, 1] or a channel count that does not match the weight.
SPARQ_API StatusOr<Model> SmoothModel(const Model& model, const std::map<std::string, std::vector<float>>& channel_max,
                                      double alpha, const SmoothOptions& options, SmoothReport* report);

// The whole step for a static INT8 run: measures the channel maxima on
// `calibration`, chooses alpha (options.auto_alpha: each candidate model is
// calibrated with `method` and quantized with `quantize` on the fit batches,
// then judged on the held-out ones), and returns the smoothed float model.
// `calibration` is read once per candidate (each call of it a fresh pass).
SPARQ_API StatusOr<Model> SmoothForInt8(const Model& model, const BatchSource& calibration,
                                        const QuantizeOptions& quantize, const CalibrationMethodOptions& method,
                                        const SmoothOptions& options, SmoothReport* report);

}  // namespace sparq
