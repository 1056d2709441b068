// Tests of the reference RNN, GRU and LSTM kernels (kernels/ref/recurrent.cc):
// one- and two-step cases checked against the ONNX equations written out by
// hand, bidirectional = forward and reverse side by side, sequence_lens
// shorter than the sequence, layout 1 = layout 0 transposed, activation
// attributes, thread-count determinism and errors that name the node.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "kernels/op_test_util.h"
#include "kernels/parallel.h"
#include "kernels/registry.h"
#include "sparq/graph.h"
#include "sparq/tensor.h"

namespace sparq {
namespace {

using testing::OpNode;
using testing::RunRefKernel;

const Tensor kAbsent;  // an absent optional input

StatusOr<std::vector<Tensor>> RunRnn(const std::string& op, int opset, const std::vector<Tensor>& inputs,
                                     std::vector<Attribute> attrs, size_t num_outputs = 2, ThreadPool* pool = nullptr) {
  return RunRefKernel(OpNode(op, std::move(attrs), "my_rnn"), opset, inputs, num_outputs, pool);
}

std::vector<double> Values(const Tensor& t) {
  std::vector<double> v;
  for (int64_t i = 0; i < t.numel(); ++i) v.push_back(t.GetAsDouble(i));
  return v;
}

void ExpectNear(const std::vector<double>& got, const std::vector<double>& want, double tol = 1e-6) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], tol) << "element " << i;
}

Tensor Random(Shape shape, uint32_t seed, float scale = 0.5f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-scale, scale);
  Tensor t(DataType::kFloat32, std::move(shape));
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = u(rng);
  return t;
}

Attribute Strings(std::string name, std::vector<std::string> values) {
  Attribute a;
  a.name = std::move(name);
  a.kind = Attribute::Kind::kStrings;
  a.strings = std::move(values);
  return a;
}

double Sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

// [a, b, c] -> [b, a, c] (layout 0 <-> 1 of X and of the states).
Tensor Swap01(const Tensor& t) {
  Tensor out(t.dtype(), {t.dim(1), t.dim(0), t.dim(2)});
  for (int64_t a = 0; a < t.dim(0); ++a)
    for (int64_t b = 0; b < t.dim(1); ++b)
      for (int64_t c = 0; c < t.dim(2); ++c)
        out.data<float>()[(b * t.dim(0) + a) * t.dim(2) + c] = t.data<float>()[(a * t.dim(1) + b) * t.dim(2) + c];
  return out;
}

TEST(RecurrentKernels, RnnTwoStepsByHand) {
  // input_size 1, hidden_size 1: h1 = tanh(0.5*1 + 0.1), h2 = tanh(0.5*2 + 0.25*h1 + 0.1 - 0.2).
  Tensor x = Tensor::FromVector<float>({2, 1, 1}, {1, 2});
  Tensor w = Tensor::FromVector<float>({1, 1, 1}, {0.5f});
  Tensor r = Tensor::FromVector<float>({1, 1, 1}, {0.25f});
  Tensor b = Tensor::FromVector<float>({1, 2}, {0.1f, -0.2f});
  auto out = RunRnn("RNN", 14, {x, w, r, b}, {Attribute::Int("hidden_size", 1)});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  const double h1 = std::tanh(0.5 + 0.1f - 0.2f), h2 = std::tanh(1.0 + 0.25 * h1 + 0.1f - 0.2f);
  EXPECT_EQ((*out)[0].shape(), (Shape{2, 1, 1, 1}));
  EXPECT_EQ((*out)[1].shape(), (Shape{1, 1, 1}));
  ExpectNear(Values((*out)[0]), {h1, h2});
  ExpectNear(Values((*out)[1]), {h2});
}

TEST(RecurrentKernels, RnnAffineActivationTakesAlphaAndBeta) {
  // Affine(x) = 2x + 1 with no recurrence weight: h_t = 2 * 3 * x_t + 1.
  Tensor x = Tensor::FromVector<float>({2, 1, 1}, {1, -1});
  Tensor w = Tensor::FromVector<float>({1, 1, 1}, {3});
  Tensor r = Tensor::FromVector<float>({1, 1, 1}, {0});
  auto out = RunRnn("RNN", 7, {x, w, r},
                    {Attribute::Int("hidden_size", 1), Strings("activations", {"Affine"}),
                     Attribute::Floats("activation_alpha", {2}), Attribute::Floats("activation_beta", {1})});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  ExpectNear(Values((*out)[0]), {7, -5});
}

