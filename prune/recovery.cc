// Recovery after pruning, without labels or training: re-fit the surviving
// weights of each output row by damped least squares so the layer's output
// on calibration data matches the dense layer's, then correct the bias.
//
//   dense model ──> x_d ──[W_dense]──> y_d = x_d W_dense^T      (target)
//   pruned model ─> x_p ──[W, mask]──> y   = x_p W^T             (fitted)
//
//   H = sum x_p x_p^T,  c_r = sum y_d[r] x_p      (streamed over batches)
//   w_r[K] = (H_KK + lambda I)^-1 (c_r[K] + lambda w0_r[K]),   K = kept columns of row r
//
// i.e. argmin ||X_K w - y_r||^2 + lambda ||w - w0_r||^2: the damping pulls
// toward the masked weights w0 rather than toward zero, so a row whose
// inputs did not change keeps its weights, and the fit never raises the
// layer's output error on the calibration data.
//
// Rows with the same kept columns (channel pruning, block rows) share one
// Cholesky factorization; rows with many kept columns use block conjugate
// gradients instead.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <map>
#include <set>

#include "kernels/backend.h"  // SharedThreadPool
#include "kernels/parallel.h"
#include "kernels/ref/gemm.h"
#include "kernels/ref/linalg.h"
#include "prune/internal.h"

namespace sparq {

using namespace prune_internal;  // NOLINT

// ---------------------------------------------------------------------------
// LayerStatistics

LayerStatistics::LayerStatistics(int64_t rows, int64_t cols)
    : rows_(rows),
      cols_(cols),
      gram_(static_cast<size_t>(cols * cols), 0.0),
      cross_(static_cast<size_t>(rows * cols), 0.0),
      sum_x_(static_cast<size_t>(cols), 0.0),
      sum_y_(static_cast<size_t>(rows), 0.0),
      sum_y2_(static_cast<size_t>(rows), 0.0) {}

Status LayerStatistics::Add(const float* x, const float* y, int64_t n, ThreadPool* pool) {
  for (int64_t i = 0; i < n * cols_; ++i)
    if (!std::isfinite(x[i])) return Status::InvalidArgument("layer input holds NaN or Inf (sample row " + std::to_string(i / cols_) + ")");
  for (int64_t i = 0; i < n * rows_; ++i)
    if (!std::isfinite(y[i])) return Status::InvalidArgument("dense layer output holds NaN or Inf (sample row " + std::to_string(i / rows_) + ")");
  // Chunks of rows bound the double copies; chunking depends on shapes only.
  const int64_t chunk = std::max<int64_t>(1, std::min<int64_t>(n, (int64_t{1} << 22) / std::max<int64_t>(1, cols_ + rows_)));
  std::vector<double> xd, yd;
  for (int64_t b = 0; b < n; b += chunk) {
    const int64_t m = std::min(chunk, n - b);
    xd.assign(x + b * cols_, x + (b + m) * cols_);
    yd.assign(y + b * rows_, y + (b + m) * rows_);
    GemmF64Ref(true, false, cols_, cols_, m, 1.0, xd.data(), cols_, xd.data(), cols_, 1.0, gram_.data(), cols_, pool);
    GemmF64Ref(true, false, rows_, cols_, m, 1.0, yd.data(), rows_, xd.data(), cols_, 1.0, cross_.data(), cols_, pool);
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t c = 0; c < cols_; ++c) sum_x_[c] += xd[i * cols_ + c];
      for (int64_t r = 0; r < rows_; ++r) {
        sum_y_[r] += yd[i * rows_ + r];
        sum_y2_[r] += yd[i * rows_ + r] * yd[i * rows_ + r];
      }
    }
  }
  samples_ += n;
  return Status::OK();
}

