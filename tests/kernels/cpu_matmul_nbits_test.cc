// The matmul_nbits_f32 rows (kernels/cpu/matmul_nbits_f32.h) against the
// reference MatMulNBits (kernels/ref/matmul_nbits.h): odd shapes (K not a
// multiple of the block or of the vector, N odd, 1, 16 and 21 rows), with and
// without zero points and bias, every ISA of this CPU; and the op on the CPU
// backend, same bits on 1 and 2 threads.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "kernels/cpu/dispatch.h"
#include "kernels/ref/matmul_nbits.h"
#include "kernels/isa_sweep.h"
#include "kernels/cpu_row_kernels.h"
#include "sparq/executor.h"
#include "test_util.h"

namespace sparq {
namespace testing {

namespace {

struct NBitsProblem {
  MatMulNBitsPlan plan;
  std::vector<float> a, scales, bias;
  std::vector<uint8_t> b, zp;
};

NBitsProblem MakeProblem(std::mt19937& rng, int64_t m, int64_t k, int64_t n, int64_t block, bool with_zp, bool with_bias) {
  NBitsProblem p;
  p.plan.m = m, p.plan.k = k, p.plan.n = n, p.plan.block_size = block;
  p.plan.k_blocks = (k + block - 1) / block;
  p.plan.blob_size = block / 2;
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (int64_t i = 0; i < m * k; ++i) p.a.push_back(u(rng));
  for (int64_t i = 0; i < n * p.plan.k_blocks * p.plan.blob_size; ++i) p.b.push_back(static_cast<uint8_t>(rng()));
  for (int64_t i = 0; i < n * p.plan.k_blocks; ++i) p.scales.push_back(0.01f + 0.1f * std::fabs(u(rng)));
  if (with_zp)
    for (int64_t i = 0; i < n * ((p.plan.k_blocks + 1) / 2); ++i) p.zp.push_back(static_cast<uint8_t>(rng()));
  if (with_bias)
    for (int64_t i = 0; i < n; ++i) p.bias.push_back(u(rng));
  return p;
}

MatMulNBitsInputs RefInputs(const NBitsProblem& p) {
  MatMulNBitsInputs in;
  in.a = p.a.data();
  in.b = p.b.data();
  in.scales = p.scales.data();
  in.zero_points = p.zp.empty() ? nullptr : p.zp.data();
  in.bias = p.bias.empty() ? nullptr : p.bias.data();
  return in;
}

}  // namespace

bool CheckMatMulNBitsRow(std::mt19937& rng, const CpuKernelDef& def) {
  if (def.op() != CpuOp::kMatMulNBitsF32) return false;
  const MatMulNBitsF32Fn fn = def.get<MatMulNBitsF32Fn>();
  struct Shape3 {
    int64_t m, k, n, block;
  };
  for (const Shape3 s : {Shape3{1, 64, 7, 32}, Shape3{1, 200, 9, 32}, Shape3{16, 83, 5, 16}, Shape3{21, 384, 13, 128},
                         Shape3{3, 17, 4, 16}, Shape3{9, 1000, 3, 256}, Shape3{16, 130, 33, 64}}) {
    for (bool with_zp : {false, true}) {
      const NBitsProblem p = MakeProblem(rng, s.m, s.k, s.n, s.block, with_zp, with_zp);
      std::vector<float> want(static_cast<size_t>(s.m * s.n)), got(want.size() + 1, -7.0f);
      MatMulNBitsRef(p.plan, RefInputs(p), want.data());
      MatMulNBitsF32Args args;
      args.m = s.m, args.k = s.k, args.a = p.a.data(), args.b = p.b.data(), args.scales = p.scales.data();
      args.zero_points = with_zp ? p.zp.data() : nullptr;
      args.bias = with_zp ? p.bias.data() : nullptr;
      args.block_size = s.block, args.k_blocks = p.plan.k_blocks, args.y = got.data(), args.ld_y = s.n;
      // In two column ranges, as threads would split it.
      args.n0 = 0, args.n1 = s.n / 2;
      fn(args);
      args.n0 = s.n / 2, args.n1 = s.n;
      fn(args);
      float max_ref = 0.0f;
      for (float v : want) max_ref = std::max(max_ref, std::fabs(v));
      const float tol = def.isa == CpuIsa::kPortable ? 0.0f : kF32RelTol * max_ref;
      for (size_t i = 0; i < want.size(); ++i)
        EXPECT_LE(std::fabs(got[i] - want[i]), tol) << def.name << " m " << s.m << " k " << s.k << " n " << s.n
                                                    << " block " << s.block << " at " << i;
      EXPECT_EQ(got[want.size()], -7.0f) << "wrote past y";
    }
  }
  return true;
}

namespace {

// x [b, K] -> MatMulNBits(K 200, N 37, block 32, zero points, bias) -> y
Model NBitsModel(std::mt19937& rng, int64_t k, int64_t n, int64_t block) {
  const NBitsProblem p = MakeProblem(rng, 1, k, n, block, true, true);
  Model m;
  m.ir_version = 8;
  m.opset_imports = {{"", 17}, {"com.microsoft", 1}};
  Graph& g = m.graph;
  g.inputs.push_back(FloatInput("x", {{-1, "b"}, {k, ""}}));
  g.outputs.push_back(FloatInput("y", {{-1, "b"}, {n, ""}}));
  Tensor b(DataType::kUInt8, {n, p.plan.k_blocks, p.plan.blob_size});
  std::copy(p.b.begin(), p.b.end(), static_cast<uint8_t*>(b.raw_data()));
  Tensor zp(DataType::kUInt8, {static_cast<int64_t>(p.zp.size())});
  std::copy(p.zp.begin(), p.zp.end(), static_cast<uint8_t*>(zp.raw_data()));
  g.initializers["B"] = b;
  g.initializers["S"] = Tensor::FromVector<float>({n * p.plan.k_blocks}, p.scales);
  g.initializers["Z"] = zp;
  g.initializers["bias"] = Tensor::FromVector<float>({n}, p.bias);
  Node node{"q4", "MatMulNBits", "com.microsoft", {"x", "B", "S", "Z", "", "bias"}, {"y"},
            {Attribute::Int("K", k), Attribute::Int("N", n), Attribute::Int("bits", 4), Attribute::Int("block_size", block)},
            ""};
  g.nodes.push_back(node);
  return m;
}

Tensor RunModel(const Model& m, const Tensor& x, const std::string& backend, int threads) {
  ExecutorOptions o;
  o.threads = threads;
  o.backend = backend;
  auto exec = Executor::Create(m, o);
  EXPECT_TRUE(exec.ok()) << exec.status().ToString();
  if (!exec.ok()) return Tensor();
  TensorMap out;
  const Status st = (*exec)->Run({{"x", x}}, &out);
  EXPECT_TRUE(st.ok()) << st.ToString();
  return out["y"];
}

TEST(CpuMatMulNBits, OpMatchesReferenceOnEveryIsaAndThreadCount) {
  std::mt19937 rng(26);
  const Model m = NBitsModel(rng, 200, 37, 32);
  for (int64_t batch : {1, 16}) {
    const Tensor x = RandomFloats({batch, 200}, 5);
    const Tensor want = RunModel(m, x, "reference", 1);
    float max_ref = 0.0f;
    for (int64_t i = 0; i < want.numel(); ++i) max_ref = std::max(max_ref, std::fabs(want.data<float>()[i]));
    ForEachIsa([&](CpuIsa isa) {
      const Tensor one = RunModel(m, x, "cpu", 1), two = RunModel(m, x, "cpu", 2);
      EXPECT_TRUE(one.Equals(two)) << "1 and 2 threads differ";
      for (int64_t i = 0; i < want.numel(); ++i)
        EXPECT_LE(std::fabs(one.data<float>()[i] - want.data<float>()[i]), kF32RelTol * max_ref) << i;
    });
  }
}

}  // namespace
}  // namespace testing
}  // namespace sparq
