// gemm_f32: the FP32 dense GEMM drivers (blocking, packing of activations,
// threads, bias, clamp and fused SiLU) and the portable register tiles. The
// x86 tiles are in gemm_f32_avx2.cc and gemm_f32_avx512.cc.
//
// A convolution computes C = W * B for weights W [R, K] packed in panels:
//
//            K                  cols (X rows, or output pixels)
//        +-------+            +-----------------------------+
//   R    | panel | tile_rows  | strip | strip | ...         |  K
//        | panel |      x     |  tile_cols wide, packed     |
//        |  ...  |            |  per call from X or im2col  |
//        +-------+            +-----------------------------+
//
// A task owns a few strips of one image and a range of panels; for each slice
// of kKc values of k it packs its strips once and runs the tile on every
// (panel, strip) pair, so the strips stay in L2 and a panel slice in L1.
// MatMul and Gemm turn the roles around: X is packed per call into panels
// (tile_rows rows of X each), W^T once into strips of tile_cols output
// columns, and the tile writes rows of Y. Each C element belongs to one task
// and is summed in k order, slice after slice, so the result does not depend
// on the number of threads.
//
// Pointwise convolutions on small planes (kPointwiseConv) take MatMul's
// roles too: a 7 x 7 plane is 49 pixels, one full 32-pixel strip and a tail
// of 17, where tiles of 8 pixels waste at most 7 of 49 and the output
// channels (multiples of 16 in most networks) fill the tile's columns. The
// tile's pixels x channels block is stored transposed into NCHW.
#include <algorithm>
#include <atomic>
#include <cstring>
#include <limits>
#include <vector>

#include "kernels/cpu/internal.h"
#include "sparq/tensor.h"

