// quantize.mode dynamic (DynamicQuantizeLinear + MatMulInteger, onnxruntime's
// quantize_dynamic form) and int8 Gather tables.
#include <gtest/gtest.h>

#include <cmath>

#include "sparq/executor.h"
#include "sparq/onnx_io.h"
#include "sparq/quantize.h"
#include "test_util.h"

namespace sparq {
namespace {

// x[n,8] ─MatMul(Wa)─> a ─┐
//        ─MatMul(Wb)─> b ─Add─> s ─Gemm(Wc^T, bc)─> y[n,4]
Model TwoBranchMlp() {
  Model m;
  m.opset_imports = {{"", 17}};
  Graph& g = m.graph;
  g.inputs.push_back(testing::FloatInput("x", {{-1, "n"}, {8, ""}}));
  g.outputs.push_back(testing::FloatInput("y", {{-1, "n"}, {4, ""}}));
  g.initializers["Wa"] = testing::RandomFloats({8, 16}, 1, -0.5f, 0.5f);
  g.initializers["Wb"] = testing::RandomFloats({8, 16}, 2, -0.5f, 0.5f);
  g.initializers["Wc"] = testing::RandomFloats({4, 16}, 3, -0.5f, 0.5f);
  g.initializers["bc"] = testing::RandomFloats({4}, 4, -0.2f, 0.2f);
  g.nodes.push_back({"mma", "MatMul", "", {"x", "Wa"}, {"a"}, {}, ""});
  g.nodes.push_back({"mmb", "MatMul", "", {"x", "Wb"}, {"b"}, {}, ""});
  g.nodes.push_back({"add", "Add", "", {"a", "b"}, {"s"}, {}, ""});
  g.nodes.push_back({"fc", "Gemm", "", {"s", "Wc", "bc"}, {"y"}, {Attribute::Int("transB", 1)}, ""});
  return m;
}

Tensor RunOne(const Model& m, const std::string& input, const Tensor& x, int threads = 1) {
  auto exec = Executor::Create(m, ExecutorOptions{threads});
  EXPECT_TRUE(exec.ok()) << exec.status().ToString();
  TensorMap out;
  const Status st = (*exec)->Run({{input, x}}, &out);
  EXPECT_TRUE(st.ok()) << st.ToString();
  return out["y"].ToFloat32();
}

double Sqnr(const Tensor& ref, const Tensor& got) { return testing::SqnrDb(ref, got); }

int CountOps(const Model& m, const std::string& op) {
  int c = 0;
  for (const Node& n : m.graph.nodes) c += n.op_type == op;
  return c;
}

TEST(DynamicQuantize, WritesOnnxRuntimesFormAndRunsCloseToFloat) {
  Model m = TwoBranchMlp();
  QuantizeOptions opt;
  opt.dynamic = true;
  QuantizeReport report;
  auto q = QuantizeModel(m, CalibrationTable{}, opt, &report);  // no calibration range needed
  ASSERT_TRUE(q.ok()) << q.status().ToString();
  EXPECT_EQ(CountOps(*q, "DynamicQuantizeLinear"), 2);  // x shared by both MatMuls, s
  EXPECT_EQ(CountOps(*q, "MatMulInteger"), 3);
  EXPECT_EQ(CountOps(*q, "MatMul") + CountOps(*q, "Gemm") + CountOps(*q, "QuantizeLinear"), 0);
  for (const auto& l : report.layers) EXPECT_EQ(l.precision, Precision::kINT8) << l.node;
  EXPECT_TRUE(CheckModel(*q).ok()) << CheckModel(*q).ToString();
  const Tensor x = testing::RandomFloats({5, 8}, 9);
  const Tensor ref = RunOne(m, "x", x), got = RunOne(*q, "x", x);
  EXPECT_GT(Sqnr(ref, got), 30.0);
  // Same result on any thread count.
  const Tensor got4 = RunOne(*q, "x", x, 4);
  for (int64_t i = 0; i < got.numel(); ++i) EXPECT_EQ(got.data<float>()[i], got4.data<float>()[i]);
}

TEST(DynamicQuantize, ConvStaysFloatWithAReason) {
  Model m;
  m.opset_imports = {{"", 17}};
  Graph& g = m.graph;
  g.inputs.push_back(testing::FloatInput("x", {{1, ""}, {2, ""}, {4, ""}, {4, ""}}));
  g.outputs.push_back(testing::FloatInput("y", {{1, ""}, {3, ""}, {4, ""}, {4, ""}}));
  g.initializers["w"] = testing::RandomFloats({3, 2, 1, 1}, 5);
  g.nodes.push_back({"conv", "Conv", "", {"x", "w"}, {"y"}, {}, ""});
  QuantizeOptions opt;
  opt.dynamic = true;
  QuantizeReport report;
  auto q = QuantizeModel(m, CalibrationTable{}, opt, &report);
  ASSERT_TRUE(q.ok()) << q.status().ToString();
  ASSERT_EQ(report.layers.size(), 1u);
  EXPECT_EQ(report.layers[0].precision, Precision::kFP32);
  EXPECT_NE(report.layers[0].reason.find("MatMul and Gemm only"), std::string::npos);
  EXPECT_EQ(CountOps(*q, "Conv"), 1);
}

TEST(GatherInt8, EmbeddingTableStoredInInt8) {
  Model m;
  m.opset_imports = {{"", 17}};
  Graph& g = m.graph;
  ValueInfo ids;
  ids.name = "ids";
  ids.dtype = DataType::kInt64;
  ids.has_shape = true;
  ids.dims = {{2, ""}, {3, ""}};
  g.inputs.push_back(ids);
  g.outputs.push_back(testing::FloatInput("y", {{2, ""}, {3, ""}, {64, ""}}));
  g.initializers["E"] = testing::RandomFloats({100, 64}, 6);
  g.nodes.push_back({"emb", "Gather", "", {"E", "ids"}, {"y"}, {}, ""});
  for (bool dynamic : {false, true}) {
    QuantizeOptions opt;
    opt.dynamic = dynamic;
    auto q = QuantizeModel(m, CalibrationTable{}, opt, nullptr);
    ASSERT_TRUE(q.ok()) << q.status().ToString();
    EXPECT_EQ(q->graph.initializers.count("E"), 0u);
    EXPECT_EQ(CountOps(*q, "Gather"), 2);  // the int8 rows and their scales
    EXPECT_EQ(q->graph.initializers.at("E_quantized").dtype(), DataType::kInt8);
    const Tensor x = Tensor::FromVector<int64_t>({2, 3}, {0, 5, 99, 42, 42, 7});
    EXPECT_GT(Sqnr(RunOne(m, "ids", x), RunOne(*q, "ids", x)), 38.0);
    EXPECT_TRUE(CheckModel(*q).ok()) << CheckModel(*q).ToString();
    opt.gather_int8 = false;
    auto kept = QuantizeModel(m, CalibrationTable{}, opt, nullptr);
    ASSERT_TRUE(kept.ok());
    EXPECT_EQ(kept->graph.initializers.count("E"), 1u);
  }
}

}  // namespace
}  // namespace sparq
