#include "evaluate/dataset.h"

#include "formats/text_table.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <limits>
#include <memory>

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

// "[S, 2, batch, 128]" style: the input's dims with `axis` removed, after S.
std::string FileShapeFor(const ValueInfo& input, int axis) {
  std::string out = "[S";
  for (size_t d = 0; d < input.dims.size(); ++d) {
    if (static_cast<int>(d) == axis) continue;
    const Dim& dim = input.dims[d];
    out += ", " + (dim.known() ? std::to_string(dim.value) : dim.param.empty() ? std::string("?") : dim.param);
  }
  return out + "]";
}

// Bytes of one element run beyond `axis` and the count of runs before it.
void AxisStrides(const Tensor& t, int axis, int64_t* outer, size_t* inner_bytes) {
  *outer = 1;
  int64_t inner = 1;
  for (int d = 0; d < axis; ++d) *outer *= t.dim(static_cast<size_t>(d));
  for (size_t d = static_cast<size_t>(axis) + 1; d < t.rank(); ++d) inner *= t.dim(d);
  *inner_bytes = static_cast<size_t>(inner) * DataTypeSize(t.dtype());
}

}  // namespace

Tensor SliceAxis(const Tensor& t, int axis, int64_t begin, int64_t count) {
  if (axis == 0) return SliceRows(t, begin, count);
  Shape shape = t.shape();
  const int64_t n = shape[static_cast<size_t>(axis)];
  shape[static_cast<size_t>(axis)] = count;
  Tensor out(t.dtype(), shape);
  if (out.nbytes() == 0) return out;
  int64_t outer = 1;
  size_t inner = 0;
  AxisStrides(t, axis, &outer, &inner);
  const auto* src = static_cast<const uint8_t*>(t.raw_data());
  auto* dst = static_cast<uint8_t*>(out.raw_data());
  for (int64_t o = 0; o < outer; ++o) {
    std::memcpy(dst + static_cast<size_t>(o * count) * inner, src + static_cast<size_t>(o * n + begin) * inner,
                static_cast<size_t>(count) * inner);
  }
  return out;
}

StatusOr<Tensor> ConcatAxis(const std::vector<Tensor>& parts, int axis, const std::string& what) {
  if (axis == 0) return ConcatRows(parts, what);
  if (parts.empty()) return Status::InvalidArgument(what + ": nothing to concatenate");
  const Tensor& first = parts[0];
  const auto a = static_cast<size_t>(axis);
  int64_t total = 0;
  for (const Tensor& p : parts) {
    Shape s = p.shape(), f = first.shape();
    if (p.rank() <= a || p.dtype() != first.dtype() || (s[a] = 0, f[a] = 0, s != f)) {
      return Status::InvalidArgument(what + ": cannot concatenate " + DataTypeName(p.dtype()) +
                                     ShapeToString(p.shape()) + " after " + DataTypeName(first.dtype()) +
                                     ShapeToString(first.shape()) + " along axis " + std::to_string(axis));
    }
    total += p.dim(a);
  }
  Shape shape = first.shape();
  shape[a] = total;
  Tensor out(first.dtype(), shape);
  if (out.nbytes() == 0) return out;
  int64_t outer = 1;
  size_t inner = 0;
  AxisStrides(first, axis, &outer, &inner);
  auto* dst = static_cast<uint8_t*>(out.raw_data());
  for (int64_t o = 0; o < outer; ++o) {
    for (const Tensor& p : parts) {
      const size_t run = static_cast<size_t>(p.dim(a)) * inner;
      std::memcpy(dst, static_cast<const uint8_t*>(p.raw_data()) + static_cast<size_t>(o) * run, run);
      dst += run;
    }
  }
  return out;
}

