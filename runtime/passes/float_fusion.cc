// Conv -> activation fusion:
//
//   x ── Conv(W, B) ── t ── Relu ── y    =>   x ── ai.sparq.FusedConv(W, B; out_min=0, out_max=inf) ── y
//   x ── Conv(W, B) ── t ── Clip ── y    =>   x ── ai.sparq.FusedConv(W, B; out_min=min, out_max=max) ── y
//
// SiLU after a Conv goes into it too (YOLO's Conv blocks), in models without
// 16-bit floats:
//
//   x ── Conv(W, B) ── t ─┬─ Sigmoid ── s ── Mul ── y   =>   x ── ai.sparq.FusedConv(W, B; activation=Silu) ── y
//                         └──────────────────┘
//
// The Conv's weights must be a float32 initializer; t must have no other
// reader (Sigmoid and Mul for SiLU, s no reader but the Mul) and must not be a
// graph output (it disappears);
// Clip's bounds must be constants (attributes before opset 11; from opset
// 11 initializers that run inputs cannot override, or Constant nodes).
//
// SiLU as one node, one pass over memory (sigmoid_f32 with times_x):
//
//   x ─┬─ Sigmoid ── s ── Mul ── y   =>   x ── sparq.Silu ── y
//      └──────────────────┘                (Mul's inputs in either order)
//
// when s has no other reader and is not a graph output, in models without
// 16-bit floats (sparq.Silu computes float32 / float64).
//
// GELU as BERT exports it (x * 0.5 * (1 + erf(x / sqrt 2))), one pass:
//
//   x ─┬─ Div(d) ── Erf ── Add(a) ── Mul ── Mul(h) ── y   =>   x ── sparq.GeluErfChain(d, a, h) ── y
//      └─────────────────────────────┘
//
// with d, a, h float32 scalar constants (Add's and both Muls' operands in
// either order), each intermediate read only by the next node and not a graph
// output, in models without 16-bit floats; the node computes the five float
// operations in that order (the same bits; min_rank as HardSwishChain's).
// torch.onnx's dynamo exporter puts the scale on the erf term instead:
//
//   x ─┬─ Div(d) ── Erf ── Add(a) ── Mul(h) ── Mul ── y   =>   x ── sparq.GeluErfScaledChain(d, a, h) ── y
//      └───────────────────────────────────────┘
//
// (x * ((erf(x / d) + a) * h): another rounding, so another node, on the
// same conditions).
//
// GELU as JAX writes it (approximate=True, jax2tf: magika), one pass:
//
//   x ─┬─ Mul(c) ── Mul ── Mul ── Add ── Mul(s) ── Tanh ── Add(a) ── Mul(h) ── Mul ── y
//      ├───────────┘      │      │                                         │
//      ├──────────────────┘      │          =>   x ── sparq.GeluTanhChain(c, s, a, h) ── y
//      ├─────────────────────────┘                    (x * (h * (a + tanh(s * (x + x * (x * (c * x))))))
//      └───────────────────────────────────────────────────────────────────┘
//
// with c, s, a, h float32 scalar constants, every operand pair in either
// order, each intermediate read only by the next node and not a graph output,
// in models without 16-bit floats; the CPU kernel runs the nine operations on
// the unfused nodes' rows, a block at a time (the same bits; min_rank as
// HardSwishChain's).
//
// Attention (BERT's self-attention as exported), one kernel per head:
//
//   Q ── MatMul ── [Mul(s) | Div(s)] ── [Add(mask)] ── Softmax(-1) ── MatMul ── y
//   K^T ──┘                                                      V ──┘
//     =>   (Q, K^T, V, mask, s) ── sparq.Attention(scale_op) ── y
//
// with s a float32 scalar constant, each intermediate read only by the next
// node and not a graph output, in models without 16-bit floats. Its
// reference runs the replaced nodes' reference kernels (the same bits); the
// fast rows keep the scores of a few rows in the cache
// (kernels/cpu/attention_f32.h).
//
// torch's scaled_dot_product_attention as its exporter decomposes it (opset
// 14 / 17, TorchScript) scales Q and K^T before the product and guards the
// probabilities of fully masked rows:
//
//   Q ── Mul(a) ── MatMul ── Add(mask) ── Softmax(-1) ─┬─ IsNaN ── Where(., c, p) ── MatMul ── y
//   K^T ── Mul(b) ──┘                                  └───────────────┘        V ──┘
//     =>   (Q, K^T, V, mask, s, a, b, c) ── sparq.Attention ── y
//
// each Mul optional (a, b float32 scalar constants, either operand order),
// c a float32 scalar constant, p read only by the IsNaN and the Where.
//
// LayerNorm as exported below opset 17 (torch's TorchScript exporter at
// opset 14, paddle2onnx), one node with the unfused nodes' bits:
//
//   x ─┬─ ReduceMean(-1) ── Sub ── d ─┬─ Pow(2) ── ReduceMean(-1) ── Add(eps) ── Sqrt ─┐
//      └──────────────────────┘       └───────────────────────────────────────── Div ── Mul(gamma) ── [Add(beta)] ── y
//     =>   (x, 2, eps, gamma, beta) ── sparq.LayerNormChain ── y
//
// with the ReduceMeans over axes [-1] keeping it, 2 and eps float32 scalar
// constants (eps, gamma and beta on either side of their ops), d read by the
// Pow and the Div alone, every other intermediate by its next node alone, none
// a graph output, in models without 16-bit floats. Its reference runs the
// replaced nodes' reference kernels; layer_norm_chain_f32 (kernels/cpu/norm_f32.h)
// computes the same float operations in three passes over each row.
//
// A GELU chain whose x is a sparq.MatMulIntegerToFloat read by nothing else
// (quantize.mode dynamic, onnxruntime's quantize_dynamic) goes into it as its
// activation attribute: the GEMM's epilogue runs the same row on each row of
// its output (the same bits).
//
// Likewise a SiLU (sparq.Silu, just fused from Sigmoid + Mul, or as written)
// whose x is a sparq.ConvIntegerToFloat read by nothing else and not a graph
// output (the QDQ fusion's inputs-only convolutions, YOLO's detection head):
// activation "Silu", the sigmoid_f32 row run on each finished tile.
//
//   ConvIntegerToFloat ── x ── sparq.Silu ── y   =>   ConvIntegerToFloat(activation=Silu) ── y
//
// A pointwise convolution read only by a depthwise one (MobileNet and
// EfficientNet blocks), after the activations are fused
// (FusePointwiseDepthwise):
//
//   x ── Conv|FusedConv(1x1, W1, B1) ── t ── Conv|FusedConv(depthwise W2, B2) ── y
//     =>   x ── sparq.PointwiseDepthwise(W1, B1, W2, B2; pw_out_min, pw_out_max) ── y
//
// with the weights and biases fixed float32 initializers, the 1x1 stride 1,
// unpadded, one group, neither a SiLU, t no other reader and not a graph
// output. The node keeps the depthwise node's name and attributes (its window,
// group and clamp), the pointwise clamp as pw_out_min / pw_out_max (+-inf for
// a plain Conv); its reference runs the two parts (kernels/ref/fused_conv.h).
//
// HardSwish as Paddle exports it (x * Clip(x + 3, 0, 6) / 6), one pass:
//
//   x ─┬─ Add(a) ── Clip(lo, hi) ── Mul ── Div(d) ── y   =>   x ── sparq.HardSwishChain(a, lo, hi, d) ── y
//      └────────────────────────────┘
//
// with a, lo, hi, d float32 scalar constants (Add's and Mul's operands in
// either order), each intermediate read only by the next node and not a
// graph output; the node computes the four float operations in that order
// (the same bits; min_rank: the constants' largest rank, for the output shape
// of a scalar x).
#include "runtime/passes/float_fusion.h"

