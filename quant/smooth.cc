// SmoothQuant-style scale migration (sparq/smooth.h).
//
//   before:  P ── X ──┬── MatMul(X, W1)          X / s folded into P when P is a
//                     └── MatMul(X, W2)          LayerNormalization (gamma, beta),
//                                                or a MatMul/Gemm (+ bias Add)
//   after:   P' ── X/s ──┬── MatMul(X/s, diag(s) W1)   whose only readers are
//                        └── MatMul(X/s, diag(s) W2)   the smoothed layers; else
//                                                      P ── X ── Mul(1/s) ── X/s
#include "sparq/smooth.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "graph/graph_editor.h"
#include "quant/holdout.h"
#include "quant/passes.h"
#include "sparq/evaluate.h"  // kSqnrCeilingDb
#include "sparq/executor.h"

namespace sparq {
namespace {

// A MatMul / Gemm that smoothing can rescale along its reduction axis K.
struct SmoothLayer {
  size_t index;
  int64_t k;        // input channels
  bool k_is_rows;   // stored weight [K, N] (MatMul, Gemm transB=0); else [N, K]
};

std::optional<SmoothLayer> AsSmoothLayer(const Graph& g, size_t i) {
  const Node& n = g.nodes[i];
  if (n.op_type != "MatMul" && n.op_type != "Gemm") return std::nullopt;
  std::optional<WeightedLayer> layer = QuantizableLayer(g, n);
  if (!layer) return std::nullopt;
  const bool k_is_rows = n.op_type == "MatMul" || n.attr_int("transB", 0) == 0;
  return SmoothLayer{i, layer->weight_shape[k_is_rows ? 0 : 1], k_is_rows};
}

// The activations smoothing may touch, in graph order, with their layers.
std::vector<std::pair<std::string, std::vector<SmoothLayer>>> Groups(const Graph& g) {
  std::vector<std::pair<std::string, std::vector<SmoothLayer>>> groups;
  std::map<std::string, size_t> at;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    std::optional<SmoothLayer> l = AsSmoothLayer(g, i);
    if (!l) continue;
    const std::string& x = g.nodes[i].inputs[0];
    auto it = at.find(x);
    if (it == at.end()) {
      at[x] = groups.size();
      groups.push_back({x, {*l}});
    } else {
      groups[it->second].second.push_back(*l);
    }
  }
  return groups;
}

double Median(std::vector<float> v) {
  if (v.empty()) return 0.0;
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2), v.end());
  return v[v.size() / 2];
}

double OutlierRatio(const std::vector<float>& m) {
  const double med = Median(m);
  const double top = m.empty() ? 0.0 : *std::max_element(m.begin(), m.end());
  if (top <= 0.0) return 1.0;
  return med > 0.0 ? top / med : HUGE_VAL;
}

// Scales the K axis of a stored 2-D weight by f (rows of [K, N] or columns of [N, K]).
Tensor ScaleAlong(const Tensor& w, bool rows, const std::vector<float>& f) {
  Tensor out = w.ToFloat32().Clone();
  const int64_t r = out.dim(0), c = out.dim(1);
  float* p = out.data<float>();
  for (int64_t i = 0; i < r; ++i)
    for (int64_t j = 0; j < c; ++j) p[i * c + j] *= f[static_cast<size_t>(rows ? i : j)];
  return out;
}

Tensor ScaleVector(const Tensor& v, const std::vector<float>& f) {
  Tensor out = v.ToFloat32().Clone();
  for (int64_t i = 0; i < out.numel(); ++i) out.data<float>()[i] *= f[static_cast<size_t>(i)];
  return out;
}

bool IsConstVector(const Graph& g, const std::string& name, int64_t k) {
  const Tensor* t = name.empty() ? nullptr : g.FindWeight(name);
  return t != nullptr && t->dtype() == DataType::kFloat32 && t->numel() == k && t->rank() == 1;
}

