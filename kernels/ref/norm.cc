// Reference normalizations: BatchNormalization, LayerNormalization,
// InstanceNormalization, LpNormalization and MeanVarianceNormalization.
//
// Statistics (means, variances, norms) accumulate in double, in input order,
// one group per thread, so results do not depend on the thread count.
// float16/bfloat16 inputs are computed in float32.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "kernels/parallel.h"
#include "kernels/ref/broadcast.h"
#include "kernels/ref/reduce_common.h"
#include "kernels/ref/reference_steps.h"
#include "kernels/registry.h"

namespace sparq {
namespace {

using reduce_common::AxesToMask;
using reduce_common::DimProduct;
using reduce_common::IsHalfType;
using reduce_common::MakeReductionLayout;
using reduce_common::NormalizeAxis;
using reduce_common::ReductionLayout;
using reduce_common::RunAsFloat32;

// Elements processed per ParallelFor chunk (roughly).
constexpr int64_t kGrainElements = 16384;

int64_t GrainFor(int64_t per_item) { return std::max<int64_t>(1, kGrainElements / std::max<int64_t>(1, per_item)); }

std::vector<double> ToDoubles(const Tensor& t) {
  std::vector<double> v(static_cast<size_t>(t.numel()));
  for (int64_t i = 0; i < t.numel(); ++i) v[static_cast<size_t>(i)] = t.GetAsDouble(i);
  return v;
}

Status RequireFloat(const OpContext& ctx, const Tensor& x) {
  if (x.dtype() == DataType::kFloat32 || x.dtype() == DataType::kFloat64) return Status::OK();
  return ctx.NotSupported("input type " + DataTypeName(x.dtype()) + " is not supported (floats only)");
}

// Mean and population variance of p[off[0]], p[off[1]], ... (two passes).
template <typename T>
void MeanVariance(const T* p, const int64_t* off, int64_t n, double* mean, double* var) {
  double s = 0.0;
  for (int64_t i = 0; i < n; ++i) s += static_cast<double>(p[off[i]]);
  const double m = n > 0 ? s / static_cast<double>(n) : 0.0;
  double q = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    const double d = static_cast<double>(p[off[i]]) - m;
    q += d * d;
  }
  *mean = m;
  *var = n > 0 ? q / static_cast<double>(n) : 0.0;
}

// Same over a contiguous run of n elements.
template <typename T>
void MeanVarianceContiguous(const T* p, int64_t n, double* mean, double* var) {
  double s = 0.0;
  for (int64_t i = 0; i < n; ++i) s += static_cast<double>(p[i]);
  const double m = n > 0 ? s / static_cast<double>(n) : 0.0;
  double q = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    const double d = static_cast<double>(p[i]) - m;
    q += d * d;
  }
  *mean = m;
  *var = n > 0 ? q / static_cast<double>(n) : 0.0;
}

// y = x * a[j] + b[j] over `planes` runs of `len` elements, where run r uses
// the coefficient index (r % channels) (per-channel) or each element its own
// index (r % channels) * len + i (per-element, BatchNormalization spatial=0).
template <typename T>
void AffinePlanes(const T* x, T* y, int64_t planes, int64_t channels, int64_t len, const std::vector<double>& a,
                  const std::vector<double>& b, bool per_element, ThreadPool* pool) {
  ParallelFor(pool, planes, GrainFor(len), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const int64_t c = r % channels;
      const T* src = x + r * len;
      T* dst = y + r * len;
      if (per_element) {
        for (int64_t i = 0; i < len; ++i) {
          const size_t j = static_cast<size_t>(c * len + i);
          dst[i] = static_cast<T>(src[i] * static_cast<T>(a[j]) + static_cast<T>(b[j]));
        }
      } else {
        const T ac = static_cast<T>(a[static_cast<size_t>(c)]);
        const T bc = static_cast<T>(b[static_cast<size_t>(c)]);
        for (int64_t i = 0; i < len; ++i) dst[i] = src[i] * ac + bc;
      }
    }
  });
}

