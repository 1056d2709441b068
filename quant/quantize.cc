// QuantizeModel: decide each layer's precision, then rewrite.
//
// QDQ form (default), for an INT8 Conv:
//
//   x ─Q─DQ─┐                                   (one Q/DQ pair per activation,
//   Wq ──DQ─┼─ Conv ─ y ─Q─DQ─> consumers         shared by all its consumers)
//   Bq ──DQ─┘
//
// QOperator form:
//
//   x ─Q─> QLinearConv(xq, Wq, Bq) ─> yq ─DQ─> y   (consecutive QLinear layers
//                                                  pass yq along directly)
#include <algorithm>
#include <map>
#include <set>

#include "graph/graph_editor.h"
#include "graph/name_pattern.h"
#include "quant/passes.h"
#include "sparq/onnx_io.h"
#include "sparq/quantize.h"

namespace sparq {

std::optional<WeightedLayer> QuantizableLayer(const Graph& g, const Node& n) {
  if (!n.domain.empty()) return std::nullopt;
  std::optional<WeightedLayer> layer = AsWeightedLayer(g, n);
  if (!layer) return std::nullopt;
  const Tensor* w = g.FindWeight(layer->weight);
  if (w->dtype() != DataType::kFloat32 || g.FindWeight(layer->input) != nullptr) return std::nullopt;
  if (n.op_type == "Conv" ? w->rank() < 3 : w->rank() != 2) return std::nullopt;
  if (n.op_type == "Gemm" && n.attr_int("transA", 0) != 0) return std::nullopt;
  return layer;
}

bool HasQuantizableBias(const Graph& g, const Node& n, const WeightedLayer& layer) {
  if (n.inputs.size() <= 2 || n.inputs[2].empty()) return false;
  const Tensor* b = g.FindWeight(n.inputs[2]);
  const int64_t channels = layer.weight_shape[layer.weight_axis()];
  const bool plain_gemm = n.op_type != "Gemm" || (n.attr_float("alpha", 1.0f) == 1.0f && n.attr_float("beta", 1.0f) == 1.0f);
  return b != nullptr && b->dtype() == DataType::kFloat32 && b->numel() == channels && plain_gemm;
}

std::optional<size_t> FusedActivation(const Graph& g, size_t index) {
  const Node& n = g.nodes[index];
  if (n.outputs.size() != 1) return std::nullopt;
  std::optional<size_t> reader;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    for (const auto& in : g.nodes[i].inputs) {
      if (in != n.outputs[0]) continue;
      if (reader && *reader != i) return std::nullopt;
      reader = i;
    }
  }
  if (!reader) return std::nullopt;
  const Node& a = g.nodes[*reader];
  if (!a.domain.empty() || (a.op_type != "Relu" && a.op_type != "Clip") || a.outputs.size() != 1 ||
      a.inputs[0] != n.outputs[0]) {
    return std::nullopt;
  }
  for (const auto& o : g.outputs)
    if (o.name == n.outputs[0] || o.name == a.outputs[0]) return std::nullopt;
  return reader;
}

int64_t Int8LayerOverheadBytes(int64_t channels) { return 512 + 5 * channels; }

