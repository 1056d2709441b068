// Whole-file reads, mapped regions and atomic writes: every file sparq writes
// goes through WriteFileAtomically or an AtomicFileWriter, so a crash or a
// full disk never leaves a half-written output, and an existing file is
// replaced only by a complete one.
#include "sparq/file_io.h"

#include "core/mapped_pages.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <random>
#include <sstream>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace sparq {
namespace fs = std::filesystem;

StatusOr<std::string> ReadFile(const std::string& path) {
  std::error_code ec;
  if (!fs::exists(path, ec)) return Status::NotFound("file not found: " + path);
  if (fs::is_directory(path, ec)) return Status::InvalidArgument(path + " is a folder, not a file");
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::IOError("cannot open " + path + ": " + std::strerror(errno));
  // One read of the size the file has (a model of 18 MB was 2,300 reads of
  // 8 KiB into a string that doubled five times), then whatever follows if
  // it grew meanwhile; a file without a size (a pipe) is read as a stream.
  const uintmax_t size = fs::file_size(path, ec);
  std::string bytes;
  if (!ec && size > 0) {
    bytes.resize(static_cast<size_t>(size));
    in.read(bytes.data(), static_cast<std::streamsize>(size));
    bytes.resize(static_cast<size_t>(in.gcount()));
    if (in.bad()) return Status::IOError("error reading " + path);
    if (!in.eof()) in.peek();  // sets eof at the end
    if (in.eof()) return bytes;
    in.clear();
  }
  std::ostringstream rest;
  rest << in.rdbuf();
  if (in.bad()) return Status::IOError("error reading " + path);
  return bytes + rest.str();
}

namespace {

// A fresh name beside `target` for its temporary file.
fs::path TemporaryPathFor(const fs::path& target, const fs::path& dir) {
  std::random_device rd;
  return dir / ("." + target.filename().string() + ".tmp" + std::to_string(getpid()) + "-" + std::to_string(rd()));
}

}  // namespace

StatusOr<std::unique_ptr<AtomicFileWriter>> AtomicFileWriter::Open(const std::string& path) {
  fs::path target(path);
  fs::path dir = target.has_parent_path() ? target.parent_path() : fs::path(".");
  std::error_code ec;
  if (!fs::exists(dir, ec)) return Status::NotFound("output folder does not exist: " + dir.string());
  fs::path tmp = TemporaryPathFor(target, dir);
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
  if (fd < 0) return Status::IOError("cannot create " + tmp.string() + ": " + std::strerror(errno));
  return std::unique_ptr<AtomicFileWriter>(new AtomicFileWriter(path, tmp.string(), fd));
}

AtomicFileWriter::~AtomicFileWriter() {
  if (fd_ >= 0) ::close(fd_);
  if (!committed_) ::unlink(tmp_.c_str());
}

Status AtomicFileWriter::Append(const void* data, size_t n) {
  if (failed_ || fd_ < 0) return Status::IOError("error writing " + tmp_ + ": the file is closed or failed before");
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    // write() moves at most ~2 GiB at a time on Linux; ask for 1 GiB.
    const ssize_t w = ::write(fd_, p, std::min<size_t>(n, size_t{1} << 30));
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      failed_ = true;
      return Status::IOError("error writing " + tmp_ + " (disk full?): " + std::strerror(w < 0 ? errno : ENOSPC));
    }
    p += w;
    n -= static_cast<size_t>(w);
    size_ += static_cast<uint64_t>(w);
  }
  return Status::OK();
}

Status AtomicFileWriter::AppendZeros(size_t n) {
  static const char kZeros[4096] = {};
  while (n > 0) {
    const size_t k = std::min(n, sizeof(kZeros));
    SPARQ_RETURN_IF_ERROR(Append(kZeros, k));
    n -= k;
  }
  return Status::OK();
}

