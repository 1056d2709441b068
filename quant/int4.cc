// INT4 weight-only quantization (quant/int4.h): RTN, the two file forms, and
// the model rewrite QuantizeWeightsInt4 (sparq/quantize.h).
//
//   MatMul(A, W [K, N] float)             Gemm(A, B, C; alpha, beta, transB)
//     format matmulnbits:                   the weight W = alpha * (transB ? B^T : B),
//       MatMulNBits(A, B_q, scales, zp)       the bias beta * C (C of N values)
//     format qdq:                             format matmulnbits: MatMulNBits(A, ..., bias)
//       MatMul(A, DequantizeLinear(           format qdq: Gemm(A, DequantizeLinear(W_q ...),
//              W_q, scales, zp, axis 0,                    C; alpha 1, beta, transB 0)
//              block_size))
#include "quant/int4.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>
#include <string>

#include "graph/graph_editor.h"
#include "graph/name_pattern.h"
#include "quant/gptq.h"
#include "sparq/onnx_io.h"

namespace sparq {

float BlockwiseInt4::Dequantized(int64_t kk, int64_t nn) const {
  const int64_t p = (kk / block_size) * n + nn;
  const int32_t zp = symmetric ? 0 : zero_points[p];
  return static_cast<float>(codes[kk * n + nn] - zp) * scales[p];
}

Status CheckInt4BlockSize(int64_t block_size) {
  if (block_size == 16 || block_size == 32 || block_size == 64 || block_size == 128 || block_size == 256)
    return Status::OK();
  return Status::InvalidArgument("int4 block_size must be 16, 32, 64, 128 or 256, got " + std::to_string(block_size));
}

StatusOr<BlockwiseInt4> QuantizeInt4Rtn(const float* w, int64_t k, int64_t n, int64_t block_size, bool symmetric) {
  SPARQ_RETURN_IF_ERROR(CheckInt4BlockSize(block_size));
  if (k <= 0 || n <= 0) {
    return Status::InvalidArgument("int4 weight shape [" + std::to_string(k) + ", " + std::to_string(n) +
                                   "] must be positive");
  }
  for (int64_t i = 0; i < k * n; ++i)
    if (!std::isfinite(w[i])) return Status::InvalidArgument("int4 weight element " + std::to_string(i) + " is not finite");
  BlockwiseInt4 q;
  q.k = k;
  q.n = n;
  q.block_size = block_size;
  q.symmetric = symmetric;
  const int64_t kb = q.k_blocks();
  q.codes.assign(static_cast<size_t>(k * n), 0);
  q.scales.assign(static_cast<size_t>(kb * n), 0.0f);
  if (!symmetric) q.zero_points.assign(static_cast<size_t>(kb * n), 0);
  for (int64_t b = 0; b < kb; ++b) {
    const int64_t k0 = b * block_size, k1 = std::min(k, k0 + block_size);
    for (int64_t c = 0; c < n; ++c) {
      float scale = 0.0f;
      int32_t zp = 0;
      if (symmetric) {
        float amax = 0.0f, m = 0.0f;
        for (int64_t kk = k0; kk < k1; ++kk) {
          const float v = w[kk * n + c];
          if (std::fabs(v) > amax) {
            amax = std::fabs(v);
            m = v;
          }
        }
        scale = m / -8.0f;
        zp = 8;
      } else {
        float lo = 0.0f, hi = 0.0f;
        for (int64_t kk = k0; kk < k1; ++kk) {
          lo = std::min(lo, w[kk * n + c]);
          hi = std::max(hi, w[kk * n + c]);
        }
        scale = (hi - lo) / 15.0f;
        const float zp_f = scale != 0.0f ? -lo / scale : lo;
        zp = zp_f < 0.0f ? 0 : zp_f > 15.0f ? 15 : static_cast<int32_t>(std::roundf(zp_f));
        q.zero_points[b * n + c] = static_cast<uint8_t>(zp);
      }
      q.scales[b * n + c] = scale;
      const float inv = scale != 0.0f ? 1.0f / scale : 0.0f;
      for (int64_t kk = k0; kk < k1; ++kk) {
        const float v = std::roundf(w[kk * n + c] * inv + static_cast<float>(zp));
        const int32_t code = static_cast<int32_t>(std::clamp(v, 0.0f, 15.0f));
        q.codes[kk * n + c] = static_cast<int8_t>(symmetric ? code - 8 : code);
      }
    }
  }
  return q;
}

MatMulNBitsWeights ToMatMulNBits(const BlockwiseInt4& q) {
  const int64_t kb = q.k_blocks(), blob = q.block_size / 2;
  MatMulNBitsWeights out;
  out.b = Tensor(DataType::kUInt8, {q.n, kb, blob});
  out.scales = Tensor(DataType::kFloat32, {q.n, kb});  // 2-D, as onnxruntime's quantizer writes it
  auto* bp = static_cast<uint8_t*>(out.b.raw_data());
  float* sp = out.scales.data<float>();
  for (int64_t c = 0; c < q.n; ++c) {
    for (int64_t b = 0; b < kb; ++b) {
      sp[c * kb + b] = q.scales[b * q.n + c];
      // Codes past K are 0, as onnxruntime writes them (never read: K says where the block ends).
      for (int64_t j = 0; j < q.block_size; ++j) {
        const int64_t kk = b * q.block_size + j;
        const uint8_t code = kk < q.k ? static_cast<uint8_t>(q.codes[kk * q.n + c] + (q.symmetric ? 8 : 0)) : 0;
        bp[(c * kb + b) * blob + j / 2] |= static_cast<uint8_t>((code & 0xf) << (4 * (j & 1)));
      }
    }
  }
  if (!q.symmetric) {
    const int64_t row = (kb + 1) / 2;
    out.zero_points = Tensor(DataType::kUInt8, {q.n, row});
    auto* zp = static_cast<uint8_t*>(out.zero_points.raw_data());
    // An odd k_blocks leaves each row's last high nibble unused: 8, as onnxruntime writes it.
    if (kb % 2 != 0)
      for (int64_t c = 0; c < q.n; ++c) zp[c * row + row - 1] = 0x80;
    for (int64_t c = 0; c < q.n; ++c)
      for (int64_t b = 0; b < kb; ++b)
        zp[c * row + b / 2] |= static_cast<uint8_t>(q.zero_points[b * q.n + c] << (4 * (b & 1)));
  }
  return out;
}

BlockedDqWeights ToBlockedDequantizeLinear(const BlockwiseInt4& q) {
  const int64_t kb = q.k_blocks();
  BlockedDqWeights out;
  out.weight = Tensor(q.symmetric ? DataType::kInt4 : DataType::kUInt4, {q.k, q.n});
  std::copy(q.codes.begin(), q.codes.end(), static_cast<int8_t*>(out.weight.raw_data()));
  out.scales = Tensor::FromVector<float>({kb, q.n}, q.scales);
  if (!q.symmetric) {
    out.zero_points = Tensor(DataType::kUInt4, {kb, q.n});
    std::copy(q.zero_points.begin(), q.zero_points.end(), static_cast<uint8_t*>(out.zero_points.raw_data()));
  }
  return out;
}

namespace {

constexpr const char* kMicrosoftDomain = "com.microsoft";

// A layer's float weight as [K, N] and its bias (N values or empty), or why not.
struct Int4Layer {
  std::vector<float> w;  // [k, n]
  int64_t k = 0, n = 0;
  std::vector<float> bias;
  std::string why_not;
};

bool IsConstantInitializer(const Graph& g, const std::string& name) {
  if (!g.initializers.count(name)) return false;
  for (const auto& v : g.initializer_inputs)
    if (v.name == name) return false;  // a graph input may override it
  return true;
}

Int4Layer ReadLayer(const Graph& g, const Node& n) {
  Int4Layer l;
  if (n.inputs.size() < 2 || !IsConstantInitializer(g, n.inputs[1])) {
    l.why_not = "weight is not a constant initializer";
    return l;
  }
  if (g.initializers.count(n.inputs[0])) {
    l.why_not = "input A is a constant";
    return l;
  }
  const Tensor& b = g.initializers.at(n.inputs[1]);
  if (b.dtype() != DataType::kFloat32 || b.rank() != 2) {
    l.why_not = "weight is " + DataTypeName(b.dtype()) + " " + ShapeToString(b.shape()) + ", not 2-D float32";
    return l;
  }
  const float* bp = b.data<float>();
  bool trans_b = false;
  float alpha = 1.0f, beta = 1.0f;
  if (n.op_type == "Gemm") {
    if (n.attr_int("transA", 0) != 0) {
      l.why_not = "Gemm with transA";
      return l;
    }
    trans_b = n.attr_int("transB", 0) != 0;
    alpha = n.attr_float("alpha", 1.0f);
    beta = n.attr_float("beta", 1.0f);
  }
  l.k = trans_b ? b.dim(1) : b.dim(0);
  l.n = trans_b ? b.dim(0) : b.dim(1);
  l.w.resize(static_cast<size_t>(l.k * l.n));
  for (int64_t kk = 0; kk < l.k; ++kk)
    for (int64_t c = 0; c < l.n; ++c) l.w[kk * l.n + c] = alpha * (trans_b ? bp[c * l.k + kk] : bp[kk * l.n + c]);
  if (n.op_type == "Gemm" && n.inputs.size() > 2 && !n.inputs[2].empty()) {
    const Tensor* c = g.FindWeight(n.inputs[2]);
    if (c == nullptr || c->dtype() != DataType::kFloat32 || c->numel() != l.n ||
        (c->rank() == 2 && c->dim(1) != l.n) || c->rank() > 2) {
      l.why_not = "Gemm bias C is not a constant of N values";  // only for the MatMulNBits form
    } else {
      l.bias.resize(static_cast<size_t>(l.n));
      for (int64_t i = 0; i < l.n; ++i) l.bias[i] = beta * c->data<float>()[i];
    }
  }
  return l;
}

// What GPTQ / AWQ fitted, by layer (NodeKey).
struct Int4Fits {
  std::map<std::string, BlockwiseInt4> weights;  // GPTQ's codes ([K, N], as ReadLayer's weight)
  std::map<std::string, std::string> notes;      // appended to the layer's reason
};

StatusOr<Model> RewriteInt4(const Model& model, const Int4Options& options, const Int4Fits& fits,
                            QuantizeReport* report) {
  SPARQ_RETURN_IF_ERROR(CheckInt4BlockSize(options.block_size));
  std::vector<NamePattern> rules;
  for (const auto& r : options.layers) {
    rules.emplace_back(r.match);
    if (!rules.back().valid_regex())
      return Status::InvalidArgument("quantize.layers: bad regex '" + r.match + "': " + rules.back().regex_error());
    if (r.precision != Precision::kFP32)
      return Status::InvalidArgument("quantize.layers: '" + r.match + "' asks for " + PrecisionName(r.precision) +
                                     "; an int4 run takes fp32 rules only (the layer stays float32)");
  }
  const std::set<std::string> excluded(options.exclude_ops.begin(), options.exclude_ops.end());
  QuantizeReport local;
  QuantizeReport& rep = report != nullptr ? *report : local;

  Model out = model;
  const bool qdq = options.format == Int4Format::kQdq;
  if (qdq && out.opset() < 21) {
    auto upgraded = UpgradeOpsetTo21(out);
    if (!upgraded.ok()) {
      return Status::NotSupported("int4 format qdq needs opset 21 (DequantizeLinear with block_size): " +
                                  upgraded.status().message() + " (format matmulnbits keeps the model's opset)");
    }
    rep.warnings.push_back(*upgraded + " (blocked DequantizeLinear needs opset 21)");
  }
  Graph& g = out.graph;
  GraphEditor editor(g);
  std::vector<bool> rule_used(rules.size(), false);
  std::vector<Node> added;
  std::set<std::string> replaced;
  int quantized = 0;
  const std::string form = std::string(qdq ? "DequantizeLinear" : "MatMulNBits") + ", block " +
                           std::to_string(options.block_size) + (options.symmetric ? ", symmetric" : ", zero points");
  for (Node& n : g.nodes) {
    if ((n.op_type != "MatMul" && n.op_type != "Gemm") || !(n.domain.empty() || n.domain == "ai.onnx")) continue;
    const std::string base = n.name.empty() ? (n.outputs.empty() ? std::string("layer") : n.outputs[0]) : n.name;
    LayerDecision d{n.name.empty() ? "@" + base : n.name, n.op_type, Precision::kFP32, ""};
    bool ruled = false;
    for (size_t r = 0; r < rules.size() && !ruled; ++r)
      if (rules[r].Matches(n.name)) {
        rule_used[r] = ruled = true;
        d.reason = "rule '" + options.layers[r].match + "'";
      }
    if (!ruled && excluded.count(n.op_type)) {
      ruled = true;
      d.reason = "exclude_ops";
    }
    Int4Layer l;
    if (!ruled) {
      l = ReadLayer(g, n);
      const ValueInfo* a = g.FindValueInfo(n.inputs[0]);
      if (l.why_not.empty() && !qdq && a != nullptr && a->has_shape && a->dims.size() < 2)
        l.why_not = "input A is 1-D";
      // The QDQ form keeps the Gemm and its C as they are.
      if (qdq && l.why_not.rfind("Gemm bias", 0) == 0) l.why_not.clear();
      if (!l.why_not.empty()) d.reason = l.why_not;
    }
    if (ruled || !l.why_not.empty()) {
      rep.layers.push_back(d);
      continue;
    }
    // GPTQ's codes fit W as the layer reads it; a Gemm's alpha is not in them.
    auto fitted = fits.weights.find(d.node);
    const bool use_fit = fitted != fits.weights.end() && fitted->second.k == l.k && fitted->second.n == l.n &&
                         (n.op_type == "MatMul" || n.attr_float("alpha", 1.0f) == 1.0f);
    auto q = use_fit ? StatusOr<BlockwiseInt4>(fitted->second)
                     : QuantizeInt4Rtn(l.w.data(), l.k, l.n, options.block_size, options.symmetric);
    if (!q.ok()) return q.status().WithContext(n.Describe());
    replaced.insert(n.inputs[1]);
    if (!qdq) {
      MatMulNBitsWeights mw = ToMatMulNBits(*q);
      Node mm;
      mm.name = editor.FreshName(base + "_Q4");
      mm.op_type = "MatMulNBits";
      mm.domain = kMicrosoftDomain;
      mm.inputs = {n.inputs[0], editor.AddInitializer(base + "_Q4", std::move(mw.b)),
                   editor.AddInitializer(base + "_scales", std::move(mw.scales)),
                   mw.zero_points.defined() ? editor.AddInitializer(base + "_zp", std::move(mw.zero_points)) : ""};
      if (!l.bias.empty()) {
        mm.inputs.push_back("");  // g_idx
        mm.inputs.push_back(editor.AddInitializer(base + "_bias", Tensor::FromVector<float>({l.n}, l.bias)));
      } else if (mm.inputs.back().empty()) {
        mm.inputs.pop_back();
      }
      mm.outputs = n.outputs;
      mm.attributes = {Attribute::Int("K", l.k), Attribute::Int("N", l.n), Attribute::Int("bits", 4),
                       Attribute::Int("block_size", options.block_size)};
      mm.doc_string = n.doc_string;
      n = std::move(mm);
    } else {
      BlockedDqWeights dw = ToBlockedDequantizeLinear(*q);
      Node dq;
      dq.name = editor.FreshName(base + "_weight_DequantizeLinear");
      dq.op_type = "DequantizeLinear";
      dq.inputs = {editor.AddInitializer(base + "_weight_int4", std::move(dw.weight)),
                   editor.AddInitializer(base + "_weight_scale", std::move(dw.scales))};
      if (dw.zero_points.defined())
        dq.inputs.push_back(editor.AddInitializer(base + "_weight_zero_point", std::move(dw.zero_points)));
      dq.outputs = {editor.FreshName(base + "_weight_dequantized")};
      dq.attributes = {Attribute::Int("axis", 0), Attribute::Int("block_size", options.block_size)};
      n.inputs[1] = dq.outputs[0];
      if (n.op_type == "Gemm") {  // the weight is [K, N] with alpha folded in
        n.attributes.erase(std::remove_if(n.attributes.begin(), n.attributes.end(),
                                          [](const Attribute& a) { return a.name == "transB" || a.name == "alpha"; }),
                           n.attributes.end());
      }
      added.push_back(std::move(dq));
    }
    d.reason = "int4 (" + form + ")";
    if (use_fit) d.reason += ", gptq";
    if (auto note = fits.notes.find(d.node); note != fits.notes.end()) d.reason += ", " + note->second;
    rep.layers.push_back(d);
    ++quantized;
  }
  for (size_t r = 0; r < rules.size(); ++r)
    if (!rule_used[r]) return Status::NotFound("quantize.layers: '" + options.layers[r].match + "' matches no node of the model");
  for (Node& n : added) g.nodes.push_back(std::move(n));
  // The float weights no node reads any more.
  std::set<std::string> read;
  for (const Node& n : g.nodes) {
    read.insert(n.inputs.begin(), n.inputs.end());
    for (const std::string& v : n.ImplicitInputs()) read.insert(v);
  }
  for (const auto& v : g.outputs) read.insert(v.name);
  for (const std::string& name : replaced)
    if (!read.count(name)) g.initializers.erase(name);
  if (quantized > 0) {
    if (qdq) {
      out.ir_version = std::max<int64_t>(out.ir_version, 10);  // int4 / uint4 tensors
    } else if (out.opset(kMicrosoftDomain) == 0) {
      out.opset_imports.push_back({kMicrosoftDomain, 1});
    }
  }
  SPARQ_RETURN_IF_ERROR(g.TopoSort());
  return out;
}

}  // namespace

StatusOr<Model> QuantizeWeightsInt4(const Model& model, const Int4Options& options, QuantizeReport* report) {
  if (options.method != Int4Method::kRtn) {
    return Status::InvalidArgument(std::string("int4 method ") + (options.method == Int4Method::kGptq ? "gptq" : "awq") +
                                   " needs calibration data (the layers' inputs)");
  }
  return RewriteInt4(model, options, Int4Fits{}, report);
}

StatusOr<Model> QuantizeWeightsInt4(const Model& model, const Int4Options& options, const BatchFn& calibration,
                                    QuantizeReport* report) {
  if (options.method == Int4Method::kRtn) return RewriteInt4(model, options, Int4Fits{}, report);
  SPARQ_RETURN_IF_ERROR(CheckInt4BlockSize(options.block_size));
  if (!(options.gptq_damp > 0.0)) return Status::InvalidArgument("int4 gptq damp must be > 0");
  if (options.awq_grid < 1) return Status::InvalidArgument("int4 awq grid must be >= 1");
  SPARQ_ASSIGN_OR_RETURN(auto stats, MeasureInputStatistics(model, calibration, options.threads));
  Int4Fits fits;
  if (options.method == Int4Method::kGptq) {
    GptqOptions o;
    o.block_size = options.block_size;
    o.symmetric = options.symmetric;
    o.damp = options.gptq_damp;
    SPARQ_ASSIGN_OR_RETURN(fits.weights, GptqModelWeights(model, stats, o, options.threads));
    return RewriteInt4(model, options, fits, report);
  }
  AwqOptions o;
  o.block_size = options.block_size;
  o.symmetric = options.symmetric;
  o.grid = options.awq_grid;
  std::vector<AwqInput> chosen;
  SPARQ_ASSIGN_OR_RETURN(Model scaled, AwqModel(model, stats, o, options.threads, &chosen));
  for (const AwqInput& in : chosen) {
    char note[96];
    std::snprintf(note, sizeof note, "awq alpha %.2f, output error %.3g x rtn's", in.alpha,
                  in.error_rtn > 0 ? in.error / in.error_rtn : 1.0);
    for (const std::string& layer : in.layers) fits.notes[layer] = note;
  }
  return RewriteInt4(scaled, options, fits, report);
}

}  // namespace sparq