namespace sparq {
namespace cpu {
namespace {

constexpr int64_t kKc = 256;          // k per slice
constexpr int64_t kStripsPerTask = 4;  // strips packed together
constexpr int64_t kTasksPerThread = 4;
constexpr int64_t kPanelsPerTask = 4;  // activation panels packed together (kRows, kPointwiseConv)

// Working memory of a driver on this thread, kept from call to call: a fresh
// vector per call cost a page-faulting allocation of up to 128 KiB and its
// zero fill on every convolution. Its contents on return are unspecified.
float* ThreadScratch(size_t floats) {
  thread_local std::vector<float> buffer;
  if (buffer.size() < floats) buffer.resize(floats);
  return buffer.data();
}

// A number for one driver call whose tasks pack their shared operand whole
// (all of K in one slice) into ThreadScratch, or 0 when they do not.
uint64_t PackingCall(bool whole_k) {
  static std::atomic<uint64_t> calls{0};
  return whole_k ? calls.fetch_add(1, std::memory_order_relaxed) + 1 : 0;
}

// Whether this thread's scratch already holds the packing that task group
// `group` of call `call` needs: a thread that runs several chunks of one
// group packs for the first only. The chunks of EfficientNet-Lite0's 7 x 7
// pointwise planes (7 for 2 threads) packed the same 225 KiB each, and its
// 1152 -> 320 projection ran only 1.46x faster on 2 threads than on 1. The
// call number tells this call's packing from an earlier one's, whose input
// may have had the same address (the arena reuses them).
bool AlreadyPacked(uint64_t call, int64_t group) {
  thread_local uint64_t packed_call = 0;
  thread_local int64_t packed_group = -1;
  const bool same = call != 0 && packed_call == call && packed_group == group;
  packed_call = call, packed_group = group;
  return same;
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

// c[i * ldc + j] += bias[i * bias_row + j * bias_col], then clamped to
// [lo, hi], over rows x cols (bias per row: strides 1, 0; per column: 0, 1).
void Epilogue(const float* bias, int64_t bias_row, int64_t bias_col, float lo, float hi, float* c, int64_t ldc,
              int64_t rows, int64_t cols) {
  for (int64_t i = 0; i < rows; ++i) {
    float* ci = c + i * ldc;
    for (int64_t j = 0; j < cols; ++j) {
      float v = ci[j] + (bias != nullptr ? bias[i * bias_row + j * bias_col] : 0.0f);
      v = v < lo ? lo : v;  // NaN stays NaN, as in the reference Clip / Relu
      ci[j] = v > hi ? hi : v;
    }
  }
}

// The portable tiles' accumulators: C's block when accumulating, and at the
// end the epilogue (row and column bias, clamp) and the store of rows x cols,
// as the SIMD tiles' SPARQ_F32_FINISH computes them.
template <int kTr, int kTc>
void LoadTilePortable(const float* c, int64_t ldc, int rows, int cols, float (&acc)[kTr][kTc]) {
  for (int i = 0; i < rows; ++i)
    for (int j = 0; j < cols; ++j) acc[i][j] = c[i * ldc + j];
}

template <int kTr, int kTc>
void FinishTilePortable(const float (&acc)[kTr][kTc], int rows, int cols, const TileEpilogue* ep, float* c,
                        int64_t ldc) {
  for (int i = 0; i < rows; ++i)
    for (int j = 0; j < cols; ++j) {
      float v = acc[i][j];
      if (ep != nullptr) {
        v += (ep->row_bias != nullptr ? ep->row_bias[i] : 0.0f) + (ep->col_bias != nullptr ? ep->col_bias[j] : 0.0f);
        if (ep->clamp) {
          v = v < ep->lo ? ep->lo : v;  // NaN stays NaN
          v = v > ep->hi ? ep->hi : v;
        }
      }
      c[i * ldc + j] = v;
    }
}

template <int kTr, int kTc>
void TilePortable(int64_t kc, const float* a, const float* b, int64_t ldb, float* c, int64_t ldc, int rows, int cols,
                  bool accumulate, const TileEpilogue* ep) {
  float acc[kTr][kTc] = {};
  if (accumulate) LoadTilePortable(c, ldc, rows, cols, acc);
  for (int64_t kk = 0; kk < kc; ++kk) {
    const float* ak = a + kk * kTr;
    const float* bk = b + kk * ldb;
    for (int i = 0; i < kTr; ++i)
      for (int j = 0; j < kTc; ++j) acc[i][j] += ak[i] * bk[j];
  }
  FinishTilePortable(acc, rows, cols, ep, c, ldc);
}

template <int kTr, int kTc>
void DirectTilePortable(const float* const* pixels, const int64_t* taps, int num_taps, int64_t kc, int64_t plane,
                        const float* b, int64_t b_tap, float* c, int64_t ldc, int rows, int cols, bool accumulate,
                        const TileEpilogue* ep) {
  float a[kTr] = {};
  float acc[kTr][kTc] = {};
  if (accumulate) LoadTilePortable(c, ldc, rows, cols, acc);
  for (int t = 0; t < num_taps; ++t)
    for (int64_t kk = 0; kk < kc; ++kk) {
      for (int i = 0; i < rows; ++i) a[i] = pixels[i][taps[t] + kk * plane];
      const float* bk = b + t * b_tap + kk * kTc;
      for (int i = 0; i < kTr; ++i)
        for (int j = 0; j < kTc; ++j) acc[i][j] += a[i] * bk[j];
    }
  FinishTilePortable(acc, rows, cols, ep, c, ldc);
}

// The bias of `count` rows or columns starting at `first`, zero padded to
// `width` in `pad` when the tile is cut short.
const float* PaddedBias(const float* bias, int64_t first, int count, int width, float* pad) {
  if (bias == nullptr) return nullptr;
  if (count == width) return bias + first;
  for (int i = 0; i < width; ++i) pad[i] = i < count ? bias[first + i] : 0.0f;
  return pad;
}

// The fused SiLU (GemmF32Args::silu) of a finished rows x cols block of C,
// each row while the tile's stores are still in L1; nothing without one.
void ApplySilu(const GemmF32Args& args, float* c, int64_t ldc, int64_t rows, int64_t cols) {
  if (args.silu == nullptr) return;
  for (int64_t i = 0; i < rows; ++i) args.silu(c + i * ldc, c + i * ldc, cols, true);
}

}  // namespace

// A run reads one input row at a fixed stride; its in-bounds part is copied
// in one go, the rest zero filled.
void PackConvStripPortable(const ConvGeometry& g, const float* image, const ConvStripRun* runs, int num_runs, int cols,
                           int64_t k0, int64_t kc, int tc, float* strip) {
  const int64_t window = g.kernel_h * g.kernel_w;
  int64_t c = k0 / window, ky = (k0 % window) / g.kernel_w, kx = k0 % g.kernel_w;
  for (int64_t kk = 0; kk < kc; ++kk) {
    float* dst = strip + kk * tc;
    if (kk > 0 && ++kx == g.kernel_w) {  // (c, ky, kx) of k0 + kk, counted up without dividing
      kx = 0;
      if (++ky == g.kernel_h) ky = 0, ++c;
    }
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

void PackRowsPanelPortable(const float* x, int64_t ld_x, int rows, int64_t kc, int tr, float* panel) {
  for (int i = 0; i < rows; ++i) {
    const float* row = x + i * ld_x;
    for (int64_t kk = 0; kk < kc; ++kk) panel[kk * tr + i] = row[kk];
  }
  for (int i = rows; i < tr; ++i)
    for (int64_t kk = 0; kk < kc; ++kk) panel[kk * tr + i] = 0.0f;
}

void StoreTransposedPortable(const float* tile, int64_t ldt, int rows, int cols, float* y, int64_t ld) {
  for (int j = 0; j < cols; ++j)
    for (int i = 0; i < rows; ++i) y[j * ld + i] = tile[i * ldt + j];
}

namespace {

// How many tasks a driver aims for: about kTasksPerThread per thread to
// balance several threads; one thread needs no split (each split repacks
// the activations it shares).
int64_t TaskTarget(const ThreadPool* pool) {
  const int64_t threads = pool != nullptr ? pool->num_threads() : 1;
  return threads > 1 ? kTasksPerThread * threads : 1;
}

// The k slice of a driver whose task packs `floats_per_k` activation floats
// per value of k: all of K when that fits `budget` floats (in L2), so that
// each weight panel or strip streams front to back instead of jumping
// between them every kKc; else kKc.
int64_t SliceFor(int64_t floats_per_k, int64_t k, int64_t budget) {
  return floats_per_k * k <= budget ? std::max<int64_t>(1, k) : kKc;
}

// The epilogue of the last k slice, without its bias pointers.
TileEpilogue BaseEpilogue(const GemmF32Args& args) {
  TileEpilogue ep;
  ep.clamp = args.out_min > -std::numeric_limits<float>::infinity() ||
             args.out_max < std::numeric_limits<float>::infinity();
  ep.lo = args.out_min, ep.hi = args.out_max;
  return ep;
}

// The tasks of a convolution driver: (image, group of strips_per_task strips,
// chunk of weight panels); panels are split too when images x strip groups
// alone would leave threads idle (one thread: one chunk, as each chunk packs
// the task's strips again). A group is kStripsPerTask strips, or up to
// `max_strips` when that takes in the whole plane.
struct ConvTasks {
  int64_t strips, strips_per_task, strip_groups, panels_per_chunk, chunks;

  ConvTasks(int64_t images, int64_t cols_total, int tc, int64_t panels, const ThreadPool* pool,
            int64_t max_strips = kStripsPerTask) {
    strips = (cols_total + tc - 1) / tc;
    strips_per_task = strips <= max_strips ? std::max<int64_t>(1, strips) : kStripsPerTask;
    strip_groups = (strips + strips_per_task - 1) / strips_per_task;
    const int64_t base_tasks = std::max<int64_t>(1, images * strip_groups);
    const int64_t panel_chunks =
        std::min<int64_t>(panels, std::max<int64_t>(1, (TaskTarget(pool) + base_tasks - 1) / base_tasks));
    panels_per_chunk = std::max<int64_t>(1, (panels + panel_chunks - 1) / std::max<int64_t>(1, panel_chunks));
    chunks = (panels + panels_per_chunk - 1) / panels_per_chunk;
  }
  int64_t count(int64_t images) const { return images * strip_groups * chunks; }
  // Task t: image, strips [s0, s1), panels [p0, p1).
  void Get(int64_t t, int64_t panels, int64_t* img, int64_t* s0, int64_t* s1, int64_t* p0, int64_t* p1) const {
    const int64_t chunk = t % chunks, group = (t / chunks) % strip_groups;
    *img = t / (chunks * strip_groups);
    *s0 = group * strips_per_task, *s1 = std::min(strips, *s0 + strips_per_task);
    *p0 = chunk * panels_per_chunk, *p1 = std::min(panels, *p0 + panels_per_chunk);
  }
};

// Convolutions: C = W [R, K] (panels) * im2col strips; C [R, P] is the NCHW output.
void ConvDriver(const GemmF32Args& args, const GemmF32Isa& isa) {
  const PackedGemmF32& w = *args.w;
  const int tr = isa.tile_rows, tc = isa.tile_cols;
  const int64_t images = args.batch;
  const int64_t cols_total = args.conv.out_size();
  const ConvGeometry& g = args.conv;
  // A 1x1 convolution's im2col is the image itself: full strips read it in place.
  const bool pointwise = g.kernel_h == 1 && g.kernel_w == 1 && g.stride_h == 1 && g.stride_w == 1 &&
                         g.pad_top == 0 && g.pad_left == 0 && g.out_h == g.height && g.out_w == g.width;
  // A pointwise plane of up to 8 strips (14 x 14: 196 pixels) is one task's:
  // the weights stream once per image, not once per group of 4 strips.
  const ConvTasks tasks(images, cols_total, tc, w.panels, args.pool, pointwise ? 2 * kStripsPerTask : kStripsPerTask);
  const TileEpilogue epilogue = BaseEpilogue(args);
  // The strips the task packs (pointwise: only a last, partial one).
  const int64_t packed = pointwise ? (cols_total % tc != 0 ? 1 : 0) : tasks.strips_per_task;
  const int64_t slice = SliceFor(packed * tc, w.k, 65536);

  ParallelFor(args.pool, tasks.count(images), 1, [&](int64_t t0, int64_t t1) {
    float* strips_buf = ThreadScratch(static_cast<size_t>(tasks.strips_per_task * slice * tc));
    for (int64_t t = t0; t < t1; ++t) {
      int64_t img, s0, s1, p0, p1;
      tasks.Get(t, w.panels, &img, &s0, &s1, &p0, &p1);
      const float* x = args.x + img * args.x_image_stride;
      float* y = args.y + img * args.y_image_stride;  // C[r][j] at y + r * cols_total + j
      for (int64_t k0 = 0; k0 < w.k; k0 += slice) {
        const int64_t kc = std::min(slice, w.k - k0);
        for (int64_t s = s0; s < s1; ++s) {
          const int cols = static_cast<int>(std::min<int64_t>(tc, cols_total - s * tc));
          if (pointwise && cols == tc) continue;  // read in place
          ConvStripRun runs[64];  // a strip has at most tc <= 64 columns
          const int num_runs = ConvStripRuns(args.conv, s * tc, cols, runs);
          isa.pack_conv_strip(args.conv, x, runs, num_runs, cols, k0, kc, tc, strips_buf + (s - s0) * slice * tc);
        }
        // Panel-major: each panel's rows of C are written across the task's
        // strips in one run (strips_per_task * tc floats per output row),
        // rather than tc floats into every output row of the task in turn;
        // the strips' slices are read from L2 once per panel. Measured on
        // EfficientNet-Lite0's 16 -> 96 1x1 on 112 x 112 (96 output rows of
        // 50 KiB): 0.54-0.76 ms -> 0.48-0.51 (CPU time); no shape slower
        // (bench/RESULTS.md, i14-g32).
        const bool last = k0 + kc == w.k;
        for (int64_t p = p0; p < p1; ++p) {
          const int rows = static_cast<int>(std::min<int64_t>(tr, w.rows - p * tr));
          float pad[64];
          TileEpilogue ep = epilogue;
          ep.row_bias = PaddedBias(args.bias, p * tr, rows, tr, pad);
          for (int64_t s = s0; s < s1; ++s) {
            const int cols = static_cast<int>(std::min<int64_t>(tc, cols_total - s * tc));
            const bool in_place = pointwise && cols == tc;
            const float* b = in_place ? x + k0 * cols_total + s * tc : strips_buf + (s - s0) * slice * tc;
            const int64_t ldb = in_place ? cols_total : tc;
            float* c = y + (p * tr) * cols_total + s * tc;
            isa.tile(kc, w.panel(p) + k0 * tr, b, ldb, c, cols_total, rows, cols, k0 > 0, last ? &ep : nullptr);
            if (last) ApplySilu(args, c, cols_total, rows, cols);
          }
        }
      }
      if (w.k == 0) {  // no slice ran: C = clamp(bias)
        const int64_t r0 = p0 * tr, r1 = std::min(w.rows, p1 * tr);
        const int64_t j0 = s0 * tc, j1 = std::min(cols_total, s1 * tc);
        float* c = y + r0 * cols_total + j0;
        for (int64_t i = 0; i < r1 - r0; ++i) std::fill(c + i * cols_total, c + i * cols_total + (j1 - j0), 0.0f);
        Epilogue(args.bias != nullptr ? args.bias + r0 : nullptr, 1, 0, args.out_min, args.out_max, c, cols_total,
                 r1 - r0, j1 - j0);
        ApplySilu(args, c, cols_total, r1 - r0, j1 - j0);
      }
    }
  });
}

// MatMul / Gemm: Y [M, N] = X [M, K] (packed per call into panels of
// tile_rows rows) * W^T (strips of tile_cols output columns, packed once):
// the tile writes whole rows of Y.
void RowsDriver(const GemmF32Args& args, const GemmF32Isa& isa) {
  const PackedGemmF32& w = *args.w;  // strips: w.panel(s) = columns [s * tc, (s + 1) * tc) of W^T
  const int tr = isa.tile_rows, tc = isa.tile_cols;
  const int64_t x_panels = (args.m + tr - 1) / tr;
  // Up to 8 panels (a 64-token sequence) go to one task, so that the weights
  // stream once (as kPointwiseConv's panels; one thread: one chunk).
  const int64_t per_task = x_panels <= 2 * kPanelsPerTask ? std::max<int64_t>(1, x_panels) : kPanelsPerTask;
  const int64_t panel_groups = (x_panels + per_task - 1) / per_task;
  const int64_t strip_chunks = std::min<int64_t>(
      w.panels, std::max<int64_t>(1, (TaskTarget(args.pool) + panel_groups - 1) / std::max<int64_t>(1, panel_groups)));
  const int64_t strips_per_chunk = (w.panels + strip_chunks - 1) / strip_chunks;
  const int64_t chunks = (w.panels + strips_per_chunk - 1) / strips_per_chunk;
  const TileEpilogue epilogue = BaseEpilogue(args);
  // The task's row panels in one slice up to 512 KiB (a batch-1
  // classifier's one panel, a 64-token sequence).
  const int64_t slice = SliceFor(per_task * tr, w.k, 131072);
  const uint64_t call = PackingCall(slice >= w.k);

  ParallelFor(args.pool, panel_groups * chunks, 1, [&](int64_t t0, int64_t t1) {
    float* panels_buf = ThreadScratch(static_cast<size_t>(per_task * slice * tr));
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t chunk = t % chunks, group = t / chunks;
      const int64_t q0 = group * per_task, q1 = std::min(x_panels, q0 + per_task);
      const int64_t s0 = chunk * strips_per_chunk, s1 = std::min(w.panels, s0 + strips_per_chunk);
      const bool packed = AlreadyPacked(call, group);
      for (int64_t k0 = 0; k0 < w.k; k0 += slice) {
        const int64_t kc = std::min(slice, w.k - k0);
        for (int64_t q = q0; q < q1 && !packed; ++q) {  // panel[kk * tr + i] = X[q * tr + i][k0 + kk]
          const int rows = static_cast<int>(std::min<int64_t>(tr, args.m - q * tr));
          isa.pack_rows_panel(args.x + (q * tr) * args.ld_x + k0, args.ld_x, rows, kc, tr,
                              panels_buf + (q - q0) * slice * tr);
        }
        const bool last = k0 + kc == w.k;
        for (int64_t s = s0; s < s1; ++s) {
          const int cols = static_cast<int>(std::min<int64_t>(tc, w.rows - s * tc));
          const float* b = w.panel(s) + k0 * tc;
          float pad[64];
          TileEpilogue ep = epilogue;
          ep.col_bias = PaddedBias(args.bias, s * tc, cols, tc, pad);
          for (int64_t q = q0; q < q1; ++q) {
            const int rows = static_cast<int>(std::min<int64_t>(tr, args.m - q * tr));
            float* c = args.y + (q * tr) * args.ld_y + s * tc;
            isa.tile(kc, panels_buf + (q - q0) * slice * tr, b, tc, c, args.ld_y, rows, cols, k0 > 0,
                     last ? &ep : nullptr);
            if (last) ApplySilu(args, c, args.ld_y, rows, cols);
          }
        }
      }
      if (w.k == 0) {  // no slice ran: C = clamp(bias)
        const int64_t r0 = q0 * tr, r1 = std::min(args.m, q1 * tr);
        const int64_t j0 = s0 * tc, j1 = std::min(w.rows, s1 * tc);
        float* c = args.y + r0 * args.ld_y + j0;
        for (int64_t i = 0; i < r1 - r0; ++i) std::fill(c + i * args.ld_y, c + i * args.ld_y + (j1 - j0), 0.0f);
        Epilogue(args.bias != nullptr ? args.bias + j0 : nullptr, 0, 1, args.out_min, args.out_max, c, args.ld_y,
                 r1 - r0, j1 - j0);
        ApplySilu(args, c, args.ld_y, r1 - r0, j1 - j0);
      }
    }
  });
}

// Pointwise convolutions, pixels as rows: per image, C^T [P, R] = X^T [P, K]
// * W^T with X^T[p][k] = x[k * P + p]. A task owns a few panels of tile_rows
// pixels and a chunk of weight strips; per slice of kKc values of k it packs
// its panels (panel[kk * tr + i] = pixel i's channel k0 + kk, zero past the
// plane) and runs the tile on every (strip, panel) pair into the task's
// pixels x channels block, summing in k order slice after slice as kConv
// does (the same bits), then stores the block transposed into NCHW.
void PointwiseDriver(const GemmF32Args& args, const GemmF32Isa& isa) {
  const PackedGemmF32& w = *args.w;  // strips: w.panel(s) = output channels [s * tc, (s + 1) * tc)
  const int tr = isa.tile_rows, tc = isa.tile_cols;
  const int64_t pixels = args.conv.out_size();
  const int64_t x_panels = (pixels + tr - 1) / tr;
  // A small plane's panels go to one task (7 x 7: 7 panels of 8): split in
  // groups, each group streamed all of the weights again, from L3 on
  // EfficientNet's 1152 x 192 layers (0.26 against 0.21 ms in onnxruntime).
  const int64_t per_task = x_panels <= 2 * kPanelsPerTask ? x_panels : kPanelsPerTask;
  const int64_t panel_groups = (x_panels + per_task - 1) / per_task;
  const int64_t base_tasks = args.batch * panel_groups;
  const int64_t strip_chunks =
      std::min<int64_t>(w.panels, std::max<int64_t>(1, (TaskTarget(args.pool) + base_tasks - 1) / base_tasks));
  const int64_t strips_per_chunk = (w.panels + strip_chunks - 1) / strip_chunks;
  const int64_t chunks = (w.panels + strips_per_chunk - 1) / strips_per_chunk;
  const int64_t ld_block = strips_per_chunk * tc;  // the task's block: [per_task * tr, ld_block]
  const TileEpilogue epilogue = BaseEpilogue(args);
  const int64_t slice = SliceFor(per_task * tr, w.k, 65536);  // the task's pixel panels up to 256 KiB
  const uint64_t call = PackingCall(slice >= w.k);

  ParallelFor(args.pool, base_tasks * chunks, 1, [&](int64_t t0, int64_t t1) {
    const size_t panel_floats = static_cast<size_t>(slice * tr);
    float* scratch = ThreadScratch(per_task * (panel_floats + tr * ld_block));
    float* panels_buf = scratch;
    float* block = scratch + per_task * panel_floats;
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t chunk = t % chunks, group = (t / chunks) % panel_groups, img = t / (chunks * panel_groups);
      const int64_t q0 = group * per_task, q1 = std::min(x_panels, q0 + per_task);
      const int64_t s0 = chunk * strips_per_chunk, s1 = std::min(w.panels, s0 + strips_per_chunk);
      const float* x = args.x + img * args.x_image_stride;
      float* y = args.y + img * args.y_image_stride;
      const bool packed = AlreadyPacked(call, t / chunks);  // (image, group)
      int64_t k0 = 0;
      do {  // at least once: K = 0 gives C = clamp(bias)
        const int64_t kc = std::min(slice, w.k - k0);
        for (int64_t q = q0; q < q1 && !packed; ++q) {
          float* panel = panels_buf + (q - q0) * panel_floats;
          const int rows = static_cast<int>(std::min<int64_t>(tr, pixels - q * tr));
          const float* src = x + k0 * pixels + q * tr;
          if (rows == 8 && tr == 8) {  // the AVX-512 tile's panels: a fixed-size copy, inlined
            for (int64_t kk = 0; kk < kc; ++kk) std::memcpy(panel + kk * 8, src + kk * pixels, 8 * sizeof(float));
            continue;
          }
          for (int64_t kk = 0; kk < kc; ++kk)
            for (int i = 0; i < tr; ++i) panel[kk * tr + i] = i < rows ? src[kk * pixels + i] : 0.0f;
        }
        const bool last = k0 + kc >= w.k;
        for (int64_t s = s0; s < s1; ++s) {
          const int cols = static_cast<int>(std::min<int64_t>(tc, w.rows - s * tc));
          float pad[64];
          TileEpilogue ep = epilogue;
          ep.col_bias = PaddedBias(args.bias, s * tc, cols, tc, pad);
          for (int64_t q = q0; q < q1; ++q) {
            const int rows = static_cast<int>(std::min<int64_t>(tr, pixels - q * tr));
            float* c = block + (q - q0) * tr * ld_block + (s - s0) * tc;
            isa.tile(kc, panels_buf + (q - q0) * panel_floats, w.panel(s) + k0 * tc, tc, c, ld_block, rows, tc, k0 > 0,
                     last ? &ep : nullptr);
            if (last) ApplySilu(args, c, ld_block, rows, cols);
          }
        }
        k0 += kc;
      } while (k0 < w.k);
      for (int64_t s = s0; s < s1; ++s) {
        const int cols = static_cast<int>(std::min<int64_t>(tc, w.rows - s * tc));
        for (int64_t q = q0; q < q1; ++q) {
          const int rows = static_cast<int>(std::min<int64_t>(tr, pixels - q * tr));
          isa.store_transposed(block + (q - q0) * tr * ld_block + (s - s0) * tc, ld_block, rows, cols,
                               y + (s * tc) * pixels + q * tr, pixels);
        }
      }
    }
  });
}

// Stride-1 convolutions without im2col: each image is copied once into a
// zero-padded plane per channel [hp, wp] (hp = h + pad_top + pad_bottom, wp
// likewise), and the output is computed on the padded width: C [R, out_h * wp],
// whose column oy * wp + ox (ox < out_w) is the output pixel (oy, ox). Tap
// (ky, kx) then reads, for every column, the padded plane at that column plus
// ky * dh * wp + kx * dw: a B strip is the plane itself at an offset (ldb =
// the plane's size), read in place. Columns ox >= out_w read past their row
// (or past the last plane, into the buffer's zero tail) and are dropped when
// the output is copied to NCHW.
void ShiftedConvGroup(const GemmF32Args& args, const GemmF32Isa& isa) {
  const PackedGemmF32& w = *args.w;
  const ConvGeometry& g = args.conv;
  const int tr = isa.tile_rows, tc = isa.tile_cols;
  const int64_t hp = g.height + g.pad_top + g.pad_bottom, wp = g.width + g.pad_left + g.pad_right;
  const int64_t plane = hp * wp, taps = g.kernel_h * g.kernel_w, channels = g.channels;
  const int64_t cols_total = g.out_h * wp;  // virtual output columns per image
  const int64_t images = args.batch;
  const int64_t image_size = channels * plane;
  // Zero tail: the last strip of the last plane reads up to one strip and one
  // window width past the plane.
  const int64_t tail = tc + (g.kernel_h - 1) * g.dilation_h * wp + (g.kernel_w - 1) * g.dilation_w + tc;
  Tensor padded(DataType::kFloat32, {images * image_size + tail});  // zeroed: the padding
  // Every tile of the virtual output is stored: no zero fill needed.
  Tensor virtual_out = Tensor::Uninitialized(DataType::kFloat32, {images * w.rows * cols_total});
  float* xp = padded.data<float>();
  float* yv = virtual_out.data<float>();
  ParallelFor(args.pool, images * channels, 4, [&](int64_t c0, int64_t c1) {
    for (int64_t ic = c0; ic < c1; ++ic) {
      const int64_t img = ic / channels, c = ic % channels;
      const float* src = args.x + img * args.x_image_stride + c * g.height * g.width;
      float* dst = xp + ic * plane + g.pad_top * wp + g.pad_left;
      for (int64_t y = 0; y < g.height; ++y) std::memcpy(dst + y * wp, src + y * g.width, sizeof(float) * g.width);
    }
  });

  const ConvTasks tasks(images, cols_total, tc, w.panels, args.pool);
  const TileEpilogue epilogue = BaseEpilogue(args);
  std::vector<int64_t> tap_offsets(static_cast<size_t>(taps));
  for (int64_t tap = 0; tap < taps; ++tap)
    tap_offsets[tap] = (tap / g.kernel_w) * g.dilation_h * wp + (tap % g.kernel_w) * g.dilation_w;
  ParallelFor(args.pool, tasks.count(images), 1, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      int64_t img, s0, s1, p0, p1;
      tasks.Get(t, w.panels, &img, &s0, &s1, &p0, &p1);
      const float* x = xp + img * image_size;
      float* y = yv + img * w.rows * cols_total;
      if (isa.shifted_tile != nullptr) {
        // Every tap of a channel slice in registers: the accumulators are
        // loaded and stored once per slice, not once per tap.
        for (int64_t c0 = 0; c0 < channels; c0 += kKc) {
          const int64_t kc = std::min(kKc, channels - c0);
          const bool last = c0 + kc == channels;
          for (int64_t p = p0; p < p1; ++p) {
            const int rows = static_cast<int>(std::min<int64_t>(tr, w.rows - p * tr));
            float pad[64];
            TileEpilogue ep = epilogue;
            ep.row_bias = PaddedBias(args.bias, p * tr, rows, tr, pad);
            for (int64_t s = s0; s < s1; ++s) {
              const int cols = static_cast<int>(std::min<int64_t>(tc, cols_total - s * tc));
              float* c = y + (p * tr) * cols_total + s * tc;
              isa.shifted_tile(w.panel(p) + c0 * tr, channels * tr, x + c0 * plane + s * tc, tap_offsets.data(),
                               static_cast<int>(taps), kc, plane, c, cols_total, rows, cols, c0 > 0,
                               last ? &ep : nullptr);
              if (last) ApplySilu(args, c, cols_total, rows, cols);
            }
          }
        }
        continue;
      }
      for (int64_t tap = 0; tap < taps; ++tap) {
        const int64_t offset = (tap / g.kernel_w) * g.dilation_h * wp + (tap % g.kernel_w) * g.dilation_w;
        for (int64_t c0 = 0; c0 < channels; c0 += kKc) {
          const int64_t kc = std::min(kKc, channels - c0), k0 = tap * channels + c0;
          const bool first = k0 == 0, last = k0 + kc == w.k;
          for (int64_t s = s0; s < s1; ++s) {
            const int cols = static_cast<int>(std::min<int64_t>(tc, cols_total - s * tc));
            const float* b = x + c0 * plane + offset + s * tc;
            for (int64_t p = p0; p < p1; ++p) {
              const int rows = static_cast<int>(std::min<int64_t>(tr, w.rows - p * tr));
              float pad[64];
              TileEpilogue ep = epilogue;
              ep.row_bias = PaddedBias(args.bias, p * tr, rows, tr, pad);
              float* c = y + (p * tr) * cols_total + s * tc;
              isa.tile(kc, w.panel(p) + k0 * tr, b, plane, c, cols_total, rows, cols, !first, last ? &ep : nullptr);
              if (last) ApplySilu(args, c, cols_total, rows, cols);
            }
          }
        }
      }
    }
  });
  // Virtual [R, out_h, wp] -> NCHW [R, out_h, out_w].
  ParallelFor(args.pool, images * w.rows, 16, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t img = r / w.rows, ch = r % w.rows;
      const float* src = yv + r * cols_total;
      float* dst = args.y + img * args.y_image_stride + ch * g.out_size();
      for (int64_t oy = 0; oy < g.out_h; ++oy) std::memcpy(dst + oy * g.out_w, src + oy * wp, sizeof(float) * g.out_w);
    }
  });
}


