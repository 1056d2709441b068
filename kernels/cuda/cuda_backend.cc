// The CUDA backend: CudaContext (stream, library handles, buffer pool) and
// CudaBackend (name "cuda"), see cuda_context.h.
#include <cstring>
#include <string>
#include <vector>

#include "kernels/cuda/cuda_context.h"
#include "kernels/cuda/cuda_rows.h"
#include "kernels/cuda/cuda_status.h"
#include "kernels/cuda/launch.h"
#include "kernels/registry.h"

namespace sparq {
namespace cuda {
namespace {

constexpr size_t kAlignment = 256;

// Bucket of a request: 256-byte multiples up to 64 KiB, then four buckets per
// power of two (at most 25% unused), so buffers of nearby sizes are shared.
size_t BucketOf(size_t bytes) {
  if (bytes == 0) bytes = 1;
  size_t b = (bytes + kAlignment - 1) / kAlignment * kAlignment;
  if (b <= (size_t{64} << 10)) return b;
  size_t octave = size_t{1} << (63 - __builtin_clzll(b));
  const size_t step = octave / 4;
  return (b + step - 1) / step * step;
}

}  // namespace

DeviceBufferPool::~DeviceBufferPool() {
  if (cudaSetDevice(device_) != cudaSuccess) return;
  for (auto& [bucket, buffers] : free_) {
    for (void* p : buffers) (void)cudaFree(p);
  }
}

size_t DeviceBufferPool::reserved_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return reserved_;
}

void DeviceBufferPool::Release(void* ptr, size_t bucket) {
  std::lock_guard<std::mutex> lock(mu_);
  free_[bucket].push_back(ptr);
}

StatusOr<std::shared_ptr<uint8_t>> DeviceBufferPool::Allocate(const std::shared_ptr<DeviceBufferPool>& pool,
                                                             size_t bytes) {
  const size_t bucket = BucketOf(bytes);
  void* ptr = nullptr;
  {
    std::lock_guard<std::mutex> lock(pool->mu_);
    auto it = pool->free_.find(bucket);
    if (it != pool->free_.end() && !it->second.empty()) {
      ptr = it->second.back();
      it->second.pop_back();
    }
  }
  if (ptr == nullptr) {
    SPARQ_CUDA_RETURN_IF_ERROR(cudaSetDevice(pool->device_));
    cudaError_t err = cudaMalloc(&ptr, bucket);
    if (err == cudaErrorMemoryAllocation) {
      // Out of memory: give the idle buffers back to the driver and try once more.
      (void)cudaGetLastError();
      std::lock_guard<std::mutex> lock(pool->mu_);
      for (auto& [b, buffers] : pool->free_) {
        for (void* p : buffers) {
          (void)cudaFree(p);
          pool->reserved_ -= b;
        }
        buffers.clear();
      }
      err = cudaMalloc(&ptr, bucket);
    }
    if (err != cudaSuccess) {
      return ToStatus(err, ("cudaMalloc(" + std::to_string(bucket) + " bytes) on cuda:" + std::to_string(pool->device_))
                               .c_str());
    }
    std::lock_guard<std::mutex> lock(pool->mu_);
    pool->reserved_ += bucket;
  }
  std::weak_ptr<DeviceBufferPool> weak = pool;
  const int device = pool->device_;
  return std::shared_ptr<uint8_t>(static_cast<uint8_t*>(ptr), [weak, bucket, device](uint8_t* p) {
    if (auto live = weak.lock()) {
      live->Release(p, bucket);
    } else if (cudaSetDevice(device) == cudaSuccess) {
      (void)cudaFree(p);  // the pool is gone: the buffer outlived its executor
    }
  });
}

StatusOr<std::shared_ptr<CudaContext>> CudaContext::Create(int device, const CudaBackendOptions& options) {
  std::shared_ptr<CudaContext> ctx(new CudaContext());
  ctx->device_ = device;
  ctx->options_ = options;
  SPARQ_CUDA_RETURN_IF_ERROR(cudaSetDevice(device));
  int major = 0, minor = 0;
  SPARQ_CUDA_RETURN_IF_ERROR(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  SPARQ_CUDA_RETURN_IF_ERROR(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device));
  ctx->sm_ = major * 10 + minor;
  if (ctx->sm_ < 80) {
    return Status::NotSupported("cuda:" + std::to_string(device) + " is sm_" + std::to_string(ctx->sm_) +
                                "; sparq's CUDA kernels are built for sm_80 and sm_90");
  }
  SPARQ_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&ctx->stream_, cudaStreamNonBlocking));
  SPARQ_CUDA_RETURN_IF_ERROR(cublasLtCreate(&ctx->lt_));
  SPARQ_CUDA_RETURN_IF_ERROR(cusparseCreate(&ctx->sparse_));
  SPARQ_CUDA_RETURN_IF_ERROR(cusparseSetStream(ctx->sparse_, ctx->stream_));
  ctx->pool_ = std::make_shared<DeviceBufferPool>(device);
  return ctx;
}

