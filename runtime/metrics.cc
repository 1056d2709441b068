#include "sparq/metrics.h"

#include <cmath>
#include <limits>

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
  if (!IsNumeric(reference.dtype()) || !IsNumeric(output.dtype())) {
    return Status::InvalidArgument("cannot compare " + DataTypeName(reference.dtype()) + " with " +
                                   DataTypeName(output.dtype()) + ": both must be numeric");
  }
  if (reference.shape() != output.shape()) {
    return Status::InvalidArgument("shape " + ShapeToString(output.shape()) + " differs from the reference's " +
                                   ShapeToString(reference.shape()));
  }
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

}  // namespace sparq
