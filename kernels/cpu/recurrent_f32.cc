// Float32 LSTM, GRU and RNN with constant weights (lstm_f32, gru_f32,
// rnn_f32): the input projection of every step at once on the FP32 GEMM
// (gemm_f32, W packed once when the executor prepares the node as strips,
// the biases that add linearly summed into its epilogue), then per step the
// recurrent projection R h (one row per batch entry) and the cell's
// arithmetic on float rows: the gates' Sigmoid and the Tanh of the candidate
// (and of LSTM's cell state; RNN's state itself) on the sigmoid_f32 and
// tanh_f32 rows of the dispatch table. Products of up to 4
// rows (R h up to batch 4, the input projection of a one-step call) run on
// the FP32 GEMV (gemv_f32) over the same packed strips, where gemm_f32's tile
// would run one chain of multiply-adds per strip; larger ones on gemm_f32.
//
// The three rows share the preparation (checks, packing), the run's skeleton
// (inputs, sequence_lens, states, the input projection, Y / Y_h) and differ
// only in one step of the recurrence (LstmStep, GruStep, RnnStep).
//
// They take what exported models use: the default activations (LSTM Sigmoid,
// Tanh, Tanh; GRU Sigmoid, Tanh; RNN Tanh), no clip, any direction (forward,
// reverse, bidirectional), layout 0 or 1, sequence_lens, initial states; W,
// R, B initializers. LSTM: input_forget 0, peepholes (P an initializer).
// GRU: linear_before_reset 0 or 1. Anything else (an RNN of Relu, say) runs
// the reference (kernels/ref/recurrent.cc).
//
// RNN's step: H' = tanh(XW + Wb + Rb + H R^T), one GEMV of R [H, H].
//
// GRU's step, by linear_before_reset (rows z, r, h; Wb / Rb W's / R's bias):
//   1: G = H R^T + [0, 0, Rbh]                       one GEMV, R [3H, H]
//      z, r = sigmoid(XW + Wb + Rb + G)   (z, r rows)
//      h~   = tanh(XW_h + Wbh + r * G_h)
//   0: G = H R_zr^T                                  R's z, r rows [2H, H]
//      z, r = sigmoid(XW + Wb + Rb + G)
//      h~   = tanh(XW_h + Wbh + Rbh + (r * H) R_h^T) a second GEMV, R_h [H, H]
//   H' = (1 - z) * h~ + z * H
//
// The reference sums each gate's dot products in double; these rows sum in
// float in k order and add the biases in float, so their results are within
// the tolerances of tests/kernels/recurrent_f32_test.cc (kLstmF32AbsTol,
// kGruF32AbsTol, kRnnF32AbsTol), not the same bits. The GEMV gives the
// GEMM's bits on the same ISA (so these rows computed what they computed on
// gemm_f32 before), and each output's sum never depends on how the strips
// are split among threads, so every thread count gives the same bits.
#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "kernels/cpu/dispatch.h"
#include "kernels/packed_formats.h"
#include "kernels/op_context.h"
#include "kernels/parallel.h"
#include "kernels/ref/recurrent.h"
#include "kernels/registry.h"

