// Strict YAML map reading with collected, located errors (see yaml_fields.h).
#include "pipeline/yaml_fields.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace sparq {
namespace yaml_fields {
namespace {

std::string Lower(const std::string& s) {
  std::string out = s;
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string JoinQuoted(const std::vector<std::string>& words) {
  std::string out;
  for (size_t i = 0; i < words.size(); ++i) out += (i ? ", " : "") + words[i];
  return out;
}

// "quantize.layers[3].match" -> "quantize.layers[].match": list items share keys.
std::string NormalizeListIndices(const std::string& path) {
  std::string out;
  for (size_t i = 0; i < path.size(); ++i) {
    out += path[i];
    if (path[i] == '[') {
      while (i + 1 < path.size() && path[i + 1] != ']') ++i;
    }
  }
  return out;
}

// A YAML plain scalar is unquoted; yaml-cpp tags quoted scalars "!".
bool IsQuoted(const YAML::Node& node) { return node.Tag() == "!"; }

// [-+]digits with at least one digit.
bool LooksLikeInteger(const std::string& s) {
  size_t i = (!s.empty() && (s[0] == '-' || s[0] == '+')) ? 1 : 0;
  if (i >= s.size()) return false;
  for (; i < s.size(); ++i)
    if (!std::isdigit(static_cast<unsigned char>(s[i]))) return false;
  return true;
}

// [-+](digits[.digits] | .digits)[e[-+]digits]: decimal numbers only (no hex,
// no inf/nan, no YAML 1.1 sexagesimal).
bool LooksLikeNumber(const std::string& s) {
  size_t i = 0, n = s.size();
  if (i < n && (s[i] == '-' || s[i] == '+')) ++i;
  size_t digits = 0;
  while (i < n && std::isdigit(static_cast<unsigned char>(s[i]))) ++i, ++digits;
  if (i < n && s[i] == '.') {
    ++i;
    while (i < n && std::isdigit(static_cast<unsigned char>(s[i]))) ++i, ++digits;
  }
  if (digits == 0) return false;
  if (i < n && (s[i] == 'e' || s[i] == 'E')) {
    ++i;
    if (i < n && (s[i] == '-' || s[i] == '+')) ++i;
    size_t exp_digits = 0;
    while (i < n && std::isdigit(static_cast<unsigned char>(s[i]))) ++i, ++exp_digits;
    if (exp_digits == 0) return false;
  }
  return i == n;
}

bool CheckScalar(const YAML::Node& node, const std::string& path, int line, Diagnostics* diag,
                 const char* expected) {
  if (node.IsScalar()) return true;
  if (node.IsNull())
    diag->Error(line, path, std::string("has no value (expected ") + expected + "; remove the key to use its default)");
  else
    diag->Error(line, path, std::string("expected ") + expected + ", got " + DescribeNode(node));
  return false;
}

// Length of the common suffix of two strings.
size_t CommonSuffix(const std::string& a, const std::string& b) {
  size_t n = 0;
  while (n < a.size() && n < b.size() && a[a.size() - 1 - n] == b[b.size() - 1 - n]) ++n;
  return n;
}

std::string OutOfRange(const std::string& text, const Bounds& bounds) {
  return text + " is out of range: must be " + bounds.Describe();
}

}  // namespace

bool Bounds::Contains(double v) const {
  if (lo_closed ? v < lo : v <= lo) return false;
  if (hi_closed ? v > hi : v >= hi) return false;
  return true;
}

std::string Bounds::Describe() const {
  const bool has_lo = std::isfinite(lo), has_hi = std::isfinite(hi);
  if (has_lo && has_hi)
    return std::string("in ") + (lo_closed ? "[" : "(") + FormatNumber(lo) + ", " + FormatNumber(hi) +
           (hi_closed ? "]" : ")");
  if (has_lo) return (lo_closed ? ">= " : "> ") + FormatNumber(lo);
  if (has_hi) return (hi_closed ? "<= " : "< ") + FormatNumber(hi);
  return "a finite number";
}

std::string FormatNumber(double v) {
  char buf[64];
  for (int precision = 6; precision <= 17; ++precision) {
    std::snprintf(buf, sizeof(buf), "%.*g", precision, v);
    if (std::strtod(buf, nullptr) == v) break;
  }
  return buf;
}

size_t EditDistance(const std::string& a_in, const std::string& b_in) {
  const std::string a = Lower(a_in), b = Lower(b_in);
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t substitute = prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1);
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, substitute});
    }
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

