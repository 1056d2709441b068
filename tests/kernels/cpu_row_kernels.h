// Checks of the dispatch-table rows without packed weights against
// kernels/ref (cpu_row_kernels_test.cc).
#pragma once

#include <random>

#include "kernels/cpu/dispatch.h"

namespace sparq {
namespace testing {

// Runs `def`'s function directly (whatever the active ISA; the CPU must have
// def.isa) on lengths and cases that cover its vector tails and compares with
// the reference, adding gtest failures. False when def's op reads packed
// weights (those are checked in cpu_kernels_test.cc).
bool CheckRowKernel(std::mt19937& rng, const CpuKernelDef& def);

// Runs a conv_s8 row's function directly on a few geometries and compares
// with the spec (cpu_conv_s8_test.cc); false for other ops.
bool CheckConvS8Row(std::mt19937& rng, const CpuKernelDef& def);

// Runs a matmul_nbits_f32 row's function directly on odd shapes and compares
// with kernels/ref/matmul_nbits.h (cpu_matmul_nbits_test.cc); false for other ops.
bool CheckMatMulNBitsRow(std::mt19937& rng, const CpuKernelDef& def);

}  // namespace testing
}  // namespace sparq
