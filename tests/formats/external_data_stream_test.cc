// Models over 2 GB, at unit size: external data mapped on load (MapFileRegion),
// written tensor by tensor on save (AtomicFileWriter), and what each does with
// a truncated file or a failed write.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>

#include "sparq/file_io.h"
#include "sparq/memory.h"
#include "sparq/onnx_io.h"
#include "test_util.h"

namespace sparq {
namespace {

namespace fs = std::filesystem;

std::string Slurp(const std::string& path) { return ReadFile(path).value(); }

void WriteBytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// True when a mapping of `path` is in this process's address space.
bool IsMapped(const std::string& path) {
  const std::string maps = ReadFile("/proc/self/maps").value();
  return maps.find(fs::canonical(path).string()) != std::string::npos;
}

// x[1, 512] -> MatMul(W0 [512, 512], 1 MiB: mapped on load) -> Add(b0 [512])
// -> MatMul(W1 [512, 16], 32 KiB: read) -> y. Two sizes either side of the
// map threshold, and one small tensor kept inline by the save threshold.
Model TwoLayer() {
  Model m;
  m.ir_version = 8;
  m.opset_imports = {{"", 17}};
  Graph& g = m.graph;
  g.inputs.push_back(testing::FloatInput("x", {{-1, "batch"}, {512, ""}}));
  g.outputs.push_back(testing::FloatInput("y", {{-1, "batch"}, {16, ""}}));
  g.initializers["W0"] = testing::RandomFloats({512, 512}, 1);
  g.initializers["b0"] = testing::RandomFloats({512}, 2);
  g.initializers["W1"] = testing::RandomFloats({512, 16}, 3);
  g.initializers["s"] = Tensor::FromVector<float>({2}, {1.0f, 2.0f});
  g.nodes.push_back({"mm0", "MatMul", "", {"x", "W0"}, {"h0"}, {}, ""});
  g.nodes.push_back({"add0", "Add", "", {"h0", "b0"}, {"z0"}, {}, ""});
  g.nodes.push_back({"mm1", "MatMul", "", {"z0", "W1"}, {"y"}, {}, ""});
  return m;
}

TEST(AtomicFileWriter, WritesInPiecesAndAppearsOnlyOnCommit) {
  testing::TempDir dir;
  const std::string path = dir.path("out.bin");
  WriteBytes(path, "old");
  {
    auto w = AtomicFileWriter::Open(path);
    ASSERT_TRUE(w.ok()) << w.status().ToString();
    ASSERT_TRUE((*w)->Append("ab", 2).ok());
    ASSERT_TRUE((*w)->AppendZeros(3).ok());
    ASSERT_TRUE((*w)->Append("c", 1).ok());
    EXPECT_EQ((*w)->size(), 6u);
    EXPECT_EQ(Slurp(path), "old");  // not yet committed
    ASSERT_TRUE((*w)->Commit().ok());
  }
  EXPECT_EQ(Slurp(path), std::string("ab\0\0\0c", 6));
  EXPECT_EQ(std::distance(fs::directory_iterator(dir.root()), fs::directory_iterator()), 1);  // no temporary left
}

TEST(AtomicFileWriter, DestroyedBeforeCommitLeavesTheOldFileAndNoTemporary) {
  testing::TempDir dir;
  const std::string path = dir.path("out.bin");
  WriteBytes(path, "old");
  {
    auto w = AtomicFileWriter::Open(path);
    ASSERT_TRUE(w.ok());
    ASSERT_TRUE((*w)->Append("new", 3).ok());
    ASSERT_TRUE((*w)->Close().ok());
  }
  EXPECT_EQ(Slurp(path), "old");
  EXPECT_EQ(std::distance(fs::directory_iterator(dir.root()), fs::directory_iterator()), 1);
}

TEST(AtomicFileWriter, MissingFolderIsNotFound) {
  testing::TempDir dir;
  auto w = AtomicFileWriter::Open(dir.path("no/such/out.bin"));
  ASSERT_FALSE(w.ok());
  EXPECT_EQ(w.status().code(), StatusCode::kNotFound);
}

TEST(MapFileRegion, MapsAnUnalignedOffsetAndRefusesATruncatedFile) {
  testing::TempDir dir;
  const std::string path = dir.path("data.bin");
  std::string bytes(10000, '\0');
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<char>(i * 7);
  WriteBytes(path, bytes);
  auto r = MapFileRegion(path, 4099, 5000);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(std::memcmp(r->data, bytes.data() + 4099, 5000), 0);
  // Private: writing the memory never changes the file.
  static_cast<char*>(r->data)[0] = 42;
  EXPECT_EQ(Slurp(path), bytes);

  auto past = MapFileRegion(path, 6000, 5000);
  ASSERT_FALSE(past.ok());
  EXPECT_EQ(past.status().code(), StatusCode::kCorruption);
  EXPECT_NE(past.status().message().find("truncated"), std::string::npos) << past.status().message();
  EXPECT_EQ(MapFileRegion(dir.path("none.bin"), 0, 1).status().code(), StatusCode::kNotFound);
}

TEST(ExternalDataStream, LargeWeightsAreMappedSmallOnesReadAndTheRoundTripIsExact) {
  testing::TempDir dir;
  const Model m = TwoLayer();
  SaveOptions s;
  s.external_data = true;
  ASSERT_TRUE(SaveModel(m, dir.path("m.onnx"), s).ok());
  {
    auto loaded = LoadModel(dir.path("m.onnx"));
    ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
    for (const auto& [name, t] : m.graph.initializers) EXPECT_TRUE(t.Equals(loaded->graph.initializers.at(name))) << name;
    EXPECT_TRUE(IsMapped(dir.path("m.onnx.data")));  // W0 is 1 MiB
    // A mapped weight saved again gives the same files.
    ASSERT_TRUE(SaveModel(*loaded, dir.path("again.onnx"), [&] {
                  SaveOptions o = s;
                  o.external_data_file = "m.onnx.data.again";
                  return o;
                }()).ok());
    EXPECT_EQ(Slurp(dir.path("m.onnx.data")), Slurp(dir.path("m.onnx.data.again")));
  }
  EXPECT_FALSE(IsMapped(dir.path("m.onnx.data")));  // unmapped with the last tensor
}

// The data file's layout is what SaveModel wrote before it streamed (one
// string, built the same way): initializers in name order, each at the next
// multiple of 64, zero padding between, those under the threshold inline.
TEST(ExternalDataStream, DataFileLayoutIsUnchanged) {
  testing::TempDir dir;
  const Model m = TwoLayer();
  SaveOptions s;
  s.external_data = true;
  ASSERT_TRUE(SaveModel(m, dir.path("m.onnx"), s).ok());
  std::string expected;
  for (const auto& [name, t] : m.graph.initializers) {
    if (t.nbytes() < s.external_data_threshold) continue;
    while (expected.size() % 64 != 0) expected.push_back('\0');
    expected.append(static_cast<const char*>(t.raw_data()), t.nbytes());
  }
  EXPECT_EQ(Slurp(dir.path("m.onnx.data")), expected);
  // The model itself is the same bytes whether written twice or from a load.
  ASSERT_TRUE(SaveModel(m, dir.path("m2.onnx"), [&] {
                SaveOptions o = s;
                o.external_data_file = "m.onnx.data";
                return o;
              }()).ok());
  EXPECT_EQ(Slurp(dir.path("m.onnx")), Slurp(dir.path("m2.onnx")));
  // Without external data the file is SerializeModel's bytes.
  ASSERT_TRUE(SaveModel(m, dir.path("inline.onnx")).ok());
  EXPECT_EQ(Slurp(dir.path("inline.onnx")), SerializeModel(m).value());
}

TEST(ExternalDataStream, TruncatedDataFileIsCorruptionNamingTheTensor) {
  testing::TempDir dir;
  SaveOptions s;
  s.external_data = true;
  ASSERT_TRUE(SaveModel(TwoLayer(), dir.path("m.onnx"), s).ok());
  const std::string data = Slurp(dir.path("m.onnx.data"));
  // Cut inside the last tensor in the file (W1 is read, W0 mapped: cut each).
  for (const char* victim : {"W1", "W0"}) {
    WriteBytes(dir.path("m.onnx.data"), data);
    ASSERT_TRUE(LoadModel(dir.path("m.onnx")).ok());
    // W0 comes first (name order: W0, W1, b0), so cutting after W0 loses W1,
    // and cutting within W0 loses it.
    const size_t cut = std::string(victim) == "W1" ? 512 * 512 * 4 + 100 : 1000;
    WriteBytes(dir.path("m.onnx.data"), data.substr(0, cut));
    auto bad = LoadModel(dir.path("m.onnx"));
    ASSERT_FALSE(bad.ok()) << victim;
    EXPECT_EQ(bad.status().code(), StatusCode::kCorruption) << bad.status().ToString();
    EXPECT_NE(bad.status().message().find(std::string("'") + victim + "'"), std::string::npos)
        << bad.status().message();
    EXPECT_NE(bad.status().message().find("truncated"), std::string::npos) << bad.status().message();
  }
}

TEST(ExternalDataStream, FailedSaveLeavesNeitherFileNorTemporary) {
  testing::TempDir dir;
  // The data file's name is taken by a folder: its rename fails after both
  // files are complete, and neither may appear.
  fs::create_directories(dir.path("m.onnx.data/inside"));
  SaveOptions s;
  s.external_data = true;
  const Status st = SaveModel(TwoLayer(), dir.path("m.onnx"), s);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.code(), StatusCode::kIOError) << st.ToString();
  std::set<std::string> left;
  for (const auto& e : fs::directory_iterator(dir.root())) left.insert(e.path().filename().string());
  EXPECT_EQ(left, std::set<std::string>{"m.onnx.data"});
}

// The opset converter sees large weights as typed graph inputs, not data: the
// converted model shares them with the input (no copy, no 2 GiB protobuf).
TEST(ExternalDataStream, OpsetConversionSharesLargeWeights) {
  Model m = TwoLayer();
  m.ir_version = 4;
  m.opset_imports = {{"", 9}};
  m.graph.nodes.push_back({"clip", "Clip", "", {"y"}, {"y_clipped"}, {Attribute::Float("min", 0.0f), Attribute::Float("max", 6.0f)}, ""});
  m.graph.outputs[0].name = "y_clipped";
  auto converted = ConvertOpset(m, 13);
  ASSERT_TRUE(converted.ok()) << converted.status().ToString();
  EXPECT_EQ(converted->opset(), 13);
  EXPECT_EQ(converted->graph.initializers.at("W0").raw_data(), m.graph.initializers.at("W0").raw_data());  // shared
  EXPECT_TRUE(converted->graph.initializers.at("W1").Equals(m.graph.initializers.at("W1")));
  ASSERT_EQ(converted->graph.inputs.size(), 1u);
  EXPECT_EQ(converted->graph.inputs[0].name, "x");
  EXPECT_TRUE(CheckModel(*converted).ok()) << CheckModel(*converted).ToString();
}

TEST(PeakRss, IsReported) { EXPECT_GT(PeakRssMiB(), 1.0); }

}  // namespace
}  // namespace sparq
