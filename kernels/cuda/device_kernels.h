// The CUDA backend's kernel arguments and per-element kernel bodies, free of
// CUDA headers: each body computes one output element as a function of its
// index, so a __global__ kernel is a grid-stride loop over it (elementwise.cu,
// nn.cu) and a host test is a plain loop over it
// (tests/kernels/cuda_kernel_bodies_test.cc), which pins the device's
// integer results to kernels/ref bit for bit without a GPU. Kernels that
// use shared memory (softmax, layer norm, the INT8 GEMM fallback) are tested
// through their row functions in device_math.h instead.
#pragma once

#include <stdint.h>

#include "kernels/cuda/device_math.h"

namespace sparq {
namespace cuda {

inline constexpr int kMaxRank = 8;

// numpy broadcasting of two inputs to an output of `rank` <= kMaxRank dims;
// strides are in elements, 0 along broadcast dims.
struct BroadcastPlan {
  int rank = 0;
  int64_t numel = 0;
  int64_t dims[kMaxRank] = {};
  int64_t a_strides[kMaxRank] = {};
  int64_t b_strides[kMaxRank] = {};
  bool same_shape = false;  // both inputs have the output's shape: a flat loop
  bool b_scalar = false;    // b has one element
};

// Requantization of an int32 GEMM result acc [rows, cols] (row-major) to
// int8 / uint8, with the zero point corrections of a GEMM of shifted inputs:
//   acc' = acc - b_zp[c] * a_sum[r] - a_zp[r] * b_sum[c] + k * a_zp[r] * b_zp[c]   (mod 2^32)
//   out  = RequantizeValue(acc', bias, multiplier, y_zp, relu)        (device_math.h)
// a_zp / b_zp: a device array (per row / per column) or null for the scalar.
// a_sum / b_sum may be null when the other side's zero points are all 0.
struct RequantArgs {
  const int32_t* acc = nullptr;
  int64_t rows = 0, cols = 0;
  const int32_t* a_sum = nullptr;  // [rows]: sums of A's rows over k
  const int32_t* b_sum = nullptr;  // [cols]: sums of B's columns over k
  const int32_t* a_zp = nullptr;   // [rows] or null: a_zp_scalar
  int32_t a_zp_scalar = 0;
  const int32_t* b_zp = nullptr;  // [cols] or null: b_zp_scalar
  int32_t b_zp_scalar = 0;
  int32_t k = 0;
  const int32_t* bias = nullptr;  // per row (bias_per_row) or per column; null: none
  bool bias_per_row = false;
  const float* multiplier = nullptr;  // per row, per column or one (multiplier_stride_*)
  bool multiplier_per_row = false;
  bool multiplier_per_col = false;
  int32_t y_zp = 0;
  bool relu = false;
  bool out_signed = true;
  void* out = nullptr;  // [rows, cols]
};

// y = the permutation of x (elements of elem_size 1, 2, 4 or 8 bytes):
// out_dims are y's dims, in_strides[d] x's stride (elements) along y's dim d.
struct PermutePlan {
  int64_t base = 0;  // x's element of y's first (Slice); 0 for a transpose
  int rank = 0;
  int64_t numel = 0;
  int64_t out_dims[kMaxRank] = {};
  int64_t in_strides[kMaxRank] = {};
};

// sparq.QLinearAdd / QLinearMul / QLinearLut: per-tensor parameters and an
// optional 256-entry table applied to the result (table[y - min(Y's type)]).
struct QLinearBinaryArgs {
  bool mul = false;
  bool a_signed = false, b_signed = false, y_signed = false;
  float a_scale = 1, b_scale = 1, y_scale = 1;
  int32_t a_zp = 0, b_zp = 0, y_zp = 0;
  bool has_table = false;
  uint8_t table[256] = {};  // the table's bytes (uint8 or int8 values)
};

// ---------------------------------------------------------------------------
// Convolution and pooling geometry (NCHW, 2-D)

struct Conv2dGeometry {
  int64_t batch = 1, channels = 0, height = 0, width = 0;  // input
  int64_t out_channels = 0, out_height = 0, out_width = 0;
  int64_t kernel_h = 1, kernel_w = 1, stride_h = 1, stride_w = 1, dilation_h = 1, dilation_w = 1;
  int64_t pad_top = 0, pad_left = 0;
  SPARQ_HD int64_t patch() const { return channels * kernel_h * kernel_w; }  // K of the GEMM
  SPARQ_HD int64_t pixels() const { return out_height * out_width; }          // P of one image
};

struct Pool2dGeometry {
  int64_t planes = 0, height = 0, width = 0;  // planes = N * C
  int64_t out_height = 0, out_width = 0;
  int64_t kernel_h = 1, kernel_w = 1, stride_h = 1, stride_w = 1, dilation_h = 1, dilation_w = 1;
  int64_t pad_top = 0, pad_left = 0;
  int64_t pad_bottom = 0, pad_right = 0;
  bool count_include_pad = false;  // AveragePool: divide by the taps inside [-pad_begin, I + pad_end)
};

// ---------------------------------------------------------------------------
// Per-element bodies

// Byte j of a uint8 (is_signed false) or int8 buffer, as int32.
SPARQ_HD int32_t ByteAt(const void* p, bool is_signed, int64_t j) {
  return is_signed ? static_cast<int32_t>(static_cast<const int8_t*>(p)[j])
                   : static_cast<int32_t>(static_cast<const uint8_t*>(p)[j]);
}

// Element i of the patch-major column matrix col [P, K] of one image x [C, H, W]:
// kk = (c * kh + ky) * kw + kx, padding read as `pad`.
template <typename T>
SPARQ_HD T Im2ColValue(int64_t i, const T* x, T pad, const Conv2dGeometry& g) {
  const int64_t K = g.patch();
  const int64_t p = i / K, kk = i % K;
  const int64_t kx = kk % g.kernel_w, ky = (kk / g.kernel_w) % g.kernel_h, c = kk / (g.kernel_w * g.kernel_h);
  const int64_t oy = p / g.out_width, ox = p % g.out_width;
  const int64_t iy = oy * g.stride_h - g.pad_top + ky * g.dilation_h;
  const int64_t ix = ox * g.stride_w - g.pad_left + kx * g.dilation_w;
  return (iy >= 0 && iy < g.height && ix >= 0 && ix < g.width) ? x[(c * g.height + iy) * g.width + ix] : pad;
}

// Output element i of a depthwise convolution y [N, C, OH, OW] (g.channels = C)
// of float32 or float16 (T = float or Half) values: float32 fused
// multiply-adds over (ky, kx), then the bias (the caller rounds once).
template <typename T>
SPARQ_HD float DepthwiseConvValue(int64_t i, const T* x, const T* w, const T* bias, const Conv2dGeometry& g) {
  const int64_t ox = i % g.out_width, oy = (i / g.out_width) % g.out_height, plane = i / g.pixels();
  const int64_t c = plane % g.channels;
  const int64_t x0 = plane * g.height * g.width, w0 = c * g.kernel_h * g.kernel_w;
  float acc = 0.0f;
  for (int64_t ky = 0; ky < g.kernel_h; ++ky) {
    const int64_t iy = oy * g.stride_h - g.pad_top + ky * g.dilation_h;
    if (iy < 0 || iy >= g.height) continue;
    for (int64_t kx = 0; kx < g.kernel_w; ++kx) {
      const int64_t ix = ox * g.stride_w - g.pad_left + kx * g.dilation_w;
      if (ix < 0 || ix >= g.width) continue;
      acc = fmaf(LoadF32(x, x0 + iy * g.width + ix), LoadF32(w, w0 + ky * g.kernel_w + kx), acc);
    }
  }
  return bias != nullptr ? acc + LoadF32(bias, c) : acc;
}

// An INT8 depthwise convolution (QLinearConv with group = C, w [C, 1, kh, kw]),
// requantized per channel.
struct DepthwiseS8Args {
  const void* x = nullptr;  // [N, C, H, W] int8 (x_signed) or uint8
  bool x_signed = false;
  const void* w = nullptr;  // [C, 1, kh, kw]
  bool w_signed = true;
  int32_t x_zp = 0;
  const int32_t* w_zp = nullptr;  // [C] or null: w_zp_scalar
  int32_t w_zp_scalar = 0;
  const int32_t* bias = nullptr;  // [C] or null
  const float* multiplier = nullptr;  // [C] (multiplier_per_channel) or one value
  bool multiplier_per_channel = false;
  int32_t y_zp = 0;
  bool y_signed = false;
};

// Output byte i of y [N, C, OH, OW] (g.channels = C):
//   acc = sum over the taps inside x of (x - x_zp) * (w - w_zp[c])   (int32; padding reads x_zp: adds 0)
//   y   = RequantizeValue(acc, bias[c], multiplier[c], y_zp)
SPARQ_HD uint8_t DepthwiseS8Element(int64_t i, const DepthwiseS8Args& a, const Conv2dGeometry& g) {
  const int64_t ox = i % g.out_width, oy = (i / g.out_width) % g.out_height, plane = i / g.pixels();
  const int64_t c = plane % g.channels;
  const int64_t x0 = plane * g.height * g.width, w0 = c * g.kernel_h * g.kernel_w;
  const int32_t wz = a.w_zp != nullptr ? a.w_zp[c] : a.w_zp_scalar;
  uint32_t acc = 0;  // wrapping, as the reference's int32 sums
  for (int64_t ky = 0; ky < g.kernel_h; ++ky) {
    const int64_t iy = oy * g.stride_h - g.pad_top + ky * g.dilation_h;
    if (iy < 0 || iy >= g.height) continue;
    for (int64_t kx = 0; kx < g.kernel_w; ++kx) {
      const int64_t ix = ox * g.stride_w - g.pad_left + kx * g.dilation_w;
      if (ix < 0 || ix >= g.width) continue;
      const int32_t xv = ByteAt(a.x, a.x_signed, x0 + iy * g.width + ix) - a.x_zp;
      const int32_t wv = ByteAt(a.w, a.w_signed, w0 + ky * g.kernel_w + kx) - wz;
      acc += static_cast<uint32_t>(xv * wv);
    }
  }
  const int32_t bias = a.bias != nullptr ? a.bias[c] : 0;
  const float mult = a.multiplier[a.multiplier_per_channel ? c : 0];
  return a.y_signed ? static_cast<uint8_t>(RequantizeValue<int8_t>(static_cast<int32_t>(acc), bias, mult, a.y_zp, false))
                    : RequantizeValue<uint8_t>(static_cast<int32_t>(acc), bias, mult, a.y_zp, false);
}

// Output element i of MaxPool over int8 / uint8 planes (the QDQ fusion moves
// MaxPool onto the integers): the largest tap inside x, the type's lowest
// value when no tap is (kernels/ref/pool.cc).
template <typename T>
SPARQ_HD T MaxPool2dIntValue(int64_t i, const T* x, const Pool2dGeometry& g) {
  const int64_t ox = i % g.out_width, oy = (i / g.out_width) % g.out_height, plane = i / (g.out_width * g.out_height);
  const T* xp = x + plane * g.height * g.width;
  T best = static_cast<T>(DeviceQuantRange<T>::kMin);
  for (int64_t ky = 0; ky < g.kernel_h; ++ky) {
    const int64_t iy = oy * g.stride_h - g.pad_top + ky * g.dilation_h;
    if (iy < 0 || iy >= g.height) continue;
    for (int64_t kx = 0; kx < g.kernel_w; ++kx) {
      const int64_t ix = ox * g.stride_w - g.pad_left + kx * g.dilation_w;
      if (ix < 0 || ix >= g.width) continue;
      const T v = xp[iy * g.width + ix];
      if (v > best) best = v;
    }
  }
  return best;
}

// Output element i of MaxPool (kMax) or AveragePool on planes of x (float32
// or float16: T = float or Half, the caller rounds once), as
// kernels/ref/pool.cc: taps in row-major order, padding skipped; the max lets
// a NaN win and stay; the average sums in double and divides by the taps
// inside x, or with count_include_pad inside [-pad_begin, I + pad_end).
template <bool kMax, typename T>
SPARQ_HD float Pool2dValue(int64_t i, const T* x, const Pool2dGeometry& g) {
  const int64_t ox = i % g.out_width, oy = (i / g.out_width) % g.out_height, plane = i / (g.out_width * g.out_height);
  const int64_t x0 = plane * g.height * g.width;
  float best = -3.402823466e+38f;  // the reference's lowest() when no tap is inside
  bool any = false;
  double sum = 0.0;
  int64_t count = 0;
  for (int64_t ky = 0; ky < g.kernel_h; ++ky) {
    const int64_t iy = oy * g.stride_h - g.pad_top + ky * g.dilation_h;
    for (int64_t kx = 0; kx < g.kernel_w; ++kx) {
      const int64_t ix = ox * g.stride_w - g.pad_left + kx * g.dilation_w;
      const bool inside = iy >= 0 && iy < g.height && ix >= 0 && ix < g.width;
      if (kMax) {
        if (!inside) continue;
        const float v = LoadF32(x, x0 + iy * g.width + ix);
        if (!any || v > best || (IsNan(v) && !IsNan(best))) best = v;
        any = true;
      } else {
        if (inside) sum += static_cast<double>(LoadF32(x, x0 + iy * g.width + ix));
        const bool in_padded = iy >= -g.pad_top && iy < g.height + g.pad_bottom && ix >= -g.pad_left &&
                               ix < g.width + g.pad_right;
        if (g.count_include_pad ? in_padded : inside) ++count;
      }
    }
  }
  if (kMax) return best;
  return static_cast<float>(sum / static_cast<double>(count));  // no tap: 0 / 0, as the reference
}

// The source element of output element i of Gather on `axis`: x viewed as
// [outer, axis_dim, inner], y as [outer, n_indices, inner]; indices already
// checked and made non-negative.
SPARQ_HD int64_t GatherSource(int64_t i, const int64_t* indices, int64_t n_indices, int64_t axis_dim, int64_t inner) {
  const int64_t in = i % inner, j = (i / inner) % n_indices, o = i / (inner * n_indices);
  return (o * axis_dim + indices[j]) * inner + in;
}

// Output byte i of sparq.QLinearAdd / QLinearMul over a broadcast plan, the table applied.
SPARQ_HD uint8_t QLinearBinaryElement(int64_t i, const void* a, const void* b, const BroadcastPlan& plan,
                                      const QLinearBinaryArgs& q) {
  const int64_t ia = plan.same_shape ? i : BroadcastOffset(i, plan.rank, plan.dims, plan.a_strides);
  const int64_t ib = plan.same_shape ? i : BroadcastOffset(i, plan.rank, plan.dims, plan.b_strides);
  const int32_t av = ByteAt(a, q.a_signed, ia), bv = ByteAt(b, q.b_signed, ib);
  int32_t y = q.y_signed ? static_cast<int32_t>(QLinearBinaryValue<int8_t>(q.mul, av, q.a_scale, q.a_zp, bv, q.b_scale,
                                                                          q.b_zp, q.y_scale, q.y_zp))
                         : static_cast<int32_t>(QLinearBinaryValue<uint8_t>(q.mul, av, q.a_scale, q.a_zp, bv, q.b_scale,
                                                                           q.b_zp, q.y_scale, q.y_zp));
  if (q.has_table) return q.table[y + (q.y_signed ? 128 : 0)];
  return static_cast<uint8_t>(y);
}

// The int32 GEMM sum `raw` of element (r, c) with the zero-point corrections
// of RequantArgs applied (modulo 2^32, as the reference's int32 sums). a.acc
// is not read: the fused GEMM (gemm_s8_fused.cu) passes sums from registers.
SPARQ_HD int32_t CorrectedAccValue(int32_t raw, int64_t r, int64_t c, const RequantArgs& a) {
  const uint32_t zr = static_cast<uint32_t>(a.a_zp != nullptr ? a.a_zp[r] : a.a_zp_scalar);
  const uint32_t zc = static_cast<uint32_t>(a.b_zp != nullptr ? a.b_zp[c] : a.b_zp_scalar);
  uint32_t acc = static_cast<uint32_t>(raw);  // wrapping int32 arithmetic
  if (a.a_sum != nullptr) acc -= zc * static_cast<uint32_t>(a.a_sum[r]);
  if (a.b_sum != nullptr) acc -= zr * static_cast<uint32_t>(a.b_sum[c]);
  acc += static_cast<uint32_t>(a.k) * zr * zc;
  return static_cast<int32_t>(acc);
}

// Element i of the int32 GEMM result a.acc, corrected.
SPARQ_HD int32_t CorrectedAcc(int64_t i, const RequantArgs& a) {
  return CorrectedAccValue(a.acc[i], i / a.cols, i % a.cols, a);
}

// Cast between float32, int32, int64, int8, uint8 and bool as Tensor::CastTo
// (core/tensor.cc): integer to integer through int64 with C truncation; else
// through double: to float a conversion, to bool v != 0, to an integer NaN -> 0,
// trunc(v) saturated to the type's range.
enum CastType : int { kCastF32 = 0, kCastI32, kCastI64, kCastI8, kCastU8, kCastBool };

SPARQ_HD bool CastIsInteger(int t) { return t == kCastI32 || t == kCastI64 || t == kCastI8 || t == kCastU8; }

SPARQ_HD int64_t CastLoadInt(const void* p, int t, int64_t i) {
  switch (t) {
    case kCastI32: return static_cast<const int32_t*>(p)[i];
    case kCastI64: return static_cast<const int64_t*>(p)[i];
    case kCastI8: return static_cast<const int8_t*>(p)[i];
    case kCastU8: return static_cast<const uint8_t*>(p)[i];
    default: return static_cast<const uint8_t*>(p)[i] != 0;  // bool
  }
}

SPARQ_HD double CastLoadDouble(const void* p, int t, int64_t i) {
  return t == kCastF32 ? static_cast<double>(static_cast<const float*>(p)[i]) : static_cast<double>(CastLoadInt(p, t, i));
}

// The limits compared as doubles (INT64_MAX rounds up to 2^63), returned as T.
template <typename T>
SPARQ_HD T SaturateFromDouble(double v, T lo, T hi) {
  if (IsNan(v)) return 0;
  const double t = trunc(v);
  if (t <= static_cast<double>(lo)) return lo;
  if (t >= static_cast<double>(hi)) return hi;
  return static_cast<T>(t);
}

SPARQ_HD void CastElement(int64_t i, const void* x, int from, void* y, int to) {
  if (CastIsInteger(from) && CastIsInteger(to)) {
    const int64_t v = CastLoadInt(x, from, i);
    switch (to) {
      case kCastI32: static_cast<int32_t*>(y)[i] = static_cast<int32_t>(v); return;
      case kCastI64: static_cast<int64_t*>(y)[i] = v; return;
      case kCastI8: static_cast<int8_t*>(y)[i] = static_cast<int8_t>(v); return;
      default: static_cast<uint8_t*>(y)[i] = static_cast<uint8_t>(v); return;
    }
  }
  const double v = CastLoadDouble(x, from, i);
  switch (to) {
    case kCastF32: static_cast<float*>(y)[i] = static_cast<float>(v); return;
    case kCastBool: static_cast<uint8_t*>(y)[i] = v != 0.0 ? 1 : 0; return;
    case kCastI32: static_cast<int32_t*>(y)[i] = SaturateFromDouble<int32_t>(v, INT32_MIN, INT32_MAX); return;
    case kCastI64: static_cast<int64_t*>(y)[i] = SaturateFromDouble<int64_t>(v, INT64_MIN, INT64_MAX); return;
    case kCastI8: static_cast<int8_t*>(y)[i] = SaturateFromDouble<int8_t>(v, INT8_MIN, INT8_MAX); return;
    default: static_cast<uint8_t*>(y)[i] = SaturateFromDouble<uint8_t>(v, 0, UINT8_MAX); return;
  }
}

// Output element o of ReduceSum / ReduceMean over float32 or float16 (T =
// float or Half): the elements at base[o] + offsets[r], r < n, summed in that
// order in double (the mean then divided in double: NaN for n = 0), rounded
// once to float32 (float16: then to float16), as kernels/ref/reduce.cc.
template <typename T>
SPARQ_HD float ReduceSumMeanElement(int64_t o, const T* x, const int64_t* base, const int64_t* offsets, int64_t n,
                                    bool mean) {
  double s = 0.0;
  for (int64_t r = 0; r < n; ++r) s += static_cast<double>(LoadF32(x, base[o] + offsets[r]));
  return static_cast<float>(mean ? s / static_cast<double>(n) : s);
}

// Output element i of a broadcast binary operator over float32 or float16
// (T = float or Half) a and b (BinaryValue; the caller rounds once).
template <typename T>
SPARQ_HD float BinaryElement(int64_t i, BinaryOp op, const T* a, const T* b, const BroadcastPlan& plan) {
  const int64_t ia = plan.same_shape ? i : BroadcastOffset(i, plan.rank, plan.dims, plan.a_strides);
  const int64_t ib = plan.same_shape ? i : BroadcastOffset(i, plan.rank, plan.dims, plan.b_strides);
  return BinaryValue(op, LoadF32(a, ia), LoadF32(b, ib));
}

// The source element of output element i of a nearest-neighbour Resize by
// whole factors (sh, sw) on the last two axes of planes of height x width
// (asymmetric coordinates, floor): y[p, r, c] = x[p, r / sh, c / sw].
SPARQ_HD int64_t ResizeNearestSource(int64_t i, int64_t height, int64_t width, int64_t sh, int64_t sw) {
  const int64_t out_w = width * sw, out_plane = height * sh * out_w;
  const int64_t p = i / out_plane, r = (i % out_plane) / out_w, c = i % out_w;
  return (p * height + r / sh) * width + c / sw;
}

// The requantize epilogue of element (r, c) from its raw int32 GEMM sum
// (RequantArgs above; a.acc is not read): the one function both the separate
// requantize kernel and the fused INT8 GEMM apply.
template <typename T>
SPARQ_HD T RequantizeAccValue(int32_t raw, int64_t r, int64_t c, const RequantArgs& a) {
  const int32_t bias = a.bias != nullptr ? a.bias[a.bias_per_row ? r : c] : 0;
  const float mult = a.multiplier[a.multiplier_per_row ? r : (a.multiplier_per_col ? c : 0)];
  return RequantizeValue<T>(CorrectedAccValue(raw, r, c, a), bias, mult, a.y_zp, a.relu);
}

// Element i of the requantized GEMM result a.acc.
template <typename T>
SPARQ_HD T RequantizeElement(int64_t i, const RequantArgs& a) {
  return RequantizeAccValue<T>(a.acc[i], i / a.cols, i % a.cols, a);
}

// sparq.MatMulIntegerToFloat's epilogue (kernels/ref/qdq_fused_ops.cc): the
// corrected sum times scale[c] (= a_scale * b_scale[c], one float32 product),
// plus bias[c] (a second rounding), then optionally sparq.GeluErfChain.
struct FloatEpilogue {
  const float* scale = nullptr;  // [cols] or one value (scale_per_col false)
  bool scale_per_col = false;
  const float* bias = nullptr;  // [cols] or null
  bool gelu = false;
  float gelu_divisor = 1.41421356f, gelu_offset = 1.0f, gelu_scale = 0.5f;
};

SPARQ_HD float AccToFloatValue(int32_t raw, int64_t r, int64_t c, const RequantArgs& a, const FloatEpilogue& e) {
  float y = MulRn(static_cast<float>(CorrectedAccValue(raw, r, c, a)), e.scale[e.scale_per_col ? c : 0]);
  if (e.bias != nullptr) y = AddRn(y, e.bias[c]);
  if (e.gelu) y = GeluErfChain(y, e.gelu_divisor, e.gelu_offset, e.gelu_scale);
  return y;
}

SPARQ_HD float AccToFloatElement(int64_t i, const RequantArgs& a, const FloatEpilogue& e) {
  return AccToFloatValue(a.acc[i], i / a.cols, i % a.cols, a, e);
}

// ---------------------------------------------------------------------------
// The fused INT8 GEMM (gemm_s8_fused.cu): out [m, n] = epilogue(a [m, k] * b [n, k]^T)
//
// One block of kFusedThreads computes a kFusedBlockM x kFusedBlockN tile of
// out; its warps (kFusedWarpsM x kFusedWarpsN) each own 32 x 32 of it as 2 x 2
// 16x16x16 int8 tensor-core fragments (WMMA, int32 sums). Per step of
// kFusedBlockK along k, both operands' tiles are staged in shared memory as
// k-chunks of 16 bytes, so every fragment starts 256-bit aligned:
//
//   tile[chunk][row][16]      chunk = kk / 16, row < kFusedBlockM (or N)
//   element (row, kk) at      (chunk * rows + row) * 16 + kk % 16
//
// Rows past m (n) and columns past k read as 0, which adds nothing to a sum.
// After the last step each warp stores its int32 fragments to a shared
// [kFusedBlockM][kFusedCLd] tile, and every thread applies the epilogue
// (RequantizeAccValue / AccToFloatValue) to its elements and writes them:
// the int32 sums never reach global memory.
inline constexpr int kFusedBlockM = 64, kFusedBlockN = 64, kFusedBlockK = 64;
inline constexpr int kFusedWarpsM = 2, kFusedWarpsN = 2, kFusedThreads = 32 * kFusedWarpsM * kFusedWarpsN;
inline constexpr int kFusedCLd = kFusedBlockN + 4;  // int32 elements per row of the shared result tile
static_assert(kFusedBlockM == 32 * kFusedWarpsM && kFusedBlockN == 32 * kFusedWarpsN, "each warp owns 32 x 32");
static_assert(kFusedBlockK % 16 == 0, "k steps of whole 16-byte chunks");
static_assert(kFusedBlockM * kFusedBlockK == 16 * 2 * kFusedThreads && kFusedBlockN == kFusedBlockM,
              "each thread stages two 16-byte chunks of each operand per step");
static_assert(kFusedCLd % 4 == 0 && (16 * kFusedCLd * 4) % 32 == 0, "WMMA stores need ldm % 4 == 0, 256-bit aligned rows");

// Which 16 bytes thread t stages per operand per k step: its slot s < 2 is
// entry 2t + s of the row-major grid [tile rows][kFusedBlockK / 16 chunks].
SPARQ_HD void FusedStageSlot(int t, int s, int* row, int* chunk) {
  constexpr int kChunks = kFusedBlockK / 16;
  const int slot = t * 2 + s;
  *row = slot / kChunks;
  *chunk = slot % kChunks;
}

// Stages bytes [k0 + 16 chunk, +16) of row row0 + row of src [rows, k] into
// tile (the layout above; `tile_rows` rows per chunk), zeros outside src.
SPARQ_HD void FusedStageBytes(const int8_t* src, int64_t rows, int64_t k, int64_t row0, int64_t k0, int row, int chunk,
                              int tile_rows, int8_t* tile) {
  int8_t* dst = tile + (static_cast<int64_t>(chunk) * tile_rows + row) * 16;
  const int64_t gr = row0 + row, gk = k0 + 16 * chunk;
  for (int j = 0; j < 16; ++j) dst[j] = (gr < rows && gk + j < k) ? src[gr * k + gk + j] : static_cast<int8_t>(0);
}

}  // namespace cuda
}  // namespace sparq
