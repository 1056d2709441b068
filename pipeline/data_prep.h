// Data preparation for `sparq run` (internal).
#pragma once

#include <string>

#include "sparq/graph.h"
#include "sparq/recipe.h"
#include "sparq/status.h"

namespace sparq {

// A scratch folder inside `parent`, removed with its contents on destruction.
class TempFolder {
 public:
  explicit TempFolder(const std::string& parent);
  ~TempFolder();
  TempFolder(const TempFolder&) = delete;
  TempFolder& operator=(const TempFolder&) = delete;
  std::string path(const std::string& name) const;

 private:
  std::string root_;
};

// The dataset at `path` after the recipe's preprocessing (scale, NHWC ->
// NCHW, mean/std per channel): `path` itself when there is nothing to do,
// else a .npz written to `scratch`. Errors name the file and the array.
StatusOr<std::string> PrepareData(const std::string& path, const RecipeData& data, const Model& model,
                                  const std::string& scratch);

// Fraction of exact zeros over the model's weight tensors (initializers of at
// least 16 elements, zero points excluded).
double WeightSparsity(const Model& model);

}  // namespace sparq