// ---------------------------------------------------------------------------
// BatchNormalization: y = scale * (x - mean) / sqrt(var + epsilon) + B per
// channel (dimension 1). From opset 14, training_mode=1 normalizes with the
// batch statistics and returns the updated running mean and variance as
// outputs 1 and 2. Before opset 9, spatial=0 gives per-element parameters of
// shape [C, D1, ...].

template <typename T>
Status BatchNormTyped(OpContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Node& node = ctx.node();
  const int64_t n = x.dim(0), c = x.dim(1);
  const int64_t len = DimProduct(x.shape(), 2, x.rank());
  const double eps = node.attr_float("epsilon", 1e-5f);
  const bool training = ctx.opset() >= 14 && node.attr_int("training_mode", 0) != 0;
  const bool per_element = ctx.opset() < 9 && node.attr_int("spatial", 1) == 0;
  const int64_t params = per_element ? c * len : c;
  static const char* kNames[] = {"X", "scale", "B", "input_mean", "input_var"};
  for (size_t i = 1; i < 5; ++i) {
    if (ctx.input(i).numel() != params) {
      return ctx.InvalidArgument(std::string("input '") + kNames[i] + "' has shape " +
                                 ShapeToString(ctx.input(i).shape()) + ", expected " + std::to_string(params) +
                                 " values for X of shape " + ShapeToString(x.shape()) +
                                 (per_element ? " (spatial=0)" : ""));
    }
  }
  const std::vector<double> scale = ToDoubles(ctx.input(1)), bias = ToDoubles(ctx.input(2));
  std::vector<double> mean = ToDoubles(ctx.input(3)), var = ToDoubles(ctx.input(4));
  const T* xp = x.data<T>();
  if (training) {
    // Batch statistics per channel over N and the spatial dimensions.
    std::vector<double> batch_mean(static_cast<size_t>(c)), batch_var(static_cast<size_t>(c));
    ParallelFor(ctx.pool(), c, GrainFor(n * len), [&](int64_t begin, int64_t end) {
      for (int64_t ch = begin; ch < end; ++ch) {
        double s = 0.0;
        for (int64_t b = 0; b < n; ++b)
          for (int64_t i = 0; i < len; ++i) s += static_cast<double>(xp[(b * c + ch) * len + i]);
        const double count = static_cast<double>(n * len);
        const double m = count > 0 ? s / count : 0.0;
        double q = 0.0;
        for (int64_t b = 0; b < n; ++b) {
          for (int64_t i = 0; i < len; ++i) {
            const double d = static_cast<double>(xp[(b * c + ch) * len + i]) - m;
            q += d * d;
          }
        }
        batch_mean[static_cast<size_t>(ch)] = m;
        batch_var[static_cast<size_t>(ch)] = count > 0 ? q / count : 0.0;
      }
    });
    const double momentum = node.attr_float("momentum", 0.9f);
    Tensor running_mean(x.dtype(), {c}), running_var(x.dtype(), {c});
    for (int64_t ch = 0; ch < c; ++ch) {
      const size_t k = static_cast<size_t>(ch);
      running_mean.data<T>()[ch] = static_cast<T>(mean[k] * momentum + batch_mean[k] * (1.0 - momentum));
      running_var.data<T>()[ch] = static_cast<T>(var[k] * momentum + batch_var[k] * (1.0 - momentum));
    }
    mean = batch_mean;
    var = batch_var;
    ctx.set_output(1, std::move(running_mean));
    ctx.set_output(2, std::move(running_var));
  }
  std::vector<double> a(static_cast<size_t>(params)), b(static_cast<size_t>(params));
  for (size_t j = 0; j < a.size(); ++j) {
    a[j] = scale[j] / std::sqrt(var[j] + eps);
    b[j] = bias[j] - mean[j] * a[j];
  }
  Tensor y(x.dtype(), x.shape());
  AffinePlanes<T>(xp, y.data<T>(), n * c, c, len, a, b, per_element, ctx.pool());
  ctx.set_output(0, std::move(y));
  return Status::OK();
}

