// The executor's MaxPool on the maxpool2d rows of the dispatch table
// (pool.cc; qdq_glue.cc registers it).
#pragma once

#include "kernels/cpu/dispatch.h"
#include "kernels/op_context.h"

namespace sparq {

// MaxPool of a 4-D float32, uint8 or int8 input without Indices through `fn`
// (a maxpool2d row), exactly the reference's result; anything else runs the
// reference kernel.
Status RunMaxPool2d(OpContext& ctx, MaxPool2dFn fn);

}  // namespace sparq
