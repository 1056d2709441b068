// Metrics on hand-made numbers, and Evaluate() end to end on tiny models.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <limits>

#include "evaluate/dataset.h"
#include "sparq/dataset.h"
#include "sparq/evaluate.h"
#include "sparq/file_io.h"
#include "sparq/metrics.h"
#include "sparq/npy.h"
#include "sparq/onnx_io.h"
#include "test_util.h"

namespace sparq {
namespace {

// ---------------------------------------------------------------------------
// Metrics

TEST(Metrics, ArgMaxTakesFirstMaximumAndSkipsNaN) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  Tensor scores = Tensor::FromVector<float>({4, 3}, {1, 3, 3,  //
                                                     nan, -1, -2,
                                                     nan, nan, nan,
                                                     0, 0, 5});
  auto best = ArgMaxLastAxis(scores);
  ASSERT_TRUE(best.ok());
  EXPECT_EQ(*best, (std::vector<int64_t>{1, 1, 0, 2}));
  // [N, 1, C] is read as N rows too.
  auto rows = ArgMaxLastAxis(Tensor::FromVector<float>({2, 1, 2}, {0, 1, 1, 0}));
  EXPECT_EQ(*rows, (std::vector<int64_t>{1, 0}));
  EXPECT_FALSE(ArgMaxLastAxis(Tensor::Scalar<float>(1)).ok());
}

// Outputs holding NaN give a NaN SQNR; MetricValue passed it through
// std::min(ceiling, NaN), which returned the 100 dB ceiling: such a model
// read as identical to FP32 to the search and the fallback.
TEST(Metrics, MetricValueOfANanSqnrIsNaN) {
  EvalReport e;
  e.has_reference = true;
  e.comparisons.emplace_back();
  e.comparisons[0].sqnr_db = std::nan("");
  EXPECT_TRUE(std::isnan(MetricValue(Metric::kSqnr, e)));
  e.comparisons[0].sqnr_db = 250.0;
  EXPECT_EQ(MetricValue(Metric::kSqnr, e), kSqnrCeilingDb);
}

TEST(Metrics, TopKCountsStableDescendingRank) {
  // Row scores and where each label ranks.
  Tensor scores = Tensor::FromVector<float>({3, 6}, {0.1f, 0.9f, 0.3f, 0.2f, 0.5f, 0.0f,   // label 1: rank 0
                                                     0.6f, 0.5f, 0.4f, 0.3f, 0.2f, 0.1f,   // label 5: rank 5
                                                     0.5f, 0.5f, 0.5f, 0.5f, 0.5f, 0.5f});  // label 4: rank 4 (ties)
  Tensor labels = Tensor::FromVector<int64_t>({3}, {1, 5, 4});
  EXPECT_EQ(*CountTopK(scores, labels, 1), 1);
  EXPECT_EQ(*CountTopK(scores, labels, 5), 2);
  EXPECT_EQ(*CountTopK(scores, labels, 6), 3);
  // int32 labels work the same.
  EXPECT_EQ(*CountTopK(scores, Tensor::FromVector<int32_t>({3}, {1, 5, 4}), 5), 2);
}

TEST(Metrics, TopKErrorsNameTheProblem) {
  Tensor scores = Tensor::FromVector<float>({2, 3}, {1, 2, 3, 4, 5, 6});
  auto out_of_range = CountTopK(scores, Tensor::FromVector<int64_t>({2}, {0, 3}), 1);
  ASSERT_FALSE(out_of_range.ok());
  EXPECT_NE(out_of_range.status().message().find("label 3 of row 1"), std::string::npos)
      << out_of_range.status().message();
  auto count = CountTopK(scores, Tensor::FromVector<int64_t>({3}, {0, 1, 2}), 1);
  EXPECT_NE(count.status().message().find("3 labels for 2 rows"), std::string::npos) << count.status().message();
  auto floats = CountTopK(scores, Tensor::FromVector<float>({2}, {0, 1}), 1);
  EXPECT_NE(floats.status().message().find("integer"), std::string::npos);
  EXPECT_FALSE(CountTopK(scores, Tensor::FromVector<int64_t>({2}, {0, 1}), 0).ok());
}

TEST(Metrics, SqnrCosineMaxAbs) {
  ErrorStats s;
  // ref [1, 2, 3], out [1, 2, 2]: signal 14, noise 1.
  ASSERT_TRUE(s.Add(Tensor::FromVector<float>({3}, {1, 2, 3}), Tensor::FromVector<float>({3}, {1, 2, 2})).ok());
  EXPECT_NEAR(s.sqnr_db(), 10.0 * std::log10(14.0), 1e-12);
  EXPECT_NEAR(s.cosine(), 11.0 / (std::sqrt(14.0) * 3.0), 1e-12);
  EXPECT_EQ(s.max_abs_error(), 1.0);
  EXPECT_EQ(s.count(), 3);
  // Accumulates over batches: add ref [0, 4], out [0, 4.5] (signal +16, noise +0.25).
  ASSERT_TRUE(s.Add(Tensor::FromVector<double>({2}, {0, 4}), Tensor::FromVector<float>({2}, {0, 4.5f})).ok());
  EXPECT_NEAR(s.sqnr_db(), 10.0 * std::log10(30.0 / 1.25), 1e-12);
  EXPECT_EQ(s.count(), 5);
}

TEST(Metrics, IdenticalZeroAndMismatchedOutputs) {
  ErrorStats same;
  Tensor a = Tensor::FromVector<float>({2, 2}, {1, -2, 3, 0});
  ASSERT_TRUE(same.Add(a, a).ok());
  EXPECT_TRUE(std::isinf(same.sqnr_db()) && same.sqnr_db() > 0);
  EXPECT_NEAR(same.cosine(), 1.0, 1e-15);
  EXPECT_EQ(same.max_abs_error(), 0.0);

  ErrorStats zeros;
  Tensor z(DataType::kFloat32, {3});
  ASSERT_TRUE(zeros.Add(z, z).ok());
  EXPECT_EQ(zeros.cosine(), 1.0);
  ErrorStats one_zero;
  ASSERT_TRUE(one_zero.Add(z, Tensor::FromVector<float>({3}, {1, 0, 0})).ok());
  EXPECT_EQ(one_zero.cosine(), 0.0);

  ErrorStats bad;
  EXPECT_EQ(bad.Add(a, z).code(), StatusCode::kInvalidArgument);
}

// ---------------------------------------------------------------------------
// Dataset helpers

TEST(Dataset, SliceConcatAndFiniteChecks) {
  Tensor t = Tensor::FromVector<float>({3, 2}, {0, 1, 2, 3, 4, 5});
  Tensor mid = SliceRows(t, 1, 2);
  EXPECT_TRUE(mid.Equals(Tensor::FromVector<float>({2, 2}, {2, 3, 4, 5})));
  auto cat = ConcatRows({SliceRows(t, 0, 1), mid}, "x");
  ASSERT_TRUE(cat.ok());
  EXPECT_TRUE(cat->Equals(t));
  EXPECT_FALSE(ConcatRows({t, Tensor(DataType::kFloat32, {1, 3})}, "x").ok());

  Tensor bad = Tensor::FromVector<float>({2, 2}, {0, 1, std::numeric_limits<float>::infinity(), 3});
  Status s = CheckFinite(bad, "data.npz: array 'x'");
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("data.npz: array 'x' has a non-finite value (inf) at flat index 2"), std::string::npos)
      << s.message();
  EXPECT_NE(CheckFinite(Tensor::FromVector<double>({1}, {std::nan("")}), "y").message().find("(nan)"),
            std::string::npos);
}

