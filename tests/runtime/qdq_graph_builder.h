// Small QDQ graphs for the fusion tests (tests/runtime/qdq_glue_fusion_test.cc,
// island_fusion_test.cc): a builder, and runs of the fused executor against
// the reference kernels on every ISA of this CPU and several thread counts.
#pragma once

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/dispatch.h"
#include "sparq/executor.h"
#include "test_util.h"
#include "tests/kernels/isa_sweep.h"

namespace sparq {
namespace qdq_test {

inline constexpr int kThreadCounts[] = {1, 2, 3};

// Builds small QDQ graphs: quantized graph inputs, per-tensor parameters as
// initializers, nodes appended in topological order.
class QdqGraphBuilder {
 public:
  explicit QdqGraphBuilder(int opset = 17) { m_.opset_imports = {{"", opset}}; }

  // A quantized graph input of `type` and `shape`.
  void Input(const std::string& name, DataType type, const Shape& shape) {
    ValueInfo v;
    v.name = name;
    v.dtype = type;
    v.has_shape = true;
    for (int64_t d : shape) v.dims.push_back({d, ""});
    m_.graph.inputs.push_back(v);
  }
  // Per-tensor scale and zero point initializers "<name>_scale", "<name>_zp".
  void Params(const std::string& name, float scale, int32_t zp, DataType type) {
    m_.graph.initializers[name + "_scale"] = Tensor::Scalar<float>(scale);
    m_.graph.initializers[name + "_zp"] =
        type == DataType::kInt8 ? Tensor::Scalar<int8_t>(static_cast<int8_t>(zp))
                                : Tensor::Scalar<uint8_t>(static_cast<uint8_t>(zp));
  }
  std::string Dq(const std::string& x, const std::string& params) {
    return Add("DequantizeLinear", {x, params + "_scale", params + "_zp"});
  }
  std::string Q(const std::string& x, const std::string& params) {
    return Add("QuantizeLinear", {x, params + "_scale", params + "_zp"});
  }
  // Appends a node with one output (named after the node) and returns that output.
  std::string Add(const std::string& op, std::vector<std::string> inputs, std::vector<Attribute> attrs = {}) {
    const std::string name = op + "_" + std::to_string(m_.graph.nodes.size());
    m_.graph.nodes.push_back({name, op, "", std::move(inputs), {name + "_out"}, std::move(attrs), ""});
    return name + "_out";
  }
  void Output(const std::string& value) {
    ValueInfo v;
    v.name = value;
    m_.graph.outputs.push_back(v);
  }
  Model& model() { return m_; }

 private:
  Model m_;
};

inline Tensor RandomBytes(DataType type, const Shape& shape, uint32_t seed) {
  Tensor t(type, shape);
  std::mt19937 gen(seed);
  auto* p = static_cast<uint8_t*>(t.raw_data());
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = static_cast<uint8_t>(gen());
  return t;
}

inline std::unique_ptr<Executor> Create(const Model& m, bool reference, int threads, bool fuse_reference = false) {
  ExecutorOptions o;
  o.threads = threads;
  o.backend = reference ? "reference" : "cpu";
  if (!reference || fuse_reference) o.profile = GraphProfile::kDeployment;
  auto e = Executor::Create(m, o);
  EXPECT_TRUE(e.ok()) << e.status().ToString();
  return e.ok() ? std::move(e).value() : nullptr;
}

// How many nodes of each op type the fused executor runs.
inline std::map<std::string, int> FusedOpCounts(const Model& m) {
  std::map<std::string, int> counts;
  auto e = Create(m, /*reference=*/false, 1);
  if (e != nullptr)
    for (const NodeKernel& k : e->NodeKernels()) ++counts[k.op_type];
  return counts;
}

// Runs `m` on the reference kernels (the float QDQ graph) and fused with every
// thread count and ISA; every output must be the same bytes.
// With `fused_reference` the reference runs the fused graph too (on the
// reference kernels): for graphs with convolutions, whose integer form is
// not the float graph's bits.
inline void ExpectFusedBitExact(const Model& m, const TensorMap& inputs, bool fused_reference = false) {
  auto reference = Create(m, /*reference=*/true, 1, fused_reference);
  ASSERT_NE(reference, nullptr);
  TensorMap want;
  {
    const Status st = reference->Run(inputs, &want);
    ASSERT_TRUE(st.ok()) << st.ToString();
  }
  for (CpuIsa isa : testing::IsasOfThisCpu()) {
    ASSERT_TRUE(ForceIsa(isa).ok());
    for (int threads : kThreadCounts) {
      auto fused = Create(m, /*reference=*/false, threads);
      ASSERT_NE(fused, nullptr);
      TensorMap got;
      Status st = fused->Run(inputs, &got);
      ASSERT_TRUE(st.ok()) << st.ToString();
      for (const auto& kv : want) {
        EXPECT_TRUE(got.at(kv.first).Equals(kv.second))
            << kv.first << " differs at isa " << CpuIsaName(isa) << ", " << threads << " threads";
      }
    }
  }
  ResetIsa();
}

// Runs `m` fused (fast rows, `threads`) and as the float QDQ graph on the
// reference kernels, for the tests that compare the two within a tolerance
// (where the fused graph runs integer sums the float graph does not).
inline void RunFusedAndFloatGraph(const Model& m, const TensorMap& inputs, int threads, TensorMap* fused,
                                  TensorMap* float_graph) {
  auto f = Create(m, /*reference=*/false, threads);
  auto r = Create(m, /*reference=*/true, 1);
  ASSERT_NE(f, nullptr);
  ASSERT_NE(r, nullptr);
  Status st = f->Run(inputs, fused);
  ASSERT_TRUE(st.ok()) << st.ToString();
  st = r->Run(inputs, float_graph);
  ASSERT_TRUE(st.ok()) << st.ToString();
}

// Quantized outputs: every value at most `max_steps` quantization steps from
// the float graph's, and at most numel / `rare` of them different at all.
inline void ExpectFewStepsApart(const Tensor& got, const Tensor& want, double max_steps, int64_t rare,
                                const std::string& what = "") {
  ASSERT_EQ(got.shape(), want.shape()) << what;
  int64_t differ = 0;
  for (int64_t i = 0; i < got.numel(); ++i) {
    const double d = got.GetAsDouble(i) - want.GetAsDouble(i);
    EXPECT_LE(std::abs(d), max_steps) << what << " at " << i;
    differ += d != 0;
  }
  EXPECT_LE(differ, got.numel() / rare) << what << ": most values are the float graph's";
}

// Float outputs: within `rel_tol` of the float graph's largest |value|.
inline void ExpectNearOfLargest(const Tensor& got, const Tensor& want, double rel_tol) {
  ASSERT_EQ(got.shape(), want.shape());
  double max_abs = 0.0;
  for (int64_t i = 0; i < want.numel(); ++i) max_abs = std::max(max_abs, std::abs(want.GetAsDouble(i)));
  for (int64_t i = 0; i < want.numel(); ++i)
    EXPECT_NEAR(got.GetAsDouble(i), want.GetAsDouble(i), rel_tol * max_abs) << "element " << i;
}

}  // namespace qdq_test
}  // namespace sparq
