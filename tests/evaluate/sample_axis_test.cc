// Inputs whose samples are not on axis 0, inputs without a sample axis, and
// constants: where the batch goes is the model's shape's choice, and data
// that does not fit it is an error naming the input (issue 24).
#include <gtest/gtest.h>

#include "evaluate/dataset.h"
#include "sparq/dataset.h"
#include "sparq/commands.h"
#include "sparq/compare.h"
#include "sparq/evaluate.h"
#include "sparq/npy.h"
#include "sparq/onnx_io.h"
#include "test_util.h"

namespace sparq {
namespace {

using testing::SampleAxisExpected;
using testing::SampleAxisModel;

bool Contains(const std::string& text, const std::string& needle) { return text.find(needle) != std::string::npos; }

TEST(SampleAxes, FromTheModelsDims) {
  Graph g = SampleAxisModel().graph;
  auto axes = SampleAxes(g);
  EXPECT_EQ(axes["x"], 0);
  EXPECT_EQ(axes["sr"], kNoSampleAxis);
  EXPECT_EQ(axes["state"], 1);  // the dim named like x's batch
  EXPECT_EQ(FixedBatchSize(g), 0);  // state's fixed 2 is not a batch
  EXPECT_EQ(BatchSizeFor(g, 3), 3);
  // An unnamed dynamic dim: the first dynamic one.
  EXPECT_EQ(SampleAxes(SampleAxisModel(true).graph)["state"], 1);
  // Pinned inputs have none.
  EXPECT_EQ(SampleAxes(g, {"state"})["state"], kNoSampleAxis);
  // A fixed [1] beside a dynamic batch: none.
  g.inputs[1].dims = {{1, ""}};
  EXPECT_EQ(SampleAxes(g)["sr"], kNoSampleAxis);

  // A fixed batch: every input of rank >= 1 keeps axis 0 (as it always did),
  // scalars have none, inputs without a declared shape take axis 0.
  Graph fixed;
  fixed.inputs.push_back(testing::FloatInput("x", {{1, ""}, {-1, "seq"}}));
  fixed.inputs.push_back(testing::FloatInput("s", {}));
  ValueInfo free;
  free.name = "free";
  free.dtype = DataType::kFloat32;
  fixed.inputs.push_back(free);
  auto fixed_axes = SampleAxes(fixed);
  EXPECT_EQ(fixed_axes["x"], 0);
  EXPECT_EQ(fixed_axes["s"], kNoSampleAxis);
  EXPECT_EQ(fixed_axes["free"], 0);
  EXPECT_EQ(FixedBatchSize(fixed), 1);
}

TEST(SampleAxes, MoveSliceConcatAndPadAlongAnAxis) {
  // [S=3, 2, 2] -> [2, 3, 2]: out[o, s, i] = in[s, o, i].
  std::vector<float> v(12);
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i);
  Tensor rows = Tensor::FromVector<float>({3, 2, 2}, v);
  Tensor moved = MoveFirstAxisTo(rows, 1);
  ASSERT_EQ(moved.shape(), (Shape{2, 3, 2}));
  EXPECT_EQ(moved.data<float>()[(1 * 3 + 2) * 2 + 1], v[(2 * 2 + 1) * 2 + 1]);
  EXPECT_TRUE(MoveFirstAxisTo(rows, 0).Equals(rows));

  Tensor mid = SliceAxis(moved, 1, 1, 2);  // samples 1, 2
  ASSERT_EQ(mid.shape(), (Shape{2, 2, 2}));
  EXPECT_TRUE(mid.Equals(MoveFirstAxisTo(SliceRows(rows, 1, 2), 1)));
  auto joined = ConcatAxis({SliceAxis(moved, 1, 0, 1), mid}, 1, "state");
  ASSERT_TRUE(joined.ok()) << joined.status().message();
  EXPECT_TRUE(joined->Equals(moved));
  EXPECT_FALSE(ConcatAxis({moved, Tensor(DataType::kFloat32, {3, 1, 2})}, 1, "state").ok());

  // Padding repeats the last sample along each input's axis; constants stay.
  TensorMap batch{{"state", mid}, {"sr", Tensor::Scalar<float>(2)}, {"x", Tensor(DataType::kFloat32, {2, 4})}};
  std::map<std::string, int> axes{{"state", 1}, {"sr", kNoSampleAxis}};
  auto padded = PadSamples(batch, axes, 2, 4);
  ASSERT_TRUE(padded.ok()) << padded.status().message();
  EXPECT_EQ(padded->at("state").shape(), (Shape{2, 4, 2}));
  EXPECT_TRUE(SliceAxis(padded->at("state"), 1, 3, 1).Equals(SliceAxis(mid, 1, 1, 1)));
  EXPECT_EQ(padded->at("x").shape(), (Shape{4, 4}));
  EXPECT_EQ(padded->at("sr").rank(), 0u);
  TensorMap first = SliceSamples(*padded, axes, 0, 1);
  EXPECT_EQ(first.at("state").shape(), (Shape{2, 1, 2}));
  EXPECT_EQ(first.at("x").shape(), (Shape{1, 4}));
  EXPECT_EQ(first.at("sr").rank(), 0u);

