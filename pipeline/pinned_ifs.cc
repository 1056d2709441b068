#include "pipeline/pinned_ifs.h"

#include <sstream>

#include "runtime/passes/if_folding.h"
#include "sparq/dataset.h"

namespace sparq {

std::string PinnedSpec(const std::string& name, const std::vector<double>& values) {
  std::ostringstream os;
  os << name << "=";
  for (size_t i = 0; i < values.size(); ++i) os << (i ? "," : "") << values[i];
  return os.str();
}

StatusOr<PinnedFold> FoldPinnedIfs(Model* model, const PinnedValues& pinned, const std::string& where) {
  PinnedFold out;
  if (pinned.empty()) return out;
  const Graph& g = model->graph;
  TensorMap values;
  for (const auto& [name, numbers] : pinned) {
    const ValueInfo* input = nullptr;
    std::string names;
    for (const auto* list : {&g.inputs, &g.initializer_inputs}) {
      for (const ValueInfo& v : *list) {
        if (v.name == name) input = &v;
        names += (names.empty() ? "" : ", ") + v.name;
      }
    }
    if (input == nullptr) {
      return Status::InvalidArgument(where + ": constant for input '" + name +
                                     "': the model has no such input (inputs: " + names + ")");
    }
    StatusOr<Tensor> t = ConstantInput(*input, numbers);
    if (!t.ok()) return t.status().WithContext(where);
    values[name] = std::move(*t);
  }
  StatusOr<IfFoldReport> folded = FoldDecidedIfs(model, values);
  if (!folded.ok()) return folded.status().WithContext(where);
  for (const FoldedIf& f : folded->folded) {
    out.folded.push_back(f.node + ": condition '" + f.condition + "' is " + (f.taken ? "true" : "false") +
                         " for the pinned inputs, so its " + (f.taken ? "then" : "else") + "_branch (" +
                         std::to_string(f.nodes) + " nodes) is inlined and the other branch dropped");
  }
  for (const std::string& name : folded->inputs_removed) {
    const std::vector<double>& numbers = pinned.at(name);
    const std::string value = PinnedSpec(name, numbers).substr(name.size() + 1);
    out.inputs_removed[name] = numbers;
    out.removed_lines.push_back("the written model has no input '" + name + "': " + where + " pinned it to " + value +
                                " and the If it decides was folded, so the model computes " + name + " = " + value +
                                " only (a program feeding '" + name + "' gets 'not an input')");
  }
  return out;
}

Status CheckFoldedInputs(const CalibrationTable& table, const PinnedValues& removed, const std::string& table_where,
                         const std::string& option) {
  if (table.folded_inputs.empty()) return Status::OK();
  for (const auto& [name, values] : table.folded_inputs) {
    auto here = removed.find(name);
    const std::string calibrated = table_where + " was calibrated with input '" + name + "' pinned (" +
                                   PinnedSpec(name, values) + ") and the If it decides folded, so its tensors are "
                                   "those of the branch taken for that value";
    if (here == removed.end()) {
      return Status::InvalidArgument(calibrated + ": pin the same value here (" + option + " " +
                                     PinnedSpec(name, values) + ")");
    }
    if (here->second != values) {
      return Status::InvalidArgument(calibrated + ", and " + option + " pins " + PinnedSpec(name, here->second) +
                                     ": calibrate for that value, or pin " + PinnedSpec(name, values));
    }
  }
  for (const auto& [name, values] : removed) {
    if (!table.folded_inputs.count(name)) {
      return Status::InvalidArgument(option + " " + PinnedSpec(name, values) + " folds the If on input '" + name +
                                     "', but " + table_where + " was calibrated with it fed, not pinned: calibrate "
                                     "with the same pins (--constant / data.constants)");
    }
  }
  return Status::OK();
}

}  // namespace sparq