CudaContext::~CudaContext() {
  // Nothing can report an error from here: the work queued is waited for, then everything is released.
  if (stream_ != nullptr) (void)cudaStreamSynchronize(stream_);
  gemms_.clear();  // their descriptors before the handle
  if (sparse_ != nullptr) (void)cusparseDestroy(sparse_);
  if (lt_ != nullptr) (void)cublasLtDestroy(lt_);
  pool_.reset();  // buffers still held by tensors are freed when those go
  if (stream_ != nullptr) (void)cudaStreamDestroy(stream_);
}

namespace {

// Runs `fn` with this thread's capture mode relaxed: cudaMalloc and
// cudaHostAlloc are refused inside a thread-local capture, allowed in a
// relaxed one (they are not recorded into the graph).
template <typename Fn>
auto Relaxed(Fn fn) -> decltype(fn()) {
  cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
  SPARQ_CUDA_RETURN_IF_ERROR(cudaThreadExchangeStreamCaptureMode(&mode));
  auto result = fn();
  (void)cudaThreadExchangeStreamCaptureMode(&mode);
  return result;
}

// An instantiated graph and the buffers its kernels read and write.
struct CapturedGraph {
  cudaGraphExec_t exec = nullptr;
  std::vector<std::shared_ptr<void>> held;
  ~CapturedGraph() {
    // A launch still in flight completes first (cudaGraphExecDestroy frees it then).
    if (exec != nullptr) (void)cudaGraphExecDestroy(exec);
  }
};

Status NotWhileCapturing(const char* what) {
  return Status::NotSupported(std::string(what) + " inside a CUDA graph capture (a node needs the host)");
}

}  // namespace

void CudaContext::Hold(std::shared_ptr<void> p) {
  std::lock_guard<std::mutex> lock(capture_mu_);
  held_.push_back(std::move(p));
}

StatusOr<std::shared_ptr<uint8_t>> CudaContext::Allocate(size_t bytes) {
  if (!capturing_.load()) return DeviceBufferPool::Allocate(pool_, bytes);
  StatusOr<std::shared_ptr<uint8_t>> buffer =
      Relaxed([&]() -> StatusOr<std::shared_ptr<uint8_t>> { return DeviceBufferPool::Allocate(pool_, bytes); });
  if (buffer.ok()) Hold(*buffer);
  return buffer;
}

Status CudaContext::CopyFromHost(const void* host, void* device, size_t bytes) {
  if (bytes == 0) return Status::OK();
  if (capturing_.load()) {
    // The graph copies from pinned memory it keeps: `host` may be freed
    // before any replay, and pageable copies do not belong in a graph.
    void* staging = nullptr;
    SPARQ_RETURN_IF_ERROR(Relaxed([&]() -> Status {
      SPARQ_CUDA_RETURN_IF_ERROR(cudaHostAlloc(&staging, bytes, cudaHostAllocDefault));
      return Status::OK();
    }));
    std::shared_ptr<void> kept(staging, [](void* p) { (void)cudaFreeHost(p); });
    std::memcpy(staging, host, bytes);
    Hold(kept);
    SPARQ_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(device, staging, bytes, cudaMemcpyHostToDevice, stream_));
    return Status::OK();
  }
  // From pageable memory the call returns once `host` has been read (staged),
  // so the caller may free it right away.
  SPARQ_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(device, host, bytes, cudaMemcpyHostToDevice, stream_));
  return Status::OK();
}

Status CudaContext::CopyToHost(const void* device, void* host, size_t bytes) {
  if (capturing_.load()) return NotWhileCapturing("CopyToHost");
  if (bytes == 0) return Status::OK();
  SPARQ_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(host, device, bytes, cudaMemcpyDeviceToHost, stream_));
  return Status::OK();
}

Status CudaContext::Synchronize() {
  if (capturing_.load()) return NotWhileCapturing("Synchronize");
  SPARQ_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
  return Status::OK();
}

namespace {
Status RequireF32OnContext(const Tensor& t, const Device& device, const char* what) {
  if (t.dtype() != DataType::kFloat32) {
    return Status::InvalidArgument(std::string(what) + ": float32 expected, got " + DataTypeName(t.dtype()));
  }
  if (t.device() != device) {
    return Status::InvalidArgument(std::string(what) + ": the tensor is on " + t.device().ToString() + ", not " +
                                   device.ToString());
  }
  return Status::OK();
}
}  // namespace

