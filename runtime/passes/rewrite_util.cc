#include "runtime/passes/rewrite_util.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "kernels/registry.h"  // kSparqDomain

namespace sparq {

void EraseNodes(Graph& g, const std::set<size_t>& removed) {
  std::vector<Node> kept;
  kept.reserve(g.nodes.size() - std::min(removed.size(), g.nodes.size()));
  for (size_t i = 0; i < g.nodes.size(); ++i)
    if (!removed.count(i)) kept.push_back(std::move(g.nodes[i]));
  g.nodes = std::move(kept);
}

void ImportSparqDomain(Model* model) {
  for (const auto& o : model->opset_imports)
    if (o.domain == kSparqDomain) return;
  model->opset_imports.push_back({kSparqDomain, 1});
}

}  // namespace sparq
