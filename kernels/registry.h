// The dispatch table: which function runs an (op, domain, opset) on which
// backend. Adding a kernel is adding a row.
#pragma once

#include <string>
#include <vector>

#include "kernels/op_context.h"

namespace sparq {

struct KernelDef {
  std::string op_type;
  std::string domain;  // "" = default ONNX domain
  int since_opset = 1;   // first opset version this function implements
  int until_opset = 99;  // last one (inclusive)
  KernelFn fn = nullptr;
  std::string name;  // e.g. "ref", "gemm_s8s8_avx512vnni"; shown by `eval --verbose`
};

class KernelRegistry {
 public:
  void Add(KernelDef def);
  // The kernel for `op_type` in `domain` at `opset`, or nullptr.
  const KernelDef* Find(const std::string& op_type, const std::string& domain, int64_t opset) const;
  // Opset range covered for an op, as "since..until" pairs; empty if unknown.
  std::vector<const KernelDef*> FindAll(const std::string& op_type, const std::string& domain) const;
  // Sorted op types of the default domain that have at least one kernel.
  std::vector<std::string> OpTypes() const;

  // The reference kernels (kernels/ref), registered on first use.
  static const KernelRegistry& Reference();

 private:
  std::vector<KernelDef> defs_;
};

// Per-file registration hooks of kernels/ref, called by Reference().
void RegisterElementwiseOps(KernelRegistry& r);
void RegisterReduceOps(KernelRegistry& r);
void RegisterNnOps(KernelRegistry& r);
void RegisterTensorOps(KernelRegistry& r);
void RegisterQuantOps(KernelRegistry& r);

}  // namespace sparq
