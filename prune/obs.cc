// OBS / SparseGPT-style pruning of one layer: the mask is chosen with the
// inverse Hessian of the layer's least-squares objective, and every pruned
// weight's error is spread onto the weights not yet visited (Frantar &
// Alistarh 2023, "SparseGPT"; OBC / OBS before it).
//
//   A  = H + lambda I              H = X_p^T X_p (inputs of the pruned model)
//   W* = (C + lambda W_d) A^-1     C = Y_d^T X_p (outputs of the dense layer)
//   A^-1 = U^T U                   U upper triangular (UpperCholeskyOfInverse)
//
//   ||X_p W^T - Y_d||^2 + lambda ||W - W_d||^2 = (W - W*) A (W - W*)^T + const,
//   so pruning starts from W* and removes weights by OBS on A:
//
//        columns j = 0 .. cols-1, in order (per row r)
//        ┌─────────────────────────────────────────────┐
//   w_r  │ done (fixed) │ j │   later: absorb the error │
//        └─────────────────────────────────────────────┘
//        prune w_rj:  e = w_rj / U_jj;  w_r[k] -= e U_jk (k > j);  w_rj = 0
//        saliency of w_rj (which to prune): w_rj^2 / U_jj^2
//
// Row by row the sweep needs only U, so rows run in parallel; the choice of
// an unstructured block (pooled over rows) is made between blocks, in one
// place, so results do not depend on the pool. The kept weights are then
// re-fitted exactly for the chosen mask (RecoverLayer), damped toward the
// sweep's weights, which can only lower the error further.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "kernels/parallel.h"
#include "kernels/ref/gemm.h"
#include "kernels/ref/linalg.h"
#include "prune/internal.h"

