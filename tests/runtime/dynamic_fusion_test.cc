// sparq.MatMulIntegerToFloat: the fused epilogue of quantize.mode dynamic,
// bit for bit the unfused graph on the reference kernels.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "kernels/cpu/dispatch.h"
#include "runtime/passes/dynamic_fusion.h"
#include "runtime/passes/passes.h"
#include "sparq/executor.h"
#include "sparq/quantize.h"
#include "test_util.h"
#include "tests/kernels/isa_sweep.h"

namespace sparq {
namespace {

// The sizes of DynamicMlp: x [2, rows, k], hidden units, outputs.
struct MlpDims {
  int64_t rows = 3, k = 16, hidden = 24, out = 8;
};

// x[2,3,16] -> MatMul(W1[16,24]) [-> Add(b1)] -> Relu -> MatMul(W2[24,8]) [-> Add(b2, bias first)] -> y,
// quantized dynamic.
Model DynamicMlp(bool per_channel, bool bias = false, MlpDims d = {}) {
  Model m;
  m.opset_imports = {{"", 17}};
  Graph& g = m.graph;
  g.inputs.push_back(testing::FloatInput("x", {{2, ""}, {d.rows, ""}, {d.k, ""}}));
  g.outputs.push_back(testing::FloatInput("y", {{2, ""}, {d.rows, ""}, {d.out, ""}}));
  g.initializers["W1"] = testing::RandomFloats({d.k, d.hidden}, 1, -0.5f, 0.5f);
  g.initializers["W2"] = testing::RandomFloats({d.hidden, d.out}, 2, -0.5f, 0.5f);
  if (bias) {
    g.initializers["b1"] = testing::RandomFloats({d.hidden}, 3);
    g.initializers["b2"] = testing::RandomFloats({d.out}, 4);
    g.nodes.push_back({"mm1", "MatMul", "", {"x", "W1"}, {"h0"}, {}, ""});
    g.nodes.push_back({"add1", "Add", "", {"h0", "b1"}, {"h"}, {}, ""});
  } else {
    g.nodes.push_back({"mm1", "MatMul", "", {"x", "W1"}, {"h"}, {}, ""});
  }
  g.nodes.push_back({"relu", "Relu", "", {"h"}, {"r"}, {}, ""});
  if (bias) {
    g.nodes.push_back({"mm2", "MatMul", "", {"r", "W2"}, {"y0"}, {}, ""});
    g.nodes.push_back({"add2", "Add", "", {"b2", "y0"}, {"y"}, {}, ""});
  } else {
    g.nodes.push_back({"mm2", "MatMul", "", {"r", "W2"}, {"y"}, {}, ""});
  }
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
  o.backend = reference ? "reference" : "cpu";
  if (fuse) o.profile = GraphProfile::kDeployment;
  auto exec = Executor::Create(m, o);
  EXPECT_TRUE(exec.ok()) << exec.status().ToString();
  TensorMap out;
  const Status st = (*exec)->Run({{"x", x}}, &out);
  EXPECT_TRUE(st.ok()) << st.ToString();
  return out["y"];
}

// With bias: the Add after the product joins (onnxruntime's quantize_dynamic
// keeps the float bias), on either side of the Add.
TEST(DynamicFusion, FusesEveryLayerAndMatchesTheGraphBitForBit) {
  for (bool bias : {false, true})
  for (bool per_channel : {true, false}) {
    SCOPED_TRACE(bias ? "bias" : "no bias");
    const Model q = DynamicMlp(per_channel, bias);
    Model fused = q;
    EXPECT_EQ(FuseDynamicMatMul(&fused).size(), 2u);
    int cast = 0, mul = 0, f = 0, add = 0;
    for (const Node& n : fused.graph.nodes) {
      cast += n.op_type == "Cast";
      mul += n.op_type == "Mul";
      add += n.op_type == "Add";
      if (n.op_type == "MatMulIntegerToFloat") {
        ++f;
        EXPECT_EQ(n.inputs.size(), bias ? 7u : 6u);
      }
    }
    EXPECT_EQ(f, 2);
    EXPECT_EQ(cast + mul + add, 0);
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

// The GEMM's float epilogue (gemm_s8 writing MatMulIntegerToFloat's output):
// the reference's bits on every ISA and thread count, for shapes with full
// and partial register tiles (rows past 8, columns past 32, K past 64).
TEST(DynamicFusion, FloatEpilogueMatchesTheGraphOnEveryIsa) {
  const MlpDims dims{37, 72, 80, 40};
  for (bool bias : {false, true})
  for (bool per_channel : {true, false}) {
    SCOPED_TRACE(std::string(bias ? "bias" : "no bias") + (per_channel ? ", per channel" : ", per tensor"));
    const Model q = DynamicMlp(per_channel, bias, dims);
    const Tensor x = testing::RandomFloats({2, dims.rows, dims.k}, 9, -2.0f, 3.0f);
    const Tensor spec = RunY(q, x, /*reference=*/true, /*fuse=*/false, 1);
    testing::ForEachIsa([&](CpuIsa) {
      for (int threads : {1, 2}) {
        const Tensor got = RunY(q, x, /*reference=*/false, /*fuse=*/true, threads);
        ASSERT_EQ(got.shape(), spec.shape());
        for (int64_t i = 0; i < spec.numel(); ++i)
          ASSERT_EQ(got.data<float>()[i], spec.data<float>()[i]) << "threads " << threads << " at " << i;
      }
    });
  }
}

// x -> MatMul(W1) -> Add(b1) -> BERT's GELU (Div, Erf, Add, Mul, Mul) -> MatMul(W2) -> y, quantized dynamic.
Model DynamicGeluMlp() {
  Model m;
  m.opset_imports = {{"", 17}};
  Graph& g = m.graph;
  g.inputs.push_back(testing::FloatInput("x", {{2, ""}, {37, ""}, {72, ""}}));
  g.outputs.push_back(testing::FloatInput("y", {{2, ""}, {37, ""}, {24, ""}}));
  g.initializers["W1"] = testing::RandomFloats({72, 80}, 1, -0.5f, 0.5f);
  g.initializers["b1"] = testing::RandomFloats({80}, 3);
  g.initializers["W2"] = testing::RandomFloats({80, 24}, 2, -0.5f, 0.5f);
  g.initializers["sqrt2"] = Tensor::Scalar<float>(1.41421356f);
  g.initializers["one"] = Tensor::Scalar<float>(1.0f);
  g.initializers["half"] = Tensor::Scalar<float>(0.5f);
  g.nodes.push_back({"mm1", "MatMul", "", {"x", "W1"}, {"h0"}, {}, ""});
  g.nodes.push_back({"add1", "Add", "", {"b1", "h0"}, {"h"}, {}, ""});
  g.nodes.push_back({"div", "Div", "", {"h", "sqrt2"}, {"d"}, {}, ""});
  g.nodes.push_back({"erf", "Erf", "", {"d"}, {"e"}, {}, ""});
  g.nodes.push_back({"add", "Add", "", {"e", "one"}, {"a"}, {}, ""});
  g.nodes.push_back({"mul", "Mul", "", {"h", "a"}, {"m"}, {}, ""});
  g.nodes.push_back({"mul_half", "Mul", "", {"m", "half"}, {"r"}, {}, ""});
  g.nodes.push_back({"mm2", "MatMul", "", {"r", "W2"}, {"y"}, {}, ""});
  QuantizeOptions opt;
  opt.dynamic = true;
  auto q = QuantizeModel(m, CalibrationTable{}, opt, nullptr);
  EXPECT_TRUE(q.ok()) << q.status().ToString();
  return *q;
}

// The GELU after a MatMulIntegerToFloat goes into its GEMM epilogue: on the
// reference kernels the unfused graph's bits; on the fast ones the bits of
// the same graph with the GELU as its own nodes (their rows of the same
// ISA), on every ISA, for 1 and 2 threads.
TEST(DynamicFusion, GeluInTheEpilogueMatchesTheSeparateNodes) {
  const Model q = DynamicGeluMlp();
  const Tensor x = testing::RandomFloats({2, 37, 72}, 9, -2.0f, 3.0f);
  auto run = [&](bool reference, bool fuse_activations, int threads, std::vector<std::string>* kernels) {
    ExecutorOptions o;
    o.threads = threads;
    o.backend = reference ? "reference" : "cpu";
    // Without the activation fusions: the deployment profile's other
    // rewrites, run here, and the graph as they leave it.
    Model m = q;
    if (fuse_activations) {
      o.profile = GraphProfile::kDeployment;
    } else {
      for (const char* pass : {"fold-constant-subgraphs", "fold-pads", "fuse-qdq"})
        EXPECT_TRUE(RunGraphPass(pass, &m).ok());
    }
    auto exec = Executor::Create(m, o);
    EXPECT_TRUE(exec.ok()) << exec.status().ToString();
    TensorMap out;
    EXPECT_TRUE((*exec)->Run({{"x", x}}, &out).ok());
    if (kernels != nullptr)
      for (const NodeKernel& k : (*exec)->NodeKernels()) kernels->push_back(k.op_type + ":" + testing::KernelOps(k.kernel));
    return out["y"];
  };
  const Tensor spec = run(true, false, 1, nullptr);
  EXPECT_TRUE(run(true, true, 1, nullptr).Equals(spec));
  testing::ForEachIsa([&](CpuIsa) {
    const Tensor separate = run(false, false, 1, nullptr);
    std::vector<std::string> kernels;
    for (int threads : {1, 2}) EXPECT_TRUE(run(false, true, threads, threads == 1 ? &kernels : nullptr).Equals(separate));
    EXPECT_NE(std::find(kernels.begin(), kernels.end(), "MatMulIntegerToFloat:gemm_s8+gelu_erf_chain_f32"), kernels.end())
        << ::testing::PrintToString(kernels);
  });
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

// DynamicQuantizeLinear's fast kernel (minmax_f32 rows in chunks, then the
// quantize row): the reference's three outputs bit for bit, on every ISA and
// thread count, for inputs over several chunks, with NaN, all zero, one-signed.
TEST(DynamicFusion, DynamicQuantizeLinearFastKernelMatchesReference) {
  Model m;
  m.opset_imports = {{"", 17}};
  m.graph.inputs.push_back(testing::FloatInput("x", {{-1, "n"}}));
  for (const char* y : {"y", "y_scale", "y_zp"}) m.graph.outputs.push_back(testing::FloatInput(y, {}));
  m.graph.nodes.push_back({"dq", "DynamicQuantizeLinear", "", {"x"}, {"y", "y_scale", "y_zp"}, {}, ""});
  std::vector<std::pair<std::string, Tensor>> inputs;
  inputs.emplace_back("random, 3 chunks", testing::RandomFloats({40000}, 3, -2.0f, 7.0f));
  Tensor with_nan = testing::RandomFloats({16390}, 4, -5.0f, 1.0f);
  for (int64_t i = 0; i < with_nan.numel(); i += 977) with_nan.data<float>()[i] = std::nanf("");
  inputs.emplace_back("NaN", with_nan);
  inputs.emplace_back("all zero", Tensor(DataType::kFloat32, {33}));
  inputs.emplace_back("positive", testing::RandomFloats({1000}, 5, 0.5f, 3.0f));
  inputs.emplace_back("negative", testing::RandomFloats({17}, 6, -3.0f, -0.5f));
  inputs.emplace_back("empty", Tensor(DataType::kFloat32, {0}));
  for (const auto& [label, x] : inputs) {
    SCOPED_TRACE(label);
    ExecutorOptions ref_options;
    ref_options.backend = "reference";
    auto ref = Executor::Create(m, ref_options);
    ASSERT_TRUE(ref.ok()) << ref.status().ToString();
    TensorMap want;
    ASSERT_TRUE((*ref)->Run({{"x", x}}, &want).ok());
    testing::ForEachIsa([&](CpuIsa isa) {
      for (int threads : {1, 2, 3}) {
        ExecutorOptions o;
        o.threads = threads;
        auto fast = Executor::Create(m, o);
        ASSERT_TRUE(fast.ok()) << fast.status().ToString();
        EXPECT_EQ(testing::KernelOps((*fast)->NodeKernels().at(0).kernel), "minmax_f32+quantize_f32_s8");
        TensorMap got;
        ASSERT_TRUE((*fast)->Run({{"x", x}}, &got).ok());
        for (const auto& kv : want)
          EXPECT_TRUE(got.at(kv.first).Equals(kv.second)) << kv.first << " at " << CpuIsaName(isa) << ", " << threads
                                                          << " threads";
      }
    });
  }
}

}  // namespace
}  // namespace sparq
