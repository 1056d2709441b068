// The backend seam: a place where kernels run (the CPU, the reference
// kernels, a GPU), seen by the executor through one small interface, as
// ggml-backend and onnxruntime's execution providers do.
//
//   Backend            what the executor asks: name, device, kernel rows,
//   (one per process)  the graph passes it wants per profile, Available()
//        |
//        | CreateContext(options), once per executor
//        v
//   BackendContext     what kernels use while they run: the CPU's thread
//                      pool, or a CUDA stream and library handles; device
//                      buffers (Allocate) and host <-> device copies
//
// The executor assigns each node to the chosen backend when one of its rows
// takes the node (KernelRegistry::Select: explicit priorities, then each
// row's prepare step may decline with NotSupported and a reason), else to the
// CPU; where a value crosses devices it inserts a copy node
// (sparq.CopyToDevice / sparq.CopyToHost), shown by `sparq eval --verbose`.
//
// Adding a backend touches neither runtime/ nor the CPU rows: implement
// Backend and BackendContext, give it a KernelRegistry of rows, and
// RegisterBackend it (tests/runtime/backend_seam_test.cc registers one from a
// test). The CUDA backend (kernels/cuda/) registers itself as "cuda" in CUDA
// builds.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "sparq/executor.h"
#include "sparq/status.h"
#include "sparq/tensor.h"

namespace sparq {

class KernelRegistry;
class ThreadPool;

// What an executor gives a backend when it makes its context.
struct BackendOptions {
  int threads = 0;  // CPU worker threads; 0 = one per hardware thread
  // FP32 GEMMs and convolutions on tensor cores with TF32 inputs (10-bit
  // mantissa products, float32 sums): about 6x faster on an H100/H200, within
  // a TF32 tolerance of the reference instead of FP32's. The CPU ignores it.
  bool allow_tf32 = false;
};

// Per-executor state of a backend, shared by every Run of that executor.
// Implementations must be safe to call from concurrent Runs.
class BackendContext {
 public:
  virtual ~BackendContext() = default;
  // The device this context's buffers live on.
  virtual Device device() const = 0;
  // The thread pool CPU kernels parallelize on; null runs them inline.
  virtual ThreadPool* pool() const { return nullptr; }
  // An uninitialized buffer of `bytes` on device(), freed by its deleter
  // (64-byte aligned on the host, 256 on a GPU). Errors name the device.
  virtual StatusOr<std::shared_ptr<uint8_t>> Allocate(size_t bytes) = 0;
  // Copies `bytes` between the host and device() (both buffers exist).
  // Asynchronous on a GPU stream: Synchronize before reading `host`.
  virtual Status CopyFromHost(const void* host, void* device, size_t bytes) = 0;
  virtual Status CopyToHost(const void* device, void* host, size_t bytes) = 0;
  // Waits for everything queued on this context.
  virtual Status Synchronize() { return Status::OK(); }

  // Device graphs (CUDA graphs), optional; the default: not supported. An
  // executor whose nodes all run on this context captures them once per
  // input shapes and replays them (runtime/executor.cc, graph_capture.h):
  //   BeginCapture   from now on the work this thread queues here is
  //                  recorded, not run; buffers Allocate hands out until
  //                  EndCapture are kept by the graph, so their addresses
  //                  stay valid for every replay
  //   EndCapture     the recorded work as one instantiated graph, owning
  //                  those buffers (an opaque handle for Replay)
  //   AbortCapture   ends a failed capture and drops what it recorded
  //   Replay         queues one run of the graph (asynchronous, like a kernel)
  // While capturing, work that needs the host (CopyToHost, Synchronize)
  // fails with NotSupported: the executor then runs those shapes plainly.
  virtual bool SupportsGraphCapture() const { return false; }
  virtual Status BeginCapture() { return Status::NotSupported(device().ToString() + " does not capture graphs"); }
  virtual StatusOr<std::shared_ptr<void>> EndCapture() {
    return Status::NotSupported(device().ToString() + " does not capture graphs");
  }
  virtual void AbortCapture() {}
  virtual Status Replay(const void* graph) {
    (void)graph;
    return Status::NotSupported(device().ToString() + " does not capture graphs");
  }

