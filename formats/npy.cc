// .npy / .npz reading and writing (format: numpy/lib/format.py).
//
//   .npy file
//   +-----------+-------+-------+------------+----------------------------+------+
//   | \x93NUMPY | major | minor | header_len | {'descr': '<f4', ...}    \n | data |
//   +-----------+-------+-------+------------+----------------------------+------+
//     6 bytes     1       1       2 (v1) or    header_len bytes, padded     numel *
//                                 4 (v2, v3)   with spaces to 64 bytes      itemsize
//
// The header is a Python dict literal with exactly the keys 'descr' (a dtype
// string such as '<f4'), 'fortran_order' and 'shape' (a tuple of ints).
#include "sparq/npy.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <set>

#include "formats/zip.h"
#include "sparq/file_io.h"
#include "sparq/onnx_io.h"

namespace sparq {
namespace {

namespace fs = std::filesystem;

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicSize = 6;
constexpr size_t kMaxRank = 64;             // numpy allows 64 dims
constexpr int64_t kMaxDim = int64_t{1} << 56;  // larger dims are rejected while parsing the header

bool HostIsLittleEndian() {
  const uint16_t probe = 1;
  uint8_t first;
  std::memcpy(&first, &probe, 1);
  return first == 1;
}

// One row per numpy type code sparq stores: '<f4' is {'f', 4}.
struct NpyType {
  char kind;  // 'f' float, 'i' signed int, 'u' unsigned int, 'b' bool
  size_t size;
  DataType dtype;
};
constexpr NpyType kNpyTypes[] = {
    {'f', 2, DataType::kFloat16}, {'f', 4, DataType::kFloat32}, {'f', 8, DataType::kFloat64},
    {'i', 1, DataType::kInt8},    {'i', 2, DataType::kInt16},   {'i', 4, DataType::kInt32},
    {'i', 8, DataType::kInt64},   {'u', 1, DataType::kUInt8},   {'u', 2, DataType::kUInt16},
    {'u', 4, DataType::kUInt32},  {'u', 8, DataType::kUInt64},  {'b', 1, DataType::kBool},
};

// A dtype descriptor parsed from 'descr'.
struct Descr {
  DataType dtype = DataType::kUndefined;
  bool big_endian = false;
};

StatusOr<Descr> ParseDescr(const std::string& descr, const std::string& what) {
  const std::string unsupported = what + ": numpy dtype '" + descr + "' is not supported";
  if (descr.size() < 3) return Status::NotSupported(unsupported);
  char order = descr[0];
  char kind = descr[1] == '?' ? 'b' : descr[1];
  if (order != '<' && order != '>' && order != '|' && order != '=') return Status::NotSupported(unsupported);
  size_t size = 0;
  for (size_t i = 2; i < descr.size(); ++i) {
    if (descr[i] < '0' || descr[i] > '9' || size > 1000) return Status::NotSupported(unsupported);
    size = size * 10 + static_cast<size_t>(descr[i] - '0');
  }
  for (const NpyType& t : kNpyTypes) {
    if (t.kind == kind && t.size == size) {
      Descr d;
      d.dtype = t.dtype;
      d.big_endian = order == '>' && size > 1;
      return d;
    }
  }
  if (kind == 'c') return Status::NotSupported(unsupported + " (complex numbers)");
  if (kind == 'O') return Status::NotSupported(unsupported + " (object arrays need pickle)");
  if (kind == 'U' || kind == 'S') return Status::NotSupported(unsupported + " (strings)");
  return Status::NotSupported(unsupported);
}

// The numpy descr of `dtype`, such as "<f4"; empty when numpy has none.
std::string DescrOf(DataType dtype) {
  for (const NpyType& t : kNpyTypes) {
    if (t.dtype == dtype) return std::string(t.size == 1 ? "|" : "<") + t.kind + std::to_string(t.size);
  }
  return "";
}

// A reader for the Python literal of the header dict.
class HeaderParser {
 public:
  HeaderParser(std::string_view text, const std::string& what) : s_(text), what_(what) {}

