// Progress of a pass over the data, reported to a callback that may cancel
// (Evaluator, compare). Internal to sparq.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "sparq/evaluate.h"  // EvalProgress
#include "sparq/status.h"

namespace sparq {

// Calls `callback` (when set) with `done` of `total` samples after `seconds`;
// Cancelled, naming `what` ("evaluation", "compare", ...), when it asks to stop.
inline Status ReportProgress(const std::function<void(EvalProgress&)>& callback, int64_t done, int64_t total,
                             double seconds, const std::string& what) {
  if (!callback) return Status::OK();
  EvalProgress p{done, total, seconds};
  callback(p);
  if (!p.cancel) return Status::OK();
  return Status::Cancelled(what + " cancelled by the progress callback after " + std::to_string(done) + " samples");
}

}  // namespace sparq