Status AtomicFileWriter::Close() {
  if (fd_ < 0) return failed_ ? Status::IOError("error writing " + tmp_) : Status::OK();
  const int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) failed_ = true;
  if (failed_) return Status::IOError("error writing " + tmp_ + " (disk full?)");
  return Status::OK();
}

Status AtomicFileWriter::Commit() {
  if (committed_) return Status::OK();
  SPARQ_RETURN_IF_ERROR(Close());
  std::error_code ec;
  fs::rename(tmp_, target_, ec);
  if (ec) return Status::IOError("cannot rename temporary file to " + target_ + ": " + ec.message());
  committed_ = true;
  return Status::OK();
}

Status WriteFileAtomically(const std::string& path, const std::string& bytes) {
  SPARQ_ASSIGN_OR_RETURN(std::unique_ptr<AtomicFileWriter> w, AtomicFileWriter::Open(path));
  SPARQ_RETURN_IF_ERROR(w->Append(bytes.data(), bytes.size()));
  return w->Commit();
}

namespace {

// Every live MapFileRegion mapping: start -> end address.
struct MappedRanges {
  std::mutex mu;
  std::map<uintptr_t, uintptr_t> ranges;
  static MappedRanges& Get() {
    static MappedRanges* r = new MappedRanges();  // never destroyed: mappings may outlive static destruction
    return *r;
  }
};

}  // namespace

size_t ReclaimMappedPages(const void* data, size_t bytes) {
#ifdef MADV_PAGEOUT
  const uintptr_t page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const uintptr_t begin = reinterpret_cast<uintptr_t>(data), end = begin + bytes;
  {
    MappedRanges& m = MappedRanges::Get();
    std::lock_guard<std::mutex> lock(m.mu);
    auto it = m.ranges.upper_bound(begin);
    if (it == m.ranges.begin()) return 0;
    --it;
    if (begin < it->first || end > it->second) return 0;
  }
  // Whole pages inside the range only: a page shared with a neighbour stays.
  const uintptr_t first = (begin + page - 1) / page * page, last = end / page * page;
  if (last <= first) return 0;
  if (::madvise(reinterpret_cast<void*>(first), last - first, MADV_PAGEOUT) != 0) return 0;
  return last - first;
#else
  (void)data;
  (void)bytes;
  return 0;
#endif
}

StatusOr<MappedRegion> MapFileRegion(const std::string& path, uint64_t offset, uint64_t length) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return Status::NotFound("file not found: " + path);
    return Status::IOError("cannot open " + path + ": " + std::strerror(errno));
  }
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    const int e = errno;
    ::close(fd);
    return Status::IOError("cannot stat " + path + ": " + std::strerror(e));
  }
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  if (offset > size || size - offset < length) {
    ::close(fd);
    return Status::Corruption(path + " is truncated (wanted " + std::to_string(length) + " bytes at offset " +
                              std::to_string(offset) + ", file has " + std::to_string(size) + ")");
  }
  MappedRegion r;
  if (length == 0) {
    ::close(fd);
    return r;
  }
  const uint64_t page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  const uint64_t start = offset / page * page;
  const size_t span = static_cast<size_t>(offset - start + length);
  void* base = ::mmap(nullptr, span, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, static_cast<off_t>(start));
  const int e = errno;
  ::close(fd);  // the mapping keeps the file
  if (base == MAP_FAILED) return Status::IOError("cannot map " + path + ": " + std::strerror(e));
  const uintptr_t key = reinterpret_cast<uintptr_t>(base);
  {
    MappedRanges& m = MappedRanges::Get();
    std::lock_guard<std::mutex> lock(m.mu);
    m.ranges[key] = key + span;
  }
  r.owner = std::shared_ptr<const void>(base, [span, key](const void* p) {
    {
      MappedRanges& m = MappedRanges::Get();
      std::lock_guard<std::mutex> lock(m.mu);
      m.ranges.erase(key);
    }
    ::munmap(const_cast<void*>(p), span);
  });
  r.data = static_cast<char*>(base) + (offset - start);
  return r;
}

}  // namespace sparq
