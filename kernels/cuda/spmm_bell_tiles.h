// The tiling of sparq's own block-sparse float16 kernel (spmm_bell_wmma.cu),
// free of CUDA headers so tests/kernels/cuda_kernel_bodies_test.cc runs the
// kernel's grid on the host with the same index arithmetic.
//
// Y [m, n] = X [m, k] * W [k, n], W^T [n, k] in the Blocked-ELL layout of
// layouts.h in blocks of B x B (B = 32 or 64; n and k multiples of B), the
// same arrays cuSPARSE's row reads. One thread block per output tile of
// B features x kTokens tokens, iterating only over the nonzero blocks of its
// block-row (slots are filled first, the first -1 ends the row):
//
//   grid (ceil(m / kTokens), n / B); block (bx, by) writes
//   Y[bx * kTokens .. +kTokens, by * B .. +B]
//
//   per slot s (block column bc = col_ind[by][s]), staged in shared memory
//   by cp.async, double-buffered:
//     sa [B][kLd]        halves: W^T's block (feature f, kk) = values[by * B + f][s * B + kk]
//     sx [kTokens][kLd]  halves: X (token t, kk) = x[bx * kTokens + t][bc * B + kk], 0 past m
//   acc (f, t) += sum over kk of sa[f][kk] * sx[t][kk]
//     (WMMA 16x16x16 half, float sums: sa row-major, sx column-major as
//      matrix_b, both with ldm kLd)
//
//   4 warps, warp w owns 32 features x 32 tokens (2 x 2 fragments) at
//   (wf, wt) = (w / kWarpsT, w % kWarpsT). After the last slot the float
//   sums go to a shared tile sc [kTokens][kCLd] (column-major stores, so a
//   token's features are contiguous), and each thread converts its
//   elements to float16 (round to nearest even) and writes them, the
//   threads of a warp along one token's features.
#pragma once

#include <stdint.h>

#include <string>

#include "kernels/cuda/device_math.h"
#include "sparq/status.h"

namespace sparq {
namespace cuda {

// B: block size; E: element bytes (2: float16, float sums; 1: int8, int32 sums).
template <int B, int E = 2>
struct BellTile {
  static_assert(B == 32 || B == 64, "blocks of 32 or 64");
  static_assert(E == 1 || E == 2, "int8 or float16 elements");
  static constexpr int kBlock = B;
  static constexpr int kThreads = 128;
  static constexpr int kTokens = 4096 / B;  // 128 for B = 32, 64 for B = 64
  static constexpr int kWarpsF = B / 32, kWarpsT = 4 / kWarpsF;
  static constexpr int kChunkElems = 16 / E;         // elements per 16-byte chunk
  static constexpr int kLd = B + kChunkElems;        // elements per staged row (16 bytes of padding)
  static constexpr int kChunksPerRow = B / kChunkElems;
  static constexpr int kAChunks = B * B / kChunkElems, kXChunks = kTokens * B / kChunkElems;
  static constexpr int kStageElems = (B + kTokens) * kLd;  // sa, then sx
  static constexpr int kCLd = B + 4;                        // 32-bit sums per token row of sc
  static constexpr int kStageBytes = 2 * kStageElems * E;   // two stages
  static constexpr int kResultBytes = kTokens * kCLd * 4;
  static constexpr int kSharedBytes = kStageBytes > kResultBytes ? kStageBytes : kResultBytes;

