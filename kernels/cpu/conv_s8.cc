// INT8 convolution in NCHW (conv_s8): the ISA-independent driver and the
// portable tile. Per image:
//
//   x [C, H, W] ──unfold──> col [K, P]        rows (c, ky, kx), columns (oy, ox); a 1x1
//                                             stride-1 convolution without padding reads x itself
//        ──pack──> blocks of 16 positions     (internal.h: ConvS8Tile; u8 quads or s16 pairs);
//                                             a row's ConvS8UnfoldPackFn (the VNNI row) packs
//                                             stride-1 taps over rows of the input's width
//                                             straight from x, with no col in between
//        ──tiles──> y [M, P] bytes            8 channels x 32 positions per tile, the
//                                             requantization in registers, then the table;
//                                             a last block of at most 4 positions (7x7
//                                             planes: 49 = 3 x 16 + 1; a plane of 1-4) by
//                                             columns where the row has them (ConvS8ColumnFn)
//
// The output is the NCHW image itself: no transposition and no int32
// round trip through memory. With ConvS8Args::y_s32 / y_f32 (ConvInteger,
// sparq.ConvIntegerToFloat) the VNNI tile writes the int32 or float values
// from its registers (raw_tile); other tiles leave every slice raw in their
// partial sums and the driver adds the offsets and writes int32 or float
// (bench/RESULTS.md, conv22: those loops cost YOLOv8n's layers 2/3 of the
// tiles' own time). With y_q the floats go to a scratch per call, then
// QuantizeLinear's row writes bytes. Threads split a batch's images when it
// divides evenly among them, else the positions (one part per thread, each
// unfolding and packing its own: the col of a large plane never goes to
// memory whole) or, for few positions, the channels (one part per thread,
// each packing the image itself); every output byte comes from
// one task with the whole K summed in a fixed order, so every thread count
// gives the same bytes.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/cpu/internal.h"
#include "kernels/ref/quantize.h"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace sparq {
namespace cpu {

namespace {

constexpr int kBlock = 16;         // positions per block (one zmm of u8 quads)
constexpr int kStepBytes = 64;     // bytes per block and step
constexpr int kTileChannels = 8;   // channels per tile
constexpr int kTileBlocks = 2;     // blocks per tile
constexpr int64_t kTaskPositionTiles = 8;  // at most 256 positions per piece (when they split the work)
// Few positions: MACs (M x K x P) per channel part at least, so that a part
// pays for packing the image again and for a thread's wake-up (about 5 us).
constexpr int64_t kMinPartMacs = int64_t{1} << 20;
// Unfolds of at most this many bytes (K x P) run on the calling thread alone;
// larger ones are split into tasks of about this many bytes or 4 rows.
constexpr int64_t kInlineUnfoldBytes = int64_t{1} << 14;
// K per slice: up to kSliceSteps steps (a tile's two blocks: 16 KiB, in L1); a
// K of at most kMaxOneSliceSteps steps runs as one slice.
constexpr int64_t kSliceSteps = 128;
constexpr int64_t kMaxOneSliceSteps = 192;

// The offsets the tiles see when the driver finishes their raw sums.
constexpr int32_t kZeroOffsets[16] = {};

// Work buffers, kept by the calling thread from run to run (fresh ones come
// from mmap and cost a page fault per 4 KiB on every run).
template <typename T>
T* Reserve(std::vector<T>& v, int64_t size) {
  if (v.size() < static_cast<size_t>(size)) v.resize(static_cast<size_t>(size));
  return v.data();
}

// n bytes of `v` at dst, and n bytes from src to dst (not overlapping), for
// the few dozen to few hundred bytes of an unfolded row: 16-byte stores, the
// last one overlapping, instead of a libc call each (memset / memmove's
// `rep` start-up cost YOLOv8n's unfolding about a third of its time, conv22).
inline void FillBytes(uint8_t* dst, uint8_t v, int64_t n) {
#if defined(__SSE2__)
  if (n >= 16) {
    const __m128i fill = _mm_set1_epi8(static_cast<char>(v));
    for (int64_t i = 0; i + 16 < n; i += 16) _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i), fill);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + n - 16), fill);
    return;
  }
#endif
  // Below 16: two overlapping stores (a plain loop would become a memset call).
  if (n >= 8) {
    const uint64_t pattern = 0x0101010101010101ull * v;
    std::memcpy(dst, &pattern, 8);
    std::memcpy(dst + n - 8, &pattern, 8);
  } else if (n >= 4) {
    const uint32_t pattern = 0x01010101u * v;
    std::memcpy(dst, &pattern, 4);
    std::memcpy(dst + n - 4, &pattern, 4);
  } else if (n > 0) {
    dst[0] = v, dst[n / 2] = v, dst[n - 1] = v;
  }
}
inline void CopyBytes(uint8_t* dst, const uint8_t* src, int64_t n) {
#if defined(__SSE2__)
  if (n >= 16) {
    for (int64_t i = 0; i + 16 < n; i += 16)
      _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i), _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i)));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + n - 16),
                     _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + n - 16)));
    return;
  }
#endif
  if (n >= 8) {
    uint64_t a, b;
    std::memcpy(&a, src, 8);
    std::memcpy(&b, src + n - 8, 8);
    std::memcpy(dst, &a, 8);
    std::memcpy(dst + n - 8, &b, 8);
  } else if (n >= 4) {
    uint32_t a, b;
    std::memcpy(&a, src, 4);
    std::memcpy(&b, src + n - 4, 4);
    std::memcpy(dst, &a, 4);
    std::memcpy(dst + n - 4, &b, 4);
  } else if (n > 0) {
    const uint8_t first = src[0], middle = src[n / 2], last = src[n - 1];
    dst[0] = first, dst[n / 2] = middle, dst[n - 1] = last;
  }
}

// Positions [p0, p1) of a row of col whose output column (position % w) is
// below `left` or at least w - right get `pad` (row[q - p0] holds position q):
// the columns a "same" tap's shifted copy read from a neighbouring image row.
// Called over whole pieces: positions of rows outside the image already hold
// pad, so writing it there again changes nothing. One column a side (a 3x3
// tap): one store per output row, not a range computation per row.
inline void PadEdgeColumns(uint8_t* row, uint8_t pad, int64_t w, int64_t left, int64_t right, int64_t p0, int64_t p1) {
  if (left <= 1 && right <= 1) {
    if (left == 1)
      for (int64_t q = (p0 + w - 1) / w * w; q < p1; q += w) row[q - p0] = pad;
    if (right == 1)
      for (int64_t q = (p0 + w) / w * w - 1; q < p1; q += w) row[q - p0] = pad;
    return;
  }
  for (int64_t first = p0 / w * w; first < p1; first += w) {
    const int64_t l0 = std::max(p0, first), l1 = std::min(p1, first + left);
    const int64_t r0 = std::max(p0, first + w - right), r1 = std::min(p1, first + w);
    FillBytes(row + (l0 - p0), pad, l1 - l0);
    FillBytes(row + (r0 - p0), pad, r1 - r0);
  }
}

