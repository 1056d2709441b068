// Dynamic INT8 (quantize.mode: dynamic), as onnxruntime's quantize_dynamic
// writes it: activations quantized at run time, per tensor, to uint8 with
// their own min/max; weights int8, symmetric, per column or per tensor.
//
//   x ─DynamicQuantizeLinear─> xq, x_scale, x_zp
//        xq, Wq[K,N], x_zp, W_zp ─MatMulInteger─> acc(int32) ─Cast─> accf ─┐
//        x_scale ─Mul(W_scale[N])─> s ─────────────────────────────────── Mul ─> y  (─Add(B)─> y for a Gemm bias)
//
// One DynamicQuantizeLinear per activation, shared by all the layers reading
// it (the Q, K and V projections). No calibration range is used.
//
// Gather tables (word embeddings) in INT8 for every INT8 mode, one symmetric
// scale per row (an embedding's rows differ in range: MiniLM's word rows
// reach 0.17 on average, the table 1.05):
//
//   Wq[V,D](int8) ─Gather(ids)─> rows(int8) ─Cast(float)─┐
//   S[V,1](float) ─Gather(ids)─> row scales ───────────── Mul ─> y
#include <algorithm>
#include <cmath>
#include <map>

#include "graph/graph_editor.h"
#include "quant/passes.h"

namespace sparq {
namespace {

// Gather tables smaller than this stay float32 (token-type and other small
// tables: nothing to gain in size).
constexpr int64_t kMinGatherTableValues = 4096;

// [N, K] -> [K, N] of a float32 matrix.
Tensor Transposed(const Tensor& w) {
  const int64_t n = w.dim(0), k = w.dim(1);
  Tensor t(DataType::kFloat32, {k, n});
  const float* src = w.data<float>();
  float* dst = t.data<float>();
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < k; ++j) dst[j * n + i] = src[i * k + j];
  return t;
}

void SetDecision(QuantizeReport* report, const Node& n, Precision p, const std::string& reason) {
  for (auto& d : report->layers)
    if (d.node == n.name && !n.name.empty()) d.precision = p, d.reason = reason;
}

}  // namespace

Status RewriteDynamic(Model& model, const std::vector<Precision>& precision, const QuantizeOptions& options,
                      std::set<std::string>& float_values, QuantizeReport* report) {
  Graph& g = model.graph;
  GraphEditor ed(g);
  std::map<std::string, std::array<std::string, 3>> quantized_of;  // x -> {xq, x_scale, x_zp}
  const size_t original = g.nodes.size();
  for (size_t i = 0; i < original; ++i) {
    if (precision[i] != Precision::kINT8) continue;
    const Node n = g.nodes[i];  // a copy: AddNode may reallocate
    const auto layer = AsWeightedLayer(g, n);
    if (!layer) continue;
    if (n.op_type == "Conv") {
      SetDecision(report, n, Precision::kFP32, "quantize.mode dynamic quantizes MatMul and Gemm only");
      continue;
    }
    const bool gemm = n.op_type == "Gemm";
    if (gemm && (n.attr_float("alpha", 1.0f) != 1.0f || n.attr_float("beta", 1.0f) != 1.0f)) {
      SetDecision(report, n, Precision::kFP32, "Gemm with alpha/beta other than 1 kept in float32");
      continue;
    }
    const Tensor* wf = g.FindWeight(n.inputs[1]);
    const Tensor w = gemm && n.attr_int("transB", 0) != 0 ? Transposed(*wf) : *wf;  // [K, N]
    const QuantizedWeight q = QuantizeWeightSymmetric(w, /*axis=*/1, options.per_channel);
    const std::string wq = ed.AddInitializer(n.inputs[1] + "_quantized", q.values);
    const std::string wzp = ed.AddInitializer(n.inputs[1] + "_zero_point", Tensor(DataType::kInt8, q.scales.shape()));
    const std::string ws = ed.AddInitializer(n.inputs[1] + "_scale", q.scales);

    const std::string& x = n.inputs[0];
    auto it = quantized_of.find(x);
    if (it == quantized_of.end()) {
      std::array<std::string, 3> xq = {ed.FreshName(x + "_quantized"), ed.FreshName(x + "_scale"),
                                       ed.FreshName(x + "_zero_point")};
      ed.AddNode({ed.FreshName(x + "_DynamicQuantizeLinear"), "DynamicQuantizeLinear", "", {x}, {xq[0], xq[1], xq[2]}, {}, ""});
      float_values.insert(xq[1]);
      it = quantized_of.emplace(x, xq).first;
    }
    const auto& [xq, xs, xzp] = it->second;
    const std::string base = n.name.empty() ? n.outputs[0] : n.name;
    const std::string acc = ed.FreshName(base + "_int32");
    const std::string accf = ed.FreshName(base + "_int32_float");
    const std::string scale = ed.FreshName(base + "_output_scale");
    ed.AddNode({ed.FreshName(base + "_MatMulInteger"), "MatMulInteger", "", {xq, wq, xzp, wzp}, {acc}, {}, ""});
    ed.AddNode({ed.FreshName(base + "_Cast"), "Cast", "", {acc}, {accf}, {Attribute::Int("to", 1)}, ""});
    ed.AddNode({ed.FreshName(base + "_scale_Mul"), "Mul", "", {xs, ws}, {scale}, {}, ""});
    float_values.insert(accf);
    float_values.insert(scale);
    const bool bias = gemm && n.inputs.size() > 2 && !n.inputs[2].empty();
    if (bias) {
      const std::string unbiased = ed.FreshName(base + "_unbiased");
      float_values.insert(unbiased);
      ed.AddNode({ed.FreshName(base + "_Mul"), "Mul", "", {accf, scale}, {unbiased}, {}, ""});
      g.nodes[i] = {n.name, "Add", "", {unbiased, n.inputs[2]}, {n.outputs[0]}, {}, n.doc_string};
    } else {
      g.nodes[i] = {n.name, "Mul", "", {accf, scale}, {n.outputs[0]}, {}, n.doc_string};
    }
  }
  RemoveDeadNodes(g);
  return g.TopoSort();
}