namespace sparq {
namespace {

enum class Cell { kLstm, kGru, kRnn };

// What a row takes of its ONNX op.
struct CellTraits {
  const char* row;  // "lstm_f32": the prefix of its messages and of its kernel name
  int gates;        // weight rows per hidden unit, ONNX's order (LSTM i, o, f, c; GRU z, r, h; RNN one)
  std::vector<const char*> activations;  // the defaults, the only ones taken
  size_t max_inputs, max_outputs;
};

const CellTraits& Traits(Cell cell) {
  static const CellTraits kLstm{"lstm_f32", 4, {"Sigmoid", "Tanh", "Tanh"}, 8, 3};
  static const CellTraits kGru{"gru_f32", 3, {"Sigmoid", "Tanh"}, 6, 2};
  static const CellTraits kRnn{"rnn_f32", 1, {"Tanh"}, 6, 2};
  switch (cell) {
    case Cell::kLstm: return kLstm;
    case Cell::kGru: return kGru;
    case Cell::kRnn: return kRnn;
  }
  return kRnn;
}

struct RecurrentDirection {
  PackedGemmF32 w;            // [gates*H, I]
  PackedGemmF32 r;            // LSTM [4H, H]; GRU [3H, H], or its z, r rows [2H, H] (linear_before_reset 0); RNN [H, H]
  PackedGemmF32 r_h;          // GRU with linear_before_reset 0: R's h rows [H, H]; else empty
  std::vector<float> bias;    // [gates*H]: added to the input projection (the biases that add linearly)
  std::vector<float> r_bias;  // [rows of r]: added to R's GEMM (GRU with linear_before_reset 1), or empty
  std::vector<float> peep;    // LSTM: [3H] (i, o, f) or empty
};

struct PreparedRecurrent {
  Cell cell = Cell::kLstm;
  int64_t input = 0, hidden = 0;
  bool reverse = false;  // direction "reverse"
  int64_t layout = 0;
  bool linear_before_reset = false;  // GRU
  std::vector<RecurrentDirection> dirs;
  SigmoidF32Fn sigmoid = nullptr;
  TanhF32Fn tanh{nullptr};
  const CpuKernelDef* gemv = nullptr;  // the gemv_f32 row of R's format
};

StatusOr<PackedGemmF32> Pack(const float* w, int64_t rows, int64_t k) {
  return PackGemmF32(w, rows, k, PreferredGemmF32Format(ActiveIsa()), true);
}

// NotSupported for what the row of `cell` does not take; the state otherwise.
StatusOr<std::shared_ptr<const void>> PrepareRecurrent(Cell cell, const Node& node,
                                                       const std::vector<const Tensor*>& constants) {
  const CellTraits& traits = Traits(cell);
  const std::string row = traits.row;
  const auto constant = [&](size_t i) { return i < constants.size() ? constants[i] : nullptr; };
  const auto has_input = [&](size_t i) { return i < node.inputs.size() && !node.inputs[i].empty(); };
  if (node.inputs.size() > traits.max_inputs || node.outputs.size() > traits.max_outputs)
    return Status::NotSupported(row + ": too many inputs or outputs (the reference names the error)");
  const Tensor* w = constant(1);
  const Tensor* r = constant(2);
  if (w == nullptr || r == nullptr) return Status::NotSupported(row + ": W and R must be initializers");
  if (w->dtype() != DataType::kFloat32 || r->dtype() != DataType::kFloat32 || w->rank() != 3 || r->rank() != 3)
    return Status::NotSupported(row + ": W and R must be 3-D float32");
  if (has_input(3) && constant(3) == nullptr) return Status::NotSupported(row + ": B must be an initializer");
  if (node.attr("clip") != nullptr) return Status::NotSupported(row + ": clip is not taken");
  if (!node.attr_floats("activation_alpha").empty() || !node.attr_floats("activation_beta").empty())
    return Status::NotSupported(row + ": activation_alpha / beta are not taken");
  auto p = std::make_shared<PreparedRecurrent>();
  p->cell = cell;
  if (cell == Cell::kLstm) {
    if (has_input(7) && constant(7) == nullptr) return Status::NotSupported(row + ": P must be an initializer");
    if (node.attr_int("input_forget", 0) != 0) return Status::NotSupported(row + ": input_forget is not taken");
  } else if (cell == Cell::kGru) {
    const int64_t lbr = node.attr_int("linear_before_reset", 0);
    if (lbr != 0 && lbr != 1)
      return Status::NotSupported(row + ": linear_before_reset (the reference names the error)");
    p->linear_before_reset = lbr == 1;
  }
  const std::string direction = node.attr_string("direction", "forward");
  const int64_t dirs = direction == "bidirectional" ? 2 : 1;
  if (direction != "forward" && direction != "reverse" && direction != "bidirectional")
    return Status::NotSupported(row + ": direction '" + direction + "'");
  p->reverse = direction == "reverse";
  p->layout = node.attr_int("layout", 0);
  if (p->layout != 0 && p->layout != 1) return Status::NotSupported(row + ": layout");
  if (const Attribute* a = node.attr("activations"); a != nullptr) {
    const size_t per_dir = traits.activations.size();
    if (a->kind != Attribute::Kind::kStrings ||
        (a->strings.size() != per_dir && a->strings.size() != per_dir * static_cast<size_t>(dirs)))
      return Status::NotSupported(row + ": activations (the reference names the error)");
    for (size_t i = 0; i < a->strings.size(); ++i)
      if (!SameNameIgnoringCase(a->strings[i], traits.activations[i % per_dir]))
        return Status::NotSupported(row + ": activations other than the defaults");
  }
  const int64_t hidden = r->dim(2), input = w->dim(2), rows = traits.gates * hidden;
  if (hidden <= 0 || input <= 0 || w->shape() != Shape{dirs, rows, input} || r->shape() != Shape{dirs, rows, hidden})
    return Status::NotSupported(row + ": W / R shapes (the reference names the error)");
  if (node.attr("hidden_size") != nullptr && node.attr_int("hidden_size", 0) != hidden)
    return Status::NotSupported(row + ": hidden_size disagrees with R");
  const Tensor* b = constant(3);
  const Tensor* peep = cell == Cell::kLstm ? constant(7) : nullptr;
  if ((b != nullptr && (b->dtype() != DataType::kFloat32 || b->shape() != Shape{dirs, 2 * rows})) ||
      (peep != nullptr && (peep->dtype() != DataType::kFloat32 || peep->shape() != Shape{dirs, 3 * hidden})))
    return Status::NotSupported(row + ": B / P shapes (the reference names the error)");
  p->input = input;
  p->hidden = hidden;
  const int64_t H = hidden;
  for (int64_t d = 0; d < dirs; ++d) {
    RecurrentDirection dir;
    const float* rd = r->data<float>() + d * rows * H;
    SPARQ_ASSIGN_OR_RETURN(dir.w, Pack(w->data<float>() + d * rows * input, rows, input));
    const bool split_r = cell == Cell::kGru && !p->linear_before_reset;
    SPARQ_ASSIGN_OR_RETURN(dir.r, Pack(rd, split_r ? 2 * H : rows, H));
    if (split_r) {
      SPARQ_ASSIGN_OR_RETURN(dir.r_h, Pack(rd + 2 * H * H, H, H));
    }
    dir.bias.assign(static_cast<size_t>(rows), 0.0f);
    if (b != nullptr) {
      const float* wb = b->data<float>() + d * 2 * rows;
      const float* rb = wb + rows;
      for (int64_t k = 0; k < rows; ++k) dir.bias[k] = wb[k] + rb[k];
      if (cell == Cell::kGru && p->linear_before_reset) {  // R's h bias is inside r * (...)
        dir.r_bias.assign(static_cast<size_t>(rows), 0.0f);
        for (int64_t k = 2 * H; k < rows; ++k) dir.bias[k] = wb[k], dir.r_bias[k] = rb[k];
      }
    }
    if (peep != nullptr) dir.peep.assign(peep->data<float>() + d * 3 * H, peep->data<float>() + (d + 1) * 3 * H);
    p->dirs.push_back(std::move(dir));
  }
  p->gemv = SelectCpuKernel(CpuOp::kGemvF32, p->dirs.at(0).r.format);
  if (p->gemv == nullptr) return Status::NotSupported(row + ": no gemv_f32 row for R's format");
  p->sigmoid = SelectCpuKernel(CpuOp::kSigmoidF32).get<SigmoidF32Fn>();
  p->tanh = SelectCpuKernel(CpuOp::kTanhF32).get<TanhF32Fn>();
  return std::shared_ptr<const void>(std::move(p));
}

StatusOr<std::shared_ptr<const void>> PrepareLstm(const Node& node, const std::vector<const Tensor*>& constants) {
  return PrepareRecurrent(Cell::kLstm, node, constants);
}

StatusOr<std::shared_ptr<const void>> PrepareGru(const Node& node, const std::vector<const Tensor*>& constants) {
  return PrepareRecurrent(Cell::kGru, node, constants);
}

StatusOr<std::shared_ptr<const void>> PrepareRnn(const Node& node, const std::vector<const Tensor*>& constants) {
  return PrepareRecurrent(Cell::kRnn, node, constants);
}

// Rows of X up to which a product runs on the GEMV (gemv_f32) rather than the
// GEMM: from 8 rows on gemm_f32's tile is faster (16 accumulators per 2 loads
// of a strip against the GEMV's 8 per 2).
constexpr int64_t kGemvMaxRows = 4;
// Multiply-adds below which a GEMV runs on the calling thread alone: waking
// a second thread costs about a microsecond, about what 64K multiply-adds
// (256 KiB of weights) from L2 take.
constexpr int64_t kGemvMinParallelMacs = 65536;

// y [m, rows of w] = x [m, K] w^T (+ bias): on the gemv_f32 row up to
// kGemvMaxRows rows (each step's R h at batch 1, the input projection of a
// one-step call), on gemm_f32 above; the same bits either way. With more than
// one thread, the GEMV gives each thread one contiguous range of strips, so
// that from step to step the same part of R stays in each core's cache.
Status Product(OpContext& ctx, const PreparedRecurrent& p, const PackedGemmF32& w, const float* bias, int64_t m,
               const float* x, int64_t ld_x, float* y) {
  if (m == 0) return Status::OK();
  if (m > kGemvMaxRows) {
    GemmF32Args args;
    args.w = &w, args.bias = bias;
    args.m = m, args.x = x, args.ld_x = ld_x, args.y = y, args.ld_y = w.rows;
    args.pool = ctx.pool();
    Status st = RunGemmF32(args);
    return st.ok() ? st : ctx.Error(st.code(), st.message());
  }
  GemvF32Args args;
  args.w = &w, args.m = m, args.x = x, args.ld_x = ld_x, args.bias = bias, args.y = y, args.ld_y = w.rows;
  const GemvF32Fn gemv = p.gemv->get<GemvF32Fn>();
  ThreadPool* pool = ctx.pool();
  const int64_t threads = pool != nullptr ? pool->num_threads() : 1;
  const int64_t parts =
      std::min<int64_t>({threads, w.panels, std::max<int64_t>(1, m * w.rows * w.k / kGemvMinParallelMacs)});
  if (parts <= 1) {
    args.s0 = 0, args.s1 = w.panels;
    gemv(args);
    return Status::OK();
  }
  ParallelFor(pool, parts, 1, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      GemvF32Args part = args;
      part.s0 = w.panels * t / parts, part.s1 = w.panels * (t + 1) / parts;
      gemv(part);
    }
  });
  return Status::OK();
}

