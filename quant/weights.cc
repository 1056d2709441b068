// Weight-side transforms: BatchNormalization folding and int8 weight quantization.
#include <algorithm>
#include <cmath>

#include "core/mapped_pages.h"
#include "graph/graph_editor.h"
#include "quant/passes.h"
#include "sparq/quantize.h"
#include "sparq/weighted_layer.h"

namespace sparq {

const char* PrecisionName(Precision p) {
  switch (p) {
    case Precision::kFP32: return "fp32";
    case Precision::kFP16: return "fp16";
    case Precision::kINT8: return "int8";
  }
  return "?";
}

StatusOr<Precision> ParsePrecision(const std::string& name) {
  if (name == "fp32" || name == "float32") return Precision::kFP32;
  if (name == "fp16" || name == "float16") return Precision::kFP16;
  if (name == "int8") return Precision::kINT8;
  return Status::InvalidArgument("unknown precision '" + name + "' (expected int8, fp16 or fp32)");
}

ChannelMaxAbs MaxAbsPerChannel(const Tensor& w, int axis, bool per_channel) {
  ChannelMaxAbs v;
  v.channels = per_channel ? w.dim(static_cast<size_t>(axis)) : 1;
  if (per_channel) {
    for (size_t d = static_cast<size_t>(axis) + 1; d < w.rank(); ++d) v.inner *= w.dim(d);
    for (size_t d = 0; d < static_cast<size_t>(axis); ++d) v.outer *= w.dim(d);
  } else {
    v.inner = w.numel();
  }
  const float* x = w.data<float>();
  v.max_abs.assign(static_cast<size_t>(v.channels), 0.0f);
  for (int64_t o = 0; o < v.outer; ++o)
    for (int64_t c = 0; c < v.channels; ++c)
      for (int64_t i = 0; i < v.inner; ++i)
        v.max_abs[c] = std::max(v.max_abs[c], std::fabs(x[(o * v.channels + c) * v.inner + i]));
  return v;
}

QuantizedWeight QuantizeWeightSymmetric(const Tensor& w, int axis, bool per_channel) {
  Tensor wf = w.ToFloat32();
  const float* x = wf.data<float>();
  QuantizedWeight q;
  q.axis = axis;
  q.values = Tensor(DataType::kInt8, w.shape());
  int8_t* out = q.values.data<int8_t>();
  const ChannelMaxAbs view = MaxAbsPerChannel(wf, axis, per_channel);
  const int64_t outer = view.outer, channels = view.channels, inner = view.inner;
  std::vector<float> scales = view.max_abs;
  for (float& s : scales) s = s > 0.0f ? s / 127.0f : 1.0f;  // an all-zero channel keeps scale 1
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t c = 0; c < channels; ++c)
      for (int64_t i = 0; i < inner; ++i) {
        int64_t k = (o * channels + c) * inner + i;
        float v = std::nearbyint(x[k] / scales[c]);
        out[k] = static_cast<int8_t>(std::clamp(v, -127.0f, 127.0f));
      }
  q.scales = per_channel ? Tensor::FromVector<float>({channels}, scales) : Tensor::Scalar<float>(scales[0]);
  // A weight mapped from a model over 2 GB goes back to the file's pages as
  // soon as its INT8 copy exists: one layer's float weights resident at a time.
  if (w.dtype() == DataType::kFloat32) ReclaimMappedPages(w.raw_data(), w.nbytes());
  return q;
}

int WidenScalesForInt32Bias(const Tensor& w, const Tensor& bias, float input_scale, QuantizedWeight* q) {
  // Half the int32 range: the accumulator adds the products to the bias.
  constexpr double kLimit = 1073741824.0;
  Tensor b = bias.ToFloat32();
  Tensor wf = w.ToFloat32();
  const bool per_channel = q->scales.rank() == 1;
  const int64_t channels = per_channel ? q->scales.numel() : 1;
  float* scales = q->scales.data<float>();
  std::vector<bool> widened(static_cast<size_t>(channels), false);
  int count = 0;
  for (int64_t k = 0; k < b.numel(); ++k) {
    const int64_t c = per_channel ? k : 0;
    const double need = std::fabs(static_cast<double>(b.data<float>()[k])) / (static_cast<double>(input_scale) * kLimit);
    if (need <= scales[c]) continue;
    scales[c] = static_cast<float>(need);
    count += !widened[c];
    widened[c] = true;
  }
  if (count == 0) return 0;
  int64_t inner = 1, outer = 1;
  if (per_channel) {
    for (size_t d = static_cast<size_t>(q->axis) + 1; d < w.rank(); ++d) inner *= w.dim(d);
    for (size_t d = 0; d < static_cast<size_t>(q->axis); ++d) outer *= w.dim(d);
  } else {
    inner = w.numel();
  }
  const float* x = wf.data<float>();
  int8_t* out = q->values.data<int8_t>();
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t c = 0; c < channels; ++c) {
      if (!widened[c]) continue;
      for (int64_t i = 0; i < inner; ++i) {
        const int64_t k = (o * channels + c) * inner + i;
        out[k] = static_cast<int8_t>(std::clamp(std::nearbyint(x[k] / scales[c]), -127.0f, 127.0f));
      }
    }
  return count;
}

