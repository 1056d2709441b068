// .npy/.npz: round trips for every type, files written by numpy itself, and
// every kind of malformed input with the message it gives.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "formats/zip.h"
#include "sparq/file_io.h"
#include "sparq/npy.h"
#include "sparq/onnx_io.h"
#include "test_util.h"

namespace sparq {
namespace {

// A tensor of `type` and `shape` with varied values (non-zero, signed where
// the type allows).
Tensor Sample(DataType type, Shape shape) {
  Tensor f(DataType::kFloat32, shape);
  for (int64_t i = 0; i < f.numel(); ++i) {
    f.data<float>()[i] = static_cast<float>((i * 7) % 11) - (GetDataTypeInfo(type)->is_signed ? 5.0f : 0.0f) + 0.5f;
  }
  if (type == DataType::kBool) {
    Tensor b(DataType::kBool, shape);
    for (int64_t i = 0; i < b.numel(); ++i) static_cast<uint8_t*>(b.raw_data())[i] = i % 3 == 0;
    return b;
  }
  return f.CastTo(type);
}

void WriteBytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

std::string NpyBytes(const std::string& dict, size_t data_bytes, int major = 1) {
  std::string header = dict;
  header += '\n';
  std::string out("\x93NUMPY", 6);
  out += static_cast<char>(major);
  out += '\0';
  const size_t n = header.size();
  out += static_cast<char>(n & 0xff);
  out += static_cast<char>((n >> 8) & 0xff);
  if (major > 1) out += std::string(2, '\0');
  out += header;
  out += std::string(data_bytes, '\x01');
  return out;
}

bool HavePythonNumpy() { return std::system("python3 -c 'import numpy' >/dev/null 2>&1") == 0; }

// Runs a Python snippet (with numpy as np); returns its exit code.
int RunPython(const testing::TempDir& dir, const std::string& code) {
  const std::string script = dir.path("script.py");
  WriteBytes(script, "import numpy as np, sys\n" + code + "\n");
  return std::system(("python3 " + script).c_str());
}

constexpr DataType kNumpyTypes[] = {DataType::kFloat32, DataType::kFloat16, DataType::kFloat64, DataType::kInt64,
                                    DataType::kInt32,   DataType::kInt16,   DataType::kInt8,    DataType::kUInt8,
                                    DataType::kUInt16,  DataType::kUInt32,  DataType::kUInt64,  DataType::kBool};

TEST(Npy, RoundTripsEveryTypeAndShape) {
  const Shape shapes[] = {{2, 3}, {5}, {}, {0, 4}, {1, 2, 1, 3}};
  for (DataType type : kNumpyTypes) {
    for (const Shape& shape : shapes) {
      Tensor t = Sample(type, shape);
      auto bytes = SerializeNpy(t);
      ASSERT_TRUE(bytes.ok()) << bytes.status().ToString();
      EXPECT_EQ(bytes->size() % 64, t.nbytes() % 64) << "data must start 64-byte aligned";
      auto back = ParseNpy(*bytes, "mem");
      ASSERT_TRUE(back.ok()) << DataTypeName(type) << ShapeToString(shape) << ": " << back.status().ToString();
      EXPECT_TRUE(back->Equals(t)) << DataTypeName(type) << ShapeToString(shape);
    }
  }
}

TEST(Npy, FileRoundTripAndHeaderOnlyRead) {
  testing::TempDir dir;
  Tensor t = Sample(DataType::kFloat32, {4, 3, 2});
  ASSERT_TRUE(WriteNpy(dir.path("a.npy"), t).ok());
  auto back = ReadNpy(dir.path("a.npy"));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_TRUE(back->Equals(t));
  auto header = ReadNpyHeader(dir.path("a.npy"));
  ASSERT_TRUE(header.ok()) << header.status().ToString();
  EXPECT_EQ(header->shape, (Shape{4, 3, 2}));
  EXPECT_EQ(header->dtype, DataType::kFloat32);
  EXPECT_EQ(header->data_offset % 64, 0u);
}

TEST(Npy, BFloat16CannotBeWritten) {
  auto bytes = SerializeNpy(Tensor(DataType::kBFloat16, {2}));
  ASSERT_FALSE(bytes.ok());
  EXPECT_EQ(bytes.status().code(), StatusCode::kNotSupported);
  EXPECT_NE(bytes.status().message().find("bfloat16"), std::string::npos);
}

TEST(Npz, RoundTripKeepsOrder) {
  NamedTensors arrays;
  arrays.emplace_back("zeta", Sample(DataType::kFloat32, {2, 2}));
  arrays.emplace_back("alpha", Sample(DataType::kInt64, {3}));
  arrays.emplace_back("mid/dle", Sample(DataType::kBool, {2, 1}));
  testing::TempDir dir;
  ASSERT_TRUE(WriteNpz(dir.path("x.npz"), arrays).ok());
  auto back = ReadNpz(dir.path("x.npz"));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  ASSERT_EQ(back->size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ((*back)[i].first, arrays[i].first);
    EXPECT_TRUE((*back)[i].second.Equals(arrays[i].second));
  }
}

TEST(Npz, ReadsZip64Records) {
  zip::ZipWriter writer(/*force_zip64=*/true);
  Tensor t = Sample(DataType::kFloat64, {3, 2});
  writer.Add("w.npy", *SerializeNpy(t));
  writer.Add("v.npy", *SerializeNpy(Sample(DataType::kInt8, {4})));
  auto back = ParseNpz(writer.Finish(), "zip64.npz");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  ASSERT_EQ(back->size(), 2u);
  EXPECT_EQ((*back)[0].first, "w");
  EXPECT_TRUE((*back)[0].second.Equals(t));
}

TEST(Npz, DuplicateAndEmptyNamesAreRejectedOnWrite) {
  NamedTensors dup;
  dup.emplace_back("a", Tensor(DataType::kFloat32, {1}));
  dup.emplace_back("a", Tensor(DataType::kFloat32, {1}));
  EXPECT_EQ(SerializeNpz(dup).status().code(), StatusCode::kInvalidArgument);
  NamedTensors empty;
  empty.emplace_back("", Tensor(DataType::kFloat32, {1}));
  EXPECT_EQ(SerializeNpz(empty).status().code(), StatusCode::kInvalidArgument);
}

// numpy writes, sparq reads; sparq writes, numpy reads.
TEST(NpyNumpyInterop, ReadsWhatNumpyWrites) {
  if (!HavePythonNumpy()) GTEST_SKIP() << "python3 with numpy is not installed";
  testing::TempDir dir;
  const std::string code = R"(
d = sys.argv[0].rsplit('/', 1)[0] + '/'
a = np.arange(24, dtype=np.float32).reshape(2, 3, 4) - 7.5
np.save(d + 'f4.npy', a)
for t in ['f2', 'f8', 'i8', 'i4', 'i2', 'i1', 'u1', 'u2', 'u4', 'u8']:
    np.save(d + t + '.npy', (np.arange(6) * 3 % 7).astype(t).reshape(2, 3))
np.save(d + 'b1.npy', np.array([True, False, True]))
np.save(d + 'scalar.npy', np.float32(2.5))
np.save(d + 'big_endian.npy', np.arange(5, dtype='>f4'))
np.save(d + 'fortran.npy', np.asfortranarray(a[0]))
with open(d + 'v2.npy', 'wb') as f: np.lib.format.write_array(f, a, version=(2, 0))
with open(d + 'v3.npy', 'wb') as f: np.lib.format.write_array(f, a, version=(3, 0))
np.savez(d + 'stored.npz', x=a, labels=np.array([3, 1], dtype=np.int64))
np.savez_compressed(d + 'deflated.npz', x=a, labels=np.array([3, 1], dtype=np.int64))
np.save(d + 'complex.npy', np.zeros(2, dtype=np.complex64))
np.save(d + 'object.npy', np.array([{}, 1], dtype=object), allow_pickle=True)
)";
  ASSERT_EQ(RunPython(dir, code), 0);