std::string ClosestWord(const std::string& word, const std::vector<std::string>& candidates) {
  std::string best;
  size_t best_distance = 3;  // accept <= 2
  for (const auto& c : candidates) {
    const size_t d = EditDistance(word, c);
    // A distance equal to the word's length means nothing in common ("ab" vs "cd").
    if (d < best_distance && d < std::max(word.size(), size_t{1})) best = c, best_distance = d;
  }
  if (!best.empty()) return best;
  const std::string w = Lower(word);
  size_t best_prefix = 2;  // accept >= 3
  for (const auto& c : candidates) {
    const std::string lc = Lower(c);
    size_t p = 0;
    while (p < w.size() && p < lc.size() && w[p] == lc[p]) ++p;
    if (p > best_prefix) best = c, best_prefix = p;
  }
  return best;
}

int LineOf(const YAML::Node& node) {
  if (!node.IsDefined()) return 0;
  const YAML::Mark mark = node.Mark();
  return mark.is_null() || mark.line < 0 ? 0 : mark.line + 1;
}

std::string DescribeNode(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Undefined: return "nothing";
    case YAML::NodeType::Null: return "no value";
    case YAML::NodeType::Sequence: return "a list";
    case YAML::NodeType::Map: return "a map";
    case YAML::NodeType::Scalar:
      return (IsQuoted(node) ? "the quoted string '" : "'") + node.Scalar() + "'";
  }
  return "an unknown node";
}

// ---------------------------------------------------------------------------
// Diagnostics

std::string Diagnostics::Format(int line, const std::string& path, const std::string& what) const {
  std::string out = source_;
  // A key set from outside the file (and anything below it) names its origin.
  std::string origin;
  for (std::string p = path; !p.empty() && origin.empty();) {
    auto it = origins_.find(p);
    if (it != origins_.end()) origin = it->second;
    const size_t cut = p.find_last_of(".[");
    p = cut == std::string::npos ? "" : p.substr(0, cut);
  }
  if (!origin.empty()) {
    out += " (" + origin + ")";
  } else if (line > 0) {
    out += ":" + std::to_string(line);
  }
  out += ": ";
  if (!path.empty()) out += path + ": ";
  return out + what;
}

void Diagnostics::Error(int line, const std::string& path, const std::string& what) {
  errors_.push_back({line, errors_.size(), Format(line, path, what)});
  failed_paths_.insert(path);
}

void Diagnostics::Warning(int line, const std::string& path, const std::string& what) {
  warnings_.push_back({line, warnings_.size(), Format(line, path, what)});
}

void Diagnostics::UnknownKey(int line, const std::string& map_path, const std::string& key,
                             std::vector<std::string> valid) {
  unknown_.push_back({line, map_path, key, std::move(valid)});
}

void Diagnostics::AddKnownKeys(const std::string& map_path, const std::vector<std::string>& keys) {
  auto& known = known_[NormalizeListIndices(map_path)];
  for (const auto& k : keys)
    if (std::find(known.begin(), known.end(), k) == known.end()) known.push_back(k);
}

int Diagnostics::LineFor(const std::string& path_in) const {
  std::string path = path_in;
  while (true) {
    auto it = lines_.find(path);
    if (it != lines_.end() && it->second > 0) return it->second;
    if (path.empty()) return 1;
    const size_t cut = path.find_last_of(".[");
    path = cut == std::string::npos ? "" : path.substr(0, cut);
  }
}

