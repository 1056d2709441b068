// Bias correction (Nagel et al. 2019, "Data-Free Quantization", section 4.2,
// the empirical form): int8 weights W_q = W + dW shift the mean of a layer's
// output by E[dW x] per output channel. Measured on calibration data and
// subtracted from the layer's bias, the shift vanishes; on depthwise networks
// with BatchNorm folded into a few weights per channel it is the largest
// error INT8 weights make (EfficientNet-Lite0: bench/CNN_ACCURACY.md).
//
//   x ─┬─ Conv(x, W_q - W) ─ ReduceMean over all but the channel axis ─> e[c]
//      └─ (the layer itself, unchanged)
//   QuantizeModel then quantizes bias' = bias - e (QuantizeOptions::bias_correction).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "sparq/dataset.h"  // BatchFn
#include "sparq/export.h"
#include "sparq/graph.h"
#include "sparq/quantize.h"
#include "sparq/status.h"

namespace sparq {

struct SPARQ_API BiasCorrectionOptions {
  int threads = 0;          // executor threads; 0 = one per hardware thread
  int64_t max_samples = 0;  // stop after this many samples (batch granularity); 0 = all the data
};

// For each Conv, and each Gemm with a per-channel bias (alpha = beta = 1),
// that QuantizeModel(model, _, options) may make INT8: the mean, over
// `batches` (the float model's own activations), of what its int8 weights
// (quantized as QuantizeModel quantizes them: per channel or not, after
// BatchNorm folding when options.fold_batchnorm; options.rounded_weights' codes
// where given, e.g. AdaRound's) add to each output channel.
// Keyed by NodeKey (node name, or "@<first output>" after folding); the
// value for QuantizeOptions::bias_correction. Layers whose weights quantize
// exactly get no entry. Deterministic for the same data and batch size.
// Errors: those of FoldBatchNorm and of the Executor on the data (named);
// InvalidArgument when `batches` yields no sample.
SPARQ_API StatusOr<std::map<std::string, std::vector<float>>>
MeasureBiasCorrection(const Model& model, const BatchFn& batches, const QuantizeOptions& options,
                      const BiasCorrectionOptions& correction = {});

}  // namespace sparq
