// Concat and Split as block copies (kernel "copy_blocks"): along the axis,
// every outer index (the product of the dimensions before it) of a
// contiguous tensor is one contiguous block per input / output, so each
// (outer index, input) pair is one memcpy into an output allocated without
// its zero fill (every byte is written). The bytes of the reference kernels
// (kernels/ref/tensor_copy_ops.cc) for every data type of fixed size; bad
// nodes run the reference kernel, which names the error. The pairs are
// split among the threads; each byte is written by one of them: the same
// result for every thread count.
//
//   Concat(axis 1) of a [2, 3, 4] and b [2, 1, 4]:
//     y[0] = a[0] (12 elements) | b[0] (4)     y[1] = a[1] | b[1]
//
// Many small blocks (at most 256 output bytes per outer index) go without the
// list of copies: the threads split the outer indices, each input's blocks
// copied in one strided loop (ConcatInterleaved).
//
// Transpose (kernel "transpose_blocks"): the output without its zero fill; when
// the permutation ends in a 2-D transpose (the output's last dimension strided
// in the input, the one before it contiguous, e.g. BERT's K^T [0, 2, 3, 1]),
// that block in tiles of 8 x 8 so that both sides stay in cache lines (output
// rows of 128 values or more: kMinTileCols), else the reference's strided
// copy. A copy: the reference's bytes.
//
// Where (kernel "where_select"): the reference's broadcast runs
// (kernels/ref/elementwise_util.h), each run's loop compiled for its operands'
// steps (0: one value repeated, 1: contiguous), so that the compiler
// vectorizes it, as exported attention masks (Where(IsNaN(p), 0, p)) need.
// Values are only copied: the reference's bytes.
//
// Cast to float32 from the integer types and bool as a converting copy
// (kernel "cast_to_f32"): plain loops the compiler vectorizes, each value
// rounded as the reference's Tensor::CastTo rounds it (through double: exact
// for every type but int64 / uint64, whose double is rounded again to
// float, as there). Other casts run the reference kernel.
#include <algorithm>
#include <cstring>
#include <utility>
#include <vector>

#include "kernels/cpu/dispatch.h"
#include "kernels/ref/elementwise_util.h"
#include "kernels/ref/tensor_util.h"
#include "kernels/registry.h"

namespace sparq {
namespace {

constexpr int64_t kBytesPerTask = int64_t{1} << 16;  // copies below this share a task

// Transposes whose output rows are shorter than this run the strided copy,
// not the 8 x 8 tiles: its rows read kMinTileCols or fewer input lines, which
// stay in L1 over 16 output rows, and issue as many independent loads where
// the tiles have 8 in flight (DeepFilterNet3's [1, 64, 100, 8] -> [1, 100, 8,
// 64]: 20 us vs 29 us alone, 44 vs 58 us in the model, whose input is cold;
// BERT's K^T, 128 columns: tiles 57 us, strided 87; bench/RESULTS.md, "Fast
// rows vs the reference, node by node").
constexpr int64_t kMinTileCols = 128;

// The product of the dimensions before / after `axis`.
void OuterInner(const Shape& shape, int64_t axis, int64_t* outer, int64_t* inner) {
  *outer = 1, *inner = 1;
  for (int64_t d = 0; d < axis; ++d) *outer *= shape[d];
  for (int64_t d = axis + 1; d < static_cast<int64_t>(shape.size()); ++d) *inner *= shape[d];
}

// copies[t] = (dst, src, bytes), run in parallel over `pool`.
struct BlockCopy {
  uint8_t* dst;
  const uint8_t* src;
  size_t bytes;
};
void RunCopies(const std::vector<BlockCopy>& copies, ThreadPool* pool) {
  int64_t total = 0;
  for (const BlockCopy& c : copies) total += static_cast<int64_t>(c.bytes);
  const int64_t n = static_cast<int64_t>(copies.size());
  const int64_t grain = std::max<int64_t>(1, n * kBytesPerTask / std::max<int64_t>(1, total));
  ParallelFor(pool, n, grain, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t)
      if (copies[t].bytes > 0) std::memcpy(copies[t].dst, copies[t].src, copies[t].bytes);
  });
}

