// The dispatch table of sparq's fast CPU kernels and the choice of ISA.
//
// Each kernel is one row {name, isa, format, fn}: the function reads weights
// packed in `format` and needs the CPU features of `isa`. Kernels are named
// <op>_<format>_<isa> (gemm_s8s8_avx512vnni, spmm_bsr4x4_f32_avx512). For a
// call, the dispatcher takes the rows of the op whose format is the weights'
// format and runs the one with the highest ISA that is not above the active
// ISA. Every format has a portable row, so every packed matrix runs on every
// x86-64 CPU (and on other architectures, where only portable rows exist).
//
// The active ISA is the best the CPU supports (cpuid, checked once), lowered
// by the environment variable SPARQ_ISA=portable|avx2|avx512|avx512vnni, or by
// ForceIsa() (tests, benchmarks). Adding a kernel is adding a row in
// dispatch.cc.
#pragma once

#include <cstdint>
#include <variant>
#include <vector>

#include "kernels/cpu/kernel_args.h"
#include "sparq/status.h"

namespace sparq {

// Instruction set levels, each including the ones before it.
enum class CpuIsa : uint8_t {
  kPortable = 0,    // plain C++
  kAvx2 = 1,        // AVX2 + FMA
  kAvx512 = 2,      // AVX-512 F, BW, VL, DQ
  kAvx512Vnni = 3,  // kAvx512 + AVX-512 VNNI (vpdpbusd)
};

const char* CpuIsaName(CpuIsa isa);  // "portable", "avx2", "avx512", "avx512vnni"
// Parses a CpuIsaName; InvalidArgument listing the names otherwise.
StatusOr<CpuIsa> ParseCpuIsa(const std::string& name);

// The best ISA this CPU (and OS) supports. Thread safe.
CpuIsa DetectedIsa();
// The ISA kernels are chosen for: DetectedIsa(), lowered by SPARQ_ISA or ForceIsa.
CpuIsa ActiveIsa();
// Why SPARQ_ISA was ignored (unknown name, or an ISA this CPU lacks), or OK.
// The environment is read once, at the first ActiveIsa() call.
Status IsaEnvironmentStatus();
// Makes `isa` the active ISA; InvalidArgument when the CPU lacks it. Affects
// every thread; meant for tests and benchmarks, not for concurrent use with
// running kernels.
Status ForceIsa(CpuIsa isa);
// Undoes ForceIsa: back to SPARQ_ISA or the detected ISA.
void ResetIsa();

// The ops of the table and their function types.
enum class CpuOp : uint8_t { kGemmS8, kSpmmBsrF32, kSpmmBsrS8, kSpmmNmF32, kSpmmNmS8, kGemmF32 };
const char* CpuOpName(CpuOp op);

using GemmS8Fn = void (*)(const GemmS8Args&);
using SpmmBsrF32Fn = void (*)(const SpmmBsrF32Args&);
using SpmmBsrS8Fn = void (*)(const SpmmBsrS8Args&);
using SpmmNmF32Fn = void (*)(const SpmmNmF32Args&);
using SpmmNmS8Fn = void (*)(const SpmmNmS8Args&);
using GemmF32Fn = void (*)(const GemmF32Args&);
// The variant's alternative index is the CpuOp.
using CpuKernelFn = std::variant<GemmS8Fn, SpmmBsrF32Fn, SpmmBsrS8Fn, SpmmNmF32Fn, SpmmNmS8Fn, GemmF32Fn>;

struct CpuKernelDef {
  const char* name;     // <op>_<format>_<isa>
  CpuIsa isa;           // features the function needs
  PackedFormat format;  // weight format it reads
  CpuKernelFn fn;

  CpuOp op() const { return static_cast<CpuOp>(fn.index()); }
};

// Every row of the table.
const std::vector<CpuKernelDef>& CpuKernelTable();

// The row that runs `op` on weights in `format` at the active ISA, or nullptr
// when no row fits.
const CpuKernelDef* SelectCpuKernel(CpuOp op, PackedFormat format);

// The INT8 GEMM weight format whose kernel is fastest on `isa`
// (panel16x4_s8 for VNNI and portable, panel16x2_s16 for AVX2 / AVX-512).
PackedFormat PreferredGemmS8Format(CpuIsa isa);
// The FP32 GEMM weight format of `isa`'s register tile (panel8x32_f32 for
// AVX-512, panel6x16_f32 for AVX2, panel4x8_f32 for portable).
PackedFormat PreferredGemmF32Format(CpuIsa isa);

// Checked entry points: validate the arguments (InvalidArgument naming the
// field), select the kernel and run it. When `kernel_name` is not null it
// receives the name of the kernel that ran.
Status RunGemmS8(const GemmS8Args& args, const char** kernel_name = nullptr);
Status RunSpmmBsrF32(const SpmmBsrF32Args& args, const char** kernel_name = nullptr);
Status RunSpmmBsrS8(const SpmmBsrS8Args& args, const char** kernel_name = nullptr);
Status RunSpmmNmF32(const SpmmNmF32Args& args, const char** kernel_name = nullptr);
Status RunGemmF32(const GemmF32Args& args, const char** kernel_name = nullptr);
Status RunSpmmNmS8(const SpmmNmS8Args& args, const char** kernel_name = nullptr);

// Builds w's panels for the spmm_nm_s8 kernel of the active ISA, to pass as
// SpmmNmS8Args::panels on every call with w (w must outlive them and not
// change). InvalidArgument when w is not an int8 N:M matrix.
StatusOr<NmS8Panels> PrepackSpmmNmS8(const NmS8& w);

}  // namespace sparq