Tensor MoveFirstAxisTo(const Tensor& t, int axis) {
  if (axis <= 0) return t;
  const auto a = static_cast<size_t>(axis);
  const int64_t samples = t.dim(0);
  Shape shape;
  for (size_t d = 1; d <= a; ++d) shape.push_back(t.dim(d));
  shape.push_back(samples);
  for (size_t d = a + 1; d < t.rank(); ++d) shape.push_back(t.dim(d));
  Tensor out(t.dtype(), shape);
  if (out.nbytes() == 0) return out;
  // in [S, O, I] -> out [O, S, I], I a run of bytes.
  int64_t outer = 1;
  for (size_t d = 1; d <= a; ++d) outer *= t.dim(d);
  const size_t inner = t.nbytes() / static_cast<size_t>(samples * outer);
  const auto* src = static_cast<const uint8_t*>(t.raw_data());
  auto* dst = static_cast<uint8_t*>(out.raw_data());
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t s = 0; s < samples; ++s)
      std::memcpy(dst + static_cast<size_t>(o * samples + s) * inner, src + static_cast<size_t>(s * outer + o) * inner,
                  inner);
  return out;
}

Tensor MoveAxisToFirst(const Tensor& t, int axis) {
  if (axis <= 0) return t;
  const auto a = static_cast<size_t>(axis);
  const int64_t samples = t.dim(a);
  Shape shape{samples};
  int64_t outer = 1;
  for (size_t d = 0; d < t.rank(); ++d) {
    if (d == a) continue;
    shape.push_back(t.dim(d));
    if (d < a) outer *= t.dim(d);
  }
  Tensor out(t.dtype(), shape);
  if (out.nbytes() == 0) return out;
  // in [O, S, I] -> out [S, O, I], I a run of bytes.
  const size_t inner = t.nbytes() / static_cast<size_t>(samples * outer);
  const auto* src = static_cast<const uint8_t*>(t.raw_data());
  auto* dst = static_cast<uint8_t*>(out.raw_data());
  for (int64_t s = 0; s < samples; ++s)
    for (int64_t o = 0; o < outer; ++o)
      std::memcpy(dst + static_cast<size_t>(s * outer + o) * inner, src + static_cast<size_t>(o * samples + s) * inner,
                  inner);
  return out;
}

namespace {
int AxisIn(const std::map<std::string, int>& axes, const std::string& name) {
  auto it = axes.find(name);
  return it == axes.end() ? 0 : it->second;
}
}  // namespace

TensorMap SliceSamples(const TensorMap& batch, const std::map<std::string, int>& axes, int64_t begin,
                       int64_t count) {
  TensorMap out;
  for (const auto& [name, t] : batch) {
    const int axis = AxisIn(axes, name);
    out[name] = axis < 0 || t.rank() <= static_cast<size_t>(axis) || (begin == 0 && t.dim(static_cast<size_t>(axis)) <= count)
                    ? t
                    : SliceAxis(t, axis, begin, std::min(count, t.dim(static_cast<size_t>(axis)) - begin));
  }
  return out;
}

StatusOr<TensorMap> PadSamples(const TensorMap& feed, const std::map<std::string, int>& axes, int64_t rows,
                               int64_t batch) {
  TensorMap padded;
  for (const auto& [name, t] : feed) {
    const int axis = AxisIn(axes, name);
    if (axis < 0) {
      padded[name] = t;
      continue;
    }
    std::vector<Tensor> parts{t};
    if (t.rank() > static_cast<size_t>(axis))
      for (int64_t r = rows; r < batch; ++r) parts.push_back(SliceAxis(t, axis, rows - 1, 1));
    SPARQ_ASSIGN_OR_RETURN(padded[name], ConcatAxis(parts, axis, "input '" + name + "'"));
  }
  return padded;
}

int BatchSource::SampleAxisOf(const std::string& input) const { return AxisIn(sample_axes_, input); }

int64_t BatchSource::SamplesIn(const TensorMap& batch) const {
  for (const auto& [name, t] : batch) {
    const int axis = SampleAxisOf(name);
    if (axis >= 0 && t.rank() > static_cast<size_t>(axis)) return t.dim(static_cast<size_t>(axis));
  }
  return 0;
}

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

