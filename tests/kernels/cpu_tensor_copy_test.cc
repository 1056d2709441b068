// Concat and Split as block copies (kernels/cpu/tensor_copy.cc, kernel
// copy_blocks) through the executor: the reference kernels' bytes for float32,
// uint8 and int64 tensors on every axis (negative ones too), with empty
// parts, split sizes from the input, the attribute and num_outputs, and only
// some outputs read; the same bytes for 1 and 2 threads; bad nodes give the
// reference's errors.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "sparq/executor.h"
#include "test_util.h"

namespace sparq {
namespace {

using testing::DistinctBytes;

struct ModelRun {
  TensorMap out;
  std::vector<std::string> kernels;
  Status status;
};

ModelRun RunModel(const Model& m, const TensorMap& feed, bool reference, int threads) {
  ExecutorOptions options;
  options.backend = reference ? "reference" : "cpu";
  options.threads = threads;
  // The copy kernels move bytes of any type: float16 stays float16 here
  // (lowered to float32, random bytes that are signalling NaNs come back quieted).
  options.float16 = Float16Execution::kNative;
  ModelRun r;
  auto exec = Executor::Create(m, options);
  if (!exec.ok()) {
    r.status = exec.status();
    return r;
  }
  r.status = (*exec)->Run(feed, &r.out);
  for (const NodeKernel& k : (*exec)->NodeKernels()) r.kernels.push_back(k.op_type + ":" + k.kernel);
  return r;
}

void ExpectSameBytes(const TensorMap& got, const TensorMap& want) {
  ASSERT_EQ(got.size(), want.size());
  for (const auto& kv : want) {
    const Tensor& g = got.at(kv.first);
    ASSERT_EQ(g.dtype(), kv.second.dtype()) << kv.first;
    ASSERT_EQ(g.shape(), kv.second.shape()) << kv.first;
    ASSERT_EQ(std::memcmp(g.raw_data(), kv.second.raw_data(), g.nbytes()), 0) << kv.first;
  }
}

// Fast (1 and 2 threads) against the reference; the fast run's kernels.
std::vector<std::string> ExpectBlocksMatchReference(const Model& m, const TensorMap& feed) {
  const ModelRun want = RunModel(m, feed, true, 1);
  EXPECT_TRUE(want.status.ok()) << want.status.ToString();
  ModelRun got;
  for (int threads : {1, 2}) {
    got = RunModel(m, feed, false, threads);
    EXPECT_TRUE(got.status.ok()) << got.status.ToString();
    ExpectSameBytes(got.out, want.out);
  }
  return got.kernels;
}

Model OneNode(const std::string& op, int opset, std::vector<std::string> inputs, std::vector<std::string> outputs,
              std::vector<Attribute> attrs, DataType type = DataType::kFloat32) {
  Model m;
  m.opset_imports = {{"", opset}};
  for (const std::string& in : inputs) {
    m.graph.inputs.push_back(testing::FloatInput(in, {}));
    m.graph.inputs.back().has_shape = false;
    m.graph.inputs.back().dtype = type;
  }
  for (const std::string& out : outputs) {
    m.graph.outputs.push_back(testing::FloatInput(out, {}));
    m.graph.outputs.back().dtype = type;
  }
  m.graph.nodes.push_back({"n", op, "", std::move(inputs), std::move(outputs), std::move(attrs), ""});
  return m;
}

TEST(CpuTensorCopy, ConcatIsTheReferencesBytes) {
  for (DataType type : {DataType::kFloat32, DataType::kUInt8, DataType::kInt64}) {
    for (int64_t axis : {0, 1, 2, 3, -1}) {
      SCOPED_TRACE(std::string(DataTypeName(type)) + " axis " + std::to_string(axis));
      const int64_t a = axis < 0 ? 3 : axis;
      Shape sa = {2, 3, 5, 7}, sb = sa, sc = sa;
      sb[a] = 4, sc[a] = 0;  // an empty part
      const Model m = OneNode("Concat", 13, {"a", "b", "c"}, {"y"}, {Attribute::Int("axis", axis)}, type);
      const TensorMap feed = {{"a", DistinctBytes(type, sa, 1)}, {"b", DistinctBytes(type, sb, 2)}, {"c", DistinctBytes(type, sc, 3)}};
      EXPECT_EQ(ExpectBlocksMatchReference(m, feed), std::vector<std::string>{"Concat:copy_blocks"});
    }
  }
  // Many small blocks (basic-pitch's harmonic stacking: [1, T, F, 1] inputs
  // on the last axis), blocks of 1, 2, 3, 4, 8 and 16 bytes, an empty part:
  // the strided path, its outer indices split among the threads.
  for (DataType type : {DataType::kFloat32, DataType::kUInt8, DataType::kInt64}) {
    SCOPED_TRACE(std::string("interleaved ") + DataTypeName(type));
    const Model m = OneNode("Concat", 13, {"a", "b", "c", "d", "e"}, {"y"}, {Attribute::Int("axis", -1)}, type);
    const TensorMap feed = {{"a", DistinctBytes(type, {1, 67, 131, 1}, 1)}, {"b", DistinctBytes(type, {1, 67, 131, 2}, 2)},
                            {"c", DistinctBytes(type, {1, 67, 131, 3}, 3)}, {"d", DistinctBytes(type, {1, 67, 131, 0}, 4)},
                            {"e", DistinctBytes(type, {1, 67, 131, 4}, 5)}};
    EXPECT_EQ(ExpectBlocksMatchReference(m, feed), std::vector<std::string>{"Concat:copy_blocks"});
  }
  // A large channel concat (YOLO's C2f): one copy per input, split among the threads.
  const Model m = OneNode("Concat", 13, {"a", "b"}, {"y"}, {Attribute::Int("axis", 1)});
  ExpectBlocksMatchReference(m, {{"a", DistinctBytes(DataType::kFloat32, {1, 64, 80, 80}, 4)},
                                 {"b", DistinctBytes(DataType::kFloat32, {1, 32, 80, 80}, 5)}});
}

// Where on where_select: the reference's bytes for every element size and
// every mix of full, broadcast rows / columns and single values (an exported
// attention mask's Where(IsNaN(p), 0, p) and Where(mask, -inf, 0)).
TEST(CpuTensorCopy, WhereIsTheReferencesBytes) {
  const std::vector<std::vector<Shape>> shapes = {
      {{2, 3, 5, 17}, {2, 3, 5, 17}, {2, 3, 5, 17}}, {{2, 3, 5, 17}, {1}, {2, 3, 5, 17}},
      {{2, 3, 5, 17}, {}, {1}},                       {{2, 1, 1, 17}, {1}, {2, 3, 5, 17}},
      {{5, 1}, {1, 17}, {5, 17}},                     {{3, 5, 17}, {2, 1, 5, 17}, {17}}};
  for (DataType type : {DataType::kFloat32, DataType::kUInt8, DataType::kInt64, DataType::kFloat16}) {
    for (size_t i = 0; i < shapes.size(); ++i) {
      SCOPED_TRACE(std::string(DataTypeName(type)) + " case " + std::to_string(i));
      Model m = OneNode("Where", 16, {"c", "x", "y"}, {"out"}, {}, type);
      m.graph.inputs[0].dtype = DataType::kBool;
      Tensor c(DataType::kBool, shapes[i][0]);
      for (int64_t k = 0; k < c.numel(); ++k) c.data<bool>()[k] = (k * 7 + k / 5) % 3 == 0;
      const TensorMap feed = {{"c", c}, {"x", DistinctBytes(type, shapes[i][1], 1)}, {"y", DistinctBytes(type, shapes[i][2], 2)}};
      EXPECT_EQ(ExpectBlocksMatchReference(m, feed), std::vector<std::string>{"Where:where_select"});
    }
  }
}

TEST(CpuTensorCopy, SplitIsTheReferencesBytes) {
  struct Case {
    int opset;
    int64_t axis;
    std::vector<int64_t> split;  // empty: equal parts (or num_outputs at 18)
    int outputs;
    bool split_input;
  };
  const Case cases[] = {{13, 1, {1, 4, 0}, 3, true}, {11, 2, {2, 3}, 2, false}, {13, -1, {}, 7, false},
                        {18, 0, {}, 4, false},       {18, 3, {}, 3, false},     {13, 0, {}, 2, false}};
  for (const Case& c : cases) {
    for (DataType type : {DataType::kFloat32, DataType::kUInt8, DataType::kInt64}) {
      SCOPED_TRACE(std::string(DataTypeName(type)) + " opset " + std::to_string(c.opset) + " axis " +
                   std::to_string(c.axis));
      std::vector<std::string> outputs;
      for (int i = 0; i < c.outputs; ++i) outputs.push_back("y" + std::to_string(i));
      std::vector<Attribute> attrs = {Attribute::Int("axis", c.axis)};
      if (c.opset >= 18) attrs.push_back(Attribute::Int("num_outputs", c.outputs));
      if (!c.split.empty() && !c.split_input) attrs.push_back(Attribute::Ints("split", c.split));
      std::vector<std::string> inputs = {"x"};
      Model m = OneNode("Split", c.opset, inputs, outputs, attrs, type);
      if (c.split_input) {
        m.graph.initializers["sizes"] = Tensor::FromVector<int64_t>({static_cast<int64_t>(c.split.size())}, c.split);
        m.graph.nodes[0].inputs.push_back("sizes");
      }
      if (c.outputs > 2) m.graph.outputs.erase(m.graph.outputs.begin());  // y0 unread
      const TensorMap feed = {{"x", DistinctBytes(type, {6, 5, 5, 7}, 6)}};
      EXPECT_EQ(ExpectBlocksMatchReference(m, feed), std::vector<std::string>{"Split:copy_blocks"});
    }
  }
}

TEST(CpuTensorCopy, BadNodesGiveTheReferencesErrors) {
  const Model concat = OneNode("Concat", 13, {"a", "b"}, {"y"}, {Attribute::Int("axis", 1)});
  const TensorMap mismatch = {{"a", DistinctBytes(DataType::kFloat32, {2, 3}, 1)}, {"b", DistinctBytes(DataType::kFloat32, {3, 3}, 2)}};
  const ModelRun fast = RunModel(concat, mismatch, false, 1), ref = RunModel(concat, mismatch, true, 1);
  EXPECT_FALSE(fast.status.ok());
  EXPECT_EQ(fast.status.ToString(), ref.status.ToString());
  const Model split = OneNode("Split", 13, {"x"}, {"y0", "y1"}, {Attribute::Int("axis", 0)});
  const TensorMap odd = {{"x", DistinctBytes(DataType::kFloat32, {5, 2}, 3)}};
  const ModelRun fast_split = RunModel(split, odd, false, 1), ref_split = RunModel(split, odd, true, 1);
  EXPECT_FALSE(fast_split.status.ok());
  EXPECT_EQ(fast_split.status.ToString(), ref_split.status.ToString());
}

// Transpose (kernel transpose_blocks): the reference's bytes for 1-, 2-, 4-
// and 8-byte elements under permutations that end in a 2-D transpose (tiled
// when the output rows have 128 values or more: [1, 130, 3, 17] by
// {0, 2, 3, 1}, with partial tiles; strided below) and others (strided copy),
// the default reversed order and unit dimensions, for 1 and 2 threads; a bad
// perm gives the reference's error.
TEST(CpuTranspose, IsTheReferencesBytes) {
  const std::vector<std::vector<int64_t>> perms = {{0, 2, 3, 1}, {0, 2, 1, 3}, {3, 2, 1, 0}, {1, 0, 2, 3},
                                                   {0, 1, 3, 2}, {}};
  for (DataType type : {DataType::kFloat32, DataType::kUInt8, DataType::kFloat16, DataType::kInt64}) {
    for (const Shape& shape : {Shape{2, 19, 12, 9}, Shape{1, 64, 1, 32}, Shape{1, 130, 3, 17}}) {
      for (const std::vector<int64_t>& perm : perms) {
        SCOPED_TRACE(std::string(DataTypeName(type)) + " " + ShapeToString(shape) + " perm " +
                     std::to_string(perm.size()));
        std::vector<Attribute> attrs;
        if (!perm.empty()) attrs.push_back(Attribute::Ints("perm", perm));
        const Model m = OneNode("Transpose", 13, {"x"}, {"y"}, attrs, type);
        EXPECT_EQ(ExpectBlocksMatchReference(m, {{"x", DistinctBytes(type, shape, 3)}}),
                  std::vector<std::string>{"Transpose:transpose_blocks"});
      }
    }
  }
  const Model bad = OneNode("Transpose", 13, {"x"}, {"y"}, {Attribute::Ints("perm", {0, 0, 1})});
  const TensorMap feed = {{"x", DistinctBytes(DataType::kFloat32, {2, 3, 4}, 1)}};
  EXPECT_EQ(RunModel(bad, feed, false, 1).status.ToString(), RunModel(bad, feed, true, 1).status.ToString());
}

// Cast to float32 (kernel cast_to_f32) from every integer type and bool:
// the reference's bits (int64 / uint64 beyond 2^24 rounded through double as
// there), for 1 and 2 threads over several chunks; other casts run the
// reference kernel (the same bits).
TEST(CpuCast, ToFloatMatchesReference) {
  for (DataType type : {DataType::kInt8, DataType::kUInt8, DataType::kInt16, DataType::kUInt16, DataType::kInt32,
                        DataType::kUInt32, DataType::kInt64, DataType::kUInt64, DataType::kBool}) {
    SCOPED_TRACE(DataTypeName(type));
    Tensor x = DistinctBytes(type, {3, 20001}, 5);
    if (type == DataType::kBool) {
      auto* p = static_cast<uint8_t*>(x.raw_data());
      for (size_t i = 0; i < x.nbytes(); ++i) p[i] = p[i] & 1;
    }
    const Model m = OneNode("Cast", 13, {"x"}, {"y"}, {Attribute::Int("to", 1)}, type);
    EXPECT_EQ(ExpectBlocksMatchReference(m, {{"x", x}}), std::vector<std::string>{"Cast:cast_to_f32"});
  }
  const Model to_int = OneNode("Cast", 13, {"x"}, {"y"}, {Attribute::Int("to", 6)});
  ExpectBlocksMatchReference(to_int, {{"x", testing::RandomFloats({100}, 3, -1e4f, 1e4f)}});
}

}  // namespace
}  // namespace sparq
