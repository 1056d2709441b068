// PROVISIONAL (gptq branch): RTN until the int4 branch's quant/int4.cc lands.
#include "quant/gptq.h"
#include "quant/int4.h"

namespace sparq {

StatusOr<BlockwiseInt4> QuantizeInt4Rtn(const float* w, int64_t k, int64_t n, int64_t block_size, bool symmetric) {
  if (k <= 0 || n <= 0 || block_size <= 0) return Status::InvalidArgument("int4: bad shape");
  BlockwiseInt4 q;
  q.k = k, q.n = n, q.block_size = block_size, q.symmetric = symmetric;
  const int64_t blocks = (k + block_size - 1) / block_size;
  q.codes.resize(static_cast<size_t>(k * n));
  q.scales.resize(static_cast<size_t>(blocks * n));
  if (!symmetric) q.zero_points.resize(static_cast<size_t>(blocks * n));
  for (int64_t b = 0; b < blocks; ++b) {
    const int64_t r0 = b * block_size, count = std::min(block_size, k - r0);
    for (int64_t c = 0; c < n; ++c) {
      const Int4Params p = Int4BlockParams(w + r0 * n + c, count, n, symmetric);
      q.scales[b * n + c] = p.scale;
      if (!symmetric) q.zero_points[b * n + c] = p.zero_point;
      for (int64_t r = r0; r < r0 + count; ++r) q.codes[r * n + c] = Int4Code(w[r * n + c], p, symmetric);
    }
  }
  return q;
}

}  // namespace sparq
