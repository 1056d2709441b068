// How the quantization search (quant/search.cc) picks among its tried
// candidates, visible to its tests.
#pragma once

#include "sparq/evaluate.h"
#include "sparq/search.h"

namespace sparq {

// A later candidate replaces the best so far on a score in dB (the held-out
// SQNR, or the SQNR that breaks a tie of another metric) only when it is
// higher by more than this: a few held-out batches cannot tell 0.5 dB (12%
// of the noise power) apart, and the earlier candidates of the list are the
// plainer ones. On the real-model suite every choice but silero_vad's is by
// more than 1 dB; silero_vad's 42.89 against 42.46 dB picked a candidate
// whose file flips 0.5% of the speech decisions (bench/ACCURACY.md).
inline constexpr double kSearchDbMargin = 0.5;

// Whether the tried `row` replaces the tried `best` (an earlier row), the
// rows scored by `held_out_metric`: higher is better; a score in dB (sqnr,
// class_score_sqnr) by more than kSearchDbMargin; equal scores of another
// metric by the output SQNR, again by more than kSearchDbMargin.
bool SearchRowBeats(const SearchRow& row, const SearchRow& best, Metric held_out_metric);

}  // namespace sparq
