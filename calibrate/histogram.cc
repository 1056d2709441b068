// Streaming |x| histograms and the threshold searches that read them.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <utility>

#include "kernels/cpu/dispatch.h"
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

void AbsHistogram::Merge(const AbsHistogram& other) {
  if (other.range_ == 0.0) {  // all zeros: bin 0 on any grid
    counts_[0] += other.total();
    return;
  }
  if (range_ == 0.0) {  // this one all zeros: take the other's grid, keep the zeros in bin 0
    const int64_t zeros = total();
    counts_ = other.counts_;
    range_ = other.range_;
    counts_[0] += zeros;
    return;
  }
  // Both ranges are powers of two: growing the smaller one to the larger
  // merges 2^k bins into one exactly, as streaming more data would have.
  if (range_ < other.range_) GrowTo(other.range_ / 2.0);
  if (other.range_ < range_) {
    AbsHistogram grown = other;
    grown.GrowTo(range_ / 2.0);
    AddCounts(grown.counts_);
    return;
  }
  AddCounts(other.counts_);
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

// std::nearbyint under the default rounding mode, for 0 <= v < 2^52, without
// the libm call that the baseline x86-64 target makes of it: adding 2^52
// leaves no fraction bits, so the sum rounds v to the nearest integer, ties
// to even, exactly as nearbyint does (the searches call it for every bin of
// every candidate that could win).
inline double RoundHalfEven(double v) {
  constexpr double kTwo52 = 4503599627370496.0;
  return (v + kTwo52) - kTwo52;
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
    const double xq = x >= t ? t : s * RoundHalfEven(x / s);
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
  // ruin it. The check (a pass over all bins) runs last, on the candidates
  // in order of KL until one passes: the others cannot win either way, so
  // the result is that of checking every candidate, at a fraction of the
  // cost (checked for every candidate, it was a third of a KL calibration's
  // time).
  int last = nbins - 1;
  while (last > 0 && h.counts()[last] == 0) --last;
  const double max_error = SquaredError(h.counts(), h.bin_width(), (last + 1) * h.bin_width(), quant_levels);
  // Per candidate i, as TensorRT's entropy calibrator: P = the first i bins
  // with everything beyond folded into the last one; Q = those bins without
  // the outliers merged into quant_levels levels and expanded back over the
  // nonzero bins of each level; both normalized, then smoothed (zeros get
  // eps, the nonzero entries give up that mass evenly), KL(P || Q). Computed
  // without materializing P and Q: P's sum is the total count for every i
  // (integers, exact), the zero counts come from a prefix count, and Q's sum
  // adds each level's average times its nonzero bins. A candidate
  // whose smoothing would leave an entry <= 0 is skipped before its KL is
  // summed (TensorRT skips it after: about half of all candidates on real
  // activations), checked in O(levels) from the smallest nonzero count below
  // it; empty bins, whose term is exactly eps * log(eps / eps) = 0, are not
  // visited; and a candidate without empty bins sums per level, not per bin
  // (below). The KL values then differ from the description's in the last
  // bits only (tests/calibrate: the same thresholds as the direct
  // transcription).
  std::vector<int> zeros_before(static_cast<size_t>(nbins) + 1, 0);  // empty bins among the first k
  std::vector<int64_t> count_before(static_cast<size_t>(nbins) + 1, 0);
  std::vector<int64_t> min_nonzero_before(static_cast<size_t>(nbins) + 1, std::numeric_limits<int64_t>::max());
  std::vector<int> nonzero_bins;  // indices of the populated bins, ascending
  for (int k = 0; k < nbins; ++k) {
    zeros_before[k + 1] = zeros_before[k] + (hist[k] == 0);
    count_before[k + 1] = count_before[k] + hist[k];
    min_nonzero_before[k + 1] = hist[k] == 0 ? min_nonzero_before[k] : std::min(min_nonzero_before[k], hist[k]);
    if (hist[k] != 0) nonzero_bins.push_back(k);
  }
  const double total = beyond[0];
  constexpr double kEps = 1e-4;  // SmoothDistribution's
  std::vector<double> plogp_before(static_cast<size_t>(nbins) + 1, 0.0);  // sum of p log p over the first k bins
  for (int k = 0; k < nbins; ++k) {
    const double p = static_cast<double>(hist[k]) / total;
    plogp_before[k + 1] = plogp_before[k] + (hist[k] == 0 ? 0.0 : p * std::log(p));
  }
  std::vector<double> level_avg(static_cast<size_t>(quant_levels));
  // The sums of x log y that hold most of the logarithms go to the
  // xlogy_sum_f64 row (vector logarithms): their operands are gathered here.
  const XLogYSumF64Fn xlogy = SelectCpuKernel(CpuOp::kXLogYSumF64).get<XLogYSumF64Fn>();
  std::vector<double> xs(static_cast<size_t>(nbins)), ys(static_cast<size_t>(nbins)), q_of(static_cast<size_t>(nbins));
  // Per populated bin: its count over the total, and its level for the
  // current `merged` (recomputed when that changes, 16 times over 2048 bins).
  std::vector<double> nonzero_p(nonzero_bins.size());
  for (size_t m = 0; m < nonzero_bins.size(); ++m) nonzero_p[m] = static_cast<double>(hist[nonzero_bins[m]]) / total;
  std::vector<int> nonzero_level(nonzero_bins.size());
  std::vector<double> level_q(static_cast<size_t>(quant_levels));
  int levels_merged = -1;
  int head_merged = -1;  // the `merged` of the levels below the last, as cached in level_avg
  double head_q_sum = 0.0, head_min_avg = 0.0;
  std::vector<std::pair<double, int>> scored;  // (KL, candidate) of every candidate that smoothing keeps
  int cached_merged = -1;      // the `merged` of cached_levels
  double cached_levels = 0.0;  // sum of P log avg over every level but the last, for that `merged`
  for (int i = quant_levels; i <= nbins && total > 0.0; ++i) {
    const double p_last = static_cast<double>(hist[i - 1]) + beyond[i];
    // Smoothing keeps every entry > 0 iff the smallest nonzero P and Q
    // entries stay > 0 (division by a positive total is monotonic, and
    // a - b > 0 iff a > b in floating point); zeros become eps > 0. P first:
    // it needs no level sums.
    const int p_zeros = zeros_before[i - 1] + (p_last == 0.0);
    if (p_zeros == i) continue;
    const double p_eps = kEps * static_cast<double>(p_zeros) / static_cast<double>(i - p_zeros);
    const int64_t min_count = min_nonzero_before[i - 1];
    if (min_count != std::numeric_limits<int64_t>::max() && !(static_cast<double>(min_count) / total - p_eps > 0.0))
      continue;
    if (p_last != 0.0 && !(p_last / total - p_eps > 0.0)) continue;
    const int merged = i / quant_levels;
    // Every level but the last has the same bins for the 128 candidates of
    // one `merged`: their averages, the running sum of Q over them (in level
    // order, so q_sum's bits are those of one pass over all levels) and their
    // smallest nonzero average are computed once for those candidates.
    auto level = [&](int j, int start, int stop) {
      // Integer counts below 2^53: the sum is exact in any order.
      const double sum = static_cast<double>(count_before[stop] - count_before[start]);
      const int nonzero = (stop - start) - (zeros_before[stop] - zeros_before[start]);
      level_avg[j] = nonzero == 0 ? 0.0 : sum / nonzero;
      return nonzero;
    };
    if (merged != head_merged) {
      head_merged = merged;
      head_q_sum = 0.0;
      head_min_avg = std::numeric_limits<double>::infinity();
      for (int j = 0; j < quant_levels - 1; ++j) {
        const int nonzero = level(j, j * merged, (j + 1) * merged);
        head_q_sum += nonzero * level_avg[j];
        if (nonzero > 0) head_min_avg = std::min(head_min_avg, level_avg[j]);
      }
    }
    const int last_nonzero = level(quant_levels - 1, (quant_levels - 1) * merged, i);
    const double q_sum = head_q_sum + last_nonzero * level_avg[quant_levels - 1];
    const double min_avg =
        last_nonzero > 0 ? std::min(head_min_avg, level_avg[quant_levels - 1]) : head_min_avg;
    if (q_sum <= 0.0) continue;
    const int q_zeros = zeros_before[i];
    if (q_zeros == i) continue;
    const double q_eps = kEps * static_cast<double>(q_zeros) / static_cast<double>(i - q_zeros);
    if (!(min_avg / q_sum - q_eps > 0.0)) continue;
    double kl = 0.0;
    const bool last_empty = hist[i - 1] == 0;
    if (p_eps == 0.0) {
      // No empty bin below the last: P is the counts over the total, and Q
      // is one value per level, so KL = sum p log p - sum_levels P_level log
      // q_level, the first a prefix sum (bins before i - 1) plus the last
      // bin: 128 logs instead of one per bin (these are most candidates).
      kl = plogp_before[i - 1];
      auto level_term = [&](int j, double q) {  // P_level log q, the level's bins below i - 1
        const int start = j * merged;
        const int stop = std::min(j == quant_levels - 1 ? i : start + merged, i - 1);
        if (stop <= start || count_before[stop] == count_before[start]) return 0.0;
        return static_cast<double>(count_before[stop] - count_before[start]) / total * std::log(q);
      };
      if (q_eps == 0.0) {
        // log(avg / q_sum) = log(avg) - log(q_sum), and every level but the
        // last has the same bins and average for the 128 candidates of one
        // `merged`: their sum of P log avg is computed once for those.
        if (merged != cached_merged) {
          cached_merged = merged;
          cached_levels = 0.0;
          for (int j = 0; j < quant_levels - 1; ++j) cached_levels += level_term(j, level_avg[j]);
        }
        kl -= cached_levels + level_term(quant_levels - 1, level_avg[quant_levels - 1]);
        kl += static_cast<double>(count_before[i - 1]) / total * std::log(q_sum);
      } else {
        for (int j = 0; j < quant_levels; ++j) {  // P_level log q_level; an empty level adds 0 log 1
          const int start = j * merged;
          const int stop = std::min(j == quant_levels - 1 ? i : start + merged, i - 1);
          const bool empty = stop <= start || count_before[stop] == count_before[start];
          xs[j] = empty ? 0.0 : static_cast<double>(count_before[stop] - count_before[start]) / total;
          ys[j] = empty ? 1.0 : level_avg[j] / q_sum - q_eps;
        }
        kl -= xlogy(xs.data(), ys.data(), nullptr, quant_levels);
      }
      if (p_last != 0.0) {  // the last bin, with the outliers: its level's Q, or eps when its own count is 0
        const double p = p_last / total;
        const double q = last_empty ? kEps : level_avg[quant_levels - 1] / q_sum - q_eps;
        kl += p * std::log(p / q);
      }
    } else {
      // sum of p log(p / q) over the populated bins below i: the bins below
      // i - 1 from the tables, the last one (with the outliers) on its own.
      if (merged != levels_merged) {
        levels_merged = merged;
        for (size_t m = 0; m < nonzero_bins.size(); ++m)
          nonzero_level[m] = std::min(nonzero_bins[m] / merged, quant_levels - 1);
      }
      for (int j = 0; j < quant_levels; ++j) level_q[j] = level_avg[j] / q_sum - q_eps;
      int terms = (i - 1) - zeros_before[i - 1];  // populated bins below i - 1
      for (int m = 0; m < terms; ++m) {
        xs[m] = nonzero_p[m] - p_eps;
        q_of[m] = level_q[nonzero_level[m]];
      }
      if (!last_empty) {
        xs[terms] = p_last / total - p_eps;
        q_of[terms++] = level_q[std::min((i - 1) / merged, quant_levels - 1)];
      }
      kl += xlogy(xs.data(), xs.data(), q_of.data(), terms);
      if (last_empty && p_last != 0.0) {  // the outliers folded into an empty last bin: P > 0, Q = eps
        const double p = p_last / total - p_eps;
        kl += p * std::log(p / kEps);
      }
    }
    scored.push_back({kl, i});
  }
  // The winner is the eligible candidate of least KL, the first in bin order
  // among equals (what checking each candidate in turn with a strict < gives):
  // in (KL, i) order, the first eligible one. Only the candidates before it
  // are checked, not every one whose KL beat the ones before it.
  std::sort(scored.begin(), scored.end());
  for (const auto& [kl, i] : scored)
    if (i == nbins || SquaredError(h.counts(), h.bin_width(), i * h.bin_width(), quant_levels) <= max_error)
      return i * h.bin_width();
  return nbins * h.bin_width();
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
