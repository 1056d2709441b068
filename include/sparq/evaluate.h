// Runs a model over a dataset: accuracy, agreement with a reference model,
// throughput (what `sparq eval` prints).
//
// Dataset: a .npz keyed by input names (a single-input model also accepts an
// archive with one array of any name), a .npy for a single-input model, or a
// folder of .npy/.npz files read in name order and concatenated along axis 0.
// Samples lie along the first axis of every array; files are read one at a
// time, so a folder may be larger than memory.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "sparq/executor.h"  // NodeKernel
#include "sparq/metrics.h"   // ReferenceMetrics
#include "sparq/status.h"

namespace sparq {

// Passed to EvalOptions::on_progress after each batch.
struct EvalProgress {
  int64_t done = 0;      // samples evaluated so far
  int64_t total = -1;    // samples to evaluate; -1 when not known in advance
  double seconds = 0.0;  // wall time since the start
};

struct EvalOptions {
  std::string inputs;        // dataset path (required)
  std::string labels;        // .npy (or one-array .npz) of integer class ids; "" = none
  std::string reference;     // reference model to compare against; "" = none
  std::string save_outputs;  // .npz to write every graph output to; "" = none
  // Samples per run. 0: the model's fixed first input dim, else 1. A value
  // that contradicts a fixed first dim is InvalidArgument.
  int64_t batch = 0;
  int threads = 0;   // executor threads; 0 = one per hardware thread
  int64_t limit = 0; // evaluate at most this many samples; 0 = all
  std::function<void(const EvalProgress&)> on_progress;  // optional
  bool list_kernels = false;  // fill EvalReport::node_kernels (`sparq eval --verbose`)
  bool profile = false;       // fill EvalReport::op_profile (`sparq eval --profile`)
  // Only the reference kernels, running a QDQ model as its float graph
  // (ExecutorOptions::reference_kernels); otherwise the fast kernels, with
  // QDQ patterns fused into integer operators (ExecutorOptions::fuse_qdq).
  bool reference_kernels = false;
  // With reference_kernels: run the graph the fast kernels run (QDQ patterns
  // fused into integer operators, activations folded into convolutions) on
  // the reference kernels, the check that each fast kernel gives the
  // reference's result for the same operator (integer operators bit for bit).
  bool fused_graph = false;
  // Kernel speed table CSV (sparq/kernel_table.h) deciding which pruned INT8
  // layers run sparse kernels (ExecutorOptions::kernel_table); "" = the table
  // compiled in from bench/kernel_speedups.csv.
  std::string kernel_table;
};

// How one graph output compares with the reference model's output.
struct OutputComparison {
  std::string name;
  int64_t elements = 0;
  double sqnr_db = 0.0;  // +inf when identical
  double cosine = 0.0;
  double max_abs_error = 0.0;
};

// Time spent in one (op type, kernel) pair over a whole evaluation.
struct OpProfile {
  std::string op_type;
  std::string kernel;
  int64_t nodes = 0;    // node runs
  double seconds = 0.0;
};

struct EvalReport {
  std::string model;
  std::string inputs;
  int64_t samples = 0;
  int64_t batches = 0;
  int64_t batch_size = 0;
  int threads = 0;
  double model_seconds = 0.0;  // time spent running the model (not the reference, not I/O)
  double wall_seconds = 0.0;
  double samples_per_second() const { return model_seconds > 0 ? static_cast<double>(samples) / model_seconds : 0.0; }

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

  std::string ToText() const;
  // One JSON object; an infinite SQNR (identical outputs) is written as null,
  // and so is top1_agreement when no rows were compared.
  std::string ToJson() const;
};

// Evaluates `model_path` over `options.inputs`. Errors name the file, array or
// node at fault: NotFound/Corruption/NotSupported from loading, InvalidArgument
// for data that does not fit the model (type, shape, non-finite values with
// their flat index, label count), and the executor's errors.
StatusOr<EvalReport> Evaluate(const std::string& model_path, const EvalOptions& options);

}  // namespace sparq
