// Float islands between quantized values run on integers (runtime/passes/island_fusion.cc):
// YOLO's C2f block as sparq's quantizer writes it (DQ -> SiLU -> Split /
// Concat / Resize / residual Add -> Q). Tables, moves and Concat are the
// float graph bit for bit; the residual Add is within one step of it; every
// ISA and thread count gives the same bytes.
#include <gtest/gtest.h>

#include <cmath>

#include "tests/runtime/qdq_graph_builder.h"

namespace sparq {
namespace {

using qdq_test::Create;
using qdq_test::ExpectFusedBitExact;
using qdq_test::FusedOpCounts;
using qdq_test::QdqGraphBuilder;
using qdq_test::RandomBytes;

struct TypeCase {
  DataType type;
  int32_t zp_in, zp_out;
};
const TypeCase kTypes[] = {{DataType::kUInt8, 131, 97}, {DataType::kInt8, -7, 12}};

std::string Silu(QdqGraphBuilder& b, const std::string& v) { return b.Add("Mul", {v, b.Add("Sigmoid", {v})}); }

// Split of `x` along axis 1 into two halves of `half` channels; returns both outputs.
std::pair<std::string, std::string> SplitHalves(QdqGraphBuilder& b, const std::string& x, int64_t half) {
  Graph& g = b.model().graph;
  g.initializers["split_sizes"] = Tensor::FromVector<int64_t>({2}, {half, half});
  const std::string name = "Split_" + std::to_string(g.nodes.size());
  g.nodes.push_back({name, "Split", "", {x, "split_sizes"}, {name + "_0", name + "_1"}, {Attribute::Int("axis", 1)}, ""});
  return {name + "_0", name + "_1"};
}

// The C2f block without its residual: u = SiLU(DQ(x)), Split(u) -> s0, s1;
// outputs Q(s1), Q(Concat(s0, s1)) and Q(Concat(Resize(s1), SiLU(DQ(y)))).
// With `float_reader`, u (kFloatOutput) or s0 (kFloatRelu) is also read in float.
enum class FloatReader { kNone, kFloatOutput, kFloatRelu };
Model C2fWithoutResidual(const TypeCase& t, FloatReader float_reader) {
  QdqGraphBuilder b;
  b.Input("x", t.type, {1, 8, 5, 6});
  b.Input("y", t.type, {1, 3, 10, 12});
  b.Params("px", 0.071f, t.zp_in, t.type);
  b.Params("py", 0.043f, t.zp_out, t.type);
  b.Params("p1", 0.029f, t.zp_out, t.type);
  b.Params("pcat", 0.037f, t.zp_in / 2, t.type);
  b.Params("pres", 0.041f, t.zp_out / 3, t.type);
  const std::string u = Silu(b, b.Dq("x", "px"));
  const auto [s0, s1] = SplitHalves(b, u, 4);
  b.Output(b.Q(s1, "p1"));
  b.Output(b.Q(b.Add("Concat", {s0, s1}, {Attribute::Int("axis", 1)}), "pcat"));
  b.model().graph.initializers["scales"] = Tensor::FromVector<float>({4}, {1.0f, 1.0f, 2.0f, 2.0f});
  const std::string up = b.Add("Resize", {s1, "", "scales"}, {Attribute::String("mode", "nearest")});
  b.Output(b.Q(b.Add("Concat", {up, Silu(b, b.Dq("y", "py"))}, {Attribute::Int("axis", 1)}), "pres"));
  if (float_reader == FloatReader::kFloatOutput) b.Output(u);
  if (float_reader == FloatReader::kFloatRelu) b.Output(b.Add("Relu", {s0}));
  return b.model();
}

TEST(IslandFusion, SiluSplitConcatResizeRunOnIntegersBitExact) {
  for (const TypeCase& t : kTypes) {
    SCOPED_TRACE(DataTypeName(t.type));
    const Model m = C2fWithoutResidual(t, FloatReader::kNone);
    const std::map<std::string, int> counts = FusedOpCounts(m);
    for (const char* gone : {"DequantizeLinear", "QuantizeLinear", "Sigmoid", "Mul"})
      EXPECT_EQ(counts.count(gone), 0u) << gone << " still runs";
    EXPECT_EQ(counts.at("Split"), 1);  // of x's integers, for Q(s1) and the Resize
    EXPECT_EQ(counts.at("Resize"), 1);
    // Concat(s0, s1) reads x through one table; the other Concat applies its tables as it copies.
    EXPECT_EQ(counts.at("ConcatLut"), 2);
    EXPECT_EQ(counts.at("QLinearLut"), 2);  // Q(s1), and s1 into the last Concat's parameters before the Resize
    const TensorMap in = {{"x", RandomBytes(t.type, {1, 8, 5, 6}, 3)}, {"y", RandomBytes(t.type, {1, 3, 10, 12}, 4)}};
    ExpectFusedBitExact(m, in);  // against the float graph: every ISA, 1, 2 and 3 threads
  }
}

// A float value of the island that something else reads in float: the
// QuantizeLinear nodes whose islands hold it stay as they are.
TEST(IslandFusion, IslandReadInFloatElsewhereIsLeftAlone) {
  for (FloatReader reader : {FloatReader::kFloatOutput, FloatReader::kFloatRelu}) {
    const TypeCase& t = kTypes[1];
    const Model m = C2fWithoutResidual(t, reader);
    const std::map<std::string, int> counts = FusedOpCounts(m);
    // Q(s1), and each Concat's QuantizeLinear once per input (float_fusion.cc,
    // QuantizeConcatInputs: the Concats then copy bytes): 1 + 2 + 2.
    EXPECT_EQ(counts.at("QuantizeLinear"), 5);
    EXPECT_EQ(counts.count("QLinearLut"), 0u);  // (the float SiLU runs its fast float row: no bit-exact check)
  }
}

// The residual: Add(s1, SiLU(DQ(y))) read by its own QuantizeLinear and by
// the Concat. QLinearAdd of Q(s1) (the model's own rounding) and a table of
// y into parameters spanning SiLU's values: within one step of the float
// graph where the parameters of s1 and of the table are no coarser than half
// the outputs' step and nothing saturates, as here; the tables and the
// Concat's other inputs exact.
TEST(IslandFusion, ResidualAddIsQLinearAddWithinOneStep) {
  for (const TypeCase& t : kTypes) {
    SCOPED_TRACE(DataTypeName(t.type));
    QdqGraphBuilder b;
    b.Input("x", t.type, {1, 8, 7, 9});
    b.Input("y", t.type, {1, 4, 7, 9});
    b.Params("px", 0.071f, t.zp_in, t.type);
    b.Params("py", 0.043f, t.zp_out, t.type);
    b.Params("p1", 0.08f, t.zp_out / 4, t.type);
    b.Params("pa", 0.17f, t.zp_in / 3, t.type);
    b.Params("pcat", 0.19f, t.zp_in / 2, t.type);
    const auto [s0, s1] = SplitHalves(b, Silu(b, b.Dq("x", "px")), 4);
    const std::string a = b.Add("Add", {s1, Silu(b, b.Dq("y", "py"))});
    b.Output(b.Q(s1, "p1"));
    b.Output(b.Q(a, "pa"));
    b.Output(b.Q(b.Add("Concat", {s0, s1, a}, {Attribute::Int("axis", 1)}), "pcat"));
    const Model& m = b.model();
    const std::map<std::string, int> counts = FusedOpCounts(m);
    for (const char* gone : {"DequantizeLinear", "QuantizeLinear", "Sigmoid", "Mul", "Add"})
      EXPECT_EQ(counts.count(gone), 0u) << gone << " still runs";
    EXPECT_EQ(counts.at("QLinearAdd"), 2);  // one per output quantization
    const TensorMap in = {{"x", RandomBytes(t.type, {1, 8, 7, 9}, 5)}, {"y", RandomBytes(t.type, {1, 4, 7, 9}, 6)}};
    ExpectFusedBitExact(m, in, /*fused_reference=*/true);  // fast rows = the fused graph's reference kernels
    TensorMap got, want;
    qdq_test::RunFusedAndFloatGraph(m, in, /*threads=*/1, &got, &want);
    const std::string q1 = m.graph.outputs[0].name, qa = m.graph.outputs[1].name, qcat = m.graph.outputs[2].name;
    EXPECT_TRUE(got.at(q1).Equals(want.at(q1)));
    for (const std::string& name : {qa, qcat}) qdq_test::ExpectFewStepsApart(got.at(name), want.at(name), 1.0, 4, name);
    // The Concat's first two inputs (the tables) are exact.
    const Tensor& y = got.at(qcat);
    const Tensor& r = want.at(qcat);
    const int64_t plane = 7 * 9;
    for (int64_t i = 0; i < 8 * plane; ++i) EXPECT_EQ(y.GetAsDouble(i), r.GetAsDouble(i)) << i;
  }
}

// x uint8 (onnxruntime's activations), y and every QuantizeLinear int8: the
// Add's inputs arrive in int8 (a table into spanning parameters for s1's
// uint8 form), so that QLinearAdd runs on its one-type rows.
TEST(IslandFusion, ResidualAddOfMixedTypesTakesTheOutputType) {
  QdqGraphBuilder b;
  b.Input("x", DataType::kUInt8, {1, 8, 7, 9});
  b.Input("y", DataType::kInt8, {1, 4, 7, 9});
  b.Params("px", 0.071f, 131, DataType::kUInt8);
  b.Params("py", 0.043f, -7, DataType::kInt8);
  b.Params("pa", 0.17f, 3, DataType::kInt8);
  b.Params("pcat", 0.19f, -2, DataType::kInt8);
  const auto [s0, s1] = SplitHalves(b, Silu(b, b.Dq("x", "px")), 4);
  const std::string a = b.Add("Add", {s1, Silu(b, b.Dq("y", "py"))});
  b.Output(b.Q(a, "pa"));
  b.Output(b.Q(b.Add("Concat", {s0, s1, a}, {Attribute::Int("axis", 1)}), "pcat"));
  const std::map<std::string, int> counts = FusedOpCounts(b.model());
  EXPECT_EQ(counts.count("QuantizeLinear"), 0u);
  EXPECT_EQ(counts.at("QLinearAdd"), 2);
  const TensorMap in = {{"x", RandomBytes(DataType::kUInt8, {1, 8, 7, 9}, 7)},
                        {"y", RandomBytes(DataType::kInt8, {1, 4, 7, 9}, 8)}};
  ExpectFusedBitExact(b.model(), in, /*fused_reference=*/true);
  TensorMap got, want;
  qdq_test::RunFusedAndFloatGraph(b.model(), in, /*threads=*/1, &got, &want);
  for (const auto& kv : want) {
    const Tensor& y = got.at(kv.first);
    ASSERT_EQ(y.dtype(), DataType::kInt8);
    for (int64_t i = 0; i < y.numel(); ++i) EXPECT_LE(std::abs(y.GetAsDouble(i) - kv.second.GetAsDouble(i)), 1.0);
  }
}

// YOLO's detection head: DequantizeLinear -> Reshape of each scale, a float
// Concat of them (Shape reads a dequantized value too): one
// sparq.DequantizeConcat of the reshaped integers, bit for bit.
TEST(IslandFusion, DequantizeLinearsIntoAFloatConcat) {
  QdqGraphBuilder b;
  b.Input("x", DataType::kInt8, {1, 4, 3, 5});
  b.Input("y", DataType::kUInt8, {1, 4, 2, 5});
  b.Params("px", 0.071f, -7, DataType::kInt8);
  b.Params("py", 0.043f, 131, DataType::kUInt8);
  Graph& g = b.model().graph;
  g.initializers["shape_x"] = Tensor::FromVector<int64_t>({3}, {1, 4, 15});
  g.initializers["shape_y"] = Tensor::FromVector<int64_t>({3}, {1, 4, -1});
  const std::string dx = b.Dq("x", "px");
  const std::string rx = b.Add("Reshape", {dx, "shape_x"});
  const std::string ry = b.Add("Reshape", {b.Dq("y", "py"), "shape_y"});
  b.Output(b.Add("Concat", {rx, ry}, {Attribute::Int("axis", 2)}));
  b.Output(b.Add("Shape", {dx}));
  const std::map<std::string, int> counts = FusedOpCounts(b.model());
  EXPECT_EQ(counts.at("DequantizeConcat"), 1);
  EXPECT_EQ(counts.count("DequantizeLinear"), 0u);
  EXPECT_EQ(counts.count("Concat"), 0u);
  ExpectFusedBitExact(b.model(), {{"x", RandomBytes(DataType::kInt8, {1, 4, 3, 5}, 9)},
                                  {"y", RandomBytes(DataType::kUInt8, {1, 4, 2, 5}, 10)}});
}

}  // namespace
}  // namespace sparq