  Status Parse(std::string* descr, bool* fortran_order, Shape* shape) {
    bool seen_descr = false, seen_order = false, seen_shape = false;
    SkipSpace();
    if (!Eat('{')) return Error("expected '{'");
    while (true) {
      SkipSpace();
      if (Eat('}')) break;
      std::string key;
      SPARQ_RETURN_IF_ERROR(ParseString(&key));
      SkipSpace();
      if (!Eat(':')) return Error("expected ':' after '" + key + "'");
      SkipSpace();
      if (key == "descr" && !seen_descr) {
        seen_descr = true;
        if (Peek() == '[') {
          return Status::NotSupported(what_ + ": structured numpy dtypes (record arrays) are not supported");
        }
        SPARQ_RETURN_IF_ERROR(ParseString(descr));
      } else if (key == "fortran_order" && !seen_order) {
        seen_order = true;
        SPARQ_RETURN_IF_ERROR(ParseBool(fortran_order));
      } else if (key == "shape" && !seen_shape) {
        seen_shape = true;
        SPARQ_RETURN_IF_ERROR(ParseShape(shape));
      } else {
        return Error("unexpected or repeated key '" + key + "'");
      }
      SkipSpace();
      if (Eat(',')) continue;
      SkipSpace();
      if (Eat('}')) break;
      return Error("expected ',' or '}'");
    }
    SkipSpace();
    if (pos_ != s_.size()) return Error("unexpected text after the closing '}'");
    if (!seen_descr || !seen_order || !seen_shape) {
      return Error(std::string("missing key '") + (!seen_descr ? "descr" : !seen_order ? "fortran_order" : "shape") +
                   "'");
    }
    return Status::OK();
  }

 private:
  char Peek() const { return pos_ < s_.size() ? s_[pos_] : '\0'; }
  bool Eat(char c) {
    if (Peek() != c || pos_ >= s_.size()) return false;
    ++pos_;
    return true;
  }
  void SkipSpace() {
    while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\n' || s_[pos_] == '\t' || s_[pos_] == '\r')) ++pos_;
  }
  Status Error(const std::string& why) const {
    return Status::Corruption(what_ + ": bad .npy header at character " + std::to_string(pos_) + ": " + why);
  }
  Status ParseString(std::string* out) {
    char quote = Peek();
    if (quote != '\'' && quote != '"') return Error("expected a quoted string");
    ++pos_;
    size_t end = s_.find(quote, pos_);
    if (end == std::string_view::npos) return Error("unterminated string");
    *out = std::string(s_.substr(pos_, end - pos_));
    if (out->find('\\') != std::string::npos) return Error("escapes in strings are not supported");
    pos_ = end + 1;
    return Status::OK();
  }
  Status ParseBool(bool* out) {
    if (s_.substr(pos_, 4) == "True") {
      *out = true;
      pos_ += 4;
    } else if (s_.substr(pos_, 5) == "False") {
      *out = false;
      pos_ += 5;
    } else {
      return Error("expected True or False");
    }
    return Status::OK();
  }
  Status ParseShape(Shape* shape) {
    shape->clear();
    if (!Eat('(')) return Error("expected '(' to start the shape");
    while (true) {
      SkipSpace();
      if (Eat(')')) return Status::OK();
      if (Peek() < '0' || Peek() > '9') return Error("expected a non-negative integer in the shape");
      int64_t dim = 0;
      while (Peek() >= '0' && Peek() <= '9') {
        dim = dim * 10 + (Peek() - '0');
        if (dim > kMaxDim) return Error("shape dimension is too large");
        ++pos_;
      }
      Eat('L');  // Python 2 long suffix, as old numpy wrote
      if (shape->size() == kMaxRank) return Error("more than " + std::to_string(kMaxRank) + " dimensions");
      shape->push_back(dim);
      SkipSpace();
      if (Eat(',')) continue;
      SkipSpace();
      if (Eat(')')) return Status::OK();
      return Error("expected ',' or ')' in the shape");
    }
  }

