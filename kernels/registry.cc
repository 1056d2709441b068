#include "kernels/registry.h"

#include <algorithm>
#include <set>
#include <string_view>
#include <unordered_map>

namespace sparq {

void KernelRegistry::Add(KernelDef def) { defs_.push_back(std::move(def)); }

Status KernelRegistry::CheckPriorities() const {
  for (size_t i = 0; i < defs_.size(); ++i)
    for (size_t j = i + 1; j < defs_.size(); ++j) {
      const KernelDef& a = defs_[i];
      const KernelDef& b = defs_[j];
      if (a.op_type != b.op_type || a.domain != b.domain || a.priority != b.priority) continue;
      if (a.until_opset < b.since_opset || b.until_opset < a.since_opset) continue;
      return Status::InvalidArgument("kernel rows '" + a.name + "' and '" + b.name + "' of " +
                                     (a.domain.empty() ? "" : a.domain + ".") + a.op_type +
                                     " overlap in opset at the same priority " + std::to_string(a.priority) +
                                     ": which runs first would depend on registration order");
    }
  return Status::OK();
}

const KernelDef* KernelRegistry::Find(const std::string& op_type, const std::string& domain, int64_t opset) const {
  std::vector<const KernelDef*> rows = FindMatching(op_type, domain, opset);
  return rows.empty() ? nullptr : rows.front();
}

std::vector<const KernelDef*> KernelRegistry::FindMatching(const std::string& op_type, const std::string& domain,
                                                          int64_t opset) const {
  const std::string d = domain == "ai.onnx" ? "" : domain;
  std::vector<const KernelDef*> out;
  for (const auto& def : defs_)
    if (def.op_type == op_type && def.domain == d && opset >= def.since_opset && opset <= def.until_opset)
      out.push_back(&def);
  // Priorities are unique per op and opset (CheckPriorities), so the order is
  // the priorities' alone.
  std::stable_sort(out.begin(), out.end(),
                   [](const KernelDef* a, const KernelDef* b) { return a->priority > b->priority; });
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
    RegisterControlFlowOps(*r);
    return r;
  }();
  return *registry;
}

Status RunReferenceKernel(OpContext& ctx) {
  // Looked up by name, so that a fast row falling back never leads to itself.
  // The reference registry never changes once made: its "ref" rows indexed
  // by op type once, so that a fast row's fallback (a Cast of float32 to
  // float32, say) does not scan every row and compare names on each call.
  static const auto* const index = [] {
    auto* rows = new std::unordered_map<std::string_view, std::vector<const KernelDef*>>();
    for (const KernelDef& def : KernelRegistry::Reference().defs())
      if (def.name == "ref") (*rows)[def.op_type].push_back(&def);
    return rows;
  }();
  const auto it = index->find(std::string_view(ctx.node().op_type));
  if (it != index->end()) {
    for (const KernelDef* def : it->second) {
      if (def->domain == ctx.node().domain && ctx.opset() >= def->since_opset && ctx.opset() <= def->until_opset)
        return def->fn(ctx);
    }
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
    RegisterCpuConvIntegerOps(*r);
    RegisterPreparedCpuDenseF32Ops(*r);
    RegisterPreparedCpuDepthwiseConvOps(*r);
    RegisterCpuQdqGlueOps(*r);
    RegisterCpuFakeQuantFp8Ops(*r);
    RegisterCpuBinaryF32Ops(*r);
    RegisterCpuActivationF32Ops(*r);
    RegisterCpuNormF32Ops(*r);
    RegisterCpuConvTransposeF32Ops(*r);
    RegisterCpuResizeOps(*r);
    RegisterCpuTensorCopyOps(*r);
    RegisterCpuPadOps(*r);
    RegisterCpuAttentionF32Ops(*r);
    RegisterCpuRecurrentF32Ops(*r);
    RegisterCpuMatMulNBitsOps(*r);
    // The reference kernels take every node no fast row takes.
    for (KernelDef def : Reference().defs_) {
      def.priority = kPriorityReference;
      r->Add(std::move(def));
    }
    return r;
  }();
  return *registry;
}

}  // namespace sparq
