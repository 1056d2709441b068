// AdaRound for INT8 weights (sparq/adaround.h): the per-matrix fit
// (quant/adaround.h) and the pass that measures each layer's input Gram
// matrix on calibration data and fits every Conv / MatMul / Gemm.
//
// Conv inputs enter H as im2col rows, one H per group, in the order of the
// weight's GEMM view [O, C/group * k1*..*kR]:
//
//   row of output position o:  [ x[c0, o*s - p + t0] .. x[c0, o*s - p + t_last] | x[c1, ..] | .. ]
//
// (taps outside the image read 0), at most max_positions_per_sample
// positions per sample, evenly spread.
#include "quant/adaround.h"

#include <algorithm>
#include <cmath>

#include "kernels/backend.h"  // SharedThreadPool
#include "kernels/cpu/dispatch.h"
#include "kernels/ref/conv.h"
#include "kernels/ref/nn_common.h"  // ReadWindowAttributes
#include "quant/adam.h"
#include "quant/gptq.h"    // AddToGram, InputStatistics
#include "quant/layer_inputs.h"  // ForEachActivation
#include "quant/passes.h"  // QuantizableLayer, NodeKey, PerAxisWeights

namespace sparq {

namespace {

constexpr float kQmin = -127.0f, kQmax = 127.0f;
// Below this many columns H is applied by a plain loop (depthwise Conv: 9 or 25).
constexpr int64_t kGemmMinCols = 32;
// MatMul / Gemm inputs of at most cols / 4 rows in all: H applied as X^T X
// from the rows (2 n cols multiply-adds per weight row instead of cols^2).
constexpr int64_t kFactorRowsDivisor = 4;

float Sigmoid(float v) { return 1.0f / (1.0f + std::exp(-v)); }

}  // namespace

float AdaRoundH(float v) {
  return std::clamp(Sigmoid(v) * (kAdaRoundZeta - kAdaRoundGamma) + kAdaRoundGamma, 0.0f, 1.0f);
}

StatusOr<AdaRoundProblem> AdaRoundProblem::Create(std::vector<float> w, std::vector<float> scales,
                                                  std::vector<float> h, int64_t rows, int64_t cols) {
  if (rows <= 0 || cols <= 0 || w.size() != static_cast<size_t>(rows * cols) ||
      scales.size() != static_cast<size_t>(rows) || h.size() != static_cast<size_t>(cols * cols)) {
    return Status::InvalidArgument("adaround: a weight of " + std::to_string(w.size()) + " values, " +
                                   std::to_string(scales.size()) + " scales and H of " + std::to_string(h.size()) +
                                   " values for " + std::to_string(rows) + "x" + std::to_string(cols));
  }
  for (float s : scales)
    if (!(s > 0.0f) || !std::isfinite(s)) return Status::InvalidArgument("adaround: scale " + std::to_string(s));
  for (float v : h)
    if (!std::isfinite(v)) return Status::InvalidArgument("adaround: H holds NaN or Inf");
  AdaRoundProblem p;
  p.rows_ = rows;
  p.cols_ = cols;
  p.w_ = std::move(w);
  p.scales_ = std::move(scales);
  p.h_ = std::move(h);
  p.floor_.resize(p.w_.size());
  for (int64_t i = 0; i < rows * cols; ++i) p.floor_[i] = std::floor(p.w_[i] / p.scales_[i / cols]);
  p.use_gemm_ = cols >= kGemmMinCols;
  if (p.use_gemm_) {
    // H is symmetric: the GEMM's y = x W^T with W = H is x H.
    SPARQ_ASSIGN_OR_RETURN(p.packed_h_,
                           PackGemmF32(p.h_.data(), cols, cols, PreferredGemmF32Format(ActiveIsa()), /*strips=*/true));
  }
  return p;
}

StatusOr<AdaRoundProblem> AdaRoundProblem::CreateFromRows(std::vector<float> w, std::vector<float> scales,
                                                          const std::vector<float>& x, int64_t n, int64_t rows,
                                                          int64_t cols) {
  if (n <= 0 || x.size() != static_cast<size_t>(n * cols)) {
    return Status::InvalidArgument("adaround: " + std::to_string(x.size()) + " input values for " +
                                   std::to_string(n) + " rows of " + std::to_string(cols));
  }
  for (float v : x)
    if (!std::isfinite(v)) return Status::InvalidArgument("adaround: input rows hold NaN or Inf");
  // A 1x1 stand-in H passes Create's checks; TimesH uses the factors.
  SPARQ_ASSIGN_OR_RETURN(AdaRoundProblem p,
                         Create(std::move(w), std::move(scales), std::vector<float>(static_cast<size_t>(cols * cols)),
                                rows, cols));
  p.use_gemm_ = false;
  p.h_.clear();
  p.packed_h_ = PackedGemmF32{};
  p.factor_rows_ = n;
  std::vector<float> xt(static_cast<size_t>(cols * n));
  for (int64_t r = 0; r < n; ++r)
    for (int64_t c = 0; c < cols; ++c) xt[c * n + r] = x[r * cols + c];
  const PackedFormat format = PreferredGemmF32Format(ActiveIsa());
  SPARQ_ASSIGN_OR_RETURN(p.packed_x_, PackGemmF32(x.data(), n, cols, format, /*strips=*/true));
  SPARQ_ASSIGN_OR_RETURN(p.packed_xt_, PackGemmF32(xt.data(), cols, n, format, /*strips=*/true));
  return p;
}

namespace {

// y [m, w.rows] = x [m, w.k] w^T on the FP32 GEMM, one thread.
Status Gemm(const PackedGemmF32& w, const float* x, int64_t m, float* y) {
  GemmF32Args args;
  args.w = &w;
  args.m = m;
  args.x = x;
  args.ld_x = w.k;
  args.y = y;
  args.ld_y = w.rows;
  args.pool = nullptr;  // one thread per problem: the same bits for any thread count
  return RunGemmF32(args);
}

}  // namespace

Status AdaRoundProblem::TimesH(const float* e, float* y) const {
  if (factor_rows_ > 0) {  // e H = (e X^T) X
    scratch_t_.resize(static_cast<size_t>(rows_ * factor_rows_));
    SPARQ_RETURN_IF_ERROR(Gemm(packed_x_, e, rows_, scratch_t_.data()));
    return Gemm(packed_xt_, scratch_t_.data(), rows_, y);
  }
  if (!use_gemm_) {
    for (int64_t r = 0; r < rows_; ++r)
      for (int64_t j = 0; j < cols_; ++j) {
        float acc = 0.0f;
        for (int64_t k = 0; k < cols_; ++k) acc += e[r * cols_ + k] * h_[k * cols_ + j];
        y[r * cols_ + j] = acc;
      }
    return Status::OK();
  }
  return Gemm(packed_h_, e, rows_, y);  // H is symmetric: e H^T = e H
}

std::vector<float> AdaRoundProblem::InitialV() const {
  std::vector<float> v(w_.size());
  for (size_t i = 0; i < v.size(); ++i) {
    const float frac = w_[i] / scales_[i / cols_] - floor_[i];
    const double p = (static_cast<double>(frac) - kAdaRoundGamma) / (kAdaRoundZeta - kAdaRoundGamma);
    v[i] = static_cast<float>(std::log(p / (1.0 - p)));
  }
  return v;
}

StatusOr<double> AdaRoundProblem::Loss(const std::vector<float>& v, double beta, double lambda,
                                       std::vector<float>* grad) const {
  double loss = 0.0;
  SPARQ_RETURN_IF_ERROR(Evaluate(v, beta, lambda, grad, &loss));
  return loss;
}

Status AdaRoundProblem::Evaluate(const std::vector<float>& v, double beta, double lambda, std::vector<float>* grad,
                                 double* value) const {
  const int64_t n = rows_ * cols_;
  if (v.size() != static_cast<size_t>(n)) return Status::InvalidArgument("adaround: V of another size");
  std::vector<float>& e = scratch_e_;
  std::vector<float>& y = scratch_y_;
  std::vector<float>& sig = scratch_sig_;
  e.resize(static_cast<size_t>(n));
  y.resize(static_cast<size_t>(n));
  sig.resize(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    sig[i] = Sigmoid(v[i]);
    const float h = std::clamp(sig[i] * (kAdaRoundZeta - kAdaRoundGamma) + kAdaRoundGamma, 0.0f, 1.0f);
    e[i] = scales_[i / cols_] * std::clamp(floor_[i] + h, kQmin, kQmax) - w_[i];
  }
  SPARQ_RETURN_IF_ERROR(TimesH(e.data(), y.data()));
  if (value) {
    double loss = 0.0;
    for (int64_t i = 0; i < n; ++i) loss += static_cast<double>(e[i]) * y[i];
    if (lambda > 0.0) {
      for (int64_t i = 0; i < n; ++i) {
        const float h = std::clamp(sig[i] * (kAdaRoundZeta - kAdaRoundGamma) + kAdaRoundGamma, 0.0f, 1.0f);
        loss += lambda * (1.0 - std::pow(static_cast<double>(std::fabs(2.0f * h - 1.0f)), beta));
      }
    }
    *value = loss;
  }
  if (!grad) return Status::OK();
  grad->resize(static_cast<size_t>(n));
  const float b = static_cast<float>(beta), lam = static_cast<float>(lambda);
  for (int64_t i = 0; i < n; ++i) {
    const float raw = sig[i] * (kAdaRoundZeta - kAdaRoundGamma) + kAdaRoundGamma;
    if (raw <= 0.0f || raw >= 1.0f) {  // h clipped: no gradient through it
      (*grad)[i] = 0.0f;
      continue;
    }
    const float q = floor_[i] + raw;
    float dh = (q >= kQmin && q <= kQmax) ? 2.0f * y[i] * scales_[i / cols_] : 0.0f;
    const float a = std::fabs(2.0f * raw - 1.0f);
    if (lam > 0.0f && a > 0.0f) {
      // d/dh (1 - |2h - 1|^beta) = -2 beta |2h - 1|^(beta - 1) sign(2h - 1)
      const float d = 2.0f * b * std::pow(a, b - 1.0f);
      dh += lam * (2.0f * raw - 1.0f > 0.0f ? -d : d);
    }
    (*grad)[i] = dh * sig[i] * (1.0f - sig[i]) * (kAdaRoundZeta - kAdaRoundGamma);
  }
  return Status::OK();
}

StatusOr<double> AdaRoundProblem::OutputError(const std::vector<int8_t>& codes) const {
  const int64_t n = rows_ * cols_;
  if (codes.size() != static_cast<size_t>(n)) return Status::InvalidArgument("adaround: codes of another size");
  std::vector<float> e(static_cast<size_t>(n)), y(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) e[i] = scales_[i / cols_] * static_cast<float>(codes[i]) - w_[i];
  SPARQ_RETURN_IF_ERROR(TimesH(e.data(), y.data()));
  double error = 0.0;
  for (int64_t i = 0; i < n; ++i) error += static_cast<double>(e[i]) * y[i];
  return error;
}

std::vector<int8_t> AdaRoundProblem::NearestCodes() const {
  std::vector<int8_t> c(w_.size());
  for (size_t i = 0; i < c.size(); ++i)
    c[i] = static_cast<int8_t>(std::clamp(std::nearbyint(w_[i] / scales_[i / cols_]), kQmin, kQmax));
  return c;
}

std::vector<int8_t> AdaRoundProblem::CodesOf(const std::vector<float>& v) const {
  std::vector<int8_t> c(w_.size());
  for (size_t i = 0; i < c.size(); ++i) {
    const float up = w_[i] != 0.0f && AdaRoundH(v[i]) >= 0.5f ? 1.0f : 0.0f;
    c[i] = static_cast<int8_t>(std::clamp(floor_[i] + up, kQmin, kQmax));
  }
  return c;
}

StatusOr<std::vector<int8_t>> AdaRoundProblem::Solve(const AdaRoundOptions& options) const {
  std::vector<float> v = InitialV(), grad;
  std::vector<uint8_t> free(w_.size());
  for (size_t i = 0; i < w_.size(); ++i) free[i] = w_[i] != 0.0f;  // exact zeros (pruned) stay zero
  AdamOptions adam;
  adam.learning_rate = options.learning_rate;
  AdamState state(static_cast<int64_t>(v.size()), adam);
  const int64_t total = options.iterations;
  const int64_t warm = static_cast<int64_t>(options.warmup * static_cast<double>(total));
  for (int64_t t = 0; t < total; ++t) {
    double lambda = 0.0, beta = options.beta_start;
    if (t >= warm) {
      const double rel = static_cast<double>(t - warm) / static_cast<double>(std::max<int64_t>(1, total - warm));
      beta = options.beta_end + (options.beta_start - options.beta_end) * std::max(0.0, 1.0 - rel);
      lambda = options.regularization;
    }
    SPARQ_RETURN_IF_ERROR(Evaluate(v, beta, lambda, &grad, nullptr));
    state.Step(v.data(), grad.data(), free.data());
  }
  return CodesOf(v);
}

// ---------------------------------------------------------------------------
// The model pass.

namespace {

Status CheckOptions(const AdaRoundOptions& o, const QuantizeOptions& q) {
  auto bad = [](const std::string& field, const std::string& rule, double value) {
    return Status::InvalidArgument("adaround: " + field + " must be " + rule + ", got " + std::to_string(value));
  };
  if (o.iterations < 1) return bad("iterations", ">= 1", o.iterations);
  if (!(o.regularization >= 0.0) || !std::isfinite(o.regularization)) return bad("regularization", ">= 0", o.regularization);
  if (!(o.warmup >= 0.0 && o.warmup < 1.0)) return bad("warmup", "in [0, 1)", o.warmup);
  if (!(o.beta_end > 0.0) || !std::isfinite(o.beta_end)) return bad("beta_end", "> 0", o.beta_end);
  if (!(o.beta_start >= o.beta_end) || !std::isfinite(o.beta_start)) return bad("beta_start", ">= beta_end", o.beta_start);
  if (!(o.learning_rate > 0.0) || !std::isfinite(o.learning_rate)) return bad("learning_rate", "> 0", o.learning_rate);
  if (o.max_positions_per_sample < 1) return bad("max_positions_per_sample", ">= 1", static_cast<double>(o.max_positions_per_sample));
  if (o.threads < 0) return bad("threads", ">= 0", o.threads);
  if (q.fp8 || q.dynamic || q.format != QuantFormat::kQDQ || q.precision != Precision::kINT8) {
    return Status::InvalidArgument("adaround: rounds static INT8 weights in QDQ form only (not fp8, dynamic, "
                                   "QOperator or a default precision other than int8)");
  }
  return Status::OK();
}

// Evenly spread `count` of `total` positions (all when total <= count).
std::vector<int64_t> SpreadPositions(int64_t total, int64_t count) {
  std::vector<int64_t> out;
  const int64_t n = std::min(total, count);
  out.reserve(static_cast<size_t>(n));
  for (int64_t k = 0; k < n; ++k) out.push_back(total <= count ? k : k * total / count);
  return out;
}

// A layer AdaRound fits.
struct Target {
  std::string key;
  Node node;
  WeightedLayer layer;
  Tensor w;                 // float32, as stored
  QuantizedWeight nearest;  // QuantizeWeightSymmetric's (the scales AdaRound keeps)
  std::vector<InputStatistics> conv;  // Conv: H per group; MatMul / Gemm: in `shared`
};

// Adds the im2col rows of one batch of a Conv's input to its per-group H.
Status AddConvRows(Target& t, const Tensor& x, int64_t max_positions, ThreadPool* pool) {
  const Node& node = t.node;
  ConvParams p;
  p.group = node.attr_int("group", 1);
  AutoPad auto_pad;
  SPARQ_RETURN_IF_ERROR(ReadWindowAttributes(node, &p.window, &auto_pad));
  Shape y_shape;
  SPARQ_RETURN_IF_ERROR(PrepareConv(x.shape(), t.layer.weight_shape, auto_pad, &p, &y_shape));
  const size_t R = x.rank() - 2;
  const int64_t N = x.dim(0), C = x.dim(1), Cg = C / p.group;
  const Shape in(x.shape().begin() + 2, x.shape().end()), out(y_shape.begin() + 2, y_shape.end());
  const int64_t in_size = NumElements(in), out_size = NumElements(out), taps = NumElements(p.window.kernel);
  const int64_t K = Cg * taps;
  if (K != t.layer.cols) {
    return Status::Internal("im2col width " + std::to_string(K) + " != weight cols " + std::to_string(t.layer.cols));
  }
  const std::vector<int64_t> positions = SpreadPositions(out_size, max_positions);
  const int64_t P = static_cast<int64_t>(positions.size());
  // Flat input offset of each (position, tap); -1 = padding.
  std::vector<int64_t> offset(static_cast<size_t>(P * taps));
  std::vector<int64_t> o(R), tap(R), in_stride(R, 1);
  for (size_t d = R; d-- > 1;) in_stride[d - 1] = in_stride[d] * in[d];
  for (int64_t pi = 0; pi < P; ++pi) {
    int64_t rest = positions[pi];
    for (size_t d = R; d-- > 0;) o[d] = rest % out[d], rest /= out[d];
    for (int64_t k = 0; k < taps; ++k) {
      int64_t tr = k;
      for (size_t d = R; d-- > 0;) tap[d] = tr % p.window.kernel[d], tr /= p.window.kernel[d];
      int64_t flat = 0;
      for (size_t d = 0; d < R && flat >= 0; ++d) {
        const int64_t i = o[d] * p.window.strides[d] - p.window.pads[d] + tap[d] * p.window.dilations[d];
        flat = (i < 0 || i >= in[d]) ? -1 : flat + i * in_stride[d];
      }
      offset[pi * taps + k] = flat;
    }
  }
  if (t.conv.empty()) {
    t.conv.resize(static_cast<size_t>(p.group));
    for (InputStatistics& s : t.conv) {
      s.k = K;
      s.gram.assign(static_cast<size_t>(K * K), 0.0);
    }
  }
  const float* xd = x.data<float>();
  std::vector<float> rows(static_cast<size_t>(N * P * K));
  for (int64_t g = 0; g < p.group; ++g) {
    for (int64_t n = 0; n < N; ++n) {
      const float* xg = xd + (n * C + g * Cg) * in_size;
      for (int64_t pi = 0; pi < P; ++pi) {
        float* row = rows.data() + (n * P + pi) * K;
        const int64_t* off = offset.data() + pi * taps;
        for (int64_t c = 0; c < Cg; ++c)
          for (int64_t k = 0; k < taps; ++k) row[c * taps + k] = off[k] < 0 ? 0.0f : xg[c * in_size + off[k]];
      }
    }
    SPARQ_RETURN_IF_ERROR(AddToGram(rows.data(), N * P, K, &t.conv[g].gram, nullptr, pool));
    t.conv[g].rows += N * P;
  }
  return Status::OK();
}

// The GEMM view [rows, cols] of a stored weight (transposed when stored [in, out]).
std::vector<float> GemmView(const Target& t) {
  const float* w = t.w.data<float>();
  const int64_t rows = t.layer.rows, cols = t.layer.cols;  // cols per group (Conv), the stored [O, cols]
  if (!t.layer.transposed_view) return std::vector<float>(w, w + rows * cols);
  std::vector<float> v(static_cast<size_t>(rows * cols));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) v[r * cols + c] = w[c * rows + r];
  return v;
}

// One group of one layer.
struct Job {
  size_t target;
  int64_t group;
  const InputStatistics* x;
  const std::vector<float>* rows = nullptr;  // X itself when kept (few rows)
};

}  // namespace

