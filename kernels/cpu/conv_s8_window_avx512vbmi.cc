// conv_s8_nchw_avx512vbmi: the NCHW INT8 convolution of conv_s8 (kernel_args.h,
// ConvS8Args) without the unfolded matrix, for few output channels (at most
// 8) and undilated rows of stride 1 to 4; other convolutions run the VNNI row's tiles
// (conv_s8_avx512vnni.cc).
//
// With few channels the tiles' work is the unfolding and packing of K x P
// bytes (basic-pitch's 32 -> 1 channel 7x3 layer: 10 MB per image for 0.3
// MFLOP of output), which the FP32 direct rows never pay. Here each image is
// copied once, padded and flipped to u8 (x ^ 0x80 for int8 x; the padding is
// x's zero point, flipped the same way), and a tap row's four neighbouring
// taps kx .. kx + 3 of 16 neighbouring output columns are one vpermb of the
// padded row (stride s <= 4: the 16 columns' taps lie in 64 bytes):
//
//   padded row r (u8), from column s * ox0:  r[0] r[1] ... r[15 s + 3]
//   vpermb by the index s j + t:  (r[s j], r[s j + 1], r[s j + 2], r[s j + 3]) for j = 0..15
//   vpdpbusd with the channel's 4 weights of (c, ky, kx .. kx + 3), 0 past kw
//
// Sums start at the channel's offset, bias - (x_zero_point + 128 or 0) *
// col_sums (the driver's), and take every (c, ky, quad) in order: int32 sums
// that wrap mod 2^32, so the bytes are the spec's whatever the order. Tiles
// are 32 output columns of one output row; threads split the rows.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "kernels/cpu/cpu_target.h"
#include "kernels/cpu/internal.h"

#if SPARQ_CPU_X86
#include <immintrin.h>

