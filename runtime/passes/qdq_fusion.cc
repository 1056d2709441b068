// Fuses QDQ patterns into integer operators, as onnxruntime and TensorRT do
// when they load a QDQ model:
//
//   DequantizeLinear(x_q) ─┐
//   DequantizeLinear(w_q) ─┼─ Conv ── QuantizeLinear ── y_q
//   DequantizeLinear(b_q) ─┘                  =>   QLinearConv(x_q, .., w_q, .., b_q) ── y_q
//
// and the same for MatMul (without bias) into QLinearMatMul, whose B may also
// be an activation (attention's Q x K^T and P x V in onnxruntime's placement;
// per-tensor parameters on both sides; the fast kernel runs it batch by
// batch, kernels/cpu/quant_matmul.cc); a Gemm or a MatMul of constant 2-D
// weights whose float output no QuantizeLinear takes (a classifier's logits;
// every layer of the `inputs_only` placement, which sparq's search picks for
// transformers; TryFuseGemm) runs on integers too:
//
//   DequantizeLinear(x_q) ─┐
//   DequantizeLinear(w_q) ─┼─ Gemm ── y   =>   sparq.MatMulIntegerToFloat(x_q, w_q [transposed], ..) ── y
//   DequantizeLinear(b_q) ─┘                   (exact int32 sums on gemm_s8, one float scale per column)
//
// and so does a group-1 Conv with int8 weights and a float output that no
// QLinearConv takes (the `inputs_only` placement; YOLOv8n's layers before
// SiLU, magika's 1-D layer; TryFuseConvToFloat), as sparq.ConvIntegerToFloat
// on conv_s8; depthwise and grouped Convs stay float (the shape rule there).
//
// When a Relu or
// a Clip sits between the layer and its QuantizeLinear (the quantizer
// quantizes after a fusable activation, as onnxruntime and TensorRT do), the
// integer operator takes the activation's output scale and the activation
// stays on the integers:
//
//   .. Conv ── Relu|Clip ── QuantizeLinear(s, z) ── y_q
//        =>   QLinearConv(.., s, z) ── DequantizeLinear(s, z) ── Relu|Clip ── QuantizeLinear(s, z) ── y_q
//
// which is exact because Q(clamp(x, lo, hi)) = clamp(Q(x), Q(lo), Q(hi)) for
// the nondecreasing Q; the glue fusion below then turns the tail into a
// table folded into the QLinearConv (sparq.QLinearConvLut). The fused node
// computes exact int32 sums and one requantization, where the QDQ graph
// rounds its float sums; the two differ by one step on values that sit near a
// rounding boundary, which is the difference a deployment runtime shows too.
//
// A pattern fuses only when every scale and zero point is a constant (one
// value per tensor; the weight's scale and zero point may be per output
// channel), the weight (but for MatMul's activation B) and bias are
// constants, the bias scale is the product of the input and weight scales
// (what sparq's and onnxruntime's writers produce; a float32 constant bias
// is quantized to int32 at that scale, as onnxruntime's QOperator format
// stores it: QuantizeBias), and the float output of
// Conv/MatMul goes to the QuantizeLinear alone. DequantizeLinear nodes left
// without readers are removed.
//
// Then the float glue between the integer operators is fused into internal
// operators of domain "sparq" (version 1; defined and computed for
// reference in kernels/ref/qdq_fused_ops.cc), bit for bit what the float QDQ
// graph computes on the reference kernels:
//
//   DequantizeLinear(x_q) ── [unary ops]* ── QuantizeLinear ── y_q
//                                      =>   sparq.QLinearLut(x_q, table) ── y_q
//   DequantizeLinear(x_q) ── MaxPool ── [unary ops]* ── QuantizeLinear ── y_q
//                                      =>   MaxPool(x_q) ── sparq.QLinearLut(.., table) ── y_q
//                                           (no QLinearLut when its table is the identity)
//   DequantizeLinear(x_q) ── [move ops]+ ── QuantizeLinear ── y_q
//                                      =>   [move ops]+(x_q) [── sparq.QLinearLut(.., table)] ── y_q
//                                           (no QLinearLut when DQ -> Q is the identity: the
//                                           same parameters, onnxruntime's Q/DQ around Reshape)
//   DequantizeLinear(a_q) ─┐
//   DequantizeLinear(b_q) ─┴─ Add ── QuantizeLinear ── y_q
//                                      =>   sparq.QLinearAdd(a_q, .., b_q, .., y_scale, y_zp) ── y_q
//                                           (numpy broadcasting: bias rows, masks)
//   the same with Mul                  =>   sparq.QLinearMul(a_q, .., b_q, .., y_scale, y_zp) ── y_q
//                                           (GELU's product, LayerNorm's gamma)
//   DequantizeLinear(a_q), ... ── Concat ── QuantizeLinear ── y_q
//                                      =>   Concat([QLinearLut](a_q), ...) ── y_q
//                                           (a table per input unless its DQ -> Q is the identity;
//                                           an input may also be table steps over a DequantizeLinear,
//                                           and MaxPools over those: YOLO's SPPF, see TryFuseConcat)
//
// then a table that alone reads a QLinearConv's, QLinearAdd's or QLinearMul's output
// folds into it (and one that alone reads another table composes with it):
//
//   QLinearConv(x_q, ..) ── sparq.QLinearLut(.., table) ── y_q
//                                      =>   sparq.QLinearConvLut(x_q, .., B or "", table) ── y_q
//   sparq.QLinearAdd|Mul(a_q, ..) ── sparq.QLinearLut(.., table) ── y_q
//                                      =>   sparq.QLinearAdd|Mul(a_q, .., y_zp, table) ── y_q
//
// Between the glue and the folding, runtime/passes/island_fusion.cc computes each
// QuantizeLinear still left from the integers on its own where its float
// values branch (YOLO's C2f: SiLU -> Split / Concat / Resize / residual Add),
// and after the folding a Concat takes the tables that alone feed it
// (sparq.ConcatLut, FoldTablesIntoConcats).
//
// Last, a DequantizeLinear whose inputs are all constants becomes the
// initializer it computes (on its reference kernel, once).
//
// [unary ops]* are zero or more elementwise float ops whose result per
// element depends on that element only (Relu, Clip with constant bounds,
// LeakyRelu, Sigmoid, Tanh, HardSigmoid, HardSwish, Identity, ...; see
// kLutOps), and Add / Sub / Mul / Div / Pow of the value and a float32
// scalar (rank 0, or rank 1 [1] where x is known to have a rank: Paddle's
// exports) constant on either side, the constant an initializer, a Constant node or the
// DequantizeLinear of one (GELU's / sqrt(2), + 1, * 0.5 in onnxruntime's
// placement), and Add / Sub / Mul / Div of two values that both come from
// the pattern's one root through such steps (SiLU's x * Sigmoid(x), either
// order: a small graph rather than a chain, still one function of x_q; its
// inner values read by the pattern alone). [move ops]+ are Reshape, Transpose, Squeeze, Unsqueeze,
// Flatten, Slice, Expand on their input 0 (their other inputs stay as they
// are): they only move elements, so they commute with the table. The
// 256-entry table is made at executor creation by running the
// pattern's own nodes on their reference kernels over all 256 values of
// x_q's type, so it holds exactly the float graph's results. MaxPool moves
// before the table because DequantizeLinear (scale > 0) is nondecreasing and
// the integers are exact; it qualifies when every window holds a tap of x
// (dilations 1, each pad below the kernel), and has no Indices output.
//
// A glue pattern fuses only when every DequantizeLinear / QuantizeLinear has
// a constant float32 scale and a constant uint8/int8 zero point, one value
// each (per tensor), and every value inside the pattern (the unary, move
// ops' and MaxPool's and Add's outputs) is read by the next node of the
// pattern alone and is no graph output. A dequantized value that other nodes
// read too is fine: the pattern reads its integers and the DequantizeLinear
// stays for the others (it goes when no reader is left). Anything else is
// left as it is. Patterns are matched at each QuantizeLinear in graph order
// (move ops, then a table, then Add), so the rewrite is deterministic; before
// that pass, one pass (in reverse graph order: the largest pattern first)
// fuses the tables whose small graph crosses a QuantizeLinear ->
// DequantizeLinear pair of its own (onnxruntime's SiLU: DQ(Q(Sigmoid(v))) *
// v, the pair then being two more steps of the table).
#include <cmath>
#include <cstring>
#include <iterator>
#include <map>
#include <optional>
#include <set>

