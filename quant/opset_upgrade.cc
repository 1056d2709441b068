// UpgradeOpsetForInt8: the opset conversion an INT8 run needs, and what it says.
#include <string>

#include "sparq/onnx_io.h"
#include "sparq/quantize.h"

namespace sparq {

StatusOr<std::string> UpgradeOpsetForInt8(Model& model, const QuantizeOptions& options) {
  const int64_t from = model.opset();
  const bool per_axis = options.format == QuantFormat::kQDQ && options.per_channel;
  if (from >= 10 && !(per_axis && from < 13)) return std::string();
  auto converted = ConvertOpset(model, 13);
  if (!converted.ok()) {
    if (from < 10) {
      return Status::NotSupported("quantization needs opset >= 10 (QuantizeLinear); the model imports opset " +
                                  std::to_string(from) + " and " + converted.status().message());
    }
    return "opset " + std::to_string(from) + " kept (" + converted.status().message() + "): weights quantized per tensor";
  }
  const std::string why = from < 10 ? "QuantizeLinear needs opset 10" : "per-channel DequantizeLinear needs opset 13";
  model = std::move(converted).value();
  return "converted the model from opset " + std::to_string(from) + " to 13 with ONNX's version converter (" + why + ")";
}

}  // namespace sparq
