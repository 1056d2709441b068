// "folded_inputs" of the calibration files (internal): the pinned inputs
// whose Ifs were folded before calibrating, {"sr": [16000]}, in the table
// (table.cc) and in the shards' partial statistics (partial.cc) alike.
#pragma once

#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "sparq/status.h"

namespace sparq {

// Writes the field only when there is something to say, so tables of models
// without a folded If keep their bytes.
inline void WriteFoldedInputs(const std::map<std::string, std::vector<double>>& inputs, nlohmann::json* j) {
  if (inputs.empty()) return;
  nlohmann::json& f = (*j)["folded_inputs"] = nlohmann::json::object();
  for (const auto& [name, values] : inputs) f[name] = values;
}

// Reads the field if present. Errors: Corruption naming `where` when it is
// not an object of non-empty arrays of finite numbers.
inline Status ReadFoldedInputs(const nlohmann::json& j, const std::string& where,
                               std::map<std::string, std::vector<double>>* inputs) {
  auto it = j.find("folded_inputs");
  if (it == j.end()) return Status::OK();
  const std::string bad = where + ": \"folded_inputs\" must map input names to non-empty arrays of numbers";
  if (!it->is_object()) return Status::Corruption(bad);
  for (const auto& [name, values] : it->items()) {
    if (!values.is_array() || values.empty()) return Status::Corruption(bad + " ('" + name + "' does not)");
    std::vector<double>& out = (*inputs)[name];
    for (const nlohmann::json& v : values) {
      if (!v.is_number() || !std::isfinite(v.get<double>())) return Status::Corruption(bad + " ('" + name + "' does not)");
      out.push_back(v.get<double>());
    }
  }
  return Status::OK();
}

}  // namespace sparq