  std::vector<float> expect(24);
  for (int i = 0; i < 24; ++i) expect[i] = static_cast<float>(i) - 7.5f;
  const Tensor a = Tensor::FromVector<float>({2, 3, 4}, expect);
  for (const char* name : {"f4.npy", "v2.npy", "v3.npy"}) {
    auto t = ReadNpy(dir.path(name));
    ASSERT_TRUE(t.ok()) << name << ": " << t.status().ToString();
    EXPECT_TRUE(t->Equals(a)) << name;
  }
  const std::pair<const char*, DataType> typed[] = {
      {"f2", DataType::kFloat16}, {"f8", DataType::kFloat64}, {"i8", DataType::kInt64}, {"i4", DataType::kInt32},
      {"i2", DataType::kInt16},   {"i1", DataType::kInt8},    {"u1", DataType::kUInt8}, {"u2", DataType::kUInt16},
      {"u4", DataType::kUInt32},  {"u8", DataType::kUInt64}};
  for (const auto& [name, type] : typed) {
    auto t = ReadNpy(dir.path(std::string(name) + ".npy"));
    ASSERT_TRUE(t.ok()) << name << ": " << t.status().ToString();
    EXPECT_EQ(t->dtype(), type);
    EXPECT_EQ(t->shape(), (Shape{2, 3}));
    for (int64_t i = 0; i < 6; ++i) EXPECT_EQ(t->GetAsDouble(i), static_cast<double>(i * 3 % 7)) << name;
  }
  auto b = ReadNpy(dir.path("b1.npy"));
  ASSERT_TRUE(b.ok());
  EXPECT_TRUE(b->Equals(Tensor::FromVector<bool>({3}, {true, false, true})));
  auto scalar = ReadNpy(dir.path("scalar.npy"));
  ASSERT_TRUE(scalar.ok());
  EXPECT_EQ(scalar->rank(), 0u);
  EXPECT_EQ(scalar->data<float>()[0], 2.5f);
  auto be = ReadNpy(dir.path("big_endian.npy"));
  ASSERT_TRUE(be.ok()) << be.status().ToString();
  EXPECT_TRUE(be->Equals(Tensor::FromVector<float>({5}, {0, 1, 2, 3, 4})));