// One direction's recurrence in flight, as a step sees it: the states h and
// c [B, H] (c: LSTM only) hold the state before the step and after it; the
// entries past their length are left as they are.
struct Sequence {
  int64_t B = 0, S = 0, layout = 0;
  bool backward = false;
  const std::vector<int64_t>* lens = nullptr;
  const float* xw = nullptr;  // the input projection [S*B, gates*H], rows in X's order
  float* h = nullptr;
  float* c = nullptr;

  // Step s's time of batch entry b, or -1 past its length.
  int64_t Time(int64_t s, int64_t b) const {
    const int64_t len = (*lens)[static_cast<size_t>(b)];
    return s >= len ? -1 : backward ? len - 1 - s : s;
  }
  // Batch entry b's input projection at time t (layout 0: X [S, B, I], 1: [B, S, I]).
  const float* Xw(int64_t t, int64_t b, int64_t rows) const {
    return xw + (layout == 0 ? t * B + b : b * S + t) * rows;
  }
};

// Scratch a step reuses from one step to the next.
struct StepScratch {
  float* g = nullptr;    // [B, rows of R]: the recurrent projection, then the gates
  float* rh = nullptr;   // GRU, linear_before_reset 0: [B, H] r * H, then the candidate
  float* tmp = nullptr;  // LSTM: [H] tanh(c); GRU, linear_before_reset 0: [B, H] (r * H) R_h^T
};

