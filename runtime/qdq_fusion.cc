// Fuses QDQ patterns into integer operators, as onnxruntime and TensorRT do
// when they load a QDQ model:
//
//   DequantizeLinear(x_q) ─┐
//   DequantizeLinear(w_q) ─┼─ Conv ── QuantizeLinear ── y_q
//   DequantizeLinear(b_q) ─┘                  =>   QLinearConv(x_q, .., w_q, .., b_q) ── y_q
//
// and the same for MatMul (without bias) into QLinearMatMul. The fused node
// computes exact int32 sums and one requantization, where the QDQ graph
// rounds its float sums; the two differ by one step on values that sit near a
// rounding boundary, which is the difference a deployment runtime shows too.
//
// A pattern fuses only when every scale and zero point is a constant (one
// value per tensor; the weight's scale and zero point may be per output
// channel), the weight and bias are constants, the bias scale is the product
// of the input and weight scales (what sparq's and onnxruntime's writers
// produce), and the float output of Conv/MatMul goes to the QuantizeLinear
// alone. DequantizeLinear nodes left without readers are removed.
#include <cmath>
#include <map>
#include <set>

#include "runtime/qdq_fusion.h"

namespace sparq {
namespace {

class Fuser {
 public:
  explicit Fuser(Graph& g) : g_(g) {
    for (const auto& v : g.initializer_inputs) overridable_.insert(v.name);
    for (const auto& o : g.outputs) graph_outputs_.insert(o.name);
    for (size_t i = 0; i < g.nodes.size(); ++i) {
      for (const auto& out : g.nodes[i].outputs) producer_[out] = i;
      for (const auto& in : g.nodes[i].inputs)
        if (!in.empty()) consumers_[in].push_back(i);
    }
  }

  // The fused nodes' names.
  std::vector<std::string> Run() {
    std::vector<std::string> fused;
    for (size_t i = 0; i < g_.nodes.size(); ++i) {
      const Node& n = g_.nodes[i];
      if (n.domain.empty() && (n.op_type == "Conv" || n.op_type == "MatMul") && TryFuse(i)) fused.push_back(n.name);
    }
    if (fused.empty()) return fused;
    std::vector<Node> kept;
    for (size_t i = 0; i < g_.nodes.size(); ++i)
      if (!removed_.count(i)) kept.push_back(std::move(g_.nodes[i]));
    g_.nodes = std::move(kept);
    RemoveUnreadDequantizeNodes();
    return fused;
  }

 private:
  const Tensor* Constant(const std::string& name) const {
    if (name.empty() || overridable_.count(name)) return nullptr;
    auto it = g_.initializers.find(name);
    return it == g_.initializers.end() ? nullptr : &it->second;
  }
  // The DequantizeLinear node producing `value`, with its zero point given
  // unless `zero_point_optional` (an int32 bias's is 0 when absent).
  const Node* DequantizeProducing(const std::string& value, bool zero_point_optional = false) const {
    auto it = producer_.find(value);
    if (it == producer_.end() || removed_.count(it->second)) return nullptr;
    const Node& n = g_.nodes[it->second];
    if (n.op_type != "DequantizeLinear" || !n.domain.empty() || n.inputs.size() < 2) return nullptr;
    if (!zero_point_optional && (n.inputs.size() < 3 || n.inputs[2].empty())) return nullptr;
    return &n;
  }
  bool ScalarConstant(const std::string& name) const {
    const Tensor* t = Constant(name);
    return t != nullptr && t->numel() == 1;
  }