TEST(Dataset, StreamsStoredArchivesInBatchesAndFindsANaNDeepInTheFile) {
  testing::TempDir dir;
  // 5000 samples of 1024 floats (20 MB): more than one 16 MiB scan chunk.
  Tensor x = testing::RandomFloats({5000, 1024}, 11);
  ASSERT_TRUE(WriteNpz(dir.path("big.npz"), {{"x", x}}).ok());
  std::vector<ValueInfo> inputs = {testing::FloatInput("x", {{-1, "n"}, {1024, ""}})};
  auto ds = Dataset::Open(dir.path("big.npz"), inputs, {});
  ASSERT_TRUE(ds.ok()) << ds.status().ToString();
  EXPECT_EQ((*ds)->total(), 5000);
  TensorMap batch;
  int64_t rows = 0, seen = 0;
  while (true) {
    ASSERT_TRUE((*ds)->Next(1536, &batch, &rows).ok());
    if (rows == 0) break;
    EXPECT_TRUE(batch.at("x").Equals(SliceRows(x, seen, rows))) << "rows from " << seen;
    seen += rows;
  }
  EXPECT_EQ(seen, 5000);
  // A NaN in the last chunk is found at open time, with its index in the file.
  x.data<float>()[4999 * 1024 + 7] = std::nanf("");
  ASSERT_TRUE(WriteNpz(dir.path("nan.npz"), {{"x", x}}).ok());
  auto bad = Dataset::Open(dir.path("nan.npz"), inputs, {});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("array 'x' has a non-finite value (nan) at flat index " +
                                        std::to_string(4999 * 1024 + 7)),
            std::string::npos)
      << bad.status().message();
  // Opened to read the first 4000 samples only, the NaN of sample 4999 is never
  // read, and not checked: the file opens.
  EXPECT_TRUE(Dataset::Open(dir.path("nan.npz"), inputs, {}, 4000).ok());
  EXPECT_FALSE(Dataset::Open(dir.path("nan.npz"), inputs, {}, 5000).ok());
}

