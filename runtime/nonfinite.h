// Finding where a model first computes a NaN or an infinity (internal).
#pragma once

#include <string>

#include "sparq/calibrate.h"  // BatchFn
#include "sparq/graph.h"
#include "sparq/status.h"

namespace sparq {

// Runs `model` (reference kernels, nothing fused, so every value exists) over
// the batches of `next_batch` until a node writes a float value holding NaN
// or +-Inf, and describes the first such value in execution order:
// "tensor 'x' (output of Cast node 'n'): NaN at flat index 12 of batch 0".
// Returns "" when no value of any batch is non-finite. Errors: the
// executor's and the data's.
StatusOr<std::string> FirstNonFiniteTensor(const Model& model, const BatchFn& next_batch, int threads);

}  // namespace sparq
