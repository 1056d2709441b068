// Every CUDA row against the reference kernel (KernelRegistry::Reference())
// on the same inputs, as ggml's test-backend-ops and ncnn's layer tests do:
// integer rows bit for bit, float rows within the named tolerances below.
// Needs a GPU; without one each case is skipped with "no CUDA device" (the
// Available() message is checked instead). Part of sparq_cuda_tests, which
// tools/gpu_check.sh carries to a GPU machine.
//
// To test a new row, copy a TEST_F below: build host inputs, call
// ExpectRowMatchesReference(op, domain, opset, attributes, inputs, tolerance).
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "kernels/backend.h"
#if defined(SPARQ_HAVE_CUDA)
#include "kernels/cuda/cuda_context.h"
#endif
#include "kernels/op_test_util.h"
#include "kernels/ref/quantize.h"
#include "kernels/registry.h"
#include "sparq/device.h"

namespace sparq {
namespace {

// Largest |got - want| / max(1, |want|) allowed per precision.
constexpr double kExact = 0.0;             // integer rows, aliases, copies, pooling maxima
constexpr double kElementwiseF32 = 2e-6;   // device expf / erff / tanhf vs glibc (a few ulp)
constexpr double kReductionF32 = 1e-5;     // softmax, layer norm, averages: sums in another order
constexpr double kGemmF32 = 1e-4;          // cuBLASLt's FP32 sums in another order (K up to a few hundred)
constexpr double kGemmF16 = 2e-2;          // float16 inputs and outputs
constexpr double kElementwiseF16 = 2e-3;   // float16 rows: one float16 ulp (2^-10) after device expf / erff
constexpr double kReductionF16 = 2e-3;     // float16 softmax, layer norm, averages: one rounding of a float32 result

std::shared_ptr<const Backend> CudaBackendOrNull() {
  static std::shared_ptr<const Backend> backend = MakeCudaBackend();
  return backend;
}

// Skips the test unless this build has the CUDA backend and this machine a GPU.
#define SKIP_WITHOUT_GPU()                                                                       \
  do {                                                                                           \
    if (CudaBackendOrNull() == nullptr) GTEST_SKIP() << "built without CUDA (-DSPARQ_CUDA=OFF)"; \
    Status _available = CudaBackendOrNull()->Available();                                        \
    if (!_available.ok()) GTEST_SKIP() << "no CUDA device: " << _available.message();            \
  } while (0)

Tensor RandomF32(Shape shape, uint32_t seed, float lo = -2.0f, float hi = 2.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  Tensor t(DataType::kFloat32, std::move(shape));
  float* p = t.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = dist(rng);
  return t;
}

template <typename T>
Tensor RandomInt(Shape shape, uint32_t seed, int lo, int hi) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> dist(lo, hi);
  Tensor t(DataTypeOf<T>::value, std::move(shape));
  T* p = t.data<T>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = static_cast<T>(dist(rng));
  return t;
}

class CudaRows : public ::testing::Test {
 protected:
  void SetUp() override {
    SKIP_WITHOUT_GPU();
    auto ctx = CudaBackendOrNull()->CreateContext(BackendOptions{});
    ASSERT_TRUE(ctx.ok()) << ctx.status().ToString();
    context_ = *ctx;
  }

  // Runs the first CUDA row that takes the node (its prepare step sees every
  // input as a constant) and returns its outputs on the host, or an error.
  StatusOr<std::vector<Tensor>> RunCuda(const Node& node, int64_t opset, const std::vector<Tensor>& inputs,
                                        std::string* row_name) {
    std::vector<const Tensor*> constants;
    for (const Tensor& t : inputs) constants.push_back(t.defined() ? &t : nullptr);
    const KernelDef* row = nullptr;
    PreparedKernel prepared;
    std::string declined;
    for (const KernelDef* def : CudaBackendOrNull()->rows().FindMatching(node.op_type, node.domain, opset)) {
      if (def->prepare != nullptr) {
        StatusOr<PreparedKernel> p = def->prepare(node, constants, PrepareContext{});
        if (!p.ok()) {
          declined += def->name + ": " + p.status().message() + "; ";
          continue;
        }
        prepared = *p;
      }
      row = def;
      break;
    }
    if (row == nullptr) return Status::NotFound("no CUDA row takes " + node.Describe() + " (" + declined + ")");
    *row_name = prepared.kernel_name.empty() ? row->name : prepared.kernel_name;
    std::vector<Tensor> device(inputs.size());
    std::vector<const Tensor*> ptrs;
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (!inputs[i].defined()) {
        ptrs.push_back(nullptr);
        continue;
      }
      if (row->host_inputs & (1u << i)) {
        device[i] = inputs[i];
      } else {
        SPARQ_ASSIGN_OR_RETURN(device[i], CopyTensorToDevice(*context_, inputs[i]));
      }
      ptrs.push_back(&device[i]);
    }
    OpContext ctx(node, opset, ptrs, *context_);
    ctx.set_prepared(prepared.state.get());
    SPARQ_RETURN_IF_ERROR(row->fn(ctx));
    std::vector<Tensor> out;
    for (const Tensor& t : ctx.outputs()) {
      if (!t.defined()) {
        out.emplace_back();
        continue;
      }
      if (t.device().is_host()) return Status::Internal(*row_name + " left an output on the host");
      SPARQ_ASSIGN_OR_RETURN(Tensor h, CopyTensorToHost(*context_, t));
      out.push_back(std::move(h));
    }
    SPARQ_RETURN_IF_ERROR(context_->Synchronize());
    return out;
  }

