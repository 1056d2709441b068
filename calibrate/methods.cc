// The calibration methods' table (sparq/calibrate.h, CalibrationMethods):
// one row per method, its names and its threshold rule.
#include <cmath>

#include "sparq/calibrate.h"

namespace sparq {

const std::vector<CalibrationMethodInfo>& CalibrationMethods() {
  static const std::vector<CalibrationMethodInfo>* methods = new std::vector<CalibrationMethodInfo>{
      {CalibrationMethod::kMax, "max", nullptr, false, "non-saturating: threshold = max |x|",
       [](const AbsHistogram&, double max_abs, const CalibrationMethodOptions&) { return max_abs; }},
      {CalibrationMethod::kKL, "kl", "entropy", true,
       "saturating: the threshold of least KL divergence (TensorRT's entropy calibration)",
       [](const AbsHistogram& h, double, const CalibrationMethodOptions&) { return KlThreshold(h); }},
      {CalibrationMethod::kPercentile, "percentile", nullptr, true, "saturating: the given percentile of |x|",
       [](const AbsHistogram& h, double, const CalibrationMethodOptions& o) { return PercentileThreshold(h, o.percentile); }},
      {CalibrationMethod::kMSE, "mse", nullptr, true, "saturating: the threshold of least expected squared error",
       [](const AbsHistogram& h, double, const CalibrationMethodOptions&) { return MseThreshold(h); }},
      {CalibrationMethod::kAuto, "auto", nullptr, true,
       "per tensor, the method that least disturbs its consumers' outputs (first batch)", nullptr},
  };
  return *methods;
}

const char* CalibrationMethodName(CalibrationMethod m) {
  for (const CalibrationMethodInfo& info : CalibrationMethods())
    if (info.method == m) return info.name;
  return "?";
}

StatusOr<CalibrationMethod> ParseCalibrationMethod(const std::string& name) {
  std::string known;
  for (const CalibrationMethodInfo& info : CalibrationMethods()) {
    if (name == info.name || (info.alias != nullptr && name == info.alias)) return info.method;
    known += (known.empty() ? "" : ", ") + std::string(info.name);
  }
  return Status::InvalidArgument("unknown calibration method '" + name + "' (expected " + known + ")");
}

}  // namespace sparq