  auto fortran = ReadNpy(dir.path("fortran.npy"));
  EXPECT_EQ(fortran.status().code(), StatusCode::kNotSupported);
  EXPECT_NE(fortran.status().message().find("Fortran"), std::string::npos);
  EXPECT_NE(fortran.status().message().find("fortran.npy"), std::string::npos);
  auto complex = ReadNpy(dir.path("complex.npy"));
  EXPECT_EQ(complex.status().code(), StatusCode::kNotSupported);
  EXPECT_NE(complex.status().message().find("'<c8'"), std::string::npos) << complex.status().message();
  auto object = ReadNpy(dir.path("object.npy"));
  EXPECT_EQ(object.status().code(), StatusCode::kNotSupported);

  for (const char* name : {"stored.npz", "deflated.npz"}) {
    auto arrays = ReadNpz(dir.path(name));
    ASSERT_TRUE(arrays.ok()) << name << ": " << arrays.status().ToString();
    ASSERT_EQ(arrays->size(), 2u);
    EXPECT_EQ((*arrays)[0].first, "x");
    EXPECT_TRUE((*arrays)[0].second.Equals(a));
    EXPECT_EQ((*arrays)[1].first, "labels");
    EXPECT_TRUE((*arrays)[1].second.Equals(Tensor::FromVector<int64_t>({2}, {3, 1})));
  }
}

TEST(NpyNumpyInterop, LocatedArraysReadRowsOnDemand) {
  if (!HavePythonNumpy()) GTEST_SKIP() << "python3 with numpy is not installed";
  testing::TempDir dir;
  const std::string code = R"(
d = sys.argv[0].rsplit('/', 1)[0] + '/'
a = (np.arange(5 * 3 * 2, dtype=np.float32).reshape(5, 3, 2) - 10.25)
np.save(d + 'a.npy', a)
np.save(d + 'be.npy', a.astype('>f4'))
np.savez(d + 'stored.npz', x=a, labels=np.array([3, 1, 4, 1, 5], dtype=np.int64))
np.savez_compressed(d + 'deflated.npz', x=a)
)";
  ASSERT_EQ(RunPython(dir, code), 0);
  std::vector<float> all(30);
  for (int i = 0; i < 30; ++i) all[i] = static_cast<float>(i) - 10.25f;
  const Tensor rows_1_to_3 = Tensor::FromVector<float>({3, 3, 2}, std::vector<float>(all.begin() + 6, all.begin() + 24));
  for (const char* name : {"a.npy", "be.npy", "stored.npz"}) {
    auto refs = LocateArrays(dir.path(name));
    ASSERT_TRUE(refs.ok()) << name << ": " << refs.status().ToString();
    const NpyArrayRef& x = refs->front();
    EXPECT_EQ(x.header.shape, (Shape{5, 3, 2})) << name;
    auto rows = ReadArrayRows(x, 1, 3);
    ASSERT_TRUE(rows.ok()) << rows.status().ToString();
    EXPECT_TRUE(rows->Equals(rows_1_to_3)) << name;
  }
  auto npz = LocateArrays(dir.path("stored.npz"));
  ASSERT_TRUE(npz.ok());
  ASSERT_EQ(npz->size(), 2u);
  EXPECT_EQ((*npz)[1].name, "labels");
  EXPECT_TRUE(ReadArrayRows((*npz)[1], 2, 2)->Equals(Tensor::FromVector<int64_t>({2}, {4, 1})));
  // Compressed members can only be read whole.
  EXPECT_EQ(LocateArrays(dir.path("deflated.npz")).status().code(), StatusCode::kNotSupported);
}