Status BatchNormKernel(OpContext& ctx) {
  SPARQ_RETURN_IF_ERROR(ctx.RequireInputs(5));
  const Tensor& x = ctx.input(0);
  if (IsHalfType(x.dtype())) return RunAsFloat32(ctx, BatchNormKernel, x.dtype());
  SPARQ_RETURN_IF_ERROR(RequireFloat(ctx, x));
  if (x.rank() < 2) {
    return ctx.InvalidArgument("input 'X' must have rank >= 2 (N x C x ...), got shape " + ShapeToString(x.shape()));
  }
  if (ctx.opset() < 14) {
    // Before opset 14 outputs 1..4 (running and saved statistics) exist only
    // in training; inference has just Y.
    for (size_t i = 1; i < 5; ++i) {
      if (ctx.wants_output(i)) return ctx.NotSupported("training mode (statistics outputs before opset 14)");
    }
  }
  if (x.dtype() == DataType::kFloat64) return BatchNormTyped<double>(ctx);
  return BatchNormTyped<float>(ctx);
}

// ---------------------------------------------------------------------------
// LayerNormalization (opset 17; also accepted at lower opsets, where ONNX
// Runtime's fusions emit it): normalizes over dimensions [axis, rank), then
// multiplies by Scale and adds B, both broadcast to shape[axis:]. Optional
// outputs Mean and InvStdDev have shape shape[:axis] + [1, ...] and type
// float32 (float64 for float64 input).

// Expands `t` (unidirectionally broadcastable to `shape`) to prod(shape) values.
StatusOr<std::vector<double>> ExpandTo(const OpContext& ctx, const Tensor& t, const Shape& shape,
                                       const std::string& name) {
  bool ok = t.rank() <= shape.size();
  for (size_t i = 0; ok && i < t.rank(); ++i) {
    const int64_t d = t.dim(t.rank() - 1 - i), want = shape[shape.size() - 1 - i];
    ok = d == want || d == 1;
  }
  if (!ok) {
    return ctx.InvalidArgument("input '" + name + "' of shape " + ShapeToString(t.shape()) +
                               " does not broadcast to the normalized shape " + ShapeToString(shape));
  }
  const std::vector<double> src = ToDoubles(t);
  std::vector<double> out(static_cast<size_t>(NumElements(shape)));
  const std::vector<int64_t> strides = BroadcastStrides(t.shape(), shape);
  ForEachBroadcast<1>(shape, {strides},
                      [&](int64_t i, const std::array<int64_t, 1>& off) { out[static_cast<size_t>(i)] = src[off[0]]; });
  return out;
}

template <typename T>
Status LayerNormTyped(OpContext& ctx, size_t axis) {
  const Tensor& x = ctx.input(0);
  const Shape norm_shape(x.shape().begin() + static_cast<std::ptrdiff_t>(axis), x.shape().end());
  SPARQ_ASSIGN_OR_RETURN(std::vector<double> scale, ExpandTo(ctx, ctx.input(1), norm_shape, "Scale"));
  std::vector<double> bias(scale.size(), 0.0);
  if (ctx.has_input(2)) {
    SPARQ_ASSIGN_OR_RETURN(bias, ExpandTo(ctx, ctx.input(2), norm_shape, "B"));
  }
  const double eps = ctx.node().attr_float("epsilon", 1e-5f);
  const int64_t rows = DimProduct(x.shape(), 0, axis);
  const int64_t cols = DimProduct(x.shape(), axis, x.rank());
  Shape stat_shape(x.shape().begin(), x.shape().begin() + static_cast<std::ptrdiff_t>(axis));
  stat_shape.resize(x.rank(), 1);
  const DataType stat_type = x.dtype() == DataType::kFloat64 ? DataType::kFloat64 : DataType::kFloat32;
  Tensor y(x.dtype(), x.shape()), mean_t(stat_type, stat_shape), inv_t(stat_type, stat_shape);
  const T* xp = x.data<T>();
  T* yp = y.data<T>();
  std::vector<double> means(static_cast<size_t>(rows)), invs(static_cast<size_t>(rows));
  ParallelFor(ctx.pool(), rows, GrainFor(cols), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const T* src = xp + r * cols;
      T* dst = yp + r * cols;
      double m, v;
      MeanVarianceContiguous(src, cols, &m, &v);
      const double inv = 1.0 / std::sqrt(v + eps);
      for (int64_t j = 0; j < cols; ++j) {
        const size_t k = static_cast<size_t>(j);
        dst[j] = static_cast<T>((static_cast<double>(src[j]) - m) * inv * scale[k] + bias[k]);
      }
      means[static_cast<size_t>(r)] = m;
      invs[static_cast<size_t>(r)] = inv;
    }
  });
  for (int64_t r = 0; r < rows; ++r) {
    const size_t k = static_cast<size_t>(r);
    if (stat_type == DataType::kFloat64) {
      mean_t.data<double>()[r] = means[k];
      inv_t.data<double>()[r] = invs[k];
    } else {
      mean_t.data<float>()[r] = static_cast<float>(means[k]);
      inv_t.data<float>()[r] = static_cast<float>(invs[k]);
    }
  }
  ctx.set_output(0, std::move(y));
  ctx.set_output(1, std::move(mean_t));
  ctx.set_output(2, std::move(inv_t));
  return Status::OK();
}

