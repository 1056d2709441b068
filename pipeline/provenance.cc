// Provenance of written models: see provenance.h.
#include "pipeline/provenance.h"

#include <cstdio>
#include <utility>
#include <vector>

#include "sparq/version.h"

namespace sparq {

std::string Fnv1a64Hex(const std::string& bytes) {
  uint64_t h = 0xcbf29ce484222325ULL;  // FNV-1a 64 offset basis
  for (unsigned char c : bytes) {
    h ^= c;
    h *= 0x100000001b3ULL;  // FNV-1a 64 prime
  }
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

std::string ModelRecipeHash(const Recipe& recipe) {
  Recipe r = recipe;
  // Settings that do not change the written model's bytes.
  r.evaluate.threads = 0;
  r.output.dir = r.output.model = r.output.scales = r.output.trt_cache = "";
  r.output.overwrite = false;
  r.report = RecipeReport{"", "", ""};
  return Fnv1a64Hex(RecipeToYaml(r));
}

void SetMetadataProp(const std::string& key, const std::string& value, Model* model) {
  for (auto& kv : model->metadata_props)
    if (kv.first == key) {
      kv.second = value;
      return;
    }
  model->metadata_props.emplace_back(key, value);
}

void StampProvenance(const Recipe& recipe, Model* model) {
  model->producer_name = "sparq";
  model->producer_version = Version();
  const bool int8 = recipe.quantize.enabled && recipe.quantize.precision != RecipeQuantize::Precision::kFp16 &&
                    recipe.quantize.precision != RecipeQuantize::Precision::kInt4;
  const std::vector<std::pair<std::string, std::string>> props = {
      {"sparq.recipe_fnv1a64", ModelRecipeHash(recipe)},
      {"sparq.recipe_name", recipe.name},
      {"sparq.calibration_method", int8 ? RecipeEnumName(recipe.quantize.calibration.method) : "none"},
  };
  for (const auto& [key, value] : props) SetMetadataProp(key, value, model);
}

}  // namespace sparq
