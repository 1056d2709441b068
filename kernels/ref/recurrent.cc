// Reference RNN, GRU and LSTM (ONNX opsets 7 and 14, and later versions that
// only widen the types; opsets 1 to 6, with output_sequence, are not taken).
// float32 and float64; float16 and bfloat16 computed in float32.
//
// One loop serves the three cells: each (direction, batch entry) runs its own
// recurrence over its own sequence length, independent of the others, so the
// pairs are split across threads and the result does not depend on the
// thread count. Dot products accumulate in double; the states (H, and C of
// LSTM) are rounded to the tensor type after every step, as an implementation
// computing in that type keeps them.
//
// Layouts (opset 14's `layout`; 0 before):
//   layout 0: X [seq, batch, input]  Y [seq, dirs, batch, hidden]  Y_h, Y_c, initial_h, initial_c [dirs, batch, hidden]
//   layout 1: X [batch, seq, input]  Y [batch, seq, dirs, hidden]  Y_h, Y_c, initial_h, initial_c [batch, dirs, hidden]
// Weights: W [dirs, gates*hidden, input], R [dirs, gates*hidden, hidden],
// B [dirs, 2*gates*hidden] (W's biases, then R's), LSTM's P [dirs, 3*hidden].
// Gate order: LSTM i, o, f, c (P: i, o, f); GRU z, r, h; RNN one gate.
//
// sequence_lens: batch entry b runs steps [0, len_b); Y is zero at steps
// >= len_b, Y_h/Y_c hold the state after its last step (the reverse
// direction runs len_b - 1 down to 0); an entry of length 0 gets Y_h and
// Y_c of zeros, not its initial state (onnxruntime's result; the ONNX spec
// does not say). `clip` bounds every gate's input to its activation (not the
// cell state fed to LSTM's h), as onnxruntime does. activation_alpha/beta are
// consumed in order by the activations that take them (onnxruntime's rule):
// e.g. activations [LeakyRelu, Tanh, HardSigmoid] with alpha [0.1, 0.3] give
// LeakyRelu 0.1 and HardSigmoid 0.3; a missing value takes the ONNX
// operator's default, as the spec says (ThresholdedRelu alpha 1, Affine 1 and
// 0, ScaledTanh 1 and 1, where onnxruntime takes 0). Activation names match
// without regard to case. sequence_lens may be int64 as well as int32.
#include "kernels/ref/recurrent.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/ref/nn_common.h"
#include "kernels/registry.h"

namespace sparq {

bool SameNameIgnoringCase(const std::string& a, const char* b) {
  const std::string bs(b);
  if (a.size() != bs.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(a[i])) != std::tolower(static_cast<unsigned char>(bs[i]))) return false;
  return true;
}