Status LayerNormKernel(OpContext& ctx) {
  SPARQ_RETURN_IF_ERROR(ctx.RequireInputs(2));
  const Tensor& x = ctx.input(0);
  // Mean and InvStdDev of 16-bit input stay float32 (stash_type).
  if (IsHalfType(x.dtype())) return RunAsFloat32(ctx, LayerNormKernel, x.dtype(), /*cast_back_mask=*/1u);
  SPARQ_RETURN_IF_ERROR(RequireFloat(ctx, x));
  SPARQ_ASSIGN_OR_RETURN(int64_t axis,
                         NormalizeAxis(ctx, ctx.node().attr_int("axis", -1), static_cast<int64_t>(x.rank())));
  if (x.dtype() == DataType::kFloat64) return LayerNormTyped<double>(ctx, static_cast<size_t>(axis));
  return LayerNormTyped<float>(ctx, static_cast<size_t>(axis));
}

// ---------------------------------------------------------------------------
// InstanceNormalization: per (n, c), y = scale[c] * (x - mean) / sqrt(var +
// epsilon) + B[c] with mean and variance over the spatial dimensions.

template <typename T>
Status InstanceNormTyped(OpContext& ctx) {
  const Tensor& x = ctx.input(0);
  const int64_t n = x.dim(0), c = x.dim(1);
  const int64_t len = DimProduct(x.shape(), 2, x.rank());
  for (size_t i = 1; i < 3; ++i) {
    if (ctx.input(i).numel() != c) {
      return ctx.InvalidArgument(std::string("input '") + (i == 1 ? "scale" : "B") + "' has shape " +
                                 ShapeToString(ctx.input(i).shape()) + ", expected [" + std::to_string(c) +
                                 "] for input of shape " + ShapeToString(x.shape()));
    }
  }
  const std::vector<double> scale = ToDoubles(ctx.input(1)), bias = ToDoubles(ctx.input(2));
  const double eps = ctx.node().attr_float("epsilon", 1e-5f);
  Tensor y(x.dtype(), x.shape());
  const T* xp = x.data<T>();
  T* yp = y.data<T>();
  ParallelFor(ctx.pool(), n * c, GrainFor(len), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const size_t ch = static_cast<size_t>(r % c);
      double m, v;
      MeanVarianceContiguous(xp + r * len, len, &m, &v);
      const double a = scale[ch] / std::sqrt(v + eps);
      const double b = bias[ch] - m * a;
      for (int64_t i = 0; i < len; ++i) yp[r * len + i] = static_cast<T>(static_cast<double>(xp[r * len + i]) * a + b);
    }
  });
  ctx.set_output(0, std::move(y));
  return Status::OK();
}