// The buffers behind a run's lengths, input projection, states and
// StepScratch, kept per thread (RunRecurrentF32).
struct RecurrentBuffers {
  std::vector<int64_t> lens;
  std::vector<float> xw, h, c, g, rh, tmp;
};

Status LstmStep(OpContext& ctx, const PreparedRecurrent& p, const RecurrentDirection& dir, const Sequence& seq,
                int64_t s, StepScratch& scratch) {
  const int64_t H = p.hidden, rows = 4 * H;
  SPARQ_RETURN_IF_ERROR(Product(ctx, p, dir.r, nullptr, seq.B, seq.h, H, scratch.g));
  const float* pi = dir.peep.empty() ? nullptr : dir.peep.data();
  for (int64_t b = 0; b < seq.B; ++b) {
    const int64_t t = seq.Time(s, b);
    if (t < 0) continue;
    float* g = scratch.g + b * rows;  // i, o, f, c pre-activations
    const float* xg = seq.Xw(t, b, rows);
    for (int64_t k = 0; k < rows; ++k) g[k] += xg[k];
    float* cb = seq.c + b * H;
    float* hb = seq.h + b * H;
    if (pi != nullptr) {
      for (int64_t k = 0; k < H; ++k) g[k] += pi[k] * cb[k], g[2 * H + k] += pi[2 * H + k] * cb[k];
    }
    p.sigmoid(g, g, H, false);                  // i
    p.sigmoid(g + 2 * H, g + 2 * H, H, false);  // f
    p.tanh(g + 3 * H, g + 3 * H, H);            // candidate
    for (int64_t k = 0; k < H; ++k) cb[k] = g[2 * H + k] * cb[k] + g[k] * g[3 * H + k];
    if (pi != nullptr)
      for (int64_t k = 0; k < H; ++k) g[H + k] += pi[H + k] * cb[k];
    p.sigmoid(g + H, g + H, H, false);  // o
    p.tanh(cb, scratch.tmp, H);
    for (int64_t k = 0; k < H; ++k) hb[k] = g[H + k] * scratch.tmp[k];
  }
  return Status::OK();
}

