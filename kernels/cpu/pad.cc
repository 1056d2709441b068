// Pad as row copies (kernel "pad_copy"), opset 11+, modes constant, edge and
// reflect: the output without its zero fill (OpContext::OutputBuffer, so a
// memory plan places it), the dimensions after the last padded one merged
// into one wider element, and each output row written once: its left
// padding, the input row in one memcpy, its right padding.
//
//   reflect, pads (2, 3) on a row [a b c d]:   c b | a b c d | c b a
//   edge:                                     a a | a b c d | d d d
//   constant v:                               v v | a b c d | v v v
//
// An outer (not last) padded dimension maps each output index to an input
// row the same way, or to a row of the constant. The reference kernel
// (kernels/ref/tensor_copy_ops.cc) built a source index per output element
// (a modulo each for reflect) and zero-filled its output first: basic-pitch's
// reflect pad of 43,844 samples took ~300 us there (bench/RESULTS.md, small22).
// A copy: the reference's bytes. Nodes outside this path run the reference
// kernel, which also names their errors: negative pads (crops), wrap mode,
// opset 18's axes input, a constant of another type, reflect pads as wide as
// the dimension (they bounce), edge / reflect of an empty dimension.
// Rows are split among the threads; each byte is written by one of them.
#include <algorithm>
#include <cstring>
#include <vector>

#include "kernels/parallel.h"
#include "kernels/ref/tensor_util.h"
#include "kernels/registry.h"