// ---------------------------------------------------------------------------
// Evaluate end to end

// x[batch, 4] -> MatMul(W[4, 3]) -> y[batch, 3]; W picks classes so that the
// argmax of y is the argmax of x[:, 0:3] (x[:, 3] is ignored).
Model Classifier(int64_t fixed_batch = -1, float scale = 1.0f) {
  Model m;
  m.ir_version = 8;
  m.opset_imports = {{"", 17}};
  Graph& g = m.graph;
  g.name = "classifier";
  Dim batch = fixed_batch > 0 ? Dim{fixed_batch, ""} : Dim{-1, "batch"};
  g.inputs.push_back(testing::FloatInput("x", {batch, {4, ""}}));
  g.outputs.push_back(testing::FloatInput("y", {batch, {3, ""}}));
  g.initializers["W"] = Tensor::FromVector<float>({4, 3}, {scale, 0, 0, 0, scale, 0, 0, 0, scale, 0, 0, 0});
  g.nodes.push_back({"mm", "MatMul", "", {"x", "W"}, {"y"}, {}, ""});
  return m;
}

// n samples whose true class is i % 3, with a score margin.
Tensor Samples(int64_t n) {
  Tensor x(DataType::kFloat32, {n, 4});
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t c = 0; c < 4; ++c) x.data<float>()[i * 4 + c] = 0.1f * static_cast<float>(c);
    x.data<float>()[i * 4 + i % 3] = 2.0f + static_cast<float>(i);
  }
  return x;
}

class EvaluateTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(SaveModel(Classifier(), dir_.path("model.onnx")).ok());
    NamedTensors data;
    data.emplace_back("x", Samples(10));
    ASSERT_TRUE(WriteNpz(dir_.path("data.npz"), data).ok());
    std::vector<int64_t> labels(10);
    for (int i = 0; i < 10; ++i) labels[i] = i % 3;
    labels[4] = 0;  // one wrong label: top-1 9/10
    ASSERT_TRUE(WriteNpy(dir_.path("labels.npy"), Tensor::FromVector<int64_t>({10}, labels)).ok());
  }
  std::string path(const std::string& name) const { return dir_.path(name); }

  testing::TempDir dir_;
};

TEST_F(EvaluateTest, AccuracyAndProgress) {
  EvalOptions o;
  o.inputs = path("data.npz");
  o.labels = path("labels.npy");
  o.batch = 4;
  o.threads = 1;
  std::vector<int64_t> seen;
  o.on_progress = [&](const EvalProgress& p) {
    seen.push_back(p.done);
    EXPECT_EQ(p.total, 10);
  };
  auto r = Evaluate(path("model.onnx"), o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->samples, 10);
  EXPECT_EQ(r->batches, 3);  // 4 + 4 + the last partial 2
  EXPECT_EQ(r->top1_correct, 9);
  EXPECT_EQ(r->top5_correct, 10);  // 3 classes: always in the top 5
  EXPECT_EQ(r->num_classes, 3);
  EXPECT_EQ(seen, (std::vector<int64_t>{4, 8, 10}));
  EXPECT_NE(r->ToText().find("Top-1"), std::string::npos);
  EXPECT_NE(r->ToJson().find("\"top1\": 0.9"), std::string::npos) << r->ToJson();
}

TEST_F(EvaluateTest, ReferenceComparisonAndSavedOutputs) {
  ASSERT_TRUE(SaveModel(Classifier(-1, 1.01f), path("scaled.onnx")).ok());
  EvalOptions o;
  o.inputs = path("data.npz");
  o.reference = path("model.onnx");
  o.save_outputs = path("out.npz");
  o.batch = 3;
  auto r = Evaluate(path("scaled.onnx"), o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->top1_agree, 10);
  EXPECT_EQ(r->top1_rows, 10);
  EXPECT_EQ(r->top1_agreement(), 1.0);
  ASSERT_EQ(r->comparisons.size(), 1u);
  // out = 1.01 * ref: SQNR = 10 log10(1 / 0.01^2) = 40 dB, cosine 1.
  EXPECT_NEAR(r->comparisons[0].sqnr_db, 40.0, 1e-3);
  EXPECT_NEAR(r->comparisons[0].cosine, 1.0, 1e-9);
  EXPECT_EQ(r->comparisons[0].elements, 30);
  auto saved = ReadNpz(path("out.npz"));
  ASSERT_TRUE(saved.ok()) << saved.status().ToString();
  ASSERT_EQ(saved->size(), 1u);
  EXPECT_EQ((*saved)[0].first, "y");
  EXPECT_EQ((*saved)[0].second.shape(), (Shape{10, 3}));
  EXPECT_NEAR((*saved)[0].second.data<float>()[0], 1.01f * 2.0f, 1e-5);

  // Identical models: infinite SQNR, written as null in JSON.
  o.save_outputs.clear();
  auto same = Evaluate(path("model.onnx"), o);
  ASSERT_TRUE(same.ok());
  EXPECT_TRUE(std::isinf(same->comparisons[0].sqnr_db));
  EXPECT_NE(same->ToJson().find("\"sqnr_db\": null"), std::string::npos);
}

