// The calibration loop: batches through the executor, activations into
// observers, observers into ranges.
#include <algorithm>
#include <cmath>
#include <map>
#include <mutex>
#include <set>

#include "calibrate/layer_error.h"
#include "kernels/backend.h"
#include "kernels/cpu/dispatch.h"
#include "kernels/parallel.h"
#include "sparq/calibrate.h"
#include "sparq/dataset.h"

namespace sparq {

TensorRange MakeRange(const std::string& name, float min, float max, float threshold, bool symmetric,
                      const std::string& method) {
  TensorRange r;
  r.name = name;
  r.min = min;
  r.max = max;
  r.abs_max = std::max(std::fabs(min), std::fabs(max));
  r.threshold = threshold;
  r.method = method;
  if (symmetric) {
    r.is_signed = true;
    r.zero_point = 0;
    r.scale = threshold > 0.0f ? threshold / 127.0f : 1.0f;
    return r;
  }
  // Asymmetric uint8: the range is [min, max] clipped to ±threshold, and it
  // always includes 0 so that zero (padding, ReLU) is exact.
  r.is_signed = false;
  float lo = std::min(0.0f, std::max(min, -threshold));
  float hi = std::max(0.0f, std::min(max, threshold));
  r.scale = hi > lo ? (hi - lo) / 255.0f : 1.0f;
  float zp = std::nearbyint(-lo / r.scale);
  r.zero_point = static_cast<int32_t>(std::clamp(zp, 0.0f, 255.0f));
  return r;
}

namespace {

// Min, max and |x| histogram of one tensor over all batches.
using Observer = TensorObservation;

constexpr int64_t kChunk = 1 << 16;

// The error for a NaN or an infinity in activation `name`, at the first one.
Status NonFinite(const std::string& name, const float* x) {
  int64_t i = 0;
  while (std::isfinite(x[i])) ++i;
  return Status::InvalidArgument("activation '" + name + "' holds " + std::to_string(x[i]) + " at flat index " +
                                 std::to_string(i) + " (NaN/Inf: check the calibration data and preprocessing)");
}

// NonFinite for a tensor that may live on `device`'s device (copied to the
// host to find the first NaN / infinity: an error path only).
Status NonFiniteOf(const std::string& name, const Tensor& t, BackendContext* device) {
  if (t.device() == Device{}) return NonFinite(name, t.data<float>());
  if (device == nullptr) return Status::Internal("activation '" + name + "' is on " + t.device().ToString());
  SPARQ_ASSIGN_OR_RETURN(Tensor host, CopyTensorToHost(*device, t));
  return NonFinite(name, host.data<float>());
}

// Folds `t` into `obs`. The batch max sets the histogram range first, then
// chunks are binned in parallel into private histograms that are summed
// (integer counts: the result does not depend on the thread count). Both
// passes run on the dispatch table's rows (minmax_f32, abs_histogram_f32):
// an infinity shows in the range, a NaN in the histogram pass's count, so
// the data is read twice, not three times. `zeros` more values 0 are counted
// besides t's (a zero Pad folded away: its output is its input and zeros).
// `*non_finite` (optional) is set when the error is a NaN or an infinity.
// A tensor on a device (not the host) is reduced there by `device`'s
// MinMaxF32 / AbsHistogramF32 (BackendContext: the same results as the two
// host passes below), so only the bounds and the counts come back.
Status Observe(const std::string& name, const Tensor& t, Observer& obs, ThreadPool* pool, int64_t zeros = 0,
               bool* non_finite = nullptr, BackendContext* device = nullptr) {
  const int64_t n = t.numel();
  if (n == 0) return Status::OK();
  const bool on_device = t.device() != Device{};
  if (on_device && device == nullptr) return Status::Internal("activation '" + name + "' is on " + t.device().ToString());
  const float* x = on_device ? nullptr : t.data<float>();
  float lo = std::numeric_limits<float>::infinity(), hi = -lo;
  if (on_device) {
    SPARQ_RETURN_IF_ERROR(device->MinMaxF32(t, &lo, &hi).WithContext("activation '" + name + "'"));
  } else {
    const MinMaxF32Fn minmax = SelectCpuKernel(CpuOp::kMinMaxF32).get<MinMaxF32Fn>();
    const int64_t chunks = (n + kChunk - 1) / kChunk;
    std::vector<float> cmin(chunks), cmax(chunks);
    ParallelFor(pool, chunks, 1, [&](int64_t b, int64_t e) {
      for (int64_t c = b; c < e; ++c) {
        const int64_t begin = c * kChunk, len = std::min(n, begin + kChunk) - begin;
        float clo = std::numeric_limits<float>::infinity(), chi = -clo;
        minmax(x + begin, len, &clo, &chi);  // NaN ignored
        cmin[c] = clo;
        cmax[c] = chi;
      }
    });
    for (int64_t c = 0; c < chunks; ++c) lo = std::min(lo, cmin[c]), hi = std::max(hi, cmax[c]);
  }
  // All NaN leaves the bounds at +-inf as well: the scan below names the first NaN or infinity.
  if (!std::isfinite(lo) || !std::isfinite(hi)) {
    if (non_finite) *non_finite = true;
    return NonFiniteOf(name, t, device);
  }
  if (zeros > 0) lo = 0.0f < lo ? 0.0f : lo, hi = 0.0f > hi ? 0.0f : hi;
  obs.hist.Cover(std::max(std::fabs(lo), std::fabs(hi)));
  std::vector<int64_t> counts(obs.hist.counts().size(), 0);
  int64_t nans = 0;
  if (on_device) {
    // Range 0 (all zeros so far): scale 0 puts every non-NaN value in bin 0,
    // as the host's count below does.
    const double scale = obs.hist.range() == 0.0 ? 0.0 : obs.hist.bins() / obs.hist.range();
    SPARQ_ASSIGN_OR_RETURN(nans, device->AbsHistogramF32(t, scale, obs.hist.bins() - 1, counts.data()));
  } else if (obs.hist.range() == 0.0) {  // all zeros so far: only the NaNs to count
    for (int64_t i = 0; i < n; ++i) nans += std::isnan(x[i]);
    counts[0] = n - nans;
  } else {
    std::mutex mu;
    const double scale = obs.hist.bins() / obs.hist.range();
    const int64_t last = obs.hist.bins() - 1;
    const AbsHistogramF32Fn histogram = SelectCpuKernel(CpuOp::kAbsHistogramF32).get<AbsHistogramF32Fn>();
    const int64_t chunks = (n + kChunk - 1) / kChunk;
    ParallelFor(pool, chunks, 1, [&](int64_t b, int64_t e) {
      std::vector<int64_t> local(counts.size(), 0);
      const int64_t begin = b * kChunk, end = std::min(n, e * kChunk);
      const int64_t local_nans = histogram(x + begin, end - begin, scale, last, local.data());
      std::lock_guard<std::mutex> lock(mu);
      for (size_t k = 0; k < local.size(); ++k) counts[k] += local[k];
      nans += local_nans;
    });
  }
  if (nans > 0) {
    if (non_finite) *non_finite = true;
    return NonFiniteOf(name, t, device);
  }
  counts[0] += zeros;
  obs.min = std::min(obs.min, lo);
  obs.max = std::max(obs.max, hi);
  obs.hist.AddCounts(counts);
  return Status::OK();
}

// Values computed from weights alone (Constant, Shape chains) are not activations.
std::set<std::string> ActivationNames(const Model& model) {
  const Graph& g = model.graph;
  std::set<std::string> dynamic;
  std::set<std::string> out;
  for (const auto& v : g.inputs) {
    dynamic.insert(v.name);
    if (v.dtype == DataType::kFloat32) out.insert(v.name);
  }
  for (const Node& n : g.nodes) {
    bool depends = false;
    for (const auto& in : n.inputs) depends |= dynamic.count(in) > 0;
    if (n.HasSubgraphs())  // an If on a shape whose branches read the run's inputs
      for (const auto& in : n.ImplicitInputs()) depends |= dynamic.count(in) > 0;
    if (!depends || n.op_type == "Shape" || n.op_type == "Size") continue;
    for (const auto& o : n.outputs)
      if (!o.empty()) {
        dynamic.insert(o);
        out.insert(o);
      }
  }
  return out;
}

// method auto: every tensor's candidates (max, KL, percentile, MSE), then the
// one whose quantization least disturbs its consumers' outputs on the first
// batch. Each range's method says which won ("auto:kl").
Status ChooseAuto(const Model& model, const TensorMap& batch, const std::vector<TensorObservation>& items,
                  const CalibrationOptions& options, CalibrationTable* table, ThreadPool* pool) {
  std::vector<AutoTensor> found(items.size());
  ParallelFor(pool, static_cast<int64_t>(items.size()), 1, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      const Observer& obs = items[i];
      const double max_abs = std::max(std::fabs(obs.min), std::fabs(obs.max));
      AutoTensor& t = found[i];
      t.min = obs.min;
      t.max = obs.max;
      for (const CalibrationMethodInfo& method_info : CalibrationMethods()) {
        if (method_info.threshold == nullptr) continue;
        const CalibrationMethod method = method_info.method;
        const double value = method_info.threshold(obs.hist, max_abs, options);
        const float th = static_cast<float>(std::min(value, max_abs));
        bool dup = th <= 0.0f;
        for (const auto& c : t.candidates) dup |= c.threshold == th;
        if (!dup) t.candidates.push_back({method, th});
      }
    }
  });
  std::map<std::string, AutoTensor> by_name;
  for (size_t i = 0; i < items.size(); ++i) by_name[items[i].name] = found[i];
  SPARQ_ASSIGN_OR_RETURN(auto chosen, ChooseByLayerError(model, batch, by_name, options.symmetric, options.threads));
  for (size_t i = 0; i < items.size(); ++i) {
    const AutoTensor& t = found[i];
    if (t.candidates.empty()) continue;
    auto it = chosen.find(items[i].name);
    const ThresholdCandidate& c = t.candidates[it == chosen.end() ? 0 : it->second];
    table->tensors[i] = MakeRange(items[i].name, t.min, t.max, c.threshold, options.symmetric,
                                  std::string("auto:") + CalibrationMethodName(c.method));
  }
  return Status::OK();
}