  std::string_view s_;
  const std::string& what_;
  size_t pos_ = 0;
};

// Bytes of data that `shape` x `dtype` needs, or an error on overflow.
StatusOr<uint64_t> DataBytes(const Shape& shape, DataType dtype, const std::string& what) {
  uint64_t n = DataTypeSize(dtype);
  for (int64_t d : shape) {
    if (d != 0 && n > std::numeric_limits<uint64_t>::max() / 4 / static_cast<uint64_t>(d)) {
      return Status::Corruption(what + ": shape " + ShapeToString(shape) + " is too large");
    }
    n *= static_cast<uint64_t>(d);
  }
  return n;
}

Tensor TensorFromBytes(const NpyHeader& h, bool big_endian, const char* data) {
  Tensor t(h.dtype, h.shape);
  if (t.nbytes() > 0) std::memcpy(t.raw_data(), data, t.nbytes());
  const size_t size = DataTypeSize(h.dtype);
  if (big_endian) {
    auto* p = static_cast<uint8_t*>(t.raw_data());
    for (size_t i = 0; i < t.nbytes(); i += size)
      for (size_t a = 0, b = size - 1; a < b; ++a, --b) std::swap(p[i + a], p[i + b]);
  }
  if (h.dtype == DataType::kBool) {  // numpy bools are any non-zero byte; sparq's are 0 or 1
    auto* p = static_cast<uint8_t*>(t.raw_data());
    for (size_t i = 0; i < t.nbytes(); ++i) p[i] = p[i] != 0 ? 1 : 0;
  }
  return t;
}

// Parses the header and reports whether the data is big-endian.
StatusOr<NpyHeader> ParseHeaderImpl(std::string_view bytes, const std::string& what, bool* big_endian) {
  if (!HostIsLittleEndian()) return Status::NotSupported("reading .npy files needs a little-endian host");
  if (bytes.size() < kMagicSize || std::memcmp(bytes.data(), kMagic, kMagicSize) != 0) {
    return Status::Corruption(what + ": not a .npy file (bad magic; expected \\x93NUMPY)");
  }
  if (bytes.size() < kMagicSize + 4) return Status::Corruption(what + ": .npy file truncated in its preamble");
  NpyHeader h;
  h.major_version = static_cast<uint8_t>(bytes[6]);
  h.minor_version = static_cast<uint8_t>(bytes[7]);
  if (h.minor_version != 0 || h.major_version < 1 || h.major_version > 3) {
    return Status::NotSupported(what + ": .npy format version " + std::to_string(h.major_version) + "." +
                                std::to_string(h.minor_version) + " is not supported (1.0, 2.0 and 3.0 are)");
  }
  size_t len_size = h.major_version == 1 ? 2 : 4;
  if (bytes.size() < kMagicSize + 2 + len_size) return Status::Corruption(what + ": .npy file truncated in its preamble");
  uint64_t header_len = 0;
  for (size_t i = 0; i < len_size; ++i) header_len |= static_cast<uint64_t>(static_cast<uint8_t>(bytes[8 + i])) << (8 * i);
  uint64_t start = kMagicSize + 2 + len_size;
  if (header_len > bytes.size() - start) {
    return Status::Corruption(what + ": .npy header is truncated (header length " + std::to_string(header_len) +
                              ", only " + std::to_string(bytes.size() - start) + " bytes follow)");
  }
  h.data_offset = static_cast<size_t>(start + header_len);
  std::string descr;
  bool fortran = false;
  HeaderParser parser(bytes.substr(start, header_len), what);
  SPARQ_RETURN_IF_ERROR(parser.Parse(&descr, &fortran, &h.shape));
  SPARQ_ASSIGN_OR_RETURN(Descr d, ParseDescr(descr, what));
  if (fortran) {
    int64_t non_trivial = 0;
    for (int64_t dim : h.shape) non_trivial += dim > 1 ? 1 : 0;
    if (non_trivial > 1) {  // 0-d and 1-d arrays are the same in both orders
      return Status::NotSupported(what + ": Fortran-order arrays are not supported; save with "
                                         "np.ascontiguousarray(a)");
    }
  }
  h.dtype = d.dtype;
  *big_endian = d.big_endian;
  return h;
}

}  // namespace

StatusOr<NpyHeader> ParseNpyHeader(std::string_view bytes, const std::string& what) {
  bool big_endian = false;
  return ParseHeaderImpl(bytes, what, &big_endian);
}

StatusOr<Tensor> ParseNpy(std::string_view bytes, const std::string& what) {
  bool big_endian = false;
  SPARQ_ASSIGN_OR_RETURN(NpyHeader h, ParseHeaderImpl(bytes, what, &big_endian));
  SPARQ_ASSIGN_OR_RETURN(uint64_t need, DataBytes(h.shape, h.dtype, what));
  uint64_t have = bytes.size() - h.data_offset;
  if (have != need) {
    return Status::Corruption(what + ": header says " + DataTypeName(h.dtype) + ShapeToString(h.shape) + " (" +
                              std::to_string(need) + " bytes of data) but the file has " + std::to_string(have) +
                              " bytes after the header" + (have < need ? " (truncated file?)" : ""));
  }
  return TensorFromBytes(h, big_endian, bytes.data() + h.data_offset);
}

StatusOr<Tensor> ReadNpy(const std::string& path) {
  SPARQ_ASSIGN_OR_RETURN(std::string bytes, ReadFile(path));
  return ParseNpy(bytes, path);
}

StatusOr<NpyHeader> ReadNpyHeader(const std::string& path) {
  std::error_code ec;
  if (!fs::exists(path, ec)) return Status::NotFound("file not found: " + path);
  if (fs::is_directory(path, ec)) return Status::InvalidArgument(path + " is a folder, not a file");
  uint64_t file_size = fs::file_size(path, ec);
  if (ec) return Status::IOError("cannot get the size of " + path + ": " + ec.message());
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::IOError("cannot open " + path + ": " + std::strerror(errno));
  // Read the preamble to learn the header length, then the header.
  std::string head(12, '\0');
  in.read(head.data(), static_cast<std::streamsize>(head.size()));
  head.resize(static_cast<size_t>(in.gcount()));
  size_t want = head.size();
  if (head.size() >= 10 && std::memcmp(head.data(), kMagic, kMagicSize) == 0) {
    uint64_t len = static_cast<uint8_t>(head[8]) | (static_cast<uint64_t>(static_cast<uint8_t>(head[9])) << 8);
    size_t start = 10;
    if (head[6] != 1 && head.size() >= 12) {
      len |= (static_cast<uint64_t>(static_cast<uint8_t>(head[10])) << 16) |
             (static_cast<uint64_t>(static_cast<uint8_t>(head[11])) << 24);
      start = 12;
    }
    want = static_cast<size_t>(std::min<uint64_t>(start + len, file_size));
  }
  if (want > head.size()) {
    size_t had = head.size();
    head.resize(want);
    in.read(head.data() + had, static_cast<std::streamsize>(want - had));
    head.resize(had + static_cast<size_t>(in.gcount()));
  }
  bool big_endian = false;
  SPARQ_ASSIGN_OR_RETURN(NpyHeader h, ParseHeaderImpl(head, path, &big_endian));
  SPARQ_ASSIGN_OR_RETURN(uint64_t need, DataBytes(h.shape, h.dtype, path));
  if (file_size - h.data_offset != need) {
    return Status::Corruption(path + ": header says " + DataTypeName(h.dtype) + ShapeToString(h.shape) + " (" +
                              std::to_string(need) + " bytes of data) but the file has " +
                              std::to_string(file_size - h.data_offset) + " bytes after the header");
  }
  return h;
}

StatusOr<std::string> SerializeNpy(const Tensor& t) {
  const std::string descr = DescrOf(t.dtype());
  if (descr.empty()) {
    return Status::NotSupported("cannot write a " + DataTypeName(t.dtype()) +
                                " tensor as .npy: numpy has no such type (cast it to float32 first)");
  }
  if (!HostIsLittleEndian()) return Status::NotSupported("writing .npy files needs a little-endian host");
  std::string dict = "{'descr': '" + descr + "', 'fortran_order': False, 'shape': (";
  for (size_t i = 0; i < t.rank(); ++i) dict += (i ? ", " : "") + std::to_string(t.dim(i));
  dict += t.rank() == 1 ? ",), }" : "), }";
  // Pad with spaces and end with '\n' so that the data starts 64-byte aligned.
  int major = 1;
  size_t preamble = kMagicSize + 2 + 2;
  size_t total = ((preamble + dict.size() + 1 + 63) / 64) * 64;
  if (total - preamble > 0xffff) {
    major = 2;
    preamble = kMagicSize + 2 + 4;
    total = ((preamble + dict.size() + 1 + 63) / 64) * 64;
  }
  const size_t header_len = total - preamble;
  dict.append(header_len - dict.size() - 1, ' ');
  dict += '\n';
  std::string out(kMagic, kMagicSize);
  out += static_cast<char>(major);
  out += '\0';
  for (size_t i = 0; i < (major == 1 ? 2u : 4u); ++i) out += static_cast<char>((header_len >> (8 * i)) & 0xff);
  out += dict;
  out.append(static_cast<const char*>(t.raw_data()), t.nbytes());
  return out;
}

Status WriteNpy(const std::string& path, const Tensor& t) {
  auto bytes = SerializeNpy(t);
  if (!bytes.ok()) return bytes.status().WithContext(path);
  return WriteFileAtomically(path, *bytes);
}

StatusOr<NamedTensors> ParseNpz(std::string_view bytes, const std::string& what) {
  SPARQ_ASSIGN_OR_RETURN(std::vector<zip::ZipEntry> entries, zip::ListEntries(bytes, what));
  NamedTensors arrays;
  std::set<std::string> seen;
  std::string storage;
  for (const zip::ZipEntry& e : entries) {
    if (!e.name.empty() && e.name.back() == '/') continue;  // a folder entry
    const size_t n = e.name.size();
    if (n < 4 || e.name.compare(n - 4, 4, ".npy") != 0) {
      return Status::NotSupported(what + ": member '" + e.name + "' is not a .npy array");
    }
    std::string key = e.name.substr(0, n - 4);
    if (!seen.insert(key).second) return Status::Corruption(what + ": array '" + key + "' appears twice");
    SPARQ_ASSIGN_OR_RETURN(std::string_view member, zip::ReadEntry(bytes, e, what, &storage));
    SPARQ_ASSIGN_OR_RETURN(Tensor t, ParseNpy(member, what + ":" + e.name));
    arrays.emplace_back(std::move(key), std::move(t));
  }
  return arrays;
}

StatusOr<NamedTensors> ReadNpz(const std::string& path) {
  SPARQ_ASSIGN_OR_RETURN(std::string bytes, ReadFile(path));
  return ParseNpz(bytes, path);
}

StatusOr<std::string> SerializeNpz(const NamedTensors& arrays) {
  zip::ZipWriter writer;
  std::set<std::string> seen;
  for (const auto& [name, t] : arrays) {
    if (name.empty()) return Status::InvalidArgument("cannot write an array with an empty name to .npz");
    if (!seen.insert(name).second) return Status::InvalidArgument("array name '" + name + "' appears twice");
    auto npy = SerializeNpy(t);
    if (!npy.ok()) return npy.status().WithContext("array '" + name + "'");
    writer.Add(name + ".npy", *npy);
  }
  return writer.Finish();
}

Status WriteNpz(const std::string& path, const NamedTensors& arrays) {
  auto bytes = SerializeNpz(arrays);
  if (!bytes.ok()) return bytes.status().WithContext(path);
  return WriteFileAtomically(path, *bytes);
}

StatusOr<NamedTensors> ReadArrays(const std::string& path) {
  const fs::path p(path);
  const std::string ext = p.extension().string();
  if (ext == ".npz") return ReadNpz(path);
  if (ext == ".npy") {
    SPARQ_ASSIGN_OR_RETURN(Tensor t, ReadNpy(path));
    NamedTensors one;
    one.emplace_back(p.stem().string(), std::move(t));
    return one;
  }
  return Status::InvalidArgument(path + ": expected a .npy or .npz file");
}

namespace {

// A read-only memory map of a whole file (the .npz directory is read through
// it; only the pages touched become resident).
class MappedFile {
 public:
  ~MappedFile() {
    if (data_ != nullptr) munmap(data_, size_);
  }
  Status Open(const std::string& path) {
    std::error_code ec;
    size_ = static_cast<size_t>(fs::file_size(path, ec));
    if (ec) return Status::NotFound("file not found: " + path);
    if (size_ == 0) return Status::Corruption(path + " is empty");
    std::FILE* f = std::fopen(path.c_str(), "rb");
    if (f == nullptr) return Status::IOError("cannot open " + path + ": " + std::strerror(errno));
    void* p = mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fileno(f), 0);
    std::fclose(f);
    if (p == MAP_FAILED) return Status::IOError("cannot map " + path + ": " + std::strerror(errno));
    data_ = p;
    return Status::OK();
  }
  std::string_view view() const { return {static_cast<const char*>(data_), size_}; }
  // Lets the kernel drop the pages of `part` (a piece of view() already
  // read): they are read again from the file if touched again.
  void Drop(std::string_view part) const {
    const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
    const uintptr_t begin = (reinterpret_cast<uintptr_t>(part.data()) + page - 1) / page * page;
    const uintptr_t end = (reinterpret_cast<uintptr_t>(part.data()) + part.size()) / page * page;
    if (end > begin) madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED);
  }

