// Histograms, threshold searches, the calibration loop and its files.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "sparq/calibrate.h"
#include "sparq/executor.h"
#include "sparq/file_io.h"
#include "sparq/onnx_io.h"
#include "test_util.h"

namespace sparq {
namespace {

std::vector<float> Gaussian(size_t n, uint32_t seed, float sigma = 1.0f) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> d(0.0f, sigma);
  std::vector<float> v(n);
  for (auto& x : v) x = d(gen);
  return v;
}

TEST(AbsHistogram, RangeIsAPowerOfTwoAboveTheDataAndGrowthKeepsCounts) {
  AbsHistogram h(8);
  std::vector<float> a = {0.5f, -1.0f, 2.0f, -3.9f, 4.0f};
  h.Add(a.data(), a.size());
  EXPECT_EQ(h.range(), 8.0);  // strictly above the max 4: no value sits on the range
  EXPECT_EQ(h.counts(), (std::vector<int64_t>{1, 1, 1, 1, 1, 0, 0, 0}));
  std::vector<float> b = {-13.0f};  // needs 8 -> 16: one doubling
  h.Add(b.data(), b.size());
  EXPECT_EQ(h.range(), 16.0);
  EXPECT_EQ(h.total(), 6);
  // Old bins [0,1) [1,2) land in new bin 0 ([0,2)), [2,3) [3,4) in bin 1, [4,5) in bin 2.
  EXPECT_EQ(h.counts(), (std::vector<int64_t>{2, 2, 1, 0, 0, 0, 1, 0}));
  AbsHistogram small(4);
  std::vector<float> c = {0.3f};
  small.Add(c.data(), c.size());
  EXPECT_EQ(small.range(), 0.5);
}

// Regression (issue 15: between calibration batches of 8 and 32, 84 of the
// PP-OCR recognizer's 410 KL thresholds moved by more than 5% of their max):
// the grid was set by the first batch's max, then doubled, so it depended on
// how the data was batched. The same values in any batching give the same
// histogram, hence the same table, for every histogram method.
TEST(AbsHistogram, SameCountsForAnyBatching) {
  std::vector<float> v = Gaussian(4096, 5, 0.5f);
  for (size_t i = 0; i < v.size(); i += 97) v[i] *= 9.0f;  // a tail that grows the range batch after batch
  AbsHistogram whole(2048), pieces(2048);
  whole.Add(v.data(), static_cast<int64_t>(v.size()));
  for (size_t i = 0; i < v.size(); i += 100) pieces.Add(v.data() + i, static_cast<int64_t>(std::min<size_t>(100, v.size() - i)));
  EXPECT_EQ(whole.range(), pieces.range());
  EXPECT_EQ(whole.counts(), pieces.counts());
}

TEST(AbsHistogram, AllZerosStayInBinZero) {
  AbsHistogram h(16);
  std::vector<float> z(10, 0.0f), one = {1.0f};
  h.Add(z.data(), z.size());
  EXPECT_EQ(h.range(), 0.0);
  h.Add(one.data(), 1);
  EXPECT_EQ(h.counts()[0], 10);
  EXPECT_EQ(h.counts()[8], 1);  // 1 in a range of 2: bin 8 of 16
}

TEST(Thresholds, PercentileOfUniformData) {
  std::vector<int64_t> counts(1000, 10);
  AbsHistogram h = AbsHistogram::FromCounts(counts, 1.0);
  EXPECT_NEAR(PercentileThreshold(h, 99.0), 0.99, 1e-9);
  EXPECT_NEAR(PercentileThreshold(h, 100.0), 1.0, 1e-9);
}

// Regression (issue 15, text recognizer: KL thresholds at 13-31% of max broke
// the model): 99% of the values near zero and a sparse 1% tail up to 10 that
// carries signal. Unguarded KL clips at the smallest candidate (range / 16);
// the guard only allows thresholds whose squared error is no worse than max's.
TEST(Thresholds, KlCannotClipASparseLongTailFarBelowItsRange) {
  std::vector<float> v = Gaussian(200000, 3, 0.1f);
  std::mt19937 gen(4);
  std::uniform_real_distribution<float> tail(0.0f, 10.0f);
  for (int i = 0; i < 2000; ++i) v.push_back(tail(gen));
  AbsHistogram h(2048);
  h.Add(v.data(), v.size());
  const double t = KlThreshold(h);
  EXPECT_GT(t, 8.0) << "KL clipped the tail";
  EXPECT_LE(t, h.range());
}

TEST(Thresholds, KlClipsOutliersOfAGaussian) {
  std::vector<float> v = Gaussian(200000, 1);
  v.push_back(40.0f);  // one far outlier stretches the range
  AbsHistogram h(2048);
  h.Add(v.data(), v.size());
  double t = KlThreshold(h);
  EXPECT_GT(t, 2.0);   // keeps the bulk of the distribution
  EXPECT_LT(t, 10.0);  // but not the outlier
  // MSE weighs the squared error of the one outlier against the rounding
  // error of 200000 values, so it clips less than KL but still clips.
  double mse = MseThreshold(h);
  EXPECT_GT(mse, t);
  EXPECT_LT(mse, 40.0);
}

// The KL search, transcribed directly from its description in
// calibrate/histogram.cc (P and Q built, normalized and smoothed per
// candidate): KlThreshold computes the same thing without the vectors and
// must return the same bits.
double KlThresholdDirect(const AbsHistogram& h, int quant_levels = 128) {
  const int nbins = h.bins();
  if (h.range() == 0.0 || h.total() == 0) return 0.0;
  std::vector<int64_t> hist = h.counts();
  if (nbins > 1 && hist[1] > 0) hist[0] = std::min(hist[0], hist[1]);
  std::vector<double> beyond(nbins + 1, 0.0);
  for (int i = nbins - 1; i >= 0; --i) beyond[i] = beyond[i + 1] + static_cast<double>(hist[i]);
  auto squared_error = [&](double t) {
    const double s = t / (quant_levels - 1);
    double err = 0.0;
    for (int b = 0; b < nbins; ++b) {
      const int64_t c = h.counts()[b];
      if (c == 0) continue;
      const double x = (b + 0.5) * h.bin_width();
      const double xq = x >= t ? t : s * std::nearbyint(x / s);
      err += static_cast<double>(c) * (x - xq) * (x - xq);
    }
    return err;
  };
  auto normalize = [](std::vector<double>& p) {
    double sum = 0.0;
    for (double v : p) sum += v;
    if (sum <= 0.0) return false;
    for (double& v : p) v /= sum;
    return true;
  };
  auto smooth = [](std::vector<double>& p) {
    size_t zeros = 0;
    for (double v : p) zeros += v == 0.0;
    if (zeros == p.size()) return false;
    const double eps1 = 1e-4 * static_cast<double>(zeros) / static_cast<double>(p.size() - zeros);
    for (double& v : p) {
      v = v == 0.0 ? 1e-4 : v - eps1;
      if (v <= 0.0) return false;
    }
    return true;
  };
  int last = nbins - 1;
  while (last > 0 && h.counts()[last] == 0) --last;
  const double max_error = squared_error((last + 1) * h.bin_width());
  double best_kl = std::numeric_limits<double>::infinity();
  int best_i = nbins;
  for (int i = quant_levels; i <= nbins; ++i) {
    if (i < nbins && squared_error(i * h.bin_width()) > max_error) continue;
    std::vector<double> p(hist.begin(), hist.begin() + i), q(i, 0.0);
    p[i - 1] += beyond[i];
    const int merged = i / quant_levels;
    for (int j = 0; j < quant_levels; ++j) {
      const int start = j * merged, stop = j == quant_levels - 1 ? i : start + merged;
      double sum = 0.0;
      int nonzero = 0;
      for (int k = start; k < stop; ++k) sum += static_cast<double>(hist[k]), nonzero += hist[k] != 0;
      for (int k = start; k < stop && nonzero > 0; ++k)
        if (hist[k] != 0) q[k] = sum / nonzero;
    }
    if (!normalize(p) || !normalize(q) || !smooth(p) || !smooth(q)) continue;
    double kl = 0.0;
    for (int k = 0; k < i; ++k) kl += p[k] * std::log(p[k] / q[k]);
    if (kl < best_kl) best_kl = kl, best_i = i;
  }
  return best_i * h.bin_width();
}

TEST(Thresholds, KlEqualsItsDirectTranscriptionBitForBit) {
  std::mt19937 gen(11);
  for (int trial = 0; trial < 12; ++trial) {
    // Gaussians, one-sided ReLU-like data with zeros, long sparse tails,
    // discrete steps (empty bins), and a few bins only.
    std::vector<float> v = Gaussian(20000 + 5000 * trial, 100 + trial, 0.5f + 0.25f * trial);
    if (trial % 3 == 1)
      for (float& x : v) x = std::max(x, 0.0f);
    if (trial % 4 == 2)
      for (float& x : v) x = std::round(x * 8.0f) / 8.0f;
    std::uniform_real_distribution<float> tail(0.0f, 20.0f + trial);
    for (int i = 0; i < 50 * trial; ++i) v.push_back(tail(gen));
    AbsHistogram h(trial == 5 ? 256 : 2048);
    h.Add(v.data(), static_cast<int64_t>(v.size()));
    const double fast = KlThreshold(h), direct = KlThresholdDirect(h);
    EXPECT_EQ(std::memcmp(&fast, &direct, sizeof(double)), 0) << "trial " << trial << ": " << fast << " vs " << direct;
  }
}

TEST(Thresholds, KlOfAFlatHistogramKeepsEverything) {
  // Uniform |x|: clipping always loses mass, so the full range wins.
  AbsHistogram h = AbsHistogram::FromCounts(std::vector<int64_t>(2048, 100), 1.0);
  EXPECT_NEAR(KlThreshold(h), 1.0, 1.0 / 2048);
}

TEST(Ranges, SymmetricAndAsymmetric) {
  TensorRange s = MakeRange("t", -2.0f, 6.35f, 6.35f, true, "max");
  EXPECT_FLOAT_EQ(s.scale, 0.05f);
  EXPECT_EQ(s.zero_point, 0);
  TensorRange a = MakeRange("t", -1.0f, 3.0f, 3.0f, false, "max");
  EXPECT_FLOAT_EQ(a.scale, 4.0f / 255.0f);
  EXPECT_EQ(a.zero_point, 64);  // round(1 / (4/255)) = round(63.75)
  TensorRange relu = MakeRange("t", 0.5f, 3.0f, 3.0f, false, "max");  // range widened to include 0
  EXPECT_EQ(relu.zero_point, 0);
}

// x[batch,16] -> Relu -> y
Model ReluModel() {
  Model m;
  m.opset_imports = {{"", 17}};
  m.graph.inputs.push_back(testing::FloatInput("x", {{-1, "n"}, {16, ""}}));
  m.graph.outputs.push_back(testing::FloatInput("y", {{-1, "n"}, {16, ""}}));
  m.graph.nodes.push_back({"relu", "Relu", "", {"x"}, {"y"}, {}, ""});
  return m;
}

BatchFn Batches(std::vector<Tensor> batches) {
  auto state = std::make_shared<std::pair<std::vector<Tensor>, size_t>>(std::move(batches), 0);
  return [state](TensorMap* batch) -> StatusOr<bool> {
    if (state->second == state->first.size()) return false;
    (*batch)["x"] = state->first[state->second++];
    return true;
  };
}

TEST(Calibrate, ObservesInputsAndOutputsWithMaxMethod) {
  Tensor a = testing::RandomFloats({4, 16}, 1, -2.0f, 3.0f);
  Tensor b = testing::RandomFloats({4, 16}, 2, -5.0f, 1.0f);
  CalibrationOptions opt;
  opt.method = CalibrationMethod::kMax;
  opt.threads = 2;
  auto table = Calibrate(ReluModel(), Batches({a, b}), opt);
  ASSERT_TRUE(table.ok()) << table.status().ToString();
  ASSERT_EQ(table->tensors.size(), 2u);
  EXPECT_EQ(table->samples, 8);
  float lo = 0, hi = 0;
  for (const Tensor* t : {&a, &b})
    for (int64_t i = 0; i < t->numel(); ++i) {
      lo = std::min(lo, t->data<float>()[i]);
      hi = std::max(hi, t->data<float>()[i]);
    }
  const TensorRange* x = table->Find("x");
  ASSERT_NE(x, nullptr);
  EXPECT_EQ(x->min, lo);
  EXPECT_EQ(x->max, hi);
  EXPECT_EQ(x->threshold, std::max(-lo, hi));
  const TensorRange* y = table->Find("y");
  ASSERT_NE(y, nullptr);
  EXPECT_EQ(y->min, 0.0f);
  EXPECT_EQ(y->threshold, hi);
}

TEST(Calibrate, SameTableForAnyThreadCount) {
  std::vector<Tensor> batches;
  for (uint32_t s = 0; s < 3; ++s) batches.push_back(testing::RandomFloats({512, 16}, 10 + s, -4.0f, 4.0f));
  CalibrationOptions opt;
  opt.method = CalibrationMethod::kKL;
  opt.threads = 1;
  auto one = Calibrate(ReluModel(), Batches(batches), opt);
  opt.threads = 3;
  auto three = Calibrate(ReluModel(), Batches(batches), opt);
  ASSERT_TRUE(one.ok() && three.ok());
  testing::TempDir dir;
  ASSERT_TRUE(one->Save(dir.path("a.json")).ok());
  ASSERT_TRUE(three->Save(dir.path("b.json")).ok());
  EXPECT_EQ(*ReadFile(dir.path("a.json")), *ReadFile(dir.path("b.json")));
}

TEST(Calibrate, SameTableForAnyBatchSize) {
  // 256 Gaussian samples with a sparse tail that grows along the data, so
  // later batches widen the range (and KL, percentile and MSE clip inside it).
  const std::vector<float> g = Gaussian(256 * 16, 21);
  Tensor all = Tensor::FromVector<float>({256, 16}, g);
  for (int64_t r = 0; r < 256; ++r) all.data<float>()[r * 16 + r % 16] *= 1.0f + 0.05f * static_cast<float>(r);
  auto split = [&](int64_t rows) {
    std::vector<Tensor> batches;
    for (int64_t r = 0; r < 256; r += rows) {
      Tensor b(DataType::kFloat32, {rows, 16});
      std::memcpy(b.data<float>(), all.data<float>() + r * 16, static_cast<size_t>(rows * 16) * sizeof(float));
      batches.push_back(b);
    }
    return batches;
  };
  for (CalibrationMethod method : {CalibrationMethod::kKL, CalibrationMethod::kPercentile, CalibrationMethod::kMSE}) {
    CalibrationOptions opt;
    opt.method = method;
    opt.threads = 1;
    auto by8 = Calibrate(ReluModel(), Batches(split(8)), opt);
    auto by32 = Calibrate(ReluModel(), Batches(split(32)), opt);
    ASSERT_TRUE(by8.ok() && by32.ok());
    for (const char* name : {"x", "y"}) {
      ASSERT_NE(by8->Find(name), nullptr);
      EXPECT_EQ(by8->Find(name)->threshold, by32->Find(name)->threshold)
          << CalibrationMethodName(method) << " " << name;
    }
  }
}

// x -> Conv -> Clip -> 1x1 Conv -> Clip -> Pad -> depthwise Conv -> Relu ->
// 1x1 Conv -> x * Sigmoid(x): every fusion and fold of deployment applies
// when only the layers' inputs and outputs are observed.
Model MobileBlock() {
  Model m;
  m.opset_imports = {{"", 17}};
  Graph& g = m.graph;
  g.inputs.push_back(testing::FloatInput("x", {{-1, "n"}, {3, ""}, {10, ""}, {10, ""}}));
  g.outputs.push_back(testing::FloatInput("y", {{-1, "n"}, {8, ""}, {10, ""}, {10, ""}}));
  g.initializers["w0"] = testing::RandomFloats({8, 3, 3, 3}, 31, -0.5f, 0.5f);
  g.initializers["w1"] = testing::RandomFloats({16, 8, 1, 1}, 32, -0.5f, 0.5f);
  g.initializers["w2"] = testing::RandomFloats({16, 1, 3, 3}, 33, -0.5f, 0.5f);
  g.initializers["w3"] = testing::RandomFloats({8, 16, 1, 1}, 34, -0.5f, 0.5f);
  g.initializers["lo"] = Tensor::Scalar<float>(0.0f);
  g.initializers["hi"] = Tensor::Scalar<float>(6.0f);
  // The pads computed from a constant, as torch's ZeroPad2d exports them (Constant -> Cast).
  g.nodes.push_back({"pads_f", "Constant", "", {}, {"pads_f"},
                     {Attribute::FromTensor("value", Tensor::FromVector<float>({8}, {0, 0, 1, 1, 0, 0, 1, 1}))}, ""});
  g.nodes.push_back({"pads_i", "Cast", "", {"pads_f"}, {"pads"}, {Attribute::Int("to", 7)}, ""});
  g.nodes.push_back({"conv0", "Conv", "", {"x", "w0"}, {"c0"}, {Attribute::Ints("pads", {1, 1, 1, 1})}, ""});
  g.nodes.push_back({"clip0", "Clip", "", {"c0", "lo", "hi"}, {"r0"}, {}, ""});
  g.nodes.push_back({"expand", "Conv", "", {"r0", "w1"}, {"c1"}, {}, ""});
  g.nodes.push_back({"clip1", "Clip", "", {"c1", "lo", "hi"}, {"r1"}, {}, ""});
  g.nodes.push_back({"pad", "Pad", "", {"r1", "pads"}, {"p1"}, {}, ""});
  g.nodes.push_back({"dw", "Conv", "", {"p1", "w2"}, {"c2"}, {Attribute::Int("group", 16)}, ""});
  g.nodes.push_back({"relu", "Relu", "", {"c2"}, {"r2"}, {}, ""});
  g.nodes.push_back({"project", "Conv", "", {"r2", "w3"}, {"c3"}, {}, ""});
  g.nodes.push_back({"sigmoid", "Sigmoid", "", {"c3"}, {"s3"}, {}, ""});
  g.nodes.push_back({"silu", "Mul", "", {"c3", "s3"}, {"y"}, {}, ""});
  return m;
}

// Observing a few tensors runs the graph fused around them: the same ranges,
// bit for bit, as observing every tensor.
TEST(Calibrate, ChosenTensorsGetTheRangesOfAFullCalibration) {
  std::vector<Tensor> batches;
  for (uint32_t s = 0; s < 3; ++s) batches.push_back(testing::RandomFloats({4, 3, 10, 10}, 40 + s, -2.0f, 2.0f));
  // Percentile reads bin 0's count too (KL caps it at bin 1's).
  for (CalibrationMethod method : {CalibrationMethod::kKL, CalibrationMethod::kMax, CalibrationMethod::kPercentile}) {
    CalibrationOptions opt;
    opt.method = method;
    opt.percentile = 60.0;
    opt.threads = 2;
    auto all = Calibrate(MobileBlock(), Batches(batches), opt);
    ASSERT_TRUE(all.ok()) << all.status().ToString();
    EXPECT_EQ(all->tensors.size(), 11u);  // x and every node output
    // What INT8 quantization reads; then the Pad's output without its input
    // (the Pad folds into the depthwise Conv either way: its output is
    // observed as its input and the padding's zeros).
    for (std::vector<std::string> tensors : {std::vector<std::string>{"x", "r0", "r1", "p1", "r2", "c3"},
                                             std::vector<std::string>{"p1", "c3"}}) {
      opt.tensors = tensors;
      auto chosen = Calibrate(MobileBlock(), Batches(batches), opt);
      ASSERT_TRUE(chosen.ok()) << chosen.status().ToString();
      ASSERT_EQ(chosen->tensors.size(), opt.tensors.size());
      for (const TensorRange& r : chosen->tensors) {
        const TensorRange* full = all->Find(r.name);
        ASSERT_NE(full, nullptr) << r.name;
        EXPECT_EQ(r.min, full->min) << r.name;
        EXPECT_EQ(r.max, full->max) << r.name;
        EXPECT_EQ(r.threshold, full->threshold) << CalibrationMethodName(method) << " " << r.name;
      }
    }
  }
}

// x -> Sigmoid -> Pad(0) -> Conv: the Pad's output holds the zeros its input
// (all > 0) lacks. Observed alone, the Pad folds into the Conv and the
// calibrator reads it from the executor's aliases (Executor::ValueAliases)
// as the Sigmoid's output and the padding's zeros: the table is the full
// calibration's. A calibrator that ignored the aliases would miss the Pad's
// output (it is never computed) or, observing the Sigmoid alone, give a
// minimum above 0 and other bins.
TEST(Calibrate, FoldedPadIsObservedThroughTheExecutorsAlias) {
  Model m;
  m.opset_imports = {{"", 17}};
  Graph& g = m.graph;
  g.inputs.push_back(testing::FloatInput("x", {{-1, "n"}, {4, ""}, {6, ""}, {6, ""}}));
  g.outputs.push_back(testing::FloatInput("y", {}));
  g.initializers["w"] = testing::RandomFloats({4, 4, 3, 3}, 51, -0.5f, 0.5f);
  g.initializers["pads"] = Tensor::FromVector<int64_t>({8}, {0, 0, 2, 1, 0, 0, 1, 2});
  g.nodes.push_back({"sigmoid", "Sigmoid", "", {"x"}, {"s"}, {}, ""});
  g.nodes.push_back({"pad", "Pad", "", {"s", "pads"}, {"p"}, {}, ""});
  g.nodes.push_back({"conv", "Conv", "", {"p", "w"}, {"y"}, {}, ""});
  {  // the premise: the executor folds the Pad and says so
    ExecutorOptions o;
    o.profile = GraphProfile::kObserveKept;
    o.keep_values = {"p"};
    o.keep_values_as_aliases = true;
    auto exec = Executor::Create(m, o);
    ASSERT_TRUE(exec.ok()) << exec.status().ToString();
    ASSERT_EQ((*exec)->ValueAliases().size(), 1u);
    EXPECT_EQ((*exec)->ValueAliases()[0].source, "s");
  }
  std::vector<Tensor> batches;
  for (uint32_t b = 0; b < 2; ++b) batches.push_back(testing::RandomFloats({3, 4, 6, 6}, 60 + b, -3.0f, 3.0f));
  for (CalibrationMethod method : {CalibrationMethod::kMax, CalibrationMethod::kPercentile}) {
    CalibrationOptions opt;
    opt.method = method;
    opt.percentile = 75.0;  // 45 of the 81 padded values are zeros: they move it
    opt.threads = 2;
    auto all = Calibrate(m, Batches(batches), opt);
    ASSERT_TRUE(all.ok()) << all.status().ToString();
    opt.tensors = {"p"};
    auto chosen = Calibrate(m, Batches(batches), opt);
    ASSERT_TRUE(chosen.ok()) << chosen.status().ToString();
    const TensorRange* p = chosen->Find("p");
    const TensorRange* full = all->Find("p");
    ASSERT_NE(p, nullptr) << "the folded Pad's output was not observed";
    ASSERT_NE(full, nullptr);
    EXPECT_GT(all->Find("s")->min, 0.0f);
    EXPECT_EQ(p->min, 0.0f);
    EXPECT_EQ(p->max, full->max);
    EXPECT_EQ(p->threshold, full->threshold) << CalibrationMethodName(method);
    EXPECT_EQ(p->scale, full->scale) << CalibrationMethodName(method);
  }
}

TEST(Calibrate, NanActivationIsNamed) {
  Tensor a = testing::RandomFloats({2, 16}, 3);
  a.data<float>()[5] = std::nanf("");
  auto table = Calibrate(ReluModel(), Batches({a}), CalibrationOptions{});
  ASSERT_FALSE(table.ok());
  EXPECT_NE(table.status().message().find("activation 'x'"), std::string::npos) << table.status().message();
  EXPECT_NE(table.status().message().find("flat index 5"), std::string::npos);
}

TEST(Calibrate, InfActivationIsNamed) {
  Tensor a = testing::RandomFloats({2, 16}, 3);
  a.data<float>()[20] = -INFINITY;
  auto table = Calibrate(ReluModel(), Batches({a}), CalibrationOptions{});
  ASSERT_FALSE(table.ok());
  EXPECT_NE(table.status().message().find("flat index 20"), std::string::npos) << table.status().message();
}

// skip_non_finite leaves a tensor that holds an infinity (in any batch, here
// the second) out of the table and names it; the others keep their ranges.
TEST(Calibrate, SkipNonFiniteLeavesTheTensorOutAndNamesIt) {
  Tensor a = testing::RandomFloats({2, 16}, 3);
  Tensor b = testing::RandomFloats({2, 16}, 4);
  b.data<float>()[20] = -INFINITY;  // Relu(-inf) = 0: y stays finite
  CalibrationOptions opt;
  opt.method = CalibrationMethod::kMax;
  opt.skip_non_finite = true;
  auto table = Calibrate(ReluModel(), Batches({a, b}), opt);
  ASSERT_TRUE(table.ok()) << table.status().ToString();
  EXPECT_EQ(table->skipped, std::vector<std::string>{"x"});
  EXPECT_EQ(table->Find("x"), nullptr);
  const TensorRange* y = table->Find("y");
  ASSERT_NE(y, nullptr);
  float hi = 0;
  for (const Tensor* t : {&a, &b})
    for (int64_t i = 0; i < t->numel(); ++i) hi = std::max(hi, t->data<float>()[i]);
  EXPECT_EQ(y->max, hi);
  EXPECT_EQ(y->threshold, hi);
  // Without it the run fails, naming the tensor; shards refuse the option.
  EXPECT_FALSE(Calibrate(ReluModel(), Batches({a, b}), CalibrationOptions{}).ok());
  auto shard = CalibrateShard(ReluModel(), Batches({a, b}), opt);
  ASSERT_FALSE(shard.ok());
  EXPECT_NE(shard.status().message().find("skip_non_finite"), std::string::npos) << shard.status().message();
}

// Weights as a Constant node (PP-OCR's export) are folded before the
// batches run: the table holds the same activations, with the same ranges,
// as with the weights as an initializer.
TEST(Calibrate, ConstantNodeWeightsGiveTheInitializerTable) {
  auto model = [](bool constant_node) {
    Model m = ReluModel();
    Tensor w = testing::RandomFloats({16}, 9, 0.5f, 2.0f);
    if (constant_node)
      m.graph.nodes.insert(m.graph.nodes.begin(),
                           {"w", "Constant", "", {}, {"w"}, {Attribute::FromTensor("value", w)}, ""});
    else
      m.graph.initializers["w"] = w;
    m.graph.nodes.back().inputs = {"xw"};
    m.graph.nodes.insert(m.graph.nodes.end() - 1, {"mul", "Mul", "", {"x", "w"}, {"xw"}, {}, ""});
    return m;
  };
  std::vector<Tensor> batches;
  for (uint32_t s = 0; s < 2; ++s) batches.push_back(testing::RandomFloats({64, 16}, 30 + s, -4.0f, 4.0f));
  CalibrationOptions opt;
  opt.method = CalibrationMethod::kKL;
  auto folded = Calibrate(model(true), Batches(batches), opt);
  auto plain = Calibrate(model(false), Batches(batches), opt);
  ASSERT_TRUE(folded.ok() && plain.ok()) << folded.status().ToString() << plain.status().ToString();
  ASSERT_EQ(folded->tensors.size(), 3u);  // x, xw, y: not w
  for (const char* name : {"x", "xw", "y"}) {
    ASSERT_NE(folded->Find(name), nullptr) << name;
    EXPECT_EQ(folded->Find(name)->threshold, plain->Find(name)->threshold) << name;
  }
}

TEST(Calibrate, NoDataIsAnError) {
  auto table = Calibrate(ReluModel(), Batches({}), CalibrationOptions{});
  ASSERT_FALSE(table.ok());
  EXPECT_NE(table.status().message().find("no data"), std::string::npos);
}

TEST(CalibrationTable, SaveLoadRoundTripAndTensorRtCache) {
  CalibrationTable t;
  t.method = "kl";
  t.tensors.push_back(MakeRange("a", -1.0f, 2.0f, 1.27f, true, "kl"));
  t.tensors.push_back(MakeRange("b", 0.0f, 6.0f, 6.0f, true, "kl"));
  testing::TempDir dir;
  ASSERT_TRUE(t.Save(dir.path("s.json")).ok());
  auto back = CalibrationTable::Load(dir.path("s.json"));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  ASSERT_EQ(back->tensors.size(), 2u);
  EXPECT_EQ(back->Find("a")->scale, t.tensors[0].scale);
  EXPECT_EQ(back->Find("b")->zero_point, t.tensors[1].zero_point);
  std::string cache = t.ToTensorRtCache("8601");
  float scale = 1.27f / 127.0f;
  uint32_t bits;
  std::memcpy(&bits, &scale, 4);
  char hex[16];
  std::snprintf(hex, sizeof hex, "%08x", bits);
  EXPECT_EQ(cache.substr(0, cache.find('\n')), "TRT-8601-EntropyCalibration2");
  EXPECT_NE(cache.find(std::string("a: ") + hex + "\n"), std::string::npos) << cache;
}

TEST(CalibrationTable, RejectsOtherFiles) {
  testing::TempDir dir;
  ASSERT_TRUE(WriteFileAtomically(dir.path("x.json"), "{\"format\": \"other\"}").ok());
  auto t = CalibrationTable::Load(dir.path("x.json"));
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("not a sparq calibration file"), std::string::npos);
  ASSERT_TRUE(WriteFileAtomically(dir.path("y.json"), "{not json").ok());
  EXPECT_EQ(CalibrationTable::Load(dir.path("y.json")).status().code(), StatusCode::kCorruption);
}

