// depthwise_f32: the portable plane kernel; the ISA versions compile the same
// body (depthwise_f32_plane.inc) in depthwise_f32_avx2.cc / _avx512.cc.
#include "kernels/cpu/internal.h"

namespace sparq {
namespace cpu {
namespace {
#include "kernels/cpu/depthwise_f32_plane.inc"
}  // namespace

void DepthwiseF32PlanePortable(const DepthwiseF32Plane& p) { DepthwisePlaneBody(p, InteriorRow); }

}  // namespace cpu
}  // namespace sparq
