// Runs a Model node by node in topological order, on a backend
// (kernels/backend.h: the CPU by default).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "sparq/export.h"
#include "sparq/graph.h"
#include "sparq/kernel_table.h"
#include "sparq/status.h"
#include "sparq/tensor.h"

namespace sparq {

class BackendContext;  // kernels/backend.h (RunOptions::on_device_node_outputs)

using TensorMap = std::map<std::string, Tensor>;

// The graph rewrites an executor applies to its private copy of a model
// before running it (runtime/passes.h). Each backend says which rewrites it
// wants for each profile (kernels/backend.h); these are the CPU's.
enum class GraphProfile {
  // None: every value of the file exists (the spec; RunOptions::on_node_outputs
  // sees every node).
  kAsWritten,
  // Constant subgraphs (weights computed by Constant -> Cast -> ...) become
  // initializers; activations are untouched, so every activation can still be
  // observed. Calibration without a tensor list runs this (PP-OCR's weights
  // are Constant nodes; without it every Conv ran on the reference kernels).
  kFoldedConstants,
  // kFoldedConstants, then zero Pads fold into the following Conv, Relu /
  // Clip / SiLU into the Conv before it and a 1x1 Conv into the depthwise
  // Conv that alone reads it, around ExecutorOptions::keep_values: what
  // calibration of chosen tensors runs (same bits as kAsWritten for the kept
  // values).
  kObserveKept,
  // What deployment runtimes run: two-operand Einsums lowered to MatMul
  // (float32 sums: within rounding of the reference's), kObserveKept's rewrites plus
  // DequantizeLinear -> Conv/MatMul -> QuantizeLinear fused into integer
  // operators (integer sums, one rounding; outputs may differ from the QDQ
  // graph's float path by one quantization step) and the float glue between
  // quantized values into integer operators with the float graph's bits
  // (runtime/passes/qdq_fusion.cc); DequantizeLinear of constants computed once.
  kDeployment,
};

// "as-written", "folded-constants", "observe-kept", "deployment".
SPARQ_API const char* GraphProfileName(GraphProfile profile);

// How an executor runs float16 tensors (runtime/passes/fp16_lowering.h).
enum class Float16Execution {
  // kNative on the "reference" and "cuda" backends (Backend::RunsFloat16AsWritten),
  // kRounded on the others.
  kDefault,
  // As written: float16 ops on float16 rows (the reference kernels, the CUDA
  // backend's float16 rows), which compute each op in float32 and round its
  // output to float16 (on the CPU: the spec; slow).
  kNative,
  // Lowered to float32 once (weights converted at Create) so the fast
  // kernels and fusions take every node, with each value that was float16
  // rounded to float16 after its operator (F16C rows): float16's results
  // and its overflow to infinity (which the non-finite gate reports), as
  // onnxruntime computes float16 on a CPU; fused operators round their
  // output only.
  kRounded,
  // Lowered to float32 with no rounding inside the graph: more accurate than
  // float16 and blind to its overflow (inputs and outputs keep their types).
  kFloat32,
};

struct SPARQ_API ExecutorOptions {
  int threads = 0;  // CPU worker threads; 0 = one per hardware thread
  // Where the nodes run (kernels/backend.h): "cpu" (the fast CPU kernels
  // where they take a node, the reference kernels elsewhere, with identical
  // results, integer kernels bit for bit), "reference" (kernels/ref alone:
  // the spec), "cuda" (CUDA builds with a GPU), "auto" (cuda when
  // available, else cpu) or a backend a program registered. Nodes the
  // backend's rows do not take run on the CPU, with copies inserted between
  // devices. Errors at Create: an unknown name, or a backend that cannot
  // run on this machine (e.g. "cuda" without a GPU).
  std::string backend = "cpu";
  // Which graph rewrites run before the graph does; see GraphProfile.
  // Rewritten-away values cannot be RunOptions::extra_outputs.
  GraphProfile profile = GraphProfile::kAsWritten;
  // Place the host outputs of each run in one arena planned per input
  // shapes (runtime/memory_plan.h): the first Run at new shapes records
  // what each node asks for, later Runs at those shapes reuse one buffer
  // laid out from each value's last use. Same results either way; runs
  // with RunOptions::extra_outputs or on_node_outputs are not planned.
  bool plan_memory = true;
  // GPU backends: float32 MatMul / Gemm / Conv on tensor cores with TF32
  // inputs (10-bit mantissa products, float32 sums; about 6x faster than
  // exact FP32 on an H100/H200). Off: exact FP32. The CPU ignores it.
  bool allow_tf32 = false;
  // Replay device graphs (CUDA graphs) where the backend captures them
  // (BackendContext::SupportsGraphCapture) and every node runs on it: the
  // first Run at new input shapes runs node by node, the second captures
  // the nodes into one graph (and replays it), later Runs at those shapes
  // copy the inputs into the graph's fixed device buffers and replay it.
  // Runs with a profile, RunOptions::extra_outputs or on_node_outputs run
  // node by node. A capture that fails (a node that needs the host) makes
  // those shapes run node by node, with the reason in GraphCapture(). Graphs
  // are kept for the first 16 input shapes (each holds its run's buffers);
  // runs at further shapes run node by node. Runs
  // of one executor that can capture take turns (they share one stream).
  // No effect on the CPU.
  bool cuda_graphs = true;
  // How float16 models run; see Float16Execution.
  Float16Execution float16 = Float16Execution::kDefault;
  // Values the profile's rewrites must leave in the graph, whatever they
  // fuse or fold around them (they are treated as graph outputs while those
  // rewrites run; the float16 lowering runs before them).
  // Calibration lists the tensors it observes here, so that everything else
  // fuses: a Conv + Clip whose Clip output alone is observed runs as one
  // node, with the same bits.
  std::vector<std::string> keep_values = {};
  // With it, a kept value may still be folded away where the rewrite says
  // how to rebuild it from a value the run still computes (a zero Pad folded
  // into the Conv that reads it: its output is its input with zeros around
  // it); that source is kept instead and Executor::ValueAliases lists the
  // pair. Graph outputs are never folded. Calibration sets it: the Pad's
  // output is observed as its input and the padding's zeros.
  bool keep_values_as_aliases = false;
  // Speed of the sparse kernels vs dense (sparq/kernel_table.h): a QLinearConv /
  // QLinearMatMul with pruned int8 weights runs a sparse kernel only when this
  // table says its structure beats dense at the weights' sparsity (the row
  // measured at the highest sparsity at or below it; none: dense). nullptr:
  // KernelSpeedTable::Default(), compiled in from bench/kernel_speedups.csv.
  std::shared_ptr<const KernelSpeedTable> kernel_table = nullptr;
};

// A value that the executor's rewrites folded away, and how it is rebuilt
// from a value the run still computes (Executor::ValueAliases).
struct SPARQ_API ValueAlias {
  std::string value;   // the folded value (e.g. a zero Pad's output)
  std::string source;  // what it is made of: a node output or a graph input
  // `value` is `source` with this many zeros before, then after, each axis
  // (begins, then ends; 2 * rank entries): a constant-mode zero Pad.
  std::vector<int64_t> zero_pads;
  // The number of values of `value` besides the source's, for a source of
  // `shape`; -1 when the pads do not fit its rank.
  int64_t ZerosAround(const Shape& shape) const;
};

// Which kernel runs one node (Executor::NodeKernels, `sparq eval --verbose`).
struct SPARQ_API NodeKernel {
  std::string node;     // node name (or first output when unnamed)
  std::string op_type;
  std::string kernel;   // KernelDef::name; "copy" for the copies between devices
  std::string backend;  // the backend that runs it ("cpu", "cuda", ...)
};

struct SPARQ_API RunOptions {
  // Called after each node with the node and its outputs (calibration,
  // debugging), as host tensors: copies when the node ran on a device. A
  // non-OK return stops the run with that Status.
  std::function<Status(const Node&, const std::vector<Tensor>&)> on_node_outputs;
  // Optional: called before on_node_outputs for each node that ran on a
  // device (not the host), with its outputs where they live and the context
  // that made them (BackendContext, kernels/backend.h: internal to sparq's
  // layers). Outputs it marks in `consumed` (sized to the outputs, all false)
  // are not copied to the host: on_node_outputs gets an undefined Tensor in
  // their place. Calibration bins its histograms this way on a GPU, so only
  // counts come back. A non-OK return stops the run with that Status.
  std::function<Status(const Node&, const std::vector<Tensor>&, BackendContext&, std::vector<bool>* consumed)>
      on_device_node_outputs;
  // Intermediate values to return besides the graph outputs.
  std::vector<std::string> extra_outputs;
};

// Which kernel ran a node, and how long it took (filled by Run when asked).
struct SPARQ_API NodeProfile {
  std::string node;     // node name (or first output when unnamed)
  std::string op_type;
  std::string kernel;   // KernelDef::name
  double micros = 0.0;
  double start_micros = 0.0;  // when the node started, since the start of Run
};

// How an executor uses device graphs (Executor::GraphCapture).
struct SPARQ_API GraphCaptureInfo {
  // Empty when its steps can be captured (ExecutorOptions::cuda_graphs);
  // else why not, e.g. "the backend does not capture graphs" on the CPU.
  std::string why_not;
  int64_t captured = 0;  // graphs captured, one per input shapes
  int64_t replays = 0;   // runs that replayed a graph (the capturing run included)
  // Captures that failed, each with its reason; those shapes run node by node.
  std::vector<std::string> declined;
};

class SPARQ_API Executor {
 public:
  // Prepares `model` for running: resolves a kernel for every node. Errors:
  // NotSupported naming the first node whose op/opset has no kernel;
  // InvalidArgument for graphs that reference undefined values.
  static StatusOr<std::unique_ptr<Executor>> Create(const Model& model, const ExecutorOptions& options = {});
  ~Executor();