TEST(Latency, NearestRankPercentilesWithoutTheWarmUp) {
  // Batch 0 (warm-up) is the slowest and must not show.
  std::vector<double> seconds{9.0};
  for (int i = 1; i <= 100; ++i) seconds.push_back(0.01 * i);
  LatencyStats l = ComputeLatency(seconds, 1);
  EXPECT_EQ(l.warmup_batches, 1);
  EXPECT_EQ(l.timed_batches, 100);
  EXPECT_DOUBLE_EQ(l.p50_seconds, 0.50);
  EXPECT_DOUBLE_EQ(l.p90_seconds, 0.90);
  EXPECT_DOUBLE_EQ(l.p99_seconds, 0.99);
  EXPECT_DOUBLE_EQ(l.max_seconds, 1.00);
  EXPECT_NEAR(l.mean_seconds, 0.505, 1e-12);
  // Four batches: p50 is the 2nd fastest, p90 and p99 the slowest.
  l = ComputeLatency({0.4, 0.1, 0.3, 0.2}, 0);
  EXPECT_DOUBLE_EQ(l.p50_seconds, 0.2);
  EXPECT_DOUBLE_EQ(l.p90_seconds, 0.4);
  EXPECT_DOUBLE_EQ(l.p99_seconds, 0.4);
  // Everything warm-up: no timed batches, zeros.
  l = ComputeLatency({0.4, 0.1}, 5);
  EXPECT_EQ(l.warmup_batches, 2);
  EXPECT_EQ(l.timed_batches, 0);
  EXPECT_EQ(l.p50_seconds, 0.0);
}

TEST_F(EvaluateTest, LatencyAndChromeTrace) {
  EvalOptions o;
  o.inputs = path("data.npz");
  o.batch = 2;  // 5 batches
  o.threads = 1;
  o.warmup = 2;
  o.trace = path("trace.json");
  auto r = Evaluate(path("model.onnx"), o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->latency.warmup_batches, 2);
  EXPECT_EQ(r->latency.timed_batches, 3);
  EXPECT_LE(r->latency.p50_seconds, r->latency.p90_seconds);
  EXPECT_LE(r->latency.p90_seconds, r->latency.p99_seconds);
  EXPECT_GE(r->latency.cpu_mean_seconds, 0.0);
  EXPECT_NE(r->ToJson().find("\"cpu_mean_seconds\""), std::string::npos) << r->ToJson();
  EXPECT_EQ(r->trace, path("trace.json"));
  EXPECT_TRUE(r->op_profile.empty());  // a trace alone does not print the profile
  EXPECT_NE(r->ToText().find("3 batches after 2 warm-up"), std::string::npos) << r->ToText();
  EXPECT_NE(r->ToJson().find("\"timed_batches\": 3"), std::string::npos) << r->ToJson();
  auto bytes = ReadFile(path("trace.json"));
  ASSERT_TRUE(bytes.ok());
  // One complete event per node run: 1 node x 5 batches.
  size_t events = 0;
  for (size_t at = bytes->find("\"ph\": \"X\""); at != std::string::npos; at = bytes->find("\"ph\": \"X\"", at + 1))
    ++events;
  EXPECT_EQ(events, 5u) << *bytes;
  EXPECT_NE(bytes->find("\"traceEvents\""), std::string::npos);
  EXPECT_NE(bytes->find("\"name\": \"mm\""), std::string::npos) << *bytes;
  EXPECT_NE(bytes->find("\"cat\": \"MatMul\""), std::string::npos) << *bytes;
  EXPECT_NE(bytes->find("\"kernel\": \"gemm_f32"), std::string::npos) << *bytes;  // the row this CPU picks

  // All batches warm-up: the text says so and the JSON percentiles are null.
  o.trace.clear();
  o.warmup = 10;
  r = Evaluate(path("model.onnx"), o);
  ASSERT_TRUE(r.ok());
  EXPECT_NE(r->ToText().find("all 5 batches were warm-up"), std::string::npos) << r->ToText();
  EXPECT_NE(r->ToJson().find("\"p50_seconds\": null"), std::string::npos) << r->ToJson();

  o.warmup = -1;
  EXPECT_NE(Evaluate(path("model.onnx"), o).status().message().find("warmup must be >= 0"), std::string::npos);
  o.warmup = 1;
  o.trace = path("trace.txt");
  EXPECT_NE(Evaluate(path("model.onnx"), o).status().message().find("must name a .json file"), std::string::npos);
  o.trace = path("data.npz");
  EXPECT_NE(Evaluate(path("model.onnx"), o).status().message().find("would overwrite the dataset"),
            std::string::npos);
}

