#include "pipeline/data_prep.h"

#include <filesystem>
#include <random>

#include "sparq/npy.h"

namespace sparq {
namespace fs = std::filesystem;

TempFolder::TempFolder(const std::string& parent) {
  std::random_device rd;
  root_ = (fs::path(parent) / (".sparq-tmp-" + std::to_string(rd()))).string();
  std::error_code ec;
  fs::create_directories(root_, ec);
}

TempFolder::~TempFolder() {
  std::error_code ec;
  fs::remove_all(root_, ec);
}

std::string TempFolder::path(const std::string& name) const { return (fs::path(root_) / name).string(); }

namespace {

bool IsIdentity(const RecipeData::Preprocess& p) {
  return p.scale == 1.0 && p.mean.empty() && p.stddev.empty() && p.layout == RecipeData::Layout::kNCHW;
}

StatusOr<Tensor> Preprocess(const Tensor& raw, const RecipeData::Preprocess& p, const std::string& what) {
  Tensor x = raw.ToFloat32().Clone();
  float* v = x.data<float>();
  for (int64_t i = 0; i < x.numel(); ++i) v[i] = static_cast<float>(v[i] * p.scale);
  if (p.layout == RecipeData::Layout::kNHWC) {
    if (x.rank() != 4) return Status::InvalidArgument(what + ": layout NHWC needs a rank-4 array, got " + ShapeToString(x.shape()));
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
    if (x.rank() < 2) return Status::InvalidArgument(what + ": mean/std need a channel axis (axis 1)");
    const int64_t c = x.dim(1);
    for (const auto* list : {&p.mean, &p.stddev}) {
      if (!list->empty() && static_cast<int64_t>(list->size()) != c && list->size() != 1) {
        return Status::InvalidArgument(what + ": data.preprocess lists " + std::to_string(list->size()) +
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

StatusOr<std::string> PrepareData(const std::string& path, const RecipeData& data, const Model& model,
                                  const std::string& scratch) {
  if (IsIdentity(data.preprocess)) return path;
  if (fs::is_directory(path)) {
    return Status::NotSupported(path + ": data.preprocess works on a .npz or .npy file, not a folder");
  }
  std::string input = data.input;
  if (input.empty()) {
    if (model.graph.inputs.size() != 1) {
      return Status::InvalidArgument("data.input: the model has " + std::to_string(model.graph.inputs.size()) +
                                     " inputs; name the one the data feeds");
    }
    input = model.graph.inputs[0].name;
  }
  SPARQ_ASSIGN_OR_RETURN(NamedTensors arrays, ReadArrays(path));
  bool found = false;
  for (auto& [name, t] : arrays) {
    if (name != input && !(arrays.size() == 1)) continue;
    SPARQ_ASSIGN_OR_RETURN(t, Preprocess(t, data.preprocess, path + " array '" + name + "'"));
    name = input;
    found = true;
  }
  if (!found) return Status::NotFound(path + ": no array named '" + input + "'");
  SPARQ_RETURN_IF_ERROR(WriteNpz(scratch, arrays));
  return scratch;
}

double WeightSparsity(const Model& model) {
  int64_t zeros = 0, total = 0;
  for (const auto& [name, t] : model.graph.initializers) {
    if (t.numel() < 16 || name.find("zero_point") != std::string::npos) continue;
    for (int64_t i = 0; i < t.numel(); ++i) zeros += t.GetAsDouble(i) == 0.0;
    total += t.numel();
  }
  return total > 0 ? static_cast<double>(zeros) / static_cast<double>(total) : 0.0;
}

}  // namespace sparq