// The output columns whose tap at column offset dx (input = ox * stride + dx)
// lies inside the image row: [InsideBegin, InsideEnd).
int64_t InsideBegin(const ConvGeometry& g, int64_t dx) {
  return std::min(g.out_w, dx >= 0 ? 0 : (-dx + g.stride_w - 1) / g.stride_w);
}
int64_t InsideEnd(const ConvGeometry& g, int64_t dx, int64_t inside_begin) {
  return std::max(inside_begin, std::min(g.out_w, g.width - dx <= 0 ? 0 : (g.width - dx - 1) / g.stride_w + 1));
}

// Output columns [a, b) of one tap's output row into dst[0, b - a): input
// row iy of the plane, columns ox * stride_w + dx, `pad` outside the image
// ([ox_begin, ox_end): the columns inside it). Runs of 16 bytes or more with
// padding of at most 16 on either side store the padding as one vector each
// before the copy writes the inside over it (no memset calls for the few
// bytes of a window's edge).
void UnfoldRun(const ConvGeometry& g, const uint8_t* src_plane, uint8_t pad, int64_t iy, int64_t dx, int64_t a,
               int64_t b, int64_t ox_begin, int64_t ox_end, uint8_t* dst) {
  const int64_t n = b - a;
  if (iy < 0 || iy >= g.height) {
    FillBytes(dst, pad, n);
    return;
  }
  const int64_t in0 = std::clamp(ox_begin, a, b), in1 = std::clamp(ox_end, in0, b);
#if defined(__SSE2__)
  if (n >= 16 && in0 - a <= 16 && b - in1 <= 16) {
    const __m128i fill = _mm_set1_epi8(static_cast<char>(pad));
    if (in0 > a) _mm_storeu_si128(reinterpret_cast<__m128i*>(dst), fill);
    if (b > in1) _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + n - 16), fill);
  } else
#endif
  {
    FillBytes(dst, pad, in0 - a);
    FillBytes(dst + (in1 - a), pad, b - in1);
  }
  dst += in0 - a;
  const uint8_t* src = src_plane + iy * g.width + dx;
  const int64_t stride = g.stride_w;
  int64_t ox = in0;
  if (stride == 1) {
    const int64_t m = in1 - in0;
#if defined(__SSE2__)
    if (m >= 16) {  // 16-byte copies, the last one overlapping: no call for a row's few dozen bytes
      const uint8_t* from = src + in0;
      for (int64_t i = 0; i + 16 < m; i += 16)
        _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i),
                         _mm_loadu_si128(reinterpret_cast<const __m128i*>(from + i)));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + m - 16),
                       _mm_loadu_si128(reinterpret_cast<const __m128i*>(from + m - 16)));
      return;
    }
#endif
    CopyBytes(dst, src + in0, m);
    return;
  }
#if defined(__SSE2__)
  if (stride == 2) {  // 16 outputs from 32 bytes: the even bytes, while the load stays in the row
    const __m128i even = _mm_set1_epi16(0x00FF);
    for (; ox + 16 <= in1 && dx + 2 * ox + 32 <= g.width; ox += 16, dst += 16) {
      const __m128i lo = _mm_and_si128(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + 2 * ox)), even);
      const __m128i hi = _mm_and_si128(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + 2 * ox + 16)), even);
      _mm_storeu_si128(reinterpret_cast<__m128i*>(dst), _mm_packus_epi16(lo, hi));
    }
  }
#endif
  for (; ox < in1; ++ox) *dst++ = src[ox * stride];
}

// Rows [r0, r1) of col [K, P] (row r = (ch, ky, kx)) from the image xi; taps
// outside the image hold `pad` (x's zero point).
//
// A stride-1 convolution whose output has the input's size ("same" padding)
// reads, for each row, the channel's plane shifted by the tap's offset: one
// copy of the plane, then the rows and columns that fell outside set to
// `pad`. Other geometries copy each output row's run.
// Unfold for few positions (kGatherPositions or fewer; Silero VAD's 1-D
// convolutions have 1 to 4): one table of plane offsets per tap, built once
// per call, then each row gathered through its tap's table. A row of a few
// bytes cost three divisions for its tap and a memset / memcpy call or two
// in the general path: ~14% of Silero's INT8 run (bench/RESULTS.md, small22).
constexpr int64_t kGatherPositions = 16;

void UnfoldGather(const ConvGeometry& g, const uint8_t* xi, uint8_t pad, int64_t r0, int64_t r1, uint8_t* col) {
  const int64_t p = g.out_size(), taps = g.kernel_h * g.kernel_w, plane = g.height * g.width;
  thread_local std::vector<int64_t> table_buffer;  // [taps, p]: the input's offset in its plane, or -1 (padding)
  int64_t* const table = Reserve(table_buffer, taps * p);
  for (int64_t ky = 0; ky < g.kernel_h; ++ky) {
    for (int64_t kx = 0; kx < g.kernel_w; ++kx) {
      const int64_t dy = ky * g.dilation_h - g.pad_top, dx = kx * g.dilation_w - g.pad_left;
      int64_t* t = table + (ky * g.kernel_w + kx) * p;
      for (int64_t oy = 0; oy < g.out_h; ++oy) {
        const int64_t iy = oy * g.stride_h + dy;
        for (int64_t ox = 0; ox < g.out_w; ++ox) {
          const int64_t ix = ox * g.stride_w + dx;
          *t++ = iy >= 0 && iy < g.height && ix >= 0 && ix < g.width ? iy * g.width + ix : -1;
        }
      }
    }
  }
  int64_t ch = r0 / taps, tap = r0 % taps;
  for (int64_t r = r0; r < r1; ++r) {
    const uint8_t* src_plane = xi + ch * plane;
    const int64_t* t = table + tap * p;
    uint8_t* row = col + r * p;
    for (int64_t i = 0; i < p; ++i) row[i] = t[i] >= 0 ? src_plane[t[i]] : pad;
    if (++tap == taps) tap = 0, ++ch;
  }
}

