// Recipes: the typed form of the YAML file that `sparq run recipe.yaml` reads.
//
//   recipe.yaml ──ParseRecipe──> Recipe ──> prune ─> calibrate ─> quantize ─> write
//                  (strict)                                  ─> evaluate ─> gate ─> reports
//
// The parser is strict: an unknown key, a value of the wrong type, a value out
// of range or an unknown enum spelling is an error; nothing is clamped or
// ignored. All errors are collected and returned together, one per line:
//
//   recipes/x.yaml:12: quantize.calibraton: unknown key (did you mean 'calibration'?)
//   recipes/x.yaml:20: prune.sparsity: 1.5 is out of range: must be in [0, 1)
//
// Every field's default is written once, here, on the field. recipes/README.md
// documents the YAML spelling of every key for users.
//
// Paths. The recipe stores absolute, normalized paths:
//   - inputs (model, data.calibration, data.evaluation, data.labels) and
//     output.dir resolve against the recipe file's folder (Recipe::base_dir);
//   - files the run writes (output.model, output.scales, output.trt_cache,
//     report.json/junit/markdown) resolve against output.dir.
// An empty string in an optional output path means "do not write this file".
#pragma once

#include <cstdint>
#include <optional>
#include <map>
#include <string>
#include <vector>

#include "sparq/adaround.h"
#include "sparq/calibrate.h"  // CalibrationMethod
#include "sparq/dataset.h"    // Preprocess
#include "sparq/evaluate.h"   // Metric
#include "sparq/export.h"
#include "sparq/prune.h"      // PruneStructure
#include "sparq/quantize.h"   // Fp16Options
#include "sparq/search.h"     // DefaultSearchCandidates
#include "sparq/smooth.h"     // SmoothOptions
#include "sparq/status.h"

namespace sparq {

// Where the compressed model and the side files go (YAML section `output`).
struct SPARQ_API RecipeOutput {
  enum class Format {
    kQdq,        // QuantizeLinear/DequantizeLinear pairs around float ops (TensorRT, ORT)
    kQOperator,  // integer operators: QLinearConv, QLinearMatMul, ...
    kFp16,       // a float16 model; only with quantize.precision fp16
  };

  std::string model;      // default <dir>/<model stem>.sparq.onnx; never the input model
  std::string dir;        // default <recipe folder>/sparq-out
  Format format = Format::kQdq;  // default qdq; fp16 when quantize.precision is fp16
  std::string scales;     // JSON calibration table; default <dir>/scales.json; "" = not written
  std::string trt_cache;  // TensorRT calibration cache; default <dir>/calib.cache (left out when the
                          // method or an asymmetric table has no TensorRT calibrator); "" = not written
  std::string trt_version = "8601";  // the cache header's TensorRT version (8601 = 8.6.1), digits
  bool external_data = false;  // weights in a <model>.data file beside the model
  bool sparse_initializers = false;  // store sparse weights as ONNX sparse_initializer when smaller
  bool overwrite = false;      // false: refuse to replace an existing output file
};

// Data to calibrate and evaluate with (YAML section `data`).
struct SPARQ_API RecipeData {
  using Layout = DataLayout;
  // Per-sample transform applied to each batch as it is read (the library's
  // own type, sparq/dataset.h):
  //   x = (x * scale - mean[c]) / stddev[c], after NHWC -> NCHW when layout is NHWC.
  using Preprocess = sparq::Preprocess;

  // .npz, .npy or a folder of .npy; required for int8 and mixed, and for
  // pruning with recovery or activation scores.
  std::string calibration;
  std::string evaluation;   // .npz, .npy or a folder of .npy; required
  std::string labels;       // .npy of class indices; default none (empty)
  std::string input;        // model input fed with the data; default "" = the model's only input
  int64_t calibration_samples = 512;  // 0 = all samples
  int64_t evaluation_samples = 0;     // 0 = all samples
  int64_t batch_size = 32;            // >= 1
  Preprocess preprocess;
  // Inputs pinned to one value for every batch (`constants: {sr: 16000}`,
  // a list for a 1-D input): DatasetOptions::constants. Default none.
  std::map<std::string, std::vector<double>> constants;
};

// Weight pruning (YAML section `prune`).
struct SPARQ_API RecipePrune {
  // The shape of the zeros. Written in YAML as "unstructured", "block4x4"
  // (block RxC), "2:4" (N:M: N nonzeros kept in every M consecutive weights),
  // "channel" or "auto".
  // The shape of the zeros ("unstructured", "block4x4", "2:4", "channel",
  // "auto"): the pruning library's own type.
  using Structure = PruneStructure;
  // The pruning library's own enums and names (sparq/prune.h):
  using Schedule = PruneSchedule;  // oneshot | linear | agp (Zhu & Gupta's cubic ramp)
  using Scope = PruneScope;        // global (one threshold for all layers) | layer
  using Score = PruneScore;        // magnitude | l1 | l2 | activation