// Folds x * f (f = 1/s) into the producer of x when exact; returns what it
// folded into, or "" when it cannot (the caller inserts a Mul).
// Points `slot` (a node input naming a weight) at a new initializer `t`;
// the old name goes into `replaced`.
void Replace(GraphEditor& ed, std::string& slot, Tensor t, std::set<std::string>* replaced) {
  replaced->insert(slot);
  slot = ed.AddInitializer(slot + "_smooth", std::move(t));
}

std::string FoldIntoProducer(Graph& g, GraphEditor& ed, const std::string& x, const std::set<size_t>& group,
                             const std::vector<float>& f, std::set<std::string>* replaced) {
  if (ed.IsGraphOutput(x)) return "";
  for (size_t r : ed.Consumers(x))
    if (!group.count(r)) return "";
  const int64_t k = static_cast<int64_t>(f.size());
  size_t p = g.nodes.size();
  for (size_t i = 0; i < g.nodes.size(); ++i)
    if (!g.nodes[i].outputs.empty() && g.nodes[i].outputs[0] == x) p = i;
  if (p == g.nodes.size()) return "";
  Node& n = g.nodes[p];
  if (!n.domain.empty()) return "";
  if (n.op_type == "LayerNormalization" && n.attr_int("axis", -1) == -1 && n.inputs.size() >= 2 &&
      IsConstVector(g, n.inputs[1], k) && (n.inputs.size() < 3 || n.inputs[2].empty() || IsConstVector(g, n.inputs[2], k))) {
    // y = (x - mean) / std * gamma + beta: scaling gamma and beta scales y.
    Replace(ed, n.inputs[1], ScaleVector(*g.FindWeight(n.inputs[1]), f), replaced);
    if (n.inputs.size() >= 3 && !n.inputs[2].empty())
      Replace(ed, n.inputs[2], ScaleVector(*g.FindWeight(n.inputs[2]), f), replaced);
    return "LayerNormalization '" + NodeKey(n) + "'";
  }
  // A MatMul / Gemm producing x (its output columns are x's channels), with
  // its bias in the node (Gemm C) or in an Add that alone reads it.
  size_t layer_index = p;
  std::string bias_input;
  size_t bias_node = g.nodes.size();
  if (n.op_type == "Add" && n.inputs.size() == 2) {
    for (int b = 0; b < 2; ++b) {
      if (!IsConstVector(g, n.inputs[b], k)) continue;
      const std::string& other = n.inputs[1 - b];
      const std::vector<size_t> readers = ed.Consumers(other);
      if (readers.size() != 1 || ed.IsGraphOutput(other)) continue;
      for (size_t i = 0; i < g.nodes.size(); ++i)
        if (!g.nodes[i].outputs.empty() && g.nodes[i].outputs[0] == other) layer_index = i;
      bias_input = n.inputs[b];
      bias_node = p;
    }
    if (bias_node == g.nodes.size()) return "";
  }
  std::optional<SmoothLayer> l = AsSmoothLayer(g, layer_index);
  if (!l) return "";
  Node& m = g.nodes[layer_index];
  const Tensor* w = g.FindWeight(m.inputs[1]);
  const int64_t n_out = w->dim(l->k_is_rows ? 1 : 0);
  if (n_out != k) return "";
  const bool gemm_bias = m.op_type == "Gemm" && m.inputs.size() > 2 && !m.inputs[2].empty();
  if (gemm_bias && !IsConstVector(g, m.inputs[2], k)) return "";  // a broadcast C: leave it
  if (m.op_type == "Gemm" && (m.attr_float("alpha", 1.0f) != 1.0f)) return "";
  Replace(ed, m.inputs[1], ScaleAlong(*w, !l->k_is_rows, f), replaced);
  if (gemm_bias) Replace(ed, m.inputs[2], ScaleVector(*g.FindWeight(m.inputs[2]), f), replaced);
  if (bias_node != g.nodes.size()) {
    Node& a = g.nodes[bias_node];
    for (auto& in : a.inputs)
      if (in == bias_input) Replace(ed, in, ScaleVector(*g.FindWeight(bias_input), f), replaced);
  }
  return m.op_type + " '" + NodeKey(m) + "'";
}

}  // namespace

