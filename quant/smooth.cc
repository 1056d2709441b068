// SmoothQuant-style scale migration (sparq/smooth.h): the policy (alpha, which
// activations, the held-out search); the rescaling itself is quant/layer_inputs.h.
#include "sparq/smooth.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "graph/graph_editor.h"
#include "quant/holdout.h"
#include "quant/layer_inputs.h"
#include "quant/passes.h"
#include "sparq/evaluate.h"  // kSqnrCeilingDb
#include "sparq/executor.h"

namespace sparq {
namespace {

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

}  // namespace

StatusOr<std::map<std::string, std::vector<float>>> MeasureChannelMaxAbs(const Model& model, const BatchFn& batches,
                                                                         int threads) {
  std::map<std::string, std::vector<float>> result;
  SPARQ_RETURN_IF_ERROR(ObserveLayerInputs(model, batches, threads, "smooth",
                                           [&](const std::string& name, const Tensor& t, int64_t k) {
                                             std::vector<float>& m = result[name];
                                             m.resize(static_cast<size_t>(k), 0.0f);
                                             const float* p = t.data<float>();
                                             for (int64_t i = 0; i < t.numel(); ++i) {
                                               const float a = std::fabs(p[i]);
                                               float& slot = m[static_cast<size_t>(i % k)];
                                               if (a > slot) slot = a;  // NaN never wins: calibration names it
                                             }
                                             return Status::OK();
                                           }));
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
  for (const InputGroup& group : LayerInputGroups(g)) {
    const auto& [x, layers] = group;
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
    for (const InputLayer& l : layers) {
      const Tensor w = g.FindWeight(g.nodes[l.index].inputs[1])->ToFloat32();
      const int64_t r = w.dim(0), c = w.dim(1);
      for (int64_t i = 0; i < r; ++i)
        for (int64_t j = 0; j < c; ++j) {
          float& slot = wmax[static_cast<size_t>(l.k_is_rows ? i : j)];
          slot = std::max(slot, std::fabs(w.data<float>()[i * c + j]));
        }
    }
    std::vector<float> s(static_cast<size_t>(k), 1.0f), after(xmax);
    for (size_t j = 0; j < s.size(); ++j) {
      if (xmax[j] <= 0.0f || wmax[j] <= 0.0f) continue;
      const double v = std::pow(static_cast<double>(xmax[j]), alpha) / std::pow(static_cast<double>(wmax[j]), 1.0 - alpha);
      if (!std::isfinite(v) || v <= 0.0) continue;
      s[j] = static_cast<float>(std::clamp(v, 1e-5, 1e5));
      after[j] = xmax[j] * (1.0f / s[j]);
    }
    SmoothedInput done;
    done.tensor = x;
    done.outlier_ratio = ratio;
    done.ratio_after = OutlierRatio(after);
    for (const InputLayer& l : layers) done.layers.push_back(NodeKey(g.nodes[l.index]));
    done.folded_into = ScaleLayerInput(g, ed, group, s, "smooth", &replaced);
    report->inputs.push_back(std::move(done));
  }
  DropUnread(g, replaced);  // replaced weights no node reads any more (those not shared)
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
