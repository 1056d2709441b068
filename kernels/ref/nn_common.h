// Helpers shared by the reference NN operator files (nn_ops.cc, pool.cc).
#pragma once

#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "kernels/op_context.h"
#include "kernels/ref/conv.h"
#include "kernels/registry.h"
#include "sparq/status.h"
#include "sparq/tensor.h"

namespace sparq {

// Registration hooks of pool.cc and einsum.cc, called by RegisterNnOps.
void RegisterPoolOps(KernelRegistry& r);
void RegisterEinsumOps(KernelRegistry& r);

// Runs `fn` on a context whose float16/bfloat16 inputs are converted to
// float32, then converts its float32 outputs back to that 16-bit type (other
// outputs, e.g. int64 indices, pass through). The 16-bit operators compute in
// float32 and round once at the end.
inline Status RunInFloat32(OpContext& ctx, KernelFn fn) {
  std::vector<Tensor> converted(ctx.num_inputs());
  std::vector<const Tensor*> inputs(ctx.num_inputs(), nullptr);
  DataType narrow = DataType::kUndefined;
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    if (!ctx.has_input(i)) continue;
    const Tensor& t = ctx.input(i);
    if (t.dtype() == DataType::kFloat16 || t.dtype() == DataType::kBFloat16) {
      narrow = t.dtype();
      converted[i] = t.ToFloat32();
      inputs[i] = &converted[i];
    } else {
      inputs[i] = &t;
    }
  }
  OpContext inner(ctx.node(), ctx.opset(), std::move(inputs), ctx.pool());
  SPARQ_RETURN_IF_ERROR(fn(inner));
  for (size_t i = 0; i < inner.outputs().size(); ++i) {
    Tensor& t = inner.outputs()[i];
    const bool narrow_back = t.defined() && t.dtype() == DataType::kFloat32 && narrow != DataType::kUndefined;
    ctx.set_output(i, narrow_back ? t.CastTo(narrow) : t);
  }
  return Status::OK();
}

inline bool IsHalfType(DataType t) { return t == DataType::kFloat16 || t == DataType::kBFloat16; }

// Fails unless each listed input that is present has the type of input 0
// (named `first`); `others` pairs an input slot with its name for the message.
inline Status RequireSameType(const OpContext& ctx, const char* first,
                              std::initializer_list<std::pair<size_t, const char*>> others) {
  const DataType want = ctx.input(0).dtype();
  for (const auto& [slot, name] : others) {
    if (ctx.has_input(slot) && ctx.input(slot).dtype() != want) {
      return ctx.InvalidArgument(std::string("input ") + name + " has type " + DataTypeName(ctx.input(slot).dtype()) +
                                 " but input " + first + " has type " + DataTypeName(want));
    }
  }
  return Status::OK();
}

// Reads kernel_shape, strides, dilations, pads and auto_pad of a windowed op
// (a Conv's, a pool's; also for passes that re-run a Conv's geometry).
inline Status ReadWindowAttributes(const Node& node, WindowGeometry* g, AutoPad* auto_pad) {
  g->kernel = node.attr_ints("kernel_shape");
  g->strides = node.attr_ints("strides");
  g->dilations = node.attr_ints("dilations");
  g->pads = node.attr_ints("pads");
  StatusOr<AutoPad> ap = ParseAutoPad(node.attr_string("auto_pad", "NOTSET"));
  if (!ap.ok()) return ap.status().WithContext(node.Describe());
  *auto_pad = *ap;
  return Status::OK();
}
inline Status ReadWindowAttributes(const OpContext& ctx, WindowGeometry* g, AutoPad* auto_pad) {
  return ReadWindowAttributes(ctx.node(), g, auto_pad);
}

}  // namespace sparq