TEST(RecurrentKernels, ActivationDefaultsAreTheOnnxOperatorsDefaults) {
  // h_t = act(x_t): ThresholdedRelu's alpha defaults to 1 (onnxruntime uses 0),
  // LeakyRelu's to 0.01.
  Tensor x = Tensor::FromVector<float>({3, 1, 1}, {0.5f, 2.0f, -1.0f});
  Tensor w = Tensor::FromVector<float>({1, 1, 1}, {1});
  Tensor r = Tensor::FromVector<float>({1, 1, 1}, {0});
  auto thresholded = RunRnn("RNN", 14, {x, w, r}, {Strings("activations", {"ThresholdedRelu"})});
  ASSERT_TRUE(thresholded.ok()) << thresholded.status().ToString();
  ExpectNear(Values((*thresholded)[0]), {0, 2, 0});
  auto leaky = RunRnn("RNN", 14, {x, w, r}, {Strings("activations", {"leakyrelu"})});  // names ignore case
  ASSERT_TRUE(leaky.ok()) << leaky.status().ToString();
  ExpectNear(Values((*leaky)[0]), {0.5, 2, -0.01});
}

TEST(RecurrentKernels, LstmOneStepByHand) {
  // input_size 1, hidden_size 1, gates i, o, f, c; peepholes i, o, f; initial h and c.
  const float x0 = 0.7f, h0 = 0.2f, c0 = -0.4f;
  const std::vector<float> wv{0.1f, 0.2f, 0.3f, 0.4f}, rv{-0.5f, 0.6f, -0.7f, 0.8f};
  const std::vector<float> bv{0.01f, 0.02f, 0.03f, 0.04f, 0.05f, 0.06f, 0.07f, 0.08f};
  const std::vector<float> pv{0.3f, -0.2f, 0.1f};
  Tensor x = Tensor::FromVector<float>({1, 1, 1}, {x0});
  auto out = RunRnn("LSTM", 14,
                    {x, Tensor::FromVector<float>({1, 4, 1}, wv), Tensor::FromVector<float>({1, 4, 1}, rv),
                     Tensor::FromVector<float>({1, 8}, bv), kAbsent, Tensor::FromVector<float>({1, 1, 1}, {h0}),
                     Tensor::FromVector<float>({1, 1, 1}, {c0}), Tensor::FromVector<float>({1, 3}, pv)},
                    {Attribute::Int("hidden_size", 1)}, 3);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  auto pre = [&](int g) { return double(wv[g]) * x0 + double(rv[g]) * h0 + double(bv[g]) + double(bv[4 + g]); };
  const double i = Sigmoid(pre(0) + double(pv[0]) * c0);
  const double f = Sigmoid(pre(2) + double(pv[2]) * c0);
  const double c = std::tanh(pre(3));
  const double c1 = f * c0 + i * c;
  const double o = Sigmoid(pre(1) + double(pv[1]) * c1);
  const double h1 = o * std::tanh(c1);
  ExpectNear(Values((*out)[0]), {h1});
  ExpectNear(Values((*out)[1]), {h1});
  ExpectNear(Values((*out)[2]), {c1});
}

TEST(RecurrentKernels, LstmInputForgetAndClip) {
  // input_forget couples f = 1 - i; clip 0.5 bounds every gate's input.
  const float x0 = 2.0f, c0 = 1.0f;
  const std::vector<float> wv{1.0f, 0.1f, 5.0f, -3.0f};
  Tensor x = Tensor::FromVector<float>({1, 1, 1}, {x0});
  auto out =
      RunRnn("LSTM", 7,
             {x, Tensor::FromVector<float>({1, 4, 1}, wv), Tensor::FromVector<float>({1, 4, 1}, {0, 0, 0, 0}), kAbsent,
              kAbsent, kAbsent, Tensor::FromVector<float>({1, 1, 1}, {c0})},
             {Attribute::Int("hidden_size", 1), Attribute::Int("input_forget", 1), Attribute::Float("clip", 0.5f)}, 3);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  const double i = Sigmoid(0.5), f = 1.0 - i, c = std::tanh(-0.5);
  const double c1 = f * c0 + i * c;
  const double h1 = Sigmoid(0.2) * std::tanh(c1);  // o's input 0.1 * 2 is inside the clip
  ExpectNear(Values((*out)[1]), {h1});
  ExpectNear(Values((*out)[2]), {c1});
}