Status CudaContext::MinMaxF32(const Tensor& t, float* lo, float* hi) {
  if (capturing_.load()) return NotWhileCapturing("MinMaxF32");
  SPARQ_RETURN_IF_ERROR(RequireF32OnContext(t, device(), "MinMaxF32"));
  if (t.numel() == 0) return Status::OK();
  SPARQ_ASSIGN_OR_RETURN(std::shared_ptr<uint8_t> scratch, Allocate(MinMaxScratchBytes()));
  SPARQ_RETURN_IF_ERROR(LaunchMinMaxF32(static_cast<const float*>(t.raw_data()), t.numel(), scratch.get(), stream_));
  float bounds[2];
  const size_t at = MinMaxScratchBytes() - sizeof(bounds);
  SPARQ_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(bounds, scratch.get() + at, sizeof(bounds), cudaMemcpyDeviceToHost, stream_));
  SPARQ_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
  if (bounds[0] < *lo) *lo = bounds[0];  // MinMaxRef's rule: NaN (none here) and ties keep the bound
  if (bounds[1] > *hi) *hi = bounds[1];
  return Status::OK();
}

StatusOr<int64_t> CudaContext::AbsHistogramF32(const Tensor& t, double scale, int64_t last, int64_t* counts) {
  if (capturing_.load()) return NotWhileCapturing("AbsHistogramF32");
  SPARQ_RETURN_IF_ERROR(RequireF32OnContext(t, device(), "AbsHistogramF32"));
  if (last < 0) return Status::InvalidArgument("AbsHistogramF32: no bins");
  if (t.numel() == 0) return int64_t{0};
  const size_t bytes = static_cast<size_t>(last + 2) * sizeof(unsigned long long);  // the bins, then the NaNs
  SPARQ_ASSIGN_OR_RETURN(std::shared_ptr<uint8_t> scratch, Allocate(bytes));
  auto* dev = reinterpret_cast<unsigned long long*>(scratch.get());
  SPARQ_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(dev, 0, bytes, stream_));
  SPARQ_RETURN_IF_ERROR(
      LaunchAbsHistogramF32(static_cast<const float*>(t.raw_data()), t.numel(), scale, last, dev, dev + last + 1, stream_));
  std::vector<unsigned long long> host(static_cast<size_t>(last + 2));
  SPARQ_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(host.data(), dev, bytes, cudaMemcpyDeviceToHost, stream_));
  SPARQ_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
  for (int64_t b = 0; b <= last; ++b) counts[b] += static_cast<int64_t>(host[static_cast<size_t>(b)]);
  return static_cast<int64_t>(host[static_cast<size_t>(last + 1)]);
}

Status CudaContext::BeginCapture() {
  if (capturing_.load()) return Status::Internal("BeginCapture: a capture is already under way on this context");
  SPARQ_CUDA_RETURN_IF_ERROR(cudaSetDevice(device_));
  SPARQ_CUDA_RETURN_IF_ERROR(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal));
  {
    std::lock_guard<std::mutex> lock(capture_mu_);
    held_.clear();
  }
  capturing_.store(true);
  return Status::OK();
}

StatusOr<std::shared_ptr<void>> CudaContext::EndCapture() {
  if (!capturing_.load()) return Status::Internal("EndCapture without BeginCapture");
  capturing_.store(false);
  auto captured = std::make_shared<CapturedGraph>();
  {
    std::lock_guard<std::mutex> lock(capture_mu_);
    captured->held.swap(held_);
  }
  cudaGraph_t graph = nullptr;
  SPARQ_CUDA_RETURN_IF_ERROR(cudaStreamEndCapture(stream_, &graph));
  const cudaError_t err = cudaGraphInstantiate(&captured->exec, graph, 0);
  (void)cudaGraphDestroy(graph);
  SPARQ_RETURN_IF_ERROR(ToStatus(err, "cudaGraphInstantiate(&exec, graph, 0)"));
  return std::shared_ptr<void>(std::move(captured));
}

void CudaContext::AbortCapture() {
  if (!capturing_.load()) return;
  capturing_.store(false);
  cudaGraph_t graph = nullptr;
  // An invalidated capture still has to be ended; its error is the one the caller already has.
  if (cudaStreamEndCapture(stream_, &graph) != cudaSuccess) (void)cudaGetLastError();
  if (graph != nullptr) (void)cudaGraphDestroy(graph);
  std::lock_guard<std::mutex> lock(capture_mu_);
  held_.clear();  // nothing ran: the buffers go back to the pool
}

Status CudaContext::Replay(const void* graph) {
  if (graph == nullptr) return Status::InvalidArgument("Replay: no graph");
  const auto* captured = static_cast<const CapturedGraph*>(graph);
  SPARQ_CUDA_RETURN_IF_ERROR(cudaGraphLaunch(captured->exec, stream_));
  return Status::OK();
}