#include <algorithm>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <utility>

#include "graph/graph_editor.h"
#include "graph/value_index.h"

namespace sparq {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

// The float32 scalar that `name` always holds: an initializer that run inputs
// cannot override, or the output of a Constant node; *rank (when given) gets
// its rank.
std::optional<float> ConstantScalar(const Model& model, const ValueIndex& index, const std::string& name,
                                    int64_t* rank = nullptr) {
  for (const ValueInfo& v : model.graph.initializer_inputs)
    if (v.name == name) return std::nullopt;  // a run input may replace it
  const Tensor* t = nullptr;
  auto init = model.graph.initializers.find(name);
  if (init != model.graph.initializers.end()) {
    t = &init->second;
  } else if (const Node* p = index.ProducerNode(name); p != nullptr && p->op_type == "Constant" && p->domain.empty()) {
    const Attribute* value = p->attr("value");
    if (value != nullptr && value->kind == Attribute::Kind::kTensor) t = &value->t;
  }
  if (t == nullptr || t->dtype() != DataType::kFloat32 || t->numel() != 1) return std::nullopt;
  if (rank != nullptr) *rank = static_cast<int64_t>(t->rank());
  return t->data<float>()[0];
}

// The clamp [lo, hi] that `act` applies, or nullopt when it is not a
// float activation with constant bounds.
std::optional<std::pair<float, float>> ActivationClamp(const Model& model,
                                                       const ValueIndex& index,
                                                       const Node& act) {
  if (!act.domain.empty() || act.outputs.size() != 1) return std::nullopt;
  if (act.op_type == "Relu") return std::make_pair(0.0f, kInf);
  if (act.op_type != "Clip") return std::nullopt;
  if (model.opset() < 11) {
    return std::make_pair(act.attr("min") != nullptr ? act.attr_float("min", 0.0f) : -kInf,
                          act.attr("max") != nullptr ? act.attr_float("max", 0.0f) : kInf);
  }
  float bound[2] = {-kInf, kInf};
  for (size_t i = 1; i < act.inputs.size() && i < 3; ++i) {
    if (act.inputs[i].empty()) continue;
    const std::optional<float> v = ConstantScalar(model, index, act.inputs[i]);
    if (!v) return std::nullopt;
    bound[i - 1] = *v;
  }
  return std::make_pair(bound[0], bound[1]);
}

// Whether the model may hold 16-bit floats: a graph input, output,
// initializer, recorded value or Constant of float16 / bfloat16, or a Cast to one.
bool MayHold16BitFloats(const Graph& g) {
  auto half = [](DataType t) { return t == DataType::kFloat16 || t == DataType::kBFloat16; };
  for (const auto* list : {&g.inputs, &g.outputs, &g.value_info})
    for (const ValueInfo& v : *list)
      if (half(v.dtype)) return true;
  for (const auto& kv : g.initializers)
    if (half(kv.second.dtype())) return true;
  for (const Node& n : g.nodes) {
    if (n.op_type == "Cast" && (n.attr_int("to", 0) == 10 || n.attr_int("to", 0) == 16)) return true;
    for (const Attribute& a : n.attributes)
      if (a.kind == Attribute::Kind::kTensor && half(a.t.dtype())) return true;
  }
  return false;
}

// The (Sigmoid, Mul) node indices of x * Sigmoid(x) over `t` when they are
// t's only readers, s = Sigmoid(t) has no other reader, and neither
// intermediate is a graph output.
std::optional<std::pair<size_t, size_t>> SiluOf(const Graph& g, const ValueIndex& index, const std::string& t) {
  const std::vector<size_t>& readers = index.Readers(t);
  if (readers.size() != 2) return std::nullopt;
  for (int k = 0; k < 2; ++k) {
    const Node& sig = g.nodes[readers[k]];
    const Node& mul = g.nodes[readers[1 - k]];
    if (sig.op_type != "Sigmoid" || !sig.domain.empty() || sig.inputs.size() != 1 || sig.outputs.size() != 1) continue;
    if (mul.op_type != "Mul" || !mul.domain.empty() || mul.inputs.size() != 2 || mul.outputs.size() != 1) continue;
    const std::string& s = sig.outputs[0];
    const bool operands = (mul.inputs[0] == t && mul.inputs[1] == s) || (mul.inputs[0] == s && mul.inputs[1] == t);
    if (!operands || index.IsGraphOutput(s) || index.Readers(s).size() != 1) continue;
    return std::make_pair(readers[k], readers[1 - k]);
  }
  return std::nullopt;
}

// Mul(x, Sigmoid(x)) -> sparq.Silu(x) (see the top); the replaced Mul keeps
// its name and output, the Sigmoid goes into *removed.
void FuseSilu(Graph& g, const ValueIndex& index, std::set<size_t>* removed, std::vector<std::string>* fused) {
  if (MayHold16BitFloats(g)) return;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    Node& mul = g.nodes[i];
    if (mul.op_type != "Mul" || !mul.domain.empty() || mul.inputs.size() != 2 || mul.outputs.size() != 1) continue;
    for (int k = 0; k < 2; ++k) {
      const std::string& s = mul.inputs[k];
      const std::optional<size_t> p = index.Producer(s);
      if (!p || removed->count(*p)) continue;
      const Node& sig = g.nodes[*p];
      if (sig.op_type != "Sigmoid" || !sig.domain.empty() || sig.inputs.size() != 1 || sig.outputs.size() != 1 ||
          sig.inputs[0] != mul.inputs[1 - k] || index.IsGraphOutput(s) || index.Readers(s).size() != 1) {
        continue;
      }
      removed->insert(*p);
      mul.op_type = "Silu";
      mul.domain = kSparqDomain;
      mul.inputs = {sig.inputs[0]};
      fused->push_back(mul.name);
      break;
    }
  }
}

// The one node of `name` when it has no other reader and is not a graph output.
const Node* OnlyReaderProduct(const Graph& g, const ValueIndex& index, const std::set<size_t>& removed,
                              const std::string& name, const char* op_type, size_t* at) {
  const std::optional<size_t> p = index.Producer(name);
  if (!p || removed.count(*p) || index.IsGraphOutput(name) || index.Readers(name).size() != 1) return nullptr;
  const Node& n = g.nodes[*p];
  if (n.op_type != op_type || !n.domain.empty() || n.outputs.size() != 1) return nullptr;
  *at = *p;
  return &n;
}