  void ExpectRowMatchesReference(const std::string& op, const std::string& domain, int64_t opset,
                                 std::vector<Attribute> attrs, const std::vector<Tensor>& inputs, double tolerance,
                                 size_t num_outputs = 1) {
    Node node = testing::OpNode(op, std::move(attrs));
    node.domain = domain;
    auto want = testing::RunRefKernel(node, opset, inputs, num_outputs);
    ASSERT_TRUE(want.ok()) << want.status().ToString();
    for (size_t i = 0; i < inputs.size(); ++i) node.inputs.push_back(inputs[i].defined() ? "in" + std::to_string(i) : "");
    for (size_t i = 0; i < num_outputs; ++i) node.outputs.push_back("out" + std::to_string(i));
    std::string row;
    auto got = RunCuda(node, opset, inputs, &row);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    ASSERT_EQ(got->size(), want->size());
    for (size_t o = 0; o < want->size(); ++o) {
      const Tensor& w = (*want)[o];
      const Tensor& g = (*got)[o];
      ASSERT_EQ(g.dtype(), w.dtype()) << row << " output " << o;
      ASSERT_EQ(g.shape(), w.shape()) << row << " output " << o;
      double worst = 0.0;
      int64_t worst_at = -1;
      for (int64_t i = 0; i < w.numel(); ++i) {
        const double a = g.GetAsDouble(i), b = w.GetAsDouble(i);
        if (std::isnan(a) || std::isnan(b)) {
          if (std::isnan(a) != std::isnan(b)) {
            worst = INFINITY;
            worst_at = i;
          }
          continue;
        }
        const double err = std::fabs(a - b) / std::max(1.0, std::fabs(b));
        if (err > worst) {
          worst = err;
          worst_at = i;
        }
      }
      EXPECT_LE(worst, tolerance) << row << " (" << op << ") output " << o << ": worst at " << worst_at << ": "
                                  << (worst_at >= 0 ? g.GetAsDouble(worst_at) : 0.0) << " vs "
                                  << (worst_at >= 0 ? w.GetAsDouble(worst_at) : 0.0);
    }
  }

  std::shared_ptr<BackendContext> context_;
};

// Calibration's statistics reduced on the GPU (CudaContext::MinMaxF32 /
// AbsHistogramF32) against the host's MinMaxRef / AbsHistogramRef: the same
// bounds and every bin's count, through the shared-memory histogram (2,048
// bins) and the global one (8,192), NaNs counted, an all-zero range.
TEST_F(CudaRows, CalibrationStatisticsMatchTheHostsExactly) {
  ASSERT_TRUE(context_->HasCalibrationStats());
  Tensor x = RandomF32({300001}, 70, -40.0f, 25.0f);
  for (int64_t i = 0; i < x.numel(); i += 997) x.data<float>()[i] = 0.0f;    // crowded bin 0
  for (int64_t i = 5; i < x.numel(); i += 50021) x.data<float>()[i] = NAN;  // counted, not binned
  auto dev = CopyTensorToDevice(*context_, x);
  ASSERT_TRUE(dev.ok()) << dev.status().ToString();
  float lo = INFINITY, hi = -INFINITY, want_lo = INFINITY, want_hi = -INFINITY;
  ASSERT_TRUE(context_->MinMaxF32(*dev, &lo, &hi).ok());
  MinMaxRef(x.data<float>(), x.numel(), &want_lo, &want_hi);
  EXPECT_EQ(lo, want_lo);
  EXPECT_EQ(hi, want_hi);
  for (int64_t bins : {2048, 8192, 1}) {
    const double scale = bins == 1 ? 0.0 : bins / 40.0;
    std::vector<int64_t> got(bins, 7), want(bins, 7);  // added to
    auto nans = context_->AbsHistogramF32(*dev, scale, bins - 1, got.data());
    ASSERT_TRUE(nans.ok()) << nans.status().ToString();
    EXPECT_EQ(*nans, AbsHistogramRef(x.data<float>(), x.numel(), scale, bins - 1, want.data())) << bins;
    EXPECT_EQ(got, want) << bins << " bins";
  }
}

TEST(CudaBackend, NamesItselfOrSaysWhyNot) {
  auto backend = CudaBackendOrNull();
  if (backend == nullptr) GTEST_SKIP() << "built without CUDA (-DSPARQ_CUDA=OFF)";
  EXPECT_EQ(backend->name(), "cuda");
  EXPECT_EQ(backend->device().type, DeviceType::kCuda);
  EXPECT_TRUE(backend->rows().CheckPriorities().ok()) << backend->rows().CheckPriorities().ToString();
  EXPECT_FALSE(backend->rows().FindMatching("MatMul", "", 13).empty());
  if (CudaDeviceCount() == 0) {
    const Status st = backend->Available();
    EXPECT_EQ(st.code(), StatusCode::kNotSupported);
    EXPECT_NE(st.message().find("no CUDA device"), std::string::npos) << st.message();
    EXPECT_FALSE(backend->CreateContext(BackendOptions{}).ok());
  } else {
    EXPECT_TRUE(backend->Available().ok());
  }
}