  // Calibration's statistics of a float32 tensor on device(), reduced where
  // it lives so only the results cross to the host (optional; without them
  // calibration copies each observed value to the host and bins it there).
  // Both give exactly the host's results (kernels/ref/quantize.h), up to the
  // sign of a zero bound (MinMaxRef keeps the first of -0 / +0 it meets; the
  // CPU's SIMD rows already differ there by ISA):
  //   MinMaxF32        *lo / *hi widened by every non-NaN value (MinMaxRef)
  //   AbsHistogramF32  counts[min(int64(|x| * scale), last)] += 1 for each
  //                    non-NaN x (AbsHistogramRef; counts holds last + 1 bins
  //                    and is added to); returns the number of NaNs
  // Synchronous: the results are on the host when they return. The defaults
  // return NotSupported; HasCalibrationStats says whether they do.
  virtual bool HasCalibrationStats() const { return false; }
  virtual Status MinMaxF32(const Tensor& t, float* lo, float* hi);
  virtual StatusOr<int64_t> AbsHistogramF32(const Tensor& t, double scale, int64_t last, int64_t* counts);

  // A tensor of `type` and `shape` on device(), contents unspecified.
  StatusOr<Tensor> AllocateTensor(DataType type, Shape shape);
};

class Backend {
 public:
  virtual ~Backend() = default;
  // "cpu", "reference", "cuda": what --backend and evaluate.backend spell.
  virtual std::string name() const = 0;
  // The device its kernels read and write.
  virtual Device device() const = 0;
  // OK when it can run on this machine now; else why not (e.g. "no CUDA
  // device"), which `--backend NAME` reports as a clear error.
  virtual Status Available() const { return Status::OK(); }
  // Its kernel rows. A node no row takes runs on the CPU backend.
  virtual const KernelRegistry& rows() const = 0;
  // The graph rewrites (runtime/passes.h names) it wants for `profile`, in
  // order. The default: none for kAsWritten, FoldConstantSubgraphs for
  // kFoldedConstants, every CPU deployment rewrite for kDeployment.
  virtual std::vector<std::string> Passes(GraphProfile profile) const;
  // Whether ExecutorOptions::float16 kDefault runs float16 models as written
  // here (its rows compute float16: the reference's, and the CUDA rows of
  // rows_f16.cc) rather than lowered to float32 with a rounding after every
  // value (the CPU's fast rows are float32). The default: false.
  virtual bool RunsFloat16AsWritten() const { return false; }
  // A context for one executor.
  virtual StatusOr<std::shared_ptr<BackendContext>> CreateContext(const BackendOptions& options) const = 0;
};

// The backends of this process by name. Built in: "cpu" (the fast CPU rows
// ahead of the reference kernels), "reference" (kernels/ref alone) and, in
// CUDA builds, "cuda". RegisterBackend adds another (InvalidArgument when its
// name is taken); FindBackend returns nullptr for an unknown name.
Status RegisterBackend(std::shared_ptr<const Backend> backend);
const Backend* FindBackend(const std::string& name);
std::vector<std::string> BackendNames();
// Resolves what a user asked for: a registered name, or "auto" (the CUDA
// backend when it is Available, else the CPU; *note says which and why).
// Errors: InvalidArgument for an unknown name (listing the known ones); the
// backend's Available() status when it cannot run here.
StatusOr<const Backend*> ResolveBackend(const std::string& name, std::string* note = nullptr);

// The CPU's thread pool for `threads` workers (0 = one per hardware thread):
// one per thread count per process, shared by every executor and never
// destroyed, so making executors (one per candidate layer in the accuracy
// fallback) spawns no threads.
ThreadPool* SharedThreadPool(int threads);

// Host <-> device copies of whole tensors through `context` (synchronous:
// the copy has completed when they return).
StatusOr<Tensor> CopyTensorToDevice(BackendContext& context, const Tensor& host);
StatusOr<Tensor> CopyTensorToHost(BackendContext& context, const Tensor& device);

// The CUDA backend when this build has one (kernels/cuda/), else nullptr;
// called once by the backend registry.
std::shared_ptr<const Backend> MakeCudaBackend();

}  // namespace sparq