TEST(RecurrentKernels, GruOneStepBothResetPlacements) {
  // hidden_size 1: the two placements of the reset gate differ by Rbh.
  const float x0 = 0.5f, h0 = 0.3f;
  const std::vector<float> wv{0.2f, -0.4f, 0.6f}, rv{0.3f, 0.5f, -0.7f};
  const std::vector<float> bv{0.1f, 0.2f, 0.3f, -0.1f, 0.4f, 0.5f};
  for (int lbr : {0, 1}) {
    auto out = RunRnn("GRU", 14,
                      {Tensor::FromVector<float>({1, 1, 1}, {x0}), Tensor::FromVector<float>({1, 3, 1}, wv),
                       Tensor::FromVector<float>({1, 3, 1}, rv), Tensor::FromVector<float>({1, 6}, bv), kAbsent,
                       Tensor::FromVector<float>({1, 1, 1}, {h0})},
                      {Attribute::Int("hidden_size", 1), Attribute::Int("linear_before_reset", lbr)});
    ASSERT_TRUE(out.ok()) << out.status().ToString();
    const double z = Sigmoid(double(wv[0]) * x0 + double(rv[0]) * h0 + bv[0] + bv[3]);
    const double r = Sigmoid(double(wv[1]) * x0 + double(rv[1]) * h0 + bv[1] + bv[4]);
    const double from_h = lbr ? r * (double(rv[2]) * h0 + bv[5]) : double(rv[2]) * (r * h0) + bv[5];
    const double cand = std::tanh(double(wv[2]) * x0 + bv[2] + from_h);
    const double h1 = (1 - z) * cand + z * h0;
    ExpectNear(Values((*out)[1]), {h1}, 1e-6);
  }
}

// Runs `op` with random weights on X [seq 4, batch 3, input 2], hidden 3, in
// `direction`; returns {Y, Y_h}.
std::vector<Tensor> RunRandom(const std::string& op, const std::string& direction, const Tensor& x,
                              const Tensor& seq_lens = Tensor()) {
  const int gates = op == "LSTM" ? 4 : op == "GRU" ? 3 : 1;
  const int64_t dirs = direction == "bidirectional" ? 2 : 1;
  Tensor w = Random({dirs, gates * 3, 2}, 1), r = Random({dirs, gates * 3, 3}, 2), b = Random({dirs, 2 * gates * 3}, 3);
  Tensor h0 = Random({dirs, 3, 3}, 4);
  auto out = RunRnn(op, 14, {x, w, r, b, seq_lens, h0},
                    {Attribute::Int("hidden_size", 3), Attribute::String("direction", direction)});
  EXPECT_TRUE(out.ok()) << out.status().ToString();
  return out.ok() ? *out : std::vector<Tensor>{};
}

// Slice [dir] of a [dirs, ...] tensor's weights, for running one direction alone.
Tensor Direction(const Tensor& t, int64_t d) {
  Shape s = t.shape();
  const int64_t per = t.numel() / s[0];
  s[0] = 1;
  Tensor out(t.dtype(), s);
  for (int64_t i = 0; i < per; ++i) out.data<float>()[i] = t.data<float>()[d * per + i];
  return out;
}

