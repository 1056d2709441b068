// Comparison, logical, Where and float16 reduction kernels of the CUDA
// backend (launch_logic.h); per-element bodies from device_logic.h /
// device_f16.h.
#include <cuda_runtime.h>

#include <string>

#include "kernels/cuda/cuda_status.h"
#include "kernels/cuda/grid.cuh"
#include "kernels/cuda/launch_logic.h"

namespace sparq {
namespace cuda {
namespace {

using grid::BlocksFor;
using grid::kThreads;

template <typename T>
__global__ void LogicKernel(LogicOp op, const T* __restrict__ a, const T* __restrict__ b, uint8_t* __restrict__ y,
                            BroadcastPlan plan) {
  SPARQ_GRID_STRIDE(i, plan.numel) { y[i] = LogicElement<T>(i, op, a, b, plan); }
}

template <typename T>
__global__ void WhereKernel(const uint8_t* __restrict__ c, const T* __restrict__ x, const T* __restrict__ y,
                            T* __restrict__ out, WherePlan plan) {
  SPARQ_GRID_STRIDE(i, plan.numel) { out[i] = WhereElement<T>(i, c, x, y, plan); }
}

template <typename T>
void LaunchLogicAs(LogicOp op, const void* a, const void* b, uint8_t* y, const BroadcastPlan& plan, cudaStream_t stream) {
  LogicKernel<T><<<BlocksFor(plan.numel), kThreads, 0, stream>>>(op, static_cast<const T*>(a), static_cast<const T*>(b), y,
                                                                  plan);
}

template <typename T>
void LaunchWhereAs(const uint8_t* c, const void* x, const void* y, void* out, const WherePlan& plan, cudaStream_t stream) {
  WhereKernel<T><<<BlocksFor(plan.numel), kThreads, 0, stream>>>(c, static_cast<const T*>(x), static_cast<const T*>(y),
                                                                  static_cast<T*>(out), plan);
}

}  // namespace

Status LaunchLogic(LogicOp op, LogicType type, const void* a, const void* b, uint8_t* y, const BroadcastPlan& plan,
                   cudaStream_t stream) {
  if (plan.numel <= 0) return Status::OK();
  switch (type) {
    case LogicType::kF32: LaunchLogicAs<float>(op, a, b, y, plan, stream); break;
    case LogicType::kF16: LaunchLogicAs<Half>(op, a, b, y, plan, stream); break;
    case LogicType::kI32: LaunchLogicAs<int32_t>(op, a, b, y, plan, stream); break;
    case LogicType::kI64: LaunchLogicAs<int64_t>(op, a, b, y, plan, stream); break;
    case LogicType::kBool: LaunchLogicAs<uint8_t>(op, a, b, y, plan, stream); break;
  }
  SPARQ_CUDA_RETURN_IF_LAUNCH_ERROR("LogicKernel");
  return Status::OK();
}

Status LaunchWhere(const uint8_t* c, const void* x, const void* y, void* out, int elem_size, const WherePlan& plan,
                   cudaStream_t stream) {
  if (plan.numel <= 0) return Status::OK();
  switch (elem_size) {
    case 1: LaunchWhereAs<uint8_t>(c, x, y, out, plan, stream); break;
    case 2: LaunchWhereAs<uint16_t>(c, x, y, out, plan, stream); break;
    case 4: LaunchWhereAs<uint32_t>(c, x, y, out, plan, stream); break;
    case 8: LaunchWhereAs<uint64_t>(c, x, y, out, plan, stream); break;
    default: return Status::NotSupported("Where of " + std::to_string(elem_size) + "-byte elements");
  }
  SPARQ_CUDA_RETURN_IF_LAUNCH_ERROR("WhereKernel");
  return Status::OK();
}

}  // namespace cuda
}  // namespace sparq
