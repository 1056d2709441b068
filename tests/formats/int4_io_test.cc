// 4-bit tensors in ONNX files: one element per byte in memory, two per byte
// in files (low nibble first), in raw_data, int32_data and external data; and
// files written by python onnx (helper.make_tensor, numpy_helper) load with
// the right values.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "sparq/file_io.h"
#include "sparq/onnx_io.h"
#include "test_util.h"

namespace sparq {
namespace {

namespace fs = std::filesystem;

Tensor Int4Tensor(DataType type, Shape shape, std::vector<int8_t> values) {
  Tensor t(type, std::move(shape));
  std::memcpy(t.raw_data(), values.data(), values.size());
  return t;
}

// DequantizeLinear(w int4 [3, 5] odd count, scale) and DequantizeLinear(u uint4 [7], scale, zp).
Model Int4Model() {
  Model m;
  m.ir_version = 10;
  m.opset_imports = {{"", 21}};
  Graph& g = m.graph;
  g.name = "int4";
  g.outputs.push_back(testing::FloatInput("y", {{3, ""}, {5, ""}}));
  g.outputs.push_back(testing::FloatInput("z", {{7, ""}}));
  g.initializers["w"] = Int4Tensor(DataType::kInt4, {3, 5}, {-8, -7, -1, 0, 1, 2, 3, 7, 6, 5, -2, -3, 4, -8, 7});
  g.initializers["u"] = Int4Tensor(DataType::kUInt4, {7}, {0, 15, 1, 14, 8, 7, 9});
  g.initializers["zp"] = Int4Tensor(DataType::kUInt4, {}, {8});
  g.initializers["s"] = Tensor::Scalar<float>(0.5f);
  g.nodes.push_back({"dq_w", "DequantizeLinear", "", {"w", "s"}, {"y"}, {}, ""});
  g.nodes.push_back({"dq_u", "DequantizeLinear", "", {"u", "s", "zp"}, {"z"}, {}, ""});
  return m;
}

void ExpectSameInitializers(const Model& a, const Model& b) {
  for (const auto& [name, t] : a.graph.initializers) {
    auto it = b.graph.initializers.find(name);
    ASSERT_NE(it, b.graph.initializers.end()) << name;
    EXPECT_EQ(it->second.dtype(), t.dtype()) << name;
    EXPECT_TRUE(it->second.Equals(t)) << name;
  }
}

TEST(Int4Io, TypeTableHasFourBitTypes) {
  EXPECT_EQ(static_cast<int>(DataType::kUInt4), 21);
  EXPECT_EQ(static_cast<int>(DataType::kInt4), 22);
  EXPECT_EQ(DataTypeName(DataType::kInt4), "int4");
  EXPECT_EQ(DataTypeSize(DataType::kUInt4), 1u);  // one element per byte in memory
  EXPECT_EQ(*DataTypeFromOnnx(22), DataType::kInt4);
  Tensor t = Int4Tensor(DataType::kInt4, {2}, {-8, 7});
  EXPECT_EQ(t.GetAsDouble(0), -8.0);
  Tensor f = Tensor::FromVector<float>({4}, {-9.5f, 3.7f, 7.9f, 20.0f});
  Tensor q = f.CastTo(DataType::kInt4);  // truncate, saturate
  EXPECT_EQ(q.GetAsDouble(0), -8.0);
  EXPECT_EQ(q.GetAsDouble(1), 3.0);
  EXPECT_EQ(q.GetAsDouble(3), 7.0);
}

TEST(Int4Io, RawAndExternalDataRoundTrip) {
  testing::TempDir dir;
  const Model m = Int4Model();
  ASSERT_TRUE(SaveModel(m, dir.path("raw.onnx")).ok());
  auto loaded = LoadModel(dir.path("raw.onnx"));
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  ExpectSameInitializers(m, *loaded);
  // sparq's C++ onnx.checker (Debian's libonnx: IR 8, opset 17) refuses IR 10
  // files; test_int4_vs_onnxruntime.py checks them with python's onnx.checker.

  SaveOptions opt;
  opt.external_data = true;
  opt.external_data_threshold = 0;
  ASSERT_TRUE(SaveModel(m, dir.path("ext.onnx"), opt).ok());
  auto ext = LoadModel(dir.path("ext.onnx"));
  ASSERT_TRUE(ext.ok()) << ext.status().ToString();
  ExpectSameInitializers(m, *ext);
  // The packed bytes: 15 int4 values take 8 bytes; the file's last tensor ends at its length.
  EXPECT_LT(fs::file_size(dir.path("ext.onnx.data")), 4u * 64u + 8u);
}

TEST(Int4Io, TensorProtoRoundTripAndUnpackedRawDataIsCorruption) {
  const Tensor t = Int4Tensor(DataType::kInt4, {5}, {1, -2, 3, -4, 5});
  auto back = ParseTensorProto(SerializeTensorProto("w", t));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_TRUE(back->second.Equals(t));
  // An int8 [5] proto relabelled int4: 5 bytes of raw_data where 5 int4 values need 3.
  std::string proto = SerializeTensorProto("w", Tensor::FromVector<int8_t>({5}, {1, 2, 3, 4, 5}));
  const size_t at = proto.find(std::string("\x10\x03", 2));
  ASSERT_NE(at, std::string::npos);
  proto[at + 1] = 22;
  auto bad = ParseTensorProto(proto);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kCorruption) << bad.status().ToString();
  EXPECT_NE(bad.status().message().find("tensor 'w'"), std::string::npos) << bad.status().ToString();
}

bool HavePythonOnnx() { return std::system("python3 -c 'import onnx, ml_dtypes' >/dev/null 2>&1") == 0; }

// A model written by python onnx in the three forms (int32_data from
// helper.make_tensor, packed raw_data from numpy_helper.from_array, external
// data) loads with the values python gave; a model sparq writes reads back in
// python with the same values.
TEST(Int4Io, FilesWrittenByPythonOnnxLoad) {
  if (!HavePythonOnnx()) GTEST_SKIP() << "python3 with onnx and ml_dtypes is not available";
  testing::TempDir dir;
  const std::string script = dir.path("make.py");
  ASSERT_TRUE(WriteFileAtomically(script, R"(
import sys, numpy as np, onnx, ml_dtypes
from onnx import helper, numpy_helper, TensorProto
d = sys.argv[1]
vals = [-8, 7, -1, 0, 3, -5, 6]
uvals = [0, 15, 1, 14, 8]
inits = [
    helper.make_tensor('a', TensorProto.INT4, [7], vals),                            # int32_data
    numpy_helper.from_array(np.array(vals, dtype=ml_dtypes.int4).reshape(7), 'b'),  # raw_data
    helper.make_tensor('c', TensorProto.UINT4, [5], uvals),
    numpy_helper.from_array(np.array(uvals, dtype=ml_dtypes.uint4), 'e'),
]
outs = []
nodes = []
for t in inits:
    nodes.append(helper.make_node('Identity', [t.name], [t.name + '_y']))
    outs.append(helper.make_tensor_value_info(t.name + '_y', t.data_type, list(t.dims)))
g = helper.make_graph(nodes, 'g', [], outs, initializer=inits)
m = helper.make_model(g, opset_imports=[helper.make_opsetid('', 21)])
m.ir_version = 10
onnx.checker.check_model(m)
onnx.save_model(m, d + '/py.onnx')
onnx.save_model(m, d + '/py_ext.onnx', save_as_external_data=True, all_tensors_to_one_file=True,
                location='py_ext.onnx.data', size_threshold=0)
if len(sys.argv) > 2:  # check a model sparq wrote
    m2 = onnx.load(sys.argv[2])
    for t in m2.graph.initializer:
        got = numpy_helper.to_array(t).astype(np.int32).reshape(-1).tolist()
        want = vals if t.name in ('a', 'b') else uvals
        assert got == want, (t.name, got, want)
)").ok());
  ASSERT_EQ(std::system(("python3 " + script + " " + dir.root()).c_str()), 0);
  const std::vector<int8_t> vals = {-8, 7, -1, 0, 3, -5, 6};
  const std::vector<int8_t> uvals = {0, 15, 1, 14, 8};
  for (const char* file : {"py.onnx", "py_ext.onnx"}) {
    auto m = LoadModel(dir.path(file));
    ASSERT_TRUE(m.ok()) << file << ": " << m.status().ToString();
    for (const char* name : {"a", "b"})
      EXPECT_TRUE(m->graph.initializers.at(name).Equals(Int4Tensor(DataType::kInt4, {7}, vals))) << file << " " << name;
    for (const char* name : {"c", "e"})
      EXPECT_TRUE(m->graph.initializers.at(name).Equals(Int4Tensor(DataType::kUInt4, {5}, uvals))) << file << " " << name;
    ASSERT_TRUE(SaveModel(*m, dir.path(std::string("sparq_") + file)).ok());
  }
  EXPECT_EQ(std::system(("python3 " + script + " " + dir.root() + " " + dir.path("sparq_py.onnx")).c_str()), 0);
}

}  // namespace
}  // namespace sparq
