#include "sparq/inspect.h"

#include <algorithm>
#include <cstring>
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
  s.num_initializers = static_cast<int64_t>(g.initializers.size());

  std::map<std::string, int64_t> counts;
  std::set<std::string> counted;  // weights already in the totals
  auto add_to_totals = [&](const std::string& name, const Tensor& t, int64_t zeros) {
    if (!counted.insert(name).second) return;
    s.total_params += t.numel();
    s.total_bytes += static_cast<int64_t>(t.nbytes());
    s.total_zeros += zeros;
  };
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& n = g.nodes[i];
    const std::string op = (n.domain.empty() || n.domain == "ai.onnx" ? "" : n.domain + ".") + n.op_type;
    ++counts[op];
    if (n.op_type == "Constant" && n.domain.empty()) continue;  // its value is counted where it is used
    LayerSummary layer;
    layer.node = n.name.empty() ? n.op_type + "#" + std::to_string(i) : n.name;
    layer.op_type = op;
    std::set<std::string> seen_here;  // a node reading one weight twice counts it once
    for (const std::string& in : n.inputs) {
      if (in.empty() || !seen_here.insert(in).second) continue;
      const Tensor* w = g.FindWeight(in);
      if (w == nullptr) continue;
      const int64_t zeros = CountZeros(*w);
      layer.weights.push_back(in);
      layer.params += w->numel();
      layer.bytes += static_cast<int64_t>(w->nbytes());
      layer.zeros += zeros;
      add_to_totals(in, *w, zeros);
    }
    if (!layer.weights.empty()) s.layers.push_back(std::move(layer));
  }
  // Initializers that no node reads still take space in the file.
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
                             " initializers"});
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
  TextTable lt({"node", "op", "params", "bytes", "sparsity"}, {false, false, true, true, true});
  for (const LayerSummary& l : layers) {
    lt.AddRow({l.node, l.op_type, WithThousands(l.params), HumanBytes(l.bytes), Percent(l.sparsity())});
  }
  lt.AddRow({"total", "", WithThousands(total_params), HumanBytes(total_bytes), Percent(sparsity())});
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
  j["num_initializers"] = num_initializers;
  json ops = json::array();  // an array keeps the most-frequent-first order
  for (const auto& [op, count] : op_histogram) ops.push_back({{"op", op}, {"count", count}});
  j["operators"] = ops;
  json layer_json = json::array();
  for (const LayerSummary& l : layers) {
    layer_json.push_back({{"node", l.node},
                          {"op", l.op_type},
                          {"weights", l.weights},
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
