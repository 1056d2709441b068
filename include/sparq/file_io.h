// Reading and writing whole files.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "sparq/export.h"
#include "sparq/status.h"

namespace sparq {

// Writes `bytes` to `path` through a temporary file in the same folder and a
// rename, so `path` holds either its old content or all of `bytes`, never a
// part. Errors: NotFound when the folder does not exist, IOError otherwise
// (the temporary file is removed).
SPARQ_API Status WriteFileAtomically(const std::string& path, const std::string& bytes);

// WriteFileAtomically in pieces, for outputs too large to hold in memory
// (a model's external data): Append writes to a temporary file in the
// target's folder, Close flushes and closes it, Commit renames it onto the
// target. Until Commit succeeds the target keeps its old content (or stays
// absent); a writer destroyed before Commit removes its temporary file. Two
// writers closed before either commits make a pair of files (a model and its
// data) that fail together on every error but the final renames.
// Not thread-safe; one writer per output.
class SPARQ_API AtomicFileWriter {
 public:
  // Creates the temporary file. Errors: NotFound when the folder does not
  // exist, IOError when the file cannot be created.
  static StatusOr<std::unique_ptr<AtomicFileWriter>> Open(const std::string& path);
  ~AtomicFileWriter();
  AtomicFileWriter(const AtomicFileWriter&) = delete;
  AtomicFileWriter& operator=(const AtomicFileWriter&) = delete;

  // Appends `n` bytes. IOError (naming the file; "disk full?") when the
  // write fails; every later call then fails too.
  Status Append(const void* data, size_t n);
  // Appends `n` zero bytes.
  Status AppendZeros(size_t n);
  // Bytes appended so far.
  uint64_t size() const { return size_; }
  // Flushes and closes the temporary file (a failed flush or close is IOError).
  Status Close();
  // Close (when not yet closed), then renames onto the target.
  Status Commit();

 private:
  AtomicFileWriter(std::string target, std::string tmp, int fd) : target_(std::move(target)), tmp_(std::move(tmp)), fd_(fd) {}
  std::string target_, tmp_;
  int fd_ = -1;
  uint64_t size_ = 0;
  bool failed_ = false, committed_ = false;
};

// Reads a whole file. Errors: NotFound, InvalidArgument for a folder, IOError.
SPARQ_API StatusOr<std::string> ReadFile(const std::string& path);

// Maps `length` bytes of `path` from `offset` into memory, private and
// copy-on-write: the file is never written (a stray write to the memory gets
// a private page), and the mapping is undone when the last copy of the
// returned handle goes. The returned pointer is `offset` mod the page size
// past a page boundary. Errors: NotFound, Corruption when the file is shorter
// than offset + length, IOError when the map fails.
// The file must not shrink while mapped (reading a page past its new end
// raises SIGBUS): sparq replaces files by rename, which keeps the old mapping.
struct SPARQ_API MappedRegion {
  std::shared_ptr<const void> owner;  // unmaps when the last copy goes
  void* data = nullptr;               // the first byte at `offset`
};
SPARQ_API StatusOr<MappedRegion> MapFileRegion(const std::string& path, uint64_t offset, uint64_t length);

}  // namespace sparq