// method auto: a Gaussian with one far outlier. Keeping the outlier (max)
// costs every other value rounding noise at a 10x coarser step; clipping it
// costs one value. Auto measures that on the consumer's output and clips.
TEST(Calibrate, AutoPicksTheThresholdWithTheLeastLayerError) {
  std::vector<float> v = Gaussian(1 << 20, 7);
  v[12345] = 40.0f;
  std::vector<Tensor> batches = {Tensor::FromVector<float>({1 << 16, 16}, v)};
  CalibrationOptions opt;
  opt.method = CalibrationMethod::kAuto;
  opt.threads = 1;
  auto one = Calibrate(ReluModel(), Batches(batches), opt);
  ASSERT_TRUE(one.ok()) << one.status().ToString();
  EXPECT_EQ(one->method, "auto");
  const TensorRange* x = one->Find("x");
  ASSERT_NE(x, nullptr);
  EXPECT_EQ(x->method.rfind("auto:", 0), 0u) << x->method;
  EXPECT_NE(x->method, "auto:max");
  EXPECT_LT(x->threshold, 10.0f);
  EXPECT_GT(x->threshold, 3.0f);
  opt.threads = 3;
  auto three = Calibrate(ReluModel(), Batches(batches), opt);
  ASSERT_TRUE(three.ok());
  testing::TempDir dir;
  ASSERT_TRUE(one->Save(dir.path("a.json")).ok());
  ASSERT_TRUE(three->Save(dir.path("b.json")).ok());
  EXPECT_EQ(*ReadFile(dir.path("a.json")), *ReadFile(dir.path("b.json")));
}

