// Small helpers shared by sparq's tests.
#pragma once

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <memory>
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

// A node; the default ONNX domain.
inline Node MakeNode(std::string name, std::string op, std::vector<std::string> in, std::vector<std::string> out,
                     std::vector<Attribute> attrs = {}) {
  Node n;
  n.name = std::move(name);
  n.op_type = std::move(op);
  n.inputs = std::move(in);
  n.outputs = std::move(out);
  n.attributes = std::move(attrs);
  return n;
}

// A graph attribute (the branches of If, the body of Loop / Scan).
inline Attribute GraphAttr(const std::string& name, Graph g) {
  Attribute a;
  a.name = name;
  a.kind = Attribute::Kind::kOpaque;
  a.subgraph = std::make_shared<const Graph>(std::move(g));
  return a;
}

// A value of `type` with no shape (subgraph inputs and outputs).
inline ValueInfo Typed(const std::string& name, DataType type) {
  ValueInfo v;
  v.name = name;
  v.dtype = type;
  return v;
}

// A float32 graph input/output declaration; dims as {value, param}.
inline ValueInfo FloatInput(const std::string& name, std::vector<Dim> dims) {
  ValueInfo v;
  v.name = name;
  v.dtype = DataType::kFloat32;
  v.has_shape = true;
  v.dims = std::move(dims);
  return v;
}

// 10 log10(|ref|^2 / |ref - got|^2) over float32 tensors of one size; 200 when equal.
inline double SqnrDb(const Tensor& ref, const Tensor& got) {
  double s = 0, n = 0;
  for (int64_t i = 0; i < ref.numel(); ++i) {
    const double r = ref.data<float>()[i], d = r - got.data<float>()[i];
    s += r * r;
    n += d * d;
  }
  return n == 0 ? 200.0 : 10.0 * std::log10(s / n);
}

// A tensor of `type` and `shape` whose bytes differ from their neighbours'
// (a copy kernel that moves one byte wrong shows), deterministic per `seed`.
inline Tensor DistinctBytes(DataType type, const Shape& shape, int seed) {
  Tensor t(type, shape);
  auto* p = static_cast<uint8_t*>(t.raw_data());
  for (size_t i = 0; i < t.nbytes(); ++i) p[i] = static_cast<uint8_t>(i * 7 + seed * 31 + i / 251);
  return t;
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

// A model with a scalar input and a recurrent-style state whose batch is
// its axis 1 (as Silero-VAD's sr and state):
//   x [N, 4], sr [] (float32), state [2, N, 4] -> y [N, 4], new_state [2, N, 4]
//   y = x * sr + state[0] + 10 * state[1], new_state = 10 * state
// With `unnamed_state_batch`, state's batch dim has no name ([2, ?, 4]).
inline Model SampleAxisModel(bool unnamed_state_batch = false) {
  Model m;
  m.ir_version = 8;
  m.opset_imports = {{"", 17}};
  Graph& g = m.graph;
  g.name = "sample_axis";
  const Dim n{-1, "N"};
  g.inputs.push_back(FloatInput("x", {n, {4, ""}}));
  g.inputs.push_back(FloatInput("sr", {}));
  g.inputs.push_back(FloatInput("state", {{2, ""}, unnamed_state_batch ? Dim{-1, ""} : n, {4, ""}}));
  g.outputs.push_back(FloatInput("y", {n, {4, ""}}));
  g.outputs.push_back(FloatInput("new_state", {{2, ""}, n, {4, ""}}));
  g.initializers["zero"] = Tensor::FromVector<int64_t>({1}, {0});
  g.initializers["one"] = Tensor::FromVector<int64_t>({1}, {1});
  g.initializers["two"] = Tensor::FromVector<int64_t>({1}, {2});
  g.initializers["ten"] = Tensor::Scalar<float>(10.0f);
  g.nodes.push_back({"scale", "Mul", "", {"x", "sr"}, {"xs"}, {}, ""});
  g.nodes.push_back({"s0", "Slice", "", {"state", "zero", "one", "zero"}, {"s0"}, {}, ""});
  g.nodes.push_back({"s1", "Slice", "", {"state", "one", "two", "zero"}, {"s1"}, {}, ""});
  g.nodes.push_back({"s1w", "Mul", "", {"s1", "ten"}, {"s1w"}, {}, ""});
  g.nodes.push_back({"sum", "Add", "", {"s0", "s1w"}, {"sum"}, {}, ""});
  g.nodes.push_back({"sq", "Squeeze", "", {"sum", "zero"}, {"sq"}, {}, ""});
  g.nodes.push_back({"y", "Add", "", {"xs", "sq"}, {"y"}, {}, ""});
  g.nodes.push_back({"new_state", "Mul", "", {"state", "ten"}, {"new_state"}, {}, ""});
  return m;
}

// SampleAxisModel's y for samples x [S, 4] and state rows [S, 2, 4] (samples first).
inline Tensor SampleAxisExpected(const Tensor& x, float sr, const Tensor& state_rows) {
  Tensor y(DataType::kFloat32, x.shape());
  for (int64_t s = 0; s < x.dim(0); ++s)
    for (int64_t c = 0; c < 4; ++c)
      y.data<float>()[s * 4 + c] = x.data<float>()[s * 4 + c] * sr + state_rows.data<float>()[(s * 2 + 0) * 4 + c] +
                                   10.0f * state_rows.data<float>()[(s * 2 + 1) * 4 + c];
  return y;
}

}  // namespace testing
}  // namespace sparq
