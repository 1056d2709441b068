// The retrain hook of PruneModel and the command that runs a user's training
// (MakeRetrainCommand): masks applied again, shape checks, failure modes.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "prune/prune_test_util.h"
#include "sparq/file_io.h"
#include "sparq/npy.h"
#include "sparq/onnx_io.h"

namespace sparq {
namespace {

using namespace prune_test;  // NOLINT

// x[n,16] -> MatMul [16,32] -> Relu -> MatMul [32,24] -> Relu -> MatMul [24,8]
// (MatMul weights are stored [in, out]: the transposed GEMM view).
Model MatMulMlp() {
  Model m;
  m.opset_imports = {{"", 17}};
  m.graph.inputs.push_back(testing::FloatInput("x", {{-1, "n"}, {16, ""}}));
  m.graph.outputs.push_back(testing::FloatInput("y", {{-1, "n"}, {8, ""}}));
  const int64_t dims[] = {16, 32, 24, 8};
  std::string in = "x";
  for (int l = 0; l < 3; ++l) {
    const std::string name = "mm" + std::to_string(l);
    m.graph.initializers[name + ".w"] = Gaussian({dims[l], dims[l + 1]}, 10 + l, 0.3f);
    const std::string out = l == 2 ? "y" : name + ".out";
    m.graph.nodes.push_back(MakeNode(name, "MatMul", {in, name + ".w"}, {out}));
    if (l < 2) {
      m.graph.nodes.push_back(MakeNode("relu" + std::to_string(l), "Relu", {out}, {out + ".r"}));
      in = out + ".r";
    }
  }
  return m;
}

PruneOptions LinearTwoSteps() {
  PruneOptions o;
  o.sparsity = 0.5;
  o.schedule = PruneSchedule::kLinear;
  o.steps = 2;
  o.recovery = false;
  o.skip_first_last = false;
  o.threads = 1;
  return o;
}

// Adds `delta` to every weight of the three layers, pruned or not.
Model Perturbed(const Model& m, float delta) {
  Model out = m;
  for (int l = 0; l < 3; ++l) {
    Tensor& w = out.graph.initializers.at("mm" + std::to_string(l) + ".w");
    Tensor fresh = w.Clone();
    for (int64_t i = 0; i < fresh.numel(); ++i) fresh.data<float>()[i] += delta;
    w = fresh;
  }
  return out;
}

TEST(PruneRetrain, HookSeesTheMasksAndItsPrunedWeightsAreZeroedAgain) {
  const Model m = MatMulMlp();
  PruneOptions o = LinearTwoSteps();
  std::vector<int> steps_seen;
  o.retrain = [&](const RetrainRequest& r) -> StatusOr<Model> {
    steps_seen.push_back(r.step);
    EXPECT_EQ(r.steps, 2);
    EXPECT_EQ(r.masks->size(), 3u);
    for (const auto& [name, mask] : *r.masks) {
      // The mask has the stored weight's shape and marks exactly its zeros.
      const Tensor* w = r.model->graph.FindWeight(name);
      EXPECT_EQ(mask.dtype(), DataType::kUInt8);
      EXPECT_EQ(mask.shape(), w->shape()) << name;
      int64_t pruned = 0;
      for (int64_t i = 0; i < w->numel(); ++i) {
        EXPECT_EQ(mask.data<uint8_t>()[i] == 0, w->data<float>()[i] == 0.0f) << name << " at " << i;
        pruned += mask.data<uint8_t>()[i] == 0;
      }
      EXPECT_NEAR(static_cast<double>(pruned) / w->numel(), r.target, 0.02) << name;
    }
    return Perturbed(*r.model, 0.01f);
  };
  const Tensor x = Gaussian({16, 16}, 5);
  auto r = PruneModel(m, o, nullptr, FidelityMetric(m, x));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(steps_seen, (std::vector<int>{1, 2}));
  const PruneReport& rep = r->report;
  ASSERT_EQ(rep.steps.size(), 2u);
  for (const auto& s : rep.steps) {
    EXPECT_TRUE(s.retrained);
    // Every pruned weight had been moved to 0.01 and was set back.
    int64_t pruned = 0;
    for (const auto& [node, sp] : s.layer_sparsity) pruned += static_cast<int64_t>(std::llround(sp * (node == "mm0" ? 512 : node == "mm1" ? 768 : 192)));
    EXPECT_EQ(s.retrain_rezeroed, pruned) << "step " << s.step;
  }
  for (const auto& [node, sp] : rep.final_sparsity) EXPECT_NEAR(sp, 0.5, 0.01) << node;
  // The kept weights carry the training's change.
  const Tensor& w = r->model.graph.initializers.at("mm1.w");
  const Tensor& dense = m.graph.initializers.at("mm1.w");
  for (int64_t i = 0; i < w.numel(); ++i)
    if (w.data<float>()[i] != 0.0f) EXPECT_NEAR(w.data<float>()[i], dense.data<float>()[i] + 0.02f, 1e-6);
  EXPECT_NE(rep.ToText().find("re-zeroed"), std::string::npos) << rep.ToText();
}

TEST(PruneRetrain, AModelOfAnotherShapeIsRefusedNamingTheWeight) {
  const Model m = MatMulMlp();
  PruneOptions o = LinearTwoSteps();
  o.retrain = [&](const RetrainRequest& r) -> StatusOr<Model> {
    Model out = *r.model;
    out.graph.initializers["mm1.w"] = Gaussian({32, 20}, 1);
    return out;
  };
  auto r = PruneModel(m, o, nullptr, nullptr);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("retrain step 1/2"), std::string::npos) << r.status().message();
  EXPECT_NE(r.status().message().find("'mm1.w'"), std::string::npos) << r.status().message();
  o.retrain = [&](const RetrainRequest& r) -> StatusOr<Model> {
    Model out = *r.model;
    out.graph.nodes.pop_back();
    return out;
  };
  EXPECT_FALSE(PruneModel(m, o, nullptr, nullptr).ok());
}

// A shell-script "training" that copies model_in to model_out and records
// its arguments.
TEST(PruneRetrain, CommandRunsPerStepWithItsPlaceholders) {
  testing::TempDir dir;
  const Model m = MatMulMlp();
  PruneOptions o = LinearTwoSteps();
  RetrainCommandOptions c;
  c.command = {"sh", "-c", "cp \"$1\" \"$2\" && test -s \"$3\" && echo \"step $4 of $5 at $6 data $7\" >> args.txt",
               "retrain", "{model_in}", "{model_out}", "{masks}", "{step}", "{steps}", "{sparsity}", "{data}"};
  c.data = "/data/x y.npz";
  c.working_dir = dir.root();
  c.work_dir = dir.path("work");
  std::vector<std::string> lines;
  c.log = [&](const std::string& l) { lines.push_back(l); };
  o.retrain = MakeRetrainCommand(c);
  auto r = PruneModel(m, o, nullptr, nullptr);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  auto args = ReadFile(dir.path("args.txt"));
  ASSERT_TRUE(args.ok());
  EXPECT_EQ(*args, "step 1 of 2 at 0.25 data /data/x y.npz\nstep 2 of 2 at 0.5 data /data/x y.npz\n");
  for (const auto& s : r->report.steps) EXPECT_EQ(s.retrain_rezeroed, 0);  // a copy moves nothing
  // Each step's folder is removed once its model is read back.
  EXPECT_FALSE(std::filesystem::exists(dir.path("work/step1")));
  bool logged = false;
  for (const auto& l : lines) logged |= l.find("retrain step 2/2: sh -c") != std::string::npos;
  EXPECT_TRUE(logged);
}

Status RunWith(RetrainCommandOptions c) {
  PruneOptions o = LinearTwoSteps();
  o.retrain = MakeRetrainCommand(std::move(c));
  return PruneModel(MatMulMlp(), o, nullptr, nullptr).status();
}

TEST(PruneRetrain, CommandFailuresNameTheStepAndTheCommand) {
  testing::TempDir dir;
  RetrainCommandOptions c;
  c.work_dir = dir.path("work");
  c.command = {"sh", "-c", "echo training broke >&2; exit 3"};
  Status st = RunWith(c);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("retrain step 1/2"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("exited with status 3"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("training broke"), std::string::npos) << st.message();  // the output's tail

  c.command = {"true"};
  st = RunWith(c);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.code(), StatusCode::kNotFound);
  EXPECT_NE(st.message().find("did not write {model_out}"), std::string::npos) << st.message();

  c.command = {"sh", "-c", "echo not onnx > \"$0\"", "{model_out}"};
  st = RunWith(c);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("reading the command's {model_out}"), std::string::npos) << st.message();

