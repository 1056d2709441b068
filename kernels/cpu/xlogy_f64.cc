// The xlogy_sum_f64 rows' portable member: the reference's loop (its bits).
// The AVX-512 row is xlogy_f64_avx512.cc.
#include "kernels/cpu/internal.h"
#include "kernels/ref/quantize.h"

namespace sparq {
namespace cpu {

double XLogYSumRowPortable(const double* x, const double* y, const double* z, int64_t n) {
  return XLogYSumRef(x, y, z, n);
}

}  // namespace cpu
}  // namespace sparq
