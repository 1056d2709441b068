// The progressive pruning loop: schedules, per-step reports, global ranking,
// early stop on the gate, and the digits example end to end.
#include <gtest/gtest.h>

#include <filesystem>

#include "prune/prune_test_util.h"
#include "sparq/metrics.h"
#include "sparq/npy.h"
#include "sparq/onnx_io.h"

namespace sparq {
namespace {

using namespace prune_test;  // NOLINT

double ZeroFraction(const Model& m, const std::string& node) {
  auto layers = FindWeightedLayers(m);
  for (const auto& L : *layers) {
    if (L.node != node) continue;
    auto w = ReadWeightMatrix(m, L);
    return PruneMask::FromNonZeros(*w).sparsity();
  }
  return -1.0;
}

TEST(PruneModel, AgpBlockPruningWithRecoveryReportsEveryStep) {
  Model m = ResidualCnn();
  PruneOptions o;
  o.structure = PruneStructure::Block(4, 4);
  o.sparsity = 0.6;
  o.schedule = PruneSchedule::kAgp;
  o.steps = 3;
  o.threads = 1;
  std::vector<std::string> lines;
  o.log = [&](const std::string& l) { lines.push_back(l); };
  const Tensor x = Gaussian({8, 3, 8, 8}, 3);
  auto r = PruneModel(m, o, ImageBatches(2, 8), FidelityMetric(m, x));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const PruneReport& rep = r->report;
  ASSERT_EQ(rep.steps.size(), 3u);
  EXPECT_EQ(rep.accepted_steps, 3);
  EXPECT_FALSE(rep.stopped_early);
  auto agp = ScheduleSparsities(PruneSchedule::kAgp, 0.6, 3);
  for (size_t t = 0; t < 3; ++t) {
    EXPECT_NEAR(rep.steps[t].target, (*agp)[t], 1e-12);
    EXPECT_NEAR(rep.steps[t].sparsity, (*agp)[t], 0.03) << "step " << t + 1;
    EXPECT_TRUE(rep.steps[t].evaluated);
    EXPECT_EQ(rep.steps[t].recovery.layers.size(), 3u);
    // Layer-wise least squares on calibration data need not improve an
    // end-to-end metric on other data at every step, but never by much.
    EXPECT_GE(rep.steps[t].metric, rep.steps[t].metric_masked - 0.5) << "step " << t + 1;
  }
  double gain = 0.0;
  for (const auto& s : rep.steps) gain += s.metric - s.metric_masked;
  EXPECT_GT(gain, 0.0);
  EXPECT_GT(rep.steps[1].sparsity, rep.steps[0].sparsity);
  // Pruned layers: whole 4x4 blocks; first and last layers untouched.
  for (const char* node : {"conv2", "conv3", "conv4"}) {
    EXPECT_NEAR(rep.final_sparsity.at(node), 0.6, 0.03) << node;
    auto layers = FindWeightedLayers(r->model);
    for (const auto& L : *layers) {
      if (L.node != node) continue;
      auto w = ReadWeightMatrix(r->model, L);
      for (int64_t r0 = 0; r0 < w->rows; r0 += 4)
        for (int64_t c0 = 0; c0 < w->cols; c0 += 4) {
          int zeros = 0, n = 0;
          for (int64_t i = r0; i < std::min<int64_t>(w->rows, r0 + 4); ++i)
            for (int64_t j = c0; j < std::min<int64_t>(w->cols, c0 + 4); ++j, ++n) zeros += w->at(i, j) == 0.0f;
          EXPECT_TRUE(zeros == 0 || zeros == n) << node << " block (" << r0 << ", " << c0 << ")";
        }
    }
  }
  EXPECT_EQ(ZeroFraction(r->model, "conv1"), 0.0);
  EXPECT_EQ(ZeroFraction(r->model, "fc"), 0.0);
  EXPECT_EQ(lines.size(), 13u);  // dense metric + 3 x (3 recovered layers + the step)
  const std::string text = rep.ToText();
  for (const char* s : {"Pruning plan", "first weighted layer", "Steps:", "Final sparsity", "block4x4"})
    EXPECT_NE(text.find(s), std::string::npos) << s << "\n" << text;
}

TEST(PruneModel, StopsWhenTheGateWouldBreakAndReturnsTheLastGoodStep) {
  Model m = ResidualCnn();
  PruneOptions o;
  o.sparsity = 0.8;
  o.schedule = PruneSchedule::kLinear;
  o.steps = 4;
  o.recovery = false;
  // The "gate" fails once conv2 is more than 45% sparse.
  PruneMetricFn gate = [](const Model& model) -> StatusOr<PruneEvaluation> {
    PruneEvaluation e;
    e.metric = 100.0 * (1.0 - ZeroFraction(model, "conv2"));
    e.acceptable = e.metric >= 55.0;
    if (!e.acceptable) e.note = "drop above the budget";
    return e;
  };
  auto r = PruneModel(m, o, nullptr, gate);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const PruneReport& rep = r->report;
  EXPECT_TRUE(rep.stopped_early);
  EXPECT_EQ(rep.steps.size(), 3u);
  EXPECT_EQ(rep.accepted_steps, 2);
  EXPECT_FALSE(rep.steps[2].acceptable);
  EXPECT_NEAR(ZeroFraction(r->model, "conv2"), 0.4, 0.005);
  EXPECT_NE(rep.stop_message.find("stopped at step 3/4"), std::string::npos) << rep.stop_message;
  EXPECT_NE(rep.stop_message.find("model of step 2"), std::string::npos) << rep.stop_message;
  EXPECT_NE(rep.stop_message.find("drop above the budget"), std::string::npos) << rep.stop_message;

  // When the first step already fails, the dense model comes back.
  PruneMetricFn never = [](const Model&) -> StatusOr<PruneEvaluation> { return PruneEvaluation{1.0, false, ""}; };
  auto d = PruneModel(m, o, nullptr, never);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->report.accepted_steps, 0);
  EXPECT_EQ(ZeroFraction(d->model, "conv2"), 0.0);
  EXPECT_NE(d->report.stop_message.find("dense model"), std::string::npos);
}

TEST(PruneModel, GlobalScopeRanksAcrossLayers) {
  Model m = ResidualCnn();
  // Half of conv2's weights are made tiny relative to the rest of conv2: a
  // global ranking (scores normalized per layer) takes them first.
  auto layers = FindWeightedLayers(m);
  for (const auto& L : *layers) {
    if (L.node != "conv2") continue;
    auto w = ReadWeightMatrix(m, L);
    for (int64_t r = 0; r < w->rows; ++r)
      for (int64_t c = 0; c < w->cols / 2; ++c) w->at(r, c) *= 0.01f;
    ASSERT_TRUE(WriteWeightMatrix(&m, L, *w).ok());
  }
  PruneOptions o;
  o.scope = PruneScope::kGlobal;
  o.sparsity = 0.4;
  o.recovery = false;
  auto r = PruneModel(m, o, nullptr, nullptr);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const auto& s = r->report.final_sparsity;
  EXPECT_NEAR(r->report.steps[0].sparsity, 0.4, 0.01);
  EXPECT_GT(s.at("conv2"), s.at("conv3") + 0.1);  // its tiny half goes first
  EXPECT_GE(s.at("conv2"), 0.49);
}

TEST(PruneModel, ActivationScoresAndMissingData) {
  Model m = ResidualCnn();
  PruneOptions o;
  o.score = PruneScore::kActivation;
  o.recovery = false;
  auto missing = PruneModel(m, o, nullptr, nullptr);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("needs calibration data"), std::string::npos);
  auto r = PruneModel(m, o, ImageBatches(2, 4), nullptr);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_NEAR(r->report.final_sparsity.at("conv2"), 0.5, 0.01);
  auto norms = ActivationColumnNorms(m, {"conv2", "fc"}, ImageBatches(1, 4));
  ASSERT_TRUE(norms.ok());
  EXPECT_EQ(norms->at("conv2").size(), 72u);
  EXPECT_EQ(norms->at("fc").size(), 16u);
  o.recovery = true;
  o.sparsity = 1.5;
  auto bad = PruneModel(m, o, ImageBatches(1, 4), nullptr);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("must be in [0, 1)"), std::string::npos);
}

