// Small helpers the graph rewrites of runtime/passes/ share.
#pragma once

#include <cstddef>
#include <set>

#include "sparq/graph.h"

namespace sparq {

// Keeps the nodes of `g` whose index is not in `removed`, in order.
void EraseNodes(Graph& g, const std::set<size_t>& removed);

// Imports the sparq domain (the fused operators') when the model does not yet.
void ImportSparqDomain(Model* model);

}  // namespace sparq
