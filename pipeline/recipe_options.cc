// The library's option structs a recipe stands for (see sparq/recipe.h).
#include "sparq/recipe.h"

namespace sparq {

QuantizeOptions ToQuantizeOptions(const Recipe& r) {
  QuantizeOptions q;
  q.format = r.output.format == RecipeOutput::Format::kQOperator ? QuantFormat::kQOperator : QuantFormat::kQDQ;
  switch (r.quantize.precision) {
    case RecipeQuantize::Precision::kInt8: q.precision = Precision::kINT8; break;
    case RecipeQuantize::Precision::kFp16: q.precision = Precision::kFP16; break;
    case RecipeQuantize::Precision::kInt4: q.precision = Precision::kFP32; break;  // weights only: QuantizeWeightsInt4
    case RecipeQuantize::Precision::kMixed:
      q.precision = Precision::kINT8;
      q.other_precision = Precision::kFP16;
      break;
    case RecipeQuantize::Precision::kFp8:
      q.precision = Precision::kINT8;
      q.fp8 = true;
      break;
  }
  q.per_channel = r.quantize.per_channel;
  q.fold_batchnorm = r.quantize.fold_batchnorm;
  q.dynamic = r.quantize.mode == RecipeQuantize::Mode::kDynamic;
  q.gather_int8 = r.quantize.gather_int8;
  q.quantize_outputs = r.quantize.quantize_outputs;
  for (const auto& rule : r.quantize.layers) q.layers.push_back({rule.match, rule.precision});
  q.exclude_ops = r.quantize.exclude_ops;
  q.fp16 = r.quantize.fp16;
  return q;
}

}  // namespace sparq
