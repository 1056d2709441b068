// Weight pruning: zero the least important weights of Conv / Gemm / MatMul
// layers in shapes that sparse kernels can speed up, recover the accuracy
// without labels or training, and (for whole channels) really shrink the model.
//
//   ┌──────────────────────── one step of the schedule ─────────────────────────┐
//   │ weights ─scores─> masks (structure, sparsity) ─apply─> evaluate (masked)  │
//   │            ^                                             │                │
//   │   activation norms                      recover (least squares on         │
//   │   (calibration data)                    calibration data) ─> evaluate     │
//   └────────────────────────────────────────────────────────────────────────────┘
//       then, for `channel`: remove the zeroed channels from the graph.
//
// The GEMM view. Every weight is handled as a row-major matrix [rows, cols]
// whose rows are outputs and whose cols are the reduction ("input") dimension:
//
//   Conv    W [O, I/g, k1..kR]                  -> [O, I/g * k1*..*kR]  (row = output channel)
//   Gemm    B [out, in] (transB=1)              -> [out, in]
//           B [in, out] (transB=0)              -> [out, in]  (transposed view)
//   MatMul  B [in, out] (2-D constant B)        -> [out, in]  (transposed view)
//
// Exact zeros. A pruned weight is stored as exactly 0.0f; recovery only
// changes kept weights, so pruned ones stay 0.0f; and sparq's int8 weight
// quantization (QuantizeWeightSymmetric) maps 0.0f to 0, so the zeros survive
// quantization and a sparse kernel can rely on them.
//
// Thread safety: every function here is reentrant; none keeps global state.
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "sparq/calibrate.h"
#include "sparq/dataset.h"  // BatchSource
#include "sparq/graph.h"
#include "sparq/kernel_table.h"
#include "sparq/status.h"

namespace sparq {

class ThreadPool;  // kernels/parallel.h

// ===========================================================================
// Matrices and masks

// A dense row-major float matrix (a weight in its GEMM view, or scores).
struct Matrix {
  int64_t rows = 0, cols = 0;
  std::vector<float> values;  // rows * cols, row-major

  Matrix() = default;
  Matrix(int64_t r, int64_t c, float fill = 0.0f)
      : rows(r), cols(c), values(static_cast<size_t>(r * c), fill) {}
  float& at(int64_t r, int64_t c) { return values[static_cast<size_t>(r * cols + c)]; }
  float at(int64_t r, int64_t c) const { return values[static_cast<size_t>(r * cols + c)]; }
};

// Which weights survive: keep[r * cols + c] is 1 (kept) or 0 (pruned).
struct PruneMask {
  int64_t rows = 0, cols = 0;
  std::vector<uint8_t> keep;

  int64_t pruned() const;  // number of zeros in `keep`
  double sparsity() const;  // pruned() / (rows * cols); 0 for an empty mask
  // The mask of a weight's current zeros: keep = (w != 0).
  static PruneMask FromNonZeros(const Matrix& w);
};

// Sets the pruned weights to exactly 0.0f. InvalidArgument when the shapes differ.
Status ApplyMask(const PruneMask& mask, Matrix* weights);

// ===========================================================================
// Structures: the shape of the zeros

struct PruneStructure {
  enum class Kind {
    kUnstructured,  // any weight may be zero
    kBlock,         // whole block_rows x block_cols blocks of the GEMM view are zero
    kNM,            // in every m consecutive weights of a row, at most n are nonzero
    kChannel,       // whole rows (output channels) are zero, then removed from the graph
    kAuto,          // per layer, the first of PruneOptions::auto_candidates that fits it
  };
  Kind kind = Kind::kUnstructured;
  int block_rows = 1, block_cols = 1;  // kBlock: each >= 1 (rows = outputs, cols = inputs)
  int n = 0, m = 0;                    // kNM: 1 <= n < m

  static PruneStructure Unstructured() { return {}; }
  static PruneStructure Block(int rows, int cols);
  static PruneStructure NM(int n, int m);
  static PruneStructure Channel();
  static PruneStructure Auto();