  c.command = {"sleep", "30"};
  c.timeout_seconds = 0.2;
  st = RunWith(c);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("time limit"), std::string::npos) << st.message();

  c.timeout_seconds = 30;
  c.command = {"sparq-no-such-trainer", "{model_in}"};
  st = RunWith(c);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("cannot start 'sparq-no-such-trainer'"), std::string::npos) << st.message();

  // The shell, when asked for, gets each value quoted.
  c.shell = true;
  c.command = {"cp {model_in} {model_out} && test -f {masks}"};
  EXPECT_TRUE(RunWith(c).ok());
}

TEST(PruneRetrain, CommandChecks) {
  RetrainCommandOptions c;
  EXPECT_FALSE(CheckRetrainCommand(c).ok());
  c.command = {"train", "{model}"};
  Status st = CheckRetrainCommand(c);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("unknown placeholder {model}"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("model_in"), std::string::npos) << st.message();
  c.command = {"train", "{model_in"};
  EXPECT_FALSE(CheckRetrainCommand(c).ok());
  c.command = {"train", "{{literal}}", "{model_in}"};
  EXPECT_TRUE(CheckRetrainCommand(c).ok());
  c.shell = true;
  EXPECT_FALSE(CheckRetrainCommand(c).ok());  // a shell command is one string
  c.shell = false;
  c.timeout_seconds = 0;
  EXPECT_FALSE(CheckRetrainCommand(c).ok());
}

}  // namespace
}  // namespace sparq