std::vector<double> LayerStatistics::SquaredError(const Matrix& w, ThreadPool* pool) const {
  // e_r = w_r^T H w_r - 2 c_r . w_r + sum y_r^2
  std::vector<double> wd(w.values.begin(), w.values.end()), hw(static_cast<size_t>(rows_ * cols_), 0.0);
  GemmF64Ref(false, false, rows_, cols_, cols_, 1.0, wd.data(), cols_, gram_.data(), cols_, 0.0, hw.data(), cols_,
             pool);
  std::vector<double> e(static_cast<size_t>(rows_), 0.0);
  for (int64_t r = 0; r < rows_; ++r) {
    double quad = 0.0, lin = 0.0;
    for (int64_t c = 0; c < cols_; ++c) {
      quad += hw[r * cols_ + c] * wd[r * cols_ + c];
      lin += cross_[r * cols_ + c] * wd[r * cols_ + c];
    }
    e[r] = std::max(0.0, quad - 2.0 * lin + sum_y2_[r]);
  }
  return e;
}

// ---------------------------------------------------------------------------
// RecoverLayer

namespace {

// Rows solved per block by conjugate gradients: the block's search
// directions are multiplied with H in one GEMM, so H streams through the
// cache once per block and iteration rather than once per row.
constexpr int64_t kCgBlockRows = 64;

// Jacobi-preconditioned CG on (H_KK + lambda I) w_r = c_r[K] + lambda w0_r[K]
// for each row r in `rows` (each with its own kept set K), from w0, the
// current weights.
void BlockConjugateGradient(const LayerStatistics& st, const std::vector<float>& h, const std::vector<int64_t>& rows,
                            const PruneMask& mask, double lambda, const RecoveryOptions& o, Matrix* weights,
                            ThreadPool* pool) {
  const int64_t cols = st.cols();
  std::vector<float> dinv(static_cast<size_t>(cols));
  for (int64_t c = 0; c < cols; ++c) dinv[c] = static_cast<float>(1.0 / (st.gram()[c * cols + c] + lambda));
  const float lam = static_cast<float>(lambda);
  for (size_t b0 = 0; b0 < rows.size(); b0 += kCgBlockRows) {
    const int64_t b = std::min<int64_t>(kCgBlockRows, static_cast<int64_t>(rows.size() - b0));
    const size_t n = static_cast<size_t>(b * cols);
    std::vector<float> m(n), w(n), r(n), z(n), p(n), ap(n);
    std::vector<double> rz(static_cast<size_t>(b)), bnorm(static_cast<size_t>(b));
    std::vector<uint8_t> active(static_cast<size_t>(b), 1);
    for (int64_t i = 0; i < b; ++i) {
      const int64_t row = rows[b0 + i];
      for (int64_t c = 0; c < cols; ++c) {
        m[i * cols + c] = mask.keep[row * cols + c] ? 1.0f : 0.0f;
        w[i * cols + c] = weights->at(row, c) * m[i * cols + c];
      }
    }
    // A x = (x H) restricted to each row's kept columns, plus lambda x.
    auto apply = [&](const std::vector<float>& x, std::vector<float>& out) {
      GemmF32Ref(false, false, b, cols, cols, 1.0f, x.data(), cols, h.data(), cols, 0.0f, out.data(), cols, pool);
      for (size_t k = 0; k < n; ++k) out[k] = m[k] * out[k] + lam * x[k];
    };
    apply(w, ap);
    for (int64_t i = 0; i < b; ++i) {
      const int64_t row = rows[b0 + i];
      double bn = 0.0, s = 0.0;
      for (int64_t c = 0; c < cols; ++c) {
        const size_t k = static_cast<size_t>(i * cols + c);
        const double rhs = m[k] * (st.cross()[row * cols + c] + lambda * w[k]);
        r[k] = static_cast<float>(rhs - ap[k]);
        z[k] = dinv[c] * r[k];
        p[k] = z[k];
        bn += rhs * rhs;
        s += double(r[k]) * z[k];
      }
      bnorm[i] = std::sqrt(bn);
      rz[i] = s;
    }
    for (int it = 0; it < o.cg_iterations; ++it) {
      bool any = false;
      for (int64_t i = 0; i < b; ++i) {
        double rn = 0.0;
        for (int64_t c = 0; c < cols; ++c) rn += double(r[i * cols + c]) * r[i * cols + c];
        if (std::sqrt(rn) <= o.cg_tolerance * std::max(bnorm[i], 1e-30) || !(rz[i] > 0.0)) active[i] = 0;
        any = any || active[i];
      }
      if (!any) break;
      apply(p, ap);
      for (int64_t i = 0; i < b; ++i) {
        if (!active[i]) continue;
        float* pi = p.data() + i * cols;
        float* api = ap.data() + i * cols;
        double pap = 0.0;
        for (int64_t c = 0; c < cols; ++c) pap += double(pi[c]) * api[c];
        if (!(pap > 0.0)) {
          active[i] = 0;
          continue;
        }
        const float alpha = static_cast<float>(rz[i] / pap);
        double rz_new = 0.0;
        for (int64_t c = 0; c < cols; ++c) {
          const size_t k = static_cast<size_t>(i * cols + c);
          w[k] += alpha * p[k];
          r[k] -= alpha * ap[k];
          z[k] = dinv[c] * r[k];
          rz_new += double(r[k]) * z[k];
        }
        const float beta = static_cast<float>(rz_new / rz[i]);
        rz[i] = rz_new;
        for (int64_t c = 0; c < cols; ++c) pi[c] = z[i * cols + c] + beta * pi[c];
      }
      for (int64_t i = 0; i < b; ++i)  // frozen rows stop moving
        if (!active[i]) std::fill_n(p.begin() + i * cols, cols, 0.0f);
    }
    for (int64_t i = 0; i < b; ++i)
      for (int64_t c = 0; c < cols; ++c) weights->at(rows[b0 + i], c) = w[i * cols + c];
  }
}

double Sum(const std::vector<double>& v) {
  double s = 0.0;
  for (double x : v) s += x;
  return s;
}

}  // namespace

