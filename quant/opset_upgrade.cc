// UpgradeOpsetForInt8: the opset conversion an INT8 run needs, and what it
// says; UpgradeOpsetTo21: the one INT4's DequantizeLinear form needs.
#include <algorithm>
#include <set>
#include <string>

#include "graph/graph_editor.h"
#include "quant/int4.h"
#include "sparq/onnx_io.h"
#include "sparq/quantize.h"

namespace sparq {

namespace {

// Ops whose `axes` attribute became an input at opset 18.
const std::set<std::string> kReduceOps18 = {"ReduceMean",    "ReduceMax",       "ReduceMin",      "ReduceProd",
                                            "ReduceL1",      "ReduceL2",        "ReduceLogSum",   "ReduceLogSumExp",
                                            "ReduceSumSquare"};
// Ops whose meaning changed between opsets 18 and 21 in ways a version bump
// cannot carry (GridSample's mode names, DFT's inputs, GroupNormalization's
// scale per channel).
const std::set<std::string> kChanged = {"GridSample", "DFT", "GroupNormalization", "Col2Im"};

}  // namespace

StatusOr<std::string> UpgradeOpsetTo21(Model& model) {
  const int64_t from = model.opset();
  if (from >= 21) return std::string();
  auto converted = ConvertOpset(model, 21);
  if (converted.ok()) {
    model = std::move(converted).value();
    return "converted the model from opset " + std::to_string(from) + " to 21 with ONNX's version converter";
  }
  // The converter sparq links stops at an older opset. From 13 on, raising the
  // import is enough for every op but the reductions whose axes became an
  // input at 18 (rewritten here) and those listed in kChanged (refused).
  if (from < 13) {
    return Status::NotSupported("opset " + std::to_string(from) + " -> 21: " + converted.status().message());
  }
  for (const Node& n : model.graph.nodes) {
    if (!n.domain.empty() && n.domain != "ai.onnx") continue;
    if (n.HasSubgraphs())
      return Status::NotSupported(n.Describe() + " has subgraphs, which sparq cannot convert to opset 21 (" +
                                  converted.status().message() + ")");
    if (kChanged.count(n.op_type))
      return Status::NotSupported(n.Describe() + ": its definition changed before opset 21; sparq cannot convert it");
  }
  GraphEditor editor(model.graph);
  for (Node& n : model.graph.nodes) {
    if ((!n.domain.empty() && n.domain != "ai.onnx") || from >= 18 || !kReduceOps18.count(n.op_type)) continue;
    const Attribute* axes = n.attr("axes");
    if (axes == nullptr) continue;  // all axes: the same without the input
    const std::vector<int64_t> values = n.attr_ints("axes");
    n.attributes.erase(std::remove_if(n.attributes.begin(), n.attributes.end(),
                                      [](const Attribute& a) { return a.name == "axes"; }),
                       n.attributes.end());
    n.inputs.resize(1);
    n.inputs.push_back(editor.AddInitializer((n.name.empty() ? n.outputs[0] : n.name) + "_axes",
                                             Tensor::FromVector<int64_t>({static_cast<int64_t>(values.size())}, values)));
  }
  for (auto& o : model.opset_imports)
    if (o.domain.empty() || o.domain == "ai.onnx") o.version = 21;
  model.ir_version = std::max<int64_t>(model.ir_version, 10);
  return "raised the model's opset from " + std::to_string(from) + " to 21 (ONNX's version converter here stops "
         "earlier; reductions' axes moved to inputs)";
}

StatusOr<std::string> UpgradeOpsetForInt8(Model& model, const QuantizeOptions& options) {
  const int64_t from = model.opset();
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