#include "graph/graph_editor.h"
#include "graph/value_index.h"
#include "kernels/op_context.h"
#include "kernels/registry.h"
#include "runtime/passes/dynamic_fusion.h"
#include "runtime/passes/island_fusion.h"
#include "runtime/passes/qdq_fusion.h"
#include "runtime/passes/qdq_patterns.h"
#include "runtime/passes/rewrite_util.h"

namespace sparq {
namespace {

// Drops DequantizeLinear nodes whose output nothing reads (no node, no graph
// output), repeatedly, in graph order.
void RemoveUnreadDequantizeNodes(Graph& g) {
  while (true) {
    const std::set<std::string> read = ValuesRead(g);
    const size_t before = g.nodes.size();
    std::vector<Node> kept;
    for (Node& n : g.nodes)
      if (!(n.op_type == "DequantizeLinear" && n.domain.empty() && !read.count(n.outputs[0]))) kept.push_back(std::move(n));
    g.nodes = std::move(kept);
    if (g.nodes.size() == before) return;
  }
}

}  // namespace

namespace {

class Fuser {
 public:
  explicit Fuser(Graph& g) : g_(g), index_(g), editor_(g) {
    for (const auto& v : g.initializer_inputs) overridable_.insert(v.name);
  }

  // The fused nodes' names.
  std::vector<std::string> Run() {
    std::vector<std::string> fused;
    for (size_t i = 0; i < g_.nodes.size(); ++i) {
      const Node& n = g_.nodes[i];
      if (n.domain.empty() && (n.op_type == "Conv" || n.op_type == "MatMul") && TryFuse(i)) {
        fused.push_back(n.name);
      } else if (n.domain.empty() && (n.op_type == "Gemm" || n.op_type == "MatMul") && TryFuseGemm(i)) {
        fused.push_back(n.name);
      } else if (n.domain.empty() && n.op_type == "Conv" && TryFuseConvToFloat(i)) {
        fused.push_back(n.name);
      }
    }
    if (fused.empty()) return fused;
    std::vector<Node> kept;
    for (size_t i = 0; i < g_.nodes.size(); ++i) {
      if (!removed_.count(i)) kept.push_back(std::move(g_.nodes[i]));
      auto after = inserted_after_.find(i);
      if (after != inserted_after_.end()) kept.push_back(std::move(after->second));
    }
    g_.nodes = std::move(kept);
    RemoveUnreadDequantizeNodes(g_);
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
    const std::optional<size_t> p = index_.Producer(value);
    if (!p || removed_.count(*p)) return nullptr;
    const Node& n = g_.nodes[*p];
    if (n.op_type != "DequantizeLinear" || !n.domain.empty() || n.inputs.size() < 2) return nullptr;
    if (!zero_point_optional && (n.inputs.size() < 3 || n.inputs[2].empty())) return nullptr;
    return &n;
  }
  bool ScalarConstant(const std::string& name) const {
    const Tensor* t = Constant(name);
    return t != nullptr && t->numel() == 1;
  }

  // Whether `bias` is a float32 [n] for a fused layer's input: a constant,
  // or a constant DequantizeLinear's float32 output (no output_dtype).
  bool IsFloatBiasVector(const std::string& bias, int64_t n) const {
    const Tensor* c = Constant(bias);
    if (c != nullptr) return c->dtype() == DataType::kFloat32 && c->rank() == 1 && c->dim(0) == n;
    const Node* db = DequantizeProducing(bias, /*zero_point_optional=*/true);
    const Tensor* bq = db != nullptr ? Constant(db->inputs[0]) : nullptr;
    if (bq == nullptr || bq->rank() != 1 || bq->dim(0) != n) return false;
    for (size_t i = 1; i < db->inputs.size(); ++i)
      if (!db->inputs[i].empty() && Constant(db->inputs[i]) == nullptr) return false;
    return Constant(db->inputs[1])->dtype() == DataType::kFloat32 && db->attr_int("output_dtype", 0) == 0;
  }

  bool TryFuse(size_t index) {
    const Node& n = g_.nodes[index];
    const bool conv = n.op_type == "Conv";
    if (n.outputs.size() != 1 || index_.IsGraphOutput(n.outputs[0])) return false;
    const std::vector<size_t>& readers = index_.Readers(n.outputs[0]);
    if (readers.size() != 1) return false;
    size_t q_index = readers[0];
    // A clamping activation between the layer and its QuantizeLinear.
    std::optional<size_t> act_index;
    {
      const Node& a = g_.nodes[q_index];
      if (a.domain.empty() && (a.op_type == "Relu" || a.op_type == "Clip") && a.outputs.size() == 1 &&
          !index_.IsGraphOutput(a.outputs[0]) && a.inputs[0] == n.outputs[0]) {
        const std::vector<size_t>& act_readers = index_.Readers(a.outputs[0]);
        if (act_readers.size() != 1) return false;
        act_index = q_index;
        q_index = act_readers[0];
      }
    }
    const Node& q = g_.nodes[q_index];
    const std::string& q_input = act_index ? g_.nodes[*act_index].outputs[0] : n.outputs[0];
    if (q.op_type != "QuantizeLinear" || !q.domain.empty() || q.inputs.size() < 3 || q.inputs[0] != q_input ||
        !ScalarConstant(q.inputs[1]) || !ScalarConstant(q.inputs[2])) {
      return false;
    }
    const Node* dx = DequantizeProducing(n.inputs.size() > 0 ? n.inputs[0] : "");
    const Node* dw = DequantizeProducing(n.inputs.size() > 1 ? n.inputs[1] : "");
    if (dx == nullptr || dw == nullptr || !ScalarConstant(dx->inputs[1]) || !ScalarConstant(dx->inputs[2])) return false;
    const Tensor* w = Constant(dw->inputs[0]);
    const Tensor* ws = Constant(dw->inputs[1]);
    const Tensor* wzp = Constant(dw->inputs[2]);
    // MatMul of two activations (attention's products): per-tensor parameters on both sides.
    const bool activations = !conv && w == nullptr && ScalarConstant(dw->inputs[1]) && ScalarConstant(dw->inputs[2]);
    if (!activations && (w == nullptr || ws == nullptr || wzp == nullptr || ws->numel() != wzp->numel())) return false;
    if (!activations && ws->numel() > 1) {  // per channel: along Conv's output channels (axis 0) or MatMul's columns (axis 1)
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
      const Tensor* float_bias = db == nullptr ? Constant(n.inputs[2]) : nullptr;
      if (float_bias != nullptr) {
        std::optional<Tensor> bq = QuantizeBias(*float_bias, *Constant(dx->inputs[1]), *ws);
        if (!bq) return false;
        const std::string name = editor_.FreshName(n.inputs[2] + "_quantized");
        g_.initializers[name] = std::move(*bq);
        fused.inputs.push_back(name);
      } else {
        if (db == nullptr || !BiasScaleMatches(*db, *Constant(dx->inputs[1]), *ws)) return false;
        fused.inputs.push_back(db->inputs[0]);
      }
    } else if (!conv && n.inputs.size() > 2) {
      return false;
    }
    if (!activations && w->dtype() == DataType::kUInt8 && wzp->dtype() == DataType::kUInt8) {
      // uint8 weights (onnxruntime's QDQ files with asymmetric weights) as
      // int8: w - 128 and zp - 128 leave every w - zp, so the dequantized
      // weights, and the integer kernels' int8 weight path takes them.
      fused.inputs[3] = editor_.FreshName(dw->inputs[0] + "_s8");
      fused.inputs[5] = editor_.FreshName(dw->inputs[2] + "_s8");
      g_.initializers[fused.inputs[3]] = ShiftedToInt8(*w);
      g_.initializers[fused.inputs[5]] = ShiftedToInt8(*wzp);
    }
    if (act_index) {
      // QLinearConv -> DequantizeLinear -> the activation -> the QuantizeLinear.
      const std::string yq = editor_.FreshName(n.outputs[0] + "_quantized");
      const std::string y = editor_.FreshName(n.outputs[0] + "_dequantized");
      fused.outputs = {yq};
      Node dq{editor_.FreshName(n.outputs[0] + "_DequantizeLinear"), "DequantizeLinear", "", {yq, q.inputs[1], q.inputs[2]}, {y}, {},
              ""};
      g_.nodes[*act_index].inputs[0] = y;
      g_.nodes[index] = std::move(fused);
      inserted_after_[index] = std::move(dq);
      return true;
    }
    g_.nodes[index] = std::move(fused);
    removed_.insert(q_index);
    return true;
  }

