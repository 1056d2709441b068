// com.microsoft MatMulNBits (onnxruntime's contrib op for block-wise 4-bit
// weights): the layout, the input checks shared by the reference and the fast
// CPU row, and the scalar reference (the spec).
//
//   Y [..., N] = A [..., K] x dequant(B)^T  (+ bias [N])
//
// B holds the weight transposed, one row per output column n, quantized per
// block of `block_size` consecutive k:
//
//   B [N, k_blocks, blob_size] uint8     k_blocks = ceil(K / block_size)
//                                         blob_size = block_size * bits / 8
//   byte (n, b, j) = code(n, b*bs + 2j) | code(n, b*bs + 2j + 1) << 4
//                    (low nibble first; codes past K are padding, ignored)
//   scales [N * k_blocks] (or [N, k_blocks]) float, block (n, b) at n * k_blocks + b
//   zero_points, optional:
//     uint8 [N * ceil(k_blocks / 2)]: row n starts at byte n * ceil(k_blocks / 2),
//       block b in nibble b % 2 of byte b / 2 (low first); absent: 8 for every block
//     or float [N * k_blocks] like scales
//   w(n, k) = (code(n, k) - zero_point(n, k / bs)) * scale(n, k / bs)
//
// Attributes: K, N, bits (4 only), block_size (a power of 2, >= 16),
// accuracy_level (ignored: the reference computes in float32). g_idx (input
// 4) is not supported.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/op_context.h"
#include "sparq/status.h"
#include "sparq/tensor.h"

namespace sparq {

// A checked MatMulNBits node: A viewed as [m, k], Y as [m, n].
struct MatMulNBitsPlan {
  int64_t m = 0, k = 0, n = 0;
  int64_t block_size = 0, k_blocks = 0, blob_size = 0;
  Shape out_shape;
  DataType float_type = DataType::kFloat32;  // A's (and Y's) type: float32 or float16
  bool float_zero_points = false;            // zero points given as floats
};

// Checks inputs and attributes (InvalidArgument / NotSupported naming the node).
StatusOr<MatMulNBitsPlan> PlanMatMulNBits(const OpContext& ctx);

// The float32 views of one node's inputs (null: absent).
struct MatMulNBitsInputs {
  const float* a = nullptr;        // [m, k]
  const uint8_t* b = nullptr;      // [n, k_blocks, blob_size]
  const float* scales = nullptr;   // [n * k_blocks]
  const uint8_t* zero_points = nullptr;   // packed uint8, or null
  const float* float_zero_points = nullptr;  // [n * k_blocks], or null
  const float* bias = nullptr;     // [n], or null
};

// The 4-bit code of weight (n, k) and its block's zero point.
inline int32_t NBitsCode(const uint8_t* b, const MatMulNBitsPlan& p, int64_t n, int64_t k) {
  const int64_t blk = k / p.block_size, j = k % p.block_size;
  const uint8_t byte = b[(n * p.k_blocks + blk) * p.blob_size + j / 2];
  return (j & 1) ? byte >> 4 : byte & 0xf;
}
inline int32_t NBitsZeroPoint(const uint8_t* zp, const MatMulNBitsPlan& p, int64_t n, int64_t blk) {
  if (zp == nullptr) return 8;
  const uint8_t byte = zp[n * ((p.k_blocks + 1) / 2) + blk / 2];
  return (blk & 1) ? byte >> 4 : byte & 0xf;
}

// The reference: each weight dequantized in float32 as (code - zp) * scale
// (a float zero point: (code - zp) * scale in float32), then
// y[i, n] = sum over k in increasing order of a[i, k] * w(n, k), one float32
// multiply and add per term, plus bias[n] after the sum.
void MatMulNBitsRef(const MatMulNBitsPlan& p, const MatMulNBitsInputs& in, float* y);

}  // namespace sparq