// Div(Mul(x, Clip(Add(x, a), lo, hi)), d) -> sparq.HardSwishChain(x) (see
// the top); the replaced Div keeps its name and output, the Add, Clip and
// Mul go into *removed.
void FuseHardSwishChain(const Model& model, Graph& g, const ValueIndex& index, std::set<size_t>* removed,
                        std::vector<std::string>* fused) {
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    Node& div = g.nodes[i];
    if (div.op_type != "Div" || !div.domain.empty() || div.inputs.size() != 2 || div.outputs.size() != 1) continue;
    int64_t rank = 0, r = 0;
    const std::optional<float> divisor = ConstantScalar(model, index, div.inputs[1], &r);
    size_t mul_at = 0, clip_at = 0, add_at = 0;
    const Node* mul = OnlyReaderProduct(g, index, *removed, div.inputs[0], "Mul", &mul_at);
    if (!divisor || mul == nullptr || mul->inputs.size() != 2) continue;
    rank = std::max(rank, r);
    for (int k = 0; k < 2; ++k) {
      const std::string& x = mul->inputs[1 - k];
      const Node* clip = OnlyReaderProduct(g, index, *removed, mul->inputs[k], "Clip", &clip_at);
      if (clip == nullptr || clip->inputs.empty()) continue;
      const std::optional<std::pair<float, float>> bounds = ActivationClamp(model, index, *clip);
      const Node* add = OnlyReaderProduct(g, index, *removed, clip->inputs[0], "Add", &add_at);
      if (!bounds || add == nullptr || add->inputs.size() != 2) continue;
      const int j = add->inputs[0] == x ? 1 : add->inputs[1] == x ? 0 : -1;
      if (j < 0) continue;
      const std::optional<float> offset = ConstantScalar(model, index, add->inputs[j], &r);
      if (!offset) continue;
      rank = std::max(rank, r);
      removed->insert(add_at);
      removed->insert(clip_at);
      removed->insert(mul_at);
      div.op_type = "HardSwishChain";
      div.domain = kSparqDomain;
      div.inputs = {x};
      div.attributes = {Attribute::Float("offset", *offset), Attribute::Float("lo", bounds->first),
                        Attribute::Float("hi", bounds->second), Attribute::Float("divisor", *divisor),
                        Attribute::Int("min_rank", rank)};
      fused->push_back(div.name);
      break;
    }
  }
}

// The erf term both GELU chains share: `value` = Add(Erf(Div(x, d)), a),
// each node the only reader of the one before it, d and a constant scalars.
struct ErfTerm {
  float divisor = 0.0f, offset = 0.0f;
  int64_t rank = 0;  // the larger rank of d and a (for the output's min_rank)
  size_t add_at = 0, erf_at = 0, div_at = 0;
};

std::optional<ErfTerm> MatchErfTerm(const Model& model, const Graph& g, const ValueIndex& index,
                                    const std::set<size_t>& removed, const std::string& value, const std::string& x) {
  ErfTerm t;
  const Node* add = OnlyReaderProduct(g, index, removed, value, "Add", &t.add_at);
  if (add == nullptr || add->inputs.size() != 2) return std::nullopt;
  for (int e = 0; e < 2; ++e) {
    int64_t offset_rank = 0, divisor_rank = 0;
    const std::optional<float> offset = ConstantScalar(model, index, add->inputs[1 - e], &offset_rank);
    const Node* erf = OnlyReaderProduct(g, index, removed, add->inputs[e], "Erf", &t.erf_at);
    if (!offset || erf == nullptr || erf->inputs.size() != 1) continue;
    const Node* div = OnlyReaderProduct(g, index, removed, erf->inputs[0], "Div", &t.div_at);
    if (div == nullptr || div->inputs.size() != 2 || div->inputs[0] != x) continue;
    const std::optional<float> divisor = ConstantScalar(model, index, div->inputs[1], &divisor_rank);
    if (!divisor) continue;
    t.offset = *offset;
    t.divisor = *divisor;
    t.rank = std::max(offset_rank, divisor_rank);
    return t;
  }
  return std::nullopt;
}

// Rewrites `outer` as the sparq GELU chain `op_type` of x; the term's nodes
// and the inner Mul (at inner_at) go into *removed.
void WriteGeluChain(Node& outer, const char* op_type, const std::string& x, const ErfTerm& t, float scale,
                    int64_t scale_rank, size_t inner_at, std::set<size_t>* removed, std::vector<std::string>* fused) {
  removed->insert(t.div_at);
  removed->insert(t.erf_at);
  removed->insert(t.add_at);
  removed->insert(inner_at);
  outer.op_type = op_type;
  outer.domain = kSparqDomain;
  outer.inputs = {x};
  outer.attributes = {Attribute::Float("divisor", t.divisor), Attribute::Float("offset", t.offset),
                      Attribute::Float("scale", scale), Attribute::Int("min_rank", std::max(scale_rank, t.rank))};
  fused->push_back(outer.name);
}

// Mul(Mul(x, Add(Erf(Div(x, d)), a)), h) -> sparq.GeluErfChain(x), and the
// dynamo exporter's order Mul(x, Mul(Add(Erf(Div(x, d)), a), h)) ->
// sparq.GeluErfScaledChain(x) (see the top); the replaced outer Mul keeps its
// name and output, the Div, Erf, Add and inner Mul go into *removed.
void FuseGeluErfChain(const Model& model, Graph& g, const ValueIndex& index, std::set<size_t>* removed,
                      std::vector<std::string>* fused) {
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    Node& outer = g.nodes[i];
    if (removed->count(i) || outer.op_type != "Mul" || !outer.domain.empty() || outer.inputs.size() != 2 ||
        outer.outputs.size() != 1) {
      continue;
    }
    // Mul(Mul(x, term), h).
    for (int k = 0; k < 2 && outer.op_type == "Mul"; ++k) {
      int64_t scale_rank = 0;
      const std::optional<float> scale = ConstantScalar(model, index, outer.inputs[1 - k], &scale_rank);
      size_t inner_at = 0;
      const Node* inner = OnlyReaderProduct(g, index, *removed, outer.inputs[k], "Mul", &inner_at);
      if (!scale || inner == nullptr || inner->inputs.size() != 2) continue;
      for (int j = 0; j < 2; ++j) {
        const std::string x = inner->inputs[1 - j];
        const std::optional<ErfTerm> t = MatchErfTerm(model, g, index, *removed, inner->inputs[j], x);
        if (!t) continue;
        WriteGeluChain(outer, "GeluErfChain", x, *t, *scale, scale_rank, inner_at, removed, fused);
        break;
      }
    }
    // Mul(x, Mul(term, h)): the dynamo exporter's order.
    for (int k = 0; k < 2 && outer.op_type == "Mul"; ++k) {
      const std::string x = outer.inputs[1 - k];
      size_t inner_at = 0;
      const Node* inner = OnlyReaderProduct(g, index, *removed, outer.inputs[k], "Mul", &inner_at);
      if (inner == nullptr || inner->inputs.size() != 2) continue;
      for (int j = 0; j < 2; ++j) {
        int64_t scale_rank = 0;
        const std::optional<float> scale = ConstantScalar(model, index, inner->inputs[1 - j], &scale_rank);
        if (!scale) continue;
        const std::optional<ErfTerm> t = MatchErfTerm(model, g, index, *removed, inner->inputs[j], x);
        if (!t) continue;
        WriteGeluChain(outer, "GeluErfScaledChain", x, *t, *scale, scale_rank, inner_at, removed, fused);
        break;
      }
    }
  }
}

