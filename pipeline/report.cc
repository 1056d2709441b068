// The reports of `sparq run`: JSON for machines, JUnit for CI systems,
// Markdown for pull requests, a text table for the terminal.
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <sstream>

#include "pipeline/report.h"

#include "formats/text_table.h"
#include "pipeline/gate.h"
#include "sparq/file_io.h"
#include "sparq/pipeline.h"
#include "sparq/version.h"

namespace sparq {
namespace {

std::string Fixed(double v, int digits = 2) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

std::string Bytes(int64_t b) {
  char buf[64];
  if (b >= (1 << 20)) std::snprintf(buf, sizeof buf, "%.2f MiB", b / 1048576.0);
  else std::snprintf(buf, sizeof buf, "%.1f KiB", b / 1024.0);
  return buf;
}

// Every check of the gate, "; "-separated, each naming its metric; with
// `only_failed` just the failed ones.
std::string Verdict(const RunReport& r, bool only_failed = false) {
  if (!r.nonfinite.empty()) return "the compressed model computes NaN/Inf: first at " + r.nonfinite;
  if (!r.gate_checks.empty()) {
    std::string out;
    for (const auto& c : r.gate_checks) {
      if (only_failed && c.passed) continue;
      out += (out.empty() ? "" : "; ") + c.text;
    }
    return out;
  }
  std::ostringstream os;
  const int value_digits = GateDigits(r.metric, false), drop_digits = GateDigits(r.metric, r.relative);
  os << r.metric << " " << Fixed(r.fp32_metric, value_digits) << " -> " << Fixed(r.output_metric, value_digits)
     << ", drop " << Fixed(r.drop, drop_digits) << (r.relative ? " (relative)" : "") << (r.passed ? " <= " : " > ")
     << Fixed(r.max_drop, drop_digits);
  return os.str();
}

// JSON number, or null for NaN and infinities (JSON has neither).
nlohmann::json NumberOrNull(double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr); }

// JSON gives every ratio as a fraction in [0, 1] (one convention for all of
// sparq's JSON); the report keeps percent, as recipes write the limits.
nlohmann::json Fraction(double percent) { return NumberOrNull(percent / 100.0); }

bool IsPercent(const std::string& metric) {
  auto m = ParseMetric(metric);
  return m.ok() && MetricIsPercent(*m);
}

// A value of `metric` for JSON: a fraction for percent metrics, else as is.
nlohmann::json MetricJson(const std::string& metric, double v) {
  return IsPercent(metric) ? Fraction(v) : NumberOrNull(v);
}

// The gate's limits in one line: "top1 drop <= 0.50, sqnr >= 30.00 dB".
std::string Limits(const RunReport& r) {
  const int drop_digits = GateDigits(r.metric, r.relative);
  if (r.gate_checks.empty()) return r.metric + " drop <= " + Fixed(r.max_drop, drop_digits);
  std::string out;
  for (const auto& c : r.gate_checks) {
    std::string one = c.limit_key == "max_drop" ? c.metric + " drop <= " + Fixed(c.limit, drop_digits)
                      : c.metric == "sparsity" ? "sparsity reached"
                                               : c.metric + " >= " + Fixed(c.limit);
    out += (out.empty() ? "" : ", ") + one;
  }
  return out;
}

}  // namespace

