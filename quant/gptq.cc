// GPTQ and AWQ for block-wise INT4 weights (quant/gptq.h).
#include "quant/gptq.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "kernels/backend.h"  // SharedThreadPool
#include "kernels/cpu/dispatch.h"
#include "kernels/ref/gemm.h"
#include "kernels/ref/linalg.h"
#include "quant/layer_inputs.h"
#include "quant/passes.h"  // NodeKey

namespace sparq {

// The rule of QuantizeInt4Rtn (quant/int4.h: onnxruntime's RTN arithmetic,
// so RTN, GPTQ on uncorrelated inputs and onnxruntime give the same codes).
Int4Params Int4BlockParams(const float* values, int64_t count, int64_t stride, bool symmetric) {
  Int4Params p;
  if (symmetric) {
    // The value of largest magnitude maps to -8 exactly: scale = v / -8 (0 for an all-zero block).
    float extreme = 0.0f;
    for (int64_t i = 0; i < count; ++i) {
      const float v = values[i * stride];
      if (std::fabs(v) > std::fabs(extreme)) extreme = v;
    }
    p.scale = extreme / -8.0f;
    return p;
  }
  float lo = 0.0f, hi = 0.0f;  // the range always holds zero, so zero is exact
  for (int64_t i = 0; i < count; ++i) {
    lo = std::min(lo, values[i * stride]);
    hi = std::max(hi, values[i * stride]);
  }
  p.scale = (hi - lo) / 15.0f;
  const float zp = p.scale != 0.0f ? -lo / p.scale : lo;
  p.zero_point = static_cast<uint8_t>(zp < 0.0f ? 0 : zp > 15.0f ? 15 : static_cast<int>(std::roundf(zp)));
  return p;
}

int8_t Int4Code(float v, const Int4Params& p, bool symmetric) {
  const float inv = p.scale != 0.0f ? 1.0f / p.scale : 0.0f;
  const float zp = symmetric ? 8.0f : static_cast<float>(p.zero_point);
  const int code = static_cast<int>(std::clamp(std::roundf(v * inv + zp), 0.0f, 15.0f));
  return static_cast<int8_t>(symmetric ? code - 8 : code);
}

float Int4Value(int8_t code, const Int4Params& p, bool symmetric) {
  return static_cast<float>(code - (symmetric ? 0 : p.zero_point)) * p.scale;
}

std::vector<float> DequantizeInt4(const BlockwiseInt4& q) {
  std::vector<float> w(static_cast<size_t>(q.k * q.n));
  for (int64_t r = 0; r < q.k; ++r) {
    const int64_t b = r / q.block_size;
    for (int64_t c = 0; c < q.n; ++c) {
      Int4Params p;
      p.scale = q.scales[b * q.n + c];
      if (!q.symmetric) p.zero_point = q.zero_points[b * q.n + c];
      w[r * q.n + c] = Int4Value(q.codes[r * q.n + c], p, q.symmetric);
    }
  }
  return w;
}

namespace {

// Rows of an activation per float GEMM of its Gram statistics.
constexpr int64_t kGramChunkRows = 1024;

// y [m, w.rows] = x [m, w.k] (row stride ld_x) w^T, on the FP32 GEMM rows.
Status GemmRows(const PackedGemmF32& w, const float* x, int64_t m, int64_t ld_x, float* y, ThreadPool* pool) {
  GemmF32Args args;
  args.w = &w;
  args.m = m;
  args.x = x;
  args.ld_x = ld_x;
  args.y = y;
  args.ld_y = w.rows;
  args.pool = pool;
  return RunGemmF32(args);
}

BlockwiseInt4 Empty(int64_t k, int64_t n, int64_t block_size, bool symmetric) {
  BlockwiseInt4 q;
  q.k = k;
  q.n = n;
  q.block_size = block_size;
  q.symmetric = symmetric;
  const int64_t blocks = (k + block_size - 1) / block_size;
  q.codes.assign(static_cast<size_t>(k * n), 0);
  q.scales.assign(static_cast<size_t>(blocks * n), 1.0f);
  if (!symmetric) q.zero_points.assign(static_cast<size_t>(blocks * n), 0);
  return q;
}

// The rows [r, r + block) of column c of `w` (row-major [K, N] floats).
void SetBlockParams(const float* w, int64_t r, int64_t k, int64_t n, BlockwiseInt4* q) {
  const int64_t b = r / q->block_size, count = std::min(q->block_size, k - r);
  for (int64_t c = 0; c < n; ++c) {
    const Int4Params p = Int4BlockParams(w + r * n + c, count, n, q->symmetric);
    q->scales[b * n + c] = p.scale;
    if (!q->symmetric) q->zero_points[b * n + c] = p.zero_point;
  }
}

Int4Params ParamsAt(const BlockwiseInt4& q, int64_t r, int64_t c) {
  const int64_t b = r / q.block_size;
  Int4Params p;
  p.scale = q.scales[b * q.n + c];
  if (!q.symmetric) p.zero_point = q.zero_points[b * q.n + c];
  return p;
}

Status CheckShape(const char* what, int64_t k, int64_t n, int64_t block_size, const InputStatistics& x) {
  if (k <= 0 || n <= 0 || block_size <= 0) {
    return Status::InvalidArgument(std::string(what) + ": weight " + std::to_string(k) + "x" + std::to_string(n) +
                                   ", block " + std::to_string(block_size));
  }
  if (x.k != k || x.gram.size() != static_cast<size_t>(k * k) || x.abs_sum.size() != static_cast<size_t>(k)) {
    return Status::InvalidArgument(std::string(what) + ": input statistics of " + std::to_string(x.k) +
                                   " channels for a weight of " + std::to_string(k) + " input channels");
  }
  if (x.rows <= 0) return Status::InvalidArgument(std::string(what) + ": input statistics hold no rows");
  return Status::OK();
}

}  // namespace

Status AddToGram(const float* x, int64_t rows, int64_t k, std::vector<double>* gram, std::vector<double>* abs_sum,
                 ThreadPool* pool) {
  if (gram->size() != static_cast<size_t>(k * k)) return Status::Internal("gram: size mismatch");
  std::vector<float> xt, chunk;
  // X^T X on the FP32 GEMM, kGramChunkRows rows at a time, each chunk's
  // float sums added into the double total.
  for (int64_t b = 0; b < rows; b += kGramChunkRows) {
    const int64_t m = std::min(kGramChunkRows, rows - b);
    xt.resize(static_cast<size_t>(k * m));
    for (int64_t r = 0; r < m; ++r)
      for (int64_t j = 0; j < k; ++j) {
        const float v = x[(b + r) * k + j];
        if (!std::isfinite(v)) return Status::InvalidArgument("holds NaN or Inf (row " + std::to_string(b + r) + ")");
        if (abs_sum) (*abs_sum)[static_cast<size_t>(j)] += std::fabs(v);
        xt[j * m + r] = v;
      }
    SPARQ_ASSIGN_OR_RETURN(PackedGemmF32 packed,
                           PackGemmF32(xt.data(), k, m, PreferredGemmF32Format(ActiveIsa()), /*strips=*/true));
    chunk.resize(static_cast<size_t>(k * k));
    SPARQ_RETURN_IF_ERROR(GemmRows(packed, xt.data(), k, m, chunk.data(), pool));
    for (int64_t i = 0; i < k * k; ++i) (*gram)[i] += chunk[i];
  }
  return Status::OK();
}

StatusOr<std::map<std::string, InputStatistics>> MeasureInputStatistics(const Model& model, const BatchFn& batches,
                                                                       int threads) {
  std::map<std::string, InputStatistics> stats;
  ThreadPool* pool = SharedThreadPool(threads);
  SPARQ_RETURN_IF_ERROR(ObserveLayerInputs(
      model, batches, threads, "int4", [&](const std::string& name, const Tensor& t, int64_t k) -> Status {
        InputStatistics& s = stats[name];
        if (s.k == 0) {
          s.k = k;
          s.gram.assign(static_cast<size_t>(k * k), 0.0);
          s.abs_sum.assign(static_cast<size_t>(k), 0.0);
        }
        const int64_t rows = t.numel() / k;
        Status st = AddToGram(t.data<float>(), rows, k, &s.gram, &s.abs_sum, pool);
        if (!st.ok()) return Status::InvalidArgument("int4: activation '" + name + "' " + st.message());
        s.rows += rows;
        return Status::OK();
      }));
  return stats;
}

StatusOr<BlockwiseInt4> QuantizeInt4Gptq(const float* w, int64_t k, int64_t n, const InputStatistics& x,
                                         const GptqOptions& options, ThreadPool* pool) {
  SPARQ_RETURN_IF_ERROR(CheckShape("gptq", k, n, options.block_size, x));
  const int64_t bs = options.block_size;
  std::vector<double> h = x.gram;
  std::vector<float> wf(w, w + k * n);  // updated in place as rows are quantized
  double mean_diag = 0.0;
  for (int64_t i = 0; i < k; ++i) {
    if (h[i * k + i] <= 0.0) {  // an input that is always zero: its row never matters
      h[i * k + i] = 1.0;
      std::fill(wf.begin() + i * n, wf.begin() + (i + 1) * n, 0.0f);
    }
    mean_diag += h[i * k + i];
  }
  mean_diag /= static_cast<double>(k);
  // U: H^-1 = U^T U, upper triangular, row-major.
  std::vector<double> u;
  bool ok = false;
  for (int attempt = 0; attempt < 4 && !ok; ++attempt) {
    u = h;
    const double damp = options.damp * std::pow(10.0, attempt) * mean_diag;
    for (int64_t i = 0; i < k; ++i) u[i * k + i] += damp;
    ok = UpperCholeskyOfInverse(u, k);
  }
  if (!ok) return Status::InvalidArgument("gptq: the input's Hessian stays singular after damping");

  BlockwiseInt4 q = Empty(k, n, bs, options.symmetric);
  const int64_t lazy = std::max<int64_t>(1, (std::max<int64_t>(options.lazy_rows, bs) + bs - 1) / bs) * bs;
  std::vector<double> err(static_cast<size_t>(lazy * n));
  for (int64_t i1 = 0; i1 < k; i1 += lazy) {
    const int64_t i2 = std::min(i1 + lazy, k);
    for (int64_t r = i1; r < i2; ++r) {
      if (r % bs == 0) SetBlockParams(wf.data(), r, k, n, &q);
      const double d = u[r * k + r];
      double* e = err.data() + (r - i1) * n;
      for (int64_t c = 0; c < n; ++c) {
        const Int4Params p = ParamsAt(q, r, c);
        const float v = wf[r * n + c];
        const int8_t code = Int4Code(v, p, q.symmetric);
        q.codes[r * n + c] = code;
        e[c] = (static_cast<double>(v) - Int4Value(code, p, q.symmetric)) / d;
      }
      for (int64_t j = r + 1; j < i2; ++j) {
        const double f = u[r * k + j];
        float* wj = wf.data() + j * n;
        for (int64_t c = 0; c < n; ++c) wj[c] = static_cast<float>(wj[c] - f * e[c]);
      }
    }
    if (i2 < k) {
      // Rows after the batch: W[i2:] -= U[i1:i2, i2:]^T E, in double, then back.
      const int64_t m = k - i2;
      std::vector<double> tail(wf.begin() + i2 * n, wf.end());
      GemmF64Ref(true, false, m, n, i2 - i1, -1.0, u.data() + i1 * k + i2, k, err.data(), n, 1.0, tail.data(), n,
                 pool);
      for (int64_t i = 0; i < m * n; ++i) wf[i2 * n + i] = static_cast<float>(tail[i]);
    }
  }
  return q;
}

double Int4OutputError(const float* w, const float* wq, int64_t k, int64_t n, const std::vector<double>& gram,
                       ThreadPool* pool) {
  std::vector<double> e(static_cast<size_t>(k * n)), he(static_cast<size_t>(k * n));
  for (int64_t i = 0; i < k * n; ++i) e[i] = static_cast<double>(w[i]) - wq[i];
  GemmF64Ref(false, false, k, n, k, 1.0, gram.data(), k, e.data(), n, 0.0, he.data(), n, pool);
  return DotF64(e.data(), he.data(), k * n);
}

StatusOr<AwqChoice> ChooseAwqScales(const std::vector<Tensor>& weights, const InputStatistics& x,
                                    const AwqOptions& options, ThreadPool* pool) {
  if (weights.empty()) return Status::InvalidArgument("awq: no weights");
  if (options.grid < 1) return Status::InvalidArgument("awq: grid must be >= 1");
  const int64_t k = x.k;
  for (const Tensor& w : weights) {
    if (w.dtype() != DataType::kFloat32 || w.rank() != 2) return Status::InvalidArgument("awq: weights must be 2-D float32");
    SPARQ_RETURN_IF_ERROR(CheckShape("awq", w.dim(0), w.dim(1), options.block_size, x));
  }
  // tr(E^T H E) on the FP32 GEMM: H packed once, Y = E^T H per layer and alpha.
  std::vector<float> hf(x.gram.begin(), x.gram.end());
  SPARQ_ASSIGN_OR_RETURN(PackedGemmF32 h,
                         PackGemmF32(hf.data(), k, k, PreferredGemmF32Format(ActiveIsa()), /*strips=*/true));
  std::vector<float> et, y;
  auto output_error = [&](const float* w, const float* wq, int64_t n) -> StatusOr<double> {
    et.resize(static_cast<size_t>(n * k));
    y.resize(static_cast<size_t>(n * k));
    for (int64_t j = 0; j < k; ++j)
      for (int64_t c = 0; c < n; ++c) et[c * k + j] = w[j * n + c] - wq[j * n + c];
    SPARQ_RETURN_IF_ERROR(GemmRows(h, et.data(), n, k, y.data(), pool));  // H is symmetric: H^T = H
    double e = 0.0;
    for (int64_t i = 0; i < n * k; ++i) e += static_cast<double>(et[i]) * y[i];
    return e;
  };
  std::vector<double> mean_abs(static_cast<size_t>(k));
  for (int64_t j = 0; j < k; ++j) mean_abs[j] = std::max(x.abs_sum[j] / static_cast<double>(x.rows), 1e-4);
  AwqChoice best;
  std::vector<float> s(static_cast<size_t>(k)), scaled, wq;
  for (int g = 0; g < options.grid; ++g) {
    const double alpha = static_cast<double>(g) / options.grid;
    double lo = HUGE_VAL, hi = 0.0;
    std::vector<double> sd(static_cast<size_t>(k));
    for (int64_t j = 0; j < k; ++j) {
      sd[j] = std::pow(mean_abs[j], alpha);
      lo = std::min(lo, sd[j]);
      hi = std::max(hi, sd[j]);
    }
    const double norm = std::sqrt(lo * hi);
    for (int64_t j = 0; j < k; ++j) s[j] = g == 0 ? 1.0f : static_cast<float>(sd[j] / norm);
    double error = 0.0;
    for (const Tensor& wt : weights) {
      const int64_t n = wt.dim(1);
      const float* w = wt.data<float>();
      scaled.assign(w, w + k * n);
      for (int64_t j = 0; j < k; ++j)
        for (int64_t c = 0; c < n; ++c) scaled[j * n + c] *= s[j];
      SPARQ_ASSIGN_OR_RETURN(BlockwiseInt4 q, QuantizeInt4Rtn(scaled.data(), k, n, options.block_size, options.symmetric));
      wq = DequantizeInt4(q);
      for (int64_t j = 0; j < k; ++j)
        for (int64_t c = 0; c < n; ++c) wq[j * n + c] /= s[j];
      SPARQ_ASSIGN_OR_RETURN(double e, output_error(w, wq.data(), n));
      error += e;
    }
    if (g == 0) best.error_rtn = error;
    if (g == 0 || error < best.error) {
      best.alpha = alpha;
      best.error = error;
      best.scales = s;
    }
  }
  return best;
}

InputStatistics ScaledStatistics(const InputStatistics& x, const std::vector<float>& s) {
  InputStatistics y = x;
  for (int64_t i = 0; i < x.k; ++i) {
    y.abs_sum[i] /= s[i];
    for (int64_t j = 0; j < x.k; ++j) y.gram[i * x.k + j] /= static_cast<double>(s[i]) * s[j];
  }
  return y;
}

StatusOr<std::map<std::string, BlockwiseInt4>> GptqModelWeights(const Model& model,
                                                                const std::map<std::string, InputStatistics>& stats,
                                                                const GptqOptions& options, int threads) {
  struct Job {
    std::string key;
    Tensor w;  // [K, N]
    const InputStatistics* x;
  };
  std::vector<Job> jobs;
  for (const InputGroup& group : LayerInputGroups(model.graph)) {
    auto x = stats.find(group.first);
    if (x == stats.end()) continue;
    for (const InputLayer& l : group.second)
      jobs.push_back({NodeKey(model.graph.nodes[l.index]), InputLayerWeightKN(model.graph, l), &x->second});
  }
  std::vector<StatusOr<BlockwiseInt4>> done(jobs.size(), Status::Internal("gptq: not run"));
  ParallelFor(SharedThreadPool(threads), static_cast<int64_t>(jobs.size()), 1, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i)
      done[i] = QuantizeInt4Gptq(jobs[i].w.data<float>(), jobs[i].w.dim(0), jobs[i].w.dim(1), *jobs[i].x, options,
                                 nullptr);
  });
  std::map<std::string, BlockwiseInt4> out;
  for (size_t i = 0; i < jobs.size(); ++i) {
    if (!done[i].ok()) return done[i].status().WithContext("gptq: layer '" + jobs[i].key + "'");
    out.emplace(jobs[i].key, std::move(*done[i]));
  }
  return out;
}

