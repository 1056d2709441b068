// Reading and writing ONNX model files.
#pragma once

#include <string>

#include "sparq/export.h"
#include "sparq/graph.h"
#include "sparq/status.h"

namespace sparq {

struct SPARQ_API LoadOptions {
  // Run ONNX's shape inference and fill Graph::value_info. Inference errors
  // are not fatal here (the executor computes shapes itself); call
  // InferShapes() directly to see them.
  bool infer_shapes = true;
};

// Loads `path`, with its external data files (resolved relative to the model's
// folder). Errors: NotFound (missing file or external data file), Corruption
// (truncated or malformed protobuf, tensor data of the wrong size),
// NotSupported (tensor types sparq does not store, used by a weight).
SPARQ_API StatusOr<Model> LoadModel(const std::string& path, const LoadOptions& options = {});
// Parses a serialized ModelProto; external data is resolved against `base_dir`.
SPARQ_API StatusOr<Model> LoadModelFromBytes(const std::string& bytes, const std::string& base_dir = ".",
                                   const LoadOptions& options = {});

struct SPARQ_API SaveOptions {
  // Refuse to write over an existing file at the output path.
  bool overwrite = true;
  // Store initializers of at least `external_data_threshold` bytes in one
  // external data file named `external_data_file` beside the model.
  bool external_data = false;
  size_t external_data_threshold = 1024;
  std::string external_data_file;  // default: "<model file name>.data"
  // Write sparq's shape-inferred value_info into the file.
  bool keep_value_info = true;
  // Store an initializer as an ONNX sparse_initializer (its nonzero values and
  // their int64 linear indices) when that is smaller than the dense tensor:
  // for float32 weights above 2/3 sparsity. sparq and onnxruntime load both.
  // Initializers that are also graph inputs stay dense.
  bool sparse_initializers = false;
};

// Writes `model` to `path` atomically: to a temporary file in the same folder,
// then renamed into place, so readers never see half a file. Errors: IOError.
SPARQ_API Status SaveModel(const Model& model, const std::string& path, const SaveOptions& options = {});
// Serializes to ModelProto bytes (all weights inline).
SPARQ_API StatusOr<std::string> SerializeModel(const Model& model);

// Parses a serialized onnx.TensorProto (e.g. the input_0.pb files of ONNX's
// backend tests); returns its name and value. Errors: Corruption, NotSupported.
SPARQ_API StatusOr<std::pair<std::string, Tensor>> ParseTensorProto(const std::string& bytes);
// Serializes `t` as an onnx.TensorProto named `name`.
SPARQ_API std::string SerializeTensorProto(const std::string& name, const Tensor& t);

// Runs ONNX's checker on the model (full check, as onnx.checker.check_model).
SPARQ_API Status CheckModel(const Model& model);
// Fills graph.value_info from ONNX's shape inference; errors are returned but
// leave the model unchanged.
SPARQ_API Status InferShapes(Model& model);

// The model with its default-domain opset raised to `target` by ONNX's
// version converter (onnx/version_converter), which rewrites the ops whose
// signature changed (e.g. Clip's bounds from attributes to inputs at 11).
// Shapes are inferred first for the adapters that need them; a Softmax,
// LogSoftmax or Hardmax whose input rank stays unknown is rewritten by sparq
// (Shape + Flatten + op + Reshape, the pre-13 semantics at any opset), where
// ONNX's 12 -> 13 adapter would fail.
// Errors: InvalidArgument when the converter fails (naming its reason),
// e.g. for an op it has no adapter for; `model` is never changed.
SPARQ_API StatusOr<Model> ConvertOpset(const Model& model, int64_t target);

}  // namespace sparq
