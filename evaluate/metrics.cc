#include "sparq/metrics.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

namespace sparq {
namespace {

bool IsNumeric(DataType t) { return GetDataTypeInfo(t) != nullptr; }

bool IsIntegerType(DataType t) {
  const DataTypeInfo* info = GetDataTypeInfo(t);
  return info != nullptr && !info->is_float && t != DataType::kBool;
}

// Reads element i of a numeric tensor as double, with fast paths for floats.
class DoubleReader {
 public:
  explicit DoubleReader(const Tensor& t) : t_(t) {
    if (t.dtype() == DataType::kFloat32) f32_ = t.data<float>();
    if (t.dtype() == DataType::kFloat64) f64_ = t.data<double>();
  }
  double operator[](int64_t i) const {
    if (f32_ != nullptr) return f32_[i];
    if (f64_ != nullptr) return f64_[i];
    return t_.GetAsDouble(i);
  }

 private:
  const Tensor& t_;
  const float* f32_ = nullptr;
  const double* f64_ = nullptr;
};

// Rows and columns of `scores` read as [rows, last dim].
Status RowsOf(const Tensor& scores, int64_t* rows, int64_t* classes) {
  if (!IsNumeric(scores.dtype())) {
    return Status::InvalidArgument("class scores must be numeric, got " + DataTypeName(scores.dtype()));
  }
  if (scores.rank() == 0 || scores.shape().back() == 0) {
    return Status::InvalidArgument("class scores of shape " + ShapeToString(scores.shape()) +
                                   " have no class axis (the last axis)");
  }
  *classes = scores.shape().back();
  *rows = scores.numel() / *classes;
  return Status::OK();
}

// Both numeric and of one shape: what every comparison of two outputs needs.
Status SameShape(const Tensor& reference, const Tensor& output) {
  if (!IsNumeric(reference.dtype()) || !IsNumeric(output.dtype())) {
    return Status::InvalidArgument("cannot compare " + DataTypeName(reference.dtype()) + " with " +
                                   DataTypeName(output.dtype()) + ": both must be numeric");
  }
  if (reference.shape() != output.shape()) {
    return Status::InvalidArgument("shape " + ShapeToString(output.shape()) + " differs from the reference's " +
                                   ShapeToString(reference.shape()));
  }
  return Status::OK();
}

}  // namespace

StatusOr<std::vector<int64_t>> ArgMaxLastAxis(const Tensor& scores) {
  int64_t rows = 0, classes = 0;
  SPARQ_RETURN_IF_ERROR(RowsOf(scores, &rows, &classes));
  DoubleReader s(scores);
  std::vector<int64_t> best(static_cast<size_t>(rows), 0);
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t base = r * classes;
    int64_t arg = -1;
    double top = 0.0;
    for (int64_t c = 0; c < classes; ++c) {
      const double v = s[base + c];
      if (std::isnan(v)) continue;
      if (arg < 0 || v > top) {
        arg = c;
        top = v;
      }
    }
    best[static_cast<size_t>(r)] = arg < 0 ? 0 : arg;
  }
  return best;
}

StatusOr<int64_t> CountTopK(const Tensor& scores, const Tensor& labels, int k) {
  if (k < 1) return Status::InvalidArgument("top-k needs k >= 1, got " + std::to_string(k));
  int64_t rows = 0, classes = 0;
  SPARQ_RETURN_IF_ERROR(RowsOf(scores, &rows, &classes));
  if (!IsIntegerType(labels.dtype())) {
    return Status::InvalidArgument("labels must be integer class ids, got " + DataTypeName(labels.dtype()));
  }
  if (labels.numel() != rows) {
    return Status::InvalidArgument(std::to_string(labels.numel()) + " labels for " + std::to_string(rows) +
                                   " rows of class scores " + ShapeToString(scores.shape()));
  }
  const std::vector<int64_t> ids = labels.ToInt64Vector();
  DoubleReader s(scores);
  int64_t correct = 0;
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t label = ids[static_cast<size_t>(r)];
    if (label < 0 || label >= classes) {
      return Status::InvalidArgument("label " + std::to_string(label) + " of row " + std::to_string(r) +
                                     " is outside the " + std::to_string(classes) + " classes [0, " +
                                     std::to_string(classes - 1) + "]");
    }
    const int64_t base = r * classes;
    const double target = s[base + label];
    if (std::isnan(target)) continue;
    // Position of the label in a stable descending sort of the row.
    int64_t rank = 0;
    for (int64_t c = 0; c < classes && rank < k; ++c) {
      const double v = s[base + c];
      if (v > target || (v == target && c < label)) ++rank;
    }
    if (rank < k) ++correct;
  }
  return correct;
}

