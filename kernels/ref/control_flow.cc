// If, Loop and Scan: what each runs and how it slices and stacks, per the
// ONNX spec. The subgraphs themselves run through the OpContext's
// SubgraphRunner, which the executor provides (runtime/control_flow.h);
// these kernels hold the semantics: which branch, how many trips, what is
// carried, what is concatenated.
//
//   Loop(M, cond, v0...)          body(i, cond_in, v...) -> (cond_out, v'..., s...)
//     for (i = 0; i < M && cond; ++i) { cond, v = body(i, cond, v) ; scan[k] += s[k] }
//     outputs: v (final)..., stack(scan[k]) along a new axis 0
//
//   Scan(s0..., x...)             body(s..., x_t...) -> (s'..., y_t...)
//     t runs over axis scan_input_axes[j] of every x (backwards where
//     scan_input_directions[j] = 1); y_t stacked along scan_output_axes[k]
//     (in reverse where scan_output_directions[k] = 1)
#include <cstring>
#include <limits>

#include "kernels/op_context.h"
#include "kernels/registry.h"

namespace sparq {
namespace {

SubgraphRunner* Runner(OpContext& ctx, Status* error) {
  SubgraphRunner* r = ctx.subgraphs();
  if (r == nullptr) *error = ctx.NotSupported("runs a subgraph, which needs an executor (no SubgraphRunner given)");
  return r;
}

// The body graph of attribute `name`, or null.
const Graph* Body(const OpContext& ctx, const char* name) {
  const Attribute* a = ctx.node().attr(name);
  return a != nullptr ? a->subgraph.get() : nullptr;
}

// A boolean scalar (any one-element tensor of bool or a number) as a bool.
StatusOr<bool> Truth(const OpContext& ctx, const Tensor& t, const std::string& what) {
  if (!t.defined() || t.numel() != 1) {
    return ctx.InvalidArgument(what + " must hold one value, got shape " +
                               (t.defined() ? ShapeToString(t.shape()) : std::string("(none)")));
  }
  return t.GetAsDouble(0) != 0.0;
}

// Slice `index` of `t` along `axis`, the axis dropped.
Tensor TakeAlong(const Tensor& t, int64_t axis, int64_t index) {
  Shape shape = t.shape();
  int64_t outer = 1, inner = static_cast<int64_t>(DataTypeSize(t.dtype()));
  for (int64_t d = 0; d < axis; ++d) outer *= shape[d];
  for (size_t d = axis + 1; d < shape.size(); ++d) inner *= shape[d];
  const int64_t len = shape[axis];
  shape.erase(shape.begin() + axis);
  Tensor out = Tensor::Uninitialized(t.dtype(), shape);
  auto* dst = static_cast<uint8_t*>(out.raw_data());
  auto* src = static_cast<const uint8_t*>(t.raw_data());
  for (int64_t o = 0; o < outer; ++o) std::memcpy(dst + o * inner, src + (o * len + index) * inner, inner);
  return out;
}

// `parts` (one shape and type) stacked along a new axis `axis`, part t at
// position t (or parts.size() - 1 - t when `reverse`).
StatusOr<Tensor> StackAlong(const OpContext& ctx, const std::vector<Tensor>& parts, int64_t axis, bool reverse,
                            const std::string& what) {
  const Tensor& first = parts[0];
  for (const Tensor& p : parts)
    if (p.dtype() != first.dtype() || p.shape() != first.shape()) {
      return ctx.InvalidArgument(what + " changes from " + DataTypeName(first.dtype()) + ShapeToString(first.shape()) +
                                 " to " + DataTypeName(p.dtype()) + ShapeToString(p.shape()) +
                                 " between iterations; its iterations must stack");
    }
  Shape shape = first.shape();
  int64_t outer = 1, inner = static_cast<int64_t>(DataTypeSize(first.dtype()));
  for (int64_t d = 0; d < axis; ++d) outer *= shape[d];
  for (size_t d = axis; d < shape.size(); ++d) inner *= shape[d];
  const int64_t n = static_cast<int64_t>(parts.size());
  shape.insert(shape.begin() + axis, n);
  Tensor out = Tensor::Uninitialized(first.dtype(), shape);
  auto* dst = static_cast<uint8_t*>(out.raw_data());
  for (int64_t t = 0; t < n; ++t) {
    const int64_t at = reverse ? n - 1 - t : t;
    auto* src = static_cast<const uint8_t*>(parts[t].raw_data());
    for (int64_t o = 0; o < outer; ++o) std::memcpy(dst + (o * n + at) * inner, src + o * inner, inner);
  }
  return out;
}

// The output for a scan output no iteration produced: type from the body's
// declared output, zero along the stacked axis, the other dims where known
// (else it is a 1-D empty tensor).
Tensor EmptyStack(const Graph* body, size_t body_output, int64_t axis) {
  DataType type = DataType::kFloat32;
  Shape shape = {0};
  if (body != nullptr && body_output < body->outputs.size()) {
    const ValueInfo& v = body->outputs[body_output];
    if (v.dtype != DataType::kUndefined) type = v.dtype;
    bool known = v.has_shape;
    for (const Dim& d : v.dims) known = known && d.known();
    if (known && axis >= 0 && axis <= static_cast<int64_t>(v.dims.size())) {
      shape.clear();
      for (const Dim& d : v.dims) shape.push_back(d.value);
      shape.insert(shape.begin() + axis, 0);
    }
  }
  return Tensor(type, shape);
}

Status RunChecked(OpContext& ctx, SubgraphRunner* runner, const char* attribute, const std::vector<Tensor>& inputs,
                  size_t want_outputs, std::vector<Tensor>* outputs) {
  Status st = runner->Run(attribute, inputs, outputs);
  if (!st.ok()) return st.WithContext(ctx.node().Describe() + " " + attribute);
  if (outputs->size() != want_outputs) {
    return ctx.InvalidArgument(std::string(attribute) + " has " + std::to_string(outputs->size()) +
                               " outputs, the node needs " + std::to_string(want_outputs));
  }
  return Status::OK();
}

Status If(OpContext& ctx) {
  Status error;
  SubgraphRunner* runner = Runner(ctx, &error);
  if (runner == nullptr) return error;
  SPARQ_RETURN_IF_ERROR(ctx.RequireInputs(1));
  SPARQ_ASSIGN_OR_RETURN(bool cond, Truth(ctx, ctx.input(0), "the condition"));
  const char* branch = cond ? "then_branch" : "else_branch";
  if (Body(ctx, branch) == nullptr) return ctx.InvalidArgument("has no graph attribute '" + std::string(branch) + "'");
  std::vector<Tensor> outs;
  SPARQ_RETURN_IF_ERROR(RunChecked(ctx, runner, branch, {}, ctx.num_outputs(), &outs));
  for (size_t k = 0; k < outs.size(); ++k) ctx.set_output(k, std::move(outs[k]));
  return Status::OK();
}

Status Loop(OpContext& ctx) {
  Status error;
  SubgraphRunner* runner = Runner(ctx, &error);
  if (runner == nullptr) return error;
  const Graph* body = Body(ctx, "body");
  if (body == nullptr) return ctx.InvalidArgument("has no graph attribute 'body'");
  const size_t n_inputs = ctx.node().inputs.size();
  if (n_inputs < 2) return ctx.InvalidArgument("needs inputs M and cond (each may be \"\")");
  const size_t carried = n_inputs - 2;
  if (ctx.num_outputs() < carried) {
    return ctx.InvalidArgument("has " + std::to_string(carried) + " loop-carried inputs but " +
                               std::to_string(ctx.num_outputs()) + " outputs");
  }
  const size_t scans = ctx.num_outputs() - carried;
  if (body->inputs.size() != carried + 2) {
    return ctx.InvalidArgument("body has " + std::to_string(body->inputs.size()) + " inputs, the node needs " +
                               std::to_string(carried + 2) + " (iteration, condition, " + std::to_string(carried) +
                               " loop-carried)");
  }
  int64_t trips = std::numeric_limits<int64_t>::max();
  if (ctx.has_input(0)) {
    const Tensor& m = ctx.input(0);
    if (m.numel() != 1) return ctx.InvalidArgument("M must hold one value, got shape " + ShapeToString(m.shape()));
    trips = static_cast<int64_t>(m.GetAsDouble(0));
  }
  const bool has_cond = ctx.has_input(1);
  bool cond = true;
  if (has_cond) {
    SPARQ_ASSIGN_OR_RETURN(cond, Truth(ctx, ctx.input(1), "cond"));
  }
  if (!ctx.has_input(0) && !has_cond) return ctx.NotSupported("has neither M nor cond: the loop would never end");

  std::vector<Tensor> state(carried);
  for (size_t k = 0; k < carried; ++k) {
    if (!ctx.has_input(2 + k)) return ctx.NotSupported("loop-carried input " + std::to_string(k) + " is absent");
    state[k] = ctx.input(2 + k);
  }
  std::vector<std::vector<Tensor>> scanned(scans);
  std::vector<Tensor> outs;
  for (int64_t i = 0; i < trips && cond; ++i) {
    std::vector<Tensor> ins;
    ins.reserve(carried + 2);
    ins.push_back(Tensor::Scalar<int64_t>(i));
    ins.push_back(Tensor::Scalar<bool>(cond));
    for (const Tensor& v : state) ins.push_back(v);
    SPARQ_RETURN_IF_ERROR(RunChecked(ctx, runner, "body", ins, 1 + carried + scans, &outs));
    if (has_cond) {
      SPARQ_ASSIGN_OR_RETURN(cond, Truth(ctx, outs[0], "the body's condition output"));
    }
    for (size_t k = 0; k < carried; ++k) state[k] = std::move(outs[1 + k]);
    for (size_t k = 0; k < scans; ++k) scanned[k].push_back(std::move(outs[1 + carried + k]));
  }
  for (size_t k = 0; k < carried; ++k) ctx.set_output(k, std::move(state[k]));
  for (size_t k = 0; k < scans; ++k) {
    if (scanned[k].empty()) {
      ctx.set_output(carried + k, EmptyStack(body, 1 + carried + k, 0));
      continue;
    }
    SPARQ_ASSIGN_OR_RETURN(Tensor stacked,
                           StackAlong(ctx, scanned[k], 0, false, "scan output " + std::to_string(k)));
    ctx.set_output(carried + k, std::move(stacked));
  }
  return Status::OK();
}

// An axis attribute list: `count` entries (default 0), each in [-rank, rank).
StatusOr<std::vector<int64_t>> Axes(const OpContext& ctx, const char* name, size_t count) {
  std::vector<int64_t> axes = ctx.node().attr_ints(name);
  if (axes.empty()) axes.assign(count, 0);
  if (axes.size() != count) {
    return ctx.InvalidArgument(std::string(name) + " has " + std::to_string(axes.size()) + " entries, expected " +
                               std::to_string(count));
  }
  return axes;
}

Status Scan(OpContext& ctx) {
  Status error;
  SubgraphRunner* runner = Runner(ctx, &error);
  if (runner == nullptr) return error;
  const Graph* body = Body(ctx, "body");
  if (body == nullptr) return ctx.InvalidArgument("has no graph attribute 'body'");
  const Attribute* m_attr = ctx.node().attr("num_scan_inputs");
  if (m_attr == nullptr || m_attr->kind != Attribute::Kind::kInt) {
    return ctx.InvalidArgument("needs the int attribute num_scan_inputs");
  }
  const size_t n_inputs = ctx.node().inputs.size();
  if (m_attr->i < 1 || static_cast<size_t>(m_attr->i) > n_inputs) {
    return ctx.InvalidArgument("num_scan_inputs = " + std::to_string(m_attr->i) + " with " +
                               std::to_string(n_inputs) + " inputs");
  }
  const size_t m = static_cast<size_t>(m_attr->i);
  const size_t n = n_inputs - m;  // state variables
  if (ctx.num_outputs() < n) return ctx.InvalidArgument("has fewer outputs than state variables");
  const size_t k_out = ctx.num_outputs() - n;
  if (body->inputs.size() != n + m || body->outputs.size() != n + k_out) {
    return ctx.InvalidArgument("body has " + std::to_string(body->inputs.size()) + " inputs and " +
                               std::to_string(body->outputs.size()) + " outputs, the node needs " +
                               std::to_string(n + m) + " and " + std::to_string(n + k_out));
  }
  SPARQ_ASSIGN_OR_RETURN(std::vector<int64_t> in_axes, Axes(ctx, "scan_input_axes", m));
  std::vector<int64_t> in_dirs = ctx.node().attr_ints("scan_input_directions", std::vector<int64_t>(m, 0));
  SPARQ_ASSIGN_OR_RETURN(std::vector<int64_t> out_axes, Axes(ctx, "scan_output_axes", k_out));
  std::vector<int64_t> out_dirs = ctx.node().attr_ints("scan_output_directions", std::vector<int64_t>(k_out, 0));
  if (in_dirs.size() != m || out_dirs.size() != k_out) {
    return ctx.InvalidArgument("scan_input_directions / scan_output_directions do not match the scan inputs / outputs");
  }
  for (size_t i = 0; i < n_inputs; ++i)
    if (!ctx.has_input(i)) return ctx.InvalidArgument("input " + std::to_string(i) + " is required");

  int64_t length = -1;
  for (size_t j = 0; j < m; ++j) {
    const Tensor& x = ctx.input(n + j);
    const int64_t rank = static_cast<int64_t>(x.rank());
    int64_t axis = in_axes[j] < 0 ? in_axes[j] + rank : in_axes[j];
    if (axis < 0 || axis >= rank) {
      return ctx.InvalidArgument("scan_input_axes[" + std::to_string(j) + "] = " + std::to_string(in_axes[j]) +
                                 " for scan input of shape " + ShapeToString(x.shape()));
    }
    in_axes[j] = axis;
    if (length >= 0 && x.dim(axis) != length) {
      return ctx.InvalidArgument("scan inputs differ in sequence length (" + std::to_string(length) + " vs " +
                                 std::to_string(x.dim(axis)) + ")");
    }
    length = x.dim(axis);
  }

  std::vector<Tensor> state(n);
  for (size_t i = 0; i < n; ++i) state[i] = ctx.input(i);
  std::vector<std::vector<Tensor>> scanned(k_out);
  std::vector<Tensor> outs;
  for (int64_t t = 0; t < length; ++t) {
    std::vector<Tensor> ins = state;
    for (size_t j = 0; j < m; ++j) {
      const int64_t at = in_dirs[j] == 1 ? length - 1 - t : t;
      ins.push_back(TakeAlong(ctx.input(n + j), in_axes[j], at));
    }
    SPARQ_RETURN_IF_ERROR(RunChecked(ctx, runner, "body", ins, n + k_out, &outs));
    for (size_t i = 0; i < n; ++i) state[i] = std::move(outs[i]);
    for (size_t k = 0; k < k_out; ++k) scanned[k].push_back(std::move(outs[n + k]));
  }
  for (size_t i = 0; i < n; ++i) ctx.set_output(i, std::move(state[i]));
  for (size_t k = 0; k < k_out; ++k) {
    if (scanned[k].empty()) {
      ctx.set_output(n + k, EmptyStack(body, n + k, out_axes[k] < 0 ? 0 : out_axes[k]));
      continue;
    }
    const int64_t rank = static_cast<int64_t>(scanned[k][0].rank()) + 1;
    const int64_t axis = out_axes[k] < 0 ? out_axes[k] + rank : out_axes[k];
    if (axis < 0 || axis >= rank) {
      return ctx.InvalidArgument("scan_output_axes[" + std::to_string(k) + "] = " + std::to_string(out_axes[k]) +
                                 " for a scan output of rank " + std::to_string(rank));
    }
    SPARQ_ASSIGN_OR_RETURN(Tensor stacked,
                           StackAlong(ctx, scanned[k], axis, out_dirs[k] == 1, "scan output " + std::to_string(k)));
    ctx.set_output(n + k, std::move(stacked));
  }
  return Status::OK();
}

}  // namespace

void RegisterControlFlowOps(KernelRegistry& r) {
  // If 1..21, Loop 1..21: later opsets widened the types (sequences,
  // optionals, new numbers), not what runs. Scan from 9: opset 8's batch
  // axis and sequence_lens are another op.
  r.Add({"If", "", 1, 99, If, "ref"});
  r.Add({"Loop", "", 1, 99, Loop, "ref"});
  r.Add({"Scan", "", 9, 99, Scan, "ref"});
}

}  // namespace sparq
