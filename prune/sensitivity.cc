// Sensitivity analysis (prune one layer at a time, measure the metric drop),
// its CSV and SVG outputs, and the greedy per-layer sparsity allocation.
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "formats/text_table.h"
#include "prune/internal.h"
#include "sparq/file_io.h"
#include "sparq/onnx_io.h"

namespace sparq {

using namespace prune_internal;  // NOLINT

StatusOr<SensitivityTable> SensitivityAnalysis(const Model& model, const SensitivityOptions& options,
                                               const BatchSource& data, const PruneMetricFn& metric) {
  auto log = [&](const std::string& line) {
    if (options.log) options.log(line);
  };
  if (!metric) return Status::InvalidArgument("sensitivity analysis needs a metric callback");
  if (options.sparsities.empty()) return Status::InvalidArgument("sensitivity analysis needs at least one sparsity");
  for (double s : options.sparsities) {
    if (!(s >= 0.0 && s < 1.0)) {
      return Status::InvalidArgument("sensitivity sparsity " + FormatNumber(s) + " is out of range: must be in [0, 1)");
    }
  }
  if ((options.recovery || options.score == PruneScore::kActivation) && !data) {
    return Status::InvalidArgument("sensitivity analysis with recovery or activation scores needs calibration data");
  }
  for (const auto& pattern : options.layers) SPARQ_RETURN_IF_ERROR(CheckNamePattern(pattern, "sensitivity layers"));
  SPARQ_ASSIGN_OR_RETURN(std::vector<WeightedLayer> layers, FindWeightedLayers(model));
  for (const auto& pattern : options.layers) {
    if (std::none_of(layers.begin(), layers.end(), [&](const WeightedLayer& L) { return NameMatches(pattern, L.node); })) {
      std::vector<std::string> names;
      for (const auto& L : layers) names.push_back(L.node);
      return Status::NotFound("sensitivity layer pattern '" + pattern + "' matches no weighted layer; they are: " +
                              JoinNames(names));
    }
  }

  SensitivityTable table;
  std::vector<const WeightedLayer*> scan;
  std::vector<PruneStructure> structures;
  for (size_t i = 0; i < layers.size(); ++i) {
    const WeightedLayer& L = layers[i];
    if (!options.layers.empty() &&
        std::none_of(options.layers.begin(), options.layers.end(), [&](const std::string& p) { return NameMatches(p, L.node); }))
      continue;
    if (!L.unsupported.empty()) {
      table.skipped.emplace_back(L.node, L.unsupported);
      continue;
    }
    if (options.skip_first_last && (i == 0 || i + 1 == layers.size())) {
      table.skipped.emplace_back(L.node, i == 0 ? "first weighted layer (skip_first_last)" : "last weighted layer (skip_first_last)");
      continue;
    }
    PruneStructure s = options.structure;
    if (s.kind == PruneStructure::Kind::kAuto) {
      bool found = false;
      for (const auto& c : PruneOptions().auto_candidates) {
        if (c.kind == PruneStructure::Kind::kNM || !StructureMismatch(L, c).empty()) continue;
        s = c;
        found = true;
        break;
      }
      if (!found) {
        table.skipped.emplace_back(L.node, "no auto candidate fits");
        continue;
      }
    }
    const std::string mismatch = StructureMismatch(L, s);
    if (!mismatch.empty()) {
      table.skipped.emplace_back(L.node, mismatch);
      continue;
    }
    scan.push_back(&L);
    structures.push_back(s);
  }

  SPARQ_ASSIGN_OR_RETURN(PruneEvaluation base, metric(model));
  table.baseline = base.metric;
  log("sensitivity: baseline metric " + FormatNumber(base.metric, 6) + ", " + std::to_string(scan.size()) + " layers x " +
      (options.structure.kind == PruneStructure::Kind::kNM ? std::string("1 sparsity (") + options.structure.ToString() + ")"
                                                           : std::to_string(options.sparsities.size()) + " sparsities"));
  std::map<std::string, std::vector<double>> norms;
  if (options.score == PruneScore::kActivation && !scan.empty()) {
    std::vector<std::string> names;
    for (const auto* L : scan) names.push_back(L->node);
    SPARQ_ASSIGN_OR_RETURN(norms, ActivationColumnNorms(model, names, data, options.recovery_options.max_rows_per_sample,
                                                        options.threads));
  }
  std::vector<double> sparsities = options.sparsities;
  std::sort(sparsities.begin(), sparsities.end());
  for (size_t l = 0; l < scan.size(); ++l) {
    const WeightedLayer& L = *scan[l];
    SPARQ_ASSIGN_OR_RETURN(Matrix w, ReadWeightMatrix(model, L));
    SPARQ_ASSIGN_OR_RETURN(Matrix scores, ElementScores(w, options.score, norms[L.node]));
    // N:M fixes the sparsity: one point, all or nothing.
    const bool nm = structures[l].kind == PruneStructure::Kind::kNM;
    const std::vector<double> levels =
        nm ? std::vector<double>{1.0 - static_cast<double>(structures[l].n) / static_cast<double>(structures[l].m)}
           : sparsities;
    for (double s : levels) {
      SPARQ_ASSIGN_OR_RETURN(PruneMask mask, ComputeMask(structures[l], scores, s, options.score));
      Matrix pruned = w;
      SPARQ_RETURN_IF_ERROR(ApplyMask(mask, &pruned));
      Model candidate = model;
      SPARQ_RETURN_IF_ERROR(WriteWeightMatrix(&candidate, L, pruned));
      if (options.recovery) {
        RecoveryOptions ro = options.recovery_options;
        if (ro.threads == 0) ro.threads = options.threads;
        SPARQ_RETURN_IF_ERROR(RecoverModel(model, &candidate, {L.node}, data, ro).status());
      }
      SPARQ_ASSIGN_OR_RETURN(PruneEvaluation e, metric(candidate));
      table.points.push_back(
          {L.node, L.params(), mask.sparsity(), e.metric, table.baseline - e.metric, e.sqnr_db, nm});
      log("sensitivity: " + L.node + " at " + FormatNumber(mask.sparsity(), 3) + ": metric " +
          FormatNumber(e.metric, 6) + " (drop " + FormatNumber(table.baseline - e.metric, 4) + ")");
    }
  }
  return table;
}

namespace {

std::string Pct(double v) { return FormatDouble("%.1f%%", 100.0 * v); }

std::string CsvField(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

// A "nice" tick step (1, 2 or 5 times a power of ten) giving about `ticks` ticks over `range`.
double NiceStep(double range, int ticks) {
  if (!(range > 0)) return 1.0;
  const double raw = range / ticks;
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  const double f = raw / mag;
  return (f <= 1.0 ? 1.0 : f <= 2.0 ? 2.0 : f <= 5.0 ? 5.0 : 10.0) * mag;
}

// Layers of the table in first-seen order with their points sorted by sparsity.
std::vector<std::pair<std::string, std::vector<const SensitivityPoint*>>> ByLayer(const SensitivityTable& t) {
  std::vector<std::pair<std::string, std::vector<const SensitivityPoint*>>> out;
  for (const auto& p : t.points) {
    auto it = std::find_if(out.begin(), out.end(), [&](const auto& e) { return e.first == p.layer; });
    if (it == out.end()) {
      out.push_back({p.layer, {}});
      it = out.end() - 1;
    }
    it->second.push_back(&p);
  }
  for (auto& e : out)
    std::stable_sort(e.second.begin(), e.second.end(),
                     [](const SensitivityPoint* a, const SensitivityPoint* b) { return a->sparsity < b->sparsity; });
  return out;
}

}  // namespace

std::string SensitivityCsv(const SensitivityTable& table) {
  std::string out = "layer,params,sparsity,metric,drop\n";
  char buf[128];
  for (const auto& p : table.points) {
    std::snprintf(buf, sizeof(buf), ",%lld,%.6g,%.8g,%.8g\n", static_cast<long long>(p.params), p.sparsity, p.metric,
                  p.drop);
    out += CsvField(p.layer) + buf;
  }
  return out;
}

std::string SensitivitySvg(const SensitivityTable& table, const std::string& title) {
  const double W = 860, H = 520, left = 80, right = 250, top = 50, bottom = 70;
  const double pw = W - left - right, ph = H - top - bottom;
  const auto layers = ByLayer(table);
  double lo = 0.0, hi = 0.0;
  for (const auto& p : table.points) {
    if (std::isfinite(p.drop)) {
      lo = std::min(lo, p.drop);
      hi = std::max(hi, p.drop);
    }
  }
  if (hi - lo < 1e-12) hi = lo + 1.0;
  const double ystep = NiceStep(hi - lo, 5);
  lo = std::floor(lo / ystep) * ystep;
  hi = std::ceil(hi / ystep) * ystep;
  auto X = [&](double s) { return left + s * pw; };
  auto Y = [&](double d) { return top + (hi - std::clamp(d, lo, hi)) / (hi - lo) * ph; };
  static const char* kColors[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
                                  "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};
  char buf[256];
  std::string svg = SvgOpen(W, H);
  std::snprintf(buf, sizeof(buf), "<text x=\"%.1f\" y=\"28\" text-anchor=\"middle\" font-size=\"16\">", left + pw / 2);
  svg += buf + XmlEscape(title) + "</text>\n";
  // Grid, ticks and tick labels.
  for (int i = 0; i <= 10; ++i) {
    const double s = i / 10.0;
    std::snprintf(buf, sizeof(buf),
                  "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#e0e0e0\"/>\n"
                  "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%g</text>\n",
                  X(s), top, X(s), top + ph, X(s), top + ph + 18, s);
    svg += buf;
  }
  for (double d = lo; d <= hi + ystep * 1e-6; d += ystep) {
    std::snprintf(buf, sizeof(buf),
                  "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\"/>\n"
                  "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">%.4g</text>\n",
                  left, Y(d), left + pw, Y(d), std::fabs(d) < ystep * 1e-6 ? "#999999" : "#e0e0e0", left - 8,
                  Y(d) + 4, std::fabs(d) < ystep * 1e-6 ? 0.0 : d);
    svg += buf;
  }
  // Axes and their labels.
  std::snprintf(buf, sizeof(buf),
                "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"none\" stroke=\"black\"/>\n"
                "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">sparsity of the layer</text>\n"
                "<text transform=\"translate(20 %.1f) rotate(-90)\" text-anchor=\"middle\">",
                left, top, pw, ph, left + pw / 2, H - 20, top + ph / 2);
  svg += buf;
  svg += "metric drop (baseline " + XmlEscape(FormatNumber(table.baseline, 6)) + ")</text>\n";
  // One polyline per layer, starting from the dense point (0, 0), and the legend.
  for (size_t l = 0; l < layers.size(); ++l) {
    const char* color = kColors[l % 10];
    std::string points;
    std::snprintf(buf, sizeof(buf), "%.1f,%.1f", X(0), Y(0));
    points += buf;
    std::string dots;
    for (const SensitivityPoint* p : layers[l].second) {
      std::snprintf(buf, sizeof(buf), " %.1f,%.1f", X(p->sparsity), Y(p->drop));
      points += buf;
      std::snprintf(buf, sizeof(buf), "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3\" fill=\"%s\"/>\n", X(p->sparsity),
                    Y(p->drop), color);
      dots += buf;
    }
    svg += "<polyline fill=\"none\" stroke-width=\"2\" stroke=\"" + std::string(color) + "\" points=\"" + points +
           "\"><title>" + XmlEscape(layers[l].first) + "</title></polyline>\n" + dots;
    const double ly = top + 10 + 18.0 * static_cast<double>(l);
    std::string name = layers[l].first;
    if (name.size() > 30) name = name.substr(0, 14) + "..." + name.substr(name.size() - 13);
    std::snprintf(buf, sizeof(buf),
                  "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" stroke-width=\"3\"/>\n"
                  "<text x=\"%.1f\" y=\"%.1f\">",
                  left + pw + 15, ly, left + pw + 35, ly, color, left + pw + 42, ly + 4);
    svg += buf + XmlEscape(name) + "</text>\n";
  }
  svg += "</svg>\n";
  return svg;
}

Status WriteSensitivityCsv(const SensitivityTable& table, const std::string& path) {
  return WriteFileAtomically(path, SensitivityCsv(table));
}

Status WriteSensitivitySvg(const SensitivityTable& table, const std::string& path, const std::string& title) {
  return WriteFileAtomically(path, SensitivitySvg(table, title));
}

std::vector<PruneLayerRule> SparsityAllocation::ToRules() const {
  std::vector<PruneLayerRule> rules;
  for (const auto& [layer, s] : sparsity) rules.push_back({EscapeRegex(layer), s, std::nullopt, ""});
  return rules;
}

StatusOr<SparsityAllocation> AllocateSparsity(const SensitivityTable& table, double target_sparsity, double budget) {
  if (!(target_sparsity >= 0.0 && target_sparsity < 1.0)) {
    return Status::InvalidArgument("target sparsity " + FormatNumber(target_sparsity) + " is out of range: must be in [0, 1)");
  }
  if (!(budget >= 0.0)) return Status::InvalidArgument("budget " + FormatNumber(budget) + " must be >= 0");
  if (table.points.empty()) return Status::InvalidArgument("the sensitivity table has no points");
  const auto layers = ByLayer(table);
  const bool by_noise = std::all_of(table.points.begin(), table.points.end(),
                                    [](const SensitivityPoint& p) { return std::isfinite(p.sqnr_db); });
  // The cost the greedy ranks by: added output noise, or the metric drop.
  auto cost_of = [&](const SensitivityPoint& p) { return by_noise ? std::pow(10.0, -p.sqnr_db / 10.0) : p.drop; };

  // Each layer's state: between point level-1 (or dense) and point level,
  // at fraction `frac` of the way (1 = at the point).
  struct State {
    int level = -1;  // the last point reached whole; -1 = dense
    double sparsity = 0.0, drop = 0.0, cost = 0.0;
  };
  std::vector<State> state(layers.size());
  double total = 0.0;
  for (const auto& l : layers) total += static_cast<double>(l.second.front()->params);
  double zeros = 0.0;
  SparsityAllocation a;
  a.cost = by_noise ? "output noise" : "metric drop";
  const double want = target_sparsity * total;
  bool budget_blocked = false;
  while (zeros < want - 1e-9) {
    int best = -1, best_next = -1;
    double best_rate = 0.0;
    budget_blocked = false;
    for (size_t l = 0; l < layers.size(); ++l) {
      const auto& pts = layers[l].second;
      int next = state[l].level + 1;
      while (next < static_cast<int>(pts.size()) && pts[next]->sparsity <= state[l].sparsity) ++next;
      if (next >= static_cast<int>(pts.size())) continue;
      const SensitivityPoint& p = *pts[next];
      const double removed = (p.sparsity - state[l].sparsity) * static_cast<double>(p.params);
      // A layer that can stop part-way is charged only for what it takes.
      const double share = p.all_or_nothing ? 1.0 : std::min(1.0, (want - zeros) / removed);
      const double ddrop = share * (p.drop - state[l].drop);
      if (a.predicted_drop + ddrop > budget + 1e-12) {
        budget_blocked = true;
        continue;
      }
      const double rate = (cost_of(p) - state[l].cost) / removed;
      if (best < 0 || rate < best_rate) {
        best = static_cast<int>(l);
        best_next = next;
        best_rate = rate;
      }
    }
    if (best < 0) break;
    State& st = state[best];
    const SensitivityPoint& p = *layers[best].second[best_next];
    const double removed = (p.sparsity - st.sparsity) * static_cast<double>(p.params);
    if (!p.all_or_nothing && removed > want - zeros) {
      // Stop part-way, exactly at the target.
      const double f = (want - zeros) / removed;
      st.sparsity += f * (p.sparsity - st.sparsity);
      a.predicted_drop += f * (p.drop - st.drop);
      st.drop += f * (p.drop - st.drop);
      st.cost += f * (cost_of(p) - st.cost);
      zeros = want;
      break;
    }
    a.predicted_drop += p.drop - st.drop;
    zeros += removed;
    st = {best_next, p.sparsity, p.drop, cost_of(p)};
  }
  for (size_t l = 0; l < layers.size(); ++l) a.sparsity[layers[l].first] = state[l].sparsity;
  a.achieved_sparsity = total > 0 ? zeros / total : 0.0;
  a.target_met = a.achieved_sparsity >= target_sparsity - 1e-9;
  const std::string summary = Pct(a.achieved_sparsity) + " of " + WithThousands(static_cast<int64_t>(total)) +
                              " weights zero, predicted drop " + FormatNumber(a.predicted_drop, 4) + " (ranked by " +
                              a.cost + ")";
  if (a.target_met) a.message = "target " + Pct(target_sparsity) + " met: " + summary;
  else if (budget_blocked) a.message = "budget " + FormatNumber(budget, 4) + " spent before the target " + Pct(target_sparsity) + ": " + summary;
  else a.message = "every layer is at its highest scanned sparsity before the target " + Pct(target_sparsity) + ": " + summary;
  return a;
}

}  // namespace sparq
