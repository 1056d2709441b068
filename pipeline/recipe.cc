// Recipe parsing: YAML text -> Recipe, strictly, with every error collected
// (see include/sparq/recipe.h). Emitting and output-file helpers live in
// recipe_yaml.cc; the generic strict map reading in yaml_fields.cc.
#include "sparq/recipe.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <exception>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>
#include <yaml-cpp/eventhandler.h>

#include "graph/name_pattern.h"
#include "pipeline/gate.h"
#include "core/process.h"
#include "pipeline/yaml_fields.h"

namespace sparq {
namespace {

namespace fs = std::filesystem;
using yaml_fields::Bounds;
using yaml_fields::Diagnostics;
using yaml_fields::EnumEntry;
using yaml_fields::EnumNameIn;
using yaml_fields::FormatNumber;
using yaml_fields::ItemPath;
using yaml_fields::JoinPath;
using yaml_fields::MapReader;

// Where the second document of a YAML stream starts (line, 1-based), 0 when
// there is one. yaml-cpp 0.7's LoadAll never returns on some invalid streams
// (" ,": it appends null documents forever, jbeder/yaml-cpp#1040, fixed in
// 0.8.1), so the recipe is read with Load and the documents are counted here,
// stopping at the second.
class SecondDocument : public YAML::EventHandler {
 public:
  static int LineIn(const std::string& text) {
    std::istringstream in(text);
    YAML::Parser parser(in);
    SecondDocument counter;
    while (counter.documents_ < 2 && parser.HandleNextDocument(counter)) {
    }
    return counter.documents_ >= 2 ? counter.second_line_ : 0;
  }

  void OnDocumentStart(const YAML::Mark& mark) override {
    if (++documents_ == 2) second_line_ = mark.line + 1;
  }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark&, YAML::anchor_t) override {}
  void OnAlias(const YAML::Mark&, YAML::anchor_t) override {}
  void OnScalar(const YAML::Mark&, const std::string&, YAML::anchor_t, const std::string&) override {}
  void OnSequenceStart(const YAML::Mark&, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {}
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark&, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {}
  void OnMapEnd() override {}

 private:
  int documents_ = 0;
  int second_line_ = 0;
};

using Format = RecipeOutput::Format;
using Layout = RecipeData::Layout;
using Structure = RecipePrune::Structure;
using Schedule = RecipePrune::Schedule;
using Scope = RecipePrune::Scope;
using Score = RecipePrune::Score;
using Precision = RecipeQuantize::Precision;
using LayerPrecision = RecipeQuantize::LayerPrecision;
using RankBy = RecipeQuantize::RankBy;
using Backend = RecipeEvaluate::Backend;
using Metric = RecipeEvaluate::Metric;

// The YAML spellings, one table per enum.
constexpr EnumEntry<Format> kFormats[] = {
    {Format::kQdq, "qdq"}, {Format::kQOperator, "qoperator"}, {Format::kFp16, "fp16"}};
constexpr EnumEntry<Layout> kLayouts[] = {{Layout::kNCHW, "NCHW"}, {Layout::kNHWC, "NHWC"}};
// The library's enums are spelled by the library's name functions.
const EnumEntry<Schedule> kSchedules[] = {{Schedule::kOneShot, PruneScheduleName(Schedule::kOneShot)},
                                          {Schedule::kLinear, PruneScheduleName(Schedule::kLinear)},
                                          {Schedule::kAgp, PruneScheduleName(Schedule::kAgp)}};
const EnumEntry<Scope> kScopes[] = {{Scope::kGlobal, PruneScopeName(Scope::kGlobal)},
                                    {Scope::kLayer, PruneScopeName(Scope::kLayer)}};
const EnumEntry<Score> kScores[] = {{Score::kMagnitude, PruneScoreName(Score::kMagnitude)},
                                    {Score::kL1, PruneScoreName(Score::kL1)},
                                    {Score::kL2, PruneScoreName(Score::kL2)},
                                    {Score::kActivation, PruneScoreName(Score::kActivation)}};
constexpr EnumEntry<RecoveryMethod> kRecoveryMethods[] = {{RecoveryMethod::kLeastSquares, "least_squares"},
                                                          {RecoveryMethod::kObs, "obs"}};
constexpr EnumEntry<PruneReconstruction::Method> kReconstructions[] = {
    {PruneReconstruction::Method::kNone, "none"}, {PruneReconstruction::Method::kBlock, "block"}};
constexpr EnumEntry<RecipePrune::Allocation> kAllocations[] = {{RecipePrune::Allocation::kUniform, "uniform"},
                                                               {RecipePrune::Allocation::kAuto, "auto"}};
constexpr EnumEntry<Precision> kPrecisions[] = {
    {Precision::kInt8, "int8"}, {Precision::kFp16, "fp16"}, {Precision::kMixed, "mixed"}, {Precision::kInt4, "int4"},
    {Precision::kFp8, "fp8"}};
constexpr EnumEntry<Int4Method> kInt4Methods[] = {
    {Int4Method::kRtn, "rtn"}, {Int4Method::kGptq, "gptq"}, {Int4Method::kAwq, "awq"}};
constexpr EnumEntry<RecipeQuantize::Rounding> kRoundings[] = {{RecipeQuantize::Rounding::kNearest, "nearest"},
                                                              {RecipeQuantize::Rounding::kAdaRound, "adaround"}};
constexpr EnumEntry<Int4Format> kInt4Formats[] = {{Int4Format::kMatMulNBits, "matmulnbits"}, {Int4Format::kQdq, "qdq"}};
const EnumEntry<LayerPrecision> kLayerPrecisions[] = {{LayerPrecision::kINT8, PrecisionName(LayerPrecision::kINT8)},
                                                     {LayerPrecision::kFP16, PrecisionName(LayerPrecision::kFP16)},
                                                     {LayerPrecision::kFP32, PrecisionName(LayerPrecision::kFP32)}};
// quantize.fallback.to: only the float precisions.
const EnumEntry<LayerPrecision> kFallbackTargets[] = {{LayerPrecision::kFP16, PrecisionName(LayerPrecision::kFP16)},
                                                     {LayerPrecision::kFP32, PrecisionName(LayerPrecision::kFP32)}};
constexpr EnumEntry<RecipeQuantize::Mode> kModes[] = {{RecipeQuantize::Mode::kStatic, "static"},
                                                      {RecipeQuantize::Mode::kDynamic, "dynamic"}};
constexpr EnumEntry<RankBy> kRankBy[] = {
    {RankBy::kSqnr, "sqnr"}, {RankBy::kMetric, "metric"}, {RankBy::kOutputSqnr, "output_sqnr"}};
constexpr EnumEntry<Backend> kBackends[] = {{Backend::kCpu, "cpu"}, {Backend::kCuda, "cuda"}, {Backend::kAuto, "auto"}};
constexpr EnumEntry<RecipeEvaluate::Gate::FailedModel> kFailedModels[] = {
    {RecipeEvaluate::Gate::FailedModel::kRename, "rename"}, {RecipeEvaluate::Gate::FailedModel::kDiscard, "discard"}};
// Spelled by the library's one name table (MetricName).
constexpr EnumEntry<Metric> kMetrics[] = {{Metric::kTop1, MetricName(Metric::kTop1)},
                                          {Metric::kTop5, MetricName(Metric::kTop5)},
                                          {Metric::kAgreement, MetricName(Metric::kAgreement)},
                                          {Metric::kSqnr, MetricName(Metric::kSqnr)},
                                          {Metric::kCosine, MetricName(Metric::kCosine)},
                                          {Metric::kTop5Overlap, MetricName(Metric::kTop5Overlap)},
                                          {Metric::kMeanCosine, MetricName(Metric::kMeanCosine)},
                                          {Metric::kCtcAccuracy, MetricName(Metric::kCtcAccuracy)},
                                          {Metric::kBoxRecall, MetricName(Metric::kBoxRecall)},
                                          {Metric::kClassScoreSqnr, MetricName(Metric::kClassScoreSqnr)},
                                          {Metric::kMapIou, MetricName(Metric::kMapIou)}};
// The calibrator's own name table (CalibrationMethods): canonical names,
// then the aliases, so a recipe is written back with the canonical name.
const std::vector<EnumEntry<CalibrationMethod>>& Methods() {
  static const std::vector<EnumEntry<CalibrationMethod>>* table = [] {
    auto* t = new std::vector<EnumEntry<CalibrationMethod>>();
    for (const CalibrationMethodInfo& m : CalibrationMethods()) t->push_back({m.method, m.name});
    for (const CalibrationMethodInfo& m : CalibrationMethods())
      if (m.alias != nullptr) t->push_back({m.method, m.alias});
    return t;
  }();
  return *table;
}

bool HasDataExtension(const fs::path& p) {
  std::string ext = p.extension().string();
  for (char& c : ext) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return ext == ".npz" || ext == ".npy";
}

bool CheckInt4BlockSizeValue(int64_t b) { return b == 16 || b == 32 || b == 64 || b == 128 || b == 256; }

bool SamePath(const std::string& a, const std::string& b) {
  if (a == b) return true;
  std::error_code ec;
  return fs::exists(a, ec) && fs::exists(b, ec) && fs::equivalent(a, b, ec);
}

// Parses one recipe. Each Parse<Section> reads its map, checks what can be
// checked inside the section, and records errors; CheckAcrossSections and
// CheckFiles then look at the whole recipe.
class RecipeParser {
 public:
  RecipeParser(const std::string& base_dir, const std::string& source, const RecipeParseOptions& options)
      : diag_(source.empty() ? "<recipe>" : source), options_(options) {
    std::error_code ec;
    fs::path base = base_dir.empty() ? fs::current_path(ec) : fs::absolute(base_dir, ec);
    recipe_.base_dir = base.lexically_normal().string();
    recipe_.source = diag_.source();
  }

