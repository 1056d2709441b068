// The executor: input checks, error messages, value lifetimes, determinism.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/parallel.h"
#include "sparq/executor.h"
#include "sparq/onnx_io.h"
#include "test_util.h"
#include "tests/kernels/isa_sweep.h"

namespace sparq {
namespace {

// x[batch,4] -> MatMul(W[4,3]) -> Add(b) -> Relu -> y
Model Mlp() {
  Model m;
  m.opset_imports = {{"", 17}};
  Graph& g = m.graph;
  g.inputs.push_back(testing::FloatInput("x", {{-1, "batch"}, {4, ""}}));
  g.outputs.push_back(testing::FloatInput("y", {{-1, "batch"}, {3, ""}}));
  g.initializers["W"] = testing::RandomFloats({4, 3}, 1);
  g.initializers["b"] = testing::RandomFloats({3}, 2);
  g.nodes.push_back({"mm", "MatMul", "", {"x", "W"}, {"h"}, {}, ""});
  g.nodes.push_back({"add", "Add", "", {"h", "b"}, {"z"}, {}, ""});
  g.nodes.push_back({"relu", "Relu", "", {"z"}, {"y"}, {}, ""});
  return m;
}

std::unique_ptr<Executor> Make(const Model& m, int threads = 1) {
  auto e = Executor::Create(m, ExecutorOptions{threads});
  EXPECT_TRUE(e.ok()) << e.status().ToString();
  return e.ok() ? std::move(e).value() : nullptr;
}

TEST(Executor, RunsAndMatchesHandComputation) {
  Model m = Mlp();
  auto exec = Make(m);
  ASSERT_NE(exec, nullptr);
  Tensor x = testing::RandomFloats({2, 4}, 3);
  TensorMap out;
  ASSERT_TRUE(exec->Run({{"x", x}}, &out).ok());
  const Tensor& y = out.at("y");
  ASSERT_EQ(y.shape(), (Shape{2, 3}));
  const float* w = m.graph.initializers["W"].data<float>();
  const float* b = m.graph.initializers["b"].data<float>();
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j) {
      float acc = 0;
      for (int k = 0; k < 4; ++k) acc += x.data<float>()[i * 4 + k] * w[k * 3 + j];
      acc += b[j];
      EXPECT_NEAR(y.data<float>()[i * 3 + j], std::max(acc, 0.0f), 1e-6f);
    }
}

// One map passed to run after run (what the evaluator does) is refilled in
// place; a map holding other names, or extra outputs, is cleared first; a
// run with extra outputs keeps them alive without changing later runs.
TEST(Executor, OutputMapReusedAcrossRuns) {
  auto exec = Make(Mlp());
  ASSERT_NE(exec, nullptr);
  TensorMap out = {{"stale", testing::RandomFloats({1}, 9)}};
  for (int run = 0; run < 3; ++run) {
    const Tensor x = testing::RandomFloats({2 + run, 4}, 10 + run);
    RunOptions opt;
    if (run == 1) opt.extra_outputs = {"z"};
    ASSERT_TRUE(exec->Run({{"x", x}}, &out, opt).ok());
    TensorMap fresh;
    ASSERT_TRUE(exec->Run({{"x", x}}, &fresh).ok());
    ASSERT_EQ(out.size(), run == 1 ? 2u : 1u);
    EXPECT_EQ(out.count("stale"), 0u);
    ASSERT_EQ(out.at("y").shape(), fresh.at("y").shape());
    EXPECT_EQ(std::memcmp(out.at("y").raw_data(), fresh.at("y").raw_data(), fresh.at("y").nbytes()), 0);
  }
}

TEST(Executor, ExtraOutputsAndObserver) {
  auto exec = Make(Mlp());
  ASSERT_NE(exec, nullptr);
  RunOptions opt;
  opt.extra_outputs = {"h"};
  std::vector<std::string> seen;
  opt.on_node_outputs = [&](const Node& n, const std::vector<Tensor>& outs) {
    seen.push_back(n.op_type + ":" + ShapeToString(outs[0].shape()));
    return Status::OK();
  };
  TensorMap out;
  ASSERT_TRUE(exec->Run({{"x", testing::RandomFloats({5, 4}, 4)}}, &out, opt).ok());
  EXPECT_EQ(out.at("h").shape(), (Shape{5, 3}));
  EXPECT_EQ(seen, (std::vector<std::string>{"MatMul:[5, 3]", "Add:[5, 3]", "Relu:[5, 3]"}));
  opt.extra_outputs = {"nope"};
  Status st = exec->Run({{"x", testing::RandomFloats({5, 4}, 4)}}, &out, opt);
  EXPECT_EQ(st.code(), StatusCode::kNotFound);
}

TEST(Executor, WrongShapeNamesInputAndBothShapes) {
  auto exec = Make(Mlp());
  ASSERT_NE(exec, nullptr);
  TensorMap out;
  Status st = exec->Run({{"x", testing::RandomFloats({2, 5}, 5)}}, &out);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("input 'x' has shape [2, 5]"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("float32[batch, 4]"), std::string::npos) << st.message();
}

TEST(Executor, WrongTypeNamesInput) {
  auto exec = Make(Mlp());
  ASSERT_NE(exec, nullptr);
  TensorMap out;
  Status st = exec->Run({{"x", Tensor(DataType::kInt64, {2, 4})}}, &out);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("input 'x' has type int64"), std::string::npos) << st.message();
}

