// Activation calibration: run a model over sample data, observe every float
// activation with streaming histograms, and turn them into quantization
// ranges (thresholds, scales, zero points).
//
//   batches ──> Executor ──on_node_outputs──> one Observer per tensor
//                                              (min, max, |x| histogram)
//                                                        │
//   method: max | kl | percentile | mse  ──>  threshold ─┴─> scale, zero point
//
// Memory is O(bins x tensors) whatever the amount of data: activations are
// folded into the histograms batch by batch and never stored.
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "sparq/dataset.h"  // BatchFn
#include "sparq/executor.h"
#include "sparq/export.h"
#include "sparq/graph.h"
#include "sparq/status.h"

namespace sparq {

enum class CalibrationMethod {
  kMax,         // non-saturating: threshold = max |x|
  kKL,          // saturating: TensorRT's entropy calibration (min KL divergence)
  kPercentile,  // saturating: the given percentile of |x|
  kMSE,         // saturating: the threshold minimizing the expected quantization error
  kAuto,        // per tensor, the one of max / KL / percentile / MSE that least disturbs
                // the outputs of the tensor's consumers (measured on the first batch)
};
// The canonical name of `m` (CalibrationMethods()).
SPARQ_API const char* CalibrationMethodName(CalibrationMethod m);
// A name or alias of CalibrationMethods(); InvalidArgument listing the names.
SPARQ_API StatusOr<CalibrationMethod> ParseCalibrationMethod(const std::string& name);

// A histogram of |x| over [0, range) in `bins` equal bins. The range is a
// power of two: the smallest one above the first data's max |x|, doubled
// when a value reaches it, 2^k old bins merging exactly into one new bin (no
// interpolation, so counts stay exact integers). The result depends only on
// the values seen, not on how they were batched or ordered: KL, percentile
// and MSE thresholds are the same for any calibration batch size.
class SPARQ_API AbsHistogram {
 public:
  explicit AbsHistogram(int bins = 2048) : counts_(static_cast<size_t>(bins), 0) {}
  // Adds |v| for each value (growing the range first as needed).
  void Add(const float* values, int64_t n);
  // Makes the range a power of two above `max_abs` (sets it on first use, else grows it).
  void Cover(double max_abs);
  // Adds counts binned on the current grid (same bin count and range).
  void AddCounts(const std::vector<int64_t>& counts);
  // Adds `other`'s counts (same bin count; its range 0 or a power of two):
  // the smaller grid is grown to the larger one first, so merging the
  // histograms of two parts of the data gives exactly the histogram of all
  // of it (shards merged by MergePartials).
  void Merge(const AbsHistogram& other);

  int bins() const { return static_cast<int>(counts_.size()); }
  double range() const { return range_; }
  double bin_width() const { return range_ / static_cast<double>(counts_.size()); }
  const std::vector<int64_t>& counts() const { return counts_; }
  int64_t total() const;

  // For tests and for building from saved counts.
  static AbsHistogram FromCounts(std::vector<int64_t> counts, double range);