  // A Gemm of a dequantized activation and dequantized constant weights,
  // with a float output (a classifier's logits; the Q/DQ pairs of the
  // quantizer end before it, as onnxruntime's QDQ placement and sparq's
  // writer leave them), or a MatMul of the same (read as a Gemm without
  // attributes: A of any rank, W [K, N], C the constant [N] of a bias Add
  // after it; the quantizer's `quantize_outputs: false`, e.g. the search's
  // `inputs_only` candidates):
  //
  //   DequantizeLinear(x_q) ─┐
  //   DequantizeLinear(w_q) ─┼─ Gemm ── y    =>   sparq.MatMulIntegerToFloat(x_q, B_q, x_zp, w_zp,
  //   [DequantizeLinear(b_q)]┘                                             x_scale, w_scale[, C]) ── y
  //
  // B_q = w_q, or w_q transposed (a new constant) for transB = 1; C, the
  // Gemm's float bias, stays as it is (a DequantizeLinear of constants is
  // folded once at the end). The sums are exact int32 (gemm_s8), each
  // scaled by x_scale * w_scale[n] in one float32 rounding, where the float
  // Gemm rounds every product and partial sum: the two agree to float32
  // rounding of the sum, as onnxruntime's QGemm with a float output does.
  // Fuses only for transA = 0, alpha = beta = 1, x's scale and zero point
  // one constant value each, w_q a constant 2-D uint8/int8 tensor, its
  // scale and zero point constants of one value or one per output column
  // (axis 0 of w_q with transB = 1, axis 1 without), and C absent or a
  // float32 [N] (a constant, or the DequantizeLinear of a constant [N]).
  bool TryFuseGemm(size_t index) {
    const Node& n = g_.nodes[index];
    if (n.outputs.size() != 1 || n.inputs.size() < 2) return false;
    if (n.attr_int("transA", 0) != 0 || n.attr_float("alpha", 1.0f) != 1.0f || n.attr_float("beta", 1.0f) != 1.0f)
      return false;
    const bool trans_b = n.attr_int("transB", 0) != 0;
    const Node* dx = DequantizeProducing(n.inputs[0]);
    const Node* dw = DequantizeProducing(n.inputs[1], /*zero_point_optional=*/true);
    if (dx == nullptr || dw == nullptr || !ScalarConstant(dx->inputs[1]) || !ScalarConstant(dx->inputs[2])) return false;
    const Tensor* w = Constant(dw->inputs[0]);
    const Tensor* ws = Constant(dw->inputs[1]);
    const bool w_zp_named = dw->inputs.size() > 2 && !dw->inputs[2].empty();
    const Tensor* wzp = w_zp_named ? Constant(dw->inputs[2]) : nullptr;
    if (w == nullptr || ws == nullptr || (w_zp_named && wzp == nullptr) || w->rank() != 2 ||
        (w->dtype() != DataType::kInt8 && w->dtype() != DataType::kUInt8) || ws->dtype() != DataType::kFloat32) {
      return false;
    }
    if (wzp != nullptr && (wzp->dtype() != w->dtype() || wzp->numel() != ws->numel())) return false;
    if (dw->attr_int("block_size", 0) != 0) return false;  // opset 21's blocked scales
    const int64_t cols = trans_b ? w->dim(0) : w->dim(1);  // N
    if (ws->numel() != 1) {
      const int64_t axis = dw->attr_int("axis", 1), want = trans_b ? 0 : 1;
      if (ws->rank() != 1 || ws->numel() != cols || (axis != want && axis != want - 2)) return false;
    }
    std::string bias;
    if (n.inputs.size() > 2 && !n.inputs[2].empty()) {
      bias = n.inputs[2];
      if (!IsFloatBiasVector(bias, cols)) return false;
    }
    std::string b_name = dw->inputs[0];
    if (trans_b) {  // MatMulInteger's B is [K, N]
      b_name = editor_.FreshName(dw->inputs[0] + "_transposed");
      const int64_t rows = w->dim(0), k = w->dim(1);
      Tensor t(w->dtype(), {k, rows});
      const auto* src = static_cast<const uint8_t*>(w->raw_data());
      auto* dst = static_cast<uint8_t*>(t.raw_data());
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t kk = 0; kk < k; ++kk) dst[kk * rows + r] = src[r * k + kk];
      g_.initializers[b_name] = std::move(t);
    }
    Node fused;
    fused.name = n.name;
    fused.op_type = "MatMulIntegerToFloat";
    fused.domain = kSparqDomain;
    std::string w_zp_name = w_zp_named ? dw->inputs[2] : "";
    if (!w_zp_named) {  // DequantizeLinear's absent zero point is 0; MatMulIntegerToFloat's inputs 0-5 are required
      w_zp_name = editor_.FreshName(dw->inputs[0] + "_zero_point");
      g_.initializers[w_zp_name] = Tensor(w->dtype(), Shape{});
      std::memset(g_.initializers[w_zp_name].raw_data(), 0, 1);
    }
    fused.inputs = {dx->inputs[0], b_name, dx->inputs[2], w_zp_name, dx->inputs[1], dw->inputs[1]};
    if (!bias.empty()) fused.inputs.push_back(bias);
    fused.outputs = n.outputs;
    // A MatMul's bias Add (a float32 constant [N] on either side; the product
    // read by nothing else) goes into the node, whose reference adds C after
    // the scaling in a rounding of its own, as the Add does: the same bits.
    if (n.op_type == "MatMul" && bias.empty() && !index_.IsGraphOutput(n.outputs[0]) &&
        index_.Readers(n.outputs[0]).size() == 1) {
      const size_t add_index = index_.Readers(n.outputs[0])[0];
      const Node& add = g_.nodes[add_index];
      if (add.op_type == "Add" && add.domain.empty() && add.inputs.size() == 2 && add.outputs.size() == 1 &&
          !removed_.count(add_index)) {
        const std::string& other = add.inputs[0] == n.outputs[0] ? add.inputs[1] : add.inputs[0];
        const Tensor* c = other == n.outputs[0] ? nullptr : Constant(other);
        if (c != nullptr && c->dtype() == DataType::kFloat32 && c->rank() == 1 && c->dim(0) == cols) {
          fused.inputs.push_back(other);
          fused.outputs = add.outputs;
          removed_.insert(add_index);
        }
      }
    }
    g_.nodes[index] = std::move(fused);
    return true;
  }

