// Pruning structures, scores and masks: every structure's invariant, the
// requested sparsity, remainder edges, exact zeros, error messages.
#include <gtest/gtest.h>

#include <cmath>

#include "prune/prune_test_util.h"
#include "sparq/quantize.h"

namespace sparq {
namespace {

using prune_test::Gaussian;

Matrix RandomScores(int64_t rows, int64_t cols, uint32_t seed) {
  Tensor t = Gaussian({rows, cols}, seed);
  Matrix m(rows, cols);
  for (int64_t i = 0; i < t.numel(); ++i) m.values[i] = std::fabs(t.data<float>()[i]);
  return m;
}

TEST(PruneStructure, ParsesAndPrintsEverySpelling) {
  for (const char* s : {"unstructured", "block4x4", "block1x4", "block4x1", "block32x32", "2:4", "4:8", "1:4",
                        "channel", "auto"}) {
    auto p = PruneStructure::Parse(s);
    ASSERT_TRUE(p.ok()) << s << ": " << p.status().ToString();
    EXPECT_EQ(p->ToString(), s);
  }
  auto b = PruneStructure::Parse("block8x16");
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->kind, PruneStructure::Kind::kBlock);
  EXPECT_EQ(b->block_rows, 8);
  EXPECT_EQ(b->block_cols, 16);
  EXPECT_NEAR(PruneStructure::NM(2, 4).FixedSparsity(), 0.5, 1e-12);
  EXPECT_NEAR(PruneStructure::NM(1, 4).FixedSparsity(), 0.75, 1e-12);
}

TEST(PruneStructure, ErrorsSayWhatIsWrong) {
  auto nm = PruneStructure::Parse("4:2");
  ASSERT_FALSE(nm.ok());
  EXPECT_NE(nm.status().message().find("N (weights kept) must be less than M"), std::string::npos)
      << nm.status().message();
  auto eq = PruneStructure::Parse("4:4");
  ASSERT_FALSE(eq.ok());
  EXPECT_NE(eq.status().message().find("less than M"), std::string::npos);
  auto zero = PruneStructure::Parse("block0x4");
  ASSERT_FALSE(zero.ok());
  EXPECT_NE(zero.status().message().find("positive"), std::string::npos) << zero.status().message();
  auto neg = PruneStructure::Parse("block-1x4");
  ASSERT_FALSE(neg.ok());
  EXPECT_NE(neg.status().message().find("whole numbers"), std::string::npos) << neg.status().message();
  auto nmzero = PruneStructure::Parse("0:4");
  ASSERT_FALSE(nmzero.ok());
  EXPECT_NE(nmzero.status().message().find("positive"), std::string::npos);
  auto unknown = PruneStructure::Parse("blocky");
  ASSERT_FALSE(unknown.ok());
  auto other = PruneStructure::Parse("sparse");
  ASSERT_FALSE(other.ok());
  EXPECT_NE(other.status().message().find("expected unstructured, block<R>x<C>"), std::string::npos);
}

TEST(PruneMasks, UnstructuredHitsTheSparsityExactlyAndPrunesTheSmallest) {
  Matrix s = RandomScores(37, 53, 1);
  for (double target : {0.0, 0.1, 0.5, 0.9, 0.99}) {
    auto m = ComputeMask(PruneStructure::Unstructured(), s, target);
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    EXPECT_EQ(m->pruned(), std::llround(target * 37 * 53));
    float max_pruned = 0.0f, min_kept = 1e30f;
    for (size_t i = 0; i < s.values.size(); ++i) {
      if (m->keep[i]) min_kept = std::min(min_kept, s.values[i]);
      else max_pruned = std::max(max_pruned, s.values[i]);
    }
    if (target > 0) EXPECT_LE(max_pruned, min_kept);
  }
}

// Each block (partial ones at the edges included) is all pruned or all kept.
void ExpectWholeBlocks(const PruneMask& m, int R, int C) {
  for (int64_t r0 = 0; r0 < m.rows; r0 += R)
    for (int64_t c0 = 0; c0 < m.cols; c0 += C) {
      const uint8_t first = m.keep[r0 * m.cols + c0];
      for (int64_t r = r0; r < std::min<int64_t>(m.rows, r0 + R); ++r)
        for (int64_t c = c0; c < std::min<int64_t>(m.cols, c0 + C); ++c)
          ASSERT_EQ(m.keep[r * m.cols + c], first) << "block at (" << r0 << ", " << c0 << ") is split";
    }
}

TEST(PruneMasks, BlocksAreWholeAndReachTheSparsityWithin1Percent) {
  // 130 x 70 leaves partial blocks at the right and bottom edges for every size.
  Matrix s = RandomScores(130, 70, 2);
  for (auto [R, C] : std::vector<std::pair<int, int>>{{1, 4}, {4, 1}, {4, 4}, {8, 8}, {16, 16}}) {
    for (double target : {0.3, 0.5, 0.8}) {
      auto m = ComputeMask(PruneStructure::Block(R, C), s, target, PruneScore::kL2);
      ASSERT_TRUE(m.ok()) << m.status().ToString();
      ExpectWholeBlocks(*m, R, C);
      EXPECT_NEAR(m->sparsity(), target, 0.01) << "block" << R << "x" << C;
    }
  }
}

TEST(PruneMasks, PartialEdgeBlocksArePrunedAsWholeBlocks) {
  // 10 x 10 with 4x4 blocks: the last block-row and -column are 2 wide.
  // Give the edge blocks the lowest scores: they must go first, entirely.
  Matrix s(10, 10, 5.0f);
  for (int64_t r = 0; r < 10; ++r)
    for (int64_t c = 0; c < 10; ++c)
      if (r >= 8 || c >= 8) s.at(r, c) = 0.1f;
  // Edge elements: 100 - 64 = 36 -> sparsity 0.36 takes exactly the five partial blocks.
  auto m = ComputeMask(PruneStructure::Block(4, 4), s, 0.36);
  ASSERT_TRUE(m.ok());
  ExpectWholeBlocks(*m, 4, 4);
  for (int64_t r = 0; r < 10; ++r)
    for (int64_t c = 0; c < 10; ++c) EXPECT_EQ(m->keep[r * 10 + c], (r >= 8 || c >= 8) ? 0 : 1);
  // 32x32 blocks on 40x40: one whole block and three partial ones.
  Matrix big = RandomScores(40, 40, 3);
  auto b = ComputeMask(PruneStructure::Block(32, 32), big, 0.36);
  ASSERT_TRUE(b.ok());
  ExpectWholeBlocks(*b, 32, 32);
  EXPECT_GT(b->pruned(), 0);
}

TEST(PruneMasks, NMKeepsAtMostNInEveryGroupOfM) {
  Matrix s = RandomScores(33, 64, 4);
  for (auto [n, mm] : std::vector<std::pair<int, int>>{{2, 4}, {4, 8}, {1, 4}}) {
    PruneStructure st = PruneStructure::NM(n, mm);
    auto m = ComputeMask(st, s, st.FixedSparsity());
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    EXPECT_NEAR(m->sparsity(), st.FixedSparsity(), 1e-12);
    for (int64_t r = 0; r < s.rows; ++r)
      for (int64_t c0 = 0; c0 < s.cols; c0 += mm) {
        int zeros = 0;
        float max_pruned = 0.0f, min_kept = 1e30f;
        for (int64_t c = c0; c < c0 + mm; ++c) {
          const size_t i = static_cast<size_t>(r * s.cols + c);
          zeros += m->keep[i] == 0;
          if (m->keep[i]) min_kept = std::min(min_kept, s.values[i]);
          else max_pruned = std::max(max_pruned, s.values[i]);
        }
        EXPECT_GE(zeros, mm - n) << st.ToString() << " row " << r << " group " << c0;
        EXPECT_LE(max_pruned, min_kept);  // the smallest of each group go
      }
  }
}

TEST(PruneMasks, NMRaggedTailKeepsAtMostN) {
  // cols = 10 with 2:4: groups [0,4) [4,8) and a tail [8,10) that keeps min(2, 2) = 2.
  Matrix s = RandomScores(3, 10, 5);
  auto m = ComputeMask(PruneStructure::NM(2, 4), s, 0.5);
  ASSERT_TRUE(m.ok());
  for (int64_t r = 0; r < 3; ++r) {
    int tail_kept = m->keep[r * 10 + 8] + m->keep[r * 10 + 9];
    EXPECT_EQ(tail_kept, 2);
  }
  EXPECT_EQ(m->pruned(), 3 * 4);
  // 1:4 on a tail of 3 keeps 1.
  Matrix t = RandomScores(2, 7, 6);
  auto m14 = ComputeMask(PruneStructure::NM(1, 4), t, 0.75);
  ASSERT_TRUE(m14.ok());
  for (int64_t r = 0; r < 2; ++r) EXPECT_EQ(m14->keep[r * 7 + 4] + m14->keep[r * 7 + 5] + m14->keep[r * 7 + 6], 1);
}

TEST(PruneMasks, NMRampsUpThroughItsCandidates) {
  Matrix s = RandomScores(16, 32, 7);
  auto half = ComputeMask(PruneStructure::NM(2, 4), s, 0.25);
  ASSERT_TRUE(half.ok());
  EXPECT_NEAR(half->sparsity(), 0.25, 1e-12);
  auto full = ComputeMask(PruneStructure::NM(2, 4), s, 0.5);
  ASSERT_TRUE(full.ok());
  for (size_t i = 0; i < s.values.size(); ++i)
    if (!half->keep[i]) EXPECT_EQ(full->keep[i], 0) << "a weight pruned at 25% is kept at 50%";
  auto over = ComputeMask(PruneStructure::NM(2, 4), s, 0.6);
  ASSERT_FALSE(over.ok());
  EXPECT_NE(over.status().message().find("the most that 2:4 allows"), std::string::npos) << over.status().message();
}

TEST(PruneMasks, ChannelPrunesWholeRowsWithTheLowestNorms) {
  Matrix s = RandomScores(20, 9, 8);
  for (int64_t c = 0; c < 9; ++c) {
    s.at(3, c) = 0.01f;
    s.at(11, c) = 0.02f;
  }
  auto m = ComputeMask(PruneStructure::Channel(), s, 0.1);
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->pruned(), 2 * 9);
  for (int64_t c = 0; c < 9; ++c) {
    EXPECT_EQ(m->keep[3 * 9 + c], 0);
    EXPECT_EQ(m->keep[11 * 9 + c], 0);
  }
}

