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
// axis 0. Samples lie along the first axis of every array in the files.
// Files are read one batch at a time, so a folder may be larger than memory.
//
// Where the samples go in the model's input is the model's own shape's
// choice (SampleAxes): the batch of an input declared [2, batch, 128] is
// assembled from file rows [S, 2, 128] and moved to [2, B, 128]. An input
// without a sample axis (a scalar such as a sample rate, or a fixed-shape
// input of a model whose batch is dynamic) gets the same value in every
// batch: its array holds exactly the model's shape, or it is pinned with
// DatasetOptions::constants. Data whose shape cannot be placed in the
// model's declared shape is an error naming the input, never a guess.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <set>
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

// The axis of a batch tensor along which its samples lie; kNoSampleAxis for
// an input fed the same value in every batch.
inline constexpr int kNoSampleAxis = -1;

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

  // Where each input's samples lie in a batch (SampleAxes); an input not
  // listed has them on axis 0 (as any BatchSource without axes).
  const std::map<std::string, int>& sample_axes() const { return sample_axes_; }
  int SampleAxisOf(const std::string& input) const;
  // Samples in `batch`: the size of the sample axis of its first input (by
  // name) that has one; 0 when none has.
  int64_t SamplesIn(const TensorMap& batch) const;

  BatchSource& set_name(std::string name) { return name_ = std::move(name), *this; }
  BatchSource& set_sample_axes(std::map<std::string, int> axes) { return sample_axes_ = std::move(axes), *this; }
  BatchSource& set_size(int64_t batch_size, int64_t samples, int64_t available) {
    batch_size_ = batch_size, samples_ = samples, available_ = available;
    return *this;
  }

 private:
  std::function<BatchFn()> open_;
  std::string name_;
  std::map<std::string, int> sample_axes_;
  int64_t batch_size_ = 0, samples_ = -1, available_ = -1;
};

// The sample (batch) axis of every input of `graph` (inputs and
// initializer_inputs), from its declared dims; a dim is dynamic when it has
// a symbolic name or no value:
//   - no declared shape, or dim 0 dynamic: axis 0 (samples first);
//   - else the dim that carries the batch's name (the symbolic name of the
//     first dynamic dim 0 among the inputs), else its first dynamic dim
//     (a recurrent state [2, batch, 128]: axis 1);
//   - no dynamic dim: a scalar has no sample axis (kNoSampleAxis); so has
//     any input of a model with a dynamic batch (some input's dim 0 is
//     dynamic), e.g. a fixed [1]; in a model whose every input is fixed
//     (a fixed batch: the first input's dim 0) the inputs whose dim 0 is
//     that batch keep axis 0, as they always did, and the others have none
//     (a state [2, 1, 128] beside an input [1, 576]: one array [2, 1, 128]
//     for every batch).
// Inputs named in `pinned` (constants) have no sample axis.
SPARQ_API std::map<std::string, int> SampleAxes(const Graph& graph, const std::set<std::string>& pinned = {});

// The one batch rule. A model whose inputs have a fixed sample axis runs that
// many samples at a time (the first such input's); otherwise `requested`, or 1
// when `requested` is 0. It does not check that a fixed dim is positive or
// that `requested` agrees with it: Evaluate reports those. Inputs without a
// sample axis (SampleAxes) do not count.
SPARQ_API int64_t FixedBatchSize(const Graph& graph);  // 0 when every sample axis is dynamic
SPARQ_API int64_t BatchSizeFor(const Graph& graph, int64_t requested);

// Shard `shard` of `shards` of `data`, by whole batches in contiguous runs:
// with B = ceil(samples / batch_size) batches, shard i reads batches
// [i * B / n, (i + 1) * B / n) (integer division), so the shards together
// run exactly the batches of one pass, each with the same samples as in one
// process (the forward passes, hence the results, are the same bit for bit),
// and concatenated in shard order they give the data in order. A shard may
// be empty (n > B). The batches before the shard are read and dropped, not
// run. Errors: InvalidArgument for shards < 1, shard outside [0, shards), or
// data whose samples or batch size are not known in advance.
SPARQ_API StatusOr<BatchSource> ShardOf(const BatchSource& data, int shard, int shards);
// Parses "i/n" (`--shard 2/8`): 0 <= i < n. InvalidArgument saying what is wrong.
SPARQ_API StatusOr<std::pair<int, int>> ParseShard(const std::string& spec);

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
  // (so the file may hold, say, uint8 NHWC images for a float NCHW model),
  // with samples on axis 0, before they are moved to the input's sample axis.
  BatchTransform transform;
  // Inputs pinned to one value for every batch (recipe `data.constants`,
  // `sparq eval --constant`): input name -> its values in row-major order
  // (ConstantInput). A pinned input must not also be in the data files.
  // Default none.
  std::map<std::string, std::vector<double>> constants;
};

// The tensor that pins `input` to `values`: the input's element type
// (integers must be whole, bool 0 or 1) and declared shape (one value for a
// scalar or an input without a declared shape; several: a 1-D input when
// the shape is not declared). Errors: InvalidArgument naming the input when
// the count does not fill the shape, the shape has a dynamic dim, or a
// value does not fit the type.
SPARQ_API StatusOr<Tensor> ConstantInput(const ValueInfo& input, const std::vector<double>& values);
// Parses "name=value" or "name=v1,v2,..." (`sparq eval --constant`).
// Errors: InvalidArgument saying what is wrong (no '=', no name, a value
// that is not a number).
SPARQ_API StatusOr<std::pair<std::string, std::vector<double>>> ParseConstant(const std::string& spec);

// Opens the data at `path` (.npy, .npz or a folder of them) for a model with
// `graph`'s inputs (inputs with an initializer default may be left out). The
// first file is read and checked now, so a bad path fails here; every value
// is checked to be finite as its file is read. Batches are checked against
// the model's inputs (type, dims beside the sample axis) after the transform,
// and each is moved to its sample axis (SampleAxes; the BatchSource carries
// them). Errors: NotFound, Corruption, InvalidArgument naming the file and
// array, or the input whose data does not fit its declared shape or whose
// constant is wrong.
SPARQ_API StatusOr<BatchSource>
OpenDataset(const std::string& path, const Graph& graph, const DatasetOptions& options = {});

}  // namespace sparq
