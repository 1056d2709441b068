// Reference pooling (MaxPool, AveragePool, LpPool and their Global forms) on
// NC<spatial> buffers: x [N, C, I_1..I_R] -> y [N, C, O_1..O_R].
//
// A window's taps are visited in row-major order over the kernel; taps that
// fall in the padding are skipped (they never win a max and add nothing to a
// sum). Sums are accumulated in double and rounded to T once.
#pragma once

#include <cstdint>

#include "kernels/parallel.h"
#include "kernels/ref/conv.h"
#include "sparq/status.h"
#include "sparq/tensor.h"

namespace sparq {

struct PoolParams {
  WindowGeometry window;
  bool count_include_pad = false;  // AveragePool: divide by taps inside the padded extent, not only inside x
  int64_t storage_order = 0;       // MaxPool indices: 0 row-major, 1 column-major spatial offsets
  double p = 2.0;                  // LpPool exponent
};

// Checks x (rank >= 3) and resolves the window (auto_pad, ceil_mode);
// y_shape = [N, C, O...]. Errors carry no node name (callers add it).
Status PreparePool(const Shape& x_shape, AutoPad auto_pad, bool ceil_mode, PoolParams* p, Shape* y_shape);

// y = max over the window's taps inside x (NaN propagates). When `indices` is
// not null it receives, per output, the flat index into x (batch and channel
// included) of the first maximal tap; with storage_order 1 the spatial part of
// that index is column-major. T: float, double, int8_t, uint8_t.
template <typename T>
void MaxPoolRef(const PoolParams& p, const Shape& x_shape, const T* x, const Shape& y_shape, T* y, int64_t* indices,
                ThreadPool* pool);

// y = (sum of taps inside x) / divisor, divisor = taps inside x, or with
// count_include_pad the taps inside [-pad_begin, I + pad_end). T: float, double.
template <typename T>
void AveragePoolRef(const PoolParams& p, const Shape& x_shape, const T* x, const Shape& y_shape, T* y,
                    ThreadPool* pool);

// y = (sum of |x|^p over taps inside x)^(1/p). T: float, double.
template <typename T>
void LpPoolRef(const PoolParams& p, const Shape& x_shape, const T* x, const Shape& y_shape, T* y, ThreadPool* pool);

// Global pools: one output per (n, c) plane; y has shape [N, C, 1, ..., 1].
enum class GlobalPoolKind { kMax, kAverage, kLp };
template <typename T>
void GlobalPoolRef(GlobalPoolKind kind, double p, const Shape& x_shape, const T* x, T* y, ThreadPool* pool);

}  // namespace sparq