void ShiftedConvDriver(const GemmF32Args& args, const GemmF32Isa& isa) {
  const PackedGemmF32& w = *args.w;
  if (w.k == 0) return ConvDriver(args, isa);  // no tap: C = clamp(bias), whatever the K order
  const ConvGeometry& g = args.conv;
  const int64_t hp = g.height + g.pad_top + g.pad_bottom, wp = g.width + g.pad_left + g.pad_right;
  const int64_t per_image = 4 * (g.channels * hp * wp + w.rows * g.out_h * wp);
  const int64_t group = std::max<int64_t>(1, args.workspace_bytes / std::max<int64_t>(1, per_image));
  for (int64_t img0 = 0; img0 < args.batch; img0 += group) {
    GemmF32Args part = args;
    part.batch = std::min(group, args.batch - img0);
    part.x = args.x + img0 * args.x_image_stride;
    part.y = args.y + img0 * args.y_image_stride;
    ShiftedConvGroup(part, isa);
  }
}

// Convolutions with pixels as the tile's rows, read in place (kDirectConv):
// per image, C^T [P, R] = im2col(x)^T [P, K] * W^T with K in (ky, kx, c)
// order, where im2col(x)^T[p][(t, c)] = xp[c * plane + base(p) + offset(t)]
// on the image xp zero padded so that every window is inside it:
//
//   padded plane (hp x wp)             pixel p = (oy, ox): base = oy * sh * wp + ox * sw
//   +----------------------+           tap t = (ky, kx):   offset = ky * dh * wp + kx * dw
//   |  pad_top rows of 0   |           channel c:          + c * plane
//   |   +--------------+   |
//   | 0 |    image     | 0 |           A tile row i of a panel of 8 pixels is pixel i's
//   |   +--------------+   |           window: broadcast from xp, never packed.
//   +----------------------+
//
// The tile sums every tap of a slice of kDirectKc channels in registers (one
// load and store of the accumulators per slice, not per tap as kShiftedConv),
// and needs no gather for strides > 1, where kConv packs im2col strips. A task
// owns a few panels of tile_rows pixels and a chunk of weight strips, and
// stores its pixels x channels block transposed into NCHW as
// kPointwiseConv does. Each output is summed by one task in a fixed order:
// channel slices in order, taps in order within one, channels in order within
// a tap.
constexpr int64_t kDirectKc = 64;  // channels per slice: a strip's slice of 9 taps is 72 KiB, in L2
constexpr int64_t kDirectGroupBytes = int64_t{2} << 20;  // padded planes per group of images: both cores' L2
constexpr int64_t kDirectImageTaskBytes = int64_t{4} << 20;  // largest padded image of a per-image task's own buffer

