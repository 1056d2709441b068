// AVX-512 rows of the per-tensor quantization glue (qdq_glue.cc): QuantizeLinear,
// DequantizeLinear, sparq.QLinearAdd and sparq.QLinearMul, 16 values per step,
// bit for bit QuantizeValue / DequantizeValue of kernels/ref/quantize.h, as the
// AVX2 rows (qdq_glue_avx2.cc, which says how): a true division, rounding to
// nearest even by the instruction's immediate, NaN to the zero point,
// saturation by clamping before the zero point is added. Compiled with
// -ffp-contract=off (CMakeLists.txt): a product then a sum, each rounded, as
// the float graph computes them.
#include <cstdint>

#include "kernels/cpu/cpu_target.h"
#include "kernels/cpu/internal.h"
#include "kernels/ref/quantize.h"

#if SPARQ_CPU_X86
#include <immintrin.h>

namespace sparq {
namespace cpu {

SPARQ_CPU_TARGET_BEGIN(SPARQ_CPU_AVX512_FEATURES)

namespace {

struct QuantOut16 {
  __m512 scale, lo, hi;  // clamp bounds relative to the zero point
  __m512i zp;
};

QuantOut16 MakeQuantOut16(float scale, int32_t zero_point, bool is_signed) {
  const int32_t lo = is_signed ? -128 : 0, hi = is_signed ? 127 : 255;
  return {_mm512_set1_ps(scale), _mm512_set1_ps(static_cast<float>(lo - zero_point)),
          _mm512_set1_ps(static_cast<float>(hi - zero_point)), _mm512_set1_epi32(zero_point)};
}

// QuantizeValue of 16 floats, stored as 16 bytes (every value already in the output type's range).
inline void Quantize16(__m512 v, const QuantOut16& o, uint8_t* out) {
  __m512 r = _mm512_roundscale_ps(_mm512_div_ps(v, o.scale), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  r = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(r, r, _CMP_ORD_Q), r);  // NaN -> 0, i.e. the zero point
  r = _mm512_min_ps(_mm512_max_ps(r, o.lo), o.hi);
  const __m512i q = _mm512_add_epi32(_mm512_cvttps_epi32(r), o.zp);
  _mm_storeu_si128(reinterpret_cast<__m128i*>(out), _mm512_cvtepi32_epi8(q));  // truncation: exact in range
}

// DequantizeValue of 16 bytes: float(q - zero_point) * scale.
inline __m512 Dequantize16(const uint8_t* in, bool is_signed, __m512i zp, __m512 scale) {
  const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in));
  const __m512i q = is_signed ? _mm512_cvtepi8_epi32(bytes) : _mm512_cvtepu8_epi32(bytes);
  return _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(q, zp)), scale);
}

template <bool kMul>
void QLinearBinaryRowAvx512(int64_t n, const void* a, float a_scale, int32_t a_zp, const void* b, float b_scale,
                            int32_t b_zp, float y_scale, int32_t y_zp, bool is_signed, void* y) {
  const auto* pa = static_cast<const uint8_t*>(a);
  const auto* pb = static_cast<const uint8_t*>(b);
  auto* out = static_cast<uint8_t*>(y);
  const __m512i za = _mm512_set1_epi32(a_zp), zb = _mm512_set1_epi32(b_zp);
  const __m512 sa = _mm512_set1_ps(a_scale), sb = _mm512_set1_ps(b_scale);
  const QuantOut16 o = MakeQuantOut16(y_scale, y_zp, is_signed);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512 x = Dequantize16(pa + i, is_signed, za, sa), z = Dequantize16(pb + i, is_signed, zb, sb);
    Quantize16(kMul ? _mm512_mul_ps(x, z) : _mm512_add_ps(x, z), o, out + i);
  }
  // The tail (fewer than 16) on the AVX2 row: the same bits.
  if (kMul) QLinearMulRowAvx2(n - i, pa + i, a_scale, a_zp, pb + i, b_scale, b_zp, y_scale, y_zp, is_signed, out + i);
  else QLinearAddRowAvx2(n - i, pa + i, a_scale, a_zp, pb + i, b_scale, b_zp, y_scale, y_zp, is_signed, out + i);
}

}  // namespace

void QuantizeRowAvx512(int64_t n, const float* x, float scale, int32_t zero_point, bool out_signed, void* y) {
  const QuantOut16 o = MakeQuantOut16(scale, zero_point, out_signed);
  auto* out = static_cast<uint8_t*>(y);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) Quantize16(_mm512_loadu_ps(x + i), o, out + i);
  QuantizeRowAvx2(n - i, x + i, scale, zero_point, out_signed, out + i);
}

void QLinearAddRowAvx512(int64_t n, const void* a, float a_scale, int32_t a_zp, const void* b, float b_scale,
                         int32_t b_zp, float y_scale, int32_t y_zp, bool is_signed, void* y) {
  QLinearBinaryRowAvx512<false>(n, a, a_scale, a_zp, b, b_scale, b_zp, y_scale, y_zp, is_signed, y);
}

void QLinearMulRowAvx512(int64_t n, const void* a, float a_scale, int32_t a_zp, const void* b, float b_scale,
                         int32_t b_zp, float y_scale, int32_t y_zp, bool is_signed, void* y) {
  QLinearBinaryRowAvx512<true>(n, a, a_scale, a_zp, b, b_scale, b_zp, y_scale, y_zp, is_signed, y);
}

SPARQ_CPU_TARGET_END

}  // namespace cpu
}  // namespace sparq

#endif  // SPARQ_CPU_X86