  StatusOr<Recipe> Parse(const std::string& text);

 private:
  void ParseRoot(MapReader& root);
  void ParseOutput(MapReader m);
  void ParseData(MapReader m);
  void ParsePrune(MapReader m);
  void ParsePruneLayer(const YAML::Node& item, const std::string& path, int line, RecipePrune::LayerRule* rule);
  void ParseQuantize(MapReader m);
  void ParseSearch(MapReader& m, bool calibration_written);
  void ParseEvaluate(MapReader m);
  void ParseReport(MapReader m);
  void CheckAcrossSections();
  void CheckFiles();
  // Sets one "dotted.key=value" of RecipeParseOptions::overrides in `root`.
  Status ApplyOverride(YAML::Node root, const std::string& override_text);

  // Reads a structure value ("2:4", "block4x4", ...).
  bool ReadStructure(MapReader& m, const std::string& key, Structure* out);
  // Reads a `match` pattern and checks that it compiles as a regex.
  bool ReadPattern(MapReader& m, const std::string& key, std::string* out);
  // Reads a path; `base` is the folder relative paths resolve against.
  bool ReadPath(MapReader& m, const std::string& key, const std::string& base, bool allow_empty,
                std::string* out);
  // An N:M structure fixes the sparsity at 1 - N/M; a different written value is an error.
  void ReconcileNmSparsity(const Structure& s, bool sparsity_written, const std::string& sparsity_path,
                           double* sparsity);
  static std::string Resolve(const std::string& raw, const std::string& base);

  bool budget_written_ = false;  // prune.sensitivity.budget is in the recipe

  Diagnostics diag_;
  RecipeParseOptions options_;
  Recipe recipe_;
  int trt_cache_line_ = 0;  // line of a written output.trt_cache; 0 = default
};

std::string RecipeParser::Resolve(const std::string& raw, const std::string& base) {
  fs::path p(raw);
  if (p.is_relative()) p = fs::path(base) / p;
  return p.lexically_normal().string();
}

StatusOr<Recipe> RecipeParser::Parse(const std::string& text) {
  YAML::Node doc;
  int second_document_line = 0;
  try {
    doc = YAML::Load(text);
    second_document_line = SecondDocument::LineIn(text);
  } catch (const YAML::ParserException& e) {
    // YAML forbids tabs in indentation, and yaml-cpp's message for them
    // ("illegal map value") does not say so.
    std::string hint;
    if (text.find("\n\t") != std::string::npos || text.rfind("\t", 0) == 0)
      hint = " (the recipe indents with tabs; YAML needs spaces)";
    return Status::InvalidArgument(diag_.source() + ":" + std::to_string(e.mark.line + 1) + ":" +
                                   std::to_string(e.mark.column + 1) + ": YAML syntax error: " + e.msg + hint);
  }
  if (!doc.IsDefined() || doc.IsNull()) {
    return Status::InvalidArgument(diag_.source() + ":1: the recipe is empty (expected at least 'model' and 'data')");
  }
  if (second_document_line > 0) {
    diag_.Error(second_document_line, "", "a recipe is one YAML document; found more (remove the '---' separators)");
  }
  if (!doc.IsMap()) {
    return Status::InvalidArgument(diag_.source() + ":" + std::to_string(std::max(1, yaml_fields::LineOf(doc))) +
                                   ": expected a map of recipe sections (version, model, data, ...), got " +
                                   yaml_fields::DescribeNode(doc));
  }
  for (const std::string& o : options_.overrides) SPARQ_RETURN_IF_ERROR(ApplyOverride(doc, o));
  MapReader root(doc, "", 1, &diag_);
  diag_.NoteLine("", root.line());
  ParseRoot(root);
  CheckAcrossSections();
  if (options_.check_files) CheckFiles();
  SPARQ_RETURN_IF_ERROR(diag_.Finish());
  recipe_.warnings = diag_.Warnings();
  return std::move(recipe_);
}

Status RecipeParser::ApplyOverride(YAML::Node root, const std::string& text) {
  const std::string origin = "--set " + text;
  auto bad = [&](const std::string& what) { return Status::InvalidArgument(diag_.source() + ": " + origin + ": " + what); };
  const size_t eq = text.find('=');
  if (eq == std::string::npos) return bad("expected KEY=VALUE, e.g. evaluate.gate.max_drop=1.0");
  const std::string key = text.substr(0, eq);
  // The key path: map keys between dots, each optionally followed by list
  // indices, "prune.layers[1].sparsity".
  struct Step {
    std::string key;  // a map key, or "" for a list index
    size_t index = 0;
  };
  std::vector<Step> steps;
  const std::string syntax =
      "'" + key + "' is not a key path (map keys of letters, digits and _ between dots, list items as [index], e.g. "
      "prune.layers[0].sparsity=0.5; lists may also be set whole, quantize.exclude_ops=[Softmax])";
  for (size_t begin = 0;;) {
    const size_t dot = key.find('.', begin);
    const std::string segment = key.substr(begin, dot == std::string::npos ? std::string::npos : dot - begin);
    const size_t bracket = std::min(segment.find('['), segment.size());
    const std::string name = segment.substr(0, bracket);
    const bool word = !name.empty() && std::all_of(name.begin(), name.end(), [](char c) {
      return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
    });
    if (!word) return bad(syntax);
    steps.push_back({name, 0});
    for (size_t i = bracket; i < segment.size();) {
      const size_t close = segment.find(']', i);
      const std::string digits = close == std::string::npos ? "" : segment.substr(i + 1, close - i - 1);
      if (segment[i] != '[' || digits.empty() || digits.size() > 6 ||
          !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; })) {
        return bad(syntax);
      }
      steps.push_back({"", static_cast<size_t>(std::stoul(digits))});
      i = close + 1;
    }
    if (dot == std::string::npos) break;
    begin = dot + 1;
  }
  YAML::Node value;
  try {
    value = YAML::Load(text.substr(eq + 1));
  } catch (const YAML::ParserException& e) {
    return bad("the value is not YAML: " + e.msg);
  }
  // Walk down, creating the maps (and, at index 0 or one past the end, the
  // list items) that are missing; they and the key itself are "written by
  // this --set" for messages.
  auto empty_for = [&](size_t next) {
    return YAML::Node(steps[next].key.empty() ? YAML::NodeType::Sequence : YAML::NodeType::Map);
  };
  YAML::Node node;
  node.reset(root);
  std::string path;
  for (size_t i = 0; i < steps.size(); ++i) {
    const bool last = i + 1 == steps.size();
    const Step& step = steps[i];
    YAML::Node child;
    if (!step.key.empty()) {
      path = JoinPath(path, step.key);
      const YAML::Node& view = node;  // const: looking does not insert
      const YAML::Node looked = view[step.key];  // (copied, never assigned: it may be invalid)
      if (last || !looked.IsDefined() || looked.IsNull()) {
        node[step.key] = last ? value : empty_for(i + 1);
        diag_.NoteOrigin(path, origin);
      }
      YAML::Node next = node[step.key];
      child.reset(next);
    } else {
      const std::string list = path;
      path = ItemPath(list, step.index);
      if (step.index > node.size()) {
        return bad(list + " has " + std::to_string(node.size()) + " item" + (node.size() == 1 ? "" : "s") + ": [" +
                   std::to_string(step.index) + "] is past its end (one past the end appends an item)");
      }
      if (step.index == node.size()) {
        node.push_back(last ? value : empty_for(i + 1));
        diag_.NoteOrigin(path, origin);
      } else if (last) {
        node[step.index] = value;
        diag_.NoteOrigin(path, origin);
      }
      YAML::Node next = node[step.index];
      child.reset(next);
    }
    if (!last) {
      const bool want_list = steps[i + 1].key.empty();
      if (want_list ? !child.IsSequence() : !child.IsMap()) {
        return bad(path + " is " + yaml_fields::DescribeNode(child) + " in the recipe, not " +
                   (want_list ? "a list" : "a map of keys"));
      }
    }
    node.reset(child);
  }
  return Status::OK();
}

