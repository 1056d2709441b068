// The abs_histogram_f32 rows: calibration's streaming |x| histograms
// (calibrate/calibrator.cc), bin = min(int64(|x| * scale), last) counted.
// The SIMD rows (histogram_f32_avx2.cc, histogram_f32_avx512.cc) compute the
// bins of a block of values in vectors; counting them is scalar, here, into
// four sub-histograms taken in turn, so that a run of equal bins (the zeros
// after a ReLU, a saturated clip) is not one chain of dependent increments
// through memory. Counts are integers: the same histogram as the reference,
// whatever the order.
#include "kernels/cpu/internal.h"
#include "kernels/ref/quantize.h"

namespace sparq {
namespace cpu {

int64_t AbsHistogramRowPortable(const float* x, int64_t n, double scale, int64_t last, int64_t* counts) {
  return AbsHistogramRef(x, n, scale, last, counts);
}

BinCounter::BinCounter(int64_t bins) : bins_(bins), sub_(static_cast<size_t>(kWays * bins), 0) {}

void BinCounter::Count(const int32_t* bin, int64_t n) {
  uint32_t* sub = sub_.data();
  int64_t i = 0;
  for (; i + kWays <= n; i += kWays) {
    sub[bin[i]] += 1;
    sub[bins_ + bin[i + 1]] += 1;
    sub[2 * bins_ + bin[i + 2]] += 1;
    sub[3 * bins_ + bin[i + 3]] += 1;
  }
  for (; i < n; ++i) sub[bin[i]] += 1;
}

void BinCounter::Drain(int64_t* counts) {
  for (int64_t b = 0; b < bins_; ++b) {
    counts[b] += static_cast<int64_t>(sub_[b]) + sub_[bins_ + b] + sub_[2 * bins_ + b] + sub_[3 * bins_ + b];
    sub_[b] = sub_[bins_ + b] = sub_[2 * bins_ + b] = sub_[3 * bins_ + b] = 0;
  }
}

}  // namespace cpu
}  // namespace sparq
