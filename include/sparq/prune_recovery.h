// Recovery after pruning (OBS / SparseGPT-style least squares, no labels, no
// training): re-fit the kept weights so each layer reproduces the dense
// layer's outputs on calibration data; and the activation norms of the
// activation score.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "sparq/dataset.h"  // BatchSource
#include "sparq/export.h"
#include "sparq/graph.h"
#include "sparq/prune_masks.h"
#include "sparq/prune_structure.h"
#include "sparq/status.h"

namespace sparq {

class ThreadPool;  // kernels/parallel.h

// BatchSource (sparq/dataset.h): pruning reads the calibration data once per
// step (and per layer with sequential recovery).

// Cost per layer: the statistics take O(samples * cols^2) time and
// O(cols^2) memory; the solve O(k^3) per distinct kept-column set (Cholesky)
// or O(iterations * rows * cols^2) (conjugate gradients). Example: resnet18,
// 50% unstructured, 4 calibration images of 224x224: a few CPU-minutes on
// 2 cores, most of it in the 512-channel layers (4608 inputs per row).
// How a pruned layer is re-fitted.
enum class RecoveryMethod {
  // The mask stays as the score chose it; the kept weights are re-fitted by
  // damped least squares (RecoverLayer).
  kLeastSquares,
  // OBS / SparseGPT (Frantar & Alistarh 2023): the mask of unstructured and
  // N:M layers is chosen again with the inverse Hessian while each pruned
  // weight's error is spread onto the inputs not yet visited, then the kept
  // weights are re-fitted by least squares (RecoverLayerObs). Block and
  // channel layers, and layers whose structure is not known, keep kLeastSquares.
  kObs,
};
SPARQ_API const char* RecoveryMethodName(RecoveryMethod m);  // "least_squares", "obs"

struct SPARQ_API RecoveryOptions {
  RecoveryMethod method = RecoveryMethod::kLeastSquares;
  // kObs: the structure of each layer by node name (PruneModel fills it from
  // its plan); a layer missing here is re-fitted by least squares.
  std::map<std::string, PruneStructure> structures;
  // kObs, unstructured layers: columns per block; each block prunes as many
  // weights as the score's mask does there, the lowest OBS saliencies over
  // all rows of the block. >= 1.
  int64_t obs_block = 128;
  // Damping: lambda = damping * mean(diag(H)), H = X^T X, pulling the fit
  // toward the masked weights.
  double damping = 0.01;
  // Shift the bias so the layer's mean output on the calibration data equals
  // the dense layer's (a bias is added to a layer without one when needed).
  bool bias_correction = true;
  // Conv: output positions sampled per sample (spread evenly over the
  // image), bounding the cost of the statistics on large images.
  int64_t max_rows_per_sample = 256;
  // The name of a model input [batch, tokens] whose zero entries mark padding
  // positions (a transformer's attention_mask); empty: none. A MatMul / Gemm
  // layer whose input holds one row per position of that input ([batch,
  // tokens, K] or [batch * tokens, K], in the same order) is fitted on the
  // rows where it is non-zero only: the outputs at padded positions are
  // thrown away by the attention mask and the pooling, so their rows (most
  // of them with short sentences) should not pull the fit. Every other layer
  // (Conv, inputs of another shape) uses every row. InvalidArgument when the
  // data has no such input or it is not [batch, tokens].
  std::string token_mask;
  // true: layers are recovered one after the other in graph order, each on
  // the inputs of the model whose earlier layers are already recovered (one
  // pass over the data per layer, stopping at the layer). false: one pass
  // gathers every layer's statistics from the pruned, not yet recovered model
  // (faster, less exact, memory O(sum of cols^2)).
  bool sequential = true;
  // Rows keeping at most this many inputs are solved exactly by Cholesky
  // (rows with the same kept columns share one factorization); rows keeping
  // more by Jacobi-preconditioned conjugate gradients from the current
  // weights, 64 rows at a time (one GEMM with H per block and iteration).
  int64_t max_direct_cols = 512;
  int cg_iterations = 30;
  double cg_tolerance = 1e-4;  // relative residual at which a row stops
  // Progress lines, one per recovered layer; optional.
  std::function<void(const std::string&)> log;
  int threads = 0;             // 0 = one per hardware thread
};

// Streaming least-squares statistics of one layer (one Conv group) over the
// calibration data: X are the layer's inputs in the pruned model (im2col rows
// for Conv), Y the dense layer's outputs on the dense model's inputs, without
// bias. Memory O(cols^2 + rows * cols), whatever the amount of data.
class SPARQ_API LayerStatistics {
 public:
  LayerStatistics(int64_t rows, int64_t cols);

  // Adds n samples: x [n, cols] and y [n, rows], row-major. Accumulates in
  // double; deterministic for any pool. InvalidArgument on NaN/Inf input.
  Status Add(const float* x, const float* y, int64_t n, ThreadPool* pool = nullptr);

  int64_t rows() const { return rows_; }
  int64_t cols() const { return cols_; }
  int64_t samples() const { return samples_; }
  const std::vector<double>& gram() const { return gram_; }    // H = X^T X  [cols, cols]
  const std::vector<double>& cross() const { return cross_; }  // Y^T X      [rows, cols]
  const std::vector<double>& sum_x() const { return sum_x_; }  // [cols]
  const std::vector<double>& sum_y() const { return sum_y_; }  // [rows]
  const std::vector<double>& sum_y2() const { return sum_y2_; }  // [rows]
  // sum over samples of (x . w_r - y_r)^2 for every row r of `w` (the
  // squared output error of weights w, from the statistics alone).
  std::vector<double> SquaredError(const Matrix& w, ThreadPool* pool = nullptr) const;

