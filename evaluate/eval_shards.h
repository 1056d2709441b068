// Sharded evaluation: the sums a shard's report carries ("partial" in its
// JSON) and their merge (MergeEvalReports, sparq/evaluate.h).
#pragma once

#include <string>

#include "sparq/evaluate.h"

namespace sparq {

// The "partial" object of a shard's EvalReport::ToJson (docs/scale.md).
std::string ShardSumsJson(const EvalReport& report);

}  // namespace sparq