StatusOr<LayerRecoveryResult> RecoverLayer(const LayerStatistics& stats, const PruneMask& mask,
                                           const RecoveryOptions& options, Matrix* weights,
                                           std::vector<double>* bias_shift, ThreadPool* pool) {
  const int64_t rows = stats.rows(), cols = stats.cols();
  if (weights->rows != rows || weights->cols != cols || mask.rows != rows || mask.cols != cols ||
      weights->values.size() != static_cast<size_t>(rows * cols) || mask.keep.size() != weights->values.size()) {
    return Status::InvalidArgument("recovery: statistics are " + std::to_string(rows) + "x" + std::to_string(cols) +
                                   ", weights " + std::to_string(weights->rows) + "x" + std::to_string(weights->cols) +
                                   ", mask " + std::to_string(mask.rows) + "x" + std::to_string(mask.cols));
  }
  if (stats.samples() == 0) return Status::InvalidArgument("recovery: the statistics hold no samples");
  SPARQ_RETURN_IF_ERROR(ApplyMask(mask, weights));
  LayerRecoveryResult result;
  const double y2 = std::max(Sum(stats.sum_y2()), 1e-300);
  result.error_before = Sum(stats.SquaredError(*weights, pool)) / y2;

  const std::vector<double>& H = stats.gram();
  double diag = 0.0;
  for (int64_t c = 0; c < cols; ++c) diag += H[c * cols + c];
  diag /= static_cast<double>(std::max<int64_t>(cols, 1));
  if (diag > 0.0) {
    const double lambda = options.damping * diag;
    // Rows grouped by their kept columns.
    std::map<std::vector<uint8_t>, std::vector<int64_t>> patterns;
    for (int64_t r = 0; r < rows; ++r)
      patterns[std::vector<uint8_t>(mask.keep.begin() + r * cols, mask.keep.begin() + (r + 1) * cols)].push_back(r);
    std::vector<const std::pair<const std::vector<uint8_t>, std::vector<int64_t>>*> work;
    std::vector<int64_t> iterative_rows;
    for (const auto& kv : patterns) {
      int64_t k = 0;
      for (uint8_t v : kv.first) k += v;
      if (k == 0) continue;  // nothing kept: the row stays zero
      if (k <= options.max_direct_cols) work.push_back(&kv);
      else iterative_rows.insert(iterative_rows.end(), kv.second.begin(), kv.second.end());
    }
    std::vector<int64_t> direct(work.size(), 0);
    ParallelFor(pool, static_cast<int64_t>(work.size()), 1, [&](int64_t b, int64_t e) {
      for (int64_t wi = b; wi < e; ++wi) {
        const auto& [keep, members] = *work[wi];
        std::vector<int64_t> K;
        for (int64_t c = 0; c < cols; ++c)
          if (keep[c]) K.push_back(c);
        const int64_t k = static_cast<int64_t>(K.size());
        std::vector<double> a(static_cast<size_t>(k * k)), rhs(static_cast<size_t>(k));
        bool ok = false;
        double lam = lambda;
        for (int attempt = 0; attempt < 4 && !ok; ++attempt) {
          lam = attempt == 0 ? lambda : lambda * std::pow(10.0, attempt) + 1e-12 * diag;
          for (int64_t i = 0; i < k; ++i)
            for (int64_t j = 0; j <= i; ++j) a[i * k + j] = H[K[i] * cols + K[j]] + (i == j ? lam : 0.0);
          ok = Cholesky(a, k);
        }
        if (!ok) continue;  // leave the masked weights
        direct[wi] = 1;
        for (int64_t r : members) {
          for (int64_t i = 0; i < k; ++i) rhs[i] = stats.cross()[r * cols + K[i]] + lam * weights->at(r, K[i]);
          CholeskySolve(a, k, rhs);
          for (int64_t i = 0; i < k; ++i) weights->at(r, K[i]) = static_cast<float>(rhs[i]);
        }
      }
    });
    for (int64_t d : direct) result.direct_solves += d;
    if (!iterative_rows.empty()) {
      const std::vector<float> hf(H.begin(), H.end());
      BlockConjugateGradient(stats, hf, iterative_rows, mask, lambda, options, weights, pool);
      result.iterative_rows = static_cast<int64_t>(iterative_rows.size());
    }
    // A solved weight that rounds to exactly 0.0f would read as pruned later
    // (masks are recovered from the zeros); nudge it to the smallest normal float.
    for (size_t i = 0; i < weights->values.size(); ++i)
      if (mask.keep[i] && weights->values[i] == 0.0f) weights->values[i] = std::numeric_limits<float>::min();
  }
  result.error_after = Sum(stats.SquaredError(*weights, pool)) / y2;
  if (bias_shift != nullptr) {
    bias_shift->assign(static_cast<size_t>(rows), 0.0);
    if (options.bias_correction) {
      const double n = static_cast<double>(stats.samples());
      for (int64_t r = 0; r < rows; ++r) {
        double mean_fit = 0.0;
        for (int64_t c = 0; c < cols; ++c) mean_fit += stats.sum_x()[c] * weights->at(r, c);
        (*bias_shift)[r] = (stats.sum_y()[r] - mean_fit) / n;
      }
    }
  }
  return result;
}