TEST_F(CudaRows, BinaryBroadcast) {
  const Tensor a = RandomF32({2, 3, 4}, 1), b = RandomF32({3, 1}, 2, 0.5f, 2.0f);
  for (const char* op : {"Add", "Sub", "Mul", "Div"}) ExpectRowMatchesReference(op, "", 14, {}, {a, b}, kExact);
  ExpectRowMatchesReference("Add", "", 14, {}, {a, RandomF32({2, 3, 4}, 3)}, kExact);
  const Tensor i = RandomInt<int64_t>({4, 3}, 60, -1000, 1000), j = RandomInt<int64_t>({3}, 61, -3, 3);
  for (const char* op : {"Add", "Sub", "Mul", "Div"}) ExpectRowMatchesReference(op, "", 14, {}, {i, j}, kExact);
  ExpectRowMatchesReference("Shape", "", 15, {Attribute::Int("start", 1)}, {a}, kExact);
  ExpectRowMatchesReference("Cast", "", 13, {Attribute::Int("to", 7)}, {RandomF32({40}, 65, -1e3f, 1e3f)}, kExact);
  ExpectRowMatchesReference("Cast", "", 13, {Attribute::Int("to", 1)}, {i}, kExact);
}

TEST_F(CudaRows, UnaryActivations) {
  const Tensor x = RandomF32({4, 1000}, 4, -8.0f, 8.0f);
  for (const char* op : {"Relu", "Neg", "Abs"}) ExpectRowMatchesReference(op, "", 14, {}, {x}, kExact);
  for (const char* op : {"Sigmoid", "Tanh", "Erf", "Exp"}) ExpectRowMatchesReference(op, "", 13, {}, {x}, kElementwiseF32);
  ExpectRowMatchesReference("Sqrt", "", 13, {}, {RandomF32({1000}, 5, 0.0f, 100.0f)}, kElementwiseF32);
  ExpectRowMatchesReference("Gelu", "", 20, {}, {x}, kElementwiseF32);
  ExpectRowMatchesReference("Silu", kSparqDomain, 1, {}, {x}, kElementwiseF32);
  ExpectRowMatchesReference("GeluErfChain", kSparqDomain, 1, {}, {x}, kElementwiseF32);
  ExpectRowMatchesReference("GeluErfScaledChain", kSparqDomain, 1, {}, {x}, kElementwiseF32);
  ExpectRowMatchesReference("Clip", "", 13, {}, {x, Tensor::Scalar(-1.0f), Tensor::Scalar(3.0f)}, kExact);
}

TEST_F(CudaRows, SoftmaxAndLayerNorm) {
  ExpectRowMatchesReference("Softmax", "", 13, {}, {RandomF32({3, 5, 128}, 6, -20.0f, 20.0f)}, kReductionF32);
  ExpectRowMatchesReference("Softmax", "", 11, {}, {RandomF32({4, 2, 7}, 7)}, kReductionF32);  // coerced to 2-D at axis 1
  const Tensor x = RandomF32({2, 16, 768}, 8), s = RandomF32({768}, 9), b = RandomF32({768}, 10);
  ExpectRowMatchesReference("LayerNormalization", "", 17, {Attribute::Float("epsilon", 1e-5f)}, {x, s, b},
                            kReductionF32);
}

TEST_F(CudaRows, Pooling) {
  const Tensor x = RandomF32({2, 3, 13, 11}, 11);
  ExpectRowMatchesReference("MaxPool", "", 12,
                            {Attribute::Ints("kernel_shape", {3, 3}), Attribute::Ints("strides", {2, 2}),
                             Attribute::Ints("pads", {1, 1, 1, 1})},
                            {x}, kExact);
  ExpectRowMatchesReference("AveragePool", "", 19,
                            {Attribute::Ints("kernel_shape", {3, 2}), Attribute::Ints("pads", {1, 0, 1, 1}),
                             Attribute::Int("count_include_pad", 1), Attribute::Int("ceil_mode", 1)},
                            {x}, kReductionF32);
  ExpectRowMatchesReference("GlobalAveragePool", "", 1, {}, {x}, kReductionF32);
  ExpectRowMatchesReference("MaxPool", "", 12, {Attribute::Ints("kernel_shape", {2, 2}), Attribute::Ints("strides", {2, 2})},
                            {RandomInt<uint8_t>({1, 4, 8, 8}, 66, 0, 255)}, kExact);
  // The reference's order of summation, in double: bit for bit.
  ExpectRowMatchesReference("ReduceMean", "", 13, {Attribute::Ints("axes", {1, 3}), Attribute::Int("keepdims", 0)}, {x},
                            kExact);
  ExpectRowMatchesReference("ReduceSum", "", 13, {}, {x, Tensor::FromVector<int64_t>({1}, {-1})}, kExact);
}

