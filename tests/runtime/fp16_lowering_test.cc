// Float16 models lowered to float32 at load (runtime/passes/fp16_lowering.h): the
// rewrite itself, outputs vs the float16 graph on the reference kernels, graph
// input/output types kept, and the same bits for 1 and 2 threads.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <set>

#include "runtime/passes/fp16_lowering.h"
#include "sparq/executor.h"
#include "test_util.h"

namespace sparq {
namespace {

// Float16 lowering changes outputs by float16 rounding of every intermediate
// value of the float16 graph: |lowered - fp16 graph| <= this * max |output|.
constexpr float kFp16LoweringTolerance = 1e-2f;

Tensor ToHalf(const Tensor& f) {
  Tensor h(DataType::kFloat16, f.shape());
  for (int64_t i = 0; i < f.numel(); ++i) h.data<Float16>()[i].bits = FloatToHalf(f.data<float>()[i]);
  return h;
}

ValueInfo HalfInput(const std::string& name, std::vector<Dim> dims) {
  ValueInfo v = testing::FloatInput(name, std::move(dims));
  v.dtype = DataType::kFloat16;
  return v;
}

// x:f16[batch,16] -> MatMul(W:f16[16,8]) -> Add(b:f16) -> Relu -> y:f16
//                                                        -> Cast(to=float16) of a float path -> z:f16
Model HalfMlp() {
  Model m;
  m.opset_imports = {{"", 17}};
  Graph& g = m.graph;
  g.inputs.push_back(HalfInput("x", {{-1, "batch"}, {16, ""}}));
  g.outputs.push_back(HalfInput("y", {{-1, "batch"}, {8, ""}}));
  g.outputs.push_back(HalfInput("z", {{-1, "batch"}, {8, ""}}));
  g.initializers["W"] = ToHalf(testing::RandomFloats({16, 8}, 1));
  g.initializers["b"] = ToHalf(testing::RandomFloats({8}, 2));
  g.nodes.push_back({"mm", "MatMul", "", {"x", "W"}, {"h"}, {}, ""});
  g.nodes.push_back({"add", "Add", "", {"h", "b"}, {"a"}, {}, ""});
  g.nodes.push_back({"relu", "Relu", "", {"a"}, {"y"}, {}, ""});
  g.nodes.push_back({"up", "Cast", "", {"a"}, {"a32"}, {Attribute::Int("to", 1)}, ""});
  g.nodes.push_back({"sig", "Sigmoid", "", {"a32"}, {"s32"}, {}, ""});
  g.nodes.push_back({"down", "Cast", "", {"s32"}, {"z"}, {Attribute::Int("to", 10)}, ""});
  return m;
}

TensorMap RunModel(const Model& m, const ExecutorOptions& options, const Tensor& x) {
  auto exec = Executor::Create(m, options);
  EXPECT_TRUE(exec.ok()) << exec.status().ToString();
  TensorMap out;
  if (!exec.ok()) return out;
  Status st = exec.value()->Run({{"x", x}}, &out);
  EXPECT_TRUE(st.ok()) << st.ToString();
  return out;
}

TEST(Fp16Lowering, RewritesInitializersCastsAndBoundaries) {
  Model m = HalfMlp();
  ASSERT_TRUE(LowerFloat16ToFloat32(&m));
  const Graph& g = m.graph;
  EXPECT_EQ(g.initializers.at("W").dtype(), DataType::kFloat32);
  EXPECT_EQ(g.initializers.at("b").dtype(), DataType::kFloat32);
  // Graph inputs and outputs keep float16: a Cast in front, Casts behind.
  EXPECT_EQ(g.inputs[0].dtype, DataType::kFloat16);
  EXPECT_EQ(g.outputs[0].dtype, DataType::kFloat16);
  ASSERT_GE(g.nodes.size(), 8u);
  EXPECT_EQ(g.nodes.front().op_type, "Cast");
  EXPECT_EQ(g.nodes.front().inputs[0], "x");
  EXPECT_EQ(g.nodes.front().attr_int("to", 0), 1);
  EXPECT_EQ(g.nodes[1].inputs[0], g.nodes.front().outputs[0]);
  for (const Node& n : g.nodes)
    if (n.name == "down") EXPECT_EQ(n.attr_int("to", 0), 1);  // the graph's own Cast(to=float16) now keeps float
  EXPECT_EQ(g.nodes.back().op_type, "Cast");
  EXPECT_EQ(g.nodes.back().attr_int("to", 0), 10);
}

TEST(Fp16Lowering, LeavesFloat32ModelsAlone) {
  Model m;
  m.opset_imports = {{"", 17}};
  m.graph.inputs.push_back(testing::FloatInput("x", {{2, ""}}));
  m.graph.outputs.push_back(testing::FloatInput("y", {{2, ""}}));
  m.graph.nodes.push_back({"relu", "Relu", "", {"x"}, {"y"}, {}, ""});
  EXPECT_FALSE(LowerFloat16ToFloat32(&m));
  EXPECT_EQ(m.graph.nodes.size(), 1u);
}

TEST(Fp16Lowering, LeavesOverridableHalfInitializersAlone) {
  Model m = HalfMlp();
  ValueInfo w = HalfInput("W", {{16, ""}, {8, ""}});
  m.graph.initializer_inputs.push_back(w);
  EXPECT_FALSE(LowerFloat16ToFloat32(&m));
  EXPECT_EQ(m.graph.initializers.at("W").dtype(), DataType::kFloat16);
}

TEST(Fp16Lowering, MatchesTheFloat16GraphWithinTolerance) {
  const Model m = HalfMlp();
  const Tensor x = ToHalf(testing::RandomFloats({5, 16}, 3));
  ExecutorOptions ref;
  ref.threads = 1;
  ref.backend = "reference";
  ExecutorOptions fast;
  fast.threads = 1;
  fast.float16 = Float16Execution::kFloat32;
  const TensorMap want = RunModel(m, ref, x), got = RunModel(m, fast, x);
  for (const char* name : {"y", "z"}) {
    ASSERT_TRUE(got.count(name) && want.count(name)) << name;
    const Tensor &a = got.at(name), &b = want.at(name);
    ASSERT_EQ(a.dtype(), DataType::kFloat16) << name;
    ASSERT_EQ(a.shape(), b.shape()) << name;
    float max_ref = 0;
    for (int64_t i = 0; i < b.numel(); ++i) max_ref = std::max(max_ref, std::abs(HalfToFloat(b.data<Float16>()[i].bits)));
    for (int64_t i = 0; i < a.numel(); ++i)
      EXPECT_NEAR(HalfToFloat(a.data<Float16>()[i].bits), HalfToFloat(b.data<Float16>()[i].bits),
                  kFp16LoweringTolerance * max_ref)
          << name << "[" << i << "]";
  }
}

TEST(Fp16Lowering, SameBitsForOneAndTwoThreads) {
  const Model m = HalfMlp();
  const Tensor x = ToHalf(testing::RandomFloats({33, 16}, 4));
  ExecutorOptions one;
  one.threads = 1;
  one.float16 = Float16Execution::kRounded;
  ExecutorOptions two = one;
  two.threads = 2;
  const TensorMap a = RunModel(m, one, x), b = RunModel(m, two, x);
  for (const char* name : {"y", "z"}) {
    ASSERT_TRUE(a.count(name) && b.count(name)) << name;
    ASSERT_EQ(a.at(name).numel(), b.at(name).numel());
    EXPECT_EQ(std::memcmp(a.at(name).raw_data(), b.at(name).raw_data(), a.at(name).nbytes()), 0) << name;
  }
}

}  // namespace
}  // namespace sparq

