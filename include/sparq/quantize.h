// Rewrites a float32 model into INT8 (QDQ or QOperator form), FP16, or a mix,
// using the ranges of a CalibrationTable.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "sparq/calibrate.h"
#include "sparq/export.h"
#include "sparq/graph.h"
#include "sparq/status.h"

namespace sparq {

enum class Precision { kFP32, kFP16, kINT8 };
SPARQ_API const char* PrecisionName(Precision p);
SPARQ_API StatusOr<Precision> ParsePrecision(const std::string& name);

enum class QuantFormat {
  kQDQ,        // QuantizeLinear/DequantizeLinear pairs around float ops (ONNX Runtime, TensorRT)
  kQOperator,  // QLinearConv / QLinearMatMul with explicit (de)quantization at the edges
};

// A per-layer precision rule: `match` is a node name or an ECMAScript regex
// that must match the whole node name.
struct SPARQ_API LayerRule {
  std::string match;
  Precision precision = Precision::kINT8;
};

// onnxconverter-common's float16 DEFAULT_OP_BLOCK_LIST: ops whose FP16
// versions are missing in common runtimes or lose accuracy (index math,
// reductions to extremes, the ai.onnx.ml operators). One list, returned by
// reference: the API's and the recipes' defaults are this object.
SPARQ_API const std::vector<std::string>& DefaultFp16BlockOps();

// FP16 conversion settings; recipes hold this struct (quantize.fp16).
struct SPARQ_API Fp16Options {
  std::vector<std::string> block_ops = DefaultFp16BlockOps();  // op types kept in float32
  bool keep_io_types = true;  // graph inputs/outputs stay float32 (Casts at the edges)
};

// An int8 weight and its scales (QuantizeWeightSymmetric below).
struct SPARQ_API QuantizedWeight {
  Tensor values;  // int8, same shape as the weight
  Tensor scales;  // float32 [channels] (per channel) or [] (per tensor)
  int axis = 0;
};

struct SPARQ_API QuantizeOptions {
  QuantFormat format = QuantFormat::kQDQ;
  Precision precision = Precision::kINT8;  // default for layers no rule names
  // Precision of nodes INT8 does not apply to (non-weighted ops) when the
  // default is INT8: kFP32, or kFP16 for "mixed" models.
  Precision other_precision = Precision::kFP32;
  bool per_channel = true;                  // weights: one scale per output channel
  bool fold_batchnorm = true;               // fold BatchNormalization into Conv/Gemm first
  // INT8 activations quantized at run time (DynamicQuantizeLinear +
  // MatMulInteger, MatMul/Gemm only, no calibration range used) instead of
  // with calibrated scales.
  bool dynamic = false;
  bool gather_int8 = true;  // INT8: Gather tables (embeddings) of >= 4096 values in int8
  // INT8: a MatMul / Gemm too small for INT8 to pay stays FP32
  // (LayerDecision::reason says so; a `layers` rule naming it still wins):
  // one whose int8 weights save fewer bytes (3 per weight) than its Q/DQ
  // nodes, names and scales add to the file (Int8LayerOverheadBytes), such as
  // madmom's 50-weight output MatMul. Its weights are its multiply-adds per
  // row, so it gains no speed either, and its INT8 error goes straight on.
  // Convs are left alone: a conv with few weights runs them at every
  // position (a first conv over an image). Off here; the default recipe
  // (quantize.search on) turns it on.
  bool skip_small_layers = false;
  // Static INT8, QDQ form: a Q/DQ pair on each INT8 layer's output (after its
  // fused Relu/Clip), and INT8 flowing on through Add/Concat/pooling whose
  // inputs are all quantized. false: Q/DQ only on the layers' inputs (and
  // weights); outputs stay float32 unless an INT8 layer reads them (TensorRT's
  // explicit-quantization placement). Transformers keep their accuracy this
  // way (bench/TRANSFORMER_ACCURACY.md). QOperator form always quantizes outputs.
  bool quantize_outputs = true;
  // FP8 instead of INT8 for the quantized (kINT8) layers: static QDQ form only
  // (InvalidArgument with dynamic or QOperator). QuantizeLinear /
  // DequantizeLinear pairs with float8e4m3fn zero points (0); activations per
  // tensor, scale = the range's threshold / 448 (the largest float8e4m3fn);
  // weights per output channel, max|w| / 448, stored as float8e4m3fn; biases
  // stay float32; no int8 Gather tables. Needs opset >= 19
  // (UpgradeOpsetForInt8 converts). The report still lists such layers as INT8.
  bool fp8 = false;
  std::vector<LayerRule> layers;            // first matching rule wins
  // Op types (e.g. "Softmax", "MatMul") kept in float32 whatever the default
  // precision; a `layers` rule naming the node still wins. An op type the
  // model lacks is a warning in QuantizeReport::warnings; "" is InvalidArgument.
  std::vector<std::string> exclude_ops;
  // Static INT8: per layer (NodeKey: node name, or "@<first output>"), one
  // value per output channel subtracted from the bias of that layer when it
  // is INT8, before the bias is quantized: the mean error its int8 weights
  // add (MeasureBiasCorrection, sparq/bias_correction.h). Empty: none.
  std::map<std::string, std::vector<float>> bias_correction;
  // Static INT8, QDQ form: per layer (NodeKey), int8 weights that replace
  // nearest rounding (AdaRound's, sparq/adaround.h). Their scales must be
  // the ones nearest rounding gives (else InvalidArgument: measured on another
  // model or with other options); a channel whose scale is widened for an
  // int32 bias is rounded to nearest again. Not with fp8, dynamic or QOperator.
  std::map<std::string, QuantizedWeight> rounded_weights;
  Fp16Options fp16;  // FP16 layers: which op types stay float32, and the graph's I/O types
};

// What INT8 adds to the file for one layer of `channels` weight scales
// beyond its int8 weights: its QuantizeLinear / DequantizeLinear nodes, their
// value names and the activation's scale, about 512 bytes (a 50-weight MatMul's
// INT8 file is 394 bytes larger than its float one), plus a float scale and an
// int8 zero point per channel. QuantizeOptions::skip_small_layers keeps a
// layer FP32 when 3 * weights <= this.
SPARQ_API int64_t Int8LayerOverheadBytes(int64_t channels);

// What happened to one weighted layer.
struct SPARQ_API LayerDecision {
  std::string node;
  std::string op_type;
  Precision precision = Precision::kFP32;
  std::string reason;  // e.g. "rule 'fc.*'", "default", "no calibration range for input 'x'"
};

struct SPARQ_API QuantizeReport {
  std::vector<LayerDecision> layers;
  std::vector<std::string> warnings;  // e.g. FP16 clamps, naming the tensor
  int folded_batchnorms = 0;
  int bias_corrected = 0;  // INT8 layers whose bias took QuantizeOptions::bias_correction
};

// Folds each inference BatchNormalization that directly follows a Conv (or a
// Gemm) into that layer's weights and bias. Returns the number folded.
SPARQ_API StatusOr<int> FoldBatchNorm(Model& model);

// The quantized model. Layers whose precision resolves to INT8 (Conv, Gemm,
// MatMul with a constant weight) are quantized with the table's activation
// ranges; FP16 layers compute in float16; the rest stays float32.
// Errors: NotFound when a rule's regex matches no node; InvalidArgument for a
// bad regex.
SPARQ_API StatusOr<Model>
QuantizeModel(const Model& model, const CalibrationTable& table, const QuantizeOptions& options,
              QuantizeReport* report);

// A tensor whose calibrated range QuantizeModel reads, and what for.
struct SPARQ_API CalibrationNeed {
  std::string tensor;
  std::string use;  // e.g. "input of INT8 layer 'conv1'"
  // false: quantization uses the range when the table has it (INT8 flowing
  // on through an Add, Concat or pooling) and leaves the value float without.
  bool required = true;
};

// The ranges QuantizeModel(model, table, options) reads: for each layer that
// resolves to static INT8 (rules applied, BatchNorm folded when asked), its
// input and its output (that of a fused Relu/Clip when one follows), and in
// QDQ form the outputs of the flow ops (Add, Concat, pooling, Relu, Clip)
// whose float inputs are all quantized, which INT8 then flows through. Empty
// for dynamic INT8 and for FP16/FP32 (FP16 reads ranges only to keep
// overflowing values in float32). In graph order, each tensor once.
// Errors: those of FoldBatchNorm and of the layer rules (as QuantizeModel).
SPARQ_API StatusOr<std::vector<CalibrationNeed>> CalibrationTensorsNeeded(const Model& model,
                                                                          const QuantizeOptions& options);

// Checks a table calibrated elsewhere (calibrate once, quantize many times)
// against `model`: NotFound naming the first needed tensor it lacks (and how
// many are missing); tensors of the table that are not values of the model
// (graph inputs, node outputs) add one line to `warnings` (may be null).
SPARQ_API Status CheckCalibrationTable(const Model& model, const CalibrationTable& table,
                                       const QuantizeOptions& options, std::vector<std::string>* warnings);

// Symmetric per-channel int8 weights: w_q = clamp(round(w / s_c), -127, 127)
// with s_c = max|w[c]| / 127 along `axis`. Exact zeros stay exactly zero.
SPARQ_API QuantizedWeight QuantizeWeightSymmetric(const Tensor& w, int axis, bool per_channel);

// INT4 weight-only quantization: the MatMul (and Gemm) weights that are
// constant 2-D float32 initializers, block-wise along K per output column;
// activations stay float32. RTN needs no data; GPTQ and AWQ read each layer's
// input on calibration data (its Gram matrix X^T X, quant/gptq.h).
enum class Int4Method {
  kRtn,   // round to nearest (onnxruntime's RTN arithmetic)
  kGptq,  // GPTQ: rows rounded in turn, each one's error spread over the rest through H^-1
  kAwq,   // AWQ: per input channel scales from the activations (alpha searched), folded
          // into the producer or a Mul, then RTN
};
enum class Int4Format {
  kMatMulNBits,  // one com.microsoft MatMulNBits node per layer (onnxruntime's contrib op)
  kQdq,          // opset-21 DequantizeLinear(int4/uint4 weight, block_size) -> MatMul / Gemm
};
struct SPARQ_API Int4Options {
  int64_t block_size = 32;  // along K: 16, 32, 64, 128 or 256
  // true: int4 codes, no zero points; false: uint4 codes with a zero point per
  // block (onnxruntime's MatMulNBitsQuantizer default, is_symmetric=False).
  bool symmetric = false;
  Int4Method method = Int4Method::kRtn;
  Int4Format format = Int4Format::kMatMulNBits;
  // First matching rule wins; only precision fp32 applies (the layer stays
  // float32). Op types listed in exclude_ops stay float32 too.
  std::vector<LayerRule> layers;
  std::vector<std::string> exclude_ops;
  double gptq_damp = 0.01;  // GPTQ: H's diagonal += damp x its mean; > 0
  int awq_grid = 20;        // AWQ: alpha in {0, 1/grid, ..., (grid-1)/grid}; >= 1
  int threads = 0;          // GPTQ / AWQ statistics and fits; 0 = one per hardware thread
};

// The INT4 weight-only model (QuantizeReport::layers says, per MatMul/Gemm,
// whether it became INT4 and why not; its precision field reads kFP32 for a
// layer kept float, kINT8 never). The QDQ form converts the model to opset
// 21 with ONNX's version converter and sets ir_version >= 10 (int4 types);
// the MatMulNBits form imports com.microsoft version 1.
// Errors: InvalidArgument for a bad block size or a rule that is not fp32;
// NotSupported when the opset conversion fails (naming it); NotFound when a
// rule matches no node; InvalidArgument for GPTQ / AWQ without calibration.
SPARQ_API StatusOr<Model> QuantizeWeightsInt4(const Model& model, const Int4Options& options, QuantizeReport* report);
// The same with calibration batches (one pass), which GPTQ and AWQ need.
SPARQ_API StatusOr<Model> QuantizeWeightsInt4(const Model& model, const Int4Options& options, const BatchFn& calibration,
                                              QuantizeReport* report);

// INT8 QDQ needs QuantizeLinear (opset 10) and, for per-channel weights,
// per-axis DequantizeLinear (opset 13). When `model` is older, converts it in
// place to opset 13 with ONNX's version converter (ConvertOpset) and returns
// the line that says so; "" when nothing was needed. When the converter fails:
// NotSupported below opset 10, else `model` is unchanged and the returned line
// says the weights will be quantized per tensor.
SPARQ_API StatusOr<std::string> UpgradeOpsetForInt8(Model& model, const QuantizeOptions& options);

}  // namespace sparq
