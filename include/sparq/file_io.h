// Reading and writing whole files.
#pragma once

#include <string>

#include "sparq/export.h"
#include "sparq/status.h"

namespace sparq {

// Writes `bytes` to `path` through a temporary file in the same folder and a
// rename, so `path` holds either its old content or all of `bytes`, never a
// part. Errors: NotFound when the folder does not exist, IOError otherwise
// (the temporary file is removed).
SPARQ_API Status WriteFileAtomically(const std::string& path, const std::string& bytes);

// Reads a whole file. Errors: NotFound, InvalidArgument for a folder, IOError.
SPARQ_API StatusOr<std::string> ReadFile(const std::string& path);

}  // namespace sparq
