// Aligned plain-text tables and number formatting for sparq's reports
// (inspect, eval). Internal to sparq.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace sparq {

// Collects rows and prints them with every column padded to its widest cell.
// Columns listed in `right_aligned` (numbers) are right-aligned.
class TextTable {
 public:
  TextTable(std::vector<std::string> header, std::vector<bool> right_aligned = {})
      : right_(std::move(right_aligned)) {
    rows_.push_back(std::move(header));
  }
  void AddRow(std::vector<std::string> row) { rows_.push_back(std::move(row)); }

  // The table, each line prefixed by `indent` and ended by '\n'.
  std::string Render(const std::string& indent = "  ") const {
    std::vector<size_t> width;
    for (const auto& row : rows_) {
      if (row.size() > width.size()) width.resize(row.size(), 0);
      for (size_t c = 0; c < row.size(); ++c) width[c] = std::max(width[c], row[c].size());
    }
    std::string out;
    for (const auto& row : rows_) {
      std::string line = indent;
      for (size_t c = 0; c < row.size(); ++c) {
        const size_t pad = width[c] - row[c].size();
        const bool right = c < right_.size() && right_[c];
        if (c > 0) line += "  ";
        if (right) line.append(pad, ' ');
        line += row[c];
        if (!right && c + 1 < row.size()) line.append(pad, ' ');
      }
      while (!line.empty() && line.back() == ' ') line.pop_back();
      out += line + "\n";
    }
    return out;
  }

 private:
  std::vector<bool> right_;
  std::vector<std::vector<std::string>> rows_;
};

// "1234567" -> "1,234,567".
inline std::string WithThousands(int64_t v) {
  std::string digits = std::to_string(v < 0 ? -v : v);
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return v < 0 ? "-" + out : out;
}

// "512 B", "37.6 KiB", "44.7 MiB", "1.2 GiB".
inline std::string HumanBytes(int64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024.0 && u < 4) {
    v /= 1024.0;
    ++u;
  }
  char buf[32];
  if (u == 0) std::snprintf(buf, sizeof(buf), "%lld B", static_cast<long long>(bytes));
  else std::snprintf(buf, sizeof(buf), "%.1f %s", v, units[u]);
  return buf;
}

// printf-style formatting of one double.
inline std::string FormatDouble(const char* fmt, double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), fmt, v);
  return buf;
}

// Escapes &, <, > and " for XML text and attribute values (JUnit, SVG).
inline std::string XmlEscape(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

// The opening of a `width` x `height` SVG drawing (sans-serif, 12 px) with
// its white background; close it with "</svg>\n".
inline std::string SvgOpen(double width, double height) {
  char buf[256];
  std::snprintf(buf, sizeof(buf),
                "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\" "
                "font-family=\"sans-serif\" font-size=\"12\">\n",
                width, height, width, height);
  return std::string(buf) + "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
}

}  // namespace sparq