Status ErrorStats::Add(const Tensor& reference, const Tensor& output) {
  SPARQ_RETURN_IF_ERROR(SameShape(reference, output));
  DoubleReader ref(reference), out(output);
  for (int64_t i = 0; i < reference.numel(); ++i) {
    const double r = ref[i], o = out[i];
    const double err = r == o ? 0.0 : r - o;  // equal infinities are no error
    ref_sq_ += r * r;
    out_sq_ += o * o;
    err_sq_ += err * err;
    dot_ += r * o;
    const double abs_err = std::fabs(err);
    if (std::isnan(abs_err) || abs_err > max_abs_error_) max_abs_error_ = abs_err;  // NaN sticks
  }
  count_ += reference.numel();
  return Status::OK();
}

ErrorStats ErrorStats::FromSums(const Sums& s) {
  ErrorStats e;
  e.count_ = s.count, e.ref_sq_ = s.ref_sq, e.out_sq_ = s.out_sq, e.err_sq_ = s.err_sq, e.dot_ = s.dot;
  e.max_abs_error_ = s.max_abs_error;
  return e;
}

void ErrorStats::Merge(const ErrorStats& other) {
  count_ += other.count_;
  ref_sq_ += other.ref_sq_;
  out_sq_ += other.out_sq_;
  err_sq_ += other.err_sq_;
  dot_ += other.dot_;
  max_abs_error_ = std::max(max_abs_error_, other.max_abs_error_);
}

double ErrorStats::sqnr_db() const {
  if (std::isnan(err_sq_) || std::isnan(ref_sq_)) return std::numeric_limits<double>::quiet_NaN();
  if (err_sq_ == 0.0) return std::numeric_limits<double>::infinity();
  return 10.0 * std::log10(ref_sq_ / err_sq_);
}

double ErrorStats::cosine() const {
  if (ref_sq_ == 0.0 && out_sq_ == 0.0) return 1.0;
  if (ref_sq_ == 0.0 || out_sq_ == 0.0) return 0.0;
  return dot_ / (std::sqrt(ref_sq_) * std::sqrt(out_sq_));
}

namespace {

// Indices of the k largest values of row `base` (NaN never ranks), by a
// stable descending sort.
std::vector<int64_t> TopKOfRow(const DoubleReader& s, int64_t base, int64_t classes, int64_t k) {
  std::vector<int64_t> idx(static_cast<size_t>(classes));
  std::iota(idx.begin(), idx.end(), int64_t{0});
  auto greater = [&](int64_t a, int64_t b) {
    const double va = s[base + a], vb = s[base + b];
    if (std::isnan(va) || std::isnan(vb)) return !std::isnan(va) && std::isnan(vb);
    return va > vb;
  };
  std::partial_sort(idx.begin(), idx.begin() + k, idx.end(), [&](int64_t a, int64_t b) {
    if (greater(a, b)) return true;
    if (greater(b, a)) return false;
    return a < b;  // ties: the lower index first
  });
  idx.resize(static_cast<size_t>(k));
  return idx;
}

}  // namespace

