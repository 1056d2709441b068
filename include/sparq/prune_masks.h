// Weights as matrices, keep-masks and the scores that choose them: which
// weights matter least, and the mask of a structure at a sparsity.
//
// Exact zeros. A pruned weight is stored as exactly 0.0f; recovery only
// changes kept weights, so pruned ones stay 0.0f; and sparq's int8 weight
// quantization (QuantizeWeightSymmetric) maps 0.0f to 0, so the zeros survive
// quantization and a sparse kernel can rely on them.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sparq/export.h"
#include "sparq/prune_structure.h"
#include "sparq/status.h"

namespace sparq {

// A dense row-major float matrix (a weight in its GEMM view, or scores).
struct SPARQ_API Matrix {
  int64_t rows = 0, cols = 0;
  std::vector<float> values;  // rows * cols, row-major

  Matrix() = default;
  Matrix(int64_t r, int64_t c, float fill = 0.0f)
      : rows(r), cols(c), values(static_cast<size_t>(r * c), fill) {}
  float& at(int64_t r, int64_t c) { return values[static_cast<size_t>(r * cols + c)]; }
  float at(int64_t r, int64_t c) const { return values[static_cast<size_t>(r * cols + c)]; }
};

// Which weights survive: keep[r * cols + c] is 1 (kept) or 0 (pruned).
struct SPARQ_API PruneMask {
  int64_t rows = 0, cols = 0;
  std::vector<uint8_t> keep;

  int64_t pruned() const;  // number of zeros in `keep`
  double sparsity() const;  // pruned() / (rows * cols); 0 for an empty mask
  // The mask of a weight's current zeros: keep = (w != 0).
  static PruneMask FromNonZeros(const Matrix& w);
};

// Sets the pruned weights to exactly 0.0f. InvalidArgument when the shapes differ.
SPARQ_API Status ApplyMask(const PruneMask& mask, Matrix* weights);

// ===========================================================================
// Scores: which weights matter least

enum class PruneScore {
  kMagnitude,   // |w|; groups (blocks, channels) by the mean |w| (same as kL1)
  kL1,          // groups by the mean |w| of their elements
  kL2,          // groups by the root mean square of their elements
  kActivation,  // Wanda: |w_ij| * ||X_j||_2 (X_j: input column j over the
                // calibration data; im2col columns for Conv); groups by the mean
};
SPARQ_API const char* PruneScoreName(PruneScore s);  // "magnitude", "l1", "l2", "activation"
SPARQ_API StatusOr<PruneScore> ParsePruneScore(const std::string& name);

// Element scores s_ij >= 0 of a weight in its GEMM view: |w_ij|, or for
// kActivation |w_ij| * column_norms[j]. For a Conv of G groups column_norms
// may hold G * cols values, group after group (as ActivationColumnNorms
// returns them); row r then uses the block of its group r / (rows / G).
// InvalidArgument when kActivation gets norms of another length or a negative
// or non-finite norm.
SPARQ_API StatusOr<Matrix>
ElementScores(const Matrix& weights, PruneScore score, const std::vector<double>& column_norms = {});

// The keep-mask of `structure` that prunes the lowest-scoring groups of
// `scores` (element scores, e.g. from ElementScores) at `sparsity`, a fraction
// of elements in [0, 1). Groups are pooled from element scores with the mean,
// or the root mean square for kL2 (`pooling`), so that partial blocks at the
// right and bottom edges compete fairly with whole ones. Ties go to the lower
// index; the result depends only on the inputs.
//
//   unstructured  round(sparsity * rows * cols) elements are pruned.
//   block RxC     blocks tile the matrix from the top-left; the blocks of the
//                 last block-row/-column may be partial and are pruned as a
//                 whole. Blocks are taken lowest score first while taking one
//                 brings the pruned element count closer to the target, so the
//                 achieved sparsity is within half a (largest) block of it.
//   N:M           rows are cut into groups of m consecutive inputs; a ragged
//                 tail of L < m inputs is a group that may keep min(n, L)
//                 (padded with zeros to m it is a valid N:M group). Each group's
//                 lowest (size - kept) elements are the candidates; `sparsity`
//                 may be anything in [0, 1 - n/m] and prunes the lowest-scoring
//                 candidates (so a schedule can ramp N:M up); at 1 - n/m every
//                 candidate is pruned and every group of m keeps at most n.
//   channel       round(sparsity * rows) whole rows are pruned.
//
// Errors: InvalidArgument for a sparsity outside [0, 1), an N:M sparsity above
// 1 - n/m, kAuto, or a score matrix whose size is not rows * cols.
SPARQ_API StatusOr<PruneMask> ComputeMask(const PruneStructure& structure, const Matrix& scores, double sparsity,
                                PruneScore pooling = PruneScore::kL1);

}  // namespace sparq
