// Float32 Erf, Softmax, Pow(x, 2), Sigmoid and last-axis ReduceMean (kernels/cpu/activation_f32.h) through
// the executor on every ISA this CPU has, against the reference kernels
// (kernels/ref): portable Erf / Softmax and every Pow(x, 2) with the same
// bits, the AVX2 Erf / Softmax within kErfF32AbsTol / kSoftmaxF32AbsTol (the
// fast Sigmoid rows within kSigmoidF32AbsTol); the
// same bits for 1 and 2 threads; each node names the dispatch-table row of the
// forced ISA. The rows themselves: cpu_row_kernels_test.cc.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "kernels/cpu/activation_f32.h"
#include "kernels/single_node_run.h"
#include "sparq/executor.h"
#include "test_util.h"
#include "tests/kernels/isa_sweep.h"

namespace sparq {
namespace {

class ActivationF32Test : public testing::IsaSweepTest {};

// y = op(x) through a one-node model on the fast (or the reference) kernels;
// `kernel` (when not null) receives the node's kernel name.
Tensor RunOne(const std::string& op, const Tensor& x, const std::vector<Attribute>& attrs, bool reference,
              int threads = 1, const Tensor* second = nullptr, std::string* kernel = nullptr) {
  Model m;
  m.opset_imports = {{"", 13}};
  m.graph.inputs.push_back(testing::FloatInput("x", {}));
  m.graph.inputs.back().has_shape = false;
  m.graph.outputs.push_back(testing::FloatInput("y", {}));
  std::vector<std::string> inputs = {"x"};
  if (second != nullptr) {
    m.graph.initializers["e"] = *second;
    inputs.push_back("e");
  }
  m.graph.nodes.push_back({"n", op, "", inputs, {"y"}, attrs, ""});
  ExecutorOptions options;
  options.threads = threads;
  options.backend = reference ? "reference" : "cpu";
  auto exec = Executor::Create(m, options);
  EXPECT_TRUE(exec.ok()) << exec.status().ToString();
  TensorMap out;
  if (exec.ok()) EXPECT_TRUE(exec.value()->Run({{"x", x}}, &out).ok());
  if (exec.ok() && kernel != nullptr) *kernel = exec.value()->NodeKernels().at(0).kernel;
  return out.count("y") ? out.at("y") : Tensor();
}

void ExpectClose(const Tensor& got, const Tensor& want, float abs_tol) {
  ASSERT_EQ(got.shape(), want.shape());
  for (int64_t i = 0; i < got.numel(); ++i) {
    const float a = got.data<float>()[i], b = want.data<float>()[i];
    if (std::isnan(b)) {
      EXPECT_TRUE(std::isnan(a)) << i;
    } else if (abs_tol == 0) {
      ASSERT_EQ(std::memcmp(&a, &b, 4), 0) << "[" << i << "] " << a << " vs " << b;
    } else {
      ASSERT_NEAR(a, b, abs_tol) << "[" << i << "]";
    }
  }
}

// The portable rows compute what the reference does: no tolerance.
float Tolerance(CpuOp op, float fast_tol) { return SelectCpuKernel(op).isa == CpuIsa::kPortable ? 0.0f : fast_tol; }

TEST_P(ActivationF32Test, ErfMatchesReference) {
  for (int64_t n : {1, 7, 8, 9, 100, 40000}) {
    Tensor x = testing::RandomFloats({n}, static_cast<uint32_t>(n), -6.0f, 6.0f, 0.0f);
    if (n >= 9) {
      const float special[] = {0.0f, -0.0f, 1e-8f, -1e-30f, 10.0f, -10.0f, std::numeric_limits<float>::infinity(),
                               -std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN()};
      std::copy(std::begin(special), std::end(special), x.data<float>());
    }
    SCOPED_TRACE("n=" + std::to_string(n));
    ExpectClose(RunOne("Erf", x, {}, false), RunOne("Erf", x, {}, true), Tolerance(CpuOp::kErfF32, cpu::kErfF32AbsTol));
  }
}

TEST_P(ActivationF32Test, SigmoidMatchesReference) {
  for (int64_t n : {1, 7, 15, 16, 17, 100, 40000}) {
    Tensor x = testing::RandomFloats({n}, static_cast<uint32_t>(n), -20.0f, 20.0f, 0.0f);
    if (n >= 12) {
      const float special[] = {0.0f, -0.0f, 1e-8f, -1e-30f, 30.0f, -30.0f, -88.8f, -100.0f,
                               std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                               std::numeric_limits<float>::quiet_NaN(), 88.5f};
      std::copy(std::begin(special), std::end(special), x.data<float>());
    }
    SCOPED_TRACE("n=" + std::to_string(n));
    ExpectClose(RunOne("Sigmoid", x, {}, false), RunOne("Sigmoid", x, {}, true),
                Tolerance(CpuOp::kSigmoidF32, cpu::kSigmoidF32AbsTol));
  }
}

TEST_P(ActivationF32Test, TanhMatchesReference) {
  for (int64_t n : {1, 7, 15, 16, 17, 100, 40000}) {
    Tensor x = testing::RandomFloats({n}, static_cast<uint32_t>(n), -10.0f, 10.0f, 0.0f);
    if (n >= 9) {
      const float special[] = {0.0f, -0.0f, 1e-8f, -1e-30f, 0.25f, -20.0f, std::numeric_limits<float>::infinity(),
                               -std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN()};
      std::copy(std::begin(special), std::end(special), x.data<float>());
    }
    SCOPED_TRACE("n=" + std::to_string(n));
    const Tensor want = RunOne("Tanh", x, {}, true);
    ExpectClose(RunOne("Tanh", x, {}, false), want, Tolerance(CpuOp::kTanhF32, cpu::kTanhF32AbsTol));
    ExpectClose(RunOne("Tanh", x, {}, false, 2), RunOne("Tanh", x, {}, false, 1), 0.0f);  // any thread count
  }
}

// GlobalMaxPool of float32 (max_rows_f32): the reference's bits for 1-D, 2-D
// and 3-D spatial shapes, NaN and signed zeros among the values, 1 and 2 threads.
TEST_P(ActivationF32Test, GlobalMaxPoolIsExact) {
  for (const Shape& shape : {Shape{1, 8, 1500}, Shape{2, 3, 7, 5}, Shape{1, 4, 2, 3, 4}, Shape{3, 2, 1}}) {
    Tensor x = testing::RandomFloats(shape, 17, -5.0f, 5.0f, 0.0f);
    x.data<float>()[3] = std::numeric_limits<float>::quiet_NaN();
    const int64_t n = x.numel() / (shape[0] * shape[1]);
    if (shape[0] * shape[1] > 1) {  // plane 1: every value a zero, -0 first
      for (int64_t i = 0; i < n; ++i) x.data<float>()[n + i] = (i % 2) ? 0.0f : -0.0f;
    }
    for (int threads : {1, 2}) {
      std::string kernel;
      const Tensor got = RunOne("GlobalMaxPool", x, {}, false, threads, nullptr, &kernel);
      ExpectClose(got, RunOne("GlobalMaxPool", x, {}, true), 0.0f);
      EXPECT_EQ(kernel, SelectCpuKernel(CpuOp::kMaxRowsF32).name);
    }
  }
}

// Clip of float32 (clip_f32): the reference's bits with both bounds, one
// bound (opset 13 inputs) and the attributes of opset 6; 1 and 3 threads.
TEST_P(ActivationF32Test, ClipIsExact) {
  Tensor x = testing::RandomFloats({40000}, 21, -8.0f, 8.0f, 0.0f);
  const float special[] = {0.0f, -0.0f, 6.0f, std::numeric_limits<float>::infinity(),
                           -std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN()};
  std::copy(std::begin(special), std::end(special), x.data<float>());
  struct Case {
    int opset;
    std::vector<std::string> inputs;
    std::vector<Attribute> attrs;
  };
  const Case cases[] = {{13, {"x", "lo", "hi"}, {}},
                        {13, {"x", "", "hi"}, {}},
                        {13, {"x", "lo"}, {}},
                        {6, {"x"}, {Attribute::Float("min", -1.5f), Attribute::Float("max", 2.5f)}}};
  for (const Case& c : cases) {
    SCOPED_TRACE("opset " + std::to_string(c.opset) + ", " + std::to_string(c.inputs.size()) + " inputs");
    Model m;
    m.opset_imports = {{"", c.opset}};
    m.graph.inputs.push_back(testing::FloatInput("x", {{40000, ""}}));
    m.graph.outputs.push_back(testing::FloatInput("y", {}));
    m.graph.initializers["lo"] = Tensor::Scalar<float>(0.0f);
    m.graph.initializers["hi"] = Tensor::Scalar<float>(6.0f);
    m.graph.nodes.push_back({"n", "Clip", "", c.inputs, {"y"}, c.attrs, ""});
    testing::ExpectSameBitsAsReference(m, {{"x", x}}, SelectCpuKernel(CpuOp::kClipF32).name);
  }
}

// Relu of float32 runs clip_f32 with [0, inf): the reference's bits (-0,
// NaN, infinities included).
TEST_P(ActivationF32Test, ReluIsExact) {
  Tensor x = testing::RandomFloats({40001}, 23, -8.0f, 8.0f, 0.0f);
  const float special[] = {0.0f, -0.0f, std::numeric_limits<float>::infinity(),
                           -std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN()};
  std::copy(std::begin(special), std::end(special), x.data<float>());
  std::string kernel;
  const Tensor want = RunOne("Relu", x, {}, true);
  ExpectClose(RunOne("Relu", x, {}, false, 1, nullptr, &kernel), want, 0.0f);
  EXPECT_EQ(kernel, SelectCpuKernel(CpuOp::kClipF32).name);
  ExpectClose(RunOne("Relu", x, {}, false, 3), want, 0.0f);
}

// Output "y" of `m` (one input "x"), on the reference or fast kernels, with
// or without the activation fusions; with `kernels`, each node's
// "op:kernel" (the kernel as its table ops with `kernel_ops`).
Tensor RunFusedModel(const Model& m, const Tensor& x, bool reference, bool fuse, int threads,
                     std::vector<std::string>* kernels, bool kernel_ops) {
  ExecutorOptions options;
  options.backend = reference ? "reference" : "cpu";
  if (fuse) options.profile = GraphProfile::kObserveKept;
  options.threads = threads;
  auto exec = Executor::Create(m, options);
  EXPECT_TRUE(exec.ok()) << exec.status().ToString();
  if (!exec.ok()) return Tensor();
  TensorMap out;
  EXPECT_TRUE((*exec)->Run({{"x", x}}, &out).ok());
  if (kernels != nullptr)
    for (const NodeKernel& k : (*exec)->NodeKernels())
      kernels->push_back(k.op_type + ":" + (kernel_ops ? testing::KernelOps(k.kernel) : k.kernel));
  return out.count("y") ? out.at("y") : Tensor();
}

// The checks shared by the bit-exact chain fusions (HardSwish, GELU erf /
// tanh): the fused node's reference gives the unfused reference's bits and
// the fast fused node the unfused fast nodes' bits (with `as_reference`, the
// reference's bits too), the same for 1 and 3 threads; `kept` (an
// intermediate is a graph output) leaves the `chain_nodes` nodes, else one
// node runs, `fused` ("op:kernel").
void ExpectChainFusesWithItsBits(const Model& m, const Tensor& x, bool kept, size_t chain_nodes,
                                 const std::string& fused, bool as_reference) {
  auto run = [&](bool reference, bool fuse, int threads, std::vector<std::string>* kernels) {
    return RunFusedModel(m, x, reference, fuse, threads, kernels, /*kernel_ops=*/false);
  };
  const Tensor want = run(true, false, 1, nullptr);
  ExpectClose(run(true, true, 1, nullptr), want, 0.0f);
  std::vector<std::string> kernels;
  const Tensor got = run(false, true, 1, &kernels);
  ExpectClose(got, run(false, false, 1, nullptr), 0.0f);  // the unfused fast nodes' bits
  if (as_reference) ExpectClose(got, want, 0.0f);
  ExpectClose(run(false, true, 3, nullptr), got, 0.0f);
  if (kept) {
    EXPECT_EQ(kernels.size(), chain_nodes);
  } else {
    EXPECT_EQ(kernels, std::vector<std::string>{fused});
  }
}

// Mul(x, Sigmoid(x)) in either order fuses into one sparq.Silu node
// (runtime/passes/float_fusion.h) on the sigmoid_f32 row: on the reference kernels
// the fused graph gives the two nodes' bits; on the fast ones within
// kSigmoidF32AbsTol * max(1, |x|) (portable: the same bits), and the same
// bits for 1 and 3 threads. A Sigmoid output with another reader stays.
TEST_P(ActivationF32Test, SiluFusesIntoOneNode) {
  Tensor x = testing::RandomFloats({3, 7, 41, 43}, 31, -12.0f, 12.0f, 0.0f);
  x.data<float>()[0] = -std::numeric_limits<float>::infinity();
  x.data<float>()[1] = std::numeric_limits<float>::quiet_NaN();
  for (int variant = 0; variant < 3; ++variant) {
    SCOPED_TRACE("variant " + std::to_string(variant));
    Model m;
    m.opset_imports = {{"", 13}};
    m.graph.inputs.push_back(testing::FloatInput("x", {{3, ""}, {7, ""}, {41, ""}, {43, ""}}));
    m.graph.outputs.push_back(testing::FloatInput("y", {}));
    m.graph.nodes.push_back({"sig", "Sigmoid", "", {"x"}, {"s"}, {}, ""});
    m.graph.nodes.push_back({"mul", "Mul", "", variant == 1 ? std::vector<std::string>{"s", "x"}
                                                             : std::vector<std::string>{"x", "s"},
                             {"y"}, {}, ""});
    if (variant == 2) m.graph.outputs.push_back(testing::FloatInput("s", {}));
    auto run = [&](bool reference, bool fuse, int threads, std::vector<std::string>* kernels) {
      return RunFusedModel(m, x, reference, fuse, threads, kernels, /*kernel_ops=*/false);
    };
    const Tensor want = run(true, false, 1, nullptr);
    ExpectClose(run(true, true, 1, nullptr), want, 0.0f);  // the fused node's reference: the two nodes' bits
    std::vector<std::string> kernels;
    const Tensor got = run(false, true, 1, &kernels);
    if (variant == 2) {
      EXPECT_EQ(kernels.size(), 2u);
      continue;
    }
    ASSERT_EQ(kernels.size(), 1u);
    EXPECT_EQ(kernels[0], std::string("Silu:") + SelectCpuKernel(CpuOp::kSigmoidF32).name);
    const float tol = Tolerance(CpuOp::kSigmoidF32, cpu::kSigmoidF32AbsTol);
    for (int64_t i = 0; i < got.numel(); ++i) {
      const float a = got.data<float>()[i], b = want.data<float>()[i], xi = x.data<float>()[i];
      if (std::isnan(b) || tol == 0) {
        EXPECT_EQ(std::isnan(a), std::isnan(b)) << i;
        if (!std::isnan(b)) ASSERT_EQ(std::memcmp(&a, &b, 4), 0) << i;
      } else {
        ASSERT_NEAR(a, b, tol * std::max(1.0f, std::fabs(xi))) << i;
      }
    }
    ExpectClose(run(false, true, 3, nullptr), got, 0.0f);
  }
}

// Conv -> x * Sigmoid(x) fuses into one ai.sparq FusedConv (activation
// "Silu", runtime/passes/float_fusion.h) whose gemm_f32 / depthwise_f32 rows apply
// the sigmoid_f32 row to each tile as it is stored: the bits of the unfused
// Conv -> sparq.Silu on the same ISA, the reference's twin the bits of the
// reference's two nodes, within the FP32 tolerance of the reference, and the
// same bits for 1 and 2 threads. Geometries: the shifted (stride 1), im2col
// (stride 2), pointwise-rows (1x1 on 7 x 7) and depthwise paths.
TEST_P(ActivationF32Test, ConvSiluFusesIntoTheConvEpilogue) {
  struct Case {
    int64_t c, m, k, stride, side, group;
    const char* kernel;
  };
  const Case cases[] = {{8, 24, 3, 1, 13, 1, "FusedConv:gemm_f32"},
                        {16, 20, 3, 2, 17, 1, "FusedConv:gemm_f32"},
                        {32, 48, 1, 1, 7, 1, "FusedConv:gemm_f32"},
                        {16, 16, 3, 1, 11, 16, "FusedConv:depthwise_f32"}};
  for (const Case& c : cases) {
    SCOPED_TRACE(std::string(c.kernel) + " k" + std::to_string(c.k) + " s" + std::to_string(c.stride));
    Model m;
    m.opset_imports = {{"", 13}};
    m.graph.inputs.push_back(testing::FloatInput("x", {{2, ""}, {c.c, ""}, {c.side, ""}, {c.side, ""}}));
    m.graph.outputs.push_back(testing::FloatInput("y", {}));
    m.graph.initializers["w"] = testing::RandomFloats({c.m, c.c / c.group, c.k, c.k}, 3, -0.5f, 0.5f, 0.0f);
    m.graph.initializers["b"] = testing::RandomFloats({c.m}, 4, -1.0f, 1.0f, 0.0f);
    const int64_t pad = c.k / 2;
    m.graph.nodes.push_back({"conv", "Conv", "", {"x", "w", "b"}, {"t"},
                             {Attribute::Ints("strides", {c.stride, c.stride}),
                              Attribute::Ints("pads", {pad, pad, pad, pad}), Attribute::Int("group", c.group)},
                             ""});
    m.graph.nodes.push_back({"sig", "Sigmoid", "", {"t"}, {"s"}, {}, ""});
    m.graph.nodes.push_back({"mul", "Mul", "", {"s", "t"}, {"y"}, {}, ""});
    const Tensor x = testing::RandomFloats({2, c.c, c.side, c.side}, 5, -6.0f, 6.0f, 0.0f);
    auto run = [&](bool reference, bool fuse, int threads, std::vector<std::string>* kernels) {
      return RunFusedModel(m, x, reference, fuse, threads, kernels, /*kernel_ops=*/true);
    };
    const Tensor want = run(true, false, 1, nullptr);
    ExpectClose(run(true, true, 1, nullptr), want, 0.0f);  // the reference twin: the two nodes' bits
    std::vector<std::string> kernels;
    const Tensor got = run(false, true, 1, &kernels);
    ASSERT_EQ(kernels.size(), 1u);
    EXPECT_EQ(kernels[0], c.kernel);
    ExpectClose(got, run(false, false, 1, nullptr), 0.0f);  // unfused Conv, Sigmoid, Mul on this ISA
    float peak = 0.0f;
    for (int64_t i = 0; i < want.numel(); ++i) peak = std::max(peak, std::fabs(want.data<float>()[i]));
    ExpectClose(got, want, testing::kF32RelTol * peak + cpu::kSigmoidF32AbsTol * std::max(1.0f, peak));
    ExpectClose(run(false, true, 2, nullptr), got, 0.0f);
  }
}

// Paddle's HardSwish, Div(Mul(x, Clip(Add(x, 3), 0, 6)), 6) with its operands
// in either order, fuses into one sparq.HardSwishChain node on the forced
// ISA's hardswish_chain_f32 row: the four nodes' bits on the reference and
// the fast kernels (NaN, infinities and -0
// included), the same bits for 1 and 3 threads; an intermediate that is a
// graph output keeps the four nodes.
TEST_P(ActivationF32Test, HardSwishChainFusesIntoOneNode) {
  Tensor x = testing::RandomFloats({2, 5, 37, 41}, 17, -9.0f, 9.0f, 0.0f);
  const float special[] = {0.0f, -0.0f, -3.0f, 3.0f, std::numeric_limits<float>::infinity(),
                           -std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN()};
  std::copy(std::begin(special), std::end(special), x.data<float>());
  for (int variant = 0; variant < 3; ++variant) {
    SCOPED_TRACE("variant " + std::to_string(variant));
    Model m;
    m.opset_imports = {{"", 13}};
    m.graph.inputs.push_back(testing::FloatInput("x", {{2, ""}, {5, ""}, {37, ""}, {41, ""}}));
    m.graph.outputs.push_back(testing::FloatInput("y", {}));
    m.graph.initializers["three"] = Tensor::FromVector<float>({1}, {3.0f});
    m.graph.initializers["zero"] = Tensor::Scalar<float>(0.0f);
    m.graph.initializers["six"] = Tensor::FromVector<float>({1}, {6.0f});
    const bool swap = variant == 1;
    m.graph.nodes.push_back({"add", "Add", "", swap ? std::vector<std::string>{"three", "x"}
                                                     : std::vector<std::string>{"x", "three"}, {"a"}, {}, ""});
    m.graph.nodes.push_back({"clip", "Clip", "", {"a", "zero", "six"}, {"c"}, {}, ""});
    m.graph.nodes.push_back({"mul", "Mul", "", swap ? std::vector<std::string>{"c", "x"}
                                                     : std::vector<std::string>{"x", "c"}, {"m"}, {}, ""});
    m.graph.nodes.push_back({"div", "Div", "", {"m", "six"}, {"y"}, {}, ""});
    if (variant == 2) m.graph.outputs.push_back(testing::FloatInput("c", {}));
    ExpectChainFusesWithItsBits(m, x, variant == 2, 4,
                                std::string("HardSwishChain:") + SelectCpuKernel(CpuOp::kHardSwishChainF32).name,
                                /*as_reference=*/true);
  }
}

// The erf GELU of [2, 5, 37, 41] x in five nodes: x * (1 + erf(x / sqrt 2))
// * 0.5 as BERT's exporters write it, or with the scale on the erf term, x *
// ((1 + erf(x / sqrt 2)) * 0.5), as torch.onnx's dynamo exporter does.
// Variant 1 swaps every commutative operand pair; variant 2 makes the erf's
// output a graph output too (the chain must not fuse).
Model GeluErfModel(bool scale_on_erf_term, int variant) {
  Model m;
  m.opset_imports = {{"", 13}};
  m.graph.inputs.push_back(testing::FloatInput("x", {{2, ""}, {5, ""}, {37, ""}, {41, ""}}));
  m.graph.outputs.push_back(testing::FloatInput("y", {}));
  m.graph.initializers["sqrt2"] = Tensor::Scalar<float>(1.41421356f);
  m.graph.initializers["one"] = Tensor::FromVector<float>({1}, {1.0f});
  m.graph.initializers["half"] = Tensor::Scalar<float>(0.5f);
  const bool swap = variant == 1;
  auto ordered = [&](const char* a, const char* b) {
    return swap ? std::vector<std::string>{b, a} : std::vector<std::string>{a, b};
  };
  m.graph.nodes.push_back({"div", "Div", "", {"x", "sqrt2"}, {"d"}, {}, ""});
  m.graph.nodes.push_back({"erf", "Erf", "", {"d"}, {"e"}, {}, ""});
  m.graph.nodes.push_back({"add", "Add", "", ordered("e", "one"), {"a"}, {}, ""});
  if (scale_on_erf_term) {
    m.graph.nodes.push_back({"mul_half", "Mul", "", ordered("a", "half"), {"h"}, {}, ""});
    m.graph.nodes.push_back({"mul", "Mul", "", ordered("x", "h"), {"y"}, {}, ""});
  } else {
    m.graph.nodes.push_back({"mul", "Mul", "", ordered("x", "a"), {"m"}, {}, ""});
    m.graph.nodes.push_back({"mul_half", "Mul", "", ordered("m", "half"), {"y"}, {}, ""});
  }
  if (variant == 2) m.graph.outputs.push_back(testing::FloatInput("e", {}));
  return m;
}

// BERT's GELU, Mul(Mul(x, Add(Erf(Div(x, sqrt 2)), 1)), 0.5) with the
// commutative operands in either order, fuses into one sparq.GeluErfChain
// node on the forced ISA's gelu_erf_chain_f32 row: the five nodes' bits on
// the reference kernels and on the fast ones (whose Erf row is the same
// ISA's), NaN and infinities included; the same bits for 1 and 3 threads; an
// intermediate that is a graph output keeps the five nodes.
TEST_P(ActivationF32Test, GeluErfChainFusesIntoOneNode) {
  Tensor x = testing::RandomFloats({2, 5, 37, 41}, 19, -9.0f, 9.0f, 0.0f);
  const float special[] = {0.0f, -0.0f, 1e-30f, -12.0f, 12.0f, std::numeric_limits<float>::infinity(),
                           -std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN()};
  std::copy(std::begin(special), std::end(special), x.data<float>());
  for (int variant = 0; variant < 3; ++variant) {
    SCOPED_TRACE("variant " + std::to_string(variant));
    ExpectChainFusesWithItsBits(GeluErfModel(/*scale_on_erf_term=*/false, variant), x, variant == 2, 5,
                                std::string("GeluErfChain:") + SelectCpuKernel(CpuOp::kGeluErfChainF32).name,
                                /*as_reference=*/false);
  }
}

// The same GELU as torch.onnx's dynamo exporter writes it, the scale on the
// erf term: Mul(x, Mul(Add(Erf(Div(x, sqrt 2)), 1), 0.5)), operands in either
// order, fuses into one sparq.GeluErfScaledChain node on the forced ISA's
// erf_f32 row: the five nodes' bits on the reference kernels and on the fast
// ones, NaN and infinities included; the same bits for 1 and 3 threads; an
// intermediate that is a graph output keeps the five nodes.
TEST_P(ActivationF32Test, GeluErfScaledChainFusesIntoOneNode) {
  Tensor x = testing::RandomFloats({2, 5, 37, 41}, 29, -9.0f, 9.0f, 0.0f);
  const float special[] = {0.0f, -0.0f, 1e-30f, -12.0f, 12.0f, 3e38f, std::numeric_limits<float>::infinity(),
                           -std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN()};
  std::copy(std::begin(special), std::end(special), x.data<float>());
  for (int variant = 0; variant < 3; ++variant) {
    SCOPED_TRACE("variant " + std::to_string(variant));
    ExpectChainFusesWithItsBits(GeluErfModel(/*scale_on_erf_term=*/true, variant), x, variant == 2, 5,
                                std::string("GeluErfScaledChain:") + SelectCpuKernel(CpuOp::kErfF32).name,
                                /*as_reference=*/false);
  }
}

// JAX's tanh GELU as jax2tf writes it (magika), x * (0.5 * (1 + tanh(s * (x
// + x * (x * (c * x)))))) in nine nodes with the operands in either order,
// fuses into one sparq.GeluTanhChain node: the nine nodes' bits on the
// reference kernels and on the fast ones (the same binary_f32 and tanh_f32
// rows, a block at a time), NaN and infinities included; the same bits for 1
// and 3 threads; an intermediate that is a graph output keeps the nine nodes.
TEST_P(ActivationF32Test, GeluTanhChainFusesIntoOneNode) {
  Tensor x = testing::RandomFloats({2, 5, 37, 41}, 23, -9.0f, 9.0f, 0.0f);
  const float special[] = {0.0f, -0.0f, 1e-30f, -12.0f, 12.0f, 3e12f, std::numeric_limits<float>::infinity(),
                           -std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN()};
  std::copy(std::begin(special), std::end(special), x.data<float>());
  for (int variant = 0; variant < 3; ++variant) {
    SCOPED_TRACE("variant " + std::to_string(variant));
    Model m;
    m.opset_imports = {{"", 13}};
    m.graph.inputs.push_back(testing::FloatInput("x", {{2, ""}, {5, ""}, {37, ""}, {41, ""}}));
    m.graph.outputs.push_back(testing::FloatInput("y", {}));
    m.graph.initializers["cube"] = Tensor::Scalar<float>(0.044715f);
    m.graph.initializers["inner"] = Tensor::Scalar<float>(0.7978846f);
    m.graph.initializers["one"] = Tensor::FromVector<float>({1, 1, 1}, {1.0f});
    m.graph.initializers["half"] = Tensor::Scalar<float>(0.5f);
    const bool swap = variant == 1;
    auto ordered = [&](const char* a, const char* b) {
      return swap ? std::vector<std::string>{b, a} : std::vector<std::string>{a, b};
    };
    m.graph.nodes.push_back({"m0", "Mul", "", ordered("cube", "x"), {"v0"}, {}, ""});
    m.graph.nodes.push_back({"m1", "Mul", "", ordered("x", "v0"), {"v1"}, {}, ""});
    m.graph.nodes.push_back({"m2", "Mul", "", ordered("x", "v1"), {"v2"}, {}, ""});
    m.graph.nodes.push_back({"a0", "Add", "", ordered("x", "v2"), {"v3"}, {}, ""});
    m.graph.nodes.push_back({"m3", "Mul", "", ordered("inner", "v3"), {"v4"}, {}, ""});
    m.graph.nodes.push_back({"tanh", "Tanh", "", {"v4"}, {"v5"}, {}, ""});
    m.graph.nodes.push_back({"a1", "Add", "", ordered("one", "v5"), {"v6"}, {}, ""});
    m.graph.nodes.push_back({"m4", "Mul", "", ordered("half", "v6"), {"v7"}, {}, ""});
    m.graph.nodes.push_back({"m5", "Mul", "", ordered("x", "v7"), {"y"}, {}, ""});
    if (variant == 2) m.graph.outputs.push_back(testing::FloatInput("v3", {}));
    ExpectChainFusesWithItsBits(m, x, variant == 2, 9,
                                std::string("GeluTanhChain:") + SelectCpuKernel(CpuOp::kTanhF32).name,
                                /*as_reference=*/false);
  }
}

TEST_P(ActivationF32Test, SoftmaxMatchesReference) {
  for (Shape shape : {Shape{1, 1}, Shape{3, 7}, Shape{2, 12, 64, 64}, Shape{5, 1000}, Shape{4, 9}, Shape{1, 4, 16, 1000}}) {
    Tensor x = testing::RandomFloats(shape, 11, -20.0f, 20.0f, 0.0f);
    SCOPED_TRACE(ShapeToString(shape));
    ExpectClose(RunOne("Softmax", x, {}, false), RunOne("Softmax", x, {}, true), Tolerance(CpuOp::kSoftmaxF32, cpu::kSoftmaxF32AbsTol));
    // Other axes: the softmax_columns_f32 row (1 and 2 threads: the same bits).
    for (int64_t axis : {int64_t{0}, static_cast<int64_t>(shape.size()) - 2}) {
      std::string kernel;
      const Tensor got = RunOne("Softmax", x, {Attribute::Int("axis", axis)}, false, 1, nullptr, &kernel);
      ExpectClose(got, RunOne("Softmax", x, {Attribute::Int("axis", axis)}, true),
                  Tolerance(CpuOp::kSoftmaxColumnsF32, cpu::kSoftmaxF32AbsTol));
      ExpectClose(RunOne("Softmax", x, {Attribute::Int("axis", axis)}, false, 2), got, 0.0f);
      EXPECT_EQ(kernel, SelectCpuKernel(CpuOp::kSoftmaxColumnsF32).name);
    }
  }
}

// A column of -inf has no maximum to subtract: the reference's e^(-inf - -inf)
// is NaN, and so is every value of that column (onnxruntime's too), where the
// AVX-512 row's clamped exponential gave 1/n. A NaN anywhere in a column
// makes the column NaN; the other columns keep their values.
TEST_P(ActivationF32Test, SoftmaxColumnOfMinusInfinityIsNan) {
  const float ninf = -std::numeric_limits<float>::infinity();
  Tensor x = testing::RandomFloats({4, 3, 21}, 17, -5.0f, 5.0f, 0.0f);
  float* v = x.data<float>();
  for (int64_t k = 0; k < 3; ++k) {
    v[k * 21 + 2] = ninf;                              // column 2 of image 0: all -inf
    v[2 * 63 + k * 21 + 18] = ninf;                    // column 18 of image 2 (past the first 16 lanes)
  }
  v[3 * 63 + 1 * 21 + 7] = std::numeric_limits<float>::quiet_NaN();  // a NaN in column 7 of image 3
  v[1 * 63 + 5] = ninf;                                // one -inf of three: an ordinary column
  const std::vector<Attribute> axis1 = {Attribute::Int("axis", 1)};
  const Tensor want = RunOne("Softmax", x, axis1, true);
  ASSERT_TRUE(std::isnan(want.data<float>()[2]) && std::isnan(want.data<float>()[2 * 63 + 18]));
  std::string kernel;
  const Tensor got = RunOne("Softmax", x, axis1, false, 1, nullptr, &kernel);
  EXPECT_EQ(kernel, SelectCpuKernel(CpuOp::kSoftmaxColumnsF32).name);
  ExpectClose(got, want, Tolerance(CpuOp::kSoftmaxColumnsF32, cpu::kSoftmaxF32AbsTol));
  for (int64_t i = 0; i < want.numel(); ++i)
    EXPECT_EQ(std::isnan(got.data<float>()[i]), std::isnan(want.data<float>()[i])) << i;
}

TEST_P(ActivationF32Test, PowOfTwoIsExact) {
  Tensor x = testing::RandomFloats({1000}, 5, -1e20f, 1e20f, 0.0f);
  x.data<float>()[0] = 3e30f;  // overflows to inf, as the reference does
  for (const Tensor& e : {Tensor::Scalar<float>(2.0f), Tensor::Scalar<int64_t>(2), Tensor::Scalar<float>(3.0f)})
    ExpectClose(RunOne("Pow", x, {}, false, 1, &e), RunOne("Pow", x, {}, true, 1, &e), 0.0f);
}

// ReduceMean over the last axis (mean_rows_f32): the reference's bits, with
// keepdims either way, rows not a multiple of the row kernel's 8, 1 and 3
// threads; the axes input of opset 18; other axes run the reference kernel.
TEST_P(ActivationF32Test, ReduceMeanOverTheLastAxisIsExact) {
  for (Shape shape : {Shape{1, 64, 384}, Shape{3, 7}, Shape{5, 1000}, Shape{2, 3, 1}, Shape{9, 17}, Shape{11}}) {
    Tensor x = testing::RandomFloats(shape, 13, -3.0f, 5.0f, 0.0f);
    x.data<float>()[0] = 1e30f;  // a large value: double sums keep the rest
    const int64_t last = static_cast<int64_t>(shape.size()) - 1;
    for (int64_t keepdims : {1, 0}) {
      for (int64_t axis : {int64_t{-1}, last}) {
        SCOPED_TRACE(ShapeToString(shape) + " keepdims " + std::to_string(keepdims) + " axis " + std::to_string(axis));
        const std::vector<Attribute> attrs = {Attribute::Ints("axes", {axis}), Attribute::Int("keepdims", keepdims)};
        std::string kernel;
        const Tensor want = RunOne("ReduceMean", x, attrs, true);
        ExpectClose(RunOne("ReduceMean", x, attrs, false, 1, nullptr, &kernel), want, 0.0f);
        EXPECT_EQ(kernel, SelectCpuKernel(CpuOp::kMeanRowsF32).name);
        ExpectClose(RunOne("ReduceMean", x, attrs, false, 3), want, 0.0f);
      }
    }
    if (shape.size() > 1) {
      const std::vector<Attribute> first = {Attribute::Ints("axes", {0})};
      ExpectClose(RunOne("ReduceMean", x, first, false), RunOne("ReduceMean", x, first, true), 0.0f);
    }
  }
  // Opset 18: the axes are an input.
  Model m;
  m.opset_imports = {{"", 18}};
  m.graph.inputs.push_back(testing::FloatInput("x", {{4, ""}, {70, ""}}));
  m.graph.outputs.push_back(testing::FloatInput("y", {}));
  m.graph.initializers["axes"] = Tensor::FromVector<int64_t>({1}, {-1});
  m.graph.nodes.push_back({"n", "ReduceMean", "", {"x", "axes"}, {"y"}, {}, ""});
  const Tensor x = testing::RandomFloats({4, 70}, 14, -3.0f, 5.0f, 0.0f);
  TensorMap want, got;
  for (bool reference : {true, false}) {
    ExecutorOptions options;
    options.backend = reference ? "reference" : "cpu";
    auto exec = Executor::Create(m, options);
    ASSERT_TRUE(exec.ok()) << exec.status().ToString();
    ASSERT_TRUE((*exec)->Run({{"x", x}}, reference ? &want : &got).ok());
    if (!reference) EXPECT_EQ((*exec)->NodeKernels().at(0).kernel, SelectCpuKernel(CpuOp::kMeanRowsF32).name);
  }
  ExpectClose(got.at("y"), want.at("y"), 0.0f);
}

// Sqrt on sqrt_f32: the reference's bits (negative values, zeros of both
// signs, infinities, NaN: a NaN either way), 1 and 3 threads.
TEST_P(ActivationF32Test, SqrtIsTheReferencesBits) {
  for (int64_t n : {1, 9, 516, 40000}) {
    Tensor x = testing::RandomFloats({n}, static_cast<uint32_t>(n) + 3, -2.0f, 1e6f, 0.0f);
    if (n >= 9) {
      const float special[] = {0.0f, -0.0f, 1e-40f, -1e-30f, 2.0f, -4.0f, std::numeric_limits<float>::infinity(),
                               -std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN()};
      std::copy(std::begin(special), std::end(special), x.data<float>());
    }
    std::string kernel;
    const Tensor want = RunOne("Sqrt", x, {}, true);
    ExpectClose(RunOne("Sqrt", x, {}, false, 1, nullptr, &kernel), want, 0.0f);
    EXPECT_EQ(kernel, "sqrt_f32");
    ExpectClose(RunOne("Sqrt", x, {}, false, 3), want, 0.0f);
  }
}

// One Reduce* node over `axes` (none: no axes given), the axes an input from
// opset `axes_input_since` on, else an attribute: the CPU's output on 1 and 3
// threads is the reference's bit for bit, and its kernel the row `kernel`
// (which may hand the node to the reference inside).
void ExpectReduceIsTheReference(const char* op, const Tensor& x, int opset, int64_t axes_input_since, int64_t keepdims,
                                const std::vector<int64_t>& axes, const std::string& kernel) {
  Model m;
  m.opset_imports = {{"", opset}};
  m.graph.inputs.push_back(testing::FloatInput("x", {}));
  m.graph.inputs.back().has_shape = false;
  m.graph.outputs.push_back(testing::FloatInput("y", {}));
  Node node{"n", op, "", {"x"}, {"y"}, {Attribute::Int("keepdims", keepdims)}, ""};
  if (!axes.empty() && opset >= axes_input_since) {
    m.graph.initializers["axes"] = Tensor::FromVector<int64_t>({static_cast<int64_t>(axes.size())}, std::vector<int64_t>(axes));
    node.inputs.push_back("axes");
  } else if (!axes.empty()) {
    node.attributes.push_back(Attribute::Ints("axes", axes));
  }
  m.graph.nodes.push_back(node);
  testing::ExpectSameBitsAsReference(m, {{"x", x}}, kernel.c_str());
}

// ReduceSum over the last axis (sum_rows_f32): the reference's bits with the
// axes attribute (opset 11) and input (opset 13, basic-pitch's pairs), keepdims
// either way, 1 and 3 threads; other axes and no axes run the reference kernel.
TEST_P(ActivationF32Test, ReduceSumOverTheLastAxisIsExact) {
  for (Shape shape : {Shape{1, 309, 17, 2}, Shape{3, 7}, Shape{5, 1000}, Shape{2, 3, 1}, Shape{11}}) {
    Tensor x = testing::RandomFloats(shape, 15, -3.0f, 5.0f, 0.0f);
    x.data<float>()[0] = 1e30f;  // a large value: double sums keep the rest
    const int64_t last = static_cast<int64_t>(shape.size()) - 1;
    for (int opset : {11, 13}) {
      for (int64_t keepdims : {1, 0}) {
        for (int64_t axis : {int64_t{-1}, last, int64_t{0}}) {
          for (bool no_axes : {false, true}) {
            SCOPED_TRACE(ShapeToString(shape) + " opset " + std::to_string(opset) + " keepdims " +
                         std::to_string(keepdims) + " axis " + std::to_string(axis) + (no_axes ? " (none)" : ""));
            ExpectReduceIsTheReference("ReduceSum", x, opset, 13, keepdims,
                                       no_axes ? std::vector<int64_t>{} : std::vector<int64_t>{axis}, "sum_rows_f32");
          }
        }
      }
    }
  }
}

// ReduceSum / ReduceMean / ReduceMax / ReduceMin of float32 over trailing
// axes (the last, the last two, all of them listed, or none given = all; the
// axes an attribute or an input by opset) run their rows with the reference's
// bits, NaN, infinities and zeros of both signs included, 1 and 3 threads;
// axes that are not trailing run the reference kernel.
TEST_P(ActivationF32Test, ReduceOverTrailingAxesIsExact) {
  struct OpCase {
    const char* op;
    int64_t axes_input_since;
    std::string kernel;
  };
  const OpCase ops[] = {{"ReduceSum", 13, "sum_rows_f32"},
                        {"ReduceMean", 18, SelectCpuKernel(CpuOp::kMeanRowsF32).name},
                        {"ReduceMax", 18, SelectCpuKernel(CpuOp::kMaxRowsF32).name},
                        {"ReduceMin", 18, "min_rows_f32"}};
  const Shape shape = {2, 3, 5, 7};
  Tensor x = testing::RandomFloats(shape, 41, -3.0f, 5.0f, 0.0f);
  const float special[] = {-0.0f, 0.0f, std::numeric_limits<float>::infinity(), -0.0f, 0.0f, -0.0f, 1e30f,
                           std::numeric_limits<float>::quiet_NaN(), -std::numeric_limits<float>::infinity()};
  std::copy(std::begin(special), std::end(special), x.data<float>() + 7);  // row 1 of the last axis on
  for (int64_t i = 0; i < 7; ++i) x.data<float>()[70 + i] = i % 2 ? 0.0f : -0.0f;  // a row of zeros only
  const std::vector<std::vector<int64_t>> axes_cases = {{3}, {-1}, {2, 3}, {-1, -2}, {0, 1, 2, 3}, {}, {0},
                                                         {1, 3}, {1}, {1, 2}, {-4, -3}};
  for (const OpCase& c : ops) {
    for (int opset : {13, 18}) {
      for (int64_t keepdims : {1, 0}) {
        for (const std::vector<int64_t>& axes : axes_cases) {
          std::string axes_text;
          for (int64_t a : axes) axes_text += std::to_string(a) + " ";
          SCOPED_TRACE(std::string(c.op) + " opset " + std::to_string(opset) + " keepdims " + std::to_string(keepdims) +
                       " axes " + axes_text);
          ExpectReduceIsTheReference(c.op, x, opset, c.axes_input_since, keepdims, axes, c.kernel);
        }
      }
    }
  }
}

// ReduceSum / ReduceMean over middle axes ([outer, n, inner], inner over
// several blocks of 64 columns and a partial one; magika's LayerNorm sums
// over 2,048 rows): the reference's bits, 1 and 3 threads, keepdims either way.
TEST_P(ActivationF32Test, ReduceSumOverMiddleAxesIsExact) {
  Tensor x = testing::RandomFloats({2, 300, 150}, 47, -3.0f, 5.0f, 0.0f);
  x.data<float>()[151] = 1e30f;  // a large value: double sums keep the rest
  for (int64_t keepdims : {1, 0}) {
    for (const std::vector<int64_t>& axes : std::vector<std::vector<int64_t>>{{1}, {0, 1}, {-2}}) {
      SCOPED_TRACE("keepdims " + std::to_string(keepdims) + " axes " + std::to_string(axes.front()));
      ExpectReduceIsTheReference("ReduceSum", x, 13, 13, keepdims, axes, "sum_rows_f32");
      ExpectReduceIsTheReference("ReduceMean", x, 18, 18, keepdims, axes, SelectCpuKernel(CpuOp::kMeanRowsF32).name);
    }
  }
}

// ReduceMin over long rows (min_rows_f32's sixteen lanes and their tail):
// the reference's bits, the first NaN's payload and sign and the first of
// equal zeros included, for rows with the NaN or the zero in the body, in the
// tail, or none; 1 and 3 threads.
TEST_P(ActivationF32Test, ReduceMinKeepsTheFirstNaNAndZero) {
  const Shape shape = {6, 1003};
  Tensor x = testing::RandomFloats(shape, 43, 0.5f, 5.0f, 0.0f);
  float* v = x.data<float>();
  uint32_t bits = 0xffc01234u;  // a negative NaN with a payload
  float nan_a, nan_b;
  std::memcpy(&nan_a, &bits, 4);
  bits = 0x7fc00077u;
  std::memcpy(&nan_b, &bits, 4);
  v[1 * 1003 + 37] = nan_a;  // row 1: two NaNs, the first wins
  v[1 * 1003 + 900] = nan_b;
  v[2 * 1003 + 1001] = nan_b;  // row 2: a NaN in the tail
  v[3 * 1003 + 5] = -0.0f;     // row 3: zeros of both signs, -0 first
  v[3 * 1003 + 17] = 0.0f;
  v[4 * 1003 + 999] = 0.0f;  // row 4: +0 in the tail, then -0
  v[4 * 1003 + 1002] = -0.0f;
  v[5 * 1003 + 500] = -7.0f;  // row 5: an ordinary minimum
  for (int64_t keepdims : {1, 0}) {
    Model m;
    m.opset_imports = {{"", 13}};
    m.graph.inputs.push_back(testing::FloatInput("x", {}));
    m.graph.inputs.back().has_shape = false;
    m.graph.outputs.push_back(testing::FloatInput("y", {}));
    m.graph.nodes.push_back({"n", "ReduceMin", "", {"x"}, {"y"},
                             {Attribute::Ints("axes", {1}), Attribute::Int("keepdims", keepdims)}, ""});
    testing::ExpectSameBitsAsReference(m, {{"x", x}}, "min_rows_f32");
    const testing::NodeRun reference = testing::RunSingleNode(m, "x", x, /*reference=*/true, 1);
    ASSERT_TRUE(reference.status.ok()) << reference.status.ToString();
    const Tensor& want = reference.y;
    uint32_t first_nan = 0;
    std::memcpy(&first_nan, want.data<float>() + 1, 4);
    EXPECT_EQ(first_nan, 0xffc01234u);
    EXPECT_TRUE(std::signbit(want.data<float>()[3]));
    EXPECT_FALSE(std::signbit(want.data<float>()[4]));
  }
}

// GlobalAveragePool of float32 runs mean_rows_f32: the reference's bits, for
// any plane size and thread count.
TEST_P(ActivationF32Test, GlobalAveragePoolIsExact) {
  for (Shape shape : {Shape{1, 96, 20, 20}, Shape{2, 3, 7, 5}, Shape{1, 17, 1, 1}, Shape{3, 5, 11}, Shape{1, 2, 3, 4, 5}}) {
    SCOPED_TRACE(ShapeToString(shape));
    Tensor x = testing::RandomFloats(shape, 17, -3.0f, 5.0f, 0.0f);
    x.data<float>()[0] = 1e30f;
    std::string kernel;
    const Tensor want = RunOne("GlobalAveragePool", x, {}, true);
    ExpectClose(RunOne("GlobalAveragePool", x, {}, false, 1, nullptr, &kernel), want, 0.0f);
    EXPECT_EQ(kernel, SelectCpuKernel(CpuOp::kMeanRowsF32).name);
    ExpectClose(RunOne("GlobalAveragePool", x, {}, false, 3), want, 0.0f);
  }
}

TEST_P(ActivationF32Test, SameBitsForOneAndTwoThreads) {
  Tensor x = testing::RandomFloats({2, 12, 64, 64}, 9, -5.0f, 5.0f, 0.0f);
  for (const char* op : {"Erf", "Softmax", "Sigmoid"}) {
    SCOPED_TRACE(op);
    ExpectClose(RunOne(op, x, {}, false, 2), RunOne(op, x, {}, false, 1), 0.0f);
  }
}

// `eval --verbose` names the table row that the forced ISA selects
// (SPARQ_ISA=portable: the portable rows).
TEST_P(ActivationF32Test, NodesNameTheirTableRow) {
  const Tensor x = testing::RandomFloats({4, 9}, 3, -1.0f, 1.0f, 0.0f);
  const Tensor two = Tensor::Scalar<float>(2.0f);
  const struct {
    const char* op;
    CpuOp row;
    const Tensor* second;
  } cases[] = {{"Erf", CpuOp::kErfF32, nullptr},
               {"Softmax", CpuOp::kSoftmaxF32, nullptr},
               {"Pow", CpuOp::kPow2F32, &two},
               {"Sigmoid", CpuOp::kSigmoidF32, nullptr},
               {"Tanh", CpuOp::kTanhF32, nullptr}};
  for (const auto& c : cases) {
    std::string kernel;
    RunOne(c.op, x, {}, false, 1, c.second, &kernel);
    EXPECT_EQ(kernel, SelectCpuKernel(c.row).name) << c.op;
    if (GetParam() == CpuIsa::kPortable) EXPECT_EQ(kernel, std::string(CpuOpName(c.row)) + "_portable");
  }
}

INSTANTIATE_TEST_SUITE_P(CpuKernels, ActivationF32Test, ::testing::ValuesIn(kAllCpuIsas), testing::IsaParamName);

}  // namespace
}  // namespace sparq
