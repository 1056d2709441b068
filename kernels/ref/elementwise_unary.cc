// Reference kernels of ONNX's one-input math operators: Sqrt, Exp, Log, Neg,
// Abs, Reciprocal, Floor, Ceil, Round, Sign, the trigonometric and
// hyperbolic functions, Tanh, Sigmoid, Erf, Not, IsNaN and IsInf.
#include <cmath>

#include "kernels/ref/elementwise_util.h"

namespace sparq {
namespace elementwise {
namespace {

// Float input, bool output: out[i] = pred(in[i]).
template <typename Pred>
Status RunFloatPredicate(OpContext& ctx, Pred pred) {
  SPARQ_RETURN_IF_ERROR(ctx.RequireInputs(1));
  const Tensor& in = ctx.input(0);
  SPARQ_RETURN_IF_ERROR(CheckType(ctx, in, "input X", kFloats));
  const Tensor x = WidenHalf(in);
  Tensor out(DataType::kBool, x.shape());
  VisitType<kF32 | kF64>(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    UnaryLoop<T, bool>(ctx.pool(), x, out, pred);
  });
  ctx.set_output(0, out);
  return Status::OK();
}

// A kernel per float-only function of the C library.
#define SPARQ_FLOAT_UNARY(Name, expr)                                  \
  Status Name(OpContext& ctx) {                                        \
    return RunSameTypeUnary<kFloats>(ctx, [](auto x) { return (expr); });      \
  }

SPARQ_FLOAT_UNARY(Sqrt, std::sqrt(x))
SPARQ_FLOAT_UNARY(Exp, std::exp(x))
SPARQ_FLOAT_UNARY(Log, std::log(x))
SPARQ_FLOAT_UNARY(Reciprocal, decltype(x){1} / x)
SPARQ_FLOAT_UNARY(Floor, std::floor(x))
SPARQ_FLOAT_UNARY(Ceil, std::ceil(x))
SPARQ_FLOAT_UNARY(Sin, std::sin(x))
SPARQ_FLOAT_UNARY(Cos, std::cos(x))
SPARQ_FLOAT_UNARY(Tan, std::tan(x))
SPARQ_FLOAT_UNARY(Asin, std::asin(x))
SPARQ_FLOAT_UNARY(Acos, std::acos(x))
SPARQ_FLOAT_UNARY(Atan, std::atan(x))
SPARQ_FLOAT_UNARY(Sinh, std::sinh(x))
SPARQ_FLOAT_UNARY(Cosh, std::cosh(x))
SPARQ_FLOAT_UNARY(Asinh, std::asinh(x))
SPARQ_FLOAT_UNARY(Acosh, std::acosh(x))
SPARQ_FLOAT_UNARY(Atanh, std::atanh(x))
SPARQ_FLOAT_UNARY(Tanh, std::tanh(x))

#undef SPARQ_FLOAT_UNARY

// ONNX also defines Erf on integers: computed in double, truncated back.
Status Erf(OpContext& ctx) {
  return RunSameTypeUnary<kNumeric>(ctx, [](auto x) {
    using T = decltype(x);
    if constexpr (std::is_floating_point_v<T>) return std::erf(x);
    else return SaturatingCast<T>(std::erf(static_cast<double>(x)));
  });
}

// Halves round to the nearest even integer, independent of the FPU's mode.
Status Round(OpContext& ctx) {
  return RunSameTypeUnary<kFloats>(ctx, [](auto x) {
    using T = decltype(x);
    const T f = std::floor(x);
    const T diff = x - f;
    if (diff < T(0.5)) return f;
    if (diff > T(0.5)) return f + T(1);
    return std::fmod(f, T(2)) == T(0) ? f : f + T(1);
  });
}

// 1 / (1 + e^-x). For very negative x, e^-x overflows to inf and the
// result is 0, as it should be; no NaN can arise.
Status Sigmoid(OpContext& ctx) {
  return RunSameTypeUnary<kFloats>(ctx, [](auto x) {
    using T = decltype(x);
    return T(1) / (T(1) + std::exp(-x));
  });
}

Status Neg(OpContext& ctx) {
  return RunSameTypeUnary<kSignedNumeric>(ctx, [](auto x) {
    if constexpr (std::is_integral_v<decltype(x)>) return WrapNeg(x);
    else return -x;
  });
}

Status Abs(OpContext& ctx) {
  return RunSameTypeUnary<kNumeric>(ctx, [](auto x) {
    using T = decltype(x);
    if constexpr (std::is_floating_point_v<T>) return std::fabs(x);
    else if constexpr (std::is_signed_v<T>) return x < 0 ? WrapNeg(x) : x;
    else return x;
  });
}

// -1, 0 or 1; NaN stays NaN.
Status Sign(OpContext& ctx) {
  return RunSameTypeUnary<kNumeric>(ctx, [](auto x) {
    using T = decltype(x);
    if constexpr (std::is_floating_point_v<T>) {
      if (x != x) return x;
    }
    return static_cast<T>(x > T(0) ? 1 : (x < T(0) ? -1 : 0));
  });
}

Status Not(OpContext& ctx) {
  return RunSameTypeUnary<kBoolBit>(ctx, [](bool x) { return !x; });
}

Status IsNaN(OpContext& ctx) {
  return RunFloatPredicate(ctx, [](auto x) { return x != x; });
}

Status IsInf(OpContext& ctx) {
  const bool negative = ctx.node().attr_int("detect_negative", 1) != 0;
  const bool positive = ctx.node().attr_int("detect_positive", 1) != 0;
  return RunFloatPredicate(ctx, [negative, positive](auto x) {
    return std::isinf(x) && (x > 0 ? positive : negative);
  });
}

}  // namespace

void RegisterUnaryOps(KernelRegistry& r) {
  // Opsets 1..5 differ only by the ignored `consumed_inputs` attribute and
  // later ones only by the type lists, so one row covers each op.
  r.Add({"Sqrt", "", 1, 99, Sqrt, "ref"});
  r.Add({"Exp", "", 1, 99, Exp, "ref"});
  r.Add({"Log", "", 1, 99, Log, "ref"});
  r.Add({"Reciprocal", "", 1, 99, Reciprocal, "ref"});
  r.Add({"Floor", "", 1, 99, Floor, "ref"});
  r.Add({"Ceil", "", 1, 99, Ceil, "ref"});
  r.Add({"Round", "", 11, 99, Round, "ref"});
  r.Add({"Neg", "", 1, 99, Neg, "ref"});
  r.Add({"Abs", "", 1, 99, Abs, "ref"});
  r.Add({"Sign", "", 9, 99, Sign, "ref"});
  r.Add({"Sin", "", 7, 99, Sin, "ref"});
  r.Add({"Cos", "", 7, 99, Cos, "ref"});
  r.Add({"Tan", "", 7, 99, Tan, "ref"});
  r.Add({"Asin", "", 7, 99, Asin, "ref"});
  r.Add({"Acos", "", 7, 99, Acos, "ref"});
  r.Add({"Atan", "", 7, 99, Atan, "ref"});
  r.Add({"Sinh", "", 9, 99, Sinh, "ref"});
  r.Add({"Cosh", "", 9, 99, Cosh, "ref"});
  r.Add({"Asinh", "", 9, 99, Asinh, "ref"});
  r.Add({"Acosh", "", 9, 99, Acosh, "ref"});
  r.Add({"Atanh", "", 9, 99, Atanh, "ref"});
  r.Add({"Tanh", "", 1, 99, Tanh, "ref"});
  r.Add({"Sigmoid", "", 1, 99, Sigmoid, "ref"});
  r.Add({"Erf", "", 9, 99, Erf, "ref"});
  r.Add({"Not", "", 1, 99, Not, "ref"});
  r.Add({"IsNaN", "", 9, 99, IsNaN, "ref"});
  r.Add({"IsInf", "", 10, 99, IsInf, "ref"});
}

}  // namespace elementwise
}  // namespace sparq