StatusOr<std::shared_ptr<const LtGemm>> CudaContext::Gemm(const LtGemmArgs& args) {
  SPARQ_RETURN_IF_ERROR(LtGemm::CanImplement(args));
  const std::string key = LtGemm::Key(args);
  std::lock_guard<std::mutex> lock(gemm_mu_);
  auto it = gemms_.find(key);
  if (it != gemms_.end()) return it->second;
  auto gemm = std::make_shared<LtGemm>();
  SPARQ_RETURN_IF_ERROR(gemm->Init(lt_, args, options_.gemm_workspace_bytes));
  gemms_.emplace(key, gemm);
  return std::shared_ptr<const LtGemm>(gemm);
}

StatusOr<CudaContext*> CudaContextOf(const OpContext& ctx) {
  auto* cuda = dynamic_cast<CudaContext*>(ctx.backend_context());
  if (cuda == nullptr) return ctx.InvalidArgument("a CUDA kernel row ran without the CUDA backend's context");
  return cuda;
}

StatusOr<std::shared_ptr<uint8_t>> Scratch(CudaContext& ctx, size_t bytes) {
  if (bytes == 0) return std::shared_ptr<uint8_t>();
  return ctx.Allocate(bytes);
}

namespace {

class CudaBackend : public Backend {
 public:
  explicit CudaBackend(const CudaBackendOptions& options) : options_(options) {}
  std::string name() const override { return "cuda"; }
  Device device() const override { return Device{DeviceType::kCuda, 0}; }
  Status Available() const override {
    int count = 0;
    const cudaError_t err = cudaGetDeviceCount(&count);
    if (err != cudaSuccess) {
      (void)cudaGetLastError();
      // Without a GPU driver the runtime says "driver version is
      // insufficient": name the likely cause first.
      const char* why = err == cudaErrorInsufficientDriver || err == cudaErrorNoDevice
                            ? "no CUDA device or driver on this machine"
                            : "no usable CUDA device";
      return Status::NotSupported(std::string(why) + " (cudaGetDeviceCount: " + cudaGetErrorString(err) +
                                  "); use --backend cpu or auto");
    }
    if (count == 0) return Status::NotSupported("no CUDA device (cudaGetDeviceCount: 0 devices)");
    return Status::OK();
  }
  const KernelRegistry& rows() const override { return CudaRows(); }
  // float16 stays float16 on the GPU (rows_f16.cc), not lowered to float32
  // with a rounding node after every value.
  bool RunsFloat16AsWritten() const override { return true; }
  // Passes: the CPU's (Backend::Passes): every fused node they write has a
  // CUDA row (FusedConv, PointwiseDepthwise, Silu, HardSwishChain,
  // GeluErfChain, GeluErfScaledChain, Attention, the QDQ-fused integer
  // operators) but sparq.ConvIntegerToFloat (onnxruntime's dynamic
  // convolutions, as ConvInteger itself), which the executor partitions to
  // the CPU with copies around it.
  // BackendOptions::allow_tf32 turns TF32 on for this context (the
  // backend's own CudaBackendOptions may already have it on).
  StatusOr<std::shared_ptr<BackendContext>> CreateContext(const BackendOptions& backend_options) const override {
    SPARQ_RETURN_IF_ERROR(Available());
    CudaBackendOptions options = options_;
    options.allow_tf32 = options.allow_tf32 || backend_options.allow_tf32;
    SPARQ_ASSIGN_OR_RETURN(std::shared_ptr<CudaContext> ctx, CudaContext::Create(0, options));
    return std::shared_ptr<BackendContext>(std::move(ctx));
  }

 private:
  CudaBackendOptions options_;
};

}  // namespace

const KernelRegistry& CudaRows() {
  static const KernelRegistry* rows = [] {
    auto* r = new KernelRegistry();
    RegisterCudaElementwiseRows(*r);
    RegisterCudaLayoutRows(*r);
    RegisterCudaQuantRows(*r);
    RegisterCudaGemmRows(*r);
    RegisterCudaInt8Rows(*r);
    RegisterCudaSparseRows(*r);
    RegisterCudaF16Rows(*r);
    RegisterCudaSparse24Rows(*r);
    RegisterCudaMaskRows(*r);
    return r;
  }();
  return *rows;
}

std::shared_ptr<const Backend> MakeCudaBackendWithOptions(const CudaBackendOptions& options) {
  return std::make_shared<CudaBackend>(options);
}

}  // namespace cuda

std::shared_ptr<const Backend> MakeCudaBackend() { return cuda::MakeCudaBackendWithOptions(cuda::CudaBackendOptions{}); }

}  // namespace sparq
