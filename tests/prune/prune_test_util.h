// Small models, data sources and metrics shared by the pruning tests.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "sparq/executor.h"
#include "sparq/prune.h"
#include "test_util.h"

namespace sparq {
namespace prune_test {

inline Attribute IntAttr(const std::string& name, int64_t v) {
  Attribute a;
  a.name = name;
  a.kind = Attribute::Kind::kInt;
  a.i = v;
  return a;
}
inline Attribute IntsAttr(const std::string& name, std::vector<int64_t> v) {
  Attribute a;
  a.name = name;
  a.kind = Attribute::Kind::kInts;
  a.ints = std::move(v);
  return a;
}

// Normal(0, stddev) float32 values, fixed seed.
inline Tensor Gaussian(Shape shape, uint32_t seed, float stddev = 1.0f) {
  Tensor t(DataType::kFloat32, std::move(shape));
  std::mt19937 gen(seed);
  std::normal_distribution<float> dist(0.0f, stddev);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = dist(gen);
  return t;
}

inline Node MakeNode(const std::string& name, const std::string& op, std::vector<std::string> in,
                     std::vector<std::string> out, std::vector<Attribute> attrs = {}) {
  Node n;
  n.name = name;
  n.op_type = op;
  n.inputs = std::move(in);
  n.outputs = std::move(out);
  n.attributes = std::move(attrs);
  return n;
}

// Adds conv `name` (cin -> cout, k x k, same padding) reading `in`, writing `out`.
inline void AddConv(Model& m, const std::string& name, const std::string& in, const std::string& out, int64_t cin,
                    int64_t cout, int64_t k, bool bias, uint32_t seed) {
  const float scale = 1.0f / std::sqrt(static_cast<float>(cin * k * k));
  m.graph.initializers[name + ".w"] = Gaussian({cout, cin, k, k}, seed, scale);
  std::vector<std::string> inputs = {in, name + ".w"};
  if (bias) {
    m.graph.initializers[name + ".b"] = Gaussian({cout}, seed + 1, 0.1f);
    inputs.push_back(name + ".b");
  }
  const int64_t p = k / 2;
  m.graph.nodes.push_back(MakeNode(name, "Conv", inputs, {out}, {IntsAttr("pads", {p, p, p, p})}));
}

inline void AddBatchNorm(Model& m, const std::string& name, const std::string& in, const std::string& out, int64_t c,
                         uint32_t seed) {
  m.graph.initializers[name + ".scale"] = testing::RandomFloats({c}, seed, 0.5f, 1.5f);
  m.graph.initializers[name + ".bias"] = testing::RandomFloats({c}, seed + 1, -0.3f, 0.3f);
  m.graph.initializers[name + ".mean"] = testing::RandomFloats({c}, seed + 2, -0.2f, 0.2f);
  m.graph.initializers[name + ".var"] = testing::RandomFloats({c}, seed + 3, 0.5f, 1.5f);
  m.graph.nodes.push_back(MakeNode(name, "BatchNormalization",
                                   {in, name + ".scale", name + ".bias", name + ".mean", name + ".var"}, {out}));
}

// x[n,3,8,8] -> conv1 -> bn1 -> relu1 ─┬─> conv2 -> bn2 -> relu2 -> conv3 -> bn3 ─> add -> relu3
//                                      └──────────────────────────────────────────┘
//   -> conv4 (1x1, 16) -> relu4 -> gap -> flatten -> fc (Gemm, transB) -> y[n,10]
// With batch_norm = false and bias = false, a zeroed channel carries exactly 0.
inline Model ResidualCnn(bool batch_norm = true, bool bias = true) {
  Model m;
  m.opset_imports = {{"", 17}};
  m.graph.inputs.push_back(testing::FloatInput("x", {{-1, "n"}, {3, ""}, {8, ""}, {8, ""}}));
  m.graph.outputs.push_back(testing::FloatInput("y", {{-1, "n"}, {10, ""}}));
  auto conv_bn = [&](const std::string& conv, const std::string& bn, const std::string& in, const std::string& out,
                     int64_t cin, int64_t cout, int64_t k, uint32_t seed) {
    if (batch_norm) {
      AddConv(m, conv, in, conv + ".out", cin, cout, k, bias, seed);
      AddBatchNorm(m, bn, conv + ".out", out, cout, seed + 10);
    } else {
      AddConv(m, conv, in, out, cin, cout, k, bias, seed);
    }
  };
  conv_bn("conv1", "bn1", "x", "b1", 3, 8, 3, 100);
  m.graph.nodes.push_back(MakeNode("relu1", "Relu", {"b1"}, {"r1"}));
  conv_bn("conv2", "bn2", "r1", "b2", 8, 8, 3, 200);
  m.graph.nodes.push_back(MakeNode("relu2", "Relu", {"b2"}, {"r2"}));
  conv_bn("conv3", "bn3", "r2", "b3", 8, 8, 3, 300);
  m.graph.nodes.push_back(MakeNode("add", "Add", {"b3", "r1"}, {"s"}));
  m.graph.nodes.push_back(MakeNode("relu3", "Relu", {"s"}, {"r3"}));
  AddConv(m, "conv4", "r3", "c4", 8, 16, 1, bias, 400);
  m.graph.nodes.push_back(MakeNode("relu4", "Relu", {"c4"}, {"r4"}));
  m.graph.nodes.push_back(MakeNode("gap", "GlobalAveragePool", {"r4"}, {"g"}));
  m.graph.nodes.push_back(MakeNode("flatten", "Flatten", {"g"}, {"f"}, {IntAttr("axis", 1)}));
  m.graph.initializers["fc.w"] = Gaussian({10, 16}, 500, 0.25f);
  m.graph.initializers["fc.b"] = Gaussian({10}, 501, 0.1f);
  m.graph.nodes.push_back(MakeNode("fc", "Gemm", {"f", "fc.w", "fc.b"}, {"y"}, {IntAttr("transB", 1)}));
  return m;
}

// A source of `count` batches of `batch` random images [batch, c, h, w] for input "x".
inline BatchSource ImageBatches(int count, int64_t batch, Shape sample_shape = {3, 8, 8}, uint32_t seed = 7) {
  return [=]() -> BatchFn {
    auto next = std::make_shared<int>(0);
    return [=](TensorMap* b) -> StatusOr<bool> {
      if (*next == count) return false;
      Shape shape = {batch};
      shape.insert(shape.end(), sample_shape.begin(), sample_shape.end());
      (*b)["x"] = Gaussian(shape, seed + static_cast<uint32_t>(*next), 1.0f);
      ++*next;
      return true;
    };
  };
}

// Runs `m` on {"x": x} and returns output "y".
inline Tensor RunModel(const Model& m, const Tensor& x) {
  auto exec = Executor::Create(m, ExecutorOptions{1});
  EXPECT_TRUE(exec.ok()) << exec.status().ToString();
  if (!exec.ok()) return Tensor();
  TensorMap out;
  Status st = (*exec)->Run({{"x", x}}, &out);
  EXPECT_TRUE(st.ok()) << st.ToString();
  return out["y"];
}

// ||a - b||^2 / ||b||^2
inline double RelativeError(const Tensor& a, const Tensor& b) {
  double num = 0.0, den = 0.0;
  for (int64_t i = 0; i < b.numel(); ++i) {
    const double d = a.data<float>()[i] - b.data<float>()[i];
    num += d * d;
    den += double(b.data<float>()[i]) * b.data<float>()[i];
  }
  return den > 0 ? num / den : num;
}

// Fidelity metric: 100 * (1 - relative output error against `reference` on
// input x); 100 for the reference itself.
inline PruneMetricFn FidelityMetric(const Model& reference, const Tensor& x) {
  Tensor ref = RunModel(reference, x);
  return [ref, x](const Model& m) -> StatusOr<PruneEvaluation> {
    PruneEvaluation e;
    e.metric = 100.0 * (1.0 - RelativeError(RunModel(m, x), ref));
    return e;
  };
}

// Sets the weight rows (GEMM view) `rows` of layer `node` to zero.
inline void ZeroRows(Model& m, const std::string& node, const std::vector<int64_t>& rows) {
  auto layers = FindWeightedLayers(m);
  ASSERT_TRUE(layers.ok());
  for (const auto& L : *layers) {
    if (L.node != node) continue;
    auto w = ReadWeightMatrix(m, L);
    ASSERT_TRUE(w.ok());
    for (int64_t r : rows)
      for (int64_t c = 0; c < w->cols; ++c) w->at(r, c) = 0.0f;
    ASSERT_TRUE(WriteWeightMatrix(&m, L, *w).ok());
  }
}

// n x cols inputs with strongly correlated columns, as activations are:
// x = z * mix + 0.05 * noise + offset, with z [n, cols/2] (about half the
// columns are redundant), so the kept weights can take over the pruned ones.
inline std::vector<float> CorrelatedInputs(int64_t n, int64_t cols, uint32_t seed) {
  const int64_t k = cols / 2;
  Tensor z = Gaussian({n, k}, seed), mix = Gaussian({k, cols}, seed + 1, 0.5f);
  Tensor noise = Gaussian({n, cols}, seed + 2, 0.05f);
  std::vector<float> x(static_cast<size_t>(n * cols), 0.0f);
  for (int64_t r = 0; r < n; ++r) {
    for (int64_t j = 0; j < k; ++j) {
      const float zj = z.data<float>()[r * k + j];
      for (int64_t c = 0; c < cols; ++c) x[r * cols + c] += zj * mix.data<float>()[j * cols + c];
    }
    for (int64_t c = 0; c < cols; ++c)
      x[r * cols + c] += noise.data<float>()[r * cols + c] + 0.5f * std::sin(static_cast<float>(c));
  }
  return x;
}

inline std::vector<float> Multiply(const std::vector<float>& x, const Matrix& w, int64_t n) {
  std::vector<float> y(static_cast<size_t>(n * w.rows), 0.0f);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t r = 0; r < w.rows; ++r) {
      double s = 0.0;
      for (int64_t c = 0; c < w.cols; ++c) s += double(x[i * w.cols + c]) * w.at(r, c);
      y[i * w.rows + r] = static_cast<float>(s);
    }
  return y;
}

inline double Error(const std::vector<float>& y, const std::vector<float>& ref) {
  double num = 0.0, den = 0.0;
  for (size_t i = 0; i < y.size(); ++i) {
    num += double(y[i] - ref[i]) * (y[i] - ref[i]);
    den += double(ref[i]) * ref[i];
  }
  return num / den;
}

}  // namespace prune_test
}  // namespace sparq