TEST(Executor, MissingAndUnknownInputs) {
  auto exec = Make(Mlp());
  ASSERT_NE(exec, nullptr);
  TensorMap out;
  Status st = exec->Run({}, &out);
  EXPECT_NE(st.message().find("missing input 'x'"), std::string::npos) << st.message();
  st = exec->Run({{"x", testing::RandomFloats({1, 4}, 6)}, {"q", Tensor()}}, &out);
  EXPECT_NE(st.message().find("'q' is not an input of the model (inputs: x)"), std::string::npos) << st.message();
}

TEST(Executor, UnsupportedOperatorNamesNodeOpAndOpset) {
  Model m = Mlp();
  m.graph.nodes[2].op_type = "FancyRelu";
  auto e = Executor::Create(m);
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.status().code(), StatusCode::kNotSupported);
  EXPECT_NE(e.status().message().find("FancyRelu (opset 17)"), std::string::npos) << e.status().message();
  EXPECT_NE(e.status().message().find("node 'relu'"), std::string::npos) << e.status().message();
}

TEST(Executor, KernelErrorsNameTheNode) {
  Model m = Mlp();
  m.graph.initializers["W"] = testing::RandomFloats({5, 3}, 7);  // K mismatch with x[.,4]
  auto exec = Make(m);
  ASSERT_NE(exec, nullptr);
  TensorMap out;
  Status st = exec->Run({{"x", testing::RandomFloats({2, 4}, 8)}}, &out);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("'mm'"), std::string::npos) << st.message();
}

TEST(Executor, SameResultForAnyThreadCount) {
  Model m = Mlp();
  m.graph.initializers["W"] = testing::RandomFloats({4, 3}, 9);
  Tensor x = testing::RandomFloats({64, 4}, 10);
  TensorMap one, four;
  ASSERT_TRUE(Make(m, 1)->Run({{"x", x}}, &one).ok());
  ASSERT_TRUE(Make(m, 4)->Run({{"x", x}}, &four).ok());
  EXPECT_TRUE(one.at("y").Equals(four.at("y")));
}