TEST_F(EvaluateTest, FixedBatchPadsTheLastBatchAndRejectsOtherSizes) {
  ASSERT_TRUE(SaveModel(Classifier(4), path("fixed.onnx")).ok());
  EvalOptions o;
  o.inputs = path("data.npz");
  o.labels = path("labels.npy");
  o.save_outputs = path("fixed_out.npz");
  auto r = Evaluate(path("fixed.onnx"), o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->batch_size, 4);
  EXPECT_EQ(r->samples, 10);
  EXPECT_EQ(r->top1_correct, 9);
  EXPECT_EQ((*ReadNpz(path("fixed_out.npz")))[0].second.shape(), (Shape{10, 3}));

  o.batch = 8;
  auto bad = Evaluate(path("fixed.onnx"), o);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("batch 8 does not match model input 'x'"), std::string::npos)
      << bad.status().message();
}

TEST_F(EvaluateTest, FolderLimitAndNpy) {
  std::filesystem::create_directories(path("folder"));
  Tensor all = Samples(10);
  ASSERT_TRUE(WriteNpy(path("folder/b.npy"), SliceRows(all, 6, 4)).ok());
  ASSERT_TRUE(WriteNpy(path("folder/a.npy"), SliceRows(all, 0, 6)).ok());
  EvalOptions o;
  o.inputs = path("folder");
  o.labels = path("labels.npy");
  o.batch = 4;
  o.save_outputs = path("folder_out.npz");
  auto r = Evaluate(path("model.onnx"), o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->samples, 10);
  EXPECT_EQ(r->top1_correct, 9);  // a.npy then b.npy: the labels line up
  auto saved = ReadNpz(path("folder_out.npz"));
  EXPECT_NEAR((*saved)[0].second.data<float>()[9 * 3 + 0], 11.0f, 1e-5);  // sample 9 is class 0

  o.limit = 5;
  o.save_outputs.clear();
  auto limited = Evaluate(path("model.onnx"), o);
  ASSERT_TRUE(limited.ok());
  EXPECT_EQ(limited->samples, 5);
  EXPECT_EQ(limited->batches, 2);

  EvalOptions single;
  single.inputs = path("folder/a.npy");
  auto npy = Evaluate(path("model.onnx"), single);
  ASSERT_TRUE(npy.ok()) << npy.status().ToString();
  EXPECT_EQ(npy->samples, 6);
  EXPECT_EQ(npy->batch_size, 1);
}

// Outputs of shape [N, S, C]: agreement counts N * S rows (regression: it
// was divided by N, giving "percentages" above 100).
TEST_F(EvaluateTest, AgreementCountsRowsOfSequenceOutputs) {
  Model m;
  m.ir_version = 8;
  m.opset_imports = {{"", 17}};
  m.graph.inputs.push_back(testing::FloatInput("x", {{-1, "n"}, {4, ""}, {3, ""}}));
  m.graph.outputs.push_back(testing::FloatInput("y", {{-1, "n"}, {4, ""}, {3, ""}}));
  m.graph.nodes.push_back({"relu", "Relu", "", {"x"}, {"y"}, {}, ""});
  ASSERT_TRUE(SaveModel(m, path("seq.onnx")).ok());
  NamedTensors data;
  data.emplace_back("x", testing::RandomFloats({5, 4, 3}, 11, 0.0f, 1.0f));
  ASSERT_TRUE(WriteNpz(path("seq.npz"), data).ok());
  EvalOptions o;
  o.inputs = path("seq.npz");
  o.reference = path("seq.onnx");
  o.batch = 2;
  auto r = Evaluate(path("seq.onnx"), o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->samples, 5);
  EXPECT_EQ(r->top1_rows, 20);
  EXPECT_EQ(r->top1_agree, 20);
  EXPECT_EQ(r->top1_agreement(), 1.0);
}

