// Float32 LSTM with constant weights (lstm_f32): the input projection of every
// step at once on the FP32 GEMM (gemm_f32, W packed once when the executor
// prepares the node, the two biases summed into its epilogue), then per step
// the recurrent projection R h on the same GEMM (one row per batch entry)
// and the cell's arithmetic on float rows: the gates' Sigmoid and the Tanh of
// the candidate and of the cell state on the sigmoid_f32 and tanh_f32 rows of
// the dispatch table.
//
// It takes what exported models use: the default activations (Sigmoid, Tanh,
// Tanh), no clip, input_forget 0, any direction (forward, reverse,
// bidirectional), layout 0 or 1, sequence_lens, initial_h / initial_c and
// peepholes; W, R, B (and P) initializers. Anything else runs the reference
// (kernels/ref/recurrent.cc), as do GRU and RNN.
//
// The reference sums each gate's dot products in double; this path sums in
// float in the GEMM's order and adds the biases in float, so its results are
// within the tolerance of tests/kernels/recurrent_f32_test.cc
// (kLstmF32AbsTol), not the same bits. Each batch entry's rows never depend on
// how the GEMM splits its work among threads, so every thread count gives the
// same bits.
#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "kernels/cpu/dispatch.h"
#include "kernels/packed_formats.h"
#include "kernels/ref/recurrent.h"
#include "kernels/registry.h"

