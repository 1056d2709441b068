// Runs models over a dataset: accuracy, agreement with a reference model,
// throughput (what `sparq eval` prints), and the metrics a gate judges by.
//
//   Evaluator::Create(reference, data) ── runs the reference once, keeps its
//        │                                graph outputs (up to a byte cap)
//        ├─ Evaluate(candidate 1) ──> EvalReport (vs the kept outputs)
//        ├─ Evaluate(candidate 2) ──> ...      (no model file is written or read)
//
// Datasets: see sparq/dataset.h (OpenDataset). The path-based Evaluate below
// is `sparq eval`: it loads the files and uses an Evaluator.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "sparq/dataset.h"
#include "sparq/executor.h"  // NodeKernel
#include "sparq/export.h"
#include "sparq/graph.h"
#include "sparq/kernel_table.h"
#include "sparq/metrics.h"  // ReferenceMetrics
#include "sparq/status.h"

namespace sparq {

// Passed to EvalOptions::on_progress after each batch.
struct SPARQ_API EvalProgress {
  int64_t done = 0;      // samples evaluated so far
  int64_t total = -1;    // samples to evaluate; -1 when not known in advance
  double seconds = 0.0;  // wall time since the start
  // Set to true in the callback to stop: Evaluate returns StatusCode::kCancelled
  // before the next batch and writes nothing (no save_outputs file).
  bool cancel = false;
};

struct SPARQ_API EvalOptions {
  std::string inputs;        // dataset path (required)
  std::string labels;        // .npy (or one-array .npz) of integer class ids; "" = none
  std::string reference;     // reference model to compare against; "" = none
  // .npz to write every graph output to, samples along the first axis of
  // each array (an output declared [2, batch, 128] is written [S, 2, 128]);
  // "" = none
  std::string save_outputs;
  // Samples per run. 0: the model's fixed first input dim, else 1. A value
  // that contradicts a fixed first dim is InvalidArgument.
  int64_t batch = 0;
  int threads = 0;   // executor threads; 0 = one per hardware thread
  // Where the model runs (ExecutorOptions::backend): "cpu" (default),
  // "cuda", "auto" (cuda when a GPU is there, else cpu, said in the report),
  // or another registered backend. "cuda" without a GPU fails with a clear
  // error. Ignored with reference_kernels.
  std::string backend = "cpu";
  bool plan_memory = true;  // ExecutorOptions::plan_memory (`--no-memory-plan` turns it off, for comparisons)
  // ExecutorOptions::allow_tf32 (`--tf32`): float32 GEMMs and convolutions
  // as TF32 on a GPU backend; said in the report. The CPU ignores it.
  bool allow_tf32 = false;
  int64_t limit = 0; // evaluate at most this many samples; 0 = all
  // Inputs pinned to one value for every batch (DatasetOptions::constants,
  // `sparq eval --constant name=value`); default none.
  std::map<std::string, std::vector<double>> constants;
  // Optional; called on the evaluating thread after each batch. A callback
  // taking `const EvalProgress&` fits too (it cannot cancel).
  std::function<void(EvalProgress&)> on_progress;
  bool list_kernels = false;  // fill EvalReport::node_kernels (`sparq eval --verbose`)
  bool profile = false;       // fill EvalReport::op_profile (`sparq eval --profile`)
  // Batches run first and left out of the latency percentiles (their time
  // still counts in model_seconds and throughput). 0 = none. Must be >= 0.
  int64_t warmup = 1;
  // Chrome trace JSON (chrome://tracing, Perfetto) to write with one
  // complete event per node run; "" = none. Checked like save_outputs: a
  // .json file in an existing folder that is not one of the inputs.
  std::string trace;
  // Only the reference kernels (the "reference" backend), running a QDQ
  // model as its float graph (GraphProfile::kAsWritten); otherwise the
  // backend's fast kernels, with QDQ patterns fused into integer operators
  // (GraphProfile::kDeployment).
  bool reference_kernels = false;
  // With reference_kernels: run the graph the fast kernels run (QDQ patterns
  // fused into integer operators, activations folded into convolutions) on
  // the reference kernels, the check that each fast kernel gives the
  // reference's result for the same operator (integer operators bit for bit).
  bool fused_graph = false;
  // Run float16 models in float32 with no rounding inside the graph
  // (Float16Execution::kFloat32): no float16 rounding and no overflow to Inf
  // between nodes, so outputs differ from a float16 runtime's and the
  // non-finite check cannot see float16 overflow. Off (default): the fast
  // float32 kernels with every float16 value rounded to float16 between
  // operators (Float16Execution::kRounded), as onnxruntime computes float16
  // on a CPU; with reference_kernels, float16 ops on the reference kernels.
  bool fp16_as_fp32 = false;
  // Kernel speed table CSV (sparq/kernel_table.h) deciding which pruned INT8
  // layers run sparse kernels (ExecutorOptions::kernel_table); "" = the table
  // compiled in from bench/kernel_speedups.csv.
  std::string kernel_table;
  // With a reference: decode output 0 as a YOLO-style detector's and match
  // its boxes with the reference's (EvalReport::task; `sparq eval --boxes`).
  BoxOptions boxes;
  // With a reference: count output 0's thresholded-map overlap with the
  // reference's (ReferenceMetrics::map_iou; `sparq eval --map-threshold`).
  MapOptions map;
  // The graph output the metrics read ("output 0" everywhere below: labels,
  // agreement, task metrics, sqnr and cosine); it is listed first in the
  // report. "" = the model's first output. An error names the outputs when
  // the model has none of that name (`sparq eval --output`).
  std::string output;
  // Evaluate only shard `shard` of `shards` of the data (ShardOf: contiguous
  // whole batches; `sparq eval --shard i/n`); the report then carries the
  // sums MergeEvalReports needs (EvalReport::shards). shards 0: all the data.
  int shard = 0;
  int shards = 0;
};

// How one graph output compares with the reference model's output.
struct SPARQ_API OutputComparison {
  std::string name;
  int64_t elements = 0;
  double sqnr_db = 0.0;  // +inf when identical
  double cosine = 0.0;
  double max_abs_error = 0.0;
};

// Model time per batch, warm-up batches excluded. Percentiles are nearest
// rank over the timed batches (p50 of 4 batches is the 2nd fastest).
struct SPARQ_API LatencyStats {
  int64_t warmup_batches = 0;  // batches run first and left out
  int64_t timed_batches = 0;   // batches the percentiles are over; 0: none (all were warm-up)
  double p50_seconds = 0.0;
  double p90_seconds = 0.0;
  double p99_seconds = 0.0;
  double mean_seconds = 0.0;
  double max_seconds = 0.0;
  // Process CPU time (all threads) per timed batch, mean: on a machine shared
  // with other work a steadier measure of the model's cost than wall time.
  // Set by Evaluate, not by ComputeLatency.
  double cpu_mean_seconds = 0.0;
};
// Latency statistics of `batch_seconds` with its first `warmup` entries
// left out (all zero with timed_batches 0 when nothing is left).
SPARQ_API LatencyStats ComputeLatency(const std::vector<double>& batch_seconds, int64_t warmup);

// Time spent in one (op type, kernel) pair over a whole evaluation.
struct SPARQ_API OpProfile {
  std::string op_type;
  std::string kernel;
  int64_t nodes = 0;    // node runs
  double seconds = 0.0;
};

struct SPARQ_API EvalReport {
  std::string model;
  std::string inputs;
  int64_t samples = 0;
  int64_t batches = 0;
  int64_t batch_size = 0;
  int threads = 0;
  std::string backend;  // the backend that ran the model ("cpu", "reference", "cuda", ...)
  bool allow_tf32 = false;  // EvalOptions::allow_tf32 was on (in the JSON only when true)
  // How the model's runs used device graphs (Executor::GraphCapture); shown
  // (text and JSON "cuda_graphs") for backends other than cpu and reference.
  GraphCaptureInfo graphs;
  double model_seconds = 0.0;  // time spent running the model (not the reference, not I/O)
  double wall_seconds = 0.0;
  double samples_per_second() const { return model_seconds > 0 ? static_cast<double>(samples) / model_seconds : 0.0; }
  LatencyStats latency;  // model time per batch (percentiles without the warm-up batches)