  // A per-layer override: the first rule whose `match` matches a node wins.
  struct LayerRule {
    std::string match;                    // node name or regex (see LayerMatches)
    std::optional<double> sparsity;       // default: prune.sparsity
    std::optional<Structure> structure;   // default: prune.structure
    int line = 0;                         // in the recipe file, for messages
  };
  // How the target is shared among the layers: every layer at `sparsity`
  // (or one global threshold, scope global), or per-layer sparsities from a
  // sensitivity scan that zero `sparsity` of the pruned layers' weights where
  // the scan says it costs least (AllocateSparsity).
  enum class Allocation { kUniform, kAuto };
  // Per-layer sparsity chosen by a sensitivity scan instead of one target.
  struct Sensitivity {
    // Max metric drop allowed (same units as evaluate.gate.max_drop), >= 0.
    // Not written: no limit with `allocation: auto` (the target is met);
    // DefaultMaxDrop(evaluate.metric) when only `sensitivity` is written.
    double budget = 1.0;
    std::vector<double> sparsities = {0.25, 0.5, 0.75, 0.9};  // tried per layer, each in [0, 1)
    // Re-fit the scanned layer on calibration data before measuring it, as
    // `recovery` will (slower: one least-squares fit per point).
    bool recovery = false;
  };

  // The user's training between pruning steps (YAML `prune.retrain`, present
  // = on): see RetrainCommandOptions (sparq/prune_retrain.h).
  struct Retrain {
    // argv with {placeholders}; a YAML string is split into words like a
    // shell's (quotes, backslashes), nothing expanded. With `shell`: one string.
    std::vector<std::string> command;
    bool shell = false;      // run by /bin/sh -c
    double timeout = 3600;   // seconds, > 0
    std::string data;        // the value of {data}; "" = data.calibration
    int line = 0;            // of `retrain` in the recipe, for messages
  };

  bool enabled = false;
  Structure structure;       // default unstructured
  double sparsity = 0.5;     // in [0, 1); with N:M it is 1 - N/M (or 0: leave dense)
  Schedule schedule = Schedule::kOneShot;
  int steps = 1;             // >= 1; default 1 for oneshot (which allows only 1), 4 otherwise
  Scope scope = Scope::kLayer;
  Score score = Score::kMagnitude;
  bool recovery = true;         // re-fit kept weights on calibration data after pruning
  // How `recovery` re-fits (YAML `prune.recovery_method`): least_squares
  // (default) or obs (the mask of unstructured and N:M layers chosen again by
  // OBS / SparseGPT, see RecoveryMethod in sparq/prune_recovery.h).
  RecoveryMethod recovery_method = RecoveryMethod::kLeastSquares;
  // The fit's data and solve (YAML `prune.token_mask`, `prune.recovery_damping`,
  // `prune.obs_block`): RecoveryOptions::token_mask, damping, obs_block.
  std::string token_mask;
  double recovery_damping = RecoveryOptions().damping;
  int64_t obs_block = RecoveryOptions().obs_block;
  // Block reconstruction after `recovery` (YAML `prune.reconstruction`); default none.
  PruneReconstruction reconstruction;
  bool skip_first_last = true;  // leave the first and last weighted layers dense
  // false: pruning that stops before the requested sparsity (the gate would
  // not allow the next step) fails the run (exit 1); true: a warning.
  bool allow_partial = false;
  std::vector<LayerRule> layers;
  // kAuto whenever `sensitivity` is set; `sensitivity` written alone implies it.
  Allocation allocation = Allocation::kUniform;
  std::optional<Sensitivity> sensitivity;  // default none: every layer gets `sparsity`
  std::optional<Retrain> retrain;          // default none: only `recovery`
  // structure auto: the kernel benchmark's speed table (bench/kernel_speedups.csv
  // format); "" = none, auto then takes the first structure that fits.
  std::string kernel_table;
};

// Quantization (YAML section `quantize`).
struct SPARQ_API RecipeQuantize {
  enum class Precision {
    kInt8,   // quantizable ops in INT8, the rest FP32
    kFp16,   // the whole model in FP16 except fp16.block_ops; no calibration
    kMixed,  // quantizable ops in INT8, the rest FP16 (except fp16.block_ops)
    kInt4,   // MatMul/Gemm weights in INT4 blocks (quantize.int4), activations float; no calibration
    kFp8,    // quantizable ops in FP8 E4M3 Q/DQ (static, QDQ, opset 19; QuantizeOptions::fp8), the rest FP32
  };
  using LayerPrecision = ::sparq::Precision;  // int8 | fp16 | fp32: the quantizer's own enum
  enum class Mode {
    kStatic,   // activation scales from calibration (QDQ or QOperator)
    kDynamic,  // activations quantized at run time (DynamicQuantizeLinear + MatMulInteger; MatMul/Gemm only)
  };
  enum class RankBy { kSqnr, kMetric, kOutputSqnr };  // FallbackRanking, by the recipe's names