// Concat of many small blocks (basic-pitch's harmonic stacking: 8 inputs
// [1, T, F, 1] along the last axis, one float each per outer index):
// a copy list would hold outer x inputs entries of a few bytes. Instead the
// threads split the outer indices, and per input the blocks go out as one
// strided loop (input-major: each input is read in order), with the copy's
// size fixed at compile time for blocks of 1, 2, 4, 8 or 16 bytes.
constexpr int64_t kMinInterleaveOuter = 64;
constexpr size_t kMaxInterleaveBlock = 256;  // output bytes per outer index

template <size_t kBytes>
void StridedBlocks(const uint8_t* src, uint8_t* dst, size_t dst_stride, int64_t n) {
  for (int64_t o = 0; o < n; ++o) std::memcpy(dst + o * dst_stride, src + o * kBytes, kBytes);
}

void StridedBlocksAnySize(const uint8_t* src, size_t bytes, uint8_t* dst, size_t dst_stride, int64_t n) {
  switch (bytes) {
    case 1: StridedBlocks<1>(src, dst, dst_stride, n); return;
    case 2: StridedBlocks<2>(src, dst, dst_stride, n); return;
    case 4: StridedBlocks<4>(src, dst, dst_stride, n); return;
    case 8: StridedBlocks<8>(src, dst, dst_stride, n); return;
    case 16: StridedBlocks<16>(src, dst, dst_stride, n); return;
    default:
      for (int64_t o = 0; o < n; ++o) std::memcpy(dst + o * dst_stride, src + o * bytes, bytes);
  }
}

void ConcatInterleaved(OpContext& ctx, int64_t axis, int64_t inner, size_t esize, int64_t outer, size_t out_block,
                       uint8_t* out) {
  const int64_t grain = std::max<int64_t>(1, kBytesPerTask / static_cast<int64_t>(std::max<size_t>(1, out_block)));
  ParallelFor(ctx.pool(), outer, grain, [&](int64_t o0, int64_t o1) {
    size_t offset = 0;  // of input i's block in an output block
    for (size_t i = 0; i < ctx.num_inputs(); ++i) {
      const Tensor& t = ctx.input(i);
      const size_t block = static_cast<size_t>(t.dim(axis) * inner) * esize;
      if (block > 0) {
        StridedBlocksAnySize(static_cast<const uint8_t*>(t.raw_data()) + o0 * block, block,
                             out + o0 * out_block + offset, out_block, o1 - o0);
      }
      offset += block;
    }
  });
}

Status ConcatBlocks(OpContext& ctx) {
  if (ctx.num_inputs() == 0 || ctx.node().attr("axis") == nullptr) return RunReferenceKernel(ctx);
  for (size_t i = 0; i < ctx.num_inputs(); ++i)
    if (!ctx.has_input(i)) return RunReferenceKernel(ctx);
  const Tensor& first = ctx.input(0);
  const int64_t rank = static_cast<int64_t>(first.rank());
  int64_t axis = ctx.node().attr_int("axis", 1);
  if (axis < 0) axis += rank;
  if (rank == 0 || axis < 0 || axis >= rank || DataTypeSize(first.dtype()) == 0) return RunReferenceKernel(ctx);
  Shape out_shape = first.shape();
  out_shape[axis] = 0;
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    const Tensor& t = ctx.input(i);
    bool same = t.dtype() == first.dtype() && static_cast<int64_t>(t.rank()) == rank;
    for (int64_t d = 0; same && d < rank; ++d) same = d == axis || t.dim(d) == first.dim(d);
    if (!same) return RunReferenceKernel(ctx);  // it names the mismatch
    out_shape[axis] += t.dim(axis);
  }
  Tensor y = ctx.OutputBuffer(0, first.dtype(), out_shape);
  const size_t esize = DataTypeSize(first.dtype());
  int64_t outer = 0, inner = 0;
  OuterInner(out_shape, axis, &outer, &inner);
  const size_t out_block = static_cast<size_t>(out_shape[axis] * inner) * esize;
  auto* out = static_cast<uint8_t*>(y.raw_data());
  if (outer >= kMinInterleaveOuter && out_block <= kMaxInterleaveBlock) {
    ConcatInterleaved(ctx, axis, inner, esize, outer, out_block, out);
    ctx.set_output(0, std::move(y));
    return Status::OK();
  }
  std::vector<BlockCopy> copies;
  copies.reserve(static_cast<size_t>(outer) * ctx.num_inputs());
  for (int64_t o = 0; o < outer; ++o) {
    uint8_t* dst = out + o * out_block;
    for (size_t i = 0; i < ctx.num_inputs(); ++i) {
      const Tensor& t = ctx.input(i);
      const size_t block = static_cast<size_t>(t.dim(axis) * inner) * esize;
      copies.push_back({dst, static_cast<const uint8_t*>(t.raw_data()) + o * block, block});
      dst += block;
    }
  }
  RunCopies(copies, ctx.pool());
  ctx.set_output(0, std::move(y));
  return Status::OK();
}

