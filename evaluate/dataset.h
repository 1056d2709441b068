// Batched reading of model inputs from .npy/.npz files (the dataset layout of
// sparq/dataset.h, whose OpenDataset builds on it), and row helpers for tensors whose first axis is samples.
// Internal to sparq.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "sparq/dataset.h"
#include "sparq/executor.h"
#include "sparq/graph.h"
#include "sparq/npy.h"
#include "sparq/status.h"

namespace sparq {

// Rows [begin, begin + count) of `t` along axis 0 (a copy). The caller keeps
// the range inside t.dim(0).
Tensor SliceRows(const Tensor& t, int64_t begin, int64_t count);
// Concatenates along axis 0. Errors: InvalidArgument when types or trailing
// dims differ, or a part is rank 0; `what` names the value in messages.
StatusOr<Tensor> ConcatRows(const std::vector<Tensor>& parts, const std::string& what);
// The same along `axis` (rows of axis 0 as above; the caller keeps axis <
// rank and the range inside dim(axis)).
Tensor SliceAxis(const Tensor& t, int axis, int64_t begin, int64_t count);
// Concatenates along `axis`; errors as ConcatRows.
StatusOr<Tensor> ConcatAxis(const std::vector<Tensor>& parts, int axis, const std::string& what);
// Moves axis 0 of `t` to `axis`: [S, d1, .., dp, ...] -> [d1, .., dp, S, ...].
Tensor MoveFirstAxisTo(const Tensor& t, int axis);
// The inverse: moves `axis` of `t` to the front.
Tensor MoveAxisToFirst(const Tensor& t, int axis);
// Where the samples lie in a graph output of `graph`: as SampleAxes decides
// for an input (the dim named like the batch, else the first dynamic one,
// when dim 0 is fixed in a model with a dynamic batch), else axis 0.
int OutputSampleAxis(const Graph& graph, const ValueInfo& output);
// Samples [begin, begin + count) of every input of `batch` along its axis in
// `axes` (a BatchSource's sample_axes; unlisted: 0); inputs without a sample
// axis are kept whole.
TensorMap SliceSamples(const TensorMap& batch, const std::map<std::string, int>& axes, int64_t begin,
                       int64_t count);
// Repeats the last sample of each input along its sample axis until it has
// `batch` samples (a fixed-batch model's last partial batch); inputs without
// a sample axis are kept.
StatusOr<TensorMap> PadSamples(const TensorMap& feed, const std::map<std::string, int>& axes, int64_t rows,
                               int64_t batch);
// FixedBatchSize with the sample axes `axes` (a BatchSource's): the fixed
// size of the first input's sample axis; 0 when none is fixed.
int64_t FixedBatchSizeOf(const Graph& graph, const std::map<std::string, int>& axes);
// InvalidArgument naming `what` and the flat index of the first NaN or Inf of
// a floating-point tensor (counted from `index_base`, for a slice of a larger
// array); OK for other types.
Status CheckFinite(const Tensor& t, const std::string& what, int64_t index_base = 0);

// Arrays of .npy files and of uncompressed .npz archives are read a batch of
// rows at a time (after one streaming pass that checks every value is
// finite), so memory holds one batch, not the file; compressed .npz members
// are read whole.
class Dataset {
 public:
  // Opens `path` (a .npy, .npz or folder) for a model whose graph inputs are
  // `inputs`; `optional` lists inputs that have an initializer default and
  // may be left out. Reads the first file, and the headers of .npy files to
  // know the total. Every value of the samples that will be read (the first
  // `rows_used`, 0: all) is checked finite as each file is loaded, so a bad
  // value fails before any work. Errors: NotFound, Corruption, InvalidArgument.
  // `axes` holds each input's sample axis (SampleAxes): an input without one
  // is read whole from each file (its array must have the input's shape);
  // inputs in `pinned` are fed elsewhere and must not be in the files.
  static StatusOr<std::unique_ptr<Dataset>> Open(const std::string& path, std::vector<ValueInfo> inputs,
                                                 std::vector<ValueInfo> optional, int64_t rows_used = 0,
                                                 std::map<std::string, int> axes = {},
                                                 std::set<std::string> pinned = {});

  // Samples in the dataset; -1 when not known before reading every file.
  int64_t total() const { return total_; }
  // Reads up to `n` (>= 1) samples into `batch` (one tensor per fed input,
  // first dim = *rows; inputs without a sample axis: their whole array).
  // *rows is 0 at the end of the data.
  Status Next(int64_t n, TensorMap* batch, int64_t* rows);

 private:
  Dataset() = default;
  // One array of the current file: located on disk (read per batch) or, for
  // a compressed .npz member, held whole.
  struct Source {
    std::string what;      // for messages
    NpyArrayRef on_disk;   // valid when `whole` is undefined
    Tensor whole;
    DataType dtype() const { return whole.defined() ? whole.dtype() : on_disk.header.dtype; }
    const Shape& shape() const { return whole.defined() ? whole.shape() : on_disk.header.shape; }
    StatusOr<Tensor> Rows(int64_t begin, int64_t count) const;
  };

  // Opens files_[index] as current_, validated against the model inputs.
  Status Load(size_t index);

  std::string path_;
  std::vector<std::string> files_;
  std::vector<ValueInfo> inputs_;
  std::vector<ValueInfo> optional_;
  std::map<std::string, int> axes_;
  std::set<std::string> pinned_;
  int AxisOf(const std::string& input) const;
  int64_t total_ = -1;
  int64_t unchecked_ = 0;      // samples still to check finite in later files (Open's rows_used)
  size_t next_file_ = 0;       // index of the next file to load
  std::map<std::string, Source> current_;  // arrays of the loaded file, by input name
  int64_t current_rows_ = 0;   // samples in the loaded file
  int64_t cursor_ = 0;         // next unread sample of the loaded file
  std::map<std::string, Tensor> constants_;  // inputs without a sample axis: their value (the same in every file)
  std::map<std::string, Shape> first_;  // shapes of the first file's arrays: later files must match their trailing dims
};

// Checks one array (or batch) of data, samples first, against the model input
// it feeds at `sample_axis`: the input's type, and its dims after the first
// against the input's dims beside the sample axis (the rank too). With
// kNoSampleAxis the array must have the input's declared shape. `what` names
// the array in the message, which gives the file's and the model's shapes.
Status CheckInputArray(DataType dtype, const Shape& shape, const ValueInfo& input, const std::string& what,
                       int sample_axis = 0);

}  // namespace sparq