Status InstanceNormKernel(OpContext& ctx) {
  SPARQ_RETURN_IF_ERROR(ctx.RequireInputs(3));
  const Tensor& x = ctx.input(0);
  if (IsHalfType(x.dtype())) return RunAsFloat32(ctx, InstanceNormKernel, x.dtype());
  SPARQ_RETURN_IF_ERROR(RequireFloat(ctx, x));
  if (x.rank() < 2) {
    return ctx.InvalidArgument("input must have rank >= 2 (N x C x ...), got shape " + ShapeToString(x.shape()));
  }
  if (x.dtype() == DataType::kFloat64) return InstanceNormTyped<double>(ctx);
  return InstanceNormTyped<float>(ctx);
}

// ---------------------------------------------------------------------------
// LpNormalization: x divided by its L1 (p=1) or L2 (p=2) norm along `axis`;
// a zero norm gives 0 (as ONNX's reference implementation).

template <typename T>
void LpNormTyped(const Tensor& x, Tensor* y, int64_t outer, int64_t n, int64_t inner, int64_t p, ThreadPool* pool) {
  const T* xp = x.data<T>();
  T* yp = y->data<T>();
  ParallelFor(pool, outer * inner, GrainFor(n), [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      const int64_t base = (t / inner) * n * inner + t % inner;
      double s = 0.0;
      for (int64_t k = 0; k < n; ++k) {
        const double v = static_cast<double>(xp[base + k * inner]);
        s += p == 1 ? std::fabs(v) : v * v;
      }
      const double norm = p == 1 ? s : std::sqrt(s);
      for (int64_t k = 0; k < n; ++k) {
        const int64_t i = base + k * inner;
        yp[i] = norm == 0.0 ? T(0) : static_cast<T>(static_cast<double>(xp[i]) / norm);
      }
    }
  });
}

Status LpNormKernel(OpContext& ctx) {
  SPARQ_RETURN_IF_ERROR(ctx.RequireInputs(1));
  const Tensor& x = ctx.input(0);
  if (IsHalfType(x.dtype())) return RunAsFloat32(ctx, LpNormKernel, x.dtype());
  SPARQ_RETURN_IF_ERROR(RequireFloat(ctx, x));
  SPARQ_ASSIGN_OR_RETURN(int64_t axis,
                         NormalizeAxis(ctx, ctx.node().attr_int("axis", -1), static_cast<int64_t>(x.rank())));
  const int64_t p = ctx.node().attr_int("p", 2);
  if (p != 1 && p != 2) return ctx.InvalidArgument("attribute p must be 1 or 2, got " + std::to_string(p));
  const size_t a = static_cast<size_t>(axis);
  const int64_t outer = DimProduct(x.shape(), 0, a), n = x.dim(a);
  const int64_t inner = DimProduct(x.shape(), a + 1, x.rank());
  Tensor y(x.dtype(), x.shape());
  if (x.dtype() == DataType::kFloat64) LpNormTyped<double>(x, &y, outer, n, inner, p, ctx.pool());
  else LpNormTyped<float>(x, &y, outer, n, inner, p, ctx.pool());
  ctx.set_output(0, std::move(y));
  return Status::OK();
}

// ---------------------------------------------------------------------------
// MeanVarianceNormalization: (x - mean) / (sqrt(variance) + 1e-9), with mean
// and variance over `axes` (default [0, 2, 3]), as ONNX's function body.

template <typename T>
void MvnTyped(const Tensor& x, Tensor* y, const ReductionLayout& layout, ThreadPool* pool) {
  const T* xp = x.data<T>();
  T* yp = y->data<T>();
  const int64_t n = static_cast<int64_t>(layout.offsets.size());
  const int64_t* off = layout.offsets.data();
  ParallelFor(pool, static_cast<int64_t>(layout.base.size()), GrainFor(n), [&](int64_t begin, int64_t end) {
    for (int64_t g = begin; g < end; ++g) {
      const int64_t base = layout.base[static_cast<size_t>(g)];
      double m, v;
      MeanVariance(xp + base, off, n, &m, &v);
      const double denom = std::sqrt(v) + 1e-9;
      for (int64_t i = 0; i < n; ++i) {
        const int64_t k = base + off[i];
        yp[k] = static_cast<T>((static_cast<double>(xp[k]) - m) / denom);
      }
    }
  });
}