// Runs `model` over every batch into one observer per tensor; keeps the
// first batch in `first_batch` when it is not null (method auto). With
// options.skip_non_finite, a tensor holding NaN or an infinity is dropped
// and named in `skipped` (sorted).
StatusOr<PartialCalibration> ObserveBatches(const Model& model, const BatchFn& next_batch,
                                            const CalibrationOptions& options, TensorMap* first_batch,
                                            std::vector<std::string>* skipped = nullptr) {
  if (options.bins < 128 || options.bins % 2 != 0) {
    return Status::InvalidArgument("calibration bins must be an even number >= 128, got " + std::to_string(options.bins));
  }
  const std::set<std::string> activations = ActivationNames(model);
  BatchSource samples_of;  // counts samples along each input's sample axis
  samples_of.set_sample_axes(SampleAxes(model.graph));
  std::set<std::string> wanted = activations;
  ExecutorOptions exec_options{options.threads};
  exec_options.backend = options.backend;
  exec_options.profile = GraphProfile::kFoldedConstants;  // weights as Constant nodes still reach the fast kernels
  if (!options.tensors.empty()) {
    std::set<std::string> chosen;
    for (const auto& name : options.tensors) {
      if (!activations.count(name)) return Status::NotFound("no float activation named '" + name + "' to calibrate");
      chosen.insert(name);
    }
    wanted = std::move(chosen);
    // Only these are observed: everything else fuses and folds as in
    // deployment (Conv + Clip one node, Pads into Convs), with the same bits
    // for the kept values, fewer passes over memory and fewer live tensors.
    // An observed zero Pad's output may fold into its Conv too: the executor
    // then keeps the Pad's input and says so (Executor::ValueAliases), and
    // the output is observed as that input and the padding's zeros.
    exec_options.profile = GraphProfile::kObserveKept;
    exec_options.keep_values.assign(wanted.begin(), wanted.end());
    exec_options.keep_values_as_aliases = true;
  }
  SPARQ_ASSIGN_OR_RETURN(auto exec, Executor::Create(model, exec_options));
  std::map<std::string, std::vector<ValueAlias>> zero_pads;  // by source
  for (const ValueAlias& alias : exec->ValueAliases())
    if (wanted.count(alias.value)) zero_pads[alias.source].push_back(alias);
  ThreadPool& pool = *SharedThreadPool(options.threads);  // the process's pool for this thread count
  std::map<std::string, Observer> observers;
  auto observer = [&](const std::string& name) -> Observer& {
    auto [it, added] = observers.try_emplace(name);
    if (added) it->second.name = name, it->second.hist = AbsHistogram(options.bins);
    return it->second;
  };
  std::set<std::string> non_finite;  // skipped tensors (options.skip_non_finite)
  // Observe, or with skip_non_finite drop a tensor at its first NaN / infinity.
  auto observe_one = [&](const std::string& name, const Tensor& t, int64_t zeros, BackendContext* device) -> Status {
    if (non_finite.count(name)) return Status::OK();
    bool bad = false;
    Status s = Observe(name, t, observer(name), &pool, zeros, &bad, device);
    if (s.ok() || !bad || !options.skip_non_finite) return s;
    non_finite.insert(name);
    observers.erase(name);
    return Status::OK();
  };
  auto observe = [&](const std::string& name, const Tensor& t, BackendContext* device = nullptr) -> Status {
    if (t.dtype() != DataType::kFloat32) return Status::OK();
    if (wanted.count(name)) {
      SPARQ_RETURN_IF_ERROR(observe_one(name, t, 0, device));
    }
    if (auto read_by = zero_pads.find(name); read_by != zero_pads.end()) {
      for (const ValueAlias& pad : read_by->second) {
        const int64_t zeros = pad.ZerosAround(t.shape());
        if (zeros < 0) {
          return Status::InvalidArgument("Pad output '" + pad.value + "': " + std::to_string(pad.zero_pads.size()) +
                                         " pads for a rank-" + std::to_string(t.rank()) + " input");
        }
        SPARQ_RETURN_IF_ERROR(observe_one(pad.value, t, zeros, device));
      }
    }
    return Status::OK();
  };
  RunOptions run_options;
  // Outputs of nodes run on a device whose context reduces them there (the
  // CUDA backend): observed in place, only bounds and counts copied back;
  // the rest reach on_node_outputs below as host copies.
  run_options.on_device_node_outputs = [&](const Node& n, const std::vector<Tensor>& outs, BackendContext& device,
                                           std::vector<bool>* consumed) -> Status {
    if (!device.HasCalibrationStats()) return Status::OK();
    for (size_t i = 0; i < outs.size() && i < n.outputs.size(); ++i) {
      if (!outs[i].defined() || outs[i].device() != device.device()) continue;  // on the host: on_node_outputs
      if (!n.outputs[i].empty()) SPARQ_RETURN_IF_ERROR(observe(n.outputs[i], outs[i], &device));
      (*consumed)[i] = true;  // observed (or not wanted): no copy
    }
    return Status::OK();
  };
  run_options.on_node_outputs = [&](const Node& n, const std::vector<Tensor>& outs) -> Status {
    for (size_t i = 0; i < outs.size() && i < n.outputs.size(); ++i)
      if (!n.outputs[i].empty() && outs[i].defined()) SPARQ_RETURN_IF_ERROR(observe(n.outputs[i], outs[i]));
    return Status::OK();
  };

  PartialCalibration partial;
  partial.method = options;
  partial.backend = options.backend;
  partial.requested = options.tensors;
  std::sort(partial.requested.begin(), partial.requested.end());
  int64_t& batches = partial.batches;
  for (;;) {
    TensorMap batch;
    SPARQ_ASSIGN_OR_RETURN(bool more, next_batch(&batch));
    if (!more) break;
    if (batches == 0 && first_batch != nullptr) *first_batch = batch;
    for (const auto& [name, t] : batch) SPARQ_RETURN_IF_ERROR(observe(name, t));
    TensorMap outputs;
    SPARQ_RETURN_IF_ERROR(exec->Run(batch, &outputs, run_options).WithContext("calibration batch " + std::to_string(batches)));
    partial.samples += samples_of.SamplesIn(batch);
    ++batches;
    if (options.progress) {
      CalibrationProgress p;
      p.batches = batches;
      p.samples = partial.samples;
      options.progress(p);
      if (p.cancel) return Status::Cancelled("calibration cancelled by the progress callback after batch " +
                                             std::to_string(batches));
    }
  }
  for (auto& [name, obs] : observers) partial.tensors.push_back(std::move(obs));  // sorted by name
  if (skipped != nullptr) skipped->assign(non_finite.begin(), non_finite.end());
  return partial;
}