void Unfold(const ConvGeometry& g, const uint8_t* xi, uint8_t pad, int64_t r0, int64_t r1, uint8_t* col) {
  const int64_t p = g.out_size(), taps = g.kernel_h * g.kernel_w, plane = g.height * g.width;
  if (p <= kGatherPositions) {
    UnfoldGather(g, xi, pad, r0, r1, col);
    return;
  }
  const bool same = g.stride_h == 1 && g.stride_w == 1 && g.out_h == g.height && g.out_w == g.width;
  for (int64_t r = r0; r < r1; ++r) {
    const int64_t ch = r / taps, ky = r % taps / g.kernel_w, kx = r % g.kernel_w;
    uint8_t* row = col + r * p;
    const uint8_t* src_plane = xi + ch * plane;
    const int64_t dy = ky * g.dilation_h - g.pad_top, dx = kx * g.dilation_w - g.pad_left;  // input = output + (dy, dx)
    if (same) {
      // Output rows [oy0, oy1) read input rows oy + dy inside the image.
      const int64_t oy0 = std::min(g.out_h, std::max<int64_t>(0, -dy));
      const int64_t oy1 = std::max(oy0, std::min(g.out_h, g.height - dy));
      FillBytes(row, pad, oy0 * g.out_w);
      FillBytes(row + oy1 * g.out_w, pad, (g.out_h - oy1) * g.out_w);
      if (oy1 > oy0) {
        // dst[i] = src_plane[i + shift] over the rows, clipped to the plane; the
        // columns that wrapped into a neighbouring row are padding below.
        const int64_t shift = dy * g.width + dx;
        const int64_t begin = std::max(oy0 * g.out_w, -shift), end = std::min(oy1 * g.out_w, plane - shift);
        if (end > begin) CopyBytes(row + begin, src_plane + begin + shift, end - begin);
        const int64_t left = std::min(g.out_w, std::max<int64_t>(0, -dx));              // columns ox < -dx
        const int64_t right = std::min(g.out_w, std::max<int64_t>(0, dx));               // columns ox >= w - dx
        PadEdgeColumns(row, pad, g.out_w, left, right, 0, p);
        // Clipped ends of the copy (only inside padding columns or rows).
        for (int64_t i = oy0 * g.out_w; i < begin; ++i) row[i] = pad;
        for (int64_t i = std::max(begin, end); i < oy1 * g.out_w; ++i) row[i] = pad;
      }
      continue;
    }
    const int64_t ox_begin = InsideBegin(g, dx), ox_end = InsideEnd(g, dx, ox_begin);
    for (int64_t oy = 0; oy < g.out_h; ++oy, row += g.out_w)
      UnfoldRun(g, src_plane, pad, oy * g.stride_h + dy, dx, 0, g.out_w, ox_begin, ox_end, row);
  }
}

// Columns [p0, p1) of col [K, P] (every row) into col_part [K, p1 - p0]:
// the positions of one task, unfolded where that task packs them (the
// whole col of a large plane, e.g. basic-pitch's 3 x 39 window over 172 x 264
// positions, is 42 MB that the packing then read back across K rows far apart).
// UnfoldPositions for out_w == 1: position p is output row p; tap (ky, kx)
// reads input rows p * stride_h + dy of column kx * dilation_w - pad_left,
// inside the image for p in [oy_a, oy_b): one copy per tap (a memcpy when the
// rows are neighbours), not one run per position.
void UnfoldOneColumn(const ConvGeometry& g, const uint8_t* xi, uint8_t pad, int64_t p0, int64_t p1,
                     uint8_t* col_part) {
  const int64_t plane = g.height * g.width, ld = p1 - p0, sh = g.stride_h;
  uint8_t* row = col_part;
  for (int64_t ch = 0; ch < g.channels; ++ch) {
    for (int64_t ky = 0; ky < g.kernel_h; ++ky) {
      for (int64_t kx = 0; kx < g.kernel_w; ++kx, row += ld) {
        const int64_t dy = ky * g.dilation_h - g.pad_top, ix = kx * g.dilation_w - g.pad_left;
        if (ix < 0 || ix >= g.width) {
          std::memset(row, pad, static_cast<size_t>(ld));
          continue;
        }
        const int64_t first = dy >= 0 ? 0 : (-dy + sh - 1) / sh;           // oy * sh + dy >= 0
        const int64_t end = g.height - dy <= 0 ? 0 : (g.height - 1 - dy) / sh + 1;  // oy * sh + dy < height
        const int64_t oy_a = std::clamp(first, p0, p1), oy_b = std::clamp(end, oy_a, p1);
        std::memset(row, pad, static_cast<size_t>(oy_a - p0));
        std::memset(row + (oy_b - p0), pad, static_cast<size_t>(p1 - oy_b));
        const uint8_t* src = xi + ch * plane + ix;  // input row iy at src + iy * width
        if (sh == 1 && g.width == 1) {
          std::memcpy(row + (oy_a - p0), src + oy_a + dy, static_cast<size_t>(oy_b - oy_a));
        } else {
          for (int64_t oy = oy_a; oy < oy_b; ++oy) row[oy - p0] = src[(oy * sh + dy) * g.width];
        }
      }
    }
  }
}

// UnfoldPositions for a stride-1 convolution whose output has the input's
// size (Unfold's "same" case): a row's positions [p0, p1) read the channel's
// plane shifted by the tap's offset, one copy per row, then the positions
// whose column fell outside the image (wrapped into a neighbouring row) and
// the rows outside it set to `pad`. UnfoldRun per output row cost a call and
// its edge logic per 20 bytes of YOLOv8n's 20 x 20 layers (speed22).
void UnfoldSamePositions(const ConvGeometry& g, const uint8_t* xi, uint8_t pad, int64_t p0, int64_t p1,
                         uint8_t* col_part) {
  const int64_t plane = g.height * g.width, ld = p1 - p0, w = g.out_w;
  uint8_t* row = col_part;
  for (int64_t ch = 0; ch < g.channels; ++ch) {
    const uint8_t* src_plane = xi + ch * plane;
    for (int64_t ky = 0; ky < g.kernel_h; ++ky) {
      for (int64_t kx = 0; kx < g.kernel_w; ++kx, row += ld) {
        const int64_t dy = ky * g.dilation_h - g.pad_top, dx = kx * g.dilation_w - g.pad_left;
        // Output rows [oy0, oy1) read input rows oy + dy inside the image.
        const int64_t oy0 = std::min(g.out_h, std::max<int64_t>(0, -dy));
        const int64_t oy1 = std::max(oy0, std::min(g.out_h, g.height - dy));
        const int64_t shift = dy * g.width + dx;
        const int64_t lo = std::max({p0, oy0 * w, -shift}), hi = std::min({p1, oy1 * w, plane - shift});
        if (hi <= lo) {
          FillBytes(row, pad, ld);
          continue;
        }
        FillBytes(row, pad, lo - p0);
        CopyBytes(row + (lo - p0), src_plane + lo + shift, hi - lo);
        FillBytes(row + (hi - p0), pad, p1 - hi);
        // Columns ox < -dx and ox >= w - dx of the copied rows read a neighbouring row: padding.
        const int64_t left = std::min(w, std::max<int64_t>(0, -dx)), right = std::min(w, std::max<int64_t>(0, dx));
        PadEdgeColumns(row, pad, w, left, right, p0, p1);
      }
    }
  }
}

