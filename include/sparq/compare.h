// Layer-by-layer comparison of two models on the same data (`sparq compare`):
// where along the network does a quantized, pruned or FP16 model drift from
// its FP32 reference? Like onnxruntime's qdq_loss_debug and Polygraphy's
// layer-wise comparison.
//
//   reference.onnx ──run, every matched value kept (one batch)──┐
//   candidate.onnx ──run, each matched value as it is computed──┴─> ErrorStats per pair
//                                                                   (summed over batches)
//
// Matching (MatchTensors): each floating-point value of the reference (graph
// inputs and node outputs, not initializers) is paired with the first of
//   1. "dequantized": the output of a DequantizeLinear in the candidate that
//      reads a QuantizeLinear of a value of the same name (`x` vs
//      `x_dequantized` in a QDQ model: the value the candidate's consumers read,
//      with the rounding of `x` itself);
//   2. "same_name": a candidate value of the same name (a QDQ model's float
//      outputs, an FP16 model's Cast back to float32, a pruned model's values);
//   3. "node_output": the output at the same position of the candidate node
//      with the same name as the reference value's producer (an FP16 model's
//      float16 twin `h_fp16` of `h` where no Cast back exists).
// A pair is compared when both values are floating point (float16 is read as
// float32) and have the same shape; other values are listed as unmatched with
// the reason. The first model is the reference: SQNR = 10 log10(sum ref^2 /
// sum (ref - candidate)^2).
//
// Both models run on the CPU executor without fusions, so that every value
// exists: a QDQ model runs as its float graph (simulated quantization, as
// onnxruntime runs it before fusing), which may differ from a deployed
// integer run by one quantization step.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "sparq/dataset.h"
#include "sparq/evaluate.h"  // EvalProgress
#include "sparq/export.h"
#include "sparq/graph.h"
#include "sparq/status.h"

namespace sparq {

// How a reference value found its counterpart (see the rule above).
enum class TensorMatchKind { kDequantized, kSameName, kNodeOutput };
// "dequantized", "same_name", "node_output".
SPARQ_API const char* TensorMatchKindName(TensorMatchKind kind);

// One reference value and its counterpart in the candidate.
struct SPARQ_API TensorMatch {
  std::string name;            // the reference's value
  std::string candidate_name;  // the candidate's value
  TensorMatchKind kind = TensorMatchKind::kSameName;
  std::string op_type;  // the reference's producer; "" for a graph input
  int64_t index = 0;    // graph order in the reference: inputs first, then node outputs in node order
};

// A reference value without a usable counterpart.
struct SPARQ_API UnmatchedTensor {
  std::string name;
  std::string op_type;  // "" for a graph input
  int64_t index = 0;
  std::string reason;   // "no counterpart in the candidate", "candidate value 'q' is int8", ...
};

// The pairs of the rule above, in the reference's graph order, for every
// reference graph input and node output (types are checked when the models
// run: a pair here may still turn out unusable). `unmatched`, when not null,
// receives the reference values with no counterpart.
SPARQ_API std::vector<TensorMatch> MatchTensors(const Model& reference, const Model& candidate,
                                                std::vector<UnmatchedTensor>* unmatched = nullptr);

struct SPARQ_API CompareOptions {
  std::string inputs;  // dataset path (Compare only; required there)
  // Samples per run: BatchSizeFor the reference (a fixed first input dim wins;
  // 0 = the fixed dim, else 1). The two models' fixed batch dims must agree.
  // Memory holds one batch of the reference's matched values.
  int64_t batch = 0;
  int64_t limit = 0;  // compare on at most this many samples; 0 = all
  int threads = 0;    // executor threads; 0 = one per hardware thread
  // Compare only: inputs pinned to one value for every batch (DatasetOptions::constants).
  std::map<std::string, std::vector<double>> constants;
  std::string plot;   // Compare only: write CompareReport::ToSvg() here (.svg); "" = none
  // Optional; called after each batch (both models run on it). Setting
  // `cancel` stops with StatusCode::kCancelled and writes nothing.
  std::function<void(EvalProgress&)> on_progress;
};

// The error of one candidate value against its reference value, over every sample.
struct SPARQ_API TensorComparison {
  TensorMatch match;
  int64_t elements = 0;  // compared, summed over batches
  double sqnr_db = 0.0;  // +inf when identical; NaN or +inf when the reference has NaN / Inf values
  double cosine = 0.0;
  double max_abs_error = 0.0;
  // No error at all (equal infinities count as equal). An infinite SQNR
  // with an error means the reference itself holds infinities.
  bool identical() const { return elements > 0 && max_abs_error == 0.0; }
};

struct SPARQ_API CompareReport {
  std::string reference;  // path or name
  std::string candidate;
  std::string inputs;
  int64_t samples = 0;
  int64_t batches = 0;
  int64_t batch_size = 0;
  // Worst first: SQNR that is not a number (NaN, or +inf that is not
  // identical()), then ascending SQNR, identical tensors last; ties in graph
  // order.
  std::vector<TensorComparison> tensors;
  std::vector<UnmatchedTensor> unmatched;  // in graph order
  std::string plot;  // the SVG written, "" when none

  // A summary and a table of the `top` worst tensors (0 = all), then the
  // unmatched values.
  std::string ToText(size_t top = 0) const;
  // One JSON object (schema_version, sparq_version, ..., "tensors" worst first,
  // "unmatched"); a SQNR that is not finite is written as null (with
  // "identical" telling an exact match from a non-finite value).
  std::string ToJson() const;
  // A line plot of SQNR (dB) along the network, tensors in graph order;
  // identical tensors sit on the top edge as open circles, non-finite SQNR
  // on the bottom edge in red. Plain SVG 1.1 text; each point has a <title> tooltip.
  std::string ToSvg() const;
};

// Runs `reference` and `candidate` over `data` (batches as OpenDataset gives
// them for the reference) and compares every matched value. Errors name the
// model and the samples at fault: the executors', InvalidArgument for fixed
// batch dims that disagree, for data without samples, or when no value
// matches at all; Cancelled from on_progress.
SPARQ_API StatusOr<CompareReport> CompareModels(const Model& reference, const Model& candidate,
                                                const BatchSource& data, const CompareOptions& options = {});

// `sparq compare`: loads both files, opens options.inputs for the reference
// with options.batch / options.limit, runs CompareModels and writes
// options.plot. Errors: NotFound / Corruption naming the file, InvalidArgument
// for a plot path that is not .svg or would overwrite an input, and those of
// CompareModels.
SPARQ_API StatusOr<CompareReport> Compare(const std::string& reference_path, const std::string& candidate_path,
                                          const CompareOptions& options);

}  // namespace sparq