TEST(Calibrate, AutoIsARecipeAndCliMethod) {
  auto m = ParseCalibrationMethod("auto");
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(*m, CalibrationMethod::kAuto);
  EXPECT_STREQ(CalibrationMethodName(CalibrationMethod::kAuto), "auto");
}

TEST(CalibrationTable, TensorRtCacheNamesTheMethodAndRefusesWhatItCannotHold) {
  CalibrationTable t;
  t.method = "max";
  t.tensors.push_back(MakeRange("a", -1.0f, 2.0f, 2.0f, true, "max"));
  ASSERT_TRUE(t.CheckTensorRtCache().ok());
  std::string cache = t.ToTensorRtCache("100100");
  EXPECT_EQ(cache.substr(0, cache.find('\n')), "TRT-100100-MinMaxCalibration");
  // No TensorRT calibrator for percentile or mse.
  t.method = "percentile";
  EXPECT_EQ(t.CheckTensorRtCache().code(), StatusCode::kNotSupported);
  EXPECT_NE(t.CheckTensorRtCache().message().find("no calibrator for method 'percentile'"), std::string::npos);
  // Asymmetric tables: the zero points would be dropped, so refused.
  t.method = "kl";
  t.tensors.push_back(MakeRange("b", 0.5f, 6.0f, 6.0f, false, "kl"));
  Status st = t.CheckTensorRtCache();
  EXPECT_EQ(st.code(), StatusCode::kNotSupported);
  EXPECT_NE(st.message().find("asymmetric"), std::string::npos) << st.ToString();
}

}  // namespace
}  // namespace sparq

