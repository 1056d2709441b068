// The dispatch table: which function runs an (op, domain, opset) on which
// backend. Adding a kernel is adding a row.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "kernels/op_context.h"
#include "sparq/kernel_table.h"

namespace sparq {

// The domain of sparq's internal operators: nodes that the executor's fusion
// passes create in its private copy of a model, never written to a file.
inline constexpr const char* kSparqDomain = "sparq";

// What a prepare step may consult besides the node (from ExecutorOptions).
struct PrepareContext {
  // Speed of sparse kernels vs dense: a layer runs a sparse kernel only where
  // it is measured faster. Never null when the executor calls a prepare step.
  const KernelSpeedTable* kernel_table = &KernelSpeedTable::Default();
  // The element type of each node input where the graph says it (an
  // initializer, a graph input or output, value_info from shape inference),
  // DataType::kUndefined where it does not (a value a rewrite made) or the
  // input is absent: a row may decline a type it cannot run here, so that the
  // node is partitioned to another backend instead of failing at run time.
  std::vector<DataType> input_types;
};

// What a prepare step returns: the state the kernel reads through
// OpContext::prepared(), and the name of the kernel the node will run when it
// is not the row's name (a row that picks among kernels, e.g. dense gemm_s8 or
// spmm_bsr4x4_s8 by the weights' sparsity), for `eval --verbose` and profiles.
struct PreparedKernel {
  std::shared_ptr<const void> state;
  std::string kernel_name;  // "" = KernelDef::name
};

// Optional per-node preparation of a kernel row, run once when an executor is
// created: gets the node and its constant inputs (constants[i] is input i
// when it is an initializer that run inputs cannot override, else nullptr)
// and returns state such as weights packed for a fast kernel. NotSupported
// means "this row does not take this node": the executor tries the next
// matching row.
using PrepareFn = std::function<StatusOr<PreparedKernel>(const Node& node, const std::vector<const Tensor*>& constants,
                                                         const PrepareContext& context)>;

// Adapts a prepare step that needs no PrepareContext and runs its row's own
// kernel (PreparedKernel::kernel_name empty).
using SimplePrepareFn = StatusOr<std::shared_ptr<const void>> (*)(const Node& node,
                                                                  const std::vector<const Tensor*>& constants);
PrepareFn WithoutContext(SimplePrepareFn fn);
// The same, naming the kernel the prepared state runs: kernel_name(state), e.g.
// the row of kernels/cpu/dispatch.h that the state's function pointer came from.
PrepareFn WithoutContext(SimplePrepareFn fn, std::string (*kernel_name)(const void* state));

// One row: a function that runs an (op, domain, opset range) on the backend
// whose registry holds it. Among the rows matching a node, the executor tries
// them by descending `priority` (ties are a registration error: the order
// never depends on registration order), the first whose prepare step takes
// the node wins, in CUTLASS's order: can it implement the node (prepare's
// NotSupported with a reason), what it needs (its state), then run.
struct KernelDef {
  std::string op_type;
  std::string domain;  // "" = default ONNX domain
  int since_opset = 1;   // first opset version this function implements
  int until_opset = 99;  // last one (inclusive)
  KernelFn fn = nullptr;
  std::string name;  // e.g. "ref", "gemm_s8s8_avx512vnni"; shown by `eval --verbose`
  PrepareFn prepare = nullptr;  // optional, see PrepareFn
  // Higher runs first; the reference kernels are kPriorityReference, the
  // fast CPU rows above them (kernels/registry.cc says which above which).
  int priority = 0;
  // Inputs this row reads on the host even on a device backend (shape,
  // axes and index inputs that decide output shapes): bit i = input i.
  uint32_t host_inputs = 0;
  // Inputs output 0 may be written over (bit i = input i), for the
  // executor's memory plan (runtime/memory_plan.h): when input i dies at this
  // node and has output 0's bytes, the plan may give output 0 input i's
  // buffer. A row sets a bit only if it reads each element of that input
  // before it writes the output element at the same index, and no other (an
  // elementwise loop with the input's layout; shapes it handles otherwise,
  // e.g. by the reference kernel, allocate their own output).
  uint32_t overwritable_inputs = 0;
};

// The scale of priorities: the reference kernels at the bottom, fast rows
// at kPriorityFast, and where an op has several fast rows, the row that must
// see the node first above the others (a sparse row before the dense one
// that would take the same weights; a depthwise row before the general Conv).
inline constexpr int kPriorityReference = -100;
inline constexpr int kPriorityFast = 0;
inline constexpr int kPriorityFirst = 20;   // e.g. sparse rows
inline constexpr int kPrioritySecond = 10;  // e.g. depthwise before dense

class KernelRegistry {
 public:
  // Adds a row. Two rows of one op and domain with overlapping opsets and the
  // same priority make the order ambiguous: CheckPriorities reports them.
  void Add(KernelDef def);
  // InvalidArgument naming the first two rows of one op whose opset ranges
  // overlap at the same priority (tested for every built-in registry).
  Status CheckPriorities() const;
  // The highest-priority row for `op_type` in `domain` at `opset`, or nullptr.
  const KernelDef* Find(const std::string& op_type, const std::string& domain, int64_t opset) const;
  // Every row for `op_type` in `domain` at `opset`, highest priority first.
  std::vector<const KernelDef*> FindMatching(const std::string& op_type, const std::string& domain,
                                             int64_t opset) const;
  // Opset range covered for an op, as "since..until" pairs; empty if unknown.
  std::vector<const KernelDef*> FindAll(const std::string& op_type, const std::string& domain) const;
  // Sorted op types of the default domain that have at least one kernel.
  std::vector<std::string> OpTypes() const;
  // Every row, in the order added.
  const std::vector<KernelDef>& defs() const { return defs_; }