TEST_F(CudaRows, ShapesTransposeConcat) {
  const Tensor x = RandomF32({2, 3, 4}, 12);
  ExpectRowMatchesReference("Reshape", "", 14, {}, {x, Tensor::FromVector<int64_t>({2}, {0, -1})}, kExact);
  ExpectRowMatchesReference("Flatten", "", 13, {Attribute::Int("axis", 2)}, {x}, kExact);
  ExpectRowMatchesReference("Unsqueeze", "", 13, {}, {x, Tensor::FromVector<int64_t>({2}, {0, -1})}, kExact);
  ExpectRowMatchesReference("Squeeze", "", 13, {}, {RandomF32({1, 3, 1}, 13)}, kExact);
  ExpectRowMatchesReference("Identity", "", 16, {}, {x}, kExact);
  ExpectRowMatchesReference("Transpose", "", 13, {Attribute::Ints("perm", {2, 0, 1})}, {x}, kExact);
  ExpectRowMatchesReference("Transpose", "", 13, {}, {RandomInt<int8_t>({5, 7}, 14, -128, 127)}, kExact);
  ExpectRowMatchesReference("Concat", "", 13, {Attribute::Int("axis", 1)}, {x, RandomF32({2, 5, 4}, 15)}, kExact);
  ExpectRowMatchesReference("Split", "", 13, {Attribute::Int("axis", 2)}, {x, Tensor::FromVector<int64_t>({2}, {1, 3})},
                            kExact, 2);
  ExpectRowMatchesReference("Slice", "", 13, {},
                            {x, Tensor::FromVector<int64_t>({2}, {-1, 0}), Tensor::FromVector<int64_t>({2}, {-100, 3}),
                             Tensor::FromVector<int64_t>({2}, {2, 1}), Tensor::FromVector<int64_t>({2}, {-2, 2})},
                            kExact);
  ExpectRowMatchesReference("Resize", "", 13,
                            {Attribute::String("mode", "nearest"), Attribute::String("coordinate_transformation_mode", "asymmetric"),
                             Attribute::String("nearest_mode", "floor")},
                            {RandomF32({1, 2, 3, 4}, 17), Tensor(), Tensor::FromVector<float>({4}, {1.0f, 1.0f, 2.0f, 2.0f})},
                            kExact);
  ExpectRowMatchesReference("Gather", "", 13, {Attribute::Int("axis", 1)},
                            {x, Tensor::FromVector<int64_t>({2, 2}, {2, 0, -1, 1})}, kExact);
  ExpectRowMatchesReference("Gather", "", 13, {}, {RandomF32({30, 8}, 16), Tensor::FromVector<int64_t>({1, 3}, {29, 0, 7})},
                            kExact);
}

TEST_F(CudaRows, QuantizeDequantize) {
  const Tensor x = RandomF32({2, 4, 9}, 16, -30.0f, 30.0f);
  const Tensor scale = Tensor::Scalar(0.25f);  // x / 0.25 hits exact ties
  ExpectRowMatchesReference("QuantizeLinear", "", 13, {}, {x, scale, Tensor::Scalar<int8_t>(3)}, kExact);
  ExpectRowMatchesReference("QuantizeLinear", "", 13, {}, {x, scale, Tensor::Scalar<uint8_t>(128)}, kExact);
  const Tensor per_axis = Tensor::FromVector<float>({4}, {0.1f, 0.2f, 0.3f, 0.5f});
  ExpectRowMatchesReference("QuantizeLinear", "", 13, {Attribute::Int("axis", 1)},
                            {x, per_axis, Tensor::FromVector<int8_t>({4}, {0, 1, -2, 3})}, kExact);
  ExpectRowMatchesReference("DequantizeLinear", "", 13, {},
                            {RandomInt<uint8_t>({3, 50}, 17, 0, 255), Tensor::Scalar(0.05f), Tensor::Scalar<uint8_t>(120)},
                            kExact);
}

TEST_F(CudaRows, QdqGlue) {
  const Tensor a = RandomInt<uint8_t>({4, 33}, 40, 0, 255), b = RandomInt<uint8_t>({33}, 41, 0, 255);
  for (const char* op : {"QLinearAdd", "QLinearMul"}) {
    ExpectRowMatchesReference(op, kSparqDomain, 1, {},
                              {a, Tensor::Scalar(0.02f), Tensor::Scalar<uint8_t>(128), b, Tensor::Scalar(0.03f),
                               Tensor::Scalar<uint8_t>(120), Tensor::Scalar(0.04f), Tensor::Scalar<uint8_t>(127)},
                              kExact);
  }
  ExpectRowMatchesReference("QLinearLut", kSparqDomain, 1, {}, {a, RandomInt<int8_t>({256}, 42, -128, 127)}, kExact);
}

TEST_F(CudaRows, DynamicQuantizationAndFusedQdq) {
  ExpectRowMatchesReference("DynamicQuantizeLinear", "", 11, {}, {RandomF32({5, 300}, 43, -3.0f, 7.0f)}, kExact, 3);
  const Tensor a = RandomInt<uint8_t>({2, 7, 32}, 44, 0, 255), b = RandomInt<int8_t>({32, 24}, 45, -128, 127);
  const std::vector<Tensor> mm = {a, b, Tensor::Scalar<uint8_t>(128), Tensor::Scalar<int8_t>(0), Tensor::Scalar(0.02f),
                                  RandomF32({24}, 46, 0.001f, 0.01f), RandomF32({24}, 47)};
  ExpectRowMatchesReference("MatMulIntegerToFloat", kSparqDomain, 1, {}, mm, kExact);
  ExpectRowMatchesReference("MatMulIntegerToFloat", kSparqDomain, 1, {Attribute::String("activation", "GeluErfChain")},
                            mm, kElementwiseF32);
  const Tensor x = RandomInt<int8_t>({1, 4, 6, 6}, 48, -128, 127), w = RandomInt<int8_t>({3, 4, 3, 3}, 49, -127, 127);
  ExpectRowMatchesReference("QLinearConvLut", kSparqDomain, 1, {},
                            {x, Tensor::Scalar(0.05f), Tensor::Scalar<int8_t>(1), w, Tensor::Scalar(0.01f),
                             Tensor::Scalar<int8_t>(0), Tensor::Scalar(0.3f), Tensor::Scalar<int8_t>(-2), Tensor(),
                             RandomInt<uint8_t>({256}, 50, 0, 255)},
                            kExact);
  const Tensor p = RandomInt<uint8_t>({2, 3, 4}, 51, 0, 255), q = RandomInt<uint8_t>({2, 5, 4}, 52, 0, 255);
  ExpectRowMatchesReference("ConcatLut", kSparqDomain, 1, {Attribute::Int("axis", 1)},
                            {p, RandomInt<uint8_t>({256}, 53, 0, 255), q, Tensor()}, kExact);
  ExpectRowMatchesReference("DequantizeConcat", kSparqDomain, 1, {Attribute::Int("axis", 1)},
                            {p, Tensor::Scalar(0.1f), Tensor::Scalar<uint8_t>(3), q, Tensor::Scalar(0.2f),
                             Tensor::Scalar<uint8_t>(250)},
                            kExact);
}