StatusOr<Model> AwqModel(const Model& model, const std::map<std::string, InputStatistics>& stats,
                         const AwqOptions& options, int threads, std::vector<AwqInput>* report) {
  ThreadPool* pool = SharedThreadPool(threads);
  Model out = model;  // shares the weights; scaled ones are new initializers
  Graph& g = out.graph;
  GraphEditor ed(g);
  std::set<std::string> replaced;
  for (const InputGroup& group : LayerInputGroups(g)) {
    auto x = stats.find(group.first);
    if (x == stats.end()) continue;
    std::vector<Tensor> weights;
    AwqInput row;
    row.tensor = group.first;
    for (const InputLayer& l : group.second) {
      weights.push_back(InputLayerWeightKN(g, l));
      row.layers.push_back(NodeKey(g.nodes[l.index]));
    }
    auto chosen = ChooseAwqScales(weights, x->second, options, pool);
    if (!chosen.ok()) return chosen.status().WithContext("awq: activation '" + group.first + "'");
    row.alpha = chosen->alpha;
    row.error = chosen->error;
    row.error_rtn = chosen->error_rtn;
    if (chosen->alpha > 0.0) row.folded_into = ScaleLayerInput(g, ed, group, chosen->scales, "awq", &replaced);
    if (report) report->push_back(std::move(row));
  }
  DropUnread(g, replaced);
  SPARQ_RETURN_IF_ERROR(g.TopoSort());
  return out;
}

}  // namespace sparq