bool Diagnostics::FailedAt(const std::string& path) const {
  for (const auto& p : failed_paths_) {
    if (p == path) return true;
    if (p.size() > path.size() && p.compare(0, path.size(), path) == 0 &&
        (path.empty() || p[path.size()] == '.' || p[path.size()] == '['))
      return true;
  }
  return false;
}

std::string Diagnostics::SuggestFor(const Unknown& u) const {
  const std::string close = ClosestWord(u.key, u.valid);
  if (!close.empty()) return "unknown key (did you mean '" + close + "'?)";
  // A key that exists, but in another section: "batch_size" under quantize.
  // Among several, prefer the map most like this one (layers[] for layers[]).
  const std::string here = NormalizeListIndices(u.map_path);
  const std::string* best_path = nullptr;
  const std::string* best_key = nullptr;
  for (const auto& [map_path, keys] : known_) {
    if (map_path == here) continue;
    for (const auto& k : keys) {
      if (Lower(k) != Lower(u.key)) continue;
      if (!best_path || CommonSuffix(map_path, here) > CommonSuffix(*best_path, here)) best_path = &map_path, best_key = &k;
    }
  }
  if (best_path) {
    const std::string where = best_path->empty() ? "at the top level" : "under '" + *best_path + "'";
    return "unknown key (did you mean '" + JoinPath(*best_path, *best_key) + "'? '" + *best_key + "' belongs " +
           where + ")";
  }
  return "unknown key (valid keys here: " + JoinQuoted(u.valid) + ")";
}

std::vector<std::string> Diagnostics::Sorted(std::vector<Entry> entries) {
  // Line order reads like the file; unknown lines (0) go last.
  std::stable_sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    const long la = a.line > 0 ? a.line : (1L << 30), lb = b.line > 0 ? b.line : (1L << 30);
    return la != lb ? la < lb : a.order < b.order;
  });
  std::vector<std::string> out;
  for (auto& e : entries) out.push_back(std::move(e.text));
  return out;
}

Status Diagnostics::Finish() {
  for (const auto& u : unknown_) Error(u.line, JoinPath(u.map_path, u.key), SuggestFor(u));
  unknown_.clear();
  if (errors_.empty()) return Status::OK();
  std::string message;
  for (const auto& line : Sorted(errors_)) message += (message.empty() ? "" : "\n") + line;
  return Status::InvalidArgument(message);
}

std::vector<std::string> Diagnostics::Warnings() const { return Sorted(warnings_); }

std::string JoinPath(const std::string& parent, const std::string& key) {
  return parent.empty() ? key : parent + "." + key;
}

std::string ItemPath(const std::string& list_path, size_t index) {
  return list_path + "[" + std::to_string(index) + "]";
}

// ---------------------------------------------------------------------------
// Scalar conversions

bool ToString(const YAML::Node& node, const std::string& path, int line, Diagnostics* diag, std::string* out) {
  if (!CheckScalar(node, path, line, diag, "a string")) return false;
  *out = node.Scalar();
  return true;
}

bool ToBool(const YAML::Node& node, const std::string& path, int line, Diagnostics* diag, bool* out) {
  if (!CheckScalar(node, path, line, diag, "true or false")) return false;
  const std::string& s = node.Scalar();
  if (!IsQuoted(node)) {
    if (s == "true" || s == "True" || s == "TRUE") return *out = true, true;
    if (s == "false" || s == "False" || s == "FALSE") return *out = false, true;
  }
  diag->Error(line, path, "expected true or false, got " + DescribeNode(node));
  return false;
}