StatusOr<std::map<std::string, std::vector<float>>> MeasureChannelMaxAbs(const Model& model, const BatchFn& batches,
                                                                         int threads) {
  std::map<std::string, int64_t> channels;  // tensor -> K
  for (const auto& [x, layers] : Groups(model.graph)) {
    for (const SmoothLayer& l : layers) {
      auto [it, fresh] = channels.emplace(x, l.k);
      if (!fresh && it->second != l.k) {
        return Status::InvalidArgument("smooth: '" + x + "' feeds layers of " + std::to_string(it->second) + " and " +
                                       std::to_string(l.k) + " input channels");
      }
    }
  }
  std::map<std::string, std::vector<float>> result;
  if (channels.empty()) return result;
  ExecutorOptions eo;
  eo.threads = threads;
  SPARQ_ASSIGN_OR_RETURN(auto exec, Executor::Create(model, eo));
  auto observe = [&](const std::string& name, const Tensor& t) -> Status {
    auto c = channels.find(name);
    if (c == channels.end() || t.dtype() != DataType::kFloat32) return Status::OK();
    const int64_t k = c->second;
    if (t.rank() == 0 || t.dim(t.rank() - 1) != k) {
      return Status::InvalidArgument("smooth: tensor '" + name + "' has last axis " +
                                     (t.rank() ? std::to_string(t.dim(t.rank() - 1)) : std::string("(scalar)")) +
                                     ", its layer's weight " + std::to_string(k) + " input channels");
    }
    std::vector<float>& m = result[name];
    m.resize(static_cast<size_t>(k), 0.0f);
    const float* p = t.data<float>();
    for (int64_t i = 0; i < t.numel(); ++i) {
      const float a = std::fabs(p[i]);
      float& slot = m[static_cast<size_t>(i % k)];
      if (a > slot) slot = a;  // NaN never wins: calibration names it
    }
    return Status::OK();
  };
  RunOptions ro;
  ro.on_node_outputs = [&](const Node& n, const std::vector<Tensor>& outs) -> Status {
    for (size_t i = 0; i < outs.size() && i < n.outputs.size(); ++i)
      if (outs[i].defined()) SPARQ_RETURN_IF_ERROR(observe(n.outputs[i], outs[i]));
    return Status::OK();
  };
  int64_t index = 0;
  for (;; ++index) {
    TensorMap batch;
    SPARQ_ASSIGN_OR_RETURN(bool more, batches(&batch));
    if (!more) break;
    for (const auto& [name, t] : batch) SPARQ_RETURN_IF_ERROR(observe(name, t));
    TensorMap outputs;
    SPARQ_RETURN_IF_ERROR(exec->Run(batch, &outputs, ro).WithContext("smooth: batch " + std::to_string(index)));
  }
  if (index == 0) return Status::InvalidArgument("smooth: no calibration batch");
  return result;
}

