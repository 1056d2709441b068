// A minimal ZIP reader and writer, enough for numpy's .npz archives.
//
// Reading: the central directory is the source of truth (local headers may
// carry zeros when a data descriptor follows). Members are stored (method 0)
// or deflated (method 8); ZIP64 sizes and offsets are understood; encryption,
// other methods and multi-disk archives are NotSupported. Every offset and
// length is checked against the archive size and each member's CRC-32 is
// verified, so a malformed archive gives Corruption, never an over-read.
//
// Writing: stored members only, fixed timestamps (1980-01-01) so equal inputs
// give equal bytes; ZIP64 records are added where a size, offset or count
// does not fit the classic fields.
//
// Internal to sparq (not installed); the public API is sparq/npy.h.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "sparq/status.h"

namespace sparq {
namespace zip {

// One member, as listed by the central directory.
struct ZipEntry {
  std::string name;
  uint16_t method = 0;  // 0 = stored, 8 = deflated
  uint16_t flags = 0;   // general purpose bit flag
  uint32_t crc32 = 0;
  uint64_t compressed_size = 0;
  uint64_t uncompressed_size = 0;
  uint64_t data_offset = 0;  // first byte of the member's (compressed) data
};

// Lists the members of `archive`. `what` names the archive in messages.
// Errors: Corruption (bad signatures, offsets or lengths outside the file),
// NotSupported (multi-disk archives).
StatusOr<std::vector<ZipEntry>> ListEntries(std::string_view archive, const std::string& what);

// The uncompressed bytes of `entry`, CRC-checked. Stored members are returned
// as a view into `archive`; deflated members are inflated into `*storage` and
// the view points there. Errors: Corruption (bad deflate stream, size or CRC
// mismatch), NotSupported (encryption, compression methods other than
// stored/deflate).
StatusOr<std::string_view> ReadEntry(std::string_view archive, const ZipEntry& entry, const std::string& what,
                                     std::string* storage);
// The bytes of a stored (uncompressed) member, as a view into `archive`,
// checked as ReadEntry checks them except the CRC, which the caller computes
// (LocateArrays: a window at a time over a memory map, dropping the pages
// behind, so that checking a large file does not make it all resident).
StatusOr<std::string_view> StoredEntry(std::string_view archive, const ZipEntry& entry, const std::string& what);

// Builds an archive of stored members in memory.
class ZipWriter {
 public:
  // Always write ZIP64 records (for tests of the ZIP64 reader; readers accept
  // them for small archives too).
  explicit ZipWriter(bool force_zip64 = false) : force_zip64_(force_zip64) {}

  // Appends a member named `name` holding `data`.
  void Add(const std::string& name, std::string_view data);
  // Writes the central directory and returns the archive bytes; the writer is
  // empty afterwards.
  std::string Finish();

 private:
  struct Written {
    std::string name;
    uint32_t crc32;
    uint64_t size;
    uint64_t local_header_offset;
  };
  bool force_zip64_;
  std::string out_;
  std::vector<Written> written_;
};

// CRC-32 (as zlib's crc32) of `data`, for any size; `previous` continues
// the CRC of the bytes before it (a large member checked a window at a time).
uint32_t Crc32(std::string_view data, uint32_t previous = 0);

}  // namespace zip
}  // namespace sparq