// Mul(x, Mul(h, Add(a, Tanh(Mul(s, Add(x, Mul(x, Mul(x, Mul(c, x))))))))) ->
// sparq.GeluTanhChain(x) (see the top); the outer Mul keeps its name and
// output, the eight nodes before it go into *removed.
void FuseGeluTanhChain(const Model& model, Graph& g, const ValueIndex& index, std::set<size_t>* removed,
                       std::vector<std::string>* fused) {
  // The node of `op` producing `value` (read by nothing else) whose operands
  // are `operand` and another value, returned in *other; nullptr otherwise.
  auto with_operand = [&](const std::string& value, const char* op, const std::string& operand, std::string* other,
                          size_t* at) -> const Node* {
    const Node* n = OnlyReaderProduct(g, index, *removed, value, op, at);
    if (n == nullptr || n->inputs.size() != 2) return nullptr;
    const int k = n->inputs[0] == operand ? 0 : n->inputs[1] == operand ? 1 : -1;
    if (k < 0) return nullptr;
    *other = n->inputs[1 - k];
    return n;
  };
  // The node of `op` producing `value` with one operand a float32 scalar
  // constant (*constant, its rank into *rank) and the other returned in *other.
  auto with_constant = [&](const std::string& value, const char* op, float* constant, int64_t* rank,
                           std::string* other, size_t* at) -> const Node* {
    const Node* n = OnlyReaderProduct(g, index, *removed, value, op, at);
    if (n == nullptr || n->inputs.size() != 2) return nullptr;
    for (int k = 0; k < 2; ++k) {
      const std::optional<float> c = ConstantScalar(model, index, n->inputs[k], rank);
      if (c) {
        *constant = *c;
        *other = n->inputs[1 - k];
        return n;
      }
    }
    return nullptr;
  };
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    Node& outer = g.nodes[i];
    if (removed->count(i) || outer.op_type != "Mul" || !outer.domain.empty() || outer.inputs.size() != 2 ||
        outer.outputs.size() != 1)
      continue;
    for (int k = 0; k < 2; ++k) {
      const std::string& x = outer.inputs[1 - k];
      float half = 0, offset = 0, inner = 0, cube = 0;
      int64_t rank = 0, r = 0;
      size_t at[8];
      std::string a1, t, m3, sum, m2, m1, m0, x0;
      const Node* n4 = with_constant(outer.inputs[k], "Mul", &half, &r, &a1, &at[0]);
      if (n4 == nullptr) continue;
      rank = std::max(rank, r);
      const Node* add1 = with_constant(a1, "Add", &offset, &r, &t, &at[1]);
      if (add1 == nullptr) continue;
      rank = std::max(rank, r);
      const Node* tanh = OnlyReaderProduct(g, index, *removed, t, "Tanh", &at[2]);
      if (tanh == nullptr || tanh->inputs.size() != 1) continue;
      const Node* n3 = with_constant(tanh->inputs[0], "Mul", &inner, &r, &sum, &at[3]);
      if (n3 == nullptr) continue;
      rank = std::max(rank, r);
      if (with_operand(sum, "Add", x, &m2, &at[4]) == nullptr || with_operand(m2, "Mul", x, &m1, &at[5]) == nullptr ||
          with_operand(m1, "Mul", x, &m0, &at[6]) == nullptr)
        continue;
      const Node* n0 = with_constant(m0, "Mul", &cube, &r, &x0, &at[7]);
      if (n0 == nullptr || x0 != x) continue;
      rank = std::max(rank, r);
      for (size_t j : at) removed->insert(j);
      outer.op_type = "GeluTanhChain";
      outer.domain = kSparqDomain;
      outer.inputs = {x};
      outer.attributes = {Attribute::Float("cube", cube), Attribute::Float("inner", inner),
                          Attribute::Float("offset", offset), Attribute::Float("half", half),
                          Attribute::Int("min_rank", rank)};
      fused->push_back(outer.name);
      break;
    }
  }
}

// The one node that reads `x` among the nodes as rewritten so far (those not
// in `removed`; the index may be stale within a pass), or none when no node
// or more than one does.
std::optional<size_t> SoleKeptReader(const Graph& g, const std::set<size_t>& removed, const std::string& x) {
  std::optional<size_t> reader;
  for (size_t j = 0; j < g.nodes.size(); ++j) {
    if (removed.count(j) || !Reads(g.nodes[j], x)) continue;
    if (reader) return std::nullopt;
    reader = j;
  }
  return reader;
}

// sparq.MatMulIntegerToFloat -> sparq.GeluErfChain (just fused) -> one
// MatMulIntegerToFloat with activation "GeluErfChain": the GEMM applies the
// GELU to each row of its output while it is in the cache. x (the product)
// must be read by nothing but the GELU chain and not be a graph output.
void FuseGeluIntoDynamicMatMul(Graph& g, const ValueIndex& index, std::set<size_t>* removed,
                               std::vector<std::string>* fused) {
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& gelu = g.nodes[i];
    if (removed->count(i) || gelu.op_type != "GeluErfChain" || gelu.domain != kSparqDomain ||
        gelu.inputs.size() != 1 || gelu.attr_int("min_rank", 0) > 1) {
      continue;
    }
    const std::string& x = gelu.inputs[0];
    const std::optional<size_t> p = index.Producer(x);
    if (!p || removed->count(*p) || index.IsGraphOutput(x)) continue;
    Node& mm = g.nodes[*p];
    if (mm.op_type != "MatMulIntegerToFloat" || mm.domain != kSparqDomain || mm.outputs.size() != 1 ||
        mm.attr("activation") != nullptr) {
      continue;
    }
    if (SoleKeptReader(g, *removed, x) != i) continue;  // the nodes as rewritten so far
    mm.attributes.push_back(Attribute::String("activation", "GeluErfChain"));
    mm.attributes.push_back(Attribute::Float("gelu_divisor", gelu.attr_float("divisor", 1.41421356f)));
    mm.attributes.push_back(Attribute::Float("gelu_offset", gelu.attr_float("offset", 1.0f)));
    mm.attributes.push_back(Attribute::Float("gelu_scale", gelu.attr_float("scale", 0.5f)));
    mm.outputs[0] = gelu.outputs[0];
    removed->insert(i);
    fused->push_back(gelu.name);
  }
}

