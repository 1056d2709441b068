// AVX2 rows of the per-tensor quantization glue (qdq_glue.cc): QuantizeLinear,
// DequantizeLinear, sparq.QLinearAdd and sparq.QLinearMul, 8 values per step, bit for bit
// QuantizeValue / DequantizeValue of kernels/ref/quantize.h:
//   - the quotient is a true division (vdivps), as the reference divides;
//   - rounding is to nearest, ties to even, from the instruction's immediate
//     (vroundps), so MXCSR's rounding mode is not used;
//   - NaN quotients give the zero point; infinities saturate.
// The region is compiled for "avx2" WITHOUT "fma": QLinearAdd's
// (a - a_zp) * a_scale + b_f must stay a rounded product then a rounded sum,
// as the float graph computes it; with FMA enabled the compiler could contract
// the two into one fused multiply-add, which rounds once and differs.
#include <cstdint>

#include "kernels/cpu/cpu_target.h"
#include "kernels/cpu/internal.h"
#include "kernels/ref/quantize.h"

#if SPARQ_CPU_X86
#include <immintrin.h>

namespace sparq {
namespace cpu {

SPARQ_CPU_TARGET_BEGIN("avx2")

namespace {

// Quantization constants of one output: divisor, clamp bounds relative to
// the zero point (QuantizeValue clamps before adding it), zero point.
struct QuantOut {
  __m256 scale, lo, hi;
  __m256i zp;
  bool is_signed;
};

QuantOut MakeQuantOut(float scale, int32_t zero_point, bool is_signed) {
  const int32_t lo = is_signed ? -128 : 0, hi = is_signed ? 127 : 255;
  return {_mm256_set1_ps(scale), _mm256_set1_ps(static_cast<float>(lo - zero_point)),
          _mm256_set1_ps(static_cast<float>(hi - zero_point)), _mm256_set1_epi32(zero_point), is_signed};
}

// QuantizeValue of 8 floats, stored as 8 bytes.
inline void Quantize8(__m256 v, const QuantOut& o, uint8_t* out) {
  __m256 r = _mm256_round_ps(_mm256_div_ps(v, o.scale), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  r = _mm256_and_ps(r, _mm256_cmp_ps(r, r, _CMP_ORD_Q));  // NaN -> 0, i.e. the zero point
  r = _mm256_min_ps(_mm256_max_ps(r, o.lo), o.hi);
  const __m256i q = _mm256_add_epi32(_mm256_cvttps_epi32(r), o.zp);  // in the output type's range
  const __m128i q16 = _mm_packs_epi32(_mm256_castsi256_si128(q), _mm256_extracti128_si256(q, 1));  // exact
  const __m128i q8 = o.is_signed ? _mm_packs_epi16(q16, q16) : _mm_packus_epi16(q16, q16);           // exact
  _mm_storel_epi64(reinterpret_cast<__m128i*>(out), q8);
}

// DequantizeValue of 8 bytes: float(q - zero_point) * scale.
inline __m256 Dequantize8(const uint8_t* in, bool is_signed, __m256i zp, __m256 scale) {
  const __m128i bytes = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(in));
  const __m256i q = is_signed ? _mm256_cvtepi8_epi32(bytes) : _mm256_cvtepu8_epi32(bytes);
  return _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(q, zp)), scale);
}

template <typename T>
void QuantizeTail(int64_t n, const float* x, float scale, int32_t zero_point, void* y) {
  for (int64_t i = 0; i < n; ++i) static_cast<T*>(y)[i] = QuantizeValue<T>(x[i], scale, zero_point);
}

template <bool kMul, typename T>
void BinaryTail(int64_t n, const T* a, float a_scale, int32_t a_zp, const T* b, float b_scale, int32_t b_zp,
                float y_scale, int32_t y_zp, T* y) {
  for (int64_t i = 0; i < n; ++i) {
    const float x = DequantizeValue(a[i], a_scale, a_zp), z = DequantizeValue(b[i], b_scale, b_zp);
    y[i] = QuantizeValue<T>(kMul ? x * z : x + z, y_scale, y_zp);
  }
}

}  // namespace

void QuantizeRowAvx2(int64_t n, const float* x, float scale, int32_t zero_point, bool out_signed, void* y) {
  const QuantOut o = MakeQuantOut(scale, zero_point, out_signed);
  auto* out = static_cast<uint8_t*>(y);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) Quantize8(_mm256_loadu_ps(x + i), o, out + i);
  if (out_signed) QuantizeTail<int8_t>(n - i, x + i, scale, zero_point, out + i);
  else QuantizeTail<uint8_t>(n - i, x + i, scale, zero_point, out + i);
}

void DequantizeRowAvx2(int64_t n, const void* x, bool x_signed, float scale, int32_t zero_point, float* y) {
  const auto* in = static_cast<const uint8_t*>(x);
  const __m256i zp = _mm256_set1_epi32(zero_point);
  const __m256 s = _mm256_set1_ps(scale);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, Dequantize8(in + i, x_signed, zp, s));
  for (; i < n; ++i) {
    const int32_t q = x_signed ? static_cast<int8_t>(in[i]) : in[i];
    y[i] = DequantizeValue(q, scale, zero_point);
  }
}

namespace {
template <bool kMul>
void QLinearBinaryRowAvx2(int64_t n, const void* a, float a_scale, int32_t a_zp, const void* b, float b_scale,
                          int32_t b_zp, float y_scale, int32_t y_zp, bool is_signed, void* y) {
  const auto* pa = static_cast<const uint8_t*>(a);
  const auto* pb = static_cast<const uint8_t*>(b);
  auto* out = static_cast<uint8_t*>(y);
  const __m256i za = _mm256_set1_epi32(a_zp), zb = _mm256_set1_epi32(b_zp);
  const __m256 sa = _mm256_set1_ps(a_scale), sb = _mm256_set1_ps(b_scale);
  const QuantOut o = MakeQuantOut(y_scale, y_zp, is_signed);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 x = Dequantize8(pa + i, is_signed, za, sa), z = Dequantize8(pb + i, is_signed, zb, sb);
    Quantize8(kMul ? _mm256_mul_ps(x, z) : _mm256_add_ps(x, z), o, out + i);
  }
  if (is_signed) {
    BinaryTail<kMul>(n - i, reinterpret_cast<const int8_t*>(pa + i), a_scale, a_zp,
                     reinterpret_cast<const int8_t*>(pb + i), b_scale, b_zp, y_scale, y_zp,
                     reinterpret_cast<int8_t*>(out + i));
  } else {
    BinaryTail<kMul>(n - i, pa + i, a_scale, a_zp, pb + i, b_scale, b_zp, y_scale, y_zp, out + i);
  }
}
}  // namespace

void QLinearAddRowAvx2(int64_t n, const void* a, float a_scale, int32_t a_zp, const void* b, float b_scale,
                       int32_t b_zp, float y_scale, int32_t y_zp, bool is_signed, void* y) {
  QLinearBinaryRowAvx2<false>(n, a, a_scale, a_zp, b, b_scale, b_zp, y_scale, y_zp, is_signed, y);
}

void QLinearMulRowAvx2(int64_t n, const void* a, float a_scale, int32_t a_zp, const void* b, float b_scale,
                       int32_t b_zp, float y_scale, int32_t y_zp, bool is_signed, void* y) {
  QLinearBinaryRowAvx2<true>(n, a, a_scale, a_zp, b, b_scale, b_zp, y_scale, y_zp, is_signed, y);
}

SPARQ_CPU_TARGET_END

}  // namespace cpu
}  // namespace sparq

#endif  // SPARQ_CPU_X86
