// Shared machinery of the reference elementwise kernels (elementwise*.cc):
// type dispatch, broadcast iteration in contiguous runs, and the unary /
// binary / ternary loops that every elementwise operator is built from.
//
// float16 and bfloat16 are computed in float32: callers convert inputs with
// WidenHalf() and narrow the result back with NarrowTo().
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "kernels/op_context.h"
#include "kernels/parallel.h"
#include "kernels/ref/broadcast.h"
#include "kernels/registry.h"
#include "sparq/tensor.h"

namespace sparq {
namespace elementwise {

// Output elements per ParallelFor chunk: large enough that the pool's
// overhead is small next to the work, small enough to spread resnet-sized
// activations (~800K elements) over all threads.
constexpr int64_t kGrain = 1 << 14;

// ---------------------------------------------------------------------------
// Type sets. A kernel names the element types it accepts as a bit mask; the
// dispatcher instantiates its body only for those types.
enum TypeBit : unsigned {
  kF32 = 1u << 0,
  kF64 = 1u << 1,
  kF16 = 1u << 2,   // computed as float32
  kBF16 = 1u << 3,  // computed as float32
  kI8 = 1u << 4,
  kI16 = 1u << 5,
  kI32 = 1u << 6,
  kI64 = 1u << 7,
  kU8 = 1u << 8,
  kU16 = 1u << 9,
  kU32 = 1u << 10,
  kU64 = 1u << 11,
  kBoolBit = 1u << 12,
};
constexpr unsigned kFloats = kF32 | kF64 | kF16 | kBF16;
constexpr unsigned kSignedInts = kI8 | kI16 | kI32 | kI64;
constexpr unsigned kUnsignedInts = kU8 | kU16 | kU32 | kU64;
constexpr unsigned kInts = kSignedInts | kUnsignedInts;
constexpr unsigned kNumeric = kFloats | kInts;
constexpr unsigned kSignedNumeric = kFloats | kSignedInts;
constexpr unsigned kAllTypes = kNumeric | kBoolBit;

// The bit of `t`; 0 for types no elementwise kernel takes.
unsigned TypeBitOf(DataType t);
inline bool IsHalf(DataType t) { return t == DataType::kFloat16 || t == DataType::kBFloat16; }
// `t` as float32 when it is float16/bfloat16, else `t` itself (a shared handle).
inline Tensor WidenHalf(const Tensor& t) { return IsHalf(t.dtype()) ? t.ToFloat32() : t; }
// `t` converted to `type` unless it already has it.
inline Tensor NarrowTo(const Tensor& t, DataType type) { return t.dtype() == type ? t : t.CastTo(type); }

// "float32, float64 or int32" style list of the types in `mask`.
std::string TypeListOf(unsigned mask);
// Fails with NotSupported (valid ONNX sparq does not handle) or InvalidArgument
// (a type the operator does not define) when input `index` (named `what`) is
// not in `mask`.
Status CheckType(const OpContext& ctx, const Tensor& t, const char* what, unsigned mask);
// Fails unless every present input has the type of input 0.
Status CheckSameTypes(const OpContext& ctx);

// Calls fn(T{}) with the C++ type of `t` when `t` is in kMask (float16 and
// bfloat16 excluded: widen them first); returns false for other types.
template <unsigned kMask, typename Fn>
bool VisitType(DataType t, Fn&& fn) {
  switch (t) {
    case DataType::kFloat32: if constexpr ((kMask & kF32) != 0) { fn(float{}); return true; } break;
    case DataType::kFloat64: if constexpr ((kMask & kF64) != 0) { fn(double{}); return true; } break;
    case DataType::kInt8: if constexpr ((kMask & kI8) != 0) { fn(int8_t{}); return true; } break;
    case DataType::kInt16: if constexpr ((kMask & kI16) != 0) { fn(int16_t{}); return true; } break;
    case DataType::kInt32: if constexpr ((kMask & kI32) != 0) { fn(int32_t{}); return true; } break;
    case DataType::kInt64: if constexpr ((kMask & kI64) != 0) { fn(int64_t{}); return true; } break;
    case DataType::kUInt8: if constexpr ((kMask & kU8) != 0) { fn(uint8_t{}); return true; } break;
    case DataType::kUInt16: if constexpr ((kMask & kU16) != 0) { fn(uint16_t{}); return true; } break;
    case DataType::kUInt32: if constexpr ((kMask & kU32) != 0) { fn(uint32_t{}); return true; } break;
    case DataType::kUInt64: if constexpr ((kMask & kU64) != 0) { fn(uint64_t{}); return true; } break;
    case DataType::kBool: if constexpr ((kMask & kBoolBit) != 0) { fn(bool{}); return true; } break;
    default: break;
  }
  return false;
}

// ---------------------------------------------------------------------------
// Integer arithmetic that wraps on overflow (two's complement) instead of
// being undefined, and never traps: x / 0 and x % 0 give 0.
template <typename T>
using WideUnsigned = std::conditional_t<(sizeof(T) < 8), uint32_t, uint64_t>;

template <typename T> T WrapAdd(T a, T b) {
  return static_cast<T>(static_cast<WideUnsigned<T>>(a) + static_cast<WideUnsigned<T>>(b));
}
template <typename T> T WrapSub(T a, T b) {
  return static_cast<T>(static_cast<WideUnsigned<T>>(a) - static_cast<WideUnsigned<T>>(b));
}
template <typename T> T WrapMul(T a, T b) {
  return static_cast<T>(static_cast<WideUnsigned<T>>(a) * static_cast<WideUnsigned<T>>(b));
}
template <typename T> T WrapNeg(T a) { return static_cast<T>(WideUnsigned<T>{0} - static_cast<WideUnsigned<T>>(a)); }
// C division, truncating toward zero (ONNX integer Div).
template <typename T> T TruncDiv(T a, T b) {
  if (b == 0) return 0;
  if constexpr (std::is_signed_v<T>) {
    if (b == -1) return WrapNeg(a);  // lowest() / -1 overflows
  }
  return static_cast<T>(a / b);
}
// C remainder: the sign of the dividend (Mod with fmod=1).
template <typename T> T TruncRem(T a, T b) {
  if (b == 0) return 0;
  if constexpr (std::is_signed_v<T>) {
    if (b == -1) return 0;
  }
  return static_cast<T>(a % b);
}
// Python remainder: the sign of the divisor (Mod with fmod=0).
template <typename T> T FloorRem(T a, T b) {
  T r = TruncRem(a, b);
  if constexpr (std::is_signed_v<T>) {
    if (r != 0 && ((r < 0) != (b < 0))) r = static_cast<T>(r + b);
  }
  return r;
}

// Converts a double to an integer type like a C cast, but defined for every
// input: NaN gives 0 and out-of-range values saturate.
template <typename T> T SaturatingCast(double v) {
  if constexpr (std::is_floating_point_v<T>) {
    return static_cast<T>(v);
  } else {
    if (v != v) return 0;
    if (v <= static_cast<double>(std::numeric_limits<T>::lowest())) return std::numeric_limits<T>::lowest();
    if (v >= static_cast<double>(std::numeric_limits<T>::max())) return std::numeric_limits<T>::max();
    return static_cast<T>(v);
  }
}

// ---------------------------------------------------------------------------
// Broadcast iteration in runs. The output is walked in row-major order; a
// "run" is a stretch of consecutive output elements along the innermost
// (collapsed) dimension, where input k advances by inner_stride[k] (0 or 1
// in practice) per element. Adjacent dimensions that every input walks
// contiguously are merged first, so equal shapes become a single run and a
// scalar operand becomes stride 0.
template <size_t N>
struct BroadcastPlan {
  Shape dims;                                  // collapsed output dims, never empty
  std::array<std::vector<int64_t>, N> strides;  // per input, per collapsed dim
  int64_t total = 0;                           // output elements
};

template <size_t N>
BroadcastPlan<N> MakeBroadcastPlan(const Shape& out, const std::array<const Shape*, N>& ins) {
  std::array<std::vector<int64_t>, N> full;
  for (size_t k = 0; k < N; ++k) full[k] = BroadcastStrides(*ins[k], out);
  BroadcastPlan<N> plan;
  plan.total = NumElements(out);
  for (size_t d = 0; d < out.size(); ++d) {
    if (out[d] == 1) continue;  // index is always 0 there
    bool merge = !plan.dims.empty();
    for (size_t k = 0; k < N && merge; ++k) merge = plan.strides[k].back() == full[k][d] * out[d];
    if (merge) {
      plan.dims.back() *= out[d];
      for (size_t k = 0; k < N; ++k) plan.strides[k].back() = full[k][d];
    } else {
      plan.dims.push_back(out[d]);
      for (size_t k = 0; k < N; ++k) plan.strides[k].push_back(full[k][d]);
    }
  }
  if (plan.dims.empty()) {  // scalar output
    plan.dims.push_back(1);
    for (size_t k = 0; k < N; ++k) plan.strides[k].push_back(0);
  }
  return plan;
}

// Calls run(out_offset, in_offsets, inner_strides, length) over all output
// elements, in parallel chunks of whole or partial runs. Each output element
// is visited exactly once, so results do not depend on the thread count.
template <size_t N, typename RunFn>
void ForEachRun(ThreadPool* pool, const BroadcastPlan<N>& plan, RunFn&& run) {
  if (plan.total == 0) return;
  const size_t rank = plan.dims.size();
  const int64_t inner = plan.dims.back();
  std::array<int64_t, N> inner_strides;
  for (size_t k = 0; k < N; ++k) inner_strides[k] = plan.strides[k][rank - 1];
  ParallelFor(pool, plan.total, kGrain, [&](int64_t begin, int64_t end) {
    std::vector<int64_t> idx(rank, 0);
    std::array<int64_t, N> off{};
    int64_t rem = begin;
    for (size_t d = rank; d-- > 0;) {
      idx[d] = rem % plan.dims[d];
      rem /= plan.dims[d];
      for (size_t k = 0; k < N; ++k) off[k] += idx[d] * plan.strides[k][d];
    }
    int64_t pos = begin;
    while (pos < end) {
      const int64_t len = std::min(inner - idx[rank - 1], end - pos);
      run(pos, off, inner_strides, len);
      pos += len;
      if (pos >= end) break;
      // Step to the start of the next run.
      for (size_t k = 0; k < N; ++k) off[k] -= idx[rank - 1] * inner_strides[k];
      idx[rank - 1] = 0;
      for (size_t d = rank - 1; d-- > 0;) {
        if (++idx[d] < plan.dims[d]) {
          for (size_t k = 0; k < N; ++k) off[k] += plan.strides[k][d];
          break;
        }
        for (size_t k = 0; k < N; ++k) off[k] -= plan.strides[k][d] * (plan.dims[d] - 1);
        idx[d] = 0;
      }
    }
  });
}

// ---------------------------------------------------------------------------
// Loops. `out` is preallocated with the final shape and type.

// out[i] = f(in[i]).
template <typename In, typename Out, typename F>
void UnaryLoop(ThreadPool* pool, const Tensor& in, Tensor& out, F f) {
  const In* x = in.data<In>();
  Out* y = out.data<Out>();
  ParallelFor(pool, in.numel(), kGrain, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) y[i] = f(x[i]);
  });
}

