// One-hot MatMul -> table lookup:
//
//   a ── [Expand(s)] ── Equal(C) ── e ── Cast(float) ── f ── MatMul(W) ── y
//     =>   (a, C, T[, s]) ── sparq.OneHotLookup ── y
//          T[v] = W[v] for each class v < V, T[V] = 0 (no class matched)
//
//   ... ── f ── QuantizeLinear(sq, zq) ── q ── QLinearMatMul(sa, za, B, sb, zb, sy, zy) ── y
//     =>   the same lookup, T int8 / uint8:
//          T[v][j] = Requantize((Q(1) - za) * (B[v][j] - zb[j]), sa * sb[j] / sy, zy), T[V][j] = zy
//
//   ... ── f ── QuantizeLinear(sq, zq) ── q ── DequantizeLinear(sd, zd) ── d ── MatMul(W) ── y
//     =>   the same lookup, T float32 (a quantizer that leaves the MatMul's
//          output float: sparq's `inputs_only` search candidate; W float, the
//          folded DequantizeLinear of the int8 weights):
//          T[v][j] = a1 * W[v][j] in float32, a1 = DQ(Q(1)), T[V][j] = +0
//
//   ... ── f ── QuantizeLinear(sq, zq) ── q ── sparq.MatMulIntegerToFloat(B, za, zb, sa, sb[, C]) ── y
//     =>   the same lookup, T float32 (the form fuse-qdq gives the MatMul just
//          above when W is a dequantized int8 constant):
//          T[v][j] = float((Q(1) - za) * (B[v][j] - zb[j])) * (sa * sb[j]) [+ C[j]],
//          T[V][j] = 0.0f * (sa * sb[j]) [+ C[j]]
//
// Casts to float32 of f itself may sit between the Cast and the next node
// (identities: the float16 lowering of a Cast to float16 of the one-hot,
// runtime/passes/fp16_lowering.cc, in sparq's FP16 files); they go too.
//
// when
//   - C is a constant int32 / int64 tensor [1, ..., 1, V] (or [V]) of distinct
//     values, a the Equal's other operand, and a's last dimension is 1 by
//     construction: a Reshape to a constant shape ending in 1, or an Expand
//     (read by nothing else) of one, whose shape s the lookup applies;
//   - e, f (and q) are read only by the next node and are not graph outputs;
//     Cast is to float32; MatMul reads f as its left operand;
//   - FP32: W is a float32 initializer [V, D] with no zero, infinite or NaN
//     value. Every row of f is one-hot (one 1 and zeros) or all zeros, so
//     each output is a sum of one exact product 1 * w and of zeros: w in any
//     summation order (no zero w: no sign of zero to lose), and the zero row
//     sums zeros to +0 (the GEMM's accumulators start at +0);
//   - INT8: QuantizeLinear per tensor with Q(0) = za (zero maps to the zero
//     point, so the zeros of a row add nothing to the int32 accumulator);
//     QLinearMatMul's B an int8 / uint8 initializer [V, D], its scales and zero
//     points constants per tensor (b: or per column); the accumulator of
//     row v is the one nonzero product, requantized by the reference rule that
//     every QLinearMatMul kernel reproduces bit for bit;
//   - INT8 with a float output: QuantizeLinear and DequantizeLinear per
//     tensor, DQ(Q(0)) = 0 exactly (zq's code dequantizes to zero), W a
//     float32 initializer [V, D] whose every product a1 * W[v][j] is a finite
//     normal float32 (no zero, no subnormal): each output is then the one
//     product, rounded once, plus zeros, as in the FP32 case;
//   - sparq.MatMulIntegerToFloat: Q(0) = za, B an int8 / uint8 initializer
//     [V, D], scalar sa and za, sb and zb per tensor or per column, no
//     activation; each table entry is the reference epilogue
//     (kernels/ref/qdq_fused_ops.cc) of the row's one int32 product, which
//     every MatMulIntegerToFloat kernel reproduces bit for bit.
//
// The lookup replaces the Equal's [rows, V] comparisons, the [rows, V] float
// (and int8) one-hot tensors and a GEMM of depth V by one row copy per row:
// magika's 2048 bytes x 257 classes x 64: 0.95 ms of 8.5 (FP32) per sample.
// (In a float16 run the lookup's output is rounded to float16 after it, as
// the MatMul's was.)
#include "runtime/passes/one_hot_fusion.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <set>