void RecipeParser::ParseRoot(MapReader& root) {
  Recipe& r = recipe_;
  if (root.Read("version", &r.version, Bounds::Any()) && r.version != Recipe::kVersion) {
    diag_.Error(root.LineOf("version"), "version",
                "unsupported recipe version " + std::to_string(r.version) + " (this sparq reads version " +
                    std::to_string(Recipe::kVersion) + ")");
  }
  if (root.Read("name", &r.name) && r.name.empty()) diag_.Error(root.LineOf("name"), "name", "must not be empty");
  if (root.Require("model")) ReadPath(root, "model", r.base_dir, /*allow_empty=*/false, &r.model);
  if (!root.Has("name")) {
    const fs::path source(r.source);
    const std::string ext = source.extension().string();
    r.name = (ext == ".yaml" || ext == ".yml") ? source.stem().string() : fs::path(r.model).stem().string();
  }
  // Output first: report paths resolve against output.dir.
  ParseOutput(root.Child("output"));
  ParseData(root.Child("data"));
  ParsePrune(root.Child("prune"));
  ParseQuantize(root.Child("quantize"));
  ParseEvaluate(root.Child("evaluate"));
  ParseReport(root.Child("report"));
  root.Finish();
}

bool RecipeParser::ReadPath(MapReader& m, const std::string& key, const std::string& base, bool allow_empty,
                            std::string* out) {
  std::string raw;
  if (!m.Read(key, &raw)) return false;
  if (raw.empty()) {
    if (allow_empty) return out->clear(), true;
    diag_.Error(m.LineOf(key), m.PathOf(key), "must not be empty");
    return false;
  }
  *out = Resolve(raw, base);
  return true;
}

void RecipeParser::ParseOutput(MapReader m) {
  RecipeOutput& o = recipe_.output;
  o.dir = Resolve("sparq-out", recipe_.base_dir);
  ReadPath(m, "dir", recipe_.base_dir, /*allow_empty=*/false, &o.dir);
  const std::string stem = recipe_.model.empty() ? "model" : fs::path(recipe_.model).stem().string();
  o.model = Resolve(stem + ".sparq.onnx", o.dir);
  ReadPath(m, "model", o.dir, /*allow_empty=*/false, &o.model);
  m.ReadEnum("format", kFormats, &o.format);
  o.scales = Resolve("scales.json", o.dir);
  ReadPath(m, "scales", o.dir, /*allow_empty=*/true, &o.scales);
  o.trt_cache = Resolve("calib.cache", o.dir);
  ReadPath(m, "trt_cache", o.dir, /*allow_empty=*/true, &o.trt_cache);
  if (m.Has("trt_cache")) trt_cache_line_ = m.LineOf("trt_cache");
  if (m.Read("trt_version", &o.trt_version)) {
    bool digits = !o.trt_version.empty() && o.trt_version.size() <= 8;
    for (char c : o.trt_version) digits &= c >= '0' && c <= '9';
    if (!digits)
      diag_.Error(m.LineOf("trt_version"), m.PathOf("trt_version"),
                  "'" + o.trt_version + "' is not a TensorRT version number such as 8601 (8.6.1) or 100100 (10.1.0)");
  }
  m.Read("external_data", &o.external_data);
  m.Read("sparse_initializers", &o.sparse_initializers);
  m.Read("overwrite", &o.overwrite);
  m.Finish();
}

void RecipeParser::ParseData(MapReader m) {
  RecipeData& d = recipe_.data;
  const std::string& base = recipe_.base_dir;
  ReadPath(m, "calibration", base, /*allow_empty=*/false, &d.calibration);
  if (m.Require("evaluation")) ReadPath(m, "evaluation", base, /*allow_empty=*/false, &d.evaluation);
  ReadPath(m, "labels", base, /*allow_empty=*/false, &d.labels);
  if (m.Read("input", &d.input) && d.input.empty())
    diag_.Error(m.LineOf("input"), m.PathOf("input"), "must not be empty (remove it to use the model's only input)");
  m.Read("calibration_samples", &d.calibration_samples, Bounds::AtLeast(0));
  m.Read("evaluation_samples", &d.evaluation_samples, Bounds::AtLeast(0));
  m.Read("batch_size", &d.batch_size, Bounds::AtLeast(1));

  MapReader p = m.Child("preprocess");
  RecipeData::Preprocess& pp = d.preprocess;
  p.Read("scale", &pp.scale, Bounds::Above(0));
  p.Read("mean", &pp.mean);
  p.Read("std", &pp.stddev, Bounds::Above(0));
  p.ReadEnum("layout", kLayouts, &pp.layout);
  if (!pp.mean.empty() && !pp.stddev.empty() && pp.mean.size() != pp.stddev.size()) {
    diag_.Error(p.LineOf("std"), p.PathOf("std"),
                "has " + std::to_string(pp.stddev.size()) + " values but mean has " + std::to_string(pp.mean.size()) +
                    " (one per channel each)");
  }
  p.Finish();

  // constants: {input: value or [values]}; the model's inputs are checked
  // when the data is opened.
  YAML::Node constants = m.Get("constants");
  MapReader c = m.Child("constants");
  if (constants.IsMap()) {
    for (auto it = constants.begin(); it != constants.end(); ++it) {
      const std::string name = it->first.as<std::string>();
      std::vector<double> values;
      if (it->second.IsSequence()) {
        if (c.Read(name, &values) && values.empty()) {
          diag_.Error(c.LineOf(name), c.PathOf(name), "must hold at least one value");
          continue;
        }
      } else {
        double v = 0.0;
        if (c.Read(name, &v)) values = {v};
      }
      if (!values.empty()) d.constants[name] = std::move(values);
    }
  }
  c.Finish();
  m.Finish();
}

bool RecipeParser::ReadStructure(MapReader& m, const std::string& key, Structure* out) {
  std::string text;
  if (!m.Read(key, &text)) return false;
  StatusOr<Structure> s = Structure::Parse(text);
  if (!s.ok()) {
    std::string what = s.status().message();
    const std::string close = yaml_fields::ClosestWord(text, {"unstructured", "channel", "auto", "block4x4", "2:4"});
    if (!close.empty()) what += " (did you mean '" + close + "'?)";
    diag_.Error(m.LineOf(key), m.PathOf(key), what);
    return false;
  }
  *out = *s;
  return true;
}