StatusOr<Model> SmoothModel(const Model& input, const std::map<std::string, std::vector<float>>& channel_max,
                            double alpha, const SmoothOptions& options, SmoothReport* report) {
  if (!(alpha >= 0.0 && alpha <= 1.0)) {
    return Status::InvalidArgument("smooth: alpha must be in [0, 1], got " + std::to_string(alpha));
  }
  SmoothReport local;
  if (report == nullptr) report = &local;
  report->alpha = alpha;
  report->inputs.clear();
  Model model = input;  // shares the weights; smoothed ones are new initializers
  Graph& g = model.graph;
  GraphEditor ed(g);
  std::set<std::string> replaced;
  for (const auto& [x, layers] : Groups(g)) {
    auto stats = channel_max.find(x);
    if (stats == channel_max.end()) continue;
    const std::vector<float>& xmax = stats->second;
    const int64_t k = layers.front().k;
    if (static_cast<int64_t>(xmax.size()) != k) {
      return Status::InvalidArgument("smooth: " + std::to_string(xmax.size()) + " channel maxima for '" + x + "', its " +
                                     g.nodes[layers.front().index].Describe() + " has " + std::to_string(k) +
                                     " input channels");
    }
    const double ratio = OutlierRatio(xmax);
    if (ratio < options.min_outlier_ratio) continue;
    // Per channel, the largest weight magnitude over every layer reading x.
    std::vector<float> wmax(static_cast<size_t>(k), 0.0f);
    for (const SmoothLayer& l : layers) {
      const Tensor w = g.FindWeight(g.nodes[l.index].inputs[1])->ToFloat32();
      const int64_t r = w.dim(0), c = w.dim(1);
      for (int64_t i = 0; i < r; ++i)
        for (int64_t j = 0; j < c; ++j) {
          float& slot = wmax[static_cast<size_t>(l.k_is_rows ? i : j)];
          slot = std::max(slot, std::fabs(w.data<float>()[i * c + j]));
        }
    }
    std::vector<float> s(static_cast<size_t>(k), 1.0f), inv(static_cast<size_t>(k), 1.0f), after(xmax);
    for (size_t j = 0; j < s.size(); ++j) {
      if (xmax[j] <= 0.0f || wmax[j] <= 0.0f) continue;
      const double v = std::pow(static_cast<double>(xmax[j]), alpha) / std::pow(static_cast<double>(wmax[j]), 1.0 - alpha);
      if (!std::isfinite(v) || v <= 0.0) continue;
      s[j] = static_cast<float>(std::clamp(v, 1e-5, 1e5));
      inv[j] = 1.0f / s[j];
      after[j] = xmax[j] * inv[j];
    }
    SmoothedInput done;
    done.tensor = x;
    done.outlier_ratio = ratio;
    done.ratio_after = OutlierRatio(after);
    std::set<size_t> group;
    for (const SmoothLayer& l : layers) {
      group.insert(l.index);
      done.layers.push_back(NodeKey(g.nodes[l.index]));
    }
    for (const SmoothLayer& l : layers) {
      Node& n = g.nodes[l.index];
      Replace(ed, n.inputs[1], ScaleAlong(*g.FindWeight(n.inputs[1]), l.k_is_rows, s), &replaced);
    }
    done.folded_into = FoldIntoProducer(g, ed, x, group, inv, &replaced);
    if (done.folded_into.empty()) {
      //   x ── Mul(x, 1/s) ── x_smooth ── the smoothed layers (other readers keep x)
      const std::string name = ed.FreshName(x + "_smooth");
      Node mul{ed.FreshName(x + "_smooth_mul"), "Mul", "", {x, ed.AddInitializer(x + "_smooth_inv", Tensor::FromVector<float>({k}, inv))},
               {name}, {}, ""};
      done.folded_into = "Mul '" + mul.name + "'";
      for (size_t i : group) g.nodes[i].inputs[0] = name;
      ed.AddNode(std::move(mul));
    }
    report->inputs.push_back(std::move(done));
  }
  // Replaced weights no node reads any more (those not shared) go.
  std::set<std::string> read;
  for (const Node& n : g.nodes) read.insert(n.inputs.begin(), n.inputs.end());
  for (const auto& o : g.outputs) read.insert(o.name);
  for (const auto& v : g.initializer_inputs) read.insert(v.name);
  for (const std::string& name : replaced)
    if (!read.count(name)) g.initializers.erase(name);
  SPARQ_RETURN_IF_ERROR(g.TopoSort());
  return model;
}

namespace {

// Output SQNR in dB of `got` against `ref`, over every float output together.
double Sqnr(const std::vector<TensorMap>& ref, const std::vector<TensorMap>& got) {
  double signal = 0.0, noise = 0.0;
  for (size_t b = 0; b < ref.size(); ++b) {
    for (const auto& [name, r] : ref[b]) {
      auto it = got[b].find(name);
      if (r.dtype() != DataType::kFloat32 || it == got[b].end() || it->second.numel() != r.numel()) continue;
      const Tensor q = it->second.ToFloat32();
      for (int64_t i = 0; i < r.numel(); ++i) {
        const double a = r.data<float>()[i], e = a - q.data<float>()[i];
        signal += a * a;
        noise += e * e;
      }
    }
  }
  if (!(noise > 0.0)) return std::isnan(noise) ? -HUGE_VAL : kSqnrCeilingDb;
  return std::min(kSqnrCeilingDb, 10.0 * std::log10(signal / noise));
}

}  // namespace