Status CheckInputArray(DataType dtype, const Shape& shape, const ValueInfo& input, const std::string& what,
                       int sample_axis) {
  if (sample_axis >= 0 && shape.empty()) {
    return Status::InvalidArgument(what + " is a scalar; samples must lie along its first axis (model input '" +
                                   input.name + "' expects " + input.Describe() + ")");
  }
  if (input.dtype != DataType::kUndefined && dtype != input.dtype) {
    return Status::InvalidArgument(what + " has type " + DataTypeName(dtype) + ", model input '" + input.name +
                                   "' expects " + input.Describe() + " (convert the data with .astype)");
  }
  if (!input.has_shape) return Status::OK();
  if (sample_axis < 0) {
    bool ok = input.dims.size() == shape.size();
    for (size_t d = 0; ok && d < shape.size(); ++d) ok = input.dims[d].known() && input.dims[d].value == shape[d];
    if (!ok) {
      return Status::InvalidArgument(what + " has shape " + ShapeToString(shape) + ", model input '" + input.name +
                                     "' expects " + input.Describe() +
                                     ": the input has no sample axis, so the array must hold exactly the one value "
                                     "fed to every batch (or pin it with data.constants / --constant)");
    }
    return Status::OK();
  }
  // The file's dims after the first are the input's dims beside its sample axis.
  bool ok = input.dims.size() == shape.size() && static_cast<size_t>(sample_axis) < input.dims.size();
  for (size_t d = 0, f = 1; ok && d < input.dims.size(); ++d) {
    if (static_cast<int>(d) == sample_axis) continue;
    if (input.dims[d].known() && input.dims[d].value != shape[f]) ok = false;
    ++f;
  }
  if (!ok) {
    std::string where = sample_axis == 0 ? "samples along the first axis"
                                         : "samples along the file's first axis go to axis " +
                                               std::to_string(sample_axis) + " of the input, so the file needs " +
                                               FileShapeFor(input, sample_axis);
    return Status::InvalidArgument(what + " has shape " + ShapeToString(shape) + ", model input '" + input.name +
                                   "' expects " + input.Describe() + " (" + where + ")");
  }
  return Status::OK();
}

int Dataset::AxisOf(const std::string& input) const { return AxisIn(axes_, input); }