  bool has_labels = false;  // accuracy of output 0 (argmax over the last axis)
  int64_t num_classes = 0;
  int64_t top1_correct = 0;
  int64_t top5_correct = 0;
  double top1() const { return samples > 0 ? static_cast<double>(top1_correct) / static_cast<double>(samples) : 0.0; }
  double top5() const { return samples > 0 ? static_cast<double>(top5_correct) / static_cast<double>(samples) : 0.0; }

  bool has_reference = false;
  std::string reference;
  // Rows of output 0 (read as [rows, last dim]: one per sample for [N, C]
  // outputs, N * S for [N, S, C]) whose argmax matches the reference's.
  int64_t top1_agree = 0;
  int64_t top1_rows = 0;  // rows compared
  double top1_agreement() const {
    return top1_rows > 0 ? static_cast<double>(top1_agree) / static_cast<double>(top1_rows) : 0.0;
  }
  std::vector<OutputComparison> comparisons;  // one per graph output
  // Task metrics of output 0 against the reference's: top-5 overlap,
  // per-sample cosine, CTC character error rate.
  ReferenceMetrics task;

  std::string saved_outputs;  // path written, "" when none
  std::vector<NodeKernel> node_kernels;  // with EvalOptions::list_kernels: the kernel of each node
  std::vector<OpProfile> op_profile;     // with EvalOptions::profile: slowest first
  std::string trace;                     // Chrome trace written, "" when none