  // A Conv of a dequantized activation and dequantized constant int8
  // weights whose float output is not fused into a QLinearConv (TryFuse
  // declined: no QuantizeLinear after it, or an activation other than
  // Relu / Clip before it; the search's `inputs_only` candidates, a
  // detection head's last layers):
  //
  //   DequantizeLinear(x_q) ─┐
  //   DequantizeLinear(w_q) ─┼─ Conv ── y   =>   sparq.ConvIntegerToFloat(x_q, w_q, x_zp, w_zp,
  //   [DequantizeLinear(b_q)]┘                                          x_scale, w_scale[, B]) ── y
  //
  // (kernels/cpu/conv_integer.cc: conv_s8 on NCHW with the float epilogue in
  // its driver). The sums are exact int32, each scaled by x_scale * w_scale[m]
  // in one float32 rounding, then + B[m] in another, where the float Conv
  // rounds every product and partial sum: the two agree to the float32
  // rounding of the sum (kConvToFloatTolerance in the tests; the Gemm route's
  // bound), as onnxruntime's integer conv with a float output does. B, the
  // Conv's float bias, stays as it is (a DequantizeLinear of constants is
  // folded once at the end).
  //
  // Shape rule (where it pays, measured with `sparq eval --profile`,
  // bench/RESULTS.md, convfloat22): group 1 only. Depthwise and grouped
  // convolutions stay float: the integer kernel runs them through im2col +
  // one GEMM per group (K = kh * kw), slower than the float depthwise rows.
  // Fuses only when x's scale and zero point are one constant value each
  // (the zero point uint8 or int8), w_q is a constant int8 tensor of rank 3
  // or 4 with a float32 scale of one value or one per output channel (axis
  // 0) and a zero point of its type with as many values, or none, and B is
  // absent or a float32 [M] (a constant, or the DequantizeLinear of a
  // constant [M]).
  bool TryFuseConvToFloat(size_t index) {
    const Node& n = g_.nodes[index];
    if (n.outputs.size() != 1 || n.inputs.size() < 2 || n.attr_int("group", 1) != 1) return false;
    const Node* dx = DequantizeProducing(n.inputs[0]);
    const Node* dw = DequantizeProducing(n.inputs[1], /*zero_point_optional=*/true);
    if (dx == nullptr || dw == nullptr || !ScalarConstant(dx->inputs[1]) || !ScalarConstant(dx->inputs[2])) return false;
    const Tensor* xs = Constant(dx->inputs[1]);
    const Tensor* xzp = Constant(dx->inputs[2]);
    if (xs->dtype() != DataType::kFloat32 || (xzp->dtype() != DataType::kUInt8 && xzp->dtype() != DataType::kInt8))
      return false;
    if (dx->attr_int("block_size", 0) != 0 || dw->attr_int("block_size", 0) != 0 || dx->attr_int("output_dtype", 0) != 0 ||
        dw->attr_int("output_dtype", 0) != 0) {
      return false;
    }
    const Tensor* w = Constant(dw->inputs[0]);
    const Tensor* ws = Constant(dw->inputs[1]);
    const bool w_zp_named = dw->inputs.size() > 2 && !dw->inputs[2].empty();
    const Tensor* wzp = w_zp_named ? Constant(dw->inputs[2]) : nullptr;
    if (w == nullptr || ws == nullptr || (w_zp_named && wzp == nullptr) || (w->rank() != 3 && w->rank() != 4) ||
        w->dtype() != DataType::kInt8 || ws->dtype() != DataType::kFloat32) {
      return false;
    }
    const int64_t m = w->dim(0);
    if (wzp != nullptr && (wzp->dtype() != w->dtype() || wzp->numel() != ws->numel())) return false;
    if (ws->numel() != 1) {
      const int64_t axis = dw->attr_int("axis", 1);
      const auto rank = static_cast<int64_t>(w->rank());
      if (ws->rank() != 1 || ws->numel() != m || (axis != 0 && axis != -rank)) return false;
    }
    std::string bias;
    if (n.inputs.size() > 2 && !n.inputs[2].empty()) {
      bias = n.inputs[2];
      if (!IsFloatBiasVector(bias, m)) return false;
    }
    Node fused;
    fused.name = n.name;
    fused.op_type = "ConvIntegerToFloat";
    fused.domain = kSparqDomain;
    fused.attributes = n.attributes;
    std::string w_zp_name = w_zp_named ? dw->inputs[2] : "";
    if (!w_zp_named) {  // DequantizeLinear's absent zero point is 0; ConvIntegerToFloat's inputs 0-5 are required
      w_zp_name = editor_.FreshName(dw->inputs[0] + "_zero_point");
      g_.initializers[w_zp_name] = Tensor(DataType::kInt8, Shape{});
      std::memset(g_.initializers[w_zp_name].raw_data(), 0, 1);
    }
    fused.inputs = {dx->inputs[0], dw->inputs[0], dx->inputs[2], w_zp_name, dx->inputs[1], dw->inputs[1]};
    if (!bias.empty()) fused.inputs.push_back(bias);
    fused.outputs = n.outputs;
    g_.nodes[index] = std::move(fused);
    return true;
  }

  // The uint8 tensor `t` as int8, every value minus 128 (same shape).
  static Tensor ShiftedToInt8(const Tensor& t) {
    Tensor s(DataType::kInt8, t.shape());
    for (int64_t i = 0; i < t.numel(); ++i)
      s.data<int8_t>()[i] = static_cast<int8_t>(static_cast<int32_t>(t.data<uint8_t>()[i]) - 128);
    return s;
  }

  // A float bias (onnxruntime's QDQ files from opset-12 exporters keep it
  // float, beside int8 weights) as the int32 bias of the integer operator:
  // b_q[c] = round_half_even(b[c] / (x_scale * w_scale[c])) in float32, what
  // onnxruntime's quantizer writes for its QOperator format (and computes
  // when it fuses such a Conv). The fused node then differs from the float
  // graph by that rounding of the bias too (at most half a step of the
  // accumulator, x_scale * w_scale). nullopt when the bias is not a float32
  // vector of one value per weight scale (or of the output channels for a
  // per-tensor scale), a scale product is not a positive finite number, or a
  // quotient leaves the int32 range.
  static std::optional<Tensor> QuantizeBias(const Tensor& b, const Tensor& xs, const Tensor& ws) {
    if (b.dtype() != DataType::kFloat32 || b.rank() != 1 || xs.dtype() != DataType::kFloat32 ||
        ws.dtype() != DataType::kFloat32 || (ws.numel() != 1 && ws.numel() != b.numel())) {
      return std::nullopt;
    }
    Tensor bq(DataType::kInt32, {b.numel()});
    for (int64_t c = 0; c < b.numel(); ++c) {
      const float scale = xs.data<float>()[0] * ws.data<float>()[ws.numel() == 1 ? 0 : c];
      if (!(scale > 0.0f) || !std::isfinite(scale)) return std::nullopt;
      const float q = std::nearbyint(b.data<float>()[c] / scale);  // the default rounding mode: half to even
      if (!(q >= -2147483648.0f && q < 2147483648.0f)) return std::nullopt;
      bq.data<int32_t>()[c] = static_cast<int32_t>(q);
    }
    return bq;
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

  Graph& g_;
  const ValueIndex index_;  // of the graph as it came: nodes are only marked until Run() compacts them
  std::set<std::string> overridable_;
  std::set<size_t> removed_;
  std::map<size_t, Node> inserted_after_;  // new nodes, placed after the node at that index
  GraphEditor editor_;                     // fresh names only
};

// The glue fusions (see the diagram at the top), run after Fuser on the
// compacted graph.
class GlueFuser {
 public:
  explicit GlueFuser(Model& model) : model_(model), g_(model.graph), index_(g_), editor_(g_) {
    for (const auto& v : g_.initializer_inputs) overridable_.insert(v.name);
    for (const Node& n : g_.nodes) {
      const Attribute* value = n.attr("value");
      if (n.op_type == "Constant" && n.domain.empty() && n.outputs.size() == 1 && value != nullptr &&
          value->kind == Attribute::Kind::kTensor) {
        constant_nodes_[n.outputs[0]] = &value->t;
      }
    }
  }

  // The names of the nodes that replaced QuantizeLinear nodes.
  std::vector<std::string> Run() {
    std::vector<std::string> fused;
    auto fusable = [&](size_t i) {
      const Node& q = g_.nodes[i];
      return q.op_type == "QuantizeLinear" && q.domain.empty() && !removed_.count(i) && !replacements_.count(i) &&
             PerTensorQuantNode(q);
    };
    // Tables across an inner QuantizeLinear -> DequantizeLinear first (they
    // swallow it), the last QuantizeLinear first: the largest pattern wins.
    for (size_t i = g_.nodes.size(); i-- > 0;)
      if (fusable(i) && TryFuseLut(i, /*through_qdq=*/true)) fused.push_back(replacements_[i].back().name);
    for (size_t i = 0; i < g_.nodes.size(); ++i) {
      if (!fusable(i)) continue;
      // A table first: an Add of a scalar constant is one step of a table, cheaper than a QLinearAdd.
      if (TryFuseMove(i) || TryFuseLut(i) || TryFuseConcat(i) || TryFuseAdd(i))
        fused.push_back(replacements_[i].back().name);
    }
    if (fused.empty()) return fused;
    std::vector<Node> kept;
    for (size_t i = 0; i < g_.nodes.size(); ++i) {
      auto it = replacements_.find(i);
      if (it != replacements_.end()) {
        for (Node& n : it->second) kept.push_back(std::move(n));
      } else if (!removed_.count(i)) {
        kept.push_back(std::move(g_.nodes[i]));
      }
    }
    g_.nodes = std::move(kept);
    RemoveUnreadDequantizeNodes(g_);
    bool imported = false;
    for (const auto& o : model_.opset_imports) imported |= o.domain == kDomain;
    if (!imported) model_.opset_imports.push_back({kDomain, 1});
    return fused;
  }