TEST_F(CudaRows, DenseGemms) {
  ExpectRowMatchesReference("MatMul", "", 13, {}, {RandomF32({2, 33, 64}, 18), RandomF32({64, 48}, 19)}, kGemmF32);
  ExpectRowMatchesReference("MatMul", "", 13, {}, {RandomF32({3, 8, 16}, 20), RandomF32({3, 16, 5}, 21)}, kGemmF32);
  ExpectRowMatchesReference("Gemm", "", 13, {Attribute::Int("transB", 1), Attribute::Float("alpha", 0.5f)},
                            {RandomF32({7, 32}, 22), RandomF32({12, 32}, 23), RandomF32({12}, 24)}, kGemmF32);
  const Tensor a16 = RandomF32({16, 64}, 25).CastTo(DataType::kFloat16);
  const Tensor b16 = RandomF32({64, 32}, 26).CastTo(DataType::kFloat16);
  ExpectRowMatchesReference("MatMul", "", 13, {}, {a16, b16}, kGemmF16);
}

TEST_F(CudaRows, Convolutions) {
  const Tensor x = RandomF32({2, 3, 15, 17}, 27);
  ExpectRowMatchesReference("Conv", "", 11,
                            {Attribute::Ints("pads", {1, 1, 1, 1}), Attribute::Ints("strides", {2, 1})},
                            {x, RandomF32({8, 3, 3, 3}, 28), RandomF32({8}, 29)}, kGemmF32);
  ExpectRowMatchesReference("Conv", "", 11, {Attribute::Int("group", 3), Attribute::Ints("pads", {2, 2, 2, 2}),
                                             Attribute::Ints("dilations", {2, 2})},
                            {x, RandomF32({3, 1, 3, 3}, 30), RandomF32({3}, 31)}, kGemmF32);
}

// The float16 rows (rows_f16.cc) against the reference's float16 kernels,
// which compute in float32 and round once, as the rows do.
TEST_F(CudaRows, Float16Rows) {
  auto half = [](Shape shape, uint32_t seed, float lo = -2.0f, float hi = 2.0f) {
    return RandomF32(std::move(shape), seed, lo, hi).CastTo(DataType::kFloat16);
  };
  const Tensor a = half({2, 3, 64}, 80), b = half({3, 1}, 81, 0.5f, 2.0f);
  for (const char* op : {"Add", "Sub", "Mul", "Div"}) ExpectRowMatchesReference(op, "", 14, {}, {a, b}, kExact);
  const Tensor x = half({4, 500}, 82, -8.0f, 8.0f);
  for (const char* op : {"Relu", "Neg", "Abs"}) ExpectRowMatchesReference(op, "", 14, {}, {x}, kExact);
  for (const char* op : {"Sigmoid", "Tanh", "Erf", "Exp"}) ExpectRowMatchesReference(op, "", 13, {}, {x}, kElementwiseF16);
  ExpectRowMatchesReference("Gelu", "", 20, {}, {x}, kElementwiseF16);
  ExpectRowMatchesReference("Clip", "", 13, {}, {x, Tensor::Scalar(0.0f).CastTo(DataType::kFloat16),
                                                 Tensor::Scalar(6.0f).CastTo(DataType::kFloat16)}, kExact);
  ExpectRowMatchesReference("Softmax", "", 13, {}, {half({3, 5, 128}, 83, -8.0f, 8.0f)}, kReductionF16);
  ExpectRowMatchesReference("LayerNormalization", "", 17, {Attribute::Float("epsilon", 1e-5f)},
                            {half({2, 16, 384}, 84), half({384}, 85), half({384}, 86)}, kReductionF16);
  const Tensor img = half({2, 8, 13, 11}, 87);
  ExpectRowMatchesReference("MaxPool", "", 12, {Attribute::Ints("kernel_shape", {3, 3}), Attribute::Ints("strides", {2, 2}),
                                                Attribute::Ints("pads", {1, 1, 1, 1})}, {img}, kExact);
  ExpectRowMatchesReference("AveragePool", "", 19, {Attribute::Ints("kernel_shape", {3, 2}), Attribute::Ints("pads", {1, 0, 1, 1})},
                            {img}, kReductionF16);
  ExpectRowMatchesReference("GlobalAveragePool", "", 1, {}, {img}, kReductionF16);
  ExpectRowMatchesReference("Cast", "", 19, {Attribute::Int("to", 1)}, {x}, kExact);
  ExpectRowMatchesReference("Cast", "", 19, {Attribute::Int("to", 10)}, {RandomF32({300}, 88, -7e4f, 7e4f)}, kExact);
  ExpectRowMatchesReference("Cast", "", 19, {Attribute::Int("to", 7)}, {half({300}, 89, -300.0f, 300.0f)}, kExact);
  ExpectRowMatchesReference("Conv", "", 11, {Attribute::Ints("pads", {1, 1, 1, 1}), Attribute::Ints("strides", {2, 1})},
                            {img, half({16, 8, 3, 3}, 90), half({16}, 91)}, kGemmF16);
  ExpectRowMatchesReference("Conv", "", 11, {}, {img, half({16, 8, 1, 1}, 92), half({16}, 93)}, kGemmF16);  // pointwise
  ExpectRowMatchesReference("Conv", "", 11, {Attribute::Int("group", 8), Attribute::Ints("pads", {1, 1, 1, 1})},
                            {img, half({8, 1, 3, 3}, 94), half({8}, 95)}, kGemmF16);
  ExpectRowMatchesReference("Gemm", "", 13, {Attribute::Int("transB", 1)}, {half({7, 32}, 96), half({16, 32}, 97), half({16}, 98)},
                            kGemmF16);
  ExpectRowMatchesReference("RoundToFloat16", kSparqDomain, 1, {}, {RandomF32({1000}, 99, -7e4f, 7e4f)}, kExact);
}

