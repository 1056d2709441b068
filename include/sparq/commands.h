// The library calls behind `sparq calibrate`, `sparq quantize` and `sparq sensitivity`: files
// in, files out, one call each (the CLI parses flags and prints).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "sparq/adaround.h"
#include "sparq/calibrate.h"
#include "sparq/evaluate.h"
#include "sparq/export.h"
#include "sparq/prune.h"
#include "sparq/quantize.h"
#include "sparq/status.h"

namespace sparq {

struct SPARQ_API CalibrateFilesOptions {
  std::string model;      // FP32 ONNX model (required)
  std::string data;       // .npy, .npz or a folder of them (required)
  std::string output;     // calibration table to write (JSON, required)
  std::string trt_cache;  // TensorRT calibration cache to write too; "" = none
  std::string trt_version = "8601";  // TensorRT version in the cache header (8601 = 8.6.1)
  int64_t batch_size = 32;  // >= 1; a model with a fixed batch dim uses it (BatchSizeFor)
  int64_t samples = 0;      // at most this many samples; 0 = all
  // Inputs pinned to one value for every batch (DatasetOptions::constants:
  // a scalar sample rate), name -> values. An If they decide is folded first,
  // as `sparq run` folds it (its taken branch inlined, the input removed), and
  // the table records them (CalibrationTable::folded_inputs): quantizing with
  // it needs the same pins (QuantizeFilesOptions::constants).
  std::map<std::string, std::vector<double>> constants;
  // Observe only the tensors INT8 quantization with default options needs
  // (CalibrationTensorsNeeded: the inputs and outputs of its Conv / Gemm /
  // MatMul layers), the rest of the graph fused as in deployment: faster,
  // fewer live tensors. Such a table serves INT8 quantization only (float16
  // keeps a node in float32 by its values' ranges, and TensorRT wants every
  // tensor), so it cannot go with trt_cache. Ignored when
  // calibration.tensors names the tensors itself.
  bool int8_only = false;
  CalibrationOptions calibration;
  // CalibrateShardFiles: this process's shard of `shards` (ShardOf); output
  // is then the partial statistics (PartialCalibration), not a table.
  int shard = 0;
  int shards = 1;
};

// Loads the model, folds the Ifs `constants` decide, calibrates it on the
// data, writes the table (and the TensorRT cache) and returns the table.
// calibration.progress, when set, is told the data's total_samples. Errors:
// those of LoadModel, OpenDataset, Calibrate and the writes; those of the
// folding, naming the If; InvalidArgument for bad options and for a
// constant naming no input of the model.
SPARQ_API StatusOr<CalibrationTable> CalibrateFiles(const CalibrateFilesOptions& options);

// `sparq calibrate --shard i/n`: loads the model, observes shard `shard` of
// `shards` of the data (ShardOf: contiguous whole batches) and writes the
// partial statistics to `output` (PartialCalibration::Save), its model_id the
// FNV-1a 64 of the model file. Errors: those of CalibrateFiles and
// CalibrateShard (method auto is refused); InvalidArgument for trt_cache
// (the merge writes it) or a bad shard.
SPARQ_API StatusOr<PartialCalibration> CalibrateShardFiles(const CalibrateFilesOptions& options);

struct SPARQ_API MergeCalibrationFilesOptions {
  std::vector<std::string> parts;  // partial statistics of every shard of one run (required)
  std::string output;              // calibration table to write (JSON, required)
  std::string trt_cache;           // TensorRT calibration cache to write too; "" = none
  std::string trt_version = "8601";
  int threads = 0;                 // for the threshold searches; 0 = all
};

// `sparq calibrate --merge part-*.hist`: loads the parts, merges them
// (MergePartials), chooses the thresholds (FinishCalibration) and writes the
// table and cache exactly as CalibrateFiles over all the data would.
// Errors: those of PartialCalibration::Load and MergePartials (naming the
// parts), InvalidArgument when the output is one of the parts; nothing is
// written on error.
SPARQ_API StatusOr<CalibrationTable> MergeCalibrationFiles(const MergeCalibrationFilesOptions& options);

struct SPARQ_API QuantizeFilesOptions {
  std::string model;   // FP32 ONNX model (required)
  std::string scales;  // calibration table (`sparq calibrate`, output.scales) (required but with int4)
  std::string output;  // quantized model to write (required; never the input model)
  // Inputs pinned to one value (--constant, a recipe's data.constants), name
  // -> values: the Ifs they decide are folded before quantizing, as
  // CalibrateFiles and `sparq run` fold them, and the written model has no
  // such input. Each must name an input and fold an If (else
  // InvalidArgument: quantizing reads no data), but for the inputs of `data`
  // (GPTQ / AWQ / AdaRound), which it pins. They must equal the table's
  // folded_inputs when it records any. Default none.
  std::map<std::string, std::vector<double>> constants;
  QuantizeOptions quantize;
  // Weight-only INT4 (QuantizeWeightsInt4) instead of `quantize` and a table:
  // no scales. GPTQ / AWQ read the layers' inputs on `data` (.npz or .npy
  // folder, `batch_size` samples a batch, the first `samples`, 0 = all).
  bool int4 = false;
  Int4Options int4_options;
  std::string data;
  int64_t batch_size = 8;
  int64_t samples = 0;
  // Static INT8 (QDQ): weights rounded by AdaRound (sparq/adaround.h) fitted
  // on `data` (batch_size, samples as above) instead of to nearest.
  bool adaround = false;
  AdaRoundOptions adaround_options;
  // Store the weights in `<output>.data` beside the model (SaveOptions::
  // external_data): for outputs over 2 GB (docs/scale.md).
  bool external_data = false;
};

struct SPARQ_API QuantizeFilesResult {
  std::string output;         // the model written
  std::string scales;         // the table read
  QuantizeReport report;      // each weighted layer's precision; warnings (the table check's included)
  std::string calibration;    // the table's method
  std::string opset_upgrade;  // UpgradeOpsetForInt8's line; "" when none was needed
  std::vector<std::string> folded_ifs;  // each If `constants` folded: its condition, the branch inlined
  std::map<std::string, std::vector<double>> folded_inputs;  // the constants that folded one (inputs removed)

