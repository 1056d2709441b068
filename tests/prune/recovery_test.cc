// Recovery: least-squares re-fit of the kept weights beats plain masking,
// bias correction matches the mean output, and the model-level pass works;
// with a token mask the fit counts only the real tokens' rows.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "prune/prune_test_util.h"

namespace sparq {
namespace {

using namespace prune_test;  // NOLINT

struct Problem {
  int64_t n = 2000, rows = 24, cols = 48;
  std::vector<float> x;
  Matrix dense;
  std::vector<float> y;
  LayerStatistics stats{24, 48};
};

Problem MakeProblem() {
  Problem p;
  p.x = CorrelatedInputs(p.n, p.cols, 11);
  Tensor w = Gaussian({p.rows, p.cols}, 12);
  p.dense = Matrix(p.rows, p.cols);
  std::copy(w.data<float>(), w.data<float>() + w.numel(), p.dense.values.begin());
  p.y = Multiply(p.x, p.dense, p.n);
  // Streamed in three uneven batches.
  int64_t done = 0;
  for (int64_t b : {700, 900, 400}) {
    EXPECT_TRUE(p.stats.Add(p.x.data() + done * p.cols, p.y.data() + done * p.rows, b).ok());
    done += b;
  }
  return p;
}

TEST(PruneRecovery, LeastSquaresBeatsMaskingByAClearMargin) {
  Problem p = MakeProblem();
  for (PruneStructure st : {PruneStructure::Unstructured(), PruneStructure::NM(2, 4), PruneStructure::Block(4, 4)}) {
    auto scores = ElementScores(p.dense, PruneScore::kMagnitude);
    ASSERT_TRUE(scores.ok());
    auto mask = ComputeMask(st, *scores, 0.5);
    ASSERT_TRUE(mask.ok());
    Matrix masked = p.dense;
    ASSERT_TRUE(ApplyMask(*mask, &masked).ok());
    const double masked_error = Error(Multiply(p.x, masked, p.n), p.y);

    Matrix recovered = p.dense;
    std::vector<double> shift;
    auto r = RecoverLayer(p.stats, *mask, RecoveryOptions(), &recovered, &shift);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    std::vector<float> y = Multiply(p.x, recovered, p.n);
    for (int64_t i = 0; i < p.n; ++i)
      for (int64_t o = 0; o < p.rows; ++o) y[i * p.rows + o] += static_cast<float>(shift[o]);
    const double recovered_error = Error(y, p.y);
    EXPECT_LT(recovered_error, 0.25 * masked_error) << st.ToString() << ": masked " << masked_error
                                                   << ", recovered " << recovered_error;
    // The statistics' own error estimate agrees with the direct computation.
    EXPECT_NEAR(r->error_before, masked_error, 1e-3 * masked_error + 1e-6);
    EXPECT_LT(r->error_after, 0.25 * r->error_before);
    // Pruned weights stay exactly zero; the structure is unchanged.
    for (size_t i = 0; i < mask->keep.size(); ++i) {
      if (!mask->keep[i]) EXPECT_EQ(recovered.values[i], 0.0f);
      else EXPECT_NE(recovered.values[i], 0.0f);
    }
    EXPECT_GT(r->direct_solves, 0);
  }
}

TEST(PruneRecovery, BiasCorrectionMatchesTheDenseMeanOutput) {
  Problem p = MakeProblem();
  auto scores = ElementScores(p.dense, PruneScore::kMagnitude);
  auto mask = ComputeMask(PruneStructure::Unstructured(), *scores, 0.7);
  ASSERT_TRUE(mask.ok());
  Matrix w = p.dense;
  std::vector<double> shift;
  RecoveryOptions o;
  o.damping = 1.0;  // a heavily damped fit leaves a mean error for the bias to fix
  ASSERT_TRUE(RecoverLayer(p.stats, *mask, o, &w, &shift).ok());
  std::vector<float> y = Multiply(p.x, w, p.n);
  for (int64_t r = 0; r < p.rows; ++r) {
    double dense_mean = 0.0, fit_mean = 0.0;
    for (int64_t i = 0; i < p.n; ++i) {
      dense_mean += p.y[i * p.rows + r];
      fit_mean += y[i * p.rows + r];
    }
    dense_mean /= p.n;
    fit_mean /= p.n;
    EXPECT_NEAR(fit_mean + shift[r], dense_mean, 1e-3 * (1.0 + std::fabs(dense_mean))) << "row " << r;
  }
}

TEST(PruneRecovery, ConjugateGradientsAgreeWithCholesky) {
  Problem p = MakeProblem();
  auto scores = ElementScores(p.dense, PruneScore::kMagnitude);
  auto mask = ComputeMask(PruneStructure::Unstructured(), *scores, 0.5);
  ASSERT_TRUE(mask.ok());
  Matrix direct = p.dense, iterative = p.dense;
  RecoveryOptions o;
  auto a = RecoverLayer(p.stats, *mask, o, &direct);
  o.max_direct_cols = 0;  // everything by CG
  o.cg_iterations = 500;
  o.cg_tolerance = 1e-10;
  auto b = RecoverLayer(p.stats, *mask, o, &iterative);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(b->direct_solves, 0);
  EXPECT_EQ(b->iterative_rows, p.rows);
  for (size_t i = 0; i < direct.values.size(); ++i) EXPECT_NEAR(direct.values[i], iterative.values[i], 1e-3);
}

TEST(PruneRecovery, ErrorsForMismatchedShapesAndEmptyStatistics) {
  LayerStatistics empty(2, 3);
  Matrix w(2, 3, 1.0f);
  PruneMask m{2, 3, std::vector<uint8_t>(6, 1)};
  EXPECT_FALSE(RecoverLayer(empty, m, RecoveryOptions(), &w).ok());
  Problem p = MakeProblem();
  EXPECT_FALSE(RecoverLayer(p.stats, m, RecoveryOptions(), &w).ok());
  std::vector<float> x = {1.0f, std::nanf(""), 0.0f}, y = {1.0f, 2.0f};
  EXPECT_FALSE(empty.Add(x.data(), y.data(), 1).ok());
}

TEST(PruneRecovery, ModelLevelRecoveryReducesTheOutputError) {
  Model dense = ResidualCnn();
  Model pruned = dense;
  const std::vector<std::string> layers = {"conv2", "conv3", "conv4"};
  auto all = FindWeightedLayers(pruned);
  ASSERT_TRUE(all.ok());
  for (const auto& L : *all) {
    if (std::find(layers.begin(), layers.end(), L.node) == layers.end()) continue;
    auto w = ReadWeightMatrix(pruned, L);
    auto s = ElementScores(*w, PruneScore::kMagnitude);
    auto m = ComputeMask(PruneStructure::Unstructured(), *s, 0.6);
    ASSERT_TRUE(m.ok());
    ASSERT_TRUE(ApplyMask(*m, &*w).ok());
    ASSERT_TRUE(WriteWeightMatrix(&pruned, L, *w).ok());
  }
  const Tensor x = Gaussian({16, 3, 8, 8}, 99);
  const double masked_error = RelativeError(RunModel(pruned, x), RunModel(dense, x));
  for (bool sequential : {true, false}) {
    Model recovered = pruned;
    RecoveryOptions o;
    o.sequential = sequential;
    o.threads = 1;
    auto report = RecoverModel(dense, &recovered, layers, ImageBatches(4, 16), o);
    ASSERT_TRUE(report.ok()) << report.status().ToString();
    ASSERT_EQ(report->layers.size(), 3u);
    for (const auto& l : report->layers) EXPECT_LT(l.error_after, l.error_before) << l.node;
    const double error = RelativeError(RunModel(recovered, x), RunModel(dense, x));
    // Sequential recovery sees the inputs its layer will really get; the
    // one-pass variant is cheaper and less exact.
    EXPECT_LT(error, (sequential ? 0.5 : 0.8) * masked_error)
        << "sequential " << sequential << ": masked " << masked_error << ", recovered " << error;
    // Masks survive: the zeros are where they were.
    auto before = FindWeightedLayers(pruned);
    for (const auto& L : *before) {
      auto a = ReadWeightMatrix(pruned, L), b = ReadWeightMatrix(recovered, L);
      ASSERT_TRUE(a.ok() && b.ok());
      for (size_t i = 0; i < a->values.size(); ++i)
        if (a->values[i] == 0.0f) EXPECT_EQ(b->values[i], 0.0f);
    }
  }
}

TEST(PruneRecovery, MatMulWithoutBiasGetsOneAndGroupedConvWorks) {
  // x[n,4,6,6] -> dw (Conv group 4, depthwise) -> gap -> flatten -> mm (MatMul, no bias) -> y
  Model m;
  m.opset_imports = {{"", 17}};
  m.graph.inputs.push_back(testing::FloatInput("x", {{-1, "n"}, {4, ""}, {6, ""}, {6, ""}}));
  m.graph.outputs.push_back(testing::FloatInput("y", {{-1, "n"}, {5, ""}}));
  m.graph.initializers["dw.w"] = Gaussian({8, 1, 3, 3}, 1, 0.5f);
  m.graph.nodes.push_back(MakeNode("dw", "Conv", {"x", "dw.w"}, {"c"}, {IntAttr("group", 4)}));
  m.graph.nodes.push_back(MakeNode("relu", "Relu", {"c"}, {"r"}));
  m.graph.nodes.push_back(MakeNode("gap", "GlobalAveragePool", {"r"}, {"p"}));
  m.graph.nodes.push_back(MakeNode("flat", "Flatten", {"p"}, {"f"}));
  m.graph.initializers["mm.w"] = Gaussian({8, 5}, 2, 0.5f);
  m.graph.nodes.push_back(MakeNode("mm", "MatMul", {"f", "mm.w"}, {"y"}));
  Model pruned = m;
  auto layers = FindWeightedLayers(pruned);
  ASSERT_TRUE(layers.ok());
  for (const auto& L : *layers) {
    auto w = ReadWeightMatrix(pruned, L);
    auto s = ElementScores(*w, PruneScore::kMagnitude);
    auto mask = ComputeMask(PruneStructure::Unstructured(), *s, 0.5);
    ASSERT_TRUE(ApplyMask(*mask, &*w).ok());
    ASSERT_TRUE(WriteWeightMatrix(&pruned, L, *w).ok());
  }
  RecoveryOptions o;
  o.threads = 1;
  BatchSource data = ImageBatches(3, 8, {4, 6, 6});
  auto report = RecoverModel(m, &pruned, {"dw", "mm"}, data, o);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  // The MatMul got an Add with its bias correction.
  bool has_add = false;
  for (const Node& n : pruned.graph.nodes) has_add |= n.op_type == "Add";
  EXPECT_TRUE(has_add);
  const Tensor x = Gaussian({8, 4, 6, 6}, 77);
  EXPECT_EQ(RunModel(pruned, x).shape(), (Shape{8, 5}));
  EXPECT_FALSE(RecoverModel(m, &pruned, {"nope"}, data, o).ok());
}

// A token model: x [n, T, 8] and mask [n, T] (1 = token, 0 = padding);
//   y = (Relu(x W1) W2) * mask[..., None]
// so the padded positions' outputs are thrown away, as an encoder's pooling does.
Model TokenModel() {
  Model m;
  m.opset_imports = {{"", 17}};
  m.graph.inputs.push_back(testing::FloatInput("x", {{-1, "n"}, {-1, "t"}, {8, ""}}));
  m.graph.inputs.push_back(testing::FloatInput("mask", {{-1, "n"}, {-1, "t"}}));
  m.graph.outputs.push_back(testing::FloatInput("y", {{-1, "n"}, {-1, "t"}, {6, ""}}));
  m.graph.initializers["mm1.w"] = Gaussian({8, 12}, 31, 0.4f);
  m.graph.initializers["mm2.w"] = Gaussian({12, 6}, 32, 0.4f);
  Tensor axes(DataType::kInt64, {1});
  axes.data<int64_t>()[0] = 2;
  m.graph.initializers["axes"] = axes;
  m.graph.nodes.push_back(MakeNode("mm1", "MatMul", {"x", "mm1.w"}, {"h"}));
  m.graph.nodes.push_back(MakeNode("relu", "Relu", {"h"}, {"r"}));
  m.graph.nodes.push_back(MakeNode("mm2", "MatMul", {"r", "mm2.w"}, {"o"}));
  m.graph.nodes.push_back(MakeNode("unsq", "Unsqueeze", {"mask", "axes"}, {"m3"}));
  m.graph.nodes.push_back(MakeNode("mul", "Mul", {"o", "m3"}, {"y"}));
  return m;
}

// Batches of [batch, T] positions: the first 2..T of each sample are tokens
// (correlated Gaussian), the rest padding drawn from another distribution
// (large, on a few columns), as an encoder's padded hidden states differ from its tokens'.
TensorMap TokenBatch(int64_t batch, int64_t T, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_int_distribution<int64_t> len(2, T);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  Tensor x(DataType::kFloat32, {batch, T, 8}), mask(DataType::kFloat32, {batch, T});
  for (int64_t b = 0; b < batch; ++b) {
    const int64_t n = len(gen);
    for (int64_t t = 0; t < T; ++t) {
      float* row = x.data<float>() + (b * T + t) * 8;
      mask.data<float>()[b * T + t] = t < n ? 1.0f : 0.0f;
      const float common = nd(gen);
      for (int64_t c = 0; c < 8; ++c)
        row[c] = t < n ? nd(gen) + 0.7f * common : (c < 3 ? 4.0f * nd(gen) - 2.0f * common : 0.1f * nd(gen));
    }
  }
  return {{"x", x}, {"mask", mask}};
}

BatchSource TokenBatches(int count, int64_t batch, int64_t T) {
  return [=]() -> BatchFn {
    auto next = std::make_shared<int>(0);
    return [=](TensorMap* b) -> StatusOr<bool> {
      if (*next == count) return false;
      *b = TokenBatch(batch, T, 50 + static_cast<uint32_t>(*next));
      ++*next;
      return true;
    };
  };
}

Tensor RunTokens(const Model& m, const TensorMap& in) {
  auto exec = Executor::Create(m, ExecutorOptions{1});
  EXPECT_TRUE(exec.ok()) << exec.status().ToString();
  if (!exec.ok()) return Tensor();
  TensorMap out;
  EXPECT_TRUE((*exec)->Run(in, &out).ok());
  return out["y"];
}

TEST(PruneRecovery, TokenMaskFitsTheRealTokensOnly) {
  const Model dense = TokenModel();
  Model pruned = dense;
  auto all = FindWeightedLayers(pruned);
  ASSERT_TRUE(all.ok());
  for (const auto& L : *all) {
    auto w = ReadWeightMatrix(pruned, L);
    auto s = ElementScores(*w, PruneScore::kMagnitude);
    auto m = ComputeMask(PruneStructure::Unstructured(), *s, 0.5);
    ASSERT_TRUE(m.ok());
    ASSERT_TRUE(ApplyMask(*m, &*w).ok());
    ASSERT_TRUE(WriteWeightMatrix(&pruned, L, *w).ok());
  }
  const int kBatches = 4;
  const int64_t kBatch = 8, kT = 12;
  int64_t tokens = 0;
  for (int i = 0; i < kBatches; ++i) {
    const TensorMap b = TokenBatch(kBatch, kT, 50 + i);
    for (int64_t j = 0; j < b.at("mask").numel(); ++j) tokens += b.at("mask").data<float>()[j] != 0.0f;
  }
  ASSERT_GT(tokens, 100);
  ASSERT_LT(tokens, kBatches * kBatch * kT * 3 / 4);
  const TensorMap test = TokenBatch(16, kT, 999);
  const Tensor ref = RunTokens(dense, test);
  double error[2] = {0, 0};
  for (int masked = 0; masked < 2; ++masked) {
    for (RecoveryMethod method : {RecoveryMethod::kLeastSquares, RecoveryMethod::kObs}) {
      Model recovered = pruned;
      RecoveryOptions o;
      o.threads = 1;
      o.method = method;
      o.structures = {{"mm1", PruneStructure::Unstructured()}, {"mm2", PruneStructure::Unstructured()}};
      if (masked) o.token_mask = "mask";
      auto report = RecoverModel(dense, &recovered, {"mm1", "mm2"}, TokenBatches(kBatches, kBatch, kT), o);
      ASSERT_TRUE(report.ok()) << report.status().ToString();
      ASSERT_EQ(report->layers.size(), 2u);
      // The fit's rows: every position, or the tokens alone.
      for (const auto& l : report->layers)
        EXPECT_EQ(l.rows, masked ? tokens : kBatches * kBatch * kT) << l.node;
      if (method == RecoveryMethod::kLeastSquares) error[masked] = RelativeError(RunTokens(recovered, test), ref);
    }
  }
  // The padding rows no longer pull the fit: the tokens' outputs are closer.
  EXPECT_LT(error[1], 0.8 * error[0]) << "all rows " << error[0] << ", tokens only " << error[1];
}

TEST(PruneRecovery, TokenMaskErrors) {
  const Model dense = TokenModel();
  Model pruned = dense;
  RecoveryOptions o;
  o.threads = 1;
  o.token_mask = "attention_mask";  // not an input of the model
  auto r = RecoverModel(dense, &pruned, {"mm1"}, TokenBatches(1, 4, 6), o);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("attention_mask"), std::string::npos) << r.status().message();
  o.token_mask = "x";  // an input, but not [batch, tokens]
  r = RecoverModel(dense, &pruned, {"mm1"}, TokenBatches(1, 4, 6), o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("expected [batch, tokens]"), std::string::npos) << r.status().message();
}

}  // namespace
}  // namespace sparq