// sparq.ConvIntegerToFloat -> sparq.Silu -> one ConvIntegerToFloat with
// activation "Silu" (see the top); the conv takes the Silu's output, the
// Silu goes into *removed. x must be read by nothing but the Silu (the nodes
// as rewritten so far) and not be a graph output.
void FuseSiluIntoConvIntegerToFloat(Graph& g, const ValueIndex& index, std::set<size_t>* removed,
                                    std::vector<std::string>* fused) {
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& silu = g.nodes[i];
    if (removed->count(i) || silu.op_type != "Silu" || silu.domain != kSparqDomain || silu.inputs.size() != 1 ||
        silu.outputs.size() != 1) {
      continue;
    }
    const std::string& x = silu.inputs[0];
    const std::optional<size_t> p = index.Producer(x);
    if (!p || removed->count(*p) || index.IsGraphOutput(x)) continue;
    Node& conv = g.nodes[*p];
    if (conv.op_type != "ConvIntegerToFloat" || conv.domain != kSparqDomain || conv.outputs.size() != 1 ||
        conv.attr("activation") != nullptr) {
      continue;
    }
    if (SoleKeptReader(g, *removed, x) != i) continue;
    conv.attributes.push_back(Attribute::String("activation", "Silu"));
    conv.outputs[0] = silu.outputs[0];
    removed->insert(i);
    fused->push_back(silu.name);
  }
}

// A QuantizeLinear of one constant float32 scale and one constant uint8 /
// int8 zero point (neither a run input), no block_size / output_dtype.
bool PerTensorQuantize(const Model& model, const ValueIndex& index, const Node& q) {
  if (q.op_type != "QuantizeLinear" || !q.domain.empty() || q.inputs.size() != 3 || q.outputs.size() != 1 ||
      q.inputs[1].empty() || q.inputs[2].empty() || !ConstantScalar(model, index, q.inputs[1]) ||
      q.attr_int("block_size", 0) != 0 || q.attr_int("output_dtype", 0) != 0) {
    return false;
  }
  for (const ValueInfo& v : model.graph.initializer_inputs)
    if (v.name == q.inputs[2]) return false;  // a run input may replace it
  auto it = model.graph.initializers.find(q.inputs[2]);
  return it != model.graph.initializers.end() && it->second.numel() == 1 &&
         (it->second.dtype() == DataType::kUInt8 || it->second.dtype() == DataType::kInt8);
}

// Concat -> QuantizeLinear (PerTensorQuantize; the Concat's output read by it
// alone, no graph output) becomes a QuantizeLinear per Concat input (the same
// scale, zero point and attributes) and a Concat of the bytes: the same values
// (QuantizeLinear is elementwise), the Concat moving bytes instead of floats,
// and a ConvIntegerToFloat input then read by its QuantizeLinear alone takes it
// in (FuseQuantizeIntoConvIntegerToFloat). YOLOv8n's C2f and SPPF blocks and
// its neck have 13 (bench/RESULTS.md, conv22). The new nodes go right before
// their Concat (the executor sorted the graph before the passes). Run before
// the ValueIndex of FuseConvActivations is taken.
void QuantizeConcatInputs(Model* model) {
  Graph& g = model->graph;
  const ValueIndex index(g);
  std::map<size_t, std::vector<Node>> before;  // new nodes per Concat index
  std::set<size_t> dropped;                    // the QuantizeLinear nodes taken in
  GraphEditor editor(g);
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& concat = g.nodes[i];
    if (concat.op_type != "Concat" || !concat.domain.empty() || concat.outputs.size() != 1 || concat.inputs.empty()) continue;
    const std::string& y = concat.outputs[0];
    if (index.IsGraphOutput(y) || index.Readers(y).size() != 1) continue;
    const size_t qi = index.Readers(y)[0];
    const Node& q = g.nodes[qi];
    if (dropped.count(qi) || q.inputs.empty() || q.inputs[0] != y || !PerTensorQuantize(*model, index, q)) continue;
    bool named = true;
    for (const std::string& in : concat.inputs) named = named && !in.empty();
    if (!named) continue;
    std::vector<Node>& nodes = before[i];
    std::vector<std::string> inputs;
    for (const std::string& in : concat.inputs) {
      const std::string out = editor.FreshName(in + "_quantized");
      nodes.push_back({editor.FreshName(q.name + "/" + in), "QuantizeLinear", "", {in, q.inputs[1], q.inputs[2]}, {out},
                       q.attributes, ""});
      inputs.push_back(out);
    }
    g.nodes[i].inputs = std::move(inputs);
    g.nodes[i].outputs[0] = q.outputs[0];
    dropped.insert(qi);
  }
  if (before.empty()) return;
  std::vector<Node> nodes;
  nodes.reserve(g.nodes.size() + 8 * before.size());
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    if (dropped.count(i)) continue;
    if (auto it = before.find(i); it != before.end())
      for (Node& n : it->second) nodes.push_back(std::move(n));
    nodes.push_back(std::move(g.nodes[i]));
  }
  g.nodes = std::move(nodes);
}

// sparq.ConvIntegerToFloat (after FuseSiluIntoConvIntegerToFloat) whose
// output's only reader is a QuantizeLinear of one constant float32 scale and
// one constant uint8 / int8 zero point (no block_size / output_dtype, the
// output not a graph output): the QuantizeLinear's scale and zero point
// become the conv's inputs 7 and 8 (Y_scale, Y_zero_point) and its output the
// conv's, so the conv writes the bytes (its float values quantized while in
// cache) instead of a float tensor that the QuantizeLinear read back.
// YOLOv8n's default INT8 file has 31 (bench/RESULTS.md, conv22).
void FuseQuantizeIntoConvIntegerToFloat(const Model& model, Graph& g, const ValueIndex& index, std::set<size_t>* removed,
                                        std::vector<std::string>* fused) {
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    Node& conv = g.nodes[i];
    if (removed->count(i) || conv.op_type != "ConvIntegerToFloat" || conv.domain != kSparqDomain ||
        conv.outputs.size() != 1 || conv.inputs.size() < 6 || conv.inputs.size() > 7) {
      continue;
    }
    const std::string x = conv.outputs[0];
    if (index.IsGraphOutput(x)) continue;
    const std::optional<size_t> reader = SoleKeptReader(g, *removed, x);
    if (!reader) continue;
    const Node& q = g.nodes[*reader];
    if (q.op_type != "QuantizeLinear" || !q.domain.empty() || q.inputs.size() != 3 || q.outputs.size() != 1 ||
        q.inputs[0] != x || !PerTensorQuantize(model, index, q)) {
      continue;
    }
    conv.inputs.resize(7);  // Bias may be absent: ""
    conv.inputs.push_back(q.inputs[1]);
    conv.inputs.push_back(q.inputs[2]);
    conv.outputs[0] = q.outputs[0];
    removed->insert(*reader);
    fused->push_back(q.name);
  }
}

