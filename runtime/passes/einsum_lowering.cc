#include "runtime/passes/einsum_lowering.h"

#include <algorithm>
#include <numeric>
#include <optional>
#include <set>

#include "kernels/ref/einsum.h"

namespace sparq {

namespace {

// Where each label of the operands and the output goes in the batched GEMM.
struct Plan {
  std::vector<int> batch, free_a, free_b, contract;  // labels; batch and free in output order
};

std::optional<Plan> PlanOf(const EinsumSpec& spec) {
  const std::vector<int>& a = spec.operands[0];
  const std::vector<int>& b = spec.operands[1];
  auto has = [](const std::vector<int>& v, int l) { return std::find(v.begin(), v.end(), l) != v.end(); };
  for (const std::vector<int>* labels : {&a, &b})
    if (std::set<int>(labels->begin(), labels->end()).size() != labels->size()) return std::nullopt;  // a diagonal
  Plan plan;
  for (int l : spec.output) {
    if (has(a, l) && has(b, l)) plan.batch.push_back(l);
    else if (has(a, l)) plan.free_a.push_back(l);
    else plan.free_b.push_back(l);
  }
  for (int l : a) {
    if (has(spec.output, l)) continue;
    if (!has(b, l)) return std::nullopt;  // summed over one operand alone
    plan.contract.push_back(l);
  }
  for (int l : b)
    if (!has(spec.output, l) && !has(a, l)) return std::nullopt;
  return plan;
}

std::vector<int> Concat(std::initializer_list<std::vector<int>> parts) {
  std::vector<int> out;
  for (const std::vector<int>& p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}

// Emits the nodes of one lowering into `nodes`, naming new values from
// `base` and adding the shape initializers to `g`.
class Emitter {
 public:
  Emitter(Graph& g, int64_t opset, std::string base, std::set<std::string>& names)
      : g_(g), opset_(opset), base_(std::move(base)), names_(names) {}

  // x with its dims permuted so that they read `to` (labels of x in `from`);
  // x itself when the order is already that.
  std::string Transpose(const std::string& x, const std::vector<int>& from, const std::vector<int>& to) {
    std::vector<int64_t> perm;
    for (int l : to) perm.push_back(std::find(from.begin(), from.end(), l) - from.begin());
    std::vector<int64_t> identity(perm.size());
    std::iota(identity.begin(), identity.end(), 0);
    if (perm == identity) return x;
    return Add("Transpose", {x}, {Attribute::Ints("perm", perm)});
  }
  // Reshape to `keep` leading dims as they are and the rest merged into one.
  std::string MergeTail(const std::string& x, size_t keep) {
    std::vector<int64_t> shape(keep, 0);
    shape.push_back(-1);
    return Add("Reshape", {x, Constant(Tensor::FromVector<int64_t>({static_cast<int64_t>(shape.size())}, shape))});
  }
  std::string Unsqueeze(const std::string& x, std::vector<int64_t> axes) { return Axes("Unsqueeze", x, std::move(axes)); }
  std::string Squeeze(const std::string& x, std::vector<int64_t> axes) { return Axes("Squeeze", x, std::move(axes)); }
  std::string MatMul(const std::string& a, const std::string& b) { return Add("MatMul", {a, b}); }
  // The last node's output renamed to `y` (the Einsum's output).
  void Finish(const std::string& last, const std::string& y) {
    for (std::string& out : nodes_.back().outputs)
      if (out == last) out = y;
  }
  std::vector<Node>& nodes() { return nodes_; }

 private:
  std::string Axes(const char* op, const std::string& x, std::vector<int64_t> axes) {
    if (axes.empty()) return x;
    if (opset_ >= 13) {
      const int64_t n = static_cast<int64_t>(axes.size());
      return Add(op, {x, Constant(Tensor::FromVector<int64_t>({n}, axes))});
    }
    return Add(op, {x}, {Attribute::Ints("axes", std::move(axes))});
  }
  std::string Fresh(const std::string& what) {
    std::string name = base_ + "/einsum_" + what;
    for (int k = 1; names_.count(name); ++k) name = base_ + "/einsum_" + what + "_" + std::to_string(k);
    names_.insert(name);
    return name;
  }
  std::string Constant(Tensor t) {
    const std::string name = Fresh("shape");
    g_.initializers.emplace(name, std::move(t));
    return name;
  }
  std::string Add(const std::string& op, std::vector<std::string> inputs, std::vector<Attribute> attrs = {}) {
    Node n;
    n.name = Fresh(op);
    n.op_type = op;
    n.inputs = std::move(inputs);
    n.outputs = {Fresh(op + "_out")};
    n.attributes = std::move(attrs);
    nodes_.push_back(std::move(n));
    return nodes_.back().outputs[0];
  }

  Graph& g_;
  int64_t opset_;
  std::string base_;
  std::set<std::string>& names_;
  std::vector<Node> nodes_;
};

// The nodes computing einsum `n` by MatMul, or nothing when it is not lowered.
std::optional<std::vector<Node>> Lower(const Node& n, Graph& g, int64_t opset, std::set<std::string>& names) {
  if (n.op_type != "Einsum" || !n.domain.empty() || n.inputs.size() != 2 || n.outputs.size() != 1) return std::nullopt;
  if (n.inputs[0].empty() || n.inputs[1].empty() || n.outputs[0].empty()) return std::nullopt;
  const std::string equation = n.attr_string("equation", "");
  if (equation.find('.') != std::string::npos) return std::nullopt;
  // Without an ellipsis each term's rank is its letter count.
  std::vector<int64_t> ranks(1, 0);
  for (char c : equation.substr(0, equation.find("->"))) {
    if (c == ',') ranks.push_back(0);
    else if (c != ' ') ++ranks.back();
  }
  StatusOr<EinsumSpec> spec = ParseEinsum(equation, ranks);
  if (!spec.ok()) return std::nullopt;  // the reference kernel names the error at run time
  std::optional<Plan> plan = PlanOf(*spec);
  if (!plan) return std::nullopt;
  const std::vector<int>& a = spec->operands[0];
  const std::vector<int>& b = spec->operands[1];
  const size_t nb = plan->batch.size(), p = plan->free_a.size(), q = plan->free_b.size(), c = plan->contract.size();
  const size_t pp = p > 0 ? p - 1 : 0, qq = q > 0 ? q - 1 : 0;  // free dims that become batch dims

  Emitter e(g, opset, n.name.empty() ? n.outputs[0] : n.name, names);
  // A as [batch, fa_1..fa_{p-1}, 1 x qq, M, K].
  std::string x = e.Transpose(n.inputs[0], a, Concat({plan->batch, plan->free_a, plan->contract}));
  if (c > 1) x = e.MergeTail(x, nb + p);
  const int64_t rank_a = static_cast<int64_t>(nb + pp + qq + 2);
  std::vector<int64_t> axes;
  for (size_t k = 0; k < qq; ++k) axes.push_back(static_cast<int64_t>(nb + pp + k));
  if (p == 0) axes.push_back(rank_a - 2);
  if (c == 0) axes.push_back(rank_a - 1);
  x = e.Unsqueeze(x, axes);

  // B as [batch, 1 x pp, fb_1..fb_{q-1}, K, N].
  std::string w;
  std::vector<int> fb_head(plan->free_b.begin(), plan->free_b.begin() + qq);
  std::vector<int> fb_last(plan->free_b.begin() + qq, plan->free_b.end());
  if (c > 1 && q > 0) {
    w = e.Transpose(n.inputs[1], b, Concat({plan->batch, plan->free_b, plan->contract}));
    w = e.MergeTail(w, nb + q);  // [batch, fb..., K]
    std::vector<int64_t> swap(nb + q + 1);
    std::iota(swap.begin(), swap.end(), 0);
    std::swap(swap[nb + q - 1], swap[nb + q]);
    std::vector<int> from, to;
    for (size_t k = 0; k < swap.size(); ++k) from.push_back(static_cast<int>(k)), to.push_back(static_cast<int>(swap[k]));
    w = e.Transpose(w, from, to);
  } else {
    w = e.Transpose(n.inputs[1], b, Concat({plan->batch, fb_head, plan->contract, fb_last}));
    if (c > 1) w = e.MergeTail(w, nb);  // q == 0: [batch, K]
  }
  const int64_t rank_b = static_cast<int64_t>(nb + pp + qq + 2);
  axes.clear();
  for (size_t k = 0; k < pp; ++k) axes.push_back(static_cast<int64_t>(nb + k));
  if (c == 0) axes.push_back(rank_b - 2);
  if (q == 0) axes.push_back(rank_b - 1);
  w = e.Unsqueeze(w, axes);

  // [batch, fa_1..fa_{p-1}, fb_1..fb_{q-1}, M, N], then the 1s of an absent M / N dropped.
  std::string y = e.MatMul(x, w);
  axes.clear();
  if (p == 0) axes.push_back(rank_a - 2);
  if (q == 0) axes.push_back(rank_a - 1);
  y = e.Squeeze(y, axes);
  std::vector<int> fa_head(plan->free_a.begin(), plan->free_a.begin() + pp);
  std::vector<int> fa_last(plan->free_a.begin() + pp, plan->free_a.end());
  y = e.Transpose(y, Concat({plan->batch, fa_head, fb_head, fa_last, fb_last}), spec->output);
  e.Finish(y, n.outputs[0]);
  return std::move(e.nodes());
}

}  // namespace

std::vector<std::string> LowerEinsumToMatMul(Model* model) {
  Graph& g = model->graph;
  std::set<std::string> names;
  for (const ValueInfo& v : g.inputs) names.insert(v.name);
  for (const auto& kv : g.initializers) names.insert(kv.first);
  for (const Node& n : g.nodes) {
    names.insert(n.name);
    for (const std::string& out : n.outputs) names.insert(out);
  }
  std::vector<std::string> lowered;
  std::vector<Node> nodes;
  nodes.reserve(g.nodes.size());
  for (Node& n : g.nodes) {
    std::optional<std::vector<Node>> replacement = Lower(n, g, model->opset(), names);
    if (!replacement) {
      nodes.push_back(std::move(n));
      continue;
    }
    lowered.push_back(n.name);
    for (Node& r : *replacement) nodes.push_back(std::move(r));
  }
  g.nodes = std::move(nodes);
  return lowered;
}

}  // namespace sparq