bool RecipeParser::ReadPattern(MapReader& m, const std::string& key, std::string* out) {
  if (!m.Read(key, out)) return false;
  if (out->empty()) {
    diag_.Error(m.LineOf(key), m.PathOf(key), "must not be empty");
    return false;
  }
  if (NamePattern pattern(*out); !pattern.valid_regex()) {
    diag_.Error(m.LineOf(key), m.PathOf(key),
                "'" + *out + "' is not a valid regular expression (" + pattern.regex_error() + "); escape special characters");
    return false;
  }
  return true;
}

void RecipeParser::ReconcileNmSparsity(const Structure& s, bool sparsity_written, const std::string& sparsity_path,
                                       double* sparsity) {
  if (s.kind != Structure::Kind::kNM) return;
  if (sparsity_written && *sparsity == 0.0) return;  // 0 = leave dense, whatever the structure
  const double implied = 1.0 - static_cast<double>(s.n) / s.m;
  if (sparsity_written && std::fabs(*sparsity - implied) > 1e-9) {
    diag_.Error(diag_.LineFor(sparsity_path), sparsity_path,
                FormatNumber(*sparsity) + " contradicts structure " + s.ToString() + ", which fixes the sparsity at " +
                    FormatNumber(implied) + " (remove the sparsity, write 0 to leave it dense, or change the structure)");
    return;
  }
  *sparsity = implied;
}

void RecipeParser::ParsePruneLayer(const YAML::Node& item, const std::string& path, int line,
                                   RecipePrune::LayerRule* rule) {
  if (!item.IsMap()) {
    diag_.Error(line, path, "expected a map {match, sparsity, structure}, got " + yaml_fields::DescribeNode(item));
    return;
  }
  rule->line = line;
  MapReader m(item, path, line, &diag_);
  if (m.Require("match")) ReadPattern(m, "match", &rule->match);
  double sparsity = 0;
  const bool sparsity_written = m.Read("sparsity", &sparsity, Bounds::ClosedOpen(0, 1));
  if (sparsity_written) rule->sparsity = sparsity;
  Structure structure;
  if (ReadStructure(m, "structure", &structure)) rule->structure = structure;
  if (!m.Has("sparsity") && !m.Has("structure"))
    diag_.Error(m.line(), path, "sets neither sparsity nor structure, so it changes nothing");
  // The layer's own structure, or else the section's, may fix its sparsity.
  const Structure& effective = rule->structure ? *rule->structure : recipe_.prune.structure;
  if (effective.kind == Structure::Kind::kNM && (sparsity_written || rule->structure)) {
    double s = sparsity;
    ReconcileNmSparsity(effective, sparsity_written, m.PathOf("sparsity"), &s);
    if (rule->structure) rule->sparsity = s;
  }
  m.Finish();
}

void RecipeParser::ParsePrune(MapReader m) {
  RecipePrune& p = recipe_.prune;
  m.Read("enabled", &p.enabled);
  ReadStructure(m, "structure", &p.structure);
  ReadPath(m, "kernel_table", recipe_.base_dir, /*allow_empty=*/true, &p.kernel_table);
  const bool sparsity_written = m.Read("sparsity", &p.sparsity, Bounds::ClosedOpen(0, 1));
  if (!diag_.FailedAt(m.PathOf("sparsity"))) ReconcileNmSparsity(p.structure, sparsity_written, m.PathOf("sparsity"), &p.sparsity);
  m.ReadEnum("schedule", kSchedules, &p.schedule);
  if (m.Read("steps", &p.steps, Bounds::AtLeast(1))) {
    if (p.schedule == Schedule::kOneShot && p.steps != 1)
      diag_.Error(m.LineOf("steps"), m.PathOf("steps"),
                  "schedule oneshot prunes in one step, so steps must be 1 (use schedule linear or agp for " +
                      std::to_string(p.steps) + " steps)");
  } else if (!m.Has("steps")) {
    p.steps = p.schedule == Schedule::kOneShot ? 1 : 4;
  }
  m.ReadEnum("scope", kScopes, &p.scope);
  m.ReadEnum("score", kScores, &p.score);
  m.Read("recovery", &p.recovery);
  if (m.ReadEnum("recovery_method", kRecoveryMethods, &p.recovery_method) &&
      p.recovery_method == RecoveryMethod::kObs && !p.recovery)
    diag_.Error(m.LineOf("recovery_method"), m.PathOf("recovery_method"),
                "recovery_method obs chooses the mask during recovery: it needs prune.recovery: true");
  if (m.Read("token_mask", &p.token_mask) && p.token_mask.empty())
    diag_.Error(m.LineOf("token_mask"), m.PathOf("token_mask"), "must name a model input (or be left out)");
  m.Read("recovery_damping", &p.recovery_damping, Bounds::Above(0));
  m.Read("obs_block", &p.obs_block, Bounds::AtLeast(1));
  for (const char* key : {"token_mask", "recovery_damping", "obs_block"})
    if (m.Has(key) && !p.recovery)
      diag_.Error(m.LineOf(key), m.PathOf(key), std::string(key) + " shapes the recovery's fit: it needs prune.recovery: true");
  {
    MapReader c = m.Child("reconstruction");
    c.ReadEnum("method", kReconstructions, &p.reconstruction.method);
    c.Read("iterations", &p.reconstruction.iterations, Bounds::AtLeast(1));
    c.Read("learning_rate", &p.reconstruction.learning_rate, Bounds::OpenClosed(0, 1));
    c.Read("block_layers", &p.reconstruction.block_layers, Bounds::AtLeast(1));
    if (p.reconstruction.method == PruneReconstruction::Method::kBlock && !p.recovery)
      diag_.Error(c.LineOf("method"), c.PathOf("method"),
                  "block reconstruction starts from the least-squares fit: it needs prune.recovery: true");
    c.Finish();
  }
  m.Read("skip_first_last", &p.skip_first_last);
  m.Read("allow_partial", &p.allow_partial);

  // Item keys are known even when the list is empty (for suggestions elsewhere).
  diag_.AddKnownKeys("prune.layers[]", {"match", "sparsity", "structure"});
  const std::vector<YAML::Node> layers = m.List("layers");
  for (size_t i = 0; i < layers.size(); ++i) {
    const int line = yaml_fields::LineOf(layers[i]) > 0 ? yaml_fields::LineOf(layers[i]) : m.LineOf("layers");
    p.layers.emplace_back();
    ParsePruneLayer(layers[i], ItemPath(m.PathOf("layers"), i), line, &p.layers.back());
  }

  // `allocation: auto` or a written `sensitivity` = on; read either way so its keys are known.
  const bool allocation_written = m.ReadEnum("allocation", kAllocations, &p.allocation);
  const bool sensitivity_written = m.Has("sensitivity");
  if (sensitivity_written && !allocation_written) p.allocation = RecipePrune::Allocation::kAuto;
  MapReader s = m.Child("sensitivity");
  RecipePrune::Sensitivity sensitivity;
  budget_written_ = s.Has("budget");
  // Not written: no limit with `allocation: auto`, else (the older spelling,
  // `sensitivity` alone) DefaultMaxDrop(evaluate.metric), set by ParseEvaluate.
  if (!budget_written_ && allocation_written) {
    budget_written_ = true;
    sensitivity.budget = std::numeric_limits<double>::infinity();
  }
  s.Read("budget", &sensitivity.budget, Bounds::AtLeast(0));
  if (s.Read("sparsities", &sensitivity.sparsities, Bounds::ClosedOpen(0, 1)) && sensitivity.sparsities.empty())
    diag_.Error(s.LineOf("sparsities"), s.PathOf("sparsities"), "must list at least one sparsity to try");
  s.Read("recovery", &sensitivity.recovery);
  s.Finish();
  if (m.Has("retrain")) {
    RecipePrune::Retrain retrain;
    retrain.line = m.LineOf("retrain");
    MapReader t = m.Child("retrain");
    t.Read("shell", &retrain.shell);
    t.Read("timeout", &retrain.timeout, Bounds::OpenClosed(0, 1e9));
    ReadPath(t, "data", recipe_.base_dir, /*allow_empty=*/true, &retrain.data);
    if (t.Require("command")) {
      const YAML::Node c = t.Get("command");
      const std::string path = t.PathOf("command");
      if (c.IsSequence()) {
        t.Read("command", &retrain.command);
      } else {
        std::string line;
        if (t.Read("command", &line)) {
          if (retrain.shell) {
            retrain.command = {line};
          } else if (auto words = SplitCommandLine(line); words.ok()) {
            retrain.command = std::move(words).value();
          } else {
            diag_.Error(t.LineOf("command"), path, std::string(words.status().message()));
          }
        }
      }
      if (!diag_.FailedAt(path)) {
        RetrainCommandOptions check;
        check.command = retrain.command;
        check.shell = retrain.shell;
        if (Status st = CheckRetrainCommand(check); !st.ok()) diag_.Error(t.LineOf("command"), path, st.message());
      }
    }
    t.Finish();
    p.retrain = retrain;
  }
  if (p.allocation == RecipePrune::Allocation::kAuto) {
    p.sensitivity = sensitivity;
    if (allocation_written && p.scope == Scope::kGlobal && m.Has("scope"))
      diag_.Error(m.LineOf("scope"), m.PathOf("scope"),
                  "scope global ranks all layers by one threshold, and allocation auto sets each layer's sparsity "
                  "from a sensitivity scan: use one of them");
  }
  m.Finish();
}