// Slice (kernel "slice_copy"): the reference's geometry (SliceGeometryOf) and
// row copies (CopySlice: dimensions merged, one memcpy per contiguous row),
// into OutputBuffer without its zero fill (every byte is written), so planned
// in the run's arena; the whole input, in order, is the input's buffer as on
// the reference. The reference's bytes; bad nodes get the reference's error.
Status SliceCopy(OpContext& ctx) {
  if (!ctx.has_input(0) || DataTypeSize(ctx.input(0).dtype()) == 0) return RunReferenceKernel(ctx);
  SPARQ_ASSIGN_OR_RETURN(tensor_ops::SliceGeometry g, tensor_ops::SliceGeometryOf(ctx));
  const Tensor& x = ctx.input(0);
  if (g.whole) {
    ctx.set_output(0, x);
    return Status::OK();
  }
  Tensor y = ctx.OutputBuffer(0, x.dtype(), g.shape);
  tensor_ops::CopySlice(x, g, y.raw_data(), ctx.pool());
  ctx.set_output(0, std::move(y));
  return Status::OK();
}

Status SplitBlocks(OpContext& ctx) {
  if (!ctx.has_input(0) || ctx.input(0).rank() == 0 || DataTypeSize(ctx.input(0).dtype()) == 0)
    return RunReferenceKernel(ctx);
  const Tensor& x = ctx.input(0);
  const int64_t rank = static_cast<int64_t>(x.rank());
  int64_t axis = ctx.node().attr_int("axis", 0);
  if (axis < 0) axis += rank;
  if (axis < 0 || axis >= rank) return RunReferenceKernel(ctx);
  StatusOr<std::vector<int64_t>> split = tensor_ops::SplitSizes(ctx, axis);
  if (!split.ok()) return RunReferenceKernel(ctx);  // it names the error
  const size_t esize = DataTypeSize(x.dtype());
  int64_t outer = 0, inner = 0;
  OuterInner(x.shape(), axis, &outer, &inner);
  const size_t in_block = static_cast<size_t>(x.dim(axis) * inner) * esize;
  const auto* in = static_cast<const uint8_t*>(x.raw_data());
  std::vector<Tensor> outputs;
  std::vector<BlockCopy> copies;
  int64_t start = 0;
  for (size_t i = 0; i < split->size(); ++i) {
    const int64_t size = (*split)[i];
    Shape shape = x.shape();
    shape[axis] = size;
    outputs.push_back(ctx.wants_output(i) ? ctx.OutputBuffer(i, x.dtype(), shape) : Tensor());
    if (ctx.wants_output(i)) {
      const size_t block = static_cast<size_t>(size * inner) * esize;
      auto* out = static_cast<uint8_t*>(outputs.back().raw_data());
      for (int64_t o = 0; o < outer; ++o)
        copies.push_back({out + o * block, in + o * in_block + static_cast<size_t>(start * inner) * esize, block});
    }
    start += size;
  }
  RunCopies(copies, ctx.pool());
  for (size_t i = 0; i < outputs.size(); ++i)
    if (ctx.wants_output(i)) ctx.set_output(i, std::move(outputs[i]));
  return Status::OK();
}

// out[a * cols + b] = in[b * in_stride + a] for a < rows, b < cols (elements
// of kSize bytes), in tiles.
template <size_t kSize>
void TransposeBlock(const uint8_t* in, int64_t in_stride, int64_t rows, int64_t cols, uint8_t* out) {
  constexpr int64_t kTile = 8;
  for (int64_t a0 = 0; a0 < rows; a0 += kTile) {
    const int64_t a1 = std::min(rows, a0 + kTile);
    for (int64_t b0 = 0; b0 < cols; b0 += kTile) {
      const int64_t b1 = std::min(cols, b0 + kTile);
      for (int64_t a = a0; a < a1; ++a)
        for (int64_t b = b0; b < b1; ++b) std::memcpy(out + (a * cols + b) * kSize, in + (b * in_stride + a) * kSize, kSize);
    }
  }
}