  static_assert(kWarpsF * 32 == B && kWarpsT * 32 == kTokens && kWarpsF * kWarpsT * 32 == kThreads,
                "4 warps of 32 x 32 cover the tile");
  static_assert(kLd % kChunkElems == 0 && (16 * kLd * E) % 32 == 0 && (B * kLd * E) % 32 == 0 &&
                    (kStageElems * E) % 32 == 0,
                "WMMA loads: ldm a multiple of 16 bytes, 256-bit aligned fragments; cp.async: 16-byte aligned rows");
  static_assert(kCLd % 4 == 0 && (16 * kCLd * 4) % 32 == 0, "WMMA 32-bit stores: ldm % 4 == 0, 256-bit aligned");
  static_assert(kSharedBytes <= 48 * 1024, "static shared memory");
};

// One 16-byte copy of a stage: shared offset (elements, from the stage's
// sa or sx), global offset (elements, from values or x), and whether the
// source exists (else the chunk is zeros). Thread t copies the chunks
// q = t, t + kThreads, ... below kAChunks (kXChunks).
struct BellCopy {
  int64_t dst = 0, src = 0;
  bool valid = true;
};

// Chunk q (< kAChunks) of the W^T block in slot `slot` of block-row br.
template <int B, int E = 2>
SPARQ_HD BellCopy BellStageA(int q, int64_t br, int64_t slot, int64_t ell_cols) {
  using T = BellTile<B, E>;
  const int row = q / T::kChunksPerRow, col = (q % T::kChunksPerRow) * T::kChunkElems;
  BellCopy c;
  c.dst = static_cast<int64_t>(row) * T::kLd + col;
  c.src = (br * B + row) * ell_cols + slot * B + col;
  return c;
}

// Chunk q (< kXChunks) of X's tile: tokens from m0, columns of block column bc.
template <int B, int E = 2>
SPARQ_HD BellCopy BellStageX(int q, int64_t m0, int64_t bc, int64_t m, int64_t k) {
  using T = BellTile<B, E>;
  const int token = q / T::kChunksPerRow, col = (q % T::kChunksPerRow) * T::kChunkElems;
  BellCopy c;
  c.dst = static_cast<int64_t>(token) * T::kLd + col;
  c.valid = m0 + token < m;
  c.src = c.valid ? (m0 + token) * k + bc * B + col : 0;
  return c;
}

// Offsets (elements / sums) of warp w's fragments: A (i, kk) in sa, X (j, kk)
// in sx, and its result (i, j) in sc (stored column-major, ldm kCLd).
template <int B, int E = 2>
SPARQ_HD int BellFragA(int w, int i, int kk) {
  using T = BellTile<B, E>;
  return ((w / T::kWarpsT) * 32 + i * 16) * T::kLd + kk * 16;
}
template <int B, int E = 2>
SPARQ_HD int BellFragX(int w, int j, int kk) {
  using T = BellTile<B, E>;
  return ((w % T::kWarpsT) * 32 + j * 16) * T::kLd + kk * 16;
}
template <int B, int E = 2>
SPARQ_HD int BellFragC(int w, int i, int j) {
  using T = BellTile<B, E>;
  return ((w % T::kWarpsT) * 32 + j * 16) * T::kCLd + (w / T::kWarpsT) * 32 + i * 16;
}

// The output walk: element idx (< B * kTokens, threads stride by kThreads)
// is feature f, token t of the tile, read from sc[t * kCLd + f].
template <int B>
SPARQ_HD void BellOutElement(int idx, int* f, int* t) {
  *f = idx % B;
  *t = idx / B;
}

// The own kernel's arguments (device pointers). W^T [n, k] in Blocked-ELL.
struct BellWmmaArgs {
  int64_t block = 0;                 // 32 or 64
  int64_t n = 0, k = 0;              // W^T's rows and columns (multiples of block)
  int64_t ell_cols = 0;              // slots * block
  const int32_t* col_ind = nullptr;  // [n / block][ell_cols / block], -1 = empty (trailing)
  const void* values = nullptr;      // float16 (int8) [n][ell_cols]
  int64_t m = 0;
  const void* x = nullptr;  // float16 (int8) [m, k] row-major
  void* y = nullptr;        // float16 [m, n] row-major (INT8: the epilogue's output)
};

// NotSupported for what the kernel does not take (another block size, sizes
// not multiples of the block, operands not 16-byte aligned, a grid beyond
// CUDA's limits); InvalidArgument for inconsistent arguments.
inline Status CanImplementBellWmma(const BellWmmaArgs& a) {
  const std::string what = "spmm_bell_wmma " + std::to_string(a.m) + " x " + std::to_string(a.k) + " x " +
                           std::to_string(a.n) + " (block " + std::to_string(a.block) + ")";
  if (a.block != 32 && a.block != 64) return Status::NotSupported(what + ": blocks of 32 or 64 only");
  if (a.m < 0 || a.n < 1 || a.k < 1 || a.ell_cols < a.block) {
    return Status::InvalidArgument(what + ": sizes must be positive, ell_cols at least one block");
  }
  if (a.n % a.block != 0 || a.k % a.block != 0 || a.ell_cols % a.block != 0) {
    return Status::NotSupported(what + ": n, k and ell_cols must be multiples of the block");
  }
  if (a.col_ind == nullptr || a.values == nullptr || (a.m > 0 && (a.x == nullptr || a.y == nullptr))) {
    return Status::InvalidArgument(what + ": null operand");
  }
  auto aligned = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
  if (!aligned(a.values) || !aligned(a.x)) return Status::NotSupported(what + ": operands not 16-byte aligned");
  if (a.n / a.block > 65535) return Status::NotSupported(what + ": more than 65535 block-rows");
  const int64_t tokens = 4096 / a.block;
  if ((a.m + tokens - 1) / tokens > 0x7fffffffLL) return Status::NotSupported(what + ": m too large");
  return Status::OK();
}

}  // namespace cuda
}  // namespace sparq