TEST(RecurrentKernels, BidirectionalIsForwardAndReverseSideBySide) {
  for (const char* op : {"RNN", "GRU", "LSTM"}) {
    SCOPED_TRACE(op);
    const int gates = std::string(op) == "LSTM" ? 4 : std::string(op) == "GRU" ? 3 : 1;
    Tensor x = Random({4, 3, 2}, 9, 1.0f);
    Tensor w = Random({2, gates * 3, 2}, 1), r = Random({2, gates * 3, 3}, 2), b = Random({2, 2 * gates * 3}, 3);
    Tensor h0 = Random({2, 3, 3}, 4);
    auto both = RunRnn(op, 14, {x, w, r, b, kAbsent, h0},
                       {Attribute::Int("hidden_size", 3), Attribute::String("direction", "bidirectional")});
    ASSERT_TRUE(both.ok()) << both.status().ToString();
    ASSERT_EQ((*both)[0].shape(), (Shape{4, 2, 3, 3}));
    for (int64_t d = 0; d < 2; ++d) {
      auto one =
          RunRnn(op, 14, {x, Direction(w, d), Direction(r, d), Direction(b, d), kAbsent, Direction(h0, d)},
                 {Attribute::Int("hidden_size", 3), Attribute::String("direction", d == 0 ? "forward" : "reverse")});
      ASSERT_TRUE(one.ok()) << one.status().ToString();
      for (int64_t t = 0; t < 4; ++t)
        for (int64_t i = 0; i < 9; ++i)
          EXPECT_EQ((*both)[0].data<float>()[(t * 2 + d) * 9 + i], (*one)[0].data<float>()[t * 9 + i]);
      for (int64_t i = 0; i < 9; ++i) EXPECT_EQ((*both)[1].data<float>()[d * 9 + i], (*one)[1].data<float>()[i]);
    }
  }
}

TEST(RecurrentKernels, SequenceLensShorterThanTheSequence) {
  // Batch entry 1 has length 2 of 4: its Y is zero from step 2 on; Y_h is its
  // step-1 output (forward) or its step-0 output (reverse, which starts at
  // step 1); each entry matches a run of that entry alone, cut to its length.
  for (const char* op : {"RNN", "GRU", "LSTM"}) {
    for (const char* direction : {"forward", "reverse"}) {
      SCOPED_TRACE(std::string(op) + " " + direction);
      Tensor x = Random({4, 3, 2}, 9, 1.0f);
      Tensor lens = Tensor::FromVector<int32_t>({3}, {4, 2, 0});
      std::vector<Tensor> out = RunRandom(op, direction, x, lens);
      ASSERT_EQ(out.size(), 2u);
      const float* y = out[0].data<float>();
      const float* y_h = out[1].data<float>();
      for (int64_t t = 2; t < 4; ++t)
        for (int64_t k = 0; k < 3; ++k) EXPECT_EQ(y[(t * 3 + 1) * 3 + k], 0.0f);
      for (int64_t t = 0; t < 4; ++t)
        for (int64_t k = 0; k < 3; ++k) EXPECT_EQ(y[(t * 3 + 2) * 3 + k], 0.0f) << "length 0 writes no Y";
      const int64_t last = std::string(direction) == "forward" ? 1 : 0;
      for (int64_t k = 0; k < 3; ++k) EXPECT_EQ(y_h[3 + k], y[(last * 3 + 1) * 3 + k]);
      // Length 0 gives a Y_h of zeros (as onnxruntime does), not the initial state.
      for (int64_t k = 0; k < 3; ++k) EXPECT_EQ(y_h[6 + k], 0.0f);
      // Entry 1 alone on its first two steps, without sequence_lens.
      std::vector<Tensor> full = RunRandom(op, direction, x);
      Tensor x_short(DataType::kFloat32, {2, 3, 2});
      for (int64_t i = 0; i < x_short.numel(); ++i) x_short.data<float>()[i] = x.data<float>()[i];
      std::vector<Tensor> cut = RunRandom(op, direction, x_short);
      ASSERT_EQ(cut.size(), 2u);
      for (int64_t t = 0; t < 2; ++t)
        for (int64_t k = 0; k < 3; ++k) EXPECT_EQ(y[(t * 3 + 1) * 3 + k], cut[0].data<float>()[(t * 3 + 1) * 3 + k]);
      // Entry 0 runs the whole sequence: as without sequence_lens.
      for (int64_t k = 0; k < 3; ++k) EXPECT_EQ(y_h[k], full[1].data<float>()[k]);
    }
  }
}