  // method (default kl), percentile (99.99, in (0, 100]), bins (2048, >= 128
  // in recipes), symmetric (true): the calibrator's own struct (sparq/calibrate.h).
  using Calibration = CalibrationMethodOptions;
  // A per-layer override: the first rule whose `match` matches a node wins.
  // The quantizer's own rule (sparq/quantize.h); in YAML `precision` is
  // required, so its default never applies to a recipe.
  using LayerRule = ::sparq::LayerRule;
  // block_ops (default DefaultFp16BlockOps()) and keep_io_types (default
  // true): the quantizer's own struct, so the API and `sparq run` share
  // one default (sparq/quantize.h).
  using Fp16 = Fp16Options;
  // When the gate fails, move the layers that hurt most out of INT8, one at a
  // time, until the gate passes or max_layers were moved.
  struct Fallback {
    bool enabled = true;
    LayerPrecision to = LayerPrecision::kFP32;  // fp16 or fp32
    int max_layers = 0;                         // >= 1; 0 = auto (FallbackLayerLimit)
    // output_sqnr: the model output's SQNR with each layer alone in INT8;
    // metric: the gate's metric with each layer alone in INT8; sqnr: each
    // layer's own output SQNR (sparq/fallback.h, FallbackRanking).
    RankBy rank_by = RankBy::kOutputSqnr;
  };

  // Static INT8: try a few calibrations and switches on held-out calibration
  // batches and keep the best (sparq/search.h), then calibrate, quantize and
  // fall back as usual with it. In YAML `search: on | off | {budget_s,
  // candidates}`; left out, the parser turns it on when the section writes
  // none of what the search chooses (calibration method, percentile or
  // symmetric, scales, bias_correction, quantize_outputs, smooth) and the
  // run is static INT8/mixed. A Recipe built in code has it off.
  struct Search {
    bool enabled = false;
    double budget_s = 300.0;  // > 0: no candidate starts after this many seconds (the first always runs)
    std::vector<std::string> candidates = DefaultSearchCandidates();  // SearchCandidate spellings
  };

  // precision int4 (YAML `quantize.int4`): block_size (32; 16/32/64/128/256),
  // symmetric (false, onnxruntime's default), method (rtn), format
  // (matmulnbits | qdq): the quantizer's own struct (sparq/quantize.h);
  // `layers` rules with precision fp32 keep a layer float.
  using Int4 = Int4Options;