StatusOr<std::unique_ptr<Dataset>> Dataset::Open(const std::string& path, std::vector<ValueInfo> inputs,
                                                 std::vector<ValueInfo> optional, int64_t rows_used,
                                                 std::map<std::string, int> axes, std::set<std::string> pinned) {
  std::unique_ptr<Dataset> ds(new Dataset());
  ds->axes_ = std::move(axes);
  ds->pinned_ = std::move(pinned);
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
  if (inputs_.size() == 1 && arrays.size() == 1 && !pinned_.count(inputs_[0].name)) {
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
      if (pinned_.count(name)) {
        return Status::InvalidArgument(file + ": array '" + name + "' feeds input '" + name +
                                       "', which is pinned to a constant (data.constants / --constant); "
                                       "drop one of the two");
      }
      fed.push_back({input, name, &source});
    }
    for (const ValueInfo& input : inputs_) {
      if (pinned_.count(input.name)) continue;
      bool found = std::any_of(fed.begin(), fed.end(), [&](const Fed& f) { return f.input == &input; });
      if (!found) {
        std::string have;
        for (const auto& kv : arrays) have += (have.empty() ? "" : ", ") + kv.first;
        return Status::InvalidArgument(file + ": missing input '" + input.name + "' (" + input.Describe() +
                                       "); the file has: " + (have.empty() ? "no arrays" : have));
      }
    }
  }

  // The first array with a sample axis counts the file's samples.
  const Fed* counted = nullptr;
  for (const Fed& f : fed)
    if (counted == nullptr && AxisOf(f.input->name) >= 0) counted = &f;
  if (counted == nullptr) {
    return Status::InvalidArgument(file + ": no array has a sample axis (each input it feeds takes one value for "
                                   "every batch); the data must feed at least one input with samples");
  }
  for (const Fed& f : fed) {
    const Source& s = *f.source;
    const int axis = AxisOf(f.input->name);
    SPARQ_RETURN_IF_ERROR(CheckInputArray(s.dtype(), s.shape(), *f.input, s.what, axis));
    if (axis < 0) {
      // One value for every batch: read whole now, the same in every file.
      Source whole = s;
      if (!whole.whole.defined()) {
        NpyArrayRef flat = s.on_disk;
        const int64_t n = NumElements(s.shape());
        flat.header.shape = {n};
        SPARQ_ASSIGN_OR_RETURN(Tensor t, n > 0 ? ReadArrayRows(flat, 0, n) : StatusOr<Tensor>(Tensor(s.dtype(), {0})));
        SPARQ_ASSIGN_OR_RETURN(whole.whole, t.Reshaped(s.shape()));
      }
      SPARQ_RETURN_IF_ERROR(CheckFinite(whole.whole, s.what));
      auto first = constants_.find(f.input->name);
      if (index != 0 && first != constants_.end() && !first->second.Equals(whole.whole)) {
        return Status::InvalidArgument(s.what + " differs from " + files_[0] + "'s: input '" + f.input->name +
                                       "' has no sample axis, so every file must hold the same value");
      }
      constants_[f.input->name] = whole.whole;
      continue;
    }
    auto first = first_.find(f.input->name);
    if (first != first_.end() && TrailingDims(first->second) != TrailingDims(s.shape())) {
      return Status::InvalidArgument(s.what + " has shape " + ShapeToString(s.shape()) + " but " + files_[0] +
                                     " has " + ShapeToString(first->second) +
                                     " (all files must agree beyond the first axis)");
    }
    if (s.shape()[0] != counted->source->shape()[0]) {
      return Status::InvalidArgument(file + ": arrays hold different numbers of samples ('" + counted->array + "' " +
                                     std::to_string(counted->source->shape()[0]) + ", '" + f.array + "' " +
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
    if (AxisOf(f.input->name) < 0) continue;
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
  current_rows_ = counted->source->shape()[0];
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
  if (*rows > 0)
    for (const auto& [name, t] : constants_) (*batch)[name] = t;
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

StatusOr<BatchSource> ShardOf(const BatchSource& data, int shard, int shards) {
  if (shards < 1 || shard < 0 || shard >= shards) {
    return Status::InvalidArgument("shard " + std::to_string(shard) + "/" + std::to_string(shards) +
                                   ": need 0 <= shard < shards");
  }
  const int64_t size = data.batch_size(), samples = data.samples();
  if (size < 1 || samples < 0) {
    return Status::InvalidArgument("data " + data.name() + ": sharding needs the sample count and batch size in advance");
  }
  const int64_t batches = (samples + size - 1) / size;
  const int64_t begin = batches * shard / shards, end = batches * (shard + 1) / shards;
  BatchSource out([data, begin, end]() -> BatchFn {
    auto index = std::make_shared<int64_t>(0);
    BatchFn next = data();
    return [next, index, begin, end](TensorMap* batch) -> StatusOr<bool> {
      for (; *index < begin; ++*index) {  // batches of earlier shards: read, not run
        TensorMap skipped;
        SPARQ_ASSIGN_OR_RETURN(bool more, next(&skipped));
        if (!more) return false;
      }
      if (*index >= end) return false;
      SPARQ_ASSIGN_OR_RETURN(bool more, next(batch));
      if (more) ++*index;
      return more;
    };
  });
  const int64_t shard_samples = std::max<int64_t>(0, std::min(end * size, samples) - begin * size);
  out.set_name(data.name()).set_sample_axes(data.sample_axes()).set_size(size, shard_samples, data.available());
  return out;
}

StatusOr<std::pair<int, int>> ParseShard(const std::string& spec) {
  const size_t slash = spec.find('/');
  auto whole = [](const std::string& s, int* v) {
    if (s.empty() || s.size() > 9 || s.find_first_not_of("0123456789") != std::string::npos) return false;
    *v = std::stoi(s);
    return true;
  };
  int i = 0, n = 0;
  if (slash == std::string::npos || !whole(spec.substr(0, slash), &i) || !whole(spec.substr(slash + 1), &n)) {
    return Status::InvalidArgument("shard '" + spec + "': expected i/n, e.g. 0/4");
  }
  if (n < 1 || i >= n) return Status::InvalidArgument("shard '" + spec + "': need 0 <= i < n");
  return std::make_pair(i, n);
}

int OutputSampleAxis(const Graph& graph, const ValueInfo& output) {
  // The output's axis as SampleAxes would place it were it an input.
  Graph probe;
  probe.inputs = graph.inputs;
  ValueInfo as_input = output;
  as_input.name = "\x01output";  // cannot clash with an input's name
  probe.inputs.push_back(as_input);
  const int axis = SampleAxes(probe)[as_input.name];
  return axis < 0 ? 0 : axis;
}

std::map<std::string, int> SampleAxes(const Graph& graph, const std::set<std::string>& pinned) {
  std::vector<const ValueInfo*> all;
  for (const auto* list : {&graph.inputs, &graph.initializer_inputs})
    for (const ValueInfo& v : *list) all.push_back(&v);
  // A model has a dynamic batch when some input's dim 0 is dynamic; the first
  // such dim with a symbolic name names the batch.
  bool dynamic_batch = false;
  std::string batch_name;
  for (const ValueInfo* v : all) {
    if (!v->has_shape || v->dims.empty() || v->dims[0].known() || pinned.count(v->name)) continue;
    dynamic_batch = true;
    if (batch_name.empty()) batch_name = v->dims[0].param;
  }
  // A fixed batch: the first graph input's dim 0 (of those with one).
  int64_t fixed_batch = -1;
  for (const ValueInfo& v : graph.inputs) {
    if (dynamic_batch || pinned.count(v.name) || !v.has_shape || v.dims.empty()) continue;
    fixed_batch = v.dims[0].value;
    break;
  }
  std::map<std::string, int> axes;
  for (const ValueInfo* v : all) {
    int axis = 0;
    if (pinned.count(v->name)) {
      axis = kNoSampleAxis;
    } else if (!v->has_shape) {
      axis = 0;
    } else if (v->dims.empty()) {
      axis = kNoSampleAxis;
    } else if (!dynamic_batch && fixed_batch >= 0 && v->dims[0].value != fixed_batch) {
      axis = kNoSampleAxis;  // a fixed batch that this input's dim 0 is not: its array holds its whole shape
    } else if (!v->dims[0].known() || !dynamic_batch) {
      axis = 0;  // samples first; or a fixed batch: every input's dim 0, as always
    } else {
      int named = -1, first = -1;
      for (size_t d = 0; d < v->dims.size(); ++d) {
        if (v->dims[d].known()) continue;
        if (first < 0) first = static_cast<int>(d);
        if (named < 0 && !batch_name.empty() && v->dims[d].param == batch_name) named = static_cast<int>(d);
      }
      axis = named >= 0 ? named : first >= 0 ? first : kNoSampleAxis;
    }
    axes[v->name] = axis;
  }
  return axes;
}

int64_t FixedBatchSizeOf(const Graph& graph, const std::map<std::string, int>& axes) {
  for (const ValueInfo& v : graph.inputs) {
    const int axis = AxisIn(axes, v.name);
    if (axis < 0 || !v.has_shape || v.dims.size() <= static_cast<size_t>(axis)) continue;
    if (v.dims[static_cast<size_t>(axis)].known()) return v.dims[static_cast<size_t>(axis)].value;
  }
  return 0;
}

int64_t FixedBatchSize(const Graph& graph) { return FixedBatchSizeOf(graph, SampleAxes(graph)); }

int64_t BatchSizeFor(const Graph& graph, int64_t requested) {
  const int64_t fixed = FixedBatchSize(graph);
  if (fixed > 0) return fixed;
  return requested > 0 ? requested : 1;
}

StatusOr<Tensor> ConstantInput(const ValueInfo& input, const std::vector<double>& values) {
  const std::string what = "constant for input '" + input.name + "'";
  if (values.empty()) return Status::InvalidArgument(what + ": no value given");
  Shape shape;
  if (input.has_shape) {
    for (const Dim& d : input.dims) {
      if (!d.known()) {
        return Status::InvalidArgument(what + ": the input's shape " + input.Describe() +
                                       " has a dynamic dim; only an input of fixed shape can be pinned");
      }
      shape.push_back(d.value);
    }
  } else if (values.size() > 1) {
    shape = {static_cast<int64_t>(values.size())};
  }
  if (NumElements(shape) != static_cast<int64_t>(values.size())) {
    return Status::InvalidArgument(what + ": " + std::to_string(values.size()) +
                                   (values.size() == 1 ? " value" : " values") + " given, the input " +
                                   input.Describe() + " holds " + std::to_string(NumElements(shape)));
  }
  const DataType type = input.dtype == DataType::kUndefined ? DataType::kFloat32 : input.dtype;
  const DataTypeInfo* info = GetDataTypeInfo(type);
  if (info == nullptr) {
    return Status::InvalidArgument(what + ": the input's type " + DataTypeName(type) + " cannot hold a number");
  }
  for (size_t i = 0; i < values.size(); ++i) {
    const double v = values[i];
    const std::string at = values.size() == 1 ? "" : " (value " + std::to_string(i) + ")";
    if (!std::isfinite(v)) return Status::InvalidArgument(what + ": " + FormatDouble("%g", v) + " is not finite" + at);
    if (type == DataType::kBool && v != 0.0 && v != 1.0) {
      return Status::InvalidArgument(what + ": " + FormatDouble("%g", v) + " is not 0 or 1 (the input is bool)" + at);
    }
    if (!info->is_float && std::trunc(v) != v) {
      return Status::InvalidArgument(what + ": " + FormatDouble("%g", v) + " is not a whole number (the input is " +
                                     DataTypeName(type) + ")" + at);
    }
  }
  return Tensor::FromVector<double>(shape, values).CastTo(type);
}

StatusOr<std::pair<std::string, std::vector<double>>> ParseConstant(const std::string& spec) {
  const size_t eq = spec.find('=');
  if (eq == std::string::npos) {
    return Status::InvalidArgument("constant '" + spec + "': expected name=value or name=v1,v2,...");
  }
  std::pair<std::string, std::vector<double>> out;
  out.first = spec.substr(0, eq);
  if (out.first.empty()) return Status::InvalidArgument("constant '" + spec + "': no input name before '='");
  const std::string list = spec.substr(eq + 1);
  size_t start = 0;
  while (true) {
    const size_t comma = list.find(',', start);
    const std::string item = list.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    const char* begin = item.c_str();
    char* end = nullptr;
    const double v = item.empty() ? 0.0 : std::strtod(begin, &end);
    if (item.empty() || end == begin || *end != '\0') {
      return Status::InvalidArgument("constant for input '" + out.first + "': '" + item + "' is not a number");
    }
    out.second.push_back(v);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
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
  std::vector<ValueInfo> fed = graph.inputs;
  fed.insert(fed.end(), graph.initializer_inputs.begin(), graph.initializer_inputs.end());
  // Pinned inputs: one tensor each, fed to every batch.
  std::set<std::string> pinned;
  TensorMap constants;
  for (const auto& [name, values] : options.constants) {
    auto input = std::find_if(fed.begin(), fed.end(), [&](const ValueInfo& v) { return v.name == name; });
    if (input == fed.end()) {
      return Status::InvalidArgument("constant for input '" + name + "': the model has no such input (inputs: " +
                                     Names(fed) + ")");
    }
    SPARQ_ASSIGN_OR_RETURN(constants[name], ConstantInput(*input, values));
    pinned.insert(name);
  }
  const std::map<std::string, int> axes = SampleAxes(graph, pinned);
  if (std::none_of(graph.inputs.begin(), graph.inputs.end(),
                   [&](const ValueInfo& v) { return AxisIn(axes, v.name) >= 0; })) {
    return Status::InvalidArgument("no input of the model has a sample (batch) axis (inputs: " + Names(graph.inputs) +
                                   "): there is nothing to read samples into from " + path);
  }
  const int64_t fixed = FixedBatchSizeOf(graph, axes);
  if (fixed > 0) {
    // A fixed batch: every input with samples on axis 0 must agree with it.
    for (const ValueInfo& v : graph.inputs) {
      const int axis = AxisIn(axes, v.name);
      if (axis != 0 || !v.has_shape || v.dims.empty() || !v.dims[0].known() || v.dims[0].value == fixed) continue;
      return Status::InvalidArgument("model input '" + v.name + "' (" + v.Describe() + ") has a first dim of " +
                                     std::to_string(v.dims[0].value) + " but the model's batch is fixed at " +
                                     std::to_string(fixed) + " by another input; if it takes one value for every "
                                     "batch, pin it with data.constants / --constant");
    }
  }
  const int64_t batch_size = fixed > 0 ? fixed : options.batch_size > 0 ? options.batch_size : 1;
  const int64_t limit = options.limit;
  std::vector<ValueInfo> inputs = graph.inputs, optional = graph.initializer_inputs;
  const BatchTransform transform = options.transform;
  if (transform) {
    // The files hold the data before the transform: check type and dims after it.
    for (auto* list : {&inputs, &optional})
      for (ValueInfo& v : *list) v.dtype = DataType::kUndefined, v.has_shape = false;
  }
  SPARQ_ASSIGN_OR_RETURN(std::unique_ptr<Dataset> first,
                         Dataset::Open(path, inputs, optional, limit, axes, pinned));
  const int64_t available = first->total();
  // The first pass reads the dataset opened here; later passes open it again.
  auto opened = std::make_shared<std::shared_ptr<Dataset>>(std::move(first));
  BatchSource source = [=]() -> BatchFn {
    std::shared_ptr<Dataset> ds = std::move(*opened);
    opened->reset();
    auto seen = std::make_shared<int64_t>(0);
    return [=](TensorMap* batch) mutable -> StatusOr<bool> {
      if (!ds) {
        SPARQ_ASSIGN_OR_RETURN(std::unique_ptr<Dataset> again,
                               Dataset::Open(path, inputs, optional, limit, axes, pinned));
        ds = std::move(again);
      }
      if (limit > 0 && *seen >= limit) return false;
      const int64_t want = limit > 0 ? std::min(batch_size, limit - *seen) : batch_size;
      int64_t rows = 0;
      SPARQ_RETURN_IF_ERROR(ds->Next(want, batch, &rows));
      if (rows == 0) return false;
      if (transform) {
        const std::string samples = "samples [" + std::to_string(*seen) + ", " + std::to_string(*seen + rows) + ")";
        Status st = transform(batch);
        if (!st.ok()) return st.WithContext(path + ", " + samples);
        for (const auto& entry : *batch) {  // (no structured binding: C++17 lambdas cannot capture one)
          const std::string& name = entry.first;
          const Tensor& t = entry.second;
          auto input = std::find_if(fed.begin(), fed.end(), [&](const ValueInfo& v) { return v.name == name; });
          if (input == fed.end()) continue;
          SPARQ_RETURN_IF_ERROR(CheckInputArray(t.dtype(), t.shape(), *input,
                                                path + ": input '" + name + "' after preprocessing (" + samples + ")",
                                                AxisIn(axes, name)));
        }
      }
      // Samples to the input's own sample axis; pinned inputs added.
      for (auto& entry : *batch) {
        const int axis = AxisIn(axes, entry.first);
        if (axis > 0) entry.second = MoveFirstAxisTo(entry.second, axis);
      }
      for (const auto& entry : constants) (*batch)[entry.first] = entry.second;
      *seen += rows;
      return true;
    };
  };
  const int64_t samples = available < 0 ? -1 : limit > 0 ? std::min(limit, available) : available;
  source.set_name(path).set_size(batch_size, samples, available).set_sample_axes(axes);
  return source;
}

}  // namespace sparq
