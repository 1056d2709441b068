// Batched reading of model inputs from .npy/.npz files (the dataset layout of
// sparq/dataset.h, whose OpenDataset builds on it), and row helpers for tensors whose first axis is samples.
// Internal to sparq.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
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
  static StatusOr<std::unique_ptr<Dataset>> Open(const std::string& path, std::vector<ValueInfo> inputs,
                                                 std::vector<ValueInfo> optional, int64_t rows_used = 0);

  // Samples in the dataset; -1 when not known before reading every file.
  int64_t total() const { return total_; }
  // Reads up to `n` (>= 1) samples into `batch` (one tensor per fed input,
  // first dim = *rows). *rows is 0 at the end of the data.
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
  int64_t total_ = -1;
  int64_t unchecked_ = 0;      // samples still to check finite in later files (Open's rows_used)
  size_t next_file_ = 0;       // index of the next file to load
  std::map<std::string, Source> current_;  // arrays of the loaded file, by input name
  int64_t current_rows_ = 0;   // samples in the loaded file
  int64_t cursor_ = 0;         // next unread sample of the loaded file
  std::map<std::string, Shape> first_;  // shapes of the first file's arrays: later files must match their trailing dims
};

// Checks one array (or batch) of data against the model input it feeds: not
// a scalar, the input's type, and its dims after the first. `what` names the
// array in the message.
Status CheckInputArray(DataType dtype, const Shape& shape, const ValueInfo& input, const std::string& what);

}  // namespace sparq
