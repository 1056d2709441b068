// Runs the built `sparq` binary on good and bad inputs and checks exit codes
// and messages: every error exits with 2 and says "sparq: error: <what>".
#include <gtest/gtest.h>

#include <algorithm>
#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <tuple>

#include "sparq/calibrate.h"
#include "sparq/device.h"
#include "sparq/file_io.h"
#include "sparq/npy.h"
#include "sparq/onnx_io.h"
#include "sparq/version.h"
#include "test_util.h"

namespace sparq {
namespace {

namespace fs = std::filesystem;

struct CliResult {
  int exit_code = -1;
  std::string out;
  std::string err;
};

std::string Slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void WriteBytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

class CliTest : public ::testing::Test {
 protected:
  // Runs `sparq <args>` (args are passed to the shell as written).
  CliResult Run(const std::string& args) {
    const std::string out = dir_.path("stdout.txt"), err = dir_.path("stderr.txt");
    const std::string cmd = std::string("'") + SPARQ_CLI_PATH + "' " + args + " >'" + out + "' 2>'" + err + "'";
    const int status = std::system(cmd.c_str());
    CliResult r;
    r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    r.out = Slurp(out);
    r.err = Slurp(err);
    return r;
  }
  // Expects exit code 2 and a stderr that starts with "sparq: error:" and
  // contains `needle`.
  void ExpectError(const std::string& args, const std::string& needle) {
    CliResult r = Run(args);
    EXPECT_EQ(r.exit_code, 2) << args << "\nstderr: " << r.err;
    EXPECT_EQ(r.err.rfind("sparq: error: ", 0), 0u) << args << "\nstderr: " << r.err;
    EXPECT_NE(r.err.find(needle), std::string::npos) << args << "\nexpected: " << needle << "\nstderr: " << r.err;
  }
  std::string path(const std::string& name) const { return dir_.path(name); }

