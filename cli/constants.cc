// --constant, shared by the subcommands that read a dataset (eval,
// calibrate, compare) and by quantize: inputs pinned to one value for every
// batch (DatasetOptions::constants); calibrate and quantize also fold the Ifs
// they decide, as `sparq run` folds data.constants.
#include "cli/commands.h"
#include "sparq/dataset.h"

namespace sparq {
namespace cli {

void AddConstantOption(CLI::App* sub, std::vector<std::string>* specs) {
  sub->add_option("--constant", *specs,
                  "Pin an input to one value for every batch: name=value, or name=v1,v2,... for a 1-D input "
                  "(repeatable; the input's element type; e.g. a sample rate --constant sr=16000). A pinned input "
                  "must not also be in the data. calibrate and quantize fold an If the pins decide (its taken "
                  "branch inlined, the input removed), as sparq run folds data.constants")
      ->allow_extra_args(false);
}

StatusOr<std::map<std::string, std::vector<double>>> ParseConstants(const std::vector<std::string>& specs) {
  std::map<std::string, std::vector<double>> constants;
  for (const std::string& spec : specs) {
    StatusOr<std::pair<std::string, std::vector<double>>> c = ParseConstant(spec);
    if (!c.ok()) return c.status().WithContext("--constant");
    if (!constants.emplace(c->first, c->second).second)
      return Status::InvalidArgument("--constant: input '" + c->first + "' is pinned twice");
  }
  return constants;
}

}  // namespace cli
}  // namespace sparq