// LocateArrays checks a stored member's CRC a window (4 MiB) at a time: a
// flipped byte past the first window is still found, and an intact file reads.
TEST(NpzLocate, CrcOfALargeMemberIsCheckedWindowByWindow) {
  testing::TempDir dir;
  NamedTensors arrays;
  arrays.emplace_back("x", testing::RandomFloats({3, 500000}, 4));  // 6 MB of data
  ASSERT_TRUE(WriteNpz(dir.path("big.npz"), arrays).ok());
  auto refs = LocateArrays(dir.path("big.npz"));
  ASSERT_TRUE(refs.ok()) << refs.status().ToString();
  auto row = ReadArrayRows(refs->front(), 2, 1);
  ASSERT_TRUE(row.ok());
  const float* x = arrays[0].second.data<float>();
  EXPECT_TRUE(row->Equals(Tensor::FromVector<float>({1, 500000}, std::vector<float>(x + 1000000, x + 1500000))));
  std::string bytes = *ReadFile(dir.path("big.npz"));
  bytes[refs->front().header.data_offset + (size_t{5} << 20)] ^= 0x10;
  ASSERT_TRUE(WriteFileAtomically(dir.path("flipped.npz"), bytes).ok());
  auto flipped = LocateArrays(dir.path("flipped.npz"));
  ASSERT_FALSE(flipped.ok());
  EXPECT_NE(flipped.status().message().find("CRC-32 mismatch"), std::string::npos) << flipped.status().message();
}

TEST(NpyNumpyInterop, NumpyReadsWhatSparqWrites) {
  if (!HavePythonNumpy()) GTEST_SKIP() << "python3 with numpy is not installed";
  testing::TempDir dir;
  NamedTensors arrays;
  for (DataType type : kNumpyTypes) {
    Tensor t = Sample(type, {2, 3});
    ASSERT_TRUE(WriteNpy(dir.path(DataTypeName(type) + ".npy"), t).ok());
    arrays.emplace_back(DataTypeName(type), t);
  }
  ASSERT_TRUE(WriteNpz(dir.path("all.npz"), arrays).ok());
  zip::ZipWriter writer(/*force_zip64=*/true);
  writer.Add("x.npy", *SerializeNpy(Sample(DataType::kFloat32, {2, 3})));
  WriteBytes(dir.path("zip64.npz"), writer.Finish());
  ASSERT_TRUE(WriteNpy(dir.path("scalar.npy"), Tensor::Scalar<double>(1.25)).ok());
  // Values as Sample() makes them: ((i * 7) % 11) - 5 + 0.5 for signed types.
  const std::string code = R"(
d = sys.argv[0].rsplit('/', 1)[0] + '/'
z = np.load(d + 'all.npz')
assert list(z.keys()) == ['float32', 'float16', 'float64', 'int64', 'int32', 'int16', 'int8', 'uint8',
                          'uint16', 'uint32', 'uint64', 'bool'], list(z.keys())
for name in z.keys():
    a = np.load(d + name + '.npy')
    assert a.dtype == np.dtype(name) and a.shape == (2, 3), (name, a.dtype, a.shape)
    assert np.array_equal(a, z[name]), name
i = np.arange(6).reshape(2, 3)
assert np.array_equal(z['float32'], ((i * 7) % 11) - 5 + 0.5)
assert np.array_equal(z['uint8'], (((i * 7) % 11) + 0.5).astype(np.uint8))
assert np.array_equal(z['bool'], i % 3 == 0)
assert np.array_equal(np.load(d + 'zip64.npz')['x'], z['float32'])
s = np.load(d + 'scalar.npy')
assert s.shape == () and s == 1.25
)";
  EXPECT_EQ(RunPython(dir, code), 0);
}

