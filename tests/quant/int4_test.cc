// INT4 weight-only quantization: RTN's codes and scales (quant/int4.h), the
// MatMulNBits and blocked DequantizeLinear writers against the reference
// kernels, and QuantizeWeightsInt4 on a small model in both forms.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>

#include "kernels/op_test_util.h"
#include "quant/int4.h"
#include "sparq/executor.h"
#include "sparq/onnx_io.h"
#include "sparq/quantize.h"
#include "test_util.h"

namespace sparq {
namespace {

using testing::OpNode;
using testing::RunRefKernel;

// K 40 with block 16: blocks of 16, 16 and 8 (the last one short).
constexpr int64_t kK = 40, kN = 5, kBlock = 16;

TEST(Int4Rtn, CodesScalesAndErrorBound) {
  const Tensor w = testing::RandomFloats({kK, kN}, 7);
  for (bool symmetric : {false, true}) {
    auto q = QuantizeInt4Rtn(w.data<float>(), kK, kN, kBlock, symmetric);
    ASSERT_TRUE(q.ok()) << q.status().ToString();
    EXPECT_EQ(q->k_blocks(), 3);
    EXPECT_EQ(q->scales.size(), 15u);
    EXPECT_EQ(q->zero_points.size(), symmetric ? 0u : 15u);
    for (int64_t k = 0; k < kK; ++k)
      for (int64_t n = 0; n < kN; ++n) {
        const int code = q->codes[k * kN + n];
        EXPECT_TRUE(symmetric ? (code >= -8 && code <= 7) : (code >= 0 && code <= 15)) << code;
        const float s = std::fabs(q->scales[(k / kBlock) * kN + n]);
        // Round to nearest: within half a step (the symmetric +8 side clamps: one step).
        EXPECT_LE(std::fabs(q->Dequantized(k, n) - w.data<float>()[k * kN + n]), (symmetric ? 1.0f : 0.5f) * s * 1.0001f)
            << k << "," << n;
      }
    if (symmetric) {  // the block's largest magnitude maps to -8 exactly
      for (int64_t n = 0; n < kN; ++n) {
        float m = 0.0f;
        int64_t at = 0;
        for (int64_t k = 0; k < kBlock; ++k)
          if (std::fabs(w.data<float>()[k * kN + n]) > std::fabs(m)) m = w.data<float>()[at = k * kN + n];
        EXPECT_EQ(q->codes[at], -8);
      }
    }
  }
}

TEST(Int4Rtn, RejectsBadBlockSizesAndNonFiniteWeights) {
  const Tensor w = testing::RandomFloats({kK, kN}, 7);
  for (int64_t bs : {0, 8, 24, 512}) {
    auto q = QuantizeInt4Rtn(w.data<float>(), kK, kN, bs, false);
    ASSERT_FALSE(q.ok()) << bs;
    EXPECT_NE(q.status().message().find("block_size"), std::string::npos) << q.status().ToString();
  }
  Tensor bad = w.Clone();
  bad.data<float>()[7] = NAN;
  auto q = QuantizeInt4Rtn(bad.data<float>(), kK, kN, kBlock, false);
  ASSERT_FALSE(q.ok());
  EXPECT_NE(q.status().message().find("element 7"), std::string::npos) << q.status().ToString();
}

// The writers' tensors, run by the reference kernels, give exactly the
// dequantized weights (DequantizeLinear) and A x dequant(W) summed in k order
// (MatMulNBits).
TEST(Int4Rtn, WritersMatchTheReferenceKernels) {
  const Tensor w = testing::RandomFloats({kK, kN}, 11);
  const Tensor a = testing::RandomFloats({3, kK}, 12);
  for (bool symmetric : {false, true}) {
    auto q = QuantizeInt4Rtn(w.data<float>(), kK, kN, kBlock, symmetric);
    ASSERT_TRUE(q.ok());
    BlockedDqWeights dw = ToBlockedDequantizeLinear(*q);
    std::vector<Tensor> in = {dw.weight, dw.scales};
    if (!symmetric) in.push_back(dw.zero_points);
    auto dq = RunRefKernel(OpNode("DequantizeLinear", {Attribute::Int("axis", 0), Attribute::Int("block_size", kBlock)}),
                           21, in);
    ASSERT_TRUE(dq.ok()) << dq.status().ToString();
    for (int64_t k = 0; k < kK; ++k)
      for (int64_t n = 0; n < kN; ++n) EXPECT_EQ((*dq)[0].data<float>()[k * kN + n], q->Dequantized(k, n));

    MatMulNBitsWeights mw = ToMatMulNBits(*q);
    EXPECT_EQ(mw.b.shape(), (Shape{kN, 3, kBlock / 2}));
    Node node = OpNode("MatMulNBits", {Attribute::Int("K", kK), Attribute::Int("N", kN), Attribute::Int("bits", 4),
                                       Attribute::Int("block_size", kBlock)});
    node.domain = "com.microsoft";
    std::vector<Tensor> mm_in = {a, mw.b, mw.scales};
    if (!symmetric) mm_in.push_back(mw.zero_points);
    auto y = RunRefKernel(node, 1, mm_in);
    ASSERT_TRUE(y.ok()) << y.status().ToString();
    for (int64_t i = 0; i < 3; ++i)
      for (int64_t n = 0; n < kN; ++n) {
        float acc = 0.0f;
        for (int64_t k = 0; k < kK; ++k) acc += a.data<float>()[i * kK + k] * q->Dequantized(k, n);
        EXPECT_EQ((*y)[0].data<float>()[i * kN + n], acc) << i << "," << n;
      }
  }
}

// x[n,40] ─MatMul(W1 [40,24])─> h ─Gemm(W2 [6,24]^T, b2, alpha 0.5)─> g ─Gemm(W3 [6,6])─> y[n,6]
Model ThreeLayers() {
  Model m;
  m.ir_version = 8;
  m.opset_imports = {{"", 17}};
  Graph& g = m.graph;
  g.inputs.push_back(testing::FloatInput("x", {{-1, "n"}, {kK, ""}}));
  g.outputs.push_back(testing::FloatInput("y", {{-1, "n"}, {6, ""}}));
  g.initializers["W1"] = testing::RandomFloats({kK, 24}, 1);
  g.initializers["W2"] = testing::RandomFloats({6, 24}, 2);
  g.initializers["b2"] = testing::RandomFloats({6}, 3);
  g.initializers["W3"] = testing::RandomFloats({6, 6}, 4);
  g.nodes.push_back({"mm1", "MatMul", "", {"x", "W1"}, {"h"}, {}, ""});
  g.nodes.push_back({"fc2", "Gemm", "", {"h", "W2", "b2"}, {"g"},
                     {Attribute::Int("transB", 1), Attribute::Float("alpha", 0.5f)}, ""});
  g.nodes.push_back({"fc3", "Gemm", "", {"g", "W3"}, {"y"}, {}, ""});
  return m;
}

// Two calibration batches of ThreeLayers' input.
BatchFn Batches() {
  auto next = std::make_shared<int>(0);
  return [next](TensorMap* b) -> StatusOr<bool> {
    if (*next == 2) return false;
    (*b)["x"] = testing::RandomFloats({8, kK}, 40 + (*next)++);
    return true;
  };
}

Tensor RunY(const Model& m, const Tensor& x, int threads = 1) {
  auto exec = Executor::Create(m, ExecutorOptions{threads});
  EXPECT_TRUE(exec.ok()) << exec.status().ToString();
  if (!exec.ok()) return Tensor();
  TensorMap out;
  const Status st = (*exec)->Run({{"x", x}}, &out);
  EXPECT_TRUE(st.ok()) << st.ToString();
  return out["y"].ToFloat32();
}

double Cosine(const Tensor& a, const Tensor& b) {
  double ab = 0, aa = 0, bb = 0;
  for (int64_t i = 0; i < a.numel(); ++i) {
    ab += a.data<float>()[i] * b.data<float>()[i];
    aa += a.data<float>()[i] * a.data<float>()[i];
    bb += b.data<float>()[i] * b.data<float>()[i];
  }
  return ab / std::sqrt(aa * bb);
}

int CountOps(const Model& m, const std::string& op) {
  int c = 0;
  for (const Node& n : m.graph.nodes) c += n.op_type == op;
  return c;
}

TEST(QuantizeWeightsInt4, BothFormsRunCloseToFloatAndPassTheChecker) {
  const Model m = ThreeLayers();
  const Tensor x = testing::RandomFloats({4, kK}, 9);
  const Tensor ref = RunY(m, x);
  for (Int4Format format : {Int4Format::kMatMulNBits, Int4Format::kQdq}) {
    for (bool symmetric : {false, true}) {
      Int4Options opt;
      opt.block_size = 16;
      opt.symmetric = symmetric;
      opt.format = format;
      opt.layers = {{"fc3", Precision::kFP32}};
      QuantizeReport report;
      auto q = QuantizeWeightsInt4(m, opt, &report);
      ASSERT_TRUE(q.ok()) << q.status().ToString();
      // The linked C++ checker knows IR <= 8 only (the QDQ form is IR 10: python's
      // onnx.checker checks it in test_int4_vs_onnxruntime.py).
      if (format == Int4Format::kMatMulNBits) ASSERT_TRUE(CheckModel(*q).ok()) << CheckModel(*q).ToString();
      ASSERT_EQ(report.layers.size(), 3u);
      EXPECT_NE(report.layers[0].reason.find("int4"), std::string::npos);
      EXPECT_EQ(report.layers[2].reason, "rule 'fc3'");
      if (format == Int4Format::kMatMulNBits) {
        EXPECT_EQ(CountOps(*q, "MatMulNBits"), 2);
        EXPECT_EQ(q->opset("com.microsoft"), 1);
        EXPECT_EQ(q->opset(), 17);
      } else {
        EXPECT_EQ(CountOps(*q, "DequantizeLinear"), 2);
        EXPECT_EQ(q->opset(), 21);
        EXPECT_GE(q->ir_version, 10);
      }
      EXPECT_FALSE(q->graph.initializers.count("W1"));  // the float weight is gone
      EXPECT_TRUE(q->graph.initializers.count("W3"));
      const Tensor got = RunY(*q, x);
      EXPECT_GT(Cosine(ref, got), 0.99);
      // Same bits on any thread count; the saved file loads and runs the same.
      const Tensor got2 = RunY(*q, x, 2);
      EXPECT_TRUE(got.Equals(got2));
      testing::TempDir dir;
      ASSERT_TRUE(SaveModel(*q, dir.path("q.onnx")).ok());
      auto back = LoadModel(dir.path("q.onnx"));
      ASSERT_TRUE(back.ok()) << back.status().ToString();
      EXPECT_TRUE(RunY(*back, x).Equals(got));
    }
  }
}

TEST(QuantizeWeightsInt4, BadOptionsAreErrors) {
  const Model m = ThreeLayers();
  Int4Options opt;
  opt.block_size = 48;
  EXPECT_EQ(QuantizeWeightsInt4(m, opt, nullptr).status().code(), StatusCode::kInvalidArgument);
  opt = Int4Options();
  opt.layers = {{"nothing_like_this", Precision::kFP32}};
  EXPECT_EQ(QuantizeWeightsInt4(m, opt, nullptr).status().code(), StatusCode::kNotFound);
  opt.layers = {{"mm1", Precision::kINT8}};
  EXPECT_EQ(QuantizeWeightsInt4(m, opt, nullptr).status().code(), StatusCode::kInvalidArgument);

  // GPTQ / AWQ: data needed, and their own knobs checked.
  opt = Int4Options();
  opt.method = Int4Method::kGptq;
  auto no_data = QuantizeWeightsInt4(m, opt, nullptr);
  ASSERT_FALSE(no_data.ok());
  EXPECT_NE(no_data.status().message().find("int4 method gptq needs calibration data"), std::string::npos)
      << no_data.status().ToString();
  opt.gptq_damp = 0.0;
  auto damp = QuantizeWeightsInt4(m, opt, Batches(), nullptr);
  ASSERT_FALSE(damp.ok());
  EXPECT_NE(damp.status().message().find("damp must be > 0"), std::string::npos) << damp.status().ToString();
  opt = Int4Options();
  opt.method = Int4Method::kAwq;
  opt.awq_grid = 0;
  auto grid = QuantizeWeightsInt4(m, opt, Batches(), nullptr);
  ASSERT_FALSE(grid.ok());
  EXPECT_NE(grid.status().message().find("grid must be >= 1"), std::string::npos) << grid.status().ToString();
}

// GPTQ's codes fit W as the layer reads it; a Gemm with alpha != 1 takes RTN's.
TEST(QuantizeWeightsInt4, GptqLeavesAScaledGemmToRoundToNearest) {
  const Model m = ThreeLayers();
  Int4Options opt;
  opt.block_size = 16;
  opt.method = Int4Method::kGptq;
  opt.threads = 1;
  QuantizeReport report;
  auto q = QuantizeWeightsInt4(m, opt, Batches(), &report);
  ASSERT_TRUE(q.ok()) << q.status().ToString();
  ASSERT_EQ(report.layers.size(), 3u);
  for (const LayerDecision& d : report.layers) {
    const bool gptq = d.reason.find("gptq") != std::string::npos;
    EXPECT_EQ(gptq, d.node != "fc2") << d.node << ": " << d.reason;
  }
}

// Past opset 17 sparq converts by hand, and refuses what that cannot carry.
TEST(UpgradeOpsetTo21, RefusesChangedOperatorsAndSubgraphsItCannotRewrite) {
  Model grid;
  grid.ir_version = 8;
  grid.opset_imports = {{"", 17}};
  grid.graph.inputs.push_back(testing::FloatInput("x", {{1, ""}, {1, ""}, {4, ""}, {4, ""}}));
  grid.graph.inputs.push_back(testing::FloatInput("g", {{1, ""}, {4, ""}, {4, ""}, {2, ""}}));
  grid.graph.outputs.push_back(testing::FloatInput("y", {{1, ""}, {1, ""}, {4, ""}, {4, ""}}));
  grid.graph.nodes.push_back({"sample", "GridSample", "", {"x", "g"}, {"y"}, {}, ""});
  auto refused = UpgradeOpsetTo21(grid);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kNotSupported);
  EXPECT_NE(refused.status().message().find("its definition changed by opset 21"), std::string::npos)
      << refused.status().ToString();
  EXPECT_EQ(grid.opset(), 17);  // unchanged

  Model branch = grid;
  branch.graph.nodes.clear();
  Graph body;
  body.outputs.push_back(testing::FloatInput("r", {}));
  body.nodes.push_back({"mean", "ReduceMean", "", {"x"}, {"r"}, {Attribute::Ints("axes", {1})}, ""});
  Attribute then_branch;
  then_branch.name = "then_branch";
  then_branch.kind = Attribute::Kind::kOpaque;
  then_branch.subgraph = std::make_shared<const Graph>(body);
  Attribute else_branch = then_branch;
  else_branch.name = "else_branch";
  branch.graph.initializers["c"] = Tensor::Scalar<bool>(true);
  branch.graph.nodes.push_back({"if", "If", "", {"c"}, {"y"}, {then_branch, else_branch}, ""});
  auto sub = UpgradeOpsetTo21(branch);
  ASSERT_FALSE(sub.ok());
  EXPECT_NE(sub.status().message().find("has a ReduceMean in a subgraph"), std::string::npos) << sub.status().ToString();
}

}  // namespace
}  // namespace sparq
