// Block-wise reconstruction (quant/reconstruct.h).
#include "quant/reconstruct.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cmath>
#include <limits>
#include <map>
#include <set>

#include "kernels/backend.h"  // SharedThreadPool
#include "kernels/cpu/dispatch.h"
#include "kernels/packed_formats.h"
#include "kernels/ref/conv.h"
#include "kernels/ref/nn_common.h"  // ReadWindowAttributes
#include "kernels/ref/gemm.h"
#include "kernels/ref/grad.h"
#include "quant/adam.h"
#include "quant/holdout.h"
#include "runtime/passes/graph_folding.h"
#include "sparq/executor.h"
#include "sparq/weighted_layer.h"

namespace sparq {

namespace {

constexpr const char* kStopMarker = "sparq.reconstruct: all values seen";

bool IsWeightedNode(const Graph& g, const Node& n) {
  auto L = AsWeightedLayer(g, n);
  return L && g.initializers.count(L->weight) && g.initializers.at(L->weight).dtype() == DataType::kFloat32;
}

const std::set<std::string>& IdentityGradOps() {
  static const std::set<std::string> ops = {"Identity", "Reshape", "Flatten", "Squeeze", "Unsqueeze", "Dropout"};
  return ops;
}

// Whether the backward of `n` w.r.t. its input `k` is implemented.
bool HasBackward(const Node& n, size_t k) {
  static const std::set<std::string> unary = {"Relu", "Clip", "Sigmoid", "HardSigmoid", "HardSwish", "Tanh", "Erf"};
  static const std::set<std::string> binary = {"Add", "Sub", "Mul", "Div"};
  const std::string& op = n.op_type;
  if (!n.domain.empty() && n.domain != "ai.onnx") return false;
  if (op == "Conv" || op == "Gemm") return k <= 2;
  if (op == "MatMul") return k <= 1;
  if (binary.count(op)) return k <= 1;
  if (unary.count(op) || IdentityGradOps().count(op)) return k == 0;
  if (op == "Softmax" || op == "Transpose" || op == "GlobalAveragePool") return k == 0;
  if (op == "LayerNormalization") return k <= 2 && n.outputs.size() == 1;
  if (op == "Pad") return k == 0 && n.attr_string("mode", "constant") == "constant" && (n.inputs.size() < 4 || n.inputs[3].empty());
  if (op == "Concat") return true;
  if (op == "ReduceSum" || op == "ReduceMean") return k == 0;
  return false;
}

}  // namespace

StatusOr<std::vector<ReconstructionBlock>> FindReconstructionBlocks(const Model& model, int block_layers) {
  const Graph& g = model.graph;
  const size_t n = g.nodes.size();
  std::vector<bool> weighted(n, false), wdep(n, false);
  std::set<std::string> wdep_values;
  for (size_t i = 0; i < n; ++i) {
    const Node& node = g.nodes[i];
    weighted[i] = IsWeightedNode(g, node);
    bool dep = weighted[i];
    if (node.op_type != "Shape" && node.op_type != "Size")
      for (const auto& in : node.inputs) dep = dep || (!in.empty() && wdep_values.count(in));
    wdep[i] = dep;
    if (dep)
      for (const auto& out : node.outputs)
        if (!out.empty()) wdep_values.insert(out);
  }
  std::map<std::string, size_t> last_use;
  for (size_t i = 0; i < n; ++i)
    for (const auto& in : g.nodes[i].inputs)
      if (!in.empty()) last_use[in] = i;
  for (const auto& o : g.outputs) last_use[o.name] = n;

  // Sweep in graph order counting the live activations: the weight-dependent
  // values and the inputs that weighted layers multiply (the embeddings a
  // first attention block reads with its q, k, v and its residual); a cut
  // follows a node of a block after which exactly one is live.
  std::set<std::string> tracked = wdep_values;
  for (size_t i = 0; i < n; ++i)
    if (weighted[i]) tracked.insert(g.nodes[i].inputs[0]);
  std::vector<std::vector<size_t>> segments(1);
  std::map<std::string, size_t> live;  // value -> last use
  auto add_live = [&](const std::string& v, size_t after) {
    auto u = last_use.find(v);
    if (!v.empty() && tracked.count(v) && u != last_use.end() && u->second > after) live[v] = u->second;
  };
  for (const auto& in : g.inputs) add_live(in.name, 0);
  for (size_t i = 0; i < n; ++i) {
    const Node& node = g.nodes[i];
    for (auto it = live.begin(); it != live.end();) it = it->second <= i ? live.erase(it) : std::next(it);
    for (const auto& out : node.outputs) add_live(out, i);
    if (!wdep[i]) continue;
    segments.back().push_back(i);
    if (live.size() == 1) segments.emplace_back();
  }
  if (segments.back().empty()) segments.pop_back();

  std::vector<std::vector<size_t>> groups;
  int64_t count = 0;
  for (const auto& seg : segments) {
    int64_t layers = 0;
    for (size_t i : seg) layers += weighted[i];
    if (groups.empty() || (layers > 0 && count >= block_layers)) {
      groups.emplace_back();
      count = 0;
    }
    groups.back().insert(groups.back().end(), seg.begin(), seg.end());
    count += layers;
  }

  std::vector<ReconstructionBlock> blocks;
  for (const auto& nodes : groups) {
    ReconstructionBlock b;
    b.nodes = nodes;
    std::set<size_t> in_block(nodes.begin(), nodes.end());
    std::set<std::string> made, read_outside;
    for (size_t i : nodes)
      for (const auto& out : g.nodes[i].outputs) made.insert(out);
    for (size_t i = 0; i < n; ++i)
      if (!in_block.count(i))
        for (const auto& in : g.nodes[i].inputs) read_outside.insert(in);
    for (const auto& o : g.outputs) read_outside.insert(o.name);
    std::set<std::string> seen;
    for (size_t i : nodes) {
      const Node& node = g.nodes[i];
      for (const auto& in : node.inputs) {
        if (in.empty() || made.count(in) || g.initializers.count(in) || seen.count(in)) continue;
        seen.insert(in);
        b.inputs.push_back(in);
      }
      for (const auto& out : node.outputs)
        if (!out.empty() && read_outside.count(out)) b.outputs.push_back(out);
      if (!weighted[i]) continue;
      ++b.weighted_layers;
      auto L = AsWeightedLayer(g, node);
      auto add_param = [&](const std::string& name, bool mask) {
        auto it = g.initializers.find(name);
        if (name.empty() || it == g.initializers.end() || it->second.dtype() != DataType::kFloat32) return;
        if (read_outside.count(name)) return;  // shared with another block: left alone
        if (std::find(b.params.begin(), b.params.end(), name) != b.params.end()) return;
        b.params.push_back(name);
        b.masked.push_back(mask);
      };
      add_param(L->weight, true);
      add_param(L->bias, false);
    }
    // The gradient path: values downstream of a param inside the block.
    std::set<std::string> needs(b.params.begin(), b.params.end());
    for (size_t i : nodes) {
      const Node& node = g.nodes[i];
      bool any = false;
      for (size_t k = 0; k < node.inputs.size(); ++k) {
        if (node.inputs[k].empty() || !needs.count(node.inputs[k])) continue;
        any = true;
        if (b.unsupported.empty() && !HasBackward(node, k))
          b.unsupported = node.Describe() + " (input " + std::to_string(k) + ")";
      }
      if (any)
        for (const auto& out : node.outputs) needs.insert(out);
    }
    if (b.outputs.empty()) b.unsupported = "no output read after the block";
    blocks.push_back(std::move(b));
  }
  return blocks;
}

namespace {

// Runs `exec` on `batch` and copies the named values (graph inputs included)
// into `out`, stopping the run once every one was seen.
Status Tap(Executor& exec, const TensorMap& batch, const std::vector<std::string>& names, TensorMap* out) {
  std::set<std::string> pending;
  for (const auto& v : names) {
    auto it = batch.find(v);
    if (it != batch.end()) (*out)[v] = it->second;
    else pending.insert(v);
  }
  if (pending.empty()) return Status::OK();
  RunOptions ro;
  ro.on_node_outputs = [&](const Node& node, const std::vector<Tensor>& outs) -> Status {
    for (size_t k = 0; k < node.outputs.size() && k < outs.size(); ++k) {
      if (!pending.count(node.outputs[k])) continue;
      (*out)[node.outputs[k]] = outs[k].Clone();
      pending.erase(node.outputs[k]);
    }
    return pending.empty() ? Status::Internal(kStopMarker) : Status::OK();
  };
  TensorMap outputs;
  Status st = exec.Run(batch, &outputs, ro);
  if (!st.ok() && st.message() == kStopMarker) st = Status::OK();
  SPARQ_RETURN_IF_ERROR(st);
  if (!pending.empty()) return Status::NotFound("reconstruction: value '" + *pending.begin() + "' was never computed");
  return Status::OK();
}

// GemmF32Ref's contract on the CPU's packed GEMM (RunGemmF32: op(B)^T packed
// per call, deterministic for any thread count); small products and any
// refusal take GemmF32Ref.
void FastGemmF32(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda,
                 const float* B, int64_t ldb, float beta, float* C, int64_t ldc, ThreadPool* pool) {
  auto reference = [&] { GemmF32Ref(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, pool); };
  if (M == 0 || N == 0 || K == 0 || M * N * K < (int64_t{1} << 15)) return reference();
  std::vector<float> wt;  // op(B)^T [N, K]
  const float* w = B;
  if (!tb || ldb != K) {
    wt.resize(static_cast<size_t>(N * K));
    for (int64_t n = 0; n < N; ++n)
      for (int64_t k = 0; k < K; ++k) wt[n * K + k] = tb ? B[n * ldb + k] : B[k * ldb + n];
    w = wt.data();
  }
  StatusOr<PackedGemmF32> packed = PackGemmF32(w, N, K, PreferredGemmF32Format(ActiveIsa()), /*strips=*/true);
  if (!packed.ok()) return reference();
  std::vector<float> xt;  // op(A) [M, K]
  const float* x = A;
  int64_t ldx = lda;
  if (ta) {
    xt.resize(static_cast<size_t>(M * K));
    for (int64_t k = 0; k < K; ++k)
      for (int64_t m = 0; m < M; ++m) xt[m * K + k] = A[k * lda + m];
    x = xt.data();
    ldx = K;
  }
  const bool direct = alpha == 1.0f && beta == 0.0f;
  std::vector<float> yt;
  if (!direct) yt.resize(static_cast<size_t>(M * N));
  GemmF32Args args;
  args.w = &*packed;
  args.m = M;
  args.x = x;
  args.ld_x = ldx;
  args.y = direct ? C : yt.data();
  args.ld_y = direct ? ldc : N;
  args.pool = pool;
  if (!RunGemmF32(args).ok()) return reference();
  if (direct) return;
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      float& c = C[i * ldc + j];
      c = beta == 0.0f ? alpha * yt[i * N + j] : alpha * yt[i * N + j] + beta * c;
    }
}

double Scalar(const Tensor* t, double dflt) { return t && t->numel() > 0 ? t->GetAsDouble(0) : dflt; }

// One block's forward and backward on the executor and kernels/ref/grad.h.
class BlockFitter {
 public:
  BlockFitter(const Model& model, const ReconstructionBlock& block, ThreadPool* pool)
      : model_(model), g_(model.graph), block_(block), pool_(pool) {}