namespace {

// Each node's precision. `table` null: as if every range were there (what
// CalibrationTensorsNeeded asks); else a layer whose input has no range stays FP32.
StatusOr<std::vector<Precision>> ResolvePrecisions(const Graph& g, const QuantizeOptions& options,
                                                   const CalibrationTable* table, QuantizeReport* report) {
  std::vector<NamePattern> rules;
  std::vector<int> hits(options.layers.size(), 0);
  for (const auto& r : options.layers) {
    rules.emplace_back(r.match);
    if (!rules.back().valid_regex()) {
      return Status::InvalidArgument("quantize.layers: bad regex '" + r.match + "': " + rules.back().regex_error());
    }
  }
  const std::set<std::string> excluded(options.exclude_ops.begin(), options.exclude_ops.end());
  for (const std::string& op : options.exclude_ops) {
    if (op.empty()) return Status::InvalidArgument("quantize.exclude_ops: an op type must not be empty");
    const bool present =
        std::any_of(g.nodes.begin(), g.nodes.end(), [&](const Node& n) { return n.op_type == op; });
    if (!present) report->warnings.push_back("quantize.exclude_ops: the model has no '" + op + "' node");
  }
  std::vector<Precision> out(g.nodes.size(), Precision::kFP32);
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& n = g.nodes[i];
    Precision p = options.precision;
    std::string reason = "default";
    bool ruled = false;
    for (size_t k = 0; k < rules.size(); ++k) {
      if (rules[k].Matches(n.name)) {
        p = options.layers[k].precision;
        reason = "rule '" + options.layers[k].match + "'";
        ++hits[k];
        ruled = true;
        break;
      }
    }
    auto layer = QuantizableLayer(g, n);
    if (p == Precision::kINT8 && !layer) p = options.other_precision;  // INT8 applies to weighted layers
    if (!ruled && excluded.count(n.op_type)) {
      p = Precision::kFP32;
      reason = "exclude_ops '" + n.op_type + "'";
    }
    // MatMul / Gemm only: their weights are the multiply-adds per output row,
    // so few weights are little arithmetic; a Conv's run at every position.
    if (p == Precision::kINT8 && !ruled && options.skip_small_layers && layer && n.op_type != "Conv") {
      const int64_t weights = layer->params();
      const int64_t overhead = Int8LayerOverheadBytes(options.per_channel ? layer->rows : 1);
      if (3 * weights <= overhead) {
        p = Precision::kFP32;
        reason = "too small for INT8: " + std::to_string(weights) + " weights save " + std::to_string(3 * weights) +
                 " bytes, Q/DQ add about " + std::to_string(overhead);
      }
    }
    if (p == Precision::kINT8 && !options.dynamic && table != nullptr) {
      if (table->Find(n.inputs[0]) == nullptr) {
        p = Precision::kFP32;
        reason = "no calibration range for input '" + n.inputs[0] + "'";
      }
    }
    out[i] = p;
    if (layer) report->layers.push_back({n.name, n.op_type, p, reason});
  }
  for (size_t k = 0; k < rules.size(); ++k) {
    if (hits[k] == 0) {
      return Status::NotFound("quantize.layers: '" + options.layers[k].match + "' matches no node of the model");
    }
  }
  return out;
}

// Conv / Gemm / MatMul nodes in the subgraphs of g's nodes, at any depth.
int64_t WeightedNodesInSubgraphs(const Graph& g, bool inside = false) {
  int64_t n = 0;
  for (const Node& node : g.nodes) {
    if (inside && node.domain.empty() &&
        (node.op_type == "Conv" || node.op_type == "Gemm" || node.op_type == "MatMul")) {
      ++n;
    }
    for (const Attribute& a : node.attributes)
      if (a.subgraph) n += WeightedNodesInSubgraphs(*a.subgraph, true);
  }
  return n;
}

}  // namespace