  BatchSource source;
  source.set_sample_axes(axes);
  EXPECT_EQ(source.SamplesIn(batch), 2);  // "sr" comes first by name but has no sample axis
}

TEST(SampleAxes, ConstantsTakeTheInputsTypeAndShape) {
  ValueInfo sr = testing::FloatInput("sr", {});
  auto c = ConstantInput(sr, {16000});
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->rank(), 0u);
  EXPECT_EQ(c->data<float>()[0], 16000.0f);
  ValueInfo pair = testing::FloatInput("pair", {{2, ""}});
  pair.dtype = DataType::kInt64;
  auto p = ConstantInput(pair, {3, 4});
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->dtype(), DataType::kInt64);
  EXPECT_EQ(p->ToInt64Vector(), (std::vector<int64_t>{3, 4}));
  EXPECT_TRUE(Contains(ConstantInput(pair, {1}).status().message(), "constant for input 'pair': 1 value given"));
  EXPECT_TRUE(Contains(ConstantInput(pair, {1.5, 2}).status().message(), "1.5 is not a whole number"));
  EXPECT_TRUE(Contains(ConstantInput(testing::FloatInput("state", {{2, ""}, {-1, "N"}}), {0, 0}).status().message(),
                       "has a dynamic dim"));

  auto parsed = ParseConstant("sr=16000");
  ASSERT_TRUE(parsed.ok());
  EXPECT_EQ(parsed->first, "sr");
  EXPECT_EQ(parsed->second, (std::vector<double>{16000}));
  EXPECT_EQ(ParseConstant("v=1,2.5,-3")->second, (std::vector<double>{1, 2.5, -3}));
  EXPECT_TRUE(Contains(ParseConstant("sr").status().message(), "expected name=value"));
  EXPECT_TRUE(Contains(ParseConstant("=1").status().message(), "no input name"));
  EXPECT_TRUE(Contains(ParseConstant("sr=16k").status().message(), "'16k' is not a number"));
  EXPECT_TRUE(Contains(ParseConstant("v=1,,2").status().message(), "'' is not a number"));
}

class SampleAxisEval : public ::testing::Test {
 protected:
  static constexpr int64_t kSamples = 7;
  void SetUp() override {
    ASSERT_TRUE(SaveModel(SampleAxisModel(), path("model.onnx")).ok());
    x_ = testing::RandomFloats({kSamples, 4}, 1);
    state_ = testing::RandomFloats({kSamples, 2, 4}, 2);  // samples first, as the files hold them
    NamedTensors data{{"x", x_}, {"sr", Tensor::Scalar<float>(2.5f)}, {"state", state_}};
    ASSERT_TRUE(WriteNpz(path("data.npz"), data).ok());
    NamedTensors no_sr{{"x", x_}, {"state", state_}};
    ASSERT_TRUE(WriteNpz(path("no_sr.npz"), no_sr).ok());
  }
  std::string path(const std::string& name) const { return dir_.path(name); }
  // Evaluates with `o` and returns the saved y; checks the saved new_state
  // (10 * state), written samples first as the data files hold them.
  Tensor SavedY(EvalOptions o) {
    o.save_outputs = path("out.npz");
    auto r = Evaluate(path("model.onnx"), o);
    EXPECT_TRUE(r.ok()) << r.status().message();
    if (!r.ok()) return Tensor();
    EXPECT_EQ(r->samples, kSamples);
    auto saved = ReadArrays(path("out.npz"));
    EXPECT_TRUE(saved.ok());
    if (!saved.ok() || saved->size() != 2) return Tensor();
    const Tensor& new_state = (*saved)[1].second;
    EXPECT_EQ((*saved)[1].first, "new_state");
    EXPECT_EQ(new_state.shape(), state_.shape());
    if (new_state.shape() == state_.shape()) {
      for (int64_t i = 0; i < new_state.numel(); ++i)
        EXPECT_NEAR(new_state.data<float>()[i], 10.0f * state_.data<float>()[i], 1e-5) << i;
    }
    return (*saved)[0].second;
  }
  std::string Error(EvalOptions o) {
    auto r = Evaluate(path("model.onnx"), o);
    EXPECT_FALSE(r.ok());
    return r.ok() ? "" : r.status().message();
  }

  testing::TempDir dir_;
  Tensor x_, state_;
};