namespace sparq {
namespace cpu {

SPARQ_CPU_TARGET_BEGIN(SPARQ_CPU_AVX512VBMI_FEATURES)
#if defined(__GNUC__) && !defined(__clang__)
// GCC bug 105593 again (cpu_target.h), reported here as -Wuninitialized.
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif

namespace {

constexpr int kWindowChannels = 8;  // channels per tile (at most, and the most this row takes)
constexpr int64_t kSlack = 256;     // readable bytes past a padded image (loads of 64 past a row's end)
constexpr int64_t kPadTaskBytes = int64_t{1} << 14;  // padded-image bytes per task, at least

inline int32_t LoadS32(const void* p) {
  int32_t v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

// RequantizeS32Ref of 16 sums of one channel (offset included), `count` bytes
// stored (the VNNI row's Requant, conv_s8_avx512vnni.cc).
inline void Store16(__m512i acc, float multiplier, int32_t zero_point, bool out_signed, bool finite, uint8_t* dst,
                    int count) {
  if (count <= 0) return;
  const int32_t lo = out_signed ? -128 : 0, hi = out_signed ? 127 : 255;
  __m512 real = _mm512_mul_ps(_mm512_cvtepi32_ps(acc), _mm512_set1_ps(multiplier));
  if (!finite) real = _mm512_mask_mov_ps(real, _mm512_cmp_ps_mask(real, real, _CMP_UNORD_Q), _mm512_setzero_ps());
  real = _mm512_min_ps(_mm512_max_ps(real, _mm512_set1_ps(static_cast<float>(lo - zero_point))),
                       _mm512_set1_ps(static_cast<float>(hi - zero_point)));
  const __m512i q = _mm512_add_epi32(_mm512_cvt_roundps_epi32(real, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC),
                                     _mm512_set1_epi32(zero_point));
  if (count >= 16) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst), _mm512_cvtepi32_epi8(q));
  } else {
    _mm_mask_storeu_epi8(dst, static_cast<__mmask16>((1u << count) - 1), _mm512_cvtepi32_epi8(q));
  }
}

struct Window {
  const uint8_t* x = nullptr;  // the padded image: [C][hp][wp] u8
  int64_t hp = 0, wp = 0;
  int64_t channels = 0, kernel_h = 0, quads = 0, stride_h = 1, stride_w = 1, dilation_h = 1;
  const uint8_t* w = nullptr;  // [C][kernel_h][quads][8 channels][4 bytes] of this tile's channels
  int channels_out = 0;        // 1..8: channels to store
  const int32_t* offset = nullptr;
  const float* multiplier = nullptr;
  bool finite = true;
  int32_t zero_point = 0;
  bool out_signed = false;
};

#define SPARQ_WIN_DOT(c)                                          \
  {                                                               \
    const __m512i wb = _mm512_set1_epi32(LoadS32(ws + 4 * (c)));  \
    a##c##0 = _mm512_dpbusd_epi32(a##c##0, v0, wb);               \
    a##c##1 = _mm512_dpbusd_epi32(a##c##1, v1, wb);               \
  }
#define SPARQ_WIN_INIT(c) a##c##0 = a##c##1 = _mm512_set1_epi32(win.offset[c]);
#define SPARQ_WIN_STORE(c)                                                                                   \
  if ((c) < win.channels_out) {                                                                              \
    Store16(a##c##0, win.multiplier[c], win.zero_point, win.out_signed, win.finite, y + (c) * ld_y, count);   \
    Store16(a##c##1, win.multiplier[c], win.zero_point, win.out_signed, win.finite, y + (c) * ld_y + 16,      \
            count - 16);                                                                                     \
  }

// Output columns [ox0, ox0 + count) (count <= 32) of output row oy, 8 channels
// (win.channels_out stored, channel c at y + c * ld_y).
void Tile8(const Window& win, __m512i quads, int64_t oy, int64_t ox0, int count, uint8_t* y, int64_t ld_y) {
  __m512i a00, a01, a10, a11, a20, a21, a30, a31, a40, a41, a50, a51, a60, a61, a70, a71;
  // clang-format off
  SPARQ_WIN_INIT(0) SPARQ_WIN_INIT(1) SPARQ_WIN_INIT(2) SPARQ_WIN_INIT(3)
  SPARQ_WIN_INIT(4) SPARQ_WIN_INIT(5) SPARQ_WIN_INIT(6) SPARQ_WIN_INIT(7)
  // clang-format on
  const uint8_t* ws = win.w;
  for (int64_t c = 0; c < win.channels; ++c) {
    for (int64_t ky = 0; ky < win.kernel_h; ++ky) {
      const uint8_t* row = win.x + (c * win.hp + oy * win.stride_h + ky * win.dilation_h) * win.wp + ox0 * win.stride_w;
      for (int64_t q = 0; q < win.quads; ++q, ws += 4 * kWindowChannels) {
        const __m512i v0 = _mm512_permutexvar_epi8(quads, _mm512_loadu_si512(row + 4 * q));
        const __m512i v1 = _mm512_permutexvar_epi8(quads, _mm512_loadu_si512(row + 4 * q + 16 * win.stride_w));
        // clang-format off
        SPARQ_WIN_DOT(0) SPARQ_WIN_DOT(1) SPARQ_WIN_DOT(2) SPARQ_WIN_DOT(3)
        SPARQ_WIN_DOT(4) SPARQ_WIN_DOT(5) SPARQ_WIN_DOT(6) SPARQ_WIN_DOT(7)
        // clang-format on
      }
    }
  }
  // clang-format off
  SPARQ_WIN_STORE(0) SPARQ_WIN_STORE(1) SPARQ_WIN_STORE(2) SPARQ_WIN_STORE(3)
  SPARQ_WIN_STORE(4) SPARQ_WIN_STORE(5) SPARQ_WIN_STORE(6) SPARQ_WIN_STORE(7)
  // clang-format on
}

// Tile8 for one channel (a00, a01 only; the weights' other 7 lanes unread).
void Tile1(const Window& win, __m512i quads, int64_t oy, int64_t ox0, int count, uint8_t* y, int64_t ld_y) {
  __m512i a00, a01;
  SPARQ_WIN_INIT(0)
  const uint8_t* ws = win.w;
  for (int64_t c = 0; c < win.channels; ++c) {
    for (int64_t ky = 0; ky < win.kernel_h; ++ky) {
      const uint8_t* row = win.x + (c * win.hp + oy * win.stride_h + ky * win.dilation_h) * win.wp + ox0 * win.stride_w;
      for (int64_t q = 0; q < win.quads; ++q, ws += 4 * kWindowChannels) {
        const __m512i v0 = _mm512_permutexvar_epi8(quads, _mm512_loadu_si512(row + 4 * q));
        const __m512i v1 = _mm512_permutexvar_epi8(quads, _mm512_loadu_si512(row + 4 * q + 16 * win.stride_w));
        SPARQ_WIN_DOT(0)
      }
    }
  }
  SPARQ_WIN_STORE(0)
}

#undef SPARQ_WIN_DOT
#undef SPARQ_WIN_INIT
#undef SPARQ_WIN_STORE

// Rows [r0, r1) of the padded image xp ([C][hp][wp]): row r is channel
// r / hp, input row r % hp - pad_top; padded column j reads input column
// j - pad_left; x ^ flip inside the image, `pad` outside.
void PadRows(const ConvGeometry& g, const uint8_t* xi, int64_t hp, int64_t wp, uint8_t flip, uint8_t pad, int64_t r0,
             int64_t r1, uint8_t* xp) {
  const __m512i f = _mm512_set1_epi8(static_cast<char>(flip));
  for (int64_t r = r0; r < r1; ++r) {
    uint8_t* dst = xp + r * wp;
    const int64_t c = r / hp, iy = r % hp - g.pad_top;
    if (iy < 0 || iy >= g.height) {
      std::memset(dst, pad, static_cast<size_t>(wp));
      continue;
    }
    const int64_t j0 = std::min(wp, g.pad_left), j1 = std::max(j0, std::min(wp, g.pad_left + g.width));
    std::memset(dst, pad, static_cast<size_t>(j0));
    const uint8_t* src = xi + (c * g.height + iy) * g.width + (j0 - g.pad_left);
    int64_t j = j0;
    for (; j + 64 <= j1; j += 64)
      _mm512_storeu_si512(dst + j, _mm512_xor_si512(_mm512_loadu_si512(src + (j - j0)), f));
    if (j < j1) {
      const __mmask64 mask = (__mmask64{1} << (j1 - j)) - 1;  // j1 - j < 64
      _mm512_mask_storeu_epi8(dst + j, mask, _mm512_xor_si512(_mm512_maskz_loadu_epi8(mask, src + (j - j0)), f));
    }
    std::memset(dst + j1, pad, static_cast<size_t>(wp - j1));
  }
}

// Output row oy of every channel: tiles of 32 columns, then the table.
void WindowRow(const ConvS8Args& args, const Window& win, const uint8_t* index, int64_t oy, uint8_t* yi) {
  const ConvGeometry& g = args.conv;
  const int64_t p = g.out_size();
  const __m512i quads = _mm512_load_si512(index);
  for (int64_t ox0 = 0; ox0 < g.out_w; ox0 += 32) {
    const int count = static_cast<int>(std::min<int64_t>(32, g.out_w - ox0));
    if (win.channels_out == 1) {
      Tile1(win, quads, oy, ox0, count, yi + oy * g.out_w + ox0, p);
    } else {
      Tile8(win, quads, oy, ox0, count, yi + oy * g.out_w + ox0, p);
    }
  }
  if (args.table != nullptr) {
    for (int64_t o = 0; o < win.channels_out; ++o) {
      uint8_t* row = yi + o * p + oy * g.out_w;
      args.apply_table(args.table, args.table_flip, row, row, g.out_w);
    }
  }
}

bool WindowFits(const ConvS8Args& args) {
  const ConvGeometry& g = args.conv;
  // Requantized bytes only: raw sums (y_s32 / y_f32 / y_q) go to the VNNI driver.
  return args.w != nullptr && args.y_s32 == nullptr && args.y_f32 == nullptr && args.y_q == nullptr &&
         args.w->format == PackedFormat::kPanel16x4S8 && !args.w->has_zero_points &&
         args.w->n >= 1 && args.w->n <= kWindowChannels && g.stride_w >= 1 && g.stride_w <= 4 && g.dilation_w == 1 && g.out_w >= 1 &&
         g.out_h >= 1 && g.channels >= 1 && g.kernel_w >= 1;
}

}  // namespace

void ConvS8Avx512Vbmi(const ConvS8Args& args) {
  if (!WindowFits(args)) return ConvS8Avx512Vnni(args);
  const PackedGemmS8& w = *args.w;
  const ConvGeometry& g = args.conv;
  const int64_t m = w.n, kw = g.kernel_w, quads = (kw + 3) / 4, p = g.out_size();
  const int64_t pad_bottom = std::max<int64_t>(0, (g.out_h - 1) * g.stride_h + (g.kernel_h - 1) * g.dilation_h + 1 -
                                                      g.height - g.pad_top);
  const int64_t hp = g.pad_top + g.height + pad_bottom, wp = (g.out_w - 1) * g.stride_w + kw;
  const uint8_t flip = args.x_signed ? 0x80 : 0;
  const int32_t za_u = args.x_zero_point + (args.x_signed ? 128 : 0);
  const uint8_t pad = static_cast<uint8_t>(za_u);

  // Weights [C][kh][quads][8][4] and offsets, per call (a few KiB).
  thread_local std::vector<uint8_t> w_buffer;
  const int64_t w_bytes = g.channels * g.kernel_h * quads * kWindowChannels * 4;
  if (static_cast<int64_t>(w_buffer.size()) < w_bytes) w_buffer.resize(static_cast<size_t>(w_bytes));
  uint8_t* const wq = w_buffer.data();
  std::memset(wq, 0, static_cast<size_t>(w_bytes));
  const auto* panel = reinterpret_cast<const uint8_t*>(w.data_s8.data());  // one panel: n <= 16
  for (int64_t o = 0; o < m; ++o)
    for (int64_t c = 0; c < g.channels; ++c)
      for (int64_t ky = 0; ky < g.kernel_h; ++ky)
        for (int64_t kx = 0; kx < kw; ++kx) {
          const int64_t k = (c * g.kernel_h + ky) * kw + kx;
          wq[(((c * g.kernel_h + ky) * quads + kx / 4) * kWindowChannels + o) * 4 + kx % 4] =
              panel[(k / 4) * 64 + o * 4 + k % 4];
        }
  int32_t offset[kWindowChannels] = {};
  bool finite = true;
  for (int64_t o = 0; o < m; ++o) {  // mod 2^32, as the sums are
    uint32_t v = args.bias != nullptr ? static_cast<uint32_t>(args.bias[o]) : 0u;
    v -= static_cast<uint32_t>(za_u) * static_cast<uint32_t>(w.col_sums[o]);
    offset[o] = static_cast<int32_t>(v);
    finite = finite && std::isfinite(args.multiplier[o]);
  }

  // Output position i of a 16-column block, tap t of a quad: byte s i + t of the row.
  alignas(64) uint8_t index[64];
  for (int i = 0; i < 64; ++i) index[i] = static_cast<uint8_t>(i / 4 * g.stride_w + i % 4);

  thread_local std::vector<uint8_t> padded_buffer;
  const int64_t padded_bytes = g.channels * hp * wp + kSlack;
  if (static_cast<int64_t>(padded_buffer.size()) < padded_bytes) padded_buffer.resize(static_cast<size_t>(padded_bytes));
  uint8_t* const xp = padded_buffer.data();
  const int64_t image_in = g.channels * g.height * g.width;
  for (int64_t img = 0; img < args.batch; ++img) {
    const uint8_t* xi = static_cast<const uint8_t*>(args.x) + img * image_in;
    uint8_t* yi = static_cast<uint8_t*>(args.y) + img * m * p;
    // The padded, flipped image (rows split among the threads, tasks of at
    // least kPadTaskBytes: Silero VAD's decoder conv pads 128 rows of one
    // byte, and waking the pool for them cost ~230 us a call on a loaded
    // 2-core machine, small22).
    ParallelFor(args.pool, g.channels * hp, std::max<int64_t>(16, kPadTaskBytes / std::max<int64_t>(1, wp)),
                [&](int64_t r0, int64_t r1) { PadRows(g, xi, hp, wp, flip, pad, r0, r1, xp); });
    std::memset(xp + g.channels * hp * wp, pad, static_cast<size_t>(kSlack));
    Window win;
    win.x = xp, win.hp = hp, win.wp = wp;
    win.channels = g.channels, win.kernel_h = g.kernel_h, win.quads = quads;
    win.stride_h = g.stride_h, win.stride_w = g.stride_w, win.dilation_h = g.dilation_h;
    win.w = wq, win.channels_out = static_cast<int>(m);
    win.offset = offset, win.multiplier = args.multiplier, win.finite = finite;
    win.zero_point = args.y_zero_point, win.out_signed = args.y_signed;
    // Output rows split among the threads; every byte from one task.
    ParallelFor(args.pool, g.out_h, 1, [&](int64_t oy0, int64_t oy1) {
      for (int64_t oy = oy0; oy < oy1; ++oy) WindowRow(args, win, index, oy, yi);
    });
  }
}

SPARQ_CPU_TARGET_END

}  // namespace cpu
}  // namespace sparq

#endif  // SPARQ_CPU_X86
