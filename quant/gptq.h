// Activation-aware INT4 weight quantization (internal to quant): GPTQ and AWQ
// over the block-wise layout of quant/int4.h, from statistics of each
// layer's input X on calibration data (the float model's own activations).
//
// GPTQ (Frantar et al., "GPTQ", 2023): rows of W [K, N] (input channels) are
// quantized one after another; each row's rounding error is spread over the
// rows not yet quantized through the inverse Hessian of the layer's squared
// output error, H = X^T X + damp I:
//
//   U = chol(H^-1)^T (upper)          for k = 0 .. K-1:
//                                       q_k = Q(w_k)        (block params taken at
//                                       e   = (w_k - q_k) / U_kk    each block's first row)
//                                       w_j -= U_kj e   for j > k
//
// done in lazy batches of rows so the trailing update is one GEMM per batch.
// AWQ (Lin et al., "AWQ", 2024): per input channel j a scale
// s_j = mean|x_j|^alpha (normalized), W' = diag(s) W, X' = X / s (folded
// into X's producer as smoothing does); alpha from a grid, the one whose
// RTN weights give the least output error tr(E^T H E), E = W - diag(1/s) Q(W')
// (alpha 0 is plain RTN, so AWQ never scores worse than RTN on its data).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "kernels/parallel.h"
#include "quant/int4.h"
#include "sparq/dataset.h"
#include "sparq/graph.h"
#include "sparq/status.h"

namespace sparq {

// Sums over every row x (all leading axes flattened) of one layer input.
struct InputStatistics {
  int64_t k = 0;
  int64_t rows = 0;
  std::vector<double> gram;     // [K, K]: sum x^T x
  std::vector<double> abs_sum;  // [K]: sum |x_j|
};

// Adds x^T x of `rows` rows x [rows, k] (row-major) to gram [k, k], and
// |x_j| to abs_sum [k] when not null: float GEMMs of 1024 rows, summed in
// double, so the result is the same for any pool. InvalidArgument "holds NaN
// or Inf (row r)" (the caller names the tensor).
Status AddToGram(const float* x, int64_t rows, int64_t k, std::vector<double>* gram, std::vector<double>* abs_sum,
                 ThreadPool* pool);

// The statistics of every activation that a MatMul / Gemm with a constant
// weight reads (quant/layer_inputs.h), keyed by tensor name, over `batches`.
// Memory: K^2 doubles per activation. Errors: the Executor's (named);
// InvalidArgument for NaN / Inf in an activation or no batch.
StatusOr<std::map<std::string, InputStatistics>> MeasureInputStatistics(const Model& model, const BatchFn& batches,
                                                                       int threads);

// The block-wise parameters and codes of quant/int4.h's rule (the same as
// QuantizeInt4Rtn): scale and zero point of `count` values; the code of one
// value; its dequantized value.
struct Int4Params {
  float scale = 1.0f;
  uint8_t zero_point = 0;  // uint4; 0 when symmetric
};
Int4Params Int4BlockParams(const float* values, int64_t count, int64_t stride, bool symmetric);
int8_t Int4Code(float v, const Int4Params& p, bool symmetric);
float Int4Value(int8_t code, const Int4Params& p, bool symmetric);

// W [K, N] (row-major) dequantized: codes -> (code - zp) * scale.
std::vector<float> DequantizeInt4(const BlockwiseInt4& q);

struct GptqOptions {
  int64_t block_size = 32;
  bool symmetric = false;
  double damp = 0.01;      // added to H's diagonal, times its mean
  int64_t lazy_rows = 128; // rows per lazy batch (rounded up to a multiple of block_size)
};

// GPTQ of one weight W [K, N] (row-major) with its input's statistics.
// InvalidArgument for mismatched sizes; H that stays singular after damping
// x10^3 -> InvalidArgument (the caller may fall back to RTN).
StatusOr<BlockwiseInt4> QuantizeInt4Gptq(const float* w, int64_t k, int64_t n, const InputStatistics& x,
                                         const GptqOptions& options, ThreadPool* pool);

// Output error of quantized weights against the float ones on the
// statistics' data: tr(E^T H E), E = W - Wq, both [K, N].
double Int4OutputError(const float* w, const float* wq, int64_t k, int64_t n, const std::vector<double>& gram,
                       ThreadPool* pool);

struct AwqOptions {
  int64_t block_size = 32;
  bool symmetric = false;
  int grid = 20;  // alpha in {0, 1/grid, ..., (grid-1)/grid}
};
struct AwqChoice {
  std::vector<float> scales;  // s [K]; all 1 when alpha = 0 won
  double alpha = 0;
  double error = 0;      // tr(E^T H E) summed over the group's layers, at alpha (FP32 GEMM, double sums)
  double error_rtn = 0;  // the same at alpha = 0
};

// AWQ's scales for the layers that read one activation: `weights` are their
// W [K, N_i] (row-major, float32), `x` the activation's statistics.
StatusOr<AwqChoice> ChooseAwqScales(const std::vector<Tensor>& weights, const InputStatistics& x,
                                    const AwqOptions& options, ThreadPool* pool);

}  // namespace sparq

namespace sparq {

// What AWQ did to one activation.
struct AwqInput {
  std::string tensor;
  std::vector<std::string> layers;  // NodeKey of the layers reading it
  double alpha = 0;
  double error = 0, error_rtn = 0;  // tr(E^T H E) summed over the layers
  std::string folded_into;          // "" when alpha 0 won (nothing changed)
};

// The float model with every MatMul / Gemm input group rescaled by AWQ's
// choice (groups whose choice is alpha 0 stay as they are). `stats` from
// MeasureInputStatistics on the same model; they describe x, not x / s:
// ScaledStatistics gives those of the result.
StatusOr<Model> AwqModel(const Model& model, const std::map<std::string, InputStatistics>& stats,
                         const AwqOptions& options, int threads, std::vector<AwqInput>* report);

// GPTQ of the weight of every MatMul / Gemm of `model` whose input has
// statistics, as W [K, N], keyed by NodeKey. Layers run in parallel on
// `threads` (each one's arithmetic is the same for any thread count).
StatusOr<std::map<std::string, BlockwiseInt4>> GptqModelWeights(const Model& model,
                                                                const std::map<std::string, InputStatistics>& stats,
                                                                const GptqOptions& options, int threads);

// The statistics of x / s from those of x.
InputStatistics ScaledStatistics(const InputStatistics& x, const std::vector<float>& s);

}  // namespace sparq
