// Sparsity schedules: how the target is reached over the pruning steps.
//
//   sparsity
//   s_f ┤                         ●  oneshot: s_f at step 1
//       │                 ○    ●     linear:  equal increments
//       │         ○    ●             agp:     s_f + (s_i - s_f)(1 - t/n)^3,
//       │    ○  ●                             most of it early, gentle at the end
//   s_i ┼──●────────────────────────── t
//          1    2    3    4
#include <cmath>

#include "prune/internal.h"

namespace sparq {

const char* PruneScheduleName(PruneSchedule s) {
  switch (s) {
    case PruneSchedule::kOneShot: return "oneshot";
    case PruneSchedule::kLinear: return "linear";
    case PruneSchedule::kAgp: return "agp";
  }
  return "?";
}

StatusOr<PruneSchedule> ParsePruneSchedule(const std::string& name) {
  if (name == "oneshot") return PruneSchedule::kOneShot;
  if (name == "linear") return PruneSchedule::kLinear;
  if (name == "agp") return PruneSchedule::kAgp;
  return Status::InvalidArgument("unknown pruning schedule '" + name + "' (expected oneshot, linear or agp)");
}

const char* PruneScopeName(PruneScope s) { return s == PruneScope::kGlobal ? "global" : "layer"; }
const char* PruneReconstructionName(PruneReconstruction::Method m) {
  return m == PruneReconstruction::Method::kBlock ? "block" : "none";
}

StatusOr<std::vector<double>> ScheduleSparsities(PruneSchedule schedule, double final_sparsity, int steps,
                                                 double initial_sparsity) {
  using prune_internal::FormatNumber;
  if (!(final_sparsity >= 0.0 && final_sparsity < 1.0)) {
    return Status::InvalidArgument("final sparsity " + FormatNumber(final_sparsity) +
                                   " is out of range: must be in [0, 1)");
  }
  if (!(initial_sparsity >= 0.0 && initial_sparsity <= final_sparsity)) {
    return Status::InvalidArgument("initial sparsity " + FormatNumber(initial_sparsity) + " must be in [0, " +
                                   FormatNumber(final_sparsity) + "] (the final sparsity)");
  }
  if (steps < 1) return Status::InvalidArgument("steps is " + std::to_string(steps) + ": must be >= 1");
  std::vector<double> out;
  switch (schedule) {
    case PruneSchedule::kOneShot:
      if (steps != 1) {
        return Status::InvalidArgument("a oneshot schedule takes 1 step, got " + std::to_string(steps) +
                                       " (use linear or agp for several)");
      }
      out.push_back(final_sparsity);
      break;
    case PruneSchedule::kLinear:
      for (int t = 1; t <= steps; ++t)
        out.push_back(initial_sparsity + (final_sparsity - initial_sparsity) * t / static_cast<double>(steps));
      break;
    case PruneSchedule::kAgp:
      for (int t = 1; t <= steps; ++t) {
        const double f = 1.0 - t / static_cast<double>(steps);
        out.push_back(final_sparsity + (initial_sparsity - final_sparsity) * f * f * f);
      }
      break;
  }
  out.back() = final_sparsity;  // exact, whatever the rounding
  return out;
}

}  // namespace sparq