namespace sparq {
namespace {

enum class Mode { kConstant, kEdge, kReflect };

constexpr int64_t kBytesPerTask = int64_t{1} << 14;  // rows below this share a task
constexpr int kMaxRank = 8;                          // higher ranks: the reference

// The input index output index `o` of a dimension of `n` reads, or -1 for
// the constant (pads below n for reflect, so one bounce).
inline int64_t SourceIndex(Mode mode, int64_t o, int64_t begin, int64_t n) {
  const int64_t i = o - begin;
  if (i >= 0 && i < n) return i;
  switch (mode) {
    case Mode::kConstant: return -1;
    case Mode::kEdge: return i < 0 ? 0 : n - 1;
    case Mode::kReflect: return i < 0 ? -i : 2 * (n - 1) - i;
  }
  return -1;
}

// One output row of `out_n` elements of `w` values of T each from the input
// row `src` of `n` elements (null: every element the constant), `begin`
// elements of padding first.
template <typename T>
void PadRow(Mode mode, const T* src, int64_t n, int64_t begin, int64_t out_n, int64_t w, const T* value, T* dst) {
  const int64_t end = out_n - begin - n;
  if (src == nullptr) {
    std::fill(dst, dst + out_n * w, *value);
    return;
  }
  if (n > 0) std::memcpy(dst + begin * w, src, static_cast<size_t>(n * w) * sizeof(T));
  T* right = dst + (begin + n) * w;
  if (mode == Mode::kConstant) {
    std::fill(dst, dst + begin * w, *value);
    std::fill(right, right + end * w, *value);
  } else if (w == 1) {
    if (mode == Mode::kEdge) {
      std::fill(dst, dst + begin, src[0]);
      std::fill(right, right + end, src[n - 1]);
    } else {  // out[j] = src[begin - j], out[begin + n + j] = src[n - 2 - j]
      for (int64_t j = 0; j < begin; ++j) dst[j] = src[begin - j];
      for (int64_t j = 0; j < end; ++j) right[j] = src[n - 2 - j];
    }
  } else {
    const size_t bytes = static_cast<size_t>(w) * sizeof(T);
    for (int64_t j = 0; j < begin; ++j)
      std::memcpy(dst + j * w, src + (mode == Mode::kEdge ? 0 : begin - j) * w, bytes);
    for (int64_t j = 0; j < end; ++j)
      std::memcpy(right + j * w, src + (mode == Mode::kEdge ? n - 1 : n - 2 - j) * w, bytes);
  }
}

// The rows of the padded tensor, merged as described above.
struct Layout {
  Mode mode = Mode::kConstant;
  int rank = 0;                  // dimensions left after merging the trailing unpadded ones
  int64_t in[kMaxRank] = {};     // input dimensions
  int64_t out[kMaxRank] = {};    // output dimensions
  int64_t begin[kMaxRank] = {};  // padding in front
  int64_t w = 1;                 // values of the element type per merged element
};

template <typename T>
void PadRows(const Layout& l, const void* x_bytes, const uint8_t* value_bytes, void* y_bytes, ThreadPool* pool) {
  const T* x = static_cast<const T*>(x_bytes);
  T* y = static_cast<T*>(y_bytes);
  T value_t;
  std::memcpy(&value_t, value_bytes, sizeof(T));
  const T* value = &value_t;
  const int r = l.rank;
  const int64_t n = l.in[r - 1], out_n = l.out[r - 1];
  int64_t rows = 1;
  for (int d = 0; d + 1 < r; ++d) rows *= l.out[d];
  const int64_t row_bytes = std::max<int64_t>(1, out_n * l.w * static_cast<int64_t>(sizeof(T)));
  ParallelFor(pool, rows, std::max<int64_t>(1, kBytesPerTask / row_bytes), [&](int64_t r0, int64_t r1) {
    int64_t idx[kMaxRank] = {};  // the output row's index over dimensions [0, r - 1)
    for (int64_t rest = r0, d = r - 2; d >= 0; --d) {
      idx[d] = rest % l.out[d];
      rest /= l.out[d];
    }
    for (int64_t row = r0; row < r1; ++row) {
      int64_t offset = 0;  // the input row, in rows of n elements
      bool constant = false;
      for (int d = 0; d + 1 < r; ++d) {
        const int64_t s = SourceIndex(l.mode, idx[d], l.begin[d], l.in[d]);
        constant = constant || s < 0;
        offset = offset * l.in[d] + s;
      }
      const T* src = constant ? nullptr : x + offset * n * l.w;
      PadRow(l.mode, src, n, l.begin[r - 1], out_n, l.w, value, y + row * out_n * l.w);
      for (int d = r - 2; d >= 0; --d) {  // the next row's index
        if (++idx[d] < l.out[d]) break;
        idx[d] = 0;
      }
    }
  });
}

Status PadCopy(OpContext& ctx) {
  if (!ctx.has_input(0) || !ctx.has_input(1) || ctx.has_input(3)) return RunReferenceKernel(ctx);
  const Tensor& x = ctx.input(0);
  const Tensor& pads = ctx.input(1);
  const int64_t rank = static_cast<int64_t>(x.rank());
  const size_t esize = DataTypeSize(x.dtype());
  if (rank == 0 || rank > kMaxRank || pads.dtype() != DataType::kInt64 || pads.numel() != 2 * rank ||
      (esize != 1 && esize != 2 && esize != 4 && esize != 8)) {
    return RunReferenceKernel(ctx);
  }
  Layout l;
  const Attribute* mode = ctx.node().attr("mode");
  if (mode != nullptr && mode->kind == Attribute::Kind::kString && mode->s != "constant") {
    if (mode->s == "edge") l.mode = Mode::kEdge;
    else if (mode->s == "reflect") l.mode = Mode::kReflect;
    else return RunReferenceKernel(ctx);  // wrap, or a name it rejects
  }
  uint8_t value[8] = {};  // the constant (zero by default)
  if (ctx.has_input(2) && ctx.input(2).numel() > 0) {
    if (ctx.input(2).dtype() != x.dtype()) return RunReferenceKernel(ctx);  // it converts
    std::memcpy(value, ctx.input(2).raw_data(), esize);
  }
  const int64_t* p = pads.data<int64_t>();
  Shape out_shape(static_cast<size_t>(rank));
  for (int64_t d = 0; d < rank; ++d) {
    const int64_t n = x.dim(d), b = p[d], e = p[d + rank];
    if (b < 0 || e < 0 || b > tensor_ops::kMaxOutputBytes || e > tensor_ops::kMaxOutputBytes) {
      return RunReferenceKernel(ctx);
    }
    if ((b > 0 || e > 0) && ((l.mode == Mode::kEdge && n < 1) || (l.mode == Mode::kReflect && (b >= n || e >= n)))) {
      return RunReferenceKernel(ctx);
    }
    out_shape[d] = n + b + e;
  }
  SPARQ_RETURN_IF_ERROR(tensor_ops::CheckOutputShape(ctx, out_shape, x.dtype(), "output shape"));
  Tensor y = ctx.OutputBuffer(0, x.dtype(), out_shape);
  if (y.numel() > 0) {
    // Trailing unpadded dimensions merged into the element.
    int64_t last = rank - 1;
    while (last > 0 && p[last] == 0 && p[last + rank] == 0) l.w *= x.dim(last--);
    l.rank = static_cast<int>(last + 1);
    for (int64_t d = 0; d <= last; ++d) l.in[d] = x.dim(d), l.out[d] = out_shape[d], l.begin[d] = p[d];
    switch (esize) {  // bytes moved as unsigned integers of the element's size
      case 1: PadRows<uint8_t>(l, x.raw_data(), value, y.raw_data(), ctx.pool()); break;
      case 2: PadRows<uint16_t>(l, x.raw_data(), value, y.raw_data(), ctx.pool()); break;
      case 4: PadRows<uint32_t>(l, x.raw_data(), value, y.raw_data(), ctx.pool()); break;
      default: PadRows<uint64_t>(l, x.raw_data(), value, y.raw_data(), ctx.pool());
    }
  }
  ctx.set_output(0, std::move(y));
  return Status::OK();
}

}  // namespace

void RegisterCpuPadOps(KernelRegistry& r) { r.Add({"Pad", "", 11, 99, PadCopy, "pad_copy"}); }

}  // namespace sparq
