// CompareModels / MatchTensors (sparq/compare.h) on small hand-built models:
// the matching rule for QDQ and FP16 candidates, statistics against an
// independent computation, batching, padding, and the report's forms.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include "evaluate/dataset.h"
#include "sparq/compare.h"
#include "sparq/metrics.h"
#include "sparq/npy.h"
#include "sparq/onnx_io.h"
#include "test_util.h"

namespace sparq {
namespace {

constexpr int64_t kSamples = 10;
constexpr float kScale = 0.02f;  // of the QDQ candidate's input

// x[batch, 4] -> mm: MatMul(W[4, 3]) -> h -> relu: Relu -> y. `batch` < 0: dynamic.
Model Reference(int64_t batch = -1) {
  Model m;
  m.opset_imports = {{"", 17}};
  Graph& g = m.graph;
  g.inputs.push_back(testing::FloatInput("x", {{batch, batch < 0 ? "batch" : ""}, {4, ""}}));
  g.outputs.push_back(testing::FloatInput("y", {{batch, batch < 0 ? "batch" : ""}, {3, ""}}));
  g.initializers["W"] = testing::RandomFloats({4, 3}, 11);
  g.nodes.push_back({"mm", "MatMul", "", {"x", "W"}, {"h"}, {}, ""});
  g.nodes.push_back({"relu", "Relu", "", {"h"}, {"y"}, {}, ""});
  return m;
}

// The reference with its input quantized: x -> Q -> DQ -> x_dequantized -> mm.
Model QdqCandidate(int64_t batch = -1) {
  Model m = Reference(batch);
  Graph& g = m.graph;
  g.initializers["x_scale"] = Tensor::Scalar<float>(kScale);
  g.initializers["x_zero_point"] = Tensor::Scalar<int8_t>(0);
  g.nodes.insert(g.nodes.begin(),
                 {{"x_QuantizeLinear", "QuantizeLinear", "", {"x", "x_scale", "x_zero_point"}, {"x_quantized"}, {}, ""},
                  {"x_DequantizeLinear", "DequantizeLinear", "", {"x_quantized", "x_scale", "x_zero_point"},
                   {"x_dequantized"}, {}, ""}});
  g.nodes[2].inputs[0] = "x_dequantized";
  return m;
}

// The reference in float16 without a Cast back after mm: h's twin is h_fp16.
Model Fp16Candidate() {
  Model m = Reference();
  Graph& g = m.graph;
  g.initializers["W"] = g.initializers["W"].CastTo(DataType::kFloat16);
  g.nodes = {{"x_Cast_fp16", "Cast", "", {"x"}, {"x_fp16"}, {Attribute::Int("to", 10)}, ""},
             {"mm", "MatMul", "", {"x_fp16", "W"}, {"h_fp16"}, {}, ""},
             {"relu", "Relu", "", {"h_fp16"}, {"y_fp16"}, {}, ""},
             {"y_Cast_fp32", "Cast", "", {"y_fp16"}, {"y"}, {Attribute::Int("to", 1)}, ""}};
  return m;
}

Tensor Data() { return testing::RandomFloats({kSamples, 4}, 5); }

// Batches of `batch` rows of `x` (the last may hold fewer).
BatchSource Batches(const Tensor& x, int64_t batch) {
  BatchSource source([x, batch]() -> BatchFn {
    auto next = std::make_shared<int64_t>(0);
    return [x, batch, next](TensorMap* out) -> StatusOr<bool> {
      if (*next >= x.dim(0)) return false;
      const int64_t rows = std::min(batch, x.dim(0) - *next);
      (*out)["x"] = SliceRows(x, *next, rows);
      *next += rows;
      return true;
    };
  });
  source.set_name("memory").set_size(batch, x.dim(0), x.dim(0));
  return source;
}

const TensorComparison* Find(const CompareReport& r, const std::string& name) {
  for (const TensorComparison& c : r.tensors)
    if (c.match.name == name) return &c;
  return nullptr;
}

TEST(MatchTensors, QdqPairsEachValueWithWhatItsConsumersRead) {
  std::vector<UnmatchedTensor> unmatched;
  const std::vector<TensorMatch> m = MatchTensors(Reference(), QdqCandidate(), &unmatched);
  ASSERT_EQ(m.size(), 3u);
  EXPECT_EQ(m[0].name, "x");
  EXPECT_EQ(m[0].candidate_name, "x_dequantized");
  EXPECT_EQ(m[0].kind, TensorMatchKind::kDequantized);
  EXPECT_EQ(m[0].op_type, "");
  EXPECT_EQ(m[1].candidate_name, "h");
  EXPECT_EQ(m[1].kind, TensorMatchKind::kSameName);
  EXPECT_EQ(m[1].op_type, "MatMul");
  EXPECT_EQ(m[2].index, 2);
  EXPECT_TRUE(unmatched.empty());
}

TEST(MatchTensors, Fp16PairsByCastBackOrByNodeName) {
  const std::vector<TensorMatch> m = MatchTensors(Reference(), Fp16Candidate());
  ASSERT_EQ(m.size(), 3u);
  EXPECT_EQ(m[0].candidate_name, "x");
  EXPECT_EQ(m[1].candidate_name, "h_fp16");
  EXPECT_EQ(m[1].kind, TensorMatchKind::kNodeOutput);
  EXPECT_EQ(m[2].candidate_name, "y");  // the Cast back to float32
  EXPECT_EQ(m[2].kind, TensorMatchKind::kSameName);
}

TEST(MatchTensors, ValuesWithoutCounterpartAreListed) {
  Model cand = Reference();
  cand.graph.nodes[0].name = "renamed";
  cand.graph.nodes[0].outputs[0] = "h2";
  cand.graph.nodes[1].inputs[0] = "h2";
  std::vector<UnmatchedTensor> unmatched;
  EXPECT_EQ(MatchTensors(Reference(), cand, &unmatched).size(), 2u);
  ASSERT_EQ(unmatched.size(), 1u);
  EXPECT_EQ(unmatched[0].name, "h");
  EXPECT_EQ(unmatched[0].index, 1);
}

TEST(CompareModels, QdqInputErrorMatchesAnIndependentFakeQuant) {
  const Tensor x = Data();
  auto report = CompareModels(Reference(), QdqCandidate(), Batches(x, 3));
  ASSERT_TRUE(report.ok()) << report.status().message();
  EXPECT_EQ(report->samples, kSamples);
  EXPECT_EQ(report->batches, 4);
  ASSERT_EQ(report->tensors.size(), 3u);
  EXPECT_TRUE(report->unmatched.empty());

  // x rounded to multiples of kScale (values in [-1, 1]: no saturation).
  Tensor fake = x.Clone();
  for (int64_t i = 0; i < fake.numel(); ++i)
    fake.data<float>()[i] = std::nearbyint(fake.data<float>()[i] / kScale) * kScale;
  ErrorStats expected;
  ASSERT_TRUE(expected.Add(x, fake).ok());
  const TensorComparison* input = Find(*report, "x");
  ASSERT_NE(input, nullptr);
  EXPECT_EQ(input->elements, kSamples * 4);
  EXPECT_NEAR(input->sqnr_db, expected.sqnr_db(), 1e-4);
  EXPECT_NEAR(input->max_abs_error, expected.max_abs_error(), 1e-6);
  EXPECT_NEAR(input->cosine, expected.cosine(), 1e-9);
  // Worst first, every SQNR finite and ascending.
  for (size_t i = 1; i < report->tensors.size(); ++i)
    EXPECT_LE(report->tensors[i - 1].sqnr_db, report->tensors[i].sqnr_db);
}

TEST(CompareModels, StatisticsDoNotDependOnTheBatch) {
  const Tensor x = Data();
  auto one = CompareModels(Reference(), QdqCandidate(), Batches(x, 1));
  auto all = CompareModels(Reference(), QdqCandidate(), Batches(x, kSamples));
  ASSERT_TRUE(one.ok() && all.ok());
  ASSERT_EQ(one->tensors.size(), all->tensors.size());
  for (size_t i = 0; i < one->tensors.size(); ++i) {
    EXPECT_EQ(one->tensors[i].match.name, all->tensors[i].match.name);
    EXPECT_EQ(one->tensors[i].elements, all->tensors[i].elements);
    EXPECT_NEAR(one->tensors[i].sqnr_db, all->tensors[i].sqnr_db, 1e-6);
  }
}

TEST(CompareModels, FixedBatchPadsTheLastBatchAndComparesOnlyRealSamples) {
  const Tensor x = Data();
  auto padded = CompareModels(Reference(4), QdqCandidate(4), Batches(x, 4));
  auto dynamic = CompareModels(Reference(), QdqCandidate(), Batches(x, 4));
  ASSERT_TRUE(padded.ok()) << padded.status().message();
  ASSERT_TRUE(dynamic.ok());
  EXPECT_EQ(padded->batch_size, 4);
  for (const TensorComparison& c : padded->tensors) {
    const TensorComparison* d = Find(*dynamic, c.match.name);
    ASSERT_NE(d, nullptr);
    EXPECT_EQ(c.elements, d->elements) << c.match.name;
    EXPECT_NEAR(c.sqnr_db, d->sqnr_db, 1e-6) << c.match.name;
  }
  auto disagree = CompareModels(Reference(4), QdqCandidate(2), Batches(x, 4));
  ASSERT_FALSE(disagree.ok());
  EXPECT_NE(disagree.status().message().find("batch of 4"), std::string::npos) << disagree.status().message();
}

TEST(CompareModels, Fp16IdenticalInputsSortLastAndFloat16IsRead) {
  auto report = CompareModels(Reference(), Fp16Candidate(), Batches(Data(), 4));
  ASSERT_TRUE(report.ok()) << report.status().message();
  ASSERT_EQ(report->tensors.size(), 3u);
  EXPECT_EQ(report->tensors.back().match.name, "x");
  EXPECT_TRUE(std::isinf(report->tensors.back().sqnr_db));
  const TensorComparison* h = Find(*report, "h");
  ASSERT_NE(h, nullptr);
  EXPECT_EQ(h->match.candidate_name, "h_fp16");
  EXPECT_GT(h->sqnr_db, 40.0);  // float16 rounding only
  EXPECT_TRUE(std::isfinite(h->sqnr_db));
}

TEST(CompareModels, UnusablePairsAreListedWithTheReason) {
  // The candidate's h is int32: the pair exists but cannot be compared.
  Model cand = Reference();
  cand.graph.nodes[0].outputs[0] = "h_float";
  cand.graph.nodes.insert(cand.graph.nodes.begin() + 1,
                          {"to_int", "Cast", "", {"h_float"}, {"h"}, {Attribute::Int("to", 6)}, ""});
  cand.graph.nodes.insert(cand.graph.nodes.begin() + 2,
                          {"to_float", "Cast", "", {"h"}, {"h_back"}, {Attribute::Int("to", 1)}, ""});
  cand.graph.nodes[3].inputs[0] = "h_back";
  auto report = CompareModels(Reference(), cand, Batches(Data(), 4));
  ASSERT_TRUE(report.ok()) << report.status().message();
  ASSERT_EQ(report->unmatched.size(), 1u);
  EXPECT_EQ(report->unmatched[0].name, "h");
  EXPECT_NE(report->unmatched[0].reason.find("int32"), std::string::npos) << report->unmatched[0].reason;
  EXPECT_EQ(report->tensors.size(), 2u);

  Model unrelated = Reference();
  for (Node& n : unrelated.graph.nodes) n.name += "_other";
  unrelated.graph.inputs[0].name = "z";
  unrelated.graph.nodes[0].inputs[0] = "z";
  unrelated.graph.nodes[0].outputs[0] = "h_other";
  unrelated.graph.nodes[1].inputs[0] = "h_other";
  unrelated.graph.nodes[1].outputs[0] = "y_other";
  unrelated.graph.outputs[0].name = "y_other";
  auto none = CompareModels(Reference(), unrelated, Batches(Data(), 4));
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.status().message().find("no value of the reference"), std::string::npos);
}

// x / d with d's first entry 0: column 0 is +-inf in both models, equal, and
// the candidate's last column differs. SQNR is inf / error = +inf, which is
// no exact match: the tensor sorts first and is not "identical".
Model Divide(float last) {
  Model m;
  m.opset_imports = {{"", 17}};
  m.graph.inputs.push_back(testing::FloatInput("x", {{-1, "batch"}, {4, ""}}));
  m.graph.outputs.push_back(testing::FloatInput("q", {{-1, "batch"}, {4, ""}}));
  m.graph.initializers["d"] = Tensor::FromVector<float>({4}, {0.0f, 1.0f, 1.0f, last});
  m.graph.nodes.push_back({"div", "Div", "", {"x", "d"}, {"q"}, {}, ""});
  return m;
}

TEST(CompareModels, InfinitiesInTheReferenceAreNotAnExactMatch) {
  auto report = CompareModels(Divide(1.0f), Divide(2.0f), Batches(Data(), 4));
  ASSERT_TRUE(report.ok()) << report.status().message();
  ASSERT_EQ(report->tensors.size(), 2u);
  const TensorComparison& q = report->tensors[0];
  EXPECT_EQ(q.match.name, "q");
  EXPECT_FALSE(q.identical());
  EXPECT_GT(q.max_abs_error, 0.0);
  EXPECT_TRUE(report->tensors[1].identical());  // x
  EXPECT_NE(report->ToJson().find("\"identical\": false"), std::string::npos);
  EXPECT_EQ(report->ToText().find("identical"), report->ToText().rfind("identical"));  // only x's row
}

TEST(CompareModels, InputsWithOtherNamesPairByPosition) {
  Model cand = QdqCandidate();
  cand.graph.inputs[0].name = "image";
  cand.graph.nodes[0].inputs[0] = "image";
  auto report = CompareModels(Reference(), cand, Batches(Data(), 4));
  ASSERT_TRUE(report.ok()) << report.status().message();
  // x has no counterpart by name now; h and y still compare.
  EXPECT_EQ(report->tensors.size(), 2u);
  ASSERT_EQ(report->unmatched.size(), 1u);
  EXPECT_EQ(report->unmatched[0].name, "x");
  EXPECT_EQ(report->unmatched[0].reason, "no counterpart in the candidate");

  // A value that is not floating point is no tensor to compare: not listed.
  Model with_shape = Reference();
  with_shape.graph.nodes.push_back({"shape", "Shape", "", {"x"}, {"x_shape"}, {}, ""});
  with_shape.graph.outputs.push_back(testing::FloatInput("x_shape", {{2, ""}}));
  with_shape.graph.outputs.back().dtype = DataType::kInt64;
  auto ints = CompareModels(with_shape, QdqCandidate(), Batches(Data(), 4));
  ASSERT_TRUE(ints.ok()) << ints.status().message();
  EXPECT_EQ(ints->tensors.size(), 3u);
  EXPECT_TRUE(ints->unmatched.empty());
}

TEST(CompareModels, ProgressCanCancel) {
  CompareOptions options;
  int calls = 0;
  options.on_progress = [&](EvalProgress& p) {
    ++calls;
    EXPECT_EQ(p.total, kSamples);
    p.cancel = true;
  };
  auto report = CompareModels(Reference(), QdqCandidate(), Batches(Data(), 4), options);
  EXPECT_EQ(report.status().code(), StatusCode::kCancelled);
  EXPECT_EQ(calls, 1);
}

TEST(CompareReport, TextJsonAndSvg) {
  auto report = CompareModels(Reference(), QdqCandidate(), Batches(Data(), 4));
  ASSERT_TRUE(report.ok());
  report->reference = "ref <a>.onnx";
  const std::string text = report->ToText(1);
  EXPECT_NE(text.find("Tensors, worst SQNR first (1 of 3)"), std::string::npos) << text;
  EXPECT_NE(text.find(report->tensors[0].match.name), std::string::npos);

  const std::string json = report->ToJson();
  EXPECT_NE(json.find("\"schema_version\": 2"), std::string::npos);
  EXPECT_NE(json.find("\"match\": \"dequantized\""), std::string::npos) << json;

  const std::string svg = report->ToSvg();
  EXPECT_EQ(svg.rfind("<svg xmlns=\"http://www.w3.org/2000/svg\"", 0), 0u);
  EXPECT_NE(svg.find("ref &lt;a&gt;.onnx"), std::string::npos);
  EXPECT_NE(svg.find("<polyline"), std::string::npos);
  size_t circles = 0;
  for (size_t pos = svg.find("<circle"); pos != std::string::npos; pos = svg.find("<circle", pos + 1)) ++circles;
  EXPECT_EQ(circles, 3u);
  EXPECT_NE(svg.find("worst: " + report->tensors[0].match.name), std::string::npos);
}

TEST(Compare, FilesAndPlot) {
  testing::TempDir dir;
  ASSERT_TRUE(SaveModel(Reference(), dir.path("ref.onnx")).ok());
  ASSERT_TRUE(SaveModel(QdqCandidate(), dir.path("qdq.onnx")).ok());
  ASSERT_TRUE(WriteNpz(dir.path("x.npz"), {{"x", Data()}}).ok());
  CompareOptions options;
  options.inputs = dir.path("x.npz");
  options.limit = 7;
  options.batch = 2;
  options.plot = dir.path("sqnr.svg");
  auto report = Compare(dir.path("ref.onnx"), dir.path("qdq.onnx"), options);
  ASSERT_TRUE(report.ok()) << report.status().message();
  EXPECT_EQ(report->samples, 7);
  EXPECT_EQ(report->batches, 4);
  EXPECT_EQ(report->plot, options.plot);
  EXPECT_TRUE(std::filesystem::exists(options.plot));

  options.plot = dir.path("ref.onnx");
  EXPECT_FALSE(Compare(dir.path("ref.onnx"), dir.path("qdq.onnx"), options).ok());
  options.plot = dir.path("plot.png");
  EXPECT_FALSE(Compare(dir.path("ref.onnx"), dir.path("qdq.onnx"), options).ok());
  options.plot = "";
  auto missing = Compare(dir.path("nope.onnx"), dir.path("qdq.onnx"), options);
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound) << missing.status().message();
}

}  // namespace
}  // namespace sparq
