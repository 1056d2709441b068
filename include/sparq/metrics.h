// Accuracy and output-error metrics (used by `sparq eval`).
//
// Class scores are read as rows over the last axis: a tensor of shape
// [N, C] or [N, 1, C] holds N rows of C scores.
#pragma once

#include <cstdint>
#include <limits>
#include <vector>

#include "sparq/export.h"
#include "sparq/status.h"
#include "sparq/tensor.h"

namespace sparq {

// Index of the largest score in each row (the first one on ties; NaN never
// wins unless the whole row is NaN, then 0). Errors: InvalidArgument for a
// rank-0 tensor, an empty last axis or a non-numeric type.
SPARQ_API StatusOr<std::vector<int64_t>> ArgMaxLastAxis(const Tensor& scores);

// Number of rows whose label is among the k highest scores. Ranks follow a
// stable descending sort (ties go to the lower class index), so k = 1 agrees
// with ArgMaxLastAxis; a NaN label score is never counted. `labels` holds one
// integer class id per row. Errors: InvalidArgument for k < 1, a label count
// that differs from the row count, a non-integer label type, or a label
// outside [0, C) (naming the row).
SPARQ_API StatusOr<int64_t> CountTopK(const Tensor& scores, const Tensor& labels, int k);

// Error statistics of an output against a reference, accumulated over
// batches in double precision.
class SPARQ_API ErrorStats {
 public:
  // Adds the elementwise pairs of two numeric tensors of the same shape.
  // Errors: InvalidArgument on a shape mismatch or non-numeric type.
  Status Add(const Tensor& reference, const Tensor& output);

  int64_t count() const { return count_; }
  // Signal-to-quantization-noise ratio in dB:
  // 10 * log10(sum ref^2 / sum (ref - out)^2); +inf when out == ref exactly.
  double sqnr_db() const;
  // Cosine similarity of the flattened tensors: 1 when both are all zeros,
  // 0 when only one is.
  double cosine() const;
  // Largest |ref - out|.
  double max_abs_error() const { return max_abs_error_; }

  // The sums behind the statistics, so that parts of the data (shards)
  // combine into the statistics of all of it (Merge; `sparq eval --merge`).
  struct Sums {
    int64_t count = 0;
    double ref_sq = 0.0, out_sq = 0.0, err_sq = 0.0, dot = 0.0, max_abs_error = 0.0;
  };
  Sums sums() const { return {count_, ref_sq_, out_sq_, err_sq_, dot_, max_abs_error_}; }
  static ErrorStats FromSums(const Sums& s);
  // Adds `other`'s pairs: the sums add (double rounding aside, as if Add had
  // seen both parts' data), the max error is the larger.
  void Merge(const ErrorStats& other);