bool ToInt(const YAML::Node& node, const std::string& path, int line, Diagnostics* diag, const Bounds& bounds,
           int64_t* out) {
  if (!CheckScalar(node, path, line, diag, "an integer")) return false;
  const std::string& s = node.Scalar();
  if (IsQuoted(node) || !LooksLikeInteger(s)) {
    diag->Error(line, path, "expected an integer, got " + DescribeNode(node));
    return false;
  }
  errno = 0;
  const long long v = std::strtoll(s.c_str(), nullptr, 10);
  if (errno == ERANGE || !bounds.Contains(static_cast<double>(v))) {
    diag->Error(line, path, OutOfRange(s, bounds));
    return false;
  }
  *out = static_cast<int64_t>(v);
  return true;
}

bool ToDouble(const YAML::Node& node, const std::string& path, int line, Diagnostics* diag, const Bounds& bounds,
              double* out) {
  if (!CheckScalar(node, path, line, diag, "a number")) return false;
  const std::string& s = node.Scalar();
  if (IsQuoted(node) || !LooksLikeNumber(s)) {
    diag->Error(line, path, "expected a number, got " + DescribeNode(node));
    return false;
  }
  const double v = std::strtod(s.c_str(), nullptr);
  if (!std::isfinite(v) || !bounds.Contains(v)) {
    diag->Error(line, path, OutOfRange(s, bounds));
    return false;
  }
  *out = v;
  return true;
}

bool ToEnumIndex(const YAML::Node& node, const std::string& path, int line, Diagnostics* diag,
                 const std::vector<std::string>& names, size_t* index) {
  if (!node.IsScalar()) {
    diag->Error(line, path, "expected one of " + JoinQuoted(names) + ", got " + DescribeNode(node));
    return false;
  }
  const std::string& s = node.Scalar();
  for (size_t i = 0; i < names.size(); ++i)
    if (names[i] == s) return *index = i, true;
  std::string what = "'" + s + "' is not one of " + JoinQuoted(names);
  const std::string close = ClosestWord(s, names);
  if (!close.empty()) what += " (did you mean '" + close + "'?)";
  diag->Error(line, path, what);
  return false;
}

// ---------------------------------------------------------------------------
// MapReader

MapReader::MapReader(const YAML::Node& node, std::string path, int parent_line, Diagnostics* diag)
    : node_(node), path_(std::move(path)), line_(parent_line), diag_(diag) {
  if (!node_.IsDefined() || !node_.IsMap()) return;
  if (yaml_fields::LineOf(node_) > 0) line_ = yaml_fields::LineOf(node_);
  for (auto it = node_.begin(); it != node_.end(); ++it) {
    const YAML::Node key = it->first;
    const int line = yaml_fields::LineOf(key) > 0 ? yaml_fields::LineOf(key) : line_;
    if (!key.IsScalar()) {
      diag_->Error(line, path_, "keys must be plain names, got " + DescribeNode(key));
      continue;
    }
    const std::string name = key.Scalar();
    if (const Field* first = Find(name)) {
      diag_->Error(line, PathOf(name), "duplicate key (first written at line " + std::to_string(first->line) + ")");
      continue;
    }
    fields_.push_back({name, Field{key, it->second, line}});
    diag_->NoteLine(PathOf(name), line);
  }
}

const MapReader::Field* MapReader::Find(const std::string& key) const {
  for (const auto& [name, field] : fields_)
    if (name == key) return &field;
  return nullptr;
}

int MapReader::LineOf(const std::string& key) const {
  const Field* f = Find(key);
  return f ? f->line : line_;
}

bool MapReader::Has(const std::string& key) {
  if (std::find(asked_.begin(), asked_.end(), key) == asked_.end()) asked_.push_back(key);
  return Find(key) != nullptr;
}

YAML::Node MapReader::Get(const std::string& key) {
  if (!Has(key)) return YAML::Node(YAML::NodeType::Undefined);
  return Find(key)->value;
}

bool MapReader::Require(const std::string& key, const std::string& why) {
  if (Has(key)) return true;
  diag_->Error(line_, PathOf(key), "required key is missing" + (why.empty() ? "" : " (" + why + ")"));
  return false;
}

bool MapReader::Read(const std::string& key, std::string* out) {
  YAML::Node v = Get(key);
  return v.IsDefined() && ToString(v, PathOf(key), LineOf(key), diag_, out);
}

