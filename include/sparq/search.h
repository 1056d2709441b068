// A quantization that searches: a few ways to quantize one float model are
// each calibrated on the fit batches of the calibration data and scored on
// its held-out batches (every holdout_every-th batch; never the evaluation
// data), and the best is returned for the run to calibrate on all the data,
// quantize, evaluate and, when its gate fails, fall back from (quant/fallback.cc).
//
//   calibration ─┬─ fit batches ──> one observation ─┬─ kl ──────────> quantize ─┐
//                │                  (histograms)     ├─ max ─────────> quantize ─┤ score on the
//                │                                   ├─ max + bias correction ───┤ held-out batches
//                │                                   └─ ... (smooth: its own) ───┤ (metric vs FP32,
//                └─ held-out batches ─────────────────────────────────────────────┘  then SQNR)
//
// The observation is shared: every method's thresholds come from the same
// histograms (FinishCalibration), so a candidate costs a quantization and a
// pass over the held-out batches (smoothing and `auto`: one more
// calibration pass each).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "sparq/calibrate.h"
#include "sparq/dataset.h"
#include "sparq/evaluate.h"
#include "sparq/export.h"
#include "sparq/graph.h"
#include "sparq/quantize.h"
#include "sparq/smooth.h"
#include "sparq/status.h"

namespace sparq {

// One way to quantize: a calibration method and the quantizer's switches.
// Spelled "METHOD[+MODIFIER...]": METHOD a name of CalibrationMethods()
// ("kl", "max", "percentile", "mse", "auto"; "percentile=99.9999" sets the
// percentile), MODIFIER one of
//   bias_correction  quantize.bias_correction: true
//   inputs_only      quantize.quantize_outputs: false (Q/DQ on layer inputs only)
//   smooth           quantize.smooth, tried at each of SmoothOptions::alphas
//                    (the candidate scores as its best alpha, which the run uses)
//   asymmetric       uint8 activations with a zero point (symmetric: false)
struct SPARQ_API SearchCandidate {
  std::string name;                       // as spelled
  CalibrationMethodOptions calibration;   // bins from the base options
  bool bias_correction = false;
  bool quantize_outputs = true;
  bool smooth = false;
  double smooth_alpha = 0.5;  // SearchResult::chosen: the alpha that scored best
};

// Parses a candidate's spelling over `base` (its bins and percentile).
// InvalidArgument naming the bad part and the accepted words.
SPARQ_API StatusOr<SearchCandidate> ParseSearchCandidate(const std::string& spec,
                                                         const CalibrationMethodOptions& base = {});

// The default candidates, in the order they are tried (the first always is).
SPARQ_API const std::vector<std::string>& DefaultSearchCandidates();

struct SPARQ_API SearchOptions {
  std::vector<SearchCandidate> candidates;  // tried in order; empty: InvalidArgument
  // Wall-clock seconds after which no further candidate starts (the first
  // always runs); > 0. A cut search depends on the machine's speed: the
  // result says so (SearchResult::budget_hit).
  double budget_s = 300.0;
  int holdout_every = 4;  // >= 2 (quant/holdout.h)
  // Scored on the held-out batches against the float model; a metric that
  // needs labels is replaced by its label-free kin (top1 -> agreement,
  // top5 -> top5_overlap), and box_recall by class_score_sqnr (a held-out
  // quarter holds too few boxes for box recall to tell candidates apart).
  // Higher is better; ties go to the higher output SQNR, then to the
  // earlier candidate. A score in dB (sqnr, class_score_sqnr), and the SQNR
  // of a tie, must beat the best so far by more than 0.5 dB: the held-out
  // batches cannot tell closer ones apart, so the earlier candidate stays.
  Metric metric = Metric::kAgreement;
  BoxOptions boxes;         // for the detector metrics
  MapOptions map;           // for map_iou (its threshold)
  std::string output;       // the graph output `metric` reads (EvaluatorOptions::output); "" = the first
  SmoothOptions smooth;     // min_outlier_ratio and alphas of the smooth candidates
  int threads = 0;          // executor threads; 0 = one per hardware thread
  std::function<void(const std::string&)> log;  // optional: one line per candidate
};

// One row of the search table.
struct SPARQ_API SearchRow {
  std::string candidate;
  std::string metric;      // what `score` is ("agreement", ...)
  double score = 0.0;      // on the held-out batches; NaN when not tried
  double sqnr_db = 0.0;    // output 0 against the float model, held-out batches; NaN when not tried
  double seconds = 0.0;    // its own time (the shared observation counts to the first)
  bool tried = false;
  bool chosen = false;
  std::string note;        // why not tried ("budget", "no outlier channels"); smooth: "alpha 0.6"
  double smooth_alpha = 0.0;  // smooth candidates: the best alpha
};

struct SPARQ_API SearchResult {
  SearchCandidate chosen;
  std::vector<SearchRow> rows;  // one per candidate, in order
  bool split = true;            // false: too few batches, every batch both fit and judged
  bool budget_hit = false;      // some candidate was not tried for lack of time
  int64_t fit_batches = 0, held_batches = 0;
};

// Runs the search on `model` (float32) with `calibration` (read several
// times, each call a fresh pass) and the quantizer's options `base` (static
// INT8; calibration-dependent fields are each candidate's). Errors: those of
// calibration, quantization and the executor, naming the candidate;
// InvalidArgument for no candidates or bad options.
SPARQ_API StatusOr<SearchResult> SearchQuantization(const Model& model, const BatchSource& calibration,
                                                    const QuantizeOptions& base, const SearchOptions& options);

}  // namespace sparq