  // The reference kernels (kernels/ref), registered on first use.
  static const KernelRegistry& Reference();
  // The "cpu" backend's rows (kernels/backend.h): the fast CPU kernels
  // (kernels/cpu) above the reference kernels (kPriorityReference).
  static const KernelRegistry& Default();

 private:
  std::vector<KernelDef> defs_;
};

// Runs the reference kernel of ctx's node (the "ref" row of its op at its
// opset in Reference()): what a fast row does with inputs outside its fast path.
Status RunReferenceKernel(OpContext& ctx);

// Per-file registration hooks of kernels/ref, called by Reference().
void RegisterElementwiseOps(KernelRegistry& r);
void RegisterReduceOps(KernelRegistry& r);
void RegisterNnOps(KernelRegistry& r);
void RegisterTensorOps(KernelRegistry& r);
void RegisterQuantOps(KernelRegistry& r);
void RegisterRecurrentOps(KernelRegistry& r);  // RNN, GRU, LSTM: kernels/ref/recurrent.cc
void RegisterControlFlowOps(KernelRegistry& r);  // If, Loop, Scan: kernels/ref/control_flow.cc
// The fast CPU rows with a prepare step (kernels/cpu), called by Default().
void RegisterPreparedCpuQuantOps(KernelRegistry& r);
void RegisterPreparedCpuSparseOps(KernelRegistry& r);
void RegisterPreparedCpuQuantConvOps(KernelRegistry& r);
void RegisterCpuConvIntegerOps(KernelRegistry& r);  // ConvInteger, sparq.ConvIntegerToFloat: kernels/cpu/conv_integer.cc
void RegisterPreparedCpuDenseF32Ops(KernelRegistry& r);  // after the sparse rows: they take pruned weights first
void RegisterPreparedCpuDepthwiseConvOps(KernelRegistry& r);
void RegisterCpuQdqGlueOps(KernelRegistry& r);
void RegisterCpuFakeQuantFp8Ops(KernelRegistry& r);  // sparq.FakeQuantFp8: kernels/cpu/fake_quant_fp8.cc
void RegisterCpuBinaryF32Ops(KernelRegistry& r);
void RegisterCpuActivationF32Ops(KernelRegistry& r);  // Erf, Softmax, Pow(x, 2): kernels/cpu/activation_f32.h
void RegisterCpuNormF32Ops(KernelRegistry& r);        // BatchNormalization, LayerNormalization: kernels/cpu/norm_f32.h
void RegisterCpuConvTransposeF32Ops(KernelRegistry& r);  // ConvTranspose, stride = kernel: kernels/cpu/conv_transpose_f32.cc
void RegisterCpuResizeOps(KernelRegistry& r);            // Resize, nearest by whole factors: kernels/cpu/resize_nearest.cc
void RegisterCpuPadOps(KernelRegistry& r);               // Pad (constant, edge, reflect) as row copies: kernels/cpu/pad.cc
void RegisterCpuTensorCopyOps(KernelRegistry& r);        // Concat, Split as block copies: kernels/cpu/tensor_copy.cc
void RegisterCpuAttentionF32Ops(KernelRegistry& r);      // sparq.Attention: kernels/cpu/attention_f32.h
void RegisterCpuRecurrentF32Ops(KernelRegistry& r);      // LSTM, GRU on the FP32 GEMM: kernels/cpu/recurrent_f32.cc
void RegisterCpuMatMulNBitsOps(KernelRegistry& r);       // com.microsoft MatMulNBits: kernels/cpu/matmul_nbits_f32.cc

}  // namespace sparq
