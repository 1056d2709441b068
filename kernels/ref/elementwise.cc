// Reference kernels of ONNX's broadcasting binary, variadic and selection
// operators: Add, Sub, Mul, Div, Pow, Mod, BitShift, Min, Max, Sum, Mean,
// the comparisons, And/Or/Xor and Where. Unary math lives in
// elementwise_unary.cc and activations in elementwise_activation.cc.
//
// Integer semantics (ONNX leaves overflow and division by zero open; these
// choices keep the kernels defined and trap-free):
//   - Add/Sub/Mul/Neg wrap around (two's complement);
//   - Div truncates toward zero like C; x / 0 gives 0;
//   - Mod with fmod=0 takes the sign of the divisor (Python), with fmod=1
//     the sign of the dividend (C); x mod 0 gives 0;
//   - Pow with an integer base and exponent multiplies exactly (wrapping);
//     a negative exponent gives 1/b**-e truncated (0 unless |b| == 1).
#include <cmath>
#include <cstring>

#include "kernels/ref/elementwise_util.h"

namespace sparq {
namespace {

using namespace elementwise;

// ---------------------------------------------------------------------------
// Two inputs of one type in kMask, broadcast (legacy attributes included);
// the output has that type, or bool when kBoolOut.
template <unsigned kMask, bool kBoolOut, typename Op>
Status RunBinary(OpContext& ctx, Op op) {
  SPARQ_RETURN_IF_ERROR(ctx.RequireInputs(2));
  const Tensor& a_in = ctx.input(0);
  const Tensor& b_in = ctx.input(1);
  SPARQ_RETURN_IF_ERROR(CheckType(ctx, a_in, "input A", kMask));
  SPARQ_RETURN_IF_ERROR(CheckSameTypes(ctx));
  Shape b_shape;
  SPARQ_ASSIGN_OR_RETURN(Shape out_shape, BinaryOutputShape(ctx, a_in, b_in, &b_shape));
  const Tensor a = WidenHalf(a_in);
  SPARQ_ASSIGN_OR_RETURN(const Tensor b, WidenHalf(b_in).Reshaped(b_shape));
  Tensor out(kBoolOut ? DataType::kBool : a.dtype(), out_shape);
  VisitType<kMask>(a.dtype(), [&](auto tag) {
    using T = decltype(tag);
    using O = std::conditional_t<kBoolOut, bool, T>;
    BinaryLoop<T, T, O>(ctx.pool(), a, b, out, [op](T x, T y) { return static_cast<O>(op(x, y)); });
  });
  ctx.set_output(0, kBoolOut ? out : NarrowTo(out, a_in.dtype()));
  return Status::OK();
}

Status Add(OpContext& ctx) {
  return RunBinary<kNumeric, false>(ctx, [](auto x, auto y) {
    if constexpr (std::is_integral_v<decltype(x)>) return WrapAdd(x, y);
    else return x + y;
  });
}

Status Sub(OpContext& ctx) {
  return RunBinary<kNumeric, false>(ctx, [](auto x, auto y) {
    if constexpr (std::is_integral_v<decltype(x)>) return WrapSub(x, y);
    else return x - y;
  });
}

Status Mul(OpContext& ctx) {
  return RunBinary<kNumeric, false>(ctx, [](auto x, auto y) {
    if constexpr (std::is_integral_v<decltype(x)>) return WrapMul(x, y);
    else return x * y;
  });
}

Status Div(OpContext& ctx) {
  return RunBinary<kNumeric, false>(ctx, [](auto x, auto y) {
    if constexpr (std::is_integral_v<decltype(x)>) return TruncDiv(x, y);
    else return x / y;
  });
}

Status Mod(OpContext& ctx) {
  const bool c_fmod = ctx.node().attr_int("fmod", 0) != 0;
  if (ctx.has_input(0) && GetDataTypeInfo(ctx.input(0).dtype()) != nullptr &&
      GetDataTypeInfo(ctx.input(0).dtype())->is_float && !c_fmod) {
    return ctx.InvalidArgument("fmod must be 1 for floating point inputs (got fmod=0 with " +
                               DataTypeName(ctx.input(0).dtype()) + ")");
  }
  if (c_fmod) {
    return RunBinary<kNumeric, false>(ctx, [](auto x, auto y) {
      if constexpr (std::is_integral_v<decltype(x)>) return TruncRem(x, y);
      else return std::fmod(x, y);
    });
  }
  return RunBinary<kInts, false>(ctx, [](auto x, auto y) { return FloorRem(x, y); });
}

Status BitShift(OpContext& ctx) {
  const std::string direction = ctx.node().attr_string("direction", "");
  if (direction != "LEFT" && direction != "RIGHT")
    return ctx.InvalidArgument("direction must be \"LEFT\" or \"RIGHT\", got \"" + direction + "\"");
  const bool left = direction == "LEFT";
  // Shifting by the bit width or more gives 0 (C leaves it undefined).
  return RunBinary<kUnsignedInts, false>(ctx, [left](auto x, auto y) {
    using T = decltype(x);
    constexpr T kBits = static_cast<T>(sizeof(T) * 8);
    if (y >= kBits) return T{0};
    return left ? static_cast<T>(static_cast<WideUnsigned<T>>(x) << y) : static_cast<T>(x >> y);
  });
}

// ---------------------------------------------------------------------------
// Comparisons and logic: bool outputs.

Status Equal(OpContext& ctx) {
  return RunBinary<kAllTypes, true>(ctx, [](auto x, auto y) { return x == y; });
}
Status Less(OpContext& ctx) {
  return RunBinary<kNumeric, true>(ctx, [](auto x, auto y) { return x < y; });
}
Status LessOrEqual(OpContext& ctx) {
  return RunBinary<kNumeric, true>(ctx, [](auto x, auto y) { return x <= y; });
}
Status Greater(OpContext& ctx) {
  return RunBinary<kNumeric, true>(ctx, [](auto x, auto y) { return x > y; });
}
Status GreaterOrEqual(OpContext& ctx) {
  return RunBinary<kNumeric, true>(ctx, [](auto x, auto y) { return x >= y; });
}
Status And(OpContext& ctx) {
  return RunBinary<kBoolBit, true>(ctx, [](bool x, bool y) { return x && y; });
}
Status Or(OpContext& ctx) {
  return RunBinary<kBoolBit, true>(ctx, [](bool x, bool y) { return x || y; });
}
Status Xor(OpContext& ctx) {
  return RunBinary<kBoolBit, true>(ctx, [](bool x, bool y) { return x != y; });
}

// ---------------------------------------------------------------------------
// Pow: the output has the base's type; the exponent may have another type
// (opset >= 12).

// b**e for integers by repeated squaring, wrapping on overflow.
template <typename T, typename E>
T IntegerPow(T base, E exp) {
  if constexpr (std::is_signed_v<E>) {
    if (exp < 0) {
      if (base == 1) return 1;
      if constexpr (std::is_signed_v<T>) {
        if (base == -1) return (exp % 2 == 0) ? T{1} : T{-1};
      }
      return 0;  // |1 / b**e| < 1 truncates to 0 (b == 0 included)
    }
  }
  T result = 1;
  T square = base;
  for (uint64_t e = static_cast<uint64_t>(exp); e != 0; e >>= 1) {
    if ((e & 1) != 0) result = WrapMul(result, square);
    if (e > 1) square = WrapMul(square, square);
  }
  return result;
}

// One element of Pow; floats are computed in double.
template <typename T, typename E>
T PowElement(T base, E exp) {
  if constexpr (std::is_integral_v<T> && std::is_integral_v<E>) {
    return IntegerPow(base, exp);
  } else {
    return SaturatingCast<T>(std::pow(static_cast<double>(base), static_cast<double>(exp)));
  }
}

Status Pow(OpContext& ctx) {
  SPARQ_RETURN_IF_ERROR(ctx.RequireInputs(2));
  constexpr unsigned kBaseTypes = kFloats | kI32 | kI64;
  const Tensor& x_in = ctx.input(0);
  const Tensor& y_in = ctx.input(1);
  SPARQ_RETURN_IF_ERROR(CheckType(ctx, x_in, "base X", kBaseTypes));
  SPARQ_RETURN_IF_ERROR(CheckType(ctx, y_in, "exponent Y", kNumeric));
  Shape y_shape;
  SPARQ_ASSIGN_OR_RETURN(Shape out_shape, BinaryOutputShape(ctx, x_in, y_in, &y_shape));
  const Tensor x = WidenHalf(x_in);
  SPARQ_ASSIGN_OR_RETURN(const Tensor y, WidenHalf(y_in).Reshaped(y_shape));
  Tensor out(x.dtype(), out_shape);
  VisitType<kBaseTypes>(x.dtype(), [&](auto base_tag) {
    using T = decltype(base_tag);
    VisitType<kNumeric>(y.dtype(), [&](auto exp_tag) {
      using E = decltype(exp_tag);
      BinaryLoop<T, E, T>(ctx.pool(), x, y, out, PowElement<T, E>);
    });
  });
  ctx.set_output(0, NarrowTo(out, x_in.dtype()));
  return Status::OK();
}

// ---------------------------------------------------------------------------
// Variadic Min/Max/Sum/Mean: inputs of one type, broadcast together, folded
// left to right (so float sums have a fixed order).
template <unsigned kMask, typename Op>
Status RunVariadic(OpContext& ctx, Op op, bool mean) {
  const size_t n = ctx.num_inputs();
  if (n == 0) return ctx.InvalidArgument("needs at least one input");
  SPARQ_RETURN_IF_ERROR(ctx.RequireInputs(n));
  SPARQ_RETURN_IF_ERROR(CheckType(ctx, ctx.input(0), "input 0", kMask));
  SPARQ_RETURN_IF_ERROR(CheckSameTypes(ctx));
  std::vector<Shape> shapes;
  for (size_t i = 0; i < n; ++i) shapes.push_back(ctx.input(i).shape());
  auto out_shape = BroadcastShapes(shapes);
  if (!out_shape.ok()) return ctx.InvalidArgument(out_shape.status().message());
  if (ctx.opset() < 8 && n > 1) {
    for (size_t i = 1; i < n; ++i) {
      if (shapes[i] != shapes[0])
        return ctx.InvalidArgument("opset < 8 requires equal input shapes, got " + ShapeToString(shapes[0]) +
                                   " and " + ShapeToString(shapes[i]));
    }
  }
  const DataType type = ctx.input(0).dtype();
  Tensor acc = WidenHalf(ctx.input(0));
  if (n == 1 || mean) acc = acc.Clone();  // private: the mean divides in place
  VisitType<kMask>(acc.dtype(), [&](auto tag) {
    using T = decltype(tag);
    for (size_t i = 1; i < n; ++i) {
      const Tensor next = WidenHalf(ctx.input(i));
      Tensor folded(acc.dtype(), BroadcastShapes({acc.shape(), next.shape()}).value());
      BinaryLoop<T, T, T>(ctx.pool(), acc, next, folded, op);
      acc = folded;
    }
    if constexpr (std::is_floating_point_v<T>) {
      if (mean) {
        T* p = acc.data<T>();
        const T count = static_cast<T>(n);
        for (int64_t i = 0; i < acc.numel(); ++i) p[i] /= count;
      }
    }
  });
  ctx.set_output(0, NarrowTo(acc, type));
  return Status::OK();
}

// NaN wins, as in numpy's maximum/minimum.
Status Max(OpContext& ctx) {
  return RunVariadic<kNumeric>(
      ctx,
      [](auto x, auto y) {
        if constexpr (std::is_floating_point_v<decltype(x)>) {
          if (x != x) return x;
          if (y != y) return y;
        }
        return x < y ? y : x;
      },
      false);
}

Status Min(OpContext& ctx) {
  return RunVariadic<kNumeric>(
      ctx,
      [](auto x, auto y) {
        if constexpr (std::is_floating_point_v<decltype(x)>) {
          if (x != x) return x;
          if (y != y) return y;
        }
        return y < x ? y : x;
      },
      false);
}

Status Sum(OpContext& ctx) {
  return RunVariadic<kFloats>(ctx, [](auto x, auto y) { return x + y; }, false);
}

Status Mean(OpContext& ctx) {
  return RunVariadic<kFloats>(ctx, [](auto x, auto y) { return x + y; }, true);
}

// ---------------------------------------------------------------------------
// Where(condition, X, Y): X where condition else Y, all three broadcast. The
// values are only copied, so any type works by element size: T is the
// unsigned integer of that size.
template <typename T>
void WhereLoop(ThreadPool* pool, const Tensor& c, const Tensor& x, const Tensor& y, Tensor& out) {
  const bool* pc = c.data<bool>();
  const T* px = static_cast<const T*>(x.raw_data());
  const T* py = static_cast<const T*>(y.raw_data());
  T* po = static_cast<T*>(out.raw_data());
  const auto plan = MakeBroadcastPlan<3>(out.shape(), {&c.shape(), &x.shape(), &y.shape()});
  ForEachRun(pool, plan, [&](int64_t o, const std::array<int64_t, 3>& off, const std::array<int64_t, 3>& st,
                             int64_t n) {
    for (int64_t i = 0; i < n; ++i)
      po[o + i] = pc[off[0] + i * st[0]] ? px[off[1] + i * st[1]] : py[off[2] + i * st[2]];
  });
}

Status Where(OpContext& ctx) {
  SPARQ_RETURN_IF_ERROR(ctx.RequireInputs(3));
  const Tensor& c = ctx.input(0);
  const Tensor& x = ctx.input(1);
  const Tensor& y = ctx.input(2);
  SPARQ_RETURN_IF_ERROR(CheckType(ctx, c, "condition", kBoolBit));
  SPARQ_RETURN_IF_ERROR(CheckType(ctx, x, "X", kAllTypes));
  if (x.dtype() != y.dtype()) {
    return ctx.InvalidArgument("X has type " + DataTypeName(x.dtype()) + " but Y has type " +
                               DataTypeName(y.dtype()) + "; they must match");
  }
  auto out_shape = BroadcastShapes({c.shape(), x.shape(), y.shape()});
  if (!out_shape.ok()) return ctx.InvalidArgument(out_shape.status().message());
  Tensor out(x.dtype(), out_shape.value());
  switch (DataTypeSize(x.dtype())) {
    case 1: WhereLoop<uint8_t>(ctx.pool(), c, x, y, out); break;
    case 2: WhereLoop<uint16_t>(ctx.pool(), c, x, y, out); break;
    case 4: WhereLoop<uint32_t>(ctx.pool(), c, x, y, out); break;
    case 8: WhereLoop<uint64_t>(ctx.pool(), c, x, y, out); break;
    default: return ctx.NotSupported("element type " + DataTypeName(x.dtype()));
  }
  ctx.set_output(0, out);
  return Status::OK();
}

}  // namespace

void RegisterElementwiseOps(KernelRegistry& r) {
  // Opset < 7 broadcasts only B onto A, through the `broadcast`/`axis`
  // attributes; opset >= 7 broadcasts numpy-style. Both rows share one
  // function that reads the opset (BinaryOutputShape).
  for (const auto& [op, fn] : std::vector<std::pair<const char*, KernelFn>>{
           {"Add", Add}, {"Sub", Sub}, {"Mul", Mul}, {"Div", Div}, {"Pow", Pow},
           {"And", And}, {"Or", Or}, {"Xor", Xor}, {"Equal", Equal}, {"Less", Less}, {"Greater", Greater}}) {
    r.Add({op, "", 1, 6, fn, "ref"});
    r.Add({op, "", 7, 99, fn, "ref"});
  }
  r.Add({"LessOrEqual", "", 12, 99, LessOrEqual, "ref"});
  r.Add({"GreaterOrEqual", "", 12, 99, GreaterOrEqual, "ref"});
  r.Add({"Mod", "", 10, 99, Mod, "ref"});
  r.Add({"BitShift", "", 11, 99, BitShift, "ref"});
  // Opset < 8 requires equal shapes; opset >= 8 broadcasts.
  for (const auto& [op, fn] : std::vector<std::pair<const char*, KernelFn>>{
           {"Max", Max}, {"Min", Min}, {"Sum", Sum}, {"Mean", Mean}}) {
    r.Add({op, "", 1, 7, fn, "ref"});
    r.Add({op, "", 8, 99, fn, "ref"});
  }
  r.Add({"Where", "", 9, 99, Where, "ref"});
  RegisterUnaryOps(r);
  RegisterActivationOps(r);
}

}  // namespace sparq
