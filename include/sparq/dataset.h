// Sample data for calibration, pruning and evaluation: batches of model
// inputs read from .npy/.npz files or folders of them, with preprocessing
// applied per batch as the data is read (no preprocessed copy is written).
//
//   data.npz / data.npy / folder/ ──read a batch──> transform ──check against
//   the model's inputs──> TensorMap (input name -> [rows, ...])
//
// A .npz is keyed by input names (a single-input model also accepts an
// archive with one array of any name); a .npy feeds a single-input model; a
// folder's .npy/.npz files are read in name order and concatenated along
// axis 0. Samples lie along the first axis of every array. Files are read one
// batch at a time, so a folder may be larger than memory.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "sparq/executor.h"  // TensorMap
#include "sparq/export.h"
#include "sparq/graph.h"
#include "sparq/status.h"

namespace sparq {

// Reads the next batch into `batch`; false when there are no more batches.
using BatchFn = std::function<StatusOr<bool>(TensorMap* batch)>;

// Rewrites one batch in place (preprocessing). Errors name the input.
using BatchTransform = std::function<Status(TensorMap* batch)>;

// Data read in passes: each call of the source returns a fresh BatchFn that
// starts at the first sample (calibration reads the data once, pruning once
// per step, evaluation once per candidate). Any callable returning a BatchFn
// converts to a BatchSource; OpenDataset also tells its name and size.
// Copies share the same data; a BatchSource is not thread-safe.
class SPARQ_API BatchSource {
 public:
  BatchSource() = default;
  template <typename Open,
            typename = std::enable_if_t<!std::is_same_v<std::decay_t<Open>, BatchSource> &&
                                        std::is_constructible_v<std::function<BatchFn()>, Open>>>
  BatchSource(Open open) : open_(std::move(open)) {}  // NOLINT: implicit, as a std::function would be

  // A new pass from the first sample.
  BatchFn operator()() const { return open_ ? open_() : BatchFn(); }
  explicit operator bool() const { return static_cast<bool>(open_); }

  // The same batches, each rewritten by `transform` as it is read.
  BatchSource WithTransform(BatchTransform transform) const;

  // What the data is, for messages and reports (the path); "" when unnamed.
  const std::string& name() const { return name_; }
  // Samples in one pass (after any limit); -1 when not known before reading.
  int64_t samples() const { return samples_; }
  // Samples in the underlying data (before any limit); -1 when not known.
  int64_t available() const { return available_; }
  // Samples per batch (the last may hold fewer); 0 when not known.
  int64_t batch_size() const { return batch_size_; }

  BatchSource& set_name(std::string name) { return name_ = std::move(name), *this; }
  BatchSource& set_size(int64_t batch_size, int64_t samples, int64_t available) {
    batch_size_ = batch_size, samples_ = samples, available_ = available;
    return *this;
  }

 private:
  std::function<BatchFn()> open_;
  std::string name_;
  int64_t batch_size_ = 0, samples_ = -1, available_ = -1;
};

// The one batch rule. A model whose inputs have a fixed first dim runs that
// many samples at a time (the first such input's); otherwise `requested`, or 1
// when `requested` is 0. It does not check that a fixed dim is positive or
// that `requested` agrees with it: Evaluate reports those.
SPARQ_API int64_t FixedBatchSize(const Graph& graph);  // 0 when every first dim is dynamic
SPARQ_API int64_t BatchSizeFor(const Graph& graph, int64_t requested);

// Layout of image data in the files; models take NCHW.
enum class DataLayout { kNCHW, kNHWC };

// Per-sample preprocessing, applied to each batch as it is read:
//   x = (x * scale - mean[c]) / stddev[c], after NHWC -> NCHW when layout is NHWC.
// The result is float32 whatever the file's type (uint8 images are common).
struct SPARQ_API Preprocess {
  double scale = 1.0;             // > 0
  std::vector<double> mean;       // per channel (or one for all); default none (empty)
  std::vector<double> stddev;     // per channel (or one for all), each > 0; default none (empty)
  DataLayout layout = DataLayout::kNCHW;  // layout of the data file
  // True when the transform changes nothing (scale 1, no mean/stddev, NCHW).
  bool IsIdentity() const;
};

// The transform that applies `p` to the input named `input` of each batch
// (other inputs pass unchanged). Errors: InvalidArgument naming the input when
// NHWC data is not rank 4, or mean/stddev do not match the channel count.
SPARQ_API BatchTransform PreprocessTransform(const Preprocess& p, const std::string& input);

struct SPARQ_API DatasetOptions {
  // Samples per batch; BatchSizeFor(graph, batch_size) decides (a fixed first
  // dim wins). 0 = the fixed dim, else 1.
  int64_t batch_size = 32;
  int64_t limit = 0;  // at most this many samples per pass; 0 = all
  // Applied to each batch before it is checked against the model's inputs
  // (so the file may hold, say, uint8 NHWC images for a float NCHW model).
  BatchTransform transform;
};

// Opens the data at `path` (.npy, .npz or a folder of them) for a model with
// `graph`'s inputs (inputs with an initializer default may be left out). The
// first file is read and checked now, so a bad path fails here; every value
// is checked to be finite as its file is read. Batches are checked against
// the model's inputs (type, dims after the first) after the transform.
// Errors: NotFound, Corruption, InvalidArgument naming the file and array.
SPARQ_API StatusOr<BatchSource>
OpenDataset(const std::string& path, const Graph& graph, const DatasetOptions& options = {});

}  // namespace sparq