void UnfoldPositions(const ConvGeometry& g, const uint8_t* xi, uint8_t pad, int64_t p0, int64_t p1,
                     uint8_t* col_part) {
  const int64_t plane = g.height * g.width, ld = p1 - p0;
  if (g.out_w == 1) {  // one output column (a 1-D convolution as [H, 1]: magika): a tap's run spans output rows
    UnfoldOneColumn(g, xi, pad, p0, p1, col_part);
    return;
  }
  if (g.stride_h == 1 && g.stride_w == 1 && g.out_h == g.height && g.out_w == g.width) {
    UnfoldSamePositions(g, xi, pad, p0, p1, col_part);
    return;
  }
  const int64_t oy_first = p0 / g.out_w, oy_last = (p1 - 1) / g.out_w;
  thread_local std::vector<int64_t> inside;  // per kx: the columns inside the image, [begin, end)
  int64_t* const range = Reserve(inside, 2 * g.kernel_w);
  for (int64_t kx = 0; kx < g.kernel_w; ++kx) {
    const int64_t dx = kx * g.dilation_w - g.pad_left;
    range[2 * kx] = InsideBegin(g, dx), range[2 * kx + 1] = InsideEnd(g, dx, range[2 * kx]);
  }
  uint8_t* row = col_part;
  for (int64_t ch = 0; ch < g.channels; ++ch) {
    for (int64_t ky = 0; ky < g.kernel_h; ++ky) {
      for (int64_t kx = 0; kx < g.kernel_w; ++kx, row += ld) {  // row (ch, ky, kx)
        const int64_t dy = ky * g.dilation_h - g.pad_top, dx = kx * g.dilation_w - g.pad_left;
        for (int64_t oy = oy_first; oy <= oy_last; ++oy) {
          const int64_t first = oy * g.out_w;
          const int64_t a = std::max(p0, first) - first, b = std::min(p1, first + g.out_w) - first;
          UnfoldRun(g, xi + ch * plane, pad, oy * g.stride_h + dy, dx, a, b, range[2 * kx], range[2 * kx + 1],
                    row + first + a - p0);
        }
      }
    }
  }
}

// A plane of at most kConvS8ColumnMax positions, which only columns read,
// packed straight from the image: position i's 4 bytes of step s at
// packed[64 s + 4 i] are rows 4s .. 4s + 3 of the unfolded matrix (tap bytes
// XOR flip, `pad` XOR flip outside the image, 0 in rows past k), the bytes
// PackBlocks writes there from the col (the bytes of positions past the last
// are left: no column reads them). One pass over k x P bytes instead of an
// unfold by rows of P bytes and a pack of whole 16-position steps (Silero
// VAD's STFT convolution: 256 rows of 4 positions, 64 steps).
void GatherColumns(const ConvGeometry& g, const uint8_t* xi, uint8_t pad, uint8_t flip, int64_t steps,
                   uint8_t* packed) {
  const int64_t p = g.out_size(), plane = g.height * g.width;
  thread_local std::vector<uint8_t> column_buffer;
  // Every position's column of the col (k rows, then up to 4 x steps; 8
  // bytes more for the short kernels' copies), all written before the quads
  // are read back: a 4-byte load over several recent smaller stores waits
  // for them to retire.
  const int64_t ld = 4 * steps;
  uint8_t* const columns = Reserve(column_buffer, p * ld + 8);
  const uint32_t flip4 = 0x01010101u * flip;
  // Short kernels (Silero VAD's 1x3 encoder layers: 129 channels of 3 taps):
  // each input row once with its padding around it, then one 8-byte copy per
  // tap row and position with no edge cases.
  const bool short_rows = g.dilation_w == 1 && g.kernel_w <= 8;
  const int64_t line = g.pad_left + g.width + g.pad_right + 8;
  thread_local std::vector<uint8_t> line_buffer;
  uint8_t* const lines = short_rows ? Reserve(line_buffer, g.channels * g.height * line) : nullptr;
  if (short_rows) {
    for (int64_t r = 0; r < g.channels * g.height; ++r) {
      uint8_t* l = lines + r * line;
      FillBytes(l, pad, g.pad_left);
      CopyBytes(l + g.pad_left, xi + r * g.width, g.width);
      FillBytes(l + g.pad_left + g.width, pad, g.pad_right + 8);
    }
  }
  for (int64_t i = 0; i < p; ++i) {
    const int64_t oy = i / g.out_w, ox = i % g.out_w;
    uint8_t* const v = columns + i * ld;
    uint8_t* row = v;  // row (ch, ky, 0)
    for (int64_t ch = 0; ch < g.channels; ++ch) {
      for (int64_t ky = 0; ky < g.kernel_h; ++ky, row += g.kernel_w) {
        const int64_t iy = oy * g.stride_h + ky * g.dilation_h - g.pad_top;
        if (iy < 0 || iy >= g.height) {
          FillBytes(row, pad, g.kernel_w);
          continue;
        }
        if (short_rows) {  // the window's 8 bytes of the padded row: the next row overwrites the rest
          std::memcpy(row, lines + (ch * g.height + iy) * line + ox * g.stride_w, 8);
          continue;
        }
        const uint8_t* src = xi + ch * plane + iy * g.width;
        const int64_t x0 = ox * g.stride_w - g.pad_left;  // the input column of kx = 0
        if (g.dilation_w == 1) {  // taps [a, b) inside the row, one run
          const int64_t a = std::clamp<int64_t>(-x0, 0, g.kernel_w),
                        b = std::clamp<int64_t>(g.width - x0, a, g.kernel_w);
          FillBytes(row, pad, a);
          if (b > a) CopyBytes(row + a, src + x0 + a, b - a);
          FillBytes(row + b, pad, g.kernel_w - b);
          continue;
        }
        for (int64_t kx = 0; kx < g.kernel_w; ++kx) {
          const int64_t ix = x0 + kx * g.dilation_w;
          row[kx] = ix >= 0 && ix < g.width ? src[ix] : pad;
        }
      }
    }
    std::memset(row, flip, static_cast<size_t>(v + ld - row));  // 0 once flipped
  }
  for (int64_t s = 0; s < steps; ++s) {
    for (int64_t i = 0; i < p; ++i) {
      uint32_t quad;
      std::memcpy(&quad, columns + i * ld + 4 * s, 4);
      quad ^= flip4;
      std::memcpy(packed + s * kStepBytes + 4 * i, &quad, 4);
    }
  }
}

