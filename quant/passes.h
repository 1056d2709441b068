// The rewrite passes behind QuantizeModel (internal).
#pragma once

#include <array>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "sparq/quantize.h"
#include "sparq/weighted_layer.h"

namespace sparq {

// A weighted layer (sparq/weighted_layer.h) that INT8 rewrites: default
// domain "", a float32 weight of a GEMM shape (Conv rank >= 3, Gemm 2-D
// without transA, MatMul 2-D), and an input that is not a constant.
std::optional<WeightedLayer> QuantizableLayer(const Graph& g, const Node& n);
// True when the layer's input 2 is a constant float32 bias with one value per
// output channel (and a Gemm has alpha = beta = 1): it is quantized to int32.
bool HasQuantizableBias(const Graph& g, const Node& n, const WeightedLayer& layer);

// The activation that follows node `index` and fuses into it when INT8: a
// Relu or Clip that alone reads the node's only output, neither being a graph
// output. Quantizing after it rather than between (as onnxruntime and
// TensorRT do) keeps the clamped range, and the integer layer computes the
// clamp exactly. Returns the activation's index.
std::optional<size_t> FusedActivation(const Graph& g, size_t index);

// Ops through which INT8 may keep flowing in QDQ form: when all their float
// inputs are dequantized values, InsertQdq quantizes their output too (when
// the table has its range), so runtimes can fuse them (TensorRT: residual
// Add, Concat, pooling; ONNX Runtime: the same ops as QDQ node units).
bool IsFlowOp(const Node& n);

// A float32 weight viewed as [outer, channels, inner] around `axis` (one
// channel, the whole tensor, when !per_channel), and max |w| per channel.
struct ChannelMaxAbs {
  int64_t outer = 1, channels = 1, inner = 1;
  std::vector<float> max_abs;
};
ChannelMaxAbs MaxAbsPerChannel(const Tensor& w, int axis, bool per_channel);

// Whether INT8 weights get one scale per output channel: asked for, and
// expressible (QOperator form, or QDQ at opset >= 13: per-axis DequantizeLinear).
bool PerAxisWeights(const Model& model, const QuantizeOptions& options);

// A bias quantized to int32 at scale s_x * s_w[c] overflows when the weights
// of channel c are tiny and its bias is not (BatchNorm-folded dead channels):
// widens those channels' scales until |bias| / (s_x * s_w) fits half the
// int32 range, and requantizes their weights (to ~0). Returns the number of
// channels widened. `q` comes from QuantizeWeightSymmetric(w, ...).
int WidenScalesForInt32Bias(const Tensor& w, const Tensor& bias, float input_scale, QuantizedWeight* q);

// Subtracts QuantizeOptions::bias_correction (keyed by NodeKey) from the
// biases of the INT8 layers (a Conv without one gets one), as new
// initializers. Returns the number of layers corrected. InvalidArgument when
// a key names no node, or a node that cannot take it (no foldable bias, or
// another channel count).
StatusOr<int> ApplyBiasCorrection(Graph& g, const std::vector<Precision>& precision,
                                  const std::map<std::string, std::vector<float>>& correction);

// A stable key for a node across rewrites: its name, or "@<first output>".
std::string NodeKey(const Node& n);

// INT8 in QDQ form for the nodes whose precision is kINT8. Adds the new float
// values (DequantizeLinear outputs) to `float_values`.
Status InsertQdq(Model& model, const CalibrationTable& table, const std::vector<Precision>& precision,
                 const QuantizeOptions& options, std::set<std::string>& float_values, QuantizeReport* report);

// INT8 in QOperator form (QLinearConv, QLinearMatMul).
Status RewriteQOperator(Model& model, const CalibrationTable& table, const std::vector<Precision>& precision,
                        const QuantizeOptions& options, std::set<std::string>& float_values, QuantizeReport* report);

// Dynamic INT8 (onnxruntime's quantize_dynamic form) for the INT8 MatMul and
// Gemm layers: DynamicQuantizeLinear + MatMulInteger + Cast + Mul; Conv stays
// float32 (reported).
Status RewriteDynamic(Model& model, const std::vector<Precision>& precision, const QuantizeOptions& options,
                      std::set<std::string>& float_values, QuantizeReport* report);

// Gather (axis 0) of a float32 initializer of >= 4096 values (embedding
// tables): an int8 table with one scale per row, both gathered, then
// Cast + Mul. Returns the number of Gather nodes rewritten.
int QuantizeGatherTables(Model& model, QuantizeReport* report);

// Float16 compute for the nodes named by `fp16_nodes` (NodeKey), with Casts
// where float16 and float32 values meet. Constants are clamped to ±65504;
// nodes touching a value whose range in `table` float16 cannot hold stay
// float32.
Status ConvertToFloat16(Model& model, const std::vector<std::string>& fp16_nodes,
                        const std::set<std::string>& float_values, const CalibrationTable& table,
                        const QuantizeOptions& options, QuantizeReport* report);

}  // namespace sparq