 private:
  static constexpr const char* kDomain = kSparqDomain;

  // An initializer that runs cannot override, or a Constant node's tensor
  // (exporters write Clip's bounds so).
  const Tensor* Constant(const std::string& name) const {
    if (name.empty() || overridable_.count(name)) return nullptr;
    auto it = g_.initializers.find(name);
    if (it != g_.initializers.end()) return &it->second;
    auto c = constant_nodes_.find(name);
    return c == constant_nodes_.end() ? nullptr : c->second;
  }
  // A QuantizeLinear / DequantizeLinear with a constant float32 scale and a
  // constant uint8/int8 zero point, one value each, and no attribute that
  // changes the types or the layout.
  bool PerTensorQuantNode(const Node& n) const {
    if (n.inputs.size() != 3 || n.outputs.size() != 1) return false;
    const Tensor* scale = Constant(n.inputs[1]);
    const Tensor* zp = Constant(n.inputs[2]);
    if (scale == nullptr || zp == nullptr || scale->dtype() != DataType::kFloat32 || scale->numel() != 1) return false;
    if ((zp->dtype() != DataType::kUInt8 && zp->dtype() != DataType::kInt8) || zp->numel() != 1) return false;
    return n.attr_int("block_size", 0) == 0 && n.attr_int("output_dtype", 0) == 0;
  }
  // The node producing `value` when `value` is read by one node only and is
  // no graph output (so the pattern may swallow it), else nullptr.
  const Node* SoleProducer(const std::string& value, size_t* index) const {
    if (index_.IsGraphOutput(value) || index_.Readers(value).size() != 1) return nullptr;
    const std::optional<size_t> p = index_.Producer(value);
    if (!p || removed_.count(*p)) return nullptr;
    *index = *p;
    return &g_.nodes[*p];
  }
  // The per-tensor DequantizeLinear producing `value`. Other nodes may read
  // `value` too (GELU's x feeds Erf's branch and the product): the pattern
  // then reads the integers and the DequantizeLinear stays for the others;
  // Run() drops it when no reader is left.
  const Node* QualifyingDequantize(const std::string& value, size_t* index) const {
    const std::optional<size_t> p = index_.Producer(value);
    if (!p || removed_.count(*p)) return nullptr;
    const Node& d = g_.nodes[*p];
    if (d.op_type != "DequantizeLinear" || !d.domain.empty() || !PerTensorQuantNode(d)) return nullptr;
    *index = *p;
    return &d;
  }

  int64_t Opset(const Node& n) const {
    const int64_t v = model_.opset(n.domain);
    return v == 0 && n.domain.empty() ? 21 : v;  // as the executor reads it
  }
  // A constant, or the value of a DequantizeLinear whose inputs are all
  // constants (onnxruntime's placement quantizes the constant operands of
  // Add / Mul / Div too), computed once on the reference kernel.
  const Tensor* ConstantValue(const std::string& name) const {
    if (const Tensor* c = Constant(name)) return c;
    auto cached = dequantized_constants_.find(name);
    if (cached != dequantized_constants_.end()) return &cached->second;
    const std::optional<size_t> p = index_.Producer(name);
    if (!p) return nullptr;
    const Node& d = g_.nodes[*p];
    if (d.op_type != "DequantizeLinear" || !d.domain.empty() || d.inputs.empty() || d.outputs.size() != 1) return nullptr;
    const Tensor* x = Constant(d.inputs[0]);
    if (x == nullptr) return nullptr;
    StatusOr<Tensor> v = RunReference(d, {{d.inputs[0], x}});
    if (!v.ok()) return nullptr;
    return &dequantized_constants_.emplace(name, std::move(v).value()).first->second;
  }

  // Runs node `n` on its reference kernel, each input named in `known` taking
  // that tensor and every other input its constant (ConstantValue).
  StatusOr<Tensor> RunReference(const Node& n, const std::map<std::string, const Tensor*>& known) const {
    const KernelDef* def = KernelRegistry::Reference().Find(n.op_type, n.domain, Opset(n));
    if (def == nullptr) return Status::NotSupported(n.Describe() + ": no reference kernel");
    std::vector<const Tensor*> inputs;
    for (const std::string& name : n.inputs) {
      auto it = known.find(name);
      const Tensor* c = it != known.end() ? it->second : name.empty() ? nullptr : ConstantValue(name);
      if (!name.empty() && c == nullptr) return Status::NotSupported(n.Describe() + ": input is not constant");
      inputs.push_back(c);
    }
    OpContext ctx(n, Opset(n), std::move(inputs), nullptr);
    SPARQ_RETURN_IF_ERROR(def->fn(ctx));
    if (ctx.outputs().empty() || !ctx.outputs()[0].defined()) return Status::Internal(n.Describe() + ": no output");
    return ctx.outputs()[0];
  }

  static bool IsLutOp(const Node& n) { return IsElementwiseFloatOp(n); }

  // Which input of `n` carries `value` when `n` is one step of a table: an
  // elementwise op of kLutOps on input 0, or Add / Sub / Mul / Div / Pow of
  // `value` and a float32 constant of one value, on either side. -1 when `n`
  // is neither. The constant is rank 0 (the result keeps x's shape), or
  // rank 1 (Paddle's exports write [1]) when `rank1` is given: *rank1 is then
  // set, and the caller must know that x has rank 1 or more, so that the
  // result still keeps x's shape.
  int LutStepInput(const Node& n, const std::string& value, bool* rank1 = nullptr) const {
    if (IsLutOp(n)) return n.inputs[0] == value ? 0 : -1;
    static const std::set<std::string> kScalarOps = {"Add", "Sub", "Mul", "Div", "Pow"};
    if (!n.domain.empty() || n.outputs.size() != 1 || n.inputs.size() != 2 || !kScalarOps.count(n.op_type)) return -1;
    for (int k = 0; k < 2; ++k) {
      if (n.inputs[k] != value || n.inputs[1 - k] == value) continue;
      const Tensor* c = ConstantValue(n.inputs[1 - k]);
      if (c == nullptr || c->dtype() != DataType::kFloat32 || c->numel() != 1) continue;
      if (c->rank() == 0) return k;
      if (c->rank() == 1 && rank1 != nullptr) {
        *rank1 = true;
        return k;
      }
    }
    return -1;
  }

  // Whether `value` (a table's root) is known to have rank 1 or more: its
  // recorded shape says so, or it is the output of a convolution or pooling
  // (rank 3 or more), directly or through the DequantizeLinear / MaxPool of
  // the pattern.
  bool RankAtLeastOne(const std::string& value, int depth = 0) const {
    if (const ValueInfo* vi = g_.FindValueInfo(value); vi != nullptr && vi->has_shape && !vi->dims.empty()) return true;
    const std::optional<size_t> p = index_.Producer(value);
    if (!p || depth > 2) return false;
    const Node& n = g_.nodes[*p];
    static const std::set<std::string> kSpatialOps = {"Conv", "QLinearConv", "ConvTranspose", "MaxPool",
                                                      "AveragePool", "GlobalAveragePool"};
    if (kSpatialOps.count(n.op_type) && (n.domain.empty() || n.domain == kDomain)) return true;
    if (n.op_type == "DequantizeLinear" && n.domain.empty()) return RankAtLeastOne(n.inputs[0], depth + 1);
    return false;
  }

  static bool IsMoveOp(const Node& n) { return IsElementMoveOp(n); }

  static bool IsIntegerMaxPool(const Node& n) { return IsMaxPoolOfIntegers(n); }