// The bundled digits CNN: 2:4 on its middle conv with recovery keeps accuracy.
TEST(PruneModel, DigitsCnnTwoFourWithRecoveryKeepsAccuracy) {
  const std::string dir = std::string(SPARQ_SOURCE_DIR) + "/examples/digits/";
  if (!std::filesystem::exists(dir + "digits_cnn.onnx")) GTEST_SKIP() << "examples/digits not present";
  auto model = LoadModel(dir + "digits_cnn.onnx");
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  auto calib = ReadNpz(dir + "calib.npz");
  auto eval = ReadNpz(dir + "eval.npz");
  auto labels = ReadNpy(dir + "eval_labels.npy");
  ASSERT_TRUE(calib.ok() && eval.ok() && labels.ok());
  const std::string input = model->graph.inputs[0].name, output = model->graph.outputs[0].name;
  const Tensor calib_x = (*calib)[0].second, eval_x = (*eval)[0].second;
  BatchSource data = [&]() -> BatchFn {
    auto next = std::make_shared<int64_t>(0);
    return [&, next](TensorMap* b) -> StatusOr<bool> {
      const int64_t n = calib_x.dim(0), batch = 64;
      if (*next >= n) return false;
      const int64_t rows = std::min(batch, n - *next);
      Tensor t(DataType::kFloat32, {rows, 1, 8, 8});
      std::copy_n(calib_x.data<float>() + *next * 64, rows * 64, t.data<float>());
      (*b)[input] = t;
      *next += rows;
      return true;
    };
  };
  PruneMetricFn top1 = [&](const Model& mm) -> StatusOr<PruneEvaluation> {
    SPARQ_ASSIGN_OR_RETURN(auto exec, Executor::Create(mm, ExecutorOptions{1}));
    TensorMap out;
    SPARQ_RETURN_IF_ERROR(exec->Run({{input, eval_x}}, &out));
    SPARQ_ASSIGN_OR_RETURN(int64_t correct, CountTopK(out[output], *labels, 1));
    return PruneEvaluation{100.0 * static_cast<double>(correct) / static_cast<double>(eval_x.dim(0)), true, ""};
  };
  PruneOptions o;
  o.structure = PruneStructure::NM(2, 4);
  o.threads = 1;
  auto r = PruneModel(*model, o, data, top1);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const PruneReport& rep = r->report;
  ASSERT_EQ(rep.steps.size(), 1u);
  int pruned = 0;
  for (const auto& p : rep.plan) pruned += p.prune;
  EXPECT_EQ(pruned, 1) << rep.ToText();
  EXPECT_GE(rep.steps[0].metric, rep.dense_metric - 1.5) << rep.ToText();
  EXPECT_GE(rep.steps[0].metric, rep.steps[0].metric_masked - 0.5) << rep.ToText();
}

}  // namespace
}  // namespace sparq