TEST_F(EvaluateTest, BadDataIsNamed) {
  EvalOptions o;
  // NaN in the data: file, array and flat index.
  Tensor x = Samples(3);
  x.data<float>()[5] = std::numeric_limits<float>::quiet_NaN();
  NamedTensors nan_data;
  nan_data.emplace_back("x", x);
  ASSERT_TRUE(WriteNpz(path("nan.npz"), nan_data).ok());
  o.inputs = path("nan.npz");
  auto r = Evaluate(path("model.onnx"), o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("nan.npz: array 'x' has a non-finite value (nan) at flat index 5"),
            std::string::npos)
      << r.status().message();

  // Wrong type, wrong shape, unknown and missing arrays, wrong label count.
  ASSERT_TRUE(WriteNpy(path("f64.npy"), Samples(2).CastTo(DataType::kFloat64)).ok());
  o.inputs = path("f64.npy");
  EXPECT_NE(Evaluate(path("model.onnx"), o).status().message().find("has type float64, model input 'x' expects"),
            std::string::npos);
  ASSERT_TRUE(WriteNpy(path("wide.npy"), Tensor(DataType::kFloat32, {2, 5})).ok());
  o.inputs = path("wide.npy");
  EXPECT_NE(Evaluate(path("model.onnx"), o).status().message().find("has shape [2, 5], model input 'x' expects"),
            std::string::npos);
  NamedTensors two;
  two.emplace_back("x", Samples(2));
  two.emplace_back("extra", Samples(2));
  ASSERT_TRUE(WriteNpz(path("two.npz"), two).ok());
  o.inputs = path("two.npz");
  EXPECT_NE(Evaluate(path("model.onnx"), o).status().message().find("array 'extra' is not an input of the model"),
            std::string::npos);
  o.inputs = path("data.npz");
  ASSERT_TRUE(WriteNpy(path("short_labels.npy"), Tensor::FromVector<int64_t>({2}, {0, 1})).ok());
  o.labels = path("short_labels.npy");
  EXPECT_NE(Evaluate(path("model.onnx"), o).status().message().find("has 2 labels but the dataset"),
            std::string::npos);
  o.labels.clear();
  o.save_outputs = path("model.onnx");
  EXPECT_EQ(Evaluate(path("model.onnx"), o).status().code(), StatusCode::kInvalidArgument);
  o.save_outputs = path("data.npz");
  EXPECT_NE(Evaluate(path("model.onnx"), o).status().message().find("would overwrite the dataset"),
            std::string::npos);
}

// ---------------------------------------------------------------------------
// Evaluator: the reference runs once; candidates are models in memory.

TEST_F(EvaluateTest, EvaluatorRunsTheReferenceOnceAndStreamsPastTheCache) {
  const Model reference = Classifier();
  auto data = OpenDataset(path("data.npz"), reference.graph, DatasetOptions{4, 0, {}});
  ASSERT_TRUE(data.ok()) << data.status().ToString();
  EXPECT_EQ(data->samples(), 10);
  EXPECT_EQ(data->batch_size(), 4);
  EvaluatorOptions options;
  options.labels = path("labels.npy");
  options.threads = 1;
  auto evaluator = Evaluator::Create(reference, *data, options);
  ASSERT_TRUE(evaluator.ok()) << evaluator.status().ToString();
  Evaluator& ev = **evaluator;
  EXPECT_EQ(ev.reference_batches_run(), 3);  // 4 + 4 + 2 samples, run once
  EXPECT_EQ(ev.cached_batches(), 3);
  EXPECT_EQ(ev.reference_report().top1_correct, 9);
  EXPECT_EQ(MetricValue(Metric::kAgreement, ev.reference_report()), 100.0);
  EXPECT_EQ(MetricValue(Metric::kSqnr, ev.reference_report()), kSqnrCeilingDb);

  for (int i = 0; i < 3; ++i) {
    auto r = ev.Evaluate(Classifier(-1, 1.01f));
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->samples, 10);
    EXPECT_NEAR(MetricValue(Metric::kSqnr, *r), 40.0, 1e-3);
    EXPECT_EQ(MetricValue(Metric::kAgreement, *r), 100.0);
    EXPECT_EQ(r->top1_correct, 9);
  }
  EXPECT_EQ(ev.reference_batches_run(), 3);  // no reference run per candidate

  // A cap of one batch's outputs (4 rows x 3 floats): the rest is streamed,
  // i.e. the reference runs again on those batches, with the same results.
  options.cache_bytes = 4 * 3 * 4;
  auto capped = Evaluator::Create(reference, *data, options);
  ASSERT_TRUE(capped.ok()) << capped.status().ToString();
  EXPECT_EQ((*capped)->cached_batches(), 1);
  auto r = (*capped)->Evaluate(Classifier(-1, 1.01f));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_NEAR(r->comparisons[0].sqnr_db, 40.0, 1e-3);
  EXPECT_EQ((*capped)->reference_batches_run(), 3 + 2);
}