StatusOr<double> SumTopKOverlap(const Tensor& reference, const Tensor& output, int k) {
  if (k < 1) return Status::InvalidArgument("top-k overlap needs k >= 1, got " + std::to_string(k));
  SPARQ_RETURN_IF_ERROR(SameShape(reference, output));
  int64_t rows = 0, classes = 0;
  SPARQ_RETURN_IF_ERROR(RowsOf(reference, &rows, &classes));
  const int64_t kk = std::min<int64_t>(k, classes);
  DoubleReader r(reference), o(output);
  double sum = 0.0;
  for (int64_t row = 0; row < rows; ++row) {
    std::vector<int64_t> a = TopKOfRow(r, row * classes, classes, kk);
    std::vector<int64_t> b = TopKOfRow(o, row * classes, classes, kk);
    std::sort(a.begin(), a.end());
    std::sort(b.begin(), b.end());
    std::vector<int64_t> common;
    std::set_intersection(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(common));
    sum += static_cast<double>(common.size()) / static_cast<double>(kk);
  }
  return sum;
}

StatusOr<std::vector<double>> SampleCosines(const Tensor& reference, const Tensor& output) {
  SPARQ_RETURN_IF_ERROR(SameShape(reference, output));
  if (reference.rank() == 0) return Status::InvalidArgument("per-sample cosine needs a sample axis, got a scalar");
  const int64_t n = reference.dim(0);
  const int64_t per = n > 0 ? reference.numel() / n : 0;
  DoubleReader r(reference), o(output);
  std::vector<double> out(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    double rr = 0.0, oo = 0.0, ro = 0.0;
    for (int64_t j = i * per; j < (i + 1) * per; ++j) {
      rr += r[j] * r[j];
      oo += o[j] * o[j];
      ro += r[j] * o[j];
    }
    double c = 0.0;
    if (rr == 0.0 && oo == 0.0) {
      c = 1.0;
    } else if (rr != 0.0 && oo != 0.0) {
      c = ro / (std::sqrt(rr) * std::sqrt(oo));
    }
    out[static_cast<size_t>(i)] = c;
  }
  return out;
}

StatusOr<std::vector<std::vector<int64_t>>> CtcGreedyDecode(const Tensor& scores, int64_t blank) {
  if (scores.rank() < 2) {
    return Status::InvalidArgument("CTC decoding needs scores [N, T, C] or [T, C], got " +
                                   ShapeToString(scores.shape()));
  }
  SPARQ_ASSIGN_OR_RETURN(std::vector<int64_t> best, ArgMaxLastAxis(scores));
  const int64_t steps = scores.dim(scores.rank() - 2);
  const int64_t n = steps > 0 ? static_cast<int64_t>(best.size()) / steps : 0;
  std::vector<std::vector<int64_t>> out(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    int64_t prev = -1;
    for (int64_t t = 0; t < steps; ++t) {
      const int64_t c = best[static_cast<size_t>(i * steps + t)];
      if (c != prev && c != blank) out[static_cast<size_t>(i)].push_back(c);
      prev = c;
    }
  }
  return out;
}

int64_t EditDistance(const std::vector<int64_t>& a, const std::vector<int64_t>& b) {
  std::vector<int64_t> prev(b.size() + 1), cur(b.size() + 1);
  std::iota(prev.begin(), prev.end(), int64_t{0});
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = static_cast<int64_t>(i);
    for (size_t j = 1; j <= b.size(); ++j) {
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] != b[j - 1] ? 1 : 0)});
    }
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

Status CheckBoxOptions(const BoxOptions& options) {
  const std::pair<const char*, double> fields[] = {{"score_threshold", options.score_threshold},
                                                   {"nms_iou", options.nms_iou},
                                                   {"match_iou", options.match_iou}};
  for (const auto& [name, value] : fields) {
    if (!(value > 0.0 && value <= 1.0)) {
      return Status::InvalidArgument(std::string("box ") + name + " must be in (0, 1], got " + std::to_string(value));
    }
  }
  return Status::OK();
}

