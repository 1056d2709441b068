// A summary of an ONNX model: what `sparq inspect` prints.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "sparq/export.h"
#include "sparq/graph.h"
#include "sparq/status.h"

namespace sparq {

// The weights of one node (initializers or Constant outputs among its inputs).
// In a QDQ model a weight reaches its layer through a DequantizeLinear:
//
//   w_q (int8) ──┐
//   scale ───────┼── DequantizeLinear ── w ── Conv / Gemm / MatMul
//   zero point ──┘
//
// Such a layer is one row: its weights are the quantized tensors (w_q), params,
// zeros and sparsity are measured on them (a zero is q == zero point), and
// bytes add the scales and zero points. QuantizeLinear / DequantizeLinear nodes
// are never layers themselves. QOperator layers (QLinearConv, QLinearMatMul,
// ConvInteger, MatMulInteger) likewise: their scales and zero points add bytes,
// not params, and a zero of the weight is q == its zero point.
struct SPARQ_API LayerSummary {
  std::string node;     // node name, or "<op_type>#<index>" when unnamed
  std::string op_type;  // with "domain." prefix outside the default domain
  std::vector<std::string> weights;  // names of the weight inputs
  int64_t params = 0;  // elements over all weight inputs
  int64_t bytes = 0;   // storage bytes over all weight inputs
  int64_t zeros = 0;   // elements that are exactly zero (-0.0 included)
  // Data type of the first weight input ("int8" for a QDQ weight, "float32", ...).
  std::string precision;
  bool qdq = false;  // some weight arrives through a DequantizeLinear
  // Fraction of exact zeros in [0, 1]; 0 for a layer without elements.
  double sparsity() const { return params > 0 ? static_cast<double>(zeros) / static_cast<double>(params) : 0.0; }
};

struct SPARQ_API ModelSummary {
  std::string path;  // file the model was loaded from ("" when summarized in memory)
  int64_t ir_version = 0;
  std::vector<OperatorSetId> opsets;  // as imported; "" shown as "ai.onnx"
  std::string producer_name;
  std::string producer_version;
  std::string graph_name;
  std::vector<ValueInfo> inputs;   // graph inputs (without initializers)
  std::vector<ValueInfo> outputs;
  int64_t num_nodes = 0;
  // Nodes inside If / Loop / Scan subgraphs, at any depth (not in num_nodes,
  // op_histogram or layers, which describe the outer graph).
  int64_t subgraph_nodes = 0;
  int64_t num_initializers = 0;
  // (op_type, count), most frequent first, ties by name.
  std::vector<std::pair<std::string, int64_t>> op_histogram;
  // Nodes that have weight inputs, in graph order.
  std::vector<LayerSummary> layers;
  // True when some layer reads a weight through a DequantizeLinear.
  bool qdq = false;
  // Over all distinct weights (a weight shared by two nodes counts once;
  // weights no node reads count too). Scales and zero points of
  // QuantizeLinear / DequantizeLinear count in total_bytes only.
  int64_t total_params = 0;
  int64_t total_bytes = 0;
  int64_t total_zeros = 0;
  double sparsity() const {
    return total_params > 0 ? static_cast<double>(total_zeros) / static_cast<double>(total_params) : 0.0;
  }

  // Human-readable report with aligned tables.
  std::string ToText() const;
  // One JSON object (keys: path, ir_version, opsets, producer, graph, inputs,
  // outputs, num_nodes, subgraph_nodes, num_initializers, operators [{op, count}], qdq,
  // layers (each with precision and qdq), totals). Dims are numbers, symbol names (strings) or null when unknown.
  std::string ToJson() const;
};

// Summarizes an in-memory model.
SPARQ_API ModelSummary SummarizeModel(const Model& model);
// Loads `path` (without shape inference) and summarizes it. Errors: those of
// LoadModel.
SPARQ_API StatusOr<ModelSummary> InspectModel(const std::string& path);

}  // namespace sparq