// The attention-mask rows (rows_mask.cc): exact.
TEST_F(CudaRows, MaskRows) {
  const Tensor a = RandomF32({2, 3, 4}, 110), b = RandomF32({3, 1}, 111);
  for (const char* op : {"Equal", "Greater", "GreaterOrEqual", "Less", "LessOrEqual"}) {
    ExpectRowMatchesReference(op, "", 16, {}, {a, b}, kExact);
    ExpectRowMatchesReference(op, "", 16, {}, {RandomInt<int64_t>({4, 5}, 112, -3, 3), RandomInt<int64_t>({5}, 113, -3, 3)}, kExact);
  }
  const Tensor p = RandomInt<int32_t>({3, 4}, 114, 0, 1).CastTo(DataType::kBool);
  const Tensor q = RandomInt<int32_t>({4}, 115, 0, 1).CastTo(DataType::kBool);
  for (const char* op : {"And", "Or", "Xor"}) ExpectRowMatchesReference(op, "", 7, {}, {p, q}, kExact);
  ExpectRowMatchesReference("Where", "", 16, {}, {RandomInt<int32_t>({2, 1, 4}, 116, 0, 1).CastTo(DataType::kBool),
                                                  RandomF32({3, 1}, 117), RandomF32({2, 3, 4}, 118)}, kExact);
  ExpectRowMatchesReference("Expand", "", 13, {}, {RandomF32({3, 1}, 119), Tensor::FromVector<int64_t>({3}, {2, 3, 5})}, kExact);
  ExpectRowMatchesReference("ConstantOfShape", "", 20, {Attribute::FromTensor("value", Tensor::FromVector<int64_t>({1}, {7}))},
                            {Tensor::FromVector<int64_t>({2}, {3, 4})}, kExact);
  ExpectRowMatchesReference("Range", "", 11, {}, {Tensor::Scalar<int64_t>(2), Tensor::Scalar<int64_t>(17), Tensor::Scalar<int64_t>(3)},
                            kExact);
  const Tensor h = RandomF32({2, 64, 24}, 120).CastTo(DataType::kFloat16);
  ExpectRowMatchesReference("ReduceSum", "", 13, {}, {h, Tensor::FromVector<int64_t>({1}, {1})}, kReductionF16);
}

TEST_F(CudaRows, FloatFusions) {
  const Tensor x = RandomF32({1, 4, 9, 9}, 70);
  ExpectRowMatchesReference("FusedConv", kSparqDomain, 1,
                            {Attribute::Ints("pads", {1, 1, 1, 1}), Attribute::Float("out_min", 0.0f),
                             Attribute::Float("out_max", 6.0f)},
                            {x, RandomF32({6, 4, 3, 3}, 71), RandomF32({6}, 72)}, kGemmF32);
  ExpectRowMatchesReference("FusedConv", kSparqDomain, 1,
                            {Attribute::Int("group", 4), Attribute::Ints("pads", {1, 1, 1, 1}),
                             Attribute::String("activation", "Silu")},
                            {x, RandomF32({4, 1, 3, 3}, 73), RandomF32({4}, 74)}, kGemmF32);
  ExpectRowMatchesReference("PointwiseDepthwise", kSparqDomain, 1,
                            {Attribute::Float("pw_out_min", 0.0f), Attribute::Float("pw_out_max", 6.0f),
                             Attribute::Int("group", 6), Attribute::Ints("kernel_shape", {3, 3}),
                             Attribute::Ints("pads", {1, 1, 1, 1})},
                            {x, RandomF32({6, 4, 1, 1}, 75), RandomF32({6}, 76), RandomF32({6, 1, 3, 3}, 77),
                             RandomF32({6}, 78)},
                            kGemmF32);
  ExpectRowMatchesReference("HardSwishChain", kSparqDomain, 1, {}, {RandomF32({3, 50}, 79, -8.0f, 8.0f)}, kExact);
  const Tensor q = RandomF32({2, 3, 7, 8}, 80), kt = RandomF32({2, 3, 8, 7}, 81), v = RandomF32({2, 3, 7, 5}, 82);
  ExpectRowMatchesReference("Attention", kSparqDomain, 1, {Attribute::String("scale_op", "Div")},
                            {q, kt, v, RandomF32({2, 1, 1, 7}, 83), Tensor::Scalar(2.828427f)}, kGemmF32);
  const Tensor qs = RandomF32({2, 7, 3, 8}, 84), ks = RandomF32({2, 7, 3, 8}, 85), vs = RandomF32({2, 7, 3, 5}, 86);
  ExpectRowMatchesReference("Attention", kSparqDomain, 1, {Attribute::String("layout", "bshd")}, {qs, ks, vs}, kGemmF32);
}

