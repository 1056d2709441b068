#include "sparq/inspect.h"

#include <algorithm>
#include <cstring>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "formats/text_table.h"
#include "sparq/version.h"
#include "sparq/onnx_io.h"

namespace sparq {
namespace {

using json = nlohmann::ordered_json;  // keys in insertion order

template <typename T>
int64_t CountZerosOf(const Tensor& t) {
  const T* p = static_cast<const T*>(t.raw_data());
  int64_t zeros = 0;
  for (int64_t i = 0; i < t.numel(); ++i) zeros += p[i] == T(0) ? 1 : 0;
  return zeros;
}

// 16-bit floats: zero when every bit but the sign is clear.
int64_t CountZeros16(const Tensor& t) {
  const auto* p = static_cast<const uint16_t*>(t.raw_data());
  int64_t zeros = 0;
  for (int64_t i = 0; i < t.numel(); ++i) zeros += (p[i] & 0x7fffu) == 0 ? 1 : 0;
  return zeros;
}

int64_t CountZeros(const Tensor& t) {
  switch (t.dtype()) {
    case DataType::kFloat32: return CountZerosOf<float>(t);
    case DataType::kFloat64: return CountZerosOf<double>(t);
    case DataType::kFloat16:
    case DataType::kBFloat16: return CountZeros16(t);
    case DataType::kInt8: return CountZerosOf<int8_t>(t);
    case DataType::kUInt8:
    case DataType::kBool: return CountZerosOf<uint8_t>(t);
    case DataType::kInt16: return CountZerosOf<int16_t>(t);
    case DataType::kUInt16: return CountZerosOf<uint16_t>(t);
    case DataType::kInt32: return CountZerosOf<int32_t>(t);
    case DataType::kUInt32: return CountZerosOf<uint32_t>(t);
    case DataType::kInt64: return CountZerosOf<int64_t>(t);
    case DataType::kUInt64: return CountZerosOf<uint64_t>(t);
    default: return 0;
  }
}

// Zeros of a quantized weight: elements equal to their zero point (per tensor,
// or per channel along `axis`), so a zero counts as zero after dequantizing.
template <typename T>
int64_t CountQuantizedZerosOf(const Tensor& q, const Tensor& zp, int64_t axis) {
  const T* p = static_cast<const T*>(q.raw_data());
  const T* z = static_cast<const T*>(zp.raw_data());
  int64_t channels = 1, inner = 1;
  if (zp.numel() > 1) {
    channels = q.shape()[static_cast<size_t>(axis)];
    for (size_t d = static_cast<size_t>(axis) + 1; d < q.shape().size(); ++d) inner *= q.shape()[d];
  }
  int64_t zeros = 0;
  for (int64_t i = 0; i < q.numel(); ++i) zeros += p[i] == z[(i / inner) % channels] ? 1 : 0;
  return zeros;
}

// Zeros of the quantized constant `q` whose zero point is `zp` (nullptr: 0),
// per tensor or per channel along `axis` (negative counts from the end).
int64_t CountQuantizedZeros(const Tensor& q, const Tensor* zp, int64_t axis) {
  if (zp == nullptr || zp->numel() == 0 || zp->dtype() != q.dtype()) return CountZeros(q);
  const int64_t rank = static_cast<int64_t>(q.shape().size());
  if (axis < 0) axis += rank;
  if (zp->numel() > 1 && (axis < 0 || axis >= rank || q.shape()[static_cast<size_t>(axis)] != zp->numel())) {
    return CountZeros(q);  // not a layout the operator accepts; count plain zeros
  }
  switch (q.dtype()) {
    case DataType::kInt8: return CountQuantizedZerosOf<int8_t>(q, *zp, axis);
    case DataType::kUInt8: return CountQuantizedZerosOf<uint8_t>(q, *zp, axis);
    default: return CountZeros(q);
  }
}

const Tensor* OptionalWeight(const Graph& g, const Node& n, size_t k) {
  return k < n.inputs.size() && !n.inputs[k].empty() ? g.FindWeight(n.inputs[k]) : nullptr;
}

// QOperator layers: which inputs are scales and zero points, and for the
// weight input (B/W), where its zero point is and along which axis it varies.
struct QuantizedOpInputs {
  const char* op_type;
  std::vector<size_t> quant_params;  // input indices of scales and zero points
  size_t weight;                     // input index of the weight
  size_t weight_zero_point;
  int64_t axis;                      // of a per-channel weight zero point
};
const std::vector<QuantizedOpInputs>& QuantizedOps() {
  static const std::vector<QuantizedOpInputs> ops = {
      // x, x_scale, x_zp, w, w_scale, w_zp, y_scale, y_zp, B
      {"QLinearConv", {1, 2, 4, 5, 6, 7}, 3, 5, 0},
      // a, a_scale, a_zp, b, b_scale, b_zp, y_scale, y_zp
      {"QLinearMatMul", {1, 2, 4, 5, 6, 7}, 3, 5, -1},
      // x, w, x_zp, w_zp
      {"ConvInteger", {2, 3}, 1, 3, 0},
      // a, b, a_zp, b_zp
      {"MatMulInteger", {2, 3}, 1, 3, -1},
  };
  return ops;
}

bool IsDefaultDomain(const Node& n) { return n.domain.empty() || n.domain == "ai.onnx"; }
bool IsQuantizeOrDequantize(const Node& n) {
  return IsDefaultDomain(n) && (n.op_type == "QuantizeLinear" || n.op_type == "DequantizeLinear");
}
const QuantizedOpInputs* QuantizedOpOf(const Node& n) {
  if (!IsDefaultDomain(n)) return nullptr;
  for (const QuantizedOpInputs& q : QuantizedOps()) {
    if (n.op_type == q.op_type) return &q;
  }
  return nullptr;
}

std::string DomainName(const std::string& domain) { return domain.empty() ? "ai.onnx" : domain; }

std::string TypeText(const ValueInfo& v) {
  if (!v.is_tensor) return "(non-tensor)";
  if (v.dtype != DataType::kUndefined) return DataTypeName(v.dtype);
  if (v.onnx_elem_type != 0) return "onnx type " + std::to_string(v.onnx_elem_type);
  return "?";
}

std::string ShapeText(const ValueInfo& v) {
  if (!v.is_tensor) return "";
  if (!v.has_shape) return "(unknown rank)";
  std::string s = "[";
  for (size_t i = 0; i < v.dims.size(); ++i) {
    const Dim& d = v.dims[i];
    s += i ? ", " : "";
    s += d.known() ? std::to_string(d.value) : !d.param.empty() ? d.param : "?";
  }
  return s + "]";
}

json ValueJson(const ValueInfo& v) {
  json j;
  j["name"] = v.name;
  j["type"] = TypeText(v);
  if (v.is_tensor && v.has_shape) {
    json dims = json::array();
    for (const Dim& d : v.dims) {
      if (d.known()) dims.push_back(d.value);
      else if (!d.param.empty()) dims.push_back(d.param);
      else dims.push_back(nullptr);
    }
    j["shape"] = dims;
  } else {
    j["shape"] = nullptr;
  }
  return j;
}

std::string Percent(double fraction) { return FormatDouble("%.2f%%", 100.0 * fraction); }

}  // namespace

ModelSummary SummarizeModel(const Model& model) {
  const Graph& g = model.graph;
  ModelSummary s;
  s.ir_version = model.ir_version;
  s.opsets = model.opset_imports;
  s.producer_name = model.producer_name;
  s.producer_version = model.producer_version;
  s.graph_name = g.name;
  s.inputs = g.inputs;
  s.outputs = g.outputs;
  s.num_nodes = static_cast<int64_t>(g.nodes.size());
  std::function<int64_t(const Graph&)> inside = [&](const Graph& graph) {
    int64_t n = 0;
    for (const Node& node : graph.nodes)
      for (const Attribute& a : node.attributes)
        if (a.subgraph) n += static_cast<int64_t>(a.subgraph->nodes.size()) + inside(*a.subgraph);
    return n;
  };
  s.subgraph_nodes = inside(g);
  s.num_initializers = static_cast<int64_t>(g.initializers.size());

  // Mark: DequantizeLinear nodes of constant weights (by output), and the
  // scales and zero points of every QuantizeLinear / DequantizeLinear and
  // QOperator layer.
  std::map<std::string, const Node*> weight_dq;
  std::set<std::string> quant_params;
  for (const Node& n : g.nodes) {
    if (const QuantizedOpInputs* q = QuantizedOpOf(n)) {
      for (size_t k : q->quant_params) {
        if (k < n.inputs.size() && !n.inputs[k].empty()) quant_params.insert(n.inputs[k]);
      }
    }
    if (!IsQuantizeOrDequantize(n)) continue;
    for (size_t k = 1; k < n.inputs.size(); ++k) quant_params.insert(n.inputs[k]);
    if (n.op_type == "DequantizeLinear" && !n.inputs.empty() && n.outputs.size() == 1 &&
        g.FindWeight(n.inputs[0]) != nullptr) {
      weight_dq[n.outputs[0]] = &n;
    }
  }

  std::map<std::string, int64_t> counts;
  std::set<std::string> counted;  // weights already in the totals
  auto add_to_totals = [&](const std::string& name, const Tensor& t, int64_t zeros) {
    if (!counted.insert(name).second) return;
    s.total_bytes += static_cast<int64_t>(t.nbytes());
    if (quant_params.count(name)) return;  // a scale or zero point is not a parameter
    s.total_params += t.numel();
    s.total_zeros += zeros;
  };
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& n = g.nodes[i];
    const std::string op = (IsDefaultDomain(n) ? "" : n.domain + ".") + n.op_type;
    ++counts[op];
    if (n.op_type == "Constant" && n.domain.empty()) continue;  // its value is counted where it is used
    if (IsQuantizeOrDequantize(n)) continue;  // counted with the layer that reads it, or in the totals
    LayerSummary layer;
    layer.node = n.name.empty() ? n.op_type + "#" + std::to_string(i) : n.name;
    layer.op_type = op;
    std::set<std::string> seen_here;  // a node reading one weight twice counts it once
    for (const std::string& in : n.inputs) {
      if (in.empty() || !seen_here.insert(in).second) continue;
      const Node* dq = nullptr;
      std::string name = in;
      if (auto it = weight_dq.find(in); it != weight_dq.end()) {
        dq = it->second;
        name = dq->inputs[0];
        if (!seen_here.insert(name).second) continue;
      }
      const Tensor* w = g.FindWeight(name);
      if (w == nullptr) continue;
      if (dq == nullptr && quant_params.count(name)) {  // a QOperator layer's scale or zero point
        layer.bytes += static_cast<int64_t>(w->nbytes());
        add_to_totals(name, *w, 0);
        continue;
      }
      int64_t zeros = 0;
      if (dq != nullptr) {
        zeros = CountQuantizedZeros(*w, OptionalWeight(g, *dq, 2), dq->attr_int("axis", 1));
      } else if (const QuantizedOpInputs* q = QuantizedOpOf(n);
                 q != nullptr && q->weight < n.inputs.size() && in == n.inputs[q->weight]) {
        zeros = CountQuantizedZeros(*w, OptionalWeight(g, n, q->weight_zero_point), q->axis);
      } else {
        zeros = CountZeros(*w);
      }
      if (layer.weights.empty()) layer.precision = DataTypeName(w->dtype());
      layer.weights.push_back(name);
      layer.params += w->numel();
      layer.bytes += static_cast<int64_t>(w->nbytes());
      layer.zeros += zeros;
      add_to_totals(name, *w, zeros);
      if (dq == nullptr) continue;
      layer.qdq = s.qdq = true;
      for (size_t k = 1; k < dq->inputs.size(); ++k) {  // the scale and zero point
        const Tensor* p = dq->inputs[k].empty() ? nullptr : g.FindWeight(dq->inputs[k]);
        if (p == nullptr || !seen_here.insert(dq->inputs[k]).second) continue;
        layer.bytes += static_cast<int64_t>(p->nbytes());
        add_to_totals(dq->inputs[k], *p, 0);
      }
    }
    if (!layer.weights.empty()) s.layers.push_back(std::move(layer));
  }
  // Initializers that no node reads, and the scales and zero points of
  // activations, still take space in the file.
  for (const auto& [name, t] : g.initializers) {
    if (!counted.count(name)) add_to_totals(name, t, CountZeros(t));
  }
  s.op_histogram.assign(counts.begin(), counts.end());
  std::stable_sort(s.op_histogram.begin(), s.op_histogram.end(),
                   [](const auto& a, const auto& b) { return a.second > b.second; });
  return s;
}