StatusOr<Model> QuantizeModel(const Model& input, const CalibrationTable& table, const QuantizeOptions& options,
                              QuantizeReport* report) {
  QuantizeReport local;
  if (report == nullptr) report = &local;
  *report = QuantizeReport{};
  Model model = input;
  if (model.opset() < 10) {
    return Status::NotSupported("quantization needs opset >= 10 (QuantizeLinear); the model imports opset " +
                                std::to_string(model.opset()));
  }
  if (options.fp8) {
    if (options.dynamic || options.format != QuantFormat::kQDQ) {
      return Status::InvalidArgument("FP8 quantization is static QDQ only (not dynamic, not QOperator)");
    }
    if (model.opset() < 19) {
      return Status::NotSupported("FP8 quantization needs opset >= 19 (float8e4m3fn QuantizeLinear); the model imports "
                                  "opset " + std::to_string(model.opset()) + " (UpgradeOpsetForInt8 converts it)");
    }
  }
  if (!options.rounded_weights.empty() &&
      (options.fp8 || options.dynamic || options.format != QuantFormat::kQDQ || options.precision != Precision::kINT8)) {
    return Status::InvalidArgument(
        "quantize rounded_weights (AdaRound) apply to static INT8 in QDQ form only (not fp8, dynamic, QOperator or a "
        "default precision other than int8)");
  }
  if (options.fold_batchnorm) {
    SPARQ_ASSIGN_OR_RETURN(report->folded_batchnorms, FoldBatchNorm(model));
  }
  Graph& g = model.graph;
  if (const int64_t inside = WeightedNodesInSubgraphs(g); inside > 0) {
    report->warnings.push_back(std::to_string(inside) +
                               " Conv/Gemm/MatMul nodes inside If/Loop/Scan subgraphs stay as written (float): "
                               "sparq quantizes the outer graph only");
  }
  SPARQ_ASSIGN_OR_RETURN(std::vector<Precision> precision, ResolvePrecisions(g, options, &table, report));
  if (options.fp8) {  // the layer decisions say INT8 ("quantized"); the reason says in what
    for (LayerDecision& d : report->layers)
      if (d.precision == Precision::kINT8) d.reason += " (fp8 e4m3)";
  }
  if (!options.dynamic && !options.bias_correction.empty()) {
    SPARQ_ASSIGN_OR_RETURN(report->bias_corrected, ApplyBiasCorrection(g, precision, options.bias_correction));
  }

  // Float32 values, known before rewriting: those FP16 conversion must cast.
  // The table lists every float activation; shape inference adds values
  // computed from constants alone.
  InferShapes(model).ok();
  std::set<std::string> float_values;
  for (const auto& r : table.tensors) float_values.insert(r.name);
  for (const auto& [name, t] : g.initializers)
    if (t.dtype() == DataType::kFloat32) float_values.insert(name);
  for (const auto* list : {&g.inputs, &g.outputs, &g.value_info})
    for (const auto& v : *list)
      if (v.dtype == DataType::kFloat32) float_values.insert(v.name);
  for (const Node& n : g.nodes) {
    if (n.op_type != "Constant") continue;
    const Tensor* t = g.FindWeight(n.outputs[0]);
    if (t != nullptr && t->dtype() == DataType::kFloat32) float_values.insert(n.outputs[0]);
  }

  // Names of the nodes by precision survive the rewrites (indices do not).
  std::vector<std::string> fp16_nodes;
  std::set<size_t> fused_activations;  // computed on the integers: not FP16
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    if (precision[i] != Precision::kINT8 || (options.format == QuantFormat::kQDQ && !options.quantize_outputs)) continue;
    if (auto a = FusedActivation(g, i); a && table.Find(g.nodes[*a].outputs[0]) != nullptr) fused_activations.insert(*a);
  }
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    if (precision[i] == Precision::kFP16 && !fused_activations.count(i)) fp16_nodes.push_back(NodeKey(g.nodes[i]));
  }
  const bool any_int8 = std::count(precision.begin(), precision.end(), Precision::kINT8) > 0;
  if (any_int8) {
    if (options.dynamic) {
      SPARQ_RETURN_IF_ERROR(RewriteDynamic(model, precision, options, float_values, report));
    } else if (options.format == QuantFormat::kQDQ) {
      SPARQ_RETURN_IF_ERROR(InsertQdq(model, table, precision, options, float_values, report));
    } else {
      SPARQ_RETURN_IF_ERROR(RewriteQOperator(model, table, precision, options, float_values, report));
    }
  }
  if (options.precision == Precision::kINT8 && options.gather_int8 && !options.fp8) QuantizeGatherTables(model, report);
  if (!fp16_nodes.empty()) {
    SPARQ_RETURN_IF_ERROR(ConvertToFloat16(model, fp16_nodes, float_values, table, options, report));
  }
  g.value_info.clear();
  SPARQ_RETURN_IF_ERROR(g.TopoSort());
  InferShapes(model).ok();  // best effort, for readers of the file
  return model;
}