  // Sharded evaluation (EvalOptions::shards > 0): which shard of how many,
  // the samples of all the data, and the sums behind the metrics.
  int shard = 0;
  int shards = 0;                    // 0: not a shard
  std::vector<int> shard_ids;        // the shards this report holds (all of them after MergeEvalReports)
  int64_t data_samples = 0;          // samples of all the data (after any limit)
  std::vector<ErrorStats> output_stats;  // with a reference: the sums behind `comparisons`, in order
  std::vector<double> batch_seconds;     // model time of each batch, in order (warm-up included)

  std::string ToText() const;
  // One JSON object; an infinite SQNR (identical outputs) is written as null,
  // and so is top1_agreement when no rows were compared. A shard's report
  // adds "partial" (the sums; docs/scale.md) that FromJson reads back.
  std::string ToJson() const;
  // A shard's report from its ToJson text (only what MergeEvalReports needs).
  // Errors: Corruption naming `where` when the text is not a shard's report.
  static StatusOr<EvalReport> FromShardJson(const std::string& text, const std::string& where);
};

// The reports of every shard of one sharded evaluation merged into the
// report of one run over all the data: counts add exactly (top-1, top-5,
// agreement, CTC edits, boxes), SQNR, cosine and the task means come from
// added sums (equal to one run's up to double rounding: the sums are added
// in another order), latency from every shard's timed batches. Errors:
// InvalidArgument when there are none, when they differ in model,
// reference, inputs, labels, batch size, data samples or shard count, or a
// shard is missing or given twice (naming it).
SPARQ_API StatusOr<EvalReport> MergeEvalReports(const std::vector<EvalReport>& parts);

// ===========================================================================
// Metrics: one enum, one name table

enum class Metric {
  kTop1,       // % of samples whose argmax is the label (needs labels)
  kTop5,       // % of samples whose label is among the 5 largest outputs (needs labels)
  kAgreement,  // % of rows of output 0 whose argmax equals the reference's
  kSqnr,       // signal-to-quantization-noise ratio of output 0 against the reference, in dB
  kCosine,     // cosine similarity of output 0 against the reference
  kTop5Overlap,  // % overlap of each row's 5 largest outputs with the reference's (classifiers)
  kMeanCosine,   // mean over samples of each sample's output cosine with the reference (embeddings)
  kCtcAccuracy,  // 100 - character error rate (%) of CTC greedy decoding vs the reference's reading
  kBoxRecall,    // % of the reference's detector boxes (after NMS) matched at IoU >= 0.5, same class (BoxOptions)
  kClassScoreSqnr,  // SQNR of a detector output's class-score rows (4 onwards) against the reference, in dB
  kMapIou,  // % IoU of {reference > t} and {output > t} over every element of output 0 (MapOptions::threshold)
};
// The one name table of Metric, in enum order (recipes, CLI flags and
// reports spell metrics with it). constexpr, so other tables may be built
// from it during static initialization.
inline constexpr std::pair<Metric, const char*> kMetricNames[] = {{Metric::kTop1, "top1"},
                                                                  {Metric::kTop5, "top5"},
                                                                  {Metric::kAgreement, "agreement"},
                                                                  {Metric::kSqnr, "sqnr"},
                                                                  {Metric::kCosine, "cosine"},
                                                                  {Metric::kTop5Overlap, "top5_overlap"},
                                                                  {Metric::kMeanCosine, "mean_cosine"},
                                                                  {Metric::kCtcAccuracy, "ctc_accuracy"},
                                                                  {Metric::kBoxRecall, "box_recall"},
                                                                  {Metric::kClassScoreSqnr, "class_score_sqnr"},
                                                                  {Metric::kMapIou, "map_iou"}};
// The metrics measured in percent (the rest: dB, cosine). Recipes, the
// structs and the text reports use percent; every JSON output gives these as
// fractions in [0, 1] (docs/sparq-json.schema.json).
constexpr bool MetricIsPercent(Metric m) {
  return m == Metric::kTop1 || m == Metric::kTop5 || m == Metric::kAgreement || m == Metric::kTop5Overlap ||
         m == Metric::kCtcAccuracy || m == Metric::kBoxRecall || m == Metric::kMapIou;
}
// The metrics that need detector boxes decoded (BoxOptions::enabled).
constexpr bool MetricNeedsBoxes(Metric m) { return m == Metric::kBoxRecall || m == Metric::kClassScoreSqnr; }
// The metrics that need the thresholded-map counts (MapOptions::enabled).
constexpr bool MetricNeedsMap(Metric m) { return m == Metric::kMapIou; }
// The name of `m` in kMetricNames; "?" for a value outside the enum.
constexpr const char* MetricName(Metric m) {
  for (const auto& entry : kMetricNames)
    if (entry.first == m) return entry.second;
  return "?";
}
// InvalidArgument listing the names when `name` is none of them.
SPARQ_API StatusOr<Metric> ParseMetric(const std::string& name);

// The SQNR that stands for "identical to the reference" (an exact match is +inf).
constexpr double kSqnrCeilingDb = 100.0;

// The value of `metric` in `report`, higher is better: percent for top1, top5
// and agreement; dB capped at kSqnrCeilingDb for sqnr; cosine of output 0. A
// report without a reference (the reference's own) scores the best value of
// the comparison metrics: 100 %, kSqnrCeilingDb, 1. A task metric that was
// not measured (box_recall without BoxOptions::enabled, map_iou without
// MapOptions::enabled) is NaN, and so is the SQNR of outputs holding NaN.
SPARQ_API double MetricValue(Metric metric, const EvalReport& report);

// ===========================================================================
// Evaluator: the reference run once, many candidates

struct SPARQ_API EvaluatorOptions {
  std::string labels;  // .npy (or one-array .npz) of integer class ids; "" = none
  int threads = 0;     // executor threads; 0 = one per hardware thread
  std::string backend = "cpu";  // as EvalOptions::backend
  bool plan_memory = true;      // as EvalOptions::plan_memory
  bool allow_tf32 = false;      // as EvalOptions::allow_tf32
  // Executors as in EvalOptions: fast kernels with QDQ fused (default), or the
  // reference kernels (optionally on the fused graph).
  bool reference_kernels = false;
  bool fused_graph = false;
  bool fp16_as_fp32 = false;  // as EvalOptions::fp16_as_fp32
  std::shared_ptr<const KernelSpeedTable> kernel_table;  // nullptr: KernelSpeedTable::Default()
  // Detector box metrics of output 0 (EvalReport::task); off by default.
  BoxOptions boxes;
  // Thresholded-map IoU of output 0 (EvalReport::task); off by default. With
  // it on, Create with a reference fails (InvalidArgument naming the output)
  // when the reference model declares that output as not floating point.
  MapOptions map;
  std::string output;  // as EvalOptions::output: the output the metrics read
  // Reference outputs kept in memory, in bytes. Batches past the cap are not
  // kept: each Evaluate runs the reference again on them.
  int64_t cache_bytes = int64_t{256} << 20;
  std::function<void(EvalProgress&)> on_progress;  // the reference pass; optional (may cancel)
  // The label row of the data's first sample (a shard's data starts inside
  // the labels: ShardOf); default 0.
  int64_t first_label = 0;
};

// Options of one Evaluator::Evaluate call.
struct SPARQ_API EvaluateCallOptions {
  std::string name;          // EvalReport::model; default "candidate"
  std::string save_outputs;  // .npz to write every graph output to; "" = none (not checked: see EvalOptions)
  bool list_kernels = false; // fill EvalReport::node_kernels
  bool profile = false;      // fill EvalReport::op_profile
  int64_t warmup = 1;        // as EvalOptions::warmup
  std::string trace;         // Chrome trace JSON to write; "" = none (not checked: see EvalOptions)
  std::function<void(EvalProgress&)> on_progress;  // optional (may cancel)
};

// Evaluates candidate models against one reference on one dataset. Create
// runs the reference over the data once; Evaluate runs only the candidate
// (and the reference on batches past the cache cap). Not thread-safe: one
// Evaluate at a time.
class SPARQ_API Evaluator {
 public:
  // Errors: the executor's for `reference`; those of the data (first pass);
  // InvalidArgument for labels that are not integer class ids or whose count
  // differs from the data's, and for data without samples.
  static StatusOr<std::unique_ptr<Evaluator>> Create(const Model& reference, BatchSource data,
                                                     EvaluatorOptions options = {});
  // Without a reference: reports hold the label metrics only.
  static StatusOr<std::unique_ptr<Evaluator>> Create(BatchSource data, EvaluatorOptions options = {});
  ~Evaluator();

  // Runs `candidate` over the data and compares it with the reference.
  // Errors name the model and the samples at fault: the executor's, outputs
  // that do not pair with the reference's, label counts.
  StatusOr<EvalReport> Evaluate(const Model& candidate, const EvaluateCallOptions& call = {});

  // The reference's own report (label metrics; no comparisons). Empty
  // without a reference.
  const EvalReport& reference_report() const;
  bool has_reference() const;
  const BatchSource& data() const;
  // The first batch of the data (as each pass reads it).
  StatusOr<TensorMap> FirstBatch() const;
  // Reference runs so far, in batches: the data's batch count after Create,
  // growing only for batches past the cache cap.
  int64_t reference_batches_run() const;
  int64_t cached_batches() const;  // batches whose reference outputs are kept

 private:
  struct Impl;
  explicit Evaluator(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Evaluates `model_path` over `options.inputs`. Errors name the file, array or
// node at fault: NotFound/Corruption/NotSupported from loading, InvalidArgument
// for data that does not fit the model (type, shape, non-finite values with
// their flat index, label count), and the executor's errors.
SPARQ_API StatusOr<EvalReport> Evaluate(const std::string& model_path, const EvalOptions& options);

}  // namespace sparq