StatusOr<ModelSummary> InspectModel(const std::string& path) {
  LoadOptions options;
  options.infer_shapes = false;
  SPARQ_ASSIGN_OR_RETURN(Model model, LoadModel(path, options));
  ModelSummary s = SummarizeModel(model);
  s.path = path;
  return s;
}

std::string ModelSummary::ToText() const {
  std::string out;
  std::string opset_text;
  for (const auto& op : opsets) {
    opset_text += (opset_text.empty() ? "" : ", ") + DomainName(op.domain) + " " + std::to_string(op.version);
  }
  std::string producer = producer_name.empty() ? "(none)" : producer_name;
  if (!producer_version.empty()) producer += " " + producer_version;
  TextTable about({"", ""});
  if (!path.empty()) about.AddRow({"Model", path});
  about.AddRow({"IR version", std::to_string(ir_version)});
  about.AddRow({"Opsets", opset_text.empty() ? "(none)" : opset_text});
  about.AddRow({"Producer", producer});
  about.AddRow({"Graph", (graph_name.empty() ? std::string("(unnamed)") : graph_name) + ": " +
                             std::to_string(num_nodes) + " nodes, " + std::to_string(num_initializers) +
                             " initializers" +
                             (subgraph_nodes > 0 ? "; " + std::to_string(subgraph_nodes) +
                                                       " more nodes inside If/Loop/Scan subgraphs (not listed below)"
                                                 : std::string())});
  // Drop the empty header row of the key/value table.
  std::string about_text = about.Render("");
  out += about_text.substr(about_text.find('\n') + 1);

  auto values_table = [](const char* title, const std::vector<ValueInfo>& values) {
    std::string text = std::string("\n") + title + " (" + std::to_string(values.size()) + ")\n";
    TextTable t({"name", "type", "shape"});
    for (const ValueInfo& v : values) t.AddRow({v.name, TypeText(v), ShapeText(v)});
    return text + t.Render();
  };
  out += values_table("Inputs", inputs);
  out += values_table("Outputs", outputs);

  out += "\nOperators (" + std::to_string(op_histogram.size()) + " types)\n";
  TextTable ops({"op", "count"}, {false, true});
  for (const auto& [op, count] : op_histogram) ops.AddRow({op, std::to_string(count)});
  out += ops.Render();

  out += "\nLayers with weights (" + std::to_string(layers.size()) + ")\n";
  TextTable lt({"node", "op", "precision", "params", "bytes", "sparsity"}, {false, false, false, true, true, true});
  for (const LayerSummary& l : layers) {
    lt.AddRow({l.node, l.op_type, l.precision + (l.qdq ? " (QDQ)" : ""), WithThousands(l.params),
               HumanBytes(l.bytes), Percent(l.sparsity())});
  }
  lt.AddRow({"total", "", "", WithThousands(total_params), HumanBytes(total_bytes), Percent(sparsity())});
  out += lt.Render();
  return out;
}