  Status Init(const TensorMap& example_inputs, const TensorMap& example_targets, int threads) {
    threads_ = threads;
    Model& sub = sub_;
    sub.ir_version = model_.ir_version;
    sub.opset_imports = model_.opset_imports;
    Graph& sg = sub.graph;
    sg.name = "block";
    std::set<std::string> params(block_.params.begin(), block_.params.end());
    for (size_t i : block_.nodes) {
      sg.nodes.push_back(g_.nodes[i]);
      for (const auto& in : g_.nodes[i].inputs) {
        auto it = g_.initializers.find(in);
        if (!in.empty() && it != g_.initializers.end() && !params.count(in)) sg.initializers[in] = it->second;
      }
      for (const auto& out : g_.nodes[i].outputs)
        if (!out.empty() && std::find(block_.outputs.begin(), block_.outputs.end(), out) == block_.outputs.end())
          extra_.push_back(out);
    }
    for (const auto& in : block_.inputs) {
      ValueInfo vi;
      vi.name = in;
      auto it = example_inputs.find(in);
      if (it == example_inputs.end()) return Status::Internal("reconstruction: block input '" + in + "' not tapped");
      vi.dtype = it->second.dtype();
      sg.inputs.push_back(vi);
    }
    for (size_t p = 0; p < block_.params.size(); ++p) params_.push_back(g_.initializers.at(block_.params[p]).Clone());
    for (const auto& out : block_.outputs) {
      ValueInfo vi;
      vi.name = out;
      auto it = example_targets.find(out);
      if (it == example_targets.end()) return Status::Internal("reconstruction: block output '" + out + "' not tapped");
      vi.dtype = it->second.dtype();
      sg.outputs.push_back(vi);
    }
    return Rebuild();
  }