TEST_F(CudaRows, UnsupportedTypesRunOnTheHost) {
  // float64 has no CUDA kernel: the rows copy the inputs down and run the reference.
  const Tensor a = RandomF32({3, 4}, 87).CastTo(DataType::kFloat64), b = RandomF32({4}, 88).CastTo(DataType::kFloat64);
  ExpectRowMatchesReference("Add", "", 14, {}, {a, b}, kExact);
  ExpectRowMatchesReference("Softmax", "", 13, {Attribute::Int("axis", 0)}, {RandomF32({5, 6}, 89)}, kExact);
}

TEST_F(CudaRows, Int8GemmsAreExact) {
  // K a multiple of 4 (cuBLASLt's IMMA kernels) and not (the fallback kernel).
  for (int64_t k : {64, 30}) {
    const Tensor a = RandomInt<uint8_t>({2, 9, k}, 32, 0, 255), b = RandomInt<int8_t>({k, 20}, 33, -128, 127);
    ExpectRowMatchesReference(
        "QLinearMatMul", "", 10, {},
        {a, Tensor::Scalar(0.02f), Tensor::Scalar<uint8_t>(131), b, Tensor::Scalar(0.01f), Tensor::Scalar<int8_t>(-3),
         Tensor::Scalar(0.5f), Tensor::Scalar<int8_t>(5)},
        kExact);
  }
  const Tensor x = RandomInt<uint8_t>({2, 4, 9, 8}, 34, 0, 255), w = RandomInt<int8_t>({6, 4, 3, 3}, 35, -127, 127);
  std::vector<float> w_scale = {0.01f, 0.02f, 0.015f, 0.03f, 0.005f, 0.01f};
  ExpectRowMatchesReference("QLinearConv", "", 10, {Attribute::Ints("pads", {1, 1, 1, 1})},
                            {x, Tensor::Scalar(0.03f), Tensor::Scalar<uint8_t>(120), w,
                             Tensor::FromVector<float>({6}, w_scale), Tensor::FromVector<int8_t>({6}, {0, 0, 0, 0, 0, 0}),
                             Tensor::Scalar(0.2f), Tensor::Scalar<uint8_t>(100), RandomInt<int32_t>({6}, 36, -500, 500)},
                            kExact);
}

TEST_F(CudaRows, DepthwiseInt8ConvIsExact) {
  const Tensor x = RandomInt<int8_t>({1, 6, 10, 10}, 62, -128, 127), w = RandomInt<int8_t>({6, 1, 3, 3}, 63, -127, 127);
  ExpectRowMatchesReference("QLinearConv", "", 10, {Attribute::Int("group", 6), Attribute::Ints("pads", {1, 1, 1, 1})},
                            {x, Tensor::Scalar(0.05f), Tensor::Scalar<int8_t>(-3), w, Tensor::Scalar(0.01f),
                             Tensor::Scalar<int8_t>(0), Tensor::Scalar(0.2f), Tensor::Scalar<int8_t>(4),
                             RandomInt<int32_t>({6}, 64, -100, 100)},
                            kExact);
}

TEST_F(CudaRows, BlockSparseF16MatMulRunsBlockedEll) {
  // W [256, 128] with 7 of every 8 blocks of 32 x 32 zero (87.5% block sparsity).
  Tensor w = RandomF32({256, 128}, 37);
  float* wp = w.data<float>();
  for (int64_t r = 0; r < 256; ++r)
    for (int64_t c = 0; c < 128; ++c)
      if (((r / 32) * 4 + c / 32) % 8 != 0) wp[r * 128 + c] = 0.0f;
  const Tensor w16 = w.CastTo(DataType::kFloat16), x16 = RandomF32({3, 64, 256}, 38).CastTo(DataType::kFloat16);
  Node node = testing::OpNode("MatMul");
  node.inputs = {"x", "w"};
  node.outputs = {"y"};
  std::string row;
  auto got = RunCuda(node, 13, {x16, w16}, &row);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(row, "spmm_bell32_f16_cusparse");
  ExpectRowMatchesReference("MatMul", "", 13, {}, {x16, w16}, kGemmF16);
}

// W [k, n] float32 with only the b x b blocks (r / b + 3 * (c / b)) % 8 == 0 kept (87.5% zero).
Tensor BlockSparseF32(int64_t k, int64_t n, int64_t b, uint32_t seed) {
  Tensor w = RandomF32({k, n}, seed);
  float* wp = w.data<float>();
  for (int64_t r = 0; r < k; ++r)
    for (int64_t c = 0; c < n; ++c)
      if ((r / b + 3 * (c / b)) % 8 != 0) wp[r * n + c] = 0.0f;
  return w;
}

