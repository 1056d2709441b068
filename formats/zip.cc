#include "formats/zip.h"

#include <zlib.h>

#include <algorithm>
#include <cstdio>
#include <limits>

namespace sparq {
namespace zip {
namespace {

// Record signatures and fixed sizes (APPNOTE.TXT 6.3).
constexpr uint32_t kLocalHeaderSig = 0x04034b50;
constexpr uint32_t kCentralHeaderSig = 0x02014b50;
constexpr uint32_t kEndOfCentralDirSig = 0x06054b50;
constexpr uint32_t kZip64EndOfCentralDirSig = 0x06064b50;
constexpr uint32_t kZip64LocatorSig = 0x07064b50;
constexpr size_t kLocalHeaderSize = 30;
constexpr size_t kCentralHeaderSize = 46;
constexpr size_t kEndOfCentralDirSize = 22;
constexpr size_t kZip64EndOfCentralDirSize = 56;
constexpr size_t kZip64LocatorSize = 20;
constexpr uint16_t kZip64ExtraId = 0x0001;
constexpr uint32_t kMax32 = 0xffffffffu;
constexpr uint16_t kMax16 = 0xffffu;
constexpr uint16_t kFlagEncrypted = 0x0001;
constexpr uint16_t kFlagUtf8Name = 0x0800;
// Deflate cannot expand data by more than about 1032:1; a larger claimed
// ratio means a corrupt size field (and would make us allocate for nothing).
constexpr uint64_t kMaxDeflateRatio = 1040;

uint16_t Get16(std::string_view s, size_t at) {
  return static_cast<uint16_t>(static_cast<uint8_t>(s[at]) | (static_cast<uint8_t>(s[at + 1]) << 8));
}
uint32_t Get32(std::string_view s, size_t at) {
  return static_cast<uint32_t>(Get16(s, at)) | (static_cast<uint32_t>(Get16(s, at + 2)) << 16);
}
uint64_t Get64(std::string_view s, size_t at) {
  return static_cast<uint64_t>(Get32(s, at)) | (static_cast<uint64_t>(Get32(s, at + 4)) << 32);
}

void Put16(std::string& out, uint16_t v) {
  out.push_back(static_cast<char>(v & 0xff));
  out.push_back(static_cast<char>(v >> 8));
}
void Put32(std::string& out, uint32_t v) {
  Put16(out, static_cast<uint16_t>(v & 0xffff));
  Put16(out, static_cast<uint16_t>(v >> 16));
}
void Put64(std::string& out, uint64_t v) {
  Put32(out, static_cast<uint32_t>(v & kMax32));
  Put32(out, static_cast<uint32_t>(v >> 32));
}

// True when [offset, offset + length) lies inside a buffer of `size` bytes.
bool InBounds(uint64_t offset, uint64_t length, uint64_t size) {
  return offset <= size && length <= size - offset;
}

// The 64-bit values of a central directory entry whose classic fields hold
// the 0xffffffff sentinel, taken from its ZIP64 extra field.
Status ApplyZip64Extra(std::string_view extra, ZipEntry& e, uint64_t& local_offset, bool need_usize,
                       bool need_csize, bool need_offset, const std::string& where) {
  size_t at = 0;
  while (at + 4 <= extra.size()) {
    uint16_t id = Get16(extra, at);
    uint16_t len = Get16(extra, at + 2);
    at += 4;
    if (len > extra.size() - at) return Status::Corruption(where + ": extra field runs past its end");
    if (id == kZip64ExtraId) {
      std::string_view field = extra.substr(at, len);
      size_t pos = 0;
      auto take = [&](uint64_t& dst) -> bool {
        if (pos + 8 > field.size()) return false;
        dst = Get64(field, pos);
        pos += 8;
        return true;
      };
      if ((need_usize && !take(e.uncompressed_size)) || (need_csize && !take(e.compressed_size)) ||
          (need_offset && !take(local_offset))) {
        return Status::Corruption(where + ": ZIP64 extra field is too short for the sizes it must hold");
      }
      return Status::OK();
    }
    at += len;
  }
  if (need_usize || need_csize || need_offset) {
    return Status::Corruption(where + ": sizes are marked as ZIP64 but the ZIP64 extra field is missing");
  }
  return Status::OK();
}

// Where the central directory is and how many entries it holds.
struct Directory {
  uint64_t offset = 0;
  uint64_t size = 0;
  uint64_t entries = 0;
};

StatusOr<Directory> FindDirectory(std::string_view a, const std::string& what) {
  if (a.size() < kEndOfCentralDirSize) {
    return Status::Corruption(what + ": not a ZIP archive (" + std::to_string(a.size()) +
                              " bytes, too short for an end-of-central-directory record)");
  }
  // The end record sits at the end, followed by a comment of up to 64 KiB.
  size_t lowest = a.size() > kEndOfCentralDirSize + kMax16 ? a.size() - kEndOfCentralDirSize - kMax16 : 0;
  size_t eocd = std::string_view::npos;
  for (size_t pos = a.size() - kEndOfCentralDirSize + 1; pos-- > lowest;) {
    if (Get32(a, pos) == kEndOfCentralDirSig && pos + kEndOfCentralDirSize + Get16(a, pos + 20) <= a.size()) {
      eocd = pos;
      break;
    }
  }
  if (eocd == std::string_view::npos) {
    return Status::Corruption(what + ": not a ZIP archive (no end-of-central-directory record; truncated file?)");
  }
  if (Get16(a, eocd + 4) != 0 || Get16(a, eocd + 6) != 0) {
    return Status::NotSupported(what + ": multi-disk ZIP archives are not supported");
  }
  Directory d;
  d.entries = Get16(a, eocd + 10);
  d.size = Get32(a, eocd + 12);
  d.offset = Get32(a, eocd + 16);
  if (eocd >= kZip64LocatorSize && Get32(a, eocd - kZip64LocatorSize) == kZip64LocatorSig) {
    size_t loc = eocd - kZip64LocatorSize;
    uint64_t rec = Get64(a, loc + 8);
    if (!InBounds(rec, kZip64EndOfCentralDirSize, a.size()) || Get32(a, rec) != kZip64EndOfCentralDirSig) {
      return Status::Corruption(what + ": ZIP64 end-of-central-directory record not found where its locator points");
    }
    if (Get32(a, rec + 16) != 0 || Get32(a, rec + 20) != 0) {
      return Status::NotSupported(what + ": multi-disk ZIP archives are not supported");
    }
    d.entries = Get64(a, rec + 32);
    d.size = Get64(a, rec + 40);
    d.offset = Get64(a, rec + 48);
  }
  if (!InBounds(d.offset, d.size, a.size())) {
    return Status::Corruption(what + ": central directory (offset " + std::to_string(d.offset) + ", " +
                              std::to_string(d.size) + " bytes) lies outside the " + std::to_string(a.size()) +
                              "-byte file");
  }
  if (d.entries > d.size / kCentralHeaderSize) {
    return Status::Corruption(what + ": central directory claims " + std::to_string(d.entries) +
                              " entries but has room for " + std::to_string(d.size / kCentralHeaderSize));
  }
  return d;
}

}  // namespace

uint32_t Crc32(std::string_view data, uint32_t previous) {
  uLong crc = previous;
  const auto* p = reinterpret_cast<const Bytef*>(data.data());
  size_t left = data.size();
  while (left > 0) {
    uInt chunk = static_cast<uInt>(std::min<size_t>(left, 1u << 30));
    crc = crc32(crc, p, chunk);
    p += chunk;
    left -= chunk;
  }
  return static_cast<uint32_t>(crc);
}

StatusOr<std::vector<ZipEntry>> ListEntries(std::string_view a, const std::string& what) {
  SPARQ_ASSIGN_OR_RETURN(Directory d, FindDirectory(a, what));
  std::string_view cd = a.substr(d.offset, d.size);
  std::vector<ZipEntry> entries;
  size_t at = 0;
  for (uint64_t i = 0; i < d.entries; ++i) {
    const std::string where = what + ": central directory entry " + std::to_string(i);
    if (at + kCentralHeaderSize > cd.size() || Get32(cd, at) != kCentralHeaderSig) {
      return Status::Corruption(where + " has a bad signature or is truncated");
    }
    ZipEntry e;
    e.flags = Get16(cd, at + 8);
    e.method = Get16(cd, at + 10);
    e.crc32 = Get32(cd, at + 16);
    e.compressed_size = Get32(cd, at + 20);
    e.uncompressed_size = Get32(cd, at + 24);
    size_t name_len = Get16(cd, at + 28);
    size_t extra_len = Get16(cd, at + 30);
    size_t comment_len = Get16(cd, at + 32);
    uint16_t disk = Get16(cd, at + 34);
    uint64_t local_offset = Get32(cd, at + 42);
    size_t var_len = name_len + extra_len + comment_len;
    if (var_len > cd.size() - at - kCentralHeaderSize) return Status::Corruption(where + " is truncated");
    e.name = std::string(cd.substr(at + kCentralHeaderSize, name_len));
    std::string_view extra = cd.substr(at + kCentralHeaderSize + name_len, extra_len);
    SPARQ_RETURN_IF_ERROR(ApplyZip64Extra(extra, e, local_offset, e.uncompressed_size == kMax32,
                                          e.compressed_size == kMax32, local_offset == kMax32,
                                          where + " ('" + e.name + "')"));
    if (disk != 0 && disk != kMax16) return Status::NotSupported(what + ": multi-disk ZIP archives are not supported");
    at += kCentralHeaderSize + var_len;

    // The local header repeats the name and has its own extra field; the
    // member's data follows it.
    const std::string member = what + ": member '" + e.name + "'";
    if (!InBounds(local_offset, kLocalHeaderSize, a.size()) || Get32(a, local_offset) != kLocalHeaderSig) {
      return Status::Corruption(member + ": no local file header at offset " + std::to_string(local_offset));
    }
    uint64_t data_offset = local_offset + kLocalHeaderSize + Get16(a, local_offset + 26) + Get16(a, local_offset + 28);
    if (!InBounds(data_offset, e.compressed_size, a.size())) {
      return Status::Corruption(member + ": data (" + std::to_string(e.compressed_size) + " bytes at offset " +
                                std::to_string(data_offset) + ") runs past the end of the " +
                                std::to_string(a.size()) + "-byte file");
    }
    e.data_offset = data_offset;
    entries.push_back(std::move(e));
  }
  return entries;
}

StatusOr<std::string_view> StoredEntry(std::string_view a, const ZipEntry& e, const std::string& what) {
  const std::string member = what + ": member '" + e.name + "'";
  if (e.flags & kFlagEncrypted) return Status::NotSupported(member + " is encrypted");
  if (e.method != 0) return Status::NotSupported(member + " is compressed");
  if (!InBounds(e.data_offset, e.compressed_size, a.size())) {
    return Status::Corruption(member + ": data runs past the end of the file");
  }
  if (e.compressed_size != e.uncompressed_size) {
    return Status::Corruption(member + ": stored member with compressed size " + std::to_string(e.compressed_size) +
                              " != uncompressed size " + std::to_string(e.uncompressed_size));
  }
  return a.substr(e.data_offset, e.compressed_size);
}

StatusOr<std::string_view> ReadEntry(std::string_view a, const ZipEntry& e, const std::string& what,
                                     std::string* storage) {
  const std::string member = what + ": member '" + e.name + "'";
  if (e.flags & kFlagEncrypted) return Status::NotSupported(member + " is encrypted");
  if (!InBounds(e.data_offset, e.compressed_size, a.size())) {
    return Status::Corruption(member + ": data runs past the end of the file");
  }
  std::string_view raw = a.substr(e.data_offset, e.compressed_size);
  std::string_view data;
  if (e.method == 0) {
    SPARQ_ASSIGN_OR_RETURN(data, StoredEntry(a, e, what));
  } else if (e.method == 8) {
    if (e.uncompressed_size / kMaxDeflateRatio > e.compressed_size + 64) {
      return Status::Corruption(member + ": uncompressed size " + std::to_string(e.uncompressed_size) +
                                " is impossible for " + std::to_string(e.compressed_size) + " deflated bytes");
    }
    if (e.uncompressed_size > std::numeric_limits<size_t>::max() / 2) {
      return Status::Corruption(member + ": uncompressed size is too large");
    }
    storage->assign(static_cast<size_t>(e.uncompressed_size), '\0');
    z_stream zs{};
    if (inflateInit2(&zs, -15) != Z_OK) return Status::Internal("zlib inflateInit2 failed");
    // zlib counts in 32-bit uInt: feed and drain in chunks.
    const auto* in = reinterpret_cast<const Bytef*>(raw.data());
    auto* out = reinterpret_cast<Bytef*>(storage->data());
    size_t in_left = raw.size(), out_left = storage->size();
    zs.next_in = const_cast<Bytef*>(in);  // valid (empty) buffers: zlib rejects null pointers
    zs.next_out = out;
    int rc = Z_OK;
    while (rc == Z_OK) {
      if (zs.avail_in == 0 && in_left > 0) {
        zs.next_in = const_cast<Bytef*>(in);
        zs.avail_in = static_cast<uInt>(std::min<size_t>(in_left, 1u << 30));
        in += zs.avail_in;
        in_left -= zs.avail_in;
      }
      if (zs.avail_out == 0 && out_left > 0) {
        zs.next_out = out;
        zs.avail_out = static_cast<uInt>(std::min<size_t>(out_left, 1u << 30));
        out += zs.avail_out;
        out_left -= zs.avail_out;
      }
      uInt before_in = zs.avail_in, before_out = zs.avail_out;
      rc = inflate(&zs, Z_NO_FLUSH);
      if (rc == Z_BUF_ERROR || (rc == Z_OK && zs.avail_in == before_in && zs.avail_out == before_out)) {
        // No progress: input exhausted or output full before the stream ended.
        rc = Z_BUF_ERROR;
      }
    }
    uint64_t produced = zs.total_out;
    inflateEnd(&zs);
    if (rc != Z_STREAM_END) {
      std::string why = rc == Z_BUF_ERROR ? "stream does not end where the sizes say (truncated, or sizes wrong)"
                                          : std::string("zlib error ") + std::to_string(rc);
      return Status::Corruption(member + ": bad deflate data: " + why);
    }
    if (produced != e.uncompressed_size) {
      return Status::Corruption(member + ": inflated to " + std::to_string(produced) + " bytes, expected " +
                                std::to_string(e.uncompressed_size));
    }
    data = std::string_view(*storage);
  } else {
    return Status::NotSupported(member + " uses ZIP compression method " + std::to_string(e.method) +
                                " (only stored and deflate are supported)");
  }
  uint32_t crc = Crc32(data);
  if (crc != e.crc32) {
    char buf[64];
    std::snprintf(buf, sizeof(buf), "CRC-32 mismatch (stored %08x, computed %08x)", e.crc32, crc);
    return Status::Corruption(member + ": " + buf);
  }
  return data;
}

void ZipWriter::Add(const std::string& name, std::string_view data) {
  Written w{name, Crc32(data), data.size(), out_.size()};
  const bool zip64 = force_zip64_ || w.size >= kMax32;
  const bool utf8 = std::any_of(name.begin(), name.end(), [](char c) { return static_cast<uint8_t>(c) >= 0x80; });
  Put32(out_, kLocalHeaderSig);
  Put16(out_, zip64 ? 45 : 20);  // version needed to extract
  Put16(out_, utf8 ? kFlagUtf8Name : 0);
  Put16(out_, 0);       // stored
  Put16(out_, 0);       // time 00:00:00
  Put16(out_, 0x0021);  // date 1980-01-01
  Put32(out_, w.crc32);
  Put32(out_, zip64 ? kMax32 : static_cast<uint32_t>(w.size));
  Put32(out_, zip64 ? kMax32 : static_cast<uint32_t>(w.size));
  Put16(out_, static_cast<uint16_t>(name.size()));
  Put16(out_, zip64 ? 20 : 0);
  out_ += name;
  if (zip64) {
    Put16(out_, kZip64ExtraId);
    Put16(out_, 16);
    Put64(out_, w.size);
    Put64(out_, w.size);
  }
  out_.append(data.data(), data.size());
  written_.push_back(std::move(w));
}

std::string ZipWriter::Finish() {
  const uint64_t cd_offset = out_.size();
  for (const Written& w : written_) {
    const bool big_size = force_zip64_ || w.size >= kMax32;
    const bool big_offset = force_zip64_ || w.local_header_offset >= kMax32;
    const bool zip64 = big_size || big_offset;
    const bool utf8 = std::any_of(w.name.begin(), w.name.end(), [](char c) { return static_cast<uint8_t>(c) >= 0x80; });
    const uint16_t extra_len = static_cast<uint16_t>(zip64 ? 4 + (big_size ? 16 : 0) + (big_offset ? 8 : 0) : 0);
    Put32(out_, kCentralHeaderSig);
    Put16(out_, zip64 ? 45 : 20);  // version made by (MS-DOS attributes)
    Put16(out_, zip64 ? 45 : 20);  // version needed
    Put16(out_, utf8 ? kFlagUtf8Name : 0);
    Put16(out_, 0);
    Put16(out_, 0);
    Put16(out_, 0x0021);
    Put32(out_, w.crc32);
    Put32(out_, big_size ? kMax32 : static_cast<uint32_t>(w.size));
    Put32(out_, big_size ? kMax32 : static_cast<uint32_t>(w.size));
    Put16(out_, static_cast<uint16_t>(w.name.size()));
    Put16(out_, extra_len);
    Put16(out_, 0);  // comment
    Put16(out_, 0);  // disk
    Put16(out_, 0);  // internal attributes
    Put32(out_, 0);  // external attributes
    Put32(out_, big_offset ? kMax32 : static_cast<uint32_t>(w.local_header_offset));
    out_ += w.name;
    if (zip64) {
      Put16(out_, kZip64ExtraId);
      Put16(out_, static_cast<uint16_t>(extra_len - 4));
      if (big_size) {
        Put64(out_, w.size);
        Put64(out_, w.size);
      }
      if (big_offset) Put64(out_, w.local_header_offset);
    }
  }
  const uint64_t cd_size = out_.size() - cd_offset;
  const uint64_t count = written_.size();
  const bool zip64 = force_zip64_ || count >= kMax16 || cd_size >= kMax32 || cd_offset >= kMax32;
  if (zip64) {
    const uint64_t record_offset = out_.size();
    Put32(out_, kZip64EndOfCentralDirSig);
    Put64(out_, kZip64EndOfCentralDirSize - 12);  // size of the rest of the record
    Put16(out_, 45);
    Put16(out_, 45);
    Put32(out_, 0);
    Put32(out_, 0);
    Put64(out_, count);
    Put64(out_, count);
    Put64(out_, cd_size);
    Put64(out_, cd_offset);
    Put32(out_, kZip64LocatorSig);
    Put32(out_, 0);
    Put64(out_, record_offset);
    Put32(out_, 1);  // total number of disks
  }
  Put32(out_, kEndOfCentralDirSig);
  Put16(out_, 0);
  Put16(out_, 0);
  Put16(out_, zip64 ? kMax16 : static_cast<uint16_t>(count));
  Put16(out_, zip64 ? kMax16 : static_cast<uint16_t>(count));
  Put32(out_, zip64 ? kMax32 : static_cast<uint32_t>(cd_size));
  Put32(out_, zip64 ? kMax32 : static_cast<uint32_t>(cd_offset));
  Put16(out_, 0);  // comment length
  written_.clear();
  std::string archive;
  archive.swap(out_);
  return archive;
}

}  // namespace zip
}  // namespace sparq