// Each tensor's range by partial.method's rule; method auto: max, until
// ChooseAuto picks among the candidates.
StatusOr<CalibrationTable> Thresholds(const PartialCalibration& partial, ThreadPool* pool) {
  const CalibrationMethodOptions& options = partial.method;
  CalibrationTable table;
  table.method = CalibrationMethodName(options.method);
  table.bins = options.bins;
  table.percentile = options.percentile;
  table.symmetric = options.symmetric;
  table.samples = partial.samples;
  const std::vector<TensorObservation>& items = partial.tensors;
  table.tensors.resize(items.size());
  const CalibrationMethodInfo* found = nullptr;
  for (const CalibrationMethodInfo& info : CalibrationMethods())
    if (info.method == options.method) found = &info;
  if (found == nullptr) return Status::InvalidArgument("unknown calibration method");
  const CalibrationMethodInfo& method = *found;
  ParallelFor(pool, static_cast<int64_t>(items.size()), 1, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      const Observer& obs = items[i];
      float threshold = std::max(std::fabs(obs.min), std::fabs(obs.max));
      // kAuto has no rule of its own: max until ChooseAuto below.
      if (method.threshold != nullptr) threshold = static_cast<float>(method.threshold(obs.hist, threshold, options));
      // A bin edge may sit a hair above the observed max: never exceed it.
      threshold = std::min(threshold, std::max(std::fabs(obs.min), std::fabs(obs.max)));
      table.tensors[i] = MakeRange(obs.name, obs.min, obs.max, threshold, options.symmetric, table.method);
    }
  });
  return table;
}

