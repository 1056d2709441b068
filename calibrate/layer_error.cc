// ChooseByLayerError: the layer-output error of each candidate threshold.
//
//   batch ──> model (float) ──on_node_outputs──> live values (freed after
//                                                their last consumer ran)
//   at consumer C of tensor T:  for each candidate t of T
//        C alone (T fake-quantized with t, other inputs float)  vs  C's float output
//        error[T][t] += |y_q - y|^2 / |y|^2
#include "calibrate/layer_error.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <set>

namespace sparq {
namespace {

// x -> dequantize(quantize(x)) with the range's scale and zero point (int8
// [-128, 127] or uint8 [0, 255]), rounding half to even as QuantizeLinear.
Tensor FakeQuantize(const Tensor& x, const TensorRange& r) {
  Tensor y = Tensor::Uninitialized(DataType::kFloat32, x.shape());
  const float* in = x.data<float>();
  float* out = y.data<float>();
  const float lo = r.is_signed ? -128.0f : 0.0f, hi = r.is_signed ? 127.0f : 255.0f;
  const float zp = static_cast<float>(r.zero_point);
  for (int64_t i = 0; i < x.numel(); ++i) {
    const float q = std::clamp(std::nearbyint(in[i] / r.scale) + zp, lo, hi);
    out[i] = (q - zp) * r.scale;
  }
  return y;
}

// |a - b|^2 / |b|^2 over float tensors of equal size (0 when b is all zeros
// and a equals it).
double RelativeError(const Tensor& a, const Tensor& b) {
  const float* pa = a.data<float>();
  const float* pb = b.data<float>();
  double noise = 0.0, energy = 0.0;
  for (int64_t i = 0; i < b.numel(); ++i) {
    const double d = static_cast<double>(pa[i]) - pb[i];
    noise += d * d;
    energy += static_cast<double>(pb[i]) * pb[i];
  }
  if (energy == 0.0) return noise == 0.0 ? 0.0 : 1.0;
  return noise / energy;
}

// `node` alone as a model: its non-weight inputs become graph inputs (typed as
// the values seen in the run), its weights initializers.
Model SingleNodeModel(const Model& model, const Node& node, const TensorMap& live) {
  Model m;
  m.ir_version = model.ir_version;
  m.opset_imports = model.opset_imports;
  m.graph.name = "layer_error";
  std::set<std::string> seen;
  for (const auto& in : node.inputs) {
    if (in.empty() || !seen.insert(in).second) continue;
    if (const Tensor* w = model.graph.FindWeight(in)) {
      m.graph.initializers[in] = *w;
      continue;
    }
    ValueInfo vi;
    vi.name = in;
    auto it = live.find(in);
    vi.dtype = it != live.end() ? it->second.dtype() : DataType::kFloat32;
    m.graph.inputs.push_back(vi);
  }
  for (const auto& out : node.outputs) {
    if (out.empty()) continue;
    ValueInfo vi;
    vi.name = out;
    vi.dtype = DataType::kFloat32;
    m.graph.outputs.push_back(vi);
  }
  m.graph.nodes.push_back(node);
  return m;
}

}  // namespace

StatusOr<std::map<std::string, size_t>> ChooseByLayerError(const Model& model, const TensorMap& batch,
                                                            const std::map<std::string, AutoTensor>& tensors,
                                                            bool symmetric, int threads) {
  const Graph& g = model.graph;
  // Ranges per candidate, and how many consumers each value still has.
  std::map<std::string, std::vector<TensorRange>> ranges;
  for (const auto& [name, t] : tensors) {
    if (t.candidates.size() < 2) continue;
    for (const auto& c : t.candidates)
      ranges[name].push_back(MakeRange(name, t.min, t.max, c.threshold, symmetric, CalibrationMethodName(c.method)));
  }
  std::map<std::string, int> uses;
  for (const Node& n : g.nodes) {
    std::set<std::string> distinct(n.inputs.begin(), n.inputs.end());
    for (const auto& in : distinct)
      if (!in.empty()) ++uses[in];
  }
  std::map<std::string, std::vector<double>> error;
  for (const auto& [name, r] : ranges) error[name].assign(r.size(), 0.0);

  TensorMap live;
  // A value nothing consumes (a graph output) is compared with itself.
  auto self_error = [&](const std::string& name, const Tensor& t) {
    auto it = ranges.find(name);
    if (it == ranges.end() || uses[name] > 0 || t.dtype() != DataType::kFloat32) return;
    for (size_t c = 0; c < it->second.size(); ++c) error[name][c] += RelativeError(FakeQuantize(t, it->second[c]), t);
  };
  for (const auto& [name, t] : batch) {
    live[name] = t;
    self_error(name, t);
  }
  const ExecutorOptions single{threads};
  RunOptions run_options;
  run_options.on_node_outputs = [&](const Node& n, const std::vector<Tensor>& outs) -> Status {
    // n's inputs that have candidates: rerun n alone per candidate.
    // A node that cannot run alone (e.g. a subgraph reading outer values)
    // gives no evidence: its input tensors are judged by their other consumers.
    std::set<std::string> done;
    std::unique_ptr<Executor> exec;
    bool alone = true;
    for (const auto& in : n.inputs) {
      auto it = ranges.find(in);
      if (!alone || in.empty() || it == ranges.end() || !done.insert(in).second || !live.count(in)) continue;
      if (live.at(in).dtype() != DataType::kFloat32) continue;
      if (!exec) {
        auto created = Executor::Create(SingleNodeModel(model, n, live), single);
        if (!created.ok()) {
          alone = false;
          continue;
        }
        exec = std::move(created).value();
      }
      TensorMap inputs;
      for (const auto& vi : exec->model().graph.inputs) {
        auto v = live.find(vi.name);
        if (v == live.end()) break;
        inputs[vi.name] = v->second;
      }
      if (inputs.size() != exec->model().graph.inputs.size()) {
        alone = false;
        continue;
      }
      std::vector<double> local(it->second.size(), 0.0);  // added only when every candidate ran
      bool ran = true;
      for (size_t c = 0; c < it->second.size() && ran; ++c) {
        inputs[in] = FakeQuantize(live.at(in), it->second[c]);
        TensorMap got;
        ran = exec->Run(inputs, &got).ok();
        for (size_t o = 0; ran && o < outs.size() && o < n.outputs.size(); ++o) {
          if (n.outputs[o].empty() || !outs[o].defined() || outs[o].dtype() != DataType::kFloat32) continue;
          auto g_it = got.find(n.outputs[o]);
          if (g_it == got.end() || g_it->second.numel() != outs[o].numel()) continue;
          local[c] += RelativeError(g_it->second, outs[o]);
        }
      }
      if (ran)
        for (size_t c = 0; c < local.size(); ++c) error[in][c] += local[c];
      inputs[in] = live.at(in);
    }
    for (size_t o = 0; o < outs.size() && o < n.outputs.size(); ++o) {
      if (n.outputs[o].empty() || !outs[o].defined()) continue;
      if (uses[n.outputs[o]] > 0) live[n.outputs[o]] = outs[o].Clone();  // the executor may reuse its buffers
      self_error(n.outputs[o], outs[o]);
    }
    std::set<std::string> released;
    for (const auto& in : n.inputs)
      if (!in.empty() && released.insert(in).second && live.count(in) && --uses[in] == 0) live.erase(in);
    return Status::OK();
  };
  SPARQ_ASSIGN_OR_RETURN(auto exec, Executor::Create(model, ExecutorOptions{threads}));
  TensorMap outputs;
  SPARQ_RETURN_IF_ERROR(exec->Run(batch, &outputs, run_options).WithContext("auto calibration"));

  std::map<std::string, size_t> chosen;
  for (const auto& [name, errs] : error)
    chosen[name] = static_cast<size_t>(std::min_element(errs.begin(), errs.end()) - errs.begin());
  return chosen;
}

}  // namespace sparq