 private:
  void* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace

StatusOr<std::vector<NpyArrayRef>> LocateArrays(const std::string& path) {
  const fs::path p(path);
  const std::string ext = p.extension().string();
  std::vector<NpyArrayRef> out;
  if (ext == ".npy") {
    SPARQ_ASSIGN_OR_RETURN(NpyHeader h, ReadNpyHeader(path));  // checks the data size against the file
    std::string head(h.data_offset, '\0');
    std::ifstream in(path, std::ios::binary);
    in.read(head.data(), static_cast<std::streamsize>(head.size()));
    NpyArrayRef a{p.stem().string(), path, path, h, false};
    SPARQ_RETURN_IF_ERROR(ParseHeaderImpl(head, path, &a.big_endian).status());
    out.push_back(std::move(a));
    return out;
  }
  if (ext != ".npz") return Status::InvalidArgument(path + ": expected a .npy or .npz file");
  MappedFile file;
  SPARQ_RETURN_IF_ERROR(file.Open(path));
  const std::string_view bytes = file.view();
  SPARQ_ASSIGN_OR_RETURN(std::vector<zip::ZipEntry> entries, zip::ListEntries(bytes, path));
  std::set<std::string> seen;
  for (const zip::ZipEntry& e : entries) {
    if (!e.name.empty() && e.name.back() == '/') continue;  // a folder entry
    const size_t n = e.name.size();
    if (n < 4 || e.name.compare(n - 4, 4, ".npy") != 0) {
      return Status::NotSupported(path + ": member '" + e.name + "' is not a .npy array");
    }
    const std::string what = path + ":" + e.name;
    if (e.method != 0) return Status::NotSupported(what + " is compressed: it can only be read whole");
    std::string key = e.name.substr(0, n - 4);
    if (!seen.insert(key).second) return Status::Corruption(path + ": array '" + key + "' appears twice");
    SPARQ_ASSIGN_OR_RETURN(std::string_view member, zip::StoredEntry(bytes, e, path));
    // The CRC a window at a time, each window's pages dropped once read: the
    // rows are read later, a batch at a time, so this pass leaves nothing
    // resident (a 150 MB archive otherwise added 150 MB to the peak RSS).
    constexpr size_t kWindow = size_t{4} << 20;
    uint32_t crc = 0;
    for (size_t off = 0; off < member.size(); off += kWindow) {
      const std::string_view window = member.substr(off, kWindow);
      crc = zip::Crc32(window, crc);
      file.Drop(window);
    }
    if (crc != e.crc32) {
      char buf[64];
      std::snprintf(buf, sizeof(buf), "CRC-32 mismatch (stored %08x, computed %08x)", e.crc32, crc);
      return Status::Corruption(what + ": " + buf);
    }
    NpyArrayRef a{std::move(key), path, what, {}, false};
    SPARQ_ASSIGN_OR_RETURN(a.header, ParseHeaderImpl(member, what, &a.big_endian));
    SPARQ_ASSIGN_OR_RETURN(uint64_t need, DataBytes(a.header.shape, a.header.dtype, what));
    if (member.size() - a.header.data_offset != need) {
      return Status::Corruption(what + ": header says " + DataTypeName(a.header.dtype) + ShapeToString(a.header.shape) +
                                " (" + std::to_string(need) + " bytes of data) but the member has " +
                                std::to_string(member.size() - a.header.data_offset) + " bytes after the header");
    }
    a.header.data_offset += static_cast<size_t>(member.data() - bytes.data());
    out.push_back(std::move(a));
  }
  return out;
}

StatusOr<Tensor> ReadArrayRows(const NpyArrayRef& array, int64_t begin, int64_t count) {
  NpyHeader h = array.header;
  const Shape full = h.shape;
  h.shape[0] = count;
  const uint64_t row_bytes = full[0] > 0 ? DataBytes(full, h.dtype, array.what).value() / static_cast<uint64_t>(full[0]) : 0;
  std::string bytes(static_cast<size_t>(row_bytes * static_cast<uint64_t>(count)), '\0');
  std::ifstream in(array.path, std::ios::binary);
  in.seekg(static_cast<std::streamoff>(h.data_offset + row_bytes * static_cast<uint64_t>(begin)));
  in.read(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!in || static_cast<size_t>(in.gcount()) != bytes.size()) {
    return Status::IOError(array.what + ": cannot read rows " + std::to_string(begin) + ".." +
                           std::to_string(begin + count) + " (file changed or unreadable)");
  }
  return TensorFromBytes(h, array.big_endian, bytes.data());
}

}  // namespace sparq