Status RefuseAuto(const CalibrationMethodOptions& options, const char* what) {
  if (options.method != CalibrationMethod::kAuto) return Status::OK();
  return Status::InvalidArgument(std::string(what) + ": method auto cannot be sharded (it reruns each tensor's "
                                 "consumers on the first batch of all the data to compare its candidates): "
                                 "calibrate auto in one process, or shard max, kl, percentile or mse");
}

}  // namespace

StatusOr<PartialCalibration> CalibrateShard(const Model& model, const BatchFn& next_batch,
                                            const CalibrationOptions& options) {
  SPARQ_RETURN_IF_ERROR(RefuseAuto(options, "CalibrateShard"));
  if (options.skip_non_finite) {
    return Status::InvalidArgument("CalibrateShard: skip_non_finite is for Calibrate only (a partial calibration "
                                   "file has no list of skipped tensors)");
  }
  return ObserveBatches(model, next_batch, options, nullptr);
}

StatusOr<CalibrationTable> FinishCalibration(const PartialCalibration& partial, int threads) {
  SPARQ_RETURN_IF_ERROR(RefuseAuto(partial.method, "FinishCalibration"));
  if (partial.batches == 0) return Status::InvalidArgument("calibration got no data batches");
  SPARQ_ASSIGN_OR_RETURN(CalibrationTable table, Thresholds(partial, SharedThreadPool(threads)));
  table.folded_inputs = partial.folded_inputs;
  return table;
}

StatusOr<CalibrationTable> Calibrate(const Model& model, const BatchFn& next_batch, const CalibrationOptions& options) {
  TensorMap first_batch;  // method auto compares candidates on it
  const bool is_auto = options.method == CalibrationMethod::kAuto;
  std::vector<std::string> skipped;
  SPARQ_ASSIGN_OR_RETURN(PartialCalibration partial,
                         ObserveBatches(model, next_batch, options, is_auto ? &first_batch : nullptr, &skipped));
  if (partial.batches == 0) return Status::InvalidArgument("calibration got no data batches");
  ThreadPool& pool = *SharedThreadPool(options.threads);
  SPARQ_ASSIGN_OR_RETURN(CalibrationTable table, Thresholds(partial, &pool));
  table.skipped = std::move(skipped);
  if (is_auto) SPARQ_RETURN_IF_ERROR(ChooseAuto(model, first_batch, partial.tensors, options, &table, &pool));
  return table;
}

}  // namespace sparq