std::string RunReport::ToJson() const {
  using nlohmann::json;
  json j;
  j["schema_version"] = kJsonSchemaVersion;
  j["sparq_version"] = Version();
  j["recipe"] = recipe;
  j["name"] = name;
  j["model"] = model;
  j["output_model"] = output_model;
  j["files"] = files;
  j["size"] = {{"fp32_bytes", fp32_bytes}, {"output_bytes", output_bytes}};
  j["weight_sparsity"] = weight_sparsity;
  // A relative drop is a fraction already; an absolute one is in the
  // metric's unit.
  auto drop_json = [&](const std::string& m, double v) { return relative ? NumberOrNull(v) : MetricJson(m, v); };
  json checks = json::array();
  for (const auto& c : gate_checks) {
    const bool is_drop = c.limit_key == "max_drop";
    checks.push_back({{"metric", c.metric},
                      {"limit_key", c.limit_key},
                      {"value", is_drop ? drop_json(c.metric, c.value) : MetricJson(c.metric, c.value)},
                      {"limit", is_drop ? drop_json(c.metric, c.limit) : MetricJson(c.metric, c.limit)},
                      {"passed", c.passed},
                      {"text", c.text}});
  }
  j["gate"] = {{"metric", metric},
               {"fp32", MetricJson(metric, fp32_metric)},
               {"output", MetricJson(metric, output_metric)},
               {"drop", drop_json(metric, drop)},
               {"max_drop", drop_json(metric, max_drop)},
               {"relative", relative},
               {"passed", passed},
               {"checks", checks}};
  if (!nonfinite.empty()) j["gate"]["nonfinite"] = nonfinite;
  j["agreement"] = {{"top1_agreement", Fraction(top1_agreement)},
                    {"sqnr_db", NumberOrNull(sqnr_db)},
                    {"cosine", NumberOrNull(cosine)},
                    {"top1", Fraction(top1)},
                    {"samples", eval_samples}};
  j["backend"] = backend;
  json layers = json::array();
  for (const auto& l : this->layers)
    layers.push_back({{"node", l.node}, {"op", l.op_type}, {"precision", PrecisionName(l.precision)}, {"reason", l.reason}});
  j["layers"] = layers;
  j["quantized_layers"] = quantized_layers;
  if (!nothing_quantized.empty()) j["nothing_quantized"] = nothing_quantized;
  if (!folded_ifs.empty()) j["folded_ifs"] = {{"ifs", folded_ifs}, {"inputs_removed", inputs_removed}};
  json fb = json::array();
  for (const auto& f : fallback)
    fb.push_back({{"node", f.node},
                  {"to", f.to},
                  {"ranked_by", f.ranked_by},
                  // dB for the SQNR rankings; the metric (a fraction for percent metrics) for "metric"
                  {"score", f.ranked_by == "metric" ? MetricJson(metric, f.score) : NumberOrNull(f.score)},
                  {"metric_after", MetricJson(metric, f.metric_after)},
                  {"kept", f.kept}});
  j["fallback"] = fb;
  if (!search.empty()) {
    json rows = json::array();
    for (const auto& r : search)
      rows.push_back({{"candidate", r.candidate},
                      {"metric", r.metric},
                      {"held_out_score", r.tried ? MetricJson(r.metric, r.score) : json(nullptr)},
                      {"held_out_sqnr_db", NumberOrNull(r.sqnr_db)},
                      {"seconds", r.seconds},
                      {"tried", r.tried},
                      {"chosen", r.chosen},
                      {"note", r.note}});
    j["search"] = rows;
  }
  if (pruned) {
    json steps = json::array();
    for (const auto& st : prune_steps)
      steps.push_back({{"step", st.step},
                       {"target", st.target},
                       {"sparsity", st.sparsity},
                       {"metric_without_recovery", MetricJson(metric, st.metric_masked)},
                       {"metric", MetricJson(metric, st.metric)},
                       {"sqnr_db_without_recovery", NumberOrNull(st.sqnr_masked_db)},
                       {"sqnr_db", NumberOrNull(st.sqnr_db)},
                       {"agreement_without_recovery", Fraction(st.agreement_masked)},
                       {"agreement", Fraction(st.agreement)},
                       {"accepted", st.acceptable},
                       {"retrain", st.retrained ? json{{"rezeroed", st.retrain_rezeroed},
                                                       {"seconds", st.retrain_seconds}}
                                                : json(nullptr)}});
    j["prune"] = {{"steps", steps}, {"summary", prune_text}};
  }
  j["warnings"] = warnings;
  json stages = json::object();
  for (const auto& [s, sec] : stage_seconds) stages[s] = sec;
  j["seconds"] = stages;
  j["peak_rss_mib"] = std::round(peak_rss_mib);
  return j.dump(2) + "\n";
}

std::string RunReport::ToJUnit() const {
  std::ostringstream os;
  double seconds = 0;
  for (const auto& s : stage_seconds) seconds += s.second;
  os << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
     << "<testsuites name=\"sparq\" tests=\"1\" failures=\"" << (passed ? 0 : 1) << "\">\n"
     << "  <testsuite name=\"sparq." << XmlEscape(name) << "\" tests=\"1\" failures=\"" << (passed ? 0 : 1)
     << "\" errors=\"0\" time=\"" << Fixed(seconds, 3) << "\">\n"
     << "    <testcase classname=\"sparq.gate\" name=\"" << XmlEscape(name + ": " + Limits(*this))
     << "\" time=\"" << Fixed(seconds, 3) << "\">\n";
  if (!passed) {
    os << "      <failure message=\"" << XmlEscape("gate failed: " + Verdict(*this, /*only_failed=*/true)) << "\">"
       << XmlEscape("model " + output_model + "\n" + Verdict(*this)) << "</failure>\n";
  }
  os << "      <system-out>" << XmlEscape(Verdict(*this)) << "</system-out>\n"
     << "    </testcase>\n  </testsuite>\n</testsuites>\n";
  return os.str();
}