  std::vector<Tensor>& params() { return params_; }
  // After the params changed: the next Forward runs them.
  void ParamsChanged() { stale_ = true; }

  // Forward on one batch; fills values_ (every value of the block) and
  // returns sum |y - t|^2 and sum |t|^2 over the outputs.
  Status Forward(const TensorMap& inputs, const TensorMap& targets, bool keep_values, double* err, double* ref) {
    if (stale_) SPARQ_RETURN_IF_ERROR(Rebuild());
    RunOptions ro;
    if (keep_values) ro.extra_outputs = extra_;
    values_.clear();
    SPARQ_RETURN_IF_ERROR(exec_->Run(inputs, &values_, ro));
    for (auto& kv : inputs) values_.emplace(kv.first, kv.second);
    for (size_t p = 0; p < params_.size(); ++p) values_.emplace(block_.params[p], params_[p]);
    *err = 0.0, *ref = 0.0;
    for (const auto& out : block_.outputs) {
      const Tensor& y = values_.at(out);
      const Tensor& t = targets.at(out);
      if (y.shape() != t.shape() || y.dtype() != DataType::kFloat32 || t.dtype() != DataType::kFloat32)
        return Status::InvalidArgument("reconstruction: block output '" + out + "' is " + ShapeToString(y.shape()) +
                                       " but the dense model's is " + ShapeToString(t.shape()));
      const float* yp = y.data<float>();
      const float* tp = t.data<float>();
      for (int64_t i = 0; i < y.numel(); ++i) {
        const double d = static_cast<double>(yp[i]) - tp[i];
        *err += d * d;
        *ref += static_cast<double>(tp[i]) * tp[i];
      }
    }
    if (!std::isfinite(*err)) return Status::InvalidArgument("reconstruction: the block output is not finite");
    return Status::OK();
  }

