// Float16 conversion of chosen nodes.
//
//   x(fp32) ─Cast(fp16)─> A ─> B ─Cast(fp32)─> y(fp32)     A, B in float16;
//                W(fp16) ─┘                               weights converted
//
// A float32 value read by float16 nodes gets one float16 twin (a converted
// initializer or a Cast); a float16 node's output keeps a float32 twin under
// the original name only where a float32 node or a graph output reads it.
#include <cmath>
#include <map>

#include "graph/graph_editor.h"
#include "quant/passes.h"

namespace sparq {
namespace {

constexpr float kHalfMax = 65504.0f;

// Ops that never compute in float16 here: type-changing, quantization and
// constant-producing ops (their float outputs are handled as values).
const std::set<std::string> kNeverHalf = {"Cast", "CastLike", "QuantizeLinear", "DequantizeLinear", "DynamicQuantizeLinear",
                                          "Constant", "ConstantOfShape", "Shape", "Size", "QLinearConv", "QLinearMatMul",
                                          "MatMulInteger", "ConvInteger"};

}  // namespace

const std::vector<std::string>& DefaultFp16BlockOps() {
  static const std::vector<std::string> kOps = {
      "ArrayFeatureExtractor", "Binarizer", "CastMap", "CategoryMapper", "DictVectorizer", "FeatureVectorizer",
      "Imputer", "LabelEncoder", "LinearClassifier", "LinearRegressor", "Normalizer", "OneHotEncoder",
      "RandomUniformLike", "SVMClassifier", "SVMRegressor", "Scaler", "TreeEnsembleClassifier",
      "TreeEnsembleRegressor", "ZipMap", "NonMaxSuppression", "TopK", "RoiAlign", "Resize", "Range", "CumSum",
      "Min", "Max", "Upsample"};
  return kOps;
}

Status ConvertToFloat16(Model& model, const std::vector<std::string>& fp16_nodes,
                        const std::set<std::string>& float_values, const QuantizeOptions& options,
                        QuantizeReport* report) {
  if (!options.fp16.keep_io_types) {
    return Status::NotSupported("quantize.fp16.keep_io_types: false is not supported yet (inputs/outputs stay float32)");
  }
  Graph& g = model.graph;
  GraphEditor ed(g);
  const std::set<std::string> wanted(fp16_nodes.begin(), fp16_nodes.end());
  const std::set<std::string> blocked(options.fp16.block_ops.begin(), options.fp16.block_ops.end());

  // Mark: the float16 nodes.
  std::vector<bool> half(g.nodes.size(), false);
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& n = g.nodes[i];
    if (!wanted.count(NodeKey(n)) || !n.domain.empty() || blocked.count(n.op_type) || kNeverHalf.count(n.op_type)) continue;
    bool reads_float = false;
    for (const auto& in : n.inputs) reads_float |= !in.empty() && float_values.count(in) > 0;
    half[i] = reads_float;
  }
  auto all_consumers_half = [&](const std::string& v) {
    if (ed.IsGraphOutput(v)) return false;
    for (size_t c : ed.Consumers(v))
      if (!half[c]) return false;
    return true;
  };
  auto to_half = [&](const std::string& name, const Tensor& t) {
    Tensor f = t.ToFloat32();
    int clamped = 0;
    for (int64_t k = 0; k < f.numel(); ++k) {
      float& v = f.data<float>()[k];
      if (std::fabs(v) > kHalfMax) v = std::copysign(kHalfMax, v), ++clamped;
    }
    if (clamped > 0) {
      report->warnings.push_back("float16: " + std::to_string(clamped) + " values of '" + name +
                                 "' beyond the float16 range were clamped to ±65504");
    }
    return f.CastTo(DataType::kFloat16);
  };

  // Rewrite, in topological order so producers come before consumers.
  std::map<std::string, std::string> half_of;  // float32 value -> float16 twin
  auto half_value = [&](const std::string& v) -> std::string {
    auto it = half_of.find(v);
    if (it != half_of.end()) return it->second;
    std::string h;
    auto init = g.initializers.find(v);
    if (init != g.initializers.end() && all_consumers_half(v)) {
      init->second = to_half(v, init->second);  // read only by float16 nodes: convert in place
      h = v;
    } else if (init != g.initializers.end()) {
      h = ed.AddInitializer(v + "_fp16", to_half(v, init->second));
    } else {
      h = ed.FreshName(v + "_fp16");
      ed.AddNode({ed.FreshName(v + "_Cast_fp16"), "Cast", "", {v}, {h}, {Attribute::Int("to", 10)}, ""});
    }
    half_of[v] = h;
    return h;
  };
  const size_t original = g.nodes.size();
  for (size_t i = 0; i < original; ++i) {
    if (!half[i]) continue;
    // Inputs: copy the names first, since half_value may append nodes.
    std::vector<std::string> inputs = g.nodes[i].inputs;
    for (auto& in : inputs)
      if (!in.empty() && float_values.count(in)) in = half_value(in);
    g.nodes[i].inputs = inputs;
    std::vector<std::string> outputs = g.nodes[i].outputs;
    for (auto& out : outputs) {
      if (out.empty() || !float_values.count(out)) continue;
      std::string h = ed.FreshName(out + "_fp16");
      half_of[out] = h;
      if (!all_consumers_half(out)) {
        ed.AddNode({ed.FreshName(out + "_Cast_fp32"), "Cast", "", {h}, {out}, {Attribute::Int("to", 1)}, ""});
      }
      out = h;
    }
    g.nodes[i].outputs = outputs;
  }
  for (auto& d : report->layers)
    for (size_t i = 0; i < original; ++i)
      if (g.nodes[i].name == d.node && !d.node.empty() && d.precision == Precision::kFP16 && !half[i])
        d.precision = Precision::kFP32, d.reason = "op kept in float32 (fp16 block list)";
  RemoveDeadNodes(g);
  return g.TopoSort();
}

}  // namespace sparq