// MatMul -> [Mul | Div by a scalar] -> [Add(mask)] -> Softmax(-1) -> [NaN
// guard] -> MatMul -> sparq.Attention, Q and K^T each through an optional
// Mul by a scalar (see the top); the second MatMul keeps its name and output,
// the other nodes go into *removed.
void FuseAttention(const Model& model, Graph& g, const ValueIndex& index, std::set<size_t>* removed,
                   std::vector<std::string>* fused) {
  const int64_t default_axis = model.opset("") < 13 ? 1 : -1;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    Node& mm2 = g.nodes[i];
    if (removed->count(i) || mm2.op_type != "MatMul" || !mm2.domain.empty() || mm2.inputs.size() != 2 ||
        mm2.outputs.size() != 1) {
      continue;
    }
    size_t softmax_at = 0, add_at = 0;
    std::vector<size_t> chain;
    // torch's scaled_dot_product_attention guard: Where(IsNaN(p), c, p) between
    // the Softmax and the MatMul, p read by nothing else.
    std::string probs = mm2.inputs[0], nan_fill;
    if (size_t where_at = 0, isnan_at = 0;
        const Node* where = OnlyReaderProduct(g, index, *removed, probs, "Where", &where_at)) {
      const std::optional<size_t> isnan_p = where->inputs.size() == 3 ? index.Producer(where->inputs[0]) : std::nullopt;
      if (!isnan_p) continue;
      isnan_at = *isnan_p;
      const Node& isnan = g.nodes[isnan_at];
      const std::string& p = where->inputs[2];
      if (removed->count(isnan_at) || isnan.op_type != "IsNaN" || !isnan.domain.empty() || isnan.inputs.size() != 1 ||
          isnan.inputs[0] != p || index.IsGraphOutput(where->inputs[0]) || index.Readers(where->inputs[0]).size() != 1 ||
          index.IsGraphOutput(p) || index.Readers(p).size() != 2 || !ConstantScalar(model, index, where->inputs[1])) {
        continue;
      }
      const std::optional<size_t> sm = index.Producer(p);
      if (!sm || removed->count(*sm) || g.nodes[*sm].op_type != "Softmax" || !g.nodes[*sm].domain.empty() ||
          g.nodes[*sm].outputs.size() != 1) {
        continue;
      }
      nan_fill = where->inputs[1];
      chain = {where_at, isnan_at};
      softmax_at = *sm;
    } else if (!OnlyReaderProduct(g, index, *removed, probs, "Softmax", &softmax_at)) {
      continue;
    }
    const Node* softmax = &g.nodes[softmax_at];
    if (softmax->inputs.size() != 1 || softmax->attr_int("axis", default_axis) != -1) continue;
    chain.push_back(softmax_at);
    // The chain up from `value` to the first MatMul: [Mul | Div by a scalar], MatMul.
    struct Head {
      std::string scale_op = "none", scale;
      const Node* mm1 = nullptr;
      std::vector<size_t> nodes;
    };
    auto head_of = [&](const std::string& value) -> std::optional<Head> {
      Head h;
      std::string scores = value;
      size_t at = 0;
      for (const char* op : {"Mul", "Div"}) {
        const Node* s = OnlyReaderProduct(g, index, *removed, value, op, &at);
        if (s == nullptr || s->inputs.size() != 2) continue;
        for (int k = std::string(op) == "Div" ? 1 : 0; k < 2; ++k) {  // Div: scores / scale only
          if (!ConstantScalar(model, index, s->inputs[k])) continue;
          h.scale_op = op;
          h.scale = s->inputs[k];
          scores = s->inputs[1 - k];
          h.nodes.push_back(at);
          break;
        }
      }
      h.mm1 = OnlyReaderProduct(g, index, *removed, scores, "MatMul", &at);
      if (h.mm1 == nullptr || h.mm1->inputs.size() != 2) return std::nullopt;
      h.nodes.push_back(at);
      return h;
    };
    std::string mask;
    std::optional<Head> head = head_of(softmax->inputs[0]);
    if (const Node* add = OnlyReaderProduct(g, index, *removed, softmax->inputs[0], "Add", &add_at);
        !head && add != nullptr && add->inputs.size() == 2) {
      for (int k = 0; k < 2 && !head; ++k) {  // either side may be the scores
        head = head_of(add->inputs[k]);
        if (head) mask = add->inputs[1 - k];
      }
      chain.push_back(add_at);
    }
    if (!head) continue;
    const Node* mm1 = head->mm1;
    chain.insert(chain.end(), head->nodes.begin(), head->nodes.end());
    // torch's SDPA scales Q and K^T each by sqrt(scale) before the product:
    // operand -> Mul(c) -> MatMul, c a float32 scalar constant, either order.
    std::string operand[2] = {mm1->inputs[0], mm1->inputs[1]}, operand_scale[2];
    for (int side = 0; side < 2; ++side) {
      size_t at = 0;
      const Node* mul = OnlyReaderProduct(g, index, *removed, operand[side], "Mul", &at);
      if (mul == nullptr || mul->inputs.size() != 2) continue;
      for (int k = 0; k < 2; ++k) {
        if (!ConstantScalar(model, index, mul->inputs[k]) || ConstantScalar(model, index, mul->inputs[1 - k])) continue;
        operand_scale[side] = mul->inputs[k];
        operand[side] = mul->inputs[1 - k];
        chain.push_back(at);
        break;
      }
    }
    // BERT's Transposes around it (Q, V: [b, s, h, d] -> [b, h, s, d], K: -> [b, h, d, s],
    // the output back): all four go into the node (layout "bshd"), or none.
    auto transpose_of = [&](const std::string& value, std::vector<int64_t> perm, size_t* at) -> const Node* {
      const Node* t = OnlyReaderProduct(g, index, *removed, value, "Transpose", at);
      return t != nullptr && t->inputs.size() == 1 && t->attr_ints("perm") == perm ? t : nullptr;
    };
    size_t tq = 0, tk = 0, tv = 0;
    const Node* q_t = transpose_of(operand[0], {0, 2, 1, 3}, &tq);
    const Node* k_t = transpose_of(operand[1], {0, 2, 3, 1}, &tk);
    const Node* v_t = transpose_of(mm2.inputs[1], {0, 2, 1, 3}, &tv);
    const std::vector<size_t>& y_readers = index.Readers(mm2.outputs[0]);
    const Node* y_t = y_readers.size() == 1 && !index.IsGraphOutput(mm2.outputs[0]) ? &g.nodes[y_readers[0]] : nullptr;
    const bool bshd = q_t != nullptr && k_t != nullptr && v_t != nullptr && y_t != nullptr &&
                      !removed->count(y_readers[0]) && y_t->op_type == "Transpose" && y_t->domain.empty() &&
                      y_t->outputs.size() == 1 && y_t->attr_ints("perm") == std::vector<int64_t>{0, 2, 1, 3};
    for (size_t at : chain) removed->insert(at);
    mm2.op_type = "Attention";
    mm2.domain = kSparqDomain;
    mm2.inputs = {operand[0], operand[1], mm2.inputs[1], mask, head->scale};
    if (!operand_scale[0].empty() || !operand_scale[1].empty() || !nan_fill.empty())
      mm2.inputs.insert(mm2.inputs.end(), {operand_scale[0], operand_scale[1], nan_fill});
    mm2.attributes = {Attribute::String("scale_op", head->scale_op)};
    if (bshd) {
      mm2.inputs[0] = q_t->inputs[0], mm2.inputs[1] = k_t->inputs[0], mm2.inputs[2] = v_t->inputs[0];
      mm2.outputs[0] = y_t->outputs[0];
      for (size_t at : {tq, tk, tv, y_readers[0]}) removed->insert(at);
      mm2.attributes.push_back(Attribute::String("layout", "bshd"));
    }
    fused->push_back(mm2.name);
  }
}

