// Pad on its fast row (kernels/cpu/pad.cc, kernel pad_copy) through the
// executor: the reference kernel's bytes for 1-, 2-, 4- and 8-byte elements,
// modes constant (with and without a constant input), edge and reflect, pads
// on the last dimension (Silero VAD's and basic-pitch's 1-D signals), on
// outer ones and on both, trailing unpadded dimensions merged, empty
// dimensions; nodes outside the fast path (crops, wrap, reflect as wide as
// the dimension, opset 18's axes) and bad nodes run the reference kernel and
// give its bytes and errors; the same bytes for 1 and 2 threads.
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

struct PadCase {
  Shape shape;
  std::vector<int64_t> pads;
  std::string mode;  // "" = no attribute (constant)
  bool value = false;  // a constant_value input
  int opset = 13;
  std::vector<int64_t> axes;  // opset 18's axes input
};

Model PadModel(const PadCase& c, DataType type) {
  Model m;
  m.opset_imports = {{"", c.opset}};
  m.graph.inputs.push_back(testing::FloatInput("x", {}));
  m.graph.inputs.back().has_shape = false;
  m.graph.inputs.back().dtype = type;
  m.graph.outputs.push_back(testing::FloatInput("y", {}));
  m.graph.outputs.back().dtype = type;
  m.graph.initializers["pads"] = Tensor::FromVector<int64_t>({static_cast<int64_t>(c.pads.size())}, c.pads);
  std::vector<std::string> inputs = {"x", "pads"};
  if (c.value || !c.axes.empty()) {
    inputs.push_back(c.value ? "value" : "");
    if (c.value) m.graph.initializers["value"] = DistinctBytes(type, {}, 9);
  }
  if (!c.axes.empty()) {
    inputs.push_back("axes");
    m.graph.initializers["axes"] = Tensor::FromVector<int64_t>({static_cast<int64_t>(c.axes.size())}, c.axes);
  }
  std::vector<Attribute> attrs;
  if (!c.mode.empty()) attrs.push_back(Attribute::String("mode", c.mode));
  m.graph.nodes.push_back({"pad", "Pad", "", inputs, {"y"}, attrs, ""});
  return m;
}

testing::NodeRun RunPad(const Model& m, const Tensor& x, bool reference, int threads) {
  return testing::RunSingleNode(m, "x", x, reference, threads);
}

// The fast row's bytes (1 and 2 threads) against the reference's.
void ExpectReferenceBytes(const PadCase& c, DataType type) {
  SCOPED_TRACE(std::string(DataTypeName(type)) + " shape " + ShapeToString(c.shape) + " mode '" + c.mode + "'");
  const Model m = PadModel(c, type);
  const Tensor x = DistinctBytes(type, c.shape, 1);
  const testing::NodeRun want = RunPad(m, x, true, 1);
  for (int threads : {1, 2}) {
    testing::ExpectSameRun(RunPad(m, x, false, threads), want, "pad_copy");
  }
}

TEST(CpuPad, IsTheReferencesBytes) {
  const std::vector<PadCase> cases = {
      {{1, 576}, {0, 64, 0, 64}, "reflect"},                 // Silero VAD's STFT padding
      {{2, 1, 300}, {0, 0, 128, 0, 0, 128}, "reflect"},      // basic-pitch's CQT padding
      {{2, 1, 300}, {0, 0, 127, 0, 0, 127}, ""},
      {{1, 7, 9, 1}, {0, 0, 5, 0, 0, 0, 0, 0}, ""},          // harmonic stacking: a padded outer dimension
      {{2, 3, 5, 7}, {1, 0, 2, 3, 0, 2, 1, 4}, "constant", true},
      {{2, 3, 5, 7}, {1, 0, 2, 3, 0, 2, 1, 4}, "edge"},
      {{2, 3, 5, 7}, {1, 2, 4, 6, 1, 2, 3, 5}, "reflect"},
      {{2, 5, 3, 4}, {0, 2, 0, 0, 0, 1, 0, 0}, "reflect"},   // trailing dimensions merged
      {{2, 5, 3, 4}, {0, 2, 0, 0, 0, 1, 0, 0}, "edge"},
      {{2, 5, 3, 4}, {0, 0, 0, 0, 0, 0, 0, 0}, ""},          // no padding at all
      {{3, 0, 4}, {1, 2, 0, 0, 1, 3}, "", true},             // an empty dimension, constant
      {{400, 37}, {3, 2, 1, 5}, "reflect"},                  // rows split among the threads
      {{6}, {2, 3}, "edge"},
      // The reference's paths: crops, wrap, reflect pads as wide as the
      // dimension, opset 18's axes, edge of an empty dimension (an error).
      {{2, 3, 5, 7}, {0, -1, 2, 0, 0, 1, -2, 1}, ""},
      {{2, 3, 5, 7}, {0, 1, 2, 0, 0, 1, 2, 1}, "wrap"},
      {{2, 3, 4}, {0, 0, 4, 0, 0, 5}, "reflect"},
      {{2, 3, 5, 7}, {2, 1, 3, 0}, "reflect", false, 18, {1, -1}},
      {{3, 0, 4}, {0, 1, 0, 0, 1, 0}, "edge"},
  };
  for (DataType type : {DataType::kFloat32, DataType::kUInt8, DataType::kFloat16, DataType::kInt64})
    for (const PadCase& c : cases) ExpectReferenceBytes(c, type);
}

TEST(CpuPad, BadNodesGiveTheReferencesErrors) {
  const std::vector<PadCase> bad = {
      {{2, 3}, {1, 1, 1}, ""},           // pads not 2 * rank
      {{2, 3}, {1, 1, 1, 1}, "mirror"},  // no such mode
      {{2, 3}, {0, -4, 0, 0}, ""},       // a crop past the dimension
  };
  for (const PadCase& c : bad) {
    const Model m = PadModel(c, DataType::kFloat32);
    const Tensor x = DistinctBytes(DataType::kFloat32, c.shape, 2);
    testing::ExpectSameError(RunPad(m, x, false, 1), RunPad(m, x, true, 1));
  }
}

}  // namespace
}  // namespace sparq
