// sparq.Attention (runtime/passes/float_fusion.h, kernels/cpu/attention_f32.h):
// BERT's MatMul -> Mul / Div -> Add(mask) -> Softmax -> MatMul fuses into one
// node; on the reference kernels the fused graph gives the unfused graph's
// bits; on the forced ISA's attention_f32 row, within kAttentionF32RelTol *
// max(1, max |V|) of them, the same bits for 1 and 3 threads; graphs outside
// the pattern keep their nodes.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <utility>
#include <string>
#include <vector>

#include "kernels/cpu/attention_f32.h"
#include "sparq/executor.h"
#include "test_util.h"
#include "tests/kernels/isa_sweep.h"

namespace sparq {
namespace {

class AttentionF32Test : public testing::IsaSweepTest {};

struct AttentionCase {
  const char* name;
  const char* scale_op;  // "Mul", "Div" or "" (none)
  Shape mask;            // empty: no mask
  bool mask_first;       // Add(mask, scores)
  bool scores_output;    // the scores are also a graph output: no fusion
};

// Q [2, 3, 37, 24] x K^T [2, 3, 24, 45] -> scale -> mask -> Softmax -> x V [2, 3, 45, 19].
Model AttentionModel(const AttentionCase& c) {
  Model m;
  m.opset_imports = {{"", 13}};
  Graph& g = m.graph;
  for (const char* in : {"q", "kt", "v"}) {
    g.inputs.push_back(testing::FloatInput(in, {}));
    g.inputs.back().has_shape = false;
  }
  g.outputs.push_back(testing::FloatInput("y", {}));
  std::string scores = "s0";
  g.nodes.push_back({"qk", "MatMul", "", {"q", "kt"}, {scores}, {}, ""});
  if (std::string(c.scale_op) == "Mul" || std::string(c.scale_op) == "Div") {
    g.initializers["scale"] = Tensor::Scalar<float>(std::string(c.scale_op) == "Mul" ? 0.125f : 8.0f);
    g.nodes.push_back({"scale", c.scale_op, "", {scores, "scale"}, {"s1"}, {}, ""});
    scores = "s1";
  }
  if (!c.mask.empty()) {
    Tensor mask = testing::RandomFloats(c.mask, 4, -1.0f, 1.0f);
    for (int64_t i = 0; i < mask.numel(); i += 5) mask.data<float>()[i] = -10000.0f;
    g.initializers["mask"] = mask;
    g.nodes.push_back({"mask", "Add", "", c.mask_first ? std::vector<std::string>{"mask", scores}
                                                     : std::vector<std::string>{scores, "mask"}, {"s2"}, {}, ""});
    scores = "s2";
  }
  g.nodes.push_back({"softmax", "Softmax", "", {scores}, {"p"}, {Attribute::Int("axis", -1)}, ""});
  g.nodes.push_back({"pv", "MatMul", "", {"p", "v"}, {"y"}, {}, ""});
  if (c.scores_output) g.outputs.push_back(testing::FloatInput(scores, {}));
  return m;
}

struct RunResult {
  Tensor y;
  std::vector<std::string> kernels;
};

RunResult RunModel(const Model& m, const TensorMap& feed, bool reference, bool fuse, int threads) {
  ExecutorOptions options;
  options.backend = reference ? "reference" : "cpu";
  if (fuse) options.profile = GraphProfile::kObserveKept;
  options.threads = threads;
  RunResult r;
  auto exec = Executor::Create(m, options);
  EXPECT_TRUE(exec.ok()) << exec.status().ToString();
  if (!exec.ok()) return r;
  TensorMap out;
  EXPECT_TRUE((*exec)->Run(feed, &out).ok());
  r.y = out["y"];
  for (const NodeKernel& k : (*exec)->NodeKernels()) r.kernels.push_back(k.op_type + ":" + k.kernel);
  return r;
}

TEST_P(AttentionF32Test, FusesAndMatchesTheUnfusedGraph) {
  const AttentionCase cases[] = {
      {"BERT: Mul, mask [1,1,1,n]", "Mul", {1, 1, 1, 45}, false, false},
      {"Div, mask per row and head", "Div", {2, 3, 37, 45}, true, false},
      {"no scale, mask [37,45]", "", {37, 45}, false, false},
      {"Mul, no mask", "Mul", {}, false, false},
      {"scores read elsewhere", "Mul", {1, 1, 1, 45}, false, true},
  };
  const TensorMap feed = {{"q", testing::RandomFloats({2, 3, 37, 24}, 1, -1.5f, 1.5f)},
                          {"kt", testing::RandomFloats({2, 3, 24, 45}, 2, -1.5f, 1.5f)},
                          {"v", testing::RandomFloats({2, 3, 45, 19}, 3, -3.0f, 3.0f)}};
  for (const AttentionCase& c : cases) {
    SCOPED_TRACE(c.name);
    const Model m = AttentionModel(c);
    const RunResult want = RunModel(m, feed, true, false, 1);
    const RunResult fused_ref = RunModel(m, feed, true, true, 1);
    ASSERT_EQ(fused_ref.y.shape(), want.y.shape());
    EXPECT_EQ(std::memcmp(fused_ref.y.raw_data(), want.y.raw_data(), want.y.nbytes()), 0);
    const RunResult got = RunModel(m, feed, false, true, 1);
    ASSERT_EQ(got.y.shape(), want.y.shape());
    for (int64_t i = 0; i < want.y.numel(); ++i)
      ASSERT_NEAR(got.y.data<float>()[i], want.y.data<float>()[i], cpu::kAttentionF32RelTol * 3.0f) << i;
    const RunResult three = RunModel(m, feed, false, true, 3);
    EXPECT_EQ(std::memcmp(three.y.raw_data(), got.y.raw_data(), got.y.nbytes()), 0);
    if (c.scores_output) {
      EXPECT_GT(got.kernels.size(), 1u);
    } else {
      EXPECT_EQ(got.kernels, std::vector<std::string>{std::string("Attention:") +
                                                      SelectCpuKernel(CpuOp::kAttentionF32).name});
    }
  }
}

// BERT's export: Q, K, V [b, s, h, d] through Transposes (K's to [b, h, d, s]),
// the output transposed back: the four Transposes go into the node (layout
// bshd), the unfused graph's bits on the reference kernels, within the
// tolerance on the fast ones; a Transpose with another reader keeps them all.
TEST_P(AttentionF32Test, FoldsTheTransposesAround) {
  for (bool shared : {false, true}) {
    SCOPED_TRACE(shared ? "Q's transpose read elsewhere" : "BERT");
    Model m;
    m.opset_imports = {{"", 13}};
    Graph& g = m.graph;
    for (const char* in : {"q", "k", "v"}) {
      g.inputs.push_back(testing::FloatInput(in, {}));
      g.inputs.back().has_shape = false;
    }
    g.outputs.push_back(testing::FloatInput("y", {}));
    g.initializers["scale"] = Tensor::Scalar<float>(0.125f);
    Tensor mask = testing::RandomFloats({1, 1, 1, 45}, 4, -1.0f, 1.0f);
    mask.data<float>()[3] = -10000.0f;
    g.initializers["mask"] = mask;
    g.nodes.push_back({"tq", "Transpose", "", {"q"}, {"qt"}, {Attribute::Ints("perm", {0, 2, 1, 3})}, ""});
    g.nodes.push_back({"tk", "Transpose", "", {"k"}, {"kt"}, {Attribute::Ints("perm", {0, 2, 3, 1})}, ""});
    g.nodes.push_back({"tv", "Transpose", "", {"v"}, {"vt"}, {Attribute::Ints("perm", {0, 2, 1, 3})}, ""});
    g.nodes.push_back({"qk", "MatMul", "", {"qt", "kt"}, {"s0"}, {}, ""});
    g.nodes.push_back({"scale", "Mul", "", {"s0", "scale"}, {"s1"}, {}, ""});
    g.nodes.push_back({"mask", "Add", "", {"s1", "mask"}, {"s2"}, {}, ""});
    g.nodes.push_back({"softmax", "Softmax", "", {"s2"}, {"p"}, {Attribute::Int("axis", -1)}, ""});
    g.nodes.push_back({"pv", "MatMul", "", {"p", "vt"}, {"o"}, {}, ""});
    g.nodes.push_back({"to", "Transpose", "", {"o"}, {"y"}, {Attribute::Ints("perm", {0, 2, 1, 3})}, ""});
    if (shared) g.outputs.push_back(testing::FloatInput("qt", {}));
    const TensorMap feed = {{"q", testing::RandomFloats({2, 37, 3, 24}, 1, -1.5f, 1.5f)},
                            {"k", testing::RandomFloats({2, 45, 3, 24}, 2, -1.5f, 1.5f)},
                            {"v", testing::RandomFloats({2, 45, 3, 19}, 3, -3.0f, 3.0f)}};
    const RunResult want = RunModel(m, feed, true, false, 1);
    const RunResult fused_ref = RunModel(m, feed, true, true, 1);
    ASSERT_EQ(fused_ref.y.shape(), want.y.shape());
    EXPECT_EQ(std::memcmp(fused_ref.y.raw_data(), want.y.raw_data(), want.y.nbytes()), 0);
    const RunResult got = RunModel(m, feed, false, true, 1);
    ASSERT_EQ(got.y.shape(), want.y.shape());
    for (int64_t i = 0; i < want.y.numel(); ++i)
      ASSERT_NEAR(got.y.data<float>()[i], want.y.data<float>()[i], cpu::kAttentionF32RelTol * 3.0f) << i;
    const RunResult three = RunModel(m, feed, false, true, 3);
    EXPECT_EQ(std::memcmp(three.y.raw_data(), got.y.raw_data(), got.y.nbytes()), 0);
    const std::string attention = std::string("Attention:") + SelectCpuKernel(CpuOp::kAttentionF32).name;
    if (shared) {
      EXPECT_EQ(got.kernels.size(), 5u);  // four Transposes and the node
    } else {
      EXPECT_EQ(got.kernels, std::vector<std::string>{attention});
    }
  }
}

// torch's scaled_dot_product_attention as its TorchScript exporter writes it
// (opset 14 / 17): Q and K^T each through a Mul by sqrt(scale), a -inf mask,
// and Where(IsNaN(p), 0, p) after the Softmax for fully masked rows. It fuses
// into one node (the Transposes below the Muls too, when all four are there);
// near-misses keep their nodes. Row 5 of batch 1 is masked out entirely: the
// reference's softmax gives NaNs there and the guard zeros, on every row.
struct SdpaCase {
  const char* name;
  bool transposes;   // Q, K, V given [b, s, h, d] and transposed, the output back
  bool scale_k;      // K^T through its Mul too (else only Q's)
  bool guard;        // the IsNaN / Where guard
  bool swapped;      // near-miss: Where(IsNaN(p), p, 0)
  bool fill_input;   // near-miss: the fill is a graph input
  bool fuses;
};

Model SdpaModel(const SdpaCase& c) {
  Model m;
  m.opset_imports = {{"", 14}};
  Graph& g = m.graph;
  for (const char* in : {"q", "k", "v"}) {
    g.inputs.push_back(testing::FloatInput(in, {}));
    g.inputs.back().has_shape = false;
  }
  g.outputs.push_back(testing::FloatInput("y", {}));
  g.initializers["a"] = Tensor::Scalar<float>(0.4204482f);
  g.initializers["zero"] = Tensor(DataType::kFloat32, {1});
  Tensor mask(DataType::kFloat32, {2, 1, 37, 45});
  const float inf = std::numeric_limits<float>::infinity();
  for (int64_t i = 0; i < mask.numel(); ++i) mask.data<float>()[i] = (i % 45) >= 40 && i >= 37 * 45 ? -inf : 0.0f;
  for (int64_t j = 0; j < 45; ++j) mask.data<float>()[(37 + 5) * 45 + j] = -inf;  // batch 1, row 5
  g.initializers["mask"] = mask;
  std::string q = "q", k = "k", v = "v";
  if (c.transposes) {
    g.nodes.push_back({"tq", "Transpose", "", {"q"}, {"qt"}, {Attribute::Ints("perm", {0, 2, 1, 3})}, ""});
    g.nodes.push_back({"tk", "Transpose", "", {"k"}, {"kt"}, {Attribute::Ints("perm", {0, 2, 3, 1})}, ""});
    g.nodes.push_back({"tv", "Transpose", "", {"v"}, {"vt"}, {Attribute::Ints("perm", {0, 2, 1, 3})}, ""});
    q = "qt", k = "kt", v = "vt";
  }
  g.nodes.push_back({"mq", "Mul", "", {q, "a"}, {"qs"}, {}, ""});
  std::string ks = k;
  if (c.scale_k) g.nodes.push_back({"mk", "Mul", "", {"a", k}, {"ks"}, {}, ""}), ks = "ks";
  g.nodes.push_back({"qk", "MatMul", "", {"qs", ks}, {"s0"}, {}, ""});
  g.nodes.push_back({"mask", "Add", "", {"s0", "mask"}, {"s1"}, {}, ""});
  g.nodes.push_back({"softmax", "Softmax", "", {"s1"}, {"p"}, {Attribute::Int("axis", -1)}, ""});
  std::string probs = "p";
  if (c.guard) {
    std::string fill = "zero";
    if (c.fill_input) {
      g.inputs.push_back(testing::FloatInput("fill", {}));
      g.inputs.back().has_shape = false;
      fill = "fill";
    }
    g.nodes.push_back({"isnan", "IsNaN", "", {"p"}, {"nan"}, {}, ""});
    g.nodes.push_back({"guard", "Where", "", c.swapped ? std::vector<std::string>{"nan", "p", fill}
                                                       : std::vector<std::string>{"nan", fill, "p"}, {"pg"}, {}, ""});
    probs = "pg";
  }
  g.nodes.push_back({"pv", "MatMul", "", {probs, v}, {c.transposes ? "o" : "y"}, {}, ""});
  if (c.transposes) g.nodes.push_back({"to", "Transpose", "", {"o"}, {"y"}, {Attribute::Ints("perm", {0, 2, 1, 3})}, ""});
  return m;
}

TEST_P(AttentionF32Test, FusesTorchSdpaExport) {
  const SdpaCase cases[] = {
      {"SDPA: Q and K scaled, guard", false, true, true, false, false, true},
      {"SDPA with the Transposes", true, true, true, false, false, true},
      {"Q scaled only, no guard", false, false, false, false, false, true},
      {"guard's operands swapped", false, true, true, true, false, false},
      {"fill from a graph input", false, true, true, false, true, false},
  };
  for (const SdpaCase& c : cases) {
    SCOPED_TRACE(c.name);
    const Model m = SdpaModel(c);
    TensorMap feed;
    if (c.transposes) {
      feed = {{"q", testing::RandomFloats({2, 37, 3, 24}, 1, -1.5f, 1.5f)},
              {"k", testing::RandomFloats({2, 45, 3, 24}, 2, -1.5f, 1.5f)},
              {"v", testing::RandomFloats({2, 45, 3, 19}, 3, -3.0f, 3.0f)}};
    } else {
      feed = {{"q", testing::RandomFloats({2, 3, 37, 24}, 1, -1.5f, 1.5f)},
              {"k", testing::RandomFloats({2, 3, 24, 45}, 2, -1.5f, 1.5f)},
              {"v", testing::RandomFloats({2, 3, 45, 19}, 3, -3.0f, 3.0f)}};
    }
    if (c.fill_input) feed["fill"] = Tensor(DataType::kFloat32, {1});
    const RunResult want = RunModel(m, feed, true, false, 1);
    const RunResult fused_ref = RunModel(m, feed, true, true, 1);
    ASSERT_EQ(fused_ref.y.shape(), want.y.shape());
    EXPECT_EQ(std::memcmp(fused_ref.y.raw_data(), want.y.raw_data(), want.y.nbytes()), 0);
    const RunResult got = RunModel(m, feed, false, true, 1);
    ASSERT_EQ(got.y.shape(), want.y.shape());
    // The fully masked row (batch 1, row 5, head 0) is zeros when guarded:
    // fused, the guard's fill; unfused, the softmax_f32 rows make it NaN as
    // the reference does and the Where replaces it.
    const int64_t row = c.transposes ? (37 + 5) * 3 * 19 : (3 * 37 + 5) * 19;
    for (int64_t i = 0; i < want.y.numel(); ++i) {
      const float w = want.y.data<float>()[i], v = got.y.data<float>()[i];
      if (std::isnan(w)) {  // unguarded fully masked rows (every head): NaN in the reference
        ASSERT_TRUE(!c.guard || c.swapped) << i;
        continue;
      }
      ASSERT_NEAR(v, w, cpu::kAttentionF32RelTol * 3.0f) << i;
    }
    if (c.guard && !c.swapped)
      for (int64_t j = 0; j < 19; ++j) EXPECT_EQ(got.y.data<float>()[row + j], 0.0f) << j;
    const RunResult three = RunModel(m, feed, false, true, 3);
    EXPECT_EQ(std::memcmp(three.y.raw_data(), got.y.raw_data(), got.y.nbytes()), 0);
    const std::string attention = std::string("Attention:") + SelectCpuKernel(CpuOp::kAttentionF32).name;
    const bool has_attention = std::find(got.kernels.begin(), got.kernels.end(), attention) != got.kernels.end();
    EXPECT_EQ(has_attention, c.fuses);
    if (c.fuses) EXPECT_EQ(got.kernels, std::vector<std::string>{attention});
  }
}

// SoftmaxRowIsNaN says which rows of scores the reference's Softmax turns into
// NaNs: a NaN or +inf in the row, or every score -inf; the softmax_f32 row
// gives those rows NaN too.
TEST(AttentionF32, SoftmaxRowIsNaN) {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<std::pair<std::vector<float>, bool>> rows = {
      {{1.0f, -inf, 3.0f}, false}, {{-inf, -inf, -inf}, true}, {{1.0f, inf, 3.0f}, true},
      {{1.0f, nan, 3.0f}, true},   {{-inf, 0.0f, -inf}, false}, {{-3e38f, 3e38f}, false}};
  for (const auto& [row, want] : rows) {
    EXPECT_EQ(cpu::SoftmaxRowIsNaN(row.data(), static_cast<int64_t>(row.size())), want);
    Tensor t(DataType::kFloat32, {1, static_cast<int64_t>(row.size())});
    std::copy(row.begin(), row.end(), t.data<float>());
    Model m;
    m.opset_imports = {{"", 13}};
    m.graph.inputs.push_back(testing::FloatInput("x", {}));
    m.graph.inputs.back().has_shape = false;
    m.graph.outputs.push_back(testing::FloatInput("p", {}));
    m.graph.nodes.push_back({"softmax", "Softmax", "", {"x"}, {"p"}, {Attribute::Int("axis", -1)}, ""});
    for (const char* backend : {"reference", "cpu"}) {  // the softmax_f32 row agrees
      ExecutorOptions options;
      options.backend = backend;
      auto exec = Executor::Create(m, options);
      ASSERT_TRUE(exec.ok());
      TensorMap out;
      ASSERT_TRUE((*exec)->Run({{"x", t}}, &out).ok());
      for (int64_t j = 0; j < out["p"].numel(); ++j)
        EXPECT_EQ(std::isnan(out["p"].data<float>()[j]), want) << backend << " " << j;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(CpuKernels, AttentionF32Test, ::testing::ValuesIn(kAllCpuIsas), testing::IsaParamName);

}  // namespace
}  // namespace sparq