  // The 256-entry table of DequantizeLinear `dq` -> the elementwise `steps`
  // (node indices in graph order, reading `root` and each other's outputs)
  // -> QuantizeLinear `q` over every integer x, on the reference kernels:
  // `root` holds DequantizeLinear(x) and q reads the last step's output (or
  // `root` itself without steps); *identity when it maps every x to itself.
  // An error when a step cannot run or the table is not 256 values of q's type.
  //
  // With `q_from` q quantizes that value of the steps instead of its own
  // input; *no_nan (when given) says whether that value is never NaN.
  StatusOr<Tensor> Table(const Node& dq, const std::vector<size_t>& steps, const std::string& root, const Node& q,
                         bool* identity, const std::string& q_from = "", bool* no_nan = nullptr) {
    const DataType x_type = Constant(dq.inputs[2])->dtype();
    const DataType y_type = Constant(q.inputs[2])->dtype();
    Tensor x(x_type, {256});
    const int offset = x_type == DataType::kInt8 ? 128 : 0;
    for (int i = 0; i < 256; ++i) static_cast<uint8_t*>(x.raw_data())[i] = static_cast<uint8_t>(i - offset);
    std::map<std::string, Tensor> values;
    StatusOr<Tensor> v = RunReference(dq, {{dq.inputs[0], &x}});
    if (v.ok()) values[root] = std::move(v).value();
    for (size_t i = 0; v.ok() && i < steps.size(); ++i) {
      const Node& step = g_.nodes[steps[i]];
      std::map<std::string, const Tensor*> known;
      for (const std::string& in : step.inputs) {
        auto it = values.find(in);
        if (it != values.end()) known[in] = &it->second;
      }
      v = RunReference(step, known);
      if (v.ok()) values[step.outputs[0]] = std::move(v).value();
    }
    const std::string& from = q_from.empty() ? q.inputs[0] : q_from;
    if (v.ok() && !values.count(from)) return Status::NotSupported("the table's value is not computed");
    if (v.ok() && no_nan != nullptr) {
      const Tensor& f = values.at(from);
      *no_nan = f.dtype() == DataType::kFloat32;
      for (int64_t i = 0; *no_nan && i < f.numel(); ++i) *no_nan = !std::isnan(f.data<float>()[i]);
    }
    if (v.ok()) v = RunReference(q, {{q.inputs[0], &values.at(from)}});
    if (!v.ok()) return v.status();
    if (v->dtype() != y_type || v->numel() != 256) return Status::NotSupported("not a 256-entry table");
    *identity = x_type == y_type;
    for (int i = 0; *identity && i < 256; ++i)
      *identity = static_cast<const uint8_t*>(v->raw_data())[i] == static_cast<uint8_t>(i - offset);
    return v;
  }

  // The sparq.QLinearLut node that replaces QuantizeLinear `q`: `table`
  // (256 entries, a new initializer) applied to the integers `input`.
  Node LutNode(const Node& q, const std::string& input, Tensor table) {
    const std::string table_name = editor_.FreshName(q.outputs[0] + "_sparq_lut");
    g_.initializers[table_name] = std::move(table);
    Node lut;
    lut.name = q.name.empty() ? q.outputs[0] : q.name;
    lut.op_type = "QLinearLut";
    lut.domain = kDomain;
    lut.inputs = {input, table_name};
    lut.outputs = {q.outputs[0]};
    return lut;
  }

  // Add / Sub / Mul / Div of two values that both come from the pattern's
  // root (SiLU's x * Sigmoid(x)): elementwise on equal shapes, so one table
  // step too.
  static bool IsBinaryStep(const Node& n) {
    static const std::set<std::string> kBinaryOps = {"Add", "Sub", "Mul", "Div"};
    return n.domain.empty() && n.outputs.size() == 1 && n.inputs.size() == 2 && kBinaryOps.count(n.op_type) > 0;
  }

  // Walks back from `value` over table steps (LutStepInput, IsBinaryStep)
  // to the pattern's one root: the output of a qualifying DequantizeLinear,
  // or of an integer MaxPool of one (*pool). Every step met goes into
  // *steps; *rank1 is set when a step's constant is rank 1 (LutStepInput).
  // False when some path ends anywhere else, at another root, or deeper than
  // kMaxTableDepth.
  // With `through_qdq`, a qualifying DequantizeLinear of a per-tensor
  // QuantizeLinear is no root but two more steps (onnxruntime quantizes
  // Sigmoid's output before SiLU's product: DQ(Q(Sigmoid(v))) * v), and
  // *crossed is set.
  bool CollectSteps(const std::string& value, int depth, std::set<size_t>* steps, std::string* root,
                    std::optional<size_t>* pool, bool* rank1, bool through_qdq = false, bool* crossed = nullptr) const {
    constexpr int kMaxTableDepth = 64;
    if (depth > kMaxTableDepth) return false;
    auto leaf = [&](std::optional<size_t> pool_index) {
      if (!root->empty() && *root != value) return false;
      *root = value;
      *pool = pool_index;
      return true;
    };
    auto next = [&](const std::string& v) {
      return CollectSteps(v, depth + 1, steps, root, pool, rank1, through_qdq, crossed);
    };
    size_t dq_index = 0;
    if (const Node* dq = QualifyingDequantize(value, &dq_index)) {
      const std::optional<size_t> qp = through_qdq ? index_.Producer(dq->inputs[0]) : std::nullopt;
      if (!qp || removed_.count(*qp)) return leaf(std::nullopt);
      const Node& q = g_.nodes[*qp];
      if (q.op_type != "QuantizeLinear" || !q.domain.empty() || !PerTensorQuantNode(q)) return leaf(std::nullopt);
      if (steps->count(dq_index)) return true;
      steps->insert(dq_index);
      steps->insert(*qp);
      *crossed = true;
      return next(q.inputs[0]);
    }
    const std::optional<size_t> p = index_.Producer(value);
    if (!p || removed_.count(*p)) return false;
    const Node& n = g_.nodes[*p];
    if (IsIntegerMaxPool(n) && QualifyingDequantize(n.inputs[0], &dq_index) != nullptr) return leaf(*p);
    if (steps->count(*p)) return true;  // reached before along another path
    int x_input = -1;
    for (size_t k = 0; k < n.inputs.size() && x_input < 0; ++k) x_input = LutStepInput(n, n.inputs[k], rank1);
    if (x_input >= 0) {
      steps->insert(*p);
      return next(n.inputs[x_input]);
    }
    if (!IsBinaryStep(n)) return false;
    steps->insert(*p);
    return next(n.inputs[0]) && next(n.inputs[1]);
  }

  // DequantizeLinear -> [MaxPool] -> [table steps]* -> QuantizeLinear at
  // q_index, the steps a chain of unary ops or a small graph of them over the
  // one root (SiLU: Mul(v, Sigmoid(v)), either order):
  //
  //   DQ(x_q) ─┬──────────── Mul ── Q        =>   sparq.QLinearLut(x_q, table)
  //            └─ Sigmoid ──┘
  //
  // With `through_qdq` only patterns that cross a QuantizeLinear ->
  // DequantizeLinear pair inside (CollectSteps) fuse; Run() tries those
  // first, before the inner QuantizeLinear would become a table of its own:
  //
  //   DQ(x_q) ─┬────────────────────────── Mul ── Q   =>   sparq.QLinearLut(x_q, table)
  //            └─ Sigmoid ── Q ── DQ ──────┘
  bool TryFuseLut(size_t q_index, bool through_qdq = false) {
    const Node& q = g_.nodes[q_index];
    std::set<size_t> steps;
    std::string root;
    std::optional<size_t> pool_index;
    bool rank1 = false;  // a step's constant is [1]: x must have rank 1 or more
    bool crossed = false;
    if (!CollectSteps(q.inputs[0], 0, &steps, &root, &pool_index, &rank1, through_qdq, &crossed)) return false;
    if (through_qdq && !crossed) return false;
    if (rank1 && !RankAtLeastOne(root)) return false;
    // Every value inside the pattern is read by the pattern alone (its last by q).
    std::set<size_t> inside = steps;
    if (pool_index) inside.insert(*pool_index);
    for (size_t i : inside) {
      const std::string& out = g_.nodes[i].outputs[0];
      if (index_.IsGraphOutput(out)) return false;
      for (size_t r : index_.Readers(out))
        if (!steps.count(r) && !(r == q_index && out == q.inputs[0])) return false;
    }
    const Node* pool = pool_index ? &g_.nodes[*pool_index] : nullptr;
    size_t dq_index = 0;
    const Node* dq = QualifyingDequantize(pool != nullptr ? pool->inputs[0] : root, &dq_index);
    if (dq == nullptr) return false;
    if (pool != nullptr && !(Constant(dq->inputs[1])->data<float>()[0] > 0.0f)) return false;  // max commutes with DQ

    bool identity = false;
    StatusOr<Tensor> v = Table(*dq, std::vector<size_t>(steps.begin(), steps.end()), root, q, &identity);
    if (!v.ok()) return false;

    std::vector<Node> out;
    std::string lut_input = dq->inputs[0];
    if (pool != nullptr) {
      Node p = *pool;  // same attributes, on the integers
      p.inputs = {dq->inputs[0]};
      p.outputs = {identity ? q.outputs[0] : editor_.FreshName(q.outputs[0] + "_sparq_maxpool")};
      lut_input = p.outputs[0];
      out.push_back(std::move(p));
      removed_.insert(*pool_index);
    }
    if (pool == nullptr || !identity) out.push_back(LutNode(q, lut_input, std::move(v).value()));
    for (size_t i : steps) removed_.insert(i);
    replacements_[q_index] = std::move(out);
    return true;
  }

