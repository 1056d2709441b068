// The float32 MaxPool of kernels/cpu (pool.cc), called by the MaxPool row
// (qdq_glue.cc) for float inputs.
#pragma once

#include "kernels/op_context.h"

namespace sparq {

// MaxPool of a float32 4-D input without Indices, exactly the reference's
// result; anything else runs the reference kernel.
Status MaxPoolF32(OpContext& ctx);

}  // namespace sparq
