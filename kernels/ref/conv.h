// Reference convolution (Conv, ConvTranspose) on NC<spatial> buffers, and the
// sliding-window geometry that Conv and the pooling operators share.
//
// These functions are the spec for fast convolution kernels: a fast kernel is
// correct when it matches ConvF32Ref within its precision's tolerance.
//
// Layouts (row-major, R = number of spatial dims, 1 to any):
//   Conv:          x [N, C, I_1..I_R]   w [M, C/group, k_1..k_R]   y [N, M, O_1..O_R]
//   ConvTranspose: x [N, C, I_1..I_R]   w [C, M/group, k_1..k_R]   y [N, M, O_1..O_R]
//   bias [M] (optional, may be null).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/parallel.h"
#include "sparq/status.h"
#include "sparq/tensor.h"

namespace sparq {

// ONNX's auto_pad attribute.
enum class AutoPad {
  kNotSet,     // explicit `pads`
  kSameUpper,  // output = ceil(input / stride); odd padding goes at the end
  kSameLower,  // same, odd padding at the beginning
  kValid,      // no padding
};

// Parses "NOTSET" (or ""), "SAME_UPPER", "SAME_LOWER", "VALID"; InvalidArgument otherwise.
StatusOr<AutoPad> ParseAutoPad(const std::string& value);

// A sliding window over R spatial dims. Empty vectors take their defaults when
// resolved: strides 1, dilations 1, pads 0. pads holds R begins then R ends.
struct WindowGeometry {
  std::vector<int64_t> kernel;     // window extent per dim (>= 1)
  std::vector<int64_t> strides;    // step per dim (>= 1)
  std::vector<int64_t> dilations;  // spacing of window taps (>= 1)
  std::vector<int64_t> pads;       // [begin_1..begin_R, end_1..end_R], >= 0

  // Effective extent of the dilated window along dim d: (k - 1) * dilation + 1.
  int64_t Extent(size_t d) const { return (kernel[d] - 1) * dilations[d] + 1; }
};

// Fills defaults of `g` for in_spatial.size() dims, checks every attribute's
// length and range, applies auto_pad (which overrides pads) and computes the
// output spatial dims:
//   explicit/VALID: O = floor_or_ceil((I + pad_begin + pad_end - Extent) / stride) + 1
//                   (ceil_mode: a last window starting past I + pad_begin is dropped)
//   SAME_*:         O = ceil(I / stride), padding max(0, (O-1)*stride + Extent - I)
// InvalidArgument (without node name; callers add it) on a bad attribute or an
// empty output.
Status ResolveWindow(const Shape& in_spatial, AutoPad auto_pad, bool ceil_mode, WindowGeometry* g,
                     Shape* out_spatial);

struct ConvParams {
  WindowGeometry window;  // window.kernel = spatial dims of w
  int64_t group = 1;      // channels are split into `group` independent convolutions
};

// Checks Conv shapes (ranks, channels vs group, kernel vs w) and resolves the
// window for x; sets p->window.kernel from w when empty. y_shape: [N, M, O...].
// Messages name both shapes, e.g. "X has shape [1, 3, 5, 5] (3 channels) but W
// has shape [2, 4, 3, 3], which with group 1 needs 4 input channels".
Status PrepareConv(const Shape& x_shape, const Shape& w_shape, AutoPad auto_pad, ConvParams* p, Shape* y_shape);

// The same for ConvTranspose. output_padding (empty: zeros) adds to the end of
// each output dim; output_shape (empty: computed) fixes the spatial output dims
// and implies the pads (then p->window.pads may become negative at the end,
// meaning extra output rows that only receive the bias).
Status PrepareConvTranspose(const Shape& x_shape, const Shape& w_shape, AutoPad auto_pad,
                            const std::vector<int64_t>& output_padding, const std::vector<int64_t>& output_shape,
                            ConvParams* p, Shape* y_shape);

// y = conv(x, w) + bias for shapes accepted by PrepareConv (p resolved by it).
//   y[n, m, o] = bias[m] + sum over (c, t) of x[n, g*C/group + c, o*stride - pad_begin + t*dilation] * w[m, c, t]
// where g = m / (M/group), taps outside x read 0. Computed by im2col and
// GemmF32Ref: each element sums its C/group * prod(k) products in (c, t)
// row-major order, then adds the bias. Deterministic for any pool.
void ConvF32Ref(const ConvParams& p, const Shape& x_shape, const float* x, const Shape& w_shape, const float* w,
                const float* bias, const Shape& y_shape, float* y, ThreadPool* pool);
void ConvF64Ref(const ConvParams& p, const Shape& x_shape, const double* x, const Shape& w_shape, const double* w,
                const double* bias, const Shape& y_shape, double* y, ThreadPool* pool);

// y = conv_transpose(x, w) + bias for shapes accepted by PrepareConvTranspose:
//   y[n, g*Mg + m, i*stride - pad_begin + t*dilation] += x[n, g*C/group + c, i] * w[g*C/group + c, m, t]
// (Mg = M / group). Computed as col = w^T x (GemmF32Ref) then a scatter-add of
// col into y in (t, i) row-major order per output channel. Deterministic for any pool.
void ConvTransposeF32Ref(const ConvParams& p, const Shape& x_shape, const float* x, const Shape& w_shape,
                         const float* w, const float* bias, const Shape& y_shape, float* y, ThreadPool* pool);
void ConvTransposeF64Ref(const ConvParams& p, const Shape& x_shape, const double* x, const Shape& w_shape,
                         const double* w, const double* bias, const Shape& y_shape, double* y, ThreadPool* pool);

}  // namespace sparq