// Packs blocks [b0, b1) of col [K, P] (row stride p) into `packed`, block b0
// first (layout: internal.h, ConvS8Tile). u8: x_u = byte ^ flip; s16: x_u - za_u.
void PackBlocks(const uint8_t* col, int64_t k, int64_t p, int64_t steps, bool s16, uint8_t flip, int32_t za_u,
                int64_t b0, int64_t b1, ConvS8Pack4Fn pack4, uint8_t* packed) {
  const int rows_per_step = s16 ? 2 : 4;
  int64_t b = b0;
  if (pack4 != nullptr && !s16) {  // four whole blocks at a time
    for (; b + 4 <= b1 && (b + 4) * kBlock <= p; b += 4) {
      pack4(col + b * kBlock, p, k, steps, flip, packed + (b - b0) * steps * kStepBytes, steps * kStepBytes);
    }
  }
  for (; b < b1; ++b) {
    const int64_t p0 = b * kBlock, n = std::min<int64_t>(kBlock, p - p0);
    uint8_t* dst = packed + (b - b0) * steps * kStepBytes;
    for (int64_t s = 0; s < steps; ++s, dst += kStepBytes) {
      const int64_t r0 = s * rows_per_step;
      const int rows = static_cast<int>(std::min<int64_t>(rows_per_step, k - r0));
#if defined(__SSE2__)
      if (n == kBlock) {
        const __m128i f = _mm_set1_epi8(static_cast<char>(flip)), zero = _mm_setzero_si128();
        __m128i v[4];
        for (int r = 0; r < rows_per_step; ++r) {
          v[r] = r < rows ? _mm_xor_si128(_mm_loadu_si128(reinterpret_cast<const __m128i*>(col + (r0 + r) * p + p0)), f)
                          : zero;
        }
        __m128i o[4];
        if (!s16) {  // 4 rows of 16 bytes -> 16 quads
          const __m128i ab_lo = _mm_unpacklo_epi8(v[0], v[1]), ab_hi = _mm_unpackhi_epi8(v[0], v[1]);
          const __m128i cd_lo = _mm_unpacklo_epi8(v[2], v[3]), cd_hi = _mm_unpackhi_epi8(v[2], v[3]);
          o[0] = _mm_unpacklo_epi16(ab_lo, cd_lo), o[1] = _mm_unpackhi_epi16(ab_lo, cd_lo);
          o[2] = _mm_unpacklo_epi16(ab_hi, cd_hi), o[3] = _mm_unpackhi_epi16(ab_hi, cd_hi);
        } else {  // 2 rows of 16 bytes -> 16 pairs of int16 x_u - za_u (a missing row: 0)
          const __m128i za = _mm_set1_epi16(static_cast<int16_t>(za_u));
          const __m128i za_b = rows > 1 ? za : zero;
          const __m128i a_lo = _mm_sub_epi16(_mm_unpacklo_epi8(v[0], zero), za);
          const __m128i a_hi = _mm_sub_epi16(_mm_unpackhi_epi8(v[0], zero), za);
          const __m128i b_lo = _mm_sub_epi16(_mm_unpacklo_epi8(v[1], zero), za_b);
          const __m128i b_hi = _mm_sub_epi16(_mm_unpackhi_epi8(v[1], zero), za_b);
          o[0] = _mm_unpacklo_epi16(a_lo, b_lo), o[1] = _mm_unpackhi_epi16(a_lo, b_lo);
          o[2] = _mm_unpacklo_epi16(a_hi, b_hi), o[3] = _mm_unpackhi_epi16(a_hi, b_hi);
        }
        for (int q = 0; q < 4; ++q) _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + 16 * q), o[q]);
        continue;
      }
#endif
      std::memset(dst, 0, kStepBytes);
      for (int64_t i = 0; i < n; ++i) {
        for (int r = 0; r < rows; ++r) {
          const uint8_t u = col[(r0 + r) * p + p0 + i] ^ flip;
          if (s16) {
            const int16_t v = static_cast<int16_t>(u - za_u);
            std::memcpy(dst + 4 * i + 2 * r, &v, sizeof(v));
          } else {
            dst[4 * i + r] = u;
          }
        }
      }
    }
  }
}

// The portable tile: plain loops over both step layouts, RequantizeS32Ref per row.
void TilePortable(const ConvS8Tile& t) {
  int32_t acc[kBlock * kTileBlocks];
  for (int c = 0; c < (t.last_slice ? t.channels : kTileChannels); ++c) {
    const uint8_t* w = t.w + 4 * c;
    for (int i = 0; i < (t.last_slice ? t.positions : kBlock * t.blocks); ++i) {
      const uint8_t* x = t.col + (i / kBlock) * t.block_stride + 4 * (i % kBlock);
      // Wraps mod 2^32 like the reference's int32 sums.
      uint32_t sum = t.first_slice ? 0u : static_cast<uint32_t>(t.partial[kBlock * kTileBlocks * c + i]);
      for (int64_t s = 0; s < t.steps; ++s) {
        const uint8_t* xs = x + s * kStepBytes;
        const uint8_t* ws = w + s * kStepBytes;
        if (t.s16) {
          for (int q = 0; q < 2; ++q) {
            int16_t xv, wv;
            std::memcpy(&xv, xs + 2 * q, sizeof(xv));
            std::memcpy(&wv, ws + 2 * q, sizeof(wv));
            sum += static_cast<uint32_t>(int32_t{xv} * int32_t{wv});
          }
        } else {
          for (int q = 0; q < 4; ++q)
            sum += static_cast<uint32_t>(int32_t{xs[q]} * int32_t{static_cast<int8_t>(ws[q])});
        }
      }
      if (!t.last_slice) {
        t.partial[kBlock * kTileBlocks * c + i] = static_cast<int32_t>(sum);
      } else {
        acc[i] = static_cast<int32_t>(sum + static_cast<uint32_t>(t.offset[c]));
      }
    }
    if (!t.last_slice) continue;
    uint8_t* y = t.y + c * t.ld_y;
    if (t.out_signed) {
      RequantizeS32Ref<int8_t>(t.positions, acc, nullptr, 0, t.multiplier + c, 0, t.zero_point, false,
                               reinterpret_cast<int8_t*>(y));
    } else {
      RequantizeS32Ref<uint8_t>(t.positions, acc, nullptr, 0, t.multiplier + c, 0, t.zero_point, false, y);
    }
  }
}

}  // namespace