void DirectConvDriver(const GemmF32Args& args, const GemmF32Isa& isa) {
  const PackedGemmF32& w = *args.w;  // strips: output channels [s * tc, (s + 1) * tc), K in (ky, kx, c) order
  const ConvGeometry& g = args.conv;
  const int tr = isa.tile_rows, tc = isa.tile_cols;
  DirectTileFn direct_tile = isa.direct_tile;
  if (direct_tile == nullptr) {
    direct_tile = tr == 8 ? DirectTilePortable<8, 32> : tr == 6 ? DirectTilePortable<6, 16> : DirectTilePortable<4, 8>;
  }
  // The padded image: every window of every output pixel inside it.
  const int64_t hp = std::max(g.pad_top + g.height, (g.out_h - 1) * g.stride_h + (g.kernel_h - 1) * g.dilation_h + 1);
  const int64_t wp = std::max(g.pad_left + g.width, (g.out_w - 1) * g.stride_w + (g.kernel_w - 1) * g.dilation_w + 1);
  const bool in_place = g.pad_top == 0 && g.pad_left == 0 && hp == g.height && wp == g.width;
  const int64_t plane = hp * wp, channels = g.channels;
  const int num_taps = static_cast<int>(g.kernel_h * g.kernel_w);
  std::vector<int64_t> taps(static_cast<size_t>(num_taps));
  for (int t = 0; t < num_taps; ++t)
    taps[t] = (t / g.kernel_w) * g.dilation_h * wp + (t % g.kernel_w) * g.dilation_w;
  const int64_t b_tap = channels * tc;  // a strip's floats per tap

  const int64_t pixels = g.out_size();
  const int64_t x_panels = (pixels + tr - 1) / tr;
  const int64_t panel_groups = (x_panels + kPanelsPerTask - 1) / kPanelsPerTask;
  // Images run in groups whose padded planes fit kDirectGroupBytes: one
  // ParallelFor pads a group and one computes it, so a batch of small planes
  // (YOLOv8n's 20 x 20 and 10 x 10 layers at batch 16) is split over the
  // threads as a whole, not image by image in tasks too few to balance, with
  // two waits per image. A large plane (more than the budget) is a group of
  // one, as is every image on one thread (each padded image still in L2 when
  // it is read: grouping measured 4% slower there). Measured, YOLOv8n at
  // batch 16, 2 threads: these layers 1.10x -> 1.47x their 1-thread speed
  // (bench/RESULTS.md, scale22).
  const int64_t threads = args.pool != nullptr ? args.pool->num_threads() : 1;
  const int64_t image_bytes = static_cast<int64_t>(sizeof(float)) * channels * plane;
  // A batch that splits evenly over the threads runs one task per image
  // instead (a padded image up to kDirectImageTaskBytes): the task pads its
  // image into its own thread's buffer and computes every output of it, so
  // the image is padded and read on one core, and a layer is one ParallelFor
  // of equal tasks. Measured, YOLOv8n at batch 16 on 2 threads: the groups'
  // parallel padding took 6x its 1-thread CPU time (about 45 ms of a 260 ms
  // batch); per image it is part of the tasks' time (bench/RESULTS.md, yolo22).
  const bool per_image = threads > 1 && image_bytes <= kDirectImageTaskBytes && args.batch >= threads &&
                         (args.batch % threads == 0 || args.batch >= 4 * threads);
  const int64_t group_images =
      threads == 1 || per_image
          ? 1
          : std::min<int64_t>(std::max<int64_t>(1, args.batch),
                              std::max<int64_t>(1, kDirectGroupBytes / std::max<int64_t>(1, image_bytes)));
  const int64_t group_tasks = group_images * panel_groups;
  const int64_t strip_chunks =
      per_image ? 1
                : std::min<int64_t>(w.panels,
                                    std::max<int64_t>(1, (kTasksPerThread * threads + group_tasks - 1) / group_tasks));
  const int64_t strips_per_chunk = (w.panels + strip_chunks - 1) / strip_chunks;
  const int64_t chunks = (w.panels + strips_per_chunk - 1) / strips_per_chunk;
  const int64_t ld_block = strips_per_chunk * tc;  // the task's block: [kPanelsPerTask * tr, ld_block]
  const TileEpilogue epilogue = BaseEpilogue(args);
  const int64_t pad_right = wp - g.pad_left - g.width, pad_bottom = hp - g.pad_top - g.height;

  // Image `image` of x (batch image stride x_image_stride) into xp, zero padded;
  // only the border is zeroed (a zeroed tensor wrote the whole plane twice:
  // YOLOv8n's 16 x 160 x 160 input, 1.6 MiB more per call). Channels [c0, c1).
  auto pad_channels = [&](const float* x, int64_t c0, int64_t c1, float* xp) {
    for (int64_t c = c0; c < c1; ++c) {
      float* dst = xp + c * plane;
      const float* src = x + c * g.height * g.width;
      std::fill(dst, dst + g.pad_top * wp, 0.0f);
      for (int64_t iy = 0; iy < g.height; ++iy) {
        float* row = dst + (g.pad_top + iy) * wp;
        std::fill(row, row + g.pad_left, 0.0f);
        std::memcpy(row + g.pad_left, src + iy * g.width, sizeof(float) * g.width);
        std::fill(row + g.pad_left + g.width, row + g.pad_left + g.width + pad_right, 0.0f);
      }
      std::fill(dst + (g.pad_top + g.height) * wp, dst + (g.pad_top + g.height + pad_bottom) * wp, 0.0f);
    }
  };
  // One task: panel group `group`, strip chunk `chunk` of the (padded) image
  // x_img into output image y, through the thread's block.
  auto run_task = [&](const float* x_img, float* y, int64_t group, int64_t chunk, float* block) {
    const int64_t q0 = group * kPanelsPerTask, q1 = std::min(x_panels, q0 + kPanelsPerTask);
    const int64_t s0 = chunk * strips_per_chunk, s1 = std::min(w.panels, s0 + strips_per_chunk);
    const float* base[kPanelsPerTask][8];  // each panel's pixels at channel 0, tap (0, 0)
    for (int64_t q = q0; q < q1; ++q) {
      for (int i = 0; i < tr; ++i) {
        const int64_t p = std::min(pixels - 1, q * tr + i), oy = p / g.out_w, ox = p % g.out_w;
        base[q - q0][i] = x_img + oy * g.stride_h * wp + ox * g.stride_w;
      }
    }
    int64_t c0 = 0;
    do {  // at least once: no channels gives C = clamp(bias)
      const int64_t kc = std::min(kDirectKc, channels - c0);
      const bool last = c0 + kc >= channels;
      for (int64_t s = s0; s < s1; ++s) {
        const int cols = static_cast<int>(std::min<int64_t>(tc, w.rows - s * tc));
        float pad[64];
        TileEpilogue ep = epilogue;
        ep.col_bias = PaddedBias(args.bias, s * tc, cols, tc, pad);
        for (int64_t q = q0; q < q1; ++q) {
          const int rows = static_cast<int>(std::min<int64_t>(tr, pixels - q * tr));
          const float* at[8];
          for (int i = 0; i < tr; ++i) at[i] = base[q - q0][i] + c0 * plane;
          float* c = block + (q - q0) * tr * ld_block + (s - s0) * tc;
          direct_tile(at, taps.data(), num_taps, kc, plane, w.panel(s) + c0 * tc, b_tap, c, ld_block, rows, tc,
                      c0 > 0, last ? &ep : nullptr);
        }
      }
      c0 += kc;
    } while (c0 < channels);
    // The fused SiLU on each panel's rows at once (the block's columns
    // past the last strip hold the tiles' zero-weight sums: harmless).
    const int64_t used = (s1 - s0) * tc;
    for (int64_t q = q0; q < q1; ++q) {
      const int rows = static_cast<int>(std::min<int64_t>(tr, pixels - q * tr));
      float* c = block + (q - q0) * tr * ld_block;
      if (used == ld_block) {
        ApplySilu(args, c, ld_block * rows, 1, ld_block * rows);
      } else {
        ApplySilu(args, c, ld_block, rows, used);
      }
    }
    for (int64_t s = s0; s < s1; ++s) {
      const int cols = static_cast<int>(std::min<int64_t>(tc, w.rows - s * tc));
      for (int64_t q = q0; q < q1; ++q) {
        const int rows = static_cast<int>(std::min<int64_t>(tr, pixels - q * tr));
        isa.store_transposed(block + (q - q0) * tr * ld_block + (s - s0) * tc, ld_block, rows, cols,
                             y + (s * tc) * pixels + q * tr, pixels);
      }
    }
  };
  const size_t block_floats = static_cast<size_t>(kPanelsPerTask * tr * ld_block);

  if (per_image) {
    ParallelFor(args.pool, args.batch, 1, [&](int64_t i0, int64_t i1) {
      float* block = ThreadScratch(block_floats + (in_place ? 0 : static_cast<size_t>(channels * plane)));
      float* xp = block + block_floats;
      for (int64_t image = i0; image < i1; ++image) {
        const float* x_img = args.x + image * args.x_image_stride;
        if (!in_place) {
          pad_channels(x_img, 0, channels, xp);
          x_img = xp;
        }
        for (int64_t group = 0; group < panel_groups; ++group)
          run_task(x_img, args.y + image * args.y_image_stride, group, 0, block);
      }
    });
    return;
  }

  Tensor padded = in_place ? Tensor() : Tensor::Uninitialized(DataType::kFloat32, {group_images * channels * plane});
  for (int64_t img0 = 0; img0 < args.batch; img0 += group_images) {
    const int64_t images = std::min(group_images, args.batch - img0);
    // Image i of the group (padded or in place) at x + i * x_stride.
    const float* x = args.x + img0 * args.x_image_stride;
    int64_t x_stride = args.x_image_stride;
    if (!in_place) {
      float* xp = padded.data<float>();
      const float* group_x = x;
      ParallelFor(args.pool, images * channels, 4, [&](int64_t c0, int64_t c1) {
        for (int64_t ic = c0; ic < c1;) {  // runs of channels of one image
          const int64_t i = ic / channels, c = ic % channels, end = std::min(c1, (i + 1) * channels);
          pad_channels(group_x + i * args.x_image_stride, c, c + (end - ic), xp + i * channels * plane);
          ic = end;
        }
      });
      x = xp;
      x_stride = channels * plane;
    }
    ParallelFor(args.pool, images * panel_groups * chunks, 1, [&](int64_t t0, int64_t t1) {
      float* block = ThreadScratch(block_floats);
      for (int64_t t = t0; t < t1; ++t) {
        const int64_t chunk = t % chunks, group = (t / chunks) % panel_groups, image = t / (chunks * panel_groups);
        run_task(x + image * x_stride, args.y + (img0 + image) * args.y_image_stride, group, chunk, block);
      }
    });
  }
}

}  // namespace

void GemmF32Driver(const GemmF32Args& args, const GemmF32Isa& isa) {
  switch (args.source) {
    case GemmF32Source::kConv: ConvDriver(args, isa); return;
    case GemmF32Source::kShiftedConv: ShiftedConvDriver(args, isa); return;
    case GemmF32Source::kRows: RowsDriver(args, isa); return;
    case GemmF32Source::kPointwiseConv: PointwiseDriver(args, isa); return;
    case GemmF32Source::kDirectConv: DirectConvDriver(args, isa); return;
  }
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