// A QLinearMatMul with a constant int8 weight: the executor packs it once for
// the fast INT8 GEMM (kernels/cpu) and gives the reference kernel's bytes.
TEST(Executor, FastKernelsArePreparedOnceAndMatchTheReferenceExactly) {
  Model m;
  m.ir_version = 8;
  m.opset_imports = {{"", 13}};
  Graph& g = m.graph;
  ValueInfo a;
  a.name = "a";
  a.dtype = DataType::kUInt8;
  a.has_shape = true;
  a.dims = {{-1, "n"}, {70, ""}};
  g.inputs.push_back(a);
  ValueInfo y = a;
  y.name = "y";
  y.dims = {{-1, "n"}, {33, ""}};
  g.outputs.push_back(y);
  std::vector<int8_t> w(70 * 33);
  for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<int8_t>(static_cast<int>((i * 37 + 11) % 255) - 127);
  g.initializers["b"] = Tensor::FromVector<int8_t>({70, 33}, w);
  g.initializers["a_scale"] = Tensor::Scalar<float>(0.02f);
  g.initializers["a_zp"] = Tensor::Scalar<uint8_t>(128);
  g.initializers["b_scale"] = Tensor::Scalar<float>(0.011f);
  g.initializers["b_zp"] = Tensor::Scalar<int8_t>(0);
  g.initializers["y_scale"] = Tensor::Scalar<float>(0.37f);
  g.initializers["y_zp"] = Tensor::Scalar<uint8_t>(121);
  g.nodes.push_back({"qmm", "QLinearMatMul", "", {"a", "a_scale", "a_zp", "b", "b_scale", "b_zp", "y_scale", "y_zp"},
                     {"y"}, {}, ""});
  std::vector<uint8_t> x(5 * 70);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<uint8_t>((i * 53 + 7) % 256);
  const TensorMap in = {{"a", Tensor::FromVector<uint8_t>({5, 70}, x)}};

  auto fast = Executor::Create(m, ExecutorOptions{2, "cpu"});
  auto ref = Executor::Create(m, ExecutorOptions{2, "reference"});
  ASSERT_TRUE(fast.ok() && ref.ok()) << fast.status().ToString();
  EXPECT_EQ(testing::KernelOps((*fast)->NodeKernels().at(0).kernel), "gemm_s8");
  EXPECT_EQ((*ref)->NodeKernels().at(0).kernel, "ref");
  TensorMap got, want;
  ASSERT_TRUE((*fast)->Run(in, &got).ok());
  ASSERT_TRUE((*ref)->Run(in, &want).ok());
  EXPECT_TRUE(got.at("y").Equals(want.at("y")));

  // A weight that run inputs may replace is not a constant: nothing is
  // prepared, B is packed on every run (the row for activation B), with the
  // same result.
  Model overridable = m;
  ValueInfo b;
  b.name = "b";
  b.dtype = DataType::kInt8;
  overridable.graph.initializer_inputs.push_back(b);
  auto plain = Executor::Create(overridable, ExecutorOptions{1, "cpu"});
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(testing::KernelOps((*plain)->NodeKernels().at(0).kernel), "gemm_s8");
  TensorMap per_run;
  ASSERT_TRUE((*plain)->Run(in, &per_run).ok());
  EXPECT_TRUE(per_run.at("y").Equals(want.at("y")));
}

// Block-pruned FP32 weights run on the block-sparse kernel: the same outputs
// as the reference up to float rounding, identical for any thread count; a
// dense weight stays on the reference GEMM.
TEST(Executor, BlockPrunedLinearLayersRunSparse) {
  for (const char* op : {"MatMul", "Gemm"}) {
    SCOPED_TRACE(op);
    const bool gemm = std::string(op) == "Gemm";
    const int64_t k = 70, n = 37;  // not multiples of the 4x4 blocks
    Model m;
    m.ir_version = 8;
    m.opset_imports = {{"", 13}};
    m.graph.inputs.push_back(testing::FloatInput("x", {{-1, "n"}, {k, ""}}));
    m.graph.outputs.push_back(testing::FloatInput("y", {{-1, "n"}, {n, ""}}));
    // Gemm with transB: W [N, K]; MatMul: B [K, N]. Zero 7 of every 8 blocks of
    // the [N, K] view (the default kernel table measures block 4x4 at 80%).
    Tensor w = testing::RandomFloats(gemm ? Shape{n, k} : Shape{k, n}, 5);
    for (int64_t o = 0; o < n; ++o)
      for (int64_t i = 0; i < k; ++i)
        if ((i / 4 + o / 4) % 8 != 0) w.data<float>()[gemm ? o * k + i : i * n + o] = 0.0f;
    m.graph.initializers["w"] = w;
    Node node{"lin", op, "", {"x", "w"}, {"y"}, {}, ""};
    if (gemm) {
      m.graph.initializers["c"] = testing::RandomFloats({n}, 6);
      node.inputs.push_back("c");
      node.attributes.push_back(Attribute::Int("transB", 1));
    }
    m.graph.nodes.push_back(node);
    const TensorMap in = {{"x", testing::RandomFloats({9, k}, 7)}};
    auto one = Executor::Create(m, ExecutorOptions{1, "cpu"});
    auto two = Executor::Create(m, ExecutorOptions{2, "cpu"});
    auto ref = Executor::Create(m, ExecutorOptions{1, "reference"});
    ASSERT_TRUE(one.ok() && two.ok() && ref.ok()) << one.status().ToString();
    EXPECT_EQ(testing::KernelOps((*one)->NodeKernels().at(0).kernel), "spmm_bsr_f32");
    TensorMap a, b, want;
    ASSERT_TRUE((*one)->Run(in, &a).ok());
    ASSERT_TRUE((*two)->Run(in, &b).ok());
    ASSERT_TRUE((*ref)->Run(in, &want).ok());
    EXPECT_TRUE(a.at("y").Equals(b.at("y")));
    const float* got = a.at("y").data<float>();
    const float* exp = want.at("y").data<float>();
    float scale = 0.0f, err = 0.0f;
    for (int64_t i = 0; i < want.at("y").numel(); ++i) {
      scale = std::max(scale, std::fabs(exp[i]));
      err = std::max(err, std::fabs(got[i] - exp[i]));
    }
    EXPECT_LE(err, testing::kF32RelTol * scale);  // float sums in another order

    // The dense weight runs on the dense FP32 GEMM.
    m.graph.initializers["w"] = testing::RandomFloats(gemm ? Shape{n, k} : Shape{k, n}, 8);
    auto dense = Executor::Create(m, ExecutorOptions{1, "cpu"});
    ASSERT_TRUE(dense.ok());
    EXPECT_EQ(testing::KernelOps((*dense)->NodeKernels().at(0).kernel), "gemm_f32");
  }
}