void RecipeParser::ParseQuantize(MapReader m) {
  RecipeQuantize& q = recipe_.quantize;
  m.Read("enabled", &q.enabled);
  m.ReadEnum("precision", kPrecisions, &q.precision);
  m.ReadEnum("mode", kModes, &q.mode);

  MapReader i4 = m.Child("int4");
  if (i4.Read("block_size", &q.int4.block_size) && !CheckInt4BlockSizeValue(q.int4.block_size))
    diag_.Error(i4.LineOf("block_size"), i4.PathOf("block_size"),
                "must be 16, 32, 64, 128 or 256, got " + std::to_string(q.int4.block_size));
  i4.Read("symmetric", &q.int4.symmetric);
  i4.ReadEnum("method", kInt4Methods, &q.int4.method);
  i4.ReadEnum("format", kInt4Formats, &q.int4.format);
  i4.Finish();

  MapReader c = m.Child("calibration");
  // FP8 scales are max|x| / 448 by default (NVIDIA ModelOpt's FP8 calibration).
  if (q.precision == Precision::kFp8) q.calibration.method = CalibrationMethod::kMax;
  c.ReadEnum("method", Methods(), &q.calibration.method);
  c.Read("percentile", &q.calibration.percentile, Bounds::OpenClosed(0, 100));
  c.Read("bins", &q.calibration.bins, Bounds::Closed(128, 1 << 20));
  c.Read("symmetric", &q.calibration.symmetric);
  // A non-default percentile with another method is likely a forgotten
  // `method: percentile` (the default value itself is what --print writes).
  if (c.Has("percentile") && q.calibration.method != CalibrationMethod::kPercentile &&
      q.calibration.percentile != RecipeQuantize::Calibration().percentile && !diag_.FailedAt(c.PathOf("method")))
    diag_.Warning(c.LineOf("percentile"), c.PathOf("percentile"),
                  std::string("is not used by method ") + EnumNameIn(Methods(), q.calibration.method));
  c.Finish();
  if (ReadPath(m, "scales", recipe_.base_dir, /*allow_empty=*/true, &q.scales) && !q.scales.empty() && c.Has("method"))
    diag_.Warning(c.LineOf("method"), c.PathOf("method"), "is not used: the ranges come from quantize.scales");

  m.Read("per_channel", &q.per_channel);
  m.Read("fold_batchnorm", &q.fold_batchnorm);
  m.Read("gather_int8", &q.gather_int8);
  m.Read("bias_correction", &q.bias_correction);
  m.ReadEnum("rounding", kRoundings, &q.rounding);
  MapReader ar = m.Child("adaround");
  ar.Read("iterations", &q.adaround.iterations, Bounds::AtLeast(1));
  ar.Finish();
  if (m.Has("adaround") && q.rounding != RecipeQuantize::Rounding::kAdaRound && !diag_.FailedAt(m.PathOf("rounding")))
    diag_.Warning(m.LineOf("adaround"), m.PathOf("adaround"), "is not used: quantize.rounding is not adaround");
  m.Read("quantize_outputs", &q.quantize_outputs);

  diag_.AddKnownKeys("quantize.layers[]", {"match", "precision"});
  const std::vector<YAML::Node> layers = m.List("layers");
  for (size_t i = 0; i < layers.size(); ++i) {
    const std::string path = ItemPath(m.PathOf("layers"), i);
    const int line = yaml_fields::LineOf(layers[i]) > 0 ? yaml_fields::LineOf(layers[i]) : m.LineOf("layers");
    q.layers.emplace_back();
    if (!layers[i].IsMap()) {
      diag_.Error(line, path, "expected a map {match, precision}, got " + yaml_fields::DescribeNode(layers[i]));
      continue;
    }
    MapReader l(layers[i], path, line, &diag_);
    if (l.Require("match")) ReadPattern(l, "match", &q.layers.back().match);
    if (l.Require("precision")) l.ReadEnum("precision", kLayerPrecisions, &q.layers.back().precision);
    l.Finish();
  }

  if (m.Read("exclude_ops", &q.exclude_ops)) {
    for (size_t i = 0; i < q.exclude_ops.size(); ++i)
      if (q.exclude_ops[i].empty())
        diag_.Error(m.LineOf("exclude_ops"), ItemPath(m.PathOf("exclude_ops"), i), "must not be empty");
  }

  MapReader f = m.Child("fp16");
  if (f.Read("block_ops", &q.fp16.block_ops)) {
    for (size_t i = 0; i < q.fp16.block_ops.size(); ++i)
      if (q.fp16.block_ops[i].empty())
        diag_.Error(f.LineOf("block_ops"), ItemPath(f.PathOf("block_ops"), i), "must not be empty");
  }
  f.Read("keep_io_types", &q.fp16.keep_io_types);
  f.Finish();

  // quantize.smooth: written means on, unless it says enabled: false.
  MapReader sm = m.Child("smooth");
  if (m.Has("smooth")) q.smooth.enabled = true;
  sm.Read("enabled", &q.smooth.enabled);
  if (YAML::Node a = sm.Get("alpha"); a.IsDefined()) {
    if (a.IsScalar() && a.Scalar() == "auto") {
      q.smooth.auto_alpha = true;
    } else if (sm.Read("alpha", &q.smooth.alpha, Bounds::Closed(0, 1))) {
      q.smooth.auto_alpha = false;
    }
  }
  if (sm.Read("alphas", &q.smooth.alphas, Bounds::Closed(0, 1)) && q.smooth.alphas.empty())
    diag_.Error(sm.LineOf("alphas"), sm.PathOf("alphas"), "needs at least one value");
  sm.Read("holdout_every", &q.smooth.holdout_every, Bounds::AtLeast(2));
  sm.Read("min_outlier_ratio", &q.smooth.min_outlier_ratio, Bounds::AtLeast(1));
  sm.Finish();

  ParseSearch(m, c.Has("method") || c.Has("percentile") || c.Has("symmetric"));

  MapReader fb = m.Child("fallback");
  fb.Read("enabled", &q.fallback.enabled);
  fb.ReadEnum("to", kFallbackTargets, &q.fallback.to);
  if (YAML::Node ml = fb.Get("max_layers"); ml.IsDefined() && ml.IsScalar() && ml.Scalar() == "auto") {
    q.fallback.max_layers = 0;
  } else {
    fb.Read("max_layers", &q.fallback.max_layers, Bounds::AtLeast(1));
  }
  fb.ReadEnum("rank_by", kRankBy, &q.fallback.rank_by);
  fb.Finish();
  m.Finish();
}