Status TransposeBlocks(OpContext& ctx) {
  if (!ctx.has_input(0)) return RunReferenceKernel(ctx);
  const Tensor& x = ctx.input(0);
  const int64_t rank = static_cast<int64_t>(x.rank());
  const size_t esize = DataTypeSize(x.dtype());
  if (esize != 1 && esize != 2 && esize != 4 && esize != 8) return RunReferenceKernel(ctx);
  std::vector<int64_t> perm = ctx.node().attr_ints("perm");
  if (ctx.node().attr("perm") == nullptr)
    for (int64_t d = rank; d-- > 0;) perm.push_back(d);
  std::vector<bool> used(static_cast<size_t>(rank), false);
  if (static_cast<int64_t>(perm.size()) != rank) return RunReferenceKernel(ctx);  // it names the error
  for (int64_t& p : perm) {
    if (p < 0) p += rank;
    if (p < 0 || p >= rank || used[p]) return RunReferenceKernel(ctx);
    used[p] = true;
  }
  const std::vector<int64_t> in_strides = tensor_ops::ContiguousStrides(x.shape());
  Shape out_shape(static_cast<size_t>(rank));
  std::vector<int64_t> strides(static_cast<size_t>(rank));
  for (int64_t d = 0; d < rank; ++d) out_shape[d] = x.dim(perm[d]), strides[d] = in_strides[perm[d]];
  Tensor y = ctx.OutputBuffer(0, x.dtype(), out_shape);
  // The output's dimensions without the 1s, neighbours contiguous in the input merged.
  Shape shape;
  std::vector<int64_t> st;
  for (int64_t d = 0; d < rank; ++d) {
    if (out_shape[d] == 1) continue;
    if (!shape.empty() && st.back() == strides[d] * out_shape[d]) {
      shape.back() *= out_shape[d];
      st.back() = strides[d];
      continue;
    }
    shape.push_back(out_shape[d]);
    st.push_back(strides[d]);
  }
  const size_t k = shape.size();
  if (y.numel() == 0 || k < 2 || st[k - 1] == 1 || st[k - 2] != 1 || shape[k - 1] < kMinTileCols) {
    tensor_ops::StridedCopy(x.raw_data(), strides, out_shape, y.raw_data(), esize, ctx.pool());
    ctx.set_output(0, std::move(y));
    return Status::OK();
  }
  const int64_t rows = shape[k - 2], cols = shape[k - 1], in_stride = st[k - 1];
  const int64_t blocks = y.numel() / (rows * cols);
  const auto* in = static_cast<const uint8_t*>(x.raw_data());
  auto* out = static_cast<uint8_t*>(y.raw_data());
  ParallelFor(ctx.pool(), blocks, std::max<int64_t>(1, kBytesPerTask / static_cast<int64_t>(rows * cols * esize)),
              [&](int64_t b0, int64_t b1) {
                for (int64_t b = b0; b < b1; ++b) {
                  int64_t offset = 0;
                  for (size_t d = k - 2, rest = static_cast<size_t>(b); d-- > 0;) {  // block b's input offset
                    offset += static_cast<int64_t>(rest % static_cast<size_t>(shape[d])) * st[d];
                    rest /= static_cast<size_t>(shape[d]);
                  }
                  const uint8_t* src = in + offset * static_cast<int64_t>(esize);
                  uint8_t* dst = out + b * rows * cols * static_cast<int64_t>(esize);
                  switch (esize) {
                    case 1: TransposeBlock<1>(src, in_stride, rows, cols, dst); break;
                    case 2: TransposeBlock<2>(src, in_stride, rows, cols, dst); break;
                    case 4: TransposeBlock<4>(src, in_stride, rows, cols, dst); break;
                    default: TransposeBlock<8>(src, in_stride, rows, cols, dst); break;
                  }
                }
              });
  ctx.set_output(0, std::move(y));
  return Status::OK();
}

template <typename T>
void CastRowToFloat(const void* in, float* out, int64_t n) {
  const T* src = static_cast<const T*>(in);
  for (int64_t i = 0; i < n; ++i) out[i] = static_cast<float>(static_cast<double>(src[i]));
}

