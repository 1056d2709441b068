// Bias correction (sparq/bias_correction.h): the measured shift, and what it
// does to a quantized layer's mean output error.
#include <gtest/gtest.h>

#include <cmath>

#include "sparq/bias_correction.h"
#include "sparq/calibrate.h"
#include "sparq/executor.h"
#include "sparq/quantize.h"
#include "test_util.h"

namespace sparq {
namespace {

constexpr int64_t kChannels = 8;

// x[n,4,6,6] -> conv(3x3, pads 1, bias `with_bias`) -> y[n,8,6,6]; weights
// spread over [-1, 1] so per-tensor int8 rounds them coarsely.
Model ConvModel(bool with_bias, int64_t kernel = 3) {
  Model m;
  m.opset_imports = {{"", 17}};
  Graph& g = m.graph;
  g.inputs.push_back(testing::FloatInput("x", {{-1, "n"}, {4, ""}, {6, ""}, {6, ""}}));
  g.outputs.push_back(testing::FloatInput("y", {{-1, "n"}, {kChannels, ""}, {6, ""}, {6, ""}}));
  g.initializers["w"] = testing::RandomFloats({kChannels, 4, kernel, kernel}, 3, -1.0f, 1.0f);
  Node conv{"conv", "Conv", "", {"x", "w"}, {"y"}, {}, ""};
  if (kernel == 3) conv.attributes.push_back(Attribute::Ints("pads", {1, 1, 1, 1}));
  if (with_bias) {
    g.initializers["b"] = testing::RandomFloats({kChannels}, 4, -0.5f, 0.5f);
    conv.inputs.push_back("b");
  }
  g.nodes.push_back(conv);
  return m;
}

// Inputs with a large mean (as after a ReLU): the weights' error then shifts
// the output's mean, which is what the correction removes.
std::vector<Tensor> Batches() {
  return {testing::RandomFloats({16, 4, 6, 6}, 11, 1.0f, 3.0f), testing::RandomFloats({8, 4, 6, 6}, 12, 1.0f, 3.0f)};
}

BatchFn Source(const std::vector<Tensor>& batches) {
  auto next = std::make_shared<size_t>(0);
  return [batches, next](TensorMap* b) -> StatusOr<bool> {
    if (*next == batches.size()) return false;
    (*b)["x"] = batches[(*next)++];
    return true;
  };
}

CalibrationTable Table(const Model& m) {
  CalibrationOptions c;
  c.method = CalibrationMethod::kMax;
  auto t = Calibrate(m, Source(Batches()), c);
  EXPECT_TRUE(t.ok()) << t.status().ToString();
  return *t;
}

// Per output channel, the mean of (quantized - float) over every batch.
std::vector<double> MeanError(const Model& f, const Model& q) {
  auto fe = Executor::Create(f, ExecutorOptions{1});
  auto qe = Executor::Create(q, ExecutorOptions{1});
  EXPECT_TRUE(fe.ok() && qe.ok());
  std::vector<double> sum(kChannels, 0.0);
  double count = 0;
  for (const Tensor& x : Batches()) {
    TensorMap fo, qo;
    EXPECT_TRUE((*fe)->Run({{"x", x}}, &fo).ok());
    EXPECT_TRUE((*qe)->Run({{"x", x}}, &qo).ok());
    const Tensor a = fo["y"].ToFloat32(), b = qo["y"].ToFloat32();
    const int64_t plane = a.numel() / (a.dim(0) * kChannels);
    for (int64_t i = 0; i < a.numel(); ++i) sum[(i / plane) % kChannels] += b.data<float>()[i] - a.data<float>()[i];
    count += static_cast<double>(a.numel() / kChannels);
  }
  for (double& s : sum) s /= count;
  return sum;
}

double MaxAbs(const std::vector<double>& v) {
  double m = 0;
  for (double x : v) m = std::max(m, std::fabs(x));
  return m;
}

// With no padding, E[conv(x, dW)] = sum over (ci, k) of dW[c, ci, k] E[x_ci]:
// the measured shift must be exactly that.
TEST(BiasCorrection, MeasuresTheMeanWeightErrorOfA1x1Conv) {
  Model m = ConvModel(true, 1);
  QuantizeOptions q;
  q.per_channel = false;
  auto shift = MeasureBiasCorrection(m, Source(Batches()), q);
  ASSERT_TRUE(shift.ok()) << shift.status().ToString();
  ASSERT_EQ(shift->count("conv"), 1u);
  const std::vector<float>& got = shift->at("conv");
  ASSERT_EQ(got.size(), static_cast<size_t>(kChannels));

  std::vector<double> mean_x(4, 0.0);
  double n = 0;
  for (const Tensor& x : Batches()) {
    for (int64_t i = 0; i < x.numel(); ++i) mean_x[(i / 36) % 4] += x.data<float>()[i];
    n += static_cast<double>(x.dim(0) * 36);
  }
  const Tensor& w = m.graph.initializers.at("w");
  const QuantizedWeight qw = QuantizeWeightSymmetric(w, 0, false);
  const float s = qw.scales.data<float>()[0];
  for (int64_t c = 0; c < kChannels; ++c) {
    double want = 0;
    for (int64_t ci = 0; ci < 4; ++ci) {
      const int64_t k = c * 4 + ci;
      want += (qw.values.data<int8_t>()[k] * s - w.data<float>()[k]) * mean_x[ci] / n;
    }
    EXPECT_NEAR(got[c], want, 1e-5) << "channel " << c;
  }
}

TEST(BiasCorrection, MakesTheMeanOutputErrorOfAQuantizedConvNearZero) {
  for (bool per_channel : {false, true}) {
    SCOPED_TRACE(per_channel ? "per channel" : "per tensor");
    Model m = ConvModel(true);
    const CalibrationTable table = Table(m);
    QuantizeOptions q;
    q.per_channel = per_channel;
    auto plain = QuantizeModel(m, table, q, nullptr);
    ASSERT_TRUE(plain.ok()) << plain.status().ToString();
    auto shift = MeasureBiasCorrection(m, Source(Batches()), q);
    ASSERT_TRUE(shift.ok()) << shift.status().ToString();
    q.bias_correction = *shift;
    QuantizeReport report;
    auto corrected = QuantizeModel(m, table, q, &report);
    ASSERT_TRUE(corrected.ok()) << corrected.status().ToString();
    EXPECT_EQ(report.bias_corrected, 1);
    const double before = MaxAbs(MeanError(m, *plain)), after = MaxAbs(MeanError(m, *corrected));
    EXPECT_GT(before, 1e-3);
    // What is left is the activations' rounding and the bias's int32 step.
    EXPECT_LT(after, 0.2 * before) << "before " << before << ", after " << after;
  }
}

// x[n,6] -> Gemm(transB, bias) -> y[n,8], at opset 18 (ReduceMean's axes
// are an input there), in both INT8 forms.
TEST(BiasCorrection, CorrectsAGemmInQdqAndQOperatorForm) {
  Model m;
  m.opset_imports = {{"", 18}};
  Graph& g = m.graph;
  g.inputs.push_back(testing::FloatInput("x", {{-1, "n"}, {6, ""}}));
  g.outputs.push_back(testing::FloatInput("y", {{-1, "n"}, {kChannels, ""}}));
  g.initializers["w"] = testing::RandomFloats({kChannels, 6}, 5, -1.0f, 1.0f);
  g.initializers["b"] = testing::RandomFloats({kChannels}, 6, -0.5f, 0.5f);
  g.nodes.push_back({"fc", "Gemm", "", {"x", "w", "b"}, {"y"}, {Attribute::Int("transB", 1)}, ""});
  const std::vector<Tensor> data = {testing::RandomFloats({32, 6}, 21, 1.0f, 3.0f), testing::RandomFloats({16, 6}, 22, 1.0f, 3.0f)};
  CalibrationOptions c;
  c.method = CalibrationMethod::kMax;
  auto table = Calibrate(m, Source(data), c);
  ASSERT_TRUE(table.ok()) << table.status().ToString();
  auto mean_error = [&](const Model& q) {
    auto fe = Executor::Create(m, ExecutorOptions{1});
    auto qe = Executor::Create(q, ExecutorOptions{1});
    EXPECT_TRUE(fe.ok() && qe.ok());
    std::vector<double> sum(kChannels, 0.0);
    double rows = 0;
    for (const Tensor& x : data) {
      TensorMap fo, qo;
      EXPECT_TRUE((*fe)->Run({{"x", x}}, &fo).ok());
      EXPECT_TRUE((*qe)->Run({{"x", x}}, &qo).ok());
      for (int64_t i = 0; i < fo["y"].numel(); ++i)
        sum[i % kChannels] += qo["y"].ToFloat32().data<float>()[i] - fo["y"].ToFloat32().data<float>()[i];
      rows += static_cast<double>(x.dim(0));
    }
    for (double& v : sum) v /= rows;
    return MaxAbs(sum);
  };
  for (QuantFormat format : {QuantFormat::kQDQ, QuantFormat::kQOperator}) {
    QuantizeOptions q;
    q.format = format;
    q.per_channel = false;
    auto plain = QuantizeModel(m, *table, q, nullptr);
    ASSERT_TRUE(plain.ok()) << plain.status().ToString();
    auto shift = MeasureBiasCorrection(m, Source(data), q);
    ASSERT_TRUE(shift.ok()) << shift.status().ToString();
    ASSERT_EQ(shift->count("fc"), 1u);
    q.bias_correction = *shift;
    QuantizeReport report;
    auto corrected = QuantizeModel(m, *table, q, &report);
    ASSERT_TRUE(corrected.ok()) << corrected.status().ToString();
    EXPECT_EQ(report.bias_corrected, 1);
    const double before = mean_error(*plain), after = mean_error(*corrected);
    EXPECT_LT(after, 0.3 * before) << (format == QuantFormat::kQDQ ? "qdq" : "qoperator") << ": before " << before
                                   << ", after " << after;
  }
}

TEST(BiasCorrection, AddsABiasToAConvWithout) {
  Model m = ConvModel(false);
  const CalibrationTable table = Table(m);
  QuantizeOptions q;
  q.per_channel = false;
  auto shift = MeasureBiasCorrection(m, Source(Batches()), q);
  ASSERT_TRUE(shift.ok()) << shift.status().ToString();
  q.bias_correction = *shift;
  QuantizeReport report;
  auto corrected = QuantizeModel(m, table, q, &report);
  ASSERT_TRUE(corrected.ok()) << corrected.status().ToString();
  EXPECT_EQ(report.bias_corrected, 1);
  int biases = 0;
  for (const auto& [name, t] : corrected->graph.initializers) biases += t.dtype() == DataType::kInt32;
  EXPECT_EQ(biases, 1);
  QuantizeOptions plain_options = q;
  plain_options.bias_correction.clear();
  auto plain = QuantizeModel(m, table, plain_options, nullptr);
  ASSERT_TRUE(plain.ok()) << plain.status().ToString();
  EXPECT_LT(MaxAbs(MeanError(m, *corrected)), 0.2 * MaxAbs(MeanError(m, *plain)));
}

TEST(BiasCorrection, SkipsLayersThatStayFloat) {
  Model m = ConvModel(true);
  const CalibrationTable table = Table(m);
  QuantizeOptions q;
  auto shift = MeasureBiasCorrection(m, Source(Batches()), q);
  ASSERT_TRUE(shift.ok()) << shift.status().ToString();
  q.bias_correction = *shift;
  q.layers = {{"conv", Precision::kFP32}};
  QuantizeReport report;
  auto out = QuantizeModel(m, table, q, &report);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(report.bias_corrected, 0);
  EXPECT_EQ(out->graph.initializers.at("b").data<float>()[0], m.graph.initializers.at("b").data<float>()[0]);
}

TEST(BiasCorrection, RejectsACorrectionForAnotherModel) {
  Model m = ConvModel(true);
  const CalibrationTable table = Table(m);
  QuantizeOptions q;
  q.bias_correction = {{"no_such_layer", std::vector<float>(kChannels, 0.1f)}};
  auto out = QuantizeModel(m, table, q, nullptr);
  EXPECT_EQ(out.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(out.status().message().find("no_such_layer"), std::string::npos) << out.status().ToString();
  q.bias_correction = {{"conv", std::vector<float>(3, 0.1f)}};
  out = QuantizeModel(m, table, q, nullptr);
  EXPECT_EQ(out.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(out.status().message().find("8 output channels"), std::string::npos) << out.status().ToString();
}

// A BatchNorm-folded dead channel: weights ~1e-9 and a bias of 0.7. At scale
// s_x * s_w the bias does not fit int32; the channel's weight scale widens so
// that the bias survives (it was clamped to ~0 before), in both forms.
TEST(Int32Bias, TinyWeightsKeepTheirBias) {
  for (QuantFormat format : {QuantFormat::kQDQ, QuantFormat::kQOperator}) {
    Model m = ConvModel(true);
    Tensor w = m.graph.initializers.at("w").Clone();
    const int64_t per_channel = w.numel() / kChannels;
    for (int64_t i = 0; i < per_channel; ++i) w.data<float>()[i] *= 1e-9f;  // channel 0
    m.graph.initializers["w"] = w;
    Tensor b = m.graph.initializers.at("b").Clone();
    b.data<float>()[0] = 0.7f;
    m.graph.initializers["b"] = b;
    const CalibrationTable table = Table(m);
    QuantizeOptions q;
    q.format = format;
    auto out = QuantizeModel(m, table, q, nullptr);
    ASSERT_TRUE(out.ok()) << out.status().ToString();
    const std::vector<double> err = MeanError(m, *out);
    EXPECT_LT(std::fabs(err[0]), 0.01) << (format == QuantFormat::kQDQ ? "qdq" : "qoperator");
  }
}

// max_samples stops at a batch boundary: 16 samples = the first batch only.
TEST(BiasCorrection, MaxSamplesReadsOnlyThatMuchData) {
  Model m = ConvModel(true);
  const std::vector<Tensor> all = Batches();
  BiasCorrectionOptions first;
  first.max_samples = 16;
  auto limited = MeasureBiasCorrection(m, Source(all), QuantizeOptions{}, first);
  auto one = MeasureBiasCorrection(m, Source({all[0]}), QuantizeOptions{});
  auto both = MeasureBiasCorrection(m, Source(all), QuantizeOptions{});
  ASSERT_TRUE(limited.ok() && one.ok() && both.ok());
  EXPECT_EQ(limited->at("conv"), one->at("conv"));
  EXPECT_NE(limited->at("conv"), both->at("conv"));
  first.max_samples = -1;
  EXPECT_EQ(MeasureBiasCorrection(m, Source(all), QuantizeOptions{}, first).status().code(),
            StatusCode::kInvalidArgument);
}

TEST(BiasCorrection, NoDataIsAnError) {
  auto shift = MeasureBiasCorrection(ConvModel(true), Source({}), QuantizeOptions{});
  EXPECT_EQ(shift.status().code(), StatusCode::kInvalidArgument) << shift.status().ToString();
}

}  // namespace
}  // namespace sparq