  // "unstructured", "block4x4", "2:4", "channel", "auto".
  std::string ToString() const;
  // Parses the spellings above (block<R>x<C> with R, C >= 1; <N>:<M> with
  // 1 <= N < M). InvalidArgument says what is wrong and lists what is allowed,
  // e.g. "'4:2' is not valid: in N:M, N (weights kept) must be
  // less than M (group size)".
  static StatusOr<PruneStructure> Parse(const std::string& text);
  // 1 - n/m for kNM; -1 for the others (their sparsity is free).
  double FixedSparsity() const;
  bool operator==(const PruneStructure& o) const;
  bool operator!=(const PruneStructure& o) const { return !(*this == o); }
};

// ===========================================================================
// Kernel speed: which sparse structures pay off on which backend
//
// KernelSpeedTable (sparq/kernel_table.h, shared with the executor): the
// speed-up of each sparse structure over dense, per backend and sparsity.

// ===========================================================================
// Scores: which weights matter least

enum class PruneScore {
  kMagnitude,   // |w|; groups (blocks, channels) by the mean |w| (same as kL1)
  kL1,          // groups by the mean |w| of their elements
  kL2,          // groups by the root mean square of their elements
  kActivation,  // Wanda: |w_ij| * ||X_j||_2 (X_j: input column j over the
                // calibration data; im2col columns for Conv); groups by the mean
};
const char* PruneScoreName(PruneScore s);  // "magnitude", "l1", "l2", "activation"
StatusOr<PruneScore> ParsePruneScore(const std::string& name);

// Element scores s_ij >= 0 of a weight in its GEMM view: |w_ij|, or for
// kActivation |w_ij| * column_norms[j]. For a Conv of G groups column_norms
// may hold G * cols values, group after group (as ActivationColumnNorms
// returns them); row r then uses the block of its group r / (rows / G).
// InvalidArgument when kActivation gets norms of another length or a negative
// or non-finite norm.
StatusOr<Matrix> ElementScores(const Matrix& weights, PruneScore score, const std::vector<double>& column_norms = {});

// The keep-mask of `structure` that prunes the lowest-scoring groups of
// `scores` (element scores, e.g. from ElementScores) at `sparsity`, a fraction
// of elements in [0, 1). Groups are pooled from element scores with the mean,
// or the root mean square for kL2 (`pooling`), so that partial blocks at the
// right and bottom edges compete fairly with whole ones. Ties go to the lower
// index; the result depends only on the inputs.
//
//   unstructured  round(sparsity * rows * cols) elements are pruned.
//   block RxC     blocks tile the matrix from the top-left; the blocks of the
//                 last block-row/-column may be partial and are pruned as a
//                 whole. Blocks are taken lowest score first while taking one
//                 brings the pruned element count closer to the target, so the
//                 achieved sparsity is within half a (largest) block of it.
//   N:M           rows are cut into groups of m consecutive inputs; a ragged
//                 tail of L < m inputs is a group that may keep min(n, L)
//                 (padded with zeros to m it is a valid N:M group). Each group's
//                 lowest (size - kept) elements are the candidates; `sparsity`
//                 may be anything in [0, 1 - n/m] and prunes the lowest-scoring
//                 candidates (so a schedule can ramp N:M up); at 1 - n/m every
//                 candidate is pruned and every group of m keeps at most n.
//   channel       round(sparsity * rows) whole rows are pruned.
//
// Errors: InvalidArgument for a sparsity outside [0, 1), an N:M sparsity above
// 1 - n/m, kAuto, or a score matrix whose size is not rows * cols.
StatusOr<PruneMask> ComputeMask(const PruneStructure& structure, const Matrix& scores, double sparsity,
                                PruneScore pooling = PruneScore::kL1);

// ===========================================================================
// Schedules

enum class PruneSchedule {
  kOneShot,  // [s_f]
  kLinear,   // s_t = s_i + (s_f - s_i) * t / n
  kAgp,      // Zhu & Gupta's cubic ramp: s_t = s_f + (s_i - s_f) * (1 - t/n)^3
};
const char* PruneScheduleName(PruneSchedule s);  // "oneshot", "linear", "agp"
StatusOr<PruneSchedule> ParsePruneSchedule(const std::string& name);

// The sparsity after each step t = 1..steps (the last is `final_sparsity`).
// Errors: InvalidArgument for sparsities outside [0, 1), initial > final,
// steps < 1, or a one-shot schedule with steps != 1.
StatusOr<std::vector<double>> ScheduleSparsities(PruneSchedule schedule, double final_sparsity, int steps,
                                                 double initial_sparsity = 0.0);

// ===========================================================================
// Weighted layers

// A node with a constant weight that pruning may act on (Conv, Gemm, MatMul).
struct WeightedLayer {
  std::string node;     // node name (nodes without a name are never listed)
  std::string op_type;  // "Conv", "Gemm" or "MatMul"
  std::string input;    // the activation the layer multiplies (Conv X, Gemm A, MatMul A)
  std::string output;
  std::string weight;   // the weight's value name (an initializer or a Constant node output)
  // Conv B, Gemm C, or for MatMul the constant of an Add that is the MatMul's
  // only reader and holds one value per output; "" when absent.
  std::string bias;
  Shape weight_shape;
  int64_t rows = 0, cols = 0;  // the GEMM view (cols per group for a grouped Conv)
  int64_t groups = 1;          // Conv `group` (rows and the input channels split into groups)
  bool transposed_view = false;  // the stored weight is [in, out]
  // Why the layer can never be pruned (weight not float32, shared by several
  // nodes, Gemm with transA=1, ...); "" when it can.
  std::string unsupported;