  // DequantizeLinear -> [move ops]+ -> QuantizeLinear at q_index: the move
  // ops on the integers, then the table of DequantizeLinear -> QuantizeLinear
  // unless it is the identity (the same scale and zero point: the usual case,
  // onnxruntime's Q/DQ pairs around Reshape and Transpose).
  bool TryFuseMove(size_t q_index) {
    const Node& q = g_.nodes[q_index];
    std::vector<size_t> moves;  // last first
    size_t index = 0;
    std::string value = q.inputs[0];
    const Node* n = SoleProducer(value, &index);
    while (n != nullptr && IsMoveOp(*n)) {
      moves.push_back(index);
      value = n->inputs[0];
      n = SoleProducer(value, &index);
    }
    if (moves.empty()) return false;
    size_t dq_index = 0;
    const Node* dq = QualifyingDequantize(value, &dq_index);
    if (dq == nullptr) return false;
    bool identity = false;
    StatusOr<Tensor> v = Table(*dq, {}, q.inputs[0], q, &identity);
    if (!v.ok()) return false;

    std::vector<Node> out;
    std::string moved = dq->inputs[0];
    for (auto it = moves.rbegin(); it != moves.rend(); ++it) {
      Node m = g_.nodes[*it];  // same attributes and other inputs, on the integers
      m.inputs[0] = moved;
      const bool last = std::next(it) == moves.rend();
      m.outputs = {last && identity ? q.outputs[0] : editor_.FreshName(m.outputs[0] + "_sparq_int")};
      moved = m.outputs[0];
      out.push_back(std::move(m));
      removed_.insert(*it);
    }
    if (!identity) out.push_back(LutNode(q, moved, std::move(v).value()));
    replacements_[q_index] = std::move(out);
    return true;
  }

  // Concat -> QuantizeLinear at q_index, each input of the Concat a chain of
  // zero or more MaxPools over a base value: a DequantizeLinear, or table
  // steps over one (TryFuseLut's). Concat of the integers: each base through
  // the table of its steps and q (none when that is the identity: onnxruntime
  // gives a Concat's inputs and output one scale), then the MaxPools on the
  // integers, which is exact because max commutes with the nondecreasing q
  // (q's scale > 0; no NaN before q where a MaxPool follows). YOLO's SPPF:
  //
  //   DQ(x_q) ── SiLU ── u ─┬────────────────────────── Concat ── Q
  //                         └─ MaxPool ─┬─ MaxPool ─... ─┘
  //                                     └────────────────┘
  //     =>   x_q ── QLinearLut ── u_q ─┬──────────────── Concat ── y_q
  //                                    └─ MaxPool ─ ... ─┘          (MaxPools on integers)
  bool TryFuseConcat(size_t q_index) {
    const Node& q = g_.nodes[q_index];
    size_t concat_index = 0;
    const Node* concat = SoleProducer(q.inputs[0], &concat_index);
    if (concat == nullptr || concat->op_type != "Concat" || !concat->domain.empty() || concat->outputs.size() != 1 ||
        concat->inputs.empty()) {
      return false;
    }
    std::vector<Node> out;
    std::map<std::string, Tensor> tables;              // new initializers, added when the pattern fuses
    std::map<std::string, std::string> integers;       // a float value of the pattern -> its integers
    std::set<size_t> inside = {concat_index};          // the nodes the pattern replaces
    bool pooled = false, may_be_nan = false;           // some input has MaxPools; some base may hold NaN
    Node fused = *concat;  // same axis, on the integers
    fused.outputs = {q.outputs[0]};
    for (size_t i = 0; i < concat->inputs.size(); ++i) {
      std::vector<size_t> pools;  // last first
      std::string value = concat->inputs[i];
      for (std::optional<size_t> p = index_.Producer(value);
           p && !removed_.count(*p) && IsIntegerMaxPool(g_.nodes[*p]) && !integers.count(value);
           p = index_.Producer(value)) {
        pools.push_back(*p);
        value = g_.nodes[*p].inputs[0];
      }
      if (!integers.count(value)) {  // a base: its table
        std::set<size_t> steps;
        std::string root;
        std::optional<size_t> pool;
        bool rank1 = false, identity = false, no_nan = false;
        if (!CollectSteps(value, 0, &steps, &root, &pool, &rank1) || pool || (rank1 && !RankAtLeastOne(root)))
          return false;
        size_t dq_index = 0;
        const Node* dq = QualifyingDequantize(root, &dq_index);
        if (dq == nullptr) return false;
        StatusOr<Tensor> v =
            Table(*dq, std::vector<size_t>(steps.begin(), steps.end()), root, q, &identity, value, &no_nan);
        if (!v.ok()) return false;
        inside.insert(steps.begin(), steps.end());
        if (identity) {
          integers[value] = dq->inputs[0];
        } else {
          const std::string table_name = editor_.FreshName(q.outputs[0] + "_sparq_lut");
          const std::string mapped = editor_.FreshName(value + "_sparq_int");
          tables[table_name] = std::move(v).value();
          out.push_back({mapped, "QLinearLut", kDomain, {dq->inputs[0], table_name}, {mapped}, {}, ""});
          integers[value] = mapped;
        }
        may_be_nan |= !no_nan;
      }
      pooled |= !pools.empty();
      for (auto p = pools.rbegin(); p != pools.rend(); ++p) {
        const Node& pool = g_.nodes[*p];
        if (!integers.count(pool.outputs[0])) {
          Node m = pool;  // same attributes, on the integers
          m.inputs = {integers.at(pool.inputs[0])};
          m.outputs = {editor_.FreshName(pool.outputs[0] + "_sparq_int")};
          integers[pool.outputs[0]] = m.outputs[0];
          out.push_back(std::move(m));
          inside.insert(*p);
        }
      }
      fused.inputs[i] = integers.at(concat->inputs[i]);
    }
    if (pooled && (may_be_nan || !(Constant(q.inputs[1])->data<float>()[0] > 0.0f))) return false;
    // Every value the pattern replaces is read inside it alone.
    for (size_t n : inside) {
      if (n == concat_index) continue;
      const std::string& v = g_.nodes[n].outputs[0];
      if (index_.IsGraphOutput(v)) return false;
      for (size_t r : index_.Readers(v))
        if (!inside.count(r)) return false;
    }
    for (auto& kv : tables) g_.initializers[kv.first] = std::move(kv.second);
    out.push_back(std::move(fused));
    removed_.insert(inside.begin(), inside.end());
    replacements_[q_index] = std::move(out);
    return true;
  }

  // DequantizeLinear(a), DequantizeLinear(b) -> Add|Mul -> QuantizeLinear at q_index.
  bool TryFuseAdd(size_t q_index) {
    const Node& q = g_.nodes[q_index];
    size_t add_index = 0, a_index = 0, b_index = 0;
    const Node* add = SoleProducer(q.inputs[0], &add_index);
    if (add == nullptr || (add->op_type != "Add" && add->op_type != "Mul") || !add->domain.empty() ||
        add->inputs.size() != 2 || add->outputs.size() != 1) {
      return false;
    }
    const Node* da = QualifyingDequantize(add->inputs[0], &a_index);
    const Node* db = QualifyingDequantize(add->inputs[1], &b_index);
    if (da == nullptr || db == nullptr) return false;
    Node fused;
    fused.name = add->name.empty() ? q.outputs[0] : add->name;
    fused.op_type = add->op_type == "Mul" ? "QLinearMul" : "QLinearAdd";
    fused.domain = kDomain;
    fused.inputs = {da->inputs[0], da->inputs[1], da->inputs[2], db->inputs[0],
                    db->inputs[1], db->inputs[2], q.inputs[1],   q.inputs[2]};
    fused.outputs = {q.outputs[0]};
    removed_.insert(add_index);
    replacements_[q_index].push_back(std::move(fused));
    return true;
  }