// quantize.search: on | off | {enabled, budget_s, candidates}. Left out, on
// when the section writes none of what the search chooses;
// CheckAcrossSections turns it off where it does not apply.
void RecipeParser::ParseSearch(MapReader& m, bool calibration_written) {
  RecipeQuantize::Search& s = recipe_.quantize.search;
  s.enabled = !calibration_written && !m.Has("scales") && !m.Has("bias_correction") && !m.Has("quantize_outputs") &&
              !m.Has("smooth");
  YAML::Node v = m.Get("search");
  if (!v.IsDefined()) return;
  s.enabled = true;
  if (v.IsScalar()) {
    const std::string& text = v.Scalar();
    if (text == "on" || text == "true") return;
    if (text == "off" || text == "false") {
      s.enabled = false;
      return;
    }
    diag_.Error(m.LineOf("search"), m.PathOf("search"),
                "expected on, off or a map {enabled, budget_s, candidates}, got " + yaml_fields::DescribeNode(v));
    return;
  }
  MapReader sr = m.Child("search");
  sr.Read("enabled", &s.enabled);
  sr.Read("budget_s", &s.budget_s, Bounds::Above(0));
  if (sr.Read("candidates", &s.candidates)) {
    if (s.candidates.empty())
      diag_.Error(sr.LineOf("candidates"), sr.PathOf("candidates"), "must list at least one candidate");
    for (size_t i = 0; i < s.candidates.size(); ++i) {
      auto parsed = ParseSearchCandidate(s.candidates[i], recipe_.quantize.calibration);
      if (!parsed.ok())
        diag_.Error(sr.LineOf("candidates"), ItemPath(sr.PathOf("candidates"), i), parsed.status().message());
    }
  }
  sr.Finish();
}

void RecipeParser::ParseEvaluate(MapReader m) {
  RecipeEvaluate& e = recipe_.evaluate;
  // A recipe means the same on every machine: whether cuda can run here is
  // checked when the recipe runs (Runner: exit 2 naming why), not here.
  m.ReadEnum("backend", kBackends, &e.backend);
  e.metric_written = m.Has("metric");
  if (!e.metric_written) e.metric = recipe_.data.labels.empty() ? Metric::kAgreement : Metric::kTop1;
  m.ReadEnum("metric", kMetrics, &e.metric);
  m.Read("threads", &e.threads, Bounds::AtLeast(0));
  if (m.Read("output", &e.output) && e.output.empty())
    diag_.Error(m.LineOf("output"), m.PathOf("output"), "must name one of the model's outputs");
  e.boxes.enabled = MetricNeedsBoxes(e.metric);
  for (const auto& [key, field] : {std::pair<const char*, double*>{"box_score_threshold", &e.boxes.score_threshold},
                                   {"box_nms_iou", &e.boxes.nms_iou},
                                   {"box_match_iou", &e.boxes.match_iou}}) {
    if (m.Read(key, field, Bounds::OpenClosed(0, 1)) && !e.boxes.enabled) {
      diag_.Error(m.LineOf(key), m.PathOf(key), "applies to metric box_recall or class_score_sqnr only, not " +
                                                    std::string(MetricName(e.metric)));
    }
  }
  e.map.enabled = MetricNeedsMap(e.metric);
  if (m.Read("threshold", &e.map.threshold, Bounds::Open(0, 1)) && !e.map.enabled) {
    diag_.Error(m.LineOf("threshold"), m.PathOf("threshold"),
                "applies to metric map_iou only, not " + std::string(MetricName(e.metric)));
  }
  MapReader g = m.Child("gate");
  // Per-metric defaults in metric units (a mean cosine may drop 0.01, not a whole unit).
  if (!g.Has("max_drop")) e.gate.max_drop = DefaultMaxDrop(e.metric);
  if (recipe_.prune.sensitivity && !budget_written_) recipe_.prune.sensitivity->budget = DefaultMaxDrop(e.metric);
  g.Read("relative", &e.gate.relative);
  // A relative gate's max_drop is a fraction, so the absolute default (1 point)
  // would mean "any drop passes": make the user write it.
  if (e.gate.relative) g.Require("max_drop", "relative: true makes it a fraction of the FP32 metric, e.g. 0.01");
  g.Read("max_drop", &e.gate.max_drop, e.gate.relative ? Bounds::Closed(0, 1) : Bounds::AtLeast(0));
  // sqnr, class_score_sqnr and cosine are values against FP32: gated by their
  // floors, and by max_drop (from a 100 dB or 1.0 ceiling) only when it is written.
  const bool value_metric =
      e.metric == Metric::kSqnr || e.metric == Metric::kCosine || e.metric == Metric::kClassScoreSqnr;
  e.gate.check_drop = !value_metric || g.Has("max_drop");
  double floor = 0.0;
  if (g.Read("min_sqnr_db", &floor)) e.gate.min_sqnr_db = floor;
  if (g.Read("min_cosine", &floor, Bounds::Closed(-1, 1))) e.gate.min_cosine = floor;
  if (g.Read("min_top1", &floor, Bounds::Closed(0, 100))) {
    e.gate.min_top1 = floor;
    if (recipe_.data.labels.empty())
      diag_.Error(g.LineOf("min_top1"), g.PathOf("min_top1"), "needs data.labels (top-1 is measured against labels)");
  }
  if (!e.gate.check_drop && e.metric == Metric::kClassScoreSqnr) {
    diag_.Error(g.line(), g.PathOf("max_drop"),
                "metric class_score_sqnr is a value, not a drop: give max_drop from the 100 dB ceiling, e.g. "
                "max_drop: 80 for a floor of 20 dB");
  } else if (!e.gate.check_drop && !e.gate.min_sqnr_db && !e.gate.min_cosine && !e.gate.min_top1) {
    const bool sqnr = e.metric == Metric::kSqnr;
    diag_.Error(g.line(), g.PathOf(sqnr ? "min_sqnr_db" : "min_cosine"),
                std::string("metric ") + (sqnr ? "sqnr" : "cosine") + " is a value, not a drop: give a floor, e.g. " +
                    (sqnr ? "min_sqnr_db: 30" : "min_cosine: 0.99") + " (or max_drop from the " +
                    (sqnr ? "100 dB" : "1.0") + " ceiling)");
  }
  g.ReadEnum("failed_model", kFailedModels, &e.gate.failed_model);
  g.Finish();
  m.Finish();
}

void RecipeParser::ParseReport(MapReader m) {
  RecipeReport& rep = recipe_.report;
  const std::string& dir = recipe_.output.dir;
  rep.json = Resolve("report.json", dir);
  rep.junit = Resolve("junit.xml", dir);
  rep.markdown = Resolve("report.md", dir);
  ReadPath(m, "json", dir, /*allow_empty=*/true, &rep.json);
  ReadPath(m, "junit", dir, /*allow_empty=*/true, &rep.junit);
  ReadPath(m, "markdown", dir, /*allow_empty=*/true, &rep.markdown);
  m.Finish();
}