Status CheckMapOptions(const MapOptions& options) {
  if (!(options.threshold > 0.0 && options.threshold < 1.0)) {
    return Status::InvalidArgument("map threshold must be in (0, 1) (a probability map's), got " +
                                   std::to_string(options.threshold));
  }
  return Status::OK();
}

StatusOr<MapOverlap> ThresholdedMapOverlap(const Tensor& reference, const Tensor& output, double threshold) {
  for (const Tensor* t : {&reference, &output}) {
    const DataTypeInfo* info = GetDataTypeInfo(t->dtype());
    if (info == nullptr || !info->is_float) {
      return Status::InvalidArgument("map_iou thresholds a probability map; the output is " +
                                     DataTypeName(t->dtype()) + ", not floating point");
    }
  }
  SPARQ_RETURN_IF_ERROR(SameShape(reference, output));
  DoubleReader r(reference), o(output);
  MapOverlap m;
  for (int64_t i = 0; i < reference.numel(); ++i) {
    const bool a = r[i] > threshold, b = o[i] > threshold;  // NaN is never above
    m.intersection += (a && b) ? 1 : 0;
    m.union_count += (a || b) ? 1 : 0;
  }
  return m;
}

StatusOr<std::vector<std::vector<DetectedBox>>> DecodeYoloBoxes(const Tensor& pred, double score_threshold,
                                                                double nms_iou) {
  if (!IsNumeric(pred.dtype())) {
    return Status::InvalidArgument("detector output must be numeric, got " + DataTypeName(pred.dtype()));
  }
  if ((pred.rank() != 2 && pred.rank() != 3) || pred.dim(pred.rank() - 2) < 5) {
    return Status::InvalidArgument("box decoding needs a detector output [N, 4 + classes, anchors] with at least one "
                                   "class, got " + ShapeToString(pred.shape()));
  }
  const int64_t rows = pred.dim(pred.rank() - 2), anchors = pred.dim(pred.rank() - 1);
  const int64_t n = pred.rank() == 3 ? pred.dim(0) : 1;
  DoubleReader p(pred);
  std::vector<std::vector<DetectedBox>> out(static_cast<size_t>(n));
  std::vector<DetectedBox> candidates;
  std::vector<int64_t> order;
  for (int64_t s = 0; s < n; ++s) {
    const int64_t base = s * rows * anchors;
    candidates.clear();
    for (int64_t a = 0; a < anchors; ++a) {
      int64_t cls = -1;
      double best = 0.0;
      for (int64_t c = 4; c < rows; ++c) {
        const double v = p[base + c * anchors + a];
        if (std::isnan(v)) continue;
        if (cls < 0 || v > best) cls = c - 4, best = v;
      }
      if (cls < 0 || !(best >= score_threshold)) continue;
      const double cx = p[base + a], cy = p[base + anchors + a];
      const double w = p[base + 2 * anchors + a], h = p[base + 3 * anchors + a];
      candidates.push_back({cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2, best, cls});
    }
    order.resize(candidates.size());
    std::iota(order.begin(), order.end(), int64_t{0});
    std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
      return candidates[static_cast<size_t>(a)].score > candidates[static_cast<size_t>(b)].score;
    });
    std::vector<DetectedBox>& kept = out[static_cast<size_t>(s)];
    for (int64_t i : order) {
      const DetectedBox& box = candidates[static_cast<size_t>(i)];
      bool overlaps = false;
      for (const DetectedBox& k : kept) {
        if (!(BoxIou(box, k) <= nms_iou)) {
          overlaps = true;
          break;
        }
      }
      if (!overlaps) kept.push_back(box);
    }
  }
  return out;
}

double BoxIou(const DetectedBox& a, const DetectedBox& b) {
  const double ix = std::max(0.0, std::min(a.x2, b.x2) - std::max(a.x1, b.x1));
  const double iy = std::max(0.0, std::min(a.y2, b.y2) - std::max(a.y1, b.y1));
  const double inter = ix * iy;
  const double uni = (a.x2 - a.x1) * (a.y2 - a.y1) + (b.x2 - b.x1) * (b.y2 - b.y1) - inter;
  return uni > 0 ? inter / uni : 0.0;
}

