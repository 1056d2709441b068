#include "runtime/passes/passes.h"

#include "runtime/passes/einsum_lowering.h"
#include "runtime/passes/float_fusion.h"
#include "runtime/passes/fp8_fusion.h"
#include "runtime/passes/graph_folding.h"
#include "runtime/passes/one_hot_fusion.h"
#include "runtime/passes/qdq_fusion.h"

namespace sparq {

namespace {

struct GraphPass {
  const char* name;
  Status (*run)(Model* model, FoldableOutputs* foldable);
};

constexpr GraphPass kPasses[] = {
    {"lower-einsum", [](Model* m, FoldableOutputs*) { LowerEinsumToMatMul(m); return Status::OK(); }},
    {"fold-constant-subgraphs", [](Model* m, FoldableOutputs*) { return FoldConstants(m).status(); }},
    {"fold-pads", [](Model* m, FoldableOutputs* f) { FoldPadsIntoConvs(m, f); return Status::OK(); }},
    {"fuse-qdq", [](Model* m, FoldableOutputs*) { FuseFp8QdqPairs(m); FuseQdqToIntegerOps(m); return Status::OK(); }},
    {"fuse-one-hot", [](Model* m, FoldableOutputs*) { FuseOneHotMatMul(m); return Status::OK(); }},
    {"fuse-conv-activation", [](Model* m, FoldableOutputs*) { FuseConvActivations(m); return Status::OK(); }},
    {"fuse-pointwise-depthwise", [](Model* m, FoldableOutputs*) { FusePointwiseDepthwise(m); return Status::OK(); }},
};

}  // namespace

Status RunGraphPass(const std::string& name, Model* model, FoldableOutputs* foldable) {
  for (const GraphPass& pass : kPasses)
    if (name == pass.name) return pass.run(model, foldable);
  std::string known;
  for (const GraphPass& pass : kPasses) known += (known.empty() ? "" : ", ") + std::string(pass.name);
  return Status::InvalidArgument("unknown graph pass '" + name + "' (known: " + known + ")");
}

std::vector<std::string> GraphPassNames() {
  std::vector<std::string> names;
  for (const GraphPass& pass : kPasses) names.push_back(pass.name);
  return names;
}

}  // namespace sparq