// The kernel of a one-input operator whose output has its input's type:
// input 0 of a type in kMask, out[i] = op(in[i]) (float16/bfloat16 computed
// in float32).
template <unsigned kMask, typename Op>
Status RunSameTypeUnary(OpContext& ctx, Op op) {
  SPARQ_RETURN_IF_ERROR(ctx.RequireInputs(1));
  const Tensor& in = ctx.input(0);
  SPARQ_RETURN_IF_ERROR(CheckType(ctx, in, "input X", kMask));
  const Tensor x = WidenHalf(in);
  Tensor out(x.dtype(), x.shape());
  VisitType<kMask>(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    UnaryLoop<T, T>(ctx.pool(), x, out, [op](T v) { return static_cast<T>(op(v)); });
  });
  ctx.set_output(0, NarrowTo(out, in.dtype()));
  return Status::OK();
}

// out = f(a, b) with a and b broadcast to out's shape.
template <typename A, typename B, typename Out, typename F>
void BinaryLoop(ThreadPool* pool, const Tensor& a, const Tensor& b, Tensor& out, F f) {
  const A* pa = a.data<A>();
  const B* pb = b.data<B>();
  Out* po = out.data<Out>();
  const auto plan = MakeBroadcastPlan<2>(out.shape(), {&a.shape(), &b.shape()});
  ForEachRun(pool, plan, [&](int64_t o, const std::array<int64_t, 2>& off, const std::array<int64_t, 2>& st,
                             int64_t n) {
    const A* x = pa + off[0];
    const B* y = pb + off[1];
    Out* z = po + o;
    // The common stride patterns get their own loops so they vectorize.
    if (st[0] == 1 && st[1] == 1) {
      for (int64_t i = 0; i < n; ++i) z[i] = f(x[i], y[i]);
    } else if (st[0] == 0 && st[1] == 1) {
      const A xv = *x;
      for (int64_t i = 0; i < n; ++i) z[i] = f(xv, y[i]);
    } else if (st[0] == 1 && st[1] == 0) {
      const B yv = *y;
      for (int64_t i = 0; i < n; ++i) z[i] = f(x[i], yv);
    } else {
      for (int64_t i = 0; i < n; ++i) z[i] = f(x[i * st[0]], y[i * st[1]]);
    }
  });
}

// ---------------------------------------------------------------------------
// Shapes.

// The shape B is read with under opset < 7's `broadcast`/`axis` attributes
// (B's dims align with A's starting at `axis`, or with A's trailing dims when
// axis is absent), or B's own shape when broadcast is 0 / opset >= 7.
// Under legacy broadcasting the result must have A's shape.
StatusOr<Shape> LegacyBroadcastShapeOfB(const OpContext& ctx, const Shape& a, const Shape& b);

// Output shape of a two-input broadcasting op at ctx's opset (handles the
// legacy attributes); sets *b_shape to the shape B is to be read with.
StatusOr<Shape> BinaryOutputShape(const OpContext& ctx, const Tensor& a, const Tensor& b, Shape* b_shape);

// Registration hooks of the files that make up the elementwise kernels.
void RegisterUnaryOps(KernelRegistry& r);
void RegisterActivationOps(KernelRegistry& r);

}  // namespace elementwise
}  // namespace sparq
