// cuSPARSELt's 2:4 GEMM (spmm_cusparselt.h). The library is opened with
// dlopen and its entry points looked up once (LtApi), so a build that found
// the header links nothing extra and runs without the library.
#include "kernels/cuda/spmm_cusparselt.h"

#include <cstdlib>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "kernels/cuda/cuda_status.h"

#ifdef SPARQ_HAVE_CUSPARSELT
#include <cusparseLt.h>
#include <dlfcn.h>
#endif

namespace sparq {
namespace cuda {

#ifdef SPARQ_HAVE_CUSPARSELT

namespace {

// The entry points sparq calls, by their declarations in cusparseLt.h.
struct LtApi {
  decltype(&cusparseLtInit) Init = nullptr;
  decltype(&cusparseLtGetVersion) GetVersion = nullptr;
  decltype(&cusparseLtGetErrorString) GetErrorString = nullptr;
  decltype(&cusparseLtDenseDescriptorInit) DenseDescriptorInit = nullptr;
  decltype(&cusparseLtStructuredDescriptorInit) StructuredDescriptorInit = nullptr;
  decltype(&cusparseLtMatDescriptorDestroy) MatDescriptorDestroy = nullptr;
  decltype(&cusparseLtMatmulDescriptorInit) MatmulDescriptorInit = nullptr;
  decltype(&cusparseLtMatmulAlgSelectionInit) MatmulAlgSelectionInit = nullptr;
  decltype(&cusparseLtMatmulAlgSelectionDestroy) MatmulAlgSelectionDestroy = nullptr;
  decltype(&cusparseLtMatmulPlanInit) MatmulPlanInit = nullptr;
  decltype(&cusparseLtMatmulPlanDestroy) MatmulPlanDestroy = nullptr;
  decltype(&cusparseLtMatmulGetWorkspace) MatmulGetWorkspace = nullptr;
  decltype(&cusparseLtMatmulSearch) MatmulSearch = nullptr;
  decltype(&cusparseLtMatmul) Matmul = nullptr;
  decltype(&cusparseLtSpMMACompressedSize2) CompressedSize2 = nullptr;
  decltype(&cusparseLtSpMMACompress2) Compress2 = nullptr;
  std::string version;
};

struct Loaded {
  LtApi api;
  Status status;  // why not, when the library or an entry point is missing
};

template <typename F>
bool Resolve(void* lib, const char* name, F* fn, std::string* missing) {
  *fn = reinterpret_cast<F>(dlsym(lib, name));
  if (*fn == nullptr) *missing += (missing->empty() ? "" : ", ") + std::string(name);
  return *fn != nullptr;
}

const Loaded& Load() {
  static const Loaded* loaded = [] {
    auto* l = new Loaded();
    std::vector<std::string> names;
    if (const char* env = std::getenv("SPARQ_CUSPARSELT_LIB"); env != nullptr && env[0] != '\0') names.push_back(env);
    names.push_back("libcusparseLt.so.0");
#ifdef SPARQ_CUSPARSELT_LIBRARY
    names.push_back(SPARQ_CUSPARSELT_LIBRARY);
#endif
    void* lib = nullptr;
    std::string tried;
    for (const std::string& name : names) {
      lib = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
      if (lib != nullptr) break;
      const char* err = dlerror();
      tried += (tried.empty() ? "" : "; ") + (err != nullptr ? std::string(err) : name);
    }
    if (lib == nullptr) {
      l->status = Status::NotSupported("cuSPARSELt could not be opened (" + tried +
                                       "); put libcusparseLt.so.0 on LD_LIBRARY_PATH or set SPARQ_CUSPARSELT_LIB");
      return l;
    }
    LtApi& a = l->api;
    std::string missing;
    Resolve(lib, "cusparseLtInit", &a.Init, &missing);
    Resolve(lib, "cusparseLtGetVersion", &a.GetVersion, &missing);
    Resolve(lib, "cusparseLtGetErrorString", &a.GetErrorString, &missing);
    Resolve(lib, "cusparseLtDenseDescriptorInit", &a.DenseDescriptorInit, &missing);
    Resolve(lib, "cusparseLtStructuredDescriptorInit", &a.StructuredDescriptorInit, &missing);
    Resolve(lib, "cusparseLtMatDescriptorDestroy", &a.MatDescriptorDestroy, &missing);
    Resolve(lib, "cusparseLtMatmulDescriptorInit", &a.MatmulDescriptorInit, &missing);
    Resolve(lib, "cusparseLtMatmulAlgSelectionInit", &a.MatmulAlgSelectionInit, &missing);
    Resolve(lib, "cusparseLtMatmulAlgSelectionDestroy", &a.MatmulAlgSelectionDestroy, &missing);
    Resolve(lib, "cusparseLtMatmulPlanInit", &a.MatmulPlanInit, &missing);
    Resolve(lib, "cusparseLtMatmulPlanDestroy", &a.MatmulPlanDestroy, &missing);
    Resolve(lib, "cusparseLtMatmulGetWorkspace", &a.MatmulGetWorkspace, &missing);
    Resolve(lib, "cusparseLtMatmulSearch", &a.MatmulSearch, &missing);
    Resolve(lib, "cusparseLtMatmul", &a.Matmul, &missing);
    Resolve(lib, "cusparseLtSpMMACompressedSize2", &a.CompressedSize2, &missing);
    Resolve(lib, "cusparseLtSpMMACompress2", &a.Compress2, &missing);
    if (!missing.empty()) {
      l->status = Status::NotSupported("the cuSPARSELt library opened lacks " + missing);
      return l;
    }
    int major = 0, minor = 0, patch = 0;
    // cusparseLtGetProperty needs no handle; the version is for reports only.
    if (auto get = reinterpret_cast<decltype(&cusparseLtGetProperty)>(dlsym(lib, "cusparseLtGetProperty"))) {
      (void)get(MAJOR_VERSION, &major);
      (void)get(MINOR_VERSION, &minor);
      (void)get(PATCH_LEVEL, &patch);
      a.version = std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(patch);
    }
    return l;
  }();
  return *loaded;
}

Status LtStatus(cusparseStatus_t st, const char* call) {
  if (st == CUSPARSE_STATUS_SUCCESS) return Status::OK();
  const LtApi& api = Load().api;
  const char* what = api.GetErrorString != nullptr ? api.GetErrorString(st) : "?";
  const std::string msg = std::string(call) + ": " + (what != nullptr ? what : "?") + " (" + std::to_string(static_cast<int>(st)) + ")";
  return st == CUSPARSE_STATUS_NOT_SUPPORTED ? Status::NotSupported(msg) : Status::Internal(msg);
}

// Each cuSPARSELt call's code a Status naming the call.
#define SPARQ_LT_RETURN_IF_ERROR(call)                          \
  do {                                                          \
    ::sparq::Status _sparq_lt_status = LtStatus((call), #call); \
    if (!_sparq_lt_status.ok()) return _sparq_lt_status;        \
  } while (0)

StatusOr<const LtApi*> Api() {
  const Loaded& l = Load();
  if (!l.status.ok()) return l.status;
  return &l.api;
}

// One handle per device, made on first use and kept for the process (as
// SharedThreadPool: executors come and go, the handle's setup is not cheap).
StatusOr<const cusparseLtHandle_t*> HandleFor(int device) {
  SPARQ_ASSIGN_OR_RETURN(const LtApi* api, Api());
  static std::mutex mu;
  static auto* handles = new std::map<int, cusparseLtHandle_t*>();
  std::lock_guard<std::mutex> lock(mu);
  auto it = handles->find(device);
  if (it != handles->end()) return it->second;
  SPARQ_CUDA_RETURN_IF_ERROR(cudaSetDevice(device));
  auto* h = new cusparseLtHandle_t();
  Status st = LtStatus(api->Init(h), "cusparseLtInit");
  if (!st.ok()) {
    delete h;
    return st;
  }
  (*handles)[device] = h;
  return h;
}

constexpr uint32_t kAlignment = 16;

}  // namespace

Status CusparseLtAvailable() { return Load().status; }
std::string CusparseLtVersion() { return Load().status.ok() ? Load().api.version : ""; }

struct SparseWeight24::Impl {
  const LtApi* api = nullptr;
  const cusparseLtHandle_t* handle = nullptr;
  cusparseLtMatDescriptor_t a{};
  bool ready = false;
  ~Impl() {
    if (ready) (void)api->MatDescriptorDestroy(&a);
  }
};

SparseWeight24::SparseWeight24() = default;
SparseWeight24::~SparseWeight24() = default;

Status SparseWeight24::Init(const SpmmLtArgs& args) {
  SpmmLtArgs shape = args;
  shape.m = 16;  // m does not enter the weight's descriptor
  SPARQ_RETURN_IF_ERROR(SpmmLt::CanImplement(shape));
  impl_ = std::make_unique<Impl>();
  SPARQ_ASSIGN_OR_RETURN(impl_->api, Api());
  SPARQ_ASSIGN_OR_RETURN(impl_->handle, HandleFor(args.device));
  const LtApi& api = *impl_->api;
  // A = W^T [n, k], column-major, ld n: W's row-major bytes.
  SPARQ_LT_RETURN_IF_ERROR(api.StructuredDescriptorInit(impl_->handle, &impl_->a, args.n, args.k, args.n, kAlignment,
                                                        CUDA_R_16F, CUSPARSE_ORDER_COL, CUSPARSELT_SPARSITY_50_PERCENT));
  impl_->ready = true;
  SPARQ_LT_RETURN_IF_ERROR(api.CompressedSize2(impl_->handle, &impl_->a, &compressed_size_, &compress_buffer_size_));
  return Status::OK();
}

Status SparseWeight24::Compress(const void* w, void* compressed, void* buffer, cudaStream_t stream) const {
  if (impl_ == nullptr || !impl_->ready) return Status::Internal("SparseWeight24::Compress before Init");
  SPARQ_LT_RETURN_IF_ERROR(impl_->api->Compress2(impl_->handle, &impl_->a, 1, CUSPARSE_OPERATION_NON_TRANSPOSE, w,
                                                 compressed, buffer, stream));
  return Status::OK();
}

struct SpmmLt::Impl {
  const LtApi* api = nullptr;
  const cusparseLtHandle_t* handle = nullptr;
  cusparseLtMatDescriptor_t a{}, b{}, c{};
  cusparseLtMatmulDescriptor_t matmul{};
  cusparseLtMatmulAlgSelection_t alg{};
  cusparseLtMatmulPlan_t plan{};
  bool a_ready = false, b_ready = false, c_ready = false, alg_ready = false, plan_ready = false;
  ~Impl() {
    if (plan_ready) (void)api->MatmulPlanDestroy(&plan);
    if (alg_ready) (void)api->MatmulAlgSelectionDestroy(&alg);
    if (c_ready) (void)api->MatDescriptorDestroy(&c);
    if (b_ready) (void)api->MatDescriptorDestroy(&b);
    if (a_ready) (void)api->MatDescriptorDestroy(&a);
  }
};

SpmmLt::SpmmLt() = default;
SpmmLt::~SpmmLt() = default;

Status SpmmLt::CanImplement(const SpmmLtArgs& args) {
  if (args.m <= 0 || args.n <= 0 || args.k <= 0) return Status::InvalidArgument("2:4 GEMM: empty shape");
  const std::string dims = "2:4 GEMM of m " + std::to_string(args.m) + ", n " + std::to_string(args.n) + ", k " +
                           std::to_string(args.k);
  if (args.m % 16 != 0 || args.n % 16 != 0 || args.k % 16 != 0) {
    return Status::NotSupported(dims + ": cuSPARSELt float16 wants m, n and k multiples of 16");
  }
  auto misaligned = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % kAlignment != 0; };
  if (misaligned(args.x) || misaligned(args.y)) return Status::NotSupported(dims + ": X or Y not 16-byte aligned");
  return Status::OK();
}

Status SpmmLt::Init(const SparseWeight24& w, const SpmmLtArgs& args) {
  SPARQ_RETURN_IF_ERROR(CanImplement(args));
  if (w.impl_ == nullptr || !w.impl_->ready) return Status::Internal("SpmmLt::Init before SparseWeight24::Init");
  impl_ = std::make_unique<Impl>();
  Impl& p = *impl_;
  p.api = w.impl_->api;
  p.handle = w.impl_->handle;
  const LtApi& api = *p.api;
  // The plan keeps pointers to its descriptors: its own copies, A's made again here.
  SPARQ_LT_RETURN_IF_ERROR(api.StructuredDescriptorInit(p.handle, &p.a, args.n, args.k, args.n, kAlignment, CUDA_R_16F,
                                                        CUSPARSE_ORDER_COL, CUSPARSELT_SPARSITY_50_PERCENT));
  p.a_ready = true;
  // B = X^T [k, m] (ld k), C = D = Y^T [n, m] (ld n): column-major views of the row-major X, Y.
  SPARQ_LT_RETURN_IF_ERROR(api.DenseDescriptorInit(p.handle, &p.b, args.k, args.m, args.k, kAlignment, CUDA_R_16F,
                                                   CUSPARSE_ORDER_COL));
  p.b_ready = true;
  SPARQ_LT_RETURN_IF_ERROR(api.DenseDescriptorInit(p.handle, &p.c, args.n, args.m, args.n, kAlignment, CUDA_R_16F,
                                                   CUSPARSE_ORDER_COL));
  p.c_ready = true;
  SPARQ_LT_RETURN_IF_ERROR(api.MatmulDescriptorInit(p.handle, &p.matmul, CUSPARSE_OPERATION_NON_TRANSPOSE,
                                                    CUSPARSE_OPERATION_NON_TRANSPOSE, &p.a, &p.b, &p.c, &p.c,
                                                    CUSPARSE_COMPUTE_32F));
  SPARQ_LT_RETURN_IF_ERROR(api.MatmulAlgSelectionInit(p.handle, &p.alg, &p.matmul, CUSPARSELT_MATMUL_ALG_DEFAULT));
  p.alg_ready = true;
  SPARQ_LT_RETURN_IF_ERROR(api.MatmulPlanInit(p.handle, &p.plan, &p.matmul, &p.alg));
  p.plan_ready = true;
  SPARQ_LT_RETURN_IF_ERROR(api.MatmulGetWorkspace(p.handle, &p.plan, &workspace_size_));
  return Status::OK();
}

Status SpmmLt::Search(const SpmmLtArgs& args, const void* compressed, void* workspace, cudaStream_t stream) {
  if (impl_ == nullptr || !impl_->plan_ready) return Status::Internal("SpmmLt::Search before Init");
  const float alpha = 1.0f, beta = 0.0f;
  cudaStream_t streams[1] = {stream};
  SPARQ_LT_RETURN_IF_ERROR(impl_->api->MatmulSearch(impl_->handle, &impl_->plan, &alpha, compressed, args.x, &beta,
                                                    args.y, args.y, workspace, streams, 1));
  // The chosen algorithm may want another workspace.
  SPARQ_LT_RETURN_IF_ERROR(impl_->api->MatmulGetWorkspace(impl_->handle, &impl_->plan, &workspace_size_));
  return Status::OK();
}

Status SpmmLt::Run(const SpmmLtArgs& args, const void* compressed, void* workspace, cudaStream_t stream) const {
  if (impl_ == nullptr || !impl_->plan_ready) return Status::Internal("SpmmLt::Run before Init");
  const float alpha = 1.0f, beta = 0.0f;
  cudaStream_t streams[1] = {stream};
  SPARQ_LT_RETURN_IF_ERROR(impl_->api->Matmul(impl_->handle, &impl_->plan, &alpha, compressed, args.x, &beta, args.y,
                                              args.y, workspace, streams, 1));
  return Status::OK();
}

#else  // !SPARQ_HAVE_CUSPARSELT

namespace {
Status NotBuilt() {
  return Status::NotSupported("built without cuSPARSELt (its header cusparseLt.h was not found at configure time; "
                              "SPARQ_CUSPARSELT / SPARQ_CUSPARSELT_ROOT)");
}
}  // namespace

Status CusparseLtAvailable() { return NotBuilt(); }
std::string CusparseLtVersion() { return ""; }
struct SparseWeight24::Impl {};
SparseWeight24::SparseWeight24() = default;
SparseWeight24::~SparseWeight24() = default;
Status SparseWeight24::Init(const SpmmLtArgs&) { return NotBuilt(); }
Status SparseWeight24::Compress(const void*, void*, void*, cudaStream_t) const { return NotBuilt(); }
struct SpmmLt::Impl {};
SpmmLt::SpmmLt() = default;
SpmmLt::~SpmmLt() = default;
Status SpmmLt::CanImplement(const SpmmLtArgs&) { return NotBuilt(); }
Status SpmmLt::Init(const SparseWeight24&, const SpmmLtArgs&) { return NotBuilt(); }
Status SpmmLt::Search(const SpmmLtArgs&, const void*, void*, cudaStream_t) { return NotBuilt(); }
Status SpmmLt::Run(const SpmmLtArgs&, const void*, void*, cudaStream_t) const { return NotBuilt(); }

#endif  // SPARQ_HAVE_CUSPARSELT

}  // namespace cuda
}  // namespace sparq