namespace sparq {

const char* RecoveryMethodName(RecoveryMethod m) {
  switch (m) {
    case RecoveryMethod::kLeastSquares:
      return "least_squares";
    case RecoveryMethod::kObs:
      return "obs";
  }
  return "?";
}

namespace {

// Indices of the `count` smallest of `score` (ties: lower index first).
std::vector<int64_t> SmallestIndices(const std::vector<double>& score, int64_t count) {
  std::vector<int64_t> idx(score.size());
  std::iota(idx.begin(), idx.end(), int64_t{0});
  count = std::min<int64_t>(count, static_cast<int64_t>(idx.size()));
  auto less = [&](int64_t a, int64_t b) { return score[a] < score[b] || (score[a] == score[b] && a < b); };
  std::nth_element(idx.begin(), idx.begin() + count, idx.end(), less);
  idx.resize(static_cast<size_t>(count));
  return idx;
}

// Prunes column j of row w (length cols): spreads its error onto the later columns.
inline void PruneColumn(double* w, const double* u_row_j, int64_t j, int64_t cols) {
  const double e = w[j] / u_row_j[j];
  for (int64_t k = j + 1; k < cols; ++k) w[k] -= e * u_row_j[k];
  w[j] = 0.0;
}

}  // namespace

StatusOr<LayerRecoveryResult> RecoverLayerObs(const LayerStatistics& stats, const PruneStructure& structure,
                                              const PruneMask& budget, const Matrix& dense,
                                              const RecoveryOptions& options, Matrix* weights, PruneMask* mask_out,
                                              std::vector<double>* bias_shift, ThreadPool* pool) {
  const int64_t rows = stats.rows(), cols = stats.cols();
  const bool nm = structure.kind == PruneStructure::Kind::kNM;
  if (!nm && structure.kind != PruneStructure::Kind::kUnstructured)
    return Status::InvalidArgument("obs recovery: structure " + structure.ToString() +
                                   " is not supported (unstructured or N:M only)");
  if (nm && (structure.n < 1 || structure.m <= structure.n))
    return Status::InvalidArgument("obs recovery: bad N:M structure " + structure.ToString());
  if (budget.rows != rows || budget.cols != cols || budget.keep.size() != static_cast<size_t>(rows * cols) ||
      dense.rows != rows || dense.cols != cols || dense.values.size() != static_cast<size_t>(rows * cols) ||
      weights == nullptr) {
    return Status::InvalidArgument("obs recovery: statistics are " + std::to_string(rows) + "x" +
                                   std::to_string(cols) + ", mask " + std::to_string(budget.rows) + "x" +
                                   std::to_string(budget.cols) + ", dense weights " + std::to_string(dense.rows) +
                                   "x" + std::to_string(dense.cols));
  }
  if (options.obs_block < 1) return Status::InvalidArgument("obs recovery: obs_block must be >= 1");
  if (stats.samples() == 0) return Status::InvalidArgument("obs recovery: the statistics hold no samples");

  const std::vector<double>& H = stats.gram();
  double diag = 0.0;
  for (int64_t c = 0; c < cols; ++c) diag += H[c * cols + c];
  diag /= static_cast<double>(std::max<int64_t>(cols, 1));
  if (!(diag > 0.0)) {
    // Inputs always zero: nothing to choose by; the budget mask and least squares.
    *weights = dense;
    if (mask_out) *mask_out = budget;
    return RecoverLayer(stats, budget, options, weights, bias_shift, pool);
  }
  // U with A^-1 = U^T U, damping raised tenfold while A is not SPD to working precision.
  std::vector<double> u;
  double lambda = 0.0;
  bool ok = false;
  for (int attempt = 0; attempt < 4 && !ok; ++attempt) {
    lambda = options.damping * std::pow(10.0, attempt) * diag + (attempt > 0 ? 1e-12 * diag : 0.0);
    u = H;
    for (int64_t c = 0; c < cols; ++c) u[c * cols + c] += lambda;
    ok = UpperCholeskyOfInverse(u, cols);
  }
  if (!ok) return Status::InvalidArgument("obs recovery: the layer's input Hessian stays singular after damping");

  // W* = (C + lambda W_d) U^T U.
  std::vector<double> b(static_cast<size_t>(rows * cols)), t(static_cast<size_t>(rows * cols)),
      w(static_cast<size_t>(rows * cols));
  for (int64_t i = 0; i < rows * cols; ++i) b[i] = stats.cross()[i] + lambda * static_cast<double>(dense.values[i]);
  GemmF64Ref(false, true, rows, cols, cols, 1.0, b.data(), cols, u.data(), cols, 0.0, t.data(), cols, pool);
  GemmF64Ref(false, false, rows, cols, cols, 1.0, t.data(), cols, u.data(), cols, 0.0, w.data(), cols, pool);
  b.clear();
  t.clear();

  PruneMask mask{rows, cols, std::vector<uint8_t>(static_cast<size_t>(rows * cols), 1)};
  auto budget_zeros = [&](int64_t r, int64_t c0, int64_t c1) {
    int64_t z = 0;
    for (int64_t c = c0; c < c1; ++c) z += budget.keep[r * cols + c] == 0;
    return z;
  };
  if (nm) {
    const int64_t m = structure.m;
    ParallelFor(pool, rows, 1, [&](int64_t r0, int64_t r1) {
      std::vector<double> score;
      for (int64_t r = r0; r < r1; ++r) {
        double* wr = w.data() + r * cols;
        for (int64_t g0 = 0; g0 < cols; g0 += m) {
          const int64_t g1 = std::min(cols, g0 + m);
          score.resize(static_cast<size_t>(g1 - g0));
          for (int64_t c = g0; c < g1; ++c) {
            const double d = u[c * cols + c];
            score[c - g0] = wr[c] * wr[c] / (d * d);
          }
          std::vector<int64_t> out = SmallestIndices(score, budget_zeros(r, g0, g1));
          std::sort(out.begin(), out.end());
          for (int64_t i : out) mask.keep[r * cols + g0 + i] = 0;
          for (int64_t c = g0; c < g1; ++c)
            if (mask.keep[r * cols + c] == 0) PruneColumn(wr, u.data() + c * cols, c, cols);
        }
      }
    });
  } else {
    const int64_t bs = options.obs_block;
    std::vector<double> score;
    for (int64_t c0 = 0; c0 < cols; c0 += bs) {
      const int64_t c1 = std::min(cols, c0 + bs), width = c1 - c0;
      int64_t count = 0;
      for (int64_t r = 0; r < rows; ++r) count += budget_zeros(r, c0, c1);
      score.resize(static_cast<size_t>(rows * width));
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = c0; c < c1; ++c) {
          const double d = u[c * cols + c], v = w[r * cols + c];
          score[r * width + (c - c0)] = v * v / (d * d);
        }
      for (int64_t i : SmallestIndices(score, count)) mask.keep[(i / width) * cols + c0 + i % width] = 0;
      ParallelFor(pool, rows, 1, [&](int64_t r0, int64_t r1) {
        for (int64_t r = r0; r < r1; ++r)
          for (int64_t c = c0; c < c1; ++c)
            if (mask.keep[r * cols + c] == 0) PruneColumn(w.data() + r * cols, u.data() + c * cols, c, cols);
      });
    }
  }

  // Least squares on the chosen mask, damped toward the sweep's weights.
  *weights = Matrix(rows, cols);
  for (int64_t i = 0; i < rows * cols; ++i) weights->values[i] = mask.keep[i] ? static_cast<float>(w[i]) : 0.0f;
  // The masked dense weights' error, for the report (as RecoverLayer's error_before).
  Matrix masked = dense;
  SPARQ_RETURN_IF_ERROR(ApplyMask(budget, &masked));
  double y2 = 0.0;
  for (double v : stats.sum_y2()) y2 += v;
  double before = 0.0;
  for (double v : stats.SquaredError(masked, pool)) before += v;
  SPARQ_ASSIGN_OR_RETURN(LayerRecoveryResult result, RecoverLayer(stats, mask, options, weights, bias_shift, pool));
  result.error_before = before / std::max(y2, 1e-300);
  if (mask_out) *mask_out = std::move(mask);
  return result;
}

}  // namespace sparq