int QuantizeGatherTables(Model& model, QuantizeReport* report) {
  Graph& g = model.graph;
  GraphEditor ed(g);
  std::map<std::string, std::pair<std::string, std::string>> quantized;  // table -> {int8 table, row scales}
  int count = 0;
  const size_t original = g.nodes.size();
  for (size_t i = 0; i < original; ++i) {
    const Node n = g.nodes[i];
    if (n.op_type != "Gather" || !n.domain.empty() || n.inputs.size() != 2 || n.attr_int("axis", 0) != 0) continue;
    auto init = g.initializers.find(n.inputs[0]);
    if (init == g.initializers.end() || init->second.dtype() != DataType::kFloat32 || init->second.rank() != 2 ||
        init->second.numel() < kMinGatherTableValues) {
      continue;
    }
    auto it = quantized.find(n.inputs[0]);
    if (it == quantized.end()) {
      const int64_t rows = init->second.dim(0);
      QuantizedWeight q = QuantizeWeightSymmetric(init->second, 0, /*per_channel=*/true);
      Tensor scales(DataType::kFloat32, {rows, 1});  // [V, 1]: gathered beside the rows, broadcast over D
      std::copy(q.scales.data<float>(), q.scales.data<float>() + rows, scales.data<float>());
      it = quantized
               .emplace(n.inputs[0], std::make_pair(ed.AddInitializer(n.inputs[0] + "_quantized", q.values),
                                                    ed.AddInitializer(n.inputs[0] + "_scale", scales)))
               .first;
    }
    const std::string base = n.name.empty() ? n.outputs[0] : n.name;
    const std::string rows_q = ed.FreshName(n.outputs[0] + "_quantized");
    const std::string rows_f = ed.FreshName(n.outputs[0] + "_quantized_float");
    const std::string row_scales = ed.FreshName(n.outputs[0] + "_scale");
    ed.AddNode({ed.FreshName(base + "_quantized"), "Gather", "", {it->second.first, n.inputs[1]}, {rows_q}, {}, ""});
    ed.AddNode({ed.FreshName(base + "_Cast"), "Cast", "", {rows_q}, {rows_f}, {Attribute::Int("to", 1)}, ""});
    ed.AddNode({ed.FreshName(base + "_scale"), "Gather", "", {it->second.second, n.inputs[1]}, {row_scales}, {}, ""});
    g.nodes[i] = {n.name, "Mul", "", {rows_f, row_scales}, {n.outputs[0]}, {}, n.doc_string};
    ++count;
  }
  if (count > 0) {
    report->warnings.push_back("int8 Gather tables (embeddings): " + std::to_string(count) +
                               " Gather nodes read an int8 table, one scale per row");
  }
  RemoveDeadNodes(g);
  return count;
}

}  // namespace sparq
