// PROVISIONAL (gptq branch): the int4 helper's quant/int4.h replaces this at merge.
#pragma once

#include <cstdint>
#include <vector>

#include "sparq/status.h"

namespace sparq {

struct BlockwiseInt4 {      // one weight [K, N] quantized along K per output column n
  int64_t k = 0, n = 0, block_size = 32;
  bool symmetric = false;   // true: int4 codes, no zero points; false: uint4 codes + uint4 zero points
  std::vector<int8_t> codes;        // [K, N] row-major, one code per element (int4 or uint4 values)
  std::vector<float> scales;        // [ceil(K/block), N]
  std::vector<uint8_t> zero_points; // [ceil(K/block), N] when !symmetric
};

StatusOr<BlockwiseInt4> QuantizeInt4Rtn(const float* w, int64_t k, int64_t n, int64_t block_size, bool symmetric);

}  // namespace sparq