 private:
  void GrowTo(double needed);
  std::vector<int64_t> counts_;
  double range_ = 0.0;  // 0 until the first nonzero value
};

// Threshold selection on an |x| histogram. Each returns a threshold in the
// histogram's units (a bin edge, so it is exactly reproducible).
SPARQ_API double KlThreshold(const AbsHistogram& h, int quant_levels = 128);
SPARQ_API double PercentileThreshold(const AbsHistogram& h, double percentile);
SPARQ_API double MseThreshold(const AbsHistogram& h, int quant_levels = 128);

// Passed to CalibrationOptions::progress after each batch.
struct SPARQ_API CalibrationProgress {
  int64_t batches = 0;  // batches observed so far
  int64_t samples = 0;  // samples (rows along axis 0) observed so far
  int64_t total_samples = -1;  // samples the data holds, when the caller knows (CalibrateFiles); else -1
  bool cancel = false;  // set to true in the callback to stop
};

// How each tensor's range is chosen from what was observed. Recipes hold
// this struct (quantize.calibration), so the API and `sparq run` share its
// defaults.
struct SPARQ_API CalibrationMethodOptions {
  CalibrationMethod method = CalibrationMethod::kKL;  // TensorRT's default entropy calibration
  int bins = 2048;            // histogram bins
  double percentile = 99.99;  // method percentile: in (0, 100]
  bool symmetric = true;      // int8 with zero point 0 (TensorRT); false: uint8 with a zero point
};

// One calibration method: its names and how it picks a tensor's threshold
// from what calibration observed of it (the streaming |x| histogram and max
// |x|), as onnxruntime's calibrators compute_data from collect_data. A new
// method is one row of CalibrationMethods() (calibrate/methods.cc) and a
// value of CalibrationMethod: the CLI, recipes and reports read its names
// from the table.
struct SPARQ_API CalibrationMethodInfo {
  CalibrationMethod method;
  const char* name;         // canonical (recipes, reports, --method)
  const char* alias;        // another accepted spelling, or nullptr ("entropy" for kl)
  bool saturating;          // may clip values beyond the threshold
  const char* description;  // one line, for --help and docs
  // The threshold (a bin edge; the calibrator clamps it to max_abs); null
  // for kAuto, which chooses per tensor
  // among the methods that have one.
  double (*threshold)(const AbsHistogram& hist, double max_abs, const CalibrationMethodOptions& options);
};
// Every method, in CalibrationMethod order.
SPARQ_API const std::vector<CalibrationMethodInfo>& CalibrationMethods();

struct SPARQ_API CalibrationOptions : CalibrationMethodOptions {
  // Tensors to observe; empty = every float32 graph input and node output
  // (weights and constant-folded values excluded).
  std::vector<std::string> tensors;
  int threads = 0;  // executor threads, 0 = all
  // Where the forward passes run (ExecutorOptions::backend: "cpu", "cuda",
  // "auto", ...). On the CUDA backend the observed values are reduced on the
  // GPU (bounds and histogram counts, BackendContext::MinMaxF32 /
  // AbsHistogramF32) and only those come back; on backends without that,
  // they are binned on the host from copies. The binning is the same either
  // way: the table does not depend on the backend beyond float rounding of
  // the forward passes (and the sign of a zero bound).
  std::string backend = "cpu";
  // A tensor that holds NaN or an infinity fails calibration (naming it),
  // unless this is set: then it is left out of the table and named in
  // CalibrationTable::skipped. For tables that list every tensor (side
  // files) while INT8 reads only some: an attention mask made by
  // Where(mask, 0, -inf) (PyTorch's SDPA export) holds -inf, which no INT8
  // scale represents and no Q/DQ placement reads. Calibrate only, not
  // CalibrateShard (InvalidArgument: the partial file has no such list).
  bool skip_non_finite = false;
  // Optional; called on the calibrating thread after each batch. Setting
  // `cancel` stops calibration: Calibrate returns StatusCode::kCancelled.
  std::function<void(CalibrationProgress&)> progress;
};

// One tensor's calibration result.
struct SPARQ_API TensorRange {
  std::string name;
  float min = 0.0f, max = 0.0f, abs_max = 0.0f;  // observed
  float threshold = 0.0f;                        // chosen |x| clipping point
  float scale = 1.0f;                            // real value of one quantization step
  int32_t zero_point = 0;                        // 0 for symmetric int8
  bool is_signed = true;                         // int8 (true) or uint8
  std::string method;
};

// The versioned calibration file: quantization reads it, so calibrating once
// serves many quantization runs.
struct SPARQ_API CalibrationTable {
  static constexpr int kVersion = 1;
  std::string method;
  int bins = 2048;
  double percentile = 99.99;
  bool symmetric = true;
  int64_t samples = 0;
  std::vector<TensorRange> tensors;  // sorted by name
  // Inputs pinned to a value (--constant, data.constants) that decided an If
  // folded before calibrating (input name -> its values): the tensors are
  // those of the model folded for these values, which quantizing with the
  // table must fold the same way. Saved as "folded_inputs" when not empty.
  std::map<std::string, std::vector<double>> folded_inputs;
  // Tensors left out because they hold NaN or an infinity
  // (CalibrationOptions::skip_non_finite), sorted; not saved.
  std::vector<std::string> skipped;

