// Strict reading of YAML maps into typed values, for recipes.
//
// A MapReader wraps one YAML map. The parser asks it for each key it knows
// (ReadString, ReadDouble, Child, ...); every key it was not asked for is an
// unknown key, reported with the closest valid key. Every problem goes to one
// Diagnostics, which keeps going so that all errors of a document are
// reported together, each with its key path and line:
//
//   recipe.yaml:12: quantize.calibraton: unknown key (did you mean 'calibration'?)
//
// Internal to pipeline/: the public API is include/sparq/recipe.h.
#pragma once

#include <yaml-cpp/yaml.h>

#include <cstddef>
#include <cstdint>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "sparq/status.h"

namespace sparq {
namespace yaml_fields {

// The closed or open interval a number must lie in, written in messages as
// "in [0, 1)", ">= 1" or "> 0".
struct Bounds {
  double lo = -std::numeric_limits<double>::infinity();
  double hi = std::numeric_limits<double>::infinity();
  bool lo_closed = true;
  bool hi_closed = true;

  static Bounds Any() { return {}; }
  static Bounds AtLeast(double lo) { return {lo, std::numeric_limits<double>::infinity(), true, true}; }
  static Bounds Above(double lo) { return {lo, std::numeric_limits<double>::infinity(), false, true}; }
  static Bounds Closed(double lo, double hi) { return {lo, hi, true, true}; }
  static Bounds ClosedOpen(double lo, double hi) { return {lo, hi, true, false}; }  // [lo, hi)
  static Bounds OpenClosed(double lo, double hi) { return {lo, hi, false, true}; }  // (lo, hi]
  static Bounds Open(double lo, double hi) { return {lo, hi, false, false}; }        // (lo, hi)

  bool Contains(double v) const;
  std::string Describe() const;
};

// One enum value and its YAML spelling.
template <typename E>
struct EnumEntry {
  E value;
  const char* name;
};

// The spelling of `value` in `table`, or "?" when absent.
template <typename E, size_t N>
const char* EnumNameIn(const EnumEntry<E> (&table)[N], E value) {
  for (const auto& e : table)
    if (e.value == value) return e.name;
  return "?";
}

// The same for a table built at run time (from a library's own name table).
template <typename E>
const char* EnumNameIn(const std::vector<EnumEntry<E>>& table, E value) {
  for (const auto& e : table)
    if (e.value == value) return e.name;
  return "?";
}

// Shortest decimal text that reads back as exactly `v` ("0.5", "99.99", "1").
std::string FormatNumber(double v);

// Levenshtein edit distance, ignoring ASCII case.
size_t EditDistance(const std::string& a, const std::string& b);

// The candidate a misspelled `word` most likely meant: edit distance <= 2, or
// else the longest shared prefix of at least 3 characters; "" when none.
std::string ClosestWord(const std::string& word, const std::vector<std::string>& candidates);

// Line (1-based) where a node starts, or 0 when it has no position.
int LineOf(const YAML::Node& node);

// How a node looks in a message: "a map", "a list", "no value", "'abc'".
std::string DescribeNode(const YAML::Node& node);

// Collects the errors and warnings of one document.
class Diagnostics {
 public:
  explicit Diagnostics(std::string source) : source_(std::move(source)) {}

  // line 0 = unknown; path "" = the document as a whole.
  void Error(int line, const std::string& path, const std::string& what);
  void Warning(int line, const std::string& path, const std::string& what);

  // Records a key nobody asked for in the map at `map_path`; Finish() turns it
  // into an error with a suggestion drawn from `valid` or from other maps.
  void UnknownKey(int line, const std::string& map_path, const std::string& key, std::vector<std::string> valid);
  // Records the keys a map accepts (for "belongs under 'data'" suggestions).
  void AddKnownKeys(const std::string& map_path, const std::vector<std::string>& keys);

  // Records that `path` was written by `origin` (e.g. "--set a.b=1") rather
  // than in the file: messages about it, or below it, name the origin.
  void NoteOrigin(const std::string& path, const std::string& origin) { origins_[path] = origin; }
  // Records where a key path was written, for cross-field messages.
  void NoteLine(const std::string& path, int line) { lines_.emplace(path, line); }
  // The line of `path` or of its closest written parent; the root's line otherwise.
  int LineFor(const std::string& path) const;
  // True when `path` was written in the document.
  bool Written(const std::string& path) const { return lines_.count(path) != 0; }
  // True when an error was reported at `path` or below it.
  bool FailedAt(const std::string& path) const;

  const std::string& source() const { return source_; }

  // Resolves unknown keys and returns InvalidArgument with every error, one
  // per line, sorted by line; OK when there is none.
  Status Finish();
  // Warnings formatted like errors, sorted by line.
  std::vector<std::string> Warnings() const;

 private:
  struct Entry {
    int line;
    size_t order;
    std::string text;
  };
  struct Unknown {
    int line;
    std::string map_path, key;
    std::vector<std::string> valid;
  };
  std::string Format(int line, const std::string& path, const std::string& what) const;
  std::string SuggestFor(const Unknown& u) const;
  static std::vector<std::string> Sorted(std::vector<Entry> entries);