StatusOr<std::vector<CalibrationNeed>> CalibrationTensorsNeeded(const Model& input, const QuantizeOptions& options) {
  std::vector<CalibrationNeed> needs;
  if (options.dynamic) return needs;
  Model model = input;  // shares the weights; folding replaces them
  if (options.fold_batchnorm) SPARQ_RETURN_IF_ERROR(FoldBatchNorm(model).status());
  const Graph& g = model.graph;
  QuantizeReport unused;
  SPARQ_ASSIGN_OR_RETURN(std::vector<Precision> precision, ResolvePrecisions(g, options, nullptr, &unused));
  std::set<std::string> seen;
  auto need = [&](const std::string& tensor, const Node& n, const char* role) {
    if (seen.insert(tensor).second) needs.push_back({tensor, std::string(role) + " of INT8 layer '" + NodeKey(n) + "'"});
  };
  // QDQ form: the values whose readers all see a dequantized form (layer
  // outputs, then flow-op outputs, as InsertQdq walks the graph), and the
  // float values, as far as shape inference knows their types.
  const bool qdq = options.format == QuantFormat::kQDQ && options.precision == Precision::kINT8;
  std::set<std::string> requantized;
  std::map<std::string, DataType> types;
  if (qdq) {
    InferShapes(model).ok();  // best effort: an unknown type counts as float
    for (const auto* list : {&g.inputs, &g.outputs, &g.value_info})
      for (const auto& v : *list) types[v.name] = v.dtype;
  }
  auto maybe_float = [&](const std::string& v) {
    auto it = types.find(v);
    return it == types.end() || it->second == DataType::kUndefined || it->second == DataType::kFloat32;
  };
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& n = g.nodes[i];
    if (precision[i] == Precision::kINT8) {
      need(n.inputs[0], n, "input");
      if (options.format == QuantFormat::kQDQ && !options.quantize_outputs) continue;
      // Quantized once, after a fusable activation (Conv -> Relu -> Q).
      const auto act = FusedActivation(g, i);
      const std::string& y = act ? g.nodes[*act].outputs[0] : n.outputs[0];
      need(y, n, "output");
      requantized.insert(y);
      continue;
    }
    if (!qdq || precision[i] != Precision::kFP32 || !IsFlowOp(n)) continue;
    bool any_float = false, all_quantized = true;
    for (const auto& in : n.inputs) {
      if (in.empty() || g.FindWeight(in) != nullptr || !maybe_float(in)) continue;
      any_float = true;
      all_quantized &= requantized.count(in) > 0;
    }
    if (any_float && all_quantized && seen.insert(n.outputs[0]).second) {
      needs.push_back({n.outputs[0], "output of '" + NodeKey(n) + "' (INT8 flows through " + n.op_type + ")", false});
      requantized.insert(n.outputs[0]);
    }
  }
  return needs;
}

Status CheckCalibrationTable(const Model& model, const CalibrationTable& table, const QuantizeOptions& options,
                             std::vector<std::string>* warnings) {
  SPARQ_ASSIGN_OR_RETURN(std::vector<CalibrationNeed> needs, CalibrationTensorsNeeded(model, options));
  size_t missing = 0, required = 0;
  const CalibrationNeed* first = nullptr;
  for (const auto& n : needs) {
    required += n.required;
    if (!n.required || table.Find(n.tensor) != nullptr) continue;
    if (first == nullptr) first = &n;
    ++missing;
  }
  if (first != nullptr) {
    return Status::NotFound("the calibration table has no range for tensor '" + first->tensor + "' (" + first->use +
                            "); " + std::to_string(missing) + " of the " + std::to_string(required) +
                            " tensors quantization needs are missing: was it calibrated on another model?");
  }
  if (warnings == nullptr) return Status::OK();
  std::set<std::string> values;
  for (const auto& v : model.graph.inputs) values.insert(v.name);
  for (const Node& n : model.graph.nodes) values.insert(n.outputs.begin(), n.outputs.end());
  std::vector<std::string> unknown;
  for (const auto& r : table.tensors)
    if (!values.count(r.name)) unknown.push_back(r.name);
  if (!unknown.empty()) {
    warnings->push_back("the calibration table has " + std::to_string(unknown.size()) +
                        " tensor(s) the model does not have (first: '" + unknown.front() + "'); they are ignored");
  }
  return Status::OK();
}

std::string NodeKey(const Node& n) { return n.name.empty() ? "@" + n.outputs.at(0) : n.name; }

}  // namespace sparq