namespace sparq {
namespace {

// x:f16 -> Mul(300) -> Mul(300) -> Div(1000) -> y:f16: the middle value
// (x * 90000) is beyond float16's range for |x| >= 0.73.
Model HalfOverflow() {
  Model m;
  m.opset_imports = {{"", 17}};
  Graph& g = m.graph;
  g.inputs.push_back(HalfInput("x", {{-1, "batch"}, {4, ""}}));
  g.outputs.push_back(HalfInput("y", {{-1, "batch"}, {4, ""}}));
  g.initializers["k"] = ToHalf(Tensor::FromVector<float>({}, {300.0f}));
  g.initializers["d"] = ToHalf(Tensor::FromVector<float>({}, {1000.0f}));
  g.nodes.push_back({"m1", "Mul", "", {"x", "k"}, {"a"}, {}, ""});
  g.nodes.push_back({"m2", "Mul", "", {"a", "k"}, {"b"}, {}, ""});
  g.nodes.push_back({"div", "Div", "", {"b", "d"}, {"y"}, {}, ""});
  return m;
}

// A float16 model runs by default on the fast float32 kernels (it ran on the
// reference kernels unless --fp16-as-fp32), each float16 value rounded to
// float16 after its operator: the reference's results within float16
// rounding, and the reference's overflow.
TEST(Fp16Lowering, DefaultRunsFastKernelsRoundingBetweenOperators) {
  const Model m = HalfMlp();
  ExecutorOptions fast;
  fast.threads = 1;
  auto exec = Executor::Create(m, fast);
  ASSERT_TRUE(exec.ok()) << exec.status().ToString();
  int rounds = 0;
  for (const NodeKernel& k : (*exec)->NodeKernels()) {
    if (k.op_type == "MatMul") EXPECT_NE(k.kernel, "ref") << "the MatMul ran on the reference kernel";
    if (k.op_type == "RoundToFloat16") {
      ++rounds;
      EXPECT_EQ(k.kernel, "round_f16_rows");
    }
  }
  EXPECT_GE(rounds, 2);  // h and a (y is a graph output: its Cast rounds it)
  ExecutorOptions ref;
  ref.threads = 1;
  ref.backend = "reference";
  const Tensor x = ToHalf(testing::RandomFloats({5, 16}, 3));
  const TensorMap want = RunModel(m, ref, x), got = RunModel(m, fast, x);
  for (const char* name : {"y", "z"}) {
    const Tensor &a = got.at(name), &b = want.at(name);
    ASSERT_EQ(a.dtype(), DataType::kFloat16) << name;
    for (int64_t i = 0; i < a.numel(); ++i) {
      const float fa = HalfToFloat(a.data<Float16>()[i].bits), fb = HalfToFloat(b.data<Float16>()[i].bits);
      EXPECT_NEAR(fa, fb, 2e-3f * std::max(1.0f, std::abs(fb))) << name << "[" << i << "]";
    }
  }
}

TEST(Fp16Lowering, RoundingKeepsFloat16OverflowVisible) {
  const Model m = HalfOverflow();
  const Tensor x = ToHalf(Tensor::FromVector<float>({1, 4}, {0.5f, 1.0f, -2.0f, 0.25f}));
  ExecutorOptions ref, rounded, float32;
  ref.backend = "reference";
  float32.float16 = Float16Execution::kFloat32;
  const TensorMap want = RunModel(m, ref, x), got = RunModel(m, rounded, x), wide = RunModel(m, float32, x);
  for (int64_t i = 0; i < 4; ++i) {
    const float w = HalfToFloat(want.at("y").data<Float16>()[i].bits);
    const float g = HalfToFloat(got.at("y").data<Float16>()[i].bits);
    const float f = HalfToFloat(wide.at("y").data<Float16>()[i].bits);
    EXPECT_EQ(std::isinf(g), std::isinf(w)) << i << ": " << g << " vs the reference's " << w;
    if (!std::isinf(w)) EXPECT_NEAR(g, w, 1e-3f * std::abs(w)) << i;
    EXPECT_FALSE(std::isinf(f)) << i << ": float32 throughout does not overflow";
  }
  EXPECT_TRUE(std::isinf(HalfToFloat(got.at("y").data<Float16>()[1].bits)));  // 1 * 90000 > 65504
}

TEST(Fp16Lowering, Float16ValuesFollowTheGraph) {
  Model m = HalfMlp();
  std::set<std::string> half;
  ASSERT_TRUE(LowerFloat16ToFloat32(&m, &half));
  // h, a (float16 in the file) are rounded; a32 / s32 were float32; x is an
  // input (exact); z is produced by a Cast to float16.
  for (const char* v : {"h", "a"}) EXPECT_TRUE(half.count(v)) << v;
  for (const char* v : {"a32", "s32", "x", "W"}) EXPECT_FALSE(half.count(v)) << v;
}

}  // namespace
}  // namespace sparq