// Issue 24: map_iou thresholds output 0 and pools the overlap over every
// element of the data.
TEST_F(EvaluateTest, EvaluatorScoresTheThresholdedMapAndRefusesIntegerOutputs) {
  const Model reference = Classifier();
  auto data = OpenDataset(path("data.npz"), reference.graph, DatasetOptions{4, 0, {}});
  ASSERT_TRUE(data.ok()) << data.status().ToString();
  EvaluatorOptions options;
  options.threads = 1;
  options.map.enabled = true;
  options.map.threshold = 0.5;
  auto evaluator = Evaluator::Create(reference, *data, options);
  ASSERT_TRUE(evaluator.ok()) << evaluator.status().ToString();
  // The reference is above 0.5 at each sample's class score (2 + i): 10 of the
  // 30 elements. Scaled by 0.2, sample 0's (0.4) drops below: 9 of those 10.
  auto r = (*evaluator)->Evaluate(Classifier(-1, 0.2f));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->task.map_elements(), 30);
  EXPECT_EQ(r->task.map_intersection(), 9);
  EXPECT_EQ(r->task.map_union(), 10);
  EXPECT_DOUBLE_EQ(MetricValue(Metric::kMapIou, *r), 90.0);
  EXPECT_NE(r->ToText().find("90.00% at threshold 0.5 (9 of 10 elements"), std::string::npos) << r->ToText();
  EXPECT_NE(r->ToJson().find("\"map_iou\": 0.9"), std::string::npos) << r->ToJson();
  // Without map options the metric is not measured: NaN, and no "map" in the JSON.
  EvaluatorOptions plain = options;
  plain.map = MapOptions{};
  auto unmeasured = Evaluator::Create(reference, *data, plain);
  ASSERT_TRUE(unmeasured.ok());
  auto u = (*unmeasured)->Evaluate(Classifier(-1, 0.2f));
  ASSERT_TRUE(u.ok());
  EXPECT_TRUE(std::isnan(MetricValue(Metric::kMapIou, *u)));
  EXPECT_EQ(u->ToJson().find("\"map\""), std::string::npos);

  // A threshold outside (0, 1).
  EvaluatorOptions bad = options;
  bad.map.threshold = 1.0;
  auto refused = Evaluator::Create(reference, *data, bad);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("map threshold must be in (0, 1)"), std::string::npos);

  // An integer output (class ids) has no probability to threshold: an error naming it, before any run.
  Model ids = Classifier();
  ids.graph.outputs = {testing::Typed("cls", DataType::kInt64)};
  ids.graph.nodes.push_back({"argmax", "ArgMax", "", {"y"}, {"cls"}, {}, ""});
  auto int_output = Evaluator::Create(ids, *data, options);
  ASSERT_FALSE(int_output.ok());
  EXPECT_EQ(int_output.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(int_output.status().message().find("output 'cls' is int64, not floating point"), std::string::npos)
      << int_output.status().message();

  // The path-based Evaluate (sparq eval) needs a reference to compare maps with.
  EvalOptions o;
  o.inputs = path("data.npz");
  o.map.enabled = true;
  auto no_reference = Evaluate(path("model.onnx"), o);
  ASSERT_FALSE(no_reference.ok());
  EXPECT_NE(no_reference.status().message().find("give the reference"), std::string::npos);
}

// Two outputs: y (the classifier) and z = y * z_scale. The metrics read
// output 0 unless `output` names another, which is then listed first.
Model TwoOutputs(float z_scale) {
  Model m = Classifier();
  Graph& g = m.graph;
  g.outputs.push_back(testing::FloatInput("z", {{-1, "batch"}, {3, ""}}));
  g.initializers["s"] = Tensor::FromVector<float>({1}, {z_scale});
  g.nodes.push_back({"scale", "Mul", "", {"y", "s"}, {"z"}, {}, ""});
  return m;
}

TEST_F(EvaluateTest, OutputNamesWhatTheMetricsRead) {
  ASSERT_TRUE(SaveModel(TwoOutputs(1.0f), path("two.onnx")).ok());
  ASSERT_TRUE(SaveModel(TwoOutputs(1.01f), path("two_scaled.onnx")).ok());
  EvalOptions o;
  o.inputs = path("data.npz");
  o.reference = path("two.onnx");
  o.batch = 4;
  auto first = Evaluate(path("two_scaled.onnx"), o);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  ASSERT_EQ(first->comparisons.size(), 2u);
  EXPECT_EQ(first->comparisons[0].name, "y");
  EXPECT_EQ(MetricValue(Metric::kSqnr, *first), kSqnrCeilingDb);  // y is untouched
  o.output = "z";
  auto z = Evaluate(path("two_scaled.onnx"), o);
  ASSERT_TRUE(z.ok()) << z.status().ToString();
  EXPECT_EQ(z->comparisons[0].name, "z");
  EXPECT_NEAR(MetricValue(Metric::kSqnr, *z), 40.0, 1e-3);
  EXPECT_NEAR(z->task.mean_cosine(), 1.0, 1e-9);
  o.output = "w";
  auto missing = Evaluate(path("two_scaled.onnx"), o);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("output 'w' is not an output of the reference model (its outputs: y, z)"),
            std::string::npos)
      << missing.status().message();
}