Status MvnKernel(OpContext& ctx) {
  SPARQ_RETURN_IF_ERROR(ctx.RequireInputs(1));
  const Tensor& x = ctx.input(0);
  if (IsHalfType(x.dtype())) return RunAsFloat32(ctx, MvnKernel, x.dtype());
  SPARQ_RETURN_IF_ERROR(RequireFloat(ctx, x));
  const std::vector<int64_t> axes = ctx.node().attr_ints("axes", {0, 2, 3});
  SPARQ_ASSIGN_OR_RETURN(std::vector<bool> mask, AxesToMask(ctx, axes, static_cast<int64_t>(x.rank())));
  const ReductionLayout layout = MakeReductionLayout(x.shape(), mask);
  Tensor y(x.dtype(), x.shape());
  if (x.dtype() == DataType::kFloat64) MvnTyped<double>(x, &y, layout, ctx.pool());
  else MvnTyped<float>(x, &y, layout, ctx.pool());
  ctx.set_output(0, std::move(y));
  return Status::OK();
}

}  // namespace

// sparq.LayerNormChain (runtime/passes/float_fusion.h): LayerNorm as exported
// below opset 17, inputs x, exponent (2), epsilon, gamma and an optional beta.
// The nodes it replaces, on their reference kernels, in their order:
//   d = Sub(x, ReduceMean(x, axes [-1]))
//   y = Mul(Div(d, Sqrt(Add(ReduceMean(Pow(d, exponent), axes [-1]), epsilon))), gamma) [Add(., beta)]
// so the fused graph's reference gives the unfused graph's bits.
namespace {
Status LayerNormChainKernel(OpContext& ctx) {
  SPARQ_RETURN_IF_ERROR(ctx.RequireInputs(4));
  auto run = [&](const char* op, std::vector<const Tensor*> inputs, std::vector<Attribute> attrs, Tensor* out) {
    return RunReferenceStep(ctx, op, std::move(inputs), std::move(attrs), out);
  };
  const std::vector<Attribute> last_axis = {Attribute::Ints("axes", {-1})};
  Tensor mean, d, sq, var, y;
  SPARQ_RETURN_IF_ERROR(run("ReduceMean", {&ctx.input(0)}, last_axis, &mean));
  SPARQ_RETURN_IF_ERROR(run("Sub", {&ctx.input(0), &mean}, {}, &d));
  SPARQ_RETURN_IF_ERROR(run("Pow", {&d, &ctx.input(1)}, {}, &sq));
  SPARQ_RETURN_IF_ERROR(run("ReduceMean", {&sq}, last_axis, &var));
  SPARQ_RETURN_IF_ERROR(run("Add", {&var, &ctx.input(2)}, {}, &var));
  SPARQ_RETURN_IF_ERROR(run("Sqrt", {&var}, {}, &var));
  SPARQ_RETURN_IF_ERROR(run("Div", {&d, &var}, {}, &y));
  SPARQ_RETURN_IF_ERROR(run("Mul", {&y, &ctx.input(3)}, {}, &y));
  if (ctx.has_input(4)) SPARQ_RETURN_IF_ERROR(run("Add", {&y, &ctx.input(4)}, {}, &y));
  ctx.set_output(0, std::move(y));
  return Status::OK();
}
}  // namespace

void RegisterNormOps(KernelRegistry& r) {
  r.Add({"LayerNormChain", kSparqDomain, 1, 99, LayerNormChainKernel, "ref"});
  r.Add({"BatchNormalization", "", 1, 99, BatchNormKernel, "ref"});
  r.Add({"LayerNormalization", "", 1, 99, LayerNormKernel, "ref"});
  r.Add({"InstanceNormalization", "", 1, 99, InstanceNormKernel, "ref"});
  r.Add({"LpNormalization", "", 1, 99, LpNormKernel, "ref"});
  r.Add({"MeanVarianceNormalization", "", 9, 99, MvnKernel, "ref"});
}

}  // namespace sparq