StatusOr<AdaRoundResult> MeasureAdaRound(const Model& input, const BatchFn& batches, const QuantizeOptions& options,
                                         const AdaRoundOptions& adaround) {
  SPARQ_RETURN_IF_ERROR(CheckOptions(adaround, options));
  Model probe = input;  // shares the weights; folding replaces them
  if (options.fold_batchnorm) SPARQ_RETURN_IF_ERROR(FoldBatchNorm(probe).status().WithContext("adaround"));
  const bool per_axis = PerAxisWeights(probe, options);
  const Graph& g = probe.graph;

  std::vector<Target> targets;
  std::map<std::string, std::vector<size_t>> readers;  // activation -> targets
  for (const Node& n : g.nodes) {
    std::optional<WeightedLayer> layer = QuantizableLayer(g, n);
    if (!layer || layer->rows <= 0 || layer->cols <= 0) continue;
    Target t;
    t.key = NodeKey(n);
    t.node = n;
    t.layer = *layer;
    t.w = g.FindWeight(n.inputs[1])->ToFloat32();
    t.nearest = QuantizeWeightSymmetric(t.w, layer->weight_axis(), per_axis);
    readers[n.inputs[0]].push_back(targets.size());
    targets.push_back(std::move(t));
  }
  AdaRoundResult result;
  if (targets.empty()) return result;

  // One pass: per Conv its groups' H, per MatMul / Gemm input one H shared by its readers.
  const int threads = adaround.threads;
  ThreadPool* pool = SharedThreadPool(threads);
  std::map<std::string, InputStatistics> shared;
  std::map<std::string, std::vector<float>> kept_rows;  // MatMul / Gemm inputs of few rows
  auto observe = [&](const std::string& name, const Tensor& x) -> Status {
    auto it = readers.find(name);
    if (it == readers.end() || x.dtype() != DataType::kFloat32) return Status::OK();
    const Target* matmul = nullptr;  // the first MatMul / Gemm reader: its rows go in once for all
    for (size_t i : it->second) {
      Target& t = targets[i];
      Status st;
      if (t.layer.op_type == "Conv") {
        st = AddConvRows(t, x, adaround.max_positions_per_sample, pool);
      } else if (x.rank() == 0 || x.dim(x.rank() - 1) != t.layer.cols) {
        st = Status::InvalidArgument("input has shape " + ShapeToString(x.shape()) + ", expected a last axis of " +
                                     std::to_string(t.layer.cols));
      } else if (matmul == nullptr) {
        matmul = &t;
        const int64_t k = t.layer.cols, rows = x.numel() / k;
        InputStatistics& s = shared[name];
        if (s.k == 0) s.k = k, s.gram.assign(static_cast<size_t>(k * k), 0.0);
        st = AddToGram(x.data<float>(), rows, k, &s.gram, nullptr, pool);
        s.rows += rows;
        // Few rows (a classifier head): kept, so the fit multiplies by X^T X without forming it.
        std::vector<float>& kept = kept_rows[name];
        if (s.rows <= k / kFactorRowsDivisor) {
          kept.insert(kept.end(), x.data<float>(), x.data<float>() + rows * k);
        } else {
          std::vector<float>().swap(kept);
        }
      }
      if (!st.ok()) return Status::InvalidArgument("adaround: " + t.node.Describe() + ", input '" + name + "': " + st.message());
    }
    return Status::OK();
  };
  SPARQ_RETURN_IF_ERROR(ForEachActivation(probe, batches, threads, "adaround", observe));

  // The fits: one job per (layer, group), each on one thread.
  std::vector<Job> jobs;
  for (size_t i = 0; i < targets.size(); ++i) {
    const Target& t = targets[i];
    if (t.layer.op_type == "Conv") {
      for (size_t gi = 0; gi < t.conv.size(); ++gi)
        if (t.conv[gi].rows > 0) jobs.push_back({i, static_cast<int64_t>(gi), &t.conv[gi]});
    } else if (auto s = shared.find(t.node.inputs[0]); s != shared.end() && s->second.rows > 0) {
      auto kept = kept_rows.find(t.node.inputs[0]);
      jobs.push_back({i, 0, &s->second, kept != kept_rows.end() && !kept->second.empty() ? &kept->second : nullptr});
    }
  }
  struct Fit {
    std::vector<int8_t> nearest, codes;
    double error_nearest = 0.0, error_adaround = 0.0;
  };
  std::vector<StatusOr<Fit>> fits(jobs.size(), Status::Internal("adaround: not run"));
  std::vector<std::vector<float>> views(targets.size());
  for (const Job& j : jobs)
    if (views[j.target].empty()) views[j.target] = GemmView(targets[j.target]);
  ParallelFor(pool, static_cast<int64_t>(jobs.size()), 1, [&](int64_t b, int64_t e) {
    for (int64_t ji = b; ji < e; ++ji) {
      const Job& j = jobs[ji];
      const Target& t = targets[j.target];
      const int64_t group_rows = t.layer.rows / t.layer.groups, cols = t.layer.cols;
      const int64_t r0 = j.group * group_rows;
      const std::vector<float>& view = views[j.target];
      std::vector<float> w(view.begin() + r0 * cols, view.begin() + (r0 + group_rows) * cols);
      std::vector<float> s(static_cast<size_t>(group_rows));
      for (int64_t r = 0; r < group_rows; ++r)
        s[r] = t.nearest.scales.numel() == 1 ? t.nearest.scales.data<float>()[0] : t.nearest.scales.data<float>()[r0 + r];
      const double inv_n = 1.0 / static_cast<double>(j.x->rows);
      StatusOr<AdaRoundProblem> problem = Status::Internal("adaround: no problem");
      if (j.rows != nullptr) {
        std::vector<float> x(*j.rows);
        const float f = static_cast<float>(std::sqrt(inv_n));
        for (float& v : x) v *= f;
        problem = AdaRoundProblem::CreateFromRows(std::move(w), std::move(s), x, j.x->rows, group_rows, cols);
      } else {
        std::vector<float> h(static_cast<size_t>(cols * cols));
        for (size_t q = 0; q < h.size(); ++q) h[q] = static_cast<float>(j.x->gram[q] * inv_n);
        problem = AdaRoundProblem::Create(std::move(w), std::move(s), std::move(h), group_rows, cols);
      }
      if (!problem.ok()) {
        fits[ji] = problem.status();
        continue;
      }
      Fit f;
      f.nearest = problem->NearestCodes();
      auto codes = problem->Solve(adaround);
      auto en = problem->OutputError(f.nearest);
      if (!codes.ok() || !en.ok()) {
        fits[ji] = !codes.ok() ? codes.status() : en.status();
        continue;
      }
      f.codes = std::move(*codes);
      auto ea = problem->OutputError(f.codes);
      if (!ea.ok()) {
        fits[ji] = ea.status();
        continue;
      }
      f.error_nearest = *en;
      f.error_adaround = *ea;
      fits[ji] = std::move(f);
    }
  });

  // Per layer: the groups' codes into the stored layout, or nearest where AdaRound did no better.
  std::vector<std::vector<size_t>> jobs_of(targets.size());
  for (size_t ji = 0; ji < jobs.size(); ++ji) jobs_of[jobs[ji].target].push_back(ji);
  for (size_t i = 0; i < targets.size(); ++i) {
    if (jobs_of[i].empty()) continue;
    const Target& t = targets[i];
    AdaRoundLayer row;
    row.layer = t.key;
    row.weights = t.w.numel();
    for (size_t ji : jobs_of[i]) {
      if (!fits[ji].ok()) return fits[ji].status().WithContext("adaround: " + t.node.Describe());
      row.error_nearest += fits[ji]->error_nearest;
      row.error_adaround += fits[ji]->error_adaround;
    }
    row.kept_nearest = !(row.error_adaround < row.error_nearest);
    if (row.kept_nearest) row.error_adaround = row.error_nearest;
    QuantizedWeight q = t.nearest;
    q.values = t.nearest.values.Clone();
    int8_t* out = q.values.data<int8_t>();
    const int64_t rows = t.layer.rows, cols = t.layer.cols, group_rows = rows / t.layer.groups;
    for (size_t ji : jobs_of[i]) {
      const Fit& f = *fits[ji];
      const std::vector<int8_t>& codes = row.kept_nearest ? f.nearest : f.codes;
      const int64_t r0 = jobs[ji].group * group_rows;
      for (int64_t r = 0; r < group_rows; ++r)
        for (int64_t c = 0; c < cols; ++c) {
          const int8_t code = codes[r * cols + c];
          int8_t& slot = t.layer.transposed_view ? out[c * rows + r0 + r] : out[(r0 + r) * cols + c];
          row.changed += code != slot;
          slot = code;
        }
    }
    result.weights.emplace(t.key, std::move(q));
    result.layers.push_back(std::move(row));
  }
  return result;
}

}  // namespace sparq
