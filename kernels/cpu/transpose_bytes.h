// Byte matrix transposition shared by the INT8 convolutions on the GEMM
// (quant_conv.cc: NCHW <-> NHWC and Y^T -> Y; conv_integer.cc: NCHW -> NHWC).
#pragma once

#include <cstdint>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace sparq {

#if defined(__SSE2__)
// dst[j * ld_dst + i] = src[i * ld_src + j] for a 16 x 16 block (SSE2 is
// part of x86-64): four rounds of interleaving, bytes, pairs, quads, halves.
inline void Transpose16x16(const uint8_t* src, int64_t ld_src, uint8_t* dst, int64_t ld_dst) {
  __m128i a[16], b[16];
  for (int i = 0; i < 16; ++i) a[i] = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i * ld_src));
  for (int k = 0; k < 8; ++k) {
    b[2 * k] = _mm_unpacklo_epi8(a[2 * k], a[2 * k + 1]);
    b[2 * k + 1] = _mm_unpackhi_epi8(a[2 * k], a[2 * k + 1]);
  }
  for (int g = 0; g < 4; ++g) {  // rows 4g..4g+3: columns 0-3, 4-7, 8-11, 12-15
    a[4 * g + 0] = _mm_unpacklo_epi16(b[4 * g + 0], b[4 * g + 2]);
    a[4 * g + 1] = _mm_unpackhi_epi16(b[4 * g + 0], b[4 * g + 2]);
    a[4 * g + 2] = _mm_unpacklo_epi16(b[4 * g + 1], b[4 * g + 3]);
    a[4 * g + 3] = _mm_unpackhi_epi16(b[4 * g + 1], b[4 * g + 3]);
  }
  for (int h = 0; h < 2; ++h) {  // rows 8h..8h+7: column pairs (0,1), (2,3), ..., (14,15)
    for (int q = 0; q < 4; ++q) {
      b[8 * h + 2 * q] = _mm_unpacklo_epi32(a[8 * h + q], a[8 * h + 4 + q]);
      b[8 * h + 2 * q + 1] = _mm_unpackhi_epi32(a[8 * h + q], a[8 * h + 4 + q]);
    }
  }
  for (int k = 0; k < 8; ++k) {  // columns 2k, 2k + 1: rows 0-7 from b[k], rows 8-15 from b[8 + k]
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + (2 * k) * ld_dst), _mm_unpacklo_epi64(b[k], b[8 + k]));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + (2 * k + 1) * ld_dst), _mm_unpackhi_epi64(b[k], b[8 + k]));
  }
}
#endif

// dst[j * ld_dst + i] = src[i * ld_src + j] for i < rows, j in [j0, j1):
// 16 x 16 blocks in SSE2 registers (x86-64), the edges byte by byte.
inline void TransposeBytes(const uint8_t* src, int64_t ld_src, uint8_t* dst, int64_t ld_dst, int64_t rows, int64_t j0,
                    int64_t j1) {
  constexpr int64_t kBlock = 16;
  int64_t i_full = 0, j_full = j0;
#if defined(__SSE2__)
  i_full = rows / kBlock * kBlock;
  j_full = j0 + (j1 - j0) / kBlock * kBlock;
  for (int64_t i = 0; i < i_full; i += kBlock) {
    for (int64_t j = j0; j < j_full; j += kBlock) {
      Transpose16x16(src + i * ld_src + j, ld_src, dst + j * ld_dst + i, ld_dst);
    }
  }
#endif
  for (int64_t j = j_full; j < j1; ++j)  // right edge: every row
    for (int64_t i = 0; i < rows; ++i) dst[j * ld_dst + i] = src[i * ld_src + j];
  for (int64_t j = j0; j < j_full; ++j)  // bottom edge of the full columns
    for (int64_t i = i_full; i < rows; ++i) dst[j * ld_dst + i] = src[i * ld_src + j];
}


}  // namespace sparq
