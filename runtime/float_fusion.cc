// Conv -> Relu fusion:
//
//   x ── Conv(W, B) ── t ── Relu ── y      =>      x ── ai.sparq.FusedConv(W, B; activation=Relu) ── y
//
// t must have no other reader and must not be a graph output (it disappears).
#include "runtime/float_fusion.h"

#include <map>
#include <set>

namespace sparq {

std::vector<std::string> FuseConvActivations(Model* model) {
  Graph& g = model->graph;
  std::set<std::string> graph_outputs;
  for (const auto& o : g.outputs) graph_outputs.insert(o.name);
  std::map<std::string, std::vector<size_t>> readers;
  for (size_t i = 0; i < g.nodes.size(); ++i)
    for (const auto& in : g.nodes[i].inputs)
      if (!in.empty()) readers[in].push_back(i);

  std::vector<std::string> fused;
  std::set<size_t> removed;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    Node& conv = g.nodes[i];
    if (conv.op_type != "Conv" || !conv.domain.empty() || conv.outputs.size() != 1) continue;
    const std::string& t = conv.outputs[0];
    auto it = readers.find(t);
    if (graph_outputs.count(t) || it == readers.end() || it->second.size() != 1) continue;
    const size_t relu_index = it->second[0];
    const Node& relu = g.nodes[relu_index];
    if (relu.op_type != "Relu" || !relu.domain.empty() || relu.outputs.size() != 1 || removed.count(relu_index)) continue;
    conv.op_type = "FusedConv";
    conv.domain = kSparqDomain;
    conv.attributes.push_back(Attribute::String("activation", "Relu"));
    conv.outputs[0] = relu.outputs[0];
    removed.insert(relu_index);
    fused.push_back(conv.name);
  }
  if (fused.empty()) return fused;
  std::vector<Node> kept;
  for (size_t i = 0; i < g.nodes.size(); ++i)
    if (!removed.count(i)) kept.push_back(std::move(g.nodes[i]));
  g.nodes = std::move(kept);
  if (model->opset(kSparqDomain) == 0) model->opset_imports.push_back({kSparqDomain, 1});
  return fused;
}

}  // namespace sparq