Status CastToFloat(OpContext& ctx) {
  const Attribute* to = ctx.node().attr("to");
  if (!ctx.has_input(0) || to == nullptr || to->kind != Attribute::Kind::kInt || to->i != 1) {
    return RunReferenceKernel(ctx);  // 1: ONNX's FLOAT
  }
  const Tensor& x = ctx.input(0);
  void (*row)(const void*, float*, int64_t) = nullptr;
  switch (x.dtype()) {
    case DataType::kInt8: row = CastRowToFloat<int8_t>; break;
    case DataType::kUInt8: row = CastRowToFloat<uint8_t>; break;
    case DataType::kInt16: row = CastRowToFloat<int16_t>; break;
    case DataType::kUInt16: row = CastRowToFloat<uint16_t>; break;
    case DataType::kInt32: row = CastRowToFloat<int32_t>; break;
    case DataType::kUInt32: row = CastRowToFloat<uint32_t>; break;
    case DataType::kInt64: row = CastRowToFloat<int64_t>; break;
    case DataType::kUInt64: row = CastRowToFloat<uint64_t>; break;
    case DataType::kBool: row = CastRowToFloat<bool>; break;
    default: return RunReferenceKernel(ctx);  // float32 itself (shared), floats, strings
  }
  Tensor y = ctx.OutputBuffer(0, DataType::kFloat32, x.shape());
  const auto* in = static_cast<const uint8_t*>(x.raw_data());
  const size_t esize = DataTypeSize(x.dtype());
  float* out = y.data<float>();
  constexpr int64_t kChunk = 16384;  // values per task
  ParallelFor(ctx.pool(), (x.numel() + kChunk - 1) / kChunk, 1, [&](int64_t c0, int64_t c1) {
    const int64_t begin = c0 * kChunk, end = std::min(x.numel(), c1 * kChunk);
    row(in + static_cast<size_t>(begin) * esize, out + begin, end - begin);
  });
  ctx.set_output(0, std::move(y));
  return Status::OK();
}

// sparq.RoundToFloat16 on the dispatch table's round_f16_f32 row (F16C or
// AVX-512 where the CPU has them): float32 -> float16 -> float32 in registers,
// one read and one write of each value, the reference's bits (both
// conversions are exact or round to nearest even).
Status RoundToFloat16Rows(OpContext& ctx) {
  if (!ctx.has_input(0) || ctx.input(0).dtype() != DataType::kFloat32) return RunReferenceKernel(ctx);
  const Tensor& x = ctx.input(0);
  const RoundF16F32Fn round = SelectCpuKernel(CpuOp::kRoundF16F32).get<RoundF16F32Fn>();
  Tensor y = ctx.OutputBuffer(0, DataType::kFloat32, x.shape());
  const float* in = x.data<float>();
  float* out = y.data<float>();
  constexpr int64_t kChunk = 16384;  // values per task (64 KiB)
  ParallelFor(ctx.pool(), (x.numel() + kChunk - 1) / kChunk, 1, [&](int64_t c0, int64_t c1) {
    const int64_t begin = c0 * kChunk, end = std::min(x.numel(), c1 * kChunk);
    round(in + begin, out + begin, end - begin);
  });
  ctx.set_output(0, std::move(y));
  return Status::OK();
}

template <typename T, int kC, int kX, int kY>
void SelectRun(const bool* c, const T* x, const T* y, T* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = c[i * kC] ? x[i * kX] : y[i * kY];
}

template <typename T>
void SelectRunAnyStep(const bool* c, int64_t sc, const T* x, int64_t sx, const T* y, int64_t sy, T* out,
                      int64_t n) {
  const int key = (sc == 1) << 2 | (sx == 1) << 1 | (sy == 1);
  if ((sc != 0 && sc != 1) || (sx != 0 && sx != 1) || (sy != 0 && sy != 1)) {
    for (int64_t i = 0; i < n; ++i) out[i] = c[i * sc] ? x[i * sx] : y[i * sy];
    return;
  }
  switch (key) {
    case 0: SelectRun<T, 0, 0, 0>(c, x, y, out, n); break;
    case 1: SelectRun<T, 0, 0, 1>(c, x, y, out, n); break;
    case 2: SelectRun<T, 0, 1, 0>(c, x, y, out, n); break;
    case 3: SelectRun<T, 0, 1, 1>(c, x, y, out, n); break;
    case 4: SelectRun<T, 1, 0, 0>(c, x, y, out, n); break;
    case 5: SelectRun<T, 1, 0, 1>(c, x, y, out, n); break;
    case 6: SelectRun<T, 1, 1, 0>(c, x, y, out, n); break;
    default: SelectRun<T, 1, 1, 1>(c, x, y, out, n); break;
  }
}

