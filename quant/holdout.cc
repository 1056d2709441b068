// Fit and held-out batches of the calibration data (quant/holdout.h).
#include "quant/holdout.h"

#include <functional>
#include <memory>
#include <string>

namespace sparq {
namespace {

// Passes over the batches of `source` whose index `keep` accepts.
BatchFn Filtered(const BatchSource& source, std::function<bool(int64_t)> keep) {
  auto inner = std::make_shared<BatchFn>(source());
  auto index = std::make_shared<int64_t>(0);
  return [inner, index, keep](TensorMap* batch) -> StatusOr<bool> {
    for (;;) {
      TensorMap b;
      SPARQ_ASSIGN_OR_RETURN(bool more, (*inner)(&b));
      if (!more) return false;
      if (keep((*index)++)) {
        *batch = std::move(b);
        return true;
      }
    }
  };
}

}  // namespace

StatusOr<HoldoutSplit> MakeHoldoutSplit(const BatchSource& source, int64_t every) {
  if (every < 2) return Status::InvalidArgument("holdout_every must be >= 2, got " + std::to_string(every));
  HoldoutSplit s;
  s.every = every;
  BatchFn count = source();
  for (;;) {
    TensorMap b;
    SPARQ_ASSIGN_OR_RETURN(bool more, count(&b));
    if (!more) break;
    ++s.batches;
  }
  s.split = s.batches >= every;
  return s;
}

BatchFn FitBatches(const BatchSource& source, const HoldoutSplit& split) {
  return Filtered(source, [split](int64_t i) { return split.IsFit(i); });
}

BatchFn HeldOutBatches(const BatchSource& source, const HoldoutSplit& split) {
  return Filtered(source, [split](int64_t i) { return split.IsHeld(i); });
}

BatchSource HeldOutSource(const BatchSource& source, const HoldoutSplit& split) {
  BatchSource held([source, split] { return HeldOutBatches(source, split); });
  held.set_name(source.name() + (split.split ? " (held-out batches)" : "")).set_sample_axes(source.sample_axes());
  return held;
}

}  // namespace sparq