std::string RunReport::ToMarkdown() const {
  std::ostringstream os;
  // Read as a CI job summary ($GITHUB_STEP_SUMMARY, a merge-request
  // artifact): the verdict first, one line; details below, long tables folded.
  os << "## sparq: " << name << " " << (passed ? "passed" : "FAILED") << "\n\n"
     << "**Gate " << (passed ? "passed" : "failed") << ":** " << Verdict(*this) << " (" << eval_samples
     << " samples; top-1 agreement with FP32 " << Fixed(top1_agreement) << "%).\n\n"
     << "| | FP32 | compressed |\n|---|---|---|\n"
     << "| size | " << Bytes(fp32_bytes) << " | " << Bytes(output_bytes) << " |\n"
     << "| " << metric << " | " << Fixed(fp32_metric, GateDigits(metric, false)) << " | "
     << Fixed(output_metric, GateDigits(metric, false)) << " |\n"
     << "| weight sparsity | | " << Fixed(100 * weight_sparsity, 1) << "% |\n"
     << "| peak memory (RSS) | | " << Fixed(peak_rss_mib, 0) << " MiB |\n\n";
  if (!nothing_quantized.empty()) os << "**Nothing was quantized** (int8 layers: 0): " << nothing_quantized << ".\n\n";
  if (!output_model.empty()) os << "Model: `" << output_model << "`\n\n";
  for (const auto& f : folded_ifs) os << "- folded: " << f << "\n";
  if (!folded_ifs.empty()) os << "\n";
  if (!layers.empty()) {
    int counts[3] = {0, 0, 0};
    for (const auto& l : layers) ++counts[static_cast<int>(l.precision)];
    // <details> folds the table on GitHub and GitLab; the blank lines around
    // the table let both render it as Markdown inside the HTML block.
    os << "<details><summary>" << layers.size() << " layers: " << counts[2] << " int8, " << counts[1] << " fp16, "
       << counts[0] << " fp32</summary>\n\n"
       << "| layer | op | precision | why |\n|---|---|---|---|\n";
    for (const auto& l : layers) os << "| " << l.node << " | " << l.op_type << " | " << PrecisionName(l.precision) << " | " << l.reason << " |\n";
    os << "\n</details>\n\n";
  }
  if (!search.empty()) {
    os << "Search (each candidate calibrated on the fit batches of the calibration data, scored against FP32 on its "
          "held-out batches):\n\n"
       << "| candidate | held-out " << search.front().metric << " | held-out SQNR (dB) | time (s) | chosen |\n"
       << "|---|---|---|---|---|\n";
    for (const auto& r : search) {
      os << "| " << r.candidate << " | " << (r.tried ? Fixed(r.score, 4) : r.note) << " | "
         << (r.tried ? Fixed(r.sqnr_db, 2) : std::string("-")) << " | " << Fixed(r.seconds, 1) << " | "
         << (r.chosen ? "**yes**" : "") << " |\n";
    }
    os << "\n";
  }
  if (!fallback.empty()) {
    os << "Fallback (most harmful INT8 layers first):\n\n";
    for (const auto& f : fallback)
      os << "- `" << f.node << "` to " << f.to << " (ranked by " << f.ranked_by << ": " << Fixed(f.score, 2) << "); "
         << metric << " after: " << Fixed(f.metric_after) << (f.kept ? "" : " (not kept)") << "\n";
    os << "\n";
  }
  if (pruned) {
    os << "Pruning steps (the pruned FP32 model, the same schedule without and with recovery: its " << metric
       << ", and its output against the dense model's, SQNR and top-1 agreement):\n\n"
       << "| step | target | sparsity | " << metric << " without recovery | " << metric
       << " with recovery | SQNR without | SQNR with | agreement without | agreement with | accepted |\n"
       << "|---|---|---|---|---|---|---|---|---|---|\n";
    for (const auto& st : prune_steps)
      os << "| " << st.step << " | " << Fixed(100 * st.target, 1) << "% | " << Fixed(100 * st.sparsity, 1) << "% | "
         << Fixed(st.metric_masked) << " | " << Fixed(st.metric) << " | " << Fixed(st.sqnr_masked_db, 1) << " dB | "
         << Fixed(st.sqnr_db, 1) << " dB | " << Fixed(st.agreement_masked) << "% | " << Fixed(st.agreement) << "% | "
         << (st.acceptable ? "yes" : "no") << (st.retrained ? ", retrained" : "") << " |\n";
    os << "\n```\n" << prune_text << "```\n\n";
  }
  for (const auto& w : warnings) os << "> warning: " << w << "\n\n";  // one quote each
  return os.str();
}

