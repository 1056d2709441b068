// Float16 conversion of chosen nodes.
//
//   x(fp32) ─Cast(fp16)─> A ─> B ─Cast(fp32)─> y(fp32)     A, B in float16;
//                W(fp16) ─┘                               weights converted
//
// A float32 value read by float16 nodes gets one float16 twin (a converted
// initializer or a Cast); a float16 node's output keeps a float32 twin under
// the original name only where a float32 node or a graph output reads it.
//
// Never overflowing: constants beyond ±65504 (attention masks of -3.4e38 or
// -1e9, large biases) are clamped to the float16 range, whether initializers
// or Constant nodes (a Cast would turn them into ±inf, and 0 x inf = NaN);
// a node that reads or writes a value whose calibrated range comes near the
// float16 limit (the masked attention scores, a Pow or Exp that blows up)
// stays float32.
#include <cmath>
#include <map>

#include "graph/graph_editor.h"
#include "quant/passes.h"

namespace sparq {
namespace {

constexpr float kHalfMax = 65504.0f;
// A computed value whose calibrated |x| exceeds this keeps its producer and
// consumers in float32: half the float16 range, headroom for inputs beyond
// the calibration data's.
constexpr float kHalfSafeRange = kHalfMax / 2;

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
                        const std::set<std::string>& float_values, const CalibrationTable& table,
                        const QuantizeOptions& options, QuantizeReport* report) {
  if (!options.fp16.keep_io_types) {
    return Status::NotSupported("quantize.fp16.keep_io_types: false is not supported yet (inputs/outputs stay float32)");
  }
  Graph& g = model.graph;
  GraphEditor ed(g);
  const std::set<std::string> wanted(fp16_nodes.begin(), fp16_nodes.end());
  const std::set<std::string> blocked(options.fp16.block_ops.begin(), options.fp16.block_ops.end());

  // A computed (non-constant) value whose calibrated range float16 cannot hold.
  auto overflows = [&](const std::string& v) {
    if (v.empty() || g.FindWeight(v) != nullptr) return false;  // constants are clamped instead
    const TensorRange* r = table.Find(v);
    return r != nullptr && !(std::fabs(r->min) <= kHalfSafeRange && std::fabs(r->max) <= kHalfSafeRange);
  };

  // Mark: the float16 nodes.
  std::vector<bool> half(g.nodes.size(), false);
  std::vector<std::string> kept_for_range(g.nodes.size());
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& n = g.nodes[i];
    if (!wanted.count(NodeKey(n)) || !n.domain.empty() || blocked.count(n.op_type) || kNeverHalf.count(n.op_type)) continue;
    bool reads_float = false;
    for (const auto& in : n.inputs) reads_float |= !in.empty() && float_values.count(in) > 0;
    for (const auto* list : {&n.inputs, &n.outputs})
      for (const auto& v : *list)
        if (kept_for_range[i].empty() && float_values.count(v) && overflows(v)) kept_for_range[i] = v;
    half[i] = reads_float && kept_for_range[i].empty();
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
    const Tensor* constant = g.FindWeight(v);  // an initializer or a Constant node's value
    if (init != g.initializers.end() && all_consumers_half(v)) {
      init->second = to_half(v, init->second);  // read only by float16 nodes: convert in place
      h = v;
    } else if (constant != nullptr && constant->dtype() == DataType::kFloat32) {
      h = ed.AddInitializer(v + "_fp16", to_half(v, *constant));
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
        d.precision = Precision::kFP32,
        d.reason = kept_for_range[i].empty() ? "op kept in float32 (fp16 block list)"
                                             : "kept in float32: '" + kept_for_range[i] + "' has a range beyond float16's";
  int kept = 0;
  for (size_t i = 0; i < original; ++i) kept += !kept_for_range[i].empty();
  if (kept > 0) {
    report->warnings.push_back("float16: " + std::to_string(kept) + " nodes kept in float32, their values' calibrated " +
                               "range going beyond ±" + std::to_string(static_cast<int>(kHalfSafeRange)));
  }
  RemoveDeadNodes(g);
  return g.TopoSort();
}

}  // namespace sparq