  testing::TempDir dir_;
};

// x[batch, 64] -> MatMul(W[64, 10]) -> Relu -> y[batch, 10]; a quarter of W is zero.
Model Mlp() {
  Model m;
  m.ir_version = 8;
  m.opset_imports = {{"", 17}};
  m.producer_name = "sparq-cli-test";
  Graph& g = m.graph;
  g.name = "mlp";
  g.inputs.push_back(testing::FloatInput("x", {{-1, "batch"}, {64, ""}}));
  g.outputs.push_back(testing::FloatInput("y", {{-1, "batch"}, {10, ""}}));
  Tensor w = testing::RandomFloats({64, 10}, 7);
  for (int64_t i = 0; i < w.numel(); i += 4) w.data<float>()[i] = 0.0f;
  g.initializers["W"] = w;
  g.nodes.push_back({"mm", "MatMul", "", {"x", "W"}, {"h"}, {}, ""});
  g.nodes.push_back({"relu", "Relu", "", {"h"}, {"y"}, {}, ""});
  return m;
}

TEST_F(CliTest, HelpVersionAndBadArguments) {
  CliResult help = Run("--help");
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_NE(help.out.find("Examples:"), std::string::npos);
  EXPECT_NE(help.out.find("inspect"), std::string::npos);
  EXPECT_NE(help.out.find("eval"), std::string::npos);
  CliResult version = Run("--version");
  EXPECT_EQ(version.exit_code, 0);
  // One source: project(VERSION) -> sparq/version.h -> sparq::Version().
  EXPECT_EQ(version.out, std::string("sparq ") + SPARQ_VERSION_STRING + "\n");
  EXPECT_EQ(Run("eval --help").exit_code, 0);

  ExpectError("", "subcommand is required");
  ExpectError("frobnicate", "frobnicate");
  ExpectError("inspect", "model is required");
  ExpectError("eval " + path("m.onnx"), "eval needs a model and --inputs");
  ExpectError("eval " + path("m.onnx") + " --inputs x.npz --batch many", "many");
  ExpectError("eval " + path("m.onnx") + " --inputs x.npz --batch 0", "--batch");
}

TEST_F(CliTest, InspectPrintsTablesAndJson) {
  ASSERT_TRUE(SaveModel(Mlp(), path("mlp.onnx")).ok());
  CliResult r = Run("inspect " + path("mlp.onnx"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("sparq-cli-test"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("ai.onnx 17"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("[batch, 64]"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("MatMul"), std::string::npos);
  EXPECT_NE(r.out.find("25.00%"), std::string::npos) << r.out;  // sparsity of W
  EXPECT_NE(r.out.find("640"), std::string::npos);              // parameters

  CliResult j = Run("inspect --json " + path("mlp.onnx"));
  ASSERT_EQ(j.exit_code, 0) << j.err;
  EXPECT_EQ(j.out.rfind("{", 0), 0u);
  EXPECT_NE(j.out.find("\"shape\": [\n        \"batch\",\n        64\n      ]"), std::string::npos) << j.out;
  EXPECT_NE(j.out.find("\"sparsity\": 0.25"), std::string::npos) << j.out;
}

TEST_F(CliTest, BadModelFiles) {
  ExpectError("inspect " + path("missing.onnx"), "file not found: " + path("missing.onnx"));

  auto bytes = SerializeModel(Mlp());
  ASSERT_TRUE(bytes.ok());
  WriteBytes(path("truncated.onnx"), bytes->substr(0, bytes->size() / 2));
  ExpectError("inspect " + path("truncated.onnx"), path("truncated.onnx"));
  ExpectError("eval " + path("truncated.onnx") + " --inputs " + path("x.npy"), "truncated or corrupt");

  WriteBytes(path("garbage.onnx"), std::string("\xff\xff\xff\xff\x0f garbage, not protobuf", 28));
  ExpectError("inspect " + path("garbage.onnx"), "not a valid ONNX model");

  // External data: the model file points to weights in a file that is gone.
  SaveOptions external;
  external.external_data = true;
  external.external_data_threshold = 16;
  ASSERT_TRUE(SaveModel(Mlp(), path("ext.onnx"), external).ok());
  ASSERT_TRUE(fs::exists(path("ext.onnx.data")));
  fs::remove(path("ext.onnx.data"));
  ExpectError("inspect " + path("ext.onnx"), "ext.onnx.data");
}

TEST_F(CliTest, EvalRunsAndReports) {
  ASSERT_TRUE(SaveModel(Mlp(), path("mlp.onnx")).ok());
  NamedTensors data;
  data.emplace_back("x", testing::RandomFloats({6, 64}, 3));
  ASSERT_TRUE(WriteNpz(path("data.npz"), data).ok());
  ASSERT_TRUE(WriteNpy(path("labels.npy"), Tensor::FromVector<int64_t>({6}, {0, 1, 2, 3, 4, 5})).ok());
  CliResult r = Run("eval " + path("mlp.onnx") + " --inputs " + path("data.npz") + " --labels " +
                    path("labels.npy") + " --reference " + path("mlp.onnx") + " --batch 4 --threads 1 --json" +
                    " --save-outputs " + path("out.npz"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("\"samples\": 6"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\"top1_agreement\": 1.0"), std::string::npos) << r.out;
  EXPECT_EQ(r.err, "");  // no progress bar when stderr is not a terminal
  auto saved = ReadNpz(path("out.npz"));
  ASSERT_TRUE(saved.ok());
  EXPECT_EQ((*saved)[0].second.shape(), (Shape{6, 10}));

  CliResult text = Run("eval " + path("mlp.onnx") + " --inputs " + path("data.npz") + " --progress");
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("Throughput"), std::string::npos) << text.out;
  EXPECT_NE(text.err.find("6/6 samples"), std::string::npos) << text.err;

  CliResult verbose = Run("eval " + path("mlp.onnx") + " --inputs " + path("data.npz") + " --verbose");
  ASSERT_EQ(verbose.exit_code, 0) << verbose.err;
  EXPECT_NE(verbose.out.find("Kernels"), std::string::npos) << verbose.out;
  EXPECT_NE(verbose.out.find("mm    MatMul  gemm_f32"), std::string::npos) << verbose.out;
  CliResult profile = Run("eval " + path("mlp.onnx") + " --inputs " + path("data.npz") + " --profile");
  ASSERT_EQ(profile.exit_code, 0) << profile.err;
  EXPECT_NE(profile.out.find("Time per operator and kernel"), std::string::npos) << profile.out;
  EXPECT_NE(profile.out.find("MatMul  gemm_f32"), std::string::npos) << profile.out;
  CliResult profile_json = Run("eval " + path("mlp.onnx") + " --inputs " + path("data.npz") + " --profile --json");
  ASSERT_EQ(profile_json.exit_code, 0) << profile_json.err;
  EXPECT_NE(profile_json.out.find("\"profile\""), std::string::npos) << profile_json.out;
  // Latency percentiles after the warm-up, and a Chrome trace.
  CliResult latency = Run("eval " + path("mlp.onnx") + " --inputs " + path("data.npz") +
                          " --batch 2 --warmup 1 --trace " + path("trace.json"));
  ASSERT_EQ(latency.exit_code, 0) << latency.err;
  EXPECT_NE(latency.out.find("2 batches after 1 warm-up"), std::string::npos) << latency.out;
  EXPECT_NE(latency.out.find("Trace"), std::string::npos) << latency.out;
  ASSERT_TRUE(fs::exists(path("trace.json")));
  CliResult latency_json = Run("eval " + path("mlp.onnx") + " --inputs " + path("data.npz") + " --batch 2 --json");
  ASSERT_EQ(latency_json.exit_code, 0) << latency_json.err;
  EXPECT_NE(latency_json.out.find("\"p99_seconds\""), std::string::npos) << latency_json.out;
  ExpectError("eval " + path("mlp.onnx") + " --inputs " + path("data.npz") + " --warmup -1", "--warmup");
  ExpectError("eval " + path("mlp.onnx") + " --inputs " + path("data.npz") + " --trace " + path("trace.csv"),
              "must name a .json file");
  CliResult reference = Run("eval " + path("mlp.onnx") + " --inputs " + path("data.npz") + " --reference-kernels --json");
  ASSERT_EQ(reference.exit_code, 0) << reference.err;
  CliResult fused = Run("eval " + path("mlp.onnx") + " --inputs " + path("data.npz") +
                        " --reference-kernels --fused-graph --verbose");
  ASSERT_EQ(fused.exit_code, 0) << fused.err;
  EXPECT_NE(fused.out.find("mm    MatMul  ref"), std::string::npos) << fused.out;
  ExpectError("eval " + path("mlp.onnx") + " --inputs " + path("data.npz") + " --fused-graph", "--reference-kernels");
  // --kernel-table: a table file replaces the compiled-in one; a bad one is an error naming its line.
  WriteBytes(path("speed.csv"), "backend,structure,precision,sparsity,speedup\ncpu,block4x4,s8,0.5,1.5\n");
  CliResult table = Run("eval " + path("mlp.onnx") + " --inputs " + path("data.npz") + " --kernel-table " +
                        path("speed.csv"));
  ASSERT_EQ(table.exit_code, 0) << table.err;
  WriteBytes(path("bad_speed.csv"), "backend,structure,precision,sparsity,speedup\ncpu,block4x4,s8,2,1.5\n");
  ExpectError("eval " + path("mlp.onnx") + " --inputs " + path("data.npz") + " --kernel-table " + path("bad_speed.csv"),
              "bad_speed.csv:2: sparsity '2' must be a number in [0, 1)");

  ExpectError("eval " + path("mlp.onnx") + " --inputs " + path("data.npz") + " --save-outputs " + path("mlp.onnx"),
              "would overwrite the model");
}

// --boxes: output 0 read as a YOLO-style detector's [N, 4 + classes, anchors].
// Issue 24: a scalar input (sample rate) and a state [2, N, 4] whose batch is
// axis 1, fed from files that hold samples first; --constant pins the scalar.
TEST_F(CliTest, EvalFeedsScalarAndStateInputsAndPinsConstants) {
  ASSERT_TRUE(SaveModel(testing::SampleAxisModel(), path("vad.onnx")).ok());
  const Tensor x = testing::RandomFloats({5, 4}, 1), state = testing::RandomFloats({5, 2, 4}, 2);
  NamedTensors with_sr{{"x", x}, {"sr", Tensor::Scalar<float>(3.0f)}, {"state", state}};
  ASSERT_TRUE(WriteNpz(path("with_sr.npz"), with_sr).ok());
  NamedTensors no_sr{{"x", x}, {"state", state}};
  ASSERT_TRUE(WriteNpz(path("no_sr.npz"), no_sr).ok());
  const std::string eval = "eval " + path("vad.onnx") + " --inputs ";
  for (const auto& [data, pin, sr] : {std::tuple{"with_sr.npz", "", 3.0f}, std::tuple{"no_sr.npz", " --constant sr=0.5", 0.5f}}) {
    for (const char* batch : {"1", "3"}) {
      SCOPED_TRACE(std::string(data) + " batch " + batch);
      CliResult r = Run(eval + path(data) + pin + " --batch " + batch + " --save-outputs " + path("y.npz"));
      ASSERT_EQ(r.exit_code, 0) << r.err;
      auto saved = ReadArrays(path("y.npz"));
      ASSERT_TRUE(saved.ok());
      const Tensor expected = testing::SampleAxisExpected(x, sr, state);
      const Tensor& y = (*saved)[0].second;
      ASSERT_EQ(y.shape(), expected.shape());
      for (int64_t i = 0; i < y.numel(); ++i) EXPECT_NEAR(y.data<float>()[i], expected.data<float>()[i], 1e-5);
    }
  }
  EXPECT_NE(Run("eval --help").out.find("--constant"), std::string::npos);

  // Never a silent result: a state fed [S, 4], a missing scalar, bad constants.
  NamedTensors flat{{"x", x}, {"sr", Tensor::Scalar<float>(1.0f)}, {"state", x}};
  ASSERT_TRUE(WriteNpz(path("flat.npz"), flat).ok());
  ExpectError(eval + path("flat.npz"),
              "array 'state' has shape [5, 4], model input 'state' expects float32[2, N, 4] (samples along the "
              "file's first axis go to axis 1 of the input, so the file needs [S, 2, 4])");
  ExpectError(eval + path("no_sr.npz"), "missing input 'sr' (float32[])");
  ExpectError(eval + path("no_sr.npz") + " --constant sr=fast", "--constant: constant for input 'sr': 'fast' is not a number");
  ExpectError(eval + path("no_sr.npz") + " --constant sr", "expected name=value");
  ExpectError(eval + path("no_sr.npz") + " --constant sr=1,2", "constant for input 'sr': 2 values given");
  ExpectError(eval + path("no_sr.npz") + " --constant rate=1", "constant for input 'rate': the model has no such input");
  ExpectError(eval + path("no_sr.npz") + " --constant sr=1 --constant sr=2", "input 'sr' is pinned twice");
  ExpectError(eval + path("with_sr.npz") + " --constant sr=1", "which is pinned to a constant");
}

TEST_F(CliTest, EvalMatchesDetectorBoxes) {
  Model det;
  det.ir_version = 8;
  det.opset_imports = {{"", 17}};
  det.graph.inputs.push_back(testing::FloatInput("x", {{-1, "n"}, {6, ""}, {3, ""}}));
  det.graph.outputs.push_back(testing::FloatInput("y", {{-1, "n"}, {6, ""}, {3, ""}}));
  det.graph.nodes.push_back({"same", "Identity", "", {"x"}, {"y"}, {}, ""});
  ASSERT_TRUE(SaveModel(det, path("det.onnx")).ok());
  // Two samples; per anchor (columns) cx, cy, w, h, class 0, class 1. Sample 0
  // has two boxes (anchors 0 and 2), sample 1 one (anchor 1).
  NamedTensors data;
  data.emplace_back("x", Tensor::FromVector<float>({2, 6, 3}, {10, 50, 90, 10, 50, 90, 8, 8, 8, 8, 8, 8,
                                                               0.9f, 0.1f, 0.2f, 0.1f, 0.1f, 0.6f,
                                                               10, 50, 90, 10, 50, 90, 8, 8, 8, 8, 8, 8,
                                                               0.1f, 0.1f, 0.1f, 0.1f, 0.7f, 0.1f}));
  ASSERT_TRUE(WriteNpz(path("det.npz"), data).ok());
  const std::string eval = "eval " + path("det.onnx") + " --inputs " + path("det.npz");
  CliResult r = Run(eval + " --reference " + path("det.onnx") + " --boxes --box-nms-iou 0.45 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("\"reference_boxes\": 3"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\"box_recall\": 1.0"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\"nms_iou\": 0.45"), std::string::npos) << r.out;
  CliResult text = Run(eval + " --reference " + path("det.onnx") + " --boxes");
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("3 of 3 reference boxes matched (100.00%)"), std::string::npos) << text.out;
  ExpectError(eval + " --boxes", "give the reference");
  ExpectError(eval + " --reference " + path("det.onnx") + " --boxes --box-score-threshold 1.5",
              "score_threshold must be in (0, 1]");
}

TEST_F(CliTest, EvalScoresAThresholdedMap) {
  Model map;
  map.ir_version = 8;
  map.opset_imports = {{"", 17}};
  map.graph.inputs.push_back(testing::FloatInput("x", {{-1, "n"}, {4, ""}}));
  map.graph.outputs.push_back(testing::FloatInput("p", {{-1, "n"}, {4, ""}}));
  map.graph.nodes.push_back({"sigmoid", "Sigmoid", "", {"x"}, {"p"}, {}, ""});
  ASSERT_TRUE(SaveModel(map, path("map.onnx")).ok());
  NamedTensors data;  // sigmoid above 0.3 where x > -0.847: 5 of the 8 elements
  data.emplace_back("x", Tensor::FromVector<float>({2, 4}, {-3, -2, 0, 1, 2, -1, 3, 0.5f}));
  ASSERT_TRUE(WriteNpz(path("map.npz"), data).ok());
  const std::string eval = "eval " + path("map.onnx") + " --inputs " + path("map.npz");
  CliResult r = Run(eval + " --reference " + path("map.onnx") + " --map-threshold 0.3 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("\"union\": 5"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\"map_iou\": 1.0"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\"threshold\": 0.3"), std::string::npos) << r.out;
  CliResult text = Run(eval + " --reference " + path("map.onnx") + " --map-threshold 0.3");
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("100.00% at threshold 0.3 (5 of 5 elements"), std::string::npos) << text.out;
  ExpectError(eval + " --map-threshold 0.3", "give the reference");
  ExpectError(eval + " --reference " + path("map.onnx") + " --map-threshold 1.5", "map threshold must be in (0, 1)");
}

TEST_F(CliTest, EvalBadInputs) {
  ASSERT_TRUE(SaveModel(Mlp(), path("mlp.onnx")).ok());
  const std::string eval = "eval " + path("mlp.onnx") + " --inputs ";

  // Unsupported operator: the message names the node, the op and the opset.
  Model odd = Mlp();
  odd.graph.nodes[1] = {"strange", "FrobnicateOp", "", {"h"}, {"y"}, {}, ""};
  ASSERT_TRUE(SaveModel(odd, path("odd.onnx")).ok());
  ASSERT_TRUE(WriteNpy(path("x.npy"), testing::RandomFloats({2, 64}, 1)).ok());
  ExpectError("eval " + path("odd.onnx") + " --inputs " + path("x.npy"), "FrobnicateOp (opset 17)");
  ExpectError("eval " + path("odd.onnx") + " --inputs " + path("x.npy"), "'strange'");

  // Wrong shape, wrong type.
  ASSERT_TRUE(WriteNpy(path("wide.npy"), testing::RandomFloats({2, 65}, 1)).ok());
  ExpectError(eval + path("wide.npy"), "has shape [2, 65], model input 'x' expects float32[batch, 64]");
  ASSERT_TRUE(WriteNpy(path("f64.npy"), testing::RandomFloats({2, 64}, 1).CastTo(DataType::kFloat64)).ok());
  ExpectError(eval + path("f64.npy"), "has type float64, model input 'x' expects float32[batch, 64]");

  // Missing input of a two-input model.
  Model two;
  two.ir_version = 8;
  two.opset_imports = {{"", 17}};
  two.graph.inputs.push_back(testing::FloatInput("a", {{-1, "n"}, {2, ""}}));
  two.graph.inputs.push_back(testing::FloatInput("b", {{-1, "n"}, {2, ""}}));
  two.graph.outputs.push_back(testing::FloatInput("y", {{-1, "n"}, {4, ""}}));
  Node concat{"cat", "Concat", "", {"a", "b"}, {"y"}, {}, ""};
  Attribute axis;
  axis.name = "axis";
  axis.i = 1;
  concat.attributes.push_back(axis);
  two.graph.nodes.push_back(concat);
  ASSERT_TRUE(SaveModel(two, path("two.onnx")).ok());
  NamedTensors only_a;
  only_a.emplace_back("a", testing::RandomFloats({3, 2}, 2));
  ASSERT_TRUE(WriteNpz(path("only_a.npz"), only_a).ok());
  ExpectError("eval " + path("two.onnx") + " --inputs " + path("only_a.npz"), "missing input 'b'");
  ExpectError("eval " + path("two.onnx") + " --inputs " + path("x.npy"), "model has 2 inputs (a, b)");

  // Unreadable data files, missing data, NaN.
  WriteBytes(path("junk.npy"), "this is not numpy data");
  ExpectError(eval + path("junk.npy"), path("junk.npy") + ": not a .npy file");
  ExpectError(eval + path("nothing.npz"), "dataset not found: " + path("nothing.npz"));
  Tensor nan = testing::RandomFloats({2, 64}, 1);
  nan.data<float>()[70] = std::nanf("");
  ASSERT_TRUE(WriteNpy(path("nan.npy"), nan).ok());
  ExpectError(eval + path("nan.npy"), "nan.npy: array 'nan' has a non-finite value (nan) at flat index 70");
}

TEST_F(CliTest, CompareQuantizedDigitsWithFp32) {
  // A QDQ copy of the digits CNN, made by the quickstart recipe's steps.
  const std::string digits = std::string(SPARQ_SOURCE_DIR) + "/examples/digits/";
  WriteBytes(path("int8.yaml"), "version: 1\nname: int8\nmodel: " + digits + "digits_cnn.onnx\n" +
                                    "data:\n  calibration: " + digits + "calib.npz\n  evaluation: " + digits +
                                    "eval.npz\nquantize:\n  precision: int8\noutput:\n  dir: " + path("out") +
                                    "\n  format: qdq\nevaluate:\n  metric: agreement\n  gate:\n    max_drop: 100\n");
  CliResult run = Run("run " + path("int8.yaml"));
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const std::string fp32 = digits + "digits_cnn.onnx", int8 = path("out/digits_cnn.sparq.onnx");
  const std::string data = " --inputs " + digits + "eval.npz --limit 64 --batch 16 ";

  CliResult r = Run("compare " + fp32 + " " + int8 + data + "--top 3 --plot " + path("sqnr.svg"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("64 samples, 4 batches of 16"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("worst SQNR first (3 of "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("_dequantized"), std::string::npos) << r.out;
  EXPECT_EQ(Slurp(path("sqnr.svg")).rfind("<svg", 0), 0u);

  CliResult j = Run("compare " + fp32 + " " + int8 + data + "--json");
  ASSERT_EQ(j.exit_code, 0) << j.err;
  EXPECT_EQ(j.out.rfind("{\n  \"schema_version\": 2,\n  \"sparq_version\": ", 0), 0u) << j.out;
  EXPECT_NE(j.out.find("\"candidate_name\": \"input_dequantized\""), std::string::npos) << j.out;

  EXPECT_EQ(Run("compare --help").exit_code, 0);
  ExpectError("compare " + fp32 + " " + path("missing.onnx") + data, path("missing.onnx"));
  ExpectError("compare " + fp32 + " " + int8, "--inputs is required");
  ExpectError("compare " + fp32 + " " + int8 + data + "--plot " + path("sqnr.png"), "must name a .svg file");
  CliResult je = Run("compare " + fp32 + " " + path("missing.onnx") + data + "--json");
  EXPECT_EQ(je.exit_code, 2);
  EXPECT_NE(je.out.find("\"error\""), std::string::npos) << je.out;
}

TEST_F(CliTest, InspectGroupsQdqLayers) {
  // A QDQ copy of the digits CNN, made by the quickstart recipe's steps.
  const std::string digits = std::string(SPARQ_SOURCE_DIR) + "/examples/digits/";
  WriteBytes(path("int8.yaml"), "version: 1\nname: int8\nmodel: " + digits + "digits_cnn.onnx\n" +
                                    "data:\n  calibration: " + digits + "calib.npz\n  evaluation: " + digits +
                                    "eval.npz\nquantize:\n  precision: int8\noutput:\n  dir: " + path("out") +
                                    "\n  format: qdq\nevaluate:\n  metric: agreement\n  gate:\n    max_drop: 100\n");
  CliResult run = Run("run " + path("int8.yaml"));
  ASSERT_EQ(run.exit_code, 0) << run.err;
  CliResult r = Run("inspect " + path("out/digits_cnn.sparq.onnx"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("int8 (QDQ)"), std::string::npos) << r.out;
  CliResult j = Run("inspect --json " + path("out/digits_cnn.sparq.onnx"));
  ASSERT_EQ(j.exit_code, 0) << j.err;
  EXPECT_NE(j.out.find("\"qdq\": true"), std::string::npos) << j.out;
  EXPECT_NE(j.out.find("\"precision\": \"int8\""), std::string::npos) << j.out;
  // Q/DQ nodes and their scales are no layers of their own.
  EXPECT_EQ(j.out.find("\"op\": \"DequantizeLinear\",\n      \"weights\""), std::string::npos) << j.out;
  EXPECT_EQ(j.out.find("\"op\": \"QuantizeLinear\",\n      \"weights\""), std::string::npos) << j.out;
}

TEST_F(CliTest, SensitivityWritesCsvAndSvg) {
  const std::string digits = std::string(SPARQ_SOURCE_DIR) + "/examples/digits/";
  CliResult r = Run("sensitivity " + digits + "digits_cnn.onnx --data " + digits + "calib.npz --eval " + digits +
                    "eval.npz --labels " + digits + "eval_labels.npy --structure block4x4 --sparsities 0.3,0.5,0.7,0.9 "
                    "--samples 128 --threads 1 -o " + path("sens"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string csv = Slurp(path("sens.csv")), svg = Slurp(path("sens.svg"));
  EXPECT_EQ(csv.rfind("layer,params,sparsity,metric,drop\n", 0), 0u) << csv;
  // Three weighted layers x four sparsities.
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 1 + 3 * 4) << csv;
  EXPECT_NE(csv.find("/8/Gemm,5120,0.5,"), std::string::npos) << csv;
  EXPECT_EQ(svg.rfind("<svg", 0), 0u);
  EXPECT_NE(svg.find("/3/Conv"), std::string::npos);
  EXPECT_NE(r.out.find("baseline top1"), std::string::npos) << r.out;

  // Without labels the metric is top-1 agreement with the unpruned model.
  CliResult agree = Run("sensitivity " + digits + "digits_cnn.onnx --data " + digits +
                        "calib.npz --sparsities 0.5 --samples 64 -o " + path("agree"));
  ASSERT_EQ(agree.exit_code, 0) << agree.err;
  EXPECT_NE(agree.out.find("baseline agreement 100"), std::string::npos) << agree.out;

  ExpectError("sensitivity " + digits + "digits_cnn.onnx --data " + digits + "calib.npz --sparsities 0.5,1.2",
              "1.2");
  ExpectError("sensitivity " + digits + "digits_cnn.onnx --data " + digits + "calib.npz --sparsities 0.5,x",
              "'x' is not a number");
  // N:M fixes each layer's sparsity: one point per layer, at 1 - N/M.
  CliResult nm = Run("sensitivity " + digits + "digits_cnn.onnx --data " + digits +
                     "calib.npz --structure 2:4 --samples 64 -o " + path("nm"));
  ASSERT_EQ(nm.exit_code, 0) << nm.err;
  const std::string nm_csv = Slurp(path("nm.csv"));
  EXPECT_EQ(std::count(nm_csv.begin(), nm_csv.end(), '\n'), 1 + 2) << nm_csv;
  EXPECT_NE(nm_csv.find("/8/Gemm,5120,0.5,"), std::string::npos) << nm_csv;
  ExpectError("sensitivity " + digits + "digits_cnn.onnx --data " + digits + "calib.npz --metric top1",
              "metric top1 needs labels");
}

// `sparq run --set KEY=VALUE`: overrides go through the recipe's own checks,
// and messages about them name the --set.
TEST_F(CliTest, RunSetOverridesRecipeKeys) {
  const std::string digits = std::string(SPARQ_SOURCE_DIR) + "/examples/digits/";
  WriteBytes(path("r.yaml"), "version: 1\nmodel: " + digits + "digits_cnn.onnx\ndata:\n  calibration: " + digits +
                                 "calib.npz\n  evaluation: " + digits + "eval.npz\n  labels: " + digits +
                                 "eval_labels.npy\noutput:\n  dir: " + path("out") + "\n");
  CliResult r = Run("run --set quantize.calibration.method=max " + path("r.yaml") +
                    " --set evaluate.gate.max_drop=1 --set evaluate.gate.max_drop=2 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  EXPECT_NE(r.out.find("\"max_drop\": 0.02"), std::string::npos) << r.out;  // the later --set wins (2 points, a fraction in JSON)
  EXPECT_NE(Slurp(path("out/scales.json")).find("\"max\""), std::string::npos);
  CliResult printed = Run("recipe check " + path("r.yaml") + " --set 'quantize.exclude_ops=[Softmax]' --print");
  ASSERT_EQ(printed.exit_code, 0) << printed.err;
  EXPECT_NE(printed.out.find("exclude_ops: [Softmax]"), std::string::npos) << printed.out;

  ExpectError("run " + path("r.yaml") + " --set quantize.calibraton.method=max",
              "r.yaml (--set quantize.calibraton.method=max): quantize.calibraton: unknown key (did you mean "
              "'calibration'?)");
  ExpectError("run " + path("r.yaml") + " --set evaluate.gate.max_drop=lots",
              "(--set evaluate.gate.max_drop=lots): evaluate.gate.max_drop: expected a number, got 'lots'");
  ExpectError("run " + path("r.yaml") + " --set max_drop", "--set max_drop: expected KEY=VALUE");
  ExpectError("run " + path("r.yaml") + " --set model.x=1", "--set model.x=1: model is '");
  ExpectError("run " + path("r.yaml") + " --set nope=1", "(--set nope=1): nope: unknown key");
}

// A recipe means the same on every machine: `backend: cuda` is a valid
// recipe anywhere, and running it where no GPU is fails with exit 2 naming
// why, writing nothing (it was a recipe error before, so a recipe checked in
// on a GPU machine was invalid on the CI machine).
TEST_F(CliTest, RunRefusesABackendThatCannotRunHere) {
  if (BuiltWithCuda() && CudaDeviceCount() > 0) GTEST_SKIP() << "cuda can run here";
  const std::string digits = std::string(SPARQ_SOURCE_DIR) + "/examples/digits/";
  WriteBytes(path("r.yaml"), "version: 1\nmodel: " + digits + "digits_cnn.onnx\ndata:\n  evaluation: " + digits +
                                 "eval.npz\nquantize:\n  enabled: false\noutput:\n  model: " + path("out.onnx") +
                                 "\nevaluate:\n  backend: cuda\n");
  CliResult checked = Run("recipe check " + path("r.yaml"));
  EXPECT_EQ(checked.exit_code, 0) << checked.err;
  ExpectError("run " + path("r.yaml"), "evaluate.backend: cuda cannot run here");
  EXPECT_FALSE(std::filesystem::exists(path("out.onnx")));
  ExpectError("eval " + digits + "digits_cnn.onnx --inputs " + digits + "eval.npz --backend cuda", "cuda");
  CliResult fell_back = Run("eval " + digits + "digits_cnn.onnx --inputs " + digits + "eval.npz --limit 8 --backend auto --json");
  EXPECT_EQ(fell_back.exit_code, 0) << fell_back.err;
  EXPECT_NE(fell_back.out.find("\"backend\": \"cpu\""), std::string::npos) << fell_back.out;
  WriteBytes(path("a.yaml"), "version: 1\nmodel: " + digits + "digits_cnn.onnx\ndata:\n  evaluation: " + digits +
                                 "eval.npz\nquantize:\n  enabled: false\nevaluate:\n  backend: auto\n");
  CliResult ok = Run("recipe check " + path("a.yaml"));
  EXPECT_EQ(ok.exit_code, 0) << ok.err;
}

// Calibrate once, quantize many times: `sparq quantize --scales` reuses the
// table of `sparq calibrate`, checked against the model.
TEST_F(CliTest, QuantizeReusesACalibrationTable) {
  const std::string digits = std::string(SPARQ_SOURCE_DIR) + "/examples/digits/";
  const std::string model = digits + "digits_cnn.onnx";
  CliResult cal = Run("calibrate " + model + " --data " + digits + "calib.npz --method max --batch 48 --progress -o " +
                      path("scales.json"));
  ASSERT_EQ(cal.exit_code, 0) << cal.err;
  // The bar counts samples up to the file's 256 (batches of 48: the last holds 16).
  EXPECT_NE(cal.err.find("] 256/256 samples"), std::string::npos) << cal.err;
  EXPECT_NE(cal.err.find("] 240/256 samples"), std::string::npos) << cal.err;
  CliResult q = Run("quantize " + model + " --scales " + path("scales.json") + " -o " + path("int8.onnx"));
  ASSERT_EQ(q.exit_code, 0) << q.err;
  EXPECT_NE(q.out.find("weighted layers: 3 int8, 0 fp16, 0 fp32 (table "), std::string::npos) << q.out;
  auto int8 = LoadModel(path("int8.onnx"));
  ASSERT_TRUE(int8.ok()) << int8.status().ToString();
  EXPECT_EQ(int8->producer_name, "sparq");
  int qdq = 0;
  for (const auto& n : int8->graph.nodes) qdq += n.op_type == "QuantizeLinear";
  EXPECT_GT(qdq, 0);

  // Another format and per-tensor weights from the same table.
  CliResult qop = Run("quantize " + model + " --scales " + path("scales.json") +
                      " --format qoperator --per-tensor --json -o " + path("qop.onnx"));
  ASSERT_EQ(qop.exit_code, 0) << qop.err;
  EXPECT_NE(qop.out.find("\"precision\": \"int8\""), std::string::npos) << qop.out;
  auto qmodel = LoadModel(path("qop.onnx"));
  ASSERT_TRUE(qmodel.ok());
  int qlinear = 0;
  for (const auto& n : qmodel->graph.nodes) qlinear += n.op_type.rfind("QLinear", 0) == 0;
  EXPECT_EQ(qlinear, 3);

  // A table of another model: exit 2 naming the first missing tensor and the file.
  ASSERT_TRUE(SaveModel(Mlp(), path("mlp.onnx")).ok());
  CliResult wrong = Run("quantize " + path("mlp.onnx") + " --scales " + path("scales.json") + " -o " + path("m8.onnx"));
  EXPECT_EQ(wrong.exit_code, 2);
  EXPECT_NE(wrong.err.find("scales " + path("scales.json")), std::string::npos) << wrong.err;
  EXPECT_NE(wrong.err.find("no range for tensor 'x' (input of INT8 layer 'mm')"), std::string::npos) << wrong.err;
  EXPECT_FALSE(fs::exists(path("m8.onnx")));

  ExpectError("quantize " + model + " --scales " + path("scales.json") + " -o " + model, "never overwrites");
  ExpectError("quantize " + model + " --scales " + path("scales.json") + " -o " + path("scales.json"),
              "is the calibration table");
  ExpectError("quantize " + model + " --scales " + path("none.json") + " -o " + path("x.onnx"), "none.json");
  ExpectError("quantize " + model + " --scales " + path("scales.json") + " --precision int4 -o " + path("x.onnx"),
              "int4");
  ExpectError("quantize " + model + " -o " + path("x.onnx"), "--scales is required");
}

// --precision int4: weights only, no table; gptq / awq read --data.
TEST_F(CliTest, QuantizeInt4WithoutATable) {
  ASSERT_TRUE(SaveModel(Mlp(), path("mlp.onnx")).ok());
  ASSERT_TRUE(WriteNpz(path("x.npz"), {{"x", testing::RandomFloats({32, 64}, 9)}}).ok());
  CliResult rtn = Run("quantize " + path("mlp.onnx") + " --precision int4 --block-size 16 -o " + path("q4.onnx"));
  EXPECT_EQ(rtn.exit_code, 0) << rtn.err;
  EXPECT_NE(rtn.out.find("1 int4 (rtn, block 16)"), std::string::npos) << rtn.out;
  auto written = LoadModel(path("q4.onnx"));
  ASSERT_TRUE(written.ok()) << written.status().ToString();
  EXPECT_EQ(written->graph.nodes.front().op_type, "MatMulNBits");
  CliResult gptq = Run("quantize " + path("mlp.onnx") + " --precision int4 --method gptq --data " + path("x.npz") +
                       " --block-size 16 --json -o " + path("gptq.onnx"));
  EXPECT_EQ(gptq.exit_code, 0) << gptq.err;
  EXPECT_NE(gptq.out.find("gptq"), std::string::npos) << gptq.out;
  ExpectError("quantize " + path("mlp.onnx") + " --precision int4 --method awq -o " + path("x.onnx"), "needs data");
  ExpectError("quantize " + path("mlp.onnx") + " --precision int4 --method best -o " + path("x.onnx"),
              "--method must be rtn, gptq or awq");
  ExpectError("quantize " + path("mlp.onnx") + " --precision int4 --format qoperator -o " + path("x.onnx"),
              "matmulnbits or qdq");
  EXPECT_FALSE(fs::exists(path("x.onnx")));
}

// --rounding adaround: int8 weights fitted on --data; a valid model whose
// weights differ from nearest rounding's; without --data a named error.
TEST_F(CliTest, QuantizeInt8WithAdaRound) {
  const std::string digits = std::string(SPARQ_SOURCE_DIR) + "/examples/digits/";
  const std::string model = digits + "digits_cnn.onnx";
  CliResult cal = Run("calibrate " + model + " --data " + digits + "calib.npz --method max --samples 64 -o " +
                      path("t.json"));
  ASSERT_EQ(cal.exit_code, 0) << cal.err;
  CliResult nearest = Run("quantize " + model + " --scales " + path("t.json") + " -o " + path("n.onnx"));
  ASSERT_EQ(nearest.exit_code, 0) << nearest.err;
  CliResult ada = Run("quantize " + model + " --scales " + path("t.json") + " --rounding adaround --data " + digits +
                      "calib.npz --samples 64 --adaround-iterations 50 -o " + path("a.onnx"));
  ASSERT_EQ(ada.exit_code, 0) << ada.err;
  auto written = LoadModel(path("a.onnx"));
  ASSERT_TRUE(written.ok()) << written.status().ToString();
  EXPECT_TRUE(CheckModel(*written).ok());
  EXPECT_NE(*ReadFile(path("n.onnx")), *ReadFile(path("a.onnx")));
  ExpectError("quantize " + model + " --scales " + path("t.json") + " --rounding adaround -o " + path("x.onnx"),
              "needs data");
  ExpectError("quantize " + model + " --scales " + path("t.json") + " --rounding up -o " + path("x.onnx"),
              "--rounding must be nearest or adaround");
  EXPECT_FALSE(fs::exists(path("x.onnx")));
}

// --int8-only observes what INT8 quantization reads, the rest fused: the same
// quantized model, byte for byte, as from a table of every tensor.
TEST_F(CliTest, Int8OnlyCalibrationGivesTheSameModel) {
  const std::string digits = std::string(SPARQ_SOURCE_DIR) + "/examples/digits/";
  const std::string model = digits + "digits_cnn.onnx";
  for (const char* flags : {"", " --int8-only"}) {
    const std::string tag = *flags ? "only" : "all";
    CliResult cal = Run("calibrate " + model + " --data " + digits + "calib.npz --method kl --samples 64 -o " +
                        path(tag + ".json") + flags);
    ASSERT_EQ(cal.exit_code, 0) << cal.err;
    CliResult q = Run("quantize " + model + " --scales " + path(tag + ".json") + " -o " + path(tag + ".onnx"));
    ASSERT_EQ(q.exit_code, 0) << q.err;
  }
  auto all = CalibrationTable::Load(path("all.json"));
  auto only = CalibrationTable::Load(path("only.json"));
  ASSERT_TRUE(all.ok() && only.ok());
  EXPECT_LT(only->tensors.size(), all->tensors.size());
  EXPECT_EQ(*ReadFile(path("all.onnx")), *ReadFile(path("only.onnx")));
  ExpectError("calibrate " + model + " --data " + digits + "calib.npz --int8-only -o " + path("t.json") +
                  " --trt-cache " + path("t.cache"),
              "needs every tensor");
  EXPECT_FALSE(fs::exists(path("t.json")));
  // A model without a layer INT8 quantizes: nothing to calibrate, said so.
  Model relu = Mlp();
  relu.graph.nodes.erase(relu.graph.nodes.begin());
  relu.graph.nodes[0].inputs = {"x"};
  relu.graph.outputs[0] = testing::FloatInput("y", {{-1, "batch"}, {64, ""}});
  relu.graph.initializers.clear();
  ASSERT_TRUE(SaveModel(relu, path("relu.onnx")).ok());
  std::vector<float> x(8 * 64, 0.5f);
  ASSERT_TRUE(WriteNpz(path("x.npz"), {{"x", Tensor::FromVector<float>({8, 64}, x)}}).ok());
  ExpectError("calibrate " + path("relu.onnx") + " --data " + path("x.npz") + " --int8-only -o " + path("r.json"),
              "INT8 quantization needs no tensor");
  EXPECT_FALSE(fs::exists(path("r.json")));
}

}  // namespace
}  // namespace sparq
