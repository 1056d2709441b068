// Accuracy and output-error metrics (used by `sparq eval`).
//
// Class scores are read as rows over the last axis: a tensor of shape
// [N, C] or [N, 1, C] holds N rows of C scores.
#pragma once

#include <cstdint>
#include <vector>

#include "sparq/status.h"
#include "sparq/tensor.h"

namespace sparq {

// Index of the largest score in each row (the first one on ties; NaN never
// wins unless the whole row is NaN, then 0). Errors: InvalidArgument for a
// rank-0 tensor, an empty last axis or a non-numeric type.
StatusOr<std::vector<int64_t>> ArgMaxLastAxis(const Tensor& scores);

// Number of rows whose label is among the k highest scores. Ranks follow a
// stable descending sort (ties go to the lower class index), so k = 1 agrees
// with ArgMaxLastAxis; a NaN label score is never counted. `labels` holds one
// integer class id per row. Errors: InvalidArgument for k < 1, a label count
// that differs from the row count, a non-integer label type, or a label
// outside [0, C) (naming the row).
StatusOr<int64_t> CountTopK(const Tensor& scores, const Tensor& labels, int k);

// Error statistics of an output against a reference, accumulated over
// batches in double precision.
class ErrorStats {
 public:
  // Adds the elementwise pairs of two numeric tensors of the same shape.
  // Errors: InvalidArgument on a shape mismatch or non-numeric type.
  Status Add(const Tensor& reference, const Tensor& output);

  int64_t count() const { return count_; }
  // Signal-to-quantization-noise ratio in dB:
  // 10 * log10(sum ref^2 / sum (ref - out)^2); +inf when out == ref exactly.
  double sqnr_db() const;
  // Cosine similarity of the flattened tensors: 1 when both are all zeros,
  // 0 when only one is.
  double cosine() const;
  // Largest |ref - out|.
  double max_abs_error() const { return max_abs_error_; }

 private:
  int64_t count_ = 0;
  double ref_sq_ = 0.0;   // sum ref^2
  double out_sq_ = 0.0;   // sum out^2
  double err_sq_ = 0.0;   // sum (ref - out)^2
  double dot_ = 0.0;      // sum ref * out
  double max_abs_error_ = 0.0;
};

}  // namespace sparq