  int64_t params() const { return rows * cols; }
};

// Every Conv / Gemm / MatMul with a constant weight, in graph (topological)
// order. Errors: those of Graph::TopoSort.
StatusOr<std::vector<WeightedLayer>> FindWeightedLayers(const Model& model);

// The layer's weight as its GEMM view [rows, cols], and back. Errors:
// NotFound when the weight is gone; InvalidArgument for a shape mismatch.
StatusOr<Matrix> ReadWeightMatrix(const Model& model, const WeightedLayer& layer);
Status WriteWeightMatrix(Model* model, const WeightedLayer& layer, const Matrix& weights);

// Why `structure` does not fit the layer, so that pruning it would give a
// shape no kernel speeds up; "" when it fits. Block RxC needs rows >= R and
// cols >= C; N:M needs cols to be a multiple of M; unstructured always fits;
// channel fits here (the graph decides, see AnalyzeChannels); auto fits when
// any candidate fits.
std::string StructureMismatch(const WeightedLayer& layer, const PruneStructure& structure);

// ===========================================================================
// Options

// A per-layer override; the first rule that matches a node wins.
struct PruneLayerRule {
  // The node name, or an ECMAScript regex that must match the whole name.
  std::string match;
  std::optional<double> sparsity;             // default: PruneOptions::sparsity (0 = dense)
  std::optional<PruneStructure> structure;    // default: PruneOptions::structure
  // Where the rule was written, for messages (a recipe gives
  // "r.yaml:12: prune.layers[0]"); "" = "pruning rule layers[<index>]".
  std::string origin;
};

enum class PruneScope {
  kLayer,   // every layer reaches its own target
  kGlobal,  // one threshold over all layers (see PruneOptions::scope)
};
const char* PruneScopeName(PruneScope s);  // "layer", "global"

// Cost per layer: the statistics take O(samples * cols^2) time and
// O(cols^2) memory; the solve O(k^3) per distinct kept-column set (Cholesky)
// or O(iterations * rows * cols^2) (conjugate gradients). Example: resnet18,
// 50% unstructured, 4 calibration images of 224x224: a few CPU-minutes on
// 2 cores, most of it in the 512-channel layers (4608 inputs per row).
struct RecoveryOptions {
  // Damping: lambda = damping * mean(diag(H)), H = X^T X, pulling the fit
  // toward the masked weights.
  double damping = 0.01;
  // Shift the bias so the layer's mean output on the calibration data equals
  // the dense layer's (a bias is added to a layer without one when needed).
  bool bias_correction = true;
  // Conv: output positions sampled per sample (spread evenly over the
  // image), bounding the cost of the statistics on large images.
  int64_t max_rows_per_sample = 256;
  // true: layers are recovered one after the other in graph order, each on
  // the inputs of the model whose earlier layers are already recovered (one
  // pass over the data per layer, stopping at the layer). false: one pass
  // gathers every layer's statistics from the pruned, not yet recovered model
  // (faster, less exact, memory O(sum of cols^2)).
  bool sequential = true;
  // Rows keeping at most this many inputs are solved exactly by Cholesky
  // (rows with the same kept columns share one factorization); rows keeping
  // more by Jacobi-preconditioned conjugate gradients from the current
  // weights, 64 rows at a time (one GEMM with H per block and iteration).
  int64_t max_direct_cols = 512;
  int cg_iterations = 30;
  double cg_tolerance = 1e-4;  // relative residual at which a row stops
  // Progress lines, one per recovered layer; optional.
  std::function<void(const std::string&)> log;
  int threads = 0;             // 0 = one per hardware thread
};

struct PruneOptions {
  PruneStructure structure;  // default unstructured
  // Target fraction of zero weights per layer, in [0, 1). With N:M it must be
  // 0 (dense) or 1 - n/m; a rule that sets another structure without a
  // sparsity gets that structure's natural target (1 - n/m for N:M).
  double sparsity = 0.5;
  PruneSchedule schedule = PruneSchedule::kOneShot;
  int steps = 1;  // >= 1; 1 with kOneShot
  // kGlobal: group scores are divided by their layer's mean group score (so a
  // layer of larger weights is not spared for its scale alone), then ranked
  // together; groups are pruned lowest first until `sparsity` of all the
  // scope's weights are zero, no layer going above max_layer_sparsity. Layers
  // with a rule sparsity and N:M layers keep their own targets; channel
  // pruning takes kLayer only (tied channels are ranked per group).
  PruneScope scope = PruneScope::kLayer;
  double max_layer_sparsity = 0.95;  // kGlobal only, in (0, 1)
  PruneScore score = PruneScore::kMagnitude;
  bool recovery = true;  // re-fit kept weights after each step (needs data)
  RecoveryOptions recovery_options;
  // Leave the first and the last weighted layer dense (a rule naming one
  // of them by its exact name still applies).
  bool skip_first_last = true;
  std::vector<PruneLayerRule> layers;
  // kAuto: per layer, among the candidates that fit it (an N:M candidate only
  // when the layer's target is 1 - n/m): with a kernel table, the one whose
  // kernel on `backend` is fastest at the layer's target, and the layer stays
  // dense when none beats dense; without one, the first that fits.
  std::vector<PruneStructure> auto_candidates = {PruneStructure::NM(2, 4), PruneStructure::Block(4, 4),
                                                 PruneStructure::Block(1, 4), PruneStructure::Unstructured()};
  std::shared_ptr<const KernelSpeedTable> kernel_table;  // optional
  std::string backend = "cpu";
  // kChannel: remove the zeroed channels from the graph after the last step.
  bool remove_channels = true;
  int threads = 0;  // executor threads; 0 = one per hardware thread
  // Progress lines ("step 2/4: sparsity 0.41 ..."); optional.
  std::function<void(const std::string&)> log;
};

// InvalidArgument listing every out-of-range option.
Status ValidatePruneOptions(const PruneOptions& options);

// What will happen to one weighted layer.
struct LayerPlan {
  WeightedLayer layer;
  bool prune = false;            // false: left dense, see `reason`
  PruneStructure structure;      // resolved (never kAuto)
  // Final target. With scope global (unstructured and block layers without a
  // rule sparsity) this is the overall target; the ranking sets the layer's.
  double sparsity = 0.0;
  std::string rule;              // the rule's `match` that applied; "" = the defaults
  std::string reason;            // why it is left dense ("" when pruned)
  // Structure auto with a kernel table: the chosen structure's measured
  // speed-up over dense at this sparsity (0 = not chosen that way).
  double kernel_speedup = 0.0;
};

// Resolves every weighted layer's structure and target. A layer that the
// default structure does not fit is left dense with the reason; one that a
// rule naming it exactly asks for is an error. Errors: InvalidArgument (bad
// options, a bad regex, a rule's structure that does not fit the layer it
// names, a rule sparsity outside [0, 1) or not allowed by N:M); NotFound when
// a rule matches no weighted layer (the message lists them). With channel
// pruning, a layer whose channels cannot go (not a traceable producer, a
// locked group, tied to a layer left dense) stays dense with the reason: that
// depends on other layers, so it is never an error.
StatusOr<std::vector<LayerPlan>> PlanPruning(const Model& model, const PruneOptions& options);

// ===========================================================================
// Data and metric callbacks

// BatchSource (sparq/dataset.h): pruning reads the calibration data once per
// step (and per layer with sequential recovery).

// A metric of a candidate model (higher is better: accuracy, agreement,
// SQNR, ...) and whether the quality gate would still pass with it.
struct PruneEvaluation {
  double metric = 0.0;
  bool acceptable = true;  // false: the gate would fail; PruneModel stops
  std::string note;        // why (shown in the report), optional
  // Optional, NaN when not measured: how closely the candidate reproduces the
  // dense model's output (SQNR of output 0 in dB, top-1 agreement in percent).
  // A label metric on a small evaluation set moves by a sample or two either
  // way; these show what recovery does to the layer outputs it re-fits.
  double sqnr_db = std::numeric_limits<double>::quiet_NaN();
  double agreement = std::numeric_limits<double>::quiet_NaN();
};
using PruneMetricFn = std::function<StatusOr<PruneEvaluation>(const Model& model)>;

// ===========================================================================
// Recovery (OBS / SparseGPT-style least squares, no labels, no training)

// Streaming least-squares statistics of one layer (one Conv group) over the
// calibration data: X are the layer's inputs in the pruned model (im2col rows
// for Conv), Y the dense layer's outputs on the dense model's inputs, without
// bias. Memory O(cols^2 + rows * cols), whatever the amount of data.
class LayerStatistics {
 public:
  LayerStatistics(int64_t rows, int64_t cols);

