// sparq.LayerNormChain (runtime/passes/float_fusion.h, kernels/cpu/norm_f32.h):
// LayerNorm as torch exports it at opset 14 and paddle2onnx at 12
// (ReduceMean, Sub, Pow 2, ReduceMean, Add eps, Sqrt, Div, Mul gamma, Add
// beta) fuses into one node that gives the unfused graph's bits on the
// reference kernels and on layer_norm_chain_f32, for 1 and 3 threads;
// near-misses keep their nodes.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "kernels/cpu/dispatch.h"
#include "sparq/executor.h"
#include "test_util.h"

namespace sparq {
namespace {

struct ChainCase {
  const char* name;
  int opset = 14;             // 18: ReduceMean's axes as an input
  bool beta = true;           // the Add of beta
  bool swapped = false;       // Add(eps, var), Mul(gamma, n), Add(beta, m)
  bool gamma_rows = false;    // gamma [rows, n]: fuses, runs the reference
  float exponent = 2.0f;      // near-miss: 3
  int64_t axis = -1;          // near-miss: 1
  bool d_output = false;      // near-miss: d also a graph output
  bool mean_minus_x = false;  // near-miss: Sub(mean, x)
  bool fuses = true;
};

// x [3, 5, 37] through the chain.
Model ChainModel(const ChainCase& c) {
  Model m;
  m.opset_imports = {{"", c.opset}};
  Graph& g = m.graph;
  g.inputs.push_back(testing::FloatInput("x", {}));
  g.inputs.back().has_shape = false;
  g.outputs.push_back(testing::FloatInput("y", {}));
  g.initializers["two"] = Tensor::Scalar<float>(c.exponent);
  g.initializers["eps"] = Tensor::Scalar<float>(1e-12f);
  g.initializers["gamma"] = testing::RandomFloats(c.gamma_rows ? Shape{5, 37} : Shape{37}, 7, 0.5f, 1.5f);
  g.initializers["beta"] = testing::RandomFloats({37}, 8, -0.5f, 0.5f);
  auto mean = [&](const std::string& name, const std::string& in, const std::string& out) {
    if (c.opset >= 18) {
      g.nodes.push_back({name, "ReduceMean", "", {in, "axes"}, {out}, {}, ""});
    } else {
      g.nodes.push_back({name, "ReduceMean", "", {in}, {out}, {Attribute::Ints("axes", {c.axis})}, ""});
    }
  };
  if (c.opset >= 18) {
    Tensor axes(DataType::kInt64, {1});
    axes.data<int64_t>()[0] = c.axis;
    g.initializers["axes"] = axes;
  }
  auto pair = [&](const std::string& a, const std::string& b) {
    return c.swapped ? std::vector<std::string>{b, a} : std::vector<std::string>{a, b};
  };
  mean("mean", "x", "m");
  g.nodes.push_back({"sub", "Sub", "", c.mean_minus_x ? std::vector<std::string>{"m", "x"}
                                                      : std::vector<std::string>{"x", "m"}, {"d"}, {}, ""});
  g.nodes.push_back({"pow", "Pow", "", {"d", "two"}, {"sq"}, {}, ""});
  mean("var", "sq", "v");
  g.nodes.push_back({"add_eps", "Add", "", pair("v", "eps"), {"ve"}, {}, ""});
  g.nodes.push_back({"sqrt", "Sqrt", "", {"ve"}, {"sd"}, {}, ""});
  g.nodes.push_back({"div", "Div", "", {"d", "sd"}, {"n"}, {}, ""});
  g.nodes.push_back({"mul", "Mul", "", pair("n", "gamma"), {c.beta ? "ng" : "y"}, {}, ""});
  if (c.beta) g.nodes.push_back({"add_beta", "Add", "", pair("ng", "beta"), {"y"}, {}, ""});
  if (c.d_output) g.outputs.push_back(testing::FloatInput("d", {}));
  return m;
}

struct Result {
  Tensor y;
  std::vector<std::string> kernels;
};

Result RunChain(const Model& m, const Tensor& x, bool reference, bool fuse, int threads) {
  ExecutorOptions options;
  options.backend = reference ? "reference" : "cpu";
  if (fuse) options.profile = GraphProfile::kDeployment;
  options.threads = threads;
  Result r;
  auto exec = Executor::Create(m, options);
  EXPECT_TRUE(exec.ok()) << exec.status().ToString();
  if (!exec.ok()) return r;
  TensorMap out;
  EXPECT_TRUE((*exec)->Run({{"x", x}}, &out).ok());
  r.y = out["y"];
  for (const NodeKernel& k : (*exec)->NodeKernels()) r.kernels.push_back(k.op_type + ":" + k.kernel);
  return r;
}

TEST(LayerNormChain, FusesWithTheUnfusedBits) {
  ChainCase cases[10];
  cases[0].name = "torch opset 14";
  cases[1].name = "opset 18 axes input", cases[1].opset = 18;
  cases[2].name = "no beta, operands swapped", cases[2].beta = false, cases[2].swapped = true;
  cases[3].name = "gamma per row: the reference", cases[3].gamma_rows = true;
  cases[4].name = "Pow 3", cases[4].exponent = 3.0f, cases[4].fuses = false;
  cases[5].name = "ReduceMean over axis 1", cases[5].axis = 1, cases[5].fuses = false;
  cases[6].name = "d a graph output", cases[6].d_output = true, cases[6].fuses = false;
  cases[7].name = "mean - x", cases[7].mean_minus_x = true, cases[7].fuses = false;
  cases[8].name = "opset 18, axes [1]", cases[8].opset = 18, cases[8].axis = 1, cases[8].fuses = false;
  cases[9].name = "paddle opset 12", cases[9].opset = 12;
  Tensor x = testing::RandomFloats({3, 5, 37}, 3, -4.0f, 4.0f);
  for (int64_t i = 0; i < x.numel(); i += 37) x.data<float>()[i] += 50.0f;  // a mean far from 0
  for (const ChainCase& c : cases) {
    SCOPED_TRACE(c.name);
    const Model m = ChainModel(c);
    const Result want = RunChain(m, x, true, false, 1);
    for (bool reference : {true, false}) {
      for (int threads : {1, 3}) {
        const Result got = RunChain(m, x, reference, true, threads);
        ASSERT_EQ(got.y.shape(), want.y.shape());
        EXPECT_EQ(std::memcmp(got.y.raw_data(), want.y.raw_data(), want.y.nbytes()), 0)
            << (reference ? "reference" : "cpu") << " threads " << threads;
        const bool fused = got.kernels.size() == 1 && got.kernels[0].rfind("LayerNormChain:", 0) == 0;
        EXPECT_EQ(fused, c.fuses);
        if (fused && !reference)
          EXPECT_EQ(got.kernels[0], std::string("LayerNormChain:") + SelectCpuKernel(CpuOp::kLayerNormChainF32).name);
      }
    }
  }
}

}  // namespace
}  // namespace sparq