// ---------------------------------------------------------------------------
// Biases

namespace prune_internal {

std::vector<double> LayerEffectiveBias(const Model& m, const WeightedLayer& L) {
  std::vector<double> b(static_cast<size_t>(L.rows), 0.0);
  if (L.bias.empty()) return b;
  const Tensor* t = m.graph.FindWeight(L.bias);
  if (t == nullptr || t->numel() != L.rows) return b;
  double beta = 1.0;
  if (L.op_type == "Gemm") {
    const int idx = FindNodeIndex(m.graph, L.node);
    if (idx >= 0) beta = m.graph.nodes[idx].attr_float("beta", 1.0f);
  }
  for (int64_t r = 0; r < L.rows; ++r) b[r] = beta * t->GetAsDouble(r);
  return b;
}

Status SetLayerBias(Model* m, const WeightedLayer& L, const std::vector<double>& bias) {
  Graph& g = m->graph;
  const int idx = FindNodeIndex(g, L.node);
  if (idx < 0) return Status::NotFound("node '" + L.node + "' not found");
  double scale = 1.0;  // stored = effective * scale
  if (L.op_type == "Gemm") {
    Node& n = g.nodes[idx];
    Attribute* beta = n.mutable_attr("beta");
    const float b = n.attr_float("beta", 1.0f);
    if (b == 0.0f || L.bias.empty()) {
      if (beta != nullptr) beta->f = 1.0f;
    } else {
      scale = 1.0 / b;
    }
  }
  Shape shape = {L.rows};
  if (!L.bias.empty()) {
    if (const Tensor* old = g.FindWeight(L.bias)) shape = old->shape();
  }
  Tensor t(DataType::kFloat32, shape);
  for (int64_t r = 0; r < L.rows; ++r) t.data<float>()[r] = static_cast<float>(bias[r] * scale);
  if (!L.bias.empty() && CountReaders(g, L.bias) == 1) {
    Tensor* w = MutableWeight(g, L.bias);
    if (w == nullptr) return Status::NotFound("bias '" + L.bias + "' of layer '" + L.node + "' not found");
    *w = t;
    return Status::OK();
  }
  const std::string name = GraphEditor(g).FreshName(L.node + "_bias");
  g.initializers[name] = t;
  Node& n = g.nodes[idx];
  if (L.op_type == "MatMul") {
    if (!L.bias.empty()) {  // a shared bias constant: point this layer's Add at a copy
      for (Node& add : g.nodes)
        if (add.op_type == "Add")
          for (int k = 0; k < 2 && add.inputs.size() == 2; ++k)
            if (add.inputs[k] == L.output && add.inputs[1 - k] == L.bias) add.inputs[1 - k] = name;
      return Status::OK();
    }
    // y = MatMul(a, w)  ->  y' = MatMul(a, w); y = Add(y', bias)
    GraphEditor ed(g);
    const std::string inner = ed.FreshName(L.output + "_nobias");
    Node add;
    add.name = ed.FreshName(L.node + "/bias_add");
    add.op_type = "Add";
    add.inputs = {inner, name};
    add.outputs = {L.output};
    n.outputs[0] = inner;
    g.nodes.insert(g.nodes.begin() + idx + 1, add);
    return Status::OK();
  }
  if (n.inputs.size() < 3) n.inputs.resize(3);
  n.inputs[2] = name;
  return Status::OK();
}

}  // namespace prune_internal

