// Pruned INT8 layers in the executor (kernels/cpu/sparse_s8.h): QLinearConv
// and QLinearMatMul whose int8 weights are block 4x4 or 2:4 sparse run
// spmm_bsr4x4_s8 / spmm_nm24_s8 when the kernel table says so, with output
// bit for bit the reference kernels', for several thread counts; they stay
// dense (conv_s8, gemm_s8) when the table says the structure is slower or was
// not measured.
// Also: the kernel speed table itself (sparq/kernel_table.h).
#include <gtest/gtest.h>

#include <memory>
#include <random>
#include <string>

#include "sparq/executor.h"
#include "sparq/kernel_table.h"
#include "tests/kernels/isa_sweep.h"

namespace sparq {
namespace {

enum class Pruning { kBlock4x4, kNm2of4, kOneBlock4x4 };

// Int8 weights [rows, cols] ([out, in] view), nonzero where kept: block 4x4
// with 80% of the blocks zero, 2:4 with random kept positions, or only the
// first 4x4 block nonzero.
std::vector<int8_t> PrunedWeights(std::mt19937& rng, int64_t rows, int64_t cols, Pruning pruning) {
  std::uniform_int_distribution<int> value(-127, 127);
  std::bernoulli_distribution keep_block(0.2);
  std::vector<int8_t> w(static_cast<size_t>(rows * cols), 0);
  auto nonzero = [&] {
    int v = value(rng);
    return static_cast<int8_t>(v == 0 ? 1 : v);
  };
  if (pruning == Pruning::kOneBlock4x4) {
    for (int64_t i = 0; i < std::min<int64_t>(rows, 4); ++i)
      for (int64_t j = 0; j < std::min<int64_t>(cols, 4); ++j) w[i * cols + j] = nonzero();
    return w;
  }
  if (pruning == Pruning::kBlock4x4) {
    for (int64_t r = 0; r < rows; r += 4)
      for (int64_t c = 0; c < cols; c += 4) {
        if (!keep_block(rng)) continue;
        for (int64_t i = r; i < std::min(rows, r + 4); ++i)
          for (int64_t j = c; j < std::min(cols, c + 4); ++j) w[i * cols + j] = nonzero();
      }
    return w;
  }
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; c += 4) {
      int first = static_cast<int>(rng() % 4), second = static_cast<int>(rng() % 4);
      for (int p : {first, second})
        if (c + p < cols) w[r * cols + c + p] = nonzero();
    }
  return w;
}

template <typename T>
Tensor RandomBytes(Shape shape, std::mt19937& rng) {
  Tensor t(std::is_same_v<T, int8_t> ? DataType::kInt8 : DataType::kUInt8, shape);
  std::uniform_int_distribution<int> d(std::is_same_v<T, int8_t> ? -128 : 0, std::is_same_v<T, int8_t> ? 127 : 255);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<T>()[i] = static_cast<T>(d(rng));
  return t;
}

// Scales, zero points and the graph around one node with int8 weights `w`
// (per-channel scales of `channels` values); x is uint8 with zero point 131.
Model OneNodeModel(const std::string& op, Tensor w, int64_t channels, std::vector<Attribute> attributes, bool bias) {
  Model m;
  m.ir_version = 8;
  m.opset_imports = {{"", 13}};
  ValueInfo x;
  x.name = "x";
  x.dtype = DataType::kUInt8;
  m.graph.inputs.push_back(x);
  ValueInfo y = x;
  y.name = "y";
  m.graph.outputs.push_back(y);
  Graph& g = m.graph;
  g.initializers["w"] = std::move(w);
  g.initializers["x_scale"] = Tensor::Scalar<float>(0.0173f);
  g.initializers["y_scale"] = Tensor::Scalar<float>(0.113f);
  g.initializers["x_zp"] = Tensor::Scalar<uint8_t>(131);
  g.initializers["y_zp"] = Tensor::Scalar<uint8_t>(119);
  std::vector<float> ws(channels);
  for (int64_t i = 0; i < channels; ++i) ws[i] = 0.0031f * (1.0f + 0.137f * static_cast<float>(i % 7));
  const Shape scale_shape = {channels};
  g.initializers["w_scale"] = Tensor::FromVector<float>(scale_shape, ws);
  g.initializers["w_zp"] = Tensor::FromVector<int8_t>(scale_shape, std::vector<int8_t>(channels, 0));
  Node node{"layer", op, "", {"x", "x_scale", "x_zp", "w", "w_scale", "w_zp", "y_scale", "y_zp"}, {"y"}, {}, ""};
  if (bias) {
    std::vector<int32_t> b(channels);
    for (int64_t i = 0; i < channels; ++i) b[i] = static_cast<int32_t>(i * 977 % 4001) - 2000;
    g.initializers["b"] = Tensor::FromVector<int32_t>({channels}, b);
    node.inputs.push_back("b");
  }
  node.attributes = std::move(attributes);
  g.nodes.push_back(node);
  return m;
}

// A QLinearConv 3x3 (by default stride 1, pad 1): Cout = 20, Cin = 6 (K = 54: no multiple of 8).
Model PrunedConv(std::mt19937& rng, Pruning pruning, std::vector<int64_t> strides = {1, 1},
                 std::vector<int64_t> pads = {1, 1, 1, 1}, std::vector<int64_t> dilations = {1, 1}) {
  const int64_t cout = 20, cin = 6;
  Tensor w(DataType::kInt8, {cout, cin, 3, 3});
  const std::vector<int8_t> values = PrunedWeights(rng, cout, cin * 9, pruning);
  std::copy(values.begin(), values.end(), w.data<int8_t>());
  return OneNodeModel("QLinearConv", std::move(w), cout,
                      {Attribute::Ints("strides", strides), Attribute::Ints("pads", pads),
                       Attribute::Ints("dilations", dilations), Attribute::Ints("kernel_shape", {3, 3})},
                      true);
}

// A QLinearMatMul with B [K = 44, N = 37]: W = B^T [37, 44] is the pruned view.
Model PrunedMatMul(std::mt19937& rng, Pruning pruning) {
  const int64_t k = 44, n = 37;
  const std::vector<int8_t> wt = PrunedWeights(rng, n, k, pruning);
  Tensor b(DataType::kInt8, {k, n});
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < k; ++j) b.data<int8_t>()[j * n + i] = wt[i * k + j];
  return OneNodeModel("QLinearMatMul", std::move(b), n, {}, false);
}