Status GruStep(OpContext& ctx, const PreparedRecurrent& p, const RecurrentDirection& dir, const Sequence& seq,
               int64_t s, StepScratch& scratch) {
  const int64_t H = p.hidden, rows = 3 * H, g_rows = dir.r.rows;
  const float* r_bias = dir.r_bias.empty() ? nullptr : dir.r_bias.data();
  SPARQ_RETURN_IF_ERROR(Product(ctx, p, dir.r, r_bias, seq.B, seq.h, H, scratch.g));
  for (int64_t b = 0; b < seq.B; ++b) {
    const int64_t t = seq.Time(s, b);
    if (t < 0) continue;
    float* g = scratch.g + b * g_rows;  // z, r (and with linear_before_reset h) of H R^T
    const float* xg = seq.Xw(t, b, rows);
    for (int64_t k = 0; k < 2 * H; ++k) g[k] += xg[k];
    p.sigmoid(g, g, 2 * H, false);  // z, r
    const float* hb = seq.h + b * H;
    if (p.linear_before_reset) {
      for (int64_t k = 0; k < H; ++k) g[2 * H + k] = xg[2 * H + k] + g[H + k] * g[2 * H + k];
    } else {
      float* rh = scratch.rh + b * H;
      for (int64_t k = 0; k < H; ++k) rh[k] = g[H + k] * hb[k];
    }
  }
  float* candidate_of = scratch.g + 2 * H;  // entry b's candidate: + b * g_rows (linear_before_reset 1)
  int64_t candidate_stride = g_rows;
  if (!p.linear_before_reset) {  // (r * H) R_h^T, then the candidate in place of r * H
    float* rh = scratch.rh;
    SPARQ_RETURN_IF_ERROR(Product(ctx, p, dir.r_h, nullptr, seq.B, rh, H, scratch.tmp));
    for (int64_t b = 0; b < seq.B; ++b) {
      const int64_t t = seq.Time(s, b);
      if (t < 0) continue;
      const float* xg = seq.Xw(t, b, rows) + 2 * H;
      const float* hr = scratch.tmp + b * H;
      for (int64_t k = 0; k < H; ++k) rh[b * H + k] = xg[k] + hr[k];
    }
    candidate_of = rh, candidate_stride = H;
  }
  for (int64_t b = 0; b < seq.B; ++b) {
    if (seq.Time(s, b) < 0) continue;
    const float* z = scratch.g + b * g_rows;
    float* candidate = candidate_of + b * candidate_stride;
    p.tanh(candidate, candidate, H);
    float* hb = seq.h + b * H;
    for (int64_t k = 0; k < H; ++k) hb[k] = (1.0f - z[k]) * candidate[k] + z[k] * hb[k];
  }
  return Status::OK();
}

