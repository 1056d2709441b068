// The effective recipe as YAML, and helpers over a parsed recipe: layer
// matching and the list of files a run writes (see include/sparq/recipe.h).
#include <yaml-cpp/yaml.h>

#include <cmath>
#include <exception>
#include <filesystem>

#include "graph/name_pattern.h"
#include "pipeline/yaml_fields.h"
#include "sparq/recipe.h"

namespace sparq {
namespace {

namespace fs = std::filesystem;
using yaml_fields::FormatNumber;

// An empty list as "[]" on the key's line.
YAML::Emitter& BeginList(YAML::Emitter& e, bool empty) {
  if (empty) e << YAML::Flow;
  return e << YAML::BeginSeq;
}

// N:M goes out quoted: YAML 1.1 readers (PyYAML) take a plain 2:4 as the
// base-60 number 124.
YAML::Emitter& EmitStructure(YAML::Emitter& e, const RecipePrune::Structure& s) {
  if (s.kind == RecipePrune::Structure::Kind::kNM) e << YAML::DoubleQuoted;
  return e << s.ToString();
}

// Numbers go out as their shortest exact text, so they read back unchanged.
YAML::Emitter& Num(YAML::Emitter& e, double v) { return e << FormatNumber(v); }

YAML::Emitter& Numbers(YAML::Emitter& e, const std::vector<double>& values) {
  e << YAML::Flow << YAML::BeginSeq;
  for (double v : values) Num(e, v);
  return e << YAML::EndSeq;
}

YAML::Emitter& Strings(YAML::Emitter& e, const std::vector<std::string>& values) {
  e << YAML::Flow << YAML::BeginSeq;
  for (const auto& v : values) e << v;
  return e << YAML::EndSeq;
}

void EmitOutput(YAML::Emitter& e, const RecipeOutput& o) {
  e << YAML::Key << "output" << YAML::Value << YAML::BeginMap;
  e << YAML::Key << "dir" << YAML::Value << o.dir;
  e << YAML::Key << "model" << YAML::Value << o.model;
  e << YAML::Key << "format" << YAML::Value << RecipeEnumName(o.format);
  e << YAML::Key << "scales" << YAML::Value << o.scales;
  e << YAML::Key << "trt_cache" << YAML::Value << o.trt_cache;
  e << YAML::Key << "trt_version" << YAML::Value << YAML::DoubleQuoted << o.trt_version;
  e << YAML::Key << "external_data" << YAML::Value << o.external_data;
  e << YAML::Key << "sparse_initializers" << YAML::Value << o.sparse_initializers;
  e << YAML::Key << "overwrite" << YAML::Value << o.overwrite;
  e << YAML::EndMap;
}

void EmitData(YAML::Emitter& e, const RecipeData& d) {
  e << YAML::Key << "data" << YAML::Value << YAML::BeginMap;
  if (!d.calibration.empty()) e << YAML::Key << "calibration" << YAML::Value << d.calibration;
  e << YAML::Key << "evaluation" << YAML::Value << d.evaluation;
  if (!d.labels.empty()) e << YAML::Key << "labels" << YAML::Value << d.labels;
  if (!d.input.empty()) e << YAML::Key << "input" << YAML::Value << d.input;
  e << YAML::Key << "calibration_samples" << YAML::Value << d.calibration_samples;
  e << YAML::Key << "evaluation_samples" << YAML::Value << d.evaluation_samples;
  e << YAML::Key << "batch_size" << YAML::Value << d.batch_size;
  e << YAML::Key << "preprocess" << YAML::Value << YAML::BeginMap;
  e << YAML::Key << "scale" << YAML::Value;
  Num(e, d.preprocess.scale);
  if (!d.preprocess.mean.empty()) Numbers(e << YAML::Key << "mean" << YAML::Value, d.preprocess.mean);
  if (!d.preprocess.stddev.empty()) Numbers(e << YAML::Key << "std" << YAML::Value, d.preprocess.stddev);
  e << YAML::Key << "layout" << YAML::Value << RecipeEnumName(d.preprocess.layout);
  e << YAML::EndMap;
  if (!d.constants.empty()) {
    e << YAML::Key << "constants" << YAML::Value << YAML::BeginMap;
    for (const auto& [name, values] : d.constants) {
      e << YAML::Key << name << YAML::Value;
      if (values.size() == 1) Num(e, values[0]);
      else Numbers(e, values);
    }
    e << YAML::EndMap;
  }
  e << YAML::EndMap;
}

void EmitPrune(YAML::Emitter& e, const RecipePrune& p) {
  e << YAML::Key << "prune" << YAML::Value << YAML::BeginMap;
  e << YAML::Key << "enabled" << YAML::Value << p.enabled;
  EmitStructure(e << YAML::Key << "structure" << YAML::Value, p.structure);
  e << YAML::Key << "sparsity" << YAML::Value;
  Num(e, p.sparsity);
  e << YAML::Key << "schedule" << YAML::Value << RecipeEnumName(p.schedule);
  e << YAML::Key << "steps" << YAML::Value << p.steps;
  e << YAML::Key << "scope" << YAML::Value << RecipeEnumName(p.scope);
  e << YAML::Key << "score" << YAML::Value << RecipeEnumName(p.score);
  e << YAML::Key << "recovery" << YAML::Value << p.recovery;
  // Written only when not the default, so existing recipes keep their hash
  // (sparq.recipe_fnv1a64) and their models' bytes.
  if (p.recovery_method != RecoveryMethod::kLeastSquares)
    e << YAML::Key << "recovery_method" << YAML::Value << RecoveryMethodName(p.recovery_method);
  if (!p.token_mask.empty()) e << YAML::Key << "token_mask" << YAML::Value << p.token_mask;
  if (p.recovery_damping != RecoveryOptions().damping) Num(e << YAML::Key << "recovery_damping" << YAML::Value, p.recovery_damping);
  if (p.obs_block != RecoveryOptions().obs_block) e << YAML::Key << "obs_block" << YAML::Value << p.obs_block;
  e << YAML::Key << "reconstruction" << YAML::Value << YAML::BeginMap;
  e << YAML::Key << "method" << YAML::Value << PruneReconstructionName(p.reconstruction.method);
  e << YAML::Key << "iterations" << YAML::Value << p.reconstruction.iterations;
  Num(e << YAML::Key << "learning_rate" << YAML::Value, p.reconstruction.learning_rate);
  e << YAML::Key << "block_layers" << YAML::Value << p.reconstruction.block_layers;
  e << YAML::EndMap;
  e << YAML::Key << "skip_first_last" << YAML::Value << p.skip_first_last;
  e << YAML::Key << "allow_partial" << YAML::Value << p.allow_partial;
  e << YAML::Key << "allocation" << YAML::Value << RecipeEnumName(p.allocation);
  e << YAML::Key << "kernel_table" << YAML::Value << p.kernel_table;
  BeginList(e << YAML::Key << "layers" << YAML::Value, p.layers.empty());
  for (const auto& l : p.layers) {
    e << YAML::BeginMap << YAML::Key << "match" << YAML::Value << l.match;
    if (l.sparsity) Num(e << YAML::Key << "sparsity" << YAML::Value, *l.sparsity);
    if (l.structure) EmitStructure(e << YAML::Key << "structure" << YAML::Value, *l.structure);
    e << YAML::EndMap;
  }
  e << YAML::EndSeq;
  if (p.retrain) {
    e << YAML::Key << "retrain" << YAML::Value << YAML::BeginMap;
    e << YAML::Key << "command" << YAML::Value << YAML::Flow << YAML::BeginSeq;
    for (const auto& a : p.retrain->command) e << YAML::DoubleQuoted << a;
    e << YAML::EndSeq;
    e << YAML::Key << "shell" << YAML::Value << p.retrain->shell;
    Num(e << YAML::Key << "timeout" << YAML::Value, p.retrain->timeout);
    e << YAML::Key << "data" << YAML::Value << p.retrain->data;
    e << YAML::EndMap;
  }
  if (p.sensitivity) {
    e << YAML::Key << "sensitivity" << YAML::Value << YAML::BeginMap;
    if (std::isfinite(p.sensitivity->budget)) Num(e << YAML::Key << "budget" << YAML::Value, p.sensitivity->budget);
    Numbers(e << YAML::Key << "sparsities" << YAML::Value, p.sensitivity->sparsities);
    e << YAML::Key << "recovery" << YAML::Value << p.sensitivity->recovery;
    e << YAML::EndMap;
  }
  e << YAML::EndMap;
}

void EmitQuantize(YAML::Emitter& e, const RecipeQuantize& q) {
  e << YAML::Key << "quantize" << YAML::Value << YAML::BeginMap;
  e << YAML::Key << "enabled" << YAML::Value << q.enabled;
  e << YAML::Key << "precision" << YAML::Value << RecipeEnumName(q.precision);
  e << YAML::Key << "mode" << YAML::Value << RecipeEnumName(q.mode);
  if (q.precision == RecipeQuantize::Precision::kInt4) {
    e << YAML::Key << "int4" << YAML::Value << YAML::BeginMap;
    e << YAML::Key << "block_size" << YAML::Value << q.int4.block_size;
    e << YAML::Key << "symmetric" << YAML::Value << q.int4.symmetric;
    e << YAML::Key << "method" << YAML::Value
      << (q.int4.method == Int4Method::kGptq ? "gptq" : q.int4.method == Int4Method::kAwq ? "awq" : "rtn");
    e << YAML::Key << "format" << YAML::Value
      << (q.int4.format == Int4Format::kQdq ? "qdq" : "matmulnbits");
    e << YAML::EndMap;
  }
  if (!q.scales.empty()) {
    e << YAML::Key << "scales" << YAML::Value << q.scales;  // instead of calibrating: no calibration keys
  } else {
    e << YAML::Key << "calibration" << YAML::Value << YAML::BeginMap;
    e << YAML::Key << "method" << YAML::Value << RecipeEnumName(q.calibration.method);
    Num(e << YAML::Key << "percentile" << YAML::Value, q.calibration.percentile);
    e << YAML::Key << "bins" << YAML::Value << q.calibration.bins;
    e << YAML::Key << "symmetric" << YAML::Value << q.calibration.symmetric;
    e << YAML::EndMap;
  }
  e << YAML::Key << "search" << YAML::Value << YAML::BeginMap;
  e << YAML::Key << "enabled" << YAML::Value << q.search.enabled;
  Num(e << YAML::Key << "budget_s" << YAML::Value, q.search.budget_s);
  Strings(e << YAML::Key << "candidates" << YAML::Value, q.search.candidates);
  e << YAML::EndMap;
  e << YAML::Key << "per_channel" << YAML::Value << q.per_channel;
  e << YAML::Key << "fold_batchnorm" << YAML::Value << q.fold_batchnorm;
  e << YAML::Key << "gather_int8" << YAML::Value << q.gather_int8;
  e << YAML::Key << "bias_correction" << YAML::Value << q.bias_correction;
  e << YAML::Key << "rounding" << YAML::Value
    << (q.rounding == RecipeQuantize::Rounding::kAdaRound ? "adaround" : "nearest");
  if (q.rounding == RecipeQuantize::Rounding::kAdaRound) {
    e << YAML::Key << "adaround" << YAML::Value << YAML::BeginMap;
    e << YAML::Key << "iterations" << YAML::Value << q.adaround.iterations;
    e << YAML::EndMap;
  }
  e << YAML::Key << "quantize_outputs" << YAML::Value << q.quantize_outputs;
  e << YAML::Key << "smooth" << YAML::Value << YAML::BeginMap;
  e << YAML::Key << "enabled" << YAML::Value << q.smooth.enabled;
  if (q.smooth.auto_alpha) e << YAML::Key << "alpha" << YAML::Value << "auto";
  else Num(e << YAML::Key << "alpha" << YAML::Value, q.smooth.alpha);
  e << YAML::Key << "alphas" << YAML::Value << YAML::Flow << YAML::BeginSeq;
  for (double a : q.smooth.alphas) Num(e, a);
  e << YAML::EndSeq;
  e << YAML::Key << "holdout_every" << YAML::Value << q.smooth.holdout_every;
  Num(e << YAML::Key << "min_outlier_ratio" << YAML::Value, q.smooth.min_outlier_ratio);
  e << YAML::EndMap;
  BeginList(e << YAML::Key << "layers" << YAML::Value, q.layers.empty());
  for (const auto& l : q.layers) {
    e << YAML::BeginMap << YAML::Key << "match" << YAML::Value << l.match;
    e << YAML::Key << "precision" << YAML::Value << RecipeEnumName(l.precision) << YAML::EndMap;
  }
  e << YAML::EndSeq;
  Strings(e << YAML::Key << "exclude_ops" << YAML::Value, q.exclude_ops);
  e << YAML::Key << "fp16" << YAML::Value << YAML::BeginMap;
  Strings(e << YAML::Key << "block_ops" << YAML::Value, q.fp16.block_ops);
  e << YAML::Key << "keep_io_types" << YAML::Value << q.fp16.keep_io_types;
  e << YAML::EndMap;
  e << YAML::Key << "fallback" << YAML::Value << YAML::BeginMap;
  e << YAML::Key << "enabled" << YAML::Value << q.fallback.enabled;
  e << YAML::Key << "to" << YAML::Value << RecipeEnumName(q.fallback.to);
  if (q.fallback.max_layers >= 1) {
    e << YAML::Key << "max_layers" << YAML::Value << q.fallback.max_layers;
  } else {
    e << YAML::Key << "max_layers" << YAML::Value << "auto";
  }
  e << YAML::Key << "rank_by" << YAML::Value << RecipeEnumName(q.fallback.rank_by);
  e << YAML::EndMap << YAML::EndMap;
}

void EmitEvaluate(YAML::Emitter& e, const RecipeEvaluate& ev) {
  e << YAML::Key << "evaluate" << YAML::Value << YAML::BeginMap;
  e << YAML::Key << "backend" << YAML::Value << RecipeEnumName(ev.backend);
  e << YAML::Key << "metric" << YAML::Value << RecipeEnumName(ev.metric);
  e << YAML::Key << "threads" << YAML::Value << ev.threads;
  if (!ev.output.empty()) e << YAML::Key << "output" << YAML::Value << ev.output;
  if (ev.map.enabled) Num(e << YAML::Key << "threshold" << YAML::Value, ev.map.threshold);
  if (ev.boxes.enabled) {
    Num(e << YAML::Key << "box_score_threshold" << YAML::Value, ev.boxes.score_threshold);
    Num(e << YAML::Key << "box_nms_iou" << YAML::Value, ev.boxes.nms_iou);
    Num(e << YAML::Key << "box_match_iou" << YAML::Value, ev.boxes.match_iou);
  }
  e << YAML::Key << "gate" << YAML::Value << YAML::BeginMap;
  if (ev.gate.check_drop) Num(e << YAML::Key << "max_drop" << YAML::Value, ev.gate.max_drop);
  e << YAML::Key << "relative" << YAML::Value << ev.gate.relative;
  if (ev.gate.min_sqnr_db) Num(e << YAML::Key << "min_sqnr_db" << YAML::Value, *ev.gate.min_sqnr_db);
  if (ev.gate.min_cosine) Num(e << YAML::Key << "min_cosine" << YAML::Value, *ev.gate.min_cosine);
  if (ev.gate.min_top1) Num(e << YAML::Key << "min_top1" << YAML::Value, *ev.gate.min_top1);
  e << YAML::Key << "failed_model" << YAML::Value << RecipeEnumName(ev.gate.failed_model);
  e << YAML::EndMap << YAML::EndMap;
}

void EmitReport(YAML::Emitter& e, const RecipeReport& r) {
  e << YAML::Key << "report" << YAML::Value << YAML::BeginMap;
  e << YAML::Key << "json" << YAML::Value << r.json;
  e << YAML::Key << "junit" << YAML::Value << r.junit;
  e << YAML::Key << "markdown" << YAML::Value << r.markdown;
  e << YAML::EndMap;
}

}  // namespace

std::string RecipeToYaml(const Recipe& r) {
  YAML::Emitter e;
  e << YAML::Comment("effective recipe: every key, defaults filled, paths absolute" +
                     (r.source.empty() ? std::string() : " (from " + r.source + ")"));
  e << YAML::BeginMap;
  e << YAML::Key << "version" << YAML::Value << r.version;
  e << YAML::Key << "name" << YAML::Value << r.name;
  e << YAML::Key << "model" << YAML::Value << r.model;
  EmitOutput(e, r.output);
  EmitData(e, r.data);
  EmitPrune(e, r.prune);
  EmitQuantize(e, r.quantize);
  EmitEvaluate(e, r.evaluate);
  EmitReport(e, r.report);
  e << YAML::EndMap;
  return std::string(e.c_str()) + "\n";
}

// The parser rejects invalid patterns; an unchecked one matches only itself.
bool LayerMatches(const std::string& pattern, const std::string& node_name) { return NameMatches(pattern, node_name); }

std::vector<std::string> RecipeOutputFiles(const Recipe& r) {
  std::vector<std::string> files = {r.output.model};
  if (r.output.external_data) files.push_back(r.output.model + ".data");
  const bool calibrated = r.quantize.enabled && r.quantize.precision != RecipeQuantize::Precision::kFp16 &&
                          r.quantize.precision != RecipeQuantize::Precision::kInt4;
  if (calibrated) {
    // A table given in quantize.scales is not written again.
    if (!r.output.scales.empty() && r.quantize.scales.empty()) files.push_back(r.output.scales);
    if (!r.output.trt_cache.empty()) files.push_back(r.output.trt_cache);
  }
  for (const std::string* f : {&r.report.json, &r.report.junit, &r.report.markdown})
    if (!f->empty()) files.push_back(*f);
  return files;
}

Status CheckOutputsWritable(const Recipe& r) {
  std::error_code ec;
  if (fs::exists(r.output.dir, ec) && !fs::is_directory(r.output.dir, ec))
    return Status::InvalidArgument("output.dir exists and is not a folder: " + r.output.dir);
  if (r.output.overwrite) return Status::OK();
  std::string existing;
  for (const auto& f : RecipeOutputFiles(r))
    if (fs::exists(f, ec)) existing += "\n  " + f;
  if (existing.empty()) return Status::OK();
  return Status::InvalidArgument("output files exist already (set output.overwrite: true to replace them):" +
                                 existing);
}

}  // namespace sparq
