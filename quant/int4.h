// INT4 weight-only quantization, block-wise along K (internal to quant).
//
// One weight W [K, N] (MatMul's B; a Gemm's B seen as [K, N]) is quantized per
// output column n in blocks of `block_size` consecutive k. The math lives in
// BlockwiseInt4, which every method fills (RTN here; GPTQ and AWQ write the
// same struct), and the writers turn it into the two file forms:
//
//   MatMulNBits (com.microsoft):                  opset-21 DequantizeLinear:
//     B [N, k_blocks, block_size / 2] uint8          weight int4/uint4 [K, N]
//     scales [N, k_blocks] float                     scales [k_blocks, N] float
//     zero_points [N, ceil(k_blocks / 2)] uint8      zero_points uint4 [k_blocks, N]
//       (absent when symmetric: 8)                    (absent when symmetric)
//                                                    axis 0, block_size
//
// K not a multiple of block_size: the last block is short; in MatMulNBits its
// codes are padded with 0 (never read) and an odd k_blocks' unused zero point
// nibble is 8, the bytes onnxruntime's quantizer writes.
#pragma once

#include <cstdint>
#include <vector>

#include "sparq/quantize.h"
#include "sparq/status.h"
#include "sparq/tensor.h"

namespace sparq {

struct BlockwiseInt4 {      // one weight [K, N] quantized along K per output column n
  int64_t k = 0, n = 0, block_size = 32;
  bool symmetric = false;   // true: int4 codes, no zero points; false: uint4 codes + uint4 zero points
  std::vector<int8_t> codes;        // [K, N] row-major, one code per element (int4 or uint4 values)
  std::vector<float> scales;        // [ceil(K/block), N]
  std::vector<uint8_t> zero_points; // [ceil(K/block), N] when !symmetric

  int64_t k_blocks() const { return (k + block_size - 1) / block_size; }
  // The float value code (k, n) stands for: (code - zero_point) * scale, in float32.
  float Dequantized(int64_t kk, int64_t nn) const;
};

// The block sizes sparq writes: 16, 32, 64, 128, 256 (MatMulNBits needs a
// power of two >= 16). InvalidArgument otherwise.
Status CheckInt4BlockSize(int64_t block_size);

// Round to nearest, per block of column n (onnxruntime's MatMulNBits
// quantizer's arithmetic, so both give the same codes):
//   asymmetric: lo = min(0, min w), hi = max(0, max w), scale = (hi - lo) / 15,
//               zp = clamp(roundf(-lo / scale), 0, 15) (0 when scale is 0),
//               code = clamp(roundf(w * (1 / scale) + zp), 0, 15)
//   symmetric:  m = the block's value of largest magnitude (signed),
//               scale = m / -8 (m itself maps to -8; the scale may be negative),
//               code = clamp(roundf(w * (1 / scale) + 8), 0, 15) - 8
// (1 / scale taken as 0 when scale is 0). roundf rounds halves away from zero.
// `w` is [k, n] row-major. Errors: InvalidArgument for a bad block size or
// shape, or a non-finite weight (naming its index).
StatusOr<BlockwiseInt4> QuantizeInt4Rtn(const float* w, int64_t k, int64_t n, int64_t block_size, bool symmetric);

// MatMulNBits' constant inputs (layout above); zero_points undefined when symmetric.
struct MatMulNBitsWeights {
  Tensor b, scales, zero_points;
};
MatMulNBitsWeights ToMatMulNBits(const BlockwiseInt4& q);

// DequantizeLinear's inputs (axis 0, block_size q.block_size); zero_points
// undefined when symmetric.
struct BlockedDqWeights {
  Tensor weight, scales, zero_points;
};
BlockedDqWeights ToBlockedDequantizeLinear(const BlockwiseInt4& q);

// The model at opset 21 (blocked DequantizeLinear): ONNX's version converter,
// or where it cannot (the one sparq links stops at 17), from opset 13 on the
// import raised with the reductions' axes attributes moved to inputs (opset
// 18); NotSupported for older models, subgraphs and the few ops whose meaning
// changed. Returns what it did ("" when the model was at 21 already).
StatusOr<std::string> UpgradeOpsetTo21(Model& model);

}  // namespace sparq
