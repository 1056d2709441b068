// The float32 LSTM, GRU and RNN rows (kernels/cpu/recurrent_f32.cc) through the
// executor against the reference (kernels/ref/recurrent.cc): every direction,
// both layouts, sequence_lens shorter than the sequence (and 0), initial
// states, with and without B; LSTM's peepholes, GRU's linear_before_reset 0
// and 1; within kLstmF32AbsTol / kGruF32AbsTol / kRnnF32AbsTol (the fast rows sum in float),
// the same bits for 1 and 2 threads (hidden sizes where two threads split a
// step's GEMV among them too), on every ISA this CPU has; nodes they do
// not take (clip, other activations, W fed at run time) run the reference.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "sparq/executor.h"
#include "test_util.h"
#include "tests/kernels/isa_sweep.h"

namespace sparq {
namespace {

// Float sums of up to a few hundred products of values below 1 against the
// reference's double sums, through a few steps of the recurrence.
constexpr float kLstmF32AbsTol = 2e-5f;
// The same for GRU's gates (sums of up to 96 products here; the largest
// difference seen on an AVX-512 machine was 1.2e-6).
constexpr float kGruF32AbsTol = 2e-5f;
// The same for RNN's Tanh (sums of up to 300 products here, as madmom's
// onset networks: 266 inputs and 25 units).
constexpr float kRnnF32AbsTol = 2e-5f;

class LstmF32Test : public testing::IsaSweepTest {};
class GruF32Test : public testing::IsaSweepTest {};
class RnnF32Test : public testing::IsaSweepTest {};

Tensor Random(Shape shape, uint32_t seed, float scale = 0.5f) {
  return testing::RandomFloats(std::move(shape), seed, -scale, scale, 0.0f);
}

struct RecurrentCase {
  std::string op = "LSTM";  // or "GRU", "RNN"
  std::string direction = "forward";
  int64_t layout = 0;
  int64_t seq = 5, batch = 3, input = 7, hidden = 6;
  bool bias = true, peepholes = false, initial = false, lens = false;
  int64_t linear_before_reset = 0;      // GRU
  bool weights_as_inputs = false;       // W fed at run time: the reference runs it
  std::vector<Attribute> extra;         // e.g. clip: the reference runs it
};

ValueInfo Input(const std::string& name, const Shape& shape) {
  std::vector<Dim> dims;
  for (int64_t d : shape) dims.push_back({d, ""});
  return testing::FloatInput(name, dims);
}

struct RecurrentRun {
  TensorMap outputs;
  std::vector<TensorMap> again;  // the outputs of the same executor's later runs (RunRecurrent's `runs`)
  std::string kernel;
};

RecurrentRun RunRecurrent(const RecurrentCase& c, bool reference, int threads, int runs = 1) {
  const bool lstm = c.op == "LSTM";
  const int64_t dirs = c.direction == "bidirectional" ? 2 : 1;
  const int64_t rows = (lstm ? 4 : c.op == "GRU" ? 3 : 1) * c.hidden;
  Model m;
  m.opset_imports = {{"", 14}};
  const Shape x_shape = c.layout == 0 ? Shape{c.seq, c.batch, c.input} : Shape{c.batch, c.seq, c.input};
  const Shape state = c.layout == 0 ? Shape{dirs, c.batch, c.hidden} : Shape{c.batch, dirs, c.hidden};
  TensorMap feeds{{"x", Random(x_shape, 1, 1.0f)}};
  m.graph.inputs.push_back(Input("x", x_shape));
  const Tensor w = Random({dirs, rows, c.input}, 2), r = Random({dirs, rows, c.hidden}, 3);
  if (c.weights_as_inputs) {
    m.graph.inputs.push_back(Input("w", w.shape()));
    feeds["w"] = w;
  } else {
    m.graph.initializers["w"] = w;
  }
  m.graph.initializers["r"] = r;
  std::vector<std::string> inputs = {"x", "w", "r", "", "", "", "", ""};
  if (c.bias) m.graph.initializers["b"] = Random({dirs, 2 * rows}, 4), inputs[3] = "b";
  if (c.lens) {
    Tensor lens(DataType::kInt32, {c.batch});
    for (int64_t b = 0; b < c.batch; ++b)  // seq, seq - 1, ..., 0, seq, ...
      lens.data<int32_t>()[b] = static_cast<int32_t>((c.seq - b + (c.seq + 1) * c.batch) % (c.seq + 1));
    if (c.batch > 2) lens.data<int32_t>()[2] = 0;
    m.graph.initializers["lens"] = lens, inputs[4] = "lens";
  }
  if (c.initial) {
    m.graph.inputs.push_back(Input("h0", state));
    feeds["h0"] = Random(state, 5), inputs[5] = "h0";
    if (lstm) {
      m.graph.inputs.push_back(Input("c0", state));
      feeds["c0"] = Random(state, 6, 2.0f), inputs[6] = "c0";
    }
  }
  if (c.peepholes) m.graph.initializers["p"] = Random({dirs, 3 * c.hidden}, 7), inputs[7] = "p";
  while (!inputs.empty() && inputs.back().empty()) inputs.pop_back();
  const std::vector<std::string> outputs = lstm ? std::vector<std::string>{"y", "y_h", "y_c"}
                                                : std::vector<std::string>{"y", "y_h"};
  for (const std::string& out : outputs) {
    m.graph.outputs.push_back(testing::FloatInput(out, {}));
    m.graph.outputs.back().has_shape = false;
  }
  std::vector<Attribute> attrs = c.extra;
  attrs.push_back(Attribute::String("direction", c.direction));
  attrs.push_back(Attribute::Int("hidden_size", c.hidden));
  attrs.push_back(Attribute::Int("layout", c.layout));
  if (c.op == "GRU") attrs.push_back(Attribute::Int("linear_before_reset", c.linear_before_reset));
  m.graph.nodes.push_back({"cell", c.op, "", inputs, outputs, attrs, ""});
  ExecutorOptions options;
  options.threads = threads;
  options.backend = reference ? "reference" : "cpu";
  RecurrentRun run;
  auto exec = Executor::Create(m, options);
  EXPECT_TRUE(exec.ok()) << exec.status().ToString();
  if (!exec.ok()) return run;
  Status st = exec.value()->Run(feeds, &run.outputs);
  EXPECT_TRUE(st.ok()) << st.ToString();
  for (int i = 1; i < runs; ++i) {
    run.again.emplace_back();
    st = exec.value()->Run(feeds, &run.again.back());
    EXPECT_TRUE(st.ok()) << st.ToString();
  }
  run.kernel = exec.value()->NodeKernels().at(0).kernel;
  return run;
}

void ExpectNear(const TensorMap& got, const TensorMap& want, float tol) {
  ASSERT_EQ(got.size(), want.size());
  for (const auto& [name, tensor] : want) {
    SCOPED_TRACE(name);
    ASSERT_EQ(got.count(name), 1u);
    ASSERT_EQ(got.at(name).shape(), tensor.shape());
    for (int64_t i = 0; i < got.at(name).numel(); ++i) {
      const float a = got.at(name).data<float>()[i], b = tensor.data<float>()[i];
      if (tol == 0) ASSERT_EQ(a, b) << i;
      else ASSERT_NEAR(a, b, tol) << i;
    }
  }
}

// The case, for SCOPED_TRACE.
std::string Describe(const RecurrentCase& c) {
  return c.op + " " + c.direction + " layout " + std::to_string(c.layout) +
         (c.op == "GRU" ? " linear_before_reset " + std::to_string(c.linear_before_reset) : "") + (c.lens ? " lens" : "") +
         (c.initial ? " initial" : "") + (c.peepholes ? " peepholes" : "") + (c.bias ? "" : " no B") + " batch " +
         std::to_string(c.batch) + " input " + std::to_string(c.input) + " hidden " + std::to_string(c.hidden);
}

// Every direction and layout of `base`: as it is; with sequence_lens and
// initial states; and then without B (LSTM: with peepholes too).
std::vector<RecurrentCase> DirectionsAndLayouts(const RecurrentCase& base) {
  std::vector<RecurrentCase> cases;
  for (const char* direction : {"forward", "reverse", "bidirectional"}) {
    for (int64_t layout : {0, 1}) {
      RecurrentCase c = base;
      c.direction = direction, c.layout = layout;
      cases.push_back(c);
      c.lens = true, c.initial = true;
      cases.push_back(c);
      c.bias = false, c.peepholes = c.op == "LSTM";
      cases.push_back(c);
    }
  }
  return cases;
}

// Each case on the fast row (named `row`+gemm_f32 ...+gemv_f32) within `tol`
// of the reference, and the same bits for 1 and 2 threads.
void ExpectFastRowsMatchTheReference(const std::vector<RecurrentCase>& cases, const std::string& row, float tol) {
  for (const RecurrentCase& c : cases) {
    SCOPED_TRACE(Describe(c));
    const RecurrentRun fast = RunRecurrent(c, false, 1);
    EXPECT_EQ(fast.kernel.rfind(row + "+gemm_f32", 0), 0u) << fast.kernel;
    EXPECT_NE(fast.kernel.find("+gemv_f32"), std::string::npos) << fast.kernel;
    ExpectNear(fast.outputs, RunRecurrent(c, true, 1).outputs, tol);
    ExpectNear(RunRecurrent(c, false, 2).outputs, fast.outputs, 0.0f);  // any thread count: the same bits
  }
}

// Each case (a node the fast row does not take) on the reference kernel, its bits.
void ExpectTheReferenceRuns(const std::vector<RecurrentCase>& cases) {
  for (const RecurrentCase& c : cases) {
    SCOPED_TRACE(Describe(c));
    const RecurrentRun run = RunRecurrent(c, false, 1);
    EXPECT_EQ(run.kernel, "ref");
    ExpectNear(run.outputs, RunRecurrent(c, true, 1).outputs, 0.0f);
  }
}

// The cases a fast row must leave to the reference: `extra` attributes (clip,
// other activations) one at a time, and W fed at run time.
std::vector<RecurrentCase> OutsideThePath(const std::string& op, const std::vector<Attribute>& extra) {
  RecurrentCase base;
  base.op = op, base.linear_before_reset = op == "GRU" ? 1 : 0;
  std::vector<RecurrentCase> cases;
  for (const Attribute& a : extra) {
    RecurrentCase c = base;
    c.extra = {a};
    cases.push_back(c);
  }
  base.weights_as_inputs = true;
  cases.push_back(base);
  return cases;
}

std::vector<RecurrentCase> LstmCases() {
  std::vector<RecurrentCase> cases = DirectionsAndLayouts(RecurrentCase{});
  RecurrentCase wide;  // more than one GEMM tile of gates and of batch rows
  wide.seq = 3, wide.batch = 9, wide.input = 40, wide.hidden = 37;
  cases.push_back(wide);
  RecurrentCase large;  // R h large enough that two threads split each step's GEMV
  large.seq = 4, large.batch = 2, large.input = 16, large.hidden = 150, large.lens = true;
  cases.push_back(large);
  // One step at batch 1 (Silero VAD's): the input projection and R h both on the GEMV, 64K
  // multiply-adds each; reverse and bidirectional too.
  for (const char* direction : {"forward", "reverse", "bidirectional"}) {
    RecurrentCase step;
    step.seq = 1, step.batch = 1, step.input = 128, step.hidden = 128, step.initial = true;
    step.direction = direction;
    cases.push_back(step);
  }
  return cases;
}

TEST_P(LstmF32Test, MatchesTheReference) { ExpectFastRowsMatchTheReference(LstmCases(), "lstm_f32", kLstmF32AbsTol); }

// The rows keep their work buffers per thread and take Y, Y_h and Y_c from
// the executor's arena from the second run on (its memory plan): runs of one
// executor, after runs of other shapes on the same thread, give the first
// run's bits. Silero VAD's one step at batch 1 (input and hidden 128), and
// entries of length 0 (their Y_h and Y_c zeros, their Y zeros past it).
TEST_P(LstmF32Test, RepeatedRunsGiveTheSameBits) {
  RecurrentCase silero;
  silero.seq = 1, silero.batch = 1, silero.input = 128, silero.hidden = 128, silero.initial = true;
  RecurrentCase lens;  // batch entries of lengths 4, 3, 0, 1
  lens.seq = 4, lens.batch = 4, lens.lens = true, lens.initial = true, lens.direction = "bidirectional";
  for (const RecurrentCase& c : {silero, lens, silero, lens}) {
    SCOPED_TRACE(Describe(c));
    const RecurrentRun fast = RunRecurrent(c, false, 1, 3);
    ExpectNear(fast.outputs, RunRecurrent(c, true, 1).outputs, kLstmF32AbsTol);
    ASSERT_EQ(fast.again.size(), 2u);
    for (const TensorMap& again : fast.again) ExpectNear(again, fast.outputs, 0.0f);
  }
}

Attribute Activations(std::vector<std::string> names) {
  Attribute a;
  a.name = "activations", a.kind = Attribute::Kind::kStrings, a.strings = std::move(names);
  return a;
}

TEST_P(LstmF32Test, NodesOutsideItsPathRunTheReference) {
  ExpectTheReferenceRuns(
      OutsideThePath("LSTM", {Attribute::Float("clip", 0.5f), Activations({"Sigmoid", "Relu", "Tanh"})}));
}

std::vector<RecurrentCase> GruCases() {
  std::vector<RecurrentCase> cases;
  for (int64_t linear_before_reset : {0, 1}) {
    RecurrentCase base;
    base.op = "GRU", base.linear_before_reset = linear_before_reset;
    for (const RecurrentCase& c : DirectionsAndLayouts(base)) cases.push_back(c);
    RecurrentCase wide;  // more than one GEMM tile of gates and of batch rows
    wide.op = "GRU", wide.linear_before_reset = linear_before_reset;
    wide.seq = 3, wide.batch = 9, wide.input = 40, wide.hidden = 37, wide.lens = true;
    cases.push_back(wide);
    RecurrentCase one;  // one batch entry, as DeepFilterNet3's GRUs (hidden 256 there)
    one.op = "GRU", one.linear_before_reset = linear_before_reset;
    one.seq = 12, one.batch = 1, one.input = 96, one.hidden = 64, one.layout = 0, one.initial = true;
    cases.push_back(one);
    RecurrentCase large = one;  // R h large enough that two threads split each step's GEMV
    large.seq = 4, large.batch = 2, large.input = 16, large.hidden = 200, large.lens = true;
    cases.push_back(large);
    RecurrentCase step = one;  // one step: the input projection on the GEMV too
    step.seq = 1, step.batch = 2, step.input = 128, step.hidden = 128;
    cases.push_back(step);
  }
  return cases;
}

TEST_P(GruF32Test, MatchesTheReference) { ExpectFastRowsMatchTheReference(GruCases(), "gru_f32", kGruF32AbsTol); }

TEST_P(GruF32Test, NodesOutsideItsPathRunTheReference) {
  ExpectTheReferenceRuns(OutsideThePath("GRU", {Attribute::Float("clip", 0.5f), Activations({"Sigmoid", "Relu"}),
                                                Attribute::Floats("activation_alpha", {0.5f})}));
}

std::vector<RecurrentCase> RnnCases() {
  RecurrentCase rnn;
  rnn.op = "RNN";
  std::vector<RecurrentCase> cases = DirectionsAndLayouts(rnn);
  RecurrentCase madmom;  // madmom's bidirectional onset layer: 266 inputs, 25 units, batch 8
  madmom.op = "RNN", madmom.direction = "bidirectional";
  madmom.seq = 20, madmom.batch = 8, madmom.input = 266, madmom.hidden = 25;
  cases.push_back(madmom);
  RecurrentCase one = madmom;  // one sequence (the shipped files), R h on the GEMV
  one.direction = "forward", one.batch = 1, one.initial = true;
  cases.push_back(one);
  RecurrentCase large;  // R h large enough that two threads split each step's GEMV
  large.op = "RNN", large.seq = 4, large.batch = 2, large.input = 16, large.hidden = 300, large.lens = true;
  cases.push_back(large);
  RecurrentCase step = one;  // one step: the input projection on the GEMV too
  step.seq = 1, step.input = 256, step.hidden = 256;
  cases.push_back(step);
  return cases;
}

TEST_P(RnnF32Test, MatchesTheReference) { ExpectFastRowsMatchTheReference(RnnCases(), "rnn_f32", kRnnF32AbsTol); }

TEST_P(RnnF32Test, NodesOutsideItsPathRunTheReference) {
  ExpectTheReferenceRuns(OutsideThePath("RNN", {Attribute::Float("clip", 0.5f), Activations({"Relu"})}));
}

INSTANTIATE_TEST_SUITE_P(CpuKernels, LstmF32Test, ::testing::ValuesIn(kAllCpuIsas), testing::IsaParamName);
INSTANTIATE_TEST_SUITE_P(CpuKernels, GruF32Test, ::testing::ValuesIn(kAllCpuIsas), testing::IsaParamName);
INSTANTIATE_TEST_SUITE_P(CpuKernels, RnnF32Test, ::testing::ValuesIn(kAllCpuIsas), testing::IsaParamName);

}  // namespace
}  // namespace sparq
