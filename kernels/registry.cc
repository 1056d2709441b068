#include "kernels/registry.h"

#include <algorithm>
#include <set>

namespace sparq {

void KernelRegistry::Add(KernelDef def) { defs_.push_back(std::move(def)); }

const KernelDef* KernelRegistry::Find(const std::string& op_type, const std::string& domain, int64_t opset) const {
  const std::string d = domain == "ai.onnx" ? "" : domain;
  for (const auto& def : defs_)
    if (def.op_type == op_type && def.domain == d && opset >= def.since_opset && opset <= def.until_opset)
      return &def;
  return nullptr;
}

std::vector<const KernelDef*> KernelRegistry::FindMatching(const std::string& op_type, const std::string& domain,
                                                          int64_t opset) const {
  const std::string d = domain == "ai.onnx" ? "" : domain;
  std::vector<const KernelDef*> out;
  for (const auto& def : defs_)
    if (def.op_type == op_type && def.domain == d && opset >= def.since_opset && opset <= def.until_opset)
      out.push_back(&def);
  return out;
}

std::vector<const KernelDef*> KernelRegistry::FindAll(const std::string& op_type, const std::string& domain) const {
  std::vector<const KernelDef*> out;
  for (const auto& def : defs_)
    if (def.op_type == op_type && def.domain == domain) out.push_back(&def);
  return out;
}

std::vector<std::string> KernelRegistry::OpTypes() const {
  std::set<std::string> ops;
  for (const auto& def : defs_)
    if (def.domain.empty()) ops.insert(def.op_type);
  return {ops.begin(), ops.end()};
}

const KernelRegistry& KernelRegistry::Reference() {
  static const KernelRegistry* registry = [] {
    auto* r = new KernelRegistry();
    RegisterElementwiseOps(*r);
    RegisterReduceOps(*r);
    RegisterNnOps(*r);
    RegisterTensorOps(*r);
    RegisterQuantOps(*r);
    RegisterRecurrentOps(*r);
    return r;
  }();
  return *registry;
}

Status RunReferenceKernel(OpContext& ctx) {
  // Looked up by name, so that a fast row falling back never leads to itself.
  for (const KernelDef* def : KernelRegistry::Reference().FindAll(ctx.node().op_type, ctx.node().domain)) {
    if (def->name == "ref" && ctx.opset() >= def->since_opset && ctx.opset() <= def->until_opset) return def->fn(ctx);
  }
  return ctx.NotSupported("no reference kernel for " + ctx.node().op_type + " at opset " + std::to_string(ctx.opset()));
}

PrepareFn WithoutContext(SimplePrepareFn fn) {
  return [fn](const Node& node, const std::vector<const Tensor*>& constants,
              const PrepareContext&) -> StatusOr<PreparedKernel> {
    SPARQ_ASSIGN_OR_RETURN(std::shared_ptr<const void> state, fn(node, constants));
    return PreparedKernel{std::move(state), ""};
  };
}

PrepareFn WithoutContext(SimplePrepareFn fn, std::string (*kernel_name)(const void* state)) {
  return [fn, kernel_name](const Node& node, const std::vector<const Tensor*>& constants,
                           const PrepareContext&) -> StatusOr<PreparedKernel> {
    SPARQ_ASSIGN_OR_RETURN(std::shared_ptr<const void> state, fn(node, constants));
    std::string name = kernel_name(state.get());
    return PreparedKernel{std::move(state), std::move(name)};
  };
}

const KernelRegistry& KernelRegistry::Default() {
  static const KernelRegistry* registry = [] {
    auto* r = new KernelRegistry();
    RegisterPreparedCpuQuantOps(*r);
    RegisterPreparedCpuSparseOps(*r);
    RegisterPreparedCpuQuantConvOps(*r);
    RegisterPreparedCpuDenseF32Ops(*r);
    RegisterPreparedCpuDepthwiseConvOps(*r);
    RegisterCpuQdqGlueOps(*r);
    RegisterCpuBinaryF32Ops(*r);
    RegisterCpuActivationF32Ops(*r);
    RegisterCpuNormF32Ops(*r);
    RegisterCpuConvTransposeF32Ops(*r);
    RegisterCpuResizeOps(*r);
    RegisterCpuTensorCopyOps(*r);
    RegisterCpuAttentionF32Ops(*r);
    for (const KernelDef& def : Reference().defs_) r->Add(def);
    return r;
  }();
  return *registry;
}

}  // namespace sparq
