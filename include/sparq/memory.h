// What this process's memory peaked at, for reports (sparq run's report,
// `sparq eval --json`, `sparq calibrate --json`): docs/scale.md says what the
// peak of a large model is bounded by.
#pragma once

#include "sparq/export.h"

namespace sparq {

// The process's peak resident set so far, in MiB (getrusage RUSAGE_SELF
// ru_maxrss): anonymous memory and the pages of mapped files it touched,
// including mapped weights (which the kernel may drop again under pressure).
// 0 when the system does not say. Thread safe.
SPARQ_API double PeakRssMiB();

}  // namespace sparq