namespace sparq {
namespace {

// One name table serves the API, the CLI and recipes: every method has one
// row, in enum order, its names parse back to it, and every rule but auto's
// gives a threshold.
TEST(CalibrationMethods, OneRowPerMethodAndEveryNameParses) {
  const std::vector<CalibrationMethodInfo>& methods = CalibrationMethods();
  ASSERT_EQ(methods.size(), static_cast<size_t>(CalibrationMethod::kAuto) + 1);
  AbsHistogram h(256);
  std::vector<float> values;
  for (int i = 0; i < 1000; ++i) values.push_back(static_cast<float>(i % 97) / 10.0f);
  h.Add(values.data(), static_cast<int64_t>(values.size()));
  for (size_t i = 0; i < methods.size(); ++i) {
    const CalibrationMethodInfo& m = methods[i];
    EXPECT_EQ(static_cast<size_t>(m.method), i) << m.name;
    EXPECT_STREQ(CalibrationMethodName(m.method), m.name);
    EXPECT_EQ(ParseCalibrationMethod(m.name).value(), m.method);
    if (m.alias != nullptr) EXPECT_EQ(ParseCalibrationMethod(m.alias).value(), m.method);
    EXPECT_EQ(m.threshold == nullptr, m.method == CalibrationMethod::kAuto) << m.name;
    if (m.threshold != nullptr) {
      const double t = m.threshold(h, 9.6, CalibrationMethodOptions{});
      EXPECT_GT(t, 0.0) << m.name;  // the calibrator clamps it to max |x|
    }
  }
  EXPECT_FALSE(ParseCalibrationMethod("minmax").ok());
}

}  // namespace
}  // namespace sparq