// ---------------------------------------------------------------------------
// RecoverModel

namespace {

struct LayerWork {
  WeightedLayer dense, pruned;
  Matrix dense_weights;
  std::vector<LayerStatistics> stats;  // one per group
};

// The rows of `input` that options.token_mask keeps for layer `L`: empty
// (every row) when there is no mask or the layer's rows are not one per
// position of the mask ([batch, tokens, K] or [batch * tokens, K], every
// position taken: no sampling).
StatusOr<std::vector<uint8_t>> TokenRows(const TensorMap& batch, const WeightedLayer& L, const Tensor& input,
                                         const RecoveryOptions& options) {
  std::vector<uint8_t> keep;
  if (options.token_mask.empty() || L.op_type == "Conv") return keep;
  auto it = batch.find(options.token_mask);
  if (it == batch.end())
    return Status::InvalidArgument("recovery token_mask '" + options.token_mask + "' is not an input in the data");
  const Tensor& mask = it->second;
  if (mask.rank() != 2)
    return Status::InvalidArgument("recovery token_mask '" + options.token_mask + "' has shape " +
                                   ShapeToString(mask.shape()) + ", expected [batch, tokens]");
  if (input.rank() < 2 || input.dim(input.rank() - 1) != L.cols) return keep;
  const int64_t positions = input.numel() / std::max<int64_t>(L.cols, 1);
  if (positions != mask.numel()) return keep;
  if (input.rank() >= 3) {
    // LayerInputRows samples positions per leading index: only whole rows map.
    if (input.dim(0) != mask.dim(0) || positions / std::max<int64_t>(input.dim(0), 1) > options.max_rows_per_sample)
      return keep;
  }
  keep.resize(static_cast<size_t>(positions));
  for (int64_t i = 0; i < positions; ++i) keep[i] = mask.GetAsDouble(i) != 0.0;
  return keep;
}

// Moves the rows of `m` ([n, cols]) that `keep` marks to its front; returns their count.
int64_t CompactRows(Matrix* m, const std::vector<uint8_t>& keep) {
  int64_t n = 0;
  for (int64_t r = 0; r < m->rows; ++r) {
    if (!keep[r]) continue;
    if (n != r) std::copy_n(m->values.begin() + r * m->cols, m->cols, m->values.begin() + n * m->cols);
    ++n;
  }
  return n;
}

// Streams the calibration data through both models and fills the statistics
// of every layer in `work`.
Status CollectStatistics(Executor& dense_exec, Executor& pruned_exec, std::vector<LayerWork*>& work,
                         const BatchSource& data, const RecoveryOptions& options, ThreadPool* pool, int64_t* samples) {
  std::set<std::string> taps;
  for (LayerWork* w : work) taps.insert(w->pruned.input);
  const Graph& pg = pruned_exec.model().graph;
  int64_t rows_seen = 0;
  auto per_batch = [&](const TensorMap& batch) -> Status {
    TensorMap dense_inputs;
    SPARQ_RETURN_IF_ERROR(RunAndTap(dense_exec, batch, taps, [&](const std::string& v, const Tensor& t) {
      dense_inputs[v] = t;
      return Status::OK();
    }));
    rows_seen += data.SamplesIn(batch);
    return RunAndTap(pruned_exec, batch, taps, [&](const std::string& v, const Tensor& xp) -> Status {
      const Tensor& xd = dense_inputs.at(v);
      if (xd.shape() != xp.shape()) {
        return Status::InvalidArgument("value '" + v + "' has shape " + ShapeToString(xd.shape()) +
                                       " in the dense model but " + ShapeToString(xp.shape()) + " in the pruned one");
      }
      for (LayerWork* w : work) {
        if (w->pruned.input != v) continue;
        const int idx = FindNodeIndex(pg, w->pruned.node);
        if (idx < 0) return Status::NotFound("node '" + w->pruned.node + "' not found");
        const Node& node = pg.nodes[idx];
        const int64_t rg = w->pruned.rows / w->pruned.groups;
        for (int64_t grp = 0; grp < w->pruned.groups; ++grp) {
          Matrix rows_p, rows_d;
          SPARQ_RETURN_IF_ERROR(LayerInputRows(node, w->pruned, xp, grp, options.max_rows_per_sample, &rows_p));
          SPARQ_RETURN_IF_ERROR(LayerInputRows(node, w->pruned, xd, grp, options.max_rows_per_sample, &rows_d));
          SPARQ_ASSIGN_OR_RETURN(std::vector<uint8_t> keep, TokenRows(batch, w->pruned, xp, options));
          if (!keep.empty() && static_cast<int64_t>(keep.size()) == rows_p.rows) {
            rows_p.rows = CompactRows(&rows_p, keep);
            rows_d.rows = CompactRows(&rows_d, keep);
          }
          std::vector<float> y(static_cast<size_t>(rows_d.rows * rg));
          GemmF32Ref(false, true, rows_d.rows, rg, rows_d.cols, 1.0f, rows_d.values.data(), rows_d.cols,
                     w->dense_weights.values.data() + grp * rg * w->dense.cols, w->dense.cols, 0.0f, y.data(), rg,
                     pool);
          Status st = w->stats[grp].Add(rows_p.values.data(), y.data(), rows_p.rows, pool);
          if (!st.ok()) return st.WithContext("layer '" + w->pruned.node + "'");
        }
      }
      return Status::OK();
    });
  };
  SPARQ_RETURN_IF_ERROR(ForEachBatch(data, per_batch, nullptr));
  *samples = rows_seen;
  return Status::OK();
}

// Re-fits one layer of `pruned` from its statistics.
StatusOr<ModelRecoveryReport::Layer> RecoverOne(const Model& dense, Model* pruned, LayerWork& w,
                                                const RecoveryOptions& options, ThreadPool* pool) {
  SPARQ_ASSIGN_OR_RETURN(Matrix weights, ReadWeightMatrix(*pruned, w.pruned));
  const PruneMask mask = PruneMask::FromNonZeros(weights);
  const int64_t rg = w.pruned.rows / w.pruned.groups, cols = w.pruned.cols;
  std::vector<double> bias = LayerEffectiveBias(dense, w.dense);
  ModelRecoveryReport::Layer report;
  report.node = w.pruned.node;
  // OBS for the layers whose structure it can choose again; least squares otherwise.
  const PruneStructure* obs = nullptr;
  if (options.method == RecoveryMethod::kObs) {
    auto it = options.structures.find(w.pruned.node);
    if (it != options.structures.end() && (it->second.kind == PruneStructure::Kind::kUnstructured ||
                                           it->second.kind == PruneStructure::Kind::kNM))
      obs = &it->second;
  }
  report.method = RecoveryMethodName(obs ? RecoveryMethod::kObs : RecoveryMethod::kLeastSquares);
  double err_before = 0.0, err_after = 0.0, y2 = 0.0, shift2 = 0.0;
  for (int64_t grp = 0; grp < w.pruned.groups; ++grp) {
    Matrix part(rg, cols);
    PruneMask pmask{rg, cols, {}};
    std::copy_n(weights.values.begin() + grp * rg * cols, rg * cols, part.values.begin());
    pmask.keep.assign(mask.keep.begin() + grp * rg * cols, mask.keep.begin() + (grp + 1) * rg * cols);
    std::vector<double> shift;
    StatusOr<LayerRecoveryResult> r = Status::Internal("unset");
    if (obs) {
      Matrix dense_part(rg, cols);
      std::copy_n(w.dense_weights.values.begin() + grp * rg * cols, rg * cols, dense_part.values.begin());
      r = RecoverLayerObs(w.stats[grp], *obs, pmask, dense_part, options, &part, nullptr, &shift, pool);
    } else {
      r = RecoverLayer(w.stats[grp], pmask, options, &part, &shift, pool);
    }
    if (!r.ok()) return r.status().WithContext("layer '" + w.pruned.node + "'");
    const double g2 = Sum(w.stats[grp].sum_y2());
    err_before += r->error_before * g2;
    err_after += r->error_after * g2;
    y2 += g2;
    std::copy(part.values.begin(), part.values.end(), weights.values.begin() + grp * rg * cols);
    for (int64_t i = 0; i < rg; ++i) {
      bias[grp * rg + i] += shift[i];
      shift2 += shift[i] * shift[i];
    }
  }
  report.error_before = y2 > 0 ? err_before / y2 : 0.0;
  report.error_after = y2 > 0 ? err_after / y2 : 0.0;
  report.rows = w.stats.empty() ? 0 : w.stats[0].samples();
  report.bias_shift_rms = std::sqrt(shift2 / static_cast<double>(std::max<int64_t>(w.pruned.rows, 1)));
  SPARQ_RETURN_IF_ERROR(WriteWeightMatrix(pruned, w.pruned, weights));
  if (options.bias_correction) SPARQ_RETURN_IF_ERROR(SetLayerBias(pruned, w.pruned, bias));
  return report;
}

void LogLayer(const RecoveryOptions& o, const ModelRecoveryReport::Layer& r) {
  if (o.log) {
    o.log("recovered " + r.node + (r.method == "obs" ? " (obs)" : "") + ": relative output error " +
          FormatNumber(r.error_before, 3) + " -> " + FormatNumber(r.error_after, 3) + " (" +
          FormatNumber(r.seconds, 3) + " s, " + std::to_string(r.rows) + " rows)");
  }
}

}  // namespace

