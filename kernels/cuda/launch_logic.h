// The CUDA backend's comparison, logical and Where kernels (logic.cu), as
// host functions that launch them on a stream, like launch.h's. Per-element
// arithmetic: device_logic.h. Pointers are device pointers.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/cuda/device_logic.h"
#include "sparq/status.h"

namespace sparq {
namespace cuda {

// Element types of LaunchLogic's operands.
enum class LogicType : int { kF32, kF16, kI32, kI64, kBool };

// y (bool bytes) = a op b, numpy broadcasting (PlanBroadcast).
Status LaunchLogic(LogicOp op, LogicType type, const void* a, const void* b, uint8_t* y, const BroadcastPlan& plan,
                   cudaStream_t stream);
// out = Where(c, x, y) for elements of elem_size bytes (1, 2, 4, 8).
Status LaunchWhere(const uint8_t* c, const void* x, const void* y, void* out, int elem_size, const WherePlan& plan,
                   cudaStream_t stream);

}  // namespace cuda
}  // namespace sparq
