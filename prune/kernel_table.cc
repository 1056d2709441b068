// The kernel speed table that `structure: auto` consults.
#include <algorithm>
#include <cmath>
#include <optional>
#include <sstream>

#include "formats/text_table.h"
#include "sparq/onnx_io.h"
#include "sparq/prune.h"

namespace sparq {
namespace {

std::vector<std::string> SplitCsvLine(const std::string& line) {
  std::vector<std::string> cells;
  std::stringstream ss(line);
  std::string cell;
  while (std::getline(ss, cell, ',')) {
    const size_t b = cell.find_first_not_of(" \t\r"), e = cell.find_last_not_of(" \t\r");
    cells.push_back(b == std::string::npos ? "" : cell.substr(b, e - b + 1));
  }
  return cells;
}

bool ParseNumber(const std::string& s, double* out) {
  try {
    size_t used = 0;
    *out = std::stod(s, &used);
    return used == s.size() && std::isfinite(*out);
  } catch (const std::exception&) {
    return false;
  }
}

}  // namespace

StatusOr<KernelSpeedTable> KernelSpeedTable::Parse(const std::string& csv, const std::string& what) {
  KernelSpeedTable table;
  std::stringstream in(csv);
  std::string line;
  int number = 0;
  bool header = false;
  std::vector<std::string> errors;
  while (std::getline(in, line)) {
    ++number;
    if (line.find_first_not_of(" \t\r") == std::string::npos || line[0] == '#') continue;
    const std::vector<std::string> cells = SplitCsvLine(line);
    const std::string where = what + ":" + std::to_string(number) + ": ";
    if (!header) {
      if (cells != std::vector<std::string>{"backend", "structure", "sparsity", "speedup"}) {
        return Status::InvalidArgument(where + "expected the header 'backend,structure,sparsity,speedup'");
      }
      header = true;
      continue;
    }
    if (cells.size() != 4) {
      errors.push_back(where + "expected 4 cells, got " + std::to_string(cells.size()));
      continue;
    }
    Row row;
    row.backend = cells[0];
    auto structure = PruneStructure::Parse(cells[1]);
    if (!structure.ok()) {
      errors.push_back(where + structure.status().message());
      continue;
    }
    row.structure = *structure;
    if (!ParseNumber(cells[2], &row.sparsity) || row.sparsity < 0.0 || row.sparsity >= 1.0)
      errors.push_back(where + "sparsity '" + cells[2] + "' must be a number in [0, 1)");
    else if (!ParseNumber(cells[3], &row.speedup) || row.speedup <= 0.0)
      errors.push_back(where + "speedup '" + cells[3] + "' must be a positive number");
    else
      table.rows.push_back(row);
  }
  if (!header) return Status::InvalidArgument(what + ": empty kernel table (no header)");
  if (!errors.empty()) {
    std::string msg = errors.front();
    for (size_t i = 1; i < errors.size(); ++i) msg += "\n" + errors[i];
    return Status::InvalidArgument(msg);
  }
  return table;
}

StatusOr<KernelSpeedTable> KernelSpeedTable::Load(const std::string& path) {
  SPARQ_ASSIGN_OR_RETURN(std::string csv, ReadFile(path));
  return Parse(csv, path);
}

std::optional<double> KernelSpeedTable::SpeedupAt(const std::string& backend, const PruneStructure& structure,
                                                  double sparsity) const {
  std::vector<std::pair<double, double>> points;  // (sparsity, speedup)
  for (const Row& r : rows)
    if (r.backend == backend && r.structure == structure) points.emplace_back(r.sparsity, r.speedup);
  if (points.empty()) return std::nullopt;
  std::sort(points.begin(), points.end());
  if (sparsity < points.front().first - 1e-9) return std::nullopt;
  if (sparsity >= points.back().first) return points.back().second;
  for (size_t i = 1; i < points.size(); ++i) {
    const auto& [s0, v0] = points[i - 1];
    const auto& [s1, v1] = points[i];
    if (sparsity <= s1) return s1 > s0 ? v0 + (v1 - v0) * (sparsity - s0) / (s1 - s0) : v1;
  }
  return points.back().second;
}

}  // namespace sparq