TEST(RecurrentKernels, LayoutOneIsLayoutZeroTransposed) {
  Tensor x = Random({4, 3, 2}, 9, 1.0f);
  Tensor w = Random({2, 12, 2}, 1), r = Random({2, 12, 3}, 2);
  Tensor h0 = Random({2, 3, 3}, 4), c0 = Random({2, 3, 3}, 5);
  std::vector<Attribute> attrs{Attribute::Int("hidden_size", 3), Attribute::String("direction", "bidirectional")};
  auto l0 = RunRnn("LSTM", 14, {x, w, r, kAbsent, kAbsent, h0, c0}, attrs, 3);
  attrs.push_back(Attribute::Int("layout", 1));
  auto l1 = RunRnn("LSTM", 14, {Swap01(x), w, r, kAbsent, kAbsent, Swap01(h0), Swap01(c0)}, attrs, 3);
  ASSERT_TRUE(l0.ok()) << l0.status().ToString();
  ASSERT_TRUE(l1.ok()) << l1.status().ToString();
  ASSERT_EQ((*l1)[0].shape(), (Shape{3, 4, 2, 3}));  // [batch, seq, dirs, hidden]
  ASSERT_EQ((*l1)[1].shape(), (Shape{3, 2, 3}));     // [batch, dirs, hidden]
  for (int64_t t = 0; t < 4; ++t)
    for (int64_t d = 0; d < 2; ++d)
      for (int64_t b = 0; b < 3; ++b)
        for (int64_t k = 0; k < 3; ++k)
          EXPECT_EQ((*l0)[0].data<float>()[((t * 2 + d) * 3 + b) * 3 + k],
                    (*l1)[0].data<float>()[((b * 4 + t) * 2 + d) * 3 + k]);
  EXPECT_TRUE(Swap01((*l0)[1]).Equals((*l1)[1]));
  EXPECT_TRUE(Swap01((*l0)[2]).Equals((*l1)[2]));
}

TEST(RecurrentKernels, OptionalOutputsMayBeLeftOut) {
  Tensor x = Random({4, 3, 2}, 9, 1.0f);
  Node node = OpNode("LSTM", {Attribute::Int("hidden_size", 3)}, "my_rnn");
  node.inputs = {"x", "w", "r"};
  node.outputs = {"", "", "y_c"};
  Tensor w = Random({1, 12, 2}, 1), r = Random({1, 12, 3}, 2);
  OpContext ctx(node, 14, {&x, &w, &r}, nullptr);
  const KernelDef* def = KernelRegistry::Reference().Find("LSTM", "", 14);
  ASSERT_NE(def, nullptr);
  ASSERT_TRUE(def->fn(ctx).ok());
  EXPECT_FALSE(ctx.outputs()[0].defined());
  EXPECT_EQ(ctx.outputs()[2].shape(), (Shape{1, 3, 3}));
}

TEST(RecurrentKernels, SameBitsForAnyThreadCount) {
  Tensor x = Random({5, 7, 2}, 9, 1.0f);
  Tensor w = Random({2, 9, 2}, 1), r = Random({2, 9, 3}, 2);
  std::vector<Attribute> attrs{Attribute::Int("hidden_size", 3), Attribute::String("direction", "bidirectional")};
  auto one = RunRnn("GRU", 14, {x, w, r}, attrs, 2, nullptr);
  ThreadPool pool(3);
  auto three = RunRnn("GRU", 14, {x, w, r}, attrs, 2, &pool);
  ASSERT_TRUE(one.ok() && three.ok());
  EXPECT_TRUE((*one)[0].Equals((*three)[0]));
  EXPECT_TRUE((*one)[1].Equals((*three)[1]));
}

TEST(RecurrentKernels, Float64AndFloat16) {
  Tensor x = Random({3, 2, 2}, 9, 1.0f);
  Tensor w = Random({1, 3, 2}, 1), r = Random({1, 3, 3}, 2);
  std::vector<Attribute> attrs{Attribute::Int("hidden_size", 3)};
  auto f32 = RunRnn("RNN", 14, {x, w, r}, attrs);
  auto f64 = RunRnn("RNN", 14,
                    {x.CastTo(DataType::kFloat64), w.CastTo(DataType::kFloat64), r.CastTo(DataType::kFloat64)}, attrs);
  auto f16 = RunRnn("RNN", 14,
                    {x.CastTo(DataType::kFloat16), w.CastTo(DataType::kFloat16), r.CastTo(DataType::kFloat16)}, attrs);
  ASSERT_TRUE(f32.ok() && f64.ok() && f16.ok()) << f16.status().ToString();
  EXPECT_EQ((*f64)[0].dtype(), DataType::kFloat64);
  EXPECT_EQ((*f16)[0].dtype(), DataType::kFloat16);
  ExpectNear(Values((*f64)[0]), Values((*f32)[0]), 1e-6);
  ExpectNear(Values((*f16)[0]), Values((*f32)[0]), 5e-3);
}

