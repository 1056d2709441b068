// The calibration data cut into fit and held-out batches, for choices made
// on calibration data alone (smoothing's alpha, the quantization search):
// every `every`-th batch is held out (batch i with i % every == every - 1),
// the rest fit. With fewer batches than `every` there is no split: every
// batch both fits and judges. Never the evaluation data.
#pragma once

#include <cstdint>

#include "sparq/dataset.h"
#include "sparq/status.h"

namespace sparq {

struct HoldoutSplit {
  int64_t every = 4;     // >= 2
  int64_t batches = 0;   // in one pass of the data
  bool split = false;    // batches >= every

  bool IsHeld(int64_t i) const { return !split || i % every == every - 1; }
  bool IsFit(int64_t i) const { return !split || i % every != every - 1; }
};

// Counts the batches of one pass. InvalidArgument when every < 2.
StatusOr<HoldoutSplit> MakeHoldoutSplit(const BatchSource& source, int64_t every);

// A pass over the fit (held-out) batches of `source`.
BatchFn FitBatches(const BatchSource& source, const HoldoutSplit& split);
BatchFn HeldOutBatches(const BatchSource& source, const HoldoutSplit& split);

// The held-out batches as a source of their own (name and sample axes kept;
// sizes unknown), e.g. for an Evaluator.
BatchSource HeldOutSource(const BatchSource& source, const HoldoutSplit& split);

}  // namespace sparq
