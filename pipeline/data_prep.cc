#include "pipeline/data_prep.h"

namespace sparq {

StatusOr<BatchSource> RecipeBatches(const std::string& path, const RecipeData& data, const Model& model,
                                    int64_t limit) {
  DatasetOptions options;
  options.batch_size = data.batch_size;
  options.limit = limit;
  options.constants = data.constants;
  if (!data.preprocess.IsIdentity()) {
    std::string input = data.input;
    if (input.empty()) {
      if (model.graph.inputs.size() != 1) {
        return Status::InvalidArgument("data.input: the model has " + std::to_string(model.graph.inputs.size()) +
                                       " inputs; name the one the data feeds");
      }
      input = model.graph.inputs[0].name;
    }
    options.transform = PreprocessTransform(data.preprocess, input);
  }
  StatusOr<BatchSource> source = OpenDataset(path, model.graph, options);
  if (!source.ok() && !data.constants.empty() && source.status().message().find("constant for input") == 0) {
    return source.status().WithContext("data.constants");
  }
  return source;
}

double WeightSparsity(const Model& model) {
  int64_t zeros = 0, total = 0;
  for (const auto& [name, t] : model.graph.initializers) {
    if (t.numel() < 16 || name.find("zero_point") != std::string::npos) continue;
    for (int64_t i = 0; i < t.numel(); ++i) zeros += t.GetAsDouble(i) == 0.0;
    total += t.numel();
  }
  return total > 0 ? static_cast<double>(zeros) / static_cast<double>(total) : 0.0;
}

}  // namespace sparq