std::shared_ptr<const KernelSpeedTable> Table(const std::string& rows) {
  StatusOr<KernelSpeedTable> t = KernelSpeedTable::Parse("backend,structure,precision,sparsity,speedup\n" + rows, "t");
  EXPECT_TRUE(t.ok()) << t.status().ToString();
  return std::make_shared<const KernelSpeedTable>(t.ok() ? *t : KernelSpeedTable{});
}

// Runs `m` on x with the fast kernels (`table`, 1 to 3 threads) and the
// reference kernels; expects equal outputs and `kernel` as the node's kernel.
void ExpectExact(const Model& m, const Tensor& x, std::shared_ptr<const KernelSpeedTable> table,
                 const std::string& kernel) {
  ExecutorOptions ref_options;
  ref_options.threads = 1;
  ref_options.backend = "reference";
  auto ref = Executor::Create(m, ref_options);
  ASSERT_TRUE(ref.ok()) << ref.status().ToString();
  TensorMap want;
  ASSERT_TRUE((*ref)->Run({{"x", x}}, &want).ok());
  for (int threads : {1, 2, 3}) {
    SCOPED_TRACE("threads " + std::to_string(threads));
    ExecutorOptions options;
    options.threads = threads;
    options.kernel_table = table;
    auto fast = Executor::Create(m, options);
    ASSERT_TRUE(fast.ok()) << fast.status().ToString();
    EXPECT_EQ(testing::KernelOps((*fast)->NodeKernels().at(0).kernel), kernel);
    TensorMap got;
    Status st = (*fast)->Run({{"x", x}}, &got);
    ASSERT_TRUE(st.ok()) << st.ToString();
    ASSERT_EQ(got.at("y").shape(), want.at("y").shape());
    EXPECT_TRUE(got.at("y").Equals(want.at("y")));
  }
}

