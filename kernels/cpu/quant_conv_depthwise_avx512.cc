// The AVX-512 plane of the INT8 depthwise convolution (quant_conv_depthwise.cc
// runs it). x - x_zero_point and w - w_zero_point are integers in
// [-255, 255], so every product is an integer below 2^16 and every partial
// sum of up to 7 * 16 taps an integer below 2^24: in float they are exact.
// The plane is widened to float once and runs the vector rows of the FP32
// kernel (depthwise_rows_avx512.inc: 16 columns per register, an FMA per
// tap, four output rows at a time); each block of sums is converted back to
// int32 (exact) and requantized in registers by the steps of
// RequantRowAvx512, so the bytes are the reference's. Windows the vector rows
// do not take run the integer body (quant_conv_depthwise_plane.inc).
#include <cstdint>
#include <type_traits>

#include "kernels/cpu/cpu_target.h"
#include "kernels/cpu/internal.h"

#if SPARQ_CPU_X86
#include <immintrin.h>

namespace sparq {
namespace cpu {

SPARQ_CPU_TARGET_BEGIN(SPARQ_CPU_AVX512_FEATURES)

namespace {
#include "kernels/cpu/depthwise_rows_avx512.inc"
#include "kernels/cpu/quant_conv_depthwise_plane.inc"

// x[i] - zero_point as float, i < n.
template <typename T>
void WidenPlane(const T* x, int64_t n, int32_t zero_point, float* out) {
  const __m512i zp = _mm512_set1_epi32(zero_point);
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 k = n - i >= 16 ? __mmask16(0xFFFF) : static_cast<__mmask16>((1u << (n - i)) - 1);
    const __m128i bytes = _mm_maskz_loadu_epi8(k, x + i);
    const __m512i v = std::is_signed<T>::value ? _mm512_cvtepi8_epi32(bytes)
                                                                : _mm512_cvtepu8_epi32(bytes);
    _mm512_mask_storeu_ps(out + i, k, _mm512_cvtepi32_ps(_mm512_sub_epi32(v, zp)));
  }
}

}  // namespace

void DepthwiseS8PlaneAvx512(const DepthwiseS8Plane& p) {
  if (!NarrowFits(p.kernel_w, p.kernel_h, p.stride_w, p.dilation_w, p.width, p.out_w)) {
    DepthwiseS8PlaneAny(p, RequantRowAvx512);
    return;
  }
  float* xf = p.scratch;  // [height, width]
  if (p.x_signed) {
    WidenPlane(static_cast<const int8_t*>(p.x), p.height * p.width, p.x_zero_point, xf);
  } else {
    WidenPlane(static_cast<const uint8_t*>(p.x), p.height * p.width, p.x_zero_point, xf);
  }
  float wf[kNarrowMaxRows * 7];
  for (int64_t t = 0; t < p.kernel_h * p.kernel_w; ++t) wf[t] = p.w[t];
  NarrowGeometry g;
  g.height = p.height, g.width = p.width, g.out_h = p.out_h, g.out_w = p.out_w;
  g.kernel_h = p.kernel_h, g.stride_h = p.stride_h, g.stride_w = p.stride_w, g.dilation_h = p.dilation_h;
  g.pad_top = p.pad_top, g.pad_left = p.pad_left;
  // RequantRowAvx512's steps (RequantizeS32Ref, no fused ReLU).
  const int32_t lo = p.y_signed ? -128 : 0, hi = p.y_signed ? 127 : 255;
  const __m512 real_lo = _mm512_set1_ps(static_cast<float>(lo - p.y_zero_point));
  const __m512 real_hi = _mm512_set1_ps(static_cast<float>(hi - p.y_zero_point));
  const __m512i q_lo = _mm512_set1_epi32(lo), q_hi = _mm512_set1_epi32(hi), zp = _mm512_set1_epi32(p.y_zero_point);
  const __m512i bias = _mm512_set1_epi32(p.bias);
  const __m512 mult = _mm512_set1_ps(p.multiplier);
  auto* y = static_cast<uint8_t*>(p.y);
  const int64_t out_w = p.out_w;
  RowsNarrowAny(p.kernel_w, g, xf, wf, [&](int64_t oy, int64_t col, __mmask16 lanes, __m512 sums) {
    const __m512i acc = _mm512_add_epi32(_mm512_cvtps_epi32(sums), bias);  // sums are exact integers
    __m512 real = _mm512_mul_ps(_mm512_cvtepi32_ps(acc), mult);
    real = _mm512_mask_mov_ps(real, _mm512_cmp_ps_mask(real, real, _CMP_UNORD_Q), _mm512_setzero_ps());  // NaN -> zp
    __m512 rounded = _mm512_roundscale_ps(real, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    rounded = _mm512_min_ps(_mm512_max_ps(rounded, real_lo), real_hi);
    __m512i q = _mm512_add_epi32(_mm512_cvttps_epi32(rounded), zp);
    q = _mm512_min_epi32(_mm512_max_epi32(q, q_lo), q_hi);
    _mm_mask_storeu_epi8(y + oy * out_w + col, lanes, _mm512_cvtepi32_epi8(q));  // low byte: int8 and uint8
  });
}

SPARQ_CPU_TARGET_END

}  // namespace cpu
}  // namespace sparq

#endif  // SPARQ_CPU_X86