 private:
  int64_t rows_, cols_, samples_ = 0;
  std::vector<double> gram_, cross_, sum_x_, sum_y_, sum_y2_;
};

struct SPARQ_API LayerRecoveryResult {
  double error_before = 0.0;  // relative output error ||Y_hat - Y||^2 / ||Y||^2 of the masked weights
  double error_after = 0.0;   // the same after re-fitting
  int64_t direct_solves = 0;  // Cholesky factorizations (shared by rows with one mask)
  int64_t iterative_rows = 0; // rows solved by conjugate gradients
};

// Re-fits the kept weights of every row r of `weights` (its [rows, cols] GEMM
// view, pruned by `mask`; pruned entries are set to 0.0f and stay so):
//   w_r[K] = argmin ||X_K w - y_r||^2 + lambda ||w - w0_r[K]||^2,  K = kept columns of row r
// i.e. (H_KK + lambda I) w = (X^T y_r)_K + lambda w0_r[K], with w0 the masked
// input weights and lambda = damping * mean(diag H). Damping toward w0 (not
// zero) means the output error on the statistics never increases.
// With bias_shift non-null (and options.bias_correction) it receives, per
// row, mean(y_r) - mean(x . w_r): the amount to add to the *dense* bias so the
// mean output matches the dense layer. Rows without kept weights keep zeros
// (their shift is then mean(y_r)). Errors: InvalidArgument for mismatched
// shapes or statistics without samples.
SPARQ_API StatusOr<LayerRecoveryResult> RecoverLayer(const LayerStatistics& stats, const PruneMask& mask,
                                           const RecoveryOptions& options, Matrix* weights,
                                           std::vector<double>* bias_shift = nullptr,
                                           ThreadPool* pool = nullptr);

// OBS / SparseGPT mask selection with weight updates, then least squares.
// With A = H + lambda I (lambda = damping * mean(diag H)) and U the upper
// Cholesky factor of A^-1 (A^-1 = U^T U):
//   1. W* = (C + lambda W_dense) A^-1: the unconstrained fit to the dense
//      outputs, so pruning also corrects the drift of earlier pruned layers
//      (the objective is then (W - W*) A (W - W*)^T + const);
//   2. columns are visited in order; a weight w_rj to prune is chosen by its
//      saliency w_rj^2 / U_jj^2 and its error e = w_rj / U_jj is spread onto
//      the later columns, w_r[k] -= e U_jk (k > j);
//   3. the kept weights are re-fitted by RecoverLayer, damped toward step 2's.
// Which weights go: `budget` (the score's mask) gives how many. N:M: in each
// row, each group of m consecutive columns prunes as many as `budget` does
// there, chosen when the sweep reaches the group. Unstructured: each block of
// options.obs_block columns prunes as many as `budget` does in it, the lowest
// saliencies over all rows when the sweep reaches the block. Rows are
// independent given the block choices: the result is the same for any pool.
// `weights` is [rows, cols] out: the pruned weights (0.0f where pruned);
// `mask_out`, when non-null, receives the chosen mask; `bias_shift` as in
// RecoverLayer. Errors: InvalidArgument for mismatched shapes, a structure
// other than unstructured or N:M, statistics without samples, or an A that
// stays singular after damping.
SPARQ_API StatusOr<LayerRecoveryResult> RecoverLayerObs(const LayerStatistics& stats, const PruneStructure& structure,
                                                        const PruneMask& budget, const Matrix& dense,
                                                        const RecoveryOptions& options, Matrix* weights,
                                                        PruneMask* mask_out = nullptr,
                                                        std::vector<double>* bias_shift = nullptr,
                                                        ThreadPool* pool = nullptr);

struct SPARQ_API ModelRecoveryReport {
  struct Layer {
    std::string node;
    double error_before = 0.0, error_after = 0.0;  // as LayerRecoveryResult, over all groups
    double bias_shift_rms = 0.0;
    std::string method = "least_squares";  // RecoveryMethodName of what re-fitted it
    double seconds = 0.0;  // statistics and solve (sequential: the data pass too)
    int64_t rows = 0;      // rows the fit used (im2col rows, tokens; Conv: per group)
  };
  std::vector<Layer> layers;
  int64_t samples = 0;  // calibration samples (batch rows) read per layer
};

// Recovers the named layers of `pruned` (a copy of `dense` whose weights were
// masked: a weight that is 0.0f counts as pruned) in graph order, running both
// models on `data` with the executor. Biases become dense bias + shift.
// With options.method kObs, a layer named in options.structures as
// unstructured or N:M is re-pruned by RecoverLayerObs (its zeros move; their
// count per group / block stays), every other layer by RecoverLayer.
// Errors: NotFound for an unknown or unsupported layer name; InvalidArgument
// when the models' layers differ in shape or the data is empty or not finite;
// the executor's errors.
SPARQ_API StatusOr<ModelRecoveryReport>
RecoverModel(const Model& dense, Model* pruned, const std::vector<std::string>& layers,
             const BatchSource& data, const RecoveryOptions& options);

// L2 norm of each input column (im2col column for Conv) of each named layer
// over `data` in `model`: the activation norms of PruneScore::kActivation.
// Returned by node name; Conv groups are concatenated (cols * groups values).
SPARQ_API StatusOr<std::map<std::string, std::vector<double>>> ActivationColumnNorms(
    const Model& model, const std::vector<std::string>& layers, const BatchSource& data,
    int64_t max_rows_per_sample = 256, int threads = 0);

}  // namespace sparq