void ConvS8Driver(const ConvS8Args& args, ConvS8TileFn tile, ConvS8Pack4Fn pack4, ConvS8ColumnFn column,
                  bool raw_tile, ConvS8UnfoldPackFn unfold_pack) {
  const PackedGemmS8& w = *args.w;
  const ConvGeometry& g = args.conv;
  const bool s16 = w.format == PackedFormat::kPanel16x2S16;
  const int64_t m = w.n, k = w.k, p = g.out_size(), steps = w.k_padded / w.step();
  const int64_t blocks = (p + kBlock - 1) / kBlock;
  const int64_t image_in = g.channels * g.height * g.width, image_out = m * p;
  const bool direct = g.kernel_h == 1 && g.kernel_w == 1 && g.stride_h == 1 && g.stride_w == 1 && g.pad_top == 0 &&
                      g.pad_left == 0 && g.out_h == g.height && g.out_w == g.width;
  const uint8_t flip = args.x_signed ? 0x80 : 0;
  const int32_t za_u = args.x_zero_point + (args.x_signed ? 128 : 0);
  const uint8_t pad = static_cast<uint8_t>(args.x_zero_point);  // the unfolded taps outside the image
  // Packed straight from the image, without a col (ConvS8UnfoldPackFn's geometries).
  const bool fused = unfold_pack != nullptr && !direct && !s16 && g.stride_h == 1 && g.stride_w == 1 &&
                     g.out_w == g.width && g.width >= kConvS8UnfoldPackMinWidth;
  // Raw sums out (int32 or float, ConvS8Args::y_s32 / y_f32): every slice
  // leaves the tile in `partial`, finished below.
  // With y_q the float values go to a scratch of each run_tiles call (its
  // channels x positions, in cache), then QuantizeLinear's row writes bytes.
  const bool quantize = args.y_q != nullptr;
  const bool raw = args.y_s32 != nullptr || args.y_f32 != nullptr || quantize;
  const int64_t out_bytes = raw && !quantize ? 4 : 1;  // per output value
  auto* const y_base = quantize ? static_cast<uint8_t*>(args.y_q)
                       : raw    ? (args.y_s32 != nullptr ? reinterpret_cast<uint8_t*>(args.y_s32)
                                                         : reinterpret_cast<uint8_t*>(args.y_f32))
                                : static_cast<uint8_t*>(args.y);

  thread_local std::vector<int32_t> offset_buffer;
  thread_local std::vector<uint8_t> col_buffer;
  // Padded with zeros to whole panels: a tile may read all 8 channels' offsets, a column 16.
  const int64_t m_tiles = (m + PackedGemmS8::kPanelWidth - 1) / PackedGemmS8::kPanelWidth * PackedGemmS8::kPanelWidth;
  int32_t* const offset = Reserve(offset_buffer, m_tiles);
  std::fill(offset + m, offset + m_tiles, 0);
  for (int64_t o = 0; o < m; ++o) {  // mod 2^32, as the sums are
    uint32_t v = args.bias != nullptr ? static_cast<uint32_t>(args.bias[o]) : 0u;
    if (!s16) v -= static_cast<uint32_t>(za_u) * static_cast<uint32_t>(w.col_sums[o]);
    offset[o] = static_cast<int32_t>(v);
  }
  bool multipliers_finite = true, multipliers_below_one = true;
  for (int64_t o = 0; o < (raw ? 0 : m); ++o) {
    multipliers_finite = multipliers_finite && std::isfinite(args.multiplier[o]);
    multipliers_below_one = multipliers_below_one && std::fabs(args.multiplier[o]) < 1.0f;  // false for NaN
  }
  const auto* w_data = s16 ? reinterpret_cast<const uint8_t*>(w.data_s16.data())
                           : reinterpret_cast<const uint8_t*>(w.data_s8.data());
  const int64_t panel_bytes = steps * kStepBytes;
  const int64_t channel_tiles = (m + kTileChannels - 1) / kTileChannels;
  const int64_t position_tiles = (blocks + kTileBlocks - 1) / kTileBlocks;
  // K slices of at most kSliceSteps, all about the same size.
  const int64_t slices = steps <= kMaxOneSliceSteps ? 1 : (steps + kSliceSteps - 1) / kSliceSteps;
  const int64_t slice_steps = std::max<int64_t>(1, (steps + slices - 1) / slices);  // the last may be shorter
  constexpr int64_t kTileSums = kTileChannels * kBlock * kTileBlocks;  // int32 sums of a tile between slices
  // Raw sums the tile does not finish itself go through `partial` to the driver's loops.
  const bool raw_in_tile = raw && raw_tile;
  // A last block of at most kConvS8ColumnMax positions goes by columns (u8
  // steps only; raw sums where the row finishes them itself): also every
  // position of a convolution with so few (Silero VAD's STFT and encoder:
  // 1-4 positions, where the tiles multiplied a block of 16 and took 3-15 us).
  const int64_t tail_positions = p - (blocks - 1) * kBlock;
  const bool by_columns =
      (!raw || raw_in_tile) && column != nullptr && !s16 && blocks > 0 && tail_positions <= kConvS8ColumnMax;
  const bool gather = by_columns && blocks == 1;  // columns only: GatherColumns packs the image
  const bool keep_partial = slices > 1 || (raw && !raw_in_tile);  // the tiles' sums go through `partial`

  // The tiles of channel tiles [ct0, ct1) x position tiles [pt0, pt1) of
  // image yi, from `packed` (its first block: the first of pt0), then the
  // table over them. `partial`: kTileSums per channel tile when K is sliced.
  auto run_tiles = [&](int64_t ct0, int64_t ct1, int64_t pt0, int64_t pt1, const uint8_t* packed, int32_t* partial,
                       uint8_t* yi) {
    // The float outputs of channel o, position q (q in [q0, q1)): y_f32's
    // row, or with y_q the call's scratch [channels c_first .. c_end, q1 - q0].
    const int64_t q0 = std::min(p, pt0 * kTileBlocks * kBlock), q1 = std::min(p, pt1 * kTileBlocks * kBlock);
    // The scratch's first row: a whole weight panel's first channel (a column writes from there).
    const int64_t c_first = ct0 * kTileChannels / PackedGemmS8::kPanelWidth * PackedGemmS8::kPanelWidth;
    const int64_t c_begin = ct0 * kTileChannels, c_end = std::min(m, ct1 * kTileChannels);  // this call's channels
    thread_local std::vector<float> quantize_buffer;
    float* const scratch = quantize ? Reserve(quantize_buffer, (ct1 * kTileChannels - c_first) * (q1 - q0)) : nullptr;
    const int64_t ld_f = quantize ? q1 - q0 : p;
    auto frow = [&](int64_t o, int64_t q) {
      return quantize ? scratch + (o - c_first) * ld_f + (q - q0) : reinterpret_cast<float*>(yi) + o * p + q;
    };
    // A tile's or a column's raw outputs from channel c0, position q on.
    auto raw_outputs = [&](auto& out, int64_t c0, int64_t q) {
      if (args.y_s32 != nullptr) {
        out.y_s32 = reinterpret_cast<int32_t*>(yi) + c0 * p + q;
      } else {
        out.y_f32 = frow(c0, q);
        out.f32_scale = args.f32_scale + c0;
        out.f32_bias = args.f32_bias != nullptr ? args.f32_bias + c0 : nullptr;
      }
    };
    ConvS8Tile t;
    t.block_stride = steps * kStepBytes;
    t.s16 = s16;
    t.multipliers_finite = multipliers_finite;
    t.multipliers_below_one = multipliers_below_one;
    t.zero_point = args.y_zero_point;
    t.out_signed = args.y_signed;
    t.ld_y = raw_in_tile && args.y_s32 == nullptr ? ld_f : p;
    for (int64_t pt = pt0; pt < pt1; ++pt) {
      const int64_t block = pt * kTileBlocks, p0 = block * kBlock;
      const int64_t tile_blocks = std::min<int64_t>(kTileBlocks, (by_columns ? blocks - 1 : blocks) - block);
      if (tile_blocks <= 0) continue;  // only the columns' block
      t.blocks = static_cast<int>(tile_blocks);
      t.positions = static_cast<int>(std::min<int64_t>(kBlock * tile_blocks, p - p0));
      bool last = false;
      for (int64_t s0 = 0; !last; s0 += slice_steps) {  // at least one slice, also for K = 0
        last = s0 + slice_steps >= steps;
        t.steps = std::min(slice_steps, steps - s0);
        t.first_slice = s0 == 0;
        t.last_slice = last && (!raw || raw_in_tile);
        t.col = packed + ((block - pt0 * kTileBlocks) * steps + s0) * kStepBytes;
        for (int64_t ct = ct0; ct < ct1; ++ct) {
          const int64_t c0 = ct * kTileChannels;
          t.w = w_data + (c0 / PackedGemmS8::kPanelWidth) * panel_bytes + s0 * kStepBytes +
                (c0 % PackedGemmS8::kPanelWidth) * 4;
          t.channels = static_cast<int>(std::min<int64_t>(kTileChannels, m - c0));
          t.partial = keep_partial ? partial + (ct - ct0) * kTileSums : nullptr;
          // Raw sums: the driver adds the offsets (a tile may add them in the
          // first slice, as the VNNI one does, or in the last), unless the tile finishes them.
          t.offset = raw && !raw_in_tile ? kZeroOffsets : offset + c0;
          t.multiplier = raw ? nullptr : args.multiplier + c0;
          t.y = yi + c0 * p + p0;
          if (raw_in_tile) raw_outputs(t, c0, p0);
          tile(t);
        }
      }
      if (raw && !raw_in_tile) {  // acc = sum + offset (mod 2^32), then the int32 or float output
        for (int64_t ct = ct0; ct < ct1; ++ct) {
          const int64_t c0 = ct * kTileChannels, channels = std::min<int64_t>(kTileChannels, m - c0);
          const int32_t* sums = partial + (ct - ct0) * kTileSums;
          for (int64_t c = 0; c < channels; ++c) {
            const int64_t o = c0 + c;
            const uint32_t off = static_cast<uint32_t>(offset[o]);
            const int32_t* row = sums + kBlock * kTileBlocks * c;
            if (args.y_s32 != nullptr) {
              int32_t* out = reinterpret_cast<int32_t*>(yi) + o * p + p0;
              for (int i = 0; i < t.positions; ++i) out[i] = static_cast<int32_t>(static_cast<uint32_t>(row[i]) + off);
            } else {
              float* out = frow(o, p0);
              const float scale = args.f32_scale[o];
              for (int i = 0; i < t.positions; ++i)
                out[i] = static_cast<float>(static_cast<int32_t>(static_cast<uint32_t>(row[i]) + off)) * scale;
              if (args.f32_bias != nullptr) {
                const float b = args.f32_bias[o];
                for (int i = 0; i < t.positions; ++i) out[i] = out[i] + b;
              }
            }
          }
        }
      }
    }
    if (by_columns &&
        pt1 * kTileBlocks >= blocks) {  // the last block by columns, before the raw outputs' SiLU and QuantizeLinear
      const int64_t block = blocks - 1, q = block * kBlock;
      ConvS8Column cl;
      cl.col = packed + (block - pt0 * kTileBlocks) * steps * kStepBytes;
      cl.positions = static_cast<int>(tail_positions);
      cl.steps = steps;
      cl.multipliers_finite = multipliers_finite;
      cl.zero_point = args.y_zero_point;
      cl.out_signed = args.y_signed;
      cl.ld_y = raw && args.y_s32 == nullptr ? ld_f : p;
      constexpr int64_t kPanel = PackedGemmS8::kPanelWidth;
      for (int64_t panel = c_begin / kPanel; panel * kPanel < c_end; ++panel) {
        const int64_t first = panel * kPanel;
        cl.w = w_data + panel * panel_bytes;
        cl.lane_begin = static_cast<int>(std::max(c_begin, first) - first);
        cl.lane_end = static_cast<int>(std::min(c_end, first + kPanel) - first);
        cl.offset = offset + first;
        if (raw) {
          raw_outputs(cl, first, q);
        } else {
          cl.multiplier = args.multiplier + first;
          cl.y = yi + first * p + q;
        }
        column(cl);
      }
    }
    // The SiLU over each channel's finished positions of this call.
    if ((args.y_f32 != nullptr || quantize) && args.f32_silu != nullptr) {
      for (int64_t o = c_begin; o < c_end && q0 < q1; ++o) {
        float* row = frow(o, q0);
        args.f32_silu(row, row, q1 - q0, true);
      }
    }
    if (quantize) {  // QuantizeLinear's row over them, into the byte output
      for (int64_t o = c_begin; o < c_end && q0 < q1; ++o)
        args.f32_quantize(q1 - q0, frow(o, q0), args.q_scale, args.q_zero_point, args.q_signed, yi + o * p + q0);
    }
    if (args.table != nullptr) {  // over these outputs, still in cache
      const int64_t p0 = pt0 * kTileBlocks * kBlock, p1 = std::min(p, pt1 * kTileBlocks * kBlock);
      for (int64_t o = c_begin; o < c_end; ++o) {
        args.apply_table(args.table, args.table_flip, yi + o * p + p0, yi + o * p + p0, p1 - p0);
      }
    }
  };

  // Many positions: each task packs its own positions (in its thread's
  // cache) and runs every channel on them. Few: every thread packs them all
  // (little work) and runs its part of the channels. One ParallelFor per
  // image either way (two with the unfold).
  // The results do not depend on the split.
  const bool split_positions = position_tiles > kTaskPositionTiles;
  const int64_t threads = args.pool != nullptr ? args.pool->num_threads() : 1;

  // Position tiles [pt0, pt1) of image xi into yi: unfolded (or read, for a
  // direct 1x1) and packed by the calling task, then every channel on them.
  auto run_positions = [&](const uint8_t* xi, uint8_t* yi, int64_t pt0, int64_t pt1, uint8_t* col_part,
                           uint8_t* packed, int32_t* partial) {
    const int64_t b0 = pt0 * kTileBlocks, b1 = std::min(blocks, pt1 * kTileBlocks);
    if (direct) {
      PackBlocks(xi, k, p, steps, s16, flip, za_u, b0, b1, pack4, packed);
    } else if (fused) {
      unfold_pack(g, xi, pad, k, steps, flip, b0, b1, packed);
    } else {  // the same bytes as from the whole col: blocks [0, b1 - b0) of the part
      const int64_t p0 = b0 * kBlock, p1 = std::min(p, b1 * kBlock);
      UnfoldPositions(g, xi, pad, p0, p1, col_part);
      PackBlocks(col_part, k, p1 - p0, steps, s16, flip, za_u, 0, b1 - b0, pack4, packed);
    }
    run_tiles(0, channel_tiles, pt0, pt1, packed, partial, yi);
  };

  // Every block of image xi into `packed`: gathered for columns alone, packed
  // straight from the image by the row's unfold_pack, or unfolded into `col`
  // (not for a direct 1x1, which reads x itself; `unfolded`: col holds it
  // already) and packed from there. The same bytes every way.
  auto pack_image = [&](const uint8_t* xi, uint8_t* col, bool unfolded, uint8_t* packed) {
    if (gather) return GatherColumns(g, xi, pad, flip, steps, packed);
    if (fused) return unfold_pack(g, xi, pad, k, steps, flip, 0, blocks, packed);
    if (!direct && !unfolded) Unfold(g, xi, pad, 0, k, col);
    PackBlocks(direct ? xi : col, k, p, steps, s16, flip, za_u, 0, blocks, pack4, packed);
  };

  // A batch that the threads share evenly (YOLOv8n at batch 16): one task per
  // image, in one ParallelFor; the task unfolds and packs its image on its
  // own thread (by position tasks of kTaskPositionTiles when there are many)
  // and runs every channel on it. Image by image, small planes were packed by
  // the calling thread alone while the others waited, then a few channel
  // tiles were shared out (2 threads ran those layers 1.05-1.4x faster than
  // 1: bench/RESULTS.md, scale22), and the position tasks of a 20 x 20 or
  // 40 x 40 plane (13 or 9 of them) left one thread a task short, with one
  // wait per image (speed22). The same bytes are packed and summed either way.
  if (threads > 1 && (args.batch >= 4 * threads || (args.batch >= threads && args.batch % threads == 0))) {
    ParallelFor(args.pool, args.batch, 1, [&](int64_t i0, int64_t i1) {
      thread_local std::vector<uint8_t> image_col_buffer;
      thread_local std::vector<uint8_t> image_packed_buffer;
      thread_local std::vector<int32_t> image_partial_buffer;
      const int64_t part_tiles = split_positions ? kTaskPositionTiles : position_tiles;
      const int64_t col_size = split_positions ? k * part_tiles * kTileBlocks * kBlock : k * p;
      uint8_t* const image_col = direct || fused || gather ? nullptr : Reserve(image_col_buffer, col_size);
      uint8_t* const packed =
          Reserve(image_packed_buffer, std::min(blocks, part_tiles * kTileBlocks) * steps * kStepBytes);
      int32_t* const partial = keep_partial ? Reserve(image_partial_buffer, channel_tiles * kTileSums) : nullptr;
      for (int64_t img = i0; img < i1; ++img) {
        const uint8_t* xi = static_cast<const uint8_t*>(args.x) + img * image_in;
        uint8_t* yi = y_base + img * image_out * out_bytes;
        if (split_positions) {
          for (int64_t pt0 = 0; pt0 < position_tiles; pt0 += part_tiles)
            run_positions(xi, yi, pt0, std::min(position_tiles, pt0 + part_tiles), image_col, packed, partial);
          continue;
        }
        pack_image(xi, image_col, /*unfolded=*/false, packed);
        run_tiles(0, channel_tiles, 0, position_tiles, packed, partial, yi);
      }
    });
    return;
  }
  // The whole col (few positions), unfolded once for every channel part.
  uint8_t* const col = direct || fused || gather || split_positions ? nullptr : Reserve(col_buffer, k * p);
  // Many positions: one contiguous part of the position tiles per thread, run
  // by the part's thread in even pieces of at most kTaskPositionTiles.
  const int64_t position_parts = std::min(threads, position_tiles);
  const int64_t part_span = (position_tiles + position_parts - 1) / position_parts;
  const int64_t part_pieces = (part_span + kTaskPositionTiles - 1) / kTaskPositionTiles;
  const int64_t piece_tiles = (part_span + part_pieces - 1) / part_pieces;
  for (int64_t img = 0; img < args.batch; ++img) {
    const uint8_t* xi = static_cast<const uint8_t*>(args.x) + img * image_in;
    uint8_t* yi = y_base + img * image_out * out_bytes;
    if (split_positions) {
      // Each piece is unfolded (col_part, in its thread's cache) and packed
      // by its thread. Parts fixed per thread rather than about four tasks a
      // thread claimed in turn: EfficientNet-Lite0's and YOLOv8n's 28 x 28 to
      // 80 x 80 layers at batch 1 ran 5-25% faster on 2 threads (small22).
      ParallelFor(args.pool, position_parts, 1, [&](int64_t q0, int64_t q1) {
        thread_local std::vector<uint8_t> task_packed_buffer;
        thread_local std::vector<uint8_t> task_col_buffer;
        thread_local std::vector<int32_t> partial_buffer;
        uint8_t* const packed = Reserve(task_packed_buffer, piece_tiles * kTileBlocks * steps * kStepBytes);
        uint8_t* const col_part = direct ? nullptr : Reserve(task_col_buffer, k * piece_tiles * kTileBlocks * kBlock);
        int32_t* const partial = keep_partial ? Reserve(partial_buffer, channel_tiles * kTileSums) : nullptr;
        const int64_t end = std::min(position_tiles, q1 * part_span);
        for (int64_t pt0 = q0 * part_span; pt0 < end; pt0 += piece_tiles)
          run_positions(xi, yi, pt0, std::min(end, pt0 + piece_tiles), col_part, packed, partial);
      });
    } else {
      if (col != nullptr) {
        // A col of a few KiB unfolds on the calling thread: a wake-up of the
        // others costs more than the copy.
        const int64_t grain = std::max<int64_t>(4, kInlineUnfoldBytes / std::max<int64_t>(1, p));
        ParallelFor(args.pool, k, grain, [&](int64_t r0, int64_t r1) {
          Unfold(g, xi, pad, r0, r1, col);
        });
      }
      // One part per thread, each packing the image itself (in its own
      // cache) and running a fixed share of the channels, so a thread reads
      // the same weights every run. One packing thread handing its blocks to
      // tasks that claimed channel tiles ran the 1x1 projections on 7 x 7
      // planes 3x slower on 2 threads than on 1 (bench/RESULTS.md, small22).
      const int64_t parts = std::clamp<int64_t>(std::min(threads, m * k * p / kMinPartMacs), 1, channel_tiles);
      const int64_t part_tiles = (channel_tiles + parts - 1) / parts;
      ParallelFor(args.pool, parts, 1, [&](int64_t q0, int64_t q1) {
        thread_local std::vector<uint8_t> packed_buffer;
        thread_local std::vector<int32_t> partial_buffer;
        uint8_t* const packed = Reserve(packed_buffer, blocks * steps * kStepBytes);
        pack_image(xi, col, /*unfolded=*/true, packed);
        const int64_t ct0 = q0 * part_tiles, ct1 = std::min(channel_tiles, q1 * part_tiles);
        int32_t* const partial = keep_partial ? Reserve(partial_buffer, (ct1 - ct0) * kTileSums) : nullptr;
        if (ct0 < ct1) run_tiles(ct0, ct1, 0, position_tiles, packed, partial, yi);
      });
    }
  }
}

void ConvS8Portable(const ConvS8Args& args) { ConvS8Driver(args, TilePortable); }

}  // namespace cpu
}  // namespace sparq
