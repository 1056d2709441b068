// depthwise_f32: the portable plane kernel; the ISA versions compile the same
// body (depthwise_f32_plane.inc) in depthwise_f32_avx2.cc / _avx512.cc. The
// rows of the op up to AVX-512 run the planes one channel at a time
// (DepthwiseF32ByPlanes); depthwise_f32_lanes_avx512.cc holds 16 channels
// per register.
#include <algorithm>
#include <vector>

#include "kernels/cpu/cpu_target.h"
#include "kernels/cpu/internal.h"

namespace sparq {
namespace cpu {
namespace {
#include "kernels/cpu/depthwise_f32_plane.inc"
}  // namespace

void DepthwiseF32PlanePortable(const DepthwiseF32Plane& p) { DepthwisePlaneBody(p, InteriorRow); }

float* DepthwiseThreadScratch(int64_t floats) {
  thread_local std::vector<float> scratch;
  if (static_cast<int64_t>(scratch.size()) < floats) scratch.resize(static_cast<size_t>(floats));
  return scratch.data();
}

void DepthwiseF32ByPlanes(const DepthwiseF32Channels& a, void (*plane)(const DepthwiseF32Plane&)) {
  DepthwiseF32Plane p;
  p.height = a.height, p.width = a.width, p.out_h = a.out_h, p.out_w = a.out_w;
  p.kernel_h = a.kernel_h, p.kernel_w = a.kernel_w, p.stride_h = a.stride_h, p.stride_w = a.stride_w;
  p.dilation_h = a.dilation_h, p.dilation_w = a.dilation_w, p.pad_top = a.pad_top, p.pad_left = a.pad_left;
  p.out_min = a.out_min, p.out_max = a.out_max;
  const int64_t in_plane = a.height * a.width, out_plane = a.out_h * a.out_w, taps = a.kernel_h * a.kernel_w;
  for (int64_t c = 0; c < a.channels; ++c) {
    p.x = a.x + c * in_plane, p.y = a.y + c * out_plane, p.w = a.w + c * taps, p.bias = a.bias[c];
    plane(p);
  }
}

namespace {
bool ShiftedFits(int64_t kernel_h, int64_t kernel_w, int64_t stride_h, int64_t stride_w, int64_t dilation_h,
                 int64_t dilation_w, int64_t pad_left, int64_t width, int64_t out_w) {
  // 16 columns at least and at most a quarter of the last block's lanes
  // idle: on 7x7, 14x14 (EfficientNet-Lite0) and 20x20 (PP-OCR det: 0.079 vs
  // 0.052 ms) planes the lanes kernel wins; 28, 40, 56 columns and more go
  // to the rows.
  const int64_t lanes = (width + 15) / 16 * 16;
  return (kernel_w == 3 || kernel_w == 5) && stride_h == 1 && stride_w == 1 && dilation_h == 1 && dilation_w == 1 &&
         pad_left == kernel_w / 2 && out_w == width && width >= 16 && 4 * width >= 3 * lanes && width <= 4096 &&
         kernel_h <= 16;
}
}  // namespace

bool DepthwiseF32ShiftedFits(const DepthwiseF32Plane& p) {
  return ShiftedFits(p.kernel_h, p.kernel_w, p.stride_h, p.stride_w, p.dilation_h, p.dilation_w, p.pad_left, p.width,
                     p.out_w);
}
bool DepthwiseF32ShiftedFits(const DepthwiseF32Channels& a) {
  return ShiftedFits(a.kernel_h, a.kernel_w, a.stride_h, a.stride_w, a.dilation_h, a.dilation_w, a.pad_left, a.width,
                     a.out_w);
}

void DepthwiseF32ChannelsPortable(const DepthwiseF32Channels& a) { DepthwiseF32ByPlanes(a, DepthwiseF32PlanePortable); }

// Channel by channel: the rows of t that the bands read into a plane of
// scratch, then the plane kernel over the bands' output rows (its pad_top
// shifted so that output row 0 is the first band's).
void PointwiseDepthwiseF32Portable(const PointwiseDepthwiseF32& a) {
  const int64_t band = a.LanesBandRows(), plane = a.height * a.width, out_plane = a.out_h * a.out_w;
  const int64_t row0 = a.band_begin * band, row1 = std::min(a.out_h, a.band_end * band);
  if (row1 <= row0) return;
  const int64_t t_lo = std::max<int64_t>(0, row0 * a.stride_h - a.pad_top);
  const int64_t t_hi = std::min(a.height, (row1 - 1) * a.stride_h - a.pad_top + (a.kernel_h - 1) * a.dilation_h + 1);
  const int64_t taps = a.kernel_h * a.kernel_w, lanes = DepthwiseWindow::kLanes;
  float* t = a.scratch;         // [height * width]: rows [t_lo, t_hi)
  float* w = a.scratch + plane;  // [taps]: channel c's depthwise weights
  DepthwiseF32Plane p;
  p.x = t, p.height = a.height, p.width = a.width, p.out_h = row1 - row0, p.out_w = a.out_w;
  p.kernel_h = a.kernel_h, p.kernel_w = a.kernel_w, p.stride_h = a.stride_h, p.stride_w = a.stride_w;
  p.dilation_h = a.dilation_h, p.dilation_w = a.dilation_w;
  p.pad_top = a.pad_top - row0 * a.stride_h, p.pad_left = a.pad_left;
  p.out_min = a.out_min, p.out_max = a.out_max;
  for (int64_t c = 0; c < a.channels; ++c) {
    for (int64_t i = t_lo * a.width; i < t_hi * a.width; ++i) {
      float acc = 0.0f;
      for (int64_t k = 0; k < a.in_channels; ++k) acc += a.w_pw[k * 2 * lanes + c] * a.x[k * plane + i];
      float v = acc + a.b_pw[c];
      v = v < a.pw_min ? a.pw_min : v;  // NaN stays NaN
      t[i] = v > a.pw_max ? a.pw_max : v;
    }
    for (int64_t tap = 0; tap < taps; ++tap) w[tap] = a.w_dw[((c / lanes) * taps + tap) * lanes + c % lanes];
    p.w = w, p.bias = a.b_dw[c], p.y = a.y + c * out_plane + row0 * a.out_w;
    DepthwiseF32PlanePortable(p);
  }
}
#if SPARQ_CPU_X86
void DepthwiseF32ChannelsAvx2(const DepthwiseF32Channels& a) { DepthwiseF32ByPlanes(a, DepthwiseF32PlaneAvx2); }
#endif

}  // namespace cpu
}  // namespace sparq