  bool enabled = true;
  Precision precision = Precision::kInt8;
  Mode mode = Mode::kStatic;  // int8/mixed only
  Int4 int4;                  // precision int4 only
  Calibration calibration;
  Search search;
  // A calibration table written earlier (`sparq calibrate`, a run's
  // output.scales) to quantize with instead of calibrating; "" = calibrate.
  // Checked against the model: every tensor the quantizer needs must be in it.
  std::string scales;
  bool per_channel = true;     // per-output-channel weight scales
  bool fold_batchnorm = true;  // fold BatchNormalization into the preceding Conv/Gemm
  bool gather_int8 = true;     // int8/mixed: Gather tables (embeddings) of >= 4096 values stored in int8
  // int8/mixed, static: subtract from each INT8 Conv/Gemm bias the mean error
  // its int8 weights add, measured on data.calibration (sparq/bias_correction.h).
  bool bias_correction = false;
  // int8/mixed, static, QDQ: how weights round to int8: nearest, or AdaRound
  // (per layer, up or down as best keeps the layer's output on
  // data.calibration; sparq/adaround.h). `quantize.adaround` sets its
  // iterations (AdaRoundOptions' other fields keep their defaults).
  enum class Rounding { kNearest, kAdaRound };
  Rounding rounding = Rounding::kNearest;
  AdaRoundOptions adaround;
  // int8/mixed, static: SmoothQuant-style migration of activation outlier
  // channels into the MatMul/Gemm weights before calibrating, alpha fixed or
  // searched on held-out calibration batches (sparq/smooth.h). Off by default.
  // Writing the section turns it on unless it says `enabled: false`.
  // int8/mixed, static, QDQ: Q/DQ on each INT8 layer's output too (and INT8
  // flowing through Add/Concat/pooling); false: on layer inputs only
  // (QuantizeOptions::quantize_outputs).
  bool quantize_outputs = true;
  using Smooth = SmoothOptions;
  Smooth smooth;
  std::vector<LayerRule> layers;
  // Op types kept in float32 (QuantizeOptions::exclude_ops): any non-empty
  // name; one the model lacks is a warning in the run.
  std::vector<std::string> exclude_ops;
  Fp16 fp16;
  Fallback fallback;
};

// The evaluate.gate.max_drop (and prune.sensitivity.budget) a recipe gets
// when it writes none, chosen per metric as a user of that kind of model
// would accept: 1 point of the percent metrics (top1, top5, agreement,
// top5_overlap, ctc_accuracy, box_recall, map_iou); 0.01 of mean_cosine (an embedding
// model's mean cosine with FP32 >= 0.99: a whole unit would pass a collapse
// to 0.56); 1 for sqnr, cosine and class_score_sqnr, which are gated by their
// floors unless max_drop is written.
constexpr double DefaultMaxDrop(Metric metric) { return metric == Metric::kMeanCosine ? 0.01 : 1.0; }

// FP32-vs-compressed evaluation and the pass/fail gate (YAML section `evaluate`).
struct SPARQ_API RecipeEvaluate {
  enum class Backend { kCpu, kCuda, kAuto };
  // top1 | top5 (need data.labels) | agreement | sqnr | cosine | top5_overlap |
  // mean_cosine | ctc_accuracy | box_recall | class_score_sqnr | map_iou (against the FP32
  // model): the library's own type and names (sparq/evaluate.h).
  using Metric = sparq::Metric;
  struct Gate {
    // Metric points (dB for sqnr, cosine units for mean_cosine), >= 0; when
    // relative a fraction in [0, 1], and then required in YAML (the absolute
    // default would let anything pass). A recipe that writes none gets
    // DefaultMaxDrop(metric).
    double max_drop = 1.0;
    bool relative = false;  // true: max_drop is a fraction of the FP32 metric
    // False when max_drop does not apply: metric sqnr or cosine without a
    // written max_drop (they are values against FP32, gated by their floors).
    bool check_drop = true;
    // Absolute floors on the compressed model, checked besides max_drop; unset = none.
    std::optional<double> min_sqnr_db;  // output 0 against FP32, dB
    std::optional<double> min_cosine;   // output 0 against FP32, in [-1, 1]
    std::optional<double> min_top1;     // % of samples, in [0, 100]; needs data.labels
    // What a failed gate leaves at output.model: nothing there in either case.
    enum class FailedModel {
      kRename,   // the model is kept as <stem>.FAILED.onnx
      kDiscard,  // no model is kept
    };
    FailedModel failed_model = FailedModel::kRename;
  };

  Backend backend = Backend::kCpu;
  Metric metric = Metric::kAgreement;  // default top1 when data.labels is given, else agreement
  // The recipe writes `metric` (else the default above, which a run warns
  // about when the output it reads is not class scores [N, classes]).
  bool metric_written = false;
  int threads = 0;  // >= 0; 0 = all cores
  // Box decoding for metric box_recall / class_score_sqnr (enabled by those
  // metrics; keys box_score_threshold, box_nms_iou, box_match_iou).
  BoxOptions boxes;
  // The thresholded map of metric map_iou (enabled by that metric; key
  // threshold, in (0, 1), default 0.5).
  MapOptions map;
  // The model output that `metric`, the gate, the search and the fallback's
  // metric read (EvaluatorOptions::output); "" = the model's first output (a
  // model with several outputs then gets a warning naming them).
  std::string output;
  Gate gate;
};

// Report files (YAML section `report`); "" = not written.
struct SPARQ_API RecipeReport {
  std::string json;      // default <output.dir>/report.json
  std::string junit;     // default <output.dir>/junit.xml
  std::string markdown;  // default <output.dir>/report.md
};

struct SPARQ_API Recipe {
  static constexpr int kVersion = 1;

  int version = kVersion;  // YAML `version`; only 1 is read
  std::string name;        // default the recipe file's stem (the model's stem without a file)
  std::string model;       // the FP32 ONNX model; required; never overwritten
  RecipeOutput output;
  RecipeData data;
  RecipePrune prune;
  RecipeQuantize quantize;
  RecipeEvaluate evaluate;
  RecipeReport report;

