// Sharded calibration's partial statistics: the file (docs/scale.md) and the
// merge. Thresholds are chosen in calibrator.cc (FinishCalibration).
#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "calibrate/folded_inputs.h"
#include "sparq/calibrate.h"
#include "sparq/file_io.h"

namespace sparq {
namespace {

using nlohmann::json;

constexpr const char* kFormat = "sparq-calibration-partial";

// 64-bit FNV-1a as 16 hex digits: a checksum against damaged files, not a
// defence against edits made on purpose.
std::string Fnv1a64(const std::string& bytes) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (unsigned char c : bytes) {
    h ^= c;
    h *= 0x100000001b3ULL;
  }
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016" PRIx64, h);
  return hex;
}

// JSON has no infinities: a tensor never seen keeps min +inf / max -inf, written as null.
json FloatOrNull(float v) { return std::isfinite(v) ? json(v) : json(nullptr); }

bool IsPowerOfTwo(double v) {
  int exponent = 0;
  return v > 0.0 && std::isfinite(v) && std::frexp(v, &exponent) == 0.5;
}

// Reads field `key` of `j` as T, or a Corruption naming the file and field.
template <typename T>
Status Read(const json& j, const char* key, const std::string& where, T* out) {
  auto it = j.find(key);
  bool fits = it != j.end();
  if (fits) {
    if constexpr (std::is_same_v<T, bool>) fits = it->is_boolean();
    else if constexpr (std::is_same_v<T, std::string>) fits = it->is_string();
    else if constexpr (std::is_integral_v<T>) fits = it->is_number_integer();
    else fits = it->is_number();
  }
  if (!fits) return Status::Corruption(where + ": field \"" + key + "\" is missing or has the wrong type");
  *out = it->get<T>();
  return Status::OK();
}

std::string Describe(const PartialCalibration& p) {
  return p.source.empty() ? "part with shards " + std::to_string(p.shard_ids.empty() ? -1 : p.shard_ids[0])
                          : p.source;
}

}  // namespace

Status PartialCalibration::Save(const std::string& path) const {
  json j;
  j["format"] = kFormat;
  j["version"] = kVersion;
  j["model"] = model_id;
  j["method"] = CalibrationMethodName(method.method);
  j["bins"] = method.bins;
  j["percentile"] = method.percentile;
  j["symmetric"] = method.symmetric;
  j["backend"] = backend;
  j["requested"] = requested;
  j["data_samples"] = data_samples;
  j["batch_size"] = batch_size;
  j["shards"] = shards;
  j["shard_ids"] = shard_ids;
  j["samples"] = samples;
  j["batches"] = batches;
  WriteFoldedInputs(folded_inputs, &j);
  json& t = j["tensors"] = json::object();
  for (const TensorObservation& o : tensors) {
    t[o.name] = {{"min", FloatOrNull(o.min)},
                 {"max", FloatOrNull(o.max)},
                 {"range", o.hist.range()},
                 {"counts", o.hist.counts()}};
  }
  j["checksum"] = Fnv1a64(j.dump());  // of everything else, keys sorted (nlohmann's object order)
  return WriteFileAtomically(path, j.dump() + "\n");
}