template <typename T>
void SelectTyped(ThreadPool* pool, const Tensor& c, const Tensor& x, const Tensor& y, Tensor& out) {
  const bool* pc = c.data<bool>();
  const T* px = static_cast<const T*>(x.raw_data());
  const T* py = static_cast<const T*>(y.raw_data());
  T* po = static_cast<T*>(out.raw_data());
  const auto plan = elementwise::MakeBroadcastPlan<3>(out.shape(), {&c.shape(), &x.shape(), &y.shape()});
  elementwise::ForEachRun(pool, plan, [&](int64_t o, const std::array<int64_t, 3>& off,
                                          const std::array<int64_t, 3>& st, int64_t n) {
    SelectRunAnyStep<T>(pc + off[0], st[0], px + off[1], st[1], py + off[2], st[2], po + o, n);
  });
}

Status WhereSelect(OpContext& ctx) {
  if (ctx.num_inputs() != 3 || !ctx.has_input(0) || !ctx.has_input(1) || !ctx.has_input(2))
    return RunReferenceKernel(ctx);
  const Tensor& c = ctx.input(0);
  const Tensor& x = ctx.input(1);
  const Tensor& y = ctx.input(2);
  if (c.dtype() != DataType::kBool || x.dtype() != y.dtype()) return RunReferenceKernel(ctx);  // it names the error
  auto shape = BroadcastShapes({c.shape(), x.shape(), y.shape()});
  if (!shape.ok()) return RunReferenceKernel(ctx);
  Tensor out = ctx.OutputBuffer(0, x.dtype(), shape.value());  // every element is written
  switch (DataTypeSize(x.dtype())) {
    case 1: SelectTyped<uint8_t>(ctx.pool(), c, x, y, out); break;
    case 2: SelectTyped<uint16_t>(ctx.pool(), c, x, y, out); break;
    case 4: SelectTyped<uint32_t>(ctx.pool(), c, x, y, out); break;
    case 8: SelectTyped<uint64_t>(ctx.pool(), c, x, y, out); break;
    default: return RunReferenceKernel(ctx);
  }
  ctx.set_output(0, std::move(out));
  return Status::OK();
}

// Row copies of sparq.OneHotLookup below this many bytes run on the calling
// thread: magika's 1 MiB (2,048 rows of 512 bytes, ~25 us) split in 64 KiB
// tasks took 40-150 us on 2 threads on this loaded 2-vCPU machine (the
// second thread woken for a copy bound by memory), 25-35 us on one.
constexpr int64_t kLookupBytesPerTask = int64_t{1} << 21;