Status RnnStep(OpContext& ctx, const PreparedRecurrent& p, const RecurrentDirection& dir, const Sequence& seq,
               int64_t s, StepScratch& scratch) {
  const int64_t H = p.hidden;
  SPARQ_RETURN_IF_ERROR(Product(ctx, p, dir.r, nullptr, seq.B, seq.h, H, scratch.g));
  for (int64_t b = 0; b < seq.B; ++b) {
    const int64_t t = seq.Time(s, b);
    if (t < 0) continue;
    float* g = scratch.g + b * H;
    const float* xg = seq.Xw(t, b, H);
    for (int64_t k = 0; k < H; ++k) g[k] += xg[k];
    p.tanh(g, seq.h + b * H, H);
  }
  return Status::OK();
}

// The skeleton the three rows run: inputs checked (the reference runs, and names
// the error, for anything unexpected), per direction the input projection,
// the initial state, the steps, and Y, Y_h (and LSTM's Y_c).
Status RunRecurrentF32(OpContext& ctx) {
  const PreparedRecurrent& p = *static_cast<const PreparedRecurrent*>(ctx.prepared());
  const bool lstm = p.cell == Cell::kLstm;
  if (!ctx.has_input(0) || ctx.input(0).dtype() != DataType::kFloat32 || ctx.input(0).rank() != 3 ||
      ctx.input(0).dim(2) != p.input)
    return RunReferenceKernel(ctx);
  const Tensor& x = ctx.input(0);
  const int64_t D = static_cast<int64_t>(p.dirs.size()), H = p.hidden, rows = Traits(p.cell).gates * H;
  const int64_t S = p.layout == 0 ? x.dim(0) : x.dim(1), B = p.layout == 0 ? x.dim(1) : x.dim(0);
  const Shape state_shape = p.layout == 0 ? Shape{D, B, H} : Shape{B, D, H};
  for (size_t slot = 5; slot <= (lstm ? 6u : 5u); ++slot)
    if (ctx.has_input(slot) && (ctx.input(slot).dtype() != DataType::kFloat32 || ctx.input(slot).shape() != state_shape))
      return RunReferenceKernel(ctx);  // it names the error
  // Work buffers, kept by the calling thread from run to run (a one-step
  // call at batch 1, Silero VAD's, otherwise spent a tenth of its time in
  // allocating and freeing them); every element read is written first.
  thread_local RecurrentBuffers buffers;
  std::vector<int64_t>& lens = buffers.lens;
  lens.assign(static_cast<size_t>(B), S);
  bool empty_entries = S == 0;  // entries of length 0: their Y_h and Y_c are zeros
  if (ctx.has_input(4)) {
    const Tensor& l = ctx.input(4);
    if ((l.dtype() != DataType::kInt32 && l.dtype() != DataType::kInt64) || l.shape() != Shape{B})
      return RunReferenceKernel(ctx);
    for (int64_t b = 0; b < B; ++b) {
      const int64_t len = l.dtype() == DataType::kInt32 ? l.data<int32_t>()[b] : l.data<int64_t>()[b];
      if (len < 0 || len > S) return RunReferenceKernel(ctx);
      lens[static_cast<size_t>(b)] = len;
      empty_entries = empty_entries || len == 0;
    }
  }
  // Y's entries past their length stay zero, as the reference's; Y_h and
  // Y_c are written in full, zeros only for entries of length 0.
  Tensor y;
  if (ctx.wants_output(0)) {
    const Shape y_shape = p.layout == 0 ? Shape{S, D, B, H} : Shape{B, S, D, H};
    y = S * B > 0 && *std::min_element(lens.begin(), lens.end()) == S ? ctx.OutputBuffer(0, DataType::kFloat32, y_shape)
                                                                      : Tensor(DataType::kFloat32, y_shape);
  }
  Tensor y_h = ctx.OutputBuffer(1, DataType::kFloat32, state_shape);
  Tensor y_c = lstm ? ctx.OutputBuffer(2, DataType::kFloat32, state_shape) : Tensor();
  if (empty_entries) {
    std::fill_n(y_h.data<float>(), y_h.numel(), 0.0f);
    if (lstm) std::fill_n(y_c.data<float>(), y_c.numel(), 0.0f);
  }
  const auto state_offset = [&](int64_t d, int64_t b) { return (p.layout == 0 ? d * B + b : b * D + d) * H; };
  const auto sized = [](std::vector<float>& v, int64_t n) {
    if (v.size() < static_cast<size_t>(n)) v.resize(static_cast<size_t>(n));
    return v.data();
  };
  float* const xw = sized(buffers.xw, S * B * rows);
  float* const h = sized(buffers.h, B * H);
  float* const c = sized(buffers.c, lstm ? B * H : 0);
  StepScratch scratch;
  scratch.g = sized(buffers.g, B * p.dirs[0].r.rows);
  scratch.rh = sized(buffers.rh, p.dirs[0].r_h.rows > 0 ? B * H : 0);
  scratch.tmp = sized(buffers.tmp, p.dirs[0].r_h.rows > 0 ? B * H : H);
  Sequence seq;
  seq.B = B, seq.S = S, seq.layout = p.layout, seq.lens = &lens;
  seq.xw = xw, seq.h = h, seq.c = c;
  for (int64_t d = 0; d < D; ++d) {
    const RecurrentDirection& dir = p.dirs[static_cast<size_t>(d)];
    SPARQ_RETURN_IF_ERROR(Product(ctx, p, dir.w, dir.bias.data(), S * B, x.data<float>(), p.input, xw));
    for (int64_t b = 0; b < B; ++b) {
      const int64_t so = state_offset(d, b);
      for (int64_t k = 0; k < H; ++k) {
        h[b * H + k] = ctx.has_input(5) ? ctx.input(5).data<float>()[so + k] : 0.0f;
        if (lstm) c[b * H + k] = ctx.has_input(6) ? ctx.input(6).data<float>()[so + k] : 0.0f;
      }
    }
    seq.backward = p.reverse || d == 1;
    for (int64_t s = 0; s < S; ++s) {
      switch (p.cell) {
        case Cell::kLstm: SPARQ_RETURN_IF_ERROR(LstmStep(ctx, p, dir, seq, s, scratch)); break;
        case Cell::kGru: SPARQ_RETURN_IF_ERROR(GruStep(ctx, p, dir, seq, s, scratch)); break;
        case Cell::kRnn: SPARQ_RETURN_IF_ERROR(RnnStep(ctx, p, dir, seq, s, scratch)); break;
      }
      if (!ctx.wants_output(0)) continue;
      for (int64_t b = 0; b < B; ++b) {
        const int64_t t = seq.Time(s, b);
        if (t < 0) continue;
        float* yt = y.data<float>() + (p.layout == 0 ? (t * D + d) * B + b : (b * S + t) * D + d) * H;
        std::copy(h + b * H, h + (b + 1) * H, yt);
      }
    }
    for (int64_t b = 0; b < B; ++b) {
      if (lens[static_cast<size_t>(b)] == 0) continue;  // Y_h and Y_c stay zero, as the reference's
      const int64_t so = state_offset(d, b);
      std::copy(h + b * H, h + (b + 1) * H, y_h.data<float>() + so);
      if (lstm) std::copy(c + b * H, c + (b + 1) * H, y_c.data<float>() + so);
    }
  }
  if (ctx.wants_output(0)) ctx.set_output(0, std::move(y));
  if (ctx.wants_output(1)) ctx.set_output(1, std::move(y_h));
  if (lstm && ctx.wants_output(2)) ctx.set_output(2, std::move(y_c));
  return Status::OK();
}

std::string RecurrentKernel(const void* state) {
  const auto& p = *static_cast<const PreparedRecurrent*>(state);
  const CpuKernelDef* def = SelectCpuKernel(CpuOp::kGemmF32, p.dirs.at(0).w.format);
  return std::string(Traits(p.cell).row) + "+" + (def != nullptr ? def->name : "?") + "+" + p.gemv->name;
}

}  // namespace

void RegisterCpuRecurrentF32Ops(KernelRegistry& r) {
  r.Add({"LSTM", "", 7, 99, RunRecurrentF32, "lstm_f32", WithoutContext(PrepareLstm, RecurrentKernel)});
  r.Add({"GRU", "", 7, 99, RunRecurrentF32, "gru_f32", WithoutContext(PrepareGru, RecurrentKernel)});
  r.Add({"RNN", "", 7, 99, RunRecurrentF32, "rnn_f32", WithoutContext(PrepareRnn, RecurrentKernel)});
}

}  // namespace sparq