TEST(PruneMasks, SparsityOutsideTheUnitIntervalIsAnError) {
  Matrix s = RandomScores(4, 4, 9);
  for (double bad : {-0.1, 1.0, 1.5, std::nan("")}) {
    auto m = ComputeMask(PruneStructure::Unstructured(), s, bad);
    ASSERT_FALSE(m.ok());
    EXPECT_EQ(m.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(m.status().message().find("must be in [0, 1)"), std::string::npos) << m.status().message();
  }
  EXPECT_FALSE(ComputeMask(PruneStructure::Auto(), s, 0.5).ok());
  Matrix bad_shape(4, 4);
  bad_shape.values.resize(3);
  EXPECT_FALSE(ComputeMask(PruneStructure::Unstructured(), bad_shape, 0.5).ok());
}

TEST(PruneScores, ActivationScoresWeighColumnsByInputNorms) {
  Matrix w(2, 3);
  w.values = {1.0f, -1.0f, 1.0f, 2.0f, 2.0f, -2.0f};
  auto s = ElementScores(w, PruneScore::kActivation, {1.0, 10.0, 0.0});
  ASSERT_TRUE(s.ok());
  EXPECT_FLOAT_EQ(s->at(0, 1), 10.0f);
  EXPECT_FLOAT_EQ(s->at(1, 2), 0.0f);
  EXPECT_FLOAT_EQ(s->at(1, 0), 2.0f);
  // Grouped: 2 groups of 1 row each, 6 norms.
  auto g = ElementScores(w, PruneScore::kActivation, {1, 1, 1, 3, 3, 3});
  ASSERT_TRUE(g.ok());
  EXPECT_FLOAT_EQ(g->at(1, 1), 6.0f);
  EXPECT_FALSE(ElementScores(w, PruneScore::kActivation, {1.0, 2.0}).ok());
  EXPECT_FALSE(ElementScores(w, PruneScore::kActivation, {1.0, -2.0, 1.0}).ok());
  auto mag = ElementScores(w, PruneScore::kMagnitude);
  ASSERT_TRUE(mag.ok());
  EXPECT_FLOAT_EQ(mag->at(0, 1), 1.0f);
}

// Item 8: pruned weights are exactly 0.0f and stay 0 through int8 quantization.
TEST(PruneMasks, PrunedWeightsAreExactZerosThroughInt8Quantization) {
  Tensor t = Gaussian({16, 32}, 10);
  Matrix w(16, 32);
  std::copy(t.data<float>(), t.data<float>() + t.numel(), w.values.begin());
  auto scores = ElementScores(w, PruneScore::kMagnitude);
  ASSERT_TRUE(scores.ok());
  auto mask = ComputeMask(PruneStructure::NM(2, 4), *scores, 0.5);
  ASSERT_TRUE(mask.ok());
  ASSERT_TRUE(ApplyMask(*mask, &w).ok());
  Tensor pruned = Tensor::FromVector<float>({16, 32}, w.values);
  for (bool per_channel : {true, false}) {
    QuantizedWeight q = QuantizeWeightSymmetric(pruned, 0, per_channel);
    for (int64_t i = 0; i < pruned.numel(); ++i) {
      if (!mask->keep[i]) {
        EXPECT_EQ(pruned.data<float>()[i], 0.0f);
        EXPECT_FALSE(std::signbit(pruned.data<float>()[i]));
        EXPECT_EQ(q.values.data<int8_t>()[i], 0);
      }
    }
  }
}

}  // namespace
}  // namespace sparq
