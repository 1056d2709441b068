// The CUDA backend (kernels/backend.h): what its rows see while they run.
//
//   CudaBackend   name "cuda", device cuda:0, rows() = the CUDA rows
//                 (cuda_rows.h), Available() = NotSupported without a GPU
//        | CreateContext
//        v
//   CudaContext   one non-blocking stream, a cuBLASLt and a cuSPARSE handle
//                 bound to it, and a pool of device buffers (cudaMalloc,
//                 never managed memory; 256-byte aligned) that buffers
//                 return to when their last tensor goes
//
// Every kernel and library call of a row is queued on stream(); buffers are
// reused in stream order, so a buffer freed by one node and taken by the next
// needs no synchronization. Host reads (CopyToHost) synchronize the stream.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime.h>
#include <cusparse.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "kernels/backend.h"
#include "kernels/cuda/gemm_cublaslt.h"
#include "kernels/op_context.h"

namespace sparq {
namespace cuda {

// Options of the CUDA backend. allow_tf32 is also turned on per executor by
// BackendOptions::allow_tf32 (ExecutorOptions::allow_tf32, `sparq eval --tf32`).
struct CudaBackendOptions {
  // Float32 MatMul / Gemm / Conv on tensor cores as TF32 (10-bit mantissa
  // products, float32 sums): about 6x faster than exact FP32 on an H200, and
  // within kTf32Tolerance of the reference instead of kFp32Tolerance.
  bool allow_tf32 = false;
  // The INT8 rows (QLinearMatMul, QLinearConv, sparq.MatMulIntegerToFloat)
  // on the fused INT8 GEMM (gemm_s8_fused.cu: the requantize epilogue applied
  // on chip, the int32 sums never written); false: cuBLASLt's IMMA GEMM into
  // an int32 matrix, then the epilogue kernel. Identical bits either way.
  bool fused_int8_gemm = true;
  // The kernel of a layer whose constant weight runs block-sparse
  // (rows_sparse.cc: float16 MatMul, QLinearMatMul, MatMulIntegerToFloat;
  // whether it does: block_sparse_choice.h): kTable what the kernel speed
  // table's GPU rows say (cuSPARSE when they say nothing), kCusparse
  // cuSPARSE's Blocked-ELL SpMM, kWmma sparq's own kernel (spmm_bell_wmma.cu;
  // cuSPARSE where it cannot run: unaligned operands, below sm_80).
  enum class SparseKernel { kTable, kCusparse, kWmma };
  SparseKernel block_sparse_kernel = SparseKernel::kTable;
  // Bytes of device workspace cuBLASLt may use per GEMM.
  size_t gemm_workspace_bytes = size_t{32} << 20;
};

// Device buffers of the sizes asked before, kept for reuse. Thread-safe.
class DeviceBufferPool {
 public:
  explicit DeviceBufferPool(int device) : device_(device) {}
  ~DeviceBufferPool();  // cudaFree of every kept buffer (errors are ignored: nothing to report them to)
  // A buffer of at least `bytes` (256-byte aligned); its deleter returns it here.
  static StatusOr<std::shared_ptr<uint8_t>> Allocate(const std::shared_ptr<DeviceBufferPool>& pool, size_t bytes);
  // Bytes held by the pool, in use or kept.
  size_t reserved_bytes() const;

 private:
  void Release(void* ptr, size_t bucket);
  int device_;
  mutable std::mutex mu_;
  std::map<size_t, std::vector<void*>> free_;  // bucket size -> idle buffers
  size_t reserved_ = 0;
};

class CudaContext : public BackendContext {
 public:
  // Creates the stream, handles and pool on `device`; errors name the call.
  static StatusOr<std::shared_ptr<CudaContext>> Create(int device, const CudaBackendOptions& options);
  ~CudaContext() override;

  Device device() const override { return Device{DeviceType::kCuda, device_}; }
  StatusOr<std::shared_ptr<uint8_t>> Allocate(size_t bytes) override;
  Status CopyFromHost(const void* host, void* device, size_t bytes) override;
  Status CopyToHost(const void* device, void* host, size_t bytes) override;
  Status Synchronize() override;
  // Calibration's statistics reduced on the device (LaunchMinMaxF32,
  // LaunchAbsHistogramF32): two floats / the bins' counts come back.
  bool HasCalibrationStats() const override { return true; }
  Status MinMaxF32(const Tensor& t, float* lo, float* hi) override;
  StatusOr<int64_t> AbsHistogramF32(const Tensor& t, double scale, int64_t last, int64_t* counts) override;

  // CUDA graphs (BackendContext's capture hooks): stream capture in
  // cudaStreamCaptureModeThreadLocal on stream(), cudaGraphInstantiate,
  // cudaGraphLaunch. While capturing, Allocate keeps every buffer it hands
  // out for the graph (a pool miss calls cudaMalloc in relaxed capture mode
  // for that call, as cudaMalloc is refused in thread-local mode);
  // CopyFromHost stages the bytes in pinned memory the graph keeps (the
  // caller's host buffer is gone by the replay); CopyToHost and Synchronize
  // fail with NotSupported (a node that needs the host cannot be captured),
  // so does HostFallback.
  bool SupportsGraphCapture() const override { return true; }
  Status BeginCapture() override;
  StatusOr<std::shared_ptr<void>> EndCapture() override;
  void AbortCapture() override;
  Status Replay(const void* graph) override;
  // True between BeginCapture and EndCapture / AbortCapture.
  bool capturing() const { return capturing_.load(); }

  cudaStream_t stream() const { return stream_; }
  cublasLtHandle_t lt() const { return lt_; }
  cusparseHandle_t sparse() const { return sparse_; }
  const CudaBackendOptions& options() const { return options_; }
  // The compute capability, e.g. 90 for sm_90.
  int sm() const { return sm_; }
  // An initialized cuBLASLt GEMM for `args` (CanImplement checked), made once
  // per LtGemm::Key and kept for the context's life: a node run again skips
  // the descriptors and the heuristic. Thread-safe.
  StatusOr<std::shared_ptr<const LtGemm>> Gemm(const LtGemmArgs& args);

 private:
  CudaContext() = default;
  int device_ = 0;
  int sm_ = 0;
  CudaBackendOptions options_;
  cudaStream_t stream_ = nullptr;
  cublasLtHandle_t lt_ = nullptr;
  cusparseHandle_t sparse_ = nullptr;
  std::shared_ptr<DeviceBufferPool> pool_;
  // Capture state: what the graph being captured must keep alive.
  std::atomic<bool> capturing_{false};
  std::mutex capture_mu_;
  std::vector<std::shared_ptr<void>> held_;
  void Hold(std::shared_ptr<void> p);
  std::mutex gemm_mu_;
  std::map<std::string, std::shared_ptr<const LtGemm>> gemms_;
};

// The CudaContext a node runs on: InvalidArgument naming the node when it
// runs without one (a CUDA row called outside the CUDA backend).
StatusOr<CudaContext*> CudaContextOf(const OpContext& ctx);

// The CUDA backend with `options` (MakeCudaBackend uses the defaults).
std::shared_ptr<const Backend> MakeCudaBackendWithOptions(const CudaBackendOptions& options);

// A device scratch buffer of `bytes` from ctx's pool, freed (returned) with
// the handle; a null handle for 0 bytes.
StatusOr<std::shared_ptr<uint8_t>> Scratch(CudaContext& ctx, size_t bytes);

}  // namespace cuda
}  // namespace sparq
