// Small helpers shared by sparq's tests.
#pragma once

#include <cstdlib>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "sparq/graph.h"
#include "sparq/tensor.h"

namespace sparq {
namespace testing {

// A fresh folder under the system temp dir, removed with everything in it.
class TempDir {
 public:
  TempDir() {
    std::random_device rd;
    root_ = std::filesystem::temp_directory_path() / ("sparq-test-" + std::to_string(rd()) + std::to_string(rd()));
    std::filesystem::create_directories(root_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(root_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  std::string root() const { return root_.string(); }
  std::string path(const std::string& name) const { return (root_ / name).string(); }

 private:
  std::filesystem::path root_;
};

// A float32 graph input/output declaration; dims as {value, param}.
inline ValueInfo FloatInput(const std::string& name, std::vector<Dim> dims) {
  ValueInfo v;
  v.name = name;
  v.dtype = DataType::kFloat32;
  v.has_shape = true;
  v.dims = std::move(dims);
  return v;
}

// Random float32 values in [lo, hi] with |x| >= min_abs (no zeros), fixed seed.
inline Tensor RandomFloats(Shape shape, uint32_t seed, float lo = -1.0f, float hi = 1.0f, float min_abs = 1e-3f) {
  Tensor t(DataType::kFloat32, std::move(shape));
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  float* p = t.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i) {
    float v;
    do v = dist(gen);
    while (std::abs(v) < min_abs);
    p[i] = v;
  }
  return t;
}

}  // namespace testing
}  // namespace sparq
