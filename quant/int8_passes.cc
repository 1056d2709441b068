// The INT8 rewrites: QDQ and QOperator forms.
#include <algorithm>
#include <cmath>
#include <map>
#include <vector>

#include "graph/graph_editor.h"
#include "kernels/ref/quantize_fp8.h"
#include "quant/passes.h"

namespace sparq {
namespace {

Tensor ZeroPoint(const TensorRange& r) {
  if (r.is_signed) return Tensor::Scalar<int8_t>(static_cast<int8_t>(r.zero_point));
  return Tensor::Scalar<uint8_t>(static_cast<uint8_t>(r.zero_point));
}

// Bias as int32 with scale s_x * s_w[c] (so it adds straight to the int32
// accumulator), zero point 0.
struct QuantizedBias {
  Tensor values;  // int32 [C]
  Tensor scales;  // float32 [C]
};
QuantizedBias QuantizeBias(const Tensor& bias, float input_scale, const Tensor& weight_scales) {
  const int64_t c = bias.numel();
  Tensor b = bias.ToFloat32();
  QuantizedBias q{Tensor(DataType::kInt32, {c}), Tensor(DataType::kFloat32, {c})};
  for (int64_t k = 0; k < c; ++k) {
    float ws = weight_scales.numel() == 1 ? weight_scales.data<float>()[0] : weight_scales.data<float>()[k];
    float s = input_scale * ws;
    q.scales.data<float>()[k] = s;
    double v = std::nearbyint(static_cast<double>(b.data<float>()[k]) / s);
    v = std::max(-2147483647.0, std::min(2147483647.0, v));
    q.values.data<int32_t>()[k] = static_cast<int32_t>(v);
  }
  return q;
}

// FP8 (float8e4m3fn) parameters: the activation scale maps the range's
// threshold (max |x| for the max method) onto 448; the zero point is 0.
float Fp8Scale(const TensorRange& r) {
  const float t = r.threshold > 0.0f ? r.threshold : r.abs_max;
  return t > 0.0f ? t / kFloat8E4M3Max : 1.0f;
}

// Symmetric float8e4m3fn weights: w_q = Float8E4M3(w / s_c) with
// s_c = max|w[c]| / 448 along `axis` (one scale when !per_channel).
QuantizedWeight QuantizeWeightFp8(const Tensor& w, int axis, bool per_channel) {
  const Tensor wf = w.ToFloat32();
  const float* x = wf.data<float>();
  QuantizedWeight q;
  q.axis = axis;
  q.values = Tensor(DataType::kFloat8E4M3FN, w.shape());
  auto* out = static_cast<uint8_t*>(q.values.raw_data());
  const ChannelMaxAbs view = MaxAbsPerChannel(wf, axis, per_channel);
  const int64_t outer = view.outer, channels = view.channels, inner = view.inner;
  std::vector<float> scales = view.max_abs;
  for (float& s : scales) s = s > 0.0f ? s / kFloat8E4M3Max : 1.0f;  // an all-zero channel keeps scale 1
  const QuantParamLayout layout{outer, channels, inner, 0};
  QuantizeLinearFp8Ref(x, layout, scales.data(), /*saturate=*/true, out);
  q.scales = per_channel ? Tensor::FromVector<float>({channels}, scales) : Tensor::Scalar<float>(scales[0]);
  return q;
}

class QdqBuilder {
 public:
  QdqBuilder(Graph& g, const CalibrationTable& table, std::set<std::string>& float_values, bool fp8)
      : ed_(g), table_(table), float_values_(float_values), fp8_(fp8) {}
  GraphEditor& editor() { return ed_; }

  bool IsDequantized(const std::string& v) const { return dequantized_.count(v) > 0; }
  // The calibration range of an activation or of the dequantized form of one.
  const TensorRange* RangeOf(const std::string& v) const {
    auto it = source_of_.find(v);
    return table_.Find(it != source_of_.end() ? it->second : v);
  }

