// The resident pages of mapped files (MapFileRegion, sparq/file_io.h), given
// back to the kernel once a copy of them is made: an executor that packed a
// mapped weight does not need the weight's pages until someone reads it again.
// Internal to sparq.
#pragma once

#include <cstddef>

namespace sparq {

// When [data, data + bytes) lies in a region MapFileRegion mapped, asks the
// kernel to reclaim its resident pages (madvise MADV_PAGEOUT; clean file pages
// are dropped, never lost: the next read pages them in from the file again).
// Memory that is not mapped from a file (heap buffers) is left alone. Returns
// the bytes advised (0 when none, or when the kernel lacks MADV_PAGEOUT).
// Thread safe.
size_t ReclaimMappedPages(const void* data, size_t bytes);

}  // namespace sparq
