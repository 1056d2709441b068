// The portable and AVX2 planes of the INT8 depthwise convolution
// (quant_conv_depthwise.cc runs them; the AVX-512 plane is
// quant_conv_depthwise_avx512.cc): the integer body of
// quant_conv_depthwise_plane.inc, compiled for each ISA with its own
// requantization row. Integer sums and the reference's requantization: every
// version gives the same bits.
#include <cstdint>

#include "kernels/cpu/cpu_target.h"
#include "kernels/cpu/internal.h"

namespace sparq {
namespace cpu {

namespace portable {
namespace {
#include "kernels/cpu/quant_conv_depthwise_plane.inc"
}  // namespace
}  // namespace portable

void DepthwiseS8PlanePortable(const DepthwiseS8Plane& p) { portable::DepthwiseS8PlaneAny(p, RequantRowPortable); }

#if SPARQ_CPU_X86
SPARQ_CPU_TARGET_BEGIN(SPARQ_CPU_AVX2_FEATURES)

namespace avx2 {
namespace {
#include "kernels/cpu/quant_conv_depthwise_plane.inc"
}  // namespace
}  // namespace avx2

void DepthwiseS8PlaneAvx2(const DepthwiseS8Plane& p) { avx2::DepthwiseS8PlaneAny(p, RequantRowAvx2); }

SPARQ_CPU_TARGET_END
#endif

}  // namespace cpu
}  // namespace sparq
