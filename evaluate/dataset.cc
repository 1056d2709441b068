#include "evaluate/dataset.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>

namespace sparq {
namespace {

namespace fs = std::filesystem;

Shape TrailingDims(const Shape& s) { return Shape(s.begin() + (s.empty() ? 0 : 1), s.end()); }

std::string Names(const std::vector<ValueInfo>& values) {
  std::string out;
  for (const auto& v : values) out += (out.empty() ? "" : ", ") + v.name;
  return out;
}

const ValueInfo* FindByName(const std::vector<ValueInfo>& values, const std::string& name) {
  for (const auto& v : values)
    if (v.name == name) return &v;
  return nullptr;
}

template <typename Load>
Status FirstNonFinite(const Tensor& t, const std::string& what, int64_t index_base, Load load) {
  for (int64_t i = 0; i < t.numel(); ++i) {
    const double v = load(i);
    if (!std::isfinite(v)) {
      return Status::InvalidArgument(what + " has a non-finite value (" + (std::isnan(v) ? "nan" : v > 0 ? "inf" : "-inf") +
                                     ") at flat index " + std::to_string(index_base + i));
    }
  }
  return Status::OK();
}

// Rows read at a time when checking an array on disk: about 16 MiB.
int64_t ScanRows(const Shape& shape, DataType dtype) {
  int64_t row = static_cast<int64_t>(DataTypeSize(dtype));
  for (size_t d = 1; d < shape.size(); ++d) row *= std::max<int64_t>(shape[d], 1);
  return std::max<int64_t>(1, (int64_t{16} << 20) / std::max<int64_t>(row, 1));
}

}  // namespace

Tensor SliceRows(const Tensor& t, int64_t begin, int64_t count) {
  Shape shape = t.shape();
  shape[0] = count;
  Tensor out(t.dtype(), shape);
  if (out.nbytes() > 0) {
    const size_t row_bytes = t.nbytes() / static_cast<size_t>(t.dim(0));
    std::memcpy(out.raw_data(), static_cast<const uint8_t*>(t.raw_data()) + static_cast<size_t>(begin) * row_bytes,
                static_cast<size_t>(count) * row_bytes);
  }
  return out;
}

StatusOr<Tensor> ConcatRows(const std::vector<Tensor>& parts, const std::string& what) {
  if (parts.empty()) return Status::InvalidArgument(what + ": nothing to concatenate");
  const Tensor& first = parts[0];
  int64_t rows = 0;
  for (const Tensor& p : parts) {
    if (p.rank() == 0) {
      return Status::InvalidArgument(what + " is a scalar; cannot concatenate it along a sample axis");
    }
    if (p.dtype() != first.dtype() || TrailingDims(p.shape()) != TrailingDims(first.shape())) {
      return Status::InvalidArgument(what + ": cannot concatenate " + DataTypeName(p.dtype()) +
                                     ShapeToString(p.shape()) + " after " + DataTypeName(first.dtype()) +
                                     ShapeToString(first.shape()) + " (trailing dims must match)");
    }
    rows += p.dim(0);
  }
  Shape shape = first.shape();
  shape[0] = rows;
  Tensor out(first.dtype(), shape);
  auto* dst = static_cast<uint8_t*>(out.raw_data());
  for (const Tensor& p : parts) {
    if (p.nbytes() > 0) std::memcpy(dst, p.raw_data(), p.nbytes());
    dst += p.nbytes();
  }
  return out;
}

Status CheckFinite(const Tensor& t, const std::string& what, int64_t index_base) {
  switch (t.dtype()) {
    case DataType::kFloat32: {
      const float* p = t.data<float>();
      return FirstNonFinite(t, what, index_base, [p](int64_t i) { return static_cast<double>(p[i]); });
    }
    case DataType::kFloat64: {
      const double* p = t.data<double>();
      return FirstNonFinite(t, what, index_base, [p](int64_t i) { return p[i]; });
    }
    case DataType::kFloat16: {
      const auto* p = static_cast<const uint16_t*>(t.raw_data());
      return FirstNonFinite(t, what, index_base, [p](int64_t i) { return static_cast<double>(HalfToFloat(p[i])); });
    }
    case DataType::kBFloat16: {
      const auto* p = static_cast<const uint16_t*>(t.raw_data());
      return FirstNonFinite(t, what, index_base,
                            [p](int64_t i) { return static_cast<double>(BFloat16ToFloat(p[i])); });
    }
    default: return Status::OK();
  }
}

Status CheckInputArray(DataType dtype, const Shape& shape, const ValueInfo& input, const std::string& what) {
  if (shape.empty()) {
    return Status::InvalidArgument(what + " is a scalar; samples must lie along its first axis");
  }
  if (input.dtype != DataType::kUndefined && dtype != input.dtype) {
    return Status::InvalidArgument(what + " has type " + DataTypeName(dtype) + ", model input '" + input.name +
                                   "' expects " + input.Describe() + " (convert the data with .astype)");
  }
  if (input.has_shape) {
    bool ok = input.dims.size() == shape.size();
    for (size_t d = 1; ok && d < input.dims.size(); ++d)
      if (input.dims[d].known() && input.dims[d].value != shape[d]) ok = false;
    if (!ok) {
      return Status::InvalidArgument(what + " has shape " + ShapeToString(shape) + ", model input '" + input.name +
                                     "' expects " + input.Describe() + " (samples along the first axis)");
    }
  }
  return Status::OK();
}

StatusOr<std::unique_ptr<Dataset>> Dataset::Open(const std::string& path, std::vector<ValueInfo> inputs,
                                                 std::vector<ValueInfo> optional, int64_t rows_used) {
  std::unique_ptr<Dataset> ds(new Dataset());
  ds->unchecked_ = rows_used > 0 ? rows_used : std::numeric_limits<int64_t>::max();
  ds->path_ = path;
  ds->inputs_ = std::move(inputs);
  ds->optional_ = std::move(optional);
  std::error_code ec;
  if (!fs::exists(path, ec)) return Status::NotFound("dataset not found: " + path);
  if (fs::is_directory(path, ec)) {
    for (const auto& entry : fs::directory_iterator(path, ec)) {
      const std::string ext = entry.path().extension().string();
      if (entry.is_regular_file(ec) && (ext == ".npy" || ext == ".npz")) ds->files_.push_back(entry.path().string());
    }
    if (ec) return Status::IOError("cannot list " + path + ": " + ec.message());
    std::sort(ds->files_.begin(), ds->files_.end());
    if (ds->files_.empty()) return Status::InvalidArgument("dataset folder " + path + " has no .npy or .npz files");
  } else {
    const std::string ext = fs::path(path).extension().string();
    if (ext != ".npy" && ext != ".npz") {
      return Status::InvalidArgument("dataset " + path + " must be a .npy file, a .npz file or a folder of them");
    }
    ds->files_.push_back(path);
  }
  if (ds->inputs_.empty()) return Status::InvalidArgument("the model has no inputs to feed from " + path);

  // The total is known up front when every file is a .npy (headers only).
  bool all_npy = true;
  int64_t total = 0;
  for (const std::string& f : ds->files_) {
    if (fs::path(f).extension() != ".npy") {
      all_npy = false;
      break;
    }
    SPARQ_ASSIGN_OR_RETURN(NpyHeader h, ReadNpyHeader(f));
    if (h.shape.empty()) {
      all_npy = false;  // Load() reports the scalar with its context
      break;
    }
    total += h.shape[0];
  }
  SPARQ_RETURN_IF_ERROR(ds->Load(0));
  if (all_npy) ds->total_ = total;
  else if (ds->files_.size() == 1) ds->total_ = ds->current_rows_;
  return ds;
}

StatusOr<Tensor> Dataset::Source::Rows(int64_t begin, int64_t count) const {
  if (whole.defined()) return begin == 0 && count == whole.dim(0) ? whole : SliceRows(whole, begin, count);
  return ReadArrayRows(on_disk, begin, count);
}

Status Dataset::Load(size_t index) {
  const std::string& file = files_[index];
  next_file_ = index + 1;
  current_.clear();
  current_rows_ = 0;
  cursor_ = 0;
  // The file's arrays: located on disk, or read whole when compressed.
  std::vector<std::pair<std::string, Source>> arrays;
  auto located = LocateArrays(file);
  if (located.ok()) {
    for (NpyArrayRef& ref : *located) {
      Source s;
      s.what = file + ": array '" + ref.name + "'";
      std::string name = ref.name;
      s.on_disk = std::move(ref);
      arrays.emplace_back(std::move(name), std::move(s));
    }
  } else if (located.status().code() == StatusCode::kNotSupported) {
    SPARQ_ASSIGN_OR_RETURN(NamedTensors whole, ReadArrays(file));
    for (auto& [name, t] : whole) {
      Source s;
      s.what = file + ": array '" + name + "'";
      s.whole = std::move(t);
      arrays.emplace_back(name, std::move(s));
    }
  } else {
    return located.status();
  }

  // (input, array) for each fed input.
  struct Fed {
    const ValueInfo* input;
    std::string array;
    const Source* source;
  };
  std::vector<Fed> fed;
  if (inputs_.size() == 1 && arrays.size() == 1) {
    fed.push_back({&inputs_[0], arrays[0].first, &arrays[0].second});
  } else {
    if (fs::path(file).extension() == ".npy") {
      return Status::InvalidArgument(file + " holds one array but the model has " + std::to_string(inputs_.size()) +
                                     " inputs (" + Names(inputs_) + "); use .npz files keyed by input name");
    }
    for (auto& [name, source] : arrays) {
      const ValueInfo* input = FindByName(inputs_, name);
      if (input == nullptr) input = FindByName(optional_, name);
      if (input == nullptr) {
        return Status::InvalidArgument(file + ": array '" + name + "' is not an input of the model (inputs: " +
                                       Names(inputs_) + ")");
      }
      fed.push_back({input, name, &source});
    }
    for (const ValueInfo& input : inputs_) {
      bool found = std::any_of(fed.begin(), fed.end(), [&](const Fed& f) { return f.input == &input; });
      if (!found) {
        std::string have;
        for (const auto& kv : arrays) have += (have.empty() ? "" : ", ") + kv.first;
        return Status::InvalidArgument(file + ": missing input '" + input.name + "' (" + input.Describe() +
                                       "); the file has: " + (have.empty() ? "no arrays" : have));
      }
    }
  }

  for (const Fed& f : fed) {
    const Source& s = *f.source;
    SPARQ_RETURN_IF_ERROR(CheckInputArray(s.dtype(), s.shape(), *f.input, s.what));
    auto first = first_.find(f.input->name);
    if (first != first_.end() && TrailingDims(first->second) != TrailingDims(s.shape())) {
      return Status::InvalidArgument(s.what + " has shape " + ShapeToString(s.shape()) + " but " + files_[0] +
                                     " has " + ShapeToString(first->second) +
                                     " (all files must agree beyond the first axis)");
    }
    if (s.shape()[0] != fed[0].source->shape()[0]) {
      return Status::InvalidArgument(file + ": arrays hold different numbers of samples ('" + fed[0].array + "' " +
                                     std::to_string(fed[0].source->shape()[0]) + ", '" + f.array + "' " +
                                     std::to_string(s.shape()[0]) + ")");
    }
    // Every value that will be read is checked now, before any work, in
    // bounded memory.
    const int64_t rows = std::min(s.shape()[0], unchecked_), step = ScanRows(s.shape(), s.dtype());
    const int64_t per_row = rows > 0 ? NumElements(s.shape()) / rows : 0;
    for (int64_t r = 0; r < rows; r += step) {
      SPARQ_ASSIGN_OR_RETURN(Tensor part, s.Rows(r, std::min(step, rows - r)));
      SPARQ_RETURN_IF_ERROR(CheckFinite(part, s.what, r * per_row));
    }
  }
  for (const Fed& f : fed) {
    current_[f.input->name] = *f.source;
    if (index == 0) first_[f.input->name] = f.source->shape();
  }
  if (index != 0) {
    for (const auto& kv : first_) {
      if (!current_.count(kv.first)) {
        return Status::InvalidArgument(file + ": has no array for input '" + kv.first + "' but " + files_[0] +
                                       " has one");
      }
    }
  }
  current_rows_ = fed[0].source->shape()[0];
  unchecked_ -= std::min(current_rows_, unchecked_);
  return Status::OK();
}

Status Dataset::Next(int64_t n, TensorMap* batch, int64_t* rows) {
  batch->clear();
  *rows = 0;
  std::map<std::string, std::vector<Tensor>> parts;
  while (*rows < n) {
    if (cursor_ >= current_rows_) {
      if (next_file_ >= files_.size()) break;
      SPARQ_RETURN_IF_ERROR(Load(next_file_));
      continue;
    }
    const int64_t take = std::min(n - *rows, current_rows_ - cursor_);
    for (const auto& [name, source] : current_) {
      SPARQ_ASSIGN_OR_RETURN(Tensor t, source.Rows(cursor_, take));
      parts[name].push_back(std::move(t));
    }
    cursor_ += take;
    *rows += take;
  }
  for (auto& [name, list] : parts) {
    if (list.size() == 1) {
      (*batch)[name] = list[0];
    } else {
      SPARQ_ASSIGN_OR_RETURN(Tensor t, ConcatRows(list, "input '" + name + "'"));
      (*batch)[name] = std::move(t);
    }
  }
  return Status::OK();
}

BatchSource BatchSource::WithTransform(BatchTransform transform) const {
  BatchSource out = *this;
  std::function<BatchFn()> open = open_;
  out.open_ = [open, transform]() -> BatchFn {
    BatchFn next = open();
    return [next, transform](TensorMap* batch) -> StatusOr<bool> {
      SPARQ_ASSIGN_OR_RETURN(bool more, next(batch));
      if (more) SPARQ_RETURN_IF_ERROR(transform(batch));
      return more;
    };
  };
  return out;
}

int64_t FixedBatchSize(const Graph& graph) {
  for (const ValueInfo& v : graph.inputs)
    if (v.has_shape && !v.dims.empty() && v.dims[0].known()) return v.dims[0].value;
  return 0;
}

int64_t BatchSizeFor(const Graph& graph, int64_t requested) {
  const int64_t fixed = FixedBatchSize(graph);
  if (fixed > 0) return fixed;
  return requested > 0 ? requested : 1;
}

bool Preprocess::IsIdentity() const {
  return scale == 1.0 && mean.empty() && stddev.empty() && layout == DataLayout::kNCHW;
}

namespace {

// Applies `p` to one batch of one input (float32 out).
StatusOr<Tensor> ApplyPreprocess(const Tensor& raw, const Preprocess& p, const std::string& what) {
  Tensor x = raw.ToFloat32().Clone();
  float* v = x.data<float>();
  for (int64_t i = 0; i < x.numel(); ++i) v[i] = static_cast<float>(v[i] * p.scale);
  if (p.layout == DataLayout::kNHWC) {
    if (x.rank() != 4) {
      return Status::InvalidArgument(what + ": preprocess layout NHWC needs a rank-4 array, got " +
                                     ShapeToString(x.shape()));
    }
    const int64_t n = x.dim(0), h = x.dim(1), w = x.dim(2), c = x.dim(3);
    Tensor t(DataType::kFloat32, {n, c, h, w});
    float* o = t.data<float>();
    for (int64_t a = 0; a < n; ++a)
      for (int64_t y = 0; y < h; ++y)
        for (int64_t z = 0; z < w; ++z)
          for (int64_t k = 0; k < c; ++k) o[((a * c + k) * h + y) * w + z] = v[((a * h + y) * w + z) * c + k];
    x = t;
    v = x.data<float>();
  }
  if (!p.mean.empty() || !p.stddev.empty()) {
    if (x.rank() < 2) return Status::InvalidArgument(what + ": preprocess mean/std need a channel axis (axis 1)");
    const int64_t c = x.dim(1);
    for (const auto* list : {&p.mean, &p.stddev}) {
      if (!list->empty() && static_cast<int64_t>(list->size()) != c && list->size() != 1) {
        return Status::InvalidArgument(what + ": preprocess lists " + std::to_string(list->size()) +
                                       " values but the data has " + std::to_string(c) + " channels");
      }
    }
    int64_t inner = 1;
    for (size_t d = 2; d < x.rank(); ++d) inner *= x.dim(d);
    for (int64_t i = 0; i < x.numel(); ++i) {
      const size_t k = static_cast<size_t>((i / inner) % c);
      const double m = p.mean.empty() ? 0.0 : p.mean[p.mean.size() == 1 ? 0 : k];
      const double s = p.stddev.empty() ? 1.0 : p.stddev[p.stddev.size() == 1 ? 0 : k];
      v[i] = static_cast<float>((v[i] - m) / s);
    }
  }
  return x;
}

}  // namespace

BatchTransform PreprocessTransform(const Preprocess& p, const std::string& input) {
  return [p, input](TensorMap* batch) -> Status {
    auto it = batch->find(input);
    if (it == batch->end()) return Status::NotFound("preprocess: the data has no array for input '" + input + "'");
    SPARQ_ASSIGN_OR_RETURN(it->second, ApplyPreprocess(it->second, p, "input '" + input + "'"));
    return Status::OK();
  };
}

StatusOr<BatchSource> OpenDataset(const std::string& path, const Graph& graph, const DatasetOptions& options) {
  if (options.batch_size < 0) {
    return Status::InvalidArgument("batch size must be >= 1, got " + std::to_string(options.batch_size));
  }
  if (options.limit < 0) return Status::InvalidArgument("limit must be >= 0, got " + std::to_string(options.limit));
  const int64_t batch_size = BatchSizeFor(graph, options.batch_size);
  const int64_t limit = options.limit;
  std::vector<ValueInfo> inputs = graph.inputs, optional = graph.initializer_inputs;
  const BatchTransform transform = options.transform;
  if (transform) {
    // The files hold the data before the transform: check type and dims after it.
    for (auto* list : {&inputs, &optional})
      for (ValueInfo& v : *list) v.dtype = DataType::kUndefined, v.has_shape = false;
  }
  SPARQ_ASSIGN_OR_RETURN(std::unique_ptr<Dataset> first, Dataset::Open(path, inputs, optional, limit));
  const int64_t available = first->total();
  // The first pass reads the dataset opened here; later passes open it again.
  auto opened = std::make_shared<std::shared_ptr<Dataset>>(std::move(first));
  std::vector<ValueInfo> fed = graph.inputs;
  fed.insert(fed.end(), graph.initializer_inputs.begin(), graph.initializer_inputs.end());
  BatchSource source = [=]() -> BatchFn {
    std::shared_ptr<Dataset> ds = std::move(*opened);
    opened->reset();
    auto seen = std::make_shared<int64_t>(0);
    return [=](TensorMap* batch) mutable -> StatusOr<bool> {
      if (!ds) {
        SPARQ_ASSIGN_OR_RETURN(std::unique_ptr<Dataset> again, Dataset::Open(path, inputs, optional, limit));
        ds = std::move(again);
      }
      if (limit > 0 && *seen >= limit) return false;
      const int64_t want = limit > 0 ? std::min(batch_size, limit - *seen) : batch_size;
      int64_t rows = 0;
      SPARQ_RETURN_IF_ERROR(ds->Next(want, batch, &rows));
      if (rows > 0 && transform) {
        const std::string samples = "samples [" + std::to_string(*seen) + ", " + std::to_string(*seen + rows) + ")";
        Status st = transform(batch);
        if (!st.ok()) return st.WithContext(path + ", " + samples);
        for (const auto& entry : *batch) {  // (no structured binding: C++17 lambdas cannot capture one)
          const std::string& name = entry.first;
          const Tensor& t = entry.second;
          auto input = std::find_if(fed.begin(), fed.end(), [&](const ValueInfo& v) { return v.name == name; });
          if (input == fed.end()) continue;
          SPARQ_RETURN_IF_ERROR(CheckInputArray(t.dtype(), t.shape(), *input,
                                                path + ": input '" + name + "' after preprocessing (" + samples + ")"));
        }
      }
      *seen += rows;
      return rows > 0;
    };
  };
  const int64_t samples = available < 0 ? -1 : limit > 0 ? std::min(limit, available) : available;
  source.set_name(path).set_size(batch_size, samples, available);
  return source;
}

}  // namespace sparq