std::string RunReport::ToText() const {
  std::ostringstream os;
  os << "\n  " << name << "\n"
     << "  size        " << Bytes(fp32_bytes) << " -> " << Bytes(output_bytes) << "\n"
     << "  sparsity    " << Fixed(100 * weight_sparsity, 1) << "% of weights are zero\n"
     << "  " << metric << (metric.size() < 10 ? std::string(10 - metric.size(), ' ') : std::string(" ")) << "  "
     << (metric == "sqnr" ? Fixed(sqnr_db, 1) + " dB (compressed against fp32)"
         : metric == "cosine" ? Fixed(cosine, 6) + " (compressed against fp32)"
                              : Fixed(fp32_metric, GateDigits(metric, false)) + " (fp32) -> " +
                                    Fixed(output_metric, GateDigits(metric, false)) + " (compressed)")
     << "\n"
     << "  agreement   " << Fixed(top1_agreement) << "% top-1, SQNR " << Fixed(sqnr_db, 1) << " dB\n";
  if (!layers.empty()) {
    int counts[3] = {0, 0, 0};
    for (const auto& l : layers) ++counts[static_cast<int>(l.precision)];
    os << "  layers      " << counts[2] << " int8, " << counts[1] << " fp16, " << counts[0] << " fp32\n";
    // The exceptions, when there are any: layers kept above INT8 in a
    // quantized model (a model left all FP32 or FP16 needs no list).
    if (counts[2] > 0)
      for (const auto& l : layers)
        if (l.precision != Precision::kINT8)
          os << "              " << l.node << ": " << PrecisionName(l.precision) << " (" << l.reason << ")\n";
  }
  for (const auto& st : prune_steps) {
    os << "  prune step  " << st.step << ": sparsity " << Fixed(100 * st.sparsity, 1) << "%, " << metric << " ";
    if (st.recovery) {
      os << Fixed(st.metric_masked) << " -> " << Fixed(st.metric) << " with recovery; output SQNR vs dense "
         << Fixed(st.sqnr_masked_db, 1) << " -> " << Fixed(st.sqnr_db, 1) << " dB";
    } else {
      os << Fixed(st.metric) << " (no recovery); output SQNR vs dense " << Fixed(st.sqnr_db, 1) << " dB";
    }
    if (st.retrained) os << "; retrained (" << st.retrain_rezeroed << " pruned weights set back to 0)";
    os << (st.acceptable ? "" : " (rejected)") << "\n";
  }
  if (!nothing_quantized.empty()) os << "  quantized   NOTHING (int8 layers: 0): " << nothing_quantized << "\n";
  for (const auto& f : folded_ifs) os << "  folded      " << f << "\n";
  for (const auto& r : search)
    if (r.chosen) os << "  search      " << r.candidate << " (of " << search.size() << ", held-out " << r.metric << " "
                     << Fixed(r.score, 4) << ")\n";
  for (const auto& f : fallback)
    os << "  fallback    " << f.node << " -> " << f.to << " (" << f.ranked_by << " " << Fixed(f.score, 2) << ")"
       << (f.kept ? "" : " not kept") << "\n";
  for (const auto& w : warnings) os << "  warning     " << w << "\n";
  os << "  gate        " << (passed ? "PASS" : "FAIL") << ": " << Verdict(*this) << "\n";
  return os.str();
}

Status WriteErrorReports(const Recipe& recipe, const Status& error) {
  const std::string code = StatusCodeName(error.code());
  Status first;
  auto write = [&first](const std::string& path, const std::string& bytes) {
    if (path.empty()) return;
    Status s = WriteFileAtomically(path, bytes);
    if (first.ok() && !s.ok()) first = s;
  };
  nlohmann::json j;
  j["schema_version"] = kJsonSchemaVersion;
  j["sparq_version"] = Version();
  j["recipe"] = recipe.source;
  j["name"] = recipe.name;
  j["error"] = {{"code", code}, {"message", error.message()}};
  write(recipe.report.json, j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n");
  std::ostringstream xml;
  xml << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
      << "<testsuites name=\"sparq\" tests=\"1\" failures=\"0\" errors=\"1\">\n"
      << "  <testsuite name=\"sparq." << XmlEscape(recipe.name) << "\" tests=\"1\" failures=\"0\" errors=\"1\">\n"
      << "    <testcase classname=\"sparq.gate\" name=\"" << XmlEscape(recipe.name) << "\">\n"
      << "      <error type=\"" << code << "\" message=\"" << XmlEscape(error.message()) << "\">"
      << XmlEscape(error.ToString()) << "</error>\n"
      << "    </testcase>\n  </testsuite>\n</testsuites>\n";
  write(recipe.report.junit, xml.str());
  write(recipe.report.markdown, "## sparq: " + recipe.name + " ERROR\n\n**The run stopped with an error** (" + code +
                                    "), so the gate was not judged and no model was kept:\n\n```\n" +
                                    error.message() + "\n```\n");
  return first;
}

}  // namespace sparq