StatusOr<Model> SmoothForInt8(const Model& model, const BatchSource& calibration, const QuantizeOptions& quantize,
                              const CalibrationMethodOptions& method, const SmoothOptions& options,
                              SmoothReport* report) {
  SmoothReport local;
  if (report == nullptr) report = &local;
  *report = SmoothReport{};
  if (!options.auto_alpha) {
    SPARQ_ASSIGN_OR_RETURN(auto stats, MeasureChannelMaxAbs(model, calibration(), options.threads));
    return SmoothModel(model, stats, options.alpha, options, report);
  }
  if (options.alphas.empty()) return Status::InvalidArgument("smooth: auto alpha needs at least one candidate");
  auto made = MakeHoldoutSplit(calibration, options.holdout_every);
  if (!made.ok()) return made.status().WithContext("smooth");
  const HoldoutSplit split = *made;
  SPARQ_ASSIGN_OR_RETURN(auto stats, MeasureChannelMaxAbs(model, FitBatches(calibration, split), options.threads));
  ExecutorOptions eo;
  eo.threads = options.threads;
  std::vector<TensorMap> inputs, reference;
  {
    SPARQ_ASSIGN_OR_RETURN(auto exec, Executor::Create(model, eo));
    BatchFn next = HeldOutBatches(calibration, split);
    for (;;) {
      TensorMap b, out;
      SPARQ_ASSIGN_OR_RETURN(bool more, next(&b));
      if (!more) break;
      SPARQ_RETURN_IF_ERROR(exec->Run(b, &out).WithContext("smooth: held-out batch"));
      inputs.push_back(std::move(b));
      reference.push_back(std::move(out));
    }
  }
  QuantizeOptions q = quantize;
  q.bias_correction.clear();  // measured for the chosen model, later
  double best_alpha = options.alphas.front(), best_db = -HUGE_VAL;
  for (double alpha : options.alphas) {
    SPARQ_ASSIGN_OR_RETURN(Model smoothed, SmoothModel(model, stats, alpha, options, nullptr));
    CalibrationOptions c;
    static_cast<CalibrationMethodOptions&>(c) = method;
    c.threads = options.threads;
    SPARQ_ASSIGN_OR_RETURN(auto needs, CalibrationTensorsNeeded(smoothed, q));
    for (const auto& n : needs) c.tensors.push_back(n.tensor);
    SPARQ_ASSIGN_OR_RETURN(CalibrationTable table, Calibrate(smoothed, FitBatches(calibration, split), c));
    SPARQ_ASSIGN_OR_RETURN(Model quantized, QuantizeModel(smoothed, table, q, nullptr));
    SPARQ_ASSIGN_OR_RETURN(auto exec, Executor::Create(quantized, eo));
    std::vector<TensorMap> got(inputs.size());
    for (size_t b = 0; b < inputs.size(); ++b)
      SPARQ_RETURN_IF_ERROR(exec->Run(inputs[b], &got[b]).WithContext("smooth: alpha " + std::to_string(alpha)));
    const double db = Sqnr(reference, got);
    report->alpha_sqnr_db.push_back({alpha, db});
    if (db > best_db) best_db = db, best_alpha = alpha;
  }
  std::vector<std::pair<double, double>> tried = std::move(report->alpha_sqnr_db);
  // The chosen alpha, with the maxima of all the calibration batches.
  if (split.split) {
    SPARQ_ASSIGN_OR_RETURN(stats, MeasureChannelMaxAbs(model, calibration(), options.threads));
  }
  SPARQ_ASSIGN_OR_RETURN(Model out, SmoothModel(model, stats, best_alpha, options, report));
  report->alpha_sqnr_db = std::move(tried);
  return out;
}

}  // namespace sparq
