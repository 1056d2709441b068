#include "kernels/backend.h"

#include <cstring>
#include <map>
#include <mutex>

#include "kernels/parallel.h"
#include "kernels/registry.h"
#include "sparq/device.h"

namespace sparq {

StatusOr<Tensor> BackendContext::AllocateTensor(DataType type, Shape shape) {
  SPARQ_ASSIGN_OR_RETURN(int64_t numel, CheckedNumElements(shape, type));
  const size_t bytes = static_cast<size_t>(numel) * DataTypeSize(type);
  if (device().is_host() && device().index == 0) return Tensor::Uninitialized(type, std::move(shape));
  SPARQ_ASSIGN_OR_RETURN(std::shared_ptr<uint8_t> buffer, Allocate(bytes));
  return Tensor::OnDevice(type, std::move(shape), std::move(buffer), device());
}

Status BackendContext::MinMaxF32(const Tensor& t, float* lo, float* hi) {
  (void)t, (void)lo, (void)hi;
  return Status::NotSupported(device().ToString() + " computes no calibration statistics");
}

StatusOr<int64_t> BackendContext::AbsHistogramF32(const Tensor& t, double scale, int64_t last, int64_t* counts) {
  (void)t, (void)scale, (void)last, (void)counts;
  return Status::NotSupported(device().ToString() + " computes no calibration statistics");
}

std::vector<std::string> Backend::Passes(GraphProfile profile) const {
  switch (profile) {
    case GraphProfile::kAsWritten: return {};
    case GraphProfile::kFoldedConstants: return {"fold-constant-subgraphs"};
    case GraphProfile::kObserveKept:
      return {"fold-constant-subgraphs", "fold-pads", "fuse-conv-activation", "fuse-pointwise-depthwise"};
    case GraphProfile::kDeployment:
      return {"lower-einsum", "fold-constant-subgraphs", "fold-pads", "fuse-qdq", "fuse-one-hot",
              "fuse-conv-activation", "fuse-pointwise-depthwise"};
  }
  return {};
}

ThreadPool* SharedThreadPool(int threads) {
  static std::mutex mu;
  // Never destroyed: executors may outlive static destruction, and a pool's
  // workers must not be joined from an exit handler.
  static auto* pools = new std::map<int, std::unique_ptr<ThreadPool>>();
  if (threads <= 0) threads = 0;
  std::lock_guard<std::mutex> lock(mu);
  std::unique_ptr<ThreadPool>& pool = (*pools)[threads];
  if (!pool) pool = std::make_unique<ThreadPool>(threads);
  return pool.get();
}

namespace {

// Host memory, the fast CPU rows (or the reference kernels alone), the
// process's shared thread pool.
class CpuContext : public BackendContext {
 public:
  explicit CpuContext(ThreadPool* pool) : pool_(pool) {}
  Device device() const override { return Device{}; }
  ThreadPool* pool() const override { return pool_; }
  StatusOr<std::shared_ptr<uint8_t>> Allocate(size_t bytes) override {
    Tensor t = Tensor::Uninitialized(DataType::kUInt8, {static_cast<int64_t>(bytes)});
    auto* data = static_cast<uint8_t*>(t.raw_data());
    // The buffer lives as long as the returned pointer (aliasing constructor).
    return std::shared_ptr<uint8_t>(std::make_shared<Tensor>(std::move(t)), data);
  }
  Status CopyFromHost(const void* host, void* device, size_t bytes) override {
    if (bytes > 0) std::memcpy(device, host, bytes);
    return Status::OK();
  }
  Status CopyToHost(const void* device, void* host, size_t bytes) override {
    if (bytes > 0) std::memcpy(host, device, bytes);
    return Status::OK();
  }

 private:
  ThreadPool* pool_;
};

class CpuBackend : public Backend {
 public:
  CpuBackend(std::string name, const KernelRegistry& rows) : name_(std::move(name)), rows_(rows) {}
  std::string name() const override { return name_; }
  Device device() const override { return Device{}; }
  const KernelRegistry& rows() const override { return rows_; }
  StatusOr<std::shared_ptr<BackendContext>> CreateContext(const BackendOptions& options) const override {
    return std::shared_ptr<BackendContext>(std::make_shared<CpuContext>(SharedThreadPool(options.threads)));
  }