  std::string base_dir;  // absolute folder relative paths were resolved against
  std::string source;    // the recipe file (or the source name given to ParseRecipe)
  // Valid but suspicious settings ("<file>:<line>: <key.path>: ..."), e.g. a
  // percentile that the chosen calibration method does not use.
  std::vector<std::string> warnings;
};

struct SPARQ_API RecipeParseOptions {
  // Check that model, data.calibration, data.evaluation and data.labels exist.
  // `sparq recipe check --no-files` and tests turn it off.
  bool check_files = true;
  // `sparq run --set KEY=VALUE`: each "dotted.key.path=value" sets that key
  // of the YAML document before it is parsed, so every check applies to it.
  // VALUE is YAML as written after "key:" (`2`, `max`, `[Softmax, Add]`);
  // missing maps on the way are created; "[i]" selects a list item, one past
  // the end appends ("quantize.layers[1].precision=fp16"). Applied in
  // order (a later one wins). Errors about a key set here, unknown keys with
  // "did you mean" included, name the "--set KEY=VALUE" instead of a line;
  // a malformed override is InvalidArgument naming it.
  std::vector<std::string> overrides;
};

// Reads and parses the recipe at `path`; relative paths resolve against its
// folder. Errors: NotFound/IOError when the file cannot be read; otherwise
// those of ParseRecipe.
SPARQ_API StatusOr<Recipe> LoadRecipe(const std::string& path, const RecipeParseOptions& options = {});

// Parses recipe YAML. `base_dir` is the folder relative paths resolve against
// ("" = the current directory); `source_name` names the recipe in messages.
// Returns InvalidArgument holding every error found, one per line, each
// "<source>:<line>: <key.path>: <what is wrong>" (syntax errors:
// "<source>:<line>:<column>: YAML syntax error: ...").
SPARQ_API StatusOr<Recipe> ParseRecipe(const std::string& yaml_text, const std::string& base_dir,
                             const std::string& source_name, const RecipeParseOptions& options = {});

// The effective recipe as YAML: every key with its value, defaults filled,
// paths absolute. Parsing it back gives the same Recipe (except base_dir,
// source and warnings).
SPARQ_API std::string RecipeToYaml(const Recipe& recipe);

// True when a layer rule's `match` selects the node: the pattern equals the
// name, or the pattern as an ECMAScript regex matches the whole name. Patterns
// are validated by the parser; an invalid one matches only its exact text.
SPARQ_API bool LayerMatches(const std::string& pattern, const std::string& node_name);

// Every file the run writes (model, its external data, scales, TensorRT cache,
// reports), skipping disabled ones.
SPARQ_API std::vector<std::string> RecipeOutputFiles(const Recipe& recipe);

// OK when the run may write its outputs: overwrite is on or none of them
// exists. Otherwise InvalidArgument listing the existing files.
SPARQ_API Status CheckOutputsWritable(const Recipe& recipe);

// The quantizer's options a recipe stands for (sections quantize and
// output.format; quantize.enabled is the caller's to apply).
SPARQ_API QuantizeOptions ToQuantizeOptions(const Recipe& recipe);

// The YAML spellings of the recipe's enum values ("qdq", "int8", "NHWC", ...).
SPARQ_API const char* RecipeEnumName(RecipeOutput::Format v);
SPARQ_API const char* RecipeEnumName(RecipeData::Layout v);
SPARQ_API const char* RecipeEnumName(RecipePrune::Schedule v);
SPARQ_API const char* RecipeEnumName(RecipePrune::Scope v);
SPARQ_API const char* RecipeEnumName(RecipePrune::Score v);
SPARQ_API const char* RecipeEnumName(RecipePrune::Allocation v);
SPARQ_API const char* RecipeEnumName(RecipeQuantize::Precision v);
SPARQ_API const char* RecipeEnumName(RecipeQuantize::LayerPrecision v);
SPARQ_API const char* RecipeEnumName(RecipeQuantize::RankBy v);
SPARQ_API const char* RecipeEnumName(RecipeQuantize::Mode v);
SPARQ_API const char* RecipeEnumName(RecipeEvaluate::Backend v);
SPARQ_API const char* RecipeEnumName(RecipeEvaluate::Metric v);
SPARQ_API const char* RecipeEnumName(RecipeEvaluate::Gate::FailedModel v);
SPARQ_API const char* RecipeEnumName(CalibrationMethod v);

}  // namespace sparq
