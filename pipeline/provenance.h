// Provenance of the models `sparq run` writes (internal to pipeline/).
#pragma once

#include <cstdint>
#include <string>

#include "sparq/graph.h"
#include "sparq/recipe.h"

namespace sparq {

// 64-bit FNV-1a of `bytes`, as 16 lowercase hex digits.
std::string Fnv1a64Hex(const std::string& bytes);

// FNV-1a 64 of the effective recipe (RecipeToYaml) with the settings that do
// not change the written model blanked: output and report paths,
// output.overwrite and evaluate.threads (so the model's bytes stay the same
// for any thread count and output folder).
std::string ModelRecipeHash(const Recipe& recipe);

// Sets metadata_props[key] = value (replacing an earlier value of the key).
void SetMetadataProp(const std::string& key, const std::string& value, Model* model);

// Sets producer_name "sparq" and producer_version sparq::Version(), and the
// metadata_props (replacing earlier values of the same keys):
//   sparq.recipe_fnv1a64       ModelRecipeHash(recipe)
//   sparq.recipe_name          recipe.name
//   sparq.calibration_method   kl, max, percentile, mse; "none" when nothing
//                              was calibrated into the model (FP16, FP32)
void StampProvenance(const Recipe& recipe, Model* model);

}  // namespace sparq