TEST_F(SampleAxisEval, ScalarAndStateInputsAtBatchOneAndThree) {
  const Tensor expected = SampleAxisExpected(x_, 2.5f, state_);
  for (int64_t batch : {1, 3}) {
    SCOPED_TRACE("batch " + std::to_string(batch));
    EvalOptions o;
    o.inputs = path("data.npz");
    o.batch = batch;
    Tensor y = SavedY(o);
    ASSERT_EQ(y.shape(), expected.shape());
    for (int64_t i = 0; i < y.numel(); ++i) EXPECT_NEAR(y.data<float>()[i], expected.data<float>()[i], 1e-5) << i;
  }
}

TEST_F(SampleAxisEval, ConstantPinsTheScalar) {
  EvalOptions o;
  o.inputs = path("no_sr.npz");
  o.batch = 3;
  o.constants["sr"] = {-1.5};
  const Tensor expected = SampleAxisExpected(x_, -1.5f, state_);
  Tensor y = SavedY(o);
  ASSERT_EQ(y.shape(), expected.shape());
  for (int64_t i = 0; i < y.numel(); ++i) EXPECT_NEAR(y.data<float>()[i], expected.data<float>()[i], 1e-5) << i;

  // Without it the file misses sr; with it and sr in the file, one must go.
  o.constants.clear();
  EXPECT_TRUE(Contains(Error(o), "missing input 'sr'"));
  o.inputs = path("data.npz");
  o.constants["sr"] = {1};
  EXPECT_TRUE(Contains(Error(o), "array 'sr' feeds input 'sr', which is pinned to a constant"));
  o.inputs = path("no_sr.npz");
  o.constants = {{"rate", {1}}};
  EXPECT_TRUE(Contains(Error(o), "constant for input 'rate': the model has no such input (inputs: x, sr, state)"));
  o.constants = {{"sr", {1, 2}}};
  EXPECT_TRUE(Contains(Error(o), "constant for input 'sr': 2 values given, the input float32[] holds 1"));
}

// `sparq calibrate --constant` and `sparq compare --constant`: the same pin
// as eval's, through CalibrateFilesOptions / CompareOptions::constants.
TEST_F(SampleAxisEval, CalibrateAndCompareTakeConstantsToo) {
  CalibrateFilesOptions c;
  c.model = path("model.onnx");
  c.data = path("no_sr.npz");
  c.output = path("scales.json");
  c.batch_size = 3;
  c.calibration.method = CalibrationMethod::kMax;
  auto missing = CalibrateFiles(c);
  ASSERT_FALSE(missing.ok());
  EXPECT_TRUE(Contains(missing.status().message(), "missing input 'sr'")) << missing.status().message();
  c.constants["sr"] = {2};
  auto table = CalibrateFiles(c);
  ASSERT_TRUE(table.ok()) << table.status().message();
  CompareOptions o;
  o.inputs = path("no_sr.npz");
  o.constants["sr"] = {2};
  auto report = Compare(path("model.onnx"), path("model.onnx"), o);
  ASSERT_TRUE(report.ok()) << report.status().message();
  o.constants.clear();
  EXPECT_FALSE(Compare(path("model.onnx"), path("model.onnx"), o).ok());
}

TEST_F(SampleAxisEval, DataThatDoesNotFitTheStateIsAnErrorNamingTheInput) {
  EvalOptions o;
  o.batch = 3;
  // [2, N, 4] fed with [S, 4]: the state's rank does not fit.
  NamedTensors flat{{"x", x_}, {"sr", Tensor::Scalar<float>(1)}, {"state", testing::RandomFloats({kSamples, 4}, 3)}};
  ASSERT_TRUE(WriteNpz(path("flat.npz"), flat).ok());
  o.inputs = path("flat.npz");
  std::string e = Error(o);
  EXPECT_TRUE(Contains(e, "array 'state' has shape [7, 4], model input 'state' expects float32[2, N, 4]")) << e;
  EXPECT_TRUE(Contains(e, "go to axis 1 of the input, so the file needs [S, 2, 4]")) << e;
  // Already in the model's layout ([2, S, 4]): the sample counts and dims do not fit.
  NamedTensors model_layout{{"x", x_}, {"sr", Tensor::Scalar<float>(1)}, {"state", MoveFirstAxisTo(state_, 1)}};
  ASSERT_TRUE(WriteNpz(path("model_layout.npz"), model_layout).ok());
  o.inputs = path("model_layout.npz");
  e = Error(o);
  EXPECT_TRUE(Contains(e, "array 'state' has shape [2, 7, 4], model input 'state' expects float32[2, N, 4]")) << e;
  // A wrong trailing dim.
  NamedTensors wide{{"x", x_}, {"sr", Tensor::Scalar<float>(1)}, {"state", testing::RandomFloats({kSamples, 2, 5}, 4)}};
  ASSERT_TRUE(WriteNpz(path("wide.npz"), wide).ok());
  o.inputs = path("wide.npz");
  EXPECT_TRUE(Contains(Error(o), "array 'state' has shape [7, 2, 5], model input 'state' expects float32[2, N, 4]"));
  // A scalar input given one value per sample.
  NamedTensors per_sample{{"x", x_}, {"sr", testing::RandomFloats({kSamples}, 5)}, {"state", state_}};
  ASSERT_TRUE(WriteNpz(path("per_sample.npz"), per_sample).ok());
  o.inputs = path("per_sample.npz");
  e = Error(o);
  EXPECT_TRUE(Contains(e, "array 'sr' has shape [7], model input 'sr' expects float32[]: the input has no sample axis"))
      << e;
}