// sparq.OneHotLookup (kernel "lookup_rows"): each output row one memcpy of
// the table row its value selects (kernels/ref/tensor_index_ops.cc's rule:
// the index of the class equal to the value, V when none), the rows split
// among the threads, into OutputBuffer without its zero fill. Taken when the
// output's rows are a's own (a [.., 1] broadcast to [.., V] at most, as
// jax2tf's one_hot writes it); anything else, and bad nodes, run the
// reference kernel. The reference's bytes. magika's 2,048 byte rows took
// ~2-4% of its INT8 run on the reference (ForEachBroadcast per row, one
// thread).
Status OneHotLookupRows(OpContext& ctx) {
  if (ctx.num_inputs() < 3 || !ctx.has_input(0) || !ctx.has_input(1) || !ctx.has_input(2))
    return RunReferenceKernel(ctx);
  const Tensor& a = ctx.input(0);
  const Tensor& classes = ctx.input(1);
  const Tensor& table = ctx.input(2);
  const bool a32 = a.dtype() == DataType::kInt32;
  if (a.dtype() != classes.dtype() || (!a32 && a.dtype() != DataType::kInt64)) return RunReferenceKernel(ctx);
  const int64_t V = classes.numel();
  if (V == 0 || classes.rank() == 0 || classes.dim(classes.rank() - 1) != V) return RunReferenceKernel(ctx);
  if (table.rank() != 2 || table.dim(0) != V + 1 || DataTypeSize(table.dtype()) == 0) return RunReferenceKernel(ctx);
  if (a.rank() == 0 || a.dim(a.rank() - 1) != 1) return RunReferenceKernel(ctx);
  Shape full = a.shape();
  full.back() = V;
  std::vector<Shape> shapes = {a.shape(), classes.shape()};
  if (ctx.has_input(3)) {
    const Tensor& target = ctx.input(3);
    if (target.dtype() != DataType::kInt64 || target.rank() != 1) return RunReferenceKernel(ctx);
    shapes.emplace_back(target.data<int64_t>(), target.data<int64_t>() + target.numel());
  }
  auto broadcast = BroadcastShapes(shapes);
  if (!broadcast.ok() || *broadcast != full) return RunReferenceKernel(ctx);
  // Class value -> its row of the table, as the reference finds it.
  std::vector<std::pair<int64_t, int64_t>> sorted(static_cast<size_t>(V));
  for (int64_t v = 0; v < V; ++v) sorted[v] = {a32 ? classes.data<int32_t>()[v] : classes.data<int64_t>()[v], v};
  std::sort(sorted.begin(), sorted.end());
  bool iota = true;
  for (int64_t v = 0; v < V; ++v) {
    if (v > 0 && sorted[v].first == sorted[v - 1].first) return RunReferenceKernel(ctx);  // it names the duplicate
    iota = iota && sorted[v].first == sorted[0].first + v && sorted[v].second == v;
  }
  const int64_t first = sorted[0].first;
  auto row_of = [&](int64_t value) -> int64_t {
    if (iota) return value >= first && value - first < V ? value - first : V;
    auto it = std::lower_bound(sorted.begin(), sorted.end(), std::make_pair(value, int64_t{0}));
    return it != sorted.end() && it->first == value ? it->second : V;
  };
  Shape y_shape = a.shape();
  y_shape.back() = table.dim(1);
  Tensor y = ctx.OutputBuffer(0, table.dtype(), y_shape);
  const size_t row_bytes = static_cast<size_t>(table.dim(1)) * DataTypeSize(table.dtype());
  const auto* src = static_cast<const uint8_t*>(table.raw_data());
  auto* dst = static_cast<uint8_t*>(y.raw_data());
  const int64_t rows = a.numel();
  if (row_bytes > 0) {
    const int64_t grain = std::max<int64_t>(1, kLookupBytesPerTask / static_cast<int64_t>(row_bytes));
    ParallelFor(ctx.pool(), rows, grain, [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        const int64_t value = a32 ? a.data<int32_t>()[r] : a.data<int64_t>()[r];
        std::memcpy(dst + r * row_bytes, src + row_of(value) * row_bytes, row_bytes);
      }
    });
  }
  ctx.set_output(0, std::move(y));
  return Status::OK();
}

}  // namespace

void RegisterCpuTensorCopyOps(KernelRegistry& r) {
  r.Add({"Where", "", 9, 99, WhereSelect, "where_select"});
  // Chunk by chunk, each read whole before it is written: output 0 may go
  // over input 0 (KernelDef::overwritable_inputs), sparing an FP16 run's
  // rounding passes a buffer per value.
  r.Add({"RoundToFloat16", kSparqDomain, 1, 99, RoundToFloat16Rows, "round_f16_rows", nullptr, kPriorityFast, 0,
         0b1});
  r.Add({"Cast", "", 6, 99, CastToFloat, "cast_to_f32"});
  r.Add({"Transpose", "", 1, 99, TransposeBlocks, "transpose_blocks"});  // opset 1 spells `to` as a name: the reference
  r.Add({"Concat", "", 1, 99, ConcatBlocks, "copy_blocks"});  // without an axis (opset 1 default): the reference
  r.Add({"Split", "", 1, 99, SplitBlocks, "copy_blocks"});
  r.Add({"Slice", "", 1, 99, SliceCopy, "slice_copy", nullptr, kPriorityFast});
  r.Add({"OneHotLookup", kSparqDomain, 1, 99, OneHotLookupRows, "lookup_rows", nullptr, kPriorityFast});
}

}  // namespace sparq
