// Reference kernels of ONNX's activation functions: Relu, LeakyRelu, PRelu,
// Clip, Elu, Selu, Celu, ThresholdedRelu, HardSigmoid, HardSwish, Gelu,
// Softplus, Softsign and Shrink.
#include <cmath>
#include <limits>

#include "kernels/ref/elementwise_util.h"

namespace sparq {
namespace elementwise {
namespace {

float Attr(const OpContext& ctx, const char* name, float dflt) { return ctx.node().attr_float(name, dflt); }

// max(x, 0); NaN stays NaN.
Status Relu(OpContext& ctx) {
  return RunSameTypeUnary<kSignedNumeric>(ctx, [](auto x) { return x < decltype(x){0} ? decltype(x){0} : x; });
}

// sparq.Silu (runtime/passes/float_fusion.h): x * Sigmoid(x) as the two nodes it
// replaces compute it, Sigmoid's 1 / (1 + e^-x) rounded to T, then the
// product rounded to T. float32 and float64 only (the fusion leaves 16-bit
// float models alone).
Status Silu(OpContext& ctx) {
  return RunSameTypeUnary<kF32 | kF64>(ctx, [](auto x) {
    using T = decltype(x);
    const T s = T(1) / (T(1) + std::exp(-x));
    return x * s;
  });
}

// The float32 output of a fused chain node over x: x's shape widened with
// leading 1s to the node's min_rank (the broadcast of a scalar x with the
// chain's constants).
Tensor ChainOutput(const OpContext& ctx, const Tensor& x) {
  Shape shape = x.shape();
  while (static_cast<int64_t>(shape.size()) < ctx.node().attr_int("min_rank", 0)) shape.insert(shape.begin(), 1);
  return Tensor(DataType::kFloat32, shape);
}

// sparq.HardSwishChain (runtime/passes/float_fusion.h): Div(Mul(x, Clip(Add(x,
// offset), lo, hi)), divisor) as the four nodes it replaces compute it, each
// step rounded to float32. The output has at least min_rank dimensions (the
// broadcast of a scalar x with the constants).
Status HardSwishChain(OpContext& ctx) {
  SPARQ_RETURN_IF_ERROR(ctx.RequireInputs(1));
  const Tensor& x = ctx.input(0);
  if (x.dtype() != DataType::kFloat32) return ctx.NotSupported("HardSwishChain runs float32 only");
  const float offset = Attr(ctx, "offset", 3.0f), lo = Attr(ctx, "lo", 0.0f), hi = Attr(ctx, "hi", 6.0f);
  const float divisor = Attr(ctx, "divisor", 6.0f);
  Tensor y = ChainOutput(ctx, x);
  const float* src = x.data<float>();
  float* dst = y.data<float>();
  for (int64_t i = 0; i < x.numel(); ++i) {
    const float t = src[i] + offset;
    const float above = t < lo ? lo : t;  // Clip: NaN stays NaN
    dst[i] = (src[i] * (above > hi ? hi : above)) / divisor;
  }
  ctx.set_output(0, std::move(y));
  return Status::OK();
}

// The two erf GELU chains (runtime/passes/float_fusion.h), as the five nodes
// each replaces compute it: float division, std::erf, each step rounded to
// float32. The output has at least min_rank dimensions (the broadcast of a
// scalar x with the constants).
//   sparq.GeluErfChain:       Mul(Mul(x, Add(Erf(Div(x, divisor)), offset)), scale)
//   sparq.GeluErfScaledChain: Mul(x, Mul(Add(Erf(Div(x, divisor)), offset), scale)),
//                             torch.onnx's dynamo exporter's order
template <bool kScaledTerm>
Status GeluErfChainOf(OpContext& ctx) {
  SPARQ_RETURN_IF_ERROR(ctx.RequireInputs(1));
  const Tensor& x = ctx.input(0);
  if (x.dtype() != DataType::kFloat32) return ctx.NotSupported(ctx.node().op_type + " runs float32 only");
  const float divisor = Attr(ctx, "divisor", 1.41421356f), offset = Attr(ctx, "offset", 1.0f);
  const float scale = Attr(ctx, "scale", 0.5f);
  Tensor y = ChainOutput(ctx, x);
  const float* src = x.data<float>();
  float* dst = y.data<float>();
  for (int64_t i = 0; i < x.numel(); ++i) {
    const float e = std::erf(src[i] / divisor);
    dst[i] = kScaledTerm ? src[i] * ((e + offset) * scale) : (src[i] * (e + offset)) * scale;
  }
  ctx.set_output(0, std::move(y));
  return Status::OK();
}

// sparq.GeluTanhChain (runtime/passes/float_fusion.h): JAX's tanh GELU as
// jax2tf writes it, x * (half * (offset + tanh(inner * (x + x * (x * (cube *
// x)))))), as the nine nodes it replaces compute it: each product and sum
// rounded to float32, std::tanh. The output has at least min_rank dimensions.
Status GeluTanhChain(OpContext& ctx) {
  SPARQ_RETURN_IF_ERROR(ctx.RequireInputs(1));
  const Tensor& x = ctx.input(0);
  if (x.dtype() != DataType::kFloat32) return ctx.NotSupported("GeluTanhChain runs float32 only");
  const float cube = Attr(ctx, "cube", 0.044715f), inner = Attr(ctx, "inner", 0.7978846f);
  const float offset = Attr(ctx, "offset", 1.0f), half = Attr(ctx, "half", 0.5f);
  Tensor y = ChainOutput(ctx, x);
  const float* src = x.data<float>();
  float* dst = y.data<float>();
  for (int64_t i = 0; i < x.numel(); ++i) {
    const float v = src[i];
    float m = cube * v;
    m = v * m;
    m = v * m;
    m = v + m;
    m = inner * m;
    float t = std::tanh(m);
    t = offset + t;
    t = half * t;
    dst[i] = v * t;
  }
  ctx.set_output(0, std::move(y));
  return Status::OK();
}

Status LeakyRelu(OpContext& ctx) {
  const float alpha = Attr(ctx, "alpha", 0.01f);
  return RunSameTypeUnary<kFloats>(ctx, [alpha](auto x) {
    using T = decltype(x);
    return x < T(0) ? static_cast<T>(alpha) * x : x;
  });
}

Status ThresholdedRelu(OpContext& ctx) {
  const float alpha = Attr(ctx, "alpha", 1.0f);
  return RunSameTypeUnary<kFloats>(ctx, [alpha](auto x) {
    using T = decltype(x);
    return x > static_cast<T>(alpha) ? x : T(0);
  });
}

Status Elu(OpContext& ctx) {
  const float alpha = Attr(ctx, "alpha", 1.0f);
  return RunSameTypeUnary<kFloats>(ctx, [alpha](auto x) {
    using T = decltype(x);
    return x < T(0) ? static_cast<T>(alpha) * std::expm1(x) : x;
  });
}

Status Selu(OpContext& ctx) {
  const float alpha = Attr(ctx, "alpha", 1.67326319217681884765625f);
  const float gamma = Attr(ctx, "gamma", 1.05070102214813232421875f);
  return RunSameTypeUnary<kFloats>(ctx, [alpha, gamma](auto x) {
    using T = decltype(x);
    return static_cast<T>(gamma) * (x > T(0) ? x : static_cast<T>(alpha) * std::expm1(x));
  });
}

// max(0, x) + min(0, alpha * (exp(x / alpha) - 1)).
Status Celu(OpContext& ctx) {
  const float alpha = Attr(ctx, "alpha", 1.0f);
  if (alpha == 0.0f) return ctx.InvalidArgument("alpha must not be 0");
  return RunSameTypeUnary<kFloats>(ctx, [alpha](auto x) {
    using T = decltype(x);
    const T a = static_cast<T>(alpha);
    return x > T(0) ? x : a * std::expm1(x / a);
  });
}

// max(0, min(1, alpha * x + beta)).
Status HardSigmoid(OpContext& ctx) {
  const float alpha = Attr(ctx, "alpha", 0.2f);
  const float beta = Attr(ctx, "beta", 0.5f);
  return RunSameTypeUnary<kFloats>(ctx, [alpha, beta](auto x) {
    using T = decltype(x);
    return std::max(T(0), std::min(T(1), static_cast<T>(alpha) * x + static_cast<T>(beta)));
  });
}

// x * HardSigmoid(x) with alpha = 1/6, beta = 0.5.
Status HardSwish(OpContext& ctx) {
  return RunSameTypeUnary<kFloats>(ctx, [](auto x) {
    using T = decltype(x);
    return x * std::max(T(0), std::min(T(1), x / T(6) + T(0.5)));
  });
}

Status Gelu(OpContext& ctx) {
  const std::string approximate = ctx.node().attr_string("approximate", "none");
  if (approximate == "none") {
    return RunSameTypeUnary<kFloats>(ctx, [](auto x) {
      using T = decltype(x);
      return T(0.5) * x * (T(1) + std::erf(x * static_cast<T>(M_SQRT1_2)));
    });
  }
  if (approximate == "tanh") {
    return RunSameTypeUnary<kFloats>(ctx, [](auto x) {
      using T = decltype(x);
      const T k = static_cast<T>(0.7978845608028654);  // sqrt(2 / pi)
      return T(0.5) * x * (T(1) + std::tanh(k * (x + T(0.044715) * x * x * x)));
    });
  }
  return ctx.InvalidArgument("approximate must be \"none\" or \"tanh\", got \"" + approximate + "\"");
}

// log(1 + e^x), without overflow for large x.
Status Softplus(OpContext& ctx) {
  return RunSameTypeUnary<kFloats>(ctx, [](auto x) {
    using T = decltype(x);
    return x > T(0) ? x + std::log1p(std::exp(-x)) : std::log1p(std::exp(x));
  });
}

Status Softsign(OpContext& ctx) {
  return RunSameTypeUnary<kFloats>(ctx, [](auto x) {
    using T = decltype(x);
    return x / (T(1) + std::fabs(x));
  });
}

// x + bias below -lambd, x - bias above lambd, 0 between; integers are
// computed in double and truncated back.
Status Shrink(OpContext& ctx) {
  const double bias = Attr(ctx, "bias", 0.0f);
  const double lambd = Attr(ctx, "lambd", 0.5f);
  return RunSameTypeUnary<kNumeric>(ctx, [bias, lambd](auto x) {
    using T = decltype(x);
    const double v = static_cast<double>(x);
    if (v < -lambd) return SaturatingCast<T>(v + bias);
    if (v > lambd) return SaturatingCast<T>(v - bias);
    return T(0);
  });
}

// PRelu(X, slope): slope * x where x < 0. Slope broadcasts to X's shape
// (unidirectionally); before opset 7 a 1-D slope of X's channel count
// applies per channel (dimension 1).
Status PRelu(OpContext& ctx) {
  SPARQ_RETURN_IF_ERROR(ctx.RequireInputs(2));
  const Tensor& in = ctx.input(0);
  SPARQ_RETURN_IF_ERROR(CheckType(ctx, in, "input X", kNumeric));
  SPARQ_RETURN_IF_ERROR(CheckSameTypes(ctx));
  const Tensor x = WidenHalf(in);
  Tensor slope = WidenHalf(ctx.input(1));
  if (ctx.opset() < 7 && slope.rank() == 1 && x.rank() >= 2 && slope.numel() > 1 && slope.dim(0) == x.dim(1)) {
    Shape per_channel(x.rank() - 1, 1);
    per_channel[0] = slope.dim(0);
    SPARQ_ASSIGN_OR_RETURN(slope, slope.Reshaped(per_channel));
  }
  auto shape = BroadcastShapes({x.shape(), slope.shape()});
  if (!shape.ok() || shape.value() != x.shape()) {
    return ctx.InvalidArgument("slope of shape " + ShapeToString(ctx.input(1).shape()) +
                               " does not broadcast to X of shape " + ShapeToString(x.shape()));
  }
  Tensor out(x.dtype(), x.shape());
  VisitType<kNumeric>(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    BinaryLoop<T, T, T>(ctx.pool(), x, slope, out, [](T v, T s) {
      if constexpr (std::is_integral_v<T>) return v < T(0) ? WrapMul(v, s) : v;
      else return v < T(0) ? s * v : v;
    });
  });
  ctx.set_output(0, NarrowTo(out, in.dtype()));
  return Status::OK();
}

// Clip(X, min, max). Opset < 11 takes the bounds from float attributes,
// later opsets from optional one-element inputs of X's type. An absent
// bound does not clip. min > max sets every value to max (ONNX's rule);
// NaN stays NaN.
Status Clip(OpContext& ctx) {
  SPARQ_RETURN_IF_ERROR(ctx.RequireInputs(1));
  const Tensor& in = ctx.input(0);
  SPARQ_RETURN_IF_ERROR(CheckType(ctx, in, "input X", ctx.opset() < 11 ? kFloats : kNumeric));
  const Tensor x = WidenHalf(in);
  Tensor bounds[2];  // min, max as inputs (opset >= 11), widened
  const char* names[2] = {"min", "max"};
  if (ctx.opset() >= 11) {
    for (size_t i = 0; i < 2; ++i) {
      if (!ctx.has_input(i + 1)) continue;
      const Tensor& b = ctx.input(i + 1);
      if (b.dtype() != in.dtype()) {
        return ctx.InvalidArgument(std::string(names[i]) + " has type " + DataTypeName(b.dtype()) +
                                   " but input has type " + DataTypeName(in.dtype()));
      }
      if (b.numel() != 1) {
        return ctx.InvalidArgument(std::string(names[i]) + " must be a scalar, got shape " +
                                   ShapeToString(b.shape()));
      }
      bounds[i] = WidenHalf(b);
    }
  }
  Tensor out(x.dtype(), x.shape());
  VisitType<kNumeric>(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    using Limits = std::numeric_limits<T>;
    T lo = Limits::has_infinity ? -Limits::infinity() : Limits::lowest();
    T hi = Limits::has_infinity ? Limits::infinity() : Limits::max();
    if (ctx.opset() < 11) {
      if (ctx.node().attr("min") != nullptr) lo = SaturatingCast<T>(ctx.node().attr_float("min", 0.0f));
      if (ctx.node().attr("max") != nullptr) hi = SaturatingCast<T>(ctx.node().attr_float("max", 0.0f));
    } else {
      if (bounds[0].defined()) lo = bounds[0].data<T>()[0];
      if (bounds[1].defined()) hi = bounds[1].data<T>()[0];
    }
    UnaryLoop<T, T>(ctx.pool(), x, out, [lo, hi](T v) {
      const T above = v < lo ? lo : v;
      return above > hi ? hi : above;
    });
  });
  ctx.set_output(0, NarrowTo(out, in.dtype()));
  return Status::OK();
}

// sparq.RoundToFloat16 (the executor's float16 rounding between operators,
// runtime/passes/fp16_lowering.h): a float32 value rounded to the nearest
// float16 (ties to even; beyond float16's range: infinity) and back; any
// other type passes through.
Status RoundToFloat16(OpContext& ctx) {
  SPARQ_RETURN_IF_ERROR(ctx.RequireInputs(1));
  const Tensor& x = ctx.input(0);
  if (x.dtype() != DataType::kFloat32) {
    ctx.set_output(0, x);
    return Status::OK();
  }
  Tensor out = Tensor::Uninitialized(DataType::kFloat32, x.shape());
  const float* in = x.data<float>();
  float* y = out.data<float>();
  for (int64_t i = 0; i < x.numel(); ++i) y[i] = HalfToFloat(FloatToHalf(in[i]));
  ctx.set_output(0, std::move(out));
  return Status::OK();
}

}  // namespace

