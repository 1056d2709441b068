// Compiling a region of a file for an x86 ISA without per-file compiler flags:
//
//   #include <immintrin.h>          // and every other header first
//   SPARQ_CPU_TARGET_BEGIN("avx2,fma")
//   namespace { ...kernels using AVX2 intrinsics... }
//   void ExportedEntryPoint(...) { ... }
//   SPARQ_CPU_TARGET_END
//
// Every function defined between the two macros may use the ISA; nothing else
// in the library does, so the library still runs on older CPUs (the dispatcher
// calls these functions only when cpuid reports the ISA). Headers must be
// included before BEGIN so that inline library functions (std::vector, ...)
// are not compiled for the ISA and shared with generic code by the linker.
#pragma once

#define SPARQ_CPU_PRAGMA(x) _Pragma(#x)

#if defined(__clang__)
#define SPARQ_CPU_TARGET_BEGIN(features) \
  SPARQ_CPU_PRAGMA(clang attribute push(__attribute__((target(features))), apply_to = function))
#define SPARQ_CPU_TARGET_END SPARQ_CPU_PRAGMA(clang attribute pop)
#elif defined(__GNUC__)
// -Wmaybe-uninitialized is silenced: GCC 12's own AVX-512 headers trip it
// (`__m512 __Y = __Y;` in _mm512_undefined_ps, GCC bug 105593).
#define SPARQ_CPU_TARGET_BEGIN(features)                                                               \
  SPARQ_CPU_PRAGMA(GCC push_options) SPARQ_CPU_PRAGMA(GCC target(features))                             \
  SPARQ_CPU_PRAGMA(GCC diagnostic push) SPARQ_CPU_PRAGMA(GCC diagnostic ignored "-Wmaybe-uninitialized")
#define SPARQ_CPU_TARGET_END SPARQ_CPU_PRAGMA(GCC diagnostic pop) SPARQ_CPU_PRAGMA(GCC pop_options)
#endif

#define SPARQ_CPU_AVX2_FEATURES "avx2,fma"
#define SPARQ_CPU_AVX512_FEATURES "avx2,fma,avx512f,avx512bw,avx512vl,avx512dq"
#define SPARQ_CPU_AVX512VNNI_FEATURES "avx2,fma,avx512f,avx512bw,avx512vl,avx512dq,avx512vnni"
#define SPARQ_CPU_AVX512VBMI_FEATURES "avx2,fma,avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,avx512vbmi"
