// Pruning structures: the shape of the zeros a pruned weight may have
// (unstructured, blocks, N:M, whole channels, or chosen per layer), in the
// GEMM view of sparq/weighted_layer.h.
#pragma once

#include <string>

#include "sparq/export.h"
#include "sparq/status.h"

namespace sparq {

struct SPARQ_API PruneStructure {
  enum class Kind {
    kUnstructured,  // any weight may be zero
    kBlock,         // whole block_rows x block_cols blocks of the GEMM view are zero
    kNM,            // in every m consecutive weights of a row, at most n are nonzero
    kChannel,       // whole rows (output channels) are zero, then removed from the graph
    kAuto,          // per layer, the first of PruneOptions::auto_candidates that fits it
  };
  Kind kind = Kind::kUnstructured;
  int block_rows = 1, block_cols = 1;  // kBlock: each >= 1 (rows = outputs, cols = inputs)
  int n = 0, m = 0;                    // kNM: 1 <= n < m

  static PruneStructure Unstructured() { return {}; }
  static PruneStructure Block(int rows, int cols);
  static PruneStructure NM(int n, int m);
  static PruneStructure Channel();
  static PruneStructure Auto();

  // "unstructured", "block4x4", "2:4", "channel", "auto".
  std::string ToString() const;
  // Parses the spellings above (block<R>x<C> with R, C >= 1; <N>:<M> with
  // 1 <= N < M). InvalidArgument says what is wrong and lists what is allowed,
  // e.g. "'4:2' is not valid: in N:M, N (weights kept) must be
  // less than M (group size)".
  static StatusOr<PruneStructure> Parse(const std::string& text);
  // 1 - n/m for kNM; -1 for the others (their sparsity is free).
  double FixedSparsity() const;
  bool operator==(const PruneStructure& o) const;
  bool operator!=(const PruneStructure& o) const { return !(*this == o); }
};

}  // namespace sparq
