// Sparsity schedules against their formulas, and their errors.
#include <gtest/gtest.h>

#include <cmath>

#include "sparq/prune.h"

namespace sparq {
namespace {

TEST(PruneSchedule, AgpFollowsTheCubicFormula) {
  const double si = 0.1, sf = 0.8;
  const int n = 5;
  auto s = ScheduleSparsities(PruneSchedule::kAgp, sf, n, si);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  ASSERT_EQ(s->size(), 5u);
  for (int t = 1; t <= n; ++t) {
    const double expected = sf + (si - sf) * std::pow(1.0 - static_cast<double>(t) / n, 3);
    EXPECT_NEAR((*s)[t - 1], expected, 1e-12) << "t = " << t;
  }
  EXPECT_EQ(s->back(), sf);
  // Most of the pruning happens early.
  EXPECT_GT((*s)[0] - si, (*s)[4] - (*s)[3]);
}

TEST(PruneSchedule, LinearAndOneShot) {
  auto lin = ScheduleSparsities(PruneSchedule::kLinear, 0.6, 4);
  ASSERT_TRUE(lin.ok());
  EXPECT_NEAR((*lin)[0], 0.15, 1e-12);
  EXPECT_NEAR((*lin)[1], 0.30, 1e-12);
  EXPECT_NEAR((*lin)[2], 0.45, 1e-12);
  EXPECT_EQ((*lin)[3], 0.6);
  auto one = ScheduleSparsities(PruneSchedule::kOneShot, 0.5, 1);
  ASSERT_TRUE(one.ok());
  ASSERT_EQ(one->size(), 1u);
  EXPECT_EQ((*one)[0], 0.5);
}

TEST(PruneSchedule, Errors) {
  auto many = ScheduleSparsities(PruneSchedule::kOneShot, 0.5, 3);
  ASSERT_FALSE(many.ok());
  EXPECT_NE(many.status().message().find("oneshot schedule takes 1 step"), std::string::npos);
  auto high = ScheduleSparsities(PruneSchedule::kAgp, 1.0, 3);
  ASSERT_FALSE(high.ok());
  EXPECT_NE(high.status().message().find("must be in [0, 1)"), std::string::npos);
  EXPECT_FALSE(ScheduleSparsities(PruneSchedule::kAgp, -0.2, 3).ok());
  EXPECT_FALSE(ScheduleSparsities(PruneSchedule::kLinear, 0.5, 0).ok());
  EXPECT_FALSE(ScheduleSparsities(PruneSchedule::kLinear, 0.5, 2, 0.7).ok());
}

TEST(PruneSchedule, NamesRoundTrip) {
  for (auto s : {PruneSchedule::kOneShot, PruneSchedule::kLinear, PruneSchedule::kAgp}) {
    auto p = ParsePruneSchedule(PruneScheduleName(s));
    ASSERT_TRUE(p.ok());
    EXPECT_EQ(*p, s);
  }
  for (auto s : {PruneScore::kMagnitude, PruneScore::kL1, PruneScore::kL2, PruneScore::kActivation}) {
    auto p = ParsePruneScore(PruneScoreName(s));
    ASSERT_TRUE(p.ok());
    EXPECT_EQ(*p, s);
  }
  EXPECT_FALSE(ParsePruneSchedule("cubic").ok());
  EXPECT_FALSE(ParsePruneScore("taylor").ok());
}

}  // namespace
}  // namespace sparq