BoxMatch MatchBoxes(const std::vector<DetectedBox>& reference, const std::vector<DetectedBox>& candidate,
                    double match_iou) {
  std::vector<size_t> order(reference.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return reference[a].score > reference[b].score; });
  std::vector<bool> used(candidate.size(), false);
  BoxMatch m;
  for (size_t r : order) {
    const DetectedBox& ref = reference[r];
    int64_t best = -1;
    double best_iou = match_iou;
    for (size_t j = 0; j < candidate.size(); ++j) {
      if (used[j] || candidate[j].cls != ref.cls) continue;
      const double v = BoxIou(ref, candidate[j]);
      if (v >= best_iou && (best < 0 || v > best_iou)) best = static_cast<int64_t>(j), best_iou = v;
    }
    if (best < 0) continue;
    used[static_cast<size_t>(best)] = true;
    ++m.matched;
    m.score_drift += std::fabs(candidate[static_cast<size_t>(best)].score - ref.score);
  }
  return m;
}

ReferenceMetrics::Sums ReferenceMetrics::sums() const {
  Sums s;
  s.top5_sum = top5_sum_, s.top5_rows = top5_rows_;
  s.cosine_sum = cosine_sum_, s.cosine_min = cosine_min_, s.cosine_samples = cosine_samples_;
  s.ctc_samples = ctc_samples_, s.ctc_chars = ctc_chars_, s.ctc_edits = ctc_edits_;
  s.box_samples = box_samples_, s.reference_boxes = reference_boxes_, s.candidate_boxes = candidate_boxes_;
  s.matched_boxes = matched_boxes_, s.drift_sum = drift_sum_;
  s.score_ref_sq = score_ref_sq_, s.score_err_sq = score_err_sq_;
  s.map_elements = map_elements_, s.map_intersection = map_intersection_, s.map_union = map_union_;
  return s;
}

ReferenceMetrics ReferenceMetrics::FromSums(const BoxOptions& boxes, const Sums& s, const MapOptions& map) {
  ReferenceMetrics m(boxes, map);
  m.map_elements_ = s.map_elements, m.map_intersection_ = s.map_intersection, m.map_union_ = s.map_union;
  m.top5_sum_ = s.top5_sum, m.top5_rows_ = s.top5_rows;
  m.cosine_sum_ = s.cosine_sum, m.cosine_min_ = s.cosine_min, m.cosine_samples_ = s.cosine_samples;
  m.ctc_samples_ = s.ctc_samples, m.ctc_chars_ = s.ctc_chars, m.ctc_edits_ = s.ctc_edits;
  m.box_samples_ = s.box_samples, m.reference_boxes_ = s.reference_boxes, m.candidate_boxes_ = s.candidate_boxes;
  m.matched_boxes_ = s.matched_boxes, m.drift_sum_ = s.drift_sum;
  m.score_ref_sq_ = s.score_ref_sq, m.score_err_sq_ = s.score_err_sq;
  return m;
}

void ReferenceMetrics::Merge(const ReferenceMetrics& other) {
  top5_sum_ += other.top5_sum_, top5_rows_ += other.top5_rows_;
  cosine_sum_ += other.cosine_sum_, cosine_samples_ += other.cosine_samples_;
  if (std::isnan(other.cosine_min_) || other.cosine_min_ < cosine_min_) cosine_min_ = other.cosine_min_;  // as Add: NaN sticks
  ctc_samples_ += other.ctc_samples_, ctc_chars_ += other.ctc_chars_, ctc_edits_ += other.ctc_edits_;
  box_samples_ += other.box_samples_, reference_boxes_ += other.reference_boxes_;
  candidate_boxes_ += other.candidate_boxes_, matched_boxes_ += other.matched_boxes_;
  drift_sum_ += other.drift_sum_;
  score_ref_sq_ += other.score_ref_sq_, score_err_sq_ += other.score_err_sq_;
  map_elements_ += other.map_elements_, map_intersection_ += other.map_intersection_, map_union_ += other.map_union_;
}