  // Gradients of mean |y - t|^2 w.r.t. the params, after Forward(keep_values).
  Status Backward(const TensorMap& targets, std::vector<std::vector<float>>* param_grads) {
    grads_.clear();
    int64_t count = 0;
    for (const auto& out : block_.outputs) count += values_.at(out).numel();
    const float scale = 2.0f / static_cast<float>(std::max<int64_t>(count, 1));
    for (const auto& out : block_.outputs) {
      const Tensor& y = values_.at(out);
      const float* yp = y.data<float>();
      const float* tp = targets.at(out).data<float>();
      std::vector<float> d(static_cast<size_t>(y.numel()));
      for (size_t i = 0; i < d.size(); ++i) d[i] = scale * (yp[i] - tp[i]);
      grads_[out] = std::move(d);
    }
    std::set<std::string> needs(block_.params.begin(), block_.params.end());
    std::vector<bool> on_path(block_.nodes.size(), false);
    for (size_t j = 0; j < block_.nodes.size(); ++j) {
      const Node& node = g_.nodes[block_.nodes[j]];
      for (const auto& in : node.inputs) on_path[j] = on_path[j] || (!in.empty() && needs.count(in));
      if (on_path[j])
        for (const auto& out : node.outputs) needs.insert(out);
    }
    for (size_t j = block_.nodes.size(); j-- > 0;) {
      if (!on_path[j]) continue;
      const Node& node = g_.nodes[block_.nodes[j]];
      auto gy = grads_.find(node.outputs[0]);
      if (gy == grads_.end()) continue;  // nothing downstream reads it
      Status st = NodeBackward(node, gy->second, needs);
      if (!st.ok()) return st.WithContext("reconstruction backward of " + node.Describe());
    }
    param_grads->resize(params_.size());
    for (size_t p = 0; p < params_.size(); ++p) {
      auto it = grads_.find(block_.params[p]);
      (*param_grads)[p] = it != grads_.end() ? std::move(it->second)
                                             : std::vector<float>(static_cast<size_t>(params_[p].numel()), 0.0f);
    }
    return Status::OK();
  }

 private:
  // The block's executor with the current params as its initializers (so the
  // CPU's prepacked Conv / MatMul rows take them, as in the model).
  Status Rebuild() {
    for (size_t p = 0; p < params_.size(); ++p) sub_.graph.initializers[block_.params[p]] = params_[p].Clone();
    exec_.reset();
    SPARQ_ASSIGN_OR_RETURN(exec_, Executor::Create(sub_, ExecutorOptions{threads_}));
    stale_ = false;
    return Status::OK();
  }

  const Tensor* Value(const std::string& name) const {
    if (name.empty()) return nullptr;
    auto it = values_.find(name);
    if (it != values_.end()) return &it->second;
    auto w = g_.initializers.find(name);
    return w != g_.initializers.end() ? &w->second : nullptr;
  }

  StatusOr<const Tensor*> FloatValue(const std::string& name) const {
    const Tensor* t = Value(name);
    if (!t) return Status::Internal("value '" + name + "' is not available");
    if (t->dtype() != DataType::kFloat32) return Status::NotSupported("value '" + name + "' is not float32");
    return t;
  }

  void AddGrad(const std::string& name, std::vector<float> g) {
    auto it = grads_.find(name);
    if (it == grads_.end()) {
      grads_[name] = std::move(g);
      return;
    }
    for (size_t i = 0; i < g.size(); ++i) it->second[i] += g[i];
  }

