// The prepare step of an op that runs one row of the kernel table
// (kernels/cpu/dispatch.h): the active ISA's row, chosen once per node and
// named by `eval --verbose`; the run step reads it back with PreparedRow.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "kernels/cpu/dispatch.h"
#include "kernels/registry.h"

namespace sparq {
namespace cpu {

template <CpuOp kOp>
StatusOr<std::shared_ptr<const void>> PrepareRow(const Node&, const std::vector<const Tensor*>&) {
  return std::shared_ptr<const void>(&SelectCpuKernel(kOp), [](const void*) {});  // the table outlives executors
}

inline std::string RowKernel(const void* state) { return static_cast<const CpuKernelDef*>(state)->name; }

// The row's function, of the type Fn of its CpuOp.
template <typename Fn>
Fn PreparedRow(const OpContext& ctx) {
  return static_cast<const CpuKernelDef*>(ctx.prepared())->get<Fn>();
}

}  // namespace cpu
}  // namespace sparq