// A table in which both structures beat dense from 40% on.
const char kFastRows[] = "cpu,block4x4,s8,0.4,2.0\ncpu,2:4,s8,0.5,1.5\n";

TEST(CpuQuantSparse, PrunedConvRunsSparseAndExact) {
  std::mt19937 rng(91);
  const Tensor x = RandomBytes<uint8_t>({2, 6, 9, 7}, rng);  // 2 images, P = 63
  ExpectExact(PrunedConv(rng, Pruning::kBlock4x4), x, Table(kFastRows), "spmm_bsr_s8");
  ExpectExact(PrunedConv(rng, Pruning::kNm2of4), x, Table(kFastRows), "spmm_nm_s8");
  // The NCHW unfolding at the edges: strides, dilations, asymmetric and no pads.
  const Tensor x2 = RandomBytes<uint8_t>({1, 6, 13, 11}, rng);
  ExpectExact(PrunedConv(rng, Pruning::kBlock4x4, {2, 2}, {2, 0, 1, 3}, {2, 1}), x2, Table(kFastRows),
              "spmm_bsr_s8");
  ExpectExact(PrunedConv(rng, Pruning::kNm2of4, {1, 3}, {0, 2, 0, 0}, {1, 2}), x2, Table(kFastRows), "spmm_nm_s8");
  ExpectExact(PrunedConv(rng, Pruning::kBlock4x4, {3, 2}, {0, 0, 0, 0}, {1, 1}), x2, Table(kFastRows),
              "spmm_bsr_s8");
}

// sparq.QLinearConvLut (a QLinearConv whose output goes through a table, as
// the QDQ fusion makes of Conv -> Relu): the sparse kernel, then the table.
TEST(CpuQuantSparse, PrunedConvWithTableRunsSparseAndExact) {
  std::mt19937 rng(95);
  const Tensor x = RandomBytes<uint8_t>({2, 6, 9, 7}, rng);
  for (Pruning pruning : {Pruning::kBlock4x4, Pruning::kNm2of4}) {
    Model m = PrunedConv(rng, pruning);
    m.opset_imports.push_back({"sparq", 1});
    Node& node = m.graph.nodes[0];
    node.op_type = "QLinearConvLut";
    node.domain = "sparq";
    node.inputs.push_back("table");
    m.graph.initializers["table"] = RandomBytes<uint8_t>({256}, rng);
    ExpectExact(m, x, Table(kFastRows), pruning == Pruning::kBlock4x4 ? "spmm_bsr_s8+lut256" : "spmm_nm_s8+lut256");
  }
}

TEST(CpuQuantSparse, PrunedMatMulRunsSparseAndExact) {
  std::mt19937 rng(92);
  const Tensor x = RandomBytes<uint8_t>({3, 5, 44}, rng);  // 15 rows of A
  ExpectExact(PrunedMatMul(rng, Pruning::kBlock4x4), x, Table(kFastRows), "spmm_bsr_s8");
  ExpectExact(PrunedMatMul(rng, Pruning::kNm2of4), x, Table(kFastRows), "spmm_nm_s8");
}

TEST(CpuQuantSparse, StaysDenseWhenTheTableSaysSlowerOrNothing) {
  std::mt19937 rng(93);
  const Tensor x = RandomBytes<uint8_t>({1, 6, 8, 8}, rng);
  const Model conv = PrunedConv(rng, Pruning::kNm2of4);
  ExpectExact(conv, x, Table("cpu,2:4,s8,0.5,0.8\n"), "conv_s8");               // measured slower
  ExpectExact(conv, x, Table("cpu,2:4,f32,0.5,3.0\n"), "conv_s8");              // another precision
  ExpectExact(conv, x, Table("cpu,block4x4,s8,0.95,3.0\n"), "conv_s8");         // only above its sparsity
  ExpectExact(PrunedConv(rng, Pruning::kBlock4x4), x, Table("cpu,block4x4,s8,0.95,3.0\n"), "conv_s8");
}

