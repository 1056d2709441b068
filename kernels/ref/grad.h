// Reference backward kernels: the gradients of the forward operators that
// block reconstruction (quant/reconstruct.cc) fits through. Each takes the
// forward's inputs (and output where cheaper) and dL/dy, and writes dL/d(input)
// for the inputs asked (null pointers: not wanted). Every gradient is
// OVERWRITTEN, not accumulated into; callers sum the gradients of a value read
// twice. Templated over float and double (the finite-difference tests run in
// double). Deterministic: each output element is summed by one thread in a
// fixed order, so the bits do not depend on the pool's thread count.
//
// Broadcasting follows numpy: the gradient of a broadcast operand is the
// output gradient summed over the axes it was broadcast along.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/parallel.h"
#include "kernels/ref/conv.h"
#include "sparq/status.h"
#include "sparq/tensor.h"

namespace sparq {

// The matrix product the Conv / MatMul / Gemm backwards run, with GemmRef's
// contract (kernels/ref/gemm.h); null: GemmRef. A caller above the kernels
// layer may pass a faster one (quant/reconstruct.cc passes the CPU's packed
// GEMM); it must be deterministic for the results to be.
template <typename T>
using GradGemmFn = void (*)(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, T alpha, const T* A,
                            int64_t lda, const T* B, int64_t ldb, T beta, T* C, int64_t ldc, ThreadPool* pool);

// Conv (1-D or 2-D spatial, any group, strides, pads, dilations; p resolved by
// PrepareConv): y = conv(x, w) + b. dx [N, C, ...], dw [M, C/group, k...],
// db [M]. Computed per image and group by im2col and GemmRef (depthwise
// convolutions by direct loops).
template <typename T>
Status ConvBackwardRef(const ConvParams& p, const Shape& x_shape, const T* x, const Shape& w_shape, const T* w,
                       const Shape& y_shape, const T* dy, T* dx, T* dw, T* db, ThreadPool* pool,
                       GradGemmFn<T> gemm = nullptr);

// MatMul with numpy semantics (rank-1 operands promoted and the added axis
// dropped; batch axes broadcast): y = a @ b. da has a's shape, db b's.
template <typename T>
Status MatMulBackwardRef(const Shape& a_shape, const T* a, const Shape& b_shape, const T* b, const T* dy, T* da,
                         T* db, ThreadPool* pool, GradGemmFn<T> gemm = nullptr);

// Gemm: y = alpha * op(A) op(B) + beta * C, A/B 2-D, C unidirectionally
// broadcast to [M, N] (c_shape empty: no C).
template <typename T>
Status GemmBackwardRef(const Shape& a_shape, const T* a, const Shape& b_shape, const T* b, const Shape& c_shape,
                       bool trans_a, bool trans_b, double alpha, double beta, const T* dy, T* da, T* db, T* dc,
                       ThreadPool* pool, GradGemmFn<T> gemm = nullptr);

// Add, Sub, Mul, Div with numpy broadcasting to y_shape.
enum class BinaryGradOp { kAdd, kSub, kMul, kDiv };
template <typename T>
Status BinaryBackwardRef(BinaryGradOp op, const Shape& a_shape, const T* a, const Shape& b_shape, const T* b,
                         const Shape& y_shape, const T* dy, T* da, T* db);

// Pointwise activations: dx[i] = f'(x[i]) * dy[i]. At a kink (Relu at 0, Clip
// at its bounds) the gradient is that of the side the forward takes: 0 past
// and at the bound for Clip's strict outside, 1 inside [lo, hi].
enum class UnaryGradOp {
  kRelu,         // max(x, 0)
  kClip,         // min(max(x, lo), hi): a = lo, b = hi
  kSigmoid,
  kHardSigmoid,  // max(0, min(1, a x + b))
  kHardSwish,    // x * max(0, min(1, x / 6 + 1 / 2))
  kTanh,
  kErf,
  kIdentity,     // Identity, Reshape, Flatten, Squeeze, Unsqueeze (same data order)
};
template <typename T>
void UnaryBackwardRef(UnaryGradOp op, double a, double b, int64_t n, const T* x, const T* dy, T* dx);

// Softmax along `axis` (negative counts from the end), from its output y:
// dx = y * (dy - sum_axis(dy * y)).
template <typename T>
Status SoftmaxBackwardRef(const Shape& shape, int64_t axis, const T* y, const T* dy, T* dx);

// LayerNormalization over the axes from `axis` on (negative counts from the
// end): y = (x - mean) / sqrt(var + epsilon) * scale + bias, scale and bias
// of the normalized axes' size. dscale, dbias summed over the outer rows in
// row order.
template <typename T>
Status LayerNormBackwardRef(const Shape& x_shape, int64_t axis, double epsilon, const T* x, const T* scale,
                            const T* dy, T* dx, T* dscale, T* dbias);

// Transpose by `perm` (empty: reversed): dx = transpose(dy, inverse perm).
template <typename T>
Status TransposeBackwardRef(const Shape& x_shape, const std::vector<int64_t>& perm, const T* dy, T* dx);

// Pad in constant mode with `pads` (R begins then R ends; negative crops):
// dx = the part of dy that came from x.
template <typename T>
Status PadBackwardRef(const Shape& x_shape, const std::vector<int64_t>& pads, const T* dy, T* dx);

// Concat along `axis`: dxs[i] (null: not wanted) gets its slice of dy.
template <typename T>
Status ConcatBackwardRef(const std::vector<Shape>& x_shapes, int64_t axis, const T* dy, const std::vector<T*>& dxs);

// GlobalAveragePool (and ReduceMean over the trailing spatial axes): x
// [N, C, ...], dy [N, C, 1...]; dx = dy / (spatial size) everywhere.
template <typename T>
Status GlobalAveragePoolBackwardRef(const Shape& x_shape, const T* dy, T* dx);

// ReduceSum / ReduceMean: dy has the kept-dims shape (1 along reduced axes);
// dx = broadcast of dy to x_shape, times `scale` (1, or 1/count for the mean).
template <typename T>
Status ReduceBackwardRef(const Shape& x_shape, const Shape& dy_keepdims_shape, double scale, const T* dy, T* dx);

}  // namespace sparq