StatusOr<ModelRecoveryReport> RecoverModel(const Model& dense, Model* pruned, const std::vector<std::string>& layers,
                                           const BatchSource& data, const RecoveryOptions& options) {
  ModelRecoveryReport report;
  if (layers.empty()) return report;
  SPARQ_ASSIGN_OR_RETURN(std::vector<WeightedLayer> dense_layers, FindWeightedLayers(dense));
  SPARQ_ASSIGN_OR_RETURN(std::vector<WeightedLayer> pruned_layers, FindWeightedLayers(*pruned));
  std::vector<LayerWork> work;
  for (const WeightedLayer& P : pruned_layers) {  // graph order
    if (std::find(layers.begin(), layers.end(), P.node) == layers.end()) continue;
    auto D = std::find_if(dense_layers.begin(), dense_layers.end(), [&](const WeightedLayer& L) { return L.node == P.node; });
    if (D == dense_layers.end() || D->rows != P.rows || D->cols != P.cols || D->groups != P.groups) {
      return Status::InvalidArgument("layer '" + P.node + "' differs between the dense and the pruned model");
    }
    if (!P.unsupported.empty()) return Status::NotFound("layer '" + P.node + "' cannot be recovered: " + P.unsupported);
    LayerWork w{*D, P, {}, {}};
    SPARQ_ASSIGN_OR_RETURN(w.dense_weights, ReadWeightMatrix(dense, *D));
    work.push_back(std::move(w));
  }
  for (const auto& name : layers) {
    if (std::none_of(work.begin(), work.end(), [&](const LayerWork& w) { return w.pruned.node == name; }))
      return Status::NotFound("recovery: no weighted layer named '" + name + "'");
  }
  if (!options.token_mask.empty() &&
      std::none_of(pruned->graph.inputs.begin(), pruned->graph.inputs.end(),
                   [&](const ValueInfo& v) { return v.name == options.token_mask; }))
    return Status::InvalidArgument("recovery token_mask '" + options.token_mask + "' is not an input of the model");
  ThreadPool* pool = SharedThreadPool(options.threads);  // the process's pool for this count
  SPARQ_ASSIGN_OR_RETURN(auto dense_exec, Executor::Create(dense, ExecutorOptions{options.threads}));
  auto init_stats = [](LayerWork& w) {
    w.stats.clear();
    for (int64_t g = 0; g < w.pruned.groups; ++g) w.stats.emplace_back(w.pruned.rows / w.pruned.groups, w.pruned.cols);
  };
  if (options.sequential) {
    for (LayerWork& w : work) {
      const auto start = std::chrono::steady_clock::now();
      init_stats(w);
      SPARQ_ASSIGN_OR_RETURN(auto pruned_exec, Executor::Create(*pruned, ExecutorOptions{options.threads}));
      std::vector<LayerWork*> one = {&w};
      SPARQ_RETURN_IF_ERROR(CollectStatistics(*dense_exec, *pruned_exec, one, data, options, pool, &report.samples));
      SPARQ_ASSIGN_OR_RETURN(ModelRecoveryReport::Layer r, RecoverOne(dense, pruned, w, options, pool));
      w.stats.clear();
      r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      LogLayer(options, r);
      report.layers.push_back(r);
    }
  } else {
    std::vector<LayerWork*> all;
    for (LayerWork& w : work) {
      init_stats(w);
      all.push_back(&w);
    }
    SPARQ_ASSIGN_OR_RETURN(auto pruned_exec, Executor::Create(*pruned, ExecutorOptions{options.threads}));
    SPARQ_RETURN_IF_ERROR(CollectStatistics(*dense_exec, *pruned_exec, all, data, options, pool, &report.samples));
    for (LayerWork& w : work) {
      const auto start = std::chrono::steady_clock::now();
      SPARQ_ASSIGN_OR_RETURN(ModelRecoveryReport::Layer r, RecoverOne(dense, pruned, w, options, pool));
      r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      LogLayer(options, r);
      report.layers.push_back(r);
    }
  }
  return report;
}

}  // namespace sparq