StatusOr<PartialCalibration> PartialCalibration::Load(const std::string& path) {
  SPARQ_ASSIGN_OR_RETURN(std::string text, ReadFile(path));
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return Status::Corruption(path + ": not a JSON object (damaged or truncated?)");
  if (j.value("format", "") != kFormat) {
    return Status::Corruption(path + ": not a sparq partial calibration (\"format\" is not \"" + kFormat + "\")");
  }
  int version = 0;
  SPARQ_RETURN_IF_ERROR(Read(j, "version", path, &version));
  if (version != kVersion) {
    return Status::NotSupported(path + ": partial calibration version " + std::to_string(version) +
                                " (this sparq reads version " + std::to_string(kVersion) + ")");
  }
  std::string checksum;
  SPARQ_RETURN_IF_ERROR(Read(j, "checksum", path, &checksum));
  j.erase("checksum");
  if (Fnv1a64(j.dump()) != checksum) {
    return Status::Corruption(path + ": checksum mismatch: the file was damaged or edited after sparq wrote it");
  }
  PartialCalibration p;
  p.source = path;
  std::string method;
  SPARQ_RETURN_IF_ERROR(Read(j, "model", path, &p.model_id));
  SPARQ_RETURN_IF_ERROR(Read(j, "method", path, &method));
  auto parsed = ParseCalibrationMethod(method);
  if (!parsed.ok()) return Status::Corruption(path + ": " + parsed.status().message());
  p.method.method = *parsed;
  SPARQ_RETURN_IF_ERROR(Read(j, "bins", path, &p.method.bins));
  SPARQ_RETURN_IF_ERROR(Read(j, "percentile", path, &p.method.percentile));
  SPARQ_RETURN_IF_ERROR(Read(j, "symmetric", path, &p.method.symmetric));
  SPARQ_RETURN_IF_ERROR(Read(j, "backend", path, &p.backend));
  SPARQ_RETURN_IF_ERROR(Read(j, "data_samples", path, &p.data_samples));
  SPARQ_RETURN_IF_ERROR(Read(j, "batch_size", path, &p.batch_size));
  SPARQ_RETURN_IF_ERROR(Read(j, "shards", path, &p.shards));
  SPARQ_RETURN_IF_ERROR(Read(j, "samples", path, &p.samples));
  SPARQ_RETURN_IF_ERROR(Read(j, "batches", path, &p.batches));
  SPARQ_RETURN_IF_ERROR(ReadFoldedInputs(j, path, &p.folded_inputs));
  if (p.method.bins < 128 || p.method.bins % 2 != 0) return Status::Corruption(path + ": bins must be even and >= 128");
  if (p.shards < 1) return Status::Corruption(path + ": shards must be >= 1");
  const json& req = j.value("requested", json());
  const json& ids = j.value("shard_ids", json());
  if (!req.is_array() || !ids.is_array()) return Status::Corruption(path + ": \"requested\" and \"shard_ids\" must be arrays");
  for (const json& r : req) {
    if (!r.is_string()) return Status::Corruption(path + ": \"requested\" holds a non-string");
    p.requested.push_back(r.get<std::string>());
  }
  for (const json& id : ids) {
    if (!id.is_number_integer() || id.get<int>() < 0 || id.get<int>() >= p.shards) {
      return Status::Corruption(path + ": \"shard_ids\" holds a value outside [0, shards)");
    }
    p.shard_ids.push_back(id.get<int>());
  }
  auto tensors = j.find("tensors");
  if (tensors == j.end() || !tensors->is_object()) return Status::Corruption(path + ": no \"tensors\" object");
  for (const auto& [name, o] : tensors->items()) {
    const std::string where = path + ": tensor '" + name + "'";
    if (!o.is_object()) return Status::Corruption(where + " is not an object");
    TensorObservation obs;
    obs.name = name;
    for (auto [key, value] : {std::pair<const char*, float*>{"min", &obs.min}, {"max", &obs.max}}) {
      auto it = o.find(key);
      if (it == o.end() || !(it->is_null() || it->is_number())) {
        return Status::Corruption(where + ": \"" + key + "\" must be a number or null");
      }
      if (it->is_number()) *value = it->get<float>();
    }
    double range = 0.0;
    SPARQ_RETURN_IF_ERROR(Read(o, "range", where, &range));
    if (range != 0.0 && !IsPowerOfTwo(range)) return Status::Corruption(where + ": \"range\" is not 0 or a power of two");
    auto counts = o.find("counts");
    if (counts == o.end() || !counts->is_array() || static_cast<int>(counts->size()) != p.method.bins) {
      return Status::Corruption(where + ": \"counts\" must be an array of " + std::to_string(p.method.bins) + " counts");
    }
    std::vector<int64_t> c;
    c.reserve(counts->size());
    for (const json& v : *counts) {
      if (!v.is_number_integer() || v.get<int64_t>() < 0) return Status::Corruption(where + ": a count is not a whole number >= 0");
      c.push_back(v.get<int64_t>());
    }
    obs.hist = AbsHistogram::FromCounts(std::move(c), range);
    p.tensors.push_back(std::move(obs));
  }
  std::sort(p.tensors.begin(), p.tensors.end(),
            [](const TensorObservation& a, const TensorObservation& b) { return a.name < b.name; });
  return p;
}