  Model& model_;
  Graph& g_;
  const ValueIndex index_;  // of the graph as it came: nodes are only marked until Run() replaces them
  GraphEditor editor_;      // names only: the new nodes go in through replacements_
  std::set<std::string> overridable_;
  std::set<size_t> removed_;
  std::map<size_t, std::vector<Node>> replacements_;  // QuantizeLinear index -> the nodes taking its place
  std::map<std::string, const Tensor*> constant_nodes_;  // output -> value of a Constant node
  mutable std::map<std::string, Tensor> dequantized_constants_;  // ConstantValue's DequantizeLinear results
};

// A QLinearConv, sparq.QLinearAdd or sparq.QLinearMul whose output only a
// QLinearLut reads takes the table in (sparq.QLinearConvLut; QLinearAdd's and
// QLinearMul's optional input 8),
// so that fast rows apply it while they write the output. A QLinearLut
// read alone by another QLinearLut composes with it (one table; the first
// may itself be folded into its producer): EfficientNet's
// conv -> ReLU6 table -> requantizing table (what is left of its Pad) ->
// depthwise conv becomes conv(one table) -> depthwise conv.
std::vector<std::string> FoldTablesIntoProducers(Graph& g) {
  const ValueIndex index(g);  // node indices stay valid: removals wait for the end
  std::set<std::string> overridable;
  for (const auto& v : g.initializer_inputs) overridable.insert(v.name);
  // The table constant of a node's last input, or nullptr.
  auto table_of = [&](const Node& n) -> const Tensor* {
    const std::string& name = n.inputs.back();
    auto it = g.initializers.find(name);
    if (overridable.count(name) || it == g.initializers.end()) return nullptr;
    const Tensor& t = it->second;
    const bool bytes = t.dtype() == DataType::kUInt8 || t.dtype() == DataType::kInt8;
    return bytes && t.numel() == 256 ? &t : nullptr;
  };
  std::map<std::string, size_t> producer;  // value -> the node producing it now (folds move outputs)
  for (size_t i = 0; i < g.nodes.size(); ++i)
    for (const std::string& out : g.nodes[i].outputs) producer[out] = i;
  std::vector<std::string> folded;
  std::set<size_t> removed;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& lut = g.nodes[i];
    if (lut.op_type != "QLinearLut" || lut.domain != kSparqDomain || lut.inputs.size() != 2) continue;
    const std::string& value = lut.inputs[0];
    const auto p = producer.find(value);
    if (index.IsGraphOutput(value) || index.Readers(value).size() != 1 || p == producer.end()) continue;
    Node& producer_node = g.nodes[p->second];
    if (producer_node.outputs.size() != 1) continue;
    const bool with_table = producer_node.domain == kSparqDomain &&
                            ((producer_node.op_type == "QLinearLut" && producer_node.inputs.size() == 2) ||
                             (producer_node.op_type == "QLinearConvLut" && producer_node.inputs.size() == 10) ||
                             ((producer_node.op_type == "QLinearAdd" || producer_node.op_type == "QLinearMul") &&
                              producer_node.inputs.size() == 9));
    if (with_table) {
      // table[k] = second[first[k] - min(first's type)]
      const Tensor* first = table_of(producer_node);
      const Tensor* second = table_of(lut);
      if (first == nullptr || second == nullptr) continue;
      Tensor composed(second->dtype(), {256});
      const auto* a = static_cast<const uint8_t*>(first->raw_data());
      const auto* b = static_cast<const uint8_t*>(second->raw_data());
      const uint8_t offset = first->dtype() == DataType::kInt8 ? 0x80 : 0;
      for (int k = 0; k < 256; ++k) static_cast<uint8_t*>(composed.raw_data())[k] = b[a[k] ^ offset];
      std::string name = lut.inputs[1] + "_composed";
      while (g.initializers.count(name)) name += "_";
      g.initializers[name] = std::move(composed);
      producer_node.inputs.back() = name;
    } else if (producer_node.op_type == "QLinearConv" && producer_node.domain.empty() &&
               producer_node.inputs.size() >= 8 && producer_node.inputs.size() <= 9) {
      producer_node.op_type = "QLinearConvLut";
      producer_node.domain = kSparqDomain;
      producer_node.inputs.resize(9);  // B, or "" without
      producer_node.inputs.push_back(lut.inputs[1]);
    } else if ((producer_node.op_type == "QLinearAdd" || producer_node.op_type == "QLinearMul") &&
               producer_node.domain == kSparqDomain && producer_node.inputs.size() == 8) {
      producer_node.inputs.push_back(lut.inputs[1]);
    } else {
      continue;
    }
    producer_node.outputs = lut.outputs;
    producer[lut.outputs[0]] = p->second;
    folded.push_back(producer_node.name);
    removed.insert(i);
  }
  std::vector<Node> kept;
  for (size_t i = 0; i < g.nodes.size(); ++i)
    if (!removed.count(i)) kept.push_back(std::move(g.nodes[i]));
  g.nodes = std::move(kept);
  return folded;
}

// A DequantizeLinear of constants (the weights of a layer left in float, such
// as a classifier Gemm without QuantizeLinear after it) is computed once, on
// its reference kernel, and becomes an initializer of the same name.
std::vector<std::string> FoldConstantDequantize(Model& model) {
  Graph& g = model.graph;
  std::set<std::string> overridable, graph_inputs;
  for (const auto& v : g.initializer_inputs) overridable.insert(v.name);
  for (const auto& v : g.inputs) graph_inputs.insert(v.name);
  auto constant = [&](const std::string& name) -> const Tensor* {
    if (name.empty() || overridable.count(name)) return nullptr;
    auto it = g.initializers.find(name);
    return it == g.initializers.end() ? nullptr : &it->second;
  };
  int64_t opset = model.opset("");
  if (opset == 0) opset = 21;  // as the executor reads it
  const KernelDef* dq_ref = KernelRegistry::Reference().Find("DequantizeLinear", "", opset);
  std::vector<std::string> folded;
  std::vector<Node> kept;
  for (Node& n : g.nodes) {
    bool fold = dq_ref != nullptr && n.op_type == "DequantizeLinear" && n.domain.empty() && n.outputs.size() == 1 &&
                !n.inputs.empty() && !graph_inputs.count(n.outputs[0]) && !g.initializers.count(n.outputs[0]);
    std::vector<const Tensor*> inputs;
    for (size_t i = 0; fold && i < n.inputs.size(); ++i) {
      inputs.push_back(constant(n.inputs[i]));
      fold = n.inputs[i].empty() || inputs.back() != nullptr;
    }
    if (fold) {
      OpContext ctx(n, opset, std::move(inputs), nullptr);
      fold = dq_ref->fn(ctx).ok() && ctx.outputs()[0].defined();
      if (fold) {
        g.initializers[n.outputs[0]] = std::move(ctx.outputs()[0]);
        folded.push_back(n.name);
        continue;
      }
    }
    kept.push_back(std::move(n));
  }
  g.nodes = std::move(kept);
  return folded;
}

}  // namespace

std::vector<std::string> FuseQdqToIntegerOps(Model* model) {
  if (model->opset() < 10) return {};  // QLinearConv / QLinearMatMul arrive in opset 10
  std::vector<std::string> fused = Fuser(model->graph).Run();
  if (!fused.empty()) ImportSparqDomain(model);  // for the Gemms that became sparq.MatMulIntegerToFloat
  for (std::string& name : GlueFuser(*model).Run()) fused.push_back(std::move(name));
  for (std::string& name : FuseFloatIslands(model)) fused.push_back(std::move(name));
  RemoveUnreadDequantizeNodes(model->graph);
  for (std::string& name : FoldTablesIntoProducers(model->graph)) fused.push_back(std::move(name));
  for (std::string& name : FoldTablesIntoConcats(model->graph)) fused.push_back(std::move(name));
  for (std::string& name : FoldConstantDequantize(*model)) fused.push_back(std::move(name));
  for (std::string& name : FoldDequantizeIntoConcats(model)) fused.push_back(std::move(name));
  for (std::string& name : FuseDynamicMatMul(model)) fused.push_back(std::move(name));
  for (std::string& name : FuseDynamicConv(model)) fused.push_back(std::move(name));
  return fused;
}

}  // namespace sparq
