#include "runtime/passes/fp16_lowering.h"

#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "graph/graph_editor.h"
#include "kernels/cpu/dispatch.h"
#include "kernels/registry.h"

namespace sparq {
namespace {

constexpr int64_t kOnnxFloat = static_cast<int64_t>(DataType::kFloat32);
constexpr int64_t kOnnxFloat16 = static_cast<int64_t>(DataType::kFloat16);

Tensor ToFloat32(const Tensor& half) {
  Tensor out = Tensor::Uninitialized(DataType::kFloat32, half.shape());
  const ConvertF16F32Fn convert = SelectCpuKernel(CpuOp::kConvertF16F32).get<ConvertF16F32Fn>();
  convert(reinterpret_cast<const uint16_t*>(half.data<Float16>()), out.data<float>(), half.numel());
  return out;
}

bool IsHalf(const Tensor& t) { return t.defined() && t.dtype() == DataType::kFloat16; }

// Whether the lowering can rewrite `model` and whether it has anything to do.
bool NeedsLowering(const Model& model) {
  const Graph& g = model.graph;
  bool any = false;
  for (const ValueInfo& v : g.initializer_inputs)
    if (v.dtype == DataType::kFloat16) return false;  // a run input may replace it with float16 values
  for (const auto& kv : g.initializers) any = any || IsHalf(kv.second);
  for (const ValueInfo& v : g.inputs) any = any || v.dtype == DataType::kFloat16;
  for (const ValueInfo& v : g.outputs) any = any || v.dtype == DataType::kFloat16;
  for (const Node& n : g.nodes) {
    for (const Attribute& a : n.attributes) {
      if (a.kind == Attribute::Kind::kOpaque) return false;  // subgraphs: not rewritten
      if (a.kind == Attribute::Kind::kTensor) any = any || IsHalf(a.t);
      if (a.kind == Attribute::Kind::kInt && a.i == kOnnxFloat16 && (a.name == "to" || a.name == "dtype")) {
        if (!(n.op_type == "Cast" && n.domain.empty() && a.name == "to")) return false;  // RandomNormal(dtype=10), ...
        any = true;
      }
    }
  }
  return any;
}

// The values of `g` (topologically sorted) that hold float16: graph inputs
// and initializers of that type, Constants of float16 tensors, Casts to
// float16, and the outputs of every other node whose data input (input 0;
// Where's input 1; DequantizeLinear's scale; CastLike's target) is float16.
// Outputs that are not float in fact (indices, shapes) may be listed: the
// rounding passes every type but float32 through unchanged.
std::set<std::string> FindFloat16Values(const Graph& g) {
  std::set<std::string> half;
  for (const ValueInfo& v : g.inputs)
    if (v.dtype == DataType::kFloat16) half.insert(v.name);
  for (const auto& kv : g.initializers)
    if (IsHalf(kv.second)) half.insert(kv.first);
  static const std::set<std::string> kNotFloat = {
      "Shape", "Size", "ArgMax", "ArgMin", "NonZero", "Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual",
      "Not", "And", "Or", "Xor", "IsNaN", "IsInf", "QuantizeLinear", "DynamicQuantizeLinear"};
  for (const Node& n : g.nodes) {
    bool out_half = false;
    auto in_half = [&](size_t i) { return i < n.inputs.size() && half.count(n.inputs[i]) > 0; };
    if (!n.domain.empty() && n.domain != "ai.onnx") {
      out_half = in_half(0);
    } else if (n.op_type == "Cast") {
      out_half = n.attr_int("to", 0) == kOnnxFloat16;
    } else if (n.op_type == "CastLike") {
      out_half = in_half(1);
    } else if (n.op_type == "DequantizeLinear") {
      out_half = in_half(1);
    } else if (n.op_type == "Where") {
      out_half = in_half(1);
    } else if (n.op_type == "Constant") {
      const Attribute* value = n.attr("value");
      out_half = value != nullptr && value->kind == Attribute::Kind::kTensor && IsHalf(value->t);
    } else if (n.op_type == "ConstantOfShape") {
      const Attribute* value = n.attr("value");
      out_half = value != nullptr && value->kind == Attribute::Kind::kTensor && IsHalf(value->t);
    } else if (!kNotFloat.count(n.op_type)) {
      out_half = in_half(0);
    }
    if (!out_half) continue;
    // Secondary outputs of these are indices or statistics in float32.
    const bool first_only = n.op_type == "MaxPool" || n.op_type == "TopK" || n.op_type == "LayerNormalization" ||
                            n.op_type == "BatchNormalization" || n.op_type == "Dropout";
    for (size_t k = 0; k < n.outputs.size(); ++k)
      if (!n.outputs[k].empty() && (k == 0 || !first_only)) half.insert(n.outputs[k]);
  }
  return half;
}

// Whether every float output of `n` is a float16 number when its float data
// inputs (by index, below) are all in `exact`: ops that move, select or
// sign-flip values, or compare them and keep one (Max, ReduceMax, MaxPool,
// Relu; nearest Resize), never make a value that was not one of their
// inputs' (or zero, or a sign flip of one). Rounding such an output to
// float16 is the identity, so RoundFloat16Values leaves it out: the same
// bits, a pass over the tensor fewer.
bool KeepsFloat16Values(const Node& n, const std::set<std::string>& exact) {
  if (!n.domain.empty() && n.domain != "ai.onnx") return false;
  static const std::set<std::string> kFirstInput = {
      "Reshape", "Transpose", "Squeeze", "Unsqueeze", "Flatten", "Identity", "Slice", "Split",
      "Gather", "GatherElements", "GatherND", "Expand", "Tile", "DepthToSpace", "SpaceToDepth",
      "MaxPool", "GlobalMaxPool", "ReduceMax", "ReduceMin", "Relu", "Neg", "Abs"};
  static const std::set<std::string> kEveryInput = {"Concat", "Max", "Min"};
  std::vector<size_t> data;
  if (kFirstInput.count(n.op_type)) {
    data = {0};
  } else if (kEveryInput.count(n.op_type)) {
    for (size_t i = 0; i < n.inputs.size(); ++i) data.push_back(i);
  } else if (n.op_type == "Where") {
    data = {1, 2};
  } else if (n.op_type == "Resize" || n.op_type == "Upsample") {
    if (n.attr_string("mode", "nearest") != "nearest") return false;  // linear / cubic make new values
    data = {0};
  } else if (n.op_type == "Pad") {
    const std::string mode = n.attr_string("mode", "constant");
    if (mode != "constant" && mode != "reflect" && mode != "edge") return false;
    if (n.attr_float("value", 0.0f) != 0.0f) return false;  // opset < 11's constant: a float32
    data = {0};
    if (n.inputs.size() > 2 && !n.inputs[2].empty()) data.push_back(2);  // the constant
  } else {
    return false;
  }
  for (size_t i : data)
    if (i >= n.inputs.size() || n.inputs[i].empty() || !exact.count(n.inputs[i])) return false;
  return true;
}

}  // namespace

bool LowerFloat16ToFloat32(Model* model, std::set<std::string>* float16_values) {
  if (!NeedsLowering(*model)) return false;
  Graph& g = model->graph;
  std::set<std::string> half = FindFloat16Values(g);
  for (auto& kv : g.initializers)
    if (IsHalf(kv.second)) kv.second = ToFloat32(kv.second);
  for (Node& n : g.nodes) {
    for (Attribute& a : n.attributes) {
      if (a.kind == Attribute::Kind::kTensor && IsHalf(a.t)) a.t = ToFloat32(a.t);
      if (n.op_type == "Cast" && a.name == "to" && a.kind == Attribute::Kind::kInt && a.i == kOnnxFloat16) a.i = kOnnxFloat;
    }
  }
  for (ValueInfo& v : g.value_info)
    if (v.dtype == DataType::kFloat16) v.dtype = DataType::kFloat32;

  GraphEditor editor(g);  // fresh names only
  // Graph inputs: nodes read a float32 copy.
  std::map<std::string, std::string> renamed;  // old value -> float32 value
  std::vector<Node> entry;
  for (const ValueInfo& v : g.inputs) {
    if (v.dtype != DataType::kFloat16) continue;
    const std::string f32 = editor.FreshName(v.name + "__sparq_f32");
    renamed[v.name] = f32;
    Node cast;
    cast.name = f32 + "/Cast";
    cast.op_type = "Cast";
    cast.inputs = {v.name};
    cast.outputs = {f32};
    cast.attributes.push_back(Attribute::Int("to", kOnnxFloat));
    entry.push_back(std::move(cast));
  }
  // Graph outputs: the producer writes a float32 value, a final Cast the output.
  std::vector<Node> exit;
  for (const ValueInfo& v : g.outputs) {
    if (v.dtype != DataType::kFloat16) continue;
    std::string source = v.name;
    if (auto it = renamed.find(v.name); it != renamed.end()) {
      source = it->second;  // an input passed through as an output
    } else {
      const std::string f32 = editor.FreshName(v.name + "__sparq_f32");
      for (Node& n : g.nodes)
        for (std::string& out : n.outputs)
          if (out == v.name) out = f32;
      renamed[v.name] = f32;
      source = f32;
    }
    Node cast;
    cast.name = v.name + "/Cast";
    cast.op_type = "Cast";
    cast.inputs = {source};
    cast.outputs = {v.name};
    cast.attributes.push_back(Attribute::Int("to", kOnnxFloat16));
    exit.push_back(std::move(cast));
  }
  for (Node& n : g.nodes)
    for (std::string& in : n.inputs)
      if (auto it = renamed.find(in); it != renamed.end()) in = it->second;
  if (!entry.empty()) g.nodes.insert(g.nodes.begin(), std::make_move_iterator(entry.begin()),
                                     std::make_move_iterator(entry.end()));
  for (Node& n : exit) g.nodes.push_back(std::move(n));
  if (float16_values != nullptr) {
    float16_values->clear();
    std::set<std::string> inputs;  // exact in float32: nothing to round
    for (const ValueInfo& v : g.inputs) inputs.insert(v.name);
    for (const auto& kv : g.initializers) inputs.insert(kv.first);
    for (const std::string& v : half) {
      if (inputs.count(v)) continue;
      auto it = renamed.find(v);
      float16_values->insert(it != renamed.end() ? it->second : v);
    }
  }
  return true;
}

size_t RoundFloat16Values(Model* model, const std::set<std::string>& values) {
  Graph& g = model->graph;
  std::set<std::string> outputs;
  for (const ValueInfo& v : g.outputs) outputs.insert(v.name);
  GraphEditor editor(g);
  std::vector<Node> nodes;
  nodes.reserve(g.nodes.size());
  size_t added = 0;
  std::set<std::string> exact;  // values that hold float16 numbers when they are read
  for (Node& n : g.nodes) {
    std::vector<Node> rounds;
    const bool keeps_float16 = KeepsFloat16Values(n, exact);
    for (std::string& out : n.outputs) {
      if (out.empty() || !values.count(out) || outputs.count(out)) continue;
      exact.insert(out);
      if (keeps_float16) continue;  // rounding it would change no bit
      Node round;
      round.op_type = "RoundToFloat16";
      round.domain = kSparqDomain;
      const std::string unrounded = editor.FreshName(out + "__sparq_unrounded");
      round.name = out + "/RoundToFloat16";
      round.inputs = {unrounded};
      round.outputs = {out};
      out = unrounded;
      rounds.push_back(std::move(round));
    }
    nodes.push_back(std::move(n));
    for (Node& r : rounds) {
      nodes.push_back(std::move(r));
      ++added;
    }
  }
  g.nodes = std::move(nodes);
  if (added > 0 && model->opset(kSparqDomain) == 0) model->opset_imports.push_back({kSparqDomain, 1});
  return added;
}

}  // namespace sparq
