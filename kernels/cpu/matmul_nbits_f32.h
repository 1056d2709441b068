// The matmul_nbits_f32 rows of the dispatch table (com.microsoft
// MatMulNBits, 4-bit weights; layout: kernels/ref/matmul_nbits.h) and the
// op's fast CPU kernel (matmul_nbits_f32.cc).
//
// The rows work on output columns in pairs: the packed codes of each block
// are read once, widened to float32 in registers as the reference
// dequantizes them ((code - zero_point) * scale, exact; AVX-512: one permute
// of the block's 16 possible weights), and FMA'd into one vector accumulator
// per row of A and column (8 rows x 2 columns per pass; a single row keeps
// four accumulators per column), so a batch-1 call (GEMV) streams the 4-bit
// weights once and nothing else but A's row. The last partial vector of K is
// summed in scalar code after the vectors.
#pragma once

#include "kernels/cpu/kernel_args.h"

namespace sparq {
namespace cpu {

void MatMulNBitsF32Portable(const MatMulNBitsF32Args& args);
void MatMulNBitsF32Avx2(const MatMulNBitsF32Args& args);
void MatMulNBitsF32Avx512(const MatMulNBitsF32Args& args);

}  // namespace cpu
}  // namespace sparq
