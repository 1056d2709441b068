// UpgradeOpsetForInt8: the opset conversion an INT8 run needs, and what it says.
#include <set>
#include <string>

#include "graph/graph_editor.h"
#include "sparq/onnx_io.h"
#include "sparq/quantize.h"

namespace sparq {
namespace {

// Opset 17 -> 19 by hand: the ONNX library sparq links (1.12) converts only up
// to 17. Of the default-domain operators sparq runs, two changed meaning in
// 18 and 19 for models written at 17:
//   Reduce* (but ReduceSum, at 13): `axes` moved from an attribute to input 1;
//   Split: without its `split` input, it needs `num_outputs` (equal parts).
// Every other change keeps the old behaviour by default (Pad's `axes`,
// Resize's `antialias` / `keep_aspect_ratio_policy`, Cast's `saturate`, which
// concerns float8 only, AveragePool's `dilations`, ...). Subgraphs (If, Loop,
// Scan) are not rewritten: a model whose subgraphs hold such nodes is refused.
Status UpgradeOpset17To19(Model& model) {
  static const std::set<std::string> kReduce = {"ReduceMax",  "ReduceMin",    "ReduceMean",      "ReduceProd",
                                                "ReduceL1",   "ReduceL2",     "ReduceLogSum",    "ReduceLogSumExp",
                                                "ReduceSumSquare"};
  Graph& g = model.graph;
  for (const Node& n : g.nodes) {
    for (const Attribute& a : n.attributes) {
      if (!a.subgraph) continue;
      for (const Node& inner : a.subgraph->nodes)
        if (inner.domain.empty() && (kReduce.count(inner.op_type) || inner.op_type == "Split"))
          return Status::NotSupported(n.Describe() + " has a " + inner.op_type +
                                      " in a subgraph, which the opset 17 -> 19 upgrade does not rewrite");
    }
  }
  GraphEditor ed(g);
  const size_t count = g.nodes.size();
  for (size_t i = 0; i < count; ++i) {
    Node& n = g.nodes[i];
    if (!n.domain.empty()) continue;
    if (kReduce.count(n.op_type)) {
      const Attribute* axes = n.attr("axes");
      if (axes == nullptr) continue;  // all axes: the same at 18 (noop_with_empty_axes 0)
      const std::vector<int64_t> values = n.attr_ints("axes");
      const std::string name =
          ed.AddInitializer((n.name.empty() ? n.outputs[0] : n.name) + "_axes",
                            Tensor::FromVector<int64_t>({static_cast<int64_t>(values.size())}, values));
      Node& node = g.nodes[i];  // AddInitializer does not move nodes; re-read for clarity
      node.inputs.resize(1);
      node.inputs.push_back(name);
      std::vector<Attribute> kept;
      for (const Attribute& a : node.attributes)
        if (a.name != "axes") kept.push_back(a);
      node.attributes = std::move(kept);
    } else if (n.op_type == "Split" && (n.inputs.size() < 2 || n.inputs[1].empty()) && n.attr("num_outputs") == nullptr) {
      n.attributes.push_back(Attribute::Int("num_outputs", static_cast<int64_t>(n.outputs.size())));
    }
  }
  for (auto& o : model.opset_imports)
    if (o.domain.empty() || o.domain == "ai.onnx") o.version = 19;
  return Status::OK();
}

}  // namespace

StatusOr<std::string> UpgradeOpsetForInt8(Model& model, const QuantizeOptions& options) {
  const int64_t from = model.opset();
  if (options.fp8) {  // float8e4m3fn Q/DQ: opset 19
    if (from >= 19) return std::string();
    auto refuse = [&](const Status& why) {
      return Status::NotSupported("FP8 quantization needs opset >= 19 (float8e4m3fn QuantizeLinear); the model imports "
                                  "opset " + std::to_string(from) + " and " + why.message());
    };
    Model upgraded = model;
    if (from < 17) {
      auto converted = ConvertOpset(model, 17);
      if (!converted.ok()) return refuse(converted.status());
      upgraded = std::move(converted).value();
    }
    if (Status st = UpgradeOpset17To19(upgraded); !st.ok()) return refuse(st);
    model = std::move(upgraded);
    return "converted the model from opset " + std::to_string(from) + " to 19 (" +
           (from < 17 ? "ONNX's version converter to 17, then " : "") +
           "Reduce* axes as inputs, Split num_outputs; float8e4m3fn QuantizeLinear needs opset 19)";
  }
  const bool per_axis = options.format == QuantFormat::kQDQ && options.per_channel;
  if (from >= 10 && !(per_axis && from < 13)) return std::string();
  auto converted = ConvertOpset(model, 13);
  if (!converted.ok()) {
    if (from < 10) {
      return Status::NotSupported("quantization needs opset >= 10 (QuantizeLinear); the model imports opset " +
                                  std::to_string(from) + " and " + converted.status().message());
    }
    return "opset " + std::to_string(from) + " kept (" + converted.status().message() + "): weights quantized per tensor";
  }
  const std::string why = from < 10 ? "QuantizeLinear needs opset 10" : "per-channel DequantizeLinear needs opset 13";
  model = std::move(converted).value();
  return "converted the model from opset " + std::to_string(from) + " to 13 with ONNX's version converter (" + why + ")";
}

}  // namespace sparq