void RecipeParser::CheckAcrossSections() {
  // map_iou: the output SQNR of a mostly-zero probability map says little
  // about its IoU at the threshold (basic-pitch: bench/ACCURACY.md), so the
  // fallback ranks layers by the metric itself unless rank_by is written.
  if (recipe_.evaluate.metric == Metric::kMapIou && !diag_.Written("quantize.fallback.rank_by"))
    recipe_.quantize.fallback.rank_by = RankBy::kMetric;
  const Recipe& r = recipe_;
  const RecipeQuantize& q = r.quantize;
  const bool precision_ok = !diag_.FailedAt("quantize.precision");

  // A TensorRT calibration cache names its calibrator: only kl
  // (EntropyCalibration2) and max (MinMaxCalibration) have one, and TensorRT's
  // INT8 has no zero points. A written trt_cache that cannot be honest is an
  // error; the default one is then left out.
  if (!r.output.trt_cache.empty()) {
    std::string why;
    if (CalibrationTable::TensorRtCalibratorName(EnumNameIn(Methods(), q.calibration.method)).empty())
      why = std::string("TensorRT has no calibrator for quantize.calibration.method ") +
            EnumNameIn(Methods(), q.calibration.method) + " (kl is EntropyCalibration2, max is MinMaxCalibration)";
    else if (!q.calibration.symmetric)
      why = "quantize.calibration.symmetric is false: TensorRT's INT8 has no zero points, so an asymmetric table "
            "cannot be a TensorRT cache";
    else if (q.mode == RecipeQuantize::Mode::kDynamic)
      why = "quantize.mode is dynamic: the written model quantizes activations at run time, and a TensorRT cache "
            "would describe a different (static) INT8 model";
    else if (q.precision == Precision::kFp8)
      why = "quantize.precision is fp8: a TensorRT calibration cache holds INT8 scales (threshold / 127)";
    if (!why.empty() && trt_cache_line_ > 0) diag_.Error(trt_cache_line_, "output.trt_cache", why);
    else if (!why.empty()) recipe_.output.trt_cache.clear();
  }

  // Calibration data: INT8 needs activation ranges; pruning recovery and
  // activation scores need activations.
  std::string needs_calibration;
  if (q.enabled && precision_ok && q.precision != Precision::kFp16 && q.precision != Precision::kInt4)
    needs_calibration = std::string("quantize.precision is ") + EnumNameIn(kPrecisions, q.precision);
  else if (q.enabled && precision_ok && q.precision == Precision::kInt4 && q.int4.method != Int4Method::kRtn)
    needs_calibration = std::string("quantize.int4.method is ") + EnumNameIn(kInt4Methods, q.int4.method);
  else if (r.prune.enabled && r.prune.recovery)
    needs_calibration = "prune.recovery is true";
  else if (r.prune.enabled && r.prune.sensitivity && r.prune.sensitivity->recovery)
    needs_calibration = "prune.sensitivity.recovery is true";
  else if (r.prune.enabled && r.prune.score == Score::kActivation)
    needs_calibration = "prune.score is activation";
  if (!needs_calibration.empty() && !diag_.Written("data.calibration"))
    diag_.Error(diag_.LineFor("data"), "data.calibration", "required key is missing (" + needs_calibration + ")");

  if (q.enabled && precision_ok && q.precision == Precision::kFp16) {
    for (size_t i = 0; i < q.layers.size(); ++i) {
      const std::string path = "quantize.layers[" + std::to_string(i) + "].precision";
      if (q.layers[i].precision == LayerPrecision::kINT8 && !diag_.FailedAt(path))
        diag_.Error(diag_.LineFor(path), path, "int8 layers need quantize.precision int8 or mixed, not fp16");
    }
    if (q.fallback.enabled && q.fallback.to == LayerPrecision::kFP16 && diag_.Written("quantize.fallback.to"))
      diag_.Error(diag_.LineFor("quantize.fallback.to"), "quantize.fallback.to",
                  "fp16 is the model's precision already; fall back to fp32");
  }

  // int4: weights only, written as quantize.int4.format; nothing calibrates
  // (GPTQ / AWQ read the layers' inputs on data.calibration).
  const bool int4 = q.enabled && precision_ok && q.precision == Precision::kInt4;
  if (int4) {
    for (size_t i = 0; i < q.layers.size(); ++i) {
      const std::string path = "quantize.layers[" + std::to_string(i) + "].precision";
      if (q.layers[i].precision != LayerPrecision::kFP32 && !diag_.FailedAt(path))
        diag_.Error(diag_.LineFor(path), path, "quantize.precision int4 takes fp32 rules only (the layer stays float32)");
    }
    if (q.mode == RecipeQuantize::Mode::kDynamic && diag_.Written("quantize.mode"))
      diag_.Error(diag_.LineFor("quantize.mode"), "quantize.mode",
                  "dynamic quantizes activations to int8; quantize.precision int4 quantizes weights only");
    if (!q.scales.empty())
      diag_.Error(diag_.LineFor("quantize.scales"), "quantize.scales", "is not used by quantize.precision int4 (no calibration)");
    if (diag_.Written("output.format") && r.output.format != Format::kQdq && !diag_.FailedAt("output.format"))
      diag_.Error(diag_.LineFor("output.format"), "output.format",
                  "quantize.precision int4 is written as quantize.int4.format (matmulnbits or qdq); leave output.format out");
  } else if (diag_.Written("quantize.int4")) {
    diag_.Warning(diag_.LineFor("quantize.int4"), "quantize.int4", "is not used: quantize.precision is not int4");
  }

  if (q.enabled && q.smooth.enabled && diag_.Written("quantize.smooth")) {
    if (q.mode == RecipeQuantize::Mode::kDynamic || (precision_ok && (q.precision == Precision::kFp16 || int4)))
      diag_.Warning(diag_.LineFor("quantize.smooth"), "quantize.smooth",
                    "is not used: it smooths activations for static INT8 (quantize.mode static, precision int8 or mixed)");
    else if (!q.scales.empty())
      diag_.Error(diag_.LineFor("quantize.smooth"), "quantize.smooth",
                  "cannot use quantize.scales: smoothing changes the activations, whose ranges must be calibrated "
                  "after it");
  }

  // FP8: static QDQ with symmetric scales (zero point 0); weights' int8
  // error is what bias correction measures.
  if (q.enabled && precision_ok && q.precision == Precision::kFp8) {
    auto fp8_error = [&](const std::string& path, const std::string& what) {
      if (diag_.Written(path) && !diag_.FailedAt(path)) diag_.Error(diag_.LineFor(path), path, what);
    };
    if (q.mode == RecipeQuantize::Mode::kDynamic)
      fp8_error("quantize.mode", "dynamic quantizes to int8; quantize.precision fp8 is static");
    if (r.output.format == Format::kQOperator)
      fp8_error("output.format", "qoperator has no FP8 operators; quantize.precision fp8 writes qdq");
    if (!q.calibration.symmetric)
      fp8_error("quantize.calibration.symmetric", "must be true for quantize.precision fp8 (float8 zero points are 0)");
    if (q.bias_correction)
      fp8_error("quantize.bias_correction", "measures the error of int8 weights; not available with precision fp8");
    if (q.rounding == RecipeQuantize::Rounding::kAdaRound)
      fp8_error("quantize.rounding", "adaround rounds int8 weights; not available with precision fp8");
  }

  // The search chooses a static INT8 calibration: written where none runs,
  // an error; left out there, off.
  if (q.search.enabled) {
    const char* why = !q.enabled                                         ? "quantize.enabled is false"
                      : precision_ok && q.precision == Precision::kFp16 ? "quantize.precision fp16 does not calibrate"
                      : int4                                             ? "quantize.precision int4 does not calibrate"
                      : precision_ok && q.precision == Precision::kFp8  ? "quantize.precision is fp8"
                      : q.mode == RecipeQuantize::Mode::kDynamic         ? "quantize.mode dynamic does not calibrate"
                      : !q.scales.empty()                                ? "quantize.scales gives the ranges"
                                                                         : nullptr;
    if (why != nullptr) {
      recipe_.quantize.search.enabled = false;
      if (diag_.Written("quantize.search"))
        diag_.Error(diag_.LineFor("quantize.search"), "quantize.search",
                    std::string("cannot search: ") + why + " (it chooses a static INT8 calibration)");
    }
  }

  // AdaRound: static INT8 weights in QDQ form.
  if (q.enabled && q.rounding == RecipeQuantize::Rounding::kAdaRound && diag_.Written("quantize.rounding") &&
      !diag_.FailedAt("quantize.rounding")) {
    const char* why = precision_ok && (q.precision == Precision::kFp16 || q.precision == Precision::kInt4)
                          ? "rounds int8 weights; quantize.precision must be int8 or mixed"
                      : q.mode == RecipeQuantize::Mode::kDynamic ? "rounds static INT8 weights, not quantize.mode dynamic"
                      : r.output.format == Format::kQOperator    ? "is written in QDQ form only, not output.format qoperator"
                                                                 : nullptr;
    if (why != nullptr) diag_.Error(diag_.LineFor("quantize.rounding"), "quantize.rounding", std::string("adaround ") + why);
  }

  if (q.enabled && q.mode == RecipeQuantize::Mode::kDynamic && !diag_.FailedAt("quantize.mode")) {
    if (q.bias_correction && diag_.Written("quantize.bias_correction"))
      diag_.Warning(diag_.LineFor("quantize.bias_correction"), "quantize.bias_correction",
                    "is not used by quantize.mode dynamic (it corrects static INT8 Conv/Gemm layers)");
    if (precision_ok && q.precision == Precision::kFp16)
      diag_.Error(diag_.LineFor("quantize.mode"), "quantize.mode",
                  "dynamic quantizes to int8: it needs quantize.precision int8 or mixed, not fp16");
    if (diag_.Written("output.format") && r.output.format == Format::kQOperator && !diag_.FailedAt("output.format"))
      diag_.Error(diag_.LineFor("output.format"), "output.format",
                  "qoperator does not apply to quantize.mode dynamic (written as DynamicQuantizeLinear + "
                  "MatMulInteger); leave output.format out or set qdq");
  }

  // output.format follows the precision: fp16 models are written as fp16,
  // quantized ones as qdq or qoperator.
  RecipeOutput::Format& format = recipe_.output.format;
  const bool fp16_model = q.enabled && q.precision == Precision::kFp16;
  if (!diag_.Written("output.format")) {
    format = fp16_model ? Format::kFp16 : Format::kQdq;
  } else if (precision_ok && !diag_.FailedAt("output.format") && (format == Format::kFp16) != fp16_model) {
    const std::string what =
        format == Format::kFp16
            ? "fp16 needs quantize.precision fp16 (and quantize.enabled true)"
            : std::string(EnumNameIn(kFormats, format)) + " is an INT8 format; quantize.precision fp16 writes format fp16";
    diag_.Error(diag_.LineFor("output.format"), "output.format", what);
  }

  // Metrics against labels need labels.
  const Metric metric = r.evaluate.metric;
  if ((metric == Metric::kTop1 || metric == Metric::kTop5) && r.data.labels.empty() &&
      !diag_.FailedAt("data.labels")) {
    diag_.Error(diag_.LineFor("evaluate.metric"), "evaluate.metric",
                std::string(EnumNameIn(kMetrics, metric)) + " needs data.labels (or use metric agreement)");
  }

  // The input model is never overwritten, and no two outputs share a file.
  if (!r.model.empty() && SamePath(r.output.model, r.model))
    diag_.Error(diag_.LineFor("output.model"), "output.model",
                "is the input model " + r.model + "; sparq never overwrites its input");
  const std::vector<std::pair<std::string, std::string>> outputs = {
      {"output.model", r.output.model},   {"output.scales", r.output.scales}, {"output.trt_cache", r.output.trt_cache},
      {"report.json", r.report.json},     {"report.junit", r.report.junit},   {"report.markdown", r.report.markdown}};
  for (size_t i = 0; i < outputs.size(); ++i) {
    for (size_t j = 0; j < i; ++j) {
      if (outputs[i].second.empty() || outputs[i].second != outputs[j].second) continue;
      diag_.Error(diag_.LineFor(outputs[i].first), outputs[i].first,
                  "is the same file as " + outputs[j].first + " (" + outputs[i].second + ")");
    }
  }

  if (!r.data.calibration.empty() && r.data.calibration == r.data.evaluation)
    diag_.Warning(diag_.LineFor("data.evaluation"), "data.evaluation",
                  "is the calibration data too; accuracy measured on it overstates the compressed model's");
  if (!r.prune.enabled && !q.enabled)
    diag_.Warning(diag_.LineFor(""), "", "prune and quantize are both disabled: the run only evaluates the model");
}

