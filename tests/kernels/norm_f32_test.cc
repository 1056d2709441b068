// Float32 BatchNormalization (inference), LayerNormalization and strided
// ConvTranspose (kernels/cpu/norm_f32.h) through the executor on every ISA this CPU has:
// the reference kernels' bits (kernels/ref/norm.cc), for 1 and 3 threads,
// each node naming its dispatch-table row; the paths the rows do not take
// (statistics outputs, training mode) run the reference kernel. The rows
// themselves: cpu_row_kernels_test.cc.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/cpu/dispatch.h"
#include "kernels/single_node_run.h"
#include "sparq/executor.h"
#include "test_util.h"
#include "tests/kernels/isa_sweep.h"

namespace sparq {
namespace {

class NormF32Test : public testing::IsaSweepTest {};

TEST_P(NormF32Test, BatchNormalizationIsExact) {
  for (int opset : {9, 15}) {
    for (Shape shape : {Shape{1, 16, 20, 24}, Shape{2, 3, 7}, Shape{3, 5}}) {
      SCOPED_TRACE("opset " + std::to_string(opset) + " " + ShapeToString(shape));
      const int64_t c = shape[1];
      Model m;
      m.opset_imports = {{"", opset}};
      m.graph.inputs.push_back(testing::FloatInput("x", {}));
      m.graph.inputs.back().has_shape = false;
      m.graph.outputs.push_back(testing::FloatInput("y", {}));
      m.graph.initializers["scale"] = testing::RandomFloats({c}, 1, 0.5f, 2.0f);
      m.graph.initializers["b"] = testing::RandomFloats({c}, 2);
      m.graph.initializers["mean"] = testing::RandomFloats({c}, 3);
      m.graph.initializers["var"] = testing::RandomFloats({c}, 4, 0.1f, 3.0f);
      m.graph.nodes.push_back({"bn", "BatchNormalization", "", {"x", "scale", "b", "mean", "var"}, {"y"},
                               {Attribute::Float("epsilon", 1e-3f)}, ""});
      Tensor x = testing::RandomFloats(shape, 5, -4.0f, 4.0f);
      x.data<float>()[0] = std::numeric_limits<float>::quiet_NaN();
      x.data<float>()[1] = -0.0f;
      testing::ExpectSameBitsAsReference(m, {{"x", x}}, SelectCpuKernel(CpuOp::kScaleShiftF32).name);
    }
  }
}

TEST_P(NormF32Test, LayerNormalizationIsExact) {
  struct Case {
    Shape x, scale;
    int64_t axis;
    bool bias;
  };
  const Case cases[] = {{{2, 64, 384}, {384}, -1, true},  {{3, 7, 5}, {7, 5}, 1, true}, {{5, 9}, {9}, -1, false},
                        {{1, 3, 1}, {1}, 2, true},        {{2, 4, 33}, {1, 33}, 1, true}};  // the last: broadcast Scale, the reference
  for (const Case& c : cases) {
    SCOPED_TRACE(ShapeToString(c.x) + " axis " + std::to_string(c.axis));
    Model m;
    m.opset_imports = {{"", 17}};
    m.graph.inputs.push_back(testing::FloatInput("x", {}));
    m.graph.inputs.back().has_shape = false;
    m.graph.outputs.push_back(testing::FloatInput("y", {}));
    m.graph.initializers["scale"] = testing::RandomFloats(c.scale, 1);
    m.graph.initializers["b"] = testing::RandomFloats(c.scale, 2);
    std::vector<std::string> in = {"x", "scale"};
    if (c.bias) in.push_back("b");
    m.graph.nodes.push_back(
        {"ln", "LayerNormalization", "", in, {"y"}, {Attribute::Int("axis", c.axis), Attribute::Float("epsilon", 1e-5f)}, ""});
    Tensor x = testing::RandomFloats(c.x, 6, -3.0f, 5.0f);
    x.data<float>()[0] = 1e6f;
    testing::ExpectSameBitsAsReference(m, {{"x", x}}, SelectCpuKernel(CpuOp::kLayerNormF32).name);
    // With the Mean and InvStdDev outputs: the reference kernel, the same bits.
    m.graph.nodes[0].outputs = {"y", "mean", "inv"};
    m.graph.outputs.push_back(testing::FloatInput("mean", {}));
    m.graph.outputs.push_back(testing::FloatInput("inv", {}));
    testing::ExpectSameBitsAsReference(m, {{"x", x}}, nullptr);
  }
}

// ConvTranspose of float32 with stride = kernel, or of one input channel per
// group (conv_transpose_f32): the reference's bits, with groups, without
// bias, batch 2, overlapping windows, pads, dilations and output padding of
// depthwise ones; overlapping windows, pads and output padding with several
// input channels per group run the reference kernel.
TEST_P(NormF32Test, StridedConvTransposeIsExact) {
  struct Case {
    Shape x, w;
    std::vector<Attribute> attrs;
    bool bias;
  };
  const Case cases[] = {
      {{1, 24, 40, 40}, {24, 24, 2, 2}, {Attribute::Ints("strides", {2, 2})}, true},
      {{2, 6, 9, 7}, {6, 2, 3, 3}, {Attribute::Ints("strides", {3, 3}), Attribute::Int("group", 2)}, false},
      // one input channel per group: DeepFilterNet3's ERB decoder's 1 x 3 at stride 1 x 2, and others
      {{1, 64, 10, 8},
       {64, 1, 1, 3},
       {Attribute::Ints("strides", {1, 2}), Attribute::Int("group", 64), Attribute::Ints("pads", {0, 1, 0, 1}),
        Attribute::Ints("output_padding", {0, 1})},
       true},
      {{2, 6, 5, 7},
       {6, 2, 3, 3},
       {Attribute::Ints("strides", {2, 2}), Attribute::Int("group", 6), Attribute::Ints("pads", {1, 0, 1, 2}),
        Attribute::Ints("dilations", {1, 2})},
       false},
      // the reference kernel: overlapping windows, pads, output padding
      {{1, 4, 6, 6}, {4, 3, 3, 3}, {Attribute::Ints("strides", {2, 2})}, true},
      {{1, 4, 6, 6}, {4, 3, 2, 2}, {Attribute::Ints("strides", {2, 2}), Attribute::Ints("pads", {1, 1, 0, 0})}, true},
      {{1, 4, 6, 6}, {4, 3, 2, 2}, {Attribute::Ints("strides", {2, 2}), Attribute::Ints("output_padding", {1, 1})}, true},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(ShapeToString(c.x) + " w " + ShapeToString(c.w));
    Model m;
    m.opset_imports = {{"", 13}};
    m.graph.inputs.push_back(testing::FloatInput("x", {}));
    m.graph.inputs.back().has_shape = false;
    m.graph.outputs.push_back(testing::FloatInput("y", {}));
    m.graph.initializers["w"] = testing::RandomFloats(c.w, 1);
    const int64_t groups = c.attrs.size() > 1 && c.attrs[1].name == "group" ? c.attrs[1].i : 1;
    m.graph.initializers["b"] = testing::RandomFloats({c.w[1] * groups}, 2);
    std::vector<std::string> in = {"x", "w"};
    if (c.bias) in.push_back("b");
    m.graph.nodes.push_back({"ct", "ConvTranspose", "", in, {"y"}, c.attrs, ""});
    testing::ExpectSameBitsAsReference(m, {{"x", testing::RandomFloats(c.x, 3)}}, SelectCpuKernel(CpuOp::kConvTransposeF32).name);
  }
}

// Resize, nearest / asymmetric / floor by whole factors (resize_nearest):
// the reference's bytes for float32 and uint8, 1 and 3 threads; half-pixel
// coordinates, fractional scales and other modes run the reference kernel.
TEST_P(NormF32Test, NearestResizeByWholeFactorsIsExact) {
  struct Case {
    std::vector<float> scales;
    std::string coord, nearest, mode;
  };
  const Case cases[] = {{{1, 1, 2, 2}, "asymmetric", "floor", "nearest"},
                        {{1, 1, 3, 1}, "asymmetric", "floor", "nearest"},
                        {{1, 1, 2, 2}, "half_pixel", "round_prefer_floor", "nearest"},
                        {{1, 1, 1.5f, 2}, "asymmetric", "floor", "nearest"},
                        {{1, 1, 2, 2}, "asymmetric", "floor", "linear"}};
  for (DataType type : {DataType::kFloat32, DataType::kUInt8}) {
    for (const Case& c : cases) {
      SCOPED_TRACE(DataTypeName(type) + " " + c.coord + " " + c.mode + " scale_h " + std::to_string(c.scales[2]));
      if (type == DataType::kUInt8 && c.mode == "linear") continue;
      Model m;
      m.opset_imports = {{"", 13}};
      ValueInfo in = testing::FloatInput("x", {});
      in.dtype = type;
      in.has_shape = false;
      m.graph.inputs.push_back(in);
      m.graph.outputs.push_back(testing::FloatInput("y", {}));
      m.graph.initializers["roi"] = Tensor(DataType::kFloat32, {0});
      m.graph.initializers["scales"] = Tensor::FromVector<float>({4}, c.scales);
      m.graph.nodes.push_back({"r", "Resize", "", {"x", "roi", "scales"}, {"y"},
                               {Attribute::String("mode", c.mode), Attribute::String("coordinate_transformation_mode", c.coord),
                                Attribute::String("nearest_mode", c.nearest)},
                               ""});
      Tensor x = testing::RandomFloats({2, 3, 5, 7}, 9, -5.0f, 5.0f);
      if (type == DataType::kUInt8) {
        Tensor b(DataType::kUInt8, x.shape());
        for (int64_t i = 0; i < b.numel(); ++i) b.data<uint8_t>()[i] = static_cast<uint8_t>(i * 37 % 251);
        x = b;
      }
      testing::ExpectSameBitsAsReference(m, {{"x", x}}, SelectCpuKernel(CpuOp::kResizeNearest).name);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(CpuKernels, NormF32Test, ::testing::ValuesIn(kAllCpuIsas), testing::IsaParamName);

}  // namespace
}  // namespace sparq