#if defined(SPARQ_HAVE_CUDA)
// The own WMMA kernel (spmm_bell_wmma.cu), forced by CudaBackendOptions (the
// prepared name stays the table's pick), at blocks of 32 and 64 (87.5% zero
// at each), token counts across its tiles (128 / 64 per block).
TEST_F(CudaRows, BlockSparseF16MatMulOwnKernelMatchesReference) {
  cuda::CudaBackendOptions options;
  options.block_sparse_kernel = cuda::CudaBackendOptions::SparseKernel::kWmma;
  auto ctx = cuda::MakeCudaBackendWithOptions(options)->CreateContext(BackendOptions{});
  ASSERT_TRUE(ctx.ok()) << ctx.status().ToString();
  context_ = *ctx;
  for (int64_t b : {32, 64}) {
    for (int64_t tokens : {1, 200, 256}) {
      SCOPED_TRACE("block " + std::to_string(b) + ", " + std::to_string(tokens) + " tokens");
      const int64_t k = 8 * b, n = 4 * b;
      Tensor w = BlockSparseF32(k, n, b, 40 + static_cast<uint32_t>(b));
      const Tensor w16 = w.CastTo(DataType::kFloat16), x16 = RandomF32({tokens, k}, 41).CastTo(DataType::kFloat16);
      Node node = testing::OpNode("MatMul");
      node.inputs = {"x", "w"};
      node.outputs = {"y"};
      std::string row;
      auto got = RunCuda(node, 13, {x16, w16}, &row);
      ASSERT_TRUE(got.ok()) << got.status().ToString();
      ExpectRowMatchesReference("MatMul", "", 13, {}, {x16, w16}, kGemmF16);
    }
  }
}

// The own INT8 kernel with the requantize / float epilogue fused, forced:
// the reference's bits, blocks 32 and 64, token tiles partly filled.
TEST_F(CudaRows, BlockSparseInt8OwnKernelIsExact) {
  cuda::CudaBackendOptions options;
  options.block_sparse_kernel = cuda::CudaBackendOptions::SparseKernel::kWmma;
  auto ctx = cuda::MakeCudaBackendWithOptions(options)->CreateContext(BackendOptions{});
  ASSERT_TRUE(ctx.ok()) << ctx.status().ToString();
  context_ = *ctx;
  for (int64_t b : {32, 64}) {
    const int64_t k = 8 * b, n = 4 * b;
    const Tensor w = BlockSparseF32(k, n, b, 50 + static_cast<uint32_t>(b));
    Tensor w8(DataType::kInt8, {k, n});
    for (int64_t i = 0; i < w8.numel(); ++i) w8.data<int8_t>()[i] = static_cast<int8_t>(std::lround(w.data<float>()[i] * 60.0f));
    const Tensor x = RandomInt<uint8_t>({2, 101, k}, 51, 0, 255);
    ExpectRowMatchesReference("QLinearMatMul", "", 10, {},
                              {x, Tensor::Scalar(0.02f), Tensor::Scalar<uint8_t>(129), w8, Tensor::Scalar(0.003f),
                               Tensor::Scalar<int8_t>(0), Tensor::Scalar(0.25f), Tensor::Scalar<uint8_t>(125)},
                              kExact);
    ExpectRowMatchesReference("MatMulIntegerToFloat", kSparqDomain, 1, {},
                              {x, w8, Tensor::Scalar<uint8_t>(129), Tensor::Scalar<int8_t>(0), Tensor::Scalar(0.02f),
                               RandomF32({n}, 52, 0.001f, 0.01f), RandomF32({n}, 53)},
                              kExact);
  }
}
#endif

// QLinearMatMul / sparq.MatMulIntegerToFloat with a block-sparse symmetric
// int8 weight: cuSPARSE's INT8 SpMM and the requantize epilogue, bit for bit.
TEST_F(CudaRows, BlockSparseInt8MatMulsRunBlockedEllExactly) {
  const Tensor w = BlockSparseF32(256, 128, 32, 43);
  Tensor w8(DataType::kInt8, {256, 128});
  for (int64_t i = 0; i < w8.numel(); ++i) w8.data<int8_t>()[i] = static_cast<int8_t>(std::lround(w.data<float>()[i] * 60.0f));
  const Tensor x = RandomInt<uint8_t>({77, 256}, 44, 0, 255);
  std::vector<float> scales(128);
  for (size_t i = 0; i < scales.size(); ++i) scales[i] = 0.002f + 0.0001f * static_cast<float>(i % 13);
  const std::vector<Tensor> q = {x, Tensor::Scalar(0.02f), Tensor::Scalar<uint8_t>(131), w8,
                                 Tensor::FromVector<float>({128}, scales), Tensor::Scalar<int8_t>(0),
                                 Tensor::Scalar(0.3f), Tensor::Scalar<uint8_t>(118)};
  Node node = testing::OpNode("QLinearMatMul");
  for (size_t i = 0; i < q.size(); ++i) node.inputs.push_back("in" + std::to_string(i));
  node.outputs = {"y"};
  std::string row;
  auto got = RunCuda(node, 10, q, &row);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(row, "qlinear_matmul_s8_bell32_cusparse");
  ExpectRowMatchesReference("QLinearMatMul", "", 10, {}, q, kExact);
  const std::vector<Tensor> mm = {x, w8, Tensor::Scalar<uint8_t>(131), Tensor::Scalar<int8_t>(0), Tensor::Scalar(0.02f),
                                  Tensor::FromVector<float>({128}, scales), RandomF32({128}, 45)};
  ExpectRowMatchesReference("MatMulIntegerToFloat", kSparqDomain, 1, {}, mm, kExact);
}

}  // namespace
}  // namespace sparq
