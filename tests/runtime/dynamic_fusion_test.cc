// sparq.MatMulIntegerToFloat: the fused epilogue of quantize.mode dynamic,
// bit for bit the unfused graph on the reference kernels.
#include <gtest/gtest.h>

#include "runtime/dynamic_fusion.h"
#include "sparq/executor.h"
#include "sparq/quantize.h"
#include "test_util.h"

namespace sparq {
namespace {

// x[2,3,16] -> MatMul(W1[16,24]) -> Relu -> MatMul(W2[24,8]) -> y, quantized dynamic.
Model DynamicMlp(bool per_channel) {
  Model m;
  m.opset_imports = {{"", 17}};
  Graph& g = m.graph;
  g.inputs.push_back(testing::FloatInput("x", {{2, ""}, {3, ""}, {16, ""}}));
  g.outputs.push_back(testing::FloatInput("y", {{2, ""}, {3, ""}, {8, ""}}));
  g.initializers["W1"] = testing::RandomFloats({16, 24}, 1, -0.5f, 0.5f);
  g.initializers["W2"] = testing::RandomFloats({24, 8}, 2, -0.5f, 0.5f);
  g.nodes.push_back({"mm1", "MatMul", "", {"x", "W1"}, {"h"}, {}, ""});
  g.nodes.push_back({"relu", "Relu", "", {"h"}, {"r"}, {}, ""});
  g.nodes.push_back({"mm2", "MatMul", "", {"r", "W2"}, {"y"}, {}, ""});
  QuantizeOptions opt;
  opt.dynamic = true;
  opt.per_channel = per_channel;
  auto q = QuantizeModel(m, CalibrationTable{}, opt, nullptr);
  EXPECT_TRUE(q.ok()) << q.status().ToString();
  return *q;
}

Tensor RunY(const Model& m, const Tensor& x, bool reference, bool fuse, int threads) {
  ExecutorOptions o;
  o.threads = threads;
  o.reference_kernels = reference;
  o.fuse_qdq = fuse;
  auto exec = Executor::Create(m, o);
  EXPECT_TRUE(exec.ok()) << exec.status().ToString();
  TensorMap out;
  const Status st = (*exec)->Run({{"x", x}}, &out);
  EXPECT_TRUE(st.ok()) << st.ToString();
  return out["y"];
}

TEST(DynamicFusion, FusesEveryLayerAndMatchesTheGraphBitForBit) {
  for (bool per_channel : {true, false}) {
    const Model q = DynamicMlp(per_channel);
    Model fused = q;
    EXPECT_EQ(FuseDynamicMatMul(&fused).size(), 2u);
    int cast = 0, mul = 0, f = 0;
    for (const Node& n : fused.graph.nodes) {
      cast += n.op_type == "Cast";
      mul += n.op_type == "Mul";
      f += n.op_type == "MatMulIntegerToFloat";
    }
    EXPECT_EQ(f, 2);
    EXPECT_EQ(cast + mul, 0);
    const Tensor x = testing::RandomFloats({2, 3, 16}, 7);
    const Tensor spec = RunY(q, x, /*reference=*/true, /*fuse=*/false, 1);
    for (bool reference : {true, false})
      for (int threads : {1, 3}) {
        const Tensor got = RunY(q, x, reference, /*fuse=*/true, threads);
        ASSERT_EQ(got.shape(), spec.shape());
        for (int64_t i = 0; i < spec.numel(); ++i)
          ASSERT_EQ(got.data<float>()[i], spec.data<float>()[i])
              << "per_channel " << per_channel << " reference " << reference << " threads " << threads << " at " << i;
      }
  }
}

TEST(DynamicFusion, GraphOutputAccumulatorsStayUnfused) {
  Model q = DynamicMlp(true);
  // A graph output on the int32 accumulators keeps the first layer unfused.
  for (const Node& n : q.graph.nodes)
    if (n.op_type == "MatMulInteger") {
      ValueInfo v;
      v.name = n.outputs[0];
      v.dtype = DataType::kInt32;
      q.graph.outputs.push_back(v);
      break;
    }
  EXPECT_EQ(FuseDynamicMatMul(&q).size(), 1u);
}

}  // namespace
}  // namespace sparq