// Whether `n` is a ReduceMean over the last axis only (axes [-1], the
// attribute before opset 18, a constant input from 18) keeping it.
bool LastAxisMean(const Model& model, const ValueIndex& index, const Node& n) {
  if (n.op_type != "ReduceMean" || !n.domain.empty() || n.outputs.size() != 1 || n.attr_int("keepdims", 1) != 1)
    return false;
  if (model.opset("") < 18) return n.inputs.size() == 1 && n.attr_ints("axes") == std::vector<int64_t>{-1};
  if (n.inputs.size() != 2) return false;
  for (const ValueInfo& v : model.graph.initializer_inputs)
    if (v.name == n.inputs[1]) return false;
  auto init = model.graph.initializers.find(n.inputs[1]);
  const Tensor* axes = init != model.graph.initializers.end() ? &init->second : nullptr;
  if (axes == nullptr) {
    const Node* p = index.ProducerNode(n.inputs[1]);
    const Attribute* value = p != nullptr && p->op_type == "Constant" && p->domain.empty() ? p->attr("value") : nullptr;
    if (value != nullptr && value->kind == Attribute::Kind::kTensor) axes = &value->t;
  }
  return axes != nullptr && axes->dtype() == DataType::kInt64 && axes->numel() == 1 && axes->data<int64_t>()[0] == -1;
}

// The other operand of a two-input `n` that reads `value`, in either order
// (commutative ops).
std::optional<std::string> OtherOperand(const Node& n, const std::string& value) {
  if (n.inputs.size() != 2) return std::nullopt;
  if (n.inputs[0] == value) return n.inputs[1];
  if (n.inputs[1] == value) return n.inputs[0];
  return std::nullopt;
}

// LayerNorm as exported below opset 17 -> sparq.LayerNormChain (see the top);
// the last node (the Add of beta, else the Mul of gamma) keeps its name and
// output, the others go into *removed.
void FuseLayerNormChain(const Model& model, Graph& g, const ValueIndex& index, std::set<size_t>* removed,
                        std::vector<std::string>* fused) {
  // The one reader of `value` (not a graph output), of type op, or nullptr.
  auto only_reader = [&](const std::string& value, const char* op, size_t* at) -> Node* {
    const std::vector<size_t>& readers = index.Readers(value);
    if (index.IsGraphOutput(value) || readers.size() != 1 || removed->count(readers[0])) return nullptr;
    Node& n = g.nodes[readers[0]];
    if (n.op_type != op || !n.domain.empty() || n.outputs.size() != 1) return nullptr;
    *at = readers[0];
    return &n;
  };
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& mean = g.nodes[i];
    if (removed->count(i) || !LastAxisMean(model, index, mean)) continue;
    const std::string& x = mean.inputs[0];
    size_t sub_at = 0, pow_at = 0, mean2_at = 0, add_at = 0, sqrt_at = 0, div_at = 0, mul_at = 0, beta_at = 0;
    const Node* sub = only_reader(mean.outputs[0], "Sub", &sub_at);
    if (sub == nullptr || sub->inputs.size() != 2 || sub->inputs[0] != x || sub->inputs[1] != mean.outputs[0]) continue;
    // d = x - mean, read by the Pow and the Div alone.
    const std::string& d = sub->outputs[0];
    const std::vector<size_t>& d_readers = index.Readers(d);
    if (index.IsGraphOutput(d) || d_readers.size() != 2) continue;
    const Node* pow = nullptr;
    const Node* div = nullptr;
    for (size_t r : d_readers) {
      const Node& n = g.nodes[r];
      if (removed->count(r) || !n.domain.empty() || n.outputs.size() != 1 || n.inputs.size() != 2 || n.inputs[0] != d)
        continue;
      if (n.op_type == "Pow") pow = &n, pow_at = r;
      if (n.op_type == "Div") div = &n, div_at = r;
    }
    if (pow == nullptr || div == nullptr) continue;
    const std::optional<float> exponent = ConstantScalar(model, index, pow->inputs[1]);
    if (!exponent || *exponent != 2.0f) continue;
    const Node* mean2 = only_reader(pow->outputs[0], "ReduceMean", &mean2_at);
    if (mean2 == nullptr || !LastAxisMean(model, index, *mean2)) continue;
    const Node* add = only_reader(mean2->outputs[0], "Add", &add_at);
    const std::optional<std::string> eps = add != nullptr ? OtherOperand(*add, mean2->outputs[0]) : std::nullopt;
    if (!eps || !ConstantScalar(model, index, *eps)) continue;
    const Node* sqrt = only_reader(add->outputs[0], "Sqrt", &sqrt_at);
    if (sqrt == nullptr || sqrt->inputs.size() != 1 || div->inputs[1] != sqrt->outputs[0] ||
        index.IsGraphOutput(sqrt->outputs[0]) || index.Readers(sqrt->outputs[0]).size() != 1) {
      continue;
    }
    Node* mul = only_reader(div->outputs[0], "Mul", &mul_at);
    const std::optional<std::string> gamma = mul != nullptr ? OtherOperand(*mul, div->outputs[0]) : std::nullopt;
    if (!gamma || *gamma == div->outputs[0]) continue;
    Node* last = mul;
    std::string beta;
    if (Node* b = only_reader(mul->outputs[0], "Add", &beta_at)) {
      const std::optional<std::string> other = OtherOperand(*b, mul->outputs[0]);
      if (other && *other != mul->outputs[0]) last = b, beta = *other;
    }
    const std::vector<std::string> inputs = {x, pow->inputs[1], *eps, *gamma, beta};
    for (size_t at : {i, sub_at, pow_at, mean2_at, add_at, sqrt_at, div_at}) removed->insert(at);
    if (last != mul) removed->insert(mul_at);
    last->op_type = "LayerNormChain";
    last->domain = kSparqDomain;
    last->inputs = inputs;
    if (beta.empty()) last->inputs.pop_back();
    last->attributes.clear();
    fused->push_back(last->name);
  }
}

// A float32 initializer that run inputs cannot override, or nullptr.
const Tensor* FixedFloatInitializer(const Graph& g, const std::string& name) {
  for (const ValueInfo& v : g.initializer_inputs)
    if (v.name == name) return nullptr;
  auto it = g.initializers.find(name);
  return it != g.initializers.end() && it->second.dtype() == DataType::kFloat32 ? &it->second : nullptr;
}

