// Resize (opset 11 on) with mode nearest, asymmetric coordinates and floor
// rounding by whole factors on the last two axes of a 4-D tensor (scales
// [1, 1, sh, sw]: the 2x upsampling of YOLO's and PP-OCR's necks), on the
// resize_nearest row: each output row is its source row with every value
// repeated sw times, written sh times. A copy: the reference's bytes, for any
// element type. Anything else runs the reference kernel.
#include <algorithm>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "kernels/cpu/dispatch.h"
#include "kernels/cpu/norm_f32.h"
#include "kernels/registry.h"

namespace sparq {
namespace cpu {

namespace {

// kScaleW > 0: the width factor known at compile time (the 2x of the necks),
// so that the compiler vectorizes the repeat (byte rows of int8 models too);
// 0: a.scale_w.
template <typename T, int kScaleW>
void UpsamplePlanes(const ResizeNearestArgs& a) {
  const T* x = static_cast<const T*>(a.x);
  T* y = static_cast<T*>(a.y);
  const int64_t scale_w = kScaleW > 0 ? kScaleW : a.scale_w, width = a.width;
  const int64_t out_w = width * scale_w;
  for (int64_t p = 0; p < a.planes; ++p) {
    for (int64_t i = 0; i < a.height; ++i) {
      const T* src = x + (p * a.height + i) * width;
      T* dst = y + (p * a.height + i) * a.scale_h * out_w;
      for (int64_t j = 0; j < width; ++j)
        for (int64_t k = 0; k < scale_w; ++k) dst[j * scale_w + k] = src[j];
      for (int64_t r = 1; r < a.scale_h; ++r) std::memcpy(dst + r * out_w, dst, static_cast<size_t>(out_w) * sizeof(T));
    }
  }
}

template <typename T>
void UpsamplePlanes(const ResizeNearestArgs& a) {
  if (a.scale_w == 2) UpsamplePlanes<T, 2>(a);
  else UpsamplePlanes<T, 0>(a);
}

}  // namespace

void ResizeNearestPortable(const ResizeNearestArgs& a) {
  switch (a.elem_size) {
    case 1: UpsamplePlanes<uint8_t>(a); break;
    case 2: UpsamplePlanes<uint16_t>(a); break;
    case 4: UpsamplePlanes<uint32_t>(a); break;
    case 8: UpsamplePlanes<uint64_t>(a); break;
    default: break;  // the caller sends the other sizes to the reference kernel
  }
}

}  // namespace cpu

namespace {

StatusOr<std::shared_ptr<const void>> PrepareRow(const Node&, const std::vector<const Tensor*>&) {
  return std::shared_ptr<const void>(&SelectCpuKernel(CpuOp::kResizeNearest), [](const void*) {});
}
std::string RowKernel(const void* state) { return static_cast<const CpuKernelDef*>(state)->name; }

Status RunResizeNearest(OpContext& ctx) {
  const Node& node = ctx.node();
  if (ctx.opset() < 11 || !ctx.has_input(0) || !ctx.has_input(2) || ctx.has_input(3) || ctx.input(0).rank() != 4)
    return RunReferenceKernel(ctx);
  if (node.attr_string("mode", "nearest") != "nearest" ||
      node.attr_string("coordinate_transformation_mode", "half_pixel") != "asymmetric" ||
      node.attr_string("nearest_mode", "round_prefer_floor") != "floor" || node.attr("axes") != nullptr ||
      node.attr_int("antialias", 0) != 0 || node.attr_string("keep_aspect_ratio_policy", "stretch") != "stretch")
    return RunReferenceKernel(ctx);
  const Tensor& x = ctx.input(0);
  const Tensor& scales = ctx.input(2);
  const size_t elem = DataTypeSize(x.dtype());
  // (16-bit floats too go to the reference, which resizes them in float32.)
  if (scales.dtype() != DataType::kFloat32 || scales.numel() != 4 || (elem != 1 && elem != 2 && elem != 4 && elem != 8) ||
      x.dtype() == DataType::kFloat16 || x.dtype() == DataType::kBFloat16)
    return RunReferenceKernel(ctx);
  const float* s = scales.data<float>();
  const auto sh = static_cast<int64_t>(s[2]), sw = static_cast<int64_t>(s[3]);
  if (s[0] != 1.0f || s[1] != 1.0f || sh < 1 || sw < 1 || s[2] != static_cast<float>(sh) ||
      s[3] != static_cast<float>(sw) || sh > 64 || sw > 64)
    return RunReferenceKernel(ctx);
  Tensor y = ctx.OutputBuffer(0, x.dtype(), {x.dim(0), x.dim(1), x.dim(2) * sh, x.dim(3) * sw});
  const ResizeNearestFn row = static_cast<const CpuKernelDef*>(ctx.prepared())->get<ResizeNearestFn>();
  const int64_t planes = x.dim(0) * x.dim(1), in_plane = x.dim(2) * x.dim(3);
  const auto* src = static_cast<const uint8_t*>(x.raw_data());
  auto* dst = static_cast<uint8_t*>(y.raw_data());
  ParallelFor(ctx.pool(), planes, std::max<int64_t>(1, 16384 / std::max<int64_t>(1, in_plane * sh * sw)),
              [&](int64_t p0, int64_t p1) {
                ResizeNearestArgs a;
                a.x = src + static_cast<size_t>(p0 * in_plane) * elem;
                a.y = dst + static_cast<size_t>(p0 * in_plane * sh * sw) * elem;
                a.planes = p1 - p0, a.height = x.dim(2), a.width = x.dim(3), a.scale_h = sh, a.scale_w = sw;
                a.elem_size = elem;
                row(a);
              });
  ctx.set_output(0, std::move(y));
  return Status::OK();
}

}  // namespace

void RegisterCpuResizeOps(KernelRegistry& r) {
  r.Add({"Resize", "", 11, 99, RunResizeNearest, "resize_nearest", WithoutContext(PrepareRow, RowKernel)});
}

}  // namespace sparq
