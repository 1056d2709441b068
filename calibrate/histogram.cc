// Streaming |x| histograms and the threshold searches that read them.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "sparq/calibrate.h"

namespace sparq {

int64_t AbsHistogram::total() const { return std::accumulate(counts_.begin(), counts_.end(), int64_t{0}); }

AbsHistogram AbsHistogram::FromCounts(std::vector<int64_t> counts, double range) {
  AbsHistogram h(static_cast<int>(counts.size()));
  h.counts_ = std::move(counts);
  h.range_ = range;
  return h;
}

void AbsHistogram::GrowTo(double needed) {
  // Double the range until it exceeds `needed`; each doubling merges bin pairs.
  const size_t n = counts_.size();
  while (range_ <= needed) {
    for (size_t j = 0; j < n; ++j) {
      int64_t merged = 0;
      if (2 * j < n) merged += counts_[2 * j];
      if (2 * j + 1 < n) merged += counts_[2 * j + 1];
      counts_[j] = merged;
    }
    range_ *= 2.0;
  }
}

// The range is always a power of two above every |x| seen: the smallest
// such for the first data, doubled as needed. So the final grid is the
// smallest power of two above the largest |x| whatever the batch size or
// order, and the counts do not depend on them either: with bins * 2^-k as
// the scale, |x| * scale is exact in double, and bin b of range R is exactly
// bins 2b and 2b + 1 of range R / 2 (no value ever sits on the range).
void AbsHistogram::Cover(double max_abs) {
  if (!(max_abs > 0.0)) return;
  if (range_ == 0.0) {
    int exponent = 0;
    std::frexp(max_abs, &exponent);  // max_abs = m * 2^exponent, m in [0.5, 1)
    range_ = std::ldexp(1.0, exponent);
  } else if (max_abs >= range_) {
    GrowTo(max_abs);
  }
}

void AbsHistogram::AddCounts(const std::vector<int64_t>& counts) {
  for (size_t i = 0; i < counts_.size() && i < counts.size(); ++i) counts_[i] += counts[i];
}

void AbsHistogram::Add(const float* values, int64_t n) {
  float batch_max = 0.0f;
  for (int64_t i = 0; i < n; ++i) batch_max = std::max(batch_max, std::fabs(values[i]));
  Cover(batch_max);
  if (range_ == 0.0) {
    counts_[0] += n;  // all zeros so far: they stay in bin 0 whatever the range becomes
    return;
  }
  const double scale = static_cast<double>(counts_.size()) / range_;
  const int64_t last = static_cast<int64_t>(counts_.size()) - 1;
  for (int64_t i = 0; i < n; ++i) {
    int64_t b = static_cast<int64_t>(std::fabs(values[i]) * scale);
    counts_[static_cast<size_t>(std::min(b, last))] += 1;
  }
}

namespace {

// Smooths a normalized distribution so no entry is zero (as TensorRT/MXNet
// do): zeros get eps, the nonzero entries give up that mass evenly. Returns
// false when that would make an entry non-positive.
bool SmoothDistribution(std::vector<double>& p) {
  constexpr double kEps = 1e-4;
  size_t zeros = 0;
  for (double v : p) zeros += v == 0.0;
  const size_t nonzeros = p.size() - zeros;
  if (nonzeros == 0) return false;
  const double eps1 = kEps * static_cast<double>(zeros) / static_cast<double>(nonzeros);
  for (double& v : p) {
    v = v == 0.0 ? kEps : v - eps1;
    if (v <= 0.0) return false;
  }
  return true;
}

bool Normalize(std::vector<double>& p) {
  double sum = std::accumulate(p.begin(), p.end(), 0.0);
  if (sum <= 0.0) return false;
  for (double& v : p) v /= sum;
  return true;
}

// Expected squared error, from the histogram, of quantizing |x| with
// threshold t: values beyond t clip to t, the rest round to a step of
// t / (quant_levels - 1). Each bin counts as its center value.
double SquaredError(const std::vector<int64_t>& counts, double bin_width, double t, int quant_levels) {
  const double s = t / (quant_levels - 1);
  double err = 0.0;
  for (size_t b = 0; b < counts.size(); ++b) {
    const int64_t c = counts[b];
    if (c == 0) continue;
    const double x = (static_cast<double>(b) + 0.5) * bin_width;
    const double xq = x >= t ? t : s * std::nearbyint(x / s);
    err += static_cast<double>(c) * (x - xq) * (x - xq);
  }
  return err;
}

}  // namespace

double KlThreshold(const AbsHistogram& h, int quant_levels) {
  const int nbins = h.bins();
  if (h.range() == 0.0 || h.total() == 0) return 0.0;
  // Bin 0 holds the exact zeros (ReLU outputs, padding): a spike that says
  // nothing about where to clip but dominates P. Like NVIDIA's reference
  // entropy calibrator (pytorch-quantization), give it bin 1's count - but
  // only when bin 1 is populated: for discrete data (image pixels in steps
  // of 1/16) an empty bin 1 would leave P a few spikes, whose KL is 0 at the
  // first spike, a degenerate clip.
  std::vector<int64_t> hist = h.counts();
  if (nbins > 1 && hist[1] > 0) hist[0] = std::min(hist[0], hist[1]);
  // Suffix sums give the outlier mass beyond each candidate in O(1).
  std::vector<double> beyond(static_cast<size_t>(nbins) + 1, 0.0);
  for (int i = nbins - 1; i >= 0; --i) beyond[i] = beyond[i + 1] + static_cast<double>(hist[i]);

  // The guard that keeps KL from collapsing a model: KL weighs a value by how
  // often it occurs, not by how large it is, so a long sparse tail (outlier
  // channels, attention and CTC logits, one-sided pre-activations) costs it
  // almost nothing to clip, and its minimum can sit at the smallest candidate
  // (range / 16), far below the useful range. A candidate is only eligible
  // when its expected squared error (clipping + rounding) is no worse than
  // that of keeping the whole range (max): KL can then refine max, never
  // ruin it.
  int last = nbins - 1;
  while (last > 0 && h.counts()[last] == 0) --last;
  const double max_error = SquaredError(h.counts(), h.bin_width(), (last + 1) * h.bin_width(), quant_levels);
  double best_kl = std::numeric_limits<double>::infinity();
  int best_i = nbins;
  std::vector<double> p, q;
  for (int i = quant_levels; i <= nbins; ++i) {
    if (i < nbins && SquaredError(h.counts(), h.bin_width(), i * h.bin_width(), quant_levels) > max_error) continue;
    // P: the first i bins, with everything beyond folded into the last one.
    p.assign(hist.begin(), hist.begin() + i);
    p[i - 1] += beyond[i];
    // Q: the first i bins (without outliers) merged into quant_levels levels
    // and expanded back over the nonzero bins of each level.
    q.assign(static_cast<size_t>(i), 0.0);
    const int merged = i / quant_levels;
    for (int j = 0; j < quant_levels; ++j) {
      const int start = j * merged;
      const int stop = j == quant_levels - 1 ? i : start + merged;
      double sum = 0.0;
      int nonzero = 0;
      for (int k = start; k < stop; ++k) {
        sum += static_cast<double>(hist[k]);
        nonzero += hist[k] != 0;
      }
      if (nonzero == 0) continue;
      const double avg = sum / nonzero;
      for (int k = start; k < stop; ++k)
        if (hist[k] != 0) q[k] = avg;
    }
    if (!Normalize(p) || !Normalize(q) || !SmoothDistribution(p) || !SmoothDistribution(q)) continue;
    double kl = 0.0;
    for (int k = 0; k < i; ++k) kl += p[k] * std::log(p[k] / q[k]);
    if (kl < best_kl) {
      best_kl = kl;
      best_i = i;
    }
  }
  return best_i * h.bin_width();
}

double PercentileThreshold(const AbsHistogram& h, double percentile) {
  const int64_t total = h.total();
  if (h.range() == 0.0 || total == 0) return 0.0;
  const double target = static_cast<double>(total) * percentile / 100.0;
  int64_t cum = 0;
  for (int i = 0; i < h.bins(); ++i) {
    cum += h.counts()[i];
    if (static_cast<double>(cum) >= target) return (i + 1) * h.bin_width();
  }
  return h.range();
}

double MseThreshold(const AbsHistogram& h, int quant_levels) {
  if (h.range() == 0.0 || h.total() == 0) return 0.0;
  const int nbins = h.bins();
  const double w = h.bin_width();
  double best_err = std::numeric_limits<double>::infinity();
  int best_i = nbins;
  // Candidates: every bin edge from 1/16 of the range up. Error of each bin
  // is that of its center value after fake quantization (clip + round).
  for (int i = std::max(1, nbins / 16); i <= nbins; ++i) {
    const double err = SquaredError(h.counts(), w, i * w, quant_levels);
    if (err < best_err) {
      best_err = err;
      best_i = i;
    }
  }
  return best_i * w;
}

}  // namespace sparq
