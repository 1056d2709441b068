// Data for `sparq run` (internal): the recipe's data section as batch
// sources, preprocessing applied per batch (no preprocessed copy on disk).
#pragma once

#include <string>

#include "sparq/dataset.h"
#include "sparq/graph.h"
#include "sparq/recipe.h"
#include "sparq/status.h"

namespace sparq {

// Batches of the data at `path` for `model`, `limit` samples per pass at most
// (0 = all), with data.preprocess applied to the input it feeds (data.input,
// or the model's only input). Errors: InvalidArgument naming data.input when
// the model has several inputs and the recipe names none; those of OpenDataset.
StatusOr<BatchSource> RecipeBatches(const std::string& path, const RecipeData& data, const Model& model,
                                    int64_t limit);

// Fraction of exact zeros over the model's weight tensors (initializers of at
// least 16 elements, zero points excluded).
double WeightSparsity(const Model& model);

}  // namespace sparq