  // Adds n samples: x [n, cols] and y [n, rows], row-major. Accumulates in
  // double; deterministic for any pool. InvalidArgument on NaN/Inf input.
  Status Add(const float* x, const float* y, int64_t n, ThreadPool* pool = nullptr);

  int64_t rows() const { return rows_; }
  int64_t cols() const { return cols_; }
  int64_t samples() const { return samples_; }
  const std::vector<double>& gram() const { return gram_; }    // H = X^T X  [cols, cols]
  const std::vector<double>& cross() const { return cross_; }  // Y^T X      [rows, cols]
  const std::vector<double>& sum_x() const { return sum_x_; }  // [cols]
  const std::vector<double>& sum_y() const { return sum_y_; }  // [rows]
  const std::vector<double>& sum_y2() const { return sum_y2_; }  // [rows]
  // sum over samples of (x . w_r - y_r)^2 for every row r of `w` (the
  // squared output error of weights w, from the statistics alone).
  std::vector<double> SquaredError(const Matrix& w, ThreadPool* pool = nullptr) const;

 private:
  int64_t rows_, cols_, samples_ = 0;
  std::vector<double> gram_, cross_, sum_x_, sum_y_, sum_y2_;
};

struct LayerRecoveryResult {
  double error_before = 0.0;  // relative output error ||Y_hat - Y||^2 / ||Y||^2 of the masked weights
  double error_after = 0.0;   // the same after re-fitting
  int64_t direct_solves = 0;  // Cholesky factorizations (shared by rows with one mask)
  int64_t iterative_rows = 0; // rows solved by conjugate gradients
};

// Re-fits the kept weights of every row r of `weights` (its [rows, cols] GEMM
// view, pruned by `mask`; pruned entries are set to 0.0f and stay so):
//   w_r[K] = argmin ||X_K w - y_r||^2 + lambda ||w - w0_r[K]||^2,  K = kept columns of row r
// i.e. (H_KK + lambda I) w = (X^T y_r)_K + lambda w0_r[K], with w0 the masked
// input weights and lambda = damping * mean(diag H). Damping toward w0 (not
// zero) means the output error on the statistics never increases.
// With bias_shift non-null (and options.bias_correction) it receives, per
// row, mean(y_r) - mean(x . w_r): the amount to add to the *dense* bias so the
// mean output matches the dense layer. Rows without kept weights keep zeros
// (their shift is then mean(y_r)). Errors: InvalidArgument for mismatched
// shapes or statistics without samples.
StatusOr<LayerRecoveryResult> RecoverLayer(const LayerStatistics& stats, const PruneMask& mask,
                                           const RecoveryOptions& options, Matrix* weights,
                                           std::vector<double>* bias_shift = nullptr,
                                           ThreadPool* pool = nullptr);

struct ModelRecoveryReport {
  struct Layer {
    std::string node;
    double error_before = 0.0, error_after = 0.0;  // as LayerRecoveryResult, over all groups
    double bias_shift_rms = 0.0;
    double seconds = 0.0;  // statistics and solve (sequential: the data pass too)
  };
  std::vector<Layer> layers;
  int64_t samples = 0;  // calibration samples (batch rows) read per layer
};

// Recovers the named layers of `pruned` (a copy of `dense` whose weights were
// masked: a weight that is 0.0f counts as pruned) in graph order, running both
// models on `data` with the executor. Biases become dense bias + shift.
// Errors: NotFound for an unknown or unsupported layer name; InvalidArgument
// when the models' layers differ in shape or the data is empty or not finite;
// the executor's errors.
StatusOr<ModelRecoveryReport> RecoverModel(const Model& dense, Model* pruned, const std::vector<std::string>& layers,
                                           const BatchSource& data, const RecoveryOptions& options);

// L2 norm of each input column (im2col column for Conv) of each named layer
// over `data` in `model`: the activation norms of PruneScore::kActivation.
// Returned by node name; Conv groups are concatenated (cols * groups values).
StatusOr<std::map<std::string, std::vector<double>>> ActivationColumnNorms(
    const Model& model, const std::vector<std::string>& layers, const BatchSource& data,
    int64_t max_rows_per_sample = 256, int threads = 0);

// ===========================================================================
// Channel pruning: remove whole output channels and rewrite the consumers

// Output channels of several producers that must be removed together
// (residual Add, Concat followed by Add, depthwise chains), with whether the
// group can be pruned at all.
struct ChannelGroup {
  std::vector<std::string> producers;  // Conv (group 1) / Gemm / MatMul nodes, graph order
  int64_t classes = 0;                 // independent channel sets (a channel removed from all producers at once)
  std::string locked_reason;           // "" when prunable, else why not
};

// Traces every prunable producer's output channels through channel-wise ops
// (BatchNormalization, activations, pools, depthwise Conv, per-channel
// constants, Add/Mul/... of tied tensors, Concat along channels, Flatten or
// Reshape [N, C, 1, 1] -> [N, C]) to the consumers that can drop input
// channels (Conv, Gemm, MatMul). A path to anything else (a graph output, a
// Reshape of a spatial map, Softmax, ...) locks the group, with the reason.
StatusOr<std::vector<ChannelGroup>> AnalyzeChannels(const Model& model);

struct ChannelRemovalReport {
  struct Producer {
    std::string node;
    int64_t channels_before = 0, channels_after = 0;
  };
  std::vector<Producer> producers;  // those that lost channels
  int64_t params_before = 0, params_after = 0;  // all float initializers
  std::vector<std::pair<std::string, std::string>> skipped;  // (producer, reason) with zero rows but locked
};

// Removes every output channel whose weight row is all zero in every producer
// of its channel class, slicing the producers' weights and biases, BatchNorm
// and per-channel constants on the way, and the consumers' input channels.
// A removed channel's constant value (its bias carried through BatchNorm,
// activations, pools) is folded into the consumers' biases: exact for Gemm,
// MatMul and unpadded Conv, approximate at the padded borders of larger
// Conv kernels. Graph value_info is re-inferred. Channels of locked groups
// stay. Errors: those of AnalyzeChannels; NotSupported when a rewrite would
// touch a weight it cannot slice.
StatusOr<ChannelRemovalReport> RemoveZeroChannels(Model* model);

// ===========================================================================
// The progressive pruning loop

struct PruneStepReport {
  int step = 0;                   // 1-based
  double target = 0.0;            // the schedule's sparsity for the default target
  double sparsity = 0.0;          // achieved over the pruned layers' weights
  std::map<std::string, double> layer_sparsity;  // by node
  bool evaluated = false;         // a metric callback was given
  // With recovery, "masked" is the same schedule run without recovery (a
  // model pruned alongside, never re-fitted): the report's comparison.
  // Without recovery both are the pruned model's.
  double metric_masked = 0.0;     // without recovery
  double metric = 0.0;            // with recovery
  PruneEvaluation masked;         // the whole evaluation without recovery
  PruneEvaluation recovered;      // and with it
  bool acceptable = true;
  std::string note;               // the callback's note
  ModelRecoveryReport recovery;   // empty without recovery
  double seconds = 0.0;
};

struct PruneReport {
  bool has_metric = false;
  double dense_metric = 0.0;
  std::vector<LayerPlan> plan;               // per weighted layer (skipped ones with reasons)
  std::vector<PruneStepReport> steps;        // steps run (including a rejected last one)
  int accepted_steps = 0;                    // the returned model is the one after this many steps
  std::map<std::string, double> final_sparsity;  // by node, of the returned model
  bool stopped_early = false;
  std::string stop_message;
  ChannelRemovalReport channels;             // kChannel with remove_channels
  int64_t params_before = 0, params_after = 0, zeros_after = 0;  // float weights of weighted layers

