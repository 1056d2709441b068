// The calibration table file (JSON) and the TensorRT calibration cache.
#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>

#include "calibrate/folded_inputs.h"
#include "sparq/calibrate.h"
#include "sparq/file_io.h"
#include "sparq/onnx_io.h"

namespace sparq {

using nlohmann::json;

const TensorRange* CalibrationTable::Find(const std::string& name) const {
  auto it = std::lower_bound(tensors.begin(), tensors.end(), name,
                             [](const TensorRange& r, const std::string& n) { return r.name < n; });
  return it != tensors.end() && it->name == name ? &*it : nullptr;
}

Status CalibrationTable::Save(const std::string& path) const {
  json j;
  j["format"] = "sparq-calibration";
  j["version"] = kVersion;
  j["method"] = method;
  j["bins"] = bins;
  j["percentile"] = percentile;
  j["symmetric"] = symmetric;
  j["samples"] = samples;
  WriteFoldedInputs(folded_inputs, &j);
  json& t = j["tensors"] = json::object();
  for (const auto& r : tensors) {
    t[r.name] = {{"min", r.min},         {"max", r.max},     {"abs_max", r.abs_max},
                 {"threshold", r.threshold}, {"scale", r.scale}, {"zero_point", r.zero_point},
                 {"signed", r.is_signed}, {"method", r.method}};
  }
  return WriteFileAtomically(path, j.dump(1) + "\n");
}

StatusOr<CalibrationTable> CalibrationTable::Load(const std::string& path) {
  SPARQ_ASSIGN_OR_RETURN(std::string text, ReadFile(path));
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return Status::Corruption(path + ": not a JSON object");
  if (j.value("format", "") != "sparq-calibration") {
    return Status::Corruption(path + ": not a sparq calibration file (\"format\" is not \"sparq-calibration\")");
  }
  int version = j.value("version", 0);
  if (version != kVersion) {
    return Status::NotSupported(path + ": calibration file version " + std::to_string(version) +
                                " (this sparq reads version " + std::to_string(kVersion) + ")");
  }
  CalibrationTable table;
  table.method = j.value("method", "");
  table.bins = j.value("bins", 2048);
  table.percentile = j.value("percentile", 99.99);
  table.symmetric = j.value("symmetric", true);
  table.samples = j.value("samples", int64_t{0});
  SPARQ_RETURN_IF_ERROR(ReadFoldedInputs(j, path, &table.folded_inputs));
  if (!j.contains("tensors") || !j["tensors"].is_object()) return Status::Corruption(path + ": no \"tensors\" object");
  for (const auto& [name, r] : j["tensors"].items()) {
    if (!r.is_object() || !r.contains("scale") || !r["scale"].is_number()) {
      return Status::Corruption(path + ": tensor '" + name + "' has no numeric \"scale\"");
    }
    TensorRange t;
    t.name = name;
    t.min = r.value("min", 0.0f);
    t.max = r.value("max", 0.0f);
    t.abs_max = r.value("abs_max", 0.0f);
    t.threshold = r.value("threshold", 0.0f);
    t.scale = r["scale"].get<float>();
    t.zero_point = r.value("zero_point", 0);
    t.is_signed = r.value("signed", true);
    t.method = r.value("method", table.method);
    if (!(t.scale > 0.0f) || !std::isfinite(t.scale)) {
      return Status::Corruption(path + ": tensor '" + name + "' has a non-positive or non-finite scale");
    }
    table.tensors.push_back(std::move(t));
  }
  std::sort(table.tensors.begin(), table.tensors.end(),
            [](const TensorRange& a, const TensorRange& b) { return a.name < b.name; });
  return table;
}

std::string CalibrationTable::TensorRtCalibratorName(const std::string& method) {
  if (method == "kl") return "EntropyCalibration2";
  if (method == "max") return "MinMaxCalibration";
  return "";
}

Status CalibrationTable::CheckTensorRtCache() const {
  if (TensorRtCalibratorName(method).empty()) {
    return Status::NotSupported("TensorRT calibration cache: TensorRT has no calibrator for method '" + method +
                                "' (kl is EntropyCalibration2, max is MinMaxCalibration)");
  }
  bool asymmetric = !symmetric;
  for (const auto& r : tensors) asymmetric |= r.zero_point != 0 || !r.is_signed;
  if (asymmetric) {
    return Status::NotSupported("TensorRT calibration cache: the table is asymmetric (zero points); TensorRT's INT8 "
                                "is symmetric, so the zero points would be dropped: calibrate with symmetric: true");
  }
  return Status::OK();
}

std::string CalibrationTable::ToTensorRtCache(const std::string& trt_version) const {
  std::string calibrator = TensorRtCalibratorName(method);
  if (!CheckTensorRtCache().ok()) calibrator = "Unsupported";
  std::string out = "TRT-" + trt_version + "-" + calibrator + "\n";
  for (const auto& r : tensors) {
    // TensorRT stores the scale that maps the int8 step back to real values.
    float scale = r.threshold > 0.0f ? r.threshold / 127.0f : 1.0f;
    uint32_t bits;
    std::memcpy(&bits, &scale, sizeof bits);
    char hex[16];
    std::snprintf(hex, sizeof hex, "%08" PRIx32, bits);
    out += r.name + ": " + hex + "\n";
  }
  return out;
}

}  // namespace sparq