  // Runs the graph. `inputs` must hold every graph input (inputs that have an
  // initializer default may be left out), with the declared element type and
  // rank and every fixed dimension. Fills `outputs` with the graph outputs
  // (and RunOptions::extra_outputs). Errors name the input or node at fault.
  //
  // Thread safety: Run may be called from several threads at once on one
  // Executor (tested): a call only reads the executor's prepared state and
  // keeps its values to itself; RunOptions callbacks run on the calling
  // thread. The parallel loops of concurrent calls take turns on the
  // executor's one thread pool, so concurrent calls are safe but not faster
  // than one: for throughput, give each thread its own Executor. Run must
  // not overlap the executor's destruction.
  Status Run(const TensorMap& inputs, TensorMap* outputs, const RunOptions& options = {},
             std::vector<NodeProfile>* profile = nullptr);

  const Model& model() const;
  const std::vector<std::string>& input_names() const;
  const std::vector<std::string>& output_names() const;
  int num_threads() const;
  // The backend it runs on ("cpu", "reference", "cuda", ...).
  const std::string& backend() const;
  // The kernel chosen for each node, in execution order.
  std::vector<NodeKernel> NodeKernels() const;
  // The kept values (ExecutorOptions::keep_values) that the rewrites folded
  // away as aliases of another value (ExecutorOptions::keep_values_as_aliases),
  // in graph order; empty without that option. Such a value is never an
  // on_node_outputs output: a caller observing it observes its source.
  const std::vector<ValueAlias>& ValueAliases() const;
  // Whether runs replay device graphs, and how often they did (thread-safe).
  GraphCaptureInfo GraphCapture() const;

 private:
  struct Impl;
  explicit Executor(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Checks that every node of `model` has a reference kernel; the error lists
// each unsupported (op, opset) with the node that uses it.
SPARQ_API Status CheckSupported(const Model& model);

}  // namespace sparq
