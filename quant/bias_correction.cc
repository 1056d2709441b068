// Bias correction: measure what int8 weights do to each layer's output mean,
// and fold the opposite into the layer's bias (sparq/bias_correction.h).
#include "sparq/bias_correction.h"

#include <algorithm>
#include <cmath>

#include "graph/graph_editor.h"
#include "quant/passes.h"
#include "sparq/dataset.h"
#include "sparq/executor.h"

namespace sparq {
namespace {

// A layer whose bias can absorb a correction: a quantizable Conv (a missing
// bias is added), or a Gemm whose bias QuantizeModel quantizes per channel.
std::optional<WeightedLayer> CorrectableLayer(const Graph& g, const Node& n) {
  std::optional<WeightedLayer> layer = QuantizableLayer(g, n);
  if (!layer || n.op_type == "MatMul") return std::nullopt;
  const bool has_bias = n.inputs.size() > 2 && !n.inputs[2].empty();
  if (n.op_type == "Gemm" && !HasQuantizableBias(g, n, *layer)) return std::nullopt;
  if (n.op_type == "Conv" && has_bias && !HasQuantizableBias(g, n, *layer)) return std::nullopt;
  return layer;
}

// W_q - W for the int8 weights QuantizeModel writes; all zeros when exact.
// `rounded`: QuantizeOptions::rounded_weights' entry for the layer, or null.
Tensor WeightError(const Tensor& w, int axis, bool per_channel, const QuantizedWeight* rounded, bool* any) {
  QuantizedWeight q = QuantizeWeightSymmetric(w, axis, per_channel);
  if (rounded && rounded->values.shape() == q.values.shape() && rounded->scales.shape() == q.scales.shape())
    q.values = rounded->values;
  Tensor wf = w.ToFloat32();
  Tensor err(DataType::kFloat32, w.shape());
  const int64_t channels = per_channel ? w.dim(static_cast<size_t>(axis)) : 1;
  int64_t inner = 1;
  if (per_channel) {
    for (size_t d = static_cast<size_t>(axis) + 1; d < w.rank(); ++d) inner *= w.dim(d);
  } else {
    inner = w.numel();
  }
  const float* x = wf.data<float>();
  const int8_t* v = q.values.data<int8_t>();
  const float* s = q.scales.data<float>();
  float* e = err.data<float>();
  *any = false;
  for (int64_t k = 0; k < w.numel(); ++k) {
    const int64_t c = (k / inner) % channels;
    e[k] = static_cast<float>(v[k]) * s[c] - x[k];
    *any |= e[k] != 0.0f;
  }
  return err;
}

}  // namespace

bool PerAxisWeights(const Model& model, const QuantizeOptions& options) {
  return options.per_channel && (options.format == QuantFormat::kQOperator || model.opset() >= 13);
}

StatusOr<std::map<std::string, std::vector<float>>> MeasureBiasCorrection(const Model& input, const BatchFn& batches,
                                                                           const QuantizeOptions& options,
                                                                           const BiasCorrectionOptions& correction) {
  if (correction.max_samples < 0) {
    return Status::InvalidArgument("bias correction: max_samples must be >= 0, got " +
                                   std::to_string(correction.max_samples));
  }
  Model probe = input;  // shares the weights; folding replaces them
  if (options.fold_batchnorm) SPARQ_RETURN_IF_ERROR(FoldBatchNorm(probe).status());
  const bool per_axis = PerAxisWeights(probe, options);
  Graph& g = probe.graph;
  GraphEditor ed(g);
  std::map<std::string, std::string> mean_of;  // NodeKey -> probe output
  const size_t original = g.nodes.size();
  for (size_t i = 0; i < original; ++i) {
    const Node n = g.nodes[i];  // a copy: AddNode may reallocate
    const std::optional<WeightedLayer> layer = CorrectableLayer(g, n);
    if (!layer) continue;
    bool any = false;
    auto rounded = options.rounded_weights.find(NodeKey(n));
    Tensor err = WeightError(*g.FindWeight(n.inputs[1]), layer->weight_axis(), per_axis,
                             rounded == options.rounded_weights.end() ? nullptr : &rounded->second, &any);
    if (!any) continue;
    //   x ── Conv/Gemm(x, W_q - W), no bias ── ReduceMean(all axes but the channel's) ──> [C]
    const std::string key = NodeKey(n);
    Node e{ed.FreshName(key + "_weight_error"), n.op_type, "", {n.inputs[0], ed.AddInitializer(n.inputs[1] + "_error", err)},
           {ed.FreshName(key + "_weight_error")}, {}, ""};
    for (const Attribute& a : n.attributes)
      if (a.name != "beta") e.attributes.push_back(a);
    std::vector<int64_t> axes = {0};
    if (n.op_type == "Conv")
      for (int64_t d = 2; d < static_cast<int64_t>(layer->weight_shape.size()); ++d) axes.push_back(d);
    Node mean{ed.FreshName(key + "_weight_error_mean"), "ReduceMean", "", {e.outputs[0]},
              {ed.FreshName(key + "_weight_error_mean")}, {Attribute::Int("keepdims", 0)}, ""};
    if (probe.opset() >= 18) {
      mean.inputs.push_back(ed.AddInitializer(key + "_weight_error_axes", Tensor::FromVector<int64_t>({static_cast<int64_t>(axes.size())}, axes)));
    } else {
      mean.attributes.push_back(Attribute::Ints("axes", axes));
    }
    mean_of[key] = mean.outputs[0];
    ValueInfo out;
    out.name = mean.outputs[0];
    out.dtype = DataType::kFloat32;
    g.outputs.push_back(out);
    ed.AddNode(std::move(e));
    ed.AddNode(std::move(mean));
  }
  std::map<std::string, std::vector<float>> result;
  if (mean_of.empty()) return result;
  SPARQ_RETURN_IF_ERROR(g.TopoSort());
  SPARQ_ASSIGN_OR_RETURN(auto exec, Executor::Create(probe, ExecutorOptions{correction.threads}));
  // Each batch's mean weighs by its sample count.
  std::map<std::string, std::vector<double>> sums;
  int64_t samples = 0, batch_index = 0;
  BatchSource samples_of;  // counts samples along each input's sample axis
  samples_of.set_sample_axes(SampleAxes(input.graph));
  for (;;) {
    if (correction.max_samples > 0 && samples >= correction.max_samples) break;
    TensorMap batch;
    SPARQ_ASSIGN_OR_RETURN(bool more, batches(&batch));
    if (!more) break;
    const int64_t n = std::max<int64_t>(1, samples_of.SamplesIn(batch));
    TensorMap outputs;
    SPARQ_RETURN_IF_ERROR(exec->Run(batch, &outputs).WithContext("bias correction batch " + std::to_string(batch_index)));
    for (const auto& [key, name] : mean_of) {
      const Tensor m = outputs[name].ToFloat32();
      std::vector<double>& s = sums[key];
      s.resize(static_cast<size_t>(m.numel()), 0.0);
      for (int64_t c = 0; c < m.numel(); ++c) s[c] += static_cast<double>(m.data<float>()[c]) * static_cast<double>(n);
    }
    samples += n;
    ++batch_index;
  }
  if (samples == 0) return Status::InvalidArgument("bias correction got no data batches");
  for (const auto& [key, s] : sums) {
    std::vector<float>& v = result[key];
    for (double x : s) v.push_back(static_cast<float>(x / static_cast<double>(samples)));
  }
  return result;
}

StatusOr<int> ApplyBiasCorrection(Graph& g, const std::vector<Precision>& precision,
                                  const std::map<std::string, std::vector<float>>& correction) {
  std::map<std::string, size_t> index;
  for (size_t i = 0; i < g.nodes.size(); ++i) index[NodeKey(g.nodes[i])] = i;
  GraphEditor ed(g);
  int corrected = 0;
  for (const auto& [key, shift] : correction) {
    auto it = index.find(key);
    if (it == index.end()) {
      return Status::InvalidArgument("quantize bias_correction: the model has no layer '" + key +
                                     "' (measured on another model?)");
    }
    const size_t i = it->second;
    if (precision[i] != Precision::kINT8) continue;
    const std::optional<WeightedLayer> layer = CorrectableLayer(g, g.nodes[i]);
    if (!layer) {
      return Status::InvalidArgument("quantize bias_correction: " + g.nodes[i].Describe() +
                                     " has no bias that a correction can fold into");
    }
    const int64_t channels = layer->weight_shape[layer->weight_axis()];
    if (static_cast<int64_t>(shift.size()) != channels) {
      return Status::InvalidArgument("quantize bias_correction: " + g.nodes[i].Describe() + " has " +
                                     std::to_string(channels) + " output channels, the correction " +
                                     std::to_string(shift.size()) + " values");
    }
    Node& n = g.nodes[i];
    const bool has_bias = n.inputs.size() > 2 && !n.inputs[2].empty();
    Tensor bias = has_bias ? g.FindWeight(n.inputs[2])->ToFloat32().Clone() : Tensor(DataType::kFloat32, {channels});
    for (int64_t c = 0; c < channels; ++c) bias.data<float>()[c] -= shift[c];
    // A new initializer: the old bias may be shared with another layer.
    const std::string name = ed.AddInitializer((has_bias ? n.inputs[2] : key + "_bias") + "_corrected", std::move(bias));
    if (has_bias) n.inputs[2] = name;
    else n.inputs.resize(3), n.inputs[2] = name;
    ++corrected;
  }
  return corrected;  // the INT8 rewrite drops the old biases nobody reads any more
}

}  // namespace sparq