namespace {

enum class CellKind { kRnn, kGru, kLstm };

struct CellSpec {
  const char* op;
  int gates;               // weight rows per hidden unit
  int acts_per_direction;  // f (RNN); f, g (GRU); f, g, h (LSTM)
  std::vector<const char*> default_activations;
  size_t max_inputs;
  size_t max_outputs;
};

const CellSpec& Spec(CellKind kind) {
  static const CellSpec kRnn{"RNN", 1, 1, {"Tanh"}, 6, 2};
  static const CellSpec kGru{"GRU", 3, 2, {"Sigmoid", "Tanh"}, 6, 2};
  static const CellSpec kLstm{"LSTM", 4, 3, {"Sigmoid", "Tanh", "Tanh"}, 8, 3};
  switch (kind) {
    case CellKind::kRnn: return kRnn;
    case CellKind::kGru: return kGru;
    case CellKind::kLstm: return kLstm;
  }
  return kRnn;
}

// ---------------------------------------------------------------------------
// Activations.

enum class ActKind {
  kRelu,
  kTanh,
  kSigmoid,
  kAffine,
  kLeakyRelu,
  kThresholdedRelu,
  kScaledTanh,
  kHardSigmoid,
  kElu,
  kSoftsign,
  kSoftplus
};

// One activation name: whether it takes alpha / beta and their ONNX defaults.
struct ActInfo {
  const char* name;
  ActKind kind;
  bool takes_alpha;
  bool takes_beta;
  double default_alpha;
  double default_beta;
};

constexpr ActInfo kActivations[] = {
    {"Relu", ActKind::kRelu, false, false, 0, 0},
    {"Tanh", ActKind::kTanh, false, false, 0, 0},
    {"Sigmoid", ActKind::kSigmoid, false, false, 0, 0},
    {"Affine", ActKind::kAffine, true, true, 1.0, 0.0},
    {"LeakyRelu", ActKind::kLeakyRelu, true, false, 0.01, 0},
    {"ThresholdedRelu", ActKind::kThresholdedRelu, true, false, 1.0, 0},
    {"ScaledTanh", ActKind::kScaledTanh, true, true, 1.0, 1.0},
    {"HardSigmoid", ActKind::kHardSigmoid, true, true, 0.2, 0.5},
    {"Elu", ActKind::kElu, true, false, 1.0, 0},
    {"Softsign", ActKind::kSoftsign, false, false, 0, 0},
    {"Softplus", ActKind::kSoftplus, false, false, 0, 0},
};

struct Activation {
  ActKind kind = ActKind::kTanh;
  double alpha = 0;
  double beta = 0;