StatusOr<PartialCalibration> MergePartials(const std::vector<PartialCalibration>& parts) {
  if (parts.empty()) return Status::InvalidArgument("merge: no partial calibrations given");
  const PartialCalibration& first = parts[0];
  PartialCalibration merged;
  merged.model_id = first.model_id;
  merged.method = first.method;
  merged.backend = first.backend;
  merged.requested = first.requested;
  merged.data_samples = first.data_samples;
  merged.batch_size = first.batch_size;
  merged.shards = first.shards;
  merged.folded_inputs = first.folded_inputs;
  std::map<int, std::string> seen;  // shard -> the part that holds it
  std::map<std::string, TensorObservation> tensors;
  for (const PartialCalibration& p : parts) {
    const std::string differs = "merge: " + Describe(p) + " and " + Describe(first) + " differ in ";
    if (p.model_id != first.model_id) {
      return Status::InvalidArgument(differs + "model (" + p.model_id + " vs " + first.model_id +
                                     "): parts of different models do not merge");
    }
    const CalibrationMethodOptions& a = p.method;
    const CalibrationMethodOptions& b = first.method;
    if (a.method != b.method || a.bins != b.bins || a.percentile != b.percentile || a.symmetric != b.symmetric) {
      return Status::InvalidArgument(differs + "method options (method, bins, percentile or symmetric)");
    }
    if (p.backend != first.backend) return Status::InvalidArgument(differs + "backend");
    if (p.folded_inputs != first.folded_inputs) {
      return Status::InvalidArgument(differs + "the pinned inputs whose Ifs were folded (--constant): parts of "
                                     "differently folded models do not merge");
    }
    if (p.requested != first.requested) return Status::InvalidArgument(differs + "the tensors observed (int8_only / tensors)");
    if (p.data_samples != first.data_samples || p.batch_size != first.batch_size) {
      return Status::InvalidArgument(differs + "data (samples " + std::to_string(p.data_samples) + " vs " +
                                     std::to_string(first.data_samples) + ", batch size " +
                                     std::to_string(p.batch_size) + " vs " + std::to_string(first.batch_size) + ")");
    }
    if (p.shards != first.shards) {
      return Status::InvalidArgument(differs + "shard count (" + std::to_string(p.shards) + " vs " +
                                     std::to_string(first.shards) + ")");
    }
    for (int id : p.shard_ids) {
      auto [it, added] = seen.emplace(id, Describe(p));
      if (!added) {
        return Status::InvalidArgument("merge: shard " + std::to_string(id) + " of " + std::to_string(p.shards) +
                                       " is given twice (" + it->second + " and " + Describe(p) + ")");
      }
    }
    for (const TensorObservation& o : p.tensors) {
      if (o.hist.bins() != first.method.bins) {
        return Status::InvalidArgument("merge: " + Describe(p) + ": tensor '" + o.name + "' has " +
                                       std::to_string(o.hist.bins()) + " bins, not " + std::to_string(first.method.bins));
      }
      auto [it, added] = tensors.try_emplace(o.name, o);
      if (added) continue;
      it->second.min = std::min(it->second.min, o.min);
      it->second.max = std::max(it->second.max, o.max);
      it->second.hist.Merge(o.hist);
    }
    merged.samples += p.samples;
    merged.batches += p.batches;
  }
  std::string missing;
  for (int id = 0; id < first.shards; ++id)
    if (!seen.count(id)) missing += (missing.empty() ? "" : ", ") + std::to_string(id);
  if (!missing.empty()) {
    return Status::InvalidArgument("merge: shard(s) " + missing + " of " + std::to_string(first.shards) +
                                   " missing: give every part of the run");
  }
  if (first.data_samples > 0 && merged.samples != first.data_samples) {
    return Status::InvalidArgument("merge: the parts observed " + std::to_string(merged.samples) +
                                   " samples, the data holds " + std::to_string(first.data_samples));
  }
  for (const auto& [id, source] : seen) merged.shard_ids.push_back(id);
  for (auto& [name, o] : tensors) merged.tensors.push_back(std::move(o));
  return merged;
}

}  // namespace sparq
