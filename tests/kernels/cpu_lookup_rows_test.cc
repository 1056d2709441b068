// sparq.OneHotLookup on its fast row (kernels/cpu/tensor_copy.cc, kernel
// lookup_rows) through the executor: the reference kernel's bytes for int32
// and int64 values, classes 0..V-1 and in any order, values outside the
// classes (the table's last row), with and without jax2tf's shape input,
// float32, uint8 and int64 tables, rows split among 1, 2 and 3 threads; a
// broadcast that the row does not take and bad nodes give the reference's
// bytes and errors.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "kernels/registry.h"  // kSparqDomain
#include "sparq/executor.h"
#include "kernels/single_node_run.h"
#include "test_util.h"

namespace sparq {
namespace {

using testing::DistinctBytes;

struct LookupCase {
  Shape a_shape;            // [..., 1]
  std::vector<int64_t> classes;
  DataType value_type = DataType::kInt32;
  std::vector<int64_t> shape;  // the shape input; empty: none
  int64_t depth = 9;           // D
  DataType table_type = DataType::kFloat32;
};

Tensor Ints(DataType type, const Shape& shape, const std::vector<int64_t>& v) {
  if (type == DataType::kInt64) return Tensor::FromVector<int64_t>(shape, std::vector<int64_t>(v));
  std::vector<int32_t> w(v.begin(), v.end());
  return Tensor::FromVector<int32_t>(shape, w);
}

Model LookupModel(const LookupCase& c) {
  Model m;
  m.opset_imports = {{"", 13}, {kSparqDomain, 1}};
  m.graph.inputs.push_back(testing::FloatInput("a", {}));
  m.graph.inputs.back().has_shape = false;
  m.graph.inputs.back().dtype = c.value_type;
  m.graph.outputs.push_back(testing::FloatInput("y", {}));
  m.graph.outputs.back().dtype = c.table_type;
  const int64_t V = static_cast<int64_t>(c.classes.size());
  m.graph.initializers["classes"] = Ints(c.value_type, {1, 1, V}, c.classes);
  m.graph.initializers["table"] = DistinctBytes(c.table_type, {V + 1, c.depth}, 5);
  std::vector<std::string> inputs = {"a", "classes", "table"};
  if (!c.shape.empty()) {
    m.graph.initializers["shape"] =
        Tensor::FromVector<int64_t>({static_cast<int64_t>(c.shape.size())}, std::vector<int64_t>(c.shape));
    inputs.push_back("shape");
  }
  Node node{"lookup", "OneHotLookup", kSparqDomain, inputs, {"y"}, {}, ""};
  m.graph.nodes.push_back(node);
  return m;
}

// Values cycling over the classes and a few outside them.
Tensor Values(const LookupCase& c) {
  std::vector<int64_t> v(static_cast<size_t>(NumElements(c.a_shape)));
  for (size_t i = 0; i < v.size(); ++i) {
    v[i] = i % 5 == 4 ? -1000 + static_cast<int64_t>(i) : c.classes[(i * 7) % c.classes.size()];
  }
  return Ints(c.value_type, c.a_shape, v);
}

testing::NodeRun RunLookup(const Model& m, const Tensor& a, bool reference, int threads) {
  return testing::RunSingleNode(m, "a", a, reference, threads, Float16Execution::kDefault);
}

void ExpectReferenceBytes(const LookupCase& c) {
  SCOPED_TRACE("a " + ShapeToString(c.a_shape) + " " + DataTypeName(c.value_type) + ", table " +
               DataTypeName(c.table_type) + ", shape input " + ShapeToString(c.shape));
  const Model m = LookupModel(c);
  const Tensor a = Values(c);
  const testing::NodeRun want = RunLookup(m, a, true, 1);
  ASSERT_TRUE(want.status.ok()) << want.status.ToString();
  for (int threads : {1, 2, 3}) {
    testing::ExpectSameRun(RunLookup(m, a, false, threads), want, "lookup_rows");
  }
}

TEST(CpuLookupRows, IsTheReferencesBytes) {
  std::vector<int64_t> iota(257);
  for (int64_t v = 0; v < 257; ++v) iota[v] = v;
  const std::vector<int64_t> shuffled = {40, -3, 7, 1000, 2, -50, 11};
  const std::vector<LookupCase> cases = {
      {{1, 2048, 1}, iota, DataType::kInt32, {1, 2048, 257}, 128},  // magika's bytes, jax2tf's Expand
      {{1, 2048, 1}, iota, DataType::kInt32, {}, 128},
      {{3, 5, 1}, shuffled, DataType::kInt64, {}, 9, DataType::kUInt8},
      {{3, 5, 1}, shuffled, DataType::kInt32, {1, 1, 7}, 4, DataType::kInt64},
      {{4, 1}, {5}, DataType::kInt64, {}, 3},  // one class
      {{2, 3, 1}, shuffled, DataType::kInt32, {}, 0},  // D = 0
      {{2, 3, 1}, shuffled, DataType::kInt32, {2, 3, 1}, 6},  // a shape that keeps the last 1: broadcast by classes
      // The reference's path: the shape input broadcasts a's rows.
      {{1, 3, 1}, shuffled, DataType::kInt32, {4, 3, 7}, 6},
  };
  for (const LookupCase& c : cases) ExpectReferenceBytes(c);
}

TEST(CpuLookupRows, BadNodesGiveTheReferencesErrors) {
  const std::vector<LookupCase> bad = {
      {{2, 3, 1}, {4, 1, 4}},           // classes repeat a value
      {{2, 3, 2}, {0, 1, 2}},           // a's last dimension is not 1
      {{2, 3, 1}, {0, 1, 2}, DataType::kInt32, {2, 5, 3}},  // a shape that does not broadcast
  };
  for (const LookupCase& c : bad) {
    SCOPED_TRACE("a " + ShapeToString(c.a_shape));
    const Model m = LookupModel(c);
    std::vector<int64_t> v(static_cast<size_t>(NumElements(c.a_shape)), 1);
    const Tensor a = Ints(c.value_type, c.a_shape, v);
    testing::ExpectSameError(RunLookup(m, a, false, 1), RunLookup(m, a, true, 1));
  }
}

}  // namespace
}  // namespace sparq