 private:
  std::string name_;
  const KernelRegistry& rows_;
};

struct BackendTable {
  std::mutex mu;
  std::vector<std::shared_ptr<const Backend>> backends;
};

BackendTable& Backends() {
  static BackendTable* table = [] {
    auto* t = new BackendTable();
    t->backends.push_back(std::make_shared<CpuBackend>("cpu", KernelRegistry::Default()));
    t->backends.push_back(std::make_shared<CpuBackend>("reference", KernelRegistry::Reference()));
    if (std::shared_ptr<const Backend> cuda = MakeCudaBackend()) t->backends.push_back(std::move(cuda));
    return t;
  }();
  return *table;
}

}  // namespace

Status RegisterBackend(std::shared_ptr<const Backend> backend) {
  if (!backend) return Status::InvalidArgument("RegisterBackend: null backend");
  BackendTable& table = Backends();
  std::lock_guard<std::mutex> lock(table.mu);
  const std::string name = backend->name();
  if (name.empty() || name == "auto") return Status::InvalidArgument("RegisterBackend: invalid name '" + name + "'");
  for (const auto& b : table.backends)
    if (b->name() == name) return Status::InvalidArgument("RegisterBackend: a backend named '" + name + "' exists");
  table.backends.push_back(std::move(backend));
  return Status::OK();
}

const Backend* FindBackend(const std::string& name) {
  BackendTable& table = Backends();
  std::lock_guard<std::mutex> lock(table.mu);
  for (const auto& b : table.backends)
    if (b->name() == name) return b.get();
  return nullptr;
}

std::vector<std::string> BackendNames() {
  BackendTable& table = Backends();
  std::lock_guard<std::mutex> lock(table.mu);
  std::vector<std::string> names;
  for (const auto& b : table.backends) names.push_back(b->name());
  return names;
}

StatusOr<const Backend*> ResolveBackend(const std::string& name, std::string* note) {
  if (name == "auto") {
    const Backend* cuda = FindBackend("cuda");
    if (cuda != nullptr) {
      Status available = cuda->Available();
      if (available.ok()) {
        if (note) *note = "backend auto: cuda";
        return cuda;
      }
      if (note) *note = "backend auto: cpu (cuda: " + available.message() + ")";
    } else if (note) {
      *note = "backend auto: cpu (sparq was built without CUDA)";
    }
    return FindBackend("cpu");
  }
  const Backend* backend = FindBackend(name);
  if (backend == nullptr) {
    std::string known = "auto";
    for (const auto& n : BackendNames()) known += ", " + n;
    if (name == "cuda") {
      return Status::NotSupported("backend 'cuda': sparq was built without CUDA (configure with -DSPARQ_CUDA=ON)");
    }
    return Status::InvalidArgument("unknown backend '" + name + "' (known: " + known + ")");
  }
  Status available = backend->Available();
  if (!available.ok()) return available.WithContext("backend '" + name + "' cannot run here");
  if (note) *note = "backend " + name;
  return backend;
}

StatusOr<std::string> ResolveBackendName(const std::string& name, std::string* note) {
  SPARQ_ASSIGN_OR_RETURN(const Backend* backend, ResolveBackend(name, note));
  return backend->name();
}

StatusOr<Tensor> CopyTensorToDevice(BackendContext& context, const Tensor& host) {
  if (!host.device().is_host()) return Status::Internal("CopyTensorToDevice: the source is on " + host.device().ToString());
  SPARQ_ASSIGN_OR_RETURN(Tensor out, context.AllocateTensor(host.dtype(), host.shape()));
  SPARQ_RETURN_IF_ERROR(context.CopyFromHost(host.raw_data(), out.raw_data(), host.nbytes()));
  SPARQ_RETURN_IF_ERROR(context.Synchronize());
  return out;
}

StatusOr<Tensor> CopyTensorToHost(BackendContext& context, const Tensor& device) {
  if (device.device() != context.device()) {
    return Status::Internal("CopyTensorToHost: the tensor is on " + device.device().ToString() + ", the context on " +
                            context.device().ToString());
  }
  Tensor out = Tensor::Uninitialized(device.dtype(), device.shape());
  SPARQ_RETURN_IF_ERROR(context.CopyToHost(device.raw_data(), out.raw_data(), device.nbytes()));
  SPARQ_RETURN_IF_ERROR(context.Synchronize());
  return out;
}

}  // namespace sparq