  Status NodeBackward(const Node& n, const std::vector<float>& dy_vec, const std::set<std::string>& needs) {
    const std::string& op = n.op_type;
    auto want = [&](size_t k) { return k < n.inputs.size() && !n.inputs[k].empty() && needs.count(n.inputs[k]) > 0; };
    auto buffer = [&](size_t k) -> std::vector<float> {
      const Tensor* t = Value(n.inputs[k]);
      return std::vector<float>(static_cast<size_t>(t ? t->numel() : 0));
    };
    const float* dy = dy_vec.data();
    SPARQ_ASSIGN_OR_RETURN(const Tensor* y, FloatValue(n.outputs[0]));
    if (op == "Conv") {
      SPARQ_ASSIGN_OR_RETURN(const Tensor* x, FloatValue(n.inputs[0]));
      SPARQ_ASSIGN_OR_RETURN(const Tensor* w, FloatValue(n.inputs[1]));
      ConvParams p;
      p.group = n.attr_int("group", 1);
      AutoPad ap;
      SPARQ_RETURN_IF_ERROR(ReadWindowAttributes(n, &p.window, &ap));
      Shape ys;
      SPARQ_RETURN_IF_ERROR(PrepareConv(x->shape(), w->shape(), ap, &p, &ys));
      std::vector<float> dx = want(0) ? buffer(0) : std::vector<float>{}, dw = want(1) ? buffer(1) : std::vector<float>{},
                         db = want(2) ? buffer(2) : std::vector<float>{};
      SPARQ_RETURN_IF_ERROR(ConvBackwardRef<float>(p, x->shape(), x->data<float>(), w->shape(), w->data<float>(), ys, dy,
                                                   want(0) ? dx.data() : nullptr, want(1) ? dw.data() : nullptr,
                                                   want(2) ? db.data() : nullptr, pool_, FastGemmF32));
      if (want(0)) AddGrad(n.inputs[0], std::move(dx));
      if (want(1)) AddGrad(n.inputs[1], std::move(dw));
      if (want(2)) AddGrad(n.inputs[2], std::move(db));
      return Status::OK();
    }
    if (op == "MatMul" || op == "Gemm") {
      SPARQ_ASSIGN_OR_RETURN(const Tensor* a, FloatValue(n.inputs[0]));
      SPARQ_ASSIGN_OR_RETURN(const Tensor* b, FloatValue(n.inputs[1]));
      std::vector<float> da = want(0) ? buffer(0) : std::vector<float>{}, db = want(1) ? buffer(1) : std::vector<float>{};
      if (op == "MatMul") {
        SPARQ_RETURN_IF_ERROR(MatMulBackwardRef<float>(a->shape(), a->data<float>(), b->shape(), b->data<float>(), dy,
                                                       want(0) ? da.data() : nullptr, want(1) ? db.data() : nullptr,
                                                       pool_, FastGemmF32));
      } else {
        const Tensor* c = n.inputs.size() > 2 ? Value(n.inputs[2]) : nullptr;
        std::vector<float> dc = want(2) ? buffer(2) : std::vector<float>{};
        Shape cs = c ? c->shape() : Shape{};
        if (c && cs.empty()) cs = {1};
        SPARQ_RETURN_IF_ERROR(GemmBackwardRef<float>(
            a->shape(), a->data<float>(), b->shape(), b->data<float>(), cs, n.attr_int("transA", 0) != 0,
            n.attr_int("transB", 0) != 0, n.attr_float("alpha", 1.0f), n.attr_float("beta", 1.0f), dy,
            want(0) ? da.data() : nullptr, want(1) ? db.data() : nullptr, want(2) ? dc.data() : nullptr, pool_,
            FastGemmF32));
        if (want(2)) AddGrad(n.inputs[2], std::move(dc));
      }
      if (want(0)) AddGrad(n.inputs[0], std::move(da));
      if (want(1)) AddGrad(n.inputs[1], std::move(db));
      return Status::OK();
    }
    static const std::map<std::string, BinaryGradOp> binary = {
        {"Add", BinaryGradOp::kAdd}, {"Sub", BinaryGradOp::kSub}, {"Mul", BinaryGradOp::kMul}, {"Div", BinaryGradOp::kDiv}};
    if (auto bo = binary.find(op); bo != binary.end()) {
      SPARQ_ASSIGN_OR_RETURN(const Tensor* a, FloatValue(n.inputs[0]));
      SPARQ_ASSIGN_OR_RETURN(const Tensor* b, FloatValue(n.inputs[1]));
      std::vector<float> da = want(0) ? buffer(0) : std::vector<float>{}, db = want(1) ? buffer(1) : std::vector<float>{};
      SPARQ_RETURN_IF_ERROR(BinaryBackwardRef<float>(bo->second, a->shape(), a->data<float>(), b->shape(),
                                                     b->data<float>(), y->shape(), dy, want(0) ? da.data() : nullptr,
                                                     want(1) ? db.data() : nullptr));
      if (want(0)) AddGrad(n.inputs[0], std::move(da));
      if (want(1)) AddGrad(n.inputs[1], std::move(db));
      return Status::OK();
    }
    if (!want(0) && op != "Concat") return Status::OK();
    static const std::map<std::string, UnaryGradOp> unary = {
        {"Relu", UnaryGradOp::kRelu},       {"Clip", UnaryGradOp::kClip},         {"Sigmoid", UnaryGradOp::kSigmoid},
        {"HardSigmoid", UnaryGradOp::kHardSigmoid}, {"HardSwish", UnaryGradOp::kHardSwish}, {"Tanh", UnaryGradOp::kTanh},
        {"Erf", UnaryGradOp::kErf}};
    if (auto uo = unary.find(op); uo != unary.end() || IdentityGradOps().count(op)) {
      SPARQ_ASSIGN_OR_RETURN(const Tensor* x, FloatValue(n.inputs[0]));
      double a = 0, b = 0;
      UnaryGradOp u = UnaryGradOp::kIdentity;
      if (uo != unary.end()) u = uo->second;
      if (op == "Clip") {
        a = n.inputs.size() > 1 ? Scalar(Value(n.inputs[1]), -std::numeric_limits<double>::infinity())
                                : n.attr_float("min", -std::numeric_limits<float>::infinity());
        b = n.inputs.size() > 2 ? Scalar(Value(n.inputs[2]), std::numeric_limits<double>::infinity())
                                : n.attr_float("max", std::numeric_limits<float>::infinity());
      } else if (op == "HardSigmoid") {
        a = n.attr_float("alpha", 0.2f);
        b = n.attr_float("beta", 0.5f);
      }
      std::vector<float> dx = buffer(0);
      UnaryBackwardRef<float>(u, a, b, x->numel(), x->data<float>(), dy, dx.data());
      AddGrad(n.inputs[0], std::move(dx));
      return Status::OK();
    }
    if (op == "Softmax") {
      Shape s = y->shape();
      int64_t axis = n.attr_int("axis", model_.opset() >= 13 ? -1 : 1);
      if (model_.opset() < 13) {  // coerced to 2-D at axis
        const int64_t r = static_cast<int64_t>(s.size());
        if (axis < 0) axis += r;
        int64_t outer = 1;
        for (int64_t d = 0; d < axis; ++d) outer *= s[static_cast<size_t>(d)];
        s = {outer, y->numel() / std::max<int64_t>(outer, 1)};
        axis = 1;
      }
      std::vector<float> dx = buffer(0);
      SPARQ_RETURN_IF_ERROR(SoftmaxBackwardRef<float>(s, axis, y->data<float>(), dy, dx.data()));
      AddGrad(n.inputs[0], std::move(dx));
      return Status::OK();
    }
    if (op == "LayerNormalization") {
      SPARQ_ASSIGN_OR_RETURN(const Tensor* x, FloatValue(n.inputs[0]));
      SPARQ_ASSIGN_OR_RETURN(const Tensor* scale, FloatValue(n.inputs[1]));
      std::vector<float> dx = buffer(0);
      SPARQ_RETURN_IF_ERROR(LayerNormBackwardRef<float>(x->shape(), n.attr_int("axis", -1), n.attr_float("epsilon", 1e-5f),
                                                        x->data<float>(), scale->data<float>(), dy, dx.data(), nullptr,
                                                        nullptr));
      AddGrad(n.inputs[0], std::move(dx));
      return Status::OK();
    }
    if (op == "Transpose") {
      const Tensor* x = Value(n.inputs[0]);
      std::vector<float> dx = buffer(0);
      SPARQ_RETURN_IF_ERROR(TransposeBackwardRef<float>(x->shape(), n.attr_ints("perm"), dy, dx.data()));
      AddGrad(n.inputs[0], std::move(dx));
      return Status::OK();
    }
    if (op == "Pad") {
      const Tensor* x = Value(n.inputs[0]);
      std::vector<int64_t> pads = n.attr_ints("pads");
      if (n.inputs.size() > 1 && !n.inputs[1].empty()) {
        const Tensor* pt = Value(n.inputs[1]);
        if (!pt) return Status::NotSupported("Pad's pads are not a constant");
        pads = pt->ToInt64Vector();
      }
      std::vector<float> dx = buffer(0);
      SPARQ_RETURN_IF_ERROR(PadBackwardRef<float>(x->shape(), pads, dy, dx.data()));
      AddGrad(n.inputs[0], std::move(dx));
      return Status::OK();
    }
    if (op == "GlobalAveragePool") {
      const Tensor* x = Value(n.inputs[0]);
      std::vector<float> dx = buffer(0);
      SPARQ_RETURN_IF_ERROR(GlobalAveragePoolBackwardRef<float>(x->shape(), dy, dx.data()));
      AddGrad(n.inputs[0], std::move(dx));
      return Status::OK();
    }
    if (op == "ReduceSum" || op == "ReduceMean") {
      const Tensor* x = Value(n.inputs[0]);
      std::vector<int64_t> axes = n.attr_ints("axes");
      if (n.inputs.size() > 1 && !n.inputs[1].empty()) {
        const Tensor* at = Value(n.inputs[1]);
        if (!at) return Status::NotSupported("the reduction's axes are not a constant");
        axes = at->ToInt64Vector();
      }
      const int64_t r = static_cast<int64_t>(x->rank());
      if (axes.empty() && n.attr_int("noop_with_empty_axes", 0) == 0)
        for (int64_t d = 0; d < r; ++d) axes.push_back(d);
      Shape keep = x->shape();
      int64_t count = 1;
      for (int64_t a : axes) {
        if (a < 0) a += r;
        if (a < 0 || a >= r) return Status::InvalidArgument("reduction axis out of range");
        count *= keep[static_cast<size_t>(a)];
        keep[static_cast<size_t>(a)] = 1;
      }
      std::vector<float> dx = buffer(0);
      SPARQ_RETURN_IF_ERROR(ReduceBackwardRef<float>(x->shape(), keep, op == "ReduceMean" ? 1.0 / std::max<int64_t>(count, 1) : 1.0,
                                                     dy, dx.data()));
      AddGrad(n.inputs[0], std::move(dx));
      return Status::OK();
    }
    if (op == "Concat") {
      std::vector<Shape> shapes;
      std::vector<std::vector<float>> dxs(n.inputs.size());
      std::vector<float*> ptrs;
      for (size_t k = 0; k < n.inputs.size(); ++k) {
        const Tensor* x = Value(n.inputs[k]);
        if (!x) return Status::Internal("Concat input missing");
        shapes.push_back(x->shape());
        if (want(k)) dxs[k].resize(static_cast<size_t>(x->numel()));
        ptrs.push_back(want(k) ? dxs[k].data() : nullptr);
      }
      SPARQ_RETURN_IF_ERROR(ConcatBackwardRef<float>(shapes, n.attr_int("axis", 0), dy, ptrs));
      for (size_t k = 0; k < n.inputs.size(); ++k)
        if (want(k)) AddGrad(n.inputs[k], std::move(dxs[k]));
      return Status::OK();
    }
    return Status::NotSupported("no backward for " + op);
  }