namespace sparq {
namespace {

// The fast sparq.RoundToFloat16 row (F16C conversion rows) gives the
// reference kernel's bits on random data spanning float16's range, its
// overflow and subnormals, in chunks split over threads.
TEST(Fp16Lowering, RoundRowIsTheReferencesBits) {
  Model m;
  m.opset_imports = {{"", 17}, {"sparq", 1}};
  m.graph.inputs.push_back(testing::FloatInput("x", {{-1, "n"}}));
  m.graph.outputs.push_back(testing::FloatInput("y", {{-1, "n"}}));
  m.graph.nodes.push_back({"r", "RoundToFloat16", "sparq", {"x"}, {"y"}, {}, ""});
  Tensor x = testing::RandomFloats({20011}, 7, -1.0f, 1.0f);
  float* p = x.data<float>();
  for (int64_t i = 0; i < x.numel(); ++i) p[i] *= std::ldexp(1.0f, static_cast<int>(i % 41) - 25);  // 2^-25 .. 2^15
  ExecutorOptions ref, fast;
  ref.backend = "reference";
  fast.threads = 2;
  const TensorMap want = RunModel(m, ref, x), got = RunModel(m, fast, x);
  ASSERT_TRUE(want.count("y") && got.count("y"));
  EXPECT_TRUE(got.at("y").Equals(want.at("y")));
}

}  // namespace
}  // namespace sparq

