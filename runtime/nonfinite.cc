#include "runtime/nonfinite.h"

#include <cmath>

#include "sparq/executor.h"

namespace sparq {
namespace {

// Flat index of the first NaN/Inf of a floating-point tensor, or -1.
int64_t FirstNonFinite(const Tensor& t, bool* is_nan) {
  if (t.dtype() != DataType::kFloat32 && t.dtype() != DataType::kFloat16 && t.dtype() != DataType::kFloat64) return -1;
  const Tensor f = t.ToFloat32();
  const float* p = f.data<float>();
  for (int64_t i = 0; i < f.numel(); ++i) {
    if (!std::isfinite(p[i])) {
      *is_nan = std::isnan(p[i]);
      return i;
    }
  }
  return -1;
}

}  // namespace

StatusOr<std::string> FirstNonFiniteTensor(const Model& model, const BatchFn& next_batch, int threads) {
  ExecutorOptions eo;
  eo.threads = threads;
  eo.backend = "reference";
  SPARQ_ASSIGN_OR_RETURN(auto exec, Executor::Create(model, eo));
  std::string found;
  int64_t batch_index = 0;
  RunOptions ro;
  ro.on_node_outputs = [&](const Node& n, const std::vector<Tensor>& outs) -> Status {
    for (size_t k = 0; k < outs.size() && k < n.outputs.size(); ++k) {
      bool is_nan = false;
      const int64_t at = outs[k].defined() ? FirstNonFinite(outs[k], &is_nan) : -1;
      if (at < 0) continue;
      found = "tensor '" + n.outputs[k] + "' (output of " + n.op_type + " node '" + (n.name.empty() ? n.outputs[0] : n.name) + "'): " +
              (is_nan ? "NaN" : "Inf") + " at flat index " + std::to_string(at) + " of batch " +
              std::to_string(batch_index);
      return Status::Internal("stop");  // the first one is all we need: end the run
    }
    return Status::OK();
  };
  TensorMap batch, outputs;
  while (true) {
    batch.clear();
    SPARQ_ASSIGN_OR_RETURN(bool more, next_batch(&batch));
    if (!more) break;
    const Status st = exec->Run(batch, &outputs, ro);
    if (!found.empty()) return found;
    SPARQ_RETURN_IF_ERROR(st);
    ++batch_index;
  }
  return std::string();
}

}  // namespace sparq