// ---------------------------------------------------------------------------
// Malformed input: each gives a Corruption/NotSupported naming the file and
// the problem.

void ExpectError(const StatusOr<Tensor>& r, StatusCode code, const std::string& needle) {
  ASSERT_FALSE(r.ok()) << "expected an error containing: " << needle;
  EXPECT_EQ(r.status().code(), code) << r.status().ToString();
  EXPECT_NE(r.status().message().find(needle), std::string::npos) << r.status().message();
  EXPECT_NE(r.status().message().find("bad.npy"), std::string::npos) << r.status().message();
}

TEST(NpyMalformed, EachProblemIsNamed) {
  const std::string f4 = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }";
  ExpectError(ParseNpy("", "bad.npy"), StatusCode::kCorruption, "bad magic");
  ExpectError(ParseNpy("PK\x03\x04 not npy", "bad.npy"), StatusCode::kCorruption, "bad magic");
  ExpectError(ParseNpy(std::string("\x93NUMPY\x01", 7), "bad.npy"), StatusCode::kCorruption, "truncated");
  ExpectError(ParseNpy(NpyBytes(f4, 24).substr(0, 20), "bad.npy"), StatusCode::kCorruption, "header is truncated");
  ExpectError(ParseNpy(NpyBytes(f4, 20), "bad.npy"), StatusCode::kCorruption, "truncated file");
  ExpectError(ParseNpy(NpyBytes(f4, 28), "bad.npy"), StatusCode::kCorruption, "28 bytes after the header");
  ExpectError(ParseNpy(NpyBytes(f4, 24, 4), "bad.npy"), StatusCode::kNotSupported, "version 4.0");
  ExpectError(ParseNpy(NpyBytes("{'descr': '<c8', 'fortran_order': False, 'shape': (1,), }", 8), "bad.npy"),
              StatusCode::kNotSupported, "'<c8'");
  ExpectError(ParseNpy(NpyBytes("{'descr': '|O', 'fortran_order': False, 'shape': (1,), }", 8), "bad.npy"),
              StatusCode::kNotSupported, "'|O'");
  ExpectError(ParseNpy(NpyBytes("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (1,), }", 4), "bad.npy"),
              StatusCode::kNotSupported, "structured");
  ExpectError(ParseNpy(NpyBytes("{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }", 24), "bad.npy"),
              StatusCode::kNotSupported, "Fortran");
  ExpectError(ParseNpy(NpyBytes("{'descr': '<f4', 'shape': (2, 3), }", 24), "bad.npy"), StatusCode::kCorruption,
              "missing key 'fortran_order'");
  ExpectError(ParseNpy(NpyBytes("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), 'x': 1}", 24), "bad.npy"),
              StatusCode::kCorruption, "unexpected or repeated key 'x'");
  ExpectError(ParseNpy(NpyBytes("{'descr': '<f4', 'fortran_order': False, 'shape': (2, -3), }", 24), "bad.npy"),
              StatusCode::kCorruption, "non-negative integer");
  ExpectError(ParseNpy(NpyBytes("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3", 24), "bad.npy"),
              StatusCode::kCorruption, "bad .npy header");
  ExpectError(ParseNpy(NpyBytes("{'descr': '<f4', 'fortran_order': Maybe, 'shape': (2,), }", 8), "bad.npy"),
              StatusCode::kCorruption, "True or False");
  ExpectError(
      ParseNpy(NpyBytes("{'descr': '<f8', 'fortran_order': False, 'shape': (4294967296, 4294967296, 4096), }", 8),
               "bad.npy"),
      StatusCode::kCorruption, "too large");
}

TEST(NpyMalformed, MissingFileIsNotFound) {
  testing::TempDir dir;
  auto r = ReadNpy(dir.path("missing.npy"));
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
  EXPECT_NE(r.status().message().find("missing.npy"), std::string::npos);
}

