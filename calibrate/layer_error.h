// Calibration `method: auto`: per tensor, the candidate threshold whose
// quantization disturbs the outputs of the tensor's consumers least.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "sparq/calibrate.h"
#include "sparq/executor.h"

namespace sparq {

// One candidate clipping threshold of one tensor and where it came from.
struct ThresholdCandidate {
  CalibrationMethod method = CalibrationMethod::kMax;
  float threshold = 0.0f;
};

// The candidates of one tensor (duplicates removed) and its observed range.
struct AutoTensor {
  float min = 0.0f, max = 0.0f;
  std::vector<ThresholdCandidate> candidates;
};

// Runs `model` once on `batch` and, for each tensor of `tensors`, fake-quantizes
// it with each candidate (MakeRange, `symmetric`) and reruns each consumer node
// alone with that input (the other inputs in float): the error of a candidate
// is the sum over consumers of the output's squared error over its energy (a
// tensor with no consumer, a graph output, is compared with itself). Returns,
// per tensor, the index of the candidate with the least error (the first on a
// tie, so the result does not depend on the thread count). A consumer that
// cannot run alone is skipped. Errors: those of the executor on `model`.
StatusOr<std::map<std::string, size_t>> ChooseByLayerError(const Model& model, const TensorMap& batch,
                                                            const std::map<std::string, AutoTensor>& tensors,
                                                            bool symmetric, int threads);

}  // namespace sparq
