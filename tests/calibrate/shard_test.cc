// Sharded calibration: shards merged give the one-process table byte for
// byte; parts that do not belong together are refused by name.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "sparq/calibrate.h"
#include "sparq/commands.h"
#include "sparq/dataset.h"
#include "sparq/file_io.h"
#include "sparq/onnx_io.h"
#include "test_util.h"

namespace sparq {
namespace {

const std::string kDigits = std::string(SPARQ_SOURCE_DIR) + "/examples/digits/";

std::string Bytes(const std::string& path) {
  auto s = ReadFile(path);
  EXPECT_TRUE(s.ok()) << path;
  return s.ok() ? *s : std::string();
}

class CalibrateShards : public ::testing::Test {
 protected:
  // 100 samples in batches of 16: 7 batches (the last of 4), 3 shards of 2, 2 and 3 batches.
  CalibrateFilesOptions Options(CalibrationMethod method) const {
    CalibrateFilesOptions o;
    o.model = kDigits + "digits_cnn.onnx";
    o.data = kDigits + "calib.npz";
    o.batch_size = 16;
    o.samples = 100;
    o.calibration.method = method;
    o.calibration.threads = 2;
    return o;
  }
  // Writes the parts of `shards` shards; returns their paths.
  std::vector<std::string> Shard(CalibrateFilesOptions o, int shards, const std::string& stem) {
    std::vector<std::string> parts;
    for (int i = 0; i < shards; ++i) {
      o.shard = i;
      o.shards = shards;
      o.output = dir_.path(stem + "-" + std::to_string(i) + ".hist");
      o.calibration.threads = 1 + i % 2;  // thread counts do not matter
      auto p = CalibrateShardFiles(o);
      EXPECT_TRUE(p.ok()) << p.status().ToString();
      parts.push_back(o.output);
    }
    return parts;
  }
  testing::TempDir dir_;
};

TEST_F(CalibrateShards, MergedThreeShardsGiveTheOneProcessFilesByteForByte) {
  for (CalibrationMethod method : {CalibrationMethod::kMax, CalibrationMethod::kKL, CalibrationMethod::kPercentile,
                                   CalibrationMethod::kMSE}) {
    const std::string name = CalibrationMethodName(method);
    const bool trt = method == CalibrationMethod::kMax || method == CalibrationMethod::kKL;
    CalibrateFilesOptions one = Options(method);
    one.output = dir_.path(name + "-one.json");
    if (trt) one.trt_cache = dir_.path(name + "-one.cache");
    auto table = CalibrateFiles(one);
    ASSERT_TRUE(table.ok()) << table.status().ToString();

    MergeCalibrationFilesOptions m;
    m.parts = Shard(Options(method), 3, name);
    m.output = dir_.path(name + "-merged.json");
    if (trt) m.trt_cache = dir_.path(name + "-merged.cache");
    auto merged = MergeCalibrationFiles(m);
    ASSERT_TRUE(merged.ok()) << merged.status().ToString();
    EXPECT_EQ(merged->samples, 100);
    EXPECT_EQ(Bytes(one.output), Bytes(m.output)) << name;
    if (trt) EXPECT_EQ(Bytes(one.trt_cache), Bytes(m.trt_cache)) << name;
  }
}

TEST_F(CalibrateShards, MoreShardsThanBatchesAndOneShardStillMatch) {
  CalibrateFilesOptions one = Options(CalibrationMethod::kKL);
  one.output = dir_.path("one.json");
  ASSERT_TRUE(CalibrateFiles(one).ok());
  for (int shards : {1, 9}) {  // 9 > 7 batches: two shards are empty
    MergeCalibrationFilesOptions m;
    m.parts = Shard(Options(CalibrationMethod::kKL), shards, "n" + std::to_string(shards));
    m.output = dir_.path("merged" + std::to_string(shards) + ".json");
    auto merged = MergeCalibrationFiles(m);
    ASSERT_TRUE(merged.ok()) << merged.status().ToString();
    EXPECT_EQ(Bytes(one.output), Bytes(m.output)) << shards << " shards";
  }
}

TEST_F(CalibrateShards, PartialFileRoundTrips) {
  std::vector<std::string> parts = Shard(Options(CalibrationMethod::kKL), 2, "rt");
  auto p = PartialCalibration::Load(parts[1]);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->shards, 2);
  EXPECT_EQ(p->shard_ids, std::vector<int>{1});
  EXPECT_EQ(p->data_samples, 100);
  EXPECT_EQ(p->batch_size, 16);
  EXPECT_EQ(p->samples, 52);  // batches 3..6: 16 + 16 + 16 + 4
  EXPECT_EQ(p->model_id.rfind("fnv1a64:", 0), 0u);
  ASSERT_FALSE(p->tensors.empty());
  ASSERT_TRUE(p->Save(dir_.path("again.hist")).ok());
  EXPECT_EQ(Bytes(parts[1]), Bytes(dir_.path("again.hist")));
}

TEST_F(CalibrateShards, PartsThatDoNotBelongTogetherAreRefused) {
  std::vector<std::string> kl = Shard(Options(CalibrationMethod::kKL), 3, "kl");
  auto merge = [&](std::vector<std::string> parts) {
    MergeCalibrationFilesOptions m;
    m.parts = std::move(parts);
    m.output = dir_.path("out.json");
    return MergeCalibrationFiles(m).status();
  };
  auto expect = [&](const Status& s, StatusCode code, const std::string& needle) {
    EXPECT_EQ(s.code(), code) << s.ToString();
    EXPECT_NE(s.message().find(needle), std::string::npos) << s.ToString();
  };
  expect(merge({kl[0], kl[2]}), StatusCode::kInvalidArgument, "shard(s) 1 of 3 missing");
  expect(merge({kl[0], kl[1], kl[1], kl[2]}), StatusCode::kInvalidArgument, "shard 1 of 3 is given twice");
  expect(merge({}), StatusCode::kInvalidArgument, "no partial calibrations");

  std::vector<std::string> mse = Shard(Options(CalibrationMethod::kMSE), 3, "mse");
  expect(merge({kl[0], kl[1], mse[2]}), StatusCode::kInvalidArgument, "method options");
  CalibrateFilesOptions batch8 = Options(CalibrationMethod::kKL);
  batch8.batch_size = 8;
  expect(merge({kl[0], kl[1], Shard(batch8, 3, "b8")[2]}), StatusCode::kInvalidArgument, "batch size");
  std::vector<std::string> two = Shard(Options(CalibrationMethod::kKL), 2, "two");
  expect(merge({kl[0], kl[1], two[1]}), StatusCode::kInvalidArgument, "shard count");

  // Another model: the digits CNN with one more metadata entry (same graph, different file).
  auto model = LoadModel(kDigits + "digits_cnn.onnx");
  ASSERT_TRUE(model.ok());
  model->metadata_props.push_back({"note", "another file"});
  ASSERT_TRUE(SaveModel(*model, dir_.path("other.onnx")).ok());
  CalibrateFilesOptions other = Options(CalibrationMethod::kKL);
  other.model = dir_.path("other.onnx");
  expect(merge({kl[0], kl[1], Shard(other, 3, "other")[2]}), StatusCode::kInvalidArgument, "differ in model");

  // Damaged files: a changed count, a truncated file, another file type.
  std::string text = Bytes(kl[1]);
  const size_t at = text.find("\"counts\":[") + 10;
  text[at] = text[at] == '1' ? '2' : '1';
  ASSERT_TRUE(WriteFileAtomically(dir_.path("edited.hist"), text).ok());
  expect(merge({kl[0], dir_.path("edited.hist"), kl[2]}), StatusCode::kCorruption, "checksum mismatch");
  ASSERT_TRUE(WriteFileAtomically(dir_.path("cut.hist"), Bytes(kl[1]).substr(0, 200)).ok());
  expect(merge({kl[0], dir_.path("cut.hist"), kl[2]}), StatusCode::kCorruption, "cut.hist: not a JSON object");
  expect(merge({kl[0], kDigits + "digits_cnn.onnx", kl[2]}), StatusCode::kCorruption, "not a JSON object");
  expect(merge({kl[0], dir_.path("absent.hist"), kl[2]}), StatusCode::kNotFound, "absent.hist");
  expect(merge({kl[0], kl[1], kl[2], dir_.path("out.json")}), StatusCode::kInvalidArgument, "is one of the parts");
  EXPECT_FALSE(std::ifstream(dir_.path("out.json")).good()) << "nothing is written on error";
}

TEST_F(CalibrateShards, AutoAndTheTensorRtCacheAreRefusedPerShard) {
  CalibrateFilesOptions o = Options(CalibrationMethod::kAuto);
  o.shard = 0;
  o.shards = 2;
  o.output = dir_.path("auto.hist");
  auto s = CalibrateShardFiles(o).status();
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("method auto cannot be sharded"), std::string::npos) << s.ToString();
  o = Options(CalibrationMethod::kKL);
  o.shards = 2;
  o.output = dir_.path("p.hist");
  o.trt_cache = dir_.path("p.cache");
  EXPECT_EQ(CalibrateShardFiles(o).status().code(), StatusCode::kInvalidArgument);
  o.trt_cache.clear();
  o.shard = 2;
  EXPECT_EQ(CalibrateShardFiles(o).status().code(), StatusCode::kInvalidArgument);
}

TEST(ShardOf, ContiguousWholeBatchesCoverTheDataOnce) {
  for (auto [spec, ok] : {std::pair<const char*, bool>{"0/1", true}, {"2/3", true}, {"3/3", false}, {"1", false},
                          {"a/2", false}, {"-1/2", false}, {"0/0", false}, {"1/ 2", false}}) {
    EXPECT_EQ(ParseShard(spec).ok(), ok) << spec;
  }
  AbsHistogram a(8), b(8), whole(8);
  std::vector<float> x = {0.1f, 0.2f, 3.0f}, y = {0.0f, 7.5f, -0.3f};
  a.Add(x.data(), 3);
  b.Add(y.data(), 3);
  whole.Add(x.data(), 3);
  whole.Add(y.data(), 3);
  a.Merge(b);
  EXPECT_EQ(a.range(), whole.range());
  EXPECT_EQ(a.counts(), whole.counts());
}

}  // namespace
}  // namespace sparq
