// The "gemm_s8" rows of MatMulInteger and QLinearMatMul (kernels/cpu/
// quant_matmul.h) against the reference kernels: identical outputs on the
// fast path (every ISA, both weight formats, odd shapes, batches, zero points
// per tensor / per row / per column), identical results or errors where they
// fall back to the reference.
#include <gtest/gtest.h>

#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/dispatch.h"
#include "kernels/cpu/quant_matmul.h"
#include "op_test_util.h"
#include "sparq/file_io.h"
#include "sparq/onnx_io.h"
#include "tests/kernels/isa_sweep.h"

namespace sparq {
namespace {

using testing::OpNode;
using testing::RunRefKernel;

constexpr int kOpset = 13;

// Runs kernel `fn` on `node` like RunRefKernel runs the reference one.
StatusOr<Tensor> RunKernel(KernelFn fn, Node node, const std::vector<Tensor>& inputs) {
  std::vector<const Tensor*> ptrs;
  for (size_t i = 0; i < inputs.size(); ++i) {
    node.inputs.push_back(inputs[i].defined() ? "in" + std::to_string(i) : "");
    ptrs.push_back(inputs[i].defined() ? &inputs[i] : nullptr);
  }
  node.outputs.push_back("out0");
  OpContext ctx(node, kOpset, std::move(ptrs), nullptr);
  SPARQ_RETURN_IF_ERROR(fn(ctx));
  return ctx.outputs()[0];
}

// The fast path alone (no fallback): packs B, runs MatMulIntegerPacked /
// QLinearMatMulPacked.
Status FastPathOnly(OpContext& ctx) {
  const bool qlinear = ctx.node().op_type == "QLinearMatMul";
  const size_t b_in = qlinear ? 3 : 1, zp_in = qlinear ? 5 : 3;
  SPARQ_ASSIGN_OR_RETURN(QuantMatMulWeights w,
                         PackQuantMatMulWeights(ctx.input(b_in), ctx.has_input(zp_in) ? &ctx.input(zp_in) : nullptr));
  return qlinear ? QLinearMatMulPacked(ctx, w) : MatMulIntegerPacked(ctx, w);
}

// Expects the "gemm_s8" kernel to give exactly what the reference gives: the
// same tensor, or the same error. With `fast`, the inputs must also run on the
// fast path alone (so that a silent fallback cannot pass for a match).
void ExpectSameAsReference(KernelFn fn, const std::string& op, const std::vector<Tensor>& inputs,
                           const std::string& what, bool fast = true) {
  SCOPED_TRACE(op + " " + what);
  StatusOr<std::vector<Tensor>> ref = RunRefKernel(OpNode(op), kOpset, inputs);
  std::vector<std::pair<const char*, KernelFn>> runs = {{"kernel row", fn}};
  if (fast) runs.push_back({"fast path alone", FastPathOnly});
  for (const auto& [name, kernel] : runs) {
    StatusOr<Tensor> got = RunKernel(kernel, OpNode(op), inputs);
    ASSERT_EQ(ref.ok(), got.ok()) << name << ": " << (ref.ok() ? got.status().ToString() : ref.status().ToString());
    if (!ref.ok()) {
      EXPECT_EQ(got.status().ToString(), ref.status().ToString()) << name;
      continue;
    }
    EXPECT_EQ(got->dtype(), (*ref)[0].dtype()) << name;
    EXPECT_EQ(got->shape(), (*ref)[0].shape()) << name;
    ASSERT_TRUE(got->Equals((*ref)[0])) << name << ": outputs differ";
  }
}

template <typename T>
Tensor RandomInt8(std::mt19937& rng, Shape shape) {
  std::uniform_int_distribution<int> d(std::is_same<T, int8_t>::value ? -128 : 0,
                                       std::is_same<T, int8_t>::value ? 127 : 255);
  std::vector<T> v(static_cast<size_t>(NumElements(shape)));
  for (T& x : v) x = static_cast<T>(d(rng));
  return Tensor::FromVector<T>(shape, v);
}

Tensor RandomOfType(std::mt19937& rng, DataType type, Shape shape) {
  return type == DataType::kInt8 ? RandomInt8<int8_t>(rng, std::move(shape))
                                 : RandomInt8<uint8_t>(rng, std::move(shape));
}

Tensor RandomScales(std::mt19937& rng, Shape shape, float lo, float hi) {
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(static_cast<size_t>(NumElements(shape)));
  for (float& x : v) x = d(rng);
  return Tensor::FromVector<float>(shape, v);
}

struct Case {
  Shape a;    // A's shape; K is its last dimension
  int64_t n;  // columns of B
};
const std::vector<Case> kCases = {{{1, 1}, 1}, {{7, 13}, 5}, {{33, 70}, 130}, {{3, 600}, 17},     {{2, 5, 19}, 23},
                                  {{21}, 9},   {{4, 0}, 6},  {{0, 8}, 3},     {{2, 3, 9, 35}, 40}};

constexpr DataType kTypes[] = {DataType::kUInt8, DataType::kInt8};

// Every ISA this CPU has: the weights are packed for the active ISA's format.
std::vector<CpuIsa> Isas() { return testing::IsasOfThisCpu(); }

TEST(CpuQuantMatMul, MatMulIntegerMatchesReference) {
  std::mt19937 rng(911);
  for (CpuIsa isa : Isas()) {
    ASSERT_TRUE(ForceIsa(isa).ok());
    for (const Case& c : kCases) {
      const int64_t k = c.a.back(), m = c.a.size() >= 2 ? c.a[c.a.size() - 2] : 1;
      for (DataType ta : kTypes) {
        for (DataType tb : kTypes) {
          const Tensor a = RandomOfType(rng, ta, c.a), b = RandomOfType(rng, tb, {k, c.n});
          const std::string what = std::string(CpuIsaName(isa)) + " A " + ShapeToString(c.a) + " " + DataTypeName(ta) +
                                   " B " + DataTypeName(tb) + " N " + std::to_string(c.n);
          ExpectSameAsReference(MatMulIntegerCpu, "MatMulInteger", {a, b}, what + " no zero points");
          ExpectSameAsReference(MatMulIntegerCpu, "MatMulInteger",
                                {a, b, RandomOfType(rng, ta, {}), RandomOfType(rng, tb, {})}, what + " zp/tensor");
          ExpectSameAsReference(MatMulIntegerCpu, "MatMulInteger",
                                {a, b, RandomOfType(rng, ta, {1}), RandomOfType(rng, tb, {c.n})},
                                what + " b zp/column");
          if (c.a.size() >= 2) {
            ExpectSameAsReference(MatMulIntegerCpu, "MatMulInteger",
                                  {a, b, RandomOfType(rng, ta, {m}), RandomOfType(rng, tb, {1, c.n})},
                                  what + " a zp/row, b zp/column", /*fast=*/m > 0);  // M = 0: empty zp, an error
          }
        }
      }
    }
  }
  ResetIsa();
}

TEST(CpuQuantMatMul, QLinearMatMulMatchesReference) {
  std::mt19937 rng(912);
  for (CpuIsa isa : Isas()) {
    ASSERT_TRUE(ForceIsa(isa).ok());
    for (const Case& c : kCases) {
      const int64_t k = c.a.back();
      for (DataType ta : kTypes) {
        for (DataType tb : kTypes) {
          const Tensor a = RandomOfType(rng, ta, c.a), b = RandomOfType(rng, tb, {k, c.n});
          // Scales that spread the outputs over the 8-bit range, some saturating.
          const float y_scale = 0.02f * static_cast<float>(std::max<int64_t>(1, k));
          const Tensor a_scale = RandomScales(rng, {}, 0.01f, 0.05f), y_scale_t = Tensor::Scalar<float>(y_scale);
          for (DataType ty : kTypes) {
            const std::string what = std::string(CpuIsaName(isa)) + " A " + ShapeToString(c.a) + " " +
                                     DataTypeName(ta) + " B " + DataTypeName(tb) + " N " + std::to_string(c.n) + " Y " +
                                     DataTypeName(ty);
            ExpectSameAsReference(QLinearMatMulCpu, "QLinearMatMul",
                                  {a, a_scale, RandomOfType(rng, ta, {}), b, RandomScales(rng, {}, 0.5f, 2.0f),
                                   RandomOfType(rng, tb, {}), y_scale_t, RandomOfType(rng, ty, {})},
                                  what + " per tensor");
            ExpectSameAsReference(QLinearMatMulCpu, "QLinearMatMul",
                                  {a, a_scale, RandomOfType(rng, ta, {1}), b, RandomScales(rng, {c.n}, 0.5f, 2.0f),
                                   RandomOfType(rng, tb, {c.n}), y_scale_t, RandomOfType(rng, ty, {})},
                                  what + " per column");
          }
          // y_zero_point absent: the output has A's type and zero point 0.
          ExpectSameAsReference(QLinearMatMulCpu, "QLinearMatMul",
                                {a, a_scale, RandomOfType(rng, ta, {}), b, RandomScales(rng, {}, 0.5f, 2.0f),
                                 RandomOfType(rng, tb, {}), y_scale_t},
                                ShapeToString(c.a) + " no y_zero_point");
        }
      }
    }
  }
  ResetIsa();
}

// Inputs outside the fast path run the reference kernel: same results, same errors.
TEST(CpuQuantMatMul, FallsBackToReference) {
  std::mt19937 rng(913);
  const Tensor a = RandomInt8<uint8_t>(rng, {2, 3, 4});
  // Batched B.
  ExpectSameAsReference(MatMulIntegerCpu, "MatMulInteger", {a, RandomInt8<int8_t>(rng, {2, 4, 5})}, "3-D B", false);
  // A zero point broadcast as [M, 1] (N-D) instead of [M].
  ExpectSameAsReference(MatMulIntegerCpu, "MatMulInteger",
                        {a, RandomInt8<int8_t>(rng, {4, 5}), RandomInt8<uint8_t>(rng, {3, 1})}, "a zp [M, 1]", false);
  // Errors: inner dimensions, zero point type, missing inputs, float64 scales.
  ExpectSameAsReference(MatMulIntegerCpu, "MatMulInteger", {a, RandomInt8<int8_t>(rng, {5, 5})}, "K mismatch", false);
  ExpectSameAsReference(MatMulIntegerCpu, "MatMulInteger",
                        {a, RandomInt8<int8_t>(rng, {4, 5}), RandomInt8<int8_t>(rng, {})}, "a zp type", false);
  ExpectSameAsReference(MatMulIntegerCpu, "MatMulInteger", {a}, "missing B", false);
  const Tensor b = RandomInt8<int8_t>(rng, {4, 5});
  ExpectSameAsReference(QLinearMatMulCpu, "QLinearMatMul",
                        {a, Tensor::Scalar<double>(0.1), Tensor::Scalar<uint8_t>(3), b, Tensor::Scalar<float>(0.2f),
                         Tensor::Scalar<int8_t>(0), Tensor::Scalar<float>(0.5f)},
                        "float64 a_scale", false);
  ExpectSameAsReference(QLinearMatMulCpu, "QLinearMatMul",
                        {a, Tensor::Scalar<float>(0.1f), Tensor::Scalar<uint8_t>(3), b,
                         RandomScales(rng, {5}, 0.1f, 1.0f), Tensor::Scalar<int8_t>(0), Tensor::Scalar<float>(0.5f)},
                        "b_zero_point and b_scale sizes differ", false);
  ExpectSameAsReference(QLinearMatMulCpu, "QLinearMatMul", {a, Tensor::Scalar<float>(0.1f)}, "missing inputs", false);
}

// The packed entry points take the fast path (no NotSupported) and check that
// the weights belong to the node's B.
TEST(CpuQuantMatMul, PackedWeightsAreReusedAndChecked) {
  std::mt19937 rng(914);
  const Tensor b = RandomInt8<int8_t>(rng, {40, 24}), b_zp = RandomInt8<int8_t>(rng, {24});
  StatusOr<QuantMatMulWeights> w = PackQuantMatMulWeights(b, &b_zp);
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  for (int run = 0; run < 3; ++run) {  // one packing, several inputs
    const std::vector<Tensor> inputs = {RandomInt8<uint8_t>(rng, {run + 1, 40}), b, Tensor::Scalar<uint8_t>(7), b_zp};
    Node node = OpNode("MatMulInteger");
    std::vector<const Tensor*> ptrs;
    for (size_t i = 0; i < inputs.size(); ++i) {
      node.inputs.push_back("in" + std::to_string(i));
      ptrs.push_back(&inputs[i]);
    }
    node.outputs.push_back("out0");
    OpContext ctx(node, kOpset, ptrs, nullptr);
    ASSERT_TRUE(MatMulIntegerPacked(ctx, *w).ok());
    StatusOr<std::vector<Tensor>> ref = RunRefKernel(OpNode("MatMulInteger"), kOpset, inputs);
    ASSERT_TRUE(ref.ok());
    EXPECT_TRUE(ctx.outputs()[0].Equals((*ref)[0]));
  }
  // Weights packed from another B are refused.
  const Tensor other = RandomInt8<int8_t>(rng, {40, 25});
  Node node = OpNode("MatMulInteger", {}, "mm");
  node.inputs = {"a", "b"};
  node.outputs = {"y"};
  const Tensor a = RandomInt8<uint8_t>(rng, {2, 40});
  OpContext ctx(node, kOpset, {&a, &other}, nullptr);
  Status st = MatMulIntegerPacked(ctx, *w);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("packed weights are for B int8 [40, 24]"), std::string::npos) << st.message();
  // Outside the fast path: NotSupported saying why.
  EXPECT_EQ(PackQuantMatMulWeights(RandomInt8<int8_t>(rng, {2, 4, 5}), nullptr).status().code(),
            StatusCode::kNotSupported);
}

// ONNX's own node test cases for the two ops (when the test data is installed):
// the "gemm_s8" rows must produce the expected outputs exactly, and the fast
// path alone too where B is 2-D.
TEST(CpuQuantMatMul, OnnxNodeTestCases) {
  namespace fs = std::filesystem;
  const fs::path root = "/usr/share/libonnx-testdata/data/node";
  if (!fs::exists(root)) GTEST_SKIP() << "no ONNX node test data at " << root;
  int ran = 0;
  for (const char* name : {"test_matmulinteger", "test_qlinearmatmul_2D", "test_qlinearmatmul_3D"}) {
    SCOPED_TRACE(name);
    const fs::path dir = root / name;
    if (!fs::exists(dir)) continue;
    StatusOr<Model> model = LoadModel((dir / "model.onnx").string());
    ASSERT_TRUE(model.ok()) << model.status().ToString();
    ASSERT_EQ(model->graph.nodes.size(), 1u);
    const Node& node = model->graph.nodes[0];
    const bool qlinear = node.op_type == "QLinearMatMul";
    std::vector<Tensor> inputs;
    for (size_t i = 0;; ++i) {
      const fs::path p = dir / "test_data_set_0" / ("input_" + std::to_string(i) + ".pb");
      if (!fs::exists(p)) break;
      StatusOr<std::string> bytes = ReadFile(p.string());
      ASSERT_TRUE(bytes.ok());
      auto t = ParseTensorProto(*bytes);
      ASSERT_TRUE(t.ok()) << t.status().ToString();
      inputs.push_back(t->second);
    }
    auto want = ParseTensorProto(*ReadFile((dir / "test_data_set_0" / "output_0.pb").string()));
    ASSERT_TRUE(want.ok());
    const bool b_is_2d = inputs[qlinear ? 3 : 1].rank() == 2;
    for (KernelFn fn : {qlinear ? QLinearMatMulCpu : MatMulIntegerCpu, FastPathOnly}) {
      if (fn == FastPathOnly && !b_is_2d) continue;
      std::vector<const Tensor*> ptrs;
      for (const Tensor& t : inputs) ptrs.push_back(&t);
      OpContext ctx(node, model->opset(""), ptrs, nullptr);
      Status st = fn(ctx);
      ASSERT_TRUE(st.ok()) << st.ToString();
      EXPECT_TRUE(ctx.outputs()[0].Equals(want->second)) << (fn == FastPathOnly ? "fast path" : "kernel row");
      ++ran;
    }
  }
  if (ran == 0) GTEST_SKIP() << "none of the node test cases is installed";
}

// The prepare-once path an executor would use: B packed from the model's
// constants once, then several runs; refused when B or b_zero_point is fed at
// run time.
TEST(CpuQuantMatMul, PrepareOnceThenRun) {
  std::mt19937 rng(915);
  const Tensor b = RandomInt8<int8_t>(rng, {33, 20}), b_scale = RandomScales(rng, {20}, 0.5f, 2.0f);
  const Tensor b_zp = Tensor::FromVector<int8_t>({20}, std::vector<int8_t>(20, 0));
  Node node = OpNode("QLinearMatMul");
  node.inputs = {"a", "a_scale", "a_zp", "b", "b_scale", "b_zp", "y_scale", "y_zp"};
  node.outputs = {"y"};
  std::vector<const Tensor*> constants(8, nullptr);
  constants[3] = &b;
  constants[4] = &b_scale;
  constants[5] = &b_zp;
  StatusOr<std::shared_ptr<const QuantMatMulWeights>> w = PrepareQuantMatMul(node, constants);
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  for (int run = 0; run < 3; ++run) {
    const std::vector<Tensor> inputs = {RandomInt8<uint8_t>(rng, {run * 7 + 1, 33}),
                                        Tensor::Scalar<float>(0.03f),
                                        Tensor::Scalar<uint8_t>(static_cast<uint8_t>(100 + run)),
                                        b,
                                        b_scale,
                                        b_zp,
                                        Tensor::Scalar<float>(0.6f),
                                        Tensor::Scalar<int8_t>(-3)};
    std::vector<const Tensor*> ptrs;
    for (const Tensor& t : inputs) ptrs.push_back(&t);
    OpContext ctx(node, kOpset, ptrs, nullptr);
    ASSERT_TRUE(RunPreparedQuantMatMul(ctx, **w).ok());
    StatusOr<std::vector<Tensor>> ref = RunRefKernel(OpNode("QLinearMatMul"), kOpset, inputs);
    ASSERT_TRUE(ref.ok());
    EXPECT_TRUE(ctx.outputs()[0].Equals((*ref)[0])) << "run " << run;
  }
  constants[5] = nullptr;  // b_zero_point fed at run time: cannot be folded into the packing
  EXPECT_EQ(PrepareQuantMatMul(node, constants).status().code(), StatusCode::kNotSupported);
  constants[5] = &b_zp;
  constants[3] = nullptr;  // B fed at run time
  EXPECT_EQ(PrepareQuantMatMul(node, constants).status().code(), StatusCode::kNotSupported);
}

TEST(CpuQuantMatMul, RegistersRowsNamedGemmS8) {
  KernelRegistry r;
  RegisterCpuQuantOps(r);
  for (const char* op : {"MatMulInteger", "QLinearMatMul"}) {
    const KernelDef* def = r.Find(op, "", kOpset);
    ASSERT_NE(def, nullptr) << op;
    EXPECT_EQ(def->name, "gemm_s8");
  }
}

}  // namespace
}  // namespace sparq