namespace sparq {
namespace {

// x:f16 -> Mul(k) -> a -> Reshape -> b -> Transpose -> c -> Concat(c, w) -> d -> Add(d, d) -> e -> Relu -> y:f16
// where w = Neg of a float32 Cast of x, Cast back to float16: b and c only
// move a's values, so they need no rounding; d reads w (a Cast to float16:
// rounded) and c, so it needs none either; a, w and e are rounded.
Model HalfMoves() {
  Model m;
  m.opset_imports = {{"", 17}};
  Graph& g = m.graph;
  g.inputs.push_back(HalfInput("x", {{2, ""}, {6, ""}}));
  g.outputs.push_back(HalfInput("y", {{6, ""}, {3, ""}, {2, ""}}));
  g.initializers["k"] = ToHalf(Tensor::FromVector<float>({}, {3.3f}));
  g.initializers["shape"] = Tensor::FromVector<int64_t>({3}, {3, 2, 2});
  g.nodes.push_back({"mul", "Mul", "", {"x", "k"}, {"a"}, {}, ""});
  g.nodes.push_back({"reshape", "Reshape", "", {"a", "shape"}, {"b"}, {}, ""});
  g.nodes.push_back({"transpose", "Transpose", "", {"b"}, {"c"}, {Attribute::Ints("perm", {2, 0, 1})}, ""});
  g.nodes.push_back({"up", "Cast", "", {"x"}, {"x32"}, {Attribute::Int("to", 1)}, ""});
  g.nodes.push_back({"sig", "Neg", "", {"x32"}, {"s32"}, {}, ""});
  g.nodes.push_back({"down", "Cast", "", {"s32"}, {"s16"}, {Attribute::Int("to", 10)}, ""});
  g.nodes.push_back({"reshape2", "Reshape", "", {"s16", "shape"}, {"w0"}, {}, ""});
  g.nodes.push_back({"transpose2", "Transpose", "", {"w0"}, {"w"}, {Attribute::Ints("perm", {2, 0, 1})}, ""});
  g.nodes.push_back({"concat", "Concat", "", {"c", "w"}, {"d"}, {Attribute::Int("axis", 0)}, ""});
  g.nodes.push_back({"add", "Add", "", {"d", "d"}, {"e"}, {}, ""});
  g.nodes.push_back({"relu", "Relu", "", {"e"}, {"y"}, {}, ""});
  return m;
}

// Ops that only move or select float16 values (Reshape, Transpose, Concat, ...)
// get no RoundToFloat16 after them when what they read is float16 already:
// rounding there is the identity. The outputs stay the reference's bits.
TEST(Fp16Lowering, NoRoundingAfterOpsThatOnlyMoveFloat16Values) {
  Model m = HalfMoves();
  std::set<std::string> half;
  ASSERT_TRUE(LowerFloat16ToFloat32(&m, &half));
  for (const char* v : {"a", "b", "c", "s16", "w0", "w", "d", "e"}) EXPECT_TRUE(half.count(v)) << v;
  EXPECT_EQ(RoundFloat16Values(&m, half), 3u);  // a, s16 (the Cast to float16), e
  std::set<std::string> rounded;
  for (const Node& n : m.graph.nodes)
    if (n.op_type == "RoundToFloat16") rounded.insert(n.outputs[0]);
  EXPECT_EQ(rounded, (std::set<std::string>{"a", "s16", "e"}));

  // The same bits as the reference kernels computing in float16, 1 and 2 threads.
  const Model original = HalfMoves();
  ExecutorOptions ref;
  ref.backend = "reference";
  Tensor x = testing::RandomFloats({2, 6}, 11, -30.0f, 30.0f);
  const Tensor xh = ToHalf(x);
  const TensorMap want = RunModel(original, ref, xh);
  for (int threads : {1, 2}) {
    ExecutorOptions fast;
    fast.threads = threads;
    const TensorMap got = RunModel(original, fast, xh);
    ASSERT_TRUE(got.count("y") && want.count("y"));
    EXPECT_TRUE(got.at("y").Equals(want.at("y"))) << threads << " threads";
  }
}

// A Relu / Concat reading a value that was float32 (a graph input cast up and
// not rounded, or an initializer) is rounded as before.
TEST(Fp16Lowering, MovesOfValuesNotKnownFloat16AreStillRounded) {
  Model m;
  m.opset_imports = {{"", 17}};
  Graph& g = m.graph;
  g.inputs.push_back(testing::FloatInput("x", {{4, ""}}));
  g.outputs.push_back(HalfInput("y", {{4, ""}}));
  g.nodes.push_back({"down", "Cast", "", {"x"}, {"h"}, {Attribute::Int("to", 10)}, ""});
  g.nodes.push_back({"up", "Cast", "", {"h"}, {"f"}, {Attribute::Int("to", 1)}, ""});
  g.nodes.push_back({"relu32", "Relu", "", {"x"}, {"r"}, {}, ""});
  g.nodes.push_back({"down2", "Cast", "", {"r"}, {"r16"}, {Attribute::Int("to", 10)}, ""});
  g.nodes.push_back({"neg", "Neg", "", {"r16"}, {"y"}, {}, ""});
  std::set<std::string> half;
  ASSERT_TRUE(LowerFloat16ToFloat32(&m, &half));
  EXPECT_EQ(RoundFloat16Values(&m, half), 2u);  // h and r16: Casts to float16
}

}  // namespace
}  // namespace sparq