  // Aligned text: the plan, one row per step, final sparsity per layer.
  std::string ToText() const;
};

struct PruneResult {
  Model model;
  PruneReport report;
};

// Prunes `model` progressively: for each step of the schedule, scores the
// weights (with activation norms from `data` for kActivation), masks every
// planned layer at the step's sparsity, evaluates the masked model, recovers
// (options.recovery), evaluates again, and logs the step. When `metric`
// returns acceptable = false the loop stops and the model of the last
// accepted step (the dense model when it is the first) is returned, with a
// message saying which step broke the gate. `data` may be null when neither
// recovery nor activation scores are used, `metric` when no evaluation is
// wanted. Errors: those of ValidatePruneOptions and PlanPruning;
// InvalidArgument when data is needed but missing; the callbacks' errors.
StatusOr<PruneResult> PruneModel(const Model& model, const PruneOptions& options, const BatchSource& data,
                                 const PruneMetricFn& metric);

// ===========================================================================
// Sensitivity analysis and sparsity allocation

struct SensitivityOptions {
  PruneStructure structure;  // kAuto is resolved per layer as in PruneOptions
  PruneScore score = PruneScore::kMagnitude;
  std::vector<double> sparsities = {0.25, 0.5, 0.75, 0.9};  // each in [0, 1)
  bool recovery = false;  // recover the single pruned layer before measuring
  RecoveryOptions recovery_options;
  bool skip_first_last = false;  // true: leave them out of the scan
  // Only layers whose name matches one of these (exact or regex); empty = all.
  std::vector<std::string> layers;
  int threads = 0;
  std::function<void(const std::string&)> log;
};

struct SensitivityPoint {
  std::string layer;
  int64_t params = 0;
  double sparsity = 0.0;  // achieved
  double metric = 0.0;
  double drop = 0.0;      // baseline - metric
};

struct SensitivityTable {
  double baseline = 0.0;                // metric of the unpruned model
  std::vector<SensitivityPoint> points;  // by layer (graph order), then sparsity
  std::vector<std::pair<std::string, std::string>> skipped;  // (layer, reason)
};

// Prunes each layer alone at each sparsity and records the metric drop.
// `data` may be null unless recovery or activation scores are used.
// Errors: InvalidArgument for bad sparsities or a structure that is N:M (its
// sparsity is fixed); NotFound when a `layers` pattern matches nothing; the
// callbacks' errors.
StatusOr<SensitivityTable> SensitivityAnalysis(const Model& model, const SensitivityOptions& options,
                                               const BatchSource& data, const PruneMetricFn& metric);

// "layer,params,sparsity,metric,drop" then one line per point (names quoted
// when they hold a comma or quote).
std::string SensitivityCsv(const SensitivityTable& table);
// A self-contained SVG line chart: metric drop against sparsity, one
// polyline per layer, with axes, ticks, labels and a legend.
std::string SensitivitySvg(const SensitivityTable& table, const std::string& title = "Pruning sensitivity");
// Write the two files atomically. Errors: IOError.
Status WriteSensitivityCsv(const SensitivityTable& table, const std::string& path);
Status WriteSensitivitySvg(const SensitivityTable& table, const std::string& path,
                           const std::string& title = "Pruning sensitivity");

struct SparsityAllocation {
  std::map<std::string, double> sparsity;  // per layer of the table (0 = dense)
  double achieved_sparsity = 0.0;          // over the table's layers' params
  double predicted_drop = 0.0;             // sum of the chosen points' drops
  bool target_met = false;
  std::string message;                     // how the allocation ended

  // Exact-name rules for PruneOptions::layers.
  std::vector<PruneLayerRule> ToRules() const;
};

// Greedy allocation: every layer starts dense; repeatedly the layer whose next
// scanned sparsity costs the least metric drop per removed parameter is raised
// to it, until `target_sparsity` of the table's parameters are zero or the next
// raise would push the summed drop above `budget`. Errors: InvalidArgument for
// a target outside [0, 1), a negative budget or an empty table.
StatusOr<SparsityAllocation> AllocateSparsity(const SensitivityTable& table, double target_sparsity, double budget);

}  // namespace sparq