  const TensorRange* Find(const std::string& name) const;
  // JSON ({"format": "sparq-calibration", "version": 1, ...}); written atomically.
  Status Save(const std::string& path) const;
  static StatusOr<CalibrationTable> Load(const std::string& path);
  // TensorRT calibration cache: "TRT-<version>-<calibrator>", then
  // "<tensor>: <hex of the float32 scale>" per tensor, scale = threshold / 127.
  // The calibrator is the one TensorRT names for `method`
  // (TensorRtCalibratorName). Call CheckTensorRtCache first: a table it
  // refuses gives a header of "TRT-<version>-Unsupported".
  std::string ToTensorRtCache(const std::string& trt_version = "8601") const;
  // OK when the table can be a TensorRT cache; NotSupported for a method
  // without a TensorRT calibrator (percentile, mse) or an asymmetric table
  // (TensorRT's INT8 has no zero points: they would be dropped silently).
  Status CheckTensorRtCache() const;
  // "EntropyCalibration2" for kl, "MinMaxCalibration" for max, else "".
  static std::string TensorRtCalibratorName(const std::string& method);
};

// Runs `model` over every batch from `next_batch`, observing activations, and
// returns the table. Errors: those of the executor; InvalidArgument when a
// tensor holds NaN or Inf (naming the tensor) or no batch was given.
SPARQ_API StatusOr<CalibrationTable>
Calibrate(const Model& model, const BatchFn& next_batch, const CalibrationOptions& options);

// ===========================================================================
// Sharded calibration: observe parts of the data in separate processes, merge
// what they observed, choose the thresholds once.
//
//   shard 0: CalibrateShard ──> PartialCalibration ──Save──> part-0.hist ─┐
//   shard 1: CalibrateShard ──> PartialCalibration ──Save──> part-1.hist ─┼─ Load ─> MergePartials
//   ...                                                                    ┘          │
//                                                  FinishCalibration <────────────────┘
//                                                          │
//                                                  CalibrationTable (the same bytes as Calibrate over all the data)
//
// Calibrate is CalibrateShard over all the batches followed by
// FinishCalibration, and histograms, min and max merge exactly, so the
// merged table equals the one-process table bit for bit when the shards
// together run the same batches (ShardOf in sparq/dataset.h cuts the data
// into contiguous runs of whole batches). The file format is docs/scale.md.

// What calibration observed of one tensor.
struct SPARQ_API TensorObservation {
  std::string name;
  float min = std::numeric_limits<float>::infinity();   // +inf until a value is seen
  float max = -std::numeric_limits<float>::infinity();  // -inf until a value is seen
  AbsHistogram hist;
};

// The statistics of one shard (or of several merged): everything
// FinishCalibration needs, and what tells parts of different runs apart.
struct SPARQ_API PartialCalibration {
  static constexpr int kVersion = 1;
  // Identity of the model: "fnv1a64:<16 hex digits>" of its file
  // (CalibrateFiles); "" when the caller sets none. Parts merge only with
  // the same identity.
  std::string model_id;
  CalibrationMethodOptions method;  // the options the thresholds use (method kAuto is refused)
  std::string backend = "cpu";      // where the forward passes ran
  std::vector<std::string> requested;  // CalibrationOptions::tensors (sorted); empty = every activation
  // The data the shards were cut from: its samples (after any limit) and
  // samples per batch; every part of one run has the same.
  int64_t data_samples = 0;
  int64_t batch_size = 0;
  int shards = 1;              // the shard count n of --shard i/n
  std::vector<int> shard_ids;  // the shards this holds (one before merging; 0..n-1 after)
  int64_t samples = 0;         // samples observed
  int64_t batches = 0;         // batches observed
  // CalibrationTable::folded_inputs of the run (every part has the same);
  // saved as "folded_inputs" when not empty.
  std::map<std::string, std::vector<double>> folded_inputs;
  std::vector<TensorObservation> tensors;  // sorted by name
  std::string source;  // the file it was loaded from (messages only; not saved)

  // JSON ({"format": "sparq-calibration-partial", "version": 1, ...}, with a
  // checksum of its content); written atomically.
  Status Save(const std::string& path) const;
  // Errors: IOError / NotFound reading; Corruption naming the file and the
  // field for anything malformed (bad JSON, wrong format, a checksum that
  // does not match, counts that do not fit the bins, a range that is not a
  // power of two); NotSupported for another version.
  static StatusOr<PartialCalibration> Load(const std::string& path);
};

// The observation half of Calibrate: runs `model` over every batch of
// `next_batch` (a shard of the data: ShardOf) and returns what it observed,
// with method, bins, percentile, symmetric, backend and requested from
// `options`; the caller fills model_id, data_samples, batch_size, shards and
// shard_ids. A shard without batches is no error (an empty part).
// Errors: as Calibrate's; InvalidArgument for method auto (it compares
// candidates on the first batch of all the data: calibrate it in one process).
SPARQ_API StatusOr<PartialCalibration>
CalibrateShard(const Model& model, const BatchFn& next_batch, const CalibrationOptions& options);

// The parts of one sharded run merged into one (shard_ids 0..n-1, the
// histograms merged exactly). Errors: InvalidArgument naming the parts
// (their `source`) when there are none, when they differ in model_id, method
// options, backend, requested tensors, data samples, batch size or shard
// count, when a shard is given twice or is missing (naming it), or when a
// tensor's bins differ.
SPARQ_API StatusOr<PartialCalibration> MergePartials(const std::vector<PartialCalibration>& parts);

// The table from observed statistics: each tensor's threshold by
// partial.method, as Calibrate chooses it. `threads` parallelizes the
// searches (0 = all; the result does not depend on it). Errors:
// InvalidArgument when nothing was observed (no batches) or for method auto.
SPARQ_API StatusOr<CalibrationTable> FinishCalibration(const PartialCalibration& partial, int threads = 0);

// Scale and zero point for a threshold (symmetric) or a [min, max] range.
SPARQ_API TensorRange MakeRange(const std::string& name, float min, float max, float threshold, bool symmetric,
                      const std::string& method);

}  // namespace sparq
