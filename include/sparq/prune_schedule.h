// Pruning schedules: the sparsity after each step of a progressive run.
#pragma once

#include <string>
#include <vector>

#include "sparq/export.h"
#include "sparq/status.h"

namespace sparq {

enum class PruneSchedule {
  kOneShot,  // [s_f]
  kLinear,   // s_t = s_i + (s_f - s_i) * t / n
  kAgp,      // Zhu & Gupta's cubic ramp: s_t = s_f + (s_i - s_f) * (1 - t/n)^3
};
SPARQ_API const char* PruneScheduleName(PruneSchedule s);  // "oneshot", "linear", "agp"
SPARQ_API StatusOr<PruneSchedule> ParsePruneSchedule(const std::string& name);

// The sparsity after each step t = 1..steps (the last is `final_sparsity`).
// Errors: InvalidArgument for sparsities outside [0, 1), initial > final,
// steps < 1, or a one-shot schedule with steps != 1.
SPARQ_API StatusOr<std::vector<double>> ScheduleSparsities(PruneSchedule schedule, double final_sparsity, int steps,
                                                 double initial_sparsity = 0.0);

}  // namespace sparq
