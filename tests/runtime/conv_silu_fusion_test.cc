// sparq.ConvIntegerToFloat with activation "Silu" (runtime/passes/float_fusion.cc,
// FuseSiluIntoConvIntegerToFloat; kernels/cpu/conv_integer.cc): the SiLU after
// an inputs-only Conv (YOLOv8n's blocks: Conv -> Sigmoid + Mul -> QuantizeLinear)
// runs in the conv's float epilogue, with the bits of the separate sparq.Silu
// node on every ISA and thread count, and is left alone when the conv's output
// has another reader or is a graph output.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "kernels/cpu/activation_f32.h"
#include "kernels/cpu/dispatch.h"
#include "sparq/executor.h"
#include "test_util.h"
#include "tests/kernels/isa_sweep.h"
#include "tests/runtime/qdq_graph_builder.h"

namespace sparq {
namespace {

using qdq_test::Create;
using qdq_test::FusedOpCounts;
using qdq_test::kThreadCounts;
using qdq_test::QdqGraphBuilder;
using qdq_test::RandomBytes;

struct ConvCase {
  Shape x, w;
  int64_t stride, pad;
  int8_t w_zp;  // per channel, every channel; nonzero: the im2col route on panel16x4_s8
  const char* what;
};

// x_q -> DequantizeLinear -> Conv(DequantizeLinear(w_q), DequantizeLinear(b_q))
// into `b`; returns the Conv's output.
std::string AddQdqConv(QdqGraphBuilder& b, const std::string& x, const std::string& params, const ConvCase& c,
                       const std::string& tag, uint32_t seed) {
  Graph& g = b.model().graph;
  const int64_t m = c.w[0];
  g.initializers[tag + "_w"] = RandomBytes(DataType::kInt8, c.w, seed);
  Tensor ws(DataType::kFloat32, {m});
  for (int64_t i = 0; i < m; ++i) ws.data<float>()[i] = 0.002f + 0.0003f * static_cast<float>(i);
  g.initializers[tag + "_w_scale"] = ws;
  g.initializers[tag + "_w_zp"] = Tensor::FromVector<int8_t>({m}, std::vector<int8_t>(m, c.w_zp));
  const std::string dw =
      b.Add("DequantizeLinear", {tag + "_w", tag + "_w_scale", tag + "_w_zp"}, {Attribute::Int("axis", 0)});
  Tensor bq(DataType::kInt32, {m});
  Tensor bs(DataType::kFloat32, {m});
  const float x_scale = g.initializers.at(params + "_scale").data<float>()[0];
  for (int64_t i = 0; i < m; ++i) {
    bq.data<int32_t>()[i] = static_cast<int32_t>(i * 977 % 4001) - 2000;
    bs.data<float>()[i] = x_scale * ws.data<float>()[i];
  }
  g.initializers[tag + "_bq"] = bq;
  g.initializers[tag + "_bs"] = bs;
  const std::string db = b.Add("DequantizeLinear", {tag + "_bq", tag + "_bs"}, {Attribute::Int("axis", 0)});
  const int64_t k = c.w.back();
  return b.Add("Conv", {b.Dq(x, params), dw, db},
               {Attribute::Ints("kernel_shape", {c.w[2], k}), Attribute::Ints("strides", {c.stride, c.stride}),
                Attribute::Ints("pads", std::vector<int64_t>(4, c.pad))});
}

std::string AddSilu(QdqGraphBuilder& b, const std::string& t) { return b.Add("Mul", {t, b.Add("Sigmoid", {t})}); }

// How many of the fused executor's nodes are a ConvIntegerToFloat carrying the SiLU.
int ConvsWithSilu(const Model& m) {
  auto e = Create(m, /*reference=*/false, 1);
  int n = 0;
  if (e != nullptr) {
    for (const Node& node : e->model().graph.nodes)
      n += node.op_type == "ConvIntegerToFloat" && node.attr_string("activation", "") == "Silu";
  }
  return n;
}

// `fused` and `unfused` (the same graph with the convs' outputs also graph
// outputs, so that each SiLU stays its own node) give output `y` the same
// bytes on every ISA of this CPU and 1-3 threads.
void ExpectFusedBitsEqualUnfused(const Model& fused, const Model& unfused, const TensorMap& inputs,
                                 const std::string& y) {
  for (CpuIsa isa : testing::IsasOfThisCpu()) {
    ASSERT_TRUE(ForceIsa(isa).ok());
    for (int threads : kThreadCounts) {
      auto a = Create(fused, /*reference=*/false, threads);
      auto b = Create(unfused, /*reference=*/false, threads);
      ASSERT_NE(a, nullptr);
      ASSERT_NE(b, nullptr);
      TensorMap got, want;
      ASSERT_TRUE(a->Run(inputs, &got).ok());
      ASSERT_TRUE(b->Run(inputs, &want).ok());
      EXPECT_TRUE(got.at(y).Equals(want.at(y))) << y << ": isa " << CpuIsaName(isa) << ", " << threads << " threads";
    }
  }
  ResetIsa();
}

// Fused (the SiLU in the conv's epilogue) vs unfused (the conv's output also
// a graph output, so the sparq.Silu node stays): the SiLU's output the same
// bytes for every ISA of this CPU and 1-3 threads, as the conv_s8 and the
// im2col routes run it.
TEST(ConvSiluFusion, SiluInTheConvEpilogueHasTheSeparateNodesBits) {
  const ConvCase cases[] = {{{1, 16, 20, 20}, {32, 16, 3, 3}, 2, 1, 0, "YOLOv8n's downsampling 3x3"},
                            {{2, 24, 10, 10}, {16, 24, 1, 1}, 1, 0, 0, "a 1x1, two images"},
                            {{1, 8, 9, 9}, {12, 8, 3, 3}, 1, 1, 3, "weight zero points (im2col on panel16x4_s8)"},
                            {{1, 64, 6, 6}, {20, 64, 3, 3}, 1, 1, 0, "odd channels, few positions"},
                            {{5, 16, 12, 12}, {24, 16, 3, 3}, 1, 1, 0, "5 images: the SiLU in conv_s8's driver"}};
  for (DataType type : {DataType::kUInt8, DataType::kInt8}) {
    for (const ConvCase& c : cases) {
      SCOPED_TRACE(DataTypeName(type) + " " + c.what);
      QdqGraphBuilder fused;
      fused.Input("x", type, c.x);
      fused.Params("px", 0.0371f, type == DataType::kUInt8 ? 131 : -7, type);
      const std::string t = AddQdqConv(fused, "x", "px", c, "c", 61);
      QdqGraphBuilder unfused = fused;
      fused.Output(AddSilu(fused, t));
      unfused.Output(AddSilu(unfused, t));
      unfused.Output(t);  // a graph output: the SiLU stays its own node
      const auto fused_counts = FusedOpCounts(fused.model());
      EXPECT_EQ(fused_counts.count("Silu") + fused_counts.count("Sigmoid") + fused_counts.count("Mul"), 0u);
      EXPECT_EQ(ConvsWithSilu(fused.model()), 1);
      EXPECT_EQ(ConvsWithSilu(unfused.model()), 0);
      const auto unfused_counts = FusedOpCounts(unfused.model());
      EXPECT_EQ(unfused_counts.count("Silu"), 1u);
      const TensorMap inputs = {{"x", RandomBytes(type, c.x, 63)}};
      const std::string y = fused.model().graph.outputs[0].name;
      ExpectFusedBitsEqualUnfused(fused.model(), unfused.model(), inputs, y);
      // The reference kernels: the fused node's (ConvInteger, the epilogue,
      // sparq.Silu's reference) are the two nodes' bits; the fast rows within
      // kSigmoidF32AbsTol * max(1, |t|) of them (t the conv's output: the
      // SiLU's input, exact on the integer route).
      auto ref_fused = Create(fused.model(), /*reference=*/true, 1, /*fuse_reference=*/true);
      auto ref_unfused = Create(unfused.model(), /*reference=*/true, 1, /*fuse_reference=*/true);
      auto fast = Create(fused.model(), /*reference=*/false, 2);
      ASSERT_NE(ref_fused, nullptr);
      ASSERT_NE(ref_unfused, nullptr);
      ASSERT_NE(fast, nullptr);
      TensorMap want, want_unfused, got;
      ASSERT_TRUE(ref_fused->Run(inputs, &want).ok());
      ASSERT_TRUE(ref_unfused->Run(inputs, &want_unfused).ok());
      ASSERT_TRUE(fast->Run(inputs, &got).ok());
      EXPECT_TRUE(want.at(y).Equals(want_unfused.at(y)));
      const Tensor& tv = want_unfused.at(t);
      for (int64_t i = 0; i < tv.numel(); ++i) {
        ASSERT_NEAR(got.at(y).data<float>()[i], want.at(y).data<float>()[i],
                    cpu::kSigmoidF32AbsTol * std::max(1.0f, std::fabs(tv.data<float>()[i])))
            << "element " << i;
      }
    }
  }
}

// A YOLO-like stack: two Conv -> SiLU -> QuantizeLinear blocks take the SiLU
// into the conv; a third conv whose output a Concat reads beside the SiLU (a
// second reader) keeps its SiLU as a node.
TEST(ConvSiluFusion, YoloLikeBlocksFuseButNotASecondReader) {
  QdqGraphBuilder b;
  b.Input("x", DataType::kUInt8, {1, 8, 16, 16});
  b.Params("p0", 0.02f, 128, DataType::kUInt8);
  b.Params("p1", 0.03f, 120, DataType::kUInt8);
  b.Params("p2", 0.025f, 110, DataType::kUInt8);
  const std::string t1 = AddQdqConv(b, "x", "p0", {{}, {16, 8, 3, 3}, 2, 1, 0, ""}, "a", 71);
  const std::string t2 = AddQdqConv(b, b.Q(AddSilu(b, t1), "p1"), "p1", {{}, {16, 16, 1, 1}, 1, 0, 0, ""}, "b", 72);
  const std::string t3 = AddQdqConv(b, b.Q(AddSilu(b, t2), "p2"), "p2", {{}, {8, 16, 3, 3}, 1, 1, 0, ""}, "c", 73);
  b.Output(b.Add("Concat", {AddSilu(b, t3), t3}, {Attribute::Int("axis", 1)}));
  QdqGraphBuilder unfused = b;
  unfused.Output(t1);
  unfused.Output(t2);
  EXPECT_EQ(ConvsWithSilu(unfused.model()), 0);
  const auto counts = FusedOpCounts(b.model());
  EXPECT_EQ(counts.at("ConvIntegerToFloat"), 3);
  EXPECT_EQ(counts.count("Silu"), 1u);  // the third conv's
  EXPECT_EQ(counts.count("Sigmoid") + counts.count("Mul"), 0u);
  EXPECT_EQ(ConvsWithSilu(b.model()), 2);
  ExpectFusedBitsEqualUnfused(b.model(), unfused.model(), {{"x", RandomBytes(DataType::kUInt8, {1, 8, 16, 16}, 74)}},
                              b.model().graph.outputs[0].name);
}

// A QuantizeLinear that is the only reader of an inputs-only conv's SiLU
// (YOLOv8n's Conv -> SiLU -> QuantizeLinear; right after a conv it makes a
// QLinearConv instead) goes into the conv as inputs Y_scale / Y_zero_point
// (FuseQuantizeIntoConvIntegerToFloat): the bytes of the separate nodes on
// every ISA of this CPU and 1-3 threads, on the conv_s8 route (its driver
// quantizes each task's float rows: by position pieces, by channel parts, by
// image tasks) and on the im2col one; on the reference kernels too.
TEST(ConvSiluFusion, QuantizeLinearInTheConvHasTheSeparateNodesBits) {
  const ConvCase cases[] = {{{1, 16, 20, 20}, {32, 16, 3, 3}, 2, 1, 0, "YOLOv8n's downsampling 3x3"},
                            {{2, 24, 10, 10}, {16, 24, 1, 1}, 1, 0, 0, "a 1x1, two images"},
                            {{1, 8, 9, 9}, {12, 8, 3, 3}, 1, 1, 3, "weight zero points (im2col on panel16x4_s8)"},
                            {{1, 64, 6, 6}, {20, 64, 3, 3}, 1, 1, 0, "odd channels, few positions"},
                            {{1, 8, 30, 30}, {20, 8, 3, 3}, 1, 1, 0, "900 positions: position pieces"},
                            {{5, 16, 12, 12}, {24, 16, 3, 3}, 1, 1, 0, "5 images: image tasks"}};
  for (DataType type : {DataType::kUInt8, DataType::kInt8}) {
    for (bool silu : {true}) {
      for (const ConvCase& c : cases) {
        SCOPED_TRACE(DataTypeName(type) + (silu ? " SiLU " : " ") + c.what);
        QdqGraphBuilder fused;
        fused.Input("x", type, c.x);
        fused.Params("px", 0.0371f, type == DataType::kUInt8 ? 131 : -7, type);
        fused.Params("py", 0.0213f, type == DataType::kUInt8 ? 97 : 5, type);
        const std::string t = AddQdqConv(fused, "x", "px", c, "c", 81);
        QdqGraphBuilder unfused = fused;
        const std::string f = silu ? AddSilu(fused, t) : t;
        fused.Output(fused.Q(f, "py"));
        const std::string uf = silu ? AddSilu(unfused, t) : t;
        unfused.Output(unfused.Q(uf, "py"));
        unfused.Output(uf);  // a graph output: the QuantizeLinear stays its own node
        auto fused_counts = FusedOpCounts(fused.model());
        auto unfused_counts = FusedOpCounts(unfused.model());
        EXPECT_EQ(fused_counts.count("QuantizeLinear"), 0u);
        EXPECT_EQ(fused_counts["ConvIntegerToFloat"], 1);
        EXPECT_EQ(unfused_counts["QuantizeLinear"], 1);
        const TensorMap inputs = {{"x", RandomBytes(type, c.x, 83)}};
        const std::string y = fused.model().graph.outputs[0].name;
        ExpectFusedBitsEqualUnfused(fused.model(), unfused.model(), inputs, y);
        auto fast = Create(fused.model(), /*reference=*/false, 2);
        ASSERT_NE(fast, nullptr);
        int quantizing = 0;
        for (const Node& n : fast->model().graph.nodes)
          quantizing += n.op_type == "ConvIntegerToFloat" && n.inputs.size() == 9 && !n.inputs[8].empty();
        EXPECT_EQ(quantizing, 1);
        // The reference kernels on the fused graph: the unfused graph's bytes.
        auto ref_fused = Create(fused.model(), /*reference=*/true, 1, /*fuse_reference=*/true);
        auto ref_unfused = Create(unfused.model(), /*reference=*/true, 1, /*fuse_reference=*/true);
        ASSERT_NE(ref_fused, nullptr);
        ASSERT_NE(ref_unfused, nullptr);
        TensorMap want, want_unfused, got;
        ASSERT_TRUE(ref_fused->Run(inputs, &want).ok());
        ASSERT_TRUE(ref_unfused->Run(inputs, &want_unfused).ok());
        ASSERT_TRUE(fast->Run(inputs, &got).ok());
        EXPECT_EQ(want.at(y).dtype(), type);
        EXPECT_TRUE(want.at(y).Equals(want_unfused.at(y)));
        EXPECT_EQ(got.at(y).dtype(), type);
      }
    }
  }
}

// Concat -> QuantizeLinear (YOLOv8n's C2f blocks) becomes a QuantizeLinear
// per input and a Concat of bytes (QuantizeConcatInputs); an input that is a
// conv's SiLU read by the Concat alone then has its QuantizeLinear in the conv.
// The bytes of the unfused graph (the Concat's output also a graph output) on
// every ISA of this CPU and 1-3 threads, and on the reference kernels.
TEST(ConvSiluFusion, ConcatThenQuantizeLinearQuantizesItsInputs) {
  for (int64_t batch : {1, 5}) {
    SCOPED_TRACE("batch " + std::to_string(batch));
    QdqGraphBuilder b;
    b.Input("x", DataType::kUInt8, {batch, 8, 16, 16});
    b.Params("p0", 0.02f, 128, DataType::kUInt8);
    b.Params("p1", 0.03f, 120, DataType::kUInt8);
    b.Params("p2", 0.025f, 110, DataType::kUInt8);
    const std::string t1 = AddSilu(b, AddQdqConv(b, "x", "p0", {{}, {16, 8, 3, 3}, 1, 1, 0, ""}, "a", 91));
    const std::string t2 = AddSilu(b, AddQdqConv(b, b.Q(t1, "p1"), "p1", {{}, {16, 16, 3, 3}, 1, 1, 0, ""}, "b", 92));
    const std::string cat = b.Add("Concat", {t1, t2}, {Attribute::Int("axis", 1)});
    const std::string t3 = AddQdqConv(b, b.Q(cat, "p2"), "p2", {{}, {8, 32, 1, 1}, 1, 0, 0, ""}, "c", 93);
    b.Output(t3);
    QdqGraphBuilder unfused = b;
    unfused.Output(cat);  // a graph output: the Concat stays on floats
    auto counts = FusedOpCounts(b.model());
    auto unfused_counts = FusedOpCounts(unfused.model());
    EXPECT_EQ(unfused_counts["QuantizeLinear"], 2);  // t1's for conv b, the Concat's
    EXPECT_EQ(counts["QuantizeLinear"], 2);          // t1's twice (conv b's, the Concat's); t2's went into conv b
    EXPECT_EQ(counts["Concat"], 1);
    auto fast = Create(b.model(), /*reference=*/false, 1);
    ASSERT_NE(fast, nullptr);
    int quantizing = 0;
    for (const Node& n : fast->model().graph.nodes)
      quantizing += n.op_type == "ConvIntegerToFloat" && n.inputs.size() == 9;
    EXPECT_EQ(quantizing, 1);
    const TensorMap inputs = {{"x", RandomBytes(DataType::kUInt8, {batch, 8, 16, 16}, 94)}};
    ExpectFusedBitsEqualUnfused(b.model(), unfused.model(), inputs, t3);
    auto ref_fused = Create(b.model(), /*reference=*/true, 1, /*fuse_reference=*/true);
    auto ref_unfused = Create(unfused.model(), /*reference=*/true, 1, /*fuse_reference=*/true);
    ASSERT_NE(ref_fused, nullptr);
    ASSERT_NE(ref_unfused, nullptr);
    TensorMap want, want_unfused;
    ASSERT_TRUE(ref_fused->Run(inputs, &want).ok());
    ASSERT_TRUE(ref_unfused->Run(inputs, &want_unfused).ok());
    EXPECT_TRUE(want.at(t3).Equals(want_unfused.at(t3)));
  }
}

}  // namespace
}  // namespace sparq
