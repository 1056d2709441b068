// Float16 conversion that never overflows: attention-mask constants beyond the
// float16 range, values whose calibrated range float16 cannot hold.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "sparq/calibrate.h"
#include "sparq/executor.h"
#include "sparq/quantize.h"
#include "test_util.h"

namespace sparq {
namespace {

Tensor Scalar(float v) { return Tensor::FromVector<float>({}, {v}); }

// The HF-style additive attention mask, then Softmax over the scores:
//   x[2,4] ─────────────────────────────┐
//   m[2,4] ─Sub(1, m)─Mul(finfo.min)─> Add ─Softmax─> y
// finfo.min is a Constant node (as torch.onnx writes it).
Model MaskedSoftmax() {
  Model m;
  m.opset_imports = {{"", 17}};
  Graph& g = m.graph;
  g.inputs.push_back(testing::FloatInput("x", {{2, ""}, {4, ""}}));
  g.inputs.push_back(testing::FloatInput("m", {{2, ""}, {4, ""}}));
  g.outputs.push_back(testing::FloatInput("y", {{2, ""}, {4, ""}}));
  g.nodes.push_back({"one", "Constant", "", {}, {"c1"}, {Attribute::FromTensor("value", Scalar(1.0f))}, ""});
  g.nodes.push_back({"big", "Constant", "", {}, {"cmin"},
                     {Attribute::FromTensor("value", Scalar(std::numeric_limits<float>::lowest()))}, ""});
  g.nodes.push_back({"sub", "Sub", "", {"c1", "m"}, {"inv"}, {}, ""});
  g.nodes.push_back({"mul", "Mul", "", {"inv", "cmin"}, {"add_mask"}, {}, ""});
  g.nodes.push_back({"add", "Add", "", {"x", "add_mask"}, {"s"}, {}, ""});
  g.nodes.push_back({"softmax", "Softmax", "", {"s"}, {"y"}, {Attribute::Int("axis", -1)}, ""});
  return m;
}

TensorMap Feeds(uint32_t seed) {
  Tensor mask = Tensor::FromVector<float>({2, 4}, {1, 1, 1, 0, 1, 1, 0, 0});
  return {{"x", testing::RandomFloats({2, 4}, seed, -4.0f, 4.0f)}, {"m", mask}};
}

Tensor RunY(const Model& m, const TensorMap& feeds) {
  auto exec = Executor::Create(m, ExecutorOptions{1});
  EXPECT_TRUE(exec.ok()) << exec.status().ToString();
  TensorMap out;
  const Status st = (*exec)->Run(feeds, &out);
  EXPECT_TRUE(st.ok()) << st.ToString();
  return out["y"].ToFloat32();
}

TEST(Float16, AttentionMaskOfFloatMinStaysFinite) {
  Model m = MaskedSoftmax();
  int calls = 0;
  CalibrationOptions co;
  co.method = CalibrationMethod::kMax;
  auto table = Calibrate(
      m, [&](TensorMap* b) -> StatusOr<bool> {
        if (calls++ == 2) return false;
        *b = Feeds(100 + calls);
        return true;
      },
      co);
  ASSERT_TRUE(table.ok()) << table.status().ToString();
  QuantizeOptions opt;
  opt.precision = Precision::kFP16;
  QuantizeReport report;
  auto q = QuantizeModel(m, *table, opt, &report);
  ASSERT_TRUE(q.ok()) << q.status().ToString();
  const TensorMap feeds = Feeds(7);
  const Tensor ref = RunY(m, feeds), got = RunY(*q, feeds);
  for (int64_t i = 0; i < ref.numel(); ++i) {
    ASSERT_TRUE(std::isfinite(got.data<float>()[i])) << "y[" << i << "]";
    EXPECT_NEAR(got.data<float>()[i], ref.data<float>()[i], 2e-3f) << "y[" << i << "]";
  }
  // The masked sum and the Softmax reading it stay float32: their range is
  // beyond float16's. The reports say so.
  bool warned = false;
  for (const auto& w : report.warnings) warned |= w.find("kept in float32") != std::string::npos;
  EXPECT_TRUE(warned);
  for (const Node& n : q->graph.nodes)
    if (n.op_type == "Softmax") EXPECT_EQ(n.inputs[0], "s");
}

TEST(Float16, LargeConstantIsClampedNotCastToInf) {
  // Without a calibration range for the mask path the constant alone must
  // not become -inf: the Mul computes in float16 with -65504.
  Model m = MaskedSoftmax();
  CalibrationTable empty;
  QuantizeOptions opt;
  opt.precision = Precision::kFP16;
  QuantizeReport report;
  auto q = QuantizeModel(m, empty, opt, &report);
  ASSERT_TRUE(q.ok()) << q.status().ToString();
  for (const auto& [name, t] : q->graph.initializers) {
    if (t.dtype() != DataType::kFloat16) continue;
    const Tensor f = t.ToFloat32();
    for (int64_t i = 0; i < f.numel(); ++i) EXPECT_TRUE(std::isfinite(f.data<float>()[i])) << name;
  }
}

}  // namespace
}  // namespace sparq
