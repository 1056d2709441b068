// fuse-one-hot (runtime/passes/one_hot_fusion.h): a MatMul of a one-hot
// encoding built by Equal against constant classes runs as a table lookup
// (sparq.OneHotLookup) in the deployment profile, with the bits of the
// unfused nodes as written: FP32 (Equal -> Cast -> MatMul) and INT8 (-> Cast
// -> QuantizeLinear -> QLinearMatMul, int8 and uint8), classes 0..V-1 or in
// any order, values outside the classes (the zero row), with and without the
// Expand of jax2tf's one_hot; FP32 behind a second Cast to float32 (sparq's
// FP16 files, lowered); INT8 with a float output (-> QuantizeLinear ->
// DequantizeLinear -> MatMul, the `inputs_only` placement, and the
// sparq.MatMulIntegerToFloat that fuse-qdq makes of it); weights the proof
// does not cover stay unfused.
#include <gtest/gtest.h>

#include <cstring>
#include <numeric>
#include <string>
#include <vector>

#include "kernels/registry.h"  // kSparqDomain
#include "runtime/passes/one_hot_fusion.h"
#include "sparq/executor.h"
#include "test_util.h"

namespace sparq {
namespace {

using testing::MakeNode;

constexpr int64_t kRows = 6, kLen = 5, kClasses = 7, kDepth = 9;

// kFloatTwice: Cast -> Cast(float) -> MatMul; kDequantized{S8,U8}: Cast ->
// QuantizeLinear -> DequantizeLinear -> MatMul(float W).
// kIntegerToFloat[Bias]: Cast -> QuantizeLinear -> sparq.MatMulIntegerToFloat
// (what fuse-qdq makes of the dequantized MatMul), without and with a bias.
enum class Tail { kFloat, kInt8, kUInt8, kFloatTwice, kDequantizedS8, kDequantizedU8, kIntegerToFloat,
                  kIntegerToFloatBias };

struct OneHotCase {
  Tail tail = Tail::kFloat;
  bool expand = true;         // jax2tf's Expand of the [rows, len, 1] values to [rows, len, V]
  bool iota = true;           // classes 0..V-1, else a shuffled set
  bool zero_weight = false;   // a 0 in W: not fused (the sign of a zero sum)
};

std::vector<int32_t> Classes(bool iota) {
  if (iota) {
    std::vector<int32_t> c(kClasses);
    std::iota(c.begin(), c.end(), 0);
    return c;
  }
  return {40, -3, 7, 1000, 2, -50, 11};
}

// x [rows, len] int32 -> Reshape [-1, len, 1] -> [Expand] -> Equal(classes) -> Cast -> MatMul / Q -> QLinearMatMul -> y
Model OneHotModel(const OneHotCase& c) {
  Model m;
  m.opset_imports = {{"", 13}};
  Graph& g = m.graph;
  ValueInfo x;
  x.name = "x";
  x.dtype = DataType::kInt32;
  g.inputs.push_back(x);
  ValueInfo y;
  y.name = "y";
  y.dtype = c.tail == Tail::kInt8 ? DataType::kInt8 : c.tail == Tail::kUInt8 ? DataType::kUInt8 : DataType::kFloat32;
  g.outputs.push_back(y);
  g.initializers["shape"] = Tensor::FromVector<int64_t>({3}, {-1, kLen, 1});
  g.initializers["classes"] = Tensor::FromVector<int32_t>({1, 1, kClasses}, Classes(c.iota));
  g.nodes.push_back(MakeNode("reshape", "Reshape", {"x", "shape"}, {"r"}));
  std::string compared = "r";
  if (c.expand) {
    g.initializers["to"] = Tensor::FromVector<int64_t>({3}, {kRows, kLen, kClasses});
    g.nodes.push_back(MakeNode("expand", "Expand", {"r", "to"}, {"r_wide"}));
    compared = "r_wide";
  }
  g.nodes.push_back(MakeNode("equal", "Equal", {compared, "classes"}, {"e"}));
  g.nodes.push_back(MakeNode("cast", "Cast", {"e"}, {"f"}, {Attribute::Int("to", 1)}));
  if (c.tail == Tail::kFloat || c.tail == Tail::kFloatTwice || c.tail == Tail::kDequantizedS8 ||
      c.tail == Tail::kDequantizedU8) {
    Tensor w = testing::RandomFloats({kClasses, kDepth}, 5, -2.0f, 2.0f);
    if (c.zero_weight) w.data<float>()[3] = 0.0f;
    g.initializers["w"] = std::move(w);
    std::string read = "f";
    if (c.tail == Tail::kFloatTwice) {
      g.nodes.push_back(MakeNode("cast_again", "Cast", {"f"}, {"f2"}, {Attribute::Int("to", 1)}));
      read = "f2";
    } else if (c.tail != Tail::kFloat) {  // 1 -> 255 * (1/255) or 127 * 0.0079 (not 1: a1 scales the table)
      const bool s8 = c.tail == Tail::kDequantizedS8;
      g.initializers["q_scale"] = Tensor::FromVector<float>({}, {s8 ? 0.0079f : 1.0f / 255.0f});
      if (s8) {
        g.initializers["q_zp"] = Tensor::FromVector<int8_t>({}, {0});
      } else {
        g.initializers["q_zp"] = Tensor::FromVector<uint8_t>({}, {0});
      }
      g.nodes.push_back(MakeNode("q", "QuantizeLinear", {"f", "q_scale", "q_zp"}, {"fq"}));
      g.nodes.push_back(MakeNode("dq", "DequantizeLinear", {"fq", "q_scale", "q_zp"}, {"fd"}));
      read = "fd";
    }
    g.nodes.push_back(MakeNode("mm", "MatMul", {read, "w"}, {"y"}));
    return m;
  }
  const bool to_float = c.tail == Tail::kIntegerToFloat || c.tail == Tail::kIntegerToFloatBias;
  const bool s8 = c.tail == Tail::kInt8 || to_float;
  g.initializers["q_scale"] = Tensor::FromVector<float>({}, {1.0f / 255.0f});
  g.initializers["y_scale"] = Tensor::FromVector<float>({}, {0.013f});
  std::vector<float> b_scale(kDepth);
  for (int64_t j = 0; j < kDepth; ++j) b_scale[j] = 0.004f + 0.001f * static_cast<float>(j);
  g.initializers["b_scale"] = Tensor::FromVector<float>({kDepth}, b_scale);
  std::vector<int8_t> b(kClasses * kDepth);
  for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<int8_t>((i * 37) % 255 - 127);
  g.initializers["b"] = Tensor::FromVector<int8_t>({kClasses, kDepth}, b);
  g.initializers["b_zp"] = Tensor::FromVector<int8_t>({kDepth}, std::vector<int8_t>(kDepth, 0));
  if (s8) {
    g.initializers["q_zp"] = Tensor::FromVector<int8_t>({}, {-128});
    g.initializers["y_zp"] = Tensor::FromVector<int8_t>({}, {3});
  } else {
    g.initializers["q_zp"] = Tensor::FromVector<uint8_t>({}, {0});
    g.initializers["y_zp"] = Tensor::FromVector<uint8_t>({}, {120});
  }
  g.nodes.push_back(MakeNode("q", "QuantizeLinear", {"f", "q_scale", "q_zp"}, {"fq"}));
  if (to_float) {  // b_scale per column, b_zp 0; a negative scale: the zero row's sign of zero
    g.initializers["b_scale"].data<float>()[2] = -0.003f;
    std::vector<std::string> in = {"fq", "b", "q_zp", "b_zp", "q_scale", "b_scale"};
    if (c.tail == Tail::kIntegerToFloatBias) {
      g.initializers["bias"] = testing::RandomFloats({kDepth}, 6, -1.0f, 1.0f);
      in.push_back("bias");
    }
    Node mm = MakeNode("mm", "MatMulIntegerToFloat", in, {"y"});
    mm.domain = kSparqDomain;
    g.nodes.push_back(std::move(mm));
    m.opset_imports.push_back({kSparqDomain, 1});
    return m;
  }
  g.nodes.push_back(MakeNode("mm", "QLinearMatMul",
                             {"fq", "q_scale", "q_zp", "b", "b_scale", "b_zp", "y_scale", "y_zp"}, {"y"}));
  return m;
}

// Values in the classes, next to them and far outside (the zero row).
Tensor Inputs(bool iota) {
  const std::vector<int32_t> classes = Classes(iota);
  std::vector<int32_t> v(kRows * kLen);
  for (size_t i = 0; i < v.size(); ++i) v[i] = i % 3 == 2 ? static_cast<int32_t>(i) * 97 - 900 : classes[i % kClasses];
  return Tensor::FromVector<int32_t>({kRows, kLen}, v);
}

Tensor RunY(const Model& m, GraphProfile profile, bool iota) {
  ExecutorOptions o;
  o.threads = 1;
  o.profile = profile;
  auto exec = Executor::Create(m, o);
  EXPECT_TRUE(exec.ok()) << exec.status().ToString();
  if (!exec.ok()) return Tensor();
  TensorMap out;
  const Status st = (*exec)->Run({{"x", Inputs(iota)}}, &out);
  EXPECT_TRUE(st.ok()) << st.ToString();
  return out["y"];
}

void ExpectSameBits(const Tensor& a, const Tensor& b) {
  ASSERT_EQ(a.dtype(), b.dtype());
  ASSERT_EQ(a.shape(), b.shape());
  EXPECT_EQ(std::memcmp(a.raw_data(), b.raw_data(), a.numel() * DataTypeSize(a.dtype())), 0);
}

class OneHotFusion : public ::testing::TestWithParam<OneHotCase> {};

TEST_P(OneHotFusion, LookupHasTheBitsOfTheNodesAsWritten) {
  const OneHotCase& c = GetParam();
  Model m = OneHotModel(c);
  Model fused = m;
  const std::vector<std::string> names = FuseOneHotMatMul(&fused);
  if (c.zero_weight) {
    EXPECT_TRUE(names.empty());
  } else {
    ASSERT_EQ(names, std::vector<std::string>{"mm"});
    ASSERT_EQ(fused.graph.nodes.size(), 2u);  // Reshape, OneHotLookup
    EXPECT_EQ(fused.graph.nodes[1].op_type, "OneHotLookup");
    EXPECT_EQ(fused.graph.nodes[1].inputs.size(), c.expand ? 4u : 3u);
  }
  const Tensor written = RunY(m, GraphProfile::kAsWritten, c.iota);
  const Tensor deployed = RunY(m, GraphProfile::kDeployment, c.iota);
  ASSERT_EQ(written.shape(), (Shape{kRows, kLen, kDepth}));
  ExpectSameBits(written, deployed);
  ExpectSameBits(written, RunY(fused, GraphProfile::kAsWritten, c.iota));  // the lookup's reference kernel
}

INSTANTIATE_TEST_SUITE_P(Cases, OneHotFusion,
                         ::testing::Values(OneHotCase{Tail::kFloat, true, true, false},
                                           OneHotCase{Tail::kFloat, false, true, false},
                                           OneHotCase{Tail::kFloat, true, false, false},
                                           OneHotCase{Tail::kFloat, true, true, true},
                                           OneHotCase{Tail::kInt8, true, true, false},
                                           OneHotCase{Tail::kInt8, false, false, false},
                                           OneHotCase{Tail::kUInt8, true, true, false},
                                           OneHotCase{Tail::kFloatTwice, true, true, false},
                                           OneHotCase{Tail::kFloatTwice, true, false, true},
                                           OneHotCase{Tail::kDequantizedS8, true, true, false},
                                           OneHotCase{Tail::kDequantizedS8, false, false, true},
                                           OneHotCase{Tail::kDequantizedU8, true, false, false},
                                           OneHotCase{Tail::kIntegerToFloat, true, true, false},
                                           OneHotCase{Tail::kIntegerToFloatBias, false, false, false}));

// DQ(Q(0)) must be exactly 0: a zero point that the one-hot's zeros do not
// quantize to leaves the nodes as they are.
TEST(OneHotFusion, DequantizedZerosThatAreNotZeroStayUnfused) {
  Model m = OneHotModel(OneHotCase{Tail::kDequantizedU8, true, true, false});
  Model shifted = m;
  shifted.graph.initializers["dq_zp"] = Tensor::FromVector<uint8_t>({}, {3});
  for (Node& n : shifted.graph.nodes)
    if (n.op_type == "DequantizeLinear") n.inputs[2] = "dq_zp";
  EXPECT_TRUE(FuseOneHotMatMul(&shifted).empty());
  Model tiny = m;  // products below float32's normal range
  tiny.graph.initializers["w"].data<float>()[0] = 1e-39f;
  EXPECT_TRUE(FuseOneHotMatMul(&tiny).empty());
}

TEST(OneHotFusion, DuplicateClassesOrAValueNotOnePerRowStayUnfused) {
  OneHotCase c;
  Model dup = OneHotModel(c);
  dup.graph.initializers["classes"] = Tensor::FromVector<int32_t>({1, 1, kClasses}, {0, 1, 2, 3, 3, 5, 6});
  EXPECT_TRUE(FuseOneHotMatMul(&dup).empty());
  Model wide = OneHotModel(c);  // the Reshape's last dimension is not 1: each row compares several values
  wide.graph.initializers["shape"] = Tensor::FromVector<int64_t>({3}, {-1, 1, kLen});
  EXPECT_TRUE(FuseOneHotMatMul(&wide).empty());
}

}  // namespace
}  // namespace sparq
