// The honest gate: see gate.h.
#include "pipeline/gate.h"

#include <cmath>
#include <cstdio>
#include <filesystem>

#include "kernels/backend.h"
#include "sparq/device.h"
#include "sparq/onnx_io.h"

namespace sparq {
namespace fs = std::filesystem;

namespace {

std::string Num(double v, int digits) {
  if (std::isnan(v)) return "-";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}


// A floor check: `value` must be >= `floor` (NaN fails: not measured).
GateCheck Floor(const std::string& metric, const std::string& key, double value, double floor, const std::string& unit) {
  GateCheck c;
  c.metric = metric;
  c.limit_key = key;
  c.value = value;
  c.limit = floor;
  c.passed = !std::isnan(value) && value >= floor;
  if (std::isnan(value)) c.text = metric + " not measured (needs data.labels or a reference), " + key + " " + Num(floor, 2) + unit;
  else c.text = metric + " " + Num(value, 2) + unit + (c.passed ? " >= " : " < ") + key + " " + Num(floor, 2) + unit;
  return c;
}

}  // namespace

StatusOr<BackendChoice> ResolveBackend(RecipeEvaluate::Backend backend) {
  // The executor's own rule (kernels/backend.h), so that what the report
  // names is what runs.
  std::string note;
  switch (backend) {
    case RecipeEvaluate::Backend::kCpu: return BackendChoice{"cpu", "asked for"};
    case RecipeEvaluate::Backend::kCuda: {
      StatusOr<const Backend*> cuda = ResolveBackend("cuda", &note);
      if (!cuda.ok()) {
        return Status::InvalidArgument("evaluate.backend: cuda cannot run here: " + cuda.status().message() +
                                       "; use cpu or auto");
      }
      return BackendChoice{(*cuda)->name(), "asked for"};
    }
    case RecipeEvaluate::Backend::kAuto: {
      SPARQ_ASSIGN_OR_RETURN(const Backend* chosen, ResolveBackend("auto", &note));
      const std::string prefix = "backend auto: ";
      if (note.rfind(prefix, 0) == 0) note = note.substr(prefix.size());
      return BackendChoice{chosen->name(), "auto: " + note};
    }
  }
  return Status::InvalidArgument("unknown evaluate.backend");
}

int GateDigits(const std::string& metric, bool relative) {
  return relative || metric == "cosine" || metric == "mean_cosine" ? 4 : 2;
}

void JudgeGate(const RecipeEvaluate::Gate& gate, RunReport* r) {
  r->gate_checks.clear();
  const std::string unit_of_metric = r->metric == "sqnr" ? " dB" : "";
  if (gate.check_drop) {
    double drop = r->fp32_metric - r->output_metric;
    if (gate.relative) drop = r->fp32_metric != 0.0 ? drop / std::fabs(r->fp32_metric) : 0.0;
    r->drop = drop;
    GateCheck c;
    c.metric = r->metric;
    c.limit_key = "max_drop";
    c.value = drop;
    c.limit = gate.max_drop;
    c.passed = drop <= gate.max_drop;
    const int digits = GateDigits(r->metric, gate.relative);
    const int value_digits = GateDigits(r->metric, false);
    c.text = r->metric + " " + Num(r->fp32_metric, value_digits) + " -> " + Num(r->output_metric, value_digits) +
             unit_of_metric + ", drop " +
             Num(drop, digits) + (gate.relative ? " (relative)" : "") + (c.passed ? " <= " : " > ") + "max_drop " +
             Num(gate.max_drop, digits);
    r->gate_checks.push_back(c);
  } else {
    r->drop = std::nan("");
  }
  if (gate.min_sqnr_db) r->gate_checks.push_back(Floor("sqnr", "min_sqnr_db", r->sqnr_db, *gate.min_sqnr_db, " dB"));
  if (gate.min_cosine) r->gate_checks.push_back(Floor("cosine", "min_cosine", r->cosine, *gate.min_cosine, ""));
  if (gate.min_top1) r->gate_checks.push_back(Floor("top1", "min_top1", r->top1, *gate.min_top1, "%"));
  r->passed = true;
  for (const auto& c : r->gate_checks) r->passed &= c.passed;
}

void JudgePruneTarget(const Recipe& recipe, const std::string& stop_message, RunReport* r) {
  if (!recipe.prune.enabled || stop_message.empty()) return;
  if (recipe.prune.allow_partial) {
    r->warnings.push_back("prune: requested sparsity not reached (prune.allow_partial: true): " + stop_message);
    return;
  }
  GateCheck c;
  c.metric = "sparsity";
  c.limit_key = "prune.sparsity";
  c.value = r->weight_sparsity;
  c.limit = recipe.prune.sparsity;
  c.passed = false;
  c.text = "sparsity: requested prune.sparsity not reached: " + stop_message +
           " (set prune.allow_partial: true to accept a partial result)";
  r->gate_checks.push_back(c);
  r->passed = false;
}

std::string FailedModelPath(const std::string& model_path) {
  fs::path p(model_path);
  std::string stem = p.stem().string();
  const std::string ext = p.extension().string();
  return (p.parent_path() / (stem + ".FAILED" + (ext.empty() ? ".onnx" : ext))).string();
}

Status SettleFailedModel(const Recipe& recipe, RunReport* r) {
  const std::string model = recipe.output.model;
  const std::string data = model + ".data";
  const bool external = recipe.output.external_data;
  std::error_code ec;
  if (r->passed) {  // a failed model left by an earlier run would now contradict this one
    fs::remove(FailedModelPath(model), ec);
    fs::remove(FailedModelPath(model) + ".data", ec);
    return Status::OK();
  }
  // Drop the model (and its external data) from the list of files written.
  std::vector<std::string> files;
  for (const auto& f : r->files)
    if (f != model && !(external && f == data)) files.push_back(f);

  if (recipe.evaluate.gate.failed_model == RecipeEvaluate::Gate::FailedModel::kDiscard) {
    fs::remove(model, ec);
    if (ec) return Status::IOError("gate failed: cannot remove " + model + ": " + ec.message());
    if (external) fs::remove(data, ec);
    r->output_model.clear();
    r->files = files;
    return Status::OK();
  }
  // rename. External data is referenced from inside the model by its file
  // name, so the model is loaded and saved again under the new name.
  const std::string failed = FailedModelPath(model);
  if (external) {
    auto m = LoadModel(model);
    if (!m.ok()) return m.status().WithContext("gate failed: renaming " + model);
    SaveOptions s;
    s.external_data = true;
    s.sparse_initializers = recipe.output.sparse_initializers;
    SPARQ_RETURN_IF_ERROR(SaveModel(*m, failed, s).WithContext("gate failed: writing " + failed));
    fs::remove(model, ec);
    fs::remove(data, ec);
    if (ec) return Status::IOError("gate failed: cannot remove " + data + ": " + ec.message());
    files.insert(files.begin(), {failed, failed + ".data"});
  } else {
    fs::rename(model, failed, ec);
    if (ec) return Status::IOError("gate failed: cannot rename " + model + " to " + failed + ": " + ec.message());
    files.insert(files.begin(), failed);
  }
  r->output_model = failed;
  r->files = files;
  return Status::OK();
}

}  // namespace sparq