  double operator()(double x) const {
    switch (kind) {
      case ActKind::kRelu: return x > 0 ? x : 0.0;
      case ActKind::kTanh: return std::tanh(x);
      case ActKind::kSigmoid: return x >= 0 ? 1.0 / (1.0 + std::exp(-x)) : std::exp(x) / (1.0 + std::exp(x));
      case ActKind::kAffine: return alpha * x + beta;
      case ActKind::kLeakyRelu: return x >= 0 ? x : alpha * x;
      case ActKind::kThresholdedRelu: return x >= alpha ? x : 0.0;
      case ActKind::kScaledTanh: return alpha * std::tanh(beta * x);
      case ActKind::kHardSigmoid: return std::min(1.0, std::max(0.0, alpha * x + beta));
      case ActKind::kElu: return x >= 0 ? x : alpha * (std::exp(x) - 1.0);
      case ActKind::kSoftsign: return x / (1.0 + std::fabs(x));
      case ActKind::kSoftplus: return x > 0 ? x + std::log1p(std::exp(-x)) : std::log1p(std::exp(x));
    }
    return x;
  }
};

// The activations of every direction (acts_per_direction each), from the
// `activations`, `activation_alpha` and `activation_beta` attributes.
StatusOr<std::vector<Activation>> ReadActivations(const OpContext& ctx, const CellSpec& spec, int64_t dirs) {
  const Node& node = ctx.node();
  std::vector<std::string> names;
  if (const Attribute* a = node.attr("activations"); a != nullptr && a->kind == Attribute::Kind::kStrings) {
    names = a->strings;
  } else if (a != nullptr) {
    return ctx.InvalidArgument("attribute 'activations' must be a list of strings");
  }
  const size_t per_dir = static_cast<size_t>(spec.acts_per_direction);
  if (names.empty()) {
    for (int64_t d = 0; d < dirs; ++d)
      for (const char* n : spec.default_activations) names.emplace_back(n);
  } else if (names.size() == per_dir && dirs == 2) {
    // One set for both directions (onnxruntime accepts this too).
    std::vector<std::string> twice = names;
    twice.insert(twice.end(), names.begin(), names.end());
    names = std::move(twice);
  } else if (names.size() != per_dir * static_cast<size_t>(dirs)) {
    return ctx.InvalidArgument("attribute 'activations' has " + std::to_string(names.size()) + " names, expected " +
                               std::to_string(per_dir * static_cast<size_t>(dirs)) + " (" + std::to_string(per_dir) +
                               " per direction)");
  }
  const std::vector<float> alphas = node.attr_floats("activation_alpha");
  const std::vector<float> betas = node.attr_floats("activation_beta");
  size_t next_alpha = 0, next_beta = 0;
  std::vector<Activation> acts;
  for (const std::string& name : names) {
    const ActInfo* info = nullptr;
    for (const ActInfo& candidate : kActivations)
      if (SameNameIgnoringCase(name, candidate.name)) info = &candidate;
    if (info == nullptr) {
      return ctx.NotSupported("activation '" + name +
                              "' is not one of Relu, Tanh, Sigmoid, Affine, LeakyRelu, ThresholdedRelu, ScaledTanh, "
                              "HardSigmoid, Elu, Softsign, Softplus");
    }
    Activation act{info->kind, info->default_alpha, info->default_beta};
    if (info->takes_alpha && next_alpha < alphas.size()) act.alpha = alphas[next_alpha++];
    if (info->takes_beta && next_beta < betas.size()) act.beta = betas[next_beta++];
    acts.push_back(act);
  }
  return acts;
}

// ---------------------------------------------------------------------------
// The problem: sizes and attributes, checked.

struct Problem {
  CellKind kind = CellKind::kRnn;
  int64_t seq = 0, batch = 0, input = 0, hidden = 0, dirs = 1;
  bool reverse = false;  // direction "reverse" (a bidirectional node's direction 1 is always reverse)
  int64_t layout = 0;
  bool has_clip = false;
  double clip = 0;
  bool linear_before_reset = false;  // GRU
  bool input_forget = false;         // LSTM
  std::vector<Activation> acts;      // dirs * acts_per_direction
  std::vector<int64_t> seq_lens;     // batch
};

std::string ShapeOf(const Tensor& t) { return ShapeToString(t.shape()); }

// Fails unless input `slot` (named `name`), when present, has shape `want`.
Status CheckShape(const OpContext& ctx, size_t slot, const char* name, const Shape& want, const char* layout_text) {
  if (!ctx.has_input(slot)) return Status::OK();
  if (ctx.input(slot).shape() != want) {
    return ctx.InvalidArgument(std::string("input ") + name + " has shape " + ShapeOf(ctx.input(slot)) + ", expected " +
                               ShapeToString(want) + " " + layout_text);
  }
  return Status::OK();
}

StatusOr<Problem> ReadProblem(const OpContext& ctx, CellKind kind) {
  const CellSpec& spec = Spec(kind);
  const Node& node = ctx.node();
  SPARQ_RETURN_IF_ERROR(ctx.RequireInputs(3));
  if (ctx.num_inputs() > spec.max_inputs) {
    return ctx.InvalidArgument("has " + std::to_string(ctx.num_inputs()) + " inputs; " + spec.op + " takes at most " +
                               std::to_string(spec.max_inputs));
  }
  if (ctx.num_outputs() > spec.max_outputs) {
    return ctx.InvalidArgument("has " + std::to_string(ctx.num_outputs()) + " outputs; " + spec.op + " has at most " +
                               std::to_string(spec.max_outputs));
  }
  Problem p;
  p.kind = kind;
  const std::string direction = node.attr_string("direction", "forward");
  if (direction == "forward" || direction == "reverse") {
    p.dirs = 1;
    p.reverse = direction == "reverse";
  } else if (direction == "bidirectional") {
    p.dirs = 2;
  } else {
    return ctx.InvalidArgument("direction must be forward, reverse or bidirectional, got '" + direction + "'");
  }
  p.layout = node.attr_int("layout", 0);
  if (p.layout != 0 && ctx.opset() < 14) {
    return ctx.InvalidArgument("attribute layout exists from opset 14; this model imports opset " +
                               std::to_string(ctx.opset()));
  }
  if (p.layout != 0 && p.layout != 1)
    return ctx.InvalidArgument("layout must be 0 or 1, got " + std::to_string(p.layout));
  if (const Attribute* clip = node.attr("clip"); clip != nullptr) {
    if (clip->kind != Attribute::Kind::kFloat) return ctx.InvalidArgument("attribute clip must be a float");
    if (!(clip->f > 0)) return ctx.InvalidArgument("clip must be positive, got " + std::to_string(clip->f));
    p.has_clip = true;
    p.clip = clip->f;
  }
  if (kind == CellKind::kGru) {
    const int64_t lbr = node.attr_int("linear_before_reset", 0);
    if (lbr != 0 && lbr != 1)
      return ctx.InvalidArgument("linear_before_reset must be 0 or 1, got " + std::to_string(lbr));
    p.linear_before_reset = lbr == 1;
  }
  if (kind == CellKind::kLstm) {
    const int64_t input_forget = node.attr_int("input_forget", 0);
    if (input_forget != 0 && input_forget != 1)
      return ctx.InvalidArgument("input_forget must be 0 or 1, got " + std::to_string(input_forget));
    p.input_forget = input_forget == 1;
  }

  const Tensor& x = ctx.input(0);
  const Tensor& w = ctx.input(1);
  const Tensor& r = ctx.input(2);
  if (x.dtype() != DataType::kFloat32 && x.dtype() != DataType::kFloat64) {
    return ctx.NotSupported("input X has type " + DataTypeName(x.dtype()) +
                            " (float32, float64, float16, bfloat16 only)");
  }
  SPARQ_RETURN_IF_ERROR(
      RequireSameType(ctx, "X", {{1, "W"}, {2, "R"}, {3, "B"}, {5, "initial_h"}, {6, "initial_c"}, {7, "P"}}));
  if (x.rank() != 3) return ctx.InvalidArgument("input X must be 3-D, got shape " + ShapeOf(x));
  if (w.rank() != 3) return ctx.InvalidArgument("input W must be 3-D, got shape " + ShapeOf(w));
  if (r.rank() != 3) return ctx.InvalidArgument("input R must be 3-D, got shape " + ShapeOf(r));
  p.seq = p.layout == 0 ? x.dim(0) : x.dim(1);
  p.batch = p.layout == 0 ? x.dim(1) : x.dim(0);
  p.input = x.dim(2);
  p.hidden = r.dim(2);
  const int64_t hidden_attr = node.attr_int("hidden_size", -1);
  if (node.attr("hidden_size") != nullptr && hidden_attr != p.hidden) {
    return ctx.InvalidArgument("hidden_size is " + std::to_string(hidden_attr) + " but input R has shape " +
                               ShapeOf(r) + " (hidden_size last)");
  }
  if (p.hidden <= 0) return ctx.InvalidArgument("hidden_size must be positive, got " + std::to_string(p.hidden));
  const int64_t rows = spec.gates * p.hidden;
  const char* weights_text = "([num_directions, gates*hidden_size, ...])";
  SPARQ_RETURN_IF_ERROR(CheckShape(ctx, 1, "W", {p.dirs, rows, p.input}, weights_text));
  SPARQ_RETURN_IF_ERROR(CheckShape(ctx, 2, "R", {p.dirs, rows, p.hidden}, weights_text));
  SPARQ_RETURN_IF_ERROR(CheckShape(ctx, 3, "B", {p.dirs, 2 * rows}, "([num_directions, 2*gates*hidden_size])"));
  const Shape state = p.layout == 0 ? Shape{p.dirs, p.batch, p.hidden} : Shape{p.batch, p.dirs, p.hidden};
  const char* state_text = p.layout == 0 ? "([num_directions, batch, hidden_size] at layout 0)"
                                         : "([batch, num_directions, hidden_size] at layout 1)";
  SPARQ_RETURN_IF_ERROR(CheckShape(ctx, 5, "initial_h", state, state_text));
  SPARQ_RETURN_IF_ERROR(CheckShape(ctx, 6, "initial_c", state, state_text));
  SPARQ_RETURN_IF_ERROR(CheckShape(ctx, 7, "P", {p.dirs, 3 * p.hidden}, "([num_directions, 3*hidden_size])"));

  p.seq_lens.assign(static_cast<size_t>(p.batch), p.seq);
  if (ctx.has_input(4)) {
    const Tensor& lens = ctx.input(4);
    if (lens.dtype() != DataType::kInt32 && lens.dtype() != DataType::kInt64) {
      return ctx.InvalidArgument("input sequence_lens has type " + DataTypeName(lens.dtype()) + ", expected int32");
    }
    if (lens.shape() != Shape{p.batch}) {
      return ctx.InvalidArgument("input sequence_lens has shape " + ShapeOf(lens) + ", expected [" +
                                 std::to_string(p.batch) + "] (one length per batch entry)");
    }
    p.seq_lens = lens.ToInt64Vector();
    for (int64_t b = 0; b < p.batch; ++b) {
      const int64_t len = p.seq_lens[static_cast<size_t>(b)];
      if (len < 0 || len > p.seq) {
        return ctx.InvalidArgument("sequence_lens[" + std::to_string(b) + "] is " + std::to_string(len) +
                                   ", outside [0, " + std::to_string(p.seq) + "] (the sequence length of X)");
      }
    }
  }
  SPARQ_ASSIGN_OR_RETURN(p.acts, ReadActivations(ctx, spec, p.dirs));
  return p;
}

// ---------------------------------------------------------------------------
// The recurrence.

template <typename T>
double Dot(const T* a, const T* b, int64_t n) {
  double s = 0;
  for (int64_t i = 0; i < n; ++i) s += static_cast<double>(a[i]) * static_cast<double>(b[i]);
  return s;
}

// Pointers to one direction's weights; biases and peepholes are null when absent.
template <typename T>
struct DirectionWeights {
  const T* w = nullptr;   // [gates*hidden, input]
  const T* r = nullptr;   // [gates*hidden, hidden]
  const T* wb = nullptr;  // [gates*hidden]
  const T* rb = nullptr;  // [gates*hidden]
  const T* p = nullptr;   // [3*hidden], LSTM only
};

// Bias of gate row k (W's and R's summed), 0 without B.
template <typename T>
double Bias(const DirectionWeights<T>& dw, int64_t k) {
  return dw.wb == nullptr ? 0.0 : static_cast<double>(dw.wb[k]) + static_cast<double>(dw.rb[k]);
}

// Runs one (direction, batch entry) through its sequence; h and c hold the
// initial state on entry and the final one on return. x_at(t) is step t's
// input row, y_at(t) where step t's H goes (nullptr: Y not wanted).
template <typename T, typename XAt, typename YAt>
void RunSequence(const Problem& p, const DirectionWeights<T>& dw, const Activation* acts, bool backward, int64_t len,
                 XAt x_at, YAt y_at, std::vector<T>& h, std::vector<T>& c) {
  const int64_t H = p.hidden, I = p.input;
  const auto clip = [&](double v) { return p.has_clip ? std::min(p.clip, std::max(-p.clip, v)) : v; };
  std::vector<T> h_next(static_cast<size_t>(H));
  std::vector<double> gate_a(static_cast<size_t>(H)), gate_b(static_cast<size_t>(H));
  std::vector<T> rh(static_cast<size_t>(H));
  for (int64_t s = 0; s < len; ++s) {
    const int64_t t = backward ? len - 1 - s : s;
    const T* x = x_at(t);
    // Input and recurrent contributions of gate row k, biases included.
    const auto pre = [&](int64_t k) { return Dot(x, dw.w + k * I, I) + Dot(h.data(), dw.r + k * H, H) + Bias(dw, k); };
    switch (p.kind) {
      case CellKind::kRnn:
        for (int64_t k = 0; k < H; ++k) h_next[k] = static_cast<T>(acts[0](clip(pre(k))));
        break;
      case CellKind::kGru: {
        // Rows z [0, H), r [H, 2H), h [2H, 3H).
        for (int64_t k = 0; k < H; ++k) {
          gate_a[k] = acts[0](clip(pre(k)));      // z
          gate_b[k] = acts[0](clip(pre(H + k)));  // r
        }
        if (!p.linear_before_reset)
          for (int64_t k = 0; k < H; ++k) rh[k] = static_cast<T>(gate_b[k] * static_cast<double>(h[k]));
        for (int64_t k = 0; k < H; ++k) {
          const int64_t row = 2 * H + k;
          const double wb = dw.wb == nullptr ? 0.0 : static_cast<double>(dw.wb[row]);
          const double rb = dw.rb == nullptr ? 0.0 : static_cast<double>(dw.rb[row]);
          const double from_x = Dot(x, dw.w + row * I, I) + wb;
          const double from_h = p.linear_before_reset ? gate_b[k] * (Dot(h.data(), dw.r + row * H, H) + rb)
                                                      : Dot(rh.data(), dw.r + row * H, H) + rb;
          const double candidate = acts[1](clip(from_x + from_h));
          const double z = gate_a[k];
          h_next[k] = static_cast<T>((1.0 - z) * candidate + z * static_cast<double>(h[k]));
        }
        break;
      }
      case CellKind::kLstm: {
        // Rows i [0, H), o [H, 2H), f [2H, 3H), c [3H, 4H); peepholes i, o, f.
        const T* pi = dw.p;
        const T* po = dw.p == nullptr ? nullptr : dw.p + H;
        const T* pf = dw.p == nullptr ? nullptr : dw.p + 2 * H;
        for (int64_t k = 0; k < H; ++k) {
          const double c_prev = static_cast<double>(c[k]);
          const double i = acts[0](clip(pre(k) + (pi == nullptr ? 0.0 : static_cast<double>(pi[k]) * c_prev)));
          const double f =
              p.input_forget
                  ? 1.0 - i
                  : acts[0](clip(pre(2 * H + k) + (pf == nullptr ? 0.0 : static_cast<double>(pf[k]) * c_prev)));
          const double cell = acts[1](clip(pre(3 * H + k)));
          const T c_new = static_cast<T>(f * c_prev + i * cell);
          const double o = acts[0](
              clip(pre(H + k) + (po == nullptr ? 0.0 : static_cast<double>(po[k]) * static_cast<double>(c_new))));
          c[k] = c_new;  // row k of c is read only by unit k
          h_next[k] = static_cast<T>(o * acts[2](static_cast<double>(c_new)));
        }
        break;
      }
    }
    h.swap(h_next);
    if (T* y = y_at(t); y != nullptr) std::copy(h.begin(), h.end(), y);
  }
}

template <typename T>
void RunTyped(OpContext& ctx, const Problem& p, Tensor* y, Tensor* y_h, Tensor* y_c) {
  const CellSpec& spec = Spec(p.kind);
  const int64_t S = p.seq, B = p.batch, I = p.input, H = p.hidden, D = p.dirs;
  const int64_t rows = spec.gates * H;
  const T* x = ctx.input(0).data<T>();
  const T* w = ctx.input(1).data<T>();
  const T* r = ctx.input(2).data<T>();
  const T* bias = ctx.has_input(3) ? ctx.input(3).data<T>() : nullptr;
  const T* init_h = ctx.has_input(5) ? ctx.input(5).data<T>() : nullptr;
  const T* init_c = ctx.has_input(6) ? ctx.input(6).data<T>() : nullptr;
  const T* peep = ctx.has_input(7) ? ctx.input(7).data<T>() : nullptr;
  T* y_data = y == nullptr ? nullptr : y->data<T>();
  // Offsets of (d, b)'s state and of X and Y at step t, by layout.
  const auto state_offset = [&](int64_t d, int64_t b) { return (p.layout == 0 ? d * B + b : b * D + d) * H; };
  const int64_t grain = std::max<int64_t>(1, 4096 / std::max<int64_t>(1, S * rows * (I + H)));
  ParallelFor(ctx.pool(), D * B, grain, [&](int64_t begin, int64_t end) {
    for (int64_t job = begin; job < end; ++job) {
      const int64_t d = job / B, b = job % B;
      DirectionWeights<T> dw;
      dw.w = w + d * rows * I;
      dw.r = r + d * rows * H;
      if (bias != nullptr) {
        dw.wb = bias + d * 2 * rows;
        dw.rb = dw.wb + rows;
      }
      if (peep != nullptr) dw.p = peep + d * 3 * H;
      const int64_t so = state_offset(d, b);
      std::vector<T> h(static_cast<size_t>(H), T(0)), c(static_cast<size_t>(H), T(0));
      if (init_h != nullptr) std::copy(init_h + so, init_h + so + H, h.begin());
      if (init_c != nullptr) std::copy(init_c + so, init_c + so + H, c.begin());
      const auto x_at = [&](int64_t t) { return x + (p.layout == 0 ? t * B + b : b * S + t) * I; };
      const auto y_at = [&](int64_t t) -> T* {
        if (y_data == nullptr) return nullptr;
        return y_data + (p.layout == 0 ? (t * D + d) * B + b : (b * S + t) * D + d) * H;
      };
      const bool backward = p.reverse || d == 1;
      const int64_t len = p.seq_lens[static_cast<size_t>(b)];
      RunSequence<T>(p, dw, p.acts.data() + d * spec.acts_per_direction, backward, len, x_at, y_at, h, c);
      if (len == 0) continue;  // Y_h and Y_c stay zero
      if (y_h != nullptr) std::copy(h.begin(), h.end(), y_h->data<T>() + so);
      if (y_c != nullptr) std::copy(c.begin(), c.end(), y_c->data<T>() + so);
    }
  });
}

Status RecurrentKernel(OpContext& ctx, CellKind kind) {
  SPARQ_ASSIGN_OR_RETURN(Problem p, ReadProblem(ctx, kind));
  const DataType type = ctx.input(0).dtype();
  const Shape y_shape =
      p.layout == 0 ? Shape{p.seq, p.dirs, p.batch, p.hidden} : Shape{p.batch, p.seq, p.dirs, p.hidden};
  const Shape state = p.layout == 0 ? Shape{p.dirs, p.batch, p.hidden} : Shape{p.batch, p.dirs, p.hidden};
  // Zero-filled: Y stays 0 past each entry's sequence length, Y_h and Y_c
  // for entries of length 0.
  Tensor y(type, ctx.wants_output(0) ? y_shape : Shape{0});
  Tensor y_h(type, state), y_c(type, state);
  const bool want_c = kind == CellKind::kLstm && ctx.wants_output(2);
  Tensor* y_ptr = ctx.wants_output(0) ? &y : nullptr;
  if (type == DataType::kFloat32)
    RunTyped<float>(ctx, p, y_ptr, &y_h, want_c ? &y_c : nullptr);
  else
    RunTyped<double>(ctx, p, y_ptr, &y_h, want_c ? &y_c : nullptr);
  if (ctx.wants_output(0)) ctx.set_output(0, std::move(y));
  if (ctx.wants_output(1)) ctx.set_output(1, std::move(y_h));
  if (want_c) ctx.set_output(2, std::move(y_c));
  return Status::OK();
}

template <CellKind kKind>
Status Recurrent(OpContext& ctx) {
  SPARQ_RETURN_IF_ERROR(ctx.RequireInputs(1));
  if (IsHalfType(ctx.input(0).dtype()))
    return RunInFloat32(ctx, [](OpContext& c) { return RecurrentKernel(c, kKind); });
  return RecurrentKernel(ctx, kKind);
}

}  // namespace

void RegisterRecurrentOps(KernelRegistry& r) {
  // Opset 7 dropped opset 1's output_sequence; 14 added layout; 22 only adds bfloat16.
  r.Add({"RNN", "", 7, 99, Recurrent<CellKind::kRnn>, "ref"});
  r.Add({"GRU", "", 7, 99, Recurrent<CellKind::kGru>, "ref"});
  r.Add({"LSTM", "", 7, 99, Recurrent<CellKind::kLstm>, "ref"});
}

}  // namespace sparq
