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

// onnxruntime's quantize_dynamic of a Conv, written by hand as it writes it:
//   x -> DynamicQuantizeLinear -> (xq, xs, xzp)
//   ConvInteger(xq, W, xzp, W_zp) -> Cast(float) -> Mul(., Mul(xs, W_scale)) [-> Add(bias)] -> y
struct DynamicConvCase {
  const char* name;
  Shape x_shape, w_shape;
  Shape w_scale_shape;  // {} one value, or per channel ([M, 1, 1], ...)
  Shape bias_shape;     // empty with bias false
  bool bias = true, bias_first = false;
  std::vector<int64_t> pads;
  int64_t group = 1;
};

Model DynamicConv(const DynamicConvCase& cc) {
  Model m;
  m.opset_imports = {{"", 13}};
  Graph& g = m.graph;
  for (const char* name : {"x", "y"}) {  // shapes unknown
    ValueInfo v;
    v.name = name;
    v.dtype = DataType::kFloat32;
    (name[0] == 'x' ? g.inputs : g.outputs).push_back(v);
  }
  Tensor w(DataType::kInt8, cc.w_shape);
  for (int64_t i = 0; i < w.numel(); ++i) w.data<int8_t>()[i] = static_cast<int8_t>((i * 37 + 11) % 255 - 127);
  g.initializers["W"] = w;
  g.initializers["W_zp"] = Tensor::Scalar<int8_t>(0);
  Tensor ws(DataType::kFloat32, cc.w_scale_shape);
  for (int64_t i = 0; i < ws.numel(); ++i) ws.data<float>()[i] = 0.0037f * (1.0f + 0.113f * static_cast<float>(i));
  g.initializers["W_scale"] = ws;
  g.nodes.push_back({"dq", "DynamicQuantizeLinear", "", {"x"}, {"xq", "xs", "xzp"}, {}, ""});
  std::vector<Attribute> attrs{Attribute::Int("group", cc.group)};
  if (!cc.pads.empty()) attrs.push_back(Attribute::Ints("pads", cc.pads));
  g.nodes.push_back({"conv", "ConvInteger", "", {"xq", "W", "xzp", "W_zp"}, {"acc"}, attrs, ""});
  g.nodes.push_back({"cast", "Cast", "", {"acc"}, {"accf"}, {Attribute::Int("to", 1)}, ""});
  g.nodes.push_back({"scales", "Mul", "", {"xs", "W_scale"}, {"s"}, {}, ""});
  if (cc.bias) {
    g.initializers["B"] = testing::RandomFloats(cc.bias_shape, 4);
    g.nodes.push_back({"mul", "Mul", "", {"accf", "s"}, {"y0"}, {}, ""});
    g.nodes.push_back({"add", "Add", "", cc.bias_first ? std::vector<std::string>{"B", "y0"} : std::vector<std::string>{"y0", "B"},
                       {"y"}, {}, ""});
  } else {
    g.nodes.push_back({"mul", "Mul", "", {"s", "accf"}, {"y"}, {}, ""});
  }
  return m;
}

// sparq.ConvIntegerToFloat: the graph's bits on the reference kernels and on
// the fast row (its float epilogue in gemm_s8's output stage), every ISA,
// 1 and 3 threads; 1-D and 2-D, per-tensor and per-channel scales, bias
// on either side of the Add or none, groups.
TEST(DynamicFusion, ConvIntegerEpilogueFusesAndMatchesTheGraph) {
  const DynamicConvCase cases[] = {
      {"2-D, per-tensor scale, bias [M, 1, 1]", {2, 5, 9, 11}, {12, 5, 3, 3}, {}, {12, 1, 1}, true, false, {1, 1, 1, 1}},
      {"2-D, per-channel scale [1, M, 1, 1], bias first", {1, 4, 7, 6}, {20, 4, 3, 2}, {1, 20, 1, 1}, {20, 1, 1}, true, true},
      {"1-D, per-channel scale [M, 1], bias [M, 1]", {3, 6, 40}, {9, 6, 5}, {9, 1}, {9, 1}, true, false, {2, 2}},
      {"2-D groups 2, no bias", {1, 4, 8, 8}, {6, 2, 3, 3}, {1}, {}, false, false, {1, 1, 1, 1}, 2},
      {"magika-like [L, 1], one scale, bias [M, 1, 1]", {1, 32, 300, 1}, {48, 32, 5, 1}, {}, {48, 1, 1}},
  };
  for (const DynamicConvCase& cc : cases) {
    SCOPED_TRACE(cc.name);
    const Model q = DynamicConv(cc);
    Model fused = q;
    ASSERT_EQ(FuseDynamicConv(&fused).size(), 1u);
    int ops = 0;
    for (const Node& n : fused.graph.nodes) {
      ops += n.op_type == "Cast" || n.op_type == "Mul" || n.op_type == "Add" || n.op_type == "ConvInteger";
      if (n.op_type == "ConvIntegerToFloat") EXPECT_EQ(n.inputs.size(), cc.bias ? 7u : 6u);
    }
    EXPECT_EQ(ops, 0);
    const Tensor x = testing::RandomFloats(cc.x_shape, 7, -2.0f, 3.0f);
    const Tensor spec = RunY(q, x, /*reference=*/true, /*fuse=*/false, 1);
    EXPECT_TRUE(RunY(q, x, /*reference=*/true, /*fuse=*/true, 1).Equals(spec));
    testing::ForEachIsa([&](CpuIsa) {
      for (int threads : {1, 3}) {
        ExecutorOptions o;
        o.threads = threads;
        o.profile = GraphProfile::kDeployment;
        auto exec = Executor::Create(q, o);
        ASSERT_TRUE(exec.ok()) << exec.status().ToString();
        bool row = false;
        for (const NodeKernel& k : (*exec)->NodeKernels())
          row = row || (k.op_type == "ConvIntegerToFloat" && (testing::KernelOps(k.kernel) == "im2col_nhwc+gemm_s8" ||
                                                               testing::KernelOps(k.kernel) == "conv_s8"));
        EXPECT_TRUE(row);
        TensorMap out;
        ASSERT_TRUE((*exec)->Run({{"x", x}}, &out).ok());
        EXPECT_TRUE(out["y"].Equals(spec)) << threads << " threads";
      }
    });
  }
}

// A scale that broadcasts along the last axis (not the channels) is not a
// per-channel scale: the graph stays as written.
TEST(DynamicFusion, ConvIntegerWithAScaleOnAnotherAxisStaysUnfused) {
  DynamicConvCase cc{"", {1, 3, 6, 6}, {6, 3, 3, 3}, {6}, {}, false};
  Model q = DynamicConv(cc);
  EXPECT_TRUE(FuseDynamicConv(&q).empty());
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