void RegisterActivationOps(KernelRegistry& r) {
  r.Add({"RoundToFloat16", kSparqDomain, 1, 99, RoundToFloat16, "ref"});
  r.Add({"Relu", "", 1, 99, Relu, "ref"});
  r.Add({"Silu", kSparqDomain, 1, 99, Silu, "ref"});
  r.Add({"HardSwishChain", kSparqDomain, 1, 99, HardSwishChain, "ref"});
  r.Add({"GeluErfChain", kSparqDomain, 1, 99, GeluErfChainOf<false>, "ref"});
  r.Add({"GeluErfScaledChain", kSparqDomain, 1, 99, GeluErfChainOf<true>, "ref"});
  r.Add({"GeluTanhChain", kSparqDomain, 1, 99, GeluTanhChain, "ref"});
  r.Add({"LeakyRelu", "", 1, 99, LeakyRelu, "ref"});
  r.Add({"ThresholdedRelu", "", 10, 99, ThresholdedRelu, "ref"});
  r.Add({"Elu", "", 1, 99, Elu, "ref"});
  r.Add({"Selu", "", 1, 99, Selu, "ref"});
  r.Add({"Celu", "", 12, 99, Celu, "ref"});
  r.Add({"HardSigmoid", "", 1, 99, HardSigmoid, "ref"});
  r.Add({"HardSwish", "", 14, 99, HardSwish, "ref"});
  r.Add({"Gelu", "", 20, 99, Gelu, "ref"});
  r.Add({"Softplus", "", 1, 99, Softplus, "ref"});
  r.Add({"Softsign", "", 1, 99, Softsign, "ref"});
  r.Add({"Shrink", "", 9, 99, Shrink, "ref"});
  // Opset 7 replaced the per-channel slope with unidirectional broadcasting.
  r.Add({"PRelu", "", 1, 6, PRelu, "ref"});
  r.Add({"PRelu", "", 7, 99, PRelu, "ref"});
  // Opset 11 moved min/max from attributes to inputs.
  r.Add({"Clip", "", 1, 10, Clip, "ref"});
  r.Add({"Clip", "", 11, 99, Clip, "ref"});
}

}  // namespace elementwise
}  // namespace sparq
