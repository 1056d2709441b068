// OBS / SparseGPT recovery (prune/obs.cc): on small random layers with
// correlated inputs its mask and weights reconstruct the dense outputs at
// least as well as the magnitude mask with least squares, at the same budget;
// N:M patterns are exact; results do not depend on the thread count; bad
// inputs are errors; the model-level pass and PruneModel use it.
#include <gtest/gtest.h>

#include <cstring>

#include "kernels/backend.h"  // SharedThreadPool
#include "prune/prune_test_util.h"

namespace sparq {
namespace {

using namespace prune_test;  // NOLINT

struct Layer {
  int64_t n, rows, cols;
  std::vector<float> x, y;
  Matrix dense;
  LayerStatistics stats;
  Layer(int64_t n_, int64_t rows_, int64_t cols_, uint32_t seed) : n(n_), rows(rows_), cols(cols_), stats(rows_, cols_) {
    x = CorrelatedInputs(n, cols, seed);
    Tensor w = Gaussian({rows, cols}, seed + 10);
    dense = Matrix(rows, cols);
    std::copy(w.data<float>(), w.data<float>() + w.numel(), dense.values.begin());
    y = Multiply(x, dense, n);
    EXPECT_TRUE(stats.Add(x.data(), y.data(), n).ok());
  }
  PruneMask MagnitudeMask(const PruneStructure& st, double sparsity) const {
    auto scores = ElementScores(dense, PruneScore::kMagnitude);
    auto mask = ComputeMask(st, *scores, sparsity);
    EXPECT_TRUE(mask.ok());
    return *mask;
  }
};

int64_t ZerosIn(const PruneMask& m, int64_t r, int64_t c0, int64_t c1) {
  int64_t z = 0;
  for (int64_t c = c0; c < c1; ++c) z += m.keep[r * m.cols + c] == 0;
  return z;
}

TEST(PruneObs, BeatsMagnitudeWithLeastSquaresAtTheSameBudget) {
  // cols 50: a ragged 2:4 tail of 2 and unstructured blocks of 16 + a tail of 2.
  for (int64_t cols : {48, 50}) {
    Layer L(1500, 20, cols, 21 + static_cast<uint32_t>(cols));
    for (PruneStructure st : {PruneStructure::Unstructured(), PruneStructure::NM(2, 4), PruneStructure::NM(1, 4)}) {
      const double sparsity = st.kind == PruneStructure::Kind::kNM ? st.FixedSparsity() : 0.6;
      const PruneMask budget = L.MagnitudeMask(st, sparsity);
      RecoveryOptions o;
      o.obs_block = 16;
      Matrix ls = L.dense;
      auto r_ls = RecoverLayer(L.stats, budget, o, &ls);
      ASSERT_TRUE(r_ls.ok()) << r_ls.status().ToString();
      Matrix obs;
      PruneMask chosen;
      auto r_obs = RecoverLayerObs(L.stats, st, budget, L.dense, o, &obs, &chosen);
      ASSERT_TRUE(r_obs.ok()) << r_obs.status().ToString();
      const std::string where = st.ToString() + ", cols " + std::to_string(cols);
      // Reconstruction error, from the data (no bias correction on either side).
      const double e_ls = Error(Multiply(L.x, ls, L.n), L.y), e_obs = Error(Multiply(L.x, obs, L.n), L.y);
      EXPECT_LE(e_obs, e_ls) << where;
      EXPECT_NEAR(r_obs->error_after, e_obs, 1e-3 * e_obs + 1e-6) << where;
      EXPECT_NEAR(r_obs->error_before, r_ls->error_before, 1e-9) << where;  // both: the masked dense weights
      // The same budget, the structure exact, pruned weights exactly 0.
      EXPECT_EQ(chosen.pruned(), budget.pruned()) << where;
      for (size_t i = 0; i < chosen.keep.size(); ++i) {
        if (chosen.keep[i]) EXPECT_NE(obs.values[i], 0.0f) << where;
        else EXPECT_EQ(obs.values[i], 0.0f) << where;
      }
      EXPECT_EQ(PruneMask::FromNonZeros(obs).keep, chosen.keep) << where;
      for (int64_t r = 0; r < L.rows; ++r) {
        if (st.kind == PruneStructure::Kind::kNM) {
          for (int64_t g = 0; g < cols; g += st.m) {
            const int64_t g1 = std::min(cols, g + st.m);
            EXPECT_EQ(ZerosIn(chosen, r, g, g1), ZerosIn(budget, r, g, g1)) << where << " row " << r << " group " << g;
            EXPECT_LE(g1 - g - ZerosIn(chosen, r, g, g1), st.n) << where;
          }
        }
      }
      if (st.kind == PruneStructure::Kind::kUnstructured) {
        for (int64_t c0 = 0; c0 < cols; c0 += o.obs_block) {
          int64_t zb = 0, zc = 0;
          for (int64_t r = 0; r < L.rows; ++r) {
            zb += ZerosIn(budget, r, c0, std::min(cols, c0 + o.obs_block));
            zc += ZerosIn(chosen, r, c0, std::min(cols, c0 + o.obs_block));
          }
          EXPECT_EQ(zc, zb) << where << " block " << c0;
        }
      }
    }
  }
}

TEST(PruneObs, SameBytesForOneAndTwoThreads) {
  Layer L(600, 33, 40, 5);
  for (PruneStructure st : {PruneStructure::Unstructured(), PruneStructure::NM(2, 4)}) {
    const PruneMask budget = L.MagnitudeMask(st, 0.5);
    RecoveryOptions o;
    o.obs_block = 8;
    Matrix a, b;
    std::vector<double> sa, sb;
    ASSERT_TRUE(RecoverLayerObs(L.stats, st, budget, L.dense, o, &a, nullptr, &sa, SharedThreadPool(1)).ok());
    ASSERT_TRUE(RecoverLayerObs(L.stats, st, budget, L.dense, o, &b, nullptr, &sb, SharedThreadPool(2)).ok());
    ASSERT_EQ(a.values.size(), b.values.size());
    EXPECT_EQ(0, std::memcmp(a.values.data(), b.values.data(), a.values.size() * sizeof(float))) << st.ToString();
    EXPECT_EQ(sa, sb) << st.ToString();
  }
}

TEST(PruneObs, ErrorsNameWhatIsWrong) {
  Layer L(200, 8, 16, 3);
  const PruneMask budget = L.MagnitudeMask(PruneStructure::Unstructured(), 0.5);
  RecoveryOptions o;
  Matrix w;
  auto block = RecoverLayerObs(L.stats, PruneStructure::Block(4, 4), budget, L.dense, o, &w);
  ASSERT_FALSE(block.ok());
  EXPECT_EQ(block.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(block.status().message().find("block4x4"), std::string::npos) << block.status().ToString();
  Matrix small(8, 12);
  EXPECT_FALSE(RecoverLayerObs(L.stats, PruneStructure::Unstructured(), budget, small, o, &w).ok());
  LayerStatistics empty(8, 16);
  EXPECT_FALSE(RecoverLayerObs(empty, PruneStructure::Unstructured(), budget, L.dense, o, &w).ok());
  o.obs_block = 0;
  EXPECT_FALSE(RecoverLayerObs(L.stats, PruneStructure::Unstructured(), budget, L.dense, o, &w).ok());
  // PruneOptions: obs needs recovery.
  PruneOptions p;
  p.recovery = false;
  p.recovery_options.method = RecoveryMethod::kObs;
  Status st = ValidatePruneOptions(p);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("obs"), std::string::npos) << st.ToString();
}

TEST(PruneObs, PruneModelKeepsTwoFourAndLowersTheErrorOfLeastSquares) {
  Model m = ResidualCnn();
  const Tensor x = Gaussian({16, 3, 8, 8}, 99);
  const Tensor ref = RunModel(m, x);
  double error[2] = {0.0, 0.0};
  for (int k = 0; k < 2; ++k) {
    PruneOptions o;
    o.structure = PruneStructure::NM(2, 4);
    o.sparsity = 0.5;
    o.threads = 1;
    if (k == 1) o.recovery_options.method = RecoveryMethod::kObs;
    auto r = PruneModel(m, o, ImageBatches(4, 16), nullptr);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    ASSERT_EQ(r->report.steps.size(), 1u);
    for (const auto& l : r->report.steps[0].recovery.layers) EXPECT_EQ(l.method, k == 1 ? "obs" : "least_squares");
    auto layers = FindWeightedLayers(r->model);
    for (const auto& L : *layers) {
      if (L.node != "conv2" && L.node != "conv3" && L.node != "conv4") continue;
      auto w = ReadWeightMatrix(r->model, L);
      for (int64_t row = 0; row < w->rows; ++row)
        for (int64_t g = 0; g < w->cols; g += 4) {
          int kept = 0;
          for (int64_t c = g; c < std::min(w->cols, g + 4); ++c) kept += w->at(row, c) != 0.0f;
          EXPECT_LE(kept, 2) << L.node;
        }
      EXPECT_NEAR(PruneMask::FromNonZeros(*w).sparsity(), 0.5, 0.02) << L.node;
    }
    error[k] = RelativeError(RunModel(r->model, x), ref);
  }
  EXPECT_LT(error[1], error[0]) << "least squares " << error[0] << ", obs " << error[1];
}

}  // namespace
}  // namespace sparq