  bool TryFuse(size_t index) {
    const Node& n = g_.nodes[index];
    const bool conv = n.op_type == "Conv";
    if (n.outputs.size() != 1 || graph_outputs_.count(n.outputs[0])) return false;
    const auto readers = consumers_.find(n.outputs[0]);
    if (readers == consumers_.end() || readers->second.size() != 1) return false;
    const size_t q_index = readers->second[0];
    const Node& q = g_.nodes[q_index];
    if (q.op_type != "QuantizeLinear" || !q.domain.empty() || q.inputs.size() < 3 || q.inputs[0] != n.outputs[0] ||
        !ScalarConstant(q.inputs[1]) || !ScalarConstant(q.inputs[2])) {
      return false;
    }
    const Node* dx = DequantizeProducing(n.inputs.size() > 0 ? n.inputs[0] : "");
    const Node* dw = DequantizeProducing(n.inputs.size() > 1 ? n.inputs[1] : "");
    if (dx == nullptr || dw == nullptr || !ScalarConstant(dx->inputs[1]) || !ScalarConstant(dx->inputs[2])) return false;
    const Tensor* w = Constant(dw->inputs[0]);
    const Tensor* ws = Constant(dw->inputs[1]);
    const Tensor* wzp = Constant(dw->inputs[2]);
    if (w == nullptr || ws == nullptr || wzp == nullptr || ws->numel() != wzp->numel()) return false;
    if (ws->numel() > 1) {  // per channel: along Conv's output channels (axis 0) or MatMul's columns (axis 1)
      const int64_t axis = dw->attr_int("axis", 1);
      const int64_t want = conv ? 0 : 1;
      const auto rank = static_cast<int64_t>(w->rank());
      if (rank != (conv ? 4 : 2) || (axis != want && axis != want - rank)) return false;
    }
    Node fused;
    fused.name = n.name;
    fused.domain = "";
    fused.outputs = {q.outputs[0]};
    fused.attributes = conv ? n.attributes : std::vector<Attribute>{};
    fused.op_type = conv ? "QLinearConv" : "QLinearMatMul";
    fused.inputs = {dx->inputs[0], dx->inputs[1], dx->inputs[2], dw->inputs[0], dw->inputs[1], dw->inputs[2],
                    q.inputs[1],   q.inputs[2]};
    if (conv && n.inputs.size() > 2 && !n.inputs[2].empty()) {
      const Node* db = DequantizeProducing(n.inputs[2], /*zero_point_optional=*/true);
      if (db == nullptr || !BiasScaleMatches(*db, *Constant(dx->inputs[1]), *ws)) return false;
      fused.inputs.push_back(db->inputs[0]);
    } else if (!conv && n.inputs.size() > 2) {
      return false;
    }
    g_.nodes[index] = std::move(fused);
    removed_.insert(q_index);
    return true;
  }

  // b = b_scale * (b_q - b_zp) must equal the int32 bias of the integer
  // operator: b_q int32, zero point 0, b_scale = x_scale * w_scale.
  bool BiasScaleMatches(const Node& db, const Tensor& xs, const Tensor& ws) const {
    const Tensor* bq = Constant(db.inputs[0]);
    const Tensor* bs = Constant(db.inputs[1]);
    const bool has_zp = db.inputs.size() > 2 && !db.inputs[2].empty();
    const Tensor* bzp = has_zp ? Constant(db.inputs[2]) : nullptr;
    if (bq == nullptr || bs == nullptr || (has_zp && bzp == nullptr) || bq->dtype() != DataType::kInt32) return false;
    if (xs.dtype() != DataType::kFloat32 || ws.dtype() != DataType::kFloat32 || bs->dtype() != DataType::kFloat32)
      return false;
    if (bzp != nullptr) {
      if (bzp->dtype() != DataType::kInt32) return false;
      for (int64_t i = 0; i < bzp->numel(); ++i)
        if (bzp->data<int32_t>()[i] != 0) return false;
    }
    if (bs->numel() != ws.numel() && bs->numel() != 1) return false;
    for (int64_t i = 0; i < ws.numel(); ++i) {
      const float want = xs.data<float>()[0] * ws.data<float>()[i];
      const float have = bs->data<float>()[bs->numel() == 1 ? 0 : i];
      if (std::fabs(have - want) > 1e-6f * std::fabs(want)) return false;
    }
    return true;
  }

  void RemoveUnreadDequantizeNodes() {
    while (true) {
      std::set<std::string> read(graph_outputs_.begin(), graph_outputs_.end());
      for (const Node& n : g_.nodes) read.insert(n.inputs.begin(), n.inputs.end());
      const size_t before = g_.nodes.size();
      std::vector<Node> kept;
      for (Node& n : g_.nodes)
        if (!(n.op_type == "DequantizeLinear" && n.domain.empty() && !read.count(n.outputs[0]))) kept.push_back(std::move(n));
      g_.nodes = std::move(kept);
      if (g_.nodes.size() == before) return;
    }
  }

  Graph& g_;
  std::set<std::string> overridable_, graph_outputs_;
  std::map<std::string, size_t> producer_;
  std::map<std::string, std::vector<size_t>> consumers_;
  std::set<size_t> removed_;
};

}  // namespace

std::vector<std::string> FuseQdqToIntegerOps(Model* model) {
  if (model->opset() < 10) return {};  // QLinearConv / QLinearMatMul arrive in opset 10
  return Fuser(model->graph).Run();
}

}  // namespace sparq