#include "graph/graph_editor.h"
#include "graph/value_index.h"
#include "kernels/ref/quantize.h"
#include "kernels/registry.h"  // kSparqDomain
#include "runtime/passes/rewrite_util.h"

namespace sparq {
namespace {

// The tensor `name` always holds: an initializer that run inputs cannot
// override, or a Constant node's value; nullptr otherwise.
const Tensor* ConstantValue(const Model& model, const ValueIndex& index, const std::string& name) {
  for (const ValueInfo& v : model.graph.initializer_inputs)
    if (v.name == name) return nullptr;
  auto init = model.graph.initializers.find(name);
  if (init != model.graph.initializers.end()) return &init->second;
  const Node* p = index.ProducerNode(name);
  if (p == nullptr || p->op_type != "Constant" || !p->domain.empty()) return nullptr;
  const Attribute* value = p->attr("value");
  return value != nullptr && value->kind == Attribute::Kind::kTensor ? &value->t : nullptr;
}

// The only reader of `value` (a node of `op_type` in the default domain), when
// `value` has no other reader and is not a graph output.
Node* OnlyReader(Graph& g, const ValueIndex& index, const std::string& value, const char* op_type, size_t* at) {
  if (index.IsGraphOutput(value) || index.Readers(value).size() != 1) return nullptr;
  Node& n = g.nodes[index.Readers(value)[0]];
  if (n.op_type != op_type || !n.domain.empty()) return nullptr;
  *at = index.Readers(value)[0];
  return &n;
}

// The values of a constant int32 / int64 tensor [1, ..., 1, V], when distinct.
bool DistinctClasses(const Tensor* c, std::vector<int64_t>* values) {
  if (c == nullptr || c->rank() == 0 || c->numel() == 0 || c->dim(c->rank() - 1) != c->numel()) return false;
  if (c->dtype() != DataType::kInt32 && c->dtype() != DataType::kInt64) return false;
  for (int64_t i = 0; i < c->numel(); ++i)
    values->push_back(c->dtype() == DataType::kInt32 ? c->data<int32_t>()[i] : c->data<int64_t>()[i]);
  std::vector<int64_t> sorted = *values;
  std::sort(sorted.begin(), sorted.end());
  return std::adjacent_find(sorted.begin(), sorted.end()) == sorted.end();
}

// Whether `value` has last dimension 1 by construction: a Reshape to a
// constant shape whose last entry is 1.
bool LastDimIsOne(const Model& model, const ValueIndex& index, const std::string& value) {
  const Node* p = index.ProducerNode(value);
  if (p == nullptr || p->op_type != "Reshape" || !p->domain.empty() || p->inputs.size() < 2) return false;
  const Tensor* shape = ConstantValue(model, index, p->inputs[1]);
  return shape != nullptr && shape->dtype() == DataType::kInt64 && shape->numel() > 0 &&
         shape->data<int64_t>()[shape->numel() - 1] == 1;
}

// One scalar (or one-element) constant as float / int32; false otherwise.
bool ScalarFloat(const Tensor* t, float* v) {
  if (t == nullptr || t->numel() != 1 || t->dtype() != DataType::kFloat32) return false;
  *v = t->data<float>()[0];
  return true;
}
bool ZeroPoint(const Tensor* t, int32_t* v) {
  if (t == nullptr || t->numel() != 1) return false;
  if (t->dtype() == DataType::kInt8) return *v = t->data<int8_t>()[0], true;
  if (t->dtype() == DataType::kUInt8) return *v = t->data<uint8_t>()[0], true;
  return false;
}

// The FP32 table [V + 1, D] of MatMul(one-hot, W), or an empty tensor when W
// does not qualify (see the top).
Tensor FloatTable(const Tensor* w, int64_t V) {
  if (w == nullptr || w->dtype() != DataType::kFloat32 || w->rank() != 2 || w->dim(0) != V) return Tensor();
  const int64_t D = w->dim(1);
  const float* src = w->data<float>();
  for (int64_t i = 0; i < V * D; ++i)
    if (src[i] == 0.0f || !std::isfinite(src[i])) return Tensor();
  Tensor t(DataType::kFloat32, {V + 1, D});  // zeroed: row V is +0
  std::copy(src, src + V * D, t.data<float>());
  return t;
}

// The INT8 table [V + 1, D] of QLinearMatMul(QuantizeLinear(one-hot)), or an
// empty tensor when the nodes do not qualify (see the top).
Tensor QuantizedTable(const Model& model, const ValueIndex& index, const Node& quantize, const Node& mm, int64_t V) {
  auto constant = [&](const Node& n, size_t i) -> const Tensor* {
    return i < n.inputs.size() && !n.inputs[i].empty() ? ConstantValue(model, index, n.inputs[i]) : nullptr;
  };
  if (quantize.inputs.size() < 2 || quantize.attr("axis") != nullptr || quantize.attr("block_size") != nullptr ||
      quantize.attr("saturate") != nullptr || quantize.attr("output_dtype") != nullptr || mm.inputs.size() < 8)
    return Tensor();
  float q_scale = 0.0f, a_scale = 0.0f, y_scale = 0.0f;
  int32_t q_zp = 0, a_zp = 0, y_zp = 0;
  const Tensor* q_zp_t = constant(quantize, 2);
  if (!ScalarFloat(constant(quantize, 1), &q_scale) || (quantize.inputs.size() > 2 && !ZeroPoint(q_zp_t, &q_zp)) ||
      !ScalarFloat(constant(mm, 1), &a_scale) || !ZeroPoint(constant(mm, 2), &a_zp) ||
      !ScalarFloat(constant(mm, 6), &y_scale) || !ZeroPoint(constant(mm, 7), &y_zp))
    return Tensor();
  const bool q_signed = q_zp_t != nullptr && q_zp_t->dtype() == DataType::kInt8;
  const Tensor* a_zp_t = constant(mm, 2);
  if (a_zp_t->dtype() != (q_signed ? DataType::kInt8 : DataType::kUInt8)) return Tensor();
  auto quantized = [&](float x) -> int32_t {
    return q_signed ? QuantizeValue<int8_t>(x, q_scale, q_zp) : QuantizeValue<uint8_t>(x, q_scale, q_zp);
  };
  if (quantized(0.0f) != a_zp) return Tensor();
  const int32_t one = quantized(1.0f) - a_zp;
  const Tensor* b = constant(mm, 3);
  const Tensor* b_scale = constant(mm, 4);
  const Tensor* b_zp = constant(mm, 5);
  if (b == nullptr || b->rank() != 2 || b->dim(0) != V || b_scale == nullptr || b_zp == nullptr ||
      (b->dtype() != DataType::kInt8 && b->dtype() != DataType::kUInt8) || b_zp->dtype() != b->dtype() ||
      b_scale->dtype() != DataType::kFloat32)
    return Tensor();
  const int64_t D = b->dim(1);
  if ((b_scale->numel() != 1 && b_scale->numel() != D) || (b_zp->numel() != 1 && b_zp->numel() != D)) return Tensor();
  std::vector<float> multiplier(static_cast<size_t>(D));
  for (int64_t j = 0; j < D; ++j)
    multiplier[j] = RequantMultiplier(a_scale, b_scale->data<float>()[b_scale->numel() == 1 ? 0 : j], y_scale);
  const DataType y_type = constant(mm, 7)->dtype();
  Tensor t(y_type, {V + 1, D});
  std::vector<int32_t> acc(static_cast<size_t>(D));
  for (int64_t v = 0; v <= V; ++v) {
    for (int64_t j = 0; j < D && v < V; ++j) {  // row V (no class matched) stays 0: W has no row there
      const int64_t zj = b_zp->numel() == 1 ? 0 : j;
      const int32_t w = b->dtype() == DataType::kInt8 ? b->data<int8_t>()[v * D + j] - b_zp->data<int8_t>()[zj]
                                                      : b->data<uint8_t>()[v * D + j] - b_zp->data<uint8_t>()[zj];
      acc[j] = one * w;
    }
    if (v == V) std::fill(acc.begin(), acc.end(), 0);
    if (y_type == DataType::kInt8) {
      RequantizeS32Ref<int8_t>(D, acc.data(), nullptr, 0, multiplier.data(), 1, y_zp, false, t.data<int8_t>() + v * D);
    } else {
      RequantizeS32Ref<uint8_t>(D, acc.data(), nullptr, 0, multiplier.data(), 1, y_zp, false,
                                t.data<uint8_t>() + v * D);
    }
  }
  return t;
}

// The FP32 table [V + 1, D] of MatMul(DequantizeLinear(QuantizeLinear(one-hot)), W),
// or an empty tensor when the nodes do not qualify (see the top).
Tensor DequantizedTable(const Model& model, const ValueIndex& index, const Node& quantize, const Node& dequantize,
                        const Tensor* w, int64_t V) {
  auto constant = [&](const Node& n, size_t i) -> const Tensor* {
    return i < n.inputs.size() && !n.inputs[i].empty() ? ConstantValue(model, index, n.inputs[i]) : nullptr;
  };
  if (quantize.inputs.size() < 2 || quantize.attr("axis") != nullptr || quantize.attr("block_size") != nullptr ||
      quantize.attr("saturate") != nullptr || quantize.attr("output_dtype") != nullptr ||
      dequantize.inputs.size() < 2 || dequantize.attr("block_size") != nullptr ||
      dequantize.attr("output_dtype") != nullptr)
    return Tensor();
  if (w == nullptr || w->dtype() != DataType::kFloat32 || w->rank() != 2 || w->dim(0) != V) return Tensor();
  float q_scale = 0.0f, d_scale = 0.0f;
  int32_t q_zp = 0, d_zp = 0;
  const Tensor* q_zp_t = constant(quantize, 2);
  const Tensor* d_zp_t = constant(dequantize, 2);
  if (!ScalarFloat(constant(quantize, 1), &q_scale) || (quantize.inputs.size() > 2 && !ZeroPoint(q_zp_t, &q_zp)) ||
      !ScalarFloat(constant(dequantize, 1), &d_scale) ||
      (dequantize.inputs.size() > 2 && !dequantize.inputs[2].empty() && !ZeroPoint(d_zp_t, &d_zp)))
    return Tensor();
  const DataType q_type = q_zp_t != nullptr ? q_zp_t->dtype() : DataType::kUInt8;
  const DataType d_type = d_zp_t != nullptr ? d_zp_t->dtype() : DataType::kUInt8;
  if (q_type != d_type) return Tensor();
  auto quantized = [&](float x) -> int32_t {
    return q_type == DataType::kInt8 ? QuantizeValue<int8_t>(x, q_scale, q_zp) : QuantizeValue<uint8_t>(x, q_scale, q_zp);
  };
  if (DequantizeValue(quantized(0.0f), d_scale, d_zp) != 0.0f) return Tensor();
  const float a1 = DequantizeValue(quantized(1.0f), d_scale, d_zp);
  if (!std::isfinite(a1) || a1 == 0.0f) return Tensor();
  const int64_t D = w->dim(1);
  const float* src = w->data<float>();
  Tensor t(DataType::kFloat32, {V + 1, D});  // zeroed: row V is +0
  float* dst = t.data<float>();
  for (int64_t i = 0; i < V * D; ++i) {
    dst[i] = a1 * src[i];
    if (!std::isfinite(dst[i]) || std::fabs(dst[i]) < std::numeric_limits<float>::min()) return Tensor();
  }
  return t;
}

// The FP32 table [V + 1, D] of sparq.MatMulIntegerToFloat(QuantizeLinear(one-hot)),
// or an empty tensor when the nodes do not qualify (see the top).
Tensor IntegerToFloatTable(const Model& model, const ValueIndex& index, const Node& quantize, const Node& mm,
                           int64_t V) {
  auto constant = [&](const Node& n, size_t i) -> const Tensor* {
    return i < n.inputs.size() && !n.inputs[i].empty() ? ConstantValue(model, index, n.inputs[i]) : nullptr;
  };
  if (quantize.inputs.size() < 2 || quantize.attr("axis") != nullptr || quantize.attr("block_size") != nullptr ||
      quantize.attr("saturate") != nullptr || quantize.attr("output_dtype") != nullptr || mm.inputs.size() < 6 ||
      mm.inputs.size() > 7 || mm.attr("activation") != nullptr)
    return Tensor();
  float q_scale = 0.0f, a_scale = 0.0f;
  int32_t q_zp = 0, a_zp = 0;
  const Tensor* q_zp_t = constant(quantize, 2);
  const Tensor* a_zp_t = constant(mm, 2);
  if (!ScalarFloat(constant(quantize, 1), &q_scale) || (quantize.inputs.size() > 2 && !ZeroPoint(q_zp_t, &q_zp)) ||
      !ScalarFloat(constant(mm, 4), &a_scale) || !ZeroPoint(a_zp_t, &a_zp))
    return Tensor();
  const bool q_signed = q_zp_t != nullptr && q_zp_t->dtype() == DataType::kInt8;
  if (a_zp_t->dtype() != (q_signed ? DataType::kInt8 : DataType::kUInt8)) return Tensor();
  auto quantized = [&](float x) -> int32_t {
    return q_signed ? QuantizeValue<int8_t>(x, q_scale, q_zp) : QuantizeValue<uint8_t>(x, q_scale, q_zp);
  };
  if (quantized(0.0f) != a_zp) return Tensor();
  const int32_t one = quantized(1.0f) - a_zp;
  const Tensor* b = constant(mm, 1);
  const Tensor* b_zp = constant(mm, 3);
  const Tensor* b_scale = constant(mm, 5);
  const Tensor* bias = mm.inputs.size() > 6 ? constant(mm, 6) : nullptr;
  if (b == nullptr || b->rank() != 2 || b->dim(0) != V || b_scale == nullptr || b_zp == nullptr ||
      (b->dtype() != DataType::kInt8 && b->dtype() != DataType::kUInt8) || b_zp->dtype() != b->dtype() ||
      b_scale->dtype() != DataType::kFloat32 || (mm.inputs.size() > 6 && bias == nullptr))
    return Tensor();
  const int64_t D = b->dim(1);
  if ((b_scale->numel() != 1 && b_scale->numel() != D) || (b_zp->numel() != 1 && b_zp->numel() != D) ||
      (bias != nullptr && (bias->dtype() != DataType::kFloat32 || bias->rank() != 1 || bias->dim(0) != D)))
    return Tensor();
  Tensor t(DataType::kFloat32, {V + 1, D});
  float* dst = t.data<float>();
  for (int64_t j = 0; j < D; ++j) {
    const float scale = a_scale * b_scale->data<float>()[b_scale->numel() == 1 ? 0 : j];
    const int64_t zj = b_zp->numel() == 1 ? 0 : j;
    for (int64_t v = 0; v <= V; ++v) {  // row V (no class matched): an accumulator of 0
      int32_t acc = 0;
      if (v < V) {
        acc = one * (b->dtype() == DataType::kInt8 ? b->data<int8_t>()[v * D + j] - b_zp->data<int8_t>()[zj]
                                                   : b->data<uint8_t>()[v * D + j] - b_zp->data<uint8_t>()[zj]);
      }
      float y = static_cast<float>(acc) * scale;
      if (bias != nullptr) y = y + bias->data<float>()[j];
      dst[v * D + j] = y;
    }
  }
  return t;
}

}  // namespace

std::vector<std::string> FuseOneHotMatMul(Model* model) {
  Graph& g = model->graph;
  const ValueIndex index(g);
  GraphEditor editor(g);
  std::set<size_t> removed;
  std::vector<std::string> fused;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& equal = g.nodes[i];
    if (equal.op_type != "Equal" || !equal.domain.empty() || equal.inputs.size() != 2 || equal.outputs.size() != 1)
      continue;
    for (int k = 0; k < 2; ++k) {
      std::vector<int64_t> classes;
      if (!DistinctClasses(ConstantValue(*model, index, equal.inputs[1 - k]), &classes)) continue;
      const int64_t V = static_cast<int64_t>(classes.size());
      // a, or the Expand in front of it.
      std::string a = equal.inputs[k], shape;
      std::optional<size_t> expand_at;
      if (const std::optional<size_t> p = index.Producer(a);
          p && g.nodes[*p].op_type == "Expand" && g.nodes[*p].domain.empty() && g.nodes[*p].inputs.size() == 2 &&
          !index.IsGraphOutput(a) && index.Readers(a).size() == 1) {
        expand_at = *p;
        shape = g.nodes[*p].inputs[1];
        a = g.nodes[*p].inputs[0];
      }
      if (!LastDimIsOne(*model, index, a)) continue;
      size_t cast_at = 0, next_at = 0, mm_at = 0;
      Node* cast = OnlyReader(g, index, equal.outputs[0], "Cast", &cast_at);
      if (cast == nullptr || cast->attr_int("to", 0) != 1 || cast->outputs.size() != 1) continue;
      // f: the one-hot in float32, after any Casts to float32 of it.
      std::vector<size_t> identities;
      std::string f = cast->outputs[0];
      for (size_t at = 0;;) {
        const Node* again = OnlyReader(g, index, f, "Cast", &at);
        if (again == nullptr || again->attr_int("to", 0) != 1 || again->outputs.size() != 1) break;
        identities.push_back(at);
        f = again->outputs[0];
      }
      size_t dq_at = 0;
      bool dequantized = false;
      Node* next = OnlyReader(g, index, f, "MatMul", &next_at);
      Tensor table;
      if (next != nullptr) {
        if (next->inputs.size() != 2 || next->inputs[0] != f || next->inputs[1] == next->inputs[0]) continue;
        table = FloatTable(ConstantValue(*model, index, next->inputs[1]), V);
        mm_at = next_at;
      } else {
        next = OnlyReader(g, index, f, "QuantizeLinear", &next_at);
        if (next == nullptr || next->outputs.size() != 1 || next->inputs[0] != f) continue;
        const std::vector<size_t>& q_readers = index.Readers(next->outputs[0]);
        const Node* to_float = q_readers.size() == 1 && !index.IsGraphOutput(next->outputs[0])
                                   ? &g.nodes[q_readers[0]] : nullptr;
        if (Node* mm = OnlyReader(g, index, next->outputs[0], "QLinearMatMul", &mm_at); mm != nullptr) {
          if (mm->inputs[0] != next->outputs[0] || mm->inputs[3] == next->outputs[0]) continue;
          table = QuantizedTable(*model, index, *next, *mm, V);
        } else if (to_float != nullptr && to_float->op_type == "MatMulIntegerToFloat" &&
                   to_float->domain == kSparqDomain) {
          if (to_float->inputs[0] != next->outputs[0] || to_float->inputs[1] == next->outputs[0]) continue;
          mm_at = q_readers[0];
          table = IntegerToFloatTable(*model, index, *next, *to_float, V);
        } else {
          Node* dq = OnlyReader(g, index, next->outputs[0], "DequantizeLinear", &dq_at);
          if (dq == nullptr || dq->inputs[0] != next->outputs[0] || dq->outputs.size() != 1) continue;
          Node* fmm = OnlyReader(g, index, dq->outputs[0], "MatMul", &mm_at);
          if (fmm == nullptr || fmm->inputs.size() != 2 || fmm->inputs[0] != dq->outputs[0] ||
              fmm->inputs[1] == fmm->inputs[0])
            continue;
          table = DequantizedTable(*model, index, *next, *dq, ConstantValue(*model, index, fmm->inputs[1]), V);
          dequantized = true;
        }
      }
      if (table.rank() != 2) continue;
      Node& mm = g.nodes[mm_at];
      const std::string table_name = editor.AddInitializer(mm.name + "_one_hot_table", std::move(table));
      removed.insert(i);
      removed.insert(cast_at);
      removed.insert(identities.begin(), identities.end());
      if (dequantized) removed.insert(dq_at);
      if (next_at != mm_at) removed.insert(next_at);
      if (expand_at) removed.insert(*expand_at);
      mm.op_type = "OneHotLookup";
      mm.domain = kSparqDomain;
      mm.inputs = {a, equal.inputs[1 - k], table_name};
      if (!shape.empty()) mm.inputs.push_back(shape);
      mm.attributes.clear();
      fused.push_back(mm.name);
      break;
    }
  }
  if (!fused.empty()) {
    EraseNodes(g, removed);
    ImportSparqDomain(model);
  }
  return fused;
}

}  // namespace sparq