  // The dequantized version of activation `value` (one Q/DQ pair per value).
  StatusOr<std::string> Activation(const std::string& value) {
    if (dequantized_.count(value)) return value;
    auto it = dq_of_.find(value);
    if (it != dq_of_.end()) return it->second;
    const TensorRange* r = table_.Find(value);
    if (r == nullptr) return Status::NotFound("no calibration range for '" + value + "'");
    std::string scale = ed_.AddInitializer(value + "_scale", Tensor::Scalar<float>(fp8_ ? Fp8Scale(*r) : r->scale));
    std::string zp = ed_.AddInitializer(value + "_zero_point",
                                        fp8_ ? Tensor(DataType::kFloat8E4M3FN, {}) : ZeroPoint(*r));
    std::string q = ed_.FreshName(value + "_quantized");
    std::string dq = ed_.FreshName(value + "_dequantized");
    ed_.AddNode({ed_.FreshName(value + "_QuantizeLinear"), "QuantizeLinear", "", {value, scale, zp}, {q}, {}, ""});
    ed_.AddNode({ed_.FreshName(value + "_DequantizeLinear"), "DequantizeLinear", "", {q, scale, zp}, {dq}, {}, ""});
    dq_of_[value] = dq;
    source_of_[dq] = value;
    dequantized_.insert(dq);
    float_values_.insert(dq);
    return dq;
  }

  // Quantizes `value` and makes all its consumers (but the new Q node) read
  // the dequantized value.
  Status QuantizeOutput(const std::string& value) {
    if (dq_of_.count(value) || table_.Find(value) == nullptr) return Status::OK();
    SPARQ_ASSIGN_OR_RETURN(std::string dq, Activation(value));
    const Graph& g = ed_.graph();
    std::set<size_t> skip;
    for (size_t i = 0; i < g.nodes.size(); ++i)
      if (g.nodes[i].op_type == "QuantizeLinear" && g.nodes[i].inputs[0] == value) skip.insert(i);
    ed_.RewireConsumers(value, dq, skip);
    return Status::OK();
  }

  // int8 weight + DequantizeLinear; returns the dequantized name.
  std::string Weight(const std::string& name, const QuantizedWeight& q, bool per_axis) {
    std::string wq = ed_.AddInitializer(name + "_quantized", q.values);
    std::string scale = ed_.AddInitializer(name + "_scale", q.scales);
    Tensor zeros(q.values.dtype(), q.scales.shape());
    std::string zp = ed_.AddInitializer(name + "_zero_point", zeros);
    std::string dq = ed_.FreshName(name + "_dequantized");
    Node n{ed_.FreshName(name + "_DequantizeLinear"), "DequantizeLinear", "", {wq, scale, zp}, {dq}, {}, ""};
    if (per_axis) n.attributes.push_back(Attribute::Int("axis", q.axis));
    ed_.AddNode(std::move(n));
    dequantized_.insert(dq);
    float_values_.insert(dq);
    return dq;
  }

  std::string Bias(const std::string& name, const QuantizedBias& q, bool per_axis) {
    std::string bq = ed_.AddInitializer(name + "_quantized", q.values);
    Tensor scales = per_axis ? q.scales : Tensor::Scalar<float>(q.scales.data<float>()[0]);
    std::string scale = ed_.AddInitializer(name + "_scale", scales);
    std::string dq = ed_.FreshName(name + "_dequantized");
    Node n{ed_.FreshName(name + "_DequantizeLinear"), "DequantizeLinear", "", {bq, scale}, {dq}, {}, ""};
    if (per_axis) n.attributes.push_back(Attribute::Int("axis", 0));
    ed_.AddNode(std::move(n));
    float_values_.insert(dq);
    return dq;
  }