// Issue 14: a structure that wins on average but loses on this layer's
// shape class stays dense there; rows of other classes do not apply.
TEST(CpuQuantSparse, ShapeClassRowsDecidePerLayer) {
  std::mt19937 rng(95);
  const Tensor x = RandomBytes<uint8_t>({1, 6, 8, 8}, rng);
  const Model conv = PrunedConv(rng, Pruning::kNm2of4);  // K well below 2048
  auto table = [](const std::string& rows) {
    StatusOr<KernelSpeedTable> t =
        KernelSpeedTable::Parse("backend,structure,precision,sparsity,speedup,shape\n" + rows, "t");
    EXPECT_TRUE(t.ok()) << t.status().ToString();
    return std::make_shared<const KernelSpeedTable>(t.ok() ? *t : KernelSpeedTable{});
  };
  ExpectExact(conv, x, table("cpu,2:4,s8,0.5,1.5,any\ncpu,2:4,s8,0.5,0.8,conv:k<2048\n"), "conv_s8");
  ExpectExact(conv, x, table("cpu,2:4,s8,0.5,1.5,any\ncpu,2:4,s8,0.5,0.8,conv:k>=2048\n"), "spmm_nm_s8");
  ExpectExact(conv, x, table("cpu,2:4,s8,0.5,0.8,any\ncpu,2:4,s8,0.5,1.5,conv\n"), "spmm_nm_s8");
  ExpectExact(conv, x, table("cpu,2:4,s8,0.5,1.5,any\ncpu,2:4,s8,0.5,0.8,matmul\n"), "spmm_nm_s8");
}

TEST(CpuQuantSparse, DefaultTableIsTheBenchmarkCsv) {
  const KernelSpeedTable& table = KernelSpeedTable::Default();
  ASSERT_FALSE(table.rows.empty()) << "bench/kernel_speedups.csv did not compile in";
  EXPECT_TRUE(table.MeasuredAtOrBelow("cpu", "block4x4", "s8", 0.8).has_value());
  // The executor's default: a conv with one nonzero 4x4 block of 70 (98.6%
  // zero blocks) runs sparse when the compiled-in table says block 4x4 beats
  // dense for its shape class (K = 6 x 3 x 3 = 54: below 160, where
  // spmm_bsr4x4_s8 measured slower than conv_s8, so it stays dense).
  std::mt19937 rng(94);
  const Tensor x = RandomBytes<uint8_t>({1, 6, 8, 8}, rng);
  const KernelTableLayer layer{/*conv=*/true, /*k=*/54};
  const double speedup = table.MeasuredAtOrBelow("cpu", "block4x4", "s8", 0.98, &layer).value_or(0.0);
  ExpectExact(PrunedConv(rng, Pruning::kOneBlock4x4), x, nullptr, speedup > 1.0 ? "spmm_bsr_s8" : "conv_s8");
}

TEST(KernelSpeedTable, ParsesBothHeadersAndLooksUp) {
  auto five = KernelSpeedTable::Parse(
      "# comment\nbackend,structure,precision,sparsity,speedup\n"
      "cpu,block4x4,s8,0.5,1.2\ncpu,block4x4,s8,0.8,2.5\ncpu,block4x4,f32,0.8,3.0\ncpu,2:4,f32,0.5,0.9\n",
      "five.csv");
  ASSERT_TRUE(five.ok()) << five.status().ToString();
  EXPECT_EQ(five->rows.size(), 4u);
  EXPECT_DOUBLE_EQ(*five->MeasuredAtOrBelow("cpu", "block4x4", "s8", 0.79), 1.2);  // at or below, no interpolation
  EXPECT_DOUBLE_EQ(*five->MeasuredAtOrBelow("cpu", "block4x4", "s8", 0.9), 2.5);
  EXPECT_FALSE(five->MeasuredAtOrBelow("cpu", "block4x4", "s8", 0.4).has_value());
  EXPECT_FALSE(five->MeasuredAtOrBelow("cpu", "2:4", "s8", 0.5).has_value());
  EXPECT_DOUBLE_EQ(*five->SpeedupAt("cpu", "block4x4", 0.8), 2.5);           // "": the s8 rows
  EXPECT_DOUBLE_EQ(*five->SpeedupAt("cpu", "block4x4", 0.8, "f32"), 3.0);
  EXPECT_DOUBLE_EQ(*five->SpeedupAt("cpu", "2:4", 0.5), 0.9);                 // no s8 rows: the others
  auto four = KernelSpeedTable::Parse("backend,structure,sparsity,speedup\ncpu,4:8,0.5,1.1\n", "four.csv");
  ASSERT_TRUE(four.ok());
  EXPECT_DOUBLE_EQ(*four->MeasuredAtOrBelow("cpu", "4:8", "s8", 0.5), 1.1);  // no precision: any
}