void RecipeParser::CheckFiles() {
  const Recipe& r = recipe_;
  std::error_code ec;
  if (!r.model.empty()) {
    if (!fs::exists(r.model, ec))
      diag_.Error(diag_.LineFor("model"), "model", "file not found: " + r.model);
    else if (!fs::is_regular_file(r.model, ec))
      diag_.Error(diag_.LineFor("model"), "model", "is not a file: " + r.model);
  }
  const std::pair<const char*, const std::string*> data_files[] = {{"data.calibration", &r.data.calibration},
                                                                   {"data.evaluation", &r.data.evaluation}};
  for (const auto& [key, path] : data_files) {
    if (path->empty()) continue;
    if (!fs::exists(*path, ec))
      diag_.Error(diag_.LineFor(key), key, "file or folder not found: " + *path);
    else if (!fs::is_directory(*path, ec) && !HasDataExtension(*path))
      diag_.Error(diag_.LineFor(key), key, "expected a .npz or .npy file or a folder of .npy files: " + *path);
  }
  if (!r.data.labels.empty()) {
    if (!fs::exists(r.data.labels, ec))
      diag_.Error(diag_.LineFor("data.labels"), "data.labels", "file not found: " + r.data.labels);
    else if (fs::is_directory(r.data.labels, ec) || fs::path(r.data.labels).extension() != ".npy")
      diag_.Error(diag_.LineFor("data.labels"), "data.labels", "expected a .npy file: " + r.data.labels);
  }
  if (!r.quantize.scales.empty() && !fs::is_regular_file(r.quantize.scales, ec))
    diag_.Error(diag_.LineFor("quantize.scales"), "quantize.scales", "file not found: " + r.quantize.scales);
  if (!r.prune.kernel_table.empty() && !fs::is_regular_file(r.prune.kernel_table, ec))
    diag_.Error(diag_.LineFor("prune.kernel_table"), "prune.kernel_table", "file not found: " + r.prune.kernel_table);
  if (fs::exists(r.output.dir, ec) && !fs::is_directory(r.output.dir, ec))
    diag_.Error(diag_.LineFor("output.dir"), "output.dir", "exists and is not a folder: " + r.output.dir);
}

}  // namespace

// ---------------------------------------------------------------------------
// Public entry points

StatusOr<Recipe> ParseRecipe(const std::string& yaml_text, const std::string& base_dir,
                             const std::string& source_name, const RecipeParseOptions& options) {
  try {
    RecipeParser parser(base_dir, source_name, options);
    return parser.Parse(yaml_text);
  } catch (const std::exception& e) {  // yaml-cpp and std::filesystem throw; the API does not
    return Status::Internal((source_name.empty() ? "<recipe>" : source_name) + ": while parsing: " + e.what());
  }
}

StatusOr<Recipe> LoadRecipe(const std::string& path, const RecipeParseOptions& options) {
  std::error_code ec;
  if (!fs::exists(path, ec)) return Status::NotFound("recipe file not found: " + path);
  if (fs::is_directory(path, ec)) return Status::InvalidArgument("recipe path is a folder, not a file: " + path);
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  if (!in.good() && !in.eof()) return Status::IOError("cannot read recipe file " + path);
  const fs::path folder = fs::absolute(path, ec).parent_path();
  return ParseRecipe(text.str(), folder.string(), path, options);
}

const char* RecipeEnumName(RecipeOutput::Format v) { return EnumNameIn(kFormats, v); }
const char* RecipeEnumName(RecipeData::Layout v) { return EnumNameIn(kLayouts, v); }
const char* RecipeEnumName(RecipePrune::Schedule v) { return EnumNameIn(kSchedules, v); }
const char* RecipeEnumName(RecipePrune::Scope v) { return EnumNameIn(kScopes, v); }
const char* RecipeEnumName(RecipePrune::Score v) { return EnumNameIn(kScores, v); }
const char* RecipeEnumName(RecipePrune::Allocation v) { return EnumNameIn(kAllocations, v); }
const char* RecipeEnumName(RecipeQuantize::Precision v) { return EnumNameIn(kPrecisions, v); }
const char* RecipeEnumName(RecipeQuantize::LayerPrecision v) { return EnumNameIn(kLayerPrecisions, v); }
const char* RecipeEnumName(RecipeQuantize::RankBy v) { return EnumNameIn(kRankBy, v); }
const char* RecipeEnumName(RecipeQuantize::Mode v) { return EnumNameIn(kModes, v); }
const char* RecipeEnumName(RecipeEvaluate::Backend v) { return EnumNameIn(kBackends, v); }
const char* RecipeEnumName(RecipeEvaluate::Gate::FailedModel v) { return EnumNameIn(kFailedModels, v); }
const char* RecipeEnumName(RecipeEvaluate::Metric v) { return EnumNameIn(kMetrics, v); }
const char* RecipeEnumName(CalibrationMethod v) { return EnumNameIn(Methods(), v); }

}  // namespace sparq