// Whether `n` is a float32 Conv, or a FusedConv with a clamp, of fixed
// weights W (rank 4) and bias (absent or fixed); *w gets W.
bool ClampedConv(const Graph& g, const Node& n, const Tensor** w) {
  const bool conv = n.op_type == "Conv" && n.domain.empty();
  const bool fused = n.op_type == "FusedConv" && n.domain == kSparqDomain && n.attr_string("activation", "") != "Silu";
  if ((!conv && !fused) || n.inputs.size() < 2 || n.inputs.size() > 3 || n.outputs.size() != 1) return false;
  *w = FixedFloatInitializer(g, n.inputs[1]);
  if (*w == nullptr || (*w)->rank() != 4) return false;
  return n.inputs.size() < 3 || n.inputs[2].empty() || FixedFloatInitializer(g, n.inputs[2]) != nullptr;
}

// Whether the 2-D Conv `n` of weights w is 1x1 with stride 1, no padding
// and one group.
bool PointwiseConv(const Node& n, const Tensor& w) {
  auto all = [](const std::vector<int64_t>& v, int64_t value) {
    return std::all_of(v.begin(), v.end(), [value](int64_t e) { return e == value; });
  };
  const std::string auto_pad = n.attr_string("auto_pad", "NOTSET");
  return w.dim(2) == 1 && w.dim(3) == 1 && n.attr_int("group", 1) == 1 && all(n.attr_ints("strides"), 1) &&
         all(n.attr_ints("pads"), 0) && (auto_pad == "NOTSET" || auto_pad == "VALID");
}

// The graph without the nodes at `removed`, and the ai.sparq import the
// fused nodes need.
void DropNodes(Model* model, const std::set<size_t>& removed) {
  Graph& g = model->graph;
  std::vector<Node> kept;
  for (size_t i = 0; i < g.nodes.size(); ++i)
    if (!removed.count(i)) kept.push_back(std::move(g.nodes[i]));
  g.nodes = std::move(kept);
  if (model->opset(kSparqDomain) == 0) model->opset_imports.push_back({kSparqDomain, 1});
}

}  // namespace

std::vector<std::string> FusePointwiseDepthwise(Model* model) {
  Graph& g = model->graph;
  const ValueIndex index(g);
  std::vector<std::string> fused;
  std::set<size_t> removed;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& pw = g.nodes[i];
    const Tensor* w1 = nullptr;
    if (removed.count(i) || !ClampedConv(g, pw, &w1) || !PointwiseConv(pw, *w1)) continue;
    const std::string& t = pw.outputs[0];
    const std::vector<size_t>& readers = index.Readers(t);
    if (index.IsGraphOutput(t) || readers.size() != 1 || removed.count(readers[0])) continue;
    Node& dw = g.nodes[readers[0]];
    const Tensor* w2 = nullptr;
    if (!ClampedConv(g, dw, &w2) || dw.inputs[0] != t || w2->dim(0) != w1->dim(0) || w2->dim(1) != 1 ||
        dw.attr_int("group", 1) != w2->dim(0)) {
      continue;
    }
    Node node;
    node.name = dw.name, node.op_type = "PointwiseDepthwise", node.domain = kSparqDomain;
    auto bias = [](const Node& n) { return n.inputs.size() > 2 ? n.inputs[2] : std::string(); };
    node.inputs = {pw.inputs[0], pw.inputs[1], bias(pw), dw.inputs[1], bias(dw)};
    node.outputs = dw.outputs;
    node.attributes = dw.attributes;
    node.attributes.push_back(Attribute::Float("pw_out_min", pw.attr_float("out_min", -kInf)));
    node.attributes.push_back(Attribute::Float("pw_out_max", pw.attr_float("out_max", kInf)));
    dw = std::move(node);  // in the depthwise node's place: after every producer of x
    removed.insert(i);
    fused.push_back(dw.name);
  }
  if (!fused.empty()) DropNodes(model, removed);
  return fused;
}

std::vector<std::string> FuseConvActivations(Model* model) {
  QuantizeConcatInputs(model);
  Graph& g = model->graph;
  const ValueIndex index(g);  // node indices stay valid: removals wait for the end

  std::vector<std::string> fused;
  std::set<size_t> removed;
  const bool may_hold_16_bit_floats = MayHold16BitFloats(g);
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    Node& conv = g.nodes[i];
    if (conv.op_type != "Conv" || !conv.domain.empty() || conv.outputs.size() != 1 || conv.inputs.size() < 2) continue;
    auto w = g.initializers.find(conv.inputs[1]);  // float32 convolutions only (FP16 models keep their Conv)
    if (w == g.initializers.end() || w->second.dtype() != DataType::kFloat32) continue;
    const std::string& t = conv.outputs[0];
    const std::vector<size_t>& readers = index.Readers(t);
    if (index.IsGraphOutput(t)) continue;
    if (const auto silu = may_hold_16_bit_floats ? std::nullopt : SiluOf(g, index, t);
        silu && !removed.count(silu->first) && !removed.count(silu->second)) {
      conv.op_type = "FusedConv";
      conv.domain = kSparqDomain;
      conv.attributes.push_back(Attribute::String("activation", "Silu"));
      conv.attributes.push_back(Attribute::Float("out_min", -kInf));
      conv.attributes.push_back(Attribute::Float("out_max", kInf));
      conv.outputs[0] = g.nodes[silu->second].outputs[0];
      removed.insert(silu->first);
      removed.insert(silu->second);
      fused.push_back(conv.name);
      continue;
    }
    if (readers.size() != 1) continue;
    const size_t act_index = readers[0];
    const Node& act = g.nodes[act_index];
    const std::optional<std::pair<float, float>> clamp = ActivationClamp(*model, index, act);
    if (!clamp || removed.count(act_index)) continue;
    conv.op_type = "FusedConv";
    conv.domain = kSparqDomain;
    conv.attributes.push_back(Attribute::String("activation", act.op_type));
    conv.attributes.push_back(Attribute::Float("out_min", clamp->first));
    conv.attributes.push_back(Attribute::Float("out_max", clamp->second));
    conv.outputs[0] = act.outputs[0];
    removed.insert(act_index);
    fused.push_back(conv.name);
  }
  FuseSilu(g, index, &removed, &fused);
  FuseSiluIntoConvIntegerToFloat(g, index, &removed, &fused);
  FuseQuantizeIntoConvIntegerToFloat(*model, g, index, &removed, &fused);
  FuseHardSwishChain(*model, g, index, &removed, &fused);
  if (!may_hold_16_bit_floats) {
    FuseGeluErfChain(*model, g, index, &removed, &fused);
    FuseGeluTanhChain(*model, g, index, &removed, &fused);
    FuseGeluIntoDynamicMatMul(g, index, &removed, &fused);
    FuseAttention(*model, g, index, &removed, &fused);
    FuseLayerNormChain(*model, g, index, &removed, &fused);
  }
  if (!fused.empty()) DropNodes(model, removed);
  return fused;
}

}  // namespace sparq
