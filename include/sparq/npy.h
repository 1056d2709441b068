// Reading and writing numpy's .npy arrays and .npz archives.
//
// .npy: format versions 1.0, 2.0 and 3.0; little-endian, C order (Fortran
// order and big-endian arrays are NotSupported). Types: every sparq DataType
// that numpy has (float16/32/64, int8..int64, uint8..uint64, bool); bfloat16
// has no numpy type and cannot be written.
//
// .npz: a ZIP archive of .npy members, as written by np.savez (stored) and
// np.savez_compressed (deflated); ZIP64 archives are read and written. Members
// are keyed by their name without ".npy" and kept in archive order. Writers
// produce stored (uncompressed) members.
//
// All readers validate every length and offset against the file size; a
// malformed file gives Corruption (or NotSupported for valid numpy data that
// sparq does not handle) with the file name and what is wrong. Functions are
// thread safe (no shared state).
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "sparq/export.h"
#include "sparq/status.h"
#include "sparq/tensor.h"

namespace sparq {

// Arrays with their names, in file order.
using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

// The header of a .npy file: what ParseNpyHeader found before the data.
struct SPARQ_API NpyHeader {
  int major_version = 1;
  int minor_version = 0;
  DataType dtype = DataType::kUndefined;
  Shape shape;
  size_t data_offset = 0;  // bytes from the start of the file to the first element
};

// Reads one .npy file. Errors: NotFound, IOError, Corruption, NotSupported.
SPARQ_API StatusOr<Tensor> ReadNpy(const std::string& path);
// Parses .npy bytes; `what` names the source in messages (a path, "x.npz:x").
SPARQ_API StatusOr<Tensor> ParseNpy(std::string_view bytes, const std::string& what);
// Parses only the header of .npy bytes (`bytes` may stop after the header;
// data size is not checked).
SPARQ_API StatusOr<NpyHeader> ParseNpyHeader(std::string_view bytes, const std::string& what);
// Reads the header of a .npy file without reading its data.
SPARQ_API StatusOr<NpyHeader> ReadNpyHeader(const std::string& path);

// .npy bytes of `t` (format 1.0, or 2.0 when the header needs it).
// Errors: NotSupported for bfloat16 and undefined tensors.
SPARQ_API StatusOr<std::string> SerializeNpy(const Tensor& t);
// Writes `t` to `path` atomically (WriteFileAtomically).
SPARQ_API Status WriteNpy(const std::string& path, const Tensor& t);

// Reads every array of a .npz archive, in archive order.
SPARQ_API StatusOr<NamedTensors> ReadNpz(const std::string& path);
SPARQ_API StatusOr<NamedTensors> ParseNpz(std::string_view bytes, const std::string& what);

// .npz bytes with one stored member "<name>.npy" per array (ZIP64 records are
// added when a size or offset needs them). Errors: InvalidArgument for empty
// or duplicate names, NotSupported as SerializeNpy.
SPARQ_API StatusOr<std::string> SerializeNpz(const NamedTensors& arrays);
// Writes the archive to `path` atomically.
SPARQ_API Status WriteNpz(const std::string& path, const NamedTensors& arrays);

// Reads a .npy (one array named after the file's stem) or a .npz, chosen by
// the file extension; other extensions are InvalidArgument.
SPARQ_API StatusOr<NamedTensors> ReadArrays(const std::string& path);

// An array of a .npy file or of a stored (uncompressed) .npz member, located
// by its header without reading its data, so that rows can be read on demand
// (datasets larger than memory, calibration in bounded memory).
struct SPARQ_API NpyArrayRef {
  std::string name;     // the .npy file's stem, or the .npz key
  std::string path;     // the file
  std::string what;     // for messages: the path, or "<path>:<member>"
  NpyHeader header;     // header.data_offset counts from the start of `path`
  bool big_endian = false;
};
// Locates every array of a .npy or .npz file, in file order, reading only
// headers (the archive's directory is read through a memory map). NotSupported
// when a .npz member is compressed (np.savez_compressed: read it whole with
// ReadArrays); otherwise the errors of ReadArrays.
SPARQ_API StatusOr<std::vector<NpyArrayRef>> LocateArrays(const std::string& path);
// Reads rows [begin, begin + count) of a located array of rank >= 1 (the
// caller keeps the range inside its first dimension). Errors: IOError.
SPARQ_API StatusOr<Tensor> ReadArrayRows(const NpyArrayRef& array, int64_t begin, int64_t count);

}  // namespace sparq