// Values listed in keep_values survive the fusions: a Conv -> Relu fuses into
// one node, unless the Conv's output is kept (calibration observes it).
TEST(Executor, KeptValuesAreNotFusedAway) {
  Model m;
  m.opset_imports = {{"", 17}};
  Graph& g = m.graph;
  g.inputs.push_back(testing::FloatInput("x", {{2, ""}, {3, ""}, {6, ""}, {6, ""}}));
  g.outputs.push_back(testing::FloatInput("y", {{2, ""}, {4, ""}, {6, ""}, {6, ""}}));
  g.initializers["w"] = testing::RandomFloats({4, 3, 3, 3}, 3);
  g.nodes.push_back({"conv", "Conv", "", {"x", "w"}, {"c"}, {Attribute::Ints("pads", {1, 1, 1, 1})}, ""});
  g.nodes.push_back({"relu", "Relu", "", {"c"}, {"y"}, {}, ""});
  const Tensor x = testing::RandomFloats({2, 3, 6, 6}, 4);
  auto run = [&](const std::vector<std::string>& keep, std::vector<std::string>* seen, size_t* nodes) {
    ExecutorOptions options{1};
    options.profile = GraphProfile::kObserveKept;
    options.keep_values = keep;
    auto exec = Executor::Create(m, options);
    EXPECT_TRUE(exec.ok()) << exec.status().ToString();
    *nodes = (*exec)->NodeKernels().size();
    RunOptions run_options;
    run_options.on_node_outputs = [&](const Node& n, const std::vector<Tensor>&) {
      seen->push_back(n.outputs[0]);
      return Status::OK();
    };
    TensorMap out;
    EXPECT_TRUE((*exec)->Run({{"x", x}}, &out, run_options).ok());
    EXPECT_EQ(out.size(), 1u);  // kept values are not outputs
    return out["y"];
  };
  std::vector<std::string> fused_seen, kept_seen;
  size_t fused_nodes = 0, kept_nodes = 0;
  const Tensor fused = run({}, &fused_seen, &fused_nodes);
  const Tensor kept = run({"c"}, &kept_seen, &kept_nodes);
  EXPECT_EQ(fused_nodes, 1u);
  EXPECT_EQ(fused_seen, std::vector<std::string>{"y"});
  EXPECT_EQ(kept_nodes, 2u);
  EXPECT_EQ(kept_seen, (std::vector<std::string>{"c", "y"}));
  ASSERT_EQ(fused.numel(), kept.numel());
  EXPECT_EQ(std::memcmp(fused.data<float>(), kept.data<float>(), fused.numel() * sizeof(float)), 0);
}

TEST(ThreadPool, CoversRangeExactlyOnce) {
  ThreadPool pool(3);
  std::vector<int> hits(1000, 0);
  pool.ParallelFor(1000, 7, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) ++hits[i];
  });
  for (int h : hits) EXPECT_EQ(h, 1);
}

}  // namespace
}  // namespace sparq