double ReferenceMetrics::class_score_sqnr_db() const {
  if (box_samples_ == 0 || std::isnan(score_err_sq_) || std::isnan(score_ref_sq_)) return kNaN;
  if (score_err_sq_ == 0.0) return std::numeric_limits<double>::infinity();
  return 10.0 * std::log10(score_ref_sq_ / score_err_sq_);
}

Status ReferenceMetrics::Add(const Tensor& reference, const Tensor& output) {
  SPARQ_RETURN_IF_ERROR(SameShape(reference, output));
  if (map_.enabled) {
    SPARQ_ASSIGN_OR_RETURN(MapOverlap m, ThresholdedMapOverlap(reference, output, map_.threshold));
    map_elements_ += reference.numel();
    map_intersection_ += m.intersection;
    map_union_ += m.union_count;
  }
  if (reference.rank() == 0 || reference.numel() == 0) return Status::OK();  // nothing to rank or compare
  if (reference.shape().back() > 0) {
    SPARQ_ASSIGN_OR_RETURN(double overlap, SumTopKOverlap(reference, output, 5));
    top5_sum_ += overlap;
    top5_rows_ += reference.numel() / reference.shape().back();
  }
  SPARQ_ASSIGN_OR_RETURN(std::vector<double> cos, SampleCosines(reference, output));
  for (double c : cos) {
    cosine_sum_ += c;
    if (std::isnan(c) || c < cosine_min_) cosine_min_ = c;
  }
  cosine_samples_ += static_cast<int64_t>(cos.size());
  if (reference.rank() >= 3 && reference.shape().back() > 0) {
    SPARQ_ASSIGN_OR_RETURN(auto ref_text, CtcGreedyDecode(reference, 0));
    SPARQ_ASSIGN_OR_RETURN(auto out_text, CtcGreedyDecode(output, 0));
    ctc_samples_ += static_cast<int64_t>(ref_text.size());
    for (size_t i = 0; i < ref_text.size(); ++i) {
      ctc_chars_ += static_cast<int64_t>(ref_text[i].size());
      ctc_edits_ += EditDistance(ref_text[i], out_text[i]);
    }
  }
  if (boxes_.enabled && reference.rank() == 3 && reference.dim(1) >= 5) {
    SPARQ_ASSIGN_OR_RETURN(auto ref_boxes, DecodeYoloBoxes(reference, boxes_.score_threshold, boxes_.nms_iou));
    SPARQ_ASSIGN_OR_RETURN(auto out_boxes, DecodeYoloBoxes(output, boxes_.score_threshold, boxes_.nms_iou));
    for (size_t i = 0; i < ref_boxes.size(); ++i) {
      const BoxMatch m = MatchBoxes(ref_boxes[i], out_boxes[i], boxes_.match_iou);
      reference_boxes_ += static_cast<int64_t>(ref_boxes[i].size());
      candidate_boxes_ += static_cast<int64_t>(out_boxes[i].size());
      matched_boxes_ += m.matched;
      drift_sum_ += m.score_drift;
    }
    box_samples_ += static_cast<int64_t>(ref_boxes.size());
    const int64_t rows = reference.dim(1), anchors = reference.dim(2);
    DoubleReader r(reference), o(output);
    for (int64_t s = 0; s < reference.dim(0); ++s) {
      for (int64_t i = (s * rows + 4) * anchors; i < (s + 1) * rows * anchors; ++i) {
        const double err = r[i] == o[i] ? 0.0 : r[i] - o[i];
        score_ref_sq_ += r[i] * r[i];
        score_err_sq_ += err * err;
      }
    }
  }
  return Status::OK();
}

}  // namespace sparq