namespace {

// The per-channel affine form of an inference BatchNormalization:
// y = x * a[c] + b[c] with a = gamma / sqrt(var + eps), b = beta - mean * a.
bool BatchNormAffine(const Graph& g, const Node& bn, std::vector<float>* a, std::vector<float>* b) {
  if (bn.inputs.size() < 5 || bn.attr_int("training_mode", 0) != 0) return false;
  const Tensor* t[4];
  for (int i = 0; i < 4; ++i) {
    t[i] = g.FindWeight(bn.inputs[1 + i]);
    if (t[i] == nullptr || t[i]->rank() != 1 || t[i]->dtype() != DataType::kFloat32) return false;
  }
  const int64_t c = t[0]->numel();
  for (int i = 1; i < 4; ++i)
    if (t[i]->numel() != c) return false;
  const float eps = bn.attr_float("epsilon", 1e-5f);
  a->resize(c);
  b->resize(c);
  for (int64_t k = 0; k < c; ++k) {
    float scale = t[0]->data<float>()[k] / std::sqrt(t[3]->data<float>()[k] + eps);
    (*a)[k] = scale;
    (*b)[k] = t[1]->data<float>()[k] - t[2]->data<float>()[k] * scale;
  }
  return true;
}

}  // namespace

StatusOr<int> FoldBatchNorm(Model& model) {
  Graph& g = model.graph;
  GraphEditor ed(g);
  int folded = 0;
  std::vector<bool> remove(g.nodes.size(), false);
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    Node& layer = g.nodes[i];
    // A Conv, or a Gemm with alpha = beta = 1, with a constant weight.
    const std::optional<WeightedLayer> view = layer.domain.empty() ? AsWeightedLayer(g, layer) : std::nullopt;
    if (!view || view->op_type == "MatMul") continue;
    if (view->op_type == "Gemm" && (layer.attr_float("alpha", 1.0f) != 1.0f || layer.attr_float("beta", 1.0f) != 1.0f)) {
      continue;
    }
    if (layer.outputs.size() != 1 || ed.IsGraphOutput(layer.outputs[0])) continue;
    auto consumers = ed.Consumers(layer.outputs[0]);
    if (consumers.size() != 1) continue;
    Node& bn = g.nodes[consumers[0]];
    if (bn.op_type != "BatchNormalization" || bn.inputs[0] != layer.outputs[0]) continue;
    if (bn.outputs.size() > 1 && !bn.outputs[1].empty()) continue;  // training outputs in use
    std::vector<float> a, b;
    if (!BatchNormAffine(g, bn, &a, &b)) continue;
    const Tensor* w = g.FindWeight(view->weight);
    if (w->dtype() != DataType::kFloat32 || w->rank() < 2) continue;
    const int axis = view->weight_axis();  // the output channels
    const int64_t channels = w->dim(axis);
    if (static_cast<int64_t>(a.size()) != channels) continue;
    const Tensor* bias = layer.inputs.size() > 2 && !layer.inputs[2].empty() ? g.FindWeight(layer.inputs[2]) : nullptr;
    if (layer.inputs.size() > 2 && !layer.inputs[2].empty() && (bias == nullptr || bias->numel() != channels)) continue;

    Tensor nw = w->Clone();
    float* pw = nw.data<float>();
    int64_t inner = 1, outer = 1;
    for (size_t d = axis + 1; d < nw.rank(); ++d) inner *= nw.dim(d);
    for (int d = 0; d < axis; ++d) outer *= nw.dim(d);
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t c = 0; c < channels; ++c)
        for (int64_t k = 0; k < inner; ++k) pw[(o * channels + c) * inner + k] *= a[c];
    Tensor nb(DataType::kFloat32, {channels});
    for (int64_t c = 0; c < channels; ++c)
      nb.data<float>()[c] = (bias ? bias->ToFloat32().data<float>()[c] : 0.0f) * a[c] + b[c];
    // New initializers: the old ones may be shared with other layers.
    layer.inputs[1] = ed.AddInitializer(layer.inputs[1] + "_bnfolded", std::move(nw));
    std::string bias_name = ed.AddInitializer((layer.name.empty() ? layer.outputs[0] : layer.name) + "_bias_bnfolded", std::move(nb));
    if (layer.inputs.size() > 2) layer.inputs[2] = bias_name;
    else layer.inputs.push_back(bias_name);
    layer.outputs[0] = bn.outputs[0];
    remove[consumers[0]] = true;
    ++folded;
  }
  std::vector<Node> kept;
  for (size_t i = 0; i < g.nodes.size(); ++i)
    if (!remove[i]) kept.push_back(std::move(g.nodes[i]));
  g.nodes = std::move(kept);
  RemoveDeadNodes(g);  // drops the unfolded weights and BN parameters
  g.value_info.clear();  // stale after the rewrite
  SPARQ_RETURN_IF_ERROR(g.TopoSort());
  return folded;
}

}  // namespace sparq
