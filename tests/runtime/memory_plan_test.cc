// PlanMemory (runtime/memory_plan.h) on records made by hand: a valid layout
// (no two values live at one step share a byte), outputs over the inputs
// their rows may overwrite when those die there, and the bits of unplanned
// runs when an executor writes outputs over inputs.
#include "runtime/memory_plan.h"

#include <gtest/gtest.h>

#include <random>

#include "sparq/executor.h"
#include "test_util.h"

namespace sparq {
namespace {

// One output per step, slot i written by step i, read last by last_use[i].
struct Chain {
  MemoryRecord record;
  std::vector<std::vector<int>> step_outputs;
  std::vector<int> last_use;
  std::vector<bool> kept;

  void Add(int64_t bytes, int last) {
    const int step = static_cast<int>(step_outputs.size());
    record.requested.push_back({bytes});
    record.root.push_back(step);
    record.produced_at.push_back(step);
    step_outputs.push_back({step});
    last_use.push_back(last);
    kept.push_back(false);
    in_place.emplace_back();
  }
  std::vector<std::vector<int>> in_place;  // [step]: input slots output 0 may go over

  MemoryPlan Plan() const { return PlanMemory(record, step_outputs, last_use, kept, in_place); }
};

// Every pair of values whose lives [produced, last use] meet has disjoint bytes.
void ExpectValid(const Chain& c, const MemoryPlan& plan) {
  const size_t n = c.step_outputs.size();
  for (size_t a = 0; a < n; ++a) {
    const int64_t oa = plan.offset[a][0], ba = plan.bytes[a][0];
    ASSERT_GE(oa, 0) << a;
    EXPECT_GE(ba, c.record.requested[a][0]);
    EXPECT_LE(oa + ba, plan.total) << a;
    for (size_t b = a + 1; b < n; ++b) {
      const int64_t ob = plan.offset[b][0], bb = plan.bytes[b][0];
      const int end_a = std::max<int>(c.last_use[a], static_cast<int>(a));
      const bool live_together = static_cast<int>(b) <= end_a;  // b starts after a
      if (live_together) EXPECT_TRUE(oa + ba <= ob || ob + bb <= oa) << "values " << a << " and " << b;
    }
  }
}

TEST(MemoryPlan, RandomGraphsGetValidLayouts) {
  std::mt19937 rng(22);
  for (int graph = 0; graph < 200; ++graph) {
    Chain c;
    const int steps = 2 + static_cast<int>(rng() % 60);
    for (int i = 0; i < steps; ++i) {
      const int64_t bytes = 1 + static_cast<int64_t>(rng() % 5000);
      const int last = rng() % 8 == 0 ? -1 : std::min(steps - 1, i + 1 + static_cast<int>(rng() % 6));
      c.Add(bytes, last);
    }
    const MemoryPlan plan = c.Plan();
    ExpectValid(c, plan);
    int64_t top = 0;
    for (size_t i = 0; i < plan.offset.size(); ++i) top = std::max(top, plan.offset[i][0] + plan.bytes[i][0]);
    EXPECT_EQ(plan.total, top);
  }
}

// Elementwise steps whose row may write over an input (KernelDef::
// overwritable_inputs): the output shares the input's bytes when the input
// dies there and has the output's bytes, and only then.
TEST(MemoryPlan, AnOutputGoesOverAnInputThatDiesThere) {
  Chain c;
  c.Add(4096, 1);   // 0
  c.Add(4096, 3);   // 1 = f(0): 0 dies here
  c.Add(4096, 3);   // 2 = g(1): 1 lives on to step 3
  c.Add(4096, 4);   // 3 = h(1, 2): both die here
  c.Add(2048, -1);  // 4 = k(3): other bytes
  c.in_place[1] = {0};
  c.in_place[2] = {1};
  c.in_place[3] = {1, 2};
  c.in_place[4] = {3};
  const MemoryPlan plan = c.Plan();
  EXPECT_EQ(plan.offset[1][0], plan.offset[0][0]);  // in place
  EXPECT_NE(plan.offset[2][0], plan.offset[1][0]);  // 1 is still read by step 3
  EXPECT_EQ(plan.offset[3][0], plan.offset[1][0]);  // the first input that dies there
  EXPECT_NE(plan.offset[4][0], plan.offset[3][0]);  // 2048 bytes: not in place
  EXPECT_EQ(plan.values, 5);
  for (size_t s = 0; s < 5; ++s) EXPECT_TRUE(plan.in_arena[s]) << s;
  // The merged value lives from step 0 to step 4: nothing else is placed over it.
  EXPECT_TRUE(plan.offset[4][0] >= plan.offset[3][0] + 4096 || plan.offset[4][0] + 2048 <= plan.offset[3][0]);
  EXPECT_EQ(plan.total, 2 * 4096);  // 4 over 2, freed by step 3
}

TEST(MemoryPlan, KeptValuesAreNotWrittenOver) {
  Chain c;
  c.Add(4096, 1);
  c.Add(4096, -1);
  c.kept[0] = true;  // a graph output, say: its own buffer
  c.in_place[1] = {0};
  const MemoryPlan plan = c.Plan();
  EXPECT_EQ(plan.offset[0][0], -1);
  EXPECT_EQ(plan.offset[1][0], 0);
  EXPECT_FALSE(plan.in_arena[0]);
}

// x -> Mul(x, x) -> Add(., x) -> Sub(., .) -> Div(., c) -> Relu -> Add(., .) ->
// y: elementwise steps whose inputs die at them, so the plan writes outputs
// over inputs. Planned runs (after the recording one) give the unplanned
// bits at 1 and 2 threads, at two batch sizes.
TEST(MemoryPlan, InPlaceRunsGiveTheUnplannedBits) {
  Model m;
  m.opset_imports = {{"", 17}};
  Graph& g = m.graph;
  g.inputs.push_back(testing::FloatInput("x", {{-1, "batch"}, {4096, ""}}));
  g.outputs.push_back(testing::FloatInput("y", {{-1, "batch"}, {4096, ""}}));
  g.initializers["c"] = testing::RandomFloats({4096}, 7);
  g.nodes.push_back({"relu0", "Relu", "", {"x"}, {"r"}, {}, ""});
  g.nodes.push_back({"sq", "Mul", "", {"r", "r"}, {"a"}, {}, ""});
  g.nodes.push_back({"add", "Add", "", {"a", "r"}, {"b"}, {}, ""});
  g.nodes.push_back({"neg", "Sub", "", {"b", "b"}, {"d"}, {}, ""});
  g.nodes.push_back({"div", "Div", "", {"c", "d"}, {"e"}, {}, ""});
  g.nodes.push_back({"relu", "Relu", "", {"e"}, {"f"}, {}, ""});
  g.nodes.push_back({"twice", "Add", "", {"f", "f"}, {"y"}, {}, ""});
  for (int threads : {1, 2}) {
    ExecutorOptions planned_options;
    planned_options.threads = threads;
    ExecutorOptions plain_options = planned_options;
    plain_options.plan_memory = false;
    auto planned = Executor::Create(m, planned_options);
    auto plain = Executor::Create(m, plain_options);
    ASSERT_TRUE(planned.ok() && plain.ok());
    for (int round = 0; round < 3; ++round)
      for (int64_t batch : {3, 16}) {
        Tensor x = testing::RandomFloats({batch, 4096}, 11 + round);
        TensorMap want, got;
        ASSERT_TRUE((*plain)->Run({{"x", x}}, &want).ok());
        ASSERT_TRUE((*planned)->Run({{"x", x}}, &got).ok());
        EXPECT_TRUE(got.at("y").Equals(want.at("y"))) << threads << " threads, round " << round << ", batch " << batch;
      }
  }
}

// A shape that changes with the data under one plan (NonZero): the planned
// in-place Add, recorded with r of 65536 values, later sees r of 1 value that
// it broadcasts. Its output then gets a buffer of its own (written over r, a
// second thread would read the broadcast value after the first overwrote
// it): the unplanned bits.
TEST(MemoryPlan, InPlaceNeedsTheRecordedBytes) {
  Model m;
  m.opset_imports = {{"", 17}};
  Graph& g = m.graph;
  g.inputs.push_back(testing::FloatInput("x", {{65536, ""}}));
  g.inputs.push_back(testing::FloatInput("y", {{65536, ""}}));
  g.outputs.push_back(testing::FloatInput("z", {{1, ""}, {65536, ""}}));
  g.nodes.push_back({"nz", "NonZero", "", {"x"}, {"idx"}, {}, ""});
  g.nodes.push_back({"gather", "Gather", "", {"x", "idx"}, {"gx"}, {Attribute::Int("axis", 0)}, ""});
  g.nodes.push_back({"relu", "Relu", "", {"gx"}, {"r"}, {}, ""});
  g.nodes.push_back({"add", "Add", "", {"r", "y"}, {"a"}, {}, ""});
  g.nodes.push_back({"relu_out", "Relu", "", {"a"}, {"z"}, {}, ""});  // a is not kept: it may go over r
  Tensor all = testing::RandomFloats({65536}, 3, 1.0f, 2.0f);  // every value nonzero
  Tensor one(DataType::kFloat32, {65536});
  one.data<float>()[100] = 3.0f;  // one nonzero value
  const Tensor y = testing::RandomFloats({65536}, 4);
  for (int threads : {1, 2}) {
    ExecutorOptions planned_options;
    planned_options.threads = threads;
    ExecutorOptions plain_options = planned_options;
    plain_options.plan_memory = false;
    auto planned = Executor::Create(m, planned_options);
    auto plain = Executor::Create(m, plain_options);
    ASSERT_TRUE(planned.ok() && plain.ok());
    for (const Tensor* x : {&all, &all, &one, &all, &one}) {
      TensorMap want, got;
      ASSERT_TRUE((*plain)->Run({{"x", *x}, {"y", y}}, &want).ok());
      ASSERT_TRUE((*planned)->Run({{"x", *x}, {"y", y}}, &got).ok());
      EXPECT_TRUE(got.at("z").Equals(want.at("z"))) << threads << " threads";
    }
  }
}

}  // namespace
}  // namespace sparq
