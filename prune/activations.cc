// What a layer multiplies its weight with: im2col rows of a Conv input,
// flattened rows of a Gemm/MatMul input; running a model until given values
// are computed; the input column norms of activation-aware scores.
//
// im2col row of output position o (2-D case, one group of Cg channels):
//
//   [ x[c0, o*s - p + (0,0)] ... x[c0, o*s - p + (kh-1,kw-1)] | x[c1, ...] | ... ]
//     \__________________ kh*kw taps of channel c0 _________/
//
// which matches the Conv weight's GEMM view [O, Cg * kh * kw] column by column.
#include <algorithm>
#include <cmath>

#include "kernels/ref/conv.h"
#include "kernels/ref/nn_common.h"  // ReadWindowAttributes
#include "prune/internal.h"

namespace sparq {
namespace prune_internal {

namespace {

const char kStopMarker[] = "sparq.prune: all tapped values seen";

// Evenly spread sample of `count` of `total` positions (all when total <= count).
std::vector<int64_t> SamplePositions(int64_t total, int64_t count) {
  std::vector<int64_t> out;
  if (total <= count) {
    out.resize(static_cast<size_t>(total));
    for (int64_t i = 0; i < total; ++i) out[i] = i;
    return out;
  }
  out.reserve(static_cast<size_t>(count));
  for (int64_t k = 0; k < count; ++k) out.push_back(k * total / count);
  return out;
}

Status ConvRows(const Node& node, const WeightedLayer& layer, const Tensor& x, int64_t group,
                int64_t max_rows_per_sample, Matrix* rows) {
  ConvParams p;
  p.group = node.attr_int("group", 1);
  AutoPad auto_pad;
  SPARQ_RETURN_IF_ERROR(ReadWindowAttributes(node, &p.window, &auto_pad));
  Shape y_shape;
  Status st = PrepareConv(x.shape(), layer.weight_shape, auto_pad, &p, &y_shape);
  if (!st.ok()) return st.WithContext(node.Describe());
  const size_t R = x.rank() - 2;
  const int64_t N = x.dim(0), C = x.dim(1), Cg = C / p.group;
  Shape in(x.shape().begin() + 2, x.shape().end()), out(y_shape.begin() + 2, y_shape.end());
  const int64_t in_size = NumElements(in), out_size = NumElements(out), taps = NumElements(p.window.kernel);
  if (Cg * taps != layer.cols) {
    return Status::Internal(node.Describe() + ": im2col width " + std::to_string(Cg * taps) + " != weight cols " +
                            std::to_string(layer.cols));
  }
  const std::vector<int64_t> positions = SamplePositions(out_size, max_rows_per_sample);
  const int64_t P = static_cast<int64_t>(positions.size());
  *rows = Matrix(N * P, layer.cols);
  // Tap offsets per dim, and the multi-index of each sampled output position.
  std::vector<std::vector<int64_t>> tap_index(static_cast<size_t>(taps), std::vector<int64_t>(R));
  for (int64_t t = 0; t < taps; ++t) {
    int64_t rest = t;
    for (size_t d = R; d-- > 0;) {
      tap_index[t][d] = rest % p.window.kernel[d];
      rest /= p.window.kernel[d];
    }
  }
  std::vector<int64_t> o(R), in_stride(R, 1);
  for (size_t d = R; d-- > 1;) in_stride[d - 1] = in_stride[d] * in[d];
  const float* xd = x.data<float>();
  std::vector<int64_t> offset(static_cast<size_t>(taps));  // flat input offset of each tap, -1 = padding
  for (int64_t pi = 0; pi < P; ++pi) {
    int64_t rest = positions[pi];
    for (size_t d = R; d-- > 0;) {
      o[d] = rest % out[d];
      rest /= out[d];
    }
    for (int64_t t = 0; t < taps; ++t) {
      int64_t flat = 0;
      for (size_t d = 0; d < R && flat >= 0; ++d) {
        const int64_t i = o[d] * p.window.strides[d] - p.window.pads[d] + tap_index[t][d] * p.window.dilations[d];
        flat = (i < 0 || i >= in[d]) ? -1 : flat + i * in_stride[d];
      }
      offset[t] = flat;
    }
    for (int64_t n = 0; n < N; ++n) {
      float* row = rows->values.data() + (n * P + pi) * layer.cols;
      const float* xg = xd + (n * C + group * Cg) * in_size;
      for (int64_t c = 0; c < Cg; ++c)
        for (int64_t t = 0; t < taps; ++t) row[c * taps + t] = offset[t] < 0 ? 0.0f : xg[c * in_size + offset[t]];
    }
  }
  return Status::OK();
}

}  // namespace

Status LayerInputRows(const Node& node, const WeightedLayer& layer, const Tensor& input, int64_t group,
                      int64_t max_rows_per_sample, Matrix* rows) {
  if (input.dtype() != DataType::kFloat32) {
    return Status::InvalidArgument(node.Describe() + ": input '" + layer.input + "' is " +
                                   DataTypeName(input.dtype()) + ", pruning statistics need float32");
  }
  if (layer.op_type == "Conv") return ConvRows(node, layer, input, group, max_rows_per_sample, rows);
  // Gemm A [M, K]; MatMul A [..., K]: rows of K, sampled per leading index.
  if (input.rank() == 0 || input.dim(input.rank() - 1) != layer.cols) {
    return Status::InvalidArgument(node.Describe() + ": input '" + layer.input + "' has shape " +
                                   ShapeToString(input.shape()) + ", expected a last dim of " +
                                   std::to_string(layer.cols));
  }
  const int64_t K = layer.cols, total = input.numel() / std::max<int64_t>(K, 1);
  const int64_t samples = input.rank() >= 3 ? input.dim(0) : 1;
  const int64_t per_sample = samples > 0 ? total / samples : 0;
  const std::vector<int64_t> keep =
      SamplePositions(per_sample, input.rank() >= 3 ? max_rows_per_sample : per_sample);
  *rows = Matrix(samples * static_cast<int64_t>(keep.size()), K);
  const float* x = input.data<float>();
  int64_t r = 0;
  for (int64_t s = 0; s < samples; ++s)
    for (int64_t k : keep) {
      std::copy_n(x + (s * per_sample + k) * K, K, rows->values.begin() + r * K);
      ++r;
    }
  return Status::OK();
}

Status RunAndTap(Executor& exec, const TensorMap& batch, const std::set<std::string>& values,
                 const std::function<Status(const std::string&, const Tensor&)>& fn) {
  std::set<std::string> pending = values;
  for (const auto& v : values) {
    auto it = batch.find(v);
    if (it == batch.end()) continue;
    SPARQ_RETURN_IF_ERROR(fn(v, it->second));
    pending.erase(v);
  }
  if (pending.empty()) return Status::OK();
  RunOptions ro;
  ro.on_node_outputs = [&](const Node& n, const std::vector<Tensor>& outs) -> Status {
    for (size_t k = 0; k < n.outputs.size() && k < outs.size(); ++k) {
      if (!pending.count(n.outputs[k])) continue;
      SPARQ_RETURN_IF_ERROR(fn(n.outputs[k], outs[k]));
      pending.erase(n.outputs[k]);
    }
    return pending.empty() ? Status::Internal(kStopMarker) : Status::OK();
  };
  TensorMap out;
  Status st = exec.Run(batch, &out, ro);
  if (!st.ok() && st.message() == kStopMarker) st = Status::OK();
  SPARQ_RETURN_IF_ERROR(st);
  if (!pending.empty()) {
    return Status::NotFound("values never computed by the model: " +
                            JoinNames(std::vector<std::string>(pending.begin(), pending.end())));
  }
  return Status::OK();
}

Status ForEachBatch(const BatchSource& data, const std::function<Status(const TensorMap&)>& fn, int64_t* batches) {
  if (!data) return Status::InvalidArgument("no calibration data was given (needed for recovery and activation scores)");
  BatchFn next = data();
  if (!next) return Status::InvalidArgument("the calibration data source returned no reader");
  int64_t n = 0;
  while (true) {
    TensorMap batch;
    SPARQ_ASSIGN_OR_RETURN(bool more, next(&batch));
    if (!more) break;
    SPARQ_RETURN_IF_ERROR(fn(batch));
    ++n;
  }
  if (n == 0) return Status::InvalidArgument("the calibration data holds no batch");
  if (batches != nullptr) *batches = n;
  return Status::OK();
}

}  // namespace prune_internal

using namespace prune_internal;  // NOLINT: this file implements them

StatusOr<std::map<std::string, std::vector<double>>> ActivationColumnNorms(const Model& model,
                                                                          const std::vector<std::string>& layers,
                                                                          const BatchSource& data,
                                                                          int64_t max_rows_per_sample, int threads) {
  SPARQ_ASSIGN_OR_RETURN(std::vector<WeightedLayer> all, FindWeightedLayers(model));
  std::multimap<std::string, const WeightedLayer*> by_input;
  std::map<std::string, std::vector<double>> sums;
  std::set<std::string> taps;
  for (const auto& name : layers) {
    auto it = std::find_if(all.begin(), all.end(), [&](const WeightedLayer& L) { return L.node == name; });
    if (it == all.end()) return Status::NotFound("no weighted layer named '" + name + "'");
    by_input.emplace(it->input, &*it);
    sums[name].assign(static_cast<size_t>(it->cols * it->groups), 0.0);
    taps.insert(it->input);
  }
  SPARQ_ASSIGN_OR_RETURN(auto exec, Executor::Create(model, ExecutorOptions{threads}));
  const Graph& g = exec->model().graph;
  auto fold = [&](const std::string& value, const Tensor& t) -> Status {
    auto range = by_input.equal_range(value);
    for (auto it = range.first; it != range.second; ++it) {
      const WeightedLayer& L = *it->second;
      const int idx = FindNodeIndex(g, L.node);
      if (idx < 0) return Status::NotFound("node '" + L.node + "' not found");
      std::vector<double>& acc = sums[L.node];
      for (int64_t grp = 0; grp < L.groups; ++grp) {
        Matrix rows;
        SPARQ_RETURN_IF_ERROR(LayerInputRows(g.nodes[idx], L, t, grp, max_rows_per_sample, &rows));
        double* a = acc.data() + grp * L.cols;
        for (int64_t r = 0; r < rows.rows; ++r) {
          const float* row = rows.values.data() + r * rows.cols;
          for (int64_t c = 0; c < rows.cols; ++c) a[c] += static_cast<double>(row[c]) * row[c];
        }
      }
    }
    return Status::OK();
  };
  SPARQ_RETURN_IF_ERROR(ForEachBatch(data, [&](const TensorMap& b) { return RunAndTap(*exec, b, taps, fold); }, nullptr));
  for (auto& kv : sums) {
    for (double& v : kv.second) {
      if (!std::isfinite(v)) return Status::InvalidArgument("input of layer '" + kv.first + "' holds NaN or Inf on the calibration data");
      v = std::sqrt(v);
    }
  }
  return sums;
}

}  // namespace sparq
