// The rewrite passes behind QuantizeModel (internal).
#pragma once

#include <optional>
#include <set>
#include <string>
#include <vector>

#include "sparq/quantize.h"

namespace sparq {

// A Conv/Gemm/MatMul whose input 1 is a constant float weight.
struct WeightedLayer {
  int weight_axis = 0;  // output-channel axis of the weight tensor
  bool bias = false;    // input 2 is a constant bias with one value per channel
};
std::optional<WeightedLayer> AsWeightedLayer(const Graph& g, const Node& n);

// The activation that follows node `index` and fuses into it when INT8: a
// Relu or Clip that alone reads the node's only output, neither being a graph
// output. Quantizing after it rather than between (as onnxruntime and
// TensorRT do) keeps the clamped range, and the integer layer computes the
// clamp exactly. Returns the activation's index.
std::optional<size_t> FusedActivation(const Graph& g, size_t index);

// A stable key for a node across rewrites: its name, or "@<first output>".
std::string NodeKey(const Node& n);

// INT8 in QDQ form for the nodes whose precision is kINT8. Adds the new float
// values (DequantizeLinear outputs) to `float_values`.
Status InsertQdq(Model& model, const CalibrationTable& table, const std::vector<Precision>& precision,
                 const QuantizeOptions& options, std::set<std::string>& float_values, QuantizeReport* report);

// INT8 in QOperator form (QLinearConv, QLinearMatMul).
Status RewriteQOperator(Model& model, const CalibrationTable& table, const std::vector<Precision>& precision,
                        const QuantizeOptions& options, std::set<std::string>& float_values, QuantizeReport* report);

// Float16 compute for the nodes named by `fp16_nodes` (NodeKey), with Casts
// where float16 and float32 values meet.
Status ConvertToFloat16(Model& model, const std::vector<std::string>& fp16_nodes,
                        const std::set<std::string>& float_values, const QuantizeOptions& options,
                        QuantizeReport* report);

}  // namespace sparq