// Expects `st` to be an error of `code` that names the node and contains `text`.
void ExpectError(const Status& st, StatusCode code, const std::string& text) {
  EXPECT_EQ(st.code(), code) << st.ToString();
  EXPECT_NE(st.message().find("my_rnn"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find(text), std::string::npos) << st.message();
}

TEST(RecurrentKernels, BadInputsAreErrorsThatNameTheNode) {
  Tensor x = Random({4, 3, 2}, 9);
  Tensor w = Random({1, 12, 2}, 1), r = Random({1, 12, 3}, 2);
  const Attribute hidden = Attribute::Int("hidden_size", 3);
  auto status = [&](const std::string& op, int opset, std::vector<Tensor> inputs, std::vector<Attribute> attrs,
                    size_t outputs = 2) {
    auto out = RunRnn(op, opset, inputs, std::move(attrs), outputs);
    return out.ok() ? Status::OK() : out.status();
  };
  ExpectError(status("LSTM", 14, {x, Random({1, 12, 5}, 1), r}, {hidden}), StatusCode::kInvalidArgument,
              "input W has shape [1, 12, 5]");
  ExpectError(status("GRU", 14, {x, w, r}, {hidden}), StatusCode::kInvalidArgument, "input W");  // 4 gates' rows
  ExpectError(status("LSTM", 14, {x, w, r}, {Attribute::Int("hidden_size", 4)}), StatusCode::kInvalidArgument,
              "hidden_size is 4");
  ExpectError(status("LSTM", 14, {x, w, r}, {hidden, Attribute::String("direction", "sideways")}),
              StatusCode::kInvalidArgument, "direction must be");
  ExpectError(status("LSTM", 7, {x, w, r}, {hidden, Attribute::Int("layout", 1)}), StatusCode::kInvalidArgument,
              "layout exists from opset 14");
  ExpectError(status("LSTM", 14, {x, w, r}, {hidden, Attribute::Float("clip", -1)}), StatusCode::kInvalidArgument,
              "clip must be positive");
  ExpectError(status("LSTM", 14, {x, w, r, kAbsent, Tensor::FromVector<int32_t>({3}, {4, 5, 1})}, {hidden}),
              StatusCode::kInvalidArgument, "sequence_lens[1] is 5");
  ExpectError(status("LSTM", 14, {x, w, r, kAbsent, Tensor::FromVector<float>({3}, {4, 4, 1})}, {hidden}),
              StatusCode::kInvalidArgument, "sequence_lens has type float32");
  ExpectError(status("LSTM", 14, {x, w, r, kAbsent, kAbsent, Random({1, 2, 3}, 4)}, {hidden}),
              StatusCode::kInvalidArgument, "input initial_h has shape [1, 2, 3]");
  ExpectError(status("LSTM", 14, {x, w, r, kAbsent, kAbsent, kAbsent, kAbsent, Random({1, 6}, 4)}, {hidden}),
              StatusCode::kInvalidArgument, "input P has shape [1, 6]");
  ExpectError(status("LSTM", 14, {x, w, r.CastTo(DataType::kFloat64)}, {hidden}), StatusCode::kInvalidArgument,
              "input R has type float64");
  ExpectError(status("LSTM", 14, {Random({4, 3}, 9), w, r}, {hidden}), StatusCode::kInvalidArgument,
              "input X must be 3-D");
  ExpectError(status("LSTM", 14, {x.CastTo(DataType::kInt32), w, r}, {hidden}), StatusCode::kNotSupported,
              "input X has type int32");
  ExpectError(status("RNN", 14, {x, Random({1, 3, 2}, 1), Random({1, 3, 3}, 2)}, {hidden}, 3),
              StatusCode::kInvalidArgument, "RNN has at most 2");
  Attribute acts = Strings("activations", {"Sigmoid", "Tanh"});
  ExpectError(status("LSTM", 14, {x, w, r}, {hidden, acts}), StatusCode::kInvalidArgument,
              "'activations' has 2 names, expected 3");
  acts.strings = {"Sigmoid", "Tanh", "Swish"};
  ExpectError(status("LSTM", 14, {x, w, r}, {hidden, acts}), StatusCode::kNotSupported, "activation 'Swish'");
  ExpectError(status("LSTM", 14, {x, w}, {hidden}), StatusCode::kInvalidArgument, "input 2 is required");
}

}  // namespace
}  // namespace sparq
