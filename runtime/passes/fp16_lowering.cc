#include "runtime/passes/fp16_lowering.h"

#include <map>
#include <string>
#include <utility>

#include "graph/graph_editor.h"
#include "kernels/cpu/dispatch.h"

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

}  // namespace

bool LowerFloat16ToFloat32(Model* model) {
  if (!NeedsLowering(*model)) return false;
  Graph& g = model->graph;
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
  return true;
}

}  // namespace sparq