 private:
  int64_t count_ = 0;
  double ref_sq_ = 0.0;   // sum ref^2
  double out_sq_ = 0.0;   // sum out^2
  double err_sq_ = 0.0;   // sum (ref - out)^2
  double dot_ = 0.0;      // sum ref * out
  double max_abs_error_ = 0.0;
};

// ---------------------------------------------------------------------------
// Task metrics against a reference (FP32) output, for real models whose
// output is not one class per sample (tools/real_suite_metrics.py holds the
// same definitions in numpy for the benchmarks).

// Sum over rows (read as [rows, last dim]) of |topk(out) & topk(ref)| / k,
// each top-k by a stable descending sort (ties go to the lower index; NaN
// never ranks). k larger than the row uses the whole row. Errors:
// InvalidArgument for k < 1, a shape mismatch or no class axis.
SPARQ_API StatusOr<double> SumTopKOverlap(const Tensor& reference, const Tensor& output, int k);

// Cosine of each sample (dim 0; the rest flattened) of `output` with the
// reference's: 1 when both are all zeros, 0 when only one is. Errors:
// InvalidArgument on a shape mismatch, a rank-0 or non-numeric tensor.
SPARQ_API StatusOr<std::vector<double>> SampleCosines(const Tensor& reference, const Tensor& output);

// CTC greedy decoding of per-step class scores [N, T, C] ([T, C] is one
// sample): the argmax per step (ArgMaxLastAxis), repeats merged, `blank`
// dropped. Errors: InvalidArgument for a rank below 2 or no class axis.
SPARQ_API StatusOr<std::vector<std::vector<int64_t>>> CtcGreedyDecode(const Tensor& scores, int64_t blank);

// Levenshtein distance (insertions, deletions, substitutions cost 1).
SPARQ_API int64_t EditDistance(const std::vector<int64_t>& a, const std::vector<int64_t>& b);

// ---------------------------------------------------------------------------
// Detectors: YOLO-style heads, one output [N, 4 + C, A] holding per anchor a
// box (cx, cy, w, h) and C class scores (already through the sigmoid), as
// Ultralytics' YOLOv5u / v8 / v11 ONNX exports write it. FP32's boxes are the
// ground truth (no labels).

struct SPARQ_API BoxOptions {
  // Decode and match boxes in ReferenceMetrics (a sort and an NMS per
  // sample); off: the box metrics read NaN.
  bool enabled = false;
  // An anchor is a box when its best class score is >= this (Ultralytics'
  // `conf`, 0.25). In (0, 1].
  double score_threshold = 0.25;
  // Class-agnostic greedy NMS: a box overlapping a higher-scoring kept box by
  // IoU > this is dropped (Ultralytics' `iou`, 0.7). In (0, 1].
  double nms_iou = 0.7;
  // A candidate box matches a reference box of the same class at IoU >= this. In (0, 1].
  double match_iou = 0.5;
};

// InvalidArgument naming the field when a threshold is outside (0, 1] (or NaN).
SPARQ_API Status CheckBoxOptions(const BoxOptions& options);

struct SPARQ_API DetectedBox {
  double x1 = 0, y1 = 0, x2 = 0, y2 = 0;  // corners, in the output's units (pixels)
  double score = 0;                       // the best class score
  int64_t cls = 0;                        // its class (the first on ties)
};

// The boxes of each sample of `pred` [N, 4 + C, A] ([4 + C, A] is one
// sample): anchors whose best class score >= score_threshold, in descending
// score (ties: the lower anchor first), then greedy class-agnostic NMS at
// nms_iou. NaN scores never pass. Errors: InvalidArgument for a rank other
// than 2 or 3, fewer than 5 rows (4 box rows and a class), a non-numeric type.
SPARQ_API StatusOr<std::vector<std::vector<DetectedBox>>> DecodeYoloBoxes(const Tensor& pred, double score_threshold,
                                                                          double nms_iou);

// Intersection over union of two boxes; 0 when the union is empty.
SPARQ_API double BoxIou(const DetectedBox& a, const DetectedBox& b);

struct SPARQ_API BoxMatch {
  int64_t matched = 0;         // reference boxes matched
  double score_drift = 0.0;    // sum of |candidate score - reference score| over the matches
};
// Greedy matching: each reference box in descending score takes the unmatched
// candidate box of its class with the highest IoU, when that IoU >= match_iou
// (the first such on ties).
SPARQ_API BoxMatch MatchBoxes(const std::vector<DetectedBox>& reference, const std::vector<DetectedBox>& candidate,
                              double match_iou);

// ---------------------------------------------------------------------------
// Thresholded maps: a dense probability map (a note posteriorgram, a text
// detector's probability map) is read through a threshold, so what matters is
// which elements are above it, not the SQNR of mostly-zero values.

struct SPARQ_API MapOptions {
  // Count the thresholded-map overlap in ReferenceMetrics (metric map_iou);
  // off: map_iou reads NaN.
  bool enabled = false;
  // An element is "on" when its value is > this. In (0, 1): the map is a
  // probability (a sigmoid's output).
  double threshold = 0.5;
};

// InvalidArgument naming the threshold when it is outside (0, 1) (or NaN).
SPARQ_API Status CheckMapOptions(const MapOptions& options);

// The overlap of the sets {reference > threshold} and {output > threshold}
// (NaN is never above), in elements, so that batches and shards add exactly.
struct SPARQ_API MapOverlap {
  int64_t intersection = 0;  // elements above in both
  int64_t union_count = 0;   // elements above in either
};
// Errors: InvalidArgument on a shape mismatch, or when either tensor is not
// floating point (a map of class ids or counts is not a probability map).
SPARQ_API StatusOr<MapOverlap> ThresholdedMapOverlap(const Tensor& reference, const Tensor& output, double threshold);

// Accumulates the task metrics of one output against the reference over
// batches: top-5 overlap (classifiers), per-sample cosine (embeddings) and
// the character error rate of CTC greedy decoding with blank 0 (text
// recognizers; FP32's reading is the ground truth), and with
// BoxOptions::enabled the detector metrics (boxes of outputs [N, 4 + C, A]),
// with MapOptions::enabled the thresholded-map IoU pooled over every element.
// A metric that does not apply to the output's shape is not counted and
// reads NaN, so that a gate on it fails rather than passing on nothing.
class SPARQ_API ReferenceMetrics {
 public:
  ReferenceMetrics() = default;
  explicit ReferenceMetrics(const BoxOptions& boxes, const MapOptions& map = {}) : boxes_(boxes), map_(map) {}
  // Errors: InvalidArgument on a shape mismatch or a non-numeric type; with
  // MapOptions::enabled, a tensor that is not floating point.
  Status Add(const Tensor& reference, const Tensor& output);