  std::string source_;
  std::vector<Entry> errors_, warnings_;
  std::vector<Unknown> unknown_;
  std::map<std::string, std::vector<std::string>> known_;  // map path -> keys
  std::map<std::string, int> lines_;                        // key path -> line
  std::map<std::string, std::string> origins_;              // key path -> what wrote it, if not the file
  std::set<std::string> failed_paths_;
};

// Path helpers: JoinPath("data", "batch_size") = "data.batch_size",
// ItemPath("quantize.layers", 2) = "quantize.layers[2]".
std::string JoinPath(const std::string& parent, const std::string& key);
std::string ItemPath(const std::string& list_path, size_t index);

// Scalar conversions for a value node (a map entry or a list item). On failure
// each records an error at (line, path) and returns false, leaving *out alone.
bool ToString(const YAML::Node& node, const std::string& path, int line, Diagnostics* diag, std::string* out);
bool ToBool(const YAML::Node& node, const std::string& path, int line, Diagnostics* diag, bool* out);
bool ToInt(const YAML::Node& node, const std::string& path, int line, Diagnostics* diag, const Bounds& bounds,
           int64_t* out);
bool ToDouble(const YAML::Node& node, const std::string& path, int line, Diagnostics* diag, const Bounds& bounds,
              double* out);
// Index of the scalar in `names`; the error lists the allowed names and the closest one.
bool ToEnumIndex(const YAML::Node& node, const std::string& path, int line, Diagnostics* diag,
                 const std::vector<std::string>& names, size_t* index);

// Reads one YAML map. The node may be undefined or null (an absent section):
// then every Read leaves its default. Call Finish() after the last Read.
class MapReader {
 public:
  // `parent_line` is used for messages about this map when it is absent.
  MapReader(const YAML::Node& node, std::string path, int parent_line, Diagnostics* diag);

  const std::string& path() const { return path_; }
  std::string PathOf(const std::string& key) const { return JoinPath(path_, key); }
  // Line of the map (its first key), or the parent's line when absent.
  int line() const { return line_; }
  // Line of `key` when written, else the map's line.
  int LineOf(const std::string& key) const;
  Diagnostics* diag() const { return diag_; }

  // Marks `key` as known and says whether it is written (with any value).
  bool Has(const std::string& key);
  // Marks `key` as known and returns its value node (undefined when absent).
  YAML::Node Get(const std::string& key);
  // Records "<path>: required key is missing" when `key` is not written.
  bool Require(const std::string& key, const std::string& why = "");

  // Typed reads: true when the key is written and valid (then *out is set);
  // false when absent (*out keeps its default) or invalid (error recorded).
  bool Read(const std::string& key, std::string* out);
  bool Read(const std::string& key, bool* out);
  bool Read(const std::string& key, int64_t* out, const Bounds& bounds = Bounds::Any());
  bool Read(const std::string& key, int* out, const Bounds& bounds = Bounds::Any());
  bool Read(const std::string& key, double* out, const Bounds& bounds = Bounds::Any());
  bool Read(const std::string& key, std::vector<double>* out, const Bounds& bounds = Bounds::Any());
  bool Read(const std::string& key, std::vector<std::string>* out);
  template <typename E>
  bool ReadEnum(const std::string& key, const std::vector<EnumEntry<E>>& table, E* out) {
    YAML::Node v = Get(key);
    if (!v.IsDefined()) return false;
    std::vector<std::string> names;
    for (const auto& e : table) names.push_back(e.name);
    size_t index = 0;
    if (!ToEnumIndex(v, PathOf(key), LineOf(key), diag_, names, &index)) return false;
    *out = table[index].value;
    return true;
  }
  template <typename E, size_t N>
  bool ReadEnum(const std::string& key, const EnumEntry<E> (&table)[N], E* out) {
    YAML::Node v = Get(key);
    if (!v.IsDefined()) return false;
    std::vector<std::string> names;
    for (const auto& e : table) names.push_back(e.name);
    size_t index = 0;
    if (!ToEnumIndex(v, PathOf(key), LineOf(key), diag_, names, &index)) return false;
    *out = table[index].value;
    return true;
  }

  // The reader of a nested map; an error when the value is not a map.
  MapReader Child(const std::string& key);
  // The items of a list value; an error when the value is not a list.
  std::vector<YAML::Node> List(const std::string& key);

  // Reports unknown keys and registers the known ones.
  void Finish();

 private:
  struct Field {
    YAML::Node key, value;
    int line;
  };
  const Field* Find(const std::string& key) const;
  // Fills *items when the key is a list (or written with no value); false
  // when absent or not a list (an error then).
  bool ListItems(const std::string& key, std::vector<YAML::Node>* items);

  YAML::Node node_;
  std::string path_;
  int line_;
  Diagnostics* diag_;
  std::vector<std::pair<std::string, Field>> fields_;  // in document order, duplicates dropped
  std::vector<std::string> asked_;
};

}  // namespace yaml_fields
}  // namespace sparq