  // `sparq quantize --json` (docs/sparq-json.schema.json, quantize_report).
  std::string ToJson() const;
};

// Calibrate once, quantize many times: loads the model and the table, checks
// the table against the model (CheckCalibrationTable), quantizes and writes
// the model atomically with its provenance (producer sparq, the table's
// calibration method). Errors: InvalidArgument when the output is the input
// model or a path is empty, for a constant naming no input or folding no If
// (without data), or pins differing from the table's folded_inputs (naming
// the input and both values); NotFound when the table lacks a tensor the
// quantizer needs (naming the tensor and the table file); those of LoadModel,
// CalibrationTable::Load, QuantizeModel and SaveModel. Nothing is written on
// error.
SPARQ_API StatusOr<QuantizeFilesResult> QuantizeFiles(const QuantizeFilesOptions& options);

struct SPARQ_API SensitivityFilesOptions {
  std::string model;  // FP32 ONNX model (required)
  std::string data;   // recovery and activation-score data, and the evaluation unless `eval` is set (required)
  std::string eval;   // evaluation data; "" = `data`
  std::string labels; // class ids of the evaluation samples; needed by metric top1
  Metric metric = Metric::kAgreement;  // judged against the unpruned model
  int64_t samples = 256;    // samples per pass, of both data sets; 0 = all
  int64_t batch_size = 32;  // >= 1; a model with a fixed batch dim uses it
  SensitivityOptions sensitivity;
};

struct SPARQ_API SensitivityFilesResult {
  SensitivityTable table;
  int64_t candidates = 0;  // models evaluated (in memory)
};

// Loads the model and scans it (SensitivityAnalysis): each candidate is
// evaluated in memory by one Evaluator whose reference is the unpruned model.
// Errors: those of LoadModel, OpenDataset, the Evaluator and
// SensitivityAnalysis; InvalidArgument for metric top1 without labels.
SPARQ_API StatusOr<SensitivityFilesResult> SensitivityFiles(const SensitivityFilesOptions& options);

}  // namespace sparq
