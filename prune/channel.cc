// Channel removal: the graph rewrite that removes the output channels whose
// weight rows are zero in every producer of their class (classes and ties:
// channel_graph.h), so the model really shrinks.
//
// For each removed class: slice the producers' rows and biases, the
// per-channel parameters on the way (BatchNorm, PRelu, per-channel
// constants, depthwise Conv) and the consumers' input channels. A removed
// channel still carried a constant (its bias through BatchNorm and
// activations); it is folded into the consumers' biases.
#include <algorithm>
#include <cmath>
#include <limits>
#include <set>

#include "prune/channel_graph.h"
#include "sparq/onnx_io.h"

namespace sparq {

using namespace prune_internal;  // NOLINT

namespace {

const double kNaN = std::numeric_limits<double>::quiet_NaN();

// --- rewrite helpers -----------------------------------------------------------

// The tensor of node input k, owned by that node alone (copied under a fresh
// name when other nodes read it too).
StatusOr<Tensor*> OwnedInput(Graph& g, size_t node, size_t k) {
  const std::string name = g.nodes[node].inputs[k];
  Tensor* t = MutableWeight(g, name);
  if (t == nullptr) return Status::NotSupported(g.nodes[node].Describe() + ": input '" + name + "' is not a constant");
  if (t->dtype() != DataType::kFloat32) return Status::NotSupported("constant '" + name + "' is not float32");
  if (CountReaders(g, name) > 1) {
    const std::string fresh = GraphEditor(g).FreshName(name + "_pruned");
    g.initializers[fresh] = t->Clone();
    g.nodes[node].inputs[k] = fresh;
    return &g.initializers[fresh];
  }
  return t;
}

// Keeps the entries `keep` of `axis`.
Tensor SliceAxis(const Tensor& t, size_t axis, const std::vector<int64_t>& keep) {
  Shape shape = t.shape();
  const int64_t outer = NumElements(Shape(shape.begin(), shape.begin() + axis));
  const int64_t inner = NumElements(Shape(shape.begin() + axis + 1, shape.end()));
  const int64_t n = shape[axis];
  shape[axis] = static_cast<int64_t>(keep.size());
  Tensor out(DataType::kFloat32, shape);
  const float* src = t.data<float>();
  float* dst = out.data<float>();
  for (int64_t o = 0; o < outer; ++o)
    for (size_t j = 0; j < keep.size(); ++j)
      std::copy_n(src + (o * n + keep[j]) * inner, inner, dst + (o * keep.size() + j) * inner);
  return out;
}

// Slices node input k along the axis holding `channels` entries aligned as
// the channel axis of a value of `rank` (per-channel constants), when it has one.
Status SliceChannelConstant(Graph& g, size_t node, size_t k, int rank, int64_t channels,
                            const std::vector<int64_t>& keep) {
  const Tensor* c = g.FindWeight(g.nodes[node].inputs[k]);
  if (c == nullptr) return Status::OK();
  const int rc = static_cast<int>(c->rank());
  const int from_end = rank == 2 ? 0 : rank - 2;
  const int axis = rc - 1 - from_end;
  if (axis < 0 || c->dim(axis) != channels || channels == 1) return Status::OK();
  SPARQ_ASSIGN_OR_RETURN(Tensor * t, OwnedInput(g, node, k));
  *t = SliceAxis(*t, static_cast<size_t>(axis), keep);
  return Status::OK();
}

// Value of per-channel constant input k at channel c (broadcast when size 1).
double ConstantAt(const Graph& g, const Node& n, size_t k, int64_t c) {
  const Tensor* t = g.FindWeight(n.inputs[k]);
  if (t == nullptr) return kNaN;
  return t->numel() == 1 ? t->GetAsDouble(0) : t->GetAsDouble(c);
}

double ApplyUnary(const Graph& g, const Node& n, int64_t opset, double x, int64_t c) {
  const std::string& op = n.op_type;
  if (op == "Relu") return std::max(0.0, x);
  if (op == "LeakyRelu") return x < 0 ? n.attr_float("alpha", 0.01f) * x : x;
  if (op == "PRelu") return x < 0 ? ConstantAt(g, n, 1, c) * x : x;
  if (op == "Sigmoid") return 1.0 / (1.0 + std::exp(-x));
  if (op == "Tanh") return std::tanh(x);
  if (op == "HardSigmoid") return std::clamp(n.attr_float("alpha", 0.2f) * x + n.attr_float("beta", 0.5f), 0.0, 1.0);
  if (op == "HardSwish") return x * std::clamp(x / 6.0 + 0.5, 0.0, 1.0);
  if (op == "Elu") return x > 0 ? x : n.attr_float("alpha", 1.0f) * (std::exp(x) - 1.0);
  if (op == "Selu") {
    const double a = n.attr_float("alpha", 1.67326319f), gm = n.attr_float("gamma", 1.05070102f);
    return x > 0 ? gm * x : gm * a * (std::exp(x) - 1.0);
  }
  if (op == "Softplus") return std::log1p(std::exp(x));
  if (op == "Mish") return x * std::tanh(std::log1p(std::exp(x)));
  if (op == "Clip") {
    double lo = -std::numeric_limits<double>::infinity(), hi = -lo;
    if (opset < 11) {
      lo = n.attr_float("min", -std::numeric_limits<float>::max());
      hi = n.attr_float("max", std::numeric_limits<float>::max());
    } else {
      if (n.inputs.size() > 1 && !n.inputs[1].empty()) lo = ConstantAt(g, n, 1, 0);
      if (n.inputs.size() > 2 && !n.inputs[2].empty()) hi = ConstantAt(g, n, 2, 0);
    }
    return std::clamp(x, lo, hi);
  }
  return x;  // Identity, Dropout (inference)
}

double ApplyBinary(const std::string& op, double a, double b) {
  if (op == "Add" || op == "Sum") return a + b;
  if (op == "Sub") return a - b;
  if (op == "Mul") return a * b;
  if (op == "Div") return a / b;
  if (op == "Max") return std::max(a, b);
  if (op == "Min") return std::min(a, b);
  return a + b;  // Mean: summed here, divided by the caller
}

// Adds delta[o] to the effective bias of Conv / Gemm node `idx` in place.
Status AddBias(Graph& g, size_t idx, const std::vector<double>& delta) {
  Node& n = g.nodes[idx];
  const bool gemm = n.op_type == "Gemm";
  const double beta = gemm ? n.attr_float("beta", 1.0f) : 1.0;
  const bool has_bias = n.inputs.size() > 2 && !n.inputs[2].empty();
  if (!has_bias || beta == 0.0) {
    const std::string name = GraphEditor(g).FreshName(NodeName(n) + "_bias");
    Tensor t(DataType::kFloat32, {static_cast<int64_t>(delta.size())});
    for (size_t o = 0; o < delta.size(); ++o) t.data<float>()[o] = static_cast<float>(delta[o]);
    g.initializers[name] = t;
    if (n.inputs.size() < 3) n.inputs.resize(3);
    n.inputs[2] = name;
    if (gemm) {
      if (Attribute* b = n.mutable_attr("beta")) b->f = 1.0f;
    }
    return Status::OK();
  }
  SPARQ_ASSIGN_OR_RETURN(Tensor * b, OwnedInput(g, idx, 2));
  if (b->numel() != static_cast<int64_t>(delta.size())) {
    return Status::NotSupported(n.Describe() + ": bias has " + std::to_string(b->numel()) + " values, expected " +
                                std::to_string(delta.size()));
  }
  Tensor fresh = b->Clone();
  for (size_t o = 0; o < delta.size(); ++o) fresh.data<float>()[o] += static_cast<float>(delta[o] / beta);
  *b = fresh;
  return Status::OK();
}

}  // namespace

StatusOr<ChannelRemovalReport> RemoveZeroChannels(Model* model) {
  ChannelRemovalReport report;
  Graph& g = model->graph;
  SPARQ_RETURN_IF_ERROR(g.TopoSort());
  report.params_before = report.params_after = CountFloatParams(g);
  ChannelAnalysis a(*model, g);
  SPARQ_RETURN_IF_ERROR(a.Run());

  // Classes whose rows are zero in every producer.
  std::map<int64_t, bool> removable;
  std::map<std::string, Matrix> weights;
  for (size_t id = 0; id < a.owner.size(); ++id) {
    const Node& n = g.nodes[a.owner[id].first];
    const std::string name = NodeName(n);
    if (!weights.count(name)) {
      SPARQ_ASSIGN_OR_RETURN(weights[name], ReadWeightMatrix(*model, *a.layer_of.at(name)));
    }
    const Matrix& w = weights[name];
    const int64_t ch = a.owner[id].second;
    const bool zero = std::all_of(w.values.begin() + ch * w.cols, w.values.begin() + (ch + 1) * w.cols,
                                  [](float v) { return v == 0.0f; });
    const int64_t root = a.Find(static_cast<int64_t>(id));
    auto it = removable.find(root);
    removable[root] = (it == removable.end() ? true : it->second) && zero;
  }
  std::set<int64_t> removed;
  std::set<std::string> reported;
  for (const auto& [root, zero] : removable) {
    if (!zero) continue;
    const std::string lock = a.RootLock(root);
    if (lock.empty()) {
      removed.insert(root);
      continue;
    }
    for (size_t id = 0; id < a.owner.size(); ++id) {
      const std::string name = NodeName(g.nodes[a.owner[id].first]);
      if (a.Find(static_cast<int64_t>(id)) == root && reported.insert(name).second) report.skipped.emplace_back(name, lock);
    }
  }
  if (removed.empty()) return report;
  auto is_removed = [&](int64_t id) { return id >= 0 && removed.count(a.Find(id)) > 0; };
  auto kept_positions = [&](const Tracked& t) {
    std::vector<int64_t> keep;
    for (size_t p = 0; p < t.ids.size(); ++p)
      if (!is_removed(t.ids[p])) keep.push_back(static_cast<int64_t>(p));
    return keep;
  };

  std::map<std::string, std::vector<double>> cval;  // constant carried by each position of a tracked value
  std::map<std::string, std::vector<double>> matmul_bias;  // deferred bias deltas of MatMul consumers
  const int64_t opset = model->opset();
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const NodeInfo ni = a.info[i];
    const std::string name = NodeName(g.nodes[i]);
    const std::string in0 = g.nodes[i].inputs.empty() ? "" : g.nodes[i].inputs[0];
    const std::string out0 = g.nodes[i].outputs.empty() ? "" : g.nodes[i].outputs[0];
    auto tin = a.values.find(in0);
    // 1. Constants of the outputs, from the parameters before slicing.
    if (ni.role != Role::kNone && ni.role != Role::kConsumer && a.values.count(out0)) {
      const Node& n = g.nodes[i];
      const Tracked& t = tin != a.values.end() ? tin->second : a.values.at(out0);
      const std::vector<double>& x = cval[in0];
      std::vector<double> y;
      switch (ni.role) {
        case Role::kUnary:
          for (size_t c = 0; c < x.size(); ++c) y.push_back(ApplyUnary(g, n, opset, x[c], static_cast<int64_t>(c)));
          break;
        case Role::kBatchNorm: {
          const double eps = n.attr_float("epsilon", 1e-5f);
          for (size_t c = 0; c < x.size(); ++c) {
            const int64_t k = static_cast<int64_t>(c);
            y.push_back((x[c] - ConstantAt(g, n, 3, k)) / std::sqrt(ConstantAt(g, n, 4, k) + eps) *
                            ConstantAt(g, n, 1, k) + ConstantAt(g, n, 2, k));
          }
          break;
        }
        case Role::kPool: y = x; break;
        case Role::kDepthwise: {
          const Tensor* w = g.FindWeight(n.inputs[1]);
          const int64_t per = w->numel() / w->dim(0);
          for (size_t c = 0; c < x.size(); ++c) {
            double s = 0.0;
            for (int64_t k = 0; k < per; ++k) s += w->data<float>()[c * per + k];
            const double b = n.inputs.size() > 2 && !n.inputs[2].empty() ? ConstantAt(g, n, 2, static_cast<int64_t>(c)) : 0.0;
            y.push_back(b + x[c] * s);
          }
          break;
        }
        case Role::kElementwise: {
          const size_t C = t.ids.size();
          y.assign(C, kNaN);
          for (size_t c = 0; c < C; ++c) {
            double acc = kNaN;
            for (size_t k = 0; k < n.inputs.size(); ++k) {
              double v = a.values.count(n.inputs[k]) ? cval[n.inputs[k]][c] : ConstantAt(g, n, k, static_cast<int64_t>(c));
              acc = k == 0 ? v : ApplyBinary(n.op_type, acc, v);
            }
            if (n.op_type == "Mean") acc /= static_cast<double>(n.inputs.size());
            y[c] = acc;
          }
          break;
        }
        case Role::kConcat: {
          // One segment per input: a tracked input's constants, NaN for an
          // untracked one (its channels are never removed).
          size_t seg = 0;
          for (const auto& in : n.inputs) {
            auto it = a.values.find(in);
            if (ni.segments.empty()) {  // along a non-channel axis: channels are tied
              if (it != a.values.end()) {
                y = cval[in];
                break;
              }
              continue;
            }
            if (it != a.values.end()) y.insert(y.end(), cval[in].begin(), cval[in].end());
            else y.insert(y.end(), static_cast<size_t>(ni.segments[seg]), kNaN);
            ++seg;
          }
          break;
        }
        case Role::kFlatten: {
          const size_t repeat = x.empty() ? 1 : a.values.at(out0).ids.size() / x.size();
          for (double v : x) y.insert(y.end(), repeat, v);
          break;
        }
        default: break;
      }
      cval[out0] = y;
    }

    // 2. The input side: slice per-channel parameters and consumers' inputs.
    if (tin != a.values.end() && ni.role != Role::kNone) {
      const Tracked& t = tin->second;
      const std::vector<int64_t> keep = kept_positions(t);
      const int64_t C = static_cast<int64_t>(t.ids.size());
      if (keep.size() != t.ids.size()) {
        switch (ni.role) {
          case Role::kBatchNorm:
            for (size_t k = 1; k < 5; ++k) {
              SPARQ_ASSIGN_OR_RETURN(Tensor * p, OwnedInput(g, i, k));
              *p = SliceAxis(*p, 0, keep);
            }
            break;
          case Role::kUnary:
            if (g.nodes[i].op_type == "PRelu") SPARQ_RETURN_IF_ERROR(SliceChannelConstant(g, i, 1, t.rank, C, keep));
            break;
          case Role::kElementwise:
            for (size_t k = 0; k < g.nodes[i].inputs.size(); ++k)
              if (!a.values.count(g.nodes[i].inputs[k])) SPARQ_RETURN_IF_ERROR(SliceChannelConstant(g, i, k, t.rank, C, keep));
            break;
          case Role::kDepthwise: {
            SPARQ_ASSIGN_OR_RETURN(Tensor * w, OwnedInput(g, i, 1));
            *w = SliceAxis(*w, 0, keep);
            if (g.nodes[i].inputs.size() > 2 && !g.nodes[i].inputs[2].empty()) {
              SPARQ_ASSIGN_OR_RETURN(Tensor * b, OwnedInput(g, i, 2));
              *b = SliceAxis(*b, 0, keep);
            }
            if (Attribute* grp = g.nodes[i].mutable_attr("group")) grp->i = static_cast<int64_t>(keep.size());
            break;
          }
          case Role::kConsumer: {
            const WeightedLayer& L = *a.layer_of.at(name);
            const std::vector<double>& x = cval[in0];
            SPARQ_ASSIGN_OR_RETURN(Tensor * w, OwnedInput(g, i, 1));
            const Tensor old = *w;
            // Fold: delta[o] = sum over removed positions p of x[p] * (sum of W[o, p, taps]).
            std::vector<double> delta(static_cast<size_t>(L.rows), 0.0);
            const int64_t taps = L.op_type == "Conv" ? L.cols / C : 1;
            const double alpha = L.op_type == "Gemm" ? g.nodes[i].attr_float("alpha", 1.0f) : 1.0;
            SPARQ_ASSIGN_OR_RETURN(Matrix view, ReadWeightMatrix(*model, L));
            bool any = false;
            for (int64_t p = 0; p < C; ++p) {
              if (!is_removed(t.ids[p]) || x.size() != static_cast<size_t>(C) || !std::isfinite(x[p]) || x[p] == 0.0) continue;
              for (int64_t o = 0; o < L.rows; ++o) {
                double s = 0.0;
                for (int64_t k = 0; k < taps; ++k) s += view.at(o, p * taps + k);
                delta[o] += alpha * x[p] * s;
                any = any || s != 0.0;
              }
            }
            const size_t axis = L.op_type == "Conv" ? 1 : (L.transposed_view ? 0 : 1);
            *w = SliceAxis(old, axis, keep);
            if (any) {
              if (L.op_type == "MatMul") matmul_bias[name] = delta;
              else SPARQ_RETURN_IF_ERROR(AddBias(g, i, delta));
            }
            break;
          }
          default: break;
        }
      }
    }

    // 3. The output side of producers.
    if (ni.producer) {
      const WeightedLayer& L = *a.layer_of.at(name);
      // A zero row outputs its bias (read from the node: a fold may have added one).
      std::vector<double> y(static_cast<size_t>(ni.channels), 0.0);
      const Node& n = g.nodes[i];
      if (L.op_type != "MatMul" && n.inputs.size() > 2 && !n.inputs[2].empty()) {
        const double beta = L.op_type == "Gemm" ? n.attr_float("beta", 1.0f) : 1.0;
        for (int64_t c = 0; c < ni.channels; ++c) y[c] = beta * ConstantAt(g, n, 2, c);
      }
      std::vector<int64_t> keep;
      for (int64_t c = 0; c < ni.channels; ++c)
        if (!is_removed(ni.base + c)) keep.push_back(c);
      cval[out0] = y;
      if (keep.size() == static_cast<size_t>(ni.channels)) continue;
      SPARQ_ASSIGN_OR_RETURN(Tensor * w, OwnedInput(g, i, 1));
      *w = SliceAxis(*w, L.transposed_view ? 1 : 0, keep);
      if (L.op_type != "MatMul" && g.nodes[i].inputs.size() > 2 && !g.nodes[i].inputs[2].empty()) {
        SPARQ_ASSIGN_OR_RETURN(Tensor * b, OwnedInput(g, i, 2));
        *b = SliceAxis(*b, b->rank() == 2 ? 1 : 0, keep);
      }
      auto mb = matmul_bias.find(name);
      if (mb != matmul_bias.end()) {
        std::vector<double> sliced;
        for (int64_t c : keep) sliced.push_back(mb->second[c]);
        mb->second = sliced;
      }
      report.producers.push_back({name, ni.channels, static_cast<int64_t>(keep.size())});
    }
  }
  // Deferred MatMul bias folds (they may insert nodes).
  for (const auto& entry : matmul_bias) {
    const std::string& name = entry.first;
    const auto& delta = entry.second;
    SPARQ_ASSIGN_OR_RETURN(std::vector<WeightedLayer> now, FindWeightedLayers(*model));
    auto it = std::find_if(now.begin(), now.end(), [&](const WeightedLayer& L) { return L.node == name; });
    if (it == now.end()) return Status::Internal("layer '" + name + "' vanished during the channel rewrite");
    std::vector<double> bias = LayerEffectiveBias(*model, *it);
    for (size_t o = 0; o < bias.size() && o < delta.size(); ++o) bias[o] += delta[o];
    SPARQ_RETURN_IF_ERROR(SetLayerBias(model, *it, bias));
  }
  // Initializers nobody reads any more (originals of copied shared constants).
  const std::set<std::string> read = ValuesRead(g);
  std::set<std::string> listed;
  for (const auto& v : g.initializer_inputs) listed.insert(v.name);
  for (auto it = g.initializers.begin(); it != g.initializers.end();) {
    if (!read.count(it->first) && !listed.count(it->first)) it = g.initializers.erase(it);
    else ++it;
  }
  SPARQ_RETURN_IF_ERROR(g.TopoSort());
  g.value_info.clear();
  (void)InferShapes(*model);  // stale shapes are worse than none; failure leaves them empty
  report.params_after = CountFloatParams(g);
  return report;
}

}  // namespace sparq