// Every strict prefix of a valid file is rejected cleanly.
TEST(NpyMalformed, EveryTruncationIsAnError) {
  const std::string npy = *SerializeNpy(Sample(DataType::kInt16, {3, 2}));
  for (size_t n = 0; n < npy.size(); ++n) EXPECT_FALSE(ParseNpy(npy.substr(0, n), "cut.npy").ok()) << n;
  NamedTensors arrays;
  arrays.emplace_back("a", Sample(DataType::kFloat32, {2}));
  arrays.emplace_back("b", Sample(DataType::kUInt8, {3}));
  const std::string npz = *SerializeNpz(arrays);
  for (size_t n = 0; n < npz.size(); ++n) EXPECT_FALSE(ParseNpz(npz.substr(0, n), "cut.npz").ok()) << n;
}

void ExpectNpzError(const std::string& bytes, StatusCode code, const std::string& needle) {
  auto r = ParseNpz(bytes, "bad.npz");
  ASSERT_FALSE(r.ok()) << "expected an error containing: " << needle;
  EXPECT_EQ(r.status().code(), code) << r.status().ToString();
  EXPECT_NE(r.status().message().find(needle), std::string::npos) << r.status().message();
  EXPECT_NE(r.status().message().find("bad.npz"), std::string::npos) << r.status().message();
}

TEST(NpzMalformed, EachProblemIsNamed) {
  NamedTensors arrays;
  arrays.emplace_back("x", Sample(DataType::kFloat32, {4}));
  const std::string good = *SerializeNpz(arrays);
  ASSERT_TRUE(ParseNpz(good, "good.npz").ok());

  ExpectNpzError("short", StatusCode::kCorruption, "not a ZIP archive");
  ExpectNpzError(std::string(100, 'z'), StatusCode::kCorruption, "no end-of-central-directory");
  // A flipped byte in the member's data: the CRC no longer matches.
  std::string flipped = good;
  flipped[good.find("\x93NUMPY") + 80] ^= 0x40;
  ExpectNpzError(flipped, StatusCode::kCorruption, "CRC-32 mismatch");
  // The central directory points outside the file.
  std::string bad_cd = good;
  bad_cd[bad_cd.size() - 3] = '\x7f';  // high byte of the directory offset
  ExpectNpzError(bad_cd, StatusCode::kCorruption, "outside");
  // A member that is not .npy, and a compression method we do not know.
  zip::ZipWriter w1;
  w1.Add("notes.txt", "hello");
  ExpectNpzError(w1.Finish(), StatusCode::kNotSupported, "'notes.txt' is not a .npy array");
  std::string method = good;
  method[8] = 12;                                      // local header: bzip2
  method[method.find("PK\x01\x02", 0, 4) + 10] = 12;   // central directory too
  ExpectNpzError(method, StatusCode::kNotSupported, "compression method 12");
  // A member that is a bad .npy: the message names archive and member.
  zip::ZipWriter w2;
  w2.Add("y.npy", "not an npy file at all");
  ExpectNpzError(w2.Finish(), StatusCode::kCorruption, "bad.npz:y.npy: not a .npy file");
}

TEST(NpzMalformed, CorruptDeflateStream) {
  if (!HavePythonNumpy()) GTEST_SKIP() << "python3 with numpy is not installed";
  testing::TempDir dir;
  ASSERT_EQ(RunPython(dir, "np.savez_compressed(sys.argv[0].rsplit('/', 1)[0] + '/c.npz', "
                           "x=np.arange(1000, dtype=np.float32))"),
            0);
  auto bytes = ReadFile(dir.path("c.npz"));
  ASSERT_TRUE(bytes.ok());
  ASSERT_TRUE(ParseNpz(*bytes, "c.npz").ok());
  std::string broken = *bytes;
  for (size_t i = 60; i < 90; ++i) broken[i] = static_cast<char>(0xff);  // inside the deflate stream
  auto r = ParseNpz(broken, "bad.npz");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kCorruption);
  EXPECT_NE(r.status().message().find("bad.npz"), std::string::npos);
  EXPECT_NE(r.status().message().find("'x.npy'"), std::string::npos) << r.status().message();
}

}  // namespace
}  // namespace sparq
