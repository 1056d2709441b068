// The portable and AVX2 planes of the INT8 depthwise convolution
// (quant_conv_depthwise.cc runs them; the AVX-512 plane is
// quant_conv_depthwise_avx512.cc). Portable: the integer body of
// quant_conv_depthwise_plane.inc. AVX2: like the AVX-512 plane, x -
// x_zero_point widened to float once and the FP32 vector rows
// (depthwise_rows_avx2.inc; every partial sum an integer below 2^24, exact),
// the sums converted back to int32 and the plane requantized by
// RequantRowAvx2; the integer body for windows the vector rows do not take.
// Integer sums and the reference's requantization: every version gives the
// same bits. The rows of the depthwise_s8 op up to AVX-512 VNNI run these
// planes one channel at a time (DepthwiseS8ByPlanes), then the table.
#include <cstdint>

#include "kernels/cpu/cpu_target.h"
#include "kernels/cpu/internal.h"

#if SPARQ_CPU_X86
#include <immintrin.h>
#endif

namespace sparq {
namespace cpu {

namespace portable {
namespace {
#include "kernels/cpu/quant_conv_depthwise_plane.inc"
}  // namespace
}  // namespace portable

void DepthwiseS8PlanePortable(const DepthwiseS8Plane& p) { portable::DepthwiseS8PlaneAny(p, RequantRowPortable); }

void DepthwiseS8ByPlanes(const DepthwiseS8Channels& a, void (*plane)(const DepthwiseS8Plane&), Lut256Fn table) {
  DepthwiseS8Plane p;
  p.x_signed = a.x_signed, p.x_zero_point = a.x_zero_point, p.y_zero_point = a.y_zero_point, p.y_signed = a.y_signed;
  p.height = a.height, p.width = a.width, p.out_h = a.out_h, p.out_w = a.out_w;
  p.kernel_h = a.kernel_h, p.kernel_w = a.kernel_w, p.stride_h = a.stride_h, p.stride_w = a.stride_w;
  p.dilation_h = a.dilation_h, p.dilation_w = a.dilation_w, p.pad_top = a.pad_top, p.pad_left = a.pad_left;
  p.scratch = a.scratch;  // DepthwiseS8Channels::ScratchFloats() covers the plane's
  const int64_t in_plane = a.height * a.width, out_plane = a.out_h * a.out_w, taps = a.kernel_h * a.kernel_w;
  const uint8_t flip = a.y_signed ? 0x80 : 0;  // table index of an int8 y: its byte ^ 0x80
  for (int64_t c = 0; c < a.channels; ++c) {
    auto* y = static_cast<uint8_t*>(a.y) + c * out_plane;
    p.x = static_cast<const uint8_t*>(a.x) + c * in_plane, p.y = y;
    p.w = a.w + c * taps, p.bias = a.bias[c], p.multiplier = a.multiplier[c];
    plane(p);
    if (a.table != nullptr) table(a.table, flip, y, y, out_plane);
  }
}

void DepthwiseS8ChannelsPortable(const DepthwiseS8Channels& a) {
  DepthwiseS8ByPlanes(a, DepthwiseS8PlanePortable, ApplyTablePortable);
}
#if SPARQ_CPU_X86
void DepthwiseS8ChannelsAvx2(const DepthwiseS8Channels& a) {
  DepthwiseS8ByPlanes(a, DepthwiseS8PlaneAvx2, ApplyTablePortable);
}
void DepthwiseS8ChannelsAvx512(const DepthwiseS8Channels& a) {
  DepthwiseS8ByPlanes(a, DepthwiseS8PlaneAvx512, ApplyTablePortable);
}
void DepthwiseS8ChannelsAvx512Vnni(const DepthwiseS8Channels& a) {
  DepthwiseS8ByPlanes(a, DepthwiseS8PlaneAvx512Vnni, ApplyTablePortable);
}
#endif

#if SPARQ_CPU_X86
SPARQ_CPU_TARGET_BEGIN(SPARQ_CPU_AVX2_FEATURES)

namespace avx2 {
namespace {
#include "kernels/cpu/quant_conv_depthwise_plane.inc"
}  // namespace
}  // namespace avx2

namespace avx2 {
namespace {
#include "kernels/cpu/depthwise_rows_avx2.inc"

// x[i] - zero_point as float, i < n.
template <typename T>
void WidenPlane(const T* x, int64_t n, int32_t zero_point, float* out) {
  const __m256i zp = _mm256_set1_epi32(zero_point);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i bytes = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(x + i));
    const __m256i v = static_cast<T>(-1) < 0 ? _mm256_cvtepi8_epi32(bytes) : _mm256_cvtepu8_epi32(bytes);
    _mm256_storeu_ps(out + i, _mm256_cvtepi32_ps(_mm256_sub_epi32(v, zp)));
  }
  for (; i < n; ++i) out[i] = static_cast<float>(static_cast<int32_t>(x[i]) - zero_point);
}

}  // namespace
}  // namespace avx2

void DepthwiseS8PlaneAvx2(const DepthwiseS8Plane& p) {
  if (!avx2::NarrowFits(p.kernel_w, p.kernel_h, p.stride_w, p.dilation_w, p.width, p.out_w)) {
    avx2::DepthwiseS8PlaneAny(p, RequantRowAvx2);
    return;
  }
  float* xf = p.scratch;                                                // [height, width]
  auto* acc = reinterpret_cast<int32_t*>(p.scratch + p.height * p.width);  // [out_h, out_w]
  if (p.x_signed) {
    avx2::WidenPlane(static_cast<const int8_t*>(p.x), p.height * p.width, p.x_zero_point, xf);
  } else {
    avx2::WidenPlane(static_cast<const uint8_t*>(p.x), p.height * p.width, p.x_zero_point, xf);
  }
  float wf[avx2::kMaxRows * 7];
  for (int64_t t = 0; t < p.kernel_h * p.kernel_w; ++t) wf[t] = p.w[t];
  avx2::NarrowGeometry g;
  g.height = p.height, g.width = p.width, g.out_h = p.out_h, g.out_w = p.out_w;
  g.kernel_h = p.kernel_h, g.stride_h = p.stride_h, g.stride_w = p.stride_w, g.dilation_h = p.dilation_h;
  g.pad_top = p.pad_top, g.pad_left = p.pad_left;
  const int64_t out_w = p.out_w;
  avx2::RowsNarrowAny(p.kernel_w, g, xf, wf, [&](int64_t oy, int64_t col, __m256i lanes, __m256 sums) {
    _mm256_maskstore_epi32(acc + oy * out_w + col, lanes, _mm256_cvtps_epi32(sums));  // sums are exact integers
  });
  RequantRowAvx2(p.out_h * p.out_w, acc, &p.bias, 0, &p.multiplier, 0, p.y_zero_point, /*fuse_relu=*/false,
                 p.y_signed, p.y);
}

SPARQ_CPU_TARGET_END
#endif

}  // namespace cpu
}  // namespace sparq
