// Slice on its fast row (kernels/cpu/tensor_copy.cc, kernel slice_copy)
// through the executor: the reference kernel's bytes for 1-, 2-, 4- and
// 8-byte elements, slices of the last dimension (basic-pitch's harmonic
// stacking and CQT crops), of outer ones, negative starts and ends, steps
// (negative too), clamped ends past the dimension, opset 1-9's attributes,
// empty results, the whole input (a view, as on the reference); bad nodes
// give the reference's errors; the same bytes for 1 and 2 threads.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "sparq/executor.h"
#include "kernels/single_node_run.h"
#include "test_util.h"

namespace sparq {
namespace {

using testing::DistinctBytes;

struct SliceCase {
  Shape shape;
  std::vector<int64_t> starts, ends;
  std::vector<int64_t> axes;   // empty: none given
  std::vector<int64_t> steps;  // empty: none given
  int opset = 13;              // below 10: attributes, no steps
};

Model SliceModel(const SliceCase& c, DataType type) {
  Model m;
  m.opset_imports = {{"", c.opset}};
  m.graph.inputs.push_back(testing::FloatInput("x", {}));
  m.graph.inputs.back().has_shape = false;
  m.graph.inputs.back().dtype = type;
  m.graph.outputs.push_back(testing::FloatInput("y", {}));
  m.graph.outputs.back().dtype = type;
  std::vector<std::string> inputs = {"x"};
  std::vector<Attribute> attrs;
  auto ints = [](const std::vector<int64_t>& v) {
    return Tensor::FromVector<int64_t>({static_cast<int64_t>(v.size())}, std::vector<int64_t>(v));
  };
  if (c.opset < 10) {
    attrs.push_back(Attribute::Ints("starts", c.starts));
    attrs.push_back(Attribute::Ints("ends", c.ends));
    if (!c.axes.empty()) attrs.push_back(Attribute::Ints("axes", c.axes));
  } else {
    m.graph.initializers["starts"] = ints(c.starts);
    m.graph.initializers["ends"] = ints(c.ends);
    inputs.push_back("starts");
    inputs.push_back("ends");
    if (!c.axes.empty() || !c.steps.empty()) {
      inputs.push_back(c.axes.empty() ? "" : "axes");
      if (!c.axes.empty()) m.graph.initializers["axes"] = ints(c.axes);
    }
    if (!c.steps.empty()) {
      inputs.push_back("steps");
      m.graph.initializers["steps"] = ints(c.steps);
    }
  }
  m.graph.nodes.push_back({"slice", "Slice", "", inputs, {"y"}, attrs, ""});
  return m;
}

testing::NodeRun RunSlice(const Model& m, const Tensor& x, bool reference, int threads) {
  return testing::RunSingleNode(m, "x", x, reference, threads);
}

// The fast row's bytes (1 and 2 threads) against the reference's.
void ExpectReferenceBytes(const SliceCase& c, DataType type) {
  SCOPED_TRACE(std::string(DataTypeName(type)) + " shape " + ShapeToString(c.shape) + " starts " +
               ShapeToString(c.starts) + " ends " + ShapeToString(c.ends) + " opset " + std::to_string(c.opset));
  const Model m = SliceModel(c, type);
  const Tensor x = DistinctBytes(type, c.shape, 1);
  const testing::NodeRun want = RunSlice(m, x, true, 1);
  ASSERT_TRUE(want.status.ok()) << want.status.ToString();
  for (int threads : {1, 2}) {
    testing::ExpectSameRun(RunSlice(m, x, false, threads), want, "slice_copy");
  }
}

TEST(CpuSlice, IsTheReferencesBytes) {
  const int64_t kBig = 2147483647;  // jax2tf's "to the end"
  const std::vector<SliceCase> cases = {
      {{1, 172, 324, 2}, {0, -309, 0, 0}, {kBig, kBig, kBig, kBig}, {0, 2, 1, 3}},  // basic-pitch's CQT crop
      {{1, 172, 264, 1}, {0, 0, 101, 0}, {kBig, kBig, kBig, kBig}, {0, 1, 2, 3}},   // harmonic stacking
      {{1, 172, 300, 8}, {0, 0, 0, 0}, {kBig, kBig, 264, kBig}, {0, 1, 2, 3}},
      {{1, 1, 43844}, {0, 0, 0}, {kBig, kBig, kBig}, {0, 1, 2}},                     // the whole input
      {{2, 3, 5, 7}, {1, 0, 2}, {2, 3, 5}, {0, 1, 2}},
      {{2, 3, 5, 7}, {-1}, {-8}, {3}, {-2}},                                           // a negative step
      {{2, 3, 5, 7}, {0, 4}, {3, 1}, {-1, 2}, {2, -1}},
      {{2, 3, 5, 7}, {1, 6}, {1, 9}, {1, 3}},                                          // empty
      {{400, 37}, {3, 5}, {399, 36}},                                                  // rows split among the threads
      {{9}, {2}, {7}, {}, {3}},
      {{2, 3, 5, 7}, {0, 1}, {1, 3}, {0, 2}, {}, 9},                                   // opset 9: attributes
      {{2, 3, 5, 7}, {1}, {100}, {}, {}, 1},
  };
  for (DataType type : {DataType::kFloat32, DataType::kUInt8, DataType::kFloat16, DataType::kInt64})
    for (const SliceCase& c : cases) ExpectReferenceBytes(c, type);
}

TEST(CpuSlice, BadNodesGiveTheReferencesErrors) {
  const std::vector<SliceCase> bad = {
      {{2, 3}, {0, 0}, {1}},                // ends shorter than starts
      {{2, 3}, {0}, {1}, {2}},              // an axis past the rank
      {{2, 3}, {0, 0}, {1, 1}, {1, -1}},    // an axis twice
      {{2, 3}, {0}, {1}, {1}, {0}},         // a zero step
  };
  for (const SliceCase& c : bad) {
    const Model m = SliceModel(c, DataType::kFloat32);
    const Tensor x = DistinctBytes(DataType::kFloat32, c.shape, 2);
    testing::ExpectSameError(RunSlice(m, x, false, 1), RunSlice(m, x, true, 1));
  }
}

}  // namespace
}  // namespace sparq