 private:
  GraphEditor ed_;
  const CalibrationTable& table_;
  std::set<std::string>& float_values_;
  const bool fp8_;
  std::map<std::string, std::string> dq_of_;      // activation -> dequantized name
  std::map<std::string, std::string> source_of_;  // dequantized name -> activation
  std::set<std::string> dequantized_;
};

// Replaces nearest rounding's codes by `rounded` (QuantizeOptions::rounded_weights)
// when it is the same weight at the same scales.
Status UseRoundedWeight(const Node& n, const QuantizedWeight& rounded, QuantizedWeight* qw) {
  const Tensor& a = rounded.scales;
  const Tensor& b = qw->scales;
  bool same = rounded.values.dtype() == DataType::kInt8 && rounded.values.shape() == qw->values.shape() &&
              a.dtype() == DataType::kFloat32 && a.shape() == b.shape() && rounded.axis == qw->axis;
  for (int64_t i = 0; same && i < a.numel(); ++i) same = a.data<float>()[i] == b.data<float>()[i];
  if (!same) {
    return Status::InvalidArgument("quantize rounded_weights: the weights given for " + n.Describe() +
                                   " do not match its weight and scales (measured on another model, or with other "
                                   "per_channel / fold_batchnorm options?)");
  }
  qw->values = rounded.values.Clone();  // WidenScalesForInt32Bias may rewrite some channels
  return Status::OK();
}

}  // namespace

bool IsFlowOp(const Node& n) {
  static const std::set<std::string> kFlowOps = {"Add",         "Concat",           "MaxPool", "AveragePool",
                                                 "GlobalAveragePool", "Relu", "Clip"};
  return n.domain.empty() && kFlowOps.count(n.op_type) > 0;
}

Status InsertQdq(Model& model, const CalibrationTable& table, const std::vector<Precision>& precision,
                 const QuantizeOptions& options, std::set<std::string>& float_values, QuantizeReport* report) {
  Graph& g = model.graph;
  // Per-axis DequantizeLinear arrived in opset 13; older models get per-tensor
  // weights rather than a silent opset upgrade.
  const bool per_axis = PerAxisWeights(model, options);
  if (options.per_channel && !per_axis) {
    report->warnings.push_back("opset " + std::to_string(model.opset()) +
                               " has no per-axis DequantizeLinear (opset 13): weights quantized per tensor");
  }
  QdqBuilder qdq(g, table, float_values, options.fp8);
  const size_t original = g.nodes.size();  // new Q/DQ nodes are appended after these
  for (size_t i = 0; i < original; ++i) {
    const Node n = g.nodes[i];  // a copy: AddNode may reallocate
    if (precision[i] == Precision::kINT8) {
      auto layer = QuantizableLayer(g, n);
      const Tensor w = *g.FindWeight(n.inputs[1]);
      SPARQ_ASSIGN_OR_RETURN(std::string x_dq, qdq.Activation(n.inputs[0]));
      QuantizedWeight qw = options.fp8 ? QuantizeWeightFp8(w, layer->weight_axis(), per_axis)
                                       : QuantizeWeightSymmetric(w, layer->weight_axis(), per_axis);
      if (auto r = options.rounded_weights.find(NodeKey(n)); r != options.rounded_weights.end() && !options.fp8) {
        SPARQ_RETURN_IF_ERROR(UseRoundedWeight(n, r->second, &qw));
      }
      // FP8 keeps the bias in float32 (FP8 GEMMs accumulate in float).
      const bool int32_bias = !options.fp8 && HasQuantizableBias(g, n, *layer);
      if (int32_bias) WidenScalesForInt32Bias(w, *g.FindWeight(n.inputs[2]), qdq.RangeOf(n.inputs[0])->scale, &qw);
      std::string w_dq = qdq.Weight(n.inputs[1], qw, per_axis);
      std::string b_dq;
      if (int32_bias) {
        const float s_x = qdq.RangeOf(n.inputs[0])->scale;
        b_dq = qdq.Bias(n.inputs[2], QuantizeBias(*g.FindWeight(n.inputs[2]), s_x, qw.scales), per_axis);
      }
      Node& node = g.nodes[i];
      node.inputs[0] = x_dq;
      node.inputs[1] = w_dq;
      if (!b_dq.empty()) node.inputs[2] = b_dq;
      // Quantized once, after a fusable activation (Conv -> Relu -> Q -> DQ).
      if (!options.quantize_outputs) continue;
      const auto act = FusedActivation(g, i);
      const std::string y = act && table.Find(g.nodes[*act].outputs[0]) ? g.nodes[*act].outputs[0] : n.outputs[0];
      SPARQ_RETURN_IF_ERROR(qdq.QuantizeOutput(y));
      continue;
    }
    if (precision[i] == Precision::kFP32 && options.precision == Precision::kINT8 && IsFlowOp(n)) {
      bool all_quantized = true, any_float = false;
      for (const auto& in : n.inputs) {
        if (in.empty() || !float_values.count(in) || g.FindWeight(in) != nullptr) continue;
        any_float = true;
        all_quantized &= qdq.IsDequantized(in);
      }
      if (any_float && all_quantized) SPARQ_RETURN_IF_ERROR(qdq.QuantizeOutput(n.outputs[0]));
    }
  }
  RemoveDeadNodes(g);
  return g.TopoSort();
}

Status RewriteQOperator(Model& model, const CalibrationTable& table, const std::vector<Precision>& precision,
                        const QuantizeOptions& options, std::set<std::string>& float_values, QuantizeReport* report) {
  Graph& g = model.graph;
  GraphEditor ed(g);
  struct Quantized {
    std::string value, scale, zero_point;
  };
  std::map<std::string, Quantized> q_of;  // float value -> its quantized form
  auto quantized = [&](const std::string& value, const TensorRange& r) {
    auto it = q_of.find(value);
    if (it != q_of.end()) return it->second;
    Quantized q{ed.FreshName(value + "_quantized"), ed.AddInitializer(value + "_scale", Tensor::Scalar<float>(r.scale)),
                ed.AddInitializer(value + "_zero_point", ZeroPoint(r))};
    ed.AddNode({ed.FreshName(value + "_QuantizeLinear"), "QuantizeLinear", "", {value, q.scale, q.zero_point}, {q.value}, {}, ""});
    q_of[value] = q;
    return q;
  };
  std::vector<bool> remove(g.nodes.size(), false);
  const size_t original = g.nodes.size();
  for (size_t i = 0; i < original; ++i) {
    if (precision[i] != Precision::kINT8) continue;
    const Node n = g.nodes[i];
    const TensorRange* rx = table.Find(n.inputs[0]);
    // After a fusable activation, the output takes its range: the clamp
    // that follows in float then changes no quantized value.
    const auto act = FusedActivation(g, i);
    const TensorRange* ry = act && table.Find(g.nodes[*act].outputs[0]) ? table.Find(g.nodes[*act].outputs[0])
                                                                          : table.Find(n.outputs[0]);
    if (ry == nullptr) {
      for (auto& d : report->layers)
        if (d.node == n.name) d.precision = Precision::kFP32, d.reason = "no calibration range for output '" + n.outputs[0] + "'";
      continue;
    }
    auto layer = QuantizableLayer(g, n);
    Tensor w = *g.FindWeight(n.inputs[1]);
    int axis = layer->weight_axis();
    if (n.op_type == "Gemm" && axis == 0) {  // QLinearMatMul wants B as [K, N]
      Tensor t(DataType::kFloat32, {w.dim(1), w.dim(0)});
      for (int64_t r = 0; r < w.dim(0); ++r)
        for (int64_t c = 0; c < w.dim(1); ++c) t.data<float>()[c * w.dim(0) + r] = w.data<float>()[r * w.dim(1) + c];
      w = t;
      axis = 1;
    }
    QuantizedWeight qw = QuantizeWeightSymmetric(w, axis, options.per_channel);
    if (n.op_type == "Conv" && HasQuantizableBias(g, n, *layer)) {
      WidenScalesForInt32Bias(w, *g.FindWeight(n.inputs[2]), rx->scale, &qw);
    }
    Quantized x = quantized(n.inputs[0], *rx);
    std::string wq = ed.AddInitializer(n.inputs[1] + "_quantized", qw.values);
    std::string ws = ed.AddInitializer(n.inputs[1] + "_scale", qw.scales);
    std::string wz = ed.AddInitializer(n.inputs[1] + "_zero_point", Tensor(DataType::kInt8, qw.scales.shape()));
    std::string ys = ed.AddInitializer(n.outputs[0] + "_scale", Tensor::Scalar<float>(ry->scale));
    std::string yz = ed.AddInitializer(n.outputs[0] + "_zero_point", ZeroPoint(*ry));
    std::string yq = ed.FreshName(n.outputs[0] + "_quantized");
    Node qn;
    qn.name = ed.FreshName((n.name.empty() ? n.outputs[0] : n.name) + "_quant");
    qn.inputs = {x.value, x.scale, x.zero_point, wq, ws, wz, ys, yz};
    qn.outputs = {yq};
    std::string y_float = n.outputs[0];
    if (n.op_type == "Conv") {
      qn.op_type = "QLinearConv";
      for (const auto& a : n.attributes) qn.attributes.push_back(a);
      if (HasQuantizableBias(g, n, *layer)) {
        QuantizedBias qb = QuantizeBias(*g.FindWeight(n.inputs[2]), rx->scale, qw.scales);
        qn.inputs.push_back(ed.AddInitializer(n.inputs[2] + "_quantized", qb.values));
      }
    } else {
      qn.op_type = "QLinearMatMul";
    }
    const bool gemm_bias = n.op_type == "Gemm" && n.inputs.size() > 2 && !n.inputs[2].empty();
    ed.AddNode(qn);
    if (gemm_bias) {
      // QLinearMatMul has no bias: add it in float after dequantizing. The
      // product is quantized with y's range (the bias shifts it little).
      std::string mm = ed.FreshName(n.outputs[0] + "_matmul");
      ed.AddNode({ed.FreshName(mm + "_DequantizeLinear"), "DequantizeLinear", "", {yq, ys, yz}, {mm}, {}, ""});
      std::string c = n.inputs[2];
      float beta = n.attr_float("beta", 1.0f);
      if (beta != 1.0f) {
        Tensor cb = g.FindWeight(c) ? g.FindWeight(c)->ToFloat32().Clone() : Tensor();
        if (!cb.defined()) return Status::NotSupported(n.Describe() + ": QOperator Gemm with beta != 1 needs a constant C");
        for (int64_t k = 0; k < cb.numel(); ++k) cb.data<float>()[k] *= beta;
        c = ed.AddInitializer(c + "_beta", cb);
      }
      ed.AddNode({ed.FreshName(n.outputs[0] + "_bias_add"), "Add", "", {mm, c}, {y_float}, {}, ""});
      float_values.insert(mm);
    } else {
      ed.AddNode({ed.FreshName(y_float + "_DequantizeLinear"), "DequantizeLinear", "", {yq, ys, yz}, {y_float}, {}, ""});
      q_of[y_float] = {yq, ys, yz};  // the next QLinear layer reads yq directly
    }
    remove[i] = true;
  }
  std::vector<Node> kept;
  for (size_t i = 0; i < g.nodes.size(); ++i)
    if (i >= original || !remove[i]) kept.push_back(std::move(g.nodes[i]));
  g.nodes = std::move(kept);
  // Layers are visited in topological order, so a QLinear layer always finds
  // its producer's quantized output; drop the DQ/Q nodes nobody reads.
  RemoveDeadNodes(g);
  return g.TopoSort();
}

}  // namespace sparq