  int64_t top5_rows() const { return top5_rows_; }
  // Mean top-5 overlap in [0, 1]; NaN when no rows were counted.
  double top5_overlap() const { return top5_rows_ > 0 ? top5_sum_ / static_cast<double>(top5_rows_) : kNaN; }
  int64_t cosine_samples() const { return cosine_samples_; }
  // Mean and smallest per-sample cosine; NaN when no samples were counted.
  double mean_cosine() const {
    return cosine_samples_ > 0 ? cosine_sum_ / static_cast<double>(cosine_samples_) : kNaN;
  }
  double min_cosine() const { return cosine_samples_ > 0 ? cosine_min_ : kNaN; }
  // Samples decoded (rank >= 3 outputs only), the characters FP32 read in
  // them and the edits to those.
  int64_t ctc_samples() const { return ctc_samples_; }
  int64_t ctc_reference_chars() const { return ctc_chars_; }
  int64_t ctc_edits() const { return ctc_edits_; }
  // Edits / reference characters (0 when both are 0, 1 when only FP32 read
  // nothing); NaN when no output of rank >= 3 was decoded.
  double ctc_cer() const {
    if (ctc_samples_ == 0) return kNaN;
    if (ctc_chars_ == 0) return ctc_edits_ > 0 ? 1.0 : 0.0;
    return static_cast<double>(ctc_edits_) / static_cast<double>(ctc_chars_);
  }
  // Detector samples decoded (BoxOptions::enabled, rank-3 outputs with >= 5
  // rows), FP32's boxes, the candidate's boxes and FP32's boxes matched.
  int64_t box_samples() const { return box_samples_; }
  int64_t reference_boxes() const { return reference_boxes_; }
  int64_t candidate_boxes() const { return candidate_boxes_; }
  int64_t matched_boxes() const { return matched_boxes_; }
  // Fraction of FP32's boxes matched (1 when FP32 found none); NaN when no sample was decoded.
  double box_recall() const { return BoxRatio(matched_boxes_, reference_boxes_); }
  // Fraction of the candidate's boxes that match one of FP32's (1 when it found none); NaN as box_recall.
  double box_precision() const { return BoxRatio(matched_boxes_, candidate_boxes_); }
  // Mean |score change| of the matched boxes (0 with no match); NaN as box_recall.
  double score_drift() const {
    if (box_samples_ == 0) return kNaN;
    return matched_boxes_ > 0 ? drift_sum_ / static_cast<double>(matched_boxes_) : 0.0;
  }
  // SQNR in dB of the class-score rows (4 onwards) alone: the box
  // coordinates (pixels) dominate the whole output's SQNR and hide score
  // errors. +inf when identical; NaN as box_recall.
  double class_score_sqnr_db() const;
  const BoxOptions& box_options() const { return boxes_; }
  // Thresholded map (MapOptions::enabled): elements compared, and those above
  // the threshold in both / in either of the two outputs, over all batches.
  int64_t map_elements() const { return map_elements_; }
  int64_t map_intersection() const { return map_intersection_; }
  int64_t map_union() const { return map_union_; }
  // Intersection / union of the two thresholded maps, pooled over every
  // element of the data (not a mean of per-sample IoUs), in [0, 1]; 1 when
  // neither map has an element above the threshold; NaN when no element was
  // compared (MapOptions off, or no data).
  double map_iou() const {
    if (map_elements_ == 0) return kNaN;
    return map_union_ > 0 ? static_cast<double>(map_intersection_) / static_cast<double>(map_union_) : 1.0;
  }
  const MapOptions& map_options() const { return map_; }

  // The sums and counts behind the metrics, so that parts of the data
  // (shards) combine exactly (counts) or up to double rounding (sums).
  struct Sums {
    double top5_sum = 0.0;
    int64_t top5_rows = 0;
    double cosine_sum = 0.0, cosine_min = 1.0;
    int64_t cosine_samples = 0;
    int64_t ctc_samples = 0, ctc_chars = 0, ctc_edits = 0;
    int64_t box_samples = 0, reference_boxes = 0, candidate_boxes = 0, matched_boxes = 0;
    double drift_sum = 0.0, score_ref_sq = 0.0, score_err_sq = 0.0;
    int64_t map_elements = 0, map_intersection = 0, map_union = 0;
  };
  Sums sums() const;
  static ReferenceMetrics FromSums(const BoxOptions& boxes, const Sums& s, const MapOptions& map = {});
  // Adds `other`'s rows and samples (its box and map options must be the
  // same): the map counts add, so the merged map_iou is exactly one run's.
  void Merge(const ReferenceMetrics& other);

 private:
  static constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
  double top5_sum_ = 0.0;
  int64_t top5_rows_ = 0;
  double cosine_sum_ = 0.0;
  double cosine_min_ = 1.0;
  int64_t cosine_samples_ = 0;
  int64_t ctc_samples_ = 0;
  int64_t ctc_chars_ = 0;
  int64_t ctc_edits_ = 0;
  double BoxRatio(int64_t num, int64_t den) const {
    if (box_samples_ == 0) return kNaN;
    return den > 0 ? static_cast<double>(num) / static_cast<double>(den) : 1.0;
  }
  BoxOptions boxes_;
  int64_t box_samples_ = 0;
  int64_t reference_boxes_ = 0;
  int64_t candidate_boxes_ = 0;
  int64_t matched_boxes_ = 0;
  double drift_sum_ = 0.0;
  double score_ref_sq_ = 0.0;  // sum ref^2 over the class-score rows
  double score_err_sq_ = 0.0;  // sum (ref - out)^2 over them
  MapOptions map_;
  int64_t map_elements_ = 0;
  int64_t map_intersection_ = 0;
  int64_t map_union_ = 0;
};

}  // namespace sparq
