// The integer glue of QDQ graphs (runtime/passes/qdq_fusion.cc, kernels/cpu/qdq_glue*.cc):
// DequantizeLinear -> elementwise ops / MaxPool / Add -> QuantizeLinear fused
// into sparq.QLinearLut, integer MaxPool and sparq.QLinearAdd, and the fast
// per-tensor QuantizeLinear / DequantizeLinear rows. Every fused executor must
// give, bit for bit, what the float QDQ graph gives on the reference kernels,
// for uint8 and int8, odd sizes, every thread count and every ISA.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <random>

#include "kernels/cpu/dispatch.h"
#include "sparq/executor.h"
#include "test_util.h"
#include "tests/runtime/qdq_graph_builder.h"
#include "tests/kernels/isa_sweep.h"

namespace sparq {
namespace {

using qdq_test::Create;
using qdq_test::ExpectFewStepsApart;
using qdq_test::ExpectFusedBitExact;
using qdq_test::ExpectNearOfLargest;
using qdq_test::FusedOpCounts;
using qdq_test::kThreadCounts;
using qdq_test::QdqGraphBuilder;
using qdq_test::RandomBytes;
using qdq_test::RunFusedAndFloatGraph;

struct TypeCase {
  DataType type;
  int32_t zp_in, zp_out;
};
const TypeCase kTypes[] = {{DataType::kUInt8, 131, 97}, {DataType::kInt8, -7, 12}};

// DequantizeLinear -> chain -> QuantizeLinear, one chain per case.
TEST(QdqGlueFusion, ElementwiseChainsBecomeOneBitExactLut) {
  using Chain = std::function<std::string(QdqGraphBuilder&, std::string)>;
  const std::vector<std::pair<std::string, Chain>> chains = {
      {"Relu", [](QdqGraphBuilder& b, std::string v) { return b.Add("Relu", {v}); }},
      {"Clip", [](QdqGraphBuilder& b, std::string v) {
         b.model().graph.initializers["lo"] = Tensor::Scalar<float>(-0.3f);
         b.model().graph.initializers["hi"] = Tensor::Scalar<float>(0.45f);
         return b.Add("Clip", {v, "lo", "hi"});
       }},
      {"Clip (bounds from Constant nodes, as exporters write ReLU6)", [](QdqGraphBuilder& b, std::string v) {
         const std::string lo = b.Add("Constant", {}, {Attribute::FromTensor("value", Tensor::Scalar<float>(0.0f))});
         const std::string hi = b.Add("Constant", {}, {Attribute::FromTensor("value", Tensor::Scalar<float>(0.6f))});
         return b.Add("Clip", {v, lo, hi});
       }},
      {"LeakyRelu", [](QdqGraphBuilder& b, std::string v) {
         return b.Add("LeakyRelu", {v}, {Attribute::Float("alpha", 0.13f)});
       }},
      {"Sigmoid", [](QdqGraphBuilder& b, std::string v) { return b.Add("Sigmoid", {v}); }},
      {"Tanh", [](QdqGraphBuilder& b, std::string v) { return b.Add("Tanh", {v}); }},
      {"HardSigmoid+HardSwish", [](QdqGraphBuilder& b, std::string v) {
         return b.Add("HardSwish", {b.Add("HardSigmoid", {v}, {Attribute::Float("alpha", 0.3f)})});
       }},
      {"Identity+Relu", [](QdqGraphBuilder& b, std::string v) { return b.Add("Relu", {b.Add("Identity", {v})}); }},
      {"none (requantize)", [](QdqGraphBuilder&, std::string v) { return v; }},
      {"SiLU: Mul(x, Sigmoid(x))", [](QdqGraphBuilder& b, std::string v) {
         return b.Add("Mul", {v, b.Add("Sigmoid", {v})});
       }},
      {"SiLU: Mul(Sigmoid(x), x)", [](QdqGraphBuilder& b, std::string v) {
         return b.Add("Mul", {b.Add("Sigmoid", {v}), v});
       }},
      {"u = x + 0.5; u * Tanh(u) - x: binary steps over a shared inner value", [](QdqGraphBuilder& b, std::string v) {
         b.model().graph.initializers["half"] = Tensor::Scalar<float>(0.5f);
         const std::string u = b.Add("Add", {v, "half"});
         return b.Add("Sub", {b.Add("Mul", {u, b.Add("Tanh", {u})}), v});
       }},
      {"x * x", [](QdqGraphBuilder& b, std::string v) { return b.Add("Mul", {v, v}); }},
      {"onnxruntime's SiLU: Mul(x, DQ(Q(Sigmoid(x))))", [](QdqGraphBuilder& b, std::string v) {
         b.Params("psig", 1.0f / 255, 0, DataType::kUInt8);
         return b.Add("Mul", {v, b.Dq(b.Q(b.Add("Sigmoid", {v}), "psig"), "psig")});
       }},
      {"Paddle's scaled HardSwish, [1] constants from Constant nodes: u = a x + b; u * Clip(u + 3, 0, 6) / 6",
       [](QdqGraphBuilder& b, std::string v) {
         auto one = [&](float f) {
           return b.Add("Constant", {}, {Attribute::FromTensor("value", Tensor::FromVector<float>({1}, {f}))});
         };
         auto scalar = [&](float f) {
           return b.Add("Constant", {}, {Attribute::FromTensor("value", Tensor::Scalar<float>(f))});
         };
         const std::string u = b.Add("Add", {b.Add("Mul", {one(0.94f), v}), one(0.5f)});
         const std::string relu6 = b.Add("Clip", {b.Add("Add", {u, scalar(3.0f)}), scalar(0.0f), scalar(6.0f)});
         return b.Add("Div", {b.Add("Mul", {u, relu6}), scalar(6.0f)});
       }},
  };
  for (const TypeCase& in : kTypes) {
    for (const TypeCase& out : kTypes) {
      for (const auto& [label, chain] : chains) {
        SCOPED_TRACE(label + " " + DataTypeName(in.type) + " -> " + DataTypeName(out.type));
        QdqGraphBuilder b;
        b.Input("x", in.type, {3, 5, 7, 11});
        b.Params("pin", 0.0173f, in.zp_in, in.type);
        b.Params("pout", 0.0061f, out.zp_out, out.type);
        b.Output(b.Q(chain(b, b.Dq("x", "pin")), "pout"));
        const auto counts = FusedOpCounts(b.model());
        EXPECT_EQ(counts.size() - counts.count("Constant"), 1u);
        EXPECT_EQ(counts.count("QLinearLut"), 1u);
        ExpectFusedBitExact(b.model(), {{"x", RandomBytes(in.type, {3, 5, 7, 11}, 1)}});
      }
    }
  }
}

// DequantizeLinear -> MaxPool -> QuantizeLinear: MaxPool on the integers, then
// the table (none when the output parameters equal the input's).
TEST(QdqGlueFusion, MaxPoolRunsOnIntegers) {
  for (const TypeCase& t : kTypes) {
    for (bool same_params : {true, false}) {
      for (int64_t ceil_mode : {0, 1}) {
        SCOPED_TRACE(DataTypeName(t.type) + (same_params ? " same" : " requantized") + " ceil " +
                     std::to_string(ceil_mode));
        QdqGraphBuilder b;
        b.Input("x", t.type, {2, 3, 13, 10});
        b.Params("pin", 0.021f, t.zp_in, t.type);
        b.Params("pout", same_params ? 0.021f : 0.013f, same_params ? t.zp_in : t.zp_out, t.type);
        const std::string pooled =
            b.Add("MaxPool", {b.Dq("x", "pin")},
                  {Attribute::Ints("kernel_shape", {3, 3}), Attribute::Ints("strides", {2, 2}),
                   Attribute::Ints("pads", {1, 1, 1, 1}), Attribute::Int("ceil_mode", ceil_mode)});
        b.Output(b.Q(b.Add("Relu", {pooled}), "pout"));
        const auto counts = FusedOpCounts(b.model());
        EXPECT_EQ(counts.count("MaxPool"), 1u);
        EXPECT_EQ(counts.count("DequantizeLinear") + counts.count("QuantizeLinear") + counts.count("Relu"), 0u);
        ExpectFusedBitExact(b.model(), {{"x", RandomBytes(t.type, {2, 3, 13, 10}, 2)}});
      }
    }
  }
}

// The maxpool2d row on its own (any uint8/int8 MaxPool of a model):
// dilations, strides, asymmetric pads and ceil_mode, against MaxPoolRef.
TEST(QdqGlueFusion, IntegerMaxPoolRowMatchesReference) {
  struct PoolCase {
    std::vector<int64_t> kernel, strides, pads, dilations;
    int64_t ceil_mode;
  };
  const PoolCase cases[] = {{{3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}, 0},
                            {{2, 3}, {3, 2}, {1, 2, 0, 1}, {2, 1}, 1},
                            {{4, 2}, {1, 3}, {0, 0, 2, 1}, {1, 3}, 1},
                            {{1, 1}, {2, 2}, {0, 0, 0, 0}, {1, 1}, 0}};
  for (const TypeCase& t : kTypes) {
    for (const PoolCase& pc : cases) {
      QdqGraphBuilder b;
      b.Input("x", t.type, {2, 3, 13, 10});
      b.Output(b.Add("MaxPool", {"x"},
                     {Attribute::Ints("kernel_shape", pc.kernel), Attribute::Ints("strides", pc.strides),
                      Attribute::Ints("pads", pc.pads), Attribute::Ints("dilations", pc.dilations),
                      Attribute::Int("ceil_mode", pc.ceil_mode)}));
      auto fused = Create(b.model(), /*reference=*/false, 1);
      ASSERT_NE(fused, nullptr);
      EXPECT_EQ(testing::KernelOps(fused->NodeKernels().at(0).kernel), "maxpool2d");
      ExpectFusedBitExact(b.model(), {{"x", RandomBytes(t.type, {2, 3, 13, 10}, 15)}});
    }
  }
}

// DequantizeLinear(a), DequantizeLinear(b) -> Add | Mul -> QuantizeLinear; sizes
// that leave vector tails; broadcasting on the fast row too (a bias row, a
// per-row value, a scalar, on either side, runs longer than the row's
// 256-value pieces); a following DQ -> Relu -> Q becomes a table inside the
// QLinearAdd / QLinearMul.
TEST(QdqGlueFusion, AddOfDequantizedValuesIsBitExact) {
  struct ShapeCase {
    Shape a, b;
  };
  const ShapeCase broadcasts[] = {{{2, 3, 17, 9}, {1, 3, 1, 9}},   {{2, 3, 17, 9}, {9}},
                                  {{2, 3, 17, 9}, {2, 3, 17, 1}},  {{2, 3, 17, 9}, {}},
                                  {{9}, {2, 3, 17, 9}},            {{1, 300}, {5, 1}},
                                  {{3, 1, 700}, {3, 4, 1}}};
  for (const char* op : {"Add", "Mul"}) {
    for (const TypeCase& t : kTypes) {
      for (size_t variant = 0; variant < 2 + std::size(broadcasts); ++variant) {
        const bool relu = variant == 1;  // relu: a table folded into the QLinearAdd
        const bool broadcast = variant >= 2;
        const Shape a_shape = broadcast ? broadcasts[variant - 2].a : Shape{2, 3, 17, 9};
        const Shape b_shape = broadcast ? broadcasts[variant - 2].b : a_shape;
        SCOPED_TRACE(std::string(op) + " " + DataTypeName(t.type) + " " + ShapeToString(a_shape) + ", " +
                     ShapeToString(b_shape) + (relu ? " relu" : ""));
        QdqGraphBuilder b;
        b.Input("a", t.type, a_shape);
        b.Input("b", t.type, b_shape);
        b.Params("pa", 0.0371f, t.zp_in, t.type);
        b.Params("pb", 0.0219f, t.zp_out, t.type);
        b.Params("py", 0.0452f, t.zp_in / 2, t.type);
        b.Params("pr", 0.0313f, t.zp_out / 2, t.type);
        const std::string sum = b.Q(b.Add(op, {b.Dq("a", "pa"), b.Dq("b", "pb")}), "py");
        b.Output(relu ? b.Q(b.Add("Relu", {b.Dq(sum, "py")}), "pr") : sum);
        const auto counts = FusedOpCounts(b.model());
        EXPECT_EQ(counts.size(), 1u);
        EXPECT_EQ(counts.count(std::string("QLinear") + op), 1u);
        ExpectFusedBitExact(b.model(), {{"a", RandomBytes(t.type, a_shape, 3)}, {"b", RandomBytes(t.type, b_shape, 4)}});
      }
    }
  }
}

// DQ(a) x DQ(b) -> MatMul -> Q with both operands activations (attention's
// products in onnxruntime's placement) becomes a QLinearMatMul: batched B
// runs batch by batch on the integer GEMM; 2-D B is packed per call; batch
// dimensions that broadcast, and empty matrices, run the reference kernel. Integer sums: the fused
// executor equals the fused graph on the reference kernels bit for bit (every
// ISA and thread count) and the float QDQ graph within one quantization step.
TEST(QdqGlueFusion, MatMulOfTwoActivationsRunsOnIntegers) {
  struct ShapeCase {
    Shape a, b;
  };
  const ShapeCase cases[] = {{{2, 3, 17, 40}, {2, 3, 40, 9}},
                             {{2, 17, 40}, {40, 9}},
                             {{2, 3, 17, 40}, {1, 3, 40, 9}},
                             {{2, 3, 0, 40}, {2, 3, 40, 9}}};
  for (const TypeCase& t : kTypes) {
    for (const ShapeCase& c : cases) {
      SCOPED_TRACE(DataTypeName(t.type) + " " + ShapeToString(c.a) + " x " + ShapeToString(c.b));
      QdqGraphBuilder b;
      b.Input("a", t.type, c.a);
      b.Input("b", t.type, c.b);
      b.Params("pa", 0.0371f, t.zp_in, t.type);
      b.Params("pb", 0.0219f, t.zp_out, t.type);
      b.Params("py", 0.61f, t.zp_in / 2, t.type);
      b.Output(b.Q(b.Add("MatMul", {b.Dq("a", "pa"), b.Dq("b", "pb")}), "py"));
      const auto counts = FusedOpCounts(b.model());
      EXPECT_EQ(counts.size(), 1u);
      EXPECT_EQ(counts.count("QLinearMatMul"), 1u);
      {
        auto e = Create(b.model(), /*reference=*/false, 1);
        ASSERT_NE(e, nullptr);
        EXPECT_EQ(testing::KernelOps(e->NodeKernels().at(0).kernel), "gemm_s8");
      }
      const TensorMap inputs = {{"a", RandomBytes(t.type, c.a, 23)}, {"b", RandomBytes(t.type, c.b, 24)}};
      ExpectFusedBitExact(b.model(), inputs, /*fused_reference=*/true);
      // Against the float graph: at most one step apart.
      TensorMap got, want;
      RunFusedAndFloatGraph(b.model(), inputs, /*threads=*/2, &got, &want);
      ExpectFewStepsApart(got.at(want.begin()->first), want.begin()->second, 1.0, 20);
    }
  }
}

// onnxruntime's QDQ placement wraps Reshape / Transpose / ... in their own
// QuantizeLinear -> DequantizeLinear pairs: DQ -> move ops -> Q runs the
// moves on the integers, with no table when the parameters are the same,
// a QLinearLut when they differ.
TEST(QdqGlueFusion, MoveOpsBetweenDequantizeAndQuantizeRunOnIntegers) {
  for (const TypeCase& t : kTypes) {
    for (bool same_params : {true, false}) {
      SCOPED_TRACE(DataTypeName(t.type) + (same_params ? " same parameters" : " requantized"));
      QdqGraphBuilder b;
      b.Input("x", t.type, {2, 6, 10});
      b.Params("pin", 0.021f, t.zp_in, t.type);
      b.Params("pout", same_params ? 0.021f : 0.013f, same_params ? t.zp_in : t.zp_out, t.type);
      b.model().graph.initializers["shape"] = Tensor::FromVector<int64_t>({4}, {2, 6, 2, 5});
      const std::string moved = b.Add("Transpose", {b.Add("Reshape", {b.Dq("x", "pin"), "shape"})},
                                      {Attribute::Ints("perm", {0, 2, 1, 3})});
      b.Output(b.Q(moved, "pout"));
      const auto counts = FusedOpCounts(b.model());
      EXPECT_EQ(counts.count("DequantizeLinear") + counts.count("QuantizeLinear"), 0u);
      EXPECT_EQ(counts.count("QLinearLut"), same_params ? 0u : 1u);
      EXPECT_EQ(counts.at("Reshape") + counts.at("Transpose"), 2);
      ExpectFusedBitExact(b.model(), {{"x", RandomBytes(t.type, {2, 6, 10}, 21)}});
    }
  }
}

// Add / Sub / Mul / Div / Pow of a scalar constant (an initializer, or the
// DequantizeLinear of one, as onnxruntime writes them), on either side, are
// steps of a table; a DequantizeLinear that other nodes read too (GELU's x)
// feeds the table's integers and stays for the others.
// DequantizeLinear of each input -> Concat -> QuantizeLinear: Concat of the
// integers, an input whose parameters differ from the output's through its
// table first; a dequantized input that another node reads keeps its DQ.
TEST(QdqGlueFusion, ConcatOfDequantizedValuesRunsOnIntegers) {
  for (const TypeCase& t : kTypes) {
    SCOPED_TRACE(DataTypeName(t.type));
    QdqGraphBuilder b;
    b.Input("a", t.type, {2, 3, 4, 5});
    b.Input("b", t.type, {2, 2, 4, 5});
    b.Input("c", t.type, {2, 1, 4, 5});
    b.Params("p", 0.02f, t.zp_in, t.type);
    b.Params("pc", 0.037f, t.zp_out, t.type);
    const std::string da = b.Dq("a", "p");
    b.Output(b.Q(b.Add("Concat", {da, b.Dq("b", "p"), b.Dq("c", "pc")}, {Attribute::Int("axis", 1)}), "p"));
    b.Output(b.Add("Relu", {da}));
    const auto counts = FusedOpCounts(b.model());
    EXPECT_EQ(counts.at("ConcatLut"), 1);  // with c's table (its parameters differ) as it copies
    EXPECT_EQ(counts.count("QLinearLut"), 0u);
    EXPECT_EQ(counts.count("QuantizeLinear"), 0u);
    EXPECT_EQ(counts.at("DequantizeLinear"), 1);  // a's, for the Relu
    ExpectFusedBitExact(b.model(), {{"a", RandomBytes(t.type, {2, 3, 4, 5}, 41)},
                                    {"b", RandomBytes(t.type, {2, 2, 4, 5}, 42)},
                                    {"c", RandomBytes(t.type, {2, 1, 4, 5}, 43)}});
  }
}

// YOLO's SPPF as sparq quantizes it: DQ -> SiLU -> u, three chained MaxPools
// of u, Concat(u, m1, m2, m3) -> Q: one table (SiLU and Q), the MaxPools on
// its integers, Concat of the integers; bit for bit the float graph (max
// commutes with the nondecreasing Q). With a negative Q scale, or a MaxPool
// output read outside, it stays float.
TEST(QdqGlueFusion, SppfMaxPoolsOverATableRunOnIntegers) {
  for (const TypeCase& t : kTypes) {
    for (int variant = 0; variant < 3; ++variant) {
      SCOPED_TRACE(DataTypeName(t.type) + " variant " + std::to_string(variant));
      QdqGraphBuilder b;
      const Shape shape = {1, 4, 9, 11};
      b.Input("x", t.type, shape);
      b.Params("pin", 0.031f, t.zp_in, t.type);
      b.Params("pout", variant == 1 ? -0.02f : 0.02f, t.zp_out, t.type);
      const std::string v = b.Dq("x", "pin");
      const std::string u = b.Add("Mul", {v, b.Add("Sigmoid", {v})});
      const std::vector<Attribute> pool = {Attribute::Ints("kernel_shape", {5, 5}), Attribute::Ints("pads", {2, 2, 2, 2})};
      const std::string m1 = b.Add("MaxPool", {u}, pool);
      const std::string m2 = b.Add("MaxPool", {m1}, pool);
      const std::string m3 = b.Add("MaxPool", {m2}, pool);
      b.Output(b.Q(b.Add("Concat", {u, m1, m2, m3}, {Attribute::Int("axis", 1)}), "pout"));
      if (variant == 2) b.Output(m2);
      const auto counts = FusedOpCounts(b.model());
      if (variant == 0) {
        EXPECT_EQ(counts.at("QLinearLut"), 1);
        EXPECT_EQ(counts.at("MaxPool"), 3);
        EXPECT_EQ(counts.count("Sigmoid") + counts.count("Mul") + counts.count("QuantizeLinear") +
                      counts.count("DequantizeLinear"),
                  0u);
      } else {
        EXPECT_EQ(counts.count("QLinearLut"), 0u);
      }
      ExpectFusedBitExact(b.model(), {{"x", RandomBytes(t.type, shape, 51)}});
    }
  }
}

TEST(QdqGlueFusion, ScalarConstantStepsAndSharedDequantizeJoinTables) {
  for (const TypeCase& t : kTypes) {
    for (bool shifted_out : {false, true}) {
      SCOPED_TRACE(DataTypeName(t.type) + (shifted_out ? ", erf + c also a graph output" : ""));
      QdqGraphBuilder b;
      const Shape shape = {3, 5, 37};
      b.Input("x", t.type, shape);
      b.Params("pin", 0.0173f, t.zp_in, t.type);
      b.Params("pe", 0.0081f, t.zp_out, t.type);
      b.Params("pc", 0.0157f, t.zp_in, t.type);
      b.Params("pout", 0.0061f, t.zp_out, t.type);
      auto& init = b.model().graph.initializers;
      init["sqrt2"] = Tensor::Scalar<float>(1.4142135f);
      init["two"] = Tensor::Scalar<float>(2.0f);
      init["c_q"] = t.type == DataType::kInt8 ? Tensor::Scalar<int8_t>(77) : Tensor::Scalar<uint8_t>(177);
      const std::string x = b.Dq("x", "pin");
      const std::string one = b.Dq("c_q", "pc");  // a dequantized scalar constant
      // GELU as onnxruntime quantizes it: x * (erf(x / sqrt2) + c), x also read by the product.
      const std::string erf = b.Q(b.Add("Erf", {b.Add("Div", {x, "sqrt2"})}), "pe");
      const std::string shifted = b.Q(b.Add("Add", {one, b.Dq(erf, "pe")}), "pe");
      b.Output(b.Q(b.Add("Mul", {x, b.Dq(shifted, "pe")}), "pout"));
      if (shifted_out) b.Output(shifted);
      // More steps: constant first, Sub, Pow.
      b.Output(b.Q(b.Add("Pow", {b.Add("Sub", {"two", b.Add("Mul", {"sqrt2", x})}), "two"}), "pout"));
      const auto counts = FusedOpCounts(b.model());
      EXPECT_EQ(counts.count("Div") + counts.count("Erf") + counts.count("Add") + counts.count("Sub") +
                    counts.count("Pow"),
                0u);
      EXPECT_EQ(counts.count("Mul"), 0u);
      if (shifted_out) {
        // erf + c stays a quantized value: one table (across erf's Q -> DQ), and
        // x * (erf + c) of two activations.
        EXPECT_EQ(counts.at("QLinearLut"), 2);
        EXPECT_EQ(counts.at("QLinearMul"), 1);
      } else {
        // The whole GELU, across its inner Q -> DQ pairs, is one table of x.
        EXPECT_EQ(counts.at("QLinearLut"), 2);
        EXPECT_EQ(counts.count("QLinearMul"), 0u);
      }
      ExpectFusedBitExact(b.model(), {{"x", RandomBytes(t.type, shape, 22)}});
    }
  }
}

// The per-tensor QuantizeLinear / DequantizeLinear rows against the reference,
// including ties, NaN, infinities and values far out of range.
TEST(QdqGlueFusion, QuantizeAndDequantizeRowsMatchReference) {
  const float scale = 0.0625f;  // a power of two: (k + 0.5) * scale are exact ties
  std::vector<float> values;
  for (int k = -300; k <= 300; ++k) values.push_back((static_cast<float>(k) + 0.5f) * scale);
  for (float v : {0.0f, -0.0f, std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                  -std::numeric_limits<float>::infinity(), 1e30f, -1e30f, 3e9f})
    values.push_back(v);
  const Tensor noise = testing::RandomFloats({1001}, 5, -20.0f, 20.0f);
  for (int64_t i = 0; i < noise.numel(); ++i) values.push_back(noise.data<float>()[i]);
  const int64_t n = static_cast<int64_t>(values.size());
  for (const TypeCase& t : kTypes) {
    SCOPED_TRACE(DataTypeName(t.type));
    QdqGraphBuilder b;
    b.model().graph.inputs.push_back(testing::FloatInput("x", {{n, ""}}));
    b.Params("p", scale, t.zp_in, t.type);
    const std::string q = b.Q("x", "p");
    b.Output(q);
    b.Output(b.Dq(q, "p"));
    EXPECT_EQ(FusedOpCounts(b.model()).count("QuantizeLinear"), 1u);
    ExpectFusedBitExact(b.model(), {{"x", Tensor::FromVector<float>({n}, values)}});
  }
}

// DQ -> Conv -> Q -> DQ -> Relu|SiLU -> Q: the convolution fuses into QLinearConv,
// the ReLU or SiLU (x * Sigmoid(x)) into a table, and the table into the
// convolution (sparq.QLinearConvLut); dense and depthwise, uint8 and int8.
// With a requantization after it (DQ -> Q, EfficientNet's Pad once folded),
// the two tables compose into one.
TEST(QdqGlueFusion, ReluTableFoldsIntoTheConvolution) {
  for (const TypeCase& t : kTypes) {
    for (int64_t group : {1, 6, -6}) {
      const bool requantize = group < 0;
      group = requantize ? -group : group;
      for (const std::string act : {"Relu", "SiLU"}) {
        SCOPED_TRACE(DataTypeName(t.type) + " group " + std::to_string(group) + " " + act +
                     (requantize ? " requantized" : ""));
        const int64_t c = 6, m = 6;
        std::mt19937 rng(12);
        QdqGraphBuilder b;
        b.Input("x", t.type, {2, c, 9, 11});
        b.Params("px", 0.031f, t.zp_in, t.type);
        b.Params("py", 0.047f, t.zp_out, t.type);
        b.Params("pr", 0.029f, t.zp_in / 3, t.type);
        Graph& g = b.model().graph;
        g.initializers["w"] = RandomBytes(DataType::kInt8, {m, c / group, 3, 3}, 13);
        g.initializers["w_scale"] = Tensor::Scalar<float>(0.0079f);
        g.initializers["w_zp"] = Tensor::Scalar<int8_t>(0);
        std::vector<int32_t> bias(m);
        for (int64_t i = 0; i < m; ++i) bias[i] = static_cast<int32_t>(rng() % 2001) - 1000;
        g.initializers["b"] = Tensor::FromVector<int32_t>({m}, bias);
        g.initializers["b_scale"] = Tensor::Scalar<float>(0.031f * 0.0079f);
        g.initializers["b_zp"] = Tensor::Scalar<int32_t>(0);
        const std::string conv = b.Add(
            "Conv",
            {b.Dq("x", "px"), b.Add("DequantizeLinear", {"w", "w_scale", "w_zp"}),
             b.Add("DequantizeLinear", {"b", "b_scale", "b_zp"})},
            {Attribute::Ints("kernel_shape", {3, 3}), Attribute::Ints("pads", {1, 1, 1, 1}), Attribute::Int("group", group)});
        const std::string v = b.Dq(b.Q(conv, "py"), "py");
        const std::string activated =
            b.Q(act == "Relu" ? b.Add("Relu", {v}) : b.Add("Mul", {v, b.Add("Sigmoid", {v})}), "pr");
        if (requantize) b.Params("pq", 0.033f, t.zp_out / 2, t.type);
        b.Output(requantize ? b.Q(b.Dq(activated, "pr"), "pq") : activated);
        auto fused = Create(b.model(), /*reference=*/false, 1);
        ASSERT_NE(fused, nullptr);
        ASSERT_EQ(fused->NodeKernels().size(), 1u);
        EXPECT_EQ(fused->NodeKernels()[0].op_type, "QLinearConvLut");
        EXPECT_EQ(testing::KernelOps(fused->NodeKernels()[0].kernel),
                  group == 1 ? "conv_s8+lut256" : "depthwise_s8");  // the depthwise rows apply the table
        const TensorMap in = {{"x", RandomBytes(t.type, {2, c, 9, 11}, 14)}};
        ExpectFusedBitExact(b.model(), in, /*fused_reference=*/true);
        // Against the float graph: the integer convolution's one-step differences only.
        TensorMap got, want;
        RunFusedAndFloatGraph(b.model(), in, /*threads=*/1, &got, &want);
        ExpectFewStepsApart(got.begin()->second, want.begin()->second, 2.0, 20);
      }
    }
  }
}

// The quantizer writes Conv -> Relu|Clip -> QuantizeLinear (one quantizer,
// after the activation, as onnxruntime and TensorRT place it): the integer
// convolution takes the activation's output scale and the clamp becomes its
// table. Against the float graph: the integer convolution's one-step
// differences only (the clamp commutes with the nondecreasing quantizer).
TEST(QdqGlueFusion, ActivationBetweenConvolutionAndQuantizerFuses) {
  for (const TypeCase& t : kTypes) {
    for (const std::string act : {"Relu", "Clip"}) {
      for (int64_t group : {1, 6}) {
        SCOPED_TRACE(DataTypeName(t.type) + " " + act + " group " + std::to_string(group));
        const int64_t c = 6, m = 6;
        QdqGraphBuilder b;
        b.Input("x", t.type, {2, c, 9, 11});
        b.Params("px", 0.031f, t.zp_in, t.type);
        b.Params("pr", 0.029f, t.zp_out, t.type);
        Graph& g = b.model().graph;
        g.initializers["w"] = RandomBytes(DataType::kInt8, {m, c / group, 3, 3}, 13);
        g.initializers["w_scale"] = Tensor::Scalar<float>(0.0079f);
        g.initializers["w_zp"] = Tensor::Scalar<int8_t>(0);
        g.initializers["lo"] = Tensor::Scalar<float>(0.0f);
        g.initializers["hi"] = Tensor::Scalar<float>(1.5f);
        const std::string conv =
            b.Add("Conv", {b.Dq("x", "px"), b.Add("DequantizeLinear", {"w", "w_scale", "w_zp"})},
                  {Attribute::Ints("kernel_shape", {3, 3}), Attribute::Ints("pads", {1, 1, 1, 1}),
                   Attribute::Int("group", group)});
        const std::string y = act == "Relu" ? b.Add("Relu", {conv}) : b.Add("Clip", {conv, "lo", "hi"});
        b.Output(b.Q(y, "pr"));
        auto fused = Create(b.model(), /*reference=*/false, 1);
        ASSERT_NE(fused, nullptr);
        ASSERT_EQ(fused->NodeKernels().size(), 1u);
        EXPECT_EQ(fused->NodeKernels()[0].op_type, "QLinearConvLut");
        const TensorMap in = {{"x", RandomBytes(t.type, {2, c, 9, 11}, 14)}};
        ExpectFusedBitExact(b.model(), in, /*fused_reference=*/true);
        TensorMap got, want;
        RunFusedAndFloatGraph(b.model(), in, /*threads=*/1, &got, &want);
        ExpectFewStepsApart(got.begin()->second, want.begin()->second, 1.0, 20);
      }
    }
  }
}

// onnxruntime's QDQ files from opset-12 exporters (PP-OCR): each weight a
// float Constant node -> QuantizeLinear -> DequantizeLinear, the bias a float
// Constant node. With constant folding the QuantizeLinear of the constant
// becomes int8 weights (its exact bytes; uint8 weights shift to int8), the
// bias is quantized to int32 at x_scale * w_scale, and the Conv runs as
// QLinearConv on its fast kernel; against the float
// graph: one-step differences only (the integer sum and the bias rounding).
TEST(QdqGlueFusion, FloatWeightsFromConstantNodesAndFloatBiasRunAsQLinearConv) {
  for (const TypeCase& t : kTypes) {
    for (int64_t group : {1, 4}) {
      for (const TypeCase& wt : {TypeCase{DataType::kInt8, 0, 0}, TypeCase{DataType::kUInt8, 131, 0}}) {
        SCOPED_TRACE(DataTypeName(t.type) + " group " + std::to_string(group) + " weights " + DataTypeName(wt.type));
        const int64_t c = 4, m = 4;
        QdqGraphBuilder b(/*opset=*/12);
        b.Input("x", t.type, {1, c, 7, 9});
        b.Params("px", 0.031f, t.zp_in, t.type);
        b.Params("py", 0.047f, t.zp_out, t.type);
        b.Params("pw", 0.0079f, wt.zp_in, wt.type);
        const std::string w = b.Add("Constant", {}, {Attribute::FromTensor("value", testing::RandomFloats({m, c / group, 3, 3}, 31))});
        const std::string bias = b.Add("Constant", {}, {Attribute::FromTensor("value", testing::RandomFloats({m}, 32))});
        const std::string conv = b.Add("Conv", {b.Dq("x", "px"), b.Dq(b.Q(w, "pw"), "pw"), bias},
                                       {Attribute::Ints("kernel_shape", {3, 3}), Attribute::Ints("pads", {1, 1, 1, 1}),
                                        Attribute::Int("group", group)});
        b.Output(b.Q(conv, "py"));
        auto create = [&](bool reference, int threads) {
          ExecutorOptions o;
          o.threads = threads;
          o.backend = reference ? "reference" : "cpu";
          o.profile = reference ? GraphProfile::kAsWritten : GraphProfile::kDeployment;
          auto e = Executor::Create(b.model(), o);
          EXPECT_TRUE(e.ok()) << e.status().ToString();
          return e.ok() ? std::move(e).value() : nullptr;
        };
        auto fused = create(false, 1);
        ASSERT_NE(fused, nullptr);
        ASSERT_EQ(fused->NodeKernels().size(), 1u);
        EXPECT_EQ(fused->NodeKernels()[0].op_type, "QLinearConv");
        // conv_s8 for symmetric weights; uint8 weights shifted to int8 keep a zero
        // point, which the VNNI conv_s8 row leaves to gemm_s8.
        const std::string kernel = testing::KernelOps(fused->NodeKernels()[0].kernel);
        if (group != 1) EXPECT_EQ(kernel, "depthwise_s8");
        else if (wt.type == DataType::kInt8) EXPECT_EQ(kernel, "conv_s8");
        else EXPECT_TRUE(kernel == "conv_s8" || kernel == "gemm_s8") << kernel;
        const TensorMap in = {{"x", RandomBytes(t.type, {1, c, 7, 9}, 33)}};
        TensorMap got, got2, want;
        ASSERT_TRUE(fused->Run(in, &got).ok());
        auto two = create(false, 2);
        ASSERT_TRUE(two->Run(in, &got2).ok());
        ASSERT_TRUE(create(true, 1)->Run(in, &want).ok());
        EXPECT_TRUE(got2.begin()->second.Equals(got.begin()->second));
        ExpectFewStepsApart(got.begin()->second, want.begin()->second, 1.0, 10);
      }
    }
  }
}

// A DequantizeLinear of constant weights feeding a float layer is computed
// once at creation: the node is gone, the results are the same bits.
TEST(QdqGlueFusion, DequantizeOfConstantsIsFoldedOnce) {
  QdqGraphBuilder b;
  b.model().graph.inputs.push_back(testing::FloatInput("x", {{3, ""}, {7, ""}}));
  b.model().graph.initializers["w"] = RandomBytes(DataType::kInt8, {7, 5}, 18);
  b.Params("pw", 0.0123f, -3, DataType::kInt8);
  b.Output(b.Add("MatMul", {"x", b.Dq("w", "pw")}));
  const auto counts = FusedOpCounts(b.model());
  EXPECT_EQ(counts.count("DequantizeLinear"), 0u);
  EXPECT_EQ(counts.at("MatMul"), 1);
  // The float MatMul then runs on gemm_f32 (FMA): equal to the float graph
  // up to rounding, not bit for bit.
  const TensorMap inputs = {{"x", testing::RandomFloats({3, 7}, 19)}};
  auto reference = Create(b.model(), /*reference=*/true, 1);
  auto fused = Create(b.model(), /*reference=*/false, 2);
  ASSERT_NE(reference, nullptr);
  ASSERT_NE(fused, nullptr);
  TensorMap want, got;
  ASSERT_TRUE(reference->Run(inputs, &want).ok());
  ASSERT_TRUE(fused->Run(inputs, &got).ok());
  EXPECT_EQ(testing::KernelOps(fused->NodeKernels().at(0).kernel), "gemm_f32");
  for (const auto& kv : want) {
    const Tensor& g = got.at(kv.first);
    for (int64_t i = 0; i < g.numel(); ++i)
      EXPECT_NEAR(g.data<float>()[i], kv.second.data<float>()[i], 1e-5f) << kv.first << " at " << i;
  }
}

// A classifier Gemm between dequantized values with a float output becomes
// sparq.MatMulIntegerToFloat on gemm_s8: bit for bit its reference on every
// ISA and thread count, and the float Gemm's logits within kF32RelTol.
TEST(QdqGlueFusion, DequantizedGemmRunsOnIntegersWithAFloatOutput) {
  struct GemmCase {
    int64_t m;
    bool trans_b, per_channel;
    DataType w_type;
    const char* bias;  // "dq" (int32 at x_scale * w_scale), "float", "none"
    bool w_zp = true;  // the weights' DequantizeLinear has a zero point (else 0)
  };
  const GemmCase cases[] = {{1, true, true, DataType::kInt8, "dq"},    {3, false, true, DataType::kInt8, "float"},
                            {1, true, false, DataType::kUInt8, "none"}, {2, false, false, DataType::kInt8, "dq"},
                            {0, true, true, DataType::kInt8, "dq"},     {2, true, true, DataType::kInt8, "dq", false}};
  const int64_t k = 37, n = 19;
  for (const TypeCase& t : kTypes) {
    for (const GemmCase& c : cases) {
      SCOPED_TRACE(DataTypeName(t.type) + " m " + std::to_string(c.m) + (c.trans_b ? " transB" : "") +
                   (c.per_channel ? " per channel " : " per tensor ") + DataTypeName(c.w_type) + " bias " + c.bias +
                   (c.w_zp ? "" : " no w zero point"));
      QdqGraphBuilder b;
      b.Input("x", t.type, {c.m, k});
      b.Params("px", 0.0371f, t.zp_in, t.type);
      Graph& g = b.model().graph;
      g.initializers["w"] = RandomBytes(c.w_type, c.trans_b ? Shape{n, k} : Shape{k, n}, 41);
      Tensor ws(DataType::kFloat32, {c.per_channel ? n : 1});
      for (int64_t i = 0; i < ws.numel(); ++i) ws.data<float>()[i] = 0.002f + 0.0003f * static_cast<float>(i);
      const int64_t channels = ws.numel();
      Tensor wzp(c.w_type, {channels});
      for (int64_t i = 0; i < channels; ++i) {
        if (c.w_type == DataType::kUInt8) wzp.data<uint8_t>()[i] = static_cast<uint8_t>(125 + i);
        else wzp.data<int8_t>()[i] = 0;
      }
      if (!c.per_channel) {  // per tensor: scalars
        ws = Tensor::Scalar<float>(ws.data<float>()[0]);
        wzp = c.w_type == DataType::kUInt8 ? Tensor::Scalar<uint8_t>(wzp.data<uint8_t>()[0]) : Tensor::Scalar<int8_t>(0);
      }
      g.initializers["w_scale"] = ws;
      g.initializers["w_zp"] = wzp;
      const std::string dw = b.Add("DequantizeLinear", {"w", "w_scale", c.w_zp ? "w_zp" : ""},
                                   {Attribute::Int("axis", c.trans_b ? 0 : 1)});
      std::vector<std::string> inputs = {b.Dq("x", "px"), dw};
      if (std::string(c.bias) == "dq") {
        Tensor bq(DataType::kInt32, {n}), bs(DataType::kFloat32, {c.per_channel ? n : 1});
        for (int64_t i = 0; i < n; ++i) bq.data<int32_t>()[i] = static_cast<int32_t>(i * 977 % 4001) - 2000;
        for (int64_t i = 0; i < bs.numel(); ++i) bs.data<float>()[i] = 0.0371f * ws.data<float>()[ws.numel() == 1 ? 0 : i];
        g.initializers["b_q"] = bq;
        g.initializers["b_scale"] = bs;
        inputs.push_back(b.Add("DequantizeLinear", {"b_q", "b_scale"}, {Attribute::Int("axis", 0)}));
      } else if (std::string(c.bias) == "float") {
        g.initializers["b"] = testing::RandomFloats({n}, 42);
        inputs.push_back("b");
      }
      b.Output(b.Add("Gemm", inputs, {Attribute::Int("transB", c.trans_b ? 1 : 0)}));
      const auto counts = FusedOpCounts(b.model());
      EXPECT_EQ(counts.count("Gemm"), 0u);
      EXPECT_EQ(counts.count("DequantizeLinear"), 0u);
      ASSERT_EQ(counts.count("MatMulIntegerToFloat"), 1u);
      {
        auto e = Create(b.model(), /*reference=*/false, 1);
        ASSERT_NE(e, nullptr);
        EXPECT_EQ(testing::KernelOps(e->NodeKernels().at(0).kernel), "gemm_s8");
      }
      const TensorMap inputs_map = {{"x", RandomBytes(t.type, {c.m, k}, 43)}};
      ExpectFusedBitExact(b.model(), inputs_map, /*fused_reference=*/true);
      TensorMap got, want;
      RunFusedAndFloatGraph(b.model(), inputs_map, /*threads=*/2, &got, &want);
      ExpectNearOfLargest(got.at(want.begin()->first), want.begin()->second, testing::kF32RelTol);
    }
  }
}

// A MatMul of a dequantized activation (any rank) and dequantized constant
// 2-D weights with a float output (the quantizer's `quantize_outputs: false`,
// the search's `inputs_only` candidates) becomes sparq.MatMulIntegerToFloat
// as the Gemm above does: bit for bit its reference, the float MatMul within
// kF32RelTol. A MatMul of two activations stays float.
TEST(QdqGlueFusion, DequantizedMatMulRunsOnIntegersWithAFloatOutput) {
  struct MatMulCase {
    Shape x;
    bool per_channel;
    int bias_add = 0;  // 1: Add(y, b) after it, 2: Add(b, y); b float32 [N] (folded into the node)
  };
  const MatMulCase cases[] = {{{2, 5, 37}, true}, {{3, 37}, false}, {{1, 1, 4, 37}, true},
                              {{2, 5, 37}, true, 1}, {{3, 37}, false, 2}};
  const int64_t k = 37, n = 19;
  for (const TypeCase& t : kTypes) {
    for (const MatMulCase& c : cases) {
      SCOPED_TRACE(DataTypeName(t.type) + " rank " + std::to_string(c.x.size()) +
                   (c.per_channel ? " per channel" : " per tensor") + " bias add " + std::to_string(c.bias_add));
      QdqGraphBuilder b;
      b.Input("x", t.type, c.x);
      b.Params("px", 0.0371f, t.zp_in, t.type);
      Graph& g = b.model().graph;
      g.initializers["w"] = RandomBytes(DataType::kInt8, {k, n}, 51);
      Tensor ws(DataType::kFloat32, {c.per_channel ? n : 1});
      for (int64_t i = 0; i < ws.numel(); ++i) ws.data<float>()[i] = 0.002f + 0.0003f * static_cast<float>(i);
      if (!c.per_channel) ws = Tensor::Scalar<float>(ws.data<float>()[0]);
      g.initializers["w_scale"] = ws;
      g.initializers["w_zp"] =
          c.per_channel ? Tensor::FromVector<int8_t>({n}, std::vector<int8_t>(n, 0)) : Tensor::Scalar<int8_t>(0);
      const std::string dw = b.Add("DequantizeLinear", {"w", "w_scale", "w_zp"}, {Attribute::Int("axis", 1)});
      const std::string product = b.Add("MatMul", {b.Dq("x", "px"), dw});
      if (c.bias_add != 0) {
        g.initializers["bias"] = testing::RandomFloats({n}, 52);
        b.Output(b.Add("Add", c.bias_add == 1 ? std::vector<std::string>{product, "bias"}
                                              : std::vector<std::string>{"bias", product}));
      } else {
        b.Output(product);
      }
      const auto counts = FusedOpCounts(b.model());
      EXPECT_EQ(counts.count("MatMul"), 0u);
      EXPECT_EQ(counts.count("Add"), 0u);
      EXPECT_EQ(counts.count("DequantizeLinear"), 0u);
      ASSERT_EQ(counts.count("MatMulIntegerToFloat"), 1u);
      {
        auto e = Create(b.model(), /*reference=*/false, 1);
        ASSERT_NE(e, nullptr);
        EXPECT_EQ(testing::KernelOps(e->NodeKernels().at(0).kernel), "gemm_s8");
      }
      const TensorMap inputs_map = {{"x", RandomBytes(t.type, c.x, 53)}};
      ExpectFusedBitExact(b.model(), inputs_map, /*fused_reference=*/true);
      TensorMap got, want;
      RunFusedAndFloatGraph(b.model(), inputs_map, /*threads=*/2, &got, &want);
      ExpectNearOfLargest(got.at(want.begin()->first), want.begin()->second, testing::kF32RelTol);
    }
  }
  QdqGraphBuilder b;  // B an activation: attention's Q x K^T
  b.Input("x", DataType::kUInt8, {2, 4, 8});
  b.Input("z", DataType::kUInt8, {2, 8, 4});
  b.Params("px", 0.02f, 120, DataType::kUInt8);
  b.Output(b.Add("MatMul", {b.Dq("x", "px"), b.Dq("z", "px")}));
  const auto counts = FusedOpCounts(b.model());
  EXPECT_EQ(counts.count("MatMulIntegerToFloat"), 0u);
  EXPECT_EQ(counts.at("MatMul"), 1);
}

// A Conv of a dequantized activation and dequantized constant int8 weights
// whose float output no QuantizeLinear takes (the search's `inputs_only`
// candidates: YOLOv8n's 3x3 and 1x1 layers before SiLU, magika's 1-D
// layer) becomes sparq.ConvIntegerToFloat on conv_s8: bit for bit its
// reference on every ISA and thread count, and the float Conv within
// kConvToFloatTolerance = testing::kF32RelTol of the output's largest
// magnitude (the float32 rounding of the sum; the Gemm route's bound above).
// Depthwise and grouped convolutions (the shape rule: they stay float) and
// uint8 weights are left alone.
TEST(QdqGlueFusion, DequantizedConvRunsOnIntegersWithAFloatOutput) {
  const float kConvToFloatTolerance = testing::kF32RelTol;
  struct ConvCase {
    Shape x, w;
    int64_t stride, pad;
    bool per_channel;
    const char* bias;  // "dq" (int32 at x_scale * w_scale), "float", "none"
    bool w_zp = true;
    const char* after = "silu";  // "silu": Sigmoid + Mul, "none": the Conv's output is the graph's
  };
  const ConvCase cases[] = {{{1, 16, 20, 20}, {32, 16, 3, 3}, 2, 1, true, "dq"},       // YOLOv8n's downsampling 3x3
                            {{2, 24, 10, 10}, {16, 24, 1, 1}, 1, 0, true, "float"},    // a 1x1
                            {{1, 8, 9, 9}, {12, 8, 3, 3}, 1, 1, false, "none", false, "none"},
                            {{1, 32, 64}, {24, 32, 5}, 1, 2, true, "dq", true, "none"}};  // magika's 1-D layer
  for (const TypeCase& t : kTypes) {
    for (const ConvCase& c : cases) {
      SCOPED_TRACE(DataTypeName(t.type) + " x " + ShapeToString(c.x) + " w " + ShapeToString(c.w) + " bias " + c.bias +
                   (c.per_channel ? " per channel" : " per tensor") + (c.w_zp ? "" : " no w zero point"));
      const bool two_d = c.x.size() == 4;
      const int64_t m = c.w[0];
      QdqGraphBuilder b;
      b.Input("x", t.type, c.x);
      b.Params("px", 0.0371f, t.zp_in, t.type);
      Graph& g = b.model().graph;
      g.initializers["w"] = RandomBytes(DataType::kInt8, c.w, 61);
      Tensor ws(DataType::kFloat32, {c.per_channel ? m : 1});
      for (int64_t i = 0; i < ws.numel(); ++i) ws.data<float>()[i] = 0.002f + 0.0003f * static_cast<float>(i);
      if (!c.per_channel) ws = Tensor::Scalar<float>(ws.data<float>()[0]);
      g.initializers["w_scale"] = ws;
      std::vector<std::string> dw_inputs = {"w", "w_scale"};
      if (c.w_zp) {
        g.initializers["w_zp"] =
            c.per_channel ? Tensor::FromVector<int8_t>({m}, std::vector<int8_t>(m, 0)) : Tensor::Scalar<int8_t>(0);
        dw_inputs.push_back("w_zp");
      }
      const std::string dw = b.Add("DequantizeLinear", dw_inputs, {Attribute::Int("axis", 0)});
      std::vector<std::string> conv_inputs = {b.Dq("x", "px"), dw};
      if (std::string(c.bias) == "float") {
        g.initializers["bias"] = testing::RandomFloats({m}, 62);
        conv_inputs.push_back("bias");
      } else if (std::string(c.bias) == "dq") {
        Tensor bq(DataType::kInt32, {m});
        for (int64_t i = 0; i < m; ++i) bq.data<int32_t>()[i] = static_cast<int32_t>(i * 977 % 4001) - 2000;
        Tensor bs(DataType::kFloat32, {m});
        for (int64_t i = 0; i < m; ++i)
          bs.data<float>()[i] = 0.0371f * ws.data<float>()[c.per_channel ? i : 0];
        g.initializers["bias_q"] = bq;
        g.initializers["bias_scale"] = bs;
        conv_inputs.push_back(b.Add("DequantizeLinear", {"bias_q", "bias_scale"}, {Attribute::Int("axis", 0)}));
      }
      const int64_t k = c.w.back();
      std::vector<Attribute> attrs = {
          Attribute::Ints("kernel_shape", two_d ? std::vector<int64_t>{c.w[2], k} : std::vector<int64_t>{k}),
          Attribute::Ints("strides", two_d ? std::vector<int64_t>{c.stride, c.stride} : std::vector<int64_t>{c.stride}),
          Attribute::Ints("pads", two_d ? std::vector<int64_t>(4, c.pad) : std::vector<int64_t>(2, c.pad))};
      const std::string y = b.Add("Conv", conv_inputs, attrs);
      b.Output(y);
      if (std::string(c.after) == "silu") {  // the route is taken before a SiLU too (taking the SiLU in)
        QdqGraphBuilder with_silu = b;
        with_silu.model().graph.outputs.clear();
        with_silu.Output(with_silu.Add("Mul", {y, with_silu.Add("Sigmoid", {y})}));
        const auto silu_counts = FusedOpCounts(with_silu.model());
        EXPECT_EQ(silu_counts.count("Conv") + silu_counts.count("FusedConv"), 0u);
        EXPECT_EQ(silu_counts.count("ConvIntegerToFloat"), 1u);
        EXPECT_EQ(silu_counts.count("Silu"), 0u);  // in the conv's epilogue (conv_silu_fusion_test.cc)
      }
      const auto counts = FusedOpCounts(b.model());
      EXPECT_EQ(counts.count("Conv"), 0u);
      EXPECT_EQ(counts.count("FusedConv"), 0u);
      EXPECT_EQ(counts.count("DequantizeLinear"), 0u);
      ASSERT_EQ(counts.count("ConvIntegerToFloat"), 1u);
      {
        auto e = Create(b.model(), /*reference=*/false, 1);
        ASSERT_NE(e, nullptr);
        for (const NodeKernel& nk : e->NodeKernels())
          if (nk.op_type == "ConvIntegerToFloat") EXPECT_NE(nk.kernel, "ref");
      }
      const TensorMap inputs_map = {{"x", RandomBytes(t.type, c.x, 63)}};
      ExpectFusedBitExact(b.model(), inputs_map, /*fused_reference=*/true);
      TensorMap got, want;
      RunFusedAndFloatGraph(b.model(), inputs_map, /*threads=*/2, &got, &want);
      ExpectNearOfLargest(got.at(want.begin()->first), want.begin()->second, kConvToFloatTolerance);
    }
  }
}

// The shape rule: a depthwise or grouped Conv (the integer kernel's im2col +
// GEMM per group is slower than the float depthwise rows) and uint8 weights
// stay a float Conv when the output is float.
TEST(QdqGlueFusion, DequantizedConvOutsideTheRuleStaysFloat) {
  struct Case {
    int64_t group;
    DataType w_type;
  };
  for (const Case& c : {Case{16, DataType::kInt8}, Case{4, DataType::kInt8}, Case{1, DataType::kUInt8}}) {
    SCOPED_TRACE("group " + std::to_string(c.group) + " " + DataTypeName(c.w_type));
    QdqGraphBuilder b;
    b.Input("x", DataType::kUInt8, {1, 16, 12, 12});
    b.Params("px", 0.02f, 120, DataType::kUInt8);
    b.model().graph.initializers["w"] = RandomBytes(c.w_type, {16, 16 / c.group, 3, 3}, 64);
    b.Params("pw", 0.01f, c.w_type == DataType::kUInt8 ? 128 : 0, c.w_type);
    b.Output(b.Add("Conv", {b.Dq("x", "px"), b.Dq("w", "pw")},
                   {Attribute::Ints("kernel_shape", {3, 3}), Attribute::Ints("pads", {1, 1, 1, 1}),
                    Attribute::Int("group", c.group)}));
    const auto counts = FusedOpCounts(b.model());
    EXPECT_EQ(counts.count("ConvIntegerToFloat"), 0u);
    EXPECT_EQ(counts.count("Conv") + counts.count("FusedConv"), 1u);
  }
}

// A Gemm outside the integer form (alpha != 1, or a float input) stays a float Gemm.
TEST(QdqGlueFusion, GemmOutsideTheIntegerFormIsLeftAlone) {
  QdqGraphBuilder b;
  b.Input("x", DataType::kUInt8, {2, 5});
  b.Params("px", 0.02f, 120, DataType::kUInt8);
  b.model().graph.initializers["w"] = RandomBytes(DataType::kInt8, {5, 3}, 44);
  b.Params("pw", 0.01f, 0, DataType::kInt8);
  b.Output(b.Add("Gemm", {b.Dq("x", "px"), b.Dq("w", "pw")}, {Attribute::Float("alpha", 0.5f)}));
  const auto counts = FusedOpCounts(b.model());
  EXPECT_EQ(counts.count("MatMulIntegerToFloat"), 0u);
  EXPECT_EQ(counts.at("Gemm"), 1);
  ExpectFusedBitExact(b.model(), {{"x", RandomBytes(DataType::kUInt8, {2, 5}, 45)}});
}

// Empty tensors go through every fused operator and fast row.
TEST(QdqGlueFusion, EmptyTensors) {
  for (const TypeCase& t : kTypes) {
    QdqGraphBuilder b;
    const Shape shape = {0, 3, 4, 5};
    b.Input("a", t.type, shape);
    b.Input("b", t.type, shape);
    b.Params("p", 0.02f, t.zp_in, t.type);
    b.Output(b.Q(b.Add("Relu", {b.Dq("a", "p")}), "p"));
    b.Output(b.Q(b.Add("Add", {b.Dq("a", "p"), b.Dq("b", "p")}), "p"));
    b.Output(b.Q(b.Add("MaxPool", {b.Dq("b", "p")}, {Attribute::Ints("kernel_shape", {2, 2})}), "p"));
    b.Output(b.Dq("b", "p"));
    ExpectFusedBitExact(b.model(), {{"a", RandomBytes(t.type, shape, 16)}, {"b", RandomBytes(t.type, shape, 17)}});
  }
}

// Patterns that do not qualify keep their float nodes, and still compute the
// float graph's results.
TEST(QdqGlueFusion, NonQualifyingPatternsAreLeftAlone) {
  const DataType u8 = DataType::kUInt8;
  const Shape shape = {2, 3, 5, 7};
  auto base = [&](QdqGraphBuilder& b) {
    b.Input("x", u8, shape);
    b.Params("pin", 0.02f, 120, u8);
    b.Params("pout", 0.01f, 3, u8);
  };
  {
    SCOPED_TRACE("dequantized value read by two nodes: the table reads the integers, the DQ stays for the other");
    QdqGraphBuilder b;
    base(b);
    const std::string d = b.Dq("x", "pin");
    b.Output(b.Q(b.Add("Relu", {d}), "pout"));
    b.Output(b.Add("Sin", {d}));  // a float op on its reference kernel: the same bits
    const auto counts = FusedOpCounts(b.model());
    EXPECT_EQ(counts.at("QLinearLut"), 1);
    EXPECT_EQ(counts.count("Relu"), 0u);
    EXPECT_EQ(counts.at("DequantizeLinear"), 1);
    ExpectFusedBitExact(b.model(), {{"x", RandomBytes(u8, shape, 6)}});
  }
  {
    SCOPED_TRACE("Add of a non-scalar constant is no table step; Add of a rank-1 [1] constant neither when x's rank "
                 "is unknown (x a scalar would make the result [1])");
    QdqGraphBuilder b;
    base(b);
    b.model().graph.inputs.back().has_shape = false;
    b.model().graph.inputs.back().dims.clear();
    b.model().graph.initializers["row"] = testing::RandomFloats({7}, 12);
    b.model().graph.initializers["one"] = Tensor::FromVector<float>({1}, {0.5f});
    b.Output(b.Q(b.Add("Add", {b.Dq("x", "pin"), "row"}), "pout"));
    b.Output(b.Q(b.Add("Mul", {"one", b.Dq("x", "pin")}), "pout"));
    const auto counts = FusedOpCounts(b.model());
    EXPECT_EQ(counts.count("QLinearLut"), 0u);
    ExpectFusedBitExact(b.model(), {{"x", RandomBytes(u8, shape, 13)}});
  }
  {
    SCOPED_TRACE("intermediate float value is a graph output");
    QdqGraphBuilder b;
    base(b);
    const std::string r = b.Add("Relu", {b.Dq("x", "pin")});
    b.Output(b.Q(r, "pout"));
    b.Output(r);
    EXPECT_EQ(FusedOpCounts(b.model()).count("QLinearLut"), 0u);
    ExpectFusedBitExact(b.model(), {{"x", RandomBytes(u8, shape, 7)}});
  }
  {
    // (Sin, not Sigmoid or Tanh, for the float output: their fast rows are not the reference's bits.)
    SCOPED_TRACE("x * Sin(x) whose Sin is a graph output; Mul of a Sigmoid of another dequantized value");
    QdqGraphBuilder b;
    base(b);
    b.Input("z", u8, shape);
    const std::string d = b.Dq("x", "pin");
    const std::string sig = b.Add("Sin", {d});
    b.Output(b.Q(b.Add("Mul", {d, sig}), "pout"));
    b.Output(sig);
    b.Output(b.Q(b.Add("Mul", {b.Dq("z", "pin"), b.Add("Sigmoid", {b.Dq("x", "pin")})}), "pout"));
    const auto counts = FusedOpCounts(b.model());
    EXPECT_EQ(counts.count("QLinearLut"), 0u);
    EXPECT_EQ(counts.at("Mul"), 2);
    ExpectFusedBitExact(b.model(), {{"x", RandomBytes(u8, shape, 23)}, {"z", RandomBytes(u8, shape, 24)}});
  }
  {
    SCOPED_TRACE("scale that a run may override (initializer input)");
    QdqGraphBuilder b;
    base(b);
    ValueInfo overridable;
    overridable.name = "pin_scale";
    b.model().graph.initializer_inputs.push_back(overridable);
    b.Output(b.Q(b.Add("Relu", {b.Dq("x", "pin")}), "pout"));
    EXPECT_EQ(FusedOpCounts(b.model()).count("QLinearLut"), 0u);
    ExpectFusedBitExact(b.model(), {{"x", RandomBytes(u8, shape, 8)}});
  }
  {
    SCOPED_TRACE("per-channel scale");
    QdqGraphBuilder b;
    base(b);
    b.model().graph.initializers["pin_scale"] = Tensor::FromVector<float>({3}, {0.02f, 0.03f, 0.04f});
    b.model().graph.initializers["pin_zp"] = Tensor::FromVector<uint8_t>({3}, {120, 121, 122});
    b.Output(b.Q(b.Add("Relu", {b.Dq("x", "pin")}), "pout"));
    EXPECT_EQ(FusedOpCounts(b.model()).count("QLinearLut"), 0u);
    ExpectFusedBitExact(b.model(), {{"x", RandomBytes(u8, shape, 9)}});
  }
  {
    SCOPED_TRACE("op outside the table's list, MaxPool with dilations, Add of a float");
    QdqGraphBuilder b;
    base(b);
    b.model().graph.inputs.push_back(testing::FloatInput("f", {{2, ""}, {3, ""}, {5, ""}, {7, ""}}));
    b.Output(b.Q(b.Add("Softmax", {b.Dq("x", "pin")}), "pout"));
    b.Output(b.Q(b.Add("MaxPool", {b.Dq("x", "pin")},
                       {Attribute::Ints("kernel_shape", {2, 2}), Attribute::Ints("dilations", {2, 2})}),
                 "pout"));
    b.Output(b.Q(b.Add("Add", {b.Dq("x", "pin"), "f"}), "pout"));
    const auto counts = FusedOpCounts(b.model());
    EXPECT_EQ(counts.count("QLinearLut") + counts.count("QLinearAdd"), 0u);
    EXPECT_EQ(counts.at("DequantizeLinear"), 3);
    ExpectFusedBitExact(b.model(), {{"x", RandomBytes(u8, shape, 10)}, {"f", testing::RandomFloats(shape, 11)}});
  }
}

}  // namespace
}  // namespace sparq
