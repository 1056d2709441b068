// gemm_f32: the FP32 dense GEMM driver (blocking, packing of activation strips,
// threads, bias and ReLU) and the portable register tiles. The x86 tiles are
// in gemm_f32_avx2.cc and gemm_f32_avx512.cc.
//
// One call computes C = W * B for packed weights W [R, K]:
//
//            K                  cols (X rows, or output pixels)
//        +-------+            +-----------------------------+
//   R    | panel | tile_rows  | strip | strip | ...         |  K
//        | panel |      x     |  tile_cols wide, packed     |
//        |  ...  |            |  per call from X or im2col  |
//        +-------+            +-----------------------------+
//
// A task owns a few strips of one image (or of X) and a range of panels; for
// each slice of kKc values of k it packs its strips once and runs the tile on
// every (panel, strip) pair, so the strips stay in L2 and a panel slice in L1.
// Each C element belongs to one task and is summed in k order, slice after
// slice, so the result does not depend on the number of threads.
#include <algorithm>
#include <cstring>
#include <limits>
#include <vector>

#include "kernels/cpu/internal.h"

namespace sparq {
namespace cpu {
namespace {

constexpr int64_t kKc = 256;          // k per slice
constexpr int64_t kStripsPerTask = 4;  // strips packed together
constexpr int64_t kTasksPerThread = 4;

// strip[kk * tc + j] = X[j0 + j][k0 + kk], zero for j >= cols.
void PackRowsStrip(const float* x, int64_t ld_x, int64_t j0, int cols, int64_t k0, int64_t kc, int tc, float* strip) {
  for (int j = 0; j < cols; ++j) {
    const float* row = x + (j0 + j) * ld_x + k0;
    for (int64_t kk = 0; kk < kc; ++kk) strip[kk * tc + j] = row[kk];
  }
  if (cols < tc)
    for (int64_t kk = 0; kk < kc; ++kk) std::fill(strip + kk * tc + cols, strip + (kk + 1) * tc, 0.0f);
}

// The runs of strip columns [p0, p0 + cols): at most one per column.
int ConvStripRuns(const ConvGeometry& g, int64_t p0, int cols, ConvStripRun* runs) {
  int num_runs = 0;
  for (int t = 0; t < cols;) {
    const int64_t p = p0 + t, ox0 = p % g.out_w;
    const int len = static_cast<int>(std::min<int64_t>(g.out_w - ox0, cols - t));
    runs[num_runs++] = {p / g.out_w, ox0, t, len};
    t += len;
  }
  return num_runs;
}

// c[i * rs + j * cs] += bias[i], then clamped to [lo, hi], over rows x cols.
void Epilogue(const float* bias, float lo, float hi, float* c, int64_t rs, int64_t cs, int64_t rows, int64_t cols) {
  for (int64_t i = 0; i < rows; ++i) {
    const float b = bias != nullptr ? bias[i] : 0.0f;
    float* ci = c + i * rs;
    for (int64_t j = 0; j < cols; ++j) {
      float v = ci[j * cs] + b;
      v = v < lo ? lo : v;  // NaN stays NaN, as in the reference Clip / Relu
      ci[j * cs] = v > hi ? hi : v;
    }
  }
}

template <int kTr, int kTc>
void TilePortable(int64_t kc, const float* a, const float* b, float* c, int64_t rs, int64_t cs, int rows, int cols,
                  bool accumulate) {
  float acc[kTr][kTc] = {};
  if (accumulate)
    for (int i = 0; i < rows; ++i)
      for (int j = 0; j < cols; ++j) acc[i][j] = c[i * rs + j * cs];
  for (int64_t kk = 0; kk < kc; ++kk) {
    const float* ak = a + kk * kTr;
    const float* bk = b + kk * kTc;
    for (int i = 0; i < kTr; ++i)
      for (int j = 0; j < kTc; ++j) acc[i][j] += ak[i] * bk[j];
  }
  for (int i = 0; i < rows; ++i)
    for (int j = 0; j < cols; ++j) c[i * rs + j * cs] = acc[i][j];
}

}  // namespace

// A run reads one input row at a fixed stride; its in-bounds part is copied
// in one go, the rest zero filled.
void PackConvStripPortable(const ConvGeometry& g, const float* image, const ConvStripRun* runs, int num_runs, int cols,
                           int64_t k0, int64_t kc, int tc, float* strip) {
  const int64_t window = g.kernel_h * g.kernel_w;
  for (int64_t kk = 0; kk < kc; ++kk) {
    float* dst = strip + kk * tc;
    const int64_t k = k0 + kk, c = k / window, ky = (k % window) / g.kernel_w, kx = k % g.kernel_w;
    const float* plane = image + c * g.height * g.width;
    for (int r = 0; r < num_runs; ++r) {
      const ConvStripRun& run = runs[r];
      float* out = dst + run.t;
      const int64_t iy = run.oy * g.stride_h - g.pad_top + ky * g.dilation_h;
      if (iy < 0 || iy >= g.height) {
        std::fill(out, out + run.len, 0.0f);
        continue;
      }
      // Input column of pixel u of the run: ix0 + u * stride; in bounds for u in [lo, hi).
      const int64_t ix0 = run.ox0 * g.stride_w - g.pad_left + kx * g.dilation_w, sw = g.stride_w;
      const int64_t lo = ix0 >= 0 ? 0 : std::min<int64_t>(run.len, (-ix0 + sw - 1) / sw);
      const int64_t hi = ix0 >= g.width ? lo : std::max(lo, std::min<int64_t>(run.len, (g.width - 1 - ix0) / sw + 1));
      std::fill(out, out + lo, 0.0f);
      const float* src = plane + iy * g.width + ix0;
      if (sw == 1) {
        std::memcpy(out + lo, src + lo, sizeof(float) * (hi - lo));
      } else {
        for (int64_t u = lo; u < hi; ++u) out[u] = src[u * sw];
      }
      std::fill(out + hi, out + run.len, 0.0f);
    }
    std::fill(dst + cols, dst + tc, 0.0f);
  }
}

void GemmF32Driver(const GemmF32Args& args, const GemmF32Isa& isa) {
  const PackedGemmF32& w = *args.w;
  const int tr = isa.tile_rows, tc = isa.tile_cols;
  const bool conv = args.source == GemmF32Source::kConv;
  const int64_t images = conv ? args.batch : 1;
  const int64_t cols_total = conv ? args.conv.out_size() : args.m;
  const int64_t strips = (cols_total + tc - 1) / tc;
  const int64_t strip_groups = (strips + kStripsPerTask - 1) / kStripsPerTask;
  const int64_t threads = args.pool != nullptr ? args.pool->num_threads() : 1;
  // Split the panels too when images x strip groups alone leave threads idle.
  const int64_t base_tasks = images * strip_groups;
  const int64_t panel_chunks =
      std::min<int64_t>(w.panels, std::max<int64_t>(1, (kTasksPerThread * threads + base_tasks - 1) / base_tasks));
  const int64_t panels_per_chunk = (w.panels + panel_chunks - 1) / panel_chunks;
  const int64_t chunks = (w.panels + panels_per_chunk - 1) / panels_per_chunk;

  ParallelFor(args.pool, images * strip_groups * chunks, 1, [&](int64_t t0, int64_t t1) {
    std::vector<float> strips_buf(static_cast<size_t>(kStripsPerTask * kKc * tc));
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t chunk = t % chunks, group = (t / chunks) % strip_groups, img = t / (chunks * strip_groups);
      const int64_t s0 = group * kStripsPerTask, s1 = std::min(strips, s0 + kStripsPerTask);
      const int64_t p0 = chunk * panels_per_chunk, p1 = std::min(w.panels, p0 + panels_per_chunk);
      const float* x = conv ? args.x + img * args.x_image_stride : args.x;
      float* y = conv ? args.y + img * args.y_image_stride : args.y;
      // C[r][j] lives at y + r * rs + j * cs.
      const int64_t rs = conv ? cols_total : 1, cs = conv ? 1 : args.ld_y;
      for (int64_t k0 = 0; k0 < w.k; k0 += kKc) {
        const int64_t kc = std::min(kKc, w.k - k0);
        for (int64_t s = s0; s < s1; ++s) {
          const int cols = static_cast<int>(std::min<int64_t>(tc, cols_total - s * tc));
          float* strip = strips_buf.data() + (s - s0) * kKc * tc;
          if (conv) {
            ConvStripRun runs[64];  // a strip has at most tc <= 64 columns
            const int num_runs = ConvStripRuns(args.conv, s * tc, cols, runs);
            isa.pack_conv_strip(args.conv, x, runs, num_runs, cols, k0, kc, tc, strip);
          } else {
            PackRowsStrip(x, args.ld_x, s * tc, cols, k0, kc, tc, strip);
          }
        }
        for (int64_t p = p0; p < p1; ++p) {
          const int rows = static_cast<int>(std::min<int64_t>(tr, w.rows - p * tr));
          const float* a = w.panel(p) + k0 * tr;
          for (int64_t s = s0; s < s1; ++s) {
            const int cols = static_cast<int>(std::min<int64_t>(tc, cols_total - s * tc));
            isa.tile(kc, a, strips_buf.data() + (s - s0) * kKc * tc, y + (p * tr) * rs + (s * tc) * cs, rs, cs, rows,
                     cols, k0 > 0);
          }
        }
      }
      const int64_t r0 = p0 * tr, r1 = std::min(w.rows, p1 * tr);
      const int64_t j0 = s0 * tc, j1 = std::min(cols_total, s1 * tc);
      float* c = y + r0 * rs + j0 * cs;
      if (w.k == 0)  // no slice ran: C = 0
        for (int64_t i = 0; i < r1 - r0; ++i)
          for (int64_t j = 0; j < j1 - j0; ++j) c[i * rs + j * cs] = 0.0f;
      const bool clamp = args.out_min > -std::numeric_limits<float>::infinity() ||
                         args.out_max < std::numeric_limits<float>::infinity();
      if (args.bias != nullptr || clamp) {
        Epilogue(args.bias != nullptr ? args.bias + r0 : nullptr, args.out_min, args.out_max, c, rs, cs, r1 - r0,
                 j1 - j0);
      }
    }
  });
}

void GemmF32Portable(const GemmF32Args& args) {
  switch (args.w->format) {
    case PackedFormat::kPanel8x32F32: GemmF32Driver(args, {8, 32, TilePortable<8, 32>, PackConvStripPortable}); return;
    case PackedFormat::kPanel6x16F32: GemmF32Driver(args, {6, 16, TilePortable<6, 16>, PackConvStripPortable}); return;
    default: GemmF32Driver(args, {4, 8, TilePortable<4, 8>, PackConvStripPortable}); return;
  }
}

}  // namespace cpu
}  // namespace sparq