TEST(KernelSpeedTable, ShapeColumnParsesAndKeysLookups) {
  auto six = KernelSpeedTable::Parse(
      "backend,structure,precision,sparsity,speedup,shape\n"
      "cpu,2:4,s8,0.5,1.1,any\ncpu,2:4,s8,0.5,0.8,conv:k<2048\ncpu,2:4,s8,0.5,1.2,conv:k>=2048\n"
      "cpu,2:4,s8,0.5,1.3,matmul\n",
      "six.csv");
  ASSERT_TRUE(six.ok()) << six.status().ToString();
  const KernelTableLayer small_conv{true, 576}, big_conv{true, 4608}, linear{false, 64};
  EXPECT_DOUBLE_EQ(*six->MeasuredAtOrBelow("cpu", "2:4", "s8", 0.5), 1.1);  // no layer: the `any` row
  EXPECT_DOUBLE_EQ(*six->MeasuredAtOrBelow("cpu", "2:4", "s8", 0.5, &small_conv), 0.8);
  EXPECT_DOUBLE_EQ(*six->MeasuredAtOrBelow("cpu", "2:4", "s8", 0.5, &big_conv), 1.2);
  EXPECT_DOUBLE_EQ(*six->MeasuredAtOrBelow("cpu", "2:4", "s8", 0.5, &linear), 1.3);
  EXPECT_FALSE(six->MeasuredAtOrBelow("cpu", "2:4", "s8", 0.4, &small_conv).has_value());
  EXPECT_DOUBLE_EQ(*six->SpeedupAt("cpu", "2:4", 0.5), 1.1);  // the pruner: `any` rows only
  EXPECT_TRUE(KernelTableShapeMatches("conv:k>=2048", big_conv));
  EXPECT_FALSE(KernelTableShapeMatches("conv:k>=2048", small_conv));
  EXPECT_FALSE(KernelTableShapeMatches("conv", linear));
  EXPECT_TRUE(KernelTableShapeMatches("", linear));
  auto bad = KernelSpeedTable::Parse(
      "backend,structure,precision,sparsity,speedup,shape\ncpu,2:4,s8,0.5,1,dense\ncpu,2:4,s8,0.5,1,conv:n<3\n"
      "cpu,2:4,s8,0.5,1,conv:k<0\n",
      "bad.csv");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("bad.csv:2: shape 'dense'"), std::string::npos) << bad.status().message();
  EXPECT_NE(bad.status().message().find("bad.csv:3:"), std::string::npos) << bad.status().message();
  EXPECT_NE(bad.status().message().find("bad.csv:4:"), std::string::npos) << bad.status().message();
}

TEST(KernelSpeedTable, ErrorsNameTheLine) {
  auto bad = KernelSpeedTable::Parse(
      "backend,structure,precision,sparsity,speedup\ncpu,block4x4,s4,0.5,2\ncpu,4:2,s8,0.5,2\ncpu,2:4,s8,0.5\n",
      "t.csv");
  ASSERT_FALSE(bad.ok());
  const std::string msg = bad.status().message();
  EXPECT_NE(msg.find("t.csv:2: precision 's4' must be f32, f16 or s8"), std::string::npos) << msg;
  EXPECT_NE(msg.find("t.csv:3: '4:2' is not valid"), std::string::npos) << msg;
  EXPECT_NE(msg.find("t.csv:4: expected 5 cells, got 4"), std::string::npos) << msg;
  EXPECT_FALSE(KernelSpeedTable::Parse("backend,structure\n", "t.csv").ok());
}

}  // namespace
}  // namespace sparq