bool MapReader::Read(const std::string& key, bool* out) {
  YAML::Node v = Get(key);
  return v.IsDefined() && ToBool(v, PathOf(key), LineOf(key), diag_, out);
}

bool MapReader::Read(const std::string& key, int64_t* out, const Bounds& bounds) {
  YAML::Node v = Get(key);
  return v.IsDefined() && ToInt(v, PathOf(key), LineOf(key), diag_, bounds, out);
}

bool MapReader::Read(const std::string& key, int* out, const Bounds& bounds) {
  int64_t v = 0;
  if (!Read(key, &v, bounds)) return false;
  if (v < std::numeric_limits<int>::min() || v > std::numeric_limits<int>::max()) {
    diag_->Error(LineOf(key), PathOf(key), std::to_string(v) + " is out of range: too large for a 32-bit integer");
    return false;
  }
  *out = static_cast<int>(v);
  return true;
}

bool MapReader::Read(const std::string& key, double* out, const Bounds& bounds) {
  YAML::Node v = Get(key);
  return v.IsDefined() && ToDouble(v, PathOf(key), LineOf(key), diag_, bounds, out);
}

bool MapReader::Read(const std::string& key, std::vector<double>* out, const Bounds& bounds) {
  std::vector<YAML::Node> items;
  if (!ListItems(key, &items)) return false;
  std::vector<double> values(items.size());
  bool ok = true;
  for (size_t i = 0; i < items.size(); ++i) {
    const int line = yaml_fields::LineOf(items[i]) > 0 ? yaml_fields::LineOf(items[i]) : LineOf(key);
    ok &= ToDouble(items[i], ItemPath(PathOf(key), i), line, diag_, bounds, &values[i]);
  }
  if (ok) *out = std::move(values);
  return ok;
}

bool MapReader::Read(const std::string& key, std::vector<std::string>* out) {
  std::vector<YAML::Node> items;
  if (!ListItems(key, &items)) return false;
  std::vector<std::string> values(items.size());
  bool ok = true;
  for (size_t i = 0; i < items.size(); ++i) {
    const int line = yaml_fields::LineOf(items[i]) > 0 ? yaml_fields::LineOf(items[i]) : LineOf(key);
    ok &= ToString(items[i], ItemPath(PathOf(key), i), line, diag_, &values[i]);
  }
  if (ok) *out = std::move(values);
  return ok;
}

MapReader MapReader::Child(const std::string& key) {
  YAML::Node v = Get(key);
  if (v.IsDefined() && !v.IsNull() && !v.IsMap()) {
    diag_->Error(LineOf(key), PathOf(key), "expected a map of keys, got " + DescribeNode(v));
    v = YAML::Node(YAML::NodeType::Undefined);
  }
  return MapReader(v, PathOf(key), LineOf(key), diag_);
}

bool MapReader::ListItems(const std::string& key, std::vector<YAML::Node>* items) {
  items->clear();
  YAML::Node v = Get(key);
  if (!v.IsDefined()) return false;
  if (v.IsNull()) return true;  // "key:" with nothing = an empty list
  if (!v.IsSequence()) {
    diag_->Error(LineOf(key), PathOf(key), "expected a list, got " + DescribeNode(v));
    return false;
  }
  for (auto it = v.begin(); it != v.end(); ++it) items->push_back(*it);
  return true;
}

std::vector<YAML::Node> MapReader::List(const std::string& key) {
  std::vector<YAML::Node> items;
  ListItems(key, &items);
  return items;
}

void MapReader::Finish() {
  diag_->AddKnownKeys(path_, asked_);
  for (const auto& [name, field] : fields_) {
    if (std::find(asked_.begin(), asked_.end(), name) != asked_.end()) continue;
    diag_->UnknownKey(field.line, path_, name, asked_);
  }
}

}  // namespace yaml_fields
}  // namespace sparq
