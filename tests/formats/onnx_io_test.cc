// Load/save of ONNX files: round trips, external data, and every way a file
// can be bad.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "sparq/executor.h"
#include "sparq/file_io.h"
#include "sparq/onnx_io.h"
#include "test_util.h"

namespace sparq {
namespace {

namespace fs = std::filesystem;

// x[1,4] -> MatMul(W[4,3]) -> Add(b[3]) -> Relu -> y
Model SmallMlp() {
  Model m;
  m.ir_version = 8;
  m.opset_imports = {{"", 17}};
  m.producer_name = "sparq-test";
  Graph& g = m.graph;
  g.name = "mlp";
  g.inputs.push_back(testing::FloatInput("x", {{-1, "batch"}, {4, ""}}));
  g.outputs.push_back(testing::FloatInput("y", {{-1, "batch"}, {3, ""}}));
  std::vector<float> w(12), b(3);
  for (size_t i = 0; i < w.size(); ++i) w[i] = 0.1f * static_cast<float>(i) - 0.5f;
  for (size_t i = 0; i < b.size(); ++i) b[i] = 0.25f * static_cast<float>(i);
  g.initializers["W"] = Tensor::FromVector<float>({4, 3}, w);
  g.initializers["b"] = Tensor::FromVector<float>({3}, b);
  g.nodes.push_back({"mm", "MatMul", "", {"x", "W"}, {"h"}, {}, ""});
  g.nodes.push_back({"add", "Add", "", {"h", "b"}, {"z"}, {}, ""});
  Node relu{"relu", "Relu", "", {"z"}, {"y"}, {}, "a doc string"};
  g.nodes.push_back(relu);
  return m;
}

void ExpectSameGraph(const Model& a, const Model& b) {
  ASSERT_EQ(a.graph.nodes.size(), b.graph.nodes.size());
  for (size_t i = 0; i < a.graph.nodes.size(); ++i) {
    EXPECT_EQ(a.graph.nodes[i].name, b.graph.nodes[i].name);
    EXPECT_EQ(a.graph.nodes[i].op_type, b.graph.nodes[i].op_type);
    EXPECT_EQ(a.graph.nodes[i].inputs, b.graph.nodes[i].inputs);
    EXPECT_EQ(a.graph.nodes[i].outputs, b.graph.nodes[i].outputs);
    EXPECT_EQ(a.graph.nodes[i].attributes.size(), b.graph.nodes[i].attributes.size());
  }
  ASSERT_EQ(a.graph.initializers.size(), b.graph.initializers.size());
  for (const auto& [name, t] : a.graph.initializers) {
    ASSERT_TRUE(b.graph.initializers.count(name)) << name;
    EXPECT_TRUE(t.Equals(b.graph.initializers.at(name))) << name;
  }
  ASSERT_EQ(a.graph.inputs.size(), b.graph.inputs.size());
  for (size_t i = 0; i < a.graph.inputs.size(); ++i)
    EXPECT_EQ(a.graph.inputs[i].Describe(), b.graph.inputs[i].Describe());
  EXPECT_EQ(a.opset(), b.opset());
}

TEST(OnnxIo, RoundTripKeepsGraphAndPassesChecker) {
  testing::TempDir dir;
  Model m = SmallMlp();
  ASSERT_TRUE(CheckModel(m).ok()) << CheckModel(m).ToString();
  std::string path = dir.path("mlp.onnx");
  ASSERT_TRUE(SaveModel(m, path).ok());
  auto loaded = LoadModel(path);
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  ExpectSameGraph(m, *loaded);
  EXPECT_EQ(loaded->producer_name, "sparq-test");
  EXPECT_EQ(loaded->graph.nodes[2].doc_string, "a doc string");
  EXPECT_TRUE(CheckModel(*loaded).ok());
  // Saving the loaded model again gives the same bytes: load -> save is stable.
  auto bytes1 = SerializeModel(*loaded);
  auto again = LoadModelFromBytes(*bytes1);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*SerializeModel(*again), *bytes1);
}

TEST(OnnxIo, ShapeInferenceFillsValueInfo) {
  Model m = SmallMlp();
  ASSERT_TRUE(InferShapes(m).ok());
  const ValueInfo* h = m.graph.FindValueInfo("h");
  ASSERT_NE(h, nullptr);
  EXPECT_EQ(h->Describe(), "float32[batch, 3]");
}

TEST(OnnxIo, ExternalDataRoundTrip) {
  testing::TempDir dir;
  Model m = SmallMlp();
  SaveOptions opt;
  opt.external_data = true;
  opt.external_data_threshold = 16;  // W (48 bytes) goes out, b (12 bytes) stays inline
  std::string path = dir.path("ext.onnx");
  ASSERT_TRUE(SaveModel(m, path, opt).ok());
  ASSERT_TRUE(fs::exists(dir.path("ext.onnx.data")));
  EXPECT_EQ(fs::file_size(dir.path("ext.onnx.data")), 48u);
  auto loaded = LoadModel(path);
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  ExpectSameGraph(m, *loaded);
}

TEST(OnnxIo, MissingExternalDataFileIsNotFound) {
  testing::TempDir dir;
  SaveOptions opt;
  opt.external_data = true;
  opt.external_data_threshold = 16;
  std::string path = dir.path("ext.onnx");
  ASSERT_TRUE(SaveModel(SmallMlp(), path, opt).ok());
  fs::remove(dir.path("ext.onnx.data"));
  auto loaded = LoadModel(path);
  ASSERT_FALSE(loaded.ok());
  EXPECT_EQ(loaded.status().code(), StatusCode::kNotFound);
  EXPECT_NE(loaded.status().message().find("external data file not found"), std::string::npos);
  EXPECT_NE(loaded.status().message().find("ext.onnx.data"), std::string::npos);
  EXPECT_NE(loaded.status().message().find("'W'"), std::string::npos);
}

TEST(OnnxIo, TruncatedExternalDataIsCorruption) {
  testing::TempDir dir;
  SaveOptions opt;
  opt.external_data = true;
  opt.external_data_threshold = 16;
  std::string path = dir.path("ext.onnx");
  ASSERT_TRUE(SaveModel(SmallMlp(), path, opt).ok());
  fs::resize_file(dir.path("ext.onnx.data"), 20);
  auto loaded = LoadModel(path);
  ASSERT_FALSE(loaded.ok());
  EXPECT_EQ(loaded.status().code(), StatusCode::kCorruption);
  EXPECT_NE(loaded.status().message().find("truncated"), std::string::npos);
}

TEST(OnnxIo, SparseInitializersRoundTripAndShrinkTheFile) {
  Model m = SmallMlp();
  // A 64x32 weight, 90% zeros (one value in ten kept), and a dense bias.
  Tensor w = testing::RandomFloats({64, 32}, 3);
  for (int64_t i = 0; i < w.numel(); ++i)
    if (i % 10 != 0) w.data<float>()[i] = 0.0f;
  w.data<float>()[1] = -0.0f;  // a negative zero is a value, not a zero
  m.graph.initializers["W"] = w;
  m.graph.initializers["b"] = testing::RandomFloats({32}, 4);
  m.graph.inputs[0] = testing::FloatInput("x", {{-1, "batch"}, {64, ""}});
  m.graph.outputs[0] = testing::FloatInput("y", {{-1, "batch"}, {32, ""}});
  testing::TempDir dir;
  SaveOptions sparse;
  sparse.sparse_initializers = true;
  ASSERT_TRUE(SaveModel(m, dir.path("dense.onnx")).ok());
  ASSERT_TRUE(SaveModel(m, dir.path("sparse.onnx"), sparse).ok());
  EXPECT_LT(fs::file_size(dir.path("sparse.onnx")), fs::file_size(dir.path("dense.onnx")) / 2);
  auto back = LoadModel(dir.path("sparse.onnx"));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_TRUE(CheckModel(*back).ok());
  const Tensor& got = back->graph.initializers.at("W");
  ASSERT_EQ(got.shape(), w.shape());
  EXPECT_EQ(std::memcmp(got.raw_data(), w.raw_data(), w.nbytes()), 0);  // bit-exact, -0.0 included
  EXPECT_EQ(std::memcmp(back->graph.initializers.at("b").raw_data(), m.graph.initializers.at("b").raw_data(),
                        m.graph.initializers.at("b").nbytes()),
            0);
}

// Inputs the fuzzer found (tests/fuzz/regressions): the first byte is the
// fuzzer's option byte, the rest a ModelProto.
StatusOr<Model> LoadFuzzRegression(const std::string& name) {
  std::ifstream in(std::string(SPARQ_SOURCE_DIR) + "/tests/fuzz/regressions/" + name, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_GT(bytes.size(), 1u) << name;
  return LoadModelFromBytes(bytes.substr(1), ".", LoadOptions{});
}

TEST(OnnxIo, HugeDimsWithLittleDataFailBeforeAllocating) {
  // A 4-byte raw_data for dims that ask for terabytes: must be rejected from
  // the sizes, not after trying to allocate.
  auto loaded = LoadFuzzRegression("onnx_loader-alloc-before-size-check");
  ASSERT_FALSE(loaded.ok());
  EXPECT_EQ(loaded.status().code(), StatusCode::kCorruption) << loaded.status().ToString();
}

TEST(OnnxIo, OverflowingDimsAreCorruption) {
  // dims [2^62 + 1, 4]: the element count overflows int64.
  auto loaded = LoadFuzzRegression("onnx_loader-dims-overflow");
  ASSERT_FALSE(loaded.ok());
  EXPECT_EQ(loaded.status().code(), StatusCode::kCorruption);
  EXPECT_NE(loaded.status().message().find("too large"), std::string::npos) << loaded.status().message();
}

TEST(OnnxIo, CheckedNumElementsRejectsOverflow) {
  EXPECT_EQ(*CheckedNumElements({2, 3, 4}, DataType::kFloat32), 24);
  EXPECT_EQ(*CheckedNumElements({0, int64_t{1} << 62}, DataType::kFloat32), 0);
  EXPECT_FALSE(CheckedNumElements({int64_t{1} << 31, int64_t{1} << 31}, DataType::kFloat32).ok());
  EXPECT_FALSE(CheckedNumElements({3, -1}, DataType::kInt8).ok());
}

TEST(OnnxIo, MissingFileIsNotFound) {
  auto loaded = LoadModel("/nonexistent/model.onnx");
  ASSERT_FALSE(loaded.ok());
  EXPECT_EQ(loaded.status().code(), StatusCode::kNotFound);
  EXPECT_NE(loaded.status().message().find("/nonexistent/model.onnx"), std::string::npos);
}

TEST(OnnxIo, TruncatedFileIsCorruption) {
  testing::TempDir dir;
  std::string path = dir.path("m.onnx");
  ASSERT_TRUE(SaveModel(SmallMlp(), path).ok());
  auto size = fs::file_size(path);
  fs::resize_file(path, size / 2);
  auto loaded = LoadModel(path);
  ASSERT_FALSE(loaded.ok());
  EXPECT_EQ(loaded.status().code(), StatusCode::kCorruption);
  EXPECT_NE(loaded.status().message().find("m.onnx"), std::string::npos);
}

TEST(OnnxIo, GarbageBytesAreCorruption) {
  testing::TempDir dir;
  std::string path = dir.path("junk.onnx");
  std::ofstream(path) << "this is not a protobuf \xff\xff\xff\xff";
  auto loaded = LoadModel(path);
  ASSERT_FALSE(loaded.ok());
  EXPECT_EQ(loaded.status().code(), StatusCode::kCorruption);
  EXPECT_NE(loaded.status().message().find("not a valid ONNX model"), std::string::npos);
}

TEST(OnnxIo, EmptyFileIsCorruption) {
  testing::TempDir dir;
  std::string path = dir.path("empty.onnx");
  std::ofstream(path).close();
  auto loaded = LoadModel(path);
  ASSERT_FALSE(loaded.ok());
  EXPECT_NE(loaded.status().message().find("empty"), std::string::npos);
}

TEST(OnnxIo, DanglingInputIsReported) {
  Model m = SmallMlp();
  m.graph.nodes[1].inputs[0] = "nowhere";
  auto bytes = SerializeModel(m);
  auto loaded = LoadModelFromBytes(*bytes);
  ASSERT_FALSE(loaded.ok());
  EXPECT_NE(loaded.status().message().find("'nowhere'"), std::string::npos);
  EXPECT_NE(loaded.status().message().find("'add'"), std::string::npos);
}

TEST(OnnxIo, AtomicWriteLeavesNoTemporaryFiles) {
  testing::TempDir dir;
  ASSERT_TRUE(WriteFileAtomically(dir.path("a.bin"), "hello").ok());
  ASSERT_TRUE(WriteFileAtomically(dir.path("a.bin"), "world").ok());
  int files = 0;
  for (const auto& e : fs::directory_iterator(dir.root())) files += e.is_regular_file();
  EXPECT_EQ(files, 1);
  EXPECT_EQ(*ReadFile(dir.path("a.bin")), "world");
  Status st = WriteFileAtomically(dir.path("no/such/dir/a.bin"), "x");
  EXPECT_EQ(st.code(), StatusCode::kNotFound);
}

TEST(OnnxIo, RefusesToOverwriteWhenAsked) {
  testing::TempDir dir;
  std::string path = dir.path("m.onnx");
  ASSERT_TRUE(SaveModel(SmallMlp(), path).ok());
  SaveOptions opt;
  opt.overwrite = false;
  Status st = SaveModel(SmallMlp(), path, opt);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("refusing to overwrite"), std::string::npos);
}

TEST(OnnxIo, ConstantNodeWeightsAreFoundAsWeights) {
  Model m = SmallMlp();
  Tensor w = m.graph.initializers["W"];
  m.graph.initializers.erase("W");
  Attribute value;
  value.name = "value";
  value.kind = Attribute::Kind::kTensor;
  value.t = w;
  m.graph.nodes.insert(m.graph.nodes.begin(), Node{"wconst", "Constant", "", {}, {"W"}, {value}, ""});
  auto loaded = LoadModelFromBytes(*SerializeModel(m));
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  const Tensor* found = loaded->graph.FindWeight("W");
  ASSERT_NE(found, nullptr);
  EXPECT_TRUE(found->Equals(w));
}

TEST(OnnxIo, HalfConversionsRoundTrip) {
  for (float f : {0.0f, 1.0f, -2.5f, 65504.0f, 6.1035156e-05f, 5.9604645e-08f, 0.33325195f}) {
    EXPECT_EQ(HalfToFloat(FloatToHalf(f)), f) << f;
  }
  EXPECT_EQ(FloatToHalf(1e6f), 0x7c00);         // overflow to +inf
  EXPECT_EQ(FloatToHalf(2.9802322e-08f), 0x0000);  // exactly half the smallest subnormal: ties to even (0)
  EXPECT_EQ(FloatToHalf(1.0f + 1.0f / 2048), 0x3c00);  // tie between 1 and 1+2^-10 rounds to even
  EXPECT_EQ(BFloat16ToFloat(FloatToBFloat16(3.140625f)), 3.140625f);
}

// Clip took its bounds as attributes until opset 11: the converter moves
// them to inputs, and the converted graph computes the same values.
TEST(OnnxIo, ConvertOpsetRewritesOpsWhoseSignatureChanged) {
  Model m;
  m.ir_version = 4;
  m.opset_imports = {{"", 9}};
  m.graph.name = "clip9";
  m.graph.inputs.push_back(testing::FloatInput("x", {{2, ""}, {3, ""}}));
  m.graph.outputs.push_back(testing::FloatInput("y", {{2, ""}, {3, ""}}));
  m.graph.nodes.push_back({"clip", "Clip", "", {"x"}, {"y"},
                           {Attribute::Float("min", 0.0f), Attribute::Float("max", 6.0f)}, ""});
  auto converted = ConvertOpset(m, 13);
  ASSERT_TRUE(converted.ok()) << converted.status().ToString();
  EXPECT_EQ(converted->opset(), 13);
  EXPECT_EQ(m.opset(), 9);  // the input is left alone
  EXPECT_TRUE(CheckModel(*converted).ok());
  const Node* clip = nullptr;
  for (const Node& n : converted->graph.nodes)
    if (n.op_type == "Clip") clip = &n;
  ASSERT_NE(clip, nullptr);
  EXPECT_EQ(clip->inputs.size(), 3u);
  EXPECT_EQ(clip->attr("min"), nullptr);
  auto exec = Executor::Create(*converted, ExecutorOptions{1});
  ASSERT_TRUE(exec.ok()) << exec.status().ToString();
  TensorMap out;
  ASSERT_TRUE((*exec)->Run({{"x", Tensor::FromVector<float>({2, 3}, {-1, 0, 2, 5.5f, 6, 9})}}, &out).ok());
  const float* y = out.at("y").data<float>();
  const std::vector<float> want = {0, 0, 2, 5.5f, 6, 6};
  for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ(y[i], want[i]) << i;
}

// Regression (issue 15, the PP-OCRv4 recognizer): Softmax's 12 -> 13 adapter
// needs its input's shape to keep the coerce-to-2-D semantics; a Softmax
// after a Reshape to a computed shape made the conversion fail and the INT8
// weights fall back to per tensor. Softmax-12 at axis 1 of a [1, 2, 3] value
// normalizes over all 6 values.
TEST(OnnxIo, ConvertOpsetKeepsSoftmaxSemanticsOfUnknownRank) {
  Model m;
  m.ir_version = 7;
  m.opset_imports = {{"", 12}};
  m.graph.name = "softmax12";
  m.graph.inputs.push_back(testing::FloatInput("x", {{6, ""}}));
  ValueInfo shape_in = testing::FloatInput("shape", {{-1, "r"}});
  shape_in.dtype = DataType::kInt64;
  m.graph.inputs.push_back(shape_in);
  m.graph.outputs.push_back(testing::FloatInput("y", {{-1, ""}, {-1, ""}, {-1, ""}}));
  m.graph.nodes.push_back({"reshape", "Reshape", "", {"x", "shape"}, {"r"}, {}, ""});
  m.graph.nodes.push_back({"softmax", "Softmax", "", {"r"}, {"y"}, {Attribute::Int("axis", 1)}, ""});
  auto converted = ConvertOpset(m, 13);
  ASSERT_TRUE(converted.ok()) << converted.status().ToString();
  EXPECT_EQ(converted->opset(), 13);
  const Status check = CheckModel(*converted);
  EXPECT_TRUE(check.ok()) << check.ToString();
  auto exec = Executor::Create(*converted, ExecutorOptions{1});
  ASSERT_TRUE(exec.ok()) << exec.status().ToString();
  TensorMap out;
  ASSERT_TRUE((*exec)
                  ->Run({{"x", Tensor::FromVector<float>({6}, {0, 1, 2, 0, 1, 2})},
                         {"shape", Tensor::FromVector<int64_t>({3}, {1, 2, 3})}},
                        &out)
                  .ok());
  const Tensor& y = out.at("y");
  ASSERT_EQ(y.shape(), (std::vector<int64_t>{1, 2, 3}));
  const float e = std::exp(1.0f), e2 = std::exp(2.0f), sum = 2 * (1 + e + e2);
  const std::vector<float> want = {1 / sum, e / sum, e2 / sum, 1 / sum, e / sum, e2 / sum};
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(y.data<float>()[i], want[i], 1e-6) << i;
}

TEST(OnnxIo, ConvertOpsetSameVersionIsACopy) {
  Model m = SmallMlp();
  auto same = ConvertOpset(m, 17);
  ASSERT_TRUE(same.ok());
  ExpectSameGraph(m, *same);
}

}  // namespace
}  // namespace sparq