TEST(MetricNames, OneTableParsesAndNames) {
  for (const auto& [metric, name] : kMetricNames) {
    EXPECT_STREQ(MetricName(metric), name);
    auto parsed = ParseMetric(name);
    ASSERT_TRUE(parsed.ok());
    EXPECT_EQ(*parsed, metric);
  }
  auto bad = ParseMetric("top3");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("top1, top5, agreement, sqnr, cosine"), std::string::npos)
      << bad.status().message();
}

// Preprocessing is a per-batch transform: it works on a folder of .npy files
// (which the old preprocess-to-a-temporary-.npz path refused) and writes nothing.
TEST(BatchSourceTest, PreprocessAppliesPerBatchOnAFolder) {
  testing::TempDir dir;
  std::filesystem::create_directories(dir.path("nhwc"));
  // 3 uint8 NHWC images 2x2 with 2 channels, split over two files.
  std::vector<uint8_t> pixels(3 * 2 * 2 * 2);
  for (size_t i = 0; i < pixels.size(); ++i) pixels[i] = static_cast<uint8_t>(i * 10);
  Tensor all = Tensor::FromVector<uint8_t>({3, 2, 2, 2}, pixels);
  ASSERT_TRUE(WriteNpy(dir.path("nhwc/a.npy"), SliceRows(all, 0, 2)).ok());
  ASSERT_TRUE(WriteNpy(dir.path("nhwc/b.npy"), SliceRows(all, 2, 1)).ok());
  Graph g;
  g.inputs.push_back(testing::FloatInput("img", {{-1, "n"}, {2, ""}, {2, ""}, {2, ""}}));
  Preprocess p;
  p.scale = 1.0 / 255.0;
  p.layout = DataLayout::kNHWC;
  p.mean = {0.5, 0.25};
  p.stddev = {0.5, 0.25};
  DatasetOptions o;
  o.batch_size = 2;
  o.transform = PreprocessTransform(p, "img");
  auto source = OpenDataset(dir.path("nhwc"), g, o);
  ASSERT_TRUE(source.ok()) << source.status().ToString();
  EXPECT_EQ(source->samples(), 3);
  for (int pass = 0; pass < 2; ++pass) {  // each call starts a new pass
    BatchFn next = (*source)();
    TensorMap batch;
    std::vector<float> got;
    for (;;) {
      auto more = next(&batch);
      ASSERT_TRUE(more.ok()) << more.status().ToString();
      if (!*more) break;
      const Tensor& x = batch.at("img");
      ASSERT_EQ(x.dtype(), DataType::kFloat32);
      ASSERT_EQ(x.dim(1), 2);  // NCHW now
      got.insert(got.end(), x.data<float>(), x.data<float>() + x.numel());
    }
    ASSERT_EQ(got.size(), pixels.size());
    // Sample 0, channel 1, pixel (0, 1): NHWC index (0*2 + 1)*2 + 1 = 3.
    const float expected = static_cast<float>((static_cast<float>(30 * (1.0 / 255.0)) - 0.25) / 0.25);
    EXPECT_FLOAT_EQ(got[(0 * 2 + 1) * 4 + 0 * 2 + 1], expected);
  }
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir.path("nhwc")), {}), 2);  // nothing written

  // Channel lists that do not fit the data are named.
  p.mean = {0.1, 0.2, 0.3};
  o.transform = PreprocessTransform(p, "img");
  auto bad = OpenDataset(dir.path("nhwc"), g, o);
  ASSERT_TRUE(bad.ok());
  TensorMap batch;
  auto more = (*bad)()(&batch);
  ASSERT_FALSE(more.ok());
  EXPECT_NE(more.status().message().find("3 values but the data has 2 channels"), std::string::npos)
      << more.status().message();
}

TEST(BatchSourceTest, OneFixedBatchRule) {
  Graph g;
  g.inputs.push_back(testing::FloatInput("x", {{-1, "n"}, {4, ""}}));
  EXPECT_EQ(FixedBatchSize(g), 0);
  EXPECT_EQ(BatchSizeFor(g, 32), 32);
  EXPECT_EQ(BatchSizeFor(g, 0), 1);
  // Beside a dynamic batch, a fixed-shape input has no sample axis: it fixes nothing.
  g.inputs.push_back(testing::FloatInput("y", {{8, ""}, {4, ""}}));
  EXPECT_EQ(FixedBatchSize(g), 0);
  // A model whose inputs are all fixed runs their first dim at a time.
  g.inputs.erase(g.inputs.begin());
  g.inputs.push_back(testing::FloatInput("z", {{8, ""}, {2, ""}}));
  EXPECT_EQ(FixedBatchSize(g), 8);
  EXPECT_EQ(BatchSizeFor(g, 32), 8);
}

}  // namespace
}  // namespace sparq
