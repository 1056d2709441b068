// The opset conversions quantization needs, and what they say:
// UpgradeOpsetForInt8 (INT8: 10 / 13; FP8: 19) and UpgradeOpsetTo21 (INT4's
// blocked DequantizeLinear). ONNX's version converter does what it can; the
// one sparq links (libonnx 1.12) stops at opset 17, so 17 -> 19 / 21 is done
// here by hand (RaiseOpsetPast17).
#include <algorithm>
#include <set>
#include <string>

#include "graph/graph_editor.h"
#include "quant/int4.h"
#include "sparq/onnx_io.h"
#include "sparq/quantize.h"

namespace sparq {
namespace {

// Of the default-domain operators sparq runs, those that changed meaning in
// opsets 18 to 21 for a model written at 17:
//   Reduce* (but ReduceSum, at 13): `axes` moved from an attribute to input 1 (18);
//   Split: without its `split` input it needs `num_outputs` (18);
//   GridSample (mode names, 20), DFT (inputs, 20), GroupNormalization (scale
//   per channel, 21), Col2Im: refused.
// Every other change keeps the old behaviour by default (Pad's `axes`,
// Resize's `antialias` / `keep_aspect_ratio_policy`, Cast's `saturate`, which
// concerns float8 only, AveragePool's `dilations`, ...).
const std::set<std::string> kReduceAxes18 = {"ReduceMax",    "ReduceMin",       "ReduceMean",     "ReduceProd",
                                             "ReduceL1",     "ReduceL2",        "ReduceLogSum",   "ReduceLogSumExp",
                                             "ReduceSumSquare"};
const std::set<std::string> kChanged20 = {"GridSample", "DFT", "GroupNormalization", "Col2Im"};

bool DefaultDomain(const Node& n) { return n.domain.empty() || n.domain == "ai.onnx"; }

// Opset 17 -> `to` (18 to 21) by hand. Subgraphs (If, Loop, Scan) are not
// rewritten: a model whose subgraphs hold a node that would need it is refused.
Status RaiseOpsetPast17(Model& model, int64_t to) {
  auto needs_rewrite = [&](const Node& n) {
    return DefaultDomain(n) && (kReduceAxes18.count(n.op_type) || n.op_type == "Split");
  };
  Graph& g = model.graph;
  for (const Node& n : g.nodes) {
    if (!DefaultDomain(n)) continue;
    if (to >= 20 && kChanged20.count(n.op_type))
      return Status::NotSupported(n.Describe() + ": its definition changed by opset " + std::to_string(to) +
                                  "; sparq cannot convert it");
    for (const Attribute& a : n.attributes) {
      if (!a.subgraph) continue;
      for (const Node& inner : a.subgraph->nodes)
        if (needs_rewrite(inner) || (to >= 20 && DefaultDomain(inner) && kChanged20.count(inner.op_type)))
          return Status::NotSupported(n.Describe() + " has a " + inner.op_type + " in a subgraph, which the opset 17 -> " +
                                      std::to_string(to) + " upgrade does not rewrite");
    }
  }
  GraphEditor ed(g);
  for (Node& n : g.nodes) {
    if (!DefaultDomain(n)) continue;
    if (kReduceAxes18.count(n.op_type)) {
      if (n.attr("axes") == nullptr) continue;  // all axes: the same at 18 (noop_with_empty_axes 0)
      const std::vector<int64_t> values = n.attr_ints("axes");
      n.attributes.erase(std::remove_if(n.attributes.begin(), n.attributes.end(),
                                        [](const Attribute& a) { return a.name == "axes"; }),
                         n.attributes.end());
      n.inputs.resize(1);
      n.inputs.push_back(ed.AddInitializer((n.name.empty() ? n.outputs[0] : n.name) + "_axes",
                                           Tensor::FromVector<int64_t>({static_cast<int64_t>(values.size())}, values)));
    } else if (n.op_type == "Split" && (n.inputs.size() < 2 || n.inputs[1].empty()) &&
               n.attr("num_outputs") == nullptr) {
      n.attributes.push_back(Attribute::Int("num_outputs", static_cast<int64_t>(n.outputs.size())));
    }
  }
  for (auto& o : model.opset_imports)
    if (o.domain.empty() || o.domain == "ai.onnx") o.version = to;
  return Status::OK();
}

// `model` at opset `to` (>= 18): ONNX's converter when it reaches `to`, else
// the converter to 17 (when older) and RaiseOpsetPast17. Returns what was
// done; the model is unchanged on error.
StatusOr<std::string> ConvertPast17(Model& model, int64_t to) {
  const int64_t from = model.opset();
  auto direct = ConvertOpset(model, to);
  if (direct.ok()) {
    model = std::move(direct).value();
    return "converted the model from opset " + std::to_string(from) + " to " + std::to_string(to) +
           " with ONNX's version converter";
  }
  Model upgraded = model;
  if (from < 17) {
    auto converted = ConvertOpset(model, 17);
    if (!converted.ok()) return converted.status();
    upgraded = std::move(converted).value();
  }
  SPARQ_RETURN_IF_ERROR(RaiseOpsetPast17(upgraded, to));
  model = std::move(upgraded);
  return "converted the model from opset " + std::to_string(from) + " to " + std::to_string(to) + " (" +
         (from < 17 ? "ONNX's version converter to 17, then " : "") +
         "by hand past 17: Reduce* axes as inputs, Split num_outputs)";
}

}  // namespace

StatusOr<std::string> UpgradeOpsetTo21(Model& model) {
  if (model.opset() >= 21) return std::string();
  SPARQ_ASSIGN_OR_RETURN(std::string done, ConvertPast17(model, 21));
  model.ir_version = std::max<int64_t>(model.ir_version, 10);  // int4 types
  return done;
}

StatusOr<std::string> UpgradeOpsetForInt8(Model& model, const QuantizeOptions& options) {
  const int64_t from = model.opset();
  if (options.fp8) {  // float8e4m3fn Q/DQ: opset 19
    if (from >= 19) return std::string();
    auto done = ConvertPast17(model, 19);
    if (!done.ok()) {
      return Status::NotSupported("FP8 quantization needs opset >= 19 (float8e4m3fn QuantizeLinear); the model imports "
                                  "opset " + std::to_string(from) + " and " + done.status().message());
    }
    return *done + " (float8e4m3fn QuantizeLinear needs opset 19)";
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
