// Weighted layers as pruning sees them: their weights in the GEMM view
// (sparq/weighted_layer.h) and whether a structure fits them.
#pragma once

#include <string>

#include "sparq/export.h"
#include "sparq/prune_masks.h"
#include "sparq/prune_structure.h"
#include "sparq/weighted_layer.h"

namespace sparq {

// The layer's weight as its GEMM view [rows, cols], and back. Errors:
// NotFound when the weight is gone; InvalidArgument for a shape mismatch.
SPARQ_API StatusOr<Matrix> ReadWeightMatrix(const Model& model, const WeightedLayer& layer);
SPARQ_API Status WriteWeightMatrix(Model* model, const WeightedLayer& layer, const Matrix& weights);

// Why `structure` does not fit the layer, so that pruning it would give a
// shape no kernel speeds up; "" when it fits. Block RxC needs rows >= R and
// cols >= C; N:M needs cols to be a multiple of M; unstructured always fits;
// channel fits here (the graph decides, see AnalyzeChannels); auto fits when
// any candidate fits.
SPARQ_API std::string StructureMismatch(const WeightedLayer& layer, const PruneStructure& structure);

}  // namespace sparq
