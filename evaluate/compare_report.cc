// The text, JSON and SVG forms of a CompareReport (sparq/compare.h).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "formats/text_table.h"
#include "sparq/compare.h"
#include "sparq/version.h"

namespace sparq {
namespace {

using json = nlohmann::ordered_json;  // keys in insertion order

json NumberOrNull(double v) { return std::isfinite(v) ? json(v) : json(nullptr); }

std::string Sqnr(const TensorComparison& c) {
  if (c.identical()) return "identical";
  if (std::isnan(c.sqnr_db)) return "nan";
  if (std::isinf(c.sqnr_db)) return c.sqnr_db > 0 ? "inf" : "-inf";
  return FormatDouble("%.2f", c.sqnr_db);
}

std::string FileName(const std::string& path) { return std::filesystem::path(path).filename().string(); }

std::string Op(const std::string& op_type) { return op_type.empty() ? "(input)" : op_type; }

// The counterpart column: "=" when the candidate's value has the reference's name.
std::string Counterpart(const TensorMatch& m) { return m.candidate_name == m.name ? "=" : m.candidate_name; }

// A step of 1, 2 or 5 times a power of ten giving at most `ticks` intervals over `span`.
double NiceStep(double span, int ticks) {
  const double raw = span / ticks;
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (m * mag >= raw) return m * mag;
  return 10.0 * mag;
}

}  // namespace

std::string CompareReport::ToText(size_t top) const {
  std::string text = "Reference  " + reference + "\nCandidate  " + candidate + "\nDataset    " + inputs + ": " +
                     std::to_string(samples) + " samples, " + std::to_string(batches) +
                     (batches == 1 ? " batch of " : " batches of ") + std::to_string(batch_size) + "\n";
  text += "Compared   " + std::to_string(tensors.size()) + " tensors (" + std::to_string(unmatched.size()) +
          " unmatched)\n";
  const size_t shown = top == 0 ? tensors.size() : std::min(top, tensors.size());
  TextTable t({"#", "tensor", "candidate", "op", "SQNR (dB)", "cosine", "max abs error"},
              {true, false, false, false, true, true, true});
  for (size_t i = 0; i < shown; ++i) {
    const TensorComparison& c = tensors[i];
    t.AddRow({std::to_string(c.match.index), c.match.name, Counterpart(c.match), Op(c.match.op_type), Sqnr(c),
              FormatDouble("%.6f", c.cosine), FormatDouble("%.6g", c.max_abs_error)});
  }
  text += "\nTensors, worst SQNR first";
  if (shown < tensors.size()) text += " (" + std::to_string(shown) + " of " + std::to_string(tensors.size()) + ")";
  text += " (#: graph order; candidate '=': same name)\n" + t.Render();
  if (!unmatched.empty()) {
    TextTable u({"#", "tensor", "op", "why"}, {true, false, false, false});
    for (const UnmatchedTensor& m : unmatched) u.AddRow({std::to_string(m.index), m.name, Op(m.op_type), m.reason});
    text += "\nNot compared\n" + u.Render();
  }
  if (!plot.empty()) text += "\nPlot: " + plot + "\n";
  return text;
}

std::string CompareReport::ToJson() const {
  json j;
  j["schema_version"] = kJsonSchemaVersion;
  j["sparq_version"] = Version();
  j["reference"] = reference;
  j["candidate"] = candidate;
  j["inputs"] = inputs;
  j["samples"] = samples;
  j["batches"] = batches;
  j["batch_size"] = batch_size;
  json list = json::array();
  for (const TensorComparison& c : tensors) {
    list.push_back({{"name", c.match.name},
                    {"candidate_name", c.match.candidate_name},
                    {"match", TensorMatchKindName(c.match.kind)},
                    {"op", c.match.op_type},
                    {"index", c.match.index},
                    {"elements", c.elements},
                    {"sqnr_db", NumberOrNull(c.sqnr_db)},
                    {"identical", c.identical()},
                    {"cosine", NumberOrNull(c.cosine)},
                    {"max_abs_error", NumberOrNull(c.max_abs_error)}});
  }
  j["tensors"] = list;
  json missing = json::array();
  for (const UnmatchedTensor& u : unmatched)
    missing.push_back({{"name", u.name}, {"op", u.op_type}, {"index", u.index}, {"reason", u.reason}});
  j["unmatched"] = missing;
  j["plot"] = plot.empty() ? json(nullptr) : json(plot);
  return j.dump(2, ' ', false, json::error_handler_t::replace);
}

std::string CompareReport::ToSvg() const {
  const double W = 960, H = 440, left = 70, right = 30, top = 50, bottom = 70;
  const double pw = W - left - right, ph = H - top - bottom;
  // Points in graph order.
  std::vector<const TensorComparison*> points;
  for (const TensorComparison& c : tensors) points.push_back(&c);
  std::stable_sort(points.begin(), points.end(), [](const TensorComparison* a, const TensorComparison* b) {
    return a->match.index < b->match.index;
  });
  double lo = 0.0, hi = 0.0;
  bool any = false;
  for (const TensorComparison* c : points) {
    if (!std::isfinite(c->sqnr_db)) continue;
    lo = any ? std::min(lo, c->sqnr_db) : std::min(0.0, c->sqnr_db);
    hi = any ? std::max(hi, c->sqnr_db) : c->sqnr_db;
    any = true;
  }
  if (!any) hi = 100.0;
  if (hi - lo < 1.0) hi = lo + 1.0;
  const double ystep = NiceStep(hi - lo, 8);
  lo = std::floor(lo / ystep) * ystep;
  hi = std::ceil(hi / ystep) * ystep;
  const double n = static_cast<double>(std::max<size_t>(points.size(), 2) - 1);
  auto X = [&](size_t i) { return left + (points.size() < 2 ? pw / 2 : pw * static_cast<double>(i) / n); };
  auto Y = [&](const TensorComparison& c) {
    if (c.identical()) return top;
    if (!std::isfinite(c.sqnr_db)) return top + ph;
    return top + (hi - std::clamp(c.sqnr_db, lo, hi)) / (hi - lo) * ph;
  };
  auto YOf = [&](double d) { return top + (hi - std::clamp(d, lo, hi)) / (hi - lo) * ph; };

  char buf[512];
  std::string svg = SvgOpen(W, H);
  std::snprintf(buf, sizeof(buf), "<text x=\"%.1f\" y=\"24\" text-anchor=\"middle\" font-size=\"16\">", left + pw / 2);
  // File names only: the paths are in the JSON and text reports.
  svg += buf + XmlEscape("SQNR along the network: " + FileName(candidate) + " vs " + FileName(reference)) +
         "</text>\n";
  std::snprintf(buf, sizeof(buf), "<text x=\"%.1f\" y=\"40\" text-anchor=\"middle\" fill=\"#555555\">", left + pw / 2);
  svg += buf +
         XmlEscape(std::to_string(samples) + " samples of " + FileName(inputs) +
                   "; open circles on the top edge: identical to the reference; red on the bottom edge: not finite") +
         "</text>\n";
  // Horizontal grid with dB labels.
  for (double d = lo; d <= hi + ystep * 1e-6; d += ystep) {
    std::snprintf(buf, sizeof(buf),
                  "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#e0e0e0\"/>\n"
                  "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">%g</text>\n",
                  left, YOf(d), left + pw, YOf(d), left - 8, YOf(d) + 4, std::fabs(d) < ystep * 1e-6 ? 0.0 : d);
    svg += buf;
  }
  // Index ticks: at most about 10 labels.
  const size_t every = std::max<size_t>(1, (points.size() + 9) / 10);
  for (size_t i = 0; i < points.size(); i += every) {
    std::snprintf(buf, sizeof(buf),
                  "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"black\"/>\n"
                  "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%lld</text>\n",
                  X(i), top + ph, X(i), top + ph + 5, X(i), top + ph + 18,
                  static_cast<long long>(points[i]->match.index));
    svg += buf;
  }
  std::snprintf(buf, sizeof(buf),
                "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"none\" stroke=\"black\"/>\n"
                "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">tensors in graph order (#)</text>\n"
                "<text transform=\"translate(20 %.1f) rotate(-90)\" text-anchor=\"middle\">SQNR (dB)</text>\n",
                left, top, pw, ph, left + pw / 2, H - 30, top + ph / 2);
  svg += buf;
  // The line through every point, then the points with their tooltips.
  std::string line;
  for (size_t i = 0; i < points.size(); ++i) {
    std::snprintf(buf, sizeof(buf), "%s%.1f,%.1f", i == 0 ? "" : " ", X(i), Y(*points[i]));
    line += buf;
  }
  if (!points.empty()) {
    svg += "<polyline fill=\"none\" stroke=\"#1f77b4\" stroke-width=\"1.5\" points=\"" + line + "\"/>\n";
  }
  const TensorComparison* worst = tensors.empty() ? nullptr : &tensors[0];
  for (size_t i = 0; i < points.size(); ++i) {
    const TensorComparison& c = *points[i];
    const bool bad = !c.identical() && !std::isfinite(c.sqnr_db);
    const char* fill = bad ? "#d62728" : c.identical() ? "white" : "#1f77b4";
    std::snprintf(buf, sizeof(buf), "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3\" fill=\"%s\" stroke=\"%s\"><title>", X(i),
                  Y(c), fill, bad ? "#d62728" : "#1f77b4");
    svg += buf + XmlEscape(std::to_string(c.match.index) + " " + c.match.name + " (" + Op(c.match.op_type) +
                           "): SQNR " + Sqnr(c) + " dB, cosine " + FormatDouble("%.6f", c.cosine)) +
           "</title></circle>\n";
    if (&c == worst) {
      std::snprintf(buf, sizeof(buf), "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"%s\" fill=\"#d62728\">", X(i),
                    std::min(Y(c) + 16, top + ph - 4), X(i) > left + pw / 2 ? "end" : "start");
      svg += buf + XmlEscape("worst: " + c.match.name + " " + Sqnr(c) + " dB") + "</text>\n";
    }
  }
  svg += "</svg>\n";
  return svg;
}

}  // namespace sparq
