#include "kernels/cpu/quant_conv_params.h"

#include "kernels/ref/quantize.h"

namespace sparq {
namespace {

int32_t ByteScalar(const Tensor& t) {
  return t.dtype() == DataType::kUInt8 ? static_cast<int32_t>(t.data<uint8_t>()[0])
                                       : static_cast<int32_t>(t.data<int8_t>()[0]);
}

}  // namespace

bool IsByteType(DataType type) { return type == DataType::kUInt8 || type == DataType::kInt8; }

StatusOr<QuantConvParams> ReadQuantConvParams(const Node& node, const std::vector<const Tensor*>& constants,
                                              const std::string& path, bool lut) {
  auto decline = [&](const std::string& why) -> Status {
    return Status::NotSupported(node.Describe() + ": " + path + ": " + why);
  };
  auto constant = [&](size_t i) { return i < constants.size() ? constants[i] : nullptr; };
  auto named = [&](size_t i) { return i < node.inputs.size() && !node.inputs[i].empty(); };
  for (size_t i : {1, 2, 3, 4, 5, 6, 7, 8})
    if (named(i) && constant(i) == nullptr) return decline("input " + std::to_string(i) + " is not a constant");
  if (!named(2) || !named(5) || !named(7)) return decline("zero points must be given");
  const Tensor& w = *constant(3);
  const Tensor &x_scale = *constant(1), &x_zp = *constant(2), &w_scale = *constant(4), &w_zp = *constant(5);
  const Tensor &y_scale = *constant(6), &y_zp = *constant(7);
  if (w.dtype() != DataType::kInt8 || (w.rank() != 4 && w.rank() != 3)) return decline("weights are not 3-D or 4-D int8");
  const std::string auto_pad = node.attr_string("auto_pad", "NOTSET");
  if (auto_pad != "NOTSET") return decline("auto_pad " + auto_pad);
  QuantConvParams q;
  q.one_d = w.rank() == 3;
  q.m = w.dim(0), q.c = w.dim(1), q.kh = w.dim(2), q.kw = q.one_d ? 1 : w.dim(3);
  std::vector<int64_t> strides = node.attr_ints("strides", q.one_d ? std::vector<int64_t>{1} : std::vector<int64_t>{1, 1});
  std::vector<int64_t> dilations =
      node.attr_ints("dilations", q.one_d ? std::vector<int64_t>{1} : std::vector<int64_t>{1, 1});
  std::vector<int64_t> pads = node.attr_ints("pads", q.one_d ? std::vector<int64_t>{0, 0} : std::vector<int64_t>{0, 0, 0, 0});
  std::vector<int64_t> kernel = node.attr_ints("kernel_shape", q.one_d ? std::vector<int64_t>{q.kh} : std::vector<int64_t>{q.kh, q.kw});
  if (q.one_d) {  // [N, C, L] as [N, C, L, 1]: the same bytes, a 2-D convolution of width 1
    if (strides.size() != 1 || dilations.size() != 1 || pads.size() != 2 || kernel != std::vector<int64_t>{q.kh})
      return decline("attributes outside the 1-D path");
    strides = {strides[0], 1}, dilations = {dilations[0], 1}, pads = {pads[0], 0, pads[1], 0};
    kernel = {q.kh, 1};
  }
  if (strides.size() != 2 || dilations.size() != 2 || pads.size() != 4 || kernel != std::vector<int64_t>{q.kh, q.kw})
    return decline("attributes outside the 2-D path");
  q.stride_h = strides[0], q.stride_w = strides[1], q.dil_h = dilations[0], q.dil_w = dilations[1];
  q.pad_t = pads[0], q.pad_l = pads[1], q.pad_b = pads[2], q.pad_r = pads[3];
  for (int64_t v : {q.stride_h, q.stride_w, q.dil_h, q.dil_w})
    if (v < 1) return decline("stride or dilation below 1");
  for (int64_t v : pads)
    if (v < 0) return decline("negative pads");
  if (x_scale.dtype() != DataType::kFloat32 || x_scale.numel() != 1 || y_scale.dtype() != DataType::kFloat32 ||
      y_scale.numel() != 1 || w_scale.dtype() != DataType::kFloat32 ||
      (w_scale.numel() != 1 && w_scale.numel() != q.m)) {
    return decline("scales are not float32 per tensor (w_scale: or per output channel)");
  }
  if (!IsByteType(x_zp.dtype()) || x_zp.numel() != 1 || !IsByteType(y_zp.dtype()) || y_zp.numel() != 1 ||
      w_zp.dtype() != DataType::kInt8 || (w_zp.numel() != 1 && w_zp.numel() != q.m)) {
    return decline("zero points outside the fast path");
  }
  q.x_type = x_zp.dtype(), q.y_type = y_zp.dtype(), q.out_type = q.y_type;
  q.x_zp = ByteScalar(x_zp), q.y_zp = ByteScalar(y_zp);
  for (int64_t o = 0; o < q.m; ++o) {
    q.multiplier.push_back(RequantMultiplier(x_scale.data<float>()[0],
                                             w_scale.data<float>()[w_scale.numel() == 1 ? 0 : o],
                                             y_scale.data<float>()[0]));
  }
  if (named(8)) {
    const Tensor& b = *constant(8);
    if (b.dtype() != DataType::kInt32 || b.numel() != q.m) return decline("B is not int32 with one value per channel");
    q.bias.assign(b.data<int32_t>(), b.data<int32_t>() + q.m);
  }
  if (lut) {
    const Tensor* table = constants.size() == 10 ? constants[9] : nullptr;
    if (table == nullptr || table->numel() != 256 || !IsByteType(table->dtype()))
      return decline("the table is not 256 constant bytes");
    const auto* bytes = static_cast<const uint8_t*>(table->raw_data());
    q.table.assign(bytes, bytes + 256);
    q.out_type = table->dtype();
  }
  return q;
}

}  // namespace sparq