std::string ModelSummary::ToJson() const {
  json j;
  j["schema_version"] = kJsonSchemaVersion;
  j["sparq_version"] = Version();
  j["path"] = path;
  j["ir_version"] = ir_version;
  json opset_json = json::array();
  for (const auto& op : opsets) opset_json.push_back({{"domain", DomainName(op.domain)}, {"version", op.version}});
  j["opsets"] = opset_json;
  j["producer"] = {{"name", producer_name}, {"version", producer_version}};
  j["graph"] = graph_name;
  json ins = json::array(), outs = json::array();
  for (const auto& v : inputs) ins.push_back(ValueJson(v));
  for (const auto& v : outputs) outs.push_back(ValueJson(v));
  j["inputs"] = ins;
  j["outputs"] = outs;
  j["num_nodes"] = num_nodes;
  j["subgraph_nodes"] = subgraph_nodes;
  j["num_initializers"] = num_initializers;
  json ops = json::array();  // an array keeps the most-frequent-first order
  for (const auto& [op, count] : op_histogram) ops.push_back({{"op", op}, {"count", count}});
  j["operators"] = ops;
  j["qdq"] = qdq;
  json layer_json = json::array();
  for (const LayerSummary& l : layers) {
    layer_json.push_back({{"node", l.node},
                          {"op", l.op_type},
                          {"weights", l.weights},
                          {"precision", l.precision},
                          {"qdq", l.qdq},
                          {"params", l.params},
                          {"bytes", l.bytes},
                          {"zeros", l.zeros},
                          {"sparsity", l.sparsity()}});
  }
  j["layers"] = layer_json;
  j["totals"] = {{"params", total_params}, {"bytes", total_bytes}, {"zeros", total_zeros}, {"sparsity", sparsity()}};
  // Names come from the file and may hold invalid UTF-8: replace, never throw.
  return j.dump(2, ' ', false, json::error_handler_t::replace);
}

}  // namespace sparq