  const Model& model_;
  const Graph& g_;
  const ReconstructionBlock& block_;
  ThreadPool* pool_;
  Model sub_;
  int threads_ = 0;
  bool stale_ = false;
  std::unique_ptr<Executor> exec_;
  std::vector<std::string> extra_;
  std::vector<Tensor> params_;
  TensorMap values_;
  std::map<std::string, std::vector<float>> grads_;
};

Status SetWeight(Model* m, const std::string& name, const Tensor& value) {
  auto it = m->graph.initializers.find(name);
  if (it != m->graph.initializers.end()) {
    it->second = value.Clone();
    return Status::OK();
  }
  for (Node& n : m->graph.nodes) {
    if (n.op_type != "Constant" || n.outputs.empty() || n.outputs[0] != name) continue;
    Attribute* a = n.mutable_attr("value");
    if (!a) break;
    a->t = value.Clone();
    return Status::OK();
  }
  return Status::NotFound("reconstruction: weight '" + name + "' is neither an initializer nor a Constant's value");
}

}  // namespace

StatusOr<BlockReconstructionReport> ReconstructBlocks(const Model& dense, Model* compressed, const BatchSource& data,
                                                      const BlockReconstructionOptions& options) {
  using Clock = std::chrono::steady_clock;
  BlockReconstructionReport report;
  if (!data) return Status::InvalidArgument("reconstruction needs calibration data, and none was given");
  if (options.iterations < 0 || !(options.learning_rate > 0) || options.block_layers < 1)
    return Status::InvalidArgument("reconstruction: iterations must be >= 0, learning_rate > 0, block_layers >= 1");
  if (dense.graph.nodes.size() != compressed->graph.nodes.size())
    return Status::InvalidArgument("reconstruction: the dense and the compressed model have different graphs");
  Model folded = *compressed;
  SPARQ_RETURN_IF_ERROR(FoldConstants(&folded).status().WithContext("reconstruction"));
  SPARQ_RETURN_IF_ERROR(folded.graph.TopoSort());
  SPARQ_ASSIGN_OR_RETURN(std::vector<ReconstructionBlock> blocks, FindReconstructionBlocks(folded, options.block_layers));
  ThreadPool* pool = SharedThreadPool(options.threads);
  SPARQ_ASSIGN_OR_RETURN(auto dense_exec, Executor::Create(dense, ExecutorOptions{options.threads}));
  std::vector<TensorMap> batches;
  {
    BatchFn next = data();
    if (!next) return Status::InvalidArgument("the calibration data source returned no reader");
    while (true) {
      TensorMap b;
      SPARQ_ASSIGN_OR_RETURN(bool more, next(&b));
      if (!more) break;
      batches.push_back(std::move(b));
    }
  }
  if (batches.empty()) return Status::InvalidArgument("reconstruction: the calibration data holds no batch");
  report.batches = static_cast<int64_t>(batches.size());
  // Fit on 3 of every 4 batches, judge the checkpoints on the 4th (the
  // held-out split of quant/holdout.h); with fewer batches all do both.
  const HoldoutSplit split{4, report.batches, report.batches >= 4};
  std::vector<size_t> fit_batches, held_batches;
  for (size_t b = 0; b < batches.size(); ++b) {
    if (split.IsFit(static_cast<int64_t>(b))) fit_batches.push_back(b);
    if (split.IsHeld(static_cast<int64_t>(b))) held_batches.push_back(b);
  }

  for (const ReconstructionBlock& block : blocks) {
    const auto start = Clock::now();
    BlockReconstructionReport::Block r;
    r.first_node = folded.graph.nodes[block.nodes.front()].Describe();
    r.last_node = folded.graph.nodes[block.nodes.back()].Describe();
    r.weighted_layers = block.weighted_layers;
    auto log = [&](const std::string& line) {
      if (options.log) options.log(line);
    };
    if (!block.unsupported.empty() || block.params.empty() || options.iterations == 0) {
      r.skipped = !block.unsupported.empty() ? "no backward for " + block.unsupported
                  : block.params.empty()     ? "no weights to fit"
                                             : "iterations: 0";
      log("block " + r.first_node + " .. " + r.last_node + ": left to least squares (" + r.skipped + ")");
      report.blocks.push_back(r);
      continue;
    }
    // Inputs from the compressed model fitted so far, targets from the dense one.
    SPARQ_ASSIGN_OR_RETURN(auto comp_exec, Executor::Create(folded, ExecutorOptions{options.threads}));
    std::vector<TensorMap> inputs(batches.size()), targets(batches.size());
    for (size_t b = 0; b < batches.size(); ++b) {
      SPARQ_RETURN_IF_ERROR(Tap(*comp_exec, batches[b], block.inputs, &inputs[b]));
      SPARQ_RETURN_IF_ERROR(Tap(*dense_exec, batches[b], block.outputs, &targets[b]));
    }
    comp_exec.reset();
    BlockFitter fit(folded, block, pool);
    SPARQ_RETURN_IF_ERROR(fit.Init(inputs[0], targets[0], options.threads).WithContext("block " + r.first_node));
    auto total_error = [&](double* rel) -> Status {
      double err = 0, ref = 0;
      for (size_t b : held_batches) {
        double e, t;
        SPARQ_RETURN_IF_ERROR(fit.Forward(inputs[b], targets[b], false, &e, &t));
        err += e, ref += t;
      }
      *rel = ref > 0 ? err / ref : err;
      return Status::OK();
    };
    SPARQ_RETURN_IF_ERROR(total_error(&r.error_before));
    if (r.error_before < 1e-10) {  // nothing pruned here (or nothing lost): no fit
      r.error_after = r.error_before;
      r.skipped = "already exact";
      r.seconds = std::chrono::duration<double>(Clock::now() - start).count();
      log("block " + r.first_node + " .. " + r.last_node + ": relative output error " + std::to_string(r.error_before) +
          ", nothing to fit");
      report.blocks.push_back(r);
      continue;
    }
    std::vector<Tensor> start_params;
    std::vector<AdamState> adam;
    std::vector<std::vector<uint8_t>> masks(block.params.size());
    AdamOptions ao;
    ao.learning_rate = options.learning_rate;
    for (size_t p = 0; p < block.params.size(); ++p) {
      Tensor& w = fit.params()[p];
      start_params.push_back(w.Clone());
      adam.emplace_back(w.numel(), ao);
      if (block.masked[p]) {
        masks[p].resize(static_cast<size_t>(w.numel()));
        const float* v = w.data<float>();
        for (int64_t i = 0; i < w.numel(); ++i) masks[p][i] = v[i] != 0.0f;
      }
    }
    std::vector<std::vector<float>> grads;
    const double pi = 3.14159265358979323846;
    // Checkpoints: the error on all batches every quarter of the iterations;
    // the best weights seen (the start included) are kept.
    std::vector<Tensor> best_params = start_params;
    double best_error = r.error_before;
    const int check_every = std::max(1, options.iterations / 4);
    for (int it = 0; it < options.iterations; ++it) {
      const size_t b = fit_batches[static_cast<size_t>(it) % fit_batches.size()];
      double e, t;
      SPARQ_RETURN_IF_ERROR(fit.Forward(inputs[b], targets[b], true, &e, &t));
      SPARQ_RETURN_IF_ERROR(fit.Backward(targets[b], &grads));
      const double lr = options.learning_rate * 0.5 * (1.0 + std::cos(pi * it / options.iterations));
      for (size_t p = 0; p < block.params.size(); ++p) {
        adam[p].set_learning_rate(lr);
        adam[p].Step(fit.params()[p].data<float>(), grads[p].data(), masks[p].empty() ? nullptr : masks[p].data());
      }
      fit.ParamsChanged();
      if ((it + 1) % check_every == 0 || it + 1 == options.iterations) {
        double e_now;
        SPARQ_RETURN_IF_ERROR(total_error(&e_now));
        if (e_now < best_error) {
          best_error = e_now;
          for (size_t p = 0; p < block.params.size(); ++p) best_params[p] = fit.params()[p].Clone();
        }
      }
    }
    r.error_after = best_error;
    r.kept = best_error < r.error_before;
    for (size_t p = 0; p < block.params.size(); ++p) fit.params()[p] = best_params[p];
    fit.ParamsChanged();
    for (size_t p = 0; p < block.params.size(); ++p) {
      SPARQ_RETURN_IF_ERROR(SetWeight(&folded, block.params[p], fit.params()[p]));
      SPARQ_RETURN_IF_ERROR(SetWeight(compressed, block.params[p], fit.params()[p]));
    }
    r.seconds = std::chrono::duration<double>(Clock::now() - start).count();
    char line[512];
    std::snprintf(line, sizeof line, "block %s .. %s (%lld layers): relative output error %.4g -> %.4g%s (%.2f s)",
                  r.first_node.c_str(), r.last_node.c_str(), static_cast<long long>(r.weighted_layers), r.error_before,
                  r.error_after, r.kept ? "" : " (fit not better: kept the start)", r.seconds);
    log(line);
    report.blocks.push_back(r);
  }
  return report;
}

}  // namespace sparq