// A model whose every input is fixed (batch 1, as exported for a device):
// an input whose dim 0 is not the batch (a state [2, 1, 4]) has no sample
// axis, so samples of it are an error naming the shape it needs, and one
// array of exactly its shape is fed to every batch.
TEST_F(SampleAxisEval, AFixedBatchThatAnInputsDimZeroIsNotMakesItFixedShape) {
  Model m = SampleAxisModel();
  m.graph.inputs[0].dims[0] = {1, ""};
  m.graph.inputs[2].dims[1] = {1, ""};
  m.graph.outputs[0].dims[0] = {1, ""};
  ASSERT_TRUE(SaveModel(m, path("fixed.onnx")).ok());
  EXPECT_EQ(SampleAxes(m.graph).at("state"), kNoSampleAxis);
  EXPECT_EQ(SampleAxes(m.graph).at("x"), 0);
  EvalOptions o;
  o.inputs = path("data.npz");
  auto r = Evaluate(path("fixed.onnx"), o);
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(Contains(r.status().message(), "model input 'state' expects float32[2, 1, 4]: the input has no sample axis"))
      << r.status().message();
  NamedTensors one_state{{"x", x_}, {"sr", Tensor::Scalar<float>(2.0f)},
                         {"state", testing::RandomFloats({2, 1, 4}, 9)}};
  ASSERT_TRUE(WriteNpz(path("one_state.npz"), one_state).ok());
  o.inputs = path("one_state.npz");
  auto ok = Evaluate(path("fixed.onnx"), o);
  ASSERT_TRUE(ok.ok()) << ok.status().message();
  EXPECT_EQ(ok->samples, kSamples);
}

TEST_F(SampleAxisEval, EvaluatorOnTheBatchSourceComparesWithAReference) {
  Model model = SampleAxisModel();
  DatasetOptions d;
  d.batch_size = 3;
  d.constants["sr"] = {2};
  auto data = OpenDataset(path("no_sr.npz"), model.graph, d);
  ASSERT_TRUE(data.ok()) << data.status().message();
  EXPECT_EQ(data->SampleAxisOf("state"), 1);
  EXPECT_EQ(data->SampleAxisOf("sr"), kNoSampleAxis);
  BatchFn next = (*data)();
  TensorMap batch;
  ASSERT_TRUE(*next(&batch));
  EXPECT_EQ(batch.at("state").shape(), (Shape{2, 3, 4}));
  EXPECT_EQ(batch.at("sr").rank(), 0u);
  EXPECT_EQ(data->SamplesIn(batch), 3);

  auto ev = Evaluator::Create(model, *data);
  ASSERT_TRUE(ev.ok()) << ev.status().message();
  EXPECT_EQ((*ev)->reference_report().samples, kSamples);
  auto same = (*ev)->Evaluate(model);
  ASSERT_TRUE(same.ok()) << same.status().message();
  EXPECT_EQ(same->samples, kSamples);
  EXPECT_EQ(same->comparisons[0].max_abs_error, 0.0);
  EXPECT_EQ(same->comparisons[1].name, "new_state");
  EXPECT_EQ(same->comparisons[1].max_abs_error, 0.0);
}

TEST(SampleAxes, OutputsAndTheInverseMove) {
  Graph g = SampleAxisModel().graph;
  EXPECT_EQ(OutputSampleAxis(g, g.outputs[0]), 0);
  EXPECT_EQ(OutputSampleAxis(g, g.outputs[1]), 1);
  Tensor rows = testing::RandomFloats({3, 2, 5}, 9);
  EXPECT_TRUE(MoveAxisToFirst(MoveFirstAxisTo(rows, 1), 1).Equals(rows));
  EXPECT_TRUE(MoveAxisToFirst(MoveFirstAxisTo(rows, 2), 2).Equals(rows));
}

}  // namespace
}  // namespace sparq
