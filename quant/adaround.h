// AdaRound of one weight matrix (internal to quant; the model-level pass is
// sparq/adaround.h, which says what is minimized).
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/packed_formats.h"
#include "sparq/adaround.h"
#include "sparq/status.h"

namespace sparq {

// One rounding problem: W [rows, cols] (row-major GEMM view), one scale per
// row, and H = X^T X / N [cols, cols] of the rows' shared input.
class AdaRoundProblem {
 public:
  // InvalidArgument for mismatched sizes, a scale that is not > 0 and finite, or H not finite.
  static StatusOr<AdaRoundProblem> Create(std::vector<float> w, std::vector<float> scales, std::vector<float> h,
                                          int64_t rows, int64_t cols);

  // The same with H = X^T X given by its rows X [n, cols] (already scaled by
  // 1/sqrt(N)): cheaper when n < cols / 2 (a classifier head sees one row per
  // sample): each step is 2 rows * cols * n multiply-adds instead of rows * cols^2.
  static StatusOr<AdaRoundProblem> CreateFromRows(std::vector<float> w, std::vector<float> scales,
                                                  const std::vector<float>& x, int64_t n, int64_t rows, int64_t cols);

  int64_t rows() const { return rows_; }
  int64_t cols() const { return cols_; }

  // V where h(V) = frac(W / s): AdaRound's start (nearest rounding's neighbour
  // below plus the fraction).
  std::vector<float> InitialV() const;

  // The loss of sparq/adaround.h at V, and its gradient into grad [rows * cols]
  // (may be null). lambda 0 leaves the regularizer out.
  StatusOr<double> Loss(const std::vector<float>& v, double beta, double lambda, std::vector<float>* grad) const;

  // tr(E H E^T) for int8 codes [rows * cols], E = s * codes - W.
  StatusOr<double> OutputError(const std::vector<int8_t>& codes) const;

  std::vector<int8_t> NearestCodes() const;  // clamp(nearbyint(W / s)), QuantizeWeightSymmetric's
  std::vector<int8_t> CodesOf(const std::vector<float>& v) const;  // floor(W / s) + (h(V) >= 0.5), clamped

  // Adam on V for options.iterations steps (the schedule of sparq/adaround.h)
  // from InitialV(); returns the final codes. Weights exactly 0 stay 0.
  // Single-threaded and deterministic.
  StatusOr<std::vector<int8_t>> Solve(const AdaRoundOptions& options) const;

 private:
  // y [rows, cols] = e [rows, cols] H.
  Status TimesH(const float* e, float* y) const;
  // The gradient into grad (may be null) and the loss into value (may be null).
  Status Evaluate(const std::vector<float>& v, double beta, double lambda, std::vector<float>* grad,
                  double* value) const;

  int64_t rows_ = 0, cols_ = 0;
  std::vector<float> w_, scales_, h_, floor_;  // floor_: floor(W / s)
  PackedGemmF32 packed_h_;
  bool use_gemm_ = false;
  // CreateFromRows: X [n, cols] and X^T [cols, n] packed; H is not formed.
  int64_t factor_rows_ = 0;
  PackedGemmF32 packed_x_, packed_xt_;
  mutable std::vector<float> scratch_e_, scratch_y_, scratch_sig_, scratch_t_;  // per call; a problem is used by one thread
};

// The rectified sigmoid and its constants.
constexpr float kAdaRoundZeta = 1.1f, kAdaRoundGamma = -0.1f;
float AdaRoundH(float v);

}  // namespace sparq
