// Comparisons, logical operators and Where of the CUDA backend (rows_mask.cc:
// the attention-mask arithmetic exporters write, e.g. transformers' BERT:
// Range, GreaterOrEqual, And, Equal, Where, Expand), shared with the host
// tests as device_math.h is (no CUDA headers). Results are exact: the
// reference's comparisons of the same values (float16 compared as its
// float32 value; NaN compares false).
#pragma once

#include <stdint.h>

#include "kernels/cuda/device_f16.h"

namespace sparq {
namespace cuda {

enum class LogicOp : int { kEqual, kGreater, kGreaterOrEqual, kLess, kLessOrEqual, kAnd, kOr, kXor };

template <typename T>
SPARQ_HD T LogicLoad(const T* p, int64_t i) { return p[i]; }
SPARQ_HD float LogicLoad(const Half* p, int64_t i) { return HalfToFloatValue(p[i].bits); }

template <typename V>
SPARQ_HD bool LogicValue(LogicOp op, V a, V b) {
  switch (op) {
    case LogicOp::kEqual: return a == b;
    case LogicOp::kGreater: return a > b;
    case LogicOp::kGreaterOrEqual: return a >= b;
    case LogicOp::kLess: return a < b;
    case LogicOp::kLessOrEqual: return a <= b;
    case LogicOp::kAnd: return (a != V(0)) && (b != V(0));
    case LogicOp::kOr: return (a != V(0)) || (b != V(0));
    case LogicOp::kXor: return (a != V(0)) != (b != V(0));
  }
  return false;
}

// Output element i (bool as one byte) of a broadcast comparison / logical op.
template <typename T>
SPARQ_HD uint8_t LogicElement(int64_t i, LogicOp op, const T* a, const T* b, const BroadcastPlan& plan) {
  const int64_t ia = plan.same_shape ? i : BroadcastOffset(i, plan.rank, plan.dims, plan.a_strides);
  const int64_t ib = plan.same_shape ? i : BroadcastOffset(i, plan.rank, plan.dims, plan.b_strides);
  return LogicValue(op, LogicLoad(a, ia), LogicLoad(b, ib)) ? 1 : 0;
}

// Where(condition, X, Y) broadcast over three inputs (strides 0 along the
// dimensions an input broadcasts; all right-aligned to rank).
struct WherePlan {
  int rank = 0;
  int64_t numel = 0;
  int64_t dims[kMaxRank] = {};
  int64_t c_strides[kMaxRank] = {};
  int64_t x_strides[kMaxRank] = {};
  int64_t y_strides[kMaxRank] = {};
};

template <typename T>
SPARQ_HD T WhereElement(int64_t i, const uint8_t* c, const T* x, const T* y, const WherePlan& p) {
  int64_t oc = 0, ox = 0, oy = 0, rest = i;
  for (int d = p.rank - 1; d >= 0; --d) {
    const int64_t k = rest % p.dims[d];
    rest /= p.dims[d];
    oc += k * p.c_strides[d];
    ox += k * p.x_strides[d];
    oy += k * p.y_strides[d];
  }
  return c[oc] != 0 ? x[ox] : y[oy];
}

}  // namespace cuda
}  // namespace sparq