namespace sparq {
namespace {

constexpr int kGates = 4;  // ONNX's order: i, o, f, c

struct LstmDirection {
  PackedGemmF32 w;          // [4H, I]
  PackedGemmF32 r;          // [4H, H]
  std::vector<float> bias;  // [4H]: W's bias + R's, or zeros
  std::vector<float> peep;  // [3H] (i, o, f) or empty
};

struct PreparedLstm {
  int64_t input = 0, hidden = 0;
  bool reverse = false;  // direction "reverse"
  int64_t layout = 0;
  std::vector<LstmDirection> dirs;
  SigmoidF32Fn sigmoid = nullptr;
  TanhF32Fn tanh{nullptr};
};

// NotSupported for what this path does not take; the state otherwise.
StatusOr<std::shared_ptr<const void>> PrepareLstm(const Node& node, const std::vector<const Tensor*>& constants) {
  const auto constant = [&](size_t i) { return i < constants.size() ? constants[i] : nullptr; };
  const auto has_input = [&](size_t i) { return i < node.inputs.size() && !node.inputs[i].empty(); };
  const Tensor* w = constant(1);
  const Tensor* r = constant(2);
  if (w == nullptr || r == nullptr) return Status::NotSupported("lstm_f32: W and R must be initializers");
  if (w->dtype() != DataType::kFloat32 || r->dtype() != DataType::kFloat32 || w->rank() != 3 || r->rank() != 3)
    return Status::NotSupported("lstm_f32: W and R must be 3-D float32");
  if (has_input(3) && constant(3) == nullptr) return Status::NotSupported("lstm_f32: B must be an initializer");
  if (has_input(7) && constant(7) == nullptr) return Status::NotSupported("lstm_f32: P must be an initializer");
  if (node.attr("clip") != nullptr) return Status::NotSupported("lstm_f32: clip is not taken");
  if (node.attr_int("input_forget", 0) != 0) return Status::NotSupported("lstm_f32: input_forget is not taken");
  if (!node.attr_floats("activation_alpha").empty() || !node.attr_floats("activation_beta").empty())
    return Status::NotSupported("lstm_f32: activation_alpha / beta are not taken");
  auto p = std::make_shared<PreparedLstm>();
  const std::string direction = node.attr_string("direction", "forward");
  const int64_t dirs = direction == "bidirectional" ? 2 : 1;
  if (direction != "forward" && direction != "reverse" && direction != "bidirectional")
    return Status::NotSupported("lstm_f32: direction '" + direction + "'");
  p->reverse = direction == "reverse";
  p->layout = node.attr_int("layout", 0);
  if (p->layout != 0 && p->layout != 1) return Status::NotSupported("lstm_f32: layout");
  if (const Attribute* a = node.attr("activations"); a != nullptr) {
    if (a->kind != Attribute::Kind::kStrings) return Status::NotSupported("lstm_f32: activations");
    const char* defaults[] = {"Sigmoid", "Tanh", "Tanh"};
    if (a->strings.size() != 3 && a->strings.size() != static_cast<size_t>(3 * dirs))
      return Status::NotSupported("lstm_f32: activations");
    for (size_t i = 0; i < a->strings.size(); ++i)
      if (!SameNameIgnoringCase(a->strings[i], defaults[i % 3])) return Status::NotSupported("lstm_f32: activations other than the defaults");
  }
  const int64_t hidden = r->dim(2), input = w->dim(2), rows = kGates * hidden;
  if (hidden <= 0 || input <= 0 || w->shape() != Shape{dirs, rows, input} || r->shape() != Shape{dirs, rows, hidden})
    return Status::NotSupported("lstm_f32: W / R shapes (the reference names the error)");
  if (node.attr("hidden_size") != nullptr && node.attr_int("hidden_size", 0) != hidden)
    return Status::NotSupported("lstm_f32: hidden_size disagrees with R");
  const Tensor* b = constant(3);
  const Tensor* peep = constant(7);
  if ((b != nullptr && (b->dtype() != DataType::kFloat32 || b->shape() != Shape{dirs, 2 * rows})) ||
      (peep != nullptr && (peep->dtype() != DataType::kFloat32 || peep->shape() != Shape{dirs, 3 * hidden})))
    return Status::NotSupported("lstm_f32: B / P shapes (the reference names the error)");
  p->input = input;
  p->hidden = hidden;
  const PackedFormat format = PreferredGemmF32Format(ActiveIsa());
  for (int64_t d = 0; d < dirs; ++d) {
    LstmDirection dir;
    SPARQ_ASSIGN_OR_RETURN(dir.w, PackGemmF32(w->data<float>() + d * rows * input, rows, input, format, true));
    SPARQ_ASSIGN_OR_RETURN(dir.r, PackGemmF32(r->data<float>() + d * rows * hidden, rows, hidden, format, true));
    dir.bias.assign(static_cast<size_t>(rows), 0.0f);
    if (b != nullptr) {
      const float* bd = b->data<float>() + d * 2 * rows;
      for (int64_t k = 0; k < rows; ++k) dir.bias[k] = bd[k] + bd[rows + k];
    }
    if (peep != nullptr) dir.peep.assign(peep->data<float>() + d * 3 * hidden, peep->data<float>() + (d + 1) * 3 * hidden);
    p->dirs.push_back(std::move(dir));
  }
  p->sigmoid = SelectCpuKernel(CpuOp::kSigmoidF32).get<SigmoidF32Fn>();
  p->tanh = SelectCpuKernel(CpuOp::kTanhF32).get<TanhF32Fn>();
  return std::shared_ptr<const void>(std::move(p));
}

Status RunLstmF32(OpContext& ctx) {
  const PreparedLstm& p = *static_cast<const PreparedLstm*>(ctx.prepared());
  if (!ctx.has_input(0) || ctx.input(0).dtype() != DataType::kFloat32 || ctx.input(0).rank() != 3 ||
      ctx.input(0).dim(2) != p.input)
    return RunReferenceKernel(ctx);
  const Tensor& x = ctx.input(0);
  const int64_t D = static_cast<int64_t>(p.dirs.size()), H = p.hidden, rows = kGates * H;
  const int64_t S = p.layout == 0 ? x.dim(0) : x.dim(1), B = p.layout == 0 ? x.dim(1) : x.dim(0);
  const Shape state_shape = p.layout == 0 ? Shape{D, B, H} : Shape{B, D, H};
  for (size_t slot : {5, 6})
    if (ctx.has_input(slot) && (ctx.input(slot).dtype() != DataType::kFloat32 || ctx.input(slot).shape() != state_shape))
      return RunReferenceKernel(ctx);  // it names the error
  std::vector<int64_t> lens(static_cast<size_t>(B), S);
  if (ctx.has_input(4)) {
    const Tensor& l = ctx.input(4);
    if ((l.dtype() != DataType::kInt32 && l.dtype() != DataType::kInt64) || l.shape() != Shape{B})
      return RunReferenceKernel(ctx);
    lens = l.ToInt64Vector();
    for (int64_t len : lens)
      if (len < 0 || len > S) return RunReferenceKernel(ctx);
  }
  Tensor y(DataType::kFloat32, ctx.wants_output(0) ? (p.layout == 0 ? Shape{S, D, B, H} : Shape{B, S, D, H}) : Shape{0});
  Tensor y_h(DataType::kFloat32, state_shape), y_c(DataType::kFloat32, state_shape);  // zeros
  const auto state_offset = [&](int64_t d, int64_t b) { return (p.layout == 0 ? d * B + b : b * D + d) * H; };
  // Rows of X and of its projection: layout 0 [S, B, I], layout 1 [B, S, I].
  const auto x_row = [&](int64_t t, int64_t b) { return p.layout == 0 ? t * B + b : b * S + t; };
  std::vector<float> xw(static_cast<size_t>(S * B * rows)), hr(static_cast<size_t>(B * rows));
  std::vector<float> h(static_cast<size_t>(B * H)), c(static_cast<size_t>(B * H)), tmp(static_cast<size_t>(H));
  for (int64_t d = 0; d < D; ++d) {
    const LstmDirection& dir = p.dirs[static_cast<size_t>(d)];
    GemmF32Args in;
    in.w = &dir.w, in.bias = dir.bias.data();
    in.m = S * B, in.x = x.data<float>(), in.ld_x = p.input, in.y = xw.data(), in.ld_y = rows;
    in.pool = ctx.pool();
    if (in.m > 0) {
      Status st = RunGemmF32(in);
      if (!st.ok()) return ctx.Error(st.code(), st.message());
    }
    for (int64_t b = 0; b < B; ++b) {
      const int64_t so = state_offset(d, b);
      for (int64_t k = 0; k < H; ++k) {
        h[b * H + k] = ctx.has_input(5) ? ctx.input(5).data<float>()[so + k] : 0.0f;
        c[b * H + k] = ctx.has_input(6) ? ctx.input(6).data<float>()[so + k] : 0.0f;
      }
    }
    const bool backward = p.reverse || d == 1;
    const float* pi = dir.peep.empty() ? nullptr : dir.peep.data();
    for (int64_t s = 0; s < S; ++s) {
      GemmF32Args rec;
      rec.w = &dir.r;
      rec.m = B, rec.x = h.data(), rec.ld_x = H, rec.y = hr.data(), rec.ld_y = rows;
      rec.pool = ctx.pool();
      Status st = RunGemmF32(rec);
      if (!st.ok()) return ctx.Error(st.code(), st.message());
      for (int64_t b = 0; b < B; ++b) {
        const int64_t len = lens[static_cast<size_t>(b)];
        if (s >= len) continue;
        const int64_t t = backward ? len - 1 - s : s;
        float* g = hr.data() + b * rows;  // i, o, f, c pre-activations
        const float* xg = xw.data() + x_row(t, b) * rows;
        for (int64_t k = 0; k < rows; ++k) g[k] += xg[k];
        float* cb = c.data() + b * H;
        float* hb = h.data() + b * H;
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
        p.tanh(cb, tmp.data(), H);
        for (int64_t k = 0; k < H; ++k) hb[k] = g[H + k] * tmp[k];
        if (ctx.wants_output(0)) {
          float* yt = y.data<float>() + (p.layout == 0 ? (t * D + d) * B + b : (b * S + t) * D + d) * H;
          std::copy(hb, hb + H, yt);
        }
      }
    }
    for (int64_t b = 0; b < B; ++b) {
      if (lens[static_cast<size_t>(b)] == 0) continue;  // Y_h and Y_c stay zero, as the reference's
      const int64_t so = state_offset(d, b);
      std::copy(h.begin() + b * H, h.begin() + (b + 1) * H, y_h.data<float>() + so);
      std::copy(c.begin() + b * H, c.begin() + (b + 1) * H, y_c.data<float>() + so);
    }
  }
  if (ctx.wants_output(0)) ctx.set_output(0, std::move(y));
  if (ctx.wants_output(1)) ctx.set_output(1, std::move(y_h));
  if (ctx.wants_output(2)) ctx.set_output(2, std::move(y_c));
  return Status::OK();
}

std::string LstmKernel(const void* state) {
  const auto& p = *static_cast<const PreparedLstm*>(state);
  const CpuKernelDef* def = SelectCpuKernel(CpuOp::kGemmF32, p.dirs.at(0).w.format);
  return std::string("lstm_f32+") + (def != nullptr ? def->name : "?");
}

}  // namespace

void RegisterCpuRecurrentF32Ops(KernelRegistry& r) {
  r.Add({"LSTM", "", 7, 99, RunLstmF32, "lstm_f32", WithoutContext(PrepareLstm, LstmKernel)});
}

}  // namespace sparq
