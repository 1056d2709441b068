// ConvertOpset: ONNX's version converter on sparq's Model (through the proto).
#include <onnx/onnx_pb.h>
#include <onnx/version_converter/convert.h>

#include <exception>

#include "sparq/onnx_io.h"

namespace sparq {

StatusOr<Model> ConvertOpset(const Model& model, int64_t target) {
  const int64_t from = model.opset();
  if (from == target) return model;
  SPARQ_ASSIGN_OR_RETURN(std::string bytes, SerializeModel(model));
  onnx::ModelProto in;
  if (!in.ParseFromString(bytes)) return Status::Internal("opset conversion: cannot re-read the serialized model");
  std::string converted;
  try {
    onnx::ModelProto out = onnx::version_conversion::ConvertVersion(in, static_cast<int>(target));
    if (!out.SerializeToString(&converted)) return Status::Internal("opset conversion: cannot serialize the result");
  } catch (const std::exception& e) {
    return Status::InvalidArgument("ONNX version converter, opset " + std::to_string(from) + " -> " +
                                   std::to_string(target) + ": " + e.what());
  }
  auto result = LoadModelFromBytes(converted);
  if (!result.ok()) return result.status().WithContext("opset conversion " + std::to_string(from) + " -> " + std::to_string(target));
  return result;
}

}  // namespace sparq
